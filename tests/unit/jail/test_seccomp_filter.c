/* The seccomp program a jail installs is generated at build time (supervisor/jail/generate/); these tests
 * hold that it is exactly what the libseccomp rules give now, and check its decisions on a few syscalls
 * by running the classic BPF program over seccomp_data records (linux/seccomp.h). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "supervisor/jail/internal.h"
#include "supervisor/jail/seccomp_rules.h"

static void embedded_equals_rules(void **state) {
  (void)state;
  const struct sock_fprog *embedded = NULL;
  dome_error err = {0};
  assert_int_equal(jail_seccomp_program(&embedded, &err), 0);
  struct sock_fprog built = {0};
  const char *failed = "";
  assert_int_equal(jail_seccomp_build(&built, &failed), 0);
  assert_int_equal(embedded->len, built.len);
  assert_memory_equal(embedded->filter, built.filter, built.len * sizeof(struct sock_filter));
  free(built.filter);
}

/* A classic BPF interpreter for the instructions libseccomp emits (ld abs, alu and, jumps, ret). */
static uint32_t run_filter(const struct sock_fprog *p, const struct seccomp_data *d) {
  uint32_t a = 0, x = 0;
  for (unsigned pc = 0; pc < p->len; pc++) {
    const struct sock_filter *f = &p->filter[pc];
    switch (f->code) {
      case BPF_LD | BPF_W | BPF_ABS:
        memcpy(&a, (const char *)d + f->k, 4);
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= f->k;
        break;
      case BPF_JMP | BPF_JA:
        pc += f->k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += a == f->k ? f->jt : f->jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        pc += a > f->k ? f->jt : f->jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        pc += a >= f->k ? f->jt : f->jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        pc += (a & f->k) ? f->jt : f->jf;
        break;
      case BPF_RET | BPF_K:
        return f->k;
      case BPF_RET | BPF_A:
        return a;
      case BPF_MISC | BPF_TAX:
        x = a;
        break;
      case BPF_MISC | BPF_TXA:
        a = x;
        break;
      case BPF_ST:
        break;
      default:
        fail_msg("unexpected BPF opcode 0x%x at %u", f->code, pc);
    }
  }
  fail_msg("program fell off its end");
  return 0;
}

static uint32_t decide(int nr, uint64_t a0, uint64_t a1) {
  const struct sock_fprog *p = NULL;
  dome_error err = {0};
  assert_int_equal(jail_seccomp_program(&p, &err), 0);
  struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64, .args = {a0, a1}};
  return run_filter(p, &d);
}

static void decisions(void **state) {
  (void)state;
  const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
  assert_int_equal(decide(SYS_getpid, 0, 0), SECCOMP_RET_ALLOW);
  assert_int_equal(decide(SYS_bpf, 0, 0), eperm);
  assert_int_equal(decide(SYS_io_uring_setup, 0, 0), eperm);
  assert_int_equal(decide(SYS_ptrace, 0, 0), eperm);
  assert_int_equal(decide(SYS_mount, 0, 0), eperm);
  assert_int_equal(decide(SYS_clone3, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
  assert_int_equal(decide(SYS_clone, SIGCHLD, 0), SECCOMP_RET_ALLOW);
  assert_int_equal(decide(SYS_clone, 0x10000000 /* CLONE_NEWUSER */, 0), eperm);
  assert_int_equal(decide(SYS_socket, AF_INET6, 0), SECCOMP_RET_ALLOW);
  assert_int_equal(decide(SYS_socket, AF_NETLINK, 0), eperm);
  assert_int_equal(decide(SYS_ioctl, 0, 0x5412 /* TIOCSTI */), eperm);
  assert_int_equal(decide(SYS_ioctl, 0, 0xffffffff00005412ull), eperm); /* high bits ignored */
  assert_int_equal(decide(SYS_ioctl, 0, 0x5413 /* TIOCGWINSZ */), SECCOMP_RET_ALLOW);
  /* system calls newer than libseccomp's table: reviewed ones decided, unknown ones ENOSYS */
  assert_int_equal(decide(451 /* cachestat */, 0, 0), SECCOMP_RET_ALLOW);
  assert_int_equal(decide(458 /* listmount */, 0, 0), SECCOMP_RET_ALLOW);
  assert_int_equal(decide(467 /* open_tree_attr */, 0, 0), eperm);
  assert_int_equal(decide(JAIL_SECCOMP_REVIEWED_THROUGH, 0, 0), SECCOMP_RET_ALLOW);
  assert_int_equal(decide(JAIL_SECCOMP_REVIEWED_THROUGH + 1, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
  assert_int_equal(decide(1000, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
  assert_int_equal(decide(0x40000000 | 1 /* x32 write */, 0, 0), SECCOMP_RET_KILL_PROCESS);
  /* a foreign ABI is killed */
  const struct sock_fprog *p = NULL;
  dome_error err = {0};
  assert_int_equal(jail_seccomp_program(&p, &err), 0);
  struct seccomp_data i386 = {.nr = 1, .arch = AUDIT_ARCH_I386};
  assert_int_equal(run_filter(p, &i386), SECCOMP_RET_KILL_PROCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(embedded_equals_rules), cmocka_unit_test(decisions)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
