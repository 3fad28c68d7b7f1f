/* dome-jail-bench: the jail's part of a call, fresh (jail_run) against prepared (jail_prepare made
 * beforehand, off the timed path, then jail_prepared_run), interleaved in one run, and the rate at which
 * one thread prepares jails (what a pool's refill sustains). Needs root, as every jail does.
 *
 *   dome-jail-bench [--runs N] [--refill N] -- PROGRAM [ARG...]
 *
 * Prints, one per line: `fresh_p50_ms X`, `prepared_p50_ms X`, `fresh_program_p50_ms X` (the program's own
 * duration_ms in a fresh jail), `prepared_program_p50_ms X`, `refill_jails_per_second X`, and exits 0;
 * exit 1 when a jail fails (with the error on stderr). A PROGRAM of the form `/abs/python3 -c CODE` is
 * prepared with its interpreter started in advance (jail_config.prepared_python), as domed's pool does: the
 * refill rate then includes the interpreter's start. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/jail/jail.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *values, size_t count) {
  qsort(values, count, sizeof *values, compare);
  return count ? values[count / 2] : 0;
}

int main(int argc, char **argv) {
  size_t runs = 50, refill = 50;
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = strtoul(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--refill") == 0 && i + 1 < argc)
      refill = strtoul(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: dome-jail-bench [--runs N] [--refill N] -- PROGRAM [ARG...]\n");
      return 2;
    }
  }
  if (i + 1 >= argc || runs == 0 || runs > 100000 || refill > 100000) {
    fprintf(stderr, "usage: dome-jail-bench [--runs N] [--refill N] -- PROGRAM [ARG...]\n");
    return 2;
  }
  static char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", NULL};
  struct jail_config config;
  jail_config_init(&config);
  config.argv = argv + i + 1;
  config.env = env;
  const char *program = config.argv[0];
  size_t length = program ? strlen(program) : 0;
  if (program && program[0] == '/' && length >= 7 && strcmp(program + length - 7, "python3") == 0 &&
      config.argv[1] && strcmp(config.argv[1], "-c") == 0)
    config.prepared_python = program;
  double *fresh = calloc(runs, sizeof *fresh), *prepared = calloc(runs, sizeof *prepared);
  double *fresh_program = calloc(runs, sizeof *fresh), *prepared_program = calloc(runs, sizeof *fresh);
  if (!fresh || !prepared || !fresh_program || !prepared_program) return 1;
  dome_error err = {0};
  for (size_t k = 0; k < runs; k++) {
    struct jail_result result;
    double start = now_ms();
    int r = jail_run(&config, &result, &err);
    fresh[k] = now_ms() - start;
    fresh_program[k] = (double)result.duration_ms;
    jail_result_release(&result);
    if (r < 0) {
      fprintf(stderr, "jail_run: %s\n", err.message);
      return 1;
    }
    struct jail_prepared *jail = NULL;
    if (jail_prepare(&config, &jail, &err) < 0) {
      fprintf(stderr, "jail_prepare: %s\n", err.message);
      return 1;
    }
    start = now_ms();
    r = jail_prepared_run(jail, &config, &result, &err);
    prepared[k] = now_ms() - start;
    prepared_program[k] = (double)result.duration_ms;
    bool was_prepared = result.prepared;
    jail_result_release(&result);
    if (r < 0 || !was_prepared) {
      fprintf(stderr, "jail_prepared_run: %s\n", r < 0 ? err.message : "ran in a fresh jail");
      return 1;
    }
  }
  struct jail_prepared **made = calloc(refill ? refill : 1, sizeof *made);
  double start = now_ms();
  for (size_t k = 0; k < refill; k++)
    if (jail_prepare(&config, &made[k], &err) < 0) {
      fprintf(stderr, "jail_prepare: %s\n", err.message);
      return 1;
    }
  double elapsed = now_ms() - start;
  for (size_t k = 0; k < refill; k++) jail_prepared_discard(made[k]);
  printf("fresh_p50_ms %.3f\n", median(fresh, runs));
  printf("prepared_p50_ms %.3f\n", median(prepared, runs));
  printf("fresh_program_p50_ms %.3f\n", median(fresh_program, runs));
  printf("prepared_program_p50_ms %.3f\n", median(prepared_program, runs));
  printf("refill_jails_per_second %.1f\n", refill && elapsed > 0 ? (double)refill * 1e3 / elapsed : 0.0);
  free(made);
  free(fresh);
  free(prepared);
  free(fresh_program);
  free(prepared_program);
  return 0;
}
