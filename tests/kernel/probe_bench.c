/* Bench scenario: open() and connect() loops inside a jail with dome's programs vs the same jail without
 * (nothing loaded), alternating rounds, median ratio; plus the time to apply a rule change to a running
 * jail. Prints `bench: ...` lines and a closing count (the ratio is reported, not asserted). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/kernel/probe.h"

#define ROUNDS 5
#define PAIRS 21
#define STAT_PAIRS 9

static uint16_t bench_port;
static char bench_file[128];
static long open_iterations = 8000, connect_iterations = 2000;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Child body: the loops; writes the three durations (s) to the pipe in arg. */
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
  int fd = open(bench_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 4;
  char byte;
  for (long i = 0; i < open_iterations; i++)
    if (pread(fd, &byte, 1, 0) != 1) return 5;
  close(fd);
  double t3 = now_s();
  double times[3] = {t1 - t0, t2 - t1, t3 - t2};
  return write(out, times, sizeof(times)) == sizeof(times) ? 0 : 3;
}

static int measure(const struct probe_leaf *leaf, double times[3]) {
  int p[2];
  if (pipe(p) != 0) return -errno;
  int status = probe_in_leaf(leaf, loops, &p[1]);
  close(p[1]);
  ssize_t n = read(p[0], times, 3 * sizeof(double));
  close(p[0]);
  return status == 0 && n == 3 * sizeof(double) ? 0 : -EIO;
}

/* Run-time totals of the programs one open()+close() or socket()+connect()+close() runs. */
struct program_cost {
  uint64_t open_ns, open_runs; /* dome_file_open */
  uint64_t connect_ns,
      connect_runs;            /* dome_socket_create, dome_sock_create, dome_socket_connect, dome_connect4 */
  uint64_t read_ns, read_runs; /* dome_file_permission */
};

static void on_stats(void *context, const char *program, uint64_t run_ns, uint64_t runs) {
  struct program_cost *cost = context;
  if (strcmp(program, "dome_file_open") == 0) {
    cost->open_ns += run_ns;
    cost->open_runs += runs;
  }
  if (strcmp(program, "dome_socket_connect") == 0) cost->connect_runs += runs; /* one per connect() */
  if (strcmp(program, "dome_file_permission") == 0) {
    cost->read_ns += run_ns;
    cost->read_runs += runs;
  }
  if (getenv("PROBE_VERBOSE") && *getenv("PROBE_VERBOSE") && runs)
    printf("# program %s: %llu runs, %.0f ns per run\n", program, (unsigned long long)runs,
           (double)run_ns / (double)runs);
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
  /* Keep the probe's pages resident: in the VM they come from 9p, and a page-in during a timed loop is idle
   * time, which the instruction-counting clock (DOME_VMTEST_ICOUNT) skips by an arbitrary amount. */
  mlockall(MCL_CURRENT);
  snprintf(bench_file, sizeof(bench_file), "/tmp/dome-kbench-%d", getpid());
  int fd = open(bench_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, "x", 1) != 1) return 1; /* one byte for the pread() loop */
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
  /* Phase 1 (the figure): programs loaded once; alternating pairs of the same jail with NO dome program
   * attached anywhere (LSM links destroyed, no cgroup links: what the kernel runs without dome) and with
   * everything attached (LSM links + the jail's cgroup links + its jail-map entry). The order within a pair
   * alternates, and pairs are short, so host load drift cancels out in the median of the per-pair ratios. */
  /* A third run per pair, "outside": every LSM program attached but the jail neither in the jail map nor
   * linked: what any process outside a jail pays for dome being loaded. */
  double open_ratio[PAIRS], connect_ratio[PAIRS], read_ratio[PAIRS], apply_ms[ROUNDS];
  double outside_ratio[3][PAIRS];
  int pairs = getenv("PROBE_PAIRS") ? atoi(getenv("PROBE_PAIRS")) : PAIRS;
  if (pairs < 3 || pairs > PAIRS) pairs = PAIRS;
  int r = 0;
  {
    struct dome_kernel *kernel = NULL;
    struct dome_kernel_options options = {.level = level};
    dome_error err = {0};
    if ((r = dome_kernel_open(&kernel, &options, &err)) < 0 ||
        (r = dome_kernel_install_tables(kernel, 1, &tables, &err)) < 0 ||
        (r = dome_kernel_set_lsm_suspended(kernel, true)) < 0)
      fprintf(stderr, "bench: %s\n", err.message);
    double warm[3];
    if (r == 0) r = measure(&leaf, warm); /* untimed warm-up: page cache, slab caches, the leaf's first use */
    for (int pair = 0; pair < pairs && r == 0; pair++) {
      double without[3], with[3], outside[3];
      for (int k = 0; k < 3 && r == 0; k++) {
        int which = (k + pair) % 3; /* rotate the order: 0 without, 1 with, 2 outside */
        if (which == 0) {
          r = measure(&leaf, without);
          continue;
        }
        if ((r = dome_kernel_set_lsm_suspended(kernel, false)) < 0) break;
        if (which == 2) {
          r = measure(&leaf, outside);
          dome_kernel_set_lsm_suspended(kernel, true);
          continue;
        }
        struct dome_kernel_attachment *attachment = NULL;
        struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 1};
        if ((r = dome_kernel_attach(kernel, &jail, &attachment, &err)) < 0) {
          fprintf(stderr, "bench: attach: %s\n", err.message);
          break;
        }
        r = measure(&leaf, with);
        dome_kernel_detach(kernel, attachment);
        dome_kernel_set_lsm_suspended(kernel, true);
      }
      if (r < 0) break;
      open_ratio[pair] = with[0] / without[0];
      connect_ratio[pair] = with[1] / without[1];
      read_ratio[pair] = with[2] / without[2];
      for (int i = 0; i < 3; i++) outside_ratio[i][pair] = outside[i] / without[i];
      printf(
          "# pair %d: open %.4f s vs %.4f s (outside %.4f s), connect %.4f s vs %.4f s (%.4f s), read %.4f s "
          "vs "
          "%.4f s (%.4f s)\n",
          pair, with[0], without[0], outside[0], with[1], without[1], outside[1], with[2], without[2],
          outside[2]);
    }
    /* Rule change on a running jail: the jail attached with everything loaded, tables swapped. */
    if (r == 0 && (r = dome_kernel_set_lsm_suspended(kernel, false)) == 0) {
      struct dome_kernel_attachment *attachment = NULL;
      struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 1};
      r = dome_kernel_attach(kernel, &jail, &attachment, &err);
      for (int round = 0; round < ROUNDS && r == 0; round++) {
        double start = now_s();
        r = dome_kernel_install_tables(kernel, 1, round & 1 ? &tables : &changed, &err);
        apply_ms[round] = (now_s() - start) * 1e3;
      }
      if (r < 0) fprintf(stderr, "bench: rule change: %s\n", err.message);
      dome_kernel_detach(kernel, attachment);
    }
    dome_kernel_close(kernel);
  }
  if (r == 0) {
    qsort(open_ratio, pairs, sizeof(double), compare);
    qsort(connect_ratio, pairs, sizeof(double), compare);
    qsort(read_ratio, pairs, sizeof(double), compare);
    for (int i = 0; i < 3; i++) qsort(outside_ratio[i], pairs, sizeof(double), compare);
    qsort(apply_ms, ROUNDS, sizeof(double), compare);
    printf(
        "bench: level %s, %ld open()+close(), %ld socket()+connect()+close(), %ld pread() per run, %d "
        "pairs\n",
        dome_enforcement_level_name(level), open_iterations, connect_iterations, open_iterations, pairs);
    const char *names[3] = {"open()", "connect()", "read()"};
    double *ratios[3] = {open_ratio, connect_ratio, read_ratio};
    for (int i = 0; i < 3; i++)
      printf("bench: %s with/without programs, median ratio %.3fx (quartiles %.3f-%.3f%s)\n", names[i],
             ratios[i][pairs / 2], ratios[i][pairs / 4], ratios[i][3 * pairs / 4],
             i < 2 ? "; target <= 1.10x" : "");
    for (int i = 0; i < 3; i++)
      printf("bench: %s outside any jail, programs attached vs none, median ratio %.3fx\n", names[i],
             outside_ratio[i][pairs / 2]);
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
    double open_pairs[STAT_PAIRS], connect_pairs[STAT_PAIRS], read_pairs[STAT_PAIRS],
        open_op_ns = 0, connect_op_ns = 0, read_op_ns = 0;
    struct program_cost attached_cost = {0};
    int stats_fd = dome_kernel_enable_stats();
    if ((r = dome_kernel_open(&kernel, &options, &err)) == 0 &&
        (r = dome_kernel_install_tables(kernel, 1, &tables, &err)) == 0) {
      for (int pair = 0; pair < STAT_PAIRS && r == 0; pair++) {
        double detached[3], attached[3];
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
        attached_cost.read_ns += after.read_ns - before.read_ns;
        attached_cost.read_runs += after.read_runs - before.read_runs;
        dome_kernel_detach(kernel, attachment);
        open_pairs[pair] = attached[0] / detached[0];
        connect_pairs[pair] = attached[1] / detached[1];
        read_pairs[pair] = attached[2] / detached[2];
        open_op_ns += detached[0] * 1e9 / (double)open_iterations / STAT_PAIRS;
        connect_op_ns += detached[1] * 1e9 / (double)connect_iterations / STAT_PAIRS;
        read_op_ns += detached[2] * 1e9 / (double)open_iterations / STAT_PAIRS;
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
      if (attached_cost.read_runs) {
        double read_ns = (double)attached_cost.read_ns / (double)attached_cost.read_runs;
        printf(
            "bench: in-kernel cost per pread() in the attached jail: file_permission %.0f ns vs %.0f ns per "
            "pread() detached: estimated ratio %.3fx\n",
            read_ns, read_op_ns, 1 + read_ns / read_op_ns);
      }
    }
    if (stats_fd >= 0) close(stats_fd);
    if (r < 0) fprintf(stderr, "bench: %s\n", err.message);
    dome_kernel_close(kernel);
    open_iterations = saved_open;
    connect_iterations = saved_connect;
    if (r == 0) {
      qsort(open_pairs, STAT_PAIRS, sizeof(double), compare);
      qsort(connect_pairs, STAT_PAIRS, sizeof(double), compare);
      qsort(read_pairs, STAT_PAIRS, sizeof(double), compare);
      printf("bench: open() attached/detached jail (programs loaded), median of %d pairs %.3fx\n", STAT_PAIRS,
             open_pairs[STAT_PAIRS / 2]);
      printf("bench: connect() attached/detached jail (programs loaded), median of %d pairs %.3fx\n",
             STAT_PAIRS, connect_pairs[STAT_PAIRS / 2]);
      printf("bench: read() attached/detached jail (programs loaded), median of %d pairs %.3fx\n", STAT_PAIRS,
             read_pairs[STAT_PAIRS / 2]);
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

/* Shadow bench: the added cost of a second (shadow) table. One jail, every program attached, alternating
 * pairs of the same loops with the active tables alone and with shadow tables of the same size beside them
 * (bench_tables variant 1: every access of the loops decided alike, so no event is emitted: what is
 * measured is the second decision, not the reporting). Median of the per-pair ratios, and the in-kernel
 * cost per program run (bpf_stats) of both. */
int probe_scenario_bench_shadow(void) {
  enum dome_enforcement_level level =
      dome_kernel_probe_level() == DOME_LEVEL_FULL ? DOME_LEVEL_FULL : DOME_LEVEL_REDUCED;
  if (getenv("PROBE_OPEN_ITERATIONS")) open_iterations = atol(getenv("PROBE_OPEN_ITERATIONS"));
  if (getenv("PROBE_CONNECT_ITERATIONS")) connect_iterations = atol(getenv("PROBE_CONNECT_ITERATIONS"));
  mlockall(MCL_CURRENT);
  snprintf(bench_file, sizeof(bench_file), "/tmp/dome-kbench-%d", getpid());
  int fd = open(bench_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, "x", 1) != 1) return 1;
  close(fd);
  int listener = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof(in);
  bind(listener, (struct sockaddr *)&in, sizeof(in));
  getsockname(listener, (struct sockaddr *)&in, &length);
  bench_port = ntohs(in.sin_port);
  struct probe_leaf leaf = {.fd = -1};
  if (probe_leaf_create(&leaf, "bench-shadow") < 0) return 1;
  struct dome_rule_tables tables, shadow;
  dome_rule_tables_init(&tables);
  dome_rule_tables_init(&shadow);
  bench_tables(&tables, 0);
  bench_tables(&shadow, 1);
  int pairs = getenv("PROBE_PAIRS") ? atoi(getenv("PROBE_PAIRS")) : PAIRS;
  if (pairs < 3 || pairs > PAIRS) pairs = PAIRS;
  double ratio[3][PAIRS];
  struct dome_kernel *kernel = NULL;
  struct dome_kernel_attachment *attachment = NULL;
  struct dome_kernel_options options = {.level = level};
  dome_error err = {0};
  int stats_fd = dome_kernel_enable_stats();
  struct program_cost cost[2] = {{0}, {0}}; /* [0] one table, [1] with the shadow table */
  int r;
  if ((r = dome_kernel_open(&kernel, &options, &err)) == 0 &&
      (r = dome_kernel_install_tables(kernel, 1, &tables, &err)) == 0) {
    struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 1};
    r = dome_kernel_attach(kernel, &jail, &attachment, &err);
  }
  double warm[3];
  if (r == 0) r = measure(&leaf, warm);
  for (int pair = 0; pair < pairs && r == 0; pair++) {
    double times[2][3];
    for (int k = 0; k < 2 && r == 0; k++) {
      int with_shadow = (k + pair) % 2; /* alternate the order */
      if ((r = dome_kernel_install_shadow_tables(kernel, 1, with_shadow ? &shadow : NULL, &err)) < 0) break;
      struct program_cost before = {0}, after = {0};
      dome_kernel_program_stats(kernel, on_stats, &before);
      r = measure(&leaf, times[with_shadow]);
      dome_kernel_program_stats(kernel, on_stats, &after);
      struct program_cost *c = &cost[with_shadow];
      c->open_ns += after.open_ns - before.open_ns;
      c->open_runs += after.open_runs - before.open_runs;
      c->connect_ns += after.connect_ns - before.connect_ns;
      c->connect_runs += after.connect_runs - before.connect_runs;
      c->read_ns += after.read_ns - before.read_ns;
      c->read_runs += after.read_runs - before.read_runs;
    }
    if (r < 0) break;
    for (int i = 0; i < 3; i++) ratio[i][pair] = times[1][i] / times[0][i];
    printf("# pair %d: open %.4f s vs %.4f s, connect %.4f s vs %.4f s, read %.4f s vs %.4f s\n", pair,
           times[1][0], times[0][0], times[1][1], times[0][1], times[1][2], times[0][2]);
  }
  probe_collect(kernel, 0);
  unsigned events = probe_denial_count;
  if (r < 0) fprintf(stderr, "bench: %s\n", err.message);
  if (attachment) dome_kernel_detach(kernel, attachment);
  dome_kernel_close(kernel);
  if (stats_fd >= 0) close(stats_fd);
  if (r == 0) {
    printf(
        "bench: level %s, %ld open()+close(), %ld socket()+connect()+close(), %ld pread() per run, %d "
        "pairs\n",
        dome_enforcement_level_name(level), open_iterations, connect_iterations, open_iterations, pairs);
    const char *names[3] = {"open()", "connect()", "read()"};
    for (int i = 0; i < 3; i++) {
      qsort(ratio[i], pairs, sizeof(double), compare);
      printf(
          "bench: %s with shadow tables / active tables only, median ratio %.4fx (quartiles %.4f-%.4f); "
          "target <= 1.03x\n",
          names[i], ratio[i][pairs / 2], ratio[i][pairs / 4], ratio[i][3 * pairs / 4]);
    }
    for (int k = 0; k < 2; k++)
      if (cost[k].open_runs && cost[k].connect_runs && cost[k].read_runs)
        printf(
            "bench: in-kernel cost per run, %s: file_open %.0f ns, per connect() %.0f ns (socket_create, "
            "sock_create, socket_connect, connect4), file_permission %.0f ns\n",
            k ? "with shadow tables" : "active tables only",
            (double)cost[k].open_ns / (double)cost[k].open_runs,
            (double)cost[k].connect_ns / (double)cost[k].connect_runs,
            (double)cost[k].read_ns / (double)cost[k].read_runs);
      else if (cost[k].connect_ns)
        printf("bench: in-kernel cost, %s: %.0f ns per connect() (sock_create, connect4)\n",
               k ? "with shadow tables" : "active tables only",
               (double)cost[k].connect_ns / (double)connect_iterations / (double)pairs);
  }
  probe_check(r == 0, "bench ran", "%d", r);
  probe_check(events == 0, "the shadow tables decided every access of the loops alike (no event)",
              "%u events", events);
  dome_rule_tables_free(&tables);
  dome_rule_tables_free(&shadow);
  probe_leaf_remove(&leaf);
  close(listener);
  unlink(bench_file);
  printf("%u passed, %u failed\n", probe_counts->passed, probe_counts->failed);
  return r == 0 && events == 0 ? 0 : 1;
}
