/* Making program output valid UTF-8 for JSON (jansson takes valid UTF-8 only), the way `dome run
 * --json`, domed's results and the journal's exec.output chunks all present it. */
#ifndef DOME_COMMON_UTF8_H
#define DOME_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* A copy of data[0..length) in which every byte that does not start a well-formed UTF-8 sequence
 * (RFC 3629 section 4: no overlongs, no surrogates, nothing above U+10FFFF) is replaced by U+FFFD, one
 * replacement per byte. With replace_nul, NUL bytes are replaced too (for C strings). The result is
 * NUL-terminated; *out_length (may be NULL) receives its length in bytes (at most 3 * length).
 * Returns NULL when out of memory. */
char *dome_utf8_sanitize(const char *data, size_t length, bool replace_nul, size_t *out_length);

/* Bytes (0..3) at the end of data[0..length) that form the start of a multi-byte sequence not yet
 * complete: a streaming reader keeps them for the next chunk so the text does not depend on where reads
 * cut the stream. */
size_t dome_utf8_incomplete_tail(const char *data, size_t length);

/* dome_utf8_sanitize of carry[0..*carry_length) + data[0..length), except that an incomplete sequence at
 * the end (dome_utf8_incomplete_tail) is left in carry for the next chunk instead of being replaced.
 * Returns the new string (*out_length as above), or NULL when out of memory (carry then unchanged). */
char *dome_utf8_sanitize_chunk(char carry[4], size_t *carry_length, const char *data, size_t length,
                               bool replace_nul, size_t *out_length);

#endif
