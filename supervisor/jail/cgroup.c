/* Cgroup leaves of jails: discovery of our own cgroups, creation beneath them (leaf_parent) with limits read
 * back, accounting, kill and removal. Supports cgroup v2 with
 * controllers (unified hosts) and hybrid hosts (v1 memory/pids/cpu/cpuacct controllers plus a controller-less
 * cgroup2 hierarchy whose leaf carries the cgroup BPF programs and cgroup.kill). Kernel docs:
 * admin-guide/cgroup-v2.rst, cgroup-v1/memory.rst, cgroup-v1/pids.rst, scheduler/sched-bwc.rst. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/jail/internal.h"

#define CPU_PERIOD_US 100000u

static const char *const v1_names[JAIL_V1_COUNT] = {"memory", "pids", "cpu", "cpuacct"};

static struct jail_cgroup_layout layout;
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

/* Does the comma-separated list contain `word`? */
static bool list_has(const char *list, const char *word) {
  size_t length = strlen(word);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t item = end ? (size_t)(end - p) : strlen(p);
    if (item == length && strncmp(p, word, length) == 0) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* Join mount point and the cgroup path relative to the mount's root. */
static void join_self(char *out, size_t size, const char *mount, const char *root, const char *path) {
  size_t root_length = strcmp(root, "/") == 0 ? 0 : strlen(root);
  const char *rest = path;
  if (root_length && strncmp(path, root, root_length) == 0) rest = path + root_length;
  if (strcmp(rest, "/") == 0) rest = "";
  snprintf(out, size, "%s%s", mount, rest);
}

static bool is_directory(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The conventional layout: cgroup2 at /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid), each
 * v1 controller at /sys/fs/cgroup/<name> (co-mounted ones are the same file system, found by device),
 * each mount holding the whole hierarchy (our own cgroup, joined to it, exists). Fills `layout`; false
 * when any of it does not hold (the caller then reads mountinfo). */
static bool discover_conventional(struct jail_cgroup_layout *out, bool have_v2, const char *v2_path,
                                  const bool have_v1[JAIL_V1_COUNT], char v1_paths[JAIL_V1_COUNT][512]) {
  struct statfs fs;
  if (have_v2) {
    const char *mount = statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC
                            ? "/sys/fs/cgroup"
                            : "/sys/fs/cgroup/unified";
    if (statfs(mount, &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC) return false;
    snprintf(out->v2_mount, sizeof out->v2_mount, "%s", mount);
    join_self(out->v2_self, sizeof out->v2_self, mount, "/", v2_path);
    if (!is_directory(out->v2_self)) return false;
  }
  dev_t devices[JAIL_V1_COUNT];
  for (int c = 0; c < JAIL_V1_COUNT; c++) {
    if (!have_v1[c]) continue;
    char mount[64];
    snprintf(mount, sizeof mount, "/sys/fs/cgroup/%s", v1_names[c]);
    struct stat st;
    if (statfs(mount, &fs) < 0 || fs.f_type != CGROUP_SUPER_MAGIC || stat(mount, &st) < 0) return false;
    devices[c] = st.st_dev;
    snprintf(out->v1_mount[c], sizeof out->v1_mount[c], "%s", mount);
    for (int earlier = 0; earlier < c; earlier++) /* co-mounted (cpu -> cpu,cpuacct): one hierarchy */
      if (have_v1[earlier] && devices[earlier] == st.st_dev)
        memcpy(out->v1_mount[c], out->v1_mount[earlier], sizeof out->v1_mount[c]);
    join_self(out->v1_self[c], sizeof out->v1_self[c], out->v1_mount[c], "/", v1_paths[c]);
    if (!is_directory(out->v1_self[c])) return false;
  }
  return true;
}

void jail_cgroup_discover(struct jail_cgroup_layout *out, bool conventional_first) {
  memset(out, 0, sizeof *out);
  char v2_path[512] = "", v1_paths[JAIL_V1_COUNT][512] = {{0}};
  bool have_v2 = false, have_v1[JAIL_V1_COUNT] = {false};
  FILE *f = fopen("/proc/self/cgroup", "re");
  char line[1024];
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *first = strchr(line, ':');
    char *second = first ? strchr(first + 1, ':') : NULL;
    if (!second) continue;
    *first = *second = '\0';
    const char *controllers = first + 1, *path = second + 1;
    if (strcmp(line, "0") == 0 && *controllers == '\0') {
      snprintf(v2_path, sizeof v2_path, "%s", path);
      have_v2 = true;
      continue;
    }
    for (int c = 0; c < JAIL_V1_COUNT; c++)
      if (list_has(controllers, v1_names[c])) {
        snprintf(v1_paths[c], sizeof v1_paths[c], "%s", path);
        have_v1[c] = true;
      }
  }
  if (f) fclose(f);

  /* The usual places first (statfs and stat only); /proc/self/mountinfo, which the kernel renders mount
   * by mount, only when they do not hold. */
  if (conventional_first && discover_conventional(out, have_v2, v2_path, have_v1, v1_paths)) goto controllers;
  memset(out->v2_mount, 0, sizeof out->v2_mount);
  memset(out->v2_self, 0, sizeof out->v2_self);
  memset(out->v1_mount, 0, sizeof out->v1_mount);
  memset(out->v1_self, 0, sizeof out->v1_self);

  /* mountinfo: id parent major:minor root mountpoint options ... - fstype source superoptions */
  f = fopen("/proc/self/mountinfo", "re");
  char info[2048];
  while (f && fgets(info, sizeof info, f)) {
    char root[512], point[512], fstype[64], super[512];
    char *dash = strstr(info, " - ");
    if (!dash) continue;
    if (sscanf(info, "%*s %*s %*s %511s %511s", root, point) != 2) continue;
    if (sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2) continue;
    if (strcmp(fstype, "cgroup2") == 0 && have_v2 && out->v2_mount[0] == '\0') {
      snprintf(out->v2_mount, sizeof out->v2_mount, "%s", point);
      join_self(out->v2_self, sizeof out->v2_self, point, root, v2_path);
    } else if (strcmp(fstype, "cgroup") == 0) {
      for (int c = 0; c < JAIL_V1_COUNT; c++)
        if (have_v1[c] && list_has(super, v1_names[c]) && out->v1_mount[c][0] == '\0') {
          snprintf(out->v1_mount[c], sizeof out->v1_mount[c], "%s", point);
          join_self(out->v1_self[c], sizeof out->v1_self[c], point, root, v1_paths[c]);
        }
    }
  }
  if (f) fclose(f);

controllers:
  if (out->v2_mount[0]) {
    char controllers[256] = "";
    if (jail_cgroup_read(out->v2_self, "cgroup.controllers", controllers, sizeof controllers) >= 0) {
      controllers[strcspn(controllers, "\n")] = '\0';
      char spaced[260];
      snprintf(spaced, sizeof spaced, " %s ", controllers);
      out->v2_controllers = strstr(spaced, " memory ") && strstr(spaced, " pids ") && strstr(spaced, " cpu ");
    }
  }
  if (out->v2_controllers)
    for (int c = 0; c < JAIL_V1_COUNT; c++) out->v1_self[c][0] = out->v1_mount[c][0] = '\0';
}

static void discover(void) {
  jail_cgroup_discover(&layout, true);
}

const struct jail_cgroup_layout *jail_cgroup_layout(void) {
  pthread_once(&layout_once, discover);
  return &layout;
}

/* A cgroup directory: its path (for messages, and to open files when fd is -1) and, for a jail's leaves,
 * an O_DIRECTORY fd, so that each file costs one path component to look up instead of the whole path. */
struct cgroup_dir {
  const char *path;
  int fd;
};

static int open_file(struct cgroup_dir dir, const char *file, int flags) {
  if (dir.fd >= 0) return openat(dir.fd, file, flags | O_CLOEXEC);
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir.path, file);
  return open(path, flags | O_CLOEXEC);
}

static int write_file(struct cgroup_dir dir, const char *file, const char *value, dome_error *err) {
  _cleanup_close_ int fd = open_file(dir, file, O_WRONLY);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s/%s`", dir.path, file);
  size_t length = strlen(value);
  if (write(fd, value, length) != (ssize_t)length)
    return dome_error_set_errno(err, errno, "write `%s` to `%s/%s`", value, dir.path, file);
  return 0;
}

static int read_file(struct cgroup_dir dir, const char *file, char *buffer, size_t size) {
  _cleanup_close_ int fd = open_file(dir, file, O_RDONLY);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, buffer, size - 1);
  if (n < 0) return -errno;
  buffer[n] = '\0';
  return (int)n;
}

int jail_cgroup_write(const char *dir, const char *file, const char *value, dome_error *err) {
  return write_file((struct cgroup_dir){dir, -1}, file, value, err);
}

int jail_cgroup_read(const char *dir, const char *file, char *buffer, size_t size) {
  return read_file((struct cgroup_dir){dir, -1}, file, buffer, size);
}

static struct cgroup_dir v2_dir(const struct jail_leaf *leaf) {
  return (struct cgroup_dir){leaf->v2_path, leaf->v2_fd};
}

static struct cgroup_dir v1_dir(const struct jail_leaf *leaf, int controller) {
  return (struct cgroup_dir){leaf->v1_path[controller], leaf->v1_fd[controller]};
}

static int read_u64(struct cgroup_dir dir, const char *file, uint64_t *value) {
  char buffer[64];
  int n = read_file(dir, file, buffer, sizeof buffer);
  if (n < 0) return n;
  if (strncmp(buffer, "max", 3) == 0) {
    *value = UINT64_MAX;
    return 0;
  }
  char *end;
  *value = strtoull(buffer, &end, 10);
  return end == buffer ? -EINVAL : 0;
}

/* The directory of controller `name` ("" for the cgroup2 hierarchy) for `pid`, from /proc/<pid>/cgroup. */
static int cgroup_of(pid_t pid, const char *mount, const char *name, char *out, size_t size,
                     dome_error *err) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
  FILE *f = fopen(path, "re");
  if (f == NULL) return dome_error_set_errno(err, errno == ENOENT ? ESRCH : errno, "`%s`", path);
  int rc = dome_error_set(err, ENOENT, "`%s` names no %s cgroup", path, name[0] ? name : "cgroup2");
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *first = strchr(line, ':');
    char *second = first ? strchr(first + 1, ':') : NULL;
    if (second == NULL) continue;
    *first = *second = '\0';
    bool match = name[0] ? list_has(first + 1, name) : strcmp(line, "0") == 0 && first[1] == '\0';
    if (!match) continue;
    snprintf(out, size, "%s%s", mount, strcmp(second + 1, "/") == 0 ? "" : second + 1);
    rc = 0;
    break;
  }
  fclose(f);
  return rc;
}

static int limit_u64(const char *dir, const char *file, uint64_t *value, dome_error *err) {
  int rc = read_u64((struct cgroup_dir){dir, -1}, file, value);
  return rc < 0 ? dome_error_set(err, -rc, "`%s/%s`: %s", dir, file,
                                 rc == -EINVAL ? "not a number" : strerror(-rc))
                : 0;
}

int jail_cgroup_limits_of(pid_t pid, struct jail_cgroup_limits *limits, dome_error *err) {
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  char dir[1100];
  int rc;
  *limits = (struct jail_cgroup_limits){0};
  if (l->v2_controllers) {
    if ((rc = cgroup_of(pid, l->v2_mount, "", dir, sizeof dir, err)) < 0) return rc;
    if ((rc = limit_u64(dir, "memory.max", &limits->memory_bytes, err)) < 0) return rc;
    if ((rc = limit_u64(dir, "pids.max", &limits->pids, err)) < 0) return rc;
    char text[64];
    if (read_file((struct cgroup_dir){dir, -1}, "cpu.max", text, sizeof text) < 0)
      return dome_error_set(err, ENOENT, "`%s/cpu.max` cannot be read", dir);
    unsigned long long quota = 0, period = 0;
    if (strncmp(text, "max", 3) != 0 && (sscanf(text, "%llu %llu", &quota, &period) != 2 || period == 0))
      return dome_error_set(err, EINVAL, "`%s/cpu.max`: not `QUOTA PERIOD`", dir);
    limits->cpus = period ? (double)quota / (double)period : 0;
    return 0;
  }
  static const char *const files[JAIL_V1_COUNT] = {"memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us",
                                                   NULL};
  for (int c = 0; c < JAIL_V1_CPUACCT; c++) {
    if (l->v1_mount[c][0] == '\0')
      return dome_error_set(err, ENOENT, "no %s controller mounted", v1_names[c]);
    if ((rc = cgroup_of(pid, l->v1_mount[c], v1_names[c], dir, sizeof dir, err)) < 0) return rc;
    if (c == JAIL_V1_MEMORY) rc = limit_u64(dir, files[c], &limits->memory_bytes, err);
    if (c == JAIL_V1_PIDS) rc = limit_u64(dir, files[c], &limits->pids, err);
    if (c == JAIL_V1_CPU) {
      char text[64];
      long long quota = -1;
      uint64_t period = 0;
      if (read_file((struct cgroup_dir){dir, -1}, files[c], text, sizeof text) < 0 ||
          sscanf(text, "%lld", &quota) != 1)
        return dome_error_set(err, EINVAL, "`%s/%s`: not a number", dir, files[c]);
      if ((rc = limit_u64(dir, "cpu.cfs_period_us", &period, err)) < 0) return rc;
      limits->cpus = quota > 0 && period > 0 ? (double)quota / (double)period : 0;
    }
    if (rc < 0) return rc;
  }
  return 0;
}

/* Value of `key` in a flat-keyed file ("oom_kill 3\n"). */
static uint64_t read_key(struct cgroup_dir dir, const char *file, const char *key) {
  char buffer[2048];
  if (read_file(dir, file, buffer, sizeof buffer) < 0) return 0;
  size_t length = strlen(key);
  for (char *line = buffer; line && *line;) {
    if (strncmp(line, key, length) == 0 && line[length] == ' ') return strtoull(line + length + 1, NULL, 10);
    line = strchr(line, '\n');
    if (line) line++;
  }
  return 0;
}

/* Write then read back through the same open file (one path walk): the kernel must hold exactly
 * `expected`. */
static int set_checked(struct cgroup_dir dir, const char *file, uint64_t value, uint64_t expected,
                       dome_error *err) {
  char path[700], text[32], held_text[64];
  snprintf(path, sizeof path, "%s/%s", dir.path, file);
  _cleanup_close_ int fd = open_file(dir, file, O_RDWR);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", path);
  int length = snprintf(text, sizeof text, "%" PRIu64, value);
  if (write(fd, text, (size_t)length) != length)
    return dome_error_set_errno(err, errno, "write `%s` to `%s`", text, path);
  ssize_t n = pread(fd, held_text, sizeof held_text - 1, 0);
  if (n <= 0) return dome_error_set_errno(err, n < 0 ? errno : EIO, "read back `%s`", path);
  held_text[n] = '\0';
  char *end;
  uint64_t held = strncmp(held_text, "max", 3) == 0 ? UINT64_MAX : strtoull(held_text, &end, 10);
  if (held != expected)
    return dome_error_set(err, EIO, "`%s` holds %" PRIu64 " after writing %" PRIu64, path, held, value);
  return 0;
}

/* Where leaves go. At the top of a hierarchy (our own cgroup is its root, as for a supervisor started
 * outside any service cgroup) in <self>/dome, so jails are never siblings of the host's own cgroups; on
 * unified hosts always there, since its subtree_control enables the controllers for the leaves (<self>
 * holds processes, which the no-internal-process rule forbids). Otherwise <self> is already a subtree of
 * our own and the leaves go straight into it: one cgroup fewer to create and remove per jail and
 * hierarchy (a v1 memory cgroup is the costliest of them). */
static void leaf_parent(char *out, size_t size, const char *self) {
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  bool top = strcmp(self, l->v2_mount) == 0 || (l->v2_controllers && strcmp(self, l->v2_self) == 0);
  for (int c = 0; c < JAIL_V1_COUNT && !top; c++)
    top = l->v1_mount[c][0] && strcmp(self, l->v1_mount[c]) == 0;
  snprintf(out, size, top ? "%s/dome" : "%s", self);
}

/* mkdir <parent>/<name>, recreating <self>/dome when a concurrent teardown removed it meanwhile; sets
 * `parent_created` when this call made the parent. */
static int make_leaf(char *out, size_t size, const char *self, const char *name, bool *parent_created,
                     dome_error *err) {
  char parent[600];
  leaf_parent(parent, sizeof parent, self);
  snprintf(out, size, "%s/%s", parent, name);
  bool stale_removed = false;
  for (int attempt = 0; attempt < 8; attempt++) {
    if (mkdir(out, 0755) == 0) return 0;
    /* Our name (pid and sequence) is taken: a killed process with our pid left it. It is empty (its jail
     * died with it) unless something still runs there, and rmdir only removes an empty cgroup. */
    if (errno == EEXIST && !stale_removed && rmdir(out) == 0) {
      stale_removed = true;
      continue;
    }
    if (errno != ENOENT) return dome_error_set_errno(err, errno, "create cgroup `%s`", out);
    if (mkdir(parent, 0755) == 0)
      *parent_created = true;
    else if (errno != EEXIST)
      return dome_error_set_errno(err, errno, "create cgroup `%s`", parent);
  }
  return dome_error_set(err, EAGAIN, "create cgroup `%s`: parent keeps disappearing", out);
}

static void close_leaf_fds(struct jail_leaf *leaf) {
  if (leaf->v2_fd >= 0) close(leaf->v2_fd);
  leaf->v2_fd = -1;
  for (int c = 0; c < JAIL_V1_COUNT; c++) {
    if (leaf->v1_owner[c] && leaf->v1_fd[c] >= 0) close(leaf->v1_fd[c]);
    leaf->v1_fd[c] = -1;
  }
}

static void remove_leaf_dirs(struct jail_leaf *leaf) {
  close_leaf_fds(leaf);
  if (leaf->v2_path[0]) rmdir(leaf->v2_path);
  for (int c = 0; c < JAIL_V1_COUNT; c++)
    if (leaf->v1_owner[c] && leaf->v1_path[c][0]) rmdir(leaf->v1_path[c]);
}

static int apply_v1(const struct jail_leaf *leaf, const struct jail_limits *limits, dome_error *err) {
  long page = sysconf(_SC_PAGESIZE);
  struct cgroup_dir memory = v1_dir(leaf, JAIL_V1_MEMORY);
  if (memory.path[0]) {
    uint64_t expected = limits->memory_bytes / (uint64_t)page * (uint64_t)page;
    int r = set_checked(memory, "memory.limit_in_bytes", limits->memory_bytes, expected, err);
    if (r < 0) return r;
    /* With swap accounting, memory+swap = memory means no swap at all (the file exists only with swap
     * accounting: its absence, ENOENT at open, is no error). */
    dome_error ignored;
    r = set_checked(memory, "memory.memsw.limit_in_bytes", limits->memory_bytes, expected, err);
    if (r < 0 && r != -ENOENT) return r;
    write_file(memory, "memory.swappiness", "0", &ignored);
    /* v1 does not charge TCP socket buffers to the memcg unless a tcp limit is set (memory.rst 2.7.1):
     * setting it turns accounting on, so loopback buffers count against the jail's memory. */
    r = set_checked(memory, "memory.kmem.tcp.limit_in_bytes", limits->memory_bytes, expected, err);
    if (r < 0 && r != -ENOENT) return r;
  }
  struct cgroup_dir pids = v1_dir(leaf, JAIL_V1_PIDS);
  if (pids.path[0]) {
    int r = set_checked(pids, "pids.max", limits->pids, limits->pids, err);
    if (r < 0) return r;
  }
  struct cgroup_dir cpu = v1_dir(leaf, JAIL_V1_CPU);
  if (cpu.path[0]) {
    uint64_t quota = (uint64_t)(limits->cpus * CPU_PERIOD_US + 0.5);
    if (quota < 1000) quota = 1000;
    int r = set_checked(cpu, "cpu.cfs_period_us", CPU_PERIOD_US, CPU_PERIOD_US, err);
    if (r < 0) return r;
    r = set_checked(cpu, "cpu.cfs_quota_us", quota, quota, err);
    if (r < 0) return r;
  }
  return 0;
}

static int apply_v2(const struct jail_leaf *leaf, const struct jail_limits *limits, dome_error *err) {
  long page = sysconf(_SC_PAGESIZE);
  struct cgroup_dir dir = v2_dir(leaf);
  uint64_t expected = limits->memory_bytes / (uint64_t)page * (uint64_t)page;
  int r = set_checked(dir, "memory.max", limits->memory_bytes, expected, err);
  if (r < 0) return r;
  if ((r = set_checked(dir, "memory.swap.max", 0, 0, err)) < 0) return r;
  if ((r = set_checked(dir, "memory.oom.group", 1, 1, err)) < 0) return r;
  if ((r = set_checked(dir, "pids.max", limits->pids, limits->pids, err)) < 0) return r;
  uint64_t quota = (uint64_t)(limits->cpus * CPU_PERIOD_US + 0.5);
  if (quota < 1000) quota = 1000;
  char text[64], held[64];
  snprintf(text, sizeof text, "%" PRIu64 " %u", quota, CPU_PERIOD_US);
  if ((r = write_file(dir, "cpu.max", text, err)) < 0) return r;
  if (read_file(dir, "cpu.max", held, sizeof held) < 0 || strncmp(held, text, strlen(text)) != 0)
    return dome_error_set(err, EIO, "`%s/cpu.max` holds `%.40s` after writing `%s`", dir.path, held, text);
  return 0;
}

/* On unified hosts the controllers must be enabled for <own>/dome's children. Our own cgroup holds
 * processes (domed), so enabling them there may be refused (no internal processes rule): then the
 * operator has to delegate a cgroup whose subtree_control already lists them (docs/images.md). */
static int enable_v2_controllers(const char *self, dome_error *err) {
  char dome[600], enabled[256] = "";
  snprintf(dome, sizeof dome, "%s/dome", self);
  if (jail_cgroup_read(dome, "cgroup.subtree_control", enabled, sizeof enabled) >= 0 &&
      strstr(enabled, "memory") && strstr(enabled, "pids") && strstr(enabled, "cpu"))
    return 0;
  dome_error ignored;
  jail_cgroup_write(self, "cgroup.subtree_control", "+memory +pids +cpu", &ignored);
  int r = jail_cgroup_write(dome, "cgroup.subtree_control", "+memory +pids +cpu", err);
  return r < 0 ? dome_error_wrap(err, "enable memory, pids, cpu controllers below `%s`", self) : 0;
}

/* Leaves of a dome process that was killed outright (SIGKILL gives no chance to tear down): its jail died
 * with it (PR_SET_PDEATHSIG, pid namespace), but the empty leaves stayed. Named jail-<pid>-<seq>, they
 * are removed once per process when <pid> no longer exists; rmdir only ever removes empty cgroups. */
static void sweep_dir(const char *self) {
  char parent[600];
  leaf_parent(parent, sizeof parent, self);
  DIR *d = opendir(parent);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    int pid;
    if (sscanf(e->d_name, "jail-%d-", &pid) != 1 || pid <= 0 || pid == (int)getpid()) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    char leaf[900];
    snprintf(leaf, sizeof leaf, "%s/%s", parent, e->d_name);
    rmdir(leaf);
  }
  if (d) closedir(d);
}

static pthread_mutex_t sweep_lock = PTHREAD_MUTEX_INITIALIZER;
static bool swept;

void jail_cgroup_sweep_stale(const struct jail_leaf *leaf) {
  pthread_mutex_lock(&sweep_lock);
  if (!swept) {
    swept = true;
    const struct jail_cgroup_layout *l = jail_cgroup_layout();
    if (l->v2_mount[0] && !(leaf->parents_created & 1u)) sweep_dir(l->v2_self);
    for (int c = 0; c < JAIL_V1_COUNT; c++)
      if (l->v1_self[c][0] && !(leaf->parents_created & (2u << c))) sweep_dir(l->v1_self[c]);
  }
  pthread_mutex_unlock(&sweep_lock);
}

int jail_cgroup_create(struct jail_leaf *leaf, const char *name, const struct jail_limits *limits,
                       dome_error *err) {
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  memset(leaf, 0, sizeof *leaf);
  leaf->v2_fd = -1;
  for (int c = 0; c < JAIL_V1_COUNT; c++) leaf->v1_fd[c] = -1;
  snprintf(leaf->name, sizeof leaf->name, "%s", name);
  int r = 0;
  if (l->v2_mount[0]) {
    bool created = false;
    if ((r = make_leaf(leaf->v2_path, sizeof leaf->v2_path, l->v2_self, name, &created, err)) < 0) goto fail;
    if (created) leaf->parents_created |= 1u;
    leaf->v2_fd = open(leaf->v2_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (leaf->v2_fd < 0 || fstat(leaf->v2_fd, &st) < 0) {
      r = dome_error_set_errno(err, errno, "open cgroup `%s`", leaf->v2_path);
      goto fail;
    }
    leaf->v2_id = (uint64_t)st.st_ino;
    if (l->v2_controllers) {
      if ((r = enable_v2_controllers(l->v2_self, err)) < 0) goto fail;
      if ((r = apply_v2(leaf, limits, err)) < 0) goto fail;
    }
  }
  if (!l->v2_controllers && (!l->v1_self[JAIL_V1_MEMORY][0] || !l->v1_self[JAIL_V1_PIDS][0])) {
    r = dome_error_set(err, ENOTSUP, "no memory or pids cgroup controller available (v1 or v2)");
    goto fail;
  }
  return 0;
fail:
  remove_leaf_dirs(leaf);
  return dome_error_wrap(err, "create cgroup leaf `%s`", name);
}

int jail_cgroup_create_v1(struct jail_leaf *leaf, const struct jail_limits *limits, dome_error *err) {
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  int r = 0;
  for (int c = 0; c < JAIL_V1_COUNT; c++) {
    if (!l->v1_self[c][0]) continue;
    /* CPU time comes from the cgroup2 leaf's cpu.stat, present with or without controllers. */
    if (c == JAIL_V1_CPUACCT && leaf->v2_path[0]) continue;
    for (int earlier = 0; earlier < c; earlier++)
      if (strcmp(l->v1_mount[earlier], l->v1_mount[c]) == 0 && leaf->v1_path[earlier][0]) {
        memcpy(leaf->v1_path[c], leaf->v1_path[earlier], sizeof leaf->v1_path[c]);
        leaf->v1_fd[c] = leaf->v1_fd[earlier];
        break;
      }
    if (leaf->v1_path[c][0]) continue;
    bool created = false;
    if ((r = make_leaf(leaf->v1_path[c], sizeof leaf->v1_path[c], l->v1_self[c], leaf->name, &created, err)) <
        0)
      return dome_error_wrap(err, "create cgroup leaf `%s`", leaf->name);
    if (created) leaf->parents_created |= 2u << c;
    leaf->v1_owner[c] = true;
    leaf->v1_fd[c] = open(leaf->v1_path[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (leaf->v1_fd[c] < 0) return dome_error_set_errno(err, errno, "open cgroup `%s`", leaf->v1_path[c]);
  }
  if ((r = apply_v1(leaf, limits, err)) < 0)
    return dome_error_wrap(err, "create cgroup leaf `%s`", leaf->name);
  return 0;
}

int jail_cgroup_apply_limits(const struct jail_leaf *leaf, const struct jail_limits *limits,
                             dome_error *err) {
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  int r;
  if (leaf->v2_path[0] && l->v2_controllers && (r = apply_v2(leaf, limits, err)) < 0)
    return dome_error_wrap(err, "set limits of cgroup leaf `%s`", leaf->name);
  if ((r = apply_v1(leaf, limits, err)) < 0)
    return dome_error_wrap(err, "set limits of cgroup leaf `%s`", leaf->name);
  return 0;
}

int jail_cgroup_attach(const struct jail_leaf *leaf, pid_t pid, bool clone_into_cgroup, dome_error *err) {
  char text[32];
  snprintf(text, sizeof text, "%d", (int)pid);
  if (leaf->v2_path[0] && !clone_into_cgroup)
    return jail_cgroup_write(leaf->v2_path, "cgroup.procs", text, err);
  return 0;
}

int jail_cgroup_open_tasks(const struct jail_leaf *leaf, int fds[JAIL_V1_COUNT], size_t *count,
                           dome_error *err) {
  *count = 0;
  for (int c = 0; c < JAIL_V1_COUNT; c++) {
    if (!leaf->v1_owner[c]) continue;
    int fd = open_file(v1_dir(leaf, c), "tasks", O_WRONLY);
    if (fd < 0) {
      int e = errno;
      while (*count > 0) close(fds[--*count]);
      return dome_error_set_errno(err, e, "open `%s/tasks`", leaf->v1_path[c]);
    }
    fds[(*count)++] = fd;
  }
  return 0;
}

static int kill_listed(const char *dir) {
  char path[700];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  int count = 0, pid;
  while (fscanf(f, "%d", &pid) == 1) {
    if (pid > 1) kill(pid, SIGKILL);
    count++;
  }
  fclose(f);
  return count;
}

void jail_cgroup_kill(const struct jail_leaf *leaf) {
  dome_error ignored;
  if (leaf->v2_path[0] && jail_cgroup_write(leaf->v2_path, "cgroup.kill", "1", &ignored) == 0) return;
  if (leaf->v2_path[0]) kill_listed(leaf->v2_path);
  for (int c = 0; c < JAIL_V1_COUNT; c++)
    if (leaf->v1_owner[c]) kill_listed(leaf->v1_path[c]);
}

int jail_cgroup_oom_eventfd(const struct jail_leaf *leaf, int *control_fd) {
  *control_fd = -1;
  struct cgroup_dir memory = v1_dir(leaf, JAIL_V1_MEMORY);
  if (!memory.path[0] || jail_cgroup_layout()->v2_controllers) return -1;
  char registration[64];
  int control = open_file(memory, "memory.oom_control", O_RDONLY);
  int event = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  dome_error ignored;
  snprintf(registration, sizeof registration, "%d %d", event, control);
  if (control < 0 || event < 0 || write_file(memory, "cgroup.event_control", registration, &ignored) < 0) {
    if (control >= 0) close(control);
    if (event >= 0) close(event);
    return -1;
  }
  *control_fd = control;
  return event;
}

uint64_t jail_cgroup_current_pids(const struct jail_leaf *leaf) {
  uint64_t value = 0;
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  if (l->v2_controllers && read_u64(v2_dir(leaf), "pids.current", &value) == 0) return value;
  if (leaf->v1_path[JAIL_V1_PIDS][0] && read_u64(v1_dir(leaf, JAIL_V1_PIDS), "pids.current", &value) == 0)
    return value;
  return 0;
}

/* Where pids.* live: the cgroup2 leaf with controllers, else the v1 pids leaf. */
static struct cgroup_dir pids_dir(const struct jail_leaf *leaf) {
  return jail_cgroup_layout()->v2_controllers ? v2_dir(leaf) : v1_dir(leaf, JAIL_V1_PIDS);
}

void jail_cgroup_read_stats(const struct jail_leaf *leaf, struct jail_cgroup_stats *stats) {
  memset(stats, 0, sizeof *stats);
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  uint64_t value;
  if (leaf->v2_path[0]) stats->cpu_ns = read_key(v2_dir(leaf), "cpu.stat", "usage_usec") * 1000u;
  if (stats->cpu_ns == 0 && leaf->v1_path[JAIL_V1_CPUACCT][0] &&
      read_u64(v1_dir(leaf, JAIL_V1_CPUACCT), "cpuacct.usage", &value) == 0)
    stats->cpu_ns = value;
  struct cgroup_dir pids = pids_dir(leaf);
  if (pids.path[0]) {
    if (read_u64(pids, "pids.peak", &value) == 0) stats->peak_pids = value;
    stats->pids_limited = read_key(pids, "pids.events", "max") > 0;
  }
  if (l->v2_controllers) {
    if (read_u64(v2_dir(leaf), "memory.peak", &value) == 0) stats->peak_memory_bytes = value;
    stats->oom_killed = read_key(v2_dir(leaf), "memory.events", "oom_kill") > 0;
  } else if (leaf->v1_path[JAIL_V1_MEMORY][0]) {
    struct cgroup_dir memory = v1_dir(leaf, JAIL_V1_MEMORY);
    if (read_u64(memory, "memory.max_usage_in_bytes", &value) == 0) stats->peak_memory_bytes = value;
    stats->oom_killed = read_key(memory, "memory.oom_control", "oom_kill") > 0;
  }
}

bool jail_cgroup_has_pids_peak(const struct jail_leaf *leaf) {
  /* a property of the kernel: read at the first leaf, then remembered (-1: not known yet) */
  static _Atomic int known = -1;
  int has = atomic_load(&known);
  if (has < 0) {
    struct cgroup_dir pids = pids_dir(leaf);
    uint64_t value;
    has = pids.path[0] && read_u64(pids, "pids.peak", &value) == 0;
    atomic_store(&known, has);
  }
  return has;
}

static bool leaf_empty(const char *dir) {
  char buffer[64];
  int n = jail_cgroup_read(dir, "cgroup.procs", buffer, sizeof buffer);
  return n <= 0;
}

int jail_cgroup_destroy(struct jail_leaf *leaf, dome_error *err) {
  close_leaf_fds(leaf);
  const struct jail_cgroup_layout *l = jail_cgroup_layout();
  const char *paths[1 + JAIL_V1_COUNT];
  const char *selves[1 + JAIL_V1_COUNT];
  size_t count = 0;
  if (leaf->v2_path[0]) {
    selves[count] = l->v2_self;
    paths[count++] = leaf->v2_path;
  }
  for (int c = 0; c < JAIL_V1_COUNT; c++)
    if (leaf->v1_owner[c]) {
      selves[count] = l->v1_self[c];
      paths[count++] = leaf->v1_path[c];
    }
  bool killed = false;
  int failure = 0;
  for (size_t i = 0; i < count; i++) {
    struct timespec pause = {0, 1000000};
    for (int attempt = 0;; attempt++) {
      if (rmdir(paths[i]) == 0 || errno == ENOENT) break;
      if (errno != EBUSY || attempt >= 2000) {
        failure = -errno;
        dome_error_set_errno(err, errno, "remove cgroup `%s`", paths[i]);
        break;
      }
      if (!killed || attempt % 100 == 99) {
        jail_cgroup_kill(leaf);
        killed = true;
      }
      if (leaf_empty(paths[i]) && attempt > 50) pause.tv_nsec = 5000000;
      nanosleep(&pause, NULL);
    }
    char parent[600];
    leaf_parent(parent, sizeof parent, selves[i]);
    if (strcmp(parent, selves[i]) != 0) rmdir(parent); /* fails while other jails use it: fine */
  }
  leaf->v2_path[0] = '\0';
  for (int c = 0; c < JAIL_V1_COUNT; c++) leaf->v1_owner[c] = false, leaf->v1_path[c][0] = '\0';
  return failure;
}
