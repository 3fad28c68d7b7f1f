/* Residual conditions (EST JSON, "JSON policy format" of cedarpolicy.com) → predicates over a kernel
 * request. Only expressions that cannot raise an evaluation error for any concrete kernel request are
 * accepted, so Cedar's error rule (an erroring policy is skipped) never applies to a compiled policy and
 * the predicate's value is the policy's outcome. Everything else is rejected with its text. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/compile/internal.h"

#define MAX_DEPTH 200 /* nesting of a residual condition (below CEDAR_MAX_DEPTH) */

enum term_kind {
  TERM_BOOL,
  TERM_LONG,
  TERM_STRING,
  TERM_ENTITY,
  TERM_IP,
  TERM_SET, /* of entities (for `in`) */
  TERM_DST_IP,
  TERM_DST_PORT,
  TERM_PROTOCOL,
  TERM_RESOURCE,
  TERM_ERROR, /* an attribute missing from a literal record: evaluating it is an error */
};

struct term {
  enum term_kind kind;
  json_int_t number;
  const char *string; /* STRING: text; ENTITY: id */
  const char *type;   /* ENTITY: entity type */
  struct prefix ip;   /* IP: normalized prefix */
  bool ip_host;       /* IP: written without a prefix length (or /32, /128) */
  json_t *set;        /* SET: array of entity values */
};

struct builder {
  bool is_file;
  const struct pred_env *env;
  size_t nodes;
  dome_error *err;
};

/* ---- the sub-expression's Cedar text, for messages ---- */

static char *expression_text(json_t *expression) {
  json_t *policy = json_pack("{s:s, s:{s:s}, s:{s:s}, s:{s:s}, s:[{s:s, s:O}]}", "effect", "permit",
                             "principal", "op", "All", "action", "op", "All", "resource", "op", "All",
                             "conditions", "kind", "when", "body", expression);
  char *json = policy ? json_dumps(policy, JSON_COMPACT) : NULL;
  json_decref(policy);
  char *text = NULL;
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  if (json && cedar_policy_set_parse_json(json, strlen(json), NULL, &set, &diag) == 0 &&
      cedar_policy_set_count(set) == 1) {
    char *full = cedar_policy_to_text(cedar_policy_set_at(set, 0));
    const char *start = full ? strstr(full, "when {") : NULL;
    const char *end = full ? strrchr(full, '}') : NULL;
    if (start && end && end > start + 6) {
      start += 6;
      while (*start == ' ' || *start == '\n') start++;
      while (end > start && (end[-1] == ' ' || end[-1] == '\n')) end--;
      text = strndup(start, (size_t)(end - start));
    }
    free(full);
  }
  cedar_policy_set_free(set);
  if (!text) text = json ? strdup(json) : NULL;
  free(json);
  return text;
}

/* Does the expression mention an unknown or a variable (after partial evaluation only `resource`)? */
static bool is_open(json_t *e, unsigned depth) {
  if (depth > MAX_DEPTH) return true;
  if (json_is_object(e)) {
    if (json_object_get(e, "Unknown") || json_object_get(e, "Var")) return true;
    json_t *extn = json_object_get(e, "__extn");
    const char *fn = json_string_value(json_object_get(extn, "fn"));
    if (fn && strcmp(fn, "unknown") == 0) return true;
    const char *key;
    json_t *child;
    json_object_foreach(e, key, child) if (is_open(child, depth + 1)) return true;
  } else if (json_is_array(e)) {
    size_t i;
    json_t *child;
    json_array_foreach(e, i, child) if (is_open(child, depth + 1)) return true;
  }
  return false;
}

/* Evaluate a closed expression for the agent: 1 and *text (malloc'd Cedar value), 0 on an evaluation
 * error, -1 when it cannot be evaluated here. */
static int evaluate_closed(struct builder *b, json_t *e, char **text) {
  char *source = expression_text(e);
  if (!source) return -1;
  cedar_expression *expression = NULL;
  cedar_diagnostic diag;
  int rc = cedar_expression_parse(source, strlen(source), NULL, &expression, &diag);
  free(source);
  if (rc < 0) return -1;
  cedar_request request = {.principal = {.type = "Dome::Agent", .id = b->env->agent},
                           .action = {.type = "Dome::Action", .id = b->env->action},
                           .resource = {.type = b->is_file ? "Dome::Path" : "Dome::Network", .id = "/"}};
  rc = cedar_evaluate(expression, b->env->entities, &request, text, &diag);
  cedar_expression_free(expression);
  return rc == 0 ? 1 : rc == -EINVAL ? 0 : -1;
}

static int reject(struct builder *b, json_t *expression, const char *reason) {
  char *text = expression_text(expression);
  dome_error_set(b->err, EINVAL, "cannot compile `%s`: %s", text ? text : "?", reason);
  free(text);
  return -EINVAL;
}

/* ---- predicates ---- */

void dome_compile_pred_free(struct pred *pred) {
  if (!pred) return;
  dome_compile_pred_free(pred->a);
  dome_compile_pred_free(pred->b);
  dome_compile_pred_free(pred->c);
  free(pred->path);
  free(pred);
}

static struct pred *node(struct builder *b, enum pred_kind kind) {
  if (++b->nodes > DOME_COMPILE_MAX_NODES) {
    dome_error_set(b->err, E2BIG, "residual condition has more than %d nodes", DOME_COMPILE_MAX_NODES);
    return NULL;
  }
  struct pred *p = calloc(1, sizeof *p);
  if (!p) dome_error_set(b->err, ENOMEM, "out of memory");
  if (p) p->kind = kind;
  return p;
}

static struct pred *constant(struct builder *b, bool value) {
  return node(b, value ? PRED_TRUE : PRED_FALSE);
}

static struct pred *combine(struct builder *b, enum pred_kind kind, struct pred *x, struct pred *y) {
  if (!x || !y) {
    dome_compile_pred_free(x);
    dome_compile_pred_free(y);
    return NULL;
  }
  struct pred *p = node(b, kind);
  if (!p) {
    dome_compile_pred_free(x);
    dome_compile_pred_free(y);
    return NULL;
  }
  p->a = x;
  p->b = y;
  return p;
}

/* ---- literals ---- */

/* Parse Cedar's ip() text: IPv4 dotted quad or IPv6 (no embedded IPv4), optional /length. The host bits
 * are cleared as Cedar's isInRange does. */
static bool parse_ip(const char *text, struct prefix *out, bool *host) {
  char address[64];
  const char *slash = strchr(text, '/');
  size_t n = slash ? (size_t)(slash - text) : strlen(text);
  if (n == 0 || n >= sizeof address) return false;
  memcpy(address, text, n);
  address[n] = 0;
  memset(out, 0, sizeof *out);
  unsigned max;
  if (inet_pton(AF_INET, address, out->address) == 1) {
    out->family = 4;
    max = 32;
  } else if (!strchr(address, '.') && inet_pton(AF_INET6, address, out->address) == 1) {
    out->family = 6;
    max = 128;
  } else {
    return false;
  }
  unsigned length = max;
  if (slash) {
    char *end;
    unsigned long value = strtoul(slash + 1, &end, 10);
    if (end == slash + 1 || *end || value > max) return false;
    length = (unsigned)value;
  }
  *host = length == max;
  out->length = (uint8_t)length;
  for (unsigned bit = length; bit < max; bit++) out->address[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
  return true;
}

static bool entity_value(json_t *value, const char **type, const char **id) {
  json_t *entity = json_object_get(value, "__entity");
  if (!entity) entity = value;
  json_t *t = json_object_get(entity, "type"), *i = json_object_get(entity, "id");
  if (!json_is_string(t) || !json_is_string(i)) return false;
  *type = json_string_value(t);
  *id = json_string_value(i);
  return true;
}

static int literal(struct builder *b, json_t *expression, json_t *value, struct term *t) {
  memset(t, 0, sizeof *t);
  if (json_is_boolean(value)) {
    t->kind = TERM_BOOL;
    t->number = json_is_true(value);
  } else if (json_is_integer(value)) {
    t->kind = TERM_LONG;
    t->number = json_integer_value(value);
  } else if (json_is_string(value)) {
    t->kind = TERM_STRING;
    t->string = json_string_value(value);
  } else if (json_is_array(value)) {
    t->kind = TERM_SET;
    t->set = value;
  } else if (json_is_object(value) && json_object_get(value, "__extn")) {
    json_t *extn = json_object_get(value, "__extn");
    const char *fn = json_string_value(json_object_get(extn, "fn"));
    const char *arg = json_string_value(json_object_get(extn, "arg"));
    if (fn && arg && strcmp(fn, "unknown") == 0) {
      /* a context field left unknown (the whole record was kept literally) */
      if (strcmp(arg, "dst_ip") == 0)
        t->kind = TERM_DST_IP;
      else if (strcmp(arg, "dst_port") == 0)
        t->kind = TERM_DST_PORT;
      else if (strcmp(arg, "protocol") == 0)
        t->kind = TERM_PROTOCOL;
      else
        return reject(b, expression, "an unknown the kernel does not see");
      return 0;
    }
    if (!fn || !arg || strcmp(fn, "ip") != 0)
      return reject(b, expression, "only the ip extension type is known to the kernel tables");
    if (!parse_ip(arg, &t->ip, &t->ip_host))
      return reject(b, expression, "not an address the compiler reads");
    t->kind = TERM_IP;
  } else if (json_is_object(value) && entity_value(value, &t->type, &t->string)) {
    t->kind = TERM_ENTITY;
  } else {
    return reject(b, expression, "a value of a type the kernel tables cannot hold");
  }
  return 0;
}

static int term(struct builder *b, json_t *e, struct term *t, unsigned depth) {
  (void)depth;
  memset(t, 0, sizeof *t);
  json_t *value;
  if ((value = json_object_get(e, "Value"))) return literal(b, e, value, t);
  if ((value = json_object_get(e, "Set"))) {
    t->kind = TERM_SET;
    t->set = value;
    return 0;
  }
  if ((value = json_object_get(e, "ip"))) {
    json_t *arg = json_is_array(value) && json_array_size(value) == 1 ? json_array_get(value, 0) : NULL;
    json_t *text = arg ? json_object_get(arg, "Value") : NULL;
    if (!json_is_string(text) || !parse_ip(json_string_value(text), &t->ip, &t->ip_host))
      return reject(b, e, "not an address the compiler reads");
    t->kind = TERM_IP;
    return 0;
  }
  if (json_is_object(e) && !is_open(e, 0)) {
    char *text = NULL;
    int rc = evaluate_closed(b, e, &text);
    if (rc == 0) {
      t->kind = TERM_ERROR;
      return 0;
    }
    char *end = NULL;
    long long number = text ? strtoll(text, &end, 10) : 0;
    bool ok = rc == 1 && end && end != text && !*end;
    if (ok) {
      t->kind = TERM_LONG;
      t->number = number;
    } else if (rc == 1 && (strcmp(text, "true") == 0 || strcmp(text, "false") == 0)) {
      t->kind = TERM_BOOL;
      t->number = text[0] == 't';
      ok = true;
    }
    free(text);
    if (ok) return 0;
    return reject(b, e, "a value of a type the kernel tables cannot hold");
  }
  if ((value = json_object_get(e, "Unknown"))) {
    const char *name = json_string_value(json_object_get(value, "name"));
    if (name && strcmp(name, "dst_ip") == 0)
      t->kind = TERM_DST_IP;
    else if (name && strcmp(name, "dst_port") == 0)
      t->kind = TERM_DST_PORT;
    else if (name && strcmp(name, "protocol") == 0)
      t->kind = TERM_PROTOCOL;
    else
      return reject(b, e, "an unknown the kernel does not see");
    if (b->is_file) return reject(b, e, "file actions have no network context");
    return 0;
  }
  if ((value = json_object_get(e, "Var"))) {
    if (json_is_string(value) && strcmp(json_string_value(value), "resource") == 0) {
      t->kind = TERM_RESOURCE;
      return 0;
    }
    return reject(b, e, "a variable the kernel does not see");
  }
  if ((value = json_object_get(e, "."))) {
    /* `{}.dst_port`: the partial evaluator leaves the access to the (known, empty) context of a file
     * action inside a branch; reaching it is an evaluation error, which Cedar treats as not satisfied */
    json_t *record = json_object_get(json_object_get(value, "left"), "Value");
    const char *attr = json_string_value(json_object_get(value, "attr"));
    if (json_is_object(record) && !json_object_get(record, "__entity") &&
        !json_object_get(record, "__extn") && attr) {
      json_t *field = json_object_get(record, attr);
      if (field) return literal(b, e, field, t);
      t->kind = TERM_ERROR;
      return 0;
    }
    return reject(b, e, "an attribute the kernel does not see");
  }
  return reject(b, e, "an expression the kernel tables cannot express");
}

/* ---- atoms ---- */

static bool mapped_ipv6(const struct prefix *p) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return p->family == 6 && p->length >= 96 && memcmp(p->address, mapped, 12) == 0;
}

static struct pred *ip_in(struct builder *b, json_t *e, const struct prefix *p) {
  if (mapped_ipv6(p)) {
    reject(b, e,
           "an IPv4-mapped IPv6 range never matches: the kernel decides ::ffff:a.b.c.d as the IPv4 "
           "address a.b.c.d; write the IPv4 range");
    return NULL;
  }
  struct pred *x = node(b, PRED_IP_IN);
  if (x) x->prefix = *p;
  return x;
}

static struct pred *prefix_pred(struct builder *b, uint8_t family, const char *text) {
  struct pred *x = node(b, PRED_IP_IN);
  bool host;
  if (x) parse_ip(text, &x->prefix, &host);
  (void)family;
  return x;
}

static struct pred *port_range(struct builder *b, json_int_t first, json_int_t last) {
  if (first < 0) first = 0;
  if (last > 65535) last = 65535;
  if (first > last) return constant(b, false);
  struct pred *x = node(b, PRED_PORT);
  if (x) {
    x->port_first = (uint32_t)first;
    x->port_last = (uint32_t)last;
  }
  return x;
}

static bool normalized_path(const char *path) {
  if (path[0] != '/') return false;
  if (strcmp(path, "/") == 0) return true;
  size_t n = strlen(path);
  if (path[n - 1] == '/' || n >= DOME_PATH_MAX) return false;
  for (const char *c = path; *c; c++) {
    if (*c != '/') continue;
    const char *next = c + 1;
    size_t len = strcspn(next, "/");
    if (len == 0 || (len == 1 && next[0] == '.') || (len == 2 && next[0] == '.' && next[1] == '.'))
      return false;
  }
  return true;
}

/* resource == entity (in_op false) or resource in entity (in_op true). */
static struct pred *resource_atom(struct builder *b, json_t *e, const char *type, const char *id,
                                  bool in_op) {
  if (b->is_file && strcmp(type, "Dome::Path") == 0) {
    if (!normalized_path(id)) {
      reject(b, e, "not an absolute normalized path (no //, . or .., no trailing /): no file matches it");
      return NULL;
    }
    struct pred *x = node(b, in_op ? PRED_PATH_IN : PRED_PATH_EQ);
    if (x && !(x->path = strdup(id))) {
      dome_compile_pred_free(x);
      dome_error_set(b->err, ENOMEM, "out of memory");
      return NULL;
    }
    return x;
  }
  if (!b->is_file && strcmp(type, "Dome::Network") == 0) {
    unsigned mask = strcmp(id, "loopback") == 0 ? CLASS_LOOPBACK_BIT
                    : strcmp(id, "egress") == 0 ? CLASS_EGRESS_BIT
                                                : 0;
    if (mask == 0) return constant(b, false);
    struct pred *x = node(b, PRED_CLASS);
    if (x) x->mask = mask;
    return x;
  }
  /* an entity of another type: never equal to, nor an ancestor of, the action's resource */
  return constant(b, false);
}

static struct pred *build(struct builder *b, json_t *e, unsigned depth);

static struct pred *equality(struct builder *b, json_t *e, json_t *args, bool negate, unsigned depth) {
  struct term l, r;
  if (term(b, json_object_get(args, "left"), &l, depth + 1) < 0 ||
      term(b, json_object_get(args, "right"), &r, depth + 1) < 0)
    return NULL;
  if (l.kind == TERM_ERROR || r.kind == TERM_ERROR) return node(b, PRED_ERROR);
  if (l.kind < TERM_DST_IP) {
    struct term swap = l;
    l = r;
    r = swap;
  }
  struct pred *x = NULL;
  if (r.kind >= TERM_DST_IP) {
    reject(b, e, "compares two request values");
    return NULL;
  }
  switch (l.kind) {
    case TERM_DST_PORT:
      x = r.kind == TERM_LONG ? port_range(b, r.number, r.number) : constant(b, false);
      break;
    case TERM_PROTOCOL:
      if (r.kind != TERM_STRING) {
        x = constant(b, false);
      } else {
        unsigned mask = strcmp(r.string, "tcp") == 0   ? PROTO_TCP_BIT
                        : strcmp(r.string, "udp") == 0 ? PROTO_UDP_BIT
                                                       : 0;
        x = mask ? node(b, PRED_PROTOCOL) : constant(b, false);
        if (x && mask) x->mask = mask;
      }
      break;
    case TERM_DST_IP:
      if (r.kind != TERM_IP) {
        x = constant(b, false);
      } else if (!r.ip_host) {
        reject(b, e, "an address compared with a range is never equal; use isInRange");
        return NULL;
      } else {
        x = ip_in(b, e, &r.ip);
      }
      break;
    case TERM_RESOURCE:
      x = r.kind == TERM_ENTITY ? resource_atom(b, e, r.type, r.string, false) : constant(b, false);
      break;
    default:
      reject(b, e, "compares values the partial evaluation left undecided");
      return NULL;
  }
  if (x && negate) {
    struct pred *n = node(b, PRED_NOT);
    if (!n) {
      dome_compile_pred_free(x);
      return NULL;
    }
    n->a = x;
    x = n;
  }
  return x;
}

static struct pred *comparison(struct builder *b, json_t *e, const char *op, json_t *args, unsigned depth) {
  struct term l, r;
  if (term(b, json_object_get(args, "left"), &l, depth + 1) < 0 ||
      term(b, json_object_get(args, "right"), &r, depth + 1) < 0)
    return NULL;
  if (l.kind == TERM_ERROR || r.kind == TERM_ERROR) return node(b, PRED_ERROR);
  bool flipped = false;
  if (l.kind != TERM_DST_PORT) {
    struct term swap = l;
    l = r;
    r = swap;
    flipped = true;
  }
  if (l.kind != TERM_DST_PORT || r.kind != TERM_LONG) {
    reject(b, e, "only context.dst_port compares with an integer");
    return NULL;
  }
  json_int_t v = r.number;
  /* normalize to dst_port OP v */
  char o0 = op[0];
  bool equal = op[1] == '=';
  if (flipped) o0 = o0 == '<' ? '>' : '<';
  if (o0 == '<') return equal ? port_range(b, 0, v) : (v <= 0 ? constant(b, false) : port_range(b, 0, v - 1));
  return equal ? port_range(b, v, 65535) : (v >= 65535 ? constant(b, false) : port_range(b, v + 1, 65535));
}

/* Cedar `like`: '*' matches any sequence; EST pattern elements "Wildcard" or {"Literal": "text"}. */
static bool like_matches(json_t *pattern, size_t index, const char *s) {
  if (index == json_array_size(pattern)) return *s == 0;
  json_t *element = json_array_get(pattern, index);
  if (json_is_string(element)) { /* Wildcard */
    for (const char *p = s;; p++) {
      if (like_matches(pattern, index + 1, p)) return true;
      if (!*p) return false;
    }
  }
  const char *literal = json_string_value(json_object_get(element, "Literal"));
  size_t n = strlen(literal);
  return strncmp(s, literal, n) == 0 && like_matches(pattern, index + 1, s + n);
}

static bool like_pattern_valid(json_t *pattern) {
  if (!json_is_array(pattern) || json_array_size(pattern) > 64) return false;
  size_t i;
  json_t *element;
  json_array_foreach(pattern, i, element) {
    if (json_is_string(element) && strcmp(json_string_value(element), "Wildcard") == 0) continue;
    if (!json_is_string(json_object_get(element, "Literal"))) return false;
  }
  return true;
}

static struct pred *like(struct builder *b, json_t *e, json_t *args, unsigned depth) {
  struct term l;
  if (term(b, json_object_get(args, "left"), &l, depth + 1) < 0) return NULL;
  if (l.kind == TERM_ERROR) return node(b, PRED_ERROR);
  json_t *pattern = json_object_get(args, "pattern");
  if (l.kind != TERM_PROTOCOL || !like_pattern_valid(pattern)) {
    reject(b, e, "`like` compiles only on context.protocol (paths: use `resource in` / `==`)");
    return NULL;
  }
  unsigned mask = (like_matches(pattern, 0, "tcp") ? PROTO_TCP_BIT : 0) |
                  (like_matches(pattern, 0, "udp") ? PROTO_UDP_BIT : 0);
  struct pred *x = node(b, PRED_PROTOCOL);
  if (x) x->mask = mask;
  return x;
}

static struct pred *membership(struct builder *b, json_t *e, json_t *args, unsigned depth) {
  struct term l, r;
  if (term(b, json_object_get(args, "left"), &l, depth + 1) < 0 ||
      term(b, json_object_get(args, "right"), &r, depth + 1) < 0)
    return NULL;
  if (l.kind == TERM_ERROR || r.kind == TERM_ERROR) return node(b, PRED_ERROR);
  if (l.kind != TERM_RESOURCE || (r.kind != TERM_ENTITY && r.kind != TERM_SET)) {
    reject(b, e, "`in` compiles only as `resource in` an entity or a set of entities");
    return NULL;
  }
  if (r.kind == TERM_ENTITY) return resource_atom(b, e, r.type, r.string, true);
  struct pred *x = constant(b, false);
  size_t i;
  json_t *element;
  json_array_foreach(r.set, i, element) {
    json_t *value = json_object_get(element, "Value");
    const char *type, *id;
    if (!entity_value(value ? value : element, &type, &id)) {
      dome_compile_pred_free(x);
      reject(b, e, "a set holding something other than entities");
      return NULL;
    }
    x = combine(b, PRED_OR, x, resource_atom(b, e, type, id, true));
    if (!x) return NULL;
  }
  return x;
}

static struct pred *is_type(struct builder *b, json_t *e, json_t *args, unsigned depth) {
  struct term l;
  if (term(b, json_object_get(args, "left"), &l, depth + 1) < 0) return NULL;
  const char *type = json_string_value(json_object_get(args, "entity_type"));
  if (l.kind != TERM_RESOURCE || !type) {
    reject(b, e, "`is` compiles only on the resource");
    return NULL;
  }
  bool same = strcmp(type, b->is_file ? "Dome::Path" : "Dome::Network") == 0;
  struct pred *x = constant(b, same);
  json_t *in = json_object_get(args, "in");
  if (in && x) {
    struct term r;
    if (term(b, in, &r, depth + 1) < 0 || r.kind != TERM_ENTITY) {
      dome_compile_pred_free(x);
      if (r.kind != TERM_ENTITY) reject(b, e, "`is ... in` compiles only with an entity");
      return NULL;
    }
    x = combine(b, PRED_AND, x, resource_atom(b, e, r.type, r.string, true));
  }
  return x;
}

static struct pred *ip_method(struct builder *b, json_t *e, const char *name, json_t *args, unsigned depth) {
  size_t want = strcmp(name, "isInRange") == 0 ? 2 : 1;
  if (!json_is_array(args) || json_array_size(args) != want) {
    reject(b, e, "wrong number of arguments");
    return NULL;
  }
  struct term a, r;
  if (term(b, json_array_get(args, 0), &a, depth + 1) < 0) return NULL;
  if (a.kind == TERM_ERROR) return node(b, PRED_ERROR);
  if (a.kind != TERM_DST_IP) {
    reject(b, e, "ipaddr methods compile only on context.dst_ip");
    return NULL;
  }
  if (want == 2) {
    if (term(b, json_array_get(args, 1), &r, depth + 1) < 0) return NULL;
    if (r.kind == TERM_ERROR) return node(b, PRED_ERROR);
    if (r.kind != TERM_IP) {
      reject(b, e, "isInRange compiles only with an ip(\"...\") literal range");
      return NULL;
    }
    return ip_in(b, e, &r.ip);
  }
  if (strcmp(name, "isIpv4") == 0 || strcmp(name, "isIpv6") == 0) {
    struct pred *x = node(b, PRED_FAMILY);
    if (x) x->family = name[5] == '4' ? 4 : 6;
    return x;
  }
  if (strcmp(name, "isLoopback") == 0)
    return combine(b, PRED_OR, prefix_pred(b, 4, "127.0.0.0/8"), prefix_pred(b, 6, "::1/128"));
  return combine(b, PRED_OR, prefix_pred(b, 4, "224.0.0.0/4"), prefix_pred(b, 6, "ff00::/8"));
}

static struct pred *build(struct builder *b, json_t *e, unsigned depth) {
  if (depth > MAX_DEPTH) {
    dome_error_set(b->err, E2BIG, "residual condition nested deeper than %d", MAX_DEPTH);
    return NULL;
  }
  if (!json_is_object(e) || json_object_size(e) != 1) {
    reject(b, e, "not an expression");
    return NULL;
  }
  const char *op = json_object_iter_key(json_object_iter(e));
  json_t *args = json_object_iter_value(json_object_iter(e));
  if (strcmp(op, "Value") != 0 && !is_open(e, 0)) {
    /* a closed sub-expression the partial evaluator left in a branch: decide it now */
    char *text = NULL;
    int rc = evaluate_closed(b, e, &text);
    bool boolean = rc == 1 && (strcmp(text, "true") == 0 || strcmp(text, "false") == 0);
    struct pred *x = rc == 0 ? node(b, PRED_ERROR) : boolean ? constant(b, text[0] == 't') : NULL;
    free(text);
    if (!x && rc != 0 && !boolean) reject(b, e, "a condition that is not a boolean (evaluation error)");
    return x;
  }
  if (strcmp(op, "Value") == 0) {
    if (json_is_boolean(args)) return constant(b, json_is_true(args));
    reject(b, e, "a condition that is not a boolean (evaluation error)");
    return NULL;
  }
  if (strcmp(op, "!") == 0) {
    struct pred *inner = build(b, json_object_get(args, "arg"), depth + 1);
    if (!inner) return NULL;
    struct pred *x = node(b, PRED_NOT);
    if (!x) {
      dome_compile_pred_free(inner);
      return NULL;
    }
    x->a = inner;
    return x;
  }
  if (strcmp(op, "&&") == 0 || strcmp(op, "||") == 0) {
    struct pred *l = build(b, json_object_get(args, "left"), depth + 1);
    if (!l) return NULL;
    return combine(b, op[0] == '&' ? PRED_AND : PRED_OR, l,
                   build(b, json_object_get(args, "right"), depth + 1));
  }
  if (strcmp(op, "if-then-else") == 0) {
    struct pred *c = build(b, json_object_get(args, "if"), depth + 1);
    if (!c) return NULL;
    struct pred *t = build(b, json_object_get(args, "then"), depth + 1);
    struct pred *f = t ? build(b, json_object_get(args, "else"), depth + 1) : NULL;
    struct pred *x = t && f ? node(b, PRED_ITE) : NULL;
    if (!x) {
      dome_compile_pred_free(c);
      dome_compile_pred_free(t);
      dome_compile_pred_free(f);
      return NULL;
    }
    x->a = c;
    x->b = t;
    x->c = f;
    return x;
  }
  if (strcmp(op, "==") == 0 || strcmp(op, "!=") == 0) return equality(b, e, args, op[0] == '!', depth);
  if (strcmp(op, "<") == 0 || strcmp(op, "<=") == 0 || strcmp(op, ">") == 0 || strcmp(op, ">=") == 0)
    return comparison(b, e, op, args, depth);
  if (strcmp(op, "like") == 0) return like(b, e, args, depth);
  if (strcmp(op, "in") == 0) return membership(b, e, args, depth);
  if (strcmp(op, "is") == 0) return is_type(b, e, args, depth);
  if (strcmp(op, "isInRange") == 0 || strcmp(op, "isIpv4") == 0 || strcmp(op, "isIpv6") == 0 ||
      strcmp(op, "isLoopback") == 0 || strcmp(op, "isMulticast") == 0)
    return ip_method(b, e, op, args, depth);
  if (strcmp(op, ".") == 0 || strcmp(op, "has") == 0)
    reject(b, e,
           "an attribute the kernel does not see (only context.dst_ip, dst_port, protocol and the resource)");
  else if (strcmp(op, "Unknown") == 0 || strcmp(op, "Var") == 0)
    reject(b, e, "a condition that is not a boolean (evaluation error)");
  else
    reject(b, e, "an operator the kernel tables cannot express");
  return NULL;
}

int dome_compile_pred_from_policy_json(json_t *policy, const struct pred_env *env, struct pred **out,
                                       dome_error *err) {
  struct builder b = {.is_file = env->is_file, .env = env, .err = err};
  struct pred *all = constant(&b, true);
  json_t *conditions = json_object_get(policy, "conditions");
  size_t i;
  json_t *condition;
  json_array_foreach(conditions, i, condition) {
    if (!all) break;
    const char *kind = json_string_value(json_object_get(condition, "kind"));
    struct pred *x = build(&b, json_object_get(condition, "body"), 0);
    if (x && kind && strcmp(kind, "unless") == 0) {
      struct pred *n = node(&b, PRED_NOT);
      if (n)
        n->a = x;
      else
        dome_compile_pred_free(x);
      x = n;
    }
    all = combine(&b, PRED_AND, all, x);
  }
  /* The residual's scope is printed as principal, action, resource (all); anything else is not expected
   * from the partial evaluator and is refused rather than guessed. */
  static const char *const scopes[] = {"principal", "action", "resource"};
  for (size_t s = 0; all && s < 3; s++) {
    const char *op = json_string_value(json_object_get(json_object_get(policy, scopes[s]), "op"));
    if (!op || strcmp(op, "All") != 0) {
      dome_compile_pred_free(all);
      all = NULL;
      dome_error_set(err, EINVAL, "cannot compile the residual scope of `%s`", scopes[s]);
    }
  }
  if (!all) return dome_error_code(err) ? dome_error_code(err) : -EINVAL;
  *out = all;
  return 0;
}

/* ---- evaluation in a cell ---- */

/* Three-valued: 1 true, 0 false, -1 error. */
static int eval(const struct pred *p, const struct net_cell *n, const struct file_cell *f) {
  int x;
  switch (p->kind) {
    case PRED_TRUE:
      return 1;
    case PRED_FALSE:
      return 0;
    case PRED_ERROR:
      return -1;
    case PRED_NOT:
      x = eval(p->a, n, f);
      return x < 0 ? x : !x;
    case PRED_AND:
      x = eval(p->a, n, f);
      return x == 1 ? eval(p->b, n, f) : x;
    case PRED_OR:
      x = eval(p->a, n, f);
      return x == 0 ? eval(p->b, n, f) : x;
    case PRED_ITE:
      x = eval(p->a, n, f);
      return x < 0 ? x : x ? eval(p->b, n, f) : eval(p->c, n, f);
    case PRED_IP_IN:
      return n && dome_compile_prefix_contains(&p->prefix, n->node->family, n->address);
    case PRED_FAMILY:
      return n && n->node->family == p->family;
    case PRED_PORT:
      return n && n->port >= p->port_first && n->port <= p->port_last;
    case PRED_PROTOCOL:
      return n && (p->mask & n->protocol_bit);
    case PRED_CLASS: {
      if (!n) return 0;
      struct prefix lo4 = {.family = 4, .length = 8, .address = {127}};
      struct prefix lo6 = {.family = 6, .length = 128, .address = {[15] = 1}};
      bool loopback = dome_compile_prefix_contains(&lo4, n->node->family, n->address) ||
                      dome_compile_prefix_contains(&lo6, n->node->family, n->address);
      return (p->mask & (loopback ? CLASS_LOOPBACK_BIT : CLASS_EGRESS_BIT)) != 0;
    }
    case PRED_PATH_EQ:
      return f && f->exact && strcmp(f->path, p->path) == 0;
    case PRED_PATH_IN:
      return f && dome_compile_path_is_ancestor_or_self(p->path, f->path);
  }
  return -1;
}

bool dome_compile_pred_eval_net(const struct pred *pred, const struct net_cell *cell) {
  return eval(pred, cell, NULL) == 1;
}

bool dome_compile_pred_eval_file(const struct pred *pred, const struct file_cell *cell) {
  return eval(pred, NULL, cell) == 1;
}

void dome_compile_pred_visit(const struct pred *p, void (*fn)(void *context, const struct pred *atom),
                             void *context) {
  if (!p) return;
  fn(context, p);
  dome_compile_pred_visit(p->a, fn, context);
  dome_compile_pred_visit(p->b, fn, context);
  dome_compile_pred_visit(p->c, fn, context);
}

bool dome_compile_prefix_contains(const struct prefix *prefix, uint8_t family, const uint8_t *address) {
  if (prefix->family != family) return false;
  for (unsigned bit = 0; bit < prefix->length; bit++) {
    uint8_t m = (uint8_t)(0x80u >> (bit % 8));
    if ((prefix->address[bit / 8] & m) != (address[bit / 8] & m)) return false;
  }
  return true;
}

bool dome_compile_prefix_covers(const struct prefix *a, const struct prefix *b) {
  return a->length <= b->length && dome_compile_prefix_contains(a, b->family, b->address);
}

bool dome_compile_path_is_ancestor_or_self(const char *ancestor, const char *path) {
  if (strcmp(ancestor, "/") == 0) return true;
  size_t n = strlen(ancestor);
  return strncmp(ancestor, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}
