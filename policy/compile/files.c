/* File tables of one access kind. The literal paths of the policies (plus "/") form a tree; a request's
 * path p falls in the cell of the longest literal L that is p or an ancestor of p, either exactly L or
 * strictly beneath it, and every atom (resource == Path::q, resource in Path::q) is constant on a cell.
 * Each literal gets a SUBTREE entry (the "beneath" cell) and an EXACT entry (L itself) unless they equal
 * what the lookup would find without them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/compile/internal.h"

struct paths {
  const char **items;
  size_t count;
  bool overflow;
};

static void add_path(struct paths *paths, const char *path) {
  for (size_t i = 0; i < paths->count; i++)
    if (strcmp(paths->items[i], path) == 0) return;
  if (paths->count >= DOME_COMPILE_MAX_PATHS) {
    paths->overflow = true;
    return;
  }
  paths->items[paths->count++] = path;
}

static void collect_atom(void *context, const struct pred *atom) {
  if (atom->kind == PRED_PATH_EQ || atom->kind == PRED_PATH_IN) add_path(context, atom->path);
}

/* Ancestors before descendants: sort by length (an ancestor is shorter), then bytes. */
static int compare_paths(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  size_t lx = strlen(x), ly = strlen(y);
  if (lx != ly) return lx < ly ? -1 : 1;
  return strcmp(x, y);
}

struct verdict {
  enum dome_decision decision;
  long policy;
};

static bool same(struct verdict a, struct verdict b) {
  return a.decision == b.decision && a.policy == b.policy;
}

static int add(const struct compiled_policy *policies, const char *path, enum dome_file_match match,
               enum dome_file_access access, struct verdict v, struct dome_rule_tables *tables,
               dome_error *err) {
  uint32_t index = DOME_NO_POLICY;
  if (v.policy >= 0) {
    int rc = dome_rule_tables_add_policy(tables, policies[v.policy].id, &index, err);
    if (rc < 0) return rc;
  }
  return dome_rule_tables_add_file(tables, path, match, access, v.decision, index, err);
}

int dome_compile_file_action(const struct compiled_policy *policies, size_t count,
                             enum dome_file_access access, struct dome_rule_tables *tables, dome_error *err) {
  struct paths paths = {.items = calloc(DOME_COMPILE_MAX_PATHS + 1, sizeof(char *))};
  bool *satisfied = calloc(count + 1, sizeof *satisfied);
  struct verdict *beneath = NULL;
  bool *emitted = NULL;
  int rc = 0;
  if (!paths.items || !satisfied) {
    rc = dome_error_set(err, ENOMEM, "out of memory");
    goto out;
  }
  add_path(&paths, "/");
  for (size_t i = 0; i < count; i++) dome_compile_pred_visit(policies[i].pred, collect_atom, &paths);
  if (paths.overflow) {
    rc = dome_error_set(err, E2BIG, "fs:%s: more than %d distinct paths", dome_file_access_name(access),
                        DOME_COMPILE_MAX_PATHS);
    goto out;
  }
  qsort(paths.items, paths.count, sizeof *paths.items, compare_paths);
  beneath = calloc(paths.count, sizeof *beneath);
  emitted = calloc(paths.count, sizeof *emitted);
  if (!beneath || !emitted) {
    rc = dome_error_set(err, ENOMEM, "out of memory");
    goto out;
  }
  for (size_t n = 0; n < paths.count && rc == 0; n++) {
    const char *path = paths.items[n];
    struct verdict exact;
    struct file_cell cell = {.path = path, .exact = true};
    for (size_t i = 0; i < count; i++) satisfied[i] = dome_compile_pred_eval_file(policies[i].pred, &cell);
    dome_compile_decide(policies, count, satisfied, &exact.decision, &exact.policy);
    cell.exact = false;
    for (size_t i = 0; i < count; i++) satisfied[i] = dome_compile_pred_eval_file(policies[i].pred, &cell);
    dome_compile_decide(policies, count, satisfied, &beneath[n].decision, &beneath[n].policy);
    /* what the lookup finds without this literal's entries: the nearest emitted ancestor's subtree */
    struct verdict inherited = {DOME_DECISION_DENY, -1};
    for (size_t a = n; a-- > 0;)
      if (emitted[a] && dome_compile_path_is_ancestor_or_self(paths.items[a], path)) {
        inherited = beneath[a];
        break;
      }
    if (!same(beneath[n], inherited)) {
      emitted[n] = true;
      rc = add(policies, path, DOME_MATCH_SUBTREE, access, beneath[n], tables, err);
      inherited = beneath[n];
    }
    if (rc == 0 && !same(exact, inherited))
      rc = add(policies, path, DOME_MATCH_EXACT, access, exact, tables, err);
  }
out:
  free(paths.items);
  free(satisfied);
  free(beneath);
  free(emitted);
  return rc;
}
