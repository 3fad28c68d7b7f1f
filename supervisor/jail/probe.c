/* jail_probe_host: what the host offers and what dome will use (`dome doctor`). */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

static void reason(struct jail_host_report *report, const char *format, ...) {
  size_t used = strlen(report->reasons);
  if (used + 2 >= sizeof report->reasons) return;
  va_list args;
  va_start(args, format);
  vsnprintf(report->reasons + used, sizeof report->reasons - used - 1, format, args);
  va_end(args);
  strncat(report->reasons, "\n", sizeof report->reasons - strlen(report->reasons) - 1);
}

/* Can a user namespace be created? Tried in a short-lived child so this process is unchanged. */
static bool probe_user_namespaces(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
  if (pid < 0) return false;
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Attach a trivial cgroup_skb program (returns 1: allow) to a scratch leaf, then remove both. */
static bool probe_cgroup_bpf(const char *v2_self) {
  char parent[600], leaf[700];
  snprintf(parent, sizeof parent, "%s/dome", v2_self);
  snprintf(leaf, sizeof leaf, "%s/doctor-%d", parent, (int)getpid());
  if (mkdir(parent, 0755) < 0 && errno != EEXIST) return false;
  bool ok = false;
  if (mkdir(leaf, 0755) == 0) {
    int cgroup = open(leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct bpf_insn program[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
        {.code = BPF_JMP | BPF_EXIT},
    };
    union bpf_attr load;
    memset(&load, 0, sizeof load);
    load.prog_type = BPF_PROG_TYPE_CGROUP_SKB;
    load.expected_attach_type = BPF_CGROUP_INET_EGRESS;
    load.insns = (uint64_t)(uintptr_t)program;
    load.insn_cnt = 2;
    load.license = (uint64_t)(uintptr_t) "GPL";
    int prog = cgroup >= 0 ? (int)syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load) : -1;
    if (prog >= 0) {
      union bpf_attr attach;
      memset(&attach, 0, sizeof attach);
      attach.target_fd = (uint32_t)cgroup;
      attach.attach_bpf_fd = (uint32_t)prog;
      attach.attach_type = BPF_CGROUP_INET_EGRESS;
      ok = syscall(SYS_bpf, BPF_PROG_ATTACH, &attach, sizeof attach) == 0;
      if (ok) syscall(SYS_bpf, BPF_PROG_DETACH, &attach, sizeof attach);
      close(prog);
    }
    if (cgroup >= 0) close(cgroup);
    rmdir(leaf);
  }
  rmdir(parent);
  return ok;
}

static bool bpf_lsm;
static pthread_once_t lsm_once = PTHREAD_ONCE_INIT;

static void read_lsm(void) {
  char lsm[512] = "";
  int fd = open("/sys/kernel/security/lsm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, lsm, sizeof lsm - 1);
    lsm[n > 0 ? n : 0] = '\0';
    close(fd);
  }
  char padded[520];
  snprintf(padded, sizeof padded, ",%s,", lsm);
  bpf_lsm = strstr(padded, ",bpf,") != NULL;
}

bool jail_bpf_lsm_active(void) {
  pthread_once(&lsm_once, read_lsm);
  return bpf_lsm;
}

enum jail_enforcement jail_enforcement_level(bool have_v2_leaf, int landlock_abi) {
  const struct jail_cgroup_layout *layout = jail_cgroup_layout();
  if (!have_v2_leaf || landlock_abi <= 0) return JAIL_ENFORCEMENT_REDUCED;
  if (layout->v2_controllers && jail_bpf_lsm_active()) return JAIL_ENFORCEMENT_FULL;
  return JAIL_ENFORCEMENT_HYBRID;
}

int jail_probe_host(struct jail_host_report *report, dome_error *err) {
  memset(report, 0, sizeof *report);
  struct stat st;
  if (stat("/proc/self", &st) < 0) return dome_error_set_errno(err, errno, "probe host: /proc");
  const struct jail_cgroup_layout *layout = jail_cgroup_layout();
  snprintf(report->cgroup2_mount, sizeof report->cgroup2_mount, "%s", layout->v2_mount);
  report->cgroup_unified = layout->v2_controllers;
  static const char *const names[JAIL_V1_COUNT] = {"memory", "pids", "cpu", "cpuacct"};
  if (layout->v2_controllers) {
    snprintf(report->controllers, sizeof report->controllers, "memory(v2) pids(v2) cpu(v2)");
  } else {
    bool any = false;
    for (int c = 0; c < JAIL_V1_COUNT; c++) {
      if (!layout->v1_self[c][0]) continue;
      any = true;
      size_t used = strlen(report->controllers);
      snprintf(report->controllers + used, sizeof report->controllers - used, "%s%s(v1)", used ? " " : "",
               names[c]);
    }
    report->cgroup_hybrid = any && layout->v2_mount[0];
    if (!layout->v1_self[JAIL_V1_MEMORY][0] || !layout->v1_self[JAIL_V1_PIDS][0])
      reason(report, "cgroups: no memory or pids controller reachable (v1 or v2): jails cannot be limited");
  }
  if (!layout->v2_mount[0])
    reason(report, "cgroup2: no cgroup2 hierarchy mounted: no leaf for cgroup BPF programs, no cgroup.kill");
  else if (!layout->v2_controllers)
    reason(report,
           "cgroup2: hierarchy at %s has no controllers (hybrid host): limits go through cgroup v1; "
           "memory.oom.group is emulated (the v1 OOM event ends the whole jail); the child joins the "
           "v1 leaves itself after clone (CLONE_INTO_CGROUP places it in the cgroup2 leaf only)",
           layout->v2_mount);

  report->user_namespaces = probe_user_namespaces();
  if (!report->user_namespaces)
    reason(report, "user namespaces: unshare(CLONE_NEWUSER) refused: jails cannot run");
  report->seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 &&
                    syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &(uint32_t){SECCOMP_RET_ERRNO}) == 0;
  if (!report->seccomp) reason(report, "seccomp: filter mode unavailable");
  report->landlock_abi = jail_landlock_abi();
  if (report->landlock_abi == 0)
    reason(report, "Landlock: unavailable (not in lsm= or kernel < 5.13): file access rests on mounts only");
  else if (report->landlock_abi < 6)
    reason(report, "Landlock: ABI %d (< 6): signals and abstract sockets not scoped", report->landlock_abi);
  report->cgroup_bpf = layout->v2_mount[0] && probe_cgroup_bpf(layout->v2_self);
  if (!report->cgroup_bpf && layout->v2_mount[0])
    reason(report,
           "cgroup BPF: a cgroup_skb program could not be attached to a leaf: no in-kernel network rules");
  report->bpf_lsm = jail_bpf_lsm_active();
  bool securityfs = access("/sys/kernel/security/lsm", R_OK) == 0;
  if (!report->bpf_lsm)
    reason(report,
           "BPF-LSM: `bpf` not in %s: file/exec rules enforced by Landlock only, no kernel denial events",
           securityfs ? "/sys/kernel/security/lsm" : "the active LSMs (securityfs not mounted)");
  report->btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  if (!report->btf) reason(report, "BTF: /sys/kernel/btf/vmlinux missing: CO-RE BPF programs cannot load");
  report->clone_into_cgroup = layout->v2_mount[0] != '\0'; /* clone3 CLONE_INTO_CGROUP: Linux >= 5.7 */

  if (!report->user_namespaces || !report->seccomp ||
      (!layout->v1_self[JAIL_V1_MEMORY][0] && !layout->v2_controllers) || report->landlock_abi == 0 ||
      !layout->v2_mount[0])
    report->enforcement = JAIL_ENFORCEMENT_REDUCED;
  else if (layout->v2_controllers && report->bpf_lsm && report->btf)
    report->enforcement = JAIL_ENFORCEMENT_FULL;
  else
    report->enforcement = JAIL_ENFORCEMENT_HYBRID;
  return 0;
}
