/* Network decision of dome.bpf.c (included once, after its maps): the request of a hook, and net_decide
 * over the `net_rules` LPM trie with a per-CPU decision cache. Not a standalone header. */
#ifndef DOME_BPF_NET_DECIDE_H
#define DOME_BPF_NET_DECIDE_H

struct net_request {
  __u8 action;
  __u8 protocol;
  __u8 family; /* 4 or 6, after IPv4-mapped conversion */
  __u16 port;  /* host order */
  __u8 address[16];
};

/* Fill request->family/address from an IPv6 address given as four network-order words; IPv4-mapped
 * addresses (::ffff:a.b.c.d) become the IPv4 request. */
static __always_inline void request_from_ip6(struct net_request *request, __u32 w0, __u32 w1, __u32 w2,
                                             __u32 w3) {
  __builtin_memset(request->address, 0, sizeof(request->address));
  if (w0 == 0 && w1 == 0 && w2 == bpf_htonl(0xffff)) {
    request->family = 4;
    __builtin_memcpy(request->address, &w3, 4);
    return;
  }
  request->family = 6;
  __builtin_memcpy(request->address, &w0, 4);
  __builtin_memcpy(request->address + 4, &w1, 4);
  __builtin_memcpy(request->address + 8, &w2, 4);
  __builtin_memcpy(request->address + 12, &w3, 4);
}

/* Per-CPU decision cache of the network table: a direct-mapped table of recent (generation, request) →
 * (decision, entry). Sound without invalidation because the tables of a generation never change (a rule
 * change is a new generation, and generations are not reused). It spares the LPM walk when a task connects
 * or sends to a destination again — and the second check of every connect(): the LSM socket_connect
 * decides first, the cgroup connect4/6 right after on the same CPU finds the entry. Per CPU, so only a
 * nested/preempting program on this CPU can interleave with a writer: the sequence count (odd while
 * written) makes a reader take a torn entry for a miss. */
#define NET_VERDICT_SLOTS 64
struct net_verdict {
  __u32 sequence;
  __u32 generation;
  __u8 action;
  __u8 protocol;
  __u8 family;
  __u8 decision;
  __u16 port;
  __u16 pad;
  __u32 address[4];
  __u32 entry;
  __u32 pad2;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, NET_VERDICT_SLOTS);
  __type(key, __u32);
  __type(value, struct net_verdict);
} net_verdicts SEC(".maps");

#define compiler_barrier() asm volatile("" ::: "memory")

/* Decide a request against generation's network table. Returns 1 allow, 0 deny; *entry the deciding entry. */
static __always_inline int net_decide(const struct net_request *request, __u32 generation, __u32 *entry) {
  *entry = DOME_BPF_NO_ENTRY;
  if (generation == 0) return 0;
  __u32 address[4];
  __builtin_memcpy(address, request->address, 16);
  __u32 hash = address[0] ^ address[1] ^ address[2] ^ address[3] ^ ((__u32)request->port << 16) ^
               ((__u32)request->action << 8) ^ request->protocol ^ generation;
  hash ^= hash >> 16;
  hash ^= hash >> 6;
  __u32 slot = hash & (NET_VERDICT_SLOTS - 1);
  struct net_verdict *cached = bpf_map_lookup_elem(&net_verdicts, &slot);
  if (cached) {
    __u32 sequence = cached->sequence;
    compiler_barrier();
    bool hit = !(sequence & 1) && cached->generation == generation && cached->port == request->port &&
               cached->action == request->action && cached->protocol == request->protocol &&
               cached->family == request->family && cached->address[0] == address[0] &&
               cached->address[1] == address[1] && cached->address[2] == address[2] &&
               cached->address[3] == address[3];
    __u32 decision = cached->decision, cached_entry = cached->entry;
    compiler_barrier();
    if (hit && cached->sequence == sequence) {
      *entry = cached_entry;
      return decision == DOME_DECISION_ALLOW;
    }
  }
  struct dome_net_key key = {};
  key.prefixlen = 64 + (request->family == 4 ? 32 : 128);
  key.generation = generation;
  key.action = request->action;
  key.protocol = request->protocol;
  key.family = request->family;
  __builtin_memcpy(key.address, request->address, 16);
  struct dome_net_value *value = bpf_map_lookup_elem(&net_rules, &key);
  int allowed = 0;
  if (value) {
    for (int i = 0; i < DOME_BPF_PORT_RANGES; i++) {
      if (i >= value->count) break;
      struct dome_port_range *range = &value->ranges[i];
      if (request->port >= range->first && request->port <= range->last) {
        *entry = range->entry;
        allowed = range->decision == DOME_DECISION_ALLOW;
        break;
      }
    }
  }
  if (cached) {
    cached->sequence += 1; /* odd: being written */
    compiler_barrier();
    cached->generation = generation;
    cached->action = request->action;
    cached->protocol = request->protocol;
    cached->family = request->family;
    cached->decision = (__u8)allowed;
    cached->port = request->port;
    __builtin_memcpy(cached->address, address, 16);
    cached->entry = *entry;
    compiler_barrier();
    cached->sequence += 1;
  }
  return allowed;
}

#endif
