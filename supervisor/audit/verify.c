/* Verification of a whole journal (docs/journal-format.md section 6): frames, seq continuity, time order,
 * seek tables, Merkle roots of every checkpoint, Ed25519 signatures, and the signed head file. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"
#include "supervisor/common/cleanup.h"

typedef struct verifier {
  const char *directory;
  journal_key key;
  journal_verify_result *result;
  merkle_frontier tree;
  uint64_t expected; /* next seq */
  char last_time[40];
  uint64_t last_good_checkpoint; /* tree size */
  uint64_t head_seq;             /* seq of checkpoint.json's event, 0 if none */
  char *head_line;
  bool head_seen;
  seek_entry *entries;
  uint64_t *entry_first_seq; /* first seq of each frame of the current segment */
  size_t entry_count, entry_capacity;
  /* A crash-recovery in progress (recovery.tmp): the segment it names ends at recovery_offset and its
   * lines follow from the file. */
  char recovery_segment[64];
  long long recovery_offset;
  frame_pool *frames; /* parallel decoding and leaf hashing of data frames; NULL: all serial */
  struct line_table *lines;
  char *recovery_lines;
  size_t recovery_length;
} verifier;

__attribute__((format(printf, 3, 4))) static int bad(verifier *v, uint64_t seq, const char *format, ...) {
  v->result->bad_seq = seq ? seq : 1;
  va_list args;
  va_start(args, format);
  vsnprintf(v->result->reason, sizeof v->result->reason, format, args);
  va_end(args);
  return -EBADMSG;
}

static void add_entry(verifier *v, uint32_t compressed, uint32_t decompressed, uint32_t checksum) {
  if (v->entry_count == v->entry_capacity) {
    v->entry_capacity = v->entry_capacity ? v->entry_capacity * 2 : 64;
    seek_entry *grown = realloc(v->entries, v->entry_capacity * sizeof *grown);
    uint64_t *seqs = realloc(v->entry_first_seq, v->entry_capacity * sizeof *seqs);
    if (!grown || !seqs) abort();
    v->entries = grown;
    v->entry_first_seq = seqs;
  }
  v->entry_first_seq[v->entry_count] = v->expected;
  v->entries[v->entry_count++] = (seek_entry){compressed, decompressed, checksum};
}

/* Per-frame scratch of check_lines: where each line is, and its leaf hash. */
typedef struct line_table {
  uint32_t *offsets, *lengths;
  uint64_t *seqs;
  bool *checkpoint;
  uint8_t (*leaves)[JOURNAL_HASH_BYTES];
  size_t capacity;
} line_table;

static int line_table_reserve(line_table *t, size_t n) {
  if (n <= t->capacity) return 0;
  size_t capacity = t->capacity ? t->capacity : 1024;
  while (capacity < n) capacity *= 2;
  uint32_t *offsets = realloc(t->offsets, capacity * sizeof *offsets);
  if (offsets) t->offsets = offsets;
  uint32_t *lengths = realloc(t->lengths, capacity * sizeof *lengths);
  if (lengths) t->lengths = lengths;
  uint64_t *seqs = realloc(t->seqs, capacity * sizeof *seqs);
  if (seqs) t->seqs = seqs;
  bool *checkpoint = realloc(t->checkpoint, capacity * sizeof *checkpoint);
  if (checkpoint) t->checkpoint = checkpoint;
  uint8_t(*leaves)[JOURNAL_HASH_BYTES] = realloc(t->leaves, capacity * sizeof *leaves);
  if (leaves) t->leaves = leaves;
  if (!offsets || !lengths || !seqs || !checkpoint || !leaves) return -ENOMEM;
  t->capacity = capacity;
  return 0;
}

static void line_table_free(line_table *t) {
  free(t->offsets);
  free(t->lengths);
  free(t->seqs);
  free(t->checkpoint);
  free(t->leaves);
}

/* Add leaves[0..count) to the frontier as the largest aligned perfect subtrees they form, each reduced
 * level by level in place (leaves[] is scratch afterwards). */
static void append_leaves(verifier *v, uint8_t (*leaves)[JOURNAL_HASH_BYTES], size_t count) {
  size_t i = 0;
  while (i < count) {
    uint64_t size = v->tree.size;
    int height = 0;
    while (height < 62 && (size & ((2ull << height) - 1)) == 0 && (2ull << height) <= count - i) height++;
    size_t m = (size_t)1 << height;
    uint8_t(*level)[JOURNAL_HASH_BYTES] = leaves + i;
    for (size_t width = m; width > 1; width /= 2)
      for (size_t k = 0; k < width / 2; k++)
        journal_merkle_node_hash(level[2 * k], level[2 * k + 1], level[k]);
    journal_merkle_append_subtree(&v->tree, level[0], height);
    i += m;
  }
}

static int ordered_pass(verifier *v, const char *content, const uint32_t *offsets, const uint32_t *lengths,
                        uint64_t first_seq, const bool *checkpoint, uint8_t (*leaves)[JOURNAL_HASH_BYTES],
                        size_t n);

/* The serial check of a frame's lines (frames the pool found something off in, an open tail, recovery
 * lines): (1) structure, seq continuity and time order; (2) leaf hashes; (3) the ordered pass. The
 * first problem in seq order wins. */
static int check_lines(verifier *v, const char *segment, const char *content, size_t length) {
  line_table *t = v->lines;
  size_t n = 0;
  int scan_error = 0;
  uint64_t scan_bad_seq = 0;
  char scan_reason[sizeof v->result->reason] = "";
  const char *p = content, *end = content + length;
  uint64_t expected = v->expected;
  while (p < end) {
    const char *newline = memchr(p, '\n', (size_t)(end - p));
    size_t line_length = newline ? (size_t)(newline - p) : (size_t)(end - p);
    line_fields fields;
    if (!newline) {
      scan_error =
          bad(v, expected, "segment %s: event line without newline (seq %" PRIu64 ")", segment, expected);
    } else if (journal_scan_line(p, line_length, &fields) < 0) {
      scan_error = bad(v, expected, "segment %s: malformed event line where seq %" PRIu64 " was expected",
                       segment, expected);
    } else if (fields.seq != expected) {
      if (fields.seq > expected)
        scan_error = bad(v, expected, "seq %" PRIu64 "..%" PRIu64 " missing (found seq %" PRIu64 ")",
                         expected, fields.seq - 1, fields.seq);
      else
        scan_error = bad(v, expected,
                         "seq %" PRIu64 " found where seq %" PRIu64 " was expected (reordered or duplicated)",
                         fields.seq, expected);
    } else if (!fields.time || fields.time_length >= sizeof v->last_time) {
      scan_error = bad(v, fields.seq, "seq %" PRIu64 ": no time", fields.seq);
    } else if (v->last_time[0] && strncmp(fields.time, v->last_time, fields.time_length) < 0) {
      scan_error = bad(v, fields.seq, "seq %" PRIu64 ": time %.*s earlier than the previous event's %s",
                       fields.seq, (int)fields.time_length, fields.time, v->last_time);
    } else if (line_table_reserve(t, n + 1) < 0) {
      scan_error = bad(v, fields.seq, "out of memory");
    }
    if (scan_error) {
      scan_bad_seq = v->result->bad_seq;
      memcpy(scan_reason, v->result->reason, sizeof scan_reason);
      break;
    }
    memcpy(v->last_time, fields.time, fields.time_length);
    v->last_time[fields.time_length] = '\0';
    t->offsets[n] = (uint32_t)(p - content);
    t->lengths[n] = (uint32_t)line_length;
    t->seqs[n] = fields.seq;
    t->checkpoint[n] =
        fields.type && fields.type_length == 18 && memcmp(fields.type, "journal.checkpoint", 18) == 0;
    n++;
    expected++;
    p = newline + 1;
  }
  for (size_t i = 0; i < n; i++)
    journal_merkle_leaf_hash(content + t->offsets[i], t->lengths[i], t->leaves[i]);
  int r = ordered_pass(v, content, t->offsets, t->lengths, n ? t->seqs[0] : 0, t->checkpoint, t->leaves, n);
  if (r < 0) return r;
  if (scan_error) {
    v->result->bad_seq = scan_bad_seq;
    memcpy(v->result->reason, scan_reason, sizeof scan_reason);
    return scan_error;
  }
  return 0;
}

/* The part of checking a frame that needs the journal's order: lines[0..n) are consecutive from
 * first_seq with their leaves hashed; checkpoint roots and signatures, the signed head, the tree. */
static int ordered_pass(verifier *v, const char *content, const uint32_t *offsets, const uint32_t *lengths,
                        uint64_t first_seq, const bool *checkpoint, uint8_t (*leaves)[JOURNAL_HASH_BYTES],
                        size_t n) {
  for (size_t i = 0; i < n;) {
    if (checkpoint[i]) { /* needs the tree of exactly the events before it */
      const char *line = content + offsets[i];
      uint64_t seq = first_seq + i;
      json_error_t jerr;
      json_t *event = json_loadb(line, lengths[i], 0, &jerr);
      if (!event) return bad(v, seq, "seq %" PRIu64 ": invalid JSON: %s", seq, jerr.text);
      uint8_t root[JOURNAL_HASH_BYTES];
      journal_merkle_root(&v->tree, root);
      dome_error err;
      int r = journal_checkpoint_check(event, root, &v->key, &err);
      json_decref(event);
      if (r < 0)
        return bad(v, seq,
                   "seq %" PRIu64 ": %s (an event in seq %" PRIu64 "..%" PRIu64
                   " or the checkpoint was altered)",
                   seq, err.message, v->last_good_checkpoint + 1, seq);
      v->last_good_checkpoint = seq - 1;
      v->result->checkpoints++;
      v->result->signed_tree_size = seq - 1;
      v->result->checkpoint_seq = seq;
    }
    size_t run = i + 1; /* lines up to the next checkpoint go into the tree together */
    while (run < n && !checkpoint[run]) run++;
    for (size_t k = i; k < run; k++) {
      uint64_t seq = first_seq + k;
      if (v->head_seq == seq) {
        if (strlen(v->head_line) != lengths[k] || memcmp(v->head_line, content + offsets[k], lengths[k]) != 0)
          return bad(v, seq, "seq %" PRIu64 ": differs from the signed head checkpoint.json", seq);
        v->head_seen = true;
      }
      v->result->events++;
      v->result->last_seq = seq;
      v->result->json_bytes += lengths[k] + 1;
      v->expected++;
    }
    append_leaves(v, leaves + i, run - i);
    i = run;
  }
  return 0;
}

/* The oldest frame handed to the pool, checked in file order: the ordered pass on the worker's lines and
 * leaves when it found them clean and they continue the journal, else the serial check (which words
 * any error exactly as for a frame read directly). */
static int consume_frame(verifier *v, const journal_segment *segment, frame_scanner *scanner) {
  frame_work *w = journal_frame_pool_oldest(v->frames);
  int r;
  if (w->status == FRAME_WORK_UNDECODABLE) { /* read it again with the scanner for its error */
    off_t saved = scanner->offset;
    scanner->offset = w->offset;
    frame_info info;
    dome_error frame_err = {0};
    r = journal_frame_scanner_next(scanner, &info, &frame_err);
    scanner->offset = saved;
    if (r < 0) {
      r = bad(v, v->expected, "segment %s: %s (the frame should start with seq %" PRIu64 ")", segment->name,
              frame_err.message, v->expected);
    } else {
      add_entry(v, (uint32_t)info.compressed_size, (uint32_t)info.content_length, info.checksum);
      r = check_lines(v, segment->name, (const char *)info.content, info.content_length);
    }
  } else {
    add_entry(v, (uint32_t)w->compressed_size, (uint32_t)w->content_length, w->checksum);
    if (w->status == FRAME_WORK_OK && w->first_seq == v->expected &&
        (!v->last_time[0] || strncmp(w->first_time, v->last_time, w->first_time_length) >= 0)) {
      r = ordered_pass(v, w->content, w->offsets, w->lengths, w->first_seq, w->checkpoint, w->leaves,
                       w->lines);
      memcpy(v->last_time, w->last_time, w->last_time_length);
      v->last_time[w->last_time_length] = '\0';
    } else {
      r = check_lines(v, segment->name, w->content, w->content_length);
    }
  }
  journal_frame_pool_release(v->frames);
  return r;
}

/* Check every frame in flight, in order; after an error (or when r is one already), drop the rest
 * unchecked. Returns the first error or r. */
static int drain_frames(verifier *v, const journal_segment *segment, frame_scanner *scanner, int r) {
  while (v->frames && journal_frame_pool_pending(v->frames)) {
    if (r < 0) {
      journal_frame_pool_oldest(v->frames);
      journal_frame_pool_release(v->frames);
    } else {
      r = consume_frame(v, segment, scanner);
    }
  }
  return r;
}

/* Hand the complete data frame at the scanner's offset to the pool (after checking the oldest one when
 * every slot is taken). Returns 1 when handed over, 0 when the next frame is something else, or the
 * error of a frame checked meanwhile. */
static int submit_frame(verifier *v, const journal_segment *segment, frame_scanner *scanner) {
  enum frame_kind kind;
  size_t size;
  dome_error ignored;
  if (journal_frame_scanner_measure(scanner, scanner->offset, &kind, &size, &ignored) < 0 ||
      kind != FRAME_DATA || size < 4)
    return 0;
  if (journal_frame_pool_full(v->frames)) {
    int r = consume_frame(v, segment, scanner);
    if (r < 0) return r;
    /* the scanner's buffer was reused by an error path only; measure again to be sure */
    if (journal_frame_scanner_measure(scanner, scanner->offset, &kind, &size, &ignored) < 0 ||
        kind != FRAME_DATA)
      return 0;
  }
  frame_work *w = journal_frame_pool_next_slot(v->frames);
  if (w->compressed_capacity < size) {
    uint8_t *grown = realloc(w->compressed, size);
    if (!grown) return 0; /* the serial path copes */
    w->compressed = grown;
    w->compressed_capacity = size;
  }
  memcpy(w->compressed, scanner->in, size);
  w->compressed_size = size;
  w->offset = scanner->offset;
  w->checksum = journal_read_le32(scanner->in + size - 4);
  journal_frame_pool_submit(v->frames);
  scanner->offset += (off_t)size;
  v->result->compressed_bytes += size;
  return 1;
}

static int verify_segment(verifier *v, const journal_segment *segment, bool last, dome_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", v->directory, segment->name);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", path);
  frame_scanner scanner;
  int r = journal_frame_scanner_init(&scanner, fd, err);
  if (r < 0) return r;
  v->entry_count = 0;
  bool header = false, sealed = false;
  bool recovering = last && v->recovery_lines && strcmp(segment->name, v->recovery_segment) == 0;
  for (;;) {
    /* Complete data frames go to the worker pool; anything else is handled here once the frames in
     * flight before it are checked. */
    if (v->frames && header && !sealed && !(recovering && scanner.offset >= v->recovery_offset)) {
      r = submit_frame(v, segment, &scanner);
      if (r == 1) continue;
      if (r < 0) break;
    }
    r = drain_frames(v, segment, &scanner, 0);
    if (r < 0) break;
    frame_info info;
    dome_error frame_err = {0};
    r = journal_frame_scanner_next(&scanner, &info, &frame_err);
    if (recovering && info.offset >= v->recovery_offset && header) {
      /* Recovery was interrupted: the kept lines are in recovery.tmp; the next open writes them back. */
      r = check_lines(v, segment->name, v->recovery_lines, v->recovery_length);
      v->result->tail_unterminated = true;
      break;
    }
    if (r < 0) {
      r = bad(v, v->expected, "segment %s: %s (the frame should start with seq %" PRIu64 ")", segment->name,
              frame_err.message, v->expected);
      break;
    }
    v->result->compressed_bytes += info.compressed_size;
    if (info.kind == FRAME_END) {
      if (!sealed && !last)
        r = bad(v, v->expected, "segment %s: no seek table (truncated after seq %" PRIu64 ")", segment->name,
                v->expected - 1);
      break;
    }
    if (sealed) {
      r = bad(v, v->expected, "segment %s: data after the seek table at offset %lld", segment->name,
              (long long)info.offset);
      break;
    }
    if (!header) {
      uint64_t first_seq;
      merkle_frontier frontier;
      dome_error header_err;
      if (info.kind != FRAME_HEADER ||
          journal_header_decode(info.content, info.content_length, &first_seq, &frontier, &header_err) < 0) {
        r = bad(v, v->expected ? v->expected : segment->first_seq, "segment %s: missing or damaged header",
                segment->name);
        break;
      }
      if (first_seq != segment->first_seq) {
        r = bad(v, v->expected ? v->expected : first_seq, "segment %s: header says first seq %" PRIu64,
                segment->name, first_seq);
        break;
      }
      if (v->expected == 0) { /* the oldest segment kept */
        v->tree = frontier;
        v->expected = first_seq;
        v->result->first_seq = first_seq;
        v->last_good_checkpoint = first_seq - 1;
      } else if (first_seq != v->expected) {
        r = bad(v, v->expected,
                "segment %s starts at seq %" PRIu64 " but seq %" PRIu64
                " comes next (segment missing or truncated)",
                segment->name, first_seq, v->expected);
        break;
      } else if (!journal_merkle_frontier_equal(&frontier, &v->tree)) {
        r = bad(v, first_seq, "segment %s: header's Merkle frontier does not match the events before it",
                segment->name);
        break;
      }
      header = true;
      add_entry(v, (uint32_t)info.compressed_size, 0, JOURNAL_EMPTY_CHECKSUM);
      continue;
    }
    if (info.kind == FRAME_SEEK_TABLE) {
      seek_entry *entries = NULL;
      int count = journal_seek_table_decode(info.content, info.content_length, &entries);
      if (count < 0) {
        r = bad(v, v->expected - 1, "segment %s: damaged seek table", segment->name);
        break;
      }
      size_t differs = v->entry_count;
      for (size_t i = 0; i < v->entry_count && differs == v->entry_count; i++)
        if (i >= (size_t)count || entries[i].compressed_size != v->entries[i].compressed_size ||
            entries[i].decompressed_size != v->entries[i].decompressed_size ||
            entries[i].checksum != v->entries[i].checksum)
          differs = i;
      free(entries);
      if (differs < v->entry_count || (size_t)count != v->entry_count) {
        uint64_t seq = differs < v->entry_count ? v->entry_first_seq[differs] : v->expected - 1;
        r = bad(v, seq,
                "segment %s: frame %zu (from seq %" PRIu64 ") differs from the seek table (frame replaced?)",
                segment->name, differs, seq);
        break;
      }
      sealed = true;
      continue;
    }
    if (info.kind == FRAME_OPEN) {
      if (!last) {
        r = bad(v, v->expected, "segment %s: truncated inside a frame at offset %lld", segment->name,
                (long long)info.offset);
        break;
      }
      size_t usable = info.content_length;
      while (usable && info.content[usable - 1] != '\n') usable--;
      r = check_lines(v, segment->name, (const char *)info.content, usable);
      v->result->tail_unterminated = true;
      break;
    }
    if (info.kind == FRAME_DATA) {
      add_entry(v, (uint32_t)info.compressed_size, (uint32_t)info.content_length, info.checksum);
      r = check_lines(v, segment->name, (const char *)info.content, info.content_length);
      if (r < 0) break;
    }
  }
  r = drain_frames(v, segment, &scanner, r);
  journal_frame_scanner_free(&scanner);
  return r;
}

int journal_verify(const char *directory, const char *public_key_path, journal_verify_result *result,
                   dome_error *err) {
  memset(result, 0, sizeof *result);
  if (sodium_init() < 0) return dome_error_set(err, EIO, "libsodium: initialisation failed");
  line_table lines = {0};
  verifier v = {.directory = directory, .result = result, .lines = &lines};
  journal_merkle_init(&v.tree);
  struct stat st;
  if (stat(directory, &st) < 0)
    return dome_error_set_errno(err, errno, "open journal directory `%s`", directory);
  if (!S_ISDIR(st.st_mode)) return dome_error_set(err, ENOTDIR, "journal `%s` is not a directory", directory);
  char key_path[4096];
  if (public_key_path)
    snprintf(key_path, sizeof key_path, "%s", public_key_path);
  else
    snprintf(key_path, sizeof key_path, "%s/signing.pub", directory);
  int r = journal_key_load_public(key_path, &v.key, err);
  if (r < 0) return r;
  /* The signed head: the latest checkpoint line, which must be present unchanged. */
  char head_path[4096];
  snprintf(head_path, sizeof head_path, "%s/checkpoint.json", directory);
  FILE *head = fopen(head_path, "re");
  if (head) {
    size_t capacity = 0;
    ssize_t n = getline(&v.head_line, &capacity, head);
    fclose(head);
    if (n > 0 && v.head_line[n - 1] == '\n') v.head_line[n - 1] = '\0';
    json_t *event = n > 0 ? json_loads(v.head_line, 0, NULL) : NULL;
    v.head_seq = (uint64_t)json_integer_value(json_object_get(event, "seq"));
    json_decref(event);
    if (!v.head_seq) {
      free(v.head_line);
      return dome_error_set(err, EBADMSG, "`%s`: not a checkpoint event", head_path);
    }
  }
  char recovery_path[4096];
  snprintf(recovery_path, sizeof recovery_path, "%s/recovery.tmp", directory);
  FILE *recovery = fopen(recovery_path, "re");
  if (recovery) {
    if (fscanf(recovery, "%63s %lld\n", v.recovery_segment, &v.recovery_offset) == 2) {
      size_t capacity = 0;
      FILE *memory = open_memstream(&v.recovery_lines, &capacity);
      char chunk[65536];
      size_t n;
      while (memory && (n = fread(chunk, 1, sizeof chunk, recovery)) > 0) fwrite(chunk, 1, n, memory);
      if (memory) fclose(memory);
      v.recovery_length = v.recovery_lines ? capacity : 0;
    }
    fclose(recovery);
  }
  journal_segment *segments = NULL;
  int count = journal_segments_list(directory, &segments, err);
  if (count < 0) {
    free(v.head_line);
    free(v.recovery_lines);
    return count;
  }
  result->segments = (uint64_t)count;
  v.frames = journal_frame_pool_create(); /* NULL (no threads): everything is checked serially */
  for (int i = 0; r == 0 && i < count; i++) r = verify_segment(&v, &segments[i], i == count - 1, err);
  journal_frame_pool_free(v.frames);
  line_table_free(&lines);
  if (r == 0 && v.head_seq && !v.head_seen) {
    if (v.head_seq >= v.expected)
      r = bad(&v, v.expected ? v.expected : 1,
              "checkpoint.json vouches for seq %" PRIu64 " but the journal ends at seq %" PRIu64
              " (events removed from the end)",
              v.head_seq, v.expected ? v.expected - 1 : 0);
    else if (v.head_seq >= result->first_seq)
      r = bad(&v, v.head_seq, "checkpoint.json's seq %" PRIu64 " not found", v.head_seq);
  }
  free(segments);
  free(v.entries);
  free(v.entry_first_seq);
  free(v.head_line);
  free(v.recovery_lines);
  if (r == -EBADMSG)
    return dome_error_set(err, EBADMSG, "seq %" PRIu64 ": %s", result->bad_seq, result->reason);
  return r;
}
