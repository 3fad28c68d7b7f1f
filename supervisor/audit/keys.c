/* Ed25519 signing key of the journal (RFC 8032 through libsodium) and checkpoint signatures
 * (docs/journal-format.md section 5). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/audit/journal_internal.h"
#include "supervisor/common/cleanup.h"

void journal_public_key_path(const char *secret_path, char *buffer, size_t size) {
  size_t n = strlen(secret_path);
  if (n > 4 && strcmp(secret_path + n - 4, ".key") == 0)
    snprintf(buffer, size, "%.*s.pub", (int)(n - 4), secret_path);
  else
    snprintf(buffer, size, "%s.pub", secret_path);
}

static void set_key_id(journal_key *key) {
  uint8_t digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, key->public_key, sizeof key->public_key);
  journal_hex_encode(digest, 8, key->key_id);
}

/* Read a file holding `bytes` bytes as hex (plus optional newline). */
static int read_hex_file(const char *path, uint8_t *out, size_t bytes, dome_error *err) {
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  if (!f) return dome_error_set_errno(err, errno, "open key `%s`", path);
  char text[2 * crypto_sign_SECRETKEYBYTES + 4];
  if (!fgets(text, sizeof text, f)) return dome_error_set(err, EINVAL, "key `%s`: empty", path);
  text[strcspn(text, "\r\n")] = '\0';
  if (journal_hex_decode(text, out, bytes) < 0)
    return dome_error_set(err, EINVAL, "key `%s`: expected %zu hex digits", path, 2 * bytes);
  return 0;
}

static int write_hex_file(const char *path, const uint8_t *bytes, size_t n, mode_t mode, dome_error *err) {
  char temporary[4096];
  snprintf(temporary, sizeof temporary, "%s.tmp", path);
  _cleanup_close_ int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return dome_error_set_errno(err, errno, "create `%s`", temporary);
  char text[2 * crypto_sign_SECRETKEYBYTES + 2];
  journal_hex_encode(bytes, n, text);
  strcat(text, "\n");
  size_t length = strlen(text);
  if (write(fd, text, length) != (ssize_t)length || fsync(fd) < 0)
    return dome_error_set_errno(err, errno ? errno : EIO, "write `%s`", temporary);
  if (rename(temporary, path) < 0) return dome_error_set_errno(err, errno, "rename `%s`", temporary);
  return 0;
}

int journal_key_load_or_create(const char *path, journal_key *key, dome_error *err) {
  memset(key, 0, sizeof *key);
  uint8_t seed[crypto_sign_SEEDBYTES];
  char public_path[4096];
  journal_public_key_path(path, public_path, sizeof public_path);
  if (access(path, F_OK) == 0) {
    int r = read_hex_file(path, seed, sizeof seed, err);
    if (r < 0) return r;
    crypto_sign_seed_keypair(key->public_key, key->secret_key, seed);
  } else {
    randombytes_buf(seed, sizeof seed);
    crypto_sign_seed_keypair(key->public_key, key->secret_key, seed);
    int r = write_hex_file(path, seed, sizeof seed, 0600, err);
    if (r < 0) return dome_error_wrap(err, "generate signing key");
  }
  sodium_memzero(seed, sizeof seed);
  /* Export the public key next to the secret one (rewritten if missing or stale). */
  uint8_t existing[crypto_sign_PUBLICKEYBYTES];
  dome_error ignored;
  if (read_hex_file(public_path, existing, sizeof existing, &ignored) < 0 ||
      memcmp(existing, key->public_key, sizeof existing) != 0) {
    int r = write_hex_file(public_path, key->public_key, sizeof key->public_key, 0644, err);
    if (r < 0) return dome_error_wrap(err, "export public key");
  }
  key->has_secret = true;
  set_key_id(key);
  return 0;
}

int journal_key_load_public(const char *path, journal_key *key, dome_error *err) {
  memset(key, 0, sizeof *key);
  int r = read_hex_file(path, key->public_key, sizeof key->public_key, err);
  if (r < 0) return r;
  set_key_id(key);
  return 0;
}

char *journal_checkpoint_message(uint64_t tree_size, const char *root_hex, const char *time) {
  char *message = NULL;
  if (asprintf(&message, JOURNAL_CHECKPOINT_CONTEXT "%" PRIu64 "\n%s\n%s\n", tree_size, root_hex, time) < 0)
    return NULL;
  return message;
}

int journal_checkpoint_check(const json_t *event, const uint8_t root[JOURNAL_HASH_BYTES],
                             const journal_key *key, dome_error *err) {
  json_t *checkpoint = json_object_get(event, "checkpoint");
  json_t *seq = json_object_get(event, "seq"), *size = json_object_get(checkpoint, "tree_size");
  const char *time = json_string_value(json_object_get(event, "time"));
  const char *root_hex = json_string_value(json_object_get(checkpoint, "root"));
  const char *signature_hex = json_string_value(json_object_get(checkpoint, "signature"));
  const char *key_id = json_string_value(json_object_get(checkpoint, "key_id"));
  if (!json_is_integer(seq) || !json_is_integer(size) || !time || !root_hex || !signature_hex || !key_id)
    return dome_error_set(err, 0, "checkpoint: missing tree_size, root, signature, key_id or time");
  if (json_integer_value(size) != json_integer_value(seq) - 1)
    return dome_error_set(err, 0, "checkpoint: tree_size %lld is not seq-1",
                          (long long)json_integer_value(size));
  char expected_root[2 * JOURNAL_HASH_BYTES + 1];
  journal_hex_encode(root, JOURNAL_HASH_BYTES, expected_root);
  if (strcmp(expected_root, root_hex) != 0)
    return dome_error_set(err, 0, "checkpoint: Merkle root of events 1..%lld is %s, checkpoint says %s",
                          (long long)json_integer_value(size), expected_root, root_hex);
  if (strcmp(key_id, key->key_id) != 0)
    return dome_error_set(err, 0, "checkpoint: signed by key %s, not by the given key %s", key_id,
                          key->key_id);
  uint8_t signature[crypto_sign_BYTES];
  if (journal_hex_decode(signature_hex, signature, sizeof signature) < 0)
    return dome_error_set(err, 0, "checkpoint: signature is not 128 hex digits");
  _cleanup_free_ char *message =
      journal_checkpoint_message((uint64_t)json_integer_value(size), root_hex, time);
  if (!message) return dome_error_set(err, ENOMEM, "checkpoint: out of memory");
  if (crypto_sign_verify_detached(signature, (const uint8_t *)message, strlen(message), key->public_key) != 0)
    return dome_error_set(err, 0, "checkpoint: Ed25519 signature does not verify");
  return 0;
}
