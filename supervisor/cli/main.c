/* dome — the command-line interface. Thin: finds the subcommand and hands over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/command.h"

extern const struct dome_command __start_dome_commands[];
extern const struct dome_command __stop_dome_commands[];

/* A command anchors the section so the linker always defines its bounds. */
static int version_main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: dome version\nPrints dome's version (also `dome --version`).\n");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "dome version: unexpected argument `%s`\n", argv[1]);
    return DOME_EXIT_FAILURE;
  }
  printf("dome %s\n", DOME_VERSION_STRING);
  return 0;
}
DOME_COMMAND(version, "version", "print dome's version", version_main);

/* Number of leading words of `name` matched by argv[0..], or 0 when it does not match. */
static int matched_words(const char *name, int argc, char **argv) {
  int words = 0;
  const char *p = name;
  while (*p) {
    const char *end = strchr(p, ' ');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    if (words >= argc || strlen(argv[words]) != length || strncmp(argv[words], p, length) != 0) return 0;
    words++;
    p += length;
    while (*p == ' ') p++;
  }
  return words;
}

static int compare_commands(const void *a, const void *b) {
  return strcmp((*(const struct dome_command *const *)a)->name,
                (*(const struct dome_command *const *)b)->name);
}

static void usage(FILE *out, const char *prefix) {
  size_t count = (size_t)(__stop_dome_commands - __start_dome_commands);
  const struct dome_command **sorted = calloc(count, sizeof *sorted);
  if (!sorted) return;
  for (size_t i = 0; i < count; i++) sorted[i] = &__start_dome_commands[i];
  qsort(sorted, count, sizeof *sorted, compare_commands);
  fprintf(out, "usage: dome <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < count; i++) {
    if (prefix && strncmp(sorted[i]->name, prefix, strlen(prefix)) != 0) continue;
    fprintf(out, "  %-24s %s\n", sorted[i]->name, sorted[i]->summary);
  }
  fprintf(out, "\nRun `dome <command> --help` for a command's options.\n");
  free(sorted);
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout, NULL);
    return argc < 2 ? DOME_EXIT_FAILURE : 0;
  }
  if (strcmp(argv[1], "--version") == 0) return version_main(0, NULL);
  const struct dome_command *best = NULL;
  int best_words = 0;
  for (const struct dome_command *c = __start_dome_commands; c < __stop_dome_commands; c++) {
    int words = matched_words(c->name, argc - 1, argv + 1);
    if (words > best_words) {
      best = c;
      best_words = words;
    }
  }
  if (best == NULL) {
    fprintf(stderr, "dome: unknown command `%s`\n", argv[1]);
    usage(stderr, argv[1]);
    return DOME_EXIT_FAILURE;
  }
  /* argv[best_words] becomes the handler's argv[0]; name it after the full command. */
  char **handler_argv = argv + best_words;
  handler_argv[0] = (char *)best->name;
  return best->handler(argc - best_words, handler_argv);
}
