/* Landlock constants up to ABI 7 under our own names: Debian's linux-libc-dev may predate them.
 * Values from include/uapi/linux/landlock.h. */
#ifndef DOME_JAIL_LANDLOCK_ABI_H
#define DOME_JAIL_LANDLOCK_ABI_H

#include <stdint.h>

#define DOME_LL_FS_EXECUTE (1ull << 0)
#define DOME_LL_FS_WRITE_FILE (1ull << 1)
#define DOME_LL_FS_READ_FILE (1ull << 2)
#define DOME_LL_FS_READ_DIR (1ull << 3)
#define DOME_LL_FS_REMOVE_DIR (1ull << 4)
#define DOME_LL_FS_REMOVE_FILE (1ull << 5)
#define DOME_LL_FS_MAKE_CHAR (1ull << 6)
#define DOME_LL_FS_MAKE_DIR (1ull << 7)
#define DOME_LL_FS_MAKE_REG (1ull << 8)
#define DOME_LL_FS_MAKE_SOCK (1ull << 9)
#define DOME_LL_FS_MAKE_FIFO (1ull << 10)
#define DOME_LL_FS_MAKE_BLOCK (1ull << 11)
#define DOME_LL_FS_MAKE_SYM (1ull << 12)
#define DOME_LL_FS_REFER (1ull << 13)     /* ABI 2 */
#define DOME_LL_FS_TRUNCATE (1ull << 14)  /* ABI 3 */
#define DOME_LL_FS_IOCTL_DEV (1ull << 15) /* ABI 5 */

#define DOME_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0) /* ABI 6 */
#define DOME_LL_SCOPE_SIGNAL (1ull << 1)               /* ABI 6 */

#define DOME_LL_RULE_PATH_BENEATH 1

/* struct landlock_ruleset_attr as of ABI 6 (the kernel accepts the shorter ABI 1 prefix too). */
struct dome_landlock_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct dome_landlock_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

#endif
