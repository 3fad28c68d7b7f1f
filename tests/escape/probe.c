/* Escape probes that need machine code, run inside the jail by tests/escape/test_escape (built static by
 * the test, placed in /workspace or in a scratch image). Each prints one line; a probe the jail kills
 * prints nothing after "start".
 *   probe x32      getpid through the x32 ABI (syscall number | 0x40000000)
 *   probe int80    getpid through the i386 ABI (int $0x80)
 *   probe tiocsti  ioctl(TIOCSTI) on a pty with bits set above the low 32
 *   probe ids      real/effective uid and the effective capability set
 *   probe fds      every open fd other than 0, 1, 2 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int x32(void) {
  printf("start\n");
  fflush(stdout);
  long r = syscall(0x40000000L | 39);
  printf("x32 survived %ld errno %d\n", r, errno);
  return 0;
}

static int int80(void) {
  printf("start\n");
  fflush(stdout);
  long r;
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
  printf("int80 survived %ld\n", r);
  return 0;
}

static int tiocsti(void) {
  int master = open("/dev/ptmx", O_RDWR | O_NOCTTY);
  if (master < 0) {
    printf("tiocsti no-pty %d\n", errno);
    return 0;
  }
  unlockpt(master);
  char *name = ptsname(master);
  int slave = name ? open(name, O_RDWR | O_NOCTTY) : -1;
  char c = 'x';
  unsigned long request = 0x5412ul | (1ul << 32);
  long r = syscall(SYS_ioctl, slave >= 0 ? slave : master, request, &c);
  printf("tiocsti %s %d\n", r == 0 ? "OK" : "refused", r == 0 ? 0 : errno);
  return 0;
}

static int ids(void) {
  char line[256], cap[64] = "?";
  FILE *f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "CapEff:", 7) == 0) sscanf(line + 7, "%63s", cap);
  if (f) fclose(f);
  printf("ids uid=%d euid=%d capeff=%s\n", (int)getuid(), (int)geteuid(), cap);
  return 0;
}

static int fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int own = d ? dirfd(d) : -1;
  struct dirent *e;
  printf("fds");
  while (d && (e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == own) continue;
    char target[256] = "";
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n > 0) target[n] = '\0';
    printf(" %d=%s", fd, target);
  }
  printf("\n");
  if (d) closedir(d);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "x32") == 0) return x32();
  if (strcmp(argv[1], "int80") == 0) return int80();
  if (strcmp(argv[1], "tiocsti") == 0) return tiocsti();
  if (strcmp(argv[1], "ids") == 0) return ids();
  if (strcmp(argv[1], "fds") == 0) return fds();
  return 2;
}
