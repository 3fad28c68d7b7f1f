/* Private helpers shared by the files of policy/tables/ (not part of the public interface). */
#ifndef DOME_POLICY_TABLES_INTERNAL_H
#define DOME_POLICY_TABLES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/tables/tables.h"

/* Absolute, no empty/"."/".." components, no trailing '/' except "/" itself. */
bool dome_rule_tables_path_is_normalized(const char *path);

/* "10.0.0.0/8" or "2001:db8::/32". Returns 0 or -EINVAL. */
int dome_rule_tables_format_prefix(const struct dome_net_entry *entry, char *out, size_t size);

#endif
