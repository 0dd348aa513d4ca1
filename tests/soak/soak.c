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
 *   soak [--seconds N] [--comms N] [--inflight N] [--threads N] [-v] [PLUGIN.so]
 *
 * Defaults: 60 s, 64 comms, 32 in flight, 8 threads.  Output: one PASS/FAIL
 * line per check with the numbers, then "N passed, N failed".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collx/net_abi.h"

#include "../common/proc.h"

#define DEFAULT_PLUGIN "./.libs/libnccl-net-collx.so"
#define MAX_COMMS 256
#define MAX_INFLIGHT NCCL_NET_MAX_REQUESTS
#define MAX_THREADS 64
#define SMALL_CAP (16u << 10)
#define LARGE_CAP (256u << 10)
#define TAIL 64
#define FILL 0xEE
#define TEXT_CAP 8192

struct side {
  int nfail;
  size_t len;
  char text[TEXT_CAP];
  /* resources: before dlopen, start (after warm-up), end (load on), after dlclose */
  int thr_pre, fd_pre, thr0, fd0, thr1, fd1, thr_post, fd_post;
  long rss0_kb, rss1_kb;
  double t0, t1;
  long msgs, msgs_at0;
  double bytes;
  long zero, one, full, large;
  int finished;
};

struct sshm {
  char handle[MAX_COMMS][NCCL_NET_HANDLE_MAXSIZE];
  int handles_ready;
  long limit[MAX_COMMS];        /* receiver: what it had posted when it stopped */
  int limit_ready[MAX_COMMS];
  long sent[MAX_COMMS];         /* sender: what it had posted when it saw that */
  int sent_ready[MAX_COMMS];
  int abort;
  struct side side[2]; /* 0 receiver, 1 sender */
};

static struct sshm *g;
static int g_role; /* 0 receiver, 1 sender */
static int g_comms = 64, g_inflight = 32, g_threads = 8, g_verbose;
static double g_seconds = 60;
static const char *g_plugin;
static ncclNet_v8_t *g_net;
static void *g_dl;
static int g_stop;     /* receiver: stop posting (local) */
static int g_may_exit; /* workers stay until the end sample is taken */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_mu);
  struct side *s = &g->side[g_role];
  size_t room = TEXT_CAP - s->len;
  if (room > 1 && s->nfail < 20) {
    int n = snprintf(s->text + s->len, room, "%s\n", msg);
    if (n > 0) s->len += (size_t)n < room ? (size_t)n : room - 1;
  }
  s->nfail++;
  pthread_mutex_unlock(&g_mu);
  __atomic_store_n(&g->abort, 1, __ATOMIC_SEQ_CST);
}

static int aborted(void) { return __atomic_load_n(&g->abort, __ATOMIC_RELAXED); }

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  (void)flags;
  if (level != NCCL_LOG_WARN && !(g_verbose && level == NCCL_LOG_INFO)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[soak %s] plugin %s %s:%d %s\n", g_role ? "sender" : "receiver",
          level == NCCL_LOG_WARN ? "WARN" : "INFO", file ? file : "?", line, msg);
}

/* ------------------------------------------------------------------------ */

/* Built with -fsanitize=address or thread: VmRSS says nothing about leaks. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_JUDGED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_JUDGED 0
#endif
#endif
#ifndef RSS_JUDGED
#define RSS_JUDGED 1
#endif

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
static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static size_t slot_cap(int slot) { return slot % 8 == 7 ? LARGE_CAP : SMALL_CAP; }

static size_t msg_size(int c, long k) {
  size_t cap = slot_cap((int)(k % g_inflight));
  uint64_t h = mix64(((uint64_t)c << 40) ^ (uint64_t)k);
  unsigned r = (unsigned)(h % 100);
  if (r < 5) return 0;
  if (r < 10) return 1;
  if (r < 20) return cap;
  return (size_t)((h >> 8) % (cap + 1));
}

static uint64_t msg_key(int c, long k) { return mix64(((uint64_t)c << 40) ^ (uint64_t)k ^ 0x5A5Aull); }

static void pat_fill(uint8_t *p, size_t n, uint64_t key) {
  size_t off = 0;
  for (; off + 8 <= n; off += 8) {
    uint64_t v = mix64(key + off);
    memcpy(p + off, &v, 8);
  }
  if (off < n) {
    uint64_t v = mix64(key + off);
    memcpy(p + off, &v, n - off);
  }
}

static long pat_check(const uint8_t *p, size_t n, uint64_t key) {
  size_t off = 0;
  for (; off < n; off += 8) {
    uint64_t v = mix64(key + off);
    size_t m = n - off < 8 ? n - off : 8;
    if (memcmp(p + off, &v, m) != 0) {
      for (size_t j = 0; j < m; j++)
        if (p[off + j] != ((uint8_t *)&v)[j]) return (long)(off + j);
    }
  }
  return -1;
}

/* ------------------------------------------------------------------------ */
struct comm {
  int idx;
  void *lcomm, *comm;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  uint8_t *buf[MAX_INFLIGHT];
  void *mh;
  void *req[MAX_INFLIGHT];
  long posted, done;
  long progress; /* done, published for the main thread */
  int limit_published;
};

static struct comm *g_c;

static int establish(struct comm *c) {
  ncclNetDeviceHandle_v8_t *dc = NULL;
  void *comm = NULL;
  ncclResult_t r = g_role ? g_net->connect(0, c->handle, &comm, &dc) : g_net->accept(c->lcomm, &comm, &dc);
  if (r != ncclSuccess) {
    fail("comm %d: %s returned %d", c->idx, g_role ? "connect" : "accept", r);
    return -1;
  }
  if (comm) c->comm = comm;
  return comm ? 1 : 0;
}

/* One pass over a comm: test in order, then post.  Returns 1 if something
 * moved, -1 on failure; sets *finished. */
static int pass(struct comm *c, int *finished) {
  int moved = 0;
  *finished = 0;
  while (c->done < c->posted) {
    long k = c->done;
    int w = (int)(k % g_inflight), d = 0, sizes[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    ncclResult_t r = g_net->test(c->req[w], &d, sizes);
    if (r != ncclSuccess) {
      fail("comm %d: test of message %ld returned %d", c->idx, k, r);
      return -1;
    }
    if (!d) break;
    size_t sz = msg_size(c->idx, k);
    if (sizes[0] != (int)sz || sizes[1] != -7) {
      fail("comm %d: message %ld completed with sizes[0] = %d (sizes[1] = %d), expected %zu", c->idx, k, sizes[0],
           sizes[1], sz);
      return -1;
    }
    if (!g_role) {
      long bad = pat_check(c->buf[w], sz, msg_key(c->idx, k));
      if (bad >= 0) {
        fail("comm %d: message %ld (%zu bytes): byte %ld wrong", c->idx, k, sz, bad);
        return -1;
      }
      size_t cap = slot_cap(w), end = sz + TAIL < cap ? sz + TAIL : cap;
      for (size_t j = sz; j < end; j++)
        if (c->buf[w][j] != FILL) {
          fail("comm %d: message %ld (%zu bytes, buffer %zu): byte %zu after the message was written", c->idx, k,
               sz, cap, j);
          return -1;
        }
    }
    struct side *s = &g->side[g_role];
    __atomic_add_fetch(&s->msgs, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_mu);
    s->bytes += (double)sz;
    s->zero += sz == 0;
    s->one += sz == 1;
    s->full += sz == slot_cap(w);
    s->large += slot_cap(w) == LARGE_CAP;
    pthread_mutex_unlock(&g_mu);
    c->done++;
    __atomic_store_n(&c->progress, c->done, __ATOMIC_RELAXED);
    moved = 1;
  }
  /* How far this side may post: nowhere past the receiver's count once it
   * stops, then, once the sender has said how far it got, to the larger. */
  long limit = -1;
  int agreed = __atomic_load_n(&g->sent_ready[c->idx], __ATOMIC_ACQUIRE);
  if (!g_role) {
    if (__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
      if (!c->limit_published) {
        g->limit[c->idx] = c->posted;
        __atomic_store_n(&g->limit_ready[c->idx], 1, __ATOMIC_RELEASE);
        c->limit_published = 1;
      }
      limit = g->limit[c->idx];
    }
  } else if (__atomic_load_n(&g->limit_ready[c->idx], __ATOMIC_ACQUIRE)) {
    if (!agreed) {
      g->sent[c->idx] = c->posted;
      __atomic_store_n(&g->sent_ready[c->idx], 1, __ATOMIC_RELEASE);
      agreed = 1;
    }
    limit = g->limit[c->idx];
  }
  if (limit >= 0 && agreed && g->sent[c->idx] > limit) limit = g->sent[c->idx];
  while ((limit < 0 || c->posted < limit) && c->posted - c->done < g_inflight) {
    long k = c->posted;
    int w = (int)(k % g_inflight);
    size_t sz = msg_size(c->idx, k), cap = slot_cap(w);
    void *r = NULL;
    ncclResult_t rc;
    if (g_role) {
      pat_fill(c->buf[w], sz, msg_key(c->idx, k)); /* idempotent: refilled on a retry */
      rc = g_net->isend(c->comm, c->buf[w], (int)sz, (int)(k % 1000), c->mh, &r);
    } else {
      size_t end = sz + TAIL < cap ? sz + TAIL : cap;
      memset(c->buf[w] + sz, FILL, end - sz);
      void *d = c->buf[w], *m = c->mh;
      int s = (int)cap, t = (int)(k % 1000);
      rc = g_net->irecv(c->comm, 1, &d, &s, &t, &m, &r);
    }
    if (rc != ncclSuccess) {
      fail("comm %d: %s of message %ld returned %d", c->idx, g_role ? "isend" : "irecv", k, rc);
      return -1;
    }
    if (!r) break;
    c->req[w] = r;
    c->posted++;
    moved = 1;
  }
  *finished = limit >= 0 && agreed && c->posted == limit && c->done == c->posted;
  return moved;
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  /* Connect / accept this thread's comms. */
  double end = now_s() + 30;
  for (;;) {
    int pending = 0;
    for (int i = t; i < g_comms; i += g_threads) {
      if (g_c[i].comm) continue;
      int u = establish(&g_c[i]);
      if (u < 0) return NULL;
      pending += !u;
    }
    if (!pending) break;
    if (now_s() > end || aborted()) {
      if (!aborted()) fail("thread %d: comms not connected after 30 s", t);
      return NULL;
    }
    sched_yield();
  }
  for (int i = t; i < g_comms; i += g_threads) {
    struct comm *c = &g_c[i];
    if (g_net->regMr(c->comm, c->buf[0], SMALL_CAP, NCCL_PTR_HOST, &c->mh) != ncclSuccess) {
      fail("comm %d: regMr failed", i);
      return NULL;
    }
  }
  unsigned idle = 0;
  while (!aborted()) {
    int moved = 0, all_finished = 1;
    for (int i = t; i < g_comms; i += g_threads) {
      int fin;
      int m = pass(&g_c[i], &fin);
      if (m < 0) return NULL;
      moved |= m;
      all_finished &= fin;
    }
    if (all_finished) {
      /* Stay (idle) until the main thread has sampled the end of the run. */
      while (!__atomic_load_n(&g_may_exit, __ATOMIC_ACQUIRE) && !aborted()) sleep_s(0.001);
      break;
    }
    if (moved) {
      idle = 0;
    } else if (++idle > 64) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    } else {
      sched_yield();
    }
  }
  return NULL;
}

static void *noop(void *a) { return a; }

static void sample(int *thr, int *fd, long *rss) {
  *thr = count_tasks();
  *fd = count_fds();
  if (rss) *rss = rss_kb();
}

static void side_main(void) {
  struct side *s = &g->side[g_role];
  pthread_t th;
  if (pthread_create(&th, NULL, noop, NULL) == 0) pthread_join(th, NULL); /* sanitizer helper threads */
  sample(&s->thr_pre, &s->fd_pre, NULL);
  g_dl = dlopen(g_plugin, RTLD_NOW | RTLD_LOCAL);
  if (!g_dl || !(g_net = dlsym(g_dl, "ncclNetPlugin_v8"))) {
    fail("cannot load %s: %s", g_plugin, dlerror());
    return;
  }
  int ndev = 0;
  if (g_net->init(logger) != ncclSuccess || g_net->devices(&ndev) != ncclSuccess || ndev < 1) {
    fail("init/devices failed (ndev %d)", ndev);
    return;
  }
  g_c = calloc((size_t)g_comms, sizeof *g_c);
  if (!g_c) {
    fail("out of memory");
    return;
  }
  for (int i = 0; i < g_comms; i++) {
    struct comm *c = &g_c[i];
    c->idx = i;
    for (int w = 0; w < g_inflight; w++) {
      c->buf[w] = malloc(slot_cap(w));
      if (!c->buf[w]) {
        fail("out of memory");
        return;
      }
      memset(c->buf[w], FILL, slot_cap(w)); /* touch every page now: RSS is flat from here on */
    }
  }
  if (!g_role) {
    for (int i = 0; i < g_comms; i++) {
      if (g_net->listen(0, g_c[i].handle, &g_c[i].lcomm) != ncclSuccess) {
        fail("listen %d failed", i);
        return;
      }
      memcpy(g->handle[i], g_c[i].handle, NCCL_NET_HANDLE_MAXSIZE);
    }
    __atomic_store_n(&g->handles_ready, 1, __ATOMIC_RELEASE);
  } else {
    double end = now_s() + 30;
    while (!__atomic_load_n(&g->handles_ready, __ATOMIC_ACQUIRE)) {
      if (now_s() > end || aborted()) {
        if (!aborted()) fail("no listen handles after 30 s");
        return;
      }
      sleep_s(0.001);
    }
    for (int i = 0; i < g_comms; i++) memcpy(g_c[i].handle, g->handle[i], NCCL_NET_HANDLE_MAXSIZE);
  }
  pthread_t tid[MAX_THREADS];
  int nt = 0;
  double t_start = now_s();
  for (int t = 0; t < g_threads; t++) {
    if (pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t) != 0) {
      fail("pthread_create failed");
      break;
    }
    nt++;
  }
  /* Warm-up: a few seconds, and every comm connected and through its
   * buffers twice (slow builds take long to connect 64 comms).  Then the
   * first sample; the last one after the measured window, load still on. */
  double warm = g_seconds * 0.1 < 2 ? 2 : g_seconds * 0.1 > 5 ? 5 : g_seconds * 0.1;
  if (warm > g_seconds / 2) warm = g_seconds / 2;
  double warm_end = t_start + 120;
  for (;;) {
    int ready = now_s() >= t_start + warm;
    for (int i = 0; ready && i < g_comms; i++)
      ready = __atomic_load_n(&g_c[i].progress, __ATOMIC_RELAXED) >= 2 * g_inflight;
    if (ready || aborted()) break;
    if (now_s() > warm_end) {
      fail("not every comm had completed %d messages %.0f s after the start", 2 * g_inflight, warm_end - t_start);
      break;
    }
    sleep_s(0.01);
  }
  s->t0 = now_s();
  s->msgs_at0 = __atomic_load_n(&s->msgs, __ATOMIC_RELAXED);
  sample(&s->thr0, &s->fd0, &s->rss0_kb);
  if (!g_role) {
    double window = g_seconds - warm;
    while (!aborted() && now_s() < s->t0 + window) sleep_s(0.01);
    s->t1 = now_s();
    sample(&s->thr1, &s->fd1, &s->rss1_kb);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
  } else {
    double end = t_start + g_seconds + 180;
    while (!aborted() && !__atomic_load_n(&g->limit_ready[0], __ATOMIC_ACQUIRE)) {
      if (now_s() > end) {
        fail("the receiver never ended the run");
        break;
      }
      sleep_s(0.01);
    }
    s->t1 = now_s();
    sample(&s->thr1, &s->fd1, &s->rss1_kb);
  }
  __atomic_store_n(&g_may_exit, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < nt; t++) pthread_join(tid[t], NULL);
  if (!aborted())
    for (int i = 0; i < g_comms; i++)
      if (g_c[i].done != g_c[i].posted)
        fail("comm %d: %ld of %ld messages completed at the end", i, g_c[i].done, g_c[i].posted);
  /* Teardown: close everything, dlclose, and nothing may be left. */
  for (int i = 0; i < g_comms; i++) {
    struct comm *c = &g_c[i];
    ncclResult_t r = ncclSuccess;
    if (c->comm) r = g_role ? g_net->closeSend(c->comm) : g_net->closeRecv(c->comm);
    if (r != ncclSuccess) fail("close of comm %d returned %d", i, r);
    if (c->lcomm && g_net->closeListen(c->lcomm) != ncclSuccess) fail("closeListen %d failed", i);
    for (int w = 0; w < g_inflight; w++) free(c->buf[w]);
  }
  free(g_c);
  g_net = NULL;
  if (dlclose(g_dl) != 0) fail("dlclose: %s", dlerror());
  double t1 = now_s();
  do {
    sample(&s->thr_post, &s->fd_post, NULL);
    if (s->thr_post == s->thr_pre && s->fd_post == s->fd_pre) break;
    sleep_s(0.01);
  } while (now_s() - t1 < 2.0);
  s->finished = 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
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
      g_verbose = 1;
    else if (a[0] == '-') {
      fprintf(stderr, "usage: %s [--seconds N] [--comms N] [--inflight N] [--threads N] [-v] [PLUGIN.so]\n",
              argv[0]);
      return 99;
    } else
      g_plugin = a;
  }
  if (g_seconds < 1 || g_comms < 1 || g_comms > MAX_COMMS || g_inflight < 8 || g_inflight > MAX_INFLIGHT ||
      g_threads < 1 || g_threads > MAX_THREADS) {
    fprintf(stderr, "%s: out of range (seconds >= 1, comms 1-%d, inflight 8-%d, threads 1-%d)\n", argv[0],
            MAX_COMMS, MAX_INFLIGHT, MAX_THREADS);
    return 99;
  }
  if (!g_plugin) g_plugin = getenv("COLLX_PLUGIN");
  if (!g_plugin || !*g_plugin) g_plugin = DEFAULT_PLUGIN;
  if (access(g_plugin, R_OK) != 0) {
    fprintf(stderr, "%s: plugin %s: %s\n", argv[0], g_plugin, strerror(errno));
    printf("0 passed, 1 failed\n");
    return 1;
  }
  setenv("COLLX_IFNAME", "lo", 1);
  if (!getenv("COLLX_CPU_AFFINITY")) setenv("COLLX_CPU_AFFINITY", "off", 1);
  double tol_mb = 8;
  const char *tm = getenv("SOAK_RSS_TOLERANCE_MB");
  if (tm && atof(tm) > 0) tol_mb = atof(tm);
  printf("collx soak: %d comms x %d in flight, %d threads per process, %.0f s, plugin %s\n", g_comms, g_inflight,
         g_threads, g_seconds, g_plugin);
  g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(g, 0, sizeof *g);
  pid_t pid[2];
  double t0 = now_s();
  for (int r = 0; r < 2; r++) {
    fflush(stdout);
    pid[r] = fork();
    if (pid[r] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      g_role = r;
      signal(SIGPIPE, SIG_DFL);
      side_main();
      exit(g->side[r].nfail ? 1 : 0);
    }
  }
  int st[2] = {0, 0}, done[2] = {0, 0}, killed = 0;
  double deadline = t0 + g_seconds + 240;
  while (!done[0] || !done[1]) {
    for (int r = 0; r < 2; r++)
      if (!done[r] && waitpid(pid[r], &st[r], WNOHANG) == pid[r]) {
        done[r] = 1;
        if (!(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0)) __atomic_store_n(&g->abort, 1, __ATOMIC_SEQ_CST);
      }
    if (now_s() > deadline) {
      for (int r = 0; r < 2; r++)
        if (!done[r]) {
          kill(pid[r], SIGKILL);
          waitpid(pid[r], &st[r], 0);
          done[r] = 1;
          killed = 1;
        }
    }
    sleep_s(0.01);
  }
  int np = 0, nf = 0;
  const char *who[2] = {"receiver", "sender"};
  /* 1. the processes and the data */
  int ok = !killed;
  for (int r = 0; r < 2; r++) ok &= WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0 && g->side[r].finished;
  struct side *R = &g->side[0], *S = &g->side[1];
  double dur = R->t1 - R->t0;
  long msgs = R->msgs - R->msgs_at0;
  double wall = now_s() - t0;
  printf("%s: data: %ld messages, %.2f GiB received and verified byte by byte (%.0f msg/s in the measured window, "
         "%.0f MB/s over the whole %.1f s); %ld zero-byte, %ld one-byte, %ld filling their buffer, %ld in 256 KiB "
         "buffers\n",
         ok && !R->nfail && !S->nfail ? "PASS" : "FAIL", R->msgs, R->bytes / (1 << 30), dur > 0 ? msgs / dur : 0,
         R->bytes / wall / 1e6, wall, R->zero, R->one, R->full, R->large);
  if (ok && !R->nfail && !S->nfail)
    np++;
  else
    nf++;
  if (killed) printf("  TIMEOUT: killed after %.0f s\n", g_seconds + 240);
  for (int r = 0; r < 2; r++) {
    if (!(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0)) {
      if (WIFSIGNALED(st[r]))
        printf("  [%s] killed by signal %d (%s)\n", who[r], WTERMSIG(st[r]), strsignal(WTERMSIG(st[r])));
      else
        printf("  [%s] exit status %d\n", who[r], WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : -1);
    }
    if (g->side[r].len) printf("  [%s] %.*s", who[r], (int)g->side[r].len, g->side[r].text);
  }
  /* 2, 3. resources flat during the load */
  for (int r = 0; r < 2; r++) {
    struct side *s = &g->side[r];
    if (!s->rss0_kb || !s->rss1_kb) {
      printf("FAIL: %s resources: not sampled (the run ended early)\n", who[r]);
      nf++;
      continue;
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
    flat ? np++ : nf++;
  }
  /* 4, 5. teardown */
  for (int r = 0; r < 2; r++) {
    struct side *s = &g->side[r];
    int back = s->finished && s->thr_post == s->thr_pre && s->fd_post == s->fd_pre;
    printf("%s: %s teardown: threads %d before dlopen, %d under load, %d after close + dlclose; descriptors %d, %d, "
           "%d\n",
           back ? "PASS" : "FAIL", who[r], s->thr_pre, s->thr1, s->thr_post, s->fd_pre, s->fd1, s->fd_post);
    back ? np++ : nf++;
  }
  printf("%d passed, %d failed\n", np, nf);
  return nf ? 1 : 0;
}
