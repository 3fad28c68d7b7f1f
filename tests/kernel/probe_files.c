/* File scenarios: BPF-LSM file tables (full level, in the VM) and their Landlock translation (reduced). */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/jail/jail.h"
#include "tests/kernel/probe.h"

static char dir[256];
static int passed_fd_socket = -1;
static int inherited_secret_fd = -1;  /* opened before the jail: read() must meet file_permission */
static int inherited_allowed_fd = -1; /* O_RDWR, allowed.txt: read allowed, write refused */
static int inherited_alias_fd = -1;   /* alias/f.txt through the bind mount: the path crosses two mounts */

static const char *err_name(int e) {
  return e ? strerror(e) : "success";
}

static void path_of(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

static int try_open(const char *name, int flags) {
  char path[512];
  path_of(path, sizeof(path), name);
  int fd = open(path, flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

static int write_file(const char *name, const char *text) {
  char path[512];
  path_of(path, sizeof(path), name);
  FILE *file = fopen(path, "we");
  if (!file) return -errno;
  fputs(text, file);
  return fclose(file) == 0 ? 0 : -errno;
}

static int run_program(const char *path) {
  pid_t pid = fork();
  if (pid == 0) {
    execl(path, path, (char *)NULL);
    _exit(errno == EPERM ? 126 : errno == EACCES ? 125 : 127);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int copy_file(const char *from, const char *to, mode_t mode) {
  int in = open(from, O_RDONLY | O_CLOEXEC), out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (in < 0 || out < 0) return -1;
  char buffer[65536];
  ssize_t n;
  while ((n = read(in, buffer, sizeof(buffer))) > 0)
    if (write(out, buffer, (size_t)n) != n) return -1;
  close(in);
  close(out);
  return 0;
}

/* ---------------------------------------------------------------- full level (BPF-LSM) */

/* One open with its expected outcome, run inside the jail. */
struct expectation {
  const char *name;    /* relative to dir */
  int expected;        /* errno, 0 = success */
  const char *message; /* the check's name */
};

static int expectations_in_jail(void *arg) {
  for (const struct expectation *x = arg; x->name; x++) {
    int e = try_open(x->name, O_RDONLY);
    probe_check(e == x->expected, x->message, "%s: got %s", x->name, err_name(e));
  }
  return 0;
}

/* The verdict cache (dome.bpf.c) must never outlive the path it was computed for: fill it, change the path
 * in the parent, check again. */
static void cache_invalidation_checks(const struct probe_leaf *leaf) {
  char from[512], to[512];
  struct expectation fill[] = {{"cache/c.txt", 0, "cache fill: cache/c.txt"},
                               {"cache/c.txt", 0, "cache hit: cache/c.txt"},
                               {"plain.txt", 0, "cache fill: plain.txt"},
                               {"work/w.txt", 0, "cache fill: work/w.txt"},
                               {NULL, 0, NULL}};
  probe_in_leaf(leaf, expectations_in_jail, fill);
  path_of(from, sizeof(from), "cache");
  path_of(to, sizeof(to), "private/cache");
  rename(from, to);
  struct expectation renamed[] = {
      {"private/cache/c.txt", EPERM, "renamed into a forbidden subtree: cache invalidated"}, {NULL, 0, NULL}};
  probe_in_leaf(leaf, expectations_in_jail, renamed);
  path_of(from, sizeof(from), "plain.txt");
  path_of(to, sizeof(to), "private/plain-link");
  link(from, to);
  struct expectation linked[] = {
      {"private/plain-link", EPERM, "new hard link in a forbidden subtree: not cached"},
      {"plain.txt", 0, "the original name still opens"},
      {NULL, 0, NULL}};
  probe_in_leaf(leaf, expectations_in_jail, linked);
  path_of(from, sizeof(from), "work");
  path_of(to, sizeof(to), "private/wmnt");
  if (mount(from, to, NULL, MS_BIND, NULL) == 0) {
    struct expectation bound[] = {
        {"private/wmnt/w.txt", EPERM, "bind mount into a forbidden subtree: not cached"},
        {"work/w.txt", 0, "the original mount still opens"},
        {NULL, 0, NULL}};
    probe_in_leaf(leaf, expectations_in_jail, bound);
    umount2(to, MNT_DETACH);
  } else {
    probe_check(false, "bind mount for the cache check", "%s", err_name(errno));
  }
}

/* A name operation as the jail: returns 0 or errno. */
static int try_link(const char *from, const char *to) {
  char a[512], b[512];
  path_of(a, sizeof(a), from);
  path_of(b, sizeof(b), to);
  return link(a, b) == 0 ? 0 : errno;
}

static int try_rename(const char *from, const char *to) {
  char a[512], b[512];
  path_of(a, sizeof(a), from);
  path_of(b, sizeof(b), to);
  return rename(a, b) == 0 ? 0 : errno;
}

/* link(2)/rename(2) inside the jail must not make a denied file reachable under an allowed name. */
static void alias_checks(void) {
  int e = try_link("private/f.txt", "work/stolen");
  probe_check(e == EPERM, "path_link: hard link of a file of a forbidden subtree into work/ refused",
              "got %s", err_name(e));
  e = try_open("work/stolen", O_RDONLY);
  probe_check(e == ENOENT, "path_link: the refused link does not exist", "got %s", err_name(e));
  e = try_link("secret.txt", "work/secret-link");
  probe_check(e == EPERM, "path_link: hard link of a forbidden file refused", "got %s", err_name(e));
  e = try_link("work/w.txt", "work/w-link");
  probe_check(e == 0, "path_link: hard link within work/ (same decisions) permitted", "got %s", err_name(e));
  if (e == 0) {
    e = try_open("work/w-link", O_RDONLY);
    probe_check(e == 0, "path_link: the permitted link opens", "got %s", err_name(e));
    char path[512];
    path_of(path, sizeof(path), "work/w-link");
    unlink(path);
  }
  e = try_rename("private/f.txt", "work/moved");
  probe_check(e == EPERM, "path_rename: moving a file out of a forbidden subtree refused", "got %s",
              err_name(e));
  e = try_rename("work/holder", "work/holder-moved");
  probe_check(e == EPERM, "path_rename: moving a directory that holds a forbidden subtree refused", "got %s",
              err_name(e));
  e = try_open("work/holder/deep/d.txt", O_RDONLY);
  probe_check(e == EPERM, "the forbidden subtree stays forbidden", "got %s", err_name(e));
  e = try_rename("work/plain-dir", "work/plain-dir-moved");
  probe_check(e == 0, "path_rename: moving a directory with nothing forbidden beneath permitted", "got %s",
              err_name(e));
  if (e == 0) try_rename("work/plain-dir-moved", "work/plain-dir");
}

/* Descriptors opened before the jail (inherited across fork + cgroup entry) meet file_permission. */
static void inherited_fd_checks(void) {
  char buffer[16];
  errno = 0;
  ssize_t n = read(inherited_secret_fd, buffer, sizeof(buffer));
  int e = n < 0 ? errno : 0;
  probe_check(e == EPERM, "file_permission: read() of an inherited fd of the forbidden file refused",
              "got %zd, %s", n, err_name(e));
  n = pread(inherited_allowed_fd, buffer, sizeof(buffer), 0);
  e = n < 0 ? errno : 0;
  probe_check(n > 0, "file_permission: read() of an inherited fd of a permitted file", "got %zd, %s", n,
              err_name(e));
  n = pwrite(inherited_allowed_fd, "x", 1, 0);
  e = n < 0 ? errno : 0;
  probe_check(e == EPERM, "file_permission: write() to an inherited fd outside work/ refused", "got %zd, %s",
              n, err_name(e));
  n = read(inherited_alias_fd, buffer, sizeof(buffer));
  e = n < 0 ? errno : 0;
  probe_check(e == EPERM, "file_permission: read() of an inherited fd through the bind-mount alias refused",
              "got %zd, %s", n, err_name(e));
}

static int lsm_checks(void *arg) {
  (void)arg;
  int e;
  char path[512];
  e = try_open("allowed.txt", O_RDONLY);
  probe_check(e == 0, "file_open read permitted", "got %s", err_name(e));
  e = try_open("secret.txt", O_RDONLY);
  probe_check(e == EPERM, "file_open read of a forbidden file", "got %s", err_name(e));
  e = try_open("link", O_RDONLY);
  probe_check(e == EPERM, "symlink to the forbidden file", "got %s", err_name(e));
  e = try_open("hardlink", O_RDONLY);
  probe_check(e == EPERM, "hard link to the forbidden file (device+inode)", "got %s", err_name(e));
  e = try_open("private/f.txt", O_RDONLY);
  probe_check(e == EPERM, "file in a forbidden subtree", "got %s", err_name(e));
  e = try_open("linked-out", O_RDONLY);
  probe_check(e == EPERM, "hard link made before the jail, from outside the forbidden subtree", "got %s",
              err_name(e));
  alias_checks();
  inherited_fd_checks();
  e = try_open("alias/f.txt", O_RDONLY);
  probe_check(e == EPERM, "bind-mount alias of the forbidden subtree", "got %s", err_name(e));
  path_of(path, sizeof(path), "secret.txt");
  int opath = open(path, O_PATH | O_CLOEXEC);
  if (probe_check(opath >= 0, "O_PATH descriptor of the forbidden file (no open of content)", "got %s",
                  err_name(errno))) {
    char reopen[64];
    snprintf(reopen, sizeof(reopen), "/proc/self/fd/%d", opath);
    int fd = open(reopen, O_RDONLY | O_CLOEXEC);
    e = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    probe_check(e == EPERM, "forbidden file reopened through /proc/self/fd", "got %s", err_name(e));
    close(opath);
  }
  /* SCM_RIGHTS: the supervisor side queued an fd of the forbidden file before we entered the jail. */
  char data;
  char control[CMSG_SPACE(sizeof(int))] = {0};
  struct iovec iov = {.iov_base = &data, .iov_len = 1};
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)};
  ssize_t got = recvmsg(passed_fd_socket, &msg, MSG_CMSG_CLOEXEC);
  struct cmsghdr *cmsg = got >= 0 ? CMSG_FIRSTHDR(&msg) : NULL;
  bool received = cmsg && cmsg->cmsg_type == SCM_RIGHTS;
  probe_check(got == 1 && !received && (msg.msg_flags & MSG_CTRUNC),
              "SCM_RIGHTS fd of the forbidden file refused", "got %zd bytes, fd %s, flags %#x", got,
              received ? "received" : "none", msg.msg_flags);
  e = try_open("work/new.txt", O_WRONLY | O_CREAT);
  probe_check(e == 0, "file_open write permitted in work/", "got %s", err_name(e));
  e = try_open("allowed.txt", O_WRONLY);
  probe_check(e == EPERM, "file_open write outside work/ refused", "got %s", err_name(e));
  e = run_program("/bin/true");
  probe_check(e == 0, "exec of a permitted binary", "status %d", e);
  path_of(path, sizeof(path), "forbidden-true");
  e = run_program(path);
  probe_check(e == 126, "exec of a forbidden binary refused (EPERM)", "status %d", e);
  e = ptrace(PTRACE_ATTACH, getppid(), 0, 0) == 0 ? 0 : errno;
  probe_check(e == EPERM, "ptrace across the jail boundary", "got %s", err_name(e));
  e = kill(getppid(), 0) == 0 ? 0 : errno;
  probe_check(e == EPERM, "kill across the jail boundary", "got %s", err_name(e));
  e = kill(getpid(), 0) == 0 ? 0 : errno;
  probe_check(e == 0, "kill inside the jail", "got %s", err_name(e));
  union bpf_attr attr = {.map_type = BPF_MAP_TYPE_ARRAY, .key_size = 4, .value_size = 4, .max_entries = 1};
  long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
  e = fd < 0 ? errno : 0;
  if (fd >= 0) close((int)fd);
  probe_check(e == EPERM, "bpf(2) from the jail", "got %s", err_name(e));
  return 0;
}

/* A rule change applies to descriptors already open: read() of the same inherited descriptor is allowed,
 * the tables change (plain.txt forbidden), the next read() is refused (file_permission re-decides: the
 * verdict cached for the old generation does not answer for the new one). */
static int read_inherited(void *arg) {
  char byte;
  return pread(*(int *)arg, &byte, 1, 0) == 1 ? 0 : errno == EPERM ? 1 : 2;
}

static void rule_change_checks(struct dome_kernel *kernel, const struct probe_leaf *leaf,
                               struct dome_rule_tables *tables) {
  char path[512];
  path_of(path, sizeof(path), "work/w.txt");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int before = probe_in_leaf(leaf, read_inherited, &fd);
  probe_check(before == 0, "read() of an open descriptor before the rule change", "status %d", before);
  dome_error err = {0};
  uint32_t policy = 0;
  int r = dome_rule_tables_add_policy(tables, "forbid-later", &policy, &err);
  if (r == 0)
    r = dome_rule_tables_add_file(tables, path, DOME_MATCH_EXACT, DOME_FILE_READ, DOME_DECISION_DENY, policy,
                                  &err);
  if (r == 0) r = dome_kernel_install_tables(kernel, 3, tables, &err);
  if (probe_check(r == 0, "rule change: forbid work/w.txt", "%s", err.message)) {
    int after = probe_in_leaf(leaf, read_inherited, &fd);
    probe_check(after == 1, "rule change applies to an open descriptor (file_permission)", "status %d",
                after);
    probe_collect(kernel, 500);
    probe_check(probe_has_denial(DOME_HOOK_FILE_PERMISSION, path, "forbid-later"),
                "event: file_permission after the rule change names forbid-later", "missing");
  }
  if (fd >= 0) close(fd);
}

int probe_scenario_files(void) {
  snprintf(dir, sizeof(dir), "/tmp/dome-ktest-files-%d", getpid());
  char path[512], other[512];
  if (mkdir(dir, 0755) != 0) return -errno;
  const char *dirs[] = {"private", "private/wmnt", "private/cache",    "alias",         "work",
                        "cache",   "work/holder",  "work/holder/deep", "work/plain-dir"}; /* parents first */
  const size_t dir_count = sizeof(dirs) / sizeof(dirs[0]);
  for (size_t i = 0; i < dir_count; i++) {
    path_of(path, sizeof(path), dirs[i]);
    mkdir(path, 0755);
  }
  write_file("allowed.txt", "public\n");
  write_file("secret.txt", "secret\n");
  write_file("private/f.txt", "private\n");
  write_file("cache/c.txt", "cached\n");
  write_file("plain.txt", "plain\n");
  write_file("work/w.txt", "work\n");
  write_file("private/g.txt", "linked\n");
  write_file("work/holder/deep/d.txt", "deep\n");
  write_file("work/plain-dir/p.txt", "plain\n");
  /* A hard link made before the jail starts, from outside the forbidden subtree private/. */
  path_of(path, sizeof(path), "private/g.txt");
  path_of(other, sizeof(other), "linked-out");
  link(path, other);
  path_of(path, sizeof(path), "secret.txt");
  path_of(other, sizeof(other), "link");
  symlink(path, other);
  path_of(other, sizeof(other), "hardlink");
  link(path, other);
  path_of(other, sizeof(other), "forbidden-true");
  copy_file("/bin/true", other, 0755);
  char private_dir[512], alias_dir[512];
  path_of(private_dir, sizeof(private_dir), "private");
  path_of(alias_dir, sizeof(alias_dir), "alias");
  int r = mount(private_dir, alias_dir, NULL, MS_BIND, NULL);
  if (r != 0) return -errno;

  int sv[2] = {-1, -1};
  socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv);
  int secret_fd = open(path, O_RDONLY | O_CLOEXEC);
  inherited_secret_fd = secret_fd;
  path_of(other, sizeof(other), "allowed.txt");
  inherited_allowed_fd = open(other, O_RDWR | O_CLOEXEC);
  path_of(other, sizeof(other), "alias/f.txt");
  inherited_alias_fd = open(other, O_RDONLY | O_CLOEXEC);
  {
    char data = 'x';
    char control[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &secret_fd, sizeof(int));
    sendmsg(sv[0], &msg, 0);
  }
  passed_fd_socket = sv[1];

  char json[4096];
  snprintf(
      json, sizeof(json),
      "{\"agent\": \"probe\", \"policies\": [\"permit-read-root\", \"permit-exec-root\", \"forbid-secret\","
      " \"forbid-private\", \"forbid-exec\", \"permit-write-work\", \"forbid-deep\"], \"network\": [], "
      "\"files\": ["
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", \"policy\": "
      "\"permit-read-root\"},"
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"exec\", \"decision\": \"allow\", \"policy\": "
      "\"permit-exec-root\"},"
      " {\"path\": \"%s/secret.txt\", \"match\": \"exact\", \"access\": \"read\", \"decision\": \"deny\", "
      "\"policy\": \"forbid-secret\"},"
      " {\"path\": \"%s/private\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"deny\", "
      "\"policy\": \"forbid-private\"},"
      " {\"path\": \"%s/forbidden-true\", \"match\": \"exact\", \"access\": \"exec\", \"decision\": "
      "\"deny\", \"policy\": \"forbid-exec\"},"
      " {\"path\": \"%s/work\", \"match\": \"subtree\", \"access\": \"write\", \"decision\": \"allow\", "
      "\"policy\": \"permit-write-work\"},"
      " {\"path\": \"%s/work/holder/deep\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": "
      "\"deny\", \"policy\": \"forbid-deep\"}"
      "]}",
      dir, dir, dir, dir, dir);
  struct probe_leaf leaf = {.fd = -1};
  struct dome_kernel *kernel = NULL;
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  dome_error err = {0};
  struct dome_kernel_options options = {.level = DOME_LEVEL_FULL};
  if ((r = probe_leaf_create(&leaf, "files")) < 0) goto out;
  if ((r = probe_tables(&tables, json)) < 0) goto out;
  r = dome_kernel_open(&kernel, &options, &err);
  if (!probe_check(r == 0, "open kernel enforcement (full)", "%s", err.message)) goto out;
  r = dome_kernel_install_tables(kernel, 3, &tables, &err);
  if (!probe_check(r == 0, "install file tables", "%s", err.message)) goto out;
  struct dome_kernel_attachment *attachment = NULL;
  struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 3};
  r = dome_kernel_attach(kernel, &jail, &attachment, &err);
  if (!probe_check(r == 0, "attach jail", "%s", err.message)) goto out;
  probe_check(probe_in_leaf(&leaf, lsm_checks, NULL) == 0, "jailed child ran", "child failed");
  probe_collect(kernel, 500);
  char object[512];
  path_of(object, sizeof(object), "secret.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, object, "forbid-secret"),
              "event: forbidden file names forbid-secret", "%u events", probe_denial_count);
  path_of(object, sizeof(object), "hardlink");
  probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, object, "forbid-secret"),
              "event: hard link names forbid-secret", "missing");
  path_of(object, sizeof(object), "linked-out");
  probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, object, "forbid-private"),
              "event: pre-existing hard link names forbid-private", "missing");
  path_of(object, sizeof(object), "private/f.txt");
  probe_check(probe_has_denial(DOME_HOOK_PATH_LINK, object, "forbid-private"),
              "event: path_link names the linked file and forbid-private", "missing");
  probe_check(probe_has_denial(DOME_HOOK_PATH_RENAME, object, "forbid-private"),
              "event: path_rename names the moved file and forbid-private", "missing");
  path_of(object, sizeof(object), "work/holder");
  probe_check(probe_has_denial(DOME_HOOK_PATH_RENAME, object, "forbid-deep"),
              "event: directory rename names forbid-deep", "missing");
  path_of(object, sizeof(object), "secret.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_PERMISSION, object, "forbid-secret"),
              "event: file_permission read of the inherited fd names forbid-secret", "missing");
  path_of(object, sizeof(object), "allowed.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_PERMISSION, object, ""),
              "event: file_permission write of the inherited fd (default deny)", "missing");
  path_of(object, sizeof(object), "alias/f.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_PERMISSION, object, "forbid-private"),
              "event: file_permission names the alias path (walk across the bind mount and /tmp)", "missing");
  path_of(object, sizeof(object), "alias/f.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, object, "forbid-private"),
              "event: bind-mount alias names forbid-private", "missing");
  path_of(object, sizeof(object), "secret.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_RECEIVE, object, "forbid-secret"),
              "event: SCM_RIGHTS file_receive", "missing");
  path_of(object, sizeof(object), "forbidden-true");
  probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, object, "forbid-exec") ||
                  probe_has_denial(DOME_HOOK_BPRM_CHECK, object, "forbid-exec"),
              "event: exec of the forbidden binary names forbid-exec", "missing");
  path_of(object, sizeof(object), "allowed.txt");
  probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, object, ""), "event: write outside work/ (default deny)",
              "missing");
  bool ptrace_seen = false, kill_seen = false, bpf_seen = false;
  for (unsigned i = 0; i < probe_denial_count; i++) {
    ptrace_seen |= probe_denials[i].hook == DOME_HOOK_PTRACE;
    kill_seen |= probe_denials[i].hook == DOME_HOOK_TASK_KILL;
    bpf_seen |= probe_denials[i].hook == DOME_HOOK_BPF;
  }
  probe_check(ptrace_seen && kill_seen && bpf_seen, "events: ptrace, task_kill, bpf",
              "ptrace %d kill %d bpf %d", ptrace_seen, kill_seen, bpf_seen);
  cache_invalidation_checks(&leaf);
  rule_change_checks(kernel, &leaf, &tables);
  /* Outside the jail nothing changes. */
  path_of(path, sizeof(path), "secret.txt");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  probe_check(fd >= 0, "outside the jail the forbidden file opens (scoped)", "got %s", err_name(errno));
  if (fd >= 0) close(fd);
  dome_kernel_detach(kernel, attachment);
out:
  dome_kernel_close(kernel);
  dome_rule_tables_free(&tables);
  if (leaf.fd >= 0) probe_leaf_remove(&leaf);
  umount2(alias_dir, MNT_DETACH);
  close(sv[0]);
  close(sv[1]);
  if (secret_fd >= 0) close(secret_fd);
  if (inherited_allowed_fd >= 0) close(inherited_allowed_fd);
  if (inherited_alias_fd >= 0) close(inherited_alias_fd);
  const char *names[] = {"work/new.txt",
                         "private/f.txt",
                         "secret.txt",
                         "allowed.txt",
                         "link",
                         "hardlink",
                         "forbidden-true",
                         "private/g.txt",
                         "linked-out",
                         "work/w.txt",
                         "plain.txt",
                         "private/plain-link",
                         "private/cache/c.txt",
                         "work/holder/deep/d.txt",
                         "work/plain-dir/p.txt"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    path_of(path, sizeof(path), names[i]);
    unlink(path);
  }
  for (size_t i = dir_count; i-- > 0;) {
    path_of(path, sizeof(path), dirs[i]);
    rmdir(path);
  }
  rmdir(dir);
  return r < 0 ? r : 0;
}

/* ---------------------------------------------------------------- reduced level (Landlock) */

static struct dome_rule_tables *landlock_tables;

static int landlock_checks(void *arg) {
  (void)arg;
  dome_error err = {0};
  int ruleset = -1;
  unsigned degraded = 0;
  int r = dome_landlock_ruleset_from_tables(landlock_tables, false, &ruleset, &degraded, &err);
  if (!probe_check(r == 0, "landlock ruleset from tables", "%s", err.message)) return 1;
  r = dome_landlock_restrict_self(ruleset, &err);
  if (!probe_check(r == 0, "landlock restrict self", "%s", err.message)) return 1;
  int e = try_open("work/a.txt", O_RDONLY);
  probe_check(e == 0, "landlock: read permitted in work/", "got %s", err_name(e));
  e = try_open("work/new.txt", O_WRONLY | O_CREAT);
  probe_check(e == 0, "landlock: create permitted in work/", "got %s", err_name(e));
  e = try_open("other/allowed.txt", O_RDONLY);
  probe_check(e == 0, "landlock: exact file permitted", "got %s", err_name(e));
  e = try_open("other/forbidden.txt", O_RDONLY);
  probe_check(e == EACCES, "landlock: sibling of the exact file refused", "got %s", err_name(e));
  e = try_open("other/allowed.txt", O_WRONLY);
  probe_check(e == EACCES, "landlock: write to a read-only file refused", "got %s", err_name(e));
  int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
  e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_check(e == EACCES, "landlock: outside the tables refused", "got %s", err_name(e));
  return 0;
}

int probe_scenario_landlock(void) {
  snprintf(dir, sizeof(dir), "/tmp/dome-ktest-landlock-%d", getpid());
  char path[512];
  if (mkdir(dir, 0755) != 0) return -errno;
  path_of(path, sizeof(path), "work");
  mkdir(path, 0755);
  path_of(path, sizeof(path), "other");
  mkdir(path, 0755);
  write_file("work/a.txt", "a\n");
  write_file("other/allowed.txt", "ok\n");
  write_file("other/forbidden.txt", "no\n");
  probe_check(jail_landlock_abi() >= 1, "landlock available", "ABI %d", jail_landlock_abi());
  char json[2048];
  snprintf(json, sizeof(json),
           "{\"policies\": [\"p-work\", \"p-file\"], \"files\": ["
           " {\"path\": \"%s/work\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", "
           "\"policy\": \"p-work\"},"
           " {\"path\": \"%s/work\", \"match\": \"subtree\", \"access\": \"write\", \"decision\": \"allow\", "
           "\"policy\": \"p-work\"},"
           " {\"path\": \"%s/other/allowed.txt\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
           "\"allow\", \"policy\": \"p-file\"}"
           "]}",
           dir, dir, dir);
  struct dome_rule_tables tables, refused;
  dome_rule_tables_init(&tables);
  dome_rule_tables_init(&refused);
  int r = probe_tables(&tables, json);
  if (r == 0) {
    landlock_tables = &tables;
    pid_t pid = fork();
    if (pid == 0) _exit(landlock_checks(NULL));
    int status;
    waitpid(pid, &status, 0);
    probe_check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "landlock child ran", "status %#x", status);
  }
  /* A forbid inside a permitted subtree cannot be expressed: refused with a clear error, unless degraded. */
  snprintf(json, sizeof(json),
           "{\"policies\": [\"p-tree\", \"forbid-file\"], \"files\": ["
           " {\"path\": \"%s\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", "
           "\"policy\": \"p-tree\"},"
           " {\"path\": \"%s/other/forbidden.txt\", \"match\": \"exact\", \"access\": \"read\", "
           "\"decision\": \"deny\", \"policy\": \"forbid-file\"}"
           "]}",
           dir, dir);
  if (r == 0) r = probe_tables(&refused, json);
  if (r == 0) {
    dome_error err = {0};
    int c = dome_landlock_check_tables(&refused, &err);
    probe_check(
        c == -EOPNOTSUPP && strstr(err.message, "forbid-file") && strstr(err.message, "--allow-degraded"),
        "refused policy: forbid inside a permitted subtree gives a clear error", "%d: %s", c, err.message);
    printf("# %s\n", err.message);
    int fd = -1;
    unsigned degraded = 0;
    c = dome_landlock_ruleset_from_tables(&refused, false, &fd, &degraded, &err);
    probe_check(c == -EOPNOTSUPP && fd < 0, "refused policy: no ruleset without --allow-degraded", "%d", c);
    c = dome_landlock_ruleset_from_tables(&refused, true, &fd, &degraded, &err);
    probe_check(c == 0 && fd >= 0 && degraded == 1,
                "refused policy: --allow-degraded runs with 1 degraded entry", "%d, %u degraded: %s", c,
                degraded, err.message);
    if (fd >= 0) close(fd);
  }
  dome_rule_tables_free(&tables);
  dome_rule_tables_free(&refused);
  const char *names[] = {"work/a.txt",          "work/new.txt", "other/allowed.txt",
                         "other/forbidden.txt", "work",         "other"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    path_of(path, sizeof(path), names[i]);
    if (unlink(path) != 0) rmdir(path);
  }
  rmdir(dir);
  return r;
}
