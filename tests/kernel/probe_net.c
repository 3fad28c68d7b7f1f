/* Network scenario: cgroup programs (and at the full level socket_connect) on a leaf of our own. */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/kernel/probe.h"

static uint16_t port_a, port_b, port_udp, port_bind;

static int listen_on(int family, uint16_t *port, int type) {
  int fd = socket(family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_storage ss = {0};
  socklen_t length;
  if (family == AF_INET6) {
    int off = 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons(*port);
    length = sizeof(*in6);
  } else {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in->sin_port = htons(*port);
    length = sizeof(*in);
  }
  if (bind(fd, (struct sockaddr *)&ss, length) != 0 || (type == SOCK_STREAM && listen(fd, 64) != 0)) {
    close(fd);
    return -1;
  }
  getsockname(fd, (struct sockaddr *)&ss, &length);
  *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                   : ((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

/* connect() result: 0 or errno. Non-blocking so that an unexpected allow never waits on the network. */
static int try_connect(int family, int type, const char *address, uint16_t port) {
  int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno;
  struct sockaddr_storage ss = {0};
  socklen_t length;
  if (family == AF_INET6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, address, &in6->sin6_addr);
    in6->sin6_port = htons(port);
    length = sizeof(*in6);
  } else {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    inet_pton(AF_INET, address, &in->sin_addr);
    in->sin_port = htons(port);
    length = sizeof(*in);
  }
  int r = connect(fd, (struct sockaddr *)&ss, length) == 0 ? 0 : errno;
  if (r == EINPROGRESS) r = 0;
  close(fd);
  return r;
}

static int try_sendto(const char *address, uint16_t port, size_t size) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, address, &in.sin_addr);
  char buffer[2048] = {0};
  int r = sendto(fd, buffer, size, 0, (struct sockaddr *)&in, sizeof(in)) == (ssize_t)size ? 0 : errno;
  close(fd);
  return r;
}

static int try_bind(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in in = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int r = bind(fd, (struct sockaddr *)&in, sizeof(in)) == 0 ? 0 : errno;
  close(fd);
  return r;
}

static const char *err_name(int e) {
  return e ? strerror(e) : "success";
}

static int jailed_checks(void *arg) {
  bool full = *(const bool *)arg;
  int e;
  e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.1", port_a);
  probe_check(e == 0, "connect4 tcp permitted 127.0.0.1:A", "got %s", err_name(e));
  e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.1", port_b);
  probe_check(e == EPERM, "connect4 tcp forbid overrides permit 127.0.0.1:B", "got %s", err_name(e));
  e = try_connect(AF_INET, SOCK_STREAM, "192.0.2.1", 80);
  probe_check(e == EPERM, "connect4 tcp default deny 192.0.2.1:80", "got %s", err_name(e));
  e = try_connect(AF_INET6, SOCK_STREAM, "::ffff:127.0.0.1", port_a);
  probe_check(e == 0, "connect6 IPv4-mapped permitted ::ffff:127.0.0.1:A", "got %s", err_name(e));
  e = try_connect(AF_INET6, SOCK_STREAM, "::ffff:127.0.0.1", port_b);
  probe_check(e == EPERM, "connect6 IPv4-mapped decides as IPv4 ::ffff:127.0.0.1:B", "got %s", err_name(e));
  e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.2", port_a);
  probe_check(e == 0, "connect4 tcp permitted 127.0.0.2:A (before the rule change)", "got %s", err_name(e));
  e = try_connect(AF_INET6, SOCK_STREAM, "::1", port_a);
  probe_check(e == 0, "connect6 permitted [::1]:A", "got %s", err_name(e));
  e = try_connect(AF_INET6, SOCK_STREAM, "::1", port_b);
  probe_check(e == EPERM, "connect6 default deny [::1]:B", "got %s", err_name(e));
  e = try_sendto("127.0.0.1", port_udp, 16);
  probe_check(e == 0, "sendmsg4 udp permitted 127.0.0.1:U", "got %s", err_name(e));
  e = try_sendto("127.0.0.53", 53, 16);
  probe_check(e == EPERM, "sendmsg4 udp to a forbidden resolver 127.0.0.53:53", "got %s", err_name(e));
  e = try_connect(AF_INET, SOCK_DGRAM, "127.0.0.53", 53);
  probe_check(e == EPERM, "connect4 udp to a forbidden resolver 127.0.0.53:53", "got %s", err_name(e));
  e = try_bind(port_bind);
  probe_check(e == 0, "bind4 permitted 127.0.0.1:C", "got %s", err_name(e));
  e = try_bind((uint16_t)(port_bind + 1));
  probe_check(e == EPERM, "bind4 default deny 127.0.0.1:C+1", "got %s", err_name(e));
  int fd;
  if (full) { /* the cgroup hook only sees AF_INET/AF_INET6; other families need BPF-LSM (or seccomp) */
    fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    e = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    probe_check(e == EPERM, "socket_create AF_PACKET refused", "got %s", err_name(e));
  }
  fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
  e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_check(e == EPERM, "sock_create raw IPv4 refused", "got %s", err_name(e));
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_check(e == 0, "sock_create AF_UNIX permitted", "got %s", err_name(e));
  return 0;
}

static int quota_checks(void *arg) {
  (void)arg;
  int sent = 0, e = 0;
  for (; sent < 200; sent++)
    if ((e = try_sendto("127.0.0.1", port_udp, 1000)) != 0) break;
  /* quota 20000 bytes, each datagram 1028 bytes of IP: the 20th crosses it. */
  probe_check(sent >= 15 && sent <= 25 && e == EPERM,
              "egress quota exhaustion drops datagrams past 20000 bytes", "sent %d then %s", sent,
              err_name(e));
  return 0;
}

static int swap_checks(void *arg) {
  (void)arg;
  int e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.2", port_a);
  probe_check(e == EPERM, "rule change applies to the running jail (127.0.0.2 now forbidden)", "got %s",
              err_name(e));
  return 0;
}

/* In a leaf whose programs were attached ahead of its jail (dome_kernel_prelink), before the jail's slot. */
static int unregistered_checks(void *arg) {
  (void)arg;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_check(e == EPERM, "prelinked leaf before its jail: an inet socket is refused", "got %s", err_name(e));
  fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_check(e == EPERM, "prelinked leaf before its jail: an inet6 socket is refused", "got %s",
              err_name(e));
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  e = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  probe_check(e == 0, "prelinked leaf before its jail: AF_UNIX is not the cgroup hook's", "got %s",
              err_name(e));
  return 0;
}

static int registered_checks(void *arg) {
  (void)arg;
  int e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.1", port_a);
  probe_check(e == 0, "prelinked leaf, jail registered: its rules permit 127.0.0.1:A", "got %s", err_name(e));
  e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.1", port_b);
  probe_check(e == EPERM, "prelinked leaf, jail registered: its rules forbid 127.0.0.1:B", "got %s",
              err_name(e));
  return 0;
}

/* Programs of `type` attached to the leaf (BPF_PROG_QUERY), or -1. */
static int attached_programs(int cgroup_fd, enum bpf_attach_type type) {
  __u32 count = 0;
  return bpf_prog_query(cgroup_fd, type, 0, NULL, NULL, &count) == 0 ? (int)count : -1;
}

/* A prepared jail's leaf: programs attached ahead, refusing until dome_kernel_attach registers the jail,
 * which takes those links (no second set); a prelink no jail took is dropped with nothing left. */
static void prelink_checks(struct dome_kernel *kernel, uint32_t ruleset) {
  struct probe_leaf early = {.fd = -1};
  dome_error err = {0};
  if (!probe_check(probe_leaf_create(&early, "prelink") == 0, "prelink: a leaf", "%s", strerror(errno)))
    return;
  int r = dome_kernel_prelink(kernel, early.fd, early.id, &err);
  if (probe_check(r == 0 && dome_kernel_prelinked_count(kernel) == 1, "prelink the cgroup programs to a leaf",
                  "%d %s", r, err.message)) {
    probe_check(attached_programs(early.fd, BPF_CGROUP_INET4_CONNECT) == 1 &&
                    attached_programs(early.fd, BPF_CGROUP_INET_SOCK_CREATE) == 1,
                "prelink: connect4 and sock_create are attached before the jail exists", "%d %d",
                attached_programs(early.fd, BPF_CGROUP_INET4_CONNECT),
                attached_programs(early.fd, BPF_CGROUP_INET_SOCK_CREATE));
    r = dome_kernel_prelink(kernel, early.fd, early.id, &err);
    probe_check(r == -EEXIST, "prelink twice: -EEXIST", "%d", r);
    probe_in_leaf(&early, unregistered_checks, NULL);
    struct dome_kernel_attachment *attachment = NULL;
    struct dome_kernel_jail jail = {.cgroup_fd = early.fd, .cgroup_id = early.id, .ruleset = ruleset};
    r = dome_kernel_attach(kernel, &jail, &attachment, &err);
    probe_check(r == 0 && dome_kernel_prelinked_count(kernel) == 0 &&
                    attached_programs(early.fd, BPF_CGROUP_INET4_CONNECT) == 1,
                "attach takes the prelinked links (one program per hook)",
                "%d %s, %zu prelinked, %d attached", r, err.message, dome_kernel_prelinked_count(kernel),
                attached_programs(early.fd, BPF_CGROUP_INET4_CONNECT));
    if (r == 0) {
      probe_in_leaf(&early, registered_checks, NULL);
      dome_kernel_detach(kernel, attachment);
    }
    probe_check(attached_programs(early.fd, BPF_CGROUP_INET4_CONNECT) == 0, "detach: nothing attached", "%d",
                attached_programs(early.fd, BPF_CGROUP_INET4_CONNECT));
  }
  r = dome_kernel_prelink(kernel, early.fd, early.id, &err);
  dome_kernel_prelink_drop(kernel, early.id);
  dome_kernel_prelink_drop(kernel, early.id); /* again: a no-op */
  probe_check(r == 0 && dome_kernel_prelinked_count(kernel) == 0 &&
                  attached_programs(early.fd, BPF_CGROUP_INET_SOCK_CREATE) == 0,
              "a prelink no jail took is dropped with nothing attached", "%d %zu %d", r,
              dome_kernel_prelinked_count(kernel), attached_programs(early.fd, BPF_CGROUP_INET_SOCK_CREATE));
  probe_leaf_remove(&early);
}

static const char *tables_json(char *out, size_t size, bool forbid_a) {
  snprintf(
      out, size,
      "{\"agent\": \"probe\", \"policy_version\": \"%s\","
      " \"policies\": [\"permit-local\", \"forbid-port-b\", \"permit-udp\", \"permit-bind\", \"forbid-a\"],"
      " \"network\": ["
      "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [0, %u], "
      "\"decision\": \"allow\", \"policy\": \"permit-local\"},"
      "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [%u, %u], "
      "\"decision\": \"deny\", \"policy\": \"forbid-port-b\"},"
      "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [%u, "
      "65535], \"decision\": \"allow\", \"policy\": \"permit-local\"},"
      "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.2/32\", \"ports\": [0, "
      "65535], \"decision\": \"%s\", \"policy\": \"%s\"},"
      "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"::1/128\", \"ports\": [%u, %u], "
      "\"decision\": \"allow\", \"policy\": \"permit-local\"},"
      "  {\"action\": \"send\", \"protocol\": \"udp\", \"prefix\": \"127.0.0.1/32\", \"ports\": [%u, %u], "
      "\"decision\": \"allow\", \"policy\": \"permit-udp\"},"
      "  {\"action\": \"bind\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.1/32\", \"ports\": [%u, %u], "
      "\"decision\": \"allow\", \"policy\": \"permit-bind\"}"
      " ], \"files\": []}",
      forbid_a ? "v2" : "v1", port_b - 1, port_b, port_b, port_b + 1, forbid_a ? "deny" : "allow",
      forbid_a ? "forbid-a" : "permit-local", port_a, port_a, port_udp, port_udp, port_bind, port_bind);
  return out;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int probe_scenario_net(enum dome_enforcement_level level) {
  int listen_a, listen_b, listen_udp, probe_fd;
  port_a = port_b = port_udp = port_bind = 0;
  listen_a = listen_on(AF_INET6, &port_a, SOCK_STREAM);
  listen_b = listen_on(AF_INET6, &port_b, SOCK_STREAM);
  listen_udp = listen_on(AF_INET, &port_udp, SOCK_DGRAM);
  probe_fd = listen_on(AF_INET, &port_bind, SOCK_STREAM); /* a free port for the bind case */
  if (listen_a < 0 || listen_b < 0 || listen_udp < 0 || probe_fd < 0) return -errno;
  close(probe_fd);
  if (port_b == 65535 || port_bind == 65535) return -EAGAIN;

  struct probe_leaf leaf = {.fd = -1}, quota_leaf = {.fd = -1};
  int r = probe_leaf_create(&leaf, "net");
  if (r < 0) return r;
  r = probe_leaf_create(&quota_leaf, "quota");
  if (r < 0) {
    probe_leaf_remove(&leaf);
    return r;
  }
  struct dome_kernel *kernel = NULL;
  struct dome_kernel_options options = {.level = level};
  dome_error err = {0};
  struct dome_rule_tables tables;
  char json[4096];
  dome_rule_tables_init(&tables);
  r = dome_kernel_open(&kernel, &options, &err);
  if (!probe_check(r == 0, "open kernel enforcement", "%s", err.message)) goto out;
  r = probe_tables(&tables, tables_json(json, sizeof(json), false));
  if (r < 0) goto out;
  r = dome_kernel_install_tables(kernel, 7, &tables, &err);
  if (!probe_check(r == 0, "install tables", "%s", err.message)) goto out;
  struct dome_kernel_attachment *attachment = NULL, *quota_attachment = NULL;
  struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 7};
  r = dome_kernel_attach(kernel, &jail, &attachment, &err);
  if (!probe_check(r == 0, "attach cgroup programs to the leaf", "%s", err.message)) goto out;

  bool full = level == DOME_LEVEL_FULL;
  probe_check(probe_in_leaf(&leaf, jailed_checks, &full) == 0, "jailed child ran", "child failed");
  probe_collect(kernel, 500);
  char object[64];
  snprintf(object, sizeof(object), "127.0.0.1:%u", port_b);
  enum dome_hook connect4 = level == DOME_LEVEL_FULL ? DOME_HOOK_SOCKET_CONNECT : DOME_HOOK_CONNECT4;
  enum dome_hook connect6 = level == DOME_LEVEL_FULL ? DOME_HOOK_SOCKET_CONNECT : DOME_HOOK_CONNECT6;
  probe_check(probe_has_denial(connect4, object, "forbid-port-b"), "event: forbid-port-b names 127.0.0.1:B",
              "%u events", probe_denial_count);
  probe_check(probe_has_denial(connect4, "192.0.2.1:80", ""), "event: default deny names 192.0.2.1:80",
              "missing");
  probe_check(probe_has_denial(connect6, object, "forbid-port-b"),
              "event: IPv4-mapped reported as 127.0.0.1:B", "missing");
  snprintf(object, sizeof(object), "[::1]:%u", port_b);
  probe_check(probe_has_denial(connect6, object, ""), "event: [::1]:B", "missing");
  probe_check(probe_has_denial(DOME_HOOK_SENDMSG4, "127.0.0.53:53", ""), "event: UDP resolver 127.0.0.53:53",
              "missing");
  snprintf(object, sizeof(object), "127.0.0.1:%u", port_bind + 1);
  probe_check(probe_has_denial(DOME_HOOK_BIND4, object, ""), "event: bind 127.0.0.1:C+1", "missing");
  probe_check(
      probe_has_denial(full ? DOME_HOOK_SOCKET_CREATE : DOME_HOOK_SOCK_CREATE, "family 2 type 3", NULL),
      "event: sock_create raw IPv4", "missing");
  if (full)
    probe_check(probe_has_denial(DOME_HOOK_SOCKET_CREATE, "family 17 type 3", NULL),
                "event: socket_create AF_PACKET", "missing");
  bool right_jail = probe_denial_count > 0;
  for (unsigned i = 0; i < probe_denial_count; i++)
    right_jail = right_jail && probe_denials[i].cgroup_id == leaf.id;
  probe_check(right_jail, "events carry the jail's cgroup id", "mismatch");

  /* Scoping: the same connect from outside the jail is untouched. */
  int e = try_connect(AF_INET, SOCK_STREAM, "127.0.0.1", port_b);
  probe_check(e == 0, "outside the jail the forbidden port is reachable (scoped)", "got %s", err_name(e));

  /* Egress quota on a second jail. */
  struct dome_kernel_jail quota_jail = {
      .cgroup_fd = quota_leaf.fd, .cgroup_id = quota_leaf.id, .ruleset = 7, .egress_quota_bytes = 20000};
  r = dome_kernel_attach(kernel, &quota_jail, &quota_attachment, &err);
  if (probe_check(r == 0, "attach quota jail", "%s", err.message)) {
    probe_in_leaf(&quota_leaf, quota_checks, NULL);
    probe_collect(kernel, 500);
    probe_check(probe_denial_count >= 1 && probe_denials[0].hook == DOME_HOOK_EGRESS &&
                    probe_denials[0].cgroup_id == quota_leaf.id,
                "event: egress quota", "%u events", probe_denial_count);
    int64_t used = dome_kernel_egress_bytes(kernel, quota_attachment);
    probe_check(used > 20000, "egress bytes counted past the quota", "%lld", (long long)used);
    dome_kernel_detach(kernel, quota_attachment);
  }

  prelink_checks(kernel, 7);
  probe_collect(kernel, 100); /* the refused sockets' events: not the rule change's */

  /* Rule change on the running jail: one switch of the ruleset's generation. */
  struct dome_rule_tables changed;
  dome_rule_tables_init(&changed);
  if (probe_tables(&changed, tables_json(json, sizeof(json), true)) == 0) {
    double start = now_ms();
    r = dome_kernel_install_tables(kernel, 7, &changed, &err);
    double took = now_ms() - start;
    if (probe_check(r == 0, "install changed tables", "%s", err.message)) {
      printf("# rule change applied in %.3f ms\n", took);
      probe_in_leaf(&leaf, swap_checks, NULL);
      probe_collect(kernel, 500);
      snprintf(object, sizeof(object), "127.0.0.2:%u", port_a);
      probe_check(probe_has_denial(connect4, object, "forbid-a"), "event after the change names forbid-a",
                  "missing");
    }
  }
  /* Old generations leave the maps: after installs 1, 2, 3 only generations 2 and 3 remain. */
  size_t counts[3] = {0}, counts_after[3] = {0};
  dome_kernel_rule_entries(kernel, counts);
  r = dome_kernel_install_tables(kernel, 7, &tables, &err);
  dome_kernel_rule_entries(kernel, counts_after);
  probe_check(r == 0 && counts[0] == 10 && counts_after[0] == 10,
              "old generations are removed from the maps (5 groups x 2 generations)",
              "%zu then %zu network groups", counts[0], counts_after[0]);
  dome_rule_tables_free(&changed);
  dome_kernel_detach(kernel, attachment);
out:
  dome_kernel_close(kernel);
  dome_rule_tables_free(&tables);
  probe_leaf_remove(&leaf);
  probe_leaf_remove(&quota_leaf);
  probe_check(access(leaf.path, F_OK) != 0 && access(quota_leaf.path, F_OK) != 0, "leaves removed",
              "still there");
  close(listen_a);
  close(listen_b);
  close(listen_udp);
  return r < 0 ? r : 0;
}
