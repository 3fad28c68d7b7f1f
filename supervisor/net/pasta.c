/* pasta's process: started so that it cannot outlive the supervisor however the supervisor ends (a
 * clean close, a crash, SIGKILL). The kernel ends it: PR_SET_PDEATHSIG (prctl(2)) delivers SIGKILL to
 * pasta when its parent thread exits. Two kernel rules shape the start:
 *   - the signal fires on the exit of the creating thread, not process: pasta is forked by a thread of
 *     its own that lives until pasta has been reaped (net_pasta_stop) or the process dies;
 *   - the setting is cleared by a change of effective or filesystem ids: pasta does not change ids
 *     itself (no --runas); the child takes the egress ids first, then sets the signal, then execs pasta
 *     (an exec of a file without set-id bits or capabilities keeps it). pasta's own --userns join keeps it
 *     too: the target user namespace is owned by pasta's euid, so its capabilities there are a subset
 *     (commit_creds). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/net/net_internal.h"

extern char **environ;

struct pasta_start {
  const char *path;
  char *const *argv;
  int in, out, stderr_fd; /* become 0, 1, 2 */
  const int *inherited;   /* kept open across exec */
  size_t inherited_count;
  pid_t parent;
  int stop;  /* read end: end of file when net_pasta_stop closes the write end */
  pid_t pid; /* result: > 0, or -errno */
  sem_t started;
};

/* Complain on the child's stderr (the pasta.stderr file) and exit; system calls only. */
__attribute__((noreturn)) static void child_fail(const char *what, int status) {
  static const char prefix[] = "dome: starting pasta: ";
  if (write(2, prefix, sizeof prefix - 1) < 0 || write(2, what, strlen(what)) < 0 || write(2, "\n", 1) < 0) {
  }
  _exit(status);
}

/* The fork of a possibly multi-threaded supervisor: only async-signal-safe calls until the exec. */
__attribute__((noreturn)) static void pasta_child(const struct pasta_start *start) {
  if (dup2(start->in, 0) < 0 || dup2(start->out, 1) < 0 || dup2(start->stderr_fd, 2) < 0) _exit(125);
  for (size_t i = 0; i < start->inherited_count; i++)
    if (fcntl(start->inherited[i], F_SETFD, 0) < 0) child_fail("keep a descriptor open", 125);
  /* Neither the supervisor's blocked signals nor its ignored dispositions: `dome run` blocks SIGTERM
   * while a jail runs, and a pasta that cannot be terminated would stall net_pasta_stop. */
  struct sigaction default_action = {.sa_handler = SIG_DFL};
  for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &default_action, NULL);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, NULL);
  /* The egress ids in the host's user namespace, where they are nobody's (raw system calls: this is the
   * only thread, glibc's all-threads id change is not wanted). */
  if (syscall(SYS_setgroups, 0, NULL) < 0) child_fail("drop supplementary groups", 125);
  if (syscall(SYS_setresgid, DOME_NET_EGRESS_ID, DOME_NET_EGRESS_ID, DOME_NET_EGRESS_ID) < 0)
    child_fail("take the egress gid", 125);
  if (syscall(SYS_setresuid, DOME_NET_EGRESS_ID, DOME_NET_EGRESS_ID, DOME_NET_EGRESS_ID) < 0)
    child_fail("take the egress uid", 125);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) child_fail("set the parent-death signal", 125);
  /* The parent may have died before the signal was set: then nobody would ever stop this pasta. */
  if (getppid() != start->parent) _exit(125);
  execve(start->path, start->argv, environ);
  child_fail("exec pasta", 127);
}

/* The parent thread of pasta: forks it, reports, then lives until net_pasta_stop (pasta's parent-death
 * signal is bound to this thread). */
static void *pasta_parent(void *arg) {
  struct pasta_start *start = arg;
  int stop = start->stop;
  pid_t pid = fork();
  if (pid == 0) pasta_child(start);
  start->pid = pid < 0 ? -errno : pid;
  sem_post(&start->started); /* `start` is the caller's and gone after this */
  while (pid > 0) {
    char ignored;
    ssize_t n = read(stop, &ignored, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  close(stop);
  return NULL;
}

int net_pasta_start(struct dome_net *net, char *const argv[], int in, int out, int stderr_fd,
                    const int *inherited, size_t inherited_count, dome_error *err) {
  int stop[2];
  if (pipe2(stop, O_CLOEXEC) < 0) return dome_error_set_errno(err, errno, "pasta: pipe");
  struct pasta_start start = {.path = net->pasta_path,
                              .argv = argv,
                              .in = in,
                              .out = out,
                              .stderr_fd = stderr_fd,
                              .inherited = inherited,
                              .inherited_count = inherited_count,
                              .parent = getpid(),
                              .stop = stop[0]};
  sem_init(&start.started, 0, 0);
  /* Every signal blocked in the parent thread: the supervisor's handlers run in its other threads. */
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  int r = pthread_create(&net->pasta_parent, NULL, pasta_parent, &start);
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  if (r != 0) {
    sem_destroy(&start.started);
    close(stop[0]);
    close(stop[1]);
    return dome_error_set_errno(err, r, "pasta: start its parent thread");
  }
  while (sem_wait(&start.started) < 0 && errno == EINTR) {
  }
  sem_destroy(&start.started);
  net->pasta_stop = stop[1];
  if (start.pid < 0) {
    net_pasta_stop(net);
    return dome_error_set_errno(err, (int)-start.pid, "start `%s`", net->pasta_path);
  }
  net->pasta_pid = start.pid;
  return 0;
}

void net_pasta_stop(struct dome_net *net) {
  if (net->pasta_pid > 0) {
    kill(net->pasta_pid, SIGTERM);
    while (waitpid(net->pasta_pid, NULL, 0) < 0 && errno == EINTR) {
    }
    net->pasta_pid = 0;
  }
  if (net->pasta_stop >= 0) {
    close(net->pasta_stop);
    net->pasta_stop = -1;
    pthread_join(net->pasta_parent, NULL);
  }
}
