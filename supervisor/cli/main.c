/* dome — the command-line interface. Thin: finds the subcommand and hands over.
 *
 * The words after `dome` are resolved against the command table (command.h):
 * - a command's words, then its arguments: the command. `-h` or `--help` right after the words calls it
 *   with exactly `--help` (its usage on stdout, exit 0), which is also what `dome help WORDS` does.
 * - a group's words alone (`dome agents`, the first words shared by several commands): the group's
 *   commands on stderr and exit 125, as `dome` alone prints every command; followed by `-h`/`--help`,
 *   or as `dome help agents`: the same list on stdout, exit 0. (git does the same: `git worktree` alone
 *   is a usage error, its list on stderr.)
 * - an option where a group's command belongs (`dome agents --json`): said so, then the group's list.
 * - anything else: one line on stderr naming the words up to the first that matches no command, with the
 *   words of that level closest to it ("did you mean"), exit 125; after a group's words without a close
 *   word, the group's list follows. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/common/edit_distance.h"

extern const struct dome_command __start_dome_commands[];
extern const struct dome_command __stop_dome_commands[];

static int dispatch(int count, char **words, bool asking_help);

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

static int help_main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf(
        "usage: dome help [COMMAND]\n"
        "Prints COMMAND's usage, the same as `dome COMMAND --help`; for a group of commands (`dome help\n"
        "agents`) the list of its commands; without COMMAND, the list of every command (`dome --help`).\n");
    return 0;
  }
  return dispatch(argc - 1, argv + 1, true);
}
DOME_COMMAND(help, "help", "print a command's usage, or the commands of a group", help_main);

static bool is_help_flag(const char *argument) {
  return strcmp(argument, "--help") == 0 || strcmp(argument, "-h") == 0;
}

/* Word `index` (from 0) of a command name: its start and length; false when the name is shorter. */
static bool name_word(const char *name, int index, const char **word, size_t *length) {
  const char *p = name;
  for (int i = 0;; i++) {
    while (*p == ' ') p++;
    if (*p == '\0') return false;
    const char *end = strchr(p, ' ');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (i == index) {
      *word = p;
      *length = n;
      return true;
    }
    p += n;
  }
}

static int name_word_count(const char *name) {
  const char *word;
  size_t length;
  int count = 0;
  while (name_word(name, count, &word, &length)) count++;
  return count;
}

/* Whether the first `count` words of `name` are words[0..count). */
static bool starts_with_words(const char *name, int count, char **words) {
  for (int i = 0; i < count; i++) {
    const char *word;
    size_t length;
    if (!name_word(name, i, &word, &length) || strlen(words[i]) != length || strncmp(words[i], word, length))
      return false;
  }
  return true;
}

struct resolution {
  const struct dome_command *command; /* the command words[] start with (the longest), or NULL */
  int words; /* words taken by `command`; without one, by the deepest group words[] start with (0: none) */
};

static struct resolution resolve(int count, char **words) {
  struct resolution found = {0};
  for (const struct dome_command *c = __start_dome_commands; c < __stop_dome_commands; c++) {
    int length = name_word_count(c->name);
    if (length <= count && length > found.words && starts_with_words(c->name, length, words)) {
      found.command = c;
      found.words = length;
    }
  }
  if (found.command) return found;
  for (const struct dome_command *c = __start_dome_commands; c < __stop_dome_commands; c++) {
    int depth = name_word_count(c->name) - 1;
    if (depth > count) depth = count;
    while (depth > found.words && !starts_with_words(c->name, depth, words)) depth--;
    if (depth > found.words) found.words = depth;
  }
  return found;
}

static int compare_commands(const void *a, const void *b) {
  return strcmp((*(const struct dome_command *const *)a)->name,
                (*(const struct dome_command *const *)b)->name);
}

/* words[0..depth) separated by spaces ("rules" or "audit replay"), with one more space after them when
 * `trailing_space` (for a prefix; nothing for depth 0). */
static const char *joined(int depth, char **words, bool trailing_space, char *buffer, size_t size) {
  size_t used = 0;
  buffer[0] = '\0';
  for (int i = 0; i < depth && used < size; i++)
    used += (size_t)snprintf(buffer + used, size - used, "%s%s", words[i],
                             i + 1 < depth || trailing_space ? " " : "");
  return buffer;
}

/* The commands whose first `depth` words are words[0..depth) (every command for depth 0), sorted by name,
 * summaries aligned two columns after the longest name. */
static void print_commands(FILE *out, int depth, char **words) {
  size_t count = (size_t)(__stop_dome_commands - __start_dome_commands), listed = 0, width = 0;
  const struct dome_command **sorted = calloc(count, sizeof *sorted);
  if (!sorted) return;
  for (const struct dome_command *c = __start_dome_commands; c < __stop_dome_commands; c++) {
    if (!starts_with_words(c->name, depth, words)) continue;
    sorted[listed++] = c;
    if (strlen(c->name) > width) width = strlen(c->name);
  }
  qsort(sorted, listed, sizeof *sorted, compare_commands);
  char group[256];
  joined(depth, words, true, group, sizeof group);
  fprintf(out, "usage: dome %s<command> [options]\n\ncommands:\n", group);
  for (size_t i = 0; i < listed; i++)
    fprintf(out, "  %-*s%s\n", (int)width + 2, sorted[i]->name, sorted[i]->summary);
  fprintf(out, "\nRun `dome help %s<command>` or `dome %s<command> --help` for a command's options.\n", group,
          group);
  free(sorted);
}

/* A word from the command line in a message: control characters as \xNN, at most 64 bytes shown. */
static void print_typed(FILE *out, const char *typed) {
  size_t i = 0;
  for (; typed[i] && i < 64; i++) {
    unsigned char c = (unsigned char)typed[i];
    if (c < 0x20 || c == 0x7f)
      fprintf(out, "\\x%02x", c);
    else
      fputc(c, out);
  }
  if (typed[i]) fputs("...", out);
}

#define SUGGESTIONS_MAX 8

typedef char command_word[DOME_EDIT_DISTANCE_MAX + 1];

static int compare_words(const void *a, const void *b) {
  return strcmp(a, b);
}

/* Words at level `depth` of the commands under words[0..depth) closest to words[depth] (compared in ASCII
 * lower case): those at the least Damerau-Levenshtein distance, when it is at most a third of the typed
 * word's length (at least 1) and shorter than the suggested word. Returns how many (up to `max`), sorted. */
static size_t closest_words(int depth, char **words, command_word suggestions[], size_t max) {
  command_word typed;
  size_t typed_length = strlen(words[depth]);
  if (typed_length > DOME_EDIT_DISTANCE_MAX) return 0;
  for (size_t i = 0; i <= typed_length; i++)
    typed[i] = (char)(words[depth][i] >= 'A' && words[depth][i] <= 'Z' ? words[depth][i] - 'A' + 'a'
                                                                       : words[depth][i]);
  size_t threshold = typed_length / 3 > 1 ? typed_length / 3 : 1, best = (size_t)-1, found = 0;
  for (const struct dome_command *c = __start_dome_commands; c < __stop_dome_commands; c++) {
    const char *word;
    size_t length;
    if (!starts_with_words(c->name, depth, words) || !name_word(c->name, depth, &word, &length) ||
        length > DOME_EDIT_DISTANCE_MAX)
      continue;
    command_word candidate;
    memcpy(candidate, word, length);
    candidate[length] = '\0';
    size_t distance = dome_edit_distance(typed, candidate);
    if (distance > threshold || distance >= length || distance > best) continue;
    if (distance < best) {
      best = distance;
      found = 0;
    }
    bool seen = false; /* the commands of a group share its word */
    for (size_t i = 0; i < found; i++) seen |= strcmp(suggestions[i], candidate) == 0;
    if (!seen && found < max) memcpy(suggestions[found++], candidate, length + 1);
  }
  qsort(suggestions, found, sizeof suggestions[0], compare_words);
  return found;
}

/* "dome: unknown command `agnets`; did you mean `agents`?" for words[0..depth], words[depth] being the
 * first that matches no command under words[0..depth). Returns how many suggestions it made. */
static size_t unknown_command(int depth, char **words) {
  command_word suggestions[SUGGESTIONS_MAX];
  size_t found = closest_words(depth, words, suggestions, SUGGESTIONS_MAX);
  char group[256];
  joined(depth, words, true, group, sizeof group);
  fprintf(stderr, "dome: unknown command `%s", group);
  print_typed(stderr, words[depth]);
  fputc('`', stderr);
  for (size_t i = 0; i < found; i++)
    fprintf(stderr, "%s`%s%s`",
            i == 0           ? "; did you mean "
            : i + 1 == found ? " or "
                             : ", ",
            group, suggestions[i]);
  if (found) fputc('?', stderr);
  if (!found && depth == 0) fputs("; `dome help` lists the commands", stderr);
  fputc('\n', stderr);
  return found;
}

/* Act on the words after `dome` (asking_help: after `dome help`, so every answer is a usage). */
static int dispatch(int count, char **words, bool asking_help) {
  if (count == 0) {
    print_commands(asking_help ? stdout : stderr, 0, NULL);
    return asking_help ? 0 : DOME_EXIT_FAILURE;
  }
  struct resolution found = resolve(count, words);
  bool help_flag = count > found.words && is_help_flag(words[found.words]);
  if (found.command) {
    if (asking_help && count > found.words && !help_flag) {
      fprintf(stderr, "dome help: unexpected argument `");
      print_typed(stderr, words[found.words]);
      fprintf(stderr, "` after `%s`\n", found.command->name);
      return DOME_EXIT_FAILURE;
    }
    if (asking_help || help_flag) {
      char *help_argv[] = {(char *)found.command->name, (char *)"--help", NULL};
      return found.command->handler(2, help_argv);
    }
    /* The word before the arguments becomes the handler's argv[0]: the full command name. */
    char **handler_argv = words + found.words - 1;
    handler_argv[0] = (char *)found.command->name;
    return found.command->handler(count - found.words + 1, handler_argv);
  }
  if (found.words > 0 && (count == found.words || help_flag)) {
    bool listing_asked = asking_help || help_flag;
    print_commands(listing_asked ? stdout : stderr, found.words, words);
    return listing_asked ? 0 : DOME_EXIT_FAILURE;
  }
  if (found.words > 0 && words[found.words][0] == '-') {
    /* An option where the group's command belongs (`dome agents --json`). */
    char group[256];
    fprintf(stderr, "dome: `%s` needs a command before `",
            joined(found.words, words, false, group, sizeof group));
    print_typed(stderr, words[found.words]);
    fputs("`\n", stderr);
    print_commands(stderr, found.words, words);
    return DOME_EXIT_FAILURE;
  }
  if (unknown_command(found.words, words) == 0 && found.words > 0) print_commands(stderr, found.words, words);
  return DOME_EXIT_FAILURE;
}

int main(int argc, char **argv) {
  if (argc >= 2 && is_help_flag(argv[1])) return dispatch(argc - 2, argv + 2, true);
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) return version_main(argc - 1, argv + 1);
  if (argc >= 2 && argv[1][0] == '-') {
    fprintf(stderr, "dome: unknown option `");
    print_typed(stderr, argv[1]);
    fprintf(stderr, "` (before a command dome takes --help or --version; `dome help` lists the commands)\n");
    return DOME_EXIT_FAILURE;
  }
  return dispatch(argc - 1, argv + 1, false);
}
