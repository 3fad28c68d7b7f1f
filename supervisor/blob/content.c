/* The content files of the blob store without its accounting (blob.h): what `dome audit replay --rerun`
 * reads back and what its re-runs record. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/blob/blob.h"
#include "supervisor/blob/blob_internal.h"

#define BLOB_MAX_BYTES (1ull << 30) /* largest blob read back, bytes */

bool blob_hex_valid(const char *hex) {
  if (hex == NULL || strlen(hex) != 64) return false;
  for (int i = 0; i < 64; i++)
    if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) return false;
  return true;
}

static void blob_path(const char *journal_dir, const char *hex, char *path, size_t size) {
  snprintf(path, size, "%s/blobs/sha256/%.2s/%s", journal_dir, hex, hex);
}

static int make_dirs(const char *journal_dir, const char *hex, dome_error *err) {
  char path[4200];
  const char *parts[] = {"blobs", "blobs/sha256"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", journal_dir, parts[i]);
    if (mkdir(path, 0700) < 0 && errno != EEXIST) return dome_error_set_errno(err, errno, "mkdir `%s`", path);
  }
  snprintf(path, sizeof path, "%s/blobs/sha256/%.2s", journal_dir, hex);
  if (mkdir(path, 0700) < 0 && errno != EEXIST) return dome_error_set_errno(err, errno, "mkdir `%s`", path);
  return 0;
}

int blob_file_write(const char *path, const void *data, size_t length, dome_error *err) {
  char temp[4300];
  if (snprintf(temp, sizeof temp, "%s.tmp-%d", path, (int)getpid()) >= (int)sizeof temp)
    return dome_error_set(err, ENAMETOOLONG, "blob path");
  _cleanup_close_ int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return dome_error_set_errno(err, errno, "create `%s`", temp);
  const char *p = data;
  size_t left = length;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int rc = dome_error_set_errno(err, n < 0 ? errno : EIO, "write `%s`", temp);
      unlink(temp);
      return rc;
    }
    p += n;
    left -= (size_t)n;
  }
  if (fsync(fd) < 0 || rename(temp, path) < 0) {
    int rc = dome_error_set_errno(err, errno, "store blob `%s`", path);
    unlink(temp);
    return rc;
  }
  return 0;
}

int blob_content_put(const char *journal_dir, const void *data, size_t length, char hex[65],
                     dome_error *err) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, data, length);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
  char path[4200];
  blob_path(journal_dir, hex, path, sizeof path);
  if (access(path, F_OK) == 0) return 0;
  int rc = make_dirs(journal_dir, hex, err);
  if (rc < 0) return rc;
  return blob_file_write(path, data, length, err);
}

int blob_content_get(const char *journal_dir, const char *hex, char **data, size_t *length, dome_error *err) {
  *data = NULL;
  *length = 0;
  if (!blob_hex_valid(hex))
    return dome_error_set(err, EINVAL, "blob `%.80s`: not a SHA-256 in hex", hex ? hex : "");
  char path[4200];
  blob_path(journal_dir, hex, path, sizeof path);
  _cleanup_fclose_ FILE *in = fopen(path, "re");
  if (in == NULL) return dome_error_set_errno(err, errno, "blob `%s`", path);
  struct stat st;
  if (fstat(fileno(in), &st) < 0) return dome_error_set_errno(err, errno, "blob `%s`", path);
  if ((unsigned long long)st.st_size > BLOB_MAX_BYTES)
    return dome_error_set(err, E2BIG, "blob `%s`: larger than %llu bytes", path, BLOB_MAX_BYTES);
  char *buffer = malloc((size_t)st.st_size + 1);
  if (buffer == NULL) return dome_error_set(err, ENOMEM, "blob `%s`", path);
  size_t n = fread(buffer, 1, (size_t)st.st_size, in);
  buffer[n] = '\0';
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (unsigned char *)buffer, n);
  char actual[65];
  sodium_bin2hex(actual, sizeof actual, digest, sizeof digest);
  if (n != (size_t)st.st_size || strcmp(actual, hex) != 0) {
    free(buffer);
    return dome_error_set(err, EBADMSG, "blob `%s`: content does not match its SHA-256", path);
  }
  *data = buffer;
  *length = n;
  return 0;
}
