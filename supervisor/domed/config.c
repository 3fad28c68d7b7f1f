/* domed's configuration: embedded defaults, a key = value file, and flags with the same keys.
 *
 * Format (docs/domed.md): one `key = value` a line, `#` starts a comment line, blank lines ignored,
 * values unquoted (surrounding spaces trimmed). A flat key = value file was chosen over a structured
 * format because the configuration is a short flat list, every error can name FILE:LINE, and no
 * parser beyond this file is needed; the same keys are the command-line flags (--key value). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/common/units.h"
#include "supervisor/domed/domed.h"
#include "supervisor/net/net.h"

void domed_config_defaults(struct domed_config *config) {
  memset(config, 0, sizeof *config);
  snprintf(config->listen, sizeof config->listen, "127.0.0.1:8443");
  snprintf(config->path, sizeof config->path, "/mcp");
  snprintf(config->state_dir, sizeof config->state_dir, "/var/lib/dome");
  snprintf(config->journal_dir, sizeof config->journal_dir, "/var/lib/dome/journal");
  snprintf(config->control_socket, sizeof config->control_socket, "%s", CONTROL_DEFAULT_SOCKET);
  snprintf(config->image, sizeof config->image, "host-ro");
  snprintf(config->anomaly_suspend_level, sizeof config->anomaly_suspend_level, "critical");
  config->anomaly_risk_window_s = 3600;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  config->max_jails = cpus > 0 ? (unsigned)cpus : 1;
  config->pool_size = config->max_jails < DOMED_POOL_SIZE_MAX ? config->max_jails : DOMED_POOL_SIZE_MAX;
  config->session_pool_size = 1;
  config->max_queue = 64;
  config->queue_timeout_s = 30;
  config->max_body_bytes = 4u << 20;
  config->max_batch = 32;
  config->max_batch_bytes = 1u << 20;
  config->http_timeout_s = 30;
  config->max_connections = 1024;
  config->max_sessions = 4096;
  config->session_idle_s = 3600;
  config->max_sessions_per_agent = 16;
  config->max_queue_per_agent = 16;
  config->session_rate_per_agent = 20;
  config->shutdown_grace_s = 10;
  config->console_idle_s = 900;
  config->journal_commit_window_ms = 2;
  snprintf(config->net_mode, sizeof config->net_mode, "auto");
  config->gateway_timeout_ms = 30000;
  config->gateway_refresh_s = 30;
  config->blob_quota_bytes = 1ull << 30;
  config->mcp_output_limit_bytes = 64u << 10;
  config->output_event_bytes = 64u << 10;
  config->output_event_ms = 20;
  config->progress_quiet_ms = 50;
  config->sse_replay_bytes = 1u << 20;
  config->sse_retry_ms = 500;
  config->sse_resume_grace_ms = 1500;
  config->task_ttl_max_s = 3600;
  config->max_tasks_per_agent = 16;
  snprintf(config->fleet_name, sizeof config->fleet_name, "default");
  char host[64] = "";
  if (gethostname(host, sizeof host - 1) == 0) {
    host[strcspn(host, ".")] = '\0';
    for (char *c = host; *c; c++)
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
        *c = '_';
  }
  snprintf(config->node_name, sizeof config->node_name, "%s", host[0] ? host : "node");
  config->fleet_stale_s = 30;
  config->fleet_replicas = 3;
}

static int set_string(char *target, size_t size, const char *key, const char *value, dome_error *err) {
  if (strlen(value) >= size)
    return dome_error_set(err, EINVAL, "%s: value longer than %zu bytes", key, size - 1);
  memcpy(target, value, strlen(value) + 1);
  return 0;
}

static int set_unsigned(unsigned *target, const char *key, const char *value, unsigned min, unsigned max,
                        dome_error *err) {
  char *end;
  errno = 0;
  unsigned long number = strtoul(value, &end, 10);
  if (*value == '\0' || *end != '\0' || errno || number < min || number > max)
    return dome_error_set(err, EINVAL, "%s: expected an integer in [%u, %u], got `%s`", key, min, max, value);
  *target = (unsigned)number;
  return 0;
}

/* A fleet or node name: 1..63 of [A-Za-z0-9_-] (a NATS subject token). */
static int set_fleet_name(char *target, size_t size, const char *key, const char *value, dome_error *err) {
  bool valid = value[0] != '\0' && strlen(value) < size;
  for (const char *c = value; valid && *c; c++)
    valid = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
            *c == '-';
  if (!valid)
    return dome_error_set(err, EINVAL, "%s: expected 1..%zu of [A-Za-z0-9_-], got `%s`", key, size - 1,
                          value);
  return set_string(target, size, key, value, err);
}

int domed_config_set(struct domed_config *c, const char *key, const char *value, dome_error *err) {
#define STRING(name) \
  if (strcmp(key, #name) == 0) return set_string(c->name, sizeof c->name, key, value, err)
  STRING(listen);
  STRING(state_dir);
  STRING(journal_dir);
  STRING(control_socket);
  STRING(control_group);
  STRING(tls_cert);
  STRING(tls_key);
  STRING(allowed_origins);
  STRING(image);
  STRING(allowed_hosts);
  STRING(anomaly_rules);
  STRING(fleet_creds);
  STRING(fleet_tls_ca);
  STRING(fleet_tls_cert);
  STRING(fleet_tls_key);
#undef STRING
  if (strcmp(key, "fleet_url") == 0) {
    if (value[0] && strncmp(value, "nats://", 7) != 0 && strncmp(value, "tls://", 6) != 0)
      return dome_error_set(err, EINVAL, "fleet_url: expected nats://HOST:PORT[,nats://...], got `%s`",
                            value);
    return set_string(c->fleet_url, sizeof c->fleet_url, key, value, err);
  }
  if (strcmp(key, "fleet_name") == 0)
    return set_fleet_name(c->fleet_name, sizeof c->fleet_name, key, value, err);
  if (strcmp(key, "node_name") == 0)
    return set_fleet_name(c->node_name, sizeof c->node_name, key, value, err);
  if (strcmp(key, "fleet_stale_s") == 0) return set_unsigned(&c->fleet_stale_s, key, value, 0, 86400, err);
  if (strcmp(key, "fleet_replicas") == 0) return set_unsigned(&c->fleet_replicas, key, value, 1, 5, err);
  if (strcmp(key, "anomaly_suspend_level") == 0) {
    static const char *const levels[] = {"none", "informational", "low", "medium", "high", "critical"};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
      if (strcmp(value, levels[i]) == 0)
        return set_string(c->anomaly_suspend_level, sizeof c->anomaly_suspend_level, key, value, err);
    return dome_error_set(
        err, EINVAL,
        "anomaly_suspend_level: expected none, informational, low, medium, high or critical, got `%s`",
        value);
  }
  if (strcmp(key, "metrics_token") == 0) {
    if (strlen(value) < 16 || strpbrk(value, " \t\"\\"))
      return dome_error_set(err, EINVAL,
                            "metrics_token: expected at least 16 characters without spaces or quotes");
    return set_string(c->metrics_token, sizeof c->metrics_token, key, value, err);
  }
  if (strcmp(key, "console_listen") == 0) {
    if (value[0] && strchr(value, ':') == NULL)
      return dome_error_set(err, EINVAL, "console_listen: expected ADDR:PORT, got `%s`", value);
    return set_string(c->console_listen, sizeof c->console_listen, key, value, err);
  }
  if (strcmp(key, "console_idle_s") == 0) return set_unsigned(&c->console_idle_s, key, value, 10, 86400, err);
  if (strcmp(key, "metrics_listen") == 0) {
    if (value[0] && strchr(value, ':') == NULL)
      return dome_error_set(err, EINVAL, "metrics_listen: expected ADDR:PORT, got `%s`", value);
    return set_string(c->metrics_listen, sizeof c->metrics_listen, key, value, err);
  }
  if (strcmp(key, "token_ttl") == 0) {
    if (strcmp(value, "none") == 0 || value[0] == '\0') {
      c->token_ttl_s = 0;
      return 0;
    }
    int rc = control_ttl_parse(value, &c->token_ttl_s, err);
    return rc < 0 ? dome_error_wrap(err, "token_ttl") : 0;
  }
  if (strcmp(key, "max_sessions_per_agent") == 0)
    return set_unsigned(&c->max_sessions_per_agent, key, value, 1, 1000000, err);
  if (strcmp(key, "session_rate_per_agent") == 0)
    return set_unsigned(&c->session_rate_per_agent, key, value, 1, 1000000, err);
  if (strcmp(key, "max_queue_per_agent") == 0)
    return set_unsigned(&c->max_queue_per_agent, key, value, 0, 1000000, err);
  if (strcmp(key, "path") == 0) {
    if (value[0] != '/' || strchr(value, ' '))
      return dome_error_set(err, EINVAL, "path: expected /PATH, got `%s`", value);
    return set_string(c->path, sizeof c->path, key, value, err);
  }
  if (strcmp(key, "max_jails") == 0) return set_unsigned(&c->max_jails, key, value, 1, 4096, err);
  if (strcmp(key, "pool_size") == 0)
    return set_unsigned(&c->pool_size, key, value, 0, DOMED_POOL_SIZE_MAX, err);
  if (strcmp(key, "session_pool_size") == 0)
    return set_unsigned(&c->session_pool_size, key, value, 0, DOMED_POOL_SIZE_MAX, err);
  if (strcmp(key, "max_queue") == 0) return set_unsigned(&c->max_queue, key, value, 0, 1000000, err);
  if (strcmp(key, "queue_timeout_s") == 0) return set_unsigned(&c->queue_timeout_s, key, value, 1, 3600, err);
  if (strcmp(key, "http_timeout_s") == 0) return set_unsigned(&c->http_timeout_s, key, value, 1, 3600, err);
  if (strcmp(key, "max_connections") == 0)
    return set_unsigned(&c->max_connections, key, value, 1, 65536, err);
  if (strcmp(key, "max_sessions") == 0) return set_unsigned(&c->max_sessions, key, value, 1, 1000000, err);
  if (strcmp(key, "session_idle_s") == 0)
    return set_unsigned(&c->session_idle_s, key, value, 1, 86400 * 7, err);
  if (strcmp(key, "shutdown_grace_s") == 0)
    return set_unsigned(&c->shutdown_grace_s, key, value, 0, 3600, err);
  if (strcmp(key, "journal_commit_window_ms") == 0)
    return set_unsigned(&c->journal_commit_window_ms, key, value, 0, 1000, err);
  if (strcmp(key, "max_body") == 0) {
    uint64_t bytes;
    int rc = dome_parse_size(value, &bytes, err);
    if (rc < 0) return dome_error_wrap(err, "max_body");
    if (bytes < 1024 || bytes > (256u << 20))
      return dome_error_set(err, EINVAL, "max_body: expected 1K..256M");
    c->max_body_bytes = (size_t)bytes;
    return 0;
  }
  if (strcmp(key, "net_mode") == 0) {
    enum dome_net_mode mode;
    if (dome_net_mode_parse(value, &mode) < 0)
      return dome_error_set(err, EINVAL, "net_mode: expected auto, user, routed, ipvlan or macvlan, got `%s`",
                            value);
    return set_string(c->net_mode, sizeof c->net_mode, key, value, err);
  }
  if (strcmp(key, "net_uplink") == 0) {
    if (value[0] == '\0' || strlen(value) >= sizeof c->net_uplink || strchr(value, '/') || strchr(value, ' '))
      return dome_error_set(err, EINVAL, "net_uplink: expected an interface name (1-15 bytes), got `%s`",
                            value);
    return set_string(c->net_uplink, sizeof c->net_uplink, key, value, err);
  }
  if (strcmp(key, "net_uplink_pool") == 0 || strcmp(key, "net_uplink_gateway") == 0) {
    bool pool = strcmp(key, "net_uplink_pool") == 0;
    struct dome_net_prefix prefix;
    dome_error parse_err = {0};
    if (dome_net_prefix_parse(value, &prefix, &parse_err) < 0 || (!pool && strchr(value, '/')))
      return dome_error_set(err, EINVAL, "%s: expected %s, got `%s`", key, pool ? "A.B.C.D/LEN" : "A.B.C.D",
                            value);
    return pool ? set_string(c->net_uplink_pool, sizeof c->net_uplink_pool, key, value, err)
                : set_string(c->net_uplink_gateway, sizeof c->net_uplink_gateway, key, value, err);
  }
  if (strcmp(key, "net_tcp_relay") == 0) {
    if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
      c->net_tcp_relay = true;
    else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
      c->net_tcp_relay = false;
    else
      return dome_error_set(err, EINVAL, "net_tcp_relay: expected true or false, got `%s`", value);
    return 0;
  }
  if (strcmp(key, "egress_quota") == 0) {
    uint64_t bytes;
    int rc = dome_parse_size(value, &bytes, err);
    if (rc < 0) return dome_error_wrap(err, "egress_quota");
    c->egress_quota_bytes = bytes;
    return 0;
  }
  if (strcmp(key, "blob_quota") == 0 || strcmp(key, "journal_retention") == 0) {
    uint64_t bytes;
    int rc = dome_parse_size(value, &bytes, err);
    if (rc < 0) return dome_error_wrap(err, "%s", key);
    *(key[0] == 'b' ? &c->blob_quota_bytes : &c->journal_retention_bytes) = bytes;
    return 0;
  }
  if (strcmp(key, "journal_retention_age_s") == 0)
    return set_unsigned(&c->journal_retention_age_s, key, value, 0, 86400u * 3650, err);
  if (strcmp(key, "gateway_timeout_ms") == 0)
    return set_unsigned(&c->gateway_timeout_ms, key, value, 100, 3600000, err);
  if (strcmp(key, "anomaly_risk_window_s") == 0)
    return set_unsigned(&c->anomaly_risk_window_s, key, value, 1, 30 * 86400, err);
  if (strcmp(key, "gateway_refresh_s") == 0)
    return set_unsigned(&c->gateway_refresh_s, key, value, 1, 3600, err);
  if (strcmp(key, "mcp_output_limit") == 0 || strcmp(key, "output_event_bytes") == 0) {
    bool result = strcmp(key, "mcp_output_limit") == 0;
    uint64_t bytes;
    int rc = dome_parse_size(value, &bytes, err);
    if (rc < 0) return dome_error_wrap(err, "%s", key);
    /* an exec.output event stays far below the journal's 1 MiB per event, JSON escapes included */
    if (result ? bytes < 1024 || bytes > (64u << 20) : bytes < 1 || bytes > (128u << 10))
      return dome_error_set(err, EINVAL, "%s: expected %s", key, result ? "1K..64M" : "1..128K");
    *(result ? &c->mcp_output_limit_bytes : &c->output_event_bytes) = bytes;
    return 0;
  }
  if (strcmp(key, "output_event_ms") == 0) return set_unsigned(&c->output_event_ms, key, value, 0, 1000, err);
  if (strcmp(key, "progress_quiet_ms") == 0)
    return set_unsigned(&c->progress_quiet_ms, key, value, 1, 10000, err);
  if (strcmp(key, "max_batch") == 0) return set_unsigned(&c->max_batch, key, value, 1, 1024, err);
  if (strcmp(key, "max_batch_bytes") == 0) {
    uint64_t bytes;
    int rc = dome_parse_size(value, &bytes, err);
    if (rc < 0) return dome_error_wrap(err, "max_batch_bytes");
    if (bytes < 1024 || bytes > (256u << 20))
      return dome_error_set(err, EINVAL, "max_batch_bytes: expected 1K..256M");
    c->max_batch_bytes = (size_t)bytes;
    return 0;
  }
  if (strcmp(key, "sse_replay_bytes") == 0) {
    uint64_t bytes;
    int rc = dome_parse_size(value, &bytes, err);
    if (rc < 0) return dome_error_wrap(err, "sse_replay_bytes");
    if (bytes < 4096 || bytes > (256u << 20))
      return dome_error_set(err, EINVAL, "sse_replay_bytes: expected 4K..256M");
    c->sse_replay_bytes = bytes;
    return 0;
  }
  if (strcmp(key, "task_ttl_max_s") == 0)
    return set_unsigned(&c->task_ttl_max_s, key, value, 1, 30u * 86400u, err);
  if (strcmp(key, "max_tasks_per_agent") == 0)
    return set_unsigned(&c->max_tasks_per_agent, key, value, 1, 100000, err);
  if (strcmp(key, "sse_retry_ms") == 0) return set_unsigned(&c->sse_retry_ms, key, value, 1, 60000, err);
  if (strcmp(key, "sse_resume_grace_ms") == 0)
    return set_unsigned(&c->sse_resume_grace_ms, key, value, 1, 600000, err);
  if (strcmp(key, "sse_close_after_ms") == 0)
    return set_unsigned(&c->sse_close_after_ms, key, value, 0, 3600000, err);
  return dome_error_set(err, EINVAL, "unknown key `%s`", key);
}

static char *trim(char *text) {
  while (*text == ' ' || *text == '\t') text++;
  size_t length = strlen(text);
  while (length && (text[length - 1] == ' ' || text[length - 1] == '\t' || text[length - 1] == '\r' ||
                    text[length - 1] == '\n'))
    text[--length] = '\0';
  return text;
}

int domed_config_load(struct domed_config *config, const char *path, dome_error *err) {
  _cleanup_fclose_ FILE *file = fopen(path, "re");
  if (file == NULL) return dome_error_set_errno(err, errno, "--config `%s`", path);
  struct domed_config next = *config;
  char line[4096];
  unsigned number = 0;
  while (fgets(line, sizeof line, file)) {
    number++;
    if (strchr(line, '\n') == NULL && !feof(file))
      return dome_error_set(err, EINVAL, "%s:%u: line too long", path, number);
    char *text = trim(line);
    if (*text == '\0' || *text == '#') continue;
    char *equals = strchr(text, '=');
    if (equals == NULL) return dome_error_set(err, EINVAL, "%s:%u: expected `key = value`", path, number);
    *equals = '\0';
    char *key = trim(text), *value = trim(equals + 1);
    int rc = domed_config_set(&next, key, value, err);
    if (rc < 0) return dome_error_wrap(err, "%s:%u", path, number);
  }
  snprintf(next.config_file, sizeof next.config_file, "%s", path);
  *config = next;
  return 0;
}
