/*
 * The progress engine (engine.h).
 *
 * Each loop is a thread with an epoll set and an eventfd.  Sources are
 * registered level-triggered, and only while they wait for the socket: a
 * send stream with nothing queued is not in the set at all, so neither its
 * writable socket nor a hang-up on it wakes the thread; a kick brings it
 * back.
 *
 * A loop holds `busy` while it serves a round of ready sources.  Detach
 * takes `busy` too, so that once it returns no serve of that source runs,
 * and the slot table's generation numbers make an event that was already
 * fetched for a detached source (or for a new one in its slot) a no-op.
 */
#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

#define ENGINE_EVENTS 64
/* The eventfd's tag in the epoll set: no slot has this number. */
#define ENGINE_WAKE_TAG UINT64_MAX

struct engine_loop {
  struct engine_pool *pool;
  int index;
  int epfd, wakefd;
  pthread_t thread;
  int running;             /* thread started (the pool's start_lock) */
  atomic_int stop;
  atomic_int sleeping;     /* in epoll_wait, or about to be: kicks write wakefd */
  atomic_int nsources;
  atomic_int nkicks;       /* on the kick list: read without the lock */
  pthread_mutex_t busy;    /* held while serving a round */
  pthread_mutex_t lock;    /* the slot table and the kick list */
  struct engine_source **slots;
  uint32_t *gens;
  uint32_t *free_slots;
  uint32_t cap, nfree, used;
  struct engine_source *kicks;  /* kicked sources, newest first */
  /* the round being served (loop thread only) */
  struct engine_source **todo;
  uint32_t todo_cap;
  uint32_t round;
};

struct engine_pool {
  struct engine_pool_config cfg;
  int n;
  pthread_mutex_t start_lock;  /* starting loops' threads */
  atomic_int started;
  struct engine_loop loops[];
};

static double engine_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the slot table (l->lock) -------------------------------------------- */

static int slots_grow(struct engine_loop *l) {
  uint32_t cap = l->cap ? l->cap * 2 : 64;
  struct engine_source **s = realloc(l->slots, cap * sizeof *s);
  if (s) l->slots = s;
  uint32_t *g = s ? realloc(l->gens, cap * sizeof *g) : NULL;
  if (g) l->gens = g;
  uint32_t *f = g ? realloc(l->free_slots, cap * sizeof *f) : NULL;
  if (!f) return -1;
  l->free_slots = f;
  for (uint32_t i = l->cap; i < cap; i++) {
    l->slots[i] = NULL;
    l->gens[i] = 0;
  }
  l->cap = cap;
  return 0;
}

static uint64_t slot_tag(const struct engine_loop *l, uint32_t k) {
  return (uint64_t)l->gens[k] << 32 | k;
}

static int slot_take(struct engine_loop *l, struct engine_source *src) {
  uint32_t k;
  if (l->nfree) {
    k = l->free_slots[--l->nfree];
  } else {
    if (l->used == l->cap && slots_grow(l) != 0) return -1;
    k = l->used++;
  }
  l->slots[k] = src;
  src->slot = k;
  src->tag = slot_tag(l, k);
  return 0;
}

static struct engine_source *slot_find(const struct engine_loop *l, uint64_t tag) {
  uint32_t k = (uint32_t)tag;
  if (k >= l->used || l->gens[k] != (uint32_t)(tag >> 32)) return NULL;
  return l->slots[k];
}

static void slot_release(struct engine_loop *l, uint32_t k) {
  l->slots[k] = NULL;
  l->gens[k]++;
  l->free_slots[l->nfree++] = k;
}

/* ---- kicks ----------------------------------------------------------------- */

static void loop_wake(struct engine_loop *l) {
  uint64_t one = 1;
  /* A full counter (never, in practice) already means "wake up". */
  ssize_t n = write(l->wakefd, &one, sizeof one);
  (void)n;
}

void engine_kick(struct engine_source *src) {
  if (atomic_load(&src->kicked)) return;
  struct engine_loop *l = src->loop;
  pthread_mutex_lock(&l->lock);
  int queued = atomic_exchange(&src->kicked, 1);
  if (!queued) {
    src->kick_next = l->kicks;
    l->kicks = src;
    atomic_fetch_add(&l->nkicks, 1);
  }
  pthread_mutex_unlock(&l->lock);
  if (queued) return;
  /* The loop sets `sleeping` before it looks at the kick list (under the
   * lock): either it sees this kick, or this sees it sleeping. */
  if (atomic_load(&l->sleeping)) loop_wake(l);
}

static void kicks_unlink(struct engine_loop *l, struct engine_source *src) {
  for (struct engine_source **p = &l->kicks; *p; p = &(*p)->kick_next)
    if (*p == src) {
      *p = src->kick_next;
      atomic_fetch_sub(&l->nkicks, 1);
      return;
    }
}

/* ---- the loop thread ----------------------------------------------------- */

static int todo_add(struct engine_loop *l, uint32_t *n, struct engine_source *src) {
  if (!src || src->round == l->round) return 0;
  if (*n == l->todo_cap) {
    uint32_t cap = l->todo_cap ? l->todo_cap * 2 : 128;
    struct engine_source **t = realloc(l->todo, cap * sizeof *t);
    if (!t) return -1; /* served in a later round: its kick or event stays */
    l->todo = t;
    l->todo_cap = cap;
  }
  src->round = l->round;
  l->todo[(*n)++] = src;
  return 0;
}

static void wake_drain(struct engine_loop *l) {
  uint64_t v;
  ssize_t n = read(l->wakefd, &v, sizeof v);
  (void)n;
}

/* The sources to serve this round: those whose socket is ready, then
 * those kicked.  Returns how many. */
static uint32_t round_collect(struct engine_loop *l, const struct epoll_event *ev, int nev) {
  uint32_t n = 0;
  int woken = 0;
  l->round++;
  pthread_mutex_lock(&l->lock);
  for (int i = 0; i < nev; i++) {
    if (ev[i].data.u64 == ENGINE_WAKE_TAG)
      woken = 1;
    else
      todo_add(l, &n, slot_find(l, ev[i].data.u64));
  }
  /* The list holds the newest kick first: serve in the order of kicking. */
  struct engine_source *k = NULL, *keep = NULL;
  int kept = 0;
  while (l->kicks) {
    struct engine_source *next = l->kicks->kick_next;
    l->kicks->kick_next = k;
    k = l->kicks;
    l->kicks = next;
  }
  while (k) {
    struct engine_source *next = k->kick_next;
    /* Cleared before serve runs: a kick during serve brings it back. */
    if (todo_add(l, &n, k) == 0 || k->round == l->round) {
      atomic_store(&k->kicked, 0);
    } else {
      k->kick_next = keep;
      keep = k;
      kept++;
    }
    k = next;
  }
  l->kicks = keep;
  atomic_store(&l->nkicks, kept);
  pthread_mutex_unlock(&l->lock);
  /* Outside the lock: a kicker never waits for this thread's syscall. */
  if (woken) wake_drain(l);
  return n;
}

static uint32_t want_events(enum engine_want w) {
  return w == ENGINE_WANT_READ ? EPOLLIN : w == ENGINE_WANT_WRITE ? EPOLLOUT : 0;
}

/* Register the socket for what the source now waits for. */
static void interest_set(struct engine_loop *l, struct engine_source *src, enum engine_want w) {
  uint32_t events = want_events(w);
  if (events == src->interest) return;
  struct epoll_event e = {.events = events, .data.u64 = src->tag};
  int op = !src->interest ? EPOLL_CTL_ADD : !events ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  if (epoll_ctl(l->epfd, op, src->fd, &e) == 0) {
    src->interest = events;
    return;
  }
  /* Out of kernel memory: serve it again next round rather than lose it. */
  COLLX_WARN("progress engine: cannot watch socket %d: %s; retrying", src->fd, strerror(errno));
  engine_kick(src);
}

static int loop_round(struct engine_loop *l, const struct epoll_event *ev, int nev) {
  pthread_mutex_lock(&l->busy);
  uint32_t n = round_collect(l, ev, nev);
  int moved = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct engine_source *src = l->todo[i];
    enum engine_want want = src->serve(src, &moved);
    /* Its socket is watched as before; the kick brings it back after the
     * round's other sources had their turn. */
    if (want == ENGINE_WANT_AGAIN)
      engine_kick(src);
    else
      interest_set(l, src, want);
  }
  pthread_mutex_unlock(&l->busy);
  return moved;
}

static int kicks_waiting(struct engine_loop *l) { return atomic_load(&l->nkicks) > 0; }

static void *loop_main(void *arg) {
  struct engine_loop *l = arg;
  const struct engine_pool_config *cfg = &l->pool->cfg;
  if (cfg->thread_start) cfg->thread_start(cfg->arg, l->index);
  struct epoll_event ev[ENGINE_EVENTS];
  double spin_until = 0;
  while (!atomic_load(&l->stop)) {
    atomic_store(&l->sleeping, 1);
    int timeout = kicks_waiting(l) || (cfg->spin_s > 0 && engine_now() < spin_until) ? 0 : -1;
    int nev = epoll_wait(l->epfd, ev, ENGINE_EVENTS, timeout);
    atomic_store(&l->sleeping, 0);
    if (nev < 0) nev = 0; /* EINTR; nothing else can fail on a valid set */
    if (loop_round(l, ev, nev) && cfg->spin_s > 0) spin_until = engine_now() + cfg->spin_s;
  }
  return NULL;
}

/* ---- the pool ------------------------------------------------------------ */

static int loop_open(struct engine_loop *l) {
  l->epfd = epoll_create1(EPOLL_CLOEXEC);
  l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l->epfd < 0 || l->wakefd < 0) return -1;
  struct epoll_event e = {.events = EPOLLIN, .data.u64 = ENGINE_WAKE_TAG};
  return epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &e);
}

static void loop_fds_close(struct engine_loop *l) {
  if (l->epfd >= 0) close(l->epfd);
  if (l->wakefd >= 0) close(l->wakefd);
  l->epfd = l->wakefd = -1;
}

static void loop_close(struct engine_loop *l) {
  loop_fds_close(l);
  pthread_mutex_destroy(&l->busy);
  pthread_mutex_destroy(&l->lock);
  free(l->slots);
  free(l->gens);
  free(l->free_slots);
  free(l->todo);
}

/* A loop's thread starts with the first source put on it, so that a pool
 * sized for the busiest case costs threads and descriptors only for the
 * loops in use.  0, or -1 with a WARN. */
static int loop_start(struct engine_pool *p, struct engine_loop *l) {
  pthread_mutex_lock(&p->start_lock);
  int err = 0;
  if (!l->running) {
    if (loop_open(l) != 0)
      err = errno;
    else
      err = pthread_create(&l->thread, NULL, loop_main, l);
    if (err == 0) {
      l->running = 1;
      atomic_fetch_add(&p->started, 1);
    } else {
      loop_fds_close(l); /* a later attach tries again */
      COLLX_WARN("progress engine: cannot start thread %d of %d: %s", l->index, p->n, strerror(err));
    }
  }
  pthread_mutex_unlock(&p->start_lock);
  return err == 0 ? 0 : -1;
}

/* Under start_lock, so that which loops run is read where it was written,
 * not through whatever ordered the last attach before this destroy. */
static void loops_stop(struct engine_pool *p) {
  pthread_mutex_lock(&p->start_lock);
  for (int i = 0; i < p->n; i++) {
    if (!p->loops[i].running) continue;
    atomic_store(&p->loops[i].stop, 1);
    loop_wake(&p->loops[i]);
  }
  for (int i = 0; i < p->n; i++)
    if (p->loops[i].running) pthread_join(p->loops[i].thread, NULL);
  pthread_mutex_unlock(&p->start_lock);
  for (int i = 0; i < p->n; i++) loop_close(&p->loops[i]);
}

struct engine_pool *engine_pool_create(const struct engine_pool_config *cfg) {
  int n = cfg->threads > 0 ? cfg->threads : 1;
  struct engine_pool *p = calloc(1, sizeof *p + (size_t)n * sizeof p->loops[0]);
  if (!p) {
    COLLX_WARN("progress engine: out of memory for %d threads", n);
    return NULL;
  }
  p->cfg = *cfg;
  p->n = n;
  for (int i = 0; i < n; i++) {
    struct engine_loop *l = &p->loops[i];
    l->pool = p;
    l->index = i;
    l->epfd = l->wakefd = -1;
    pthread_mutex_init(&l->busy, NULL);
    pthread_mutex_init(&l->lock, NULL);
  }
  pthread_mutex_init(&p->start_lock, NULL);
  return p;
}

void engine_pool_destroy(struct engine_pool *p) {
  if (!p) return;
  loops_stop(p);
  pthread_mutex_destroy(&p->start_lock);
  free(p);
}

int engine_pool_threads(const struct engine_pool *p) { return p->n; }

int engine_pool_started(struct engine_pool *p) { return atomic_load(&p->started); }

int engine_pool_least_loaded(struct engine_pool *p) {
  int best = 0;
  for (int i = 1; i < p->n; i++)
    if (atomic_load(&p->loops[i].nsources) < atomic_load(&p->loops[best].nsources)) best = i;
  return best;
}

int engine_attach(struct engine_pool *p, int index, struct engine_source *src) {
  struct engine_loop *l = &p->loops[index];
  if (loop_start(p, l) != 0) return -1;
  src->loop = l;
  src->interest = 0;
  src->round = 0;
  atomic_store(&src->kicked, 0);
  pthread_mutex_lock(&l->lock);
  int rc = slot_take(l, src);
  pthread_mutex_unlock(&l->lock);
  if (rc != 0) {
    COLLX_WARN("progress engine: out of memory for socket %d", src->fd);
    return -1;
  }
  atomic_fetch_add(&l->nsources, 1);
  engine_kick(src);
  return 0;
}

void engine_detach(struct engine_source *src) {
  struct engine_loop *l = src->loop;
  pthread_mutex_lock(&l->busy);
  if (src->interest) epoll_ctl(l->epfd, EPOLL_CTL_DEL, src->fd, NULL);
  src->interest = 0;
  pthread_mutex_lock(&l->lock);
  if (atomic_load(&src->kicked)) kicks_unlink(l, src);
  slot_release(l, src->slot);
  pthread_mutex_unlock(&l->lock);
  atomic_fetch_sub(&l->nsources, 1);
  pthread_mutex_unlock(&l->busy);
}
