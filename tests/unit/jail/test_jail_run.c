/* Library-level tests of jail_run (needs root, user namespaces and cgroups, as every jail does): the hooks
 * other components attach to (cgroup ready, namespaces ready, output, cancellation), aborting from a hook,
 * input files and stdin bytes, and several jails from several threads at once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/jail/jail.h"

static char *const path_env[] = {"PATH=/usr/bin:/bin", NULL};

/* Failure injection: while fail_dev_null_errno is set, open("/dev/null") by this process (the jail's
 * stdin without input) fails with it; every other open goes to the kernel. This definition takes the
 * place of libc's for the jail library linked into this test. */
static int fail_dev_null_errno;
int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list arguments;
    va_start(arguments, flags);
    mode = va_arg(arguments, mode_t);
    va_end(arguments);
  }
  if (fail_dev_null_errno && strcmp(path, "/dev/null") == 0) {
    errno = fail_dev_null_errno;
    return -1;
  }
  return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

struct hook_log {
  char cgroup_path[700];
  uint64_t cgroup_id;
  uint64_t inode;
  pid_t child;
  bool other_netns;
  size_t output_bytes[3];
  int abort_with;
};

static int on_cgroup(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct hook_log *log = context;
  snprintf(log->cgroup_path, sizeof log->cgroup_path, "%s", leaf->path);
  log->cgroup_id = leaf->id;
  struct stat st;
  if (fstat(leaf->fd, &st) == 0) log->inode = st.st_ino;
  if (log->abort_with) return dome_error_set(err, log->abort_with, "hook refused");
  return 0;
}

static int on_namespaces(void *context, pid_t child, dome_error *err) {
  (void)err;
  struct hook_log *log = context;
  log->child = child;
  char path[64];
  struct stat mine, theirs;
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)child);
  log->other_netns =
      stat("/proc/self/ns/net", &mine) == 0 && stat(path, &theirs) == 0 && mine.st_ino != theirs.st_ino;
  return 0;
}

static void on_output(void *context, int stream, const char *data, size_t length, uint64_t offset_ms) {
  (void)data;
  (void)offset_ms;
  struct hook_log *log = context;
  if (stream == 1 || stream == 2) log->output_bytes[stream] += length;
}

static int open_fds(void) {
  int count = 0;
  DIR *d = opendir("/proc/self/fd");
  while (d && readdir(d)) count++;
  if (d) closedir(d);
  return count;
}

static void hooks_called_in_order(void **state) {
  (void)state;
  int fds_before = open_fds();
  char *argv[] = {"sh", "-c", "cat /workspace/in/data.txt; cat; echo err >&2; exit 5", NULL};
  struct hook_log log = {0};
  struct jail_input_file files[] = {{"in/data.txt", "file-data\n", 10, 0}};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.stdin_data = "stdin-data\n";
  c.stdin_length = 11;
  c.input_files = files;
  c.input_file_count = 1;
  c.hook_context = &log;
  c.on_cgroup_ready = on_cgroup;
  c.on_namespaces_ready = on_namespaces;
  c.on_output = on_output;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_int_equal(r.exit_code, 5);
  assert_string_equal(r.stdout_data, "file-data\nstdin-data\n");
  assert_string_equal(r.stderr_data, "err\n");
  assert_int_equal(log.output_bytes[1], r.stdout_length);
  assert_int_equal(log.output_bytes[2], r.stderr_length);
  assert_true(log.cgroup_path[0] != '\0');
  assert_int_equal(log.cgroup_id, log.inode);
  assert_true(log.child > 1);
  assert_true(log.other_netns);
  assert_non_null(strstr(log.cgroup_path, r.jail_id));
  struct stat st;
  assert_int_equal(stat(log.cgroup_path, &st), -1); /* the leaf is gone */
  assert_int_equal(r.output_path_count, 0);         /* the input file was not modified */
  jail_result_release(&r);
  assert_int_equal(open_fds(), fds_before); /* no fd left behind */
}

static void hook_aborts_run(void **state) {
  (void)state;
  char *argv[] = {"sh", "-c", "echo SHOULD-NOT-RUN", NULL};
  struct hook_log log = {.abort_with = EACCES};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.hook_context = &log;
  c.on_cgroup_ready = on_cgroup;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), -EACCES);
  assert_non_null(strstr(err.message, "hook refused"));
  struct stat st;
  assert_int_equal(stat(log.cgroup_path, &st), -1);
  jail_result_release(&r);
}

struct teardown_log {
  struct jail_teardown *teardown;
  int calls;
  const struct hook_log *hooks; /* the run's: its init's host pid */
  bool init_unreaped;           /* the init was still our unreaped child when the teardown came */
};

static void keep_teardown(void *context, struct jail_teardown *teardown) {
  struct teardown_log *log = context;
  log->teardown = teardown;
  log->calls++;
  log->init_unreaped = log->hooks && log->hooks->child > 0 && kill(log->hooks->child, 0) == 0;
}

/* The host pids listed in a cgroup leaf's cgroup.procs, at most `room`; -1 when it cannot be read. */
static int leaf_pids(const char *leaf, pid_t *pids, int room) {
  char path[760];
  snprintf(path, sizeof path, "%s/cgroup.procs", leaf);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int count = 0, pid;
  while (count < room && fscanf(f, "%d", &pid) == 1) pids[count++] = pid;
  fclose(f);
  return count;
}

/* jail_run with `argv` and defer_teardown into *kept; the init's host pid in log->child. */
static int run_kept(char **argv, struct hook_log *log, struct teardown_log *kept, struct jail_result *r,
                    dome_error *err) {
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.hook_context = log;
  c.on_cgroup_ready = on_cgroup;
  c.on_namespaces_ready = on_namespaces;
  c.defer_teardown = keep_teardown;
  kept->hooks = log;
  c.defer_teardown_context = kept;
  return jail_run(&c, r, err);
}

/* With defer_teardown, a run whose program ended returns with its cgroup leaf still there and hands it
 * over once: nothing of the jail runs in it but, for a moment, its exiting init (the program ended with
 * nothing else left, so the answer need not wait for the init's exit: the init is still unreaped when the
 * teardown comes); jail_teardown_finish reaps the init, removes the leaf and releases every fd. A program
 * that leaves a process running is answered only once the init is reaped and the kernel has killed that
 * process: the init is reaped before the teardown comes and the leaf is empty, long before the process
 * would have ended. A run that a hook aborts before its program releases everything itself and hands
 * nothing over. */
static void teardown_deferred(void **state) {
  (void)state;
  int fds_before = open_fds();
  struct hook_log log = {0};
  struct teardown_log kept = {0};
  struct jail_result r;
  dome_error err = {0};
  char *echo[] = {"sh", "-c", "echo ran", NULL};
  assert_int_equal(run_kept(echo, &log, &kept, &r, &err), 0);
  assert_string_equal(r.stdout_data, "ran\n");
  assert_int_equal(r.exit_code, 0);
  jail_result_release(&r);
  assert_int_equal(kept.calls, 1);
  assert_non_null(kept.teardown);
  assert_true(kept.init_unreaped); /* answered at the init's report */
  struct stat st;
  assert_int_equal(stat(log.cgroup_path, &st), 0); /* the leaf waits for its teardown */
  pid_t pids[8];
  int count = leaf_pids(log.cgroup_path, pids, 8);
  assert_in_range(count, 0, 1);
  if (count == 1) assert_int_equal(pids[0], log.child); /* the init, exiting */
  assert_int_equal(jail_teardown_finish(kept.teardown, &err), 0);
  assert_int_equal(stat(log.cgroup_path, &st), -1);
  assert_int_equal(open_fds(), fds_before);
  assert_int_equal(jail_teardown_finish(NULL, &err), 0);

  kept = (struct teardown_log){0};
  log = (struct hook_log){0};
  char *background[] = {"sh", "-c", "sleep 30 >/dev/null 2>&1 & echo started", NULL};
  struct timespec before, after;
  clock_gettime(CLOCK_MONOTONIC, &before);
  assert_int_equal(run_kept(background, &log, &kept, &r, &err), 0);
  clock_gettime(CLOCK_MONOTONIC, &after);
  assert_true(after.tv_sec - before.tv_sec < 20);
  assert_string_equal(r.stdout_data, "started\n");
  jail_result_release(&r);
  assert_int_equal(kept.calls, 1);
  assert_false(kept.init_unreaped);                         /* answered after the init's reaping */
  assert_int_equal(leaf_pids(log.cgroup_path, pids, 8), 0); /* the sleep was killed before the answer */
  assert_int_equal(jail_teardown_finish(kept.teardown, &err), 0);
  assert_int_equal(stat(log.cgroup_path, &st), -1);
  assert_int_equal(open_fds(), fds_before);

  kept = (struct teardown_log){0};
  log = (struct hook_log){.abort_with = EACCES};
  assert_int_equal(run_kept(echo, &log, &kept, &r, &err), -EACCES);
  jail_result_release(&r);
  assert_int_equal(kept.calls, 0);
  assert_int_equal(stat(log.cgroup_path, &st), -1);
  assert_int_equal(open_fds(), fds_before);
}

/* A jail's host uid (its program reads it in /proc/self/uid_map) says nothing of other jails: consecutive
 * jails' uids do not advance by a fixed step (drawn from a counter of jails, two uids of one agent's calls
 * told how many jails were made in between). */
static void host_uid_is_no_counter(void **state) {
  (void)state;
  char *argv[] = {"cat", "/proc/self/uid_map", NULL};
  long uid[8];
  for (int i = 0; i < 8; i++) {
    struct jail_config c;
    jail_config_init(&c);
    c.argv = argv;
    c.env = path_env;
    struct jail_result r;
    dome_error err = {0};
    assert_int_equal(jail_run(&c, &r, &err), 0);
    long inside = -1, outside = -1, count = -1;
    assert_int_equal(sscanf(r.stdout_data, "%ld %ld %ld", &inside, &outside, &count), 3);
    assert_int_equal(inside, 0);
    assert_int_equal(count, 1);
    uid[i] = outside;
    jail_result_release(&r);
  }
  bool one_step = true;
  for (int i = 2; i < 8; i++)
    if ((uid[i] - uid[i - 1] + 65536) % 65536 != (uid[1] - uid[0] + 65536) % 65536) one_step = false;
  assert_false(one_step);
}

/* The program's stdin is /dev/null when it gets no input: a failure to open it fails the run with the
 * reason before the program starts, and leaves no cgroup behind. */
static void dev_null_open_failure(void **state) {
  (void)state;
  char *argv[] = {"sh", "-c", "echo SHOULD-NOT-RUN", NULL};
  struct hook_log log = {0};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.hook_context = &log;
  c.on_cgroup_ready = on_cgroup;
  struct jail_result r;
  dome_error err = {0};
  fail_dev_null_errno = EMFILE;
  int rc = jail_run(&c, &r, &err);
  fail_dev_null_errno = 0;
  assert_int_equal(rc, -EMFILE);
  assert_non_null(strstr(err.message, "/dev/null"));
  struct stat st;
  assert_int_equal(stat(log.cgroup_path, &st), -1); /* its cgroup leaf is gone, the program never ran */
  jail_result_release(&r);
  /* and the next run, with /dev/null back, works */
  char *echo[] = {"sh", "-c", "echo ran", NULL};
  c.argv = echo;
  c.hook_context = NULL;
  c.on_cgroup_ready = NULL;
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_string_equal(r.stdout_data, "ran\n");
  jail_result_release(&r);
}

static void cancel_fd_kills(void **state) {
  (void)state;
  char *argv[] = {"sleep", "30", NULL};
  int pipe_fds[2];
  assert_int_equal(pipe(pipe_fds), 0);
  assert_int_equal(write(pipe_fds[1], "x", 1), 1); /* already cancelled: readable at once */
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.cancel_fd = pipe_fds[0];
  struct jail_result r;
  dome_error err = {0};
  int rc = jail_run(&c, &r, &err);
  assert_true(rc == 0 || rc == -ECANCELED);
  assert_true(r.cancelled);
  if (rc == 0) assert_int_equal(r.signal, 9);
  jail_result_release(&r);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

static int thread_failures;
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < 4; i++) {
    char code[128], want[64];
    snprintf(code, sizeof code, "echo %ld-%d > /workspace/f; cat /workspace/f; cat", id, i);
    snprintf(want, sizeof want, "%ld-%d\nin-%ld\n", id, i, id);
    char input[32];
    snprintf(input, sizeof input, "in-%ld\n", id);
    char *argv[] = {"sh", "-c", code, NULL};
    struct jail_config c;
    jail_config_init(&c);
    c.argv = argv;
    c.env = path_env;
    c.stdin_data = input;
    c.stdin_length = strlen(input);
    struct jail_result r;
    dome_error err = {0};
    int rc = jail_run(&c, &r, &err);
    if (rc < 0 || r.exit_code != 0 || !r.stdout_data || strcmp(r.stdout_data, want) != 0 ||
        r.output_path_count != 1) {
      pthread_mutex_lock(&failure_lock);
      thread_failures++;
      print_error("thread %ld run %d: rc %d (%s), stdout `%s`\n", id, i, rc, err.message,
                  r.stdout_data ? r.stdout_data : "");
      pthread_mutex_unlock(&failure_lock);
    }
    jail_result_release(&r);
  }
  return NULL;
}

static void concurrent_threads(void **state) {
  (void)state;
  pthread_t threads[4];
  int fds_before = open_fds();
  for (long i = 0; i < 4; i++) assert_int_equal(pthread_create(&threads[i], NULL, worker, (void *)i), 0);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  assert_int_equal(thread_failures, 0);
  assert_int_equal(open_fds(), fds_before);
}

/* jail_config.resolv_conf / hosts_dns: the per-run /etc of host-ro; other images refuse them. */
static void resolver_files(void **state) {
  (void)state;
  static char *const argv[] = {"sh", "-c", "cat /etc/resolv.conf; grep '^hosts' /etc/nsswitch.conf", NULL};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.resolv_conf = "nameserver 192.0.2.53\n";
  c.hosts_dns = true;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_string_equal(r.stdout_data, "nameserver 192.0.2.53\nhosts:\tfiles dns\n");
  jail_result_release(&r);
  /* the defaults stay: no resolv.conf, hosts from files only */
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_string_equal(r.stdout_data, "hosts:\tfiles\n");
  jail_result_release(&r);
}

/* Path rules compiled from Cedar: optional ones skip missing paths, exact ones grant a file only. */
static void optional_and_exact_path_rules(void **state) {
  (void)state;
  static char *const argv[] = {
      "sh", "-c", "cat /etc/hostname && echo readable; ls /usr >/dev/null 2>&1 || echo usr-refused", NULL};
  struct jail_path_rule rules[] = {
      {.path = "/usr", .access = JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, .optional = false},
      {.path = "/lib", .access = JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, .optional = true},
      {.path = "/lib64", .access = JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, .optional = true},
      {.path = "/bin", .access = JAIL_ACCESS_READ | JAIL_ACCESS_EXEC, .optional = true},
      {.path = "/no/such/dir", .access = JAIL_ACCESS_READ, .optional = true},
      {.path = "/etc/hostname", .access = JAIL_ACCESS_READ, .exact = true},
      {.path = "/etc", .access = JAIL_ACCESS_READ, .exact = true}, /* a directory: skipped, fail-closed */
  };
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.path_rules = rules;
  c.path_rule_count = sizeof rules / sizeof rules[0];
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_non_null(strstr(r.stdout_data, "sandbox\nreadable\n"));
  jail_result_release(&r);
  /* the exact rule on /etc granted nothing beneath it */
  static char *const argv2[] = {"sh", "-c", "cat /etc/passwd >/dev/null 2>&1 || echo passwd-refused", NULL};
  c.argv = argv2;
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_string_equal(r.stdout_data, "passwd-refused\n");
  jail_result_release(&r);
  /* a missing path that is not optional fails the run */
  rules[4].optional = false;
  assert_int_equal(jail_run(&c, &r, &err), -ENOENT);
  jail_result_release(&r);
}

/* Limits below what a jail needs or above what the supervisor holds are refused, naming the field. */
static void limits_refused(void **state) {
  (void)state;
  static char *const argv[] = {"true", NULL};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.pids = 1;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), -EINVAL);
  assert_non_null(strstr(err.message, "--pids"));
  jail_result_release(&r);
  c.pids = JAIL_MIN_PIDS;
  c.output_limit = JAIL_MAX_OUTPUT_LIMIT_BYTES + 1;
  assert_int_equal(jail_run(&c, &r, &err), -EINVAL);
  assert_non_null(strstr(err.message, "--output-limit"));
  jail_result_release(&r);
  c.output_limit = JAIL_MAX_OUTPUT_LIMIT_BYTES;
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_int_equal(r.exit_code, 0);
  jail_result_release(&r);
}

/* The working directory: /workspace by default, another absolute one when given; a relative path is
 * refused before anything runs, a directory missing in the jail fails the run naming it. on_tick is
 * called while a quiet program runs, and the bytes a program wrote are counted beyond output_limit. */
static void on_tick_count(void *context, uint64_t offset_ms) {
  (void)offset_ms;
  (*(int *)context)++;
}

static void working_directory_and_ticks(void **state) {
  (void)state;
  static char *const argv[] = {"sh", "-c", "pwd; head -c 5000 /dev/zero; sleep 0.3", NULL};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.output_limit = 4096;
  int ticks = 0;
  c.hook_context = &ticks;
  c.on_tick = on_tick_count;
  c.tick_ms = 20;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_true(strncmp(r.stdout_data, "/workspace\n", 11) == 0);
  assert_int_equal(r.stdout_length, 4096);
  assert_int_equal(r.stdout_total_bytes, 11 + 5000);
  assert_true(ticks >= 5); /* 300 ms of quiet, a tick every 20 ms */
  jail_result_release(&r);
  c.on_tick = NULL;
  c.output_limit = 0;
  c.working_directory = "/tmp";
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_true(strncmp(r.stdout_data, "/tmp\n", 5) == 0);
  jail_result_release(&r);
  c.working_directory = "workspace";
  assert_int_equal(jail_run(&c, &r, &err), -EINVAL);
  assert_non_null(strstr(err.message, "working directory"));
  jail_result_release(&r);
  c.working_directory = "/no/such/dir";
  assert_true(jail_run(&c, &r, &err) < 0);
  assert_non_null(strstr(err.message, "/no/such/dir"));
  jail_result_release(&r);
}

/* A copy-out conflict (a file on the host where the jail made a directory) skips that file, lists it in
 * copy_out_errors and keeps the run's result and the other files. */
static void copy_out_conflict_listed(void **state) {
  (void)state;
  char host[] = "/var/tmp/dome-unit-copyout-XXXXXX";
  assert_non_null(mkdtemp(host));
  char path[128];
  snprintf(path, sizeof path, "%s/x", host);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("keep\n", f);
  fclose(f);
  static char *const argv[] = {"sh", "-c",
                               "cd /workspace; rm x; mkdir x; echo y > x/y; echo z > z; echo done", NULL};
  struct jail_config c;
  jail_config_init(&c);
  c.argv = argv;
  c.env = path_env;
  c.workspace_dir = host;
  c.copy_out = true;
  struct jail_result r;
  dome_error err = {0};
  assert_int_equal(jail_run(&c, &r, &err), 0);
  assert_string_equal(r.stdout_data, "done\n");
  assert_int_equal(r.copy_out_error_count, 1);
  assert_non_null(strstr(r.copy_out_errors[0], "x/y: "));
  jail_result_release(&r);
  char text[16] = "";
  f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(text, sizeof text, f));
  fclose(f);
  assert_string_equal(text, "keep\n");
  unlink(path);
  snprintf(path, sizeof path, "%s/z", host);
  assert_int_equal(access(path, F_OK), 0);
  unlink(path);
  assert_int_equal(rmdir(host), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hooks_called_in_order),
      cmocka_unit_test(hook_aborts_run),
      cmocka_unit_test(teardown_deferred),
      cmocka_unit_test(host_uid_is_no_counter),
      cmocka_unit_test(dev_null_open_failure),
      cmocka_unit_test(cancel_fd_kills),
      cmocka_unit_test(concurrent_threads),
      cmocka_unit_test(resolver_files),
      cmocka_unit_test(optional_and_exact_path_rules),
      cmocka_unit_test(limits_refused),
      cmocka_unit_test(copy_out_conflict_listed),
      cmocka_unit_test(working_directory_and_ticks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
