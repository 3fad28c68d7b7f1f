/* JSON form of decision tables (jansson); the format is documented in tables.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/tables/internal.h"

static json_t *policy_json(const struct dome_rule_tables *tables, uint32_t index) {
  if (index == DOME_NO_POLICY || index >= tables->policy_count) return json_null();
  return json_string(tables->policy_ids[index]);
}

int dome_rule_tables_to_json(const struct dome_rule_tables *tables, bool pretty, char **json_out,
                             dome_error *err) {
  json_t *root = json_object(), *policies = json_array(), *network = json_array(), *files = json_array();
  if (!root || !policies || !network || !files) goto oom;
  json_object_set_new(root, "agent", tables->agent ? json_string(tables->agent) : json_null());
  json_object_set_new(root, "policy_version",
                      tables->policy_version ? json_string(tables->policy_version) : json_null());
  for (size_t i = 0; i < tables->policy_count; i++)
    json_array_append_new(policies, json_string(tables->policy_ids[i]));
  for (size_t i = 0; i < tables->net_count; i++) {
    const struct dome_net_entry *e = &tables->net[i];
    char prefix[INET6_ADDRSTRLEN + 8];
    if (dome_rule_tables_format_prefix(e, prefix, sizeof(prefix)) < 0) {
      json_decref(root);
      json_decref(policies);
      json_decref(network);
      json_decref(files);
      return dome_error_set(err, 0, "network entry %zu: unknown family %u", i, e->family);
    }
    json_array_append_new(
        network, json_pack("{s:s, s:s, s:s, s:[i,i], s:s, s:o}", "action", dome_net_action_name(e->action),
                           "protocol", dome_net_protocol_name(e->protocol), "prefix", prefix, "ports",
                           (json_int_t)e->port_first, (json_int_t)e->port_last, "decision",
                           dome_decision_name(e->decision), "policy", policy_json(tables, e->policy_index)));
  }
  for (size_t i = 0; i < tables->file_count; i++) {
    const struct dome_file_entry *e = &tables->files[i];
    json_array_append_new(
        files,
        json_pack("{s:s, s:s, s:s, s:s, s:o}", "path", e->path, "match", dome_file_match_name(e->match),
                  "access", dome_file_access_name(e->access), "decision", dome_decision_name(e->decision),
                  "policy", policy_json(tables, e->policy_index)));
  }
  json_object_set_new(root, "policies", policies);
  json_object_set_new(root, "network", network);
  json_object_set_new(root, "files", files);
  char *text = json_dumps(root, (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text) return dome_error_set_errno(err, ENOMEM, "serialize tables");
  *json_out = text;
  return 0;
oom:
  json_decref(root);
  json_decref(policies);
  json_decref(network);
  json_decref(files);
  return dome_error_set_errno(err, ENOMEM, "serialize tables");
}

/* ---------------------------------------------------------------- parsing */

static int name_value(const char *name, const char *const *names, const int *values, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (strcmp(name, names[i]) == 0) return values[i];
  return -1;
}

static int enum_field(json_t *object, const char *where, size_t i, const char *field,
                      const char *const *names, const int *values, size_t count, int *out, dome_error *err) {
  json_t *value = json_object_get(object, field);
  if (!json_is_string(value)) return dome_error_set(err, 0, "%s[%zu].%s: expected a string", where, i, field);
  int v = name_value(json_string_value(value), names, values, count);
  if (v < 0)
    return dome_error_set(err, 0, "%s[%zu].%s: unknown value `%s`", where, i, field,
                          json_string_value(value));
  *out = v;
  return 0;
}

static int policy_field(json_t *object, const char *where, size_t i, const struct dome_rule_tables *tables,
                        uint32_t *out, dome_error *err) {
  json_t *value = json_object_get(object, "policy");
  if (!value || json_is_null(value)) {
    *out = DOME_NO_POLICY;
    return 0;
  }
  if (!json_is_string(value))
    return dome_error_set(err, 0, "%s[%zu].policy: expected a string or null", where, i);
  for (size_t p = 0; p < tables->policy_count; p++) {
    if (strcmp(tables->policy_ids[p], json_string_value(value)) == 0) {
      *out = (uint32_t)p;
      return 0;
    }
  }
  return dome_error_set(err, 0, "%s[%zu].policy: `%s` is not in \"policies\"", where, i,
                        json_string_value(value));
}

static const char *const decision_names[] = {"allow", "deny"};
static const int decision_values[] = {DOME_DECISION_ALLOW, DOME_DECISION_DENY};

static int parse_net(json_t *object, size_t i, struct dome_rule_tables *tables, dome_error *err) {
  static const char *const action_names[] = {"connect", "bind", "send"};
  static const int action_values[] = {DOME_NET_CONNECT, DOME_NET_BIND, DOME_NET_SEND};
  static const char *const protocol_names[] = {"tcp", "udp"};
  static const int protocol_values[] = {DOME_PROTOCOL_TCP, DOME_PROTOCOL_UDP};
  if (!json_is_object(object)) return dome_error_set(err, 0, "network[%zu]: expected an object", i);
  struct dome_net_entry e = {0};
  int action, protocol, decision, r;
  if ((r = enum_field(object, "network", i, "action", action_names, action_values, 3, &action, err)) < 0)
    return r;
  if ((r = enum_field(object, "network", i, "protocol", protocol_names, protocol_values, 2, &protocol, err)) <
      0)
    return r;
  if ((r = enum_field(object, "network", i, "decision", decision_names, decision_values, 2, &decision, err)) <
      0)
    return r;
  json_t *prefix = json_object_get(object, "prefix");
  if (!json_is_string(prefix)) return dome_error_set(err, 0, "network[%zu].prefix: expected a string", i);
  char text[INET6_ADDRSTRLEN + 8];
  if (json_string_length(prefix) >= sizeof(text))
    return dome_error_set(err, 0, "network[%zu].prefix: `%s` is not an address/length", i,
                          json_string_value(prefix));
  strcpy(text, json_string_value(prefix));
  char *slash = strchr(text, '/');
  if (!slash) return dome_error_set(err, 0, "network[%zu].prefix: `%s` lacks /length", i, text);
  *slash = 0;
  char *end;
  errno = 0;
  long length = strtol(slash + 1, &end, 10);
  if (*end || end == slash + 1 || errno || length < 0 || length > 128)
    return dome_error_set(err, 0, "network[%zu].prefix: bad length `%s`", i, slash + 1);
  if (inet_pton(AF_INET, text, e.address) == 1)
    e.family = AF_INET;
  else if (inet_pton(AF_INET6, text, e.address) == 1)
    e.family = AF_INET6;
  else
    return dome_error_set(err, 0, "network[%zu].prefix: `%s` is not an IPv4 or IPv6 address", i, text);
  e.prefix_len = (uint8_t)length;
  json_t *ports = json_object_get(object, "ports");
  if (!json_is_array(ports) || json_array_size(ports) != 2 || !json_is_integer(json_array_get(ports, 0)) ||
      !json_is_integer(json_array_get(ports, 1)))
    return dome_error_set(err, 0, "network[%zu].ports: expected [first, last]", i);
  json_int_t first = json_integer_value(json_array_get(ports, 0)),
             last = json_integer_value(json_array_get(ports, 1));
  if (first < 0 || first > 65535 || last < 0 || last > 65535)
    return dome_error_set(err, 0, "network[%zu].ports: ports lie in 0..65535", i);
  e.port_first = (uint16_t)first;
  e.port_last = (uint16_t)last;
  e.action = (uint8_t)action;
  e.protocol = (uint8_t)protocol;
  e.decision = (uint8_t)decision;
  if ((r = policy_field(object, "network", i, tables, &e.policy_index, err)) < 0) return r;
  return dome_rule_tables_add_net(tables, &e, err);
}

static int parse_file(json_t *object, size_t i, struct dome_rule_tables *tables, dome_error *err) {
  static const char *const match_names[] = {"exact", "subtree"};
  static const int match_values[] = {DOME_MATCH_EXACT, DOME_MATCH_SUBTREE};
  static const char *const access_names[] = {"read", "write", "exec"};
  static const int access_values[] = {DOME_FILE_READ, DOME_FILE_WRITE, DOME_FILE_EXEC};
  if (!json_is_object(object)) return dome_error_set(err, 0, "files[%zu]: expected an object", i);
  int match, access, decision, r;
  if ((r = enum_field(object, "files", i, "match", match_names, match_values, 2, &match, err)) < 0) return r;
  if ((r = enum_field(object, "files", i, "access", access_names, access_values, 3, &access, err)) < 0)
    return r;
  if ((r = enum_field(object, "files", i, "decision", decision_names, decision_values, 2, &decision, err)) <
      0)
    return r;
  json_t *path = json_object_get(object, "path");
  if (!json_is_string(path)) return dome_error_set(err, 0, "files[%zu].path: expected a string", i);
  if (json_string_length(path) >= DOME_PATH_MAX)
    return dome_error_set(err, 0, "files[%zu].path: too long", i);
  uint32_t policy;
  if ((r = policy_field(object, "files", i, tables, &policy, err)) < 0) return r;
  return dome_rule_tables_add_file(tables, json_string_value(path), match, access, decision, policy, err);
}

static int optional_string(json_t *root, const char *field, char **out, dome_error *err) {
  json_t *value = json_object_get(root, field);
  if (!value || json_is_null(value)) return 0;
  if (!json_is_string(value)) return dome_error_set(err, 0, "%s: expected a string", field);
  *out = strdup(json_string_value(value));
  return *out ? 0 : dome_error_set_errno(err, ENOMEM, "%s", field);
}

static int parse_root(json_t *root, struct dome_rule_tables *tables, dome_error *err) {
  if (!json_is_object(root)) return dome_error_set(err, 0, "tables: expected an object");
  int r;
  if ((r = optional_string(root, "agent", &tables->agent, err)) < 0) return r;
  if ((r = optional_string(root, "policy_version", &tables->policy_version, err)) < 0) return r;
  json_t *policies = json_object_get(root, "policies"), *network = json_object_get(root, "network"),
         *files = json_object_get(root, "files");
  if (policies && !json_is_array(policies)) return dome_error_set(err, 0, "policies: expected an array");
  if (network && !json_is_array(network)) return dome_error_set(err, 0, "network: expected an array");
  if (files && !json_is_array(files)) return dome_error_set(err, 0, "files: expected an array");
  if (json_array_size(network) > DOME_NET_MAX_ENTRIES)
    return dome_error_set(err, E2BIG, "network: more than %d entries", DOME_NET_MAX_ENTRIES);
  if (json_array_size(files) > DOME_FILE_MAX_ENTRIES)
    return dome_error_set(err, E2BIG, "files: more than %d entries", DOME_FILE_MAX_ENTRIES);
  size_t i;
  json_t *value;
  json_array_foreach(policies, i, value) {
    if (!json_is_string(value)) return dome_error_set(err, 0, "policies[%zu]: expected a string", i);
    uint32_t index;
    if ((r = dome_rule_tables_add_policy(tables, json_string_value(value), &index, err)) < 0) return r;
    if (index != i)
      return dome_error_set(err, 0, "policies[%zu]: duplicate id `%s`", i, json_string_value(value));
  }
  json_array_foreach(network, i, value) {
    if ((r = parse_net(value, i, tables, err)) < 0) return r;
  }
  json_array_foreach(files, i, value) {
    if ((r = parse_file(value, i, tables, err)) < 0) return r;
  }
  return dome_rule_tables_validate(tables, err);
}

int dome_rule_tables_from_json(const char *json, size_t length, struct dome_rule_tables *tables_out,
                               dome_error *err) {
  json_error_t error;
  json_t *root = json_loadb(json, length, JSON_REJECT_DUPLICATES, &error);
  if (!root) return dome_error_set(err, 0, "line %d column %d: %s", error.line, error.column, error.text);
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  int r = parse_root(root, &tables, err);
  json_decref(root);
  if (r < 0) {
    dome_rule_tables_free(&tables);
    return r;
  }
  *tables_out = tables;
  return 0;
}
