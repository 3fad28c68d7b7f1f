LIBRARY_DIRS += supervisor/jail
# Paths are built into fixed buffers sized for the kernel's cgroup/mount paths; truncation is bounded.
supervisor_jail_CFLAGS := -Wno-format-truncation

# The seccomp filter is compiled from seccomp_rules.c at build time (supervisor/jail/generate/) into a
# header that seccomp.c embeds; tests/unit/jail/test_seccomp_filter checks the two agree.
$(BUILD)/seccomp-filter-generate: supervisor/jail/generate/seccomp_filter.c supervisor/jail/seccomp_rules.c supervisor/jail/seccomp_rules.h
	@mkdir -p $(@D)
	$(CC) -std=c17 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I. -o $@ supervisor/jail/generate/seccomp_filter.c supervisor/jail/seccomp_rules.c -lseccomp

$(BUILD)/gen/jail_seccomp_filter.h: $(BUILD)/seccomp-filter-generate
	@mkdir -p $(@D)
	$(BUILD)/seccomp-filter-generate $@.tmp && mv $@.tmp $@

GENERATED += $(BUILD)/gen/jail_seccomp_filter.h

# The waiting program of a prepared jail's Python interpreter, embedded as a C string (comment lines
# dropped). Its first line, a comment, names it in the interpreter's /proc/PID/cmdline, so that a process
# list (and the tests' check for leftover jails, tests/mcp/lib/harness.mjs) can tell it apart.
$(BUILD)/gen/jail_python_bootstrap.h: supervisor/jail/python_bootstrap.py
	@mkdir -p $(@D)
	{ printf 'static const char jail_python_bootstrap[] =\n'; printf '    "#dome: a prepared interpreter waiting for its call\\n"\n'; grep -v '^ *#' $< | sed 's/\\/\\\\/g; s/"/\\"/g; s/^/    "/; s/$$/\\n"/'; printf ';\n'; } > $@.tmp && mv $@.tmp $@

GENERATED += $(BUILD)/gen/jail_python_bootstrap.h
