/* The call's part of a jail plan as one position-independent block, for a jail made before its call
 * (jail_prepare): the supervisor writes it to a memfd, the waiting child maps it privately and relocates
 * the offsets into pointers. The child is a copy of the supervisor from an earlier moment, so nothing of
 * the call can reach it by memory: it comes in this block, whole, through the control socket.
 *
 * Layout: struct call_block, then strings, arrays of string offsets (argv, envp, 0-terminated), the
 * workspace entries and the Landlock rules, each 8-byte aligned. Pointers are stored as offsets from the
 * block's start; 0 is NULL (the header sits at offset 0, so no datum does). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"

#define CALL_BLOCK_MAGIC 0x646f6d6563616c6cull /* "domecall" */

struct call_block {
  uint64_t magic;
  uint64_t size; /* bytes of the whole block */
  uint64_t argv, envp;
  uint64_t search_path, working_directory;
  uint64_t workspace_entries, workspace_entry_count;
  uint64_t landlock_rules, landlock_rule_count;
  uint64_t hold_program;
};

struct buffer {
  char *data;
  size_t length, capacity;
  bool failed;
};

/* Append `length` bytes (8-byte aligned start); returns their offset, 0 after a failure. */
static uint64_t append(struct buffer *b, const void *data, size_t length) {
  if (b->failed) return 0;
  size_t start = (b->length + 7u) & ~(size_t)7u;
  if (start + length > JAIL_CALL_MAX_BYTES) {
    b->failed = true;
    return 0;
  }
  if (start + length > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < start + length) capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (grown == NULL) {
      b->failed = true;
      return 0;
    }
    b->data = grown;
    b->capacity = capacity;
  }
  memset(b->data + b->length, 0, start - b->length);
  if (length) memcpy(b->data + start, data, length);
  b->length = start + length;
  return start;
}

static uint64_t append_string(struct buffer *b, const char *text) {
  return text ? append(b, text, strlen(text) + 1) : 0;
}

static uint64_t append_list(struct buffer *b, char *const *list) {
  size_t count = 0;
  while (list && list[count]) count++;
  uint64_t *offsets = calloc(count + 1, sizeof *offsets);
  if (offsets == NULL) {
    b->failed = true;
    return 0;
  }
  for (size_t i = 0; i < count; i++) offsets[i] = append_string(b, list[i]);
  uint64_t at = append(b, offsets, (count + 1) * sizeof *offsets);
  free(offsets);
  return at;
}

/* The entries with their strings and data; returns the array's offset (0 for none or after a failure). */
static uint64_t append_entries(struct buffer *b, const struct jail_plan_entry *list, size_t count) {
  if (count == 0) return 0;
  struct jail_plan_entry *entries = calloc(count, sizeof *entries);
  if (entries == NULL) {
    b->failed = true;
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    const struct jail_plan_entry *e = &list[i];
    entries[i] = *e;
    entries[i].path = (const char *)(uintptr_t)append_string(b, e->path);
    entries[i].target = (const char *)(uintptr_t)append_string(b, e->target);
    entries[i].data = e->length ? (const void *)(uintptr_t)append(b, e->data, e->length) : NULL;
  }
  uint64_t at = append(b, entries, count * sizeof *entries);
  free(entries);
  return at;
}

static uint64_t append_rules(struct buffer *b, const struct jail_landlock_rule *list, size_t count) {
  if (count == 0) return 0;
  struct jail_landlock_rule *rules = calloc(count, sizeof *rules);
  if (rules == NULL) {
    b->failed = true;
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    rules[i] = list[i];
    rules[i].path = (const char *)(uintptr_t)append_string(b, list[i].path);
  }
  uint64_t at = append(b, rules, count * sizeof *rules);
  free(rules);
  return at;
}

/* The finished block in a new sealed memfd (close-on-exec); frees b->data. `what` names the hand-over in
 * errors. Returns the fd or -errno. */
static int block_to_memfd(struct buffer *b, const char *what, dome_error *err) {
  if (b->failed) {
    free(b->data);
    return b->length + 1 > JAIL_CALL_MAX_BYTES
               ? dome_error_set(err, E2BIG, "%s: over %llu bytes", what, JAIL_CALL_MAX_BYTES)
               : dome_error_set(err, ENOMEM, "%s: out of memory", what);
  }
  int fd = memfd_create("dome-call", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    free(b->data);
    return dome_error_set_errno(err, errno, "%s: memfd_create", what);
  }
  size_t done = 0;
  while (done < b->length) {
    ssize_t n = write(fd, b->data + done, b->length - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      free(b->data);
      close(fd);
      return dome_error_set_errno(err, e, "%s: write", what);
    }
    done += (size_t)n;
  }
  free(b->data);
  /* What the child validated is what it uses: the block can no longer change. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    int e = errno;
    close(fd);
    return dome_error_set_errno(err, e, "%s: seal", what);
  }
  return fd;
}

int jail_call_encode(const struct jail_plan *plan, dome_error *err) {
  struct buffer b = {0};
  struct call_block header = {.magic = CALL_BLOCK_MAGIC};
  append(&b, &header, sizeof header);
  header.argv = append_list(&b, plan->argv);
  header.envp = append_list(&b, plan->envp);
  header.search_path = append_string(&b, plan->search_path);
  header.working_directory = append_string(&b, plan->working_directory);

  header.workspace_entries = append_entries(&b, plan->workspace_entries, plan->workspace_entry_count);
  header.workspace_entry_count = plan->workspace_entry_count;
  header.landlock_rules = append_rules(&b, plan->landlock_rules, plan->landlock_rule_count);
  header.landlock_rule_count = plan->landlock_rule_count;
  header.hold_program = plan->hold_program;

  if (!b.failed) {
    header.size = b.length;
    memcpy(b.data, &header, sizeof header);
  }
  return block_to_memfd(&b, "hand the call to a prepared jail", err);
}

/* ---- the child's side: no allocation, no stdio ---- */

static int string_at(char *block, size_t size, uint64_t offset, const char **out) {
  if (offset == 0) {
    *out = NULL;
    return 0;
  }
  if (offset >= size || memchr(block + offset, '\0', size - offset) == NULL) return -EINVAL;
  *out = block + offset;
  return 0;
}

static int array_at(size_t size, uint64_t offset, uint64_t count, size_t element) {
  if (count == 0) return 0;
  if (offset == 0 || offset % 8 || offset >= size || count > (size - offset) / element) return -EINVAL;
  return 0;
}

static int list_at(char *block, size_t size, uint64_t offset, char *const **out) {
  if (offset == 0 || offset % 8 || offset >= size) return -EINVAL;
  char **list = (char **)(void *)(block + offset);
  size_t room = (size - offset) / sizeof *list;
  for (size_t i = 0;; i++) {
    if (i >= room) return -EINVAL;
    uint64_t at = (uint64_t)(uintptr_t)list[i];
    if (at == 0) break;
    const char *text;
    if (string_at(block, size, at, &text) < 0) return -EINVAL;
    list[i] = (char *)text;
  }
  *out = list;
  return 0;
}

/* Relocate `count` entries at `offset` in place; *out = the array (NULL for none). */
static int entries_at(char *block, size_t size, uint64_t offset, uint64_t count,
                      const struct jail_plan_entry **out) {
  if (array_at(size, offset, count, sizeof(struct jail_plan_entry)) < 0) return -EINVAL;
  struct jail_plan_entry *entries = (struct jail_plan_entry *)(void *)(block + offset);
  for (size_t i = 0; i < count; i++) {
    struct jail_plan_entry *e = &entries[i];
    uint64_t data = (uint64_t)(uintptr_t)e->data;
    if (string_at(block, size, (uint64_t)(uintptr_t)e->path, &e->path) < 0 || e->path == NULL ||
        string_at(block, size, (uint64_t)(uintptr_t)e->target, &e->target) < 0)
      return -EINVAL;
    if (e->length && (data == 0 || data >= size || e->length > size - data)) return -EINVAL;
    e->data = e->length ? block + data : NULL;
  }
  *out = count ? entries : NULL;
  return 0;
}

static int rules_at(char *block, size_t size, uint64_t offset, uint64_t count,
                    const struct jail_landlock_rule **out) {
  if (array_at(size, offset, count, sizeof(struct jail_landlock_rule)) < 0 || count > JAIL_MAX_PATH_RULES + 2)
    return -EINVAL;
  struct jail_landlock_rule *rules = (struct jail_landlock_rule *)(void *)(block + offset);
  for (size_t i = 0; i < count; i++)
    if (string_at(block, size, (uint64_t)(uintptr_t)rules[i].path, &rules[i].path) < 0 ||
        rules[i].path == NULL)
      return -EINVAL;
  *out = count ? rules : NULL;
  return 0;
}

int jail_call_decode(void *block, size_t size, struct jail_plan *plan) {
  char *base = block;
  struct call_block header;
  if (size < sizeof header) return -EINVAL;
  memcpy(&header, base, sizeof header);
  if (header.magic != CALL_BLOCK_MAGIC || header.size != size) return -EINVAL;
  if (list_at(base, size, header.argv, &plan->argv) < 0 || plan->argv[0] == NULL) return -EINVAL;
  if (list_at(base, size, header.envp, &plan->envp) < 0) return -EINVAL;
  if (string_at(base, size, header.search_path, &plan->search_path) < 0 || plan->search_path == NULL)
    return -EINVAL;
  if (string_at(base, size, header.working_directory, &plan->working_directory) < 0 ||
      plan->working_directory == NULL)
    return -EINVAL;
  if (entries_at(base, size, header.workspace_entries, header.workspace_entry_count,
                 &plan->workspace_entries) < 0)
    return -EINVAL;
  plan->workspace_entry_count = header.workspace_entry_count;
  if (rules_at(base, size, header.landlock_rules, header.landlock_rule_count, &plan->landlock_rules) < 0)
    return -EINVAL;
  plan->landlock_rule_count = header.landlock_rule_count;
  plan->hold_program = header.hold_program != 0;
  return 0;
}

/* ---- the whole plan, for the spawner (spawner.c) ---- */

#define PLAN_BLOCK_MAGIC 0x646f6d65706c616eull /* "domeplan" */

struct plan_block {
  uint64_t magic;
  uint64_t size;
  struct jail_plan plan;     /* its pointers stored as offsets, 0 for NULL; seccomp as below */
  uint64_t seccomp_filter;   /* offset of the filter's instructions */
  uint64_t seccomp_length;   /* instructions */
  struct sock_fprog seccomp; /* filled in by the decoder, which points plan.seccomp at it */
};

#define AS_POINTER(type, offset) ((type)(uintptr_t)(offset))

static uint64_t append_binds(struct buffer *b, const struct jail_plan_bind *list, size_t count) {
  if (count == 0) return 0;
  struct jail_plan_bind *binds = calloc(count, sizeof *binds);
  if (binds == NULL) {
    b->failed = true;
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    binds[i] = list[i];
    binds[i].source = AS_POINTER(const char *, append_string(b, list[i].source));
    binds[i].target = AS_POINTER(const char *, append_string(b, list[i].target));
  }
  uint64_t at = append(b, binds, count * sizeof *binds);
  free(binds);
  return at;
}

int jail_plan_encode(const struct jail_plan *plan, dome_error *err) {
  struct buffer b = {0};
  struct plan_block header = {.magic = PLAN_BLOCK_MAGIC, .plan = *plan};
  struct jail_plan *p = &header.plan;
  append(&b, &header, sizeof header);
  p->image_rootfs = AS_POINTER(const char *, append_string(&b, plan->image_rootfs));
  p->root_entries = AS_POINTER(const struct jail_plan_entry *,
                               append_entries(&b, plan->root_entries, plan->root_entry_count));
  p->root_binds =
      AS_POINTER(const struct jail_plan_bind *, append_binds(&b, plan->root_binds, plan->root_bind_count));
  p->workspace_entries = AS_POINTER(const struct jail_plan_entry *,
                                    append_entries(&b, plan->workspace_entries, plan->workspace_entry_count));
  p->argv = plan->argv ? AS_POINTER(char *const *, append_list(&b, plan->argv)) : NULL;
  p->envp = plan->envp ? AS_POINTER(char *const *, append_list(&b, plan->envp)) : NULL;
  p->python_argv = plan->python_argv ? AS_POINTER(char *const *, append_list(&b, plan->python_argv)) : NULL;
  p->python_env = plan->python_env ? AS_POINTER(char *const *, append_list(&b, plan->python_env)) : NULL;
  p->search_path = AS_POINTER(const char *, append_string(&b, plan->search_path));
  p->working_directory = AS_POINTER(const char *, append_string(&b, plan->working_directory));
  p->landlock_rules = AS_POINTER(const struct jail_landlock_rule *,
                                 append_rules(&b, plan->landlock_rules, plan->landlock_rule_count));
  p->seccomp = NULL;
  if (plan->seccomp && plan->seccomp->len) {
    header.seccomp_length = plan->seccomp->len;
    header.seccomp_filter =
        append(&b, plan->seccomp->filter, plan->seccomp->len * sizeof(struct sock_filter));
  }
  if (!b.failed) {
    header.size = b.length;
    memcpy(b.data, &header, sizeof header);
  }
  return block_to_memfd(&b, "hand the jail's plan to the spawner", err);
}

static int binds_at(char *block, size_t size, uint64_t offset, uint64_t count,
                    const struct jail_plan_bind **out) {
  if (array_at(size, offset, count, sizeof(struct jail_plan_bind)) < 0) return -EINVAL;
  struct jail_plan_bind *binds = (struct jail_plan_bind *)(void *)(block + offset);
  for (size_t i = 0; i < count; i++)
    if (string_at(block, size, (uint64_t)(uintptr_t)binds[i].source, &binds[i].source) < 0 ||
        binds[i].source == NULL ||
        string_at(block, size, (uint64_t)(uintptr_t)binds[i].target, &binds[i].target) < 0 ||
        binds[i].target == NULL)
      return -EINVAL;
  *out = count ? binds : NULL;
  return 0;
}

/* A list that may be absent (offset 0: NULL). */
static int optional_list_at(char *block, size_t size, char *const **list) {
  uint64_t offset = (uint64_t)(uintptr_t)*list;
  if (offset == 0) return 0;
  return list_at(block, size, offset, list);
}

static int optional_string_at(char *block, size_t size, const char **text) {
  return string_at(block, size, (uint64_t)(uintptr_t)*text, text);
}

int jail_plan_decode(void *block, size_t size, struct jail_plan *plan) {
  char *base = block;
  if (size < sizeof(struct plan_block) || (uintptr_t)block % 8) return -EINVAL;
  struct plan_block *header = block;
  if (header->magic != PLAN_BLOCK_MAGIC || header->size != size) return -EINVAL;
  struct jail_plan *p = &header->plan;
  if (optional_string_at(base, size, &p->image_rootfs) < 0 ||
      entries_at(base, size, (uint64_t)(uintptr_t)p->root_entries, p->root_entry_count, &p->root_entries) <
          0 ||
      binds_at(base, size, (uint64_t)(uintptr_t)p->root_binds, p->root_bind_count, &p->root_binds) < 0 ||
      entries_at(base, size, (uint64_t)(uintptr_t)p->workspace_entries, p->workspace_entry_count,
                 &p->workspace_entries) < 0 ||
      optional_list_at(base, size, &p->argv) < 0 || optional_list_at(base, size, &p->envp) < 0 ||
      optional_list_at(base, size, &p->python_argv) < 0 || optional_list_at(base, size, &p->python_env) < 0 ||
      optional_string_at(base, size, &p->search_path) < 0 ||
      optional_string_at(base, size, &p->working_directory) < 0 ||
      rules_at(base, size, (uint64_t)(uintptr_t)p->landlock_rules, p->landlock_rule_count,
               &p->landlock_rules) < 0)
    return -EINVAL;
  if (header->seccomp_length) {
    if (header->seccomp_length > 0xffff ||
        array_at(size, header->seccomp_filter, header->seccomp_length, sizeof(struct sock_filter)) < 0)
      return -EINVAL;
    header->seccomp.len = (unsigned short)header->seccomp_length;
    header->seccomp.filter = (struct sock_filter *)(void *)(base + header->seccomp_filter);
    p->seccomp = &header->seccomp;
  }
  *plan = *p;
  return 0;
}
