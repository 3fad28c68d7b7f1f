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
