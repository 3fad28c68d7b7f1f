/* The blob store (blob.h): content files under blobs/sha256, one hard link per owner under
 * blobs/owners/<owner>; the use per owner and in total is kept in memory, counted from the files at open
 * and updated by every put and prune under one lock. */
#include "supervisor/blob/blob.h"
#include "supervisor/blob/blob_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"

#define BLOB_OWNER_MAX 128
/* snprintf into a path buffer; a path that does not fit is an error, never truncated */
#define PATH_FORMAT(buffer, ...) (snprintf(buffer, sizeof buffer, __VA_ARGS__) < (int)sizeof buffer)

struct blob_store {
  pthread_mutex_t lock;
  char *directory; /* <journal>/blobs */
  uint64_t total_quota;
  uint64_t bytes, blobs, refused, pruned;
  json_t *owners; /* owner -> bytes (integer) */
};

static bool owner_valid(const char *owner) {
  size_t length = owner ? strlen(owner) : 0;
  if (length == 0 || length > BLOB_OWNER_MAX || owner[0] == '.') return false;
  for (size_t i = 0; i < length; i++) {
    char c = owner[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return false;
  }
  return true;
}

static void owner_add(blob_store *store, const char *owner, int64_t bytes) {
  json_int_t now = json_integer_value(json_object_get(store->owners, owner)) + bytes;
  json_object_set_new(store->owners, owner, json_integer(now > 0 ? now : 0));
}

/* Count the regular files of `path` (sizes summed into *bytes); 0 when it does not exist. */
static int count_directory(const char *path, uint64_t *bytes, uint64_t *files, dome_error *err) {
  DIR *dir = opendir(path);
  if (dir == NULL) return errno == ENOENT ? 0 : dome_error_set_errno(err, errno, "blob store `%s`", path);
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (!blob_hex_valid(entry->d_name)) continue;
    struct stat st;
    if (fstatat(dirfd(dir), entry->d_name, &st, 0) == 0 && S_ISREG(st.st_mode)) {
      *bytes += (uint64_t)st.st_size;
      if (files) (*files)++;
    }
  }
  closedir(dir);
  return 0;
}

static int count(blob_store *store, dome_error *err) {
  char path[4200];
  if (!PATH_FORMAT(path, "%s/sha256", store->directory))
    return dome_error_set(err, ENAMETOOLONG, "blob store path");
  DIR *dir = opendir(path);
  if (dir == NULL && errno != ENOENT) return dome_error_set_errno(err, errno, "blob store `%s`", path);
  if (dir) {
    struct dirent *entry;
    while ((entry = readdir(dir))) {
      if (strlen(entry->d_name) != 2 || entry->d_name[0] == '.') continue;
      char sub[4300];
      if (!PATH_FORMAT(sub, "%s/%s", path, entry->d_name)) continue;
      int rc = count_directory(sub, &store->bytes, &store->blobs, err);
      if (rc < 0) {
        closedir(dir);
        return rc;
      }
    }
    closedir(dir);
  }
  if (!PATH_FORMAT(path, "%s/owners", store->directory))
    return dome_error_set(err, ENAMETOOLONG, "blob store path");
  dir = opendir(path);
  if (dir == NULL) return errno == ENOENT ? 0 : dome_error_set_errno(err, errno, "blob store `%s`", path);
  struct dirent *entry;
  int rc = 0;
  while (rc == 0 && (entry = readdir(dir))) {
    if (!owner_valid(entry->d_name)) continue;
    char sub[4300];
    if (!PATH_FORMAT(sub, "%s/%s", path, entry->d_name)) continue;
    uint64_t bytes = 0;
    rc = count_directory(sub, &bytes, NULL, err);
    if (rc == 0) owner_add(store, entry->d_name, (int64_t)bytes);
  }
  closedir(dir);
  return rc;
}

int blob_store_open(const char *journal_dir, uint64_t total_quota, blob_store **out, dome_error *err) {
  *out = NULL;
  blob_store *store = calloc(1, sizeof *store);
  if (store == NULL || asprintf(&store->directory, "%s/blobs", journal_dir) < 0) {
    free(store);
    return dome_error_set(err, ENOMEM, "blob store: out of memory");
  }
  pthread_mutex_init(&store->lock, NULL);
  store->total_quota = total_quota;
  store->owners = json_object();
  int rc = count(store, err);
  if (rc < 0) {
    blob_store_close(store);
    return rc;
  }
  *out = store;
  return 0;
}

void blob_store_close(blob_store *store) {
  if (store == NULL) return;
  json_decref(store->owners);
  pthread_mutex_destroy(&store->lock);
  free(store->directory);
  free(store);
}

static int make_directory(const char *path, dome_error *err) {
  if (mkdir(path, 0700) < 0 && errno != EEXIST) return dome_error_set_errno(err, errno, "mkdir `%s`", path);
  return 0;
}

/* Write the content file `path` (temp file, fsync, rename). */

int blob_store_put(blob_store *store, const char *owner, uint64_t owner_quota, const void *data,
                   size_t length, const char *hex, dome_error *err) {
  if (!owner_valid(owner))
    return dome_error_set(err, EINVAL, "blob owner `%.140s`: expected [A-Za-z0-9._-], 1..%d bytes",
                          owner ? owner : "", BLOB_OWNER_MAX);
  if (!blob_hex_valid(hex)) return dome_error_set(err, EINVAL, "blob `%.80s`: not a SHA-256 in hex", hex);
  char content[4200], link_path[4300], directory[4200];
  if (!PATH_FORMAT(content, "%s/sha256/%.2s/%s", store->directory, hex, hex) ||
      !PATH_FORMAT(link_path, "%s/owners/%s/%s", store->directory, owner, hex))
    return dome_error_set(err, ENAMETOOLONG, "blob store path");
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  struct stat st;
  if (lstat(link_path, &st) == 0) { /* the owner holds it: keep it past the next prune */
    utimensat(AT_FDCWD, content, NULL, 0);
    goto out_kept;
  }
  bool present = stat(content, &st) == 0;
  uint64_t owner_bytes = (uint64_t)json_integer_value(json_object_get(store->owners, owner));
  if (owner_quota && owner_bytes + length > owner_quota) {
    store->refused++;
    rc =
        dome_error_set(err, EDQUOT, "blob quota of capability `%s` (%llu bytes) reached: %llu used, %zu more",
                       owner, (unsigned long long)owner_quota, (unsigned long long)owner_bytes, length);
    goto out_not_kept;
  }
  if (!present && store->total_quota && store->bytes + length > store->total_quota) {
    store->refused++;
    rc = dome_error_set(err, EDQUOT, "blob_quota (%llu bytes) reached: %llu used, %zu more",
                        (unsigned long long)store->total_quota, (unsigned long long)store->bytes, length);
    goto out_not_kept;
  }
  const char *parts[] = {"", "/sha256", "/owners"};
  for (size_t i = 0; i < 3 && rc == 0; i++) {
    rc = PATH_FORMAT(directory, "%s%s", store->directory, parts[i])
             ? make_directory(directory, err)
             : dome_error_set(err, ENAMETOOLONG, "blob path");
  }
  if (rc == 0) {
    rc = PATH_FORMAT(directory, "%s/sha256/%.2s", store->directory, hex)
             ? make_directory(directory, err)
             : dome_error_set(err, ENAMETOOLONG, "blob path");
  }
  if (rc == 0) {
    rc = PATH_FORMAT(directory, "%s/owners/%s", store->directory, owner)
             ? make_directory(directory, err)
             : dome_error_set(err, ENAMETOOLONG, "blob path");
  }
  if (rc == 0 && !present) {
    rc = blob_file_write(content, data, length, err);
    if (rc == 0) {
      store->bytes += length;
      store->blobs++;
    }
  } else if (rc == 0) {
    utimensat(AT_FDCWD, content, NULL, 0);
  }
  if (rc == 0 && link(content, link_path) < 0 && errno != EEXIST)
    rc = dome_error_set_errno(err, errno, "link blob `%s`", link_path);
  if (rc < 0) goto out;
  owner_add(store, owner, (int64_t)length);
out_kept:
  pthread_mutex_unlock(&store->lock);
  return 1;
out_not_kept:
  pthread_mutex_unlock(&store->lock);
  return 0;
out:
  pthread_mutex_unlock(&store->lock);
  return rc;
}

int blob_store_release(blob_store *store, const char *owner, const char *hex, dome_error *err) {
  if (!owner_valid(owner))
    return dome_error_set(err, EINVAL, "blob owner `%.140s`: expected [A-Za-z0-9._-], 1..%d bytes",
                          owner ? owner : "", BLOB_OWNER_MAX);
  if (!blob_hex_valid(hex)) return dome_error_set(err, EINVAL, "blob `%.80s`: not a SHA-256 in hex", hex);
  char content[4200], link_path[4300];
  if (!PATH_FORMAT(content, "%s/sha256/%.2s/%s", store->directory, hex, hex) ||
      !PATH_FORMAT(link_path, "%s/owners/%s/%s", store->directory, owner, hex))
    return dome_error_set(err, ENAMETOOLONG, "blob store path");
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  struct stat st;
  if (lstat(link_path, &st) < 0) goto out; /* not this owner's */
  if (unlink(link_path) < 0) {
    rc = dome_error_set_errno(err, errno, "unlink `%s`", link_path);
    goto out;
  }
  owner_add(store, owner, -(int64_t)st.st_size);
  /* the content is one more link of the same inode: alone now, no owner holds it */
  if (stat(content, &st) == 0 && st.st_nlink == 1 && unlink(content) == 0) {
    store->bytes -= (uint64_t)st.st_size > store->bytes ? store->bytes : (uint64_t)st.st_size;
    if (store->blobs) store->blobs--;
    rc = 1;
  }
out:
  pthread_mutex_unlock(&store->lock);
  return rc;
}

void blob_store_usage(blob_store *store, struct blob_store_usage *usage) {
  pthread_mutex_lock(&store->lock);
  *usage = (struct blob_store_usage){store->bytes, store->blobs, store->total_quota, store->refused,
                                     store->pruned};
  pthread_mutex_unlock(&store->lock);
}

uint64_t blob_store_owner_bytes(blob_store *store, const char *owner) {
  pthread_mutex_lock(&store->lock);
  uint64_t bytes = (uint64_t)json_integer_value(json_object_get(store->owners, owner));
  pthread_mutex_unlock(&store->lock);
  return bytes;
}

json_t *blob_store_owners(blob_store *store) {
  pthread_mutex_lock(&store->lock);
  json_t *owners = json_deep_copy(store->owners);
  pthread_mutex_unlock(&store->lock);
  return owners;
}

int blob_store_prune(blob_store *store, int64_t before_ns, dome_error *err) {
  char path[4200];
  if (!PATH_FORMAT(path, "%s/sha256", store->directory))
    return dome_error_set(err, ENAMETOOLONG, "blob store path");
  pthread_mutex_lock(&store->lock);
  int removed = 0, rc = 0;
  DIR *dir = opendir(path);
  if (dir == NULL) {
    rc = errno == ENOENT ? 0 : dome_error_set_errno(err, errno, "blob store `%s`", path);
    pthread_mutex_unlock(&store->lock);
    return rc;
  }
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (strlen(entry->d_name) != 2 || entry->d_name[0] == '.') continue;
    char sub[4300];
    if (!PATH_FORMAT(sub, "%s/%s", path, entry->d_name)) continue;
    DIR *inner = opendir(sub);
    if (inner == NULL) continue;
    struct dirent *blob;
    while ((blob = readdir(inner))) {
      if (!blob_hex_valid(blob->d_name)) continue;
      struct stat st;
      if (fstatat(dirfd(inner), blob->d_name, &st, 0) < 0 ||
          (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec >= before_ns)
        continue;
      const char *owner;
      json_t *bytes;
      void *next;
      json_object_foreach_safe(store->owners, next, owner, bytes) {
        char link_path[4400];
        if (PATH_FORMAT(link_path, "%s/owners/%s/%s", store->directory, owner, blob->d_name) &&
            unlink(link_path) == 0)
          owner_add(store, owner, -(int64_t)st.st_size);
      }
      if (unlinkat(dirfd(inner), blob->d_name, 0) == 0) {
        store->bytes -= (uint64_t)st.st_size > store->bytes ? store->bytes : (uint64_t)st.st_size;
        if (store->blobs) store->blobs--;
        store->pruned++;
        removed++;
      }
    }
    closedir(inner);
  }
  closedir(dir);
  pthread_mutex_unlock(&store->lock);
  return removed;
}
