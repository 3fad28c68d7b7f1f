/* Unit tests of supervisor/session/session.h: the paths of the file tools (refusals name the path), files
 * written, read, listed and deleted beneath a workspace fd without following a symlink or opening a
 * special file, file-only snapshots written and restored, the session table's quota per agent, ownership,
 * expiry and lost sessions, and the connection file of a session's kernel. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/session/session.h"

static char directory[64];
static int workspace = -1;

static int setup(void **state) {
  (void)state;
  snprintf(directory, sizeof directory, "/tmp/dome-session-test-XXXXXX");
  if (mkdtemp(directory) == NULL) return -1;
  workspace = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return workspace >= 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  close(workspace);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  return system(command) == 0 ? 0 : -1;
}

static void test_paths(void **state) {
  (void)state;
  dome_error err = {0};
  assert_int_equal(session_path_check("a.csv", &err), 0);
  assert_int_equal(session_path_check("data/sub/a.csv", &err), 0);
  assert_int_equal(session_path_check("dir/", &err), 0);
  static const char *const refused[] = {"",     "/etc/passwd", "..",  "../x", "a/../b",
                                        "a//b", "./a",         "a/.", "\xff"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    memset(&err, 0, sizeof err);
    assert_int_equal(session_path_check(refused[i], &err), -EINVAL);
    if (refused[i][0] && refused[i][0] != '\xff') assert_non_null(strstr(err.message, refused[i]));
  }
  char deep[200] = "";
  for (int i = 0; i < 33; i++) strcat(deep, "d/");
  strcat(deep, "f");
  assert_int_equal(session_path_check(deep, &err), -EINVAL);
  assert_non_null(strstr(err.message, "32 components"));
}

static void test_write_read_list_delete(void **state) {
  (void)state;
  dome_error err = {0};
  assert_int_equal(session_file_write(workspace, "data/values.csv", "a,b\n1,2\n", 8, &err), 0);
  assert_int_equal(session_file_write(workspace, "data/values.csv", "a\n", 2, &err), 0); /* replaced */
  char *data = NULL;
  size_t length = 0;
  assert_int_equal(session_file_read(workspace, "data/values.csv", 1024, &data, &length, &err), 0);
  assert_int_equal(length, 2);
  assert_string_equal(data, "a\n");
  free(data);
  assert_int_equal(session_file_read(workspace, "data/values.csv", 1, &data, &length, &err), -EFBIG);
  assert_null(data);
  assert_int_equal(session_file_read(workspace, "data/missing", 1024, &data, &length, &err), -ENOENT);
  assert_non_null(strstr(err.message, "data/missing"));
  assert_int_equal(session_file_read(workspace, "data", 1024, &data, &length, &err), -EISDIR);

  assert_int_equal(session_file_write(workspace, "b.txt", "", 0, &err), 0);
  bool truncated = true;
  json_t *list = session_file_list(workspace, NULL, &truncated, &err);
  assert_non_null(list);
  assert_false(truncated);
  assert_int_equal(json_array_size(list), 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "path")), "b.txt");
  assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "path")), "data");
  assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "type")), "directory");
  assert_string_equal(json_string_value(json_object_get(json_array_get(list, 2), "path")), "data/values.csv");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 2), "size")), 2);
  json_decref(list);
  list = session_file_list(workspace, "data", &truncated, &err);
  assert_int_equal(json_array_size(list), 1);
  json_decref(list);

  assert_int_equal(session_file_delete(workspace, "data", &err), -ENOTEMPTY);
  assert_int_equal(session_file_delete(workspace, "data/values.csv", &err), 0);
  assert_int_equal(session_file_delete(workspace, "data", &err), 0);
  assert_int_equal(session_file_delete(workspace, "data", &err), -ENOENT);
}

/* a symlink planted in the workspace never leads out, a FIFO is never opened */
static void test_links_and_special_files(void **state) {
  (void)state;
  dome_error err = {0};
  char outside[128], path[192];
  snprintf(outside, sizeof outside, "%s-outside", directory);
  assert_int_equal(mkdir(outside, 0700), 0);
  snprintf(path, sizeof path, "%s/out", directory);
  assert_int_equal(symlink(outside, path), 0);
  snprintf(path, sizeof path, "%s/passwd", directory);
  assert_int_equal(symlink("/etc/passwd", path), 0);
  snprintf(path, sizeof path, "%s/pipe", directory);
  assert_int_equal(mkfifo(path, 0600), 0);

  assert_int_equal(session_file_write(workspace, "out/planted", "x", 1, &err), -ELOOP);
  assert_non_null(strstr(err.message, "out/planted"));
  char check[192];
  snprintf(check, sizeof check, "%s/planted", outside);
  assert_int_equal(access(check, F_OK), -1); /* nothing written outside */
  char *data = NULL;
  size_t length = 0;
  assert_int_equal(session_file_read(workspace, "passwd", 1 << 20, &data, &length, &err), -ELOOP);
  assert_non_null(strstr(err.message, "symlink"));
  assert_int_equal(session_file_write(workspace, "passwd", "x", 1, &err), -ELOOP);
  assert_int_equal(session_file_read(workspace, "out/x", 1 << 20, &data, &length, &err), -ELOOP);
  assert_int_equal(session_file_read(workspace, "pipe", 1 << 20, &data, &length, &err), -EPERM);
  assert_non_null(strstr(err.message, "special file"));
  assert_int_equal(session_file_write(workspace, "pipe", "x", 1, &err), -EEXIST);
  bool truncated = false;
  json_t *list = session_file_list(workspace, NULL, &truncated, &err);
  size_t i;
  json_t *entry;
  json_array_foreach(list, i, entry) {
    const char *p = json_string_value(json_object_get(entry, "path"));
    assert_null(strstr(p, "planted"));
    if (strcmp(p, "out") == 0)
      assert_string_equal(json_string_value(json_object_get(entry, "type")), "symlink");
  }
  json_decref(list);
  assert_int_equal(session_file_delete(workspace, "passwd", &err), 0); /* the link, not /etc/passwd */
  assert_int_equal(access("/etc/passwd", F_OK), 0);
  assert_int_equal(session_file_delete(workspace, "out", &err), 0);
  assert_int_equal(session_file_delete(workspace, "pipe", &err), 0);
  assert_int_equal(rmdir(outside), 0);
}

/* a snapshot keeps files and directories, leaves symlinks out, restores into another workspace, and
 * refuses a workspace over its bound (writing nothing) */
static void test_snapshot(void **state) {
  (void)state;
  dome_error err = {0};
  assert_int_equal(session_file_write(workspace, "data/values.csv", "a,b\n1,2\n", 8, &err), 0);
  assert_int_equal(session_file_write(workspace, "empty/.keep", "", 0, &err), 0);
  assert_int_equal(session_file_delete(workspace, "empty/.keep", &err), 0);
  char path[192];
  snprintf(path, sizeof path, "%s/link", directory);
  assert_int_equal(symlink("/etc/passwd", path), 0);
  char archive_path[160];
  snprintf(archive_path, sizeof archive_path, "%s-snapshot.zst", directory);
  json_t *header = json_pack("{s:s}", "agent", "alice"), *summary = NULL;
  assert_int_equal(session_snapshot_write(workspace, archive_path, 4, header, &summary, &err), -EFBIG);
  assert_int_equal(access(archive_path, F_OK), -1);
  assert_int_equal(session_snapshot_write(workspace, archive_path, 1 << 20, header, &summary, &err), 0);
  assert_int_equal(json_integer_value(json_object_get(summary, "files")), 1);
  assert_int_equal(json_integer_value(json_object_get(summary, "directories")), 2);
  assert_int_equal(json_integer_value(json_object_get(summary, "bytes")), 8);
  json_decref(summary);
  json_decref(header);
  json_t *archive = session_snapshot_read(archive_path, 1 << 20, &err);
  assert_non_null(archive);
  assert_string_equal(json_string_value(json_object_get(json_object_get(archive, "header"), "agent")),
                      "alice");
  char other[64];
  snprintf(other, sizeof other, "/tmp/dome-session-fork-XXXXXX");
  assert_non_null(mkdtemp(other));
  int fork_fd = open(other, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_int_equal(session_snapshot_restore(archive, fork_fd, &err), 0);
  json_decref(archive);
  char *data = NULL;
  size_t length = 0;
  assert_int_equal(session_file_read(fork_fd, "data/values.csv", 1024, &data, &length, &err), 0);
  assert_string_equal(data, "a,b\n1,2\n");
  free(data);
  struct stat st;
  assert_int_equal(fstatat(fork_fd, "empty", &st, 0), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(fstatat(fork_fd, "link", &st, AT_SYMLINK_NOFOLLOW), -1); /* not carried */
  close(fork_fd);
  /* not a snapshot */
  assert_int_equal(session_file_write(workspace, "junk", "junk", 4, &err), 0);
  snprintf(path, sizeof path, "%s/junk", directory);
  assert_null(session_snapshot_read(path, 1 << 20, &err));
  char command[256];
  snprintf(command, sizeof command, "rm -rf '%s' '%s'", other, archive_path);
  assert_int_equal(system(command), 0);
}

static struct session_entry *entry_of(const char *agent) {
  struct session_entry *e = calloc(1, sizeof *e);
  session_new_id(e->id);
  snprintf(e->agent, sizeof e->agent, "%s", agent);
  snprintf(e->capability, sizeof e->capability, "code-execution");
  e->created_mono_ms = e->last_used_ms = 1000;
  e->idle_ms = 100;
  e->lifetime_ms = 10000;
  return e;
}

static void test_table(void **state) {
  (void)state;
  struct session_table table;
  session_table_init(&table);
  dome_error err = {0};
  struct session_entry *a = entry_of("alice"), *b = entry_of("alice"), *c = entry_of("alice"),
                       *d = entry_of("bob");
  assert_int_equal(strlen(a->id), SESSION_ID_SIZE - 1);
  assert_memory_equal(a->id, "ses_", 4);
  assert_string_not_equal(a->id, b->id);
  assert_int_equal(session_table_add(&table, a, 2, &err), 0);
  assert_int_equal(session_table_add(&table, b, 2, &err), 0);
  assert_int_equal(session_table_add(&table, c, 2, &err), -EDQUOT);
  assert_non_null(strstr(err.message, "2 of 2 sessions"));
  assert_int_equal(session_table_add(&table, d, 2, &err), 0); /* per agent */
  assert_null(session_table_get(&table, a->id, "bob"));       /* another agent's is not found */
  struct session_entry *got = session_table_get(&table, a->id, "alice");
  assert_ptr_equal(got, a);
  json_t *list = session_table_list(&table, "alice", session_monotonic_ms());
  assert_int_equal(json_array_size(list), 2);
  json_decref(list);
  /* busy sessions do not idle-expire; the others do, and lifetime ends even a busy one */
  const char *reason = NULL;
  d->last_used_ms = 1000;
  b->last_used_ms = 1000;
  a->last_used_ms = 1000;
  struct session_entry *expired = session_table_take_expired(&table, 1200, &reason);
  assert_non_null(expired);
  assert_ptr_not_equal(expired, a);
  assert_string_equal(reason, "idle");
  struct session_entry *second = session_table_take_expired(&table, 1200, &reason);
  assert_non_null(second);
  assert_ptr_not_equal(second, a);
  assert_null(session_table_take_expired(&table, 1200, &reason));
  assert_ptr_equal(session_table_take_expired(&table, 11001, &reason), a);
  assert_string_equal(reason, "lifetime");
  session_table_put(&table, a);
  /* domed's own hold (a rules change) keeps a session busy without making it look used; a detail is listed */
  c->last_used_ms = 700;
  c->detail = json_pack("{s:{s:i}}", "cgroup", "pids", 40);
  assert_int_equal(session_table_add(&table, c, 2, &err), 0);
  struct session_entry *held = session_table_hold(&table, c->id);
  assert_ptr_equal(held, c);
  assert_int_equal(c->last_used_ms, 700);
  assert_null(session_table_take_expired(&table, 900, &reason)); /* busy: not idle */
  list = session_table_list(&table, "alice", 900);
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(json_array_get(list, 0), "cgroup"), "pids")), 40);
  json_decref(list);
  session_table_unhold(&table, c);
  assert_int_equal(c->last_used_ms, 700);
  assert_ptr_equal(session_table_take_expired(&table, 900, &reason), c); /* idle since 700 */
  assert_string_equal(reason, "idle");
  assert_null(session_table_hold(&table, c->id)); /* taken: no longer held */
  json_decref(c->detail);
  c->detail = NULL;
  c->closing = false;
  /* a lost one is reaped at once */
  c->last_used_ms = 5000;
  assert_int_equal(session_table_add(&table, c, 2, &err), 0);
  c->lost = true;
  assert_ptr_equal(session_table_take_expired(&table, 1000, &reason), c);
  assert_string_equal(reason, "lost");
  assert_null(session_table_take(&table, c->id, NULL));
  free(a);
  free(b);
  free(c);
  free(d);
  session_table_destroy(&table);
}

static void test_connection_file(void **state) {
  (void)state;
  char key[65], other[65];
  char *text = session_connection_file(key);
  char *again = session_connection_file(other);
  json_t *file = json_loads(text, 0, NULL);
  assert_non_null(file);
  assert_string_equal(json_string_value(json_object_get(file, "transport")), "ipc");
  assert_string_equal(json_string_value(json_object_get(file, "ip")), SESSION_SOCKET_DIR "/kernel");
  assert_string_equal(json_string_value(json_object_get(file, "signature_scheme")), "hmac-sha256");
  assert_string_equal(json_string_value(json_object_get(file, "key")), key);
  assert_int_equal(strlen(key), 64);
  assert_string_not_equal(key, other);
  json_decref(file);
  free(text);
  free(again);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paths),
      cmocka_unit_test_setup_teardown(test_write_read_list_delete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_links_and_special_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_connection_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
