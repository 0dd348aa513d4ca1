/*
 * The recording profiler (prof.h).  NCCL's real callback hands the event
 * to a profiler plugin under the proxy step the handle points to; this one
 * checks instead that the plugin kept NCCL's rules: handles passed back as
 * given, the socket descriptor of the message, every start stopped once,
 * in time, and no more events under one handle than NCCL's example
 * profiler keeps for a proxy step.
 */
#include "prof.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"

#define TOKEN_MAGIC 0x70726f66746f6b31ull /* "proftok1" */
#define EVENT_MAGIC 0x70726f666576656eull /* "profeven" */

/* Network events NCCL's example profiler keeps per proxy step: the
 * message's (fd -1) and one per stream carrying part of it. */
#define EVENTS_PER_HANDLE 8

/* One message posted with a handle: the handle is its address. */
struct token {
  uint64_t magic;
  int op;
  size_t len;
  void *comm, *req;
  int posted, starts;
  long nth; /* posted as the nth message with a handle since the plugin was loaded */
  struct event *ev[EVENTS_PER_HANDLE]; /* ev[0] the message's */
};

/* One event the plugin started: the *eHandle it gets back. */
struct event {
  uint64_t magic;
  struct token *tok; /* NULL once the token's request ended */
  int stops;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct token **live; /* tokens whose request has not ended */
static size_t nlive, caplive;
/* Every event handed out stays reachable here: the plugin may hold its
 * handle past our view of the request, and LeakSanitizer must not take
 * the ones alive at exit for leaks. */
static struct event **events;
static size_t nevents, capevents;
static long n_started, n_stopped, n_posted, n_parts;
/* n_posted when the plugin was last loaded: a case that loads it again
 * gets a fresh plugin that learns of the profiler anew. */
static long posted_at_load;
/* Messages of a MiB or more done, and those of them with no stream's part
 * shown: all of them would mean the per-stream events are missing. */
static long n_large_done, n_large_bare;
static int n_bad;
static char first_bad[3][256];

__attribute__((format(printf, 1, 2))) static void violation(const char *fmt, ...) {
  if (n_bad < 3) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first_bad[n_bad], sizeof first_bad[n_bad], fmt, ap);
    va_end(ap);
  }
  n_bad++;
}

static const char *op_name(int op) { return op == 0 ? "isend" : "irecv"; }

static void *new_handle(int op, size_t len) {
  struct token *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  *t = (struct token){.magic = TOKEN_MAGIC, .op = op, .len = len};
  pthread_mutex_lock(&lock);
  if (nlive == caplive) {
    size_t cap = caplive ? caplive * 2 : 256;
    struct token **grown = realloc(live, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&lock);
      free(t);
      return NULL;
    }
    live = grown;
    caplive = cap;
  }
  live[nlive++] = t;
  pthread_mutex_unlock(&lock);
  return t;
}

static void check_descr(const struct token *t, int64_t id, const void *ext) {
  const ncclProfilerNetSockDescr_v1_t *d = ext;
  if (id != (int64_t)(NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER))
    violation("%s of %zu bytes: plugin id 0x%llx, expected socket v1 0x%x", op_name(t->op), t->len,
              (unsigned long long)id, NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER);
  else if (!d)
    violation("%s of %zu bytes: start without an event descriptor", op_name(t->op), t->len);
  else if (d->type != ncclProfileSocket || d->sock.op != t->op || d->sock.length != t->len)
    violation("%s of %zu bytes: descriptor type %d op %d length %zu", op_name(t->op), t->len, d->type,
              d->sock.op, d->sock.length);
  else if ((t->starts == 0) != (d->sock.fd == -1))
    violation("%s of %zu bytes: event %d with fd %d (the first is the message's, fd -1; then streams' sockets)",
              op_name(t->op), t->len, t->starts + 1, d->sock.fd);
}

static void on_start(void **eh, void *ph, int64_t id, void *ext) {
  struct token *t = ph;
  if (!t || t->magic != TOKEN_MAGIC) {
    violation("start under a handle the harness never gave (%p)", ph);
    return;
  }
  n_started++;
  check_descr(t, id, ext);
  if (t->starts > 0 && (!t->ev[0] || t->ev[0]->stops))
    violation("%s of %zu bytes: a stream's event started outside the message's", op_name(t->op), t->len);
  if (t->starts >= EVENTS_PER_HANDLE) {
    violation("%s of %zu bytes: more than %d events under one handle", op_name(t->op), t->len, EVENTS_PER_HANDLE);
    return;
  }
  n_parts += t->starts > 0;
  if (nevents == capevents) {
    size_t cap = capevents ? capevents * 2 : 256;
    struct event **grown = realloc(events, cap * sizeof *grown);
    if (!grown) return;
    events = grown;
    capevents = cap;
  }
  struct event *e = calloc(1, sizeof *e);
  if (!e) return;
  events[nevents++] = e;
  *e = (struct event){.magic = EVENT_MAGIC, .tok = t};
  t->ev[t->starts++] = e;
  *eh = e;
}

static void on_stop(void **eh) {
  struct event *e = eh ? *eh : NULL;
  if (!e || e->magic != EVENT_MAGIC) {
    violation("stop of an event handle the profiler never returned (%p)", (void *)e);
    return;
  }
  n_stopped++;
  if (++e->stops > 1) violation("an event stopped %d times", e->stops);
  else if (!e->tok) violation("an event stopped after test had reported its request over");
  else if (e == e->tok->ev[0])
    for (int k = 1; k < e->tok->starts; k++)
      if (e->tok->ev[k] && !e->tok->ev[k]->stops)
        violation("%s of %zu bytes: its event stopped before a stream's part in it", op_name(e->tok->op),
                  e->tok->len);
}

static ncclResult_t record(void **eh, int type, void *ph, int64_t id, void *ext) {
  pthread_mutex_lock(&lock);
  if (type == ncclProfilerNetEventStart) on_start(eh, ph, id, ext);
  else if (type == ncclProfilerNetEventStop) on_stop(eh);
  else violation("event type %d (only start %d and stop %d are used)", type, ncclProfilerNetEventStart,
                 ncclProfilerNetEventStop);
  pthread_mutex_unlock(&lock);
  return ncclSuccess;
}

/* The request of token i is over: judge it and drop it from the live set. */
static void end_token(size_t i, const char *how) {
  struct token *t = live[i];
  if (t->posted && t->starts < 1)
    violation("%s of %zu bytes %s with no start event", op_name(t->op), t->len, how);
  for (int k = 0; k < t->starts; k++) {
    if (t->ev[k] && t->ev[k]->stops != 1)
      violation("%s of %zu bytes %s with its event %d stopped %d times (expected 1)", op_name(t->op), t->len, how,
                k, t->ev[k]->stops);
    if (t->ev[k]) t->ev[k]->tok = NULL;
  }
  /* The plugin learns that a profiler is loaded from its first message. */
  if (t->posted && t->nth > 1 && t->len >= (1 << 20) && !strcmp(how, "done")) {
    n_large_done++;
    n_large_bare += t->starts < 2;
  }
  t->magic = 0;
  free(t);
  live[i] = live[--nlive];
}

static void on_posted(void *comm, void *req, void *const *handles, int n) {
  pthread_mutex_lock(&lock);
  for (int k = 0; k < n; k++) {
    for (size_t i = 0; i < nlive; i++) {
      if (live[i] != handles[k]) continue;
      live[i]->comm = comm;
      live[i]->req = req;
      live[i]->posted = req != NULL;
      if (req) live[i]->nth = ++n_posted - posted_at_load;
      else end_token(i, "not posted");
      break;
    }
  }
  pthread_mutex_unlock(&lock);
}

static void on_tested(void *req, int done, ncclResult_t res) {
  if (!done && res == ncclSuccess) return;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nlive;) {
    if (live[i]->posted && live[i]->req == req) end_token(i, done ? "done" : "failed");
    else i++;
  }
  pthread_mutex_unlock(&lock);
}

static void on_closed(void *comm) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nlive;) {
    if (live[i]->posted && (!comm || live[i]->comm == comm)) end_token(i, "in flight at close");
    else i++;
  }
  pthread_mutex_unlock(&lock);
}

const struct hx_net_prof hx_prof_recorder = {
    .callback = record, .handle = new_handle, .posted = on_posted, .tested = on_tested, .closed = on_closed};

void hx_prof_plugin_loaded(void) {
  pthread_mutex_lock(&lock);
  posted_at_load = n_posted;
  pthread_mutex_unlock(&lock);
}

void hx_prof_counts(long *started, long *stopped, long *posted) {
  pthread_mutex_lock(&lock);
  *started = n_started;
  *stopped = n_stopped;
  *posted = n_posted;
  pthread_mutex_unlock(&lock);
}

int hx_prof_verdict(void) {
  pthread_mutex_lock(&lock);
  if (n_large_done > 0 && n_large_bare == n_large_done)
    violation("none of the %ld messages of 1 MiB or more done showed a stream's part", n_large_done);
  int bad = n_bad;
  for (int i = 0; i < bad && i < 3; i++) hx_fail("profiler events: %s", first_bad[i]);
  if (bad > 3) hx_fail("profiler events: %d more violations", bad - 3);
  if (n_posted > 0 && hx_verbose)
    hx_note("profiler events: %ld messages posted, %ld events started (%ld of them streams' parts, %ld of %ld "
            "messages of 1 MiB or more without one), %ld stopped", n_posted, n_started, n_parts, n_large_bare,
            n_large_done, n_stopped);
  pthread_mutex_unlock(&lock);
  return bad;
}
