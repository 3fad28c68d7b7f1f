# supervisor/replay — simulation of candidate rules against the journal and replay of jailed executions
# (public header replay.h, docs/simulate-replay.md).
LIBRARY_DIRS += supervisor/replay
