/* Engine-internal: Cedar values, part of the AST (a literal of a residual is a value).
 *
 * Values are small structs passed by value; their arrays live in an arena (the entity set's for entity
 * data, a per-request arena during evaluation). Sets are kept sorted by cedar_value_cmp without
 * duplicates; records sorted by key. An "unknown" value (partial evaluation) carries its name. */
#ifndef DOME_POLICY_SYNTAX_VALUE_H
#define DOME_POLICY_SYNTAX_VALUE_H

#include <jansson.h>

#include "policy/syntax/syntax.h"

typedef enum cedar_value_kind {
  CV_BOOL,
  CV_LONG,
  CV_STRING,
  CV_ENTITY,
  CV_SET,
  CV_RECORD,
  CV_IPADDR,
  CV_DECIMAL,
  CV_DATETIME,
  CV_DURATION,
  CV_UNKNOWN,
} cedar_value_kind;

typedef struct cedar_value cedar_value;
struct cedar_value {
  uint8_t kind;
  union {
    bool boolean;
    int64_t number; /* LONG; DECIMAL (x 10^4); DATETIME, DURATION (ms) */
    cedar_str s;    /* STRING; UNKNOWN (its name) */
    cedar_euid uid;
    cedar_ipaddr ip;
    struct {
      const cedar_value *items;
      size_t count;
    } set;
    struct {
      const cedar_str *keys;
      const cedar_value *values;
      size_t count;
    } record;
  } u;
};

/* Total order used for set canonicalization (kind first). */
int cedar_value_cmp(const cedar_value *a, const cedar_value *b);
/* Cedar `==`. */
bool cedar_value_eq(const cedar_value *a, const cedar_value *b);
/* Sort and deduplicate items[0..count) in place; returns the new count. */
size_t cedar_value_set_normalize(cedar_value *items, size_t count);
/* Sort record entries by key; returns -1 on a duplicate key (index in *dup). */
int cedar_value_record_normalize(cedar_str *keys, cedar_value *values, size_t count, size_t *dup);
/* Attribute lookup in a record value; NULL when absent. */
const cedar_value *cedar_record_get(const cedar_value *record, cedar_str key);
const char *cedar_value_kind_name(cedar_value_kind kind);

/* Cedar's text form of a value (sets and records in canonical order). */
void cedar_print_value(cedar_buf *buf, const cedar_value *value);
/* The value as Cedar's JSON value form (entity references as {"__entity": ...}, extension values as
 * {"__extn": ...}); a new reference, NULL when out of memory. */
json_t *cedar_value_to_json(const cedar_value *value);

#endif
