/* Host uids of jails, unique among the live jails of every dome process on the host.
 *
 * A jail's user namespace maps its root to one unprivileged host uid/gid, and the kernel charges per-user
 * budgets (inotify instances and watches, queued signals, pending POSIX message queues, ...) to that uid
 * across namespaces: two jails sharing a uid would share those budgets. A slot n of the
 * JAIL_HOST_ID_COUNT ids is held through an open-file-description write lock on byte n of
 * /run/dome/jail-ids (fcntl(2) F_OFD_SETLK: held per open file, released by the kernel when the
 * supervisor dies, so a crash never leaks a slot). Slots held by this process are also kept in a bitmap:
 * locks of one open file description never conflict with each other. The file is open only while this
 * process holds a slot. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ids_fd = -1;
static uint64_t held[JAIL_HOST_ID_COUNT / 64];
static unsigned held_count; /* the file is closed when it drops to 0: no fd stays open between jails */

static int lock_byte(unsigned slot, short type) {
  struct flock region = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)slot, .l_len = 1};
  return fcntl(ids_fd, F_OFD_SETLK, &region);
}

int jail_host_id_acquire(unsigned preferred, unsigned *id, dome_error *err) {
  pthread_mutex_lock(&lock);
  if (ids_fd < 0) {
    if (mkdir(JAIL_HOST_ID_DIRECTORY, 0755) < 0 && errno != EEXIST) {
      int e = errno;
      pthread_mutex_unlock(&lock);
      return dome_error_set_errno(err, e, "create `%s`", JAIL_HOST_ID_DIRECTORY);
    }
    ids_fd = open(JAIL_HOST_ID_DIRECTORY "/jail-ids", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (ids_fd < 0) {
      int e = errno;
      pthread_mutex_unlock(&lock);
      return dome_error_set_errno(err, e, "open `%s/jail-ids`", JAIL_HOST_ID_DIRECTORY);
    }
  }
  for (unsigned i = 0; i < JAIL_HOST_ID_COUNT; i++) {
    unsigned slot = (preferred + i) % JAIL_HOST_ID_COUNT;
    if (held[slot / 64] & (UINT64_C(1) << (slot % 64))) continue;
    if (lock_byte(slot, F_WRLCK) < 0) {
      if (errno == EAGAIN || errno == EACCES) continue; /* another supervisor's jail holds it */
      int e = errno;
      pthread_mutex_unlock(&lock);
      return dome_error_set_errno(err, e, "lock a jail id in `%s/jail-ids`", JAIL_HOST_ID_DIRECTORY);
    }
    held[slot / 64] |= UINT64_C(1) << (slot % 64);
    held_count++;
    pthread_mutex_unlock(&lock);
    *id = JAIL_HOST_ID_BASE + slot;
    return 0;
  }
  if (held_count == 0) {
    close(ids_fd);
    ids_fd = -1;
  }
  pthread_mutex_unlock(&lock);
  return dome_error_set(err, EAGAIN, "all %u jail host ids are in use", JAIL_HOST_ID_COUNT);
}

void jail_host_id_release(unsigned id) {
  if (id < JAIL_HOST_ID_BASE || id - JAIL_HOST_ID_BASE >= JAIL_HOST_ID_COUNT) return;
  unsigned slot = id - JAIL_HOST_ID_BASE;
  pthread_mutex_lock(&lock);
  if (ids_fd >= 0 && (held[slot / 64] & (UINT64_C(1) << (slot % 64)))) {
    lock_byte(slot, F_UNLCK);
    held[slot / 64] &= ~(UINT64_C(1) << (slot % 64));
    if (--held_count == 0) {
      close(ids_fd);
      ids_fd = -1;
    }
  }
  pthread_mutex_unlock(&lock);
}
