/* A prepared jail's Python interpreter: which calls it can serve, and the message that hands it a call.
 *
 * The interpreter was started before its call (child.c, start_interpreter) with a fixed environment, so a
 * call may use it only where Python's start-up would have come out the same: the variables it reads while
 * it starts have the values it started with, and nothing Python reads at start-up lies in the call's
 * workspace. The rest of the call (environment, working directory, files, Landlock rules, code) travels in
 * one message on the call's stream, which python_bootstrap.py reads whole and takes (files, working
 * directory, Landlock, environment); then it waits for one more byte, the go (JAIL_PYTHON_GO), before it
 * runs the code.
 *
 * Message: the length of the rest as a little-endian 64-bit number, then a sequence of fields, each a
 * little-endian 64-bit length then that many bytes; numbers are decimal text. In order: the magic
 * "dome-python-call-2"; argv[0]; the code; the working directory; the
 * count of environment strings, then each "KEY=VALUE"; the count of workspace entries, then for each its
 * kind ("d", "f", "l"), its path as the jail sees it, its mode and its contents (a symlink's target); the
 * Landlock ABI, the ruleset attribute as landlock_create_ruleset(2) takes it, the count of rules, then for
 * each its path, the rights on a directory, the rights on a file, and "1"/"0" for optional and exact. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jail_python_bootstrap.h" /* $(BUILD)/gen: static const char jail_python_bootstrap[] */
#include "supervisor/jail/internal.h"
#include "supervisor/jail/landlock-abi.h"

const char *jail_python_bootstrap_source(void) {
  return jail_python_bootstrap;
}

const char *jail_python_waiting_program(void) {
  return jail_python_bootstrap;
}

/* A variable read while the interpreter starts, whose value must be the one it started with: by Python
 * (initconfig.c, pylifecycle.c, site.py: PYTHON*, _PYTHON*, the locale's LC_*, LANG, LANGUAGE, LOCPATH,
 * HOME, PATH, TZ), by the dynamic loader at exec (ld.so(8): every LD_*) and by glibc as it starts (its
 * tunables, GLIBC_TUNABLES and the MALLOC_* aliases; GCONV_PATH for the codecs the locale loads). */
static bool read_at_start(const char *entry, size_t name_length) {
  static const char *const names[] = {"LANG", "LANGUAGE", "HOME",       "PATH",
                                      "TZ",   "LOCPATH",  "GCONV_PATH", "GLIBC_TUNABLES"};
  static const char *const prefixes[] = {"PYTHON", "_PYTHON", "LC_", "LD_", "MALLOC_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (name_length >= strlen(prefixes[i]) && strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (name_length == strlen(names[i]) && strncmp(entry, names[i], name_length) == 0) return true;
  return false;
}

/* The entry of `env` named like `entry` (its first `name_length` bytes), or NULL. */
static const char *find_variable(char *const *env, const char *entry, size_t name_length) {
  for (size_t i = 0; env && env[i]; i++)
    if (strncmp(env[i], entry, name_length) == 0 && env[i][name_length] == '=') return env[i];
  return NULL;
}

/* Every start-up variable of `from` is in `other` with the same value. */
static bool start_variables_within(char *const *from, char *const *other) {
  for (size_t i = 0; from && from[i]; i++) {
    const char *sign = strchr(from[i], '=');
    size_t name_length = sign ? (size_t)(sign - from[i]) : strlen(from[i]);
    if (!read_at_start(from[i], name_length)) continue;
    const char *match = find_variable(other, from[i], name_length);
    if (match == NULL || strcmp(match, from[i]) != 0) return false;
  }
  return true;
}

bool jail_python_call_fits(const char *python, char *const *start_env, const struct jail_config *c) {
  if (python == NULL || c->argv == NULL || c->argv[0] == NULL || strcmp(c->argv[0], python) != 0 ||
      c->argv[1] == NULL || strcmp(c->argv[1], "-c") != 0 || c->argv[2] == NULL || c->argv[3] != NULL)
    return false;
  if (c->stdin_data || c->stdin_fd >= 0 || c->workspace_dir) return false;
  uint64_t bytes = 0;
  for (size_t i = 0; i < c->input_file_count; i++) {
    const char *path = c->input_files[i].path;
    if (path && strncmp(path, ".local", 6) == 0 && (path[6] == '/' || path[6] == '\0')) return false;
    bytes += c->input_files[i].length;
  }
  if (bytes > JAIL_PYTHON_MAX_INPUT_BYTES) return false;
  return start_variables_within(start_env, c->env) && start_variables_within(c->env, start_env);
}

struct message {
  char *data;
  size_t length, capacity;
  bool failed, too_big;
};

static void put(struct message *m, const void *bytes, size_t length) {
  if (m->failed) return;
  if (m->length + 8 + length > JAIL_CALL_MAX_BYTES) {
    m->failed = m->too_big = true;
    return;
  }
  if (m->length + 8 + length > m->capacity) {
    size_t capacity = m->capacity ? m->capacity : 4096;
    while (capacity < m->length + 8 + length) capacity *= 2;
    char *grown = realloc(m->data, capacity);
    if (grown == NULL) {
      m->failed = true;
      return;
    }
    m->data = grown;
    m->capacity = capacity;
  }
  uint64_t size = length;
  for (int i = 0; i < 8; i++) m->data[m->length + (size_t)i] = (char)(size >> (8 * i));
  if (length) memcpy(m->data + m->length + 8, bytes, length);
  m->length += 8 + length;
}

static void put_text(struct message *m, const char *text) {
  put(m, text, text ? strlen(text) : 0);
}

static void put_number(struct message *m, uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, value);
  put_text(m, text);
}

int jail_python_message(const struct jail_plan *plan, char **data, size_t *length, dome_error *err) {
  struct message m = {0};
  put(&m, NULL, 0); /* the whole message's length: filled in below */
  put_text(&m, "dome-python-call-2");
  put_text(&m, plan->argv[0]);
  put_text(&m, plan->argv[2]);
  put_text(&m, plan->working_directory);
  size_t env_count = 0;
  while (plan->envp && plan->envp[env_count]) env_count++;
  put_number(&m, env_count);
  for (size_t i = 0; i < env_count; i++) put_text(&m, plan->envp[i]);
  put_number(&m, plan->workspace_entry_count);
  for (size_t i = 0; i < plan->workspace_entry_count; i++) {
    const struct jail_plan_entry *e = &plan->workspace_entries[i];
    /* entries are planned in the child's staging view: the interpreter sees the final root */
    const char *path = e->path;
    if (strncmp(path, JAIL_STAGING "/", sizeof JAIL_STAGING) == 0) path += sizeof JAIL_STAGING - 1;
    put_text(&m, e->kind == PLAN_DIR ? "d" : e->kind == PLAN_SYMLINK ? "l" : "f");
    put_text(&m, path);
    put_number(&m, e->mode ? e->mode : e->kind == PLAN_DIR ? 0755 : 0644);
    if (e->kind == PLAN_SYMLINK)
      put_text(&m, e->target);
    else
      put(&m, e->data, e->kind == PLAN_FILE ? e->length : 0);
  }
  /* The ruleset attribute as child.c's landlock_prepare makes it, but for the signal scope. In a fresh jail
   * the program shares its Landlock domain with the jail's init, so it may signal pid 1 (which the kernel
   * then ignores, as for every init signalled from inside its pid namespace). The interpreter was forked
   * before its call: its domain is one below the init's, and a signal scope would refuse kill(1) with
   * EPERM. Without it the interpreter may signal exactly what a fresh program may: the init and its own
   * descendants, the only processes of its pid namespace. */
  struct dome_landlock_ruleset_attr attr = {.handled_access_fs =
                                                jail_landlock_handled_fs(plan->landlock_abi)};
  size_t attr_size = sizeof attr.handled_access_fs;
  if (plan->landlock_abi >= 6) {
    attr.scoped = DOME_LL_SCOPE_ABSTRACT_UNIX_SOCKET;
    attr_size = sizeof attr;
  }
  put_number(&m, plan->landlock_abi > 0 ? (uint64_t)plan->landlock_abi : 0);
  put(&m, &attr, attr_size);
  put_number(&m, plan->landlock_rule_count);
  for (size_t i = 0; i < plan->landlock_rule_count; i++) {
    const struct jail_landlock_rule *rule = &plan->landlock_rules[i];
    put_text(&m, rule->path);
    put_number(&m, rule->access);
    put_number(&m, jail_landlock_file_rights(rule->access));
    put_text(&m, rule->optional ? "1" : "0");
    put_text(&m, rule->exact ? "1" : "0");
  }
  if (m.failed) {
    free(m.data);
    return m.too_big ? dome_error_set(err, E2BIG, "hand the call to a prepared interpreter: over %llu bytes",
                                      JAIL_CALL_MAX_BYTES)
                     : dome_error_set(err, ENOMEM, "hand the call to a prepared interpreter: out of memory");
  }
  uint64_t rest = m.length - 8;
  for (int i = 0; i < 8; i++) m.data[i] = (char)(rest >> (8 * i));
  *data = m.data;
  *length = m.length;
  return 0;
}
