/* dome jail runtime: run one program in a fresh namespace + cgroup jail and collect its result.
 *
 * A jail is: user namespace (root inside maps to one unprivileged host uid), pid, mount, network (only
 * loopback), uts (hostname `sandbox`), ipc, cgroup and time namespaces; pivot_root into the image mounted
 * read-only, tmpfs /tmp and /workspace with size caps, a minimal /dev, a masked /proc, no /sys; a cgroup
 * leaf beneath the caller's own cgroup (cgroup v2, or the v1 memory/pids/cpu controllers plus a cgroup2
 * leaf on hybrid hosts) with memory/pids/cpu limits; every capability dropped, no_new_privs, securebits
 * locked, Landlock path rules, a seccomp filter (libseccomp), rlimits, closed fds and a new session.
 *
 * Processes: the cloned child becomes the jail's init (pid 1): it forks the program (pid 2), reaps
 * orphans, and exits with the program, which ends the pid namespace (the kernel kills what is left).
 *
 * Thread safety: jail_run() may be called from several threads at once. It keeps no global mutable state
 * other than once-initialised caches (seccomp program, host /etc material) guarded by pthread_once, and it
 * installs no signal handler: the child is watched through a pidfd and poll(2).
 *
 * Kernel documents implemented: Documentation/admin-guide/cgroup-v2.rst (cgroup.kill, memory.max,
 * memory.swap.max, memory.oom.group, pids.max, cpu.max, CLONE_INTO_CGROUP), cgroup-v1/memory.rst,
 * pids.rst, userspace-api/landlock.rst (ABI 1..7), userspace-api/seccomp_filter.rst, user_namespaces(7),
 * pid_namespaces(7), pivot_root(2), clone3(2), pidfd_open(2). */
#ifndef DOME_JAIL_JAIL_H
#define DOME_JAIL_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/common/error.h"

/* ---- configuration ------------------------------------------------------------------------------- */

/* Defaults (the `dome run` defaults). */
#define JAIL_DEFAULT_IMAGE "host-ro"
#define JAIL_DEFAULT_MEMORY_BYTES (256ull << 20)
#define JAIL_DEFAULT_PIDS 64u
#define JAIL_DEFAULT_CPUS 1.0
#define JAIL_DEFAULT_TIMEOUT_MS 10000u
#define JAIL_DEFAULT_WORKSPACE_BYTES (64ull << 20)
#define JAIL_DEFAULT_OUTPUT_LIMIT_BYTES (1ull << 20)
/* Largest output_limit accepted (bytes kept per stream, held in memory by the supervisor). */
#define JAIL_MAX_OUTPUT_LIMIT_BYTES (64ull << 20)
/* Smallest pids limit accepted: the jail's init and the program. */
#define JAIL_MIN_PIDS 2u
/* Where built images live: <store>/<name>/rootfs. Overridden by jail_config.image_store or the
 * environment variable DOME_IMAGE_STORE (read by the CLI, not by the library). */
#define JAIL_DEFAULT_IMAGE_STORE "/var/lib/dome/images"

/* Bounds on untrusted sizes (input files, workspace walk). */
#define JAIL_MAX_INPUT_FILES 4096u
#define JAIL_MAX_PATH_DEPTH 32u
#define JAIL_MAX_OUTPUT_PATHS 4096u
#define JAIL_MAX_PATH_RULES 64u
#define JAIL_MAX_RESOLV_CONF_BYTES 4096u

/* Landlock access a path rule grants (combinable). READ: read files and list directories; WRITE: create,
 * write, truncate, remove, rename (and device ioctls); EXEC: execute files. Everything a rule does not
 * grant, and every path no rule covers, is refused by the kernel (EACCES) where Landlock is available. */
enum jail_access {
  JAIL_ACCESS_READ = 1u << 0,
  JAIL_ACCESS_WRITE = 1u << 1,
  JAIL_ACCESS_EXEC = 1u << 2,
};

/* Landlock rights (Documentation/userspace-api/landlock.rst), the one translation dome has: the jail's path
 * rules and the kernel library's translation of decision tables (supervisor/kernel) both use it. */
/* Highest Landlock ABI of the running kernel (probed once per process), 0 when unavailable. */
int jail_landlock_abi(void);
/* LANDLOCK_ACCESS_FS_* rights of enum jail_access bits, restricted to what `abi` handles. */
uint64_t jail_landlock_access(unsigned access, int abi);
/* Every filesystem right `abi` handles (0 for abi <= 0). */
uint64_t jail_landlock_handled_fs(int abi);
/* The subset of `rights` Landlock accepts on a rule whose path is not a directory. */
uint64_t jail_landlock_file_rights(uint64_t rights);

/* One Landlock rule: `path` as seen inside the jail (absolute, e.g. "/workspace"), beneath-rule for
 * directories. A path that does not exist in the jail is an error (jail_run fails, -ENOENT) unless the
 * rule is optional. */
struct jail_path_rule {
  const char *path;
  unsigned access; /* enum jail_access bits */
  /* Rules compiled from Cedar (dome run --rules) set these; the zero values keep the behaviour above. */
  bool optional; /* a path missing in the jail is skipped instead of failing the run */
  bool exact;    /* grant on this file only: Landlock cannot grant a directory without what lies beneath, so
                  * an exact rule on a directory is skipped (fail-closed: access stays refused) */
};

/* The baseline rules used when jail_config.path_rules is NULL: read+exec "/" (the image), read+write
 * "/workspace" and "/tmp". The jail's own /dev (read+write) and /proc (read) are always added. */
extern const struct jail_path_rule jail_baseline_path_rules[];
extern const size_t jail_baseline_path_rule_count;

/* A file placed in /workspace before the program starts. `path` is relative ("data/a.csv"); parent
 * directories are created. A path ending in '/' with length 0 creates an empty directory. Absolute
 * paths, "..", and empty components are rejected (-EINVAL naming the path). */
struct jail_input_file {
  const char *path;
  const void *data;
  size_t length; /* bytes */
  unsigned mode; /* permission bits; 0 means 0644 */
};

/* The cgroup leaf handed to on_cgroup_ready: the cgroup2 leaf (on hybrid hosts the leaf in the cgroup2
 * hierarchy mounted e.g. at /sys/fs/cgroup/unified). Valid only during the callback; dup the fd to keep
 * it. cgroup BPF programs attached to `fd` see exactly the jail's processes. */
struct jail_cgroup {
  const char *path; /* absolute host path of the cgroup2 leaf directory */
  int fd;           /* O_DIRECTORY fd of that directory */
  uint64_t id;      /* cgroup id = inode number of the directory (bpf_get_current_cgroup_id()) */
  const char *jail_id;
};

struct jail_teardown; /* what is left of a finished jail to release (jail_teardown_finish) */

struct jail_config {
  /* The program: argv[0] is resolved inside the image through PATH from `env` (or
   * /usr/local/bin:/usr/bin:/bin when env holds no PATH) unless it contains '/'. NULL-terminated. */
  char *const *argv;
  /* The complete environment, NULL-terminated "KEY=VALUE" strings; NULL means empty. Nothing of the
   * caller's environment is inherited. */
  char *const *env;

  /* stdin: either bytes (stdin_data/stdin_length, written then closed) or a host fd (stdin_fd >= 0, read
   * by jail_run until EOF and relayed through a pipe, so the jail never holds a host fd such as a
   * terminal; not closed by jail_run). Both unset (stdin_data NULL, stdin_fd -1): /dev/null.
   * Setting both is an error. */
  const void *stdin_data;
  size_t stdin_length;
  int stdin_fd;

  /* Files placed in /workspace (after the host workspace's files, overriding same paths). */
  const struct jail_input_file *input_files;
  size_t input_file_count;
  /* Optional host directory copied in as /workspace (regular files and directories only; symlinks and
   * special files skipped; bounded by workspace_bytes). It is opened once before the run (it must not
   * itself be a symlink) and read and written through that fd only. With copy_out, files created or
   * modified in /workspace are copied back through it (never following or replacing symlinks, never
   * creating special files; files 0644, directories 0755; never .git/.hg/.svn paths, git repository
   * layouts or names that are not valid UTF-8; at most workspace_bytes and 4096 entries in all). */
  const char *workspace_dir;
  bool copy_out;

  /* The program's working directory inside the jail, absolute, at most 1024 bytes; NULL = "/workspace"
   * (where input_files and workspace_dir land). A directory missing in the jail fails the run (-ENOENT
   * naming it). */
  const char *working_directory;

  const char *image;       /* NULL = JAIL_DEFAULT_IMAGE ("host-ro"); others: <image_store>/<image>/rootfs */
  const char *image_store; /* NULL = JAIL_DEFAULT_IMAGE_STORE */

  /* Limits; 0 selects the default. */
  uint64_t memory_bytes;    /* memory.max (v2) / memory.limit_in_bytes (v1); swap 0 */
  uint32_t pids;            /* pids.max; at least JAIL_MIN_PIDS (else EINVAL) */
  double cpus;              /* cpu.max quota = cpus * period (100 ms); 0 = default 1.0 */
  uint64_t timeout_ms;      /* wall clock from the start of the program; then the jail is killed */
  uint64_t workspace_bytes; /* size of the /workspace tmpfs (and of /tmp) */
  uint64_t output_limit;    /* bytes kept per stream (stdout, stderr), <= JAIL_MAX_OUTPUT_LIMIT_BYTES (else
                               EINVAL); the rest is dropped */

  /* /etc/resolv.conf of the jail (resolv.conf(5) text, e.g. from dome_net_resolv_conf_for_entries() of
   * supervisor/net/net.h), at most JAIL_MAX_RESOLV_CONF_BYTES. NULL: no resolv.conf (glibc then asks
   * 127.0.0.1 in the jail's own network namespace, which refuses at once). Only the host-ro image lays
   * out /etc per run: other images refuse it (-ENOTSUP, "resolv_conf: ..."). */
  const char *resolv_conf;
  /* nsswitch.conf says `hosts: files dns` (set when a resolver is permitted) instead of `hosts: files`.
   * host-ro only, as resolv_conf. */
  bool hosts_dns;

  /* Landlock rules; NULL = jail_baseline_path_rules. */
  const struct jail_path_rule *path_rules;
  size_t path_rule_count;

  /* Readable (or hung up) => kill the jail and return with result->cancelled set. -1 = none. */
  int cancel_fd;

  /* Hooks (each optional), all called in the calling thread with `hook_context`. */
  void *hook_context;
  /* After the cgroup leaf exists with its limits applied, before the child exists. < 0 aborts the run
   * (jail_run returns that value with *err as the hook filled it). */
  int (*on_cgroup_ready)(void *context, const struct jail_cgroup *leaf, dome_error *err);
  /* After the child's namespaces exist (child_pid is the jail's init, host pid; it is assembling its
   * mounts meanwhile), before the program starts. /proc/<child_pid>/ns/net names the jail's network
   * namespace: with this hook set, clone3 makes that namespace at once; without it the jail makes it
   * beside its mounts, which starts the program sooner. < 0 aborts the run. */
  int (*on_namespaces_ready)(void *context, pid_t child_pid, dome_error *err);
  /* Each chunk of output as it arrives (stream 1 stdout, 2 stderr; only the bytes kept within
   * output_limit); offset_ms = time since the program started. */
  void (*on_output)(void *context, int stream, const char *data, size_t length, uint64_t offset_ms);
  /* Called about every tick_ms milliseconds while the jail's output is read (also when none arrives;
   * never from inside on_output); offset_ms as on_output. tick_ms 0 = 50. For callers that hold output
   * back (coalescing, the redaction hold-back) and release it after a quiet time. */
  void (*on_tick)(void *context, uint64_t offset_ms);
  uint64_t tick_ms;

  /* jail_prepare only: the Python interpreter the prepared jail starts before its call, as a call would
   * name it in argv[0] ("/usr/bin/python3", or "python3" resolved through the PATH of `env`), with argv
   * {python, "-c", <dome's waiting program>} and `env` as its environment, stdin the host's /dev/null, stdout
   * and stderr the jail's pipes: it imports `site` as a fresh `python -c` does, then waits for its call (see
   * jail_prepared_run). NULL: no interpreter, the jail waits before its workspace files. Ignored by jail_run.
   */
  const char *prepared_python;
  /* jail_prepare with prepared_python only: the program the interpreter runs (`python -c PROGRAM`) in place
   * of dome's waiting program (jail_python_waiting_program): PROGRAM does in advance what needs nothing of a
   * call (a session's launcher imports its kernel) and then, seeing fds 3 and 4 open (a fresh jail's
   * program has them closed), runs jail_python_waiting_program() itself, which waits for the call. In a
   * call's config: the program it accepts; a prepared jail fits only a call naming the same program, whose
   * argv is {python, "-c", PROGRAM} and whose environment is exactly the start environment, so that the
   * command line, the environment and the modules the program loaded are those of a fresh jail. */
  const char *prepared_python_program;
  /* The on_namespaces_ready hook needs no network namespace built at clone time (it only learns the
   * jail's init pid): such a call may run in a prepared jail, where the hook runs at the bind, after the
   * limits and on_cgroup_ready and before anything of the call reaches the jail. */
  bool namespaces_hook_late;

  /* Optional: called with hook_context once the jail is set up for the program and before anything of
   * the program can run: a fresh jail's child waits at its last hand-over, a prepared interpreter has the
   * call (it writes the call's files and applies its Landlock rules meanwhile) but waits for a go before
   * it runs the code, a prepared program's child has not been given its call yet. A negative return fails
   * the run with that error: the jail is killed, and nothing of the program ever ran. exec_run makes the
   * execution's start durable here (the audit rule), its sync begun before the jail so that it runs beside
   * the jail's set-up. */
  int (*before_program)(void *context, dome_error *err);

  /* Optional: once the program has ended (its init reaped, or its init's report that nothing else is left
   * in the jail: the init only exits), jail_run and jail_prepared_run hand what is left of the jail (the
   * exiting init to reap, its cgroup leaf, its host id, the supervisor's fds of it) to this callback
   * instead of releasing it before they return, so that a caller can answer first. The callback owns
   * `teardown` and must pass it to jail_teardown_finish, on any thread. A run that fails or is cancelled
   * before its program ends releases everything itself, as without the callback. */
  void (*defer_teardown)(void *context, struct jail_teardown *teardown);
  void *defer_teardown_context;
};

/* Release what a finished jail's teardown holds (jail_config.defer_teardown): the init is reaped (it is
 * killed first, should it still run: it reported its program's end and only exits), the cgroup leaf removed
 * as jail_run does before it returns without the callback (rmdir retried while the kernel still frees the
 * jail's last processes, bounded: 2000 tries of 1-5 ms), then its host id and fds are released and
 * `teardown` is freed. Returns 0, or the negative errno of a leaf that could not be removed (e.g. -EBUSY)
 * with *err naming it; everything else is released either way. NULL is a no-op that returns 0. */
int jail_teardown_finish(struct jail_teardown *teardown, dome_error *err);

/* Fill *config with defaults: every limit 0 (= default), stdin_fd -1, cancel_fd -1, everything else
 * NULL/0. Always call this first so that fields added later get their defaults. */
void jail_config_init(struct jail_config *config);

/* ---- result -------------------------------------------------------------------------------------- */

/* What the jail enforced, from strongest to weakest (see jail_probe_host). */
enum jail_enforcement {
  /* cgroup v2 controllers, Landlock, seccomp, BPF-LSM available */
  JAIL_ENFORCEMENT_FULL = 0,
  /* cgroup v1 controllers + a cgroup2 leaf for cgroup BPF, Landlock, seccomp; no BPF-LSM */
  JAIL_ENFORCEMENT_HYBRID = 1,
  /* some layer missing (no Landlock or no cgroup2 leaf); `dome doctor` says which */
  JAIL_ENFORCEMENT_REDUCED = 2,
};
const char *jail_enforcement_name(enum jail_enforcement level); /* "full", "hybrid", "reduced" */

struct jail_result {
  char jail_id[32]; /* "jail-<pid>-<seq>", also the cgroup leaf's name */
  enum jail_enforcement enforcement;
  bool landlock; /* Landlock rules were enforced (ABI >= 1) */
  int landlock_abi;

  int exit_code; /* the program's exit status; 128+signal when killed by a signal; -1 if unknown */
  /* When the whole jail is killed (timeout, cancel_fd) signal is SIGKILL. */
  int signal;           /* terminating signal, 0 if it exited */
  bool timed_out;       /* killed by the wall-clock timeout */
  bool oom_killed;      /* the cgroup hit its memory limit and the OOM killer ended the jail (on v1
                         * hosts the OOM event makes jail_run kill the whole jail, as memory.oom.group) */
  bool cancelled;       /* killed because cancel_fd became readable */
  bool pids_limited;    /* a fork/clone failed because pids.max was reached */
  uint64_t duration_ms; /* wall clock from exec to the program's end (see supervise in run.c) */
  uint64_t cpu_ms;      /* user+system CPU of every process of the jail */
  uint64_t peak_memory_bytes;
  uint64_t peak_pids; /* highest number of tasks in the jail, its init included (pids.peak, else sampled) */

  char *stdout_data; /* NUL-terminated for convenience; stdout_length excludes the NUL */
  size_t stdout_length;
  char *stderr_data;
  size_t stderr_length;
  uint64_t stdout_total_bytes; /* bytes the program wrote to each stream, kept or not */
  uint64_t stderr_total_bytes;
  bool stdout_truncated;
  bool stderr_truncated;
  bool truncated; /* either stream */

  /* The limits the jail ran under, defaults filled in; the cgroup ones as the kernel holds them (a run
   * whose limits do not read back fails with -EIO instead). */
  struct {
    uint64_t memory_bytes; /* memory.max (v2) or memory.limit_in_bytes (v1): rounded down to pages */
    uint32_t pids;         /* pids.max */
    double cpus;           /* cpu.max / cpu.cfs_quota_us over the 100 ms period */
    uint64_t timeout_ms, workspace_bytes, output_limit_bytes;
  } limits;

  /* The program ran in a jail made before its call (jail_prepare), not in one made for it. */
  bool prepared;

  /* Regular files created or modified under /workspace, relative paths, sorted. */
  char **output_paths;
  size_t output_path_count;
  /* With copy_out: files that could not be copied back ("path: reason"), the rest was copied. */
  char **copy_out_errors;
  size_t copy_out_error_count;
};

/* Run config->argv in a fresh jail, wait for it, tear the jail down and fill *result (which the caller
 * releases with jail_result_release, also on failure). Returns 0 when the program ran (whatever its exit
 * status, timeout or OOM), or a negative errno with *err naming the failing step:
 *   -EINVAL   bad config (the message names the field: "memory", "image", "input file `../x`", ...)
 *   -ENOENT   unknown image, missing program in the image, missing workspace dir, missing rule path
 *   -ENOTDIR  workspace_dir is not a directory
 *   -ELOOP    workspace_dir is a symlink
 *   -EFBIG    host workspace larger than workspace_bytes
 *   -EPERM/-EACCES/-ENOSYS/... a kernel facility refused during setup
 *   any negative value returned by a hook (the run is aborted).
 * A file that cannot be copied out (copy_out) does not fail the run: it is listed in
 * result->copy_out_errors and the other files are still copied.
 * Nothing is left behind (cgroup leaves, mounts, processes, fds, temporary files) in every case. */
int jail_run(const struct jail_config *config, struct jail_result *result, dome_error *err);

/* ---- the spawner ------------------------------------------------------------------------------- */

/* Fork the spawner: a small process, a copy of the caller at this moment, from which every later jail of
 * this process is cloned (clone3 with CLONE_PARENT, so each is still this process's child, reaped and
 * tied to it as before; see docs/architecture.md, "The jails cloned from a spawner"). A jail cloned from
 * the caller itself copies its address space, and until the jail's init exits every page the caller
 * writes is a copy-on-write fault with a TLB shootdown; the spawner's address space stays as small as the
 * caller's was at start-up. Call it once, early, while the process has one thread (jails made before it,
 * or when it is not running, are cloned as before). The spawner holds nothing but its socket, exits when
 * the socket closes (jail_spawner_stop) and dies with the caller (PR_SET_PDEATHSIG). Returns 0, -EBUSY
 * when one runs, or -errno of socketpair/clone3 with *err naming the step. */
int jail_spawner_start(dome_error *err);
/* Close the spawner's socket and reap it (no-op when none runs). Jails it made are unaffected. */
void jail_spawner_stop(void);
/* The spawner's pid, or 0 when none runs (it never started, was stopped, or died: then jails are cloned
 * from the caller again). */
pid_t jail_spawner_pid(void);

/* ---- prepared jails ------------------------------------------------------------------------------ */

/* A jail made before its call: namespaces, ids, mounts (image, /tmp, /workspace, /dev, /proc), cgroup leaf
 * with limits, network namespace, cgroup namespace; its child waits, before anything of a call exists in
 * it (no workspace file, no program, no Landlock domain yet, every capability still held inside its own
 * user namespace only). Single use: jail_prepared_run consumes it, and nothing of one call survives into
 * another. Opaque. */
struct jail_prepared;

/* Make a prepared jail of the shape `config` gives: image, image_store, resolv_conf, hosts_dns,
 * memory_bytes, pids, cpus and workspace_bytes (defaults filled in as jail_run does); every other field
 * belongs to the call and is ignored here. Returns 0 with *prepared set once the jail's child waits (with
 * everything of its shape made, its network namespace's loopback up too: nothing in it makes a socket
 * before its call, so its kernel programs can be attached ahead, dome_kernel_prelink), or a
 * negative errno with *err naming the step (as jail_run; -EINVAL for a bad shape field or an
 * on_namespaces_ready hook, which needs its namespace at clone time: such calls take jail_run). Nothing is
 * left behind on failure.
 * The jail's child dies with the thread that called jail_prepare (the kernel's parent-death signal follows
 * the creating thread, prctl(2) PR_SET_PDEATHSIG): that thread must outlive the prepared jail, or the jail
 * is found dead (jail_prepared_waiting false) and replaced by a fresh one. */
int jail_prepare(const struct jail_config *config, struct jail_prepared **prepared, dome_error *err);

/* Would `config` run in `prepared`: the same shape (see jail_prepare) and no on_namespaces_ready hook; for
 * a jail with a prepared interpreter also jail_python_call_fits. */
bool jail_prepared_fits(const struct jail_prepared *prepared, const struct jail_config *config);

/* Can the call `config` run in a jail whose interpreter `python` was started with `start_env` (see
 * jail_config.prepared_python) and see what a fresh `python -c` would: argv is exactly {python, "-c", code};
 * every variable read while the interpreter starts — by Python (PYTHON*, _PYTHON*, LC_*, LANG, LANGUAGE,
 * LOCPATH, HOME, PATH, TZ), the dynamic loader (LD_*) or glibc (GLIBC_TUNABLES, MALLOC_*, GCONV_PATH) —
 * has the same value in config->env as in start_env, or is absent from both; no stdin (the interpreter's
 * stdin was fixed when it started); no host workspace directory and no input file under `.local` (the user
 * site directory of HOME=/workspace, read while Python starts); input files of at most
 * JAIL_PYTHON_MAX_INPUT_BYTES in all. */
#define JAIL_PYTHON_MAX_INPUT_BYTES (4ull << 20)
bool jail_python_call_fits(const char *python, char *const *start_env, const struct jail_config *config);

/* dome's waiting program of a prepared interpreter (supervisor/jail/python_bootstrap.py), which a
 * prepared_python_program runs itself. */
const char *jail_python_waiting_program(void);

/* Is the prepared jail's child still waiting for its call (alive, nothing reported)? */
bool jail_prepared_waiting(const struct jail_prepared *prepared);

/* The jail's id ("jail-<pid>-<seq>", its cgroup leaf's name), fixed at jail_prepare. */
const char *jail_prepared_id(const struct jail_prepared *prepared);

/* The prepared jail's cgroup2 leaf, as on_cgroup_ready will receive it at jail_prepared_run (path, fd, id,
 * jail id; borrowed: valid until the jail is run or discarded), so that its kernel programs can be attached
 * ahead of the call (dome_kernel_prelink). Returns 0 with *leaf filled, or -ENOENT when the jail has no
 * cgroup2 leaf (a host without the cgroup2 hierarchy). */
int jail_prepared_cgroup(const struct jail_prepared *prepared, struct jail_cgroup *leaf);

/* Run `config` in `prepared` as jail_run would, and consume `prepared` (always: it is destroyed, whatever
 * the outcome). With a prepared interpreter, the call (code, environment, working directory, workspace
 * files, Landlock rules) is written to the waiting interpreter, which writes the files, changes directory,
 * applies the Landlock ruleset itself (landlock_restrict_self in its own process, under the seccomp filter
 * and no_new_privs its init set before it started), replaces os.environ and the C environment with the
 * call's, sets sys.orig_argv, closes its channels and runs the code as `__main__` (tracebacks show the
 * code's frames only); the interpreter is used for this one call. What a program can still tell apart
 * from a fresh `python -c`: /proc/self/cmdline and /proc/self/environ show the waiting program and its
 * start environment, ctypes' libraries are mapped, and the code's module frame has a caller. The call is
 * bound before anything of it reaches the jail: the limits are written again and read back (-EIO when the
 * kernel holds another value), on_cgroup_ready runs (kernel rules attached to the leaf), then the program,
 * environment, working directory, workspace files, Landlock rules and stdin are handed to the waiting child,
 * which applies them in the same order as a fresh jail's child and execs the program. A prepared jail that
 * does not fit `config` or no longer waits is discarded and the call runs in a fresh jail (jail_run;
 * result->prepared false). Returns and fills *result as jail_run. */
int jail_prepared_run(struct jail_prepared *prepared, const struct jail_config *config,
                      struct jail_result *result, dome_error *err);

/* Destroy a prepared jail unused: kill its child, remove its cgroup leaf, release its host id. NULL is a
 * no-op. Nothing is left behind. */
void jail_prepared_discard(struct jail_prepared *prepared);

/* The lines a program's end by one of its limits adds to its stderr, each ending in '\n', in this order:
 *   "dome: killed: out of memory (limit 256 MiB)"           (oom_killed; limits.memory_bytes)
 *   "dome: fork failed: pids limit reached (limit 64 processes)"   (pids_limited; limits.pids)
 *   "dome: killed: timeout (limit 10 s)"                    (timed_out; limits.timeout_ms)
 * written NUL-terminated to buffer (truncated to size - 1 bytes). Returns the length of the whole text
 * (0 when no limit was reached), as snprintf does. */
size_t jail_limit_notice(const struct jail_result *result, char *buffer, size_t size);

/* Free what jail_run allocated in *result and zero it. Safe on a zeroed or already released result. */
void jail_result_release(struct jail_result *result);

/* ---- limits of a running jail --------------------------------------------------------------------- */

/* What the kernel holds for a cgroup: memory limit (bytes), CPU bandwidth (quota / period, CPUs) and
 * pids.max; UINT64_MAX (memory, pids) or 0 (cpus) where the cgroup has no limit. */
struct jail_cgroup_limits {
  uint64_t memory_bytes;
  double cpus;
  uint64_t pids;
};

/* Read back the limits of the cgroup `pid` (a host pid, e.g. a jail's init) is in, from the kernel's files:
 * cgroup v2 memory.max, cpu.max, pids.max on unified hosts; v1 memory.limit_in_bytes, cpu.cfs_quota_us /
 * cpu.cfs_period_us and pids.max on hybrid hosts (admin-guide/cgroup-v2.rst, cgroup-v1/memory.rst,
 * scheduler/sched-bwc.rst, cgroup-v1/pids.rst). The paths come from /proc/<pid>/cgroup, relative to the
 * caller's cgroup namespace. Returns 0, -ESRCH (no such process), -ENOENT (a controller is not mounted or
 * the cgroup is gone), -EINVAL (a file that is not a number); *err names the file. */
int jail_cgroup_limits_of(pid_t pid, struct jail_cgroup_limits *limits, dome_error *err);

/* ---- host probe (dome doctor) -------------------------------------------------------------------- */

struct jail_host_report {
  bool cgroup_unified;     /* cgroup2 mounted at /sys/fs/cgroup with the controllers */
  bool cgroup_hybrid;      /* v1 controllers + a cgroup2 hierarchy (e.g. /sys/fs/cgroup/unified) */
  char cgroup2_mount[128]; /* where the cgroup2 hierarchy is mounted, "" if none */
  char controllers[128];   /* controllers dome uses and where: "memory(v1) pids(v1) cpu(v1)" */
  bool user_namespaces;
  bool seccomp;     /* seccomp filter mode available */
  int landlock_abi; /* 0 = unavailable */
  bool cgroup_bpf;  /* a cgroup BPF program could be attached to a scratch leaf */
  bool bpf_lsm;     /* "bpf" in /sys/kernel/security/lsm */
  bool btf;         /* /sys/kernel/btf/vmlinux readable */
  bool clone_into_cgroup;
  enum jail_enforcement enforcement;
  /* One line per missing or degraded layer, '\n'-separated ("BPF-LSM: `bpf` not in
   * /sys/kernel/security/lsm; file/network rules enforced by Landlock and cgroup BPF only"). */
  char reasons[2048];
};

/* Probe the host without changing it (a scratch cgroup leaf is created and removed to test cgroup BPF
 * attachment). Returns 0, or a negative errno when the probe itself cannot run (no /proc). */
int jail_probe_host(struct jail_host_report *report, dome_error *err);

#endif
