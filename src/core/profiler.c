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
  int n;
  void *ehandle[COLLX_MAX_RECVS];
};

#define PROF_BUCKETS 1024 /* a power of two */
static struct prof_req *buckets[PROF_BUCKETS];
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket_of(const void *req) {
  uintptr_t p = (uintptr_t)req;
  return (unsigned)((p >> 6) ^ (p >> 16)) & (PROF_BUCKETS - 1);
}

static void stop_events(struct prof_req *r) {
  for (int i = 0; i < r->n; i++)
    if (r->ehandle[i]) r->cb(&r->ehandle[i], ncclProfilerNetEventStop, NULL, 0, NULL);
}

void collx_prof_posted(ncclProfilerCallback_t cb, void *comm, void *req, int op, int n,
                       const size_t *sizes, void *const *phandles) {
  struct prof_req r = {.cb = cb, .req = req, .comm = comm, .n = n < COLLX_MAX_RECVS ? n : COLLX_MAX_RECVS};
  int started = 0;
  for (int i = 0; i < r.n; i++) {
    if (!phandles[i]) continue;
    /* fd -1: a message is striped over the connection's streams, no one
     * socket carries it. */
    ncclProfilerNetSockDescr_v1_t d = {.type = ncclProfileSocket};
    d.sock.fd = -1;
    d.sock.op = op;
    d.sock.length = sizes[i];
    cb(&r.ehandle[i], ncclProfilerNetEventStart, phandles[i],
       (int64_t)(NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER), &d);
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
  stop_list(unlink_matching(b, b, req, NULL));
}

void collx_prof_comm_closed(void *comm) {
  stop_list(unlink_matching(0, PROF_BUCKETS - 1, NULL, comm));
}
