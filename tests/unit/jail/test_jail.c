/* Unit tests for supervisor/jail: configuration checks (rejected before anything is created), workspace
 * paths and collection, Landlock access translation. Jails themselves run in tests/integration/jail. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/jail/internal.h"
#include "supervisor/jail/jail.h"
#include "supervisor/jail/landlock-abi.h"

static char *const true_argv[] = {"/bin/true", NULL};

static int run_expect(struct jail_config *c, int expected, const char *needle) {
  struct jail_result result;
  dome_error err = {0};
  int r = jail_run(c, &result, &err);
  jail_result_release(&result);
  if (r != expected || (needle && !strstr(err.message, needle))) {
    print_error("jail_run -> %d (%s), expected %d with `%s`\n", r, err.message, expected,
                needle ? needle : "");
    return 0;
  }
  return 1;
}

static void config_defaults(void **state) {
  (void)state;
  struct jail_config c;
  memset(&c, 0x5a, sizeof c);
  jail_config_init(&c);
  assert_int_equal(c.stdin_fd, -1);
  assert_int_equal(c.cancel_fd, -1);
  assert_null(c.argv);
  assert_int_equal(c.memory_bytes, 0);
  assert_false(c.copy_out);
  assert_string_equal(jail_enforcement_name(JAIL_ENFORCEMENT_HYBRID), "hybrid");
  assert_string_equal(jail_enforcement_name(JAIL_ENFORCEMENT_FULL), "full");
  struct jail_result zero = {0};
  jail_result_release(&zero);
  jail_result_release(NULL);
}

static void bad_config_rejected(void **state) {
  (void)state;
  struct jail_config c;
  jail_config_init(&c);
  assert_true(run_expect(&c, -EINVAL, "program"));
  c.argv = true_argv;
  c.stdin_data = "x";
  c.stdin_length = 1;
  c.stdin_fd = 0;
  assert_true(run_expect(&c, -EINVAL, "stdin"));
  jail_config_init(&c);
  c.argv = true_argv;
  c.memory_bytes = 1000;
  assert_true(run_expect(&c, -EINVAL, "memory"));
  c.memory_bytes = 0;
  c.cpus = -1;
  assert_true(run_expect(&c, -EINVAL, "cpus"));
  c.cpus = 0.001;
  assert_true(run_expect(&c, -EINVAL, "cpus"));
  c.cpus = 0;
  c.workspace_bytes = 10;
  assert_true(run_expect(&c, -EINVAL, "workspace size"));
  c.workspace_bytes = 0;
  struct jail_path_rule relative = {"workspace", JAIL_ACCESS_READ};
  c.path_rules = &relative;
  c.path_rule_count = 1;
  assert_true(run_expect(&c, -EINVAL, "path rule"));
  struct jail_path_rule bits = {"/data", 0x80};
  c.path_rules = &bits;
  assert_true(run_expect(&c, -EINVAL, "unknown access"));
}

static void unknown_image_and_workspace(void **state) {
  (void)state;
  struct jail_config c;
  jail_config_init(&c);
  c.argv = true_argv;
  c.image = "no-such-image";
  c.image_store = "/nonexistent-store";
  assert_true(run_expect(&c, -ENOENT, "unknown image `no-such-image`"));
  c.image = "../etc";
  assert_true(run_expect(&c, -EINVAL, "invalid image name"));
  c.image = NULL;
  c.workspace_dir = "/etc/hostname";
  assert_true(run_expect(&c, -ENOTDIR, "/etc/hostname"));
  c.workspace_dir = "/no/such/dir";
  assert_true(run_expect(&c, -ENOENT, "/no/such/dir"));
  c.workspace_dir = NULL;
  struct jail_input_file escape = {"../outside", "x", 1, 0};
  c.input_files = &escape;
  c.input_file_count = 1;
  assert_true(run_expect(&c, -EINVAL, "../outside"));
  struct jail_input_file big = {"big", "0123456789", 10, 0};
  c.input_files = &big;
  c.workspace_bytes = 4096;
  big.length = 5000;
  char *data = calloc(1, 5000);
  big.data = data;
  assert_true(run_expect(&c, -EFBIG, "big"));
  free(data);
}

static void workspace_paths(void **state) {
  (void)state;
  dome_error err = {0};
  assert_int_equal(jail_workspace_check_path("a.csv", "f", &err), 0);
  assert_int_equal(jail_workspace_check_path("out/users.json", "f", &err), 0);
  assert_int_equal(jail_workspace_check_path("dir/", "f", &err), 0);
  assert_int_equal(jail_workspace_check_path("/etc/passwd", "f", &err), -EINVAL);
  assert_non_null(strstr(err.message, "/etc/passwd"));
  assert_int_equal(jail_workspace_check_path("a/../b", "f", &err), -EINVAL);
  assert_int_equal(jail_workspace_check_path("./a", "f", &err), -EINVAL);
  assert_int_equal(jail_workspace_check_path("a//b", "f", &err), -EINVAL);
  assert_int_equal(jail_workspace_check_path("", "f", &err), -EINVAL);
  char deep[200] = "";
  for (int i = 0; i < 40; i++) strcat(deep, "d/");
  strcat(deep, "f");
  assert_int_equal(jail_workspace_check_path(deep, "f", &err), -EINVAL);
  assert_non_null(strstr(err.message, "deeper"));
}

static void workspace_collect_skips_links(void **state) {
  (void)state;
  char dir[] = "/tmp/dome-unit-ws-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/sub", dir);
  assert_int_equal(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/sub/a.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("hello", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/link", dir);
  assert_int_equal(symlink("/etc/passwd", path), 0);
  snprintf(path, sizeof path, "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0644), 0);

  struct jail_config c;
  jail_config_init(&c);
  c.workspace_dir = dir;
  struct jail_input_file extra = {"sub/a.txt", "override", 8, 0};
  c.input_files = &extra;
  c.input_file_count = 1;
  struct jail_workspace_input in;
  dome_error err = {0};
  assert_int_equal(jail_workspace_collect(&in, &c, 1 << 20, &err), 0);
  size_t files = 0, dirs = 0;
  for (size_t i = 0; i < in.count; i++) {
    if (!in.paths[i][0]) continue; /* replaced */
    assert_null(strstr(in.paths[i], "link"));
    assert_null(strstr(in.paths[i], "fifo"));
    if (in.paths[i][strlen(in.paths[i]) - 1] == '/')
      dirs++;
    else
      files++;
  }
  assert_int_equal(dirs, 1);
  assert_int_equal(files, 1); /* the input file replaced the host file of the same path */
  jail_workspace_input_release(&in);
  assert_int_equal(jail_workspace_collect(&in, &c, 4, &err), -EFBIG);

  snprintf(path, sizeof path, "%s/sub/a.txt", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/sub", dir);
  rmdir(path);
  snprintf(path, sizeof path, "%s/link", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/fifo", dir);
  unlink(path);
  rmdir(dir);
}

/* Both ways of finding the cgroup hierarchies (the usual places first, or /proc/self/mountinfo only) agree
 * on this host, paths compared once resolved (a co-mounted cpu,cpuacct is reached through a symlink). */
static void same_path(const char *a, const char *b) {
  char ra[PATH_MAX] = "", rb[PATH_MAX] = "";
  if (a[0] && !realpath(a, ra)) snprintf(ra, sizeof ra, "%s", a);
  if (b[0] && !realpath(b, rb)) snprintf(rb, sizeof rb, "%s", b);
  assert_string_equal(ra, rb);
}

static void cgroup_layout_conventional_matches_mountinfo(void **state) {
  (void)state;
  struct jail_cgroup_layout fast, full;
  jail_cgroup_discover(&fast, true);
  jail_cgroup_discover(&full, false);
  same_path(fast.v2_mount, full.v2_mount);
  same_path(fast.v2_self, full.v2_self);
  assert_int_equal(fast.v2_controllers, full.v2_controllers);
  for (int c = 0; c < JAIL_V1_COUNT; c++) {
    same_path(fast.v1_mount[c], full.v1_mount[c]);
    same_path(fast.v1_self[c], full.v1_self[c]);
  }
  assert_true(fast.v2_mount[0] || fast.v1_mount[JAIL_V1_MEMORY][0]); /* something was found at all */
}

static void landlock_translation(void **state) {
  (void)state;
  assert_int_equal(jail_landlock_access(JAIL_ACCESS_READ, 0), 0);
  uint64_t read = jail_landlock_access(JAIL_ACCESS_READ, 1);
  assert_int_equal(read, DOME_LL_FS_READ_FILE | DOME_LL_FS_READ_DIR);
  assert_int_equal(jail_landlock_access(JAIL_ACCESS_EXEC, 7), DOME_LL_FS_EXECUTE);
  uint64_t write1 = jail_landlock_access(JAIL_ACCESS_WRITE, 1);
  assert_true(write1 & DOME_LL_FS_WRITE_FILE);
  assert_false(write1 & DOME_LL_FS_REFER);    /* ABI 2 */
  assert_false(write1 & DOME_LL_FS_TRUNCATE); /* ABI 3 */
  uint64_t write7 = jail_landlock_access(JAIL_ACCESS_WRITE, 7);
  assert_true(write7 & DOME_LL_FS_TRUNCATE);
  assert_true(write7 & DOME_LL_FS_IOCTL_DEV);
  assert_false(write7 & DOME_LL_FS_EXECUTE);
  assert_int_equal(jail_landlock_handled_fs(7) & ~((1ull << 16) - 1), 0);
  assert_int_equal(jail_baseline_path_rule_count, 3);
  assert_string_equal(jail_baseline_path_rules[0].path, "/");
  assert_false(jail_baseline_path_rules[0].access & JAIL_ACCESS_WRITE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_defaults),
      cmocka_unit_test(bad_config_rejected),
      cmocka_unit_test(unknown_image_and_workspace),
      cmocka_unit_test(workspace_paths),
      cmocka_unit_test(workspace_collect_skips_links),
      cmocka_unit_test(landlock_translation),
      cmocka_unit_test(cgroup_layout_conventional_matches_mountinfo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
