/* Shared option handling of the `dome cedar ...` subcommands (flags of the upstream `cedar` CLI).
 * Exit statuses as upstream: 0 success / allow, 1 failure, 2 deny. */
#ifndef DOME_CLI_CEDAR_CLI_H
#define DOME_CLI_CEDAR_CLI_H

#include <getopt.h>
#include <stdbool.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"

#define CEDAR_EXIT_SUCCESS 0
#define CEDAR_EXIT_FAILURE 1
#define CEDAR_EXIT_DENY 2

typedef struct cedar_cli {
  const char *policies;                      /* -p/--policies FILE ("-" or NULL: stdin) */
  const char *policy_format;                 /* --policy-format cedar|json */
  const char *template_linked;               /* -k/--template-linked FILE */
  const char *entities;                      /* --entities FILE */
  const char *schema;                        /* -s/--schema FILE */
  const char *schema_format;                 /* --schema-format cedar|json */
  const char *principal, *action, *resource; /* -l -a -r: Cedar uids */
  const char *context;                       /* -c/--context FILE */
  const char *request_json;                  /* --request-json FILE */
  bool request_validation_off;               /* --request-validation=false */
  bool verbose;
  /* loaded */
  cedar_schema *loaded_schema;
  char *uid_storage[6];
  char *context_text;
} cedar_cli;

/* getopt_long options shared by authorize/evaluate/check-parse; `extra` appended by the caller. */
enum {
  CEDAR_OPT_POLICY_FORMAT = 1000,
  CEDAR_OPT_ENTITIES,
  CEDAR_OPT_SCHEMA_FORMAT,
  CEDAR_OPT_REQUEST_JSON,
  CEDAR_OPT_REQUEST_VALIDATION,
  CEDAR_OPT_TIMING,
  CEDAR_OPT_DIRECTION,
  CEDAR_OPT_EXPRESSION,
  CEDAR_OPT_CONTEXT_UNKNOWN,
  CEDAR_OPT_RESIDUAL_FORMAT,
  CEDAR_OPT_PRINCIPAL_TYPE,
  CEDAR_OPT_RESOURCE_TYPE,
};

/* Rows of the subcommands' getopt_long tables for the shared flags (each list without a trailing comma). */
// clang-format off
#define CEDAR_CLI_POLICY_OPTIONS                                          \
  {"policies", required_argument, 0, 'p'},                                \
  {"policy-format", required_argument, 0, CEDAR_OPT_POLICY_FORMAT},       \
  {"template-linked", required_argument, 0, 'k'}
#define CEDAR_CLI_SCHEMA_OPTIONS                                          \
  {"schema", required_argument, 0, 's'},                                  \
  {"schema-format", required_argument, 0, CEDAR_OPT_SCHEMA_FORMAT}
#define CEDAR_CLI_REQUEST_OPTIONS                                         \
  {"principal", required_argument, 0, 'l'},                               \
  {"action", required_argument, 0, 'a'},                                  \
  {"resource", required_argument, 0, 'r'},                                \
  {"context", required_argument, 0, 'c'},                                 \
  {"request-json", required_argument, 0, CEDAR_OPT_REQUEST_JSON}
// clang-format on

/* Handle one option shared by the subcommands. Returns 1 when handled, 0 when not a shared option. */
int cedar_cli_option(cedar_cli *cli, int opt, const char *arg);

/* A subcommand's own options: returns 1 when it took `opt` (with its argument `arg`, or NULL), 0 when `opt`
 * is not one of its own, -1 when it refused `arg` after printing why (cedar_cli_fail). */
typedef int cedar_cli_extra_option(void *state, int opt, const char *arg);

/* Read argv with getopt_long (`short_options`, `options`, restarting at optind 1): -h/--help prints `usage`
 * on stdout; a shared flag fills `cli` (cedar_cli_option); any other option goes to `extra` (NULL: none) with
 * `state`. Returns true when the subcommand goes on (optind indexes the first operand); false when it must
 * return *status at once: 0 after help, CEDAR_EXIT_FAILURE after an unknown option (usage on stderr) or one
 * `extra` refused. */
bool cedar_cli_parse_options(cedar_cli *cli, int argc, char **argv, const char *short_options,
                             const struct option *options, const char *usage, cedar_cli_extra_option *extra,
                             void *state, int *status);

/* Print the policies whose evaluation errored, after a blank line, one
 * "error while evaluating policy `ID`: MESSAGE" line each, on stdout (as upstream); nothing when count is 0.
 */
void cedar_cli_print_policy_errors(const cedar_policy_error *errors, size_t count);

/* Print "dome cedar X: message" on stderr. Returns CEDAR_EXIT_FAILURE. */
int cedar_cli_fail(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));
int cedar_cli_fail_diag(const char *command, const cedar_diagnostic *diag);

int cedar_cli_load_policies(cedar_cli *cli, const char *command, cedar_policy_set **out);
int cedar_cli_load_schema(cedar_cli *cli, const char *command);
int cedar_cli_load_entities(cedar_cli *cli, const char *command, cedar_entities **out);
/* Build the request from -l/-a/-r/-c or --request-json. Missing uids are an error when `required`. */
int cedar_cli_load_request(cedar_cli *cli, const char *command, bool required, cedar_request *request,
                           cedar_context **context);
void cedar_cli_release(cedar_cli *cli);

/* What an authorization loads: the policies, the entities and the request with its context (all owned). */
typedef struct cedar_cli_inputs {
  cedar_policy_set *set;
  cedar_entities *entities;
  cedar_context *context;
  cedar_request request;
} cedar_cli_inputs;

/* Load the schema (into cli), the policies, the entities and the request (cedar_cli_load_request with
 * `required`), in that order into the zeroed `inputs`; the first failure stops after printing its error.
 * Returns 0 or CEDAR_EXIT_FAILURE; `inputs` is released with cedar_cli_inputs_release either way. */
int cedar_cli_load_inputs(cedar_cli *cli, const char *command, bool required, cedar_cli_inputs *inputs);
void cedar_cli_inputs_release(cedar_cli_inputs *inputs);

#endif
