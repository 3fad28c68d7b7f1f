/* Property scenario: for random valid tables and random concrete requests, the kernel's decision (and the
 * deciding entry named by the denial event) equals the reference lookup of kernel.h — the semantics the
 * Cedar→table compiler targets. Network: UDP connect() (sends nothing) to random IPv4, IPv6 and
 * IPv4-mapped destinations. Files (full level only): open() of every node of a random tree. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/kernel/probe.h"

#define BATCH 200

struct request {
  int family; /* AF_INET or AF_INET6 */
  uint8_t address[16];
  uint16_t port;
  char path[128];
};

static struct request *requests;
static int *outcomes; /* shared with the child: errno of each request (0 = allowed) */
static size_t request_count;

static unsigned rnd(unsigned n) {
  return (unsigned)random() % n;
}

static void random_v4(uint8_t *a) {
  static const uint8_t first[] = {10, 127, 192, 203};
  a[0] = first[rnd(4)];
  a[1] = (uint8_t)rnd(3);
  a[2] = (uint8_t)rnd(3);
  a[3] = (uint8_t)(rnd(4) * 64 + rnd(2));
}

static void random_v6(uint8_t *a) {
  memset(a, 0, 16);
  a[0] = 0x20, a[1] = 0x01, a[2] = 0x0d, a[3] = 0xb8;
  a[4] = (uint8_t)rnd(3);
  a[15] = (uint8_t)rnd(3);
}

static void mask(uint8_t *a, unsigned length, unsigned bytes) {
  for (unsigned b = 0; b < bytes; b++) {
    unsigned first_bit = b * 8;
    if (first_bit >= length)
      a[b] = 0;
    else if (length - first_bit < 8)
      a[b] &= (uint8_t)(0xff << (8 - (length - first_bit)));
  }
}

static void random_net_tables(struct dome_rule_tables *t) {
  dome_error err = {0};
  uint32_t policies[4];
  const char *names[] = {"permit-a", "forbid-b", "permit-c", "forbid-d"};
  for (int i = 0; i < 4; i++) dome_rule_tables_add_policy(t, names[i], &policies[i], &err);
  static const unsigned v4_lengths[] = {0, 8, 16, 24, 26, 32}, v6_lengths[] = {0, 32, 40, 120, 128};
  for (int g = 0; g < 30; g++) {
    struct dome_net_entry e = {.action = DOME_NET_CONNECT};
    e.protocol = rnd(5) == 0 ? DOME_PROTOCOL_TCP : DOME_PROTOCOL_UDP;
    if (rnd(3) == 0) {
      e.family = AF_INET6;
      random_v6(e.address);
      e.prefix_len = (uint8_t)v6_lengths[rnd(5)];
      mask(e.address, e.prefix_len, 16);
    } else {
      e.family = AF_INET;
      random_v4(e.address);
      e.prefix_len = (uint8_t)v4_lengths[rnd(6)];
      mask(e.address, e.prefix_len, 4);
    }
    /* a group already present would overlap its ranges: skip duplicates */
    bool duplicate = false;
    for (size_t i = 0; i < t->net_count; i++)
      duplicate |= memcmp(&t->net[i], &e, offsetof(struct dome_net_entry, port_first)) == 0;
    if (duplicate) continue;
    unsigned port = 1 + rnd(3);
    for (int r = 0; r < 1 + (int)rnd(4) && port <= 24; r++) {
      e.port_first = (uint16_t)port;
      e.port_last = (uint16_t)(port + rnd(6));
      e.decision = rnd(3) ? DOME_DECISION_ALLOW : DOME_DECISION_DENY;
      e.policy_index = rnd(5) == 0 ? DOME_NO_POLICY : policies[rnd(4)];
      dome_rule_tables_add_net(t, &e, &err);
      port = e.port_last + 1 + rnd(3);
    }
  }
}

static int net_batch(void *arg) {
  size_t first = *(size_t *)arg;
  for (size_t i = first; i < first + BATCH && i < request_count; i++) {
    struct request *q = &requests[i];
    int fd = socket(q->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss = {0};
    socklen_t length;
    if (q->family == AF_INET) {
      struct sockaddr_in *in = (struct sockaddr_in *)&ss;
      in->sin_family = AF_INET;
      memcpy(&in->sin_addr, q->address, 4);
      in->sin_port = htons(q->port);
      length = sizeof(*in);
    } else {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
      in6->sin6_family = AF_INET6;
      memcpy(&in6->sin6_addr, q->address, 16);
      in6->sin6_port = htons(q->port);
      length = sizeof(*in6);
    }
    outcomes[i] = connect(fd, (struct sockaddr *)&ss, length) == 0 ? 0 : errno;
    close(fd);
  }
  return 0;
}

static int file_batch(void *arg) {
  size_t first = *(size_t *)arg;
  for (size_t i = first; i < first + BATCH && i < request_count; i++) {
    int fd = open(requests[i].path, O_RDONLY | O_CLOEXEC);
    outcomes[i] = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
  }
  return 0;
}

/* Descriptors opened by the parent (outside the jail) and inherited by the batch child: read() meets
 * file_permission, which resolves the path itself (build_path in dome.bpf.c) instead of bpf_d_path. */
static int inherited[BATCH];

static bool is_regular(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int inherited_batch(void *arg) {
  size_t first = *(size_t *)arg;
  for (size_t i = first; i < first + BATCH && i < request_count; i++) {
    char byte;
    int fd = inherited[i - first];
    outcomes[i] = fd < 0 ? EBADF : read(fd, &byte, 1) < 0 ? errno : 0;
  }
  return 0;
}

/* Run the requests in batches inside the leaf; compare decisions and the deciding entries of denials.
 * mode: 0 network (connect), 1 files (open), 2 files (read of an inherited descriptor; regular files only).
 */
static void compare_all(struct dome_kernel *kernel, const struct probe_leaf *leaf,
                        const struct dome_rule_tables *t, int mode, const char *name) {
  unsigned disagreements = 0, entry_mismatches = 0, denied = 0;
  bool files = mode != 0;
  char first[256] = "";
  for (size_t start = 0; start < request_count; start += BATCH) {
    for (size_t i = 0; mode == 2 && i < BATCH; i++)
      inherited[i] = start + i < request_count && is_regular(requests[start + i].path)
                         ? open(requests[start + i].path, O_RDONLY | O_CLOEXEC)
                         : -1;
    probe_in_leaf(leaf, mode == 0 ? net_batch : mode == 1 ? file_batch : inherited_batch, &start);
    for (size_t i = 0; mode == 2 && i < BATCH; i++)
      if (inherited[i] >= 0) close(inherited[i]);
    probe_collect(kernel, 200);
    unsigned event = 0;
    for (size_t i = start; i < start + BATCH && i < request_count; i++) {
      struct request *q = &requests[i];
      if (mode == 2 && outcomes[i] == EBADF) continue; /* a directory */
      long entry;
      enum dome_decision expected = files
                                        ? dome_rule_tables_lookup_file(t, DOME_FILE_READ, q->path, &entry)
                                        : dome_rule_tables_lookup_net(t, DOME_NET_CONNECT, DOME_PROTOCOL_UDP,
                                                                      q->family, q->address, q->port, &entry);
      bool kernel_denied = outcomes[i] == EPERM;
      if (kernel_denied != (expected == DOME_DECISION_DENY)) {
        if (!disagreements++)
          snprintf(first, sizeof(first), "request %zu (%s port %u): kernel %s, reference %s (entry %ld)", i,
                   files ? q->path : "address", q->port, kernel_denied ? "deny" : strerror(outcomes[i]),
                   dome_decision_name(expected), entry);
        continue;
      }
      if (!kernel_denied) continue;
      denied++;
      if (event < probe_denial_count && probe_denials[event].entry != entry) entry_mismatches++;
      event++;
    }
  }
  probe_check(disagreements == 0, name, "%u disagreements in %zu requests; first: %s", disagreements,
              request_count, first);
  char entry_name[160];
  snprintf(entry_name, sizeof(entry_name), "%s: denial events name the reference's deciding entry", name);
  probe_check(entry_mismatches == 0 && denied > 0, entry_name, "%u mismatches in %u denials",
              entry_mismatches, denied);
  printf("# %s: %zu requests, %u denied\n", name, request_count, denied);
}

static void random_tree_tables(struct dome_rule_tables *t, const char *root, size_t *count) {
  dome_error err = {0};
  uint32_t p;
  dome_rule_tables_add_policy(t, "p", &p, &err);
  /* nodes: root, root/dI, root/dI/dJ, and files fK in each dir */
  char paths[64][128];
  size_t n = 0;
  snprintf(paths[n++], 128, "%s", root);
  for (int i = 0; i < 3; i++) {
    snprintf(paths[n++], 128, "%s/d%d", root, i);
    for (int j = 0; j < 2; j++) snprintf(paths[n++], 128, "%s/d%d/d%d", root, i, j);
  }
  size_t dirs = n;
  for (size_t d = 0; d < dirs; d++) {
    mkdir(paths[d], 0755);
    for (int k = 0; k < 2; k++) {
      snprintf(paths[n], 128, "%.100s/f%d", paths[d], k);
      int fd = open(paths[n], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) close(fd);
      n++;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (rnd(3) == 0)
      dome_rule_tables_add_file(t, paths[i], DOME_MATCH_SUBTREE, DOME_FILE_READ, rnd(2), p, &err);
    if (rnd(4) == 0)
      dome_rule_tables_add_file(t, paths[i], DOME_MATCH_EXACT, DOME_FILE_READ, rnd(2), p, &err);
  }
  for (size_t i = 0; i < n && request_count < 1024; i++)
    snprintf(requests[request_count++].path, 128, "%s", paths[i]);
  *count = n;
}

int probe_scenario_property(enum dome_enforcement_level level) {
  unsigned seed = getenv("PROBE_SEED") ? (unsigned)atoi(getenv("PROBE_SEED")) : (unsigned)getpid();
  srandom(seed);
  printf("# seed %u\n", seed);
  size_t capacity = 1024;
  requests =
      mmap(NULL, capacity * sizeof(*requests), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  outcomes =
      mmap(NULL, capacity * sizeof(*outcomes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (requests == MAP_FAILED || outcomes == MAP_FAILED) return -ENOMEM;
  struct probe_leaf leaf = {.fd = -1};
  int r = probe_leaf_create(&leaf, "property");
  if (r < 0) return r;
  struct dome_kernel *kernel = NULL;
  struct dome_kernel_options options = {.level = level};
  dome_error err = {0};
  r = dome_kernel_open(&kernel, &options, &err);
  if (!probe_check(r == 0, "open kernel enforcement", "%s", err.message)) goto out;
  struct dome_kernel_attachment *attachment = NULL;
  int rounds = getenv("PROBE_ROUNDS") ? atoi(getenv("PROBE_ROUNDS")) : 3;
  for (int round = 0; round < rounds && r == 0; round++) {
    struct dome_rule_tables t;
    dome_rule_tables_init(&t);
    random_net_tables(&t);
    request_count = 0;
    for (; request_count < capacity; request_count++) {
      struct request *q = &requests[request_count];
      memset(q, 0, sizeof(*q));
      unsigned kind = rnd(3);
      q->port = (uint16_t)(1 + rnd(26));
      if (kind == 0) {
        q->family = AF_INET;
        random_v4(q->address);
      } else if (kind == 1) {
        q->family = AF_INET6;
        random_v6(q->address);
      } else { /* IPv4-mapped IPv6 */
        q->family = AF_INET6;
        q->address[10] = q->address[11] = 0xff;
        random_v4(q->address + 12);
      }
    }
    r = dome_kernel_install_tables(kernel, 5, &t, &err);
    if (probe_check(r == 0, "install random network tables", "%s", err.message)) {
      if (!attachment) {
        struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 5};
        r = dome_kernel_attach(kernel, &jail, &attachment, &err);
        probe_check(r == 0, "attach", "%s", err.message);
      }
      if (r == 0) compare_all(kernel, &leaf, &t, 0, "network: kernel decision equals the reference lookup");
    }
    dome_rule_tables_free(&t);
  }
  if (r == 0 && level == DOME_LEVEL_FULL) {
    for (int round = 0; round < rounds && r == 0; round++) {
      char root[96];
      snprintf(root, sizeof(root), "/tmp/dome-ktest-tree-%d-%d", getpid(), round);
      struct dome_rule_tables t;
      dome_rule_tables_init(&t);
      size_t nodes = 0;
      request_count = 0;
      random_tree_tables(&t, root, &nodes);
      r = dome_kernel_install_tables(kernel, 5, &t, &err);
      if (probe_check(r == 0, "install random file tables", "%s", err.message)) {
        compare_all(kernel, &leaf, &t, 2,
                    "files: read() of inherited fds (file_permission) equals the reference");
        compare_all(kernel, &leaf, &t, 1, "files: kernel decision equals the reference lookup");
      }
      for (size_t i = nodes; i-- > 0;)
        if (unlink(requests[i].path) != 0) rmdir(requests[i].path);
      dome_rule_tables_free(&t);
    }
  }
  dome_kernel_detach(kernel, attachment);
out:
  dome_kernel_close(kernel);
  probe_leaf_remove(&leaf);
  return r < 0 ? r : 0;
}
