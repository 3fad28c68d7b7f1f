/* Unit tests of the blob store (supervisor/blob/blob.h): the layout replay reads, the quota per owner and
 * in total (a refusal writes nothing), shared content counted once in total and once per owner, the use
 * counted again after a reopen, pruning by mtime with the owners' links, bad owners and digests, and the
 * all-or-nothing file write both halves of the store use. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/blob/blob.h"
#include "supervisor/blob/blob_internal.h"

static void hex_of(const char *data, size_t length, char hex[65]) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)data, length);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
}

static char *temp_journal(void) {
  char *dir = strdup("/tmp/dome-blob-test-XXXXXX");
  assert_non_null(mkdtemp(dir));
  return dir;
}

static void remove_tree(const char *dir) {
  char command[512];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  assert_int_equal(system(command), 0);
}

static bool exists(const char *journal, const char *relative) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", journal, relative);
  struct stat st;
  return stat(path, &st) == 0;
}

static void quotas_per_owner_and_in_total(void **state) {
  (void)state;
  char *journal = temp_journal();
  blob_store *store = NULL;
  dome_error err = {0};
  assert_int_equal(blob_store_open(journal, 3000, &store, &err), 0);
  char a[1000], b[1500], c[1200], hex_a[65], hex_b[65], hex_c[65];
  memset(a, 'a', sizeof a);
  memset(b, 'b', sizeof b);
  memset(c, 'c', sizeof c);
  hex_of(a, sizeof a, hex_a);
  hex_of(b, sizeof b, hex_b);
  hex_of(c, sizeof c, hex_c);

  assert_int_equal(blob_store_put(store, "code-execution", 2000, a, sizeof a, hex_a, &err), 1);
  char relative[200];
  snprintf(relative, sizeof relative, "blobs/sha256/%.2s/%s", hex_a, hex_a);
  assert_true(exists(journal, relative));
  snprintf(relative, sizeof relative, "blobs/owners/code-execution/%s", hex_a);
  assert_true(exists(journal, relative));
  /* the owner's quota: 1000 + 1500 > 2000 */
  assert_int_equal(blob_store_put(store, "code-execution", 2000, b, sizeof b, hex_b, &err), 0);
  assert_non_null(strstr(err.message, "code-execution"));
  snprintf(relative, sizeof relative, "blobs/sha256/%.2s/%s", hex_b, hex_b);
  assert_false(exists(journal, relative));
  /* another owner stores it; then the shared content costs the first owner, not the total */
  assert_int_equal(blob_store_put(store, "analytics", 0, b, sizeof b, hex_b, &err), 1);
  assert_int_equal(blob_store_put(store, "analytics", 0, a, sizeof a, hex_a, &err), 1);
  struct blob_store_usage usage;
  blob_store_usage(store, &usage);
  assert_int_equal(usage.bytes, 2500);
  assert_int_equal(usage.blobs, 2);
  assert_int_equal(usage.refused, 1);
  assert_int_equal(blob_store_owner_bytes(store, "analytics"), 2500);
  assert_int_equal(blob_store_owner_bytes(store, "code-execution"), 1000);
  /* the total quota: 2500 + 1200 > 3000 */
  assert_int_equal(blob_store_put(store, "analytics", 0, c, sizeof c, hex_c, &err), 0);
  assert_non_null(strstr(err.message, "blob_quota"));
  /* again: already held, kept */
  assert_int_equal(blob_store_put(store, "code-execution", 2000, a, sizeof a, hex_a, &err), 1);
  blob_store_close(store);

  /* the use is counted from the files after a reopen */
  assert_int_equal(blob_store_open(journal, 3000, &store, &err), 0);
  blob_store_usage(store, &usage);
  assert_int_equal(usage.bytes, 2500);
  assert_int_equal(usage.blobs, 2);
  assert_int_equal(blob_store_owner_bytes(store, "code-execution"), 1000);
  assert_int_equal(blob_store_owner_bytes(store, "analytics"), 2500);
  json_t *owners = blob_store_owners(store);
  assert_int_equal(json_object_size(owners), 2);
  json_decref(owners);
  blob_store_close(store);
  remove_tree(journal);
  free(journal);
}

static void prune_by_mtime(void **state) {
  (void)state;
  char *journal = temp_journal();
  blob_store *store = NULL;
  dome_error err = {0};
  assert_int_equal(blob_store_open(journal, 0, &store, &err), 0);
  const char *old = "old content", *fresh = "fresh content";
  char hex_old[65], hex_fresh[65];
  hex_of(old, strlen(old), hex_old);
  hex_of(fresh, strlen(fresh), hex_fresh);
  assert_int_equal(blob_store_put(store, "code-execution", 0, old, strlen(old), hex_old, &err), 1);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t between = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + 1;
  struct timespec pause = {0, 20000000};
  nanosleep(&pause, NULL);
  assert_int_equal(blob_store_put(store, "code-execution", 0, fresh, strlen(fresh), hex_fresh, &err), 1);
  assert_int_equal(blob_store_prune(store, between, &err), 1);
  char relative[200];
  snprintf(relative, sizeof relative, "blobs/sha256/%.2s/%s", hex_old, hex_old);
  assert_false(exists(journal, relative));
  snprintf(relative, sizeof relative, "blobs/owners/code-execution/%s", hex_old);
  assert_false(exists(journal, relative));
  snprintf(relative, sizeof relative, "blobs/sha256/%.2s/%s", hex_fresh, hex_fresh);
  assert_true(exists(journal, relative));
  struct blob_store_usage usage;
  blob_store_usage(store, &usage);
  assert_int_equal(usage.bytes, strlen(fresh));
  assert_int_equal(usage.pruned, 1);
  assert_int_equal(blob_store_owner_bytes(store, "code-execution"), strlen(fresh));
  blob_store_close(store);
  remove_tree(journal);
  free(journal);
}

/* Releasing a blob removes the owner's link, and the content only when no other owner links it. */
static void release_keeps_what_others_hold(void **state) {
  (void)state;
  char *journal = temp_journal();
  blob_store *store = NULL;
  dome_error err = {0};
  assert_int_equal(blob_store_open(journal, 0, &store, &err), 0);
  const char *shared = "held by two owners", *alone = "held by one";
  char hex_shared[65], hex_alone[65], relative[200];
  hex_of(shared, strlen(shared), hex_shared);
  hex_of(alone, strlen(alone), hex_alone);
  assert_int_equal(blob_store_put(store, "-tasks", 0, shared, strlen(shared), hex_shared, &err), 1);
  assert_int_equal(blob_store_put(store, "code-execution", 0, shared, strlen(shared), hex_shared, &err), 1);
  assert_int_equal(blob_store_put(store, "-tasks", 0, alone, strlen(alone), hex_alone, &err), 1);

  assert_int_equal(blob_store_release(store, "-tasks", hex_shared, &err), 0); /* the other owner keeps it */
  snprintf(relative, sizeof relative, "blobs/sha256/%.2s/%s", hex_shared, hex_shared);
  assert_true(exists(journal, relative));
  snprintf(relative, sizeof relative, "blobs/owners/-tasks/%s", hex_shared);
  assert_false(exists(journal, relative));
  assert_int_equal(blob_store_release(store, "-tasks", hex_alone, &err), 1);
  snprintf(relative, sizeof relative, "blobs/sha256/%.2s/%s", hex_alone, hex_alone);
  assert_false(exists(journal, relative));
  assert_int_equal(blob_store_release(store, "-tasks", hex_alone, &err), 0); /* no longer held: no-op */
  assert_int_equal(blob_store_release(store, "../x", hex_alone, &err), -EINVAL);
  assert_int_equal(blob_store_release(store, "-tasks", "zz", &err), -EINVAL);

  struct blob_store_usage usage;
  blob_store_usage(store, &usage);
  assert_int_equal(usage.bytes, strlen(shared));
  assert_int_equal(usage.blobs, 1);
  assert_int_equal(blob_store_owner_bytes(store, "-tasks"), 0);
  assert_int_equal(blob_store_owner_bytes(store, "code-execution"), strlen(shared));
  blob_store_close(store);
  remove_tree(journal);
  free(journal);
}

static void bad_owner_and_digest(void **state) {
  (void)state;
  char *journal = temp_journal();
  blob_store *store = NULL;
  dome_error err = {0};
  assert_int_equal(blob_store_open(journal, 0, &store, &err), 0);
  char hex[65];
  hex_of("x", 1, hex);
  assert_int_equal(blob_store_put(store, "../escape", 0, "x", 1, hex, &err), -EINVAL);
  assert_int_equal(blob_store_put(store, "", 0, "x", 1, hex, &err), -EINVAL);
  assert_int_equal(blob_store_put(store, ".hidden", 0, "x", 1, hex, &err), -EINVAL);
  assert_int_equal(blob_store_put(store, "ok", 0, "x", 1, "not-hex", &err), -EINVAL);
  assert_false(exists(journal, "blobs"));
  blob_store_close(store);
  remove_tree(journal);
  free(journal);
}

/* A content file appears whole (read back equal, mode 0600) or, when the write fails, not at all and with
 * no temporary file beside it; blob_content_put of the same bytes finds the same digest. */
static void file_write_whole_or_nothing(void **state) {
  (void)state;
  char *journal = temp_journal();
  dome_error err = {0};
  char path[512];
  snprintf(path, sizeof path, "%s/whole", journal);
  assert_int_equal(blob_file_write(path, "abc", 3, &err), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 3);
  assert_int_equal(st.st_mode & 0777, 0600);
  snprintf(path, sizeof path, "%s/missing/whole", journal);
  assert_int_equal(blob_file_write(path, "abc", 3, &err), -ENOENT);
  assert_non_null(strstr(err.message, "missing/whole.tmp-"));
  assert_false(exists(journal, "missing"));
  char hex[65], expected[65];
  assert_int_equal(blob_content_put(journal, "abc", 3, hex, &err), 0);
  hex_of("abc", 3, expected);
  assert_string_equal(hex, expected);
  assert_true(blob_hex_valid(hex));
  assert_false(blob_hex_valid("ABC"));
  char *data = NULL;
  size_t length = 0;
  assert_int_equal(blob_content_get(journal, hex, &data, &length, &err), 0);
  assert_int_equal(length, 3);
  assert_memory_equal(data, "abc", 3);
  free(data);
  remove_tree(journal);
  free(journal);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quotas_per_owner_and_in_total),  cmocka_unit_test(prune_by_mtime),
      cmocka_unit_test(release_keeps_what_others_hold), cmocka_unit_test(bad_owner_and_digest),
      cmocka_unit_test(file_write_whole_or_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
