/* The MCP client side of Streamable HTTP (MCP 2025-11-25 basic/transports, basic/lifecycle,
 * server/tools, basic/utilities progress and cancellation) over libcurl, bounded in time and memory. */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "supervisor/gateway/gateway.h"

#define POOL_SIZE 16
#define ERROR_BODY_MAX 300 /* bytes of an HTTP error body quoted in a message */
#define CLIENT_PROTOCOL "2025-11-25"

struct gateway_backend {
  char name[128];
  char *url;
  char *auth_header; /* the header line without CR/LF, or NULL */
  char *ca_file;     /* or NULL */
  unsigned connect_timeout_ms, timeout_ms;
  size_t max_message_bytes, max_stream_bytes;
  char client_name[64], client_version[32];
  pthread_mutex_t lock; /* session fields and the handle pool */
  char session_id[256];
  char protocol_version[32];
  char server_name[128];
  unsigned session_generation; /* bumped by every (re)initialize */
  struct transfer *idle[POOL_SIZE];
  size_t idle_count;
  atomic_uint_fast64_t next_id;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* One POST and its answer. */
struct exchange {
  gateway_backend *backend;
  json_int_t id; /* request id, -1 for a notification */
  char progress_token[32];
  const struct gateway_call_options *call;
  CURL *curl;
  long status;
  enum { BODY_UNKNOWN, BODY_JSON, BODY_SSE, BODY_ERROR } kind;
  char *body; /* JSON or error body */
  size_t body_length, body_capacity;
  struct gateway_sse *sse;
  size_t stream_bytes;
  json_t *response;
  int error; /* set by callbacks: -EMSGSIZE, -EPROTO */
  char error_text[300];
  char session_id[256]; /* Mcp-Session-Id of the answer */
  bool cancelled;
  uint64_t response_at_ms; /* when the response arrived on an event stream (0: not yet) */
};

#define LINGER_MS 100 /* after the response, how long a stream may stay open before we close it */

static uint64_t monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* An easy handle driven by its own multi handle: the multi keeps the connection for the next request
 * and lets the transfer wait on the caller's cancel fd as well as on the socket. */
struct transfer {
  CURL *easy;
  CURLM *multi;
};

static void transfer_free(struct transfer *transfer) {
  if (transfer == NULL) return;
  if (transfer->multi) curl_multi_cleanup(transfer->multi);
  if (transfer->easy) curl_easy_cleanup(transfer->easy);
  free(transfer);
}

static struct transfer *handle_get(gateway_backend *backend) {
  struct transfer *transfer = NULL;
  pthread_mutex_lock(&backend->lock);
  if (backend->idle_count > 0) transfer = backend->idle[--backend->idle_count];
  pthread_mutex_unlock(&backend->lock);
  if (transfer) {
    curl_easy_reset(transfer->easy); /* the multi keeps the live connection for reuse */
    return transfer;
  }
  transfer = calloc(1, sizeof *transfer);
  if (transfer == NULL) return NULL;
  transfer->easy = curl_easy_init();
  transfer->multi = curl_multi_init();
  if (transfer->easy == NULL || transfer->multi == NULL) {
    transfer_free(transfer);
    return NULL;
  }
  return transfer;
}

static void handle_put(gateway_backend *backend, struct transfer *transfer) {
  if (transfer == NULL) return;
  pthread_mutex_lock(&backend->lock);
  if (backend->idle_count < POOL_SIZE) {
    backend->idle[backend->idle_count++] = transfer;
    transfer = NULL;
  }
  pthread_mutex_unlock(&backend->lock);
  transfer_free(transfer);
}

static bool lingered(const struct exchange *exchange);

/* Run the transfer until it ends, the deadline passes (CURLOPT_TIMEOUT_MS), the stream lingers after
 * its response, or cancel_fd becomes readable (CURLE_ABORTED_BY_CALLBACK with *cancelled set). */
static CURLcode perform(struct transfer *transfer, const struct exchange *exchange, int cancel_fd,
                        bool *cancelled) {
  if (curl_multi_add_handle(transfer->multi, transfer->easy) != CURLM_OK) return CURLE_OUT_OF_MEMORY;
  CURLcode result = CURLE_OK;
  int running = 1;
  for (;;) {
    if (curl_multi_perform(transfer->multi, &running) != CURLM_OK) {
      result = CURLE_RECV_ERROR;
      break;
    }
    if (running == 0) {
      int left;
      CURLMsg *message;
      while ((message = curl_multi_info_read(transfer->multi, &left)))
        if (message->msg == CURLMSG_DONE) result = message->data.result;
      break;
    }
    if (lingered(exchange)) break; /* the response is in: the connection is dropped, not reused */
    struct curl_waitfd extra = {.fd = cancel_fd, .events = CURL_WAIT_POLLIN};
    unsigned extra_count = cancel_fd >= 0 ? 1 : 0;
    if (curl_multi_poll(transfer->multi, extra_count ? &extra : NULL, extra_count, LINGER_MS / 2, NULL) !=
        CURLM_OK) {
      result = CURLE_RECV_ERROR;
      break;
    }
    if (extra_count && (extra.revents & CURL_WAIT_POLLIN)) {
      *cancelled = true;
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
  }
  curl_multi_remove_handle(transfer->multi, transfer->easy);
  return result;
}

static size_t on_header(char *data, size_t size, size_t count, void *context) {
  struct exchange *exchange = context;
  size_t length = size * count;
  static const char name[] = "mcp-session-id:";
  if (length > sizeof name - 1 && strncasecmp(data, name, sizeof name - 1) == 0) {
    const char *value = data + sizeof name - 1;
    size_t value_length = length - (sizeof name - 1);
    while (value_length && (*value == ' ' || *value == '\t')) value++, value_length--;
    while (value_length && (value[value_length - 1] == '\r' || value[value_length - 1] == '\n' ||
                            value[value_length - 1] == ' '))
      value_length--;
    /* Session ids are visible ASCII (0x21-0x7E) per the transport spec; anything else is refused. */
    bool valid = value_length > 0 && value_length < sizeof exchange->session_id;
    for (size_t i = 0; valid && i < value_length; i++) valid = value[i] >= 0x21 && value[i] <= 0x7e;
    if (valid) {
      memcpy(exchange->session_id, value, value_length);
      exchange->session_id[value_length] = '\0';
    }
  }
  return length;
}

static int fail(struct exchange *exchange, int code, const char *text) {
  if (exchange->error == 0) {
    exchange->error = code;
    snprintf(exchange->error_text, sizeof exchange->error_text, "%s", text);
  }
  return code;
}

/* A message of the stream: the response we wait for, a progress notification, or something to skip. */
static int on_message(struct exchange *exchange, const char *text, size_t length) {
  json_error_t json_error;
  json_t *message = json_loadb(text, length, JSON_REJECT_DUPLICATES, &json_error);
  if (!json_is_object(message)) {
    char why[260];
    snprintf(why, sizeof why, "answered invalid JSON (%.100s at line %d column %d)", json_error.text,
             json_error.line, json_error.column);
    json_decref(message);
    return fail(exchange, -EPROTO, message ? "answered a JSON value that is not a JSON-RPC message" : why);
  }
  const char *method = json_string_value(json_object_get(message, "method"));
  json_t *id = json_object_get(message, "id");
  if (method == NULL && json_is_integer(id) && json_integer_value(id) == exchange->id) {
    exchange->response = message;
    return 1; /* done: stop reading */
  }
  if (method && strcmp(method, "notifications/progress") == 0 && exchange->call &&
      exchange->call->on_progress) {
    json_t *params = json_object_get(message, "params");
    json_t *token = json_object_get(params, "progressToken");
    json_t *progress = json_object_get(params, "progress");
    if (json_is_string(token) && strcmp(json_string_value(token), exchange->progress_token) == 0 &&
        json_is_number(progress)) {
      json_t *total = json_object_get(params, "total");
      exchange->call->on_progress(exchange->call->progress_context, json_number_value(progress),
                                  json_is_number(total) ? json_number_value(total) : NAN,
                                  json_string_value(json_object_get(params, "message")));
    }
  }
  /* Other notifications (logging, list changes) and server requests are not forwarded. */
  json_decref(message);
  return 0;
}

static int on_sse_event(void *context, const char *type, const char *data, size_t length) {
  struct exchange *exchange = context;
  if (strcmp(type, "message") != 0 || length == 0) return 0;
  return on_message(exchange, data, length);
}

static int start_body(struct exchange *exchange) {
  curl_easy_getinfo(exchange->curl, CURLINFO_RESPONSE_CODE, &exchange->status);
  const char *type = NULL;
  curl_easy_getinfo(exchange->curl, CURLINFO_CONTENT_TYPE, &type);
  if (exchange->status != 200 || exchange->id < 0) {
    exchange->kind = BODY_ERROR; /* kept (bounded) for the message; a notification's body is ignored */
  } else if (type && strncasecmp(type, "application/json", 16) == 0) {
    exchange->kind = BODY_JSON;
  } else if (type && strncasecmp(type, "text/event-stream", 17) == 0) {
    exchange->kind = BODY_SSE;
    exchange->sse = gateway_sse_new(exchange->backend->max_message_bytes, on_sse_event, exchange);
    if (exchange->sse == NULL) return fail(exchange, -ENOMEM, "out of memory");
  } else {
    char text[200];
    snprintf(text, sizeof text,
             "answered with content type `%.80s` (expected application/json or "
             "text/event-stream)",
             type ? type : "(none)");
    return fail(exchange, -EPROTO, text);
  }
  return 0;
}

static int append_body(struct exchange *exchange, const char *data, size_t length, size_t limit) {
  if (exchange->body_length + length > limit) {
    if (exchange->kind == BODY_ERROR)
      length = limit - exchange->body_length;
    else
      return -EMSGSIZE;
  }
  if (exchange->body_length + length + 1 > exchange->body_capacity) {
    size_t capacity = exchange->body_capacity ? exchange->body_capacity : 4096;
    while (capacity < exchange->body_length + length + 1) capacity *= 2;
    char *body = realloc(exchange->body, capacity);
    if (body == NULL) return -ENOMEM;
    exchange->body = body;
    exchange->body_capacity = capacity;
  }
  memcpy(exchange->body + exchange->body_length, data, length);
  exchange->body_length += length;
  exchange->body[exchange->body_length] = '\0';
  return 0;
}

static size_t on_write(char *data, size_t size, size_t count, void *context) {
  struct exchange *exchange = context;
  size_t length = size * count;
  if (exchange->kind == BODY_UNKNOWN && start_body(exchange) < 0) return 0;
  char text[160];
  switch (exchange->kind) {
    case BODY_ERROR:
      if (exchange->body_length < ERROR_BODY_MAX) append_body(exchange, data, length, ERROR_BODY_MAX);
      return length;
    case BODY_JSON:
      if (append_body(exchange, data, length, exchange->backend->max_message_bytes) < 0) {
        snprintf(text, sizeof text, "answer larger than %zu bytes", exchange->backend->max_message_bytes);
        fail(exchange, -EMSGSIZE, text);
        return 0;
      }
      return length;
    case BODY_SSE: {
      exchange->stream_bytes += length;
      if (exchange->stream_bytes > exchange->backend->max_stream_bytes) {
        snprintf(text, sizeof text, "event stream longer than %zu bytes",
                 exchange->backend->max_stream_bytes);
        fail(exchange, -EMSGSIZE, text);
        return 0;
      }
      if (exchange->response) return length; /* after the response: drained, not parsed */
      int rc = gateway_sse_feed(exchange->sse, data, length);
      if (rc == -EMSGSIZE) {
        snprintf(text, sizeof text, "event larger than %zu bytes", exchange->backend->max_message_bytes);
        fail(exchange, -EMSGSIZE, text);
      }
      if (rc == 1) {
        /* The response: let the backend end the stream itself so that the connection can be reused;
         * on_transfer_info cuts it after LINGER_MS. */
        exchange->response_at_ms = monotonic_ms();
        return length;
      }
      return rc == 0 ? length : 0; /* an error ends the transfer */
    }
    default:
      return 0;
  }
}

static bool lingered(const struct exchange *exchange) {
  return exchange->response && monotonic_ms() - exchange->response_at_ms > LINGER_MS;
}

static int on_transfer_info(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                            curl_off_t ulnow) {
  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  struct exchange *exchange = context;
  if (lingered(exchange)) return 1;
  if (exchange->call == NULL || exchange->call->cancel_fd < 0) return 0;
  struct pollfd pfd = {.fd = exchange->call->cancel_fd, .events = POLLIN};
  if (poll(&pfd, 1, 0) > 0) {
    exchange->cancelled = true;
    return 1;
  }
  return 0;
}

static int transport_error(struct exchange *exchange, CURLcode code, unsigned timeout_ms, dome_error *err) {
  const char *name = exchange->backend->name;
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      return dome_error_set(err, ECONNREFUSED, "backend `%s`: cannot connect to %s", name,
                            exchange->backend->url);
    case CURLE_COULDNT_RESOLVE_HOST:
      return dome_error_set(err, EHOSTUNREACH, "backend `%s`: cannot resolve the host of %s", name,
                            exchange->backend->url);
    case CURLE_OPERATION_TIMEDOUT:
      return dome_error_set(err, ETIMEDOUT, "backend `%s`: no complete answer within %u ms", name,
                            timeout_ms);
    case CURLE_ABORTED_BY_CALLBACK:
      return dome_error_set(err, ECANCELED, "backend `%s`: call cancelled", name);
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      return dome_error_set(err, ECONNRESET, "backend `%s`: connection closed before the response (%s)", name,
                            curl_easy_strerror(code));
    default:
      return dome_error_set(err, EPROTO, "backend `%s`: %s", name, curl_easy_strerror(code));
  }
}

/* POST one message (request when exchange->id >= 0). On success a request leaves the response in
 * exchange->response. */
static int post(gateway_backend *backend, struct exchange *exchange, json_t *message, bool with_session,
                unsigned timeout_ms, dome_error *err) {
  char *text = json_dumps(message, JSON_COMPACT);
  if (text == NULL) return dome_error_set(err, ENOMEM, "backend `%s`: encode request", backend->name);
  struct curl_slist *headers = NULL;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json, text/event-stream");
  headers = curl_slist_append(headers, "Expect:");
  char line[300];
  if (with_session) {
    pthread_mutex_lock(&backend->lock);
    if (backend->session_id[0]) {
      snprintf(line, sizeof line, "Mcp-Session-Id: %s", backend->session_id);
      headers = curl_slist_append(headers, line);
    }
    snprintf(line, sizeof line, "MCP-Protocol-Version: %s", backend->protocol_version);
    pthread_mutex_unlock(&backend->lock);
    headers = curl_slist_append(headers, line);
  }
  if (backend->auth_header) headers = curl_slist_append(headers, backend->auth_header);
  struct transfer *transfer = handle_get(backend);
  if (transfer == NULL || headers == NULL) {
    free(text);
    curl_slist_free_all(headers);
    transfer_free(transfer);
    return dome_error_set(err, ENOMEM, "backend `%s`: out of memory", backend->name);
  }
  CURL *curl = transfer->easy;
  exchange->curl = curl;
  exchange->backend = backend;
  curl_easy_setopt(curl, CURLOPT_URL, backend->url);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)backend->connect_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, exchange);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, exchange);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_transfer_info);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, exchange);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect would carry the credential elsewhere */
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_PROXY, ""); /* never through an environment proxy */
  if (backend->ca_file) curl_easy_setopt(curl, CURLOPT_CAINFO, backend->ca_file);
  int cancel_fd = exchange->call ? exchange->call->cancel_fd : -1;
  CURLcode code = perform(transfer, exchange, cancel_fd, &exchange->cancelled);
  free(text);
  curl_slist_free_all(headers);
  if (exchange->status == 0) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &exchange->status);
  handle_put(backend, transfer); /* curl closes a connection whose transfer was cut short */
  exchange->curl = NULL;
  int rc = 0;
  if (exchange->response) return 0;
  if (exchange->error) {
    rc = dome_error_set(err, -exchange->error, "backend `%s`: %s", backend->name, exchange->error_text);
  } else if (code != CURLE_OK) {
    rc = transport_error(exchange, code, timeout_ms, err);
  } else if (exchange->status == 202 && exchange->id < 0) {
    rc = 0;
  } else if (exchange->status != 200) {
    const char *body = exchange->body ? exchange->body : "";
    int errno_value = exchange->status == 401 || exchange->status == 403 ? EACCES
                      : exchange->status == 404                          ? ENOENT
                                                                         : EPROTO;
    rc = dome_error_set(err, errno_value, "backend `%s`: HTTP %ld%s%.*s", backend->name, exchange->status,
                        body[0] ? ": " : "", (int)strcspn(body, "\r\n"), body);
  } else if (exchange->id < 0) {
    rc = 0; /* a notification: whatever 200 body came with it is ignored */
  } else if (exchange->kind == BODY_JSON) {
    int found = on_message(exchange, exchange->body ? exchange->body : "", exchange->body_length);
    if (found == 1)
      rc = 0;
    else if (exchange->error)
      rc = dome_error_set(err, -exchange->error, "backend `%s`: %s", backend->name, exchange->error_text);
    else
      rc = dome_error_set(err, EPROTO, "backend `%s`: the answer is not the response to request %lld",
                          backend->name, (long long)exchange->id);
  } else if (exchange->id >= 0) {
    rc = dome_error_set(err, ECONNRESET, "backend `%s`: the event stream ended before the response",
                        backend->name);
  }
  return rc;
}

static void exchange_release(struct exchange *exchange) {
  free(exchange->body);
  gateway_sse_free(exchange->sse);
  json_decref(exchange->response);
  memset(exchange, 0, sizeof *exchange);
}

/* The result of a response, or -EREMOTEIO for a JSON-RPC error. */
static int response_result(gateway_backend *backend, json_t *response, json_t **result, int *rpc_error,
                           dome_error *err) {
  json_t *error = json_object_get(response, "error");
  if (error) {
    json_int_t code = json_integer_value(json_object_get(error, "code"));
    const char *message = json_string_value(json_object_get(error, "message"));
    if (rpc_error) *rpc_error = (int)code;
    return dome_error_set(err, EREMOTEIO, "backend `%s`: error %lld: %.300s", backend->name, (long long)code,
                          message ? message : "(no message)");
  }
  json_t *value = json_object_get(response, "result");
  if (!json_is_object(value))
    return dome_error_set(err, EPROTO, "backend `%s`: response without a result object", backend->name);
  *result = json_incref(value);
  return 0;
}

static int initialize(gateway_backend *backend, dome_error *err) {
  pthread_mutex_lock(&backend->lock);
  backend->session_id[0] = '\0';
  pthread_mutex_unlock(&backend->lock);
  json_int_t id = (json_int_t)atomic_fetch_add(&backend->next_id, 1);
  json_t *request = json_pack("{s:s,s:I,s:s,s:{s:s,s:{},s:{s:s,s:s}}}", "jsonrpc", "2.0", "id", id, "method",
                              "initialize", "params", "protocolVersion", CLIENT_PROTOCOL, "capabilities",
                              "clientInfo", "name", backend->client_name, "version", backend->client_version);
  struct exchange exchange = {.id = id};
  int rc = post(backend, &exchange, request, false, backend->timeout_ms, err);
  json_decref(request);
  json_t *result = NULL;
  if (rc == 0) rc = response_result(backend, exchange.response, &result, NULL, err);
  if (rc == 0) {
    const char *version = json_string_value(json_object_get(result, "protocolVersion"));
    if (version == NULL || (strcmp(version, "2025-11-25") != 0 && strcmp(version, "2025-06-18") != 0 &&
                            strcmp(version, "2025-03-26") != 0)) {
      rc = dome_error_set(err, EPROTO, "backend `%s`: unsupported protocol revision `%.40s`", backend->name,
                          version ? version : "(none)");
    } else {
      pthread_mutex_lock(&backend->lock);
      snprintf(backend->protocol_version, sizeof backend->protocol_version, "%s", version);
      snprintf(backend->session_id, sizeof backend->session_id, "%s", exchange.session_id);
      const char *server = json_string_value(json_object_get(json_object_get(result, "serverInfo"), "name"));
      snprintf(backend->server_name, sizeof backend->server_name, "%s", server ? server : "");
      backend->session_generation++;
      pthread_mutex_unlock(&backend->lock);
    }
  }
  json_decref(result);
  exchange_release(&exchange);
  if (rc < 0) return rc;
  json_t *notification = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
  struct exchange note = {.id = -1};
  rc = post(backend, &note, notification, true, backend->timeout_ms, err);
  json_decref(notification);
  exchange_release(&note);
  return rc;
}

/* A request on the session; a 404 (session expired on the backend) starts a new session once. */
static int request(gateway_backend *backend, const char *method, json_t *params,
                   const struct gateway_call_options *call, json_t **result, int *rpc_error,
                   dome_error *err) {
  unsigned timeout_ms = backend->timeout_ms;
  if (call && call->timeout_ms && call->timeout_ms < timeout_ms) timeout_ms = call->timeout_ms;
  for (int attempt = 0;; attempt++) {
    unsigned generation;
    pthread_mutex_lock(&backend->lock);
    generation = backend->session_generation;
    pthread_mutex_unlock(&backend->lock);
    json_int_t id = (json_int_t)atomic_fetch_add(&backend->next_id, 1);
    struct exchange exchange = {.id = id, .call = call};
    json_t *message =
        json_pack("{s:s,s:I,s:s,s:O}", "jsonrpc", "2.0", "id", id, "method", method, "params", params);
    if (call && call->on_progress) {
      snprintf(exchange.progress_token, sizeof exchange.progress_token, "dome-%lld", (long long)id);
      json_t *copy = json_deep_copy(params);
      json_t *meta = json_object_get(copy, "_meta");
      if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(copy, "_meta", meta);
      }
      json_object_set_new(meta, "progressToken", json_string(exchange.progress_token));
      json_object_set_new(message, "params", copy);
    }
    int rc = post(backend, &exchange, message, true, timeout_ms, err);
    json_decref(message);
    if (rc == -ECANCELED) {
      json_t *cancel =
          json_pack("{s:s,s:s,s:{s:I,s:s}}", "jsonrpc", "2.0", "method", "notifications/cancelled", "params",
                    "requestId", id, "reason", "cancelled by the caller");
      struct exchange note = {.id = -1};
      dome_error ignored;
      post(backend, &note, cancel, true, backend->connect_timeout_ms, &ignored);
      json_decref(cancel);
      exchange_release(&note);
    }
    bool expired = rc == -ENOENT && exchange.status == 404;
    if (rc == 0) rc = response_result(backend, exchange.response, result, rpc_error, err);
    exchange_release(&exchange);
    if (!expired || attempt > 0) return rc;
    /* Re-initialize unless another thread already did since this attempt began. */
    pthread_mutex_lock(&backend->lock);
    bool stale = backend->session_generation == generation;
    pthread_mutex_unlock(&backend->lock);
    if (stale) {
      rc = initialize(backend, err);
      if (rc < 0) return rc;
    }
  }
}

int gateway_backend_connect(const struct gateway_backend_options *options, gateway_backend **out,
                            dome_error *err) {
  pthread_once(&curl_once, curl_init_once);
  const char *name = options->name ? options->name : "?";
  if (options->url == NULL ||
      (strncmp(options->url, "http://", 7) != 0 && strncmp(options->url, "https://", 8) != 0))
    return dome_error_set(err, EINVAL, "backend `%s`: --url: expected an http:// or https:// URL", name);
  if (options->auth_header && gateway_auth_header_check(options->auth_header, err) < 0)
    return dome_error_wrap(err, "backend `%s`", name);
  gateway_backend *backend = calloc(1, sizeof *backend);
  if (backend == NULL) return dome_error_set(err, ENOMEM, "backend `%s`", name);
  snprintf(backend->name, sizeof backend->name, "%s", name);
  backend->url = strdup(options->url);
  if (options->ca_file) backend->ca_file = strdup(options->ca_file);
  if (options->auth_header)
    backend->auth_header = strndup(options->auth_header, strcspn(options->auth_header, "\r\n"));
  backend->connect_timeout_ms = options->connect_timeout_ms ? options->connect_timeout_ms : 2000;
  backend->timeout_ms = options->timeout_ms ? options->timeout_ms : 30000;
  backend->max_message_bytes = options->max_message_bytes ? options->max_message_bytes : (4u << 20);
  backend->max_stream_bytes = options->max_stream_bytes ? options->max_stream_bytes : (64u << 20);
  snprintf(backend->client_name, sizeof backend->client_name, "%s",
           options->client_name ? options->client_name : "dome-gateway");
  snprintf(backend->client_version, sizeof backend->client_version, "%s",
           options->client_version ? options->client_version : "0");
  snprintf(backend->protocol_version, sizeof backend->protocol_version, "%s", CLIENT_PROTOCOL);
  atomic_init(&backend->next_id, 1);
  pthread_mutex_init(&backend->lock, NULL);
  if (backend->url == NULL || (options->auth_header && backend->auth_header == NULL)) {
    gateway_backend_close(backend);
    return dome_error_set(err, ENOMEM, "backend `%s`", name);
  }
  int rc = initialize(backend, err);
  if (rc < 0) {
    gateway_backend_close(backend);
    return rc;
  }
  *out = backend;
  return 0;
}

void gateway_backend_close(gateway_backend *backend) {
  if (backend == NULL) return;
  if (backend->session_id[0]) {
    CURL *curl = curl_easy_init();
    if (curl) {
      struct curl_slist *headers = NULL;
      char line[300];
      snprintf(line, sizeof line, "Mcp-Session-Id: %s", backend->session_id);
      headers = curl_slist_append(headers, line);
      if (backend->auth_header) headers = curl_slist_append(headers, backend->auth_header);
      curl_easy_setopt(curl, CURLOPT_URL, backend->url);
      curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
      curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
      curl_easy_setopt(curl, CURLOPT_PROXY, "");
      if (backend->ca_file) curl_easy_setopt(curl, CURLOPT_CAINFO, backend->ca_file);
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)backend->connect_timeout_ms);
      curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)backend->connect_timeout_ms);
      curl_easy_perform(curl);
      curl_slist_free_all(headers);
      curl_easy_cleanup(curl);
    }
  }
  for (size_t i = 0; i < backend->idle_count; i++) transfer_free(backend->idle[i]);
  pthread_mutex_destroy(&backend->lock);
  if (backend->auth_header) explicit_bzero(backend->auth_header, strlen(backend->auth_header));
  free(backend->auth_header);
  free(backend->url);
  free(backend->ca_file);
  free(backend);
}

const char *gateway_backend_session_id(gateway_backend *backend) {
  return backend->session_id;
}

const char *gateway_backend_protocol_version(const gateway_backend *backend) {
  return backend->protocol_version;
}

const char *gateway_backend_server_name(const gateway_backend *backend) {
  return backend->server_name;
}

int gateway_backend_list_tools(gateway_backend *backend, json_t **out, dome_error *err) {
  json_t *tools = json_array();
  char *cursor = NULL;
  int rc = 0;
  for (int page = 0;; page++) {
    if (page == 64) {
      rc = dome_error_set(err, EPROTO, "backend `%s`: tools/list has more than 64 pages", backend->name);
      break;
    }
    json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
    json_t *result = NULL;
    rc = request(backend, "tools/list", params, NULL, &result, NULL, err);
    json_decref(params);
    if (rc < 0) break;
    json_t *list = json_object_get(result, "tools");
    if (!json_is_array(list)) {
      json_decref(result);
      rc = dome_error_set(err, EPROTO, "backend `%s`: tools/list result without a `tools` array",
                          backend->name);
      break;
    }
    size_t i;
    json_t *tool;
    json_array_foreach(list, i,
                       tool) if (json_is_object(tool) && json_is_string(json_object_get(tool, "name")))
        json_array_append(tools, tool);
    if (json_array_size(tools) > GATEWAY_MAX_TOOLS) {
      json_decref(result);
      rc =
          dome_error_set(err, EMSGSIZE, "backend `%s`: more than %d tools", backend->name, GATEWAY_MAX_TOOLS);
      break;
    }
    const char *next = json_string_value(json_object_get(result, "nextCursor"));
    free(cursor);
    cursor = next && next[0] ? strdup(next) : NULL;
    json_decref(result);
    if (cursor == NULL) break;
  }
  free(cursor);
  if (rc < 0) {
    json_decref(tools);
    return rc;
  }
  *out = tools;
  return 0;
}

int gateway_backend_call_tool(gateway_backend *backend, const char *tool, json_t *arguments,
                              const struct gateway_call_options *options, json_t **result, int *rpc_error,
                              dome_error *err) {
  if (rpc_error) *rpc_error = 0;
  if (arguments && !json_is_object(arguments))
    return dome_error_set(err, EINVAL, "backend `%s`: arguments must be an object", backend->name);
  json_t *params = json_pack("{s:s,s:o}", "name", tool ? tool : "", "arguments",
                             arguments ? json_incref(arguments) : json_object());
  if (params == NULL) return dome_error_set(err, ENOMEM, "backend `%s`: encode tools/call", backend->name);
  json_t *value = NULL;
  int rc = request(backend, "tools/call", params, options, &value, rpc_error, err);
  json_decref(params);
  if (rc < 0) return rc;
  json_t *content = json_object_get(value, "content");
  if (content && !json_is_array(content)) {
    json_decref(value);
    return dome_error_set(err, EPROTO, "backend `%s`: CallToolResult.content is not an array", backend->name);
  }
  *result = value;
  return 0;
}
