/* Prepared jails (jail_prepare, jail_prepared_run, jail_prepared_discard), as root like every jail test:
 * a program in a prepared jail sees exactly what it sees in a fresh one (its /proc view, environment,
 * open fds, mounts, files, limits); each call's own path rules and limits apply, never a neighbour's; a
 * prepared jail whose shape differs or whose child died gives way to a fresh jail; a discarded one leaves
 * no cgroup leaf, process or fd. Also the call block the supervisor hands over (jail_call_encode/decode). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/jail/internal.h"
#include "supervisor/jail/jail.h"

static char *const path_env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "AGENT=a", NULL};

static int open_fds(void) {
  int count = 0;
  DIR *d = opendir("/proc/self/fd");
  while (d && readdir(d)) count++;
  if (d) closedir(d);
  return count;
}

/* Where the jail `id`'s cgroup2 leaf is, if it exists now: beneath our own cgroup2 directory, or its
 * `dome` parent at the top of the hierarchy. "" when neither exists. */
static void cgroup2_leaf(const char *id, char *path, size_t size) {
  char line[512], self[512] = "";
  FILE *f = fopen("/proc/self/cgroup", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(self, sizeof self, "%.500s", strcmp(line + 3, "/") == 0 ? "" : line + 3);
    }
  if (f) fclose(f);
  const char *mounts[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
  for (size_t m = 0; m < 2; m++) {
    const char *forms[] = {"%s%s/%s", "%s%s/dome/%s"};
    for (size_t k = 0; k < 2; k++) {
      snprintf(path, size, forms[k], mounts[m], self, id);
      struct stat st;
      if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return;
    }
  }
  path[0] = '\0';
}

struct hook_log {
  char cgroup_path[700];
  int calls;
};

static int on_cgroup(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  (void)err;
  struct hook_log *log = context;
  snprintf(log->cgroup_path, sizeof log->cgroup_path, "%s", leaf->path);
  log->calls++;
  return 0;
}

static void config_for(struct jail_config *c, char **argv) {
  jail_config_init(c);
  c->argv = argv;
  c->env = path_env;
  c->memory_bytes = 128ull << 20;
  c->pids = 32;
}

static struct jail_prepared *prepare(void) {
  char *argv[] = {"true", NULL};
  struct jail_config shape;
  config_for(&shape, argv);
  struct jail_prepared *p = NULL;
  dome_error err = {0};
  int r = jail_prepare(&shape, &p, &err);
  if (r < 0) fprintf(stderr, "jail_prepare -> %d: %s\n", r, err.message);
  assert_int_equal(r, 0);
  assert_non_null(p);
  assert_true(jail_prepared_waiting(p));
  return p;
}

static void prepared_runs_and_leaves_nothing(void **state) {
  (void)state;
  int fds_before = open_fds();
  struct jail_prepared *p = prepare();
  char leaf[700];
  cgroup2_leaf(jail_prepared_id(p), leaf, sizeof leaf);
  assert_true(leaf[0] != '\0'); /* the leaf exists while the jail waits */
  char *argv[] = {"sh", "-c", "cat /workspace/in.txt; cat; echo err >&2; exit 3", NULL};
  struct jail_input_file files[] = {{"in.txt", "file\n", 5, 0}};
  struct hook_log log = {0};
  struct jail_config c;
  config_for(&c, argv);
  c.input_files = files;
  c.input_file_count = 1;
  c.stdin_data = "stdin\n";
  c.stdin_length = 6;
  c.hook_context = &log;
  c.on_cgroup_ready = on_cgroup;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_prepared_run(p, &c, &r, &err), 0);
  assert_true(r.prepared);
  assert_int_equal(r.exit_code, 3);
  assert_string_equal(r.stdout_data, "file\nstdin\n");
  assert_string_equal(r.stderr_data, "err\n");
  assert_int_equal(log.calls, 1);
  assert_string_equal(log.cgroup_path, leaf);
  struct stat st;
  assert_int_equal(stat(leaf, &st), -1);
  assert_int_equal(r.limits.pids, 32);
  jail_result_release(&r);
  assert_int_equal(open_fds(), fds_before);
}

static void discard_leaves_nothing(void **state) {
  (void)state;
  int fds_before = open_fds();
  struct jail_prepared *p = prepare();
  char id[32], leaf[700];
  snprintf(id, sizeof id, "%s", jail_prepared_id(p));
  cgroup2_leaf(id, leaf, sizeof leaf);
  assert_true(leaf[0] != '\0');
  jail_prepared_discard(p);
  char after[700];
  cgroup2_leaf(id, after, sizeof after);
  assert_string_equal(after, "");
  assert_int_equal(open_fds(), fds_before);
  jail_prepared_discard(NULL);
}

/* A waiting jail holds no copy of the fds the supervisor had open when it was prepared (sockets of
 * clients, other jails' pipes): closing our end of a pipe made before the prepare gives its reader end of
 * file at once, not when the jail is used or discarded. */
static void waiting_jail_holds_no_fd_of_ours(void **state) {
  (void)state;
  int ends[2];
  assert_int_equal(pipe2(ends, O_CLOEXEC), 0);
  struct jail_prepared *p = prepare();
  close(ends[1]);
  struct pollfd fd = {ends[0], POLLIN, 0};
  assert_int_equal(poll(&fd, 1, 2000), 1);
  char byte;
  assert_int_equal(read(ends[0], &byte, 1), 0);
  close(ends[0]);
  jail_prepared_discard(p);
}

/* What a program can observe of its jail, with what differs between any two jails by nature blanked by
 * sed: device numbers and pipe inodes (the kernel's, global), the jail's host uid in tmpfs mount options
 * (unique per live jail), the link count of /proc (the host's process count) and file times. The init's
 * State is left out: whether it is running or sleeping at that instant is the scheduler's (it came out
 * R for one jail and S for the other on a loaded host). The jail's processes are listed by the shell itself
 * (a glob): `ls /proc | grep -c` counted grep or not as ls read /proc before or after the shell had forked
 * it (3 for one jail and 4 for the other, 2 runs in 48 in parallel on a loaded host). */
static const char observe[] =
    "grep -E '^(Name|Umask|State|Tgid|Pid|PPid|Uid|Gid|Groups|NStgid|NSpid|CapInh|CapPrm|CapEff|CapBnd|"
    "CapAmb|NoNewPrivs|Seccomp|Seccomp_filters|SigPnd|ShdPnd|SigBlk|SigIgn|SigCgt|Cpus_allowed_list):' "
    "/proc/self/status; echo ---init; grep -E '^(Name|Pid|PPid|Uid|CapEff|NoNewPrivs|Seccomp):' "
    "/proc/1/status; tr '\\0' ' ' < /proc/1/cmdline; wc -c < /proc/1/environ; echo ---env; env | sort; "
    "echo ---fds; ls -l /proc/self/fd | sed 's/.*[0-9] \\([0-9]* ->\\)/\\1/; s/\\[[0-9]*\\]/[]/'; "
    "echo ---mounts; cut -d' ' -f3- /proc/self/mountinfo | sed 's/^[0-9]*:[0-9]* //; "
    "s/uid=[0-9]*,gid=[0-9]*/uid=N,gid=N/'; echo ---files; "
    "ls -la /workspace /tmp / /dev | sed 's/ [A-Z][a-z][a-z] .[0-9] [0-9:]* / date /; / "
    "proc$/s/^\\(d[-rwx]*\\) *[0-9]*/\\1 N/'; cat "
    "/workspace/in.txt; "
    "echo ---ids; id; hostname; cat /proc/self/cgroup; ulimit -a; echo $$ $PPID; set -- /proc/[0-9]*; "
    "echo $*; "
    "echo ---nice; cut -d' ' -f19 /proc/self/stat; echo ---write; touch /etc/x 2>&1; touch /workspace/y && "
    "echo y; cat /proc/self/attr/current 2>&1 | head "
    "-1";

static void prepared_looks_like_fresh(void **state) {
  (void)state;
  char *argv[] = {"sh", "-c", (char *)observe, NULL};
  struct jail_input_file files[] = {{"in.txt", "file\n", 5, 0}};
  struct jail_config c;
  config_for(&c, argv);
  c.input_files = files;
  c.input_file_count = 1;
  struct jail_result fresh, pooled;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &fresh, &err), 0);
  assert_false(fresh.prepared);
  struct jail_prepared *p = prepare();
  assert_int_equal(jail_prepared_run(p, &c, &pooled, &err), 0);
  assert_true(pooled.prepared);
  assert_int_equal(fresh.exit_code, 0);
  assert_int_equal(pooled.exit_code, 0);
  if (strcmp(fresh.stdout_data, pooled.stdout_data) != 0)
    fprintf(stderr, "fresh:\n%s\nprepared:\n%s\n", fresh.stdout_data, pooled.stdout_data);
  assert_string_equal(fresh.stdout_data, pooled.stdout_data);
  assert_string_equal(fresh.stderr_data, pooled.stderr_data);
  /* the comparison has teeth: the view holds what the jail is made of */
  assert_non_null(strstr(pooled.stdout_data, "NoNewPrivs:\t1"));
  assert_non_null(strstr(pooled.stdout_data, "AGENT=a"));
  assert_non_null(strstr(pooled.stdout_data, "/workspace"));
  assert_non_null(strstr(pooled.stdout_data, "\nfile\n"));
  assert_non_null(strstr(pooled.stdout_data, "sandbox"));
  assert_memory_equal(&fresh.limits, &pooled.limits, sizeof fresh.limits);
  assert_int_equal(fresh.enforcement, pooled.enforcement);
  jail_result_release(&fresh);
  jail_result_release(&pooled);
}

/* Calls alternate between two agents, each on a prepared jail of the same shape: A may write /workspace,
 * B may only read it. Each call gets its own rules, never the other's. */
static void rules_follow_the_call(void **state) {
  (void)state;
  struct jail_path_rule rules_a[] = {{"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, false, false},
                                     {"/workspace", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false},
                                     {"/tmp", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false}};
  struct jail_path_rule rules_b[] = {{"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, false, false},
                                     {"/tmp", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false}};
  char *argv[] = {"sh", "-c",
                  "ls /workspace; echo x > /workspace/out 2>/dev/null && echo wrote || echo refused", NULL};
  if (jail_landlock_abi() <= 0) {
    fprintf(stderr, "no Landlock on this kernel: the path rules cannot be enforced\n");
    fail();
  }
  for (int round = 0; round < 4; round++) {
    bool agent_a = round % 2 == 0;
    struct jail_config c;
    config_for(&c, argv);
    c.path_rules = agent_a ? rules_a : rules_b;
    c.path_rule_count = agent_a ? 3 : 2;
    struct jail_result r;
    dome_error err = {0};
    assert_int_equal(jail_prepared_run(prepare(), &c, &r, &err), 0);
    assert_true(r.prepared);
    /* never a file of an earlier call in the workspace, and the call's own rule decides */
    assert_string_equal(r.stdout_data, agent_a ? "wrote\n" : "refused\n");
    jail_result_release(&r);
  }
}

/* The memory limit of the shape applies (read back at the bind): a program beyond it is OOM-killed. */
static void quota_applies(void **state) {
  (void)state;
  char *argv[] = {"python3", "-c", "b = bytearray(300 << 20); print(len(b))", NULL};
  struct jail_config c;
  config_for(&c, argv);
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_prepared_run(prepare(), &c, &r, &err), 0);
  assert_true(r.prepared);
  assert_true(r.oom_killed);
  assert_int_equal(r.limits.memory_bytes, 128ull << 20);
  jail_result_release(&r);
}

/* Another shape (a different memory limit) never runs in the prepared jail: it gets a fresh one. */
static void other_shape_gets_fresh_jail(void **state) {
  (void)state;
  struct jail_prepared *p = prepare();
  char id[32];
  snprintf(id, sizeof id, "%s", jail_prepared_id(p));
  char *argv[] = {"echo", "ok", NULL};
  struct jail_config c;
  config_for(&c, argv);
  c.memory_bytes = 96ull << 20;
  assert_false(jail_prepared_fits(p, &c));
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_prepared_run(p, &c, &r, &err), 0);
  assert_false(r.prepared);
  assert_string_not_equal(r.jail_id, id);
  assert_string_equal(r.stdout_data, "ok\n");
  assert_int_equal(r.limits.memory_bytes, 96ull << 20);
  char leaf[700];
  cgroup2_leaf(id, leaf, sizeof leaf);
  assert_string_equal(leaf, ""); /* the unused prepared jail is gone */
  jail_result_release(&r);
  /* an on_namespaces_ready hook needs its namespace at clone time: no prepared jail for it */
  char *true_argv[] = {"true", NULL};
  struct jail_config shape;
  config_for(&shape, true_argv);
  shape.on_namespaces_ready = (int (*)(void *, pid_t, dome_error *))1;
  struct jail_prepared *none = NULL;
  assert_int_equal(jail_prepare(&shape, &none, &err), -EINVAL);
  assert_null(none);
}

static void *prepare_niced(void *out) {
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  char *argv[] = {"true", NULL};
  struct jail_config shape;
  config_for(&shape, argv);
  dome_error err = {0};
  if (jail_prepare(&shape, (struct jail_prepared **)out, &err) < 0) *(struct jail_prepared **)out = NULL;
  /* stays until the jail has run: its child is tied to this thread */
  while (*(struct jail_prepared *volatile *)out != NULL) usleep(1000);
  return NULL;
}

/* A jail prepared at a lower priority (the pool's refill runs at nice 10) runs the program at the calling
 * thread's, as a fresh jail would. */
static void priority_follows_the_call(void **state) {
  (void)state;
  struct jail_prepared *p = NULL;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, prepare_niced, &p), 0);
  for (int i = 0; i < 2000 && p == NULL; i++) usleep(5000);
  assert_non_null(p);
  char *argv[] = {"sh", "-c", "cut -d' ' -f19 /proc/self/stat", NULL};
  struct jail_config c;
  config_for(&c, argv);
  struct jail_result r;
  dome_error err = {0};
  struct jail_prepared *taken = p;
  int rc = jail_prepared_run(taken, &c, &r, &err);
  *(struct jail_prepared *volatile *)&p = NULL;
  pthread_join(thread, NULL);
  assert_int_equal(rc, 0);
  assert_true(r.prepared);
  assert_string_equal(r.stdout_data, "0\n");
  jail_result_release(&r);
}

/* Without CAP_SYS_NICE (a service whose capability set lacks it) the caller's priority cannot be given
 * back to a jail prepared at a lower one: the call runs in a fresh jail, at the caller's priority, and
 * does not fail. Capabilities are per thread: only this one drops it, for the call. */
static void priority_not_given_back_runs_fresh(void **state) {
  (void)state;
  struct jail_prepared *p = NULL;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, prepare_niced, &p), 0);
  for (int i = 0; i < 2000 && p == NULL; i++) usleep(5000);
  assert_non_null(p);
  cap_t caps = cap_get_proc();
  assert_non_null(caps);
  cap_value_t nice_cap[] = {CAP_SYS_NICE};
  assert_int_equal(cap_set_flag(caps, CAP_EFFECTIVE, 1, nice_cap, CAP_CLEAR), 0);
  assert_int_equal(cap_set_proc(caps), 0);
  char *argv[] = {"sh", "-c", "cut -d' ' -f19 /proc/self/stat", NULL};
  struct jail_config c;
  config_for(&c, argv);
  struct jail_result r;
  dome_error err = {0};
  struct jail_prepared *taken = p;
  int rc = jail_prepared_run(taken, &c, &r, &err);
  assert_int_equal(cap_set_flag(caps, CAP_EFFECTIVE, 1, nice_cap, CAP_SET), 0);
  assert_int_equal(cap_set_proc(caps), 0);
  cap_free(caps);
  *(struct jail_prepared *volatile *)&p = NULL;
  pthread_join(thread, NULL);
  if (rc != 0) fail_msg("jail_prepared_run without CAP_SYS_NICE: %d %s", rc, err.message);
  assert_false(r.prepared);
  assert_string_equal(r.stdout_data, "0\n");
  jail_result_release(&r);
}

static void *prepare_and_exit(void *out) {
  char *argv[] = {"true", NULL};
  struct jail_config shape;
  config_for(&shape, argv);
  dome_error err = {0};
  if (jail_prepare(&shape, (struct jail_prepared **)out, &err) < 0) *(struct jail_prepared **)out = NULL;
  return NULL;
}

/* The child dies with the thread that prepared it: the prepared jail no longer waits and the call runs in
 * a fresh jail. */
static void dead_child_gets_fresh_jail(void **state) {
  (void)state;
  struct jail_prepared *p = NULL;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, prepare_and_exit, &p), 0);
  pthread_join(thread, NULL);
  assert_non_null(p);
  for (int i = 0; i < 200 && jail_prepared_waiting(p); i++) usleep(5000);
  assert_false(jail_prepared_waiting(p));
  char *argv[] = {"echo", "ok", NULL};
  struct jail_config c;
  config_for(&c, argv);
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_prepared_run(p, &c, &r, &err), 0);
  assert_false(r.prepared);
  assert_string_equal(r.stdout_data, "ok\n");
  jail_result_release(&r);
}

/* The call block: everything survives the trip, pointers relocated into the block; a block whose
 * offsets point outside it is refused. */
static void call_block_round_trip(void **state) {
  (void)state;
  char *argv[] = {"python3", "-c", "print(1)", NULL};
  char *env[] = {"PATH=/bin", "A=", NULL};
  struct jail_plan_entry entries[] = {{PLAN_DIR, "/tmp/workspace/d", NULL, NULL, 0, 0755},
                                      {PLAN_FILE, "/tmp/workspace/d/f", NULL, "data", 4, 0600},
                                      {PLAN_FILE, "/tmp/workspace/e", NULL, NULL, 0, 0644}};
  struct jail_landlock_rule rules[] = {{"/workspace", 7, false, false}, {"/opt", 1, true, true}};
  struct jail_plan plan = {.argv = argv,
                           .envp = env,
                           .search_path = "/bin",
                           .working_directory = "/workspace/d",
                           .workspace_entries = entries,
                           .workspace_entry_count = 3,
                           .landlock_rules = rules,
                           .landlock_rule_count = 2};
  dome_error err = {0};
  int fd = jail_call_encode(&plan, &err);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  size_t size = (size_t)st.st_size;
  char *block = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  assert_true(block != MAP_FAILED);
  assert_int_equal(write(fd, "x", 1), -1); /* sealed */
  char *spare = malloc(size);
  memcpy(spare, block, size);
  struct jail_plan out = {0};
  assert_int_equal(jail_call_decode(block, size, &out), 0);
  assert_string_equal(out.argv[2], "print(1)");
  assert_null(out.argv[3]);
  assert_string_equal(out.envp[1], "A=");
  assert_null(out.envp[2]);
  assert_string_equal(out.search_path, "/bin");
  assert_string_equal(out.working_directory, "/workspace/d");
  assert_int_equal(out.workspace_entry_count, 3);
  assert_string_equal(out.workspace_entries[1].path, "/tmp/workspace/d/f");
  assert_memory_equal(out.workspace_entries[1].data, "data", 4);
  assert_int_equal(out.workspace_entries[1].mode, 0600);
  assert_null(out.workspace_entries[2].data);
  assert_int_equal(out.landlock_rule_count, 2);
  assert_string_equal(out.landlock_rules[1].path, "/opt");
  assert_true(out.landlock_rules[1].optional && out.landlock_rules[1].exact);
  assert_true(out.argv[0] >= block && out.argv[0] < block + size);
  /* a truncated block and an offset beyond the end are refused */
  struct jail_plan refused = {0};
  memcpy(block, spare, size);
  assert_int_equal(jail_call_decode(block, size - 8, &refused), -EINVAL);
  memcpy(block, spare, size);
  uint64_t beyond = size + 64;
  memcpy(block + 2 * sizeof(uint64_t), &beyond, sizeof beyond); /* argv's offset */
  assert_int_equal(jail_call_decode(block, size, &refused), -EINVAL);
  free(spare);
  munmap(block, size);
  close(fd);
}

/* ---- a prepared jail with a waiting Python interpreter ---- */

static char *const python_start_env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};

static struct jail_prepared *prepare_python(void) {
  char *argv[] = {"true", NULL};
  struct jail_config shape;
  config_for(&shape, argv);
  shape.env = python_start_env;
  shape.prepared_python = "/usr/bin/python3";
  struct jail_prepared *p = NULL;
  dome_error err = {0};
  int r = jail_prepare(&shape, &p, &err);
  if (r < 0) fprintf(stderr, "jail_prepare (python) -> %d: %s\n", r, err.message);
  assert_int_equal(r, 0);
  assert_true(jail_prepared_waiting(p));
  return p;
}

/* What a Python program can observe of itself and its jail, printed the same way in a fresh jail and in
 * a prepared interpreter; pipe inodes and the jail's host uid blanked as in `observe`. The C environment is
 * read through a popen that is closed (waited for) before the fds are listed: dropped unclosed, its pipe
 * stays open whenever env has closed its output but not yet exited (Popen.__del__ keeps an unreaped child's
 * object, and its pipe, in subprocess._active), which a loaded host makes happen in either jail, about 1
 * run in 6 in parallel; python_unreaped_child_like_fresh shows it. */
static const char python_observe[] =
    "import os, sys, re\n"
    "keys = ('Name','Umask','State','Tgid','Pid','PPid','Uid','Gid','Groups','NStgid','NSpid','NSsid',\n"
    "        'Threads','FDSize','CapInh','CapPrm','CapEff','CapBnd','CapAmb','NoNewPrivs','Seccomp',\n"
    "        'Seccomp_filters','SigPnd','ShdPnd','SigBlk','SigIgn','SigCgt','Cpus_allowed_list')\n"
    "for line in open('/proc/self/status'):\n"
    "    if line.split(':')[0] in keys: print(line, end='')\n"
    "print('---environ', sorted(os.environ.items()))\n"
    "with os.popen('/usr/bin/env') as env: print('---c environ', env.read())\n"
    "print('---fds')\n"
    "for fd in sorted(os.listdir('/proc/self/fd'), key=int):\n"
    "    try: print(fd, re.sub(r'\\[[0-9]+\\]', '[]', os.readlink('/proc/self/fd/' + fd)))\n"
    "    except OSError as e: print(fd, e.errno)\n"
    "print('---cwd', os.getcwd(), os.listdir('.'), open('in.txt').read())\n"
    "print('---sys', sys.argv, sys.orig_argv[:2], sys.path, sys.flags, sys.executable)\n"
    "print('---modules', sorted(sys.modules))\n"
    "print('---importer cache', sorted(sys.path_importer_cache))\n"
    /* the AST types compile() builds on its first call: a fresh `-c` never makes them (a bootstrap
     * that ran the code through compile() had 119) */
    "import gc; print('---ast types', sum(isinstance(t, type) and t.__module__ == 'ast' for t in "
    "gc.get_objects()))\n"
    "print('---main', sorted(globals()), __name__, __spec__, __loader__)\n"
    "print('---stdio', sys.stdin.seekable(), sys.stdout.line_buffering, sys.stdin.encoding, "
    "sys.stdout.encoding, sys.stderr.errors)\n"
    "print('---ids', os.getpid(), os.getppid(), os.getsid(0), os.getpgid(0), os.getuid(), os.umask(0o22))\n"
    "print('---limits', os.sched_getaffinity(0), open('/proc/self/limits').read())\n"
    "try: open('/tmp/x', 'w')\n"
    "except OSError as e: print('---write /tmp', e.errno)\n"
    "open('/workspace/y', 'w').write('y'); print('---wrote /workspace')\n"
    "print('---nice', os.getpriority(os.PRIO_PROCESS, 0))\n"
    "for s in (9, 15, 19): os.kill(1, s)\n"
    "print('---signalled init, still here')\n";

static void python_prepared_looks_like_fresh(void **state) {
  (void)state;
  char *argv[] = {"/usr/bin/python3", "-c", (char *)python_observe, NULL};
  struct jail_input_file files[] = {{"in.txt", "file\n", 5, 0}, {"data/b.bin", "\0\1\2", 3, 0600}};
  struct jail_config c;
  config_for(&c, argv);
  c.input_files = files;
  c.input_file_count = 2;
  /* the call's own Landlock rules: /tmp (a writable tmpfs) is not granted */
  struct jail_path_rule rules[] = {{"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, false, false},
                                   {"/workspace", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false}};
  c.path_rules = rules;
  c.path_rule_count = 2;
  struct jail_prepared *p = prepare_python();
  assert_true(jail_prepared_fits(p, &c));
  struct jail_result fresh, pooled;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &fresh, &err), 0);
  assert_false(fresh.prepared);
  int r = jail_prepared_run(p, &c, &pooled, &err);
  if (r < 0) fprintf(stderr, "prepared run -> %d: %s\n", r, err.message);
  assert_int_equal(r, 0);
  assert_true(pooled.prepared);
  if (strcmp(fresh.stdout_data, pooled.stdout_data) != 0 || strcmp(fresh.stderr_data, pooled.stderr_data))
    fprintf(stderr, "fresh:\n%s%s\nprepared:\n%s%s\n", fresh.stdout_data, fresh.stderr_data,
            pooled.stdout_data, pooled.stderr_data);
  assert_int_equal(fresh.exit_code, 0);
  assert_int_equal(pooled.exit_code, 0);
  assert_string_equal(fresh.stdout_data, pooled.stdout_data);
  assert_string_equal(fresh.stderr_data, pooled.stderr_data);
  /* the comparison has teeth */
  assert_non_null(strstr(pooled.stdout_data, "NoNewPrivs:\t1"));
  assert_non_null(strstr(pooled.stdout_data, "Seccomp:\t2"));
  assert_non_null(strstr(pooled.stdout_data, "('AGENT', 'a')"));
  assert_non_null(strstr(pooled.stdout_data, "AGENT=a\n"));
  assert_non_null(strstr(pooled.stdout_data, "---cwd /workspace"));
  assert_non_null(strstr(pooled.stdout_data, "['-c'] ['/usr/bin/python3', '-c']"));
  assert_null(strstr(pooled.stdout_data, "ctypes"));
  assert_non_null(strstr(pooled.stdout_data, "---ids 2 1 1 1 0"));
  if (jail_landlock_abi() > 0) assert_non_null(strstr(pooled.stdout_data, "---write /tmp 13"));
  assert_non_null(strstr(pooled.stdout_data, "---wrote /workspace"));
  assert_non_null(strstr(pooled.stdout_data, "---signalled init, still here"));
  assert_int_equal(pooled.output_path_count, fresh.output_path_count);
  jail_result_release(&fresh);
  jail_result_release(&pooled);
}

/* The code's caller frame in a prepared interpreter (the waiting program's, which a fresh `-c` does not
 * have) holds none of the call's data but the code itself and the code's own globals: not its environment,
 * files or working directory (the loops that took them ran in a frame that is gone). */
static void python_caller_holds_no_call_data(void **state) {
  (void)state;
  char *argv[] = {
      "/usr/bin/python3", "-c",
      "import sys\n"
      "f = sys._getframe(0).f_back\n"
      "values = [] if f is None else list(f.f_locals.values())\n"
      "print('held:', [repr(v)[:40] for v in values if v is not globals() and 'm4rk3r' in repr(v) "
      "and not (isinstance(v, str) and v.startswith('import sys'))])\n",
      NULL};
  char *env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "MARKER=m4rk3r-env", NULL};
  struct jail_input_file files[] = {{"m4rk3r-dir/in.txt", "m4rk3r-file", 11, 0}};
  struct jail_config c;
  config_for(&c, argv);
  c.env = env;
  c.input_files = files;
  c.input_file_count = 1;
  struct jail_prepared *p = prepare_python();
  assert_true(jail_prepared_fits(p, &c));
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_prepared_run(p, &c, &r, &err), 0);
  assert_true(r.prepared);
  assert_string_equal(r.stdout_data, "held: []\n");
  jail_result_release(&r);
}

/* `argv` run once in a fresh jail and once in a prepared interpreter (which must have served it), both
 * with config_for's configuration; the caller compares and releases the two results. */
static void run_fresh_and_prepared_python(char **argv, struct jail_result *fresh,
                                          struct jail_result *pooled) {
  struct jail_config c;
  config_for(&c, argv);
  dome_error err = {0};
  assert_int_equal(jail_run(&c, fresh, &err), 0);
  assert_int_equal(jail_prepared_run(prepare_python(), &c, pooled, &err), 0);
  assert_true(pooled->prepared);
}

/* A child that has closed its output but not exited when `os.popen(...).read()` drops its pipe (the slow
 * path a loaded host gives /usr/bin/env now and then, forced here: the child lingers) keeps that pipe open
 * in the program, in subprocess._active: in a prepared interpreter exactly as in a fresh `python -c`. A
 * closed popen waits for its child and leaves nothing. (The lingering child dies with the jail.) */
static void python_unreaped_child_like_fresh(void **state) {
  (void)state;
  char *argv[] = {"/usr/bin/python3", "-c",
                  "import os, subprocess\n"
                  "def pipes():\n"
                  "    found = []\n"
                  "    for fd in sorted(os.listdir('/proc/self/fd'), key=int):\n"
                  "        try: target = os.readlink('/proc/self/fd/' + fd)\n"
                  "        except OSError: continue\n"
                  "        if int(fd) > 2 and target.startswith('pipe:'): found.append(int(fd))\n"
                  "    return found\n"
                  "slow = 'echo out; exec >&- 2>&-; sleep '\n"
                  "with os.popen(slow + '0.5') as f: f.read()\n"
                  "print('closed', pipes(), len(subprocess._active))\n"
                  "os.popen(slow + '30').read()\n"
                  "print('dropped', pipes(), len(subprocess._active))\n",
                  NULL};
  struct jail_result fresh, pooled;
  run_fresh_and_prepared_python(argv, &fresh, &pooled);
  if (strcmp(fresh.stdout_data, pooled.stdout_data) != 0)
    fprintf(stderr, "fresh:\n%s%s\nprepared:\n%s%s\n", fresh.stdout_data, fresh.stderr_data,
            pooled.stdout_data, pooled.stderr_data);
  assert_string_equal(fresh.stdout_data, "closed [] 0\ndropped [3] 1\n");
  assert_string_equal(pooled.stdout_data, fresh.stdout_data);
  assert_int_equal(pooled.exit_code, fresh.exit_code);
  jail_result_release(&fresh);
  jail_result_release(&pooled);
}

/* Errors, exit statuses and tracebacks as a fresh `python -c` gives them. */
static void python_prepared_fails_like_fresh(void **state) {
  (void)state;
  const char *programs[] = {"1/0",
                            "x = (",
                            "import sys; sys.exit(3)",
                            "raise SystemExit('bye')",
                            "import os; os.kill(os.getpid(), 9)",
                            "def f():\n    raise KeyError('k')\nf()"};
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
    char *argv[] = {"/usr/bin/python3", "-c", (char *)programs[i], NULL};
    struct jail_result fresh, pooled;
    run_fresh_and_prepared_python(argv, &fresh, &pooled);
    if (strcmp(fresh.stderr_data, pooled.stderr_data) != 0)
      fprintf(stderr, "`%s` fresh:\n%s\nprepared:\n%s\n", programs[i], fresh.stderr_data, pooled.stderr_data);
    assert_string_equal(fresh.stderr_data, pooled.stderr_data);
    assert_int_equal(fresh.exit_code, pooled.exit_code);
    assert_int_equal(fresh.signal, pooled.signal);
    jail_result_release(&fresh);
    jail_result_release(&pooled);
  }
  /* a working directory missing in the jail fails both ways with the same error */
  char *argv[] = {"/usr/bin/python3", "-c", "print(1)", NULL};
  struct jail_config c;
  config_for(&c, argv);
  c.working_directory = "/nowhere";
  struct jail_result fresh, pooled;
  dome_error fresh_err = {0}, pooled_err = {0};
  int fresh_rc = jail_run(&c, &fresh, &fresh_err);
  int pooled_rc = jail_prepared_run(prepare_python(), &c, &pooled, &pooled_err);
  assert_int_equal(fresh_rc, -ENOENT);
  assert_int_equal(pooled_rc, fresh_rc);
  assert_string_equal(pooled_err.message, fresh_err.message);
  jail_result_release(&fresh);
  jail_result_release(&pooled);
}

/* Calls alternate between two agents on prepared interpreters: each applies its own call's Landlock rules
 * (A may write /workspace, B may not), never the other's. */
static void python_rules_follow_the_call(void **state) {
  (void)state;
  if (jail_landlock_abi() <= 0) {
    fprintf(stderr, "no Landlock on this kernel: the path rules cannot be enforced\n");
    fail();
  }
  struct jail_path_rule rules_a[] = {{"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, false, false},
                                     {"/workspace", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false},
                                     {"/tmp", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false}};
  struct jail_path_rule rules_b[] = {{"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, false, false},
                                     {"/tmp", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false},
                                     {"/opt/none", JAIL_ACCESS_READ, true, false}};
  char *argv[] = {"/usr/bin/python3", "-c",
                  "import os\nprint(os.listdir('/workspace'))\ntry:\n    open('/workspace/out', 'w')\n"
                  "    print('wrote')\nexcept OSError:\n    print('refused')",
                  NULL};
  for (int round = 0; round < 4; round++) {
    bool agent_a = round % 2 == 0;
    struct jail_config c;
    config_for(&c, argv);
    c.path_rules = agent_a ? rules_a : rules_b;
    c.path_rule_count = 3;
    struct jail_result r;
    dome_error err = {0};
    assert_int_equal(jail_prepared_run(prepare_python(), &c, &r, &err), 0);
    assert_true(r.prepared);
    assert_string_equal(r.stdout_data, agent_a ? "[]\nwrote\n" : "[]\nrefused\n");
    jail_result_release(&r);
  }
}

/* A call the interpreter cannot serve as a fresh one would (another program, a variable Python reads at
 * start-up, stdin, a user site in the workspace) runs in a fresh jail. */
static void python_call_that_does_not_fit_runs_fresh(void **state) {
  (void)state;
  char *python_argv[] = {"/usr/bin/python3", "-c", "import sys; print(sys.path[1])", NULL};
  char *sh_argv[] = {"/bin/sh", "-c", "echo sh", NULL};
  char *other_env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONPATH=/opt", NULL};
  char *missing_env[] = {"PATH=/usr/bin:/bin", NULL};
  struct jail_input_file user_site[] = {{".local/lib/x.py", "", 0, 0}};
  struct jail_prepared *p = prepare_python();
  struct jail_config c;
  config_for(&c, python_argv);
  assert_true(jail_prepared_fits(p, &c));
  c.env = other_env;
  assert_false(jail_prepared_fits(p, &c));
  c.env = missing_env;
  assert_false(jail_prepared_fits(p, &c));
  /* read by the dynamic loader and glibc at exec, before Python: a started interpreter never saw them */
  char *loader_env[][4] = {
      {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LD_PRELOAD=/workspace/x.so", NULL},
      {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LD_LIBRARY_PATH=/workspace", NULL},
      {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "GLIBC_TUNABLES=glibc.malloc.check=3", NULL},
      {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "MALLOC_ARENA_MAX=1", NULL},
      {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LOCPATH=/workspace", NULL}};
  for (size_t i = 0; i < sizeof loader_env / sizeof loader_env[0]; i++) {
    c.env = loader_env[i];
    assert_false(jail_prepared_fits(p, &c));
  }
  char *other_variable[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "AGENT_TOKEN_NAME=x", NULL};
  c.env = other_variable; /* read only when the code asks: the interpreter's environment is replaced */
  assert_true(jail_prepared_fits(p, &c));
  config_for(&c, python_argv);
  c.stdin_data = "x";
  c.stdin_length = 1;
  assert_false(jail_prepared_fits(p, &c));
  config_for(&c, python_argv);
  c.input_files = user_site;
  c.input_file_count = 1;
  assert_false(jail_prepared_fits(p, &c));
  config_for(&c, sh_argv);
  assert_false(jail_prepared_fits(p, &c));
  config_for(&c, python_argv);
  c.env = other_env;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_prepared_run(p, &c, &r, &err), 0);
  assert_false(r.prepared);
  assert_string_equal(r.stdout_data, "/opt\n");
  jail_result_release(&r);
}

/* A prepared interpreter with a program of its own (jail_config.prepared_python_program): the program runs
 * before its call (it imports `wave` while it waits), then runs the waiting program, and the call (the same
 * program, fds 3 and 4 closed now) finds the module loaded, under the call's Landlock rules; a hook that only
 * needs the init (namespaces_hook_late) runs at the bind. Another program, another environment or a call
 * that names no program does not fit. */
static char *program_with_bootstrap(void) {
  static const char head[] =
      "import os, sys\ntry:\n    os.fstat(3), os.fstat(4)\n    prepared = True\n"
      "except OSError:\n    prepared = False\nif prepared:\n    import wave\n"
      "    exec(bytes.fromhex('";
  static const char tail[] =
      "').decode())\n    sys.exit()\nprint('wave' in sys.modules)\ntry:\n"
      "    open('/workspace/out', 'w'); print('wrote')\nexcept OSError:\n"
      "    print('refused')\n";
  const char *bootstrap = jail_python_waiting_program();
  char *program = malloc(sizeof head + 2 * strlen(bootstrap) + sizeof tail);
  assert_non_null(program);
  char *at = stpcpy(program, head);
  for (const unsigned char *c = (const unsigned char *)bootstrap; *c; c++) at += sprintf(at, "%02x", *c);
  stpcpy(at, tail);
  return program;
}

static int note_pid(void *context, pid_t pid, dome_error *err) {
  (void)err;
  *(pid_t *)context = pid;
  return 0;
}

static void python_program_runs_before_its_call(void **state) {
  (void)state;
  char *program = program_with_bootstrap();
  char *argv[] = {"/usr/bin/python3", "-c", program, NULL};
  char *other[] = {"/usr/bin/python3", "-c", "print(1)", NULL};
  char *other_env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "EXTRA=1", NULL};
  struct jail_path_rule no_workspace_write[] = {{"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, false, false},
                                                {"/tmp", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, false, false}};
  for (int round = 0; round < 2; round++) {
    struct jail_config shape;
    config_for(&shape, argv);
    shape.env = python_start_env;
    shape.prepared_python = "/usr/bin/python3";
    shape.prepared_python_program = program;
    struct jail_prepared *p = NULL;
    dome_error err = {0};
    assert_int_equal(jail_prepare(&shape, &p, &err), 0);
    assert_true(jail_prepared_waiting(p));
    struct jail_config c;
    config_for(&c, argv);
    c.env = python_start_env;
    c.prepared_python_program = program;
    assert_true(jail_prepared_fits(p, &c));
    c.argv = other;
    assert_false(jail_prepared_fits(p, &c)); /* another program */
    c.argv = argv;
    c.env = other_env;
    assert_false(jail_prepared_fits(p, &c)); /* another environment */
    c.env = python_start_env;
    c.prepared_python_program = NULL;
    assert_false(jail_prepared_fits(p, &c)); /* a call that names no program */
    c.prepared_python_program = program;
    pid_t init = 0;
    c.on_namespaces_ready = note_pid;
    c.hook_context = &init;
    c.namespaces_hook_late = true;
    assert_true(jail_prepared_fits(p, &c));
    if (round == 1) {
      c.path_rules = no_workspace_write;
      c.path_rule_count = 2;
    }
    struct jail_result r;
    assert_int_equal(jail_prepared_run(p, &c, &r, &err), 0);
    assert_true(r.prepared);
    assert_true(init > 0);
    assert_string_equal(r.stdout_data, round == 0 ? "True\nwrote\n" : "True\nrefused\n");
    jail_result_release(&r);
    /* fresh, the same program imports nothing before: it takes the other branch */
    c.on_namespaces_ready = NULL;
    assert_int_equal(jail_run(&c, &r, &err), 0);
    assert_string_equal(r.stdout_data, round == 0 ? "False\nwrote\n" : "False\nrefused\n");
    jail_result_release(&r);
  }
  free(program);
}

/* An interpreter named as a call names it (`python3`, through the PATH of its environment) resolves as the
 * fresh program does. */
static void python_named_through_path(void **state) {
  (void)state;
  char *argv[] = {"python3", "-c", "import sys; print(sys.executable, sys.orig_argv[0], sys.argv)", NULL};
  struct jail_config shape, c;
  config_for(&shape, argv);
  shape.env = python_start_env;
  shape.prepared_python = "python3";
  struct jail_prepared *p = NULL;
  dome_error err = {0};
  assert_int_equal(jail_prepare(&shape, &p, &err), 0);
  config_for(&c, argv);
  struct jail_result fresh, pooled;
  assert_int_equal(jail_run(&c, &fresh, &err), 0);
  assert_int_equal(jail_prepared_run(p, &c, &pooled, &err), 0);
  assert_true(pooled.prepared);
  assert_string_equal(fresh.stdout_data, pooled.stdout_data);
  assert_non_null(strstr(pooled.stdout_data, " python3 ['-c']"));
  jail_result_release(&fresh);
  jail_result_release(&pooled);
}

static void *prepare_niced_python(void *out) {
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  char *argv[] = {"true", NULL};
  struct jail_config shape;
  config_for(&shape, argv);
  shape.env = python_start_env;
  shape.prepared_python = "/usr/bin/python3";
  dome_error err = {0};
  if (jail_prepare(&shape, (struct jail_prepared **)out, &err) < 0) *(struct jail_prepared **)out = NULL;
  while (*(struct jail_prepared *volatile *)out != NULL) usleep(1000);
  return NULL;
}

/* An interpreter started at a lower priority (the pool's refill runs at nice 10) runs the code at the
 * calling thread's, as a fresh one would: the jail's init and the interpreter both get it back. */
static void python_priority_follows_the_call(void **state) {
  (void)state;
  struct jail_prepared *p = NULL;
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, prepare_niced_python, &p), 0);
  for (int i = 0; i < 2000 && p == NULL; i++) usleep(5000);
  assert_non_null(p);
  char *argv[] = {"/usr/bin/python3", "-c",
                  "import os; print(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, 1))",
                  NULL};
  struct jail_config c;
  config_for(&c, argv);
  struct jail_result r;
  dome_error err = {0};
  struct jail_prepared *taken = p;
  int rc = jail_prepared_run(taken, &c, &r, &err);
  *(struct jail_prepared *volatile *)&p = NULL;
  pthread_join(thread, NULL);
  assert_int_equal(rc, 0);
  assert_true(r.prepared);
  assert_string_equal(r.stdout_data, "0 0\n");
  jail_result_release(&r);
}

/* A discarded interpreter leaves nothing: no leaf, no process. */
/* ---- before_program: nothing of the program runs until it returns ---- */

struct held {
  struct hook_log log;
  int refuse;            /* before_program's answer: 0 or a negative errno */
  long ticks_while_held; /* CPU the jail's processes used while before_program waited (clock ticks) */
  int calls;
};

/* user+system CPU ticks of every process listed in the cgroup leaf `leaf` (proc(5) stat fields 14, 15) */
static long leaf_cpu_ticks(const char *leaf) {
  char path[760];
  snprintf(path, sizeof path, "%s/cgroup.procs", leaf);
  FILE *procs = fopen(path, "r");
  long ticks = 0;
  int pid;
  while (procs && fscanf(procs, "%d", &pid) == 1) {
    char stat_path[64], line[1024];
    snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", pid);
    FILE *f = fopen(stat_path, "r");
    if (f && fgets(line, sizeof line, f)) {
      const char *after = strrchr(line, ')');
      long utime = 0, stime = 0;
      if (after &&
          sscanf(after + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) == 2)
        ticks += utime + stime;
    }
    if (f) fclose(f);
  }
  if (procs) fclose(procs);
  return ticks;
}

/* Wait 300 ms, measure what the jail's processes ran meanwhile, then answer. */
static int hold(void *context, dome_error *err) {
  struct held *h = context;
  h->calls++;
  long before = leaf_cpu_ticks(h->log.cgroup_path);
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  h->ticks_while_held = leaf_cpu_ticks(h->log.cgroup_path) - before;
  if (h->refuse) return dome_error_set(err, -h->refuse, "held");
  return 0;
}

static struct jail_prepared *no_prepared_jail(void) {
  return NULL;
}

/* A busy program in a jail from `make` (a fresh jail when it gives NULL): refused at before_program, it
 * never ran (it used no CPU while held, and the run fails with the refusal, leaving nothing); let go, it
 * runs (until its timeout). */
static void run_held(struct jail_prepared *(*make)(void), char **argv, char *const *env) {
  for (int refuse = 1; refuse >= 0; refuse--) {
    struct jail_prepared *p = make();
    struct held h = {.refuse = refuse ? -EPERM : 0};
    struct jail_config c;
    config_for(&c, argv);
    c.env = env;
    c.timeout_ms = 500;
    c.hook_context = &h;
    c.on_cgroup_ready = on_cgroup;
    c.before_program = hold;
    struct jail_result r;
    dome_error err = {0};
    int rc = p ? jail_prepared_run(p, &c, &r, &err) : jail_run(&c, &r, &err);
    assert_int_equal(h.calls, 1);
    assert_true(h.ticks_while_held < 10); /* held: no busy loop ran for 300 ms (100 Hz ticks) */
    if (refuse) {
      assert_int_equal(rc, -EPERM);
      struct stat st;
      assert_int_equal(stat(h.log.cgroup_path, &st), -1);
    } else {
      assert_int_equal(rc, 0);
      assert_int_equal(r.prepared, p != NULL);
      assert_true(r.timed_out); /* let go, it ran */
      assert_true(r.cpu_ms >= 100);
    }
    jail_result_release(&r);
  }
}

static void program_held_until_before_program(void **state) {
  (void)state;
  int fds_before = open_fds();
  char *shell[] = {"sh", "-c", "while :; do :; done", NULL};
  run_held(no_prepared_jail, shell, path_env);
  run_held(prepare, shell, path_env);
  char *python[] = {"/usr/bin/python3", "-c", "while True: pass", NULL};
  run_held(prepare_python, python, python_start_env);
  assert_int_equal(open_fds(), fds_before);
}

static void python_discard_leaves_nothing(void **state) {
  (void)state;
  int fds_before = open_fds();
  struct jail_prepared *p = prepare_python();
  char id[32], leaf[700];
  snprintf(id, sizeof id, "%s", jail_prepared_id(p));
  cgroup2_leaf(id, leaf, sizeof leaf);
  assert_string_not_equal(leaf, "");
  jail_prepared_discard(p);
  cgroup2_leaf(id, leaf, sizeof leaf);
  assert_string_equal(leaf, "");
  assert_int_equal(open_fds(), fds_before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(call_block_round_trip),
      cmocka_unit_test(prepared_runs_and_leaves_nothing),
      cmocka_unit_test(discard_leaves_nothing),
      cmocka_unit_test(waiting_jail_holds_no_fd_of_ours),
      cmocka_unit_test(prepared_looks_like_fresh),
      cmocka_unit_test(rules_follow_the_call),
      cmocka_unit_test(quota_applies),
      cmocka_unit_test(other_shape_gets_fresh_jail),
      cmocka_unit_test(priority_follows_the_call),
      cmocka_unit_test(priority_not_given_back_runs_fresh),
      cmocka_unit_test(dead_child_gets_fresh_jail),
      cmocka_unit_test(python_prepared_looks_like_fresh),
      cmocka_unit_test(python_caller_holds_no_call_data),
      cmocka_unit_test(python_unreaped_child_like_fresh),
      cmocka_unit_test(python_prepared_fails_like_fresh),
      cmocka_unit_test(python_rules_follow_the_call),
      cmocka_unit_test(python_call_that_does_not_fit_runs_fresh),
      cmocka_unit_test(python_named_through_path),
      cmocka_unit_test(python_program_runs_before_its_call),
      cmocka_unit_test(python_priority_follows_the_call),
      cmocka_unit_test(python_discard_leaves_nothing),
      cmocka_unit_test(program_held_until_before_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
