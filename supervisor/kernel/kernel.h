/* dome in-kernel enforcement: decision tables, the BPF loader, denial events, Landlock translation.
 *
 * Data flow: the Cedar→kernel compiler (policy/) fills a `struct dome_rule_tables` for one
 * (agent, policy version); the supervisor installs it into the kernel once (a *ruleset*, one per
 * agent) with dome_kernel_install_tables() and attaches each jail's cgroup2 leaf to a ruleset with
 * dome_kernel_attach(). A later install into the same ruleset swaps the tables of every attached jail
 * atomically (one map update). Refusals come back as `struct dome_denial` events.
 *
 * Enforcement levels (dome_kernel_level()):
 *   - DOME_LEVEL_FULL: BPF-LSM programs (file_open, file_receive, file_permission, bprm_check_security,
 * path_link, path_rename, socket_create, socket_connect, ptrace_access_check, task_kill, bpf, bpf_map,
 * bpf_prog) acting only for cgroups present in the jail map, plus the cgroup programs below; six more global
 * hooks (inode_rename, sb_mount, sb_umount, move_mount, sb_pivotroot, path_chroot) only invalidate the
 * file-verdict cache (docs/kernel-enforcement.md).
 *   - DOME_LEVEL_REDUCED: no BPF-LSM (the kernel refuses it, or `lsm=` lacks bpf). The network is
 *     enforced by cgroup programs attached to the jail's leaf (connect4/6, sendmsg4/6, bind4/6,
 *     sock_create, cgroup_skb egress byte quota); file tables by Landlock (dome_landlock_*), which
 *     cannot express a deny inside an allowed subtree: such tables are refused unless the operator
 *     allows degradation.
 * Nothing unscoped is ever attached on a host at the reduced level.
 *
 * ---- Decision-table semantics (the compiler's contract) ----
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
 * Threading: a struct dome_kernel is used from one thread (the supervisor's event loop).
 * Spec references: Cedar semantics (cedarpolicy.com "Authorization"), kernel Documentation/bpf/
 * (prog_cgroup_sockaddr, prog_lsm, ringbuf, map_lpm_trie), Documentation/userspace-api/landlock.rst. */
#ifndef DOME_KERNEL_KERNEL_H
#define DOME_KERNEL_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

/* ---------------------------------------------------------------- decision tables */

enum dome_decision {
  DOME_DECISION_DENY = 0,
  DOME_DECISION_ALLOW = 1,
};

/* Kernel-level network actions of the Dome schema. */
enum dome_net_action {
  DOME_NET_CONNECT = 0, /* net:connect — connect(2) of TCP and UDP sockets */
  DOME_NET_BIND = 1,    /* net:bind — bind(2) */
  DOME_NET_SEND = 2,    /* net:send — sendto/sendmsg(2) with a destination on UDP sockets */
};
#define DOME_NET_ACTION_COUNT 3

/* context.protocol values the kernel can see; the numbers are IPPROTO_*. */
enum dome_net_protocol {
  DOME_PROTOCOL_TCP = 6,  /* "tcp" */
  DOME_PROTOCOL_UDP = 17, /* "udp" */
};

/* Kernel-level file actions of the Dome schema; also used as bits in masks. */
enum dome_file_access {
  DOME_FILE_READ = 1,  /* fs:read */
  DOME_FILE_WRITE = 2, /* fs:write */
  DOME_FILE_EXEC = 4,  /* fs:exec */
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

/* ---------------------------------------------------------------- loader */

enum dome_enforcement_level {
  DOME_LEVEL_NONE = 0,    /* not even cgroup BPF (no cgroup2 or no BPF) */
  DOME_LEVEL_REDUCED = 1, /* cgroup BPF for the network + Landlock for files */
  DOME_LEVEL_FULL = 2,    /* BPF-LSM + cgroup BPF (+ Landlock and seccomp applied by the jail) */
};
const char *dome_enforcement_level_name(enum dome_enforcement_level level); /* "none", "reduced", "full" */

struct dome_kernel_options {
  /* Highest level to try. DOME_LEVEL_FULL loads the BPF-LSM programs and fails if the kernel refuses them;
   * callers on a host without BPF-LSM (see dome_kernel_probe_level) pass DOME_LEVEL_REDUCED. */
  enum dome_enforcement_level level;
};

/* Probe what this kernel can do WITHOUT loading anything unscoped: reads /sys/kernel/security/lsm for
 * "bpf" and checks a cgroup2 mount and /sys/kernel/btf/vmlinux. Never fails; returns the level. */
enum dome_enforcement_level dome_kernel_probe_level(void);

struct dome_kernel; /* loaded programs and maps; one per supervisor process */

/* Load the BPF objects (maps; cgroup programs; at DOME_LEVEL_FULL also the LSM programs, attached
 * globally but acting only for cgroup ids in the jail map). Needs CAP_BPF/CAP_SYS_ADMIN.
 * Returns 0, or -errno (-EPERM when the kernel refuses a program, -ENOTSUP for DOME_LEVEL_NONE). */
int dome_kernel_open(struct dome_kernel **kernel_out, const struct dome_kernel_options *options,
                     dome_error *err);

/* Detach every jail, destroy links, programs and maps. NULL is accepted. */
void dome_kernel_close(struct dome_kernel *kernel);

enum dome_enforcement_level dome_kernel_level(const struct dome_kernel *kernel);

/* Install tables as ruleset `ruleset` (an agent slot, 0..DOME_KERNEL_MAX_RULESETS-1): copy the network
 * entries (and, at the full level, the file entries, resolved to device+inode now; missing paths are
 * skipped) into the maps under a fresh table generation, then switch the ruleset to it with one map
 * update, so each attached jail sees either the old or the new tables, never a mix; the generation before
 * the old one is then removed (the old one stays until the next install, see dome_kernel_rule_entries). The
 * tables are validated first; the kernel object keeps a copy for naming denials. File paths are matched as
 * the jailed task sees them (bpf_d_path), and table paths are also resolved here to device+inode in the
 * caller's mount namespace, as is every file with several names beneath a DENY subtree (at most 262,144
 * files scanned; catches hard links and bind-mount aliases); paths are limited to DOME_KERNEL_PATH_MAX bytes
 * at the full level. Returns 0, -EINVAL (invalid tables or ruleset), -E2BIG (path too long, more than 16 port
 * ranges for a prefix, a DENY subtree too large to scan), -errno of a map update. */
#define DOME_KERNEL_MAX_RULESETS 256
#define DOME_KERNEL_PATH_MAX 240
int dome_kernel_install_tables(struct dome_kernel *kernel, uint32_t ruleset,
                               const struct dome_rule_tables *tables, dome_error *err);

/* Entries currently in the rule maps (all rulesets and generations): counts[0] network groups, counts[1]
 * file path keys, counts[2] device+inode keys. The generation before the current one of each ruleset is
 * kept until the next install (a program that read the old generation just before the switch still finds
 * its entries), older ones are removed. Returns 0 or -errno. */
int dome_kernel_rule_entries(const struct dome_kernel *kernel, size_t counts[3]);

/* Run-time statistics of the loaded programs (for benchmarks and `dome doctor`): calls fn once per loaded
 * program with its name, the total ns spent in it and the number of runs since load. The kernel only counts
 * while statistics are enabled (dome_kernel_enable_stats, or sysctl kernel.bpf_stats_enabled=1).
 * Returns 0 or -errno. */
int dome_kernel_program_stats(const struct dome_kernel *kernel,
                              void (*fn)(void *context, const char *program, uint64_t run_ns, uint64_t runs),
                              void *context);

/* Enable BPF run-time statistics while the returned fd stays open (BPF_ENABLE_STATS). Returns fd or -errno.
 */
int dome_kernel_enable_stats(void);

/* For benchmarks: detach (suspended = true) or re-attach the global LSM programs, the object staying loaded,
 * so that "no dome program runs at all" and "every program attached" alternate without reloading. A no-op
 * below the full level. Returns 0 or -errno of an attach. */
int dome_kernel_set_lsm_suspended(struct dome_kernel *kernel, bool suspended);

/* Socket families a jail may create (sock_create); bits are 1 << AF_*. */
#define DOME_FAMILY_BIT(af) (1ULL << (af))
#define DOME_FAMILIES_DEFAULT \
  (DOME_FAMILY_BIT(1 /*AF_UNIX*/) | DOME_FAMILY_BIT(2 /*AF_INET*/) | DOME_FAMILY_BIT(10 /*AF_INET6*/))

struct dome_kernel_jail {
  int cgroup_fd;               /* O_RDONLY|O_DIRECTORY fd of the jail's cgroup2 leaf (borrowed) */
  uint64_t cgroup_id;          /* its id (name_to_handle_at / the inode number of the directory) */
  uint32_t ruleset;            /* installed ruleset (agent) whose tables apply */
  uint64_t families;           /* DOME_FAMILY_BIT mask; 0 means DOME_FAMILIES_DEFAULT */
  bool allow_raw_sockets;      /* SOCK_RAW / SOCK_PACKET; false refuses them */
  uint64_t egress_quota_bytes; /* bytes of IP egress (cgroup_skb) before packets drop; 0 = unlimited */
};

struct dome_kernel_attachment; /* the links of one jail */

/* Register the jail in the jail map and attach the cgroup programs to its leaf (scoped; call after the
 * leaf exists and before the jailed program runs — the jail's on_cgroup_ready hook). The ruleset must
 * be installed. Returns 0, -EINVAL, -ENOENT (ruleset not installed), -EEXIST (cgroup already
 * attached), -errno of BPF_LINK_CREATE. */
int dome_kernel_attach(struct dome_kernel *kernel, const struct dome_kernel_jail *jail,
                       struct dome_kernel_attachment **attachment_out, dome_error *err);

/* Detach the jail's programs and remove it from the jail map. NULL is accepted. */
void dome_kernel_detach(struct dome_kernel *kernel, struct dome_kernel_attachment *attachment);

/* Egress bytes counted for the jail so far (cgroup_skb). Returns >= 0 or -ENOENT. */
int64_t dome_kernel_egress_bytes(struct dome_kernel *kernel, const struct dome_kernel_attachment *attachment);

/* Adapter for the jail's `on_cgroup_ready` hook (supervisor/jail/jail.h): set
 *   config.on_cgroup_ready = dome_kernel_on_cgroup_ready; config.hook_context = &hook;
 * with `hook` filled below; on success hook.attachment holds the jail's links (dome_kernel_detach after the
 * run). The attachment is made before the jailed program starts. */
struct jail_cgroup;
struct dome_kernel_jail_hook {
  struct dome_kernel *kernel;
  uint32_t ruleset;
  uint64_t families;
  bool allow_raw_sockets;
  uint64_t egress_quota_bytes;
  struct dome_kernel_attachment *attachment; /* out */
};
int dome_kernel_on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err);

/* ---------------------------------------------------------------- denial events */

enum dome_hook {
  DOME_HOOK_CONNECT4 = 1,
  DOME_HOOK_CONNECT6 = 2,
  DOME_HOOK_SENDMSG4 = 3,
  DOME_HOOK_SENDMSG6 = 4,
  DOME_HOOK_BIND4 = 5,
  DOME_HOOK_BIND6 = 6,
  DOME_HOOK_SOCK_CREATE = 7,
  DOME_HOOK_EGRESS = 8,
  DOME_HOOK_FILE_OPEN = 9,
  DOME_HOOK_FILE_RECEIVE = 10,
  DOME_HOOK_BPRM_CHECK = 11,
  DOME_HOOK_SOCKET_CONNECT = 12,
  DOME_HOOK_PTRACE = 13,
  DOME_HOOK_TASK_KILL = 14,
  DOME_HOOK_BPF = 15,
  DOME_HOOK_FILE_PERMISSION = 16,
  DOME_HOOK_SOCKET_CREATE = 17,
  DOME_HOOK_PATH_LINK = 18,   /* link(2) that would widen access to a file (object: the existing name) */
  DOME_HOOK_PATH_RENAME = 19, /* rename(2) that would widen access (object: the old name) */
};
const char *dome_hook_name(enum dome_hook hook); /* "connect4", "file_open", ... */

/* One refusal, as delivered to user space. */
struct dome_denial {
  uint64_t time_ns;   /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
  uint64_t cgroup_id; /* the jail's cgroup leaf */
  uint32_t pid;       /* thread group id of the refused task */
  enum dome_hook hook;
  char object[DOME_PATH_MAX]; /* "203.0.113.7:443", "[::1]:80", "/etc/shadow", "family 17", "pid 42" */
  long entry;                 /* index of the deciding table entry (net or file table), -1 = default deny */
  const char *policy_id;      /* the determining Cedar policy id, or NULL (valid until the next poll) */
  enum dome_net_action net_action;   /* for network hooks */
  enum dome_file_access file_access; /* for file hooks */
};

typedef void (*dome_denial_fn)(void *context, const struct dome_denial *denial);

/* File descriptor that becomes readable when denials are pending (for epoll). */
int dome_kernel_denial_fd(const struct dome_kernel *kernel);

/* Deliver pending denials to fn, waiting up to timeout_ms (0 = do not wait, -1 = forever).
 * Returns the number delivered (>= 0) or -errno. */
int dome_kernel_poll_denials(struct dome_kernel *kernel, int timeout_ms, dome_denial_fn fn, void *context,
                             dome_error *err);

/* ---------------------------------------------------------------- Landlock (reduced level files) */

/* Translate the file tables into a Landlock ruleset (Documentation/userspace-api/landlock.rst, ABI >= 1,
 * using the best ABI the kernel offers): every ALLOW entry becomes a path-beneath rule granting the
 * access kind's rights (read: READ_FILE|READ_DIR; write: WRITE_FILE|REMOVE_*|MAKE_*|REFER|TRUNCATE;
 * exec: EXECUTE), DENY entries are the default. A DENY entry that lies inside (or equals) an ALLOW
 * subtree of the same access cannot be expressed: the function fails with -EOPNOTSUPP naming the entry
 * and its policy, unless allow_degraded, in which case the deny is dropped and *degraded_out counts the
 * dropped entries (the caller records it). Allowed paths that do not exist are skipped.
 * *ruleset_fd_out: a Landlock ruleset fd for dome_landlock_restrict_self() (in the jailed child), or
 * extra rules via dome_landlock_add_path(). Returns 0, -EOPNOTSUPP (inexpressible / no Landlock), -errno. */
int dome_landlock_ruleset_from_tables(const struct dome_rule_tables *tables, bool allow_degraded,
                                      int *ruleset_fd_out, unsigned *degraded_out, dome_error *err);

/* Check only: 0 when every file entry is expressible with Landlock, else -EOPNOTSUPP naming the first
 * entry that is not ("file entry 2 (deny read /workspace/secret, policy forbid-secret) lies inside
 * allowed subtree /workspace: Landlock cannot express it; pass --allow-degraded to run without it"). */
int dome_landlock_check_tables(const struct dome_rule_tables *tables, dome_error *err);

/* Add a path-beneath rule for `access` (DOME_FILE_* mask) to a ruleset. Returns 0 or -errno. */
int dome_landlock_add_path(int ruleset_fd, const char *path, unsigned access, dome_error *err);

/* In the jailed process: prctl(PR_SET_NO_NEW_PRIVS) then landlock_restrict_self(ruleset_fd).
 * Returns 0 or -errno. Async-signal-safe apart from err formatting. */
int dome_landlock_restrict_self(int ruleset_fd, dome_error *err);

/* The Landlock ABI version of the running kernel (0 when unavailable). */
int dome_landlock_abi(void);

#endif
