/* Internals of the Cedar → kernel compiler: residual conditions as predicates over a kernel request. */
#ifndef DOME_POLICY_COMPILE_INTERNAL_H
#define DOME_POLICY_COMPILE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/compile/compile.h"

/* Protocol mask bits and network resource classes. */
#define PROTO_TCP_BIT 1u
#define PROTO_UDP_BIT 2u
#define CLASS_LOOPBACK_BIT 1u
#define CLASS_EGRESS_BIT 2u

struct prefix {
  uint8_t family; /* 4 or 6 */
  uint8_t length;
  uint8_t address[16]; /* network order, host bits zero; IPv4 in [0..3] */
};

enum pred_kind {
  PRED_TRUE,
  PRED_FALSE,
  PRED_NOT,      /* a */
  PRED_AND,      /* a, b */
  PRED_OR,       /* a, b */
  PRED_ITE,      /* a ? b : c */
  PRED_IP_IN,    /* prefix contains dst_ip (same family) */
  PRED_FAMILY,   /* dst_ip's family == family (4 or 6) */
  PRED_PORT,     /* port_first <= dst_port <= port_last */
  PRED_PROTOCOL, /* protocol's bit in mask */
  PRED_CLASS,    /* network resource class bit in mask */
  PRED_PATH_EQ,  /* resource == Dome::Path::path */
  PRED_PATH_IN,  /* resource in Dome::Path::path (equal or beneath) */
  PRED_ERROR,    /* an evaluation error on every request reaching it (`{}.dst_port` of a file action) */
};

struct pred {
  enum pred_kind kind;
  struct pred *a, *b, *c;
  struct prefix prefix;
  uint8_t family;
  uint32_t port_first, port_last;
  unsigned mask;
  char *path;
};

/* Build the predicate of one residual policy's conditions (the `when` bodies and negated `unless`
 * bodies, conjoined) from its EST JSON. Kind of resource the action has: env->is_file (Dome::Path) or
 * network (Dome::Network). Closed sub-expressions (no unknown, no resource) are evaluated with
 * cedar_evaluate for the agent. On rejection returns -EINVAL with err "cannot compile `TEXT`: reason". */
struct pred_env {
  bool is_file;
  const cedar_entities *entities; /* for closed sub-expressions the partial evaluator left unevaluated */
  const char *agent;
  const char *action; /* "fs:read", ... */
};
int dome_compile_pred_from_policy_json(json_t *policy, const struct pred_env *env, struct pred **out,
                                       dome_error *err);
void dome_compile_pred_free(struct pred *pred);

/* A cell: one class of concrete requests on which every atom of the policies is constant. */
struct net_cell {
  const struct prefix *node; /* the longest literal prefix containing the address (representative) */
  const uint8_t *address;    /* a representative address (family of node) */
  uint32_t port;             /* first port of the interval */
  unsigned protocol_bit;
};
struct file_cell {
  const char *path; /* the longest literal path that is the request's path or an ancestor of it */
  bool exact;       /* the request's path is `path` itself (else strictly beneath, in no longer literal) */
};
/* Cedar's outcome of the condition in the cell: true only when it evaluates to true without error (an
 * erroring policy is not satisfied; && || ! if-then-else propagate errors as Cedar does). */
bool dome_compile_pred_eval_net(const struct pred *pred, const struct net_cell *cell);
bool dome_compile_pred_eval_file(const struct pred *pred, const struct file_cell *cell);

/* Walk the atoms (for collecting literals). */
void dome_compile_pred_visit(const struct pred *pred, void (*fn)(void *context, const struct pred *atom),
                             void *context);

bool dome_compile_prefix_contains(const struct prefix *prefix, uint8_t family, const uint8_t *address);
/* prefix a contains prefix b (same family, a shorter or equal, b's address in a) */
bool dome_compile_prefix_covers(const struct prefix *a, const struct prefix *b);
bool dome_compile_path_is_ancestor_or_self(const char *ancestor, const char *path);

/* One compiled policy of an action. */
struct compiled_policy {
  const char *id;
  bool forbid;
  size_t order; /* position in the policy set */
  struct pred *pred;
};

/* Compile one action's policies into the tables. */
int dome_compile_net_action(const struct compiled_policy *policies, size_t count, enum dome_net_action action,
                            struct dome_rule_tables *tables, dome_error *err);
int dome_compile_file_action(const struct compiled_policy *policies, size_t count,
                             enum dome_file_access access, struct dome_rule_tables *tables, dome_error *err);

/* Decision for a satisfied-policy vector: fills *decision and *policy (index into policies or -1). */
void dome_compile_decide(const struct compiled_policy *policies, size_t count, const bool *satisfied,
                         enum dome_decision *decision, long *policy);

#endif
