# tests/kernel: dome-kernel-probe, the scenario runner of the kernel-enforcement suites (host and VM).
PROGRAMS += dome-kernel-probe
dome-kernel-probe_SOURCES := $(wildcard tests/kernel/probe*.c)
