/* /metrics in the Prometheus text exposition format (version 0.0.4), and /healthz. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/domed/domed.h"

static const unsigned bucket_ms[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};

void domed_metrics_observe_call(struct domed_metrics *metrics, uint64_t total_us, uint64_t overhead_us) {
  size_t i = 0;
  while (i < sizeof bucket_ms / sizeof bucket_ms[0] && total_us > (uint64_t)bucket_ms[i] * 1000u) i++;
  atomic_fetch_add(&metrics->latency_buckets[i], 1);
  atomic_fetch_add(&metrics->latency_sum_us, total_us);
  atomic_fetch_add(&metrics->latency_count, 1);
  atomic_fetch_add(&metrics->overhead_sum_us, overhead_us);
}

#define COUNTER(name, help, value)                                                   \
  fprintf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, \
          (unsigned long long)(value))
#define GAUGE(name, help, value)                                                   \
  fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %llu\n", name, help, name, name, \
          (unsigned long long)(value))

/* Resident set of this process, bytes (the second field of /proc/self/statm, proc(5)); 0 when unreadable. */
static unsigned long long resident_bytes(void) {
  unsigned long long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return 0;
  if (fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
  fclose(f);
  return resident * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* Bytes malloc has handed out and not had back, over every arena, its mmapped chunks included
 * (mallinfo2(3): uordblks + hblkhd). Unlike the resident set it holds no freed memory the allocator keeps
 * (arenas, the thread stacks glibc caches): a leak grows it, a high-water mark does not. */
static unsigned long long heap_in_use_bytes(void) {
  struct mallinfo2 info = mallinfo2();
  return (unsigned long long)info.uordblks + (unsigned long long)info.hblkhd;
}

int domed_http_get(void *context, const char *path, char **body, size_t *length, const char **content_type) {
  struct domed *domed = context;
  if (strcmp(path, "/healthz") == 0) {
    *body = strdup("ok\n");
    *length = 3;
    *content_type = "text/plain";
    return *body ? 0 : -ENOMEM;
  }
  if (strcmp(path, "/metrics") != 0) return -ENOENT;
  struct domed_metrics *m = &domed->metrics;
  struct mcp_server_stats stats;
  mcp_server_get_stats(domed->mcp, &stats);
  FILE *out = open_memstream(body, length);
  if (out == NULL) return -ENOMEM;
  COUNTER("dome_executions_total", "Jailed executions run.", atomic_load(&m->executions));
  COUNTER("dome_execution_errors_total", "Executions whose jail could not be set up.",
          atomic_load(&m->execution_errors));
  COUNTER("dome_timeouts_total", "Executions killed by their wall-clock limit.", atomic_load(&m->timeouts));
  COUNTER("dome_oom_kills_total", "Executions whose cgroup hit its memory limit.",
          atomic_load(&m->oom_kills));
  COUNTER("dome_cancellations_total", "Executions cancelled by the client.", atomic_load(&m->cancellations));
  fprintf(out, "# HELP dome_decisions_total Authorization decisions.\n# TYPE dome_decisions_total counter\n");
  fprintf(out, "dome_decisions_total{decision=\"allow\"} %llu\n",
          (unsigned long long)atomic_load(&m->decisions_allow));
  fprintf(out, "dome_decisions_total{decision=\"deny\"} %llu\n",
          (unsigned long long)atomic_load(&m->decisions_deny));
  COUNTER("dome_denials_total", "Denied tool calls.", atomic_load(&m->decisions_deny));
  fprintf(out,
          "# HELP dome_authz_shadow_flips_total Requests the shadow rules decide otherwise than the active "
          "ones (dome rules apply --shadow).\n# TYPE dome_authz_shadow_flips_total counter\n");
  fprintf(out, "dome_authz_shadow_flips_total{direction=\"allow_to_deny\"} %llu\n",
          (unsigned long long)atomic_load(&m->shadow_flips[0]));
  fprintf(out, "dome_authz_shadow_flips_total{direction=\"deny_to_allow\"} %llu\n",
          (unsigned long long)atomic_load(&m->shadow_flips[1]));
  COUNTER("dome_kernel_denials_total", "Kernel denial events of jails.", atomic_load(&m->denials_kernel));
  COUNTER("dome_kernel_shadow_differences_total",
          "Accesses in jails that the shadow rules' kernel tables decide otherwise (exec.shadow).",
          atomic_load(&m->shadows_kernel));
  COUNTER("dome_redactions_total", "Redactions applied to results.", atomic_load(&m->redactions));
  COUNTER("dome_overloaded_total", "Calls refused because every jail slot and the queue were full.",
          atomic_load(&m->overloaded));
  COUNTER("dome_journal_refused_total",
          "Events the journal could not take or make durable; each failed its call closed.",
          atomic_load(&m->journal_refused));
  COUNTER("dome_journal_digest_only_total",
          "Members journalled by digest whose bytes the blob store's quotas refused (stored=false).",
          atomic_load(&m->digest_only));
  json_t *blobs = domed_audit_blob_usage(domed);
  GAUGE("dome_blob_bytes", "Bytes of the blob store beside the journal.",
        json_integer_value(json_object_get(blobs, "bytes")));
  GAUGE("dome_blob_count", "Blobs in the blob store.", json_integer_value(json_object_get(blobs, "blobs")));
  GAUGE("dome_blob_quota_bytes", "The blob store's total quota (blob_quota; 0: none).",
        json_integer_value(json_object_get(blobs, "quota_bytes")));
  COUNTER("dome_blob_refused_total", "Blobs not stored because a quota was reached.",
          json_integer_value(json_object_get(blobs, "refused")));
  COUNTER("dome_blob_pruned_total", "Blobs removed with the journal's retention.",
          json_integer_value(json_object_get(blobs, "pruned")));
  fprintf(out,
          "# HELP dome_blob_capability_bytes Bytes of the blob store held per capability.\n"
          "# TYPE dome_blob_capability_bytes gauge\n");
  const char *owner;
  json_t *bytes;
  json_object_foreach(json_object_get(blobs, "owners"), owner, bytes)
      fprintf(out, "dome_blob_capability_bytes{capability=\"%s\"} %lld\n", owner,
              (long long)json_integer_value(bytes));
  json_decref(blobs);
  COUNTER("dome_refusals_total", "Requests refused before a session or call (auth.failed, session.refused).",
          atomic_load(&m->refusals));
  COUNTER("dome_calls_rejected_total", "tools/call refused for an unknown tool or invalid arguments.",
          atomic_load(&m->calls_rejected));
  COUNTER("dome_queue_cancelled_total", "Calls cancelled while waiting for a jail slot.",
          atomic_load(&m->queue_cancelled));
  COUNTER("dome_sessions_evicted_total", "Idle sessions closed to make room for a new one of the same agent.",
          stats.sessions_evicted);
  COUNTER("dome_sessions_refused_total",
          "initialize refused (no permitted action, or the agent's sessions busy).", stats.sessions_refused);
  COUNTER("dome_calls_disconnected_total", "tools/call cancelled because the client closed its connection.",
          stats.calls_disconnected);
  COUNTER("dome_sse_streams_polled_total",
          "tools/call streams domed closed after sse_close_after_ms for the client to resume (SEP-1699).",
          stats.streams_polled);
  domed_egress_metrics(out);
  domed_jail_pool_metrics(domed, out);
  domed_anomaly_metrics(domed, out);
  GAUGE("dome_active_jails", "Jails running now.", atomic_load(&m->active_jails));
  GAUGE("dome_queued_calls", "Calls waiting for a jail slot.", atomic_load(&m->queued));
  GAUGE("dome_sessions_active", "Live MCP sessions.", stats.sessions_active);
  GAUGE("dome_sse_replay_bytes",
        "Bytes of SSE events the live MCP sessions keep for a client resuming a stream (at most "
        "sse_replay_bytes each).",
        stats.replay_bytes);
  GAUGE("dome_sandbox_sessions_active", "Live sandbox sessions (create_session), one jail and kernel each.",
        domed_sessions_live());
  GAUGE("process_resident_memory_bytes", "Resident memory size in bytes.", resident_bytes());
  GAUGE("dome_heap_in_use_bytes",
        "Bytes of domed's heap allocated and not freed (mallinfo2: uordblks + hblkhd).", heap_in_use_bytes());
  COUNTER("dome_http_requests_total", "HTTP requests answered.", stats.http_requests);
  COUNTER("dome_http_errors_total", "HTTP requests answered with 4xx/5xx.", stats.http_errors);
  COUNTER("dome_http_unauthorized_total", "HTTP requests answered 401.", stats.unauthorized);
  fprintf(out,
          "# HELP dome_call_duration_seconds tools/call latency, authorization to result.\n"
          "# TYPE dome_call_duration_seconds histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < 12; i++) {
    cumulative += atomic_load(&m->latency_buckets[i]);
    if (i < 11)
      fprintf(out, "dome_call_duration_seconds_bucket{le=\"%.3f\"} %llu\n", bucket_ms[i] / 1000.0,
              (unsigned long long)cumulative);
    else
      fprintf(out, "dome_call_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cumulative);
  }
  fprintf(out, "dome_call_duration_seconds_sum %.6f\n", atomic_load(&m->latency_sum_us) / 1e6);
  fprintf(out, "dome_call_duration_seconds_count %llu\n", (unsigned long long)atomic_load(&m->latency_count));
  fprintf(out,
          "# HELP dome_call_overhead_seconds_sum Time of tools/call spent outside the program.\n"
          "# TYPE dome_call_overhead_seconds_sum counter\ndome_call_overhead_seconds_sum %.6f\n",
          atomic_load(&m->overhead_sum_us) / 1e6);
  static const char *const phases[DOMED_PHASES] = {"authorize", "queue",   "guard", "jail_setup", "program",
                                                   "redact",    "journal", "http",  "kernel"};
  fprintf(out,
          "# HELP dome_call_phase_seconds_sum Time of tools/call by phase, summed over calls.\n"
          "# TYPE dome_call_phase_seconds_sum counter\n");
  for (size_t i = 0; i < DOMED_PHASES; i++)
    fprintf(out, "dome_call_phase_seconds_sum{phase=\"%s\"} %.6f\n", phases[i],
            atomic_load(&m->phase_sum_us[i]) / 1e6);
  fprintf(out,
          "# HELP dome_start_sync_seconds_sum Time of exec.start's journal syncs, summed over executions.\n"
          "# TYPE dome_start_sync_seconds_sum counter\ndome_start_sync_seconds_sum %.6f\n",
          atomic_load(&m->start_sync_us) / 1e6);
  fclose(out);
  *content_type = "text/plain; version=0.0.4";
  return 0;
}
