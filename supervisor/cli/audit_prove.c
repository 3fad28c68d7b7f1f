/* dome audit prove SEQ [DIR] [--journal DIR]          print an inclusion proof (RFC 9162 §2.1.3) as JSON
 * dome audit prove --check FILE [--key PUBKEY]        check one (docs/journal-format.md §8)
 * Exit: 0 ok, 1 the proof does not hold / journal damaged, 125 cannot run. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/command.h"

static int prove_main(int argc, char **argv) {
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          {"check", required_argument, NULL, 'c'},
                                          {"key", required_argument, NULL, 'k'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *directory = NULL, *check = NULL, *key = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        directory = optarg;
        break;
      case 'c':
        check = optarg;
        break;
      case 'k':
        key = optarg;
        break;
      case 'h':
        printf(
            "usage: dome audit prove SEQ [DIR] [--journal DIR]\n       dome audit prove --check FILE [--key "
            "PUBKEY]\n");
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  dome_error err = {0};
  if (check) {
    json_error_t jerr;
    json_t *proof = json_load_file(check, 0, &jerr);
    if (!proof) {
      fprintf(stderr, "dome audit prove: %s:%d:%d: %s\n", check, jerr.line, jerr.column, jerr.text);
      return DOME_EXIT_FAILURE;
    }
    int r = journal_proof_check(proof, key, &err);
    json_decref(proof);
    if (r < 0) {
      fprintf(stderr, "dome audit prove: %s: %s\n", check, err.message);
      return 1;
    }
    printf("ok: the event is included in the tree signed by the checkpoint%s\n",
           key ? "" : " (signature not checked: pass --key)");
    return 0;
  }
  if (optind >= argc) {
    fprintf(stderr, "dome audit prove: missing SEQ\n");
    return DOME_EXIT_FAILURE;
  }
  char *end;
  unsigned long long seq = strtoull(argv[optind], &end, 10);
  if (!*argv[optind] || *end || seq == 0) {
    fprintf(stderr, "dome audit prove: SEQ: `%s` is not a seq (1, 2, ...)\n", argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  optind++;
  if (optind < argc) directory = argv[optind++];
  if (!directory) directory = JOURNAL_DEFAULT_DIRECTORY;
  json_t *proof;
  int r = journal_prove(directory, seq, &proof, &err);
  if (r < 0) {
    fprintf(stderr, "dome audit prove: %s: %s\n", directory, err.message);
    return r == -EBADMSG ? 1 : DOME_EXIT_FAILURE;
  }
  json_dumpf(proof, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
  putchar('\n');
  json_decref(proof);
  return 0;
}
DOME_COMMAND(audit_prove, "audit prove", "print or check an inclusion proof of one event", prove_main);
