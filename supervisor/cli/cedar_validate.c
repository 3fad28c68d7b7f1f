/* dome cedar validate — the upstream `cedar validate` command: strict validation of a policy set against a
 * schema, with the upstream flags and exit codes (0 passed, 1 bad input, 3 validation failed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "policy/validate/validate.h"
#include "supervisor/cli/command.h"

#define CEDAR_EXIT_FAILURE 1
#define CEDAR_EXIT_VALIDATION_FAILURE 3

/* Whole file (NUL-terminated, malloc'd) or NULL with errno set; "-" is standard input. */
static char *read_all(const char *path, size_t *length) {
  int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t size = 0, capacity = 65536;
  char *text = malloc(capacity + 1);
  while (text) {
    if (size == capacity) {
      if (capacity >= CEDAR_MAX_TEXT_BYTES) {
        free(text);
        text = NULL;
        errno = E2BIG;
        break;
      }
      char *bigger = realloc(text, capacity * 2 + 1);
      if (!bigger) {
        free(text);
        text = NULL;
        break;
      }
      text = bigger;
      capacity *= 2;
    }
    ssize_t n = read(fd, text + size, capacity - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      free(text);
      text = NULL;
      errno = e;
      break;
    }
    if (n == 0) {
      text[size] = '\0';
      *length = size;
      break;
    }
    size += (size_t)n;
  }
  if (fd != 0) close(fd);
  return text;
}

static int usage(FILE *out) {
  fprintf(out,
          "usage: dome cedar validate --schema FILE [--schema-format cedar|json] [--policies FILE]\n"
          "                           [--policy-format cedar|json] [--validation-mode strict]\n"
          "                           [--deny-warnings]\n"
          "Validates the policies (standard input when --policies is absent) against the schema in strict\n"
          "mode. Exit status: 0 validation passed, 1 bad input, 3 validation failed.\n");
  return out == stdout ? 0 : CEDAR_EXIT_FAILURE;
}

static int validate_main(int argc, char **argv) {
  const char *schema_path = NULL, *policies_path = "-", *schema_format = NULL, *policy_format = "cedar";
  bool deny_warnings = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout);
    if ((strcmp(a, "--schema") == 0 || strcmp(a, "-s") == 0) && has_value)
      schema_path = argv[++i];
    else if (strcmp(a, "--schema-format") == 0 && has_value)
      schema_format = argv[++i];
    else if ((strcmp(a, "--policies") == 0 || strcmp(a, "-p") == 0) && has_value)
      policies_path = argv[++i];
    else if (strcmp(a, "--policy-format") == 0 && has_value)
      policy_format = argv[++i];
    else if (strcmp(a, "--validation-mode") == 0 && has_value) {
      if (strcmp(argv[++i], "strict") != 0) {
        fprintf(stderr, "dome cedar validate: --validation-mode `%s` is not supported (only strict)\n",
                argv[i]);
        return CEDAR_EXIT_FAILURE;
      }
    } else if (strcmp(a, "--deny-warnings") == 0)
      deny_warnings = true;
    else {
      fprintf(stderr, "dome cedar validate: unexpected argument `%s`\n", a);
      return usage(stderr);
    }
  }
  if (!schema_path) {
    fprintf(stderr, "dome cedar validate: --schema is required\n");
    return usage(stderr);
  }
  if ((schema_format && strcmp(schema_format, "cedar") && strcmp(schema_format, "json")) ||
      (strcmp(policy_format, "cedar") && strcmp(policy_format, "json"))) {
    fprintf(stderr, "dome cedar validate: formats are `cedar` or `json`\n");
    return CEDAR_EXIT_FAILURE;
  }
  size_t length = 0;
  char *text = read_all(schema_path, &length);
  if (!text) {
    fprintf(stderr, "dome cedar validate: --schema `%s`: %s\n", schema_path, strerror(errno));
    return CEDAR_EXIT_FAILURE;
  }
  bool json_schema =
      schema_format ? strcmp(schema_format, "json") == 0
                    : (strlen(schema_path) > 5 && !strcmp(schema_path + strlen(schema_path) - 5, ".json"));
  cedar_schema *schema = NULL;
  cedar_schema_error schema_err;
  int r = json_schema ? cedar_schema_parse_json(text, length, schema_path, &schema, &schema_err)
                      : cedar_schema_parse(text, length, schema_path, &schema, &schema_err);
  free(text);
  if (r < 0) {
    char buf[900];
    fprintf(stderr, "dome cedar validate: failed to parse schema: %s\n",
            cedar_schema_error_format(&schema_err, buf, sizeof buf));
    return CEDAR_EXIT_FAILURE;
  }
  text = read_all(policies_path, &length);
  if (!text) {
    fprintf(stderr, "dome cedar validate: --policies `%s`: %s\n", policies_path, strerror(errno));
    cedar_schema_free(schema);
    return CEDAR_EXIT_FAILURE;
  }
  const char *name = strcmp(policies_path, "-") == 0 ? "<stdin>" : policies_path;
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  r = strcmp(policy_format, "json") == 0 ? cedar_policy_set_parse_json(text, length, name, &set, &diag)
                                         : cedar_policy_set_parse(text, length, name, 0, &set, &diag);
  free(text);
  if (r < 0) {
    char buf[1200];
    fprintf(stderr, "dome cedar validate: failed to parse policies: %s\n",
            cedar_diagnostic_format(&diag, buf, sizeof buf));
    cedar_schema_free(schema);
    return CEDAR_EXIT_FAILURE;
  }
  cedar_validation_result result;
  r = cedar_validate(schema, set, &result);
  int status = CEDAR_EXIT_FAILURE;
  if (r == 0) {
    for (size_t i = 0; i < result.count; i++) {
      char buf[1200];
      printf("%s\n", cedar_validation_issue_format(&result.issues[i], buf, sizeof buf));
    }
    bool passed = cedar_validation_passed(&result) && !(deny_warnings && result.warning_count);
    printf(passed ? "validation passed\n" : "validation failed\n");
    status = passed ? 0 : CEDAR_EXIT_VALIDATION_FAILURE;
    cedar_validation_result_release(&result);
  } else {
    fprintf(stderr, "dome cedar validate: %s\n", strerror(-r));
  }
  cedar_policy_set_free(set);
  cedar_schema_free(schema);
  return status;
}

DOME_COMMAND(cedar_validate, "cedar validate",
             "validate Cedar policies against a schema (upstream cedar CLI flags)", validate_main);
