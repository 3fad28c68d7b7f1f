/* Unit tests for supervisor/net's pure part: decision tables -> routes/filters/resolvers, resolv.conf,
 * address pool carving and collision avoidance. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "supervisor/net/net.h"

static struct dome_net_entry entry(uint8_t action, uint8_t protocol, const char *prefix_text, uint16_t first,
                                   uint16_t last, uint8_t decision) {
  struct dome_net_entry e = {.action = action,
                             .protocol = protocol,
                             .family = AF_INET,
                             .port_first = first,
                             .port_last = last,
                             .decision = decision,
                             .policy_index = DOME_NO_POLICY};
  struct dome_net_prefix prefix;
  dome_error err = {0};
  assert_int_equal(dome_net_prefix_parse(prefix_text, &prefix, &err), 0);
  uint32_t network = htonl(prefix.address);
  memcpy(e.address, &network, 4);
  e.prefix_len = prefix.length;
  return e;
}

static uint32_t ip(const char *text) {
  struct in_addr in;
  assert_int_equal(inet_pton(AF_INET, text, &in), 1);
  return ntohl(in.s_addr);
}

static void loopback_only_needs_no_egress(void **state) {
  (void)state;
  struct dome_net_entry entries[] = {
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "127.0.0.1/32", 8080, 8080, DOME_DECISION_ALLOW),
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "127.0.0.0/8", 0, 65535, DOME_DECISION_ALLOW),
      entry(DOME_NET_BIND, DOME_PROTOCOL_TCP, "0.0.0.0/0", 0, 65535, DOME_DECISION_ALLOW),
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.0.0.0/8", 0, 65535, DOME_DECISION_DENY),
  };
  static struct dome_net_plan plan;
  dome_error err = {0};
  assert_int_equal(dome_net_plan_from_entries(entries, 4, &plan, &err), 0);
  assert_false(plan.needs_egress);
  assert_int_equal(plan.route_count, 0);
  assert_int_equal(plan.filter_count, 0);
  assert_int_equal(dome_net_plan_from_entries(NULL, 0, &plan, &err), 0);
  assert_false(plan.needs_egress);
}

static void permitted_slash32_is_routed_alone(void **state) {
  (void)state;
  struct dome_net_entry entries[] = {
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.1.2.3/32", 443, 443, DOME_DECISION_ALLOW),
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.1.2.3/32", 22, 22, DOME_DECISION_DENY),
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.1.2.3/32", 443, 443,
            DOME_DECISION_ALLOW), /* duplicate */
  };
  static struct dome_net_plan plan;
  dome_error err = {0};
  assert_int_equal(dome_net_plan_from_entries(entries, 3, &plan, &err), 0);
  assert_true(plan.needs_egress);
  assert_int_equal(plan.route_count, 1);
  assert_int_equal(plan.routes[0].address, ip("10.1.2.3"));
  assert_int_equal(plan.routes[0].length, 32); /* never the /24 */
  assert_int_equal(plan.filter_count, 1);
  assert_int_equal(plan.filters[0].protocol, DOME_PROTOCOL_TCP);
  assert_int_equal(plan.filters[0].port_first, 443);
  assert_int_equal(plan.filters[0].port_last, 443);
  assert_int_equal(plan.resolver_count, 0);
}

static void resolvers_are_permitted_udp_53_hosts(void **state) {
  (void)state;
  struct dome_net_entry entries[] = {
      entry(DOME_NET_SEND, DOME_PROTOCOL_UDP, "10.1.2.53/32", 53, 53, DOME_DECISION_ALLOW),
      entry(DOME_NET_SEND, DOME_PROTOCOL_UDP, "10.9.0.0/16", 53, 53, DOME_DECISION_ALLOW), /* not a host */
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.1.2.54/32", 53, 53, DOME_DECISION_ALLOW), /* tcp only */
      entry(DOME_NET_SEND, DOME_PROTOCOL_UDP, "10.1.2.55/32", 53, 53, DOME_DECISION_DENY),
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_UDP, "10.1.2.56/32", 1, 1000, DOME_DECISION_ALLOW),
  };
  static struct dome_net_plan plan;
  dome_error err = {0};
  assert_int_equal(dome_net_plan_from_entries(entries, 5, &plan, &err), 0);
  assert_int_equal(plan.resolver_count, 2);
  assert_int_equal(plan.resolvers[0], ip("10.1.2.53"));
  assert_int_equal(plan.resolvers[1], ip("10.1.2.56"));
  char text[512];
  int n = dome_net_resolv_conf(&plan, text, sizeof text, &err);
  assert_true(n > 0);
  assert_non_null(strstr(text, "nameserver 10.1.2.53\nnameserver 10.1.2.56\n"));
  assert_null(strstr(text, "10.1.2.54"));
  assert_non_null(strstr(text, "options timeout:1 attempts:1"));
  assert_int_equal(dome_net_resolv_conf(&plan, text, 40, &err), -ENOSPC);
}

static void resolv_conf_straight_from_entries(void **state) {
  (void)state;
  struct dome_net_entry entries[] = {
      entry(DOME_NET_SEND, DOME_PROTOCOL_UDP, "10.1.2.53/32", 53, 53, DOME_DECISION_ALLOW),
  };
  dome_error err = {0};
  char text[512];
  bool has_resolver = false;
  assert_true(dome_net_resolv_conf_for_entries(entries, 1, text, sizeof text, &has_resolver, &err) > 0);
  assert_true(has_resolver);
  assert_non_null(strstr(text, "nameserver 10.1.2.53\n"));
  assert_true(dome_net_resolv_conf_for_entries(NULL, 0, text, sizeof text, &has_resolver, &err) > 0);
  assert_false(has_resolver);
  entries[0].prefix_len = 40;
  assert_int_equal(dome_net_resolv_conf_for_entries(entries, 1, text, sizeof text, &has_resolver, &err),
                   -EINVAL);
}

static void no_resolver_means_no_nameserver(void **state) {
  (void)state;
  static struct dome_net_plan plan;
  dome_error err = {0};
  char text[512];
  assert_int_equal(dome_net_plan_from_entries(NULL, 0, &plan, &err), 0);
  assert_true(dome_net_resolv_conf(&plan, text, sizeof text, &err) > 0);
  assert_null(strstr(text, "nameserver"));
  assert_non_null(strstr(text, "no resolver is permitted"));
}

static void bad_entries_rejected_with_index(void **state) {
  (void)state;
  static struct dome_net_plan plan;
  dome_error err = {0};
  struct dome_net_entry entries[2] = {
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.1.2.3/32", 443, 443, DOME_DECISION_ALLOW),
      entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.1.2.4/32", 443, 443, DOME_DECISION_ALLOW)};
  entries[1].prefix_len = 33;
  assert_int_equal(dome_net_plan_from_entries(entries, 2, &plan, &err), -EINVAL);
  assert_non_null(strstr(err.message, "network entry 1"));
  assert_false(plan.needs_egress);
  entries[1].prefix_len = 32;
  entries[1].port_first = 500;
  entries[1].port_last = 400;
  assert_int_equal(dome_net_plan_from_entries(entries, 2, &plan, &err), -EINVAL);
  entries[1].port_first = 400;
  entries[1].family = 99;
  assert_int_equal(dome_net_plan_from_entries(entries, 2, &plan, &err), -EINVAL);
  entries[1].family = AF_INET;
  entries[1].protocol = 1;
  assert_int_equal(dome_net_plan_from_entries(entries, 2, &plan, &err), -EINVAL);
  assert_int_equal(plan.route_count, 0);
}

static void too_many_prefixes_is_e2big(void **state) {
  (void)state;
  static struct dome_net_entry entries[DOME_NET_MAX_ROUTES + 1];
  for (size_t i = 0; i <= DOME_NET_MAX_ROUTES; i++) {
    char text[32];
    snprintf(text, sizeof text, "10.2.%zu.%zu/32", i / 250, i % 250 + 1);
    entries[i] = entry(DOME_NET_CONNECT, DOME_PROTOCOL_TCP, text, 443, 443, DOME_DECISION_ALLOW);
  }
  static struct dome_net_plan plan;
  dome_error err = {0};
  assert_int_equal(dome_net_plan_from_entries(entries, DOME_NET_MAX_ROUTES, &plan, &err), 0);
  assert_int_equal(plan.route_count, DOME_NET_MAX_ROUTES);
  assert_int_equal(dome_net_plan_from_entries(entries, DOME_NET_MAX_ROUTES + 1, &plan, &err), -E2BIG);
  assert_int_equal(plan.route_count, 0);
}

static void ipv6_allow_is_routed(void **state) {
  (void)state;
  struct dome_net_entry e = {.action = DOME_NET_CONNECT,
                             .protocol = DOME_PROTOCOL_TCP,
                             .family = AF_INET6,
                             .prefix_len = 128,
                             .port_first = 443,
                             .port_last = 443,
                             .decision = DOME_DECISION_ALLOW};
  e.address[0] = 0xfd;
  struct dome_net_entry loop6 = e;
  memset(loop6.address, 0, 16);
  loop6.address[15] = 1;
  struct dome_net_entry mapped = e; /* ::ffff:10.0.0.1: decided as IPv4 by the kernel, never plumbed */
  memset(mapped.address, 0, 16);
  mapped.address[10] = mapped.address[11] = 0xff;
  mapped.address[12] = 10;
  mapped.address[15] = 1;
  struct dome_net_entry resolver = e; /* udp fd00::53 port 53 */
  resolver.protocol = DOME_PROTOCOL_UDP;
  resolver.action = DOME_NET_SEND;
  resolver.port_first = resolver.port_last = 53;
  resolver.address[15] = 0x53;
  static struct dome_net_plan plan;
  dome_error err = {0};
  struct dome_net_entry only_loopback[] = {loop6, mapped};
  assert_int_equal(dome_net_plan_from_entries(only_loopback, 2, &plan, &err), 0);
  assert_false(plan.needs_egress);
  assert_int_equal(plan.route6_count, 0);
  struct dome_net_entry entries[] = {e, loop6, mapped, resolver, e};
  assert_int_equal(dome_net_plan_from_entries(entries, 5, &plan, &err), 0);
  assert_true(plan.needs_egress);
  assert_int_equal(plan.route_count, 0);
  assert_int_equal(plan.route6_count, 2); /* fd00::/128 and fd00::53/128, the duplicate merged */
  assert_int_equal(plan.filter6_count, 2);
  assert_int_equal(plan.routes6[0].length, 128);
  assert_int_equal(plan.routes6[0].address[0], 0xfd);
  assert_int_equal(plan.resolver6_count, 1);
  assert_int_equal(plan.ipv6_allow_ignored, 0);
  char text[512];
  assert_true(dome_net_resolv_conf(&plan, text, sizeof text, &err) > 0);
  assert_non_null(strstr(text, "nameserver fd00::53\n"));
}

static void pool6_slots_carve_64(void **state) {
  (void)state;
  struct dome_net_prefix6 pool = {.address = {0xfd, 0x12, 0x34, 0x56, 0x78, 0x9a}, .length = 48};
  uint8_t gateway[16], jail[16];
  dome_error err = {0};
  assert_int_equal(dome_net_slot_addresses6(pool, 0x0102, gateway, jail, &err), 0);
  char g[64], j[64];
  inet_ntop(AF_INET6, gateway, g, sizeof g);
  inet_ntop(AF_INET6, jail, j, sizeof j);
  assert_string_equal(g, "fd12:3456:789a:102::1");
  assert_string_equal(j, "fd12:3456:789a:102::2");
  assert_int_equal(dome_net_slot_addresses6(pool, 65536, gateway, jail, &err), -ERANGE);
  pool.length = 56;
  assert_int_equal(dome_net_slot_addresses6(pool, 1, gateway, jail, &err), -EINVAL);
}

static void pool_slots_carve_30_and_31(void **state) {
  (void)state;
  dome_error err = {0};
  struct dome_net_prefix pool = {ip("100.64.0.0"), 16};
  uint32_t gateway, jail;
  assert_int_equal(dome_net_slot_addresses(pool, 30, 1, &gateway, &jail, &err), 0);
  assert_int_equal(gateway, ip("100.64.0.5"));
  assert_int_equal(jail, ip("100.64.0.6"));
  assert_int_equal(dome_net_slot_addresses(pool, 30, 16383, &gateway, &jail, &err), 0);
  assert_int_equal(jail, ip("100.64.255.254"));
  assert_int_equal(dome_net_slot_addresses(pool, 30, 16384, &gateway, &jail, &err), -ERANGE);
  assert_int_equal(dome_net_slot_addresses(pool, 31, 3, &gateway, &jail, &err), 0);
  assert_int_equal(gateway, ip("100.64.0.6"));
  assert_int_equal(jail, ip("100.64.0.7"));
  assert_int_equal(dome_net_slot_addresses(pool, 29, 0, &gateway, &jail, &err), -EINVAL);
}

static void pool_avoids_host_routes(void **state) {
  (void)state;
  dome_error err = {0};
  struct dome_net_prefix pool;
  struct dome_net_prefix host[] = {{0, 0}, /* default route: not a collision */
                                   {ip("100.64.0.0"), 24},
                                   {ip("100.65.3.7"), 32},
                                   {ip("192.0.2.0"), 24}};
  assert_int_equal(dome_net_choose_pool(host, 4, 16, &pool, &err), 0);
  assert_int_equal(pool.address, ip("100.66.0.0"));
  assert_int_equal(pool.length, 16);
  assert_int_equal(dome_net_choose_pool(host, 1, 16, &pool, &err), 0);
  assert_int_equal(pool.address, ip("100.64.0.0"));
  struct dome_net_prefix everything[] = {{ip("100.64.0.0"), 10}};
  assert_int_equal(dome_net_choose_pool(everything, 1, 16, &pool, &err), -EADDRNOTAVAIL);
  struct dome_net_prefix wide[] = {{ip("96.0.0.0"), 4}};
  assert_int_equal(dome_net_choose_pool(wide, 1, 16, &pool, &err), -EADDRNOTAVAIL);
}

static void prefix_parse_and_overlap(void **state) {
  (void)state;
  dome_error err = {0};
  struct dome_net_prefix p;
  assert_int_equal(dome_net_prefix_parse("10.1.2.3", &p, &err), 0);
  assert_int_equal(p.length, 32);
  assert_int_equal(dome_net_prefix_parse("10.1.0.0/16", &p, &err), 0);
  assert_int_equal(dome_net_prefix_parse("10.1.2.0/16", &p, &err), -EINVAL);
  assert_non_null(strstr(err.message, "10.1.2.0/16"));
  assert_int_equal(dome_net_prefix_parse("10.1.2.0/33", &p, &err), -EINVAL);
  assert_int_equal(dome_net_prefix_parse("10.1.2/24", &p, &err), -EINVAL);
  assert_int_equal(dome_net_prefix_parse("10.1.2.0/", &p, &err), -EINVAL);
  assert_true(dome_net_prefix_overlaps((struct dome_net_prefix){ip("10.0.0.0"), 8},
                                       (struct dome_net_prefix){ip("10.1.2.3"), 32}));
  assert_false(dome_net_prefix_overlaps((struct dome_net_prefix){ip("10.0.0.0"), 8},
                                        (struct dome_net_prefix){ip("11.0.0.0"), 8}));
  assert_true(
      dome_net_prefix_overlaps((struct dome_net_prefix){0, 0}, (struct dome_net_prefix){ip("11.0.0.0"), 8}));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loopback_only_needs_no_egress),
      cmocka_unit_test(permitted_slash32_is_routed_alone),
      cmocka_unit_test(resolvers_are_permitted_udp_53_hosts),
      cmocka_unit_test(no_resolver_means_no_nameserver),
      cmocka_unit_test(resolv_conf_straight_from_entries),
      cmocka_unit_test(bad_entries_rejected_with_index),
      cmocka_unit_test(too_many_prefixes_is_e2big),
      cmocka_unit_test(ipv6_allow_is_routed),
      cmocka_unit_test(pool6_slots_carve_64),
      cmocka_unit_test(pool_slots_carve_30_and_31),
      cmocka_unit_test(pool_avoids_host_routes),
      cmocka_unit_test(prefix_parse_and_overlap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
