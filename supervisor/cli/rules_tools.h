/* The tool registry that types `context.input` for `dome rules validate` and `dome rules schema`: a saved
 * copy (--tools FILE) or the running domed's (control command tools.definitions). */
#ifndef DOME_CLI_RULES_TOOLS_H
#define DOME_CLI_RULES_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The tool definitions (MCP Tool objects with name and inputSchema): from `tools_file` when not NULL (a
 * tools/list result {"tools": [...]} or an array of Tool objects), else from domed at `socket` (NULL:
 * the default). Returns the array (new reference) and writes where it came from into source ("FILE",
 * "domed"), or NULL with a one-line reason in error (an unreadable or malformed FILE: its line:column;
 * domed not running). */
json_t *cli_rules_tools_load(const char *tools_file, const char *socket, char *source, size_t source_size,
                             char *error, size_t error_size);

/* The input types of `tools` (name -> Cedar type, policy/tool_input/tool_input.h); each part left out
 * appends a warning to `warnings`. A tool without a name or an object inputSchema is skipped with a
 * warning. New reference. */
json_t *cli_rules_tool_types(json_t *tools, json_t *warnings);

/* The Dome schema text typing context.input from `tools_file` (when not NULL) or domed's registry
 * (malloc'd), or NULL: a --tools FILE that cannot be read (printed as "dome <command>: ..."), or no
 * registry at all (domed not running: the shipped schema applies; a note is printed when `note`). */
char *cli_rules_typed_schema_text(const char *command, const char *tools_file, const char *socket, bool note,
                                  bool *failed);

/* Print `warnings` to stderr as "<command>: warning: tool `T`: PATH: MESSAGE", one a line. */
void cli_rules_tools_print_warnings(const char *command, json_t *warnings);

#endif
