/* Cedar values: order, equality, canonical sets and records, printing. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/value.h"

static int cmp_num(int64_t a, int64_t b) {
  return a < b ? -1 : a > b;
}

int cedar_value_cmp(const cedar_value *a, const cedar_value *b) {
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  switch ((cedar_value_kind)a->kind) {
    case CV_BOOL:
      return (int)a->u.boolean - (int)b->u.boolean;
    case CV_LONG:
    case CV_DECIMAL:
    case CV_DATETIME:
    case CV_DURATION:
      return cmp_num(a->u.number, b->u.number);
    case CV_STRING:
    case CV_UNKNOWN:
      return cedar_str_cmp(a->u.s, b->u.s);
    case CV_ENTITY:
      return cedar_euid_cmp(&a->u.uid, &b->u.uid);
    case CV_IPADDR:
      return cedar_ipaddr_compare(&a->u.ip, &b->u.ip);
    case CV_SET: {
      if (a->u.set.count != b->u.set.count) return a->u.set.count < b->u.set.count ? -1 : 1;
      for (size_t i = 0; i < a->u.set.count; i++) {
        int c = cedar_value_cmp(&a->u.set.items[i], &b->u.set.items[i]);
        if (c) return c;
      }
      return 0;
    }
    case CV_RECORD: {
      if (a->u.record.count != b->u.record.count) return a->u.record.count < b->u.record.count ? -1 : 1;
      for (size_t i = 0; i < a->u.record.count; i++) {
        int c = cedar_str_cmp(a->u.record.keys[i], b->u.record.keys[i]);
        if (c) return c;
        c = cedar_value_cmp(&a->u.record.values[i], &b->u.record.values[i]);
        if (c) return c;
      }
      return 0;
    }
  }
  return 0;
}

bool cedar_value_eq(const cedar_value *a, const cedar_value *b) {
  if (a->kind != b->kind) return false;
  if (a->kind == CV_BOOL) return a->u.boolean == b->u.boolean;
  if (a->kind == CV_LONG) return a->u.number == b->u.number;
  if (a->kind == CV_ENTITY) return cedar_euid_eq(&a->u.uid, &b->u.uid);
  if (a->kind == CV_STRING) return cedar_str_eq(a->u.s, b->u.s);
  return cedar_value_cmp(a, b) == 0;
}

static int qsort_cmp(const void *a, const void *b) {
  return cedar_value_cmp(a, b);
}

size_t cedar_value_set_normalize(cedar_value *items, size_t count) {
  if (count < 2) return count;
  /* Small sets: insertion sort avoids qsort's call overhead. */
  if (count <= 8) {
    for (size_t i = 1; i < count; i++) {
      cedar_value v = items[i];
      size_t j = i;
      while (j > 0 && cedar_value_cmp(&items[j - 1], &v) > 0) {
        items[j] = items[j - 1];
        j--;
      }
      items[j] = v;
    }
  } else {
    qsort(items, count, sizeof *items, qsort_cmp);
  }
  size_t n = 1;
  for (size_t i = 1; i < count; i++)
    if (cedar_value_cmp(&items[n - 1], &items[i]) != 0) items[n++] = items[i];
  return n;
}

int cedar_value_record_normalize(cedar_str *keys, cedar_value *values, size_t count, size_t *dup) {
  for (size_t i = 1; i < count; i++) {
    cedar_str k = keys[i];
    cedar_value v = values[i];
    size_t j = i;
    while (j > 0 && cedar_str_cmp(keys[j - 1], k) > 0) {
      keys[j] = keys[j - 1];
      values[j] = values[j - 1];
      j--;
    }
    keys[j] = k;
    values[j] = v;
  }
  for (size_t i = 1; i < count; i++) {
    if (cedar_str_eq(keys[i - 1], keys[i])) {
      if (dup) *dup = i;
      return -1;
    }
  }
  return 0;
}

const cedar_value *cedar_record_get(const cedar_value *record, cedar_str key) {
  size_t lo = 0, hi = record->u.record.count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = cedar_str_cmp(record->u.record.keys[mid], key);
    if (c == 0) return &record->u.record.values[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const char *cedar_value_kind_name(cedar_value_kind kind) {
  static const char *const names[] = {"bool",   "long",    "string",   "entity",   "set",    "record",
                                      "ipaddr", "decimal", "datetime", "duration", "unknown"};
  return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "?";
}

void cedar_print_value(cedar_buf *buf, const cedar_value *v) {
  char tmp[128];
  switch ((cedar_value_kind)v->kind) {
    case CV_BOOL:
      cedar_buf_puts(buf, v->u.boolean ? "true" : "false");
      break;
    case CV_LONG:
      cedar_buf_printf(buf, "%lld", (long long)v->u.number);
      break;
    case CV_STRING:
      cedar_print_string(buf, v->u.s);
      break;
    case CV_ENTITY:
      cedar_print_euid(buf, &v->u.uid);
      break;
    case CV_SET:
      cedar_buf_puts(buf, "[");
      for (size_t i = 0; i < v->u.set.count; i++) {
        if (i) cedar_buf_puts(buf, ", ");
        cedar_print_value(buf, &v->u.set.items[i]);
      }
      cedar_buf_puts(buf, "]");
      break;
    case CV_RECORD:
      cedar_buf_puts(buf, "{");
      for (size_t i = 0; i < v->u.record.count; i++) {
        if (i) cedar_buf_puts(buf, ", ");
        cedar_print_string(buf, v->u.record.keys[i]);
        cedar_buf_puts(buf, ": ");
        cedar_print_value(buf, &v->u.record.values[i]);
      }
      cedar_buf_puts(buf, "}");
      break;
    case CV_IPADDR:
      cedar_ipaddr_format(&v->u.ip, true, tmp, sizeof tmp);
      cedar_buf_printf(buf, "ip(\"%s\")", tmp);
      break;
    case CV_DECIMAL:
      cedar_decimal_format(v->u.number, tmp, sizeof tmp);
      cedar_buf_printf(buf, "decimal(\"%s\")", tmp);
      break;
    case CV_DATETIME:
      cedar_duration_format(v->u.number, tmp, sizeof tmp);
      cedar_buf_printf(buf, "datetime(\"1970-01-01\").offset(duration(\"%s\"))", tmp);
      break;
    case CV_DURATION:
      cedar_duration_format(v->u.number, tmp, sizeof tmp);
      cedar_buf_printf(buf, "duration(\"%s\")", tmp);
      break;
    case CV_UNKNOWN:
      cedar_buf_puts(buf, "unknown(");
      cedar_print_string(buf, v->u.s);
      cedar_buf_puts(buf, ")");
      break;
  }
}

static json_t *extn_json(const char *fn, const char *arg) {
  return json_pack("{s:{s:s,s:s}}", "__extn", "fn", fn, "arg", arg);
}

json_t *cedar_value_to_json(const cedar_value *v) {
  char tmp[128];
  switch ((cedar_value_kind)v->kind) {
    case CV_BOOL:
      return json_boolean(v->u.boolean);
    case CV_LONG:
      return json_integer(v->u.number);
    case CV_STRING:
      return json_stringn(v->u.s.ptr, v->u.s.len);
    case CV_ENTITY:
      return json_pack("{s:{s:s%,s:s%}}", "__entity", "type", v->u.uid.type.ptr, v->u.uid.type.len, "id",
                       v->u.uid.id.ptr, v->u.uid.id.len);
    case CV_SET: {
      json_t *a = json_array();
      for (size_t i = 0; a && i < v->u.set.count; i++)
        json_array_append_new(a, cedar_value_to_json(&v->u.set.items[i]));
      return a;
    }
    case CV_RECORD: {
      json_t *o = json_object();
      for (size_t i = 0; o && i < v->u.record.count; i++)
        json_object_setn_new(o, v->u.record.keys[i].ptr, v->u.record.keys[i].len,
                             cedar_value_to_json(&v->u.record.values[i]));
      return o;
    }
    case CV_IPADDR:
      cedar_ipaddr_format(&v->u.ip, true, tmp, sizeof tmp);
      return extn_json("ip", tmp);
    case CV_DECIMAL:
      cedar_decimal_format(v->u.number, tmp, sizeof tmp);
      return extn_json("decimal", tmp);
    case CV_DATETIME: {
      char d[64];
      cedar_duration_format(v->u.number, d, sizeof d);
      return json_pack("{s:{s:s,s:[{s:{s:s,s:s}},{s:{s:s,s:s}}]}}", "__extn", "fn", "offset", "args",
                       "__extn", "fn", "datetime", "arg", "1970-01-01", "__extn", "fn", "duration", "arg", d);
    }
    case CV_DURATION:
      cedar_duration_format(v->u.number, tmp, sizeof tmp);
      return extn_json("duration", tmp);
    case CV_UNKNOWN:
      return json_pack("{s:{s:s,s:s%}}", "__extn", "fn", "unknown", "arg", v->u.s.ptr, v->u.s.len);
  }
  return json_null();
}
