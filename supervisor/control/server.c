/* The control socket server: one thread per connection, peers checked with SO_PEERCRED. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/control/control.h"

struct control_server {
  int listen_fd;
  int wake_pipe[2];
  char *path;
  gid_t group;
  bool has_group;
  control_handler handler;
  void *context;
  pthread_t accept_thread;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  unsigned connections;
  atomic_bool stopping;
};

struct connection {
  control_server *server;
  int fd;
  struct ucred peer;
};

bool control_server_stopping(const control_server *server) {
  return atomic_load(&((control_server *)server)->stopping);
}

static bool send_all(int fd, const char *data, size_t length) {
  while (length > 0) {
    ssize_t n = send(fd, data, length, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    length -= (size_t)n;
  }
  return true;
}

static int send_line(int fd, json_t *value) {
  char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
  if (text == NULL) return -ENOMEM;
  size_t length = strlen(text);
  bool ok = send_all(fd, text, length) && send_all(fd, "\n", 1);
  free(text);
  return ok ? 0 : -EPIPE;
}

int control_send_event(int fd, json_t *event) {
  json_t *line = json_pack("{s:O}", "event", event);
  int rc = send_line(fd, line);
  json_decref(line);
  return rc;
}

static bool peer_allowed(const control_server *server, const struct ucred *peer) {
  if (peer->uid == 0 || peer->uid == geteuid()) return true;
  if (!server->has_group) return false;
  if (peer->gid == server->group) return true;
  struct passwd pw, *result = NULL;
  char buffer[4096];
  if (getpwuid_r(peer->uid, &pw, buffer, sizeof buffer, &result) != 0 || result == NULL) return false;
  gid_t groups[256];
  int count = 256;
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &count) < 0) return false;
  for (int i = 0; i < count; i++)
    if (groups[i] == server->group) return true;
  return false;
}

/* Read one line of at most CONTROL_MAX_REQUEST bytes (30 s budget). */
static char *read_line(int fd) {
  size_t capacity = 4096, length = 0;
  char *line = malloc(capacity);
  while (line) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, 30000) <= 0) break;
    if (length + 4096 + 1 > capacity) {
      if (capacity >= CONTROL_MAX_REQUEST + 8192) break;
      char *grown = realloc(line, capacity * 2);
      if (grown == NULL) break;
      line = grown;
      capacity *= 2;
    }
    ssize_t n = recv(fd, line + length, 4096, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    char *newline = memchr(line + length, '\n', (size_t)n);
    length += (size_t)n;
    if (newline) {
      *newline = '\0';
      return line;
    }
    if (length > CONTROL_MAX_REQUEST) break;
  }
  free(line);
  return NULL;
}

static void *connection_thread(void *argument) {
  struct connection *connection = argument;
  control_server *server = connection->server;
  json_t *answer = NULL;
  if (!peer_allowed(server, &connection->peer)) {
    answer =
        json_pack("{s:b,s:s}", "ok", 0, "error", "permission denied: root or the control group required");
  } else {
    _cleanup_free_ char *line = read_line(connection->fd);
    json_error_t parse_error;
    json_t *request = line ? json_loads(line, JSON_REJECT_DUPLICATES, &parse_error) : NULL;
    const char *command = json_string_value(json_object_get(request, "command"));
    json_t *args = json_object_get(request, "args");
    if (line == NULL) {
      answer = json_pack("{s:b,s:s}", "ok", 0, "error", "request missing or too large");
    } else if (command == NULL || (args && !json_is_object(args))) {
      answer = json_pack("{s:b,s:s}", "ok", 0, "error", "malformed request: expected {command, args}");
    } else {
      json_t *empty = args ? NULL : json_object();
      struct control_request req = {
          .command = command,
          .args = args ? args : empty,
          .uid = connection->peer.uid,
          .gid = connection->peer.gid,
          .pid = connection->peer.pid,
          .fd = connection->fd,
      };
      dome_error err = {0};
      json_t *result = server->handler(server->context, &req, &err);
      if (result)
        answer = json_pack("{s:b,s:o}", "ok", 1, "result", result);
      else
        answer = json_pack("{s:b,s:s}", "ok", 0, "error", err.message[0] ? err.message : "failed");
      json_decref(empty);
    }
    json_decref(request);
  }
  send_line(connection->fd, answer);
  json_decref(answer);
  close(connection->fd);
  free(connection);
  pthread_mutex_lock(&server->lock);
  server->connections--;
  pthread_cond_broadcast(&server->idle);
  pthread_mutex_unlock(&server->lock);
  return NULL;
}

static void *accept_thread(void *argument) {
  control_server *server = argument;
  while (!atomic_load(&server->stopping)) {
    struct pollfd fds[2] = {{.fd = server->listen_fd, .events = POLLIN},
                            {.fd = server->wake_pipe[0], .events = POLLIN}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    int fd = accept4(server->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    struct connection *connection = calloc(1, sizeof *connection);
    socklen_t length = sizeof connection->peer;
    if (connection == NULL || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &connection->peer, &length) < 0) {
      free(connection);
      close(fd);
      continue;
    }
    connection->server = server;
    connection->fd = fd;
    pthread_mutex_lock(&server->lock);
    server->connections++;
    pthread_mutex_unlock(&server->lock);
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attributes, connection_thread, connection) != 0) {
      close(fd);
      free(connection);
      pthread_mutex_lock(&server->lock);
      server->connections--;
      pthread_mutex_unlock(&server->lock);
    }
    pthread_attr_destroy(&attributes);
  }
  return NULL;
}

int control_server_start(const char *path, const char *group, control_handler handler, void *context,
                         control_server **out, dome_error *err) {
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof address.sun_path)
    return dome_error_set(err, ENAMETOOLONG, "control socket `%s`: path too long", path);
  strcpy(address.sun_path, path);
  gid_t gid = 0;
  if (group && group[0]) {
    struct group gr, *result = NULL;
    char buffer[8192];
    if (getgrnam_r(group, &gr, buffer, sizeof buffer, &result) != 0 || result == NULL)
      return dome_error_set(err, ENOENT, "control group `%s` not found", group);
    gid = gr.gr_gid;
  }
  char directory[sizeof address.sun_path];
  snprintf(directory, sizeof directory, "%s", path);
  char *slash = strrchr(directory, '/');
  if (slash && slash != directory) {
    *slash = '\0';
    for (char *p = directory + 1; *p; p++)
      if (*p == '/') {
        *p = '\0';
        mkdir(directory, 0755);
        *p = '/';
      }
    if (mkdir(directory, 0755) < 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "control socket directory `%s`", directory);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return dome_error_set_errno(err, errno, "control socket");
  /* a socket file left by a previous run that nobody listens on is replaced */
  if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) {
    close(fd);
    return dome_error_set(err, EADDRINUSE, "control socket `%s`: another domed is listening", path);
  }
  unlink(path);
  mode_t old_umask = umask(0117);
  int rc = bind(fd, (struct sockaddr *)&address, sizeof address);
  umask(old_umask);
  if (rc < 0 || listen(fd, 64) < 0) {
    int saved = errno;
    close(fd);
    return dome_error_set_errno(err, saved, "control socket `%s`", path);
  }
  if (group && group[0] && chown(path, (uid_t)-1, gid) < 0) {
    int saved = errno;
    close(fd);
    unlink(path);
    return dome_error_set_errno(err, saved, "control socket `%s`: chgrp `%s`", path, group);
  }
  control_server *server = calloc(1, sizeof *server);
  server->listen_fd = fd;
  server->path = strdup(path);
  server->group = gid;
  server->has_group = group && group[0];
  server->handler = handler;
  server->context = context;
  pthread_mutex_init(&server->lock, NULL);
  pthread_cond_init(&server->idle, NULL);
  if (pipe2(server->wake_pipe, O_CLOEXEC) < 0 ||
      pthread_create(&server->accept_thread, NULL, accept_thread, server) != 0) {
    int saved = errno;
    close(fd);
    unlink(path);
    free(server->path);
    free(server);
    return dome_error_set_errno(err, saved, "control socket thread");
  }
  *out = server;
  return 0;
}

void control_server_stop(control_server *server) {
  if (server == NULL) return;
  atomic_store(&server->stopping, true);
  ssize_t written = write(server->wake_pipe[1], "x", 1);
  (void)written;
  pthread_join(server->accept_thread, NULL);
  close(server->listen_fd);
  unlink(server->path);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  pthread_mutex_lock(&server->lock);
  while (server->connections > 0)
    if (pthread_cond_timedwait(&server->idle, &server->lock, &deadline) != 0) break;
  bool idle = server->connections == 0;
  pthread_mutex_unlock(&server->lock);
  if (!idle) return; /* a handler is stuck: leak rather than free under it */
  close(server->wake_pipe[0]);
  close(server->wake_pipe[1]);
  pthread_mutex_destroy(&server->lock);
  pthread_cond_destroy(&server->idle);
  free(server->path);
  free(server);
}
