/* Files of a session's /workspace for the file tools (see session.h). Every path is walked one
 * component at a time with O_NOFOLLOW from the workspace's fd, so no symlink is ever followed (a link
 * the agent's code made cannot lead out), and each directory must be on the workspace's own file system
 * (no mount crossed). domed runs as root; every operation runs with the file-system identity of the
 * workspace's owner (the jail's root, setfsuid/setfsgid of the calling thread only): the jail's tmpfs
 * belongs to its user namespace, where the host's root is not mapped (the kernel refuses to create files
 * for it, EOVERFLOW), and that identity has none of root's file capabilities, so an operation can do
 * exactly what the jail's own root could in /workspace and no more. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/common/utf8.h"
#include "supervisor/session/session.h"

#define PATH_MAX_BYTES 4096u

/* The calling thread's file-system identity while an operation runs. */
struct fs_identity {
  int previous_uid, previous_gid;
  bool set;
};

static int become_owner(int workspace_fd, struct fs_identity *identity, dome_error *err) {
  struct stat top;
  *identity = (struct fs_identity){0};
  if (fstat(workspace_fd, &top) < 0) return dome_error_set_errno(err, errno, "workspace");
  identity->previous_gid = setfsgid(top.st_gid);
  identity->previous_uid = setfsuid(top.st_uid);
  identity->set = true;
  /* setfsuid answers the previous value even when it fails: a second call tells */
  if ((uid_t)setfsuid(top.st_uid) != top.st_uid || (gid_t)setfsgid(top.st_gid) != top.st_gid)
    return dome_error_set(err, EPERM, "workspace: cannot take the identity of its owner");
  return 0;
}

static void restore_identity(struct fs_identity *identity) {
  if (!identity->set) return;
  setfsuid((uid_t)identity->previous_uid);
  setfsgid((gid_t)identity->previous_gid);
}
#define _as_owner_ __attribute__((cleanup(restore_identity))) struct fs_identity
#define PATH_MAX_COMPONENTS 32u

int session_path_check(const char *path, dome_error *err) {
  if (path == NULL || path[0] == '\0') return dome_error_set(err, EINVAL, "path: empty");
  size_t length = strlen(path);
  if (length > PATH_MAX_BYTES) return dome_error_set(err, EINVAL, "path of %zu bytes (at most 4096)", length);
  if (path[0] == '/')
    return dome_error_set(err, EINVAL, "path `%s`: absolute (paths are relative to /workspace)", path);
  size_t clean_length = 0;
  char *clean = dome_utf8_sanitize(path, length, true, &clean_length);
  bool valid = clean && clean_length == length && memcmp(clean, path, length) == 0;
  free(clean);
  if (!valid) return dome_error_set(err, EINVAL, "path: not valid UTF-8");
  unsigned components = 0;
  for (const char *p = path; *p;) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0 && slash && slash[1] == '\0') break; /* a trailing '/' */
    if (n == 0) return dome_error_set(err, EINVAL, "path `%s`: empty component", path);
    if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      return dome_error_set(err, EINVAL, "path `%s`: `.` and `..` are refused", path);
    if (++components > PATH_MAX_COMPONENTS)
      return dome_error_set(err, EINVAL, "path `%s`: more than 32 components", path);
    p += n;
    if (*p == '/') p++;
  }
  return 0;
}

/* A copy of `path` with one byte to spare, as split_leaf needs; NULL when out of memory. */
static char *leaf_copy(const char *path) {
  size_t n = strlen(path);
  char *copy = malloc(n + 2);
  if (copy) memcpy(copy, path, n + 1);
  return copy;
}

/* Split off the last component: *leaf points into `copy` (from leaf_copy: a path without a slash is
 * moved one byte on), which then holds the parent ("" for the top). */
static char *split_leaf(char *copy) {
  size_t n = strlen(copy);
  while (n > 1 && copy[n - 1] == '/') copy[--n] = '\0';
  char *slash = strrchr(copy, '/');
  if (slash == NULL) {
    memmove(copy + 1, copy, n + 1);
    copy[0] = '\0';
    return copy + 1;
  }
  *slash = '\0';
  return slash + 1;
}

/* The directory `parent` beneath workspace_fd, each component a real directory on the workspace's file
 * system; with `create`, missing ones are made (0755, owned as the workspace). Returns an fd or -errno. */
static int open_parent(int workspace_fd, const char *parent, const char *path, bool create, dome_error *err) {
  struct stat top;
  if (fstat(workspace_fd, &top) < 0) return dome_error_set_errno(err, errno, "workspace");
  int fd = fcntl(workspace_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return dome_error_set_errno(err, errno, "workspace");
  _cleanup_free_ char *copy = strdup(parent);
  if (copy == NULL) {
    close(fd);
    return dome_error_set(err, ENOMEM, "path `%s`", path);
  }
  for (char *save = NULL, *name = strtok_r(copy, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
    int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        close(fd);
        return dome_error_set_errno(err, e, "path `%s`: create directory `%s`", path, name);
      }
      next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    int e = errno;
    struct stat link;
    bool symlink = next < 0 && fstatat(fd, name, &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode);
    close(fd);
    if (next < 0) {
      if (symlink) return dome_error_set(err, ELOOP, "path `%s`: `%s` is a symlink (refused)", path, name);
      if (e == ENOTDIR) return dome_error_set(err, ENOTDIR, "path `%s`: `%s` is not a directory", path, name);
      return dome_error_set_errno(err, e, "path `%s`", path);
    }
    struct stat st;
    if (fstat(next, &st) < 0 || st.st_dev != top.st_dev) {
      close(next);
      return dome_error_set(err, EXDEV, "path `%s`: `%s` is not on the workspace's file system", path, name);
    }
    fd = next;
  }
  return fd;
}

/* The directory holding the last component of `path` (open_parent's fd or -errno) and that component:
 * *leaf points into *copy, which the caller frees. */
static int open_leaf_parent(int workspace_fd, const char *path, bool create, char **copy, const char **leaf,
                            dome_error *err) {
  *copy = leaf_copy(path);
  if (*copy == NULL) return dome_error_set(err, ENOMEM, "path `%s`", path);
  *leaf = split_leaf(*copy);
  return open_parent(workspace_fd, *copy, path, create, err);
}

int session_file_write(int workspace_fd, const char *path, const void *data, size_t length, dome_error *err) {
  int rc = session_path_check(path, err);
  if (rc < 0) return rc;
  _as_owner_ identity;
  if ((rc = become_owner(workspace_fd, &identity, err)) < 0) return rc;
  if (length > SESSION_FILE_MAX)
    return dome_error_set(err, EFBIG, "path `%s`: %zu bytes (at most %u)", path, length, SESSION_FILE_MAX);
  if (path[strlen(path) - 1] == '/') return dome_error_set(err, EINVAL, "path `%s`: names a directory", path);
  _cleanup_free_ char *copy = NULL;
  const char *leaf = NULL;
  _cleanup_close_ int parent = open_leaf_parent(workspace_fd, path, true, &copy, &leaf, err);
  if (parent < 0) return parent;
  struct stat top;
  if (fstat(workspace_fd, &top) < 0) return dome_error_set_errno(err, errno, "workspace");
  /* what is there already must be a regular file (a FIFO is never opened: it could block or be read) */
  struct stat there;
  if (fstatat(parent, leaf, &there, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(there.st_mode)) {
    if (S_ISLNK(there.st_mode)) return dome_error_set(err, ELOOP, "path `%s`: a symlink (refused)", path);
    if (S_ISDIR(there.st_mode)) return dome_error_set(err, EISDIR, "path `%s`: a directory", path);
    return dome_error_set(err, EEXIST, "path `%s`: a special file is there (refused)", path);
  }
  _cleanup_close_ int fd =
      openat(parent, leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP) return dome_error_set(err, ELOOP, "path `%s`: a symlink (refused)", path);
    if (errno == EISDIR) return dome_error_set(err, EISDIR, "path `%s`: a directory", path);
    return dome_error_set_errno(err, errno, "path `%s`", path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0) return dome_error_set_errno(err, errno, "path `%s`", path);
  if (!S_ISREG(st.st_mode))
    return dome_error_set(err, EEXIST, "path `%s`: a special file is there (refused)", path);
  if (ftruncate(fd, 0) < 0) return dome_error_set_errno(err, errno, "path `%s`", path);
  const char *p = data;
  for (size_t done = 0; done < length;) {
    ssize_t n = write(fd, p + done, length - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      if (ftruncate(fd, 0) < 0) { /* what was written is dropped either way: the file is empty */
      }
      return dome_error_set_errno(err, e, "path `%s`: write", path);
    }
    done += (size_t)n;
  }
  if (fchown(fd, top.st_uid, top.st_gid) < 0)
    return dome_error_set_errno(err, errno, "path `%s`: owner", path);
  if (fchmod(fd, 0644) < 0) return dome_error_set_errno(err, errno, "path `%s`: mode", path);
  return 0;
}

int session_file_read(int workspace_fd, const char *path, size_t max, char **data, size_t *length,
                      dome_error *err) {
  *data = NULL;
  *length = 0;
  int rc = session_path_check(path, err);
  if (rc < 0) return rc;
  _as_owner_ identity;
  if ((rc = become_owner(workspace_fd, &identity, err)) < 0) return rc;
  _cleanup_free_ char *copy = NULL;
  const char *leaf = NULL;
  _cleanup_close_ int parent = open_leaf_parent(workspace_fd, path, false, &copy, &leaf, err);
  if (parent < 0) return parent;
  struct stat there;
  if (fstatat(parent, leaf, &there, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(there.st_mode) &&
      !S_ISDIR(there.st_mode)) {
    if (S_ISLNK(there.st_mode)) return dome_error_set(err, ELOOP, "path `%s`: a symlink (refused)", path);
    return dome_error_set(err, EPERM, "path `%s`: a special file (refused)", path);
  }
  _cleanup_close_ int fd = openat(parent, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) return dome_error_set(err, ELOOP, "path `%s`: a symlink (refused)", path);
    if (errno == ENOENT) return dome_error_set(err, ENOENT, "path `%s`: no such file", path);
    return dome_error_set_errno(err, errno, "path `%s`", path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0) return dome_error_set_errno(err, errno, "path `%s`", path);
  if (S_ISDIR(st.st_mode))
    return dome_error_set(err, EISDIR, "path `%s`: a directory (use list_files)", path);
  if (!S_ISREG(st.st_mode)) return dome_error_set(err, EPERM, "path `%s`: a special file (refused)", path);
  if ((uint64_t)st.st_size > max)
    return dome_error_set(err, EFBIG, "path `%s`: %lld bytes (at most %zu)", path, (long long)st.st_size,
                          max);
  char *buffer = malloc((size_t)st.st_size + 1);
  if (buffer == NULL) return dome_error_set(err, ENOMEM, "path `%s`", path);
  size_t used = 0;
  for (;;) {
    ssize_t n = read(fd, buffer + used, (size_t)st.st_size - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      free(buffer);
      return dome_error_set_errno(err, e, "path `%s`: read", path);
    }
    if (n == 0 || (used += (size_t)n) == (size_t)st.st_size) break;
  }
  buffer[used] = '\0';
  *data = buffer;
  *length = used;
  return 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_directory(int fd, const char *prefix, unsigned depth, json_t *list, bool *truncated,
                          dev_t device) {
  DIR *dir = fdopendir(fd);
  if (dir == NULL) {
    close(fd);
    return -errno;
  }
  char **names = NULL;
  size_t count = 0, capacity = 0;
  for (struct dirent *entry; (entry = readdir(dir));) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    if (count == capacity) {
      capacity = capacity ? capacity * 2 : 32;
      char **grown = realloc(names, capacity * sizeof *names);
      if (grown == NULL) break;
      names = grown;
    }
    names[count] = strdup(entry->d_name);
    if (names[count]) count++;
    if (count > SESSION_LIST_MAX) break;
  }
  if (count) qsort(names, count, sizeof *names, compare_names);
  for (size_t i = 0; i < count; i++) {
    if (json_array_size(list) >= SESSION_LIST_MAX) {
      *truncated = true;
      break;
    }
    struct stat st;
    if (fstatat(dirfd(dir), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    char *relative = NULL;
    if (asprintf(&relative, "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]) < 0) continue;
    char *clean = dome_utf8_sanitize(relative, strlen(relative), true, NULL);
    const char *type = S_ISREG(st.st_mode)   ? "file"
                       : S_ISDIR(st.st_mode) ? "directory"
                       : S_ISLNK(st.st_mode) ? "symlink"
                                             : "other";
    json_array_append_new(list, json_pack("{s:s,s:s,s:I}", "path", clean ? clean : "", "type", type, "size",
                                          (json_int_t)(S_ISREG(st.st_mode) ? st.st_size : 0)));
    free(clean);
    if (S_ISDIR(st.st_mode) && st.st_dev == device) {
      if (depth + 1 >= PATH_MAX_COMPONENTS) {
        *truncated = true;
      } else {
        int child = openat(dirfd(dir), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child >= 0) list_directory(child, relative, depth + 1, list, truncated, device);
      }
    }
    free(relative);
  }
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
  closedir(dir);
  return 0;
}

json_t *session_file_list(int workspace_fd, const char *path, bool *truncated, dome_error *err) {
  *truncated = false;
  _as_owner_ identity;
  if (become_owner(workspace_fd, &identity, err) < 0) return NULL;
  struct stat top;
  if (fstat(workspace_fd, &top) < 0) {
    dome_error_set_errno(err, errno, "workspace");
    return NULL;
  }
  int fd;
  if (path == NULL || path[0] == '\0') {
    fd = openat(workspace_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      dome_error_set_errno(err, errno, "workspace");
      return NULL;
    }
    path = "";
  } else {
    if (session_path_check(path, err) < 0) return NULL;
    fd = open_parent(workspace_fd, path, path, false, err);
    if (fd < 0) return NULL;
  }
  json_t *list = json_array();
  _cleanup_free_ char *prefix = strdup(path);
  if (prefix) {
    size_t n = strlen(prefix);
    while (n && prefix[n - 1] == '/') prefix[--n] = '\0';
  }
  if (list == NULL || prefix == NULL) {
    close(fd);
    json_decref(list);
    dome_error_set(err, ENOMEM, "list_files");
    return NULL;
  }
  list_directory(fd, prefix, 0, list, truncated, top.st_dev);
  return list;
}

int session_file_delete(int workspace_fd, const char *path, dome_error *err) {
  int rc = session_path_check(path, err);
  if (rc < 0) return rc;
  _as_owner_ identity;
  if ((rc = become_owner(workspace_fd, &identity, err)) < 0) return rc;
  _cleanup_free_ char *copy = NULL;
  const char *leaf = NULL;
  _cleanup_close_ int parent = open_leaf_parent(workspace_fd, path, false, &copy, &leaf, err);
  if (parent < 0) return parent;
  if (unlinkat(parent, leaf, 0) == 0) return 0;
  if (errno == EISDIR && unlinkat(parent, leaf, AT_REMOVEDIR) == 0) return 0;
  if (errno == ENOENT) return dome_error_set(err, ENOENT, "path `%s`: no such file", path);
  if (errno == ENOTEMPTY) return dome_error_set(err, ENOTEMPTY, "path `%s`: directory not empty", path);
  return dome_error_set_errno(err, errno, "path `%s`", path);
}

int session_connection_write(int root_fd, const char *text, dome_error *err) {
  _cleanup_close_ int tmp = openat(root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (tmp < 0) return dome_error_set_errno(err, errno, "the session's /tmp");
  _cleanup_close_ int dir =
      openat(tmp, SESSION_SOCKET_DIR + sizeof "/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return dome_error_set_errno(err, errno, "%s", SESSION_SOCKET_DIR);
  int rc = session_file_write(dir, "connection.tmp", text, strlen(text), err);
  if (rc < 0) return rc;
  /* as the directory's owner: the jail's tmpfs knows no other ids (EOVERFLOW for the host's root) */
  _as_owner_ identity;
  if ((rc = become_owner(dir, &identity, err)) < 0) return rc;
  if (renameat(dir, "connection.tmp", dir, "connection.json") < 0)
    return dome_error_set_errno(err, errno, "%s/connection.json", SESSION_SOCKET_DIR);
  return 0;
}
