/* The control socket client used by the `dome` CLI. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/control/control.h"

const char *control_socket_path(const char *flag) {
  if (flag && flag[0]) return flag;
  const char *env = getenv("DOME_CONTROL_SOCKET");
  if (env && env[0]) return env;
  return CONTROL_DEFAULT_SOCKET;
}

static int connect_socket(const char *path, dome_error *err) {
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof address.sun_path)
    return dome_error_set(err, ENAMETOOLONG, "control socket `%s`: path too long", path);
  strcpy(address.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return dome_error_set_errno(err, errno, "control socket");
  if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
    int saved = errno;
    close(fd);
    if (saved == ENOENT || saved == ECONNREFUSED)
      return dome_error_set(
          err, saved, "domed is not running at `%s` (set --control-socket or DOME_CONTROL_SOCKET)", path);
    return dome_error_set_errno(err, saved, "connect to `%s`", path);
  }
  return fd;
}

static int send_request(int fd, const char *command, json_t *args, dome_error *err) {
  json_t *request =
      json_pack("{s:s,s:o}", "command", command, "args", args ? json_incref(args) : json_object());
  char *text = json_dumps(request, JSON_COMPACT);
  json_decref(request);
  if (text == NULL) return dome_error_set(err, ENOMEM, "encode request");
  size_t length = strlen(text);
  text[length] = '\n';
  const char *p = text;
  size_t left = length + 1;
  while (left > 0) {
    ssize_t n = send(fd, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      free(text);
      return dome_error_set_errno(err, errno, "send request");
    }
    p += n;
    left -= (size_t)n;
  }
  free(text);
  return 0;
}

/* Read lines from fd, calling on_line for each; stops at EOF or when on_line returns non-zero. */
static int read_lines(int fd, int timeout_ms, int (*on_line)(void *, json_t *, dome_error *), void *context,
                      dome_error *err) {
  size_t capacity = 65536, length = 0;
  _cleanup_free_ char *buffer = malloc(capacity);
  if (buffer == NULL) return dome_error_set(err, ENOMEM, "read answer");
  for (;;) {
    char *newline;
    while ((newline = memchr(buffer, '\n', length)) != NULL) {
      *newline = '\0';
      json_error_t parse_error;
      json_t *value = json_loads(buffer, 0, &parse_error);
      size_t consumed = (size_t)(newline - buffer) + 1;
      memmove(buffer, buffer + consumed, length - consumed);
      length -= consumed;
      if (value == NULL)
        return dome_error_set(err, EPROTO, "malformed answer from domed: %s", parse_error.text);
      int rc = on_line(context, value, err);
      json_decref(value);
      if (rc != 0) return rc;
    }
    if (length + 4096 > capacity) {
      if (capacity > 64u << 20) return dome_error_set(err, EPROTO, "answer from domed too large");
      char *grown = realloc(buffer, capacity * 2);
      if (grown == NULL) return dome_error_set(err, ENOMEM, "read answer");
      buffer = grown;
      capacity *= 2;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int ready = poll(&pfd, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return dome_error_set(err, ETIMEDOUT, "no answer from domed");
    ssize_t n = recv(fd, buffer + length, capacity - length, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return dome_error_set_errno(err, errno, "read answer");
    if (n == 0) return length ? dome_error_set(err, EPROTO, "truncated answer from domed") : 0;
    length += (size_t)n;
  }
}

struct call_state {
  json_t *result;
  bool answered;
};

static int answer_line(void *context, json_t *value, dome_error *err) {
  struct call_state *state = context;
  json_t *ok = json_object_get(value, "ok");
  state->answered = true;
  if (json_is_true(ok)) {
    json_t *result = json_object_get(value, "result");
    state->result = json_incref(result ? result : json_null());
    return 1;
  }
  const char *message = json_string_value(json_object_get(value, "error"));
  if (json_is_false(ok))
    return dome_error_set(err, EREMOTEIO, "%s", message ? message : "domed refused the command");
  return dome_error_set(err, EPROTO, "malformed answer from domed");
}

int control_call(const char *socket_path, const char *command, json_t *args, json_t **result,
                 dome_error *err) {
  _cleanup_close_ int fd = connect_socket(socket_path, err);
  if (fd < 0) return fd;
  int rc = send_request(fd, command, args, err);
  if (rc < 0) return rc;
  struct call_state state = {0};
  rc = read_lines(fd, 60000, answer_line, &state, err);
  if (rc < 0) return rc;
  if (!state.answered) return dome_error_set(err, EPROTO, "domed closed the connection without an answer");
  *result = state.result;
  return 0;
}

struct stream_state {
  int (*on_event)(void *, json_t *);
  void *context;
};

static int stream_line(void *context, json_t *value, dome_error *err) {
  struct stream_state *state = context;
  json_t *event = json_object_get(value, "event");
  if (event) return state->on_event(state->context, event);
  if (json_is_false(json_object_get(value, "ok"))) {
    const char *message = json_string_value(json_object_get(value, "error"));
    return dome_error_set(err, EREMOTEIO, "%s", message ? message : "domed refused the command");
  }
  return 0; /* {"ok": true} closes a finite stream */
}

int control_stream(const char *socket_path, const char *command, json_t *args,
                   int (*on_event)(void *context, json_t *event), void *context, dome_error *err) {
  _cleanup_close_ int fd = connect_socket(socket_path, err);
  if (fd < 0) return fd;
  int rc = send_request(fd, command, args, err);
  if (rc < 0) return rc;
  struct stream_state state = {on_event, context};
  return read_lines(fd, -1, stream_line, &state, err);
}
