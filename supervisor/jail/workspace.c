/* /workspace in and out: reading a host directory into the list of input files (regular files and
 * directories only), listing the files the program created or modified, copying them back. Every host
 * and jail path is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) or
 * O_NOFOLLOW, so a symlink planted by the program can never redirect a read or a write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/jail/internal.h"

#define MAX_RELATIVE_PATH 1024

static int open_beneath(int dirfd, const char *path, int flags, unsigned mode) {
  struct open_how how = {
      .flags = (uint64_t)flags | O_CLOEXEC | O_NOFOLLOW,
      .mode = (flags & O_CREAT) ? mode : 0,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
  int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  return fd < 0 ? -errno : fd;
}

int jail_workspace_check_path(const char *path, const char *what, dome_error *err) {
  size_t length = strlen(path);
  if (length == 0 || length > MAX_RELATIVE_PATH)
    return dome_error_set(err, EINVAL, "%s `%s`: empty or longer than %d bytes", what, path,
                          MAX_RELATIVE_PATH);
  if (path[0] == '/')
    return dome_error_set(err, EINVAL, "%s `%s`: must be relative to /workspace", what, path);
  unsigned depth = 0;
  for (const char *p = path; *p;) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 0 && end && end[1] != '\0')
      return dome_error_set(err, EINVAL, "%s `%s`: empty path component", what, path);
    if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      return dome_error_set(err, EINVAL, "%s `%s`: `.` and `..` are not allowed", what, path);
    if (++depth > JAIL_MAX_PATH_DEPTH)
      return dome_error_set(err, EINVAL, "%s `%s`: deeper than %u directories", what, path,
                            JAIL_MAX_PATH_DEPTH);
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

static int push(struct jail_workspace_input *in, char *path, char *data, size_t length, unsigned mode,
                bool owned, dome_error *err) {
  if (in->count >= JAIL_MAX_INPUT_FILES) {
    if (owned) free(data);
    free(path);
    return dome_error_set(err, EFBIG, "workspace: more than %u files", JAIL_MAX_INPUT_FILES);
  }
  size_t n = in->count + 1;
  char **paths = realloc(in->paths, n * sizeof *paths);
  if (paths) in->paths = paths;
  char **datas = realloc(in->data, n * sizeof *datas);
  if (datas) in->data = datas;
  size_t *lengths = realloc(in->lengths, n * sizeof *lengths);
  if (lengths) in->lengths = lengths;
  unsigned *modes = realloc(in->modes, n * sizeof *modes);
  if (modes) in->modes = modes;
  bool *owneds = realloc(in->owned, n * sizeof *owneds);
  if (owneds) in->owned = owneds;
  if (!paths || !datas || !lengths || !modes || !owneds || !path) {
    if (owned) free(data);
    free(path);
    return dome_error_set(err, ENOMEM, "workspace: out of memory");
  }
  in->paths[in->count] = path;
  in->data[in->count] = data;
  in->lengths[in->count] = length;
  in->modes[in->count] = mode;
  in->owned[in->count] = owned;
  in->count++;
  return 0;
}

/* Read the host directory `dirfd` (relative prefix `prefix`) into `in`, depth-bounded. */
static int collect_dir(struct jail_workspace_input *in, int dirfd, const char *prefix, unsigned depth,
                       uint64_t limit, const char *root, dome_error *err) {
  if (depth > JAIL_MAX_PATH_DEPTH)
    return dome_error_set(err, EINVAL, "workspace `%s`: deeper than %u directories at `%s`", root,
                          JAIL_MAX_PATH_DEPTH, prefix);
  int listfd = dup(dirfd);
  DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
  if (!d) {
    if (listfd >= 0) close(listfd);
    return dome_error_set_errno(err, errno, "read workspace `%s/%s`", root, prefix);
  }
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char relative[MAX_RELATIVE_PATH + 2];
    if (snprintf(relative, sizeof relative, "%s%s", prefix, e->d_name) > MAX_RELATIVE_PATH) {
      r = dome_error_set(err, ENAMETOOLONG, "workspace `%s`: path too long at `%s`", root, prefix);
      break;
    }
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (S_ISDIR(st.st_mode)) {
      int child = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        r = dome_error_set_errno(err, errno, "open workspace directory `%s/%s`", root, relative);
        break;
      }
      char *dir_path = NULL;
      if (asprintf(&dir_path, "%s/", relative) < 0) dir_path = NULL;
      r = push(in, dir_path, NULL, 0, st.st_mode & 07777, false, err);
      char nested[MAX_RELATIVE_PATH + 3];
      snprintf(nested, sizeof nested, "%s/", relative);
      if (r == 0) r = collect_dir(in, child, nested, depth + 1, limit, root, err);
      close(child);
    } else if (S_ISREG(st.st_mode)) {
      /* symlinks, devices, fifos and sockets are never copied in */
      if (in->total_bytes + (uint64_t)st.st_size > limit) {
        r = dome_error_set(err, EFBIG, "workspace `%s`: larger than the workspace size (%llu bytes)", root,
                           (unsigned long long)limit);
        break;
      }
      /* O_NONBLOCK and a second fstat: a file swapped for a fifo meanwhile must not block us */
      _cleanup_close_ int fd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) {
        r = dome_error_set_errno(err, errno, "read workspace file `%s/%s`", root, relative);
        break;
      }
      if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) continue;
      if (in->total_bytes + (uint64_t)st.st_size > limit) {
        r = dome_error_set(err, EFBIG, "workspace `%s`: larger than the workspace size (%llu bytes)", root,
                           (unsigned long long)limit);
        break;
      }
      size_t size = (size_t)st.st_size;
      char *data = malloc(size ? size : 1);
      size_t got = 0;
      while (data && got < size) {
        ssize_t n = read(fd, data + got, size - got);
        if (n <= 0) break;
        got += (size_t)n;
      }
      if (!data) {
        r = dome_error_set(err, ENOMEM, "workspace: out of memory");
        break;
      }
      in->total_bytes += got;
      r = push(in, strdup(relative), data, got, st.st_mode & 0777, true, err);
    }
  }
  closedir(d);
  return r;
}

int jail_workspace_collect(struct jail_workspace_input *in, const struct jail_config *config, uint64_t limit,
                           dome_error *err) {
  memset(in, 0, sizeof *in);
  int r = 0;
  if (config->workspace_dir) {
    struct stat st;
    if (stat(config->workspace_dir, &st) < 0)
      return dome_error_set_errno(err, errno, "workspace `%s`", config->workspace_dir);
    if (!S_ISDIR(st.st_mode))
      return dome_error_set(err, ENOTDIR, "workspace `%s`: not a directory", config->workspace_dir);
    _cleanup_close_ int fd = open(config->workspace_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return dome_error_set_errno(err, errno, "open workspace `%s`", config->workspace_dir);
    r = collect_dir(in, fd, "", 1, limit, config->workspace_dir, err);
    if (r < 0) {
      jail_workspace_input_release(in);
      return r;
    }
  }
  if (config->input_file_count > JAIL_MAX_INPUT_FILES)
    return dome_error_set(err, EINVAL, "input files: more than %u", JAIL_MAX_INPUT_FILES);
  for (size_t i = 0; i < config->input_file_count && r == 0; i++) {
    const struct jail_input_file *f = &config->input_files[i];
    if (!f->path) return dome_error_set(err, EINVAL, "input file %zu: no path", i);
    r = jail_workspace_check_path(f->path, "input file", err);
    if (r == 0 && f->length > 0 && !f->data)
      r = dome_error_set(err, EINVAL, "input file `%s`: no data", f->path);
    if (r == 0 && in->total_bytes + f->length > limit)
      r = dome_error_set(err, EFBIG, "input file `%s`: files exceed the workspace size (%llu bytes)", f->path,
                         (unsigned long long)limit);
    if (r == 0) {
      /* a later file with the same path replaces the earlier one */
      for (size_t j = 0; j < in->count; j++)
        if (strcmp(in->paths[j], f->path) == 0) in->paths[j][0] = '\0';
      in->total_bytes += f->length;
      r = push(in, strdup(f->path), (char *)f->data, f->length, f->mode ? f->mode & 0777 : 0644, false, err);
    }
  }
  if (r < 0) jail_workspace_input_release(in);
  return r;
}

void jail_workspace_input_release(struct jail_workspace_input *in) {
  for (size_t i = 0; i < in->count; i++) {
    free(in->paths[i]);
    if (in->owned[i]) free(in->data[i]);
  }
  free(in->paths);
  free(in->data);
  free(in->lengths);
  free(in->modes);
  free(in->owned);
  memset(in, 0, sizeof *in);
}

/* ---- after the run ---- */

struct path_list {
  char **items;
  size_t count;
};

static int list_add(struct path_list *list, const char *path, dome_error *err) {
  if (list->count >= JAIL_MAX_OUTPUT_PATHS) return 0; /* bounded: the rest is not listed */
  char **items = realloc(list->items, (list->count + 1) * sizeof *items);
  char *copy = strdup(path);
  if (!items || !copy) {
    free(copy);
    if (items) list->items = items;
    return dome_error_set(err, ENOMEM, "list output paths: out of memory");
  }
  list->items = items;
  list->items[list->count++] = copy;
  return 0;
}

static bool same_as_input(int fd, const struct stat *st, const struct jail_workspace_input *in,
                          const char *path) {
  for (size_t i = in->count; i-- > 0;) {
    if (strcmp(in->paths[i], path) != 0) continue;
    if ((uint64_t)st->st_size != in->lengths[i]) return false;
    char buffer[65536];
    size_t offset = 0;
    while (offset < in->lengths[i]) {
      ssize_t n = pread(fd, buffer, sizeof buffer, (off_t)offset);
      if (n <= 0) return false;
      if (memcmp(buffer, in->data[i] + offset, (size_t)n) != 0) return false;
      offset += (size_t)n;
    }
    return true;
  }
  return false;
}

static int walk(int dirfd, const char *prefix, unsigned depth, const struct jail_workspace_input *in,
                struct path_list *list, dome_error *err) {
  if (depth > JAIL_MAX_PATH_DEPTH) return 0; /* deeper trees are not reported */
  int listfd = open_beneath(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
  DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
  if (!d) {
    if (listfd >= 0) close(listfd);
    return 0;
  }
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char relative[MAX_RELATIVE_PATH + 2];
    if (snprintf(relative, sizeof relative, "%s%s", prefix, e->d_name) > MAX_RELATIVE_PATH) continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (S_ISDIR(st.st_mode)) {
      int child = open_beneath(dirfd, e->d_name, O_RDONLY | O_DIRECTORY, 0);
      if (child < 0) continue;
      char nested[MAX_RELATIVE_PATH + 3];
      snprintf(nested, sizeof nested, "%s/", relative);
      r = walk(child, nested, depth + 1, in, list, err);
      close(child);
    } else if (S_ISREG(st.st_mode)) {
      int fd = open_beneath(dirfd, e->d_name, O_RDONLY, 0);
      if (fd < 0) continue;
      if (!same_as_input(fd, &st, in, relative)) r = list_add(list, relative, err);
      close(fd);
    }
  }
  closedir(d);
  return r;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int jail_workspace_outputs(int workspace_fd, const struct jail_workspace_input *in, char ***paths,
                           size_t *count, dome_error *err) {
  struct path_list list = {0};
  int root = open_beneath(workspace_fd, ".", O_RDONLY | O_DIRECTORY, 0);
  if (root < 0) return dome_error_set_errno(err, -root, "open /workspace after the run");
  int r = walk(root, "", 1, in, &list, err);
  close(root);
  if (r < 0) {
    for (size_t i = 0; i < list.count; i++) free(list.items[i]);
    free(list.items);
    return r;
  }
  if (list.count) qsort(list.items, list.count, sizeof *list.items, compare_strings);
  *paths = list.items;
  *count = list.count;
  return 0;
}

/* Append "path: reason" to the copy-out error list (bounded by JAIL_MAX_OUTPUT_PATHS entries). */
static int note_error(char ***errors, size_t *count, const char *path, const char *what, int errno_value) {
  if (*count >= JAIL_MAX_OUTPUT_PATHS) return 0;
  char text[MAX_RELATIVE_PATH + 160];
  snprintf(text, sizeof text, "%s: %s (%s)", path, what, strerror(errno_value));
  char **grown = realloc(*errors, (*count + 1) * sizeof *grown);
  if (!grown) return -ENOMEM;
  *errors = grown;
  if (!(grown[*count] = strdup(text))) return -ENOMEM;
  (*count)++;
  return 0;
}

/* Open (creating as needed) the directory holding `relative` beneath host_fd, one component at a time:
 * each step is a single name resolved in the fd of the previous one, opened O_NOFOLLOW|O_DIRECTORY, so a
 * component swapped for a symlink (or a file) is refused, never followed. Returns the directory fd and the
 * last component in *leaf, or -errno with *failed naming the step. */
static int open_parent(int host_fd, const char *relative, char *buffer, size_t size, const char **leaf,
                       const char **failed) {
  snprintf(buffer, size, "%s", relative);
  int dir = fcntl(host_fd, F_DUPFD_CLOEXEC, 0);
  if (dir < 0) return *failed = "duplicate host directory fd", -errno;
  char *name = buffer;
  for (char *slash = strchr(name, '/'); slash; slash = strchr(name, '/')) {
    *slash = '\0';
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || name[0] == '\0') {
      close(dir);
      return *failed = "invalid path component", -EINVAL;
    }
    if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST) {
      int saved = errno;
      close(dir);
      return *failed = "create directory", -saved;
    }
    int next = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int saved = errno;
    close(dir);
    if (next < 0) return *failed = "a parent on the host is not a directory", -saved;
    dir = next;
    name = slash + 1;
  }
  *leaf = name;
  return dir;
}

/* Copy one file: a temporary created O_EXCL|O_NOFOLLOW in the parent, renamed over the leaf (a link or
 * file already there is replaced, never written through). Returns 0 or -errno with *failed set. */
static int copy_one(int root, int host, const char *relative, const char **failed) {
  _cleanup_close_ int source = open_beneath(root, relative, O_RDONLY, 0);
  if (source < 0) return 0; /* vanished or became a symlink: nothing to copy */
  struct stat st;
  if (fstat(source, &st) < 0 || !S_ISREG(st.st_mode)) return 0;
  char buffer[MAX_RELATIVE_PATH + 1];
  const char *leaf = NULL;
  _cleanup_close_ int dir = open_parent(host, relative, buffer, sizeof buffer, &leaf, failed);
  if (dir < 0) return dir;
  char temporary[MAX_RELATIVE_PATH + 32];
  snprintf(temporary, sizeof temporary, ".%s.dome-copy-%d", leaf, (int)getpid());
  _cleanup_close_ int target =
      openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
  if (target < 0) return *failed = "create temporary file", -errno;
  char data[65536];
  ssize_t n;
  while ((n = read(source, data, sizeof data)) > 0)
    if (write(target, data, (size_t)n) != n) {
      int saved = n < 0 ? errno : ENOSPC;
      unlinkat(dir, temporary, 0);
      return *failed = "write", -saved;
    }
  if (n < 0 || renameat(dir, temporary, dir, leaf) < 0) {
    int saved = errno;
    unlinkat(dir, temporary, 0);
    return *failed = n < 0 ? "read" : "replace the host file", -saved;
  }
  return 0;
}

int jail_workspace_copy_out(int workspace_fd, const char *host_dir, char *const *paths, size_t count,
                            char ***errors, size_t *error_count, dome_error *err) {
  _cleanup_close_ int host = open(host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (host < 0) return note_error(errors, error_count, host_dir, "open the host workspace", errno);
  _cleanup_close_ int root = open_beneath(workspace_fd, ".", O_RDONLY | O_DIRECTORY, 0);
  if (root < 0) return dome_error_set_errno(err, -root, "open /workspace for copy-out");
  for (size_t i = 0; i < count; i++) {
    const char *failed = "copy";
    int r = copy_one(root, host, paths[i], &failed);
    if (r < 0 && note_error(errors, error_count, paths[i], failed, -r) < 0)
      return dome_error_set_errno(err, ENOMEM, "copy out: record errors");
  }
  return 0;
}
