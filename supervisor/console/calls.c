/* Each agent's calls per minute over the last hour (allowed and denied), for the Agents view: 60 slots an
 * agent, slot = minute % 60, valid while it holds that minute; a bounded number of agents, the one whose
 * last call is the oldest giving way. Not locked: its owner serializes the calls. */
#include <stdlib.h>
#include <string.h>

#include "supervisor/console/console.h"

#define MINUTE_NS INT64_C(60000000000)
#define MINUTES 60

struct agent_calls {
  char *agent;
  int64_t last_minute;
  int64_t minute[MINUTES];
  uint32_t allow[MINUTES], deny[MINUTES];
};

struct console_calls {
  size_t max_agents, count;
  struct agent_calls *agents;
  json_t *slots; /* agent name -> index into agents */
};

struct console_calls *console_calls_new(size_t max_agents) {
  struct console_calls *calls = calloc(1, sizeof *calls);
  if (calls == NULL) return NULL;
  calls->max_agents = max_agents ? max_agents : CONSOLE_CALLS_AGENTS_MAX;
  calls->agents = calloc(calls->max_agents, sizeof calls->agents[0]);
  calls->slots = json_object();
  if (calls->agents == NULL || calls->slots == NULL) {
    console_calls_free(calls);
    return NULL;
  }
  return calls;
}

void console_calls_free(struct console_calls *calls) {
  if (calls == NULL) return;
  for (size_t i = 0; i < calls->count; i++) free(calls->agents[i].agent);
  free(calls->agents);
  json_decref(calls->slots);
  free(calls);
}

static struct agent_calls *slot_of(struct console_calls *calls, const char *agent) {
  json_t *slot = json_object_get(calls->slots, agent);
  if (slot) return &calls->agents[json_integer_value(slot)];
  char *name = strdup(agent);
  if (name == NULL) return NULL;
  size_t index = calls->count;
  if (index == calls->max_agents) {
    index = 0;
    for (size_t i = 1; i < calls->max_agents; i++)
      if (calls->agents[i].last_minute < calls->agents[index].last_minute) index = i;
    json_object_del(calls->slots, calls->agents[index].agent);
    free(calls->agents[index].agent);
  } else {
    calls->count++;
  }
  struct agent_calls *entry = &calls->agents[index];
  *entry = (struct agent_calls){.agent = name, .last_minute = INT64_MIN};
  for (size_t m = 0; m < MINUTES; m++) entry->minute[m] = -1;
  json_object_set_new(calls->slots, agent, json_integer((json_int_t)index));
  return entry;
}

void console_calls_count(struct console_calls *calls, const char *agent, bool allow, int64_t time_ns) {
  if (agent == NULL || time_ns < 0) return;
  struct agent_calls *entry = slot_of(calls, agent);
  if (entry == NULL) return;
  int64_t minute = time_ns / MINUTE_NS;
  size_t m = (size_t)(minute % MINUTES);
  if (entry->minute[m] != minute) {
    if (entry->minute[m] > minute) return; /* older than the hour this slot holds */
    entry->minute[m] = minute;
    entry->allow[m] = entry->deny[m] = 0;
  }
  if (minute > entry->last_minute) entry->last_minute = minute;
  if (allow)
    entry->allow[m]++;
  else
    entry->deny[m]++;
}

json_t *console_calls_last_hour(const struct console_calls *calls, int64_t now_ns) {
  json_t *hour = json_object();
  int64_t now_minute = now_ns / MINUTE_NS;
  for (size_t a = 0; a < calls->count; a++) {
    const struct agent_calls *entry = &calls->agents[a];
    if (entry->last_minute < now_minute - (MINUTES - 1)) continue;
    json_t *minutes = json_array();
    json_int_t allow = 0, deny = 0;
    for (int64_t minute = now_minute - (MINUTES - 1); minute <= now_minute; minute++) {
      size_t m = (size_t)(minute % MINUTES);
      bool kept = entry->minute[m] == minute;
      json_array_append_new(minutes, json_integer(kept ? (json_int_t)entry->allow[m] + entry->deny[m] : 0));
      allow += kept ? entry->allow[m] : 0;
      deny += kept ? entry->deny[m] : 0;
    }
    json_object_set_new(
        hour, entry->agent,
        json_pack("{s:o,s:I,s:I}", "calls_per_minute", minutes, "allow", allow, "deny", deny));
  }
  return hour;
}
