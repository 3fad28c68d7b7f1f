/* dome tool add|list|remove — the tool registry (backends, field classification, secret env), via domed. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/control/control.h"
#include "supervisor/gateway/gateway.h"

static char *read_small_file(const char *path, const char *flag) {
  FILE *file = fopen(path, "re");
  if (file == NULL) {
    fprintf(stderr, "dome: %s `%s`: %s\n", flag, path, strerror(errno));
    return NULL;
  }
  char *text = NULL;
  size_t size = 0;
  FILE *memory = open_memstream(&text, &size);
  char buffer[8192];
  size_t n, total = 0;
  while ((n = fread(buffer, 1, sizeof buffer, file)) > 0) {
    total += n;
    if (total > CONTROL_MAX_REQUEST / 2) {
      fclose(file);
      fclose(memory);
      free(text);
      fprintf(stderr, "dome: %s `%s`: larger than %u bytes\n", flag, path, CONTROL_MAX_REQUEST / 2);
      return NULL;
    }
    fwrite(buffer, 1, n, memory);
  }
  fclose(file);
  fclose(memory);
  return text;
}

static int add_main(int argc, char **argv) {
  static const struct option options[] = {
      {"name", required_argument, NULL, 'n'},
      {"url", required_argument, NULL, 'u'},
      {"protocol", required_argument, NULL, 'p'},
      {"field-classification", required_argument, NULL, 'f'},
      {"gateway", required_argument, NULL, 'g'},
      {"env-file", required_argument, NULL, 'e'},
      {"auth-header-file", required_argument, NULL, 'a'},
      {"ca-file", required_argument, NULL, 'C'},
      {"capability", required_argument, NULL, 'c'},
      {"control-socket", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *name = NULL, *url = NULL, *protocol = "streamable-http", *classification = NULL,
             *gateway = "Default", *env_file = NULL, *capability = NULL, *socket = NULL,
             *auth_header_file = NULL, *ca_file = NULL;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'n':
        name = optarg;
        break;
      case 'u':
        url = optarg;
        break;
      case 'p':
        protocol = optarg;
        break;
      case 'f':
        classification = optarg;
        break;
      case 'g':
        gateway = optarg;
        break;
      case 'e':
        env_file = optarg;
        break;
      case 'c':
        capability = optarg;
        break;
      case 'a':
        auth_header_file = optarg;
        break;
      case 'C':
        ca_file = optarg;
        break;
      case 's':
        socket = optarg;
        break;
      case 'h':
        printf(
            "usage: dome tool add --name N --url URL --protocol streamable-http\n"
            "         [--field-classification field=CLASS,...] [--gateway G] [--env-file FILE] [--capability "
            "C]\n"
            "The tool named code-sandbox is dome's built-in sandbox; other names are external backends.\n"
            "--env-file: KEY=VALUE lines injected into every execution, never shown again, always "
            "redacted.\n"
            "--auth-header-file FILE: one `Name: value` line sent with every request to the backend, never\n"
            "shown again, redacted from its answers. --ca-file FILE: PEM CA of an https backend.\n");
        return 0;
      default:
        fprintf(stderr, "dome tool add: unknown or incomplete option `%s`\n", argv[optind - 1]);
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "dome tool add: unexpected argument `%s`\n", argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  if (name == NULL || url == NULL) {
    fprintf(stderr, "dome tool add: --name and --url are required\n");
    return DOME_EXIT_FAILURE;
  }
  dome_error err = {0};
  json_t *fields = NULL;
  if (control_parse_field_classification(classification ? classification : "", &fields, &err) < 0) {
    fprintf(stderr, "dome tool add: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s,s:s,s:s,s:s,s:o}", "name", name, "url", url, "protocol", protocol, "gateway",
                           gateway, "field_classification", fields);
  if (capability) json_object_set_new(args, "capability", json_string(capability));
  if (ca_file) {
    char *absolute = realpath(ca_file, NULL);
    if (absolute == NULL) {
      fprintf(stderr, "dome tool add: --ca-file `%s`: %s\n", ca_file, strerror(errno));
      json_decref(args);
      return DOME_EXIT_FAILURE;
    }
    json_object_set_new(args, "ca_file", json_string(absolute));
    free(absolute);
  }
  if (auth_header_file) {
    char *text = read_small_file(auth_header_file, "--auth-header-file");
    if (text == NULL || gateway_auth_header_check(text, &err) < 0) {
      if (text) fprintf(stderr, "dome tool add: `%s`: %s\n", auth_header_file, err.message);
      free(text);
      json_decref(args);
      return DOME_EXIT_FAILURE;
    }
    json_object_set_new(args, "auth_header", json_string(text));
    sodium_memzero(text, strlen(text));
    free(text);
  }
  if (env_file) {
    char *text = read_small_file(env_file, "--env-file");
    if (text == NULL) {
      json_decref(args);
      return DOME_EXIT_FAILURE;
    }
    json_t *parsed = NULL;
    if (control_parse_env_file(text, &parsed, &err) < 0) {
      fprintf(stderr, "dome tool add: --env-file `%s`: %s\n", env_file, err.message);
      free(text);
      json_decref(args);
      return DOME_EXIT_FAILURE;
    }
    json_decref(parsed);
    json_object_set_new(args, "env_file", json_string(text));
    free(text);
  }
  json_t *result = NULL;
  int rc = control_call(control_socket_path(socket), "tools.add", args, &result, &err);
  json_decref(args);
  if (rc < 0) {
    fprintf(stderr, "dome tool add: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  printf("Added tool %s (gateway %s%s)\n", name, gateway,
         json_is_true(json_object_get(result, "builtin")) ? ", built-in sandbox" : "");
  if (strcmp(name, "code-sandbox") != 0)
    printf("Its tools' definitions are pinned at the first discovery (dome tool approve %s to review)\n",
           name);
  json_decref(result);
  return 0;
}
DOME_COMMAND(tool_add, "tool add", "register a tool backend with its field classification", add_main);

static int list_main(int argc, char **argv) {
  int status;
  json_t *result = cli_control_list(argc, argv, "tools.list", &status);
  if (result == NULL) return status;
  printf("%-20s %-10s %-36s %s\n", "NAME", "GATEWAY", "URL", "CLASSIFICATION");
  size_t i;
  json_t *tool;
  json_array_foreach(result, i, tool) {
    printf("%-20s %-10s %-36s ", json_string_value(json_object_get(tool, "name")),
           json_string_value(json_object_get(tool, "gateway")),
           json_string_value(json_object_get(tool, "url")));
    const char *field;
    json_t *class_;
    int n = 0;
    json_object_foreach(json_object_get(tool, "field_classification"), field, class_)
        printf("%s%s=%s", n++ ? "," : "", field, json_string_value(class_));
    printf("\n");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(tool_list, "tool list", "list registered tools (secret values are never shown)", list_main);

static int remove_main(int argc, char **argv) {
  const char *socket = NULL, *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
      name = argv[++i];
    else if (argv[i][0] != '-' && name == NULL)
      name = argv[i];
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome tool remove [--control-socket PATH] --name NAME\n"
          "Removes a registered tool (its classification, secret environment and credentials).\n");
      return 0;
    } else {
      fprintf(stderr, "dome tool remove: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (name == NULL) {
    fprintf(stderr, "dome tool remove: --name is required\n");
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s}", "name", name), *result = NULL;
  if (cli_control_call("tool remove", socket, "tools.remove", args, &result) < 0) return DOME_EXIT_FAILURE;
  json_decref(result);
  printf("Removed tool %s\n", name);
  return 0;
}
DOME_COMMAND(tool_remove, "tool remove", "remove a registered tool", remove_main);
