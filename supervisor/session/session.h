/* supervisor/session — what a sandbox session adds to one execution: a jail that outlives a call.
 *
 * A session is one jail (started by the caller through supervisor/exec, kept running for the session's
 * life) whose program is the launcher below: a Jupyter kernel (Debian's python3-ipykernel) beside a small
 * server that runs bash/sh programs as new processes of the same jail. This library holds the parts that
 * know nothing of MCP or of domed:
 *   - the Jupyter client: the messaging protocol 5.3 over ZeroMQ (libzmq, ipc transport through a socket
 *     directory inside the jail's own /tmp, reached through an fd of the jail's root), every message
 *     signed with HMAC-SHA256 (libsodium) under a key made per session;
 *   - the process runner client (one JSON line each way over a unix socket in the same directory);
 *   - the file operations of the file tools, relative to the jail's /workspace, never following a
 *     symlink, never leaving /workspace, refusing special files;
 *   - the table of live sessions: owners, deadlines (idle, lifetime), counts per agent.
 *
 * Jupyter messaging: https://jupyter-client.readthedocs.io/en/stable/messaging.html (wire protocol,
 * execute_request/reply, iopub stream/display_data/execute_result/error/status, interrupt_request on the
 * control channel, kernel_info_request). Thread safety: a kernel handle is used by one thread at a time
 * (the caller serialises a session's calls); the table locks itself. */
#ifndef DOME_SESSION_SESSION_H
#define DOME_SESSION_SESSION_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/common/error.h"

/* Inside the jail: the socket directory (mode 0700, in the jail's own /tmp tmpfs: nothing on the host). */
#define SESSION_SOCKET_DIR "/tmp/.dome-session"
/* Session ids: "ses_" and 32 lowercase hex digits (128 random bits). */
#define SESSION_ID_SIZE 37
/* Largest single file of the file tools (read or written), bytes. */
#define SESSION_FILE_MAX (16u << 20)
/* Entries list_files returns at most. */
#define SESSION_LIST_MAX 4096u

/* ---- the program of a session's jail ------------------------------------------------------------- */

/* The launcher (Python source run by /usr/bin/python3 -c inside the jail), which becomes the kernel. It
 * makes SESSION_SOCKET_DIR (0700) and waits for the kernel's connection file there (connection.json,
 * written by domed through the jail's root with session_connection_write: no stdin, no environment
 * variable, so that the key is in neither the journal nor /proc), serves
 * SESSION_SOCKET_DIR/run from a thread: one JSON line {argv, timeout_ms, output_bytes} per connection,
 * answered with {stdout, stderr, exit_code, signal, timed_out, truncated} once the process (its whole
 * process group) ended; writes its start-up marks to SESSION_SOCKET_DIR/phases.json ({start, runner,
 * imported}: CLOCK_REALTIME seconds) and runs the kernel (ipykernel's kernelapp, without its debugger,
 * jedi, the terminal front end and the history database) in its main thread. The jail ends when the
 * kernel exits. */
extern const char session_launcher_source[];

/* The launcher's imports (ipykernel, with its stubs), which need nothing of a call: a prepared session jail
 * runs them before its call (jail_config.prepared_python_preload), the launcher again (a no-op then). */
extern const char session_launcher_preload[];

/* The program of a session's jail (a new string, NULL when out of memory): the launcher, run as a fresh
 * jail's program, preceded by what makes it a prepared session jail's interpreter program
 * (jail_config.prepared_python_program): when fds 3 and 4 are open (a prepared jail; a fresh jail's program
 * has them closed) it runs session_launcher_preload and then `bootstrap` (jail_python_waiting_program: it
 * waits for the call, which is this same program, and runs it, fds 3 and 4 closed) and exits with it. Either
 * way the kernel's command line is this program. */
char *session_launcher_program(const char *bootstrap);

/* Write the connection file `text` into the jail whose root is root_fd (an O_PATH fd of /proc/PID/root):
 * SESSION_SOCKET_DIR/connection.json, made as a temporary file owned as that directory is and renamed
 * into place, so that the launcher reads it whole. Never follows a symlink. Returns 0, -ENOENT while the
 * launcher has not made the directory yet, or -errno. */
int session_connection_write(int root_fd, const char *text, dome_error *err);

/* The environment the launcher needs (IPython, Jupyter and matplotlib state in /tmp, not in the
 * agent's /workspace). A new object. */
json_t *session_launcher_env(void);

/* A fresh connection file: ipc transport at SESSION_SOCKET_DIR/kernel-<port>, a 256-bit key as 64 hex
 * digits in `key` (65 bytes with the NUL). Returns the JSON text (malloc'd) or NULL (out of memory). */
char *session_connection_file(char key[65]);

/* ---- the Jupyter client -------------------------------------------------------------------------- */

struct session_kernel;

/* Connect to the kernel whose sockets are in `socket_dir` (a host path reaching the jail's
 * SESSION_SOCKET_DIR, e.g. "/proc/self/fd/12/tmp/.dome-session", at most 80 bytes) with `key` and wait
 * until it answers a kernel_info_request on shell and publishes on iopub (the subscription is then
 * established: no output is lost), at most timeout_ms milliseconds. cancel_fd (-1: none) readable stops
 * the wait. Returns 0 with *kernel, or -ETIMEDOUT, -ECANCELED, -ENAMETOOLONG, -ENOMEM, -errno of ZeroMQ. */
int session_kernel_connect(const char *socket_dir, const char *key, uint64_t timeout_ms, int cancel_fd,
                           struct session_kernel **kernel, dome_error *err);

/* How a cell ends. */
struct session_cell_options {
  uint64_t timeout_ms;   /* wall clock; then the cell is interrupted (interrupt_request) */
  int cancel_fd;         /* readable: interrupt the cell (-1: none) */
  int end_fd;            /* readable: the session is over, the cell returns -EPIPE at once (-1: none) */
  size_t output_bytes;   /* bytes of stdout and of stderr kept each; the rest counted (0: 1 MiB) */
  size_t rich_bytes;     /* bytes of all display data kept (base64 text as sent; 0: 8 MiB) */
  uint64_t interrupt_ms; /* how long an interrupted cell may take to answer before the kernel is given
                            up (0: 5000) */
};

/* Run `code` as one cell (execute_request, store_history, no stdin) and collect what the kernel sends
 * for it: stream (stdout/stderr), execute_result and display_data (their `data` bundles), error (ename,
 * evalue, traceback), until its execute_reply and its status idle. On timeout or cancellation the cell
 * is interrupted with an interrupt_request on the control channel (the kernel raises KeyboardInterrupt;
 * its variables stay) and its reply awaited up to interrupt_ms.
 * *cell (new reference): {stdout, stderr, outputs: [{data: {mime: value}, metadata, kind}], status
 * ("ok", "error", "aborted"), error?: {ename, evalue, traceback}, execution_count, timed_out, cancelled,
 * interrupted, truncated, duration_ms}. Returns 0, or -EPIPE when the kernel stopped answering (the
 * session is lost), -ENOMEM, -errno of ZeroMQ. */
int session_kernel_execute(struct session_kernel *kernel, const char *code,
                           const struct session_cell_options *options, json_t **cell, dome_error *err);

void session_kernel_close(struct session_kernel *kernel);

/* ---- the process runner -------------------------------------------------------------------------- */

/* Run argv (NULL-terminated) as a new process of the session's jail through the launcher's socket at
 * `socket_path` (a host path reaching SESSION_SOCKET_DIR/run). timeout_ms bounds it (then its process
 * group is killed); cancel_fd readable kills it too. *result (new reference): {stdout, stderr,
 * exit_code, signal, timed_out, cancelled, truncated, duration_ms}. Returns 0, or -ECONNREFUSED /
 * -ENOENT (the launcher is gone), -EPROTO (an answer that is not the protocol), -ENOMEM. */
int session_run_process(const char *socket_path, char *const *argv, uint64_t timeout_ms, int cancel_fd,
                        size_t output_bytes, json_t **result, dome_error *err);

/* ---- files of /workspace ------------------------------------------------------------------------- */

/* A path of the file tools: relative, at most 4096 bytes and 32 components, valid UTF-8, no empty,
 * "." or ".." component, no NUL. Returns 0 or -EINVAL naming the path and the reason. */
int session_path_check(const char *path, dome_error *err);

/* Write `length` bytes to `path` beneath the directory workspace_fd (an O_DIRECTORY fd of the jail's
 * /workspace), creating parent directories (0755) and the file (0644), both owned as workspace_fd is
 * (the jail's root). Never follows a symlink, never crosses a mount, refuses to replace anything but a
 * regular file. Returns 0, or -EINVAL (path), -ELOOP (a symlink on the way), -EEXIST (a non-regular
 * file there), -EFBIG (over SESSION_FILE_MAX), -ENOSPC (the workspace is full), -errno. *err names the
 * path. */
int session_file_write(int workspace_fd, const char *path, const void *data, size_t length, dome_error *err);

/* Read the regular file `path` beneath workspace_fd, at most `max` bytes (else -EFBIG). *data is
 * malloc'd, NUL-terminated (not counted in *length). Errors as session_file_write, -ENOENT, -EISDIR,
 * -EPERM (a special file). */
int session_file_read(int workspace_fd, const char *path, size_t max, char **data, size_t *length,
                      dome_error *err);

/* Entries beneath `path` ("" or NULL: the whole workspace), depth-first, sorted per directory, at most
 * SESSION_LIST_MAX: [{path, type: "file"|"directory"|"symlink"|"other", size}] (symlinks listed, never
 * followed). *truncated says whether entries were left out. New reference or NULL with *err. */
json_t *session_file_list(int workspace_fd, const char *path, bool *truncated, dome_error *err);

/* Remove the file, symlink or empty directory `path` (a symlink itself, never its target). */
int session_file_delete(int workspace_fd, const char *path, dome_error *err);

/* ---- file-only snapshots ------------------------------------------------------------------------- */

/* Write the regular files and directories of /workspace (beneath workspace_fd; symlinks and special
 * files are left out, nothing is followed) with `header` (borrowed: who made it) to `file_path` as one
 * zstd frame of JSON, written to a temporary file, fsynced and renamed into place (mode 0600). At most
 * max_bytes of file content (else -EFBIG, nothing written). *summary (new reference): {files,
 * directories, bytes, stored_bytes}. */
int session_snapshot_write(int workspace_fd, const char *file_path, uint64_t max_bytes, json_t *header,
                           json_t **summary, dome_error *err);

/* The archive of `file_path` (new reference: {header, directories, files}), bounded by max_bytes of file
 * content; NULL with *err (-ENOENT, -EFBIG, -EPROTO: not a snapshot). */
json_t *session_snapshot_read(const char *file_path, uint64_t max_bytes, dome_error *err);

/* Write the archive's directories and files into workspace_fd with session_file_write's rules. */
int session_snapshot_restore(json_t *archive, int workspace_fd, dome_error *err);

/* ---- the table of live sessions ------------------------------------------------------------------ */

struct session_entry {
  char id[SESSION_ID_SIZE];
  char agent[256];
  char capability[128];
  uint64_t created_ms;   /* CLOCK_REALTIME, milliseconds */
  uint64_t last_used_ms; /* CLOCK_MONOTONIC, milliseconds */
  uint64_t created_mono_ms;
  uint64_t idle_ms;     /* 0: never idle-expired */
  uint64_t lifetime_ms; /* 0: no lifetime */
  unsigned busy;        /* calls running in it */
  bool closing;         /* removed from use: no new call enters */
  bool lost;            /* its jail ended by itself (set under the table's lock): reaped as "lost" */
  void *owner;          /* the caller's session object */
  json_t *detail;       /* the owner's, changed only under the table's lock: members added to its
                           session_table_list item as they are (NULL: none) */
  struct session_entry *next;
};

struct session_table {
  pthread_mutex_t lock;
  struct session_entry *head;
  size_t count;
};

void session_table_init(struct session_table *table);
void session_table_destroy(struct session_table *table);

/* A new random id (SESSION_ID_SIZE bytes with the NUL). */
void session_new_id(char id[SESSION_ID_SIZE]);

/* Add `entry` (caller-owned, filled) unless its agent already holds `max_per_agent` sessions of which
 * none is closing (0: no limit). Returns 0, or -EDQUOT with *err naming the quota. */
int session_table_add(struct session_table *table, struct session_entry *entry, unsigned max_per_agent,
                      dome_error *err);

/* The entry of `id` owned by `agent` (NULL: any agent), not closing, with busy incremented and
 * last_used_ms refreshed; NULL when there is none (another agent's session is not found either). Give it
 * back with session_table_put. */
struct session_entry *session_table_get(struct session_table *table, const char *id, const char *agent);
void session_table_put(struct session_table *table, struct session_entry *entry);

/* As session_table_get for any agent, without refreshing last_used_ms (domed's own work on a session, e.g. a
 * rules change, does not keep it from going idle); give it back with session_table_unhold. */
struct session_entry *session_table_hold(struct session_table *table, const char *id);
void session_table_unhold(struct session_table *table, struct session_entry *entry);

/* Mark `id` (of `agent`, NULL: any) closing and unlink it; returns the entry (the caller ends it once its
 * busy count is 0 — session_table_wait_idle) or NULL. */
struct session_entry *session_table_take(struct session_table *table, const char *id, const char *agent);

/* Wait until no call runs in `entry` (taken). */
void session_table_wait_idle(struct session_table *table, struct session_entry *entry);

/* Unlink and return the first entry that is lost or past a deadline at now (CLOCK_MONOTONIC ms), or
 * NULL; *reason "lost", "idle" or "lifetime". Busy sessions are not idle. */
struct session_entry *session_table_take_expired(struct session_table *table, uint64_t now_ms,
                                                 const char **reason);

/* Sessions of `agent` (NULL: all): [{session_id, agent, capability, created_at_ms, idle_ms (since last
 * use), idle_timeout_ms, lifetime_ms, expires_at_ms, busy, and the members of the entry's detail}]. New
 * reference. */
json_t *session_table_list(struct session_table *table, const char *agent, uint64_t now_ms);

/* CLOCK_MONOTONIC and CLOCK_REALTIME in milliseconds. */
uint64_t session_monotonic_ms(void);
uint64_t session_realtime_ms(void);

#endif
