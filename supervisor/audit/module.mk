# supervisor/audit — the audit journal library (public header journal.h, format docs/journal-format.md)
LIBRARY_DIRS += supervisor/audit

# journal-load: a writer that generates load for the fault tests and scripts/bench-journal.
PROGRAMS += journal-load
journal-load_SOURCES := supervisor/audit/tools/journal_load.c

# Test hooks (fault injection, see supervisor/audit/commit.c): built unless TEST_HOOKS=0, which a
# packaged build sets; the hook only acts when the environment of the process names a fault file.
TEST_HOOKS ?= 1
ifeq ($(TEST_HOOKS),1)
supervisor_audit_CFLAGS += -DDOME_TEST_HOOKS
endif
