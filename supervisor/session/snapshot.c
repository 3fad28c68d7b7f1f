/* File-only snapshots of a session's /workspace (see session.h): one zstd frame holding a JSON object
 * {header, directories: [path], files: [{path, bytes, sha256, data (base64)}]}, written with the file
 * operations' rules (no symlink followed, regular files and directories only) and restored through them. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/session/session.h"

static void sha256_hex(const void *data, size_t length, char hex[65]) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, data, length);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
}

int session_snapshot_write(int workspace_fd, const char *file_path, uint64_t max_bytes, json_t *header,
                           json_t **summary, dome_error *err) {
  *summary = NULL;
  bool truncated = false;
  json_t *entries = session_file_list(workspace_fd, NULL, &truncated, err);
  if (entries == NULL) return dome_error_code(err);
  if (truncated) {
    json_decref(entries);
    return dome_error_set(err, EFBIG, "snapshot: more than %u entries in /workspace", SESSION_LIST_MAX);
  }
  json_t *files = json_array(), *directories = json_array();
  uint64_t total = 0;
  size_t i;
  json_t *entry;
  int rc = 0;
  json_array_foreach(entries, i, entry) {
    const char *path = json_string_value(json_object_get(entry, "path"));
    const char *type = json_string_value(json_object_get(entry, "type"));
    if (strcmp(type, "directory") == 0) {
      json_array_append_new(directories, json_string(path));
      continue;
    }
    if (strcmp(type, "file") != 0) continue; /* symlinks and special files are not kept */
    char *data = NULL;
    size_t length = 0;
    if ((rc = session_file_read(workspace_fd, path, SESSION_FILE_MAX, &data, &length, err)) < 0) break;
    total += length;
    if (total > max_bytes) {
      free(data);
      rc = dome_error_set(err, EFBIG, "snapshot: /workspace holds more than %llu bytes",
                          (unsigned long long)max_bytes);
      break;
    }
    size_t size = sodium_base64_encoded_len(length, sodium_base64_VARIANT_ORIGINAL);
    char *encoded = malloc(size), hex[65];
    if (encoded == NULL) {
      free(data);
      rc = dome_error_set(err, ENOMEM, "snapshot");
      break;
    }
    sodium_bin2base64(encoded, size, (unsigned char *)data, length, sodium_base64_VARIANT_ORIGINAL);
    sha256_hex(data, length, hex);
    json_array_append_new(files, json_pack("{s:s,s:I,s:s,s:s}", "path", path, "bytes", (json_int_t)length,
                                           "sha256", hex, "data", encoded));
    free(encoded);
    free(data);
  }
  json_decref(entries);
  if (rc < 0) {
    json_decref(files);
    json_decref(directories);
    return rc;
  }
  size_t file_count = json_array_size(files), directory_count = json_array_size(directories);
  json_t *archive = json_pack("{s:O,s:o,s:o}", "header", header, "directories", directories, "files", files);
  char *text = archive ? json_dumps(archive, JSON_COMPACT) : NULL;
  json_decref(archive);
  if (text == NULL) return dome_error_set(err, ENOMEM, "snapshot");
  size_t length = strlen(text), bound = ZSTD_compressBound(length);
  _cleanup_free_ char *compressed = malloc(bound);
  size_t packed = compressed ? ZSTD_compress(compressed, bound, text, length, 3) : 0;
  free(text);
  if (compressed == NULL || ZSTD_isError(packed)) return dome_error_set(err, ENOMEM, "snapshot: compress");
  char temporary[1100];
  snprintf(temporary, sizeof temporary, "%s.tmp", file_path);
  _cleanup_close_ int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return dome_error_set_errno(err, errno, "snapshot `%s`", temporary);
  if (write(fd, compressed, packed) != (ssize_t)packed || fsync(fd) < 0) {
    int e = errno ? errno : EIO;
    unlink(temporary);
    return dome_error_set_errno(err, e, "snapshot `%s`", temporary);
  }
  if (rename(temporary, file_path) < 0) {
    int e = errno;
    unlink(temporary);
    return dome_error_set_errno(err, e, "snapshot `%s`", file_path);
  }
  *summary =
      json_pack("{s:I,s:I,s:I,s:I}", "files", (json_int_t)file_count, "directories",
                (json_int_t)directory_count, "bytes", (json_int_t)total, "stored_bytes", (json_int_t)packed);
  return 0;
}

json_t *session_snapshot_read(const char *file_path, uint64_t max_bytes, dome_error *err) {
  _cleanup_close_ int fd = open(file_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    dome_error_set_errno(err, errno, "snapshot");
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max_bytes * 2 + 65536) {
    dome_error_set(err, EFBIG, "snapshot: not a regular file of a bounded size");
    return NULL;
  }
  _cleanup_free_ char *compressed = malloc((size_t)st.st_size + 1);
  if (compressed == NULL || read(fd, compressed, (size_t)st.st_size) != st.st_size) {
    dome_error_set(err, EIO, "snapshot: read");
    return NULL;
  }
  unsigned long long size = ZSTD_getFrameContentSize(compressed, (size_t)st.st_size);
  /* the base64 of max_bytes and the JSON around it */
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN ||
      size > max_bytes * 2 + (1u << 20)) {
    dome_error_set(err, EPROTO, "snapshot: not a snapshot of a bounded size");
    return NULL;
  }
  _cleanup_free_ char *text = malloc((size_t)size + 1);
  size_t got = text ? ZSTD_decompress(text, (size_t)size, compressed, (size_t)st.st_size) : 0;
  if (text == NULL || ZSTD_isError(got) || got != size) {
    dome_error_set(err, EPROTO, "snapshot: decompress");
    return NULL;
  }
  json_t *archive = json_loadb(text, got, 0, NULL);
  if (!json_is_object(archive) || !json_is_array(json_object_get(archive, "files"))) {
    json_decref(archive);
    dome_error_set(err, EPROTO, "snapshot: not a snapshot");
    return NULL;
  }
  return archive;
}

int session_snapshot_restore(json_t *archive, int workspace_fd, dome_error *err) {
  size_t i;
  json_t *item;
  json_array_foreach(json_object_get(archive, "directories"), i, item) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.dome-keep", json_string_value(item) ?: "");
    /* parents are made by a write; an empty directory by writing and removing a marker */
    int rc = session_file_write(workspace_fd, path, "", 0, err);
    if (rc == 0) rc = session_file_delete(workspace_fd, path, err);
    if (rc < 0) return rc;
  }
  json_array_foreach(json_object_get(archive, "files"), i, item) {
    const char *path = json_string_value(json_object_get(item, "path"));
    json_t *data = json_object_get(item, "data");
    if (path == NULL || !json_is_string(data)) return dome_error_set(err, EPROTO, "snapshot: file %zu", i);
    size_t length = json_string_length(data);
    unsigned char *bytes = malloc(length / 4 * 3 + 4);
    size_t decoded = 0;
    if (bytes == NULL || sodium_base642bin(bytes, length / 4 * 3 + 4, json_string_value(data), length, NULL,
                                           &decoded, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
      free(bytes);
      return dome_error_set(err, EPROTO, "snapshot: file `%s`", path);
    }
    int rc = session_file_write(workspace_fd, path, bytes, decoded, err);
    free(bytes);
    if (rc < 0) return rc;
  }
  return 0;
}
