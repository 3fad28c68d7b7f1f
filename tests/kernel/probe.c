/* dome-kernel-probe main and helpers. usage: dome-kernel-probe
 * net|landlock|files|property|shadow|bench|bench-shadow [--level reduced|full] Prints one line per check and
 * closes with `N passed, N failed`; exit status 1 when a check failed. */
#include "tests/kernel/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct probe_counts *probe_counts;
struct probe_denial probe_denials[PROBE_MAX_DENIALS];
unsigned probe_denial_count;

bool probe_check(bool cond, const char *name, const char *format, ...) {
  if (cond) {
    probe_counts->passed++;
    printf("ok %s\n", name);
  } else {
    probe_counts->failed++;
    printf("not ok %s: ", name);
    va_list args;
    va_start(args, format);
    vprintf(format, args);
    va_end(args);
    putchar('\n');
  }
  fflush(stdout);
  return cond;
}

static int own_cgroup2(char *out, size_t size) {
  const char *mount =
      access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
  FILE *file = fopen("/proc/self/cgroup", "re");
  if (!file) return -errno;
  char line[1024];
  int r = -ENOENT;
  while (fgets(line, sizeof(line), file)) {
    if (strncmp(line, "0::", 3) != 0) continue;
    line[strcspn(line, "\n")] = 0;
    snprintf(out, size, "%s%.300s", mount, strcmp(line + 3, "/") == 0 ? "" : line + 3);
    r = 0;
  }
  fclose(file);
  return r;
}

int probe_leaf_create(struct probe_leaf *leaf, const char *name) {
  char base[400];
  int r = own_cgroup2(base, sizeof(base));
  if (r < 0) return r;
  snprintf(leaf->path, sizeof(leaf->path), "%s/dome-ktest-%s-%d", base, name, getpid());
  if (mkdir(leaf->path, 0755) != 0) return -errno;
  leaf->fd = open(leaf->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (leaf->fd < 0 || fstat(leaf->fd, &st) != 0) {
    r = -errno;
    rmdir(leaf->path);
    return r;
  }
  leaf->id = st.st_ino;
  return 0;
}

void probe_leaf_remove(struct probe_leaf *leaf) {
  if (leaf->fd >= 0) close(leaf->fd);
  leaf->fd = -1;
  for (int i = 0; i < 50 && rmdir(leaf->path) != 0 && errno == EBUSY; i++) usleep(20000);
}

int probe_leaf_enter(const struct probe_leaf *leaf) {
  char procs[600];
  snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf->path);
  int fd = open(procs, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int r = write(fd, "0", 1) == 1 ? 0 : -errno;
  close(fd);
  return r;
}

int probe_in_leaf(const struct probe_leaf *leaf, int (*fn)(void *), void *arg) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (probe_leaf_enter(leaf) < 0) _exit(120);
    _exit(fn(arg));
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int probe_tables(struct dome_rule_tables *tables, const char *json) {
  dome_error err = {0};
  int r = dome_rule_tables_from_json(json, strlen(json), tables, &err);
  if (r < 0) fprintf(stderr, "probe: tables: %s\n", err.message);
  return r;
}

static void on_denial(void *context, const struct dome_denial *denial) {
  (void)context;
  if (getenv("PROBE_VERBOSE") && *getenv("PROBE_VERBOSE"))
    fprintf(stderr, "%s: hook %s object %s entry %ld policy %s cgroup %llu pid %u\n",
            denial->kind == DOME_EVENT_SHADOW ? "shadow" : "denial", dome_hook_name(denial->hook),
            denial->object, denial->entry, denial->policy_id ? denial->policy_id : "-",
            (unsigned long long)denial->cgroup_id, denial->pid);
  if (probe_denial_count >= PROBE_MAX_DENIALS) return;
  struct probe_denial *d = &probe_denials[probe_denial_count++];
  d->kind = denial->kind;
  d->allowed = denial->allowed;
  d->shadow_allowed = denial->shadow_allowed;
  snprintf(d->shadow_policy, sizeof(d->shadow_policy), "%.60s",
           denial->shadow_policy_id ? denial->shadow_policy_id : "");
  d->hook = denial->hook;
  snprintf(d->object, sizeof(d->object), "%.500s", denial->object);
  d->entry = denial->entry;
  snprintf(d->policy, sizeof(d->policy), "%.60s", denial->policy_id ? denial->policy_id : "");
  d->cgroup_id = denial->cgroup_id;
}

void probe_collect(struct dome_kernel *kernel, int timeout_ms) {
  dome_error err = {0};
  probe_denial_count = 0;
  int r = dome_kernel_poll_denials(kernel, timeout_ms, on_denial, NULL, &err);
  while (r > 0) r = dome_kernel_poll_denials(kernel, 0, on_denial, NULL, &err);
}

bool probe_has_denial(enum dome_hook hook, const char *object, const char *policy) {
  for (unsigned i = 0; i < probe_denial_count; i++) {
    const struct probe_denial *d = &probe_denials[i];
    if (d->kind == DOME_EVENT_DENIAL && d->hook == hook && strcmp(d->object, object) == 0 &&
        (!policy || strcmp(d->policy, policy) == 0))
      return true;
  }
  return false;
}

unsigned probe_kind_count(enum dome_event_kind kind) {
  unsigned count = 0;
  for (unsigned i = 0; i < probe_denial_count; i++) count += probe_denials[i].kind == kind;
  return count;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Shared with the children run inside leaves, which record their own checks. */
  probe_counts = mmap(NULL, sizeof(*probe_counts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (probe_counts == MAP_FAILED) return 2;
  if (argc < 2) {
    fprintf(stderr,
            "usage: dome-kernel-probe net|landlock|files|property|shadow|bench|bench-shadow [--level "
            "reduced|full]\n");
    return 2;
  }
  enum dome_enforcement_level level = DOME_LEVEL_REDUCED;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--level") == 0)
      level = strcmp(argv[i + 1], "full") == 0 ? DOME_LEVEL_FULL : DOME_LEVEL_REDUCED;
  }
  if (level == DOME_LEVEL_FULL && dome_kernel_probe_level() != DOME_LEVEL_FULL) {
    fprintf(stderr,
            "dome-kernel-probe: this kernel has no BPF-LSM (lsm= lacks bpf); refusing --level full\n");
    return 2;
  }
  int r;
  if (strcmp(argv[1], "net") == 0)
    r = probe_scenario_net(level);
  else if (strcmp(argv[1], "landlock") == 0)
    r = probe_scenario_landlock();
  else if (strcmp(argv[1], "files") == 0)
    r = probe_scenario_files();
  else if (strcmp(argv[1], "property") == 0)
    r = probe_scenario_property(level);
  else if (strcmp(argv[1], "shadow") == 0)
    r = probe_scenario_shadow(level);
  else if (strcmp(argv[1], "bench") == 0)
    return probe_scenario_bench();
  else if (strcmp(argv[1], "bench-shadow") == 0)
    return probe_scenario_bench_shadow();
  else {
    fprintf(stderr, "dome-kernel-probe: unknown scenario `%s`\n", argv[1]);
    return 2;
  }
  if (r < 0) probe_check(false, argv[1], "scenario set-up failed (%d)", r);
  printf("%u passed, %u failed\n", probe_counts->passed, probe_counts->failed);
  return probe_counts->failed ? 1 : 0;
}
