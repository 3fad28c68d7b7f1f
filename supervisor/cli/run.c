/* dome run [options] -- PROGRAM [ARG...]: run a program in a fresh jail (supervisor/jail). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/pass_through.h"
#include "supervisor/common/utf8.h"
#include "supervisor/cli/run_journal.h"
#include "supervisor/cli/run_rules.h"
#include "supervisor/common/units.h"
#include "supervisor/jail/jail.h"

#define MAX_ENV 256

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: dome run [options] -- PROGRAM [ARG...]\n"
      "\n"
      "Run PROGRAM in a fresh jail (namespaces, cgroup leaf, seccomp, Landlock, no capabilities) and\n"
      "remove the jail afterwards. Without --json, output passes through and dome exits with the\n"
      "program's status (128+N for signal N, 124 on timeout); 125 is dome's own failure. A program ended\n"
      "by a limit gets a line on stderr naming it (`dome: killed: timeout (limit 10 s)`).\n"
      "\n"
      "options (sizes in bytes or with K/M/G; times in seconds, decimals allowed):\n"
      "  --image NAME           image (default host-ro; others from $DOME_IMAGE_STORE or %s)\n"
      "  --memory SIZE          memory limit (default 256M)\n"
      "  --cpus N               CPU quota in CPUs (default 1)\n"
      "  --pids N               process limit (default 64)\n"
      "  --timeout SEC          wall-clock limit (default 10)\n"
      "  --workspace DIR        host directory copied in as /workspace (default: empty)\n"
      "  --copy-out             copy files created or modified in /workspace back to DIR (through\n"
      "                         the directory opened before the run, never following symlinks):\n"
      "                         files 0644, directories 0755 (never executable), at most the\n"
      "                         workspace size and 4096 entries; never .git/.hg/.svn paths, git\n"
      "                         repository layouts or names that are not UTF-8 (see copy_out_errors)\n"
      "  --workspace-size SIZE  size of /workspace and /tmp (default 64M)\n"
      "  --output-limit SIZE    bytes kept per stream (default 1M)\n"
      "  --env KEY=VALUE        environment of the program (repeatable); nothing of the caller's is passed,\n"
      "                         only PATH, HOME=/workspace and LANG=C.UTF-8 unless given here; the\n"
      "                         program starts in /workspace\n"
      "  --stdin                forward dome's stdin to the program (default: /dev/null)\n"
      "  --json                 print one JSON object with the result instead\n"
      "  --rules FILE           enforce Cedar fs/net rules (with the shipped baseline) compiled for\n"
      "                         --agent NAME, in the kernel; refusals are listed in `denials`\n"
      "  --agent NAME           the agent (Dome::Agent::\"NAME\") the rules are compiled for and the\n"
      "                         journal names (default: operator:UID)\n"
      "  --entities FILE        the agent's entity data (JSON entities; default: none)\n"
      "  --allow-degraded       run even when Landlock cannot express a file rule (a forbid inside a\n"
      "                         permitted subtree, on hosts without BPF-LSM); recorded in the result\n"
      "  --journal DIR          record the execution (exec.start ... exec.end, as domed records a call)\n"
      "                         in the journal DIR; default: through domed when it runs, else\n"
      "                         $DOME_JOURNAL_DIR or /var/lib/dome/journal\n"
      "  --classification FIELD=CLASS,...\n"
      "                         the guards' classification of the recorded output (stdout, stderr;\n"
      "                         docs/guards.md; default: the guards' own)\n"
      "  --no-journal           record nothing (scratch use; `\"journal\": null` in --json)\n",
      JAIL_DEFAULT_IMAGE_STORE);
}

static int bad(const char *flag, const char *message) {
  fprintf(stderr, "dome run: %s: %s\n", flag, message);
  return DOME_EXIT_FAILURE;
}

static json_t *text_value(const char *data, size_t length) {
  size_t clean_length = 0;
  char *clean = dome_utf8_sanitize(data ? data : "", data ? length : 0, false, &clean_length);
  json_t *value = clean ? json_stringn(clean, clean_length) : json_string("");
  free(clean);
  return value;
}

/* One line on stderr: `prefix`, then `text`, which may carry names from the jail or the command line, so
 * invalid UTF-8 is replaced and control characters (a newline, a terminal escape sequence) are shown as
 * \xNN: one line, whatever the names. */
static void print_escaped(const char *prefix, const char *text) {
  char *clean = dome_utf8_sanitize(text, strlen(text), true, NULL);
  fputs(prefix, stderr);
  for (const unsigned char *c = (const unsigned char *)(clean ? clean : "?"); *c; c++)
    if (*c < 0x20 || *c == 0x7f)
      fprintf(stderr, "\\x%02x", *c);
    else
      fputc(*c, stderr);
  fputc('\n', stderr);
  free(clean);
}

/* A POSIX shell variable name (XBD 3.216): letters, digits, underscores, not starting with a digit. The
 * program's environment is a list of NAME=value lines: a newline or `=` in a name would forge others. */
static bool variable_name(const char *name, size_t length) {
  if (length == 0 || (name[0] >= '0' && name[0] <= '9')) return false;
  for (size_t i = 0; i < length; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

/* The pass-through writer of this run (one `dome run` per process). */
static struct pass_through *output_writer;

static void pass_through(void *context, int stream, const char *data, size_t length) {
  (void)context;
  pass_through_queue(output_writer, stream, data, length);
}

static int print_json(const struct jail_result *r, json_t *extra) {
  json_t *paths = json_array();
  for (size_t i = 0; i < r->output_path_count; i++)
    json_array_append_new(paths, text_value(r->output_paths[i], strlen(r->output_paths[i])));
  json_t *o = json_object();
  json_object_set_new(o, "exit_code", json_integer(r->exit_code));
  json_object_set_new(o, "signal", json_integer(r->signal));
  json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
  json_object_set_new(o, "oom_killed", json_boolean(r->oom_killed));
  json_object_set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms));
  json_object_set_new(o, "cpu_ms", json_integer((json_int_t)r->cpu_ms));
  json_object_set_new(o, "peak_memory_bytes", json_integer((json_int_t)r->peak_memory_bytes));
  json_object_set_new(o, "stdout", text_value(r->stdout_data, r->stdout_length));
  /* the line naming the limit that ended the program, as domed's result has it */
  char notice[512];
  size_t notice_length = jail_limit_notice(r, notice, sizeof notice);
  if (notice_length >= sizeof notice) notice_length = sizeof notice - 1;
  json_t *stderr_text = text_value(r->stderr_data, r->stderr_length);
  if (notice_length) {
    char *joined = NULL;
    if (asprintf(&joined, "%s%s%s", json_string_value(stderr_text),
                 r->stderr_length && r->stderr_data[r->stderr_length - 1] != '\n' ? "\n" : "", notice) >= 0) {
      json_decref(stderr_text);
      stderr_text = json_string(joined);
      free(joined);
    }
  }
  json_object_set_new(o, "stderr", stderr_text);
  json_object_set_new(o, "truncated", json_boolean(r->truncated));
  json_object_set_new(o, "output_paths", paths);
  if (r->copy_out_error_count > 0) {
    json_t *errors = json_array();
    for (size_t i = 0; i < r->copy_out_error_count; i++)
      json_array_append_new(errors, text_value(r->copy_out_errors[i], strlen(r->copy_out_errors[i])));
    json_object_set_new(o, "copy_out_errors", errors);
  }
  json_object_set_new(
      o, "limits",
      json_pack("{s:I,s:i,s:f,s:I,s:I,s:I}", "memory_bytes", (json_int_t)r->limits.memory_bytes, "pids",
                (int)r->limits.pids, "cpus", r->limits.cpus, "timeout_ms", (json_int_t)r->limits.timeout_ms,
                "workspace_bytes", (json_int_t)r->limits.workspace_bytes, "output_limit_bytes",
                (json_int_t)r->limits.output_limit_bytes));
  json_object_set_new(o, "peak_pids", json_integer((json_int_t)r->peak_pids));
  json_object_set_new(o, "pids_limited", json_boolean(r->pids_limited));
  json_object_set_new(o, "jail_id", json_string(r->jail_id));
  json_object_set_new(o, "enforcement", json_string(jail_enforcement_name(r->enforcement)));
  json_object_set_new(o, "landlock_abi", json_integer(r->landlock_abi));
  json_object_set_new(o, "prepared", json_boolean(r->prepared));
  json_object_update(o, extra);
  int status = json_dumpf(o, stdout, JSON_COMPACT) == 0 ? 0 : DOME_EXIT_FAILURE;
  fputc('\n', stdout);
  json_decref(o);
  return status;
}

/* DOME_RUN_PREPARED=1 (tests/run --pool-size): the jail is prepared before the program is known, as domed's
 * pool prepares its jails (for `python3 -c` with the interpreter started), then bound to it (jail_prepare,
 * jail_prepared_run), so that the escape suites run against that path too. A jail that needs its network
 * namespace at clone time (egress) runs fresh. */
static int run_prepared(void *context, const struct jail_config *config, struct jail_result *result,
                        dome_error *err) {
  (void)context;
  if (config->on_namespaces_ready) return jail_run(config, result, err);
  /* `python3 -c CODE`: the interpreter started before the code is handed over, as domed's pool does */
  struct jail_config shape = *config;
  const char *program = config->argv[0], *slash = strrchr(program, '/');
  if (strcmp(slash ? slash + 1 : program, "python3") == 0 &&
      jail_python_call_fits(program, config->env, config))
    shape.prepared_python = program;
  struct jail_prepared *prepared = NULL;
  int r = jail_prepare(&shape, &prepared, err);
  if (r < 0) {
    memset(result, 0, sizeof *result);
    result->exit_code = -1;
    return r;
  }
  return jail_prepared_run(prepared, config, result, err);
}

static int run_main(int argc, char **argv) {
  static const struct option options[] = {{"image", required_argument, NULL, 'i'},
                                          {"memory", required_argument, NULL, 'm'},
                                          {"cpus", required_argument, NULL, 'c'},
                                          {"pids", required_argument, NULL, 'p'},
                                          {"timeout", required_argument, NULL, 't'},
                                          {"workspace", required_argument, NULL, 'w'},
                                          {"copy-out", no_argument, NULL, 'o'},
                                          {"workspace-size", required_argument, NULL, 's'},
                                          {"output-limit", required_argument, NULL, 'l'},
                                          {"env", required_argument, NULL, 'e'},
                                          {"stdin", no_argument, NULL, 'I'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"rules", required_argument, NULL, 'R'},
                                          {"agent", required_argument, NULL, 'A'},
                                          {"entities", required_argument, NULL, 'E'},
                                          {"allow-degraded", no_argument, NULL, 'D'},
                                          {"journal", required_argument, NULL, 'J'},
                                          {"classification", required_argument, NULL, 'C'},
                                          {"no-journal", no_argument, NULL, 'N'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  struct jail_config config;
  jail_config_init(&config);
  char *env[MAX_ENV + 4];
  size_t env_count = 0;
  bool json = false, forward_stdin = false, no_journal = false;
  const char *journal_dir = NULL, *classification = NULL;
  struct run_rules_options rules_options = {0};
  dome_error err = {0};
  uint64_t value;
  opterr = 0;
  optind = 1;
  int option;
  /* '+': stop at the first non-option, which starts the program's argv */
  while ((option = getopt_long(argc, argv, "+", options, NULL)) != -1) {
    switch (option) {
      case 'i':
        config.image = optarg;
        break;
      case 'm':
        if (dome_parse_size(optarg, &value, &err) < 0) return bad("--memory", err.message);
        if (value == 0) return bad("--memory", "must be greater than 0");
        if (value < (4u << 20)) return bad("--memory", "below the minimum of 4M");
        config.memory_bytes = value;
        break;
      case 'c': {
        char *end;
        errno = 0;
        double cpus = strtod(optarg, &end);
        if (errno || end == optarg || *end || !isfinite(cpus) || cpus < 0.01 || cpus > 4096)
          return bad("--cpus", "expected a number of CPUs between 0.01 and 4096");
        config.cpus = cpus;
        break;
      }
      case 'p': {
        char *end;
        errno = 0;
        unsigned long pids = strtoul(optarg, &end, 10);
        if (errno || end == optarg || *end || optarg[0] == '-' || pids < 1 || pids > 1000000)
          return bad("--pids", "expected a whole number between 1 and 1000000");
        config.pids = (uint32_t)pids;
        break;
      }
      case 't':
        if (dome_parse_duration_ms(optarg, &value, &err) < 0) return bad("--timeout", err.message);
        if (value == 0) return bad("--timeout", "must be greater than 0");
        config.timeout_ms = value;
        break;
      case 'w':
        config.workspace_dir = optarg;
        break;
      case 'o':
        config.copy_out = true;
        break;
      case 's':
        if (dome_parse_size(optarg, &value, &err) < 0) return bad("--workspace-size", err.message);
        if (value < 4096) return bad("--workspace-size", "below the minimum of 4K");
        config.workspace_bytes = value;
        break;
      case 'l':
        if (dome_parse_size(optarg, &value, &err) < 0) return bad("--output-limit", err.message);
        if (value == 0) return bad("--output-limit", "must be greater than 0");
        config.output_limit = value;
        break;
      case 'e': {
        const char *equals = strchr(optarg, '=');
        if (!equals || equals == optarg) return bad("--env", "expected KEY=VALUE");
        if (!variable_name(optarg, (size_t)(equals - optarg)))
          return bad("--env",
                     "the name is not a variable name (letters, digits, _; not starting with a digit)");
        if (env_count >= MAX_ENV) return bad("--env", "too many variables");
        env[env_count++] = optarg;
        break;
      }
      case 'I':
        forward_stdin = true;
        break;
      case 'j':
        json = true;
        break;
      case 'R':
        rules_options.rules_path = optarg;
        break;
      case 'A':
        rules_options.agent = optarg;
        break;
      case 'E':
        rules_options.entities_path = optarg;
        break;
      case 'D':
        rules_options.allow_degraded = true;
        break;
      case 'J':
        journal_dir = optarg;
        break;
      case 'C':
        classification = optarg;
        break;
      case 'N':
        no_journal = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        fprintf(stderr, "dome run: unknown option `%s`\n", argv[optind - 1]);
        return DOME_EXIT_FAILURE;
    }
  }
  /* The jail is built by this process: the cgroup leaf is made in root's cgroup hierarchy and the mounts
   * and uid map of its namespaces need CAP_SYS_ADMIN in the initial user namespace. */
  if (geteuid() != 0) {
    fprintf(
        stderr,
        "dome run: needs root (running as uid %u): dome run builds the jail itself, making a cgroup leaf "
        "in root's cgroup hierarchy and namespaces with mounts and a uid map; run it as root, or send the "
        "code to domed over MCP\n",
        (unsigned)geteuid());
    return DOME_EXIT_FAILURE;
  }
  if (optind < argc && strcmp(argv[optind], "--") == 0) optind++;
  if (optind >= argc) return bad("PROGRAM", "missing (usage: dome run [options] -- PROGRAM [ARG...])");
  if (config.copy_out && !config.workspace_dir) return bad("--copy-out", "needs --workspace DIR");
  if (rules_options.rules_path && (!rules_options.agent || !rules_options.agent[0]))
    return bad("--agent", "required with --rules (the agent the rules are compiled for)");
  if (!rules_options.rules_path && (rules_options.entities_path || rules_options.allow_degraded))
    return bad(rules_options.entities_path ? "--entities" : "--allow-degraded", "needs --rules FILE");
  if (rules_options.agent && !rules_options.agent[0]) return bad("--agent", "must not be empty");
  if (journal_dir && no_journal) return bad("--no-journal", "contradicts --journal DIR");

  /* PATH, HOME=/workspace and LANG=C.UTF-8 are the program's unless given with --env (supervisor/exec). */
  env[env_count] = NULL;

  /* The execution's identity in the journal: the --agent name, else the operator running dome. */
  char operator_name[64], exec_id[17];
  snprintf(operator_name, sizeof operator_name, "operator:%u", (unsigned)getuid());
  unsigned char id_bytes[8];
  randombytes_buf(id_bytes, sizeof id_bytes);
  sodium_bin2hex(exec_id, sizeof exec_id, id_bytes, sizeof id_bytes);
  struct run_journal *journal = NULL;
  if (run_journal_open(journal_dir, no_journal, &journal, &err) < 0) return bad("--journal", err.message);

  /* Before the signals are blocked below: helpers started here (pasta, for egress) inherit the mask. */
  struct run_rules rules;
  bool with_rules = rules_options.rules_path != NULL;
  if (with_rules && run_rules_prepare(&rules, &rules_options, &err) < 0) {
    run_rules_release(&rules);
    run_journal_close(journal);
    fprintf(stderr, "dome run: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  json_t *agent_env = json_object();
  for (size_t i = 0; i < env_count; i++) {
    const char *equals = strchr(env[i], '=');
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(equals - env[i]), env[i]);
    json_object_set_new(agent_env, name, json_string(equals + 1));
  }
  struct exec_request request = {
      .identity = {.exec_id = exec_id,
                   .agent = rules_options.agent ? rules_options.agent : operator_name,
                   .tool = "dome-run"},
      .program = {.argv = argv + optind,
                  .stdin_fd = forward_stdin ? 0 : -1,
                  .workspace_dir = config.workspace_dir,
                  .copy_out = config.copy_out,
                  .env = agent_env},
      .limits = {.memory_bytes = config.memory_bytes,
                 .cpus = config.cpus,
                 .pids = config.pids,
                 .timeout_ms = config.timeout_ms,
                 .workspace_bytes = config.workspace_bytes,
                 .output_bytes = config.output_limit},
      .image = config.image,
      .image_store = getenv("DOME_IMAGE_STORE"),
      .classification = classification,
      .unredacted = no_journal, /* nothing is kept: no guard to compile */
      .tables = with_rules ? &rules.tables : NULL,
      .allow_degraded = rules_options.allow_degraded,
      .net = with_rules ? &rules.net : NULL,
      .tap = json ? NULL : pass_through,
  };
  const char *prepared = getenv("DOME_RUN_PREPARED");
  if (prepared && strcmp(prepared, "1") == 0) request.run_jail = run_prepared;

  /* Ctrl-C, SIGTERM, SIGHUP, and SIGPIPE (the reader of our output went away, as `dome run ... | head`)
   * cancel the jail through cancel_fd, so that it is still torn down; dome then exits 128+signal. */
  sigset_t cancel_signals;
  sigemptyset(&cancel_signals);
  sigaddset(&cancel_signals, SIGINT);
  sigaddset(&cancel_signals, SIGTERM);
  sigaddset(&cancel_signals, SIGHUP);
  sigaddset(&cancel_signals, SIGPIPE);
  sigprocmask(SIG_BLOCK, &cancel_signals, NULL);
  request.cancel_fd = signalfd(-1, &cancel_signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (request.tap && (output_writer = pass_through_start()) == NULL) {
    if (with_rules) run_rules_release(&rules);
    run_journal_close(journal);
    json_decref(agent_env);
    fprintf(stderr, "dome run: start the output writer: out of memory\n");
    return DOME_EXIT_FAILURE;
  }

  struct exec_outcome outcome;
  int r = exec_run(&request, run_journal_sink(journal), &outcome, &err);
  json_decref(agent_env);
  pass_through_finish(output_writer); /* everything the program wrote is out before dome's own lines */
  output_writer = NULL;
  struct jail_result result = outcome.jail;
  int cancel_signal = 0;
  struct signalfd_siginfo info;
  if (request.cancel_fd >= 0 && read(request.cancel_fd, &info, sizeof info) == (ssize_t)sizeof info)
    cancel_signal = (int)info.ssi_signo;
  if (r < 0 && cancel_signal && outcome.journal_rc == 0) {
    exec_outcome_release(&outcome);
    if (with_rules) run_rules_release(&rules);
    run_journal_close(journal);
    fprintf(stderr, "dome run: cancelled by signal %d\n", cancel_signal);
    return 128 + cancel_signal;
  }
  if (r < 0) {
    exec_outcome_release(&outcome);
    if (with_rules) run_rules_release(&rules);
    run_journal_close(journal);
    const char *flag = "";
    if (strncmp(err.message, "unknown image", 13) == 0 || strncmp(err.message, "invalid image", 13) == 0 ||
        strncmp(err.message, "image `", 7) == 0)
      flag = "--image: ";
    else if (strncmp(err.message, "workspace `", 11) == 0)
      flag = "--workspace: ";
    else if (strncmp(err.message, "guard: ", 7) == 0)
      flag = "--classification: ";
    char prefix[32];
    snprintf(prefix, sizeof prefix, "dome run: %s", flag);
    print_escaped(prefix, err.message);
    return DOME_EXIT_FAILURE;
  }
  json_t *denials = json_object_get(outcome.result, "denials");
  int status;
  if (json) {
    json_t *extra = json_object();
    if (with_rules) run_rules_report(&rules, &outcome, denials, extra);
    json_object_set_new(extra, "journal", run_journal_describe(journal));
    json_object_set_new(extra, "exec_id", json_string(exec_id));
    status = print_json(&result, extra);
    json_decref(extra);
  } else {
    if (with_rules) {
      size_t i;
      json_t *d;
      json_array_foreach(denials, i, d) fprintf(
          stderr, "dome run: denied %s %s (hook %s, pid %lld, policy %s)\n",
          json_string_value(json_object_get(d, "action")) ? json_string_value(json_object_get(d, "action"))
                                                          : "-",
          json_string_value(json_object_get(d, "object")), json_string_value(json_object_get(d, "hook")),
          (long long)json_integer_value(json_object_get(d, "pid")),
          json_string_value(json_object_get(d, "policy_id"))
              ? json_string_value(json_object_get(d, "policy_id"))
              : "none (default deny)");
    }
    for (size_t i = 0; i < result.copy_out_error_count; i++)
      print_escaped("dome run: --copy-out: not copied: ", result.copy_out_errors[i]);
    char notice[512];
    if (jail_limit_notice(&result, notice, sizeof notice)) {
      if (result.stderr_length && result.stderr_data[result.stderr_length - 1] != '\n') fputc('\n', stderr);
      fputs(notice, stderr);
    }
    status = result.timed_out ? 124 : result.signal ? 128 + result.signal : result.exit_code;
    if (result.cancelled && cancel_signal) status = 128 + cancel_signal;
  }
  exec_outcome_release(&outcome);
  if (with_rules) run_rules_release(&rules);
  run_journal_close(journal);
  return status;
}
DOME_COMMAND(run, "run", "run a program in a fresh jail", run_main);
