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

/* Compare guard_shannon_entropy with a threshold as `entropy >= threshold - GUARD_ENTROPY_TOLERANCE`: the
 * table's sum rounds differently from -sum p*log2(p), and a value exactly at a threshold (48 bytes with
 * counts 6,6,6,6 and eight 3s is 3.5 bits) must not fall short of it by a rounding error. */
#define GUARD_ENTROPY_TOLERANCE 1e-9

#endif
