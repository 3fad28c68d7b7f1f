/* supervisor/jail/host_id.c: a jail's host uid is unique among the live jails of every dome process
 * (held through an abstract unix socket bound per id, released on release or when the holder dies). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/jail/internal.h"

/* Is slot n's name bound by anyone in this network namespace (/proc/net/unix lists abstract names as
 * "@name")? */
static bool slot_bound(unsigned slot) {
  char wanted[64], line[512];
  snprintf(wanted, sizeof wanted, " @dome/jail-id/%u\n", slot);
  FILE *f = fopen("/proc/net/unix", "re");
  bool found = false;
  while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, wanted) != NULL;
  if (f) fclose(f);
  return found;
}

#define PREFERRED 4242u

/* Another process (this program re-executed): acquire from PREFERRED, print the id, hold it while
 * stdin stays open. */
static int child_main(void) {
  unsigned id = 0;
  dome_error err = {0};
  if (jail_host_id_acquire(PREFERRED, &id, &err) < 0) return 1;
  printf("%u\n", id);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}

static unsigned other_process_acquires(int *hold_fd, pid_t *pid) {
  int to_child[2], from_child[2];
  assert_int_equal(pipe2(to_child, O_CLOEXEC), 0); /* the child keeps only its dup2'ed ends */
  assert_int_equal(pipe2(from_child, O_CLOEXEC), 0);
  *pid = fork();
  assert_true(*pid >= 0);
  if (*pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    execl("/proc/self/exe", "test_host_id", "--child", (char *)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  char line[32] = "";
  ssize_t n = read(from_child[0], line, sizeof line - 1);
  close(from_child[0]);
  assert_true(n > 0);
  *hold_fd = to_child[1];
  return (unsigned)strtoul(line, NULL, 10);
}

static void unique_within_and_across_processes(void **state) {
  (void)state;
  dome_error err = {0};
  unsigned a = 0, b = 0;
  assert_int_equal(jail_host_id_acquire(PREFERRED, &a, &err), 0);
  assert_int_equal(jail_host_id_acquire(PREFERRED, &b, &err), 0);
  assert_int_equal(a, JAIL_HOST_ID_BASE + PREFERRED);
  assert_int_not_equal(a, b); /* same process: the second jail gets another id */

  int hold;
  pid_t pid;
  unsigned c = other_process_acquires(&hold, &pid);
  assert_true(c >= JAIL_HOST_ID_BASE && c < JAIL_HOST_ID_BASE + JAIL_HOST_ID_COUNT);
  assert_int_not_equal(c, a);
  assert_int_not_equal(c, b);

  /* released here: another process can take it */
  jail_host_id_release(a);
  close(hold);
  int status;
  waitpid(pid, &status, 0);
  unsigned d = other_process_acquires(&hold, &pid);
  assert_int_equal(d, a);

  /* a holder that dies (here: ends) gives its id back without releasing */
  close(hold);
  waitpid(pid, &status, 0);
  unsigned e = 0;
  assert_int_equal(jail_host_id_acquire(PREFERRED, &e, &err), 0);
  assert_int_equal(e, a);
  jail_host_id_release(b);
  jail_host_id_release(e);
  jail_host_id_release(12345);         /* not an id: ignored */
  assert_false(slot_bound(PREFERRED)); /* nothing left behind */
  assert_false(slot_bound(b - JAIL_HOST_ID_BASE));
}

/* Several processes take and give back ids as fast as they can, all starting from the same slot: an id is
 * never held by two processes at once, and nothing is left at the end. */
static void unique_under_contention_and_removal(void **state) {
  (void)state;
  enum { PROCESSES = 4, ROUNDS = 3000 };
  _Atomic int *holders = mmap(NULL, sizeof(_Atomic int) * (JAIL_HOST_ID_COUNT + 1), PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(holders != MAP_FAILED);
  pid_t pids[PROCESSES];
  for (int p = 0; p < PROCESSES; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      for (int round = 0; round < ROUNDS; round++) {
        unsigned id = 0;
        dome_error err = {0};
        if (jail_host_id_acquire(7, &id, &err) < 0) _exit(2);
        unsigned slot = id - JAIL_HOST_ID_BASE;
        if (atomic_fetch_add(&holders[slot], 1) != 0) atomic_fetch_add(&holders[JAIL_HOST_ID_COUNT], 1);
        for (volatile int spin = 0; spin < 2000; spin++) {
        }
        atomic_fetch_sub(&holders[slot], 1);
        jail_host_id_release(id);
      }
      _exit(0);
    }
  }
  for (int p = 0; p < PROCESSES; p++) {
    int status = 0;
    waitpid(pids[p], &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  assert_int_equal(holders[JAIL_HOST_ID_COUNT], 0); /* no id was ever held twice */
  munmap((void *)holders, sizeof(_Atomic int) * (JAIL_HOST_ID_COUNT + 1));
  assert_false(slot_bound(7)); /* every id given back */
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main();
  const struct CMUnitTest tests[] = {cmocka_unit_test(unique_within_and_across_processes),
                                     cmocka_unit_test(unique_under_contention_and_removal)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
