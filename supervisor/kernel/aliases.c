/* Loader, full level: the map entries that keep aliases of denied files denied (docs/kernel-enforcement.md,
 * "Hard links, renames and other aliases").
 *   - Hard links that already exist: every file with more than one name beneath a DENY subtree entry gets an
 *     EXACT device+inode entry carrying the decision of its path in the subtree, so any other name of it
 *     (made before the jail started, from outside the subtree) is decided as that path.
 *   - "Deny beneath" markers: for every proper ancestor /a of a DENY entry's path, an EXACT key "/a" with the
 *     pseudo-access DOME_BPF_ACCESS_DENY_BENEATH, so path_rename refuses moving /a (and the entry with it).
 * New links and renames made inside a jail are decided by the path_link/path_rename programs. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fts.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "bpf/dome.h"
#include "dome.skel.h"
#include "supervisor/kernel/loader.h"

/* Files and directories visited by the hard-link scan of one install, at most. */
#define SCAN_LIMIT (1u << 18)

static int add_markers(int fd, const struct dome_rule_tables *tables, size_t index, uint32_t generation,
                       dome_error *err) {
  const char *path = tables->files[index].path;
  size_t length = strlen(path);
  struct dome_file_value value = {.entry = (uint32_t)index, .decision = DOME_DECISION_DENY};
  for (size_t end = 1; end < length; end++) {
    if (path[end] != '/') continue;
    struct dome_file_key key = {.prefixlen = (uint32_t)(64 + 8 * (end + 1)),
                                .generation = generation,
                                .access = DOME_BPF_ACCESS_DENY_BENEATH};
    memcpy(key.path, path, end); /* "/a" + NUL (the key is zeroed) */
    if (bpf_map_update_elem(fd, &key, &value, BPF_NOEXIST) != 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "file entry %zu: update map `file_rules` (deny marker)", index);
  }
  return 0;
}

/* One file with several names beneath a deny subtree: an EXACT inode entry per access its path denies
 * through an explicit entry (the default deny is not an entry: it is not recorded). */
static int add_linked_file(int fd, const struct dome_rule_tables *tables, const FTSENT *file,
                           uint32_t generation, dome_error *err) {
  for (unsigned access = DOME_FILE_READ; access <= DOME_FILE_EXEC; access <<= 1) {
    long entry = -1;
    enum dome_decision decision =
        dome_rule_tables_lookup_file(tables, (enum dome_file_access)access, file->fts_path, &entry);
    if (decision == DOME_DECISION_ALLOW || entry < 0) continue;
    struct dome_inode_key key = {
        .generation = generation,
        .access = (uint8_t)access,
        .subtree = 0,
        .device = ((uint64_t)major(file->fts_statp->st_dev) << 20) | minor(file->fts_statp->st_dev),
        .inode = file->fts_statp->st_ino};
    struct dome_file_value value = {.entry = (uint32_t)entry, .decision = DOME_DECISION_DENY};
    if (bpf_map_update_elem(fd, &key, &value, BPF_ANY) != 0)
      return dome_error_set_errno(err, errno, "hard link %s: update map `inode_rules`", file->fts_path);
  }
  return 0;
}

static int scan_subtree(int fd, const struct dome_rule_tables *tables, size_t index, uint32_t generation,
                        unsigned *visited, dome_error *err) {
  struct stat st;
  if (lstat(tables->files[index].path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0; /* not here (yet) */
  char *roots[] = {tables->files[index].path, NULL};
  FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
  if (!fts) return dome_error_set_errno(err, errno, "file entry %zu: scan %s", index, roots[0]);
  int r = 0;
  FTSENT *file;
  while (r == 0 && (file = fts_read(fts)) != NULL) {
    if (file->fts_info == FTS_DP) continue;
    if (++*visited > SCAN_LIMIT) {
      r = dome_error_set(
          err, E2BIG,
          "file entry %zu (deny subtree %s): more than %u files to scan for hard links; narrow "
          "the forbid",
          index, roots[0], SCAN_LIMIT);
      break;
    }
    if (file->fts_info == FTS_D || file->fts_info == FTS_DNR || file->fts_info == FTS_ERR ||
        file->fts_info == FTS_NS || file->fts_info == FTS_NSOK)
      continue;
    if (file->fts_statp->st_nlink > 1) r = add_linked_file(fd, tables, file, generation, err);
  }
  fts_close(fts);
  return r;
}

int dome_kernel_install_aliases(struct dome_kernel *kernel, const struct dome_rule_tables *tables,
                                uint32_t generation, dome_error *err) {
  int path_fd = bpf_map__fd(kernel->skel->maps.file_rules);
  int inode_fd = bpf_map__fd(kernel->skel->maps.inode_rules);
  unsigned visited = 0;
  for (size_t i = 0; i < tables->file_count; i++) {
    const struct dome_file_entry *e = &tables->files[i];
    if (e->decision != DOME_DECISION_DENY) continue;
    int r = add_markers(path_fd, tables, i, generation, err);
    if (r == 0 && e->match == DOME_MATCH_SUBTREE)
      r = scan_subtree(inode_fd, tables, i, generation, &visited, err);
    if (r < 0) return r;
  }
  return 0;
}
