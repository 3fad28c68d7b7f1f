# supervisor/blob — the content-addressed blob store beside the journal, with quotas per owner and in
# total (public header blob.h, docs/simulate-replay.md).
LIBRARY_DIRS += supervisor/blob
