#include "supervisor/common/edit_distance.h"

#include <string.h>

static size_t smallest(size_t a, size_t b) {
  return a < b ? a : b;
}

size_t dome_edit_distance(const char *a, const char *b) {
  size_t a_length = strnlen(a, DOME_EDIT_DISTANCE_MAX + 1), b_length = strnlen(b, DOME_EDIT_DISTANCE_MAX + 1);
  if (a_length > DOME_EDIT_DISTANCE_MAX || b_length > DOME_EDIT_DISTANCE_MAX) return (size_t)-1;
  /* cost[i + 1][j + 1]: the distance between a[0..i) and b[0..j); row and column 0 hold `infinity`, a
   * bound no edit sequence reaches, so a transposition is never taken from before the strings start. */
  unsigned short cost[DOME_EDIT_DISTANCE_MAX + 2][DOME_EDIT_DISTANCE_MAX + 2];
  /* last_row[c]: the last i (1-based) with a[i - 1] == c among the rows done so far, 0 for none. */
  size_t last_row[256] = {0};
  const size_t infinity = a_length + b_length;
  cost[0][0] = (unsigned short)infinity;
  for (size_t i = 0; i <= a_length; i++) {
    cost[i + 1][0] = (unsigned short)infinity;
    cost[i + 1][1] = (unsigned short)i;
  }
  for (size_t j = 0; j <= b_length; j++) {
    cost[0][j + 1] = (unsigned short)infinity;
    cost[1][j + 1] = (unsigned short)j;
  }
  for (size_t i = 1; i <= a_length; i++) {
    size_t last_column = 0; /* the last j in this row with b[j - 1] == a[i - 1] */
    for (size_t j = 1; j <= b_length; j++) {
      size_t k = last_row[(unsigned char)b[j - 1]], l = last_column;
      size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      if (substitution == 0) last_column = j;
      size_t best = smallest((size_t)cost[i][j] + substitution,
                             smallest((size_t)cost[i + 1][j] + 1, (size_t)cost[i][j + 1] + 1));
      /* a[k - 1] and b[l - 1] swapped, the bytes between them deleted from a and inserted from b. */
      best = smallest(best, (size_t)cost[k][l] + (i - k - 1) + 1 + (j - l - 1));
      cost[i + 1][j + 1] = (unsigned short)best;
    }
    last_row[(unsigned char)a[i - 1]] = i;
  }
  return cost[a_length + 1][b_length + 1];
}
