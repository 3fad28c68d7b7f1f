/* Internals of supervisor/exec shared by its files (not for other libraries). */
#ifndef DOME_EXEC_INTERNAL_H
#define DOME_EXEC_INTERNAL_H

#include <sodium.h>

#include "supervisor/exec/exec.h"
#include "supervisor/guards/guard.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/net/net.h"

/* ---- enforce.c: the request's tables as Landlock path rules, cgroup BPF and egress for one run ---- */
struct exec_enforcement {
  const struct dome_rule_tables *tables;
  enum dome_enforcement_level level;
  struct dome_landlock_path_rules path_rules;
  char resolv_conf[1024];
  bool has_resolver;
  struct dome_kernel *kernel;
  struct dome_kernel_jail_hook kernel_hook;
  uint64_t cgroup_id;
  uint64_t start_ns; /* CLOCK_MONOTONIC at attachment: the base of the denials' offset_ms */
  struct dome_net *net;
  struct dome_net_hook net_hook;
  bool egress;
  /* denial collection while the program runs (a thread started once the jail is attached) */
  json_t *denials;
  uint64_t denial_count;
  json_t *shadows; /* NULL: no shadow tables */
  uint64_t shadow_count;
  int stop_fd;
  bool poller_running;
  unsigned long poller;
  bool degraded;
  unsigned degraded_entries;
  char degraded_reason[1024];
};

/* Prepare the tables of `request` (none: nothing to do). Fills config's path rules, resolv.conf and
 * egress hook. Returns 0 or -errno; exec_enforcement_release in every case. */
int exec_enforcement_prepare(struct exec_enforcement *e, const struct exec_request *request,
                             struct jail_config *config, dome_error *err);
int exec_enforcement_attach(struct exec_enforcement *e, const struct jail_cgroup *leaf, dome_error *err);
int exec_enforcement_namespaces_ready(struct exec_enforcement *e, pid_t child_pid, dome_error *err);
/* After the jail: drain the denials, detach, tear egress down; report as a provider would. */
void exec_enforcement_finish(struct exec_enforcement *e, struct exec_kernel_report *report);
void exec_enforcement_release(struct exec_enforcement *e);

/* ---- records.c: the shapes of the exec.* records (docs/journal-format.md) ---- */
json_t *exec_record(const struct exec_identity *identity, const char *type);
/* exec.start: NULL with *err when an input could not be kept (sink->put_blob failed). */
json_t *exec_start_record(const struct exec_request *request, char *const *argv, const struct exec_sink *sink,
                          dome_error *err);
json_t *exec_denial_record(const struct exec_request *request, json_t *denial, const char *reason);
/* exec.shadow of one shadow difference object (dome_denial_shadow_to_json); NULL when out of memory. */
json_t *exec_shadow_record(const struct exec_request *request, json_t *shadow);

/* ---- output.c: redacted output gathered into exec.output records ---- */
struct exec_output {
  const struct exec_request *request;
  const struct exec_sink *sink;
  struct guard_stream *streams[3]; /* [1] stdout, [2] stderr */
  bool unredacted;                 /* no guard: records carry the bytes as written */
  int stream;                      /* being fed */
  uint64_t offset_ms;              /* of the chunk being fed, since the program started */
  size_t event_bytes;
  unsigned event_ms, quiet_ms;
  /* The record being gathered: redacted bytes of one stream, out once it holds event_bytes, is event_ms
   * old, the other stream emits, or the program is quiet. Records therefore keep the streams' order. */
  char *event;
  size_t event_length;
  int event_stream;
  uint64_t event_offset_ms;
  uint64_t last_output_ms[3];
  bool quiet_flushed[3];
  /* an incomplete UTF-8 sequence at a chunk's end waits for the next chunk */
  char carry[3][4];
  size_t carry_length[3];
  crypto_hash_sha256_state digest[3];
  uint64_t bytes[3];
  /* the first refusal of the sink (0: none), see exec_output_refused */
  int (*refused)(void *context, int rc, const dome_error *err);
  void *refused_context;
};
/* guard NULL: unredacted (exec_request.unredacted). */
int exec_output_open(struct exec_output *o, struct guard *guard, dome_error *err);
void exec_output_feed(struct exec_output *o, int stream, const char *data, size_t length, uint64_t offset_ms);
void exec_output_tick(struct exec_output *o, uint64_t offset_ms);
void exec_output_finish(struct exec_output *o, uint64_t offset_ms);
/* stdout_sha256/bytes, stderr_sha256/bytes of the recorded output into `end`. */
void exec_output_digests(struct exec_output *o, json_t *end);
void exec_output_close(struct exec_output *o);

#endif
