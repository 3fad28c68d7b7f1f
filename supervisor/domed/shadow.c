/* Shadow rules: a candidate rules version evaluated beside the active one on every live request
 * (`dome rules apply FILE --name N --shadow`). The active decision is enforced; each request whose shadow
 * decision differs (a flip) is journalled as authz.shadow with both decisions and their determining
 * policies, counted in /metrics (dome_authz_shadow_flips_total) and summarized by `dome rules shadow` in
 * the DecisionDiff shape of `dome rules simulate` (docs/simulate-replay.md). `dome rules promote N` makes
 * the shadow version the active one in one switch; `dome rules shadow --stop` drops it. The shadow is
 * held in memory: a restart of domed ends it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"

#define SHADOW_DIFFS_KEPT 100 /* most recent flips listed by `dome rules shadow` (all are counted) */

struct domed_shadow {
  struct domed_rules *rules; /* the shadow version (a reference) */
  int64_t since;             /* when it was applied, Unix seconds */
  uint64_t evaluated, unchanged, allow_to_deny, deny_to_allow, errors;
  json_t *by_tool, *by_agent, *by_policy; /* name -> {allow_to_deny, deny_to_allow} */
  json_t *diffs;                          /* the last SHADOW_DIFFS_KEPT flips, oldest first */
};

/* domed->shadow is read and replaced under this lock; the counters too. */
static pthread_mutex_t shadow_lock = PTHREAD_MUTEX_INITIALIZER;

static void shadow_free(struct domed_shadow *shadow) {
  if (shadow == NULL) return;
  domed_rules_release(shadow->rules);
  json_decref(shadow->by_tool);
  json_decref(shadow->by_agent);
  json_decref(shadow->by_policy);
  json_decref(shadow->diffs);
  free(shadow);
}

int domed_shadow_install(struct domed *domed, struct domed_rules *rules, dome_error *err) {
  struct domed_shadow *shadow = calloc(1, sizeof *shadow);
  if (shadow == NULL) return dome_error_set(err, ENOMEM, "shadow rules");
  shadow->rules = rules;
  shadow->since = (int64_t)time(NULL);
  shadow->by_tool = json_object();
  shadow->by_agent = json_object();
  shadow->by_policy = json_object();
  shadow->diffs = json_array();
  pthread_mutex_lock(&shadow_lock);
  struct domed_shadow *previous = domed->shadow;
  domed->shadow = shadow;
  pthread_mutex_unlock(&shadow_lock);
  shadow_free(previous);
  return 0;
}

struct domed_rules *domed_shadow_take(struct domed *domed, const char *name) {
  pthread_mutex_lock(&shadow_lock);
  struct domed_shadow *shadow = domed->shadow;
  struct domed_rules *rules = NULL;
  if (shadow && (name == NULL || strcmp(shadow->rules->name, name) == 0)) {
    rules = shadow->rules;
    shadow->rules = NULL;
    domed->shadow = NULL;
  }
  pthread_mutex_unlock(&shadow_lock);
  if (rules) shadow_free(shadow);
  return rules;
}

struct domed_rules *domed_shadow_acquire(struct domed *domed) {
  pthread_mutex_lock(&shadow_lock);
  struct domed_shadow *shadow = domed->shadow;
  struct domed_rules *rules = shadow ? shadow->rules : NULL;
  if (rules) atomic_fetch_add(&rules->refs, 1);
  pthread_mutex_unlock(&shadow_lock);
  return rules;
}

static void count(json_t *table, const char *key, bool to_deny) {
  json_t *row = json_object_get(table, key);
  if (row == NULL) {
    row = json_pack("{s:I,s:I}", "allow_to_deny", (json_int_t)0, "deny_to_allow", (json_int_t)0);
    json_object_set_new(table, key, row);
  }
  const char *field = to_deny ? "allow_to_deny" : "deny_to_allow";
  json_object_set_new(row, field, json_integer(json_integer_value(json_object_get(row, field)) + 1));
}

static json_t *side(bool allow, json_t *determining) {
  return json_pack("{s:s,s:O}", "decision", allow ? "allow" : "deny", "determining", determining);
}

void domed_shadow_observe(struct domed *domed, struct domed_rules *shadow_rules,
                          const struct domed_principal *principal, const char *action, const char *resource,
                          const char *mcp_tool_name, const struct domed_decision *active, bool shadow_allow,
                          json_t *shadow_determining, bool shadow_errors) {
  bool flip = active->allow != shadow_allow;
  uint64_t seq = 0;
  if (flip) {
    atomic_fetch_add(&domed->metrics.shadow_flips[active->allow ? 0 : 1], 1);
    json_t *event = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:i,s:s,s:o,s:o}", "type", "authz.shadow", "agent",
        principal->agent, "gateway", principal->gateway, "action", action, "tool", resource, "mcp_tool",
        mcp_tool_name ? mcp_tool_name : "", "policy_version", active->policy_version, "policy_name",
        active->policy_name, "shadow_version", shadow_rules->version, "shadow_name", shadow_rules->name,
        "active", side(active->allow, active->determining), "shadow", side(shadow_allow, shadow_determining));
    if (principal->actas && principal->actas[0])
      json_object_set_new(event, "actas", json_string(principal->actas));
    dome_error err = {0}; /* a refused journal is counted by audit.c; the active decision stands */
    domed_audit_append(domed, event, &seq, &err);
    json_decref(event);
  }
  pthread_mutex_lock(&shadow_lock);
  struct domed_shadow *shadow = domed->shadow;
  if (shadow && shadow->rules == shadow_rules) { /* still the version this request was evaluated under */
    shadow->evaluated++;
    if (shadow_errors) shadow->errors++;
    if (!flip) {
      shadow->unchanged++;
    } else {
      bool to_deny = active->allow;
      if (to_deny)
        shadow->allow_to_deny++;
      else
        shadow->deny_to_allow++;
      count(shadow->by_tool, mcp_tool_name && mcp_tool_name[0] ? mcp_tool_name : resource, to_deny);
      count(shadow->by_agent, principal->agent, to_deny);
      /* the policies that made the difference: the shadow's when it denies, else the active's */
      json_t *policies = to_deny ? shadow_determining : active->determining;
      size_t i;
      json_t *policy;
      if (json_array_size(policies) == 0) count(shadow->by_policy, "(no policy: default deny)", to_deny);
      json_array_foreach(policies, i, policy) count(shadow->by_policy, json_string_value(policy), to_deny);
      json_t *diff =
          json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:o,s:o}", "seq", (json_int_t)domed_audit_ticket_seq(seq),
                    "time", (json_int_t)time(NULL), "agent", principal->agent, "action", action, "resource",
                    resource, "mcp_tool", mcp_tool_name ? mcp_tool_name : "", "old",
                    side(active->allow, active->determining), "new", side(shadow_allow, shadow_determining));
      if (principal->actas && principal->actas[0])
        json_object_set_new(diff, "actas", json_string(principal->actas));
      json_array_append_new(shadow->diffs, diff);
      if (json_array_size(shadow->diffs) > SHADOW_DIFFS_KEPT) json_array_remove(shadow->diffs, 0);
    }
  }
  pthread_mutex_unlock(&shadow_lock);
}

json_t *domed_shadow_report(struct domed *domed) {
  pthread_mutex_lock(&shadow_lock);
  struct domed_shadow *shadow = domed->shadow;
  json_t *report = NULL;
  if (shadow) {
    report =
        json_pack("{s:{s:s,s:i,s:I},s:{s:I,s:I,s:I,s:I,s:I},s:o,s:o,s:o,s:o}", "shadow", "name",
                  shadow->rules->name, "version", shadow->rules->version, "since", (json_int_t)shadow->since,
                  "summary", "evaluated", (json_int_t)shadow->evaluated, "unchanged",
                  (json_int_t)shadow->unchanged, "allow_to_deny", (json_int_t)shadow->allow_to_deny,
                  "deny_to_allow", (json_int_t)shadow->deny_to_allow, "errors", (json_int_t)shadow->errors,
                  "by_tool", json_deep_copy(shadow->by_tool), "by_agent", json_deep_copy(shadow->by_agent),
                  "by_policy", json_deep_copy(shadow->by_policy), "diffs", json_deep_copy(shadow->diffs));
    if (report)
      json_object_set_new(report, "diffs_truncated",
                          json_boolean(shadow->allow_to_deny + shadow->deny_to_allow > SHADOW_DIFFS_KEPT));
  }
  pthread_mutex_unlock(&shadow_lock);
  return report;
}

void domed_shadow_cleanup(struct domed *domed) {
  pthread_mutex_lock(&shadow_lock);
  struct domed_shadow *shadow = domed->shadow;
  domed->shadow = NULL;
  pthread_mutex_unlock(&shadow_lock);
  shadow_free(shadow);
}
