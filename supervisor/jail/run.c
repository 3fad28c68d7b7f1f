/* jail_run: the parent side. Prepare the plan, create the cgroup leaf, clone3 the child into its
 * namespaces (and straight into the cgroup2 leaf), map its ids, hand over, then supervise it with a pidfd
 * and poll(2) — no signal handler, so several threads may run jails at once — and tear everything down. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/jail/internal.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#define SETUP_BUDGET_MS 30000u
#define DRAIN_BUDGET_MS 2000u
#define DEFAULT_SEARCH_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

static atomic_uint sequence;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct stream {
  int fd;
  int number;
  char *data;
  size_t length, capacity;
  uint64_t total; /* bytes read, kept or not */
  bool truncated;
};

/* Everything jail_run owns; released by run_state_release on every path. */
struct run_state {
  struct jail_image image;
  struct jail_workspace_input workspace;
  struct jail_plan_entry *workspace_entries;
  size_t workspace_entry_count;
  struct jail_landlock_rule landlock_rules[JAIL_MAX_PATH_RULES + 2];
  struct jail_leaf leaf;
  bool leaf_created;
  int pidfd, workspace_fd, sync_fd, child_sync; /* child_sync: the child's end until clone3 */
  int call_channel, call_channel_child; /* a prepared interpreter's call stream (ours, the child's end) */
  int stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write, status_read,
      status_write;
  pid_t pid;
  bool reaped;
  int oom_event_fd, oom_control_fd;
  struct stream out, err;
  char **argv_copy, **env_copy; /* the program's argv and environment (copy_strings) */
  unsigned host_id;             /* jail_host_id_acquire'd, 0 when none */
};

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void run_state_release(struct run_state *s) {
  for (size_t i = 0; i < s->workspace_entry_count; i++) free((char *)s->workspace_entries[i].path);
  free(s->workspace_entries);
  jail_workspace_input_release(&s->workspace);
  jail_image_close(&s->image);
  int *fds[] = {&s->pidfd,        &s->workspace_fd,   &s->sync_fd,      &s->child_sync,
                &s->stdin_read,   &s->stdin_write,    &s->stdout_read,  &s->stdout_write,
                &s->stderr_read,  &s->stderr_write,   &s->status_read,  &s->status_write,
                &s->oom_event_fd, &s->oom_control_fd, &s->call_channel, &s->call_channel_child};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) close_fd(fds[i]);
  free(s->out.data);
  free(s->err.data);
  free(s->argv_copy);
  free(s->env_copy);
  if (s->host_id) jail_host_id_release(s->host_id);
}

/* Where a jail's host id search starts: a random slot. The id is the jail's host uid, which its program
 * reads in /proc/self/uid_map: drawn from a counter of jails (an earlier hint was pid + seq * 40503), two
 * ids of one agent's calls told it how many jails other agents had made in between. Random starts also
 * spread concurrent supervisors over the slots; uniqueness comes from jail_host_id_acquire. */
static unsigned host_id_hint(void) {
  unsigned value = 0;
  while (getrandom(&value, sizeof value, 0) < 0 && errno == EINTR) {
  }
  return value % JAIL_HOST_ID_COUNT;
}

/* What every jail of this process needs from /proc and that does not change while it runs: read once. */
static struct {
  uintptr_t arg_start, arg_end, env_start, env_end; /* 0 when unknown */
  int last_capability;
  bool ns_last_pid; /* /proc/sys/kernel/ns_last_pid exists (CONFIG_CHECKPOINT_RESTORE) */
} process_facts;
static pthread_once_t process_facts_once = PTHREAD_ONCE_INIT;

/* arg_start, arg_end, env_start, env_end of this process: fields 48..51 of /proc/self/stat (proc(5)),
 * counted after the `)` that closes the command name. Left 0 when unreadable. */
static void read_arg_areas(void) {
  char text[2048];
  _cleanup_close_ int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
  if (n <= 0) return;
  text[n] = '\0';
  char *p = strrchr(text, ')');
  if (!p) return;
  unsigned long long value[4];
  int field = 2;
  char *save = NULL;
  for (char *token = strtok_r(p + 1, " \n", &save); token; token = strtok_r(NULL, " \n", &save)) {
    field++;
    if (field >= 48 && field <= 51) value[field - 48] = strtoull(token, NULL, 10);
    if (field == 51) break;
  }
  if (field < 51 || value[0] > value[1] || value[2] > value[3]) return;
  process_facts.arg_start = (uintptr_t)value[0];
  process_facts.arg_end = (uintptr_t)value[1];
  process_facts.env_start = (uintptr_t)value[2];
  process_facts.env_end = (uintptr_t)value[3];
}

/* The fields that fix a jail before its call (jail_prepare checks only these). */
static int validate_shape(const struct jail_config *c, dome_error *err) {
  if (c->memory_bytes && c->memory_bytes < (4u << 20))
    return dome_error_set(err, EINVAL, "memory: %" PRIu64 " bytes is below the minimum of 4M",
                          c->memory_bytes);
  if (isnan(c->cpus) || c->cpus < 0 || c->cpus > 4096)
    return dome_error_set(err, EINVAL, "cpus: %g is outside 0.01..4096", c->cpus);
  if (c->cpus > 0 && c->cpus < 0.01) return dome_error_set(err, EINVAL, "cpus: %g is below 0.01", c->cpus);
  if (c->pids && c->pids < JAIL_MIN_PIDS)
    return dome_error_set(err, EINVAL,
                          "pids (--pids): %" PRIu32
                          " is below the minimum of %u (the jail's init and the program)",
                          c->pids, JAIL_MIN_PIDS);
  if (c->workspace_bytes && c->workspace_bytes < 4096)
    return dome_error_set(err, EINVAL, "workspace size: %" PRIu64 " bytes is below 4096", c->workspace_bytes);
  return 0;
}

static int validate(const struct jail_config *c, dome_error *err) {
  if (!c->argv || !c->argv[0] || !c->argv[0][0]) return dome_error_set(err, EINVAL, "program: none given");
  if (c->stdin_data && c->stdin_fd >= 0)
    return dome_error_set(err, EINVAL, "stdin: both bytes and an fd given");
  int r = validate_shape(c, err);
  if (r < 0) return r;
  if (c->output_limit > JAIL_MAX_OUTPUT_LIMIT_BYTES)
    return dome_error_set(err, EINVAL,
                          "output limit (--output-limit): %" PRIu64 " bytes is above the maximum of %lluM",
                          c->output_limit, JAIL_MAX_OUTPUT_LIMIT_BYTES >> 20);
  if (c->working_directory &&
      (c->working_directory[0] != '/' || strlen(c->working_directory) > 1024 ||
       strstr(c->working_directory, "/../") || strcmp(c->working_directory, "/..") == 0))
    return dome_error_set(err, EINVAL, "working directory: `%.1024s` is not an absolute path",
                          c->working_directory);
  if (c->path_rules && c->path_rule_count > JAIL_MAX_PATH_RULES)
    return dome_error_set(err, EINVAL, "path rules: more than %u", JAIL_MAX_PATH_RULES);
  for (size_t i = 0; c->path_rules && i < c->path_rule_count; i++) {
    const struct jail_path_rule *r = &c->path_rules[i];
    if (!r->path || r->path[0] != '/' || strstr(r->path, "/../") || strlen(r->path) > 1024)
      return dome_error_set(err, EINVAL, "path rule %zu: `%s` is not an absolute path", i,
                            r->path ? r->path : "");
    if (r->access & ~(unsigned)(JAIL_ACCESS_READ | JAIL_ACCESS_WRITE | JAIL_ACCESS_EXEC))
      return dome_error_set(err, EINVAL, "path rule `%s`: unknown access bits 0x%x", r->path, r->access);
  }
  return 0;
}

/* The highest capability number this kernel knows (/proc/sys/kernel/cap_last_cap, capabilities(7)); 63
 * when unreadable, so that the child's bounding-set drop covers every possible one. */
static int last_capability(void) {
  char text[16];
  _cleanup_close_ int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
  if (n <= 0) return 63;
  text[n] = '\0';
  int value = atoi(text);
  return value > 0 && value < 64 ? value : 63;
}

static void read_process_facts(void) {
  read_arg_areas();
  process_facts.last_capability = last_capability();
  process_facts.ns_last_pid = access("/proc/sys/kernel/ns_last_pid", F_OK) == 0;
}

/* Workspace entries in the child's staging view: parents first, then each file. */
static int plan_workspace(struct run_state *s, dome_error *err) {
  size_t capacity = 0;
  for (size_t i = 0; i < s->workspace.count; i++) {
    const char *path = s->workspace.paths[i];
    if (!path[0]) continue; /* replaced by a later input file */
    size_t length = strlen(path);
    for (size_t k = 0; k <= length; k++) {
      bool dir = k < length ? path[k] == '/' : false;
      bool file = k == length && path[length - 1] != '/';
      if (!dir && !file) continue;
      if (s->workspace_entry_count == capacity) {
        capacity = capacity ? capacity * 2 : 16;
        struct jail_plan_entry *grown = realloc(s->workspace_entries, capacity * sizeof *grown);
        if (!grown) return dome_error_set(err, ENOMEM, "plan workspace: out of memory");
        s->workspace_entries = grown;
      }
      char *staged = NULL;
      if (asprintf(&staged, JAIL_STAGING "/workspace/%.*s", (int)k, path) < 0)
        return dome_error_set(err, ENOMEM, "plan workspace: out of memory");
      struct jail_plan_entry *e = &s->workspace_entries[s->workspace_entry_count++];
      *e = (struct jail_plan_entry){.kind = dir ? PLAN_DIR : PLAN_FILE, .path = staged};
      if (file) {
        e->data = s->workspace.data[i];
        e->length = s->workspace.lengths[i];
        e->mode = s->workspace.modes[i] ? s->workspace.modes[i] : 0644;
      } else {
        e->mode = 0755;
      }
    }
  }
  return 0;
}

/* A copy of a NULL-terminated string list in one malloc'd block (pointers, then the strings), or NULL
 * when out of memory. The jail's program gets its argv and environment from such copies: the originals
 * may live in this process's own argv/environment areas, which the jail's init blanks (hide_supervisor)
 * before the program starts. */
static char **copy_strings(char *const *list) {
  size_t count = 0, bytes = 0;
  for (; list && list[count]; count++) bytes += strlen(list[count]) + 1;
  char **copy = malloc((count + 1) * sizeof *copy + bytes);
  if (copy == NULL) return NULL;
  char *text = (char *)(copy + count + 1);
  for (size_t i = 0; i < count; i++) {
    size_t length = strlen(list[i]) + 1;
    copy[i] = memcpy(text, list[i], length);
    text += length;
  }
  copy[count] = NULL;
  return copy;
}

/* The same strings in both lists, in any order (each list without repeats, as an environment). */
static bool same_strings(char *const *a, char *const *b) {
  size_t count_a = 0, count_b = 0;
  while (a && a[count_a]) count_a++;
  while (b && b[count_b]) count_b++;
  if (count_a != count_b) return false;
  for (size_t i = 0; i < count_a; i++) {
    bool found = false;
    for (size_t k = 0; k < count_b && !found; k++) found = strcmp(a[i], b[k]) == 0;
    if (!found) return false;
  }
  return true;
}

static const char *search_path_of(char *const *env) {
  for (size_t i = 0; env && env[i]; i++)
    if (strncmp(env[i], "PATH=", 5) == 0) return env[i] + 5;
  return DEFAULT_SEARCH_PATH;
}

static int write_proc(pid_t pid, const char *file, const char *value, dome_error *err) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  size_t length = strlen(value);
  if (fd < 0 || write(fd, value, length) != (ssize_t)length)
    return dome_error_set_errno(err, errno, "write `%s`", path);
  return 0;
}

/* Append to a stream, keeping at most `limit` bytes; returns the number of bytes kept. */
static size_t keep(struct stream *st, const char *data, size_t length, uint64_t limit) {
  st->total += length;
  size_t room = st->length < limit ? (size_t)(limit - st->length) : 0;
  size_t kept = length < room ? length : room;
  if (kept < length) st->truncated = true;
  if (kept == 0) return 0;
  if (st->length + kept + 1 > st->capacity) {
    size_t capacity = st->capacity ? st->capacity : 65536;
    while (capacity < st->length + kept + 1) capacity *= 2;
    char *grown = realloc(st->data, capacity);
    if (!grown) {
      st->truncated = true;
      return 0;
    }
    st->data = grown;
    st->capacity = capacity;
  }
  memcpy(st->data + st->length, data, kept);
  st->length += kept;
  st->data[st->length] = '\0';
  return kept;
}

static void kill_jail(struct run_state *s) {
  if (s->pidfd >= 0 && !s->reaped) syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
  if (s->leaf_created) jail_cgroup_kill(&s->leaf);
}

static int reap(struct run_state *s, siginfo_t *info) {
  memset(info, 0, sizeof *info);
  for (;;) {
    if (syscall(SYS_waitid, P_PIDFD, s->pidfd, info, WEXITED | __WALL, NULL) == 0) break;
    if (errno != EINTR) return -errno;
  }
  s->reaped = true;
  return 0;
}

/* Write to the program's stdin without letting SIGPIPE reach the process: block it in this thread and
 * consume the one the write raised (the technique libcurl and OpenSSL use). */
static ssize_t write_no_sigpipe(int fd, const void *data, size_t length) {
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t n = write(fd, data, length);
  int saved = errno;
  if (n < 0 && saved == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved;
  return n;
}

/* Receive the child's setup messages until the control socket closes (the child exec'd or died). */
/* SYNC_GO carrying the `tasks` fds of the v1 leaves (SCM_RIGHTS, unix(7)); none on unified hosts. */
static int send_go_with_tasks(struct run_state *s, dome_error *err) {
  int fds[JAIL_V1_COUNT];
  size_t count = 0;
  int r = jail_cgroup_open_tasks(&s->leaf, fds, &count, err);
  if (r < 0) return r;
  struct jail_sync_message go = {.kind = SYNC_GO};
  struct iovec iov = {&go, sizeof go};
  union {
    char buffer[CMSG_SPACE(sizeof(int) * JAIL_V1_COUNT)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (count > 0) {
    msg.msg_control = control.buffer;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
  }
  ssize_t n = sendmsg(s->sync_fd, &msg, MSG_NOSIGNAL);
  int e = errno;
  for (size_t i = 0; i < count; i++) close(fds[i]);
  if (n != (ssize_t)sizeof go) return dome_error_set_errno(err, n < 0 ? e : EIO, "hand over cgroup leaves");
  return 0;
}

/* The error the child reported (SYNC_ERROR), as the caller sees it. Returns -errno. */
static int child_failure(struct jail_sync_message *failure, const struct jail_config *c, dome_error *err) {
  failure->text[sizeof failure->text - 1] = '\0';
  int e = failure->errno_value > 0 ? failure->errno_value : EIO;
  const char *program = c->argv && c->argv[0] ? c->argv[0] : "";
  if (strncmp(failure->text, "program not found", 17) == 0 ||
      (strncmp(failure->text, "execute program", 15) == 0 && e == ENOENT))
    return dome_error_set(err, ENOENT, "program `%s` not found in image `%s`", program,
                          c->image ? c->image : JAIL_DEFAULT_IMAGE);
  if (strncmp(failure->text, "execute program", 15) == 0)
    return dome_error_set_errno(err, e, "program `%s` in image `%s`: cannot execute", program,
                                c->image ? c->image : JAIL_DEFAULT_IMAGE);
  return dome_error_set_errno(err, e, "set up jail: %s", failure->text);
}

/* A hand-over failed (the child is gone): if it said why before it went, that is the error (its message
 * is still queued on the control socket); otherwise `err` keeps what the hand-over found. A child that
 * left a hand-over of ours unread can make the first read a reset, reported before its queued messages
 * (await_setup meets it too). Reading once gave the hand-over's own "Broken pipe" in about 1 run of 150
 * under load, 0 of 900 reading on; that the reset was what the one read met is the likely cause, not
 * one caught in the act (a probe of 600 runs saw no reset and no failure). */
static int child_failure_pending(struct run_state *s, const struct jail_config *c, int r, dome_error *err) {
  for (int attempt = 0; attempt < 8; attempt++) { /* a reset, then the child's few set-up messages */
    struct jail_sync_message message;
    ssize_t n = recv(s->sync_fd, &message, sizeof message, MSG_DONTWAIT);
    if (n < 0 && (errno == ECONNRESET || errno == EINTR)) continue;
    if (n == (ssize_t)sizeof message && message.kind == SYNC_ERROR) return child_failure(&message, c, err);
    if (n != (ssize_t)sizeof message) break; /* nothing queued, end of file, or a short read */
  }
  return r;
}

/* One message of the child's on the control socket, into `message`: recvmsg(2)'s result (errno set when
 * it is negative; 0 at end of file). A descriptor passed with it is the jail's workspace when the message
 * is SYNC_WORKSPACE and none was kept yet (kept in s->workspace_fd); any other is closed. */
static ssize_t receive_sync_message(struct run_state *s, struct jail_sync_message *message) {
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec iov = {message, sizeof *message};
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  ssize_t n = recvmsg(s->sync_fd, &msg, MSG_CMSG_CLOEXEC);
  if (n <= 0) return n;
  int saved = errno;
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
      int fd;
      memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
      if (n == (ssize_t)sizeof *message && message->kind == SYNC_WORKSPACE && s->workspace_fd < 0)
        s->workspace_fd = fd;
      else
        close(fd);
    }
  errno = saved;
  return n;
}

static int await_setup(struct run_state *s, const struct jail_config *c, struct jail_result *result,
                       dome_error *err) {
  uint64_t deadline = now_ms() + SETUP_BUDGET_MS;
  struct jail_sync_message failure = {0};
  bool reset = false; /* the child left a hand-over of ours unread: it never finished its set-up */
  for (;;) {
    struct pollfd fds[2] = {{s->sync_fd, POLLIN, 0}, {c->cancel_fd, POLLIN, 0}};
    uint64_t now = now_ms();
    if (now >= deadline)
      return dome_error_set(err, ETIMEDOUT, "set up jail: no answer within %u ms", SETUP_BUDGET_MS);
    int ready = poll(fds, c->cancel_fd >= 0 ? 2 : 1, (int)(deadline - now));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return dome_error_set_errno(err, errno, "set up jail: poll");
    if (c->cancel_fd >= 0 && fds[1].revents) {
      result->cancelled = true;
      return dome_error_set(err, ECANCELED, "set up jail: cancelled");
    }
    if (!fds[0].revents) continue;
    struct jail_sync_message message;
    ssize_t n = receive_sync_message(s, &message);
    if (n < 0 && errno == EINTR) continue;
    /* The child ended with a hand-over of ours unread: the kernel reports the reset once, before the
     * messages still queued for us (its SYNC_ERROR among them), which the next reads return. */
    if (n < 0 && errno == ECONNRESET) {
      reset = true;
      continue;
    }
    if (n <= 0) break; /* EOF: exec succeeded, or the child is gone */
    if (n == (ssize_t)sizeof message && message.kind == SYNC_ERROR) failure = message;
  }
  if (failure.kind == SYNC_ERROR) return child_failure(&failure, c, err);
  if (reset) return dome_error_set(err, ECONNRESET, "set up jail: its first process ended during set-up");
  return 0;
}

/* The program's status into `result` at `duration_ms`: the init's report when it sent one, else the
 * status the init itself ended with (it was killed: timeout, cancellation, cgroup OOM kill of the jail). */
static void settle_status(struct jail_result *result, const struct jail_init_report *report, siginfo_t info,
                          uint64_t duration_ms) {
  result->duration_ms = duration_ms;
  if (report) {
    info.si_code = report->exited ? CLD_EXITED : CLD_KILLED;
    info.si_status = report->code;
  }
  if (info.si_code == CLD_EXITED) {
    result->exit_code = info.si_status;
  } else {
    result->signal = info.si_status;
    result->exit_code = 128 + info.si_status;
  }
}

/* Supervise the running program: output, stdin, timeout, cancellation, exit. The run is over when the
 * init is reaped, or as soon as the init reports the program's status with nothing else left in the jail
 * (jail_init_report.alone: the init is only exiting, and end_jail reaps it); then what the program wrote
 * is drained. */
static void supervise(struct run_state *s, const struct jail_config *c, struct jail_result *result,
                      uint64_t timeout_ms, uint64_t output_limit, bool sample_pids) {
  uint64_t start = now_ms(), deadline = start + timeout_ms, drain_deadline = 0;
  size_t stdin_offset = 0;
  char relay[65536];
  size_t relay_length = 0, relay_offset = 0;
  bool relay_eof = c->stdin_fd < 0, killed = false;
  char buffer[65536];
  uint64_t tick_ms = c->on_tick ? (c->tick_ms ? c->tick_ms : 50) : 0, next_tick = start + tick_ms;
  struct jail_init_report report;
  bool reported = false, status_open = s->status_read >= 0;
  bool ended = false; /* reaped, or the init reported the program's end with nothing else left */
  if (s->stdin_write >= 0) fcntl(s->stdin_write, F_SETFL, O_NONBLOCK);
  while (!ended || s->out.fd >= 0 || s->err.fd >= 0) {
    struct pollfd fds[8];
    int count = 0, i_out = -1, i_err = -1, i_in = -1, i_relay = -1, i_pid = -1, i_cancel = -1, i_oom = -1,
        i_status = -1;
    if (s->out.fd >= 0) i_out = count, fds[count++] = (struct pollfd){s->out.fd, POLLIN, 0};
    if (s->err.fd >= 0) i_err = count, fds[count++] = (struct pollfd){s->err.fd, POLLIN, 0};
    bool have_input = c->stdin_data ? stdin_offset < c->stdin_length : relay_offset < relay_length;
    if (s->stdin_write >= 0 && have_input)
      i_in = count, fds[count++] = (struct pollfd){s->stdin_write, POLLOUT, 0};
    if (s->stdin_write >= 0 && !relay_eof && relay_offset >= relay_length)
      i_relay = count, fds[count++] = (struct pollfd){c->stdin_fd, POLLIN, 0};
    if (!ended) i_pid = count, fds[count++] = (struct pollfd){s->pidfd, POLLIN, 0};
    if (!ended && status_open) i_status = count, fds[count++] = (struct pollfd){s->status_read, POLLIN, 0};
    if (c->cancel_fd >= 0 && !killed)
      i_cancel = count, fds[count++] = (struct pollfd){c->cancel_fd, POLLIN, 0};
    if (s->oom_event_fd >= 0 && !killed && !ended)
      i_oom = count, fds[count++] = (struct pollfd){s->oom_event_fd, POLLIN, 0};
    uint64_t now = now_ms();
    int wait_ms;
    if (ended)
      wait_ms = now >= drain_deadline ? 0 : (int)(drain_deadline - now);
    else if (killed)
      wait_ms = 100;
    else
      wait_ms = now >= deadline ? 0 : (int)(deadline - now);
    if (sample_pids && !ended && wait_ms > 20) wait_ms = 20;
    if (tick_ms && wait_ms > (int)(next_tick > now ? next_tick - now : 0))
      wait_ms = (int)(next_tick > now ? next_tick - now : 0);
    int ready = poll(fds, (nfds_t)count, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    now = now_ms();
    if (tick_ms && now >= next_tick) {
      c->on_tick(c->hook_context, now - start);
      next_tick = now + tick_ms;
    }
    if (sample_pids && !ended) {
      uint64_t pids = jail_cgroup_current_pids(&s->leaf);
      if (pids > result->peak_pids) result->peak_pids = pids;
    }
    if (!ended && !killed && now >= deadline) {
      result->timed_out = true;
      killed = true;
      kill_jail(s);
    }
    if (ended && now >= drain_deadline) break; /* a writer we cannot see keeps a pipe open */
    if (ready <= 0) continue;
    struct stream *streams[2] = {&s->out, &s->err};
    int indexes[2] = {i_out, i_err};
    for (int k = 0; k < 2; k++) {
      if (indexes[k] < 0 || !fds[indexes[k]].revents) continue;
      ssize_t n = read(streams[k]->fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        close_fd(&streams[k]->fd);
        continue;
      }
      size_t before = streams[k]->length;
      size_t kept = keep(streams[k], buffer, (size_t)n, output_limit);
      if (kept && c->on_output)
        c->on_output(c->hook_context, streams[k]->number, streams[k]->data + before, kept, now - start);
    }
    if (i_relay >= 0 && fds[i_relay].revents) {
      ssize_t n = read(c->stdin_fd, relay, sizeof relay);
      if (n > 0)
        relay_length = (size_t)n, relay_offset = 0;
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        relay_eof = true;
        close_fd(&s->stdin_write);
      }
    }
    if (i_in >= 0 && fds[i_in].revents) {
      const char *data = c->stdin_data ? (const char *)c->stdin_data + stdin_offset : relay + relay_offset;
      size_t left = c->stdin_data ? c->stdin_length - stdin_offset : relay_length - relay_offset;
      ssize_t n = write_no_sigpipe(s->stdin_write, data, left);
      if (n > 0) {
        if (c->stdin_data)
          stdin_offset += (size_t)n;
        else
          relay_offset += (size_t)n;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        close_fd(&s->stdin_write); /* the program closed its stdin */
        relay_eof = true;
      }
      if (s->stdin_write >= 0 && c->stdin_data && stdin_offset >= c->stdin_length) close_fd(&s->stdin_write);
    }
    if (i_cancel >= 0 && fds[i_cancel].revents && !ended) {
      result->cancelled = true;
      killed = true;
      kill_jail(s);
    }
    if (i_oom >= 0 && fds[i_oom].revents) {
      /* memory.oom.group on a v1 host: one OOM kill ends the whole jail */
      result->oom_killed = true;
      killed = true;
      kill_jail(s);
    }
    if (i_status >= 0 && fds[i_status].revents && !ended) {
      ssize_t n = read(s->status_read, &report, sizeof report);
      if (n < 0 && errno == EINTR) continue;
      status_open = false; /* one report, or the init ended without one */
      reported = n == (ssize_t)sizeof report;
      if (reported && report.alone == 1) {
        /* Nothing of the jail runs any more: the init only exits. Drain what the program wrote. */
        siginfo_t none = {0};
        settle_status(result, &report, none, now_ms() - start);
        ended = true;
        close_fd(&s->stdin_write);
        drain_deadline = now_ms() + DRAIN_BUDGET_MS;
      }
    }
    if (i_pid >= 0 && fds[i_pid].revents && !ended) {
      siginfo_t info;
      if (reap(s, &info) == 0) {
        uint64_t duration_ms = now_ms() - start;
        if (!reported && status_open)
          reported = read(s->status_read, &report, sizeof report) == (ssize_t)sizeof report;
        settle_status(result, reported ? &report : NULL, info, duration_ms);
      }
      ended = true;
      /* The init of the pid namespace is gone: the kernel killed the rest. Drain what they wrote. */
      close_fd(&s->stdin_write);
      drain_deadline = now_ms() + DRAIN_BUDGET_MS;
    }
  }
  if (!ended) {
    siginfo_t info;
    kill_jail(s);
    reap(s, &info);
  }
}

/* The parts of a config that a jail fixes before its call: image, resolver, cgroup limits and workspace
 * size (defaults filled in). A prepared jail serves only a call of an equal shape. */
struct jail_shape {
  const char *image;       /* JAIL_DEFAULT_IMAGE when unset */
  const char *image_store; /* JAIL_DEFAULT_IMAGE_STORE when unset */
  const char *resolv_conf; /* NULL: none */
  bool hosts_dns;
  struct jail_limits limits;
  uint64_t workspace_bytes;
};

static void shape_of(const struct jail_config *c, struct jail_shape *shape) {
  shape->image = c->image ? c->image : JAIL_DEFAULT_IMAGE;
  shape->image_store = c->image_store ? c->image_store : JAIL_DEFAULT_IMAGE_STORE;
  shape->resolv_conf = c->resolv_conf;
  shape->hosts_dns = c->hosts_dns;
  shape->limits.memory_bytes = c->memory_bytes ? c->memory_bytes : JAIL_DEFAULT_MEMORY_BYTES;
  shape->limits.pids = c->pids ? c->pids : JAIL_DEFAULT_PIDS;
  shape->limits.cpus = c->cpus > 0 ? c->cpus : JAIL_DEFAULT_CPUS;
  shape->workspace_bytes = c->workspace_bytes ? c->workspace_bytes : JAIL_DEFAULT_WORKSPACE_BYTES;
}

static bool same_text(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static bool shape_equal(const struct jail_shape *a, const struct jail_shape *b) {
  return same_text(a->image, b->image) && same_text(a->image_store, b->image_store) &&
         same_text(a->resolv_conf, b->resolv_conf) && a->hosts_dns == b->hosts_dns &&
         a->limits.memory_bytes == b->limits.memory_bytes && a->limits.pids == b->limits.pids &&
         a->limits.cpus == b->limits.cpus && a->workspace_bytes == b->workspace_bytes;
}

/* The limits the run reports (result->limits), defaults filled in. */
static void settle_limits(const struct jail_config *c, const struct jail_shape *shape,
                          struct jail_result *result) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  result->limits.memory_bytes = shape->limits.memory_bytes / page * page;
  result->limits.pids = shape->limits.pids;
  result->limits.cpus = shape->limits.cpus;
  result->limits.timeout_ms = c->timeout_ms ? c->timeout_ms : JAIL_DEFAULT_TIMEOUT_MS;
  result->limits.workspace_bytes = shape->workspace_bytes;
  result->limits.output_limit_bytes = c->output_limit ? c->output_limit : JAIL_DEFAULT_OUTPUT_LIMIT_BYTES;
}

static void run_state_init(struct run_state *s) {
  memset(s, 0, sizeof *s);
  int *fds[] = {&s->pidfd,        &s->workspace_fd,   &s->sync_fd,      &s->child_sync,
                &s->stdin_read,   &s->stdin_write,    &s->stdout_read,  &s->stdout_write,
                &s->stderr_read,  &s->stderr_write,   &s->status_read,  &s->status_write,
                &s->oom_event_fd, &s->oom_control_fd, &s->call_channel, &s->call_channel_child};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) *fds[i] = -1;
  s->leaf.v2_fd = -1;
  s->out.number = 1;
  s->err.number = 2;
}

/* The call's part of the plan: workspace files, Landlock rules, the program, its environment and working
 * directory. A fresh jail has it before clone3; a prepared one receives it encoded (jail_call_encode). */
static int plan_call(struct run_state *s, const struct jail_config *c, uint64_t workspace_bytes, int abi,
                     struct jail_plan *plan, dome_error *err) {
  int r;
  if ((r = jail_workspace_collect(&s->workspace, c, workspace_bytes, err)) < 0) return r;
  if ((r = plan_workspace(s, err)) < 0) return r;
  const struct jail_path_rule *rules = c->path_rules ? c->path_rules : jail_baseline_path_rules;
  size_t rule_count = c->path_rules ? c->path_rule_count : jail_baseline_path_rule_count;
  size_t landlock_count = 0;
  for (size_t i = 0; i < rule_count; i++)
    s->landlock_rules[landlock_count++] = (struct jail_landlock_rule){
        rules[i].path, jail_landlock_access(rules[i].access, abi), rules[i].optional, rules[i].exact};
  /* The jail's own devices: /dev/null and friends are written by ordinary programs. */
  s->landlock_rules[landlock_count++] =
      (struct jail_landlock_rule){"/dev", jail_landlock_access(JAIL_ACCESS_READ | JAIL_ACCESS_WRITE, abi)};
  s->landlock_rules[landlock_count++] =
      (struct jail_landlock_rule){"/proc", jail_landlock_access(JAIL_ACCESS_READ, abi)};
  static char *const empty_env[] = {NULL};
  s->argv_copy = copy_strings(c->argv);
  s->env_copy = copy_strings(c->env ? c->env : empty_env);
  if (s->argv_copy == NULL || s->env_copy == NULL)
    return dome_error_set(err, ENOMEM, "copy the program's arguments");
  plan->workspace_entries = s->workspace_entries;
  plan->workspace_entry_count = s->workspace_entry_count;
  plan->argv = s->argv_copy;
  plan->envp = s->env_copy;
  plan->search_path = search_path_of(s->env_copy);
  plan->working_directory = c->working_directory ? c->working_directory : "/workspace";
  plan->landlock_rules = s->landlock_rules;
  plan->landlock_rule_count = landlock_count;
  plan->hold_program = c->before_program != NULL;
  return 0;
}

/* jail_config.before_program, then SYNC_RUN: the child, set up beside the hook (plan.hold_program),
 * starts the program. */
static int release_program(struct run_state *s, const struct jail_config *c, dome_error *err) {
  if (c->before_program == NULL) return 0;
  int r = c->before_program(c->hook_context, err);
  if (r < 0) return r;
  struct jail_sync_message run = {.kind = SYNC_RUN};
  if (send(s->sync_fd, &run, sizeof run, MSG_NOSIGNAL) != (ssize_t)sizeof run)
    return child_failure_pending(s, c, dome_error_set_errno(err, errno, "start the program"), err);
  return 0;
}

/* The program's stdin: a pipe when there is input (bytes or a relayed fd), else the host's /dev/null. */
static int open_stdin(struct run_state *s, const struct jail_config *c, dome_error *err) {
  if (c->stdin_data || c->stdin_fd >= 0) {
    int in_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) < 0) return dome_error_set_errno(err, errno, "create stdin pipe");
    s->stdin_read = in_pipe[0];
    s->stdin_write = in_pipe[1];
  } else if ((s->stdin_read = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    return dome_error_set_errno(err, errno, "open `/dev/null` for the program's stdin");
  }
  return 0;
}

/* Everything up to the second hand-over: image, cgroup leaf, channels, clone3, ids, v1 leaves. `prepared`:
 * no call yet (c only gives the shape): no hooks, no program, no stdin; the child waits after its mounts. */
static int start_jail(struct run_state *s, const struct jail_config *c, const struct jail_shape *shape,
                      bool prepared, struct jail_result *result, dome_error *err) {
  struct jail_plan plan = {0};
  const struct sock_fprog *seccomp = NULL;
  int r;
  if ((r = jail_image_open(&s->image, shape->image, shape->image_store, err)) < 0) return r;
  if ((r = jail_image_set_resolver(&s->image, shape->resolv_conf, shape->hosts_dns, err)) < 0) return r;
  if ((r = jail_seccomp_program(&seccomp, err)) < 0) return r;
  int abi = jail_landlock_abi();
  result->landlock_abi = abi;
  result->landlock = abi > 0;
  if (!prepared && (r = plan_call(s, c, shape->workspace_bytes, abi, &plan, err)) < 0) return r;

  unsigned seq = atomic_fetch_add(&sequence, 1);
  snprintf(result->jail_id, sizeof result->jail_id, "jail-%d-%u", (int)getpid(), seq);
  if ((r = jail_cgroup_create(&s->leaf, result->jail_id, &shape->limits, err)) < 0) return r;
  s->leaf_created = true;
  result->enforcement = jail_enforcement_level(s->leaf.v2_path[0] != '\0', abi);
  if (!prepared && c->on_cgroup_ready) {
    struct jail_cgroup cg = {s->leaf.v2_path, s->leaf.v2_fd, s->leaf.v2_id, result->jail_id};
    if ((r = c->on_cgroup_ready(c->hook_context, &cg, err)) < 0) return r;
  }

  /* Channels. All fds are close-on-exec in this process; the child dup2s its ends onto 0..4. */
  int out_pipe[2], err_pipe[2], sync_pair[2], status_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) < 0 ||
      (s->stdout_read = out_pipe[0], s->stdout_write = out_pipe[1], false) ||
      pipe2(err_pipe, O_CLOEXEC) < 0 ||
      (s->stderr_read = err_pipe[0], s->stderr_write = err_pipe[1], false) ||
      pipe2(status_pipe, O_CLOEXEC) < 0 ||
      (s->status_read = status_pipe[0], s->status_write = status_pipe[1], false) ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync_pair) < 0 ||
      (s->sync_fd = sync_pair[0], s->child_sync = sync_pair[1], false))
    return dome_error_set_errno(err, errno, "create jail channels");
  if (!prepared && (r = open_stdin(s, c, err)) < 0) return r;
  /* A prepared interpreter: its stdin is the host's /dev/null (a call with stdin does not fit it), and its
   * call comes on a stream of its own. */
  const char *python = prepared ? c->prepared_python : NULL;
  const char *program =
      c->prepared_python_program ? c->prepared_python_program : jail_python_bootstrap_source();
  char *python_argv[4] = {(char *)python, "-c", (char *)program, NULL};
  static char *const no_env[] = {NULL};
  if (python) {
    int channel[2];
    if ((r = open_stdin(s, c, err)) < 0) return r;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) < 0)
      return dome_error_set_errno(err, errno, "create the interpreter's call stream");
    s->call_channel = channel[0];
    s->call_channel_child = channel[1];
    plan.python_argv = python_argv;
    plan.python_env = c->env ? c->env : no_env;
    plan.search_path = search_path_of(plan.python_env);
    plan.call_channel_fd = s->call_channel_child;
  }

  plan.prepared = prepared;
  plan.root_is_tmpfs = s->image.host_ro;
  plan.image_rootfs = s->image.rootfs;
  plan.root_entries = s->image.entries;
  plan.root_entry_count = s->image.entry_count;
  plan.root_binds = s->image.binds;
  plan.root_bind_count = s->image.bind_count;
  /* Inodes bounded too (one per 2 KiB of size, at least 1024): empty files cost no bytes, and the
   * workspace is walked after the run. */
  uint64_t workspace_bytes = shape->workspace_bytes;
  uint64_t inodes = workspace_bytes / 2048 > 1024 ? workspace_bytes / 2048 : 1024;
  snprintf(plan.tmpfs_options, sizeof plan.tmpfs_options, "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=1777",
           workspace_bytes, inodes);
  snprintf(plan.workspace_options, sizeof plan.workspace_options,
           "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=0755", workspace_bytes, inodes);
  plan.hold_program = !prepared && c->before_program != NULL;
  plan.stdin_fd = s->stdin_read;
  plan.stdout_fd = s->stdout_write;
  plan.stderr_fd = s->stderr_write;
  plan.sync_fd = s->child_sync;
  plan.supervisor_sync_fd = s->sync_fd;
  plan.status_fd = s->status_write;
  plan.landlock_abi = abi;
  plan.seccomp = seccomp;
  plan.fsize_limit = workspace_bytes;
  plan.nofile_limit = 1024;
  pthread_once(&process_facts_once, read_process_facts);
  plan.last_capability = process_facts.last_capability;
  plan.arg_start = process_facts.arg_start;
  plan.arg_end = process_facts.arg_end;
  plan.env_start = process_facts.env_start;
  plan.env_end = process_facts.env_end;

  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWTIME |
               CLONE_PIDFD | CLONE_CLEAR_SIGHAND; /* handlers back to SIG_DFL (Linux 5.5) */
  /* The network namespace: made by clone3 when on_namespaces_ready needs it at once, otherwise by the
   * child's helper beside the mounts (child.c, "the network namespace, made beside the mounts"). */
  bool namespaces_hook = !prepared && c->on_namespaces_ready != NULL;
  plan.network_namespace_helper = !namespaces_hook && process_facts.ns_last_pid;
  if (!plan.network_namespace_helper) args.flags |= CLONE_NEWNET;
  args.pidfd = (uint64_t)(uintptr_t)&s->pidfd;
  args.exit_signal = 0; /* no SIGCHLD: nobody else's waitpid(-1) can reap the jail */
  bool into_cgroup = s->leaf.v2_fd >= 0;
  if (into_cgroup) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = (uint64_t)s->leaf.v2_fd;
  }
  unsigned host_id = 0;
  if ((r = jail_host_id_acquire(host_id_hint(), &host_id, err)) < 0) return r;
  s->host_id = host_id;
  /* The new user namespace is owned by the effective ids of its creator, and per-user kernel budgets
   * used inside it (inotify instances and watches, queued signals, ...) are charged to that owner up the
   * chain: create it as the jail's own host uid/gid, not as root. Per-thread raw calls (glibc's wrappers
   * would switch every thread); the fs ids stay ours so CLONE_INTO_CGROUP keeps our access to the leaf. */
  /* From the spawner when one runs (spawner.c: a jail cloned from here would copy-on-write fault every
   * page this process writes while it lives); by ourselves when none runs. */
  pid_t pid = jail_spawner_clone(&plan, &args, host_id, &s->pidfd, err);
  if (pid < 0 && pid != -ENOSYS) { /* -EPIPE too: a jail it cloned before it went may hold this socket pair */
    close_fd(&s->child_sync);
    close_fd(&s->call_channel_child);
    return pid;
  }
  int clone_error = 0;
  if (pid < 0) {
    uid_t own_uid = geteuid();
    gid_t own_gid = getegid();
    if (syscall(SYS_setresgid, -1, host_id, -1) < 0 || syscall(SYS_setresuid, -1, host_id, -1) < 0)
      clone_error = errno;
    syscall(SYS_setfsuid, own_uid);
    syscall(SYS_setfsgid, own_gid);
    pid = clone_error ? -1 : (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) jail_child_main(&plan);
    if (pid < 0 && !clone_error) clone_error = errno;
    if (syscall(SYS_setresuid, -1, own_uid, -1) < 0 || syscall(SYS_setresgid, -1, own_gid, -1) < 0)
      abort(); /* cannot happen (the saved ids are ours); never continue with the jail's ids */
  }
  close_fd(&s->child_sync);
  close_fd(&s->call_channel_child);
  if (pid < 0) return dome_error_set_errno(err, clone_error, "clone3 into new namespaces");
  s->pid = pid;
  close_fd(&s->stdout_write);
  close_fd(&s->stderr_write);
  close_fd(&s->status_write);
  close_fd(&s->stdin_read);

  /* The child brings up its loopback meanwhile (no ids needed for that). */
  char map[64];
  snprintf(map, sizeof map, "0 %u 1\n", host_id);
  if ((r = write_proc(pid, "setgroups", "deny", err)) < 0 || (r = write_proc(pid, "uid_map", map, err)) < 0 ||
      (r = write_proc(pid, "gid_map", map, err)) < 0) {
    dome_error_wrap(err, "map ids of jail `%s`", result->jail_id);
    return child_failure_pending(s, c, r, err);
  }
  /* First hand-over: ids mapped; the child assembles its mounts while we make its v1 cgroup leaves. */
  struct jail_sync_message go = {.kind = SYNC_GO};
  if (send(s->sync_fd, &go, sizeof go, MSG_NOSIGNAL) != (ssize_t)sizeof go) {
    r = dome_error_set_errno(err, errno, "start jail `%s`", result->jail_id);
    return child_failure_pending(s, c, r, err);
  }
  if ((r = jail_cgroup_create_v1(&s->leaf, &shape->limits, err)) < 0) return r;
  if ((r = jail_cgroup_attach(&s->leaf, pid, into_cgroup, err)) < 0) return r;
  if (namespaces_hook && (r = c->on_namespaces_ready(c->hook_context, pid, err)) < 0) return r;
  /* Second hand-over, with the v1 leaves' `tasks` files for the child to join (see jail_cgroup_open_tasks);
   * network ready; from here on the child works for the program (a prepared one first waits for it). */
  if ((r = send_go_with_tasks(s, err)) < 0) {
    dome_error_wrap(err, "start jail `%s`", result->jail_id);
    return child_failure_pending(s, c, r, err);
  }
  jail_cgroup_sweep_stale(&s->leaf); /* while the child finishes its set-up */
  return 0;
}

/* From the last hand-over to the collected result: set-up's end, the program's run, accounting, outputs. */
static int run_program(struct run_state *s, const struct jail_config *c, struct jail_result *result,
                       dome_error *err) {
  int r;
  if ((r = await_setup(s, c, result, err)) < 0) return r;
  s->out.fd = dome_steal_fd(&s->stdout_read);
  s->err.fd = dome_steal_fd(&s->stderr_read);
  bool sample_pids = !jail_cgroup_has_pids_peak(&s->leaf);
  s->oom_event_fd = jail_cgroup_oom_eventfd(&s->leaf, &s->oom_control_fd);
  supervise(s, c, result, result->limits.timeout_ms, result->limits.output_limit_bytes, sample_pids);
  close_fd(&s->out.fd);
  close_fd(&s->err.fd);

  struct jail_cgroup_stats stats;
  jail_cgroup_read_stats(&s->leaf, &stats);
  result->cpu_ms = stats.cpu_ns / 1000000u;
  result->peak_memory_bytes = stats.peak_memory_bytes;
  if (stats.peak_pids > result->peak_pids) result->peak_pids = stats.peak_pids;
  result->oom_killed = result->oom_killed || stats.oom_killed;
  result->pids_limited = stats.pids_limited;
  result->stdout_total_bytes = s->out.total;
  result->stderr_total_bytes = s->err.total;
  result->stdout_truncated = s->out.truncated;
  result->stderr_truncated = s->err.truncated;
  result->truncated = s->out.truncated || s->err.truncated;
  result->stdout_data = s->out.data ? s->out.data : strdup("");
  result->stdout_length = s->out.length;
  result->stderr_data = s->err.data ? s->err.data : strdup("");
  result->stderr_length = s->err.length;
  s->out.data = s->err.data = NULL;

  if (s->workspace_fd >= 0) {
    struct jail_workspace_unlisted unlisted = {0};
    r = jail_workspace_outputs(s->workspace_fd, &s->workspace, &result->output_paths,
                               &result->output_path_count, &unlisted, err);
    /* through the directory fd opened before the run, never c->workspace_dir again; at most the
     * workspace size in all */
    if (r == 0 && c->copy_out && c->workspace_dir)
      r = jail_workspace_copy_out(s->workspace_fd, &s->workspace, result->limits.workspace_bytes, &unlisted,
                                  result->output_paths, result->output_path_count, &result->copy_out_errors,
                                  &result->copy_out_error_count, err);
  }
  return r;
}

struct jail_teardown {
  struct run_state state;
};

/* Remove the cgroup leaf and release everything of `s`; 0 or the removal's error. */
static int release_jail(struct run_state *s, dome_error *err) {
  if (s->pid > 0 && !s->reaped) { /* what runs is killed (an init that reported alone only exits) */
    siginfo_t info;
    kill_jail(s);
    reap(s, &info);
  }
  close_fd(&s->workspace_fd); /* releases the workspace tmpfs before its memory cgroup goes */
  int d = 0;
  if (s->leaf_created) d = jail_cgroup_destroy(&s->leaf, err);
  run_state_release(s);
  return d;
}

int jail_teardown_finish(struct jail_teardown *teardown, dome_error *err) {
  if (teardown == NULL) return 0;
  int d = release_jail(&teardown->state, err);
  free(teardown);
  return d;
}

/* Kill and reap what runs, remove the cgroup leaf, release everything; returns `r`, or the removal's error
 * when `r` was 0. A run whose program ended (supervise) and that `c` asks to (defer_teardown) hands the
 * rest to the caller instead, the init's reaping too when it reported alone, and leaves `s` empty. */
static int end_jail(struct run_state *s, const struct jail_config *c, int r, dome_error *err) {
  struct jail_teardown *teardown = NULL;
  if (r == 0 && c && c->defer_teardown && s->pid > 0 && (teardown = malloc(sizeof *teardown)) != NULL) {
    teardown->state = *s;
    run_state_init(s);
    c->defer_teardown(c->defer_teardown_context, teardown);
    return 0;
  }
  dome_error destroy_error = {0};
  int d = release_jail(s, &destroy_error);
  if (d < 0 && r == 0) {
    *err = destroy_error;
    r = d;
  }
  return r;
}

int jail_run(const struct jail_config *c, struct jail_result *result, dome_error *err) {
  memset(result, 0, sizeof *result);
  result->exit_code = -1;
  int r = validate(c, err);
  if (r < 0) return r;
  struct jail_shape shape;
  shape_of(c, &shape);
  settle_limits(c, &shape, result);
  struct run_state s;
  run_state_init(&s);
  r = start_jail(&s, c, &shape, false, result, err);
  if (r == 0) r = release_program(&s, c, err);
  if (r == 0) r = run_program(&s, c, result, err);
  return end_jail(&s, c, r, err);
}

/* ---- prepared jails ---- */

struct jail_prepared {
  struct run_state state;
  struct jail_shape shape;
  char *image, *image_store, *resolv_conf; /* the shape's own copies */
  char *python;                            /* the prepared interpreter, NULL when none */
  char **python_env;                       /* its start environment (copy_strings) */
  char *program;                           /* what it runs in place of the bootstrap, or NULL */
  struct jail_result made;                 /* jail_id, enforcement, Landlock ABI */
};

static void prepared_free(struct jail_prepared *p) {
  free(p->python);
  free(p->python_env);
  free(p->program);
  free(p->image);
  free(p->image_store);
  free(p->resolv_conf);
  free(p);
}

/* Wait (bounded) for the child's SYNC_PREPARED. */
static int await_prepared(struct run_state *s, dome_error *err) {
  uint64_t deadline = now_ms() + SETUP_BUDGET_MS;
  for (;;) {
    uint64_t now = now_ms();
    if (now >= deadline)
      return dome_error_set(err, ETIMEDOUT, "prepare jail: no answer within %u ms", SETUP_BUDGET_MS);
    struct pollfd fd = {s->sync_fd, POLLIN, 0};
    int ready = poll(&fd, 1, (int)(deadline - now));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return dome_error_set_errno(err, errno, "prepare jail: poll");
    if (ready == 0) continue;
    struct jail_sync_message message;
    /* a jail with an interpreter has made its root already: its workspace comes first */
    ssize_t n = receive_sync_message(s, &message);
    if (n < 0 && (errno == EINTR || errno == ECONNRESET)) continue;
    if (n == (ssize_t)sizeof message && message.kind == SYNC_WORKSPACE) continue;
    if (n == (ssize_t)sizeof message && message.kind == SYNC_PREPARED) return 0;
    if (n == (ssize_t)sizeof message && message.kind == SYNC_ERROR) {
      message.text[sizeof message.text - 1] = '\0';
      return dome_error_set_errno(err, message.errno_value > 0 ? message.errno_value : EIO,
                                  "prepare jail: %s", message.text);
    }
    return dome_error_set(err, EIO, "prepare jail: its first process ended during set-up");
  }
}

int jail_prepare(const struct jail_config *config, struct jail_prepared **prepared, dome_error *err) {
  *prepared = NULL;
  int r = validate_shape(config, err);
  if (r < 0) return r;
  if (config->on_namespaces_ready)
    return dome_error_set(err, EINVAL, "prepare jail: on_namespaces_ready needs a fresh jail (jail_run)");
  if (config->prepared_python_program && !config->prepared_python)
    return dome_error_set(err, EINVAL, "prepare jail: a program needs a prepared interpreter");
  struct jail_prepared *p = calloc(1, sizeof *p);
  if (p == NULL) return dome_error_set(err, ENOMEM, "prepare jail: out of memory");
  shape_of(config, &p->shape);
  p->image = strdup(p->shape.image);
  p->image_store = strdup(p->shape.image_store);
  p->resolv_conf = config->resolv_conf ? strdup(config->resolv_conf) : NULL;
  if (!p->image || !p->image_store || (config->resolv_conf && !p->resolv_conf)) {
    prepared_free(p);
    return dome_error_set(err, ENOMEM, "prepare jail: out of memory");
  }
  if (config->prepared_python) {
    static char *const no_env[] = {NULL};
    p->python = strdup(config->prepared_python);
    p->python_env = copy_strings(config->env ? config->env : no_env);
    p->program = config->prepared_python_program ? strdup(config->prepared_python_program) : NULL;
    if (!p->python || !p->python_env || (config->prepared_python_program && !p->program)) {
      prepared_free(p);
      return dome_error_set(err, ENOMEM, "prepare jail: out of memory");
    }
  }
  p->shape.image = p->image;
  p->shape.image_store = p->image_store;
  p->shape.resolv_conf = p->resolv_conf;
  run_state_init(&p->state);
  /* the interpreter's argv and environment from our own copies: the caller's may live in this process's
   * argv and environment areas, which the jail's init blanks before the interpreter starts */
  struct jail_config own = *config;
  if (p->python) {
    own.prepared_python = p->python;
    own.env = p->python_env;
    own.prepared_python_program = p->program;
  }
  r = start_jail(&p->state, &own, &p->shape, true, &p->made, err);
  if (r == 0) r = await_prepared(&p->state, err);
  if (r < 0) {
    end_jail(&p->state, NULL, r, err);
    prepared_free(p);
    return r;
  }
  *prepared = p;
  return 0;
}

bool jail_prepared_fits(const struct jail_prepared *prepared, const struct jail_config *config) {
  if (prepared == NULL || (config->on_namespaces_ready && !config->namespaces_hook_late)) return false;
  struct jail_shape shape;
  shape_of(config, &shape);
  if (prepared->python && !jail_python_call_fits(prepared->python, prepared->python_env, config))
    return false;
  /* an interpreter with a program of its own serves only calls of that program, with its environment */
  const char *program = config->prepared_python_program;
  if ((prepared->program == NULL) != (program == NULL) ||
      (program && (strcmp(prepared->program, program) != 0 || strcmp(config->argv[2], program) != 0 ||
                   !same_strings(prepared->python_env, config->env))))
    return false;
  return shape_equal(&prepared->shape, &shape);
}

bool jail_prepared_waiting(const struct jail_prepared *prepared) {
  if (prepared == NULL) return false;
  /* The child sends nothing more until its call: anything readable (an error, end-of-file) or its exit
   * means it no longer waits. */
  struct pollfd fds[2] = {{prepared->state.pidfd, POLLIN, 0},
                          {prepared->state.sync_fd, POLLIN | POLLRDHUP, 0}};
  int ready = poll(fds, 2, 0);
  return ready == 0;
}

const char *jail_prepared_id(const struct jail_prepared *prepared) {
  return prepared ? prepared->made.jail_id : "";
}

int jail_prepared_cgroup(const struct jail_prepared *prepared, struct jail_cgroup *leaf) {
  const struct run_state *s = &prepared->state;
  if (s->leaf.v2_path[0] == '\0' || s->leaf.v2_fd < 0) return -ENOENT;
  *leaf = (struct jail_cgroup){s->leaf.v2_path, s->leaf.v2_fd, s->leaf.v2_id, prepared->made.jail_id};
  return 0;
}

void jail_prepared_discard(struct jail_prepared *prepared) {
  if (prepared == NULL) return;
  dome_error ignored = {0};
  end_jail(&prepared->state, NULL, 0, &ignored);
  prepared_free(prepared);
}

/* SYNC_BIND with the call's memfd and the program's stdin (SCM_RIGHTS). */
static int send_bind(struct run_state *s, int call_fd, dome_error *err) {
  struct jail_sync_message bind = {.kind = SYNC_BIND};
  struct iovec iov = {&bind, sizeof bind};
  int fds[2] = {call_fd, s->stdin_read};
  union {
    char buffer[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
  ssize_t n = sendmsg(s->sync_fd, &msg, MSG_NOSIGNAL);
  if (n != (ssize_t)sizeof bind) return dome_error_set_errno(err, n < 0 ? errno : EIO, "hand the call over");
  return 0;
}

/* Give every process of the jail (its init and a prepared interpreter) the priority `nice_value`; the
 * leaf's cgroup.procs lists them with host pids. Returns 0 or -errno. */
static int give_priority(struct run_state *s, int nice_value) {
  char list[256];
  const char *dir = s->leaf.v2_path[0] ? s->leaf.v2_path : s->leaf.v1_path[JAIL_V1_PIDS];
  if (jail_cgroup_read(dir, "cgroup.procs", list, sizeof list) < 0) return -EIO;
  for (char *p = list, *end; *p; p = end) {
    long pid = strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0 && setpriority(PRIO_PROCESS, (id_t)pid, nice_value) < 0) return -errno;
    while (*end == '\n') end++;
  }
  return 0;
}

/* Write `length` bytes whole on the interpreter's call stream. */
static int send_to_interpreter(struct run_state *s, const char *data, size_t length, dome_error *err) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = send(s->call_channel, data + done, length - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return dome_error_set_errno(err, n < 0 ? errno : EIO, "hand the call to the interpreter");
    done += (size_t)n;
  }
  return 0;
}

/* The call to a waiting interpreter: its message (interpreter.c), written whole on the call's stream;
 * the interpreter takes it (files, working directory, Landlock, environment) and then waits for the go. */
static int send_interpreter_call(struct run_state *s, const struct jail_plan *call, dome_error *err) {
  char *data = NULL;
  size_t length = 0;
  int r = jail_python_message(call, &data, &length, err);
  if (r < 0) return r;
  r = send_to_interpreter(s, data, length, err);
  free(data);
  return r;
}

/* The go (JAIL_PYTHON_GO) after which the interpreter runs the call's code; the stream is closed. */
static int send_interpreter_go(struct run_state *s, dome_error *err) {
  static const char go = JAIL_PYTHON_GO;
  int r = send_to_interpreter(s, &go, 1, err);
  close_fd(&s->call_channel);
  return r;
}

int jail_prepared_run(struct jail_prepared *p, const struct jail_config *c, struct jail_result *result,
                      dome_error *err) {
  memset(result, 0, sizeof *result);
  result->exit_code = -1;
  int r = validate(c, err);
  if (r < 0) {
    jail_prepared_discard(p);
    return r;
  }
  /* Uncertain is unusable: another shape, or a child that no longer waits, gives way to a fresh jail. */
  if (!jail_prepared_fits(p, c) || !jail_prepared_waiting(p)) {
    jail_prepared_discard(p);
    return jail_run(c, result, err);
  }
  struct run_state *s = &p->state;
  /* The scheduling priority of the calling thread, as a fresh jail's child inherits it (whoever prepared
   * the jail may run at a lower one); the child is the jail's only process still. Where it cannot be
   * given back (no CAP_SYS_NICE to raise a priority) the call runs in a fresh jail instead. */
  errno = 0;
  int nice_value = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
  int saved = errno;
  errno = 0;
  int child_nice = getpriority(PRIO_PROCESS, (id_t)s->pid);
  if ((nice_value == -1 && saved != 0) || (child_nice == -1 && errno != 0) ||
      (child_nice != nice_value && setpriority(PRIO_PROCESS, (id_t)s->pid, nice_value) < 0) ||
      (child_nice != nice_value && p->python && give_priority(s, nice_value) < 0)) {
    jail_prepared_discard(p);
    return jail_run(c, result, err);
  }
  memcpy(result->jail_id, p->made.jail_id, sizeof result->jail_id);
  result->enforcement = p->made.enforcement;
  result->landlock = p->made.landlock;
  result->landlock_abi = p->made.landlock_abi;
  result->prepared = true;
  settle_limits(c, &p->shape, result);
  /* The call's quota, written again and read back, then its hooks (the kernel rules attached to the
   * leaf), all before anything of the call reaches the child. */
  if ((r = jail_cgroup_apply_limits(&s->leaf, &p->shape.limits, err)) < 0) goto out;
  if (c->on_cgroup_ready) {
    struct jail_cgroup cg = {s->leaf.v2_path, s->leaf.v2_fd, s->leaf.v2_id, result->jail_id};
    if ((r = c->on_cgroup_ready(c->hook_context, &cg, err)) < 0) goto out;
  }
  if (c->on_namespaces_ready && (r = c->on_namespaces_ready(c->hook_context, s->pid, err)) < 0) goto out;
  struct jail_plan call = {0};
  if ((r = plan_call(s, c, p->shape.workspace_bytes, p->made.landlock_abi, &call, err)) < 0) goto out;
  if (p->python) {
    call.landlock_abi = p->made.landlock_abi;
    if ((r = send_interpreter_call(s, &call, err)) < 0) {
      dome_error_wrap(err, "start jail `%s`", result->jail_id);
      r = child_failure_pending(s, c, r, err);
      goto out;
    }
    /* the interpreter takes the call meanwhile; its code runs only after the go */
    if (c->before_program && (r = c->before_program(c->hook_context, err)) < 0) goto out;
    if ((r = send_interpreter_go(s, err)) < 0) {
      dome_error_wrap(err, "start jail `%s`", result->jail_id);
      r = child_failure_pending(s, c, r, err);
      goto out;
    }
    r = run_program(s, c, result, err);
    goto out;
  }
  if ((r = open_stdin(s, c, err)) < 0) goto out;
  int call_fd = jail_call_encode(&call, err);
  if (call_fd < 0) {
    r = call_fd;
    goto out;
  }
  r = send_bind(s, call_fd, err);
  close(call_fd);
  close_fd(&s->stdin_read);
  if (r < 0) {
    dome_error_wrap(err, "start jail `%s`", result->jail_id);
    r = child_failure_pending(s, c, r, err);
    goto out;
  }
  if ((r = release_program(s, c, err)) == 0) r = run_program(s, c, result, err);
out:
  r = end_jail(s, c, r, err);
  prepared_free(p);
  return r;
}
