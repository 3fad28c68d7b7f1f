# supervisor/anomaly — Sigma detection and correlation rules over journal events (public header anomaly.h,
# docs/anomaly-detection.md).
LIBRARY_DIRS += supervisor/anomaly
