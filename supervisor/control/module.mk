LIBRARY_DIRS += supervisor/control
