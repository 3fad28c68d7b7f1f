/* dome in-kernel enforcement: the BPF loader, denial events, Landlock translation of decision tables.
 *
 * Data flow: the Cedar→kernel compiler (policy/compile) fills a `struct dome_rule_tables`
 * (policy/tables/tables.h) for one (agent, policy version); the supervisor installs it into the kernel once
 * (a *ruleset*, one per agent) with dome_kernel_install_tables() and attaches each jail's cgroup2 leaf to a
 * ruleset with dome_kernel_attach(). A later install into the same ruleset swaps the tables of every attached
 * jail atomically (one map update). Refusals come back as `struct dome_denial` events.
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
 * Threading: a struct dome_kernel is used from one thread (the supervisor's event loop).
 * Spec references: Cedar semantics (cedarpolicy.com "Authorization"), kernel Documentation/bpf/
 * (prog_cgroup_sockaddr, prog_lsm, ringbuf, map_lpm_trie), Documentation/userspace-api/landlock.rst. */
#ifndef DOME_KERNEL_KERNEL_H
#define DOME_KERNEL_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/dome.h"
#include "policy/tables/tables.h"
#include "supervisor/common/error.h"

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

/* Install (tables non-NULL) or remove (NULL) the shadow tables of an installed ruleset: a second set that
 * the programs decide every request under too, after the active tables, without enforcing it; each request
 * whose shadow decision differs from the active one is reported as a DOME_EVENT_SHADOW event (struct
 * dome_denial.kind) by the hooks that decide it — connect4/6 (or socket_connect at the full level, which
 * decides connect(2) first), sendmsg4/6, bind4/6 and, at the full level, file_open, file_receive and
 * bprm_check_security (file_permission, path_link and path_rename do not report; a file whose shadow
 * decision differs is never taken into the verdict cache, so each open of it is decided and reported). At
 * the reduced level the file entries are not installed (Landlock enforces files; it has no shadow): only
 * network differences are reported. Same install and switch as dome_kernel_install_tables (a fresh
 * generation, one map update, the previous shadow generation removed at the next change); a later
 * dome_kernel_install_tables keeps the shadow tables. Without shadow tables the programs pay nothing but
 * the test of the generation read with the active one. Returns 0, -ENOENT (ruleset not installed),
 * -EINVAL, -E2BIG, -errno of a map update, as dome_kernel_install_tables. */
int dome_kernel_install_shadow_tables(struct dome_kernel *kernel, uint32_t ruleset,
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
 * leaf exists and before the jailed program runs — the jail's on_cgroup_ready hook), or take the links
 * dome_kernel_prelink made for this cgroup id. The ruleset must be installed. Returns 0, -EINVAL, -ENOENT
 * (ruleset not installed), -EEXIST (cgroup already attached), -errno of BPF_LINK_CREATE. */
int dome_kernel_attach(struct dome_kernel *kernel, const struct dome_kernel_jail *jail,
                       struct dome_kernel_attachment **attachment_out, dome_error *err);

/* Detach the jail's programs and remove it from the jail map. NULL is accepted. */
void dome_kernel_detach(struct dome_kernel *kernel, struct dome_kernel_attachment *attachment);

/* Attach the cgroup programs to a leaf ahead of its jail's registration (a prepared jail, before its
 * call exists), so that dome_kernel_attach of the same cgroup id later only writes the jail-map slot
 * instead of making DOME_KERNEL_CGROUP_PROGRAMS links (BPF_LINK_CREATE) on the call's path. Until then the
 * leaf has no slot, and the programs refuse what they guard as they do for any cgroup without one: every
 * connect, sendmsg and bind, and every inet socket (sock_create), so nothing in the leaf can use the
 * network before its agent's rules are there. `cgroup_fd` is borrowed (as in struct dome_kernel_jail).
 * Returns 0, -EINVAL (no leaf), -EEXIST (the cgroup is attached or prelinked already), -ENOMEM, or
 * -errno of BPF_LINK_CREATE (nothing is left attached then). */
int dome_kernel_prelink(struct dome_kernel *kernel, int cgroup_fd, uint64_t cgroup_id, dome_error *err);

/* Destroy the links dome_kernel_prelink made for `cgroup_id` that no dome_kernel_attach took (the prepared
 * jail was discarded, or its call ran in a fresh jail). A no-op when there are none. */
void dome_kernel_prelink_drop(struct dome_kernel *kernel, uint64_t cgroup_id);

/* How many leaves hold prelinked programs that no jail has taken yet (for tests and `dome doctor`). */
size_t dome_kernel_prelinked_count(const struct dome_kernel *kernel);

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

const char *dome_hook_name(enum dome_hook hook); /* "connect4", "file_open", ... */

/* What a hook's events carry (bpf/dome.h, enum dome_hook): a network hook an enum dome_net_action
 * (dome_denial.net_action), a file hook an enum dome_file_access (dome_denial.file_access), any other
 * hook (socket families, the egress quota, ptrace/kill targets, bpf commands) no Cedar action. */
enum dome_hook_kind {
  DOME_HOOK_KIND_OTHER = 0,
  DOME_HOOK_KIND_NETWORK = 1,
  DOME_HOOK_KIND_FILE = 2,
};
enum dome_hook_kind dome_hook_kind(enum dome_hook hook);

/* One event, as delivered to user space: a refusal (kind DOME_EVENT_DENIAL) or a shadow difference
 * (DOME_EVENT_SHADOW, see dome_kernel_install_shadow_tables). */
struct dome_denial {
  enum dome_event_kind kind;
  uint64_t time_ns;   /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
  uint64_t cgroup_id; /* the jail's cgroup leaf */
  uint32_t pid;       /* thread group id of the refused task */
  enum dome_hook hook;
  char object[DOME_PATH_MAX]; /* "203.0.113.7:443", "[::1]:80", "/etc/shadow", "family 17", "pid 42" */
  long entry;                 /* index of the deciding table entry (net or file table), -1 = default deny */
  const char *policy_id;      /* the determining Cedar policy id, or NULL (valid until the next poll) */
  enum dome_net_action net_action;   /* for network hooks */
  enum dome_file_access file_access; /* for file hooks */
  /* DOME_EVENT_SHADOW only: the active tables' decision (enforced; entry and policy_id above) and the
   * shadow tables' (shadow_entry, -1 = default deny, and shadow_policy_id, NULL for it). */
  bool allowed;
  bool shadow_allowed;
  long shadow_entry;
  const char *shadow_policy_id; /* valid until the next poll */
};

typedef void (*dome_denial_fn)(void *context, const struct dome_denial *denial);

/* Kernel denials an execution keeps as objects (dome_denial_to_json); later ones are only counted. */
#define DOME_KERNEL_DENIALS_KEPT 256

/* The JSON object of one denial, as results (`denials`) and `exec.denial` records carry it
 * (docs/simulate-replay.md, "Kernel-level accesses"): {"hook": dome_hook_name, "object": denial->object,
 * "action": "net:connect"|"net:bind"|"net:send" for a network hook, "fs:read"|"fs:write"|"fs:exec" for a
 * file hook, absent for the others, "pid": thread group id, "policy_id": the determining Cedar policy, absent
 * for the default deny, "offset_ms": milliseconds from start_ns (CLOCK_MONOTONIC ns, the jail's attachment)
 * to the refusal, 0 when earlier}. Returns a new reference, or NULL when out of memory. */
struct json_t;
struct json_t *dome_denial_to_json(const struct dome_denial *denial, uint64_t start_ns);

/* The JSON object of one shadow difference (kind DOME_EVENT_SHADOW), as `exec.shadow` records carry it
 * (docs/journal-format.md): {"hook", "object", "action", "pid", "offset_ms" as dome_denial_to_json,
 * "active": {"decision": "allow"|"deny", "determining": [the active tables' policy id] or []},
 * "shadow": {"decision": ..., "determining": [...]}} — the sides of authz.shadow. Returns a new reference,
 * or NULL when out of memory or the event is no shadow difference. */
struct json_t *dome_denial_shadow_to_json(const struct dome_denial *denial, uint64_t start_ns);

/* File descriptor that becomes readable when denials are pending (for epoll). */
int dome_kernel_denial_fd(const struct dome_kernel *kernel);

/* Deliver pending denials to fn, waiting up to timeout_ms (0 = do not wait, -1 = forever).
 * Returns the number delivered (>= 0) or -errno. */
int dome_kernel_poll_denials(struct dome_kernel *kernel, int timeout_ms, dome_denial_fn fn, void *context,
                             dome_error *err);

/* ---------------------------------------------------------------- Landlock (reduced level files) */

/* Translate the file tables into a Landlock ruleset (Documentation/userspace-api/landlock.rst, ABI >= 1,
 * using the best ABI the kernel offers): every ALLOW entry becomes a path-beneath rule granting the
 * access kind's rights (read: READ_FILE|READ_DIR; write: as jail_landlock_access, supervisor/jail/jail.h;
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

/* Number of DENY file entries that Landlock cannot express (inside or equal to an ALLOW subtree of the same
 * access, as dome_landlock_check_tables names the first): what a degraded run drops. */
unsigned dome_landlock_inexpressible_count(const struct dome_rule_tables *tables);

/* The jail's Landlock path rules (struct jail_path_rule, supervisor/jail/jail.h) for the file tables: one
 * rule per (path, exact) of the ALLOW entries, granting the union of their accesses, each optional (a path
 * missing in the jail is skipped); DENY entries are Landlock's default. The paths are copies owned by
 * *rules_out. Returns 0, -ENOMEM, -E2BIG (more than JAIL_MAX_PATH_RULES distinct paths). On error
 * *rules_out is empty. Release with dome_landlock_path_rules_free. */
struct jail_path_rule;
struct dome_landlock_path_rules {
  struct jail_path_rule *rules;
  size_t count;
  char **paths; /* owned, parallel to rules */
};
int dome_landlock_path_rules_from_tables(const struct dome_rule_tables *tables,
                                         struct dome_landlock_path_rules *rules_out, dome_error *err);
void dome_landlock_path_rules_free(struct dome_landlock_path_rules *rules); /* NULL accepted */

/* Add a path-beneath rule for `access` (DOME_FILE_* mask) to a ruleset. Returns 0 or -errno. */
int dome_landlock_add_path(int ruleset_fd, const char *path, unsigned access, dome_error *err);

/* In the jailed process: prctl(PR_SET_NO_NEW_PRIVS) then landlock_restrict_self(ruleset_fd).
 * Returns 0 or -errno. Async-signal-safe apart from err formatting. */
int dome_landlock_restrict_self(int ruleset_fd, dome_error *err);

#endif
