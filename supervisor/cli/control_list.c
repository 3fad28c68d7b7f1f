#include "supervisor/cli/control_list.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/control/control.h"

int cli_control_call(const char *command, const char *socket, const char *method, json_t *args,
                     json_t **result) {
  dome_error err = {0};
  *result = NULL;
  int rc = control_call(control_socket_path(socket), method, args, result, &err);
  json_decref(args);
  if (rc < 0) {
    fprintf(stderr, "dome %s: %s\n", command, err.message);
    json_decref(*result);
    *result = NULL;
    return -1;
  }
  return 0;
}

json_t *cli_control_list(int argc, char **argv, const char *method, int *exit_status) {
  const char *socket = NULL;
  bool json_output = false;
  *exit_status = DOME_EXIT_FAILURE;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json_output = true;
    } else if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc) {
      socket = argv[++i];
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: dome %s [--json] [--control-socket PATH]\n", argv[0]);
      *exit_status = 0;
      return NULL;
    } else {
      fprintf(stderr, "dome %s: unexpected argument `%s`\n", argv[0], argv[i]);
      return NULL;
    }
  }
  json_t *result = NULL;
  if (cli_control_call(argv[0], socket, method, NULL, &result) < 0) return NULL;
  if (json_output) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(result);
    *exit_status = 0;
    return NULL;
  }
  return result;
}
