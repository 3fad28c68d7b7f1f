LIBRARY_DIRS += supervisor/guards
