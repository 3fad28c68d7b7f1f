/* Internals of the audit journal shared by its files (not a public interface; see journal.h and
 * docs/journal-format.md for the format these implement). */
#ifndef DOME_AUDIT_JOURNAL_INTERNAL_H
#define DOME_AUDIT_JOURNAL_INTERNAL_H

#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zstd.h>

#include "supervisor/common/error.h"

#define JOURNAL_FORMAT "dome-journal/1"
#define JOURNAL_HEADER_MAGIC 0x184D2A50u
#define JOURNAL_SEEK_TABLE_MAGIC 0x184D2A5Eu
#define JOURNAL_SEEKABLE_FOOTER_MAGIC 0x8F92EAB1u
#define JOURNAL_EMPTY_CHECKSUM 0x51D8E999u /* low 32 bits of XXH64 of no bytes */
#define JOURNAL_SEGMENT_PREFIX "segment-"
#define JOURNAL_SEGMENT_SUFFIX ".zst"
/* Largest compressed or decompressed size of one frame a reader accepts (bounded memory). */
#define JOURNAL_MAX_FRAME_BYTES (32u * 1024 * 1024)
#define JOURNAL_HASH_BYTES 32
#define JOURNAL_CHECKPOINT_CONTEXT "dome-journal-checkpoint/1\n"

/* ---- hex ---- */
void journal_hex_encode(const uint8_t *bytes, size_t n, char *out); /* out: 2n+1 */
int journal_hex_decode(const char *hex, uint8_t *out, size_t n);    /* 0 or -1 */

/* ---- canonical event text (canonical.c) ---- */
typedef struct canonical_buffer {
  char *data; /* stack, or the heap once it outgrew it */
  size_t length, capacity;
  bool heap, too_big;
  /* Set by journal_canonical_dump of an object on its fast path (cuts_known): offsets of the first
   * top-level key sorting after "seq" and after "time" (or of the closing brace), and whether a
   * top-level key is "seq" or "time" itself. cuts_known is false for an escaped top-level key and on
   * jansson's path: the caller finds them itself. */
  bool cuts_known, reserved_key;
  size_t cut_seq, cut_time;
  char stack[2048];
} canonical_buffer;

void journal_canonical_buffer_init(canonical_buffer *b);
void journal_canonical_buffer_free(canonical_buffer *b);
/* Append to b exactly what json_dumps(value, JSON_SORT_KEYS | JSON_COMPACT) returns (docs/journal-format.md
 * section 3), without its allocations. Returns 0, -E2BIG (text over JOURNAL_MAX_EVENT_BYTES), -EINVAL
 * (not an object or array, or not serialisable: invalid UTF-8, NaN, a cycle) or -ENOMEM. */
int journal_canonical_dump(json_t *value, canonical_buffer *b);

/* ---- Merkle frontier (RFC 6962 section 2.1, incremental) ---- */
typedef struct merkle_frontier {
  uint64_t size;                        /* leaves so far */
  int count;                            /* entries = popcount(size) */
  uint8_t hash[64][JOURNAL_HASH_BYTES]; /* complete-subtree roots, largest first */
} merkle_frontier;

void journal_merkle_init(merkle_frontier *f);
void journal_merkle_leaf_hash(const void *data, size_t length, uint8_t out[JOURNAL_HASH_BYTES]);
void journal_merkle_node_hash(const uint8_t left[JOURNAL_HASH_BYTES], const uint8_t right[JOURNAL_HASH_BYTES],
                              uint8_t out[JOURNAL_HASH_BYTES]);
void journal_merkle_append(merkle_frontier *f, const uint8_t leaf[JOURNAL_HASH_BYTES]);
/* Append the root of a perfect subtree of 2^height leaves; f->size must be a multiple of 2^height. */
void journal_merkle_append_subtree(merkle_frontier *f, const uint8_t root[JOURNAL_HASH_BYTES], int height);
void journal_merkle_root(const merkle_frontier *f, uint8_t out[JOURNAL_HASH_BYTES]);
json_t *journal_merkle_frontier_to_json(const merkle_frontier *f);
int journal_merkle_frontier_from_json(merkle_frontier *f, uint64_t size, const json_t *array,
                                      dome_error *err);
bool journal_merkle_frontier_equal(const merkle_frontier *a, const merkle_frontier *b);

/* ---- segments ---- */
typedef struct journal_segment {
  uint64_t first_seq;
  char name[48];
} journal_segment;

/* Segments of `directory` sorted by first seq into *out (malloc'd, caller frees); returns count or -errno. */
int journal_segments_list(const char *directory, journal_segment **out, dome_error *err);
void journal_segment_name(uint64_t first_seq, char *buffer, size_t size);
/* Encode the header skippable frame for a segment starting at first_seq with frontier f. Returns a
 * malloc'd buffer of *length bytes or NULL. */
uint8_t *journal_header_encode(uint64_t first_seq, const merkle_frontier *f, size_t *length);
/* Parse a header frame's content; fills *first_seq and f. */
int journal_header_decode(const uint8_t *content, size_t length, uint64_t *first_seq, merkle_frontier *f,
                          dome_error *err);

typedef struct seek_entry {
  uint32_t compressed_size;
  uint32_t decompressed_size;
  uint32_t checksum;
} seek_entry;
/* Encode a seek table frame for entries; malloc'd, *length bytes. */
uint8_t *journal_seek_table_encode(const seek_entry *entries, size_t count, size_t *length);
/* Decode a seek table frame's content (after magic+size). Returns count (entries malloc'd) or -1. */
int journal_seek_table_decode(const uint8_t *content, size_t length, seek_entry **entries);

static inline uint32_t journal_read_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void journal_write_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* ---- frame scanner: walks the frames of one segment file ---- */
enum frame_kind {
  FRAME_END,        /* clean end of file */
  FRAME_HEADER,     /* segment header skippable frame; content = its JSON */
  FRAME_SEEK_TABLE, /* seek table; content = bytes after magic+size */
  FRAME_SKIPPABLE,  /* another skippable frame */
  FRAME_DATA,       /* a complete data frame; content = decoded lines */
  FRAME_OPEN,       /* incomplete frame at end of file; content = what its complete blocks decode to */
};

typedef struct frame_scanner {
  int fd;
  off_t offset; /* of the next frame */
  uint8_t *in;
  size_t in_capacity;
  uint8_t *out;
  size_t out_capacity;
  ZSTD_DCtx *dctx;
} frame_scanner;

typedef struct frame_info {
  enum frame_kind kind;
  off_t offset;
  size_t compressed_size; /* bytes in the file (for FRAME_OPEN: bytes present) */
  const uint8_t *content;
  size_t content_length;
  uint32_t checksum; /* data frame: its last 4 bytes */
  const char *open_reason;
} frame_info;

int journal_frame_scanner_init(frame_scanner *s, int fd, dome_error *err);
void journal_frame_scanner_free(frame_scanner *s);
/* Next frame at s->offset. Returns 0 with *info (content valid until the next call) and advances past
 * complete frames (not past FRAME_OPEN); -EBADMSG when the bytes are not a valid frame (info->offset
 * set; message says why), -errno on I/O. */
int journal_frame_scanner_next(frame_scanner *s, frame_info *info, dome_error *err);
/* Kind and size of the frame at `offset` without decoding it (readers skipping ahead). Returns 0 with
 * *kind (FRAME_END, FRAME_OPEN for an incomplete frame, FRAME_DATA, or a skippable kind) and *size. */
int journal_frame_scanner_measure(frame_scanner *s, off_t offset, enum frame_kind *kind, size_t *size,
                                  dome_error *err);
/* seq and time (Unix ns) of the first event of the complete data frame at `offset`, decoding only the
 * frame's beginning. Returns 0, or -1 when there is no such frame or line. */
int journal_frame_scanner_first_event(frame_scanner *s, off_t offset, uint64_t *seq, int64_t *time_ns);

/* ---- event line scanning (top-level members of a canonical line) ---- */
typedef struct line_fields {
  uint64_t seq;
  bool has_seq;
  const char *time; /* points into the line, without quotes */
  size_t time_length;
  const char *type;
  size_t type_length;
} line_fields;
/* Fast structural scan of one line: top-level object, finds seq/time/type. Returns 0 or -1. */
int journal_scan_line(const char *line, size_t length, line_fields *out);

/* ---- signing keys and checkpoints ---- */
typedef struct journal_key {
  uint8_t public_key[crypto_sign_PUBLICKEYBYTES];
  uint8_t secret_key[crypto_sign_SECRETKEYBYTES];
  char key_id[17];
  bool has_secret;
} journal_key;

/* Load the seed at path, or generate it (0600) and export <path minus .key>.pub. */
int journal_key_load_or_create(const char *path, journal_key *key, dome_error *err);
int journal_key_load_public(const char *path, journal_key *key, dome_error *err);
void journal_public_key_path(const char *secret_path, char *buffer, size_t size);
/* Signed message of section 5 of the format. Returns malloc'd string. */
char *journal_checkpoint_message(uint64_t tree_size, const char *root_hex, const char *time);
/* Check a parsed journal.checkpoint event: fields, tree_size == seq-1, root, signature with key. */
int journal_checkpoint_check(const json_t *event, const uint8_t root[JOURNAL_HASH_BYTES],
                             const journal_key *key, dome_error *err);

/* ---- parallel frame checking (verification; verify_frames.c) ---- */
enum frame_work_status {
  FRAME_WORK_OK,          /* decoded, lines consecutive and in time order, leaves hashed */
  FRAME_WORK_SERIAL,      /* decoded, but something is off: the caller checks it line by line */
  FRAME_WORK_UNDECODABLE, /* not a valid zstd frame: the caller re-reads it with the frame scanner */
};

/* One complete data frame handed to the pool: the caller fills compressed, compressed_size (capacity
 * its own), offset and checksum; a worker fills the rest. */
typedef struct frame_work {
  uint8_t *compressed;
  size_t compressed_size, compressed_capacity;
  off_t offset;
  uint32_t checksum;
  bool done;
  enum frame_work_status status;
  char *content; /* decoded lines */
  size_t content_length, content_capacity;
  size_t lines, line_capacity;
  uint32_t *offsets, *lengths; /* of each line in content, without its newline */
  bool *checkpoint;            /* the line is a journal.checkpoint */
  uint8_t (*leaves)[JOURNAL_HASH_BYTES];
  uint64_t first_seq;                 /* of line 0; the others follow it */
  const char *first_time, *last_time; /* into content, without quotes */
  size_t first_time_length, last_time_length;
} frame_work;

typedef struct frame_pool frame_pool;
/* One worker per online core (at most 8), 2 frame slots per worker and 2 more; the caller checks
 * frames too while it waits for the oldest. NULL when out of memory/threads. */
frame_pool *journal_frame_pool_create(void);
bool journal_frame_pool_full(const frame_pool *p);    /* every slot submitted and not yet released */
bool journal_frame_pool_pending(const frame_pool *p); /* some slot submitted and not yet released */
/* The slot to fill next (only when !journal_frame_pool_full), then journal_frame_pool_submit to hand it over.
 */
frame_work *journal_frame_pool_next_slot(frame_pool *p);
void journal_frame_pool_submit(frame_pool *p);
/* The oldest submitted frame, waiting until a worker is done with it; journal_frame_pool_release frees its
 * slot. */
frame_work *journal_frame_pool_oldest(frame_pool *p);
void journal_frame_pool_release(frame_pool *p);
void journal_frame_pool_free(frame_pool *p);

int64_t journal_now_ns(void);
int journal_fsync_directory(const char *directory, dome_error *err);

#endif
