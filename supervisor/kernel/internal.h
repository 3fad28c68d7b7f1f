/* Private helpers shared by the files of supervisor/kernel/ (not part of the public interface). */
#ifndef DOME_KERNEL_INTERNAL_H
#define DOME_KERNEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "supervisor/kernel/kernel.h"

/* Absolute, no empty/"."/".." components, no trailing '/' except "/" itself. */
bool dome_path_is_normalized(const char *path);

/* "10.0.0.0/8" or "2001:db8::/32". Returns 0 or -EINVAL. */
int dome_format_prefix(const struct dome_net_entry *entry, char *out, size_t size);

#endif
