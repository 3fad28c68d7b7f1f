/* cedar-conformance — run Cedar integration tests (cedar-integration-tests JSON format) against dome's
 * Cedar engine.
 *
 * usage: cedar-conformance [--root DIR] [--quiet] [--bench N] TEST.json...
 *
 * Each test names a policy file, an entities file and a schema (paths relative to --root, default the
 * current directory) and a list of requests with the expected decision, reason set and error set (policy
 * ids). Every mismatch is printed with the test file and the request description. The last line is
 * `N passed, N failed` counting requests; exit status 0 only when none failed. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"
#include "policy/entities/entities.h"
#include "policy/eval/eval.h" /* internal: cedar_eval_policy concretizes residuals (--partial) */
#include "policy/schema/schema.h"
#include "policy/syntax/syntax.h" /* internal: cedar_read_file */
#include "policy/validate/validate.h"

typedef struct counts {
  unsigned long passed, failed;
} counts;

/* --bench N: every request is also authorized N times; per-request latencies are collected. */
typedef struct bench {
  unsigned repeat;
  double *authorize_ns, *full_ns; /* per request: authorize only; entities+context parse + authorize */
  double *values_ns; /* per request: entities+context from parsed JSON values (json_t) + authorize */
  size_t count, capacity;
  double entities_ns;        /* entity parse time of the current test */
  double entities_values_ns; /* the same from the already parsed JSON value */
  double parse_bytes, parse_seconds;
} bench;
static bench bench_state;

#include <time.h>
static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)(p * (double)(n - 1));
  return v[i];
}

static char *join(const char *root, const char *path) {
  char *out;
  if (!root || path[0] == '/') return strdup(path);
  if (asprintf(&out, "%s/%s", root, path) < 0) return NULL;
  return out;
}

/* Sorted, comparable list of policy ids. */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool same_ids(json_t *expected, const char **got, size_t got_count) {
  size_t n = json_array_size(expected);
  if (n != got_count) return false;
  const char **e = calloc(n + 1, sizeof *e), **g = calloc(got_count + 1, sizeof *g);
  bool same = e && g;
  for (size_t i = 0; same && i < n; i++) {
    json_t *item = json_array_get(expected, i);
    /* errors may be plain ids or {"policyId": ...} objects */
    if (json_is_object(item)) item = json_object_get(item, "policyId");
    e[i] = json_is_string(item) ? json_string_value(item) : "";
    g[i] = got[i];
  }
  if (same) {
    qsort(e, n, sizeof *e, cmp_str);
    qsort(g, n, sizeof *g, cmp_str);
    for (size_t i = 0; i < n && same; i++) same = strcmp(e[i], g[i]) == 0;
  }
  free(e);
  free(g);
  return same;
}

static void print_ids(FILE *out, const char **ids, size_t n) {
  fputc('[', out);
  for (size_t i = 0; i < n; i++) fprintf(out, "%s%s", i ? ", " : "", ids[i]);
  fputc(']', out);
}

static cedar_arena *scratch; /* decoded uid strings of the current test */

static bool uid_from_json(json_t *j, cedar_uid_ref *uid) {
  json_t *type = json_object_get(j, "type"), *id = json_object_get(j, "id");
  if (!json_is_string(type) || !json_is_string(id)) return false;
  cedar_str decoded;
  if (cedar_json_copy_bytes(scratch, json_string_value(id), json_string_length(id), &decoded) < 0)
    return false;
  uid->type = json_string_value(type);
  uid->id = decoded.ptr;
  uid->id_length = decoded.len;
  return true;
}

/* --partial: each request is also partially authorized with the principal, resource and/or context
 * unknown (10 combinations, some with the entity type known); the residuals, evaluated with the request's
 * real values, together with the policies decided without them must give the expected decision, reason and
 * errors. */
static bool partial_mode;
/* --validate: each test file's shouldValidate is checked (one case per file) and requests marked
 * validateRequest must pass request validation. */
static bool validate_mode;

static bool check_partial(const char *test, const char *desc, const cedar_policy_set *set,
                          const cedar_entities *entities, const cedar_request *r, json_t *req, bool quiet) {
  /* unknown: 1 principal, 2 resource, 4 context; 8 principal id only (type known), 16 resource id only */
  static const unsigned masks[] = {1, 2, 4, 3, 6, 7, 8, 16, 24, 28};
  const char *want = json_string_value(json_object_get(req, "decision"));
  bool want_allow = want && strcasecmp(want, "allow") == 0;
  for (size_t m = 0; m < sizeof masks / sizeof *masks; m++) {
    cedar_partial_request pr = {r->principal, r->action, r->resource, r->context, (masks[m] & 4) != 0};
    if (masks[m] & 1) pr.principal.type = NULL;
    if (masks[m] & 2) pr.resource.type = NULL;
    if (masks[m] & 8) pr.principal.id = NULL;
    if (masks[m] & 16) pr.resource.id = NULL;
    cedar_partial_response resp;
    if (cedar_partially_authorize(set, entities, &pr, &resp) < 0) return false;
    size_t cap = set->count + 1, ns = 0, ne = 0;
    const char **sat = calloc(cap, sizeof *sat), **err = calloc(cap, sizeof *err);
    cedar_arena *arena = cedar_arena_new();
    bool ok = sat && err && arena;
    for (size_t i = 0; ok && i < resp.satisfied_count; i++) sat[ns++] = resp.satisfied[i];
    for (size_t i = 0; ok && i < resp.error_count; i++) err[ne++] = resp.errors[i].policy_id;
    if (ok) {
      cedar_eval ev;
      cedar_eval_init(&ev, arena, entities, r);
      for (size_t i = 0; i < resp.residuals->count; i++) {
        int o = cedar_eval_policy(&ev, resp.residuals->policies[i]);
        if (o == 1) sat[ns++] = resp.residuals->policies[i]->id;
        if (o < 0) err[ne++] = resp.residuals->policies[i]->id;
      }
    }
    bool any_forbid = false;
    for (size_t i = 0; i < ns; i++) any_forbid |= cedar_policy_set_find(set, sat[i])->effect == CEDAR_FORBID;
    size_t nr = 0;
    const char **reason = calloc(cap, sizeof *reason);
    for (size_t i = 0; reason && i < ns; i++)
      if ((cedar_policy_set_find(set, sat[i])->effect == CEDAR_FORBID) == any_forbid) reason[nr++] = sat[i];
    bool allow = !any_forbid && nr > 0;
    ok = ok && reason && allow == want_allow && same_ids(json_object_get(req, "reason"), reason, nr) &&
         same_ids(json_object_get(req, "errors"), err, ne) &&
         (resp.decision == CEDAR_PARTIAL_UNKNOWN || (resp.decision == CEDAR_PARTIAL_ALLOW) == want_allow);
    if (!ok && !quiet) {
      char *text = cedar_policy_set_to_text(resp.residuals);
      printf(
          "FAIL %s: %s: partial evaluation (unknown mask %u: 1 principal, 2 resource, 4 context, 8/16 "
          "principal/resource id): partial "
          "decision %d, concretized %s reason ",
          test, desc, masks[m], (int)resp.decision, allow ? "allow" : "deny");
      print_ids(stdout, reason, nr);
      printf(" errors ");
      print_ids(stdout, err, ne);
      printf("\nresiduals:\n%s\n", text ? text : "?");
      free(text);
    }
    free(reason);
    free(sat);
    free(err);
    cedar_arena_free(arena);
    cedar_partial_response_release(&resp);
    if (!ok) return false;
  }
  return true;
}

static void run_request(const char *test, json_t *req, const cedar_policy_set *set,
                        const cedar_entities *entities, const cedar_schema *schema, bool quiet, counts *c) {
  const char *desc = json_string_value(json_object_get(req, "description"));
  if (!desc) desc = "(no description)";
  cedar_request r = {0};
  if (!uid_from_json(json_object_get(req, "principal"), &r.principal) ||
      !uid_from_json(json_object_get(req, "action"), &r.action) ||
      !uid_from_json(json_object_get(req, "resource"), &r.resource)) {
    printf("FAIL %s: %s: request without principal/action/resource uid\n", test, desc);
    c->failed++;
    return;
  }
  json_t *ctxj = json_object_get(req, "context");
  char *ctx_text = json_dumps(ctxj ? ctxj : json_object(), JSON_COMPACT | JSON_ENCODE_ANY);
  cedar_context *ctx = NULL;
  cedar_diagnostic diag = {0};
  int rc = ctx_text ? cedar_context_parse_json(ctx_text, strlen(ctx_text), "context", schema, &r.action, &ctx,
                                               &diag)
                    : -ENOMEM;
  free(ctx_text);
  if (json_is_true(json_object_get(req, "contextError"))) {
    /* difftest: upstream rejects this context; dome must too */
    if (rc < 0) {
      c->passed++;
    } else {
      printf("FAIL %s: %s: upstream rejects the context, dome accepts it\n", test, desc);
      c->failed++;
      cedar_context_free(ctx);
    }
    return;
  }
  if (rc < 0) {
    char msg[1024];
    printf("FAIL %s: %s: context: %s\n", test, desc, cedar_diagnostic_format(&diag, msg, sizeof msg));
    c->failed++;
    return;
  }
  r.context = ctx;
  cedar_response resp;
  if (bench_state.repeat) {
    bench *b = &bench_state;
    double ctx_ns = 0;
    char *again = json_dumps(ctxj ? ctxj : json_object(), JSON_COMPACT | JSON_ENCODE_ANY);
    double t0 = now_ns();
    for (unsigned k = 0; again && k < b->repeat; k++) {
      cedar_context *c2;
      if (cedar_context_parse_json(again, strlen(again), "context", schema, &r.action, &c2, &diag) == 0)
        cedar_context_free(c2);
    }
    ctx_ns = (now_ns() - t0) / b->repeat;
    free(again);
    json_t *empty = ctxj ? NULL : json_object();
    t0 = now_ns();
    for (unsigned k = 0; k < b->repeat; k++) {
      cedar_context *c2;
      if (cedar_context_from_json(ctxj ? ctxj : empty, "context", schema, &r.action, &c2, &diag) == 0)
        cedar_context_free(c2);
    }
    double ctx_values_ns = (now_ns() - t0) / b->repeat;
    json_decref(empty);
    t0 = now_ns();
    for (unsigned k = 0; k < b->repeat; k++)
      if (cedar_authorize(set, entities, &r, &resp) == 0) cedar_response_release(&resp);
    double auth_ns = (now_ns() - t0) / b->repeat;
    if (b->count == b->capacity) {
      b->capacity = b->capacity ? b->capacity * 2 : 1024;
      b->authorize_ns = realloc(b->authorize_ns, b->capacity * sizeof *b->authorize_ns);
      b->full_ns = realloc(b->full_ns, b->capacity * sizeof *b->full_ns);
      b->values_ns = realloc(b->values_ns, b->capacity * sizeof *b->values_ns);
      if (!b->authorize_ns || !b->full_ns || !b->values_ns) abort();
    }
    b->authorize_ns[b->count] = auth_ns;
    b->values_ns[b->count] = auth_ns + ctx_values_ns + b->entities_values_ns;
    b->full_ns[b->count++] = auth_ns + ctx_ns + b->entities_ns;
  }
  rc = cedar_authorize(set, entities, &r, &resp);
  if (rc < 0) {
    printf("FAIL %s: %s: authorize: %s\n", test, desc, strerror(-rc));
    cedar_context_free(ctx);
    c->failed++;
    return;
  }
  const char *want = json_string_value(json_object_get(req, "decision"));
  bool want_allow = want && strcasecmp(want, "allow") == 0;
  const char **err_ids = calloc(resp.error_count + 1, sizeof *err_ids);
  for (size_t i = 0; err_ids && i < resp.error_count; i++) err_ids[i] = resp.errors[i].policy_id;
  bool ok = (resp.decision == CEDAR_ALLOW) == want_allow &&
            same_ids(json_object_get(req, "reason"), resp.reason, resp.reason_count) && err_ids &&
            same_ids(json_object_get(req, "errors"), err_ids, resp.error_count);
  if (ok && partial_mode) ok = check_partial(test, desc, set, entities, &r, req, quiet);
  if (ok && validate_mode && schema && json_is_true(json_object_get(req, "validateRequest"))) {
    char why[512];
    if (cedar_validate_request(schema, &r, why, sizeof why) < 0) {
      printf("FAIL %s: %s: request validation rejects a valid request: %s\n", test, desc, why);
      ok = false;
    }
  }
  if (ok) {
    c->passed++;
  } else {
    c->failed++;
    if (!quiet) {
      char *exp_reason = json_dumps(json_object_get(req, "reason"), JSON_COMPACT | JSON_ENCODE_ANY);
      char *exp_errors = json_dumps(json_object_get(req, "errors"), JSON_COMPACT | JSON_ENCODE_ANY);
      printf("FAIL %s: %s: expected %s reason %s errors %s; got %s reason ", test, desc, want ? want : "?",
             exp_reason ? exp_reason : "?", exp_errors ? exp_errors : "?",
             resp.decision == CEDAR_ALLOW ? "allow" : "deny");
      print_ids(stdout, resp.reason, resp.reason_count);
      printf(" errors ");
      print_ids(stdout, err_ids, resp.error_count);
      for (size_t i = 0; i < resp.error_count; i++)
        printf(" {%s: %s}", resp.errors[i].policy_id, resp.errors[i].message);
      printf("\n");
      free(exp_reason);
      free(exp_errors);
    }
  }
  free(err_ids);
  cedar_response_release(&resp);
  cedar_context_free(ctx);
}

static void fail_all(const char *test, json_t *requests, const char *why, counts *c) {
  printf("FAIL %s: %s (%zu requests)\n", test, why, json_array_size(requests));
  c->failed += json_array_size(requests) ? json_array_size(requests) : 1;
}

static void run_one(const char *root, const char *path, json_t *test, bool quiet, counts *c);

static void run_test(const char *root, const char *path, bool quiet, counts *c) {
  json_error_t jerr = {0};
  char *test_text = NULL;
  size_t test_length = 0;
  json_t *test = NULL;
  if (cedar_read_file(path, &test_text, &test_length, NULL) < 0) {
    snprintf(jerr.text, sizeof jerr.text, "cannot read the file");
  } else {
    test = cedar_json_loadb(test_text, test_length, &jerr);
    free(test_text);
  }
  if (!test) {
    printf("FAIL %s:%d:%d: %s\n", path, jerr.line, jerr.column, jerr.text);
    c->failed++;
    return;
  }
  json_t *batch = json_object_get(test, "tests");
  if (json_is_array(batch)) {
    /* A batch file (tests/difftest): {"tests": [test, ...]} with inline policies and entities. */
    for (size_t i = 0; i < json_array_size(batch); i++) {
      char name[600];
      snprintf(name, sizeof name, "%s#%zu", path, i);
      run_one(root, name, json_array_get(batch, i), quiet, c);
    }
  } else {
    run_one(root, path, test, quiet, c);
  }
  json_decref(test);
}

/* One test: "policies"/"entities"/"schema" name files under root; a difftest batch test may instead carry
 * "policyText" (Cedar text), "entitiesValue" (entities JSON), "parseError" (upstream rejected the
 * policies: dome must reject them too, counted as one case) and "entitiesError" (likewise for the
 * entities). */
/* Difftest batches may add templates {"id": text} and links [{templateId, newId, values}]. */
static int inline_templates_and_links(const char *path, json_t *test, cedar_policy_set *set, counts *c) {
  json_t *templates = json_object_get(test, "templates");
  const char *id;
  json_t *text;
  cedar_diagnostic diag = {0};
  json_object_foreach(templates, id, text) {
    char *annotated = NULL;
    if (asprintf(&annotated, "@id(\"%s\") %s", id, json_string_value(text) ? json_string_value(text) : "") <
        0)
      return -ENOMEM;
    int r = cedar_parse_policies(set, annotated, strlen(annotated), path, CEDAR_PARSE_ID_ANNOTATIONS, &diag);
    free(annotated);
    if (r < 0) {
      char dm[900];
      printf("FAIL %s: template `%s`: %s\n", path, id, cedar_diagnostic_format(&diag, dm, sizeof dm));
      c->failed++;
      return r;
    }
  }
  json_t *links = json_object_get(test, "templateLinks");
  for (size_t i = 0; i < json_array_size(links); i++) {
    json_t *l = json_array_get(links, i), *values = json_object_get(l, "values");
    cedar_uid_ref slot[2];
    json_t *v[2] = {json_object_get(values, "?principal"), json_object_get(values, "?resource")};
    for (int k = 0; k < 2; k++)
      if (v[k] && !uid_from_json(v[k], &slot[k])) v[k] = NULL;
    int r = cedar_policy_set_link(set, json_string_value(json_object_get(l, "templateId")),
                                  json_string_value(json_object_get(l, "newId")), v[0] ? &slot[0] : NULL,
                                  v[1] ? &slot[1] : NULL, &diag);
    if (r < 0) {
      printf("FAIL %s: template link #%zu: %s\n", path, i, diag.message);
      c->failed++;
      return r;
    }
  }
  return 0;
}

static void run_one(const char *root, const char *path, json_t *test, bool quiet, counts *c) {
  json_t *requests = json_object_get(test, "requests");
  const char *pol = json_string_value(json_object_get(test, "policies"));
  const char *ent = json_string_value(json_object_get(test, "entities"));
  const char *sch = json_string_value(json_object_get(test, "schema"));
  cedar_policy_set *set = NULL;
  cedar_entities *entities = NULL;
  cedar_schema *schema = NULL;
  char msg[1200];
  char *p = NULL, *text = NULL;
  size_t length = 0;
  cedar_diagnostic diag = {0};
  json_t *inline_text = json_object_get(test, "policyText");
  json_t *inline_entities = json_object_get(test, "entitiesValue");
  if (json_is_string(inline_text)) {
    bool upstream_rejects = json_is_true(json_object_get(test, "parseError"));
    int r = cedar_policy_set_parse(json_string_value(inline_text), json_string_length(inline_text), path, 0,
                                   &set, &diag);
    if ((r < 0) != upstream_rejects) {
      char dm[900];
      printf("FAIL %s: parse disagreement: upstream %s, dome %s\n---\n%s\n---\n", path,
             upstream_rejects ? "rejects" : "accepts",
             r < 0 ? cedar_diagnostic_format(&diag, dm, sizeof dm) : "accepts",
             json_string_value(inline_text));
      c->failed++;
      goto out;
    }
    if (upstream_rejects) {
      c->passed++;
      goto out;
    }
    if (inline_templates_and_links(path, test, set, c) < 0) goto out;
    json_t *est = json_object_get(test, "policyJson");
    if (est) {
      /* the same policies as upstream's EST: they must read back to an equivalent set */
      char *etxt = json_dumps(est, JSON_COMPACT);
      cedar_policy_set *from_est = NULL;
      r = etxt ? cedar_policy_set_parse_json(etxt, strlen(etxt), path, &from_est, &diag) : -ENOMEM;
      free(etxt);
      if (r < 0) {
        char dm[900];
        printf("FAIL %s: upstream EST rejected: %s\n", path, cedar_diagnostic_format(&diag, dm, sizeof dm));
        c->failed++;
        goto out;
      }
      cedar_policy_set_free(set);
      set = from_est;
    }
    json_t *schema_text = json_object_get(test, "schemaText");
    if (json_is_string(schema_text)) {
      cedar_schema_error serr = {0};
      if (cedar_schema_parse(json_string_value(schema_text), json_string_length(schema_text), "schema",
                             &schema, &serr) < 0) {
        char sm[900];
        printf("FAIL %s: schema: %s\n", path, cedar_schema_error_format(&serr, sm, sizeof sm));
        c->failed++;
        goto out;
      }
    }
    char *etext = json_dumps(inline_entities ? inline_entities : json_array(), JSON_COMPACT);
    r = etext ? cedar_entities_parse_json(etext, strlen(etext), path, schema, &entities, &diag) : -ENOMEM;
    free(etext);
    if (json_is_true(json_object_get(test, "entitiesError"))) {
      /* upstream rejects these entities: dome must reject them too (one case) */
      if (r < 0) {
        c->passed++;
      } else {
        printf("FAIL %s: upstream rejects the entities, dome accepts them\n", path);
        c->failed++;
      }
      goto out;
    }
    if (r < 0) {
      char dm[900];
      snprintf(msg, sizeof msg, "entities: %s", cedar_diagnostic_format(&diag, dm, sizeof dm));
      fail_all(path, requests, msg, c);
      goto out;
    }
    for (size_t i = 0; i < json_array_size(requests); i++)
      run_request(path, json_array_get(requests, i), set, entities, schema, quiet, c);
    goto out;
  }
  if (!pol || !ent) {
    fail_all(path, requests, "test without `policies` or `entities`", c);
    goto out;
  }
  if (sch) {
    cedar_schema_error serr = {0};
    p = join(root, sch);
    if (cedar_schema_load_file(p, &schema, &serr) < 0) {
      char sm[900];
      snprintf(msg, sizeof msg, "schema: %s", cedar_schema_error_format(&serr, sm, sizeof sm));
      fail_all(path, requests, msg, c);
      goto out;
    }
    free(p);
    p = NULL;
  }
  p = join(root, pol);
  if (cedar_policy_set_load_file(p, 0, &set, &diag) < 0) {
    char dm[900];
    snprintf(msg, sizeof msg, "policies: %s", cedar_diagnostic_format(&diag, dm, sizeof dm));
    fail_all(path, requests, msg, c);
    goto out;
  }
  free(p);
  p = join(root, ent);
  if (!p || cedar_read_file(p, &text, &length, NULL) < 0) {
    snprintf(msg, sizeof msg, "cannot read entities `%s`", p ? p : ent);
    fail_all(path, requests, msg, c);
    goto out;
  }
  if (bench_state.repeat) {
    char *pt = NULL;
    size_t pl = 0;
    char *pp = join(root, pol);
    if (pp && cedar_read_file(pp, &pt, &pl, NULL) == 0) {
      double t0 = now_ns();
      for (unsigned k = 0; k < bench_state.repeat; k++) {
        cedar_policy_set *s2;
        if (cedar_policy_set_parse(pt, pl, pp, 0, &s2, &diag) == 0) cedar_policy_set_free(s2);
      }
      bench_state.parse_seconds += (now_ns() - t0) / 1e9;
      bench_state.parse_bytes += (double)pl * bench_state.repeat;
    }
    free(pt);
    free(pp);
    double t0 = now_ns();
    for (unsigned k = 0; k < bench_state.repeat; k++) {
      cedar_entities *e2;
      if (cedar_entities_parse_json(text, length, p, schema, &e2, &diag) == 0) cedar_entities_free(e2);
    }
    bench_state.entities_ns = (now_ns() - t0) / bench_state.repeat;
    json_error_t jerr;
    json_t *tree = cedar_json_loadb(text, length, &jerr); /* parsed once, as cedar-wasm's caller does */
    t0 = now_ns();
    for (unsigned k = 0; tree && k < bench_state.repeat; k++) {
      cedar_entities *e2;
      if (cedar_entities_from_json(tree, p, schema, &e2, &diag) == 0) cedar_entities_free(e2);
    }
    bench_state.entities_values_ns = (now_ns() - t0) / bench_state.repeat;
    json_decref(tree);
  }
  if (cedar_entities_parse_json(text, length, p, schema, &entities, &diag) < 0) {
    char dm[900];
    snprintf(msg, sizeof msg, "entities: %s", cedar_diagnostic_format(&diag, dm, sizeof dm));
    fail_all(path, requests, msg, c);
    goto out;
  }
  if (validate_mode && schema) {
    cedar_validation_result vr;
    json_t *should = json_object_get(test, "shouldValidate");
    if (cedar_validate_with(schema, set, CEDAR_VALIDATE_ACTION_APPLICATION_ERROR, &vr) < 0) {
      printf("FAIL %s: validation: out of memory\n", path);
      c->failed++;
    } else {
      bool passed = cedar_validation_passed(&vr);
      if (json_is_boolean(should) && passed != json_is_true(should)) {
        char im[1200] = "";
        if (vr.count) cedar_validation_issue_format(&vr.issues[0], im, sizeof im);
        printf("FAIL %s: shouldValidate is %s but validation %s %s\n", path,
               json_is_true(should) ? "true" : "false", passed ? "passed" : "failed:", im);
        c->failed++;
      } else {
        c->passed++;
      }
      cedar_validation_result_release(&vr);
    }
  }
  for (size_t i = 0; i < json_array_size(requests); i++)
    run_request(path, json_array_get(requests, i), set, entities, schema, quiet, c);
out:
  free(p);
  free(text);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
  cedar_schema_free(schema);
}

int main(int argc, char **argv) {
  const char *root = NULL;
  bool quiet = false;
  counts c = {0};
  int first = 1;
  for (; first < argc; first++) {
    if (strcmp(argv[first], "--root") == 0 && first + 1 < argc) {
      root = argv[++first];
    } else if (strcmp(argv[first], "--bench") == 0 && first + 1 < argc) {
      bench_state.repeat = (unsigned)strtoul(argv[++first], NULL, 10);
    } else if (strcmp(argv[first], "--validate") == 0) {
      validate_mode = true;
    } else if (strcmp(argv[first], "--partial") == 0) {
      partial_mode = true;
    } else if (strcmp(argv[first], "--quiet") == 0) {
      quiet = true;
    } else if (strcmp(argv[first], "--help") == 0) {
      printf(
          "usage: cedar-conformance [--root DIR] [--quiet] [--bench N] [--partial] [--validate] "
          "TEST.json...\n");
      return 0;
    } else if (argv[first][0] == '-' && argv[first][1]) {
      fprintf(stderr, "cedar-conformance: unknown option `%s`\n", argv[first]);
      return 2;
    } else {
      break;
    }
  }
  if (first >= argc) {
    fprintf(stderr,
            "usage: cedar-conformance [--root DIR] [--quiet] [--bench N] [--partial] [--validate] "
            "TEST.json...\n");
    return 2;
  }
  scratch = cedar_arena_new();
  if (!scratch) return 2;
  for (int i = first; i < argc; i++) {
    run_test(root, argv[i], quiet, &c);
    cedar_arena_reset(scratch);
  }
  cedar_arena_free(scratch);
  if (bench_state.repeat) {
    bench *b = &bench_state;
    printf("bench: %zu requests x %u repetitions\n", b->count, b->repeat);
    printf("bench: authorize median %.0f ns, p90 %.0f ns (pre-parsed policies, entities, context)\n",
           percentile(b->authorize_ns, b->count, 0.5), percentile(b->authorize_ns, b->count, 0.9));
    printf("bench: entities+context parse + authorize median %.0f ns, p90 %.0f ns (pre-parsed policies)\n",
           percentile(b->full_ns, b->count, 0.5), percentile(b->full_ns, b->count, 0.9));
    printf(
        "bench: entities+context values + authorize median %.0f ns, p90 %.0f ns (JSON already parsed "
        "into jansson values, as cedar-wasm receives JS values)\n",
        percentile(b->values_ns, b->count, 0.5), percentile(b->values_ns, b->count, 0.9));
    printf("bench: policy parse %.1f MB/s (%.0f bytes in %.3f s)\n",
           b->parse_seconds > 0 ? b->parse_bytes / b->parse_seconds / 1e6 : 0, b->parse_bytes,
           b->parse_seconds);
    free(b->authorize_ns);
    free(b->full_ns);
    free(b->values_ns);
  }
  printf("%lu passed, %lu failed\n", c.passed, c.failed);
  return c.failed ? 1 : 0;
}
