# dome-fleet-tool: copies a fleet's audit stream (altering or dropping chosen events) and publishes raw
# messages, so that tests/fleet/test_fleet can check that `dome audit verify --fleet` finds tampering.
PROGRAMS += dome-fleet-tool
dome-fleet-tool_SOURCES := tests/fleet/fleet_tool.c
