/* Reading a journal in seq order with filters, in bounded memory (one frame at a time), and following
 * it as it grows (`dome audit stream --follow`). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

struct journal_reader {
  char *directory;
  journal_filter filter;
  char *agent, *exec_id, *type;
  journal_segment *segments;
  int segment_count;
  int index; /* current segment; -1 before the first */
  int fd;
  frame_scanner scanner;
  bool scanner_ready;
  const char *content;
  size_t content_length, position;
  bool in_open_frame; /* content is an open frame at open_offset; re-read it when the file grows */
  off_t open_offset;
  bool seeking; /* skip whole frames before from_seq / since (decoding only their first line) */
  int inotify;
};

/* First event (seq, time) of segment `name`, or -1. */
static int segment_first_event(const char *directory, const char *name, uint64_t *seq, int64_t *time_ns) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", directory, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  frame_scanner scanner;
  dome_error ignored;
  int r = -1;
  if (journal_frame_scanner_init(&scanner, fd, &ignored) == 0) {
    enum frame_kind kind;
    size_t size;
    if (journal_frame_scanner_measure(&scanner, 0, &kind, &size, &ignored) == 0 && kind == FRAME_HEADER)
      r = journal_frame_scanner_first_event(&scanner, (off_t)size, seq, time_ns);
    journal_frame_scanner_free(&scanner);
  }
  close(fd);
  return r;
}

int journal_reader_open(const char *directory, const journal_filter *filter, journal_reader **out,
                        dome_error *err) {
  journal_reader *r = calloc(1, sizeof *r);
  if (!r) return dome_error_set(err, ENOMEM, "journal reader: out of memory");
  r->fd = -1;
  r->index = -1;
  r->inotify = -1;
  if (filter) r->filter = *filter;
  r->directory = strdup(directory);
  r->agent = r->filter.agent ? strdup(r->filter.agent) : NULL;
  r->exec_id = r->filter.exec_id ? strdup(r->filter.exec_id) : NULL;
  if (r->filter.type) {
    r->type = strdup(r->filter.type);
    size_t n = r->type ? strlen(r->type) : 0;
    if (n >= 2 && strcmp(r->type + n - 2, ".*") == 0) r->type[n - 1] = '\0'; /* "exec.*" -> prefix "exec." */
  }
  int count = journal_segments_list(directory, &r->segments, err);
  if (count < 0) {
    journal_reader_close(r);
    return count;
  }
  r->segment_count = count;
  /* Start at the last segment whose first seq is <= from_seq, and whose first event is before since
   * (times are non-decreasing with seq). */
  for (int i = 0; i < count; i++)
    if (r->filter.from_seq && r->segments[i].first_seq <= r->filter.from_seq) r->index = i - 1;
  if (r->filter.since_ns) {
    for (int i = r->index + 2; i < count; i++) {
      uint64_t seq;
      int64_t time_ns;
      if (segment_first_event(directory, r->segments[i].name, &seq, &time_ns) < 0 ||
          time_ns >= r->filter.since_ns)
        break;
      r->index = i - 1;
    }
  }
  r->seeking = r->filter.from_seq > 1 || r->filter.since_ns > 0;
  if (r->filter.follow) {
    r->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (r->inotify >= 0) inotify_add_watch(r->inotify, directory, IN_MODIFY | IN_CREATE | IN_MOVED_TO);
  }
  *out = r;
  return 0;
}

void journal_reader_close(journal_reader *r) {
  if (!r) return;
  if (r->scanner_ready) journal_frame_scanner_free(&r->scanner);
  if (r->fd >= 0) close(r->fd);
  if (r->inotify >= 0) close(r->inotify);
  free(r->segments);
  free(r->directory);
  free(r->agent);
  free(r->exec_id);
  free(r->type);
  free(r);
}

static int open_segment(journal_reader *r, int index, dome_error *err) {
  if (r->scanner_ready) journal_frame_scanner_free(&r->scanner);
  r->scanner_ready = false;
  if (r->fd >= 0) close(r->fd);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", r->directory, r->segments[index].name);
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0) return dome_error_set_errno(err, errno, "open segment `%s`", path);
  int rc = journal_frame_scanner_init(&r->scanner, r->fd, err);
  if (rc < 0) return rc;
  r->scanner_ready = true;
  r->index = index;
  r->content_length = r->position = 0;
  r->in_open_frame = false;
  return 0;
}

/* Skip the data frames at the scanner's position whose events all come before the filter's from_seq /
 * since: those whose *next* frame starts at or before the target. Costs one partial decode a frame. */
static void skip_frames_before_target(journal_reader *r, dome_error *err) {
  for (;;) {
    enum frame_kind kind;
    size_t size;
    if (journal_frame_scanner_measure(&r->scanner, r->scanner.offset, &kind, &size, err) < 0 ||
        kind != FRAME_DATA)
      return;
    uint64_t next_seq;
    int64_t next_time;
    if (journal_frame_scanner_first_event(&r->scanner, r->scanner.offset + (off_t)size, &next_seq,
                                          &next_time) < 0)
      return;
    bool before = (r->filter.from_seq <= 1 || next_seq <= r->filter.from_seq) &&
                  (r->filter.since_ns == 0 || next_time < r->filter.since_ns);
    if (!before) return;
    r->scanner.offset += (off_t)size;
  }
}

/* 1: a frame with lines loaded; 0: nothing more right now; <0 error. */
static int load_frame(journal_reader *r, dome_error *err) {
  for (;;) {
    if (!r->scanner_ready) {
      if (r->index + 1 >= r->segment_count) return 0;
      int rc = open_segment(r, r->index + 1, err);
      if (rc < 0) return rc;
    }
    size_t already = 0;
    if (r->in_open_frame) {
      r->scanner.offset = r->open_offset;
      already = r->position;
    } else if (r->seeking) {
      skip_frames_before_target(r, err);
    }
    frame_info info;
    int rc = journal_frame_scanner_next(&r->scanner, &info, err);
    if (rc < 0)
      return dome_error_wrap(err, "segment `%s/%s`", r->directory, r->segments[r->index].name), -EBADMSG;
    switch (info.kind) {
      case FRAME_HEADER:
      case FRAME_SEEK_TABLE:
      case FRAME_SKIPPABLE:
        continue;
      case FRAME_DATA:
        r->seeking = false;
        r->content = (const char *)info.content;
        r->content_length = info.content_length;
        r->position = already;
        r->in_open_frame = false;
        if (r->position < r->content_length) return 1;
        continue;
      case FRAME_OPEN: {
        r->seeking = false;
        /* Only the complete lines of an open frame. */
        size_t usable = info.content_length;
        while (usable && info.content[usable - 1] != '\n') usable--;
        r->content = (const char *)info.content;
        r->content_length = usable;
        r->position = already;
        r->in_open_frame = true;
        r->open_offset = info.offset;
        if (r->position < r->content_length) return 1;
        if (r->index + 1 < r->segment_count) { /* a torn tail of an older segment: skip it */
          journal_frame_scanner_free(&r->scanner);
          r->scanner_ready = false;
          continue;
        }
        return 0;
      }
      case FRAME_END:
        if (r->index + 1 < r->segment_count) {
          journal_frame_scanner_free(&r->scanner);
          r->scanner_ready = false;
          continue;
        }
        return 0;
    }
  }
}

static bool refresh_segments(journal_reader *r) {
  dome_error ignored;
  journal_segment *segments = NULL;
  int count = journal_segments_list(r->directory, &segments, &ignored);
  if (count <= r->segment_count) {
    free(segments);
    return false;
  }
  /* Keep the position: segments only ever get added after the current one (or removed before it). */
  uint64_t current = r->index >= 0 ? r->segments[r->index].first_seq : 0;
  free(r->segments);
  r->segments = segments;
  r->segment_count = count;
  for (int i = 0; i < count; i++)
    if (r->index >= 0 && segments[i].first_seq == current) r->index = i;
  return true;
}

static bool matches(journal_reader *r, const line_fields *fields, json_t **event, const char *line,
                    size_t length, int64_t time_ns) {
  const journal_filter *f = &r->filter;
  if (f->from_seq && fields->seq < f->from_seq) return false;
  if (f->to_seq && fields->seq > f->to_seq) return false;
  if (f->since_ns && time_ns < f->since_ns) return false;
  if (f->until_ns && time_ns >= f->until_ns) return false;
  if (r->type) {
    size_t n = strlen(r->type);
    bool prefix = n && r->type[n - 1] == '.';
    if (!fields->type || (prefix ? fields->type_length < n || memcmp(fields->type, r->type, n) != 0
                                 : fields->type_length != n || memcmp(fields->type, r->type, n) != 0))
      return false;
  }
  if (r->agent || r->exec_id) {
    if (!*event) *event = json_loadb(line, length, 0, NULL);
    if (!*event) return false;
    const char *agent = json_string_value(json_object_get(*event, "agent"));
    const char *exec_id = json_string_value(json_object_get(*event, "exec_id"));
    if (r->agent && (!agent || strcmp(agent, r->agent) != 0)) return false;
    if (r->exec_id && (!exec_id || strcmp(exec_id, r->exec_id) != 0)) return false;
  }
  return true;
}

static int wait_for_growth(journal_reader *r, int timeout_ms) {
  if (r->inotify >= 0) {
    struct pollfd p = {.fd = r->inotify, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms < 0 || timeout_ms > 200 ? 200 : timeout_ms);
    if (n > 0) {
      char buffer[4096];
      while (read(r->inotify, buffer, sizeof buffer) > 0) {
      }
    }
    return n;
  }
  usleep((useconds_t)(timeout_ms >= 0 && timeout_ms < 50 ? timeout_ms : 50) * 1000);
  return 0;
}

int journal_reader_next(journal_reader *r, bool parse_json, journal_record *record, dome_error *err) {
  int64_t deadline = r->filter.follow_timeout_ms >= 0
                         ? journal_now_ns() + (int64_t)r->filter.follow_timeout_ms * 1000000
                         : INT64_MAX;
  for (;;) {
    while (r->position < r->content_length) {
      const char *line = r->content + r->position;
      const char *newline = memchr(line, '\n', r->content_length - r->position);
      size_t length = newline ? (size_t)(newline - line) : r->content_length - r->position;
      r->position += length + 1;
      line_fields fields;
      if (journal_scan_line(line, length, &fields) < 0)
        return dome_error_set(err, EBADMSG, "segment `%s/%s`: malformed event line", r->directory,
                              r->segments[r->index].name);
      char time_text[64];
      int64_t time_ns = 0;
      snprintf(time_text, sizeof time_text, "%.*s", (int)fields.time_length, fields.time ? fields.time : "");
      dome_error ignored;
      journal_parse_time(time_text, &time_ns, &ignored);
      json_t *event = NULL;
      if (!matches(r, &fields, &event, line, length, time_ns)) {
        json_decref(event);
        if (r->filter.to_seq && fields.seq >= r->filter.to_seq && !r->filter.follow) return 0;
        continue;
      }
      if (parse_json && !event) {
        json_error_t jerr;
        event = json_loadb(line, length, 0, &jerr);
        if (!event)
          return dome_error_set(err, EBADMSG, "seq %" PRIu64 ": invalid JSON: %s", fields.seq, jerr.text);
      }
      if (!parse_json) {
        json_decref(event);
        event = NULL;
      }
      *record = (journal_record){fields.seq, time_ns, line, length, event};
      return 1;
    }
    int rc = load_frame(r, err);
    if (rc < 0) return rc;
    if (rc > 0) continue;
    if (!r->filter.follow) return 0;
    if (refresh_segments(r)) continue;
    if (journal_now_ns() >= deadline) return -EAGAIN;
    wait_for_growth(r, r->filter.follow_timeout_ms);
  }
}
