LIBRARY_DIRS += supervisor/common
