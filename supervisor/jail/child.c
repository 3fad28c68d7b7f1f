/* The child side of clone3(): from "namespaces exist" to execve(). Runs in a copy of a possibly
 * multi-threaded process, so it only issues system calls and uses the string functions of libc: no
 * malloc, no stdio, no locks. Everything it needs was prepared by the parent in struct jail_plan.
 *
 * Order and why:
 *  1. what needs no ids (capabilities in the new user namespace suffice): the network namespace helper
 *     started (or, when clone3 made the namespace, loopback up), signal dispositions, hostname, mounts
 *     made private; meanwhile the parent writes uid_map/gid_map. Then wait for SYNC_GO: the ids are
 *     mapped.
 *  2. mounts in the new mount namespace, assembled under JAIL_STAGING.
 *  3. wait for the second SYNC_GO, which brings the v1 cgroup leaves the parent made meanwhile (we join
 *     them); the parent has placed us in the cgroup2 leaf if needed and run the
 *     on_namespaces_ready hook; new cgroup namespace (rooted at the leaves); a prepared jail
 *     (jail_prepare) stops here until its call arrives (receive_call); workspace files (charged to
 *     the jail); pivot_root: the host's tree is detached entirely, so no path (and no "..") leads back.
 *  4. rlimits, new session, the helper's network namespace joined, stdio, close every other fd (a leaked
 *     host fd is the CVE-2024-21626 escape), Landlock ruleset, capabilities and securebits, no_new_privs,
 *     Landlock, seccomp last (it refuses the mount and namespace calls used above).
 *  5. fork: the child execs the program, this process stays as the jail's init (run_init). */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"
#include "supervisor/jail/landlock-abi.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

#define STAGED(p) JAIL_STAGING p

#ifndef P_PIDFD
#define P_PIDFD 3 /* waitid(2): glibc < 2.36 */
#endif

/* ---- failure reporting ---- */

static void append(char *buffer, size_t size, const char *text) {
  size_t used = strlen(buffer);
  if (used + 1 >= size) return;
  size_t n = strlen(text);
  if (n > size - used - 1) n = size - used - 1;
  memcpy(buffer + used, text, n);
  buffer[used + n] = '\0';
}

/* Send "step `detail`" with errno to the parent and exit 127 (as a shell does for a missing program). */
__attribute__((noreturn)) static void fail(const struct jail_plan *plan, int errno_value, const char *step,
                                           const char *detail) {
  struct jail_sync_message message;
  memset(&message, 0, sizeof message);
  message.kind = SYNC_ERROR;
  message.errno_value = errno_value;
  append(message.text, sizeof message.text, step);
  if (detail) {
    append(message.text, sizeof message.text, " `");
    /* paths in the staging view are reported as the jail sees them */
    if (strncmp(detail, JAIL_STAGING "/", sizeof JAIL_STAGING) == 0) detail += sizeof JAIL_STAGING - 1;
    append(message.text, sizeof message.text, detail);
    append(message.text, sizeof message.text, "`");
  }
  send(plan->sync_fd, &message, sizeof message, MSG_NOSIGNAL);
  _exit(127);
}

/* ---- the network namespace, made beside the mounts ----
 *
 * A network namespace costs about half a millisecond of kernel work (every protocol's per-namespace
 * tables), more than all of our mounts together. Unless an on_namespaces_ready hook needs the namespace
 * while we still assemble, clone3 leaves us in the supervisor's network namespace and we start, first
 * thing, a helper process that shares our memory and fd table (CLONE_VM | CLONE_FILES): it makes the
 * namespace (owned by the jail's user namespace, as if clone3 had), brings `lo` up and opens the
 * namespace, while we build the mounts and the supervisor makes the cgroup leaves. We join it (setns)
 * after pivot_root, while we still hold CAP_SYS_ADMIN and before any fd is closed, long before anything
 * of the program exists; a failure to make or join it fails the run. The helper runs on its own stack and
 * issues only direct system calls (it shares our thread-local storage, so not even errno is written, and
 * it is not instrumented by the sanitizers, whose per-thread state it would share). What it saves is in
 * docs/architecture.md, "Start-up cost".
 *
 * The helper took pid 2 of the jail: once it is reaped, ns_last_pid (opened before /proc/sys turned
 * read-only) is set back so that the program is pid 2, as without a helper. */
struct network_helper {
  int namespace_fd; /* the namespace, opened through /proc/self/ns/net; -1 until then */
  int error;        /* errno of the failed step */
  const char *step;
  int pidfd;
  int last_pid_fd; /* /proc/sys/kernel/ns_last_pid of the jail, opened writable */
  struct ifreq loopback;
};
static struct network_helper network_helper = {.namespace_fd = -1, .pidfd = -1, .last_pid_fd = -1};
static char network_helper_stack[16384] __attribute__((aligned(64)));

/* A system call without libc: returns the result or -errno (x86_64 convention, the only architecture the
 * seccomp rules are written for). */
static inline long direct_syscall(long number, long first, long second, long third) {
  long result;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(first), "S"(second), "d"(third)
                   : "rcx", "r11", "memory");
  return result;
}

/* A new network namespace has only `lo`, and it is down: bring it up (SIOCSIFFLAGS; no netlink library,
 * no allocation and direct system calls only, so that the network namespace helper runs it as well as the
 * child). `request`: zeroed but for ifr_name "lo". Returns 0, or -errno with *step naming what failed. Any
 * other interface is the on_namespaces_ready hook's business. */
__attribute__((no_sanitize_address)) static long loopback_up(struct ifreq *request, const char **step) {
  long socket_fd = direct_syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (socket_fd < 0) {
    *step = "socket for loopback";
    return socket_fd;
  }
  *step = "read flags of `lo`";
  long r = direct_syscall(SYS_ioctl, socket_fd, SIOCGIFFLAGS, (long)request);
  if (r == 0) {
    *step = "bring up `lo`";
    request->ifr_flags |= IFF_UP;
    r = direct_syscall(SYS_ioctl, socket_fd, SIOCSIFFLAGS, (long)request);
  }
  direct_syscall(SYS_close, socket_fd, 0, 0);
  return r;
}

static void loopback_request(struct ifreq *request) {
  memset(request, 0, sizeof *request);
  memcpy(request->ifr_name, "lo", 3);
}

__attribute__((no_sanitize_address)) static int network_helper_failed(long result, const char *step) {
  network_helper.error = (int)-result;
  network_helper.step = step;
  return 1;
}

__attribute__((no_sanitize_address)) static int make_network_namespace(void *unused) {
  (void)unused;
  struct network_helper *h = &network_helper;
  long r = direct_syscall(SYS_unshare, CLONE_NEWNET, 0, 0);
  if (r < 0) return network_helper_failed(r, "create network namespace");
  const char *step = "";
  if ((r = loopback_up(&h->loopback, &step)) < 0) return network_helper_failed(r, step);
  r = direct_syscall(SYS_open, (long)"/proc/self/ns/net", O_RDONLY | O_CLOEXEC, 0);
  if (r < 0) return network_helper_failed(r, "open the network namespace");
  h->namespace_fd = (int)r;
  return 0;
}

static void start_network_helper(const struct jail_plan *plan) {
  loopback_request(&network_helper.loopback); /* here: the helper calls no libc function */
  /* exit_signal 0: nobody is signalled; join_network_namespace waits through the pidfd. */
  if (clone(make_network_namespace, network_helper_stack + sizeof network_helper_stack,
            CLONE_VM | CLONE_FILES | CLONE_PIDFD, NULL, &network_helper.pidfd) < 0)
    fail(plan, errno, "start the network namespace helper", NULL);
}

static void join_network_namespace(const struct jail_plan *plan) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  if (waitid((idtype_t)P_PIDFD, (id_t)network_helper.pidfd, &info, WEXITED | __WALL) < 0)
    fail(plan, errno, "wait for the network namespace helper", NULL);
  close(network_helper.pidfd);
  if (info.si_code != CLD_EXITED) fail(plan, EIO, "network namespace helper killed by a signal", NULL);
  if (info.si_status != 0 || network_helper.namespace_fd < 0)
    fail(plan, network_helper.error ? network_helper.error : EIO,
         network_helper.step ? network_helper.step : "network namespace helper", NULL);
  if (setns(network_helper.namespace_fd, CLONE_NEWNET) < 0)
    fail(plan, errno, "join the network namespace", NULL);
  close(network_helper.namespace_fd);
  if (write(network_helper.last_pid_fd, "1", 1) != 1) fail(plan, errno, "reset ns_last_pid", NULL);
  close(network_helper.last_pid_fd);
}

static int mount_setattr_path(const char *path, unsigned flags, uint64_t set) {
  struct mount_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.attr_set = set;
  return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof attr);
}

/* ---- file system ---- */

static void write_file(const struct jail_plan *plan, const struct jail_plan_entry *e) {
  int fd = open(e->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e->mode ? e->mode : 0644);
  if (fd < 0) fail(plan, errno, "create file", e->path);
  const char *p = e->data;
  size_t left = e->length;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(plan, n < 0 ? errno : ENOSPC, "write file", e->path);
    p += n;
    left -= (size_t)n;
  }
  close(fd);
}

static void apply_entries(const struct jail_plan *plan, const struct jail_plan_entry *entries, size_t count) {
  for (size_t i = 0; i < count; i++) {
    const struct jail_plan_entry *e = &entries[i];
    switch (e->kind) {
      case PLAN_DIR:
        if (mkdir(e->path, e->mode ? e->mode : 0755) < 0 && errno != EEXIST)
          fail(plan, errno, "mkdir", e->path);
        break;
      case PLAN_SYMLINK:
        if (symlink(e->target, e->path) < 0) fail(plan, errno, "symlink", e->path);
        break;
      case PLAN_FILE:
        write_file(plan, e);
        break;
    }
  }
}

static void bind_readonly(const struct jail_plan *plan, const char *source, const char *target) {
  if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0) fail(plan, errno, "bind mount", target);
  if (mount_setattr_path(target, AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) < 0)
    fail(plan, errno, "make read-only", target);
}

static void touch(const struct jail_plan *plan, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(plan, errno, "create mount point", path);
  close(fd);
}

static void setup_dev(const struct jail_plan *plan) {
  if (mount("tmpfs", STAGED("/dev"), "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755,nr_inodes=64") < 0)
    fail(plan, errno, "mount tmpfs", STAGED("/dev"));
  /* Device nodes cannot be created in a user namespace: bind the host's few harmless ones. */
  static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
    char source[32] = "/dev/", target[64] = STAGED("/dev/");
    append(source, sizeof source, devices[i]);
    append(target, sizeof target, devices[i]);
    touch(plan, target);
    if (mount(source, target, NULL, MS_BIND, NULL) < 0) fail(plan, errno, "bind mount", target);
  }
  /* nosuid, noexec for the device binds in one call (they stay writable: /dev/null, /dev/tty) */
  if (mount_setattr_path(STAGED("/dev"), AT_RECURSIVE, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC) < 0)
    fail(plan, errno, "set mount flags", STAGED("/dev"));
  if (mkdir(STAGED("/dev/pts"), 0755) < 0) fail(plan, errno, "mkdir", STAGED("/dev/pts"));
  /* A private devpts instance: ptys of the jail only, none of the host's terminals. */
  if (mount("devpts", STAGED("/dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC,
            "newinstance,ptmxmode=0666,mode=0620,max=" JAIL_PTY_MAX) < 0)
    fail(plan, errno, "mount devpts", STAGED("/dev/pts"));
  /* A private /dev/shm (POSIX shared memory, semaphores: Python multiprocessing). Its pages are charged to
   * the memory cgroup of the writer, the jail, and the size is capped besides. */
  if (mkdir(STAGED("/dev/shm"), 0755) < 0) fail(plan, errno, "mkdir", STAGED("/dev/shm"));
  if (mount("tmpfs", STAGED("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=" JAIL_SHM_SIZE ",nr_inodes=1024,mode=1777") < 0)
    fail(plan, errno, "mount tmpfs", STAGED("/dev/shm"));
  static const char *const links[][2] = {{"pts/ptmx", STAGED("/dev/ptmx")},
                                         {"/proc/self/fd", STAGED("/dev/fd")},
                                         {"/proc/self/fd/0", STAGED("/dev/stdin")},
                                         {"/proc/self/fd/1", STAGED("/dev/stdout")},
                                         {"/proc/self/fd/2", STAGED("/dev/stderr")}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    if (symlink(links[i][0], links[i][1]) < 0) fail(plan, errno, "symlink", links[i][1]);
  if (mount_setattr_path(STAGED("/dev"), 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC) < 0)
    fail(plan, errno, "make read-only", STAGED("/dev"));
}

static void setup_proc(const struct jail_plan *plan) {
  if (mount("proc", STAGED("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    fail(plan, errno, "mount proc", STAGED("/proc"));
  /* before /proc/sys turns read-only; see join_network_namespace (the supervisor uses the helper only
   * where the file exists) */
  if (plan->network_namespace_helper &&
      (network_helper.last_pid_fd = open(STAGED("/proc/sys/kernel/ns_last_pid"), O_WRONLY | O_CLOEXEC)) < 0)
    fail(plan, errno, "open", STAGED("/proc/sys/kernel/ns_last_pid"));
  /* Masked (as the OCI runtimes do): kernel memory and state that is nobody's business in a jail. */
  static const char *const masked_files[] = {STAGED("/proc/kcore"),      STAGED("/proc/keys"),
                                             STAGED("/proc/timer_list"), STAGED("/proc/sched_debug"),
                                             STAGED("/proc/kallsyms"),   STAGED("/proc/latency_stats")};
  /* (a mount on a missing entry fails with ENOENT: nothing to mask there) */
  for (size_t i = 0; i < sizeof masked_files / sizeof masked_files[0]; i++)
    if (mount(STAGED("/dev/null"), masked_files[i], NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
      fail(plan, errno, "mask", masked_files[i]);
  static const char *const masked_dirs[] = {STAGED("/proc/acpi"), STAGED("/proc/scsi")};
  for (size_t i = 0; i < sizeof masked_dirs / sizeof masked_dirs[0]; i++)
    if (mount("tmpfs", masked_dirs[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0") < 0 &&
        errno != ENOENT)
      fail(plan, errno, "mask", masked_dirs[i]);
  /* Read-only: sysctls, the sysrq trigger, interrupt and bus settings. */
  static const char *const readonly[] = {STAGED("/proc/sys"), STAGED("/proc/sysrq-trigger"),
                                         STAGED("/proc/irq"), STAGED("/proc/bus"), STAGED("/proc/fs")};
  for (size_t i = 0; i < sizeof readonly / sizeof readonly[0]; i++) {
    if (mount(readonly[i], readonly[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
      if (errno == ENOENT) continue;
      fail(plan, errno, "bind mount", readonly[i]);
    }
    if (mount_setattr_path(readonly[i], AT_RECURSIVE, MOUNT_ATTR_RDONLY) < 0)
      fail(plan, errno, "make read-only", readonly[i]);
  }
}

static void send_workspace(const struct jail_plan *plan) {
  int fd = open(STAGED("/workspace"), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(plan, errno, "open", STAGED("/workspace"));
  struct jail_sync_message message;
  memset(&message, 0, sizeof message);
  message.kind = SYNC_WORKSPACE;
  struct iovec iov = {&message, sizeof message};
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  if (sendmsg(plan->sync_fd, &msg, MSG_NOSIGNAL) < 0) fail(plan, errno, "send workspace fd", NULL);
  close(fd);
}

/* Set back to SIG_DFL every signal this process ignores: the SigIgn mask of /proc/self/status (proc(5)),
 * one sigaction per set bit instead of one per signal. Falls back to all signals if it cannot be read. */
static void reset_ignored_signals(void) {
  struct sigaction default_action;
  memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  char status[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, status, sizeof status - 1) : -1;
  if (fd >= 0) close(fd);
  const char *line = NULL;
  if (n > 0) {
    status[n] = '\0';
    line = strstr(status, "\nSigIgn:\t");
  }
  if (line == NULL) {
    for (int s = 1; s < _NSIG; s++) sigaction(s, &default_action, NULL);
    return;
  }
  /* 16 hex digits, signal 64 first: digit i (from the left) holds signals 61-4i .. 64-4i */
  const char *digits = line + 9;
  for (int i = 0; i < 16; i++) {
    char c = digits[i];
    unsigned value = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 0;
    for (int bit = 0; bit < 4; bit++)
      if (value & (1u << bit)) sigaction(61 - 4 * i + bit, &default_action, NULL);
  }
}

static void wait_go(const struct jail_plan *plan) {
  struct jail_sync_message go;
  if (recv(plan->sync_fd, &go, sizeof go, 0) != (ssize_t)sizeof go || go.kind != SYNC_GO) _exit(127);
}

/* plan.hold_program: the supervisor's SYNC_RUN, or exit with nothing started (it kills the jail). */
static void wait_run(const struct jail_plan *plan) {
  struct jail_sync_message run;
  ssize_t n;
  do n = recv(plan->sync_fd, &run, sizeof run, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof run || run.kind != SYNC_RUN) _exit(127);
}

/* The second SYNC_GO brings the `tasks` files of our v1 cgroup leaves, opened by the parent: move this
 * (single-threaded) process into each by writing "0" — one thread, and the writer itself, so the kernel
 * skips the threadgroup lock and its RCU grace period (jail_cgroup_open_tasks). */
static void wait_go_and_join_leaves(const struct jail_plan *plan) {
  struct jail_sync_message go;
  struct iovec iov = {&go, sizeof go};
  union {
    char buffer[CMSG_SPACE(sizeof(int) * JAIL_V1_COUNT)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  if (recvmsg(plan->sync_fd, &msg, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof go || go.kind != SYNC_GO) _exit(127);
  /* The parent-death signal is armed again by now; a supervisor that died before that (after sending
   * this) shows as a hang-up of its end: then nobody would enforce the timeout, so go no further. */
  struct pollfd hangup = {plan->sync_fd, POLLRDHUP, 0};
  if (poll(&hangup, 1, 0) > 0 && (hangup.revents & (POLLHUP | POLLRDHUP))) _exit(127);
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof fd);
      ssize_t written = write(fd, "0", 1);
      int e = errno;
      close(fd);
      if (written != 1) fail(plan, e, "join v1 cgroup leaf", NULL);
    }
  }
}

static void setup_mounts(const struct jail_plan *plan) {
  if (plan->root_is_tmpfs) {
    if (mount("tmpfs", JAIL_STAGING, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755") < 0)
      fail(plan, errno, "mount root tmpfs", JAIL_STAGING);
    apply_entries(plan, plan->root_entries, plan->root_entry_count);
    for (size_t i = 0; i < plan->root_bind_count; i++)
      bind_readonly(plan, plan->root_binds[i].source, plan->root_binds[i].target);
  } else {
    if (mount(plan->image_rootfs, JAIL_STAGING, NULL, MS_BIND, NULL) < 0)
      fail(plan, errno, "bind image", plan->image_rootfs);
  }
  /* The root read-only from here on (its mount points exist). */
  if (mount_setattr_path(JAIL_STAGING, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) < 0)
    fail(plan, errno, "make root read-only", JAIL_STAGING);
  if (mount("tmpfs", STAGED("/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, plan->tmpfs_options) < 0)
    fail(plan, errno, "mount tmpfs", STAGED("/tmp"));
  if (mount("tmpfs", STAGED("/workspace"), "tmpfs", MS_NOSUID | MS_NODEV, plan->workspace_options) < 0)
    fail(plan, errno, "mount tmpfs", STAGED("/workspace"));
  setup_dev(plan);
  setup_proc(plan);
  /* Second hand-over: the parent has made the v1 leaves (while we mounted), placed us in the cgroup2 leaf
   * where clone3 could not, and run on_namespaces_ready (network plumbing). We join the v1 leaves now,
   * before the workspace's files are written: tmpfs pages are charged to the memory cgroup of their
   * writer. (The few mount structures made above stay charged to the supervisor.) */
  wait_go_and_join_leaves(plan);
  if (unshare(CLONE_NEWCGROUP) < 0) fail(plan, errno, "unshare cgroup namespace", NULL);
}

/* A prepared jail (plan->prepared): report that we wait, then take the call's part of the plan from
 * SYNC_BIND: the memfd of jail_call_encode, mapped privately and relocated, and the program's stdin. A
 * closed control socket means the supervisor discarded us (or died): end without a word. Everything of
 * the call is applied after this, in the same order as in a fresh jail. */
static void receive_call(struct jail_plan *plan) {
  struct jail_sync_message message;
  memset(&message, 0, sizeof message);
  message.kind = SYNC_PREPARED;
  if (send(plan->sync_fd, &message, sizeof message, MSG_NOSIGNAL) != (ssize_t)sizeof message) _exit(127);
  struct iovec iov = {&message, sizeof message};
  union {
    char buffer[CMSG_SPACE(sizeof(int) * 2)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  ssize_t n;
  do n = recvmsg(plan->sync_fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof message || message.kind != SYNC_BIND) _exit(127);
  struct pollfd hangup = {plan->sync_fd, POLLRDHUP, 0};
  if (poll(&hangup, 1, 0) > 0 && (hangup.revents & (POLLHUP | POLLRDHUP))) _exit(127);
  int fds[2] = {-1, -1};
  struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
      cmsg->cmsg_len == CMSG_LEN(sizeof fds))
    memcpy(fds, CMSG_DATA(cmsg), sizeof fds);
  if (fds[0] < 0 || fds[1] < 0 || (msg.msg_flags & MSG_CTRUNC)) fail(plan, EPROTO, "receive the call", NULL);
  struct stat st;
  if (fstat(fds[0], &st) < 0 || st.st_size <= 0) fail(plan, errno ? errno : EPROTO, "receive the call", NULL);
  void *block = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[0], 0);
  if (block == MAP_FAILED) fail(plan, errno, "map the call", NULL);
  close(fds[0]);
  if (jail_call_decode(block, (size_t)st.st_size, plan) < 0) fail(plan, EPROTO, "decode the call", NULL);
  plan->stdin_fd = fds[1];
}

/* The workspace's files (written by us, so charged to the jail), then pivot_root into the new root. */
static void enter_root(const struct jail_plan *plan) {
  apply_entries(plan, plan->workspace_entries, plan->workspace_entry_count);
  send_workspace(plan);
  if (chdir(JAIL_STAGING) < 0) fail(plan, errno, "chdir", JAIL_STAGING);
  if (syscall(SYS_pivot_root, ".", ".") < 0) fail(plan, errno, "pivot_root", JAIL_STAGING);
  if (umount2(".", MNT_DETACH) < 0) fail(plan, errno, "detach the host root", NULL);
  if (chdir("/") < 0) fail(plan, errno, "chdir", "/");
  if (chdir(plan->working_directory) < 0) fail(plan, errno, "working directory", plan->working_directory);
}

/* ---- privileges ---- */

static int landlock_prepare(const struct jail_plan *plan) {
  if (plan->landlock_abi <= 0) return -1;
  struct dome_landlock_ruleset_attr attr = {.handled_access_fs =
                                                jail_landlock_handled_fs(plan->landlock_abi)};
  size_t size = sizeof attr.handled_access_fs;
  if (plan->landlock_abi >= 6) {
    /* Signals and abstract unix sockets stay inside the jail's Landlock domain. */
    attr.scoped = DOME_LL_SCOPE_SIGNAL | DOME_LL_SCOPE_ABSTRACT_UNIX_SOCKET;
    size = sizeof attr;
  }
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0) fail(plan, errno, "landlock_create_ruleset", NULL);
  for (size_t i = 0; i < plan->landlock_rule_count; i++) {
    const struct jail_landlock_rule *rule = &plan->landlock_rules[i];
    /* most rules name directories: try that first (no fstat), then the path as a file */
    bool directory = true;
    int fd = open(rule->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOTDIR) {
      directory = false;
      fd = open(rule->path, O_PATH | O_CLOEXEC);
    }
    if (fd < 0 && rule->optional && (errno == ENOENT || errno == ENOTDIR)) continue;
    if (fd < 0) fail(plan, errno, "landlock rule path", rule->path);
    struct dome_landlock_path_beneath_attr beneath = {.allowed_access = rule->access, .parent_fd = fd};
    if (!directory) beneath.allowed_access = jail_landlock_file_rights(beneath.allowed_access);
    if (directory && rule->exact) beneath.allowed_access = 0; /* fail-closed: see jail_path_rule.exact */
    if (beneath.allowed_access &&
        syscall(SYS_landlock_add_rule, ruleset, DOME_LL_RULE_PATH_BENEATH, &beneath, 0) < 0)
      fail(plan, errno, "landlock_add_rule", rule->path);
    close(fd);
  }
  return ruleset;
}

static void drop_capabilities(const struct jail_plan *plan) {
  /* Root in the jail's user namespace regains nothing on execve, and the bits cannot be undone. */
  unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                       SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                       SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0) fail(plan, errno, "lock securebits", NULL);
  for (int cap = 0; cap <= plan->last_capability; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      fail(plan, errno, "drop bounding set", NULL);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
    fail(plan, errno, "clear ambient set", NULL);
  /* libcap would allocate; the raw capset call does not. */
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &header, data) < 0) fail(plan, errno, "capset", NULL);
}

static void set_limit(const struct jail_plan *plan, int resource, uint64_t value, const char *name) {
  struct rlimit limit = {value, value};
  if (setrlimit(resource, &limit) < 0) fail(plan, errno, "setrlimit", name);
}

/* execvpe without allocation: try each PATH entry; ENOENT everywhere is "not found". */
__attribute__((noreturn)) static void exec_program(const struct jail_plan *plan) {
  const char *name = plan->argv[0];
  if (strchr(name, '/')) {
    execve(name, plan->argv, plan->envp);
    fail(plan, errno, "execute program", name);
  }
  int saved = ENOENT;
  const char *p = plan->search_path;
  char candidate[4096];
  while (*p) {
    const char *end = strchr(p, ':');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    if (length > 0 && length + strlen(name) + 2 < sizeof candidate) {
      memcpy(candidate, p, length);
      candidate[length] = '/';
      strcpy(candidate + length + 1, name);
      execve(candidate, plan->argv, plan->envp);
      if (errno == EACCES)
        saved = EACCES;
      else if (errno != ENOENT && errno != ENOTDIR) {
        saved = errno;
        break;
      }
    }
    if (!end) break;
    p = end + 1;
  }
  fail(plan, saved, saved == ENOENT ? "program not found in the image's PATH" : "execute program", name);
}

/* Our memory is a copy of the supervisor's: blank its argv and environment (the kernel serves
 * /proc/1/cmdline and /proc/1/environ from these areas) and rename the thread. Only in init, after the
 * program's fork: the program's argv and env strings may live in those areas (the CLI's argv). */
static void hide_supervisor(const struct jail_plan *plan) {
  static const char name[] = "init";
  if (plan->arg_start && plan->arg_end > plan->arg_start + sizeof name) {
    memset((void *)plan->arg_start, 0, plan->arg_end - plan->arg_start);
    memcpy((void *)plan->arg_start, name, sizeof name);
  }
  if (plan->env_start && plan->env_end > plan->env_start)
    memset((void *)plan->env_start, 0, plan->env_end - plan->env_start);
  prctl(PR_SET_NAME, name, 0, 0, 0);
}

/* The jail's pid 1 once the program runs: the kernel ignores signals sent to it from inside the jail,
 * it reaps orphans (so zombies do not pile up against pids.max), and when the program ends it reports
 * the program's status and exits, which ends the pid namespace: the kernel kills everything left. */
__attribute__((noreturn)) static void run_init(pid_t program, const struct jail_plan *plan) {
  close(plan->sync_fd); /* the parent sees EOF once the program has exec'd */
  close(0);
  close(1);
  close(2);
  int status = 0;
  for (;;) {
    pid_t pid = (pid_t)syscall(SYS_wait4, -1, &status, 0, NULL);
    if (pid == program) break;
    if (pid < 0 && errno != EINTR) {
      status = 127 << 8;
      break;
    }
  }
  /* Whether anything else is left: the orphans that ended are reaped; a child still running (of any
   * kind: __WALL) means the kernel ends it when we exit, and the supervisor waits for that. */
  bool alone = false;
  for (;;) {
    int ignored_status;
    pid_t pid = (pid_t)syscall(SYS_wait4, -1, &ignored_status, WNOHANG | __WALL, NULL);
    if (pid > 0) continue;
    if (pid < 0 && errno == EINTR) continue;
    alone = pid < 0 && errno == ECHILD;
    break;
  }
  struct jail_init_report report = {
      WIFEXITED(status) ? 1 : 0, WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), alone ? 1 : 0};
  ssize_t ignored = write(plan->status_fd, &report, sizeof report);
  (void)ignored;
  _exit(0);
}

/* A prepared jail waits for its call for as long as the pool keeps it: the copy of the supervisor's fd table
 * that clone3 gave it (listening and accepted sockets, the journal, other jails' pipes and control
 * sockets being set up by other threads) would keep those open meanwhile, so that a neighbour's end of
 * file or a client's closed connection never arrives. Close everything but our own channels at once. */
static void close_inherited(const struct jail_plan *plan) {
  enum { KEEP = 6 };
  int keep[KEEP] = {plan->sync_fd,   plan->stdout_fd, plan->stderr_fd,
                    plan->status_fd, plan->stdin_fd,  plan->python_argv ? plan->call_channel_fd : -1};
  for (int i = 1; i < KEEP; i++)
    for (int k = i; k > 0 && keep[k - 1] > keep[k]; k--) {
      int t = keep[k];
      keep[k] = keep[k - 1];
      keep[k - 1] = t;
    }
  unsigned from = 0;
  for (int i = 0; i < KEEP; i++) {
    if (keep[i] < 0 || (unsigned)keep[i] < from) continue;
    if ((unsigned)keep[i] > from && syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0) < 0)
      fail(plan, errno, "close inherited fds", NULL);
    from = (unsigned)keep[i] + 1;
  }
  if (syscall(SYS_close_range, from, ~0u, 0) < 0) fail(plan, errno, "close inherited fds", NULL);
}

/* Move `fd` to at least 64, close-on-exec (so that the final numbers can be set without clobbering). */
static int lift(const struct jail_plan *plan, int fd) {
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 64);
  if (high < 0) fail(plan, errno, "move an fd", NULL);
  close(fd);
  return high;
}

/* The program's process limits (core dumps off, open files, file size, queued signals) and a session of
 * its own; fails the set-up on an error. */
static void limit_process(const struct jail_plan *plan) {
  set_limit(plan, RLIMIT_CORE, 0, "RLIMIT_CORE");
  set_limit(plan, RLIMIT_NOFILE, plan->nofile_limit, "RLIMIT_NOFILE");
  set_limit(plan, RLIMIT_FSIZE, plan->fsize_limit, "RLIMIT_FSIZE");
  /* Queued signals are counted per user up the user-namespace chain: bound the jail's share. */
  set_limit(plan, RLIMIT_SIGPENDING, JAIL_SIGPENDING_MAX, "RLIMIT_SIGPENDING");
  if (setsid() < 0) fail(plan, errno, "setsid", NULL);
}

/* A prepared jail with an interpreter (plan->python_argv): the jail is finished now, as for a program, but
 * for what belongs to its call: no workspace file is written and no Landlock domain made (the interpreter
 * applies its call's ruleset itself, python_bootstrap.py). The interpreter is pid 2 with fds 0 (the host's
 * /dev/null), 1, 2, 3 (the call's stream) and 4 (the control socket, on which it reports SYNC_PREPARED
 * once it has started); this process stays its init. */
__attribute__((noreturn)) static void start_interpreter(const struct jail_plan *plan) {
  send_workspace(plan);
  if (chdir(JAIL_STAGING) < 0) fail(plan, errno, "chdir", JAIL_STAGING);
  if (syscall(SYS_pivot_root, ".", ".") < 0) fail(plan, errno, "pivot_root", JAIL_STAGING);
  if (umount2(".", MNT_DETACH) < 0) fail(plan, errno, "detach the host root", NULL);
  if (chdir("/workspace") < 0) fail(plan, errno, "working directory", "/workspace");
  limit_process(plan);
  if (plan->network_namespace_helper) join_network_namespace(plan);
  struct jail_plan moved = *plan;
  int sources[6] = {plan->stdin_fd,        plan->stdout_fd, plan->stderr_fd,
                    plan->call_channel_fd, plan->sync_fd,   plan->status_fd};
  for (int i = 0; i < 6; i++) sources[i] = lift(&moved, sources[i]);
  moved.sync_fd = sources[4];
  /* 0..4 inherited by the interpreter; the status pipe (5) is the init's only */
  for (int i = 0; i < 6; i++)
    if (dup3(sources[i], i, i == 5 ? O_CLOEXEC : 0) < 0) fail(&moved, errno, "dup3 interpreter fds", NULL);
  moved.sync_fd = 4;
  moved.status_fd = 5;
  if (syscall(SYS_close_range, 6u, ~0u, 0) < 0) fail(&moved, errno, "close_range", NULL);
  drop_capabilities(&moved);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail(&moved, errno, "no_new_privs", NULL);
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, plan->seccomp) < 0)
    fail(&moved, errno, "install seccomp filter", NULL);
  /* SYNC_PREPARED comes from the interpreter once it has started and waits */
  hide_supervisor(&moved);
  pid_t interpreter = vfork();
  if (interpreter < 0) fail(&moved, errno, "fork the interpreter", NULL);
  if (interpreter == 0) {
    /* resolved as a program is: through the PATH of its start environment, which a call it serves has too */
    struct jail_plan program = moved;
    program.argv = plan->python_argv;
    program.envp = plan->python_env;
    exec_program(&program);
  }
  close(3); /* the call's stream and (in run_init) the control socket are the interpreter's only */
  run_init(interpreter, &moved);
}

void jail_child_main(const struct jail_plan *initial) {
  /* Our own copy: a prepared jail fills in the call's part when it arrives (receive_call). */
  struct jail_plan call = *initial;
  const struct jail_plan *plan = &call;
  /* Tied to the supervisor from the start: our copy of its end of the control socket goes (so a read
   * sees end-of-file when it dies), and the parent-death signal is armed (again after the credential
   * change below, which clears it). */
  close(plan->supervisor_sync_fd);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (plan->prepared) close_inherited(plan);
  if (plan->network_namespace_helper) start_network_helper(plan);
  /* The parent's signal state is not the program's: default dispositions, nothing blocked. clone3 reset
   * the handled signals (CLONE_CLEAR_SIGHAND); ignored ones stay ignored across execve, so reset those. */
  reset_ignored_signals();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Before our ids are mapped: these need only capabilities in the new namespaces, which we hold. */
  if (sethostname("sandbox", 7) < 0) fail(plan, errno, "sethostname", NULL);
  if (!plan->network_namespace_helper) {
    struct ifreq request;
    loopback_request(&request);
    const char *step = "";
    long r = loopback_up(&request, &step);
    if (r < 0) fail(plan, (int)-r, step, NULL);
  }
  /* Nothing we mount propagates back to the host. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) fail(plan, errno, "make mounts private", "/");
  wait_go(plan);

  /* Become the mapped root: until now our credentials were the host's (unmapped in the new namespace).
   * Raw system calls: glibc's wrappers would signal the parent's other threads (setxid broadcast). */
  if (syscall(SYS_setresgid, 0, 0, 0) < 0) fail(plan, errno, "setresgid", NULL);
  if (syscall(SYS_setresuid, 0, 0, 0) < 0) fail(plan, errno, "setresuid", NULL);
  /* After the credential change, which clears it: the jail dies with the thread that runs jail_run. */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  setup_mounts(plan);
  if (plan->prepared && plan->python_argv) start_interpreter(plan);
  /* A prepared jail is whole before it reports that it waits: its network namespace too (the helper's
   * loopback socket is made before the jail's kernel programs are attached ahead, which refuse any inet
   * socket until the call registers the jail: dome_kernel_prelink). */
  bool prepared = plan->prepared; /* (what receive_call decodes is the call's part only) */
  if (prepared && plan->network_namespace_helper) join_network_namespace(plan);
  if (prepared) receive_call(&call);
  enter_root(plan);

  limit_process(plan);

  /* The helper has had the supervisor's set-up time and ours; joining needs CAP_SYS_ADMIN (dropped below)
   * and the helper's fds (closed below). */
  if (!prepared && plan->network_namespace_helper) join_network_namespace(plan);
  /* stdio, then the control socket as fd 3 (close-on-exec), then nothing else. */
  if (dup2(plan->stdin_fd, 0) < 0 || dup2(plan->stdout_fd, 1) < 0 || dup2(plan->stderr_fd, 2) < 0)
    fail(plan, errno, "dup2 stdio", NULL);
  struct jail_plan moved = *plan;
  if (plan->sync_fd != 3) {
    if (dup3(plan->sync_fd, 3, O_CLOEXEC) < 0) fail(plan, errno, "dup3 control socket", NULL);
    moved.sync_fd = 3;
  }
  if (plan->status_fd != 4) {
    if (dup3(plan->status_fd, 4, O_CLOEXEC) < 0) fail(&moved, errno, "dup3 status pipe", NULL);
    moved.status_fd = 4;
  }
  if (syscall(SYS_close_range, 5u, ~0u, 0) < 0) fail(&moved, errno, "close_range", NULL);
  int ruleset = landlock_prepare(&moved);
  if (ruleset >= 0 && fcntl(ruleset, F_SETFD, FD_CLOEXEC) < 0) fail(&moved, errno, "fcntl", NULL);

  drop_capabilities(&moved);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail(&moved, errno, "no_new_privs", NULL);
  if (ruleset >= 0) {
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
      fail(&moved, errno, "landlock_restrict_self", NULL);
    close(ruleset);
  }
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, plan->seccomp) < 0)
    fail(&moved, errno, "install seccomp filter", NULL);
  /* vfork: the program's process borrows our memory until it has exec'd (or failed and exited), so no
   * copy of the supervisor's address space is made; vfork runs no fork handlers, and exec_program only
   * issues system calls. glibc's vfork, not a raw clone: it keeps the return address off the shared
   * stack (vfork(2)). */
  /* Before the program exists: it must never see the supervisor's command line as /proc/1/cmdline. */
  hide_supervisor(&moved);
  if (plan->hold_program) wait_run(&moved);
  pid_t program = vfork();
  if (program < 0) fail(&moved, errno, "fork the program", NULL);
  if (program == 0) exec_program(&moved);
  run_init(program, &moved);
}
