/*
 * collx fault tests: faults, bad input and load.
 *
 * Like the conformance driver, this program dlopens the BUILT plugin (argv
 * path, else $COLLX_PLUGIN, else ./.libs/libnccl-net-collx.so) and drives its
 * ncclNet_v8 table, but it injects faults: a peer killed or frozen in the
 * middle of a transfer, a rank that stops calling the plugin for a while,
 * packets dropped inside a pair of network namespaces, stray and hostile
 * clients on a listening port, garbage connection handles, and API misuse
 * (oversize messages, a 33rd request, NULL/stale requests, double close,
 * close with requests in flight, dlclose).
 *
 * Every case runs in its own forked process group: a "leader" that injects
 * the fault and judges, and workers that load the plugin.  The harness kills
 * the whole group at the case deadline, so a hang is a FAIL with the step
 * each process was at.  Verdicts and measurements go through shared memory,
 * which survives a crash.  Run it under ASan/UBSan/TSan builds to prove that
 * nothing is written out of bounds (.ci/sanitizers.sh does).
 *
 *   faults [-v] [--list] [--case NAME[,NAME...]] [PLUGIN.so]
 *
 * Environment: COLLX_PLUGIN, COLLX_FAULTS_SCALE (multiplies deadlines and
 * tolerances for slow builds; the limits the plugin promises are printed
 * unscaled next to the measurement).  The workers run with COLLX_IFNAME=lo,
 * COLLX_TIMEOUT=3 and COLLX_CONNECT_TIMEOUT=1.
 *
 * Output: one PASS/FAIL/SKIP line per case with the measured times, then
 * "N passed, N failed, N skipped".  Exit 1 if anything failed, 77 if every
 * case was skipped, else 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "collx/net_abi.h"
#include "core/handle.h"
#include "transport/tcp/wire.h"

#include "../common/proc.h"

/* The handle layout the garbage-handle case relies on. */
_Static_assert(offsetof(struct collx_handle, secret) == 32, "secret at offset 32 of the handle");
_Static_assert(offsetof(struct collx_handle, port) == 28, "port at offset 28 of the handle");

#define DEFAULT_PLUGIN "./.libs/libnccl-net-collx.so"
#define TIMEOUT_S 3         /* COLLX_TIMEOUT for the workers */
#define CONNECT_TIMEOUT_S 1 /* COLLX_CONNECT_TIMEOUT for the workers */
#define KILL_LIMIT_S 2.0    /* error after SIGKILL of the peer within this */
#define NROLES 4            /* 0 = leader, 1..3 = workers */
#define TEXT_CAP 6144
#define FILL 0xEE

/* ------------------------------------------------------------------------ */
/* Shared state of one case (leader + workers). */
struct rolebuf {
  int nfail, nskip, finished, pid;
  char step[200];
  size_t len;
  char text[TEXT_CAP];
};

struct cshm {
  struct rolebuf r[NROLES];
  char summary[1024];
  char handle[4][NCCL_NET_HANDLE_MAXSIZE];
  int handle_ready[4];
  int flag[16];
  int bar[16];
  long count[NROLES];
  long pending[NROLES];       /* requests posted and not yet completed */
  double t_event;             /* when the fault was injected */
  double err_wait_s;          /* survivors give up this long after t_event */
  double t_err[NROLES];
  int err_code[NROLES];
  char err_call[NROLES][32];
  char warn[NROLES][2048];
  char devname[NROLES][64];
  char addr[NROLES][64];
  double metric[NROLES][8];
  int imetric[NROLES][8];
};

struct fcase {
  const char *name;
  const char *summary;
  double timeout_s;
  void (*fn)(void);
  const char *roles[NROLES];
};

static struct cshm *g_shm;
static int g_role;
static const struct fcase *g_case;
static double g_scale = 1.0;
static int g_verbose;
static const char *g_plugin;

static double S(double s) { return s * g_scale; }

static const char *res_str(int r) {
  static const char *const n[] = {"ncclSuccess",        "ncclUnhandledCudaError", "ncclSystemError",
                                  "ncclInternalError",  "ncclInvalidArgument",    "ncclInvalidUsage",
                                  "ncclRemoteError",    "ncclInProgress"};
  if (r >= 0 && r < 8) return n[r];
  return "ncclResult(?)";
}

/* ------------------------------------------------------------------------ */
/* Reporting (any process of the case). */
static pthread_mutex_t g_rep_mu = PTHREAD_MUTEX_INITIALIZER;

static void report_v(const char *kind, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  pthread_mutex_lock(&g_rep_mu);
  struct rolebuf *b = &g_shm->r[g_role];
  size_t room = TEXT_CAP - b->len;
  if (room > 1) {
    int n = snprintf(b->text + b->len, room, "%s: %s\n", kind, msg);
    if (n > 0) b->len += (size_t)n < room ? (size_t)n : room - 1;
  }
  pthread_mutex_unlock(&g_rep_mu);
  if (g_verbose)
    fprintf(stderr, "[%s/%s] %s: %s\n", g_case->name, g_case->roles[g_role] ? g_case->roles[g_role] : "?", kind,
            msg);
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v("FAIL", fmt, ap);
  va_end(ap);
  __atomic_add_fetch(&g_shm->r[g_role].nfail, 1, __ATOMIC_SEQ_CST);
}

__attribute__((format(printf, 1, 2))) static void skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v("SKIP", fmt, ap);
  va_end(ap);
  __atomic_add_fetch(&g_shm->r[g_role].nskip, 1, __ATOMIC_SEQ_CST);
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v("note", fmt, ap);
  va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void summary(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t l = strlen(g_shm->summary);
  if (l < sizeof g_shm->summary - 1) vsnprintf(g_shm->summary + l, sizeof g_shm->summary - l, fmt, ap);
  va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void step(const char *fmt, ...) {
  char buf[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(g_shm->r[g_role].step, buf, sizeof buf);
}

static int nfailed(void) {
  int n = 0;
  for (int r = 0; r < NROLES; r++) n += __atomic_load_n(&g_shm->r[r].nfail, __ATOMIC_SEQ_CST);
  return n;
}

/* ------------------------------------------------------------------------ */
/* Coordination through shared memory. */
static void set_flag(int i, int v) { __atomic_store_n(&g_shm->flag[i], v, __ATOMIC_SEQ_CST); }
static int get_flag(int i) { return __atomic_load_n(&g_shm->flag[i], __ATOMIC_SEQ_CST); }

/* Wait until flag i >= v; 0 on success, -1 (reported) on timeout. */
static int wait_flag(int i, int v, double timeout_s, const char *what) {
  double end = now_s() + S(timeout_s);
  while (get_flag(i) < v) {
    if (get_flag(15)) {
      fail("gave up waiting for %s: another process of the case died", what);
      return -1;
    }
    if (now_s() > end) {
      fail("timed out after %.1f s waiting for %s", S(timeout_s), what);
      return -1;
    }
    sleep_s(0.001);
  }
  return 0;
}

/* All n workers meet at barrier i. */
static int barrier(int i, int n, const char *what) {
  __atomic_add_fetch(&g_shm->bar[i], 1, __ATOMIC_SEQ_CST);
  double end = now_s() + S(20.0);
  while (__atomic_load_n(&g_shm->bar[i], __ATOMIC_SEQ_CST) < n) {
    if (get_flag(15)) {
      fail("gave up at barrier '%s': another process of the case died", what);
      return -1;
    }
    if (now_s() > end) {
      fail("timed out at barrier '%s' (the peer is stuck or gone)", what);
      return -1;
    }
    sleep_s(0.0005);
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Resources of this process. */

static void list_fds(char *out, size_t cap) {
  out[0] = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return;
  size_t len = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
    char link[128];
    ssize_t l = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
    if (l < 0) l = 0;
    link[l] = 0;
    int n = snprintf(out + len, cap - len, "%s%s->%s", len ? " " : "", e->d_name, link);
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
  closedir(d);
}

/* ------------------------------------------------------------------------ */
/* Data patterns and buffers. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static void pat_fill(uint8_t *p, size_t n, uint64_t key) {
  for (size_t off = 0; off < n; off += 8) {
    uint64_t v = mix64(key + off / 8);
    memcpy(p + off, &v, n - off < 8 ? n - off : 8);
  }
}

/* Offset of the first wrong byte, or -1. */
static long pat_check(const uint8_t *p, size_t n, uint64_t key) {
  for (size_t off = 0; off < n; off += 8) {
    uint64_t v = mix64(key + off / 8);
    size_t m = n - off < 8 ? n - off : 8;
    if (memcmp(p + off, &v, m) != 0) {
      const uint8_t *e = (const uint8_t *)&v;
      for (size_t k = 0; k < m; k++)
        if (p[off + k] != e[k]) return (long)(off + k);
    }
  }
  return -1;
}

/* A buffer of n bytes that ends exactly at an inaccessible page: a write or
 * read past its end is a SIGSEGV in any build, not only under ASan. */
struct gbuf {
  uint8_t *p;
  void *base;
  size_t maplen;
};
static int gbuf_alloc(struct gbuf *g, size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t body = (n + pg - 1) / pg * pg;
  if (body == 0) body = pg;
  g->maplen = body + pg;
  g->base = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g->base == MAP_FAILED) {
    fail("mmap %zu: %s", g->maplen, strerror(errno));
    return -1;
  }
  mprotect((uint8_t *)g->base + body, pg, PROT_NONE);
  g->p = (uint8_t *)g->base + body - n;
  return 0;
}
static void gbuf_free(struct gbuf *g) {
  if (g->base && g->base != MAP_FAILED) munmap(g->base, g->maplen);
  g->base = NULL;
}

/* ------------------------------------------------------------------------ */
/* The plugin, as seen by a worker. */
static void *g_dl;
static ncclNet_v8_t *g_net;
static int g_dev;
static ncclNetProperties_v8_t g_props;
static double g_max_call;

static pthread_mutex_t g_warn_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_warn[16384];
static size_t g_warn_len;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  (void)flags;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT) {
    pthread_mutex_lock(&g_warn_mu);
    size_t room = sizeof g_warn - g_warn_len;
    if (room > 1) {
      int n = snprintf(g_warn + g_warn_len, room, "%s\n", msg);
      if (n > 0) g_warn_len += (size_t)n < room ? (size_t)n : room - 1;
    }
    pthread_mutex_unlock(&g_warn_mu);
  }
  if (g_verbose && level != NCCL_LOG_NONE)
    fprintf(stderr, "[%s/%s] plugin %s %s:%d %s\n", g_case->name, g_case->roles[g_role],
            level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "LOG", file ? file : "?", line, msg);
}

static size_t warn_mark(void) {
  pthread_mutex_lock(&g_warn_mu);
  size_t m = g_warn_len;
  pthread_mutex_unlock(&g_warn_mu);
  return m;
}

static void warn_since(size_t mark, char *out, size_t cap) {
  pthread_mutex_lock(&g_warn_mu);
  size_t n = g_warn_len > mark ? g_warn_len - mark : 0;
  const char *from = g_warn + mark;
  if (n >= cap) { /* keep the first WARNs: they say what went wrong first */
    n = cap - 1;
  }
  memcpy(out, from, n);
  out[n] = 0;
  pthread_mutex_unlock(&g_warn_mu);
  while (n > 0 && out[n - 1] == '\n') out[--n] = 0;
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = '|';
}

#define PCALL(fn, ...)                                 \
  ({                                                   \
    double t0_ = now_s();                              \
    ncclResult_t r_ = g_net->fn(__VA_ARGS__);          \
    double dt_ = now_s() - t0_;                        \
    if (dt_ > g_max_call) g_max_call = dt_;            \
    r_;                                                \
  })

static int load_plugin(void) {
  step("dlopen");
  g_dl = dlopen(g_plugin, RTLD_NOW | RTLD_LOCAL);
  if (!g_dl) {
    fail("dlopen(%s): %s", g_plugin, dlerror());
    return -1;
  }
  g_net = (ncclNet_v8_t *)dlsym(g_dl, "ncclNetPlugin_v8");
  if (!g_net) {
    fail("no ncclNetPlugin_v8 in %s", g_plugin);
    return -1;
  }
  step("init");
  ncclResult_t r = g_net->init(logger);
  if (r != ncclSuccess) {
    fail("init returned %s", res_str(r));
    return -1;
  }
  int ndev = 0;
  r = g_net->devices(&ndev);
  if (r != ncclSuccess || ndev < 1) {
    fail("devices returned %s, ndev %d (COLLX_IFNAME=%s)", res_str(r), ndev, getenv("COLLX_IFNAME"));
    return -1;
  }
  g_dev = 0;
  r = g_net->getProperties(0, &g_props);
  if (r != ncclSuccess) {
    fail("getProperties(0) returned %s", res_str(r));
    return -1;
  }
  snprintf(g_shm->devname[g_role], sizeof g_shm->devname[g_role], "%s", g_props.name ? g_props.name : "?");
  return 0;
}

static int unload_plugin(void) {
  if (!g_dl) return 0;
  step("dlclose");
  int rc = dlclose(g_dl);
  g_dl = NULL;
  g_net = NULL;
  if (rc != 0) fail("dlclose: %s", dlerror());
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Connections.  The receiving side listens (as in NCCL), publishes the handle
 * in slot `slot` of the shared page, and accepts; the sending side connects. */
struct conn {
  int sender;
  int slot;
  void *lcomm, *scomm, *rcomm;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  int up;
  int calls;
};

static int conn_listen(struct conn *k) {
  void *l = NULL;
  ncclResult_t r = PCALL(listen, g_dev, k->handle, &l);
  if (r != ncclSuccess || !l) {
    fail("listen returned %s (comm %p)", res_str(r), l);
    return -1;
  }
  k->lcomm = l;
  memcpy(g_shm->handle[k->slot], k->handle, sizeof k->handle);
  __atomic_store_n(&g_shm->handle_ready[k->slot], 1, __ATOMIC_SEQ_CST);
  return 0;
}

static int conn_get_handle(struct conn *k, double timeout_s) {
  double end = now_s() + S(timeout_s);
  while (!__atomic_load_n(&g_shm->handle_ready[k->slot], __ATOMIC_SEQ_CST)) {
    if (now_s() > end) {
      fail("no listen handle after %.1f s", S(timeout_s));
      return -1;
    }
    sleep_s(0.001);
  }
  memcpy(k->handle, g_shm->handle[k->slot], sizeof k->handle);
  return 0;
}

/* One connect/accept call.  1: up, 0: not yet, -1: error (reported). */
static int conn_poll(struct conn *k) {
  if (k->up) return 1;
  void *comm = NULL;
  ncclNetDeviceHandle_v8_t *dc = NULL;
  ncclResult_t r;
  k->calls++;
  if (k->sender)
    r = PCALL(connect, g_dev, k->handle, &comm, &dc);
  else
    r = PCALL(accept, k->lcomm, &comm, &dc);
  if (r != ncclSuccess) {
    fail("%s call #%d returned %s", k->sender ? "connect" : "accept", k->calls, res_str(r));
    return -1;
  }
  if (!comm) return 0;
  if (k->sender)
    k->scomm = comm;
  else
    k->rcomm = comm;
  k->up = 1;
  return 1;
}

static int conn_establish(struct conn *k, int sender, int slot, double timeout_s) {
  memset(k, 0, sizeof *k);
  k->sender = sender;
  k->slot = slot;
  step("%s (slot %d)", sender ? "connect" : "listen/accept", slot);
  if (sender ? conn_get_handle(k, 10.0) : conn_listen(k)) return -1;
  double end = now_s() + S(timeout_s);
  for (;;) {
    int u = conn_poll(k);
    if (u < 0) return -1;
    if (u) return 0;
    if (now_s() > end) {
      fail("%s did not complete within %.1f s", sender ? "connect" : "accept", S(timeout_s));
      return -1;
    }
    sched_yield();
  }
}

static void conn_close(struct conn *k) {
  ncclResult_t r;
  if (k->scomm && (r = PCALL(closeSend, k->scomm)) != ncclSuccess) fail("closeSend returned %s", res_str(r));
  if (k->rcomm && (r = PCALL(closeRecv, k->rcomm)) != ncclSuccess) fail("closeRecv returned %s", res_str(r));
  if (k->lcomm && (r = PCALL(closeListen, k->lcomm)) != ncclSuccess) fail("closeListen returned %s", res_str(r));
  k->scomm = k->rcomm = k->lcomm = NULL;
}

/* ------------------------------------------------------------------------ */
/* A flow: messages in one direction on one comm, up to FW in flight, posted
 * and tested the way NCCL's proxy does.  Receivers verify size and bytes. */
#define FW 8
struct flow {
  void *comm;
  int sender;
  int tag;
  int window;
  size_t cap;
  long limit; /* messages in all; 0: unbounded */
  int all_max; /* every message fills its buffer */
  uint64_t key;
  uint8_t *buf[FW];
  void *mh;
  void *req[FW];
  long posted, done;
  long nulls;
};

static size_t flow_size(const struct flow *f, long i) {
  if (f->all_max) return f->cap;
  switch (i % 5) {
  case 0: return f->cap;
  case 1: return 1;
  case 2: return f->cap < 4096 ? f->cap : 4096;
  case 3: return f->cap / 2 + 3 < f->cap ? f->cap / 2 + 3 : f->cap;
  default: return f->cap < 65537 ? f->cap : 65537;
  }
}

static int flow_init(struct flow *f, void *comm, int sender, size_t cap, int tag, int window, long limit,
                     uint64_t key) {
  memset(f, 0, sizeof *f);
  f->comm = comm;
  f->sender = sender;
  f->cap = cap;
  f->tag = tag;
  f->window = window > FW ? FW : window;
  f->limit = limit;
  f->key = key;
  for (int w = 0; w < f->window; w++) {
    f->buf[w] = malloc(cap ? cap : 1);
    if (!f->buf[w]) {
      fail("out of memory");
      return -1;
    }
  }
  ncclResult_t r = PCALL(regMr, comm, f->buf[0], cap, NCCL_PTR_HOST, &f->mh);
  if (r != ncclSuccess) {
    fail("regMr returned %s", res_str(r));
    return -1;
  }
  return 0;
}

/* Only after the comm is closed: the plugin may hold the buffers till then. */
static void flow_free(struct flow *f) {
  for (int w = 0; w < f->window; w++) free(f->buf[w]);
  memset(f->buf, 0, sizeof f->buf);
}

static int flow_finished(const struct flow *f) { return f->limit && f->done >= f->limit; }

/* Test the oldest requests, then post what the window allows.  Returns
 * ncclSuccess, a plugin error (with *call naming the call), or -1 after a
 * verification failure (reported). */
static int flow_step(struct flow *f, const char **call) {
  *call = "";
  while (f->done < f->posted) {
    long i = f->done;
    int w = (int)(i % f->window);
    int done = 0, sizes[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    ncclResult_t rc = PCALL(test, f->req[w], &done, sizes);
    *call = "test";
    if (rc != ncclSuccess) return rc;
    if (!done) break;
    f->req[w] = NULL;
    size_t sz = flow_size(f, i);
    if (sizes[0] != (int)sz) {
      fail("%s of message %ld completed with sizes[0] = %d, expected %zu", f->sender ? "send" : "receive", i,
           sizes[0], sz);
      return -1;
    }
    if (!f->sender) {
      long bad = pat_check(f->buf[w], sz, f->key + (uint64_t)i * 1000003u);
      if (bad >= 0) {
        fail("message %ld (%zu bytes): byte %ld wrong", i, sz, bad);
        return -1;
      }
    }
    f->done++;
  }
  while ((!f->limit || f->posted < f->limit) && f->posted - f->done < f->window) {
    long i = f->posted;
    int w = (int)(i % f->window);
    size_t sz = flow_size(f, i);
    void *r = NULL;
    ncclResult_t rc;
    if (f->sender) {
      if (f->nulls == 0) pat_fill(f->buf[w], sz, f->key + (uint64_t)i * 1000003u);
      rc = PCALL(isend, f->comm, f->buf[w], (int)sz, f->tag, f->mh, &r);
      *call = "isend";
    } else {
      void *d = f->buf[w], *m = f->mh;
      int s = (int)f->cap, t = f->tag;
      rc = PCALL(irecv, f->comm, 1, &d, &s, &t, &m, &r);
      *call = "irecv";
    }
    if (rc != ncclSuccess) return rc;
    if (!r) {
      f->nulls++;
      break;
    }
    f->nulls = 0;
    f->req[w] = r;
    f->posted++;
  }
  *call = "";
  return ncclSuccess;
}

/* Record an error seen by this worker for the leader. */
static void record_error(int rc, const char *call, size_t mark) {
  g_shm->t_err[g_role] = now_s();
  /* A plugin thread may be logging the WARN right now: give it a moment. */
  double end = now_s() + 0.5;
  while (warn_mark() == mark && now_s() < end) sleep_s(0.001);
  g_shm->metric[g_role][1] = now_s() - g_shm->t_err[g_role];
  g_shm->err_code[g_role] = rc;
  snprintf(g_shm->err_call[g_role], sizeof g_shm->err_call[g_role], "%s", call);
  warn_since(mark, g_shm->warn[g_role], sizeof g_shm->warn[g_role]);
}

/* ------------------------------------------------------------------------ */
/* Process management (leader side). */
static pid_t spawn(int role, void (*fn)(void *), void *arg) {
  fflush(stdout);
  fflush(stderr);
  pid_t p = fork();
  if (p < 0) {
    fail("fork: %s", strerror(errno));
    return -1;
  }
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    g_role = role;
    g_shm->r[role].pid = getpid();
    signal(SIGPIPE, SIG_DFL); /* a plugin that lets SIGPIPE through must show it */
    step("starting");
    fn(arg);
    g_shm->r[role].finished = 1;
    step("exiting (atexit handlers, plugin destructors)");
    exit(g_shm->r[role].nfail ? 1 : 0);
  }
  g_shm->r[role].pid = p;
  return p;
}

static void describe_status(int st, char *buf, size_t len) {
  if (WIFSIGNALED(st))
    snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (WIFEXITED(st))
    snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
  else
    snprintf(buf, len, "status 0x%x", st);
}

/* Wait for worker `role` until the deadline (absolute); kill it then.  If
 * `victim`, a death by SIGKILL/SIGSTOP-related signal is expected. */
static int reap(int role, double deadline, int victim) {
  pid_t pid = g_shm->r[role].pid;
  if (pid <= 0) return -1;
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return -1;
    if (now_s() > deadline) {
      char at[200];
      memcpy(at, g_shm->r[role].step, sizeof at);
      at[sizeof at - 1] = 0;
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      g_shm->r[role].pid = 0;
      if (!victim) fail("[%s] still running at its deadline, killed; it was at: %s", g_case->roles[role], at);
      return -1;
    }
    sleep_s(0.002);
  }
  g_shm->r[role].pid = 0;
  if (victim) return 0;
  int ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || (WEXITSTATUS(st) == 1 && g_shm->r[role].nfail));
  if (!ok || (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !g_shm->r[role].finished)) {
    char d[128], at[200];
    describe_status(st, d, sizeof d);
    memcpy(at, g_shm->r[role].step, sizeof at);
    at[sizeof at - 1] = 0;
    fail("[%s] ended abnormally (%s, no verdict: a crash or a sanitizer report, see stderr); it was at: %s",
         g_case->roles[role], d, at);
    set_flag(15, 1);
    return -1;
  }
  return 0;
}

/* Wait for every live worker until the deadline; once one ended badly the
 * others get 3 s to notice before they are killed. */
static void reap_workers(double deadline) {
  for (;;) {
    int left = 0;
    for (int r = 1; r < NROLES; r++) {
      pid_t pid = g_shm->r[r].pid;
      if (pid <= 0) continue;
      int st;
      pid_t w = waitpid(pid, &st, WNOHANG);
      if (w != pid) {
        left++;
        continue;
      }
      int ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || (WEXITSTATUS(st) == 1 && g_shm->r[r].nfail)) &&
               !(WEXITSTATUS(st) == 0 && !g_shm->r[r].finished);
      if (!ok) {
        char d[128], at[200];
        describe_status(st, d, sizeof d);
        memcpy(at, g_shm->r[r].step, sizeof at);
        at[sizeof at - 1] = 0;
        fail("[%s] ended abnormally (%s, no verdict: a crash or a sanitizer report, see stderr); it was at: %s",
             g_case->roles[r], d, at);
        set_flag(15, 1);
        if (deadline > now_s() + 3.0) deadline = now_s() + 3.0;
      }
      g_shm->r[r].pid = 0;
    }
    if (!left) return;
    if (now_s() > deadline) {
      for (int r = 1; r < NROLES; r++)
        if (g_shm->r[r].pid > 0) reap(r, 0, 0);
      return;
    }
    sleep_s(0.002);
  }
}

static void kill_all_workers(void) {
  for (int r = 1; r < NROLES; r++)
    if (g_shm->r[r].pid > 0) {
      kill(g_shm->r[r].pid, SIGKILL);
      waitpid(g_shm->r[r].pid, NULL, 0);
      g_shm->r[r].pid = 0;
    }
}

static int wait_count(int role, long n, double timeout_s) {
  double end = now_s() + S(timeout_s);
  while (__atomic_load_n(&g_shm->count[role], __ATOMIC_SEQ_CST) < n) {
    if (now_s() > end) {
      fail("[%s] completed only %ld messages in %.1f s (waited for %ld)", g_case->roles[role],
           g_shm->count[role], S(timeout_s), n);
      return -1;
    }
    if (g_shm->r[role].finished || nfailed()) {
      fail("[%s] stopped before the fault was injected", g_case->roles[role]);
      return -1;
    }
    sleep_s(0.002);
  }
  return 0;
}

/* ======================================================================== */
/* Streaming workers for the kill / stop / drop cases. */
struct sargs {
  int sender;
  size_t cap;         /* message size (largest) */
  int all_max;        /* every message that large */
  const char *netns;  /* enter this network namespace first */
  const char *ifname; /* COLLX_IFNAME */
};

static int enter_netns(const char *name) {
  char path[128];
  snprintf(path, sizeof path, "/run/netns/%s", name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    fail("cannot enter network namespace %s: %s", name, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

static void w_stream(void *arg) {
  const struct sargs *a = arg;
  if (a->netns && enter_netns(a->netns)) return;
  if (a->ifname) setenv("COLLX_IFNAME", a->ifname, 1);
  if (load_plugin()) return;
  struct conn k;
  if (conn_establish(&k, a->sender, 0, 10.0)) return;
  struct flow f;
  if (flow_init(&f, a->sender ? k.scomm : k.rcomm, a->sender, a->cap, 7, 8, 0, 0xF00D)) return;
  f.all_max = a->all_max;
  size_t mark = warn_mark();
  step("streaming");
  for (;;) {
    const char *call;
    int rc = flow_step(&f, &call);
    __atomic_store_n(&g_shm->count[g_role], f.done, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_shm->pending[g_role], f.posted - f.done, __ATOMIC_SEQ_CST);
    if (rc < 0) break;
    double ev = g_shm->t_event;
    if (rc != ncclSuccess) {
      record_error(rc, call, mark);
      if (ev <= 0) fail("%s returned %s before any fault was injected", call, res_str(rc));
      /* Every other request still in flight must now fail too (or have
       * completed), never stay pending. */
      long first = f.done + (strcmp(call, "test") == 0 ? 1 : 0);
      int nerr = 0, ndone = 0, nstuck = 0, other = 0;
      for (long i = first; i < f.posted; i++) {
        void *r = f.req[i % f.window];
        double end = now_s() + S(1.0);
        for (;;) {
          int d = 0, sz[8];
          ncclResult_t t = PCALL(test, r, &d, sz);
          if (t != ncclSuccess) {
            nerr++;
            if (t != ncclRemoteError) other = t;
            break;
          }
          if (d) {
            ndone++;
            break;
          }
          if (now_s() > end) {
            nstuck++;
            break;
          }
          sched_yield();
        }
      }
      g_shm->imetric[g_role][4] = nerr;
      g_shm->imetric[g_role][5] = ndone;
      g_shm->imetric[g_role][6] = nstuck;
      g_shm->imetric[g_role][7] = other;
      if (nstuck)
        fail("after %s returned %s, %d of the %ld other requests in flight still reported not done 1 s later", call,
             res_str(rc), nstuck, f.posted - first);
      if (other) fail("a request in flight on the failed comm returned %s, expected ncclRemoteError", res_str(other));
      break;
    }
    if (ev > 0 && now_s() - ev > g_shm->err_wait_s) {
      fail("no error %.1f s after the fault: every call keeps returning ncclSuccess (%ld messages done, %ld "
           "posted, isend/irecv returned NULL %ld times in a row)",
           g_shm->err_wait_s, f.done, f.posted, f.nulls);
      break;
    }
    if (get_flag(0)) break; /* told to stop */
    /* Told to freeze with a full window of receives posted (so that the
     * sender's requests must stay in flight): stop ourselves right here. */
    if (!a->sender && get_flag(7) && f.posted - f.done == f.window) raise(SIGSTOP);
    if (f.nulls || f.done == f.posted) sched_yield();
  }
  step("closing after the error");
  double t0 = now_s();
  conn_close(&k);
  double dt = now_s() - t0;
  g_shm->metric[g_role][0] = dt;
  if (dt > S(1.0)) fail("closing the failed comm took %.2f s", dt);
  flow_free(&f);
}

/* Judge one survivor: error code, time since the fault, WARN content. */
static void judge_error(int role, double lo, double hi, const char *fault, const char *peer_addr) {
  const char *who = g_case->roles[role];
  double te = g_shm->t_err[role];
  if (te <= 0) {
    if (!nfailed()) fail("[%s] saw no error after %s", who, fault);
    return;
  }
  double dt = te - g_shm->t_event;
  int code = g_shm->err_code[role];
  const char *warn = g_shm->warn[role];
  summary("%s%s: %s from %s %.3f s after %s", g_shm->summary[0] ? "; " : "", who, res_str(code),
          g_shm->err_call[role], dt, fault);
  if (code != ncclRemoteError)
    fail("[%s] %s returned %s (%d) after %s, expected ncclRemoteError (6)", who, g_shm->err_call[role],
         res_str(code), code, fault);
  if (dt > hi) fail("[%s] error came %.3f s after %s (limit %.2f s)", who, dt, fault, hi);
  if (dt < lo) fail("[%s] error came %.3f s after %s: sooner than possible (at least %.2f s)", who, dt, fault, lo);
  const char *dev = g_shm->devname[role];
  if (g_shm->metric[role][1] > 0.01)
    note("[%s] the WARN was logged %.0f ms after the call returned the error", who, g_shm->metric[role][1] * 1e3);
  if (!warn[0])
    fail("[%s] no WARN was logged for the failure (waited 0.5 s after the error)", who);
  else if (!strstr(warn, peer_addr) || !strstr(warn, dev))
    fail("[%s] the WARN must name the peer (%s) and the device (%s); it was: %s", who, peer_addr, dev, warn);
  else
    note("[%s] WARN: %s", who, warn);
}

/* Kill or freeze one side of a streaming pair.  With `inflight`, the victim
 * is frozen first until the survivor has requests stuck in flight, so that
 * the error must come from test() of a posted request. */
static void fault_pair(int victim_is_sender, int sig, int inflight) {
  /* A frozen receiver's socket buffers take up to ~36 MiB: for sends to stay
   * in flight, every message is 16 MiB (8 in flight). */
  int big = inflight && !victim_is_sender;
  size_t cap = big ? 16u << 20 : 1u << 20;
  struct sargs rx = {0, cap, big, NULL, NULL}, tx = {1, cap, big, NULL, NULL};
  int victim = victim_is_sender ? 2 : 1, survivor = 3 - victim;
  g_shm->err_wait_s = sig == SIGKILL ? S(5.0) : S(TIMEOUT_S + 5.0);
  if (spawn(1, w_stream, &rx) < 0 || spawn(2, w_stream, &tx) < 0) return;
  long warm = cap > (1u << 20) ? 6 : 16;
  if (wait_count(1, warm, 10.0) || wait_count(2, warm, 10.0)) {
    kill_all_workers();
    return;
  }
  sleep_s(0.05);
  long stuck = 0;
  if (inflight) {
    if (victim_is_sender) {
      kill(g_shm->r[victim].pid, SIGSTOP);
    } else {
      /* The receiver stops itself once it has a full window posted. */
      set_flag(7, 1);
      int st = 0;
      double end = now_s() + S(5.0);
      while (waitpid(g_shm->r[victim].pid, &st, WUNTRACED | WNOHANG) == 0 && now_s() < end) sleep_s(0.001);
      if (!WIFSTOPPED(st)) fail("the receiver did not stop itself with a full window of receives posted");
    }
    double end = now_s() + 1.0;
    sleep_s(0.2);
    while ((stuck = __atomic_load_n(&g_shm->pending[survivor], __ATOMIC_SEQ_CST)) == 0 && now_s() < end)
      sleep_s(0.01);
    if (!stuck) fail("the %s has no request in flight after freezing its peer", g_case->roles[survivor]);
  }
  step("sending %s to the %s", sig == SIGKILL ? "SIGKILL" : "SIGSTOP", g_case->roles[victim]);
  g_shm->t_event = now_s();
  kill(g_shm->r[victim].pid, sig);
  reap(survivor, now_s() + S(TIMEOUT_S + 8.0), 0);
  if (g_shm->r[victim].pid > 0) kill(g_shm->r[victim].pid, SIGKILL);
  reap(victim, now_s() + 5.0, 1);
  char fault[64];
  snprintf(fault, sizeof fault, "%s of the %s", sig == SIGKILL ? "SIGKILL" : "SIGSTOP", g_case->roles[victim]);
  if (sig == SIGKILL)
    judge_error(survivor, 0, S(KILL_LIMIT_S), fault, "127.0.0.1");
  else /* heartbeats every 1 s, checked every 200 ms */
    judge_error(survivor, TIMEOUT_S - 1.5, TIMEOUT_S + S(0.5), fault, "127.0.0.1");
  int *im = g_shm->imetric[survivor];
  if (im[4] + im[5] + im[6])
    summary(" (then test of the %d other requests in flight: %d x ncclRemoteError, %d done, %d stuck)",
            im[4] + im[5] + im[6], im[4], im[5], im[6]);
  if (inflight && g_shm->t_err[survivor] > 0 && strcmp(g_shm->err_call[survivor], "test") != 0 && im[4] == 0)
    fail("[%s] with %ld requests in flight neither the first error nor any later test came from test()",
         g_case->roles[survivor], stuck);
  if (sig == SIGKILL)
    summary(" [limit %.1f s", KILL_LIMIT_S);
  else
    summary(" [window %.1f-%.1f s: COLLX_TIMEOUT=%d minus up to one heartbeat, plus %.1f s slack", TIMEOUT_S - 1.5,
            TIMEOUT_S + S(0.5), TIMEOUT_S, S(0.5));
  summary("; %ld/%ld messages before", g_shm->count[1], g_shm->count[2]);
  if (inflight) summary("; peer frozen first, %ld requests were in flight", stuck);
  summary("]");
}

static void case_kill_sender(void) { fault_pair(1, SIGKILL, 0); }
static void case_kill_receiver(void) { fault_pair(0, SIGKILL, 0); }
static void case_kill_sender_inflight(void) { fault_pair(1, SIGKILL, 1); }
static void case_kill_receiver_inflight(void) { fault_pair(0, SIGKILL, 1); }
static void case_stop_sender(void) { fault_pair(1, SIGSTOP, 0); }
static void case_stop_receiver(void) { fault_pair(0, SIGSTOP, 0); }

/* ======================================================================== */
/* A rank that posts nothing for 3 x COLLX_TIMEOUT, then resumes.
 * Pair 0: A sends to B.  Pair 1: B sends to A.  A goes idle with two sends
 * and two receives posted; B keeps calling the plugin the whole time. */
#define IDLE_N 4
static const size_t idle_sizes[IDLE_N] = {1000, 4u << 20, 65536, 7};

static int post_until(struct conn *k, int sender, uint8_t *buf, size_t n, int tag, void *mh, void **req,
                      double timeout_s) {
  double end = now_s() + S(timeout_s);
  for (;;) {
    ncclResult_t rc;
    *req = NULL;
    if (sender) {
      rc = PCALL(isend, k->scomm, buf, (int)n, tag, mh, req);
    } else {
      void *d = buf, *m = mh;
      int s = (int)n, t = tag;
      rc = PCALL(irecv, k->rcomm, 1, &d, &s, &t, &m, req);
    }
    if (rc != ncclSuccess) {
      fail("%s (%zu bytes, tag %d) returned %s", sender ? "isend" : "irecv", n, tag, res_str(rc));
      return -1;
    }
    if (*req) return 0;
    if (now_s() > end) {
      fail("%s (%zu bytes, tag %d) returned a NULL request for %.1f s", sender ? "isend" : "irecv", n, tag,
           S(timeout_s));
      return -1;
    }
    sched_yield();
  }
}

/* Test until done (1), error (-1, reported) or still pending (0) after one call. */
static int test_once(void *req, size_t expect, const char *what) {
  int done = 0, sizes[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
  ncclResult_t rc = PCALL(test, req, &done, sizes);
  if (rc != ncclSuccess) {
    fail("%s: test returned %s", what, res_str(rc));
    return -1;
  }
  if (!done) return 0;
  if (sizes[0] != (int)expect) {
    fail("%s: completed with sizes[0] = %d, expected %zu", what, sizes[0], expect);
    return -1;
  }
  return 1;
}

struct idle_side {
  struct conn k[2];
  uint8_t *sbuf[IDLE_N], *rbuf[IDLE_N];
  void *smh, *rmh;
  void *sreq[IDLE_N], *rreq[IDLE_N];
  int sdone[IDLE_N], rdone[IDLE_N];
  int sposted, rposted;
};

static int idle_connect(struct idle_side *s, int role) {
  /* A (role 1) sends on pair 0 and receives on pair 1; B the reverse. */
  int send_slot = role == 1 ? 0 : 1, recv_slot = 1 - send_slot;
  memset(s->k, 0, sizeof s->k);
  s->k[send_slot].sender = 1;
  s->k[send_slot].slot = send_slot;
  s->k[recv_slot].sender = 0;
  s->k[recv_slot].slot = recv_slot;
  if (conn_listen(&s->k[recv_slot]) || conn_get_handle(&s->k[send_slot], 10.0)) return -1;
  double end = now_s() + S(10.0);
  while (!s->k[0].up || !s->k[1].up) {
    for (int i = 0; i < 2; i++)
      if (conn_poll(&s->k[i]) < 0) return -1;
    if (now_s() > end) {
      fail("the two comms did not connect within %.1f s", S(10.0));
      return -1;
    }
    sched_yield();
  }
  for (int m = 0; m < IDLE_N; m++) {
    s->sbuf[m] = malloc(idle_sizes[m]);
    s->rbuf[m] = malloc(idle_sizes[m]);
    if (!s->sbuf[m] || !s->rbuf[m]) {
      fail("out of memory");
      return -1;
    }
    pat_fill(s->sbuf[m], idle_sizes[m], (uint64_t)(role * 100 + m));
    memset(s->rbuf[m], FILL, idle_sizes[m]);
  }
  struct conn *ks = &s->k[send_slot], *kr = &s->k[recv_slot];
  if (PCALL(regMr, ks->scomm, s->sbuf[0], 1, NCCL_PTR_HOST, &s->smh) != ncclSuccess ||
      PCALL(regMr, kr->rcomm, s->rbuf[0], 1, NCCL_PTR_HOST, &s->rmh) != ncclSuccess) {
    fail("regMr failed");
    return -1;
  }
  return 0;
}

/* Drive everything posted; post more up to `upto`.  Returns 1 when all
 * IDLE_N of each direction completed, 0 in progress, -1 on error. */
static int idle_progress(struct idle_side *s, int role, int upto, int nonblocking_post) {
  int peer = role == 1 ? 2 : 1;
  struct conn *ks = &s->k[role == 1 ? 0 : 1], *kr = &s->k[role == 1 ? 1 : 0];
  while (s->rposted < upto) {
    int m = s->rposted;
    if (post_until(kr, 0, s->rbuf[m], idle_sizes[m], 500 + m, s->rmh, &s->rreq[m], 5.0)) return -1;
    s->rposted++;
  }
  while (s->sposted < upto) {
    int m = s->sposted;
    void *r = NULL;
    if (!nonblocking_post) {
      if (post_until(ks, 1, s->sbuf[m], idle_sizes[m], 500 + m, s->smh, &r, 10.0)) return -1;
    } else {
      ncclResult_t rc = PCALL(isend, ks->scomm, s->sbuf[m], (int)idle_sizes[m], 500 + m, s->smh, &r);
      if (rc != ncclSuccess) {
        fail("isend %d (%zu bytes) returned %s", m, idle_sizes[m], res_str(rc));
        return -1;
      }
      if (!r) break;
    }
    s->sreq[m] = r;
    s->sposted++;
  }
  int all = 1;
  char what[96];
  for (int m = 0; m < IDLE_N; m++) {
    if (m < s->sposted && !s->sdone[m]) {
      snprintf(what, sizeof what, "send %d (%zu bytes)", m, idle_sizes[m]);
      int d = test_once(s->sreq[m], idle_sizes[m], what);
      if (d < 0) return -1;
      s->sdone[m] = d;
    }
    if (m < s->rposted && !s->rdone[m]) {
      snprintf(what, sizeof what, "receive %d (%zu bytes)", m, idle_sizes[m]);
      int d = test_once(s->rreq[m], idle_sizes[m], what);
      if (d < 0) return -1;
      if (d) {
        long bad = pat_check(s->rbuf[m], idle_sizes[m], (uint64_t)(peer * 100 + m));
        if (bad >= 0) {
          fail("receive %d (%zu bytes): byte %ld wrong", m, idle_sizes[m], bad);
          return -1;
        }
      }
      s->rdone[m] = d;
    }
    all &= s->sdone[m] && s->rdone[m];
  }
  return all;
}

static void w_idle(void *arg) {
  (void)arg;
  int role = g_role;
  if (load_plugin()) return;
  static struct idle_side s;
  if (idle_connect(&s, role)) return;
  size_t mark = warn_mark();
  if (barrier(0, 2, "connected")) return;
  if (role == 1) {
    /* A: post two sends and two receives, then nothing for 3 x timeout. */
    step("posting the first half");
    if (idle_progress(&s, role, IDLE_N / 2, 0) < 0) return;
    double idle = 3.0 * TIMEOUT_S;
    step("idle for %.0f s (not calling the plugin)", idle);
    set_flag(1, 1);
    double t0 = now_s();
    sleep_s(idle);
    g_shm->metric[role][0] = now_s() - t0;
    step("resuming");
    set_flag(2, 1);
  } else {
    step("posting everything, testing while the peer is idle");
  }
  double t_start = now_s(), end = t_start + S(3.0 * TIMEOUT_S + 15.0);
  long calls = 0;
  for (;;) {
    int done = idle_progress(&s, role, IDLE_N, 1);
    calls++;
    if (done < 0) break;
    if (done) break;
    if (now_s() > end) {
      fail("requests still pending %.0f s after the peer resumed", end - t_start);
      break;
    }
    sleep_s(0.0005);
  }
  g_shm->imetric[role][0] = (int)(calls > 2000000000 ? 2000000000 : calls);
  g_shm->metric[role][1] = now_s() - t_start;
  char w[2048];
  warn_since(mark, w, sizeof w);
  if (w[0]) fail("WARN logged while the peer was idle: %s", w);
  if (barrier(1, 2, "all done")) return;
  conn_close(&s.k[0]);
  conn_close(&s.k[1]);
}

static void case_idle_rank(void) {
  if (spawn(1, w_idle, NULL) < 0 || spawn(2, w_idle, NULL) < 0) return;
  double dl = now_s() + S(3.0 * TIMEOUT_S + 25.0);
  reap_workers(dl);
  summary("A idle %.1f s (3 x COLLX_TIMEOUT=%d) with 2 sends + 2 receives posted, B called the plugin %d times "
          "meanwhile; all %d messages each way completed, no error, no WARN",
          g_shm->metric[1][0], TIMEOUT_S, g_shm->imetric[2][0], IDLE_N);
}

/* ======================================================================== */
/* Packets dropped between two network namespaces (root only). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char full[1100];
  snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
  int st = system(full);
  if (g_verbose) fprintf(stderr, "[netns] %s -> %d\n", cmd, st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char g_nsa[32], g_nsb[32], g_va[16], g_vb[16];

static void netns_cleanup(void) {
  if (!g_nsa[0]) return;
  sh("ip netns del %s", g_nsa);
  sh("ip netns del %s", g_nsb);
}

static int have_ip(void) { return sh("ip -V") == 0; }

static void case_netns_drop(void) {
  if (geteuid() != 0) {
    skip("needs root (network namespaces)");
    return;
  }
  if (!have_ip()) {
    skip("needs the ip command (iproute2)");
    return;
  }
  int id = (int)(getpid() % 100000);
  snprintf(g_nsa, sizeof g_nsa, "cxfA%d", id);
  snprintf(g_nsb, sizeof g_nsb, "cxfB%d", id);
  snprintf(g_va, sizeof g_va, "cxfa%d", id);
  snprintf(g_vb, sizeof g_vb, "cxfb%d", id);
  if (sh("ip netns add %s", g_nsa) || sh("ip netns add %s", g_nsb)) {
    netns_cleanup();
    skip("cannot create network namespaces here (ip netns add failed)");
    return;
  }
  if (sh("ip link add %s netns %s type veth peer name %s netns %s", g_va, g_nsa, g_vb, g_nsb) ||
      sh("ip -n %s addr add 10.77.0.1/24 dev %s", g_nsa, g_va) ||
      sh("ip -n %s addr add 10.77.0.2/24 dev %s", g_nsb, g_vb) || sh("ip -n %s link set %s up", g_nsa, g_va) ||
      sh("ip -n %s link set %s up", g_nsb, g_vb) || sh("ip -n %s link set lo up", g_nsa) ||
      sh("ip -n %s link set lo up", g_nsb)) {
    netns_cleanup();
    skip("cannot set up a veth pair between the namespaces");
    return;
  }
  /* Wait for the link (and IPv4 DAD-free addresses) to come up. */
  for (int i = 0; i < 100 && sh("ip netns exec %s ping -c1 -W1 10.77.0.2", g_nsa) != 0; i++) {
    if (sh("command -v ping") != 0) {
      sleep_s(0.5);
      break;
    }
    sleep_s(0.05);
  }
  struct sargs rx = {0, 1u << 20, 0, g_nsa, g_va}, tx = {1, 1u << 20, 0, g_nsb, g_vb};
  g_shm->err_wait_s = S(TIMEOUT_S + 6.0);
  if (spawn(1, w_stream, &rx) < 0 || spawn(2, w_stream, &tx) < 0) {
    netns_cleanup();
    return;
  }
  if (wait_count(1, 16, 10.0) || wait_count(2, 16, 10.0)) {
    kill_all_workers();
    netns_cleanup();
    return;
  }
  /* Drop everything in and out of B's namespace: no RST, no FIN, silence. */
  const char *how = NULL;
  g_shm->t_event = now_s();
  if (sh("command -v nft") == 0 &&
      sh("ip netns exec %s nft 'add table inet cxfdrop; "
         "add chain inet cxfdrop in { type filter hook input priority 0; policy drop; }; "
         "add chain inet cxfdrop out { type filter hook output priority 0; policy drop; }'",
         g_nsb) == 0) {
    how = "nft drop in+out in the receiver's peer namespace";
  } else if (sh("command -v iptables") == 0 && sh("ip netns exec %s iptables -A INPUT -j DROP", g_nsb) == 0 &&
             sh("ip netns exec %s iptables -A OUTPUT -j DROP", g_nsb) == 0) {
    how = "iptables DROP in+out";
  } else if (sh("ip -n %s link set %s down", g_nsb, g_vb) == 0) {
    how = "veth link down (no nft/iptables)";
  }
  if (!how) {
    kill_all_workers();
    netns_cleanup();
    skip("no way to drop packets (nft, iptables, ip link all failed)");
    return;
  }
  g_shm->t_event = (g_shm->t_event + now_s()) / 2; /* the rule took effect in between */
  reap_workers(now_s() + S(TIMEOUT_S + 10.0));
  judge_error(1, TIMEOUT_S - 1.5, TIMEOUT_S + S(0.5), "the packet drop", "10.77.0.2");
  judge_error(2, TIMEOUT_S - 1.5, TIMEOUT_S + S(0.5), "the packet drop", "10.77.0.1");
  summary(" [%s; limit COLLX_TIMEOUT=%d s]", how, TIMEOUT_S);
  netns_cleanup();
}

/* ======================================================================== */
/* Stray clients on the listening port. */
static int addr_of_handle(const char *handle, struct sockaddr_storage *ss, socklen_t *len) {
  struct collx_handle h;
  memcpy(&h, handle, sizeof h);
  memset(ss, 0, sizeof *ss);
  if (h.family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    memcpy(&a->sin_addr, h.addr, 4);
    a->sin_port = htons(h.port);
    *len = sizeof *a;
  } else if (h.family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    memcpy(&a->sin6_addr, h.addr, 16);
    a->sin6_port = htons(h.port);
    a->sin6_scope_id = h.scope_id;
    *len = sizeof *a;
  } else {
    return -1;
  }
  /* Never any traffic outside loopback (or our own namespaces). */
  if (h.family == AF_INET && h.addr[0] != 127) return -1;
  if (h.family == AF_INET6 && !IN6_IS_ADDR_LOOPBACK((struct in6_addr *)h.addr)) return -1;
  return 0;
}

enum stray_kind { ST_SILENT, ST_JUNK, ST_SHORT_OPEN, ST_SHORT_CLOSE, ST_BADSECRET, ST_BADSECRET_DATA,
                  ST_CLOSE_AT_ONCE, ST_NKINDS };
static const char *const stray_name[ST_NKINDS] = {"silent", "junk bytes", "header cut short (kept open)",
                                                  "header cut short (closed)", "wrong-secret hello",
                                                  "wrong-secret data hello", "connect+close"};
/* Kinds whose socket stays open on our side, so we can watch the drop. */
static int stray_kept(int k) { return k != ST_SHORT_CLOSE && k != ST_CLOSE_AT_ONCE; }

#define NSTRAY_BURST 300
struct stray {
  int fd;
  int kind;
  double dropped; /* time the listener closed it; 0 while open */
};

static void w_stray_listener(void *arg) {
  (void)arg;
  int fd_pre = count_fds();
  if (load_plugin()) return;
  int fd_loaded = count_fds();
  struct conn k;
  memset(&k, 0, sizeof k);
  k.slot = 0;
  if (conn_listen(&k)) return;
  int fd_listen = count_fds();
  step("accepting with strays arriving");
  double end = now_s() + S(20.0);
  int extra = 0;
  struct flow f;
  int flow_ready = 0;
  size_t mark = warn_mark();
  /* Accept until the real peer arrives, then receive from it while still
   * calling accept, until the leader has watched every stray get dropped. */
  while (!get_flag(3)) {
    if (!k.up) {
      int u = conn_poll(&k);
      if (u < 0) return;
      if (u && !get_flag(2)) {
        fail("accept returned a comm before the real peer started connecting: a stray was accepted");
        return;
      }
    } else {
      if (!flow_ready) {
        if (flow_init(&f, k.rcomm, 0, 300000, 77, 4, 20, 0xBEEF)) return;
        flow_ready = 1;
      }
      if (!flow_finished(&f)) {
        const char *call;
        int rc = flow_step(&f, &call);
        if (rc < 0) return;
        if (rc != ncclSuccess) {
          fail("the real connection failed with strays around: %s returned %s", call, res_str(rc));
          return;
        }
        g_shm->count[g_role] = f.done;
      }
      void *c2 = NULL;
      ncclResult_t r = PCALL(accept, k.lcomm, &c2, NULL);
      if (r != ncclSuccess) {
        fail("accept (after the real peer) returned %s", res_str(r));
        return;
      }
      if (c2) {
        extra++;
        PCALL(closeRecv, c2);
      }
    }
    if (now_s() > end) {
      fail("stray phase did not end within %.0f s", S(20.0));
      return;
    }
    sched_yield();
  }
  if (extra) fail("accept returned %d more comm(s) after the real peer: strays were accepted", extra);
  if (!k.up) {
    fail("the real peer never got through");
    return;
  }
  if (!flow_finished(&f)) fail("only %ld of 20 messages from the real peer arrived", f.done);
  int fd_end = count_fds();
  step("closing");
  ncclResult_t r = PCALL(closeRecv, k.rcomm);
  k.rcomm = NULL;
  if (r != ncclSuccess) fail("closeRecv returned %s", res_str(r));
  int fd_noconn = count_fds();
  if (fd_noconn != fd_listen) {
    char l[1500];
    list_fds(l, sizeof l);
    fail("%d descriptors open after the connect timeout with the comm closed, %d right after listen: %+d "
         "leaked (%s)",
         fd_noconn, fd_listen, fd_noconn - fd_listen, l);
  }
  r = PCALL(closeListen, k.lcomm);
  k.lcomm = NULL;
  if (r != ncclSuccess) fail("closeListen returned %s", res_str(r));
  int fd_closed = count_fds();
  if (fd_closed != fd_loaded) fail("%d descriptors after closeListen, %d before listen", fd_closed, fd_loaded);
  g_shm->imetric[g_role][0] = fd_pre;
  g_shm->imetric[g_role][1] = fd_listen;
  g_shm->imetric[g_role][2] = fd_end;
  g_shm->imetric[g_role][3] = fd_noconn;
  g_shm->metric[g_role][0] = g_max_call;
  char w[2048];
  warn_since(mark, w, sizeof w);
  if (w[0]) note("WARNs on the listener: %s", w);
  flow_free(&f);
}

static void w_stray_connector(void *arg) {
  (void)arg;
  if (load_plugin()) return;
  if (wait_flag(2, 1, 20.0, "the strays to be in place")) return;
  double t0 = now_s();
  struct conn k;
  if (conn_establish(&k, 1, 0, 10.0)) return;
  g_shm->metric[g_role][0] = now_s() - t0;
  struct flow f;
  if (flow_init(&f, k.scomm, 1, 300000, 77, 4, 20, 0xBEEF)) return;
  double end = now_s() + S(10.0);
  while (!flow_finished(&f)) {
    const char *call;
    int rc = flow_step(&f, &call);
    if (rc < 0) return;
    if (rc != ncclSuccess) {
      fail("sending to the listener with strays around: %s returned %s", call, res_str(rc));
      return;
    }
    if (now_s() > end) {
      fail("only %ld of 20 messages sent in %.0f s", f.done, S(10.0));
      return;
    }
    sched_yield();
  }
  g_shm->metric[g_role][1] = now_s() - t0;
  if (wait_flag(3, 1, 30.0, "the end of the stray phase")) return;
  conn_close(&k);
  flow_free(&f);
}

static int stray_open(const struct sockaddr_storage *ss, socklen_t len) {
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)ss, len) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

static int stray_wait_connected(int fd, double timeout_s) {
  struct pollfd p = {fd, POLLOUT, 0};
  int err = 0;
  socklen_t el = sizeof err;
  if (poll(&p, 1, (int)(timeout_s * 1000)) != 1) return -1;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) return -1;
  return 0;
}

static void stray_payload(struct stray *s, uint64_t real_secret) {
  unsigned char junk[512];
  getrandom(junk, sizeof junk, 0);
  struct wire_hello h;
  memset(&h, 0, sizeof h);
  h.magic = WIRE_MAGIC;
  h.version = WIRE_VERSION;
  h.kind = s->kind == ST_BADSECRET_DATA ? WIRE_HELLO_DATA : WIRE_HELLO_CTRL;
  h.nstreams = 2;
  getrandom(&h.secret, sizeof h.secret, 0);
  if (h.secret == real_secret) h.secret ^= 1;
  getrandom(&h.conn_id, sizeof h.conn_id, 0);
  switch (s->kind) {
  case ST_JUNK:
    if (junk[0] == 0x63) junk[0] = 0; /* not even the first byte of the magic */
    (void)send(s->fd, junk, 64 + junk[1], MSG_NOSIGNAL);
    break;
  case ST_SHORT_OPEN:
  case ST_SHORT_CLOSE:
    (void)send(s->fd, &h, 10, MSG_NOSIGNAL);
    if (s->kind == ST_SHORT_CLOSE) {
      close(s->fd);
      s->fd = -1;
    }
    break;
  case ST_BADSECRET:
  case ST_BADSECRET_DATA:
    (void)send(s->fd, &h, sizeof h, MSG_NOSIGNAL);
    break;
  case ST_CLOSE_AT_ONCE:
    close(s->fd);
    s->fd = -1;
    break;
  default:
    break;
  }
}

static void case_strays(void) {
  if (spawn(1, w_stray_listener, NULL) < 0 || spawn(2, w_stray_connector, NULL) < 0) return;
  double hend = now_s() + S(10.0);
  while (!__atomic_load_n(&g_shm->handle_ready[0], __ATOMIC_SEQ_CST)) {
    if (now_s() > hend || g_shm->r[1].finished) {
      fail("the listener published no handle");
      kill_all_workers();
      return;
    }
    sleep_s(0.001);
  }
  struct sockaddr_storage ss;
  socklen_t sl;
  if (addr_of_handle(g_shm->handle[0], &ss, &sl)) {
    fail("the listen handle does not name a loopback address; refusing to send stray traffic there");
    kill_all_workers();
    return;
  }
  struct collx_handle h;
  memcpy(&h, g_shm->handle[0], sizeof h);
  /* One of each kind, then a burst of 300 at once (silent, junk, wrong secret). */
  static struct stray st[ST_NKINDS + NSTRAY_BURST];
  int n = 0;
  step("opening stray clients");
  for (int kind = 0; kind < ST_NKINDS; kind++) st[n++] = (struct stray){-1, kind, 0};
  static const int burst_kinds[] = {ST_SILENT, ST_JUNK, ST_BADSECRET, ST_SHORT_OPEN};
  for (int i = 0; i < NSTRAY_BURST; i++) st[n++] = (struct stray){-1, burst_kinds[i % 4], 0};
  for (int i = 0; i < n; i++) {
    st[i].fd = stray_open(&ss, sl);
    if (st[i].fd < 0) {
      fail("stray connect %d: %s", i, strerror(errno));
      kill_all_workers();
      return;
    }
  }
  int opened = 0;
  for (int i = 0; i < n; i++) {
    if (stray_wait_connected(st[i].fd, S(5.0)) != 0) {
      fail("stray %d (%s) did not connect: the listening socket's backlog overflowed?", i, stray_name[st[i].kind]);
      continue;
    }
    opened++;
  }
  for (int i = 0; i < n; i++) stray_payload(&st[i], h.secret);
  double t_sent = now_s();
  set_flag(2, 1); /* the real peer may connect now */
  /* Watch every kept-open stray: the listener must close it. */
  step("watching %d strays being dropped", n);
  double deadline = t_sent + CONNECT_TIMEOUT_S + S(2.0);
  double worst[ST_NKINDS] = {0};
  int left = 0, got_data = 0;
  for (int i = 0; i < n; i++) left += st[i].fd >= 0 && stray_kept(st[i].kind);
  struct pollfd *pf = calloc((size_t)n, sizeof *pf);
  int *idx = calloc((size_t)n, sizeof *idx);
  while (left > 0 && now_s() < deadline && pf && idx) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (st[i].fd >= 0 && stray_kept(st[i].kind) && st[i].dropped == 0) {
        pf[m] = (struct pollfd){st[i].fd, POLLIN | POLLRDHUP, 0};
        idx[m++] = i;
      }
    if (poll(pf, (nfds_t)m, 20) <= 0) continue;
    double t = now_s();
    for (int j = 0; j < m; j++) {
      if (!pf[j].revents) continue;
      struct stray *s = &st[idx[j]];
      char b[256];
      ssize_t r = recv(s->fd, b, sizeof b, MSG_DONTWAIT);
      if (r > 0) {
        got_data++;
        if (got_data <= 3)
          fail("the listener sent %zd bytes to a %s stray client (a welcome to a client it should refuse?)", r,
               stray_name[s->kind]);
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      s->dropped = t;
      if (t - t_sent > worst[s->kind]) worst[s->kind] = t - t_sent;
      left--;
    }
  }
  free(pf);
  free(idx);
  if (left > 0) {
    int per[ST_NKINDS] = {0};
    for (int i = 0; i < n; i++)
      if (st[i].fd >= 0 && stray_kept(st[i].kind) && st[i].dropped == 0) per[st[i].kind]++;
    char d[512] = "";
    size_t l = 0;
    for (int k = 0; k < ST_NKINDS; k++)
      if (per[k]) l += (size_t)snprintf(d + l, sizeof d - l, "%s%d %s", l ? ", " : "", per[k], stray_name[k]);
    fail("%d stray connections still open %.1f s after they connected (COLLX_CONNECT_TIMEOUT=%d): %s", left,
         deadline - t_sent, CONNECT_TIMEOUT_S, d);
  }
  set_flag(3, 1); /* the listener counts its descriptors now */
  reap_workers(now_s() + S(15.0));
  for (int i = 0; i < n; i++)
    if (st[i].fd >= 0) close(st[i].fd);
  summary("%d strays (%d in a burst) connected; dropped after: ", opened, NSTRAY_BURST);
  for (int k = 0; k < ST_NKINDS; k++)
    if (stray_kept(k)) summary("%s %.2f s, ", stray_name[k], worst[k]);
  summary("(limit %d s + margin); real connect %.3f s, 20 messages %.3f s; slowest accept call %.1f ms; "
          "listener fds: %d after listen, %d with comm, %d after the deadline with the comm closed",
          CONNECT_TIMEOUT_S, g_shm->metric[2][0], g_shm->metric[2][1], g_shm->metric[1][0] * 1e3,
          g_shm->imetric[1][1], g_shm->imetric[1][2], g_shm->imetric[1][3]);
  if (g_shm->metric[2][0] > S(3.0)) fail("the real connect took %.2f s among strays (limit 3 s)", g_shm->metric[2][0]);
  if (g_shm->metric[1][0] > S(0.1))
    fail("one accept call took %.1f ms with strays pending (limit 100 ms: it must not block)",
         g_shm->metric[1][0] * 1e3);
}

/* ======================================================================== */
/* Slow peers during setup.  A connector that pauses longer than
 * COLLX_CONNECT_TIMEOUT between its first connect call and the rest (a busy
 * proxy thread), and a listener that starts calling accept late: either the
 * connection works, or connect fails -- connect must never hand back a comm
 * that the listener has already dropped. */
static int g_slow_connector; /* N > 0: the connector pauses after N calls; 0: the listener starts late */

static void w_slow_listener(void *arg) {
  (void)arg;
  if (load_plugin()) return;
  struct conn k;
  memset(&k, 0, sizeof k);
  if (conn_listen(&k)) return;
  if (!g_slow_connector) {
    step("not calling accept for %d s", 3 * CONNECT_TIMEOUT_S);
    sleep_s(3 * CONNECT_TIMEOUT_S);
  }
  size_t mark = warn_mark();
  double end = now_s() + S(8.0 + 3 * CONNECT_TIMEOUT_S);
  step("accepting");
  while (!k.up && !get_flag(5)) {
    if (conn_poll(&k) < 0) return;
    if (now_s() > end) break;
    sched_yield();
  }
  g_shm->imetric[g_role][0] = k.up;
  set_flag(6, 1);
  if (k.up) {
    struct flow f;
    if (flow_init(&f, k.rcomm, 0, 100000, 4, 2, 3, 0x5105)) return;
    while (!flow_finished(&f) && now_s() < end) {
      const char *call;
      int rc = flow_step(&f, &call);
      if (rc != ncclSuccess) {
        if (rc > 0) fail("listener: %s returned %s on the accepted comm", call, res_str(rc));
        break;
      }
      sched_yield();
    }
    if (!flow_finished(&f) && !nfailed()) fail("listener: %ld of 3 messages arrived", f.done);
    if (barrier(0, 2, "done")) return;
    conn_close(&k);
    flow_free(&f);
  } else {
    conn_close(&k);
  }
  char w[1024];
  warn_since(mark, w, sizeof w);
  if (w[0]) note("listener WARNs: %s", w);
}

static void w_slow_connector(void *arg) {
  (void)arg;
  if (load_plugin()) return;
  struct conn k;
  memset(&k, 0, sizeof k);
  k.sender = 1;
  if (conn_get_handle(&k, 10.0)) return;
  size_t mark = warn_mark();
  double t0 = now_s();
  ncclResult_t rc = ncclSuccess;
  void *comm = NULL;
  if (g_slow_connector) {
    /* g_slow_connector calls (the control socket connects and says hello;
     * the listener answers with its welcome), then a pause. */
    for (int i = 0; i < g_slow_connector && rc == ncclSuccess && !comm; i++) {
      ncclNetDeviceHandle_v8_t *dc = NULL;
      rc = PCALL(connect, g_dev, k.handle, &comm, &dc);
      sleep_s(0.02);
    }
    if (rc == ncclSuccess && !comm) {
      step("pausing %d s between connect calls", 2 * CONNECT_TIMEOUT_S);
      sleep_s(2 * CONNECT_TIMEOUT_S);
    }
  }
  double end = now_s() + S(8.0 + 3 * CONNECT_TIMEOUT_S);
  while (rc == ncclSuccess && !comm && now_s() < end) {
    ncclNetDeviceHandle_v8_t *dc = NULL;
    rc = PCALL(connect, g_dev, k.handle, &comm, &dc);
    sched_yield();
  }
  double dt = now_s() - t0;
  char w[1024];
  if (rc != ncclSuccess) {
    warn_since(mark, w, sizeof w);
    summary("connect failed with %s after %.2f s (WARN: %s); ", res_str(rc), dt, w[0] ? w : "none");
    set_flag(5, 1);
    return;
  }
  if (!comm) {
    fail("connect neither completed nor failed in %.1f s", dt);
    set_flag(5, 1);
    return;
  }
  k.scomm = comm;
  k.up = 1;
  summary("connect returned a comm after %.2f s; ", dt);
  struct flow f;
  if (flow_init(&f, k.scomm, 1, 100000, 4, 2, 3, 0x5105)) return;
  end = now_s() + S(5.0);
  while (!flow_finished(&f) && now_s() < end) {
    const char *call;
    int r = flow_step(&f, &call);
    if (r != ncclSuccess) {
      if (r > 0) {
        warn_since(mark, w, sizeof w);
        set_flag(5, 1); /* the listener may stop accepting */
        if (wait_flag(6, 1, 15.0, "the listener's verdict") == 0 && !g_shm->imetric[1][0])
          fail("connect returned a comm after %.2f s, but the listener never accepted the connection: the first "
               "%s returned %s (WARN: %s)",
               dt, call, res_str(r), w[0] ? w : "none");
        else
          fail("%s returned %s on the new comm (WARN: %s)", call, res_str(r), w[0] ? w : "none");
      }
      set_flag(5, 1);
      conn_close(&k);
      flow_free(&f);
      return;
    }
    sched_yield();
  }
  if (!flow_finished(&f)) {
    fail("%ld of 3 messages sent in %.0f s on the new comm", f.done, S(5.0));
    set_flag(5, 1);
    return;
  }
  summary("3 messages went through");
  if (barrier(0, 2, "done")) return;
  conn_close(&k);
  flow_free(&f);
}

static void slow_setup(int connector) {
  g_slow_connector = connector;
  if (spawn(1, w_slow_listener, NULL) < 0 || spawn(2, w_slow_connector, NULL) < 0) return;
  reap_workers(now_s() + S(30.0));
}
static void case_slow_connector(void) { slow_setup(1); }
static void case_slow_listener(void) { slow_setup(0); }

/* ======================================================================== */
/* connect given garbage handles. */
static void w_handle_listener(void *arg) {
  (void)arg;
  if (load_plugin()) return;
  struct conn stale;
  memset(&stale, 0, sizeof stale);
  stale.slot = 1;
  if (conn_listen(&stale)) return;
  ncclResult_t r = PCALL(closeListen, stale.lcomm); /* its handle is now stale */
  if (r != ncclSuccess) fail("closeListen returned %s", res_str(r));
  struct conn k;
  memset(&k, 0, sizeof k);
  k.slot = 0;
  if (conn_listen(&k)) return;
  double end = now_s() + S(40.0);
  while (!k.up) {
    int u = conn_poll(&k);
    if (u < 0) return;
    if (u && !get_flag(4)) {
      fail("accept returned a comm for a connection made with a bad handle");
      return;
    }
    if (get_flag(5)) break; /* the connector gave up */
    if (now_s() > end) {
      fail("no connection within %.0f s", S(40.0));
      return;
    }
    sched_yield();
  }
  if (!k.up) return;
  struct flow f;
  if (flow_init(&f, k.rcomm, 0, 65536, 3, 2, 3, 0xABC)) return;
  while (!flow_finished(&f)) {
    const char *call;
    int rc = flow_step(&f, &call);
    if (rc < 0) return;
    if (rc != ncclSuccess) {
      fail("receiving after the bad handles: %s returned %s", call, res_str(rc));
      return;
    }
    if (now_s() > end) {
      fail("the real connection delivered %ld of 3 messages", f.done);
      return;
    }
  }
  if (barrier(0, 2, "done")) return;
  conn_close(&k);
  flow_free(&f);
}

/* Connect with h until it fails, completes or the deadline; returns the
 * result and the time it took. */
static int connect_outcome(char *h, double timeout_s, double *dt, void **comm) {
  double t0 = now_s(), end = t0 + S(timeout_s);
  *comm = NULL;
  for (;;) {
    ncclNetDeviceHandle_v8_t *dc = NULL;
    ncclResult_t r = PCALL(connect, g_dev, h, comm, &dc);
    *dt = now_s() - t0;
    if (r != ncclSuccess || *comm) return r;
    if (now_s() > end) return -1;
    sched_yield();
  }
}

static void w_handle_connector(void *arg) {
  (void)arg;
  if (load_plugin()) return;
  struct conn k, stale;
  memset(&k, 0, sizeof k);
  memset(&stale, 0, sizeof stale);
  stale.slot = 1;
  k.slot = 0;
  if (conn_get_handle(&stale, 10.0) || conn_get_handle(&k, 10.0)) return;
  void *comm;
  double dt, worst = 0;
  int rc;
  size_t mark = warn_mark();
  /* Random handles (never with the collx magic: no traffic to random addresses). */
  step("random handles");
  int nrand = 200, codes[8] = {0};
  for (int i = 0; i < nrand; i++) {
    char h[NCCL_NET_HANDLE_MAXSIZE];
    getrandom(h, sizeof h, 0);
    uint32_t m;
    memcpy(&m, h, 4);
    if (m == COLLX_HANDLE_MAGIC) h[0] ^= 1;
    rc = connect_outcome(h, 3.0, &dt, &comm);
    if (dt > worst) worst = dt;
    if (rc == ncclSuccess || comm) {
      fail("connect with random handle %d returned a comm", i);
      return;
    }
    if (rc < 0) {
      fail("connect with random handle %d neither failed nor completed in %.1f s", i, S(3.0));
      return;
    }
    codes[rc & 7]++;
  }
  summary("200 random handles: %d x ncclInvalidArgument, %d other errors, slowest %.1f ms; ",
          codes[ncclInvalidArgument], nrand - codes[ncclInvalidArgument], worst * 1e3);
  struct {
    const char *name;
    char h[NCCL_NET_HANDLE_MAXSIZE];
    double limit;
  } t[6];
  int nt = 0;
  memset(t, 0, sizeof t);
  t[nt].name = "all-zero handle";
  t[nt++].limit = 1.0;
  struct collx_handle hh;
  memcpy(&hh, k.handle, sizeof hh);
  hh.port = 0;
  t[nt].name = "valid handle with port 0";
  memcpy(t[nt].h, &hh, sizeof hh);
  t[nt++].limit = 1.0;
  memcpy(&hh, k.handle, sizeof hh);
  hh.family = 0x5a5a;
  t[nt].name = "valid handle with an unknown address family";
  memcpy(t[nt].h, &hh, sizeof hh);
  t[nt++].limit = 1.0;
  memcpy(t[nt].h, k.handle, sizeof k.handle);
  t[nt].h[32] ^= 0x01; /* one bit of the secret (offset 32) */
  t[nt].name = "valid handle, secret with one bit flipped";
  t[nt++].limit = 5.0;
  memcpy(t[nt].h, k.handle, sizeof k.handle);
  for (int b = 32; b < 40; b++) t[nt].h[b] ^= (char)0xA5;
  t[nt].name = "valid handle, secret scrambled";
  t[nt++].limit = 5.0;
  memcpy(t[nt].h, stale.handle, sizeof stale.handle);
  t[nt].name = "stale handle (listener closed)";
  t[nt++].limit = 5.0;
  for (int i = 0; i < nt; i++) {
    step("%s", t[i].name);
    rc = connect_outcome(t[i].h, t[i].limit, &dt, &comm);
    if (comm) {
      fail("%s: connect returned a comm (rc %s) after %.3f s", t[i].name, res_str(rc), dt);
      PCALL(closeSend, comm);
      continue;
    }
    if (rc < 0) {
      fail("%s: connect neither failed nor completed within %.1f s", t[i].name, S(t[i].limit));
      continue;
    }
    summary("%s: %s after %.3f s; ", t[i].name, res_str(rc), dt);
  }
  char w[2048];
  warn_since(mark, w, sizeof w);
  if (!strstr(w, "invalid handle") && !strstr(w, "handle")) note("no WARN mentioned the handle: %s", w);
  /* The real peer still gets through. */
  step("the real connect");
  set_flag(4, 1);
  double t0 = now_s();
  k.sender = 1;
  double end = now_s() + S(10.0);
  for (;;) {
    int u = conn_poll(&k);
    if (u < 0) break;
    if (u) break;
    if (now_s() > end) {
      fail("the valid handle did not connect within %.0f s after the bad ones", S(10.0));
      break;
    }
    sched_yield();
  }
  if (!k.up) {
    set_flag(5, 1);
    return;
  }
  summary("then the valid handle connected in %.3f s and carried 3 messages", now_s() - t0);
  struct flow f;
  if (flow_init(&f, k.scomm, 1, 65536, 3, 2, 3, 0xABC)) return;
  while (!flow_finished(&f)) {
    const char *call;
    int r = flow_step(&f, &call);
    if (r < 0) return;
    if (r != ncclSuccess) {
      fail("sending after the bad handles: %s returned %s", call, res_str(r));
      return;
    }
    if (now_s() > end) {
      fail("sent %ld of 3 messages", f.done);
      return;
    }
  }
  if (barrier(0, 2, "done")) return;
  conn_close(&k);
  flow_free(&f);
}

static void case_bad_handles(void) {
  if (spawn(1, w_handle_listener, NULL) < 0 || spawn(2, w_handle_connector, NULL) < 0) return;
  double dl = now_s() + S(50.0);
  reap_workers(dl);
}

/* ======================================================================== */
/* Misuse: oversize messages. */
struct over_sub {
  const char *name;
  int n;             /* buffers in the receive */
  size_t cap[2];     /* posted sizes */
  size_t msg[2];     /* sizes sent (same tags) */
};
static const struct over_sub over_subs[] = {
    {"3 MiB into a 1 MiB receive", 1, {1u << 20, 0}, {3u << 20, 0}},
    {"65537 bytes into a 65536-byte receive", 1, {65536, 0}, {65537, 0}},
    {"grouped receive: 50 into 100 fits, 200 into 100 does not", 2, {100, 100}, {50, 200}},
};
#define NOVER ((int)(sizeof over_subs / sizeof over_subs[0]))

static void w_oversize(void *arg) {
  (void)arg;
  int sender = g_role == 2;
  if (load_plugin()) return;
  for (int s = 0; s < NOVER; s++) {
    const struct over_sub *o = &over_subs[s];
    struct conn k;
    if (conn_establish(&k, sender, s, 10.0)) return;
    struct gbuf gb[2];
    memset(gb, 0, sizeof gb);
    void *mh = NULL, *req = NULL;
    int tags[2] = {10 * s + 1, 10 * s + 2};
    for (int i = 0; i < o->n; i++) {
      if (gbuf_alloc(&gb[i], sender ? o->msg[i] : o->cap[i])) return;
      if (sender)
        pat_fill(gb[i].p, o->msg[i], (uint64_t)(s * 10 + i));
      else
        memset(gb[i].p, FILL, o->cap[i]);
    }
    if (PCALL(regMr, sender ? k.scomm : k.rcomm, gb[0].p, 1, NCCL_PTR_HOST, &mh) != ncclSuccess) {
      fail("regMr failed");
      return;
    }
    size_t mark = warn_mark();
    int stage = 0, rc = ncclSuccess, done = 0, sizes[8];
    double end = now_s() + S(5.0);
    step("%s: posting", o->name);
    if (!sender) {
      void *d[2] = {gb[0].p, gb[1].p}, *m[2] = {mh, mh};
      int sz[2] = {(int)o->cap[0], (int)o->cap[1]};
      rc = PCALL(irecv, k.rcomm, o->n, d, sz, tags, m, &req);
      if (rc == ncclSuccess && !req) fail("%s: irecv returned a NULL request", o->name);
      if (rc != ncclSuccess) stage = 1;
    } else {
      void *sreq[2] = {NULL, NULL};
      for (int i = 0; i < o->n && rc == ncclSuccess; i++) {
        while ((rc = PCALL(isend, k.scomm, gb[i].p, (int)o->msg[i], tags[i], mh, &sreq[i])) == ncclSuccess &&
               !sreq[i] && now_s() < end)
          sched_yield();
        if (rc == ncclSuccess && !sreq[i]) {
          fail("%s: isend of %zu bytes kept returning NULL for %.0f s", o->name, o->msg[i], S(5.0));
          break;
        }
        if (rc != ncclSuccess) stage = 1;
      }
      /* Drive the sends that were accepted. */
      for (int i = 0; i < o->n && stage == 0 && !nfailed(); i++) {
        int d = 0;
        while ((rc = PCALL(test, sreq[i], &d, sizes)) == ncclSuccess && !d && now_s() < end) sched_yield();
        if (rc != ncclSuccess) stage = 2;
      }
      if (stage == 0) done = 1;
    }
    if (!sender && req) {
      while ((rc = PCALL(test, req, &done, sizes)) == ncclSuccess && !done && now_s() < end) sched_yield();
      if (rc != ncclSuccess) stage = 2;
      else if (!done) stage = 3;
    }
    g_shm->imetric[g_role][2 * s] = rc;
    g_shm->imetric[g_role][2 * s + 1] = stage;
    char w[2048];
    warn_since(mark, w, sizeof w);
    if (barrier(2 * s, 2, "outcome")) return;
    int peer_rc = g_shm->imetric[3 - g_role][2 * s];
    if (!sender) {
      /* Nothing may be written beyond a message, nor anything at all into a
       * buffer the message did not fit. */
      for (int i = 0; i < o->n; i++) {
        size_t wrote_ok = o->msg[i] <= o->cap[i] ? o->msg[i] : 0;
        for (size_t j = wrote_ok; j < o->cap[i]; j++)
          if (gb[i].p[j] != FILL) {
            fail("%s: buffer %d (posted %zu) byte %zu was written (0x%02x) although the %zu-byte message %s",
                 o->name, i, o->cap[i], j, gb[i].p[j], o->msg[i],
                 wrote_ok ? "ends before it" : "did not fit");
            break;
          }
      }
      if (rc == ncclSuccess && done && peer_rc == ncclSuccess)
        fail("%s: both sides completed successfully: silent truncation", o->name);
      if (rc != ncclSuccess && rc != ncclInvalidUsage && rc != ncclRemoteError)
        fail("%s: the receive failed with %s, expected ncclInvalidUsage", o->name, res_str(rc));
      if (rc != ncclInvalidUsage && peer_rc != ncclInvalidUsage)
        fail("%s: neither side reported ncclInvalidUsage (receiver %s, sender %s)", o->name, res_str(rc),
             res_str(peer_rc));
      summary("%s%s: sender %s, receiver %s%s", s ? "; " : "", o->name, res_str(peer_rc), res_str(rc),
              rc == ncclSuccess && done ? " (done)" : "");
    } else if (rc != ncclSuccess && rc != ncclInvalidUsage && rc != ncclRemoteError) {
      fail("%s: the send failed with %s, expected ncclInvalidUsage", o->name, res_str(rc));
    }
    if (rc == ncclInvalidUsage && !w[0]) fail("%s: ncclInvalidUsage without a WARN", o->name);
    if (rc == ncclInvalidUsage && w[0]) note("%s WARN: %s", sender ? "sender" : "receiver", w);
    if (barrier(2 * s + 1, 2, "judged")) return;
    conn_close(&k);
    for (int i = 0; i < o->n; i++) gbuf_free(&gb[i]);
  }
}

static void case_oversize(void) {
  if (spawn(1, w_oversize, NULL) < 0 || spawn(2, w_oversize, NULL) < 0) return;
  double dl = now_s() + S(30.0);
  reap_workers(dl);
}

/* ======================================================================== */
/* Misuse: a 33rd outstanding request. */
#define NREQ NCCL_NET_MAX_REQUESTS
static void w_33rd(void *arg) {
  (void)arg;
  int sender = g_role == 2;
  if (load_plugin()) return;
  struct conn k;
  if (conn_establish(&k, sender, 0, 10.0)) return;
  const size_t sz = 1000;
  uint8_t *buf = malloc(sz * (NREQ + 8));
  void *mh = NULL, *req[NREQ + 8];
  if (!buf) return;
  if (PCALL(regMr, sender ? k.scomm : k.rcomm, buf, sz * (NREQ + 8), NCCL_PTR_HOST, &mh) != ncclSuccess) {
    fail("regMr failed");
    return;
  }
  char what[64];
  if (!sender) {
    memset(buf, FILL, sz * (NREQ + 8));
    for (int i = 0; i < NREQ; i++)
      if (post_until(&k, 0, buf + (size_t)i * sz, sz, 33, mh, &req[i], 5.0)) return;
    size_t mark = warn_mark();
    void *d = buf + (size_t)NREQ * sz, *m = mh, *x = NULL;
    int s = (int)sz, t = 33;
    ncclResult_t rc = PCALL(irecv, k.rcomm, 1, &d, &s, &t, &m, &x);
    char w[1024];
    warn_since(mark, w, sizeof w);
    if (rc == ncclSuccess && x)
      fail("a 33rd irecv with 32 outstanding returned ncclSuccess and a request");
    else if (rc == ncclSuccess)
      fail("a 33rd irecv with 32 outstanding returned ncclSuccess with a NULL request (\"try again\"), "
           "not an error, although the misuse is detectable");
    summary("33rd irecv: %s%s%s; ", res_str(rc), w[0] ? ", WARN: " : " (no WARN)", w);
    if (barrier(0, 2, "32 receives posted")) return;
    for (int i = 0; i < NREQ; i++) {
      snprintf(what, sizeof what, "receive %d", i);
      int d2 = 0;
      double end = now_s() + S(5.0);
      while ((d2 = test_once(req[i], sz, what)) == 0 && now_s() < end) sched_yield();
      if (d2 != 1) {
        if (d2 == 0) fail("%s never completed", what);
        return;
      }
      if (pat_check(buf + (size_t)i * sz, sz, (uint64_t)i) >= 0) fail("%s: data wrong", what);
    }
    /* 8 more, so that the sender can try a 33rd send. */
    for (int i = 0; i < 8; i++)
      if (post_until(&k, 0, buf + (size_t)i * sz, sz, 33, mh, &req[i], 5.0)) return;
    if (barrier(1, 2, "8 more receives posted")) return;
    for (int i = 0; i < 8; i++) {
      snprintf(what, sizeof what, "receive %d", NREQ + i);
      int d2 = 0;
      double end = now_s() + S(5.0);
      while ((d2 = test_once(req[i], sz, what)) == 0 && now_s() < end) sched_yield();
      if (d2 != 1) {
        if (d2 == 0) fail("%s never completed", what);
        return;
      }
      if (pat_check(buf + (size_t)i * sz, sz, (uint64_t)(NREQ + i)) >= 0) fail("%s: data wrong", what);
    }
  } else {
    for (int i = 0; i < NREQ + 8; i++) pat_fill(buf + (size_t)i * sz, sz, (uint64_t)i);
    if (barrier(0, 2, "32 receives posted")) return;
    for (int i = 0; i < NREQ; i++)
      if (post_until(&k, 1, buf + (size_t)i * sz, sz, 33, mh, &req[i], 5.0)) return;
    if (barrier(1, 2, "8 more receives posted")) return;
    /* 32 sends not yet tested; a matching receive is posted: a 33rd send is
     * a detectable misuse. */
    size_t mark = warn_mark();
    void *x = NULL;
    ncclResult_t rc;
    double end = now_s() + S(3.0);
    while ((rc = PCALL(isend, k.scomm, buf + (size_t)NREQ * sz, (int)sz, 33, mh, &x)) == ncclSuccess && !x &&
           now_s() < end)
      sched_yield();
    char w[1024];
    warn_since(mark, w, sizeof w);
    if (rc == ncclSuccess && x)
      fail("a 33rd isend with 32 untested sends returned ncclSuccess and a request");
    else if (rc == ncclSuccess)
      fail("a 33rd isend with 32 untested sends kept returning NULL for %.0f s instead of an error", S(3.0));
    summary("33rd isend: %s%s%s; ", res_str(rc), w[0] ? ", WARN: " : " (no WARN)", w);
    for (int i = 0; i < NREQ; i++) {
      snprintf(what, sizeof what, "send %d", i);
      int d2 = 0;
      end = now_s() + S(5.0);
      while ((d2 = test_once(req[i], sz, what)) == 0 && now_s() < end) sched_yield();
      if (d2 != 1) {
        if (d2 == 0) fail("%s never completed", what);
        return;
      }
    }
    /* After the refusal the comm still works: the 8 pending receives complete. */
    for (int i = 0; i < 8; i++) {
      if (post_until(&k, 1, buf + (size_t)(NREQ + i) * sz, sz, 33, mh, &req[i], 5.0)) return;
      snprintf(what, sizeof what, "send %d", NREQ + i);
      int d2 = 0;
      end = now_s() + S(5.0);
      while ((d2 = test_once(req[i], sz, what)) == 0 && now_s() < end) sched_yield();
      if (d2 != 1) {
        if (d2 == 0) fail("%s never completed", what);
        return;
      }
    }
    summary("after the refusals the comm carried 8 more messages");
  }
  if (barrier(2, 2, "done")) return;
  conn_close(&k);
  free(buf);
}

static void case_33rd(void) {
  if (spawn(1, w_33rd, NULL) < 0 || spawn(2, w_33rd, NULL) < 0) return;
  double dl = now_s() + S(30.0);
  reap_workers(dl);
}

/* ======================================================================== */
/* Misuse: NULL and stale requests, bad arguments. */
static void expect_error(const char *what, ncclResult_t rc) {
  if (rc == ncclSuccess)
    fail("%s returned ncclSuccess, expected an error", what);
  else
    summary("%s: %s; ", what, res_str(rc));
}

static void w_badargs(void *arg) {
  (void)arg;
  int sender = g_role == 2;
  if (load_plugin()) return;
  struct conn k;
  if (conn_establish(&k, sender, 0, 10.0)) return;
  uint8_t *buf = malloc(4096);
  void *mh = NULL, *req = NULL;
  int done = 0, sizes[8];
  if (!buf || PCALL(regMr, sender ? k.scomm : k.rcomm, buf, 4096, NCCL_PTR_HOST, &mh) != ncclSuccess) {
    fail("regMr failed");
    return;
  }
  pat_fill(buf, 4096, 5);
  if (sender) {
    if (post_until(&k, 1, buf, 4096, 1, mh, &req, 5.0)) return;
  } else {
    if (post_until(&k, 0, buf, 4096, 1, mh, &req, 5.0)) return;
  }
  double end = now_s() + S(5.0);
  int d;
  while ((d = test_once(req, 4096, "the message")) == 0 && now_s() < end) sched_yield();
  if (d != 1) {
    if (d == 0) fail("the message never completed");
    return;
  }
  if (barrier(0, 2, "message done")) return;
  if (!sender) { /* one process reports the argument checks */
    uint64_t zeros[64];
    memset(zeros, 0, sizeof zeros);
    expect_error("test(NULL)", PCALL(test, NULL, &done, sizes));
    expect_error("test(a completed request)", PCALL(test, req, &done, sizes));
    if (done) fail("test of a completed (freed) request reported done = 1 again");
    expect_error("test(a zeroed buffer)", PCALL(test, zeros, &done, sizes));
    expect_error("test(req, done = NULL)", PCALL(test, req, NULL, sizes));
    void *d1 = buf, *m1 = mh, *x = NULL;
    int s1 = 10, t1 = 0, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, t9[9] = {0};
    void *d9[9] = {buf, buf, buf, buf, buf, buf, buf, buf, buf}, *m9[9] = {0};
    expect_error("irecv(n = 0)", PCALL(irecv, k.rcomm, 0, &d1, &s1, &t1, &m1, &x));
    expect_error("irecv(n = 9)", PCALL(irecv, k.rcomm, 9, d9, s9, t9, m9, &x));
    expect_error("irecv(NULL sizes)", PCALL(irecv, k.rcomm, 1, &d1, NULL, &t1, &m1, &x));
    s1 = -5;
    expect_error("irecv(size -5)", PCALL(irecv, k.rcomm, 1, &d1, &s1, &t1, &m1, &x));
    s1 = 10;
    expect_error("irecv(NULL request ptr)", PCALL(irecv, k.rcomm, 1, &d1, &s1, &t1, &m1, NULL));
    expect_error("isend on a receive comm", PCALL(isend, k.rcomm, buf, 10, 0, mh, &x));
    expect_error("irecv on a listen comm", PCALL(irecv, k.lcomm, 1, &d1, &s1, &t1, &m1, &x));
    expect_error("accept(a receive comm)", PCALL(accept, k.rcomm, &x, NULL));
    expect_error("closeSend(a receive comm)", PCALL(closeSend, k.rcomm));
    expect_error("closeSend(NULL)", PCALL(closeSend, NULL));
    expect_error("closeListen(a zeroed buffer)", PCALL(closeListen, zeros));
    expect_error("regMr(NCCL_PTR_CUDA)", PCALL(regMr, k.rcomm, buf, 4096, NCCL_PTR_CUDA, &x));
    expect_error("deregMr(garbage)", PCALL(deregMr, k.rcomm, zeros));
    expect_error("listen(dev 99)", PCALL(listen, 99, zeros, &x));
    expect_error("connect(dev -1)", PCALL(connect, -1, zeros, &x, NULL));
    ncclNetProperties_v8_t p;
    expect_error("getProperties(dev 99)", PCALL(getProperties, 99, &p));
  } else {
    void *x = NULL;
    expect_error("isend(size -1)", PCALL(isend, k.scomm, buf, -1, 0, mh, &x));
    expect_error("isend(NULL data, 10 bytes)", PCALL(isend, k.scomm, NULL, 10, 0, mh, &x));
    expect_error("isend(NULL request ptr)", PCALL(isend, k.scomm, buf, 10, 0, mh, NULL));
  }
  /* The comm still works after all that. */
  if (barrier(1, 2, "checks done")) return;
  if (sender) {
    if (post_until(&k, 1, buf, 4096, 2, mh, &req, 5.0)) return;
  } else {
    memset(buf, 0, 4096);
    if (post_until(&k, 0, buf, 4096, 2, mh, &req, 5.0)) return;
  }
  end = now_s() + S(5.0);
  while ((d = test_once(req, 4096, "the message after the bad calls")) == 0 && now_s() < end) sched_yield();
  if (d == 0) fail("the message after the bad calls never completed");
  if (!sender && d == 1 && pat_check(buf, 4096, 5) >= 0) fail("the message after the bad calls arrived damaged");
  if (barrier(2, 2, "done")) return;
  conn_close(&k);
  free(buf);
}

static void case_badargs(void) {
  if (spawn(1, w_badargs, NULL) < 0 || spawn(2, w_badargs, NULL) < 0) return;
  double dl = now_s() + S(20.0);
  reap_workers(dl);
}

/* ======================================================================== */
/* Misuse: double close.  Each kind in its own case, so that a crash in one
 * does not hide the others. */
static int g_dc_kind; /* 0 send, 1 recv, 2 listen */

static void w_double_close(void *arg) {
  (void)arg;
  int sender = g_role == 2;
  if (load_plugin()) return;
  struct conn k;
  if (conn_establish(&k, sender, 0, 10.0)) return;
  if (barrier(0, 2, "connected")) return;
  void *s = k.scomm, *r = k.rcomm, *l = k.lcomm;
  conn_close(&k);
  if (barrier(1, 2, "closed once")) return;
  /* The second close: the pointer is stale now. */
  step("second close");
  if (sender && g_dc_kind == 0) expect_error("closeSend twice", PCALL(closeSend, s));
  if (!sender && g_dc_kind == 1) expect_error("closeRecv twice", PCALL(closeRecv, r));
  if (!sender && g_dc_kind == 2) expect_error("closeListen twice", PCALL(closeListen, l));
  step("after the second close");
  if (barrier(2, 2, "done")) return;
}

static void double_close(int kind) {
  g_dc_kind = kind;
  if (spawn(1, w_double_close, NULL) < 0 || spawn(2, w_double_close, NULL) < 0) return;
  double dl = now_s() + S(20.0);
  reap_workers(dl);
}
static void case_double_close_send(void) { double_close(0); }
static void case_double_close_recv(void) { double_close(1); }
static void case_double_close_listen(void) { double_close(2); }

/* ======================================================================== */
/* Close with requests in flight, then dlclose: nothing left behind. */
#define CI_N 16
#define CI_SIZE (4u << 20)
static void *noop_thread(void *arg) { return arg; }

static void task_names(char *out, size_t cap) {
  out[0] = 0;
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  size_t len = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "?";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
      fclose(f);
    }
    int n = snprintf(out + len, cap - len, "%s%s(%s)", len ? ", " : "", e->d_name, comm);
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
  closedir(d);
}

static void w_unload(void *arg) {
  (void)arg;
  int sender = g_role == 2;
  /* A sanitizer runtime may start its own helper thread with the first
   * pthread_create of the process: let that happen before the baseline. */
  pthread_t th;
  if (pthread_create(&th, NULL, noop_thread, NULL) == 0) pthread_join(th, NULL);
  for (int round = 0; round < 2; round++) {
    int closer_is_sender = round == 0;
    int tasks0 = count_tasks(), fds0 = count_fds();
    if (load_plugin()) return;
    struct conn k;
    if (conn_establish(&k, sender, round, 10.0)) return;
    size_t len = (size_t)CI_N * CI_SIZE;
    uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
      fail("mmap: %s", strerror(errno));
      return;
    }
    memset(buf, 0x42, len);
    void *mh = NULL, *req[CI_N];
    if (PCALL(regMr, sender ? k.scomm : k.rcomm, buf, len, NCCL_PTR_HOST, &mh) != ncclSuccess) {
      fail("regMr failed");
      return;
    }
    step("round %d: posting %d x 4 MiB", round, CI_N);
    if (!sender) {
      for (int i = 0; i < CI_N; i++)
        if (post_until(&k, 0, buf + (size_t)i * CI_SIZE, CI_SIZE, 50 + i, mh, &req[i], 5.0)) return;
      if (barrier(4 * round, 2, "receives posted")) return;
    } else {
      if (barrier(4 * round, 2, "receives posted")) return;
      for (int i = 0; i < CI_N; i++)
        if (post_until(&k, 1, buf + (size_t)i * CI_SIZE, CI_SIZE, 50 + i, mh, &req[i], 5.0)) return;
    }
    if (barrier(4 * round + 1, 2, "all posted")) return;
    int tasks_live = count_tasks();
    if (sender != closer_is_sender) {
      if (barrier(4 * round + 2, 2, "peer closed")) return;
      step("round %d: testing after the peer closed", round);
      int ndone = 0, nerr = 0, live[CI_N];
      for (int i = 0; i < CI_N; i++) live[i] = 1;
      double end = now_s() + 0.3;
      while (now_s() < end) {
        for (int i = 0; i < CI_N; i++) {
          if (!live[i]) continue;
          int d = 0, sz[8];
          ncclResult_t rc = PCALL(test, req[i], &d, sz);
          if (rc != ncclSuccess) {
            live[i] = 0;
            nerr++;
          } else if (d) {
            live[i] = 0;
            ndone++;
          }
        }
      }
      summary("round %d (%s closes first): the other side's %d requests: %d done, %d failed, %d pending at its "
              "close; ",
              round, closer_is_sender ? "sender" : "receiver", CI_N, ndone, nerr, CI_N - ndone - nerr);
    }
    step("round %d: closing with requests in flight", round);
    double t0 = now_s();
    conn_close(&k);
    double dt = now_s() - t0;
    if (dt > S(1.0)) fail("round %d: closing took %.2f s", round, dt);
    munmap(buf, len); /* a late access by the plugin is now a SIGSEGV */
    if (sender == closer_is_sender && barrier(4 * round + 2, 2, "peer closed")) return;
    if (unload_plugin()) return;
    double t1 = now_s();
    int tasks = count_tasks(), fds = count_fds();
    while ((tasks != tasks0 || fds != fds0) && now_s() - t1 < S(1.0)) {
      sleep_s(0.01);
      tasks = count_tasks();
      fds = count_fds();
    }
    if (tasks != tasks0) {
      char names[1024];
      task_names(names, sizeof names);
      fail("round %d: %d threads 1 s after close + dlclose, %d before dlopen (%d while connected): %s", round,
           tasks, tasks0, tasks_live, names);
    }
    if (fds != fds0) {
      char l[1500];
      list_fds(l, sizeof l);
      fail("round %d: %d descriptors 1 s after close + dlclose, %d before dlopen: %s", round, fds, fds0, l);
    }
    g_shm->imetric[g_role][4 * round] = tasks0;
    g_shm->imetric[g_role][4 * round + 1] = tasks_live;
    g_shm->imetric[g_role][4 * round + 2] = tasks;
    g_shm->imetric[g_role][4 * round + 3] = fds;
    g_shm->metric[g_role][round] = dt;
    void *still = dlopen(g_plugin, RTLD_NOW | RTLD_NOLOAD);
    if (still) {
      note("round %d: the plugin stayed mapped after dlclose", round);
      dlclose(still);
    }
    if (barrier(4 * round + 3, 2, "round done")) return;
  }
}

static void case_unload(void) {
  if (spawn(1, w_unload, NULL) < 0 || spawn(2, w_unload, NULL) < 0) return;
  double dl = now_s() + S(30.0);
  reap_workers(dl);
  for (int r = 1; r <= 2; r++)
    summary("%s threads %d -> %d -> %d, %d -> %d -> %d, fds back to %d/%d, close %.0f/%.0f ms; ",
            g_case->roles[r], g_shm->imetric[r][0], g_shm->imetric[r][1], g_shm->imetric[r][2],
            g_shm->imetric[r][4], g_shm->imetric[r][5], g_shm->imetric[r][6], g_shm->imetric[r][3],
            g_shm->imetric[r][7], g_shm->metric[r][0] * 1e3, g_shm->metric[r][1] * 1e3);
}

/* ======================================================================== */
static const struct fcase g_cases[] = {
    {"kill-sender", "sender SIGKILLed mid-transfer: receiver's next call fails with ncclRemoteError within 2 s", 30,
     case_kill_sender, {"leader", "receiver", "sender"}},
    {"kill-receiver", "receiver SIGKILLed mid-transfer: sender fails with ncclRemoteError within 2 s", 30,
     case_kill_receiver, {"leader", "receiver", "sender"}},
    {"kill-sender-inflight", "sender frozen, then SIGKILLed: the receiver's pending test fails within 2 s", 30,
     case_kill_sender_inflight, {"leader", "receiver", "sender"}},
    {"kill-receiver-inflight", "receiver frozen, then SIGKILLed: the sender's pending test fails within 2 s", 30,
     case_kill_receiver_inflight, {"leader", "receiver", "sender"}},
    {"stop-sender", "sender SIGSTOPped: receiver fails within COLLX_TIMEOUT (3 s)", 30, case_stop_sender,
     {"leader", "receiver", "sender"}},
    {"stop-receiver", "receiver SIGSTOPped: sender fails within COLLX_TIMEOUT (3 s)", 30, case_stop_receiver,
     {"leader", "receiver", "sender"}},
    {"idle-rank", "a rank posts nothing for 3 x COLLX_TIMEOUT, then resumes: no error, all complete", 45,
     case_idle_rank, {"leader", "A (idle)", "B (busy)"}},
    {"netns-drop", "packets dropped between two network namespaces: error within COLLX_TIMEOUT (root)", 45,
     case_netns_drop, {"leader", "receiver", "sender"}},
    {"stray-clients", "junk, short, silent, wrong-secret and 300 burst clients on accept: no block, no leak", 40,
     case_strays, {"strays", "listener", "connector"}},
    {"slow-connector", "connector pauses 2 x COLLX_CONNECT_TIMEOUT mid-setup: a working comm or an error", 40,
     case_slow_connector, {"leader", "listener", "connector"}},
    {"slow-listener", "listener calls accept only after 3 x COLLX_CONNECT_TIMEOUT: the connection works", 40,
     case_slow_listener, {"leader", "listener", "connector"}},
    {"bad-handles", "connect with random, zero, wrong-secret and stale handles: errors, no crash", 60,
     case_bad_handles, {"leader", "listener", "connector"}},
    {"oversize", "messages larger than the posted buffer: ncclInvalidUsage, nothing written out of bounds", 40,
     case_oversize, {"leader", "receiver", "sender"}},
    {"33rd-request", "a 33rd outstanding irecv / isend is refused with an error; the comm keeps working", 40,
     case_33rd, {"leader", "receiver", "sender"}},
    {"bad-args", "test(NULL), test of a freed request and other bad arguments: errors, comm still works", 30,
     case_badargs, {"leader", "receiver", "sender"}},
    {"double-close-send", "closeSend twice: an error, no use of freed memory", 30, case_double_close_send,
     {"leader", "receiver", "sender"}},
    {"double-close-recv", "closeRecv twice: an error, no use of freed memory", 30, case_double_close_recv,
     {"leader", "receiver", "sender"}},
    {"double-close-listen", "closeListen twice: an error, no use of freed memory", 30, case_double_close_listen,
     {"leader", "receiver", "sender"}},
    {"unload-inflight", "close with 16 x 4 MiB in flight, dlclose: threads and descriptors back to before", 40,
     case_unload, {"leader", "receiver", "sender"}},
};
#define NCASES ((int)(sizeof g_cases / sizeof g_cases[0]))

/* Run one case in its own process group; 0 pass, 1 fail, 2 skip. */
static int run_case(const struct fcase *c) {
  struct cshm *shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) {
    printf("FAIL: %s (mmap: %s)\n", c->name, strerror(errno));
    return 1;
  }
  memset(shm, 0, sizeof *shm);
  g_shm = shm;
  g_case = c;
  fflush(stdout);
  fflush(stderr);
  double t0 = now_s();
  pid_t leader = fork();
  if (leader < 0) {
    printf("FAIL: %s (fork: %s)\n", c->name, strerror(errno));
    return 1;
  }
  if (leader == 0) {
    setpgid(0, 0);
    g_role = 0;
    shm->r[0].pid = getpid();
    c->fn();
    kill_all_workers();
    shm->r[0].finished = 1;
    _exit(0);
  }
  setpgid(leader, leader);
  int st = 0, timed_out = 0;
  double deadline = t0 + S(c->timeout_s);
  for (;;) {
    pid_t w = waitpid(leader, &st, WNOHANG);
    if (w == leader) break;
    if (now_s() > deadline) {
      timed_out = 1;
      kill(-leader, SIGKILL);
      waitpid(leader, &st, 0);
      break;
    }
    sleep_s(0.005);
  }
  /* Anything of the group still alive (a worker of a killed leader). */
  kill(-leader, SIGKILL);
  if (!strcmp(c->name, "netns-drop")) {
    int id = (int)(leader % 100000);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ip netns del cxfA%d >/dev/null 2>&1; ip netns del cxfB%d >/dev/null 2>&1", id, id);
    if (geteuid() == 0 && system(cmd) < 0) {
    }
  }
  double dt = now_s() - t0;
  int nf = 0, ns = 0;
  for (int r = 0; r < NROLES; r++) {
    nf += shm->r[r].nfail;
    ns += shm->r[r].nskip;
  }
  if (!timed_out && !shm->r[0].finished) nf++;
  int verdict = timed_out || nf ? 1 : ns ? 2 : 0;
  printf("%s: %s (%.2f s)%s%s\n", verdict == 1 ? "FAIL" : verdict == 2 ? "SKIP" : "PASS", c->name, dt,
         shm->summary[0] ? ": " : "", shm->summary);
  if (timed_out) {
    printf("  TIMEOUT: still running after %.0f s, killed; the processes were at:\n", S(c->timeout_s));
    for (int r = 0; r < NROLES; r++)
      if (shm->r[r].step[0]) printf("    [%s] %.*s\n", c->roles[r] ? c->roles[r] : "?", 199, shm->r[r].step);
  } else if (!shm->r[0].finished) {
    char d[128];
    describe_status(st, d, sizeof d);
    printf("  the leader ended abnormally (%s) at: %.*s\n", d, 199, shm->r[0].step);
  }
  for (int r = 0; r < NROLES; r++) {
    size_t len = shm->r[r].len < TEXT_CAP ? shm->r[r].len : TEXT_CAP;
    const char *txt = shm->r[r].text;
    size_t pos = 0;
    while (pos < len) {
      const char *nl = memchr(txt + pos, '\n', len - pos);
      size_t l = nl ? (size_t)(nl - (txt + pos)) : len - pos;
      int is_note = l >= 5 && !strncmp(txt + pos, "note:", 5);
      if (!is_note || g_verbose || verdict == 1)
        printf("  [%s] %.*s\n", c->roles[r] ? c->roles[r] : "?", (int)l, txt + pos);
      pos += l + 1;
    }
  }
  fflush(stdout);
  munmap(shm, sizeof *shm);
  return verdict;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int sel[NCASES];
  memset(sel, 0, sizeof sel);
  int nsel = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--list")) {
      for (int k = 0; k < NCASES; k++) printf("%-16s %s\n", g_cases[k].name, g_cases[k].summary);
      return 0;
    } else if (!strcmp(a, "-v")) {
      g_verbose = 1;
    } else if (!strcmp(a, "--case") && i + 1 < argc) {
      char *dup = strdup(argv[++i]), *save = NULL;
      for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int k = 0; k < NCASES; k++)
          if (!strcmp(t, g_cases[k].name)) {
            nsel += !sel[k];
            sel[k] = 1;
            found = 1;
          }
        if (!found) {
          fprintf(stderr, "%s: no case '%s' (see --list)\n", argv[0], t);
          return 99;
        }
      }
      free(dup);
    } else if (a[0] == '-') {
      fprintf(stderr, "usage: %s [-v] [--list] [--case NAME[,NAME...]] [PLUGIN.so]\n"
                      "env: COLLX_PLUGIN, COLLX_FAULTS_SCALE\n", argv[0]);
      return 99;
    } else {
      g_plugin = a;
    }
  }
  if (!g_plugin) g_plugin = getenv("COLLX_PLUGIN");
  if (!g_plugin || !*g_plugin) g_plugin = DEFAULT_PLUGIN;
  const char *sc = getenv("COLLX_FAULTS_SCALE");
  if (sc && strtod(sc, NULL) > 0) g_scale = strtod(sc, NULL);
  if (access(g_plugin, R_OK) != 0) {
    fprintf(stderr, "%s: plugin %s: %s\n", argv[0], g_plugin, strerror(errno));
    printf("0 passed, 1 failed, 0 skipped\n");
    return 1;
  }
  setenv("COLLX_IFNAME", "lo", 1);
  setenv("COLLX_TIMEOUT", "3", 1);
  setenv("COLLX_CONNECT_TIMEOUT", "1", 1);
  /* Keep the plugin's thread placement out of the picture on a busy box. */
  if (!getenv("COLLX_CPU_AFFINITY")) setenv("COLLX_CPU_AFFINITY", "off", 1);
  printf("collx fault tests: plugin %s, COLLX_TIMEOUT=%d, COLLX_CONNECT_TIMEOUT=%d, scale %g\n", g_plugin,
         TIMEOUT_S, CONNECT_TIMEOUT_S, g_scale);
  int np = 0, nf = 0, ns = 0;
  for (int k = 0; k < NCASES; k++) {
    if (nsel && !sel[k]) continue;
    int v = run_case(&g_cases[k]);
    np += v == 0;
    nf += v == 1;
    ns += v == 2;
  }
  printf("%d passed, %d failed, %d skipped\n", np, nf, ns);
  if (nf) return 1;
  return np == 0 && ns > 0 ? 77 : 0;
}
