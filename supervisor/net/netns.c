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
#include <string.h>
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
