/* tools/call in flight: a thread runs the handler while the HTTP response streams Server-Sent
 * Events (MCP basic/transports: the server may send notifications before the response on the SSE
 * stream of a POST). Progress notifications (basic/utilities/progress) go out as they come;
 * cancellation (basic/utilities/cancellation) makes the call's eventfd readable and the response is
 * then not sent. A client that closes its connection cancels the calls answering on it the same way:
 * the stream's reader watches the socket for the peer's close while it waits for output. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "supervisor/mcp/mcp_internal.h"

#define SSE_BUFFER_LIMIT (16u << 20) /* progress is dropped beyond this much unsent output */

static void stream_unref(struct mcp_stream *stream) {
  pthread_mutex_lock(&stream->lock);
  int refs = --stream->refs;
  pthread_mutex_unlock(&stream->lock);
  if (refs > 0) return;
  free(stream->out);
  pthread_mutex_destroy(&stream->lock);
  pthread_cond_destroy(&stream->cond);
  free(stream);
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

/* Append one SSE event carrying `message` (stolen). Under stream->lock. */
static void append_event_locked(struct mcp_stream *stream, json_t *message, bool essential) {
  char *text = json_dumps(message, JSON_COMPACT);
  json_decref(message);
  if (text == NULL || stream->stream_gone) {
    free(text);
    return;
  }
  static const char prefix[] = "event: message\ndata: ", suffix[] = "\n\n";
  size_t length = strlen(text);
  if (!essential && stream->out_length - stream->out_sent > SSE_BUFFER_LIMIT) {
    free(text);
    return;
  }
  if (stream->out_sent > 0) { /* compact what was already sent */
    memmove(stream->out, stream->out + stream->out_sent, stream->out_length - stream->out_sent);
    stream->out_length -= stream->out_sent;
    stream->out_sent = 0;
  }
  size_t needed = stream->out_length + sizeof prefix - 1 + length + sizeof suffix; /* with the NUL */
  if (needed > stream->out_capacity) {
    size_t capacity = stream->out_capacity ? stream->out_capacity : 4096;
    while (capacity < needed) capacity *= 2;
    char *grown = realloc(stream->out, capacity);
    if (grown == NULL) {
      free(text);
      return;
    }
    stream->out = grown;
    stream->out_capacity = capacity;
  }
  memcpy(stream->out + stream->out_length, prefix, sizeof prefix - 1);
  stream->out_length += sizeof prefix - 1;
  memcpy(stream->out + stream->out_length, text, length);
  stream->out_length += length;
  memcpy(stream->out + stream->out_length, suffix, sizeof suffix - 1);
  stream->out_length += sizeof suffix - 1;
  free(text);
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
  return call->progress_token != NULL;
}

void mcp_call_progress(mcp_call *call, double progress, const char *message) {
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
    message = mcp_jsonrpc_error(call->request_id, MCP_INTERNAL_ERROR,
                                "request cancelled: server shutting down or session ended");
  } else if (result != NULL) {
    message = mcp_jsonrpc_result(call->request_id, result);
  } else {
    message = mcp_jsonrpc_error(call->request_id, rpc_error ? rpc_error : MCP_INTERNAL_ERROR,
                                err.message[0] ? err.message : "internal error");
  }
  if (atomic_load(&call->cancelled_by_client))
    json_decref(message); /* a request the client cancelled gets no response (basic/utilities/cancellation) */
  else
    mcp_stream_send(call->stream, message);
  stream_unlink_call(call->stream, call);
  stream_writer_done(call->stream);
  call->stream = NULL;

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

static ssize_t stream_reader(void *cls, uint64_t position, char *buffer, size_t max) {
  (void)position;
  struct mcp_stream *stream = cls;
  pthread_mutex_lock(&stream->lock);
  /* a comment line well within the idle timeout keeps the connection alive (libmicrohttpd would
   * otherwise close it while the call waits for a jail slot or runs) */
  unsigned keepalive_s = stream->server->options.connection_timeout_s / 2;
  struct timespec keepalive;
  clock_gettime(CLOCK_REALTIME, &keepalive);
  keepalive.tv_sec += keepalive_s ? keepalive_s : 1;
  while (stream->out_length == stream->out_sent && stream->writers > 0) {
    struct timespec step;
    clock_gettime(CLOCK_REALTIME, &step);
    step.tv_nsec += PEER_POLL_MS * 1000000L;
    if (step.tv_nsec >= 1000000000L) {
      step.tv_sec++;
      step.tv_nsec -= 1000000000L;
    }
    if (step.tv_sec > keepalive.tv_sec ||
        (step.tv_sec == keepalive.tv_sec && step.tv_nsec > keepalive.tv_nsec))
      step = keepalive;
    if (pthread_cond_timedwait(&stream->cond, &stream->lock, &step) != ETIMEDOUT) continue;
    if (stream->writers == 0 || stream->out_length != stream->out_sent) break;
    if (peer_closed(stream->socket_fd)) {
      stream_client_gone_locked(stream);
      pthread_mutex_unlock(&stream->lock);
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (step.tv_sec == keepalive.tv_sec && step.tv_nsec == keepalive.tv_nsec) {
      pthread_mutex_unlock(&stream->lock);
      static const char comment[] = ": keepalive\n\n";
      size_t length = sizeof comment - 1 < max ? sizeof comment - 1 : max;
      memcpy(buffer, comment, length);
      return (ssize_t)length;
    }
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

static void stream_free(void *cls) {
  struct mcp_stream *stream = cls;
  mcp_server *server = stream->server;
  pthread_mutex_lock(&stream->lock);
  stream->stream_gone = true;
  /* the response is gone before its calls answered: the connection closed (error, timeout) */
  stream_client_gone_locked(stream);
  pthread_mutex_unlock(&stream->lock);
  stream_unref(stream);
  pthread_mutex_lock(&server->lock);
  server->streams_open--;
  pthread_cond_broadcast(&server->idle);
  pthread_mutex_unlock(&server->lock);
}

struct mcp_stream *mcp_stream_create(mcp_server *server, int socket_fd, struct MHD_Response **response) {
  struct mcp_stream *stream = calloc(1, sizeof *stream);
  if (stream == NULL) return NULL;
  stream->server = server;
  stream->socket_fd = socket_fd;
  pthread_mutex_init(&stream->lock, NULL);
  pthread_cond_init(&stream->cond, NULL);
  stream->writers = 1;
  stream->refs = 2; /* the response and the writer */
  *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, stream, stream_free);
  if (*response == NULL) {
    pthread_mutex_destroy(&stream->lock);
    pthread_cond_destroy(&stream->cond);
    free(stream);
    return NULL;
  }
  MHD_add_response_header(*response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(*response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  pthread_mutex_lock(&server->lock);
  server->streams_open++; /* until stream_free */
  pthread_mutex_unlock(&server->lock);
  return stream;
}

int mcp_call_start(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                   const json_t *request_id, const char *name, json_t *arguments,
                   const json_t *progress_token, uint64_t received_us, struct mcp_stream *stream,
                   dome_error *err) {
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
  call->next_in_session = session->calls;
  session->calls = call;
  server->calls_active++;
  server->stats.calls_active = server->calls_active;
  pthread_mutex_unlock(&server->lock);
  call->stream = stream;
  pthread_mutex_lock(&stream->lock);
  stream->writers++;
  stream->refs++;
  call->next_in_stream = stream->calls;
  stream->calls = call;
  pthread_mutex_unlock(&stream->lock);

  pthread_t thread;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attributes, 1u << 20);
  int rc = pthread_create(&thread, &attributes, call_thread, call);
  pthread_attr_destroy(&attributes);
  if (rc != 0) {
    /* undo: the caller answers with an error */
    stream_unlink_call(stream, call);
    stream_writer_done(stream);
    pthread_mutex_lock(&server->lock);
    for (mcp_call **link = &session->calls; *link; link = &(*link)->next_in_session)
      if (*link == call) {
        *link = call->next_in_session;
        break;
      }
    server->calls_active--;
    server->stats.calls_active = server->calls_active;
    pthread_cond_broadcast(&server->idle);
    pthread_mutex_unlock(&server->lock);
    mcp_session_release(server, session);
    call_free(call);
    return dome_error_set(err, rc, "cannot start call thread");
  }
  return 0;
}
