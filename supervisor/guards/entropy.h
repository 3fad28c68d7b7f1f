/* Shannon entropy of short values (generic-secret's validator). */
#ifndef DOME_GUARDS_ENTROPY_H
#define DOME_GUARDS_ENTROPY_H

#include <stddef.h>

/* The longest value guard_shannon_entropy measures, in bytes (generic-secret's values are 12-128). */
#define GUARD_ENTROPY_MAX_LENGTH 256

/* Shannon entropy of `length` bytes at `data`, in bits per byte: log2(n) - (1/n) * sum of c*log2(c) over
 * the count c of each distinct byte (Shannon 1948, section 6), with log2 of whole numbers from a table
 * made at build time. 0.0 when length is 0 or over GUARD_ENTROPY_MAX_LENGTH. */
double guard_shannon_entropy(const char *data, size_t length);

#endif
