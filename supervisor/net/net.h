/* dome jail networking: the egress path of jails whose compiled network rules permit destinations beyond
 * loopback (IPv4; IPv6 with a ULA /64 per jail when the egress side has IPv6, see dome_net_config.pool6;
 * per-jail counters and byte quota, dome_net_jail_usage; an optional splice(2) TCP relay in user mode,
 * dome_net_config.tcp_relay).
 *
 * A jail starts with loopback only. When its decision tables (supervisor/kernel/kernel.h) hold an ALLOW
 * entry for net:connect or net:send to a non-loopback IPv4 prefix, dome_net_jail_setup() builds a path:
 *
 *   jail netns                 egress side (see modes)                      outside
 *   eth0 100.64.P.(4i+2)/30 ── domeh<i> 100.64.P.(4i+1)/30 ── nftables ── routed out / pasta ── peer
 *
 *   - a veth pair made with libnl-route (rtnl_link_veth_add): `domeh<i>` on the egress side, `eth0`
 *     created directly in the jail's network namespace (IFLA_NET_NS_PID), addressed from the pool;
 *   - in the jail: one route per permitted prefix via the egress side (a permitted /32 gives a /32 route,
 *     never its /24; a default route only when 0.0.0.0/0 itself is permitted);
 *   - on the egress side, nftables table `inet dome`: per jail a chain accepting only the permitted
 *     (prefix, protocol, port range) triples from the jail's own address, rejecting everything else,
 *     jail-to-jail traffic, traffic addressed to the egress side itself, and inbound connections;
 *     masquerade of the pool towards the outside. The host's own addresses (every address of every
 *     interface, v4 and v6, read with libnl at each set-up; in user mode also the egress namespace's and
 *     pasta's gateway address) are rejected even under a wider permitted prefix such as 0.0.0.0/0; only
 *     a permitted /32 equal to one of them opens it, for that rule's protocol and ports.
 * The cgroup BPF programs remain the enforcement point (deny exceptions inside a permitted prefix are
 * theirs); this plumbing only ever narrows.
 *
 * Modes (struct dome_net_config.mode; the default DOME_NET_MODE_AUTO picks ROUTED when the host already
 * forwards (net.ipv4.ip_forward=1, set by the operator) and USER otherwise — routed measured ~2.5x the
 * throughput of pasta here, and USER is the one that works on a host like this one, forwarding off):
 *   DOME_NET_MODE_USER — the egress side is a network namespace owned by dome (forwarding is
 *     enabled in that namespace only) connected to the host by pasta (Debian's passt), which turns the
 *     jail's flows into ordinary sockets of the host. No host setting changes; works with
 *     net.ipv4.ip_forward=0. pasta runs with -t/-u/-T/-U none (no port is forwarded in either direction)
 *     and --no-map-gw (the host's loopback is not reachable through the gateway address).
 *   DOME_NET_MODE_ROUTED — the egress side is the host's own network namespace; traffic is forwarded
 *     and masqueraded by the host. Needs net.ipv4.ip_forward=1, which dome never sets (the operator
 *     does; dome_net_probe_host() reports it).
 *   DOME_NET_MODE_IPVLAN / DOME_NET_MODE_MACVLAN (opt-in, ipvlan.c) — no egress side: the jail's namespace
 *     gets a slave (`eth0`, ipvlan L2 `private` / macvlan `private`) of an operator-named host uplink
 *     (dome_net_config.uplink), a /32 from uplink_pool on the uplink's network, routes per permitted prefix
 *     (on-link, or via uplink_gateway), and table inet dome with the jail chain, counters and quota in its
 *     own namespace. No host setting changes, no second TCP termination; slaves never reach the host's own
 *     addresses nor each other. IPv4 only.
 * See docs/networking.md for the measurements behind the default.
 *
 * Crash safety: every owned object is named with the prefix `domeh` / table `dome` and recorded in the
 * state directory (slot-<i> files, pasta.pid; uplink-<i> files in the ipvlan/macvlan modes). dome_net_open()
 * first reclaims what a previous process left there — and only objects recorded there.
 *
 * Threading: set-up, teardown and counting may be called from several threads (jail_run is); they are
 * serialized inside. open/close from one thread, with no set-up running. Netlink work inside other namespaces
 * runs in short-lived helper threads (setns(2) of CLONE_NEWNET affects only the calling thread). Specs:
 * rtnetlink(7), veth(4), nft(8) (nftables ruleset syntax), passt(1)/pasta, resolv.conf(5), RFC 6598
 * (100.64.0.0/10 shared address space). */
#ifndef DOME_NET_NET_H
#define DOME_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/common/error.h"
#include "policy/tables/tables.h"

/* ---------------------------------------------------------------- the plan (pure, no system calls) */

#define DOME_NET_MAX_ROUTES 256   /* distinct permitted IPv4 prefixes routed into one jail */
#define DOME_NET_MAX_FILTERS 1024 /* distinct (prefix, protocol, ports) accept rules of one jail */
#define DOME_NET_MAX_RESOLVERS 3  /* resolv.conf(5) MAXNS */

struct dome_net_prefix {
  uint32_t address; /* IPv4, host byte order, host bits zero */
  uint8_t length;   /* 0..32 */
};

struct dome_net_prefix6 {
  uint8_t address[16]; /* IPv6, network byte order, host bits zero */
  uint8_t length;      /* 0..128 */
};

/* One accept rule of the egress filter: destination prefix, protocol (DOME_PROTOCOL_TCP/UDP), ports. */
struct dome_net_filter {
  struct dome_net_prefix prefix;
  uint8_t protocol;
  uint16_t port_first, port_last; /* inclusive, host byte order */
};
struct dome_net_filter6 {
  struct dome_net_prefix6 prefix;
  uint8_t protocol;
  uint16_t port_first, port_last;
};

/* What a jail needs, derived from its decision tables. */
struct dome_net_plan {
  bool needs_egress; /* some ALLOW connect/send entry names a non-loopback IPv4 or IPv6 prefix */
  struct dome_net_prefix routes[DOME_NET_MAX_ROUTES];
  size_t route_count;
  struct dome_net_filter filters[DOME_NET_MAX_FILTERS];
  size_t filter_count;
  uint32_t resolvers[DOME_NET_MAX_RESOLVERS]; /* IPv4, host order: permitted UDP port 53 on a /32 */
  size_t resolver_count;
  /* IPv6 (ULA addressing, see dome_net_open): the same, for non-loopback IPv6 prefixes (not ::1, not
   * ::ffff:0:0/96, which the kernel decides as IPv4) */
  struct dome_net_prefix6 routes6[DOME_NET_MAX_ROUTES];
  size_t route6_count;
  struct dome_net_filter6 filters6[DOME_NET_MAX_FILTERS];
  size_t filter6_count;
  uint8_t resolvers6[DOME_NET_MAX_RESOLVERS][16]; /* permitted UDP port 53 on a /128 */
  size_t resolver6_count;
  /* IPv6 ALLOW entries not plumbed because the egress side has no IPv6 (dome_net_ipv6_available): set by
   * dome_net_jail_setup; the jail then has no IPv6 route (fails closed) */
  size_t ipv6_allow_ignored;
};

/* Derive the plan from flattened network entries (struct dome_net_entry, kernel.h): only ALLOW entries
 * of net:connect and net:send count (net:bind never needs egress); prefixes inside 127.0.0.0/8 are
 * loopback and need nothing; duplicates are merged. Resolvers are ALLOW entries for protocol UDP on a
 * /32 whose port range holds 53, in entry order. entries may be NULL when count is 0.
 * Returns 0, or -EINVAL (bad family/prefix length/port order, naming "network entry N") or -E2BIG
 * (more than DOME_NET_MAX_ROUTES / DOME_NET_MAX_FILTERS) with *plan zeroed. */
int dome_net_plan_from_entries(const struct dome_net_entry *entries, size_t count, struct dome_net_plan *plan,
                               dome_error *err);

/* The resolv.conf(5) text the jail must install as /etc/resolv.conf: one `nameserver` line per permitted
 * resolver plus `options timeout:1 attempts:1`; with no permitted resolver, no nameserver line (glibc
 * then asks 127.0.0.1 in the jail's own namespace, which refuses at once: lookups fail fast with
 * EAI_AGAIN) and a comment saying why. Writes at most `size` bytes with the NUL.
 * Returns the length (bytes, without the NUL) or -ENOSPC. */
int dome_net_resolv_conf(const struct dome_net_plan *plan, char *out, size_t size, dome_error *err);

/* The same text straight from the entries (plan + dome_net_resolv_conf): for the jail, which must lay
 * out /etc (resolv.conf, and `hosts: files dns` in nsswitch.conf when a resolver is permitted) before
 * its root turns read-only, i.e. before on_namespaces_ready runs. The text does not depend on the
 * jail's addresses. *has_resolver_out (may be NULL): at least one nameserver line.
 * Returns the length or -EINVAL/-E2BIG/-ENOSPC/-ENOMEM as the two functions above. */
int dome_net_resolv_conf_for_entries(const struct dome_net_entry *entries, size_t count, char *out,
                                     size_t size, bool *has_resolver_out, dome_error *err);

/* ---------------------------------------------------------------- address pool (pure) */

/* Addresses of slot `slot` in pool `pool` (a /16 or shorter) carved in blocks of 2^(32-block_length)
 * addresses (block_length 30 or 31): gateway (egress side) and jail address, host byte order.
 * Returns 0 or -ERANGE (slot beyond the pool). */
int dome_net_slot_addresses(struct dome_net_prefix pool, uint8_t block_length, uint32_t slot,
                            uint32_t *gateway, uint32_t *jail, dome_error *err);

/* Choose the pool: the first /pool_length inside 100.64.0.0/10 (RFC 6598) that overlaps none of the
 * given host prefixes (routes and addresses of the host). Returns 0 or -EADDRNOTAVAIL. */
int dome_net_choose_pool(const struct dome_net_prefix *host, size_t host_count, uint8_t pool_length,
                         struct dome_net_prefix *pool, dome_error *err);

/* True when two prefixes overlap. */
bool dome_net_prefix_overlaps(struct dome_net_prefix a, struct dome_net_prefix b);

/* Addresses of slot `slot` in the IPv6 pool (a /48): the slot's /64 is pool:<slot>::/64, gateway ::1,
 * jail ::2. Returns 0 or -ERANGE (slot > 65535) / -EINVAL (pool not a /48). */
int dome_net_slot_addresses6(struct dome_net_prefix6 pool, uint32_t slot, uint8_t gateway[16],
                             uint8_t jail[16], dome_error *err);

/* Parse "a.b.c.d/len" (len optional = 32). Returns 0 or -EINVAL naming the text. */
int dome_net_prefix_parse(const char *text, struct dome_net_prefix *prefix, dome_error *err);

/* ---------------------------------------------------------------- runtime */

enum dome_net_mode {
  DOME_NET_MODE_AUTO = 0,   /* default: ROUTED when the operator enabled ip_forward, else USER */
  DOME_NET_MODE_USER = 1,   /* dome-owned egress namespace + pasta; no host change */
  DOME_NET_MODE_ROUTED = 2, /* host namespace, forwarding + nftables masquerade on the host */
  /* Opt-in: the jail's namespace gets a slave link of an operator-named host uplink (no second TCP
   * termination, no host forwarding, no egress namespace; see ipvlan.c and docs/networking.md) */
  DOME_NET_MODE_IPVLAN = 3,  /* an ipvlan slave, L2 mode, flag `private` (CONFIG_IPVLAN) */
  DOME_NET_MODE_MACVLAN = 4, /* a macvlan slave, mode `private`: the same for kernels without ipvlan */
};

#define DOME_NET_DEFAULT_STATE_DIR "/run/dome/net"
#define DOME_NET_DEFAULT_PASTA "/usr/bin/pasta"
#define DOME_NET_LINK_PREFIX "domeh" /* egress-side veth ends: domeh<slot> */
#define DOME_NET_TABLE "dome"        /* nftables table (family inet) */

struct dome_net_config {
  enum dome_net_mode mode;
  const char *state_dir;  /* NULL = DOME_NET_DEFAULT_STATE_DIR; created 0700 if missing */
  const char *pasta_path; /* NULL = DOME_NET_DEFAULT_PASTA (user mode only) */
  /* Pool: pool.length 0 = choose a /16 of 100.64.0.0/10 free of host routes (dome_net_choose_pool);
   * an explicit pool that overlaps a host route is refused (-EADDRINUSE). */
  struct dome_net_prefix pool;
  uint8_t block_length; /* 30 (default when 0) or 31 */
  uint32_t mtu;         /* veth MTU in bytes; 0 = 65520 in user mode (pasta's tap), 1500 routed */
  /* Per-jail byte quota of the egress path (bytes forwarded in either direction between the jail and the
   * outside), for jails whose options give none; 0 = unlimited. Once used up, the jail's TCP packets are
   * answered with a reset, its other packets rejected, and packets towards it dropped. */
  uint64_t jail_quota_bytes;
  /* IPv6 pool: pool6.length 0 = a random RFC 4193 ULA /48 (fdXX:XXXX:XXXX::/48, a fresh global ID per
   * open) free of the host's IPv6 routes; explicit: must be a /48 inside fc00::/7. Each jail gets a /64.
   * IPv6 is plumbed when the egress side has it: user mode when pasta found an IPv6 route on the host,
   * routed mode when net.ipv6.conf.all.forwarding=1 (set by the operator, never by dome). */
  struct dome_net_prefix6 pool6;
  /* User mode: jails' TCP flows (IPv4, and IPv6 when plumbed) go through a splice(2) relay in this process
   * (nftables tproxy in the egress namespace) instead of pasta's tap: about twice the throughput
   * (docs/networking.md). The jail's handshake then completes before the relay's outgoing connect: a
   * permitted peer that refuses shows as a reset after connect. UDP stays on pasta. Ignored in routed mode.
   */
  bool tcp_relay;
  /* ipvlan / macvlan modes (ignored otherwise): the host interface jails join (its IPv4 network holds
   * uplink_pool), the addresses handed to jails (one per jail; must lie inside one IPv4 network of the
   * uplink and belong to dome alone), and the router on that network for permitted destinations outside
   * it (0: none — such destinations get no route). IPv4 only. */
  const char *uplink;
  struct dome_net_prefix uplink_pool;
  uint32_t uplink_gateway; /* host byte order */
};

struct dome_net;      /* the egress side of one supervisor */
struct dome_net_jail; /* the plumbing of one jail */

/* Lock the state directory for this process (flock of <state_dir>/lock until dome_net_close; -EBUSY when
 * another live supervisor holds it), reclaim leftovers recorded there (see dome_net_reclaim), then prepare
 * the egress side: user mode creates the egress namespace, enables forwarding in it, installs table inet dome
 * and starts pasta (waits up to 5 s for its interface); routed mode checks /proc/sys/net/ipv4/ip_forward
 * (-ENOTSUP with the reason when 0) and installs the table in the host namespace.
 * Needs CAP_NET_ADMIN and CAP_SYS_ADMIN. Returns 0 or -errno (-ENOTSUP, -ENOENT pasta missing,
 * -EADDRINUSE / -EADDRNOTAVAIL pool, -EIO netlink/nftables, ...). */
int dome_net_open(const struct dome_net_config *config, struct dome_net **net_out, dome_error *err);

/* Tear down every jail still set up, the table, pasta and the egress namespace; remove the state files,
 * the lock and the (then empty) state directory.
 * NULL is accepted. */
void dome_net_close(struct dome_net *net);

/* The mode in effect (USER or ROUTED; AUTO resolved by dome_net_open). */
enum dome_net_mode dome_net_mode_in_effect(const struct dome_net *net);
/* Whether jails get IPv6 paths; *reason (may be NULL) says why not. */
bool dome_net_ipv6_available(const struct dome_net *net, const char **reason);

/* "auto", "user", "routed", "ipvlan", "macvlan". */
const char *dome_net_mode_name(enum dome_net_mode mode);

/* Remove what a dead process with this state directory left (-EBUSY, nothing touched, while a live
 * process holds the directory's lock): the links named by slot-<i> files (and
 * only those), table inet dome of the host namespace in routed mode, the pasta recorded in pasta.pid
 * (only if /proc/<pid>/cmdline still names this state directory), and in the ipvlan/macvlan modes the
 * jail link recorded in each uplink-<i> file (found in the namespace whose device and inode it names, if
 * a process still holds that namespace). Returns the number of objects removed (>= 0) or -errno. */
int dome_net_reclaim(const struct dome_net_config *config, dome_error *err);

/* Build the path for one jail (see the top of this file). child_pid: a process in the jail's network
 * namespace (the jail's init; /proc/<pid>/ns/net). entries: the jail's flattened network entries.
 * When the plan needs no egress, *jail_out is still set (no link is made) so that the resolv.conf text
 * is available. Returns 0, -E2BIG/-EINVAL (tables), -ENOSPC (pool exhausted), -ESRCH (pid gone),
 * -EIO (netlink/nftables, message from libnl/libnftables). On failure nothing is left behind. */
int dome_net_jail_setup(struct dome_net *net, pid_t child_pid, const struct dome_net_entry *entries,
                        size_t count, struct dome_net_jail **jail_out, dome_error *err);

/* Per-jail options of dome_net_jail_setup_options(). */
struct dome_net_jail_options {
  uint64_t quota_bytes; /* egress path byte quota (see dome_net_config); 0 = the config's jail_quota_bytes */
};

/* dome_net_jail_setup() with options (NULL = defaults). Same results. */
int dome_net_jail_setup_options(struct dome_net *net, pid_t child_pid, const struct dome_net_entry *entries,
                                size_t count, const struct dome_net_jail_options *options,
                                struct dome_net_jail **jail_out, dome_error *err);

/* What one jail did through its egress path so far (nftables named counters of table inet dome). */
struct dome_net_jail_usage {
  uint64_t egress_bytes;  /* bytes (IP packets) the jail sent through the path, accepted or not */
  uint64_t ingress_bytes; /* bytes (IP packets) sent to the jail through the path */
  uint64_t connections;   /* new flows (TCP connections, UDP flows) the egress filter accepted */
  uint64_t refused;       /* new flows the egress filter rejected (the BPF programs refuse most first) */
  uint64_t quota_bytes;   /* the jail's byte quota, 0 = unlimited */
  uint64_t quota_used;    /* bytes counted against it (both directions) */
  bool quota_exceeded;    /* the quota ran out: packets were cut */
};

/* Read the jail's counters; call before dome_net_jail_teardown. A jail without egress reads all zero.
 * Returns 0 or -EIO (nftables) with *usage zeroed. */
int dome_net_jail_usage(struct dome_net *net, const struct dome_net_jail *jail,
                        struct dome_net_jail_usage *usage, dome_error *err);

/* Remove the jail's veth (both ends), its nftables chain and map element, and its slot. Safe after the
 * jail's namespace died (the kernel destroyed the pair with it). NULL is accepted. Returns 0 or -errno
 * (the objects are released in any case). */
int dome_net_jail_teardown(struct dome_net *net, struct dome_net_jail *jail, dome_error *err);

/* The resolv.conf text for this jail (valid until teardown). The jail must write it as /etc/resolv.conf
 * of its root (e.g. a read-only bind mount of a file over /etc/resolv.conf) before exec. */
const char *dome_net_jail_resolv_conf(const struct dome_net_jail *jail);
/* The jail's IPv6 address (16 bytes, network order) when it has an IPv6 path: returns true. */
bool dome_net_jail_address6(const struct dome_net_jail *jail, uint8_t out[16]);
/* The jail's address and gateway (host byte order); 0 when the jail has no egress. */
uint32_t dome_net_jail_address(const struct dome_net_jail *jail);
uint32_t dome_net_jail_gateway(const struct dome_net_jail *jail);
const struct dome_net_plan *dome_net_jail_plan(const struct dome_net_jail *jail);

/* Adapter for jail_config.on_namespaces_ready: context is a struct dome_net_hook filled by the caller;
 * on success hook->jail is set (tear it down after jail_run returns). */
struct dome_net_hook {
  struct dome_net *net;
  const struct dome_net_entry *entries;
  size_t count;
  struct dome_net_jail *jail; /* out */
  uint64_t quota_bytes;       /* egress path byte quota; 0 = the config's jail_quota_bytes */
};
int dome_net_on_namespaces_ready(void *context, pid_t child_pid, dome_error *err);

/* Count what this supervisor owns on the egress side right now: links named DOME_NET_LINK_PREFIX* and
 * per-jail chains of table inet dome (for tests, metrics and leak checks); in the ipvlan/macvlan modes,
 * whose links and chains live in the jails' namespaces, the jails whose namespace it still holds (one link
 * and one chain each). Returns 0 or -errno. */
int dome_net_count_owned(struct dome_net *net, size_t *links_out, size_t *chains_out, dome_error *err);

/* ---------------------------------------------------------------- dome doctor */

struct dome_net_host_report {
  bool ip_forward; /* /proc/sys/net/ipv4/ip_forward == 1 */
  bool nftables;   /* libnftables can list the ruleset */
  bool pasta;      /* the pasta binary is executable */
  bool routed_available;
  bool user_available;
  enum dome_net_mode auto_mode; /* what DOME_NET_MODE_AUTO would choose on this host */
  bool ipv6_forward;            /* /proc/sys/net/ipv6/conf/all/forwarding == 1 (routed IPv6 egress) */
  bool ipvlan;                  /* the kernel creates ipvlan links (ipvlan mode possible) */
  bool macvlan;                 /* the kernel creates macvlan links (macvlan mode possible) */
  char reasons[1024];           /* '\n'-separated lines saying what is missing and why */
};

/* Probe without changing the host (ipvlan/macvlan: one link of each kind is made on a veth pair inside a
 * throw-away network namespace, which takes them with it). Never fails. */
void dome_net_probe_host(const char *pasta_path, struct dome_net_host_report *report);

/* Parse an egress mode name ("auto", "user", "routed", "ipvlan", "macvlan"). Returns 0 or -EINVAL. */
int dome_net_mode_parse(const char *name, enum dome_net_mode *mode);

#endif
