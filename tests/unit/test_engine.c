/* The progress engine (src/transport/tcp/engine.c) over socket pairs, with
 * no comm in sight: hundreds of sockets on two threads with every byte
 * checked, writers that fill their socket and wait for room, kicks from
 * another thread, an idle pool that does not spin, a detach that waits
 * out a running serve, a stale event for a reused slot, and sources that
 * stop for their share taking turns. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/engine.h"
#include "../common/check.h"

#define PAIRS 200
#define BYTES_PER_PAIR (256 * 1024)

struct reader {
  struct engine_source src;
  int pair;
  atomic_size_t got;
  int bad;            /* first wrong byte seen */
  atomic_int serves;
  atomic_int eof;
};

struct writer {
  struct engine_source src;
  int pair;
  atomic_size_t allowed; /* bytes the "application" has queued so far */
  size_t sent;
  atomic_int serves;
  atomic_int in_serve;
  atomic_int fills;      /* serves that ended with the socket full */
  int slow_ms;           /* serve takes this long (detach test) */
};

static unsigned char pattern(int pair, size_t off) { return (unsigned char)(pair * 7 + off * 13 + (off >> 10)); }

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Readers read only while this is set (test_many_sockets closes it until
 * writers have filled their sockets, then kicks them). */
static atomic_int readers_open = 1;

static enum engine_want reader_serve(struct engine_source *src, int *moved) {
  struct reader *r = (struct reader *)src;
  atomic_fetch_add(&r->serves, 1);
  if (!atomic_load(&readers_open)) return ENGINE_WANT_KICK;
  unsigned char buf[8192];
  for (;;) {
    ssize_t n = recv(src->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      for (ssize_t i = 0; i < n && !r->bad; i++)
        if (buf[i] != pattern(r->pair, r->got + (size_t)i)) r->bad = 1;
      r->got += (size_t)n;
      *moved = 1;
      continue;
    }
    if (n == 0) {
      atomic_store(&r->eof, 1);
      return ENGINE_WANT_NOTHING;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK ? ENGINE_WANT_READ : ENGINE_WANT_NOTHING;
  }
}

static enum engine_want writer_serve(struct engine_source *src, int *moved) {
  struct writer *w = (struct writer *)src;
  atomic_fetch_add(&w->serves, 1);
  atomic_fetch_add(&w->in_serve, 1);
  if (w->slow_ms) sleep_ms(w->slow_ms);
  enum engine_want want = ENGINE_WANT_KICK;
  unsigned char buf[4096];
  size_t allowed = atomic_load(&w->allowed);
  while (w->sent < allowed) {
    size_t n = allowed - w->sent < sizeof buf ? allowed - w->sent : sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = pattern(w->pair, w->sent + i);
    ssize_t k = send(src->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0) {
      w->sent += (size_t)k;
      *moved = 1;
      continue;
    }
    want = k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? ENGINE_WANT_WRITE : ENGINE_WANT_NOTHING;
    if (want == ENGINE_WANT_WRITE) atomic_fetch_add(&w->fills, 1);
    break;
  }
  atomic_fetch_sub(&w->in_serve, 1);
  return want;
}

static void name_thread(void *arg, int index) {
  (void)arg;
  char name[16];
  snprintf(name, sizeof name, "eng-test%d", index);
  pthread_setname_np(pthread_self(), name);
}

/* The pool's threads, by the name name_thread gives them. */
static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(name, sizeof name, f)) n += strncmp(name, "eng-test", 8) == 0;
    fclose(f);
  }
  if (d) closedir(d);
  return n;
}

static void socket_pair(int sv[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("socketpair");
    exit(1);
  }
  int small = 8192; /* so that writers fill their socket and wait for room */
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
}

static int wait_until(int (*done)(void *), void *arg, int ms) {
  for (int t = 0; t < ms; t++) {
    if (done(arg)) return 1;
    sleep_ms(1);
  }
  return done(arg);
}

static struct reader readers[PAIRS];
static struct writer writers[PAIRS];

static int all_received(void *arg) {
  size_t want = *(size_t *)arg;
  for (int i = 0; i < PAIRS; i++)
    if (readers[i].got < want) return 0;
  return 1;
}

static int all_writers_full(void *arg) {
  (void)arg;
  for (int i = 0; i < PAIRS; i++)
    if (!atomic_load(&writers[i].fills)) return 0;
  return 1;
}

/* Every pair: a writer and a reader on the pool, the writer fed in steps by
 * this thread through kicks. */
static void test_many_sockets(void) {
  int before = count_threads();
  struct engine_pool_config cfg = {.threads = 2, .thread_start = name_thread};
  struct engine_pool *p = engine_pool_create(&cfg);
  CHECK(p != NULL, "pool created");
  if (!p) return;
  sleep_ms(20);
  CHECK(count_threads() == before && engine_pool_started(p) == 0, "a new pool runs no thread (%d)",
        count_threads() - before);
  for (int i = 0; i < PAIRS; i++) {
    int sv[2];
    socket_pair(sv);
    writers[i] = (struct writer){.src = {.fd = sv[0], .serve = writer_serve}, .pair = i};
    readers[i] = (struct reader){.src = {.fd = sv[1], .serve = reader_serve}, .pair = i};
    CHECK(engine_attach(p, engine_pool_least_loaded(p), &writers[i].src) == 0, "attach writer %d", i);
    CHECK(engine_attach(p, engine_pool_least_loaded(p), &readers[i].src) == 0, "attach reader %d", i);
    if (i == 0) {
      for (int t = 0; t < 1000 && count_threads() < before + 2; t++) sleep_ms(1); /* named as they start */
      CHECK(count_threads() == before + 2 && engine_pool_started(p) == 2,
            "its first two sources, on two loops, start its 2 threads (%d)", count_threads() - before);
    }
  }
  /* Nobody reads until every writer has filled its socket, so that each
   * must be served again when room comes (with readers draining as fast
   * as writers write, on two cores, a writer may never find it full). */
  atomic_store(&readers_open, 0);
  size_t want = 0;
  for (int step = 0; step < 4; step++) {
    want += BYTES_PER_PAIR / 4;
    for (int i = 0; i < PAIRS; i++) {
      atomic_store(&writers[i].allowed, want);
      engine_kick(&writers[i].src);
    }
  }
  CHECK(wait_until(all_writers_full, NULL, 20000), "every writer filled its socket");
  atomic_store(&readers_open, 1);
  for (int i = 0; i < PAIRS; i++) engine_kick(&readers[i].src);
  CHECK(wait_until(all_received, &want, 20000), "every pair's bytes arrived");
  int bad = 0, waited = 0;
  for (int i = 0; i < PAIRS; i++) {
    bad += readers[i].bad || readers[i].got != want;
    waited += atomic_load(&writers[i].serves) > 4; /* served again when room came */
  }
  CHECK(bad == 0, "%d pairs got wrong bytes", bad);
  CHECK(waited > 0, "some writer filled its socket and was served again for room");
  CHECK(count_threads() == before + 2, "still 2 threads with %d sockets", 2 * PAIRS);

  /* Idle: nothing to read, nothing queued: the threads sleep. */
  sleep_ms(20);
  int serves = 0;
  for (int i = 0; i < PAIRS; i++) serves += atomic_load(&readers[i].serves) + atomic_load(&writers[i].serves);
  sleep_ms(100);
  int later = 0;
  for (int i = 0; i < PAIRS; i++) later += atomic_load(&readers[i].serves) + atomic_load(&writers[i].serves);
  CHECK(later == serves, "an idle pool serves nothing (%d serves in 100 ms)", later - serves);

  /* Hang-ups: writers wait for kicks (out of the set), readers see EOF. */
  for (int i = 0; i < PAIRS; i++) shutdown(writers[i].src.fd, SHUT_WR);
  sleep_ms(100);
  int eofs = 0;
  for (int i = 0; i < PAIRS; i++) eofs += atomic_load(&readers[i].eof);
  CHECK(eofs == PAIRS, "every reader saw the end of its stream (%d)", eofs);
  serves = later = 0;
  for (int i = 0; i < PAIRS; i++) serves += atomic_load(&readers[i].serves) + atomic_load(&writers[i].serves);
  sleep_ms(100);
  for (int i = 0; i < PAIRS; i++) later += atomic_load(&readers[i].serves) + atomic_load(&writers[i].serves);
  CHECK(later == serves, "finished sockets are not served again (%d serves in 100 ms)", later - serves);

  for (int i = 0; i < PAIRS; i++) {
    engine_detach(&writers[i].src);
    engine_detach(&readers[i].src);
    close(writers[i].src.fd);
    close(readers[i].src.fd);
  }
  engine_pool_destroy(p);
  CHECK(count_threads() == before, "no thread left after destroy (%d)", count_threads() - before);
}

/* Detach waits out a serve in progress, and afterwards no serve comes. */
static void test_detach_waits(void) {
  struct engine_pool_config cfg = {.threads = 1};
  struct engine_pool *p = engine_pool_create(&cfg);
  CHECK(p != NULL, "pool created");
  if (!p) return;
  int sv[2];
  socket_pair(sv);
  struct writer *w = &writers[0];
  *w = (struct writer){.src = {.fd = sv[0], .serve = writer_serve}, .pair = 0, .slow_ms = 30};
  engine_attach(p, 0, &w->src);
  for (int t = 0; t < 1000 && !atomic_load(&w->in_serve); t++) sleep_ms(1);
  CHECK(atomic_load(&w->in_serve) == 1, "the first serve runs");
  atomic_store(&w->allowed, 100);
  engine_kick(&w->src); /* queued while the serve runs */
  engine_detach(&w->src);
  CHECK(atomic_load(&w->in_serve) == 0, "detach returned while a serve ran");
  int serves = atomic_load(&w->serves);
  sleep_ms(100);
  CHECK(atomic_load(&w->serves) == serves, "a kick queued before detach is dropped (%d more serves)",
        atomic_load(&w->serves) - serves);
  close(sv[0]);
  close(sv[1]);
  engine_pool_destroy(p);
}

/* A reader with bytes waiting is detached and a quiet one takes its slot:
 * the event fetched for the old one must not reach the new one. */
static void test_slot_reuse(void) {
  struct engine_pool_config cfg = {.threads = 1};
  struct engine_pool *p = engine_pool_create(&cfg);
  CHECK(p != NULL, "pool created");
  if (!p) return;
  for (int round = 0; round < 200; round++) {
    int a[2], b[2];
    socket_pair(a);
    socket_pair(b);
    struct reader *old = &readers[0], *fresh = &readers[1];
    *old = (struct reader){.src = {.fd = a[1], .serve = reader_serve}, .pair = 0};
    *fresh = (struct reader){.src = {.fd = b[1], .serve = reader_serve}, .pair = 1};
    engine_attach(p, 0, &old->src);
    for (int t = 0; t < 1000 && !atomic_load(&old->serves); t++) sleep_ms(1);
    unsigned char x = pattern(0, 0);
    ssize_t n = send(a[0], &x, 1, 0); /* readable: an event may be in flight */
    (void)n;
    engine_detach(&old->src);
    engine_attach(p, 0, &fresh->src);
    sleep_ms(round % 7 == 0 ? 5 : 0);
    engine_detach(&fresh->src);
    CHECK(fresh->got == 0 && fresh->bad == 0, "round %d: the new source read nothing", round);
    CHECK(atomic_load(&fresh->serves) <= 1, "round %d: the new source was served %d times", round,
          atomic_load(&fresh->serves));
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
  }
  engine_pool_destroy(p);
}

/* Sources that stop for their share (ENGINE_WANT_AGAIN) with nothing on
 * their sockets: each is served again by itself, and two on one thread
 * take turns rather than one running out its passes first. */
#define AGAIN_PASSES 50
struct turner {
  struct engine_source src;
  int id;
  atomic_int serves;
};
static int turn_log[2 * (AGAIN_PASSES + 1)];
static atomic_int turn_len;

static enum engine_want turner_serve(struct engine_source *src, int *moved) {
  struct turner *t = (struct turner *)src;
  (void)moved;
  int n = atomic_fetch_add(&t->serves, 1) + 1;
  int at = atomic_fetch_add(&turn_len, 1);
  if (at < (int)(sizeof turn_log / sizeof turn_log[0])) turn_log[at] = t->id;
  return n <= AGAIN_PASSES ? ENGINE_WANT_AGAIN : ENGINE_WANT_KICK;
}

static int turners_done(void *arg) {
  struct turner *t = arg;
  return atomic_load(&t[0].serves) > AGAIN_PASSES && atomic_load(&t[1].serves) > AGAIN_PASSES;
}

/* From the first serve of the later one on, neither is served twice in a
 * row while the other still has passes to make (the first may run alone
 * until the test thread gets to attach the second). */
static int turn_takers_alternate(int len) {
  int served[2] = {0, 0};
  for (int i = 0; i < len; i++) {
    int id = turn_log[i], other = !id;
    if (i > 0 && served[other] > 0 && turn_log[i - 1] == id && served[other] <= AGAIN_PASSES) {
      printf("    serve %d: source %d again, source %d at %d of %d passes\n", i, id, other, served[other],
             AGAIN_PASSES + 1);
      return 0;
    }
    served[id]++;
  }
  return 1;
}

static void test_again_takes_turns(void) {
  struct engine_pool_config cfg = {.threads = 1};
  struct engine_pool *p = engine_pool_create(&cfg);
  CHECK(p != NULL, "pool created");
  if (!p) return;
  int a[2], b[2];
  socket_pair(a);
  socket_pair(b);
  static struct turner t[2];
  t[0] = (struct turner){.src = {.fd = a[1], .serve = turner_serve}, .id = 0};
  t[1] = (struct turner){.src = {.fd = b[1], .serve = turner_serve}, .id = 1};
  atomic_store(&turn_len, 0);
  engine_attach(p, 0, &t[0].src);
  engine_attach(p, 0, &t[1].src);
  CHECK(wait_until(turners_done, t, 5000), "each source served again by itself (%d and %d serves)",
        atomic_load(&t[0].serves), atomic_load(&t[1].serves));
  sleep_ms(50);
  int serves = atomic_load(&t[0].serves) + atomic_load(&t[1].serves);
  sleep_ms(100);
  CHECK(atomic_load(&t[0].serves) + atomic_load(&t[1].serves) == serves,
        "once they wait for a kick they are served no more");
  engine_detach(&t[0].src);
  engine_detach(&t[1].src);
  /* Read after the detaches, which wait out the loop's last serve. */
  int len = atomic_load(&turn_len), max = (int)(sizeof turn_log / sizeof turn_log[0]);
  CHECK(turn_takers_alternate(len < max ? len : max), "they took turns once both were attached");
  engine_pool_destroy(p);
  close(a[0]);
  close(a[1]);
  close(b[0]);
  close(b[1]);
}

/* A pool sized for eight runs only the threads of the loops given a source,
 * and joins them all at destroy. */
static void test_threads_start_with_sources(void) {
  int before = count_threads();
  struct engine_pool_config cfg = {.threads = 8, .thread_start = name_thread};
  struct engine_pool *p = engine_pool_create(&cfg);
  CHECK(p != NULL, "pool created");
  if (!p) return;
  int fds[4][2];
  static const int on[4] = {0, 3, 5, 3};
  for (int i = 0; i < 4; i++) {
    socket_pair(fds[i]);
    readers[i] = (struct reader){.src = {.fd = fds[i][1], .serve = reader_serve}, .pair = i};
    CHECK(engine_attach(p, on[i], &readers[i].src) == 0, "attach to loop %d", on[i]);
  }
  for (int t = 0; t < 1000 && count_threads() < before + 3; t++) sleep_ms(1);
  sleep_ms(20);
  CHECK(count_threads() == before + 3 && engine_pool_started(p) == 3,
        "four sources on three loops of eight: 3 threads (%d)", count_threads() - before);
  for (int i = 0; i < 4; i++) engine_detach(&readers[i].src);
  engine_pool_destroy(p);
  CHECK(count_threads() == before, "none left after destroy (%d)", count_threads() - before);
  for (int i = 0; i < 4; i++) {
    close(fds[i][0]);
    close(fds[i][1]);
  }
}

int main(void) {
  test_many_sockets();
  test_detach_waits();
  test_slot_reuse();
  test_again_takes_turns();
  test_threads_start_with_sources();
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
