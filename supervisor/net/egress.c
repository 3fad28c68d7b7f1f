/* The egress side of a supervisor: open/close, the egress namespace and pasta (user mode), the host
 * table (routed mode), and reclaim of what a crashed supervisor left in the state directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/net/net_internal.h"

#define TAP_NAME "dometap"
#define PASTA_READY_TIMEOUT_MS 5000

static int read_small_file(const char *path, char *out, size_t size) {
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, out, size - 1);
  if (n < 0) return -errno;
  out[n] = '\0';
  return (int)n;
}

static int read_flag(const char *path) {
  char text[8];
  if (read_small_file(path, text, sizeof text) < 0) return 0;
  return text[0] == '1';
}

static int ip_forward_enabled(void) {
  return read_flag("/proc/sys/net/ipv4/ip_forward");
}

/* ---- reclaim ---- */

/* Whether process `pid` has the file `path` open (its /proc/<pid>/fd links). */
static bool has_open(long pid, const char *path) {
  char fd_dir[64];
  snprintf(fd_dir, sizeof fd_dir, "/proc/%ld/fd", pid);
  DIR *dir = opendir(fd_dir);
  if (dir == NULL) return false;
  bool found = false;
  struct dirent *entry;
  while (!found && (entry = readdir(dir)) != NULL) {
    char link[sizeof fd_dir + 300], target[PATH_MAX];
    snprintf(link, sizeof link, "%s/%s", fd_dir, entry->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    found = strcmp(target, path) == 0;
  }
  closedir(dir);
  return found;
}

/* The pasta recorded in pasta.pid is ours only if it still has our log file open (its -l): a pid reused
 * by another process is left alone. */
static int reclaim_pasta(const char *state_dir) {
  char path[PATH_MAX + 16], log_path[PATH_MAX + 16], text[32];
  snprintf(path, sizeof path, "%s/pasta.pid", state_dir);
  snprintf(log_path, sizeof log_path, "%s/pasta.log", state_dir);
  if (read_small_file(path, text, sizeof text) <= 0) return 0;
  long pid = strtol(text, NULL, 10);
  int removed = 0;
  if (pid > 1 && has_open(pid, log_path) && kill((pid_t)pid, SIGKILL) == 0) removed = 1;
  unlink(path);
  unlink(log_path);
  snprintf(log_path, sizeof log_path, "%s/pasta.stderr", state_dir);
  unlink(log_path);
  return removed;
}

/* The state directory belongs to one live supervisor at a time: an exclusive flock(2) on `lock` held from
 * open to close (the kernel drops it when the process dies, so a crashed owner never blocks the next).
 * Returns the lock's fd (>= 0), -EBUSY when another live process holds it, or -errno. The file is removed
 * at close; a path that no longer names the locked file (removed meanwhile) is retried. */
static int state_lock(const char *state_dir, dome_error *err) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/lock", state_dir);
  for (int attempt = 0; attempt < 8; attempt++) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", path);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
      int e = errno;
      close(fd);
      if (e == EWOULDBLOCK)
        return dome_error_set(
            err, EBUSY, "state directory `%s` is in use by another live supervisor (domed or `dome run`)",
            state_dir);
      return dome_error_set_errno(err, e, "lock `%s`", path);
    }
    struct stat locked, named;
    if (fstat(fd, &locked) == 0 && stat(path, &named) == 0 && locked.st_ino == named.st_ino &&
        locked.st_dev == named.st_dev)
      return fd;
    close(fd); /* removed by its previous owner between our open and flock: take the new one */
  }
  return dome_error_set(err, EBUSY, "lock `%s`: keeps being replaced", path);
}

static void state_unlock(const char *state_dir, int fd) {
  if (fd < 0) return;
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/lock", state_dir);
  unlink(path); /* while still holding it: a waiter then sees a different inode and retries */
  close(fd);
}

static int reclaim_locked(const struct dome_net_config *config, dome_error *err);

int dome_net_reclaim(const struct dome_net_config *config, dome_error *err) {
  const char *state_dir = config->state_dir ? config->state_dir : DOME_NET_DEFAULT_STATE_DIR;
  if (access(state_dir, F_OK) < 0)
    return errno == ENOENT ? 0 : dome_error_set_errno(err, errno, "`%s`", state_dir);
  int lock = state_lock(state_dir, err);
  if (lock < 0) return lock;
  int r = reclaim_locked(config, err);
  if (r >= 0) r += net_uplink_reclaim(state_dir);
  state_unlock(state_dir, lock);
  return r;
}

static int reclaim_locked(const struct dome_net_config *config, dome_error *err) {
  const char *state_dir = config->state_dir ? config->state_dir : DOME_NET_DEFAULT_STATE_DIR;
  DIR *dir = opendir(state_dir);
  if (dir == NULL)
    return errno == ENOENT ? 0 : dome_error_set_errno(err, errno, "open state directory `%s`", state_dir);
  int removed = reclaim_pasta(state_dir);
  struct nl_sock *sock = NULL;
  bool routed_leftover = false;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    unsigned slot;
    char extra;
    if (sscanf(entry->d_name, "slot-%u%c", &slot, &extra) != 1) continue;
    char path[PATH_MAX + 300], content[64] = "";
    snprintf(path, sizeof path, "%s/%s", state_dir, entry->d_name);
    read_small_file(path, content, sizeof content);
    /* "routed domeh7": the link lives in the host namespace and must go; in user mode it died with the
     * egress namespace when its pasta was reclaimed. */
    char mode[16], link[16];
    if (sscanf(content, "%15s %15s", mode, link) == 2 && strcmp(mode, "routed") == 0 &&
        strncmp(link, DOME_NET_LINK_PREFIX, strlen(DOME_NET_LINK_PREFIX)) == 0) {
      routed_leftover = true;
      if (sock == NULL && net_nl_open(&sock, NULL) < 0) sock = NULL;
      if (sock && net_link_delete(sock, link, NULL) == 0) removed++;
    }
    unlink(path);
  }
  closedir(dir);
  net_nl_close(sock);
  char marker[PATH_MAX + 16];
  snprintf(marker, sizeof marker, "%s/routed", state_dir);
  if (access(marker, F_OK) == 0 || routed_leftover) {
    if (net_nft_table_remove(NULL, NULL) == 0) removed++;
    unlink(marker);
  }
  return removed;
}

/* ---- open / close ---- */

/* Make the egress side's netlink socket and nftables context in the calling thread's namespace. */
static int open_egress_handles(struct dome_net *net, dome_error *err) {
  int r = net_nl_open(&net->egress_sock, err);
  if (r < 0) return r;
  net->egress_nft = net_nft_context();
  if (net->egress_nft == NULL) return dome_error_set(err, ENOMEM, "nftables: cannot create a context");
  return 0;
}

static int setup_egress_namespace(void *arg, dome_error *err) {
  struct dome_net *net = arg;
  int r = open_egress_handles(net, err);
  if (r < 0) return r;
  if ((r = net_link_set_up(net->egress_sock, "lo", err)) < 0) return r;
  /* Forwarding in the egress namespace only (a per-namespace setting; the host's stays as it is). */
  _cleanup_close_ int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "1\n", 2) != 2)
    return dome_error_set_errno(err, errno, "enable forwarding in the egress namespace");
  return net_nft_table_install(net->egress_nft, net->pool, &net->pool6, err);
}

struct tap_wait {
  int ready;
};

static int check_tap(void *arg, dome_error *err) {
  struct tap_wait *wait = arg;
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  struct rtnl_link *link = NULL;
  wait->ready = rtnl_link_get_kernel(sock, 0, TAP_NAME, &link) >= 0 && (rtnl_link_get_flags(link) & IFF_UP);
  if (link) rtnl_link_put(link);
  net_nl_close(sock);
  return 0;
}

static int start_pasta(struct dome_net *net, dome_error *err) {
  char netns_path[64], userns_path[64], log_argument[64], pid_path[PATH_MAX + 16], log_path[PATH_MAX + 16],
      stderr_path[PATH_MAX + 16];
  char address[16], gateway[16], length[8];
  snprintf(pid_path, sizeof pid_path, "%s/pasta.pid", net->state_dir);
  snprintf(log_path, sizeof log_path, "%s/pasta.log", net->state_dir);
  snprintf(stderr_path, sizeof stderr_path, "%s/pasta.stderr", net->state_dir);
  uint32_t gw, tap;
  int r = dome_net_slot_addresses(net->pool, net->block_length, 0, &gw, &tap, err);
  if (r < 0) return r;
  net_format_ipv4(tap, address);
  net_format_ipv4(gw, gateway);
  snprintf(length, sizeof length, "%u", net->block_length);
  /* pasta runs as the egress ids from its start, which cannot reach into the state directory: its log
   * is opened here and given to it as its own descriptor; it reopens that (the file is the egress
   * uid's). It opens its namespaces the same way: opening ours through /proc/<pid>/fd would need ptrace
   * access, which pasta does not have over the supervisor. */
  _cleanup_close_ int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  _cleanup_close_ int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
  _cleanup_close_ int stderr_fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  _cleanup_close_ int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (in < 0 || out < 0) return dome_error_set_errno(err, errno, "pasta: open /dev/null");
  if (stderr_fd < 0) return dome_error_set_errno(err, errno, "pasta: create `%s`", stderr_path);
  if (log_fd < 0) return dome_error_set_errno(err, errno, "pasta: create `%s`", log_path);
  if (fchown(log_fd, DOME_NET_EGRESS_ID, DOME_NET_EGRESS_ID) < 0)
    return dome_error_set_errno(err, errno, "pasta: hand `%s` to the egress uid", log_path);
  snprintf(netns_path, sizeof netns_path, "/proc/self/fd/%d", net->egress_netns_fd);
  snprintf(userns_path, sizeof userns_path, "/proc/self/fd/%d", net->egress_userns_fd);
  snprintf(log_argument, sizeof log_argument, "/proc/self/fd/%d", log_fd);
  /* No port forwarding in either direction (-t/-u/-T/-U none): nothing outside reaches a jail and the
   * jails cannot reach the host's loopback through pasta; --no-map-gw keeps the gateway address from
   * standing for the host. pasta has the egress ids in the host's user namespace, where they are
   * nobody's, then joins the egress user namespace they own (--userns) and the network namespace it
   * owns: no capability of pasta's is in a namespace of the host's (docs/networking.md, "Privileges"). */
  char *argv[] = {net->pasta_path, "-f",          "-q",         "--userns",
                  userns_path,     "--netns",     netns_path,   "--no-netns-quit",
                  "--config-net",  "-I",          TAP_NAME,     "-a",
                  address,         "-n",          length,       "-g",
                  gateway,         "--no-map-gw", "--no-dhcp",  "--no-dhcpv6",
                  "--no-ra",       "-t",          "none",       "-u",
                  "none",          "-T",          "none",       "-U",
                  "none",          "-l",          log_argument, NULL};
  const int inherited[] = {net->egress_netns_fd, net->egress_userns_fd, log_fd};
  if ((r = net_pasta_start(net, argv, in, out, stderr_fd, inherited, sizeof inherited / sizeof inherited[0],
                           err)) < 0)
    return r;
  pid_t pid = net->pasta_pid;
  /* Recorded by us at once (pasta's own -P file would come later: a crash in between would lose it). That
   * the pid still has our log file open is what proves to dome_net_reclaim that it is still ours. */
  FILE *pid_file = fopen(pid_path, "we");
  if (pid_file) {
    fprintf(pid_file, "%d\n", (int)pid);
    fclose(pid_file);
  }
  for (int waited = 0; waited < PASTA_READY_TIMEOUT_MS; waited += 5) {
    struct tap_wait wait = {0};
    if ((r = net_in_netns(net->egress_netns_fd, check_tap, &wait, err)) < 0) return r;
    if (wait.ready) return 0;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      net->pasta_pid = 0;
      return dome_error_set(err, EIO, "`%s` exited (status %d) before its interface came up (see %s, %s)",
                            net->pasta_path, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                            stderr_path, log_path);
    }
    nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
  }
  return dome_error_set(err, ETIMEDOUT, "pasta: interface " TAP_NAME " not up after %d ms",
                        PASTA_READY_TIMEOUT_MS);
}

static int choose_pool(struct dome_net *net, const struct dome_net_config *config, dome_error *err) {
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  enum { HOST_PREFIX_MAX = 4096 };
  _cleanup_free_ struct dome_net_prefix *host = calloc(HOST_PREFIX_MAX, sizeof *host);
  size_t host_count = 0;
  r = host ? net_host_prefixes(sock, host, HOST_PREFIX_MAX, &host_count, err)
           : dome_error_set(err, ENOMEM, "host routes: out of memory");
  net_nl_close(sock);
  if (r < 0) return r;
  if (config->pool.length == 0) return dome_net_choose_pool(host, host_count, 16, &net->pool, err);
  for (size_t i = 0; i < host_count; i++) {
    if (host[i].length != 0 && dome_net_prefix_overlaps(config->pool, host[i])) {
      char text[16], pool_text[16];
      net_format_ipv4(host[i].address, text);
      net_format_ipv4(config->pool.address, pool_text);
      return dome_error_set(err, EADDRINUSE, "address pool %s/%u overlaps the host's %s/%u", pool_text,
                            config->pool.length, text, host[i].length);
    }
  }
  net->pool = config->pool;
  return 0;
}

/* The IPv6 pool: the configured /48 (inside fc00::/7), or a random RFC 4193 ULA /48 (section 3.2.2: a
 * pseudo-random 40-bit global ID) free of the host's IPv6 routes. *host_default: the host has an IPv6
 * default route (pasta then gives the egress namespace IPv6). */
static int choose_pool6(struct dome_net *net, const struct dome_net_config *config, bool *host_default,
                        dome_error *err) {
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  enum { HOST_PREFIX_MAX = 1024 };
  _cleanup_free_ struct dome_net_prefix6 *host = calloc(HOST_PREFIX_MAX, sizeof *host);
  size_t host_count = 0;
  r = host ? net_host_prefixes6(sock, host, HOST_PREFIX_MAX, &host_count, host_default, err)
           : dome_error_set(err, ENOMEM, "host routes: out of memory");
  net_nl_close(sock);
  if (r < 0) return r;
  if (config->pool6.length != 0) {
    if (config->pool6.length != 48 || (config->pool6.address[0] & 0xfe) != 0xfc)
      return dome_error_set(err, EINVAL, "IPv6 pool: must be a /48 inside fc00::/7 (RFC 4193)");
    net->pool6 = config->pool6;
  }
  for (int attempt = 0; attempt < 16; attempt++) {
    if (config->pool6.length == 0) {
      memset(&net->pool6, 0, sizeof net->pool6);
      net->pool6.address[0] = 0xfd;
      if (getrandom(net->pool6.address + 1, 5, 0) != 5)
        return dome_error_set_errno(err, errno, "IPv6 pool: getrandom");
      net->pool6.length = 48;
    }
    bool overlaps = false;
    for (size_t i = 0; i < host_count && !overlaps; i++) {
      uint8_t shorter = host[i].length < 48 ? host[i].length : 48;
      overlaps = memcmp(host[i].address, net->pool6.address, shorter / 8) == 0 &&
                 (shorter % 8 == 0 || ((host[i].address[shorter / 8] ^ net->pool6.address[shorter / 8]) &
                                       (0xff << (8 - shorter % 8)) & 0xff) == 0);
    }
    if (!overlaps) return 0;
    if (config->pool6.length != 0) return dome_error_set(err, EADDRINUSE, "IPv6 pool overlaps a host route");
  }
  return dome_error_set(err, EADDRNOTAVAIL, "IPv6 pool: no free ULA /48 found");
}

struct ipv6_wait {
  bool default_route;
};

static int check_ipv6(void *arg, dome_error *err) {
  struct ipv6_wait *wait = arg;
  struct nl_sock *sock = NULL;
  int r = net_nl_open(&sock, err);
  if (r < 0) return r;
  struct dome_net_prefix6 ignored[64];
  size_t count = 0;
  r = net_host_prefixes6(sock, ignored, 64, &count, &wait->default_route, err);
  net_nl_close(sock);
  return r;
}

static int enable_ipv6_forwarding(void *arg, dome_error *err) {
  (void)arg;
  _cleanup_close_ int fd = open("/proc/sys/net/ipv6/conf/all/forwarding", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "1\n", 2) != 2)
    return dome_error_set_errno(err, errno, "enable IPv6 forwarding in the egress namespace");
  return 0;
}

/* User mode: IPv6 when pasta gave the egress namespace an IPv6 default route (it copies the host's). */
static void user_ipv6(struct dome_net *net, bool host_default) {
  if (!host_default) {
    snprintf(net->ipv6_reason, sizeof net->ipv6_reason,
             "the host has no IPv6 default route for pasta to use");
    return;
  }
  for (int waited = 0; waited <= 1000; waited += 10) {
    struct ipv6_wait wait = {false};
    if (net_in_netns(net->egress_netns_fd, check_ipv6, &wait, NULL) < 0) break;
    if (wait.default_route) {
      dome_error err = {0};
      if (net_in_netns(net->egress_netns_fd, enable_ipv6_forwarding, NULL, &err) < 0) {
        snprintf(net->ipv6_reason, sizeof net->ipv6_reason, "%.200s", err.message);
        return;
      }
      net->ipv6 = true;
      return;
    }
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  snprintf(net->ipv6_reason, sizeof net->ipv6_reason, "pasta gave the egress namespace no IPv6 route");
}

bool dome_net_ipv6_available(const struct dome_net *net, const char **reason) {
  if (reason) *reason = net->ipv6 ? "" : net->ipv6_reason;
  return net->ipv6;
}

int dome_net_open(const struct dome_net_config *config, struct dome_net **net_out, dome_error *err) {
  struct dome_net_config defaults = {0};
  if (config == NULL) config = &defaults;
  if (config->mode != DOME_NET_MODE_AUTO && config->mode != DOME_NET_MODE_USER &&
      config->mode != DOME_NET_MODE_ROUTED && !net_mode_is_uplink(config->mode))
    return dome_error_set(err, 0, "network mode %d: expected auto, user, routed, ipvlan or macvlan",
                          (int)config->mode);
  uint8_t block = config->block_length ? config->block_length : 30;
  if (block != 30 && block != 31)
    return dome_error_set(err, 0, "pool block length /%u: must be 30 or 31", block);
  struct dome_net *net = calloc(1, sizeof *net);
  if (net == NULL) return dome_error_set(err, ENOMEM, "network: out of memory");
  net->mode = config->mode;
  pthread_mutex_init(&net->lock, NULL);
  if (net->mode == DOME_NET_MODE_AUTO)
    net->mode = ip_forward_enabled() ? DOME_NET_MODE_ROUTED : DOME_NET_MODE_USER;
  net->egress_netns_fd = -1;
  net->egress_userns_fd = -1;
  net->lock_fd = -1;
  net->pasta_stop = -1;
  net->block_length = block;
  net->jail_quota_bytes = config->jail_quota_bytes;
  net->mtu = config->mtu ? config->mtu : (net->mode == DOME_NET_MODE_USER ? 65520 : 1500);
  snprintf(net->state_dir, sizeof net->state_dir, "%s",
           config->state_dir ? config->state_dir : DOME_NET_DEFAULT_STATE_DIR);
  snprintf(net->pasta_path, sizeof net->pasta_path, "%s",
           config->pasta_path ? config->pasta_path : DOME_NET_DEFAULT_PASTA);
  int r;
  /* The parent (/run/dome by default) may not exist yet on a fresh host. */
  char parent[sizeof net->state_dir];
  snprintf(parent, sizeof parent, "%s", net->state_dir);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    if (mkdir(parent, 0755) < 0 && errno != EEXIST) {
      r = dome_error_set_errno(err, errno, "create state directory `%s`", parent);
      goto fail;
    }
  }
  if (mkdir(net->state_dir, 0700) < 0 && errno != EEXIST) {
    r = dome_error_set_errno(err, errno, "create state directory `%s`", net->state_dir);
    goto fail;
  }
  if ((r = state_lock(net->state_dir, err)) < 0) goto fail;
  net->lock_fd = r;
  if ((r = reclaim_locked(config, err)) < 0) goto fail;
  net_uplink_reclaim(net->state_dir);
  if ((r = choose_pool(net, config, err)) < 0) goto fail;
  bool host_ipv6_default = false;
  if ((r = choose_pool6(net, config, &host_ipv6_default, err)) < 0) goto fail;
  if (net->pool.length > block) {
    r = dome_error_set(err, 0, "address pool /%u is shorter than one /%u block", net->pool.length, block);
    goto fail;
  }
  uint64_t slots = 1ull << (block - net->pool.length);
  net->slot_count = slots > 65536 ? 65536 : (uint32_t)slots;
  net->slot_used = calloc(net->slot_count, 1);
  if (net->slot_used == NULL) {
    r = dome_error_set(err, ENOMEM, "network: out of memory");
    goto fail;
  }
  net->slot_used[0] = 1; /* the egress side's own link (pasta's tap) */
  if (net_mode_is_uplink(net->mode)) {
    if ((r = net_uplink_open(net, config, err)) < 0) goto fail;
  } else if (net->mode == DOME_NET_MODE_ROUTED) {
    if (!ip_forward_enabled()) {
      r = dome_error_set(
          err, ENOTSUP,
          "routed egress needs net.ipv4.ip_forward=1, which dome never sets: enable it (sysctl) or "
          "use the user-mode egress (pasta)");
      goto fail;
    }
    char marker[PATH_MAX + 16];
    snprintf(marker, sizeof marker, "%s/routed", net->state_dir);
    _cleanup_close_ int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if ((r = open_egress_handles(net, err)) < 0) goto fail;
    if ((r = net_nft_table_install(net->egress_nft, net->pool, &net->pool6, err)) < 0) goto fail;
    if (read_flag("/proc/sys/net/ipv6/conf/all/forwarding"))
      net->ipv6 = true;
    else
      snprintf(net->ipv6_reason, sizeof net->ipv6_reason,
               "routed IPv6 egress needs net.ipv6.conf.all.forwarding=1, which dome never sets");
  } else {
    if (access(net->pasta_path, X_OK) < 0) {
      r = dome_error_set_errno(err, errno, "user-mode egress needs pasta (Debian package passt): `%s`",
                               net->pasta_path);
      goto fail;
    }
    if ((r = net_egress_namespaces_create(DOME_NET_EGRESS_ID, &net->egress_userns_fd, &net->egress_netns_fd,
                                          err)) < 0)
      goto fail;
    if ((r = net_in_netns(net->egress_netns_fd, setup_egress_namespace, net, err)) < 0) goto fail;
    if ((r = start_pasta(net, err)) < 0) goto fail;
    user_ipv6(net, host_ipv6_default);
    if (config->tcp_relay && (r = net_relay_start(net, err)) < 0) goto fail;
  }
  *net_out = net;
  return 0;
fail:
  dome_error_wrap(err, "open jail networking (%s mode)", dome_net_mode_name(net->mode));
  dome_net_close(net);
  return r;
}

void dome_net_close(struct dome_net *net) {
  if (net == NULL) return;
  while (net->jails) dome_net_jail_teardown(net, net->jails, NULL);
  net_relay_stop(net->relay);
  net->relay = NULL;
  if (net->pasta_pid > 0 || net->pasta_stop >= 0) {
    net_pasta_stop(net);
    /* pasta has exited: its pid file and logs go too (after a crash the kernel has ended pasta; the
     * next open's reclaim removes these files, and a pasta still running from them if any). */
    static const char *const files[] = {"pasta.pid", "pasta.log", "pasta.stderr"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      char path[PATH_MAX + 16];
      snprintf(path, sizeof path, "%s/%s", net->state_dir, files[i]);
      unlink(path);
    }
  }
  if (net->mode == DOME_NET_MODE_ROUTED && net->egress_nft) {
    net_nft_table_remove(net->egress_nft, NULL);
    char marker[PATH_MAX + 16];
    snprintf(marker, sizeof marker, "%s/routed", net->state_dir);
    unlink(marker);
  }
  net_nft_context_free(net->egress_nft);
  net_nl_close(net->egress_sock);
  if (net->egress_netns_fd >= 0) close(net->egress_netns_fd); /* the namespace and its links go with it */
  if (net->egress_userns_fd >= 0) close(net->egress_userns_fd);
  free(net->slot_used);
  state_unlock(net->state_dir, net->lock_fd);
  rmdir(net->state_dir); /* only when empty: nothing of ours is left */
  pthread_mutex_destroy(&net->lock);
  free(net);
}

enum dome_net_mode dome_net_mode_in_effect(const struct dome_net *net) {
  return net->mode;
}

const char *dome_net_mode_name(enum dome_net_mode mode) {
  return mode == DOME_NET_MODE_USER      ? "user"
         : mode == DOME_NET_MODE_ROUTED  ? "routed"
         : mode == DOME_NET_MODE_IPVLAN  ? "ipvlan"
         : mode == DOME_NET_MODE_MACVLAN ? "macvlan"
                                         : "auto";
}

void dome_net_probe_host(const char *pasta_path, struct dome_net_host_report *report) {
  memset(report, 0, sizeof *report);
  if (pasta_path == NULL) pasta_path = DOME_NET_DEFAULT_PASTA;
  report->ip_forward = ip_forward_enabled();
  report->pasta = access(pasta_path, X_OK) == 0;
  report->nftables = net_nft_run(NULL, "list tables\n", NULL) == 0;
  report->routed_available = report->ip_forward && report->nftables;
  report->user_available = report->pasta && report->nftables;
  report->auto_mode = report->ip_forward ? DOME_NET_MODE_ROUTED : DOME_NET_MODE_USER;
  size_t used = 0;
#define REASON(...)                                \
  used += (size_t)snprintf(report->reasons + used, \
                           used < sizeof report->reasons ? sizeof report->reasons - used : 0, __VA_ARGS__)
  if (!report->ip_forward)
    REASON(
        "routed egress: net.ipv4.ip_forward is 0 (dome never changes it; once the operator sets it, the "
        "default mode `auto` picks routed egress)\n");
  report->ipv6_forward = read_flag("/proc/sys/net/ipv6/conf/all/forwarding");
  net_uplink_probe(&report->ipvlan, &report->macvlan);
  if (!report->ipvlan)
    REASON("ipvlan egress: the kernel makes no ipvlan link (CONFIG_IPVLAN)%s\n",
           report->macvlan ? "; macvlan mode is the same path" : "");
  if (!report->ipv6_forward)
    REASON(
        "routed IPv6 egress: net.ipv6.conf.all.forwarding is 0 (dome never changes it; routed jails get "
        "IPv4 only)\n");
  if (!report->nftables)
    REASON("nftables: libnftables cannot list the ruleset (package nftables, CAP_NET_ADMIN)\n");
  if (!report->pasta) REASON("user-mode egress: `%s` not executable (Debian package passt)\n", pasta_path);
#undef REASON
}
