/* Inclusion proofs (RFC 9162 section 2.1.3): the audit path of one event against the latest signed
 * checkpoint, computed in one streaming pass over the journal (bounded memory: one frontier per
 * subtree of the path), and the checking procedure of section 2.1.3.2. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"
#include "supervisor/common/cleanup.h"

typedef struct range {
  uint64_t begin, end; /* leaf indices [begin, end) */
  merkle_frontier tree;
} range;

static json_t *read_head(const char *directory, dome_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoint.json", directory);
  json_error_t jerr;
  json_t *head = json_load_file(path, 0, &jerr);
  if (!head) dome_error_set(err, ENOENT, "no signed checkpoint `%s`: %s", path, jerr.text);
  return head;
}

int journal_prove(const char *directory, uint64_t seq, json_t **proof, dome_error *err) {
  if (sodium_init() < 0) return dome_error_set(err, EIO, "libsodium: initialisation failed");
  json_t *head = read_head(directory, err);
  if (!head) return -ENOENT;
  uint64_t tree_size =
      (uint64_t)json_integer_value(json_object_get(json_object_get(head, "checkpoint"), "tree_size"));
  if (seq < 1 || seq > tree_size) {
    json_decref(head);
    return dome_error_set(err, ENOENT,
                          "seq %" PRIu64 " is not covered by the latest checkpoint (tree size %" PRIu64 ")",
                          seq, tree_size);
  }
  uint64_t m = seq - 1;
  /* The path's subtrees, top-down (RFC 6962 section 2.1.1 PATH). */
  range *ranges = calloc(64, sizeof *ranges);
  if (!ranges) {
    json_decref(head);
    return dome_error_set(err, ENOMEM, "prove: out of memory");
  }
  int count = 0;
  for (uint64_t lo = 0, hi = tree_size; hi - lo > 1;) {
    uint64_t k = 1;
    while (k * 2 < hi - lo) k *= 2;
    if (m - lo < k) {
      ranges[count++] = (range){.begin = lo + k, .end = hi};
      hi = lo + k;
    } else {
      ranges[count++] = (range){.begin = lo, .end = lo + k};
      lo += k;
    }
  }
  for (int i = 0; i < count; i++) journal_merkle_init(&ranges[i].tree);
  merkle_frontier whole;
  journal_merkle_init(&whole);
  uint8_t leaf[JOURNAL_HASH_BYTES], target[JOURNAL_HASH_BYTES];
  char *event_line = NULL;
  journal_filter filter = {.to_seq = tree_size};
  journal_reader *reader;
  int r = journal_reader_open(directory, &filter, &reader, err);
  uint64_t next = 1;
  while (r == 0) {
    journal_record record;
    int n = journal_reader_next(reader, false, &record, err);
    if (n < 0) r = n;
    if (n <= 0) break;
    if (record.seq != next) {
      r = dome_error_set(err, EBADMSG,
                         "prove needs every event from seq 1: found seq %" PRIu64 " where %" PRIu64
                         " was expected (older segments removed or journal damaged)",
                         record.seq, next);
      break;
    }
    next++;
    journal_merkle_leaf_hash(record.line, record.length, leaf);
    journal_merkle_append(&whole, leaf);
    uint64_t index = record.seq - 1;
    if (index == m) {
      memcpy(target, leaf, sizeof leaf);
      event_line = strndup(record.line, record.length);
    }
    for (int i = 0; i < count; i++)
      if (index >= ranges[i].begin && index < ranges[i].end) journal_merkle_append(&ranges[i].tree, leaf);
    if (record.seq == tree_size) break;
  }
  if (reader) journal_reader_close(reader);
  uint8_t root[JOURNAL_HASH_BYTES];
  char hex[2 * JOURNAL_HASH_BYTES + 1];
  if (r == 0 && whole.size != tree_size)
    r = dome_error_set(err, EBADMSG,
                       "journal holds %" PRIu64 " of the %" PRIu64 " events the checkpoint signs", whole.size,
                       tree_size);
  if (r == 0) {
    journal_merkle_root(&whole, root);
    journal_hex_encode(root, sizeof root, hex);
    const char *signed_root = json_string_value(json_object_get(json_object_get(head, "checkpoint"), "root"));
    if (!signed_root || strcmp(signed_root, hex) != 0)
      r = dome_error_set(err, EBADMSG,
                         "journal's Merkle root %s differs from the signed checkpoint (run verify)", hex);
  }
  if (r == 0) {
    json_t *path = json_array();
    for (int i = count - 1; i >= 0; i--) { /* leaf up */
      uint8_t subtree[JOURNAL_HASH_BYTES];
      journal_merkle_root(&ranges[i].tree, subtree);
      journal_hex_encode(subtree, sizeof subtree, hex);
      json_array_append_new(path, json_string(hex));
    }
    char leaf_hex[2 * JOURNAL_HASH_BYTES + 1], root_hex[2 * JOURNAL_HASH_BYTES + 1];
    journal_hex_encode(target, sizeof target, leaf_hex);
    journal_hex_encode(root, sizeof root, root_hex);
    *proof = json_pack("{s:I, s:I, s:I, s:s, s:o, s:s, s:O, s:s}", "seq", (json_int_t)seq, "leaf_index",
                       (json_int_t)m, "tree_size", (json_int_t)tree_size, "leaf_hash", leaf_hex, "audit_path",
                       path, "root", root_hex, "checkpoint", head, "event", event_line ? event_line : "");
    if (!*proof) r = dome_error_set(err, ENOMEM, "prove: out of memory");
  }
  free(event_line);
  free(ranges);
  json_decref(head);
  return r;
}

int journal_proof_check(const json_t *proof, const char *public_key_path, dome_error *err) {
  if (sodium_init() < 0) return dome_error_set(err, EIO, "libsodium: initialisation failed");
  const char *event = json_string_value(json_object_get(proof, "event"));
  const char *root_hex = json_string_value(json_object_get(proof, "root"));
  json_t *path = json_object_get(proof, "audit_path"), *checkpoint = json_object_get(proof, "checkpoint");
  json_t *index_json = json_object_get(proof, "leaf_index"), *size_json = json_object_get(proof, "tree_size");
  uint8_t root[JOURNAL_HASH_BYTES];
  if (!event || !root_hex || !json_is_array(path) || !json_is_object(checkpoint) ||
      !json_is_integer(index_json) || !json_is_integer(size_json) ||
      journal_hex_decode(root_hex, root, sizeof root) < 0)
    return dome_error_set(err, EBADMSG,
                          "proof: missing event, root, audit_path, leaf_index, tree_size or checkpoint");
  uint64_t fn = (uint64_t)json_integer_value(index_json), sn = (uint64_t)json_integer_value(size_json) - 1;
  if (fn > sn) return dome_error_set(err, EBADMSG, "proof: leaf_index outside the tree");
  uint8_t r[JOURNAL_HASH_BYTES];
  journal_merkle_leaf_hash(event, strlen(event), r);
  size_t i;
  json_t *element;
  json_array_foreach(path, i, element) {
    uint8_t p[JOURNAL_HASH_BYTES];
    if (journal_hex_decode(json_string_value(element), p, sizeof p) < 0)
      return dome_error_set(err, EBADMSG, "proof: audit_path[%zu] is not 64 hex digits", i);
    if (sn == 0) return dome_error_set(err, EBADMSG, "proof: audit path longer than the tree is deep");
    if ((fn & 1) || fn == sn) {
      journal_merkle_node_hash(p, r, r);
      if (!(fn & 1))
        while (!(fn & 1) && fn != 0) fn >>= 1, sn >>= 1;
    } else {
      journal_merkle_node_hash(r, p, r);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0 || memcmp(r, root, sizeof r) != 0)
    return dome_error_set(err, EBADMSG, "proof: the audit path does not lead from the event to the root");
  /* The root must be the one the checkpoint signs, with the trusted key. */
  journal_key key;
  if (public_key_path) {
    int rc = journal_key_load_public(public_key_path, &key, err);
    if (rc < 0) return rc;
    if (json_integer_value(json_object_get(json_object_get(checkpoint, "checkpoint"), "tree_size")) !=
        json_integer_value(size_json))
      return dome_error_set(err, EBADMSG, "proof: tree_size differs from the checkpoint's");
    return journal_checkpoint_check(checkpoint, root, &key, err) < 0 ? -EBADMSG : 0;
  }
  const char *signed_root =
      json_string_value(json_object_get(json_object_get(checkpoint, "checkpoint"), "root"));
  if (!signed_root || strcmp(signed_root, root_hex) != 0)
    return dome_error_set(err, EBADMSG, "proof: root differs from the checkpoint's root");
  return 0;
}
