/*
 * Profiler events for NCCL (see profiler.h).  Requests whose events a
 * profiler took are kept in a small hash by request pointer until they
 * end: the transport's request is opaque to core, and only requests a
 * profiler is watching pay for the table.
 */
#include "core/profiler.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/transports.h"
#include "transport/transport.h"
#include "util/log.h"

_Atomic(ncclProfilerCallback_t) collx_prof_cb;
atomic_int collx_prof_live;

void collx_prof_set_callback(ncclProfilerCallback_t cb) {
  if (cb) atomic_store(&collx_prof_cb, cb);
}

struct prof_req {
  struct prof_req *next;
  ncclProfilerCallback_t cb; /* the one that started the events stops them */
  void *req, *comm;
  int n, op;
  size_t size[COLLX_MAX_RECVS];
  void *phandle[COLLX_MAX_RECVS];
  void *ehandle[COLLX_MAX_RECVS];
  /* A stream's part in message i: started (bit s of started[i]) when the
   * transport first shows it, stopped once it shows the stream through. */
  uint32_t started[COLLX_MAX_RECVS], stopped[COLLX_MAX_RECVS];
  void *part[COLLX_MAX_RECVS][COLLX_PART_STREAMS];
};

#define PROF_BUCKETS 1024 /* a power of two */
static struct prof_req *buckets[PROF_BUCKETS];
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket_of(const void *req) {
  uintptr_t p = (uintptr_t)req;
  return (unsigned)((p >> 6) ^ (p >> 16)) & (PROF_BUCKETS - 1);
}

/* fd -1: the message, striped over the connection's streams; a stream's
 * socket: that stream's part in it. */
static void start_event(const struct prof_req *r, int i, int fd, void **ehandle) {
  ncclProfilerNetSockDescr_v1_t d = {.type = ncclProfileSocket};
  d.sock.fd = fd;
  d.sock.op = r->op;
  d.sock.length = r->size[i];
  r->cb(ehandle, ncclProfilerNetEventStart, r->phandle[i],
        (int64_t)(NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER), &d);
}

static void stop_parts(struct prof_req *r, int i, uint32_t which) {
  for (int s = 0; s < COLLX_PART_STREAMS; s++) {
    uint32_t bit = 1u << s;
    if (!(which & r->started[i] & ~r->stopped[i] & bit)) continue;
    r->stopped[i] |= bit;
    if (r->part[i][s]) r->cb(&r->part[i][s], ncclProfilerNetEventStop, NULL, 0, NULL);
  }
}

/* Parts the transport shows begun start, those it shows through stop. */
static void poll_parts(struct prof_req *r) {
  for (int i = 0; i < r->n; i++) {
    if (!r->ehandle[i]) continue;
    uint32_t began = 0, through = 0;
    int fds[COLLX_PART_STREAMS];
    collx_transport()->parts(r->req, i, &began, &through, fds);
    for (uint32_t fresh = began & ~r->started[i]; fresh; fresh &= fresh - 1) {
      int s = __builtin_ctz(fresh);
      r->started[i] |= 1u << s;
      start_event(r, i, fds[s], &r->part[i][s]);
    }
    stop_parts(r, i, through);
  }
}

static void stop_events(struct prof_req *r) {
  for (int i = 0; i < r->n; i++) {
    stop_parts(r, i, ~0u);
    if (r->ehandle[i]) r->cb(&r->ehandle[i], ncclProfilerNetEventStop, NULL, 0, NULL);
  }
}

void collx_prof_posted(ncclProfilerCallback_t cb, void *comm, void *req, int op, int n,
                       const size_t *sizes, void *const *phandles) {
  struct prof_req r = {.cb = cb, .req = req, .comm = comm, .op = op, .n = n < COLLX_MAX_RECVS ? n : COLLX_MAX_RECVS};
  int started = 0;
  for (int i = 0; i < r.n; i++) {
    if (!phandles[i]) continue;
    r.size[i] = sizes[i];
    r.phandle[i] = phandles[i];
    start_event(&r, i, -1, &r.ehandle[i]);
    started += r.ehandle[i] != NULL;
  }
  if (!started) return; /* no profiler took them: nothing to remember */
  struct prof_req *kept = malloc(sizeof *kept);
  if (!kept) {
    /* Better a short event than one never stopped. */
    COLLX_WARN("profiler: out of memory; stopping the events of request %p at once", req);
    stop_events(&r);
    return;
  }
  *kept = r;
  unsigned b = bucket_of(req);
  pthread_mutex_lock(&prof_lock);
  kept->next = buckets[b];
  buckets[b] = kept;
  atomic_fetch_add_explicit(&collx_prof_live, 1, memory_order_relaxed);
  pthread_mutex_unlock(&prof_lock);
  collx_transport()->watch_parts(req);
}

/* Under the lock: NCCL's proxy thread tests a comm's requests and closes
 * it, so this is rarely contended, and the profiler never calls back. */
void collx_prof_progress(void *req) {
  unsigned b = bucket_of(req);
  pthread_mutex_lock(&prof_lock);
  for (struct prof_req *r = buckets[b]; r; r = r->next)
    if (r->req == req) poll_parts(r);
  pthread_mutex_unlock(&prof_lock);
}

/* Unlinks the entries of buckets first..last that belong to `req` (or,
 * req NULL, to `comm`) and returns them as a list. */
static struct prof_req *unlink_matching(unsigned first, unsigned last, const void *req,
                                        const void *comm) {
  struct prof_req *out = NULL;
  pthread_mutex_lock(&prof_lock);
  for (unsigned b = first; b <= last; b++) {
    for (struct prof_req **pp = &buckets[b]; *pp;) {
      struct prof_req *r = *pp;
      if ((req && r->req == req) || (comm && r->comm == comm)) {
        *pp = r->next;
        r->next = out;
        out = r;
        atomic_fetch_sub_explicit(&collx_prof_live, 1, memory_order_relaxed);
      } else {
        pp = &r->next;
      }
    }
  }
  pthread_mutex_unlock(&prof_lock);
  return out;
}

/* Stops outside the lock: a profiler's stopEvent may take its own. */
static void stop_list(struct prof_req *list) {
  while (list) {
    struct prof_req *next = list->next;
    stop_events(list);
    free(list);
    list = next;
  }
}

void collx_prof_ended(void *req) {
  unsigned b = bucket_of(req);
  struct prof_req *list = unlink_matching(b, b, req, NULL);
  /* Parts begun since the last look still show (as short events): the
   * request's slot is not reused before this caller posts again. */
  for (struct prof_req *r = list; r; r = r->next) poll_parts(r);
  stop_list(list);
}

void collx_prof_comm_closed(void *comm) {
  stop_list(unlink_matching(0, PROF_BUCKETS - 1, NULL, comm));
}
