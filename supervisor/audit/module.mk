# supervisor/audit — the audit journal library (public header journal.h, format docs/journal-format.md)
LIBRARY_DIRS += supervisor/audit

# journal-load: a writer that generates load for the fault tests and scripts/bench-journal.
PROGRAMS += journal-load
journal-load_SOURCES := supervisor/audit/tools/journal_load.c
