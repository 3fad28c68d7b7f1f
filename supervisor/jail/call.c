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

int jail_call_encode(const struct jail_plan *plan, dome_error *err) {
  struct buffer b = {0};
  struct call_block header = {.magic = CALL_BLOCK_MAGIC};
  append(&b, &header, sizeof header);
  header.argv = append_list(&b, plan->argv);
  header.envp = append_list(&b, plan->envp);
  header.search_path = append_string(&b, plan->search_path);
  header.working_directory = append_string(&b, plan->working_directory);

  size_t entry_count = plan->workspace_entry_count;
  struct jail_plan_entry *entries = calloc(entry_count ? entry_count : 1, sizeof *entries);
  if (entries == NULL) b.failed = true;
  for (size_t i = 0; entries && i < entry_count; i++) {
    const struct jail_plan_entry *e = &plan->workspace_entries[i];
    entries[i] = *e;
    entries[i].path = (const char *)(uintptr_t)append_string(&b, e->path);
    entries[i].target = (const char *)(uintptr_t)append_string(&b, e->target);
    entries[i].data = e->length ? (const void *)(uintptr_t)append(&b, e->data, e->length) : NULL;
  }
  header.workspace_entries = entries ? append(&b, entries, entry_count * sizeof *entries) : 0;
  header.workspace_entry_count = entry_count;
  free(entries);

  size_t rule_count = plan->landlock_rule_count;
  struct jail_landlock_rule *rules = calloc(rule_count ? rule_count : 1, sizeof *rules);
  if (rules == NULL) b.failed = true;
  for (size_t i = 0; rules && i < rule_count; i++) {
    rules[i] = plan->landlock_rules[i];
    rules[i].path = (const char *)(uintptr_t)append_string(&b, plan->landlock_rules[i].path);
  }
  header.landlock_rules = rules ? append(&b, rules, rule_count * sizeof *rules) : 0;
  header.landlock_rule_count = rule_count;
  free(rules);

  if (b.failed) {
    free(b.data);
    return b.length + 1 > JAIL_CALL_MAX_BYTES
               ? dome_error_set(err, E2BIG, "hand the call to a prepared jail: over %llu bytes",
                                JAIL_CALL_MAX_BYTES)
               : dome_error_set(err, ENOMEM, "hand the call to a prepared jail: out of memory");
  }
  header.size = b.length;
  memcpy(b.data, &header, sizeof header);

  int fd = memfd_create("dome-call", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    free(b.data);
    return dome_error_set_errno(err, errno, "hand the call to a prepared jail: memfd_create");
  }
  size_t done = 0;
  while (done < b.length) {
    ssize_t n = write(fd, b.data + done, b.length - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      free(b.data);
      close(fd);
      return dome_error_set_errno(err, e, "hand the call to a prepared jail: write");
    }
    done += (size_t)n;
  }
  free(b.data);
  /* What the child validated is what it uses: the block can no longer change. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    int e = errno;
    close(fd);
    return dome_error_set_errno(err, e, "hand the call to a prepared jail: seal");
  }
  return fd;
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

  if (array_at(size, header.workspace_entries, header.workspace_entry_count, sizeof(struct jail_plan_entry)) <
      0)
    return -EINVAL;
  struct jail_plan_entry *entries = (struct jail_plan_entry *)(void *)(base + header.workspace_entries);
  for (size_t i = 0; i < header.workspace_entry_count; i++) {
    struct jail_plan_entry *e = &entries[i];
    uint64_t data = (uint64_t)(uintptr_t)e->data;
    if (string_at(base, size, (uint64_t)(uintptr_t)e->path, &e->path) < 0 || e->path == NULL ||
        string_at(base, size, (uint64_t)(uintptr_t)e->target, &e->target) < 0)
      return -EINVAL;
    if (e->length && (data == 0 || data >= size || e->length > size - data)) return -EINVAL;
    e->data = e->length ? base + data : NULL;
  }
  plan->workspace_entries = header.workspace_entry_count ? entries : NULL;
  plan->workspace_entry_count = header.workspace_entry_count;

  if (array_at(size, header.landlock_rules, header.landlock_rule_count, sizeof(struct jail_landlock_rule)) <
          0 ||
      header.landlock_rule_count > JAIL_MAX_PATH_RULES + 2)
    return -EINVAL;
  struct jail_landlock_rule *rules = (struct jail_landlock_rule *)(void *)(base + header.landlock_rules);
  for (size_t i = 0; i < header.landlock_rule_count; i++)
    if (string_at(base, size, (uint64_t)(uintptr_t)rules[i].path, &rules[i].path) < 0 ||
        rules[i].path == NULL)
      return -EINVAL;
  plan->landlock_rules = header.landlock_rule_count ? rules : NULL;
  plan->landlock_rule_count = header.landlock_rule_count;
  return 0;
}
