/* What the blob store's accounting (blob.c) and its bare content files (content.c) share. */
#ifndef DOME_BLOB_INTERNAL_H
#define DOME_BLOB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "supervisor/common/error.h"

/* True when `hex` is a SHA-256 digest in lower-case hex (64 characters [0-9a-f]). */
bool blob_hex_valid(const char *hex);

/* Write data[0..length) to `path` so that a reader sees all of it or none: into `path`.tmp-<pid>, fsync,
 * rename (POSIX rename(2) atomicity). Returns 0, or -errno (*err names the file) with no temporary file
 * left: -ENAMETOOLONG, or open/write/fsync/rename's errno (-EIO for a write that made no progress). */
int blob_file_write(const char *path, const void *data, size_t length, dome_error *err);

#endif
