/* The Cedar authorizer (Cedar "Authorization"): any satisfied forbid denies; else any satisfied permit
 * allows; else deny. Policies whose evaluation errors are skipped and reported. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/eval/eval.h"

void cedar_response_release(cedar_response *response) {
  if (!response) return;
  for (size_t i = 0; i < response->error_count; i++) free(response->errors[i].message);
  free(response->errors);
  free(response->reason);
  memset(response, 0, sizeof *response);
}

int cedar_authorize(const cedar_policy_set *set, const cedar_entities *entities, const cedar_request *request,
                    cedar_response *response) {
  memset(response, 0, sizeof *response);
  cedar_arena *arena = cedar_arena_new();
  if (!arena) return -ENOMEM;
  cedar_eval ev;
  cedar_eval_init(&ev, arena, entities, request);
  /* satisfied[i]: 1 for a satisfied policy. Small sets stay on the stack. */
  unsigned char stack_flags[256];
  unsigned char *satisfied = set->count <= sizeof stack_flags ? stack_flags : malloc(set->count);
  int rc = 0;
  if (!satisfied) {
    cedar_arena_free(arena);
    return -ENOMEM;
  }
  bool any_forbid = false, any_permit = false;
  size_t error_capacity = 0;
  for (size_t i = 0; i < set->count; i++) {
    const cedar_policy *p = set->policies[i];
    satisfied[i] = 0;
    if (p->is_template) continue;
    int r = cedar_eval_policy(&ev, p);
    if (r == -ENOMEM) {
      rc = -ENOMEM;
      goto out;
    }
    if (r < 0) {
      if (response->error_count == error_capacity) {
        error_capacity = error_capacity ? error_capacity * 2 : 4;
        cedar_policy_error *ne = realloc(response->errors, error_capacity * sizeof *ne);
        if (!ne) {
          rc = -ENOMEM;
          goto out;
        }
        response->errors = ne;
      }
      cedar_policy_error *pe = &response->errors[response->error_count];
      pe->policy_id = p->id;
      pe->message = strdup(ev.error);
      if (!pe->message) {
        rc = -ENOMEM;
        goto out;
      }
      response->error_count++;
      continue;
    }
    if (r == 1) {
      satisfied[i] = 1;
      if (p->effect == CEDAR_FORBID)
        any_forbid = true;
      else
        any_permit = true;
    }
  }
  response->decision = !any_forbid && any_permit ? CEDAR_ALLOW : CEDAR_DENY;
  uint8_t want = any_forbid ? CEDAR_FORBID : CEDAR_PERMIT;
  if (any_forbid || any_permit) {
    size_t n = 0;
    for (size_t i = 0; i < set->count; i++)
      if (satisfied[i] && set->policies[i]->effect == want) n++;
    response->reason = malloc(n * sizeof *response->reason);
    if (!response->reason) {
      rc = -ENOMEM;
      goto out;
    }
    for (size_t i = 0; i < set->count; i++)
      if (satisfied[i] && set->policies[i]->effect == want)
        response->reason[response->reason_count++] = set->policies[i]->id;
  }
out:
  if (satisfied != stack_flags) free(satisfied);
  cedar_arena_free(arena);
  if (rc < 0) cedar_response_release(response);
  return rc;
}

int cedar_evaluate(const cedar_expression *expression, const cedar_entities *entities,
                   const cedar_request *request, char **text, cedar_diagnostic *diag) {
  cedar_arena *arena = cedar_arena_new();
  if (!arena) return -ENOMEM;
  cedar_eval ev;
  cedar_eval_init(&ev, arena, entities, request);
  cedar_value v;
  int r = cedar_eval_expr(&ev, expression->root, &v);
  if (r == -1) {
    cedar_diag_set(diag, NULL, 0, 0, NULL, "%s", ev.error);
    r = -EINVAL;
  } else if (r == 0) {
    cedar_buf b = {0};
    cedar_print_value(&b, &v);
    *text = cedar_buf_finish(&b);
    if (!*text) r = -ENOMEM;
  }
  cedar_arena_free(arena);
  return r;
}
