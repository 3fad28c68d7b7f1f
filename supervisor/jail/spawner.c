/* The spawner: a process forked from domed at start-up, from which the jails are cloned.
 *
 * clone3 without CLONE_VM copies the caller's page tables and write-protects every private page of it, in
 * the caller and in the copy. A jail's init is such a copy and lives as long as the jail (a prepared one
 * waits for its call), so after every clone each page domed writes is a copy-on-write fault and, domed
 * being multi-threaded, a TLB shootdown across the CPUs: in a profile of pooled calls, 45% of the CPU of
 * the threads that serve the calls went to page faults (docs/architecture.md, "The jails cloned from a
 * spawner"). Cloned from the spawner instead, a jail copies only the spawner's few pages, and domed's
 * pages stay its own.
 *
 * The spawner is a copy of domed from before any call or plan: the plan comes whole in a sealed memfd
 * (jail_plan_encode), the plan's fds and the cgroup2 leaf with SCM_RIGHTS, on a SOCK_SEQPACKET socket
 * pair; the answer is the pid and, with SCM_RIGHTS, the pidfd. clone3 gets CLONE_PARENT: the jail is
 * domed's child (its real parent is the thread that forked the spawner), so domed reaps it by pidfd, its
 * parent-death signal follows domed, and everything after the clone (ids mapped, hand-overs, cgroup
 * joins) is done by domed as for a jail it cloned itself. */
#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The fds of a request, in this order; bit i of spawn_request.fds says slot i is present. */
enum spawn_slot {
  SLOT_PLAN,
  SLOT_STDIN,
  SLOT_STDOUT,
  SLOT_STDERR,
  SLOT_SYNC,
  SLOT_STATUS,
  SLOT_CALL_CHANNEL,
  SLOT_CGROUP,
  SLOTS,
};

struct spawn_request {
  uint64_t flags; /* clone3 flags, CLONE_PARENT added by the spawner */
  uint32_t host_id;
  uint32_t fds; /* present slots */
};

struct spawn_reply {
  int32_t pid;   /* > 0, or 0 with error set */
  int32_t error; /* errno of the step that failed */
};

/* In the spawner: domed's own name, which each jail's init takes back (it is a copy of domed, named as a
 * jail cloned from domed itself would be, until it takes the name `init`). */
static char supervisor_name[16];

static pthread_mutex_t spawner_lock = PTHREAD_MUTEX_INITIALIZER;
static int spawner_socket = -1;
static pid_t spawner = 0;

/* ---- the spawner's side: one request at a time ---- */

static int receive_request(int sock, struct spawn_request *request, int fds[SLOTS]) {
  union {
    char buffer[CMSG_SPACE(SLOTS * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec io = {request, sizeof *request};
  struct msghdr msg = {.msg_iov = &io,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  ssize_t n;
  do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1; /* domed closed its end (or is gone): we are done */
  for (int i = 0; i < SLOTS; i++) fds[i] = -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  size_t count = 0;
  int received[SLOTS];
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
    count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    if (count > SLOTS) count = SLOTS;
    memcpy(received, CMSG_DATA(c), count * sizeof(int));
  }
  size_t next = 0;
  for (int i = 0; i < SLOTS; i++)
    if (request->fds & (1u << i)) fds[i] = next < count ? received[next++] : -1;
  for (size_t i = next; i < count; i++) close(received[i]); /* more fds than slots: not ours to keep */
  if (n != (ssize_t)sizeof *request || (msg.msg_flags & MSG_CTRUNC) || next != count || fds[SLOT_PLAN] < 0)
    return -2; /* malformed: answered with EPROTO */
  return 0;
}

static void reply(int sock, pid_t pid, int error, int pidfd) {
  struct spawn_reply answer = {.pid = pid, .error = error};
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec io = {&answer, sizeof answer};
  struct msghdr msg = {.msg_iov = &io, .msg_iovlen = 1};
  if (pidfd >= 0) {
    msg.msg_control = control.buffer;
    msg.msg_controllen = sizeof control.buffer;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pidfd, sizeof(int));
  }
  if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) _exit(0); /* domed is gone */
}

/* Clone one jail; returns its pid with *pidfd set, or -errno. */
static pid_t spawn(int sock, const struct spawn_request *request, int fds[SLOTS], int *pidfd) {
  struct stat st;
  if (fstat(fds[SLOT_PLAN], &st) < 0) return -errno;
  if (st.st_size <= 0 || (uint64_t)st.st_size > JAIL_CALL_MAX_BYTES) return -EPROTO;
  size_t size = (size_t)st.st_size;
  void *block = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[SLOT_PLAN], 0);
  if (block == MAP_FAILED) return -errno;
  struct jail_plan plan;
  if (jail_plan_decode(block, size, &plan) < 0) {
    munmap(block, size);
    return -EPROTO;
  }
  plan.stdin_fd = fds[SLOT_STDIN];
  plan.stdout_fd = fds[SLOT_STDOUT];
  plan.stderr_fd = fds[SLOT_STDERR];
  plan.sync_fd = fds[SLOT_SYNC];
  plan.status_fd = fds[SLOT_STATUS];
  plan.call_channel_fd = fds[SLOT_CALL_CHANNEL];
  plan.supervisor_sync_fd = -1; /* never here: the child's reads see end-of-file when domed's end closes */

  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = (request->flags & ~(uint64_t)CLONE_INTO_CGROUP) | CLONE_PARENT | CLONE_PIDFD;
  args.pidfd = (uint64_t)(uintptr_t)pidfd;
  args.exit_signal = 0;
  if ((request->flags & CLONE_INTO_CGROUP) && fds[SLOT_CGROUP] >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = (uint64_t)fds[SLOT_CGROUP];
  }
  /* As in start_jail (run.c): the new user namespace is owned by the jail's host uid/gid; the fs ids stay
   * root's so that CLONE_INTO_CGROUP keeps access to the leaf. One thread here: the raw calls suffice. */
  int cred_error = 0;
  if (syscall(SYS_setresgid, -1, request->host_id, -1) < 0 ||
      syscall(SYS_setresuid, -1, request->host_id, -1) < 0)
    cred_error = errno;
  syscall(SYS_setfsuid, 0);
  syscall(SYS_setfsgid, 0);
  pid_t pid = cred_error ? -1 : (pid_t)syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    close(sock);
    prctl(PR_SET_NAME, supervisor_name, 0, 0, 0);
    jail_child_main(&plan);
  }
  int clone_error = cred_error ? cred_error : errno;
  if (syscall(SYS_setresuid, -1, 0, -1) < 0 || syscall(SYS_setresgid, -1, 0, -1) < 0)
    _exit(1); /* cannot happen; never go on with the jail's ids */
  munmap(block, size);
  return pid < 0 ? -clone_error : pid;
}

__attribute__((noreturn)) static void spawner_main(int sock, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != parent) _exit(0);
  prctl(PR_GET_NAME, supervisor_name, 0, 0, 0);
  prctl(PR_SET_NAME, "dome-spawner", 0, 0, 0);
  /* Nothing of domed's but the standard streams: its journal, sockets and listeners stay out of every
   * jail cloned from here (their fds would be inherited until the child closes them). */
  if (sock > 3) syscall(SYS_close_range, 3, sock - 1, 0);
  syscall(SYS_close_range, sock + 1, ~0u, 0);
  for (;;) {
    struct spawn_request request;
    int fds[SLOTS];
    int r = receive_request(sock, &request, fds);
    if (r == -1) _exit(0);
    int pidfd = -1;
    pid_t pid = r < 0 ? -EPROTO : spawn(sock, &request, fds, &pidfd);
    for (int i = 0; i < SLOTS; i++)
      if (fds[i] >= 0) close(fds[i]);
    reply(sock, pid > 0 ? pid : 0, pid > 0 ? 0 : (int)-pid, pid > 0 ? pidfd : -1);
    if (pidfd >= 0) close(pidfd);
  }
}

/* ---- domed's side ---- */

int jail_spawner_start(dome_error *err) {
  pthread_mutex_lock(&spawner_lock);
  if (spawner_socket >= 0) {
    pthread_mutex_unlock(&spawner_lock);
    return dome_error_set(err, EBUSY, "start the jail spawner: one runs");
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
    int e = errno;
    pthread_mutex_unlock(&spawner_lock);
    return dome_error_set_errno(err, e, "start the jail spawner: socketpair");
  }
  pid_t parent = getpid();
  /* exit_signal 0, as for the jails: what the spawner clones with CLONE_PARENT takes its exit signal, and
   * no SIGCHLD means nobody's waitpid(-1) can reap a jail. */
  struct clone_args args;
  memset(&args, 0, sizeof args);
  pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    close(pair[0]);
    spawner_main(pair[1], parent);
  }
  int e = errno;
  close(pair[1]);
  if (pid < 0) {
    close(pair[0]);
    pthread_mutex_unlock(&spawner_lock);
    return dome_error_set_errno(err, e, "start the jail spawner: clone3");
  }
  spawner_socket = pair[0];
  spawner = pid;
  pthread_mutex_unlock(&spawner_lock);
  return 0;
}

/* With the lock held. */
static void spawner_close(void) {
  if (spawner_socket < 0) return;
  close(spawner_socket);
  spawner_socket = -1;
  siginfo_t info;
  while (waitid(P_PID, (id_t)spawner, &info, WEXITED | __WALL) < 0 && errno == EINTR) {
  }
  spawner = 0;
}

void jail_spawner_stop(void) {
  pthread_mutex_lock(&spawner_lock);
  spawner_close();
  pthread_mutex_unlock(&spawner_lock);
}

pid_t jail_spawner_pid(void) {
  pthread_mutex_lock(&spawner_lock);
  pid_t pid = spawner;
  pthread_mutex_unlock(&spawner_lock);
  return pid;
}

/* The request and its fds; then the answer. Returns the pid, or -errno; -EPIPE when the spawner is gone. */
static pid_t exchange(const struct spawn_request *request, const int *fds, size_t count, int *pidfd) {
  union {
    char buffer[CMSG_SPACE(SLOTS * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec io = {(void *)request, sizeof *request};
  struct msghdr msg = {.msg_iov = &io,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = CMSG_SPACE(count * sizeof(int))};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(count * sizeof(int));
  memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  ssize_t n;
  do n = sendmsg(spawner_socket, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof *request) return -EPIPE;

  struct spawn_reply answer;
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } back;
  struct iovec answer_io = {&answer, sizeof answer};
  struct msghdr in = {.msg_iov = &answer_io,
                      .msg_iovlen = 1,
                      .msg_control = back.buffer,
                      .msg_controllen = sizeof back.buffer};
  do n = recvmsg(spawner_socket, &in, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof answer) return -EPIPE;
  struct cmsghdr *r = CMSG_FIRSTHDR(&in);
  int received = -1;
  if (r && r->cmsg_level == SOL_SOCKET && r->cmsg_type == SCM_RIGHTS && r->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(&received, CMSG_DATA(r), sizeof(int));
  if (answer.pid <= 0) {
    if (received >= 0) close(received);
    return answer.error > 0 ? -answer.error : -EPROTO;
  }
  if (received < 0) return -EPROTO; /* cannot happen: a pid comes with its pidfd */
  *pidfd = received;
  return answer.pid;
}

pid_t jail_spawner_clone(const struct jail_plan *plan, const struct clone_args *args, unsigned host_id,
                         int *pidfd, dome_error *err) {
  if (jail_spawner_pid() == 0) return -ENOSYS;
  int block = jail_plan_encode(plan, err);
  if (block < 0) return block;
  struct spawn_request request = {.flags = args->flags, .host_id = host_id};
  int slots[SLOTS] = {block,
                      plan->stdin_fd,
                      plan->stdout_fd,
                      plan->stderr_fd,
                      plan->sync_fd,
                      plan->status_fd,
                      plan->python_argv ? plan->call_channel_fd : -1,
                      -1};
  if (args->flags & CLONE_INTO_CGROUP) slots[SLOT_CGROUP] = (int)args->cgroup;
  int fds[SLOTS];
  size_t count = 0;
  for (int i = 0; i < SLOTS; i++)
    if (slots[i] >= 0) {
      request.fds |= 1u << i;
      fds[count++] = slots[i];
    }
  pthread_mutex_lock(&spawner_lock);
  pid_t pid = spawner_socket < 0 ? -ENOSYS : exchange(&request, fds, count, pidfd);
  if (pid == -EPIPE) spawner_close(); /* gone (killed?): jails are cloned by the caller from now on */
  pthread_mutex_unlock(&spawner_lock);
  close(block);
  if (pid == -EPIPE)
    return dome_error_set(err, EPIPE, "clone3 into new namespaces: the jail spawner is gone");
  if (pid < 0 && pid != -ENOSYS)
    return dome_error_set_errno(err, (int)-pid, "clone3 into new namespaces (in the jail spawner)");
  return pid;
}
