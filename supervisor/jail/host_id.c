/* Host uids of jails, unique among the live jails of every dome process on the host.
 *
 * A jail's user namespace maps its root to one unprivileged host uid/gid, and the kernel charges per-user
 * budgets (inotify instances and watches, queued signals, pending POSIX message queues, ...) to that uid
 * across namespaces: two jails sharing a uid would share those budgets. Slot n of the JAIL_HOST_ID_COUNT
 * ids is held by binding an abstract unix socket named "dome/jail-id/<n>" (unix(7), "Abstract sockets"):
 * the kernel refuses a second bind of the name in the same network namespace (EADDRINUSE), drops it when
 * the socket is closed or its holder dies, and nothing exists in any file system, so nothing is left
 * behind. Every dome process binds in the host's network namespace (jails have their own: they cannot see
 * or take these names). */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int held[JAIL_HOST_ID_COUNT]; /* socket fd + 1 of each slot this process holds, 0 when none */

/* Bind the slot's name: 0 and *socket_fd set, -EADDRINUSE when someone holds it, else -errno. */
static int take(unsigned slot, int *socket_fd) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  struct sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  int length = snprintf(address.sun_path + 1, sizeof address.sun_path - 1, "dome/jail-id/%u", slot);
  if (bind(fd, (struct sockaddr *)&address,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + length)) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  *socket_fd = fd;
  return 0;
}

int jail_host_id_acquire(unsigned preferred, unsigned *id, dome_error *err) {
  pthread_mutex_lock(&lock);
  for (unsigned i = 0; i < JAIL_HOST_ID_COUNT; i++) {
    unsigned slot = (preferred + i) % JAIL_HOST_ID_COUNT;
    if (held[slot]) continue; /* ours already (another jail of this process) */
    int fd = -1, r = take(slot, &fd);
    if (r == -EADDRINUSE) continue; /* another process's jail holds it */
    if (r < 0) {
      pthread_mutex_unlock(&lock);
      return dome_error_set_errno(err, -r, "reserve jail id %u (abstract unix socket)", slot);
    }
    held[slot] = fd + 1;
    pthread_mutex_unlock(&lock);
    *id = JAIL_HOST_ID_BASE + slot;
    return 0;
  }
  pthread_mutex_unlock(&lock);
  return dome_error_set(err, EAGAIN, "all %u jail host ids are in use", JAIL_HOST_ID_COUNT);
}

void jail_host_id_release(unsigned id) {
  if (id < JAIL_HOST_ID_BASE || id - JAIL_HOST_ID_BASE >= JAIL_HOST_ID_COUNT) return;
  unsigned slot = id - JAIL_HOST_ID_BASE;
  pthread_mutex_lock(&lock);
  if (held[slot]) close(held[slot] - 1);
  held[slot] = 0;
  pthread_mutex_unlock(&lock);
}
