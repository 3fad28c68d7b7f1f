/* Quotas per capability: the limits a jail gets when it runs for a tool requiring that capability. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/common/units.h"
#include "supervisor/control/store_internal.h"

void control_quota_defaults(struct control_quota *quota) {
  *quota = (struct control_quota){
      .memory_bytes = 256u << 20,
      .cpus = 1.0,
      .pids = 64,
      .timeout_ms = 10000,
      .workspace_bytes = 64u << 20,
      .output_bytes = 1u << 20,
      .egress = false,
      .egress_bytes = 0,
      .blob_bytes = 256u << 20,
      .concurrency = 0,
      .sessions = 0,
      .session_idle_ms = 600000,
      .session_lifetime_ms = 3600000,
      .snapshots = 16,
      .snapshot_bytes = 256u << 20,
  };
}

static json_t *quota_json(const struct control_quota *quota) {
  json_t *object = json_pack(
      "{s:I,s:f,s:I,s:I,s:I,s:I,s:b,s:I}", "memory_bytes", (json_int_t)quota->memory_bytes, "cpus",
      quota->cpus, "pids", (json_int_t)quota->pids, "timeout_ms", (json_int_t)quota->timeout_ms,
      "workspace_bytes", (json_int_t)quota->workspace_bytes, "output_bytes", (json_int_t)quota->output_bytes,
      "egress", quota->egress, "egress_bytes", (json_int_t)quota->egress_bytes);
  json_object_set_new(object, "blob_bytes", json_integer((json_int_t)quota->blob_bytes));
  json_object_set_new(object, "mcp_output_bytes", json_integer((json_int_t)quota->mcp_output_bytes));
  json_object_set_new(object, "concurrency", json_integer((json_int_t)quota->concurrency));
  json_object_set_new(object, "task_ttl_ms", json_integer((json_int_t)quota->task_ttl_ms));
  json_object_set_new(object, "tasks", json_integer((json_int_t)quota->tasks));
  json_object_set_new(object, "sessions", json_integer((json_int_t)quota->sessions));
  json_object_set_new(object, "session_idle_ms", json_integer((json_int_t)quota->session_idle_ms));
  json_object_set_new(object, "session_lifetime_ms", json_integer((json_int_t)quota->session_lifetime_ms));
  json_object_set_new(object, "session_memory_bytes", json_integer((json_int_t)quota->session_memory_bytes));
  json_object_set_new(object, "session_cpus", json_real(quota->session_cpus));
  json_object_set_new(object, "session_pids", json_integer((json_int_t)quota->session_pids));
  json_object_set_new(object, "snapshots", json_integer((json_int_t)quota->snapshots));
  json_object_set_new(object, "snapshot_bytes", json_integer((json_int_t)quota->snapshot_bytes));
  return object;
}

static void quota_from_json(json_t *object, struct control_quota *quota) {
  control_quota_defaults(quota);
  json_t *v;
  if ((v = json_object_get(object, "memory_bytes"))) quota->memory_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "cpus"))) quota->cpus = json_number_value(v);
  if ((v = json_object_get(object, "pids"))) quota->pids = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "timeout_ms"))) quota->timeout_ms = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "workspace_bytes")))
    quota->workspace_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "output_bytes"))) quota->output_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "egress"))) quota->egress = json_is_true(v);
  if ((v = json_object_get(object, "egress_bytes")) && json_integer_value(v) > 0)
    quota->egress_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "blob_bytes")) && json_integer_value(v) > 0)
    quota->blob_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "mcp_output_bytes")) && json_integer_value(v) > 0)
    quota->mcp_output_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "concurrency")) && json_integer_value(v) > 0)
    quota->concurrency = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "task_ttl_ms")) && json_integer_value(v) > 0)
    quota->task_ttl_ms = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "tasks")) && json_integer_value(v) > 0)
    quota->tasks = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "sessions")) && json_integer_value(v) >= 0)
    quota->sessions = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "session_idle_ms")) && json_integer_value(v) > 0)
    quota->session_idle_ms = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "session_lifetime_ms")) && json_integer_value(v) > 0)
    quota->session_lifetime_ms = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "session_memory_bytes")) && json_integer_value(v) > 0)
    quota->session_memory_bytes = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "session_cpus")) && json_number_value(v) > 0)
    quota->session_cpus = json_number_value(v);
  if ((v = json_object_get(object, "session_pids")) && json_integer_value(v) > 0)
    quota->session_pids = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "snapshots")) && json_integer_value(v) >= 0)
    quota->snapshots = (uint64_t)json_integer_value(v);
  if ((v = json_object_get(object, "snapshot_bytes")) && json_integer_value(v) > 0)
    quota->snapshot_bytes = (uint64_t)json_integer_value(v);
}

void control_quota_for_session(const struct control_quota *quota, struct control_quota *session) {
  *session = *quota;
  if (quota->session_memory_bytes) session->memory_bytes = quota->session_memory_bytes;
  if (quota->session_cpus > 0) session->cpus = quota->session_cpus;
  if (quota->session_pids) session->pids = quota->session_pids;
}

/* The flag of quota field `key` ("session_cpus" -> "--session-cpus") into `flag`. */
static const char *flag_of(const char *key, char flag[64]) {
  snprintf(flag, 64, "--%s", key);
  for (char *c = flag; *c; c++)
    if (*c == '_') *c = '-';
  return flag;
}

/* A duration field: seconds as a number, or a duration text ("90", "10m"); (0, 86400] s. */
static int duration_field(json_t *fields, const char *key, uint64_t *out, dome_error *err) {
  json_t *v = json_object_get(fields, key);
  if (v == NULL) return 0;
  uint64_t ms = 0;
  char flag[64];
  if (json_is_number(v) && json_number_value(v) > 0)
    ms = (uint64_t)llround(json_number_value(v) * 1000);
  else if (json_is_string(v) && dome_parse_duration_ms(json_string_value(v), &ms, err) < 0)
    return dome_error_wrap(err, "%s", flag_of(key, flag));
  if (ms == 0 || ms > 24ull * 3600 * 1000)
    return dome_error_set(err, EINVAL, "%s: expected (0, 86400] seconds", flag_of(key, flag));
  *out = ms;
  return 0;
}

static int size_field(json_t *fields, const char *key, uint64_t *out, dome_error *err) {
  json_t *v = json_object_get(fields, key);
  if (v == NULL) return 0;
  if (json_is_integer(v) && json_integer_value(v) > 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v)) {
    int rc = dome_parse_size(json_string_value(v), out, err);
    char flag[64];
    if (rc < 0) return dome_error_wrap(err, "%s", flag_of(key, flag));
    if (*out == 0) return dome_error_set(err, EINVAL, "%s: must be positive", flag_of(key, flag));
    return 0;
  }
  char flag[64];
  return dome_error_set(err, EINVAL, "%s: expected a size", flag_of(key, flag));
}

/* A number of CPUs in the jail's own range (jail_run: 0.01 .. 4096), the whole text a number; 0 too when
 * zero_allowed (the field then defers to another). */
static int cpus_field(json_t *fields, const char *key, bool zero_allowed, double *out, dome_error *err) {
  json_t *v = json_object_get(fields, key);
  if (v == NULL) return 0;
  char *end = NULL, flag[64];
  double cpus = json_is_number(v)   ? json_number_value(v)
                : json_is_string(v) ? strtod(json_string_value(v), &end)
                                    : -1;
  if (json_is_string(v) && (end == json_string_value(v) || *end)) cpus = -1;
  if (zero_allowed && cpus == 0) {
    *out = 0;
    return 0;
  }
  if (!(cpus >= 0.01 && cpus <= 4096))
    return dome_error_set(err, EINVAL, "%s: expected a number of CPUs between 0.01 and 4096%s",
                          flag_of(key, flag), zero_allowed ? " (or 0)" : "");
  *out = cpus;
  return 0;
}

/* A whole number in [min, max], as a JSON integer or a text that is an integer and nothing else. */
static int count_field(json_t *fields, const char *key, long long min, long long max, uint64_t *out,
                       dome_error *err) {
  json_t *v = json_object_get(fields, key);
  if (v == NULL) return 0;
  char *end = NULL, flag[64];
  long long count = json_is_integer(v)  ? json_integer_value(v)
                    : json_is_string(v) ? strtoll(json_string_value(v), &end, 10)
                                        : min - 1;
  if (json_is_string(v) && (end == json_string_value(v) || *end)) count = min - 1;
  if (count < min || count > max)
    return dome_error_set(err, EINVAL, "%s: expected an integer in [%lld, %lld]", flag_of(key, flag), min,
                          max);
  *out = (uint64_t)count;
  return 0;
}

/* A size in bytes (a JSON integer or a size text, dome_parse_size) in [min, max], or 0 when zero_allowed
 * (the field then defers to another); `expected` says the range in the error ("0 or 1K..64M"). */
static int bounded_size_field(json_t *fields, const char *key, bool zero_allowed, uint64_t min, uint64_t max,
                              const char *expected, uint64_t *out, dome_error *err) {
  json_t *v = json_object_get(fields, key);
  if (v == NULL) return 0;
  char flag[64];
  uint64_t bytes = 0;
  if (json_is_integer(v) && json_integer_value(v) >= 0)
    bytes = (uint64_t)json_integer_value(v);
  else if (!json_is_string(v))
    return dome_error_set(err, EINVAL, "%s: expected a size", flag_of(key, flag));
  else if (dome_parse_size(json_string_value(v), &bytes, err) < 0)
    return dome_error_wrap(err, "%s", flag_of(key, flag));
  if (!(bytes == 0 && zero_allowed) && (bytes < min || bytes > max))
    return dome_error_set(err, EINVAL, "%s: expected %s", flag_of(key, flag), expected);
  *out = bytes;
  return 0;
}

int control_quota_set(control_store *store, const char *capability, json_t *fields, dome_error *err) {
  if (!control_name_valid(capability))
    return dome_error_set(err, EINVAL, "--capability: invalid capability `%s`", capability ? capability : "");
  if (!json_is_object(fields)) return dome_error_set(err, EINVAL, "quota fields must be an object");
  static const char *const known[] = {
      "memory",       "cpus",     "pids",         "timeout",    "workspace_size",
      "output_limit", "egress",   "egress_bytes", "blob_bytes", "mcp_output_limit",
      "concurrency",  "task_ttl", "tasks"};
  static const char *const session_known[] = {"sessions",       "session_idle",  "session_lifetime",
                                              "session_memory", "session_cpus",  "session_pids",
                                              "snapshots",      "snapshot_bytes"};
  const char *key;
  json_t *value;
  json_object_foreach(fields, key, value) {
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= strcmp(key, known[i]) == 0;
    for (size_t i = 0; i < sizeof session_known / sizeof session_known[0]; i++)
      ok |= strcmp(key, session_known[i]) == 0;
    if (!ok) return dome_error_set(err, EINVAL, "unknown quota field `%s`", key);
  }
  pthread_mutex_lock(&store->lock);
  struct control_quota quota;
  quota_from_json(json_object_get(store->quotas, capability), &quota);
  pthread_mutex_unlock(&store->lock);
  int rc;
  if ((rc = size_field(fields, "memory", &quota.memory_bytes, err)) < 0) return rc;
  if ((rc = size_field(fields, "workspace_size", &quota.workspace_bytes, err)) < 0) return rc;
  if ((rc = size_field(fields, "output_limit", &quota.output_bytes, err)) < 0) return rc;
  if ((rc = size_field(fields, "blob_bytes", &quota.blob_bytes, err)) < 0) return rc;
  json_t *v;
  if ((rc = cpus_field(fields, "cpus", false, &quota.cpus, err)) < 0) return rc;
  if ((rc = count_field(fields, "pids", 1, 1000000, &quota.pids, err)) < 0) return rc;
  if ((rc = cpus_field(fields, "session_cpus", true, &quota.session_cpus, err)) < 0) return rc;
  if ((rc = count_field(fields, "session_pids", 0, 1000000, &quota.session_pids, err)) < 0) return rc;
  /* 0: the capability's sessions go back to its --memory */
  if ((rc = bounded_size_field(fields, "session_memory", true, 1u << 20, UINT64_MAX, "0 or at least 1M",
                               &quota.session_memory_bytes, err)) < 0)
    return rc;
  if ((rc = duration_field(fields, "timeout", &quota.timeout_ms, err)) < 0) return rc;
  if ((v = json_object_get(fields, "egress"))) {
    if (json_is_boolean(v))
      quota.egress = json_is_true(v);
    else if (json_is_string(v) && strcmp(json_string_value(v), "allow") == 0)
      quota.egress = true;
    else if (json_is_string(v) && strcmp(json_string_value(v), "deny") == 0)
      quota.egress = false;
    else
      return dome_error_set(err, EINVAL, "--egress: expected allow or deny");
  }
  /* 0: the capability's jails go back to domed's egress_quota */
  if ((rc = bounded_size_field(fields, "egress_bytes", true, 1, (uint64_t)INT64_MAX,
                               "at most 9223372036854775807 bytes", &quota.egress_bytes, err)) < 0)
    return rc;
  /* 0: the capability goes back to domed's mcp_output_limit */
  if ((rc = bounded_size_field(fields, "mcp_output_limit", true, 1024, 64u << 20, "0 or 1K..64M",
                               &quota.mcp_output_bytes, err)) < 0)
    return rc;
  /* 0: the capability's agents go back to sharing max_jails */
  if ((rc = count_field(fields, "concurrency", 0, 4096, &quota.concurrency, err)) < 0) return rc;
  if ((v = json_object_get(fields, "task_ttl"))) {
    /* 0 is allowed: the capability goes back to domed's task_ttl_max_s */
    uint64_t ms = 0;
    if (json_is_number(v) && json_number_value(v) >= 0)
      ms = (uint64_t)llround(json_number_value(v) * 1000);
    else if (!json_is_string(v))
      return dome_error_set(err, EINVAL, "--task-ttl: expected a duration");
    else if (strcmp(json_string_value(v), "0") != 0 &&
             (rc = dome_parse_duration_ms(json_string_value(v), &ms, err)) < 0)
      return dome_error_wrap(err, "--task-ttl");
    if (ms > 30ull * 86400 * 1000) return dome_error_set(err, EINVAL, "--task-ttl: at most 30 days");
    quota.task_ttl_ms = ms;
  }
  if ((rc = count_field(fields, "tasks", 0, 100000, &quota.tasks, err)) < 0) return rc;
  if ((rc = count_field(fields, "sessions", 0, 1024, &quota.sessions, err)) < 0) return rc;
  if ((rc = count_field(fields, "snapshots", 0, 1024, &quota.snapshots, err)) < 0) return rc;
  if ((rc = bounded_size_field(fields, "snapshot_bytes", false, 1024, UINT64_MAX, "at least 1K",
                               &quota.snapshot_bytes, err)) < 0)
    return rc;
  if ((rc = duration_field(fields, "session_idle", &quota.session_idle_ms, err)) < 0) return rc;
  if ((rc = duration_field(fields, "session_lifetime", &quota.session_lifetime_ms, err)) < 0) return rc;
  pthread_mutex_lock(&store->lock);
  json_t *next = json_deep_copy(store->quotas);
  json_object_set_new(next, capability, quota_json(&quota));
  rc = control_store_replace_json(store, "quotas.json", &store->quotas, next, err);
  pthread_mutex_unlock(&store->lock);
  return rc;
}

void control_quota_get(control_store *store, const char *capability, struct control_quota *quota) {
  pthread_mutex_lock(&store->lock);
  quota_from_json(capability ? json_object_get(store->quotas, capability) : NULL, quota);
  pthread_mutex_unlock(&store->lock);
}

json_t *control_quota_list(control_store *store) {
  json_t *result = json_object();
  pthread_mutex_lock(&store->lock);
  const char *key;
  json_t *value;
  json_object_foreach(store->quotas, key, value) {
    struct control_quota quota;
    quota_from_json(value, &quota);
    json_object_set_new(result, key, quota_json(&quota));
  }
  pthread_mutex_unlock(&store->lock);
  return result;
}
