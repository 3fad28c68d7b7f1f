/* Typed tool arguments (policy/tool_input): the mapping of inputSchemas to Cedar types, typed-input rules
 * on execute_code and on a gateway tool with nested objects and arrays (validated strictly, then
 * authorized), validator errors with their positions, the JSON Schema check, and a property test: for
 * random inputSchemas and random argument objects the typed view agrees with the JSON (what is
 * representable is present and equal, and Cedar reads it so; what is not is absent and warned). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "policy/cedar.h"
#include "policy/extensions/extensions.h"
#include "policy/schema/schema.h"
#include "policy/tool_input/tool_input.h"
#include "policy/validate/validate.h"

static const char *execute_code_schema =
    "{\"type\":\"object\",\"properties\":{\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"bash\","
    "\"sh\"]},\"code\":{\"type\":\"string\"},\"stdin\":{\"type\":\"string\"},\"files\":{\"type\":\"object\","
    "\"additionalProperties\":{\"type\":\"string\"}},\"env\":{\"type\":\"object\",\"additionalProperties\":{"
    "\"type\":\"string\"}},\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400}},"
    "\"required\":[\"language\",\"code\"],\"additionalProperties\":false}";

static const char *deploy_schema =
    "{\"type\":\"object\",\"properties\":{\"service\":{\"type\":\"string\"},\"replicas\":{\"type\":"
    "\"integer\",\"minimum\":1},\"dry_run\":{\"type\":\"boolean\"},\"target\":{\"type\":\"object\","
    "\"properties\":{\"region\":{\"type\":\"string\"},\"hosts\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"string\",\"format\":\"ipv4\"}},\"window\":{\"type\":\"object\",\"properties\":{\"start\":{\"type\":"
    "\"string\",\"format\":\"date-time\"}},\"required\":[\"start\"]},\"steps\":{\"type\":\"array\","
    "\"items\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"weight\":{\"type\":"
    "\"number\"}},\"required\":[\"name\"]}}},\"required\":[\"region\"]},\"ratio\":{\"type\":\"number\"},"
    "\"mode\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}},\"required\":[\"service\","
    "\"target\"]}";

static json_t *parse(const char *text) {
  json_error_t error;
  json_t *value = json_loads(text, 0, &error);
  if (value == NULL) fail_msg("bad test JSON at %d: %s", error.position, error.text);
  return value;
}

/* name -> type for the two tools, warnings appended. */
static json_t *registry(json_t *warnings) {
  json_t *tools = json_object();
  json_t *schema = parse(execute_code_schema);
  json_object_set_new(tools, "execute_code", cedar_tool_input_type(schema, "execute_code", warnings));
  json_decref(schema);
  schema = parse(deploy_schema);
  json_object_set_new(tools, "production-deploy.deploy",
                      cedar_tool_input_type(schema, "production-deploy.deploy", warnings));
  json_decref(schema);
  return tools;
}

static cedar_schema *typed_schema(const json_t *tools) {
  char *text = cedar_tool_input_dome_schema_text(tools);
  assert_non_null(text);
  cedar_schema *schema = NULL;
  cedar_schema_error error = {0};
  int rc = cedar_schema_parse(text, strlen(text), "typed", &schema, &error);
  if (rc < 0) {
    char message[900];
    fail_msg("typed schema: %s\n%s", cedar_schema_error_format(&error, message, sizeof message), text);
  }
  free(text);
  return schema;
}

static bool has_warning(json_t *warnings, const char *path_prefix) {
  size_t i;
  json_t *warning;
  json_array_foreach(warnings, i, warning) {
    const char *path = json_string_value(json_object_get(warning, "path"));
    if (strncmp(path, path_prefix, strlen(path_prefix)) == 0) return true;
  }
  return false;
}

static void test_mapping(void **state) {
  (void)state;
  json_t *warnings = json_array();
  json_t *tools = registry(warnings);
  char *text = cedar_tool_input_fragment_text(tools);
  assert_non_null(text);
  assert_non_null(strstr(text,
                         "    execute_code?: {\n      code: String,\n      env?: Set<String>,\n"
                         "      files?: Set<String>,\n      language: String,\n      stdin?: String,\n"
                         "      timeout_s?: Long,\n    },\n"));
  assert_non_null(
      strstr(text,
             "    \"production-deploy.deploy\"?: {\n      dry_run?: Bool,\n      replicas?: Long,\n"
             "      service: String,\n      target: {\n        hosts?: Set<ipaddr>,\n"
             "        region: String,\n        steps?: Set<{\n          name: String,\n"
             "        }>,\n        window?: {\n          start: datetime,\n        },\n"
             "      },\n    },\n"));
  free(text);
  /* what Cedar cannot type is absent and warned with its schema path */
  assert_true(has_warning(warnings, "/properties/ratio"));
  assert_true(has_warning(warnings, "/properties/mode"));
  assert_true(has_warning(warnings, "/properties/target/properties/steps/items/properties/weight"));
  assert_true(has_warning(warnings, "/properties/files/additionalProperties"));
  assert_int_equal(json_array_size(warnings), 5);
  /* the JSON schema format fragment parses as part of a schema in that format */
  json_t *fragment = cedar_tool_input_fragment_json(tools);
  json_t *input =
      json_object_get(json_object_get(json_object_get(fragment, "Dome"), "commonTypes"), "ToolInput");
  json_t *execute = json_object_get(json_object_get(input, "attributes"), "execute_code");
  json_t *timeout = json_object_get(json_object_get(execute, "attributes"), "timeout_s");
  assert_string_equal(json_string_value(json_object_get(timeout, "type")), "Long");
  assert_true(json_is_false(json_object_get(execute, "required")));
  char *fragment_text = json_dumps(fragment, 0);
  assert_null(strstr(fragment_text, "x-dome"));
  free(fragment_text);
  json_decref(fragment);
  json_decref(tools);
  json_decref(warnings);
}

/* Authorize `rules` for a call of `tool` with `arguments` (JSON text) under the typed schema; the rules
 * are first validated strictly (any issue fails the test). */
static cedar_decision decide(const char *rules, const char *tool, const char *arguments) {
  json_t *tools = registry(NULL);
  cedar_schema *schema = typed_schema(tools);
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag = {0};
  assert_int_equal(
      cedar_policy_set_parse(rules, strlen(rules), "typed.cedar", CEDAR_PARSE_ID_ANNOTATIONS, &set, &diag),
      0);
  cedar_validation_result result;
  assert_int_equal(cedar_validate(schema, set, &result), 0);
  if (result.count) {
    char message[1200];
    fail_msg("%s", cedar_validation_issue_format(&result.issues[0], message, sizeof message));
  }
  cedar_validation_result_release(&result);
  json_t *args = parse(arguments);
  char error[300];
  json_t *view = cedar_tool_input_view(json_object_get(tools, tool), args, error, sizeof error);
  if (view == NULL) fail_msg("view: %s", error);
  json_t *context = json_pack("{s:s,s:{s:o},s:{s:i,s:s}}", "tool", tool, "input", tool, view, "risk",
                              "alerts", 0, "max_level", "none");
  char *context_text = json_dumps(context, 0);
  cedar_uid_ref action = {"Dome::Action", "mcp:call", 0};
  cedar_context *cedar_context = NULL;
  if (cedar_context_parse_json(context_text, strlen(context_text), "context", schema, &action, &cedar_context,
                               &diag) < 0)
    fail_msg("context: %s (%s)", diag.message, context_text);
  cedar_entities *entities = NULL;
  assert_int_equal(cedar_entities_empty(&entities), 0);
  cedar_request request = {
      {"Dome::Agent", "a", 0}, action, {"Dome::MCPTool", "code-sandbox", 0}, cedar_context};
  cedar_response response;
  assert_int_equal(cedar_authorize(set, entities, &request, &response), 0);
  assert_int_equal(response.error_count, 0);
  cedar_decision decision = response.decision;
  cedar_response_release(&response);
  cedar_entities_free(entities);
  cedar_context_free(cedar_context);
  free(context_text);
  json_decref(context);
  json_decref(args);
  cedar_policy_set_free(set);
  cedar_schema_free(schema);
  json_decref(tools);
  return decision;
}

static const char *execute_rules =
    "@id(\"calls\") permit (principal, action == Dome::Action::\"mcp:call\", resource);\n"
    "@id(\"no-bash\") forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has execute_code && context.input.execute_code.language == \"bash\" };\n"
    "@id(\"short\") forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has execute_code && context.input.execute_code has timeout_s &&\n"
    "       context.input.execute_code.timeout_s > 30 };\n"
    "@id(\"no-setup\") forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has execute_code && context.input.execute_code has files &&\n"
    "       context.input.execute_code.files.containsAny([\"setup.py\", \"conftest.py\"]) };\n";

static void test_execute_code_rules(void **state) {
  (void)state;
  assert_int_equal(decide(execute_rules, "execute_code", "{\"language\":\"python\",\"code\":\"1\"}"),
                   CEDAR_ALLOW);
  assert_int_equal(decide(execute_rules, "execute_code", "{\"language\":\"bash\",\"code\":\"1\"}"),
                   CEDAR_DENY);
  assert_int_equal(
      decide(execute_rules, "execute_code", "{\"language\":\"sh\",\"code\":\"1\",\"timeout_s\":30}"),
      CEDAR_ALLOW);
  assert_int_equal(
      decide(execute_rules, "execute_code", "{\"language\":\"sh\",\"code\":\"1\",\"timeout_s\":31}"),
      CEDAR_DENY);
  assert_int_equal(decide(execute_rules, "execute_code",
                          "{\"language\":\"sh\",\"code\":\"1\",\"files\":{\"a/setup.py\":\"\",\"b\":\"\"}}"),
                   CEDAR_ALLOW);
  assert_int_equal(decide(execute_rules, "execute_code",
                          "{\"language\":\"sh\",\"code\":\"1\",\"files\":{\"conftest.py\":\"x\"}}"),
                   CEDAR_DENY);
}

static const char *deploy_rules =
    "@id(\"eu-only\") permit (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has \"production-deploy.deploy\" &&\n"
    "       context.input[\"production-deploy.deploy\"].target.region like \"eu-*\" };\n"
    "@id(\"no-db-hosts\") forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has \"production-deploy.deploy\" &&\n"
    "       context.input[\"production-deploy.deploy\"].target has hosts &&\n"
    "       context.input[\"production-deploy.deploy\"].target.hosts.contains(ip(\"10.5.0.9\")) };\n"
    "@id(\"no-migrate-step\") forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has \"production-deploy.deploy\" &&\n"
    "       context.input[\"production-deploy.deploy\"].target has steps &&\n"
    "       context.input[\"production-deploy.deploy\"].target.steps.contains({name: \"migrate\"}) };\n"
    "@id(\"after-2026\") forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
    "when { context.input has \"production-deploy.deploy\" &&\n"
    "       context.input[\"production-deploy.deploy\"].target has window &&\n"
    "       context.input[\"production-deploy.deploy\"].target.window.start >= datetime(\"2027-01-01\") };\n";

static void test_gateway_tool_rules(void **state) {
  (void)state;
  const char *tool = "production-deploy.deploy";
  assert_int_equal(decide(deploy_rules, tool, "{\"service\":\"api\",\"target\":{\"region\":\"eu-west-1\"}}"),
                   CEDAR_ALLOW);
  assert_int_equal(decide(deploy_rules, tool, "{\"service\":\"api\",\"target\":{\"region\":\"us-east-1\"}}"),
                   CEDAR_DENY);
  assert_int_equal(decide(deploy_rules, tool,
                          "{\"service\":\"api\",\"target\":{\"region\":\"eu-1\",\"hosts\":[\"10.5.0.8\","
                          "\"10.5.0.9\"]}}"),
                   CEDAR_DENY);
  /* a step's untyped weight is not part of the typed record: {name: "migrate"} matches */
  assert_int_equal(
      decide(deploy_rules, tool,
             "{\"service\":\"api\",\"target\":{\"region\":\"eu-1\",\"steps\":[{\"name\":\"build\"},"
             "{\"name\":\"migrate\",\"weight\":0.5}]}}"),
      CEDAR_DENY);
  assert_int_equal(decide(deploy_rules, tool,
                          "{\"service\":\"api\",\"ratio\":0.3,\"mode\":1,\"target\":{\"region\":\"eu-1\","
                          "\"window\":{\"start\":\"2026-12-31T23:00:00+01:00\"}}}"),
                   CEDAR_ALLOW);
  assert_int_equal(decide(deploy_rules, tool,
                          "{\"service\":\"api\",\"target\":{\"region\":\"eu-1\",\"window\":{\"start\":"
                          "\"2027-01-01T00:00:00.5Z\"}}}"),
                   CEDAR_DENY);
}

/* Validate `rules` against the registry; returns the first issue (errors only). */
static cedar_validation_issue first_error(const char *rules) {
  json_t *tools = registry(NULL);
  cedar_schema *schema = typed_schema(tools);
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag = {0};
  assert_int_equal(cedar_policy_set_parse(rules, strlen(rules), "rules.cedar", 0, &set, &diag), 0);
  cedar_validation_result result;
  assert_int_equal(cedar_validate(schema, set, &result), 0);
  assert_true(result.error_count >= 1);
  cedar_validation_issue issue = {0};
  for (size_t i = 0; i < result.count; i++)
    if (!result.issues[i].is_warning) {
      issue = result.issues[i];
      break;
    }
  cedar_validation_result_release(&result);
  cedar_policy_set_free(set);
  cedar_schema_free(schema);
  json_decref(tools);
  return issue;
}

static void test_validator_errors(void **state) {
  (void)state;
  cedar_validation_issue issue = first_error(
      "forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
      "when { context.input has execute_code &&\n"
      "       context.input.execute_code.timout_s > 60 };\n");
  assert_int_equal(issue.line, 3);
  assert_int_equal(issue.column, 8);
  assert_string_equal(issue.file, "rules.cedar");
  assert_non_null(strstr(issue.message, "did you mean `timeout_s`?"));
  issue = first_error(
      "forbid (principal, action == Dome::Action::\"mcp:call\", resource)\n"
      "when { context.input has execute_code && context.input.execute_code has timeout_s &&\n"
      "  context.input.execute_code.timeout_s == \"60\" };\n");
  assert_int_equal(issue.line, 3);
  assert_int_equal(issue.column, 3);
  assert_non_null(strstr(issue.message, "compares Long with String"));
  issue = first_error(
      "permit (principal, action == Dome::Action::\"mcp:call\", resource)\n"
      "when { context.input[\"production-deploy.deploy\"].service == \"api\" };\n");
  assert_int_equal(issue.line, 2);
  assert_non_null(strstr(issue.message, "without a guard"));
  /* an attribute left out of the typed view (a number) is not readable */
  issue = first_error(
      "permit (principal, action == Dome::Action::\"mcp:call\", resource)\n"
      "when { context.input has \"production-deploy.deploy\" &&\n"
      "       context.input[\"production-deploy.deploy\"].ratio == 1 };\n");
  assert_int_equal(issue.line, 3);
  assert_non_null(strstr(issue.message, "`ratio` not found"));
}

static void test_check(void **state) {
  (void)state;
  json_t *schema = parse(execute_code_schema);
  char error[300];
  struct {
    const char *arguments;
    const char *message; /* NULL: valid */
  } cases[] = {
      {"{\"language\":\"sh\",\"code\":\"x\"}", NULL},
      {"{\"language\":\"sh\",\"code\":\"x\",\"timeout_s\":5.0}", NULL},
      {"{\"language\":\"cobol\",\"code\":\"x\"}", "`/language`: must be one of python, bash, sh (enum)"},
      {"{\"language\":\"sh\"}", "`/`: required property `code` missing"},
      {"{\"language\":\"sh\",\"code\":\"x\",\"timeout_s\":2.5}", "`/timeout_s`: expected an integer"},
      {"{\"language\":\"sh\",\"code\":\"x\",\"timeout_s\":0}", "`/timeout_s`: must be >= 1 (minimum)"},
      {"{\"language\":\"sh\",\"code\":\"x\",\"files\":{\"a\":1}}", "`/files/a`: expected a string"},
      {"{\"language\":\"sh\",\"code\":\"x\",\"extra\":1}", "`/`: unknown property `extra`"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *arguments = parse(cases[i].arguments);
    int rc = cedar_tool_input_check(schema, arguments, error, sizeof error);
    if (cases[i].message == NULL) {
      if (rc != 0) fail_msg("%s: %s", cases[i].arguments, error);
    } else {
      assert_int_equal(rc, -EINVAL);
      assert_string_equal(error, cases[i].message);
    }
    json_decref(arguments);
  }
  json_decref(schema);
  json_t *deploy = parse(deploy_schema);
  json_t *arguments = parse("{\"service\":\"a\",\"target\":{\"region\":\"r\",\"hosts\":[\"10.0.0.300\"]}}");
  assert_int_equal(cedar_tool_input_check(deploy, arguments, error, sizeof error), -EINVAL);
  assert_string_equal(error, "`/target/hosts/0`: not an IPv4 address (format ipv4)");
  json_decref(arguments);
  json_decref(deploy);
}

/* ---------------- property test ---------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static unsigned next(unsigned bound) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state % bound);
}

static json_t *random_schema(unsigned depth) {
  unsigned kind = next(depth >= 3 ? 9 : 13);
  switch (kind) {
    case 0:
      return json_pack("{s:s}", "type", "string");
    case 1:
      return json_pack("{s:s,s:[sss]}", "type", "string", "enum", "a", "b", "c\"d");
    case 2:
      return json_pack("{s:s,s:s}", "type", "string", "format", next(2) ? "ipv4" : "ipv6");
    case 3:
      return json_pack("{s:s,s:s}", "type", "string", "format", "date-time");
    case 4:
      return json_pack("{s:s}", "type", "integer");
    case 5:
      return json_pack("{s:s}", "type", "boolean");
    case 6:
      return json_pack("{s:s}", "type", "number"); /* not representable */
    case 7:
      return json_pack("{s:[ss]}", "type", "string", "integer"); /* a union: not representable */
    case 8:
      return json_pack("{s:s,s:{s:s}}", "type", "object", "additionalProperties", "type", "string");
    case 9:
    case 10: {
      json_t *properties = json_object(), *required = json_array();
      unsigned count = next(5);
      for (unsigned i = 0; i < count; i++) {
        char name[16];
        snprintf(name, sizeof name, "%sp%u", next(4) == 0 ? "x-" : "", i);
        json_object_set_new(properties, name, random_schema(depth + 1));
        if (next(2)) json_array_append_new(required, json_string(name));
      }
      return json_pack("{s:s,s:o,s:o}", "type", "object", "properties", properties, "required", required);
    }
    case 11:
      return json_pack("{s:s,s:o}", "type", "array", "items", random_schema(depth + 1));
    default:
      return json_pack("{s:s}", "type", "object"); /* free-form: not representable */
  }
}

static json_t *random_value(const json_t *schema, unsigned depth) {
  const json_t *type = json_object_get(schema, "type");
  if (json_is_array(type)) return next(2) ? json_string("u") : json_integer(next(100));
  const char *kind = json_string_value(type);
  if (strcmp(kind, "string") == 0) {
    const json_t *enumeration = json_object_get(schema, "enum");
    if (enumeration) return json_incref(json_array_get(enumeration, next(3)));
    const char *format = json_string_value(json_object_get(schema, "format"));
    char text[64];
    if (format && strcmp(format, "ipv4") == 0) {
      snprintf(text, sizeof text, "%u.%u.%u.%u", next(256), next(256), next(256), next(256));
    } else if (format && strcmp(format, "ipv6") == 0) {
      snprintf(text, sizeof text, "%x:%x::%x", next(0x10000), next(0x10000), next(0x10000));
    } else if (format) {
      static const char *const offsets[] = {"Z", "z", "+02:00", "-05:30"};
      static const char *const fractions[] = {"", ".5", ".25", ".125"};
      snprintf(text, sizeof text, "20%02u-%02u-%02uT%02u:%02u:%02u%s%s", next(100), 1 + next(12),
               1 + next(28), next(24), next(60), next(60), fractions[next(4)], offsets[next(4)]);
    } else {
      static const char *const strings[] = {"", "x", "héllo", "a\"b\\c", "line\nbreak", "\xe2\x80\xae"};
      return json_string(strings[next(6)]);
    }
    return json_string(text);
  }
  if (strcmp(kind, "integer") == 0) return json_integer((json_int_t)next(2000000) - 1000000);
  if (strcmp(kind, "boolean") == 0) return json_boolean(next(2));
  if (strcmp(kind, "number") == 0) return json_real((double)next(1000) / 7.0);
  if (strcmp(kind, "array") == 0) {
    json_t *array = json_array();
    unsigned count = next(4);
    for (unsigned i = 0; i < count; i++)
      json_array_append_new(array, random_value(json_object_get(schema, "items"), depth + 1));
    return array;
  }
  json_t *object = json_object();
  const json_t *properties = json_object_get(schema, "properties");
  if (properties == NULL) {
    unsigned count = next(3);
    for (unsigned i = 0; i < count; i++) {
      char key[16];
      snprintf(key, sizeof key, "k%u", next(10));
      json_object_set_new(object, key, json_string("v"));
    }
    return object;
  }
  const json_t *required = json_object_get(schema, "required");
  const char *name;
  json_t *property;
  json_object_foreach((json_t *)properties, name, property) {
    bool is_required = false;
    size_t i;
    json_t *entry;
    json_array_foreach(required, i, entry) is_required |= strcmp(json_string_value(entry), name) == 0;
    if (is_required || next(2)) json_object_set_new(object, name, random_value(property, depth + 1));
  }
  return object;
}

static unsigned leaves_compared;

/* The typed view `view` of `value` under `schema` (derived type `type`, NULL when left out) agrees with
 * the JSON. path: the schema path, for the warnings. */
static void agree(const json_t *schema, const json_t *type, const json_t *value, const json_t *view,
                  json_t *warnings, const char *path) {
  if (type == NULL) {
    if (!has_warning(warnings, path)) fail_msg("%s: left out without a warning", path);
    return;
  }
  assert_non_null(view);
  const char *kind = json_string_value(json_object_get(type, "type"));
  if (strcmp(kind, "String") == 0 || strcmp(kind, "Long") == 0 || strcmp(kind, "Boolean") == 0) {
    if (!json_equal((json_t *)value, (json_t *)view)) fail_msg("%s: view differs from the JSON", path);
    leaves_compared++;
  } else if (strcmp(kind, "Extension") == 0) {
    const json_t *extension = json_object_get(view, "__extn");
    const char *fn = json_string_value(json_object_get(extension, "fn"));
    const char *arg = json_string_value(json_object_get(extension, "arg"));
    if (strcmp(json_string_value(json_object_get(type, "name")), "ipaddr") == 0) {
      assert_string_equal(fn, "ip");
      assert_string_equal(arg, json_string_value(value));
    } else {
      assert_string_equal(fn, "datetime");
      /* the same instant: the date and time of day as written, the offset as Cedar writes it */
      assert_memory_equal(arg, json_string_value(value), 10);
      assert_memory_equal(arg + 11, json_string_value(value) + 11, 8);
      int64_t ms;
      assert_int_equal(cedar_datetime_parse(arg, strlen(arg), &ms), 0);
    }
    leaves_compared++;
  } else if (strcmp(kind, "Set") == 0) {
    if (json_object_get(schema, "additionalProperties")) { /* a map: its keys */
      assert_int_equal(json_array_size(view), json_object_size(value));
      size_t i;
      json_t *key;
      json_array_foreach(view, i, key) assert_non_null(json_object_get(value, json_string_value(key)));
      return;
    }
    assert_int_equal(json_array_size(view), json_array_size(value));
    char inner[1024];
    snprintf(inner, sizeof inner, "%s/items", path);
    for (size_t i = 0; i < json_array_size(value); i++)
      agree(json_object_get(schema, "items"), json_object_get(type, "element"), json_array_get(value, i),
            json_array_get(view, i), warnings, inner);
  } else {
    const json_t *properties = json_object_get(schema, "properties");
    const char *name;
    json_t *property;
    json_object_foreach((json_t *)properties, name, property) {
      char inner[1024];
      snprintf(inner, sizeof inner, "%s/properties/%s", path, name);
      const json_t *attribute = json_object_get(json_object_get(type, "attributes"), name);
      const json_t *member = json_object_get(value, name);
      const json_t *typed = json_object_get(view, name);
      if (attribute == NULL) {
        assert_null(typed);
        if (!has_warning(warnings, inner)) fail_msg("%s: left out without a warning", inner);
      } else if (member == NULL) {
        assert_null(typed);
      } else {
        agree(property, attribute, member, typed, warnings, inner);
      }
    }
    assert_true(json_object_size(view) <= json_object_size(value));
  }
}

/* A string, Long or Bool leaf of `view` reachable through records only: its Cedar access path. */
static bool pick_leaf(const json_t *type, const json_t *view, char *access, size_t size, json_t **leaf) {
  const char *kind = json_string_value(json_object_get(type, "type"));
  if (strcmp(kind, "String") == 0 || strcmp(kind, "Long") == 0 || strcmp(kind, "Boolean") == 0) {
    *leaf = (json_t *)view;
    return true;
  }
  if (strcmp(kind, "Record") != 0) return false;
  const char *name;
  json_t *attribute;
  json_object_foreach(json_object_get(type, "attributes"), name, attribute) {
    const json_t *member = json_object_get(view, name);
    if (member == NULL) continue;
    size_t length = strlen(access);
    snprintf(access + length, size - length, "[\"%s\"]", name);
    if (pick_leaf(attribute, member, access, size, leaf)) return true;
    access[length] = '\0';
  }
  return false;
}

static void test_property(void **state) {
  (void)state;
  const unsigned cases = 3000;
  unsigned evaluated = 0, warned = 0;
  leaves_compared = 0;
  for (unsigned n = 0; n < cases; n++) {
    json_t *properties = json_object(), *required = json_array();
    unsigned count = 1 + next(5);
    for (unsigned i = 0; i < count; i++) {
      char name[16];
      snprintf(name, sizeof name, "a%u", i);
      json_object_set_new(properties, name, random_schema(1));
      if (next(2)) json_array_append_new(required, json_string(name));
    }
    json_t *schema =
        json_pack("{s:s,s:o,s:o}", "type", "object", "properties", properties, "required", required);
    json_t *arguments = random_value(schema, 0);
    char error[400];
    if (cedar_tool_input_check(schema, arguments, error, sizeof error) != 0)
      fail_msg("generated arguments fail their schema: %s", error);
    json_t *warnings = json_array();
    json_t *type = cedar_tool_input_type(schema, "t", warnings);
    assert_non_null(type);
    warned += json_array_size(warnings) > 0;
    json_t *view = cedar_tool_input_view(type, arguments, error, sizeof error);
    if (view == NULL) fail_msg("case %u: no view: %s", n, error);
    agree(schema, type, arguments, view, warnings, "");
    /* Cedar reads the view under the typed schema, and a leaf compares equal to its JSON value */
    json_t *tools = json_pack("{s:O}", "t", type);
    cedar_schema *cedar_schema = typed_schema(tools);
    json_t *context = json_pack("{s:s,s:{s:O},s:{s:i,s:s}}", "tool", "t", "input", "t", view, "risk",
                                "alerts", 0, "max_level", "none");
    char *context_text = json_dumps(context, 0);
    cedar_uid_ref action = {"Dome::Action", "mcp:call", 0};
    cedar_context *cedar_context = NULL;
    cedar_diagnostic diag = {0};
    if (cedar_context_parse_json(context_text, strlen(context_text), "context", cedar_schema, &action,
                                 &cedar_context, &diag) < 0)
      fail_msg("case %u: context refused: %s (%s)", n, diag.message, context_text);
    char access[512] = "context.input[\"t\"]";
    json_t *leaf = NULL;
    if (pick_leaf(type, view, access, sizeof access, &leaf)) {
      char *literal = json_dumps(leaf, JSON_ENCODE_ANY);
      char policy[2048];
      snprintf(policy, sizeof policy, "permit (principal, action, resource) when { %s == %s };", access,
               literal);
      free(literal);
      cedar_policy_set *set = NULL;
      if (cedar_policy_set_parse(policy, strlen(policy), "p", 0, &set, &diag) < 0)
        fail_msg("case %u: %s: %s", n, policy, diag.message);
      cedar_request request = {{"Dome::Agent", "a", 0}, action, {"Dome::MCPTool", "r", 0}, cedar_context};
      cedar_response response;
      assert_int_equal(cedar_authorize(set, NULL, &request, &response), 0);
      if (response.decision != CEDAR_ALLOW) fail_msg("case %u: %s denied on %s", n, policy, context_text);
      cedar_response_release(&response);
      cedar_policy_set_free(set);
      evaluated++;
    }
    cedar_context_free(cedar_context);
    cedar_schema_free(cedar_schema);
    free(context_text);
    json_decref(context);
    json_decref(tools);
    json_decref(view);
    json_decref(type);
    json_decref(warnings);
    json_decref(arguments);
    json_decref(schema);
  }
  printf("property: %u cases, %u leaves compared, %u leaves read by Cedar, %u schemas with warnings\n", cases,
         leaves_compared, evaluated, warned);
  assert_true(evaluated > cases / 2);
  assert_true(warned > cases / 10);
}

/* Arguments the inputSchema accepts that Cedar cannot represent are refused by the view, naming them. */
static void test_unrepresentable_values(void **state) {
  (void)state;
  json_t *schema = parse(
      "{\"type\":\"object\",\"properties\":{\"at\":{\"type\":\"string\",\"format\":"
      "\"date-time\"},\"ip\":{\"type\":\"string\",\"format\":\"ipv6\"}}}");
  json_t *type = cedar_tool_input_type(schema, "t", NULL);
  char error[300];
  json_t *arguments = parse("{\"at\":\"2026-01-01T00:00:00.1234Z\"}");
  assert_int_equal(cedar_tool_input_check(schema, arguments, error, sizeof error), 0);
  assert_null(cedar_tool_input_view(type, arguments, error, sizeof error));
  assert_non_null(strstr(error, "`/at`: "));
  json_decref(arguments);
  arguments = parse("{\"ip\":\"::ffff:1.2.3.4\"}");
  assert_int_equal(cedar_tool_input_check(schema, arguments, error, sizeof error), 0);
  assert_null(cedar_tool_input_view(type, arguments, error, sizeof error));
  assert_non_null(strstr(error, "`/ip`: "));
  json_decref(arguments);
  json_decref(type);
  json_decref(schema);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mapping),
      cmocka_unit_test(test_execute_code_rules),
      cmocka_unit_test(test_gateway_tool_rules),
      cmocka_unit_test(test_validator_errors),
      cmocka_unit_test(test_check),
      cmocka_unit_test(test_property),
      cmocka_unit_test(test_unrepresentable_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
