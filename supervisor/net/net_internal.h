/* Internals of supervisor/net shared between its files (not a public interface). */
#ifndef DOME_NET_INTERNAL_H
#define DOME_NET_INTERNAL_H

#include <limits.h>
#include <pthread.h>

#include "supervisor/net/net.h"

struct nl_sock;
struct nft_ctx;

struct dome_net_jail {
  struct dome_net_jail *next;
  bool has_link;
  uint32_t slot;
  char link_name[16];        /* domeh<slot> on the egress side */
  uint32_t gateway, address; /* host byte order */
  bool has_ipv6;
  uint8_t gateway6[16], address6[16]; /* the slot's /64: ::1 egress side, ::2 jail */
  uint64_t quota_bytes;               /* 0: unlimited */
  struct dome_net_plan plan;
  char resolv_conf[1024];
  /* ipvlan/macvlan modes (ipvlan.c): handles bound to the jail's namespace (they keep it, and so its
   * counters, alive until teardown) */
  struct nl_sock *uplink_sock;
  struct nft_ctx *uplink_nft;
};

struct dome_net {
  enum dome_net_mode mode;
  char state_dir[PATH_MAX];
  char pasta_path[PATH_MAX];
  struct dome_net_prefix pool;
  uint8_t block_length;
  uint32_t mtu;
  uint64_t jail_quota_bytes;
  struct dome_net_prefix6 pool6;
  bool ipv6;               /* jails get IPv6 paths */
  char ipv6_reason[256];   /* why not */
  int lock_fd;             /* flock of <state_dir>/lock, held from open to close */
  struct net_relay *relay; /* user mode with tcp_relay: the splice relay of jails' TCP (relay.c) */
  int egress_netns_fd;     /* user mode: the dome-owned egress namespace; routed: -1 (the caller's) */
  int egress_userns_fd;    /* user mode: the user namespace owning it (root in it = DOME_NET_EGRESS_ID) */
  /* Bound to the egress side's namespace when created (sockets keep their namespace), so per-jail work
   * there needs no namespace switch. */
  struct nl_sock *egress_sock;
  struct nft_ctx *egress_nft;
  pid_t pasta_pid;
  pthread_t pasta_parent; /* pasta's parent thread (pasta.c), alive while pasta is */
  int pasta_stop;         /* write end of its pipe; -1 when no such thread runs */
  uint8_t *slot_used;     /* one byte a slot; slot 0 is reserved for the egress side's own link */
  uint32_t slot_count;
  struct dome_net_jail *jails;
  /* ipvlan/macvlan modes (ipvlan.c): the uplink, its IPv4 network holding the pool, the router on it;
   * slot i is the pool's address i */
  char uplink[16];
  int uplink_ifindex;
  struct dome_net_prefix uplink_network, uplink_pool;
  uint32_t uplink_gateway;
  pthread_mutex_t lock; /* serializes set-up, teardown and counting (shared sockets, slots, list) */
};

/* Jail slots (jail.c): slot n of a mode is held by the file <state_dir>/<prefix>-<n>, created O_EXCL (a
 * second supervisor on the same state directory cannot take it too) and holding what reclaim needs after a
 * crash, as text(slot, buffer, size, context) writes it (its length, or < 0). net_slot_take takes the lowest
 * free slot from `first`: the slot, or -ENOSPC (`exhausted` as the message) or -errno creating or writing
 * the file. net_slot_release removes the file and frees the slot. */
typedef int (*net_slot_text_fn)(uint32_t slot, char *text, size_t size, void *context);
int net_slot_take(struct dome_net *net, const char *prefix, uint32_t first, net_slot_text_fn text,
                  void *context, const char *exhausted, dome_error *err);
void net_slot_release(struct dome_net *net, const char *prefix, uint32_t slot);

/* Run fn(arg, err) with the calling thread's network namespace switched to netns_fd: in a short-lived
 * thread (setns(2) CLONE_NEWNET affects only that thread). netns_fd < 0 runs fn here, unchanged. */
typedef int (*net_netns_fn)(void *arg, dome_error *err);
int net_in_netns(int netns_fd, net_netns_fn fn, void *arg, dome_error *err);
/* Create a fresh network namespace; returns an O_CLOEXEC fd naming it (>= 0) or -errno. */
int net_netns_create(dome_error *err);

/* The unprivileged host uid and gid that own user mode's egress namespaces and that pasta runs as: outside
 * the jails' id range (0x70000000 + n), never root. */
#define DOME_NET_EGRESS_ID 0x6ffffffeu

/* Create a user namespace owned by host uid/gid `owner` (its root mapped to `owner`, setgroups denied) and
 * a network namespace owned by that user namespace, from a short-lived child process (user_namespaces(7):
 * a process whose euid owns a user namespace holds every capability in it and none outside). pasta runs
 * as `owner` in that user namespace, so the program that parses the jails' packets holds no capability in
 * the host's namespaces. Stores O_CLOEXEC fds naming both; returns 0 or -errno (fork, unshare, the id
 * maps, opening the namespaces). */
int net_egress_namespaces_create(unsigned owner, int *userns_fd, int *netns_fd, dome_error *err);

/* pasta (pasta.c). net_pasta_start runs net->pasta_path with argv as the egress ids
 * (DOME_NET_EGRESS_ID) and SIGKILL as its parent-death signal, forked by a thread of its own so that the
 * kernel ends pasta when the supervisor process ends by any means; in, out and stderr_fd become its
 * descriptors 0, 1 and 2, the `inherited` descriptors stay open across the exec, the others close. Sets
 * net->pasta_pid; returns 0 or -errno (pipe, thread, fork; a failed exec shows as pasta's exit status
 * 127, its reason on stderr_fd). net_pasta_stop sends pasta SIGTERM, reaps it and ends the thread
 * (a no-op when none runs). */
int net_pasta_start(struct dome_net *net, char *const argv[], int in, int out, int stderr_fd,
                    const int *inherited, size_t inherited_count, dome_error *err);
void net_pasta_stop(struct dome_net *net);

/* libnl (link.c); all act in the namespace of the calling thread. */
int net_nl_open(struct nl_sock **sock_out, dome_error *err);
void net_nl_close(struct nl_sock *sock);
int net_nl_error(dome_error *err, int nl_error, const char *what);
int net_link_veth_create(struct nl_sock *sock, const char *name, const char *peer_name, pid_t peer_pid,
                         uint32_t mtu, dome_error *err);
int net_link_ifindex(struct nl_sock *sock, const char *name, dome_error *err); /* > 0, or -ENODEV */
int net_link_set_up(struct nl_sock *sock, const char *name, dome_error *err);
int net_address_add(struct nl_sock *sock, int ifindex, uint32_t address, uint8_t length, dome_error *err);
int net_route_add(struct nl_sock *sock, struct dome_net_prefix dst, uint32_t gateway, int ifindex,
                  dome_error *err);
/* As net_route_add, with gateway 0 for an on-link route (scope link), and a gateway taken as on the link
 * whatever the link's own addresses (RTNH_F_ONLINK: an uplink slave holds only its /32). -EEXIST (err set)
 * when the route is there already. */
int net_route_add_onlink(struct nl_sock *sock, struct dome_net_prefix dst, uint32_t gateway, int ifindex,
                         dome_error *err);
int net_link_delete(struct nl_sock *sock, const char *name, dome_error *err); /* -ENODEV when absent */
/* IPv6: address (no DAD) and route via a gateway; the host's IPv6 route prefixes (not the default routes,
 * which are reported in *default_route_out). */
int net_address_add6(struct nl_sock *sock, int ifindex, const uint8_t address[16], uint8_t length,
                     dome_error *err);
int net_route_add6(struct nl_sock *sock, const struct dome_net_prefix6 *dst, const uint8_t gateway[16],
                   int ifindex, dome_error *err);
/* Policy routing of the TCP relay: rule fwmark `mark` -> table `table`, whose default route is local. */
int net_tproxy_routing(struct nl_sock *sock, int family, uint32_t mark, uint32_t table, dome_error *err);
int net_host_prefixes6(struct nl_sock *sock, struct dome_net_prefix6 *out, size_t max, size_t *count_out,
                       bool *default_route_out, dome_error *err);
/* Destination prefixes of the main routing table and the local addresses (as /len), bounded by max. */
int net_host_prefixes(struct nl_sock *sock, struct dome_net_prefix *out, size_t max, size_t *count_out,
                      dome_error *err);
/* One address of a namespace's interfaces (AF_INET: 4 bytes, AF_INET6: 16 bytes, network order). */
struct net_local_address {
  int family;
  uint8_t bytes[16];
};
#define NET_LOCAL_ADDRESS_MAX 512 /* addresses of one namespace the egress filter rejects one by one */
/* Append every local address (v4 and v6, every interface) of the socket's namespace to out[*count],
 * skipping ones already there. Returns 0, -E2BIG (more than max in all) or -EIO (netlink). */
int net_local_addresses(struct nl_sock *sock, struct net_local_address *out, size_t max, size_t *count,
                        dome_error *err);
/* Names of links starting with prefix (up to max, 16 bytes each). */
int net_links_with_prefix(struct nl_sock *sock, const char *prefix, char (*names)[16], size_t max,
                          size_t *count_out, dome_error *err);

/* nftables (firewall.c). ctx: a context made by net_nft_context() (it acts in the namespace where it was
 * made), or NULL for a temporary one in the calling thread's namespace. */
struct nft_ctx *net_nft_context(void);
void net_nft_context_free(struct nft_ctx *ctx);
int net_nft_run(struct nft_ctx *ctx, const char *commands, dome_error *err);
int net_nft_table_install(struct nft_ctx *ctx, struct dome_net_prefix pool,
                          const struct dome_net_prefix6 *pool6, dome_error *err);
int net_nft_table_remove(struct nft_ctx *ctx, dome_error *err);
/* The jail's chain. own: the host's (and egress side's) addresses, rejected unless a permitted filter
 * names one exactly as a /32 (then only that filter's protocol and ports reach it). */
int net_nft_jail_add(struct nft_ctx *ctx, const struct dome_net_jail *jail,
                     const struct net_local_address *own, size_t own_count, dome_error *err);
int net_nft_count_jail_chains(struct nft_ctx *ctx, size_t *count_out, dome_error *err);
int net_nft_jail_remove(struct nft_ctx *ctx, const struct dome_net_jail *jail, dome_error *err);
/* The jail's named counters and quota (see dome_net_jail_usage). */
int net_nft_jail_usage(struct nft_ctx *ctx, const struct dome_net_jail *jail,
                       struct dome_net_jail_usage *usage, dome_error *err);

void net_format_ipv4(uint32_t address, char out[16]);

/* ipvlan / macvlan modes (ipvlan.c). In the jail's namespace, the jail chain of firewall.c guards the
 * output hook (table inet dome there, chains jail<slot>, the same counter and quota names, so that
 * net_nft_jail_usage reads them through jail->uplink_nft); pool: other jails' addresses, always refused. */
bool net_mode_is_uplink(enum dome_net_mode mode);
int net_uplink_open(struct dome_net *net, const struct dome_net_config *config, dome_error *err);
int net_uplink_jail_setup(struct dome_net *net, struct dome_net_jail *jail, pid_t child_pid, dome_error *err);
int net_uplink_jail_teardown(struct dome_net *net, struct dome_net_jail *jail, dome_error *err);
/* Links of the uplink_files recorded in state_dir whose namespace still lives; returns how many were
 * removed (>= 0). Never fails (what cannot be removed is left, its file too). */
int net_uplink_reclaim(const char *state_dir);
void net_uplink_probe(bool *ipvlan, bool *macvlan);
int net_nft_uplink_install(struct nft_ctx *ctx, const struct dome_net_jail *jail, const char *link,
                           struct dome_net_prefix pool, const struct net_local_address *own, size_t own_count,
                           dome_error *err);

/* The TCP relay (relay.c): start it in the egress namespace (listeners, policy routing, tproxy rules); drop
 * the connections of one jail (its IPv4 address, host byte order, and IPv6 address); stop it (waits for
 * every connection). */
#define NET_RELAY_MARK 0x1d0e
#define NET_RELAY_TABLE 2580
struct net_relay;
int net_relay_start(struct dome_net *net, dome_error *err);
void net_relay_drop_source(struct net_relay *relay, uint32_t source, const uint8_t *source6 /* or NULL */);
void net_relay_stop(struct net_relay *relay);

#endif
