/* Validators: checks a confirmed match must pass before it is redacted (checksums, ranges, entropy,
 * the jail's path view), and the HMAC of redacted values. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>

#include "guards_log2_table.h" /* $(BUILD)/gen: static const double guard_log2_of[] */
#include "supervisor/guards/entropy.h"
#include "supervisor/guards/internal.h"

double guard_shannon_entropy(const char *data, size_t length) {
  if (length == 0 || length > GUARD_ENTROPY_MAX_LENGTH) return 0.0;
  unsigned counts[256] = {0};
  for (size_t i = 0; i < length; i++) counts[(unsigned char)data[i]]++;
  double weighted = 0.0;
  for (int c = 0; c < 256; c++) weighted += counts[c] * guard_log2_of[counts[c]];
  return guard_log2_of[length] - weighted / (double)length;
}

void guard_hmac_hex(const struct guard *guard, const void *data, size_t length, char out[65]) {
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, guard->hmac_key, guard->hmac_key_length);
  crypto_auth_hmacsha256_update(&state, data, length);
  crypto_auth_hmacsha256_final(&state, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

/* generic-secret: long enough, not a word or identifier, not a placeholder. */
/* Characters of generic-secret's name continuation [A-Za-z0-9_.-] and of its value
 * [A-Za-z0-9+/=_.~!@#$%^&*-]. */
static bool name_char(unsigned char c) {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_' || c == '.' ||
         c == '-';
}

static bool value_char(unsigned char c) {
  return name_char(c) || (c && strchr("+/=~!@#$%^&*", c));
}

/* After an assignment operator ending before `at`: [ \t]{0,4}['"]? and 12 value characters. */
static int assigned_value(const char *data, size_t length, size_t at) {
  for (int spaces = 0; at < length && (data[at] == ' ' || data[at] == '\t'); spaces++, at++)
    if (spaces == 4) return 0;
  if (at < length && (data[at] == '\'' || data[at] == '"')) at++;
  for (size_t k = 0; k < 12; k++) {
    if (at + k >= length) return -1;
    if (!value_char((unsigned char)data[at + k])) return 0;
  }
  return 1;
}

/* The rest of generic-secret's pattern after its keyword: [A-Za-z0-9_.-]{0,24}['"]?[ \t]{0,4}(:=|=>|:|=),
 * then assigned_value. Each part is forced (a name character is no quote, space or operator), so one pass
 * decides, trying both lengths of a two-character operator. */
int guard_precheck_assignment(const char *data, size_t length, size_t at) {
  for (int name = 0; at < length && name_char((unsigned char)data[at]); name++, at++)
    if (name == 24) return 0;
  if (at < length && (data[at] == '\'' || data[at] == '"')) at++;
  for (int spaces = 0; at < length && (data[at] == ' ' || data[at] == '\t'); spaces++, at++)
    if (spaces == 4) return 0;
  if (at >= length) return -1;
  if (data[at] != ':' && data[at] != '=') return 0;
  int result = assigned_value(data, length, at + 1);
  if (result == 1) return 1;
  if (at + 1 < length && (data[at + 1] == (data[at] == ':' ? '=' : '>'))) {
    int longer = assigned_value(data, length, at + 2);
    if (longer != 0) return longer;
  }
  return result;
}

static bool entropy_ok(const char *value, size_t length) {
  if (length < 12) return false;
  bool lower = false, upper = false, digit = false, other = false;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)value[i];
    if (islower(c))
      lower = true;
    else if (isupper(c))
      upper = true;
    else if (isdigit(c))
      digit = true;
    else
      other = true;
  }
  int kinds = lower + upper + digit;
  if (kinds < 2) return false;
  if (!digit && !other) return false; /* CamelCaseIdentifier */
  double entropy = guard_shannon_entropy(value, length);
  double threshold = length >= 20 ? 3.5 : 3.0;
  return entropy >= threshold - GUARD_ENTROPY_TOLERANCE;
}

static bool url_password_ok(const char *value, size_t length) {
  if (length == 0) return false;
  if (value[0] == '$' || value[0] == '{' || value[0] == '<' || value[0] == '%') return false;
  size_t stars = 0;
  for (size_t i = 0; i < length; i++) stars += value[i] == '*';
  return stars != length;
}

static size_t collect_digits(const char *text, size_t length, char *digits, size_t capacity) {
  size_t n = 0;
  for (size_t i = 0; i < length; i++)
    if (isdigit((unsigned char)text[i])) {
      if (n < capacity) digits[n] = text[i];
      n++;
    }
  return n;
}

bool guard_card_number_ok(const char *text, size_t length) {
  char digits[32];
  size_t n = collect_digits(text, length, digits, sizeof digits);
  if (n < 13 || n > 19) return false;
  /* Separators, if any, must be all spaces or all dashes, between the groups card numbers are printed
   * in (4-4-4-4, 4-4-4-4-3, 4-6-5, 4-6-4, or fours and a remainder): a run of space-separated numbers is not
   * a card number. */
  char separator = 0;
  size_t groups[8], group_count = 0, run = 0;
  for (size_t i = 0; i < length; i++) {
    if (isdigit((unsigned char)text[i])) {
      run++;
      continue;
    }
    if (separator && text[i] != separator) return false;
    separator = text[i];
    if (group_count == 7) return false;
    groups[group_count++] = run;
    run = 0;
  }
  groups[group_count++] = run;
  if (group_count > 1) {
    static const size_t layouts[][6] = {{4, 4, 4, 4, 0}, {4, 4, 4, 4, 3, 0}, {4, 6, 5, 0},   {4, 6, 4, 0},
                                        {4, 4, 4, 3, 0}, {4, 4, 4, 2, 0},    {4, 4, 4, 1, 0}};
    bool known = false;
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0] && !known; l++) {
      size_t k = 0;
      while (k < group_count && layouts[l][k] == groups[k]) k++;
      known = k == group_count && layouts[l][k] == 0;
    }
    if (!known) return false;
  }
  int sum = 0;
  for (size_t i = 0; i < n; i++) {
    int d = digits[n - 1 - i] - '0';
    if (i % 2 == 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  if (sum % 10 != 0) return false;
  /* Issuer identification numbers of the card schemes in use (ISO/IEC 7812 major industry 2-6). */
  int two = (digits[0] - '0') * 10 + (digits[1] - '0');
  int four = two * 100 + (digits[2] - '0') * 10 + (digits[3] - '0');
  int three = four / 10;
  /* Lengths the schemes issue in practice (13, 14, 15, 16, 19): an 18-digit record id is no card number. */
  bool common = n == 16 || n == 19;
  if (digits[0] == '4') return n == 13 || common;                                 /* Visa */
  if (two >= 51 && two <= 55) return n == 16;                                     /* Mastercard */
  if (four >= 2221 && four <= 2720) return n == 16;                               /* Mastercard 2-series */
  if (two == 34 || two == 37) return n == 15;                                     /* American Express */
  if (four == 6011 || two == 65 || (three >= 644 && three <= 649)) return common; /* Discover */
  if (two == 35) return common;                                                   /* JCB */
  if (two == 36 || two == 38 || two == 39 || (three >= 300 && three <= 305))
    return n == 14 || common;                               /* Diners */
  if (two == 62) return common;                             /* UnionPay */
  if (two == 50 || (two >= 56 && two <= 69)) return common; /* Maestro */
  return false;
}

static bool ssn_ok(const char *text, size_t length) {
  if (length != 11) return false;
  int area = (text[0] - '0') * 100 + (text[1] - '0') * 10 + (text[2] - '0');
  int group = (text[4] - '0') * 10 + (text[5] - '0');
  int serial = atoi(text + 7);
  if (area == 0 || area == 666 || area >= 900) return false;
  return group != 0 && serial != 0;
}

static bool iban_ok(const char *text, size_t length) {
  char compact[40];
  size_t n = 0;
  for (size_t i = 0; i < length; i++) {
    if (text[i] == ' ') continue;
    if (n >= sizeof compact) return false;
    compact[n++] = text[i];
  }
  if (n < 15 || n > 34) return false;
  /* Move the first four characters to the end, letters to 10..35, then mod 97 == 1. */
  unsigned remainder = 0;
  for (size_t k = 0; k < n; k++) {
    char c = compact[(k + 4) % n];
    if (isdigit((unsigned char)c))
      remainder = (remainder * 10 + (unsigned)(c - '0')) % 97;
    else if (isupper((unsigned char)c))
      remainder = (remainder * 100 + (unsigned)(c - 'A' + 10)) % 97;
    else
      return false;
  }
  return remainder == 1;
}

/* e-mail: dot-atom local part (no leading, trailing or doubled dot) and a top-level domain in one case. */
static bool email_ok(const char *text, size_t length) {
  const char *at = memchr(text, '@', length);
  if (at == NULL || at == text) return false;
  if (text[0] == '.' || at[-1] == '.' || memmem(text, (size_t)(at - text), "..", 2)) return false;
  const char *dot = NULL;
  for (const char *p = text + length; p > at; p--)
    if (p[-1] == '.') {
      dot = p;
      break;
    }
  if (dot == NULL) return false;
  bool lower = false, upper = false;
  for (const char *p = dot; p < text + length; p++) {
    lower |= islower((unsigned char)*p) != 0;
    upper |= isupper((unsigned char)*p) != 0;
  }
  return !(lower && upper);
}

static bool phone_ok(const char *text, size_t length) {
  char digits[32];
  size_t n = collect_digits(text, length, digits, sizeof digits);
  if (n < 10 || n > 15) return false;
  if (text[0] != '+') {
    /* NANP: (NXX) NXX-XXXX, or NXX-NXX-XXXX / NXX.NXX.XXXX with one separator used twice (never spaces:
     * "512 256 1024" is a row of numbers, not a phone number). */
    if (n != 10) return false;
    if (digits[0] < '2' || digits[3] < '2') return false;
    if (text[0] != '(') {
      if (length != 12 || text[3] != text[7] || text[3] == ' ') return false;
    }
  }
  return true;
}

/* Parse an IPv4 or IPv6 address. Returns 4 or 6, 0 when not an address. */
static int parse_ip(const char *text, size_t length, unsigned char address[16]) {
  char copy[64];
  if (length == 0 || length >= sizeof copy) return 0;
  /* "::" alone (the unspecified address) is C++/Rust scope syntax far more often than an address. */
  size_t colons = 0;
  while (colons < length && text[colons] == ':') colons++;
  if (colons == length) return 0;
  memcpy(copy, text, length);
  copy[length] = '\0';
  if (inet_pton(AF_INET, copy, address) == 1) return 4;
  if (inet_pton(AF_INET6, copy, address) == 1) return 6;
  return 0;
}

enum ip_kind { IP_PUBLIC, IP_INTERNAL, IP_METADATA };

static enum ip_kind classify_ipv4(const unsigned char *a) {
  if ((a[0] == 169 && a[1] == 254 && a[2] == 169 && a[3] == 254) ||
      (a[0] == 169 && a[1] == 254 && a[2] == 170 && a[3] == 2) ||
      (a[0] == 100 && a[1] == 100 && a[2] == 100 && a[3] == 200))
    return IP_METADATA;
  if (a[0] == 10 || a[0] == 127) return IP_INTERNAL;
  if (a[0] == 172 && (a[1] & 0xf0) == 16) return IP_INTERNAL;
  if (a[0] == 192 && a[1] == 168) return IP_INTERNAL;
  if (a[0] == 169 && a[1] == 254) return IP_INTERNAL;
  if (a[0] == 100 && (a[1] & 0xc0) == 64) return IP_INTERNAL;
  return IP_PUBLIC;
}

static enum ip_kind classify_ip(int family, const unsigned char *a) {
  if (family == 4) return classify_ipv4(a);
  static const unsigned char loopback[16] = {[15] = 1};
  static const unsigned char ec2_metadata[16] = {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
  static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
  if (memcmp(a, ec2_metadata, 16) == 0) return IP_METADATA;
  if (memcmp(a, loopback, 16) == 0) return IP_INTERNAL;
  if ((a[0] & 0xfe) == 0xfc) return IP_INTERNAL;                 /* fc00::/7 */
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return IP_INTERNAL; /* fe80::/10 */
  if (memcmp(a, mapped, 12) == 0) return classify_ipv4(a + 12);
  return IP_PUBLIC;
}

bool guard_path_under(const char *path, size_t length, const char *prefix) {
  size_t n = strlen(prefix);
  while (n > 1 && prefix[n - 1] == '/') n--;
  if (length < n || memcmp(path, prefix, n) != 0) return false;
  return length == n || path[n] == '/' || n == 1;
}

/* Only the host's own top-level directories (FHS, macOS) make an absolute path a host path: "/api/v2/x"
 * in a log line is a URL path, not a file of the host. */
const char *const guard_host_roots[] = {"/etc",   "/var",     "/opt",     "/srv",    "/proc",   "/sys",
                                        "/dev",   "/boot",    "/mnt",     "/media",  "/run",    "/snap",
                                        "/nix",   "/usr",     "/bin",     "/sbin",   "/lib",    "/lib64",
                                        "/lib32", "/Volumes", "/private", "/System", "/Library"};
const size_t guard_host_root_count = sizeof guard_host_roots / sizeof guard_host_roots[0];
const char *const guard_home_roots[] = {"/root", "/home", "/Users"};
const size_t guard_home_root_count = sizeof guard_home_roots / sizeof guard_home_roots[0];

static int host_path_detector(const struct guard *guard, int detector, const char *path, size_t length) {
  for (size_t i = 0; i < guard->supervisor_path_count; i++)
    if (guard_path_under(path, length, guard->supervisor_paths[i]))
      return guard_detector_index("supervisor-path");
  for (size_t i = 0; i < guard_home_root_count; i++)
    if (guard_path_under(path, length, guard_home_roots[i])) return guard_detector_index("home-directory");
  for (size_t i = 0; i < guard->jail_path_count; i++)
    if (guard_path_under(path, length, guard->jail_paths[i])) return -1;
  for (size_t i = 0; i < guard_host_root_count; i++)
    if (guard_path_under(path, length, guard_host_roots[i])) return detector;
  return -1;
}

int guard_validate(const struct guard *guard, int detector, const char *whole, size_t whole_length,
                   const char *value, size_t value_length) {
  unsigned char address[16];
  int family;
  switch (guard_detectors[detector].validator) {
    case VALIDATE_NONE:
      return detector;
    case VALIDATE_ENTROPY:
      return entropy_ok(value, value_length) ? detector : -1;
    case VALIDATE_URL_PASSWORD:
      return url_password_ok(value, value_length) ? detector : -1;
    case VALIDATE_LUHN:
      return guard_card_number_ok(value, value_length) ? detector : -1;
    case VALIDATE_SSN:
      return ssn_ok(value, value_length) ? detector : -1;
    case VALIDATE_IBAN:
      return iban_ok(value, value_length) ? detector : -1;
    case VALIDATE_EMAIL:
      return email_ok(value, value_length) ? detector : -1;
    case VALIDATE_PHONE:
      return phone_ok(value, value_length) ? detector : -1;
    case VALIDATE_HOST_PATH:
      return host_path_detector(guard, detector, whole, whole_length);
    case VALIDATE_INTERNAL_IP:
      family = parse_ip(value, value_length, address);
      if (family == 0) return -1;
      switch (classify_ip(family, address)) {
        case IP_METADATA:
          return guard_detector_index("cloud-metadata-address");
        case IP_INTERNAL:
          return detector;
        default:
          return -1;
      }
    case VALIDATE_ANY_IP:
      return parse_ip(value, value_length, address) ? detector : -1;
  }
  return -1;
}
