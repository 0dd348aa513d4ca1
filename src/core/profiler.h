/*
 * NCCL's profiler, fed from the version-neutral entry points: one network
 * event per posted message (an isend, or each buffer of an irecv), started
 * under the handle NCCL passed with it and stopped when test sees the
 * request done, when it fails, or when its comm is closed; and under the
 * same handle one event per stream that carries part of the message (its
 * socket as the descriptor's fd), started and stopped as test sees the
 * stream take its first chunk of it and let go of its last.  Every call
 * to the profiler is made on the thread that calls test or close.
 *
 * NCCL hands its callback to every init whether or not a profiler plugin is
 * loaded, so collx cannot know in advance; the first call tells: without a
 * profiler (or with network events masked off) NCCL leaves the event
 * handle NULL, collx records nothing, and the rest of the request's life
 * costs one branch on a counter of live events.
 */
#ifndef COLLX_CORE_PROFILER_H
#define COLLX_CORE_PROFILER_H

#include <stdatomic.h>
#include <stddef.h>

#include "collx/net_abi.h"

/* Installed by the shims' init (v10 on); NULL: none (older tables, tools). */
void collx_prof_set_callback(ncclProfilerCallback_t cb);

extern _Atomic(ncclProfilerCallback_t) collx_prof_cb;
extern atomic_int collx_prof_live; /* requests with events started and not stopped */

/* Posted: one event per message whose handle is not NULL. */
void collx_prof_posted(ncclProfilerCallback_t cb, void *comm, void *req, int op, int n,
                       const size_t *sizes, void *const *phandles);
/* The request is in flight: its streams' parts start and stop as the
 * transport shows them (test, before it is done). */
void collx_prof_progress(void *req);
/* The request ended (done or failed): its events stop. */
void collx_prof_ended(void *req);
/* The comm closes: the events of its requests still in flight stop. */
void collx_prof_comm_closed(void *comm);

static inline ncclProfilerCallback_t collx_prof_callback(void) {
  return atomic_load_explicit(&collx_prof_cb, memory_order_relaxed);
}
static inline int collx_prof_any_live(void) {
  return atomic_load_explicit(&collx_prof_live, memory_order_relaxed) != 0;
}

#endif
