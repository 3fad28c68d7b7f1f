/* LD_PRELOAD shim for tests/escape/test_newcomer_findings: a perfectly timed attacker on the host.
 * The first time the process calls mkdirat() with a multi-component path that starts with
 * "$NEWCOMER_SWAP_NAME/", it first exchanges $NEWCOMER_SWAP_NAME with "$NEWCOMER_SWAP_NAME.link" (a
 * symlink to a directory outside the workspace) in the same directory, as a racing local user could do
 * between dome's check of a path component and its use. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int swapped;

static void maybe_swap(int dirfd, const char *path) {
  const char *name = getenv("NEWCOMER_SWAP_NAME");
  if (swapped || !name || !path) return;
  size_t n = strlen(name);
  if (strncmp(path, name, n) != 0 || path[n] != '/' || path[n + 1] == '\0') return;
  char link[256];
  snprintf(link, sizeof link, "%s.link", name);
  if (syscall(SYS_renameat2, dirfd, name, dirfd, link, RENAME_EXCHANGE) == 0) swapped = 1;
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
  maybe_swap(dirfd, path);
  return (int)syscall(SYS_mkdirat, dirfd, path, mode);
}
