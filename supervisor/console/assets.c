/* The console's web files, built into the binary: $(BUILD)/gen/supervisor/console/console_assets.h is
 * generated from console/ by supervisor/console/module.mk (no file to install, nothing fetched). */
#include <string.h>

#include "supervisor/console/console.h"
#include "supervisor/console/console_assets.h"

const struct console_asset *console_asset_find(const char *path) {
  if (path == NULL) return NULL;
  for (size_t i = 0; i < sizeof console_assets / sizeof console_assets[0]; i++)
    if (strcmp(console_assets[i].path, path) == 0) return &console_assets[i];
  return NULL;
}
