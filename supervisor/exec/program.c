/* The program of an execute_code arguments object (exec.h): one reading of its members for every adapter
 * of the pipeline (domed's execute_code, replay's re-run of a recorded exec.start). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "supervisor/exec/exec.h"

int exec_program_from_arguments(const json_t *arguments, struct exec_program *program,
                                struct jail_input_file **files, dome_error *err) {
  *files = NULL;
  const char *language = json_string_value(json_object_get(arguments, "language"));
  json_t *code = json_object_get(arguments, "code");
  if (language == NULL) return dome_error_set(err, EINVAL, "`language`: a string is required");
  if (!json_is_string(code)) return dome_error_set(err, EINVAL, "`code`: a string is required");
  json_t *file_object = json_object_get(arguments, "files");
  *files = calloc(json_object_size(file_object) + 1, sizeof **files);
  if (*files == NULL) return dome_error_set(err, ENOMEM, "program: out of memory");
  size_t count = 0;
  const char *path;
  json_t *content;
  json_object_foreach(file_object, path, content)(*files)[count++] = (struct jail_input_file){
      .path = path, .data = json_string_value(content), .length = json_string_length(content)};
  json_t *stdin_value = json_object_get(arguments, "stdin");
  program->language = language;
  program->code = json_string_value(code);
  program->code_length = json_string_length(code);
  program->has_stdin = json_is_string(stdin_value);
  program->stdin_data = json_string_value(stdin_value);
  program->stdin_length = json_string_length(stdin_value);
  program->stdin_fd = -1;
  program->files = *files;
  program->file_count = count;
  return 0;
}
