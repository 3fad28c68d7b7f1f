/* domed's side of MCP tasks (supervisor/mcp/task.c): the journal events of a task's life, and its
 * record kept across restarts. A record (the task with its outcome: the CallToolResult as redacted
 * for the agent, or the JSON-RPC error) is a blob of the store beside the journal, owned by
 * DOMED_BLOB_OWNER_TASKS; <state_dir>/tasks/<task id> names its digest. At startup every record is
 * handed back to the MCP server (a task that was running becomes failed). A task whose TTL passed loses
 * its file and its blob. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/blob/blob.h"
#include "supervisor/domed/domed.h"

#define DOMED_BLOB_OWNER_TASKS "-tasks"

static bool task_id_valid(const char *id) {
  if (id == NULL || strlen(id) != 64) return false;
  for (const char *c = id; *c; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return false;
  return true;
}

static int index_path(struct domed *domed, const char *task_id, char *path, size_t size) {
  int n = snprintf(path, size, "%s/tasks/%s", domed->config.state_dir, task_id);
  return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

/* The digest the index file of `task_id` names, "" when none. */
static void index_read(struct domed *domed, const char *task_id, char hex[65]) {
  hex[0] = '\0';
  char path[1200];
  if (index_path(domed, task_id, path, sizeof path) < 0) return;
  FILE *file = fopen(path, "re");
  if (file == NULL) return;
  if (fscanf(file, "%64s", hex) != 1) hex[0] = '\0';
  fclose(file);
}

void domed_task_event(void *context, const char *type, const char *agent, const char *gateway,
                      const char *task_id, const char *exec_id, const char *status, const char *reason) {
  struct domed *domed = context;
  json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", type, "agent", agent, "gateway", gateway,
                            "task_id", task_id, "status", status);
  if (exec_id && exec_id[0]) json_object_set_new(event, "exec_id", json_string(exec_id));
  if (reason) json_object_set_new(event, "reason", json_string(reason));
  dome_error err = {0}; /* a refused event is logged and counted by audit.c */
  domed_audit_append_sync(domed, event, &err);
  json_decref(event);
}

int domed_task_save(void *context, const char *task_id, const json_t *record, dome_error *err) {
  struct domed *domed = context;
  if (!task_id_valid(task_id)) return dome_error_set(err, EINVAL, "task id `%.80s`", task_id);
  if (domed->blobs == NULL) return dome_error_set(err, ENODEV, "no blob store");
  char *text = json_dumps(record, JSON_COMPACT) /* member order kept: the result answers in the same bytes */;
  if (text == NULL) return dome_error_set(err, ENOMEM, "encode the task record");
  size_t length = strlen(text);
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)text, length);
  char hex[65], old[65];
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  int rc = blob_store_put(domed->blobs, DOMED_BLOB_OWNER_TASKS, 0, text, length, hex, err);
  free(text);
  if (rc == 0) return -EDQUOT; /* *err says which quota */
  if (rc < 0) return rc;
  char directory[1100], path[1200], temp[1300];
  snprintf(directory, sizeof directory, "%s/tasks", domed->config.state_dir);
  if (mkdir(directory, 0700) < 0 && errno != EEXIST)
    return dome_error_set_errno(err, errno, "mkdir `%s`", directory);
  if (index_path(domed, task_id, path, sizeof path) < 0)
    return dome_error_set(err, ENAMETOOLONG, "task path");
  index_read(domed, task_id, old);
  snprintf(temp, sizeof temp, "%s.tmp", path);
  int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", temp);
  bool written = write(fd, hex, 64) == 64 && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
  close(fd);
  if (!written || rename(temp, path) < 0) {
    int saved = errno;
    unlink(temp);
    return dome_error_set_errno(err, saved ? saved : EIO, "write `%s`", path);
  }
  if (old[0] && strcmp(old, hex) != 0) {
    dome_error ignored = {0};
    blob_store_release(domed->blobs, DOMED_BLOB_OWNER_TASKS, old, &ignored);
  }
  return 0;
}

void domed_task_delete(void *context, const char *task_id) {
  struct domed *domed = context;
  if (!task_id_valid(task_id)) return;
  char hex[65], path[1200];
  index_read(domed, task_id, hex);
  if (index_path(domed, task_id, path, sizeof path) == 0) unlink(path);
  dome_error ignored = {0};
  if (hex[0] && domed->blobs) blob_store_release(domed->blobs, DOMED_BLOB_OWNER_TASKS, hex, &ignored);
}

int domed_tasks_restore(struct domed *domed) {
  char directory[1100];
  snprintf(directory, sizeof directory, "%s/tasks", domed->config.state_dir);
  DIR *dir = opendir(directory);
  if (dir == NULL) return 0;
  int restored = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (!task_id_valid(entry->d_name)) continue;
    char hex[65];
    index_read(domed, entry->d_name, hex);
    char *text = NULL;
    size_t length = 0;
    dome_error err = {0};
    json_t *record = NULL;
    if (hex[0] && blob_content_get(domed->config.journal_dir, hex, &text, &length, &err) == 0)
      record = json_loadb(text, length, 0, NULL);
    free(text);
    if (record == NULL || mcp_server_task_restore(domed->mcp, record, &err) < 0) {
      domed_log("warn", "tasks", "task=%s msg=\"not restored: %s\"", entry->d_name,
                err.message[0] ? err.message : "record unreadable");
      domed_task_delete(domed, entry->d_name);
    } else {
      restored++;
    }
    json_decref(record);
  }
  closedir(dir);
  return restored;
}

void domed_task_limits(void *context, const mcp_identity *identity, const char *tool, uint64_t *max_ttl_ms,
                       unsigned *max_tasks) {
  struct domed *domed = context;
  (void)identity;
  if (strcmp(tool, DOMED_EXECUTE_TOOL) != 0) return; /* a backend's tool: domed's bounds */
  struct control_quota quota;
  control_quota_get(domed->store, DOMED_BUILTIN_CAPABILITY, &quota);
  if (quota.task_ttl_ms && quota.task_ttl_ms < *max_ttl_ms) *max_ttl_ms = quota.task_ttl_ms;
  if (quota.tasks && quota.tasks < *max_tasks) *max_tasks = quota.tasks;
}
