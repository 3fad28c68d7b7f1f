LIBRARY_DIRS += supervisor/dlopen
