# dome-fleet-tool: copies a fleet's audit stream (altering or dropping chosen events) and publishes raw
# messages, so that tests/fleet/test_fleet can check that `dome audit verify --fleet` finds tampering.
PROGRAMS += dome-fleet-tool
dome-fleet-tool_SOURCES := tests/fleet/fleet_tool.c
# It calls nats.c directly, functions dome does not use among them: linked with libnats, not through
# supervisor/dlopen's forwarders.
dome-fleet-tool_LDLIBS := $(shell pkg-config --libs libnats 2>/dev/null)
