# supervisor/anomaly — Sigma detection and correlation rules over journal events (public header anomaly.h,
# docs/anomaly-detection.md).
LIBRARY_DIRS += supervisor/anomaly

# anomaly-bench: the engine's throughput over a synthetic journal (scripts/bench-anomaly).
PROGRAMS += anomaly-bench
anomaly-bench_SOURCES := supervisor/anomaly/tools/anomaly_bench.c
