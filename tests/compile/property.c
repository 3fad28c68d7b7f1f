/* compile-property: random policy sets in the compiler's fragment (plus the baseline) and random concrete
 * requests; the decision-table lookup (dome_rule_tables_lookup_*) must equal cedar_authorize, decision and
 * determining policy. usage: compile-property [--sets N] [--requests M] [--seed S] [--verbose] */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/compile/compile.h"
#include "policy/schema/schema.h"

static uint64_t state = 88172645463325252ull;
static uint64_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
static size_t pick(size_t n) {
  return (size_t)(next() % n);
}
#define PICK(array) (array[pick(sizeof array / sizeof array[0])])

static const char *const kernel_actions[] = {"fs:read",     "fs:write", "fs:exec",
                                             "net:connect", "net:bind", "net:send"};
static const char *const prefixes[] = {"10.0.0.0/8",     "10.1.0.0/16",   "10.1.2.0/24",     "10.1.2.3/32",
                                       "192.168.0.0/16", "0.0.0.0/0",     "127.0.0.0/8",     "127.0.0.1/32",
                                       "::/0",           "2001:db8::/32", "2001:db8::1/128", "fe80::/10",
                                       "10.128.0.0/9",   "8.8.8.8/32",    "10.1.2.3/31"};
static const char *const hosts[] = {"10.1.2.3", "127.0.0.1", "8.8.8.8", "2001:db8::1", "::1", "192.168.1.1"};
static const int ports[] = {0, 22, 53, 80, 443, 1000, 8000, 8080, 9000, 65535, 70000, -1};
static const char *const protocols[] = {"\"tcp\"", "\"udp\"", "\"icmp\""};
static const char *const likes[] = {"\"t*\"", "\"*p\"", "\"*\"", "\"u*p\"", "\"tc\""};
static const char *const literal_paths[] = {"/",    "/workspace", "/workspace/a", "/workspace/a/b.txt",
                                            "/tmp", "/etc",       "/etc/shadow",  "/usr/bin/python3",
                                            "/usr", "/worksp"};
/* request paths: the literals, their neighbours and children (all ancestors are added as entities) */
static const char *const request_paths[] = {"/",
                                            "/workspace",
                                            "/workspace/a",
                                            "/workspace/a/b.txt",
                                            "/workspace/a/b.txt/c",
                                            "/workspace/ab",
                                            "/workspace/z",
                                            "/tmp",
                                            "/tmp/x",
                                            "/etc",
                                            "/etc/shadow",
                                            "/etc/passwd",
                                            "/etcx",
                                            "/usr",
                                            "/usr/bin",
                                            "/usr/bin/python3",
                                            "/usr/lib/x",
                                            "/worksp",
                                            "/worksp/q",
                                            "/home/u/.ssh/id"};
static const char *const request_v4[] = {"10.1.2.3",  "10.1.2.2",  "10.1.2.4",    "10.1.3.1",
                                         "10.2.0.1",  "11.0.0.1",  "192.168.1.1", "127.0.0.1",
                                         "127.1.2.3", "224.0.0.1", "8.8.8.8",     "10.200.0.1"};
static const char *const request_v6[] = {"::1",     "2001:db8::1", "2001:db8::2", "2001:db9::1",
                                         "fe80::1", "ff02::1",     "::2"};
static const int request_ports[] = {0,    21,   22,   23,   52,   53,    54,   79,   80,
                                    81,   442,  443,  444,  999,  1000,  1001, 7999, 8000,
                                    8001, 8080, 8999, 9000, 9001, 65534, 65535};

struct text {
  char buf[1 << 16];
  size_t n;
};
static void put(struct text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(t->buf + t->n, sizeof t->buf - t->n, format, ap);
  va_end(ap);
  if (n > 0) t->n += (size_t)n < sizeof t->buf - t->n ? (size_t)n : sizeof t->buf - t->n - 1;
}

static void atom(struct text *t) {
  switch (pick(14)) {
    case 0:
    case 1:
      put(t, "context.dst_ip.isInRange(ip(\"%s\"))", PICK(prefixes));
      break;
    case 2:
      put(t, "context.dst_ip == ip(\"%s\")", PICK(hosts));
      break;
    case 3:
    case 4: {
      static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
      if (pick(2))
        put(t, "context.dst_port %s %d", PICK(ops), PICK(ports));
      else
        put(t, "%d %s context.dst_port", PICK(ports), PICK(ops));
      break;
    }
    case 5:
      put(t, "context.protocol %s %s", pick(2) ? "==" : "!=", PICK(protocols));
      break;
    case 6:
      put(t, "context.protocol like %s", PICK(likes));
      break;
    case 7: {
      static const char *const methods[] = {"isIpv4", "isIpv6", "isLoopback", "isMulticast"};
      put(t, "context.dst_ip.%s()", PICK(methods));
      break;
    }
    case 8:
      put(t, "resource == Dome::Network::\"%s\"", pick(2) ? "egress" : "loopback");
      break;
    case 9:
      put(t, "resource in Dome::Path::\"%s\"", PICK(literal_paths));
      break;
    case 10:
      put(t, "resource == Dome::Path::\"%s\"", PICK(literal_paths));
      break;
    case 11:
      put(t, "principal.capabilities.contains(\"%s\")", pick(2) ? "net" : "fs");
      break;
    case 12:
      put(t, "resource in [Dome::Path::\"%s\", Dome::Path::\"%s\"]", PICK(literal_paths),
          PICK(literal_paths));
      break;
    default:
      put(t, "%s", pick(2) ? "true" : "resource is Dome::Path");
      break;
  }
}

static void expression(struct text *t, int depth) {
  if (depth <= 0 || pick(3) == 0) {
    atom(t);
    return;
  }
  switch (pick(4)) {
    case 0:
      put(t, "(");
      expression(t, depth - 1);
      put(t, " && ");
      expression(t, depth - 1);
      put(t, ")");
      break;
    case 1:
      put(t, "(");
      expression(t, depth - 1);
      put(t, " || ");
      expression(t, depth - 1);
      put(t, ")");
      break;
    case 2:
      put(t, "!(");
      expression(t, depth - 1);
      put(t, ")");
      break;
    default:
      put(t, "(if ");
      expression(t, depth - 1);
      put(t, " then ");
      expression(t, depth - 1);
      put(t, " else ");
      expression(t, depth - 1);
      put(t, ")");
  }
}

static void policy_set(struct text *t) {
  size_t count = 1 + pick(6);
  for (size_t i = 0; i < count; i++) {
    put(t, "%s(", pick(3) == 0 ? "forbid" : "permit");
    switch (pick(3)) {
      case 0:
        put(t, "principal, ");
        break;
      case 1:
        put(t, "principal == Dome::Agent::\"%s\", ", pick(4) ? "a1" : "other");
        break;
      default:
        put(t, "principal in Dome::Gateway::\"%s\", ", pick(3) ? "g1" : "g2");
    }
    if (pick(4) == 0) {
      put(t, "action, ");
    } else if (pick(2)) {
      put(t, "action == Dome::Action::\"%s\", ", PICK(kernel_actions));
    } else {
      put(t, "action in [Dome::Action::\"%s\", Dome::Action::\"%s\"], ", PICK(kernel_actions),
          PICK(kernel_actions));
    }
    switch (pick(4)) {
      case 0:
        put(t, "resource in Dome::Path::\"%s\")", PICK(literal_paths));
        break;
      case 1:
        put(t, "resource == Dome::Network::\"egress\")");
        break;
      default:
        put(t, "resource)");
    }
    size_t conditions = pick(3);
    for (size_t c = 0; c < conditions; c++) {
      put(t, " %s { ", pick(3) ? "when" : "unless");
      expression(t, 3);
      put(t, " }");
    }
    put(t, ";\n");
  }
}

static char *path_entities(void) {
  struct text *t = calloc(1, sizeof *t);
  put(t,
      "[{\"uid\": {\"type\": \"Dome::Agent\", \"id\": \"a1\"}, \"attrs\": {\"capabilities\": [\"net\"]}, "
      "\"parents\": [{\"type\": \"Dome::Gateway\", \"id\": \"g1\"}]}");
  /* every request path and its ancestors, each with its parent directory */
  const char *seen[256];
  size_t seen_count = 0;
  for (size_t i = 0; i < sizeof request_paths / sizeof request_paths[0]; i++) {
    char path[256];
    snprintf(path, sizeof path, "%s", request_paths[i]);
    while (1) {
      bool known = false;
      for (size_t s = 0; s < seen_count; s++) known |= strcmp(seen[s], path) == 0;
      if (!known) {
        seen[seen_count++] = strdup(path);
        char parent[256];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
          parent[1] = 0;
        else if (slash)
          *slash = 0;
        if (strcmp(path, "/") == 0)
          put(t, ", {\"uid\": {\"type\": \"Dome::Path\", \"id\": \"/\"}, \"attrs\": {}, \"parents\": []}");
        else
          put(t,
              ", {\"uid\": {\"type\": \"Dome::Path\", \"id\": \"%s\"}, \"attrs\": {}, \"parents\": "
              "[{\"type\": \"Dome::Path\", \"id\": \"%s\"}]}",
              path, parent);
      }
      if (strcmp(path, "/") == 0) break;
      char *slash = strrchr(path, '/');
      if (slash == path)
        path[1] = 0;
      else
        *slash = 0;
    }
  }
  put(t, "]");
  for (size_t s = 0; s < seen_count; s++) free((char *)seen[s]);
  char *out = strdup(t->buf);
  free(t);
  return out;
}

int main(int argc, char **argv) {
  long sets = 200, requests = 100;
  bool verbose = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sets") == 0 && i + 1 < argc)
      sets = atol(argv[++i]);
    else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
      requests = atol(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      state = strtoull(argv[++i], NULL, 0) | 1;
    else if (strcmp(argv[i], "--verbose") == 0)
      verbose = true;
    else {
      fprintf(stderr, "usage: compile-property [--sets N] [--requests M] [--seed S] [--verbose]\n");
      return 2;
    }
  }
  cedar_schema *schema = NULL;
  cedar_schema_error schema_err;
  if (cedar_schema_load_dome(&schema, &schema_err) < 0) return 2;
  char *entity_text = path_entities();
  cedar_entities *entities = NULL;
  dome_error err = {0};
  if (dome_compile_load_entities(entity_text, strlen(entity_text), "generated", NULL, &entities, &err) == 0) {
    fprintf(stderr, "compile-property: Path entities must be refused\n");
    return 1;
  }
  cedar_diagnostic diag;
  if (cedar_entities_parse_json(entity_text, strlen(entity_text), "generated", schema, &entities, &diag) <
      0) {
    char text[1024];
    fprintf(stderr, "compile-property: entities: %s\n", cedar_diagnostic_format(&diag, text, sizeof text));
    return 2;
  }
  long cases = 0, disagreements = 0, sets_ok = 0, sets_failed = 0, too_big = 0, allows = 0,
       denials_by_policy = 0;
  struct text *policies = calloc(1, sizeof *policies);
  for (long s = 0; s < sets; s++) {
    policies->n = 0;
    policies->buf[0] = 0;
    policy_set(policies);
    cedar_policy_set *set = NULL;
    struct dome_rule_tables tables;
    dome_rule_tables_init(&tables);
    int rc = dome_compile_load_policies(policies->buf, policies->n, "random", &set, &err);
    struct dome_compile_options options = {.agent = "a1"};
    if (rc == 0) rc = dome_compile_tables(set, entities, &options, &tables, &err);
    if (rc == -E2BIG) {
      too_big++;
      cedar_policy_set_free(set);
      continue;
    }
    if (rc < 0) {
      sets_failed++;
      fprintf(stderr, "set %ld rejected: %s\n%s\n", s, err.message, policies->buf);
      cedar_policy_set_free(set);
      continue;
    }
    long set_disagreements = 0;
    for (long r = 0; r < requests; r++) {
      size_t a = pick(6);
      char context_text[256] = "{}", resource[64] = "", shown[160];
      const char *resource_type;
      enum dome_decision table;
      long entry = -1;
      if (a < 3) {
        const char *path = PICK(request_paths);
        resource_type = "Dome::Path";
        snprintf(resource, sizeof resource, "%s", path);
        table = dome_rule_tables_lookup_file(&tables, (enum dome_file_access)(1 << a), path, &entry);
        snprintf(shown, sizeof shown, "%s %s", kernel_actions[a], path);
      } else {
        int family = pick(3) == 0 ? AF_INET6 : AF_INET;
        bool mapped = family == AF_INET && pick(4) == 0;
        char address[64];
        uint8_t bytes[16] = {0};
        if (family == AF_INET) {
          if (pick(5) == 0) {
            uint32_t v = (uint32_t)next();
            memcpy(bytes, &v, 4);
            inet_ntop(AF_INET, bytes, address, sizeof address);
          } else {
            snprintf(address, sizeof address, "%s", PICK(request_v4));
            inet_pton(AF_INET, address, bytes);
          }
        } else {
          snprintf(address, sizeof address, "%s", PICK(request_v6));
          inet_pton(AF_INET6, address, bytes);
        }
        int port = pick(4) == 0 ? (int)pick(65536) : PICK(request_ports);
        const char *protocol = pick(2) ? "tcp" : "udp";
        uint8_t lookup[16] = {0};
        int lookup_family = family;
        if (mapped) {
          lookup[10] = lookup[11] = 0xff;
          memcpy(lookup + 12, bytes, 4);
          lookup_family = AF_INET6;
        } else {
          memcpy(lookup, bytes, 16);
        }
        bool loopback = family == AF_INET ? bytes[0] == 127 : strcmp(address, "::1") == 0;
        resource_type = "Dome::Network";
        snprintf(resource, sizeof resource, "%s", loopback ? "loopback" : "egress");
        snprintf(context_text, sizeof context_text,
                 "{\"dst_ip\": {\"__extn\": {\"fn\": \"ip\", \"arg\": \"%s\"}}, \"dst_port\": %d, "
                 "\"protocol\": \"%s\"}",
                 address, port, protocol);
        table = dome_rule_tables_lookup_net(&tables, (enum dome_net_action)(a - 3),
                                            protocol[0] == 't' ? DOME_PROTOCOL_TCP : DOME_PROTOCOL_UDP,
                                            lookup_family, lookup, (uint16_t)port, &entry);
        snprintf(shown, sizeof shown, "%s %s %s%s:%d", kernel_actions[a], protocol, mapped ? "::ffff:" : "",
                 address, port);
      }
      cedar_context *context = NULL;
      cedar_uid_ref action = {.type = "Dome::Action", .id = kernel_actions[a]};
      if (cedar_context_parse_json(context_text, strlen(context_text), NULL, schema, &action, &context,
                                   &diag) < 0) {
        fprintf(stderr, "context: %s\n", diag.message);
        return 2;
      }
      cedar_request request = {.principal = {.type = "Dome::Agent", .id = "a1"},
                               .action = action,
                               .resource = {.type = resource_type, .id = resource},
                               .context = context};
      cedar_response response;
      if (cedar_authorize(set, entities, &request, &response) < 0) return 2;
      const char *cedar_policy = response.reason_count ? response.reason[0] : NULL;
      const char *table_policy = NULL;
      if (entry >= 0) {
        uint32_t index = a < 3 ? tables.files[entry].policy_index : tables.net[entry].policy_index;
        if (index != DOME_NO_POLICY) table_policy = tables.policy_ids[index];
      }
      bool agree = (int)table == (int)response.decision &&
                   ((!cedar_policy && !table_policy) ||
                    (cedar_policy && table_policy && strcmp(cedar_policy, table_policy) == 0));
      cases++;
      allows += table == DOME_DECISION_ALLOW;
      denials_by_policy += table == DOME_DECISION_DENY && table_policy;
      if (!agree) {
        disagreements++;
        if (set_disagreements++ < 3)
          fprintf(stderr, "set %ld: %s: cedar %s (%s), tables %s (%s, entry %ld)\n%s", s, shown,
                  response.decision ? "allow" : "deny", cedar_policy ? cedar_policy : "-",
                  table ? "allow" : "deny", table_policy ? table_policy : "-", entry,
                  set_disagreements == 1 ? policies->buf : "");
      }
      cedar_response_release(&response);
      cedar_context_free(context);
    }
    if (set_disagreements)
      sets_failed++;
    else
      sets_ok++;
    if (verbose)
      fprintf(stderr, "set %ld: %zu network, %zu file entries\n", s, tables.net_count, tables.file_count);
    dome_rule_tables_free(&tables);
    cedar_policy_set_free(set);
  }
  printf(
      "compile-property: %ld cases (%ld allow, %ld denied by a forbid), %ld disagreements; %ld sets, %ld "
      "over a "
      "table bound\n",
      cases, allows, denials_by_policy, disagreements, sets, too_big);
  printf("%ld passed, %ld failed\n", sets_ok, sets_failed);
  free(policies);
  free(entity_text);
  cedar_entities_free(entities);
  cedar_schema_free(schema);
  return sets_failed ? 1 : 0;
}
