/* dome's Cedar → kernel compiler: one agent's fs:* and net:* rules as decision tables.
 *
 * For an agent (the principal, known with its entity data) and each kernel action of the Dome schema —
 * fs:read, fs:write, fs:exec, net:connect, net:bind, net:send — the policy set is partially evaluated
 * (cedar_partially_authorize; the resource and the context fields dst_ip, dst_port, protocol unknown) and
 * the residual policies are compiled into `struct dome_rule_tables` (supervisor/kernel/kernel.h) whose
 * lookups give Cedar's answer for every concrete request: any satisfied forbid denies, else any satisfied
 * permit allows, else deny. The deciding entry names the determining policy (the first satisfied forbid in
 * policy order, else the first satisfied permit).
 *
 * The concrete request a kernel event stands for (what "exact" means; docs/policy.md):
 *   - files: principal Dome::Agent::"<agent>", action fs:read|fs:write|fs:exec, resource
 *     Dome::Path::"<p>" with p absolute and normalized, context {}; the entities are the agent's entity
 *     data plus the path hierarchy: Path::"/a/b" in Path::"/a" in Path::"/" (every ancestor directory).
 *   - network: action net:connect|net:bind|net:send, resource Dome::Network::"loopback" when the
 *     destination is in 127.0.0.0/8 or is ::1, else Dome::Network::"egress"; context {dst_ip: ip(address),
 *     dst_port: port, protocol: "tcp"|"udp"}. An IPv4-mapped IPv6 destination (::ffff:a.b.c.d) is the
 *     request for a.b.c.d (Cedar has no mapped form: ip("::ffff:1.2.3.4") is an error).
 *
 * The compilable fragment (anything else is rejected with the policy id and the sub-expression — the
 * compiler never approximates): conditions built with &&, ||, !, if-then-else and true/false from
 *   context.dst_ip.isInRange(ip("P")), context.dst_ip == ip("host"), .isIpv4() .isIpv6() .isLoopback()
 *   .isMulticast(); context.dst_port compared (== != < <= > >=) with an integer; context.protocol ==/!=
 *   a string or `like` a pattern; resource == / in / is with Dome::Path or Dome::Network entities (sets
 *   of entities for `in`). Conditions on the principal and its data are decided by partial evaluation
 *   before compiling (they never reach the tables). Entity data for Dome::Path / Dome::Network entities
 *   is refused (their hierarchy is the kernel's).
 *
 * Thread safety: no global state; one call works on its own objects. */
#ifndef DOME_POLICY_COMPILE_COMPILE_H
#define DOME_POLICY_COMPILE_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/cedar.h"
#include "supervisor/common/error.h"
#include "policy/tables/tables.h"

/* Bounds on one compilation (untrusted policy sets); over them: -E2BIG naming the action. */
#define DOME_COMPILE_MAX_PREFIXES 4096    /* distinct address prefixes of one action */
#define DOME_COMPILE_MAX_PORT_CUTS 4096   /* distinct port-range boundaries of one action */
#define DOME_COMPILE_MAX_CELLS (1u << 22) /* prefixes x port intervals x protocols, one action */
#define DOME_COMPILE_MAX_PATHS 8192       /* distinct paths of one file action */
#define DOME_COMPILE_MAX_NODES 4096       /* predicate nodes of one residual policy */

/* The shipped baseline policy set (policy/baseline.cedar, embedded at build time): fs:read and fs:exec
 * under "/" (the image's tree), fs:read and fs:write under /workspace and /tmp, no network. Every policy
 * carries an @id("baseline-...") annotation. NUL-terminated. */
const char *dome_baseline_policy_text(void);

/* Parse the baseline followed by the operator's rules (their own text, `file` naming it in diagnostics;
 * operator_text may be NULL for the baseline alone) into one policy set. Policy ids: @id annotations,
 * else policy0, policy1, ... by position in the operator's file. A duplicate id (an operator policy
 * named like a baseline one) is an error. Returns 0 and *set_out, or -EINVAL/-E2BIG/-ENOMEM with err
 * "FILE:line:col: message". */
int dome_compile_load_policies(const char *operator_text, size_t length, const char *file,
                               cedar_policy_set **set_out, dome_error *err);

/* Parse an entities JSON file's text (as cedar_entities_parse_json, typed by the Dome schema when
 * `schema` is not NULL) and refuse Dome::Path and Dome::Network entities. text NULL: no entities. The
 * agent's entity need not be present (then it has no attributes and no parents). Returns 0 and *out,
 * or -EINVAL with err naming the file/entity. */
int dome_compile_load_entities(const char *text, size_t length, const char *file,
                               const struct cedar_schema *schema, cedar_entities **out, dome_error *err);

struct dome_compile_options {
  const char *agent;          /* the principal's entity id (Dome::Agent::"<agent>"); required */
  const char *policy_version; /* copied into the tables (may be NULL) */
  /* Optional: called for each policy whose evaluation errors for the agent and an action whatever the
   * request (Cedar skips it: it never applies there; e.g. `context.host` that no kernel request has), with
   * the engine's message. For `dome rules compile` warnings. */
  void (*warn)(void *context, const char *action, const char *policy_id, const char *message);
  void *warn_context;
};

/* Compile `set` for the agent into *tables (initialized here; free with dome_rule_tables_free, also on
 * failure). entities may be NULL. The result passes dome_rule_tables_validate.
 * Returns 0, or with err filled (tables emptied):
 *   -EINVAL  a residual the tables cannot express exactly:
 *            "net:connect: policy `p1`: cannot compile `context.dst_port % 2`: ..." (the action, the
 *            policy id and the residual sub-expression in Cedar syntax — unknowns print as
 *            unknown("dst_port") for context.dst_port), or a path/address literal the kernel never sees;
 *   -E2BIG   over a DOME_COMPILE_MAX_* bound or a table bound of kernel.h (more than
 *            DOME_NET_MAX_PORT_RANGES port ranges for one prefix);
 *   -ENOMEM. */
int dome_compile_tables(const cedar_policy_set *set, const cedar_entities *entities,
                        const struct dome_compile_options *options, struct dome_rule_tables *tables,
                        dome_error *err);

/* Everything `dome rules compile` and `dome run --rules` do: read the operator's rules file (NULL: the
 * baseline alone) and the entities file (NULL: none; typed by the shipped Dome schema), compile for
 * options->agent. Files over CEDAR_MAX_TEXT_BYTES are refused (-E2BIG). Errors as the functions above,
 * and -errno of open/read naming the file. */
int dome_compile_files(const char *rules_path, const char *entities_path,
                       const struct dome_compile_options *options, struct dome_rule_tables *tables,
                       dome_error *err);

/* True when some ALLOW network entry of connect/send reaches beyond loopback (127.0.0.0/8, ::1): the
 * jail then needs egress plumbing (supervisor/net). */
bool dome_compile_needs_egress(const struct dome_rule_tables *tables);

#endif
