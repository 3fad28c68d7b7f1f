/* Cedar `ipaddr` extension: parsing and range tests (see extensions.h).
 *
 * The accepted spellings follow the Lean specification (cedar-spec Cedar/Spec/Ext/IPAddr.lean), which
 * cedar-policy is differentially tested against: dotted-quad IPv4 without leading zeros, IPv6 groups
 * of 1-4 hex digits with at most one "::" that stands for at least one zero group, no embedded IPv4,
 * and an optional "/N" prefix without leading zeros. */
#include "policy/extensions/extensions.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Parse decimal digits text[0..length) (no sign, no leading zero unless the number is "0", at most
 * max_digits digits) not above max. Returns the value or -1. */
static int parse_small_decimal(const char *text, size_t length, size_t max_digits, unsigned max) {
  if (length == 0 || length > max_digits) return -1;
  if (text[0] == '0' && length > 1) return -1;
  unsigned value = 0;
  for (size_t i = 0; i < length; i++) {
    if (text[i] < '0' || text[i] > '9') return -1;
    value = value * 10 + (unsigned)(text[i] - '0');
  }
  return value <= max ? (int)value : -1;
}

static int parse_v4_address(const char *text, size_t length, uint8_t out[4]) {
  size_t start = 0;
  int part = 0;
  for (size_t i = 0; i <= length; i++) {
    if (i < length && text[i] != '.') continue;
    if (part == 4) return -1;
    int octet = parse_small_decimal(text + start, i - start, 3, 255);
    if (octet < 0) return -1;
    out[part++] = (uint8_t)octet;
    start = i + 1;
  }
  return part == 4 ? 0 : -1;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Groups separated by ':' in text[0..length); empty text is zero groups. Returns the group count
 * stored in groups (at most 8) or -1. */
static int parse_v6_groups(const char *text, size_t length, uint16_t groups[8]) {
  if (length == 0) return 0;
  int count = 0;
  size_t start = 0;
  for (size_t i = 0; i <= length; i++) {
    if (i < length && text[i] != ':') continue;
    size_t digits = i - start;
    if (digits == 0 || digits > 4 || count == 8) return -1;
    unsigned value = 0;
    for (size_t k = start; k < i; k++) {
      int h = hex_value(text[k]);
      if (h < 0) return -1;
      value = value * 16 + (unsigned)h;
    }
    groups[count++] = (uint16_t)value;
    start = i + 1;
  }
  return count;
}

static int parse_v6_address(const char *text, size_t length, uint8_t out[16]) {
  uint16_t groups[8] = {0};
  const char *gap = NULL;
  for (size_t i = 0; i + 1 < length; i++)
    if (text[i] == ':' && text[i + 1] == ':') {
      gap = text + i;
      break;
    }
  if (!gap) {
    if (parse_v6_groups(text, length, groups) != 8) return -1;
  } else {
    size_t head_length = (size_t)(gap - text);
    const char *tail = gap + 2;
    size_t tail_length = length - head_length - 2;
    for (size_t i = 0; i + 1 < tail_length; i++)
      if (tail[i] == ':' && tail[i + 1] == ':') return -1; /* a second "::" */
    uint16_t head[8], rest[8];
    int h = parse_v6_groups(text, head_length, head);
    int t = parse_v6_groups(tail, tail_length, rest);
    if (h < 0 || t < 0 || h + t >= 8) return -1;
    for (int i = 0; i < h; i++) groups[i] = head[i];
    for (int i = 0; i < t; i++) groups[8 - t + i] = rest[i];
  }
  for (int i = 0; i < 8; i++) {
    out[2 * i] = (uint8_t)(groups[i] >> 8);
    out[2 * i + 1] = (uint8_t)(groups[i] & 0xff);
  }
  return 0;
}

int cedar_ipaddr_parse(const char *text, size_t length, cedar_ipaddr *out) {
  if (!text) return -EINVAL;
  const char *slash = memchr(text, '/', length);
  size_t address_length = slash ? (size_t)(slash - text) : length;
  const char *prefix_text = slash ? slash + 1 : NULL;
  size_t prefix_length = slash ? length - address_length - 1 : 0;
  if (prefix_text && memchr(prefix_text, '/', prefix_length)) return -EINVAL;

  cedar_ipaddr ip = {0};
  if (parse_v4_address(text, address_length, ip.address) == 0) {
    int prefix = prefix_text ? parse_small_decimal(prefix_text, prefix_length, 2, 32) : 32;
    if (prefix < 0) return -EINVAL;
    ip.prefix = (uint8_t)prefix;
  } else if (parse_v6_address(text, address_length, ip.address) == 0) {
    int prefix = prefix_text ? parse_small_decimal(prefix_text, prefix_length, 3, 128) : 128;
    if (prefix < 0) return -EINVAL;
    ip.is_v6 = true;
    ip.prefix = (uint8_t)prefix;
  } else {
    return -EINVAL;
  }
  *out = ip;
  return 0;
}

bool cedar_ipaddr_is_ipv4(const cedar_ipaddr *ip) {
  return !ip->is_v6;
}
bool cedar_ipaddr_is_ipv6(const cedar_ipaddr *ip) {
  return ip->is_v6;
}

/* First (host bits cleared) or last (host bits set) address of ip's range, in 16 bytes. */
static void range_bound(const cedar_ipaddr *ip, bool last, uint8_t out[16]) {
  unsigned width = ip->is_v6 ? 128 : 32;
  memcpy(out, ip->address, 16);
  for (unsigned bit = ip->prefix; bit < width; bit++) {
    uint8_t mask = (uint8_t)(0x80u >> (bit % 8));
    if (last)
      out[bit / 8] |= mask;
    else
      out[bit / 8] &= (uint8_t)~mask;
  }
}

bool cedar_ipaddr_is_in_range(const cedar_ipaddr *ip, const cedar_ipaddr *range) {
  if (ip->is_v6 != range->is_v6) return false;
  size_t bytes = ip->is_v6 ? 16 : 4;
  uint8_t ip_low[16], ip_high[16], range_low[16], range_high[16];
  range_bound(ip, false, ip_low);
  range_bound(ip, true, ip_high);
  range_bound(range, false, range_low);
  range_bound(range, true, range_high);
  return memcmp(range_low, ip_low, bytes) <= 0 && memcmp(ip_high, range_high, bytes) <= 0;
}

bool cedar_ipaddr_is_loopback(const cedar_ipaddr *ip) {
  static const cedar_ipaddr v4 = {false, 8, {127}};
  static const cedar_ipaddr v6 = {true, 128, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  return cedar_ipaddr_is_in_range(ip, ip->is_v6 ? &v6 : &v4);
}

bool cedar_ipaddr_is_multicast(const cedar_ipaddr *ip) {
  static const cedar_ipaddr v4 = {false, 4, {224}};
  static const cedar_ipaddr v6 = {true, 8, {0xff}};
  return cedar_ipaddr_is_in_range(ip, ip->is_v6 ? &v6 : &v4);
}

bool cedar_ipaddr_equal(const cedar_ipaddr *a, const cedar_ipaddr *b) {
  return a->is_v6 == b->is_v6 && a->prefix == b->prefix && memcmp(a->address, b->address, 16) == 0;
}

int cedar_ipaddr_compare(const cedar_ipaddr *a, const cedar_ipaddr *b) {
  if (a->is_v6 != b->is_v6) return a->is_v6 ? 1 : -1;
  int c = memcmp(a->address, b->address, 16);
  if (c) return c;
  return (int)a->prefix - (int)b->prefix;
}

size_t cedar_ipaddr_format(const cedar_ipaddr *ip, bool with_prefix, char *buf, size_t size) {
  char text[64];
  size_t n = 0;
  if (!ip->is_v6) {
    n = (size_t)snprintf(text, sizeof text, "%u.%u.%u.%u", ip->address[0], ip->address[1], ip->address[2],
                         ip->address[3]);
  } else {
    uint16_t groups[8];
    for (int i = 0; i < 8; i++) groups[i] = (uint16_t)(ip->address[2 * i] << 8 | ip->address[2 * i + 1]);
    /* RFC 5952: compress the longest run (first on ties) of two or more zero groups. */
    int best = -1, best_length = 1;
    for (int i = 0; i < 8;) {
      if (groups[i]) {
        i++;
        continue;
      }
      int j = i;
      while (j < 8 && !groups[j]) j++;
      if (j - i > best_length) best = i, best_length = j - i;
      i = j;
    }
    for (int i = 0; i < 8; i++) {
      if (i == best) {
        n += (size_t)snprintf(text + n, sizeof text - n, "::");
        i += best_length - 1;
        continue;
      }
      bool after_gap = best >= 0 && i == best + best_length;
      n += (size_t)snprintf(text + n, sizeof text - n, "%s%x", (i == 0 || after_gap) ? "" : ":", groups[i]);
    }
  }
  if (with_prefix) n += (size_t)snprintf(text + n, sizeof text - n, "/%u", ip->prefix);
  if (size) snprintf(buf, size, "%s", text);
  return n;
}
