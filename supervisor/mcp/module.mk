LIBRARY_DIRS += supervisor/mcp
