/* Internals of the replay library shared by its files. */
#ifndef DOME_REPLAY_INTERNAL_H
#define DOME_REPLAY_INTERNAL_H

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "supervisor/replay/replay.h"

struct simulate_policy {
  char *text; /* the rules as given (the kernel compiler parses them again, after the baseline) */
  size_t length;
  char *file;
  cedar_policy_set *set;
  cedar_schema *schema; /* the Dome schema: types entity attributes and contexts as domed does */
};

/* The last entities parsed, reused while consecutive requests carry the same entity data (the common
 * case: one agent calling one tool). Bounded: one entry. */
struct request_cache {
  json_t *entities_json; /* the recorded entities the parsed set came from (compared with json_equal) */
  bool with_schema;
  cedar_entities *entities;
  json_t *context_json; /* likewise for the context, with the action it was typed for */
  char *context_action;
  bool context_with_schema;
  cedar_context *context;
};
void replay_request_cache_clear(struct request_cache *cache);

/* A recorded request rebuilt for cedar_authorize. Strings point into `json` (kept alive here). */
struct rebuilt_request {
  json_t *json; /* the request object ({principal, action, resource, context, entities}), a reference */
  bool reconstructed;
  cedar_request request;
  const cedar_entities *entities; /* owned by the cache */
};

/* Rebuild the request of a journal event: its `request` member, or for an authz.decision without one,
 * the request domed builds from the ids it records (agent, gateway, tool, mcp_tool, actas).
 * Returns 1 (rebuilt), 0 (the event records no request), or -EINVAL with message[size] saying why the
 * recorded request cannot be used (the caller counts it as an error, decision deny), -ENOMEM. */
int replay_request_rebuild(const struct simulate_policy *policy, struct request_cache *cache, json_t *event,
                           struct rebuilt_request *out, char *message, size_t size);
void replay_rebuilt_request_release(struct rebuilt_request *request);

/* Cedar uid text `Type::"id"` with the id escaped as a Cedar string. New string (NULL on ENOMEM). */
json_t *replay_request_uid_text(const cedar_uid_ref *uid);

/* true when `event` is of one of the recorded-request types (authz.decision, exec.denial, exec.access). */
bool replay_request_event_type(const char *type);

/* kernel.c: the kernel-level rules of one execution, compiled for supervisor/exec. */
struct dome_rule_tables;
/* Compile rules (after the baseline) for inputs.agent with its recorded entity data (request.entities).
 * Returns 1 with *tables filled (dome_rule_tables_free), 0 when the host has no cgroup BPF (nothing to
 * enforce them with: the jail's empty network namespace alone), -EINVAL (not compilable: the message
 * names the policy), -errno. */
int replay_kernel_tables(const struct simulate_policy *rules, const json_t *inputs,
                         struct dome_rule_tables *tables, dome_error *err);

#endif
