/* The egress filter and masquerade, through libnftables (nft(8) ruleset syntax, applied atomically per
 * call). Acts in the network namespace of the calling thread: the dome-owned egress namespace in user
 * mode, the host's in routed mode.
 *
 * table inet dome
 *   map jails: egress-side link name -> jump jail<slot>
 *   forward: replies pass; jail-to-jail and new inbound connections to jails are rejected; traffic from a
 *            jail link goes through its own chain; anything else from a jail link is rejected
 *   input:   traffic from a jail link addressed to the egress side itself goes through the jail's chain
 *            too (so the host's addresses are reachable only when a rule names them)
 *   postrouting (nat): the pool is masqueraded towards anything that is not a jail link
 *   jail<slot>: source must be the jail's own address; accept the permitted (prefix, protocol, ports)
 *               whose prefix is exactly (a /32) one of the host's own addresses; reject every other
 *               destination that is an address of the host or of the egress side (v4 and v6, so that a
 *               rule permitting 0.0.0.0/0 does not open the host's services); accept the other permitted
 *               triples; reject the rest (ICMP admin-prohibited, so refused connections fail at once). */
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

int net_nft_table_install(struct nft_ctx *ctx, struct dome_net_prefix pool, dome_error *err) {
  char pool_text[16], commands[2048];
  net_format_ipv4(pool.address, pool_text);
  /* "add table; delete table" first makes the install idempotent (nft 1.0.6 has no `destroy`). */
  snprintf(commands, sizeof commands,
           "add table inet " DOME_NET_TABLE
           "\n"
           "delete table inet " DOME_NET_TABLE
           "\n"
           "table inet " DOME_NET_TABLE
           " {\n"
           "  map jails { type ifname : verdict; }\n"
           "  chain forward {\n"
           "    type filter hook forward priority filter; policy accept;\n"
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
           "    type filter hook input priority filter; policy accept;\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" ct state established,related accept\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" iifname vmap @jails\n"
           "    iifname \"" DOME_NET_LINK_PREFIX
           "*\" reject with icmpx type admin-prohibited\n"
           "  }\n"
           "  chain postrouting {\n"
           "    type nat hook postrouting priority srcnat; policy accept;\n"
           "    ip saddr %s/%u oifname != \"" DOME_NET_LINK_PREFIX
           "*\" masquerade\n"
           "  }\n"
           "}\n",
           pool_text, pool.length);
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
  const char *protocol = f->protocol == DOME_PROTOCOL_TCP ? "tcp" : "udp";
  net_format_ipv4(f->prefix.address, prefix);
  if (f->port_first == 0 && f->port_last == 65535)
    return append(commands, used, capacity,
                  "add rule inet " DOME_NET_TABLE " jail%u ip daddr %s/%u meta l4proto %s accept\n", slot,
                  prefix, f->prefix.length, protocol);
  if (f->port_first == f->port_last)
    return append(commands, used, capacity,
                  "add rule inet " DOME_NET_TABLE " jail%u ip daddr %s/%u %s dport %u accept\n", slot, prefix,
                  f->prefix.length, protocol, f->port_first);
  return append(commands, used, capacity,
                "add rule inet " DOME_NET_TABLE " jail%u ip daddr %s/%u %s dport %u-%u accept\n", slot,
                prefix, f->prefix.length, protocol, f->port_first, f->port_last);
}

int net_nft_jail_add(struct nft_ctx *ctx, const struct dome_net_jail *jail,
                     const struct net_local_address *own, size_t own_count, dome_error *err) {
  char *commands = NULL, address[INET6_ADDRSTRLEN];
  size_t used = 0, capacity = 0;
  net_format_ipv4(jail->address, address);
  int r = append(&commands, &used, &capacity,
                 "add chain inet " DOME_NET_TABLE
                 " jail%u\n"
                 "add rule inet " DOME_NET_TABLE
                 " jail%u ip saddr != %s reject with icmpx type admin-prohibited\n",
                 jail->slot, jail->slot, address);
  /* Filters naming one of the host's own addresses exactly come first; then every own address is
   * rejected, so that a wider prefix (0.0.0.0/0 above all) never reaches the host's services; then the
   * other filters. */
  for (size_t i = 0; r == 0 && i < jail->plan.filter_count; i++)
    if (names_own_address(&jail->plan.filters[i], own, own_count))
      r = append_filter(&commands, &used, &capacity, jail->slot, &jail->plan.filters[i]);
  for (size_t i = 0; r == 0 && i < own_count; i++) {
    bool v4 = own[i].family == AF_INET;
    inet_ntop(v4 ? AF_INET : AF_INET6, own[i].bytes, address, sizeof address);
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE
               " jail%u %s daddr %s reject with icmpx type admin-prohibited\n",
               jail->slot, v4 ? "ip" : "ip6", address);
  }
  for (size_t i = 0; r == 0 && i < jail->plan.filter_count; i++)
    if (!names_own_address(&jail->plan.filters[i], own, own_count))
      r = append_filter(&commands, &used, &capacity, jail->slot, &jail->plan.filters[i]);
  if (r == 0)
    r = append(&commands, &used, &capacity,
               "add rule inet " DOME_NET_TABLE
               " jail%u reject with icmpx type admin-prohibited\n"
               "add element inet " DOME_NET_TABLE " jails { \"%s\" : jump jail%u }\n",
               jail->slot, jail->link_name, jail->slot);
  if (r < 0) {
    free(commands);
    return dome_error_set(err, ENOMEM, "nftables rules of jail slot %u: out of memory", jail->slot);
  }
  r = net_nft_run(ctx, commands, err);
  free(commands);
  return r < 0 ? dome_error_wrap(err, "add nftables chain jail%u", jail->slot) : 0;
}

int net_nft_jail_remove(struct nft_ctx *ctx, const struct dome_net_jail *jail, dome_error *err) {
  char commands[512];
  snprintf(commands, sizeof commands,
           "delete element inet " DOME_NET_TABLE
           " jails { \"%s\" : jump jail%u }\n"
           "flush chain inet " DOME_NET_TABLE
           " jail%u\n"
           "delete chain inet " DOME_NET_TABLE " jail%u\n",
           jail->link_name, jail->slot, jail->slot, jail->slot);
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
