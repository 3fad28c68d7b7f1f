LIBRARY_DIRS += policy/tool_input
