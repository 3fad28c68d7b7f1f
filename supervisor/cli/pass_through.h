/* `dome run` without --json: the program's stdout and stderr, written to dome's own fds 1 and 2 as they
 * arrive, by a writer thread. The jail's supervision loop only queues (bounded by --output-limit per
 * stream, which jail_run already enforces on what it passes on), so a reader that stops reading (a pager,
 * a full pipe) never stalls the loop that enforces --timeout. */
#ifndef DOME_CLI_PASS_THROUGH_H
#define DOME_CLI_PASS_THROUGH_H

#include <stddef.h>

struct pass_through;

/* Make the writer (its thread starts with the first chunk queued). Call after the cancel signals are
 * blocked: the thread inherits the mask, and a write that hits a closed pipe (EPIPE) is turned into a
 * process-directed SIGPIPE for the caller's signalfd. Returns NULL when out of memory. */
struct pass_through *pass_through_start(void);

/* Queue `length` bytes of stream 1 (stdout) or 2 (stderr) in arrival order (from jail_config.on_output).
 * Never blocks on the output fds. After a write error the stream's data is dropped. */
void pass_through_queue(struct pass_through *writer, int stream, const char *data, size_t length);

/* Wait until everything queued is written (or writing failed), stop the thread and free. NULL is a
 * no-op. */
void pass_through_finish(struct pass_through *writer);

#endif
