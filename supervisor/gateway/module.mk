LIBRARY_DIRS += supervisor/gateway
