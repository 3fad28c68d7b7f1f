LIBRARY_DIRS += policy/extensions
