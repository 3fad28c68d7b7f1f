/* `dome guard redact`: redact stdin (text, or a JSON document by field) and print the result. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/cli/command.h"
#include "supervisor/common/cleanup.h"
#include "supervisor/guards/guard.h"

enum { SECRETS_MAX = 4096, READ_CHUNK = 64 * 1024, MAP_SLICE = 1024 * 1024 };

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: dome guard redact [--class PUBLIC|SENSITIVE|PII] [--field NAME] [--classification F=C,...]\n"
      "                         [--env-file FILE] [--hmac-key-file FILE] [--json] [--json-input]\n"
      "Reads stdin and writes it redacted to stdout, streaming.\n"
      "  --class C            class of the input (default: the field's class, PUBLIC)\n"
      "  --field NAME         field name used for findings and classification lookup (default stdout)\n"
      "  --classification S   field classification, e.g. "
      "output_paths=SENSITIVE,env_vars=SENSITIVE,stderr=PII\n"
      "  --env-file FILE      KEY=VALUE lines: the values are redacted exactly (and base64/hex/URL-encoded)\n"
      "  --hmac-key-file FILE key for the findings' HMAC-SHA-256 (default: random per run)\n"
      "  --json               print {\"text\", \"findings\", \"redactions\"} instead of the bare text\n"
      "  --json-input         stdin is a JSON object (e.g. `dome run --json`): redact its string values by\n"
      "                       field and print {\"result\", \"findings\", \"redactions\"}\n");
}

struct secret_list {
  struct guard_secret items[SECRETS_MAX];
  char *storage[SECRETS_MAX];
  size_t count;
};

static void secret_list_free(struct secret_list *list) {
  for (size_t i = 0; i < list->count; i++) free(list->storage[i]);
}

/* KEY=VALUE lines; blank lines and # comments skipped; `export ` prefix and matching quotes removed. */
static int read_env_file(const char *path, struct secret_list *list) {
  _cleanup_fclose_ FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "dome guard redact: --env-file `%s`: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t capacity = 0;
  ssize_t n;
  size_t line_number = 0;
  while ((n = getline(&line, &capacity, f)) >= 0) {
    line_number++;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '\0' || *p == '#') continue;
    if (strncmp(p, "export ", 7) == 0) p += 7;
    char *equals = strchr(p, '=');
    if (equals == NULL || equals == p) {
      fprintf(stderr, "dome guard redact: %s:%zu: expected KEY=VALUE\n", path, line_number);
      free(line);
      return -1;
    }
    char *value = equals + 1;
    size_t length = strlen(value);
    if (length >= 2 && (value[0] == '"' || value[0] == '\'') && value[length - 1] == value[0]) {
      value++;
      length -= 2;
    }
    if (list->count >= SECRETS_MAX) {
      fprintf(stderr, "dome guard redact: %s:%zu: more than %d values\n", path, line_number, SECRETS_MAX);
      free(line);
      return -1;
    }
    *equals = '\0';
    char *copy = malloc(strlen(p) + 1 + length + 1);
    if (copy == NULL) {
      free(line);
      return -1;
    }
    strcpy(copy, p);
    memcpy(copy + strlen(p) + 1, value, length);
    copy[strlen(p) + 1 + length] = '\0';
    list->storage[list->count] = copy;
    list->items[list->count] = (struct guard_secret){copy, copy + strlen(p) + 1, length};
    list->count++;
  }
  free(line);
  return 0;
}

static int read_file(const char *path, char **data, size_t *length) {
  _cleanup_fclose_ FILE *f = fopen(path, "rb");
  if (f == NULL) return -errno;
  char *buffer = malloc(4096);
  if (buffer == NULL) return -ENOMEM;
  *length = fread(buffer, 1, 4096, f);
  *data = buffer;
  return 0;
}

/* Where redacted output goes: stdout as it is decided, or (with --json) a growing text; findings are
 * collected in both cases. */
struct output {
  bool to_stdout;
  char *data;
  size_t length, capacity;
  struct guard_findings findings;
};

static int emit_output(const char *data, size_t length, void *context) {
  struct output *out = context;
  if (out->to_stdout) return fwrite(data, 1, length, stdout) == length ? 0 : -EIO;
  if (out->length + length + 1 > out->capacity) {
    size_t capacity = out->capacity ? out->capacity * 2 : 65536;
    while (capacity < out->length + length + 1) capacity *= 2;
    char *grown = realloc(out->data, capacity);
    if (grown == NULL) return -ENOMEM;
    out->data = grown;
    out->capacity = capacity;
  }
  memcpy(out->data + out->length, data, length);
  out->length += length;
  return 0;
}

static int collect_finding(const struct guard_finding *finding, void *context) {
  struct output *out = context;
  return guard_findings_add(&out->findings, finding);
}

/* Valid UTF-8 copy of data (invalid bytes become U+FFFD) for JSON output. */
static char *utf8_sanitize(const char *data, size_t length, size_t *out_length) {
  char *out = malloc(length * 3 + 1);
  if (out == NULL) return NULL;
  size_t n = 0;
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < length;) {
    unsigned char c = p[i];
    size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = need > 0 && i + need <= length;
    for (size_t k = 1; ok && k < need; k++) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && need == 2 && c < 0xc2) ok = false;
    if (ok && need == 3 && ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] >= 0xa0))) ok = false;
    if (ok && need == 4 && ((c == 0xf0 && p[i + 1] < 0x90) || c > 0xf4 || (c == 0xf4 && p[i + 1] >= 0x90)))
      ok = false;
    if (ok) {
      memcpy(out + n, p + i, need);
      n += need;
      i += need;
    } else {
      memcpy(out + n, "\xef\xbf\xbd", 3);
      n += 3;
      i++;
    }
  }
  out[n] = '\0';
  *out_length = n;
  return out;
}

static json_t *findings_json(const struct guard_findings *findings) {
  json_t *array = json_array();
  for (size_t i = 0; array && i < findings->count; i++) {
    const struct guard_finding *f = &findings->items[i];
    json_array_append_new(
        array, json_pack("{s:s, s:s, s:I, s:I, s:s}", "field", f->field, "detector", f->detector, "offset",
                         (json_int_t)f->offset, "length", (json_int_t)f->length, "hmac", f->hmac_hex));
  }
  return array;
}

static int redact_json_input(const struct guard *guard) {
  json_error_t json_error;
  json_t *document = json_loadf(stdin, JSON_ALLOW_NUL, &json_error);
  if (document == NULL) {
    fprintf(stderr, "dome guard redact: stdin:%d:%d: %s\n", json_error.line, json_error.column,
            json_error.text);
    return DOME_EXIT_FAILURE;
  }
  struct guard_findings findings = {0};
  dome_error err = {0};
  if (guard_redact_json(guard, document, &findings, &err) < 0) {
    fprintf(stderr, "dome guard redact: %s\n", err.message);
    json_decref(document);
    guard_findings_free(&findings);
    return DOME_EXIT_FAILURE;
  }
  json_t *out = json_pack("{s:o, s:o, s:I}", "result", document, "findings", findings_json(&findings),
                          "redactions", (json_int_t)findings.count);
  guard_findings_free(&findings);
  int status = out && json_dumpf(out, stdout, JSON_COMPACT) == 0 ? 0 : DOME_EXIT_FAILURE;
  putchar('\n');
  json_decref(out);
  return status;
}

static sigjmp_buf stdin_truncated;

static void on_sigbus(int signal_number) {
  (void)signal_number;
  siglongjmp(stdin_truncated, 1);
}

/* If stdin is a regular file, map it and feed it from the current offset to its size at the start, in
 * MAP_SLICE steps (flushing stdout after each when `flush`), and leave the offset at that size (nothing is
 * done for other stdin, or when mapping fails). A file truncated meanwhile raises SIGBUS, reported as a read
 * error. Returns 0 or the feed's error. */
static int feed_mapped_stdin(struct guard_stream *stream, const struct guard_sink *sink, bool flush,
                             dome_error *err) {
  struct stat st;
  off_t offset = lseek(STDIN_FILENO, 0, SEEK_CUR);
  if (fstat(STDIN_FILENO, &st) < 0 || !S_ISREG(st.st_mode) || offset < 0 || st.st_size <= offset ||
      (uint64_t)st.st_size > SIZE_MAX)
    return 0;
  size_t size = (size_t)st.st_size;
  char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, STDIN_FILENO, 0);
  if (map == MAP_FAILED) return 0; /* read(2) then */
  (void)madvise(map, size, MADV_SEQUENTIAL);
  struct sigaction action = {.sa_handler = on_sigbus}, previous;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous);
  volatile int r = 0; /* kept across the jump */
  if (sigsetjmp(stdin_truncated, 1) == 0) {
    for (size_t at = (size_t)offset; r == 0 && at < size; at += MAP_SLICE) {
      size_t n = size - at < MAP_SLICE ? size - at : MAP_SLICE;
      r = guard_stream_feed(stream, map + at, n, sink, err);
      if (r == 0 && flush && fflush(stdout) != 0) r = dome_error_set(err, EIO, "write stdout");
    }
  } else {
    r = dome_error_set(err, EIO, "read stdin: the file shrank while it was read");
  }
  sigaction(SIGBUS, &previous, NULL);
  munmap(map, size);
  if (r == 0 && lseek(STDIN_FILENO, (off_t)size, SEEK_SET) < 0) r = dome_error_set(err, errno, "seek stdin");
  return r;
}

static int redact_main(int argc, char **argv) {
  static const struct option options[] = {{"class", required_argument, NULL, 'c'},
                                          {"field", required_argument, NULL, 'f'},
                                          {"classification", required_argument, NULL, 'C'},
                                          {"env-file", required_argument, NULL, 'e'},
                                          {"hmac-key-file", required_argument, NULL, 'k'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"json-input", no_argument, NULL, 'J'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *class_text = NULL, *field = "stdout", *classification = NULL, *key_path = NULL;
  bool json = false, json_input = false;
  static struct secret_list secrets;
  secrets.count = 0;
  int option;
  optind = 1;
  while ((option = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (option) {
      case 'c':
        class_text = optarg;
        break;
      case 'f':
        field = optarg;
        break;
      case 'C':
        classification = optarg;
        break;
      case 'e':
        if (read_env_file(optarg, &secrets) < 0) {
          secret_list_free(&secrets);
          return DOME_EXIT_FAILURE;
        }
        break;
      case 'k':
        key_path = optarg;
        break;
      case 'j':
        json = true;
        break;
      case 'J':
        json_input = true;
        break;
      case 'h':
        usage(stdout);
        secret_list_free(&secrets);
        return 0;
      default:
        usage(stderr);
        secret_list_free(&secrets);
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "dome guard redact: unexpected argument `%s`\n", argv[optind]);
    secret_list_free(&secrets);
    return DOME_EXIT_FAILURE;
  }
  dome_error err = {0};
  enum guard_class class_ = GUARD_CLASS_PUBLIC;
  if (class_text && guard_class_parse(class_text, &class_, &err) < 0) {
    fprintf(stderr, "dome guard redact: --class: %s\n", err.message);
    secret_list_free(&secrets);
    return DOME_EXIT_FAILURE;
  }
  _cleanup_free_ char *key = NULL;
  size_t key_length = 0;
  if (key_path && read_file(key_path, &key, &key_length) < 0) {
    fprintf(stderr, "dome guard redact: --hmac-key-file `%s`: cannot read\n", key_path);
    secret_list_free(&secrets);
    return DOME_EXIT_FAILURE;
  }
  struct guard_options guard_options = {.classification = classification,
                                        .secrets = secrets.items,
                                        .secret_count = secrets.count,
                                        .hmac_key = key,
                                        .hmac_key_length = key_length};
  struct guard *guard = NULL;
  int r = guard_create(&guard_options, &guard, &err);
  secret_list_free(&secrets);
  if (r < 0) {
    /* name the flag the bad value came from */
    const char *flag = strstr(err.message, "field classification") ? "--classification: " : "";
    fprintf(stderr, "dome guard redact: %s%s\n", flag, err.message);
    return DOME_EXIT_FAILURE;
  }
  if (json_input) {
    int status = redact_json_input(guard);
    guard_free(guard);
    return status;
  }
  if (!class_text) class_ = guard_field_class(guard, field);
  struct guard_stream *stream = NULL;
  if (guard_stream_open_class(guard, field, class_, &stream, &err) < 0) {
    fprintf(stderr, "dome guard redact: %s\n", err.message);
    guard_free(guard);
    return DOME_EXIT_FAILURE;
  }
  struct output out = {.to_stdout = !json};
  /* Findings are kept only for --json (memory grows with their number); plain text needs none. */
  struct guard_sink sink = {emit_output, json ? collect_finding : NULL, &out};
  static char chunk[READ_CHUNK];
  /* A regular file is mapped and fed in slices (no copy through the kernel per block); anything appended
   * meanwhile, and any other stdin, is read. */
  r = feed_mapped_stdin(stream, &sink, !json, &err);
  /* read(2), not fread: pass on what arrived without waiting for a full buffer (streamed output). */
  ssize_t got = 0;
  while (r == 0 && ((got = read(STDIN_FILENO, chunk, sizeof chunk)) > 0 || (got < 0 && errno == EINTR))) {
    if (got < 0) continue;
    r = guard_stream_feed(stream, chunk, (size_t)got, &sink, &err);
    if (r == 0 && !json && fflush(stdout) != 0) r = dome_error_set(&err, EIO, "write stdout");
  }
  if (r == 0 && got < 0) r = dome_error_set(&err, errno, "read stdin");
  if (r == 0) r = guard_stream_finish(stream, &sink, &err);
  guard_stream_close(stream);
  guard_free(guard);
  int status = 0;
  if (r < 0) {
    fprintf(stderr, "dome guard redact: %s\n", err.message);
    status = DOME_EXIT_FAILURE;
  } else if (json) {
    size_t clean_length = 0;
    char *clean = utf8_sanitize(out.data ? out.data : "", out.length, &clean_length);
    json_t *document =
        clean ? json_pack("{s:s%, s:o, s:I}", "text", clean, clean_length, "findings",
                          findings_json(&out.findings), "redactions", (json_int_t)out.findings.count)
              : NULL;
    free(clean);
    if (document == NULL || json_dumpf(document, stdout, JSON_COMPACT) < 0) status = DOME_EXIT_FAILURE;
    putchar('\n');
    json_decref(document);
  }
  if (fflush(stdout) != 0) status = DOME_EXIT_FAILURE;
  free(out.data);
  guard_findings_free(&out.findings);
  return status;
}
DOME_COMMAND(guard_redact, "guard redact", "redact credentials, secrets, paths and PII from stdin",
             redact_main);
