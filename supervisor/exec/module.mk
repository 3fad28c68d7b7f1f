# supervisor/exec — the one execution pipeline: run an agent's program in a jail under its rules and
# write its exec.* records to a sink (public header exec.h, docs/journal-format.md).
LIBRARY_DIRS += supervisor/exec
