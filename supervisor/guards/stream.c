/* Streaming redaction of one output field.
 *
 * Bytes are appended to a window and scanned by the class's vectorscan stream. A reported end of rule r
 * marks rule r pending from (end - back) on. Pending rules are confirmed with PCRE2 over the window in
 * hard partial mode: a complete match is final (redacted if its validator accepts it); a partial match
 * (the window ends inside it) keeps the rule pending from the partial match's start; no match clears it.
 * Bytes are emitted up to `limit` = min(end - hold_back, every pending start): a match that has not been
 * reported yet starts at most hold_back bytes before the end (every rule's hs pattern begins where its
 * match begins), and a pending candidate holds its bytes until it is decided. The window keeps CONTEXT
 * bytes before the earliest byte still needed so lookbehinds see the same bytes as in one buffer; its
 * size is bounded by CONTEXT + hold_back + the longest pending candidate (64 KiB) + one piece. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/guards/internal.h"

enum {
  PIECE = 64 * 1024, /* bytes scanned and confirmed at a time; bounds the window growth of one feed */
  CONTEXT = 16,      /* bytes kept before the earliest needed byte, for lookbehinds */
  MATCH_SLOTS = 32,  /* capture pairs */
  /* candidate regions kept per rule (64 KiB at most); more are merged with a neighbour, which is then
   * searched at every byte between (the result may then depend on the chunking). The regions are decided at
   * each piece, so real output stays far below (the former bound of 32 was reached in dense text and made the
   * result depend on the piece size); only text crafted to put a candidate of one detector every few bytes
   * reaches it. */
  PENDING_MAX = 4096,
};

struct span {
  uint64_t start;
  uint64_t end;
  int detector;
};

/* Candidate region of one rule: a match starts at or after `start` and at or before `end` (stream offsets).
 */
struct pending {
  uint64_t start;
  uint64_t end;
};

/* The candidate regions of one rule, sorted and disjoint. */
struct pending_list {
  struct pending *items;
  uint32_t count;
  uint32_t capacity;
};

struct guard_stream {
  const struct guard *guard;
  enum guard_class class_;
  char *field;
  hs_stream_t *hs;
  hs_scratch_t *scratch;
  pcre2_match_data *match_data;
  pcre2_match_context *match_context;
  char *window;
  size_t length;
  size_t capacity;
  uint64_t base;                /* stream offset of window[0] */
  uint64_t emitted;             /* stream offset up to which output has been emitted (or replaced) */
  uint64_t prefiltered;         /* stream offset up to which prefilter positions have been decided */
  struct pending_list *pending; /* per rule */
  uint64_t *redacted_until;     /* per rule: end of its last redacted match (matches do not overlap it) */
  struct span *spans;           /* sorted by start */
  size_t span_count;
  size_t span_capacity;
  uint64_t findings;
  int callback_error;
  bool finished;
  bool failed;
};

/* Which detector names a merged region: exact values first (most specific), then provider formats, then
 * the heuristics (generic-secret, env-assignment). */
static int rank(int detector) {
  const struct guard_detector *d = &guard_detectors[detector];
  if (d->dynamic && d->info.class_ == GUARD_CLASS_PUBLIC) return 0;
  if (d->validator == VALIDATE_ENTROPY || strcmp(d->info.id, "env-assignment") == 0) return 2;
  return 1;
}

static bool before(const struct span *a, uint64_t start, int detector) {
  if (a->start != start) return a->start < start;
  int ra = rank(a->detector), rb = rank(detector);
  return ra != rb ? ra < rb : a->detector <= detector;
}

static int add_span(struct guard_stream *s, uint64_t start, uint64_t end, int detector) {
  if (start < s->base) start = s->base;
  if (end <= start || end <= s->emitted) return 0;
  if (s->span_count == s->span_capacity) {
    size_t capacity = s->span_capacity ? s->span_capacity * 2 : 16;
    struct span *grown = realloc(s->spans, capacity * sizeof *grown);
    if (grown == NULL) return -ENOMEM;
    s->spans = grown;
    s->span_capacity = capacity;
  }
  size_t at = s->span_count;
  while (at > 0 && !before(&s->spans[at - 1], start, detector)) at--;
  memmove(&s->spans[at + 1], &s->spans[at], (s->span_count - at) * sizeof *s->spans);
  s->spans[at] = (struct span){start, end, detector};
  s->span_count++;
  return 0;
}

/* Rule `id` may match starting in [start, to]: add to its candidate regions, kept sorted and disjoint
 * (regions that overlap or touch are merged). A report may come before earlier ones (the prefilter reports a
 * block's plain card numbers before its grouped ones): merging it into the last region regardless made that
 * region overlap earlier ones, and the search of the earlier one then skipped the match (the result depended
 * on which reports one piece held). */
static void mark_pending(struct guard_stream *s, unsigned id, uint64_t start, uint64_t to) {
  struct pending_list *list = &s->pending[id];
  size_t n = list->count;
  if (n > 0 && start >= list->items[n - 1].start && start <= list->items[n - 1].end + 1) {
    if (to > list->items[n - 1].end) list->items[n - 1].end = to; /* the usual case: extends the last */
    return;
  }
  size_t lo = n; /* regions [lo, hi) overlap or touch [start, to] */
  while (lo > 0 && list->items[lo - 1].end + 1 >= start) lo--;
  size_t hi = lo;
  while (hi < n && list->items[hi].start <= to + 1) hi++;
  if (lo == hi && n == list->capacity) {
    struct pending *grown = NULL;
    if (list->capacity < PENDING_MAX) {
      uint32_t capacity = list->capacity ? list->capacity * 2 : 8;
      grown = realloc(list->items, capacity * sizeof *grown);
      if (grown != NULL) {
        list->items = grown;
        list->capacity = capacity;
      } else {
        s->callback_error = -ENOMEM;
      }
    }
    if (grown == NULL) {
      if (n == 0) return;
      /* too many separate candidates: merge with the next region (or the last), still covering [start, to] */
      if (lo == n) lo--;
      hi = lo + 1;
    }
  }
  struct pending *items = list->items;
  if (lo == hi) {
    memmove(&items[lo + 1], &items[lo], (n - lo) * sizeof *items);
    items[lo] = (struct pending){start, to};
    list->count++;
    return;
  }
  if (items[lo].start < start) start = items[lo].start;
  if (items[hi - 1].end > to) to = items[hi - 1].end;
  items[lo] = (struct pending){start, to};
  memmove(&items[lo + 1], &items[hi], (n - hi) * sizeof *items);
  list->count -= (uint32_t)(hi - lo - 1);
}

static int on_match(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags,
                    void *context) {
  (void)from;
  (void)flags;
  struct guard_stream *s = context;
  const struct guard_rule *rule = &s->guard->rules[id];
  if (rule->code == NULL) { /* exact value: the match is the span */
    if (add_span(s, to - rule->length, to, rule->detector) < 0) {
      s->callback_error = -ENOMEM;
      return 1;
    }
    return 0;
  }
  if (rule->precheck == GUARD_PRECHECK_ASSIGNMENT && to > s->base &&
      guard_precheck_assignment(s->window, s->length, (size_t)(to - s->base)) == 0)
    return 0; /* no match can continue this keyword (undecided: pending, PCRE2 decides) */
  mark_pending(s, id, to >= rule->back ? to - rule->back : 0, to);
  return 0;
}

static void on_prefilter_hit(void *context, enum guard_trigger kind, size_t start, size_t end) {
  struct guard_stream *s = context;
  mark_pending(s, (unsigned)s->guard->prefilter_rule[s->class_][kind], s->base + start, s->base + end);
}

/* Run the prefilter over the positions decided by the bytes in the window (all of them when final). */
static void prefilter(struct guard_stream *s, bool final) {
  unsigned kinds = s->guard->prefilter_kinds[s->class_];
  if (kinds == 0) return;
  uint64_t end = s->base + s->length;
  uint64_t limit = final ? end : (end > GUARD_PREFILTER_LOOKAHEAD ? end - GUARD_PREFILTER_LOOKAHEAD : 0);
  uint64_t from = s->prefiltered > s->base ? s->prefiltered : s->base; /* never below base: hold-back */
  if (limit <= from) return;
  guard_prefilter_scan(s->window, s->length, (size_t)(from - s->base), (size_t)(limit - s->base), kinds,
                       &s->guard->paths, s->base == 0, on_prefilter_hit, s);
  s->prefiltered = limit;
}

/* A PCRE2 match of `rule` in the window (`rc` from pcre2_match, > 0; `ovector` its pairs of window offsets):
 * the secret's bytes, the rule's secret group when that group took part, else the whole match, go to
 * *value_start..*value_end (window offsets). Returns the detector to redact them as (guard_validate), or -1
 * when the validator rejects the match. */
static int validate_match(const struct guard_stream *s, const struct guard_rule *rule, int rc,
                          const PCRE2_SIZE *ovector, size_t *value_start, size_t *value_end) {
  *value_start = ovector[0];
  *value_end = ovector[1];
  int group = rule->secret_group;
  if (group > 0 && rc > group && ovector[2 * group] != PCRE2_UNSET) {
    *value_start = ovector[2 * group];
    *value_end = ovector[2 * group + 1];
  }
  return guard_validate(s->guard, rule->detector, s->window + ovector[0], ovector[1] - ovector[0],
                        s->window + *value_start, *value_end - *value_start);
}

/* Confirm rule `index`'s candidate regions with PCRE2 (see the file comment). */
static int confirm(struct guard_stream *s, size_t index, bool final, dome_error *err) {
  const struct guard_rule *rule = &s->guard->rules[index];
  struct pending *list = s->pending[index].items;
  size_t count = s->pending[index].count;
  uint64_t end = s->base + s->length;
  uint64_t cursor = s->base + (s->base > 0 ? CONTEXT : 0);
  if (s->redacted_until[index] > cursor) cursor = s->redacted_until[index];
  uint32_t options = (final ? 0 : PCRE2_PARTIAL_HARD) | (s->base > 0 ? PCRE2_NOTBOL : 0);
  s->pending[index].count = 0;
  for (size_t k = 0; k < count; k++) {
    uint64_t start = list[k].start > cursor ? list[k].start : cursor;
    uint64_t reported_end = list[k].end;
    /* Matches starting after the region's last reported end are found when vectorscan reports them. */
    pcre2_set_offset_limit(s->match_context, (PCRE2_SIZE)(reported_end - s->base));
    while (start <= end && start <= reported_end) {
      int rc = pcre2_match(rule->code, (PCRE2_SPTR)s->window, s->length, (PCRE2_SIZE)(start - s->base),
                           options, s->match_data, s->match_context);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(s->match_data);
      uint64_t match_start = s->base + ovector[0];
      if (rc == PCRE2_ERROR_PARTIAL) {
        /* Undecided until more bytes arrive: keep this region from the partial match on, and the rest. */
        list[0] = (struct pending){match_start, reported_end};
        memmove(&list[1], &list[k + 1], (count - k - 1) * sizeof *list);
        s->pending[index].count = (uint32_t)(count - k);
        return 0;
      }
      if (rc < 0) {
        /* Resource limit inside PCRE2: fail closed, redact the whole region. */
        if (add_span(s, start, reported_end, rule->detector) < 0)
          return dome_error_set(err, ENOMEM, "redact: out of memory");
        start = reported_end + 1;
        break;
      }
      size_t value_start, value_end;
      int detector = validate_match(s, rule, rc, ovector, &value_start, &value_end);
      if (detector >= 0 && add_span(s, s->base + value_start, s->base + value_end, detector) < 0)
        return dome_error_set(err, ENOMEM, "redact: out of memory");
      /* After a redacted match, go on after it; after a rejected one, at its next byte: another match may
       * start inside it (`x@a.Bc.d@mail.example`), and which candidates were merged into this region depends
       * on how the stream was chunked, so skipping the rejected match would make the result depend on it. */
      start = s->base + (detector >= 0 && ovector[1] > ovector[0] ? ovector[1] : ovector[0] + 1);
      if (detector >= 0) s->redacted_until[index] = start; /* in any later call too, whatever the chunking */
    }
    cursor = start;
  }
  return 0;
}

static int emit(struct guard_stream *s, const struct guard_sink *sink, const char *data, size_t length,
                dome_error *err) {
  if (length == 0 || sink == NULL || sink->emit == NULL) return 0;
  int r = sink->emit(data, length, sink->context);
  if (r < 0) return dome_error_set(err, -r, "redact field `%s`: output callback failed", s->field);
  return 0;
}

/* Emit everything before `limit`, replacing the spans that start before it (merged when they overlap). */
static int emit_until(struct guard_stream *s, uint64_t limit, const struct guard_sink *sink,
                      dome_error *err) {
  size_t k = 0;
  int r;
  while (k < s->span_count && s->spans[k].start < limit) {
    uint64_t start = s->spans[k].start, end = s->spans[k].end;
    int detector = s->spans[k].detector;
    size_t j = k + 1;
    for (; j < s->span_count && s->spans[j].start < end; j++)
      if (s->spans[j].end > end) end = s->spans[j].end;
    k = j;
    if (start < s->emitted) start = s->emitted;
    if (end <= start) continue;
    if ((r = emit(s, sink, s->window + (s->emitted - s->base), start - s->emitted, err)) < 0) return r;
    const char *id = guard_detectors[detector].info.id;
    char replacement[96];
    int n = snprintf(replacement, sizeof replacement, "[REDACTED:%s]", id);
    if ((r = emit(s, sink, replacement, (size_t)n, err)) < 0) return r;
    struct guard_finding finding = {
        .field = s->field, .detector = id, .offset = start, .length = end - start};
    guard_hmac_hex(s->guard, s->window + (start - s->base), end - start, finding.hmac_hex);
    s->findings++;
    if (sink && sink->finding && (r = sink->finding(&finding, sink->context)) < 0)
      return dome_error_set(err, -r, "redact field `%s`: finding callback failed", s->field);
    s->emitted = end;
  }
  if (k > 0) {
    memmove(s->spans, s->spans + k, (s->span_count - k) * sizeof *s->spans);
    s->span_count -= k;
  }
  if (limit > s->emitted) {
    if ((r = emit(s, sink, s->window + (s->emitted - s->base), limit - s->emitted, err)) < 0) return r;
    s->emitted = limit;
  }
  return 0;
}

/* `limit` lowered to the start of every span that crosses it. A span is emitted only once every byte it
 * covers is decided: a match found later may start inside it, and overlapping spans are merged into one
 * redaction, as in one buffer (emitting the first at once would make that depend on the chunking). */
static uint64_t spans_whole(const struct guard_stream *s, uint64_t limit) {
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t k = 0; k < s->span_count; k++)
      if (s->spans[k].start < limit && s->spans[k].end > limit) {
        limit = s->spans[k].start;
        moved = true;
      }
  }
  return limit;
}

/* Drop the window bytes no longer needed: those before every pending candidate, span and unemitted
 * byte, less CONTEXT bytes kept for lookbehinds. */
static void trim_window(struct guard_stream *s) {
  uint64_t keep = s->emitted;
  for (size_t i = 0; i < s->guard->rule_count; i++)
    if (s->pending[i].count && s->pending[i].items[0].start < keep) keep = s->pending[i].items[0].start;
  if (s->span_count && s->spans[0].start < keep) keep = s->spans[0].start;
  keep = keep > s->base + CONTEXT ? keep - CONTEXT : s->base;
  if (keep > s->base) {
    size_t drop = (size_t)(keep - s->base);
    memmove(s->window, s->window + drop, s->length - drop);
    s->length -= drop;
    s->base = keep;
  }
}

/* Confirm pending rules, emit what is decided, drop window bytes no longer needed. */
static int settle(struct guard_stream *s, const struct guard_sink *sink, bool final, dome_error *err) {
  int r;
  size_t rules = s->guard->rule_count;
  for (size_t i = 0; i < rules; i++)
    if (s->pending[i].count && (r = confirm(s, i, final, err)) < 0) return r;
  uint64_t end = s->base + s->length;
  size_t hold_back = s->guard->hold_back[s->class_];
  uint64_t limit = final ? end : (end > hold_back ? end - hold_back : 0);
  for (size_t i = 0; i < rules; i++)
    if (s->pending[i].count && s->pending[i].items[0].start < limit) limit = s->pending[i].items[0].start;
  if (!final) limit = spans_whole(s, limit);
  if ((r = emit_until(s, limit, sink, err)) < 0) return r;
  trim_window(s);
  return 0;
}

/* Earliest stream offset in [from, limit) at which rule `index` may still start a match that is not
 * decided yet: a literal whose prefix ends the window, a PCRE2 partial match (hard: the window's end was
 * reached while matching), or a complete match its validator accepts with no span recorded for it yet.
 * `limit` when there is none. A PCRE2 failure (resource limit) answers `from`: nothing is flushed. */
static uint64_t undecided_start(struct guard_stream *s, size_t index, uint64_t from, uint64_t limit) {
  const struct guard_rule *rule = &s->guard->rules[index];
  uint64_t end = s->base + s->length;
  if (rule->code == NULL) {
    uint64_t x = end > rule->length ? end - rule->length + 1 : 0;
    for (x = x > from ? x : from; x < limit && x < end; x++) {
      const unsigned char *tail = (const unsigned char *)s->window + (x - s->base);
      size_t n = (size_t)(end - x), i = 0;
      if (rule->caseless)
        while (i < n && tolower(tail[i]) == tolower(rule->literal[i])) i++;
      else
        while (i < n && tail[i] == rule->literal[i]) i++;
      if (i == n) return x;
    }
    return limit;
  }
  pcre2_set_offset_limit(s->match_context, PCRE2_UNSET);
  uint32_t options = PCRE2_PARTIAL_HARD | (s->base > 0 ? PCRE2_NOTBOL : 0);
  uint64_t start = from;
  while (start < limit && start <= end) {
    int rc = pcre2_match(rule->code, (PCRE2_SPTR)s->window, s->length, (PCRE2_SIZE)(start - s->base), options,
                         s->match_data, s->match_context);
    if (rc == PCRE2_ERROR_NOMATCH) return limit;
    PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(s->match_data);
    uint64_t match_start = s->base + ovector[0];
    if (rc == PCRE2_ERROR_PARTIAL) return match_start < limit ? match_start : limit;
    if (rc < 0) return from;
    if (match_start >= limit) return limit;
    size_t value_start, value_end;
    int detector = validate_match(s, rule, rc, ovector, &value_start, &value_end);
    if (detector >= 0) {
      /* accepted: decided only when its redaction is recorded (or already emitted) */
      bool recorded = s->base + value_end <= s->emitted, own = recorded;
      for (size_t k = 0; !recorded && k < s->span_count; k++)
        if (s->spans[k].start <= s->base + value_start && s->spans[k].end >= s->base + value_end) {
          recorded = true;
          own = s->spans[k].detector == rule->detector;
        }
      if (!recorded) return match_start;
      /* this rule's own redaction: its search goes on after it (see confirm); another's: a match of this
       * rule may still start inside it */
      start = own && ovector[1] > ovector[0] ? s->base + ovector[1] : match_start + 1;
    } else {
      start = match_start + 1; /* rejected: another match may start inside it (see confirm) */
    }
  }
  return limit;
}

int guard_stream_flush(struct guard_stream *s, const struct guard_sink *sink, dome_error *err) {
  if (s->failed || s->finished)
    return dome_error_set(err, 0, "redact field `%s`: stream already %s", s->field,
                          s->failed ? "failed" : "finished");
  int r;
  size_t rules = s->guard->rule_count;
  for (size_t i = 0; i < rules; i++)
    if (s->pending[i].count && (r = confirm(s, i, false, err)) < 0) {
      s->failed = true;
      return r;
    }
  uint64_t limit = s->base + s->length;
  for (size_t i = 0; i < rules; i++)
    if (s->pending[i].count && s->pending[i].items[0].start < limit) limit = s->pending[i].items[0].start;
  for (size_t i = 0; i < rules && limit > s->emitted; i++) {
    enum guard_class detector_class = guard_detectors[s->guard->rules[i].detector].info.class_;
    if (detector_class != GUARD_CLASS_PUBLIC && detector_class != s->class_) continue;
    limit = undecided_start(s, i, s->emitted, limit);
  }
  limit = spans_whole(s, limit);
  if (limit <= s->emitted) return 0;
  if ((r = emit_until(s, limit, sink, err)) < 0) {
    s->failed = true;
    return r;
  }
  trim_window(s);
  return 0;
}

uint64_t guard_stream_held_bytes(const struct guard_stream *s) {
  return s->base + s->length - s->emitted;
}

int guard_stream_open_class(const struct guard *guard, const char *field, enum guard_class class_,
                            struct guard_stream **out, dome_error *err) {
  *out = NULL;
  if ((unsigned)class_ >= GUARD_CLASS_COUNT)
    return dome_error_set(err, 0, "open stream: class %d out of range", class_);
  struct guard_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return dome_error_set(err, ENOMEM, "open stream: out of memory");
  s->guard = guard;
  s->class_ = class_;
  s->field = strdup(field ? field : "stdout");
  s->pending = calloc(guard->rule_count + 1, sizeof *s->pending);
  s->redacted_until = calloc(guard->rule_count + 1, sizeof *s->redacted_until);
  s->match_data = pcre2_match_data_create(MATCH_SLOTS, NULL);
  s->match_context = pcre2_match_context_create(NULL);
  if (!s->field || !s->pending || !s->redacted_until || !s->match_data || !s->match_context) {
    guard_stream_close(s);
    return dome_error_set(err, ENOMEM, "open stream: out of memory");
  }
  if (hs_clone_scratch(guard->scratch_prototype, &s->scratch) != HS_SUCCESS ||
      hs_open_stream(guard->database[class_], 0, &s->hs) != HS_SUCCESS) {
    guard_stream_close(s);
    return dome_error_set(err, ENOMEM, "open stream `%s`: vectorscan stream: out of memory",
                          field ? field : "stdout");
  }
  *out = s;
  return 0;
}

int guard_stream_open(const struct guard *guard, const char *field, struct guard_stream **out,
                      dome_error *err) {
  return guard_stream_open_class(guard, field, guard_field_class(guard, field ? field : "stdout"), out, err);
}

static int append(struct guard_stream *s, const char *data, size_t length) {
  if (s->length + length > s->capacity) {
    size_t capacity = s->capacity ? s->capacity : PIECE;
    while (capacity < s->length + length) capacity *= 2;
    char *grown = realloc(s->window, capacity);
    if (grown == NULL) return -ENOMEM;
    s->window = grown;
    s->capacity = capacity;
  }
  memcpy(s->window + s->length, data, length);
  s->length += length;
  return 0;
}

int guard_stream_feed(struct guard_stream *s, const void *data, size_t length, const struct guard_sink *sink,
                      dome_error *err) {
  if (s->failed || s->finished)
    return dome_error_set(err, 0, "redact field `%s`: stream already %s", s->field,
                          s->failed ? "failed" : "finished");
  const char *p = data;
  while (length > 0) {
    size_t n = length < PIECE ? length : PIECE;
    int r = append(s, p, n);
    if (r < 0) {
      s->failed = true;
      return dome_error_set(err, ENOMEM, "redact field `%s`: out of memory", s->field);
    }
    if (hs_scan_stream(s->hs, p, (unsigned)n, 0, s->scratch, on_match, s) != HS_SUCCESS ||
        s->callback_error) {
      s->failed = true;
      return dome_error_set(err, s->callback_error ? -s->callback_error : EIO,
                            "redact field `%s`: scan failed", s->field);
    }
    prefilter(s, false);
    if (s->callback_error) {
      s->failed = true;
      return dome_error_set(err, ENOMEM, "redact field `%s`: out of memory", s->field);
    }
    if ((r = settle(s, sink, false, err)) < 0) {
      s->failed = true;
      return r;
    }
    p += n;
    length -= n;
  }
  return 0;
}

int guard_stream_finish(struct guard_stream *s, const struct guard_sink *sink, dome_error *err) {
  if (s->failed || s->finished)
    return dome_error_set(err, 0, "redact field `%s`: stream already %s", s->field,
                          s->failed ? "failed" : "finished");
  s->finished = true;
  hs_error_t rc = hs_close_stream(s->hs, s->scratch, on_match, s);
  s->hs = NULL;
  if (rc != HS_SUCCESS || s->callback_error) {
    s->failed = true;
    return dome_error_set(err, EIO, "redact field `%s`: scan failed", s->field);
  }
  prefilter(s, true);
  if (s->callback_error) {
    s->failed = true;
    return dome_error_set(err, ENOMEM, "redact field `%s`: out of memory", s->field);
  }
  int r = settle(s, sink, true, err);
  if (r < 0) s->failed = true;
  return r;
}

uint64_t guard_stream_bytes_in(const struct guard_stream *s) {
  return s->base + s->length;
}

uint64_t guard_stream_finding_count(const struct guard_stream *s) {
  return s->findings;
}

void guard_stream_close(struct guard_stream *s) {
  if (s == NULL) return;
  if (s->hs) hs_close_stream(s->hs, s->scratch, NULL, NULL);
  hs_free_scratch(s->scratch);
  pcre2_match_data_free(s->match_data);
  pcre2_match_context_free(s->match_context);
  free(s->window);
  if (s->pending)
    for (size_t i = 0; i < s->guard->rule_count; i++) free(s->pending[i].items);
  free(s->pending);
  free(s->redacted_until);
  free(s->spans);
  free(s->field);
  free(s);
}
