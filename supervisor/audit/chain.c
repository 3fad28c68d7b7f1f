/* The chain check of a replica's event lines (journal.h, "Chain check"): the same leaf hashing and
 * checkpoint check as journal_verify, fed one line at a time. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

struct journal_chain {
  journal_key key;
  merkle_frontier tree;
  bool tree_valid; /* the tree holds exactly seqs 1..next-1 */
  uint64_t next;   /* seq expected next; 0 before the first line */
  uint8_t *recent; /* hashes of the lines taken, by seq (duplicate checks) */
  size_t recent_capacity;
  char last_time[40];
  journal_chain_result result;
};

int journal_chain_create(const char *public_key_hex, journal_chain **out, dome_error *err) {
  journal_chain *chain = calloc(1, sizeof *chain);
  if (chain == NULL) return dome_error_set(err, ENOMEM, "chain");
  if (public_key_hex == NULL ||
      journal_hex_decode(public_key_hex, chain->key.public_key, sizeof chain->key.public_key) < 0) {
    free(chain);
    return dome_error_set(err, EINVAL, "public key: expected %zu hex digits",
                          2 * (size_t)crypto_sign_PUBLICKEYBYTES);
  }
  uint8_t digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, chain->key.public_key, sizeof chain->key.public_key);
  journal_hex_encode(digest, 8, chain->key.key_id);
  journal_merkle_init(&chain->tree);
  *out = chain;
  return 0;
}

void journal_chain_free(journal_chain *chain) {
  if (chain == NULL) return;
  free(chain->recent);
  free(chain);
}

void journal_chain_result_get(const journal_chain *chain, journal_chain_result *result) {
  *result = chain->result;
}

static int bad(journal_chain *chain, uint64_t seq, dome_error *err, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(journal_chain *chain, uint64_t seq, dome_error *err, const char *format, ...) {
  char reason[512];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(reason, sizeof reason, format, arguments);
  va_end(arguments);
  if (chain->result.bad_seq == 0) {
    chain->result.bad_seq = seq ? seq : 1;
    snprintf(chain->result.reason, sizeof chain->result.reason, "%s", reason);
  }
  return dome_error_set(err, EBADMSG, "%s", reason);
}

static void note_gap(journal_chain *chain, uint64_t from, uint64_t to) {
  chain->result.gaps++;
  chain->result.missing += to - from + 1;
  size_t used = strlen(chain->result.gap_list);
  size_t room = sizeof chain->result.gap_list - used;
  if (room < 48) {
    if (room > 4 && strcmp(chain->result.gap_list + used - 3, "...") != 0)
      snprintf(chain->result.gap_list + used, room, "...");
    return;
  }
  snprintf(chain->result.gap_list + used, room, "%s%" PRIu64 "-%" PRIu64, used ? ", " : "", from, to);
}

/* The leaf hash of seq, kept for duplicate checks (index seq - first). */
static int remember(journal_chain *chain, uint64_t seq, const uint8_t leaf[JOURNAL_HASH_BYTES]) {
  size_t index = (size_t)(seq - chain->result.first_seq);
  if ((index + 1) * JOURNAL_HASH_BYTES > chain->recent_capacity) {
    size_t capacity = chain->recent_capacity ? chain->recent_capacity * 2 : 1024 * JOURNAL_HASH_BYTES;
    while ((index + 1) * JOURNAL_HASH_BYTES > capacity) capacity *= 2;
    uint8_t *grown = realloc(chain->recent, capacity);
    if (grown == NULL) return -ENOMEM;
    memset(grown + chain->recent_capacity, 0, capacity - chain->recent_capacity);
    chain->recent = grown;
    chain->recent_capacity = capacity;
  }
  memcpy(chain->recent + index * JOURNAL_HASH_BYTES, leaf, JOURNAL_HASH_BYTES);
  return 0;
}

int journal_chain_add(journal_chain *chain, const char *line, size_t length, dome_error *err) {
  line_fields fields;
  if (journal_scan_line(line, length, &fields) < 0 || !fields.has_seq || fields.seq == 0 || !fields.time ||
      fields.time_length >= sizeof chain->last_time)
    return bad(chain, chain->next, err, "a line after seq %" PRIu64 " is not an event (no seq or time)",
               chain->next ? chain->next - 1 : 0);
  uint64_t seq = fields.seq;
  uint8_t leaf[JOURNAL_HASH_BYTES];
  journal_merkle_leaf_hash(line, length, leaf);
  if (chain->next == 0) {
    chain->result.first_seq = seq;
    chain->next = seq;
    chain->tree_valid = seq == 1;
  }
  if (seq < chain->next) {
    if (seq < chain->result.first_seq ||
        memcmp(chain->recent + (seq - chain->result.first_seq) * JOURNAL_HASH_BYTES, leaf,
               JOURNAL_HASH_BYTES))
      return bad(chain, seq, err, "seq %" PRIu64 ": seen twice with different text", seq);
    chain->result.duplicates++;
    return 0;
  }
  if (seq > chain->next) {
    note_gap(chain, chain->next, seq - 1);
    chain->tree_valid = false;
    for (uint64_t missing = chain->next; missing < seq && missing - chain->result.first_seq < (1u << 24);
         missing++)
      remember(chain, missing, (const uint8_t[JOURNAL_HASH_BYTES]){0});
  }
  if (remember(chain, seq, leaf) < 0) return dome_error_set(err, ENOMEM, "chain: seq %" PRIu64, seq);
  chain->next = seq + 1;
  chain->result.events++;
  chain->result.last_seq = seq;
  int rc = 0;
  if (fields.time_length < strlen(chain->last_time) ||
      (fields.time_length == strlen(chain->last_time) &&
       memcmp(fields.time, chain->last_time, fields.time_length) < 0))
    rc = bad(chain, seq, err, "seq %" PRIu64 ": time goes back", seq);
  memcpy(chain->last_time, fields.time, fields.time_length);
  chain->last_time[fields.time_length] = '\0';
  if (fields.type && fields.type_length == 18 && memcmp(fields.type, "journal.checkpoint", 18) == 0) {
    if (!chain->tree_valid) {
      chain->result.unverifiable++;
    } else {
      json_error_t jerr;
      json_t *event = json_loadb(line, length, 0, &jerr);
      uint8_t root[JOURNAL_HASH_BYTES];
      journal_merkle_root(&chain->tree, root);
      dome_error why = {0};
      int checked = event ? journal_checkpoint_check(event, root, &chain->key, &why)
                          : dome_error_set(&why, 0, "invalid JSON: %s", jerr.text);
      json_decref(event);
      if (checked < 0) {
        rc = bad(chain, seq, err,
                 "seq %" PRIu64 ": %s (an event in seq %" PRIu64 "..%" PRIu64
                 " or the checkpoint was altered)",
                 seq, why.message, chain->result.signed_tree_size + 1, seq);
      } else if (chain->result.bad_seq == 0) {
        chain->result.checkpoints++;
        chain->result.signed_tree_size = seq - 1;
      }
    }
  }
  if (chain->tree_valid) journal_merkle_append(&chain->tree, leaf);
  return rc;
}
