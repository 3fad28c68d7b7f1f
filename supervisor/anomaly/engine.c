/* Evaluation of a rule set over journal events: detection rules per event, correlation rules over
 * per-group windows (sigma-correlation-rules-specification.md "Correlation Types").
 *
 * Window: an event at time t counts for a correlation while t >= now - timespan (both edges inside).
 * Once a correlation fires, its group starts over (the events that made it fire count once).
 * State is bounded: a group holds at most as many hits as its condition needs (at most 1024), a
 * group whose newest hit left the timespan is evicted, and a rule holds at most max_groups_per_rule. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "supervisor/anomaly/anomaly_internal.h"

#define MAX_ALERT_SEQS 64
#define MAX_ALERT_EXEC_IDS 16
#define MAX_VALUE_BYTES 256
#define SWEEP_EVERY 4096

struct hit {
  int64_t time;
  uint64_t seq;
  double number;
  char *value;
  char exec_id[24];
  unsigned reference; /* index in the correlation's rules */
};

struct group {
  struct group *next;
  uint64_t hash;
  char *key;
  json_t *values; /* {group-by field: value} */
  int64_t last;
  size_t head, count, capacity;
  struct hit *hits;
};

struct correlation_state {
  struct group **buckets;
  size_t bucket_count, group_count;
  uint64_t feeds;
  size_t hit_capacity;
};

struct anomaly_engine {
  anomaly_rule_set *set;
  struct correlation_state *states;
  signed char *results;
  struct anomaly_scratch scratch; /* the matchers' per-event working memory */
  anomaly_engine_options options;
  anomaly_engine_stats stats;
  anomaly_alert_callback callback;
  void *context;
  int alerts;
};

static size_t hit_capacity_of(const struct rule *r) {
  if (r->kind == RULE_TEMPORAL) return r->reference_count;
  if (r->kind == RULE_TEMPORAL_ORDERED)
    return r->reference_count * 16 > 1024 ? 1024 : r->reference_count * 16;
  if (r->kind == RULE_VALUE_SUM || r->kind == RULE_VALUE_AVG) return 1024;
  const struct count_condition *c = &r->condition;
  int64_t most = 1;
  if (c->has_gt && c->gt + 1 > most) most = c->gt + 1;
  if (c->has_gte && c->gte > most) most = c->gte;
  if (c->has_lt && c->lt > most) most = c->lt;
  if (c->has_lte && c->lte + 1 > most) most = c->lte + 1;
  if (c->has_eq && c->eq + 1 > most) most = c->eq + 1;
  if (c->has_neq && c->neq + 1 > most) most = c->neq + 1;
  return most + 1 > 1024 ? 1024 : (size_t)most + 1;
}

int anomaly_engine_create(anomaly_rule_set *set, const anomaly_engine_options *options, anomaly_engine **out,
                          dome_error *err) {
  anomaly_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return dome_error_set(err, ENOMEM, "anomaly engine");
  e->set = anomaly_rule_set_retain(set);
  e->options.max_groups_per_rule =
      options && options->max_groups_per_rule ? options->max_groups_per_rule : 100000;
  e->states = calloc(set->rule_count + 1, sizeof *e->states);
  size_t most_searches = 1;
  for (size_t i = 0; i < set->rule_count; i++) {
    if (set->rules[i].search_count > most_searches) most_searches = set->rules[i].search_count;
    e->states[i].hit_capacity = hit_capacity_of(&set->rules[i]);
  }
  e->results = malloc(most_searches);
  e->scratch.match_data = pcre2_match_data_create(1, NULL);
  if (e->states == NULL || e->results == NULL || e->scratch.match_data == NULL ||
      anomaly_scratch_prepare(&e->scratch, set) < 0) {
    anomaly_engine_free(e);
    return dome_error_set(err, ENOMEM, "anomaly engine");
  }
  *out = e;
  return 0;
}

static void group_free(struct group *g) {
  for (size_t i = 0; i < g->count; i++) free(g->hits[(g->head + i) % g->capacity].value);
  free(g->hits);
  free(g->key);
  json_decref(g->values);
  free(g);
}

static size_t group_bytes(const struct group *g) {
  return sizeof *g + g->capacity * sizeof(struct hit) + strlen(g->key) + 64;
}

void anomaly_engine_free(anomaly_engine *e) {
  if (e == NULL) return;
  for (size_t i = 0; e->states && i < e->set->rule_count; i++) {
    struct correlation_state *s = &e->states[i];
    for (size_t b = 0; b < s->bucket_count; b++)
      for (struct group *g = s->buckets[b], *next; g; g = next) {
        next = g->next;
        group_free(g);
      }
    free(s->buckets);
  }
  free(e->states);
  free(e->results);
  if (e->scratch.match_data) pcre2_match_data_free(e->scratch.match_data);
  anomaly_scratch_release(&e->scratch);
  anomaly_rule_set_release(e->set);
  free(e);
}

void anomaly_engine_stats_get(const anomaly_engine *e, anomaly_engine_stats *stats) {
  *stats = e->stats;
}

static uint64_t hash_of(const char *text, size_t length) {
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < length; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211u;
  return h;
}

/* Text of a member for grouping and counting: strings as they are, other scalars as JSON. */
static char *member_string(const json_t *member) {
  if (member == NULL || json_is_null(member)) return NULL;
  if (json_is_string(member)) return strndup(json_string_value(member), MAX_VALUE_BYTES);
  char *text = json_dumps(member, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  if (text && strlen(text) > MAX_VALUE_BYTES) text[MAX_VALUE_BYTES] = '\0';
  return text;
}

/* The field a group-by name reads for events of referenced rule `reference` (aliases). */
static const char *group_field(const struct rule *c, const struct rule *referenced, const char *name) {
  for (size_t a = 0; a < c->alias_count; a++) {
    if (strcmp(c->aliases[a].name, name) != 0) continue;
    for (size_t k = 0; k < c->aliases[a].count; k++)
      if ((referenced->name && strcmp(c->aliases[a].rule_names[k], referenced->name) == 0) ||
          (referenced->id && strcmp(c->aliases[a].rule_names[k], referenced->id) == 0))
        return c->aliases[a].fields[k];
  }
  return name;
}

static void sweep(anomaly_engine *e, struct correlation_state *s, const struct rule *r, int64_t now) {
  for (size_t b = 0; b < s->bucket_count; b++) {
    struct group **link = &s->buckets[b];
    while (*link) {
      struct group *g = *link;
      if (g->last < now - r->timespan_ns) {
        *link = g->next;
        e->stats.state_bytes -= group_bytes(g);
        group_free(g);
        s->group_count--;
        e->stats.groups--;
        e->stats.groups_evicted++;
      } else {
        link = &g->next;
      }
    }
  }
}

/* A new group's ring: small, grown as hits come (most groups never need the rule's whole capacity). */
static size_t first_capacity(const struct correlation_state *s) {
  return s->hit_capacity < 4 ? s->hit_capacity : 4;
}

static struct group *group_of(anomaly_engine *e, size_t rule_index, const struct rule *referenced,
                              const json_t *event, int64_t now) {
  const struct rule *r = &e->set->rules[rule_index];
  struct correlation_state *s = &e->states[rule_index];
  char key[2048];
  size_t length = 0;
  for (size_t i = 0; i < r->group_by_count; i++) {
    const char *field = group_field(r, referenced, r->group_by[i]);
    const json_t *member = anomaly_lookup(event, field, strlen(field));
    if (json_is_string(member) && json_string_length(member) < MAX_VALUE_BYTES &&
        length + json_string_length(member) + 2 < sizeof key) {
      memcpy(key + length, json_string_value(member), json_string_length(member));
      length += json_string_length(member);
      key[length++] = '\x1f';
      continue;
    }
    char *text = member_string(member);
    int n = snprintf(key + length, sizeof key - length, "%s\x1f", text ? text : "");
    if (n > 0) length += (size_t)n < sizeof key - length ? (size_t)n : sizeof key - length - 1;
    free(text);
  }
  key[length] = '\0';
  uint64_t hash = hash_of(key, length);
  if (s->bucket_count) {
    for (struct group *g = s->buckets[hash & (s->bucket_count - 1)]; g; g = g->next)
      if (g->hash == hash && strcmp(g->key, key) == 0) return g;
  }
  json_t *values = json_object();
  for (size_t i = 0; i < r->group_by_count; i++) {
    const char *field = group_field(r, referenced, r->group_by[i]);
    char *text = member_string(anomaly_lookup(event, field, strlen(field)));
    json_object_set_new(values, r->group_by[i], text ? json_string(text) : json_null());
    free(text);
  }
  if (++s->feeds % SWEEP_EVERY == 0 || s->group_count >= e->options.max_groups_per_rule) sweep(e, s, r, now);
  if (s->group_count >= e->options.max_groups_per_rule) {
    e->stats.groups_refused++;
    json_decref(values);
    return NULL;
  }
  if (s->group_count + 1 > s->bucket_count) {
    size_t count = s->bucket_count ? s->bucket_count * 2 : 16;
    struct group **buckets = calloc(count, sizeof *buckets);
    if (buckets == NULL) {
      json_decref(values);
      return NULL;
    }
    for (size_t b = 0; b < s->bucket_count; b++)
      for (struct group *g = s->buckets[b], *next; g; g = next) {
        next = g->next;
        g->next = buckets[g->hash & (count - 1)];
        buckets[g->hash & (count - 1)] = g;
      }
    free(s->buckets);
    s->buckets = buckets;
    s->bucket_count = count;
  }
  struct group *g = calloc(1, sizeof *g);
  if (g == NULL || (g->key = strdup(key)) == NULL ||
      (g->hits = calloc(first_capacity(s), sizeof *g->hits)) == NULL) {
    if (g) free(g->key);
    free(g);
    json_decref(values);
    return NULL;
  }
  g->capacity = first_capacity(s);
  g->hash = hash;
  g->values = values;
  g->last = now;
  g->next = s->buckets[hash & (s->bucket_count - 1)];
  s->buckets[hash & (s->bucket_count - 1)] = g;
  s->group_count++;
  e->stats.groups++;
  e->stats.state_bytes += group_bytes(g);
  return g;
}

static struct hit *hit_at(struct group *g, size_t i) {
  return &g->hits[(g->head + i) % g->capacity];
}

static void pop_front(struct group *g) {
  free(hit_at(g, 0)->value);
  hit_at(g, 0)->value = NULL;
  g->head = (g->head + 1) % g->capacity;
  g->count--;
}

static void remove_at(struct group *g, size_t index) {
  free(hit_at(g, index)->value);
  for (size_t i = index; i + 1 < g->count; i++) *hit_at(g, i) = *hit_at(g, i + 1);
  hit_at(g, g->count - 1)->value = NULL;
  g->count--;
}

/* Append a hit: the ring grows (doubling) up to the rule's hit capacity, then the oldest hit goes. */
static void push(anomaly_engine *e, const struct correlation_state *s, struct group *g, struct hit hit) {
  if (g->count == g->capacity && g->capacity < s->hit_capacity) {
    size_t capacity = g->capacity * 2 < s->hit_capacity ? g->capacity * 2 : s->hit_capacity;
    struct hit *grown = calloc(capacity, sizeof *grown);
    if (grown) {
      for (size_t i = 0; i < g->count; i++) grown[i] = *hit_at(g, i);
      free(g->hits);
      e->stats.state_bytes += (capacity - g->capacity) * sizeof *grown;
      g->hits = grown;
      g->head = 0;
      g->capacity = capacity;
    }
  }
  if (g->count == g->capacity) pop_front(g);
  *hit_at(g, g->count) = hit;
  g->count++;
}

static bool condition_holds(const struct count_condition *c, double value) {
  return (!c->has_gt || value > (double)c->gt) && (!c->has_gte || value >= (double)c->gte) &&
         (!c->has_lt || value < (double)c->lt) && (!c->has_lte || value <= (double)c->lte) &&
         (!c->has_eq || value == (double)c->eq) && (!c->has_neq || value != (double)c->neq);
}

static void exec_id_of(const json_t *event, char out[24]) {
  const json_t *member = json_object_get(event, "exec_id");
  size_t length = json_is_string(member) ? strnlen(json_string_value(member), 23) : 0;
  if (length) memcpy(out, json_string_value(member), length);
  out[length] = '\0';
}

static const char *kind_name(enum rule_kind kind) {
  static const char *const names[] = {"detection",        "event_count", "value_count", "temporal",
                                      "temporal_ordered", "value_sum",   "value_avg"};
  return names[kind];
}

static void emit(anomaly_engine *e, const struct rule *r, const json_t *event, uint64_t seq, struct group *g,
                 double value) {
  json_t *alert = json_pack("{s:s,s:s?,s:s,s:s,s:O}", "type", "anomaly.alert", "rule_id", r->id, "title",
                            r->title, "level", anomaly_level_name(r->level), "tags", r->tags);
  if (alert == NULL) return;
  json_t *seqs = json_array(), *exec_ids = json_array();
  const char *agent = NULL;
  if (g) {
    size_t first = g->count > MAX_ALERT_SEQS ? g->count - MAX_ALERT_SEQS : 0;
    for (size_t i = first; i < g->count; i++)
      json_array_append_new(seqs, json_integer((json_int_t)hit_at(g, i)->seq));
    for (size_t i = 0; i < g->count && json_array_size(exec_ids) < MAX_ALERT_EXEC_IDS; i++) {
      const char *id = hit_at(g, i)->exec_id;
      bool seen = id[0] == '\0';
      for (size_t k = 0; !seen && k < json_array_size(exec_ids); k++)
        seen = strcmp(json_string_value(json_array_get(exec_ids, k)), id) == 0;
      if (!seen) json_array_append_new(exec_ids, json_string(id));
    }
    if (r->group_by_agent) agent = json_string_value(json_object_get(g->values, "agent"));
    json_object_set_new(alert, "correlation",
                        json_pack("{s:s,s:f,s:O,s:I}", "type", kind_name(r->kind), "value", value, "group",
                                  g->values, "timespan_s", (json_int_t)(r->timespan_ns / 1000000000)));
  } else {
    json_array_append_new(seqs, json_integer((json_int_t)seq));
    const char *id = json_string_value(json_object_get(event, "exec_id"));
    if (id) json_array_append_new(exec_ids, json_string(id));
    agent = json_string_value(json_object_get(event, "agent"));
    json_object_set_new(alert, "correlation", json_pack("{s:s,s:i}", "type", "detection", "value", 1));
  }
  json_object_set_new(alert, "seqs", seqs);
  json_object_set_new(alert, "exec_ids", exec_ids);
  if (agent) json_object_set_new(alert, "agent", json_string(agent));
  e->stats.alerts++;
  e->alerts++;
  if (e->callback) e->callback(alert, e->context);
  json_decref(alert);
}

static void fired(anomaly_engine *e, size_t rule_index, const json_t *event, uint64_t seq, int64_t time,
                  struct group *g, double value, int depth);

static void feed(anomaly_engine *e, size_t index, size_t from, const json_t *event, uint64_t seq,
                 int64_t time, int depth) {
  const struct rule *r = &e->set->rules[index], *referenced = &e->set->rules[from];
  unsigned reference = 0;
  while (reference < r->reference_count && r->referenced[reference] != from) reference++;
  struct group *g = group_of(e, index, referenced, event, time);
  if (g == NULL) return;
  if (time < g->last) time = g->last; /* out of order: counts at the group's latest time */
  g->last = time;
  while (g->count && hit_at(g, 0)->time < time - r->timespan_ns) pop_front(g);
  struct hit hit = {.time = time, .seq = seq, .reference = reference};
  exec_id_of(event, hit.exec_id);
  if (r->kind == RULE_VALUE_COUNT || r->kind == RULE_VALUE_SUM || r->kind == RULE_VALUE_AVG) {
    char text[MAX_VALUE_BYTES * 2 + 8];
    size_t length = 0;
    for (size_t i = 0; i < r->value_field_count; i++) {
      const char *field = group_field(r, referenced, r->value_fields[i]);
      const json_t *member = anomaly_lookup(event, field, strlen(field));
      if (member == NULL || json_is_null(member)) return; /* only events holding the field count */
      if (r->kind != RULE_VALUE_COUNT) {
        if (json_is_number(member))
          hit.number = json_number_value(member);
        else if (json_is_string(member))
          hit.number = strtod(json_string_value(member), NULL);
        else
          return;
        continue;
      }
      char *value = member_string(member);
      int n = snprintf(text + length, sizeof text - length, "%s\x1f", value ? value : "");
      free(value);
      if (n > 0) length += (size_t)n < sizeof text - length ? (size_t)n : sizeof text - length - 1;
    }
    if (r->kind == RULE_VALUE_COUNT) {
      text[length] = '\0';
      for (size_t i = 0; i < g->count; i++)
        if (strcmp(hit_at(g, i)->value, text) == 0) {
          remove_at(g, i);
          break;
        }
      hit.value = strdup(text);
      if (hit.value == NULL) return;
    }
  } else if (r->kind == RULE_TEMPORAL) {
    for (size_t i = 0; i < g->count; i++)
      if (hit_at(g, i)->reference == reference) {
        remove_at(g, i);
        break;
      }
  }
  push(e, &e->states[index], g, hit);
  double value = (double)g->count;
  if (r->kind == RULE_TEMPORAL_ORDERED) {
    size_t next = 0; /* the longest prefix of the rules found in order (greedy: earliest match) */
    for (size_t i = 0; i < g->count && next < r->reference_count; i++)
      if (hit_at(g, i)->reference == next) next++;
    value = (double)next;
  } else if (r->kind == RULE_VALUE_SUM || r->kind == RULE_VALUE_AVG) {
    double sum = 0;
    for (size_t i = 0; i < g->count; i++) sum += hit_at(g, i)->number;
    value = r->kind == RULE_VALUE_SUM ? sum : sum / (double)g->count;
  }
  if (!condition_holds(&r->condition, value)) return;
  if (r->kind == RULE_TEMPORAL_ORDERED && value < (double)r->reference_count) return;
  fired(e, index, event, seq, time, g, value, depth + 1);
  while (g->count) pop_front(g);
}

static void fired(anomaly_engine *e, size_t rule_index, const json_t *event, uint64_t seq, int64_t time,
                  struct group *g, double value, int depth) {
  const struct rule *r = &e->set->rules[rule_index];
  if (r->emits) emit(e, r, event, seq, g, value);
  if (depth > 32) return;
  for (size_t k = 0; k < r->dependent_count; k++)
    feed(e, r->dependents[k], rule_index, event, seq, time, depth);
}

int anomaly_engine_process(anomaly_engine *e, const json_t *event, uint64_t seq, int64_t time_ns,
                           anomaly_alert_callback callback, void *context) {
  const json_t *type_member = json_object_get(event, "type");
  const char *type = json_string_value(type_member);
  if (type && strncmp(type, "anomaly.", 8) == 0) return 0;
  e->stats.events++;
  e->scratch.generation++; /* the folded copies of the last event's texts are stale */
  e->callback = callback;
  e->context = context;
  e->alerts = 0;
  const anomaly_rule_set *set = e->set;
  if (set->type_field && e->scratch.members) { /* the rules' `type` tests read the member found here */
    e->scratch.members[set->type_field - 1] = type_member;
    e->scratch.member_generations[set->type_field - 1] = e->scratch.generation;
  }
  /* the candidates for the event's type, in load order: two sorted lists merged */
  const size_t *typed, *untyped;
  size_t typed_count, untyped_count;
  e->scratch.type_generation = e->scratch.generation;
  e->scratch.type_kind = type_member == NULL || json_is_null(type_member) ? TYPE_NONE
                         : json_is_string(type_member)                    ? TYPE_STRING
                                                                          : TYPE_OTHER;
  e->scratch.type_slot =
      e->scratch.type_kind == TYPE_STRING ? anomaly_index_type_slot(set, type_member) : NULL;
  anomaly_index_candidates(set, type_member, e->scratch.type_slot, &typed, &typed_count, &untyped,
                           &untyped_count);
  size_t t = 0, u = 0;
  while (t < typed_count || u < untyped_count) {
    size_t index =
        u == untyped_count || (t < typed_count && typed[t] < untyped[u]) ? typed[t++] : untyped[u++];
    const struct rule *r = &set->rules[index];
    memset(e->results, -1, r->search_count);
    bool match = false;
    for (size_t c = 0; c < r->condition_count && !match; c++)
      match = anomaly_condition_eval(r->conditions[c], r, event, e->results, &e->scratch);
    if (!match) continue;
    e->stats.matches++;
    fired(e, index, event, seq, time_ns, NULL, 1, 0);
  }
  return e->alerts;
}
