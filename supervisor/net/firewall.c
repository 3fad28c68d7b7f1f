/* The egress filter and masquerade, through libnftables (nft(8) ruleset syntax, applied atomically per
 * call). Acts in the network namespace of the calling thread: the dome-owned egress namespace in user
 * mode, the host's in routed mode.
 *
 * table inet dome
 *   map jails: egress-side link name -> jump jail<slot>
 *   maps jail_out, jail_in (link name -> named counter jail<slot>_out/_in) and jail_quota (link name ->
 *            named quota jail<slot>_quota): every packet from/to a jail link is counted first (forward,
 *            input and output hooks), and once the jail's quota is used up its TCP packets are answered
 *            with a reset (both ways: the peer stops sending; resets themselves pass, so the jail's own
 *            reset reaches it), its other packets rejected, and other packets towards it dropped
 *   forward: replies pass; jail-to-jail and new inbound connections to jails are rejected; traffic from a
 *            jail link goes through its own chain; anything else from a jail link is rejected
 *   input:   traffic from a jail link addressed to the egress side itself goes through the jail's chain
 *            too (so the host's addresses are reachable only when a rule names them); IPv6 neighbour
 *            discovery with the egress side (solicit/advert, hop limit 255: on-link only) passes
 *   postrouting (nat): the pool is masqueraded towards anything that is not a jail link
 *   jail<slot>: (counters jail<slot>_conn of accepted new flows, jail<slot>_refused of rejected ones)
 *               source must be the jail's own address; accept the permitted (prefix, protocol, ports)
 *               whose prefix is exactly (a /32) one of the host's own addresses; reject every other
 *               destination that is an address of the host or of the egress side (v4 and v6, so that a
 *               rule permitting 0.0.0.0/0 does not open the host's services); accept the other permitted
 *               triples; reject the rest (chain refuse: a TCP reset, else ICMP admin-prohibited, so refused
 *               connections fail at once; a reset also works for flows the TCP relay intercepted, whose
 *               ICMP error would carry a source address that is not local to the egress namespace). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nftables/libnftables.h>

#include "supervisor/net/net_internal.h"

#define FD_SCAN_LIMIT 4096

/* libnftables 1.0.6 opens its netlink socket in nft_ctx_new() without SOCK_CLOEXEC (libmnl's
 * mnl_socket_open), and offers no way to reach it. A jail forked later would inherit a NETLINK_NETFILTER
 * socket of the egress side (and keep that namespace alive after a crash). So: note the descriptors
 * open before, and mark the new netfilter netlink socket close-on-exec. */
static void mark_new_netfilter_sockets_cloexec(const uint8_t *before) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == NULL) return;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    int fd = atoi(entry->d_name);
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9' || fd == dirfd(dir)) continue;
    if (fd < FD_SCAN_LIMIT && before[fd]) continue;
    int domain = 0, protocol = 0;
    socklen_t length = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) < 0 || domain != AF_NETLINK) continue;
    length = sizeof protocol;
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &length) < 0 || protocol != NETLINK_NETFILTER)
      continue;
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
  closedir(dir);
}

static void note_open_fds(uint8_t *open_fds) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == NULL) return;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    int fd = atoi(entry->d_name);
    if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9' && fd < FD_SCAN_LIMIT && fd != dirfd(dir))
      open_fds[fd] = 1;
  }
  closedir(dir);
}

struct nft_ctx *net_nft_context(void) {
  uint8_t *before = calloc(FD_SCAN_LIMIT, 1);
  if (before == NULL) return NULL;
  note_open_fds(before);
  struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  mark_new_netfilter_sockets_cloexec(before);
  free(before);
  if (ctx) {
    nft_ctx_buffer_output(ctx);
    nft_ctx_buffer_error(ctx);
  }
  return ctx;
}

void net_nft_context_free(struct nft_ctx *ctx) {
  if (ctx) nft_ctx_free(ctx);
}

int net_nft_run(struct nft_ctx *shared, const char *commands, dome_error *err) {
  struct nft_ctx *ctx = shared ? shared : net_nft_context();
  if (ctx == NULL) return dome_error_set(err, ENOMEM, "nftables: cannot create a context");
  int r = nft_run_cmd_from_buffer(ctx, commands);
  if (r != 0) {
    const char *message = nft_ctx_get_error_buffer(ctx);
    char first_line[512] = "";
    if (message) {
      size_t n = strcspn(message, "\n");
      snprintf(first_line, sizeof first_line, "%.*s",
               (int)(n < sizeof first_line ? n : sizeof first_line - 1), message);
    }
    r = dome_error_set(err, EIO, "nftables: %s", first_line[0] ? first_line : "command failed");
  }
  if (ctx != shared) nft_ctx_free(ctx);
  return r;
}

/* Accounting at the top of the hooks: count every packet from / to a jail link in the jail's counter, and
 * cut the jail's traffic once its quota is used up (a map without the link's element matches nothing). */
#define ACCOUNT_FROM_JAIL                                                           \
  "    iifname \"" DOME_NET_LINK_PREFIX                                             \
  "*\" counter name iifname map @jail_out\n"                                        \
  "    iifname \"" DOME_NET_LINK_PREFIX                                             \
  "*\" meta l4proto tcp quota name iifname map @jail_quota reject with tcp reset\n" \
  "    iifname \"" DOME_NET_LINK_PREFIX                                             \
  "*\" meta l4proto != tcp quota name iifname map @jail_quota reject with icmpx type admin-prohibited\n"
#define ACCOUNT_TO_JAIL                                                                                  \
  "    oifname \"" DOME_NET_LINK_PREFIX                                                                  \
  "*\" counter name oifname map @jail_in\n"                                                              \
  "    oifname \"" DOME_NET_LINK_PREFIX                                                                  \
  "*\" meta l4proto tcp tcp flags & rst == 0 quota name oifname map @jail_quota reject with tcp reset\n" \
  "    oifname \"" DOME_NET_LINK_PREFIX "*\" meta l4proto != tcp quota name oifname map @jail_quota drop\n"

int net_nft_table_install(struct nft_ctx *ctx, struct dome_net_prefix pool,
                          const struct dome_net_prefix6 *pool6, dome_error *err) {
  char pool_text[16], commands[4096], masquerade6[160] = "";
  net_format_ipv4(pool.address, pool_text);
  if (pool6) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, pool6->address, text, sizeof text);
    snprintf(masquerade6, sizeof masquerade6,
             "    ip6 saddr %s/%u oifname != \"" DOME_NET_LINK_PREFIX "*\" masquerade\n", text,
             pool6->length);
  }
  /* "add table; delete table" first makes the install idempotent (nft 1.0.6 has no `destroy`). */
  snprintf(commands, sizeof commands,
           "add table inet " DOME_NET_TABLE
           "\n"
           "delete table inet " DOME_NET_TABLE
           "\n"
           "table inet " DOME_NET_TABLE
           " {\n"
           "  map jails { type ifname : verdict; }\n"
           "  map jail_out { type ifname : counter; }\n"
           "  map jail_in { type ifname : counter; }\n"
           "  map jail_quota { type ifname : quota; }\n"
           "  chain forward {\n"
           "    type filter hook forward priority filter; policy accept;\n" ACCOUNT_FROM_JAIL ACCOUNT_TO_JAIL
           "    ct state established,related accept\n"
           "    iifname \"" DOME_NET_LINK_PREFIX "*\" oifname \"" DOME_NET_LINK_PREFIX
           "*\" reject with icmpx type admin-prohibited\n"
           "    oifname \"" DOME_NET_LINK_PREFIX
           "*\" reject with icmpx type admin-prohibited\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" iifname vmap @jails\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" reject with icmpx type admin-prohibited\n"
           "  }\n"
           "  chain input {\n"
           "    type filter hook input priority filter; policy accept;\n" ACCOUNT_FROM_JAIL
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" ct state established,related accept\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } ip6 hoplimit 255 accept\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" iifname vmap @jails\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" reject with icmpx type admin-prohibited\n"
           "  }\n"
           "  chain output {\n"
           "    type filter hook output priority filter; policy accept;\n" ACCOUNT_TO_JAIL
           "  }\n"
           "  chain refuse {\n"
           "    meta l4proto tcp reject with tcp reset\n"
           "    reject with icmpx type admin-prohibited\n"
           "  }\n"
           "  chain postrouting {\n"
           "    type nat hook postrouting priority srcnat; policy accept;\n"
           "    ip saddr %s/%u oifname != \"" DOME_NET_LINK_PREFIX
           "*\" masquerade\n"
           "%s"
           "  }\n"
           "}\n",
           pool_text, pool.length, masquerade6);
  int r = net_nft_run(ctx, commands, err);
  return r < 0 ? dome_error_wrap(err, "install table inet " DOME_NET_TABLE) : 0;
}

int net_nft_table_remove(struct nft_ctx *ctx, dome_error *err) {
  int r = net_nft_run(ctx, "add table inet " DOME_NET_TABLE "\ndelete table inet " DOME_NET_TABLE "\n", err);
  return r < 0 ? dome_error_wrap(err, "remove table inet " DOME_NET_TABLE) : 0;
}

/* Append printf-style text to a growing buffer; returns -ENOMEM on failure. */
static int append(char **buffer, size_t *used, size_t *capacity, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char **buffer, size_t *used, size_t *capacity, const char *format, ...) {
  for (;;) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(*buffer ? *buffer + *used : NULL, *buffer ? *capacity - *used : 0, format, args);
    va_end(args);
    if (n < 0) return -EINVAL;
    if (*buffer && *used + (size_t)n < *capacity) {
      *used += (size_t)n;
      return 0;
    }
    size_t grown = (*capacity ? *capacity * 2 : 4096) + (size_t)n;
    char *next = realloc(*buffer, grown);
    if (next == NULL) return -ENOMEM;
    *buffer = next;
    *capacity = grown;
  }
}

/* True when the filter's prefix is exactly one of the own addresses (a /32 equal to it). */
static bool names_own_address6(const struct dome_net_filter6 *f, const struct net_local_address *own,
                               size_t own_count) {
  if (f->prefix.length != 128) return false;
  for (size_t i = 0; i < own_count; i++)
    if (own[i].family == AF_INET6 && memcmp(own[i].bytes, f->prefix.address, 16) == 0) return true;
  return false;
}

/* The accept rule of one permitted (prefix, protocol, ports) of jail `slot`; `family` is "ip" or "ip6" and
 * `prefix` the address as text. */
static int append_accept(char **commands, size_t *used, size_t *capacity, uint32_t slot, const char *family,
                         const char *prefix, unsigned length, int protocol_number, unsigned port_first,
                         unsigned port_last) {
  const char *protocol = protocol_number == DOME_PROTOCOL_TCP ? "tcp" : "udp";
  if (port_first == 0 && port_last == 65535)
    return append(commands, used, capacity,
                  "add rule inet " DOME_NET_TABLE
                  " jail%u %s daddr %s/%u meta l4proto %s counter name \"jail%u_conn\" accept\n",
                  slot, family, prefix, length, protocol, slot);
  if (port_first == port_last)
    return append(commands, used, capacity,
                  "add rule inet " DOME_NET_TABLE
                  " jail%u %s daddr %s/%u %s dport %u counter name \"jail%u_conn\" accept\n",
                  slot, family, prefix, length, protocol, port_first, slot);
  return append(commands, used, capacity,
                "add rule inet " DOME_NET_TABLE
                " jail%u %s daddr %s/%u %s dport %u-%u counter name \"jail%u_conn\" accept\n",
                slot, family, prefix, length, protocol, port_first, port_last, slot);
}

static int append_filter6(char **commands, size_t *used, size_t *capacity, uint32_t slot,
                          const struct dome_net_filter6 *f) {
  char prefix[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, f->prefix.address, prefix, sizeof prefix);
  return append_accept(commands, used, capacity, slot, "ip6", prefix, f->prefix.length, f->protocol,
                       f->port_first, f->port_last);
}

static bool names_own_address(const struct dome_net_filter *f, const struct net_local_address *own,
                              size_t own_count) {
  if (f->prefix.length != 32) return false;
  uint32_t network = htonl(f->prefix.address);
  for (size_t i = 0; i < own_count; i++)
    if (own[i].family == AF_INET && memcmp(own[i].bytes, &network, 4) == 0) return true;
  return false;
}

static int append_filter(char **commands, size_t *used, size_t *capacity, uint32_t slot,
                         const struct dome_net_filter *f) {
  char prefix[16];
  net_format_ipv4(f->prefix.address, prefix);
  return append_accept(commands, used, capacity, slot, "ip", prefix, f->prefix.length, f->protocol,
                       f->port_first, f->port_last);
}

/* A rejection of the jail chain, counted (its argument: the slot). */
#define REFUSE "counter name \"jail%u_refused\" jump refuse"

/* The jail's counters, quota and chain jail<slot> (through its final rejection); refused (may be NULL):
 * a prefix always rejected before the permitted triples (the other jails' addresses in the uplink modes).
 * Returns 0 or -ENOMEM. */
static int append_jail_chain(char **buffer, size_t *length, size_t *size, const struct dome_net_jail *jail,
                             const struct net_local_address *own, size_t own_count,
                             const struct dome_net_prefix *refused) {
  char *commands = *buffer, address[INET6_ADDRSTRLEN];
  size_t used = *length, capacity = *size;
  net_format_ipv4(jail->address, address);
  unsigned slot = jail->slot;
  int r = append(&commands, &used, &capacity,
                 "add counter inet " DOME_NET_TABLE
                 " jail%u_out\n"
                 "add counter inet " DOME_NET_TABLE
                 " jail%u_in\n"
                 "add counter inet " DOME_NET_TABLE
                 " jail%u_conn\n"
                 "add counter inet " DOME_NET_TABLE
                 " jail%u_refused\n"
                 "add chain inet " DOME_NET_TABLE
                 " jail%u\n"
                 "add rule inet " DOME_NET_TABLE " jail%u ip saddr != %s " REFUSE "\n",
                 slot, slot, slot, slot, slot, slot, address, slot);
  if (r == 0 && jail->quota_bytes > 0)
    r = append(&commands, &used, &capacity,
               "add quota inet " DOME_NET_TABLE " jail%u_quota { over %llu bytes }\n", slot,
               (unsigned long long)jail->quota_bytes);
  if (r == 0 && jail->has_ipv6) {
    inet_ntop(AF_INET6, jail->address6, address, sizeof address);
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE " jail%u ip6 saddr != %s " REFUSE "\n", slot, address, slot);
  }
  if (r == 0 && refused) {
    char prefix[16];
    net_format_ipv4(refused->address, prefix);
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE " jail%u ip daddr %s/%u " REFUSE "\n", slot, prefix,
               refused->length, slot);
  }
  /* Filters naming one of the host's own addresses exactly come first; then every own address is
   * rejected, so that a wider prefix (0.0.0.0/0 above all) never reaches the host's services; then the
   * other filters. */
  for (size_t i = 0; r == 0 && i < jail->plan.filter_count; i++)
    if (names_own_address(&jail->plan.filters[i], own, own_count))
      r = append_filter(&commands, &used, &capacity, jail->slot, &jail->plan.filters[i]);
  for (size_t i = 0; r == 0 && jail->has_ipv6 && i < jail->plan.filter6_count; i++)
    if (names_own_address6(&jail->plan.filters6[i], own, own_count))
      r = append_filter6(&commands, &used, &capacity, jail->slot, &jail->plan.filters6[i]);
  for (size_t i = 0; r == 0 && i < own_count; i++) {
    bool v4 = own[i].family == AF_INET;
    inet_ntop(v4 ? AF_INET : AF_INET6, own[i].bytes, address, sizeof address);
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE " jail%u %s daddr %s " REFUSE "\n", slot, v4 ? "ip" : "ip6",
               address, slot);
  }
  for (size_t i = 0; r == 0 && i < jail->plan.filter_count; i++)
    if (!names_own_address(&jail->plan.filters[i], own, own_count))
      r = append_filter(&commands, &used, &capacity, jail->slot, &jail->plan.filters[i]);
  for (size_t i = 0; r == 0 && jail->has_ipv6 && i < jail->plan.filter6_count; i++)
    if (!names_own_address6(&jail->plan.filters6[i], own, own_count))
      r = append_filter6(&commands, &used, &capacity, jail->slot, &jail->plan.filters6[i]);
  if (r == 0)
    r = append(&commands, &used, &capacity, "add rule inet " DOME_NET_TABLE " jail%u " REFUSE "\n", slot,
               slot);
  *buffer = commands;
  *length = used;
  *size = capacity;
  return r;
}

int net_nft_jail_add(struct nft_ctx *ctx, const struct dome_net_jail *jail,
                     const struct net_local_address *own, size_t own_count, dome_error *err) {
  char *commands = NULL;
  size_t used = 0, capacity = 0;
  unsigned slot = jail->slot;
  int r = append_jail_chain(&commands, &used, &capacity, jail, own, own_count, NULL);
  if (r == 0)
    r = append(&commands, &used, &capacity,
               "add element inet " DOME_NET_TABLE
               " jail_out { \"%s\" : \"jail%u_out\" }\n"
               "add element inet " DOME_NET_TABLE
               " jail_in { \"%s\" : \"jail%u_in\" }\n"
               "add element inet " DOME_NET_TABLE " jails { \"%s\" : jump jail%u }\n",
               jail->link_name, slot, jail->link_name, slot, jail->link_name, slot);
  if (r == 0 && jail->quota_bytes > 0)
    r = append(&commands, &used, &capacity,
               "add element inet " DOME_NET_TABLE " jail_quota { \"%s\" : \"jail%u_quota\" }\n",
               jail->link_name, slot);
  if (r < 0) {
    free(commands);
    return dome_error_set(err, ENOMEM, "nftables rules of jail slot %u: out of memory", jail->slot);
  }
  r = net_nft_run(ctx, commands, err);
  free(commands);
  return r < 0 ? dome_error_wrap(err, "add nftables chain jail%u", jail->slot) : 0;
}

int net_nft_jail_remove(struct nft_ctx *ctx, const struct dome_net_jail *jail, dome_error *err) {
  char commands[1536];
  unsigned slot = jail->slot;
  const char *link = jail->link_name;
  /* Map elements and the chain first: the objects cannot go while something refers to them. */
  int n = snprintf(commands, sizeof commands,
                   "delete element inet " DOME_NET_TABLE
                   " jails { \"%s\" : jump jail%u }\n"
                   "delete element inet " DOME_NET_TABLE
                   " jail_out { \"%s\" }\n"
                   "delete element inet " DOME_NET_TABLE
                   " jail_in { \"%s\" }\n"
                   "%s%s%s"
                   "flush chain inet " DOME_NET_TABLE
                   " jail%u\n"
                   "delete chain inet " DOME_NET_TABLE
                   " jail%u\n"
                   "delete counter inet " DOME_NET_TABLE
                   " jail%u_out\n"
                   "delete counter inet " DOME_NET_TABLE
                   " jail%u_in\n"
                   "delete counter inet " DOME_NET_TABLE
                   " jail%u_conn\n"
                   "delete counter inet " DOME_NET_TABLE " jail%u_refused\n",
                   link, slot, link, link,
                   jail->quota_bytes ? "delete element inet " DOME_NET_TABLE " jail_quota { \"" : "",
                   jail->quota_bytes ? link : "", jail->quota_bytes ? "\" }\n" : "", slot, slot, slot, slot,
                   slot, slot);
  if (jail->quota_bytes && n > 0 && (size_t)n < sizeof commands)
    snprintf(commands + n, sizeof commands - (size_t)n, "delete quota inet " DOME_NET_TABLE " jail%u_quota\n",
             slot);
  int r = net_nft_run(ctx, commands, err);
  return r < 0 ? dome_error_wrap(err, "remove nftables chain jail%u", jail->slot) : 0;
}

int net_nft_count_jail_chains(struct nft_ctx *shared, size_t *count_out, dome_error *err) {
  struct nft_ctx *ctx = shared ? shared : net_nft_context();
  if (ctx == NULL) return dome_error_set(err, ENOMEM, "nftables: cannot create a context");
  int r = nft_run_cmd_from_buffer(ctx, "list table inet " DOME_NET_TABLE "\n");
  size_t count = 0;
  const char *output = nft_ctx_get_output_buffer(ctx);
  nft_ctx_get_error_buffer(ctx); /* drop the "no such table" message */
  /* No table at all (user mode after close, routed before open) means no chains. */
  if (r == 0)
    for (const char *p = output; p && (p = strstr(p, "chain jail")) != NULL; p++) count++;
  if (ctx != shared) nft_ctx_free(ctx);
  *count_out = count;
  return 0;
}

/* Sum what one JSON document of `nft -j list counter/quota` says about the jail's objects. */
static void usage_from_json(json_t *document, unsigned slot, struct dome_net_jail_usage *usage) {
  char name[32];
  size_t i;
  json_t *item;
  json_array_foreach(json_object_get(document, "nftables"), i, item) {
    json_t *counter = json_object_get(item, "counter"), *quota = json_object_get(item, "quota");
    if (counter) {
      const char *object = json_string_value(json_object_get(counter, "name"));
      uint64_t bytes = (uint64_t)json_integer_value(json_object_get(counter, "bytes"));
      uint64_t packets = (uint64_t)json_integer_value(json_object_get(counter, "packets"));
      if (object == NULL) continue;
      snprintf(name, sizeof name, "jail%u_out", slot);
      if (strcmp(object, name) == 0) usage->egress_bytes = bytes;
      snprintf(name, sizeof name, "jail%u_in", slot);
      if (strcmp(object, name) == 0) usage->ingress_bytes = bytes;
      snprintf(name, sizeof name, "jail%u_conn", slot);
      if (strcmp(object, name) == 0) usage->connections = packets;
      snprintf(name, sizeof name, "jail%u_refused", slot);
      if (strcmp(object, name) == 0) usage->refused = packets;
    } else if (quota) {
      usage->quota_used = (uint64_t)json_integer_value(json_object_get(quota, "used"));
    }
  }
}

int net_nft_jail_usage(struct nft_ctx *ctx, const struct dome_net_jail *jail,
                       struct dome_net_jail_usage *usage, dome_error *err) {
  memset(usage, 0, sizeof *usage);
  char commands[512];
  unsigned slot = jail->slot;
  int n = snprintf(commands, sizeof commands,
                   "list counter inet " DOME_NET_TABLE
                   " jail%u_out\n"
                   "list counter inet " DOME_NET_TABLE
                   " jail%u_in\n"
                   "list counter inet " DOME_NET_TABLE
                   " jail%u_conn\n"
                   "list counter inet " DOME_NET_TABLE " jail%u_refused\n",
                   slot, slot, slot, slot);
  if (jail->quota_bytes && n > 0 && (size_t)n < sizeof commands)
    snprintf(commands + n, sizeof commands - (size_t)n, "list quota inet " DOME_NET_TABLE " jail%u_quota\n",
             slot);
  unsigned flags = nft_ctx_output_get_flags(ctx);
  nft_ctx_output_set_flags(ctx, flags | NFT_CTX_OUTPUT_JSON);
  int r = nft_run_cmd_from_buffer(ctx, commands);
  nft_ctx_output_set_flags(ctx, flags);
  const char *output = nft_ctx_get_output_buffer(ctx);
  const char *message = nft_ctx_get_error_buffer(ctx);
  if (r != 0) {
    size_t length = message ? strcspn(message, "\n") : 0;
    return dome_error_set(err, EIO, "nftables: read counters of jail slot %u: %.*s", slot, (int)length,
                          message ? message : "");
  }
  /* one JSON document per command, one after the other */
  size_t length = output ? strlen(output) : 0, offset = 0;
  for (int documents = 0; offset < length && documents < 8; documents++) {
    while (offset < length && (output[offset] == '\n' || output[offset] == ' ')) offset++;
    if (offset == length) break;
    json_error_t error;
    json_t *document = json_loadb(output + offset, length - offset, JSON_DISABLE_EOF_CHECK, &error);
    if (document == NULL) break;
    usage_from_json(document, slot, usage);
    json_decref(document);
    offset += (size_t)error.position;
  }
  usage->quota_bytes = jail->quota_bytes;
  usage->quota_exceeded = jail->quota_bytes > 0 && usage->quota_used >= jail->quota_bytes;
  return 0;
}

/* ipvlan/macvlan modes: the whole table inet dome of the jail's own namespace (ctx made there). The jail's
 * packets never pass an egress side, so the checks run at its own hooks: output (every packet leaving
 * through `link` counted, cut once the quota is used up, new flows through chain jail<slot>: the same
 * triples, own-address and source rules as the other modes, plus the pool) and input (counted and cut
 * likewise; replies pass; new inbound connections and anything else are dropped). Loopback passes. The jail
 * holds no CAP_NET_ADMIN over its namespace (jail.h drops every capability), so it cannot change the table.
 */
int net_nft_uplink_install(struct nft_ctx *ctx, const struct dome_net_jail *jail, const char *link,
                           struct dome_net_prefix pool, const struct net_local_address *own, size_t own_count,
                           dome_error *err) {
  char *commands = NULL;
  size_t used = 0, capacity = 0;
  unsigned slot = jail->slot;
  int r = append(&commands, &used, &capacity,
                 "add table inet " DOME_NET_TABLE
                 "\n"
                 "add chain inet " DOME_NET_TABLE
                 " refuse\n"
                 "add rule inet " DOME_NET_TABLE
                 " refuse meta l4proto tcp reject with tcp reset\n"
                 "add rule inet " DOME_NET_TABLE " refuse reject with icmpx type admin-prohibited\n");
  if (r == 0) r = append_jail_chain(&commands, &used, &capacity, jail, own, own_count, &pool);
  if (r == 0)
    r = append(&commands, &used, &capacity,
               "add chain inet " DOME_NET_TABLE
               " output { type filter hook output priority filter; policy accept; }\n"
               "add rule inet " DOME_NET_TABLE " output oifname \"%s\" counter name \"jail%u_out\"\n",
               link, slot);
  if (r == 0 && jail->quota_bytes > 0)
    r = append(
        &commands, &used, &capacity,
        "add rule inet " DOME_NET_TABLE
        " output oifname \"%s\" meta l4proto tcp quota name \"jail%u_quota\" reject with tcp reset\n"
        "add rule inet " DOME_NET_TABLE
        " output oifname \"%s\" meta l4proto != tcp quota name \"jail%u_quota\" reject with icmpx type "
        "admin-prohibited\n",
        link, slot, link, slot);
  if (r == 0)
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE
               " output oifname != \"%s\" accept\n"
               "add rule inet " DOME_NET_TABLE
               " output ct state established,related accept\n"
               "add rule inet " DOME_NET_TABLE
               " output jump jail%u\n"
               "add chain inet " DOME_NET_TABLE
               " input { type filter hook input priority filter; policy accept; }\n"
               "add rule inet " DOME_NET_TABLE " input iifname \"%s\" counter name \"jail%u_in\"\n",
               link, slot, link, slot);
  if (r == 0 && jail->quota_bytes > 0)
    r = append(
        &commands, &used, &capacity,
        "add rule inet " DOME_NET_TABLE
        " input iifname \"%s\" meta l4proto tcp tcp flags & rst == 0 quota name \"jail%u_quota\" reject "
        "with tcp reset\n"
        "add rule inet " DOME_NET_TABLE
        " input iifname \"%s\" meta l4proto != tcp quota name \"jail%u_quota\" drop\n",
        link, slot, link, slot);
  if (r == 0)
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE
               " input iifname != \"%s\" accept\n"
               "add rule inet " DOME_NET_TABLE
               " input ct state established,related accept\n"
               "add rule inet " DOME_NET_TABLE " input drop\n",
               link);
  if (r < 0) {
    free(commands);
    return dome_error_set(err, ENOMEM, "nftables rules of jail slot %u: out of memory", slot);
  }
  r = net_nft_run(ctx, commands, err);
  free(commands);
  return r < 0 ? dome_error_wrap(err, "install table inet " DOME_NET_TABLE " in the jail's namespace") : 0;
}
