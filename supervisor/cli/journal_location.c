#include "supervisor/cli/journal_location.h"

#include <stdlib.h>
#include <string.h>

#include "supervisor/control/control.h"

const char *cli_journal_location(const char *socket, const char *flag, char **owned) {
  *owned = NULL;
  if (flag) return flag;
  json_t *args = json_pack("{s:b}", "describe", 1), *result = NULL;
  dome_error err = {0};
  if (control_call(control_socket_path(socket), "audit.stream", args, &result, &err) == 0) {
    const char *dir = json_string_value(json_object_get(result, "journal_dir"));
    if (dir) *owned = strdup(dir);
  }
  json_decref(args);
  json_decref(result);
  if (*owned) return *owned;
  const char *env = getenv("DOME_JOURNAL_DIR");
  return env && env[0] ? env : NULL;
}
