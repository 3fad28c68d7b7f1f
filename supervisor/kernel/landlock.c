/* Landlock translation of file tables (the reduced level). Landlock is allow-only: a ruleset grants
 * rights beneath paths and denies the rest, so the tables' ALLOW entries become rules and DENY entries
 * are the default — except a DENY inside an ALLOW subtree, which Landlock cannot express (refused).
 * The rights of each access kind are the jail's (jail_landlock_access, supervisor/jail/jail.h).
 * Spec: Documentation/userspace-api/landlock.rst. */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"

/* The jail's rights (supervisor/jail/landlock.c) of a DOME_FILE_* mask. */
static uint64_t rights_for(unsigned access, int abi) {
  unsigned jail_access = (access & DOME_FILE_READ ? JAIL_ACCESS_READ : 0) |
                         (access & DOME_FILE_WRITE ? JAIL_ACCESS_WRITE : 0) |
                         (access & DOME_FILE_EXEC ? JAIL_ACCESS_EXEC : 0);
  return jail_landlock_access(jail_access, abi);
}

/* Is `inner` equal to or beneath the subtree `outer`? */
static bool path_within(const char *inner, const char *outer) {
  if (strcmp(outer, "/") == 0) return true;
  size_t n = strlen(outer);
  return strncmp(inner, outer, n) == 0 && (inner[n] == 0 || inner[n] == '/');
}

/* Index of an ALLOW subtree entry of the same access holding DENY entry i, or -1. */
static long enclosing_allow(const struct dome_rule_tables *tables, size_t i) {
  const struct dome_file_entry *deny = &tables->files[i];
  for (size_t j = 0; j < tables->file_count; j++) {
    const struct dome_file_entry *allow = &tables->files[j];
    if (allow->decision != DOME_DECISION_ALLOW || allow->match != DOME_MATCH_SUBTREE ||
        allow->access != deny->access)
      continue;
    if (!path_within(deny->path, allow->path)) continue;
    /* An equal-path SUBTREE deny is more specific than nothing; an EXACT deny on the allowed directory
     * itself, or anything beneath it, cannot be carved out. */
    if (strcmp(deny->path, allow->path) == 0 && deny->match == DOME_MATCH_SUBTREE) continue;
    return (long)j;
  }
  return -1;
}

static int refuse(const struct dome_rule_tables *tables, size_t i, long j, dome_error *err) {
  const struct dome_file_entry *deny = &tables->files[i];
  const char *policy = deny->policy_index != DOME_NO_POLICY && deny->policy_index < tables->policy_count
                           ? tables->policy_ids[deny->policy_index]
                           : "(none)";
  return dome_error_set(
      err, EOPNOTSUPP,
      "file entry %zu (deny %s %s, policy %s) lies inside allowed subtree %s (file entry %ld): "
      "Landlock cannot express it; pass --allow-degraded to run without it",
      i, dome_file_access_name(deny->access), deny->path, policy, tables->files[j].path, j);
}

int dome_landlock_check_tables(const struct dome_rule_tables *tables, dome_error *err) {
  for (size_t i = 0; i < tables->file_count; i++) {
    if (tables->files[i].decision != DOME_DECISION_DENY) continue;
    long j = enclosing_allow(tables, i);
    if (j >= 0) return refuse(tables, i, j, err);
  }
  return 0;
}

unsigned dome_landlock_inexpressible_count(const struct dome_rule_tables *tables) {
  unsigned count = 0;
  for (size_t i = 0; i < tables->file_count; i++)
    if (tables->files[i].decision == DOME_DECISION_DENY && enclosing_allow(tables, i) >= 0) count++;
  return count;
}

static unsigned jail_access_of(uint8_t access) {
  return access == DOME_FILE_READ    ? JAIL_ACCESS_READ
         : access == DOME_FILE_WRITE ? JAIL_ACCESS_WRITE
                                     : JAIL_ACCESS_EXEC;
}

void dome_landlock_path_rules_free(struct dome_landlock_path_rules *rules) {
  if (rules == NULL) return;
  for (size_t i = 0; i < rules->count; i++) free(rules->paths[i]);
  free(rules->paths);
  free(rules->rules);
  *rules = (struct dome_landlock_path_rules){0};
}

int dome_landlock_path_rules_from_tables(const struct dome_rule_tables *tables,
                                         struct dome_landlock_path_rules *rules_out, dome_error *err) {
  struct dome_landlock_path_rules p = {.rules = calloc(tables->file_count + 1, sizeof *p.rules),
                                       .paths = calloc(tables->file_count + 1, sizeof *p.paths)};
  *rules_out = (struct dome_landlock_path_rules){0};
  int rc = 0;
  if (p.rules == NULL || p.paths == NULL) rc = dome_error_set(err, ENOMEM, "Landlock path rules");
  for (size_t i = 0; i < tables->file_count && rc == 0; i++) {
    const struct dome_file_entry *e = &tables->files[i];
    if (e->decision != DOME_DECISION_ALLOW) continue;
    bool exact = e->match == DOME_MATCH_EXACT;
    struct jail_path_rule *rule = NULL;
    for (size_t k = 0; k < p.count && rule == NULL; k++)
      if (strcmp(p.rules[k].path, e->path) == 0 && p.rules[k].exact == exact) rule = &p.rules[k];
    if (rule == NULL) {
      if (p.count >= JAIL_MAX_PATH_RULES) {
        rc = dome_error_set(err, E2BIG, "more than %u allowed paths for Landlock", JAIL_MAX_PATH_RULES);
        break;
      }
      if ((p.paths[p.count] = strdup(e->path)) == NULL) {
        rc = dome_error_set(err, ENOMEM, "Landlock path rules");
        break;
      }
      rule = &p.rules[p.count];
      *rule = (struct jail_path_rule){.path = p.paths[p.count], .optional = true, .exact = exact};
      p.count++;
    }
    rule->access |= jail_access_of(e->access);
  }
  if (rc < 0) {
    dome_landlock_path_rules_free(&p);
    return rc;
  }
  *rules_out = p;
  return 0;
}

int dome_landlock_add_path(int ruleset_fd, const char *path, unsigned access, dome_error *err) {
  int abi = jail_landlock_abi();
  _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "landlock rule `%s`", path);
  struct stat st;
  if (fstat(fd, &st) != 0) return dome_error_set_errno(err, errno, "landlock rule `%s`", path);
  struct landlock_path_beneath_attr rule = {.allowed_access = rights_for(access, abi), .parent_fd = fd};
  if (!S_ISDIR(st.st_mode)) rule.allowed_access = jail_landlock_file_rights(rule.allowed_access);
  if (rule.allowed_access == 0) return 0;
  if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
    return dome_error_set_errno(err, errno, "landlock rule `%s`", path);
  return 0;
}

int dome_landlock_ruleset_from_tables(const struct dome_rule_tables *tables, bool allow_degraded,
                                      int *ruleset_fd_out, unsigned *degraded_out, dome_error *err) {
  unsigned degraded = 0;
  for (size_t i = 0; i < tables->file_count; i++) {
    if (tables->files[i].decision != DOME_DECISION_DENY) continue;
    long j = enclosing_allow(tables, i);
    if (j < 0) continue;
    if (!allow_degraded) return refuse(tables, i, j, err);
    degraded++;
  }
  int abi = jail_landlock_abi();
  if (abi < 1) return dome_error_set(err, EOPNOTSUPP, "Landlock is not available on this kernel");
  struct landlock_ruleset_attr attr = {.handled_access_fs = jail_landlock_handled_fs(abi)};
  _cleanup_close_ int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
  if (ruleset < 0) return dome_error_set_errno(err, errno, "create Landlock ruleset");
  for (size_t i = 0; i < tables->file_count; i++) {
    const struct dome_file_entry *e = &tables->files[i];
    if (e->decision != DOME_DECISION_ALLOW) continue;
    struct stat st;
    if (stat(e->path, &st) != 0) continue; /* nothing to grant beneath a missing path */
    /* Landlock rules are hierarchical: a rule on a directory grants everything beneath it. An EXACT allow on
     * a directory would over-grant, so it is left out (the directory itself stays denied: never wider). */
    if (e->match == DOME_MATCH_EXACT && S_ISDIR(st.st_mode)) continue;
    int r = dome_landlock_add_path(ruleset, e->path, e->access, err);
    if (r < 0) return dome_error_wrap(err, "file entry %zu", i);
  }
  if (degraded_out) *degraded_out = degraded;
  *ruleset_fd_out = dome_steal_fd(&ruleset);
  return 0;
}

int dome_landlock_restrict_self(int ruleset_fd, dome_error *err) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return dome_error_set_errno(err, errno, "set no_new_privs");
  if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) != 0)
    return dome_error_set_errno(err, errno, "landlock_restrict_self");
  return 0;
}
