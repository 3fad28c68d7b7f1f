/* The writer thread of `dome run`'s pass-through output (pass_through.h). */
#include "supervisor/cli/pass_through.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct chunk {
  struct chunk *next;
  int fd;
  size_t length;
  char data[];
};

struct pass_through {
  pthread_t thread;
  bool started; /* the thread is made with the first chunk: a run without output never pays for it */
  pthread_mutex_t lock;
  pthread_cond_t ready;
  struct chunk *head, *tail;
  bool finishing;
  atomic_bool failed[3]; /* by fd: a write to it failed, drop what follows */
};

static void write_all(struct pass_through *w, int fd, const char *data, size_t length) {
  while (length > 0 && !w->failed[fd]) {
    ssize_t n = write(fd, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      w->failed[fd] = true;
      /* The SIGPIPE the write raised is pending on this thread only: make it the process's, where the
       * caller's signalfd sees it and cancels the jail. */
      if (n < 0 && errno == EPIPE) kill(getpid(), SIGPIPE);
      return;
    }
    data += n;
    length -= (size_t)n;
  }
}

static void *writer_main(void *argument) {
  struct pass_through *w = argument;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (w->head == NULL && !w->finishing) pthread_cond_wait(&w->ready, &w->lock);
    struct chunk *c = w->head;
    if (c == NULL) break; /* finishing, and nothing left */
    w->head = c->next;
    if (w->head == NULL) w->tail = NULL;
    pthread_mutex_unlock(&w->lock);
    write_all(w, c->fd, c->data, c->length);
    free(c);
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

struct pass_through *pass_through_start(void) {
  struct pass_through *w = calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->ready, NULL);
  return w;
}

void pass_through_queue(struct pass_through *w, int stream, const char *data, size_t length) {
  int fd = stream == 1 ? 1 : 2;
  if (length == 0 || w->failed[fd]) return;
  struct chunk *c = malloc(sizeof *c + length);
  if (c == NULL) return;
  c->next = NULL;
  c->fd = fd;
  c->length = length;
  memcpy(c->data, data, length);
  if (!w->started) { /* only the supervision loop queues: no race on `started` */
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) { /* no thread: write here, blocking */
      write_all(w, fd, data, length);
      free(c);
      return;
    }
    w->started = true;
  }
  pthread_mutex_lock(&w->lock);
  if (w->tail)
    w->tail->next = c;
  else
    w->head = c;
  w->tail = c;
  pthread_cond_signal(&w->ready);
  pthread_mutex_unlock(&w->lock);
}

void pass_through_finish(struct pass_through *w) {
  if (w == NULL) return;
  if (w->started) {
    pthread_mutex_lock(&w->lock);
    w->finishing = true;
    pthread_cond_signal(&w->ready);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
  }
  pthread_cond_destroy(&w->ready);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
