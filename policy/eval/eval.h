/* Engine-internal: Cedar values, the evaluator and the entity store interface it reads.
 *
 * Values are small structs passed by value; their arrays live in an arena (the entity set's for entity
 * data, a per-request arena during evaluation). Sets are kept sorted by cedar_value_cmp without
 * duplicates; records sorted by key. An "unknown" value (partial evaluation) carries its name. */
#ifndef DOME_POLICY_EVAL_EVAL_H
#define DOME_POLICY_EVAL_EVAL_H

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

/* ---------------- entity store (implemented in policy/entities) ---------------- */

typedef struct cedar_entity {
  cedar_euid uid;
  cedar_value attrs;         /* RECORD */
  cedar_value tags;          /* RECORD (count 0 when none) */
  const cedar_euid *parents; /* direct parents as given */
  size_t parent_count;
  const cedar_euid *ancestors; /* transitive closure, sorted by cedar_euid_cmp */
  size_t ancestor_count;
} cedar_entity;

const cedar_entity *cedar_entities_find(const cedar_entities *entities, const cedar_euid *uid);
bool cedar_entity_has_ancestor(const cedar_entity *entity, const cedar_euid *ancestor);

/* The record value of a context (the empty record for NULL). */
const cedar_value *cedar_context_value(const cedar_context *context);

/* ---------------- evaluation ---------------- */

typedef struct cedar_eval {
  cedar_arena *arena; /* per-request scratch memory */
  const cedar_entities *entities;
  cedar_value vars[4]; /* principal, action, resource, context (CEDAR_VAR_*) */
  char error[256];     /* message of the last error */
} cedar_eval;

/* Set up an evaluation of `request` (uids copied by reference). */
void cedar_eval_init(cedar_eval *ev, cedar_arena *arena, const cedar_entities *entities,
                     const cedar_request *request);
/* Evaluate expr. Returns 0 and *out, or -1 with ev->error set (Cedar evaluation error), or -ENOMEM. */
int cedar_eval_expr(cedar_eval *ev, const cedar_expr *expr, cedar_value *out);
/* Evaluate a whole policy (scope and conditions): 1 satisfied, 0 not, -1 error (ev->error), -ENOMEM. */
int cedar_eval_policy(cedar_eval *ev, const cedar_policy *policy);

/* `like`: does s match pattern (O(len(s) * len(pattern)) worst case)? */
bool cedar_like_match(cedar_str s, const cedar_pattern *pattern);

#endif
