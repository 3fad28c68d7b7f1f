LIBRARY_DIRS += supervisor/net
# libnftables is not in the Makefile's PACKAGES yet (asked of the lead); link it into every program.
LDLIBS_COMMON += $(shell pkg-config --libs libnftables 2>/dev/null || echo -lnftables)
# Test tool of the integration suite and scripts/bench-net (drives the library with jail-like children).
PROGRAMS += dome-net-harness
dome-net-harness_SOURCES := tests/integration/net/harness.c
