# dome-replay-gen: writes journals in the record shapes docs/simulate-replay.md documents (decisions decided
# by the Cedar engine under a given policy, bulk load for scripts/bench-simulate, recorded executions).
PROGRAMS += dome-replay-gen
dome-replay-gen_SOURCES := tests/replay/gen.c
