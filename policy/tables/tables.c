/* Decision tables: construction, validation against the contract of tables.h, reference lookups. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "supervisor/common/cleanup.h"
#include "policy/tables/internal.h"

void dome_rule_tables_init(struct dome_rule_tables *tables) {
  memset(tables, 0, sizeof(*tables));
}

void dome_rule_tables_free(struct dome_rule_tables *tables) {
  if (!tables) return;
  free(tables->agent);
  free(tables->policy_version);
  for (size_t i = 0; i < tables->policy_count; i++) free(tables->policy_ids[i]);
  free(tables->policy_ids);
  free(tables->net);
  for (size_t i = 0; i < tables->file_count; i++) free(tables->files[i].path);
  free(tables->files);
  dome_rule_tables_init(tables);
}

int dome_rule_tables_add_policy(struct dome_rule_tables *tables, const char *policy_id, uint32_t *index_out,
                                dome_error *err) {
  for (size_t i = 0; i < tables->policy_count; i++) {
    if (strcmp(tables->policy_ids[i], policy_id) == 0) {
      *index_out = (uint32_t)i;
      return 0;
    }
  }
  if (tables->policy_count >= DOME_POLICY_MAX)
    return dome_error_set(err, E2BIG, "more than %d policy ids", DOME_POLICY_MAX);
  char **grown = realloc(tables->policy_ids, (tables->policy_count + 1) * sizeof(*grown));
  if (!grown) return dome_error_set_errno(err, ENOMEM, "policy table");
  tables->policy_ids = grown;
  char *copy = strdup(policy_id);
  if (!copy) return dome_error_set_errno(err, ENOMEM, "policy id");
  tables->policy_ids[tables->policy_count] = copy;
  *index_out = (uint32_t)tables->policy_count++;
  return 0;
}

int dome_rule_tables_add_net(struct dome_rule_tables *tables, const struct dome_net_entry *entry,
                             dome_error *err) {
  if (tables->net_count >= DOME_NET_MAX_ENTRIES)
    return dome_error_set(err, E2BIG, "more than %d network entries", DOME_NET_MAX_ENTRIES);
  struct dome_net_entry *grown = realloc(tables->net, (tables->net_count + 1) * sizeof(*grown));
  if (!grown) return dome_error_set_errno(err, ENOMEM, "network table");
  tables->net = grown;
  tables->net[tables->net_count++] = *entry;
  return 0;
}

int dome_rule_tables_add_file(struct dome_rule_tables *tables, const char *path, enum dome_file_match match,
                              enum dome_file_access access, enum dome_decision decision,
                              uint32_t policy_index, dome_error *err) {
  if (tables->file_count >= DOME_FILE_MAX_ENTRIES)
    return dome_error_set(err, E2BIG, "more than %d file entries", DOME_FILE_MAX_ENTRIES);
  struct dome_file_entry *grown = realloc(tables->files, (tables->file_count + 1) * sizeof(*grown));
  if (!grown) return dome_error_set_errno(err, ENOMEM, "file table");
  tables->files = grown;
  char *copy = strdup(path);
  if (!copy) return dome_error_set_errno(err, ENOMEM, "file path");
  tables->files[tables->file_count++] = (struct dome_file_entry){
      .path = copy, .match = match, .access = access, .decision = decision, .policy_index = policy_index};
  return 0;
}

/* ---------------------------------------------------------------- names */

const char *dome_net_action_name(enum dome_net_action action) {
  switch (action) {
    case DOME_NET_CONNECT:
      return "connect";
    case DOME_NET_BIND:
      return "bind";
    case DOME_NET_SEND:
      return "send";
  }
  return "?";
}

const char *dome_net_protocol_name(enum dome_net_protocol protocol) {
  switch (protocol) {
    case DOME_PROTOCOL_TCP:
      return "tcp";
    case DOME_PROTOCOL_UDP:
      return "udp";
  }
  return "?";
}

const char *dome_file_access_name(enum dome_file_access access) {
  switch (access) {
    case DOME_FILE_READ:
      return "read";
    case DOME_FILE_WRITE:
      return "write";
    case DOME_FILE_EXEC:
      return "exec";
  }
  return "?";
}

const char *dome_file_match_name(enum dome_file_match match) {
  return match == DOME_MATCH_EXACT ? "exact" : match == DOME_MATCH_SUBTREE ? "subtree" : "?";
}

const char *dome_decision_name(enum dome_decision decision) {
  return decision == DOME_DECISION_ALLOW ? "allow" : decision == DOME_DECISION_DENY ? "deny" : "?";
}

/* ---------------------------------------------------------------- validation */

static int address_bytes(int family) {
  return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

/* Is `prefix/len` (family bytes) containing `address`? */
static bool prefix_contains(const uint8_t *prefix, unsigned len, const uint8_t *address) {
  unsigned whole = len / 8, rest = len % 8;
  if (memcmp(prefix, address, whole) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (prefix[whole] & mask) == (address[whole] & mask);
}

static bool same_group(const struct dome_net_entry *a, const struct dome_net_entry *b) {
  return a->action == b->action && a->protocol == b->protocol && a->family == b->family &&
         a->prefix_len == b->prefix_len && memcmp(a->address, b->address, 16) == 0;
}

bool dome_rule_tables_path_is_normalized(const char *path) {
  if (path[0] != '/') return false;
  if (strcmp(path, "/") == 0) return true;
  size_t length = strlen(path);
  if (path[length - 1] == '/') return false;
  for (const char *p = path; *p;) {
    /* p at a '/' */
    const char *component = p + 1, *end = strchr(component, '/');
    size_t n = end ? (size_t)(end - component) : strlen(component);
    if (n == 0) return false;
    if ((n == 1 && component[0] == '.') || (n == 2 && component[0] == '.' && component[1] == '.'))
      return false;
    if (!end) break;
    p = end;
  }
  return true;
}

static int validate_net(const struct dome_rule_tables *tables, size_t i, dome_error *err) {
  const struct dome_net_entry *e = &tables->net[i];
  if (e->action >= DOME_NET_ACTION_COUNT)
    return dome_error_set(err, 0, "network entry %zu: unknown action %u", i, e->action);
  if (e->protocol != DOME_PROTOCOL_TCP && e->protocol != DOME_PROTOCOL_UDP)
    return dome_error_set(err, 0, "network entry %zu: unknown protocol %u", i, e->protocol);
  int bytes = address_bytes(e->family);
  if (!bytes) return dome_error_set(err, 0, "network entry %zu: unknown family %u", i, e->family);
  if (e->prefix_len > bytes * 8)
    return dome_error_set(err, 0, "network entry %zu: prefix length %u exceeds %d", i, e->prefix_len,
                          bytes * 8);
  for (int b = 0; b < 16; b++) {
    unsigned bit_first = (unsigned)b * 8;
    uint8_t allowed = 0;
    if (b < bytes && bit_first < e->prefix_len)
      allowed = e->prefix_len - bit_first >= 8 ? 0xff : (uint8_t)(0xff << (8 - (e->prefix_len - bit_first)));
    if (e->address[b] & ~allowed)
      return dome_error_set(err, 0, "network entry %zu: address bits beyond the prefix length %u are set", i,
                            e->prefix_len);
  }
  if (e->family == AF_INET6 && e->prefix_len >= 96) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(e->address, mapped, 12) == 0)
      return dome_error_set(
          err, 0, "network entry %zu: IPv4-mapped IPv6 prefix; IPv4-mapped addresses decide as IPv4", i);
  }
  if (e->port_first > e->port_last)
    return dome_error_set(err, 0, "network entry %zu: port range %u-%u is reversed", i, e->port_first,
                          e->port_last);
  if (e->decision != DOME_DECISION_ALLOW && e->decision != DOME_DECISION_DENY)
    return dome_error_set(err, 0, "network entry %zu: unknown decision %u", i, e->decision);
  if (e->policy_index != DOME_NO_POLICY && e->policy_index >= tables->policy_count)
    return dome_error_set(err, 0, "network entry %zu: policy index %u out of range", i, e->policy_index);
  unsigned in_group = 1;
  for (size_t j = 0; j < i; j++) {
    const struct dome_net_entry *o = &tables->net[j];
    if (!same_group(e, o)) continue;
    in_group++;
    if (e->port_first <= o->port_last && o->port_first <= e->port_last)
      return dome_error_set(err, 0,
                            "network entry %zu: ports %u-%u overlap entry %zu (%u-%u) of the same prefix", i,
                            e->port_first, e->port_last, j, o->port_first, o->port_last);
  }
  if (in_group > DOME_NET_MAX_PORT_RANGES)
    return dome_error_set(err, E2BIG, "network entry %zu: more than %d port ranges for one prefix", i,
                          DOME_NET_MAX_PORT_RANGES);
  return 0;
}

static int validate_file(const struct dome_rule_tables *tables, size_t i, dome_error *err) {
  const struct dome_file_entry *e = &tables->files[i];
  if (!e->path) return dome_error_set(err, 0, "file entry %zu: no path", i);
  if (strlen(e->path) >= DOME_PATH_MAX) return dome_error_set(err, 0, "file entry %zu: path too long", i);
  if (!dome_rule_tables_path_is_normalized(e->path))
    return dome_error_set(err, 0, "file entry %zu: path `%s` is not absolute and normalized", i, e->path);
  if (e->match != DOME_MATCH_EXACT && e->match != DOME_MATCH_SUBTREE)
    return dome_error_set(err, 0, "file entry %zu: unknown match %u", i, e->match);
  if (e->access != DOME_FILE_READ && e->access != DOME_FILE_WRITE && e->access != DOME_FILE_EXEC)
    return dome_error_set(err, 0, "file entry %zu: unknown access %u", i, e->access);
  if (e->decision != DOME_DECISION_ALLOW && e->decision != DOME_DECISION_DENY)
    return dome_error_set(err, 0, "file entry %zu: unknown decision %u", i, e->decision);
  if (e->policy_index != DOME_NO_POLICY && e->policy_index >= tables->policy_count)
    return dome_error_set(err, 0, "file entry %zu: policy index %u out of range", i, e->policy_index);
  for (size_t j = 0; j < i; j++) {
    const struct dome_file_entry *o = &tables->files[j];
    if (o->access == e->access && o->match == e->match && strcmp(o->path, e->path) == 0)
      return dome_error_set(err, 0, "file entry %zu: duplicates entry %zu (%s %s %s)", i, j,
                            dome_file_access_name(e->access), dome_file_match_name(e->match), e->path);
  }
  return 0;
}

int dome_rule_tables_validate(const struct dome_rule_tables *tables, dome_error *err) {
  if (tables->net_count > DOME_NET_MAX_ENTRIES) return dome_error_set(err, E2BIG, "too many network entries");
  if (tables->file_count > DOME_FILE_MAX_ENTRIES) return dome_error_set(err, E2BIG, "too many file entries");
  for (size_t i = 0; i < tables->policy_count; i++)
    if (!tables->policy_ids[i]) return dome_error_set(err, 0, "policy %zu: no id", i);
  int r;
  for (size_t i = 0; i < tables->net_count; i++)
    if ((r = validate_net(tables, i, err)) < 0) return r;
  for (size_t i = 0; i < tables->file_count; i++)
    if ((r = validate_file(tables, i, err)) < 0) return r;
  return 0;
}

/* ---------------------------------------------------------------- reference lookups */

enum dome_decision dome_rule_tables_lookup_net(const struct dome_rule_tables *tables,
                                               enum dome_net_action action, enum dome_net_protocol protocol,
                                               int family, const uint8_t *address, uint16_t port,
                                               long *entry_out) {
  uint8_t key[16] = {0};
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (family == AF_INET6 && memcmp(address, mapped, 12) == 0) {
    family = AF_INET;
    memcpy(key, address + 12, 4);
  } else {
    memcpy(key, address, (size_t)address_bytes(family));
  }
  *entry_out = -1;
  int best_len = -1;
  for (size_t i = 0; i < tables->net_count; i++) {
    const struct dome_net_entry *e = &tables->net[i];
    if (e->action != action || e->protocol != protocol || e->family != family) continue;
    if ((int)e->prefix_len < best_len || !prefix_contains(e->address, e->prefix_len, key)) continue;
    if ((int)e->prefix_len > best_len) {
      best_len = e->prefix_len;
      *entry_out = -1;
    }
    if (port >= e->port_first && port <= e->port_last) *entry_out = (long)i;
  }
  if (*entry_out < 0) return DOME_DECISION_DENY;
  return (enum dome_decision)tables->net[*entry_out].decision;
}

/* Does subtree/exact entry `entry_path` match `path`? */
static bool file_matches(const struct dome_file_entry *e, const char *path) {
  size_t n = strlen(e->path);
  if (e->match == DOME_MATCH_EXACT) return strcmp(e->path, path) == 0;
  if (strcmp(e->path, "/") == 0) return path[0] == '/';
  return strncmp(e->path, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

enum dome_decision dome_rule_tables_lookup_file(const struct dome_rule_tables *tables,
                                                enum dome_file_access access, const char *path,
                                                long *entry_out) {
  *entry_out = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < tables->file_count; i++) {
    const struct dome_file_entry *e = &tables->files[i];
    if (e->access != access || !file_matches(e, path)) continue;
    size_t n = strlen(e->path);
    if (*entry_out >= 0) {
      const struct dome_file_entry *best = &tables->files[*entry_out];
      if (n < best_len) continue;
      if (n == best_len && !(e->match == DOME_MATCH_EXACT && best->match == DOME_MATCH_SUBTREE)) continue;
    }
    *entry_out = (long)i;
    best_len = n;
  }
  if (*entry_out < 0) return DOME_DECISION_DENY;
  return (enum dome_decision)tables->files[*entry_out].decision;
}

/* ---------------------------------------------------------------- human listing */

int dome_rule_tables_format_prefix(const struct dome_net_entry *e, char *out, size_t size) {
  char address[INET6_ADDRSTRLEN];
  if (!inet_ntop(e->family == AF_INET ? AF_INET : AF_INET6, e->address, address, sizeof(address)))
    return -EINVAL;
  snprintf(out, size, "%s/%u", address, e->prefix_len);
  return 0;
}

int dome_rule_tables_format(const struct dome_rule_tables *tables, char **text_out, dome_error *err) {
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) return dome_error_set_errno(err, errno, "format tables");
  fprintf(out, "agent %s, policy version %s: %zu network entries, %zu file entries\n",
          tables->agent ? tables->agent : "-", tables->policy_version ? tables->policy_version : "-",
          tables->net_count, tables->file_count);
  for (size_t i = 0; i < tables->net_count; i++) {
    const struct dome_net_entry *e = &tables->net[i];
    char prefix[INET6_ADDRSTRLEN + 8] = "?";
    dome_rule_tables_format_prefix(e, prefix, sizeof(prefix));
    fprintf(out, "%4zu net:%-7s %s %-24s ports %u-%u %s", i, dome_net_action_name(e->action),
            dome_net_protocol_name(e->protocol), prefix, e->port_first, e->port_last,
            dome_decision_name(e->decision));
    if (e->policy_index != DOME_NO_POLICY && e->policy_index < tables->policy_count)
      fprintf(out, "  (policy %s)", tables->policy_ids[e->policy_index]);
    fputc('\n', out);
  }
  for (size_t i = 0; i < tables->file_count; i++) {
    const struct dome_file_entry *e = &tables->files[i];
    fprintf(out, "%4zu fs:%-5s %-7s %s %s", i, dome_file_access_name(e->access),
            dome_file_match_name(e->match), e->path, dome_decision_name(e->decision));
    if (e->policy_index != DOME_NO_POLICY && e->policy_index < tables->policy_count)
      fprintf(out, "  (policy %s)", tables->policy_ids[e->policy_index]);
    fputc('\n', out);
  }
  if (fclose(out) != 0 || !text) {
    free(text);
    return dome_error_set_errno(err, ENOMEM, "format tables");
  }
  *text_out = text;
  return 0;
}
