/* Hostile probes run inside a `dome run` jail by tests/escape/test_newcomer_findings (built static by the
 * test and copied in through --workspace). Each line: `<name> OK 0` or `<name> refused <errno>`.
 *   hostile syscalls   privileged and kernel-surface calls the suite expects refused
 *   hostile tiocsti    ioctl(TIOCSTI/TIOCLINUX) on fds 0..2, with bits set above the low 32
 *   hostile aio N      reserve up to N kernel AIO events (io_setup), print the count, then sleep */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long r) {
  printf("%s %s %d\n", name, r >= 0 ? "OK" : "refused", r >= 0 ? 0 : errno);
  fflush(stdout);
}

static int syscalls(void) {
  report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
  report("chroot", chroot("/tmp"));
  report("unshare_mnt", unshare(CLONE_NEWNS));
  report("unshare_pid", unshare(CLONE_NEWPID));
  report("unshare_time", unshare(0x80));
  report("unshare_cgroup", unshare(CLONE_NEWCGROUP));
  report("unshare_ipc", unshare(CLONE_NEWIPC));
  report("unshare_uts", unshare(CLONE_NEWUTS));
  struct clone_args args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
  long child = syscall(SYS_clone3, &args, sizeof args);
  if (child == 0) _exit(0);
  report("clone3_newuser", child);
  report("socket_vsock", socket(40, SOCK_STREAM, 0));
  report("socket_alg", socket(38, SOCK_SEQPACKET, 0));
  report("socket_key", socket(15, SOCK_RAW, 2));
  report("socket_raw_inet", socket(AF_INET, SOCK_RAW, 1));
  report("socket_netlink_high_bits", syscall(SYS_socket, 0x100000010L, SOCK_RAW, 0));
  report("socket_xdp", socket(44, SOCK_RAW, 0));
  report("process_vm_writev", syscall(SYS_process_vm_writev, 1, NULL, 0, NULL, 0, 0));
  report("ptrace_seize_parent", syscall(SYS_ptrace, 0x4206, getppid(), 0, 0));
  report("kcmp", syscall(SYS_kcmp, getpid(), 1, 0, 0, 0));
  report("add_key", syscall(SYS_add_key, "user", "x", "y", 1, -3));
  report("finit_module", syscall(SYS_finit_module, 0, "", 0));
  report("kexec_file_load", syscall(SYS_kexec_file_load, 0, 0, 0, "", 0));
  report("reboot", syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL));
  report("swapon", syscall(SYS_swapon, "/tmp/x", 0));
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  report("clock_settime", clock_settime(CLOCK_REALTIME, &ts));
  report("sethostname", sethostname("evil", 4));
  report("mknod_char_device", mknod("/tmp/mem", S_IFCHR | 0666, makedev(1, 1)));
  report("fsopen", syscall(430, "tmpfs", 0));
  report("open_tree", syscall(428, AT_FDCWD, "/usr", 1));
  report("move_mount", syscall(429, -1, "", AT_FDCWD, "/tmp", 0));
  report("mount_setattr", syscall(442, AT_FDCWD, "/", 0, NULL, 0));
  report("setgroups", setgroups(0, NULL));
  report("iopl", syscall(SYS_iopl, 3));
  report("syslog", syscall(SYS_syslog, 3, NULL, 0));
  report("pidfd_getfd", syscall(438, 0, 0, 0));
  report("io_uring_enter", syscall(426, 0, 0, 0, 0, NULL, 0));
  report("prctl_set_mm", prctl(PR_SET_MM, 8, 0, 0, 0));
  report("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/usr", NULL, NULL, 0));
  report("open_dev_tty", open("/dev/tty", O_RDWR));
  return 0;
}

static int tiocsti(void) {
  char c = 'x';
  const unsigned long requests[] = {0x5412ul, 0x5412ul | (1ul << 32), 0x5412ul | 0xffffffff00000000ul,
                                    0x541Cul, 0x541Cul | (1ul << 40)};
  for (int fd = 0; fd < 3; fd++)
    for (unsigned i = 0; i < sizeof requests / sizeof requests[0]; i++) {
      char name[64];
      snprintf(name, sizeof name, "ioctl_fd%d_%lx", fd, requests[i]);
      report(name, syscall(SYS_ioctl, fd, requests[i], &c));
    }
  return 0;
}

static int aio(long wanted) {
  long held = 0;
  for (long n = 32768; n >= 1 && held < wanted; n /= 2)
    for (;;) {
      unsigned long context = 0;
      if (held + n > wanted || syscall(SYS_io_setup, n, &context) != 0) break;
      held += n;
    }
  printf("aio held %ld errno %d\nREADY\n", held, errno);
  fflush(stdout);
  sleep(4);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "syscalls") == 0) return syscalls();
  if (strcmp(argv[1], "tiocsti") == 0) return tiocsti();
  if (strcmp(argv[1], "aio") == 0) return aio(argc > 2 ? atol(argv[2]) : 65536);
  return 2;
}
