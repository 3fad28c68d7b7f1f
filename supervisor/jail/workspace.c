/* /workspace in and out: reading a host directory into the list of input files (regular files and
 * directories only), listing the files the program created or modified, copying them back. Every host
 * and jail path is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) or
 * O_NOFOLLOW, so a symlink planted by the program can never redirect a read or a write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/common/utf8.h"
#include "supervisor/jail/internal.h"

#define MAX_RELATIVE_PATH 1024
/* The texts below name JAIL_MAX_OUTPUT_PATHS. */
_Static_assert(JAIL_MAX_OUTPUT_PATHS == 4096u, "update the copy-out messages");
#define TOO_MANY_ENTRIES "more than 4096 files and directories created by one copy-out"

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
  /* a new open file description, not dup(): the host fd is kept for copy-out, its offset untouched */
  int listfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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

/* Open the host workspace once, before the run: the same directory is read now and written by copy-out
 * after the run, whatever happens to its path meanwhile. The directory itself must not be a symlink
 * (trailing slashes are dropped first: "link/" would follow it). */
static int open_host_workspace(const char *dir, dome_error *err) {
  char path[PATH_MAX];
  size_t length = strlen(dir);
  if (length == 0 || length >= sizeof path)
    return dome_error_set(err, EINVAL, "workspace `%s`: empty or longer than %d bytes", dir, PATH_MAX - 1);
  memcpy(path, dir, length + 1);
  while (length > 1 && path[length - 1] == '/') path[--length] = '\0';
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  int saved = errno;
  struct stat st;
  if (saved == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
    return dome_error_set(err, ELOOP, "workspace `%s`: is a symbolic link (give the directory itself)", dir);
  if (saved == ENOTDIR) return dome_error_set(err, ENOTDIR, "workspace `%s`: not a directory", dir);
  return dome_error_set_errno(err, saved, "workspace `%s`", dir);
}

int jail_workspace_collect(struct jail_workspace_input *in, const struct jail_config *config, uint64_t limit,
                           dome_error *err) {
  memset(in, 0, sizeof *in);
  in->host_fd = -1;
  int r = 0;
  if (config->workspace_dir) {
    int fd = open_host_workspace(config->workspace_dir, err);
    if (fd < 0) return fd;
    in->host_fd = fd;
    in->host_open = true;
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
  if (in->host_open) close(in->host_fd);
  memset(in, 0, sizeof *in);
  in->host_fd = -1;
}

/* ---- after the run ---- */

struct path_list {
  char **items;
  size_t count;
  struct jail_workspace_unlisted unlisted;
};

static int list_add(struct path_list *list, const char *path, dome_error *err) {
  if (list->count >= JAIL_MAX_OUTPUT_PATHS) { /* bounded: the rest is only counted */
    list->unlisted.over_limit++;
    return 0;
  }
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
  if (depth > JAIL_MAX_PATH_DEPTH) { /* not walked: counted, and reported by copy-out */
    list->unlisted.too_deep++;
    return 0;
  }
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
    if (snprintf(relative, sizeof relative, "%s%s", prefix, e->d_name) > MAX_RELATIVE_PATH) {
      list->unlisted.too_deep++;
      continue;
    }
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
                           size_t *count, struct jail_workspace_unlisted *unlisted, dome_error *err) {
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
  if (unlisted) *unlisted = list.unlisted;
  return 0;
}

/* Append "path: reason" to the copy-out error list (bounded by JAIL_MAX_OUTPUT_PATHS + 1 entries: one
 * per listed path and the note about unlisted ones). */
static int note_error(char ***errors, size_t *count, const char *path, const char *what, int errno_value) {
  if (*count > JAIL_MAX_OUTPUT_PATHS) return 0;
  char text[MAX_RELATIVE_PATH + 200];
  snprintf(text, sizeof text, "%s: %s (%s)", path, what, strerror(errno_value));
  char **grown = realloc(*errors, (*count + 1) * sizeof *grown);
  if (!grown) return -ENOMEM;
  *errors = grown;
  if (!(grown[*count] = strdup(text))) return -ENOMEM;
  (*count)++;
  return 0;
}

/* What one copy-out may still create on the host: bytes (apparent file sizes, so a sparse file counts
 * its full length, which is what the copy writes) and entries (files and directories created). */
struct copy_budget {
  uint64_t bytes;
  size_t entries;
};

/* Names temporaries: unique across the threads of this process (jail_run may run concurrently). */
static _Atomic unsigned temporary_serial;

/* Open (creating as needed) the directory holding `relative` beneath host_fd, one component at a time:
 * each step is a single name resolved in the fd of the previous one, opened O_NOFOLLOW|O_DIRECTORY, so a
 * component swapped for a symlink (or a file) is refused, never followed. Directories are created 0755
 * (less the umask), each taking one entry of the budget. Returns the directory fd and the last component
 * in *leaf, or -errno with *failed naming the step. */
static int open_parent(int host_fd, const char *relative, char *buffer, size_t size, const char **leaf,
                       struct copy_budget *budget, const char **failed) {
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
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      if (errno != ENOENT) {
        int saved = errno;
        close(dir);
        return *failed = "inspect a parent on the host", -saved;
      }
      if (budget->entries == 0) {
        close(dir);
        return *failed = TOO_MANY_ENTRIES, -EDQUOT;
      }
      if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST) {
        int saved = errno;
        close(dir);
        return *failed = "create directory", -saved;
      }
      budget->entries--;
    }
    int next = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int saved = errno;
    close(dir);
    if (next < 0)
      return *failed = "a parent on the host is not a directory (symlinks are not followed)", -saved;
    dir = next;
    name = slash + 1;
  }
  *leaf = name;
  return dir;
}

/* Copy one file: a temporary created O_EXCL|O_NOFOLLOW with mode 0644 (never the jail's mode: nothing the
 * jail writes becomes executable, setuid or setgid on the host; over an existing file, that file's owner
 * and read/write bits) in the parent, renamed over the leaf. An
 * existing host regular file is replaced (never written through); a symlink, directory or special file
 * there is left alone and reported. Returns 0 or -errno with *failed set. */
static int copy_one(int root, int host, const char *relative, struct copy_budget *budget,
                    const char **failed) {
  _cleanup_close_ int source = open_beneath(root, relative, O_RDONLY, 0);
  if (source < 0) return 0; /* vanished or became a symlink: nothing to copy */
  struct stat st;
  if (fstat(source, &st) < 0 || !S_ISREG(st.st_mode)) return 0;
  if ((uint64_t)st.st_size > budget->bytes)
    return *failed = "larger than what remains of the copy-out budget (the workspace size)", -EFBIG;
  if (budget->entries == 0) return *failed = TOO_MANY_ENTRIES, -EDQUOT;
  char buffer[MAX_RELATIVE_PATH + 1];
  const char *leaf = NULL;
  _cleanup_close_ int dir = open_parent(host, relative, buffer, sizeof buffer, &leaf, budget, failed);
  if (dir < 0) return dir;
  if (budget->entries == 0) return *failed = TOO_MANY_ENTRIES, -EDQUOT; /* its directories took the last */
  struct stat existing;
  bool replace = false;
  if (fstatat(dir, leaf, &existing, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(existing.st_mode))
      return *failed = "the host path is a symlink, directory or special file (left alone)", -EEXIST;
    replace = true;
  } else if (errno != ENOENT) {
    return *failed = "inspect the host file", -errno;
  }
  char temporary[64];
  snprintf(temporary, sizeof temporary, ".dome-copy-%d-%u", (int)getpid(), temporary_serial++);
  _cleanup_close_ int target =
      openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (target < 0) return *failed = "create temporary file", -errno;
  char data[65536];
  uint64_t left = (uint64_t)st.st_size; /* the budget was checked for this many bytes */
  while (left > 0) {
    ssize_t n = read(source, data, left < sizeof data ? (size_t)left : sizeof data);
    if (n == 0) break;
    ssize_t written = n > 0 ? write(target, data, (size_t)n) : -1;
    if (n < 0 || written != n) {
      int saved = n < 0 || written < 0 ? errno : ENOSPC;
      unlinkat(dir, temporary, 0);
      return *failed = n < 0 ? "read" : "write", -saved;
    }
    left -= (uint64_t)n;
  }
  /* A new leaf with RENAME_NOREPLACE: whatever appeared there meanwhile stays. Replacing a regular file
   * renames over it: if it was swapped for a symlink meanwhile, the link itself is replaced (rename
   * never follows it). */
  /* A replaced file keeps its owner and its read/write bits: a private file stays private, and the jail's
   * content never becomes executable, setuid or setgid. */
  if (replace &&
      (fchmod(target, existing.st_mode & 0666) < 0 || fchown(target, existing.st_uid, existing.st_gid) < 0)) {
    int saved = errno;
    unlinkat(dir, temporary, 0);
    return *failed = "keep the host file's owner and mode", -saved;
  }
  int renamed = replace ? renameat(dir, temporary, dir, leaf)
                        : (int)syscall(SYS_renameat2, dir, temporary, dir, leaf, RENAME_NOREPLACE);
  if (renamed < 0) {
    int saved = errno;
    unlinkat(dir, temporary, 0);
    return *failed = "replace the host file", -saved;
  }
  budget->bytes -= (uint64_t)st.st_size;
  budget->entries--;
  return 0;
}

/* Whether `relative` has a component that version-control tools read configuration or hooks from (.git,
 * .hg, .svn; compared case-insensitively since the host file system may fold case). */
static bool has_control_component(const char *relative) {
  static const char *const names[] = {".git", ".hg", ".svn"};
  for (const char *p = relative; *p;) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
      if (n == strlen(names[i]) && strncasecmp(p, names[i], n) == 0) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

static bool valid_utf8(const char *text) {
  size_t length = strlen(text), clean_length = 0;
  char *clean = dome_utf8_sanitize(text, length, true, &clean_length);
  bool valid = clean && clean_length == length && memcmp(clean, text, length) == 0;
  free(clean);
  return valid;
}

/* Entries git looks for when it decides whether a directory is a repository directory (is_git_directory
 * in git's setup.c: HEAD, plus objects/ and refs/ here or in the directory `commondir` names). */
enum { MARK_HEAD = 1, MARK_OBJECTS = 2, MARK_REFS = 4 };

static unsigned marks_of(int dirfd, bool list_entries) {
  static const struct {
    const char *name;
    unsigned mark;
  } names[] = {{"HEAD", MARK_HEAD}, {"objects", MARK_OBJECTS}, {"refs", MARK_REFS}};
  unsigned marks = 0;
  if (!list_entries) { /* the host: its own name lookup (case-folding or not) is what git will see */
    struct stat st;
    for (size_t i = 0; i < 3; i++)
      if (fstatat(dirfd, names[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0) marks |= names[i].mark;
    return marks;
  }
  /* the jail's tmpfs: any case, since the copy may land on a case-folding host file system */
  int listfd = open_beneath(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
  DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
  if (!d) {
    if (listfd >= 0) close(listfd);
    return 0;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    for (size_t i = 0; i < 3; i++)
      if (strcasecmp(e->d_name, names[i].name) == 0) marks |= names[i].mark;
  closedir(d);
  return marks;
}

static bool marks_repository(unsigned marks) {
  return (marks & MARK_HEAD) || (marks & (MARK_OBJECTS | MARK_REFS)) == (MARK_OBJECTS | MARK_REFS);
}

/* Verdicts for the ancestors of the previous path (paths come sorted, so neighbours share them). */
struct repository_cache {
  char previous[MAX_RELATIVE_PATH + 1];
  size_t known; /* ancestors of `previous` with a verdict (depth 0 is the workspace root) */
  bool flagged[JAIL_MAX_PATH_DEPTH + 2];
};

/* Whether a directory on the way to `relative` would, once copied (jail side and host side together),
 * be taken by git as a repository directory: a config with core.fsmonitor there runs on the next `git
 * status`, as in a `.git`. Paths deeper than the cache holds are refused. */
static bool inside_repository(int root, int host, const char *relative, struct repository_cache *cache) {
  bool flagged = false, reuse = true;
  size_t depth = 0;
  for (const char *p = relative; p; depth++) {
    if (depth >= sizeof cache->flagged / sizeof *cache->flagged) return true;
    size_t end = (size_t)(p - relative); /* the ancestor holding this component: relative[0..end) */
    if (reuse && depth < cache->known && strncmp(cache->previous, relative, end) == 0) {
      flagged = flagged || cache->flagged[depth];
    } else {
      reuse = false;
      char ancestor[MAX_RELATIVE_PATH + 2];
      snprintf(ancestor, sizeof ancestor, "%.*s", end ? (int)end - 1 : 1, end ? relative : ".");
      unsigned marks = 0;
      int jail_dir = open_beneath(root, ancestor, O_RDONLY | O_DIRECTORY, 0);
      if (jail_dir >= 0) {
        marks |= marks_of(jail_dir, true);
        close(jail_dir);
      }
      struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                             .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
      int host_dir = (int)syscall(SYS_openat2, host, ancestor, &how, sizeof how);
      if (host_dir >= 0) {
        marks |= marks_of(host_dir, false);
        close(host_dir);
      }
      cache->flagged[depth] = marks_repository(marks);
      flagged = flagged || cache->flagged[depth];
    }
    const char *slash = strchr(p, '/');
    p = slash ? slash + 1 : NULL;
  }
  snprintf(cache->previous, sizeof cache->previous, "%s", relative);
  cache->known = depth;
  return flagged;
}

int jail_workspace_copy_out(int workspace_fd, const struct jail_workspace_input *input, uint64_t budget_bytes,
                            const struct jail_workspace_unlisted *unlisted, char *const *paths, size_t count,
                            char ***errors, size_t *error_count, dome_error *err) {
  if (!input->host_open) return dome_error_set(err, EBADF, "copy out: the host workspace was not opened");
  _cleanup_close_ int root = open_beneath(workspace_fd, ".", O_RDONLY | O_DIRECTORY, 0);
  if (root < 0) return dome_error_set_errno(err, -root, "open /workspace for copy-out");
  if (unlisted && unlisted->over_limit > 0) {
    char what[32];
    snprintf(what, sizeof what, "(%zu more files)", unlisted->over_limit);
    if (note_error(errors, error_count, what, "neither listed nor copied: more than 4096 files", E2BIG) < 0)
      return dome_error_set_errno(err, ENOMEM, "copy out: record errors");
  }
  if (unlisted && unlisted->too_deep > 0) {
    char what[48];
    snprintf(what, sizeof what, "(%zu entries)", unlisted->too_deep);
    if (note_error(errors, error_count, what,
                   "neither listed nor copied: deeper than 32 directories or a path longer than 1024 bytes",
                   ENAMETOOLONG) < 0)
      return dome_error_set_errno(err, ENOMEM, "copy out: record errors");
  }
  struct copy_budget budget = {.bytes = budget_bytes, .entries = JAIL_MAX_OUTPUT_PATHS};
  struct repository_cache *cache = calloc(1, sizeof *cache);
  if (!cache) return dome_error_set_errno(err, ENOMEM, "copy out: out of memory");
  int r = 0;
  for (size_t i = 0; i < count && r == 0; i++) {
    const char *failed = "copy";
    int copied = 0;
    if (!valid_utf8(paths[i])) {
      failed = "the name is not valid UTF-8 (never copied out)";
      copied = -EILSEQ;
    } else if (has_control_component(paths[i])) {
      failed = "version-control metadata (.git, .hg, .svn) is never copied out";
      copied = -EPERM;
    } else if (inside_repository(root, input->host_fd, paths[i], cache)) {
      failed =
          "inside a directory git would take as a repository (HEAD, or objects/ and refs/): never copied "
          "out";
      copied = -EPERM;
    } else {
      copied = copy_one(root, input->host_fd, paths[i], &budget, &failed);
    }
    if (copied < 0 && note_error(errors, error_count, paths[i], failed, -copied) < 0)
      r = dome_error_set_errno(err, ENOMEM, "copy out: record errors");
  }
  free(cache);
  return r;
}
