/* Structures shared by the BPF programs (bpf/dome.bpf.c) and their loader (supervisor/kernel/).
 * Plain fixed-size types only: the kernel side includes vmlinux.h first, user space gets <linux/types.h>
 * here.
 *
 * Maps (see dome.bpf.c):
 *   jails      array  slot -> struct dome_jail (open addressing on the cgroup id, see DOME_BPF_JAIL_SLOTS)
 *   rulesets   array  ruleset -> struct dome_ruleset (the active generation, 0: not installed; and the
 *                     shadow generation, 0: no shadow tables; each switched by one map update)
 *   net_rules  LPM    struct dome_net_key -> struct dome_net_value
 *   file_rules LPM    struct dome_file_key -> struct dome_file_value   (paths as the jail sees them)
 *   inode_rules hash  struct dome_inode_key -> struct dome_file_value  (table paths by device+inode, and
 *                     every hard-linked file of a DENY subtree, EXACT, as its own path decides)
 *   events     ringbuf struct dome_event
 *
 * The enums below are the one definition of the values both sides exchange (hooks in events, actions and
 * access kinds in keys, decisions in values); user space includes this header for them. */
#ifndef DOME_BPF_DOME_H
#define DOME_BPF_DOME_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* Decision of a table entry (struct dome_port_range.decision, struct dome_file_value.decision). */
enum dome_decision {
  DOME_DECISION_DENY = 0,
  DOME_DECISION_ALLOW = 1,
};

/* Kernel-level network actions of the Dome schema (struct dome_net_key.action, struct dome_event.action of
 * the network hooks). */
enum dome_net_action {
  DOME_NET_CONNECT = 0, /* net:connect — connect(2) of TCP and UDP sockets */
  DOME_NET_BIND = 1,    /* net:bind — bind(2) */
  DOME_NET_SEND = 2,    /* net:send — sendto/sendmsg(2) with a destination on UDP sockets */
};
#define DOME_NET_ACTION_COUNT 3

/* Kernel-level file actions of the Dome schema (struct dome_file_key.access, struct dome_event.action of
 * the file hooks); also used as bits in masks. */
enum dome_file_access {
  DOME_FILE_READ = 1,  /* fs:read */
  DOME_FILE_WRITE = 2, /* fs:write */
  DOME_FILE_EXEC = 4,  /* fs:exec */
};

/* The program that refused (struct dome_event.hook). Network hooks (an enum dome_net_action in the event):
 * CONNECT4 .. BIND6 and SOCKET_CONNECT; file hooks (an enum dome_file_access): FILE_OPEN, FILE_RECEIVE,
 * BPRM_CHECK, FILE_PERMISSION, PATH_LINK, PATH_RENAME; the others carry no Cedar action (SOCK_CREATE and
 * SOCKET_CREATE a socket family, EGRESS the byte quota, PTRACE and TASK_KILL a target pid, BPF a command). */
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
#define DOME_HOOK_LAST DOME_HOOK_PATH_RENAME

/* What an event reports (struct dome_event.kind). */
enum dome_event_kind {
  DOME_EVENT_DENIAL = 0, /* the active tables refused (the request failed) */
  DOME_EVENT_SHADOW = 1, /* the shadow tables would decide otherwise than the active ones, which decided */
};

#define DOME_BPF_PORT_RANGES 16
#define DOME_BPF_PATH_BYTES 248 /* file key path bytes (LPM data max is 256, minus the 8-byte header) */
#define DOME_BPF_EVENT_PATH 256
#define DOME_BPF_NO_ENTRY 0xffffffffu
#define DOME_BPF_MAX_JAILS 4096
/* The jails map is an ARRAY used as an open-addressing table: a cgroup id lives in one of the slots
 * (id + i) % DOME_BPF_JAIL_SLOTS, i < DOME_BPF_JAIL_PROBES, and a chain ends at an empty slot
 * (cgroup_id 0). An array lookup is inlined by the verifier: a task outside every jail pays a few loads
 * (usually one slot, empty) instead of a hash computation. Removed jails leave DOME_BPF_JAIL_TOMBSTONE
 * (or an empty slot when the chain ends right after). Cgroup ids are never 0 or UINT64_MAX. */
#define DOME_BPF_JAIL_SLOTS 16384 /* power of two, at least 2 * DOME_BPF_MAX_JAILS */
#define DOME_BPF_JAIL_PROBES 4
#define DOME_BPF_JAIL_TOMBSTONE 0xffffffffffffffffULL
#define DOME_BPF_INODE_ENTRIES 65536 /* inode_rules: table paths + hard-linked files of deny subtrees */
/* file_rules pseudo-access of the "deny beneath" markers: EXACT key "/a\0" for every proper ancestor /a of
 * a DENY entry's path, so path_rename can refuse moving a directory that carries a deny entry along. */
#define DOME_BPF_ACCESS_DENY_BENEATH 8

/* Jail flags. */
#define DOME_JAIL_ALLOW_RAW 1u      /* SOCK_RAW / SOCK_PACKET permitted */
#define DOME_JAIL_QUOTA_REPORTED 2u /* the egress-quota denial was already reported */

/* rulesets map value. A program reads both generations with one lookup; without shadow tables
 * (shadow_generation 0) nothing else is looked up. The two words may be switched by separate updates: a
 * program may pair the new active generation with the old shadow one for one request, which only affects
 * what is reported, never what is enforced. */
struct dome_ruleset {
  __u32 generation;        /* active tables: they decide (0: not installed) */
  __u32 shadow_generation; /* shadow tables: only compared and reported (0: none) */
};

struct dome_jail {
  __u64 cgroup_id; /* 0: empty slot, DOME_BPF_JAIL_TOMBSTONE: removed */
  __u32 ruleset;
  __u32 flags;
  __u64 families;     /* 1 << AF_* permitted by sock_create */
  __u64 egress_quota; /* bytes; 0 = unlimited */
  __u64 egress_bytes; /* counted by cgroup_skb/egress (atomic add) */
};

/* LPM key: prefixlen counts bits from `generation` on; the first 64 bits (generation, action, protocol,
 * family, pad) are always part of the prefix, so prefixlen = 64 + address prefix length. */
struct dome_net_key {
  __u32 prefixlen;
  __u32 generation;
  __u8 action;
  __u8 protocol;
  __u8 family; /* 4 or 6 */
  __u8 pad;
  __u8 address[16];
};

struct dome_port_range {
  __u16 first;
  __u16 last;
  __u32 entry; /* index in the network table, or DOME_BPF_NO_ENTRY */
  __u8 decision;
  __u8 pad[3];
};

struct dome_net_value {
  __u32 count;
  struct dome_port_range ranges[DOME_BPF_PORT_RANGES];
};

/* LPM key over path bytes: prefixlen = 64 + 8 * (bytes of path that form the prefix).
 * SUBTREE "/x" is stored twice: "/x/" (prefix, everything beneath) and "/x\0" (the directory itself);
 * EXACT "/x/y" as "/x/y\0". The lookup key is the path followed by NUL with the maximum prefixlen, so
 * the longest match is the most specific entry; EXACT "/x" replaces SUBTREE's "/x\0" (exact wins). */
struct dome_file_key {
  __u32 prefixlen;
  __u32 generation;
  __u8 access; /* DOME_FILE_READ/WRITE/EXEC */
  __u8 pad[3];
  char path[DOME_BPF_PATH_BYTES];
};

struct dome_file_value {
  __u32 entry;
  __u8 decision;
  __u8 pad[3];
};

struct dome_inode_key {
  __u32 generation;
  __u8 access;
  __u8 subtree; /* 0: EXACT entry (the file itself), 1: SUBTREE entry (the inode and everything beneath) */
  __u8 pad[2];
  __u64 device; /* super_block s_dev (kernel encoding) */
  __u64 inode;
};

struct dome_event {
  __u64 time_ns;
  __u64 cgroup_id;
  __u32 pid;
  __u32 hook; /* enum dome_hook */
  __u32 entry;
  __u32 generation;
  __u8 action; /* net action or file access */
  __u8 family; /* 4, 6, or 0 */
  __u16 port;  /* host order */
  __u8 address[16];
  __u32 extra;   /* family for sock_create, target pid for ptrace/kill, bpf cmd, protocol for network hooks */
  __u8 kind;     /* enum dome_event_kind */
  __u8 decision; /* DOME_EVENT_SHADOW: the active tables' enum dome_decision (entry, generation) */
  __u8 shadow_decision; /* DOME_EVENT_SHADOW: the shadow tables' (shadow_entry, shadow_generation) */
  __u8 pad;
  __u32 shadow_entry; /* DOME_EVENT_SHADOW: index in the shadow tables, or DOME_BPF_NO_ENTRY */
  __u32 shadow_generation;
  char path[DOME_BPF_EVENT_PATH];
};

#endif
