LIBRARY_DIRS += policy/entities
