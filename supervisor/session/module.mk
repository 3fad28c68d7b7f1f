# supervisor/session — what a sandbox session adds to an execution: the Jupyter client (ZeroMQ, HMAC
# signatures), the launcher of a session's jail and its process runner, the file operations of the file
# tools, the table of live sessions (public header session.h, docs/sessions.md).
LIBRARY_DIRS += supervisor/session
