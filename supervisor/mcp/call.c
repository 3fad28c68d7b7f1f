/* tools/call in flight: a worker thread (workers.c) runs the handler while the HTTP response streams
 * Server-Sent Events (MCP basic/transports: the server may send notifications before the response on the
 * SSE stream of a POST). Progress notifications (basic/utilities/progress) go out as they come;
 * cancellation (basic/utilities/cancellation) makes the call's eventfd readable and the response is
 * then not sent. A client that closes its connection cancels the calls answering on it the same way:
 * the stream's reader watches the socket for the peer's close while it waits for output. */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "supervisor/common/deadline.h"
#include "supervisor/mcp/mcp_internal.h"

#define SSE_BUFFER_LIMIT (16u << 20) /* progress is dropped beyond this much unsent output */

/* The response reading a stream: the stream, and the generation it was attached as (a resumption
 * attaches a newer one; the older reader then ends). */
struct stream_reader {
  struct mcp_stream *stream;
  unsigned generation;
  int socket_fd;
  bool close_early;         /* end the response at close_at while the stream's calls still run */
  struct timespec close_at; /* CLOCK_REALTIME */
};

/* Forget the stream in its session's record (it can still be resumed from the replay buffer). */
static void record_forget(struct mcp_stream *stream) {
  struct mcp_session *session = stream->session;
  pthread_mutex_lock(&session->replay_lock);
  for (size_t i = 0; i < MCP_STREAM_RECORDS; i++)
    if (session->records[i].stream == stream) session->records[i].stream = NULL;
  if (session->standalone == stream) session->standalone = NULL;
  pthread_mutex_unlock(&session->replay_lock);
}

static void stream_unref(struct mcp_stream *stream) {
  if (atomic_fetch_sub(&stream->refs, 1) != 1) return;
  record_forget(stream);
  free(stream->out);
  pthread_mutex_destroy(&stream->lock);
  pthread_cond_destroy(&stream->cond);
  mcp_session_release(stream->server, stream->session);
  free(stream);
}

/* A new reference unless the stream is already being freed. */
static bool stream_ref_live(struct mcp_stream *stream) {
  int refs = atomic_load(&stream->refs);
  while (refs > 0)
    if (atomic_compare_exchange_weak(&stream->refs, &refs, refs + 1)) return true;
  return false;
}

static void call_free(mcp_call *call) {
  json_decref(call->request_id);
  json_decref(call->progress_token);
  json_decref(call->arguments);
  free(call->request_id_text);
  free(call->tool_name);
  if (call->cancel_fd >= 0) close(call->cancel_fd);
  free(call);
}

/* Append `length` bytes to the unsent output. Under stream->lock. */
static bool out_append_locked(struct mcp_stream *stream, const char *text, size_t length) {
  if (stream->out_sent > 0) { /* compact what was already sent */
    memmove(stream->out, stream->out + stream->out_sent, stream->out_length - stream->out_sent);
    stream->out_length -= stream->out_sent;
    stream->out_sent = 0;
  }
  size_t needed = stream->out_length + length + 1;
  if (needed > stream->out_capacity) {
    size_t capacity = stream->out_capacity ? stream->out_capacity : 4096;
    while (capacity < needed) capacity *= 2;
    char *grown = realloc(stream->out, capacity);
    if (grown == NULL) return false;
    stream->out = grown;
    stream->out_capacity = capacity;
  }
  memcpy(stream->out + stream->out_length, text, length);
  stream->out_length += length;
  return true;
}

/* The stream's record in its session, NULL when it was forgotten. Under session->replay_lock. */
static struct mcp_stream_record *record_find_locked(struct mcp_session *session, unsigned number) {
  for (size_t i = 0; i < MCP_STREAM_RECORDS; i++)
    if (session->records[i].number == number) return &session->records[i];
  return NULL;
}

/* Keep one event for replay; the oldest events give way beyond the session's bound (their streams
 * remember how far events were dropped). Under session->replay_lock. */
static void replay_keep_locked(mcp_server *server, struct mcp_session *session, unsigned stream, uint64_t id,
                               const char *text, size_t length) {
  size_t limit = server->options.sse_replay_bytes;
  struct mcp_replay_event *event = malloc(sizeof *event + length);
  if (event == NULL || sizeof *event + length > limit) {
    free(event);
    struct mcp_stream_record *record = record_find_locked(session, stream);
    if (record) record->evicted_through = id; /* this event can never be replayed */
    return;
  }
  event->next = NULL;
  event->id = id;
  event->stream = stream;
  event->length = length;
  memcpy(event->text, text, length);
  if (session->replay_tail)
    session->replay_tail->next = event;
  else
    session->replay_head = event;
  session->replay_tail = event;
  session->replay_bytes += sizeof *event + length;
  while (session->replay_bytes > limit && session->replay_head) {
    struct mcp_replay_event *oldest = session->replay_head;
    session->replay_head = oldest->next;
    if (session->replay_head == NULL) session->replay_tail = NULL;
    session->replay_bytes -= sizeof *oldest + oldest->length;
    struct mcp_stream_record *record = record_find_locked(session, oldest->stream);
    if (record && record->evicted_through < oldest->id) record->evicted_through = oldest->id;
    free(oldest);
  }
}

void mcp_session_replay_free(struct mcp_session *session) {
  for (struct mcp_replay_event *event = session->replay_head, *next; event; event = next) {
    next = event->next;
    free(event);
  }
  session->replay_head = session->replay_tail = NULL;
  pthread_mutex_destroy(&session->replay_lock);
}

/* Append one SSE event carrying `message` (stolen), with the next event id of the session: kept for
 * replay, and sent when a response reads the stream. Under stream->lock. */
static void append_event_locked(struct mcp_stream *stream, json_t *message, bool essential) {
  char *data = json_dumps(message, JSON_COMPACT);
  json_decref(message);
  if (data == NULL) return;
  if (!essential && !stream->stream_gone && stream->out_length - stream->out_sent > SSE_BUFFER_LIMIT) {
    free(data);
    return;
  }
  struct mcp_session *session = stream->session;
  size_t data_length = strlen(data);
  char *text = malloc(data_length + 64);
  if (text == NULL) {
    free(data);
    return;
  }
  if (stream->number == 0) { /* a sink: nothing is sent or kept */
    free(text);
    free(data);
    return;
  }
  pthread_mutex_lock(&session->replay_lock);
  uint64_t id = ++session->next_event;
  int prefix =
      snprintf(text, 64, "id: %u-%llu\nevent: message\ndata: ", stream->number, (unsigned long long)id);
  memcpy(text + prefix, data, data_length);
  memcpy(text + prefix + data_length, "\n\n", 2);
  size_t length = (size_t)prefix + data_length + 2;
  replay_keep_locked(stream->server, session, stream->number, id, text, length);
  pthread_mutex_unlock(&session->replay_lock);
  if (!stream->stream_gone) out_append_locked(stream, text, length);
  free(text);
  free(data);
  pthread_cond_broadcast(&stream->cond);
}

void mcp_stream_send(struct mcp_stream *stream, json_t *message) {
  pthread_mutex_lock(&stream->lock);
  append_event_locked(stream, message, true);
  pthread_mutex_unlock(&stream->lock);
}

/* One writer is finished (a call answered, or the POST handler sealed the stream). */
static void stream_writer_done(struct mcp_stream *stream) {
  pthread_mutex_lock(&stream->lock);
  stream->writers--;
  pthread_cond_broadcast(&stream->cond);
  pthread_mutex_unlock(&stream->lock);
  stream_unref(stream);
}

void mcp_stream_seal(struct mcp_stream *stream) {
  stream_writer_done(stream);
}

bool mcp_call_wants_progress(const mcp_call *call) {
  return call->progress_token != NULL || call->task != NULL;
}

void mcp_call_progress(mcp_call *call, double progress, const char *message) {
  if (call->task) { /* no stream: tasks/get reports how far it got */
    mcp_task_progress(call->server, call, progress);
    return;
  }
  if (call->progress_token == NULL || atomic_load(&call->cancelled)) return;
  struct mcp_stream *stream = call->stream;
  pthread_mutex_lock(&stream->lock);
  if (progress <= call->last_progress) progress = call->last_progress + 1;
  call->last_progress = progress;
  json_t *params = json_pack("{s:O,s:f}", "progressToken", call->progress_token, "progress", progress);
  if (message) json_object_set_new(params, "message", json_string(message));
  append_event_locked(
      stream,
      json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", "notifications/progress", "params", params),
      false);
  pthread_mutex_unlock(&stream->lock);
}

static const char *const log_levels[MCP_LOG_LEVELS] = {"debug", "info",     "notice", "warning",
                                                       "error", "critical", "alert",  "emergency"};

int mcp_log_level_parse(const char *name) {
  for (int level = 0; name && level < MCP_LOG_LEVELS; level++)
    if (strcmp(log_levels[level], name) == 0) return level;
  return -1;
}

void mcp_call_log(mcp_call *call, const char *level, const char *logger, const char *text) {
  int severity = mcp_log_level_parse(level);
  if (severity < 0 || atomic_load(&call->cancelled) || call->stream == NULL) return;
  if (severity < atomic_load(&call->session->log_level)) return;
  json_t *params = json_pack("{s:s,s:s,s:s}", "level", log_levels[severity], "logger",
                             logger ? logger : "dome", "data", text ? text : "");
  struct mcp_stream *stream = call->stream;
  pthread_mutex_lock(&stream->lock);
  append_event_locked(
      stream,
      json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", "notifications/message", "params", params),
      true);
  pthread_mutex_unlock(&stream->lock);
}

int mcp_call_cancel_fd(const mcp_call *call) {
  return call->cancel_fd;
}
bool mcp_call_cancelled(const mcp_call *call) {
  return atomic_load(&((mcp_call *)call)->cancelled);
}
const char *mcp_call_protocol_version(const mcp_call *call) {
  return call->protocol_version;
}
const char *mcp_call_request_id(const mcp_call *call) {
  return call->request_id_text;
}
uint64_t mcp_call_received_us(const mcp_call *call) {
  return call->received_us;
}
const char *mcp_call_session_id(const mcp_call *call) {
  return call->session_id;
}

void mcp_call_cancel(mcp_call *call, bool by_client) {
  if (by_client) atomic_store(&call->cancelled_by_client, true);
  if (atomic_exchange(&call->cancelled, true)) return;
  uint64_t one = 1;
  ssize_t written = write(call->cancel_fd, &one, sizeof one);
  (void)written;
}

static void stream_unlink_call(struct mcp_stream *stream, mcp_call *call) {
  pthread_mutex_lock(&stream->lock);
  for (mcp_call **link = &stream->calls; *link; link = &(*link)->next_in_stream)
    if (*link == call) {
      *link = call->next_in_stream;
      break;
    }
  pthread_mutex_unlock(&stream->lock);
}

/* The client went away: every call still answering on the stream is cancelled, with no response.
 * Under stream->lock. */
static void stream_client_gone_locked(struct mcp_stream *stream) {
  unsigned cancelled = 0;
  for (mcp_call *call = stream->calls; call; call = call->next_in_stream)
    if (!atomic_load(&call->cancelled)) {
      mcp_call_cancel(call, true);
      cancelled++;
    }
  if (cancelled == 0) return;
  mcp_server *server = stream->server;
  pthread_mutex_lock(&server->lock);
  server->stats.calls_disconnected += cancelled;
  pthread_mutex_unlock(&server->lock);
}

/* True when the peer closed or reset the connection (a half-close counts: an HTTP client that shuts
 * down its side will not read the answer either). */
static bool peer_closed(int fd) {
  if (fd < 0) return false;
  struct pollfd watched = {.fd = fd, .events = POLLRDHUP};
  if (poll(&watched, 1, 0) <= 0) return false;
  return (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static void *call_thread(void *argument) {
  mcp_call *call = argument;
  mcp_server *server = call->server;
  int rpc_error = 0;
  dome_error err = {0};
  json_t *result = server->handlers.call_tool(server->handlers.context, &call->identity, call->tool_name,
                                              call->arguments, call, &rpc_error, &err);
  json_t *message;
  if (atomic_load(&call->cancelled) && !atomic_load(&call->cancelled_by_client)) {
    /* cancelled by the server (shutdown, session ended): the client still gets an answer */
    json_decref(result);
    const char *reason = atomic_load(&call->cancel_reason);
    message = mcp_jsonrpc_error(call->request_id, MCP_INTERNAL_ERROR,
                                reason ? reason : "request cancelled: server shutting down or session ended");
  } else if (result != NULL) {
    message = mcp_jsonrpc_result(call->request_id, result);
  } else {
    message = mcp_jsonrpc_error(call->request_id, rpc_error ? rpc_error : MCP_INTERNAL_ERROR,
                                err.message[0] ? err.message : "internal error");
  }
  if (call->task)
    mcp_task_finish(server, call, message); /* kept for tasks/result */
  else if (atomic_load(&call->cancelled_by_client))
    json_decref(message); /* a request the client cancelled gets no response (basic/utilities/cancellation) */
  else
    mcp_stream_send(call->stream, message);
  /* The stream ends with its last writer: the response is complete for the client before the work that
   * need not precede it (call_answered) */
  stream_unlink_call(call->stream, call);
  stream_writer_done(call->stream);
  call->stream = NULL;
  if (server->handlers.call_answered) server->handlers.call_answered(server->handlers.context, call);

  pthread_mutex_lock(&server->lock);
  for (mcp_call **link = &call->session->calls; *link; link = &(*link)->next_in_session)
    if (*link == call) {
      *link = call->next_in_session;
      break;
    }
  struct mcp_session *session = call->session;
  call->session = NULL;
  server->calls_active--;
  server->stats.calls_active = server->calls_active;
  bool idle = server->calls_active == 0;
  pthread_cond_broadcast(&server->idle);
  pthread_mutex_unlock(&server->lock);
  mcp_session_release(server, session);
  call_free(call);
  if (idle) malloc_trim(0); /* give freed memory back after a burst of calls */
  return NULL;
}

#define PEER_POLL_MS 250 /* how often a waiting stream looks whether its client is still there */

/* True when a call answering on the stream still runs. Under stream->lock. */
static bool calls_running_locked(const struct mcp_stream *stream) {
  for (mcp_call *call = stream->calls; call; call = call->next_in_stream)
    if (!atomic_load(&call->cancelled)) return true;
  return false;
}

/* The standalone stream ends with its session and with the server. */
static bool standalone_over(struct mcp_stream *stream) {
  if (!stream->standalone) return false;
  mcp_server *server = stream->server;
  pthread_mutex_lock(&server->lock);
  bool over = server->stopping || stream->session->closed;
  pthread_mutex_unlock(&server->lock);
  return over;
}

static ssize_t stream_reader(void *cls, uint64_t position, char *buffer, size_t max) {
  (void)position;
  struct stream_reader *reader = cls;
  struct mcp_stream *stream = reader->stream;
  pthread_mutex_lock(&stream->lock);
  /* a comment line well within the idle timeout keeps the connection alive (libmicrohttpd would
   * otherwise close it while the call waits for a jail slot or runs) */
  unsigned keepalive_s = stream->server->options.connection_timeout_s / 2;
  struct timespec keepalive = dome_deadline_after_ms((keepalive_s ? keepalive_s : 1) * 1000u);
  while (reader->generation == stream->generation && stream->out_length == stream->out_sent &&
         stream->writers > 0) {
    struct timespec step = dome_deadline_after_ms(PEER_POLL_MS);
    if (dome_deadline_before(&keepalive, &step)) step = keepalive;
    if (reader->close_early && dome_deadline_before(&reader->close_at, &step)) step = reader->close_at;
    if (pthread_cond_timedwait(&stream->cond, &stream->lock, &step) != ETIMEDOUT) continue;
    if (reader->generation != stream->generation || stream->writers == 0 ||
        stream->out_length != stream->out_sent)
      break;
    if (peer_closed(reader->socket_fd)) { /* stream_free decides what becomes of the calls */
      pthread_mutex_unlock(&stream->lock);
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (standalone_over(stream)) break;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (reader->close_early && !dome_deadline_before(&now, &reader->close_at)) {
      /* calls ending (answered, or cancelled and being torn down) keep the stream to its end */
      reader->close_early = false;
      if (!calls_running_locked(stream)) continue;
      /* the calls go on; stream_free gives the client sse_resume_grace_ms to resume */
      pthread_mutex_unlock(&stream->lock);
      mcp_server *server = stream->server;
      pthread_mutex_lock(&server->lock);
      server->stats.streams_polled++;
      pthread_mutex_unlock(&server->lock);
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (step.tv_sec == keepalive.tv_sec && step.tv_nsec == keepalive.tv_nsec) {
      pthread_mutex_unlock(&stream->lock);
      static const char comment[] = ": keepalive\n\n";
      size_t length = sizeof comment - 1 < max ? sizeof comment - 1 : max;
      memcpy(buffer, comment, length);
      return (ssize_t)length;
    }
  }
  if (reader->generation != stream->generation) { /* a resumption took the stream over */
    pthread_mutex_unlock(&stream->lock);
    return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  size_t available = stream->out_length - stream->out_sent;
  if (available == 0) {
    pthread_mutex_unlock(&stream->lock);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  size_t length = available < max ? available : max;
  memcpy(buffer, stream->out + stream->out_sent, length);
  stream->out_sent += length;
  pthread_mutex_unlock(&stream->lock);
  return (ssize_t)length;
}

static void streams_open_add(mcp_server *server, int delta) {
  pthread_mutex_lock(&server->lock);
  server->streams_open = (unsigned)((int)server->streams_open + delta);
  pthread_cond_broadcast(&server->idle);
  pthread_mutex_unlock(&server->lock);
}

int mcp_stream_writer_start(struct mcp_stream *stream, void *(*routine)(void *), void *argument,
                            size_t stack_bytes) {
  atomic_fetch_add(&stream->refs, 1);
  pthread_mutex_lock(&stream->lock);
  stream->writers++;
  pthread_mutex_unlock(&stream->lock);
  int rc = mcp_workers_start(&stream->server->workers, routine, argument, stack_bytes);
  if (rc != 0) stream_writer_done(stream);
  return rc;
}

/* The resumption grace of a stream whose client went away: its calls keep running for
 * sse_resume_grace_ms; when no resumption attached a response by then, they are cancelled. */
struct stream_grace {
  struct mcp_stream *stream;
  unsigned generation;
};

static void *grace_thread(void *argument) {
  struct stream_grace *grace = argument;
  struct mcp_stream *stream = grace->stream;
  struct timespec deadline = dome_deadline_after_ms(stream->server->options.sse_resume_grace_ms);
  pthread_mutex_lock(&stream->lock);
  while (stream->generation == grace->generation && stream->writers > 0)
    if (pthread_cond_timedwait(&stream->cond, &stream->lock, &deadline) == ETIMEDOUT) break;
  if (stream->generation == grace->generation && stream->stream_gone) stream_client_gone_locked(stream);
  pthread_mutex_unlock(&stream->lock);
  mcp_server *server = stream->server;
  free(grace);
  stream_unref(stream);
  streams_open_add(server, -1);
  return NULL;
}

/* The response reading the stream is gone: the connection closed (error, timeout, the client left).
 * A standalone stream ends; the calls of a resumable stream get sse_resume_grace_ms for the client to
 * resume, others are cancelled at once. Under stream->lock. */
static void stream_detached_locked(struct mcp_stream *stream) {
  mcp_server *server = stream->server;
  stream->stream_gone = true;
  if (stream->standalone) {
    pthread_mutex_lock(&stream->session->replay_lock);
    if (stream->session->standalone == stream) stream->session->standalone = NULL;
    pthread_mutex_unlock(&stream->session->replay_lock);
    return;
  }
  if (!calls_running_locked(stream)) return;
  struct stream_grace *grace = NULL;
  if (server->options.sse_resume_grace_ms > 0 && (grace = malloc(sizeof *grace)) != NULL) {
    grace->stream = stream;
    grace->generation = stream->generation;
    atomic_fetch_add(&stream->refs, 1);
    streams_open_add(server, 1); /* the server's stop waits for it */
    if (mcp_workers_start(&server->workers, grace_thread, grace, 64u << 10) == 0) return;
    atomic_fetch_sub(&stream->refs, 1); /* the caller still holds its own */
    streams_open_add(server, -1);
    free(grace);
  }
  stream_client_gone_locked(stream);
}

static void stream_free(void *cls) {
  struct stream_reader *reader = cls;
  struct mcp_stream *stream = reader->stream;
  mcp_server *server = stream->server;
  pthread_mutex_lock(&stream->lock);
  if (reader->generation == stream->generation) stream_detached_locked(stream);
  bool standalone_writer =
      stream->standalone && reader->generation == stream->generation && stream->writers > 0;
  pthread_mutex_unlock(&stream->lock);
  free(reader);
  if (standalone_writer) stream_writer_done(stream); /* the session's writer of its GET stream */
  stream_unref(stream);
  streams_open_add(server, -1);
}

/* A response reading `stream` from now on (generation: the stream's current one); close_after_ms > 0:
 * it ends that long from now while the stream's calls still run (polling). */
static struct MHD_Response *reader_response(struct mcp_stream *stream, int socket_fd,
                                            unsigned close_after_ms) {
  struct stream_reader *reader = malloc(sizeof *reader);
  if (reader == NULL) return NULL;
  reader->stream = stream;
  reader->generation = stream->generation;
  reader->socket_fd = socket_fd;
  reader->close_early = close_after_ms > 0;
  if (reader->close_early) reader->close_at = dome_deadline_after_ms(close_after_ms);
  struct MHD_Response *response =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, reader, stream_free);
  if (response == NULL) {
    free(reader);
    return NULL;
  }
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  streams_open_add(stream->server, 1); /* until stream_free */
  return response;
}

/* A stream of the session holding a reference to it, with no writer, reader or number yet. */
static struct mcp_stream *stream_alloc(mcp_server *server, struct mcp_session *session) {
  struct mcp_stream *stream = calloc(1, sizeof *stream);
  if (stream == NULL) return NULL;
  stream->server = server;
  stream->socket_fd = -1;
  pthread_mutex_init(&stream->lock, NULL);
  pthread_cond_init(&stream->cond, NULL);
  pthread_mutex_lock(&server->lock);
  session->refs++;
  pthread_mutex_unlock(&server->lock);
  stream->session = session;
  return stream;
}

/* A new stream of the session, numbered and recorded for resumption (number 0: a new number). */
static struct mcp_stream *stream_new(mcp_server *server, struct mcp_session *session, unsigned number,
                                     bool standalone) {
  struct mcp_stream *stream = stream_alloc(server, session);
  if (stream == NULL) return NULL;
  stream->standalone = standalone;
  pthread_mutex_lock(&session->replay_lock);
  if (number == 0) {
    number = ++session->next_stream;
    struct mcp_stream_record *record = &session->records[session->next_record];
    session->next_record = (session->next_record + 1) % MCP_STREAM_RECORDS;
    *record = (struct mcp_stream_record){.number = number, .standalone = standalone};
    record->stream = stream;
  } else {
    struct mcp_stream_record *record = record_find_locked(session, number);
    if (record) record->stream = stream;
  }
  stream->number = number;
  pthread_mutex_unlock(&session->replay_lock);
  return stream;
}

/* The priming event (basic/transports "Sending Messages to the Server" 6): an id, the retry field and
 * empty data, so that a client can resume from the start. Its id is not kept: nothing precedes it. */
static void prime_locked(struct mcp_stream *stream) {
  struct mcp_session *session = stream->session;
  pthread_mutex_lock(&session->replay_lock);
  uint64_t id = ++session->next_event;
  pthread_mutex_unlock(&session->replay_lock);
  char text[96];
  int length = snprintf(text, sizeof text, "id: %u-%llu\nretry: %u\ndata: \n\n", stream->number,
                        (unsigned long long)id, stream->server->options.sse_retry_ms);
  out_append_locked(stream, text, (size_t)length);
}

struct mcp_stream *mcp_stream_create(mcp_server *server, struct mcp_session *session, int socket_fd,
                                     struct MHD_Response **response) {
  struct mcp_stream *stream = stream_new(server, session, 0, false);
  if (stream == NULL) return NULL;
  stream->writers = 1;
  stream->refs = 2; /* the response and the writer */
  stream->socket_fd = socket_fd;
  prime_locked(stream);
  /* polling needs a client that resumes (2025-11-25) and a grace for it to do so */
  const struct mcp_server_options *options = &server->options;
  unsigned close_after_ms =
      strcmp(session->protocol_version, "2025-11-25") >= 0 && options->sse_resume_grace_ms
          ? options->sse_close_after_ms
          : 0;
  *response = reader_response(stream, socket_fd, close_after_ms);
  if (*response == NULL) {
    stream->refs = 1;
    stream_unref(stream);
    return NULL;
  }
  return stream;
}

static struct MHD_Response *json_error_response(unsigned http, unsigned *status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static struct MHD_Response *json_error_response(unsigned http, unsigned *status, const char *format, ...) {
  char text[400];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(text, sizeof text, format, arguments);
  va_end(arguments);
  *status = http;
  return mcp_http_json_response(mcp_jsonrpc_error(NULL, MCP_INVALID_REQUEST, text));
}

/* The kept events of stream `number` after event `after`, appended to the stream's output. Under
 * stream->lock and session->replay_lock. */
static void replay_locked(struct mcp_stream *stream, struct mcp_session *session, unsigned number,
                          uint64_t after) {
  for (struct mcp_replay_event *event = session->replay_head; event; event = event->next)
    if (event->stream == number && event->id > after) out_append_locked(stream, event->text, event->length);
}

/* "S-N" with S and N decimal, S > 0. */
static bool parse_event_id(const char *text, unsigned *stream, uint64_t *event) {
  char *end;
  if (text[0] < '0' || text[0] > '9') return false;
  unsigned long long s = strtoull(text, &end, 10);
  if (*end != '-' || s == 0 || s > UINT32_MAX) return false;
  const char *rest = end + 1;
  if (rest[0] < '0' || rest[0] > '9') return false;
  unsigned long long n = strtoull(rest, &end, 10);
  if (*end != '\0' || strlen(text) > 40) return false;
  *stream = (unsigned)s;
  *event = n;
  return true;
}

struct MHD_Response *mcp_stream_get(mcp_server *server, struct mcp_session *session,
                                    const char *last_event_id, int socket_fd, unsigned *status) {
  unsigned number = 0;
  uint64_t after = 0;
  if (last_event_id && !parse_event_id(last_event_id, &number, &after))
    return json_error_response(400, status, "Last-Event-ID `%.60s`: not an event id of this server (S-N)",
                               last_event_id);
  struct mcp_stream *stream = NULL;
  bool standalone = last_event_id == NULL;
  pthread_mutex_lock(&session->replay_lock);
  if (last_event_id) {
    struct mcp_stream_record *record = record_find_locked(session, number);
    if (record == NULL || after >= session->next_event + 1) {
      pthread_mutex_unlock(&session->replay_lock);
      return json_error_response(400, status,
                                 "Last-Event-ID `%s`: no such stream in this session (the %d most recent "
                                 "streams can be resumed)",
                                 last_event_id, MCP_STREAM_RECORDS);
    }
    if (record->evicted_through > after) {
      uint64_t through = record->evicted_through;
      pthread_mutex_unlock(&session->replay_lock);
      return json_error_response(
          400, status,
          "Last-Event-ID `%s`: events of stream %u up to %llu were dropped from the replay buffer "
          "(sse_replay_bytes = %zu per session); they cannot be replayed: run long calls as tasks "
          "(params.task) and fetch the result with tasks/result, or call again",
          last_event_id, number, (unsigned long long)through, server->options.sse_replay_bytes);
    }
    standalone = record->standalone;
    if (!standalone && record->stream && stream_ref_live(record->stream)) stream = record->stream;
  }
  if (standalone && session->standalone && last_event_id == NULL) {
    pthread_mutex_unlock(&session->replay_lock);
    return json_error_response(409, status, "an SSE stream is already open for this session (GET)");
  }
  pthread_mutex_unlock(&session->replay_lock);

  if (stream) { /* resume a stream whose calls may still run: the new response takes it over */
    pthread_mutex_lock(&stream->lock);
    stream->generation++;
    stream->stream_gone = false;
    stream->out_length = stream->out_sent = 0;
    pthread_mutex_lock(&session->replay_lock);
    replay_locked(stream, session, number, after);
    pthread_mutex_unlock(&session->replay_lock);
    pthread_cond_broadcast(&stream->cond);
    struct MHD_Response *response = reader_response(stream, socket_fd, 0); /* takes the ref */
    pthread_mutex_unlock(&stream->lock);
    if (response == NULL) {
      stream_unref(stream);
      return json_error_response(503, status, "cannot allocate the event stream");
    }
    *status = 200;
    return response;
  }
  /* a finished stream (its events from the buffer, then the end), or the standalone stream (the same
   * number when resumed, then open until the client or the session ends) */
  stream = stream_new(server, session, last_event_id ? number : 0, standalone);
  if (stream == NULL) return json_error_response(503, status, "cannot allocate the event stream");
  stream->writers = standalone ? 1 : 0;
  stream->refs = standalone ? 2 : 1;
  pthread_mutex_lock(&stream->lock);
  if (last_event_id) {
    pthread_mutex_lock(&session->replay_lock);
    replay_locked(stream, session, number, after);
    pthread_mutex_unlock(&session->replay_lock);
  } else {
    prime_locked(stream);
  }
  pthread_mutex_unlock(&stream->lock);
  if (standalone) {
    pthread_mutex_lock(&session->replay_lock);
    bool taken = session->standalone != NULL && last_event_id == NULL;
    if (!taken) session->standalone = stream;
    pthread_mutex_unlock(&session->replay_lock);
    if (taken) {
      stream_unref(stream);
      stream_unref(stream);
      return json_error_response(409, status, "an SSE stream is already open for this session (GET)");
    }
  }
  struct MHD_Response *response = reader_response(stream, socket_fd, 0);
  if (response == NULL) {
    if (standalone) stream_writer_done(stream);
    stream_unref(stream);
    return json_error_response(503, status, "cannot allocate the event stream");
  }
  *status = 200;
  return response;
}

struct mcp_stream *mcp_stream_sink(mcp_server *server, struct mcp_session *session) {
  struct mcp_stream *stream = stream_alloc(server, session);
  if (stream == NULL) return NULL;
  stream->stream_gone = true;
  stream->writers = 1;
  stream->refs = 1; /* the writer */
  return stream;
}

void mcp_call_set_exec_id(mcp_call *call, const char *exec_id) {
  snprintf(call->exec_id, sizeof call->exec_id, "%s", exec_id ? exec_id : "");
  if (call->task) mcp_task_named(call->server, call);
}

bool mcp_call_is_task(const mcp_call *call) {
  return call->task != NULL;
}

int mcp_call_start(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                   const json_t *request_id, const char *name, json_t *arguments,
                   const json_t *progress_token, uint64_t received_us, struct mcp_stream *stream,
                   struct mcp_task *task, dome_error *err) {
  mcp_call *call = calloc(1, sizeof *call);
  if (call == NULL) return dome_error_set(err, ENOMEM, "allocate call");
  call->server = server;
  call->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (call->cancel_fd < 0) {
    free(call);
    return dome_error_set_errno(err, errno, "eventfd");
  }
  call->request_id = json_deep_copy(request_id);
  call->request_id_text = json_dumps(request_id, JSON_COMPACT | JSON_ENCODE_ANY);
  call->progress_token = progress_token ? json_deep_copy(progress_token) : NULL;
  call->tool_name = strdup(name);
  call->arguments = json_incref(arguments);
  call->identity = *identity;
  call->received_us = received_us;
  snprintf(call->protocol_version, sizeof call->protocol_version, "%s", session->protocol_version);
  snprintf(call->session_id, sizeof call->session_id, "%s", session->id);

  pthread_mutex_lock(&server->lock);
  if (server->stopping || session->closed) {
    pthread_mutex_unlock(&server->lock);
    call_free(call);
    return dome_error_set(err, ESHUTDOWN, "server is shutting down");
  }
  session->refs++;
  call->session = session;
  if (task) { /* a task outlives its session: only the server's stop and tasks/cancel end it */
    call->task = task;
    task->refs++;
    task->call = call;
  } else {
    call->next_in_session = session->calls;
    session->calls = call;
  }
  server->calls_active++;
  server->stats.calls_active = server->calls_active;
  pthread_mutex_unlock(&server->lock);
  call->stream = stream;
  pthread_mutex_lock(&stream->lock);
  call->next_in_stream = stream->calls;
  stream->calls = call;
  pthread_mutex_unlock(&stream->lock);

  int rc = mcp_stream_writer_start(stream, call_thread, call, MCP_WORKER_STACK_BYTES);
  if (rc != 0) {
    /* undo: the caller answers with an error */
    stream_unlink_call(stream, call);
    pthread_mutex_lock(&server->lock);
    for (mcp_call **link = &session->calls; *link; link = &(*link)->next_in_session)
      if (*link == call) {
        *link = call->next_in_session;
        break;
      }
    if (task) {
      task->call = NULL;
      task->refs--; /* the table still holds it */
    }
    server->calls_active--;
    server->stats.calls_active = server->calls_active;
    pthread_cond_broadcast(&server->idle);
    pthread_mutex_unlock(&server->lock);
    mcp_session_release(server, session);
    call_free(call);
    return dome_error_set(err, -rc, "cannot start call thread");
  }
  return 0;
}
