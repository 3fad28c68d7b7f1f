# tests/bench: dome-mcp-bench, the C MCP client of the execute_code benchmark (scripts/bench-pool): libcurl
# over one kept-alive connection per client, so the client's own cost stays out of the figures.
PROGRAMS += dome-mcp-bench
dome-mcp-bench_SOURCES := tests/bench/mcp_bench.c
