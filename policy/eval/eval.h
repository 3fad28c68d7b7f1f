/* Engine-internal: the evaluator. Values are in policy/syntax/value.h, the entity store it reads in
 * policy/entities/entities.h. */
#ifndef DOME_POLICY_EVAL_EVAL_H
#define DOME_POLICY_EVAL_EVAL_H

#include "policy/entities/entities.h"
#include "policy/syntax/value.h"

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
