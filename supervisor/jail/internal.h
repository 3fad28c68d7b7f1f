/* Private interfaces between the files of supervisor/jail (not for other libraries: use jail.h).
 *
 * Sides of clone3() (as nsjail): cgroup.c, image.c, seccomp.c, workspace.c and run.c run in the parent
 * (the calling thread of jail_run); child.c runs in the cloned child between clone3() and execve(). The
 * child of a multi-threaded process may not call malloc or stdio (another thread may have held their
 * locks at clone time), so the parent prepares everything the child needs in a `struct jail_plan`
 * (strings, file contents, the seccomp program) and the child only issues system calls. */
#ifndef DOME_JAIL_INTERNAL_H
#define DOME_JAIL_INTERNAL_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/common/error.h"
#include "supervisor/jail/jail.h"

/* Where the child assembles the new root before pivot_root: an existing directory of the host that is
 * never a bind source (sources are /usr, /dev/... and the image's rootfs, resolved before it is covered). */
#define JAIL_STAGING "/tmp"
/* devpts instance of a jail: at most this many ptys (the host's pool, kernel.pty.max, is shared). */
#define JAIL_PTY_MAX "64"
/* Size cap of the jail's private /dev/shm tmpfs (its pages count against the memory limit too). */
#define JAIL_SHM_SIZE "64m"
/* RLIMIT_SIGPENDING inside a jail: queued signals it may hold at once. */
#define JAIL_SIGPENDING_MAX 1024u

/* ---- cgroups (cgroup.c) ---- */

enum jail_v1_controller { JAIL_V1_MEMORY, JAIL_V1_PIDS, JAIL_V1_CPU, JAIL_V1_CPUACCT, JAIL_V1_COUNT };

struct jail_cgroup_layout {
  char v2_mount[256];                /* cgroup2 mount point, "" if none */
  char v2_self[512];                 /* our own cgroup2 directory (absolute host path) */
  bool v2_controllers;               /* memory, pids, cpu available in cgroup2 (unified host) */
  char v1_self[JAIL_V1_COUNT][512];  /* our own v1 cgroup directory per controller, "" if none */
  char v1_mount[JAIL_V1_COUNT][256]; /* mount point per controller (co-mounts share one) */
};

struct jail_leaf {
  char name[32];
  char v2_path[600];                /* "" when there is no cgroup2 hierarchy */
  int v2_fd;                        /* O_DIRECTORY fd of the cgroup2 leaf, -1 if none */
  uint64_t v2_id;                   /* inode number of the cgroup2 leaf */
  char v1_path[JAIL_V1_COUNT][600]; /* "" for controllers handled by cgroup2 or missing */
  bool v1_owner[JAIL_V1_COUNT];     /* false when this controller shares a co-mounted hierarchy's leaf */
  int v1_fd[JAIL_V1_COUNT];         /* O_DIRECTORY fds of the v1 leaves, -1 if none (closed by owners) */
  /* Hierarchies (bit 0: cgroup2, bit 1+c: v1 controller c) whose `dome` parent this leaf had to create:
   * a parent made just now holds no leaves of dead processes, so the sweep skips it. */
  unsigned parents_created;
};

struct jail_limits {
  uint64_t memory_bytes;
  uint32_t pids;
  double cpus;
};

struct jail_cgroup_stats {
  uint64_t cpu_ns;
  uint64_t peak_memory_bytes;
  uint64_t peak_pids; /* 0 when the kernel keeps no peak */
  bool oom_killed;
  bool pids_limited;
};

/* Discover (once per process) where our own cgroups are. Never fails: missing pieces are "". */
const struct jail_cgroup_layout *jail_cgroup_layout(void);
/* Fill `out` from /proc/self/cgroup and the mounts: with conventional_first, the usual places
 * (/sys/fs/cgroup, /sys/fs/cgroup/unified, /sys/fs/cgroup/<controller>) are tried through statfs/stat
 * before /proc/self/mountinfo is read; both must give the same layout (tests/unit/jail). */
void jail_cgroup_discover(struct jail_cgroup_layout *out, bool conventional_first);
/* Create the cgroup2 leaf `name` beneath our own cgroup (with its limits when cgroup2 has the
 * controllers), read them back (-EIO when the kernel holds another value); -ENOTSUP when neither v2
 * nor v1 offers memory and pids. On failure everything created is removed. */
int jail_cgroup_create(struct jail_leaf *leaf, const char *name, const struct jail_limits *limits,
                       dome_error *err);
/* Remove, once per process, the empty leaves of dome processes that were killed outright (leaves named
 * jail-<pid>-<n> whose pid no longer exists), in the `dome` parents that `leaf` found already there (one it
 * created cannot hold any). Called while a jail's child works, off the start path. */
void jail_cgroup_sweep_stale(const struct jail_leaf *leaf);
/* Hybrid hosts: create the v1 leaves (memory, pids, cpu; cpuacct without a cgroup2 leaf) of the leaf made
 * by jail_cgroup_create and apply the limits, read back. Done while the jail's child assembles its
 * mounts, so the two overlap. On failure returns -errno; what was created is removed by
 * jail_cgroup_destroy. Nothing to do (0) on unified hosts. */
int jail_cgroup_create_v1(struct jail_leaf *leaf, const struct jail_limits *limits, dome_error *err);
/* Write the limits again to every leaf of the jail (cgroup2 with controllers, and the v1 leaves made by
 * jail_cgroup_create_v1) and read each back: -EIO when the kernel holds another value, -errno from the
 * writes. Used when a prepared jail is bound to its call. */
int jail_cgroup_apply_limits(const struct jail_leaf *leaf, const struct jail_limits *limits, dome_error *err);
/* Place `pid` into the cgroup2 leaf when it was not cloned into it (clone_into_cgroup false); the v1
 * leaves are joined by the child itself through jail_cgroup_open_tasks. Returns 0 or -errno. */
int jail_cgroup_attach(const struct jail_leaf *leaf, pid_t pid, bool clone_into_cgroup, dome_error *err);
/* Open, with our (root) credentials, the `tasks` file of every v1 leaf this jail owns: fds[0..*count)
 * (O_WRONLY, close-on-exec), handed to the child with the second SYNC_GO; it writes "0" to each before it
 * writes any file of the jail: moving one
 * thread that is the writer itself skips the global cgroup_threadgroup_rwsem write lock, and with it the
 * RCU grace period (7-17 ms here) that writing a pid to cgroup.procs waits for
 * (kernel/cgroup/cgroup.c cgroup_procs_write_start; the permission check uses the opener's credentials,
 * Documentation/admin-guide/cgroup-v1/cgroups.rst "tasks"). Returns 0 or -errno with every fd closed. */
int jail_cgroup_open_tasks(const struct jail_leaf *leaf, int fds[JAIL_V1_COUNT], size_t *count,
                           dome_error *err);
/* Kill every process of the leaf: cgroup.kill where present, else SIGKILL to every pid listed. */
void jail_cgroup_kill(const struct jail_leaf *leaf);
/* Does the kernel keep pids.peak for the leaf (Linux 6.1+)? Without it the caller samples pids.current. */
bool jail_cgroup_has_pids_peak(const struct jail_leaf *leaf);
/* Read accounting; missing files leave their fields 0. */
void jail_cgroup_read_stats(const struct jail_leaf *leaf, struct jail_cgroup_stats *stats);
/* On hybrid hosts (v1 memory controller, no memory.oom.group): an eventfd that becomes readable when the
 * leaf's memory cgroup hits OOM (cgroup-v1/memory.rst, "OOM Control"), so that the caller kills the whole
 * jail as memory.oom.group would. *control_fd receives the memory.oom_control fd to close with it.
 * Returns the eventfd, or -1 where not needed or not available. */
int jail_cgroup_oom_eventfd(const struct jail_leaf *leaf, int *control_fd);
/* Number of tasks in the leaf now (pids.current or cgroup.procs), 0 when unknown. */
uint64_t jail_cgroup_current_pids(const struct jail_leaf *leaf);
/* Kill what remains, wait for the leaf to empty (bounded), remove it and the `dome` parents when empty.
 * Returns 0 or -errno (the leaf could not be removed within about 2 s). */
int jail_cgroup_destroy(struct jail_leaf *leaf, dome_error *err);
/* Write `value` to <dir>/<file>; read <dir>/<file> into buffer (NUL-terminated, trailing newline kept). */
int jail_cgroup_write(const char *dir, const char *file, const char *value, dome_error *err);
int jail_cgroup_read(const char *dir, const char *file, char *buffer, size_t size);

/* ---- the plan the child executes (child.c) ---- */

enum jail_plan_entry_kind { PLAN_DIR, PLAN_FILE, PLAN_SYMLINK };

struct jail_plan_entry {
  enum jail_plan_entry_kind kind;
  const char *path;   /* absolute path in the child's staging view (JAIL_STAGING/...) */
  const char *target; /* symlink target */
  const void *data;   /* file contents */
  size_t length;
  unsigned mode;
};

struct jail_plan_bind {
  const char *source; /* host path (before the staging dir is covered) */
  const char *target; /* staging path */
  bool is_directory;
};

struct jail_landlock_rule {
  const char *path; /* in the final root */
  uint64_t access;  /* LANDLOCK_ACCESS_FS_* bits */
  bool optional;    /* missing path: skip */
  bool exact;       /* directory: skip (see jail_path_rule) */
};

struct jail_plan {
  /* root */
  bool root_is_tmpfs;       /* host-ro: a tmpfs populated from root_entries; else bind image_rootfs */
  const char *image_rootfs; /* host path of the image's rootfs (directory images) */
  const struct jail_plan_entry *root_entries;
  size_t root_entry_count;
  const struct jail_plan_bind *root_binds; /* read-only binds (host-ro: /usr, non-merged /bin ...) */
  size_t root_bind_count;
  char tmpfs_options[96];                          /* "size=...,mode=1777" for /tmp */
  char workspace_options[96];                      /* "size=...,mode=0755" */
  const struct jail_plan_entry *workspace_entries; /* paths under JAIL_STAGING/workspace */
  size_t workspace_entry_count;

  /* program */
  char *const *argv;
  char *const *envp;
  const char *search_path;            /* PATH used to resolve argv[0] */
  const char *working_directory;      /* in the final root (jail_config.working_directory) */
  int stdin_fd, stdout_fd, stderr_fd; /* host fds the child dup2s to 0, 1, 2 */
  int sync_fd;                        /* the child's end of the control socket */
  int supervisor_sync_fd; /* the supervisor's end, inherited by clone: the child closes it first, so that
                             its reads see end-of-file once the supervisor is gone */
  int status_fd;          /* write end of the pipe the jail's init reports the status on */
  /* jail_config.before_program: once set up, right before it starts the program, the child waits for
   * SYNC_RUN (and exits with nothing started on anything else), so the set-up runs beside the hook. */
  bool hold_program;

  /* hardening */
  int landlock_abi;
  const struct jail_landlock_rule *landlock_rules;
  size_t landlock_rule_count;
  const struct sock_fprog *seccomp;
  uint64_t fsize_limit; /* RLIMIT_FSIZE bytes */
  uint64_t nofile_limit;
  int last_capability; /* /proc/sys/kernel/cap_last_cap (63 when unknown): the bounding set drop stops there
                        */
  /* The supervisor's argv and environment areas (from /proc/self/stat, 0 when unknown): the child wipes
   * its copy so the jail's pid 1 shows none of them in /proc/1/cmdline or /proc/1/environ. */
  uintptr_t arg_start, arg_end, env_start, env_end;
  /* clone3 made no network namespace: the child has a helper make it while it assembles its mounts, and
   * joins it before the second hand-over (see child.c). */
  bool network_namespace_helper;
  /* jail_prepare: the call's part of the plan (program, environment, working directory, workspace entries,
   * Landlock rules, stdin) is not known at clone time. After its mounts and cgroup namespace the child
   * reports SYNC_PREPARED and waits for SYNC_BIND, which carries a memfd with that part (jail_call_encode)
   * and the program's stdin; everything from the workspace files on is then done as in a fresh jail. */
  bool prepared;
  /* jail_prepare with jail_config.prepared_python: after its mounts the child finishes the jail as for a
   * program (no workspace files, no Landlock yet), reports SYNC_PREPARED and starts the interpreter
   * (python_argv, python_env, resolved through search_path; fds 0 stdin_fd, 1, 2, 3 call_channel_fd, 4 the
   * control socket), which waits for its call on fd 3 (interpreter.c). */
  char *const *python_argv;
  char *const *python_env;
  int call_channel_fd;
};

/* ---- the call's part of a plan, handed to a prepared jail (call.c) ---- */

/* Encode the call-dependent fields of `plan` (argv, envp, search_path, working_directory, workspace
 * entries, landlock rules) into a new memfd (close-on-exec, sealed against writes), position-independent:
 * every pointer is stored as an offset from the block's start, 0 for NULL. Returns the fd, or -errno with
 * *err naming the step (-ENOMEM, memfd_create/write errors, -E2BIG past JAIL_CALL_MAX_BYTES). */
#define JAIL_CALL_MAX_BYTES (1ull << 30)
int jail_call_encode(const struct jail_plan *plan, dome_error *err);
/* In the child (system calls and string functions only): set those fields of `plan` to point into
 * `block` (`size` bytes, a private writable mapping of the memfd), relocating the offsets in place. Returns
 * 0, or -EINVAL when an offset or count lies outside the block or a string is not NUL-terminated in it. */
int jail_call_decode(void *block, size_t size, struct jail_plan *plan);

/* The whole plan as one such block (pointers as offsets, the seccomp filter's instructions inside), for the
 * spawner (spawner.c), whose memory is domed's from before any plan existed. Returns a sealed memfd
 * (close-on-exec) or -errno as jail_call_encode. */
int jail_plan_encode(const struct jail_plan *plan, dome_error *err);
/* In the spawner: relocate a block of jail_plan_encode (`size` bytes, a private writable mapping, 8-byte
 * aligned) in place and copy the plan to *plan, whose pointers then point into the block. The fd fields
 * are the supervisor's numbers: the caller replaces them. Returns 0 or -EINVAL (magic, size, an offset,
 * count or string outside the block). */
int jail_plan_decode(void *block, size_t size, struct jail_plan *plan);

/* ---- the spawner (spawner.c) ---- */

struct clone_args;
/* clone3 `args` (flags, exit_signal 0) as `host_id`, from the spawner process (jail_spawner_start), with
 * CLONE_PARENT so that the jail is the supervisor's child all the same: the plan's fds (stdin, stdout,
 * stderr, sync, status, call channel) and the cgroup2 leaf (args->cgroup with CLONE_INTO_CGROUP) are
 * passed over the spawner's socket, the plan in a jail_plan_encode block, and the child runs
 * jail_child_main in the spawner's copy. Returns the pid with *pidfd set, -ENOSYS when no spawner runs
 * (the caller clones itself), -EPIPE when the spawner is gone (this jail fails: a child the spawner made
 * before it went may hold the plan's socket pair; later jails are cloned by the caller), or the -errno of
 * clone3 in the spawner. Thread-safe (one request at a time). */
pid_t jail_spawner_clone(const struct jail_plan *plan, const struct clone_args *args, unsigned host_id,
                         int *pidfd, dome_error *err);

/* ---- a prepared jail's interpreter (interpreter.c) ---- */

/* The Python program the interpreter runs while it waits (supervisor/jail/python_bootstrap.py). */
const char *jail_python_bootstrap_source(void);
/* The call's message to a waiting interpreter (format in interpreter.c) from the call's plan (argv
 * {python, "-c", code}, envp, working_directory, workspace entries, Landlock ABI and rules): *data
 * malloc'd, *length bytes. Returns 0, -ENOMEM, or -E2BIG past JAIL_CALL_MAX_BYTES. */
int jail_python_message(const struct jail_plan *plan, char **data, size_t *length, dome_error *err);
/* The byte after the message that lets the interpreter run the call's code (jail_config.before_program
 * returned 0); the stream's end without it makes the interpreter exit with nothing run. */
#define JAIL_PYTHON_GO '\x01'

/* Messages on the control socket (SOCK_SEQPACKET). */
enum jail_sync_kind {
  SYNC_GO = 1,
  SYNC_WORKSPACE = 2,
  SYNC_ERROR = 3,
  SYNC_PREPARED = 4, /* child -> parent: a prepared jail waits for its call */
  SYNC_BIND = 5,     /* parent -> child: the call (memfd, then the program's stdin, SCM_RIGHTS) */
  SYNC_RUN = 6,      /* parent -> child: start the program (plan.hold_program: before_program returned 0) */
};
struct jail_sync_message {
  int kind;
  int errno_value;
  char text[256];
};

/* What the jail's init writes on status_fd when the program ended: exited (1) with code, or killed (0)
 * by signal `code`; `alone` (1) when the init had no other child left then, so no process but the init
 * remains in the jail's pid namespace (every process in it descends from the init, and orphans are
 * reparented to it) and nothing of the jail can run any more: the init only exits after the report. */
struct jail_init_report {
  int exited;
  int code;
  int alone;
};

/* The child's body: never returns. It becomes the jail's init (pid 1): forks the program (which execs,
 * or _exits 127 after sending SYNC_ERROR), reaps every orphan, and reports the program's status. */
__attribute__((noreturn)) void jail_child_main(const struct jail_plan *plan);

/* ---- enforcement level (probe.c) ---- */

/* "bpf" is among the active LSMs (/sys/kernel/security/lsm, read once). */
bool jail_bpf_lsm_active(void);
/* The level a jail gets: reduced without a cgroup2 leaf or Landlock; full with cgroup v2 controllers and
 * BPF-LSM; hybrid otherwise. */
enum jail_enforcement jail_enforcement_level(bool have_v2_leaf, int landlock_abi);

/* ---- images (image.c) ---- */

struct jail_image {
  bool host_ro;
  char rootfs[1024];
  struct jail_plan_entry *entries; /* root entries (host-ro), owned */
  size_t entry_count;
  struct jail_plan_bind *binds;
  size_t bind_count;
  struct jail_plan_entry *owned_entries; /* a per-run copy of entries (jail_image_set_resolver), or NULL */
};
/* Resolve `name` (NULL = host-ro) in `store`; -ENOENT names the missing directory, -EINVAL a bad name. */
int jail_image_open(struct jail_image *image, const char *name, const char *store, dome_error *err);
/* Per-run /etc: resolv.conf text (NULL: none) and `hosts: files dns` in nsswitch.conf. host-ro only
 * (-ENOTSUP otherwise); -EINVAL over JAIL_MAX_RESOLV_CONF_BYTES. The text is borrowed for the run. */
int jail_image_set_resolver(struct jail_image *image, const char *resolv_conf, bool hosts_dns,
                            dome_error *err);
void jail_image_close(struct jail_image *image);

/* ---- host ids (host_id.c) ---- */

#define JAIL_HOST_ID_BASE 0x70000000u /* host uid/gid of jails: BASE .. BASE + COUNT - 1 */
#define JAIL_HOST_ID_COUNT 65536u

/* Reserve a host uid/gid for a jail, unique among the live jails of every dome process on this host
 * (the abstract unix socket "dome/jail-id/<id - BASE>" bound in the host's network namespace; the kernel
 * drops it if we die). Tries `preferred` (0 .. COUNT-1) first, then the following slots. Returns 0 with
 * *id set, -EAGAIN when every id is in use, or -errno from socket(2)/bind(2). Thread-safe. */
int jail_host_id_acquire(unsigned preferred, unsigned *id, dome_error *err);
/* Give the id back (no-op for an id not held by this process). */
void jail_host_id_release(unsigned id);

/* ---- seccomp (seccomp.c) ---- */

/* The jail's seccomp program (generated at build time from seccomp_rules.c); never fails. */
int jail_seccomp_program(const struct sock_fprog **program, dome_error *err);

/* ---- workspace (workspace.c) ---- */

/* The files that go into /workspace: the host workspace's tree then config's input files. */
struct jail_workspace_input {
  char **paths; /* relative; directories end with '/' */
  char **data;  /* owned copies for host files; borrowed for config files */
  size_t *lengths;
  unsigned *modes;
  bool *owned;
  size_t count;
  uint64_t total_bytes;
  /* The host workspace directory (config->workspace_dir), opened once before the run with
   * O_DIRECTORY|O_NOFOLLOW: copy-in reads and copy-out writes through it only, never by path again.
   * Valid when host_open; closed by jail_workspace_input_release. */
  int host_fd;
  bool host_open;
};
/* Validate a relative workspace path: no leading '/', no "." or ".." or empty components, bounded depth
 * and length. Returns 0 or -EINVAL with *err naming `what` and the path. */
int jail_workspace_check_path(const char *path, const char *what, dome_error *err);
int jail_workspace_collect(struct jail_workspace_input *input, const struct jail_config *config,
                           uint64_t limit_bytes, dome_error *err);
void jail_workspace_input_release(struct jail_workspace_input *input);
/* What the walk of the workspace could not list. */
struct jail_workspace_unlisted {
  size_t over_limit; /* files beyond the first JAIL_MAX_OUTPUT_PATHS */
  size_t too_deep;   /* entries deeper than JAIL_MAX_PATH_DEPTH directories or with a relative path over
                        1024 bytes (a directory counts once: its subtree was not walked) */
};

/* Walk the workspace (dirfd of its root) and list regular files that are new or differ from `input`
 * (at most JAIL_MAX_OUTPUT_PATHS); *unlisted (may be NULL) receives what could not be listed. */
int jail_workspace_outputs(int workspace_fd, const struct jail_workspace_input *input, char ***paths,
                           size_t *count, struct jail_workspace_unlisted *unlisted, dome_error *err);
/* Copy the listed files from the workspace to the host directory input->host_fd (creating directories
 * one component at a time), never following symlinks on either side and never replacing a host symlink,
 * directory or special file. New files are created 0644 and directories 0755 (less the umask), whatever
 * their modes in the jail; a replaced host file keeps its owner and its read/write bits (never exec,
 * setuid, setgid or sticky), so a private file stays private. Not copied, each described in *errors ("path:
 * reason (strerror)", *error_count entries, appended, malloc'd): names that are not valid UTF-8; paths with a
 * component named .git, .hg or .svn (any case); paths beneath a directory git would take as a repository
 * (HEAD, or objects/ and refs/, in the jail or on the host); a file larger than what remains of budget_bytes
 * (apparent sizes, summed over the copied files); anything beyond 4096 files and directories created; host
 * conflicts (a path component on the host that is not a directory, ENOSPC). What jail_workspace_outputs could
 * not list (`unlisted`: too many files, too deep or too long a path) is reported as one entry each. Returns
 * 0, or -ENOMEM, -EBADF (no host workspace open) or the workspace's open error. */
int jail_workspace_copy_out(int workspace_fd, const struct jail_workspace_input *input, uint64_t budget_bytes,
                            const struct jail_workspace_unlisted *unlisted, char *const *paths, size_t count,
                            char ***errors, size_t *error_count, dome_error *err);

#endif
