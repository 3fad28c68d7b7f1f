#include "supervisor/common/utf8.h"

#include <stdlib.h>
#include <string.h>

/* Length of the well-formed sequence starting at s[0] (RFC 3629 section 4), or 0. */
static size_t sequence_length(const unsigned char *s, size_t available) {
  unsigned char c = s[0];
  size_t need = c < 0x80                   ? 1
                : (c >= 0xc2 && c <= 0xdf) ? 2
                : (c >= 0xe0 && c <= 0xef) ? 3
                : (c >= 0xf0 && c <= 0xf4) ? 4
                                           : 0;
  if (need == 0 || need > available) return 0;
  for (size_t k = 1; k < need; k++)
    if ((s[k] & 0xc0) != 0x80) return 0;
  if (need == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))) return 0;
  if (need == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))) return 0;
  return need;
}

char *dome_utf8_sanitize(const char *data, size_t length, bool replace_nul, size_t *out_length) {
  char *out = malloc(length * 3 + 1);
  if (out == NULL) return NULL;
  const unsigned char *s = (const unsigned char *)data;
  size_t o = 0;
  for (size_t i = 0; i < length;) {
    size_t need = sequence_length(s + i, length - i);
    if (need > 0 && !(replace_nul && s[i] == 0)) {
      memcpy(out + o, s + i, need);
      o += need;
      i += need;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  out[o] = '\0';
  if (out_length) *out_length = o;
  return out;
}

size_t dome_utf8_incomplete_tail(const char *data, size_t length) {
  const unsigned char *s = (const unsigned char *)data;
  for (size_t back = 1; back <= 3 && back <= length; back++) {
    unsigned char c = s[length - back];
    if ((c & 0xc0) == 0x80) continue; /* a continuation byte: look further back */
    size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    return need > back ? back : 0;
  }
  return 0;
}

char *dome_utf8_sanitize_chunk(char carry[4], size_t *carry_length, const char *data, size_t length,
                               bool replace_nul, size_t *out_length) {
  size_t total = *carry_length + length;
  char *joined = malloc(total + 1);
  if (joined == NULL) return NULL;
  memcpy(joined, carry, *carry_length);
  memcpy(joined + *carry_length, data, length);
  size_t tail = dome_utf8_incomplete_tail(joined, total);
  char *out = dome_utf8_sanitize(joined, total - tail, replace_nul, out_length);
  if (out != NULL) {
    memcpy(carry, joined + total - tail, tail);
    *carry_length = tail;
  }
  free(joined);
  return out;
}
