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

/* Handle one option shared by the subcommands. Returns 1 when handled, 0 when not a shared option. */
int cedar_cli_option(cedar_cli *cli, int opt, const char *arg);

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

#endif
