/* The jail's network namespace, made ahead of clone3 on a helper thread: creating a network namespace is
 * the costliest part of a jail's start (every per-namespace subsystem initialises), and a thread of its
 * own overlaps it with the supervisor's other preparations (image, cgroup leaf, host id). The thread
 * unshares only its own network namespace (setns(2)/unshare(2) act per thread), brings up its loopback
 * and hands back an fd naming it; jail_run then clones the child from inside it (jail_netns_enter).
 *
 * The namespace is owned by the supervisor's user namespace, not the jail's: nothing inside holds a
 * capability over it (the program holds none anywhere), so neither its interfaces nor its sysctls can be
 * changed from the jail. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

static int loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  struct ifreq request;
  memset(&request, 0, sizeof request);
  memcpy(request.ifr_name, "lo", 3);
  int r = 0;
  if (ioctl(fd, SIOCGIFFLAGS, &request) < 0)
    r = -errno;
  else {
    request.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &request) < 0) r = -errno;
  }
  close(fd);
  return r;
}

static void *prepare_main(void *argument) {
  struct jail_netns *n = argument;
  if (unshare(CLONE_NEWNET) < 0) {
    n->error = errno, n->step = "create network namespace";
    return NULL;
  }
  int r = loopback_up();
  if (r < 0) {
    n->error = -r, n->step = "bring up lo";
    return NULL;
  }
  n->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (n->fd < 0) n->error = errno, n->step = "open the new network namespace";
  return NULL; /* the thread's end drops its reference; n->fd keeps the namespace */
}

int jail_netns_start(struct jail_netns *n, dome_error *err) {
  memset(n, 0, sizeof *n);
  n->fd = -1;
  int r = pthread_create(&n->thread, NULL, prepare_main, n);
  if (r != 0) return dome_error_set_errno(err, r, "start the network namespace thread");
  n->started = true;
  return 0;
}

int jail_netns_finish(struct jail_netns *n, dome_error *err) {
  if (n->started) pthread_join(n->thread, NULL);
  n->started = false;
  if (n->error) return dome_error_set_errno(err, n->error, "%s", n->step);
  return n->fd;
}

void jail_netns_release(struct jail_netns *n) {
  if (n->started) pthread_join(n->thread, NULL);
  n->started = false;
  if (n->fd >= 0) close(n->fd);
  n->fd = -1;
}
