/* dome rules apply|list|show — versions of the Cedar rules domed enforces. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/control/control.h"

static int apply_main(int argc, char **argv) {
  const char *socket = NULL, *name = NULL, *file = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0) {
      printf(
          "usage: dome rules apply FILE --name NAME [--control-socket PATH]\n"
          "Validates FILE against the Dome schema, stores it as a new version and activates it atomically:\n"
          "running executions keep their version, new calls get the new one.\n");
      return 0;
    }
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
      name = argv[++i];
    else if (argv[i][0] != '-' && file == NULL)
      file = argv[i];
    else {
      fprintf(stderr, "dome rules apply: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (file == NULL || name == NULL) {
    fprintf(stderr, "dome rules apply: FILE and --name are required\n");
    return DOME_EXIT_FAILURE;
  }
  FILE *input = fopen(file, "re");
  if (input == NULL) {
    fprintf(stderr, "dome rules apply: `%s`: %s\n", file, strerror(errno));
    return DOME_EXIT_FAILURE;
  }
  char *text = NULL;
  size_t size = 0;
  FILE *memory = open_memstream(&text, &size);
  char buffer[8192];
  size_t n, total = 0;
  while ((n = fread(buffer, 1, sizeof buffer, input)) > 0) {
    fwrite(buffer, 1, n, memory);
    total += n;
  }
  fclose(input);
  fclose(memory);
  if (total > CONTROL_MAX_REQUEST / 2 || strlen(text) != total) {
    fprintf(stderr, "dome rules apply: `%s`: too large or contains NUL bytes\n", file);
    free(text);
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s,s:s,s:s}", "name", name, "text", text, "file", file), *result = NULL;
  free(text);
  dome_error err = {0};
  int rc = control_call(control_socket_path(socket), "rules.apply", args, &result, &err);
  json_decref(args);
  if (rc < 0) {
    fprintf(stderr, "dome rules apply: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  printf("Applied %s as version %lld (active)\n", name,
         (long long)json_integer_value(json_object_get(result, "version")));
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_apply, "rules apply", "validate, store and activate Cedar rules as a new version",
             apply_main);

static int list_main(int argc, char **argv) {
  const char *socket = NULL;
  bool json_output = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0)
      json_output = true;
    else if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else {
      fprintf(stderr, "dome rules list: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  json_t *result = NULL;
  dome_error err = {0};
  if (control_call(control_socket_path(socket), "rules.list", NULL, &result, &err) < 0) {
    fprintf(stderr, "dome rules list: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  if (json_output) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    printf("%-8s %-6s %-32s %s\n", "VERSION", "ACTIVE", "NAME", "SHA256");
    size_t i;
    json_t *v;
    json_array_foreach(result, i, v) printf(
        "%-8lld %-6s %-32s %s\n", (long long)json_integer_value(json_object_get(v, "version")),
        json_is_true(json_object_get(v, "active")) ? "*" : "", json_string_value(json_object_get(v, "name")),
        json_string_value(json_object_get(v, "sha256")));
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_list, "rules list", "list the stored versions of the rules", list_main);

static int show_main(int argc, char **argv) {
  const char *socket = NULL;
  long version = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--version") == 0 && i + 1 < argc) {
      version = strtol(argv[++i], &end, 10);
      if (*end || version < 1) {
        fprintf(stderr, "dome rules show: --version: expected a positive integer\n");
        return DOME_EXIT_FAILURE;
      }
    } else {
      fprintf(stderr, "dome rules show: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  json_t *args = json_pack("{s:i}", "version", (int)version), *result = NULL;
  dome_error err = {0};
  int rc = control_call(control_socket_path(socket), "rules.show", args, &result, &err);
  json_decref(args);
  if (rc < 0) {
    fprintf(stderr, "dome rules show: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  fputs(json_string_value(json_object_get(result, "text")), stdout);
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_show, "rules show", "print a version of the rules (default: the active one)", show_main);
