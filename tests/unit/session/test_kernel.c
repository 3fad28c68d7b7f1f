/* Unit tests of the Jupyter client of supervisor/session/session.h against a scripted kernel over ZeroMQ
 * ipc in a private directory: the handshake (kernel_info_request answered, iopub carrying), a cell's
 * stream and display data collected, a message with a wrong HMAC-SHA256 signature dropped (its text
 * never reaches the result), a cell past its timeout interrupted with interrupt_request on the control
 * channel, and the session's end returning at once. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

#include "supervisor/session/session.h"

#define KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct fake {
  char dir[64];
  void *context, *shell, *iopub, *control;
  volatile int stop;
  int interrupts;
};

static void sign(const char *key, const char *const parts[4], char out[65]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, (const unsigned char *)key, strlen(key));
  for (int i = 0; i < 4; i++)
    crypto_auth_hmacsha256_update(&state, (const unsigned char *)parts[i], strlen(parts[i]));
  unsigned char mac[32];
  crypto_auth_hmacsha256_final(&state, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

/* Send a message of `type` answering `parent` (JSON text of its header), signed with `key`. */
static void send_to(void *socket, zmq_msg_t *identity, const char *key, const char *type, const char *parent,
                    const char *content) {
  char header[256];
  snprintf(header, sizeof header,
           "{\"msg_id\":\"k%d\",\"session\":\"fake\",\"msg_type\":\"%s\",\"version\":\"5.3\"}", rand(), type);
  const char *parts[4] = {header, parent, "{}", content};
  char signature[65];
  sign(key, parts, signature);
  if (identity) zmq_send(socket, zmq_msg_data(identity), zmq_msg_size(identity), ZMQ_SNDMORE);
  zmq_send(socket, "<IDS|MSG>", 9, ZMQ_SNDMORE);
  zmq_send(socket, signature, 64, ZMQ_SNDMORE);
  for (int i = 0; i < 4; i++) zmq_send(socket, parts[i], strlen(parts[i]), i < 3 ? ZMQ_SNDMORE : 0);
}

/* One request from a ROUTER: identity, header (JSON text), the code of an execute_request. */
static int receive_request(void *socket, zmq_msg_t *identity, char *header, size_t size, char *code,
                           size_t code_size) {
  zmq_msg_init(identity);
  if (zmq_msg_recv(identity, socket, ZMQ_DONTWAIT) < 0) return -1;
  char frames[7][4096];
  int count = 0, more = 1;
  while (more && count < 7) {
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    zmq_msg_recv(&frame, socket, 0);
    size_t n = zmq_msg_size(&frame) < 4095 ? zmq_msg_size(&frame) : 4095;
    memcpy(frames[count], zmq_msg_data(&frame), n);
    frames[count++][n] = '\0';
    more = zmq_msg_more(&frame);
    zmq_msg_close(&frame);
  }
  /* frames: <IDS|MSG>, signature, header, parent, metadata, content: the client's signature must hold */
  const char *parts[4] = {frames[2], frames[3], frames[4], frames[5]};
  char expected[65];
  sign(KEY, parts, expected);
  if (strcmp(expected, frames[1]) != 0) return -2;
  snprintf(header, size, "%s", frames[2]);
  json_t *content = json_loads(frames[5], 0, NULL);
  snprintf(code, code_size, "%s", json_string_value(json_object_get(content, "code")) ?: "");
  json_decref(content);
  return 0;
}

static void *fake_kernel(void *argument) {
  struct fake *f = argument;
  while (!f->stop) {
    zmq_pollitem_t items[2] = {{f->shell, 0, ZMQ_POLLIN, 0}, {f->control, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, 20) <= 0) continue;
    char header[4096], code[256];
    zmq_msg_t identity;
    void *socket = (items[0].revents & ZMQ_POLLIN) ? f->shell : f->control;
    if (receive_request(socket, &identity, header, sizeof header, code, sizeof code) < 0) {
      zmq_msg_close(&identity);
      continue;
    }
    json_t *h = json_loads(header, 0, NULL);
    const char *type = json_string_value(json_object_get(h, "msg_type"));
    if (strcmp(type, "kernel_info_request") == 0) {
      send_to(f->shell, &identity, KEY, "kernel_info_reply", header, "{\"status\":\"ok\"}");
      send_to(f->iopub, NULL, KEY, "status", header, "{\"execution_state\":\"idle\"}");
    } else if (strcmp(type, "interrupt_request") == 0) {
      f->interrupts++;
      send_to(f->control, &identity, KEY, "interrupt_reply", header, "{\"status\":\"ok\"}");
      /* the running cell (its header kept in code by the shell branch) ends with KeyboardInterrupt */
    } else if (strcmp(type, "execute_request") == 0) {
      send_to(f->iopub, NULL, KEY, "status", header, "{\"execution_state\":\"busy\"}");
      send_to(f->iopub, NULL, KEY, "stream", header, "{\"name\":\"stdout\",\"text\":\"hi\\n\"}");
      send_to(f->iopub, NULL, "a-forged-key", "stream", header,
              "{\"name\":\"stdout\",\"text\":\"forged\\n\"}");
      send_to(f->iopub, NULL, KEY, "display_data", header,
              "{\"data\":{\"image/png\":\"iVBORw0KGgo=\",\"text/plain\":\"<Figure>\"},\"metadata\":{}}");
      if (strcmp(code, "spin") == 0) { /* until interrupted */
        int seen = f->interrupts;
        while (!f->stop && f->interrupts == seen) {
          zmq_pollitem_t control = {f->control, 0, ZMQ_POLLIN, 0};
          if (zmq_poll(&control, 1, 20) <= 0) continue;
          char other[4096], ignored[16];
          zmq_msg_t who;
          if (receive_request(f->control, &who, other, sizeof other, ignored, sizeof ignored) == 0) {
            f->interrupts++;
            send_to(f->control, &who, KEY, "interrupt_reply", other, "{\"status\":\"ok\"}");
          }
          zmq_msg_close(&who);
        }
        send_to(f->iopub, NULL, KEY, "error", header,
                "{\"ename\":\"KeyboardInterrupt\",\"evalue\":\"\",\"traceback\":[\"KeyboardInterrupt\"]}");
        send_to(f->shell, &identity, KEY, "execute_reply", header,
                "{\"status\":\"error\",\"execution_count\":2}");
      } else if (strcmp(code, "hang") != 0) {
        send_to(f->shell, &identity, KEY, "execute_reply", header,
                "{\"status\":\"ok\",\"execution_count\":1}");
      }
      if (strcmp(code, "hang") != 0)
        send_to(f->iopub, NULL, KEY, "status", header, "{\"execution_state\":\"idle\"}");
    }
    json_decref(h);
    zmq_msg_close(&identity);
  }
  return NULL;
}

static void *bound(struct fake *f, int type, int port) {
  void *socket = zmq_socket(f->context, type);
  int zero = 0;
  zmq_setsockopt(socket, ZMQ_LINGER, &zero, sizeof zero);
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "ipc://%s/kernel-%d", f->dir, port);
  assert_int_equal(zmq_bind(socket, endpoint), 0);
  return socket;
}

static void run_with_fake(void (*body)(struct fake *, struct session_kernel *)) {
  struct fake f = {0};
  snprintf(f.dir, sizeof f.dir, "/tmp/dome-kernel-test-XXXXXX");
  assert_non_null(mkdtemp(f.dir));
  f.context = zmq_ctx_new();
  f.shell = bound(&f, ZMQ_ROUTER, 1);
  f.iopub = bound(&f, ZMQ_PUB, 2);
  f.control = bound(&f, ZMQ_ROUTER, 4);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, fake_kernel, &f), 0);
  struct session_kernel *kernel = NULL;
  dome_error err = {0};
  assert_int_equal(session_kernel_connect(f.dir, KEY, 5000, -1, &kernel, &err), 0);
  body(&f, kernel);
  session_kernel_close(kernel);
  f.stop = 1;
  pthread_join(thread, NULL);
  zmq_close(f.shell);
  zmq_close(f.iopub);
  zmq_close(f.control);
  zmq_ctx_term(f.context);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", f.dir);
  assert_int_equal(system(command), 0);
}

static void cell_collected(struct fake *f, struct session_kernel *kernel) {
  (void)f;
  json_t *cell = NULL;
  dome_error err = {0};
  struct session_cell_options options = {.timeout_ms = 5000, .cancel_fd = -1, .end_fd = -1};
  assert_int_equal(session_kernel_execute(kernel, "print('hi')", &options, &cell, &err), 0);
  assert_string_equal(json_string_value(json_object_get(cell, "stdout")), "hi\n"); /* not "forged" */
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "ok");
  assert_int_equal(json_integer_value(json_object_get(cell, "execution_count")), 1);
  json_t *outputs = json_object_get(cell, "outputs");
  assert_int_equal(json_array_size(outputs), 1);
  json_t *data = json_object_get(json_array_get(outputs, 0), "data");
  assert_string_equal(json_string_value(json_object_get(data, "image/png")), "iVBORw0KGgo=");
  assert_false(json_is_true(json_object_get(cell, "interrupted")));
  json_decref(cell);
}

static void test_cell(void **state) {
  (void)state;
  run_with_fake(cell_collected);
}

static void cell_interrupted(struct fake *f, struct session_kernel *kernel) {
  json_t *cell = NULL;
  dome_error err = {0};
  struct session_cell_options options = {.timeout_ms = 200, .cancel_fd = -1, .end_fd = -1};
  assert_int_equal(session_kernel_execute(kernel, "spin", &options, &cell, &err), 0);
  assert_int_equal(f->interrupts, 1);
  assert_true(json_is_true(json_object_get(cell, "timed_out")));
  assert_true(json_is_true(json_object_get(cell, "interrupted")));
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "error");
  assert_string_equal(json_string_value(json_object_get(json_object_get(cell, "error"), "ename")),
                      "KeyboardInterrupt");
  assert_non_null(strstr(json_string_value(json_object_get(cell, "stderr")), "KeyboardInterrupt"));
  json_decref(cell);
  /* the kernel answers the next cell: it lived on */
  options.timeout_ms = 5000;
  assert_int_equal(session_kernel_execute(kernel, "print('hi')", &options, &cell, &err), 0);
  assert_string_equal(json_string_value(json_object_get(cell, "stdout")), "hi\n");
  json_decref(cell);
}

static void test_interrupt(void **state) {
  (void)state;
  run_with_fake(cell_interrupted);
}

static void cell_session_ended(struct fake *f, struct session_kernel *kernel) {
  (void)f;
  int end = eventfd(1, EFD_CLOEXEC); /* readable: the session is over */
  json_t *cell = NULL;
  dome_error err = {0};
  struct session_cell_options options = {.timeout_ms = 5000, .cancel_fd = -1, .end_fd = end};
  assert_int_equal(session_kernel_execute(kernel, "hang", &options, &cell, &err), -EPIPE);
  assert_null(cell);
  close(end);
}

static void test_session_end(void **state) {
  (void)state;
  run_with_fake(cell_session_ended);
}

/* no kernel, or a socket directory too long for sun_path: bounded, clear errors */
static void test_no_kernel(void **state) {
  (void)state;
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/dome-kernel-test-XXXXXX");
  assert_non_null(mkdtemp(dir));
  struct session_kernel *kernel = NULL;
  dome_error err = {0};
  /* nothing listens: the wait ends at its bound */
  assert_int_equal(session_kernel_connect(dir, KEY, 300, -1, &kernel, &err), -ETIMEDOUT);
  assert_null(kernel);
  char long_dir[128];
  memset(long_dir, 'a', 100);
  long_dir[100] = '\0';
  assert_int_equal(session_kernel_connect(long_dir, KEY, 300, -1, &kernel, &err), -ENAMETOOLONG);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cell),
      cmocka_unit_test(test_interrupt),
      cmocka_unit_test(test_session_end),
      cmocka_unit_test(test_no_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
