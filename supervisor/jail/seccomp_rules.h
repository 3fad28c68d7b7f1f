/* The jail's seccomp filter rules (libseccomp). Kept apart from the rest of the jail so the build-time
 * generator links only this file and libseccomp. */
#ifndef DOME_JAIL_SECCOMP_RULES_H
#define DOME_JAIL_SECCOMP_RULES_H

#include <linux/filter.h>

/* The newest x86_64 system call number whose allow/refuse decision was reviewed (file_setattr, Linux
 * 6.17); anything numbered above it is refused with ENOSYS. */
#define JAIL_SECCOMP_REVIEWED_THROUGH 469

/* Build the jail's filter with libseccomp for the native architecture, export it as classic BPF and
 * prepend the newer-syscalls check (JAIL_SECCOMP_REVIEWED_THROUGH)
 * (seccomp(2) SECCOMP_SET_MODE_FILTER, libseccomp seccomp_export_bpf(3)). On success program->filter is a
 * malloc'd array of program->len instructions (the caller frees it) and 0 is returned. On failure returns
 * -errno from libseccomp (-ENOMEM, -EINVAL, -EFAULT; -EIO when the export cannot be read back) and sets
 * *failed_rule to the rule or step that failed ("clone", "socket", "export", ...). */
int jail_seccomp_build(struct sock_fprog *program, const char **failed_rule);

#endif
