/* Streamable HTTP transport (MCP 2025-11-25 basic/transports) over libmicrohttpd: routing of the
 * gateway endpoints, the checks every request passes (Host and Origin against DNS rebinding,
 * Authorization, Content-Type, Accept, body size), the GET paths (/metrics, /healthz) on the main or a
 * separate listener, and the server's life cycle. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "supervisor/common/deadline.h"
#include "supervisor/mcp/mcp_internal.h"

#define WORKERS_STOP_MS 10000 /* how long a stop waits for the last jobs of its workers */

struct request {
  char *body;
  size_t length, capacity, discarded;
  bool too_large;
  struct timespec start;
};

static bool header_lists(const char *value, const char *media_type) {
  if (value == NULL) return false;
  return strcasestr(value, media_type) != NULL || strstr(value, "*/*") != NULL;
}

static bool loopback_origin(const char *origin) {
  const char *rest = NULL;
  if (strncmp(origin, "http://", 7) == 0) rest = origin + 7;
  if (strncmp(origin, "https://", 8) == 0) rest = origin + 8;
  if (rest == NULL) return false;
  static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
  for (size_t i = 0; i < 3; i++) {
    size_t length = strlen(hosts[i]);
    if (strncmp(rest, hosts[i], length) != 0) continue;
    const char *port = rest + length;
    if (*port == '\0') return true;
    if (*port != ':' || port[1] == '\0') return false;
    for (port++; *port; port++)
      if (*port < '0' || *port > '9') return false;
    return true;
  }
  return false;
}

static bool origin_allowed(const mcp_server *server, const char *origin) {
  if (origin == NULL) return true; /* non-browser clients send none */
  if (server->allowed_origins == NULL) return loopback_origin(origin);
  for (char **allowed = server->allowed_origins; *allowed; allowed++)
    if (strcmp(*allowed, origin) == 0) return true;
  return false;
}

/* An IP literal ("127.0.0.1", "[::1]"): a DNS-rebinding page cannot make the browser send one, since
 * the attacker's page is reached through a name. */
static bool ip_literal(const char *host, size_t length) {
  char text[64];
  if (length == 0 || length >= sizeof text) return false;
  memcpy(text, host, length);
  text[length] = '\0';
  unsigned char address[16];
  if (text[0] == '[' && text[length - 1] == ']') {
    text[length - 1] = '\0';
    return inet_pton(AF_INET6, text + 1, address) == 1;
  }
  return inet_pton(AF_INET, text, address) == 1;
}

/* The host part of a Host header value or of an origin's authority, without the port. */
static size_t host_length(const char *host) {
  if (host[0] == '[') {
    const char *close = strchr(host, ']');
    return close ? (size_t)(close - host + 1) : strlen(host);
  }
  const char *colon = strchr(host, ':');
  return colon ? (size_t)(colon - host) : strlen(host);
}

static bool host_allowed(const mcp_server *server, const char *host) {
  if (host == NULL) return true; /* HTTP/1.0 clients without Host; browsers always send it */
  size_t length = host_length(host);
  if (ip_literal(host, length)) return true;
  if (length == 9 && strncasecmp(host, "localhost", 9) == 0) return true;
  for (char **allowed = server->allowed_hosts; allowed && *allowed; allowed++)
    if (strlen(*allowed) == length && strncasecmp(*allowed, host, length) == 0) return true;
  return false;
}

/* "/gateways/<name>/mcp" -> name; the configured path -> "Default". Returns false otherwise. */
static bool endpoint_gateway(const mcp_server *server, const char *url, char *gateway, size_t size) {
  if (strcmp(url, server->path) == 0) {
    snprintf(gateway, size, "%s", MCP_GATEWAY_DEFAULT);
    return true;
  }
  static const char prefix[] = "/gateways/";
  if (strncmp(url, prefix, sizeof prefix - 1) != 0) return false;
  const char *name = url + sizeof prefix - 1;
  const char *slash = strchr(name, '/');
  if (slash == NULL || strcmp(slash, "/mcp") != 0) return false;
  size_t length = (size_t)(slash - name);
  if (length == 0 || length >= size || length > 64) return false;
  for (size_t i = 0; i < length; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  }
  memcpy(gateway, name, length);
  gateway[length] = '\0';
  return true;
}

static enum MHD_Result queue(mcp_server *server, struct MHD_Connection *connection, unsigned status,
                             struct MHD_Response *response) {
  if (response == NULL) return MHD_NO;
  enum MHD_Result result = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  pthread_mutex_lock(&server->lock);
  server->stats.http_requests++;
  if (status >= 400) server->stats.http_errors++;
  if (status == 401) server->stats.unauthorized++;
  pthread_mutex_unlock(&server->lock);
  return result;
}

static enum MHD_Result queue_error(mcp_server *server, struct MHD_Connection *connection, unsigned status,
                                   int code, const char *message) {
  struct MHD_Response *response = mcp_http_json_response(mcp_jsonrpc_error(NULL, code, message));
  if (status == 401)
    MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"dome\"");
  if (status == 405) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "POST, GET, DELETE");
  return queue(server, connection, status, response);
}

/* 401 for a request that carried a token (RFC 6750 section 3.1: error="invalid_token" for a token
 * that is expired, revoked, malformed or unknown; error_description limited to its allowed
 * characters) or none (the challenge alone). */
static enum MHD_Result queue_unauthorized(mcp_server *server, struct MHD_Connection *connection,
                                          bool had_token, const char *message) {
  struct MHD_Response *response =
      mcp_http_json_response(mcp_jsonrpc_error(NULL, MCP_INVALID_REQUEST, message));
  char challenge[320] = "Bearer realm=\"dome\"";
  if (had_token) {
    char description[200];
    size_t n = 0;
    for (const char *c = message; *c && n + 1 < sizeof description; c++)
      description[n++] = (*c >= 0x20 && *c <= 0x7e && *c != '"' && *c != '\\') ? *c : '\'';
    description[n] = '\0';
    snprintf(challenge, sizeof challenge,
             "Bearer realm=\"dome\", error=\"invalid_token\", error_description=\"%s\"", description);
  }
  MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
  return queue(server, connection, 401, response);
}

static void peer_address(struct MHD_Connection *connection, char *text, size_t size) {
  text[0] = '\0';
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == NULL || info->client_addr == NULL) return;
  const struct sockaddr *address = info->client_addr;
  char host[INET6_ADDRSTRLEN] = "";
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)address)->sin_addr, host, sizeof host);
    snprintf(text, size, "%s", host);
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)address)->sin6_addr, host, sizeof host);
    snprintf(text, size, "[%s]", host);
  }
}

static int connection_socket(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info ? info->connect_fd : -1;
}

static const char *bearer_token(struct MHD_Connection *connection) {
  const char *value = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (value == NULL || strncasecmp(value, "Bearer ", 7) != 0) return NULL;
  value += 7;
  while (*value == ' ') value++;
  return *value ? value : NULL;
}

static enum MHD_Result handle_endpoint(mcp_server *server, struct MHD_Connection *connection,
                                       const char *method, struct request *request, const char *gateway) {
  bool is_post = strcmp(method, "POST") == 0, is_delete = strcmp(method, "DELETE") == 0,
       is_get = strcmp(method, "GET") == 0;
  if (!is_post && !is_delete && !is_get)
    return queue_error(server, connection, 405, MCP_INVALID_REQUEST,
                       "method not allowed: use POST, GET or DELETE");

  mcp_identity identity = {0};
  snprintf(identity.gateway, sizeof identity.gateway, "%s", gateway);
  peer_address(connection, identity.source, sizeof identity.source);
  const char *actas = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "X-Dome-Act-As");
  if (actas) {
    if (strlen(actas) >= sizeof identity.actas || strchr(actas, '"') || strchr(actas, '\\'))
      return queue_error(server, connection, 400, MCP_INVALID_REQUEST, "X-Dome-Act-As: invalid identity");
    snprintf(identity.actas, sizeof identity.actas, "%s", actas);
  }
  dome_error err = {0};
  const char *token = bearer_token(connection);
  int rc = server->handlers.authenticate(server->handlers.context, token, &identity, &err);
  if (rc == -EPERM) return queue_error(server, connection, 403, MCP_INVALID_REQUEST, err.message);
  if (rc < 0)
    return queue_unauthorized(server, connection, token != NULL,
                              err.message[0] ? err.message : "unauthorized");

  const char *session_header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Mcp-Session-Id");
  unsigned status = 500;
  if (is_delete) {
    struct MHD_Response *response = mcp_protocol_delete(server, &identity, session_header, &status);
    return queue(server, connection, status, response);
  }
  const char *accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
  if (is_get) {
    if (!header_lists(accept, "text/event-stream"))
      return queue_error(server, connection, 406, MCP_INVALID_REQUEST, "Accept must list text/event-stream");
    const char *last_event_id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Last-Event-ID");
    struct MHD_Response *response = mcp_protocol_get(server, &identity, session_header, last_event_id,
                                                     connection_socket(connection), &status);
    return queue(server, connection, status, response);
  }

  const char *content_type =
      MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (content_type == NULL || strncasecmp(content_type, "application/json", 16) != 0)
    return queue_error(server, connection, 415, MCP_INVALID_REQUEST, "Content-Type must be application/json");
  if (!header_lists(accept, "application/json") || !header_lists(accept, "text/event-stream"))
    return queue_error(server, connection, 406, MCP_INVALID_REQUEST,
                       "Accept must list application/json and text/event-stream");
  if (request->too_large) {
    char text[120];
    snprintf(text, sizeof text, "request body larger than %zu bytes", server->options.max_body_bytes);
    return queue_error(server, connection, 413, MCP_INVALID_REQUEST, text);
  }
  struct mcp_post post = {
      .identity = identity,
      .session_header = session_header,
      .version_header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "MCP-Protocol-Version"),
      .body = request->body ? request->body : "",
      .length = request->length,
      .received_us = (uint64_t)request->start.tv_sec * 1000000u + (uint64_t)request->start.tv_nsec / 1000u,
      .socket_fd = connection_socket(connection),
  };
  struct MHD_Response *response = mcp_protocol_post(server, &post, &status);
  return queue(server, connection, status, response);
}

/* GET on the paths of the http_get handler; every path but /healthz needs options.get_token when set. */
static enum MHD_Result serve_get(mcp_server *server, struct MHD_Connection *connection, const char *url,
                                 const char *method) {
  if (strcmp(method, "GET") != 0 || server->handlers.http_get == NULL)
    return queue_error(server, connection, 404, MCP_INVALID_REQUEST, "not found");
  if (server->get_token && strcmp(url, "/healthz") != 0) {
    const char *token = bearer_token(connection);
    size_t length = strlen(server->get_token);
    if (token == NULL || strlen(token) != length || sodium_memcmp(token, server->get_token, length) != 0)
      return queue_unauthorized(server, connection, token != NULL,
                                token ? "invalid token" : "missing bearer token");
  }
  char *body = NULL;
  size_t length = 0;
  const char *content_type = "text/plain";
  if (server->handlers.http_get(server->handlers.context, url, &body, &length, &content_type) != 0)
    return queue_error(server, connection, 404, MCP_INVALID_REQUEST, "not found");
  struct MHD_Response *response = MHD_create_response_from_buffer(length, body, MHD_RESPMEM_MUST_FREE);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  return queue(server, connection, 200, response);
}

static bool console_path(const char *url) {
  return strcmp(url, "/console") == 0 || strncmp(url, "/console/", 9) == 0;
}

static void add_console_headers(const mcp_server *server, struct MHD_Response *response) {
  for (size_t i = 0; server->console_headers[i] && server->console_headers[i + 1]; i += 2)
    MHD_add_response_header(response, server->console_headers[i], server->console_headers[i + 1]);
}

/* An error on a console path: {"error": message}, with the console's headers. */
static enum MHD_Result console_error(mcp_server *server, struct MHD_Connection *connection, unsigned status,
                                     const char *message) {
  struct MHD_Response *response = mcp_http_json_response(json_pack("{s:s}", "error", message));
  if (response == NULL) return MHD_NO;
  add_console_headers(server, response);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  return queue(server, connection, status, response);
}

const char *mcp_console_header(const mcp_console_request *request, const char *name) {
  return MHD_lookup_connection_value(request->connection, MHD_HEADER_KIND, name);
}

const char *mcp_console_query(const mcp_console_request *request, const char *name) {
  return MHD_lookup_connection_value(request->connection, MHD_GET_ARGUMENT_KIND, name);
}

struct console_stream {
  ssize_t (*read)(void *state, char *buffer, size_t size);
  void (*release)(void *state);
  void *state;
};

static ssize_t console_stream_read(void *cls, uint64_t position, char *buffer, size_t size) {
  (void)position;
  struct console_stream *stream = cls;
  ssize_t n = stream->read(stream->state, buffer, size);
  return n > 0 ? n : (ssize_t)MHD_CONTENT_READER_END_OF_STREAM;
}

static void console_stream_free(void *cls) {
  struct console_stream *stream = cls;
  if (stream->release) stream->release(stream->state);
  free(stream);
}

static enum MHD_Result handle_console(mcp_server *server, struct MHD_Connection *connection, const char *url,
                                      const char *method, struct request *request) {
  if (server->handlers.console == NULL) return console_error(server, connection, 404, "not found");
  mcp_console_request exchange = {
      .method = method,
      .path = url,
      .body = request->too_large || request->body == NULL ? "" : request->body,
      .length = request->too_large ? 0 : request->length,
      .body_too_large = request->too_large,
      .tls = server->tls_cert != NULL,
      .connection = connection,
  };
  peer_address(connection, exchange.source, sizeof exchange.source);
  mcp_console_reply reply = {0};
  if (server->handlers.console(server->handlers.context, &exchange, &reply) < 0) {
    free(reply.body);
    free(reply.set_cookie);
    if (reply.release) reply.release(reply.state);
    return console_error(server, connection, 500, "internal error");
  }
  struct MHD_Response *response = NULL;
  if (reply.read) {
    struct console_stream *stream = malloc(sizeof *stream);
    if (stream == NULL) {
      if (reply.release) reply.release(reply.state);
    } else {
      *stream = (struct console_stream){reply.read, reply.release, reply.state};
      response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, console_stream_read, stream,
                                                   console_stream_free);
      if (response == NULL) console_stream_free(stream);
    }
    free(reply.body);
  } else if (reply.static_body) {
    response =
        MHD_create_response_from_buffer(reply.length, (void *)reply.static_body, MHD_RESPMEM_PERSISTENT);
    free(reply.body);
  } else {
    response = MHD_create_response_from_buffer(reply.length, reply.body ? reply.body : (void *)"",
                                               reply.body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (response == NULL) free(reply.body);
  }
  if (response == NULL) {
    free(reply.set_cookie);
    return MHD_NO;
  }
  add_console_headers(server, response);
  if (reply.content_type) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL,
                          reply.cache_control ? reply.cache_control : "no-store");
  if (reply.set_cookie) MHD_add_response_header(response, MHD_HTTP_HEADER_SET_COOKIE, reply.set_cookie);
  free(reply.set_cookie);
  return queue(server, connection, reply.status ? reply.status : 500, response);
}

/* Both listeners that take bodies: `listen` (console_only false: every path) and console_listen
 * (console_only true: /console and beneath it). */
static enum MHD_Result access_request(mcp_server *server, bool console_only,
                                      struct MHD_Connection *connection, const char *url, const char *method,
                                      const char *upload_data, size_t *upload_data_size, void **con_cls) {
  struct request *request = *con_cls;
  if (request == NULL) {
    request = calloc(1, sizeof *request);
    if (request == NULL) return MHD_NO;
    clock_gettime(CLOCK_MONOTONIC, &request->start);
    *con_cls = request;
    const char *length =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = length ? strtoull(length, NULL, 10) : 0;
    if (declared > 4ull * server->options.max_body_bytes) {
      /* far too large: refused before reading the body; the connection is closed after the answer */
      char text[120];
      snprintf(text, sizeof text, "request body larger than %zu bytes", server->options.max_body_bytes);
      if (console_path(url)) return console_error(server, connection, 413, text);
      return queue_error(server, connection, 413, MCP_INVALID_REQUEST, text);
    }
    /* a little too large: read and drop the body, then answer 413 on a connection that stays usable */
    if (declared > server->options.max_body_bytes) request->too_large = true;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t size = *upload_data_size;
    *upload_data_size = 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - request->start.tv_sec > 4 * (time_t)server->options.connection_timeout_s)
      return MHD_NO; /* a body trickled in too slowly (slowloris) */
    if (request->too_large || request->length + size > server->options.max_body_bytes) {
      request->too_large = true;
      request->discarded += size;
      if (request->discarded > 4 * server->options.max_body_bytes) return MHD_NO; /* stop reading */
      return MHD_YES;
    }
    if (request->length + size + 1 > request->capacity) {
      size_t capacity = request->capacity ? request->capacity : 8192;
      while (capacity < request->length + size + 1) capacity *= 2;
      char *grown = realloc(request->body, capacity);
      if (grown == NULL) return MHD_NO;
      request->body = grown;
      request->capacity = capacity;
    }
    memcpy(request->body + request->length, upload_data, size);
    request->length += size;
    request->body[request->length] = '\0';
    return MHD_YES;
  }
  bool console = console_path(url);
  if (!host_allowed(server, MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST)))
    return console ? console_error(server, connection, 403, "host not allowed")
                   : queue_error(server, connection, 403, MCP_INVALID_REQUEST, "host not allowed");
  if (!origin_allowed(server, MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Origin")))
    return console ? console_error(server, connection, 403, "origin not allowed")
                   : queue_error(server, connection, 403, MCP_INVALID_REQUEST, "origin not allowed");
  if (console) return handle_console(server, connection, url, method, request);
  if (console_only) return queue_error(server, connection, 404, MCP_INVALID_REQUEST, "not found");
  char gateway[128];
  if (endpoint_gateway(server, url, gateway, sizeof gateway))
    return handle_endpoint(server, connection, method, request, gateway);
  /* with a separate GET listener, the main one keeps only /healthz */
  if (server->get_daemon == NULL || strcmp(url, "/healthz") == 0)
    return serve_get(server, connection, url, method);
  return queue_error(server, connection, 404, MCP_INVALID_REQUEST, "not found");
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls) {
  (void)version;
  return access_request(cls, false, connection, url, method, upload_data, upload_data_size, con_cls);
}

/* The console listener (options.console_listen): /console and beneath it only. */
static enum MHD_Result console_access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                              const char *method, const char *version,
                                              const char *upload_data, size_t *upload_data_size,
                                              void **con_cls) {
  (void)version;
  return access_request(cls, true, connection, url, method, upload_data, upload_data_size, con_cls);
}

/* The GET listener (options.get_listen): Host and Origin checked, then the GET paths only. */
static enum MHD_Result get_access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                          const char *method, const char *version, const char *upload_data,
                                          size_t *upload_data_size, void **con_cls) {
  (void)version;
  (void)upload_data;
  mcp_server *server = cls;
  if (*con_cls == NULL) {
    *con_cls = server; /* headers seen; a body, if any, is dropped */
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (!host_allowed(server, MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST)))
    return queue_error(server, connection, 403, MCP_INVALID_REQUEST, "host not allowed");
  if (!origin_allowed(server, MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Origin")))
    return queue_error(server, connection, 403, MCP_INVALID_REQUEST, "origin not allowed");
  return serve_get(server, connection, url, method);
}

static void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                              enum MHD_RequestTerminationCode code) {
  (void)cls;
  (void)connection;
  (void)code;
  struct request *request = *con_cls;
  if (request == NULL) return;
  free(request->body);
  free(request);
  *con_cls = NULL;
}

static void http_log(void *cls, const char *format, va_list arguments) {
  (void)cls;
  char text[512];
  vsnprintf(text, sizeof text, format, arguments);
  size_t length = strlen(text);
  while (length && (text[length - 1] == '\n' || text[length - 1] == '\r')) text[--length] = '\0';
  fprintf(stderr, "level=warn component=http msg=\"%s\"\n", text);
}

static int parse_listen(const char *listen, struct sockaddr_storage *address, socklen_t *length,
                        dome_error *err) {
  char host[256];
  const char *port;
  if (listen[0] == '[') {
    const char *close = strchr(listen, ']');
    if (close == NULL || close[1] != ':' || (size_t)(close - listen - 1) >= sizeof host)
      return dome_error_set(err, EINVAL, "listen address `%s`: expected [ADDR6]:PORT", listen);
    memcpy(host, listen + 1, (size_t)(close - listen - 1));
    host[close - listen - 1] = '\0';
    port = close + 2;
  } else {
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || (size_t)(colon - listen) >= sizeof host)
      return dome_error_set(err, EINVAL, "listen address `%s`: expected ADDR:PORT", listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    port = colon + 1;
  }
  char *end;
  unsigned long number = strtoul(port, &end, 10);
  if (*port == '\0' || *end != '\0' || number > 65535)
    return dome_error_set(err, EINVAL, "listen address `%s`: invalid port", listen);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                  *result;
  int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &result);
  if (rc != 0) return dome_error_set(err, EINVAL, "listen address `%s`: %s", listen, gai_strerror(rc));
  memcpy(address, result->ai_addr, result->ai_addrlen);
  *length = result->ai_addrlen;
  freeaddrinfo(result);
  return 0;
}

static char **copy_list(const char *const *list) {
  if (list == NULL) return NULL;
  size_t count = 0;
  while (list[count]) count++;
  char **copy = calloc(count + 1, sizeof(char *));
  for (size_t i = 0; copy && i < count; i++) copy[i] = strdup(list[i]);
  return copy;
}

static void free_list(char **list) {
  if (list)
    for (char **item = list; *item; item++) free(*item);
  free(list);
}

/* The hosts of allowed origins ("https://app.example:8443" -> "app.example") join the allowed hosts. */
static void add_origin_hosts(mcp_server *server) {
  size_t count = 0, origins = 0;
  for (char **host = server->allowed_hosts; host && *host; host++) count++;
  for (char **origin = server->allowed_origins; origin && *origin; origin++) origins++;
  if (origins == 0) return;
  char **grown = realloc(server->allowed_hosts, (count + origins + 1) * sizeof(char *));
  if (grown == NULL) return;
  server->allowed_hosts = grown;
  for (char **origin = server->allowed_origins; *origin; origin++) {
    const char *authority = strstr(*origin, "://");
    authority = authority ? authority + 3 : *origin;
    grown[count] = strndup(authority, host_length(authority));
    if (grown[count]) count++;
  }
  grown[count] = NULL;
}

static int start_daemon(mcp_server *server, const char *listen, MHD_AccessHandlerCallback handler,
                        bool notify_completed, struct MHD_Daemon **daemon, uint16_t *port, dome_error *err) {
  struct sockaddr_storage address;
  socklen_t address_length;
  int rc = parse_listen(listen, &address, &address_length, err);
  if (rc < 0) return rc;
  unsigned flags =
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC | MHD_USE_ERROR_LOG;
  if (address.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  struct MHD_OptionItem items[16];
  size_t n = 0;
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)http_log, NULL};
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &address};
  if (notify_completed)
    items[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_completed, NULL};
  items[n++] =
      (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, server->options.connection_timeout_s, NULL};
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, server->options.max_connections, NULL};
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE, 512 * 1024, NULL};
  if (server->tls_cert) {
    flags |= MHD_USE_TLS;
    items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, server->tls_cert};
    items[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, server->tls_key};
  }
  items[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  errno = 0;
  *daemon = MHD_start_daemon(flags, 0, NULL, NULL, handler, server, MHD_OPTION_ARRAY, items, MHD_OPTION_END);
  if (*daemon == NULL) return dome_error_set_errno(err, errno ? errno : EADDRINUSE, "listen on `%s`", listen);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(*daemon, MHD_DAEMON_INFO_BIND_PORT);
  *port = info ? info->port : 0;
  return 0;
}

int mcp_server_start(const struct mcp_server_options *options, const struct mcp_handlers *handlers,
                     mcp_server **out, dome_error *err) {
  struct sockaddr_storage address;
  socklen_t address_length;
  int rc = parse_listen(options->listen, &address, &address_length, err);
  if (rc < 0) return rc;
  if (options->get_listen && (rc = parse_listen(options->get_listen, &address, &address_length, err)) < 0)
    return rc;
  if (options->console_listen &&
      (rc = parse_listen(options->console_listen, &address, &address_length, err)) < 0)
    return rc;
  if ((options->tls_cert_pem == NULL) != (options->tls_key_pem == NULL))
    return dome_error_set(err, EINVAL, "TLS needs both a certificate and a key");
  if (options->tls_cert_pem && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return dome_error_set(err, ENOTSUP, "this libmicrohttpd has no TLS support");
  if (options->session_node && !mcp_session_node_valid(options->session_node))
    return dome_error_set(err, EINVAL, "session node \"%.80s\": 1..%d of A-Z a-z 0-9 _ -",
                          options->session_node, MCP_SESSION_NODE_MAX);
  mcp_server *server = calloc(1, sizeof *server);
  if (server == NULL) return dome_error_set(err, ENOMEM, "allocate server");
  if (options->session_node)
    snprintf(server->session_node, sizeof server->session_node, "%s", options->session_node);
  server->options = *options;
  server->handlers = *handlers;
  server->path = strdup(options->path ? options->path : "/mcp");
  if (!server->options.max_body_bytes) server->options.max_body_bytes = 4u << 20;
  if (!server->options.connection_timeout_s) server->options.connection_timeout_s = 30;
  if (!server->options.max_connections) server->options.max_connections = 1024;
  if (!server->options.max_sessions) server->options.max_sessions = 4096;
  if (!server->options.max_sessions_per_agent) server->options.max_sessions_per_agent = 16;
  if (!server->options.session_rate_per_agent) server->options.session_rate_per_agent = 20;
  if (!server->options.max_batch_messages) server->options.max_batch_messages = 32;
  if (!server->options.max_batch_bytes) server->options.max_batch_bytes = 1u << 20;
  if (server->options.max_batch_bytes > server->options.max_body_bytes)
    server->options.max_batch_bytes = server->options.max_body_bytes;
  if (!server->options.session_idle_timeout_s) server->options.session_idle_timeout_s = 3600;
  if (!server->options.sse_replay_bytes) server->options.sse_replay_bytes = 1u << 20;
  if (!server->options.sse_retry_ms) server->options.sse_retry_ms = MCP_SSE_RETRY_DEFAULT_MS;
  if (!server->options.sse_resume_grace_ms) server->options.sse_resume_grace_ms = 1500;
  if (!server->options.server_name) server->options.server_name = "dome";
  if (!server->options.server_version) server->options.server_version = "0";
  server->options.path = server->path;
  server->options.listen = server->options.get_listen = NULL;
  server->options.tls_cert_pem = server->options.tls_key_pem = NULL;
  server->allowed_origins = copy_list(options->allowed_origins);
  server->allowed_hosts = copy_list(options->allowed_hosts);
  add_origin_hosts(server);
  server->options.allowed_origins = server->options.allowed_hosts = NULL;
  for (size_t i = 0; options->console_headers && options->console_headers[i] && i + 1 < 32; i++)
    server->console_headers[i] = (char *)options->console_headers[i];
  server->options.console_headers = NULL;
  server->options.console_listen = NULL;
  server->options.session_node = NULL;
  server->get_token = options->get_token && options->get_token[0] ? strdup(options->get_token) : NULL;
  server->options.get_token = NULL;
  server->sessions = calloc(server->options.max_sessions, sizeof server->sessions[0]);
  pthread_mutex_init(&server->lock, NULL);
  pthread_cond_init(&server->idle, NULL);
  pthread_cond_init(&server->task_changed, NULL);
  if (!server->options.task_ttl_max_ms) server->options.task_ttl_max_ms = 3600u * 1000u;
  if (!server->options.max_tasks_per_agent) server->options.max_tasks_per_agent = 16;
  if (!server->options.task_poll_ms) server->options.task_poll_ms = 1000;
  rc = mcp_workers_init(&server->workers, MCP_WORKER_STACK_BYTES, MCP_WORKERS_IDLE_MAX, MCP_WORKERS_IDLE_MS);
  if (rc < 0) {
    mcp_server_stop(server);
    return dome_error_set_errno(err, -rc, "start the call workers");
  }
  if (options->tls_cert_pem) {
    server->tls_cert = strdup(options->tls_cert_pem);
    server->tls_key = strdup(options->tls_key_pem);
  }
  rc = start_daemon(server, options->listen, access_handler, true, &server->daemon, &server->port, err);
  if (rc == 0 && options->get_listen)
    rc = start_daemon(server, options->get_listen, get_access_handler, false, &server->get_daemon,
                      &server->get_port, err);
  if (rc == 0 && options->console_listen)
    rc = start_daemon(server, options->console_listen, console_access_handler, true, &server->console_daemon,
                      &server->console_port, err);
  if (rc < 0) {
    mcp_server_stop(server);
    return rc;
  }
  *out = server;
  return 0;
}

uint16_t mcp_server_get_port(const mcp_server *server) {
  return server->get_port;
}

uint16_t mcp_server_console_port(const mcp_server *server) {
  return server->console_port;
}

uint16_t mcp_server_port(const mcp_server *server) {
  return server->port;
}

void mcp_server_quiesce(mcp_server *server) {
  if (server && server->daemon) {
    MHD_socket fd = MHD_quiesce_daemon(server->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
  }
  if (server && server->console_daemon) {
    MHD_socket fd = MHD_quiesce_daemon(server->console_daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
  }
}

void mcp_server_sweep_sessions(mcp_server *server) {
  mcp_session_sweep(server);
}

void mcp_server_cancel_all(mcp_server *server) {
  pthread_mutex_lock(&server->lock);
  server->stopping = true;
  for (size_t i = 0; i < server->session_count; i++)
    for (mcp_call *call = server->sessions[i]->calls; call; call = call->next_in_session)
      mcp_call_cancel(call, false);
  mcp_task_cancel_all_locked(server);
  pthread_mutex_unlock(&server->lock);
}

size_t mcp_server_cancel_agent(mcp_server *server, const char *agent) {
  if (server == NULL || agent == NULL || agent[0] == '\0') return 0;
  size_t cancelled = 0;
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++)
    for (mcp_call *call = server->sessions[i]->calls; call; call = call->next_in_session)
      if (call->task == NULL && strcmp(call->identity.agent, agent) == 0 && !atomic_load(&call->cancelled)) {
        atomic_store(&call->cancel_reason, MCP_CANCELLED_AGENT);
        mcp_call_cancel(call, false);
        cancelled++;
      }
  pthread_mutex_unlock(&server->lock);
  return cancelled + mcp_task_cancel_agent(server, agent, MCP_CANCELLED_AGENT);
}

bool mcp_server_wait_idle(mcp_server *server, unsigned timeout_ms) {
  struct timespec deadline = dome_deadline_after_ms(timeout_ms);
  pthread_mutex_lock(&server->lock);
  while (server->calls_active > 0)
    if (pthread_cond_timedwait(&server->idle, &server->lock, &deadline) == ETIMEDOUT) break;
  bool idle = server->calls_active == 0;
  pthread_mutex_unlock(&server->lock);
  return idle;
}

void mcp_server_stop(mcp_server *server) {
  if (server == NULL) return;
  mcp_server_cancel_all(server);
  mcp_server_wait_idle(server, 30000);
  /* let the connection threads send the last answers before the connections are closed */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 3;
  pthread_mutex_lock(&server->lock);
  while (server->streams_open > 0)
    if (pthread_cond_timedwait(&server->idle, &server->lock, &deadline) == ETIMEDOUT) break;
  pthread_mutex_unlock(&server->lock);
  mcp_session_close_all(server);
  if (server->daemon) MHD_stop_daemon(server->daemon);
  if (server->get_daemon) MHD_stop_daemon(server->get_daemon);
  if (server->console_daemon) MHD_stop_daemon(server->console_daemon);
  mcp_server_wait_idle(server, 5000);
  /* every job has returned (a call counts as done a little before): then no worker is left. A job still
   * running after that uses the server: it is left allocated rather than freed under it. */
  if (mcp_workers_stop(&server->workers, WORKERS_STOP_MS) > 0) return;
  mcp_tasks_free(server);
  free_list(server->allowed_origins);
  free_list(server->allowed_hosts);
  free(server->get_token);
  free(server->sessions);
  free(server->path);
  free(server->tls_cert);
  free(server->tls_key);
  pthread_mutex_destroy(&server->lock);
  pthread_cond_destroy(&server->idle);
  pthread_cond_destroy(&server->task_changed);
  free(server);
}

void mcp_server_get_stats(mcp_server *server, struct mcp_server_stats *stats) {
  pthread_mutex_lock(&server->lock);
  *stats = server->stats;
  stats->replay_bytes = 0;
  for (size_t i = 0; i < server->session_count; i++) { /* replay_lock after server->lock: it nests nothing */
    struct mcp_session *session = server->sessions[i];
    pthread_mutex_lock(&session->replay_lock);
    stats->replay_bytes += session->replay_bytes;
    pthread_mutex_unlock(&session->replay_lock);
  }
  pthread_mutex_unlock(&server->lock);
}
