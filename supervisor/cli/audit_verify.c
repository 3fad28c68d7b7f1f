/* dome audit verify [DIR] [--journal DIR] [--key PUBKEY] [--json]
 * Checks frames, seq continuity, Merkle roots and checkpoint signatures (docs/journal-format.md §6).
 * Exit: 0 intact, 1 damaged or tampered (first bad seq and reason on stderr), 125 cannot run. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/audit_fleet.h"
#include "supervisor/cli/command.h"

static int verify_main(int argc, char **argv) {
  if (cli_fleet_requested(argc, argv)) return cli_audit_fleet("verify", argc, argv);
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          {"key", required_argument, NULL, 'k'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *directory = NULL, *key = NULL;
  int json = 0, c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        directory = optarg;
        break;
      case 'k':
        key = optarg;
        break;
      case 'J':
        json = 1;
        break;
      case 'h':
        printf(
            "usage: dome audit verify [DIR] [--journal DIR] [--key PUBKEY] [--json]\n"
            "       dome audit verify --fleet [--fleet-url URL] [--fleet-name NAME] [--json]\n"
            "  checks every frame, seq continuity, every leaf against the Merkle roots and every checkpoint\n"
            "  signature; DIR defaults to " JOURNAL_DEFAULT_DIRECTORY
            ", PUBKEY to DIR/signing.pub\n"
            "  --fleet: each node's chain in the fleet's audit stream against its signed checkpoints (the "
            "key\n"
            "  it registered), gaps and foreign messages per node; the URL from --fleet-url or "
            "DOME_FLEET_URL\n");
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) directory = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "dome audit verify: unexpected argument `%s`\n", argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  if (!directory) directory = JOURNAL_DEFAULT_DIRECTORY;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  journal_verify_result result;
  dome_error err = {0};
  int r = journal_verify(directory, key, &result, &err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (r < 0 && result.bad_seq == 0) {
    fprintf(stderr, "dome audit verify: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  if (json) {
    printf(
        "{\"ok\":%s,\"events\":%llu,\"first_seq\":%llu,\"last_seq\":%llu,\"checkpoints\":%llu,"
        "\"signed_tree_size\":%llu,\"segments\":%llu,\"json_bytes\":%llu,\"compressed_bytes\":%llu,"
        "\"tail_unterminated\":%s,\"bad_seq\":%llu,\"seconds\":%.6f}\n",
        r == 0 ? "true" : "false", (unsigned long long)result.events, (unsigned long long)result.first_seq,
        (unsigned long long)result.last_seq, (unsigned long long)result.checkpoints,
        (unsigned long long)result.signed_tree_size, (unsigned long long)result.segments,
        (unsigned long long)result.json_bytes, (unsigned long long)result.compressed_bytes,
        result.tail_unterminated ? "true" : "false", (unsigned long long)result.bad_seq, seconds);
  }
  if (r < 0) {
    fprintf(stderr, "dome audit verify: %s: first bad seq %llu: %s\n", directory,
            (unsigned long long)result.bad_seq, result.reason);
    return 1;
  }
  if (!json) {
    printf(
        "ok: %llu events (seq %llu..%llu) in %llu segments, %llu checkpoints verified, signed up to seq "
        "%llu; "
        "%.1f MB of JSON in %.2f s (%.0f MB/s)\n",
        (unsigned long long)result.events, (unsigned long long)result.first_seq,
        (unsigned long long)result.last_seq, (unsigned long long)result.segments,
        (unsigned long long)result.checkpoints, (unsigned long long)result.signed_tree_size,
        (double)result.json_bytes / 1e6, seconds,
        seconds > 0 ? (double)result.json_bytes / 1e6 / seconds : 0.0);
    /* A checkpoint vouches for the events before it: when it is the last event (a clean stop), nothing is
     * left uncovered. */
    if (result.signed_tree_size < result.last_seq && result.checkpoint_seq != result.last_seq)
      printf("note: seq %llu..%llu not yet covered by a signed checkpoint\n",
             (unsigned long long)result.signed_tree_size + 1, (unsigned long long)result.last_seq);
    if (result.tail_unterminated)
      printf(
          "note: the last segment ends in an open frame (writer running, or crashed: the next open recovers "
          "it)\n");
    if (!key) printf("note: key taken from the journal directory; pass --key with a trusted copy\n");
  }
  return 0;
}
DOME_COMMAND(audit_verify, "audit verify", "check a journal's frames, Merkle roots and checkpoint signatures",
             verify_main);
