/* The cmocka fixture of the control store's tests: each test gets a fresh temporary directory
 * (`directory`), removed with what the store wrote there; open_store opens a store on it. */
#ifndef DOME_TESTS_UNIT_CONTROL_STORE_FIXTURE_H
#define DOME_TESTS_UNIT_CONTROL_STORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/control/control.h"

static char directory[] = "/tmp/dome-test-store-XXXXXX";

static int setup(void **state) {
  (void)state;
  strcpy(directory, "/tmp/dome-test-store-XXXXXX");
  return mkdtemp(directory) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  return system(command) == 0 ? 0 : -1;
}

static control_store *open_store(void) {
  control_store *store = NULL;
  dome_error err = {0};
  assert_int_equal(control_store_open(directory, &store, &err), 0);
  return store;
}

#endif
