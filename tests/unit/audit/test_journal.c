/* Unit tests of the audit journal library (supervisor/audit/journal.h): Merkle hashing against the
 * RFC 6962 definition, canonical event lines, append validation, many producers, reader filters and
 * follow mode, checkpoints, inclusion proofs, reopen and retention. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

static char *make_directory(void) {
  char *directory = strdup("/tmp/dome-journal-unit-XXXXXX");
  assert_non_null(mkdtemp(directory));
  return directory;
}

static void remove_directory(char *directory) {
  char command[4200];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  assert_int_equal(system(command), 0);
  free(directory);
}

static journal *open_journal(const char *directory, uint64_t segment_bytes, uint64_t frame_bytes) {
  journal_options options;
  journal_options_init(&options, directory);
  if (segment_bytes) options.segment_bytes = segment_bytes;
  if (frame_bytes) options.frame_bytes = frame_bytes;
  journal *j = NULL;
  dome_error err = {0};
  int r = journal_open(&options, &j, &err);
  if (r < 0) fprintf(stderr, "journal_open: %s\n", err.message);
  assert_int_equal(r, 0);
  return j;
}

static uint64_t append(journal *j, const char *json) {
  json_t *event = json_loads(json, 0, NULL);
  assert_non_null(event);
  uint64_t seq = 0;
  dome_error err = {0};
  int r = journal_append_sync(j, event, &seq, &err);
  if (r < 0) fprintf(stderr, "append: %s\n", err.message);
  assert_int_equal(r, 0);
  json_decref(event);
  return seq;
}

static void assert_verifies(const char *directory, uint64_t events) {
  journal_verify_result result;
  dome_error err = {0};
  int r = journal_verify(directory, NULL, &result, &err);
  if (r < 0) fprintf(stderr, "verify: %s\n", err.message);
  assert_int_equal(r, 0);
  if (events) assert_int_equal(result.events, events);
}

/* ---- Merkle tree: RFC 6962 section 2.1 by its recursive definition ---- */
static void reference_mth(uint8_t (*leaves)[32], size_t n, uint8_t out[32]) {
  if (n == 0) {
    crypto_hash_sha256(out, (const uint8_t *)"", 0);
    return;
  }
  if (n == 1) {
    memcpy(out, leaves[0], 32);
    return;
  }
  size_t k = 1;
  while (k * 2 < n) k *= 2;
  uint8_t left[32], right[32];
  reference_mth(leaves, k, left);
  reference_mth(leaves + k, n - k, right);
  journal_merkle_node_hash(left, right, out);
}

static void test_merkle_matches_rfc6962(void **state) {
  (void)state;
  assert_int_equal(sodium_init() < 0, 0);
  uint8_t leaves[70][32], expected[32], got[32];
  char hex[65];
  journal_merkle_leaf_hash("", 0, leaves[0]);
  journal_hex_encode(leaves[0], 32, hex);
  /* The leaf hash of the empty entry, as in Certificate Transparency's test data. */
  assert_string_equal(hex, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
  merkle_frontier f;
  journal_merkle_init(&f);
  journal_merkle_root(&f, got);
  journal_hex_encode(got, 32, hex);
  assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  for (size_t n = 1; n <= 70; n++) {
    char data[16];
    snprintf(data, sizeof data, "leaf %zu", n);
    journal_merkle_leaf_hash(data, strlen(data), leaves[n - 1]);
    journal_merkle_append(&f, leaves[n - 1]);
    reference_mth(leaves, n, expected);
    journal_merkle_root(&f, got);
    assert_memory_equal(got, expected, 32);
    assert_int_equal(f.count, __builtin_popcountll(n));
  }
}

/* ---- appends ---- */
static void test_append_rejects_bad_events(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *j = open_journal(directory, 0, 0);
  static const char *bad[] = {"[1]",
                              "{\"agent\":\"a\"}",
                              "{\"type\":1}",
                              "{\"type\":\"x\",\"seq\":3}",
                              "{\"type\":\"x\",\"time\":\"now\"}",
                              "{\"type\":\"x\",\"a\\\"b\":1}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *event = json_loads(bad[i], JSON_DECODE_ANY, NULL);
    assert_non_null(event);
    dome_error err = {0};
    assert_int_equal(journal_append(j, event, NULL, &err), -EINVAL);
    assert_true(strlen(err.message) > 0);
    json_decref(event);
  }
  json_t *big = json_pack("{s:s, s:o}", "type", "x", "blob", json_string(""));
  char *text = malloc(JOURNAL_MAX_EVENT_BYTES + 1);
  memset(text, 'a', JOURNAL_MAX_EVENT_BYTES);
  text[JOURNAL_MAX_EVENT_BYTES] = '\0';
  json_object_set_new(big, "blob", json_string(text));
  free(text);
  dome_error err = {0};
  assert_int_equal(journal_append(j, big, NULL, &err), -E2BIG);
  json_decref(big);
  assert_int_equal(journal_last_seq(j), 0); /* nothing refused took a seq */
  assert_int_equal(journal_close(j, &err), 0);
  remove_directory(directory);
}

static void test_lines_are_canonical(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *j = open_journal(directory, 0, 0);
  static const char *events[] = {
      "{\"type\":\"a.b\",\"agent\":\"x\"}", /* seq, time after every key but type */
      "{\"zeta\":[1,{\"b\":2,\"a\":1}],\"type\":\"t\",\"alpha\":\"\\u00e9\\n\"}", /* keys on both sides */
      "{\"type\":\"t\",\"sequence\":1,\"status\":\"s\",\"tool\":\"x\",\"ab\":null}",
      "{\"type\":\"t\",\"seq0\":1,\"timeout\":2,\"time_\":3,\"sa\":4}",
      "{\"type\":\"t\",\"zz\":{\"seq\":1,\"time\":2}}", /* nested reserved names are fine */
  };
  size_t n = sizeof events / sizeof events[0];
  for (size_t i = 0; i < n; i++) assert_int_equal(append(j, events[i]), i + 1);
  dome_error err = {0};
  assert_int_equal(journal_close(j, &err), 0);
  journal_reader *reader;
  assert_int_equal(journal_reader_open(directory, &(journal_filter){.type = "t"}, &reader, &err), 0);
  journal_record record;
  size_t seen = 0;
  while (journal_reader_next(reader, true, &record, &err) > 0) {
    char *canonical = json_dumps(record.event, JSON_SORT_KEYS | JSON_COMPACT);
    assert_int_equal(strlen(canonical), record.length);
    assert_memory_equal(canonical, record.line, record.length);
    assert_int_equal(json_integer_value(json_object_get(record.event, "seq")), record.seq);
    assert_non_null(json_string_value(json_object_get(record.event, "time")));
    free(canonical);
    json_decref(record.event);
    seen++;
  }
  journal_reader_close(reader);
  assert_int_equal(seen, n - 1);
  assert_verifies(directory, 0);
  remove_directory(directory);
}

struct producer {
  journal *j;
  int index;
};

static void *produce(void *argument) {
  struct producer *p = argument;
  for (int i = 0; i < 300; i++) {
    json_t *event =
        json_pack("{s:s, s:s, s:i}", "type", "exec.output", "exec_id", p->index % 2 ? "odd" : "even", "i", i);
    uint64_t seq;
    dome_error err;
    assert_int_equal(journal_append_sync(p->j, event, &seq, &err), 0);
    json_decref(event);
  }
  return NULL;
}

static void test_many_producers_gap_free(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *j = open_journal(directory, 8 * 1024, 2 * 1024); /* several segments and frames */
  pthread_t threads[4];
  struct producer producers[4];
  for (int i = 0; i < 4; i++) {
    producers[i] = (struct producer){j, i};
    pthread_create(&threads[i], NULL, produce, &producers[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  dome_error err = {0};
  uint64_t checkpoint;
  assert_int_equal(journal_checkpoint(j, &checkpoint, &err), 0);
  assert_true(checkpoint > 1200);
  assert_int_equal(journal_close(j, &err), 0);
  journal_verify_result result;
  assert_int_equal(journal_verify(directory, NULL, &result, &err), 0);
  assert_true(result.segments >= 2);
  assert_true(result.checkpoints >= 1);
  assert_int_equal(result.signed_tree_size + 1, result.last_seq); /* the close checkpoint covers everything */
  /* Filters: exec id and seq range. */
  journal_reader *reader;
  assert_int_equal(
      journal_reader_open(directory, &(journal_filter){.exec_id = "odd", .from_seq = 100, .to_seq = 700},
                          &reader, &err),
      0);
  journal_record record;
  uint64_t count = 0, previous = 0;
  while (journal_reader_next(reader, false, &record, &err) > 0) {
    assert_true(record.seq >= 100 && record.seq <= 700 && record.seq > previous);
    assert_non_null(strstr(record.line, "\"exec_id\":\"odd\""));
    previous = record.seq;
    count++;
  }
  journal_reader_close(reader);
  assert_true(count > 200 && count < 400);
  /* Seeking (whole frames and segments skipped): the first event returned is exactly the target. */
  for (uint64_t target = 1; target < 1200; target += 97) {
    assert_int_equal(journal_reader_open(directory, &(journal_filter){.from_seq = target}, &reader, &err), 0);
    assert_int_equal(journal_reader_next(reader, false, &record, &err), 1);
    assert_int_equal(record.seq, target);
    int64_t since = record.time_ns;
    journal_reader_close(reader);
    /* By time: the first event at or after `since`, as a full scan finds it. */
    uint64_t expected = 0;
    assert_int_equal(journal_reader_open(directory, NULL, &reader, &err), 0);
    while (!expected && journal_reader_next(reader, false, &record, &err) > 0)
      if (record.time_ns >= since) expected = record.seq;
    journal_reader_close(reader);
    assert_int_equal(journal_reader_open(directory, &(journal_filter){.since_ns = since}, &reader, &err), 0);
    assert_int_equal(journal_reader_next(reader, false, &record, &err), 1);
    assert_int_equal(record.seq, expected);
    journal_reader_close(reader);
  }
  remove_directory(directory);
}

/* Whether event `seq` can be read from the segment files now (as a separate reader sees them). */
static bool readable(const char *directory, uint64_t seq) {
  journal_reader *reader;
  journal_record record;
  dome_error err;
  if (journal_reader_open(directory, &(journal_filter){.from_seq = seq, .to_seq = seq}, &reader, &err) < 0)
    return false;
  bool found = journal_reader_next(reader, false, &record, &err) == 1 && record.seq == seq;
  journal_reader_close(reader);
  return found;
}

struct syncer {
  journal *j;
  const char *directory;
  int index;
  int failures;
};

/* Producers that sync two events in three (the third is left to the writer thread or later groups),
 * one of them also asking for checkpoints; a synced event must already be in the files. */
static void *sync_some(void *argument) {
  struct syncer *s = argument;
  unsigned rng = (unsigned)s->index + 1;
  for (int i = 0; i < 400; i++) {
    json_t *event = json_pack("{s:s, s:i, s:i}", "type", "exec.output", "thread", s->index, "i", i);
    uint64_t seq;
    dome_error err;
    int r = journal_append(s->j, event, &seq, &err);
    json_decref(event);
    if (r < 0) {
      s->failures++;
      continue;
    }
    rng = rng * 1103515245u + 12345u;
    if ((rng >> 16) % 3 == 0) continue;
    if (journal_sync(s->j, seq, &err) < 0 || (i % 40 == 0 && !readable(s->directory, seq))) s->failures++;
    if (s->index == 0 && i % 100 == 0 && journal_checkpoint(s->j, NULL, &err) < 0) s->failures++;
  }
  return NULL;
}

static void test_group_commit_wakes_and_hands_over(void **state) {
  (void)state;
  for (uint64_t window = 0; window <= 1; window++) {
    char *directory = make_directory();
    journal_options options;
    journal_options_init(&options, directory);
    options.group_commit_window_ms = window;
    options.frame_bytes = 4096;
    journal *j = NULL;
    dome_error err = {0};
    assert_int_equal(journal_open(&options, &j, &err), 0);
    pthread_t threads[8];
    struct syncer syncers[8];
    for (int i = 0; i < 8; i++) {
      syncers[i] = (struct syncer){j, directory, i, 0};
      assert_int_equal(pthread_create(&threads[i], NULL, sync_some, &syncers[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
      pthread_join(threads[i], NULL);
      assert_int_equal(syncers[i].failures, 0);
    }
    assert_int_equal(journal_close(j, &err), 0);
    journal_verify_result result;
    assert_int_equal(journal_verify(directory, NULL, &result, &err), 0);
    assert_true(result.events >= 8 * 400);
    remove_directory(directory);
  }
}

/* Bytes of this process's mappings that a fork does not copy (VmFlags `dc`, proc(5) smaps). */
static size_t dont_fork_bytes(void) {
  FILE *smaps = fopen("/proc/self/smaps", "r");
  assert_non_null(smaps);
  char line[512];
  size_t total = 0, size_kib = 0;
  while (fgets(line, sizeof line, smaps)) {
    if (sscanf(line, "Size: %zu kB", &size_kib) == 1) continue;
    if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " dc")) total += size_kib * 1024;
  }
  fclose(smaps);
  return total;
}

/* The compressor's tables are kept out of forked children (supervisor/audit/compressor.c): a process that
 * clones jails from itself (domed) would otherwise take a copy-on-write fault on them at every flush.
 * A child forked meanwhile leaves the writer working. */
static void test_compressor_memory_is_not_forked(void **state) {
  (void)state;
  char *directory = make_directory();
  size_t before = dont_fork_bytes();
  journal *j = open_journal(directory, 0, 0);
  append(j, "{\"type\":\"exec.start\",\"code\":\"print(1)\"}");
  size_t after = dont_fork_bytes();
  assert_true(after >= before + 512 * 1024); /* level 3's match tables: ~0.75 MiB */
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(0);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  append(j, "{\"type\":\"exec.end\",\"exit_code\":0}");
  dome_error err = {0};
  assert_int_equal(journal_close(j, &err), 0);
  assert_verifies(directory, 0); /* both events and the checkpoint of the close */
  remove_directory(directory);
}

/* An event nobody syncs is written by the writer thread within the group-commit window, also when
 * producers keep appending (the writer then runs on its own timer, not on signals). */
static void test_unsynced_events_reach_the_disk(void **state) {
  (void)state;
  char *directory = make_directory();
  journal_options options;
  journal_options_init(&options, directory);
  options.checkpoint_every_ms = 600000; /* no checkpoint round to write them instead */
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  uint64_t seq = 0;
  for (int burst = 0; burst < 3; burst++) {
    for (int i = 0; i < 200; i++) {
      json_t *event = json_pack("{s:s, s:i}", "type", "exec.output", "i", i);
      assert_int_equal(journal_append(j, event, &seq, &err), 0);
      json_decref(event);
    }
    bool seen = false;
    for (int wait = 0; wait < 50 && !seen; wait++) { /* window 2 ms: well within 0.5 s */
      usleep(10000);
      seen = readable(directory, seq);
    }
    assert_true(seen);
  }
  assert_int_equal(journal_close(j, &err), 0);
  remove_directory(directory);
}

/* journal_sync_begin commits at once what the group-commit window would have held back (here a minute),
 * without the caller waiting; journal_sync then returns at once. An event nobody began stays in the
 * window; a seq never assigned or already durable starts nothing. */
static void test_sync_begin_commits_at_once(void **state) {
  (void)state;
  char *directory = make_directory();
  journal_options options;
  journal_options_init(&options, directory);
  options.group_commit_window_ms = 60000;
  options.checkpoint_every_ms = 600000;
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  uint64_t held = 0, begun = 0;
  json_t *event = json_pack("{s:s}", "type", "exec.output");
  assert_int_equal(journal_append(j, event, &held, &err), 0);
  usleep(200000);
  assert_false(readable(directory, held)); /* the window holds it */
  assert_int_equal(journal_append(j, event, &begun, &err), 0);
  journal_sync_begin(j, begun);
  bool seen = false;
  for (int wait = 0; wait < 100 && !seen; wait++) {
    usleep(10000);
    seen = readable(directory, begun);
  }
  assert_true(seen);
  assert_true(readable(directory, held)); /* and everything before it */
  assert_int_equal(journal_sync(j, begun, &err), 0);
  journal_sync_begin(j, begun);      /* durable already: nothing */
  journal_sync_begin(j, begun + 10); /* never assigned: nothing */
  uint64_t later = 0;
  assert_int_equal(journal_append(j, event, &later, &err), 0);
  usleep(200000);
  assert_false(readable(directory, later));
  json_decref(event);
  assert_int_equal(journal_close(j, &err), 0);
  remove_directory(directory);
}

static void test_reopen_continues_and_time_filter(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *j = open_journal(directory, 0, 0);
  append(j, "{\"type\":\"agent.registered\",\"agent\":\"a\"}");
  dome_error err = {0};
  assert_int_equal(journal_close(j, &err), 0);
  usleep(20000);
  int64_t middle = journal_now_ns();
  usleep(20000);
  j = open_journal(directory, 0, 0);
  uint64_t seq = append(j, "{\"type\":\"agent.registered\",\"agent\":\"b\"}");
  assert_int_equal(seq, 3); /* 1: event, 2: close checkpoint */
  assert_int_equal(journal_close(j, &err), 0);
  assert_verifies(directory, 4);
  journal_reader *reader;
  assert_int_equal(
      journal_reader_open(directory, &(journal_filter){.since_ns = middle, .agent = "b"}, &reader, &err), 0);
  journal_record record;
  assert_int_equal(journal_reader_next(reader, true, &record, &err), 1);
  assert_int_equal(record.seq, 3);
  json_decref(record.event);
  assert_int_equal(journal_reader_next(reader, true, &record, &err), 0);
  journal_reader_close(reader);
  remove_directory(directory);
}

static void test_follow_waits_for_new_events(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *j = open_journal(directory, 0, 0);
  append(j, "{\"type\":\"x\"}");
  journal_reader *reader;
  dome_error err = {0};
  assert_int_equal(journal_reader_open(directory, &(journal_filter){.follow = true, .follow_timeout_ms = 100},
                                       &reader, &err),
                   0);
  journal_record record;
  assert_int_equal(journal_reader_next(reader, false, &record, &err), 1);
  assert_int_equal(journal_reader_next(reader, false, &record, &err), -EAGAIN);
  append(j, "{\"type\":\"y\"}");
  int r;
  do r = journal_reader_next(reader, false, &record, &err);
  while (r == -EAGAIN);
  assert_int_equal(r, 1);
  assert_int_equal(record.seq, 2);
  journal_reader_close(reader);
  assert_int_equal(journal_close(j, &err), 0);
  remove_directory(directory);
}

static void test_inclusion_proofs(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *j = open_journal(directory, 0, 0);
  for (int i = 0; i < 36; i++) append(j, "{\"type\":\"exec.start\",\"exec_id\":\"e\"}");
  dome_error err = {0};
  assert_int_equal(journal_close(j, &err), 0); /* checkpoint at seq 37 over 36 events */
  char key[4200];
  snprintf(key, sizeof key, "%s/signing.pub", directory);
  for (uint64_t seq = 1; seq <= 36; seq++) {
    json_t *proof = NULL;
    assert_int_equal(journal_prove(directory, seq, &proof, &err), 0);
    assert_int_equal(journal_proof_check(proof, key, &err), 0);
    /* A proof for another leaf index must fail. */
    json_object_set_new(proof, "leaf_index", json_integer((json_int_t)(seq % 36)));
    assert_int_equal(journal_proof_check(proof, key, &err), -EBADMSG);
    json_decref(proof);
  }
  json_t *proof = NULL;
  assert_int_equal(journal_prove(directory, 37, &proof, &err), -ENOENT);
  remove_directory(directory);
}

static void test_retention_drops_whole_segments(void **state) {
  (void)state;
  char *directory = make_directory();
  journal_options options;
  journal_options_init(&options, directory);
  options.segment_bytes = 4096;
  options.frame_bytes = 2048;
  options.retention_bytes = 12 * 1024;
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  for (int i = 0; i < 1500; i++) {
    json_t *event =
        json_pack("{s:s, s:i, s:s}", "type", "exec.output", "i", i, "text", "some output of the program");
    assert_int_equal(journal_append(j, event, NULL, &err), 0);
    json_decref(event);
  }
  assert_int_equal(journal_close(j, &err), 0);
  journal_verify_result result;
  assert_int_equal(journal_verify(directory, NULL, &result, &err), 0);
  assert_true(result.first_seq > 1);
  journal_reader *reader;
  assert_int_equal(
      journal_reader_open(directory, &(journal_filter){.type = "journal.retention"}, &reader, &err), 0);
  journal_record record;
  assert_int_equal(journal_reader_next(reader, true, &record, &err), 1);
  assert_string_equal(json_string_value(json_object_get(record.event, "reason")), "size");
  json_decref(record.event);
  journal_reader_close(reader);
  remove_directory(directory);
}

static void test_time_format_and_parse(void **state) {
  (void)state;
  char buffer[40];
  int64_t ns;
  dome_error err = {0};
  assert_string_equal(journal_format_time(1764426457123456789, buffer, sizeof buffer),
                      "2025-11-29T14:27:37.123456789Z");
  assert_int_equal(journal_parse_time(buffer, &ns, &err), 0);
  assert_int_equal(ns, 1764426457123456789);
  assert_int_equal(journal_parse_time("2025-11-29T15:27:37.5+01:00", &ns, &err), 0);
  assert_int_equal(ns, 1764426457500000000);
  assert_int_equal(journal_parse_time("2025-11-29", &ns, &err), 0);
  /* Round trips, also through the per-second cache of the formatter. */
  static const int64_t samples[] = {1764426457000000000,
                                    1764426457000000001,
                                    1764426457999999999,
                                    1764426458000000000,
                                    1764426457500000000,
                                    0,
                                    1};
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    journal_format_time(samples[i], buffer, sizeof buffer);
    assert_int_equal(strlen(buffer), 30);
    assert_int_equal(journal_parse_time(buffer, &ns, &err), 0);
    assert_int_equal(ns, samples[i]);
  }
  assert_int_equal(journal_parse_time("yesterday", &ns, &err), -EINVAL);
  assert_non_null(strstr(err.message, "yesterday"));
  /* Bug fixed: a time past int64 nanoseconds overflowed silently, so `--until 2999-01-01` filtered
   * with a garbage bound. It is now refused, naming the text. */
  ns = 42;
  assert_int_equal(journal_parse_time("2999-01-01", &ns, &err), -ERANGE);
  assert_non_null(strstr(err.message, "2999-01-01"));
  assert_int_equal(ns, 42);
  assert_int_equal(journal_parse_time("2262-04-11T23:47:16Z", &ns, &err), 0);
  assert_int_equal(journal_parse_time("2262-04-11T23:47:17Z", &ns, &err), -ERANGE);
}

/* Bug fixed: two writers on one directory interleaved frames and forked the Merkle tree. The second
 * journal_open is now refused with -EBUSY and the first writer goes on undisturbed. */
static void test_second_writer_refused(void **state) {
  (void)state;
  char *directory = make_directory();
  journal *first = open_journal(directory, 0, 0);
  append(first, "{\"type\":\"test.one\"}");
  journal_options options;
  journal_options_init(&options, directory);
  journal *second = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &second, &err), -EBUSY);
  assert_null(second);
  assert_non_null(strstr(err.message, "another writer"));
  assert_int_equal(append(first, "{\"type\":\"test.two\"}"), 2);
  assert_int_equal(journal_close(first, &err), 0);
  /* The lock dies with the writer: reopening works and continues the sequence. */
  journal *again = open_journal(directory, 0, 0);
  /* close wrote a checkpoint event after seq 2, so the next event comes after it */
  assert_true(append(again, "{\"type\":\"test.three\"}") > 3);
  assert_int_equal(journal_close(again, &err), 0);
  assert_verifies(directory, 0);
  remove_directory(directory);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merkle_matches_rfc6962),
      cmocka_unit_test(test_append_rejects_bad_events),
      cmocka_unit_test(test_lines_are_canonical),
      cmocka_unit_test(test_many_producers_gap_free),
      cmocka_unit_test(test_group_commit_wakes_and_hands_over),
      cmocka_unit_test(test_unsynced_events_reach_the_disk),
      cmocka_unit_test(test_sync_begin_commits_at_once),
      cmocka_unit_test(test_reopen_continues_and_time_filter),
      cmocka_unit_test(test_follow_waits_for_new_events),
      cmocka_unit_test(test_inclusion_proofs),
      cmocka_unit_test(test_retention_drops_whole_segments),
      cmocka_unit_test(test_compressor_memory_is_not_forked),
      cmocka_unit_test(test_time_format_and_parse),
      cmocka_unit_test(test_second_writer_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
