/* Frame scanner: walks the frames of one segment file in bounded memory (one compressed frame and
 * its decoded content, each at most JOURNAL_MAX_FRAME_BYTES). Used by the reader, verification and
 * crash recovery. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd_errors.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

int journal_frame_scanner_init(frame_scanner *s, int fd, dome_error *err) {
  memset(s, 0, sizeof *s);
  s->fd = fd;
  s->dctx = ZSTD_createDCtx();
  s->in_capacity = 256 * 1024;
  s->in = malloc(s->in_capacity);
  s->out_capacity = 1024 * 1024;
  s->out = malloc(s->out_capacity);
  if (!s->dctx || !s->in || !s->out) {
    journal_frame_scanner_free(s);
    return dome_error_set(err, ENOMEM, "frame scanner: out of memory");
  }
  return 0;
}

void journal_frame_scanner_free(frame_scanner *s) {
  ZSTD_freeDCtx(s->dctx);
  free(s->in);
  free(s->out);
  s->dctx = NULL;
  s->in = s->out = NULL;
}

/* Read up to `want` bytes at s->offset into s->in (growing it). Returns bytes read (< want at EOF). */
static ssize_t load(frame_scanner *s, size_t want, dome_error *err) {
  if (want > s->in_capacity) {
    size_t capacity = s->in_capacity;
    while (capacity < want) capacity *= 2;
    uint8_t *grown = realloc(s->in, capacity);
    if (!grown) return dome_error_set(err, ENOMEM, "frame scanner: out of memory");
    s->in = grown;
    s->in_capacity = capacity;
  }
  size_t have = 0;
  while (have < want) {
    ssize_t n = pread(s->fd, s->in + have, want - have, s->offset + (off_t)have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return dome_error_set_errno(err, errno, "read at offset %lld", (long long)(s->offset + (off_t)have));
    }
    if (n == 0) break;
    have += (size_t)n;
  }
  return (ssize_t)have;
}

/* Decode src into s->out. Returns 0 complete, 1 input ended inside the frame, or -EBADMSG. */
static int decode(frame_scanner *s, const uint8_t *src, size_t length, size_t *out_length, dome_error *err) {
  ZSTD_DCtx_reset(s->dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in = {src, length, 0};
  ZSTD_outBuffer out = {s->out, s->out_capacity, 0};
  for (;;) {
    size_t r = ZSTD_decompressStream(s->dctx, &out, &in);
    if (ZSTD_isError(r)) return dome_error_set(err, 0, "zstd: %s", ZSTD_getErrorName(r));
    if (r == 0) {
      *out_length = out.pos;
      return 0;
    }
    if (out.pos == out.size) {
      if (s->out_capacity >= JOURNAL_MAX_FRAME_BYTES)
        return dome_error_set(err, 0, "frame decodes to more than %u bytes", JOURNAL_MAX_FRAME_BYTES);
      uint8_t *grown = realloc(s->out, s->out_capacity * 2);
      if (!grown) return dome_error_set(err, ENOMEM, "frame scanner: out of memory");
      s->out = grown;
      s->out_capacity *= 2;
      out.dst = s->out;
      out.size = s->out_capacity;
      continue;
    }
    if (in.pos == in.size) {
      *out_length = out.pos;
      return 1;
    }
  }
}

/* A torn frame: zstd drops the output of a call that fails, so feed one byte a call to keep every block
 * decoded before the damage. Only crash recovery and readers of a torn tail come here. */
static int decode_salvage(frame_scanner *s, size_t length, size_t *out_length) {
  ZSTD_DCtx_reset(s->dctx, ZSTD_reset_session_only);
  ZSTD_outBuffer out = {s->out, s->out_capacity, 0};
  for (size_t i = 0; i < length; i++) {
    ZSTD_inBuffer in = {s->in + i, 1, 0};
    while (in.pos < in.size) {
      size_t r = ZSTD_decompressStream(s->dctx, &out, &in);
      if (ZSTD_isError(r) || out.pos == out.size) {
        *out_length = out.pos;
        return -1;
      }
    }
  }
  *out_length = out.pos;
  return -1;
}

int journal_frame_scanner_next(frame_scanner *s, frame_info *info, dome_error *err) {
  memset(info, 0, sizeof *info);
  info->offset = s->offset;
  ssize_t have = load(s, 8, err);
  if (have < 0) return (int)have;
  if (have == 0) {
    info->kind = FRAME_END;
    return 0;
  }
  if (have >= 4 && (journal_read_le32(s->in) & 0xFFFFFFF0u) == 0x184D2A50u) {
    if (have < 8) goto open_tail_skippable;
    uint32_t magic = journal_read_le32(s->in), size = journal_read_le32(s->in + 4);
    if (size > JOURNAL_MAX_FRAME_BYTES)
      return dome_error_set(err, 0, "skippable frame of %u bytes at offset %lld", size, (long long)s->offset);
    have = load(s, 8 + (size_t)size, err);
    if (have < 0) return (int)have;
    if ((size_t)have < 8 + (size_t)size) goto open_tail_skippable;
    info->kind = magic == JOURNAL_HEADER_MAGIC       ? FRAME_HEADER
                 : magic == JOURNAL_SEEK_TABLE_MAGIC ? FRAME_SEEK_TABLE
                                                     : FRAME_SKIPPABLE;
    info->content = s->in + 8;
    info->content_length = size;
    info->compressed_size = 8 + (size_t)size;
    s->offset += (off_t)info->compressed_size;
    return 0;
  }
  /* A data frame: find its extent, loading more until it is complete or the file ends. */
  size_t want = 128 * 1024;
  for (;;) {
    have = load(s, want, err);
    if (have < 0) return (int)have;
    size_t frame_size = ZSTD_findFrameCompressedSize(s->in, (size_t)have);
    if (!ZSTD_isError(frame_size)) {
      size_t out_length;
      int r = decode(s, s->in, frame_size, &out_length, err);
      if (r < 0) return dome_error_wrap(err, "frame at offset %lld", (long long)s->offset);
      if (r == 1) return dome_error_set(err, 0, "frame at offset %lld: truncated", (long long)s->offset);
      info->kind = FRAME_DATA;
      info->content = s->out;
      info->content_length = out_length;
      info->compressed_size = frame_size;
      info->checksum = journal_read_le32(s->in + frame_size - 4);
      s->offset += (off_t)frame_size;
      return 0;
    }
    if (ZSTD_getErrorCode(frame_size) != ZSTD_error_srcSize_wrong)
      return dome_error_set(err, 0, "frame at offset %lld: %s", (long long)s->offset,
                            ZSTD_getErrorName(frame_size));
    if ((size_t)have < want) break; /* the file ends inside this frame */
    if (want >= JOURNAL_MAX_FRAME_BYTES)
      return dome_error_set(err, 0, "frame at offset %lld larger than %u bytes", (long long)s->offset,
                            JOURNAL_MAX_FRAME_BYTES);
    want *= 2;
  }
  /* Open (being written) or torn frame at the end: decode its complete blocks. */
  size_t out_length = 0;
  int r = decode(s, s->in, (size_t)have, &out_length, err);
  if (r < 0) r = decode_salvage(s, (size_t)have, &out_length);
  info->kind = FRAME_OPEN;
  info->content = s->out;
  info->content_length = out_length;
  info->compressed_size = (size_t)have;
  info->open_reason = r < 0 ? "torn frame" : "unterminated frame";
  return 0;
open_tail_skippable:
  info->kind = FRAME_OPEN;
  info->compressed_size = (size_t)have;
  info->open_reason = "unterminated skippable frame";
  return 0;
}

static int measure_at(frame_scanner *s, off_t offset, enum frame_kind *kind, size_t *size, dome_error *err) {
  s->offset = offset;
  ssize_t have = load(s, 8, err);
  if (have < 0) return (int)have;
  *size = 0;
  if (have == 0) {
    *kind = FRAME_END;
    return 0;
  }
  if (have >= 8 && (journal_read_le32(s->in) & 0xFFFFFFF0u) == 0x184D2A50u) {
    uint32_t magic = journal_read_le32(s->in);
    *kind = magic == JOURNAL_HEADER_MAGIC       ? FRAME_HEADER
            : magic == JOURNAL_SEEK_TABLE_MAGIC ? FRAME_SEEK_TABLE
                                                : FRAME_SKIPPABLE;
    *size = 8 + (size_t)journal_read_le32(s->in + 4);
    return 0;
  }
  for (size_t want = 128 * 1024;; want *= 2) {
    have = load(s, want, err);
    if (have < 0) return (int)have;
    size_t frame_size = ZSTD_findFrameCompressedSize(s->in, (size_t)have);
    if (!ZSTD_isError(frame_size)) {
      *kind = FRAME_DATA;
      *size = frame_size;
      return 0;
    }
    if (ZSTD_getErrorCode(frame_size) != ZSTD_error_srcSize_wrong || (size_t)have < want ||
        want >= JOURNAL_MAX_FRAME_BYTES) {
      *kind = FRAME_OPEN;
      return 0;
    }
  }
}

int journal_frame_scanner_measure(frame_scanner *s, off_t offset, enum frame_kind *kind, size_t *size,
                                  dome_error *err) {
  off_t saved = s->offset; /* peeking never moves the scanner */
  int r = measure_at(s, offset, kind, size, err);
  s->offset = saved;
  return r;
}

static int first_event_at(frame_scanner *s, off_t offset, uint64_t *seq, int64_t *time_ns);

int journal_frame_scanner_first_event(frame_scanner *s, off_t offset, uint64_t *seq, int64_t *time_ns) {
  off_t saved = s->offset;
  int r = first_event_at(s, offset, seq, time_ns);
  s->offset = saved;
  return r;
}

static int first_event_at(frame_scanner *s, off_t offset, uint64_t *seq, int64_t *time_ns) {
  dome_error ignored;
  enum frame_kind kind;
  size_t size;
  if (measure_at(s, offset, &kind, &size, &ignored) < 0 || kind != FRAME_DATA) return -1;
  /* s->in holds the whole frame now; decode until the first newline. */
  ZSTD_DCtx_reset(s->dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in = {s->in, size, 0};
  size_t limit = 64 * 1024 < s->out_capacity ? 64 * 1024 : s->out_capacity;
  ZSTD_outBuffer out = {s->out, limit, 0};
  for (;;) {
    size_t r = ZSTD_decompressStream(s->dctx, &out, &in);
    if (ZSTD_isError(r)) return -1;
    const char *newline = memchr(s->out, '\n', out.pos);
    if (newline) {
      line_fields fields;
      if (journal_scan_line((const char *)s->out, (size_t)(newline - (const char *)s->out), &fields) < 0 ||
          !fields.time || fields.time_length > 40)
        return -1;
      char text[48];
      memcpy(text, fields.time, fields.time_length);
      text[fields.time_length] = '\0';
      *seq = fields.seq;
      return journal_parse_time(text, time_ns, &ignored) < 0 ? -1 : 0;
    }
    if (r == 0 || (in.pos == in.size && out.pos < out.size)) return -1;
    if (out.pos == out.size) {
      if (out.size >= s->out_capacity) {
        if (s->out_capacity >= JOURNAL_MAX_FRAME_BYTES) return -1;
        uint8_t *grown = realloc(s->out, s->out_capacity * 2);
        if (!grown) return -1;
        s->out = grown;
        s->out_capacity *= 2;
        out.dst = s->out;
      }
      out.size = s->out_capacity;
    }
  }
}
