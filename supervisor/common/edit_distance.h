/* How far apart two short strings are, for "did you mean" suggestions. */
#ifndef DOME_COMMON_EDIT_DISTANCE_H
#define DOME_COMMON_EDIT_DISTANCE_H

#include <stddef.h>

/* Longest string (in bytes) dome_edit_distance compares. */
#define DOME_EDIT_DISTANCE_MAX 64

/* The Damerau-Levenshtein distance between the NUL-terminated strings a and b: the least number of
 * one-byte insertions, deletions and substitutions and of transpositions of two adjacent bytes that
 * turn a into b, where a transposed pair may also have bytes inserted between them (the unrestricted
 * distance: "ca" -> "abc" is 2, where the restricted "optimal string alignment" gives 3). Bytes compare
 * exactly, ASCII case included. Algorithm: R. Lowrance and R. A. Wagner, "An Extension of the
 * String-to-String Correction Problem", J. ACM 22(2), 1975. Bounded: O(|a| |b|) time on the stack.
 * Returns the distance, or (size_t)-1 when either string is longer than DOME_EDIT_DISTANCE_MAX. */
size_t dome_edit_distance(const char *a, const char *b);

#endif
