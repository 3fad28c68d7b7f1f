/* State of an open journal, shared by writer.c (appends, writer thread) and open.c (open, recovery). */
#ifndef DOME_AUDIT_WRITER_INTERNAL_H
#define DOME_AUDIT_WRITER_INTERNAL_H

#include <pthread.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

/* An appended event waiting for the writer: its canonical text without `seq` and `time`, and where
 * those two members go (byte offsets of the first top-level key sorting after them, or of the `}`). */
struct pending_event {
  struct pending_event *next;
  uint64_t seq;
  int64_t time_ns;
  size_t length;
  size_t cut_seq, cut_time;
  bool checkpoint; /* a placeholder: the committer writes a signed checkpoint here (length 0) */
  char text[];     /* length bytes and a NUL; one allocation with the struct */
};

/* A producer blocked in journal_sync. It sleeps on its own futex word, so that a round wakes exactly
 * the producers it made durable (and at most one more to lead the next round), and a producer told
 * SYNC_DURABLE returns without taking j->lock again. The round that changes `state` unlinks the waiter
 * first and touches nothing of it afterwards but the futex wake (the waiter may already be gone: a
 * stray wake of a reused address is harmless, waiters re-check their word). */
/* SYNC_SLEEPING: a waiter that stopped spinning and sleeps in FUTEX_WAIT (only then is a wake needed). */
enum { SYNC_WAITING, SYNC_SLEEPING, SYNC_DURABLE, SYNC_LEAD, SYNC_FAILED };
/* A producer waiting in journal_sync spins on its word for twice the recent mean round time before it
 * sleeps, when that is under this bound: on tmpfs a round of a few events takes a few us, less than a
 * futex sleep and wake on a virtual machine; on a disk (fdatasync ~0.3 ms) it sleeps at once. */
#define JOURNAL_SYNC_SPIN_NS 20000
struct sync_waiter {
  struct sync_waiter *next;
  uint64_t seq;
  uint32_t state; /* SYNC_*, accessed atomically */
};

typedef struct byte_buffer {
  uint8_t *data;
  size_t length, capacity;
} byte_buffer;

int journal_byte_buffer_reserve(byte_buffer *b, size_t more);
int journal_byte_buffer_append(byte_buffer *b, const void *data, size_t length);

struct journal {
  journal_options options;
  char *directory;
  char *key_path;
  journal_key key;

  pthread_mutex_t lock;
  pthread_cond_t writer_wake;
  pthread_cond_t committed;    /* broadcast after every round (journal_checkpoint waits on it) */
  struct sync_waiter *waiters; /* producers blocked in journal_sync */
  struct pending_event *head, *tail;
  size_t pending_bytes;
  int64_t oldest_pending_mono_ns;
  uint64_t last_seq;      /* last assigned */
  uint64_t committed_seq; /* last durable */
  int64_t last_time_ns;
  int64_t writer_deadline; /* when the sleeping writer thread wakes (mono ns); INT64_MAX: untimed; 0: awake */
  bool committing;         /* a commit round runs (writer thread or a journal_sync leader) */
  int64_t round_ns;        /* moving mean of a round's duration (ns) */
  bool checkpoint_requested;
  uint64_t commit_requested_seq;     /* journal_sync_begin: commit through this seq now, not in the window */
  uint64_t queued_since_checkpoint;  /* events queued since the last checkpoint placeholder */
  uint64_t checkpoint_committed_seq; /* seq of the last durable checkpoint */
  bool closing;
  int failed; /* -errno once failed */
  char failure[768];
  pthread_t thread;
  bool thread_started;

  /* Writer thread only (and open before the thread starts). */
  int fd;
  int lock_fd; /* <dir>/writer.lock, flock(LOCK_EX) held while open: one writer per journal */
  char segment_name[48];
  uint64_t segment_first_seq;
  off_t written;   /* bytes of the active segment on disk */
  off_t durable;   /* bytes of the active segment fdatasync'd */
  byte_buffer out; /* compressed bytes not yet written */
  ZSTD_CCtx *cctx;
  bool frame_open;
  off_t frame_start; /* logical offset (written + out.length) where the open frame began */
  size_t frame_json_bytes;
  seek_entry *entries;
  size_t entry_count, entry_capacity;
  merkle_frontier tree;
  int64_t last_checkpoint_mono_ns;
  byte_buffer line;
};

int64_t journal_mono_ns(void);
/* Run one commit round as the group's leader; j->lock held, no round running. Wakes the waiters it
 * made durable and hands the lead of the next round to one waiter whose event is still queued. commit.c */
void journal_wake_waiter(struct sync_waiter *w, uint32_t state);
void journal_commit_round(journal *j);
/* Queue a checkpoint placeholder after the last queued event; j->lock held. Returns 0 or -ENOMEM. */
int journal_queue_checkpoint(journal *j);
/* Start a new active segment at seq tree.size+1 (header frame, fsync file and directory). */
/* A zstd compression context whose memory no forked child receives (MADV_DONTFORK, madvise(2)), for the
 * writer's long-lived stream: domed's jail clones would otherwise make every flush fault on its tables.
 * Freed with ZSTD_freeCCtx. Returns NULL when memory cannot be mapped (ENOMEM). */
ZSTD_CCtx *journal_compressor_create(void);
int journal_segment_start(journal *j, dome_error *err);
/* Append an event from inside the journal (writer thread or open), bypassing the closing check. */
int journal_append_internal(journal *j, json_t *event, uint64_t *seq, dome_error *err);
int journal_seek_entry_add(journal *j, uint32_t compressed, uint32_t decompressed, uint32_t checksum);
/* Open-time: read the last segment, recover a torn tail, set tree/seq/time. open.c. *recovered: a
 * journal.recovered event to append (or NULL). */
int journal_load_tail(journal *j, json_t **recovered, dome_error *err);

#endif
