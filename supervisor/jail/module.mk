LIBRARY_DIRS += supervisor/jail
# Paths are built into fixed buffers sized for the kernel's cgroup/mount paths; truncation is bounded.
supervisor_jail_CFLAGS := -Wno-format-truncation
