/* RFC 6962 section 2.1 Merkle tree hashing, kept incrementally as a frontier of complete subtrees:
 * the tree of n leaves is the list of perfect subtrees given by the set bits of n, largest first. */
#include <string.h>

#include "supervisor/audit/journal_internal.h"

void journal_hex_encode(const uint8_t *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int journal_hex_decode(const char *hex, uint8_t *out, size_t n) {
  if (!hex || strlen(hex) != 2 * n) return -1;
  for (size_t i = 0; i < n; i++) {
    int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return -1;
    out[i] = (uint8_t)(high << 4 | low);
  }
  return 0;
}

void journal_merkle_init(merkle_frontier *f) {
  f->size = 0;
  f->count = 0;
}

void journal_merkle_leaf_hash(const void *data, size_t length, uint8_t out[JOURNAL_HASH_BYTES]) {
  crypto_hash_sha256_state state;
  static const uint8_t prefix = 0x00;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, &prefix, 1);
  crypto_hash_sha256_update(&state, data, length);
  crypto_hash_sha256_final(&state, out);
}

void journal_merkle_node_hash(const uint8_t left[JOURNAL_HASH_BYTES], const uint8_t right[JOURNAL_HASH_BYTES],
                              uint8_t out[JOURNAL_HASH_BYTES]) {
  uint8_t buffer[1 + 2 * JOURNAL_HASH_BYTES];
  buffer[0] = 0x01;
  memcpy(buffer + 1, left, JOURNAL_HASH_BYTES);
  memcpy(buffer + 1 + JOURNAL_HASH_BYTES, right, JOURNAL_HASH_BYTES);
  crypto_hash_sha256(out, buffer, sizeof buffer);
}

/* Appending leaf n+1 merges the rightmost subtrees as a binary counter carries: one merge per trailing
 * one bit of the old size. */
void journal_merkle_append(merkle_frontier *f, const uint8_t leaf[JOURNAL_HASH_BYTES]) {
  journal_merkle_append_subtree(f, leaf, 0);
}

/* A subtree of 2^height leaves at a size that is a multiple of 2^height: the same carry, from bit
 * `height` up (the frontier's last entry then covers exactly 2^height leaves when that bit is set). */
void journal_merkle_append_subtree(merkle_frontier *f, const uint8_t root[JOURNAL_HASH_BYTES], int height) {
  uint8_t carry[JOURNAL_HASH_BYTES];
  memcpy(carry, root, JOURNAL_HASH_BYTES);
  for (uint64_t bits = f->size >> height; bits & 1; bits >>= 1) {
    journal_merkle_node_hash(f->hash[f->count - 1], carry, carry);
    f->count--;
  }
  memcpy(f->hash[f->count++], carry, JOURNAL_HASH_BYTES);
  f->size += 1ull << height;
}

void journal_merkle_root(const merkle_frontier *f, uint8_t out[JOURNAL_HASH_BYTES]) {
  if (f->count == 0) {
    crypto_hash_sha256(out, (const uint8_t *)"", 0);
    return;
  }
  uint8_t root[JOURNAL_HASH_BYTES];
  memcpy(root, f->hash[f->count - 1], JOURNAL_HASH_BYTES);
  for (int i = f->count - 2; i >= 0; i--) journal_merkle_node_hash(f->hash[i], root, root);
  memcpy(out, root, JOURNAL_HASH_BYTES);
}

json_t *journal_merkle_frontier_to_json(const merkle_frontier *f) {
  json_t *array = json_array();
  char hex[2 * JOURNAL_HASH_BYTES + 1];
  for (int i = 0; array && i < f->count; i++) {
    journal_hex_encode(f->hash[i], JOURNAL_HASH_BYTES, hex);
    json_array_append_new(array, json_string(hex));
  }
  return array;
}

int journal_merkle_frontier_from_json(merkle_frontier *f, uint64_t size, const json_t *array,
                                      dome_error *err) {
  if (!json_is_array(array)) return dome_error_set(err, 0, "frontier: not an array");
  int expected = __builtin_popcountll(size);
  if ((int)json_array_size(array) != expected)
    return dome_error_set(err, 0, "frontier: %zu hashes for tree size %llu (expected %d)",
                          json_array_size(array), (unsigned long long)size, expected);
  f->size = size;
  f->count = expected;
  for (int i = 0; i < expected; i++) {
    if (journal_hex_decode(json_string_value(json_array_get(array, (size_t)i)), f->hash[i],
                           JOURNAL_HASH_BYTES) < 0)
      return dome_error_set(err, 0, "frontier[%d]: not 64 hex digits", i);
  }
  return 0;
}

bool journal_merkle_frontier_equal(const merkle_frontier *a, const merkle_frontier *b) {
  if (a->size != b->size || a->count != b->count) return false;
  for (int i = 0; i < a->count; i++)
    if (memcmp(a->hash[i], b->hash[i], JOURNAL_HASH_BYTES) != 0) return false;
  return true;
}
