/* Bench scenario: open() and connect() loops inside a jail with dome's programs vs the same jail without
 * (nothing loaded), alternating rounds, median ratio; plus the time to apply a rule change to a running
 * jail. Prints `bench: ...` lines and a closing count (the ratio is reported, not asserted). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/kernel/probe.h"

#define ROUNDS 5
#define PAIRS 15

static uint16_t bench_port;
static char bench_file[128];
static long open_iterations = 20000, connect_iterations = 5000;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Child body: the loops; writes the two durations (s) to the pipe in arg. */
static int loops(void *arg) {
  int out = *(int *)arg;
  double t0 = now_s();
  for (long i = 0; i < open_iterations; i++) {
    int fd = open(bench_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 1;
    close(fd);
  }
  double t1 = now_s();
  struct sockaddr_in in = {
      .sin_family = AF_INET, .sin_port = htons(bench_port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  for (long i = 0; i < connect_iterations; i++) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&in, sizeof(in)) != 0) return 2;
    close(fd);
  }
  double t2 = now_s();
  double times[2] = {t1 - t0, t2 - t1};
  return write(out, times, sizeof(times)) == sizeof(times) ? 0 : 3;
}

static int measure(const struct probe_leaf *leaf, double times[2]) {
  int p[2];
  if (pipe(p) != 0) return -errno;
  int status = probe_in_leaf(leaf, loops, &p[1]);
  close(p[1]);
  ssize_t n = read(p[0], times, 2 * sizeof(double));
  close(p[0]);
  return status == 0 && n == 2 * sizeof(double) ? 0 : -EIO;
}

/* Run-time totals of the programs one open()+close() or socket()+connect()+close() runs. */
struct program_cost {
  uint64_t open_ns, open_runs; /* dome_file_open */
  uint64_t connect_ns,
      connect_runs; /* dome_socket_create, dome_sock_create, dome_socket_connect, dome_connect4 */
};

static void on_stats(void *context, const char *program, uint64_t run_ns, uint64_t runs) {
  struct program_cost *cost = context;
  if (strcmp(program, "dome_file_open") == 0) {
    cost->open_ns += run_ns;
    cost->open_runs += runs;
  }
  if (strcmp(program, "dome_socket_connect") == 0) cost->connect_runs += runs; /* one per connect() */
  const char *per_connect[] = {"dome_socket_create", "dome_sock_create", "dome_socket_connect",
                               "dome_connect4"};
  for (size_t i = 0; i < 4; i++)
    if (strcmp(program, per_connect[i]) == 0) cost->connect_ns += run_ns;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Tables of realistic size: 200 network groups, 100 file entries, and the entries the loops need. */
static int bench_tables(struct dome_rule_tables *tables, int variant) {
  dome_error err = {0};
  uint32_t p;
  if (dome_rule_tables_add_policy(tables, "bench", &p, &err) < 0) return -1;
  for (int i = 0; i < 200; i++) {
    struct dome_net_entry e = {.action = DOME_NET_CONNECT,
                               .protocol = DOME_PROTOCOL_TCP,
                               .family = AF_INET,
                               .prefix_len = 24,
                               .port_first = 443,
                               .port_last = 443,
                               .decision = DOME_DECISION_ALLOW,
                               .policy_index = p};
    e.address[0] = 10;
    e.address[1] = (uint8_t)(i / 256);
    e.address[2] = (uint8_t)(i % 256);
    e.port_first = e.port_last = (uint16_t)(443 + variant);
    if (dome_rule_tables_add_net(tables, &e, &err) < 0) return -1;
  }
  struct dome_net_entry loopback = {.action = DOME_NET_CONNECT,
                                    .protocol = DOME_PROTOCOL_UDP,
                                    .family = AF_INET,
                                    .prefix_len = 8,
                                    .port_first = 0,
                                    .port_last = 65535,
                                    .decision = DOME_DECISION_ALLOW,
                                    .policy_index = p};
  loopback.address[0] = 127;
  if (dome_rule_tables_add_net(tables, &loopback, &err) < 0) return -1;
  if (dome_rule_tables_add_file(tables, "/", DOME_MATCH_SUBTREE, DOME_FILE_READ, DOME_DECISION_ALLOW, p,
                                &err) < 0)
    return -1;
  for (int i = 0; i < 100; i++) {
    char path[64];
    snprintf(path, sizeof(path), "/srv/bench/%d/dir%d", variant, i);
    if (dome_rule_tables_add_file(tables, path, DOME_MATCH_SUBTREE, DOME_FILE_READ, DOME_DECISION_DENY, p,
                                  &err) < 0)
      return -1;
  }
  return 0;
}

int probe_scenario_bench(void) {
  enum dome_enforcement_level level =
      dome_kernel_probe_level() == DOME_LEVEL_FULL ? DOME_LEVEL_FULL : DOME_LEVEL_REDUCED;
  if (getenv("PROBE_OPEN_ITERATIONS")) open_iterations = atol(getenv("PROBE_OPEN_ITERATIONS"));
  if (getenv("PROBE_CONNECT_ITERATIONS")) connect_iterations = atol(getenv("PROBE_CONNECT_ITERATIONS"));
  snprintf(bench_file, sizeof(bench_file), "/tmp/dome-kbench-%d", getpid());
  int fd = open(bench_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return 1;
  close(fd);
  int listener = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof(in);
  bind(listener, (struct sockaddr *)&in, sizeof(in));
  getsockname(listener, (struct sockaddr *)&in, &length);
  bench_port = ntohs(in.sin_port);

  struct probe_leaf leaf = {.fd = -1};
  if (probe_leaf_create(&leaf, "bench") < 0) return 1;
  struct dome_rule_tables tables, changed;
  dome_rule_tables_init(&tables);
  dome_rule_tables_init(&changed);
  bench_tables(&tables, 0);
  bench_tables(&changed, 1);
  double open_ratio[ROUNDS], connect_ratio[ROUNDS], apply_ms[ROUNDS];
  int r = 0;
  for (int round = 0; round < ROUNDS && r == 0; round++) {
    double without[2], with[2];
    if ((r = measure(&leaf, without)) < 0) break;
    struct dome_kernel *kernel = NULL;
    struct dome_kernel_options options = {.level = level};
    dome_error err = {0};
    struct dome_kernel_attachment *attachment = NULL;
    struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 1};
    if ((r = dome_kernel_open(&kernel, &options, &err)) < 0 ||
        (r = dome_kernel_install_tables(kernel, 1, &tables, &err)) < 0 ||
        (r = dome_kernel_attach(kernel, &jail, &attachment, &err)) < 0) {
      fprintf(stderr, "bench: %s\n", err.message);
      dome_kernel_close(kernel);
      break;
    }
    r = measure(&leaf, with);
    double start = now_s();
    if (r == 0) r = dome_kernel_install_tables(kernel, 1, &changed, &err);
    apply_ms[round] = (now_s() - start) * 1e3;
    dome_kernel_close(kernel);
    if (r < 0) break;
    open_ratio[round] = with[0] / without[0];
    connect_ratio[round] = with[1] / without[1];
    printf("# round %d: open %.3f s vs %.3f s, connect %.3f s vs %.3f s, rule change %.2f ms\n", round,
           with[0], without[0], with[1], without[1], apply_ms[round]);
  }
  if (r == 0) {
    qsort(open_ratio, ROUNDS, sizeof(double), compare);
    qsort(connect_ratio, ROUNDS, sizeof(double), compare);
    qsort(apply_ms, ROUNDS, sizeof(double), compare);
    printf("bench: level %s, %ld open()+close() and %ld socket()+connect()+close() per round, %d rounds\n",
           dome_enforcement_level_name(level), open_iterations, connect_iterations, ROUNDS);
    printf("bench: open() with/without programs, median ratio %.3fx (target <= 1.10x)\n",
           open_ratio[ROUNDS / 2]);
    printf("bench: connect() with/without programs, median ratio %.3fx (target <= 1.10x)\n",
           connect_ratio[ROUNDS / 2]);
    printf(
        "bench: rule change applied to a running jail (201 network groups, 101 file entries): median %.2f "
        "ms\n",
        apply_ms[ROUNDS / 2]);
  }
  /* Phase 2: programs loaded once; the same jail alternately detached (not in the jail map, no cgroup links:
   * what any other process pays — the LSM trampolines and one map lookup) and attached. Short alternating
   * pairs keep host load drift out of each ratio. */
  if (r == 0) {
    struct dome_kernel *kernel = NULL;
    struct dome_kernel_options options = {.level = level};
    dome_error err = {0};
    long saved_open = open_iterations, saved_connect = connect_iterations;
    open_iterations /= 4;
    connect_iterations /= 4;
    double open_pairs[PAIRS], connect_pairs[PAIRS], open_op_ns = 0, connect_op_ns = 0;
    struct program_cost attached_cost = {0};
    int stats_fd = dome_kernel_enable_stats();
    if ((r = dome_kernel_open(&kernel, &options, &err)) == 0 &&
        (r = dome_kernel_install_tables(kernel, 1, &tables, &err)) == 0) {
      for (int pair = 0; pair < PAIRS && r == 0; pair++) {
        double detached[2], attached[2];
        struct dome_kernel_attachment *attachment = NULL;
        struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 1};
        if ((r = measure(&leaf, detached)) < 0) break;
        if ((r = dome_kernel_attach(kernel, &jail, &attachment, &err)) < 0) break;
        struct program_cost before = {0}, after = {0};
        dome_kernel_program_stats(kernel, on_stats, &before);
        r = measure(&leaf, attached);
        dome_kernel_program_stats(kernel, on_stats, &after);
        attached_cost.open_ns += after.open_ns - before.open_ns;
        attached_cost.open_runs += after.open_runs - before.open_runs;
        attached_cost.connect_ns += after.connect_ns - before.connect_ns;
        attached_cost.connect_runs += after.connect_runs - before.connect_runs;
        dome_kernel_detach(kernel, attachment);
        open_pairs[pair] = attached[0] / detached[0];
        connect_pairs[pair] = attached[1] / detached[1];
        open_op_ns += detached[0] * 1e9 / (double)open_iterations / PAIRS;
        connect_op_ns += detached[1] * 1e9 / (double)connect_iterations / PAIRS;
      }
    }
    /* In-kernel cost per program run (bpf_stats: sched_clock around each run, trampoline excluded): robust to
     * host load, unlike the wall-clock ratios. */
    if (r == 0 && stats_fd >= 0 && attached_cost.open_runs && attached_cost.connect_runs) {
      double open_ns = (double)attached_cost.open_ns / (double)attached_cost.open_runs;
      double connect_ns = (double)attached_cost.connect_ns / (double)attached_cost.connect_runs;
      printf(
          "bench: in-kernel cost per open() in the attached jail: file_open %.0f ns vs %.0f ns per "
          "open()+close() detached: estimated ratio %.3fx\n",
          open_ns, open_op_ns, 1 + open_ns / open_op_ns);
      printf(
          "bench: in-kernel cost per socket()+connect() in the attached jail: %.0f ns (socket_create, "
          "sock_create, socket_connect, connect4) vs %.0f ns per op detached: estimated ratio %.3fx\n",
          connect_ns, connect_op_ns, 1 + connect_ns / connect_op_ns);
    }
    if (stats_fd >= 0) close(stats_fd);
    if (r < 0) fprintf(stderr, "bench: %s\n", err.message);
    dome_kernel_close(kernel);
    open_iterations = saved_open;
    connect_iterations = saved_connect;
    if (r == 0) {
      qsort(open_pairs, PAIRS, sizeof(double), compare);
      qsort(connect_pairs, PAIRS, sizeof(double), compare);
      printf("bench: open() attached/detached jail (programs loaded), median of %d pairs %.3fx\n", PAIRS,
             open_pairs[PAIRS / 2]);
      printf("bench: connect() attached/detached jail (programs loaded), median of %d pairs %.3fx\n", PAIRS,
             connect_pairs[PAIRS / 2]);
    }
  }
  dome_rule_tables_free(&tables);
  dome_rule_tables_free(&changed);
  probe_leaf_remove(&leaf);
  close(listener);
  unlink(bench_file);
  probe_check(r == 0, "bench ran", "%d", r);
  printf("%u passed, %u failed\n", probe_counts->passed, probe_counts->failed);
  return r == 0 ? 0 : 1;
}
