LIBRARY_DIRS += supervisor/kernel
