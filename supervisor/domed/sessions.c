/* Sandbox sessions: the MCP tools of a jail that outlives a call (docs/sessions.md).
 *
 * A session's jail is one domed_execute (supervisor/exec: kernel rules, Landlock, egress, the exec.*
 * records) run by the session's own thread with the launcher of supervisor/session as its program and
 * the session's lifetime as its timeout; its end (close_session, idle or lifetime expiry, domed's
 * shutdown, the kernel's death) is the end of that execution. Every call in a session was authorized by
 * call_tool (mcp:call with context.session_id) before it gets here; each is journalled with the session
 * id (session.created, session.exec, session.file, session.closed, session.expired) and answered only
 * once its event is durable. What goes back passes the tool's guard like stdout. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/common/utf8.h"
#include "supervisor/domed/domed.h"
#include "supervisor/exec/exec.h"
#include "supervisor/guards/guard.h"
#include "supervisor/jail/jail.h"
#include "supervisor/session/session.h"

#define KERNEL_START_MS 60000u     /* the kernel's first answer after the jail exists */
#define IMAGE_MAX_BYTES (4u << 20) /* one image, decoded */
#define RICH_MAX_BYTES (8u << 20)  /* all display data of one cell, as sent (base64) */
#define READ_FILE_MAX (4u << 20)   /* read_file */

struct domed_session {
  struct session_entry entry;
  struct domed *domed;
  pthread_t thread;
  bool thread_started;
  int end_fd; /* eventfd: written to end the jail; readable once the session is over */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  pid_t init_pid;
  bool jail_done;
  int root_fd, workspace_fd;
  char socket_dir[64], runner_path[96];
  struct session_kernel *kernel;
  pthread_mutex_t cell_lock; /* one cell at a time */
  /* the kernel layer of its jail (under lock): known once the jail started */
  bool kernel_known;
  uint32_t ruleset;           /* 0: every connect denied whatever the rules */
  const char *ruleset_reason; /* why 0: "quota" (egress denied) or "policy"; NULL: no kernel layer */
  int policy_version;         /* the rules version its kernel tables hold */
  pthread_mutex_t rules_lock; /* one rules update at a time */
  /* the jail's execution */
  mcp_identity identity;
  json_t *tool;
  json_t *arguments;
  struct control_quota quota;
  struct domed_rules *rules;
  char exec_id[24];
  uint64_t decision_ticket;
  char key[65];
};

static struct {
  struct session_table table;
  struct domed *domed;
  pthread_t reaper;
  bool reaper_started;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stopping;
} sessions = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static const char *const session_tool_names[] = {"create_session", "close_session",    "list_sessions",
                                                 "write_file",     "read_file",        "list_files",
                                                 "delete_file",    "snapshot_session", "fork_session"};

bool domed_session_handles(const char *name, json_t *arguments) {
  if (strcmp(name, DOMED_EXECUTE_TOOL) == 0) return json_object_get(arguments, "session_id") != NULL;
  for (size_t i = 0; i < sizeof session_tool_names / sizeof session_tool_names[0]; i++)
    if (strcmp(name, session_tool_names[i]) == 0) return true;
  return false;
}

size_t domed_sessions_live(void) {
  pthread_mutex_lock(&sessions.table.lock);
  size_t count = sessions.table.count;
  pthread_mutex_unlock(&sessions.table.lock);
  return count;
}

static json_t *tool_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
static json_t *tool_error(const char *format, ...) {
  char text[1200];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", 1);
}

static json_t *tool_result(json_t *structured) {
  char *text = json_dumps(structured, JSON_COMPACT);
  json_t *result = json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text", text ? text : "{}",
                             "structuredContent", structured, "isError", 0);
  free(text);
  return result;
}

static void sha256_hex(const void *data, size_t length, char hex[65]) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, data, length);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
}

/* ---- the jail of a session ----------------------------------------------------------------------- */

static void jail_started(void *context, pid_t init_pid, const struct domed_kernel_run *kernel_run) {
  struct domed_session *s = context;
  pthread_mutex_lock(&s->lock);
  s->init_pid = init_pid;
  s->kernel_known = true;
  s->ruleset = kernel_run->ruleset;
  s->ruleset_reason = kernel_run->level == NULL ? NULL : kernel_run->reason;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
}

static void signal_end(struct domed_session *s) {
  uint64_t one = 1;
  if (write(s->end_fd, &one, sizeof one) < 0) { /* an eventfd of ours: cannot fill up */
  }
}

static void *session_thread(void *context) {
  struct domed_session *s = context;
  struct domed_execution execution = {.identity = &s->identity,
                                      .tool = s->tool,
                                      .arguments = s->arguments,
                                      .quota = s->quota,
                                      .rules = s->rules,
                                      .exec_id = s->exec_id,
                                      .call = NULL,
                                      .decision_ticket = s->decision_ticket,
                                      .cancel_fd = s->end_fd,
                                      .on_jail_started = jail_started,
                                      .jail_context = s};
  int rpc_error = 0;
  dome_error err = {0};
  atomic_fetch_add(&s->domed->metrics.active_jails, 1);
  json_t *result = domed_execute(s->domed, &execution, &rpc_error, &err);
  atomic_fetch_sub(&s->domed->metrics.active_jails, 1);
  json_t *structured = json_object_get(result, "structuredContent");
  if (result == NULL || json_is_true(json_object_get(result, "isError")))
    domed_log("warn", "session", "session=%s msg=\"jail ended: %s\"", s->entry.id,
              result ? "execution failed" : err.message);
  else if (!json_is_true(json_object_get(structured, "cancelled")))
    domed_log("info", "session", "session=%s msg=\"jail ended by itself\" exit_code=%lld timed_out=%d",
              s->entry.id, (long long)json_integer_value(json_object_get(structured, "exit_code")),
              json_is_true(json_object_get(structured, "timed_out")));
  json_decref(result);
  pthread_mutex_lock(&s->lock);
  s->jail_done = true;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  signal_end(s); /* a cell waiting on the kernel learns that the session is over */
  pthread_mutex_lock(&sessions.table.lock);
  s->entry.lost = true;
  pthread_mutex_unlock(&sessions.table.lock);
  pthread_mutex_lock(&sessions.lock);
  pthread_cond_broadcast(&sessions.wake);
  pthread_mutex_unlock(&sessions.lock);
  return NULL;
}

static void session_free(struct domed_session *s) {
  if (s == NULL) return;
  session_kernel_close(s->kernel);
  if (s->root_fd >= 0) close(s->root_fd);
  if (s->workspace_fd >= 0) close(s->workspace_fd);
  if (s->end_fd >= 0) close(s->end_fd);
  json_decref(s->tool);
  json_decref(s->arguments);
  json_decref(s->entry.detail);
  domed_rules_release(s->rules);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->changed);
  pthread_mutex_destroy(&s->cell_lock);
  pthread_mutex_destroy(&s->rules_lock);
  sodium_memzero(s->key, sizeof s->key);
  free(s);
}

/* End the jail and wait for its execution to be recorded (exec.end). */
static void session_stop_jail(struct domed_session *s) {
  signal_end(s);
  if (s->thread_started) {
    pthread_join(s->thread, NULL);
    s->thread_started = false;
  }
}

/* The jail's root once its init has pivoted into it (its mount differs from the host's root): an fd that
 * keeps naming that root, whatever happens to the pid. Returns 0, -ETIMEDOUT, -ECHILD (the jail ended). */
static int wait_for_root(struct domed_session *s, uint64_t deadline_ms, dome_error *err) {
  struct statx host;
  if (statx(AT_FDCWD, "/", 0, STATX_MNT_ID, &host) < 0) return dome_error_set_errno(err, errno, "statx /");
  for (;;) {
    pthread_mutex_lock(&s->lock);
    pid_t pid = s->init_pid;
    bool done = s->jail_done;
    pthread_mutex_unlock(&s->lock);
    if (done) return dome_error_set(err, ECHILD, "the session's jail ended while it started");
    if (pid > 0) {
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
      int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
      struct statx root;
      if (fd >= 0 && statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &root) == 0 &&
          root.stx_mnt_id != host.stx_mnt_id) {
        int workspace = openat(fd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (workspace >= 0) {
          s->root_fd = fd;
          s->workspace_fd = workspace;
          return 0;
        }
      }
      if (fd >= 0) close(fd);
    }
    if (session_monotonic_ms() >= deadline_ms)
      return dome_error_set(err, ETIMEDOUT, "the session's jail did not start in time");
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

static char *session_program;
static pthread_once_t session_program_once = PTHREAD_ONCE_INIT;

static void make_session_program(void) {
  session_program = session_launcher_program(jail_python_waiting_program());
}

const char *domed_session_program(void) {
  pthread_once(&session_program_once, make_session_program);
  return session_program;
}

/* The kernel's connection file into the jail, once the launcher has made its socket directory. */
static int write_connection(struct domed_session *s, const char *connection, uint64_t deadline_ms,
                            dome_error *err) {
  for (;;) {
    int rc = session_connection_write(s->root_fd, connection, err);
    if (rc != -ENOENT) return rc;
    pthread_mutex_lock(&s->lock);
    bool done = s->jail_done;
    pthread_mutex_unlock(&s->lock);
    if (done) return dome_error_set(err, ECHILD, "the session's jail ended while it started");
    if (session_monotonic_ms() >= deadline_ms)
      return dome_error_set(err, ETIMEDOUT, "the session's launcher did not start in time");
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

/* ---- journal -------------------------------------------------------------------------------------- */

static json_t *session_event(const char *type, const struct domed_session *s, const mcp_identity *identity) {
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", type, "session_id", s->entry.id, "agent",
                            s->entry.agent, "gateway", identity ? identity->gateway : s->identity.gateway);
  if (identity && identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  return event;
}

/* Append `event` (taken) and make it durable with the call's decision. */
static int journal_call_event(struct domed *domed, const struct domed_execution *execution, json_t *event,
                              dome_error *err) {
  if (event == NULL) return dome_error_set(err, ENOMEM, "session event");
  if (execution && execution->call) domed_audit_set_call(event, execution->call);
  if (execution && execution->exec_id) json_object_set_new(event, "exec_id", json_string(execution->exec_id));
  uint64_t ticket = 0;
  int rc = domed_audit_append(domed, event, &ticket, err);
  json_decref(event);
  if (rc == 0)
    rc = domed_audit_sync_span(domed, execution ? execution->decision_ticket : ticket, ticket, err);
  return rc;
}

/* ---- ending a session ---------------------------------------------------------------------------- */

static void session_end(struct domed_session *s, const char *type, const char *reason) {
  signal_end(s); /* a running cell or process returns at once */
  session_table_wait_idle(&sessions.table, &s->entry);
  session_stop_jail(s);
  json_t *event = session_event(type, s, NULL);
  json_object_set_new(event, "reason", json_string(reason));
  json_object_set_new(event, "jail_exec_id", json_string(s->exec_id));
  json_object_set_new(event, "duration_ms",
                      json_integer((json_int_t)(session_monotonic_ms() - s->entry.created_mono_ms)));
  dome_error err = {0};
  uint64_t ticket = 0;
  if (domed_audit_append(s->domed, event, &ticket, &err) < 0 || domed_audit_sync(s->domed, ticket, &err) < 0)
    domed_log("error", "session", "session=%s msg=\"%s not journalled: %s\"", s->entry.id, type, err.message);
  json_decref(event);
  session_free(s);
}

static void *reaper_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&sessions.lock);
  while (!sessions.stopping) {
    pthread_mutex_unlock(&sessions.lock);
    const char *reason = NULL;
    struct session_entry *entry;
    while ((entry = session_table_take_expired(&sessions.table, session_monotonic_ms(), &reason)))
      session_end(entry->owner, strcmp(reason, "lost") == 0 ? "session.closed" : "session.expired",
                  strcmp(reason, "lost") == 0 ? "jail ended" : reason);
    /* a session cannot outlive its agent's suspension or revocation */
    json_t *live = session_table_list(&sessions.table, NULL, session_monotonic_ms());
    size_t i;
    json_t *item;
    json_array_foreach(live, i, item) {
      json_t *agent =
          control_agent_get(sessions.domed->store, json_string_value(json_object_get(item, "agent")));
      const char *status = json_string_value(json_object_get(agent, "status"));
      const char *why = agent == NULL                                ? "agent removed"
                        : status && strcmp(status, "suspended") == 0 ? "agent suspended"
                        : status && strcmp(status, "revoked") == 0   ? "agent revoked"
                                                                     : NULL;
      json_decref(agent);
      struct session_entry *gone =
          why ? session_table_take(&sessions.table, json_string_value(json_object_get(item, "session_id")),
                                   NULL)
              : NULL;
      if (gone) session_end(gone->owner, "session.closed", why);
    }
    json_decref(live);
    pthread_mutex_lock(&sessions.lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    if (!sessions.stopping) pthread_cond_timedwait(&sessions.wake, &sessions.lock, &until);
  }
  pthread_mutex_unlock(&sessions.lock);
  return NULL;
}

int domed_sessions_start(struct domed *domed, dome_error *err) {
  session_table_init(&sessions.table);
  sessions.domed = domed;
  sessions.stopping = false;
  int rc = pthread_create(&sessions.reaper, NULL, reaper_main, NULL);
  if (rc != 0) return dome_error_set(err, rc, "session reaper thread");
  sessions.reaper_started = true;
  return 0;
}

void domed_sessions_stop(struct domed *domed) {
  (void)domed;
  if (!sessions.reaper_started) return;
  pthread_mutex_lock(&sessions.lock);
  sessions.stopping = true;
  pthread_cond_broadcast(&sessions.wake);
  pthread_mutex_unlock(&sessions.lock);
  pthread_join(sessions.reaper, NULL);
  sessions.reaper_started = false;
  struct session_entry *entry;
  while ((entry = session_table_take(&sessions.table, NULL, NULL)))
    session_end(entry->owner, "session.closed", "shutdown");
  session_table_destroy(&sessions.table);
}

/* ---- guards --------------------------------------------------------------------------------------- */

struct call_guard {
  struct guard *guard;
  void *handle;
  json_t *secrets;
  char *classification;
};

static int call_guard_acquire(struct domed *domed, json_t *tool, struct call_guard *g, dome_error *err) {
  *g = (struct call_guard){0};
  g->secrets = control_tool_secret_env(domed->store, DOMED_BUILTIN_TOOL);
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (out) {
    const char *field;
    json_t *class_;
    int n = 0;
    json_object_foreach(json_object_get(tool, "field_classification"), field, class_)
        fprintf(out, "%s%s=%s", n++ ? "," : "", field, json_string_value(class_));
    fclose(out);
  }
  g->classification = text;
  size_t count = json_object_size(g->secrets), i = 0;
  struct guard_secret *secrets = calloc(count + 1, sizeof *secrets);
  if (g->secrets == NULL || text == NULL || secrets == NULL) {
    free(secrets);
    return dome_error_set(err, ENOMEM, "guard");
  }
  const char *key;
  json_t *value;
  json_object_foreach(g->secrets, key, value) secrets[i++] =
      (struct guard_secret){key, json_string_value(value), json_string_length(value)};
  struct guard_options options = {.classification = text, .secrets = secrets, .secret_count = count};
  int rc = domed_guard_acquire(&options, &g->guard, &g->handle, err);
  free(secrets);
  return rc;
}

static void call_guard_release(struct call_guard *g) {
  if (g->handle) domed_guard_release(g->handle);
  json_decref(g->secrets);
  free(g->classification);
}

/* Redact every string of `value` in place; the findings summarised per (field, detector) into
 * `redactions` (an array). Fail closed: -errno and nothing may go back. */
static int redact(struct call_guard *g, json_t *value, json_t *redactions, size_t *count, dome_error *err) {
  struct guard_findings findings;
  memset(&findings, 0, sizeof findings);
  int rc = guard_redact_json(g->guard, value, &findings, err);
  if (rc == 0) {
    for (size_t i = 0; i < findings.count; i++) {
      json_t *entry = NULL, *candidate;
      size_t k;
      json_array_foreach(redactions, k, candidate) {
        if (strcmp(json_string_value(json_object_get(candidate, "field")), findings.items[i].field) == 0 &&
            strcmp(json_string_value(json_object_get(candidate, "detector")), findings.items[i].detector) ==
                0)
          entry = candidate;
      }
      if (entry == NULL) {
        entry = json_pack("{s:s,s:s,s:i}", "field", findings.items[i].field, "detector",
                          findings.items[i].detector, "count", 0);
        json_array_append_new(redactions, entry);
      }
      json_object_set_new(entry, "count",
                          json_integer(json_integer_value(json_object_get(entry, "count")) + 1));
    }
    if (count) *count += findings.count;
  }
  guard_findings_free(&findings);
  return rc;
}

/* ---- create / close / list ---------------------------------------------------------------------- */

static json_t *limits_of(const struct control_quota *quota) {
  return json_pack("{s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:I}", "memory_bytes", (json_int_t)quota->memory_bytes,
                   "cpus", quota->cpus, "pids", (json_int_t)quota->pids, "timeout_ms",
                   (json_int_t)quota->timeout_ms, "workspace_bytes", (json_int_t)quota->workspace_bytes,
                   "output_bytes", (json_int_t)quota->output_bytes, "idle_timeout_ms",
                   (json_int_t)quota->session_idle_ms, "lifetime_ms", (json_int_t)quota->session_lifetime_ms);
}

static void iso_time(uint64_t ms, char out[32]) {
  time_t seconds = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&seconds, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* What the kernel holds for the session's cgroup (read back from its files, not from the quota):
 * {memory_bytes, cpus, pids}, null members where unlimited. New reference, or NULL with *err. */
static json_t *cgroup_held(pid_t init_pid, dome_error *err) {
  struct jail_cgroup_limits held;
  if (jail_cgroup_limits_of(init_pid, &held, err) < 0) {
    dome_error_wrap(err, "the session's cgroup limits cannot be read back");
    return NULL;
  }
  json_t *object =
      json_pack("{s:o,s:o,s:o}", "memory_bytes",
                held.memory_bytes >= (uint64_t)INT64_MAX / 2 ? json_null()
                                                             : json_integer((json_int_t)held.memory_bytes),
                "cpus", held.cpus > 0 ? json_real(held.cpus) : json_null(), "pids",
                held.pids == UINT64_MAX ? json_null() : json_integer((json_int_t)held.pids));
  if (object == NULL) dome_error_set(err, ENOMEM, "cgroup limits");
  return object;
}

static json_t *session_rules_apply(struct domed *domed, struct domed_session *s, struct domed_rules *rules);

/* Where a session's start went, in milliseconds since create_session began (`started_ms`, CLOCK_REALTIME):
 * jail (its root visible to domed), python (the launcher's interpreter running), runner (the process
 * runner serving), imported (ipykernel imported), ready (the kernel answered on shell and iopub). The
 * launcher's marks come from its phases.json, read with the file tools' rules from the jail's /tmp before
 * any code of the agent ran; a mark it did not leave is left out. New reference. */
static json_t *start_phases(struct domed_session *s, uint64_t started_ms, uint64_t jail_ms,
                            uint64_t ready_ms) {
  json_t *phases = json_pack("{s:I,s:I}", "jail", (json_int_t)jail_ms, "ready", (json_int_t)ready_ms);
  int tmp = openat(s->root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  char *text = NULL;
  size_t length = 0;
  dome_error ignored = {0};
  if (tmp >= 0 && session_file_read(tmp, ".dome-session/phases.json", 4096, &text, &length, &ignored) == 0) {
    json_t *marks = json_loadb(text, length, 0, NULL);
    static const char *const names[] = {"python", "runner", "imported"};
    static const char *const keys[] = {"start", "runner", "imported"};
    for (size_t i = 0; i < 3; i++) {
      double at = json_number_value(json_object_get(marks, keys[i])) * 1000.0;
      if (at >= (double)started_ms && at < (double)started_ms + KERNEL_START_MS)
        json_object_set_new(phases, names[i], json_integer((json_int_t)(at - (double)started_ms)));
    }
    json_decref(marks);
  }
  free(text);
  if (tmp >= 0) close(tmp);
  return phases;
}

static json_t *create_session(struct domed *domed, const struct domed_execution *execution, int *rpc_error,
                              dome_error *err) {
  json_t *arguments = execution->arguments;
  const char *capability = json_string_value(json_object_get(execution->tool, "capability"));
  if (capability == NULL) capability = DOMED_BUILTIN_CAPABILITY;
  const char *key;
  json_t *value;
  json_object_foreach(arguments, key,
                      value) if (strcmp(key, "idle_timeout_s") != 0 &&
                                 strcmp(key, "image") !=
                                     0) return tool_error("invalid arguments: unknown argument `%.64s`", key);
  json_t *image = json_object_get(arguments, "image");
  if (image && (!json_is_string(image) || strcmp(json_string_value(image), domed->config.image) != 0))
    return tool_error("invalid arguments: `image`: only `%s` is served here", domed->config.image);
  /* the session's whole cgroup: --session-memory/--session-cpus/--session-pids where set */
  struct control_quota quota;
  control_quota_for_session(&execution->quota, &quota);
  json_t *idle = json_object_get(arguments, "idle_timeout_s");
  if (idle) {
    if (!json_is_number(idle) || json_number_value(idle) <= 0 || json_number_value(idle) > 86400)
      return tool_error("invalid arguments: `idle_timeout_s` must be a number in (0, 86400]");
    uint64_t ms = (uint64_t)(json_number_value(idle) * 1000.0);
    if (ms < quota.session_idle_ms) quota.session_idle_ms = ms; /* lowers the quota, never raises it */
  }
  if (quota.sessions == 0)
    return tool_error(
        "session quota reached: capability `%s` allows no sessions (dome quotas set --sessions)", capability);
  struct domed_session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    dome_error_set(err, ENOMEM, "session");
    return NULL;
  }
  s->domed = domed;
  s->root_fd = s->workspace_fd = -1;
  s->end_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->changed, NULL);
  pthread_mutex_init(&s->cell_lock, NULL);
  pthread_mutex_init(&s->rules_lock, NULL);
  s->identity = *execution->identity;
  s->tool = json_incref(execution->tool);
  s->quota = quota;
  /* the jail lives for the session: its timeout is the lifetime (the reaper ends it first) */
  s->quota.timeout_ms = quota.session_lifetime_ms + 5000;
  s->rules = execution->rules;
  if (s->rules) atomic_fetch_add(&s->rules->refs, 1);
  s->policy_version = s->rules ? s->rules->version : 0;
  s->decision_ticket = execution->decision_ticket;
  snprintf(s->exec_id, sizeof s->exec_id, "%s", execution->exec_id);
  session_new_id(s->entry.id);
  snprintf(s->entry.agent, sizeof s->entry.agent, "%s", execution->identity->agent);
  snprintf(s->entry.capability, sizeof s->entry.capability, "%s", capability);
  s->entry.created_ms = session_realtime_ms();
  s->entry.created_mono_ms = s->entry.last_used_ms = session_monotonic_ms();
  s->entry.idle_ms = quota.session_idle_ms;
  s->entry.lifetime_ms = quota.session_lifetime_ms;
  s->entry.owner = s;
  s->entry.detail = json_pack("{s:o}", "limits", limits_of(&quota));
  s->entry.busy = 1; /* until it answers: not idle, not listed as usable */
  /* the connection file (with the session's key) goes into the jail's /tmp once it runs, never through
   * the execution's arguments (journalled) */
  _cleanup_free_ char *connection = session_connection_file(s->key);
  const char *program = domed_session_program();
  s->arguments = program ? json_pack("{s:s,s:s,s:o}", "language", "python", "code", program, "env",
                                     session_launcher_env())
                         : NULL;
  if (s->end_fd < 0 || s->arguments == NULL || s->entry.detail == NULL || connection == NULL) {
    if (connection) sodium_memzero(connection, strlen(connection));
    session_free(s);
    dome_error_set(err, ENOMEM, "session");
    return NULL;
  }
  dome_error quota_err = {0};
  if (session_table_add(&sessions.table, &s->entry, (unsigned)quota.sessions, &quota_err) < 0) {
    json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "session.refused", "agent", s->entry.agent,
                              "gateway", s->identity.gateway, "reason", "quota", "capability", capability);
    int rc = journal_call_event(domed, execution, event, err);
    session_free(s);
    if (rc < 0) return NULL;
    return tool_error("%s", quota_err.message);
  }
  uint64_t started = session_monotonic_ms(), started_real = session_realtime_ms();
  int rc = pthread_create(&s->thread, NULL, session_thread, s);
  if (rc != 0) {
    session_table_take(&sessions.table, s->entry.id, NULL);
    session_free(s);
    dome_error_set(err, rc, "session thread");
    return NULL;
  }
  s->thread_started = true;
  dome_error start_err = {0};
  rc = wait_for_root(s, started + KERNEL_START_MS, &start_err);
  uint64_t jail_ms = session_monotonic_ms() - started;
  json_t *held = NULL;
  if (rc == 0 && (held = cgroup_held(s->init_pid, &start_err)) == NULL) rc = dome_error_code(&start_err);
  if (held) {
    pthread_mutex_lock(&sessions.table.lock);
    json_object_set_new(s->entry.detail, "cgroup", held);
    pthread_mutex_unlock(&sessions.table.lock);
  }
  if (rc == 0) rc = write_connection(s, connection, started + KERNEL_START_MS, &start_err);
  sodium_memzero(connection, strlen(connection));
  if (rc == 0) {
    snprintf(s->socket_dir, sizeof s->socket_dir, "/proc/self/fd/%d" SESSION_SOCKET_DIR, s->root_fd);
    snprintf(s->runner_path, sizeof s->runner_path, "%s/run", s->socket_dir);
    /* the kernel's answer, or the session's end (its jail failed) or the caller's cancellation */
    rc = session_kernel_connect(s->socket_dir, s->key, KERNEL_START_MS, s->end_fd, &s->kernel, &start_err);
    if (rc == -ECANCELED && mcp_call_cancel_fd(execution->call) >= 0) rc = -ECHILD;
  }
  if (rc == 0) { /* rules applied while the jail started reach it now */
    struct domed_rules *active = domed_rules_acquire(domed);
    json_t *update = session_rules_apply(domed, s, active);
    domed_rules_release(active);
    if (update && strcmp(json_string_value(json_object_get(update, "outcome")), "closed") == 0)
      rc = dome_error_set(&start_err, ESTALE, "%s", json_string_value(json_object_get(update, "reason")));
    json_decref(update);
  }
  uint64_t ready_ms = session_monotonic_ms() - started;
  if (rc < 0) {
    if (session_table_take(&sessions.table, s->entry.id, NULL) == NULL) {
      /* taken meanwhile (shutdown, `dome sessions kill`): its taker ends it once this call lets go */
      session_table_put(&sessions.table, &s->entry);
      return tool_error("create_session failed: %s", start_err.message);
    }
    s->entry.busy = 0;
    session_stop_jail(s);
    json_t *event = session_event("session.closed", s, execution->identity);
    json_object_set_new(event, "reason", json_string("start failed"));
    domed_audit_set_text(event, "error", start_err.message, strlen(start_err.message));
    json_object_set_new(event, "jail_exec_id", json_string(s->exec_id));
    session_free(s);
    if (journal_call_event(domed, execution, event, err) < 0) return NULL;
    return tool_error("create_session failed: %s", start_err.message);
  }
  json_t *phases = start_phases(s, started_real, jail_ms, ready_ms);
  char expires[32];
  iso_time(s->entry.created_ms + quota.session_lifetime_ms, expires);
  json_t *limits = limits_of(&quota);
  json_t *event = session_event("session.created", s, execution->identity);
  json_object_set_new(event, "capability", json_string(capability));
  json_object_set_new(event, "image", json_string(domed->config.image));
  json_object_set(event, "limits", limits);
  json_object_set(event, "cgroup", held);
  json_object_set_new(event, "jail_exec_id", json_string(s->exec_id));
  json_object_set_new(event, "ready_ms", json_integer((json_int_t)ready_ms));
  json_object_set(event, "phases_ms", phases);
  if (journal_call_event(domed, execution, event, err) < 0) {
    session_table_take(&sessions.table, s->entry.id, NULL);
    s->entry.busy = 0;
    session_end(s, "session.closed", "journal failure");
    json_decref(limits);
    json_decref(phases);
    *rpc_error = MCP_INTERNAL_ERROR;
    return NULL;
  }
  json_t *structured = json_pack("{s:s,s:s,s:o,s:O,s:s,s:I,s:o}", "session_id", s->entry.id, "image",
                                 domed->config.image, "limits", limits, "cgroup", held, "expires_at", expires,
                                 "ready_ms", (json_int_t)ready_ms, "phases_ms", phases);
  session_table_put(&sessions.table, &s->entry);
  return tool_result(structured);
}

static const char *session_id_of(json_t *arguments) {
  return json_string_value(json_object_get(arguments, "session_id"));
}

static json_t *close_session(struct domed *domed, const struct domed_execution *execution, dome_error *err) {
  const char *id = session_id_of(execution->arguments);
  if (id == NULL) return tool_error("invalid arguments: `session_id` (a string) is required");
  struct session_entry *entry = session_table_take(&sessions.table, id, execution->identity->agent);
  if (entry == NULL)
    return tool_error("no session `%.64s` of this agent (closed, expired or never made)", id);
  struct domed_session *s = entry->owner;
  /* the close is the caller's step: journalled with its call, then the session's end */
  json_t *event = session_event("session.close", s, execution->identity);
  if (journal_call_event(domed, execution, event, err) < 0) {
    session_end(s, "session.closed", "client");
    return NULL;
  }
  session_end(s, "session.closed", "client");
  return tool_result(json_pack("{s:s,s:b}", "session_id", id, "closed", 1));
}

static json_t *list_sessions(struct domed *domed, const struct domed_execution *execution, dome_error *err) {
  json_t *list = session_table_list(&sessions.table, execution->identity->agent, session_monotonic_ms());
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:I}", "type", "session.list", "agent", execution->identity->agent, "gateway",
                execution->identity->gateway, "count", (json_int_t)json_array_size(list));
  if (journal_call_event(domed, execution, event, err) < 0) {
    json_decref(list);
    return NULL;
  }
  return tool_result(json_pack("{s:o}", "sessions", list));
}

/* ---- execute_code in a session ------------------------------------------------------------------- */

/* An image bundle entry: base64 text of at most IMAGE_MAX_BYTES decoded. *bytes (malloc'd) decoded. */
static int decode_image(json_t *value, unsigned char **bytes, size_t *length) {
  const char *text = json_string_value(value);
  if (text == NULL) return -EINVAL;
  size_t text_length = json_string_length(value);
  if (text_length / 4 * 3 > IMAGE_MAX_BYTES + 3) return -EFBIG;
  unsigned char *buffer = malloc(text_length / 4 * 3 + 4);
  if (buffer == NULL) return -ENOMEM;
  if (sodium_base642bin(buffer, text_length / 4 * 3 + 4, text, text_length, "\n\r ", length, NULL,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    free(buffer);
    return -EINVAL;
  }
  *bytes = buffer;
  return 0;
}

static bool images_allowed(json_t *tool) {
  const char *class_ =
      json_string_value(json_object_get(json_object_get(tool, "field_classification"), "images"));
  return class_ == NULL || strcmp(class_, "DENY") != 0;
}

static json_t *execute_in_session(struct domed *domed, const struct domed_execution *execution,
                                  struct domed_session *s, int *rpc_error, dome_error *err) {
  json_t *arguments = execution->arguments;
  const char *language = json_string_value(json_object_get(arguments, "language"));
  const char *code = json_string_value(json_object_get(arguments, "code"));
  if (json_object_get(arguments, "files") || json_object_get(arguments, "env") ||
      json_object_get(arguments, "stdin"))
    return tool_error(
        "invalid arguments: `files`, `env` and `stdin` are not taken in a session (use write_file)");
  struct call_guard guard;
  if (call_guard_acquire(domed, execution->tool, &guard, err) < 0) {
    call_guard_release(&guard);
    return NULL;
  }
  uint64_t output_bytes = execution->quota.mcp_output_bytes ? execution->quota.mcp_output_bytes
                                                            : domed->config.mcp_output_limit_bytes;
  if (output_bytes > execution->quota.output_bytes) output_bytes = execution->quota.output_bytes;
  json_t *cell = NULL;
  dome_error run_err = {0};
  int rc;
  pthread_mutex_lock(&s->cell_lock);
  int cancel_fd = mcp_call_cancel_fd(execution->call);
  if (strcmp(language, "python") == 0) {
    struct session_cell_options options = {.timeout_ms = execution->quota.timeout_ms,
                                           .cancel_fd = cancel_fd,
                                           .end_fd = s->end_fd,
                                           .output_bytes = output_bytes,
                                           .rich_bytes = RICH_MAX_BYTES};
    rc = session_kernel_execute(s->kernel, code, &options, &cell, &run_err);
  } else {
    /* bash, sh, javascript: a new process of the same jail per call */
    char *argv[] = {(char *)exec_interpreter(language), (char *)exec_code_option(language), (char *)code,
                    NULL};
    rc = session_run_process(s->runner_path, argv, execution->quota.timeout_ms, cancel_fd, output_bytes,
                             &cell, &run_err);
  }
  pthread_mutex_unlock(&s->cell_lock);
  char code_hex[65];
  sha256_hex(code, strlen(code), code_hex);
  json_t *event = session_event("session.exec", s, execution->identity);
  json_object_set_new(event, "language", json_string(language));
  json_object_set_new(event, "code_sha256", json_string(code_hex));
  json_object_set_new(event, "code_bytes", json_integer((json_int_t)strlen(code)));
  if (rc < 0) {
    domed_audit_set_text(event, "error", run_err.message, strlen(run_err.message));
    call_guard_release(&guard);
    if (journal_call_event(domed, execution, event, err) < 0) return NULL;
    if (rc == -EPIPE) signal_end(s); /* the kernel is gone: the reaper closes the session */
    return tool_error("execution in session %s failed: %s", s->entry.id, run_err.message);
  }
  /* the images out of the bundles (bytes to the blob store, digests journalled); the rest as text */
  json_t *images = json_array(), *rich = json_array();
  json_t *blocks = json_array();
  bool allow_images = images_allowed(execution->tool);
  size_t images_refused = 0;
  size_t i;
  json_t *output;
  json_array_foreach(json_object_get(cell, "outputs"), i, output) {
    json_t *data = json_object_get(output, "data");
    bool imaged = false;
    static const char *const image_types[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};
    for (size_t t = 0; t < sizeof image_types / sizeof image_types[0] && !imaged; t++) {
      json_t *value = json_object_get(data, image_types[t]);
      if (value == NULL) continue;
      imaged = true;
      unsigned char *bytes = NULL;
      size_t length = 0;
      if (!allow_images || decode_image(value, &bytes, &length) < 0) {
        images_refused++;
        continue;
      }
      char hex[65];
      sha256_hex(bytes, length, hex);
      dome_error blob_err = {0};
      int kept = domed_audit_put_blob(domed, s->entry.capability, execution->quota.blob_bytes,
                                      (const char *)bytes, length, hex, &blob_err);
      free(bytes);
      if (kept < 0) {
        json_decref(images);
        json_decref(rich);
        json_decref(blocks);
        json_decref(cell);
        json_decref(event);
        call_guard_release(&guard);
        *err = blob_err;
        return NULL;
      }
      json_array_append_new(images, json_pack("{s:s,s:s,s:I,s:b}", "mime_type", image_types[t], "sha256", hex,
                                              "bytes", (json_int_t)length, "stored", kept == 1));
      json_array_append_new(
          blocks, json_pack("{s:s,s:O,s:s}", "type", "image", "data", value, "mimeType", image_types[t]));
    }
    if (imaged) continue;
    static const char *const text_types[] = {"image/svg+xml", "text/html", "application/json",
                                             "text/markdown", "text/plain"};
    for (size_t t = 0; t < sizeof text_types / sizeof text_types[0]; t++) {
      json_t *value = json_object_get(data, text_types[t]);
      if (value == NULL) continue;
      char *text = json_is_string(value) ? strdup(json_string_value(value)) : json_dumps(value, JSON_COMPACT);
      json_array_append_new(rich,
                            json_pack("{s:s,s:s,s:s?}", "mime_type", text_types[t], "kind",
                                      json_string_value(json_object_get(output, "kind")), "text", text));
      free(text);
      break;
    }
  }
  json_t *structured = json_pack(
      "{s:O,s:O,s:I,s:i,s:O,s:b,s:I,s:[],s:{},s:O,s:[],s:s,s:O,s:O,s:O,s:o,s:o,s:I}", "stdout",
      json_object_get(cell, "stdout"), "stderr", json_object_get(cell, "stderr"), "exit_code",
      json_object_get(cell, "exit_code") ? json_integer_value(json_object_get(cell, "exit_code"))
      : strcmp(json_string_value(json_object_get(cell, "status")) ?: "ok", "ok") == 0 ? 0
                                                                                      : 1,
      "signal", (int)json_integer_value(json_object_get(cell, "signal")), "timed_out",
      json_object_get(cell, "timed_out"), "oom_killed", 0, "duration_ms",
      json_integer_value(json_object_get(cell, "duration_ms")), "output_paths", "env_vars", "truncated",
      json_object_get(cell, "truncated"), "redactions", "session_id", s->entry.id, "cancelled",
      json_object_get(cell, "cancelled"), "interrupted", json_object_get(cell, "interrupted") ?: json_false(),
      "status", json_object_get(cell, "status") ?: json_string("ok"), "outputs", rich, "images", images,
      "execution_count", json_integer_value(json_object_get(cell, "execution_count")));
  if (json_object_get(cell, "error")) json_object_set(structured, "error", json_object_get(cell, "error"));
  if (images_refused)
    json_object_set_new(structured, "images_refused", json_integer((json_int_t)images_refused));
  json_decref(cell);
  size_t redaction_count = 0;
  json_t *redactions = json_object_get(structured, "redactions");
  /* fail closed: nothing unredacted goes back */
  if (structured == NULL || redact(&guard, structured, redactions, &redaction_count, err) < 0) {
    json_decref(structured);
    json_decref(blocks);
    json_decref(event);
    call_guard_release(&guard);
    if (structured == NULL) dome_error_set(err, ENOMEM, "session result");
    return NULL;
  }
  call_guard_release(&guard);
  atomic_fetch_add(&domed->metrics.redactions, redaction_count);
  if (json_is_true(json_object_get(structured, "timed_out"))) atomic_fetch_add(&domed->metrics.timeouts, 1);
  char stdout_hex[65], stderr_hex[65];
  const char *out_text = json_string_value(json_object_get(structured, "stdout"));
  const char *err_text = json_string_value(json_object_get(structured, "stderr"));
  sha256_hex(out_text ?: "", out_text ? strlen(out_text) : 0, stdout_hex);
  sha256_hex(err_text ?: "", err_text ? strlen(err_text) : 0, stderr_hex);
  json_object_set_new(event, "status",
                      json_string(json_string_value(json_object_get(structured, "status")) ?: ""));
  json_object_set(event, "exit_code", json_object_get(structured, "exit_code"));
  json_object_set(event, "timed_out", json_object_get(structured, "timed_out"));
  json_object_set(event, "interrupted", json_object_get(structured, "interrupted"));
  json_object_set(event, "cancelled", json_object_get(structured, "cancelled"));
  json_object_set(event, "duration_ms", json_object_get(structured, "duration_ms"));
  json_object_set_new(event, "stdout_sha256", json_string(stdout_hex));
  json_object_set_new(event, "stderr_sha256", json_string(stderr_hex));
  json_object_set(event, "images", images);
  json_object_set(event, "redactions", redactions);
  if (journal_call_event(domed, execution, event, err) < 0) {
    json_decref(structured);
    json_decref(blocks);
    *rpc_error = MCP_INTERNAL_ERROR;
    return NULL;
  }
  /* content: the whole result as text (as a one-shot call answers), the text outputs, then the images */
  char *text = json_dumps(structured, JSON_COMPACT);
  json_t *content = json_pack("[{s:s,s:s}]", "type", "text", "text", text ? text : "{}");
  free(text);
  json_array_foreach(json_object_get(structured, "outputs"), i, output) json_array_append_new(
      content, json_pack("{s:s,s:O}", "type", "text", "text", json_object_get(output, "text")));
  json_array_extend(content, blocks);
  json_decref(blocks);
  return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", structured, "isError", 0);
}

/* ---- file tools ---------------------------------------------------------------------------------- */

static json_t *file_tool(struct domed *domed, const char *name, const struct domed_execution *execution,
                         struct domed_session *s, dome_error *err) {
  json_t *arguments = execution->arguments;
  const char *path = json_string_value(json_object_get(arguments, "path"));
  const char *key;
  json_t *value;
  json_object_foreach(arguments, key, value) {
    bool known =
        strcmp(key, "session_id") == 0 || strcmp(key, "path") == 0 ||
        (strcmp(name, "write_file") == 0 && (strcmp(key, "content") == 0 || strcmp(key, "encoding") == 0)) ||
        (strcmp(name, "read_file") == 0 && strcmp(key, "encoding") == 0);
    if (!known) return tool_error("invalid arguments: unknown argument `%.64s`", key);
  }
  if (path == NULL && strcmp(name, "list_files") != 0)
    return tool_error("invalid arguments: `path` (a string relative to /workspace) is required");
  json_t *event = session_event("session.file", s, execution->identity);
  json_object_set_new(event, "mcp_tool", json_string(name));
  if (path) domed_audit_set_text(event, "path", path, strlen(path));
  dome_error tool_err = {0};
  json_t *structured = NULL;
  int rc = 0;
  if (strcmp(name, "write_file") == 0) {
    json_t *content = json_object_get(arguments, "content");
    const char *encoding = json_string_value(json_object_get(arguments, "encoding"));
    if (!json_is_string(content)) {
      json_decref(event);
      return tool_error("invalid arguments: `content` (a string) is required");
    }
    if (encoding && strcmp(encoding, "utf-8") != 0 && strcmp(encoding, "base64") != 0) {
      json_decref(event);
      return tool_error("invalid arguments: `encoding` must be utf-8 or base64");
    }
    const char *data = json_string_value(content);
    size_t length = json_string_length(content);
    unsigned char *decoded = NULL;
    if (encoding && strcmp(encoding, "base64") == 0) {
      decoded = malloc(length / 4 * 3 + 4);
      if (decoded == NULL || sodium_base642bin(decoded, length / 4 * 3 + 4, data, length, "\n\r ", &length,
                                               NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
        free(decoded);
        json_decref(event);
        return tool_error("invalid arguments: `content` is not valid base64");
      }
      data = (const char *)decoded;
    }
    char hex[65];
    sha256_hex(data, length, hex);
    json_object_set_new(event, "sha256", json_string(hex));
    json_object_set_new(event, "bytes", json_integer((json_int_t)length));
    rc = session_file_write(s->workspace_fd, path, data, length, &tool_err);
    free(decoded);
    if (rc == 0)
      structured =
          json_pack("{s:s,s:s,s:I}", "session_id", s->entry.id, "path", path, "bytes", (json_int_t)length);
  } else if (strcmp(name, "read_file") == 0) {
    char *data = NULL;
    size_t length = 0;
    rc = session_file_read(s->workspace_fd, path, READ_FILE_MAX, &data, &length, &tool_err);
    if (rc == 0) {
      char hex[65];
      sha256_hex(data, length, hex);
      json_object_set_new(event, "sha256", json_string(hex));
      json_object_set_new(event, "bytes", json_integer((json_int_t)length));
      size_t clean_length = 0;
      char *clean = dome_utf8_sanitize(data, length, false, &clean_length);
      bool text = clean && clean_length == length && memcmp(clean, data, length) == 0 &&
                  memchr(data, 0, length) == NULL;
      free(clean);
      if (text) {
        structured = json_pack("{s:s,s:s,s:s,s:s,s:I}", "session_id", s->entry.id, "path", path, "encoding",
                               "utf-8", "files", data, "bytes", (json_int_t)length);
      } else {
        size_t size = sodium_base64_encoded_len(length, sodium_base64_VARIANT_ORIGINAL);
        char *encoded = malloc(size);
        if (encoded)
          sodium_bin2base64(encoded, size, (unsigned char *)data, length, sodium_base64_VARIANT_ORIGINAL);
        structured = json_pack("{s:s,s:s,s:s,s:s?,s:I}", "session_id", s->entry.id, "path", path, "encoding",
                               "base64", "content", encoded, "bytes", (json_int_t)length);
        free(encoded);
      }
      free(data);
    }
  } else if (strcmp(name, "list_files") == 0) {
    bool truncated = false;
    json_t *entries = session_file_list(s->workspace_fd, path, &truncated, &tool_err);
    if (entries == NULL)
      rc = dome_error_code(&tool_err);
    else
      structured =
          json_pack("{s:s,s:o,s:b}", "session_id", s->entry.id, "entries", entries, "truncated", truncated);
  } else {
    rc = session_file_delete(s->workspace_fd, path, &tool_err);
    if (rc == 0)
      structured = json_pack("{s:s,s:s,s:b}", "session_id", s->entry.id, "path", path, "deleted", 1);
  }
  if (rc < 0) {
    domed_audit_set_text(event, "error", tool_err.message, strlen(tool_err.message));
    if (journal_call_event(domed, execution, event, err) < 0) return NULL;
    return tool_error("%s: %s", name, tool_err.message);
  }
  if (structured == NULL) {
    json_decref(event);
    dome_error_set(err, ENOMEM, "%s", name);
    return NULL;
  }
  /* a file's text is output like stdout: redacted by the class of the `files` field */
  struct call_guard guard;
  json_t *redactions = json_array();
  if (call_guard_acquire(domed, execution->tool, &guard, err) < 0 ||
      redact(&guard, structured, redactions, NULL, err) < 0) {
    call_guard_release(&guard);
    json_decref(structured);
    json_decref(redactions);
    json_decref(event);
    return NULL;
  }
  call_guard_release(&guard);
  json_t *file_text = json_object_get(structured, "files");
  if (file_text) {
    json_object_set(structured, "content", file_text);
    json_object_del(structured, "files");
  }
  json_object_set_new(structured, "redactions", json_incref(redactions));
  json_object_set_new(event, "redactions", redactions);
  if (journal_call_event(domed, execution, event, err) < 0) {
    json_decref(structured);
    return NULL;
  }
  return tool_result(structured);
}

static json_t *snapshot_session(struct domed *domed, const struct domed_execution *execution,
                                struct domed_session *s, dome_error *err);
static json_t *fork_session(struct domed *domed, const struct domed_execution *execution, int *rpc_error,
                            dome_error *err);

/* Whether tool `name` on an open session runs code or changes what the session holds: its decision is
 * then made durable before it acts (docs/threat-model.md, "The audit rule"), as exec.start is before a
 * one-shot program. read_file and list_files change nothing; their answer waits for their own event. */
static bool acts_on_session(const char *name) {
  return strcmp(name, DOMED_EXECUTE_TOOL) == 0 || strcmp(name, "write_file") == 0 ||
         strcmp(name, "delete_file") == 0 || strcmp(name, "snapshot_session") == 0;
}

json_t *domed_session_call(struct domed *domed, const char *name, const struct domed_execution *execution,
                           int *rpc_error, dome_error *err) {
  *rpc_error = MCP_INTERNAL_ERROR;
  json_t *result = NULL;
  if (strcmp(name, "create_session") == 0) {
    result = create_session(domed, execution, rpc_error, err);
  } else if (strcmp(name, "close_session") == 0) {
    result = close_session(domed, execution, err);
  } else if (strcmp(name, "list_sessions") == 0) {
    result = list_sessions(domed, execution, err);
  } else if (strcmp(name, "fork_session") == 0) {
    result = fork_session(domed, execution, rpc_error, err);
  } else {
    const char *id = session_id_of(execution->arguments);
    struct session_entry *entry = NULL;
    if (id == NULL) {
      result = tool_error("invalid arguments: `session_id` (a string) is required");
    } else if ((entry = session_table_get(&sessions.table, id, execution->identity->agent)) == NULL) {
      /* another agent's session is as unknown as one never made */
      json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "session.unknown", "agent",
                                execution->identity->agent, "gateway", execution->identity->gateway,
                                "mcp_tool", name, "reason", "no such session of this agent");
      domed_audit_set_text(event, "session_id", id, strlen(id));
      if (journal_call_event(domed, execution, event, err) < 0) return NULL;
      *rpc_error = 0;
      return tool_error("no session `%.64s` of this agent (closed, expired or never made)", id);
    } else {
      struct domed_session *s = entry->owner;
      if (acts_on_session(name) && domed_audit_sync(domed, execution->decision_ticket, err) < 0)
        result = NULL; /* the decision is not on record: nothing runs, nothing changes */
      else if (strcmp(name, DOMED_EXECUTE_TOOL) == 0)
        result = execute_in_session(domed, execution, s, rpc_error, err);
      else if (strcmp(name, "snapshot_session") == 0)
        result = snapshot_session(domed, execution, s, err);
      else
        result = file_tool(domed, name, execution, s, err);
      session_table_put(&sessions.table, entry);
    }
  }
  /* an answer leaves only with its decision on record: a tool error with no event of its own (no
   * session_id, close_session of a session never made) waits for it here; a decision already durable
   * returns at once */
  if (result && domed_audit_sync(domed, execution->decision_ticket, err) < 0) {
    json_decref(result);
    result = NULL;
    *rpc_error = MCP_INTERNAL_ERROR;
  }
  if (result) *rpc_error = 0;
  return result;
}

/* ---- snapshots (file-only) ------------------------------------------------------------------------ */

/* The file of a snapshot: <state_dir>/snapshots/<16 hex digits of the agent's SHA-256>-<id>.zst, so that
 * an agent's snapshots are counted and found by name, and an id names one agent's snapshot only. */
static int snapshot_path(struct domed *domed, const char *agent, const char *id, char *path, size_t size,
                         dome_error *err) {
  char dir[1100], hex[65];
  snprintf(dir, sizeof dir, "%s/snapshots", domed->config.state_dir);
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) return dome_error_set_errno(err, errno, "snapshots `%s`", dir);
  sha256_hex(agent, strlen(agent), hex);
  hex[16] = '\0';
  if (id)
    snprintf(path, size, "%s/%s-%s.zst", dir, hex, id);
  else
    snprintf(path, size, "%s/%s-", dir, hex); /* the prefix */
  return 0;
}

/* The agent's snapshots beneath `prefix` (snapshot_path's): how many, and their bytes as stored. */
static void snapshot_usage(const char *prefix, unsigned *count, uint64_t *bytes) {
  char dir[1300];
  snprintf(dir, sizeof dir, "%s", prefix);
  *count = 0;
  *bytes = 0;
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return;
  *slash = '\0';
  const char *name_prefix = slash + 1;
  size_t prefix_length = strlen(name_prefix), length;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, name_prefix, prefix_length) != 0 || (length = strlen(e->d_name)) < 4 ||
        strcmp(e->d_name + length - 4, ".zst") != 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) continue;
    (*count)++;
    *bytes += (uint64_t)st.st_size;
  }
  if (d) closedir(d);
}

/* ---- the kernel's state: CRIU ---------------------------------------------------------------------- */

#define CRIU_PATH "/usr/sbin/criu"

static pthread_once_t criu_once = PTHREAD_ONCE_INIT;
static char criu_reason[512];

/* Whether this host can checkpoint a process tree at all: `criu check` (CRIU's own probe of the kernel
 * features it needs, https://criu.org/Checking_the_kernel), run once, at most 10 s. The reason a
 * session's kernel is not kept goes to criu_reason. */
static void criu_probe(void) {
  if (access(CRIU_PATH, X_OK) != 0) {
    snprintf(criu_reason, sizeof criu_reason, "CRIU is not installed (%s: Debian's criu)", CRIU_PATH);
    return;
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
    snprintf(criu_reason, sizeof criu_reason, "criu check: pipe: %s", strerror(errno));
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  char *const argv[] = {CRIU_PATH, "check", NULL};
  char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", NULL};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, CRIU_PATH, &actions, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  char output[4096];
  size_t used = 0;
  uint64_t deadline = session_monotonic_ms() + 10000;
  while (rc == 0 && used + 1 < sizeof output) {
    uint64_t now = session_monotonic_ms();
    struct pollfd p = {.fd = pipe_fds[0], .events = POLLIN};
    if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    ssize_t n = read(pipe_fds[0], output + used, sizeof output - 1 - used);
    if (n <= 0) break;
    used += (size_t)n;
  }
  output[used] = '\0';
  close(pipe_fds[0]);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  if (rc != 0) {
    snprintf(criu_reason, sizeof criu_reason, "criu check could not run: %s", strerror(rc));
    return;
  }
  /* the most telling line: the first error CRIU names that is not only its exit status */
  const char *why = NULL;
  for (char *line = strtok(output, "\n"); line; line = strtok(NULL, "\n"))
    if (strstr(line, "Error") && !strstr(line, "exited, status")) {
      why = strstr(line, "): ") ? strstr(line, "): ") + 3 : line;
      break;
    }
  struct utsname host;
  uname(&host);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    snprintf(
        criu_reason, sizeof criu_reason,
        "criu check passes on this host, but dome does not checkpoint a session's kernel inside its jail");
  else
    snprintf(criu_reason, sizeof criu_reason, "criu check fails on kernel %.64s: %.300s", host.release,
             why ? why : "no reason given");
}

const char *domed_sessions_kernel_state_reason(void) {
  pthread_once(&criu_once, criu_probe);
  return criu_reason;
}

/* ---- snapshots (files; the kernel's state where CRIU can keep it) ------------------------------------ */

/* Write `meta` beside a snapshot (<prefix><id>.json, 0600, temporary file then rename): what
 * `dome sessions snapshots` lists without opening the archives. */
static int snapshot_meta_write(const char *path, json_t *meta, dome_error *err) {
  char temporary[1300];
  if (snprintf(temporary, sizeof temporary, "%s.tmp", path) >= (int)sizeof temporary)
    return dome_error_set(err, ENAMETOOLONG, "snapshot path `%.200s...`: too long", path);
  int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return dome_error_set_errno(err, errno, "snapshot `%s`", temporary);
  char *text = json_dumps(meta, JSON_COMPACT);
  size_t length = text ? strlen(text) : 0;
  bool written = text && write(fd, text, length) == (ssize_t)length && fsync(fd) == 0;
  free(text);
  close(fd);
  if (!written || rename(temporary, path) < 0) {
    int e = errno ? errno : EIO;
    unlink(temporary);
    return dome_error_set_errno(err, e, "snapshot `%s`", path);
  }
  return 0;
}

static json_t *snapshot_session(struct domed *domed, const struct domed_execution *execution,
                                struct domed_session *s, dome_error *err) {
  json_t *name = json_object_get(execution->arguments, "name");
  json_t *kernel = json_object_get(execution->arguments, "kernel");
  const char *key;
  json_t *value;
  json_object_foreach(execution->arguments, key, value) {
    if (strcmp(key, "session_id") != 0 && strcmp(key, "name") != 0 && strcmp(key, "kernel") != 0)
      return tool_error("invalid arguments: unknown argument `%.64s`", key);
  }
  if (name && (!json_is_string(name) || json_string_length(name) > 128))
    return tool_error("invalid arguments: `name` must be a string of at most 128 bytes");
  if (kernel && !json_is_boolean(kernel)) return tool_error("invalid arguments: `kernel` must be a boolean");
  const char *kernel_reason = domed_sessions_kernel_state_reason();
  json_t *event = session_event("session.snapshot", s, execution->identity);
  if (json_is_true(kernel)) { /* asked for what this host cannot do: refused, nothing written */
    char message[700];
    snprintf(message, sizeof message,
             "the interpreter's state cannot be kept on this host (%s); without `kernel` the snapshot keeps "
             "/workspace only",
             kernel_reason);
    domed_audit_set_text(event, "error", message, strlen(message));
    if (journal_call_event(domed, execution, event, err) < 0) return NULL;
    return tool_error("snapshot_session: %s", message);
  }
  const struct control_quota *quota = &execution->quota;
  char prefix[1200], path[1200] = "", meta_path[1300] = "", id[SESSION_ID_SIZE + 1];
  if (snapshot_path(domed, s->entry.agent, NULL, prefix, sizeof prefix, err) < 0) {
    json_decref(event);
    return NULL;
  }
  unsigned count = 0;
  uint64_t stored = 0;
  snapshot_usage(prefix, &count, &stored);
  dome_error tool_err = {0};
  int rc = 0;
  if (count >= quota->snapshots)
    rc =
        dome_error_set(&tool_err, EDQUOT,
                       "snapshot quota reached: agent `%s` keeps %u of %llu snapshots allowed for capability "
                       "`%s` (dome quotas set --snapshots; dome sessions snapshots --delete)",
                       s->entry.agent, count, (unsigned long long)quota->snapshots, s->entry.capability);
  unsigned char bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  memcpy(id, "snap_", 5);
  sodium_bin2hex(id + 5, sizeof id - 5, bytes, sizeof bytes);
  json_object_set_new(event, "snapshot_id", json_string(id));
  if (rc == 0 && snapshot_path(domed, s->entry.agent, id, path, sizeof path, err) < 0) {
    json_decref(event);
    return NULL;
  }
  if (path[0]) snprintf(meta_path, sizeof meta_path, "%.*s.json", (int)(strlen(path) - 4), path);
  char created[32];
  uint64_t created_ms = session_realtime_ms();
  iso_time(created_ms, created);
  json_t *header =
      json_pack("{s:s,s:s,s:s,s:s,s:s?}", "snapshot_id", id, "agent", s->entry.agent, "session_id",
                s->entry.id, "created_at", created, "name", json_string_value(name));
  json_t *summary = NULL;
  if (rc == 0) {
    pthread_mutex_lock(&s->cell_lock); /* no cell writes while the files are read */
    rc = session_snapshot_write(s->workspace_fd, path, s->quota.workspace_bytes, header, &summary, &tool_err);
    pthread_mutex_unlock(&s->cell_lock);
  }
  uint64_t this_stored = (uint64_t)json_integer_value(json_object_get(summary, "stored_bytes"));
  if (rc == 0 && stored + this_stored > quota->snapshot_bytes) {
    unlink(path);
    rc = dome_error_set(&tool_err, EDQUOT,
                        "snapshot byte quota reached: agent `%s` keeps %llu bytes of snapshots and this one "
                        "takes %llu, %llu allowed for capability `%s` (dome quotas set --snapshot-bytes)",
                        s->entry.agent, (unsigned long long)stored, (unsigned long long)this_stored,
                        (unsigned long long)quota->snapshot_bytes, s->entry.capability);
  }
  json_t *kernel_state = json_pack("{s:b,s:s}", "kept", 0, "reason", kernel_reason);
  if (rc == 0) {
    json_t *meta = json_deep_copy(header);
    json_object_update(meta, summary);
    json_object_set(meta, "kernel_state", kernel_state);
    json_object_set_new(meta, "capability", json_string(s->entry.capability));
    json_object_set_new(meta, "created_at_ms", json_integer((json_int_t)created_ms));
    rc = snapshot_meta_write(meta_path, meta, &tool_err);
    json_decref(meta);
    if (rc < 0) unlink(path);
  }
  json_decref(header);
  if (rc < 0) {
    json_decref(summary);
    json_decref(kernel_state);
    domed_audit_set_text(event, "error", tool_err.message, strlen(tool_err.message));
    if (journal_call_event(domed, execution, event, err) < 0) return NULL;
    return tool_error("snapshot_session: %s", tool_err.message);
  }
  json_object_update(event, summary);
  json_object_set(event, "kernel_state", kernel_state);
  if (journal_call_event(domed, execution, event, err) < 0) {
    unlink(path);
    unlink(meta_path);
    json_decref(summary);
    json_decref(kernel_state);
    return NULL;
  }
  json_t *structured =
      json_pack("{s:s,s:s,s:o}", "snapshot_id", id, "session_id", s->entry.id, "kernel_state", kernel_state);
  json_object_update(structured, summary);
  json_decref(summary);
  return tool_result(structured);
}

static json_t *fork_session(struct domed *domed, const struct domed_execution *execution, int *rpc_error,
                            dome_error *err) {
  const char *id = json_string_value(json_object_get(execution->arguments, "snapshot_id"));
  if (id == NULL || strncmp(id, "snap_", 5) != 0 || strlen(id) != SESSION_ID_SIZE || strchr(id, '/'))
    return tool_error("invalid arguments: `snapshot_id` must be a snapshot id from snapshot_session");
  const char *key;
  json_t *value;
  json_object_foreach(execution->arguments, key,
                      value) if (strcmp(key, "snapshot_id") !=
                                 0) return tool_error("invalid arguments: unknown argument `%.64s`", key);
  char path[1200];
  if (snapshot_path(domed, execution->identity->agent, id, path, sizeof path, err) < 0) return NULL;
  dome_error tool_err = {0};
  json_t *archive = session_snapshot_read(path, execution->quota.workspace_bytes, &tool_err);
  if (archive == NULL) /* another agent's snapshot is as unknown as one never made */
    return tool_error("no snapshot `%.64s` of this agent", id);
  struct domed_execution create = *execution;
  json_t *no_arguments = json_object();
  create.arguments = no_arguments;
  json_t *created = create_session(domed, &create, rpc_error, err);
  json_decref(no_arguments);
  const char *sid =
      json_string_value(json_object_get(json_object_get(created, "structuredContent"), "session_id"));
  if (created == NULL || sid == NULL) {
    json_decref(archive);
    return created;
  }
  struct session_entry *entry = session_table_get(&sessions.table, sid, execution->identity->agent);
  int rc = entry ? session_snapshot_restore(archive, ((struct domed_session *)entry->owner)->workspace_fd,
                                            &tool_err)
                 : dome_error_set(&tool_err, ENOENT, "the new session ended");
  if (entry) session_table_put(&sessions.table, entry);
  json_t *header = json_object_get(archive, "header");
  json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:O?,s:I}", "type", "session.forked", "session_id", sid,
                            "agent", execution->identity->agent, "snapshot_id", id, "from_session",
                            json_object_get(header, "session_id"), "files",
                            (json_int_t)json_array_size(json_object_get(archive, "files")));
  json_decref(archive);
  if (rc < 0) domed_audit_set_text(event, "error", tool_err.message, strlen(tool_err.message));
  if (journal_call_event(domed, execution, event, err) < 0) {
    json_decref(created);
    return NULL;
  }
  if (rc < 0) {
    json_decref(created);
    return tool_error("fork_session: session %s made, but its files: %s", sid, tool_err.message);
  }
  json_object_set_new(json_object_get(created, "structuredContent"), "snapshot_id", json_string(id));
  /* the text block repeats structuredContent */
  char *text = json_dumps(json_object_get(created, "structuredContent"), JSON_COMPACT);
  json_object_set_new(created, "content",
                      json_pack("[{s:s,s:s}]", "type", "text", "text", text ? text : "{}"));
  free(text);
  return created;
}

/* ---- rules changes -------------------------------------------------------------------------------- */

static bool same_path_rules(const struct domed_path_rules *a, const struct domed_path_rules *b) {
  size_t count_a, count_b;
  const struct jail_path_rule *rules_a = domed_path_rules_list(a, &count_a);
  const struct jail_path_rule *rules_b = domed_path_rules_list(b, &count_b);
  if (count_a != count_b) return false;
  for (size_t i = 0; i < count_a; i++)
    if (strcmp(rules_a[i].path, rules_b[i].path) != 0 || rules_a[i].access != rules_b[i].access ||
        rules_a[i].optional != rules_b[i].optional || rules_a[i].exact != rules_b[i].exact)
      return false;
  return true;
}

/* Bring the kernel rules of session `s` (held) to `rules`. The network tables of its jail's ruleset are
 * swapped in place; its Landlock path rules were fixed when the jail started (Landlock only ever narrows a
 * running process), so a version whose file rules differ from them ends the session. Returns NULL when
 * there is nothing to do (already that version, or its jail is not started yet: create_session then
 * brings it up to date), else the outcome: "updated", "unchanged" (its jail denies every connect whatever
 * the rules: *reason says why) or "closed" (*reason: the session must end). *previous: the version its
 * tables held. */
static const char *session_rules_update(struct domed *domed, struct domed_session *s,
                                        struct domed_rules *rules, char *reason, size_t size, int *previous) {
  pthread_mutex_lock(&s->lock);
  bool known = s->kernel_known;
  uint32_t ruleset = s->ruleset;
  const char *ruleset_reason = s->ruleset_reason;
  pthread_mutex_unlock(&s->lock);
  *previous = s->policy_version;
  if (!known || rules == NULL || s->policy_version == rules->version) return NULL;
  reason[0] = '\0';
  json_t *record = control_agent_get(domed->store, s->entry.agent);
  json_t *capabilities =
      json_is_array(json_object_get(record, "capabilities")) ? json_object_get(record, "capabilities") : NULL;
  json_t *owned = capabilities ? json_incref(capabilities) : json_array();
  json_decref(record);
  struct domed_principal principal = {
      .agent = s->entry.agent, .capabilities = owned, .gateway = s->identity.gateway};
  struct domed_path_rules *before = NULL, *after = NULL;
  dome_error err = {0};
  const char *outcome = "updated";
  if (domed_kernel_path_rules(domed, &principal, s->rules, &before, &err) < 0 ||
      domed_kernel_path_rules(domed, &principal, rules, &after, &err) < 0) {
    outcome = "closed";
    snprintf(reason, size, "rules changed: the file rules of version %d cannot be enforced: %.400s",
             rules->version, err.message);
  } else if (!same_path_rules(before, after)) {
    outcome = "closed";
    snprintf(reason, size,
             "rules changed: version %d changes the file rules, which a running jail cannot take (Landlock)",
             rules->version);
  } else if (ruleset == 0) {
    outcome = "unchanged";
    snprintf(reason, size, "%s",
             ruleset_reason == NULL ? "no kernel layer on this host: the jail has no network"
             : strcmp(ruleset_reason, "quota") == 0
                 ? "the capability's quota denies egress: every connect is denied"
                 : "the jail started without network rules: every connect is denied");
    s->policy_version = rules->version;
  } else {
    int rc = rules->kernel_policies
                 ? domed_kernel_update_ruleset(domed, ruleset, &principal, rules, &err)
                 : dome_error_set(&err, EINVAL, "version %d has no kernel rules", rules->version);
    if (rc < 0) {
      outcome = "closed";
      snprintf(reason, size, "rules changed: the kernel rules of version %d could not be installed: %.400s",
               rules->version, err.message);
    } else {
      s->policy_version = rules->version;
    }
  }
  domed_path_rules_release(before);
  domed_path_rules_release(after);
  json_decref(owned);
  return outcome;
}

/* Update one session (held) and journal it; ends it when its rules cannot change. The outcome as
 * {session_id, agent, outcome, policy_version, previous_version, reason?}, or NULL when nothing was to do. */
static json_t *session_rules_apply(struct domed *domed, struct domed_session *s, struct domed_rules *rules) {
  char reason[600];
  int previous = 0;
  pthread_mutex_lock(&s->rules_lock);
  const char *outcome = session_rules_update(domed, s, rules, reason, sizeof reason, &previous);
  pthread_mutex_unlock(&s->rules_lock);
  if (outcome == NULL) return NULL;
  json_t *summary =
      json_pack("{s:s,s:s,s:s,s:i,s:i}", "session_id", s->entry.id, "agent", s->entry.agent, "outcome",
                outcome, "policy_version", rules->version, "previous_version", previous);
  if (reason[0]) json_object_set_new(summary, "reason", json_string(reason));
  json_t *event = session_event("session.rules", s, NULL);
  json_object_update(event, summary);
  json_object_set_new(event, "jail_exec_id", json_string(s->exec_id));
  dome_error err = {0};
  uint64_t ticket = 0;
  if (domed_audit_append(domed, event, &ticket, &err) < 0 || domed_audit_sync(domed, ticket, &err) < 0)
    domed_log("error", "session", "session=%s msg=\"session.rules not journalled: %s\"", s->entry.id,
              err.message);
  json_decref(event);
  domed_log(strcmp(outcome, "closed") == 0 ? "warn" : "info", "session", "session=%s rules=%d outcome=%s%s%s",
            s->entry.id, rules->version, outcome, reason[0] ? " reason=" : "", reason);
  return summary;
}

json_t *domed_sessions_rules_changed(struct domed *domed) {
  json_t *result = json_array();
  struct domed_rules *rules = domed_rules_acquire(domed);
  json_t *live = session_table_list(&sessions.table, NULL, session_monotonic_ms());
  size_t i;
  json_t *item;
  json_array_foreach(live, i, item) {
    const char *id = json_string_value(json_object_get(item, "session_id"));
    struct session_entry *entry = session_table_hold(&sessions.table, id);
    if (entry == NULL) continue; /* ended meanwhile */
    json_t *summary = session_rules_apply(domed, entry->owner, rules);
    session_table_unhold(&sessions.table, entry);
    if (summary == NULL) continue;
    if (strcmp(json_string_value(json_object_get(summary, "outcome")), "closed") == 0) {
      struct session_entry *gone = session_table_take(&sessions.table, id, NULL);
      if (gone)
        session_end(gone->owner, "session.closed", json_string_value(json_object_get(summary, "reason")));
    }
    json_array_append_new(result, summary);
  }
  json_decref(live);
  domed_rules_release(rules);
  return result;
}

/* ---- control commands ---------------------------------------------------------------------------- */

/* Every snapshot in the state directory (of `agent`, NULL: all), from their .json beside them, oldest
 * first: [{snapshot_id, agent, capability, session_id, name?, created_at, created_at_ms, files,
 * directories, bytes, stored_bytes, kernel_state}]. */
static json_t *snapshots_list(struct domed *domed, const char *agent, dome_error *err) {
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/snapshots", domed->config.state_dir);
  json_t *list = json_array();
  DIR *d = opendir(dir);
  if (d == NULL && errno != ENOENT) {
    json_decref(list);
    dome_error_set_errno(err, errno, "snapshots `%s`", dir);
    return NULL;
  }
  size_t length;
  for (struct dirent *e; d && (e = readdir(d));) {
    if ((length = strlen(e->d_name)) < 5 || strcmp(e->d_name + length - 5, ".json") != 0) continue;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    json_t *meta = fd >= 0 ? json_loadfd(fd, 0, NULL) : NULL;
    if (fd >= 0) close(fd);
    const char *owner = json_string_value(json_object_get(meta, "agent"));
    if (owner && (agent == NULL || strcmp(owner, agent) == 0)) json_array_append(list, meta);
    json_decref(meta);
  }
  if (d) closedir(d);
  /* oldest first (created_at_ms: CLOCK_REALTIME milliseconds) */
  size_t n = json_array_size(list);
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0; j--) {
      json_int_t a = json_integer_value(json_object_get(json_array_get(list, j - 1), "created_at_ms"));
      json_int_t b = json_integer_value(json_object_get(json_array_get(list, j), "created_at_ms"));
      if (a <= b) break;
      json_t *earlier = json_incref(json_array_get(list, j - 1));
      json_array_set(list, j - 1, json_array_get(list, j));
      json_array_set_new(list, j, earlier);
    }
  return json_pack("{s:o}", "snapshots", list);
}

/* Delete the snapshot `snapshot_id` (the operator's step): its archive and its .json, journalled as
 * session.snapshot_deleted. -ENOENT when there is none, -EINVAL for an id that is not one. */
static json_t *snapshot_delete(struct domed *domed, json_t *args, dome_error *err) {
  const char *id = json_string_value(json_object_get(args, "snapshot_id"));
  if (id == NULL || strncmp(id, "snap_", 5) != 0 || strlen(id) != SESSION_ID_SIZE ||
      strspn(id + 5, "0123456789abcdef") != SESSION_ID_SIZE - 5) {
    dome_error_set(err, EINVAL, "--delete: `%.64s` is not a snapshot id (snap_ and 32 hex digits)",
                   id ? id : "");
    return NULL;
  }
  json_t *listed = snapshots_list(domed, NULL, err);
  if (listed == NULL) return NULL;
  json_t *found = NULL, *entry;
  size_t i;
  json_array_foreach(json_object_get(listed, "snapshots"), i, entry) {
    if (strcmp(json_string_value(json_object_get(entry, "snapshot_id")) ?: "", id) == 0)
      found = json_incref(entry);
  }
  json_decref(listed);
  if (found == NULL) {
    dome_error_set(err, ENOENT, "no snapshot `%s`", id);
    return NULL;
  }
  char path[1200], meta_path[1300];
  const char *agent = json_string_value(json_object_get(found, "agent"));
  if (snapshot_path(domed, agent, id, path, sizeof path, err) < 0) {
    json_decref(found);
    return NULL;
  }
  snprintf(meta_path, sizeof meta_path, "%.*s.json", (int)(strlen(path) - 4), path);
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:O?,s:s}", "type", "session.snapshot_deleted", "snapshot_id", id, "agent",
                agent, "session_id", json_object_get(found, "session_id"), "by", "operator");
  uint64_t ticket = 0;
  int rc = domed_audit_append(domed, event, &ticket, err);
  if (rc == 0) rc = domed_audit_sync(domed, ticket, err);
  json_decref(event);
  if (rc == 0 && ((unlink(path) < 0 && errno != ENOENT) || unlink(meta_path) < 0))
    rc = dome_error_set_errno(err, errno, "snapshot `%s`", id);
  json_decref(found);
  if (rc < 0) return NULL;
  return json_pack("{s:s,s:b}", "snapshot_id", id, "deleted", 1);
}

json_t *domed_sessions_command(struct domed *domed, const char *command, json_t *args, dome_error *err) {
  (void)domed;
  const char *agent = json_string_value(json_object_get(args, "agent"));
  const char *id = json_string_value(json_object_get(args, "session_id"));
  if (strcmp(command, "sessions.snapshots") == 0) return snapshots_list(domed, agent, err);
  if (strcmp(command, "sessions.snapshot_delete") == 0) return snapshot_delete(domed, args, err);
  if (strcmp(command, "sessions.list") == 0)
    return json_pack("{s:o}", "sessions", session_table_list(&sessions.table, agent, session_monotonic_ms()));
  if (id == NULL) {
    dome_error_set(err, EINVAL, "%s: --id (a session id) is required", command);
    return NULL;
  }
  if (strcmp(command, "sessions.show") == 0) {
    json_t *all = session_table_list(&sessions.table, NULL, session_monotonic_ms());
    json_t *found = NULL, *entry;
    size_t i;
    json_array_foreach(all, i, entry) if (strcmp(json_string_value(json_object_get(entry, "session_id")),
                                                 id) == 0) found = json_incref(entry);
    json_decref(all);
    if (found == NULL) dome_error_set(err, ENOENT, "no live session `%.64s`", id);
    return found;
  }
  if (strcmp(command, "sessions.kill") == 0) {
    struct session_entry *entry = session_table_take(&sessions.table, id, NULL);
    if (entry == NULL) {
      dome_error_set(err, ENOENT, "no live session `%.64s`", id);
      return NULL;
    }
    session_end(entry->owner, "session.closed", "operator");
    return json_pack("{s:s,s:b}", "session_id", id, "closed", 1);
  }
  dome_error_set(err, EINVAL, "unknown command `%s`", command);
  return NULL;
}
