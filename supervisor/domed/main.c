/* domed — dome's root supervisor: the MCP Streamable HTTP endpoint of the code-sandbox, the control
 * socket of the `dome` CLI, the journal. Thin: configuration, start, signals, shutdown. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/console/console.h"
#include "supervisor/domed/domed.h"
#include "supervisor/gateway/gateway.h"
#include "supervisor/jail/jail.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void domed_log(const char *level, const char *component, const char *format, ...) {
  char message[2048];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(message, sizeof message, format, arguments);
  va_end(arguments);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct tm tm;
  gmtime_r(&now.tv_sec, &tm);
  pthread_mutex_lock(&log_lock);
  fprintf(stderr, "time=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s component=%s %s\n", tm.tm_year + 1900,
          tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000, level,
          component, message);
  pthread_mutex_unlock(&log_lock);
}

struct domed_rules *domed_rules_acquire(struct domed *domed) {
  pthread_mutex_lock(&domed->rules_lock);
  struct domed_rules *rules = domed->rules;
  atomic_fetch_add(&rules->refs, 1);
  pthread_mutex_unlock(&domed->rules_lock);
  return rules;
}

void domed_rules_release(struct domed_rules *rules) {
  if (rules && atomic_fetch_sub(&rules->refs, 1) == 1) {
    domed_rules_free_policies(rules);
    free(rules);
  }
}

void domed_rules_install(struct domed *domed, struct domed_rules *rules) {
  pthread_mutex_lock(&domed->rules_lock);
  struct domed_rules *old = domed->rules;
  domed->rules = rules;
  pthread_mutex_unlock(&domed->rules_lock);
  domed_rules_release(old);
  /* jails prepared under the version before are never used (admin_end's invalidation came before the
   * version was installed: a jail the refill began in between would carry the old version) */
  domed_jail_pool_invalidate(domed);
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: domed [--config FILE] [--listen ADDR:PORT] [--path /mcp] [--state-dir DIR] [--journal-dir "
          "DIR]\n"
          "             [--control-socket PATH] [--control-group GROUP] [--tls-cert PEM --tls-key PEM]\n"
          "             [--max-jails N] [--max-queue N] [--KEY VALUE for any key of the config file]\n"
          "Embedded defaults: listen 127.0.0.1:8443, path /mcp, state /var/lib/dome, journal\n"
          "/var/lib/dome/journal, control socket /run/dome/control.sock. See docs/domed.md.\n");
}

/* Flags override the file: read --config first, then apply every other flag. */
static int parse_arguments(int argc, char **argv, struct domed_config *config, dome_error *err) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0) {
      if (i + 1 >= argc) return dome_error_set(err, EINVAL, "--config: missing FILE");
      int rc = domed_config_load(config, argv[i + 1], err);
      if (rc < 0) return rc;
    }
  }
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(flag, "--version") == 0) {
      printf("domed %s\n", DOME_VERSION_STRING);
      exit(0);
    }
    if (strncmp(flag, "--", 2) != 0) return dome_error_set(err, EINVAL, "unexpected argument `%s`", flag);
    if (i + 1 >= argc) return dome_error_set(err, EINVAL, "%s: missing value", flag);
    const char *value = argv[++i];
    if (strcmp(flag, "--config") == 0) continue;
    char key[64];
    snprintf(key, sizeof key, "%s", flag + 2);
    for (char *c = key; *c; c++)
      if (*c == '-') *c = '_';
    int rc = domed_config_set(config, key, value, err);
    if (rc < 0) return dome_error_wrap(err, "%s", flag);
  }
  return 0;
}

static char *read_file(const char *path, dome_error *err) {
  _cleanup_fclose_ FILE *file = fopen(path, "re");
  if (file == NULL) {
    dome_error_set_errno(err, errno, "read `%s`", path);
    return NULL;
  }
  char *text = NULL;
  size_t size = 0;
  FILE *memory = open_memstream(&text, &size);
  char buffer[8192];
  size_t n, total = 0;
  while ((n = fread(buffer, 1, sizeof buffer, file)) > 0 && total < (1u << 20)) {
    fwrite(buffer, 1, n, memory);
    total += n;
  }
  fclose(memory);
  return text;
}

void domed_rules_load_active(struct domed *domed) {
  int version = control_rules_active(domed->store);
  if (version == 0) {
    domed_log("info", "rules", "msg=\"no rules applied: every call is denied\"");
    return;
  }
  dome_error err = {0};
  char *text = control_rules_text(domed->store, version, &err);
  struct domed_rules *rules = NULL;
  if (text == NULL || domed_rules_load(domed, text, "active rules", &rules, &err) < 0) {
    domed_log("error", "rules", "version=%d msg=\"cannot load the active rules, denying every call: %s\"",
              version, err.message);
    free(text);
    return;
  }
  free(text);
  rules->version = version;
  json_t *list = control_rules_list(domed->store);
  size_t i;
  json_t *entry;
  json_array_foreach(list, i, entry) if (json_integer_value(json_object_get(entry, "version")) == version)
      snprintf(rules->name, sizeof rules->name, "%s", json_string_value(json_object_get(entry, "name")));
  json_decref(list);
  domed_rules_install(domed, rules);
  domed_log("info", "rules", "active version=%d name=%s", version, rules->name);
}

static void reload(struct domed *domed) {
  if (domed->config.config_file[0] == '\0') {
    domed_log("info", "domed", "msg=\"SIGHUP: no config file; nothing to reload\"");
    return;
  }
  struct domed_config next = domed->config;
  dome_error err = {0};
  if (domed_config_load(&next, domed->config.config_file, &err) < 0) {
    domed_log("error", "domed", "msg=\"SIGHUP: config not reloaded: %s\"", err.message);
    return;
  }
  snprintf(domed->config.anomaly_rules, sizeof domed->config.anomaly_rules, "%s", next.anomaly_rules);
  domed_anomaly_reload(domed, domed->config.anomaly_rules);
  pthread_mutex_lock(&domed->slots_lock);
  domed->config.max_jails = next.max_jails;
  domed->config.max_queue = next.max_queue;
  domed->config.queue_timeout_s = next.queue_timeout_s;
  domed->config.shutdown_grace_s = next.shutdown_grace_s;
  domed->config.max_queue_per_agent = next.max_queue_per_agent;
  pthread_cond_broadcast(&domed->slots_cond);
  pthread_mutex_unlock(&domed->slots_lock);
  domed_slots_changed(domed);
  domed_log("info", "domed",
            "msg=\"SIGHUP: reloaded limits (listen, paths and TLS need a restart)\" max_jails=%u",
            next.max_jails);
}

int main(int argc, char **argv) {
  static struct domed domed_state;
  struct domed *domed = &domed_state;
  dome_error err = {0};
  domed_config_defaults(&domed->config);
  if (parse_arguments(argc, argv, &domed->config, &err) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    return 125;
  }
  /* a few malloc arenas, not 8 per core: RSS returns to its baseline after bursts of calls */
  mallopt(M_ARENA_MAX, 4);
  if (sodium_init() < 0) {
    fprintf(stderr, "domed: libsodium initialization failed\n");
    return 125;
  }
  pthread_mutex_init(&domed->rules_lock, NULL);
  pthread_mutex_init(&domed->slots_lock, NULL);
  pthread_cond_init(&domed->slots_cond, NULL);
  domed->rules = calloc(1, sizeof *domed->rules);
  atomic_store(&domed->rules->refs, 1);

  /* Signals are taken synchronously by sigwait in this thread; every other thread inherits the mask. */
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* The jails are cloned from a process forked now, while domed is one thread with a small address space
   * (supervisor/jail/spawner.c): cloned from domed, each would make its every later page write a
   * copy-on-write fault while it lives. Without one, jails are cloned from domed as before. */
  if (jail_spawner_start(&err) < 0) {
    domed_log("warn", "jail", "msg=\"no jail spawner: jails are cloned from domed: %s\"", err.message);
    err = (dome_error){0};
  }

  int rc;
  if ((rc = control_store_open(domed->config.state_dir, &domed->store, &err)) < 0 ||
      (rc = domed_authz_init(domed, &err)) < 0 || (rc = domed_audit_open(domed, &err)) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    return 125;
  }
  control_store_set_commit_hook(domed->store, domed_admin_commit_hook, domed);
  if ((rc = domed_refusals_start(domed, &err)) < 0 || (rc = domed_anomaly_start(domed, &err)) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    return 125;
  }
  domed_rules_load_active(domed);
  if ((rc = domed_fleet_start(domed, &err)) < 0) {
    fprintf(stderr, "domed: fleet: %s\n", err.message);
    return 125;
  }
  domed_kernel_init(domed);
  domed_egress_init(domed);
  gateway_registry *gateways = NULL;
  struct gateway_registry_options gateway_options = {.timeout_ms = domed->config.gateway_timeout_ms,
                                                     .tools_ttl_ms = domed->config.gateway_refresh_s * 1000u};
  if ((rc = gateway_registry_create(&gateway_options, &gateways, &err)) < 0) {
    fprintf(stderr, "domed: gateway: %s\n", err.message);
    return 125;
  }
  domed->gateways = gateways;
  if ((rc = domed_sessions_start(domed, &err)) < 0 || (rc = domed_jail_pool_start(domed, &err)) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    return 125;
  }

  _cleanup_free_ char *cert = NULL;
  _cleanup_free_ char *key = NULL;
  if (domed->config.tls_cert[0] || domed->config.tls_key[0]) {
    if (!domed->config.tls_cert[0] || !domed->config.tls_key[0]) {
      fprintf(stderr, "domed: --tls-cert and --tls-key go together\n");
      return 125;
    }
    cert = read_file(domed->config.tls_cert, &err);
    key = cert ? read_file(domed->config.tls_key, &err) : NULL;
    if (!cert || !key) {
      fprintf(stderr, "domed: TLS: %s\n", err.message);
      return 125;
    }
  }
  char *origins[65] = {0};
  _cleanup_free_ char *origins_text = strdup(domed->config.allowed_origins);
  size_t origin_count = 0;
  for (char *save = NULL, *item = strtok_r(origins_text, ", ", &save); item && origin_count < 64;
       item = strtok_r(NULL, ", ", &save))
    origins[origin_count++] = item;
  char *hosts[65] = {0};
  _cleanup_free_ char *hosts_text = strdup(domed->config.allowed_hosts);
  size_t host_count = 0;
  for (char *save = NULL, *item = strtok_r(hosts_text, ", ", &save); item && host_count < 64;
       item = strtok_r(NULL, ", ", &save))
    hosts[host_count++] = item;
  struct mcp_server_options options = {
      .listen = domed->config.listen,
      .path = domed->config.path,
      .tls_cert_pem = cert,
      .tls_key_pem = key,
      .max_body_bytes = domed->config.max_body_bytes,
      .max_batch_messages = domed->config.max_batch,
      .max_batch_bytes = domed->config.max_batch_bytes,
      .sse_replay_bytes = (size_t)domed->config.sse_replay_bytes,
      .sse_retry_ms = domed->config.sse_retry_ms,
      .sse_resume_grace_ms = domed->config.sse_resume_grace_ms,
      .sse_close_after_ms = domed->config.sse_close_after_ms,
      .task_ttl_max_ms = (uint64_t)domed->config.task_ttl_max_s * 1000u,
      .max_tasks_per_agent = domed->config.max_tasks_per_agent,
      .max_request_id_bytes = DOMED_REQUEST_ID_MAX,
      /* in fleet mode a session id names its node, so that the others answer 404 naming it */
      .session_node = domed->config.fleet_url[0] ? domed->config.node_name : NULL,
      .connection_timeout_s = domed->config.http_timeout_s,
      .max_connections = domed->config.max_connections,
      .max_sessions = domed->config.max_sessions,
      .session_idle_timeout_s = domed->config.session_idle_s,
      .max_sessions_per_agent = domed->config.max_sessions_per_agent,
      .session_rate_per_agent = domed->config.session_rate_per_agent,
      .allowed_origins = origin_count ? (const char *const *)origins : NULL,
      .allowed_hosts = host_count ? (const char *const *)hosts : NULL,
      .get_token = domed->config.metrics_token[0] ? domed->config.metrics_token : NULL,
      .get_listen = domed->config.metrics_listen[0] ? domed->config.metrics_listen : NULL,
      .console_listen = domed->config.console_listen[0] ? domed->config.console_listen : NULL,
      .console_headers = console_security_headers,
      .server_name = "dome",
      .server_version = DOME_VERSION_STRING,
      .instructions = "dome runs code in an isolated sandbox: call execute_code with language and code.",
  };
  struct mcp_handlers handlers = domed_mcp_handlers;
  handlers.context = domed;
  handlers.task_event = domed_task_event;
  handlers.task_save = domed_task_save;
  handlers.task_delete = domed_task_delete;
  handlers.task_limits = domed_task_limits;
  handlers.console = domed_console;
  if ((rc = domed_console_start(domed, &err)) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    return 125;
  }
  if ((rc = mcp_server_start(&options, &handlers, &domed->mcp, &err)) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    return 125;
  }
  int tasks = domed_tasks_restore(domed);
  if (tasks > 0) domed_log("info", "tasks", "msg=restored tasks=%d", tasks);
  if ((rc = control_server_start(domed->config.control_socket,
                                 domed->config.control_group[0] ? domed->config.control_group : NULL,
                                 domed_control_handle, domed, &domed->control, &err)) < 0) {
    fprintf(stderr, "domed: %s\n", err.message);
    mcp_server_stop(domed->mcp);
    return 125;
  }
  char listen_host[sizeof domed->config.listen];
  memcpy(listen_host, domed->config.listen, sizeof listen_host);
  char *colon = strrchr(listen_host, ':');
  if (colon) *colon = '\0';
  domed_log(
      "info", "domed",
      "msg=listening version=%s listen=%s:%u path=%s tls=%s control_socket=%s state_dir=%s journal_dir=%s",
      DOME_VERSION_STRING, listen_host, mcp_server_port(domed->mcp), domed->config.path, cert ? "on" : "off",
      domed->config.control_socket, domed->config.state_dir, domed->config.journal_dir);
  if (domed->config.console_listen[0])
    domed_log("info", "domed", "msg=\"console listening\" console_listen=%s console_port=%u",
              domed->config.console_listen, mcp_server_console_port(domed->mcp));
  if (domed->config.metrics_listen[0])
    domed_log("info", "domed", "msg=\"metrics listening\" metrics_listen=%s metrics_port=%u",
              domed->config.metrics_listen, mcp_server_get_port(domed->mcp));

  for (;;) {
    int signal_number = 0;
    if (sigwait(&signals, &signal_number) != 0) continue;
    if (signal_number == SIGHUP) {
      reload(domed);
      continue;
    }
    break;
  }
  domed_log("info", "domed", "msg=\"stopping: no new connections; running jails get %u s\"",
            domed->config.shutdown_grace_s);
  atomic_store(&domed->stopping, true);
  mcp_server_quiesce(domed->mcp);
  control_server_stop(domed->control);
  if (!mcp_server_wait_idle(domed->mcp, domed->config.shutdown_grace_s * 1000u)) {
    domed_log("warn", "domed", "msg=\"killing the jails still running\"");
    mcp_server_cancel_all(domed->mcp);
  }
  mcp_server_stop(domed->mcp);
  /* every session's jail ends (session.closed reason=shutdown) while the kernel layer and the journal
   * are still there; first, since a session may run in a jail of the pool, whose refill thread waits for
   * the last jail taken from it */
  domed_sessions_stop(domed);
  /* no call runs any more: the prepared jails go, and the refill thread they are tied to */
  domed_jail_pool_stop(domed);
  jail_spawner_stop();
  gateway_registry_free(domed->gateways);
  domed->gateways = NULL;
  domed_egress_cleanup(domed);
  domed_kernel_cleanup(domed);
  domed_guard_cache_clear();
  domed_refusals_stop(domed);
  domed_anomaly_stop(domed);
  domed_console_stop(domed);
  domed_audit_close(domed);
  domed_fleet_stop(domed); /* after the journal's final checkpoint: the publisher sends what it can */
  domed_authz_cleanup(domed);
  domed_rules_release(domed->rules);
  control_store_close(domed->store);
  domed_log("info", "domed", "msg=stopped");
  return 0;
}
