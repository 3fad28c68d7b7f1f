/* dome-net-harness: drives supervisor/net with jail-like children for the integration suite and the
 * benchmark (a child unshares a network + mount namespace, the library builds its path by the child's
 * pid, the child installs the resolv.conf text and runs a command). Test tool, not product code.
 *
 * usage: dome-net-harness [--state DIR] [--mode auto|user|routed|ipvlan|macvlan] [--pool A.B.C.D/LEN]
 *          [--block 30|31] [--uplink IFNAME --uplink-pool A.B.C.D/LEN [--uplink-gateway A.B.C.D]]
 *          [--second-command SHELL-COMMAND] (run in the second jail, killed at the end)
 *          [--real-jail] (run COMMAND through supervisor/jail's jail_run with the network hook)
 *          [--allow tcp|udp:PREFIX:PORT[-PORT]]... [--deny ...]... [--cycles N] [--second]
 *          (PREFIX: A.B.C.D/LEN or [IPV6]/LEN)
 *          [--check-clean] [--bench-setup N] [--quota BYTES] [--usage] [--tcp-relay] [-- COMMAND ARGS...]
 * --usage prints the jail's counters (dome_net_jail_usage) as `usage egress_bytes=N ingress_bytes=N
 * connections=N refused=N quota_bytes=N quota_used=N quota_exceeded=0|1` on stderr after each cycle.
 * The command runs inside the jail's namespaces with DOME_NET_ADDRESS, DOME_NET_GATEWAY and (with
 * --second, a second jail with the same rules held open meanwhile) DOME_NET_OTHER_JAIL set.
 * Exit status: the command's (first failing cycle), 0 without a command, 125 on harness failure. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/jail/jail.h"
#include "supervisor/net/net.h"

#define MAX_ENTRIES 64

static struct dome_net_entry entries[MAX_ENTRIES];
static size_t entry_count;

/* tcp|udp:A.B.C.D/LEN:PORT[-PORT] or tcp|udp:[IPV6]/LEN:PORT[-PORT] */
static int parse_entry(const char *text, uint8_t decision) {
  char protocol[8], prefix_text[64], address6[64];
  unsigned first, last, length6 = 128;
  bool v6 = false;
  int n = sscanf(text, "%7[a-z]:%63[0-9./]:%u-%u", protocol, prefix_text, &first, &last);
  if (n < 3) {
    n = sscanf(text, "%7[a-z]:[%63[0-9a-fA-F:]]/%u:%u-%u", protocol, address6, &length6, &first, &last) - 1;
    v6 = true;
  }
  if (n == 3) last = first;
  if ((n != 3 && n != 4) || entry_count + 2 > MAX_ENTRIES || last > 65535 || first > last) return -1;
  struct dome_net_prefix prefix = {0};
  uint8_t bytes6[16];
  dome_error err = {0};
  if (v6 && (length6 > 128 || inet_pton(AF_INET6, address6, bytes6) != 1)) return -1;
  if (!v6 && dome_net_prefix_parse(prefix_text, &prefix, &err) < 0) {
    fprintf(stderr, "dome-net-harness: %s\n", err.message);
    return -1;
  }
  uint8_t proto = strcmp(protocol, "tcp") == 0   ? DOME_PROTOCOL_TCP
                  : strcmp(protocol, "udp") == 0 ? DOME_PROTOCOL_UDP
                                                 : 0;
  if (proto == 0) return -1;
  for (int action = DOME_NET_CONNECT; action <= DOME_NET_SEND; action += DOME_NET_SEND - DOME_NET_CONNECT) {
    if (proto == DOME_PROTOCOL_TCP && action == DOME_NET_SEND) continue;
    struct dome_net_entry *e = &entries[entry_count++];
    memset(e, 0, sizeof *e);
    e->action = (uint8_t)action;
    e->protocol = proto;
    e->family = v6 ? AF_INET6 : AF_INET;
    e->prefix_len = v6 ? (uint8_t)length6 : prefix.length;
    uint32_t network = htonl(prefix.address);
    if (v6)
      memcpy(e->address, bytes6, 16);
    else
      memcpy(e->address, &network, 4);
    e->port_first = (uint16_t)first;
    e->port_last = (uint16_t)last;
    e->decision = decision;
    e->policy_index = DOME_NO_POLICY;
  }
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct child {
  pid_t pid;
  int go_fd; /* write end: the child waits for one byte (or EOF = abort) */
};

/* Fork a jail-like child: new network + mount namespaces, then wait for the go byte, install resolv.conf
 * from resolv_path (if any) and run argv (or exit 0 / sleep while held). */
static int child_start(struct child *child, char **argv, const char *resolv_path, bool hold) {
  int ready[2], go[2];
  if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(ready[0]);
    close(go[1]);
    setpgid(0, 0); /* the harness kills the whole group of a jail it stops */
    if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0) _exit(126);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) _exit(126);
    if (write(ready[1], "r", 1) != 1) _exit(126);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(0);
    if (hold) {
      while (read(go[0], &byte, 1) > 0) {
      } /* until the parent closes */
      _exit(0);
    }
    /* After the go byte the parent sends "ADDRESS GATEWAY\n" (the environment was fixed at fork). */
    char info[64] = "", address[20] = "", gateway[20] = "";
    ssize_t got = read(go[0], info, sizeof info - 1);
    if (got > 0 && sscanf(info, "%19s %19s", address, gateway) == 2) {
      setenv("DOME_NET_ADDRESS", address, 1);
      setenv("DOME_NET_GATEWAY", gateway, 1);
    }
    if (resolv_path && mount(resolv_path, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0) _exit(126);
    if (argv == NULL) _exit(0);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(ready[1]);
  close(go[0]);
  char byte;
  ssize_t n = read(ready[0], &byte, 1);
  close(ready[0]);
  child->pid = pid;
  child->go_fd = go[1];
  return n == 1 ? 0 : -1;
}

static int child_finish(struct child *child, bool go, const struct dome_net_jail *jail) {
  char info[64] = "g", address[16] = "0.0.0.0", gateway[16] = "0.0.0.0";
  if (jail) {
    struct in_addr in = {htonl(dome_net_jail_address(jail))};
    inet_ntop(AF_INET, &in, address, sizeof address);
    in.s_addr = htonl(dome_net_jail_gateway(jail));
    inet_ntop(AF_INET, &in, gateway, sizeof gateway);
  }
  int n = snprintf(info, sizeof info, "g%s %s\n", address, gateway);
  if (go && write(child->go_fd, info, (size_t)n) != n) go = false;
  close(child->go_fd);
  int status = 0;
  waitpid(child->pid, &status, 0);
  /* What the jail's command left running in its group (a background listener) ends with it: such a
     process would hold the jail's network namespace, and outlive the suite, under PID 1. */
  kill(-child->pid, SIGKILL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *values, int n) {
  qsort(values, (size_t)n, sizeof *values, compare_u64);
  return values[n / 2];
}

/* Per-jail cost: child with new namespaces only vs the same plus set-up and teardown. */
static int bench_setup(struct dome_net *net, int n) {
  uint64_t *plain = calloc((size_t)n, sizeof *plain), *with = calloc((size_t)n, sizeof *with);
  uint64_t *teardown = calloc((size_t)n, sizeof *teardown);
  dome_error err = {0};
  for (int i = 0; i < n; i++) {
    struct child child;
    uint64_t start = now_ns();
    if (child_start(&child, NULL, NULL, false) < 0) return 125;
    plain[i] = now_ns() - start; /* a jail's namespaces, ready to run */
    child_finish(&child, true, NULL);
    start = now_ns();
    if (child_start(&child, NULL, NULL, false) < 0) return 125;
    struct dome_net_jail *jail = NULL;
    if (dome_net_jail_setup(net, child.pid, entries, entry_count, &jail, &err) < 0) {
      fprintf(stderr, "dome-net-harness: %s\n", err.message);
      child_finish(&child, false, NULL);
      return 125;
    }
    with[i] = now_ns() - start; /* the same plus its network path */
    child_finish(&child, true, NULL);
    start = now_ns();
    dome_net_jail_teardown(net, jail, NULL);
    teardown[i] = now_ns() - start;
  }
  uint64_t p = median(plain, n), w = median(with, n), t = median(teardown, n);
  printf("setup_without_net_us %.1f\nsetup_with_net_us %.1f\nsetup_ratio %.2f\nteardown_us %.1f\n", p / 1e3,
         w / 1e3, (double)w / (double)p, t / 1e3);
  free(plain);
  free(with);
  free(teardown);
  return 0;
}

/* The command in a real jail (supervisor/jail's jail_run) with dome_net_on_namespaces_ready as its hook:
 * prints the program's stdout/stderr, returns its exit code. */
static int run_real_jail(struct dome_net *net, char **command) {
  struct jail_config config;
  jail_config_init(&config);
  static char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", NULL};
  config.argv = command;
  config.env = env;
  config.timeout_ms = 20000;
  struct dome_net_hook hook = {.net = net, .entries = entries, .count = entry_count};
  config.hook_context = &hook;
  config.on_namespaces_ready = dome_net_on_namespaces_ready;
  struct jail_result result = {0};
  dome_error err = {0};
  int r = jail_run(&config, &result, &err);
  if (r < 0) fprintf(stderr, "dome-net-harness: jail: %s\n", err.message);
  int status = r < 0 ? 125 : result.exit_code;
  if (r >= 0) {
    fwrite(result.stdout_data, 1, result.stdout_length, stdout);
    fwrite(result.stderr_data, 1, result.stderr_length, stderr);
    fflush(stdout);
  }
  jail_result_release(&result);
  if (dome_net_jail_teardown(net, hook.jail, &err) < 0) {
    fprintf(stderr, "dome-net-harness: teardown: %s\n", err.message);
    status = 125;
  }
  return status;
}

static int fd_count(void) {
  int count = 0;
  DIR *dir = opendir("/proc/self/fd");
  struct dirent *entry;
  while (dir && (entry = readdir(dir)) != NULL) count += entry->d_name[0] != '.';
  if (dir) closedir(dir);
  return count;
}

static int fd_baseline; /* descriptors open right after dome_net_open */

static int check_clean(struct dome_net *net, const char *state_dir) {
  size_t links = 0, chains = 0;
  dome_error err = {0};
  if (dome_net_count_owned(net, &links, &chains, &err) < 0) {
    fprintf(stderr, "dome-net-harness: %s\n", err.message);
    return 1;
  }
  if (links || chains) fprintf(stderr, "dome-net-harness: leftover %zu links, %zu chains\n", links, chains);
  DIR *dir = opendir(state_dir);
  int leftovers = (int)(links + chains);
  struct dirent *entry;
  while (dir && (entry = readdir(dir)) != NULL)
    if (strncmp(entry->d_name, "slot-", 5) == 0 || strncmp(entry->d_name, "uplink-", 7) == 0) {
      fprintf(stderr, "dome-net-harness: leftover state %s\n", entry->d_name);
      leftovers++;
    }
  if (dir) closedir(dir);
  /* a descriptor left open (a netlink or nftables socket bound to a jail's namespace) would keep that
   * namespace, and an uplink mode's link in it, alive */
  int fds = fd_count();
  if (fds > fd_baseline) {
    fprintf(stderr, "dome-net-harness: %d descriptors more than after open\n", fds - fd_baseline);
    leftovers += fds - fd_baseline;
  }
  return leftovers;
}

int main(int argc, char **argv) {
  struct dome_net_config config = {.mode = DOME_NET_MODE_AUTO, .state_dir = "/run/dome-net-test"};
  int cycles = 1, bench = 0;
  bool second = false, clean = false, real_jail = false, usage = false;
  char *second_command[] = {"/bin/sh", "-c", NULL, NULL};
  char **command = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    dome_error err = {0};
    if (strcmp(a, "--") == 0) {
      command = i + 1 < argc ? &argv[i + 1] : NULL;
      break;
    } else if (strcmp(a, "--second") == 0) {
      second = true;
      continue;
    } else if (strcmp(a, "--second-command") == 0 && v) {
      second = true;
      second_command[2] = argv[++i];
      continue;
    } else if (strcmp(a, "--real-jail") == 0) {
      real_jail = true;
      continue;
    } else if (strcmp(a, "--check-clean") == 0) {
      clean = true;
      continue;
    } else if (strcmp(a, "--usage") == 0) {
      usage = true;
      continue;
    } else if (strcmp(a, "--tcp-relay") == 0) {
      config.tcp_relay = true;
      continue;
    }
    if (v == NULL) goto usage;
    i++;
    if (strcmp(a, "--state") == 0)
      config.state_dir = v;
    else if (strcmp(a, "--mode") == 0 && dome_net_mode_parse(v, &config.mode) == 0)
      continue;
    else if (strcmp(a, "--uplink") == 0)
      config.uplink = v;
    else if (strcmp(a, "--uplink-pool") == 0) {
      if (dome_net_prefix_parse(v, &config.uplink_pool, &err) < 0) {
        fprintf(stderr, "dome-net-harness: --uplink-pool: %s\n", err.message);
        return 125;
      }
    } else if (strcmp(a, "--uplink-gateway") == 0) {
      struct dome_net_prefix gateway;
      if (dome_net_prefix_parse(v, &gateway, &err) < 0 || gateway.length != 32) {
        fprintf(stderr, "dome-net-harness: --uplink-gateway: expected A.B.C.D\n");
        return 125;
      }
      config.uplink_gateway = gateway.address;
    } else if (strcmp(a, "--pool") == 0) {
      if (dome_net_prefix_parse(v, &config.pool, &err) < 0) {
        fprintf(stderr, "dome-net-harness: --pool: %s\n", err.message);
        return 125;
      }
    } else if (strcmp(a, "--block") == 0)
      config.block_length = (uint8_t)atoi(v);
    else if (strcmp(a, "--quota") == 0)
      config.jail_quota_bytes = strtoull(v, NULL, 10);
    else if (strcmp(a, "--mtu") == 0)
      config.mtu = (uint32_t)atoi(v);
    else if (strcmp(a, "--allow") == 0 || strcmp(a, "--deny") == 0) {
      if (parse_entry(v, strcmp(a, "--allow") == 0 ? DOME_DECISION_ALLOW : DOME_DECISION_DENY) < 0) {
        fprintf(stderr, "dome-net-harness: %s `%s`: expected tcp|udp:PREFIX:PORT[-PORT]\n", a, v);
        return 125;
      }
    } else if (strcmp(a, "--cycles") == 0)
      cycles = atoi(v);
    else if (strcmp(a, "--bench-setup") == 0)
      bench = atoi(v);
    else
      goto usage;
  }
  dome_error err = {0};
  struct dome_net *net = NULL;
  if (dome_net_open(&config, &net, &err) < 0) {
    fprintf(stderr, "dome-net-harness: %s\n", err.message);
    return 125;
  }
  fd_baseline = fd_count();
  fprintf(stderr, "dome-net-harness: egress mode %s\n", dome_net_mode_name(dome_net_mode_in_effect(net)));
  const char *ipv6_reason = NULL;
  bool ipv6 = dome_net_ipv6_available(net, &ipv6_reason);
  fprintf(stderr, "dome-net-harness: ipv6 %s%s%s\n", ipv6 ? "yes" : "no", ipv6 ? "" : ": ",
          ipv6 ? "" : ipv6_reason);
  int status = 0;
  if (bench > 0) {
    status = bench_setup(net, bench);
    dome_net_close(net);
    return status;
  }
  if (real_jail) {
    for (int cycle = 0; cycle < cycles && status == 0 && command; cycle++)
      status = run_real_jail(net, command);
    if (clean && check_clean(net, config.state_dir) > 0 && status == 0) status = 125;
    dome_net_close(net);
    return status;
  }
  struct child other = {0};
  struct dome_net_jail *other_jail = NULL;
  if (second) {
    if (child_start(&other, second_command[2] ? second_command : NULL, NULL, second_command[2] == NULL) < 0 ||
        dome_net_jail_setup(net, other.pid, entries, entry_count, &other_jail, &err) < 0) {
      fprintf(stderr, "dome-net-harness: second jail: %s\n", err.message);
      dome_net_close(net);
      return 125;
    }
    if (write(other.go_fd, "g\n", 2) != 2) perror("dome-net-harness: second jail");
    char text[16];
    struct in_addr in = {htonl(dome_net_jail_address(other_jail))};
    setenv("DOME_NET_OTHER_JAIL", inet_ntop(AF_INET, &in, text, sizeof text), 1);
  }
  char resolv_path[4200];
  snprintf(resolv_path, sizeof resolv_path, "%s/resolv.conf.test", config.state_dir);
  for (int cycle = 0; cycle < cycles && status == 0; cycle++) {
    struct child child;
    struct dome_net_jail *jail = NULL;
    if (child_start(&child, command, command ? resolv_path : NULL, false) < 0) {
      status = 125;
      break;
    }
    if (dome_net_jail_setup(net, child.pid, entries, entry_count, &jail, &err) < 0) {
      fprintf(stderr, "dome-net-harness: cycle %d: %s\n", cycle, err.message);
      child_finish(&child, false, NULL);
      status = 125;
      break;
    }
    if (command) {
      FILE *f = fopen(resolv_path, "w");
      if (f) {
        fputs(dome_net_jail_resolv_conf(jail), f);
        fclose(f);
      }
    }
    status = child_finish(&child, true, jail);
    struct dome_net_jail_usage counted;
    if (usage && dome_net_jail_usage(net, jail, &counted, &err) < 0) {
      fprintf(stderr, "dome-net-harness: usage: %s\n", err.message);
      status = 125;
    } else if (usage) {
      fprintf(stderr,
              "usage egress_bytes=%llu ingress_bytes=%llu connections=%llu refused=%llu quota_bytes=%llu "
              "quota_used=%llu quota_exceeded=%d\n",
              (unsigned long long)counted.egress_bytes, (unsigned long long)counted.ingress_bytes,
              (unsigned long long)counted.connections, (unsigned long long)counted.refused,
              (unsigned long long)counted.quota_bytes, (unsigned long long)counted.quota_used,
              counted.quota_exceeded);
    }
    if (dome_net_jail_teardown(net, jail, &err) < 0) {
      fprintf(stderr, "dome-net-harness: cycle %d teardown: %s\n", cycle, err.message);
      status = 125;
    }
  }
  unlink(resolv_path);
  if (second) {
    if (second_command[2]) kill(-other.pid, SIGKILL);
    child_finish(&other, false, NULL);
    dome_net_jail_teardown(net, other_jail, NULL);
  }
  if (clean && check_clean(net, config.state_dir) > 0 && status == 0) status = 125;
  dome_net_close(net);
  return status;
usage:
  fprintf(stderr,
          "usage: dome-net-harness [--state DIR] [--mode auto|user|routed] [--pool P/LEN] [--block 30|31] "
          "[--allow tcp|udp:PREFIX:PORTS]... [--cycles N] [--second] [--check-clean] [--bench-setup N] "
          "[-- COMMAND...]\n");
  return 125;
}
