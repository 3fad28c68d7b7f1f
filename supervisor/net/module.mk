LIBRARY_DIRS += supervisor/net
# Test tool of the integration suite and scripts/bench-net (drives the library with jail-like children).
PROGRAMS += dome-net-harness
dome-net-harness_SOURCES := tests/integration/net/harness.c
