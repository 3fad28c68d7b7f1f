/* Shadow scenario: a second (shadow) table beside the active one. The active tables decide; each request
 * the shadow tables decide otherwise is reported once as a DOME_EVENT_SHADOW naming the object and both
 * decisions and policies. Runs in a network namespace of its own (loopback only): the listener, the jail's
 * connects and everything else here vanish with the probe process. At the full level the same for a file
 * (file_open); at the reduced level files are Landlock's, which has no shadow: none is reported. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/kernel/probe.h"

static uint16_t port;
static char secret[128];

/* Loopback up in the namespace the probe just entered. Returns 0 or -errno. */
static int loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  struct ifreq request = {0};
  snprintf(request.ifr_name, sizeof(request.ifr_name), "lo");
  int r = ioctl(fd, SIOCGIFFLAGS, &request);
  if (r == 0) {
    request.ifr_flags |= IFF_UP | IFF_RUNNING;
    r = ioctl(fd, SIOCSIFFLAGS, &request);
  }
  r = r == 0 ? 0 : -errno;
  close(fd);
  return r;
}

static int connect_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  struct sockaddr_in in = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int r = connect(fd, (struct sockaddr *)&in, sizeof(in)) == 0 ? 0 : errno;
  close(fd);
  return r;
}

struct expectation {
  int connect; /* errno expected (0: success) */
  int open;
  bool full;
  const char *what;
};

static int jailed(void *arg) {
  const struct expectation *x = arg;
  int e = connect_port();
  probe_check(e == x->connect, x->what, "connect to 127.0.0.1:%u: got %s", port, e ? strerror(e) : "success");
  if (x->full) {
    int fd = open(secret, O_RDONLY | O_CLOEXEC);
    e = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    probe_check(e == x->open, x->what, "open %s: got %s", secret, e ? strerror(e) : "success");
  }
  return 0;
}

/* permit: every port of 127.0.0.0/8 and every file; forbid: the same but port `port` and the secret file. */
static const char *tables_json(char *out, size_t size, bool forbid) {
  if (!forbid) {
    snprintf(out, size,
             "{\"policies\": [\"permit-local\", \"permit-files\"], \"network\": ["
             " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [0, "
             "65535], \"decision\": \"allow\", \"policy\": \"permit-local\"}], \"files\": ["
             " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", "
             "\"policy\": \"permit-files\"},"
             " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"write\", \"decision\": \"allow\", "
             "\"policy\": \"permit-files\"},"
             " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"exec\", \"decision\": \"allow\", "
             "\"policy\": \"permit-files\"}]}");
    return out;
  }
  snprintf(
      out, size,
      "{\"policies\": [\"permit-local\", \"forbid-port\", \"permit-files\", \"forbid-secret\"], "
      "\"network\": ["
      " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [0, %u], "
      "\"decision\": \"allow\", \"policy\": \"permit-local\"},"
      " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [%u, %u], "
      "\"decision\": \"deny\", \"policy\": \"forbid-port\"},"
      " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [%u, "
      "65535], \"decision\": \"allow\", \"policy\": \"permit-local\"}], \"files\": ["
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", "
      "\"policy\": \"permit-files\"},"
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"write\", \"decision\": \"allow\", "
      "\"policy\": \"permit-files\"},"
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"exec\", \"decision\": \"allow\", "
      "\"policy\": \"permit-files\"},"
      " {\"path\": \"%s\", \"match\": \"exact\", \"access\": \"read\", \"decision\": \"deny\", "
      "\"policy\": \"forbid-secret\"}]}",
      port - 1, port, port, port + 1, secret);
  return out;
}

/* The collected shadow events for `object`: how many, and the last one. */
static unsigned shadows_of(const char *object, const struct probe_denial **last) {
  unsigned count = 0;
  for (unsigned i = 0; i < probe_denial_count; i++)
    if (probe_denials[i].kind == DOME_EVENT_SHADOW && strcmp(probe_denials[i].object, object) == 0) {
      count++;
      *last = &probe_denials[i];
    }
  return count;
}

/* Exactly one shadow event for object, from hook, with these decisions and policies. */
static void check_shadow(const char *name, const char *object, enum dome_hook hook, bool allowed,
                         const char *policy, bool shadow_allowed, const char *shadow_policy) {
  const struct probe_denial *d = NULL;
  unsigned count = shadows_of(object, &d);
  if (!probe_check(count == 1, name, "%u shadow events for %s (of %u events)", count, object,
                   probe_denial_count))
    return;
  probe_check(d->hook == hook && d->allowed == allowed && d->shadow_allowed == shadow_allowed &&
                  strcmp(d->policy, policy) == 0 && strcmp(d->shadow_policy, shadow_policy) == 0,
              name, "hook %s active %s (%s) shadow %s (%s)", dome_hook_name(d->hook),
              d->allowed ? "allow" : "deny", d->policy, d->shadow_allowed ? "allow" : "deny",
              d->shadow_policy);
}

int probe_scenario_shadow(enum dome_enforcement_level level) {
  bool full = level == DOME_LEVEL_FULL;
  if (unshare(CLONE_NEWNET) != 0) return -errno;
  int r = loopback_up();
  if (r < 0) return r;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof(in);
  if (listener < 0 || bind(listener, (struct sockaddr *)&in, sizeof(in)) != 0 || listen(listener, 64) != 0 ||
      getsockname(listener, (struct sockaddr *)&in, &length) != 0)
    return -errno;
  port = ntohs(in.sin_port);
  if (port == 0 || port == 65535) return -EAGAIN;
  snprintf(secret, sizeof(secret), "/tmp/dome-ktest-shadow-%d", (int)getpid());
  int fd = open(secret, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  close(fd);

  struct probe_leaf leaf = {.fd = -1};
  struct dome_kernel *kernel = NULL;
  struct dome_kernel_attachment *attachment = NULL;
  struct dome_rule_tables permit, forbid;
  dome_rule_tables_init(&permit);
  dome_rule_tables_init(&forbid);
  char json[4096], object[64];
  dome_error err = {0};
  snprintf(object, sizeof(object), "127.0.0.1:%u", port);
  enum dome_hook connect_hook = full ? DOME_HOOK_SOCKET_CONNECT : DOME_HOOK_CONNECT4;
  if ((r = probe_leaf_create(&leaf, "shadow")) < 0) goto out;
  struct dome_kernel_options options = {.level = level};
  r = dome_kernel_open(&kernel, &options, &err);
  if (!probe_check(r == 0, "open kernel enforcement", "%s", err.message)) goto out;
  if ((r = probe_tables(&permit, tables_json(json, sizeof(json), false))) < 0) goto out;
  if ((r = probe_tables(&forbid, tables_json(json, sizeof(json), true))) < 0) goto out;

  r = dome_kernel_install_shadow_tables(kernel, 3, &forbid, &err);
  probe_check(r == -ENOENT, "shadow tables need an installed ruleset", "got %d", r);
  r = dome_kernel_install_tables(kernel, 3, &permit, &err);
  if (!probe_check(r == 0, "install the active tables", "%s", err.message)) goto out;
  r = dome_kernel_install_shadow_tables(kernel, 3, &forbid, &err);
  if (!probe_check(r == 0, "install the shadow tables", "%s", err.message)) goto out;
  struct dome_kernel_jail jail = {.cgroup_fd = leaf.fd, .cgroup_id = leaf.id, .ruleset = 3};
  r = dome_kernel_attach(kernel, &jail, &attachment, &err);
  if (!probe_check(r == 0, "attach cgroup programs to the leaf", "%s", err.message)) goto out;

  /* 1. the active tables permit what the shadow forbids: the access happens, one shadow event each */
  struct expectation permitted = {
      .connect = 0, .open = 0, .full = full, .what = "active permits, shadow forbids: the access succeeds"};
  probe_check(probe_in_leaf(&leaf, jailed, &permitted) == 0, "jailed child ran", "child failed");
  probe_collect(kernel, 500);
  check_shadow("one shadow event: port, active allow (permit-local), shadow deny (forbid-port)", object,
               connect_hook, true, "permit-local", false, "forbid-port");
  if (full)
    check_shadow("one shadow event: file_open, active allow, shadow deny (forbid-secret)", secret,
                 DOME_HOOK_FILE_OPEN, true, "permit-files", false, "forbid-secret");
  probe_check(
      probe_kind_count(DOME_EVENT_DENIAL) == 0 && probe_kind_count(DOME_EVENT_SHADOW) == (full ? 2u : 1u),
      "no denial, no other shadow event", "%u denials, %u shadow events", probe_kind_count(DOME_EVENT_DENIAL),
      probe_kind_count(DOME_EVENT_SHADOW));

  /* outside the jail the programs never run: nothing is reported for the same connect */
  int e = connect_port();
  probe_collect(kernel, 200);
  probe_check(e == 0 && probe_denial_count == 0, "outside the jail: no shadow event (scoped)",
              "connect %s, %u events", e ? strerror(e) : "success", probe_denial_count);

  /* 2. the reverse: the active tables forbid, the shadow ones permit: refused, one denial, one shadow */
  r = dome_kernel_install_tables(kernel, 3, &forbid, &err);
  if (r == 0) r = dome_kernel_install_shadow_tables(kernel, 3, &permit, &err);
  if (!probe_check(r == 0, "swap active and shadow tables", "%s", err.message)) goto out;
  struct expectation refused = {.connect = EPERM,
                                .open = EPERM,
                                .full = full,
                                .what = "active forbids, shadow permits: the access is refused"};
  probe_check(probe_in_leaf(&leaf, jailed, &refused) == 0, "jailed child ran", "child failed");
  probe_collect(kernel, 500);
  check_shadow("one shadow event: port, active deny (forbid-port), shadow allow (permit-local)", object,
               connect_hook, false, "forbid-port", true, "permit-local");
  probe_check(probe_has_denial(connect_hook, object, "forbid-port"), "the denial is reported as before",
              "%u events", probe_denial_count);
  if (full) {
    check_shadow("one shadow event: file_open, active deny (forbid-secret), shadow allow", secret,
                 DOME_HOOK_FILE_OPEN, false, "forbid-secret", true, "permit-files");
    probe_check(probe_has_denial(DOME_HOOK_FILE_OPEN, secret, "forbid-secret"), "the file denial as before",
                "missing");
  }
  probe_check(probe_kind_count(DOME_EVENT_SHADOW) == (full ? 2u : 1u), "no other shadow event",
              "%u shadow events", probe_kind_count(DOME_EVENT_SHADOW));

  /* 3. shadow removed: the same accesses decided by the active tables alone, no shadow event */
  r = dome_kernel_install_tables(kernel, 3, &permit, &err);
  if (r == 0) r = dome_kernel_install_shadow_tables(kernel, 3, NULL, &err);
  if (!probe_check(r == 0, "remove the shadow tables", "%s", err.message)) goto out;
  struct expectation plain = {
      .connect = 0, .open = 0, .full = full, .what = "no shadow: the access succeeds"};
  probe_check(probe_in_leaf(&leaf, jailed, &plain) == 0, "jailed child ran", "child failed");
  probe_collect(kernel, 300);
  probe_check(probe_denial_count == 0, "no shadow tables: no event", "%u events", probe_denial_count);
  /* Each table here is one network group (one prefix). A replaced shadow generation stays until the next
   * change, as an active one does: now the active and previous active ones and the previous shadow one;
   * after one more change, only the two active ones. */
  size_t counts[3] = {0}, counts_after[3] = {0};
  dome_kernel_rule_entries(kernel, counts);
  r = dome_kernel_install_shadow_tables(kernel, 3, NULL, &err);
  dome_kernel_rule_entries(kernel, counts_after);
  probe_check(r == 0 && counts[0] == 3 && counts_after[0] == 2,
              "shadow generations are removed from the maps", "%zu then %zu network groups", counts[0],
              counts_after[0]);
  r = 0;
out:
  if (attachment) dome_kernel_detach(kernel, attachment);
  dome_kernel_close(kernel);
  dome_rule_tables_free(&permit);
  dome_rule_tables_free(&forbid);
  probe_leaf_remove(&leaf);
  probe_check(leaf.path[0] == 0 || access(leaf.path, F_OK) != 0, "leaf removed", "still there");
  unlink(secret);
  close(listener);
  return r < 0 ? r : 0;
}
