/* One jail's path: slot, veth pair, addresses, routes, nftables chain; and its teardown. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netlink/netlink.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/net/net_internal.h"

#define JAIL_LINK_NAME "eth0"

int net_slot_take(struct dome_net *net, const char *prefix, uint32_t first, net_slot_text_fn text,
                  void *context, const char *exhausted, dome_error *err) {
  for (uint32_t slot = first; slot < net->slot_count; slot++) {
    if (net->slot_used[slot]) continue;
    char path[PATH_MAX + 32], content[160];
    snprintf(path, sizeof path, "%s/%s-%u", net->state_dir, prefix, slot);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return dome_error_set_errno(err, errno, "record slot in `%s`", path);
    }
    int n = text(slot, content, sizeof content, context);
    ssize_t written = n > 0 && (size_t)n < sizeof content ? write(fd, content, (size_t)n) : -1;
    close(fd);
    if (written != n) {
      unlink(path);
      return dome_error_set_errno(err, errno ? errno : EIO, "record slot in `%s`", path);
    }
    net->slot_used[slot] = 1;
    return (int)slot;
  }
  return dome_error_set(err, ENOSPC, "%s", exhausted);
}

void net_slot_release(struct dome_net *net, const char *prefix, uint32_t slot) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%s-%u", net->state_dir, prefix, slot);
  unlink(path);
  net->slot_used[slot] = 0;
}

struct veth_slot {
  const struct dome_net *net;
  struct dome_net_jail *jail;
};

/* A veth slot's record: the mode and the egress-side link's name, which reclaim removes. */
static int veth_slot_text(uint32_t slot, char *text, size_t size, void *context) {
  struct veth_slot *v = context;
  snprintf(v->jail->link_name, sizeof v->jail->link_name, DOME_NET_LINK_PREFIX "%u", slot);
  return snprintf(text, size, "%s %s\n", v->net->mode == DOME_NET_MODE_ROUTED ? "routed" : "user",
                  v->jail->link_name);
}

/* Take the lowest free slot (slot 0 is the egress side's own addresses) and its addresses. */
static int slot_take(struct dome_net *net, struct dome_net_jail *jail, dome_error *err) {
  char exhausted[64];
  snprintf(exhausted, sizeof exhausted, "address pool exhausted (%u jails)", net->slot_count - 1);
  struct veth_slot v = {net, jail};
  int slot = net_slot_take(net, "slot", 1, veth_slot_text, &v, exhausted, err);
  if (slot < 0) return slot;
  jail->slot = (uint32_t)slot;
  if (jail->has_ipv6 &&
      dome_net_slot_addresses6(net->pool6, jail->slot, jail->gateway6, jail->address6, err) < 0)
    return -ERANGE;
  return dome_net_slot_addresses(net->pool, net->block_length, jail->slot, &jail->gateway, &jail->address,
                                 err);
}

static void slot_release(struct dome_net *net, uint32_t slot) {
  net_slot_release(net, "slot", slot);
}

struct egress_side {
  struct dome_net *net;
  struct dome_net_jail *jail;
  pid_t child_pid;
  bool link_made, chain_made;
};

/* The addresses a jail must not reach unless a rule names them exactly, read now (they change): every
 * address of the host's interfaces (the calling thread's namespace: the supervisor's), and in user mode
 * those of the egress namespace (its loopback, pasta's tap, the jails' gateways) and pasta's gateway
 * address (the address pasta answers as; --no-map-gw keeps it from standing for the host, but it is
 * still pasta's). */
static int own_addresses(struct dome_net *net, struct net_local_address *own, size_t *count,
                         dome_error *err) {
  int r = net_local_addresses(net->egress_sock, own, NET_LOCAL_ADDRESS_MAX, count, err);
  if (r < 0 || net->mode == DOME_NET_MODE_ROUTED) return r; /* routed: the egress side is the host */
  struct nl_sock *host = NULL;
  if ((r = net_nl_open(&host, err)) < 0) return r;
  r = net_local_addresses(host, own, NET_LOCAL_ADDRESS_MAX, count, err);
  net_nl_close(host);
  if (r < 0) return r;
  uint32_t pasta_gateway, tap;
  if ((r = dome_net_slot_addresses(net->pool, net->block_length, 0, &pasta_gateway, &tap, err)) < 0) return r;
  struct net_local_address one = {.family = AF_INET};
  uint32_t network = htonl(pasta_gateway);
  memcpy(one.bytes, &network, 4);
  for (size_t i = 0; i < *count; i++)
    if (memcmp(&own[i], &one, sizeof one) == 0) return 0;
  if (*count == NET_LOCAL_ADDRESS_MAX)
    return dome_error_set(err, E2BIG, "more than %d local addresses: the egress filter would not hold them",
                          NET_LOCAL_ADDRESS_MAX);
  own[(*count)++] = one;
  return 0;
}

/* Egress side, through the handles bound to its namespace (no namespace switch). */
static int build_egress_side(struct egress_side *side, dome_error *err) {
  struct nl_sock *sock = side->net->egress_sock;
  int r =
      net_link_veth_create(sock, side->jail->link_name, JAIL_LINK_NAME, side->child_pid, side->net->mtu, err);
  if (r < 0) return r;
  side->link_made = true;
  int ifindex = net_link_ifindex(sock, side->jail->link_name, err);
  if (ifindex < 0) return ifindex;
  if ((r = net_address_add(sock, ifindex, side->jail->gateway, side->net->block_length, err)) < 0) return r;
  if (side->jail->has_ipv6 && (r = net_address_add6(sock, ifindex, side->jail->gateway6, 64, err)) < 0)
    return r;
  if ((r = net_link_set_up(sock, side->jail->link_name, err)) < 0) return r;
  _cleanup_free_ struct net_local_address *own = calloc(NET_LOCAL_ADDRESS_MAX, sizeof *own);
  size_t own_count = 0;
  if (own == NULL) return dome_error_set(err, ENOMEM, "jail network: out of memory");
  if ((r = own_addresses(side->net, own, &own_count, err)) < 0) return r;
  if ((r = net_nft_jail_add(side->net->egress_nft, side->jail, own, own_count, err)) < 0) return r;
  side->chain_made = true;
  return 0;
}

static int undo_egress_side(struct egress_side *side, dome_error *err) {
  int result = 0;
  if (side->chain_made) {
    int r = net_nft_jail_remove(side->net->egress_nft, side->jail, err);
    if (r < 0) result = r;
  }
  if (side->link_made) {
    /* Gone already when the jail's namespace died: the kernel destroys both ends of the pair. */
    int r = net_link_delete(side->net->egress_sock, side->jail->link_name, err);
    if (r < 0 && r != -ENODEV) result = r;
  }
  return result;
}

static int build_jail_side(void *arg, dome_error *err) {
  struct egress_side *side = arg;
  const struct dome_net_jail *jail = side->jail;
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  int ifindex = 0;
  if ((r = net_link_set_up(sock, "lo", err)) < 0) goto out;
  if ((r = ifindex = net_link_ifindex(sock, JAIL_LINK_NAME, err)) < 0) goto out;
  if ((r = net_address_add(sock, ifindex, jail->address, side->net->block_length, err)) < 0) goto out;
  if ((r = net_link_set_up(sock, JAIL_LINK_NAME, err)) < 0) goto out;
  /* One route per permitted prefix, nothing wider: addresses no rule names have no route at all. */
  for (size_t i = 0; i < jail->plan.route_count; i++)
    if ((r = net_route_add(sock, jail->plan.routes[i], jail->gateway, ifindex, err)) < 0) goto out;
  if (jail->has_ipv6) {
    if ((r = net_address_add6(sock, ifindex, jail->address6, 64, err)) < 0) goto out;
    for (size_t i = 0; i < jail->plan.route6_count; i++)
      if ((r = net_route_add6(sock, &jail->plan.routes6[i], jail->gateway6, ifindex, err)) < 0) goto out;
  }
  r = 0;
out:
  net_nl_close(sock);
  return r;
}

static int jail_setup_locked(struct dome_net *net, pid_t child_pid, const struct dome_net_entry *entries,
                             size_t count, const struct dome_net_jail_options *options,
                             struct dome_net_jail **jail_out, dome_error *err) {
  if (net == NULL || jail_out == NULL) return dome_error_set(err, 0, "jail network set-up: missing argument");
  struct dome_net_jail *jail = calloc(1, sizeof *jail);
  if (jail == NULL) return dome_error_set(err, ENOMEM, "jail network: out of memory");
  jail->quota_bytes = options && options->quota_bytes ? options->quota_bytes : net->jail_quota_bytes;
  int r = dome_net_plan_from_entries(entries, count, &jail->plan, err);
  if (r >= 0) r = dome_net_resolv_conf(&jail->plan, jail->resolv_conf, sizeof jail->resolv_conf, err);
  if (r < 0) {
    free(jail);
    return dome_error_wrap(err, "jail network");
  }
  /* IPv6 entries are plumbed only when the egress side has IPv6; otherwise the jail has no IPv6 route */
  jail->has_ipv6 = net->ipv6 && jail->plan.route6_count > 0;
  if (!net->ipv6) jail->plan.ipv6_allow_ignored = jail->plan.filter6_count;
  if (net_mode_is_uplink(net->mode) && jail->plan.route_count > 0) {
    if ((r = net_uplink_jail_setup(net, jail, child_pid, err)) < 0) {
      free(jail);
      return dome_error_wrap(err, "jail network (pid %d)", (int)child_pid);
    }
    jail->has_link = true;
  } else if (!net_mode_is_uplink(net->mode) && (jail->plan.route_count > 0 || jail->has_ipv6)) {
    char ns_path[64];
    snprintf(ns_path, sizeof ns_path, "/proc/%d/ns/net", (int)child_pid);
    _cleanup_close_ int jail_netns = open(ns_path, O_RDONLY | O_CLOEXEC);
    if (jail_netns < 0) {
      r = dome_error_set_errno(err, errno == ENOENT ? ESRCH : errno, "open `%s`", ns_path);
      free(jail);
      return dome_error_wrap(err, "jail network");
    }
    if ((r = slot_take(net, jail, err)) < 0) {
      free(jail);
      return dome_error_wrap(err, "jail network");
    }
    struct egress_side side = {net, jail, child_pid, false, false};
    r = build_egress_side(&side, err);
    if (r >= 0) r = net_in_netns(jail_netns, build_jail_side, &side, err);
    if (r < 0) {
      undo_egress_side(&side, NULL);
      slot_release(net, jail->slot);
      free(jail);
      return dome_error_wrap(err, "jail network (pid %d)", (int)child_pid);
    }
    jail->has_link = true;
  }
  jail->next = net->jails;
  net->jails = jail;
  *jail_out = jail;
  return 0;
}

static int jail_teardown_locked(struct dome_net *net, struct dome_net_jail *jail, dome_error *err) {
  for (struct dome_net_jail **p = &net->jails; *p; p = &(*p)->next)
    if (*p == jail) {
      *p = jail->next;
      break;
    }
  int r = 0;
  if (jail->has_link && net_mode_is_uplink(net->mode)) {
    r = net_uplink_jail_teardown(net, jail, err);
  } else if (jail->has_link) {
    net_relay_drop_source(net->relay, jail->address, jail->has_ipv6 ? jail->address6 : NULL);
    struct egress_side side = {net, jail, 0, true, true};
    r = undo_egress_side(&side, err);
    slot_release(net, jail->slot);
  }
  free(jail);
  return r < 0 ? dome_error_wrap(err, "jail network teardown") : 0;
}

int dome_net_jail_setup_options(struct dome_net *net, pid_t child_pid, const struct dome_net_entry *entries,
                                size_t count, const struct dome_net_jail_options *options,
                                struct dome_net_jail **jail_out, dome_error *err) {
  if (net == NULL || jail_out == NULL) return dome_error_set(err, 0, "jail network set-up: missing argument");
  pthread_mutex_lock(&net->lock);
  int r = jail_setup_locked(net, child_pid, entries, count, options, jail_out, err);
  pthread_mutex_unlock(&net->lock);
  return r;
}

int dome_net_jail_setup(struct dome_net *net, pid_t child_pid, const struct dome_net_entry *entries,
                        size_t count, struct dome_net_jail **jail_out, dome_error *err) {
  return dome_net_jail_setup_options(net, child_pid, entries, count, NULL, jail_out, err);
}

int dome_net_jail_usage(struct dome_net *net, const struct dome_net_jail *jail,
                        struct dome_net_jail_usage *usage, dome_error *err) {
  memset(usage, 0, sizeof *usage);
  if (net == NULL || jail == NULL || !jail->has_link) return 0;
  pthread_mutex_lock(&net->lock);
  int r = net_nft_jail_usage(net_mode_is_uplink(net->mode) ? jail->uplink_nft : net->egress_nft, jail, usage,
                             err);
  pthread_mutex_unlock(&net->lock);
  return r;
}

int dome_net_jail_teardown(struct dome_net *net, struct dome_net_jail *jail, dome_error *err) {
  if (net == NULL || jail == NULL) return 0;
  pthread_mutex_lock(&net->lock);
  int r = jail_teardown_locked(net, jail, err);
  pthread_mutex_unlock(&net->lock);
  return r;
}

const char *dome_net_jail_resolv_conf(const struct dome_net_jail *jail) {
  return jail ? jail->resolv_conf : NULL;
}
uint32_t dome_net_jail_address(const struct dome_net_jail *jail) {
  return jail && jail->has_link ? jail->address : 0;
}
uint32_t dome_net_jail_gateway(const struct dome_net_jail *jail) {
  return jail && jail->has_link ? jail->gateway : 0;
}
const struct dome_net_plan *dome_net_jail_plan(const struct dome_net_jail *jail) {
  return jail ? &jail->plan : NULL;
}

int dome_net_on_namespaces_ready(void *context, pid_t child_pid, dome_error *err) {
  struct dome_net_hook *hook = context;
  if (hook == NULL || hook->net == NULL) return dome_error_set(err, 0, "network hook: no context");
  struct dome_net_jail_options options = {.quota_bytes = hook->quota_bytes};
  return dome_net_jail_setup_options(hook->net, child_pid, hook->entries, hook->count, &options, &hook->jail,
                                     err);
}

static int count_owned_locked(struct dome_net *net, size_t *links_out, size_t *chains_out, dome_error *err) {
  if (net_mode_is_uplink(net->mode)) {
    /* the links and tables live in the jails' namespaces, each held through its jail's handles */
    *links_out = *chains_out = 0;
    for (const struct dome_net_jail *jail = net->jails; jail; jail = jail->next)
      if (jail->uplink_sock) ++*links_out, ++*chains_out;
    return 0;
  }
  char(*names)[16] = calloc(1024, 16);
  if (names == NULL) return dome_error_set(err, ENOMEM, "count links: out of memory");
  int r = net_links_with_prefix(net->egress_sock, DOME_NET_LINK_PREFIX, names, 1024, links_out, err);
  free(names);
  if (r < 0) return r;
  return net_nft_count_jail_chains(net->egress_nft, chains_out, err);
}

int dome_net_count_owned(struct dome_net *net, size_t *links_out, size_t *chains_out, dome_error *err) {
  pthread_mutex_lock(&net->lock);
  int r = count_owned_locked(net, links_out, chains_out, err);
  pthread_mutex_unlock(&net->lock);
  return r;
}

bool dome_net_jail_address6(const struct dome_net_jail *jail, uint8_t out[16]) {
  if (jail == NULL || !jail->has_link || !jail->has_ipv6) return false;
  memcpy(out, jail->address6, 16);
  return true;
}
