LIBRARY_DIRS += policy/validate
