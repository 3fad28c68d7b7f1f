/* Network tables of one action: the request space (protocol, family, address, port) is cut into cells on
 * which every atom of every policy is constant — addresses by the longest literal prefix containing them
 * (the literal prefixes of the policies plus 0.0.0.0/0, ::/0, the loopback ranges and ::ffff:0:0/96),
 * ports by the boundaries of the literal ranges. Each cell is decided with Cedar's rule and the decisions
 * are written per (protocol, family, prefix) group as port ranges; a prefix whose decisions equal those
 * it would inherit from a shorter emitted prefix is left out, and a group that would be empty but must
 * hide a shorter prefix gets one deny entry (the kernel's LPM lookup never falls back to a shorter
 * prefix once a longer one matched). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/compile/internal.h"

struct collect {
  struct prefix *prefixes;
  size_t prefix_count;
  uint32_t *cuts;
  size_t cut_count;
  bool overflow;
};

static void add_prefix(struct collect *c, const struct prefix *p) {
  for (size_t i = 0; i < c->prefix_count; i++)
    if (c->prefixes[i].family == p->family && c->prefixes[i].length == p->length &&
        memcmp(c->prefixes[i].address, p->address, 16) == 0)
      return;
  if (c->prefix_count >= DOME_COMPILE_MAX_PREFIXES) {
    c->overflow = true;
    return;
  }
  c->prefixes[c->prefix_count++] = *p;
}

static void add_cut(struct collect *c, uint32_t cut) {
  if (cut > 65535) return;
  for (size_t i = 0; i < c->cut_count; i++)
    if (c->cuts[i] == cut) return;
  if (c->cut_count >= DOME_COMPILE_MAX_PORT_CUTS) {
    c->overflow = true;
    return;
  }
  c->cuts[c->cut_count++] = cut;
}

static void collect_atom(void *context, const struct pred *atom) {
  struct collect *c = context;
  if (atom->kind == PRED_IP_IN) add_prefix(c, &atom->prefix);
  if (atom->kind == PRED_PORT) {
    add_cut(c, atom->port_first);
    add_cut(c, atom->port_last + 1);
  }
}

static int compare_cuts(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Shorter prefixes first, so a node's ancestors come before it. */
static int compare_prefixes(const void *a, const void *b) {
  const struct prefix *x = a, *y = b;
  if (x->family != y->family) return x->family - y->family;
  if (x->length != y->length) return x->length - y->length;
  return memcmp(x->address, y->address, 16);
}

/* An address inside `p` but in none of the longer prefixes `others` (those strictly inside p matter).
 * Returns false when they cover p entirely. Bounded: depth <= 128, and each level descends only into a
 * half that some other prefix cuts. */
static bool representative(const struct prefix *p, const struct prefix *others, size_t count, uint8_t *out) {
  bool any_inside = false;
  for (size_t i = 0; i < count && !any_inside; i++)
    any_inside = others[i].family == p->family && others[i].length > p->length &&
                 dome_compile_prefix_covers(p, &others[i]);
  if (!any_inside) {
    memcpy(out, p->address, 16);
    return true;
  }
  unsigned max = p->family == 4 ? 32 : 128;
  if (p->length >= max) return false;
  for (int half = 0; half < 2; half++) {
    struct prefix child = *p;
    child.length = (uint8_t)(p->length + 1);
    if (half) child.address[p->length / 8] |= (uint8_t)(0x80u >> (p->length % 8));
    bool covered = false;
    for (size_t i = 0; i < count && !covered; i++)
      covered = others[i].family == p->family && dome_compile_prefix_covers(&others[i], &child) &&
                others[i].length > p->length;
    if (covered) continue;
    if (representative(&child, others, count, out)) return true;
  }
  return false;
}

struct range {
  uint32_t first, last;
  enum dome_decision decision;
  long policy;
};

/* Decisions of one (protocol, prefix) over the port intervals, merged. */
struct vector {
  struct range *ranges;
  size_t count;
};

static bool vectors_equal(const struct vector *a, const struct vector *b) {
  if (a->count != b->count) return false;
  for (size_t i = 0; i < a->count; i++)
    if (a->ranges[i].first != b->ranges[i].first || a->ranges[i].last != b->ranges[i].last ||
        a->ranges[i].decision != b->ranges[i].decision || a->ranges[i].policy != b->ranges[i].policy)
      return false;
  return true;
}

static int emit(const struct compiled_policy *policies, const struct prefix *p, unsigned protocol_bit,
                enum dome_net_action action, const struct vector *v, struct dome_rule_tables *tables,
                dome_error *err) {
  struct dome_net_entry entry = {
      .action = (uint8_t)action,
      .protocol = protocol_bit == PROTO_TCP_BIT ? DOME_PROTOCOL_TCP : DOME_PROTOCOL_UDP,
      .family = p->family == 4 ? AF_INET : AF_INET6,
      .prefix_len = p->length,
  };
  memcpy(entry.address, p->address, 16);
  size_t written = 0, kept = 0;
  for (size_t i = 0; i < v->count; i++)
    kept += !(v->ranges[i].decision == DOME_DECISION_DENY && v->ranges[i].policy < 0);
  for (size_t i = 0; i < v->count; i++) {
    const struct range *r = &v->ranges[i];
    bool default_deny = r->decision == DOME_DECISION_DENY && r->policy < 0;
    /* the default deny needs no entry, unless the group would be empty (it hides a shorter prefix) */
    if (default_deny && (kept > 0 || written > 0)) continue;
    entry.port_first = (uint16_t)r->first;
    entry.port_last = (uint16_t)r->last;
    if (default_deny) {
      entry.port_first = 0;
      entry.port_last = 65535;
    }
    entry.decision = (uint8_t)r->decision;
    entry.policy_index = DOME_NO_POLICY;
    if (r->policy >= 0) {
      int rc = dome_rule_tables_add_policy(tables, policies[r->policy].id, &entry.policy_index, err);
      if (rc < 0) return rc;
    }
    if (++written > DOME_NET_MAX_PORT_RANGES) {
      char text[64];
      char address[INET6_ADDRSTRLEN];
      inet_ntop(entry.family, entry.address, address, sizeof address);
      snprintf(text, sizeof text, "%s/%u", address, entry.prefix_len);
      return dome_error_set(err, E2BIG,
                            "net:%s %s %s: more than %d distinct port ranges for one prefix (the kernel "
                            "table holds %d); merge the port conditions",
                            dome_net_action_name(action), dome_net_protocol_name(entry.protocol), text,
                            DOME_NET_MAX_PORT_RANGES, DOME_NET_MAX_PORT_RANGES);
    }
    int rc = dome_rule_tables_add_net(tables, &entry, err);
    if (rc < 0) return rc;
  }
  return 0;
}

int dome_compile_net_action(const struct compiled_policy *policies, size_t count, enum dome_net_action action,
                            struct dome_rule_tables *tables, dome_error *err) {
  struct collect c = {0};
  c.prefixes = calloc(DOME_COMPILE_MAX_PREFIXES + 8, sizeof *c.prefixes);
  c.cuts = calloc(DOME_COMPILE_MAX_PORT_CUTS + 2, sizeof *c.cuts);
  bool *satisfied = calloc(count + 1, sizeof *satisfied);
  struct vector *vectors = NULL;
  struct range *storage = NULL;
  int rc = 0;
  if (!c.prefixes || !c.cuts || !satisfied) {
    rc = dome_error_set(err, ENOMEM, "out of memory");
    goto out;
  }
  static const struct prefix fixed[] = {
      {.family = 4, .length = 0},
      {.family = 6, .length = 0},
      {.family = 4, .length = 8, .address = {127}},
      {.family = 6, .length = 128, .address = {[15] = 1}},
      {.family = 6, .length = 96, .address = {[10] = 0xff, [11] = 0xff}}, /* IPv4-mapped: decided as IPv4 */
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) add_prefix(&c, &fixed[i]);
  add_cut(&c, 0);
  for (size_t i = 0; i < count; i++) dome_compile_pred_visit(policies[i].pred, collect_atom, &c);
  if (c.overflow) {
    rc = dome_error_set(err, E2BIG, "net:%s: more than %d address ranges or %d port boundaries",
                        dome_net_action_name(action), DOME_COMPILE_MAX_PREFIXES, DOME_COMPILE_MAX_PORT_CUTS);
    goto out;
  }
  qsort(c.cuts, c.cut_count, sizeof *c.cuts, compare_cuts);
  qsort(c.prefixes, c.prefix_count, sizeof *c.prefixes, compare_prefixes);
  if ((uint64_t)c.prefix_count * c.cut_count * 2 > DOME_COMPILE_MAX_CELLS) {
    rc = dome_error_set(err, E2BIG, "net:%s: %zu address ranges x %zu port intervals is over %u cells",
                        dome_net_action_name(action), c.prefix_count, c.cut_count, DOME_COMPILE_MAX_CELLS);
    goto out;
  }
  size_t intervals = c.cut_count;
  vectors = calloc(c.prefix_count * 2, sizeof *vectors);
  storage = calloc(c.prefix_count * 2 * intervals, sizeof *storage);
  if (!vectors || !storage) {
    rc = dome_error_set(err, ENOMEM, "out of memory");
    goto out;
  }
  static const struct prefix mapped = {.family = 6, .length = 96, .address = {[10] = 0xff, [11] = 0xff}};
  for (size_t n = 0; n < c.prefix_count; n++) {
    const struct prefix *p = &c.prefixes[n];
    uint8_t address[16];
    bool reachable =
        !dome_compile_prefix_covers(&mapped, p) && representative(p, c.prefixes, c.prefix_count, address);
    for (unsigned proto = 0; proto < 2; proto++) {
      struct vector *v = &vectors[n * 2 + proto];
      v->ranges = storage + (n * 2 + proto) * intervals;
      v->count = 0;
      if (!reachable) continue;
      for (size_t k = 0; k < intervals; k++) {
        struct net_cell cell = {.node = p,
                                .address = address,
                                .port = c.cuts[k],
                                .protocol_bit = proto ? PROTO_UDP_BIT : PROTO_TCP_BIT};
        for (size_t i = 0; i < count; i++) satisfied[i] = dome_compile_pred_eval_net(policies[i].pred, &cell);
        struct range r = {.first = c.cuts[k], .last = k + 1 < intervals ? c.cuts[k + 1] - 1 : 65535};
        dome_compile_decide(policies, count, satisfied, &r.decision, &r.policy);
        if (v->count && v->ranges[v->count - 1].decision == r.decision &&
            v->ranges[v->count - 1].policy == r.policy)
          v->ranges[v->count - 1].last = r.last;
        else
          v->ranges[v->count++] = r;
      }
    }
  }
  /* emit, skipping prefixes equal to what they inherit */
  for (size_t n = 0; n < c.prefix_count && rc == 0; n++) {
    const struct prefix *p = &c.prefixes[n];
    for (unsigned proto = 0; proto < 2 && rc == 0; proto++) {
      const struct vector *v = &vectors[n * 2 + proto];
      if (v->count == 0) continue; /* unreachable (covered by longer prefixes, or IPv4-mapped) */
      const struct vector *inherited = NULL;
      for (size_t a = n; a-- > 0;) {
        const struct vector *va = &vectors[a * 2 + proto];
        if (va->count && dome_compile_prefix_covers(&c.prefixes[a], p) && c.prefixes[a].length < p->length) {
          inherited = va;
          break;
        }
      }
      struct range deny_all = {.first = 0, .last = 65535, .decision = DOME_DECISION_DENY, .policy = -1};
      struct vector none = {.ranges = &deny_all, .count = 1};
      /* not emitted: the lookup falls back to the inherited prefix, which decides the same */
      if (vectors_equal(v, inherited ? inherited : &none)) continue;
      rc = emit(policies, p, proto ? PROTO_UDP_BIT : PROTO_TCP_BIT, action, v, tables, err);
    }
  }
out:
  free(c.prefixes);
  free(c.cuts);
  free(satisfied);
  free(vectors);
  free(storage);
  return rc;
}
