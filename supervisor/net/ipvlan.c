/* The ipvlan / macvlan egress modes: the jail's namespace gets a slave link (`eth0`) of an operator-named
 * host uplink, addressed from an operator pool on that uplink's IPv4 network.
 *
 *   jail netns                                     host netns
 *   eth0 (ipvlan L2 private | macvlan private) ── uplink (its own addresses unreachable) ── peers, router
 *   table inet dome: the jail chain on output, counters, quota; new inbound dropped
 *
 * The jail's packets leave through the uplink's driver directly: no veth hop, no host forwarding, no
 * second TCP termination (pasta, relay). What the other modes do on the egress side runs in the jail's
 * own namespace instead (firewall.c net_nft_uplink_install; the jail holds no capability there). Slaves of
 * one master never reach each other (`private`) nor the master's own addresses (their frames towards the
 * master's MAC go out on the wire, where the master never sees them; the jail chain also rejects every
 * address of the host, and the pool). Spec: Documentation/networking/ipvlan.rst (L2 mode, flag private),
 * macvlan's MACVLAN_MODE_PRIVATE (include/uapi/linux/if_link.h), rtnetlink(7).
 *
 * Addresses: slot i is the pool's address i; the network's own and broadcast addresses, the router and
 * the host's addresses inside the pool are never handed out. The jail's address is a /32 (no connected
 * route): each permitted prefix inside the uplink's network gets an on-link route, each one outside it a
 * route via the router (RTNH_F_ONLINK, so the router's own address gets no route), and a permitted prefix
 * wider than the network also the network itself (inside the permitted prefix: nothing widens).
 *
 * State: `uplink-<slot>` files (kind, uplink, the jail namespace's device:inode). The namespace keeps
 * the link; reclaim finds a namespace still held by some process (an orphan of a crashed supervisor)
 * through /proc/<pid>/ns/net and deletes the link there. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/ipvlan.h>
#include <netlink/route/link/macvlan.h>
#include <netlink/route/route.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/net/net_internal.h"

#define JAIL_LINK_NAME "eth0"
#define UPLINK_SLOTS_MAX 65536

bool net_mode_is_uplink(enum dome_net_mode mode) {
  return mode == DOME_NET_MODE_IPVLAN || mode == DOME_NET_MODE_MACVLAN;
}

static uint32_t mask(uint8_t length) {
  return length == 0 ? 0 : 0xffffffffu << (32 - length);
}

static bool contains(struct dome_net_prefix outer, struct dome_net_prefix inner) {
  return outer.length <= inner.length && ((outer.address ^ inner.address) & mask(outer.length)) == 0;
}

/* ---- links ---- */

/* Create the slave `name` of master in the namespace named by ns_fd (>= 0) or ns_pid. ipvlan: libnl 3.7's
 * rtnl_link_ipvlan_* set the mode but not IFLA_IPVLAN_FLAGS, so the request is built with libnl's message
 * API (mode L2, flag private); macvlan through rtnl_link_macvlan_* (mode private). */
static int slave_create(struct nl_sock *sock, enum dome_net_mode kind, int master, const char *name,
                        int ns_fd, pid_t ns_pid, dome_error *err) {
  const char *kind_name = kind == DOME_NET_MODE_IPVLAN ? "ipvlan" : "macvlan";
  char what[96];
  snprintf(what, sizeof what, "create %s link `%s` on ifindex %d", kind_name, name, master);
  int r;
  if (kind == DOME_NET_MODE_IPVLAN) {
    struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    if (msg == NULL) return dome_error_set(err, ENOMEM, "%s: out of memory", what);
    struct ifinfomsg header = {.ifi_family = AF_UNSPEC};
    struct nlattr *info = NULL, *data = NULL;
    r = nlmsg_append(msg, &header, sizeof header, NLMSG_ALIGNTO);
    if (r >= 0) r = nla_put_string(msg, IFLA_IFNAME, name);
    if (r >= 0) r = nla_put_u32(msg, IFLA_LINK, (uint32_t)master);
    if (r >= 0 && ns_fd >= 0) r = nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)ns_fd);
    if (r >= 0 && ns_fd < 0 && ns_pid > 0) r = nla_put_u32(msg, IFLA_NET_NS_PID, (uint32_t)ns_pid);
    if (r >= 0 && (info = nla_nest_start(msg, IFLA_LINKINFO)) == NULL) r = -NLE_NOMEM;
    if (r >= 0) r = nla_put_string(msg, IFLA_INFO_KIND, "ipvlan");
    if (r >= 0 && (data = nla_nest_start(msg, IFLA_INFO_DATA)) == NULL) r = -NLE_NOMEM;
    if (r >= 0) r = nla_put_u16(msg, IFLA_IPVLAN_MODE, IPVLAN_MODE_L2);
    if (r >= 0) r = nla_put_u16(msg, IFLA_IPVLAN_FLAGS, IPVLAN_F_PRIVATE);
    if (r >= 0) r = nla_nest_end(msg, data);
    if (r >= 0) r = nla_nest_end(msg, info);
    if (r >= 0)
      r = nl_send_sync(sock, msg); /* frees msg */
    else
      nlmsg_free(msg);
  } else {
    struct rtnl_link *link = rtnl_link_macvlan_alloc();
    if (link == NULL) return dome_error_set(err, ENOMEM, "%s: out of memory", what);
    rtnl_link_set_name(link, name);
    rtnl_link_set_link(link, master);
    if (ns_fd >= 0)
      rtnl_link_set_ns_fd(link, ns_fd);
    else if (ns_pid > 0)
      rtnl_link_set_ns_pid(link, ns_pid);
    r = rtnl_link_macvlan_set_mode(link, MACVLAN_MODE_PRIVATE);
    if (r >= 0) r = rtnl_link_add(sock, link, NLM_F_CREATE | NLM_F_EXCL);
    rtnl_link_put(link);
  }
  return r < 0 ? net_nl_error(err, r, what) : 0;
}

/* ---- open ---- */

struct network_find {
  int ifindex;
  struct dome_net_prefix pool, found;
  bool have;
};

static void find_network(struct nl_object *object, void *opaque) {
  struct network_find *find = opaque;
  struct rtnl_addr *addr = (struct rtnl_addr *)object;
  struct nl_addr *local = rtnl_addr_get_local(addr);
  if (find->have || rtnl_addr_get_ifindex(addr) != find->ifindex || local == NULL ||
      nl_addr_get_family(local) != AF_INET || nl_addr_get_len(local) != 4)
    return;
  uint32_t network;
  memcpy(&network, nl_addr_get_binary_addr(local), 4);
  uint8_t length = (uint8_t)rtnl_addr_get_prefixlen(addr);
  struct dome_net_prefix prefix = {ntohl(network) & mask(length), length};
  if (length <= 32 && contains(prefix, find->pool)) {
    find->found = prefix;
    find->have = true;
  }
}

static void reserve(struct dome_net *net, uint32_t address) {
  if (contains(net->uplink_pool, (struct dome_net_prefix){address, 32}) &&
      address - net->uplink_pool.address < net->slot_count)
    net->slot_used[address - net->uplink_pool.address] = 1;
}

int net_uplink_open(struct dome_net *net, const struct dome_net_config *config, dome_error *err) {
  const char *kind = dome_net_mode_name(net->mode);
  if (config->uplink == NULL || config->uplink[0] == '\0' || strlen(config->uplink) >= sizeof net->uplink)
    return dome_error_set(err, EINVAL, "%s mode needs the uplink interface's name (net_uplink)", kind);
  if (config->uplink_pool.length == 0 || config->uplink_pool.length > 32 ||
      (config->uplink_pool.address & ~mask(config->uplink_pool.length)) != 0)
    return dome_error_set(err, EINVAL, "%s mode needs an address pool A.B.C.D/LEN (net_uplink_pool)", kind);
  snprintf(net->uplink, sizeof net->uplink, "%s", config->uplink);
  net->uplink_pool = config->uplink_pool;
  net->uplink_gateway = config->uplink_gateway;
  int r = net_nl_open(&net->egress_sock, err);
  if (r < 0) return r;
  if ((r = net_link_ifindex(net->egress_sock, net->uplink, err)) < 0)
    return dome_error_wrap(err, "uplink (net_uplink)");
  net->uplink_ifindex = r;
  struct nl_cache *cache = NULL;
  if ((r = rtnl_addr_alloc_cache(net->egress_sock, &cache)) < 0)
    return net_nl_error(err, r, "read addresses");
  struct network_find find = {.ifindex = net->uplink_ifindex, .pool = net->uplink_pool};
  nl_cache_foreach(cache, find_network, &find);
  nl_cache_free(cache);
  char pool_text[16], gateway_text[16];
  net_format_ipv4(net->uplink_pool.address, pool_text);
  if (!find.have)
    return dome_error_set(err, EINVAL, "address pool %s/%u (net_uplink_pool) lies in no IPv4 network of `%s`",
                          pool_text, net->uplink_pool.length, net->uplink);
  net->uplink_network = find.found;
  if (net->uplink_gateway &&
      !contains(net->uplink_network, (struct dome_net_prefix){net->uplink_gateway, 32})) {
    net_format_ipv4(net->uplink_gateway, gateway_text);
    return dome_error_set(err, EINVAL, "router %s (net_uplink_gateway) is not on the network of `%s`",
                          gateway_text, net->uplink);
  }
  /* slots: the pool's addresses, minus the network's own, its broadcast, the router and the host's */
  uint64_t size = 1ull << (32 - net->uplink_pool.length);
  free(net->slot_used);
  net->slot_count = size > UPLINK_SLOTS_MAX ? UPLINK_SLOTS_MAX : (uint32_t)size;
  net->slot_used = calloc(net->slot_count, 1);
  if (net->slot_used == NULL) return dome_error_set(err, ENOMEM, "network: out of memory");
  if (net->uplink_network.length <= 30) {
    reserve(net, net->uplink_network.address);
    reserve(net, net->uplink_network.address | ~mask(net->uplink_network.length));
  }
  if (net->uplink_gateway) reserve(net, net->uplink_gateway);
  _cleanup_free_ struct net_local_address *own = calloc(NET_LOCAL_ADDRESS_MAX, sizeof *own);
  size_t own_count = 0;
  if (own == NULL) return dome_error_set(err, ENOMEM, "network: out of memory");
  if ((r = net_local_addresses(net->egress_sock, own, NET_LOCAL_ADDRESS_MAX, &own_count, err)) < 0) return r;
  for (size_t i = 0; i < own_count; i++) {
    uint32_t address;
    memcpy(&address, own[i].bytes, 4);
    if (own[i].family == AF_INET) reserve(net, ntohl(address));
  }
  /* The kernel and the uplink must take a slave: try one in a throw-away namespace (gone with it). */
  int probe_ns = net_netns_create(err);
  if (probe_ns < 0) return probe_ns;
  r = slave_create(net->egress_sock, net->mode, net->uplink_ifindex, "domeprobe", probe_ns, 0, err);
  close(probe_ns);
  if (r < 0)
    return dome_error_wrap(err, "%s mode on `%s`%s", kind, net->uplink,
                           r == -EIO && net->mode == DOME_NET_MODE_IPVLAN
                               ? " (a kernel without CONFIG_IPVLAN? macvlan mode is the same path)"
                               : "");
  snprintf(net->ipv6_reason, sizeof net->ipv6_reason, "%s mode plumbs IPv4 only", kind);
  return 0;
}

/* ---- one jail ---- */

struct uplink_slot {
  const struct dome_net *net;
  const struct stat *netns;
};

/* An uplink slot's record: the mode, the uplink and the device:inode of the jail's namespace, by which
 * reclaim finds an orphan still holding it. */
static int uplink_slot_text(uint32_t slot, char *text, size_t size, void *context) {
  (void)slot;
  const struct uplink_slot *u = context;
  return snprintf(text, size, "%s %s %llu:%llu\n", dome_net_mode_name(u->net->mode), u->net->uplink,
                  (unsigned long long)u->netns->st_dev, (unsigned long long)u->netns->st_ino);
}

static int slot_take(struct dome_net *net, struct dome_net_jail *jail, const struct stat *netns,
                     dome_error *err) {
  struct uplink_slot u = {net, netns};
  int slot =
      net_slot_take(net, "uplink", 0, uplink_slot_text, &u, "address pool (net_uplink_pool) exhausted", err);
  if (slot < 0) return slot;
  jail->slot = (uint32_t)slot;
  jail->address = net->uplink_pool.address + jail->slot;
  jail->gateway = net->uplink_gateway;
  snprintf(jail->link_name, sizeof jail->link_name, JAIL_LINK_NAME);
  return 0;
}

static void slot_release(struct dome_net *net, uint32_t slot) {
  net_slot_release(net, "uplink", slot);
}

struct jail_side {
  struct dome_net *net;
  struct dome_net_jail *jail;
  const struct net_local_address *own;
  size_t own_count;
};

/* In the jail's namespace (a helper thread): keep a netlink socket and an nftables context bound to it,
 * install the table before the link comes up, then address, link and routes. */
static int build_jail_side(void *arg, dome_error *err) {
  struct jail_side *side = arg;
  struct dome_net_jail *jail = side->jail;
  const struct dome_net *net = side->net;
  int r = net_nl_open(&jail->uplink_sock, err);
  if (r < 0) return r;
  jail->uplink_nft = net_nft_context();
  if (jail->uplink_nft == NULL) return dome_error_set(err, ENOMEM, "nftables: cannot create a context");
  if ((r = net_nft_uplink_install(jail->uplink_nft, jail, JAIL_LINK_NAME, net->uplink_pool, side->own,
                                  side->own_count, err)) < 0)
    return r;
  /* no IPv6 on the slave: no link-local address to reach the uplink's neighbours with */
  _cleanup_close_ int fd =
      open("/proc/sys/net/ipv6/conf/" JAIL_LINK_NAME "/disable_ipv6", O_WRONLY | O_CLOEXEC);
  if (fd >= 0 && write(fd, "1\n", 2) != 2)
    return dome_error_set_errno(err, errno, "disable IPv6 on the jail's link");
  if ((r = net_link_set_up(jail->uplink_sock, "lo", err)) < 0) return r;
  int ifindex = net_link_ifindex(jail->uplink_sock, JAIL_LINK_NAME, err);
  if (ifindex < 0) return ifindex;
  if ((r = net_address_add(jail->uplink_sock, ifindex, jail->address, 32, err)) < 0) return r;
  if ((r = net_link_set_up(jail->uplink_sock, JAIL_LINK_NAME, err)) < 0) return r;
  for (size_t i = 0; i < jail->plan.route_count; i++) {
    struct dome_net_prefix p = jail->plan.routes[i];
    if (contains(net->uplink_network, p)) { /* EEXIST: the network itself, added for a wider prefix */
      if ((r = net_route_add_onlink(jail->uplink_sock, p, 0, ifindex, err)) < 0 && r != -EEXIST) return r;
      continue;
    }
    if (contains(p, net->uplink_network) &&
        (r = net_route_add_onlink(jail->uplink_sock, net->uplink_network, 0, ifindex, err)) < 0 &&
        r != -EEXIST)
      return r;
    if (net->uplink_gateway &&
        (r = net_route_add_onlink(jail->uplink_sock, p, net->uplink_gateway, ifindex, err)) < 0)
      return r;
  }
  return 0;
}

static void release_handles(struct dome_net_jail *jail) {
  net_nft_context_free(jail->uplink_nft);
  jail->uplink_nft = NULL;
  net_nl_close(jail->uplink_sock);
  jail->uplink_sock = NULL;
}

int net_uplink_jail_setup(struct dome_net *net, struct dome_net_jail *jail, pid_t child_pid,
                          dome_error *err) {
  char ns_path[64];
  snprintf(ns_path, sizeof ns_path, "/proc/%d/ns/net", (int)child_pid);
  _cleanup_close_ int netns = open(ns_path, O_RDONLY | O_CLOEXEC);
  struct stat identity;
  if (netns < 0 || fstat(netns, &identity) < 0)
    return dome_error_set_errno(err, errno == ENOENT ? ESRCH : errno, "open `%s`", ns_path);
  _cleanup_free_ struct net_local_address *own = calloc(NET_LOCAL_ADDRESS_MAX, sizeof *own);
  size_t own_count = 0;
  if (own == NULL) return dome_error_set(err, ENOMEM, "jail network: out of memory");
  int r = net_local_addresses(net->egress_sock, own, NET_LOCAL_ADDRESS_MAX, &own_count, err);
  if (r < 0) return r;
  if ((r = slot_take(net, jail, &identity, err)) < 0) return r;
  r = slave_create(net->egress_sock, net->mode, net->uplink_ifindex, JAIL_LINK_NAME, netns, 0, err);
  if (r >= 0) {
    struct jail_side side = {net, jail, own, own_count};
    r = net_in_netns(netns, build_jail_side, &side, err);
    if (r < 0 && jail->uplink_sock) net_link_delete(jail->uplink_sock, JAIL_LINK_NAME, NULL);
  }
  if (r < 0) {
    release_handles(jail);
    slot_release(net, jail->slot);
  }
  return r;
}

int net_uplink_jail_teardown(struct dome_net *net, struct dome_net_jail *jail, dome_error *err) {
  int r = 0;
  if (jail->uplink_sock) {
    /* the namespace is still alive (the socket holds it): remove the link now, whoever else holds it */
    r = net_link_delete(jail->uplink_sock, JAIL_LINK_NAME, err);
    if (r == -ENODEV) r = 0;
  }
  release_handles(jail);
  slot_release(net, jail->slot);
  return r;
}

/* ---- reclaim ---- */

struct reclaim_link {
  int removed;
};

static int delete_slave(void *arg, dome_error *err) {
  struct reclaim_link *reclaim = arg;
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  struct rtnl_link *link = NULL;
  if (rtnl_link_get_kernel(sock, 0, JAIL_LINK_NAME, &link) >= 0) {
    /* only a slave of one of our kinds: the name alone could be anything */
    if ((rtnl_link_is_ipvlan(link) || rtnl_link_is_macvlan(link)) &&
        net_link_delete(sock, JAIL_LINK_NAME, NULL) == 0)
      reclaim->removed++;
    rtnl_link_put(link);
  }
  net_nl_close(sock);
  return 0;
}

/* A process's namespace with this identity, opened (or -1). */
static int find_namespace(unsigned long long dev, unsigned long long ino) {
  DIR *proc = opendir("/proc");
  if (proc == NULL) return -1;
  int found = -1;
  struct dirent *entry;
  while (found < 0 && (entry = readdir(proc)) != NULL) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%.20s/ns/net", entry->d_name);
    struct stat st;
    if (stat(path, &st) == 0 && (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
      found = open(path, O_RDONLY | O_CLOEXEC);
  }
  closedir(proc);
  return found;
}

int net_uplink_reclaim(const char *state_dir) {
  DIR *dir = opendir(state_dir);
  if (dir == NULL) return 0;
  int removed = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    unsigned slot;
    char extra;
    if (sscanf(entry->d_name, "uplink-%u%c", &slot, &extra) != 1) continue;
    char path[PATH_MAX + 300], content[160] = "";
    snprintf(path, sizeof path, "%s/%s", state_dir, entry->d_name);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, content, sizeof content - 1) : -1;
    if (n > 0) content[n] = '\0';
    char kind[16], uplink[16];
    unsigned long long dev, ino;
    if (n > 0 && sscanf(content, "%15s %15s %llu:%llu", kind, uplink, &dev, &ino) == 4) {
      int netns = find_namespace(dev, ino);
      if (netns >= 0) {
        struct reclaim_link reclaim = {0};
        net_in_netns(netns, delete_slave, &reclaim, NULL);
        removed += reclaim.removed;
        close(netns);
      }
    }
    unlink(path);
  }
  closedir(dir);
  return removed;
}

/* ---- doctor ---- */

struct probe_kinds {
  bool ipvlan, macvlan;
};

static int probe_in_namespace(void *arg, dome_error *err) {
  struct probe_kinds *kinds = arg;
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  /* the veth's peer is born in this thread's namespace too (IFLA_NET_NS_PID of this thread) */
  if (net_link_veth_create(sock, "domeprobe0", "domeprobe1", gettid(), 0, NULL) == 0) {
    int master = net_link_ifindex(sock, "domeprobe0", NULL);
    kinds->ipvlan =
        master > 0 && slave_create(sock, DOME_NET_MODE_IPVLAN, master, "domeprobe2", -1, 0, NULL) == 0;
    kinds->macvlan =
        master > 0 && slave_create(sock, DOME_NET_MODE_MACVLAN, master, "domeprobe3", -1, 0, NULL) == 0;
  }
  net_nl_close(sock);
  return 0;
}

void net_uplink_probe(bool *ipvlan, bool *macvlan) {
  struct probe_kinds kinds = {false, false};
  int ns = net_netns_create(NULL);
  if (ns >= 0) {
    net_in_netns(ns, probe_in_namespace, &kinds, NULL);
    close(ns); /* the namespace goes, and its links with it */
  }
  *ipvlan = kinds.ipvlan;
  *macvlan = kinds.macvlan;
}

int dome_net_mode_parse(const char *name, enum dome_net_mode *mode) {
  static const enum dome_net_mode modes[] = {DOME_NET_MODE_AUTO, DOME_NET_MODE_USER, DOME_NET_MODE_ROUTED,
                                             DOME_NET_MODE_IPVLAN, DOME_NET_MODE_MACVLAN};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(name, dome_net_mode_name(modes[i])) == 0) {
      *mode = modes[i];
      return 0;
    }
  return -EINVAL;
}
