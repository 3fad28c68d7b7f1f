/* Where `dome run` records its execution (the exec.* records supervisor/exec writes): through domed over
 * the control socket (`audit.record`) when domed runs and writes that journal, else directly into the
 * journal directory under its writer lock, or nowhere (--no-journal). */
#ifndef DOME_CLI_RUN_JOURNAL_H
#define DOME_CLI_RUN_JOURNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "supervisor/common/error.h"
#include "supervisor/exec/exec.h"

struct run_journal;

/* Choose the destination: none when `disabled`; domed when it answers on the control socket and `dir` is
 * NULL or its journal; else `dir`, $DOME_JOURNAL_DIR or /var/lib/dome/journal (opened when records are
 * flushed). Returns 0 and *out, or -ENOMEM. */
int run_journal_open(const char *dir, bool disabled, struct run_journal **out, dome_error *err);

/* The sink for exec_run: records are kept in order and written at each sync (after exec.start, before
 * the program runs; after exec.end), so the writer lock is held only while they are written. */
const struct exec_sink *run_journal_sink(struct run_journal *journal);

/* The result's "journal": {"dir", "via": "domed"|"direct", "records"} or JSON null (--no-journal). */
json_t *run_journal_describe(const struct run_journal *journal);

void run_journal_close(struct run_journal *journal);

#endif
