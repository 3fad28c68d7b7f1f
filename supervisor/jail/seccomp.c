/* The jail's seccomp filter: the classic BPF program generated at build time from seccomp_rules.c (so
 * starting a jail neither links nor runs libseccomp), installed by the child with seccomp(2) after clone3.
 *
 * Default action: allow. Refused with EPERM (never killed, so programs see an ordinary error): kernel
 * attack surface (io_uring, native AIO (host-wide fs.aio-max-nr), modify_ldt, bpf, perf_event_open,
 * userfaultfd, keyrings), cross-process inspection (ptrace, process_vm_*), the mount API, namespace creation
 * and entry, module and kexec loading, system administration (acct, swap, reboot, syslog, quotactl, clock
 * setting), personality changes, file handles (open_by_handle_at: the "shocker" escape), terminal injection
 * (ioctl TIOCSTI/TIOCLINUX on the low 32 bits, as the kernel compares them) and socket families other than
 * AF_UNIX/AF_INET/AF_INET6. clone3 answers ENOSYS: its flags live in memory seccomp cannot read, and libc
 * then falls back to clone, whose namespace flags are checked. Foreign ABIs (i386, x32) kill the process
 * (bad-arch action). */
#include <stddef.h>

#include "jail_seccomp_filter.h" /* $(BUILD)/gen: static const struct sock_filter jail_seccomp_filter[] */
#include "supervisor/jail/internal.h"

int jail_seccomp_program(const struct sock_fprog **result, dome_error *err) {
  (void)err;
  static const struct sock_fprog program = {
      .len = (unsigned short)(sizeof jail_seccomp_filter / sizeof jail_seccomp_filter[0]),
      .filter = (struct sock_filter *)jail_seccomp_filter};
  *result = &program;
  return 0;
}
