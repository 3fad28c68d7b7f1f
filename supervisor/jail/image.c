/* Images: the embedded `host-ro` (assembled at every run from the host's /usr and a synthesized /etc) and
 * directory images built by scripts/build-image into <store>/<name>/rootfs (docs/images.md). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/jail/internal.h"

#define MAX_HOST_RO_ENTRIES 512

static const char passwd[] =
    "root:x:0:0:root:/tmp:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\nnogroup:x:65534:\n";
static const char hosts[] =
    "127.0.0.1\tlocalhost sandbox\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n";
static const char nsswitch[] =
    "passwd:\tfiles\ngroup:\tfiles\nshadow:\tfiles\nhosts:\tfiles\nnetworks:\tfiles\n"
    "protocols:\tfiles\nservices:\tfiles\n";
static const char nsswitch_dns[] =
    "passwd:\tfiles\ngroup:\tfiles\nshadow:\tfiles\nhosts:\tfiles dns\nnetworks:\tfiles\n"
    "protocols:\tfiles\nservices:\tfiles\n";
static const char hostname[] = "sandbox\n";

static struct jail_plan_entry host_entries[MAX_HOST_RO_ENTRIES];
static size_t host_entry_count;
static struct jail_plan_bind host_binds[8];
static size_t host_bind_count;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static char *host_string(const char *format, const char *a, const char *b) {
  char *s = NULL;
  if (asprintf(&s, format, a, b) < 0) return NULL;
  return s; /* lives for the process: part of the cached host-ro description */
}

static void add_entry(enum jail_plan_entry_kind kind, char *path, const char *target, const void *data,
                      size_t length, unsigned mode) {
  if (!path || host_entry_count >= MAX_HOST_RO_ENTRIES) return;
  host_entries[host_entry_count++] = (struct jail_plan_entry){
      .kind = kind, .path = path, .target = target, .data = data, .length = length, .mode = mode};
}

static void describe_host_ro(void) {
  static const char *const dirs[] = {"usr", "etc", "etc/alternatives", "dev", "proc", "tmp", "workspace"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    add_entry(PLAN_DIR, host_string(JAIL_STAGING "/%s%s", dirs[i], ""), NULL, NULL, 0, 0755);
  host_binds[host_bind_count++] = (struct jail_plan_bind){"/usr", JAIL_STAGING "/usr", true};
  /* Merged-/usr links as the host has them; a host with a real /bin gets it bound read-only too. */
  static const char *const tops[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
  for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
    char host[64], target[256];
    snprintf(host, sizeof host, "/%s", tops[i]);
    struct stat st;
    if (lstat(host, &st) < 0) continue;
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(host, target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      add_entry(PLAN_SYMLINK, host_string(JAIL_STAGING "/%s%s", tops[i], ""), strdup(target), NULL, 0, 0);
    } else if (S_ISDIR(st.st_mode) && host_bind_count < sizeof host_binds / sizeof host_binds[0]) {
      add_entry(PLAN_DIR, host_string(JAIL_STAGING "/%s%s", tops[i], ""), NULL, NULL, 0, 0755);
      host_binds[host_bind_count++] =
          (struct jail_plan_bind){strdup(host), host_string(JAIL_STAGING "/%s%s", tops[i], ""), true};
    }
  }
  add_entry(PLAN_FILE, JAIL_STAGING "/etc/passwd", NULL, passwd, sizeof passwd - 1, 0644);
  add_entry(PLAN_FILE, JAIL_STAGING "/etc/group", NULL, group, sizeof group - 1, 0644);
  add_entry(PLAN_FILE, JAIL_STAGING "/etc/hosts", NULL, hosts, sizeof hosts - 1, 0644);
  add_entry(PLAN_FILE, JAIL_STAGING "/etc/hostname", NULL, hostname, sizeof hostname - 1, 0644);
  add_entry(PLAN_FILE, JAIL_STAGING "/etc/nsswitch.conf", NULL, nsswitch, sizeof nsswitch - 1, 0644);
  /* The dynamic loader's cache, so that libraries resolve as on the host: bound read-only (copying its
   * tens of KiB into every jail's /etc cost more than the bind). */
  struct stat cache;
  if (stat("/etc/ld.so.cache", &cache) == 0 && S_ISREG(cache.st_mode) &&
      host_bind_count < sizeof host_binds / sizeof host_binds[0]) {
    add_entry(PLAN_FILE, JAIL_STAGING "/etc/ld.so.cache", NULL, "", 0, 0644);
    host_binds[host_bind_count++] =
        (struct jail_plan_bind){"/etc/ld.so.cache", JAIL_STAGING "/etc/ld.so.cache", false};
  }
  /* /etc/alternatives (awk, pager, java ...): a directory of symlinks only, bound read-only; recreating
   * its hundreds of links cost milliseconds at every start. */
  struct stat alternatives;
  if (lstat("/etc/alternatives", &alternatives) == 0 && S_ISDIR(alternatives.st_mode) &&
      host_bind_count < sizeof host_binds / sizeof host_binds[0])
    host_binds[host_bind_count++] =
        (struct jail_plan_bind){"/etc/alternatives", JAIL_STAGING "/etc/alternatives", true};
}

static bool valid_name(const char *name) {
  if (!*name || strlen(name) > 64 || name[0] == '.') return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
      return false;
  return true;
}

int jail_image_open(struct jail_image *image, const char *name, const char *store, dome_error *err) {
  memset(image, 0, sizeof *image);
  if (name == NULL || strcmp(name, "host-ro") == 0) {
    pthread_once(&host_once, describe_host_ro);
    image->host_ro = true;
    image->entries = host_entries;
    image->entry_count = host_entry_count;
    image->binds = host_binds;
    image->bind_count = host_bind_count;
    return 0;
  }
  if (!valid_name(name))
    return dome_error_set(err, EINVAL, "invalid image name `%s` (use a-z 0-9 . _ -)", name);
  if (!store) store = JAIL_DEFAULT_IMAGE_STORE;
  snprintf(image->rootfs, sizeof image->rootfs, "%s/%s/rootfs", store, name);
  struct stat st;
  if (stat(image->rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
    return dome_error_set(err, ENOENT,
                          "unknown image `%s`: no directory `%s` (build it with scripts/build-image %s)",
                          name, image->rootfs, name);
  static const char *const mount_points[] = {"dev", "proc", "tmp", "workspace"};
  for (size_t i = 0; i < sizeof mount_points / sizeof mount_points[0]; i++) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", image->rootfs, mount_points[i]);
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
      return dome_error_set(err, ENOENT, "image `%s`: missing mount point directory `%s`", name, path);
  }
  return 0;
}

int jail_image_set_resolver(struct jail_image *image, const char *resolv_conf, bool hosts_dns,
                            dome_error *err) {
  if (!resolv_conf && !hosts_dns) return 0;
  if (!image->host_ro)
    return dome_error_set(err, ENOTSUP, "resolv_conf: only the host-ro image lays out /etc per run");
  size_t length = resolv_conf ? strlen(resolv_conf) : 0;
  if (length > JAIL_MAX_RESOLV_CONF_BYTES)
    return dome_error_set(err, EINVAL, "resolv_conf: %zu bytes, over %u", length, JAIL_MAX_RESOLV_CONF_BYTES);
  /* a per-run copy of the shared host-ro entries, with nsswitch.conf replaced and resolv.conf added */
  struct jail_plan_entry *entries = calloc(image->entry_count + 1, sizeof *entries);
  if (!entries) return dome_error_set(err, ENOMEM, "resolv_conf: out of memory");
  memcpy(entries, image->entries, image->entry_count * sizeof *entries);
  size_t count = image->entry_count;
  for (size_t i = 0; hosts_dns && i < count; i++)
    if (entries[i].kind == PLAN_FILE && strcmp(entries[i].path, JAIL_STAGING "/etc/nsswitch.conf") == 0) {
      entries[i].data = nsswitch_dns;
      entries[i].length = sizeof nsswitch_dns - 1;
    }
  if (resolv_conf)
    entries[count++] = (struct jail_plan_entry){.kind = PLAN_FILE,
                                                .path = JAIL_STAGING "/etc/resolv.conf",
                                                .data = resolv_conf,
                                                .length = length,
                                                .mode = 0644};
  image->entries = entries;
  image->entry_count = count;
  image->owned_entries = entries;
  return 0;
}

void jail_image_close(struct jail_image *image) {
  free(image->owned_entries);
  memset(image, 0, sizeof *image); /* host-ro material is shared and lives for the process */
}
