/* Shared option handling and input loading of the `dome cedar ...` subcommands. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/cli/cedar_cli.h"
#include "policy/validate/validate.h"

int cedar_cli_fail(const char *command, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  fprintf(stderr, "dome %s: ", command);
  vfprintf(stderr, format, ap);
  fputc('\n', stderr);
  va_end(ap);
  return CEDAR_EXIT_FAILURE;
}

int cedar_cli_fail_diag(const char *command, const cedar_diagnostic *diag) {
  char msg[1200];
  return cedar_cli_fail(command, "%s", cedar_diagnostic_format(diag, msg, sizeof msg));
}

int cedar_cli_option(cedar_cli *cli, int opt, const char *arg) {
  switch (opt) {
    case 'p':
      cli->policies = arg;
      return 1;
    case CEDAR_OPT_POLICY_FORMAT:
      cli->policy_format = arg;
      return 1;
    case 'k':
      cli->template_linked = arg;
      return 1;
    case CEDAR_OPT_ENTITIES:
      cli->entities = arg;
      return 1;
    case 's':
      cli->schema = arg;
      return 1;
    case CEDAR_OPT_SCHEMA_FORMAT:
      cli->schema_format = arg;
      return 1;
    case 'l':
      cli->principal = arg;
      return 1;
    case 'a':
      cli->action = arg;
      return 1;
    case 'r':
      cli->resource = arg;
      return 1;
    case 'c':
      cli->context = arg;
      return 1;
    case CEDAR_OPT_REQUEST_JSON:
      cli->request_json = arg;
      return 1;
    case CEDAR_OPT_REQUEST_VALIDATION:
      cli->request_validation_off = arg && (strcmp(arg, "false") == 0 || strcmp(arg, "0") == 0);
      return 1;
    case 'v':
      cli->verbose = true;
      return 1;
    case CEDAR_OPT_TIMING:
      return 1;
    default:
      return 0;
  }
}

bool cedar_cli_parse_options(cedar_cli *cli, int argc, char **argv, const char *short_options,
                             const struct option *options, const char *usage, cedar_cli_extra_option *extra,
                             void *state, int *status) {
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, short_options, options, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage, stdout);
      *status = 0;
      return false;
    }
    int taken = extra ? extra(state, opt, optarg) : 0;
    if (taken < 0) {
      *status = CEDAR_EXIT_FAILURE;
      return false;
    }
    if (!taken && !cedar_cli_option(cli, opt, optarg)) {
      fputs(usage, stderr);
      *status = CEDAR_EXIT_FAILURE;
      return false;
    }
  }
  return true;
}

void cedar_cli_print_policy_errors(const cedar_policy_error *errors, size_t count) {
  if (!count) return;
  printf("\n");
  for (size_t i = 0; i < count; i++)
    printf("error while evaluating policy `%s`: %s\n", errors[i].policy_id, errors[i].message);
}

/* Read a whole file ("-" or NULL: stdin). */
static char *read_input(const char *path, size_t *length) {
  FILE *f = !path || strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
    if (n + 1 >= cap) {
      if (cap > CEDAR_MAX_TEXT_BYTES) {
        free(buf);
        buf = NULL;
        errno = E2BIG;
        break;
      }
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  if (f != stdin) fclose(f);
  if (buf) {
    buf[n] = 0;
    *length = n;
  }
  return buf;
}

int cedar_cli_load_policies(cedar_cli *cli, const char *command, cedar_policy_set **out) {
  size_t length;
  const char *name = cli->policies && strcmp(cli->policies, "-") ? cli->policies : "<stdin>";
  char *text = read_input(cli->policies, &length);
  if (!text) return cedar_cli_fail(command, "--policies `%s`: %s", name, strerror(errno));
  cedar_diagnostic diag = {0};
  int r;
  bool json = cli->policy_format && strcmp(cli->policy_format, "json") == 0;
  if (cli->policy_format && !json && strcmp(cli->policy_format, "cedar") &&
      strcmp(cli->policy_format, "human")) {
    free(text);
    return cedar_cli_fail(command, "--policy-format: expected `cedar` or `json`, got `%s`",
                          cli->policy_format);
  }
  if (json)
    r = cedar_policy_set_parse_json(text, length, name, out, &diag);
  else
    r = cedar_policy_set_parse(text, length, name, CEDAR_PARSE_ID_ANNOTATIONS, out, &diag);
  free(text);
  if (r < 0) return cedar_cli_fail_diag(command, &diag);
  if (cli->template_linked) {
    text = read_input(cli->template_linked, &length);
    if (!text)
      return cedar_cli_fail(command, "--template-linked `%s`: %s", cli->template_linked, strerror(errno));
    json_error_t jerr;
    json_t *links = json_loadb(text, length, 0, &jerr);
    free(text);
    if (!json_is_array(links)) {
      json_decref(links);
      return cedar_cli_fail(command, "--template-linked `%s`: expected a JSON array of links",
                            cli->template_linked);
    }
    for (size_t i = 0; i < json_array_size(links); i++) {
      json_t *l = json_array_get(links, i);
      const char *tid = json_string_value(json_object_get(l, "template_id"));
      const char *nid = json_string_value(json_object_get(l, "link_id"));
      if (!tid) tid = json_string_value(json_object_get(l, "templateId"));
      if (!nid) nid = json_string_value(json_object_get(l, "newId"));
      json_t *args = json_object_get(l, "args");
      if (!args) args = json_object_get(l, "values");
      cedar_uid_ref slots[2];
      bool has[2] = {false, false};
      const char *names[2] = {"?principal", "?resource"};
      char *storage[4] = {0};
      for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(args, names[k]);
        if (!v) continue;
        has[k] = true;
        if (json_is_string(v)) {
          size_t idl;
          if (cedar_uid_parse(json_string_value(v), json_string_length(v), &storage[2 * k],
                              &storage[2 * k + 1], &idl, &diag) < 0) {
            json_decref(links);
            return cedar_cli_fail_diag(command, &diag);
          }
          slots[k] = (cedar_uid_ref){storage[2 * k], storage[2 * k + 1], idl};
        } else {
          if (json_object_get(v, "__entity")) v = json_object_get(v, "__entity");
          slots[k] = (cedar_uid_ref){json_string_value(json_object_get(v, "type")),
                                     json_string_value(json_object_get(v, "id")),
                                     json_string_length(json_object_get(v, "id"))};
        }
      }
      if (tid && nid) {
        r = cedar_policy_set_link(*out, tid, nid, has[0] ? &slots[0] : NULL, has[1] ? &slots[1] : NULL,
                                  &diag);
      } else {
        snprintf(diag.message, sizeof diag.message,
                 "--template-linked: link #%zu needs template_id and link_id", i);
        r = -EINVAL;
      }
      for (int k = 0; k < 4; k++) free(storage[k]);
      if (r < 0) {
        json_decref(links);
        return cedar_cli_fail_diag(command, &diag);
      }
    }
    json_decref(links);
  }
  return 0;
}

int cedar_cli_load_schema(cedar_cli *cli, const char *command) {
  if (!cli->schema) return 0;
  cedar_schema_error err = {0};
  char msg[1200];
  int r;
  if (cli->schema_format && strcmp(cli->schema_format, "json") == 0) {
    size_t length;
    char *text = read_input(cli->schema, &length);
    if (!text) return cedar_cli_fail(command, "--schema `%s`: %s", cli->schema, strerror(errno));
    r = cedar_schema_parse_json(text, length, cli->schema, &cli->loaded_schema, &err);
    free(text);
  } else if (cli->schema_format && strcmp(cli->schema_format, "cedar") &&
             strcmp(cli->schema_format, "human")) {
    return cedar_cli_fail(command, "--schema-format: expected `cedar` or `json`, got `%s`",
                          cli->schema_format);
  } else if (cli->schema_format) {
    size_t length;
    char *text = read_input(cli->schema, &length);
    if (!text) return cedar_cli_fail(command, "--schema `%s`: %s", cli->schema, strerror(errno));
    r = cedar_schema_parse(text, length, cli->schema, &cli->loaded_schema, &err);
    free(text);
  } else {
    r = cedar_schema_load_file(cli->schema, &cli->loaded_schema, &err);
  }
  if (r < 0) return cedar_cli_fail(command, "%s", cedar_schema_error_format(&err, msg, sizeof msg));
  return 0;
}

int cedar_cli_load_entities(cedar_cli *cli, const char *command, cedar_entities **out) {
  if (!cli->entities) return cedar_entities_empty(out) < 0 ? cedar_cli_fail(command, "out of memory") : 0;
  size_t length;
  char *text = read_input(cli->entities, &length);
  if (!text) return cedar_cli_fail(command, "--entities `%s`: %s", cli->entities, strerror(errno));
  cedar_diagnostic diag = {0};
  int r = cedar_entities_parse_json(text, length, cli->entities, cli->loaded_schema, out, &diag);
  free(text);
  return r < 0 ? cedar_cli_fail_diag(command, &diag) : 0;
}

static int parse_uid_arg(cedar_cli *cli, const char *command, const char *flag, const char *text, int slot,
                         cedar_uid_ref *uid) {
  cedar_diagnostic diag = {0};
  size_t idl;
  if (cedar_uid_parse(text, strlen(text), &cli->uid_storage[2 * slot], &cli->uid_storage[2 * slot + 1], &idl,
                      &diag) < 0)
    return cedar_cli_fail(command, "%s `%s`: %s", flag, text, diag.message);
  *uid = (cedar_uid_ref){cli->uid_storage[2 * slot], cli->uid_storage[2 * slot + 1], idl};
  return 0;
}

int cedar_cli_load_request(cedar_cli *cli, const char *command, bool required, cedar_request *request,
                           cedar_context **context) {
  memset(request, 0, sizeof *request);
  *context = NULL;
  const char *uids[3] = {cli->principal, cli->action, cli->resource};
  const char *flags[3] = {"--principal", "--action", "--resource"};
  json_t *req = NULL;
  json_t *ctx_json = NULL;
  if (cli->request_json) {
    size_t length;
    char *text = read_input(cli->request_json, &length);
    if (!text) return cedar_cli_fail(command, "--request-json `%s`: %s", cli->request_json, strerror(errno));
    json_error_t jerr;
    req = json_loadb(text, length, 0, &jerr);
    free(text);
    if (!json_is_object(req)) {
      json_decref(req);
      return cedar_cli_fail(command, "--request-json `%s`: expected a JSON object", cli->request_json);
    }
    const char *keys[3] = {"principal", "action", "resource"};
    for (int i = 0; i < 3; i++)
      if (json_is_string(json_object_get(req, keys[i])))
        uids[i] = json_string_value(json_object_get(req, keys[i]));
    ctx_json = json_object_get(req, "context");
  }
  cedar_uid_ref *targets[3] = {&request->principal, &request->action, &request->resource};
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++) {
    if (!uids[i]) {
      if (required) rc = cedar_cli_fail(command, "%s is required", flags[i]);
      continue;
    }
    rc = parse_uid_arg(cli, command, flags[i], uids[i], i, targets[i]);
  }
  if (rc == 0 && (cli->context || ctx_json)) {
    size_t length = 0;
    char *text = NULL;
    if (ctx_json)
      text = json_dumps(ctx_json, JSON_COMPACT | JSON_ENCODE_ANY);
    else
      text = read_input(cli->context, &length);
    if (!text) {
      rc = cedar_cli_fail(command, "--context `%s`: %s", cli->context ? cli->context : "", strerror(errno));
    } else {
      if (ctx_json) length = strlen(text);
      cedar_diagnostic diag = {0};
      if (cedar_context_parse_json(text, length, cli->context ? cli->context : "context", cli->loaded_schema,
                                   request->action.type ? &request->action : NULL, context, &diag) < 0)
        rc = cedar_cli_fail_diag(command, &diag);
      free(text);
    }
  }
  json_decref(req);
  if (rc == 0) request->context = *context;
  /* With a schema the request is validated against it unless --request-validation=false (upstream default).
   */
  if (rc == 0 && required && cli->loaded_schema && !cli->request_validation_off) {
    char why[512];
    if (cedar_validate_request(cli->loaded_schema, request, why, sizeof why) < 0)
      rc = cedar_cli_fail(command, "request validation: %s", why);
  }
  return rc;
}

int cedar_cli_load_inputs(cedar_cli *cli, const char *command, bool required, cedar_cli_inputs *inputs) {
  int rc = cedar_cli_load_schema(cli, command);
  if (rc == 0) rc = cedar_cli_load_policies(cli, command, &inputs->set);
  if (rc == 0) rc = cedar_cli_load_entities(cli, command, &inputs->entities);
  if (rc == 0) rc = cedar_cli_load_request(cli, command, required, &inputs->request, &inputs->context);
  return rc;
}

void cedar_cli_inputs_release(cedar_cli_inputs *inputs) {
  cedar_context_free(inputs->context);
  cedar_entities_free(inputs->entities);
  cedar_policy_set_free(inputs->set);
  memset(inputs, 0, sizeof *inputs);
}

void cedar_cli_release(cedar_cli *cli) {
  for (int i = 0; i < 6; i++) free(cli->uid_storage[i]);
  cedar_schema_free(cli->loaded_schema);
  memset(cli, 0, sizeof *cli);
}
