/*
 * The progress engine: a pool of event-loop threads that drives the
 * sockets of many comms.
 *
 * A source is one socket and the function that moves its bytes.  Each
 * source belongs to one loop (one thread, one epoll set).  The thread
 * calls the source's `serve` when its socket is ready for what the source
 * last asked for, or when someone kicked it (a send was queued), and
 * `serve` answers what to wait for next.  Serving is non-blocking, so one
 * thread carries hundreds of sockets, and an idle pool sleeps in epoll.
 *
 * This module knows sockets and threads only: no comm, no wire format.
 */
#ifndef COLLX_TCP_ENGINE_H
#define COLLX_TCP_ENGINE_H

#include <stdatomic.h>
#include <stdint.h>

enum engine_want {
  ENGINE_WANT_READ,    /* call serve when the socket has bytes */
  ENGINE_WANT_WRITE,   /* call serve when the socket has room */
  ENGINE_WANT_KICK,    /* call serve when kicked (no interest in the socket) */
  ENGINE_WANT_AGAIN,   /* call serve again next round (it stopped for its share,
                          not for the socket): no change to what is watched */
  ENGINE_WANT_NOTHING, /* finished: only a kick brings serve back */
};

struct engine_loop;

struct engine_source {
  int fd;
  /* *moved: set to 1 when bytes went through the socket (spinning). */
  enum engine_want (*serve)(struct engine_source *src, int *moved);
  /* The engine's own: set by engine_attach. */
  struct engine_loop *loop;
  uint64_t tag;       /* its slot and the slot's generation, the epoll key */
  struct engine_source *kick_next;
  uint32_t slot;
  uint32_t interest;  /* epoll events registered now; 0: not in the set (loop thread) */
  atomic_int kicked;  /* on the loop's kick list (the loop's lock) */
  uint32_t round;     /* the loop's round that last took it (loop thread) */
};

struct engine_pool_config {
  int threads;
  /* Called first on each pool thread (naming, pinning); may be NULL. */
  void (*thread_start)(void *arg, int index);
  void *arg;
  /* After a serve moved bytes, poll without sleeping for this long
   * (COLLX_SPIN_US): the next message of a burst then needs no wake-up. */
  double spin_s;
};

struct engine_pool;

/* A pool of cfg->threads loops.  Each loop's thread (and its epoll set and
 * eventfd) starts with the first source attached to it.  NULL (with a
 * WARN) when out of memory. */
struct engine_pool *engine_pool_create(const struct engine_pool_config *cfg);
/* Stop and join the threads.  No source may be attached. */
void engine_pool_destroy(struct engine_pool *p);
int engine_pool_threads(const struct engine_pool *p);
/* Threads started so far. */
int engine_pool_started(struct engine_pool *p);
/* The loop with the fewest sources. */
int engine_pool_least_loaded(struct engine_pool *p);

/* Put src (fd and serve set) on loop `index`, starting the loop's thread
 * if need be; its first serve comes at once, as if kicked.  0, or -1 with
 * a WARN (src is not attached). */
int engine_attach(struct engine_pool *p, int index, struct engine_source *src);
/* Have src served soon, whatever it waits for.  Any thread, between
 * attach and detach; cheap when already kicked. */
void engine_kick(struct engine_source *src);
/* Take src off its loop.  On return its serve is not running and will
 * not run again.  Never call from a serve. */
void engine_detach(struct engine_source *src);

#endif
