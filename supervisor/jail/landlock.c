/* Landlock access rights by ABI version (Documentation/userspace-api/landlock.rst). The rule application
 * itself happens in the child (child.c), with raw system calls. */
#include <errno.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/jail/internal.h"
#include "supervisor/jail/landlock-abi.h"

static int abi;
static pthread_once_t abi_once = PTHREAD_ONCE_INIT;

static void probe_abi(void) {
  long version = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  abi = version < 0 ? 0 : (int)version;
}

int jail_landlock_abi(void) {
  pthread_once(&abi_once, probe_abi);
  return abi;
}

uint64_t jail_landlock_handled_fs(int version) {
  if (version <= 0) return 0;
  uint64_t all = DOME_LL_FS_EXECUTE | DOME_LL_FS_WRITE_FILE | DOME_LL_FS_READ_FILE | DOME_LL_FS_READ_DIR |
                 DOME_LL_FS_REMOVE_DIR | DOME_LL_FS_REMOVE_FILE | DOME_LL_FS_MAKE_CHAR | DOME_LL_FS_MAKE_DIR |
                 DOME_LL_FS_MAKE_REG | DOME_LL_FS_MAKE_SOCK | DOME_LL_FS_MAKE_FIFO | DOME_LL_FS_MAKE_BLOCK |
                 DOME_LL_FS_MAKE_SYM;
  if (version >= 2) all |= DOME_LL_FS_REFER;
  if (version >= 3) all |= DOME_LL_FS_TRUNCATE;
  if (version >= 5) all |= DOME_LL_FS_IOCTL_DEV;
  return all;
}

uint64_t jail_landlock_access(unsigned access, int version) {
  uint64_t bits = 0;
  if (access & JAIL_ACCESS_READ) bits |= DOME_LL_FS_READ_FILE | DOME_LL_FS_READ_DIR;
  if (access & JAIL_ACCESS_EXEC) bits |= DOME_LL_FS_EXECUTE;
  if (access & JAIL_ACCESS_WRITE)
    bits |= DOME_LL_FS_WRITE_FILE | DOME_LL_FS_REMOVE_DIR | DOME_LL_FS_REMOVE_FILE | DOME_LL_FS_MAKE_DIR |
            DOME_LL_FS_MAKE_REG | DOME_LL_FS_MAKE_SOCK | DOME_LL_FS_MAKE_FIFO | DOME_LL_FS_MAKE_SYM |
            DOME_LL_FS_REFER | DOME_LL_FS_TRUNCATE | DOME_LL_FS_IOCTL_DEV;
  return bits & jail_landlock_handled_fs(version);
}

uint64_t jail_landlock_file_rights(uint64_t rights) {
  return rights & (DOME_LL_FS_EXECUTE | DOME_LL_FS_WRITE_FILE | DOME_LL_FS_READ_FILE | DOME_LL_FS_TRUNCATE |
                   DOME_LL_FS_IOCTL_DEV);
}
