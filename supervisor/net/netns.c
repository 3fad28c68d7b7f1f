/* Running netlink and nftables work inside another network namespace.
 *
 * setns(2) with CLONE_NEWNET changes the namespace of the calling thread only, and sockets keep the
 * namespace they were created in. So work for a jail's (or the egress) namespace runs in a short-lived
 * thread that joins it, does its netlink/nftables calls and ends; the supervisor's own threads never
 * leave the host namespace. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/net/net_internal.h"

struct netns_call {
  int netns_fd; /* < 0: create a new namespace instead of joining one */
  net_netns_fn fn;
  void *arg;
  dome_error err;
  int result;
};

static void *netns_thread(void *opaque) {
  struct netns_call *call = opaque;
  if (call->netns_fd >= 0) {
    if (setns(call->netns_fd, CLONE_NEWNET) < 0) {
      call->result = dome_error_set_errno(&call->err, errno, "join network namespace");
      return NULL;
    }
  } else if (unshare(CLONE_NEWNET) < 0) {
    call->result = dome_error_set_errno(&call->err, errno, "create network namespace");
    return NULL;
  }
  call->result = call->fn(call->arg, &call->err);
  return NULL;
}

static int run_thread(struct netns_call *call, dome_error *err) {
  pthread_t thread;
  int r = pthread_create(&thread, NULL, netns_thread, call);
  if (r != 0) return dome_error_set_errno(err, r, "start network namespace thread");
  pthread_join(thread, NULL);
  if (call->result < 0 && err) *err = call->err;
  return call->result;
}

int net_in_netns(int netns_fd, net_netns_fn fn, void *arg, dome_error *err) {
  if (netns_fd < 0) return fn(arg, err);
  struct netns_call call = {.netns_fd = netns_fd, .fn = fn, .arg = arg};
  return run_thread(&call, err);
}

static int open_own_netns(void *arg, dome_error *err) {
  int *fd_out = arg;
  int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "open /proc/thread-self/ns/net");
  *fd_out = fd;
  return 0;
}

int net_netns_create(dome_error *err) {
  int fd = -1;
  struct netns_call call = {.netns_fd = -1, .fn = open_own_netns, .arg = &fd};
  int r = run_thread(&call, err);
  return r < 0 ? r : fd;
}

/* The child of net_egress_namespaces_create: only system calls (it may be the fork of a multi-threaded
 * supervisor). Takes `owner` as its effective ids, creates the two namespaces, reports, and waits for the
 * parent to have opened and mapped them (its end of `go` closing) before it exits. */
__attribute__((noreturn)) static void egress_namespaces_child(unsigned owner, int ready, int go) {
  char status = 0;
  if (syscall(SYS_setresgid, -1, owner, -1) < 0 || syscall(SYS_setresuid, -1, owner, -1) < 0)
    status = 1;
  else if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
    status = 2;
  int saved = errno;
  char message[2] = {status, (char)(status ? saved : 0)};
  if (write(ready, message, sizeof message) != (ssize_t)sizeof message) _exit(1);
  char ignored;
  while (read(go, &ignored, 1) > 0) {
  }
  _exit(status);
}

static int write_map(pid_t pid, const char *file, const char *text, dome_error *err) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  size_t length = strlen(text);
  int r = fd >= 0 && write(fd, text, length) == (ssize_t)length ? 0 : -errno;
  if (fd >= 0) close(fd);
  return r < 0 ? dome_error_set_errno(err, -r, "write `%s`", path) : 0;
}

int net_egress_namespaces_create(unsigned owner, int *userns_fd, int *netns_fd, dome_error *err) {
  *userns_fd = *netns_fd = -1;
  int ready[2], go[2];
  if (pipe2(ready, O_CLOEXEC) < 0) return dome_error_set_errno(err, errno, "egress namespaces: pipe");
  if (pipe2(go, O_CLOEXEC) < 0) {
    int e = errno;
    close(ready[0]);
    close(ready[1]);
    return dome_error_set_errno(err, e, "egress namespaces: pipe");
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(go[1]);
    egress_namespaces_child(owner, ready[1], go[0]);
  }
  int e = errno;
  close(ready[1]);
  close(go[0]);
  int r = 0;
  char message[2];
  if (pid < 0) {
    r = dome_error_set_errno(err, e, "egress namespaces: fork");
  } else if (read(ready[0], message, sizeof message) != (ssize_t)sizeof message) {
    r = dome_error_set(err, EIO, "egress namespaces: the child ended before reporting");
  } else if (message[0] != 0) {
    r = dome_error_set_errno(
        err, message[1] ? message[1] : EPERM, "egress namespaces: %s",
        message[0] == 1 ? "take the egress ids" : "create the user and network namespaces");
  } else {
    char path[64], map[32];
    snprintf(map, sizeof map, "0 %u 1\n", owner);
    if ((r = write_map(pid, "setgroups", "deny", err)) == 0 &&
        (r = write_map(pid, "uid_map", map, err)) == 0 && (r = write_map(pid, "gid_map", map, err)) == 0) {
      snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
      *userns_fd = open(path, O_RDONLY | O_CLOEXEC);
      snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
      *netns_fd = open(path, O_RDONLY | O_CLOEXEC);
      if (*userns_fd < 0 || *netns_fd < 0) r = dome_error_set_errno(err, errno, "open `%s`", path);
    }
  }
  close(ready[0]);
  close(go[1]); /* the child may go */
  if (pid > 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
  if (r < 0) {
    if (*userns_fd >= 0) close(*userns_fd);
    if (*netns_fd >= 0) close(*netns_fd);
    *userns_fd = *netns_fd = -1;
  }
  return r;
}
