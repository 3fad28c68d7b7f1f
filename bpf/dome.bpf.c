// SPDX-License-Identifier: GPL-2.0
/* dome's in-kernel enforcement (CO-RE; see supervisor/kernel/kernel.h for the table semantics).
 *
 * Two groups of programs in one object:
 *   - cgroup programs (connect4/6, sendmsg4/6, bind4/6, sock_create, cgroup_skb egress): attached by the
 *     loader to each jail's cgroup2 leaf only, so they never see a process outside a jail. A process that
 *     reaches them without a jail-map entry (e.g. a sub-cgroup of the leaf) is refused (fail closed).
 *   - BPF-LSM programs: global by nature; each one starts with ONE jail-map lookup of the current task's
 *     cgroup id and allows everything else untouched. The loader never loads them unless asked for the
 *     full level (they are refused on hosts without `bpf` in lsm=).
 * Every refusal is reported through the `events` ring buffer. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/dome.h"

char LICENSE[] SEC("license") = "GPL";

#define EPERM 1
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_RAW 3
#define SOCK_PACKET 10
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
#define FMODE_EXEC 0x20

#define MAY_WRITE 0x2
#define MAY_READ 0x4
#define MAY_APPEND 0x8
#define RENAME_EXCHANGE 2
#define ENAMETOOLONG 36

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, DOME_BPF_JAIL_SLOTS);
  __type(key, __u32);
  __type(value, struct dome_jail);
} jails SEC(".maps");

/* The jail of a cgroup id, or NULL (dome.h: open addressing, at most DOME_BPF_JAIL_PROBES inlined array
 * loads; a task outside every jail usually stops at the first, empty, slot). */
static __always_inline struct dome_jail *jail_of(__u64 cgroup_id) {
  for (__u32 i = 0; i < DOME_BPF_JAIL_PROBES; i++) {
    __u32 slot = (__u32)(cgroup_id + i) & (DOME_BPF_JAIL_SLOTS - 1);
    struct dome_jail *jail = bpf_map_lookup_elem(&jails, &slot);
    if (!jail || jail->cgroup_id == 0) return NULL;
    if (jail->cgroup_id == cgroup_id) return jail;
  }
  return NULL;
}

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 256);
  __type(key, __u32);
  __type(value, struct dome_ruleset);
} rulesets SEC(".maps");

/* Set by the loader before load: the LSM socket_connect runs before the cgroup connect4/6 for every
 * connect(2) and reports its shadow differences, so the cgroup programs do not report them again. */
const volatile __u32 lsm_decides_connect = 0;

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, 65536);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct dome_net_key);
  __type(value, struct dome_net_value);
} net_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, 32768);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct dome_file_key);
  __type(value, struct dome_file_value);
} file_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, DOME_BPF_INODE_ENTRIES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct dome_inode_key);
  __type(value, struct dome_file_value);
} inode_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Events lost because the ring buffer was full (index 0). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} lost_events SEC(".maps");

/* Verdict cache (full level): per inode, the access bits found ALLOWED for one (jail, mount, table
 * generation, path epoch). It lets repeated opens of the same file skip bpf_d_path and the lookups. Sound
 * because (a) the storage dies with the inode (no reuse of a stale key), (b) only files with exactly one
 * name (i_nlink == 1) and directories are cached, and the vfsmount is part of the key, so a hard link or a
 * bind-mount alias never inherits another name's verdict, (c) every operation that can change the path of
 * an existing (dentry, mount) — rename, mount, umount, move_mount, pivot_root, chroot — bumps the global
 * path epoch, and (d) a rule change is a new generation. Denials are never cached (each one is reported). */
struct dome_verdict_cache {
  __u64 sequence; /* odd while a writer updates the entry (one writer: cmpxchg); readers retry as a miss */
  __u64 cgroup_id;
  __u64 mount;
  __u32 generation;
  __u32 epoch;
  __u32 allowed;           /* ACCESS_* bits (allowed by the shadow tables too, when there are some) */
  __u32 shadow_generation; /* 0: none */
};

struct {
  __uint(type, BPF_MAP_TYPE_INODE_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct dome_verdict_cache);
} verdicts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} path_epoch SEC(".maps");

/* Scratch space for a file lookup key (too large for the 512-byte stack with the rest) and the dentry
 * chain of build_path. `slack` lets build_path write at masked offsets (path + (off & 255), up to 255
 * bytes) that the verifier can bound without knowing off < 248. Two slots: path_link/path_rename compare
 * the old and the new name. */
#define CHAIN_DEPTH 32
struct file_scratch {
  struct dome_file_key key;
  char slack[272];
  __u64 chain[CHAIN_DEPTH];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct file_scratch);
} file_scratch SEC(".maps");

/* The active generation of the jail's ruleset (0: none, everything denied); *shadow the shadow one (0: no
 * shadow tables). One lookup for both. */
static __always_inline __u32 ruleset_generations(const struct dome_jail *jail, __u32 *shadow) {
  __u32 slot = jail->ruleset;
  struct dome_ruleset *ruleset = bpf_map_lookup_elem(&rulesets, &slot);
  *shadow = ruleset ? ruleset->shadow_generation : 0;
  return ruleset ? ruleset->generation : 0;
}

static __always_inline __u32 ruleset_generation(const struct dome_jail *jail) {
  __u32 shadow;
  return ruleset_generations(jail, &shadow);
}

static __always_inline struct dome_event *event_reserve(__u64 cgroup_id, __u32 hook, __u32 entry,
                                                        __u32 generation, __u32 pid) {
  struct dome_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    __u32 zero = 0;
    __u64 *lost = bpf_map_lookup_elem(&lost_events, &zero);
    if (lost) *lost += 1;
    return NULL;
  }
  event->time_ns = bpf_ktime_get_ns();
  event->cgroup_id = cgroup_id;
  event->pid = pid;
  event->hook = hook;
  event->entry = entry;
  event->generation = generation;
  event->action = 0;
  event->family = 0;
  event->port = 0;
  event->extra = 0;
  event->kind = DOME_EVENT_DENIAL;
  event->decision = DOME_DECISION_DENY;
  event->shadow_decision = DOME_DECISION_DENY;
  event->pad = 0;
  event->shadow_entry = DOME_BPF_NO_ENTRY;
  event->shadow_generation = 0;
  __builtin_memset(event->address, 0, sizeof(event->address));
  event->path[0] = 0;
  return event;
}

/* An event of the current task (cgroup_skb programs have no current task: they use event_reserve). */
#define event_begin(cgroup_id, hook, entry, generation) \
  event_reserve(cgroup_id, hook, entry, generation, bpf_get_current_pid_tgid() >> 32)

/* ---------------------------------------------------------------- network */

#include "bpf/net_decide.bpf.h"

static __always_inline void report_net(__u64 cgroup_id, __u32 hook, const struct net_request *request,
                                       __u32 entry, __u32 generation) {
  struct dome_event *event = event_begin(cgroup_id, hook, entry, generation);
  if (!event) return;
  event->action = request->action;
  event->family = request->family;
  event->port = request->port;
  __builtin_memcpy(event->address, request->address, 16);
  event->extra = request->protocol;
  bpf_ringbuf_submit(event, 0);
}

/* Shadow tables (shadow_generation != 0): decide the request again under them; when that differs from the
 * active decision (allowed, entry under generation), report it as a DOME_EVENT_SHADOW. Never changes the
 * outcome. */
static __always_inline void shadow_net(__u64 cgroup_id, __u32 hook, const struct net_request *request,
                                       int allowed, __u32 entry, __u32 generation, __u32 shadow_generation) {
  __u32 shadow_entry = DOME_BPF_NO_ENTRY;
  int shadow_allowed = net_decide(request, shadow_generation, &shadow_entry);
  if (shadow_allowed == allowed) return;
  struct dome_event *event = event_begin(cgroup_id, hook, entry, generation);
  if (!event) return;
  event->kind = DOME_EVENT_SHADOW;
  event->decision = allowed ? DOME_DECISION_ALLOW : DOME_DECISION_DENY;
  event->shadow_decision = shadow_allowed ? DOME_DECISION_ALLOW : DOME_DECISION_DENY;
  event->shadow_entry = shadow_entry;
  event->shadow_generation = shadow_generation;
  event->action = request->action;
  event->family = request->family;
  event->port = request->port;
  __builtin_memcpy(event->address, request->address, 16);
  event->extra = request->protocol;
  bpf_ringbuf_submit(event, 0);
}

/* Common body of the sock_addr programs. ip6 != 0 selects the IPv6 fields. */
static __always_inline int sock_addr_check(struct bpf_sock_addr *ctx, __u8 action, __u32 hook, int ip6) {
  __u64 cgroup_id = bpf_get_current_cgroup_id();
  struct dome_jail *jail = jail_of(cgroup_id);
  struct net_request request = {};
  request.action = action;
  request.protocol = ctx->protocol;
  request.port = bpf_ntohs((__u16)ctx->user_port);
  if (ip6) {
    request_from_ip6(&request, ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3]);
  } else {
    __u32 ip4 = ctx->user_ip4;
    request.family = 4;
    __builtin_memcpy(request.address, &ip4, 4);
  }
  __u32 shadow_generation = 0;
  __u32 generation = jail ? ruleset_generations(jail, &shadow_generation) : 0;
  __u32 entry = DOME_BPF_NO_ENTRY;
  int allowed = jail && net_decide(&request, generation, &entry);
  if (shadow_generation && !(action == DOME_NET_CONNECT && lsm_decides_connect))
    shadow_net(cgroup_id, hook, &request, allowed, entry, generation, shadow_generation);
  if (allowed) return 1;
  report_net(cgroup_id, hook, &request, entry, generation);
  return 0;
}

SEC("cgroup/connect4")
int dome_connect4(struct bpf_sock_addr *ctx) {
  return sock_addr_check(ctx, DOME_NET_CONNECT, DOME_HOOK_CONNECT4, 0);
}

SEC("cgroup/connect6")
int dome_connect6(struct bpf_sock_addr *ctx) {
  return sock_addr_check(ctx, DOME_NET_CONNECT, DOME_HOOK_CONNECT6, 1);
}

SEC("cgroup/sendmsg4")
int dome_sendmsg4(struct bpf_sock_addr *ctx) {
  return sock_addr_check(ctx, DOME_NET_SEND, DOME_HOOK_SENDMSG4, 0);
}

SEC("cgroup/sendmsg6")
int dome_sendmsg6(struct bpf_sock_addr *ctx) {
  return sock_addr_check(ctx, DOME_NET_SEND, DOME_HOOK_SENDMSG6, 1);
}

SEC("cgroup/bind4")
int dome_bind4(struct bpf_sock_addr *ctx) {
  return sock_addr_check(ctx, DOME_NET_BIND, DOME_HOOK_BIND4, 0);
}

SEC("cgroup/bind6")
int dome_bind6(struct bpf_sock_addr *ctx) {
  return sock_addr_check(ctx, DOME_NET_BIND, DOME_HOOK_BIND6, 1);
}

SEC("cgroup/sock_create")
int dome_sock_create(struct bpf_sock *ctx) {
  __u64 cgroup_id = bpf_get_current_cgroup_id();
  struct dome_jail *jail = jail_of(cgroup_id);
  __u32 family = ctx->family;
  __u32 type = ctx->type;
  if (jail && family < 64 && (jail->families & (1ULL << family))) {
    if ((type != SOCK_RAW && type != SOCK_PACKET) || (jail->flags & DOME_JAIL_ALLOW_RAW)) return 1;
  }
  struct dome_event *event = event_begin(cgroup_id, DOME_HOOK_SOCK_CREATE, DOME_BPF_NO_ENTRY, 0);
  if (event) {
    event->extra = family;
    event->port = type;
    bpf_ringbuf_submit(event, 0);
  }
  return 0;
}

/* Egress byte quota: count IP bytes leaving the jail's sockets; past the quota, drop (the sender sees
 * EPERM for datagrams, TCP stalls). Reported once per jail. */
SEC("cgroup_skb/egress")
int dome_egress(struct __sk_buff *skb) {
  __u64 cgroup_id = bpf_skb_cgroup_id(skb);
  struct dome_jail *jail = jail_of(cgroup_id);
  if (!jail) return 1; /* not a socket of this jail (e.g. a kernel reply); quotas only count jail traffic */
  __u64 used = __sync_fetch_and_add(&jail->egress_bytes, (__u64)skb->len) + skb->len;
  if (jail->egress_quota == 0 || used <= jail->egress_quota) return 1;
  if (!(jail->flags & DOME_JAIL_QUOTA_REPORTED)) {
    jail->flags |= DOME_JAIL_QUOTA_REPORTED; /* a race only duplicates the report */
    struct dome_event *event = event_reserve(cgroup_id, DOME_HOOK_EGRESS, DOME_BPF_NO_ENTRY, 0, 0);
    if (event) {
      event->extra = skb->len;
      bpf_ringbuf_submit(event, 0);
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- BPF-LSM (full level only) */

static __always_inline struct dome_jail *current_jail(__u64 *cgroup_id) {
  *cgroup_id = bpf_get_current_cgroup_id();
  return jail_of(*cgroup_id);
}

/* Inode deny check: walk the real dentry chain (within the file's superblock, at most 32 levels) and
 * return the first entry resolved to one of those inodes (exact entries only for the file itself).
 * Catches hard links and bind-mount aliases of denied files and trees, whatever name was used. */
static __always_inline struct dome_file_value *inode_decide(struct dentry *dentry, __u32 generation,
                                                            __u8 access) {
  struct dome_inode_key key = {};
  key.generation = generation;
  key.access = access;
  key.device = BPF_CORE_READ(dentry, d_sb, s_dev);
  key.inode = BPF_CORE_READ(dentry, d_inode, i_ino);
  struct dome_file_value *value = bpf_map_lookup_elem(&inode_rules, &key); /* EXACT: the file itself */
  if (value) return value;
  key.subtree = 1;
  for (int level = 0; level < 32; level++) {
    key.inode = BPF_CORE_READ(dentry, d_inode, i_ino);
    value = bpf_map_lookup_elem(&inode_rules, &key);
    if (value) return value;
    struct dentry *parent = BPF_CORE_READ(dentry, d_parent);
    if (!parent || parent == dentry) break;
    dentry = parent;
  }
  return NULL;
}

#define S_IFMT 00170000
#define S_IFDIR 0040000
#define S_IFREG 0100000

static __always_inline __u32 current_path_epoch(void) {
  __u32 zero = 0;
  __u32 *epoch = bpf_map_lookup_elem(&path_epoch, &zero);
  return epoch ? *epoch : 0;
}

#include "bpf/build_path.bpf.h"

/* Decide one access by the path in key->path (LPM), then, when the path allows, by device+inode (a hard
 * link or bind-mount alias of a denied file or tree). Returns 1 allow, 0 deny; *entry the deciding entry. */
static __always_inline int decide(struct dome_file_key *key, struct dentry *dentry, __u32 generation,
                                  __u8 access, __u32 *entry) {
  *entry = DOME_BPF_NO_ENTRY;
  if (generation == 0) return 0;
  key->prefixlen = 64 + 8 * sizeof(key->path);
  key->generation = generation;
  key->access = access;
  key->pad[0] = key->pad[1] = key->pad[2] = 0;
  struct dome_file_value *value = bpf_map_lookup_elem(&file_rules, key);
  if (!value) return 0;
  *entry = value->entry;
  if (value->decision != DOME_DECISION_ALLOW) return 0;
  struct dome_file_value *by_inode = inode_decide(dentry, generation, access);
  if (by_inode && by_inode->decision != DOME_DECISION_ALLOW) {
    *entry = by_inode->entry;
    return 0;
  }
  return 1;
}

/* Decide one access to an open file. Returns 0 or -EPERM and reports the refusal. `by_d_path` (a
 * constant at each call site) selects bpf_d_path (file_open, file_receive, bprm_check_security) or
 * build_path (file_permission, where bpf_d_path is refused). */
static __always_inline int file_check(struct file *file, __u8 access, __u32 hook, __u64 cgroup_id,
                                      struct dome_jail *jail, bool by_d_path) {
  __u32 shadow_generation;
  __u32 generation = ruleset_generations(jail, &shadow_generation);
  __u32 zero = 0;
  __u32 epoch = current_path_epoch();
  struct inode *inode = file->f_inode;
  /* Direct loads of BTF-typed fields (no helper call): this is the hot path of every open in a jail. */
  __u64 mount = (__u64)file->f_path.mnt;
  bool cacheable = inode && (inode->i_nlink == 1 || (inode->i_mode & S_IFMT) == S_IFDIR);
  if (cacheable && generation != 0) {
    struct dome_verdict_cache *cached = bpf_inode_storage_get(&verdicts, inode, 0, 0);
    if (cached) {
      /* The entry is shared by every CPU: read it between two equal, even sequence values (x86 keeps loads
       * in order; the barriers keep the compiler from moving them). */
      __u64 sequence = cached->sequence;
      compiler_barrier();
      bool hit = !(sequence & 1) && cached->cgroup_id == cgroup_id && cached->mount == mount &&
                 cached->generation == generation && cached->epoch == epoch &&
                 cached->shadow_generation == shadow_generation && (cached->allowed & access);
      compiler_barrier();
      if (hit && cached->sequence == sequence) return 0;
    }
  }
  struct file_scratch *s = bpf_map_lookup_elem(&file_scratch, &zero);
  if (!s) return -EPERM;
  long length;
  if (by_d_path)
    length = bpf_d_path((struct path *)&file->f_path, s->key.path, sizeof(s->key.path));
  else
    length = build_path(0, file->f_path.mnt, file->f_path.dentry);
  __u32 entry = DOME_BPF_NO_ENTRY;
  int allowed = length > 0 && decide(&s->key, file->f_path.dentry, generation, access, &entry);
  /* Shadow tables: the same access decided under them. A difference is reported where the access is
   * decided once (open, receive, exec: by_d_path); reads and writes of an open descriptor only keep the
   * file out of the cache, so that its next open is decided (and reported) again. */
  int shadow_allowed = allowed;
  if (shadow_generation) {
    __u32 shadow_entry = DOME_BPF_NO_ENTRY;
    shadow_allowed =
        length > 0 && decide(&s->key, file->f_path.dentry, shadow_generation, access, &shadow_entry);
    if (by_d_path && shadow_allowed != allowed) {
      struct dome_event *event = event_begin(cgroup_id, hook, entry, generation);
      if (event) {
        event->kind = DOME_EVENT_SHADOW;
        event->action = access;
        event->decision = allowed ? DOME_DECISION_ALLOW : DOME_DECISION_DENY;
        event->shadow_decision = shadow_allowed ? DOME_DECISION_ALLOW : DOME_DECISION_DENY;
        event->shadow_entry = shadow_entry;
        event->shadow_generation = shadow_generation;
        bpf_probe_read_kernel_str(event->path, sizeof(event->path), s->key.path);
        bpf_ringbuf_submit(event, 0);
      }
    }
  }
  if (allowed) {
    if (cacheable && shadow_allowed) {
      struct dome_verdict_cache *cached =
          bpf_inode_storage_get(&verdicts, inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
      __u64 sequence = cached ? cached->sequence : 1;
      /* One writer at a time (another CPU mid-write: skip, the cache is only an optimization). */
      if (!(sequence & 1) && cached &&
          __sync_val_compare_and_swap(&cached->sequence, sequence, sequence + 1) == sequence) {
        compiler_barrier();
        if (cached->cgroup_id != cgroup_id || cached->mount != mount || cached->generation != generation ||
            cached->epoch != epoch || cached->shadow_generation != shadow_generation) {
          cached->cgroup_id = cgroup_id;
          cached->mount = mount;
          cached->generation = generation;
          cached->epoch = epoch;
          cached->shadow_generation = shadow_generation;
          cached->allowed = 0;
        }
        cached->allowed |= access;
        compiler_barrier();
        cached->sequence = sequence + 2;
      }
    }
    return 0;
  }
  struct dome_event *event = event_begin(cgroup_id, hook, entry, generation);
  if (event) {
    event->action = access;
    if (length > 0)
      bpf_probe_read_kernel_str(event->path, sizeof(event->path), s->key.path);
    else if (by_d_path)
      bpf_d_path((struct path *)&file->f_path, event->path, sizeof(event->path));
    bpf_ringbuf_submit(event, 0);
  }
  return -EPERM;
}

static __always_inline int file_mode_check(struct file *file, __u32 hook) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  unsigned int mode = file->f_mode;
  if (mode & FMODE_EXEC) return file_check(file, DOME_FILE_EXEC, hook, cgroup_id, jail, true);
  if (mode & FMODE_READ) {
    int verdict = file_check(file, DOME_FILE_READ, hook, cgroup_id, jail, true);
    if (verdict) return verdict;
  }
  if (mode & FMODE_WRITE) return file_check(file, DOME_FILE_WRITE, hook, cgroup_id, jail, true);
  return 0;
}

/* Path epoch: anything that may change the path of an existing (dentry, mount) invalidates every cached
 * verdict. These run for every task (global hooks) and cost one array update. */
static __always_inline int bump_path_epoch(void) {
  __u32 zero = 0;
  __u32 *epoch = bpf_map_lookup_elem(&path_epoch, &zero);
  if (epoch) __sync_fetch_and_add(epoch, 1);
  return 0;
}

SEC("lsm/inode_rename")
int BPF_PROG(dome_inode_rename, struct inode *old_dir, struct dentry *old_dentry, struct inode *new_dir,
             struct dentry *new_dentry) {
  return bump_path_epoch();
}

SEC("lsm/sb_mount")
int BPF_PROG(dome_sb_mount, const char *dev_name, const struct path *path, const char *type,
             unsigned long flags, void *data) {
  return bump_path_epoch();
}

SEC("lsm/sb_umount")
int BPF_PROG(dome_sb_umount, struct vfsmount *mnt, int flags) {
  return bump_path_epoch();
}

SEC("lsm/move_mount")
int BPF_PROG(dome_move_mount, const struct path *from_path, const struct path *to_path) {
  return bump_path_epoch();
}

SEC("lsm/sb_pivotroot")
int BPF_PROG(dome_sb_pivotroot, const struct path *old_path, const struct path *new_path) {
  return bump_path_epoch();
}

SEC("lsm/path_chroot")
int BPF_PROG(dome_path_chroot, const struct path *path) {
  return bump_path_epoch();
}

SEC("lsm/file_open")
int BPF_PROG(dome_file_open, struct file *file) {
  return file_mode_check(file, DOME_HOOK_FILE_OPEN);
}

/* A descriptor received over SCM_RIGHTS (or pidfd_getfd) is checked as if opened here. */
SEC("lsm/file_receive")
int BPF_PROG(dome_file_receive, struct file *file) {
  return file_mode_check(file, DOME_HOOK_FILE_RECEIVE);
}

SEC("lsm/bprm_check_security")
int BPF_PROG(dome_bprm_check, struct linux_binprm *bprm) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  return file_check(bprm->file, DOME_FILE_EXEC, DOME_HOOK_BPRM_CHECK, cgroup_id, jail,
                    true); /* a BTF pointer: bpf_d_path needs it */
}

/* read(2)/write(2) (and the other rw_verify_area users) on an already-open file: the same decision as at
 * open, so a descriptor the jail did not open under the current tables — inherited across the jail's
 * entry, opened before a rule change, or of a file renamed since — is decided again. Runs on every read and
 * write of the system: for tasks outside jails it costs one jail-map lookup; inside, a regular file whose
 * verdict is cached (the common case: file_open cached it) costs the cache probe. Only regular files:
 * pipes, sockets, ttys and other character devices carry no Cedar path (a device opened in the jail was
 * decided by file_open; the jail's stdio are pipes). */
SEC("lsm/file_permission")
int BPF_PROG(dome_file_permission, struct file *file, int mask) {
  struct inode *inode = file->f_inode; /* two loads: pipes and sockets skip even the jail lookup */
  if (!inode || (inode->i_mode & S_IFMT) != S_IFREG) return 0;
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  if (mask & (MAY_WRITE | MAY_APPEND)) {
    int verdict = file_check(file, DOME_FILE_WRITE, DOME_HOOK_FILE_PERMISSION, cgroup_id, jail, false);
    if (verdict) return verdict;
  }
  /* A file opened for execution (the binary, its ELF interpreter) is read by the kernel through
   * kernel_read: decided as fs:exec, like file_open does for FMODE_EXEC. */
  __u8 read_access = (file->f_mode & FMODE_EXEC) ? DOME_FILE_EXEC : DOME_FILE_READ;
  if (mask & MAY_READ)
    return file_check(file, read_access, DOME_HOOK_FILE_PERMISSION, cgroup_id, jail, false);
  return 0;
}

/* Creating a new name for an existing file or tree (link(2), rename(2)) must not widen what the jail may do
 * with it: refused when, for some access, the new name would be allowed while the old one is denied (by
 * path or by device+inode). A directory rename is also refused when a DENY entry lies beneath the old path
 * (the marker keys): it would carry that entry's files to paths the tables allow. Returns 0 or -EPERM. */
static __always_inline int alias_check(struct vfsmount *from_mnt, struct dentry *from,
                                       struct vfsmount *to_mnt, struct dentry *to, __u32 hook,
                                       __u64 cgroup_id, struct dome_jail *jail) {
  __u32 generation = ruleset_generation(jail);
  if (generation == 0) return 0; /* nothing is allowed anywhere: no name can widen */
  __u32 zero = 0, one = 1;
  struct file_scratch *old_name = bpf_map_lookup_elem(&file_scratch, &zero);
  struct file_scratch *new_name = bpf_map_lookup_elem(&file_scratch, &one);
  if (!old_name || !new_name) return -EPERM;
  long old_length = build_path(0, from_mnt, from);
  long new_length = build_path(1, to_mnt, to);
  if (new_length <= 0) return 0; /* the new name is too long to be opened by path: decided denied */
  __u32 entry = DOME_BPF_NO_ENTRY;
  __u8 refused = 0;
  if (old_length > 0) {
    struct inode *inode = BPF_CORE_READ(from, d_inode);
    bool directory = inode && (BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFDIR;
    if (directory) {
      old_name->key.prefixlen = 64 + 8 * sizeof(old_name->key.path);
      old_name->key.generation = generation;
      old_name->key.access = DOME_BPF_ACCESS_DENY_BENEATH;
      old_name->key.pad[0] = old_name->key.pad[1] = old_name->key.pad[2] = 0;
      struct dome_file_value *marker = bpf_map_lookup_elem(&file_rules, &old_name->key);
      if (marker) {
        entry = marker->entry;
        refused = DOME_BPF_ACCESS_DENY_BENEATH;
      }
    }
  }
  for (__u8 access = DOME_FILE_READ; access <= DOME_FILE_EXEC && !refused; access <<= 1) {
    __u32 old_entry = DOME_BPF_NO_ENTRY, new_entry;
    bool old_allowed = old_length > 0 && decide(&old_name->key, from, generation, access, &old_entry);
    if (old_allowed) continue;
    if (decide(&new_name->key, to, generation, access, &new_entry)) {
      entry = old_entry;
      refused = access;
    }
  }
  if (!refused) return 0;
  struct dome_event *event = event_begin(cgroup_id, hook, entry, generation);
  if (event) {
    event->action = refused;
    if (old_length > 0) bpf_probe_read_kernel_str(event->path, sizeof(event->path), old_name->key.path);
    bpf_ringbuf_submit(event, 0);
  }
  return -EPERM;
}

SEC("lsm/path_link")
int BPF_PROG(dome_path_link, struct dentry *old_dentry, const struct path *new_dir,
             struct dentry *new_dentry) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  struct vfsmount *mnt = new_dir->mnt; /* link(2) requires one mount for both names */
  return alias_check(mnt, old_dentry, mnt, new_dentry, DOME_HOOK_PATH_LINK, cgroup_id, jail);
}

SEC("lsm/path_rename")
int BPF_PROG(dome_path_rename, const struct path *old_dir, struct dentry *old_dentry,
             const struct path *new_dir, struct dentry *new_dentry, unsigned int flags) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  int verdict =
      alias_check(old_dir->mnt, old_dentry, new_dir->mnt, new_dentry, DOME_HOOK_PATH_RENAME, cgroup_id, jail);
  if (verdict == 0 && (flags & RENAME_EXCHANGE))
    verdict = alias_check(new_dir->mnt, new_dentry, old_dir->mnt, old_dentry, DOME_HOOK_PATH_RENAME,
                          cgroup_id, jail);
  return verdict;
}

/* Second line for connect(2) of every family: IP by the net:connect table, AF_UNIX allowed, the rest
 * refused (sock_create already limits families). */
SEC("lsm/socket_connect")
int BPF_PROG(dome_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  unsigned short family = address->sa_family;
  if (family == AF_UNIX) return 0;
  struct net_request request = {};
  request.action = DOME_NET_CONNECT;
  request.protocol = sock->sk->sk_protocol;
  /* Port and IPv4 address by direct loads of sa_data (sockaddr_in/_in6 put the port at sa_data[0..1] and
   * the IPv4 address at sa_data[2..5]): no helper call on this per-connect path. */
  const char *data = address->sa_data;
  __u16 port = (__u16)(((__u8)data[0] << 8) | (__u8)data[1]); /* network order → host */
  if (family == AF_INET && addrlen >= (int)sizeof(struct sockaddr_in)) {
    request.family = 4;
    request.port = port;
    request.address[0] = data[2];
    request.address[1] = data[3];
    request.address[2] = data[4];
    request.address[3] = data[5];
  } else if (family == AF_INET6 && addrlen >= (int)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)address;
    __u32 w[4];
    bpf_probe_read_kernel(w, sizeof(w), &in6->sin6_addr);
    request.port = port;
    request_from_ip6(&request, w[0], w[1], w[2], w[3]);
  } else {
    struct dome_event *event = event_begin(cgroup_id, DOME_HOOK_SOCKET_CONNECT, DOME_BPF_NO_ENTRY, 0);
    if (event) {
      event->extra = family;
      bpf_ringbuf_submit(event, 0);
    }
    return -EPERM;
  }
  __u32 shadow_generation;
  __u32 generation = ruleset_generations(jail, &shadow_generation);
  __u32 entry;
  int allowed = net_decide(&request, generation, &entry);
  if (shadow_generation)
    shadow_net(cgroup_id, DOME_HOOK_SOCKET_CONNECT, &request, allowed, entry, generation, shadow_generation);
  if (allowed) return 0;
  report_net(cgroup_id, DOME_HOOK_SOCKET_CONNECT, &request, entry, generation);
  return -EPERM;
}

/* Families for every socket(2) of a jail (the cgroup sock_create hook only sees AF_INET/AF_INET6). */
SEC("lsm/socket_create")
int BPF_PROG(dome_socket_create, int family, int type, int protocol, int kern) {
  if (kern) return 0;
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  int base_type = type & 0xf;
  if (family >= 0 && family < 64 && (jail->families & (1ULL << family)) &&
      ((base_type != SOCK_RAW && base_type != SOCK_PACKET) || (jail->flags & DOME_JAIL_ALLOW_RAW)))
    return 0;
  struct dome_event *event = event_begin(cgroup_id, DOME_HOOK_SOCKET_CREATE, DOME_BPF_NO_ENTRY, 0);
  if (event) {
    event->extra = family;
    event->port = base_type;
    bpf_ringbuf_submit(event, 0);
  }
  return -EPERM;
}

static __always_inline __u64 task_cgroup_id(struct task_struct *task) {
  return BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
}

static __always_inline int cross_jail(struct task_struct *target, __u32 hook) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  if (task_cgroup_id(target) == cgroup_id) return 0;
  struct dome_event *event = event_begin(cgroup_id, hook, DOME_BPF_NO_ENTRY, 0);
  if (event) {
    event->extra = BPF_CORE_READ(target, tgid);
    bpf_ringbuf_submit(event, 0);
  }
  return -EPERM;
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(dome_ptrace_access_check, struct task_struct *child, unsigned int mode) {
  return cross_jail(child, DOME_HOOK_PTRACE);
}

SEC("lsm/task_kill")
int BPF_PROG(dome_task_kill, struct task_struct *target, struct kernel_siginfo *info, int sig,
             const struct cred *cred) {
  return cross_jail(target, DOME_HOOK_TASK_KILL);
}

/* Nothing in a jail touches BPF: bpf(2) itself, and any map or program fd it might have received. */
static __always_inline int refuse_bpf(__u32 command) {
  __u64 cgroup_id;
  struct dome_jail *jail = current_jail(&cgroup_id);
  if (!jail) return 0;
  struct dome_event *event = event_begin(cgroup_id, DOME_HOOK_BPF, DOME_BPF_NO_ENTRY, 0);
  if (event) {
    event->extra = command;
    bpf_ringbuf_submit(event, 0);
  }
  return -EPERM;
}

SEC("lsm/bpf")
int BPF_PROG(dome_bpf, int cmd, union bpf_attr *attr, unsigned int size) {
  return refuse_bpf(cmd);
}

SEC("lsm/bpf_map")
int BPF_PROG(dome_bpf_map, struct bpf_map *map, fmode_t fmode) {
  return refuse_bpf(1000);
}

SEC("lsm/bpf_prog")
int BPF_PROG(dome_bpf_prog, struct bpf_prog *prog) {
  return refuse_bpf(1001);
}
