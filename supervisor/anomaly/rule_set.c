/* Rule sets: reading rule files and directories, resolving correlation references, describing a set. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "supervisor/anomaly/anomaly_internal.h"

static const char *const level_names[] = {"none", "informational", "low", "medium", "high", "critical"};

const char *anomaly_level_name(anomaly_level level) {
  return (unsigned)level <= ANOMALY_LEVEL_CRITICAL ? level_names[level] : "none";
}

int anomaly_level_parse(const char *text, anomaly_level *level, dome_error *err) {
  for (int i = 0; i <= ANOMALY_LEVEL_CRITICAL; i++)
    if (text && strcmp(text, level_names[i]) == 0) {
      *level = (anomaly_level)i;
      return 0;
    }
  return dome_error_set(err, EINVAL,
                        "level `%s`: expected none, informational, low, medium, high or critical",
                        text ? text : "");
}

static int read_file(const char *path, char **text, size_t *length, dome_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", path);
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ANOMALY_MAX_FILE_BYTES) {
    close(fd);
    return dome_error_set(err, EFBIG, "`%s`: not a regular file of at most %d bytes", path,
                          ANOMALY_MAX_FILE_BYTES);
  }
  char *buffer = malloc((size_t)st.st_size + 1);
  size_t done = 0;
  while (buffer && done < (size_t)st.st_size) {
    ssize_t n = read(fd, buffer + done, (size_t)st.st_size - done);
    if (n <= 0) break;
    done += (size_t)n;
  }
  close(fd);
  if (buffer == NULL || done != (size_t)st.st_size) {
    free(buffer);
    return dome_error_set(err, EIO, "read `%s`", path);
  }
  buffer[done] = '\0';
  *text = buffer;
  *length = done;
  return 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool rule_file(const char *name) {
  size_t n = strlen(name);
  return (n > 4 && strcmp(name + n - 4, ".yml") == 0) || (n > 5 && strcmp(name + n - 5, ".yaml") == 0);
}

static int add_directory(anomaly_loader *loader, const char *path, int depth) {
  DIR *dir = opendir(path);
  if (dir == NULL) {
    json_array_append_new(loader->problems, json_sprintf("%s:1:1: rule -: cannot read the directory", path));
    return 0;
  }
  char **names = NULL;
  size_t count = 0, capacity = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    if (count == capacity) {
      capacity = capacity ? capacity * 2 : 64;
      char **grown = realloc(names, capacity * sizeof *names);
      if (grown == NULL) break;
      names = grown;
    }
    names[count++] = strdup(entry->d_name);
  }
  closedir(dir);
  if (count) qsort(names, count, sizeof *names, compare_names);
  int added = 0;
  for (size_t i = 0; i < count; i++) {
    char *child;
    if (asprintf(&child, "%s/%s", path, names[i]) < 0) continue;
    struct stat st;
    if (stat(child, &st) == 0 && S_ISDIR(st.st_mode) && depth < 16) {
      added += add_directory(loader, child, depth + 1);
    } else if (S_ISREG(st.st_mode) && rule_file(names[i])) {
      char *text;
      size_t length;
      dome_error err = {0};
      if (read_file(child, &text, &length, &err) < 0) {
        json_array_append_new(loader->problems, json_sprintf("%s:1:1: rule -: %s", child, err.message));
      } else {
        added += anomaly_loader_add_text(loader, child, text, length);
        free(text);
      }
    }
    free(child);
    free(names[i]);
  }
  free(names);
  return added;
}

int anomaly_loader_add_path(anomaly_loader *loader, const char *path, dome_error *err) {
  struct stat st;
  if (stat(path, &st) < 0) return dome_error_set_errno(err, errno, "rules `%s`", path);
  if (S_ISDIR(st.st_mode)) return add_directory(loader, path, 0);
  char *text;
  size_t length;
  int rc = read_file(path, &text, &length, err);
  if (rc < 0) return rc;
  rc = anomaly_loader_add_text(loader, path, text, length);
  free(text);
  return rc;
}

static void rule_problem(anomaly_loader *l, const struct rule *r, const char *format, const char *detail) {
  char message[512];
  snprintf(message, sizeof message, format, detail);
  json_array_append_new(l->problems, json_sprintf("%s:%u:%u: rule %s: %s", r->file, r->line, r->column,
                                                  r->id ? r->id : "-", message));
}

static long find_rule(const anomaly_loader *l, const char *reference) {
  for (size_t i = 0; i < l->rule_count; i++)
    if ((l->rules[i].id && strcmp(l->rules[i].id, reference) == 0) ||
        (l->rules[i].name && strcmp(l->rules[i].name, reference) == 0))
      return (long)i;
  return -1;
}

/* Depth-first search for a cycle through correlation references: 0 white, 1 grey, 2 black. */
static bool has_cycle(const anomaly_loader *l, size_t index, unsigned char *colour) {
  if (colour[index] == 1) return true;
  if (colour[index] == 2) return false;
  colour[index] = 1;
  const struct rule *r = &l->rules[index];
  for (size_t i = 0; r->referenced && i < r->reference_count; i++)
    if (has_cycle(l, r->referenced[i], colour)) return true;
  colour[index] = 2;
  return false;
}

static bool active_of(struct rule *rules, size_t index, int depth) {
  struct rule *r = &rules[index];
  if (r->kind == RULE_DETECTION || depth > 64) return r->active;
  for (size_t i = 0; i < r->reference_count; i++)
    if (active_of(rules, r->referenced[i], depth + 1)) return true;
  return false;
}

int anomaly_loader_finish(anomaly_loader *l, anomaly_rule_set **out, dome_error *err) {
  size_t problems_before = json_array_size(l->problems);
  for (size_t i = 0; i < l->rule_count; i++) {
    struct rule *r = &l->rules[i];
    for (size_t j = 0; j < i && r->id; j++)
      if (l->rules[j].id && strcmp(l->rules[j].id, r->id) == 0)
        rule_problem(l, r, "duplicate id `%s`", r->id);
    if (r->kind == RULE_DETECTION) continue;
    free(r->referenced);
    r->referenced = calloc(r->reference_count, sizeof *r->referenced);
    for (size_t k = 0; k < r->reference_count; k++) {
      long found = find_rule(l, r->references[k]);
      if (found < 0 || (size_t)found == i) {
        rule_problem(l, r,
                     found < 0 ? "correlation refers to `%s`: no rule of the set has that id or name"
                               : "correlation `%s` refers to itself",
                     r->references[k]);
        free(r->referenced);
        r->referenced = NULL;
        break;
      }
      r->referenced[k] = (size_t)found;
    }
  }
  unsigned char *colour = calloc(l->rule_count + 1, 1);
  for (size_t i = 0; colour && i < l->rule_count; i++) {
    if (l->rules[i].kind != RULE_DETECTION && l->rules[i].referenced && has_cycle(l, i, colour)) {
      rule_problem(l, &l->rules[i], "correlation references form a cycle%s", "");
      break;
    }
  }
  free(colour);
  if (json_array_size(l->problems) > 0) {
    (void)problems_before;
    return dome_error_set(err, EINVAL, "%zu problem(s) in the rules; first: %s", json_array_size(l->problems),
                          json_string_value(json_array_get(l->problems, 0)));
  }
  anomaly_rule_set *set = calloc(1, sizeof *set);
  if (set == NULL) return dome_error_set(err, ENOMEM, "rule set");
  atomic_init(&set->references, 1);
  set->rules = l->rules;
  set->rule_count = l->rule_count;
  l->rules = NULL;
  l->rule_count = l->rule_capacity = 0;
  for (size_t i = 0; i < set->rule_count; i++) {
    struct rule *r = &set->rules[i];
    r->active = active_of(set->rules, i, 0);
    r->emits = true;
  }
  /* dependents and `generate` */
  for (size_t i = 0; i < set->rule_count; i++) {
    struct rule *r = &set->rules[i];
    for (size_t k = 0; r->kind != RULE_DETECTION && k < r->reference_count; k++) {
      struct rule *target = &set->rules[r->referenced[k]];
      size_t *grown = realloc(target->dependents, (target->dependent_count + 1) * sizeof *grown);
      if (grown == NULL) continue;
      target->dependents = grown;
      target->dependents[target->dependent_count++] = i;
    }
  }
  for (size_t i = 0; i < set->rule_count; i++) {
    struct rule *r = &set->rules[i];
    if (r->dependent_count == 0) continue;
    r->emits = false;
    for (size_t k = 0; k < r->dependent_count; k++) r->emits |= set->rules[r->dependents[k]].generate;
  }
  set->detections = calloc(set->rule_count + 1, sizeof *set->detections);
  for (size_t i = 0; i < set->rule_count; i++) {
    if (set->rules[i].active) set->active_count++;
    if (set->rules[i].active && set->rules[i].kind == RULE_DETECTION)
      set->detections[set->detection_count++] = i;
  }
  anomaly_index_build(set); /* without it (out of memory) every detection rule is evaluated */
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(l->digest_state, digest);
  crypto_hash_sha256_init(l->digest_state);
  sodium_bin2hex(set->digest, sizeof set->digest, digest, sizeof digest);
  *out = set;
  return 0;
}

int anomaly_rule_set_load(const char *path, anomaly_rule_set **out, json_t **problems, dome_error *err) {
  if (problems) *problems = NULL;
  anomaly_loader *l = anomaly_loader_create();
  if (l == NULL) return dome_error_set(err, ENOMEM, "rule loader");
  int rc = anomaly_loader_add_path(l, path, err);
  if (rc >= 0) rc = anomaly_loader_finish(l, out, err);
  if (problems) *problems = json_incref((json_t *)anomaly_loader_problems(l));
  anomaly_loader_free(l);
  return rc < 0 ? rc : 0;
}

size_t anomaly_rule_set_count(const anomaly_rule_set *set) {
  return set->rule_count;
}
size_t anomaly_rule_set_active_count(const anomaly_rule_set *set) {
  return set->active_count;
}
const char *anomaly_rule_set_digest(const anomaly_rule_set *set) {
  return set->digest;
}

static const char *kind_name(enum rule_kind kind) {
  static const char *const names[] = {"detection",        "event_count", "value_count", "temporal",
                                      "temporal_ordered", "value_sum",   "value_avg"};
  return names[kind];
}

json_t *anomaly_rule_set_describe(const anomaly_rule_set *set) {
  json_t *rules = json_array();
  for (size_t i = 0; i < set->rule_count; i++) {
    const struct rule *r = &set->rules[i];
    json_array_append_new(
        rules, json_pack("{s:s?,s:s,s:s,s:s?,s:O,s:s,s:b,s:b}", "id", r->id, "title", r->title, "level",
                         anomaly_level_name(r->level), "status", r->status, "tags", r->tags, "kind",
                         kind_name(r->kind), "active", r->active, "alerts", r->emits));
  }
  return rules;
}

const char *anomaly_rule_set_rule_file(const anomaly_rule_set *set, const char *id) {
  for (size_t i = 0; set && id && i < set->rule_count; i++)
    if (set->rules[i].id && strcmp(set->rules[i].id, id) == 0) return set->rules[i].file;
  return NULL;
}

anomaly_rule_set *anomaly_rule_set_retain(anomaly_rule_set *set) {
  if (set) atomic_fetch_add(&set->references, 1);
  return set;
}

void anomaly_rule_set_release(anomaly_rule_set *set) {
  if (set == NULL || atomic_fetch_sub(&set->references, 1) != 1) return;
  anomaly_index_free(set);
  for (size_t i = 0; i < set->rule_count; i++) anomaly_rule_clear(&set->rules[i]);
  free(set->rules);
  free(set->detections);
  free(set);
}
