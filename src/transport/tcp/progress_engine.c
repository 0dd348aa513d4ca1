/*
 * COLLX_PROGRESS=threads: the streams of every comm of a device are driven
 * by one pool of event-loop threads (engine.c), sized by the placement plan
 * (COLLX_NTHREADS overrides).  A comm's streams go to different threads of
 * the pool where it has enough, so that one busy connection still uses as
 * many cores as it has streams, while a thousand comms cost no thread more.
 *
 * A device's pool is made with its first stream and stops with its last,
 * so that no plugin thread outlives the last comm (NCCL may dlclose the
 * plugin then); each of its threads starts with the first stream put on
 * it, so a pool sized for the busiest case costs only the threads in use.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "engine.h"
#include "progress.h"
#include "topo/topo.h"
#include "util/log.h"

/* ---- the seam: a stream's pass, through its role's table ------------------ */

static enum tcp_want stream_serve(struct tcp_stream *s, struct tcp_pass *pass) {
  *pass = (struct tcp_pass){0};
  return (enum tcp_want)s->comm->role->serve(s, pass);
}

void tcp_comm_wake(struct tcp_comm_base *c) {
  if (c->driven) tcp_progress->kick(c);
}

/* ---- the pool ----------------------------------------------------------------- */

/* Devices with a pool of their own; beyond, devices share the last one. */
#define POOL_DEVICES 64

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tcp_pool {
  struct engine_pool *pool;
  int streams;       /* attached */
  int dev;
  unsigned serial;   /* pins the pool's threads like a connection's streams */
} pools[POOL_DEVICES];

/* Name the thread (top -H, /proc/PID/task/TID/comm: "cx-p3.1" is thread 1
 * of the pool numbered 3 among its device's connections) and pin it where
 * the placement plan puts stream 1 of connection 3. */
static void pool_thread_start(void *arg, int index) {
  struct tcp_pool *dp = arg;
  char name[16];
  atomic_fetch_add(&tcp_live_threads, 1); /* taken off when the pool is joined */
  snprintf(name, sizeof name, "cx-p%u.%d", dp->serial, index);
  pthread_setname_np(pthread_self(), name);
  collx_topo_pin_self(dp->dev, dp->serial, index);
}

/* The device's pool, started if need be, with `streams` more attached.
 * Caller holds pools_lock. */
static struct tcp_pool *pool_get(int dev, int streams) {
  struct tcp_pool *dp = &pools[dev >= 0 && dev < POOL_DEVICES ? dev : POOL_DEVICES - 1];
  if (!dp->pool) {
    dp->dev = dev;
    dp->serial = collx_topo_next_serial(dev);
    int threads = collx_topo_pool_threads(dev);
    struct engine_pool_config cfg = {.threads = threads, .thread_start = pool_thread_start,
                                     .arg = dp, .spin_s = tcp_spin_seconds()};
    dp->pool = engine_pool_create(&cfg);
    if (!dp->pool) return NULL;
    COLLX_INFO(COLLX_LOG_NET, "device %d: a pool of up to %d progress threads (cx-p%u.*), each started with "
               "the first stream put on it", dev, threads, dp->serial);
  }
  dp->streams += streams;
  return dp;
}

/* Caller holds pools_lock. */
static void pool_put(struct tcp_pool *dp, int streams) {
  dp->streams -= streams;
  if (dp->streams > 0) return;
  int started = engine_pool_started(dp->pool);
  engine_pool_destroy(dp->pool); /* joins them */
  atomic_fetch_sub(&tcp_live_threads, started);
  dp->pool = NULL;
}

static enum engine_want serve_stream(struct engine_source *src, int *moved) {
  struct tcp_pass pass;
  enum tcp_want want = stream_serve(COLLX_CONTAINER_OF(src, struct tcp_stream, src), &pass);
  *moved |= pass.moved;
  switch (want) {
  case TCP_WANT_READ: return ENGINE_WANT_READ;
  case TCP_WANT_WRITE: return ENGINE_WANT_WRITE;
  case TCP_WANT_WORK: return ENGINE_WANT_KICK;
  case TCP_WANT_AGAIN: return ENGINE_WANT_AGAIN;
  default: return ENGINE_WANT_NOTHING;
  }
}

static void streams_detach(struct tcp_comm_base *c, int n) {
  for (int i = 0; i < n; i++) engine_detach(&c->streams[i].src);
}

static int engine_attach_comm(struct tcp_comm_base *c) {
  pthread_mutex_lock(&pools_lock);
  struct tcp_pool *dp = pool_get(c->dev, c->nstreams);
  pthread_mutex_unlock(&pools_lock);
  if (!dp) return -1;
  /* From the least loaded thread on, the streams in blocks: stream i of
   * S on thread start + i * N / S of N.  One connection's streams then use
   * min(S, N) threads, and where they outnumber the threads, each thread
   * takes consecutive streams, which go over different members of a merged
   * device (stream i leaves by member i mod M): a thread that runs late
   * slows every member a little rather than one member a lot. */
  int n = engine_pool_threads(dp->pool), start = engine_pool_least_loaded(dp->pool);
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    s->src = (struct engine_source){.fd = s->fd, .serve = serve_stream};
    int k = (start + i * n / c->nstreams) % n;
    s->loop = k;
    if (engine_attach(dp->pool, k, &s->src) != 0) {
      streams_detach(c, i);
      pthread_mutex_lock(&pools_lock);
      pool_put(dp, c->nstreams);
      pthread_mutex_unlock(&pools_lock);
      return -1;
    }
  }
  c->pool = dp;
  return 0;
}

static void engine_kick_comm(struct tcp_comm_base *c) {
  for (int i = 0; i < c->nstreams; i++) engine_kick(&c->streams[i].src);
}

static void engine_detach_comm(struct tcp_comm_base *c) {
  struct tcp_pool *dp = c->pool;
  if (!dp) return;
  streams_detach(c, c->nstreams);
  pthread_mutex_lock(&pools_lock);
  pool_put(dp, c->nstreams);
  pthread_mutex_unlock(&pools_lock);
  c->pool = NULL;
}

static void engine_detach_stream(struct tcp_comm_base *c, int i) { engine_detach(&c->streams[i].src); }

/* Back on the thread it had, with its socket as it is now. */
static void engine_attach_stream(struct tcp_comm_base *c, int i) {
  struct tcp_stream *s = &c->streams[i];
  s->src = (struct engine_source){.fd = s->fd, .serve = serve_stream};
  if (engine_attach(c->pool->pool, s->loop, &s->src) != 0)
    tcp_comm_fail(c, ncclSystemError, "cannot drive a stream that came back");
}

const struct tcp_progress_ops tcp_progress_pool = {
    .name = "a pool of progress threads per device",
    .attach = engine_attach_comm,
    .kick = engine_kick_comm,
    .detach = engine_detach_comm,
    .stream_detach = engine_detach_stream,
    .stream_attach = engine_attach_stream,
};

const struct tcp_progress_ops *const tcp_progress = &tcp_progress_pool;
