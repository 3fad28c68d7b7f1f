/* exec_run (supervisor/exec/exec.h; needs root, as every jail does): the records in their order with a
 * sink that keeps them, fail closed when the sink refuses exec.start (nothing runs) or a record while
 * the program runs (it is cancelled, no result), a run with a caller's kernel provider leaves the
 * process's descriptors alone, out of memory in its allocations fails before anything is recorded, and
 * shadow tables beside the active ones are recorded as exec.shadow (one per difference, both decisions, the
 * port) whichever side forbids, with the active decision enforced, and bounded as denials are. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/tables/tables.h"
#include "supervisor/exec/exec.h"
#include "supervisor/kernel/kernel.h"

/* Failure injection: the n-th calloc from now on fails (0: none). This definition takes the place of
 * libc's in this test program; not under AddressSanitizer, whose allocator must see every allocation (the
 * injection test is skipped there and runs in the plain build). */
static int calloc_fails_in;
#ifndef __SANITIZE_ADDRESS__
extern void *__libc_calloc(size_t count, size_t size);
void *calloc(size_t count, size_t size) {
  if (calloc_fails_in > 0 && --calloc_fails_in == 0) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_calloc(count, size);
}
#endif

struct memory_sink {
  json_t *records;
  const char *refuse_type; /* refuse the first record of this type (NULL: none) */
  int appends;
  int syncs;
};

static int keep(void *context, json_t *record, uint64_t *ticket, dome_error *err) {
  struct memory_sink *sink = context;
  sink->appends++;
  const char *type = json_string_value(json_object_get(record, "type"));
  if (sink->refuse_type && strcmp(type, sink->refuse_type) == 0) {
    sink->refuse_type = NULL;
    return dome_error_set(err, ENOSPC, "no space left for `%s`", type);
  }
  json_array_append(sink->records, record);
  if (ticket) *ticket = json_array_size(sink->records);
  return 0;
}

static int sync_all(void *context, uint64_t ticket, dome_error *err) {
  (void)ticket;
  (void)err;
  ((struct memory_sink *)context)->syncs++;
  return 0;
}

static char *types(json_t *records) {
  static char text[1024];
  text[0] = 0;
  size_t i;
  json_t *record;
  json_array_foreach(records, i, record) {
    strncat(text, json_string_value(json_object_get(record, "type")), sizeof text - strlen(text) - 2);
    strncat(text, ",", sizeof text - strlen(text) - 1);
  }
  return text;
}

static struct exec_request request_of(char **argv) {
  return (struct exec_request){
      .identity = {.exec_id = "0123456789abcdef", .agent = "tester", .tool = "test"},
      .program = {.argv = argv, .stdin_fd = -1},
      .limits = {.timeout_ms = 20000},
      .cancel_fd = -1,
  };
}

static void records_in_order(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo hi; echo err >&2", NULL};
  struct exec_request request = request_of(argv);
  struct memory_sink memory = {.records = json_array()};
  struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
  struct exec_outcome outcome;
  dome_error err = {0};
  assert_int_equal(exec_run(&request, &sink, &outcome, &err), 0);
  const char *seen = types(memory.records);
  assert_true(strncmp(seen, "exec.start,exec.jail,exec.output,", 33) == 0);
  assert_non_null(strstr(seen, "exec.end,"));
  assert_int_equal(memory.syncs, 2); /* the start before the program, the end before the answer */
  json_t *start = json_array_get(memory.records, 0);
  assert_string_equal(json_string_value(json_object_get(start, "language")), "sh"); /* sh -c CODE */
  assert_string_equal(json_string_value(json_object_get(start, "code")), "echo hi; echo err >&2");
  json_t *end = json_array_get(memory.records, json_array_size(memory.records) - 1);
  assert_int_equal(json_integer_value(json_object_get(end, "stdout_bytes")), 3);
  assert_int_equal(json_integer_value(json_object_get(end, "stderr_bytes")), 4);
  assert_string_equal(json_string_value(json_object_get(outcome.result, "stdout")), "hi\n");
  assert_true(outcome.recorded);
  exec_outcome_release(&outcome);
  json_decref(memory.records);
}

static void start_refused_nothing_runs(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo SHOULD-NOT-RUN", NULL};
  struct exec_request request = request_of(argv);
  struct memory_sink memory = {.records = json_array(), .refuse_type = "exec.start"};
  struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
  struct exec_outcome outcome;
  dome_error err = {0};
  assert_int_equal(exec_run(&request, &sink, &outcome, &err), -ENOSPC);
  assert_false(outcome.started);
  assert_false(outcome.ran);
  assert_null(outcome.result);
  assert_int_equal(memory.appends, 1); /* no exec.jail: no jail was made */
  assert_non_null(strstr(err.message, "fail closed"));
  exec_outcome_release(&outcome);
  json_decref(memory.records);
}

static void output_refused_cancels(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo first; sleep 30; echo never", NULL};
  struct exec_request request = request_of(argv);
  struct memory_sink memory = {.records = json_array(), .refuse_type = "exec.output"};
  struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
  struct exec_outcome outcome;
  dome_error err = {0};
  time_t before = time(NULL);
  int rc = exec_run(&request, &sink, &outcome, &err);
  assert_int_equal(rc, -ENOSPC);
  assert_int_equal(outcome.journal_rc, -ENOSPC);
  assert_true(time(NULL) - before < 15); /* cancelled, not waited for */
  assert_true(outcome.jail.cancelled);
  assert_null(outcome.result);
  exec_outcome_release(&outcome);
  json_decref(memory.records);
}

static int attach_nothing(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  (void)leaf;
  (void)err;
  (*(int *)context)++;
  return 0;
}
static void report_none(void *context, bool finish, struct exec_kernel_report *report) {
  (void)context;
  report->level = "none";
  report->denials = finish ? json_array() : NULL;
}

static void kernel_provider_keeps_descriptors(void **state) {
  (void)state;
  int null_fd = open("/dev/null", O_RDONLY);
  assert_true(null_fd >= 0);
  assert_int_equal(dup2(null_fd, 0), 0);
  close(null_fd);
  char *argv[] = {"/bin/true", NULL};
  struct exec_request request = request_of(argv);
  int attached = 0;
  struct exec_kernel_provider kernel = {
      .context = &attached, .attach = attach_nothing, .report = report_none};
  request.kernel = &kernel;
  struct memory_sink memory = {.records = json_array()};
  struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
  struct exec_outcome outcome;
  dome_error err = {0};
  assert_int_equal(exec_run(&request, &sink, &outcome, &err), 0);
  assert_int_equal(attached, 1);
  assert_true(fcntl(0, F_GETFD) >= 0); /* fd 0 is still ours */
  exec_outcome_release(&outcome);
  json_decref(memory.records);
}

struct kernel_log {
  int attached, finished;
};
static int attach_counted(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  (void)leaf;
  (void)err;
  ((struct kernel_log *)context)->attached++;
  return 0;
}
static void report_counted(void *context, bool finish, struct exec_kernel_report *report) {
  report_none(NULL, finish, report);
  if (finish) ((struct kernel_log *)context)->finished++;
}

struct begun_sink {
  struct memory_sink memory;
  int begun;
  int refuse_sync; /* the n-th sync (1-based) fails: 0 none */
};
static int keep_begun(void *context, json_t *record, uint64_t *ticket, dome_error *err) {
  return keep(&((struct begun_sink *)context)->memory, record, ticket, err);
}
static void begin(void *context, uint64_t ticket) {
  (void)ticket;
  ((struct begun_sink *)context)->begun++;
}
static int sync_or_refuse(void *context, uint64_t ticket, dome_error *err) {
  struct begun_sink *sink = context;
  sync_all(&sink->memory, ticket, err);
  if (sink->memory.syncs == sink->refuse_sync) return dome_error_set(err, EIO, "sync refused");
  return 0;
}

/* With sync_begin, exec.start's sync is begun before the jail and waited for before the program
 * (jail_config.before_program): the records and syncs are those of a synchronous start. When that sync fails,
 * the program never runs, nothing is answered, and the kernel layer the jail attached is let go (its report
 * finished as often as it was attached). */
static void start_sync_begun_beside_the_jail(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo hi", NULL};
  for (int refuse = 0; refuse <= 1; refuse++) {
    struct exec_request request = request_of(argv);
    struct kernel_log log = {0};
    struct exec_kernel_provider kernel = {
        .context = &log, .attach = attach_counted, .report = report_counted};
    request.kernel = &kernel;
    struct begun_sink begun = {.memory = {.records = json_array()}, .refuse_sync = refuse};
    struct exec_sink sink = {
        .context = &begun, .append = keep_begun, .sync = sync_or_refuse, .sync_begin = begin};
    struct exec_outcome outcome;
    dome_error err = {0};
    int rc = exec_run(&request, &sink, &outcome, &err);
    assert_int_equal(begun.begun, 1);
    assert_int_equal(log.attached, 1);
    assert_int_equal(log.finished, 1);
    if (refuse) {
      assert_int_equal(rc, -EIO);
      assert_false(outcome.started);
      assert_false(outcome.ran);
      assert_null(outcome.result);
      assert_non_null(strstr(err.message, "fail closed"));
      assert_int_equal(begun.memory.syncs, 1);
      /* exec.jail, made meanwhile, is in the sink; domed's refuses it once its journal failed and was
       * reopened (domed_audit_append_after), so that no journal holds it without its start */
      assert_string_equal(types(begun.memory.records), "exec.start,exec.jail,");
    } else {
      assert_int_equal(rc, 0);
      assert_true(outcome.started);
      assert_string_equal(json_string_value(json_object_get(outcome.result, "stdout")), "hi\n");
      assert_int_equal(begun.memory.syncs, 2);
      assert_true(strncmp(types(begun.memory.records), "exec.start,exec.jail,", 21) == 0);
    }
    exec_outcome_release(&outcome);
    json_decref(begun.memory.records);
  }
}

static void out_of_memory_records_nothing(void **state) {
  (void)state;
#ifdef __SANITIZE_ADDRESS__
  skip(); /* calloc cannot be replaced under AddressSanitizer; the plain build runs this */
#endif
  char *argv[] = {"/bin/true", NULL};
  struct exec_request request = request_of(argv);
  request.program.secrets = json_pack("{s:s}", "TOKEN", "a-long-secret-value");
  for (int n = 1; n <= 2; n++) { /* the environment's strings, then the guard's secrets */
    struct memory_sink memory = {.records = json_array()};
    struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
    struct exec_outcome outcome;
    dome_error err = {0};
    calloc_fails_in = n;
    int rc = exec_run(&request, &sink, &outcome, &err);
    calloc_fails_in = 0;
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(memory.appends, 0);
    assert_non_null(strstr(err.message, "environment"));
    exec_outcome_release(&outcome);
    json_decref(memory.records);
  }
  json_decref(request.program.secrets);
}

/* Tables for the jail's own loopback: bind anywhere on 127.0.0.1, connect to 127.0.0.0/8, read and exec
 * everywhere (Landlock); `forbid` denies connects to port 40123 (policy forbid-port). */
static void loopback_tables(struct dome_rule_tables *tables, bool forbid) {
  char json[2048];
  snprintf(
      json, sizeof json,
      "{\"policies\": [\"permit-local\", \"forbid-port\", \"permit-bind\", \"permit-files\"], "
      "\"network\": ["
      " {\"action\": \"bind\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.1/32\", \"ports\": [0, 65535], "
      "\"decision\": \"allow\", \"policy\": \"permit-bind\"},"
      " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [0, %d], "
      "\"decision\": \"allow\", \"policy\": \"permit-local\"},"
      " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [%d, %d], "
      "\"decision\": \"%s\", \"policy\": \"%s\"},"
      " {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"127.0.0.0/8\", \"ports\": [%d, "
      "65535], \"decision\": \"allow\", \"policy\": \"permit-local\"}], \"files\": ["
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", "
      "\"policy\": \"permit-files\"},"
      " {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"exec\", \"decision\": \"allow\", "
      "\"policy\": \"permit-files\"}]}",
      40122, 40123, 40123, forbid ? "deny" : "allow", forbid ? "forbid-port" : "permit-local", 40124);
  dome_error err = {0};
  dome_rule_tables_init(tables);
  assert_int_equal(dome_rule_tables_from_json(json, strlen(json), tables, &err), 0);
}

/* The exec.shadow records of a run, and the one for 127.0.0.1:40123 (NULL: none). */
static size_t shadow_records(json_t *records, json_t **found) {
  size_t count = 0, i;
  json_t *record;
  *found = NULL;
  json_array_foreach(records, i, record) {
    if (strcmp(json_string_value(json_object_get(record, "type")), "exec.shadow") != 0) continue;
    count++;
    *found = record;
  }
  return count;
}

static const char *side_decision(json_t *record, const char *side) {
  return json_string_value(json_object_get(json_object_get(record, side), "decision"));
}

static const char *side_policy(json_t *record, const char *side) {
  json_t *determining = json_object_get(json_object_get(record, side), "determining");
  return json_array_size(determining) == 1 ? json_string_value(json_array_get(determining, 0)) : "";
}

/* A listener and a connect to it inside the jail's own network namespace (loopback only), under an active
 * and a shadow table that disagree on the port: the active decision stands, exactly one exec.shadow names
 * the port and both decisions; then the reverse. Needs cgroup BPF (the host's reduced level or better). */
static void shadow_tables_recorded(void **state) {
  (void)state;
  if (dome_kernel_probe_level() == DOME_LEVEL_NONE) skip();
  char *argv[] = {"/usr/bin/python3", "-c",
                  "import socket, sys\n"
                  "l = socket.socket(); l.bind(('127.0.0.1', 40123)); l.listen(4)\n"
                  "c = socket.socket()\n"
                  "try:\n"
                  "    c.connect(('127.0.0.1', 40123)); print('connected')\n"
                  "except OSError as e:\n"
                  "    print('refused', e.errno)\n",
                  NULL};
  struct dome_rule_tables permit, forbid;
  loopback_tables(&permit, false);
  loopback_tables(&forbid, true);
  for (int reverse = 0; reverse < 2; reverse++) {
    struct exec_request request = request_of(argv);
    request.tables = reverse ? &forbid : &permit;
    request.shadow_tables = reverse ? &permit : &forbid;
    request.shadow_version = "7";
    struct memory_sink memory = {.records = json_array()};
    struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
    struct exec_outcome outcome;
    dome_error err = {0};
    int rc = exec_run(&request, &sink, &outcome, &err);
    if (rc != 0) fprintf(stderr, "exec_run: %s\n", err.message);
    assert_int_equal(rc, 0);
    const char *out = json_string_value(json_object_get(outcome.result, "stdout"));
    assert_string_equal(out, reverse ? "refused 1\n" : "connected\n"); /* EPERM when refused */
    json_t *shadow;
    assert_int_equal(shadow_records(memory.records, &shadow), 1);
    assert_string_equal(json_string_value(json_object_get(shadow, "object")), "127.0.0.1:40123");
    assert_string_equal(json_string_value(json_object_get(shadow, "action")), "net:connect");
    assert_string_equal(json_string_value(json_object_get(shadow, "exec_id")), "0123456789abcdef");
    assert_string_equal(json_string_value(json_object_get(shadow, "shadow_version")), "7");
    assert_string_equal(side_decision(shadow, "active"), reverse ? "deny" : "allow");
    assert_string_equal(side_policy(shadow, "active"), reverse ? "forbid-port" : "permit-local");
    assert_string_equal(side_decision(shadow, "shadow"), reverse ? "allow" : "deny");
    assert_string_equal(side_policy(shadow, "shadow"), reverse ? "permit-local" : "forbid-port");
    json_t *end = json_array_get(memory.records, json_array_size(memory.records) - 1);
    assert_string_equal(json_string_value(json_object_get(end, "type")), "exec.end");
    assert_int_equal(json_integer_value(json_object_get(end, "shadows")), 1);
    assert_int_equal(json_integer_value(json_object_get(end, "shadows_dropped")), 0);
    assert_int_equal(json_integer_value(json_object_get(end, "denials")), reverse ? 1 : 0);
    assert_int_equal(outcome.shadow_count, 1);
    exec_outcome_release(&outcome);
    json_decref(memory.records);
  }
  /* without shadow tables: no exec.shadow and no shadow counts in exec.end */
  struct exec_request request = request_of(argv);
  request.tables = &permit;
  struct memory_sink memory = {.records = json_array()};
  struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
  struct exec_outcome outcome;
  dome_error err = {0};
  assert_int_equal(exec_run(&request, &sink, &outcome, &err), 0);
  json_t *shadow;
  assert_int_equal(shadow_records(memory.records, &shadow), 0);
  json_t *end = json_array_get(memory.records, json_array_size(memory.records) - 1);
  assert_null(json_object_get(end, "shadows"));
  exec_outcome_release(&outcome);
  json_decref(memory.records);
  dome_rule_tables_free(&permit);
  dome_rule_tables_free(&forbid);
}

/* Bounded as denials: 300 refused connects that the shadow would allow give DOME_KERNEL_DENIALS_KEPT
 * exec.shadow records and exec.end counts all 300, shadows_dropped the rest. */
static void shadow_records_bounded(void **state) {
  (void)state;
  if (dome_kernel_probe_level() == DOME_LEVEL_NONE) skip();
  char *argv[] = {"/usr/bin/python3", "-c",
                  "import socket\n"
                  "refused = 0\n"
                  "for i in range(300):\n"
                  "    c = socket.socket()\n"
                  "    try:\n"
                  "        c.connect(('127.0.0.1', 40123))\n"
                  "    except OSError:\n"
                  "        refused += 1\n"
                  "    c.close()\n"
                  "print(refused)\n",
                  NULL};
  struct dome_rule_tables permit, forbid;
  loopback_tables(&permit, false);
  loopback_tables(&forbid, true);
  struct exec_request request = request_of(argv);
  request.tables = &forbid;
  request.shadow_tables = &permit;
  struct memory_sink memory = {.records = json_array()};
  struct exec_sink sink = {.context = &memory, .append = keep, .sync = sync_all};
  struct exec_outcome outcome;
  dome_error err = {0};
  assert_int_equal(exec_run(&request, &sink, &outcome, &err), 0);
  assert_string_equal(json_string_value(json_object_get(outcome.result, "stdout")), "300\n");
  json_t *shadow;
  assert_int_equal(shadow_records(memory.records, &shadow), DOME_KERNEL_DENIALS_KEPT);
  assert_null(json_object_get(shadow, "shadow_version")); /* none given */
  json_t *end = json_array_get(memory.records, json_array_size(memory.records) - 1);
  assert_int_equal(json_integer_value(json_object_get(end, "shadows")), 300);
  assert_int_equal(json_integer_value(json_object_get(end, "shadows_dropped")),
                   300 - DOME_KERNEL_DENIALS_KEPT);
  assert_int_equal(json_integer_value(json_object_get(end, "denials")), 300);
  assert_int_equal(outcome.shadow_count, 300);
  exec_outcome_release(&outcome);
  json_decref(memory.records);
  dome_rule_tables_free(&permit);
  dome_rule_tables_free(&forbid);
}

/* The program of execute_code arguments: every member read, files in the object's order, stdin absent
 * and empty told apart; a missing language or code refused naming the member, nothing allocated. */
static void program_from_arguments(void **state) {
  (void)state;
  json_t *arguments = json_pack("{s:s,s:s,s:s,s:{s:s,s:s}}", "language", "python", "code", "print(1)",
                                "stdin", "", "files", "a.txt", "alpha", "dir/b.csv", "x,y");
  struct exec_program program = {.stdin_fd = 7};
  struct jail_input_file *files = NULL;
  dome_error err = {0};
  assert_int_equal(exec_program_from_arguments(arguments, &program, &files, &err), 0);
  assert_string_equal(program.language, "python");
  assert_int_equal(program.code_length, 8);
  assert_true(program.has_stdin);
  assert_int_equal(program.stdin_length, 0);
  assert_int_equal(program.stdin_fd, -1);
  assert_int_equal(program.file_count, 2);
  assert_string_equal(program.files[1].path, "dir/b.csv");
  assert_int_equal(program.files[1].length, 3);
  free(files);
  json_object_del(arguments, "stdin");
  assert_int_equal(exec_program_from_arguments(arguments, &program, &files, &err), 0);
  assert_false(program.has_stdin);
  free(files);
  json_object_del(arguments, "code");
  assert_int_equal(exec_program_from_arguments(arguments, &program, &files, &err), -EINVAL);
  assert_null(files);
  assert_non_null(strstr(err.message, "`code`"));
  json_decref(arguments);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(records_in_order),
      cmocka_unit_test(start_refused_nothing_runs),
      cmocka_unit_test(output_refused_cancels),
      cmocka_unit_test(kernel_provider_keeps_descriptors),
      cmocka_unit_test(start_sync_begun_beside_the_jail),
      cmocka_unit_test(out_of_memory_records_nothing),
      cmocka_unit_test(program_from_arguments),
      cmocka_unit_test(shadow_tables_recorded),
      cmocka_unit_test(shadow_records_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
