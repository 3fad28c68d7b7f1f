/* Decision tables: what the Cedar→kernel compiler (policy/compile) produces for one (agent, policy
 * version) and what the BPF loader (supervisor/kernel), the egress plan (supervisor/net) and the Landlock
 * translation consume. Plain data with its checks, lookups and JSON form; no kernel access. The action,
 * access and decision values are those of the BPF programs (bpf/dome.h).
 *
 * Semantics (the compiler's contract):
 * Cedar's rule: any matching forbid denies, else any matching permit allows, else deny. The compiler
 * flattens a policy set into entries such that ONE most-specific lookup gives Cedar's answer:
 *
 * Network (actions net:connect, net:bind, net:send; context dst_ip, dst_port, protocol):
 *   For a request (action, protocol, family, address, port), take the entries with the same action,
 *   protocol and family whose prefix contains the address; among them keep those with the LONGEST
 *   prefix length (this is what the kernel's LPM trie returns); the entry of that group whose port range
 *   holds the port decides. If no prefix contains the address, or the longest group has no range holding
 *   the port, the answer is deny with no policy (DOME_NO_POLICY). So an entry for a longer prefix must
 *   repeat, for its ports, the decisions inherited from shorter prefixes ("flattened"). Entries of one
 *   group (same action, protocol, family, prefix, prefix length) must not overlap in ports
 *   (dome_rule_tables_validate() checks it). A request to an IPv4-mapped IPv6 address (::ffff:a.b.c.d)
 *   decides as the IPv4 request to a.b.c.d: the kernel side converts before the lookup, so the compiler
 *   emits no IPv6 entries for ::ffff:0:0/96.
 * Files (actions fs:read, fs:write, fs:exec; resource Dome::Path):
 *   For a request (access, path), the entries with that access that match the path — EXACT: path equal;
 *   SUBTREE: path equal or beneath (`resource in Dome::Path::"/x"`) — are ordered by specificity: longer
 *   entry path first, and at equal path EXACT before SUBTREE. The first one decides; none → deny.
 *   Paths are absolute, normalized (no "//", no "." or ".." components, no trailing "/" except "/").
 *
 * Spec references: Cedar semantics (cedarpolicy.com "Authorization"). */
#ifndef DOME_POLICY_TABLES_TABLES_H
#define DOME_POLICY_TABLES_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/dome.h"
#include "supervisor/common/error.h"

/* context.protocol values the kernel can see; the numbers are IPPROTO_*. */
enum dome_net_protocol {
  DOME_PROTOCOL_TCP = 6,  /* "tcp" */
  DOME_PROTOCOL_UDP = 17, /* "udp" */
};

enum dome_file_match {
  DOME_MATCH_EXACT = 0,   /* resource == Dome::Path::"/x/y" */
  DOME_MATCH_SUBTREE = 1, /* resource in Dome::Path::"/x" (the path itself and everything beneath) */
};

/* policy_index of an entry no policy decided (the default deny, materialized by flattening). */
#define DOME_NO_POLICY UINT32_MAX

/* Bounds (checked by dome_rule_tables_validate and the JSON reader). */
#define DOME_PATH_MAX 4096          /* bytes of a file entry's path, with the NUL */
#define DOME_NET_MAX_ENTRIES 65536  /* network entries in one table set */
#define DOME_FILE_MAX_ENTRIES 16384 /* file entries in one table set */
#define DOME_NET_MAX_PORT_RANGES 16 /* entries sharing one (action, protocol, family, prefix) */
#define DOME_POLICY_MAX 65536       /* policy ids in the string table */

/* One flattened network entry. */
struct dome_net_entry {
  uint8_t action;      /* enum dome_net_action */
  uint8_t protocol;    /* enum dome_net_protocol */
  uint8_t family;      /* AF_INET or AF_INET6 */
  uint8_t prefix_len;  /* 0..32 (AF_INET) or 0..128 (AF_INET6); address bits beyond it are zero */
  uint8_t address[16]; /* network byte order; AF_INET uses address[0..3] and zeroes the rest */
  uint16_t port_first; /* inclusive, host byte order, 0..65535 */
  uint16_t port_last;  /* inclusive, >= port_first */
  uint8_t decision;    /* enum dome_decision */
  uint32_t
      policy_index; /* index in dome_rule_tables.policy_ids of the determining policy, or DOME_NO_POLICY */
};

/* One flattened file entry. */
struct dome_file_entry {
  char *path;            /* absolute, normalized; owned by the table set (malloc'd) */
  uint8_t match;         /* enum dome_file_match */
  uint8_t access;        /* one enum dome_file_access value */
  uint8_t decision;      /* enum dome_decision */
  uint32_t policy_index; /* as in dome_net_entry */
};

/* Decision tables of one (agent, policy version). Own every pointer; release with
 * dome_rule_tables_free(). Zero-initialize (or dome_rule_tables_init) before use. */
struct dome_rule_tables {
  char *agent;          /* the principal's entity id, e.g. "analyst" (may be NULL) */
  char *policy_version; /* opaque version of the policy set, e.g. a hash (may be NULL) */
  char **policy_ids;    /* string table of Cedar policy ids (the determining policies) */
  size_t policy_count;
  struct dome_net_entry *net;
  size_t net_count;
  struct dome_file_entry *files;
  size_t file_count;
};

void dome_rule_tables_init(struct dome_rule_tables *tables);
void dome_rule_tables_free(struct dome_rule_tables *tables);

/* Intern a Cedar policy id; *index_out receives its index (an existing one when already present).
 * Returns 0, -ENOMEM, -E2BIG (more than DOME_POLICY_MAX ids). */
int dome_rule_tables_add_policy(struct dome_rule_tables *tables, const char *policy_id, uint32_t *index_out,
                                dome_error *err);

/* Append a copy of *entry. Returns 0, -ENOMEM, -E2BIG (bound exceeded). Not validated here. */
int dome_rule_tables_add_net(struct dome_rule_tables *tables, const struct dome_net_entry *entry,
                             dome_error *err);

/* Append a file entry; path is copied. Returns 0, -ENOMEM, -E2BIG. Not validated here. */
int dome_rule_tables_add_file(struct dome_rule_tables *tables, const char *path, enum dome_file_match match,
                              enum dome_file_access access, enum dome_decision decision,
                              uint32_t policy_index, dome_error *err);

/* Check the table set against the contract above: field ranges, host bits beyond the prefix zero,
 * ports ordered, no overlap inside a network group, at most DOME_NET_MAX_PORT_RANGES entries per group,
 * normalized absolute paths, no duplicate (access, match, path), policy indices in range.
 * Returns 0 or -EINVAL with err naming the entry ("network entry 3: ...", "file entry 1: ..."). */
int dome_rule_tables_validate(const struct dome_rule_tables *tables, dome_error *err);

/* Reference lookups (user space, same semantics as the kernel programs). Return enum dome_decision and
 * set *entry_out to the index of the deciding entry, or -1 when none decided (default deny).
 * address: 4 bytes (AF_INET) or 16 bytes (AF_INET6) in network order; an IPv4-mapped IPv6 address
 * decides as IPv4. Used by the compiler's property test and by tests. */
enum dome_decision dome_rule_tables_lookup_net(const struct dome_rule_tables *tables,
                                               enum dome_net_action action, enum dome_net_protocol protocol,
                                               int family, const uint8_t *address, uint16_t port,
                                               long *entry_out);
enum dome_decision dome_rule_tables_lookup_file(const struct dome_rule_tables *tables,
                                                enum dome_file_access access, const char *path,
                                                long *entry_out);

/* JSON form (for `dome rules compile --json` and tests):
 * {"agent": "a", "policy_version": "v", "policies": ["id0", "id1"],
 *  "network": [{"action": "connect"|"bind"|"send", "protocol": "tcp"|"udp", "prefix": "10.0.0.0/8"|"::1/128",
 *               "ports": [first, last], "decision": "allow"|"deny", "policy": "id0"|null}],
 *  "files": [{"path": "/workspace", "match": "exact"|"subtree", "access": "read"|"write"|"exec",
 *             "decision": "allow"|"deny", "policy": "id1"|null}]}
 * "policy" names an id of "policies" (written as the id, not the index). Output is validated input. */

/* Serialize to a malloc'd NUL-terminated JSON text (compact unless pretty). Returns 0 or -ENOMEM. */
int dome_rule_tables_to_json(const struct dome_rule_tables *tables, bool pretty, char **json_out,
                             dome_error *err);

/* Parse and validate. On error returns -EINVAL with err naming the place ("line 3 column 5: ...",
 * "network[2].prefix: ..."), leaving *tables_out untouched. tables_out must be freed by the caller. */
int dome_rule_tables_from_json(const char *json, size_t length, struct dome_rule_tables *tables_out,
                               dome_error *err);

/* Names used in JSON and human output ("connect", "tcp", "read", "subtree", "allow"). */
const char *dome_net_action_name(enum dome_net_action action);
const char *dome_net_protocol_name(enum dome_net_protocol protocol);
const char *dome_file_access_name(enum dome_file_access access);
const char *dome_file_match_name(enum dome_file_match match);
const char *dome_decision_name(enum dome_decision decision);

/* Human-readable listing (for `dome rules compile`): one line per entry, e.g.
 * "net:connect tcp 10.0.0.0/8 ports 443-443 allow  (policy p1)". Returns 0 or -ENOMEM. */
int dome_rule_tables_format(const struct dome_rule_tables *tables, char **text_out, dome_error *err);

#endif
