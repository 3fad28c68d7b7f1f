/* build_path of dome.bpf.c (included once, after its maps): a file's path as the current task sees it, for
 * the LSM hooks where the kernel refuses bpf_d_path. Not a standalone header. */
#ifndef DOME_BPF_BUILD_PATH_H
#define DOME_BPF_BUILD_PATH_H

/* The path of (vfsmount, dentry) as the current task sees it (relative to its root, across mounts), written
 * to file_scratch[slot].key.path with its NUL (build_path below); returns the length with the NUL, or
 * -ENAMETOOLONG. For hooks where bpf_d_path is refused (the kernel allows it only in the "sleepable" LSM
 * hooks: not file_permission, path_link, path_rename). Same walk as the kernel's prepend_path: up d_parent to
 * the mount root, then to the mountpoint in the parent mount, until the task's root or the namespace root.
 * Differences from d_path: no " (deleted)" suffix for unlinked files; a disconnected dentry stops the walk.
 */
struct path_walk {
  __u64 dentry, vfsmount, mount; /* the current position */
  __u64 root_dentry, root_mount; /* the task's root */
  __u64 mount_offset;            /* offsetof(struct mount, mnt) */
  __u32 slot;                    /* file_scratch slot */
  __u32 count;                   /* components in chain[] */
  long offset;                   /* emit: bytes written */
  int error;
};

/* bpf_loop callbacks (each verified once, whatever the iteration count). */
static long walk_step(__u32 index, void *context) {
  struct path_walk *w = context;
  /* Plain locals: a cast inside BPF_CORE_READ would ask for a CO-RE relocation of struct path_walk. */
  struct dentry *dentry = (struct dentry *)w->dentry;
  struct vfsmount *vfsmount = (struct vfsmount *)w->vfsmount;
  struct mount *mount = (struct mount *)w->mount;
  if (w->dentry == w->root_dentry && w->vfsmount == w->root_mount) return 1;
  if (w->dentry == (__u64)BPF_CORE_READ(vfsmount, mnt_root)) {
    __u64 parent = (__u64)BPF_CORE_READ(mount, mnt_parent);
    if (parent == w->mount) return 1; /* the namespace's root mount */
    w->dentry = (__u64)BPF_CORE_READ(mount, mnt_mountpoint);
    w->mount = parent;
    w->vfsmount = parent + w->mount_offset;
    return 0;
  }
  __u64 parent = (__u64)BPF_CORE_READ(dentry, d_parent);
  if (parent == w->dentry) return 1; /* disconnected */
  struct file_scratch *s = bpf_map_lookup_elem(&file_scratch, &w->slot);
  if (!s || w->count >= CHAIN_DEPTH) {
    w->error = 1;
    return 1;
  }
  s->chain[w->count & (CHAIN_DEPTH - 1)] = w->dentry;
  w->count++;
  w->dentry = parent;
  return 0;
}

static long emit_step(__u32 index, void *context) {
  struct path_walk *w = context;
  struct file_scratch *s = bpf_map_lookup_elem(&file_scratch, &w->slot);
  if (!s || index >= w->count) {
    w->error |= !s;
    return 1;
  }
  struct dentry *component = (struct dentry *)s->chain[(w->count - 1 - index) & (CHAIN_DEPTH - 1)];
  __u32 length = BPF_CORE_READ(component, d_name.len);
  const unsigned char *name = BPF_CORE_READ(component, d_name.name);
  long offset = w->offset;
  if (offset < 0 || offset + 1 + length > DOME_BPF_PATH_BYTES - 1) {
    w->error = 1;
    return 1;
  }
  char *path = s->key.path;
  path[offset & 255] = '/';
  offset++;
  bpf_probe_read_kernel(path + (offset & 255), length & 255, name);
  w->offset = offset + length;
  return 0;
}

static __always_inline long build_path(__u32 slot, struct vfsmount *vfsmnt, struct dentry *dentry) {
  struct task_struct *task = bpf_get_current_task_btf();
  struct path_walk w = {.dentry = (__u64)dentry,
                        .vfsmount = (__u64)vfsmnt,
                        .root_dentry = (__u64)BPF_CORE_READ(task, fs, root.dentry),
                        .root_mount = (__u64)BPF_CORE_READ(task, fs, root.mnt),
                        .mount_offset = bpf_core_field_offset(struct mount, mnt),
                        .slot = slot};
  w.mount = w.vfsmount - w.mount_offset; /* container_of(vfsmnt, struct mount, mnt) */
  bpf_loop(2 * CHAIN_DEPTH, walk_step, &w, 0);
  if (w.error) return -ENAMETOOLONG;
  bpf_loop(CHAIN_DEPTH, emit_step, &w, 0);
  struct file_scratch *s = bpf_map_lookup_elem(&file_scratch, &slot);
  if (w.error || !s) return -ENAMETOOLONG;
  char *path = s->key.path;
  if (w.count == 0) {
    path[0] = '/';
    path[1] = 0;
    return 2;
  }
  long offset = w.offset;
  path[offset & 255] = 0;
  return offset + 1;
}

#endif
