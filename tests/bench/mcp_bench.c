/* dome-mcp-bench: time MCP calls against a Streamable HTTP endpoint (MCP 2025-06-18, "Transports") with
 * libcurl, one kept-alive connection and MCP session per client thread.
 *
 *   dome-mcp-bench URL TOKEN CALLS CLIENTS METHOD [LANGUAGE CODE]
 *
 * METHOD is `execute_code` (a tools/call of execute_code with LANGUAGE and CODE), `ping` or `tools/list`.
 * CALLS calls in all, shared by CLIENTS threads (each first initializes its session and makes one
 * warm-up call, not counted). Prints one JSON object on stdout: calls, errors, seconds, calls_per_s and,
 * in milliseconds, p50/p90/p99 of the latency, p50 of the program's own duration_ms (execute_code) and
 * p50 of the overhead (latency minus duration_ms, per call). DOME_BENCH_SAMPLES=FILE appends each counted
 * call's latency (ms, one a line) to FILE, so that quantiles can be taken over several runs.
 * DOME_BENCH_PAUSE_MS=N makes each client wait N ms (0..60000) before each counted call: an agent's think
 * time between calls, which lets a jail pool refill between them. DOME_BENCH_SESSION_ID=ID runs each
 * execute_code in that sandbox session (docs/sessions.md; the token's agent must own it). Exit status 0; 1
 * with a message on stderr when a session cannot be set up (no initialize result, or its warm-up call
 * failed); 2 on bad usage. A call that fails after that counts in `errors` (DOME_BENCH_VERBOSE=1 prints its
 * answer). */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_CLIENTS 256

struct options {
  const char *url, *token, *method, *language, *code;
  const char *session_id; /* DOME_BENCH_SESSION_ID: execute_code runs in this sandbox session */
  long calls, clients;
  long pause_ms;
};

struct buffer {
  char *data;
  size_t length;
};

struct client {
  const struct options *options;
  CURL *curl;
  char session[256];
  long id;
  double *latency_ms, *overhead_ms, *program_ms;
  long count, errors;
};

static atomic_long next_call;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t on_body(char *data, size_t size, size_t count, void *context) {
  struct buffer *b = context;
  size_t n = size * count;
  char *grown = realloc(b->data, b->length + n + 1);
  if (grown == NULL) return 0;
  memcpy(grown + b->length, data, n);
  b->length += n;
  grown[b->length] = '\0';
  b->data = grown;
  return n;
}

static size_t on_header(char *data, size_t size, size_t count, void *context) {
  struct client *c = context;
  size_t n = size * count;
  static const char name[] = "mcp-session-id:";
  if (n > sizeof name && strncasecmp(data, name, sizeof name - 1) == 0) {
    const char *value = data + sizeof name - 1;
    while (*value == ' ') value++;
    size_t length = strcspn(value, "\r\n");
    if (length < sizeof c->session) {
      memcpy(c->session, value, length);
      c->session[length] = '\0';
    }
  }
  return n;
}

/* The JSON-RPC response of a body that is JSON or an SSE stream (the last `data:` line with an id). */
static json_t *response_of(const char *body) {
  const char *p = body;
  while (*p == ' ' || *p == '\n' || *p == '\r') p++;
  if (*p == '{') return json_loads(p, 0, NULL);
  json_t *found = NULL;
  for (const char *line = body; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    if (strncmp(line, "data:", 5) != 0) continue;
    size_t length = strcspn(line + 5, "\r\n");
    json_t *message = json_loadb(line + 5, length, 0, NULL);
    if (message && json_object_get(message, "id")) {
      json_decref(found);
      found = message;
    } else {
      json_decref(message);
    }
  }
  return found;
}

/* POST one JSON-RPC message; returns the response (NULL for a notification or on failure). */
static json_t *post(struct client *c, json_t *message, long *status) {
  char *text = json_dumps(message, JSON_COMPACT);
  struct buffer body = {0};
  struct curl_slist *headers = NULL;
  char line[512];
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json, text/event-stream");
  headers = curl_slist_append(headers, "MCP-Protocol-Version: 2025-06-18");
  snprintf(line, sizeof line, "Authorization: Bearer %s", c->options->token);
  headers = curl_slist_append(headers, line);
  if (c->session[0]) {
    snprintf(line, sizeof line, "Mcp-Session-Id: %s", c->session);
    headers = curl_slist_append(headers, line);
  }
  curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
  curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &body);
  CURLcode code = curl_easy_perform(c->curl);
  *status = 0;
  curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all(headers);
  free(text);
  json_t *response = code == CURLE_OK && body.data ? response_of(body.data) : NULL;
  free(body.data);
  return response;
}

static json_t *request_of(const struct options *o, long id) {
  if (strcmp(o->method, "execute_code") == 0) {
    json_t *request = json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s,s:s}}}", "jsonrpc", "2.0", "id", (int)id,
                                "method", "tools/call", "params", "name", "execute_code", "arguments",
                                "language", o->language, "code", o->code);
    if (request && o->session_id)
      json_object_set_new(json_object_get(json_object_get(request, "params"), "arguments"), "session_id",
                          json_string(o->session_id));
    return request;
  }
  return json_pack("{s:s,s:i,s:s,s:{}}", "jsonrpc", "2.0", "id", (int)id, "method", o->method, "params");
}

/* One call; 0 with its latency and the program's duration (-1 when the answer has none), or -1. */
static int call(struct client *c, double *latency, double *program) {
  json_t *request = request_of(c->options, ++c->id);
  long status;
  double start = now_ms();
  json_t *response = post(c, request, &status);
  *latency = now_ms() - start;
  json_decref(request);
  json_t *result = json_object_get(response, "result");
  int rc = status == 200 && result && !json_is_true(json_object_get(result, "isError")) ? 0 : -1;
  json_t *duration = json_object_get(json_object_get(result, "structuredContent"), "duration_ms");
  *program = json_is_integer(duration) ? (double)json_integer_value(duration) : -1;
  if (rc < 0 && getenv("DOME_BENCH_VERBOSE")) {
    char *text = response ? json_dumps(response, JSON_COMPACT) : NULL;
    fprintf(stderr, "dome-mcp-bench: call failed (HTTP %ld): %.300s\n", status, text ? text : "no answer");
    free(text);
  }
  json_decref(response);
  return rc;
}

static int session_open(struct client *c) {
  c->curl = curl_easy_init();
  if (c->curl == NULL) return -1;
  curl_easy_setopt(c->curl, CURLOPT_URL, c->options->url);
  curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, c);
  curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 120L);
  json_t *initialize = json_pack("{s:s,s:i,s:s,s:{s:s,s:{},s:{s:s,s:s}}}", "jsonrpc", "2.0", "id", 0,
                                 "method", "initialize", "params", "protocolVersion", "2025-06-18",
                                 "capabilities", "clientInfo", "name", "dome-mcp-bench", "version", "1");
  long status;
  json_t *response = post(c, initialize, &status);
  json_decref(initialize);
  int ok = response && json_object_get(response, "result");
  json_decref(response);
  if (!ok) return -1;
  json_t *initialized = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
  json_decref(post(c, initialized, &status));
  json_decref(initialized);
  double latency, program;
  return call(c, &latency, &program); /* warm-up */
}

static void *client_main(void *context) {
  struct client *c = context;
  for (;;) {
    long n = atomic_fetch_add(&next_call, 1);
    if (n >= c->options->calls) break;
    if (c->options->pause_ms > 0) {
      struct timespec pause = {.tv_sec = c->options->pause_ms / 1000,
                               .tv_nsec = (c->options->pause_ms % 1000) * 1000000L};
      nanosleep(&pause, NULL);
    }
    double latency, program;
    if (call(c, &latency, &program) < 0) {
      c->errors++;
      continue;
    }
    c->latency_ms[c->count] = latency;
    c->program_ms[c->count] = program;
    c->overhead_ms[c->count] = program >= 0 ? latency - program : latency;
    c->count++;
  }
  return NULL;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(double *values, long count, double q) {
  if (count == 0) return -1;
  qsort(values, (size_t)count, sizeof *values, compare);
  long i = (long)(q * (double)count);
  return values[i < count ? i : count - 1];
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: dome-mcp-bench URL TOKEN CALLS CLIENTS METHOD [LANGUAGE CODE]\n");
    return 2;
  }
  struct options o = {.url = argv[1],
                      .token = argv[2],
                      .calls = strtol(argv[3], NULL, 10),
                      .clients = strtol(argv[4], NULL, 10),
                      .method = argv[5],
                      .language = argc > 6 ? argv[6] : "python",
                      .code = argc > 7 ? argv[7] : "print(1)"};
  const char *session_id = getenv("DOME_BENCH_SESSION_ID");
  if (session_id && *session_id) o.session_id = session_id;
  const char *pause = getenv("DOME_BENCH_PAUSE_MS");
  if (pause && *pause) {
    char *end;
    o.pause_ms = strtol(pause, &end, 10);
    if (*end != '\0' || o.pause_ms < 0 || o.pause_ms > 60000) {
      fprintf(stderr, "dome-mcp-bench: DOME_BENCH_PAUSE_MS: an integer 0..60000, not '%s'\n", pause);
      return 2;
    }
  }
  if (o.calls < 1 || o.clients < 1 || o.clients > MAX_CLIENTS) {
    fprintf(stderr, "dome-mcp-bench: CALLS >= 1 and 1 <= CLIENTS <= %d\n", MAX_CLIENTS);
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  static struct client clients[MAX_CLIENTS];
  for (long i = 0; i < o.clients; i++) {
    clients[i] = (struct client){.options = &o};
    clients[i].latency_ms = calloc((size_t)o.calls, sizeof(double));
    clients[i].overhead_ms = calloc((size_t)o.calls, sizeof(double));
    clients[i].program_ms = calloc((size_t)o.calls, sizeof(double));
    if (!clients[i].latency_ms || !clients[i].overhead_ms || !clients[i].program_ms ||
        session_open(&clients[i]) < 0) {
      fprintf(stderr, "dome-mcp-bench: client %ld: no MCP session at %s\n", i, o.url);
      return 1;
    }
  }
  pthread_t threads[MAX_CLIENTS];
  double start = now_ms();
  for (long i = 0; i < o.clients; i++) pthread_create(&threads[i], NULL, client_main, &clients[i]);
  for (long i = 0; i < o.clients; i++) pthread_join(threads[i], NULL);
  double seconds = (now_ms() - start) / 1e3;
  long count = 0, errors = 0;
  for (long i = 0; i < o.clients; i++) count += clients[i].count, errors += clients[i].errors;
  double *latency = calloc((size_t)count + 1, sizeof *latency),
         *overhead = calloc((size_t)count + 1, sizeof *overhead),
         *program = calloc((size_t)count + 1, sizeof *program);
  long k = 0, programs = 0;
  for (long i = 0; i < o.clients; i++)
    for (long j = 0; j < clients[i].count; j++, k++) {
      latency[k] = clients[i].latency_ms[j];
      overhead[k] = clients[i].overhead_ms[j];
      if (clients[i].program_ms[j] >= 0) program[programs++] = clients[i].program_ms[j];
    }
  const char *samples = getenv("DOME_BENCH_SAMPLES");
  if (samples && *samples) {
    FILE *out = fopen(samples, "a");
    if (out == NULL) {
      perror(samples);
      return 1;
    }
    for (long i = 0; i < count; i++) fprintf(out, "%.3f\n", latency[i]);
    if (fclose(out) != 0) {
      perror(samples);
      return 1;
    }
  }
  double p50 = quantile(latency, count, 0.5), p90 = quantile(latency, count, 0.9),
         p99 = quantile(latency, count, 0.99);
  printf(
      "{\"calls\":%ld,\"errors\":%ld,\"seconds\":%.3f,\"calls_per_s\":%.1f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,"
      "\"p99_ms\":%.3f,\"program_p50_ms\":%.3f,\"overhead_p50_ms\":%.3f}\n",
      count, errors, seconds, (double)count / seconds, p50, p90, p99, quantile(program, programs, 0.5),
      quantile(overhead, count, 0.5));
  for (long i = 0; i < o.clients; i++) curl_easy_cleanup(clients[i].curl);
  curl_global_cleanup();
  return 0;
}
