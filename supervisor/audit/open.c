/* Opening a journal: directory, signing key, the last segment's state (tree, seq, time), and crash
 * recovery of a torn tail (docs/journal-format.md section 7). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/audit/writer_internal.h"
#include "supervisor/common/cleanup.h"

void *journal_writer_main(void *argument);

static int write_all(int fd, const void *data, size_t length) {
  const uint8_t *p = data;
  while (length) {
    ssize_t n = write(fd, p, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? -errno : -EIO;
    p += n;
    length -= (size_t)n;
  }
  return 0;
}

/* Step (2) of recovery: cut the segment at `offset` and append `lines` as one closed frame. */
static int rewrite_tail(journal *j, const char *segment, off_t offset, const char *lines, size_t length,
                        dome_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", j->directory, segment);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", path);
  if (ftruncate(fd, offset) < 0) return dome_error_set_errno(err, errno, "truncate `%s`", path);
  if (length) {
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t bound = ZSTD_compressBound(length);
    _cleanup_free_ uint8_t *frame = malloc(bound);
    if (!cctx || !frame) {
      ZSTD_freeCCtx(cctx);
      return dome_error_set(err, ENOMEM, "recovery: out of memory");
    }
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, j->options.compression_level);
    size_t n = ZSTD_compress2(cctx, frame, bound, lines, length);
    ZSTD_freeCCtx(cctx);
    if (ZSTD_isError(n)) return dome_error_set(err, EIO, "recovery: zstd: %s", ZSTD_getErrorName(n));
    if (lseek(fd, offset, SEEK_SET) < 0 || write_all(fd, frame, n) < 0)
      return dome_error_set_errno(err, errno ? errno : EIO, "recovery: write `%s`", path);
  }
  if (fsync(fd) < 0) return dome_error_set_errno(err, errno, "recovery: fsync `%s`", path);
  return 0;
}

/* Finish a recovery interrupted by a crash: recovery.tmp = "<segment> <offset>\n" + lines. */
static int finish_interrupted_recovery(journal *j, dome_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/recovery.tmp", j->directory);
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  if (!f) return errno == ENOENT ? 0 : dome_error_set_errno(err, errno, "open `%s`", path);
  char segment[64];
  long long offset;
  if (fscanf(f, "%63s %lld\n", segment, &offset) != 2)
    return dome_error_set(err, EBADMSG, "`%s`: damaged (remove it to recover from the segment)", path);
  byte_buffer lines = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) journal_byte_buffer_append(&lines, chunk, n);
  int r = rewrite_tail(j, segment, (off_t)offset, (const char *)lines.data, lines.length, err);
  free(lines.data);
  if (r < 0) return r;
  unlink(path);
  return journal_fsync_directory(j->directory, err);
}

/* Keep the bytes recovery drops, for forensics: torn-<segment>-<offset>.bin. */
static void save_torn_bytes(journal *j, int fd, off_t offset, off_t end) {
  if (end <= offset) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/torn-%s-%lld.bin", j->directory, j->segment_name, (long long)offset);
  _cleanup_close_ int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) return;
  uint8_t buffer[65536];
  for (off_t at = offset; at < end;) {
    ssize_t n = pread(fd, buffer, sizeof buffer, at);
    if (n <= 0 || write_all(out, buffer, (size_t)n) < 0) return;
    at += n;
  }
  fsync(out);
}

static int recover_tail(journal *j, int fd, off_t offset, off_t end, const byte_buffer *lines,
                        uint64_t events, const char *reason, json_t **recovered, dome_error *err) {
  char path[4096], temporary[4096];
  snprintf(path, sizeof path, "%s/recovery.tmp", j->directory);
  snprintf(temporary, sizeof temporary, "%s/recovery.tmp.part", j->directory);
  save_torn_bytes(j, fd, offset, end);
  {
    _cleanup_close_ int out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) return dome_error_set_errno(err, errno, "recovery: create `%s`", temporary);
    char head[128];
    int n = snprintf(head, sizeof head, "%s %lld\n", j->segment_name, (long long)offset);
    if (write_all(out, head, (size_t)n) < 0 || write_all(out, lines->data, lines->length) < 0 ||
        fsync(out) < 0)
      return dome_error_set_errno(err, errno ? errno : EIO, "recovery: write `%s`", temporary);
  }
  if (rename(temporary, path) < 0)
    return dome_error_set_errno(err, errno, "recovery: rename `%s`", temporary);
  int r = journal_fsync_directory(j->directory, err);
  if (r == 0) r = finish_interrupted_recovery(j, err);
  if (r < 0) return r;
  *recovered =
      json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "type", "journal.recovered", "segment", j->segment_name,
                "dropped_bytes", (json_int_t)(end - offset) - (json_int_t)0, "recovered_events",
                (json_int_t)events, "last_seq", (json_int_t)j->tree.size, "reason", reason);
  return 0;
}

static int load_tail(journal *j, json_t **recovered, int depth, dome_error *err) {
  *recovered = NULL;
  int r = finish_interrupted_recovery(j, err);
  if (r < 0) return r;
  journal_segment *segments = NULL;
  int count = journal_segments_list(j->directory, &segments, err);
  if (count < 0) return count;
  if (count == 0) {
    free(segments);
    journal_merkle_init(&j->tree);
    return journal_segment_start(j, err);
  }
  snprintf(j->segment_name, sizeof j->segment_name, "%s", segments[count - 1].name);
  free(segments);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", j->directory, j->segment_name);
  _cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "open segment `%s`", path);
  struct stat st;
  if (fstat(fd, &st) < 0) return dome_error_set_errno(err, errno, "stat `%s`", path);
  frame_scanner scanner;
  r = journal_frame_scanner_init(&scanner, fd, err);
  if (r < 0) return r;
  bool sealed = false, have_header = false;
  uint64_t expected = 0;
  j->entry_count = 0;
  off_t tail_offset = -1;
  const char *tail_reason = NULL;
  byte_buffer kept = {0};
  uint64_t kept_events = 0;
  for (;;) {
    frame_info info;
    dome_error frame_err = {0};
    r = journal_frame_scanner_next(&scanner, &info, &frame_err);
    if (r < 0 || info.kind == FRAME_OPEN || (info.kind != FRAME_END && sealed) ||
        (info.kind != FRAME_HEADER && !have_header && info.kind != FRAME_END)) {
      tail_offset = info.offset;
      tail_reason = r < 0                     ? "damaged frame"
                    : info.kind == FRAME_OPEN ? info.open_reason
                                              : "bytes after seek table";
      if (r == 0 && info.kind == FRAME_OPEN && have_header) {
        /* Keep the complete, well-formed lines with consecutive seqs. */
        const char *p = (const char *)info.content, *end = p + info.content_length;
        while (p < end) {
          const char *newline = memchr(p, '\n', (size_t)(end - p));
          line_fields fields;
          if (!newline || journal_scan_line(p, (size_t)(newline - p), &fields) < 0 || fields.seq != expected)
            break;
          uint8_t leaf[JOURNAL_HASH_BYTES];
          journal_merkle_leaf_hash(p, (size_t)(newline - p), leaf);
          journal_merkle_append(&j->tree, leaf);
          journal_byte_buffer_append(&kept, p, (size_t)(newline - p + 1));
          kept_events++;
          expected++;
          int64_t t;
          char text[64];
          snprintf(text, sizeof text, "%.*s", (int)fields.time_length, fields.time ? fields.time : "");
          if (journal_parse_time(text, &t, &frame_err) == 0 && t > j->last_time_ns) j->last_time_ns = t;
          p = newline + 1;
        }
      }
      r = 0;
      break;
    }
    if (info.kind == FRAME_END) break;
    if (info.kind == FRAME_HEADER) {
      uint64_t first_seq;
      if (have_header) {
        r = dome_error_set(err, EBADMSG, "segment `%s`: second header at offset %lld", path,
                           (long long)info.offset);
        break;
      }
      r = journal_header_decode(info.content, info.content_length, &first_seq, &j->tree, err);
      if (r < 0) break;
      have_header = true;
      expected = first_seq;
      j->segment_first_seq = first_seq;
      journal_seek_entry_add(j, (uint32_t)info.compressed_size, 0, JOURNAL_EMPTY_CHECKSUM);
      continue;
    }
    if (info.kind == FRAME_SEEK_TABLE) {
      sealed = true;
      continue;
    }
    if (info.kind != FRAME_DATA) continue;
    const char *p = (const char *)info.content, *end = p + info.content_length;
    while (p < end) {
      const char *newline = memchr(p, '\n', (size_t)(end - p));
      line_fields fields;
      if (!newline || journal_scan_line(p, (size_t)(newline - p), &fields) < 0 || fields.seq != expected) {
        r = dome_error_set(err, EBADMSG,
                           "segment `%s`: frame at offset %lld: bad event line (expected seq %" PRIu64
                           "); run `dome audit verify`",
                           path, (long long)info.offset, expected);
        break;
      }
      uint8_t leaf[JOURNAL_HASH_BYTES];
      journal_merkle_leaf_hash(p, (size_t)(newline - p), leaf);
      journal_merkle_append(&j->tree, leaf);
      expected++;
      if (fields.time) {
        char text[64];
        int64_t t;
        snprintf(text, sizeof text, "%.*s", (int)fields.time_length, fields.time);
        if (journal_parse_time(text, &t, &frame_err) == 0 && t > j->last_time_ns) j->last_time_ns = t;
      }
      p = newline + 1;
    }
    if (r < 0) break;
    journal_seek_entry_add(j, (uint32_t)info.compressed_size, (uint32_t)info.content_length, info.checksum);
  }
  journal_frame_scanner_free(&scanner);
  if (r < 0) {
    free(kept.data);
    return r;
  }
  if (!have_header) {
    free(kept.data);
    /* A crash while a segment was being created leaves at most a partial header and nothing else (the
     * header is fsync'd before any event goes in): keep its bytes aside and continue from the previous
     * segment. Anything bigger is a damaged segment, which is never removed. */
    if (st.st_size >= 4096)
      return dome_error_set(err, EBADMSG, "segment `%s` has no valid header; run `dome audit verify`", path);
    save_torn_bytes(j, fd, 0, st.st_size);
    if (unlink(path) < 0) return dome_error_set_errno(err, errno, "remove torn segment `%s`", path);
    if (depth > 0) return dome_error_set(err, EBADMSG, "segment `%s`: repeated torn segments", path);
    char torn_name[sizeof j->segment_name];
    snprintf(torn_name, sizeof torn_name, "%s", j->segment_name);
    int r2 = load_tail(j, recovered, depth + 1, err);
    if (r2 == 0 && !*recovered)
      *recovered =
          json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "type", "journal.recovered", "segment", torn_name,
                    "dropped_bytes", (json_int_t)st.st_size, "recovered_events", (json_int_t)0, "last_seq",
                    (json_int_t)j->tree.size, "reason", "segment torn while being created");
    return r2;
  }
  j->last_seq = j->committed_seq = expected - 1;
  if (tail_offset >= 0 || !sealed) {
    /* The previous writer did not close the journal: recover. */
    off_t cut = tail_offset >= 0 ? tail_offset : st.st_size;
    r = recover_tail(j, fd, cut, st.st_size, &kept, kept_events, tail_reason ? tail_reason : "not closed",
                     recovered, err);
    if (r == 0 && kept.length) {
      /* Re-read the recovered frame's size for the seek table. */
      struct stat after;
      if (fstat(fd, &after) == 0)
        journal_seek_entry_add(j, (uint32_t)(after.st_size - cut), (uint32_t)kept.length, 0);
      if (fstat(fd, &after) == 0 && j->entry_count) {
        uint8_t tail[4];
        if (pread(fd, tail, 4, after.st_size - 4) == 4)
          j->entries[j->entry_count - 1].checksum = journal_read_le32(tail);
      }
    }
    free(kept.data);
    if (r < 0) return r;
    j->last_seq = j->committed_seq = j->tree.size;
    if (fstat(fd, &st) < 0) return dome_error_set_errno(err, errno, "stat `%s`", path);
    j->fd = dome_steal_fd(&fd);
    j->written = j->durable = st.st_size;
    j->frame_open = false;
    return 0;
  }
  free(kept.data);
  /* Cleanly closed and sealed: continue in a new segment. */
  return journal_segment_start(j, err);
}

int journal_load_tail(journal *j, json_t **recovered, dome_error *err) {
  return load_tail(j, recovered, 0, err);
}

int journal_open(const journal_options *options, journal **out, dome_error *err) {
  if (!options || !options->directory) return dome_error_set(err, EINVAL, "journal_open: no directory");
  if (sodium_init() < 0) return dome_error_set(err, EIO, "libsodium: initialisation failed");
  /* mkdir -p: the default /var/lib/dome/journal may be the first thing dome creates. */
  char partial[4096];
  snprintf(partial, sizeof partial, "%s", options->directory);
  for (char *slash = strchr(partial + 1, '/');; slash = strchr(slash + 1, '/')) {
    if (slash) *slash = '\0';
    if (partial[0] && mkdir(partial, 0700) < 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "create journal directory `%s`", partial);
    if (!slash) break;
    *slash = '/';
  }
  journal *j = calloc(1, sizeof *j);
  if (!j) return dome_error_set(err, ENOMEM, "journal_open: out of memory");
  journal_options defaults;
  journal_options_init(&defaults, options->directory);
  j->options = *options;
#define DEFAULT(field) \
  if (!j->options.field) j->options.field = defaults.field
  DEFAULT(checkpoint_every_events);
  DEFAULT(checkpoint_every_ms);
  DEFAULT(segment_bytes);
  DEFAULT(frame_bytes);
  DEFAULT(compression_level);
#undef DEFAULT
  j->fd = -1;
  j->lock_fd = -1;
  /* One writer per journal: a second appender (the CLI while domed runs, a second domed) would
   * interleave frames and fork the Merkle tree. The lock dies with the process, so a crash needs
   * no clean-up. */
  {
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s/writer.lock", options->directory);
    j->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->lock_fd < 0) {
      int saved = errno;
      free(j);
      return dome_error_set_errno(err, saved, "open journal `%s`: create `%s`", options->directory,
                                  lock_path);
    }
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) < 0) {
      int saved = errno;
      close(j->lock_fd);
      free(j);
      return dome_error_set(err, saved == EWOULDBLOCK ? EBUSY : saved,
                            "open journal `%s`: another writer holds it (domed running?)",
                            options->directory);
    }
  }
  j->directory = strdup(options->directory);
  if (options->signing_key_path)
    j->key_path = strdup(options->signing_key_path);
  else if (asprintf(&j->key_path, "%s/signing.key", options->directory) < 0)
    j->key_path = NULL;
  pthread_mutex_init(&j->lock, NULL);
  pthread_condattr_t attributes;
  pthread_condattr_init(&attributes);
  pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
  pthread_cond_init(&j->writer_wake, &attributes);
  pthread_condattr_destroy(&attributes);
  pthread_cond_init(&j->committed, NULL);
  j->cctx = journal_compressor_create();
  if (!j->directory || !j->key_path || !j->cctx) {
    journal_close(j, NULL);
    return dome_error_set(err, ENOMEM, "journal_open: out of memory");
  }
  j->options.directory = j->directory;
  j->options.signing_key_path = j->key_path;
  ZSTD_CCtx_setParameter(j->cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(j->cctx, ZSTD_c_compressionLevel, j->options.compression_level);
  int r = journal_key_load_or_create(j->key_path, &j->key, err);
  json_t *recovered = NULL;
  if (r == 0) r = journal_load_tail(j, &recovered, err);
  if (r < 0) {
    journal_close(j, NULL);
    return dome_error_wrap(err, "open journal `%s`", options->directory);
  }
  j->last_checkpoint_mono_ns = journal_mono_ns();
  if (pthread_create(&j->thread, NULL, journal_writer_main, j) != 0) {
    json_decref(recovered);
    journal_close(j, NULL);
    return dome_error_set(err, EAGAIN, "open journal `%s`: cannot start the writer thread",
                          options->directory);
  }
  j->thread_started = true;
  if (recovered) {
    uint64_t seq;
    r = journal_append_internal(j, recovered, &seq, err);
    if (r == 0) r = journal_sync(j, seq, err);
    json_decref(recovered);
    if (r < 0) {
      journal_close(j, NULL);
      return dome_error_wrap(err, "open journal `%s`: record recovery", options->directory);
    }
  }
  *out = j;
  return 0;
}
