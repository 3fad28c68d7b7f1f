/* The jail's seccomp filter as libseccomp rules. Compiled at build time by
 * supervisor/jail/generate/seccomp_filter.c into $(BUILD)/gen/jail_seccomp_filter.h (the classic BPF
 * program the jail installs), and at test time by tests/unit/jail to check that the embedded program is
 * the one these rules give.
 *
 * Default action: allow. Refused with EPERM (never killed, so programs see an ordinary error): kernel
 * attack surface (io_uring, native AIO (host-wide fs.aio-max-nr), modify_ldt, bpf, perf_event_open,
 * userfaultfd, keyrings), cross-process inspection (ptrace, process_vm_*, inotify/fanotify watches on the
 * host's shared /usr inodes), the mount API, namespace creation
 * and entry, module and kexec loading, system administration (acct, swap, reboot, syslog, quotactl, clock
 * setting), personality changes, file handles (open_by_handle_at: the "shocker" escape), terminal injection
 * (ioctl TIOCSTI/TIOCLINUX on the low 32 bits, as the kernel compares them) and socket families other than
 * AF_UNIX/AF_INET/AF_INET6. clone3 answers ENOSYS: its flags live in memory seccomp cannot read, and libc
 * then falls back to clone, whose namespace flags are checked. Foreign ABIs (i386, x32) kill the process
 * (bad-arch action). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/jail/seccomp_rules.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static const char *const refused[] = {
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "lookup_dcookie",
    "vhangup",
    "pidfd_getfd",
    "kcmp",
    "uselib",
    "nfsservctl",
    "iopl",
    "ioperm",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "_sysctl",
    "chroot",
    /* Native AIO: contexts count against the host-wide fs.aio-max-nr, which a jail could exhaust. */
    "io_setup",
    "io_submit",
    "io_getevents",
    "io_pgetevents",
    "io_cancel",
    "io_destroy",
    "modify_ldt",
    /* File-event watches: the host-ro image binds the host's own /usr (the same inodes), so a watch there
     * would report, live, what the host and other jails open and run. */
    "inotify_init",
    "inotify_init1",
    "fanotify_init",
};

#if defined(__x86_64__)
/* Numbers 451..JAIL_SECCOMP_REVIEWED_THROUGH were reviewed one by one (Linux 6.6-6.17): cachestat,
 * fchmodat2, map_shadow_stack, futex_wake/wait/requeue, statmount, listmount (mounts of the caller's own
 * namespace), lsm_get_self_attr/set_self_attr/list_modules, mseal, setxattrat/getxattrat/listxattrat/
 * removexattrat, file_getattr/file_setattr are allowed; open_tree_attr (the mount API) is refused. */
static const struct {
  const char *name;
  int number;
} refused_by_number[] = {{"open_tree_attr", 467}};
#else
#error "the jail's seccomp rules list x86_64 syscall numbers: review them for this architecture"
#endif

/* Prepended to libseccomp's program: a native-ABI call numbered above the newest reviewed one answers
 * ENOSYS (so libc falls back as on an older kernel) instead of reaching a syscall nobody reviewed; other
 * ABIs (x32 numbers, i386) go on to libseccomp's program, which kills them. Jump offsets are relative to
 * the next instruction, so prepending leaves libseccomp's own jumps intact. */
static const struct sock_filter newer_syscalls_prefix[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u /* __X32_SYSCALL_BIT */, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, JAIL_SECCOMP_REVIEWED_THROUGH, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
};

int jail_seccomp_build(struct sock_fprog *program, const char **failed_rule) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  const char *step = "seccomp_init";
  int r = ctx ? 0 : -ENOMEM;
  if (r == 0) {
    step = "bad-arch action";
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  }
  if (r == 0) {
    /* A binary tree over syscall numbers: a handful of comparisons per syscall instead of a linear scan
     * of the refused list (libseccomp >= 2.5, seccomp_attr_set(3) SCMP_FLTATR_CTL_OPTIMIZE). */
    step = "optimize";
    r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  }
  if (r == 0) {
    const char *failed = "";
    for (size_t i = 0; i < sizeof refused / sizeof refused[0] && r == 0; i++) {
      int nr = seccomp_syscall_resolve_name(refused[i]);
      if (nr == __NR_SCMP_ERROR) continue;
      r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
      failed = refused[i];
    }
    step = failed;
  }
  /* System calls newer than libseccomp's table (x86_64 numbers from the kernel's syscall_64.tbl):
   * refused ones by number; everything above the newest reviewed number is refused by the prefix below. */
  for (size_t i = 0; i < sizeof refused_by_number / sizeof refused_by_number[0] && r == 0; i++) {
    step = refused_by_number[i].name;
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), refused_by_number[i].number, 0);
  }
  /* clone: any namespace flag => EPERM. One rule per flag (rules of a syscall are OR-ed). */
  static const unsigned long flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
                                        CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0] && r == 0; i++) {
    step = "clone";
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i], flags[i]));
  }
  if (r == 0) {
    step = "clone3";
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  }
  /* ioctl(fd, TIOCSTI|TIOCLINUX): the kernel compares the request as 32 bits, so mask the upper half. */
  static const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX};
  for (size_t i = 0; i < 2 && r == 0; i++) {
    step = "ioctl";
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ioctls[i]));
  }
  /* socket families: allow AF_UNIX (1), AF_INET (2), AF_INET6 (10); refuse 0, 3..9, > 10. */
  static const int socket_calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};
  for (size_t i = 0; i < 2 && r == 0; i++) {
    step = "socket";
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), socket_calls[i], 1, SCMP_A0(SCMP_CMP_EQ, 0));
    for (int family = 3; family <= 9 && r == 0; family++)
      r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), socket_calls[i], 1, SCMP_A0(SCMP_CMP_EQ, family));
    if (r == 0)
      r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), socket_calls[i], 1, SCMP_A0(SCMP_CMP_GT, 10));
  }
  /* personality: refuse the flags that weaken the address space (ASLR off, page zero mapped, READ implies
   * EXEC, legacy layouts). One rule per flag: libseccomp compares an argument once per rule. Plain
   * PER_LINUX / PER_LINUX32 switches stay allowed. */
  static const unsigned long persona_flags[] = {
      0x0040000 /* ADDR_NO_RANDOMIZE */, 0x0100000 /* MMAP_PAGE_ZERO */,   0x0200000 /* ADDR_COMPAT_LAYOUT */,
      0x0400000 /* READ_IMPLIES_EXEC */, 0x0800000 /* ADDR_LIMIT_32BIT */, 0x8000000 /* ADDR_LIMIT_3GB */};
  for (size_t i = 0; i < sizeof persona_flags / sizeof persona_flags[0] && r == 0; i++) {
    step = "personality";
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, persona_flags[i], persona_flags[i]));
  }
  if (r == 0) {
    step = "export";
    int fd = memfd_create("dome-seccomp", MFD_CLOEXEC);
    r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
    if (r == 0) {
      off_t size = lseek(fd, 0, SEEK_END);
      struct sock_filter *filter = size > 0 ? malloc((size_t)size) : NULL;
      if (!filter || pread(fd, filter, (size_t)size, 0) != size) {
        r = -EIO;
        free(filter);
      } else {
        size_t prefix = sizeof newer_syscalls_prefix / sizeof newer_syscalls_prefix[0];
        size_t count = (size_t)size / sizeof(struct sock_filter);
        struct sock_filter *whole = malloc((prefix + count) * sizeof *whole);
        if (whole == NULL) {
          r = -ENOMEM;
        } else {
          memcpy(whole, newer_syscalls_prefix, sizeof newer_syscalls_prefix);
          memcpy(whole + prefix, filter, count * sizeof *filter);
          program->len = (unsigned short)(prefix + count);
          program->filter = whole;
        }
        free(filter);
      }
    }
    if (fd >= 0) close(fd);
  }
  if (ctx) seccomp_release(ctx);
  if (r < 0) *failed_rule = step;
  return r;
}
