# tests/bench: dome-mcp-bench, the C MCP client of the execute_code benchmark (scripts/bench-pool): libcurl
# over one kept-alive connection per client, so the client's own cost stays out of the figures.
PROGRAMS += dome-mcp-bench
dome-mcp-bench_SOURCES := tests/bench/mcp_bench.c
# dome-jail-bench: the jail's part of a call, fresh against prepared (scripts/bench-pool), and the refill rate.
PROGRAMS += dome-jail-bench
dome-jail-bench_SOURCES := tests/bench/jail_bench.c
