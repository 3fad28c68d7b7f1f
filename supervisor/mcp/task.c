/* Tasks (MCP 2025-11-25 basic/utilities/tasks): a task-augmented tools/call answers at once with a
 * CreateTaskResult; its call runs in its own thread, without a stream, and its JSON-RPC response is kept
 * as the task's outcome until the TTL passes. tasks/get and tasks/list report the status, tasks/result
 * blocks (on an event stream) until the outcome and answers exactly what the plain call would have, with
 * the related-task _meta; tasks/cancel stops the call. Task ids are 256 random bits (libsodium) bound to
 * the agent and gateway that created them: anyone else is answered "not found" (-32602). The outcome is
 * handed to task_save, so that a restarted server takes it back (mcp_server_task_restore). */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/mcp/mcp_internal.h"

#define RELATED_TASK "io.modelcontextprotocol/related-task"
#define TASK_LIST_PAGE 100
#define TASK_INTERRUPTED "the server stopped while the task ran: its result is lost, call again"

static int64_t now_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* ISO 8601 / RFC 3339 UTC with milliseconds. */
static json_t *timestamp(int64_t ms) {
  time_t seconds = (time_t)(ms / 1000);
  struct tm utc;
  gmtime_r(&seconds, &utc);
  char text[40];
  size_t length = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  snprintf(text + length, sizeof text - length, ".%03dZ", (int)(ms % 1000));
  return json_string(text);
}

static bool terminal(const struct mcp_task *task) {
  return strcmp(task->status, "working") != 0;
}

static unsigned poll_interval(const mcp_server *server) {
  return server->options.task_poll_ms ? server->options.task_poll_ms : 1000;
}

/* The Task object (tasks/get, tasks/list, tasks/cancel, CreateTaskResult.task). Under server->lock. */
static json_t *task_json(const mcp_server *server, const struct mcp_task *task) {
  json_t *object =
      json_pack("{s:s,s:s,s:o,s:o,s:I,s:i}", "taskId", task->id, "status", task->status, "createdAt",
                timestamp(task->created_ms), "lastUpdatedAt", timestamp(task->updated_ms), "ttl",
                (json_int_t)task->ttl_ms, "pollInterval", (int)poll_interval(server));
  if (task->status_message[0])
    json_object_set_new(object, "statusMessage", json_string(task->status_message));
  return object;
}

/* What task_save keeps. Under server->lock. */
static json_t *task_record(const struct mcp_task *task) {
  json_t *record =
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:s}", "taskId", task->id, "agent", task->agent, "gateway",
                task->gateway, "status", task->status, "statusMessage", task->status_message, "createdAt",
                (json_int_t)task->created_ms, "lastUpdatedAt", (json_int_t)task->updated_ms, "ttl",
                (json_int_t)task->ttl_ms, "exec_id", task->exec_id);
  if (task->outcome) json_object_set(record, "outcome", task->outcome);
  return record;
}

static void task_unref_locked(struct mcp_task *task) {
  if (--task->refs > 0) return;
  json_decref(task->outcome);
  free(task);
}

/* A task event noted under the lock and reported after it. */
struct task_note {
  const char *type;
  char id[MCP_TASK_ID_BYTES * 2 + 1], agent[256], gateway[128], exec_id[32], status[16];
  char reason[160];
  bool delete;
};
struct task_notes {
  struct task_note items[16];
  size_t count;
};

static void note_locked(struct task_notes *notes, const struct mcp_task *task, const char *type,
                        const char *reason, bool delete) {
  if (notes->count == sizeof notes->items / sizeof notes->items[0]) return;
  struct task_note *note = &notes->items[notes->count++];
  note->type = type;
  memcpy(note->id, task->id, sizeof note->id);
  memcpy(note->agent, task->agent, sizeof note->agent);
  memcpy(note->gateway, task->gateway, sizeof note->gateway);
  memcpy(note->exec_id, task->exec_id, sizeof note->exec_id);
  memcpy(note->status, task->status, sizeof note->status);
  snprintf(note->reason, sizeof note->reason, "%s", reason ? reason : "");
  note->delete = delete;
}

static void notes_report(mcp_server *server, struct task_notes *notes) {
  for (size_t i = 0; i < notes->count; i++) {
    struct task_note *note = &notes->items[i];
    if (server->handlers.task_event)
      server->handlers.task_event(server->handlers.context, note->type, note->agent, note->gateway, note->id,
                                  note->exec_id, note->status, note->reason[0] ? note->reason : NULL);
    if (note->delete &&server->handlers.task_delete)
      server->handlers.task_delete(server->handlers.context, note->id);
  }
  notes->count = 0;
}

/* Hand the task's record to task_save (outside the lock). */
static void save(mcp_server *server, json_t *record /* stolen */) {
  if (server->handlers.task_save && record) {
    dome_error err = {0};
    if (server->handlers.task_save(server->handlers.context,
                                   json_string_value(json_object_get(record, "taskId")), record, &err) < 0)
      fprintf(stderr, "level=warn component=mcp msg=\"task not kept across restarts: %s\"\n", err.message);
  }
  json_decref(record);
}

/* Cancel the running `task` (under lock): its jail is killed and its answer goes nowhere; status_message
 * says why, reason (NULL for none) goes with its task.cancelled event. Returns its record to save. */
static json_t *cancel_locked(mcp_server *server, struct mcp_task *task, const char *status_message,
                             const char *reason, struct task_notes *notes) {
  snprintf(task->status, sizeof task->status, "cancelled");
  snprintf(task->status_message, sizeof task->status_message, "%s", status_message);
  task->updated_ms = now_ms();
  if (task->call) {
    snprintf(task->exec_id, sizeof task->exec_id, "%s", task->call->exec_id);
    mcp_call_cancel(task->call, true);
  }
  note_locked(notes, task, "task.cancelled", reason, false);
  pthread_cond_broadcast(&server->task_changed);
  return task_record(task);
}

/* Delete the terminal tasks whose TTL passed (a running task stays until it ends). Under lock. */
static void expire_locked(mcp_server *server, struct task_notes *notes) {
  int64_t now = now_ms();
  for (struct mcp_task **link = &server->tasks; *link;) {
    struct mcp_task *task = *link;
    if (terminal(task) && task->call == NULL && now >= task->created_ms + task->ttl_ms &&
        notes->count < sizeof notes->items / sizeof notes->items[0]) {
      *link = task->next;
      task->listed = false;
      note_locked(notes, task, "task.expired", NULL, true);
      task_unref_locked(task);
      continue;
    }
    link = &task->next;
  }
}

/* The caller's task `id`, or NULL (unknown, or another agent's: journalled as task.denied). Under lock. */
static struct mcp_task *find_locked(mcp_server *server, const mcp_identity *identity, const char *id,
                                    struct task_notes *notes) {
  if (id == NULL || strlen(id) != MCP_TASK_ID_BYTES * 2) return NULL;
  for (struct mcp_task *task = server->tasks; task; task = task->next) {
    if (sodium_memcmp(task->id, id, MCP_TASK_ID_BYTES * 2) != 0) continue;
    if (strcmp(task->agent, identity->agent) == 0 && strcmp(task->gateway, identity->gateway) == 0)
      return task;
    struct mcp_task other = *task; /* reported as the caller's attempt on it */
    snprintf(other.agent, sizeof other.agent, "%s", identity->agent);
    snprintf(other.gateway, sizeof other.gateway, "%s", identity->gateway);
    note_locked(notes, &other, "task.denied", "the task belongs to another agent", false);
    return NULL;
  }
  return NULL;
}

json_t *mcp_task_start(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                       json_t *id, const char *name, json_t *arguments, json_t *task_params,
                       const json_t *progress_token, uint64_t received_us) {
  json_t *ttl = json_object_get(task_params, "ttl");
  if (!json_is_object(task_params) ||
      (ttl && !json_is_null(ttl) && (!json_is_number(ttl) || json_number_value(ttl) < 0)))
    return mcp_jsonrpc_error(
        id, MCP_INVALID_PARAMS,
        "tools/call: params.task must be an object whose ttl is a number of milliseconds >= 0");
  uint64_t max_ttl = server->options.task_ttl_max_ms;
  unsigned max_tasks = server->options.max_tasks_per_agent;
  if (server->handlers.task_limits)
    server->handlers.task_limits(server->handlers.context, identity, name, &max_ttl, &max_tasks);
  uint64_t wanted = ttl && json_is_number(ttl) ? (uint64_t)json_number_value(ttl) : max_ttl;
  struct mcp_task *task = calloc(1, sizeof *task);
  if (task == NULL) return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, "cannot allocate the task");
  unsigned char random_bytes[MCP_TASK_ID_BYTES];
  randombytes_buf(random_bytes, sizeof random_bytes);
  sodium_bin2hex(task->id, sizeof task->id, random_bytes, sizeof random_bytes);
  snprintf(task->agent, sizeof task->agent, "%s", identity->agent);
  snprintf(task->gateway, sizeof task->gateway, "%s", identity->gateway);
  snprintf(task->status, sizeof task->status, "working");
  task->created_ms = task->updated_ms = now_ms();
  task->ttl_ms = (int64_t)(wanted < max_ttl ? wanted : max_ttl);
  if (wanted > max_ttl)
    snprintf(task->status_message, sizeof task->status_message,
             "ttl %" PRIu64 " ms lowered to the limit of %" PRIu64 " ms", wanted, max_ttl);
  task->refs = 1;

  struct task_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  expire_locked(server, &notes);
  unsigned live = 0;
  for (struct mcp_task *other = server->tasks; other; other = other->next)
    if (strcmp(other->agent, identity->agent) == 0) live++;
  if (live >= max_tasks) {
    pthread_mutex_unlock(&server->lock);
    notes_report(server, &notes);
    free(task);
    char text[200];
    snprintf(text, sizeof text, "too many tasks: agent `%.100s` holds %u (at most %u until their TTL passes)",
             identity->agent, live, max_tasks);
    return mcp_jsonrpc_error(id, MCP_SERVER_OVERLOADED, text);
  }
  task->next = server->tasks;
  server->tasks = task;
  task->listed = true;
  json_t *created = task_json(server, task);
  json_t *record = task_record(task);
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);

  dome_error err = {0};
  struct mcp_stream *sink = mcp_stream_sink(server, session);
  int rc = sink ? mcp_call_start(server, session, identity, id, name, arguments, progress_token, received_us,
                                 sink, task, &err)
                : dome_error_set(&err, ENOMEM, "allocate the task's stream");
  if (sink) mcp_stream_seal(sink);
  if (rc < 0) {
    pthread_mutex_lock(&server->lock);
    for (struct mcp_task **link = &server->tasks; *link; link = &(*link)->next)
      if (*link == task) {
        *link = task->next;
        break;
      }
    task_unref_locked(task);
    pthread_mutex_unlock(&server->lock);
    json_decref(created);
    json_decref(record);
    return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, err.message);
  }
  save(server, record);
  return mcp_jsonrpc_result(id, json_pack("{s:o}", "task", created));
}

void mcp_task_finish(mcp_server *server, mcp_call *call, json_t *message) {
  struct mcp_task *task = call->task;
  struct task_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  snprintf(task->exec_id, sizeof task->exec_id, "%s", call->exec_id);
  if (!task->created_noted) { /* the call named no execution (refused, or routed to a backend) */
    task->created_noted = true;
    note_locked(&notes, task, "task.created", NULL, false);
  }
  if (!terminal(task) && atomic_load(&call->cancelled)) { /* the server stops: the run is lost */
    snprintf(task->status, sizeof task->status, "failed");
    snprintf(task->status_message, sizeof task->status_message, "%s", TASK_INTERRUPTED);
    task->outcome =
        json_pack("{s:{s:i,s:s}}", "error", "code", MCP_INTERNAL_ERROR, "message", TASK_INTERRUPTED);
    task->updated_ms = now_ms();
    note_locked(&notes, task, "task.completed", TASK_INTERRUPTED, false);
  } else if (!terminal(task)) { /* cancelled stays cancelled (tasks/cancel answered already) */
    json_t *error = json_object_get(message, "error");
    json_t *result = json_object_get(message, "result");
    task->outcome = error ? json_pack("{s:O}", "error", error) : json_pack("{s:O}", "result", result);
    bool failed = error != NULL || json_is_true(json_object_get(result, "isError"));
    snprintf(task->status, sizeof task->status, "%s", failed ? "failed" : "completed");
    if (error)
      snprintf(task->status_message, sizeof task->status_message, "%.250s",
               json_string_value(json_object_get(error, "message")) ?: "error");
    else if (failed)
      snprintf(task->status_message, sizeof task->status_message, "the tool reported an error");
    task->updated_ms = now_ms();
    note_locked(&notes, task, "task.completed", NULL, false);
  }
  task->call = NULL;
  call->task = NULL;
  json_t *record = task->listed ? task_record(task) : NULL;
  pthread_cond_broadcast(&server->task_changed);
  task_unref_locked(task);
  pthread_mutex_unlock(&server->lock);
  json_decref(message);
  notes_report(server, &notes);
  save(server, record);
}

/* tasks/result waits on a thread of its own and answers on an event stream. */
struct result_wait {
  mcp_server *server;
  struct mcp_task *task; /* +1 ref */
  json_t *request_id;
  struct mcp_stream *stream; /* one writer */
};

/* The answer of tasks/result for a terminal task: the outcome with the related-task _meta. Under lock. */
static json_t *result_message(const struct mcp_task *task, const json_t *id) {
  json_t *error = json_object_get(task->outcome, "error");
  if (error) {
    json_t *message = json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", id, "error", error);
    return message;
  }
  json_t *result = json_object_get(task->outcome, "result");
  if (result == NULL) /* cancelled before it answered */
    return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, "the task was cancelled before it produced a result");
  json_t *copy = json_deep_copy(result);
  json_t *meta = json_object_get(copy, "_meta");
  if (!json_is_object(meta)) {
    meta = json_object();
    json_object_set_new(copy, "_meta", meta);
  }
  json_object_set_new(meta, RELATED_TASK, json_pack("{s:s}", "taskId", task->id));
  return mcp_jsonrpc_result(id, copy);
}

static void *result_thread(void *argument) {
  struct result_wait *wait = argument;
  mcp_server *server = wait->server;
  pthread_mutex_lock(&server->lock);
  while (!terminal(wait->task) && !server->stopping) pthread_cond_wait(&server->task_changed, &server->lock);
  json_t *message = terminal(wait->task)
                        ? result_message(wait->task, wait->request_id)
                        : mcp_jsonrpc_error(wait->request_id, MCP_INTERNAL_ERROR,
                                            "server shutting down: fetch the result again after it restarts");
  task_unref_locked(wait->task);
  pthread_mutex_unlock(&server->lock);
  mcp_stream_send(wait->stream, message);
  mcp_stream_seal(wait->stream);
  json_decref(wait->request_id);
  free(wait);
  pthread_mutex_lock(&server->lock);
  server->calls_active--;
  server->stats.calls_active = server->calls_active;
  pthread_cond_broadcast(&server->idle);
  pthread_mutex_unlock(&server->lock);
  return NULL;
}

/* Start the waiter of tasks/result on a new event stream; `task` carries the waiter's reference.
 * Returns NULL when it started, else the error to answer. */
static json_t *result_wait_start(mcp_server *server, struct mcp_session *session, struct mcp_task *task,
                                 json_t *id, int socket_fd, struct mcp_stream **stream,
                                 struct MHD_Response **stream_response) {
  struct result_wait *wait = calloc(1, sizeof *wait);
  *stream = wait ? mcp_stream_create(server, session, socket_fd, stream_response) : NULL;
  if (*stream == NULL) {
    free(wait);
    pthread_mutex_lock(&server->lock);
    task_unref_locked(task);
    pthread_mutex_unlock(&server->lock);
    return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, "cannot allocate the event stream");
  }
  wait->server = server;
  wait->task = task;
  wait->request_id = json_incref(id);
  wait->stream = *stream;
  pthread_mutex_lock(&server->lock);
  server->calls_active++;
  server->stats.calls_active = server->calls_active;
  pthread_mutex_unlock(&server->lock);
  if (mcp_stream_writer_start(*stream, result_thread, wait, 128u << 10) == 0) return NULL;
  pthread_mutex_lock(&server->lock);
  server->calls_active--;
  server->stats.calls_active = server->calls_active;
  task_unref_locked(task);
  pthread_mutex_unlock(&server->lock);
  json_decref(wait->request_id);
  free(wait);
  return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, "cannot start the tasks/result thread");
}

static json_t *not_found(json_t *id, json_t *task_id) {
  char text[200];
  snprintf(text, sizeof text, "task not found: %.80s",
           json_is_string(task_id) ? json_string_value(task_id) : "(params.taskId must be a string)");
  return mcp_jsonrpc_error(id, MCP_INVALID_PARAMS, text);
}

json_t *mcp_task_request(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                         json_t *id, const char *method, json_t *params, int socket_fd,
                         struct mcp_stream **stream, struct MHD_Response **stream_response) {
  struct task_notes notes = {0};
  json_t *answer = NULL;
  json_t *record = NULL;
  json_t *task_id = json_object_get(params, "taskId");
  pthread_mutex_lock(&server->lock);
  expire_locked(server, &notes);
  if (strcmp(method, "tasks/list") == 0) {
    json_t *cursor = json_object_get(params, "cursor");
    bool started = cursor == NULL || json_is_null(cursor);
    if (!started && !json_is_string(cursor)) {
      answer = mcp_jsonrpc_error(id, MCP_INVALID_PARAMS, "tasks/list: params.cursor must be a string");
      goto out;
    }
    json_t *tasks = json_array();
    const char *next = NULL;
    for (struct mcp_task *task = server->tasks; task; task = task->next) {
      if (strcmp(task->agent, identity->agent) != 0 || strcmp(task->gateway, identity->gateway) != 0)
        continue;
      if (!started) {
        started = strcmp(task->id, json_string_value(cursor)) == 0;
        continue;
      }
      if (json_array_size(tasks) == TASK_LIST_PAGE) {
        next = json_string_value(json_object_get(json_array_get(tasks, TASK_LIST_PAGE - 1), "taskId"));
        break;
      }
      json_array_append_new(tasks, task_json(server, task));
    }
    if (!started) {
      json_decref(tasks);
      answer = mcp_jsonrpc_error(id, MCP_INVALID_PARAMS, "tasks/list: unknown params.cursor");
      goto out;
    }
    json_t *result = json_pack("{s:o}", "tasks", tasks);
    if (next) json_object_set_new(result, "nextCursor", json_string(next));
    answer = mcp_jsonrpc_result(id, result);
    goto out;
  }
  struct mcp_task *task = find_locked(server, identity, json_string_value(task_id), &notes);
  if (task == NULL) {
    answer = not_found(id, task_id);
  } else if (strcmp(method, "tasks/get") == 0) {
    answer = mcp_jsonrpc_result(id, task_json(server, task));
  } else if (strcmp(method, "tasks/cancel") == 0) {
    if (terminal(task)) {
      char text[160];
      snprintf(text, sizeof text, "tasks/cancel: the task is already %s", task->status);
      answer = mcp_jsonrpc_error(id, MCP_INVALID_PARAMS, text);
    } else {
      record = cancel_locked(server, task, "cancelled by tasks/cancel", NULL, &notes);
      answer = mcp_jsonrpc_result(id, task_json(server, task));
    }
  } else if (terminal(task)) { /* tasks/result of a finished task: at once */
    answer = result_message(task, id);
  } else {        /* tasks/result of a running task: an event stream that answers when it ends */
    task->refs++; /* the waiter's */
    pthread_mutex_unlock(&server->lock);
    notes_report(server, &notes);
    return result_wait_start(server, session, task, id, socket_fd, stream, stream_response);
  }
out:
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
  save(server, record);
  return answer;
}

void mcp_task_progress(mcp_server *server, mcp_call *call, double progress) {
  pthread_mutex_lock(&server->lock);
  struct mcp_task *task = call->task;
  if (task && !terminal(task)) {
    snprintf(task->status_message, sizeof task->status_message, "running: %.0f bytes of output so far",
             progress);
    task->updated_ms = now_ms();
  }
  pthread_mutex_unlock(&server->lock);
}

void mcp_task_named(mcp_server *server, mcp_call *call) {
  struct task_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  struct mcp_task *task = call->task;
  if (task && !task->created_noted) {
    task->created_noted = true;
    snprintf(task->exec_id, sizeof task->exec_id, "%s", call->exec_id);
    note_locked(&notes, task, "task.created", NULL, false);
  }
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
}

size_t mcp_task_cancel_agent(mcp_server *server, const char *agent, const char *reason) {
  size_t cancelled = 0;
  const size_t batch = sizeof((struct task_notes *)0)->items / sizeof((struct task_notes *)0)->items[0];
  for (;;) { /* in batches of what one task_notes holds, so that every task.cancelled is journalled */
    struct task_notes notes = {0};
    json_t *records[sizeof notes.items / sizeof notes.items[0]];
    size_t count = 0;
    pthread_mutex_lock(&server->lock);
    for (struct mcp_task *task = server->tasks; task && count < batch; task = task->next)
      if (!terminal(task) && strcmp(task->agent, agent) == 0)
        records[count++] = cancel_locked(server, task, reason, reason, &notes);
    pthread_mutex_unlock(&server->lock);
    notes_report(server, &notes);
    for (size_t i = 0; i < count; i++) save(server, records[i]);
    cancelled += count;
    if (count < batch) return cancelled;
  }
}

void mcp_task_cancel_all_locked(mcp_server *server) {
  for (struct mcp_task *task = server->tasks; task; task = task->next)
    if (task->call) mcp_call_cancel(task->call, false);
  pthread_cond_broadcast(&server->task_changed);
}

void mcp_tasks_free(mcp_server *server) {
  pthread_mutex_lock(&server->lock);
  while (server->tasks) {
    struct mcp_task *task = server->tasks;
    server->tasks = task->next;
    task->listed = false;
    task_unref_locked(task);
  }
  pthread_mutex_unlock(&server->lock);
}

static bool record_text(const json_t *record, const char *member, char *target, size_t size,
                        dome_error *err) {
  json_t *value = json_object_get(record, member);
  if (!json_is_string(value) || json_string_length(value) >= size) {
    dome_error_set(err, EINVAL, "task record: `%s` must be a string shorter than %zu bytes", member, size);
    return false;
  }
  snprintf(target, size, "%s", json_string_value(value));
  return true;
}

int mcp_server_task_restore(mcp_server *server, const json_t *record, dome_error *err) {
  struct mcp_task *task = calloc(1, sizeof *task);
  if (task == NULL) return dome_error_set(err, ENOMEM, "allocate a task");
  char message[sizeof task->status_message] = "";
  if (!record_text(record, "taskId", task->id, sizeof task->id, err) ||
      !record_text(record, "agent", task->agent, sizeof task->agent, err) ||
      !record_text(record, "gateway", task->gateway, sizeof task->gateway, err) ||
      !record_text(record, "status", task->status, sizeof task->status, err)) {
    free(task);
    return -EINVAL;
  }
  if (json_is_string(json_object_get(record, "statusMessage")))
    snprintf(message, sizeof message, "%s", json_string_value(json_object_get(record, "statusMessage")));
  snprintf(task->status_message, sizeof task->status_message, "%s", message);
  if (json_is_string(json_object_get(record, "exec_id")))
    snprintf(task->exec_id, sizeof task->exec_id, "%s",
             json_string_value(json_object_get(record, "exec_id")));
  json_t *created = json_object_get(record, "createdAt"), *updated = json_object_get(record, "lastUpdatedAt"),
         *ttl = json_object_get(record, "ttl");
  if (strlen(task->id) != MCP_TASK_ID_BYTES * 2 || !json_is_integer(created) || !json_is_integer(updated) ||
      !json_is_integer(ttl)) {
    free(task);
    return dome_error_set(err, EINVAL, "task record: taskId, createdAt, lastUpdatedAt or ttl malformed");
  }
  task->created_ms = json_integer_value(created);
  task->updated_ms = json_integer_value(updated);
  task->ttl_ms = json_integer_value(ttl);
  json_t *outcome = json_object_get(record, "outcome");
  if (json_is_object(outcome)) task->outcome = json_deep_copy(outcome);
  bool interrupted = !terminal(task);
  if (interrupted) {
    snprintf(task->status, sizeof task->status, "failed");
    snprintf(task->status_message, sizeof task->status_message, "%s", TASK_INTERRUPTED);
    json_decref(task->outcome);
    task->outcome =
        json_pack("{s:{s:i,s:s}}", "error", "code", MCP_INTERNAL_ERROR, "message", task->status_message);
    task->updated_ms = now_ms();
  }
  task->refs = 1;
  task->listed = true;
  struct task_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  for (struct mcp_task *other = server->tasks; other; other = other->next)
    if (strcmp(other->id, task->id) == 0) {
      pthread_mutex_unlock(&server->lock);
      json_decref(task->outcome);
      free(task);
      return dome_error_set(err, EEXIST, "task %s restored twice", other->id);
    }
  task->next = server->tasks;
  server->tasks = task;
  if (interrupted) note_locked(&notes, task, "task.completed", task->status_message, false);
  json_t *saved = interrupted ? task_record(task) : NULL;
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
  save(server, saved);
  return 0;
}
