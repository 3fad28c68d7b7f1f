/* From decision tables to what the plumbing builds: routes, filter rules, resolvers; the address pool.
 * Pure functions: no system calls, so they are unit-tested exhaustively. */
#include "supervisor/net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static uint32_t prefix_mask(uint8_t length) {
  return length == 0 ? 0 : 0xffffffffu << (32 - length);
}

bool dome_net_prefix_overlaps(struct dome_net_prefix a, struct dome_net_prefix b) {
  uint8_t shorter = a.length < b.length ? a.length : b.length;
  return ((a.address ^ b.address) & prefix_mask(shorter)) == 0;
}

static bool prefix_contains(struct dome_net_prefix outer, struct dome_net_prefix inner) {
  return outer.length <= inner.length && ((outer.address ^ inner.address) & prefix_mask(outer.length)) == 0;
}

int dome_net_prefix_parse(const char *text, struct dome_net_prefix *prefix, dome_error *err) {
  char address[INET_ADDRSTRLEN] = "";
  const char *slash = strchr(text, '/');
  size_t address_length = slash ? (size_t)(slash - text) : strlen(text);
  if (address_length == 0 || address_length >= sizeof address)
    return dome_error_set(err, 0, "prefix `%s`: expected a.b.c.d/len", text);
  memcpy(address, text, address_length);
  struct in_addr in;
  if (inet_pton(AF_INET, address, &in) != 1)
    return dome_error_set(err, 0, "prefix `%s`: `%s` is not an IPv4 address", text, address);
  long length = 32;
  if (slash) {
    char *end = NULL;
    errno = 0;
    length = strtol(slash + 1, &end, 10);
    if (slash[1] == '\0' || *end != '\0' || errno != 0 || length < 0 || length > 32)
      return dome_error_set(err, 0, "prefix `%s`: length must be 0..32", text);
  }
  uint32_t value = ntohl(in.s_addr);
  if (value & ~prefix_mask((uint8_t)length))
    return dome_error_set(err, 0, "prefix `%s`: address bits set beyond /%ld", text, length);
  prefix->address = value;
  prefix->length = (uint8_t)length;
  return 0;
}

static const struct dome_net_prefix loopback = {0x7f000000u, 8};

static int add_route(struct dome_net_plan *plan, struct dome_net_prefix prefix, dome_error *err) {
  for (size_t i = 0; i < plan->route_count; i++)
    if (plan->routes[i].address == prefix.address && plan->routes[i].length == prefix.length) return 0;
  if (plan->route_count == DOME_NET_MAX_ROUTES)
    return dome_error_set(err, E2BIG, "more than %d permitted prefixes", DOME_NET_MAX_ROUTES);
  plan->routes[plan->route_count++] = prefix;
  return 0;
}

static int add_filter(struct dome_net_plan *plan, const struct dome_net_filter *filter, dome_error *err) {
  for (size_t i = 0; i < plan->filter_count; i++) {
    const struct dome_net_filter *f = &plan->filters[i];
    if (f->prefix.address == filter->prefix.address && f->prefix.length == filter->prefix.length &&
        f->protocol == filter->protocol && f->port_first == filter->port_first &&
        f->port_last == filter->port_last)
      return 0;
  }
  if (plan->filter_count == DOME_NET_MAX_FILTERS)
    return dome_error_set(err, E2BIG, "more than %d permitted (prefix, protocol, ports) triples",
                          DOME_NET_MAX_FILTERS);
  plan->filters[plan->filter_count++] = *filter;
  return 0;
}

static void add_resolver(struct dome_net_plan *plan, uint32_t address) {
  for (size_t i = 0; i < plan->resolver_count; i++)
    if (plan->resolvers[i] == address) return;
  if (plan->resolver_count < DOME_NET_MAX_RESOLVERS) plan->resolvers[plan->resolver_count++] = address;
}

static void mask6(uint8_t address[16], uint8_t length) {
  for (int i = 0; i < 16; i++) {
    int keep = length >= (i + 1) * 8 ? 8 : length > i * 8 ? length - i * 8 : 0;
    address[i] &= (uint8_t)(keep == 0 ? 0 : 0xff << (8 - keep));
  }
}

static bool prefix6_contains(const uint8_t *outer, uint8_t outer_length, const uint8_t *inner,
                             uint8_t inner_length) {
  if (outer_length > inner_length) return false;
  uint8_t a[16], b[16];
  memcpy(a, outer, 16);
  memcpy(b, inner, 16);
  mask6(a, outer_length);
  mask6(b, outer_length);
  return memcmp(a, b, 16) == 0;
}

/* An IPv6 ALLOW entry: ::1 is the jail's own loopback; ::ffff:0:0/96 is decided as IPv4 by the kernel
 * (kernel.h), so the compiler emits none and a hand-made one is not plumbed either. */
static int add_entry6(struct dome_net_plan *plan, const struct dome_net_entry *entry, dome_error *err) {
  static const uint8_t loopback6[16] = {[15] = 1};
  static const uint8_t mapped[16] = {[10] = 0xff, [11] = 0xff};
  struct dome_net_prefix6 prefix = {.length = entry->prefix_len};
  memcpy(prefix.address, entry->address, 16);
  mask6(prefix.address, prefix.length);
  if (prefix6_contains(loopback6, 128, prefix.address, prefix.length) ||
      prefix6_contains(mapped, 96, prefix.address, prefix.length))
    return 0;
  bool known = false;
  for (size_t i = 0; i < plan->route6_count && !known; i++)
    known =
        plan->routes6[i].length == prefix.length && memcmp(plan->routes6[i].address, prefix.address, 16) == 0;
  if (!known) {
    if (plan->route6_count == DOME_NET_MAX_ROUTES)
      return dome_error_set(err, E2BIG, "more than %d permitted IPv6 prefixes", DOME_NET_MAX_ROUTES);
    plan->routes6[plan->route6_count++] = prefix;
  }
  struct dome_net_filter6 filter = {prefix, entry->protocol, entry->port_first, entry->port_last};
  known = false;
  for (size_t i = 0; i < plan->filter6_count && !known; i++)
    known = memcmp(&plan->filters6[i], &filter, sizeof filter) == 0;
  if (!known) {
    if (plan->filter6_count == DOME_NET_MAX_FILTERS)
      return dome_error_set(err, E2BIG, "more than %d permitted IPv6 (prefix, protocol, ports) triples",
                            DOME_NET_MAX_FILTERS);
    plan->filters6[plan->filter6_count++] = filter;
  }
  plan->needs_egress = true;
  if (entry->protocol == DOME_PROTOCOL_UDP && prefix.length == 128 && entry->port_first <= 53 &&
      entry->port_last >= 53) {
    known = false;
    for (size_t i = 0; i < plan->resolver6_count && !known; i++)
      known = memcmp(plan->resolvers6[i], prefix.address, 16) == 0;
    if (!known && plan->resolver6_count < DOME_NET_MAX_RESOLVERS)
      memcpy(plan->resolvers6[plan->resolver6_count++], prefix.address, 16);
  }
  return 0;
}

int dome_net_plan_from_entries(const struct dome_net_entry *entries, size_t count, struct dome_net_plan *plan,
                               dome_error *err) {
  memset(plan, 0, sizeof *plan);
  if (count > 0 && entries == NULL)
    return dome_error_set(err, 0, "network entries: NULL with count %zu", count);
  for (size_t i = 0; i < count; i++) {
    const struct dome_net_entry *entry = &entries[i];
    int r = 0;
    if (entry->family != AF_INET && entry->family != AF_INET6)
      r = dome_error_set(err, 0, "network entry %zu: family %u is neither AF_INET nor AF_INET6", i,
                         entry->family);
    else if (entry->prefix_len > (entry->family == AF_INET ? 32 : 128))
      r = dome_error_set(err, 0, "network entry %zu: prefix length %u too long", i, entry->prefix_len);
    else if (entry->port_first > entry->port_last)
      r = dome_error_set(err, 0, "network entry %zu: ports %u-%u out of order", i, entry->port_first,
                         entry->port_last);
    else if (entry->protocol != DOME_PROTOCOL_TCP && entry->protocol != DOME_PROTOCOL_UDP)
      r = dome_error_set(err, 0, "network entry %zu: protocol %u is neither tcp nor udp", i, entry->protocol);
    if (r < 0) {
      memset(plan, 0, sizeof *plan);
      return r;
    }
    if (entry->decision != DOME_DECISION_ALLOW) continue; /* the BPF programs enforce the exceptions */
    if (entry->action != DOME_NET_CONNECT && entry->action != DOME_NET_SEND) continue;
    if (entry->family == AF_INET6) {
      if ((r = add_entry6(plan, entry, err)) < 0) {
        dome_error_wrap(err, "network entry %zu", i);
        memset(plan, 0, sizeof *plan);
        return r;
      }
      continue;
    }
    struct dome_net_prefix prefix = {.address = (uint32_t)entry->address[0] << 24 |
                                                (uint32_t)entry->address[1] << 16 |
                                                (uint32_t)entry->address[2] << 8 | entry->address[3],
                                     .length = entry->prefix_len};
    prefix.address &= prefix_mask(prefix.length);
    if (prefix_contains(loopback, prefix)) continue;
    struct dome_net_filter filter = {prefix, entry->protocol, entry->port_first, entry->port_last};
    if ((r = add_route(plan, prefix, err)) < 0 || (r = add_filter(plan, &filter, err)) < 0) {
      dome_error_wrap(err, "network entry %zu", i);
      memset(plan, 0, sizeof *plan);
      return r;
    }
    plan->needs_egress = true;
    if (entry->protocol == DOME_PROTOCOL_UDP && prefix.length == 32 && entry->port_first <= 53 &&
        entry->port_last >= 53)
      add_resolver(plan, prefix.address);
  }
  return 0;
}

int dome_net_resolv_conf(const struct dome_net_plan *plan, char *out, size_t size, dome_error *err) {
  size_t used = 0;
  int n;
#define APPEND(...)                                                                   \
  do {                                                                                \
    n = snprintf(out + used, size > used ? size - used : 0, __VA_ARGS__);             \
    if (n < 0 || used + (size_t)n >= size)                                            \
      return dome_error_set(err, ENOSPC, "resolv.conf: longer than %zu bytes", size); \
    used += (size_t)n;                                                                \
  } while (0)
  APPEND("# written by dome: only resolvers the jail's rules permit (UDP port 53)\n");
  if (plan->resolver_count == 0 && plan->resolver6_count == 0)
    APPEND(
        "# no resolver is permitted: name lookups fail at once; permit net:send udp to a resolver's\n"
        "# address on port 53 to enable them\n");
  for (size_t i = 0; i < plan->resolver_count; i++) {
    struct in_addr in = {htonl(plan->resolvers[i])};
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in, text, sizeof text);
    APPEND("nameserver %s\n", text);
  }
  /* resolv.conf(5) reads at most MAXNS (3) nameserver lines in all: IPv4 ones first */
  for (size_t i = 0; i < plan->resolver6_count && plan->resolver_count + i < DOME_NET_MAX_RESOLVERS; i++) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, plan->resolvers6[i], text, sizeof text);
    APPEND("nameserver %s\n", text);
  }
  APPEND("options timeout:1 attempts:1\n");
#undef APPEND
  return (int)used;
}

int dome_net_slot_addresses(struct dome_net_prefix pool, uint8_t block_length, uint32_t slot,
                            uint32_t *gateway, uint32_t *jail, dome_error *err) {
  if (block_length != 30 && block_length != 31)
    return dome_error_set(err, 0, "pool block length /%u: must be 30 or 31", block_length);
  if (pool.length > block_length)
    return dome_error_set(err, 0, "pool /%u is shorter than one /%u block", pool.length, block_length);
  uint64_t slots = 1ull << (block_length - pool.length);
  if (slot >= slots)
    return dome_error_set(err, ERANGE, "pool slot %u beyond the %llu of the pool", slot,
                          (unsigned long long)slots);
  uint32_t base = pool.address + (slot << (32 - block_length));
  /* /30: network, gateway, jail, broadcast; /31 (RFC 3021): two usable addresses. */
  *gateway = block_length == 30 ? base + 1 : base;
  *jail = block_length == 30 ? base + 2 : base + 1;
  return 0;
}

int dome_net_choose_pool(const struct dome_net_prefix *host, size_t host_count, uint8_t pool_length,
                         struct dome_net_prefix *pool, dome_error *err) {
  const struct dome_net_prefix shared = {0x64400000u, 10}; /* 100.64.0.0/10, RFC 6598 */
  if (pool_length < 10 || pool_length > 30)
    return dome_error_set(err, 0, "pool length /%u: must be 10..30", pool_length);
  uint32_t count = 1u << (pool_length - 10);
  for (uint32_t i = 0; i < count; i++) {
    struct dome_net_prefix candidate = {shared.address + (i << (32 - pool_length)), pool_length};
    bool free_of_host = true;
    for (size_t h = 0; h < host_count && free_of_host; h++) {
      /* A host default route overlaps everything; it is where traffic leaves, not a collision. */
      if (host[h].length == 0) continue;
      if (dome_net_prefix_overlaps(candidate, host[h])) free_of_host = false;
    }
    if (free_of_host) {
      *pool = candidate;
      return 0;
    }
  }
  return dome_error_set(err, EADDRNOTAVAIL, "address pool: every /%u of 100.64.0.0/10 overlaps a host route",
                        pool_length);
}

int dome_net_resolv_conf_for_entries(const struct dome_net_entry *entries, size_t count, char *out,
                                     size_t size, bool *has_resolver_out, dome_error *err) {
  struct dome_net_plan *plan = malloc(sizeof *plan);
  if (plan == NULL) return dome_error_set(err, ENOMEM, "resolv.conf: out of memory");
  int r = dome_net_plan_from_entries(entries, count, plan, err);
  if (r >= 0) r = dome_net_resolv_conf(plan, out, size, err);
  if (r >= 0 && has_resolver_out) *has_resolver_out = plan->resolver_count + plan->resolver6_count > 0;
  free(plan);
  return r;
}

int dome_net_slot_addresses6(struct dome_net_prefix6 pool, uint32_t slot, uint8_t gateway[16],
                             uint8_t jail[16], dome_error *err) {
  if (pool.length != 48) return dome_error_set(err, EINVAL, "IPv6 pool /%u: must be a /48", pool.length);
  if (slot > 65535) return dome_error_set(err, ERANGE, "IPv6 pool slot %u beyond the 65536 /64s", slot);
  memcpy(gateway, pool.address, 6);
  memset(gateway + 6, 0, 10);
  gateway[6] = (uint8_t)(slot >> 8);
  gateway[7] = (uint8_t)slot;
  memcpy(jail, gateway, 16);
  gateway[15] = 1;
  jail[15] = 2;
  return 0;
}
