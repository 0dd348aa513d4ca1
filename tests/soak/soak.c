/*
 * collx soak test: load held for a bounded time, every byte verified, and
 * the process's resources flat from start to end.
 *
 * Two processes over loopback (COLLX_IFNAME=lo), each dlopening the built
 * plugin: the receiver listens and accepts COMMS comms, the sender connects
 * them.  In each process THREADS threads share the comms (comm c belongs to
 * thread c % THREADS) and keep INFLIGHT requests in flight on every comm,
 * posted and tested the way NCCL's proxy does.  Message k on comm c has a
 * size derived from (c, k) -- zero, one byte, the whole buffer, or anything
 * in between, in 16 KiB and 256 KiB buffers -- and contents derived from
 * (c, k); the receiver checks the reported size, every byte, and that the 64
 * bytes after the message were not written.
 *
 * After a warm-up each process samples its resident memory (VmRSS), thread
 * count and open descriptors, and again at the end of the run, while the
 * load is still on; they must be flat (threads and descriptors equal, VmRSS
 * within 8 MiB + 5%, or SOAK_RSS_TOLERANCE_MB; in a sanitizer build VmRSS is
 * printed but not judged, since ASan's quarantine and TSan's shadow grow it
 * by design and LeakSanitizer is the leak check there).  At the end the receiver
 * stops posting, the sender sends exactly what was posted, both drain, close
 * every comm and dlclose the plugin: threads and descriptors must be back to
 * their values before dlopen.  (Small sends may complete before their
 * receive is posted, so the end is agreed in two steps: the receiver says
 * how far it posted, the sender says how far it had sent by then, and both
 * go on to the larger of the two.)
 *
 * The two processes are one case of the harness (tests/harness/case.h).
 *
 *   soak [--seconds N] [--comms N] [--inflight N] [--threads N] [-v] [PLUGIN.so]
 *
 * Defaults: 60 s, 64 comms, 32 in flight, 8 threads.  Output: one PASS/FAIL
 * line per check with the numbers, then "N passed, N failed".
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness/harness.h"
#include "../common/sanitized.h"

#define MAX_COMMS 256
#define MAX_INFLIGHT NCCL_NET_MAX_REQUESTS
#define MAX_THREADS 64
#define SMALL_CAP (16u << 10)
#define LARGE_CAP (256u << 10)
#define TAIL 64

/* Built with -fsanitize=address or thread: VmRSS says nothing about leaks. */
#define RSS_JUDGED (!COLLX_SANITIZED)

struct side {
  /* resources: before dlopen, start (after warm-up), end (load on), after dlclose */
  int thr_pre, fd_pre, thr0, fd0, thr1, fd1, thr_post, fd_post;
  long rss0_kb, rss1_kb;
  double t0, t1;
  long msgs, msgs_at0;
  double bytes;
  long zero, one, full, large;
  int finished;
};

/* The two processes' agreement on the end, and their measurements. */
struct soak_shared {
  long limit[MAX_COMMS]; /* receiver: what it had posted when it stopped */
  int limit_ready[MAX_COMMS];
  long sent[MAX_COMMS]; /* sender: what it had posted when it saw that */
  int sent_ready[MAX_COMMS];
  struct side side[3]; /* 1 receiver, 2 sender */
};

static int g_comms = 64, g_inflight = 32, g_threads = 8;
static double g_seconds = 60;
static struct soak_shared *g;
static int g_sender;
static int g_stop;     /* receiver: stop posting (local) */
static int g_may_exit; /* workers stay until the end sample is taken */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int aborted(void) { return hx_failed_all() || hx_aborted(); }

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &v) == 1) break;
  fclose(f);
  return v;
}

/* ------------------------------------------------------------------------ */
static size_t slot_cap(int slot) { return slot % 8 == 7 ? LARGE_CAP : SMALL_CAP; }

static size_t msg_size(int c, long k) {
  size_t cap = slot_cap((int)(k % g_inflight));
  uint64_t h = hx_mix64(((uint64_t)c << 40) ^ (uint64_t)k);
  unsigned r = (unsigned)(h % 100);
  if (r < 5) return 0;
  if (r < 10) return 1;
  if (r < 20) return cap;
  return (size_t)((h >> 8) % (cap + 1));
}

static uint64_t msg_key(int c, long k) { return hx_key(0x5A5Aull, (uint64_t)c, (uint64_t)k); }

/* ------------------------------------------------------------------------ */
struct comm {
  int idx;
  struct hx_conn k;
  uint8_t *buf[MAX_INFLIGHT];
  void *mh;
  void *req[MAX_INFLIGHT];
  long posted, done;
  long progress; /* done, published for the main thread */
  int limit_published;
};

static struct comm *g_c;

static void count_message(size_t sz, int w) {
  struct side *s = &g->side[hx_role()];
  __atomic_add_fetch(&s->msgs, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&g_mu);
  s->bytes += (double)sz;
  s->zero += sz == 0;
  s->one += sz == 1;
  s->full += sz == slot_cap(w);
  s->large += slot_cap(w) == LARGE_CAP;
  pthread_mutex_unlock(&g_mu);
}

/* The receiver's check of message k in slot w: bytes, and the tail after it. */
static int check_received(const struct comm *c, long k, int w, size_t sz) {
  long bad = hx_pattern_first_bad(c->buf[w], sz, msg_key(c->idx, k));
  if (bad >= 0) {
    hx_fail("comm %d: message %ld (%zu bytes): byte %ld wrong", c->idx, k, sz, bad);
    return -1;
  }
  size_t cap = slot_cap(w), end = sz + TAIL < cap ? sz + TAIL : cap;
  for (size_t j = sz; j < end; j++)
    if (c->buf[w][j] != HX_FILL) {
      hx_fail("comm %d: message %ld (%zu bytes, buffer %zu): byte %zu after the message was written", c->idx, k, sz,
              cap, j);
      return -1;
    }
  return 0;
}

/* Test in order; 1 if something completed, -1 on failure. */
static int test_in_order(struct comm *c) {
  int moved = 0;
  while (c->done < c->posted) {
    long k = c->done;
    int w = (int)(k % g_inflight), d = 0, sizes[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    ncclResult_t r = NET(test, c->req[w], &d, sizes);
    if (r != ncclSuccess) {
      hx_fail("comm %d: test of message %ld returned %s", c->idx, k, hx_result_str(r));
      return -1;
    }
    if (!d) break;
    size_t sz = msg_size(c->idx, k);
    if (sizes[0] != (int)sz || sizes[1] != -7) {
      hx_fail("comm %d: message %ld completed with sizes[0] = %d (sizes[1] = %d), expected %zu", c->idx, k, sizes[0],
              sizes[1], sz);
      return -1;
    }
    if (!g_sender && check_received(c, k, w, sz)) return -1;
    count_message(sz, w);
    c->done++;
    __atomic_store_n(&c->progress, c->done, __ATOMIC_RELAXED);
    moved = 1;
  }
  return moved;
}

/* How far this side may post: nowhere past the receiver's count once it
 * stops, then, once the sender has said how far it got, to the larger.
 * -1: no limit yet. */
static long post_limit(struct comm *c, int *agreed) {
  long limit = -1;
  *agreed = __atomic_load_n(&g->sent_ready[c->idx], __ATOMIC_ACQUIRE);
  if (!g_sender) {
    if (__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
      if (!c->limit_published) {
        g->limit[c->idx] = c->posted;
        __atomic_store_n(&g->limit_ready[c->idx], 1, __ATOMIC_RELEASE);
        c->limit_published = 1;
      }
      limit = g->limit[c->idx];
    }
  } else if (__atomic_load_n(&g->limit_ready[c->idx], __ATOMIC_ACQUIRE)) {
    if (!*agreed) {
      g->sent[c->idx] = c->posted;
      __atomic_store_n(&g->sent_ready[c->idx], 1, __ATOMIC_RELEASE);
      *agreed = 1;
    }
    limit = g->limit[c->idx];
  }
  if (limit >= 0 && *agreed && g->sent[c->idx] > limit) limit = g->sent[c->idx];
  return limit;
}

/* Post up to the limit and the window; 1 if something was posted, -1 on failure. */
static int post_more(struct comm *c, long limit) {
  int moved = 0;
  while ((limit < 0 || c->posted < limit) && c->posted - c->done < g_inflight) {
    long k = c->posted;
    int w = (int)(k % g_inflight);
    size_t sz = msg_size(c->idx, k), cap = slot_cap(w);
    void *r = NULL;
    ncclResult_t rc;
    if (g_sender) {
      hx_pattern_fill(c->buf[w], sz, msg_key(c->idx, k)); /* idempotent: refilled on a retry */
      rc = NET(isend, c->k.scomm, c->buf[w], (int)sz, (int)(k % 1000), c->mh, &r);
    } else {
      size_t end = sz + TAIL < cap ? sz + TAIL : cap;
      memset(c->buf[w] + sz, HX_FILL, end - sz);
      void *d = c->buf[w], *m = c->mh;
      int s = (int)cap, t = (int)(k % 1000);
      rc = NET(irecv, c->k.rcomm, 1, &d, &s, &t, &m, &r);
    }
    if (rc != ncclSuccess) {
      hx_fail("comm %d: %s of message %ld returned %s", c->idx, g_sender ? "isend" : "irecv", k, hx_result_str(rc));
      return -1;
    }
    if (!r) break;
    c->req[w] = r;
    c->posted++;
    moved = 1;
  }
  return moved;
}

/* One pass over a comm: test in order, then post.  Returns 1 if something
 * moved, -1 on failure; sets *finished. */
static int pass(struct comm *c, int *finished) {
  int agreed;
  *finished = 0;
  int tested = test_in_order(c);
  if (tested < 0) return -1;
  long limit = post_limit(c, &agreed);
  int posted = post_more(c, limit);
  if (posted < 0) return -1;
  *finished = limit >= 0 && agreed && c->posted == limit && c->done == c->posted;
  return tested | posted;
}

/* Connect or accept this thread's comms; 0, or -1. */
static int connect_comms(int t) {
  struct hx_wait w;
  hx_wait_begin(&w, 30.0);
  for (;;) {
    int pending = 0;
    for (int i = t; i < g_comms; i += g_threads) {
      int u = hx_conn_poll(&g_c[i].k, 0);
      if (u < 0) return -1;
      pending += !u;
    }
    if (!pending) break;
    if (hx_wait_over(&w) || aborted()) {
      if (!aborted()) hx_fail("thread %d: comms not connected after 30 s", t);
      return -1;
    }
    sched_yield();
  }
  for (int i = t; i < g_comms; i += g_threads) {
    struct comm *c = &g_c[i];
    if (NET(regMr, hx_conn_comm(&c->k), c->buf[0], SMALL_CAP, NCCL_PTR_HOST, &c->mh) != ncclSuccess) {
      hx_fail("comm %d: regMr failed", i);
      return -1;
    }
  }
  return 0;
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  hx_set_slot(1 + t); /* breadcrumbs for the first HX_SLOTS - 1 threads */
  if (connect_comms(t)) return NULL;
  struct hx_wait w = {0, 0};
  while (!aborted()) {
    int moved = 0, all_finished = 1;
    for (int i = t; i < g_comms; i += g_threads) {
      int fin, m = pass(&g_c[i], &fin);
      if (m < 0) return NULL;
      moved |= m;
      all_finished &= fin;
    }
    if (all_finished) {
      /* Stay (idle) until the main thread has sampled the end of the run. */
      while (!__atomic_load_n(&g_may_exit, __ATOMIC_ACQUIRE) && !aborted()) sleep_s(0.001);
      break;
    }
    if (moved)
      hx_wait_reset(&w);
    else
      hx_backoff(&w);
  }
  return NULL;
}

static void *noop(void *a) { return a; }

static void sample(int *thr, int *fd, long *rss) {
  *thr = count_tasks();
  *fd = count_fds();
  if (rss) *rss = rss_kb();
}

/* Buffers of every comm (touched now: RSS is flat from here on), listen or
 * the handles. */
static int set_up_comms(void) {
  g_c = calloc((size_t)g_comms, sizeof *g_c);
  if (!g_c) {
    hx_fail("out of memory");
    return -1;
  }
  char name[32];
  for (int i = 0; i < g_comms; i++) {
    struct comm *c = &g_c[i];
    c->idx = i;
    c->k.sender = g_sender;
    for (int w = 0; w < g_inflight; w++) {
      if (!(c->buf[w] = malloc(slot_cap(w)))) {
        hx_fail("out of memory");
        return -1;
      }
      memset(c->buf[w], HX_FILL, slot_cap(w));
    }
    snprintf(name, sizeof name, "handle %d", i);
    if (g_sender ? hx_conn_handle(&c->k, name, 30.0) : hx_conn_listen(&c->k, name, 0)) return -1;
  }
  return 0;
}

/* Warm-up: a few seconds, and every comm connected and through its buffers
 * twice (slow builds take long to connect 64 comms). */
static void warm_up(double t_start, double warm) {
  double warm_end = t_start + 120;
  for (;;) {
    int ready = now_s() >= t_start + warm;
    for (int i = 0; ready && i < g_comms; i++)
      ready = __atomic_load_n(&g_c[i].progress, __ATOMIC_RELAXED) >= 2 * g_inflight;
    if (ready || aborted()) return;
    if (now_s() > warm_end) {
      hx_fail("not every comm had completed %d messages %.0f s after the start", 2 * g_inflight, warm_end - t_start);
      return;
    }
    sleep_s(0.01);
  }
}

/* The measured window: the receiver ends it, the sender follows. */
static void measure(struct side *s, double t_start, double warm) {
  s->t0 = now_s();
  s->msgs_at0 = __atomic_load_n(&s->msgs, __ATOMIC_RELAXED);
  sample(&s->thr0, &s->fd0, &s->rss0_kb);
  hx_step("measuring");
  if (!g_sender) {
    while (!aborted() && now_s() < s->t0 + g_seconds - warm) sleep_s(0.01);
  } else {
    double end = t_start + g_seconds + 180;
    while (!aborted() && !__atomic_load_n(&g->limit_ready[0], __ATOMIC_ACQUIRE)) {
      if (now_s() > end) {
        hx_fail("the receiver never ended the run");
        break;
      }
      sleep_s(0.01);
    }
  }
  s->t1 = now_s();
  sample(&s->thr1, &s->fd1, &s->rss1_kb);
  if (!g_sender) __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
}

/* Close everything, dlclose: nothing may be left. */
static void tear_down(struct side *s) {
  hx_step("closing and unloading");
  for (int i = 0; i < g_comms; i++) {
    hx_conn_close(&g_c[i].k);
    for (int w = 0; w < g_inflight; w++) free(g_c[i].buf[w]);
  }
  free(g_c);
  hx_unload();
  double t1 = now_s();
  do {
    sample(&s->thr_post, &s->fd_post, NULL);
    if (s->thr_post == s->thr_pre && s->fd_post == s->fd_pre) break;
    sleep_s(0.01);
  } while (now_s() - t1 < 2.0);
}

static void side_main(void) {
  g = hx_shared();
  g_sender = hx_role() == 2;
  struct side *s = &g->side[hx_role()];
  pthread_t th;
  if (pthread_create(&th, NULL, noop, NULL) == 0) pthread_join(th, NULL); /* sanitizer helper threads */
  sample(&s->thr_pre, &s->fd_pre, NULL);
  if (hx_load() || set_up_comms()) return;
  pthread_t tid[MAX_THREADS];
  int nt = 0;
  double t_start = now_s();
  for (int t = 0; t < g_threads; t++) {
    if (pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t) != 0) {
      hx_fail("pthread_create failed");
      break;
    }
    nt++;
  }
  double warm = g_seconds * 0.1 < 2 ? 2 : g_seconds * 0.1 > 5 ? 5 : g_seconds * 0.1;
  if (warm > g_seconds / 2) warm = g_seconds / 2;
  warm_up(t_start, warm);
  measure(s, t_start, warm);
  __atomic_store_n(&g_may_exit, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < nt; t++) pthread_join(tid[t], NULL);
  if (!aborted())
    for (int i = 0; i < g_comms; i++)
      if (g_c[i].done != g_c[i].posted)
        hx_fail("comm %d: %ld of %ld messages completed at the end", i, g_c[i].done, g_c[i].posted);
  tear_down(s);
  s->finished = 1;
}

/* ---- the verdicts -------------------------------------------------------- */
static const char *const who[3] = {"", "receiver", "sender"};

static int judge_data(int case_ok, double wall) {
  const struct side *R = &g->side[1];
  double dur = R->t1 - R->t0;
  long msgs = R->msgs - R->msgs_at0;
  int ok = case_ok && R->finished && g->side[2].finished;
  printf("%s: data: %ld messages, %.2f GiB received and verified byte by byte (%.0f msg/s in the measured window, "
         "%.0f MB/s over the whole %.1f s); %ld zero-byte, %ld one-byte, %ld filling their buffer, %ld in 256 KiB "
         "buffers\n",
         ok ? "PASS" : "FAIL", R->msgs, R->bytes / (1 << 30), dur > 0 ? msgs / dur : 0, R->bytes / wall / 1e6, wall,
         R->zero, R->one, R->full, R->large);
  return ok;
}

static int judge_flat(int r, double tol_mb) {
  const struct side *s = &g->side[r];
  if (!s->rss0_kb || !s->rss1_kb) {
    printf("FAIL: %s resources: not sampled (the run ended early)\n", who[r]);
    return 0;
  }
  long grow = s->rss1_kb - s->rss0_kb;
  double lim = tol_mb * 1024 + 0.05 * (double)s->rss0_kb;
  int flat = s->thr0 == s->thr1 && s->fd0 == s->fd1 && (!RSS_JUDGED || (double)grow <= lim);
  char rss_limit[64];
  if (RSS_JUDGED)
    snprintf(rss_limit, sizeof rss_limit, "limit +%.1f", lim / 1024);
  else
    snprintf(rss_limit, sizeof rss_limit, "not judged in a sanitizer build");
  printf("%s: %s resources over %.1f s of load: VmRSS %.1f -> %.1f MiB (%+.1f, %s), threads %d -> %d, "
         "descriptors %d -> %d\n",
         flat ? "PASS" : "FAIL", who[r], s->t1 - s->t0, s->rss0_kb / 1024.0, s->rss1_kb / 1024.0, grow / 1024.0,
         rss_limit, s->thr0, s->thr1, s->fd0, s->fd1);
  return flat;
}

static int judge_teardown(int r) {
  const struct side *s = &g->side[r];
  int back = s->finished && s->thr_post == s->thr_pre && s->fd_post == s->fd_pre;
  printf("%s: %s teardown: threads %d before dlopen, %d under load, %d after close + dlclose; descriptors %d, %d, "
         "%d\n",
         back ? "PASS" : "FAIL", who[r], s->thr_pre, s->thr1, s->thr_post, s->fd_pre, s->fd1, s->fd_post);
  return back;
}

static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--seconds") && i + 1 < argc)
      g_seconds = atof(argv[++i]);
    else if (!strcmp(a, "--comms") && i + 1 < argc)
      g_comms = atoi(argv[++i]);
    else if (!strcmp(a, "--inflight") && i + 1 < argc)
      g_inflight = atoi(argv[++i]);
    else if (!strcmp(a, "--threads") && i + 1 < argc)
      g_threads = atoi(argv[++i]);
    else if (!strcmp(a, "-v"))
      hx_verbose = 1;
    else if (a[0] == '-')
      return -1;
    else
      hx_plugin_path = a;
  }
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (parse_args(argc, argv)) {
    fprintf(stderr, "usage: %s [--seconds N] [--comms N] [--inflight N] [--threads N] [-v] [PLUGIN.so]\n", argv[0]);
    return 99;
  }
  if (g_seconds < 1 || g_comms < 1 || g_comms > MAX_COMMS || g_inflight < 8 || g_inflight > MAX_INFLIGHT ||
      g_threads < 1 || g_threads > MAX_THREADS) {
    fprintf(stderr, "%s: out of range (seconds >= 1, comms 1-%d, inflight 8-%d, threads 1-%d)\n", argv[0], MAX_COMMS,
            MAX_INFLIGHT, MAX_THREADS);
    return 99;
  }
  static const char *const env[] = {"COLLX_IFNAME=lo", "COLLX_CPU_AFFINITY?=off", NULL};
  const struct hx_program prog = {.title = "collx soak", .env = env};
  if (hx_prepare(argv[0], &prog)) {
    printf("0 passed, 1 failed\n");
    return 1;
  }
  double tol_mb = 8;
  const char *tm = getenv("SOAK_RSS_TOLERANCE_MB");
  if (tm && atof(tm) > 0) tol_mb = atof(tm);
  printf("collx soak: %d comms x %d in flight, %d threads per process, %.0f s, plugin %s\n", g_comms, g_inflight,
         g_threads, g_seconds, hx_plugin_path);
  const struct hx_case soak = {"soak", "two processes under load", g_seconds + 240, {"leader", "receiver", "sender"},
                               NULL, side_main, {NULL}, NULL, NULL};
  double t0 = now_s();
  int case_ok = hx_run_case(&soak) == 0;
  g = hx_shared();
  int np = 0, nf = 0;
  judge_data(case_ok, now_s() - t0) ? np++ : nf++;
  for (int r = 1; r <= 2; r++) judge_flat(r, tol_mb) ? np++ : nf++;
  for (int r = 1; r <= 2; r++) judge_teardown(r) ? np++ : nf++;
  printf("%d passed, %d failed\n", np, nf);
  return nf ? 1 : 0;
}
