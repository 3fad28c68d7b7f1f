# dome-gateway-harness: drives supervisor/gateway against a live MCP backend (tests/gateway/test_gateway,
# scripts/bench-gateway).
PROGRAMS += dome-gateway-harness
dome-gateway-harness_SOURCES := tests/gateway/harness.c tests/gateway/serve.c
