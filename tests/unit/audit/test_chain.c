/* Unit tests of the chain check of a replica (journal_chain, supervisor/audit/journal.h): the lines of a
 * real journal pass in order; a repeated identical line is a duplicate; an altered line fails at the next
 * checkpoint; a left-out line is a gap; a repeated seq with other text and another key are found. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/audit/journal.h"

#define EVENTS 40

struct lines {
  char *text[EVENTS * 2];
  size_t count;
  char key[80];
  char directory[64];
};

/* A journal of EVENTS events with a checkpoint after every 10 (and one at close), read back as lines. */
static int setup(void **state) {
  struct lines *lines = calloc(1, sizeof *lines);
  snprintf(lines->directory, sizeof lines->directory, "/tmp/dome-chain-unit-XXXXXX");
  assert_non_null(mkdtemp(lines->directory));
  journal_options options;
  journal_options_init(&options, lines->directory);
  options.checkpoint_every_events = 10;
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  for (int i = 0; i < EVENTS; i++) {
    json_t *event = json_pack("{s:s,s:s,s:i}", "type", "exec.end", "agent", "a", "n", i);
    assert_int_equal(journal_append_sync(j, event, NULL, &err), 0);
    json_decref(event);
  }
  assert_int_equal(journal_close(j, &err), 0);
  journal_reader *reader = NULL;
  assert_int_equal(journal_reader_open(lines->directory, NULL, &reader, &err), 0);
  journal_record record;
  while (journal_reader_next(reader, false, &record, &err) == 1 && lines->count < EVENTS * 2)
    lines->text[lines->count++] = strndup(record.line, record.length);
  journal_reader_close(reader);
  char path[128];
  snprintf(path, sizeof path, "%s/signing.pub", lines->directory);
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  assert_non_null(fgets(lines->key, sizeof lines->key, file));
  fclose(file);
  lines->key[strcspn(lines->key, "\n")] = '\0';
  *state = lines;
  return 0;
}

static int teardown(void **state) {
  struct lines *lines = *state;
  for (size_t i = 0; i < lines->count; i++) free(lines->text[i]);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", lines->directory);
  assert_int_equal(system(command), 0);
  free(lines);
  return 0;
}

static journal_chain *chain_of(const struct lines *lines) {
  journal_chain *chain = NULL;
  dome_error err = {0};
  assert_int_equal(journal_chain_create(lines->key, &chain, &err), 0);
  return chain;
}

static void add(journal_chain *chain, const char *line, int expected) {
  dome_error err = {0};
  assert_int_equal(journal_chain_add(chain, line, strlen(line), &err), expected);
}

static void test_intact_chain_passes(void **state) {
  struct lines *lines = *state;
  journal_chain *chain = chain_of(lines);
  for (size_t i = 0; i < lines->count; i++) add(chain, lines->text[i], 0);
  journal_chain_result result;
  journal_chain_result_get(chain, &result);
  assert_int_equal(result.bad_seq, 0);
  assert_int_equal(result.events, lines->count);
  assert_int_equal(result.first_seq, 1);
  assert_int_equal(result.gaps, 0);
  assert_true(result.checkpoints >= 4);
  assert_int_equal(result.signed_tree_size, lines->count - 1); /* the close checkpoint is the last line */
  journal_chain_free(chain);
}

static void test_identical_repeat_is_a_duplicate(void **state) {
  struct lines *lines = *state;
  journal_chain *chain = chain_of(lines);
  for (size_t i = 0; i < lines->count; i++) {
    add(chain, lines->text[i], 0);
    if (i == 5) add(chain, lines->text[3], 0);
  }
  journal_chain_result result;
  journal_chain_result_get(chain, &result);
  assert_int_equal(result.bad_seq, 0);
  assert_int_equal(result.duplicates, 1);
  assert_int_equal(result.events, lines->count);
  journal_chain_free(chain);
}

static void test_altered_line_fails_at_the_next_checkpoint(void **state) {
  struct lines *lines = *state;
  journal_chain *chain = chain_of(lines);
  char *altered = strdup(lines->text[2]); /* seq 3 */
  char *n = strstr(altered, "\"n\":2");
  assert_non_null(n);
  n[4] = '7';
  bool failed = false;
  for (size_t i = 0; i < lines->count; i++) {
    dome_error err = {0};
    const char *line = i == 2 ? altered : lines->text[i];
    if (journal_chain_add(chain, line, strlen(line), &err) < 0) failed = true;
  }
  journal_chain_result result;
  journal_chain_result_get(chain, &result);
  assert_true(failed);
  assert_int_equal(result.bad_seq, 11); /* the first checkpoint (after 10 events) */
  assert_non_null(strstr(result.reason, "Merkle root"));
  free(altered);
  journal_chain_free(chain);
}

static void test_missing_line_is_a_gap(void **state) {
  struct lines *lines = *state;
  journal_chain *chain = chain_of(lines);
  for (size_t i = 0; i < lines->count; i++)
    if (i != 14 && i != 15) add(chain, lines->text[i], 0);
  journal_chain_result result;
  journal_chain_result_get(chain, &result);
  assert_int_equal(result.gaps, 1);
  assert_int_equal(result.missing, 2);
  assert_string_equal(result.gap_list, "15-16");
  assert_int_equal(result.bad_seq, 0);
  assert_true(result.unverifiable >= 1); /* checkpoints after the gap cannot be checked */
  journal_chain_free(chain);
}

static void test_repeat_with_other_text_and_wrong_key(void **state) {
  struct lines *lines = *state;
  journal_chain *chain = chain_of(lines);
  for (size_t i = 0; i < 6; i++) add(chain, lines->text[i], 0);
  char *other = strdup(lines->text[4]);
  char *n = strstr(other, "\"n\":4");
  assert_non_null(n);
  n[4] = '9';
  dome_error err = {0};
  assert_int_equal(journal_chain_add(chain, other, strlen(other), &err), -EBADMSG);
  assert_non_null(strstr(err.message, "seen twice with different text"));
  free(other);
  journal_chain_free(chain);
  /* another node's key: the first checkpoint's signature does not verify */
  char key[80];
  snprintf(key, sizeof key, "%s", lines->key);
  key[0] = key[0] == '0' ? '1' : '0';
  journal_chain *wrong = NULL;
  assert_int_equal(journal_chain_create(key, &wrong, &err), 0);
  int failures = 0;
  for (size_t i = 0; i < lines->count; i++)
    failures += journal_chain_add(wrong, lines->text[i], strlen(lines->text[i]), &err) < 0;
  assert_true(failures >= 1);
  journal_chain_free(wrong);
  assert_int_equal(journal_chain_create("not-a-key", &wrong, &err), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_intact_chain_passes),
      cmocka_unit_test(test_identical_repeat_is_a_duplicate),
      cmocka_unit_test(test_altered_line_fails_at_the_next_checkpoint),
      cmocka_unit_test(test_missing_line_is_a_gap),
      cmocka_unit_test(test_repeat_with_other_text_and_wrong_key),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
