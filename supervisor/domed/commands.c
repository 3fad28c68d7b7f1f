/* The control socket commands domed serves to the `dome` CLI (protocol in supervisor/control/control.h). */
#include <errno.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"
#include "supervisor/gateway/gateway.h"

static pthread_mutex_t rules_apply_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *arg_string(const struct control_request *request, const char *key) {
  return json_string_value(json_object_get(request->args, key));
}

/* The administrative event of the command this thread serves, made durable by the store's commit hook
 * right before the store writes the change (domed_admin_commit_hook): a change whose record the journal
 * refuses never takes effect. A command that changes the store calls admin_begin with its event before
 * the change and admin_end after it. */
static _Thread_local struct {
  json_t *event;  /* NULL outside an administrative command */
  bool journaled; /* its record is durable: later writes of the same command go on */
} admin_pending;

int domed_admin_commit_hook(void *context, dome_error *err) {
  struct domed *domed = context;
  if (admin_pending.event == NULL || admin_pending.journaled) return 0;
  if (domed_audit_append_sync(domed, admin_pending.event, err) < 0)
    return dome_error_wrap(err, "%s refused, the store is unchanged: the journal cannot record it",
                           json_string_value(json_object_get(admin_pending.event, "type")));
  admin_pending.journaled = true;
  return 0;
}

/* The record of an administrative change held outside the store (shadow rules in domed's memory, tool
 * pins in their own files), made durable before the change: the caller makes the change only when this
 * returns 0; else -errno with *err saying the change was refused. `event` is stolen. */
static int journal_admin(struct domed *domed, const struct control_request *request, json_t *event,
                         dome_error *err) {
  json_object_set_new(event, "operator_uid", json_integer((json_int_t)request->uid));
  int rc = domed_audit_append_sync(domed, event, err);
  if (rc < 0)
    dome_error_wrap(err, "%s refused, nothing changed: the journal cannot record it",
                    json_string_value(json_object_get(event, "type")));
  json_decref(event);
  return rc;
}

/* Hold `event` (stolen) as the record of the change about to be made by this thread. */
static void admin_begin(const struct control_request *request, json_t *event) {
  json_object_set_new(event, "operator_uid", json_integer((json_int_t)request->uid));
  json_decref(admin_pending.event);
  admin_pending.event = event;
  admin_pending.journaled = false;
}

/* End the change begun by admin_begin, whose store call returned `rc`. A change that wrote nothing
 * (rc 0, the hook never called) is journalled now. Returns rc, or the journal's -errno (*err). */
static int admin_end(struct domed *domed, int rc, dome_error *err) {
  if (rc == 0 && !admin_pending.journaled) rc = domed_admin_commit_hook(domed, err);
  /* jails prepared before any administrative change are never used after it */
  if (admin_pending.event) domed_jail_pool_invalidate(domed);
  json_decref(admin_pending.event);
  admin_pending.event = NULL;
  admin_pending.journaled = false;
  return rc;
}

static json_t *agents_command(struct domed *domed, const struct control_request *request, const char *verb,
                              dome_error *err) {
  const char *name = arg_string(request, "name");
  if (strcmp(verb, "list") == 0) return control_agent_list(domed->store);
  if (strcmp(verb, "register") == 0 || strcmp(verb, "token") == 0) {
    char token[CONTROL_TOKEN_SIZE];
    /* the token's lifetime: --ttl, else the token_ttl configuration, else none */
    int64_t ttl = domed->config.token_ttl_s;
    const char *ttl_text = arg_string(request, "ttl");
    if (ttl_text && control_ttl_parse(ttl_text, &ttl, err) < 0) {
      dome_error_wrap(err, "--ttl");
      return NULL;
    }
    int64_t expires = ttl > 0 ? (int64_t)time(NULL) + ttl : 0;
    /* Delegation (gateway, issue #9): register --delegates-to P, token --act-as P. */
    const char *delegates_to = arg_string(request, "delegates_to"), *act_as = arg_string(request, "act_as");
    json_t *event = json_pack(
        "{s:s,s:s?,s:s}", "type", strcmp(verb, "register") == 0 ? "agent.registered" : "agent.token", "agent",
        name, "capabilities", arg_string(request, "capabilities") ? arg_string(request, "capabilities") : "");
    if (strcmp(verb, "register") == 0 && delegates_to && delegates_to[0])
      json_object_set_new(event, "delegates_to", json_string(delegates_to));
    if (strcmp(verb, "token") == 0 && act_as && act_as[0])
      json_object_set_new(event, "actas", json_string(act_as));
    if (expires) json_object_set_new(event, "expires", json_integer((json_int_t)expires));
    admin_begin(request, event);
    int rc = strcmp(verb, "register") == 0
                 ? control_agent_register_delegate(domed->store, name, arg_string(request, "capabilities"),
                                                   delegates_to, expires, token, err)
             : act_as && act_as[0]
                 ? control_agent_delegated_token(domed->store, name, act_as, expires, token, err)
                 : control_agent_rotate_token(domed->store, name, expires, token, err);
    if (admin_end(domed, rc, err) < 0) {
      sodium_memzero(token, sizeof token);
      return NULL;
    }
    json_t *result = json_pack("{s:s,s:s}", "name", name, "token", token);
    if (expires) json_object_set_new(result, "expires", json_integer((json_int_t)expires));
    if (strcmp(verb, "register") == 0 && delegates_to && delegates_to[0])
      json_object_set_new(result, "delegates_to", json_string(delegates_to));
    if (strcmp(verb, "token") == 0 && act_as && act_as[0])
      json_object_set_new(result, "act_as", json_string(act_as));
    sodium_memzero(token, sizeof token);
    return result;
  }
  const char *status = strcmp(verb, "suspend") == 0  ? "suspended"
                       : strcmp(verb, "revoke") == 0 ? "revoked"
                       : strcmp(verb, "resume") == 0 ? "active"
                                                     : NULL;
  if (status == NULL) {
    dome_error_set(err, EINVAL, "unknown command `agents.%s`", verb);
    return NULL;
  }
  admin_begin(request, json_pack("{s:s,s:s?,s:s}", "type", "agent.status", "agent", name, "status", status));
  if (admin_end(domed, control_agent_set_status(domed->store, name, status, err), err) < 0) return NULL;
  /* a suspended or revoked agent's token is refused from now on; what it already started stops too */
  size_t cancelled = strcmp(status, "active") == 0 ? 0 : mcp_server_cancel_agent(domed->mcp, name);
  if (strcmp(status, "active") == 0) domed_risk_clear(domed->risk, name); /* resuming closes its alerts */
  return json_pack("{s:s,s:s,s:I}", "name", name, "status", status, "cancelled", (json_int_t)cancelled);
}

static json_t *rules_apply(struct domed *domed, const struct control_request *request, bool store_it,
                           dome_error *err) {
  const char *text = arg_string(request, "text");
  const char *name = arg_string(request, "name");
  const char *file = arg_string(request, "file");
  if (text == NULL) {
    dome_error_set(err, EINVAL, "rules text missing");
    return NULL;
  }
  if (store_it && !control_name_valid(name)) {
    dome_error_set(err, EINVAL, "--name: invalid rules name `%s`", name ? name : "");
    return NULL;
  }
  struct domed_rules *rules = NULL;
  if (domed_rules_compile(domed, text, file ? file : "rules.cedar", &rules, err) < 0) return NULL;
  if (!store_it) {
    domed_rules_release(rules);
    return json_pack("{s:b}", "valid", 1);
  }
  bool shadow = json_is_true(json_object_get(request->args, "shadow"));
  pthread_mutex_lock(&rules_apply_lock);
  /* the version control_rules_store is about to give (applies are serialized by rules_apply_lock) */
  json_t *versions = control_rules_list(domed->store);
  char next_version[32];
  snprintf(next_version, sizeof next_version, "%zu", json_array_size(versions) + 1);
  json_decref(versions);
  admin_begin(request,
              shadow ? json_pack("{s:s,s:s,s:s,s:i}", "type", "rules.shadow", "shadow_version", next_version,
                                 "name", name, "policy_version", control_rules_active(domed->store))
                     : json_pack("{s:s,s:s,s:s}", "type", "rules.applied", "policy_version", next_version,
                                 "name", name));
  int version = control_rules_store(domed->store, name, text, err);
  if (shadow) { /* stored, evaluated beside the active version, not enforced */
    if (admin_end(domed, version < 0 ? version : 0, err) < 0) {
      pthread_mutex_unlock(&rules_apply_lock);
      domed_rules_release(rules);
      return NULL;
    }
    rules->version = version;
    snprintf(rules->name, sizeof rules->name, "%s", name);
    int rc = domed_shadow_install(domed, rules, err);
    pthread_mutex_unlock(&rules_apply_lock);
    if (rc < 0) {
      domed_rules_release(rules);
      return NULL;
    }
    domed_log("info", "rules", "shadow version=%d name=%s", version, name);
    return json_pack("{s:i,s:s,s:b,s:b}", "version", version, "name", name, "active", 0, "shadow", 1);
  }
  int rc = version < 0 ? version : control_rules_activate(domed->store, version, err);
  if (admin_end(domed, rc, err) < 0) {
    pthread_mutex_unlock(&rules_apply_lock);
    domed_rules_release(rules);
    return NULL;
  }
  rules->version = version;
  snprintf(rules->name, sizeof rules->name, "%s", name);
  domed_rules_install(domed, rules);
  json_t *sessions =
      domed_sessions_rules_changed(domed); /* under the lock: one version reaches them at a time */
  pthread_mutex_unlock(&rules_apply_lock);
  domed_log("info", "rules", "applied version=%d name=%s", version, name);
  return json_pack("{s:i,s:s,s:b,s:o}", "version", version, "name", name, "active", 1, "sessions", sessions);
}

static json_t *rules_command(struct domed *domed, const struct control_request *request, const char *verb,
                             dome_error *err) {
  if (strcmp(verb, "apply") == 0) return rules_apply(domed, request, true, err);
  if (strcmp(verb, "validate") == 0) return rules_apply(domed, request, false, err);
  if (strcmp(verb, "list") == 0) return control_rules_list(domed->store);
  if (strcmp(verb, "shadow") == 0) {
    if (json_is_true(json_object_get(request->args, "stop"))) {
      /* the shadow ends only once its end is on record; the lock keeps it the same meanwhile */
      pthread_mutex_lock(&rules_apply_lock);
      json_t *report = domed_shadow_report(domed);
      json_t *shadow = json_object_get(report, "shadow");
      if (report == NULL) {
        pthread_mutex_unlock(&rules_apply_lock);
        dome_error_set(err, ENOENT, "no shadow rules to stop");
        return NULL;
      }
      json_t *event =
          json_pack("{s:s,s:O,s:O,s:O}", "type", "rules.shadow_stopped", "name",
                    json_object_get(shadow, "name"), "shadow_version", json_object_get(shadow, "version"),
                    "summary", json_object_get(report, "summary"));
      if (journal_admin(domed, request, event, err) < 0) {
        pthread_mutex_unlock(&rules_apply_lock);
        json_decref(report);
        return NULL;
      }
      domed_rules_release(domed_shadow_take(domed, NULL));
      pthread_mutex_unlock(&rules_apply_lock);
      json_object_set_new(report, "stopped", json_true());
      return report;
    }
    json_t *report = domed_shadow_report(domed);
    if (report == NULL)
      dome_error_set(err, ENOENT, "no shadow rules (dome rules apply FILE --name N --shadow)");
    return report;
  }
  if (strcmp(verb, "promote") == 0) {
    const char *name = arg_string(request, "name");
    pthread_mutex_lock(&rules_apply_lock);
    json_t *report = domed_shadow_report(domed);
    const char *shadow_name = json_string_value(json_object_get(json_object_get(report, "shadow"), "name"));
    if (report == NULL || name == NULL || strcmp(shadow_name, name) != 0) {
      pthread_mutex_unlock(&rules_apply_lock);
      dome_error_set(err, ENOENT, "`%s` is not the shadow rules%s%s", name ? name : "",
                     shadow_name ? " (the shadow is " : "", shadow_name ? shadow_name : "");
      if (shadow_name)
        snprintf(err->message + strlen(err->message), sizeof err->message - strlen(err->message), ")");
      json_decref(report);
      return NULL;
    }
    int version = (int)json_integer_value(json_object_get(json_object_get(report, "shadow"), "version"));
    int previous = control_rules_active(domed->store);
    char version_text[32];
    snprintf(version_text, sizeof version_text, "%d", version);
    admin_begin(request, json_pack("{s:s,s:s,s:s,s:i,s:O}", "type", "rules.promoted", "policy_version",
                                   version_text, "name", name, "previous_version", previous, "summary",
                                   json_object_get(report, "summary")));
    if (admin_end(domed, control_rules_activate(domed->store, version, err), err) < 0) {
      pthread_mutex_unlock(&rules_apply_lock);
      json_decref(report);
      return NULL;
    }
    /* one switch: the shadow's compiled rules become the active ones, the shadow ends */
    struct domed_rules *promoted = domed_shadow_take(domed, name);
    domed_rules_install(domed, promoted);
    json_t *sessions = domed_sessions_rules_changed(domed);
    pthread_mutex_unlock(&rules_apply_lock);
    domed_log("info", "rules", "promoted version=%d name=%s", version, name);
    json_decref(report);
    return json_pack("{s:i,s:s,s:b,s:i,s:o}", "version", version, "name", name, "active", 1,
                     "previous_version", previous, "sessions", sessions);
  }
  if (strcmp(verb, "show") == 0) {
    int version = (int)json_integer_value(json_object_get(request->args, "version"));
    char *text = control_rules_text(domed->store, version, err);
    if (text == NULL) return NULL;
    json_t *result = json_pack("{s:i,s:s}", "version", version ? version : control_rules_active(domed->store),
                               "text", text);
    free(text);
    return result;
  }
  dome_error_set(err, EINVAL, "unknown command `rules.%s`", verb);
  return NULL;
}

/* The command being served, for journal_pins. */
struct admin_command {
  struct domed *domed;
  const struct control_request *request;
};

/* tool.approved: the digests about to be pinned, the changes approved and the findings accepted
 * (domed_pins_approve's record callback: the pins are saved only once this returned 0). */
static int journal_pins(void *context, const json_t *pins, dome_error *err) {
  const struct admin_command *command = context;
  json_t *changes = json_array();
  size_t i;
  json_t *change;
  json_array_foreach(json_object_get(pins, "changes"), i, change) {
    json_t *summary = json_pack("{s:O,s:O}", "mcp_tool", json_object_get(change, "mcp_tool"), "change",
                                json_object_get(change, "change"));
    const char *keys[] = {"old_digest", "new_digest", "fields"};
    for (size_t k = 0; k < 3; k++)
      if (json_object_get(change, keys[k]))
        json_object_set(summary, keys[k], json_object_get(change, keys[k]));
    json_array_append_new(changes, summary);
  }
  return journal_admin(command->domed, command->request,
                       json_pack("{s:s,s:O,s:O,s:o,s:O}", "type", "tool.approved", "tool",
                                 json_object_get(pins, "tool"), "pinned", json_object_get(pins, "pinned"),
                                 "changes", changes, "findings_accepted", json_object_get(pins, "findings")),
                       err);
}

static json_t *tools_command(struct domed *domed, const struct control_request *request, const char *verb,
                             dome_error *err) {
  if (strcmp(verb, "list") == 0) return control_tool_list(domed->store);
  if (strcmp(verb, "definitions") == 0) { /* the registry typing context.input (dome rules validate) */
    json_t *errors = json_array();
    json_t *definitions = domed_tool_definitions(domed, errors);
    return json_pack("{s:o,s:o}", "tools", definitions, "errors", errors);
  }
  const char *name = arg_string(request, "name");
  if (strcmp(verb, "remove") == 0) {
    admin_begin(request, json_pack("{s:s,s:s?}", "type", "tool.removed", "tool", name));
    if (admin_end(domed, control_tool_remove(domed->store, name, err), err) < 0) return NULL;
    if (domed->gateways) gateway_registry_forget(domed->gateways, name);
    if (name) domed_pins_forget(domed, name);
    return json_pack("{s:s}", "removed", name);
  }
  if (strcmp(verb, "add") == 0) {
    json_t *tool = json_deep_copy(request->args);
    json_object_del(tool, "env_file");
    json_object_del(tool, "accept_findings");
    /* the credential header is a secret: kept apart (0600), the entry only says it exists */
    const char *auth_header = arg_string(request, "auth_header");
    json_object_del(tool, "auth_header");
    admin_begin(request, json_pack("{s:s,s:s?}", "type", "tool.added", "tool", name));
    if (auth_header) {
      /* the secret is the change's first write: its record is made durable there */
      if (gateway_auth_header_check(auth_header, err) < 0 ||
          control_tool_set_auth_header(domed->store, name, auth_header, err) < 0) {
        admin_end(domed, -EINVAL, err);
        json_decref(tool);
        return NULL;
      }
      json_object_set_new(tool, "auth_header", json_true());
    } else {
      json_t *previous = control_tool_get(domed->store, name);
      if (json_is_true(json_object_get(previous, "auth_header")))
        json_object_set_new(tool, "auth_header", json_true());
      json_decref(previous);
    }
    if (name && strcmp(name, DOMED_BUILTIN_TOOL) == 0) {
      json_object_set_new(tool, "builtin", json_true());
      if (json_object_get(tool, "capability") == NULL)
        json_object_set_new(tool, "capability", json_string(DOMED_BUILTIN_CAPABILITY));
    }
    int rc =
        admin_end(domed, control_tool_add(domed->store, tool, arg_string(request, "env_file"), err), err);
    json_decref(tool);
    if (rc < 0) return NULL;
    if (domed->gateways && name) gateway_registry_forget(domed->gateways, name);
    json_t *added = control_tool_get(domed->store, name);
    /* a new or replaced backend's tools are pinned at its first discovery (tool_pins.c); adding
     * contacts no backend */
    if (gateway_entry_is_external(added) && strcmp(name, DOMED_BUILTIN_TOOL) != 0)
      domed_pins_forget(domed, name);
    return added;
  }
  if (strcmp(verb, "approve") == 0) {
    json_t *entry = control_tool_get(domed->store, name);
    if (entry == NULL || !gateway_entry_is_external(entry) || domed->gateways == NULL) {
      json_decref(entry);
      dome_error_set(err, ENOENT, "`%s` is not a registered gateway backend", name ? name : "");
      return NULL;
    }
    struct admin_command command = {domed, request};
    json_t *pins =
        domed_pins_approve(domed, entry, json_is_true(json_object_get(request->args, "accept_findings")),
                           journal_pins, &command, err);
    json_decref(entry);
    return pins;
  }
  dome_error_set(err, EINVAL, "unknown command `tools.%s`", verb);
  return NULL;
}

static json_t *quotas_command(struct domed *domed, const struct control_request *request, const char *verb,
                              dome_error *err) {
  if (strcmp(verb, "list") == 0) return control_quota_list(domed->store);
  if (strcmp(verb, "set") == 0) {
    const char *capability = arg_string(request, "capability");
    json_t *fields = json_deep_copy(request->args);
    json_object_del(fields, "capability");
    admin_begin(request, json_pack("{s:s,s:s?}", "type", "quota.set", "capability", capability));
    int rc = admin_end(domed, control_quota_set(domed->store, capability, fields, err), err);
    json_decref(fields);
    if (rc < 0) return NULL;
    json_t *all = control_quota_list(domed->store);
    json_t *result = json_incref(json_object_get(all, capability));
    json_decref(all);
    return result;
  }
  dome_error_set(err, EINVAL, "unknown command `quotas.%s`", verb);
  return NULL;
}

static json_t *gateways_command(struct domed *domed, const struct control_request *request, const char *verb,
                                dome_error *err) {
  if (strcmp(verb, "list") == 0) return control_gateway_list(domed->store);
  if (strcmp(verb, "create") == 0) {
    const char *name = arg_string(request, "name");
    admin_begin(request, json_pack("{s:s,s:s?}", "type", "gateway.created", "gateway", name));
    if (admin_end(domed, control_gateway_create(domed->store, name, err), err) < 0) return NULL;
    return json_pack("{s:s}", "name", name);
  }
  bool grant = strcmp(verb, "grant") == 0;
  if (grant || strcmp(verb, "revoke") == 0) {
    const char *agent = arg_string(request, "agent");
    const char *gateway = arg_string(request, "gateway");
    json_t *grants = NULL;
    admin_begin(request, json_pack("{s:s,s:s?,s:s?}", "type", grant ? "gateway.granted" : "gateway.revoked",
                                   "agent", agent, "gateway", gateway));
    int rc = grant ? control_gateway_grant(domed->store, agent, gateway, &grants, err)
                   : control_gateway_revoke(domed->store, agent, gateway, &grants, err);
    if (admin_end(domed, rc, err) < 0) {
      json_decref(grants);
      return NULL;
    }
    return json_pack("{s:s,s:o}", "agent", agent, "gateways", grants);
  }
  dome_error_set(err, EINVAL, "unknown command `gateways.%s`", verb);
  return NULL;
}

/* audit.record {records: [...]}: the exec.* records of an operator's `dome run` (supervisor/exec wrote
 * them), appended in order and synced before the answer, each stamped with the sender's operator_uid.
 * Only the execution record types are accepted, at most CONTROL_RECORDS_MAX a call; a refusal of the
 * journal fails the call (the CLI then stops its program: fail closed). Answers {appended}. */
#define CONTROL_RECORDS_MAX 4096
static json_t *audit_record(struct domed *domed, const struct control_request *request, dome_error *err) {
  static const char *const types[] = {"exec.start",  "exec.jail",      "exec.output", "exec.denial",
                                      "exec.shadow", "exec.redaction", "exec.end"};
  json_t *records = json_object_get(request->args, "records");
  if (!json_is_array(records) || json_array_size(records) == 0 ||
      json_array_size(records) > CONTROL_RECORDS_MAX) {
    dome_error_set(err, EINVAL, "records: expected an array of 1 to %d exec.* records", CONTROL_RECORDS_MAX);
    return NULL;
  }
  size_t i;
  json_t *record;
  json_array_foreach(records, i, record) {
    const char *type = json_string_value(json_object_get(record, "type"));
    bool known = false;
    for (size_t t = 0; type && t < sizeof types / sizeof types[0]; t++) known |= strcmp(type, types[t]) == 0;
    if (!json_is_object(record) || !known || !json_is_string(json_object_get(record, "exec_id"))) {
      dome_error_set(err, EINVAL, "records[%zu]: not an exec.* record with an exec_id", i);
      return NULL;
    }
  }
  uint64_t first = 0, last = 0;
  json_array_foreach(records, i, record) {
    json_t *copy = json_deep_copy(record);
    if (copy == NULL) {
      dome_error_set(err, ENOMEM, "records[%zu]", i);
      return NULL;
    }
    json_object_set_new(copy, "operator_uid", json_integer((json_int_t)request->uid));
    int rc = domed_audit_append(domed, copy, &last, err);
    json_decref(copy);
    if (rc < 0) return NULL;
    if (first == 0) first = last;
  }
  if (domed_audit_sync_span(domed, first, last, err) < 0) return NULL;
  return json_pack("{s:I}", "appended", (json_int_t)json_array_size(records));
}

/* operators.add {name, role} (the login token, shown once), operators.list, operators.revoke {name}
 * (its console sessions end at once). Each change journals operator.added / operator.revoked. */
static json_t *operators_command(struct domed *domed, const struct control_request *request, const char *verb,
                                 dome_error *err) {
  const char *name = arg_string(request, "name");
  if (strcmp(verb, "list") == 0) return control_operator_list(domed->store);
  if (strcmp(verb, "add") == 0) {
    const char *role = arg_string(request, "role");
    char token[CONTROL_TOKEN_SIZE];
    admin_begin(request,
                json_pack("{s:s,s:s?,s:s?}", "type", "operator.added", "operator", name, "role", role));
    if (admin_end(domed, control_operator_add(domed->store, name, role, token, err), err) < 0) return NULL;
    json_t *result = json_pack("{s:s,s:s,s:s}", "name", name, "role", role, "token", token);
    sodium_memzero(token, sizeof token);
    return result;
  }
  if (strcmp(verb, "revoke") == 0) {
    admin_begin(request, json_pack("{s:s,s:s?}", "type", "operator.revoked", "operator", name));
    if (admin_end(domed, control_operator_revoke(domed->store, name, err), err) < 0) return NULL;
    domed_console_logout_operator(domed, name);
    return json_pack("{s:s,s:s}", "name", name, "status", "revoked");
  }
  dome_error_set(err, EINVAL, "unknown command `operators.%s`", verb);
  return NULL;
}

json_t *domed_control_handle(void *context, const struct control_request *request, dome_error *err) {
  struct domed *domed = context;
  const char *command = request->command;
  const char *dot = strchr(command, '.');
  char group[32];
  if (dot == NULL || (size_t)(dot - command) >= sizeof group) {
    if (strcmp(command, "status") == 0) {
      struct mcp_server_stats stats;
      mcp_server_get_stats(domed->mcp, &stats);
      json_t *status = json_pack("{s:s,s:i,s:s,s:I,s:I,s:i}", "version", DOME_VERSION_STRING, "port",
                                 (int)mcp_server_port(domed->mcp), "path", domed->config.path, "sessions",
                                 (json_int_t)stats.sessions_active, "active_jails",
                                 (json_int_t)atomic_load(&domed->metrics.active_jails), "rules_version",
                                 control_rules_active(domed->store));
      json_object_set_new(status, "blobs", domed_audit_blob_usage(domed));
      json_object_set_new(status, "journal_refused",
                          json_integer((json_int_t)atomic_load(&domed->metrics.journal_refused)));
      json_object_set_new(status, "jail_pool", domed_jail_pool_status(domed));
      return status;
    }
    dome_error_set(err, EINVAL, "unknown command `%s`", command);
    return NULL;
  }
  memcpy(group, command, (size_t)(dot - command));
  group[dot - command] = '\0';
  const char *verb = dot + 1;
  if (strcmp(group, "agents") == 0) return agents_command(domed, request, verb, err);
  if (strcmp(group, "operators") == 0) return operators_command(domed, request, verb, err);
  if (strcmp(group, "rules") == 0) return rules_command(domed, request, verb, err);
  if (strcmp(group, "tools") == 0) return tools_command(domed, request, verb, err);
  if (strcmp(group, "quotas") == 0) return quotas_command(domed, request, verb, err);
  if (strcmp(group, "gateways") == 0) return gateways_command(domed, request, verb, err);
  if (strcmp(group, "sessions") == 0) return domed_sessions_command(domed, command, request->args, err);
  if (strcmp(group, "anomalies") == 0) return domed_anomaly_command(domed, request, verb, err);
  if (strcmp(command, "audit.stream") == 0) return domed_audit_stream(domed, request, err);
  if (strcmp(command, "audit.record") == 0) return audit_record(domed, request, err);
  dome_error_set(err, EINVAL, "unknown command `%s`", command);
  return NULL;
}
