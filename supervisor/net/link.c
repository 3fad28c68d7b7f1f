/* Links, addresses and routes through libnl-route (rtnetlink(7)); no `ip` is ever run.
 * Every function acts in the network namespace of the calling thread (see netns.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include <linux/if_addr.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <linux/fib_rules.h>

#include "supervisor/net/net_internal.h"

void net_format_ipv4(uint32_t address, char out[16]) {
  struct in_addr in = {htonl(address)};
  inet_ntop(AF_INET, &in, out, 16);
}

int net_nl_error(dome_error *err, int nl_error, const char *what) {
  int e;
  switch (nl_error < 0 ? -nl_error : nl_error) {
    case NLE_EXIST:
      e = EEXIST;
      break;
    case NLE_NOMEM:
      e = ENOMEM;
      break;
    case NLE_PERM:
      e = EPERM;
      break;
    case NLE_NOACCESS:
      e = EACCES;
      break;
    case NLE_OBJ_NOTFOUND:
      e = ENOENT;
      break;
    case NLE_NODEV:
      e = ENODEV;
      break;
    case NLE_INVAL:
      e = EINVAL;
      break;
    case NLE_BUSY:
      e = EBUSY;
      break;
    case NLE_RANGE:
      e = ERANGE;
      break;
    case NLE_AF_NOSUPPORT:
      e = EAFNOSUPPORT;
      break;
    default:
      e = EIO;
      break;
  }
  return dome_error_set(err, e, "%s: %s", what, nl_geterror(nl_error));
}

int net_nl_open(struct nl_sock **sock_out, dome_error *err) {
  struct nl_sock *sock = nl_socket_alloc();
  if (sock == NULL) return dome_error_set(err, ENOMEM, "netlink socket: out of memory");
  int r = nl_connect(sock, NETLINK_ROUTE);
  if (r < 0) {
    nl_socket_free(sock);
    return net_nl_error(err, r, "connect rtnetlink socket");
  }
  /* Never inherited by a jail forked later (libnl does not always ask for SOCK_CLOEXEC). */
  int flags = fcntl(nl_socket_get_fd(sock), F_GETFD);
  if (flags >= 0) fcntl(nl_socket_get_fd(sock), F_SETFD, flags | FD_CLOEXEC);
  *sock_out = sock;
  return 0;
}

void net_nl_close(struct nl_sock *sock) {
  if (sock) nl_socket_free(sock);
}

int net_link_veth_create(struct nl_sock *sock, const char *name, const char *peer_name, pid_t peer_pid,
                         uint32_t mtu, dome_error *err) {
  struct rtnl_link *link = rtnl_link_veth_alloc();
  if (link == NULL) return dome_error_set(err, ENOMEM, "veth `%s`: out of memory", name);
  struct rtnl_link *peer = rtnl_link_veth_get_peer(link);
  rtnl_link_set_name(link, name);
  rtnl_link_set_name(peer, peer_name);
  if (mtu) {
    rtnl_link_set_mtu(link, mtu);
    rtnl_link_set_mtu(peer, mtu);
  }
  /* The peer is born in the jail's namespace (IFLA_NET_NS_PID): it never exists on the egress side, so
   * its name cannot collide there and a crash between two steps cannot strand it outside the jail. */
  rtnl_link_set_ns_pid(peer, peer_pid);
  int r = rtnl_link_add(sock, link, NLM_F_CREATE | NLM_F_EXCL);
  rtnl_link_put(peer);
  rtnl_link_veth_release(link);
  if (r < 0) {
    char what[96];
    snprintf(what, sizeof what, "create veth `%s` (peer `%s` in pid %d's namespace)", name, peer_name,
             (int)peer_pid);
    return net_nl_error(err, r, what);
  }
  return 0;
}

int net_link_ifindex(struct nl_sock *sock, const char *name, dome_error *err) {
  struct rtnl_link *link = NULL;
  int r = rtnl_link_get_kernel(sock, 0, name, &link);
  if (r < 0) {
    char what[64];
    snprintf(what, sizeof what, "find link `%s`", name);
    return net_nl_error(err, r, what);
  }
  int index = rtnl_link_get_ifindex(link);
  rtnl_link_put(link);
  return index;
}

int net_link_set_up(struct nl_sock *sock, const char *name, dome_error *err) {
  struct rtnl_link *link = NULL;
  char what[64];
  snprintf(what, sizeof what, "set link `%s` up", name);
  int r = rtnl_link_get_kernel(sock, 0, name, &link);
  if (r < 0) return net_nl_error(err, r, what);
  struct rtnl_link *change = rtnl_link_alloc();
  if (change == NULL) {
    rtnl_link_put(link);
    return dome_error_set(err, ENOMEM, "%s: out of memory", what);
  }
  rtnl_link_set_flags(change, IFF_UP);
  r = rtnl_link_change(sock, link, change, 0);
  rtnl_link_put(change);
  rtnl_link_put(link);
  return r < 0 ? net_nl_error(err, r, what) : 0;
}

static struct nl_addr *ipv4_addr(uint32_t address, uint8_t length) {
  uint32_t network = htonl(address);
  struct nl_addr *addr = nl_addr_build(AF_INET, &network, sizeof network);
  if (addr) nl_addr_set_prefixlen(addr, length);
  return addr;
}

/* Add `local` (consumed) to link ifindex with the address flags given; `what` describes it for errors. One
 * builder for both families: the caller formats the address and chooses the flags. */
static int address_add(struct nl_sock *sock, int ifindex, int family, struct nl_addr *local, unsigned flags,
                       const char *what, dome_error *err) {
  struct rtnl_addr *rtaddr = rtnl_addr_alloc();
  int r = -NLE_NOMEM;
  if (rtaddr && local) {
    rtnl_addr_set_ifindex(rtaddr, ifindex);
    rtnl_addr_set_family(rtaddr, family);
    if (flags) rtnl_addr_set_flags(rtaddr, flags);
    r = rtnl_addr_set_local(rtaddr, local);
    if (r >= 0) r = rtnl_addr_add(sock, rtaddr, 0);
  }
  if (local) nl_addr_put(local);
  if (rtaddr) rtnl_addr_put(rtaddr);
  return r < 0 ? net_nl_error(err, r, what) : 0;
}

/* Add a route to `dst` (consumed) on link ifindex, via `gateway` (consumed; NULL: on-link, scope link);
 * `onlink` marks the gateway reachable on the link whatever the link's own addresses (RTNH_F_ONLINK).
 * One builder for both families; `what` describes the route for errors. */
static int route_add(struct nl_sock *sock, int family, struct nl_addr *dst, struct nl_addr *gateway,
                     bool onlink, int ifindex, const char *what, dome_error *err) {
  struct rtnl_route *route = rtnl_route_alloc();
  struct rtnl_nexthop *hop = rtnl_route_nh_alloc();
  int r = -NLE_NOMEM;
  if (route && hop && dst) {
    rtnl_route_set_family(route, (uint8_t)family);
    rtnl_route_set_table(route, RT_TABLE_MAIN);
    rtnl_route_set_scope(route, gateway ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK);
    rtnl_route_set_protocol(route, RTPROT_STATIC);
    r = rtnl_route_set_dst(route, dst);
    rtnl_route_nh_set_ifindex(hop, ifindex);
    if (gateway) {
      rtnl_route_nh_set_gateway(hop, gateway);
      if (onlink) rtnl_route_nh_set_flags(hop, RTNH_F_ONLINK);
    }
    if (r >= 0) {
      rtnl_route_add_nexthop(route, hop);
      hop = NULL; /* owned by the route now */
      r = rtnl_route_add(sock, route, NLM_F_CREATE | NLM_F_EXCL);
    }
  }
  if (hop) rtnl_route_nh_free(hop);
  if (dst) nl_addr_put(dst);
  if (gateway) nl_addr_put(gateway);
  if (route) rtnl_route_put(route);
  return r < 0 ? net_nl_error(err, r, what) : 0;
}

int net_address_add(struct nl_sock *sock, int ifindex, uint32_t address, uint8_t length, dome_error *err) {
  char text[16], what[80];
  net_format_ipv4(address, text);
  snprintf(what, sizeof what, "add address %s/%u to link %d", text, length, ifindex);
  return address_add(sock, ifindex, AF_INET, ipv4_addr(address, length), 0, what, err);
}

/* dst on link ifindex: via `gateway`, or on-link when gateway is 0; `onlink` for a jail's uplink slave,
 * which holds only a /32. */
static int route_add4(struct nl_sock *sock, struct dome_net_prefix dst, uint32_t gateway, bool onlink,
                      int ifindex, dome_error *err) {
  char dst_text[16], gw_text[16], what[96];
  net_format_ipv4(dst.address, dst_text);
  net_format_ipv4(gateway, gw_text);
  snprintf(what, sizeof what, "add route %s/%u %s%s", dst_text, dst.length, gateway ? "via " : "on-link",
           gateway ? gw_text : "");
  struct nl_addr *gateway_addr = NULL;
  if (gateway && (gateway_addr = ipv4_addr(gateway, 32)) == NULL) return net_nl_error(err, -NLE_NOMEM, what);
  return route_add(sock, AF_INET, ipv4_addr(dst.address, dst.length), gateway_addr, onlink, ifindex, what,
                   err);
}

int net_route_add(struct nl_sock *sock, struct dome_net_prefix dst, uint32_t gateway, int ifindex,
                  dome_error *err) {
  return route_add4(sock, dst, gateway, false, ifindex, err);
}

int net_route_add_onlink(struct nl_sock *sock, struct dome_net_prefix dst, uint32_t gateway, int ifindex,
                         dome_error *err) {
  return route_add4(sock, dst, gateway, true, ifindex, err);
}

int net_link_delete(struct nl_sock *sock, const char *name, dome_error *err) {
  char what[64];
  snprintf(what, sizeof what, "delete link `%s`", name);
  struct rtnl_link *link = rtnl_link_alloc();
  if (link == NULL) return dome_error_set(err, ENOMEM, "%s: out of memory", what);
  rtnl_link_set_name(link, name);
  int r = rtnl_link_delete(sock, link);
  rtnl_link_put(link);
  if (r == -NLE_NODEV || r == -NLE_OBJ_NOTFOUND) return dome_error_set(err, ENODEV, "%s: no such link", what);
  return r < 0 ? net_nl_error(err, r, what) : 0;
}

struct prefix_collect {
  struct dome_net_prefix *out;
  size_t max, count;
};

static void collect_prefix(struct prefix_collect *collect, struct nl_addr *addr) {
  if (addr == NULL || nl_addr_get_family(addr) != AF_INET || collect->count == collect->max) return;
  uint32_t network = 0; /* a default route's destination carries no address bytes at all */
  if (nl_addr_get_len(addr) >= sizeof network)
    memcpy(&network, nl_addr_get_binary_addr(addr), sizeof network);
  unsigned length = nl_addr_get_prefixlen(addr);
  if (length > 32) return;
  uint32_t value = ntohl(network);
  if (length < 32) value &= length == 0 ? 0 : 0xffffffffu << (32 - length);
  collect->out[collect->count++] = (struct dome_net_prefix){value, (uint8_t)length};
}

static void collect_route(struct nl_object *object, void *opaque) {
  struct rtnl_route *route = (struct rtnl_route *)object;
  uint32_t table = rtnl_route_get_table(route);
  if (table != RT_TABLE_MAIN && table != RT_TABLE_LOCAL) return;
  if (rtnl_route_get_type(route) != RTN_UNICAST && rtnl_route_get_type(route) != RTN_LOCAL) return;
  collect_prefix(opaque, rtnl_route_get_dst(route));
}

static void collect_address(struct nl_object *object, void *opaque) {
  collect_prefix(opaque, rtnl_addr_get_local((struct rtnl_addr *)object));
}

int net_host_prefixes(struct nl_sock *sock, struct dome_net_prefix *out, size_t max, size_t *count_out,
                      dome_error *err) {
  struct prefix_collect collect = {out, max, 0};
  struct nl_cache *cache = NULL;
  int r = rtnl_route_alloc_cache(sock, AF_INET, 0, &cache);
  if (r < 0) return net_nl_error(err, r, "read host routes");
  nl_cache_foreach(cache, collect_route, &collect);
  nl_cache_free(cache);
  r = rtnl_addr_alloc_cache(sock, &cache);
  if (r < 0) return net_nl_error(err, r, "read host addresses");
  nl_cache_foreach(cache, collect_address, &collect);
  nl_cache_free(cache);
  *count_out = collect.count;
  return 0;
}

struct address_collect {
  struct net_local_address *out;
  size_t max, *count;
  bool overflow;
};

static void collect_local(struct nl_object *object, void *opaque) {
  struct address_collect *collect = opaque;
  struct nl_addr *addr = rtnl_addr_get_local((struct rtnl_addr *)object);
  if (addr == NULL) return;
  struct net_local_address one = {.family = nl_addr_get_family(addr)};
  size_t length = one.family == AF_INET ? 4 : one.family == AF_INET6 ? 16 : 0;
  if (length == 0 || nl_addr_get_len(addr) != length) return;
  memcpy(one.bytes, nl_addr_get_binary_addr(addr), length);
  for (size_t i = 0; i < *collect->count; i++)
    if (memcmp(&collect->out[i], &one, sizeof one) == 0) return;
  if (*collect->count == collect->max) {
    collect->overflow = true;
    return;
  }
  collect->out[(*collect->count)++] = one;
}

int net_local_addresses(struct nl_sock *sock, struct net_local_address *out, size_t max, size_t *count,
                        dome_error *err) {
  struct nl_cache *cache = NULL;
  int r = rtnl_addr_alloc_cache(sock, &cache);
  if (r < 0) return net_nl_error(err, r, "read local addresses");
  struct address_collect collect = {out, max, count, false};
  nl_cache_foreach(cache, collect_local, &collect);
  nl_cache_free(cache);
  if (collect.overflow)
    return dome_error_set(err, E2BIG, "more than %zu local addresses: the egress filter would not hold them",
                          max);
  return 0;
}

struct name_collect {
  const char *prefix;
  char (*names)[16];
  size_t max, count;
};

static void collect_link(struct nl_object *object, void *opaque) {
  struct name_collect *collect = opaque;
  const char *name = rtnl_link_get_name((struct rtnl_link *)object);
  if (name == NULL || strncmp(name, collect->prefix, strlen(collect->prefix)) != 0) return;
  if (collect->count == collect->max) return;
  snprintf(collect->names[collect->count++], 16, "%s", name);
}

int net_links_with_prefix(struct nl_sock *sock, const char *prefix, char (*names)[16], size_t max,
                          size_t *count_out, dome_error *err) {
  struct nl_cache *cache = NULL;
  int r = rtnl_link_alloc_cache(sock, AF_UNSPEC, &cache);
  if (r < 0) return net_nl_error(err, r, "list links");
  struct name_collect collect = {prefix, names, max, 0};
  nl_cache_foreach(cache, collect_link, &collect);
  nl_cache_free(cache);
  *count_out = collect.count;
  return 0;
}

/* ---- IPv6 ---- */

static struct nl_addr *ipv6_addr(const uint8_t address[16], uint8_t length) {
  struct nl_addr *addr = nl_addr_build(AF_INET6, address, 16);
  if (addr) nl_addr_set_prefixlen(addr, length);
  return addr;
}

int net_address_add6(struct nl_sock *sock, int ifindex, const uint8_t address[16], uint8_t length,
                     dome_error *err) {
  char text[INET6_ADDRSTRLEN], what[96];
  inet_ntop(AF_INET6, address, text, sizeof text);
  snprintf(what, sizeof what, "add address %s/%u to link %d", text, length, ifindex);
  /* no duplicate address detection: the /64 is the jail's alone, and a tentative address would make the
   * jail's first connects fail (EADDRNOTAVAIL) for about a second */
  return address_add(sock, ifindex, AF_INET6, ipv6_addr(address, length), IFA_F_NODAD, what, err);
}

int net_route_add6(struct nl_sock *sock, const struct dome_net_prefix6 *dst, const uint8_t gateway[16],
                   int ifindex, dome_error *err) {
  char dst_text[INET6_ADDRSTRLEN], gw_text[INET6_ADDRSTRLEN], what[160];
  inet_ntop(AF_INET6, dst->address, dst_text, sizeof dst_text);
  inet_ntop(AF_INET6, gateway, gw_text, sizeof gw_text);
  snprintf(what, sizeof what, "add route %s/%u via %s", dst_text, dst->length, gw_text);
  struct nl_addr *gateway_addr = ipv6_addr(gateway, 128);
  if (gateway_addr == NULL) return net_nl_error(err, -NLE_NOMEM, what);
  return route_add(sock, AF_INET6, ipv6_addr(dst->address, dst->length), gateway_addr, false, ifindex, what,
                   err);
}

struct prefix6_collect {
  struct dome_net_prefix6 *out;
  size_t max, count;
  bool default_route;
};

static void collect_route6(struct nl_object *object, void *opaque) {
  struct prefix6_collect *collect = opaque;
  struct rtnl_route *route = (struct rtnl_route *)object;
  uint32_t table = rtnl_route_get_table(route);
  if (table != RT_TABLE_MAIN && table != RT_TABLE_LOCAL) return;
  struct nl_addr *dst = rtnl_route_get_dst(route);
  if (dst == NULL || nl_addr_get_family(dst) != AF_INET6) return;
  unsigned length = nl_addr_get_prefixlen(dst);
  if (length == 0 && rtnl_route_get_type(route) == RTN_UNICAST) collect->default_route = true;
  if (length == 0 || length > 128 || collect->count == collect->max) return;
  struct dome_net_prefix6 *p = &collect->out[collect->count++];
  memset(p, 0, sizeof *p);
  if (nl_addr_get_len(dst) == 16) memcpy(p->address, nl_addr_get_binary_addr(dst), 16);
  p->length = (uint8_t)length;
}

int net_host_prefixes6(struct nl_sock *sock, struct dome_net_prefix6 *out, size_t max, size_t *count_out,
                       bool *default_route_out, dome_error *err) {
  struct prefix6_collect collect = {out, max, 0, false};
  struct nl_cache *cache = NULL;
  int r = rtnl_route_alloc_cache(sock, AF_INET6, 0, &cache);
  if (r < 0) return net_nl_error(err, r, "read host IPv6 routes");
  nl_cache_foreach(cache, collect_route6, &collect);
  nl_cache_free(cache);
  *count_out = collect.count;
  if (default_route_out) *default_route_out = collect.default_route;
  return 0;
}

/* ---- policy routing for the TCP relay (tproxy): packets marked `mark` are delivered locally ---- */

int net_tproxy_routing(struct nl_sock *sock, int family, uint32_t mark, uint32_t table, dome_error *err) {
  struct rtnl_rule *rule = rtnl_rule_alloc();
  if (rule == NULL) return dome_error_set(err, ENOMEM, "relay rule: out of memory");
  rtnl_rule_set_family(rule, family);
  rtnl_rule_set_mark(rule, mark);
  rtnl_rule_set_mask(rule, 0xffffffff);
  rtnl_rule_set_table(rule, table);
  rtnl_rule_set_action(rule, FR_ACT_TO_TBL);
  rtnl_rule_set_prio(rule, 100);
  int r = rtnl_rule_add(sock, rule, NLM_F_CREATE);
  rtnl_rule_put(rule);
  if (r < 0) return net_nl_error(err, r, "add rule fwmark -> relay table");
  int lo = net_link_ifindex(sock, "lo", err);
  if (lo < 0) return lo;
  struct rtnl_route *route = rtnl_route_alloc();
  struct rtnl_nexthop *hop = rtnl_route_nh_alloc();
  static const uint8_t zero6[16];
  struct nl_addr *any = family == AF_INET6 ? ipv6_addr(zero6, 0) : ipv4_addr(0, 0);
  r = -NLE_NOMEM;
  if (route && hop && any) {
    rtnl_route_set_family(route, (uint8_t)family);
    rtnl_route_set_table(route, table);
    rtnl_route_set_type(route, RTN_LOCAL);
    rtnl_route_set_scope(route, RT_SCOPE_HOST);
    rtnl_route_set_protocol(route, RTPROT_STATIC);
    r = rtnl_route_set_dst(route, any);
    rtnl_route_nh_set_ifindex(hop, lo);
    if (r >= 0) {
      rtnl_route_add_nexthop(route, hop);
      hop = NULL;
      r = rtnl_route_add(sock, route, NLM_F_CREATE | NLM_F_EXCL);
    }
  }
  if (hop) rtnl_route_nh_free(hop);
  if (any) nl_addr_put(any);
  if (route) rtnl_route_put(route);
  return r < 0 ? net_nl_error(err, r, "add local default route of the relay table") : 0;
}
