/* Denial events: the BPF ring buffer `events` turned into struct dome_denial for the supervisor. */
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bpf/dome.h"
#include "dome.skel.h"
#include "supervisor/kernel/loader.h"

const char *dome_hook_name(enum dome_hook hook) {
  switch (hook) {
    case DOME_HOOK_CONNECT4:
      return "connect4";
    case DOME_HOOK_CONNECT6:
      return "connect6";
    case DOME_HOOK_SENDMSG4:
      return "sendmsg4";
    case DOME_HOOK_SENDMSG6:
      return "sendmsg6";
    case DOME_HOOK_BIND4:
      return "bind4";
    case DOME_HOOK_BIND6:
      return "bind6";
    case DOME_HOOK_SOCK_CREATE:
      return "sock_create";
    case DOME_HOOK_EGRESS:
      return "egress";
    case DOME_HOOK_FILE_OPEN:
      return "file_open";
    case DOME_HOOK_FILE_RECEIVE:
      return "file_receive";
    case DOME_HOOK_BPRM_CHECK:
      return "bprm_check_security";
    case DOME_HOOK_SOCKET_CONNECT:
      return "socket_connect";
    case DOME_HOOK_PTRACE:
      return "ptrace_access_check";
    case DOME_HOOK_TASK_KILL:
      return "task_kill";
    case DOME_HOOK_BPF:
      return "bpf";
    case DOME_HOOK_FILE_PERMISSION:
      return "file_permission";
    case DOME_HOOK_SOCKET_CREATE:
      return "socket_create";
    case DOME_HOOK_PATH_LINK:
      return "path_link";
    case DOME_HOOK_PATH_RENAME:
      return "path_rename";
  }
  return "?";
}

static const struct dome_rule_tables *tables_of(const struct dome_kernel *kernel, uint32_t generation) {
  if (generation == 0) return NULL;
  for (size_t i = 0; i < DOME_KERNEL_MAX_RULESETS; i++) {
    const struct dome_kernel_ruleset *r = &kernel->rulesets[i];
    if (r->generation == generation) return &r->current;
    if (r->previous_generation == generation) return &r->previous;
    if (r->shadow_generation == generation) return &r->shadow;
    if (r->previous_shadow_generation == generation) return &r->previous_shadow;
  }
  return NULL;
}

/* The determining Cedar policy of entry `entry` (-1: none) of a network or file table. */
static const char *policy_of(const struct dome_rule_tables *tables, bool network, long entry) {
  if (tables == NULL || entry < 0) return NULL;
  size_t count = network ? tables->net_count : tables->file_count;
  if ((size_t)entry >= count) return NULL;
  uint32_t p = network ? tables->net[entry].policy_index : tables->files[entry].policy_index;
  return p != DOME_NO_POLICY && p < tables->policy_count ? tables->policy_ids[p] : NULL;
}

enum dome_hook_kind dome_hook_kind(enum dome_hook hook) {
  switch (hook) {
    case DOME_HOOK_CONNECT4:
    case DOME_HOOK_CONNECT6:
    case DOME_HOOK_SENDMSG4:
    case DOME_HOOK_SENDMSG6:
    case DOME_HOOK_BIND4:
    case DOME_HOOK_BIND6:
    case DOME_HOOK_SOCKET_CONNECT:
      return DOME_HOOK_KIND_NETWORK;
    case DOME_HOOK_FILE_OPEN:
    case DOME_HOOK_FILE_RECEIVE:
    case DOME_HOOK_BPRM_CHECK:
    case DOME_HOOK_FILE_PERMISSION:
    case DOME_HOOK_PATH_LINK:
    case DOME_HOOK_PATH_RENAME:
      return DOME_HOOK_KIND_FILE;
    case DOME_HOOK_SOCK_CREATE:
    case DOME_HOOK_EGRESS:
    case DOME_HOOK_PTRACE:
    case DOME_HOOK_TASK_KILL:
    case DOME_HOOK_BPF:
    case DOME_HOOK_SOCKET_CREATE:
      break;
  }
  return DOME_HOOK_KIND_OTHER;
}

static bool is_net_hook(uint32_t hook) {
  return dome_hook_kind((enum dome_hook)hook) == DOME_HOOK_KIND_NETWORK;
}

static bool is_file_hook(uint32_t hook) {
  return dome_hook_kind((enum dome_hook)hook) == DOME_HOOK_KIND_FILE;
}

static int on_event(void *context, void *data, size_t size) {
  struct dome_kernel *kernel = context;
  if (size < sizeof(struct dome_event)) return 0;
  const struct dome_event *event = data;
  struct dome_denial *denial = kernel->denial;
  memset(denial, 0, sizeof(*denial));
  denial->time_ns = event->time_ns;
  denial->cgroup_id = event->cgroup_id;
  denial->pid = event->pid;
  denial->hook = (enum dome_hook)event->hook;
  denial->entry = event->entry == DOME_BPF_NO_ENTRY ? -1 : (long)event->entry;
  denial->kind = event->kind == DOME_EVENT_SHADOW ? DOME_EVENT_SHADOW : DOME_EVENT_DENIAL;
  denial->shadow_entry = event->shadow_entry == DOME_BPF_NO_ENTRY ? -1 : (long)event->shadow_entry;
  if (denial->kind == DOME_EVENT_SHADOW) {
    denial->allowed = event->decision == DOME_DECISION_ALLOW;
    denial->shadow_allowed = event->shadow_decision == DOME_DECISION_ALLOW;
    denial->shadow_policy_id = policy_of(tables_of(kernel, event->shadow_generation),
                                         is_net_hook(event->hook), denial->shadow_entry);
  }
  const struct dome_rule_tables *tables = tables_of(kernel, event->generation);
  if (is_net_hook(event->hook) && event->family != 0) {
    char address[INET6_ADDRSTRLEN] = "?";
    inet_ntop(event->family == 4 ? AF_INET : AF_INET6, event->address, address, sizeof(address));
    snprintf(denial->object, sizeof(denial->object), event->family == 4 ? "%s:%u" : "[%s]:%u", address,
             event->port);
    denial->net_action = (enum dome_net_action)event->action;
    denial->policy_id = policy_of(tables, true, denial->entry);
  } else if (is_file_hook(event->hook)) {
    snprintf(denial->object, sizeof(denial->object), "%.*s", (int)sizeof(event->path), event->path);
    denial->file_access = (enum dome_file_access)event->action;
    denial->policy_id = policy_of(tables, false, denial->entry);
  } else if (event->hook == DOME_HOOK_SOCK_CREATE || event->hook == DOME_HOOK_SOCKET_CREATE ||
             event->hook == DOME_HOOK_SOCKET_CONNECT) {
    snprintf(denial->object, sizeof(denial->object), "family %u type %u", event->extra, event->port);
  } else if (event->hook == DOME_HOOK_EGRESS) {
    snprintf(denial->object, sizeof(denial->object), "egress quota (packet of %u bytes dropped)",
             event->extra);
  } else if (event->hook == DOME_HOOK_PTRACE || event->hook == DOME_HOOK_TASK_KILL) {
    snprintf(denial->object, sizeof(denial->object), "pid %u", event->extra);
  } else if (event->hook == DOME_HOOK_BPF) {
    snprintf(denial->object, sizeof(denial->object), "bpf command %u", event->extra);
  }
  kernel->delivered++;
  if (kernel->denial_fn) kernel->denial_fn(kernel->denial_context, denial);
  return 0;
}

int dome_kernel_events_open(struct dome_kernel *kernel, dome_error *err) {
  kernel->denial = calloc(1, sizeof(*kernel->denial));
  if (!kernel->denial) return dome_error_set_errno(err, ENOMEM, "denial events");
  kernel->ring = ring_buffer__new(bpf_map__fd(kernel->skel->maps.events), on_event, kernel, NULL);
  if (!kernel->ring) return dome_error_set_errno(err, errno, "open the denial ring buffer");
  return 0;
}

void dome_kernel_events_close(struct dome_kernel *kernel) {
  ring_buffer__free(kernel->ring);
  kernel->ring = NULL;
  free(kernel->denial);
  kernel->denial = NULL;
}

int dome_kernel_denial_fd(const struct dome_kernel *kernel) {
  return ring_buffer__epoll_fd(kernel->ring);
}

int dome_kernel_poll_denials(struct dome_kernel *kernel, int timeout_ms, dome_denial_fn fn, void *context,
                             dome_error *err) {
  kernel->denial_fn = fn;
  kernel->denial_context = context;
  kernel->delivered = 0;
  int r = ring_buffer__poll(kernel->ring, timeout_ms);
  kernel->denial_fn = NULL;
  if (r < 0 && r != -EINTR) return dome_error_set_errno(err, -r, "poll denial events");
  return (int)kernel->delivered;
}
