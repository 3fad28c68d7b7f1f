/* `dome guard detectors`: list the built-in detectors (id, class, description, source). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/guards/guard.h"

static int detectors_main(int argc, char **argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: dome guard detectors [--json]\nLists the detectors: id, class, description, source.\n");
      return 0;
    } else {
      fprintf(stderr, "dome guard detectors: unknown option `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  size_t count = guard_detector_count();
  if (json) {
    json_t *array = json_array();
    for (size_t i = 0; i < count; i++) {
      const struct guard_detector_info *d = guard_detector_at(i);
      json_array_append_new(
          array, json_pack("{s:s, s:s, s:s, s:s}", "id", d->id, "class", guard_class_name(d->class_),
                           "description", d->description, "source", d->source));
    }
    int r = json_dumpf(array, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(array);
    return r == 0 ? 0 : DOME_EXIT_FAILURE;
  }
  printf("%-28s %-10s %s\n", "ID", "CLASS", "DESCRIPTION");
  for (size_t i = 0; i < count; i++) {
    const struct guard_detector_info *d = guard_detector_at(i);
    printf("%-28s %-10s %s\n", d->id, guard_class_name(d->class_), d->description);
  }
  return 0;
}
DOME_COMMAND(guard_detectors, "guard detectors", "list the redaction detectors", detectors_main);
