/* Loader: the dome BPF object (skeleton), installing decision tables into its maps, attaching jails. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "bpf/dome.h"
#include "dome.skel.h"
#include "supervisor/common/cleanup.h"
#include "supervisor/kernel/loader.h"

const char *dome_enforcement_level_name(enum dome_enforcement_level level) {
  switch (level) {
    case DOME_LEVEL_NONE:
      return "none";
    case DOME_LEVEL_REDUCED:
      return "reduced";
    case DOME_LEVEL_FULL:
      return "full";
  }
  return "?";
}

static bool lsm_list_has_bpf(void) {
  char list[512] = "";
  FILE *file = fopen("/sys/kernel/security/lsm", "re");
  if (!file) return false;
  size_t n = fread(list, 1, sizeof(list) - 1, file);
  fclose(file);
  list[n] = 0;
  for (char *save = NULL, *name = strtok_r(list, ",\n", &save); name; name = strtok_r(NULL, ",\n", &save))
    if (strcmp(name, "bpf") == 0) return true;
  return false;
}

enum dome_enforcement_level dome_kernel_probe_level(void) {
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) return DOME_LEVEL_NONE;
  if (access("/sys/fs/cgroup/cgroup.controllers", R_OK) != 0 &&
      access("/sys/fs/cgroup/unified/cgroup.controllers", R_OK) != 0)
    return DOME_LEVEL_NONE;
  return lsm_list_has_bpf() ? DOME_LEVEL_FULL : DOME_LEVEL_REDUCED;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *format, va_list args) {
  const char *debug = getenv("DOME_BPF_DEBUG"); /* set and non-empty: libbpf's warnings and debug log */
  if ((level == LIBBPF_WARN || level == LIBBPF_DEBUG) && debug && *debug)
    return vfprintf(stderr, format, args);
  return 0;
}

static struct bpf_program *lsm_programs(struct dome_bpf *skel, size_t i) {
  struct bpf_program *programs[] = {skel->progs.dome_file_open,
                                    skel->progs.dome_file_receive,
                                    skel->progs.dome_bprm_check,
                                    skel->progs.dome_socket_connect,
                                    skel->progs.dome_ptrace_access_check,
                                    skel->progs.dome_task_kill,
                                    skel->progs.dome_bpf,
                                    skel->progs.dome_bpf_map,
                                    skel->progs.dome_bpf_prog,
                                    skel->progs.dome_socket_create,
                                    skel->progs.dome_inode_rename,
                                    skel->progs.dome_sb_mount,
                                    skel->progs.dome_sb_umount,
                                    skel->progs.dome_move_mount,
                                    skel->progs.dome_sb_pivotroot,
                                    skel->progs.dome_path_chroot,
                                    skel->progs.dome_file_permission,
                                    skel->progs.dome_path_link,
                                    skel->progs.dome_path_rename};
  _Static_assert(sizeof(programs) / sizeof(programs[0]) == DOME_KERNEL_LSM_PROGRAMS, "LSM program list");
  return i < DOME_KERNEL_LSM_PROGRAMS ? programs[i] : NULL;
}

static int attach_lsm(struct dome_kernel *kernel, dome_error *err) {
  for (size_t i = 0; i < DOME_KERNEL_LSM_PROGRAMS; i++) {
    if (kernel->lsm_links[i]) continue;
    kernel->lsm_links[i] = bpf_program__attach_lsm(lsm_programs(kernel->skel, i));
    if (!kernel->lsm_links[i]) {
      int e = errno;
      return dome_error_set_errno(err, e, "attach LSM program `%s`",
                                  bpf_program__name(lsm_programs(kernel->skel, i)));
    }
  }
  return 0;
}

int dome_kernel_set_lsm_suspended(struct dome_kernel *kernel, bool suspended) {
  if (kernel->level != DOME_LEVEL_FULL) return 0;
  if (!suspended) {
    dome_error err = {0};
    return attach_lsm(kernel, &err);
  }
  for (size_t i = 0; i < DOME_KERNEL_LSM_PROGRAMS; i++) {
    bpf_link__destroy(kernel->lsm_links[i]);
    kernel->lsm_links[i] = NULL;
  }
  return 0;
}

int dome_kernel_open(struct dome_kernel **kernel_out, const struct dome_kernel_options *options,
                     dome_error *err) {
  enum dome_enforcement_level level = options ? options->level : DOME_LEVEL_REDUCED;
  if (level == DOME_LEVEL_NONE)
    return dome_error_set(err, ENOTSUP, "kernel enforcement: level none requested");
  libbpf_set_print(libbpf_quiet);
  struct dome_kernel *kernel = calloc(1, sizeof(*kernel));
  if (!kernel) return dome_error_set_errno(err, ENOMEM, "kernel enforcement");
  kernel->level = level;
  kernel->skel = dome_bpf__open();
  if (!kernel->skel) {
    int e = errno;
    free(kernel);
    return dome_error_set_errno(err, e, "open BPF object");
  }
  /* The LSM programs are global: never load them below the full level (host safety). */
  for (size_t i = 0; i < DOME_KERNEL_LSM_PROGRAMS; i++)
    bpf_program__set_autoload(lsm_programs(kernel->skel, i), level == DOME_LEVEL_FULL);
  kernel->skel->rodata->lsm_decides_connect = level == DOME_LEVEL_FULL;
  int r = dome_bpf__load(kernel->skel);
  if (r) {
    dome_error_set_errno(err, -r, "load BPF programs (level %s)", dome_enforcement_level_name(level));
    dome_kernel_close(kernel);
    return dome_error_code(err);
  }
  if (level == DOME_LEVEL_FULL && (r = attach_lsm(kernel, err)) < 0) {
    dome_kernel_close(kernel);
    return r;
  }
  r = dome_kernel_events_open(kernel, err);
  if (r < 0) {
    dome_kernel_close(kernel);
    return r;
  }
  *kernel_out = kernel;
  return 0;
}

void dome_kernel_close(struct dome_kernel *kernel) {
  if (!kernel) return;
  while (kernel->attachments) dome_kernel_detach(kernel, kernel->attachments);
  while (kernel->prelinked) dome_kernel_prelink_drop(kernel, kernel->prelinked->cgroup_id);
  dome_kernel_events_close(kernel);
  for (size_t i = 0; i < DOME_KERNEL_LSM_PROGRAMS; i++) bpf_link__destroy(kernel->lsm_links[i]);
  for (size_t i = 0; i < DOME_KERNEL_MAX_RULESETS; i++) {
    dome_rule_tables_free(&kernel->rulesets[i].current);
    dome_rule_tables_free(&kernel->rulesets[i].previous);
    dome_rule_tables_free(&kernel->rulesets[i].shadow);
    dome_rule_tables_free(&kernel->rulesets[i].previous_shadow);
  }
  dome_bpf__destroy(kernel->skel);
  free(kernel);
}

enum dome_enforcement_level dome_kernel_level(const struct dome_kernel *kernel) {
  return kernel->level;
}

/* ---------------------------------------------------------------- tables → maps */

static void net_key(struct dome_net_key *key, const struct dome_net_entry *e, uint32_t generation) {
  memset(key, 0, sizeof(*key));
  key->prefixlen = 64 + e->prefix_len;
  key->generation = generation;
  key->action = e->action;
  key->protocol = e->protocol;
  key->family = e->family == AF_INET ? 4 : 6;
  memcpy(key->address, e->address, 16);
}

static const struct dome_net_entry *sort_entries;

static int group_compare(const void *a, const void *b) {
  const struct dome_net_entry *x = &sort_entries[*(const size_t *)a], *y = &sort_entries[*(const size_t *)b];
  int c = memcmp(x, y,
                 offsetof(struct dome_net_entry, port_first)); /* action, protocol, family, length, address */
  if (c) return c;
  return x->port_first < y->port_first ? -1 : x->port_first > y->port_first;
}

/* One LPM element per group (action, protocol, family, prefix): its port ranges in port order. */
static int install_net(struct dome_kernel *kernel, const struct dome_rule_tables *tables, uint32_t generation,
                       dome_error *err) {
  int fd = bpf_map__fd(kernel->skel->maps.net_rules);
  if (tables->net_count == 0) return 0;
  size_t *order = calloc(tables->net_count, sizeof(*order));
  if (!order) return dome_error_set_errno(err, ENOMEM, "network table");
  for (size_t i = 0; i < tables->net_count; i++) order[i] = i;
  sort_entries = tables->net;
  qsort(order, tables->net_count, sizeof(*order), group_compare);
  int r = 0;
  for (size_t i = 0; i < tables->net_count && r == 0;) {
    const struct dome_net_entry *e = &tables->net[order[i]];
    struct dome_net_key key;
    struct dome_net_value value = {0};
    net_key(&key, e, generation);
    size_t j = i;
    for (; j < tables->net_count; j++) {
      const struct dome_net_entry *o = &tables->net[order[j]];
      if (memcmp(o, e, offsetof(struct dome_net_entry, port_first)) != 0) break;
      if (value.count >= DOME_BPF_PORT_RANGES) {
        r = dome_error_set(err, E2BIG, "network entry %zu: more than %d port ranges for one prefix", order[j],
                           DOME_BPF_PORT_RANGES);
        break;
      }
      value.ranges[value.count++] = (struct dome_port_range){
          .first = o->port_first, .last = o->port_last, .entry = (uint32_t)order[j], .decision = o->decision};
    }
    if (r == 0 && bpf_map_update_elem(fd, &key, &value, BPF_ANY) != 0)
      r = dome_error_set_errno(err, errno, "network entry %zu: update map `net_rules`", order[i]);
    i = j;
  }
  free(order);
  return r;
}

/* The LPM keys of a file entry (kernel.h/dome.h): SUBTREE "/x" → "/x/" and "/x\0"; EXACT → "/x\0". */
static size_t file_keys(const struct dome_file_entry *e, uint32_t generation, struct dome_file_key keys[2]) {
  size_t length = strlen(e->path), count = 0;
  memset(keys, 0, 2 * sizeof(*keys));
  for (size_t k = 0; k < 2; k++) {
    keys[k].generation = generation;
    keys[k].access = e->access;
    memcpy(keys[k].path, e->path, length); /* the rest stays zero: path[length] is the NUL */
  }
  if (e->match == DOME_MATCH_SUBTREE) {
    if (strcmp(e->path, "/") == 0) {
      keys[0].prefixlen = 64 + 8; /* "/" covers every path */
      return 1;
    }
    keys[count].path[length] = '/';
    keys[count++].prefixlen = (uint32_t)(64 + 8 * (length + 1));
  }
  keys[count++].prefixlen = (uint32_t)(64 + 8 * (length + 1));
  return count;
}

static int install_files(struct dome_kernel *kernel, const struct dome_rule_tables *tables,
                         uint32_t generation, dome_error *err) {
  int fd = bpf_map__fd(kernel->skel->maps.file_rules);
  int inode_fd = bpf_map__fd(kernel->skel->maps.inode_rules);
  /* Subtree entries first so that an EXACT entry on the same path replaces the subtree's "/x\0" key. */
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < tables->file_count; i++) {
      const struct dome_file_entry *e = &tables->files[i];
      if ((pass == 0) != (e->match == DOME_MATCH_SUBTREE)) continue;
      if (strlen(e->path) > DOME_KERNEL_PATH_MAX)
        return dome_error_set(err, ENAMETOOLONG, "file entry %zu: path longer than %d bytes", i,
                              DOME_KERNEL_PATH_MAX);
      struct dome_file_key keys[2];
      size_t count = file_keys(e, generation, keys);
      struct dome_file_value value = {.entry = (uint32_t)i, .decision = e->decision};
      for (size_t k = 0; k < count; k++)
        if (bpf_map_update_elem(fd, &keys[k], &value, BPF_ANY) != 0)
          return dome_error_set_errno(err, errno, "file entry %zu: update map `file_rules`", i);
      struct stat st;
      if (stat(e->path, &st) != 0) continue; /* not on this system (yet): the path table still decides */
      struct dome_inode_key inode_key = {.generation = generation,
                                         .access = e->access,
                                         .subtree = e->match == DOME_MATCH_SUBTREE,
                                         .device = ((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev),
                                         .inode = st.st_ino};
      if (bpf_map_update_elem(inode_fd, &inode_key, &value, BPF_ANY) != 0)
        return dome_error_set_errno(err, errno, "file entry %zu: update map `inode_rules`", i);
    }
  }
  return 0;
}

/* Remove every key of `generation` from the rule maps (best effort). */
static void remove_generation(struct dome_kernel *kernel, uint32_t generation) {
  struct {
    int fd;
    size_t key_size;
    size_t generation_offset;
  } maps[] = {
      {bpf_map__fd(kernel->skel->maps.net_rules), sizeof(struct dome_net_key),
       offsetof(struct dome_net_key, generation)},
      {bpf_map__fd(kernel->skel->maps.file_rules), sizeof(struct dome_file_key),
       offsetof(struct dome_file_key, generation)},
      {bpf_map__fd(kernel->skel->maps.inode_rules), sizeof(struct dome_inode_key),
       offsetof(struct dome_inode_key, generation)},
  };
  /* Collect the generation's keys in one pass, then delete them (deleting while iterating would restart the
   * iteration): O(entries) map calls. */
  for (size_t m = 0; m < sizeof(maps) / sizeof(maps[0]); m++) {
    size_t capacity = 0, count = 0, size = maps[m].key_size;
    unsigned char *found = NULL, current[sizeof(struct dome_file_key)], next[sizeof(struct dome_file_key)];
    bool first = true;
    for (unsigned steps = 0; steps < (1u << 18); steps++) {
      if (bpf_map_get_next_key(maps[m].fd, first ? NULL : current, next) != 0) break;
      first = false;
      memcpy(current, next, size);
      uint32_t g;
      memcpy(&g, next + maps[m].generation_offset, sizeof(g));
      if (g != generation) continue;
      if (count == capacity) {
        size_t grown_capacity = capacity ? capacity * 2 : 256;
        unsigned char *grown = realloc(found, grown_capacity * size);
        if (!grown) break; /* leftover entries of a dead generation are never looked up */
        found = grown;
        capacity = grown_capacity;
      }
      memcpy(found + count++ * size, next, size);
    }
    for (size_t i = 0; i < count; i++) bpf_map_delete_elem(maps[m].fd, found + i * size);
    free(found);
  }
}

int dome_kernel_rule_entries(const struct dome_kernel *kernel, size_t counts[3]) {
  int fds[3] = {bpf_map__fd(kernel->skel->maps.net_rules), bpf_map__fd(kernel->skel->maps.file_rules),
                bpf_map__fd(kernel->skel->maps.inode_rules)};
  for (size_t m = 0; m < 3; m++) {
    unsigned char current[sizeof(struct dome_file_key)], next[sizeof(struct dome_file_key)];
    counts[m] = 0;
    for (bool first = true; bpf_map_get_next_key(fds[m], first ? NULL : current, next) == 0; first = false) {
      memcpy(current, next, sizeof(next));
      if (++counts[m] > (1u << 18)) return -E2BIG;
    }
  }
  return 0;
}

int dome_kernel_program_stats(const struct dome_kernel *kernel,
                              void (*fn)(void *context, const char *program, uint64_t run_ns, uint64_t runs),
                              void *context) {
  struct bpf_program *program;
  bpf_object__for_each_program(program, kernel->skel->obj) {
    int fd = bpf_program__fd(program);
    if (fd < 0) continue; /* not loaded at this level */
    struct bpf_prog_info info = {0};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0) return -errno;
    fn(context, bpf_program__name(program), info.run_time_ns, info.run_cnt);
  }
  return 0;
}

int dome_kernel_enable_stats(void) {
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  return fd < 0 ? -errno : fd;
}

static int copy_tables(struct dome_rule_tables *to, const struct dome_rule_tables *from, dome_error *err) {
  char *json = NULL;
  int r = dome_rule_tables_to_json(from, false, &json, err);
  if (r < 0) return r;
  r = dome_rule_tables_from_json(json, strlen(json), to, err);
  free(json);
  return r;
}

/* Validate and copy `tables`, write them into the rule maps under a fresh generation. Returns the
 * generation (> 0) with *copy filled, or -errno. */
static int install_generation(struct dome_kernel *kernel, uint32_t ruleset,
                              const struct dome_rule_tables *tables, struct dome_rule_tables *copy,
                              dome_error *err) {
  if (ruleset >= DOME_KERNEL_MAX_RULESETS)
    return dome_error_set(err, EINVAL, "ruleset %u out of range (0..%d)", ruleset,
                          DOME_KERNEL_MAX_RULESETS - 1);
  int r = dome_rule_tables_validate(tables, err);
  if (r < 0) return r;
  dome_rule_tables_init(copy);
  if ((r = copy_tables(copy, tables, err)) < 0) return r;
  uint32_t generation = ++kernel->last_generation;
  if (generation == 0) generation = ++kernel->last_generation;
  r = install_net(kernel, copy, generation, err);
  if (r >= 0 && kernel->level == DOME_LEVEL_FULL) r = install_files(kernel, copy, generation, err);
  if (r >= 0 && kernel->level == DOME_LEVEL_FULL)
    r = dome_kernel_install_aliases(kernel, copy, generation, err);
  if (r < 0) {
    remove_generation(kernel, generation);
    dome_rule_tables_free(copy);
    return r;
  }
  return (int)generation;
}

/* The switch: one array update of the ruleset's two generations, so every jail of this ruleset moves to the
 * new tables at once. Returns 0 or -errno. */
static int switch_ruleset(struct dome_kernel *kernel, uint32_t ruleset, uint32_t generation,
                          uint32_t shadow_generation, dome_error *err) {
  uint32_t slot = ruleset;
  struct dome_ruleset value = {.generation = generation, .shadow_generation = shadow_generation};
  if (bpf_map_update_elem(bpf_map__fd(kernel->skel->maps.rulesets), &slot, &value, BPF_ANY) != 0)
    return dome_error_set_errno(err, errno, "switch ruleset %u to generation %u (shadow %u)", ruleset,
                                generation, shadow_generation);
  return 0;
}

int dome_kernel_install_tables(struct dome_kernel *kernel, uint32_t ruleset,
                               const struct dome_rule_tables *tables, dome_error *err) {
  struct dome_rule_tables copy;
  int r = install_generation(kernel, ruleset, tables, &copy, err);
  if (r < 0) return dome_error_wrap(err, "install tables for ruleset %u", ruleset);
  uint32_t generation = (uint32_t)r;
  struct dome_kernel_ruleset *state = &kernel->rulesets[ruleset];
  if ((r = switch_ruleset(kernel, ruleset, generation, state->shadow_generation, err)) < 0) {
    remove_generation(kernel, generation);
    dome_rule_tables_free(&copy);
    return dome_error_wrap(err, "install tables for ruleset %u", ruleset);
  }
  if (state->previous_generation) remove_generation(kernel, state->previous_generation);
  dome_rule_tables_free(&state->previous);
  state->previous = state->current;
  state->previous_generation = state->generation;
  state->current = copy;
  state->generation = generation;
  return 0;
}

int dome_kernel_install_shadow_tables(struct dome_kernel *kernel, uint32_t ruleset,
                                      const struct dome_rule_tables *tables, dome_error *err) {
  if (ruleset >= DOME_KERNEL_MAX_RULESETS || kernel->rulesets[ruleset].generation == 0)
    return dome_error_set(err, ENOENT, "shadow tables for ruleset %u: the ruleset is not installed", ruleset);
  struct dome_kernel_ruleset *state = &kernel->rulesets[ruleset];
  struct dome_rule_tables copy;
  dome_rule_tables_init(&copy);
  uint32_t generation = 0;
  int r;
  if (tables) {
    if ((r = install_generation(kernel, ruleset, tables, &copy, err)) < 0)
      return dome_error_wrap(err, "install shadow tables for ruleset %u", ruleset);
    generation = (uint32_t)r;
  }
  if ((r = switch_ruleset(kernel, ruleset, state->generation, generation, err)) < 0) {
    if (generation) remove_generation(kernel, generation);
    dome_rule_tables_free(&copy);
    return dome_error_wrap(err, "install shadow tables for ruleset %u", ruleset);
  }
  if (state->previous_shadow_generation) remove_generation(kernel, state->previous_shadow_generation);
  dome_rule_tables_free(&state->previous_shadow);
  state->previous_shadow = state->shadow;
  state->previous_shadow_generation = state->shadow_generation;
  state->shadow = copy;
  state->shadow_generation = generation;
  return 0;
}

/* ---------------------------------------------------------------- jails */

static struct bpf_program *cgroup_program(struct dome_bpf *skel, size_t i) {
  struct bpf_program *programs[] = {skel->progs.dome_connect4,    skel->progs.dome_connect6,
                                    skel->progs.dome_sendmsg4,    skel->progs.dome_sendmsg6,
                                    skel->progs.dome_bind4,       skel->progs.dome_bind6,
                                    skel->progs.dome_sock_create, skel->progs.dome_egress};
  _Static_assert(sizeof(programs) / sizeof(programs[0]) == DOME_KERNEL_CGROUP_PROGRAMS,
                 "cgroup program list");
  return i < DOME_KERNEL_CGROUP_PROGRAMS ? programs[i] : NULL;
}

/* The jails map (dome.h): open addressing over an array. The slot for cgroup id `key`: the first empty or
 * removed slot of its chain, or -EEXIST when the id is present, -ENOSPC when the chain is full. The jail must
 * not have run yet (its slot is written as a whole before any of its tasks can look it up). */
static int jail_slot_free(int fd, uint64_t key) {
  int found = -1;
  for (uint32_t i = 0; i < DOME_BPF_JAIL_PROBES; i++) {
    uint32_t index = (uint32_t)(key + i) & (DOME_BPF_JAIL_SLOTS - 1);
    struct dome_jail value;
    if (bpf_map_lookup_elem(fd, &index, &value) != 0) return -errno;
    if (value.cgroup_id == key) return -EEXIST;
    if (found < 0 && (value.cgroup_id == 0 || value.cgroup_id == DOME_BPF_JAIL_TOMBSTONE)) found = (int)index;
    if (value.cgroup_id == 0) break; /* the chain ends here */
  }
  return found >= 0 ? found : -ENOSPC;
}

/* Remove a jail: a tombstone keeps later chains intact, unless the chain ends right after this slot. */
static void jail_slot_clear(int fd, uint32_t index) {
  uint32_t next = (index + 1) & (DOME_BPF_JAIL_SLOTS - 1);
  struct dome_jail after = {0}, cleared = {0};
  if (bpf_map_lookup_elem(fd, &next, &after) != 0 || after.cgroup_id != 0)
    cleared.cgroup_id = DOME_BPF_JAIL_TOMBSTONE;
  bpf_map_update_elem(fd, &index, &cleared, BPF_ANY);
}

/* Make the attachment's links to the leaf `cgroup_fd`; on failure destroy the ones made. */
static int make_links(struct dome_kernel *kernel, struct dome_kernel_attachment *attachment, int cgroup_fd,
                      dome_error *err) {
  for (size_t i = 0; i < DOME_KERNEL_CGROUP_PROGRAMS; i++) {
    attachment->links[i] = bpf_program__attach_cgroup(cgroup_program(kernel->skel, i), cgroup_fd);
    if (!attachment->links[i]) {
      int e = errno;
      dome_error_set_errno(err, e, "attach jail: attach `%s` to cgroup %llu",
                           bpf_program__name(cgroup_program(kernel->skel, i)),
                           (unsigned long long)attachment->cgroup_id);
      for (size_t j = 0; j < i; j++) bpf_link__destroy(attachment->links[j]);
      memset(attachment->links, 0, sizeof attachment->links);
      return -e;
    }
  }
  return 0;
}

static struct dome_kernel_attachment *find(struct dome_kernel_attachment *list, uint64_t cgroup_id) {
  for (struct dome_kernel_attachment *a = list; a; a = a->next)
    if (a->cgroup_id == cgroup_id) return a;
  return NULL;
}

/* Unlink the attachment of `cgroup_id` from `*list` (ids are unique in each list) and return it, or NULL
 * when there is none. */
static struct dome_kernel_attachment *take(struct dome_kernel_attachment **list, uint64_t cgroup_id) {
  for (struct dome_kernel_attachment **p = list; *p; p = &(*p)->next) {
    struct dome_kernel_attachment *attachment = *p;
    if (attachment->cgroup_id == cgroup_id) {
      *p = attachment->next;
      attachment->next = NULL;
      return attachment;
    }
  }
  return NULL;
}

int dome_kernel_prelink(struct dome_kernel *kernel, int cgroup_fd, uint64_t cgroup_id, dome_error *err) {
  if (cgroup_fd < 0 || cgroup_id == 0 || cgroup_id == DOME_BPF_JAIL_TOMBSTONE)
    return dome_error_set(err, EINVAL, "prelink jail: no cgroup leaf");
  if (find(kernel->attachments, cgroup_id) || find(kernel->prelinked, cgroup_id))
    return dome_error_set(err, EEXIST, "prelink jail: cgroup %llu is already attached",
                          (unsigned long long)cgroup_id);
  struct dome_kernel_attachment *attachment = calloc(1, sizeof(*attachment));
  if (!attachment) return dome_error_set_errno(err, ENOMEM, "prelink jail");
  attachment->cgroup_id = cgroup_id;
  attachment->slot = UINT32_MAX; /* none yet */
  int rc = make_links(kernel, attachment, cgroup_fd, err);
  if (rc < 0) {
    free(attachment);
    return rc;
  }
  attachment->next = kernel->prelinked;
  kernel->prelinked = attachment;
  return 0;
}

static void destroy_links(struct dome_kernel_attachment *attachment) {
  for (size_t i = 0; i < DOME_KERNEL_CGROUP_PROGRAMS; i++) bpf_link__destroy(attachment->links[i]);
}

void dome_kernel_prelink_drop(struct dome_kernel *kernel, uint64_t cgroup_id) {
  struct dome_kernel_attachment *attachment = take(&kernel->prelinked, cgroup_id);
  if (attachment == NULL) return;
  destroy_links(attachment);
  free(attachment);
}

size_t dome_kernel_prelinked_count(const struct dome_kernel *kernel) {
  size_t count = 0;
  for (const struct dome_kernel_attachment *a = kernel->prelinked; a; a = a->next) count++;
  return count;
}

int dome_kernel_attach(struct dome_kernel *kernel, const struct dome_kernel_jail *jail,
                       struct dome_kernel_attachment **attachment_out, dome_error *err) {
  if (jail->cgroup_fd < 0 || jail->cgroup_id == 0)
    return dome_error_set(err, 0, "attach jail: no cgroup leaf");
  if (jail->ruleset >= DOME_KERNEL_MAX_RULESETS || kernel->rulesets[jail->ruleset].generation == 0)
    return dome_error_set(err, ENOENT, "attach jail: ruleset %u is not installed", jail->ruleset);
  if (find(kernel->attachments, jail->cgroup_id))
    return dome_error_set(err, EEXIST, "attach jail: cgroup %llu is already attached",
                          (unsigned long long)jail->cgroup_id);
  struct dome_jail value = {.ruleset = jail->ruleset,
                            .flags = jail->allow_raw_sockets ? DOME_JAIL_ALLOW_RAW : 0,
                            .families = jail->families ? jail->families : DOME_FAMILIES_DEFAULT,
                            .egress_quota = jail->egress_quota_bytes};
  int jails_fd = bpf_map__fd(kernel->skel->maps.jails);
  uint64_t key = jail->cgroup_id;
  if (key == DOME_BPF_JAIL_TOMBSTONE) return dome_error_set(err, EINVAL, "attach jail: invalid cgroup id");
  int slot = jail_slot_free(jails_fd, key);
  if (slot < 0)
    return dome_error_set_errno(err, -slot, "attach jail: register cgroup %llu (no free jail slot among %d)",
                                (unsigned long long)key, DOME_BPF_JAIL_PROBES);
  /* links made ahead (a prepared jail's leaf) are taken as they are: the programs were there before
   * anything ran in the leaf, refusing until the slot below exists */
  struct dome_kernel_attachment *attachment = take(&kernel->prelinked, key);
  if (attachment == NULL) {
    if ((attachment = calloc(1, sizeof(*attachment))) == NULL)
      return dome_error_set_errno(err, ENOMEM, "attach jail");
    attachment->cgroup_id = key;
    int rc = make_links(kernel, attachment, jail->cgroup_fd, err);
    if (rc < 0) {
      free(attachment);
      return rc;
    }
  }
  /* the slot last: from this write on the leaf's programs apply the jail's rules */
  value.cgroup_id = key;
  uint32_t index = (uint32_t)slot;
  if (bpf_map_update_elem(jails_fd, &index, &value, BPF_ANY) != 0) {
    int e = errno;
    destroy_links(attachment);
    free(attachment);
    return dome_error_set_errno(err, e, "attach jail: register cgroup %llu", (unsigned long long)key);
  }
  attachment->slot = index;
  attachment->next = kernel->attachments;
  kernel->attachments = attachment;
  *attachment_out = attachment;
  return 0;
}

void dome_kernel_detach(struct dome_kernel *kernel, struct dome_kernel_attachment *attachment) {
  if (!attachment) return;
  take(&kernel->attachments, attachment->cgroup_id);
  destroy_links(attachment);
  jail_slot_clear(bpf_map__fd(kernel->skel->maps.jails), attachment->slot);
  free(attachment);
}

int64_t dome_kernel_egress_bytes(struct dome_kernel *kernel,
                                 const struct dome_kernel_attachment *attachment) {
  struct dome_jail value;
  uint32_t index = attachment->slot;
  if (bpf_map_lookup_elem(bpf_map__fd(kernel->skel->maps.jails), &index, &value) != 0 ||
      value.cgroup_id != attachment->cgroup_id)
    return -ENOENT;
  return (int64_t)value.egress_bytes;
}
