/* Host uids of jails, unique among the live jails of every dome process on the host.
 *
 * A jail's user namespace maps its root to one unprivileged host uid/gid, and the kernel charges per-user
 * budgets (inotify instances and watches, queued signals, pending POSIX message queues, ...) to that uid
 * across namespaces: two jails sharing a uid would share those budgets. A slot n of the
 * JAIL_HOST_ID_COUNT ids is held through an open-file-description write lock on byte n of
 * /run/dome/jail-ids (fcntl(2) F_OFD_SETLK: held per open file, released by the kernel when the
 * supervisor dies, so a crash never leaks a slot). Slots held by this process are also kept in a bitmap:
 * locks of one open file description never conflict with each other. The file is open only while this
 * process holds a slot, and the last process to give an id back removes it (under a lock over the whole
 * file; an acquirer checks, after its first lock, that the file it locked is still the one at the path). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ids_fd = -1;
static uint64_t held[JAIL_HOST_ID_COUNT / 64];
static unsigned held_count; /* the file is closed when it drops to 0: no fd stays open between jails */

#define IDS_PATH JAIL_HOST_ID_DIRECTORY "/jail-ids"

static int lock_range(short type, unsigned start, unsigned length) {
  struct flock region = {
      .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)start, .l_len = (off_t)length};
  return fcntl(ids_fd, F_OFD_SETLK, &region);
}

/* Is ids_fd still the file at IDS_PATH (not unlinked by a process that gave the last id back)? */
static bool ids_fd_current(void) {
  struct stat held_file, named;
  return fstat(ids_fd, &held_file) == 0 && lstat(IDS_PATH, &named) == 0 && held_file.st_dev == named.st_dev &&
         held_file.st_ino == named.st_ino;
}

/* Does a lock over the whole file (a process removing it) stand in the way of `slot`? */
static bool file_being_removed(unsigned slot) {
  struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)slot, .l_len = 1};
  return fcntl(ids_fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK && probe.l_start == 0 &&
         probe.l_len == 0;
}

static int open_ids(dome_error *err) {
  for (int attempt = 0; attempt < 100; attempt++) {
    ids_fd = open(IDS_PATH, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (ids_fd >= 0) return 0;
    if (errno != ENOENT) break; /* ENOENT: no directory yet, or it was removed meanwhile */
    if (mkdir(JAIL_HOST_ID_DIRECTORY, 0755) < 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "create `%s`", JAIL_HOST_ID_DIRECTORY);
  }
  return dome_error_set_errno(err, errno, "open `%s`", IDS_PATH);
}

static void close_ids(void) {
  close(ids_fd);
  ids_fd = -1;
}

int jail_host_id_acquire(unsigned preferred, unsigned *id, dome_error *err) {
  pthread_mutex_lock(&lock);
  for (int attempt = 0; attempt < 100; attempt++) {
    if (ids_fd < 0) {
      int r = open_ids(err);
      if (r < 0) {
        pthread_mutex_unlock(&lock);
        return r;
      }
    }
    bool reopen = false;
    for (unsigned i = 0; i < JAIL_HOST_ID_COUNT; i++) {
      unsigned slot = (preferred + i) % JAIL_HOST_ID_COUNT;
      if (held[slot / 64] & (UINT64_C(1) << (slot % 64))) continue;
      if (lock_range(F_WRLCK, slot, 1) < 0) {
        if (errno != EAGAIN && errno != EACCES) {
          int e = errno;
          if (held_count == 0) close_ids();
          pthread_mutex_unlock(&lock);
          return dome_error_set_errno(err, e, "lock a jail id in `%s`", IDS_PATH);
        }
        if (held_count == 0 && file_being_removed(slot)) {
          reopen = true;
          break;
        }
        continue; /* another supervisor's jail holds it */
      }
      /* Our first lock on this file: make sure it was not unlinked before we locked (while we hold any
       * byte nobody can remove it). */
      if (held_count == 0 && !ids_fd_current()) {
        reopen = true;
        break;
      }
      held[slot / 64] |= UINT64_C(1) << (slot % 64);
      held_count++;
      pthread_mutex_unlock(&lock);
      *id = JAIL_HOST_ID_BASE + slot;
      return 0;
    }
    if (!reopen) break;
    close_ids(); /* also drops the lock taken on the stale file */
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  if (held_count == 0 && ids_fd >= 0) close_ids();
  pthread_mutex_unlock(&lock);
  return dome_error_set(err, EAGAIN, "all %u jail host ids are in use", JAIL_HOST_ID_COUNT);
}

void jail_host_id_release(unsigned id) {
  if (id < JAIL_HOST_ID_BASE || id - JAIL_HOST_ID_BASE >= JAIL_HOST_ID_COUNT) return;
  unsigned slot = id - JAIL_HOST_ID_BASE;
  pthread_mutex_lock(&lock);
  if (ids_fd >= 0 && (held[slot / 64] & (UINT64_C(1) << (slot % 64)))) {
    lock_range(F_UNLCK, slot, 1);
    held[slot / 64] &= ~(UINT64_C(1) << (slot % 64));
    if (--held_count == 0) {
      /* The last id of this process: when no other process holds one either (a lock over the whole
       * file succeeds), remove the file, so nothing stays behind. (The directory stays: it is dome's
       * runtime directory, where domed's control socket also lives.) */
      if (lock_range(F_WRLCK, 0, 0) == 0 && ids_fd_current()) unlink(IDS_PATH);
      close_ids();
    }
  }
  pthread_mutex_unlock(&lock);
}
