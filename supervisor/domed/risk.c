/* An agent's risk as Cedar sees it (context.risk, docs/anomaly-detection.md): the anomaly alerts that
 * named the agent within the last anomaly_risk_window_s seconds, counted and summed up by their highest
 * Sigma level. The record is in memory and bounded: RISK_AGENTS agents (the one whose last alert is the
 * oldest gives way to a new one) of RISK_ALERTS alerts each (the oldest gives way; the count is then at
 * least RISK_ALERTS). `dome agents resume` closes an agent's alerts (its record is cleared). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"

#define RISK_AGENTS 1024
#define RISK_ALERTS 64

struct risk_alert {
  int64_t time_ns; /* CLOCK_MONOTONIC */
  anomaly_level level;
};

struct risk_agent {
  char name[256];
  struct risk_alert alerts[RISK_ALERTS]; /* a ring: next is where the following alert goes */
  size_t next, count;
  int64_t last_ns;
};

struct domed_risk {
  pthread_mutex_t lock;
  int64_t window_ns;
  struct risk_agent *agents; /* RISK_AGENTS, name "" when free */
};

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct domed_risk *domed_risk_create(unsigned window_s) {
  struct domed_risk *risk = calloc(1, sizeof *risk);
  if (risk == NULL || (risk->agents = calloc(RISK_AGENTS, sizeof *risk->agents)) == NULL) {
    free(risk);
    return NULL;
  }
  pthread_mutex_init(&risk->lock, NULL);
  risk->window_ns = (int64_t)window_s * 1000000000;
  return risk;
}

void domed_risk_free(struct domed_risk *risk) {
  if (risk == NULL) return;
  pthread_mutex_destroy(&risk->lock);
  free(risk->agents);
  free(risk);
}

static struct risk_agent *find_locked(struct domed_risk *risk, const char *agent) {
  for (size_t i = 0; i < RISK_AGENTS; i++)
    if (risk->agents[i].name[0] && strcmp(risk->agents[i].name, agent) == 0) return &risk->agents[i];
  return NULL;
}

void domed_risk_note(struct domed_risk *risk, const char *agent, anomaly_level level) {
  if (risk == NULL || agent == NULL || agent[0] == '\0' || strlen(agent) >= sizeof risk->agents[0].name)
    return;
  int64_t now = monotonic_ns();
  pthread_mutex_lock(&risk->lock);
  struct risk_agent *entry = find_locked(risk, agent);
  if (entry == NULL) { /* a free entry, else the one whose last alert is the oldest */
    entry = &risk->agents[0];
    for (size_t i = 0; i < RISK_AGENTS && entry->name[0]; i++)
      if (risk->agents[i].name[0] == '\0' || risk->agents[i].last_ns < entry->last_ns)
        entry = &risk->agents[i];
    memset(entry, 0, sizeof *entry);
    snprintf(entry->name, sizeof entry->name, "%s", agent);
  }
  entry->alerts[entry->next] = (struct risk_alert){.time_ns = now, .level = level};
  entry->next = (entry->next + 1) % RISK_ALERTS;
  if (entry->count < RISK_ALERTS) entry->count++;
  entry->last_ns = now;
  pthread_mutex_unlock(&risk->lock);
}

void domed_risk_clear(struct domed_risk *risk, const char *agent) {
  if (risk == NULL || agent == NULL) return;
  pthread_mutex_lock(&risk->lock);
  struct risk_agent *entry = find_locked(risk, agent);
  if (entry) memset(entry, 0, sizeof *entry);
  pthread_mutex_unlock(&risk->lock);
}

json_t *domed_risk_context(struct domed_risk *risk, const char *agent) {
  size_t alerts = 0;
  anomaly_level highest = ANOMALY_LEVEL_NONE;
  if (risk && agent) {
    int64_t since = monotonic_ns() - risk->window_ns;
    pthread_mutex_lock(&risk->lock);
    const struct risk_agent *entry = find_locked(risk, agent);
    for (size_t i = 0; entry && i < entry->count; i++)
      if (entry->alerts[i].time_ns >= since) {
        alerts++;
        if (entry->alerts[i].level > highest) highest = entry->alerts[i].level;
      }
    pthread_mutex_unlock(&risk->lock);
  }
  return json_pack("{s:I,s:s}", "alerts", (json_int_t)alerts, "max_level", anomaly_level_name(highest));
}
