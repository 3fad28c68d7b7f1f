/* guard_create / guard_free: compile the detectors, the exact secret values and their encodings into one
 * vectorscan streaming database per class, and the PCRE2 confirmers. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/guards/internal.h"

enum {
  SECRET_MAX_LENGTH = 4096, /* bytes; longer exact values are refused */
  DEFAULT_MIN_SECRET_LENGTH = 8,
  LOOKBEHIND_MAX = 16, /* bytes of context the confirmers may look behind (see stream.c) */
  HOSTNAME_BACK = 260, /* a host name is at most 253 bytes */
};

static const char *const default_suffixes[] = {"internal", "corp",        "local",    "lan",
                                               "intranet", "localdomain", "home.arpa"};
static const char *const default_jail_paths[] = {
    "/workspace", "/tmp",        "/usr",        "/bin",      "/sbin",        "/lib",
    "/lib64",     "/lib32",      "/dev/null",   "/dev/zero", "/dev/urandom", "/dev/random",
    "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd",   "/proc/self"};
static const char *const default_supervisor_paths[] = {"/run/dome", "/var/lib/dome", "/var/log/dome",
                                                       "/etc/dome"};

/* Patterns being assembled for vectorscan: parallel arrays indexed by rule. */
struct pattern_list {
  char **text;
  unsigned *flags;
  size_t count;
  size_t capacity;
};

static void pattern_list_free(struct pattern_list *list) {
  for (size_t i = 0; i < list->count; i++) free(list->text[i]);
  free(list->text);
  free(list->flags);
}

static void free_strings(char **strings, size_t count) {
  for (size_t i = 0; i < count; i++) free(strings[i]);
  free(strings);
}

void guard_free(struct guard *guard) {
  if (guard == NULL) return;
  for (size_t i = 0; i < guard->rule_count; i++) {
    pcre2_code_free(guard->rules[i].code);
    free(guard->rules[i].literal);
  }
  free(guard->rules);
  for (int c = 0; c < GUARD_CLASS_COUNT; c++) hs_free_database(guard->database[c]);
  hs_free_scratch(guard->scratch_prototype);
  if (guard->hmac_key) sodium_memzero(guard->hmac_key, guard->hmac_key_length);
  free(guard->hmac_key);
  free_strings(guard->jail_paths, guard->jail_path_count);
  free_strings(guard->supervisor_paths, guard->supervisor_path_count);
  free(guard->paths.text);
  free(guard->paths.length);
  guard_classification_free(&guard->classification);
  free(guard);
}

static int copy_paths(const char *const *given, size_t given_count, const char *const *defaults,
                      size_t default_count, const char *what, char ***out, size_t *out_count,
                      dome_error *err) {
  const char *const *source = given ? given : defaults;
  size_t count = given ? given_count : default_count;
  char **copy = calloc(count ? count : 1, sizeof *copy);
  if (copy == NULL) return dome_error_set(err, ENOMEM, "%s: out of memory", what);
  for (size_t i = 0; i < count; i++) {
    if (source[i] == NULL || source[i][0] != '/') {
      free_strings(copy, i);
      return dome_error_set(err, 0, "%s[%zu]: `%s` is not an absolute path", what, i,
                            source[i] ? source[i] : "(null)");
    }
    copy[i] = strdup(source[i]);
    if (copy[i] == NULL) {
      free_strings(copy, i);
      return dome_error_set(err, ENOMEM, "%s: out of memory", what);
    }
  }
  *out = copy;
  *out_count = count;
  return 0;
}

/* Add a rule; hs_text (taken) is its vectorscan pattern, NULL only for a prefilter rule (`prefilter`). */
static int add_rule(struct guard *guard, struct pattern_list *patterns, int detector, char *hs_text,
                    unsigned hs_flags, bool prefilter, dome_error *err) {
  if (hs_text == NULL && !prefilter)
    return dome_error_set(err, ENOMEM, "detector `%s`: out of memory", guard_detectors[detector].info.id);
  if (patterns->count == patterns->capacity) {
    size_t capacity = patterns->capacity ? patterns->capacity * 2 : 64;
    char **text = realloc(patterns->text, capacity * sizeof *text);
    if (text) patterns->text = text;
    unsigned *flags = realloc(patterns->flags, capacity * sizeof *flags);
    if (flags) patterns->flags = flags;
    struct guard_rule *rules = realloc(guard->rules, capacity * sizeof *rules);
    if (rules) guard->rules = rules;
    if (!text || !flags || !rules) {
      free(hs_text);
      return dome_error_set(err, ENOMEM, "detector `%s`: out of memory", guard_detectors[detector].info.id);
    }
    patterns->capacity = capacity;
  }
  patterns->text[patterns->count] = hs_text;
  patterns->flags[patterns->count] = hs_flags;
  patterns->count++;
  guard->rules[guard->rule_count++] = (struct guard_rule){.detector = detector};
  return 0;
}

static int compile_confirmer(struct guard_rule *rule, const char *pattern, uint32_t flags, dome_error *err) {
  int code;
  PCRE2_SIZE offset;
  rule->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, flags | PCRE2_USE_OFFSET_LIMIT,
                             &code, &offset, NULL);
  const char *id = guard_detectors[rule->detector].info.id;
  if (rule->code == NULL) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    return dome_error_set(err, EIO, "detector `%s`: PCRE2 pattern offset %zu: %s", id, (size_t)offset,
                          (char *)message);
  }
  uint32_t lookbehind = 0;
  pcre2_pattern_info(rule->code, PCRE2_INFO_MAXLOOKBEHIND, &lookbehind);
  if (lookbehind > LOOKBEHIND_MAX)
    return dome_error_set(err, EIO, "detector `%s`: looks %u bytes behind (at most %d)", id, lookbehind,
                          LOOKBEHIND_MAX);
  (void)pcre2_jit_compile(rule->code,
                          PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD); /* interpreter otherwise */
  int group = pcre2_substring_number_from_name(rule->code, (PCRE2_SPTR) "secret");
  rule->secret_group = group > 0 ? group : 0;
  return 0;
}

/* hs text matching `bytes` exactly (every byte escaped, so any value is safe). */
static char *hs_literal(const unsigned char *bytes, size_t length) {
  char *text = malloc(length * 4 + 1);
  if (text == NULL) return NULL;
  for (size_t i = 0; i < length; i++) snprintf(text + i * 4, 5, "\\x%02x", bytes[i]);
  text[length * 4] = '\0';
  return text;
}

static int add_literal(struct guard *guard, struct pattern_list *patterns, const char *detector_id,
                       const unsigned char *bytes, size_t length, unsigned flags, dome_error *err) {
  if (length == 0) return 0;
  int detector = guard_detector_index(detector_id);
  int r = add_rule(guard, patterns, detector, hs_literal(bytes, length), flags, false, err);
  if (r < 0) return r;
  struct guard_rule *rule = &guard->rules[guard->rule_count - 1];
  rule->length = (unsigned)length;
  rule->back = (unsigned)length;
  rule->caseless = (flags & HS_FLAG_CASELESS) != 0;
  if ((rule->literal = malloc(length)) == NULL)
    return dome_error_set(err, ENOMEM, "detector `%s`: out of memory", detector_id);
  memcpy(rule->literal, bytes, length);
  return 0;
}

/* The base64 characters that depend only on the value, when it starts `skip` bytes into the encoded data. */
static int add_base64(struct guard *guard, struct pattern_list *patterns, const unsigned char *value,
                      size_t length, dome_error *err) {
  size_t total = length + 2;
  _cleanup_free_ unsigned char *shifted = calloc(total, 1);
  _cleanup_free_ char *encoded = malloc(sodium_base64_ENCODED_LEN(total, sodium_base64_VARIANT_ORIGINAL));
  if (!shifted || !encoded) return dome_error_set(err, ENOMEM, "secret encodings: out of memory");
  const int variants[2] = {sodium_base64_VARIANT_ORIGINAL_NO_PADDING,
                           sodium_base64_VARIANT_URLSAFE_NO_PADDING};
  for (size_t skip = 0; skip < 3; skip++) {
    memset(shifted, 0, skip);
    memcpy(shifted + skip, value, length);
    size_t first = (8 * skip + 5) / 6;
    size_t last = 8 * (skip + length) / 6; /* exclusive */
    char previous[8] = "";
    for (int v = 0; v < 2; v++) {
      sodium_bin2base64(encoded, sodium_base64_ENCODED_LEN(total, sodium_base64_VARIANT_ORIGINAL), shifted,
                        skip + length, variants[v]);
      if (v == 1 && strncmp(previous, "same", 4) == 0) continue;
      int r = add_literal(guard, patterns, "env-value-base64", (unsigned char *)encoded + first, last - first,
                          0, err);
      if (r < 0) return r;
      /* The URL-safe alphabet differs only where the standard one has + or /. */
      bool differs = memchr(encoded + first, '+', last - first) || memchr(encoded + first, '/', last - first);
      snprintf(previous, sizeof previous, "%s", differs ? "diff" : "same");
    }
  }
  return 0;
}

static int add_secret(struct guard *guard, struct pattern_list *patterns, const struct guard_secret *secret,
                      size_t index, size_t min_length, dome_error *err) {
  const unsigned char *value = secret->value;
  size_t length = secret->length;
  if (length < min_length) return 0;
  if (length > SECRET_MAX_LENGTH)
    return dome_error_set(err, 0, "secret %zu (`%s`): %zu bytes, at most %d", index,
                          secret->name ? secret->name : "", length, SECRET_MAX_LENGTH);
  int r = add_literal(guard, patterns, "env-value", value, length, 0, err);
  if (r < 0) return r;
  if ((r = add_base64(guard, patterns, value, length, err)) < 0) return r;
  _cleanup_free_ char *encoded = malloc(length * 3 + 1);
  if (encoded == NULL) return dome_error_set(err, ENOMEM, "secret encodings: out of memory");
  sodium_bin2hex(encoded, length * 2 + 1, value, length);
  if ((r = add_literal(guard, patterns, "env-value-hex", (unsigned char *)encoded, length * 2,
                       HS_FLAG_CASELESS, err)) < 0)
    return r;
  for (int form = 0; form < 2; form++) {
    size_t n = 0;
    bool space = false;
    for (size_t i = 0; i < length; i++) {
      unsigned char c = value[i];
      if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
        encoded[n++] = (char)c;
      } else if (form == 1 && c == ' ') {
        encoded[n++] = '+';
        space = true;
      } else {
        n += (size_t)sprintf(encoded + n, "%%%02X", c);
      }
    }
    if (n == length || (form == 1 && !space)) continue; /* same as the raw value or the first form */
    if ((r = add_literal(guard, patterns, "env-value-url", (unsigned char *)encoded, n, HS_FLAG_CASELESS,
                         err)) < 0)
      return r;
  }
  return 0;
}

static int add_internal_hostnames(struct guard *guard, struct pattern_list *patterns,
                                  const struct guard_options *options, dome_error *err) {
  const char *const *suffixes =
      options->internal_domain_suffixes ? options->internal_domain_suffixes : default_suffixes;
  size_t count = options->internal_domain_suffixes ? options->internal_domain_suffix_count
                                                   : sizeof default_suffixes / sizeof default_suffixes[0];
  if (count == 0) return 0;
  size_t alternation_size = 1;
  for (size_t i = 0; i < count; i++) {
    const char *s = suffixes[i];
    if (s == NULL) return dome_error_set(err, 0, "internal domain suffix %zu: missing", i);
    if (*s == '.') s++;
    if (*s == '\0' || strlen(s) > 63 * 4)
      return dome_error_set(err, 0, "internal domain suffix `%s`: empty or too long", suffixes[i]);
    for (const char *p = s; *p; p++)
      if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
        return dome_error_set(
            err, 0, "internal domain suffix `%s`: only letters, digits, `-` and `.` allowed", suffixes[i]);
    alternation_size += strlen(s) * 2 + 1;
  }
  _cleanup_free_ char *alternation = malloc(alternation_size);
  if (alternation == NULL) return dome_error_set(err, ENOMEM, "internal domains: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    const char *s = suffixes[i][0] == '.' ? suffixes[i] + 1 : suffixes[i];
    if (i) alternation[n++] = '|';
    for (const char *p = s; *p; p++) {
      if (*p == '.') alternation[n++] = '\\';
      alternation[n++] = *p;
    }
  }
  alternation[n] = '\0';
  char *hs_text = NULL;
  if (asprintf(&hs_text, "(?i)\\.(?:%s)", alternation) < 0) hs_text = NULL;
  int detector = guard_detector_index("internal-hostname");
  int r = add_rule(guard, patterns, detector, hs_text, 0, false, err);
  if (r < 0) return r;
  struct guard_rule *rule = &guard->rules[guard->rule_count - 1];
  rule->back = HOSTNAME_BACK;
  _cleanup_free_ char *pcre = NULL;
  if (asprintf(&pcre,
               "(?i)(?<![A-Za-z0-9_.-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.){1,16}(?:%s)"
               "(?![A-Za-z0-9_-]|\\.[A-Za-z0-9])",
               alternation) < 0)
    return dome_error_set(err, ENOMEM, "internal domains: out of memory");
  return compile_confirmer(rule, pcre, 0, err);
}

/* host-path's trigger: the literal directories its validator can accept (supervisor paths, home roots, and
 * the host top-level directories no jail path covers), so the many paths inside the jail's own view
 * (/usr/lib/python3, /workspace/...) and URL paths wake nothing. The prefilter finds path starts (a '/' after
 * no path character, as the confirmer's lookbehind requires), tests the two bytes after the '/' in `pairs`
 * and then compares the literals: a match starts at a literal's '/'. */
static int build_path_literals(struct guard *guard, dome_error *err) {
  struct guard_path_literals *paths = &guard->paths;
  size_t count = guard->supervisor_path_count + guard_home_root_count + guard_host_root_count;
  paths->text = calloc(count, sizeof *paths->text);
  paths->length = calloc(count, sizeof *paths->length);
  if (paths->text == NULL || paths->length == NULL)
    return dome_error_set(err, ENOMEM, "host paths: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < guard->supervisor_path_count; i++) paths->text[n++] = guard->supervisor_paths[i];
  for (size_t i = 0; i < guard_home_root_count; i++) paths->text[n++] = guard_home_roots[i];
  for (size_t i = 0; i < guard_host_root_count; i++) {
    const char *root = guard_host_roots[i];
    bool covered = false;
    for (size_t j = 0; j < guard->jail_path_count && !covered; j++)
      covered = guard_path_under(root, strlen(root), guard->jail_paths[j]);
    if (!covered) paths->text[n++] = root;
  }
  paths->count = n;
  memset(paths->pairs, 0, sizeof paths->pairs);
  memset(paths->first, 0, sizeof paths->first);
  paths->any_first = false;
  for (size_t i = 0; i < n; i++) {
    size_t length = strlen(paths->text[i]);
    while (length > 1 && paths->text[i][length - 1] == '/') length--;
    paths->length[i] = length;
    const unsigned char *literal = (const unsigned char *)paths->text[i];
    unsigned first = length < 2 ? 0 : (unsigned)literal[1] << 8, last = length < 2 ? 65535 : first | 0xff;
    for (unsigned pair = first; pair <= last; pair++)
      if (length < 3 || (pair & 0xff) == literal[2]) paths->pairs[pair / 64] |= (uint64_t)1 << (pair % 64);
    if (length < 2 || literal[1] >= 128)
      paths->any_first = true;
    else
      paths->first[literal[1]] = 1;
  }
  paths->first[0] = 1;
  return 0;
}

/* Width of each rule's hs pattern; sets rule->back to at least that width. */
static int measure_rules(struct guard *guard, const struct pattern_list *patterns, dome_error *err) {
  for (size_t i = 0; i < guard->rule_count; i++) {
    if (patterns->text[i] == NULL) continue; /* prefilter rule */
    hs_expr_info_t *info = NULL;
    hs_compile_error_t *compile_error = NULL;
    const char *id = guard_detectors[guard->rules[i].detector].info.id;
    if (hs_expression_info(patterns->text[i], patterns->flags[i], &info, &compile_error) != HS_SUCCESS) {
      int r = dome_error_set(err, EIO, "detector `%s`: vectorscan: %s", id, compile_error->message);
      hs_free_compile_error(compile_error);
      return r;
    }
    unsigned width = info->max_width;
    free(info);
    if (width == UINT_MAX)
      return dome_error_set(err, EIO, "detector `%s`: vectorscan pattern is unbounded", id);
    if (guard->rules[i].back < width) guard->rules[i].back = width;
  }
  return 0;
}

static int compile_databases(struct guard *guard, const struct pattern_list *patterns, dome_error *err) {
  _cleanup_free_ const char **texts = calloc(patterns->count + 1, sizeof *texts);
  _cleanup_free_ unsigned *flags = calloc(patterns->count + 1, sizeof *flags);
  _cleanup_free_ unsigned *ids = calloc(patterns->count + 1, sizeof *ids);
  if (!texts || !flags || !ids) return dome_error_set(err, ENOMEM, "compile guard: out of memory");
  for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
    unsigned n = 0;
    size_t hold_back = 0;
    for (size_t i = 0; i < guard->rule_count; i++) {
      enum guard_class detector_class = guard_detectors[guard->rules[i].detector].info.class_;
      if (detector_class != GUARD_CLASS_PUBLIC && detector_class != (enum guard_class)c) continue;
      if (guard->rules[i].back > hold_back) hold_back = guard->rules[i].back;
      if (patterns->text[i] == NULL) { /* found by the prefilter (a shape is decided this many bytes on) */
        guard->prefilter_kinds[c] |= 1u << guard->rules[i].trigger;
        guard->prefilter_rule[c][guard->rules[i].trigger] = (int)i;
        if (hold_back < GUARD_PREFILTER_LOOKAHEAD + guard->rules[i].back + 1)
          hold_back = GUARD_PREFILTER_LOOKAHEAD + guard->rules[i].back + 1;
        continue;
      }
      texts[n] = patterns->text[i];
      flags[n] = patterns->flags[i];
      ids[n] = (unsigned)i;
      n++;
    }
    guard->hold_back[c] = hold_back;
    hs_compile_error_t *compile_error = NULL;
    if (hs_compile_multi(texts, flags, ids, n, HS_MODE_STREAM, NULL, &guard->database[c], &compile_error) !=
        HS_SUCCESS) {
      const char *id = compile_error->expression >= 0
                           ? guard_detectors[guard->rules[ids[compile_error->expression]].detector].info.id
                           : "(all)";
      int r = dome_error_set(err, EIO, "class %s: detector `%s`: vectorscan: %s", guard_class_name(c), id,
                             compile_error->message);
      hs_free_compile_error(compile_error);
      return r;
    }
    if (hs_alloc_scratch(guard->database[c], &guard->scratch_prototype) != HS_SUCCESS)
      return dome_error_set(err, ENOMEM, "class %s: vectorscan scratch: out of memory", guard_class_name(c));
  }
  return 0;
}

int guard_create(const struct guard_options *options, struct guard **out, dome_error *err) {
  static const struct guard_options defaults = {0};
  if (options == NULL) options = &defaults;
  *out = NULL;
  if (sodium_init() < 0) return dome_error_set(err, EIO, "libsodium initialisation failed");
  if (hs_valid_platform() != HS_SUCCESS) return dome_error_set(err, EIO, "vectorscan: unsupported CPU");
  guard_prefilter_init();
  struct guard *guard = calloc(1, sizeof *guard);
  if (guard == NULL) return dome_error_set(err, ENOMEM, "create guard: out of memory");
  struct pattern_list patterns = {0};
  int r = 0;
  if (options->classification &&
      (r = guard_classification_parse(options->classification, &guard->classification, err)) < 0)
    goto fail;
  guard->hmac_key_length = options->hmac_key ? options->hmac_key_length : crypto_auth_hmacsha256_KEYBYTES;
  guard->hmac_key = malloc(guard->hmac_key_length ? guard->hmac_key_length : 1);
  if (guard->hmac_key == NULL) {
    r = dome_error_set(err, ENOMEM, "create guard: out of memory");
    goto fail;
  }
  if (options->hmac_key)
    memcpy(guard->hmac_key, options->hmac_key, guard->hmac_key_length);
  else
    randombytes_buf(guard->hmac_key, guard->hmac_key_length);
  if ((r = copy_paths(options->jail_paths, options->jail_path_count, default_jail_paths,
                      sizeof default_jail_paths / sizeof default_jail_paths[0], "jail path",
                      &guard->jail_paths, &guard->jail_path_count, err)) < 0)
    goto fail;
  if ((r = copy_paths(options->supervisor_paths, options->supervisor_path_count, default_supervisor_paths,
                      sizeof default_supervisor_paths / sizeof default_supervisor_paths[0], "supervisor path",
                      &guard->supervisor_paths, &guard->supervisor_path_count, err)) < 0)
    goto fail;
  for (int c = 0; c < GUARD_CLASS_COUNT; c++)
    for (int t = 0; t < GUARD_TRIGGER_COUNT; t++) guard->prefilter_rule[c][t] = -1;
  if ((r = build_path_literals(guard, err)) < 0) goto fail;
  for (size_t d = 0; d < guard_detectors_count; d++) {
    const struct guard_detector *detector = &guard_detectors[d];
    if (detector->dynamic) continue;
    /* A detector has a vectorscan rule (its hs pattern), a prefilter rule, or both
     * (env-assignment: `export NAME=` by vectorscan, `NAME=` lines by the prefilter). */
    for (int pass = 0; pass < 2; pass++) {
      enum guard_trigger trigger = detector->trigger;
      if (pass == 0 && detector->hs != NULL)
        r = add_rule(guard, &patterns, (int)d, strdup(detector->hs), detector->hs_flags, false, err);
      else if (pass == 1 && trigger != GUARD_TRIGGER_HS)
        r = add_rule(guard, &patterns, (int)d, NULL, 0, true, err);
      else
        continue;
      if (r < 0) goto fail;
      struct guard_rule *rule = &guard->rules[guard->rule_count - 1];
      rule->back = pass == 0 || detector->back ? detector->back : GUARD_PREFILTER_BACK;
      rule->trigger = pass == 0 ? GUARD_TRIGGER_HS : trigger;
      rule->precheck = pass == 0 ? detector->precheck : GUARD_PRECHECK_NONE;
      if ((r = compile_confirmer(rule, detector->pcre, detector->pcre_flags, err)) < 0) goto fail;
    }
  }
  if ((r = add_internal_hostnames(guard, &patterns, options, err)) < 0) goto fail;
  size_t min_length = options->min_secret_length ? options->min_secret_length : DEFAULT_MIN_SECRET_LENGTH;
  for (size_t i = 0; i < options->secret_count; i++)
    if ((r = add_secret(guard, &patterns, &options->secrets[i], i, min_length, err)) < 0) goto fail;
  if ((r = measure_rules(guard, &patterns, err)) < 0) goto fail;
  if ((r = compile_databases(guard, &patterns, err)) < 0) goto fail;
  pattern_list_free(&patterns);
  *out = guard;
  return 0;
fail:
  pattern_list_free(&patterns);
  guard_free(guard);
  dome_error_wrap(err, "create guard");
  return r;
}

enum guard_class guard_field_class(const struct guard *guard, const char *field) {
  return guard_classification_lookup(&guard->classification, field);
}

size_t guard_hold_back_bytes(const struct guard *guard) {
  size_t most = 0;
  for (int c = 0; c < GUARD_CLASS_COUNT; c++)
    if (guard->hold_back[c] > most) most = guard->hold_back[c];
  return most;
}
