/* The Jupyter client: messaging protocol 5.3 over ZeroMQ, HMAC-SHA256 signatures (see session.h). */
#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "supervisor/common/utf8.h"
#include "supervisor/session/session.h"

#define DELIMITER "<IDS|MSG>"
#define MAX_FRAMES 64
#define DEFAULT_OUTPUT_BYTES (1u << 20)
#define DEFAULT_RICH_BYTES (8u << 20)
#define DEFAULT_INTERRUPT_MS 5000u

struct session_kernel {
  void *context;
  void *shell, *iopub, *control;
  unsigned char key[64];
  size_t key_length;
  char session[33]; /* the client's session id in every header */
  unsigned long counter;
};

static void hex_id(char out[33]) {
  unsigned char bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  sodium_bin2hex(out, 33, bytes, sizeof bytes);
}

static void iso_now(char out[40]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char base[24];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 40, "%.20s.%06dZ", base, (int)(ts.tv_nsec / 1000) % 1000000);
}

/* hex HMAC-SHA256 over the four JSON parts, in the order of the wire protocol */
static void sign(const struct session_kernel *kernel, const char *const parts[4], const size_t lengths[4],
                 char out[65]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, kernel->key, kernel->key_length);
  for (int i = 0; i < 4; i++)
    crypto_auth_hmacsha256_update(&state, (const unsigned char *)parts[i], lengths[i]);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

static int zmq_failure(dome_error *err, const char *step) {
  int e = zmq_errno();
  return dome_error_set(err, e ? e : EIO, "%s: %s", step, zmq_strerror(e));
}

/* Send one message; *msg_id receives the header's msg_id (33 bytes). */
static int send_message(struct session_kernel *kernel, void *socket, const char *msg_type, json_t *content,
                        char msg_id[33], dome_error *err) {
  char id[33], date[40];
  hex_id(id);
  iso_now(date);
  json_t *header = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "msg_id", id, "session", kernel->session,
                             "username", "dome", "date", date, "msg_type", msg_type, "version", "5.3");
  char *parts[4] = {header ? json_dumps(header, JSON_COMPACT) : NULL, strdup("{}"), strdup("{}"),
                    json_dumps(content, JSON_COMPACT)};
  json_decref(header);
  int rc = 0;
  if (!parts[0] || !parts[1] || !parts[2] || !parts[3]) {
    rc = dome_error_set(err, ENOMEM, "%s: out of memory", msg_type);
  } else {
    size_t lengths[4];
    for (int i = 0; i < 4; i++) lengths[i] = strlen(parts[i]);
    char signature[65];
    sign(kernel, (const char *const *)parts, lengths, signature);
    if (zmq_send(socket, DELIMITER, strlen(DELIMITER), ZMQ_SNDMORE) < 0 ||
        zmq_send(socket, signature, 64, ZMQ_SNDMORE) < 0)
      rc = zmq_failure(err, msg_type);
    for (int i = 0; i < 4 && rc == 0; i++)
      if (zmq_send(socket, parts[i], lengths[i], i < 3 ? ZMQ_SNDMORE : 0) < 0)
        rc = zmq_failure(err, msg_type);
  }
  for (int i = 0; i < 4; i++) free(parts[i]);
  if (rc == 0 && msg_id) memcpy(msg_id, id, 33);
  return rc;
}

/* One received message: header, parent_header, content (new references). */
struct message {
  json_t *header, *parent, *content;
};

static void message_clear(struct message *m) {
  json_decref(m->header);
  json_decref(m->parent);
  json_decref(m->content);
  *m = (struct message){0};
}

static const char *message_type(const struct message *m) {
  return json_string_value(json_object_get(m->header, "msg_type"));
}
static const char *parent_id(const struct message *m) {
  return json_string_value(json_object_get(m->parent, "msg_id"));
}

/* Receive one message without waiting (the socket is readable). Returns 1 (a message), 0 (one that
 * failed its signature or parsing, dropped), or -errno. */
static int receive_message(struct session_kernel *kernel, void *socket, struct message *out,
                           dome_error *err) {
  zmq_msg_t frames[MAX_FRAMES];
  int count = 0, more = 1, rc = 0;
  while (more) {
    zmq_msg_t *frame = &frames[count < MAX_FRAMES ? count : MAX_FRAMES - 1];
    if (count >= MAX_FRAMES) zmq_msg_close(frame); /* beyond the bound: keep reading, keep nothing */
    zmq_msg_init(frame);
    if (zmq_msg_recv(frame, socket, ZMQ_DONTWAIT) < 0) {
      rc = zmq_failure(err, "receive");
      zmq_msg_close(frame);
      break;
    }
    if (count < MAX_FRAMES) count++;
    more = zmq_msg_more(frame);
  }
  int delimiter = -1;
  for (int i = 0; i < count && delimiter < 0 && rc == 0; i++)
    if (zmq_msg_size(&frames[i]) == strlen(DELIMITER) && memcmp(zmq_msg_data(&frames[i]), DELIMITER, 9) == 0)
      delimiter = i;
  if (rc == 0 && delimiter >= 0 && count >= delimiter + 6) {
    const char *parts[4];
    size_t lengths[4];
    for (int i = 0; i < 4; i++) {
      parts[i] = zmq_msg_data(&frames[delimiter + 2 + i]);
      lengths[i] = zmq_msg_size(&frames[delimiter + 2 + i]);
    }
    char expected[65];
    sign(kernel, parts, lengths, expected);
    if (zmq_msg_size(&frames[delimiter + 1]) == 64 &&
        sodium_memcmp(expected, zmq_msg_data(&frames[delimiter + 1]), 64) == 0) {
      out->header = json_loadb(parts[0], lengths[0], 0, NULL);
      out->parent = json_loadb(parts[1], lengths[1], 0, NULL);
      out->content = json_loadb(parts[3], lengths[3], 0, NULL);
      rc = out->header && out->parent && out->content ? 1 : 0;
      if (rc == 0) message_clear(out);
    }
  }
  for (int i = 0; i < count; i++) zmq_msg_close(&frames[i]);
  return rc;
}

static void *open_socket(struct session_kernel *kernel, int type, const char *dir, int port,
                         dome_error *err) {
  void *socket = zmq_socket(kernel->context, type);
  if (socket == NULL) {
    zmq_failure(err, "zmq_socket");
    return NULL;
  }
  int zero = 0, reconnect_ms = 5;
  zmq_setsockopt(socket, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(socket, ZMQ_RECONNECT_IVL, &reconnect_ms, sizeof reconnect_ms);
  if (type == ZMQ_SUB) zmq_setsockopt(socket, ZMQ_SUBSCRIBE, "", 0);
  char endpoint[160];
  snprintf(endpoint, sizeof endpoint, "ipc://%s/kernel-%d", dir, port);
  if (zmq_connect(socket, endpoint) < 0) {
    zmq_failure(err, endpoint);
    zmq_close(socket);
    return NULL;
  }
  return socket;
}

void session_kernel_close(struct session_kernel *kernel) {
  if (kernel == NULL) return;
  if (kernel->shell) zmq_close(kernel->shell);
  if (kernel->iopub) zmq_close(kernel->iopub);
  if (kernel->control) zmq_close(kernel->control);
  if (kernel->context) zmq_ctx_term(kernel->context);
  sodium_memzero(kernel->key, sizeof kernel->key);
  free(kernel);
}

/* The ports of session_connection_file. */
enum { PORT_SHELL = 1, PORT_IOPUB = 2, PORT_STDIN = 3, PORT_CONTROL = 4, PORT_HEARTBEAT = 5 };

static bool cancelled(int cancel_fd) {
  if (cancel_fd < 0) return false;
  struct pollfd fd = {.fd = cancel_fd, .events = POLLIN};
  return poll(&fd, 1, 0) == 1 && (fd.revents & (POLLIN | POLLHUP));
}

int session_kernel_connect(const char *socket_dir, const char *key, uint64_t timeout_ms, int cancel_fd,
                           struct session_kernel **out, dome_error *err) {
  *out = NULL;
  if (strlen(socket_dir) > 80) return dome_error_set(err, ENAMETOOLONG, "socket directory `%s`", socket_dir);
  struct session_kernel *kernel = calloc(1, sizeof *kernel);
  if (kernel == NULL) return dome_error_set(err, ENOMEM, "kernel client");
  /* the key as the connection file holds it (its text is the HMAC key, messaging spec "Wire protocol") */
  kernel->key_length = strlen(key) < sizeof kernel->key ? strlen(key) : sizeof kernel->key;
  memcpy(kernel->key, key, kernel->key_length);
  hex_id(kernel->session);
  kernel->context = zmq_ctx_new();
  if (kernel->context == NULL) {
    free(kernel);
    return zmq_failure(err, "zmq_ctx_new");
  }
  kernel->shell = open_socket(kernel, ZMQ_DEALER, socket_dir, PORT_SHELL, err);
  kernel->iopub = kernel->shell ? open_socket(kernel, ZMQ_SUB, socket_dir, PORT_IOPUB, err) : NULL;
  kernel->control = kernel->iopub ? open_socket(kernel, ZMQ_DEALER, socket_dir, PORT_CONTROL, err) : NULL;
  if (kernel->control == NULL) {
    session_kernel_close(kernel);
    return dome_error_code(err);
  }
  /* kernel_info_request until shell answers and iopub has carried a message since our subscription */
  uint64_t deadline = session_monotonic_ms() + timeout_ms;
  bool replied = false, published = false;
  uint64_t resend_at = 0;
  while (!(replied && published)) {
    uint64_t now = session_monotonic_ms();
    if (now >= deadline) {
      session_kernel_close(kernel);
      return dome_error_set(err, ETIMEDOUT, "the kernel did not answer within %llu ms",
                            (unsigned long long)timeout_ms);
    }
    if (cancelled(cancel_fd)) {
      session_kernel_close(kernel);
      return dome_error_set(err, ECANCELED, "cancelled while the kernel started");
    }
    if (now >= resend_at && !published) {
      json_t *content = json_object();
      int rc = send_message(kernel, kernel->shell, "kernel_info_request", content, NULL, err);
      json_decref(content);
      if (rc < 0) {
        session_kernel_close(kernel);
        return rc;
      }
      resend_at = now + 100;
    }
    zmq_pollitem_t items[2] = {{kernel->shell, 0, ZMQ_POLLIN, 0}, {kernel->iopub, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, 20) < 0 && zmq_errno() != EINTR) {
      int rc = zmq_failure(err, "zmq_poll");
      session_kernel_close(kernel);
      return rc;
    }
    for (int i = 0; i < 2; i++) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      struct message m = {0};
      int rc = receive_message(kernel, items[i].socket, &m, err);
      if (rc < 0) {
        session_kernel_close(kernel);
        return rc;
      }
      if (rc == 0) continue;
      if (i == 0 && strcmp(message_type(&m) ? message_type(&m) : "", "kernel_info_reply") == 0)
        replied = true;
      if (i == 1) published = true;
      message_clear(&m);
    }
  }
  *out = kernel;
  return 0;
}

/* Text kept within a bound; the rest counted. */
struct bounded {
  char *data;
  size_t length, limit;
  bool truncated;
};

static void bounded_add(struct bounded *b, const char *text, size_t length) {
  if (b->length >= b->limit) {
    b->truncated |= length > 0;
    return;
  }
  size_t room = b->limit - b->length;
  if (length > room) {
    b->truncated = true;
    length = room;
  }
  char *grown = realloc(b->data, b->length + length + 1);
  if (grown == NULL) {
    b->truncated = true;
    return;
  }
  b->data = grown;
  memcpy(b->data + b->length, text, length);
  b->length += length;
  b->data[b->length] = '\0';
}

static json_t *bounded_string(struct bounded *b) {
  char *clean = dome_utf8_sanitize(b->data ? b->data : "", b->length, true, NULL);
  json_t *s = json_string(clean ? clean : "");
  free(clean);
  free(b->data);
  b->data = NULL;
  return s;
}

/* bytes of a display bundle's values */
static size_t bundle_size(json_t *data) {
  size_t size = 0;
  const char *mime;
  json_t *value;
  json_object_foreach(data, mime, value) {
    if (json_is_string(value))
      size += json_string_length(value);
    else {
      char *text = json_dumps(value, JSON_COMPACT);
      size += text ? strlen(text) : 0;
      free(text);
    }
  }
  return size;
}

int session_kernel_execute(struct session_kernel *kernel, const char *code,
                           const struct session_cell_options *options, json_t **cell, dome_error *err) {
  *cell = NULL;
  uint64_t start = session_monotonic_ms();
  size_t output_bytes = options->output_bytes ? options->output_bytes : DEFAULT_OUTPUT_BYTES;
  size_t rich_limit = options->rich_bytes ? options->rich_bytes : DEFAULT_RICH_BYTES;
  uint64_t interrupt_ms = options->interrupt_ms ? options->interrupt_ms : DEFAULT_INTERRUPT_MS;
  json_t *content = json_pack("{s:s,s:b,s:b,s:{},s:b,s:b}", "code", code, "silent", 0, "store_history", 1,
                              "user_expressions", "allow_stdin", 0, "stop_on_error", 1);
  if (content == NULL) return dome_error_set(err, ENOMEM, "execute_request");
  char msg_id[33];
  int rc = send_message(kernel, kernel->shell, "execute_request", content, msg_id, err);
  json_decref(content);
  if (rc < 0) return rc;

  struct bounded out = {.limit = output_bytes}, errors = {.limit = output_bytes};
  json_t *outputs = json_array(), *error = NULL, *result = NULL;
  size_t rich_bytes = 0;
  bool rich_truncated = false, replied = false, idle = false, timed_out = false, was_cancelled = false,
       interrupted = false;
  const char *status = "ok";
  char status_buffer[16] = "ok";
  json_int_t execution_count = 0;
  uint64_t deadline = options->timeout_ms ? start + options->timeout_ms : UINT64_MAX;
  uint64_t give_up = UINT64_MAX;
  while (!(replied && idle)) {
    uint64_t now = session_monotonic_ms();
    if (cancelled(options->end_fd)) {
      rc = dome_error_set(err, EPIPE, "the session ended");
      break;
    }
    if (!interrupted && (now >= deadline || cancelled(options->cancel_fd))) {
      if (now >= deadline)
        timed_out = true;
      else
        was_cancelled = true;
      json_t *empty = json_object();
      rc = send_message(kernel, kernel->control, "interrupt_request", empty, NULL, err);
      json_decref(empty);
      if (rc < 0) break;
      interrupted = true;
      give_up = now + interrupt_ms;
    }
    if (now >= give_up) {
      rc = dome_error_set(err, EPIPE, "the kernel did not answer an interrupt within %llu ms",
                          (unsigned long long)interrupt_ms);
      break;
    }
    uint64_t until = interrupted ? give_up : deadline;
    long wait = until > now ? (long)(until - now) : 0;
    if (wait > 50) wait = 50;
    zmq_pollitem_t items[3] = {{kernel->shell, 0, ZMQ_POLLIN, 0},
                               {kernel->iopub, 0, ZMQ_POLLIN, 0},
                               {kernel->control, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 3, wait) < 0) {
      if (zmq_errno() == EINTR) continue;
      rc = zmq_failure(err, "zmq_poll");
      break;
    }
    for (int i = 0; i < 3 && rc >= 0; i++) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      struct message m = {0};
      int got = receive_message(kernel, items[i].socket, &m, err);
      if (got < 0) {
        rc = got;
        break;
      }
      if (got == 0) continue;
      const char *type = message_type(&m) ? message_type(&m) : "";
      if (parent_id(&m) == NULL || strcmp(parent_id(&m), msg_id) != 0) { /* another request's */
        message_clear(&m);
        continue;
      }
      json_t *c = m.content;
      if (i == 0 && strcmp(type, "execute_reply") == 0) {
        replied = true;
        const char *s = json_string_value(json_object_get(c, "status"));
        snprintf(status_buffer, sizeof status_buffer, "%s", s ? s : "error");
        status = status_buffer;
        execution_count = json_integer_value(json_object_get(c, "execution_count"));
      } else if (i == 1 && strcmp(type, "status") == 0) {
        const char *state = json_string_value(json_object_get(c, "execution_state"));
        if (state && strcmp(state, "idle") == 0) idle = true;
      } else if (i == 1 && strcmp(type, "stream") == 0) {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *text = json_object_get(c, "text");
        bounded_add(name && strcmp(name, "stderr") == 0 ? &errors : &out, json_string_value(text) ?: "",
                    json_string_length(text));
      } else if (i == 1 && (strcmp(type, "display_data") == 0 || strcmp(type, "execute_result") == 0)) {
        json_t *data = json_object_get(c, "data");
        size_t size = bundle_size(data);
        if (json_is_object(data) && rich_bytes + size <= rich_limit) {
          rich_bytes += size;
          json_t *metadata = json_object_get(c, "metadata");
          json_array_append_new(outputs,
                                json_pack("{s:O,s:O,s:s}", "data", data, "metadata",
                                          json_is_object(metadata) ? metadata : json_object(), "kind", type));
          if (strcmp(type, "execute_result") == 0) result = json_object_get(data, "text/plain");
        } else {
          rich_truncated = true;
        }
      } else if (i == 1 && strcmp(type, "error") == 0) {
        json_decref(error);
        error = json_pack("{s:O?,s:O?,s:O?}", "ename", json_object_get(c, "ename"), "evalue",
                          json_object_get(c, "evalue"), "traceback", json_object_get(c, "traceback"));
      }
      message_clear(&m);
    }
    if (rc < 0) break;
  }
  (void)result;
  if (rc < 0) {
    free(out.data);
    free(errors.data);
    json_decref(outputs);
    json_decref(error);
    return rc;
  }
  /* the traceback (ANSI colours as IPython sends them) goes to stderr too, as a terminal would show it */
  size_t t;
  json_t *line;
  json_array_foreach(json_object_get(error, "traceback"), t, line) {
    bounded_add(&errors, json_string_value(line) ?: "", json_string_length(line));
    bounded_add(&errors, "\n", 1);
  }
  *cell = json_pack("{s:o,s:o,s:o,s:s,s:I,s:b,s:b,s:b,s:b,s:I}", "stdout", bounded_string(&out), "stderr",
                    bounded_string(&errors), "outputs", outputs, "status", status, "execution_count",
                    execution_count, "timed_out", timed_out, "cancelled", was_cancelled, "interrupted",
                    interrupted, "truncated", out.truncated || errors.truncated || rich_truncated,
                    "duration_ms", (json_int_t)(session_monotonic_ms() - start));
  if (*cell && error)
    json_object_set_new(*cell, "error", error);
  else
    json_decref(error);
  if (*cell == NULL) return dome_error_set(err, ENOMEM, "cell result");
  return 0;
}
