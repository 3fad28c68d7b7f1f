LIBRARY_DIRS += policy/eval
