/* The compiler's driver: load baseline + operator rules, partially evaluate each kernel action for the
 * agent, turn the residuals into predicates and hand them to the network and file table builders. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/compile/baseline_text.h"
#include "policy/compile/internal.h"

const char *dome_baseline_policy_text(void) {
  return dome_baseline_bytes;
}

static int diagnostic_error(dome_error *err, int rc, const cedar_diagnostic *diag) {
  char text[1024];
  return dome_error_set(err,
                        rc == -ENOMEM  ? ENOMEM
                        : rc == -E2BIG ? E2BIG
                                       : 0,
                        "%s", cedar_diagnostic_format(diag, text, sizeof text));
}

int dome_compile_load_policies(const char *operator_text, size_t length, const char *file,
                               cedar_policy_set **set_out, dome_error *err) {
  cedar_diagnostic diag = {0};
  cedar_policy_set *set = NULL;
  const char *baseline = dome_baseline_policy_text();
  if (operator_text) {
    /* the operator's file alone first: its diagnostics then name its own lines */
    int rc = cedar_policy_set_parse(operator_text, length, file, CEDAR_PARSE_ID_ANNOTATIONS, &set, &diag);
    if (rc < 0) return diagnostic_error(err, rc, &diag);
    cedar_policy_set *base = NULL;
    rc = cedar_policy_set_parse(baseline, strlen(baseline), "policy/baseline.cedar",
                                CEDAR_PARSE_ID_ANNOTATIONS, &base, &diag);
    if (rc < 0) {
      cedar_policy_set_free(set);
      return diagnostic_error(err, rc, &diag);
    }
    for (size_t i = 0; i < cedar_policy_set_count(set); i++) {
      const cedar_policy *p = cedar_policy_set_at(set, i);
      if (!cedar_policy_set_find(base, cedar_policy_id(p))) continue;
      const char *where = NULL;
      unsigned line = 0, column = 0;
      cedar_policy_location(p, &where, &line, &column);
      rc = dome_error_set(err, EINVAL,
                          "%s:%u:%u: policy `%s`: this id belongs to the baseline (policy/baseline.cedar); "
                          "choose another @id",
                          file ? file : "rules", line, column, cedar_policy_id(p));
      cedar_policy_set_free(base);
      cedar_policy_set_free(set);
      return rc;
    }
    cedar_policy_set_free(base);
    for (size_t i = 0; i < cedar_policy_set_count(set); i++)
      if (cedar_policy_is_template(cedar_policy_set_at(set, i))) {
        int r = dome_error_set(err, EINVAL, "%s: policy `%s`: templates are not compiled (link them first)",
                               file ? file : "rules", cedar_policy_id(cedar_policy_set_at(set, i)));
        cedar_policy_set_free(set);
        return r;
      }
    cedar_policy_set_free(set);
    set = NULL;
  }
  size_t base_length = strlen(baseline);
  size_t total = (operator_text ? length : 0) + 1 + base_length;
  if (total > CEDAR_MAX_TEXT_BYTES)
    return dome_error_set(err, E2BIG, "%s: over %u bytes", file ? file : "rules", CEDAR_MAX_TEXT_BYTES);
  char *text = malloc(total + 1);
  if (!text) return dome_error_set(err, ENOMEM, "out of memory");
  size_t n = 0;
  if (operator_text) {
    memcpy(text, operator_text, length);
    n = length;
  }
  text[n++] = '\n';
  memcpy(text + n, baseline, base_length);
  n += base_length;
  text[n] = 0;
  int rc = cedar_policy_set_parse(text, n, file ? file : "policy/baseline.cedar", CEDAR_PARSE_ID_ANNOTATIONS,
                                  &set, &diag);
  free(text);
  if (rc < 0) return diagnostic_error(err, rc, &diag);
  *set_out = set;
  return 0;
}

int dome_compile_load_entities(const char *text, size_t length, const char *file,
                               const struct cedar_schema *schema, cedar_entities **out, dome_error *err) {
  if (!text) {
    if (cedar_entities_empty(out) < 0) return dome_error_set(err, ENOMEM, "out of memory");
    return 0;
  }
  json_error_t jerr;
  json_t *root = json_loadb(text, length, 0, &jerr);
  if (!root)
    return dome_error_set(err, EINVAL, "%s:%d:%d: %s", file ? file : "entities", jerr.line, jerr.column,
                          jerr.text);
  size_t i;
  json_t *entity;
  json_array_foreach(root, i, entity) {
    json_t *uid = json_object_get(entity, "uid");
    if (json_object_get(uid, "__entity")) uid = json_object_get(uid, "__entity");
    const char *type = json_string_value(json_object_get(uid, "type"));
    if (type && (strcmp(type, "Dome::Path") == 0 || strcmp(type, "Dome::Network") == 0)) {
      int rc =
          dome_error_set(err, EINVAL,
                         "%s: entity %zu: %s entities are defined by the kernel (the directory tree, the "
                         "destination class) and cannot be given as entity data",
                         file ? file : "entities", i, type);
      json_decref(root);
      return rc;
    }
  }
  json_decref(root);
  cedar_diagnostic diag = {0};
  int rc = cedar_entities_parse_json(text, length, file, schema, out, &diag);
  if (rc < 0) return diagnostic_error(err, rc, &diag);
  return 0;
}

void dome_compile_decide(const struct compiled_policy *policies, size_t count, const bool *satisfied,
                         enum dome_decision *decision, long *policy) {
  long permit = -1;
  for (size_t i = 0; i < count; i++) {
    if (!satisfied[i]) continue;
    if (policies[i].forbid) {
      *decision = DOME_DECISION_DENY;
      *policy = (long)i;
      return;
    }
    if (permit < 0) permit = (long)i;
  }
  *decision = permit >= 0 ? DOME_DECISION_ALLOW : DOME_DECISION_DENY;
  *policy = permit;
}

static const struct {
  const char *name;
  bool is_file;
  int kind; /* enum dome_file_access or enum dome_net_action */
} actions[] = {
    {"fs:read", true, DOME_FILE_READ},  {"fs:write", true, DOME_FILE_WRITE},
    {"fs:exec", true, DOME_FILE_EXEC},  {"net:connect", false, DOME_NET_CONNECT},
    {"net:bind", false, DOME_NET_BIND}, {"net:send", false, DOME_NET_SEND},
};

static const char network_context[] =
    "{\"dst_ip\": {\"__extn\": {\"fn\": \"unknown\", \"arg\": \"dst_ip\"}},"
    " \"dst_port\": {\"__extn\": {\"fn\": \"unknown\", \"arg\": \"dst_port\"}},"
    " \"protocol\": {\"__extn\": {\"fn\": \"unknown\", \"arg\": \"protocol\"}}}";

static int partial(const cedar_policy_set *set, const cedar_entities *entities, const char *agent, size_t a,
                   const cedar_context *context, cedar_partial_response *response, dome_error *err) {
  cedar_partial_request request = {
      .principal = {.type = "Dome::Agent", .id = agent},
      .action = {.type = "Dome::Action", .id = actions[a].name},
      .resource = {.type = NULL},
      .context = actions[a].is_file ? NULL : context,
  };
  if (cedar_partially_authorize(set, entities, &request, response) < 0)
    return dome_error_set(err, ENOMEM, "%s: partial evaluation: out of memory", actions[a].name);
  return 0;
}

static int network_context_parse(cedar_context **context, dome_error *err) {
  cedar_diagnostic diag = {0};
  int rc =
      cedar_context_parse_json(network_context, strlen(network_context), NULL, NULL, NULL, context, &diag);
  return rc < 0 ? diagnostic_error(err, rc, &diag) : 0;
}

static size_t policy_order(const cedar_policy_set *set, const char *id) {
  for (size_t i = 0; i < cedar_policy_set_count(set); i++)
    if (strcmp(cedar_policy_id(cedar_policy_set_at(set, i)), id) == 0) return i;
  return SIZE_MAX;
}

static int compare_order(const void *a, const void *b) {
  const struct compiled_policy *x = a, *y = b;
  return x->order < y->order ? -1 : x->order > y->order;
}

static int compile_action(const cedar_policy_set *set, const cedar_entities *entities,
                          const struct dome_compile_options *options, size_t a, const cedar_context *context,
                          struct dome_rule_tables *tables, dome_error *err) {
  const char *agent = options->agent;
  cedar_partial_response response = {0};
  int rc = partial(set, entities, agent, a, context, &response, err);
  if (rc < 0) return rc;
  for (size_t i = 0; options->warn && i < response.error_count; i++)
    options->warn(options->warn_context, actions[a].name, response.errors[i].policy_id,
                  response.errors[i].message);
  size_t residual_count = response.residuals ? cedar_policy_set_count(response.residuals) : 0;
  size_t capacity = response.satisfied_count + residual_count;
  struct compiled_policy *policies = calloc(capacity + 1, sizeof *policies);
  size_t count = 0;
  if (!policies) {
    rc = dome_error_set(err, ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < response.satisfied_count; i++) {
    const cedar_policy *p = cedar_policy_set_find(set, response.satisfied[i]);
    struct pred *t = calloc(1, sizeof *t);
    if (!p || !t) {
      free(t);
      rc = dome_error_set(err, ENOMEM, "out of memory");
      goto out;
    }
    t->kind = PRED_TRUE;
    policies[count++] = (struct compiled_policy){.id = cedar_policy_id(p),
                                                 .forbid = cedar_policy_effect(p) == CEDAR_FORBID,
                                                 .order = policy_order(set, cedar_policy_id(p)),
                                                 .pred = t};
  }
  for (size_t i = 0; i < residual_count && rc == 0; i++) {
    const cedar_policy *r = cedar_policy_set_at(response.residuals, i);
    const cedar_policy *original = cedar_policy_set_find(set, cedar_policy_id(r));
    char *json = cedar_policy_to_json(r);
    json_t *est = json ? json_loads(json, 0, NULL) : NULL;
    free(json);
    if (!est || !original) {
      json_decref(est);
      rc = dome_error_set(err, ENOMEM, "%s: policy `%s`: residual unreadable", actions[a].name,
                          cedar_policy_id(r));
      break;
    }
    struct pred *pred = NULL;
    struct pred_env env = {
        .is_file = actions[a].is_file, .entities = entities, .agent = agent, .action = actions[a].name};
    rc = dome_compile_pred_from_policy_json(est, &env, &pred, err);
    json_decref(est);
    if (rc < 0) {
      const char *file = NULL;
      unsigned line = 0, column = 0;
      cedar_policy_location(original, &file, &line, &column);
      if (file && line)
        dome_error_wrap(err, "%s:%u:%u: %s: policy `%s`", file, line, column, actions[a].name,
                        cedar_policy_id(r));
      else
        dome_error_wrap(err, "%s: policy `%s`", actions[a].name, cedar_policy_id(r));
      break;
    }
    policies[count++] = (struct compiled_policy){.id = cedar_policy_id(original),
                                                 .forbid = cedar_policy_effect(original) == CEDAR_FORBID,
                                                 .order = policy_order(set, cedar_policy_id(original)),
                                                 .pred = pred};
  }
  if (rc == 0) {
    qsort(policies, count, sizeof *policies, compare_order);
    rc = actions[a].is_file
             ? dome_compile_file_action(policies, count, (enum dome_file_access)actions[a].kind, tables, err)
             : dome_compile_net_action(policies, count, (enum dome_net_action)actions[a].kind, tables, err);
  }
out:
  for (size_t i = 0; i < count; i++) dome_compile_pred_free(policies[i].pred);
  free(policies);
  cedar_partial_response_release(&response);
  return rc;
}

int dome_compile_tables(const cedar_policy_set *set, const cedar_entities *entities,
                        const struct dome_compile_options *options, struct dome_rule_tables *tables,
                        dome_error *err) {
  dome_rule_tables_init(tables);
  if (!set || !options || !options->agent || !options->agent[0])
    return dome_error_set(err, EINVAL, "compile: an agent name is required");
  cedar_context *context = NULL;
  int rc = network_context_parse(&context, err);
  if (rc == 0 && !(tables->agent = strdup(options->agent))) rc = dome_error_set(err, ENOMEM, "out of memory");
  if (rc == 0 && options->policy_version && !(tables->policy_version = strdup(options->policy_version)))
    rc = dome_error_set(err, ENOMEM, "out of memory");
  for (size_t a = 0; rc == 0 && a < sizeof actions / sizeof actions[0]; a++)
    rc = compile_action(set, entities, options, a, context, tables, err);
  if (rc == 0) {
    rc = dome_rule_tables_validate(tables, err);
    if (rc < 0) dome_error_wrap(err, "compiled tables invalid (compiler bug)");
  }
  cedar_context_free(context);
  if (rc < 0) dome_rule_tables_free(tables);
  return rc;
}

bool dome_compile_needs_egress(const struct dome_rule_tables *tables) {
  struct prefix lo4 = {.family = 4, .length = 8, .address = {127}};
  struct prefix lo6 = {.family = 6, .length = 128, .address = {[15] = 1}};
  for (size_t i = 0; i < tables->net_count; i++) {
    const struct dome_net_entry *e = &tables->net[i];
    if (e->decision != DOME_DECISION_ALLOW || e->action == DOME_NET_BIND) continue;
    struct prefix p = {.family = e->family == AF_INET6 ? 6 : 4, .length = e->prefix_len};
    memcpy(p.address, e->address, 16);
    if (!dome_compile_prefix_covers(p.family == 4 ? &lo4 : &lo6, &p)) return true;
  }
  return false;
}
