LIBRARY_DIRS += policy/syntax
