/* The lines a jail adds to a program's stderr when one of its limits ended or hindered the program
 * (jail.h jail_limit_notice): the agent reading only the output learns which limit, and its value. */
#include <inttypes.h>
#include <stdio.h>

#include "supervisor/jail/jail.h"

/* Bytes as the largest IEC unit that divides them ("256 MiB", "1536 KiB", "1000 bytes"). */
static void format_bytes(uint64_t bytes, char *buffer, size_t size) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  unsigned index = 0;
  while (index < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    index++;
  }
  snprintf(buffer, size, "%" PRIu64 " %s", bytes, units[index]);
}

size_t jail_limit_notice(const struct jail_result *result, char *buffer, size_t size) {
  char memory[48];
  format_bytes(result->limits.memory_bytes, memory, sizeof memory);
  char timeout[48];
  if (result->limits.timeout_ms % 1000 == 0)
    snprintf(timeout, sizeof timeout, "%" PRIu64 " s", result->limits.timeout_ms / 1000);
  else
    snprintf(timeout, sizeof timeout, "%.3g s", (double)result->limits.timeout_ms / 1000.0);
  size_t total = 0;
  char line[160];
  if (size) buffer[0] = '\0';
  for (int which = 0; which < 3; which++) {
    int n = 0;
    if (which == 0 && result->oom_killed)
      n = snprintf(line, sizeof line, "dome: killed: out of memory (limit %s)\n", memory);
    else if (which == 1 && result->pids_limited)
      n = snprintf(line, sizeof line, "dome: fork failed: pids limit reached (limit %" PRIu32 " processes)\n",
                   result->limits.pids);
    else if (which == 2 && result->timed_out)
      n = snprintf(line, sizeof line, "dome: killed: timeout (limit %s)\n", timeout);
    if (n <= 0) continue;
    if (total < size) snprintf(buffer + total, size - total, "%s", line);
    total += (size_t)n;
  }
  return total;
}
