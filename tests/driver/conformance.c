/*
 * collx conformance driver.
 *
 * dlopens the BUILT plugin (argv path, else $COLLX_PLUGIN, else
 * ./.libs/libnccl-net-collx.so), looks up ncclNetPlugin_v8 and drives it the
 * way NCCL's proxy thread does: non-blocking connect/accept polled in a loop,
 * isend/irecv that may answer "not ready" with a NULL request, test() polled
 * until done, up to 32 requests in flight per comm.
 *
 * Every case runs in freshly forked worker processes (the harness itself
 * never loads the plugin).  Two workers talk over a socketpair made before
 * fork: it carries the 128-byte connection handle and the barriers.  The
 * harness waits with a deadline and kills what is still running, so a hang
 * is a FAIL with the step each worker was at, never a stuck suite.  Workers
 * record their verdicts in shared memory, which survives a crash.
 *
 *   conformance [-v] [--list] [--case NAME[,NAME...]]... [PLUGIN.so]
 *
 * Environment: COLLX_PLUGIN (plugin path), COLLX_DRIVER_TIMEOUT_SCALE (scales
 * every timeout and per-call limit, for slow or sanitizer builds),
 * COLLX_DRIVER_SEED (seed of the random message sizes).  COLLX_IFNAME is set
 * to "lo" for the workers.
 *
 * Last line of output: "N passed, N failed, N skipped"; exit status 1 when
 * anything failed, 0 otherwise (99 on a usage or setup error).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collx/net_abi.h"

#include "../common/net_compat.h"
#include "../common/proc.h"

#define DEFAULT_PLUGIN "./.libs/libnccl-net-collx.so"
#define PLUGIN_SYMBOL "ncclNetPlugin_v8"

#define MAX_ROLES 2
#define NSLOTS 8          /* step breadcrumbs per worker (one per thread) */
#define STEP_LEN 200
#define REPORT_CAP 12288  /* verdict text per worker */
#define CANARY_LEN 64
#define FILL_BYTE 0xEE    /* receive buffers are filled with this before a post */
#define SIZE_SENTINEL (-7777)
#define SIZES_SLOTS 9     /* sizes[] passed to test: n used + sentinels after */

/* Limits (seconds), all multiplied by g_scale. */
#define BLOCK_LIMIT_S 0.5    /* any single plugin call (init excepted) */
#define NB_LIMIT_S 0.050     /* connect/accept/listen in the non-blocking cases */
#define CONNECT_TIMEOUT_S 5.0

/* ------------------------------------------------------------------------ */
/* Shared state between the harness and one worker. */
struct wshm {
  volatile int nfail;
  volatile int nskip;
  volatile int finished; /* the case function returned (exit follows) */
  char step[NSLOTS][STEP_LEN];
  char in_call[NSLOTS][24]; /* plugin entry point a thread is inside, "" when none */
  size_t len;
  char text[REPORT_CAP];
};

struct wctx;
typedef void (*case_fn)(struct wctx *c);

struct tcase {
  const char *name;
  const char *summary;
  int nroles;
  double timeout_s;
  const char *role_name[MAX_ROLES];
  case_fn fn;
};

struct wctx {
  const struct tcase *tc;
  int role;
  int ch; /* control channel to the other worker, -1 when alone */
  struct wshm *shm;
  void *dl;
  ncclNet_v8_t *net;
  int ndev;
  int dev;
  ncclNetProperties_v8_t props;
};

static double g_scale = 1.0;
static int g_verbose;
static const char *g_plugin_path;
static uint64_t g_seed = 0xC011C0DEull;
static struct wctx *g_ctx; /* the worker's context (the logger needs it) */

static double S(double s) { return s * g_scale; }

static const char *res_str(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "ncclSuccess";
  case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
  case ncclSystemError: return "ncclSystemError";
  case ncclInternalError: return "ncclInternalError";
  case ncclInvalidArgument: return "ncclInvalidArgument";
  case ncclInvalidUsage: return "ncclInvalidUsage";
  case ncclRemoteError: return "ncclRemoteError";
  case ncclInProgress: return "ncclInProgress";
  default: break;
  }
  static __thread char buf[32];
  snprintf(buf, sizeof buf, "ncclResult(%d)", (int)r);
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Verdict recording (worker side). */
static pthread_mutex_t g_report_mu = PTHREAD_MUTEX_INITIALIZER;

static void report_v(struct wctx *c, const char *kind, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  pthread_mutex_lock(&g_report_mu);
  struct wshm *s = c->shm;
  size_t room = REPORT_CAP - s->len;
  if (room > 1) {
    int n = snprintf(s->text + s->len, room, "%s: %s\n", kind, msg);
    if (n > 0) s->len += (size_t)n < room ? (size_t)n : room - 1;
  }
  pthread_mutex_unlock(&g_report_mu);
  if (g_verbose) fprintf(stderr, "[%s/%s] %s: %s\n", c->tc->name, c->tc->role_name[c->role], kind, msg);
}

__attribute__((format(printf, 2, 3))) static void failf(struct wctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v(c, "FAIL", fmt, ap);
  va_end(ap);
  __sync_fetch_and_add(&c->shm->nfail, 1);
}

__attribute__((format(printf, 2, 3))) static void skipf(struct wctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v(c, "SKIP", fmt, ap);
  va_end(ap);
  __sync_fetch_and_add(&c->shm->nskip, 1);
}

__attribute__((format(printf, 2, 3))) static void notef(struct wctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v(c, "note", fmt, ap);
  va_end(ap);
}

/* Breadcrumb: where the worker is, shown if the harness has to kill it. */
__attribute__((format(printf, 3, 4))) static void step(struct wctx *c, int slot, const char *fmt, ...) {
  char buf[STEP_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(c->shm->step[slot % NSLOTS], buf, sizeof buf);
}

static int failed(struct wctx *c) { return c->shm->nfail != 0; }

/* ------------------------------------------------------------------------ */
/* The logger handed to init: WARNs go to stderr and into a capture buffer;
 * the last connection statistics (INFO "... closed: ...") are kept too. */
static pthread_mutex_t g_warn_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_warn[32768];
static size_t g_warn_len;
static char g_closed[1536];

static void drv_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                       const char *fmt, ...) {
  (void)flags;
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *cname = g_ctx ? g_ctx->tc->name : "?";
  const char *rname = g_ctx ? g_ctx->tc->role_name[g_ctx->role] : "?";
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT) {
    fprintf(stderr, "[%s/%s] plugin WARN %s:%d %s\n", cname, rname, file ? file : "?", line, msg);
    pthread_mutex_lock(&g_warn_mu);
    size_t room = sizeof g_warn - g_warn_len;
    if (room > 1) {
      int n = snprintf(g_warn + g_warn_len, room, "%s\n", msg);
      if (n > 0) g_warn_len += (size_t)n < room ? (size_t)n : room - 1;
    }
    pthread_mutex_unlock(&g_warn_mu);
  } else if (level == NCCL_LOG_INFO && strstr(msg, "send connection to") && strstr(msg, "closed:")) {
    pthread_mutex_lock(&g_warn_mu);
    snprintf(g_closed, sizeof g_closed, "%s", msg);
    pthread_mutex_unlock(&g_warn_mu);
  }
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_ABORT && g_verbose && level != NCCL_LOG_NONE) {
    fprintf(stderr, "[%s/%s] plugin %s %s\n", cname, rname,
            level == NCCL_LOG_INFO ? "INFO" : level == NCCL_LOG_TRACE ? "TRACE" : "LOG", msg);
  }
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
  if (n >= cap) n = cap - 1;
  memcpy(out, g_warn + mark, n);
  out[n] = 0;
  pthread_mutex_unlock(&g_warn_mu);
}

/* ------------------------------------------------------------------------ */
/* Calling the plugin: every call is timed, none may block. */
static void call_timing(struct wctx *c, const char *fn, double dt) {
  static __thread int reported;
  if (dt > S(BLOCK_LIMIT_S) && reported < 3) {
    reported++;
    failf(c, "%s took %.0f ms in one call (limit %.0f ms): plugin calls must not block", fn, dt * 1e3,
          S(BLOCK_LIMIT_S) * 1e3);
  }
}

static __thread int t_slot; /* breadcrumb slot of this thread */

static void call_enter(struct wctx *c, const char *fn) {
  char *d = c->shm->in_call[t_slot % NSLOTS];
  strncpy(d, fn, 23);
}

#define PCALL(c, fn, ...)                                   \
  ({                                                        \
    call_enter((c), #fn);                                   \
    double pc_t0_ = now_s();                                \
    ncclResult_t pc_r_ = (c)->net->fn(__VA_ARGS__);         \
    call_timing((c), #fn, now_s() - pc_t0_);                \
    (c)->shm->in_call[t_slot % NSLOTS][0] = 0;              \
    pc_r_;                                                  \
  })

static void backoff(unsigned *spins) {
  if (++*spins < 64) {
    sched_yield();
  } else {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

/* ------------------------------------------------------------------------ */
/* Control channel between the two workers. */
static int ch_io(struct wctx *c, int writing, void *buf, size_t len, double timeout_s, const char *what) {
  double deadline = now_s() + S(timeout_s);
  size_t done = 0;
  while (done < len) {
    double left = deadline - now_s();
    if (left <= 0) {
      failf(c, "control channel: timed out after %.1f s %s '%s' (peer stuck?)", S(timeout_s),
            writing ? "sending" : "waiting for", what);
      return -1;
    }
    struct pollfd pfd = {c->ch, writing ? POLLOUT : POLLIN, 0};
    int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = writing ? send(c->ch, (char *)buf + done, len - done, MSG_NOSIGNAL)
                        : recv(c->ch, (char *)buf + done, len - done, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      failf(c, "control channel: peer went away while %s '%s' (%s; see the peer's report)",
            writing ? "sending" : "waiting for", what, n == 0 ? "EOF" : strerror(errno));
      return -1;
    }
    done += (size_t)n;
  }
  return 0;
}

static int ch_send(struct wctx *c, const void *buf, size_t len, const char *what) {
  return ch_io(c, 1, (void *)buf, len, 20.0, what);
}
static int ch_recv(struct wctx *c, void *buf, size_t len, const char *what) {
  return ch_io(c, 0, buf, len, 20.0, what);
}

static int ch_barrier(struct wctx *c, const char *name) {
  unsigned char mine = 0, theirs = 0;
  for (const char *p = name; *p; p++) mine = (unsigned char)(mine * 31 + (unsigned char)*p);
  if (ch_send(c, &mine, 1, name) || ch_recv(c, &theirs, 1, name)) return -1;
  if (mine != theirs) {
    failf(c, "control channel out of step at barrier '%s' (peer is at a different barrier)", name);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Data patterns: byte at offset j of a message depends on the message key and
 * j (64-bit hash per 8-byte word), so shifted, stale or swapped data shows. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t key_of(uint64_t base, uint64_t a, uint64_t b) {
  return mix64(base ^ mix64(a * 0x100000001B3ull + b + 1));
}

static void pattern_fill(uint8_t *p, size_t n, uint64_t key) {
  size_t off = 0;
  uint64_t w = 0;
  for (; off + 8 <= n; off += 8, w++) {
    uint64_t v = mix64(key + w);
    memcpy(p + off, &v, 8);
  }
  if (off < n) {
    uint64_t v = mix64(key + w);
    memcpy(p + off, &v, n - off);
  }
}

/* 0 when p[0..n) carries the pattern of key; else describes the damage. */
static int pattern_check(const uint8_t *p, size_t n, uint64_t key, char *why, size_t whylen) {
  size_t bad = 0, first = 0;
  uint8_t exp_first = 0, got_first = 0;
  uint64_t w = 0;
  for (size_t off = 0; off < n; off += 8, w++) {
    uint64_t v = mix64(key + w);
    uint8_t e[8];
    memcpy(e, &v, 8);
    size_t m = n - off < 8 ? n - off : 8;
    if (memcmp(p + off, e, m) == 0) continue;
    for (size_t k = 0; k < m; k++) {
      if (p[off + k] == e[k]) continue;
      if (!bad) {
        first = off + k;
        exp_first = e[k];
        got_first = p[off + k];
      }
      bad++;
    }
  }
  if (!bad) return 0;
  snprintf(why, whylen, "%zu of %zu bytes wrong, first at offset %zu: expected 0x%02x got 0x%02x%s", bad, n,
           first, exp_first, got_first,
           got_first == FILL_BYTE ? " (0xEE is the pre-post fill: never written)" : "");
  return -1;
}

static void canary_fill(uint8_t *p, uint64_t salt) {
  for (int j = 0; j < CANARY_LEN; j++) p[j] = (uint8_t)(0xA5 ^ (j * 29) ^ (uint8_t)salt ^ (uint8_t)(salt >> 8));
}

static int canary_check(const uint8_t *p, uint64_t salt, char *why, size_t whylen) {
  int bad = 0, first = -1;
  uint8_t e1 = 0, g1 = 0;
  for (int j = 0; j < CANARY_LEN; j++) {
    uint8_t e = (uint8_t)(0xA5 ^ (j * 29) ^ (uint8_t)salt ^ (uint8_t)(salt >> 8));
    if (p[j] != e) {
      if (first < 0) {
        first = j;
        e1 = e;
        g1 = p[j];
      }
      bad++;
    }
  }
  if (!bad) return 0;
  snprintf(why, whylen,
           "canary after the receive buffer overwritten: %d of %d bytes changed, first at +%d: expected 0x%02x "
           "got 0x%02x",
           bad, CANARY_LEN, first, e1, g1);
  return -1;
}

/* Bytes [from, to) must still hold FILL_BYTE. */
static int untouched_check(const uint8_t *p, size_t from, size_t to, char *why, size_t whylen) {
  for (size_t j = from; j < to; j++) {
    if (p[j] != FILL_BYTE) {
      snprintf(why, whylen, "byte %zu of the posted buffer (beyond the %zu-byte message) was written: 0x%02x",
               j, from, p[j]);
      return -1;
    }
  }
  return 0;
}

static uint64_t rng_next(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  return mix64(*s);
}

static void *xmalloc(struct wctx *c, size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) failf(c, "out of memory allocating %zu bytes", n);
  return p;
}

/* ------------------------------------------------------------------------ */
/* Loading the plugin. */

static void task_names(char *out, size_t cap) {
  out[0] = 0;
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  size_t len = 0;
  struct dirent *e;
  pid_t self = getpid();
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "?";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
      fclose(f);
    }
    int n = snprintf(out + len, cap - len, "%s%s(%s)%s", len ? ", " : "", e->d_name, comm,
                     atoi(e->d_name) == self ? "[main]" : "");
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
  closedir(d);
}

/* dlopen + dlsym + init + devices + getProperties(0). */
static int load_plugin(struct wctx *c) {
  step(c, 0, "dlopen %s", g_plugin_path);
  c->dl = dlopen(g_plugin_path, RTLD_NOW | RTLD_LOCAL);
  if (!c->dl) {
    failf(c, "dlopen(%s) failed: %s", g_plugin_path, dlerror());
    return -1;
  }
  c->net = (ncclNet_v8_t *)net_compat_load(c->dl, 0); /* COLLX_DRIVER_NET_VERSION, default 8 */
  if (!c->net) {
    failf(c, "%s does not export %s: %s", g_plugin_path, net_compat_symbol(), dlerror());
    return -1;
  }
  static const char *const fnames[] = {"init",  "devices", "getProperties", "listen", "connect",
                                       "accept", "regMr",  "deregMr",       "isend",  "irecv",
                                       "iflush", "test",   "closeSend",     "closeRecv", "closeListen"};
  void *const fns[] = {(void *)c->net->init,    (void *)c->net->devices, (void *)c->net->getProperties,
                       (void *)c->net->listen,  (void *)c->net->connect, (void *)c->net->accept,
                       (void *)c->net->regMr,   (void *)c->net->deregMr, (void *)c->net->isend,
                       (void *)c->net->irecv,   (void *)c->net->iflush,  (void *)c->net->test,
                       (void *)c->net->closeSend, (void *)c->net->closeRecv, (void *)c->net->closeListen};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    if (!fns[i]) {
      failf(c, "%s.%s is NULL", PLUGIN_SYMBOL, fnames[i]);
      return -1;
    }
  }
  step(c, 0, "init");
  double t0 = now_s();
  ncclResult_t r = c->net->init(drv_logger);
  double dt = now_s() - t0;
  if (r != ncclSuccess) {
    failf(c, "init returned %s (expected ncclSuccess)", res_str(r));
    return -1;
  }
  if (dt > S(5.0)) failf(c, "init took %.1f s (limit %.1f s)", dt, S(5.0));
  step(c, 0, "devices");
  c->ndev = -1;
  r = PCALL(c, devices, &c->ndev);
  if (r != ncclSuccess) {
    failf(c, "devices returned %s", res_str(r));
    return -1;
  }
  if (c->ndev < 1) {
    failf(c, "devices reported ndev = %d with COLLX_IFNAME=lo, expected >= 1", c->ndev);
    return -1;
  }
  c->dev = 0;
  memset(&c->props, 0, sizeof c->props);
  r = PCALL(c, getProperties, c->dev, &c->props);
  if (r != ncclSuccess) {
    failf(c, "getProperties(0) returned %s", res_str(r));
    return -1;
  }
  return failed(c) ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Connections.  One pair is one send comm in one process and one recv comm
 * (plus the listen comm) in the other. */
struct pair {
  int sender; /* this process holds the send side */
  void *lcomm, *scomm, *rcomm;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  ncclNetDeviceHandle_v8_t *devcomm;
  int calls;
  double max_call_s;
};

static int pair_listen(struct wctx *c, struct pair *p, double call_limit_s) {
  memset(p->handle, 0, sizeof p->handle);
  p->lcomm = NULL;
  double t0 = now_s();
  ncclResult_t r = PCALL(c, listen, c->dev, p->handle, &p->lcomm);
  double dt = now_s() - t0;
  if (r != ncclSuccess) {
    failf(c, "listen(dev %d) returned %s", c->dev, res_str(r));
    return -1;
  }
  if (!p->lcomm) {
    failf(c, "listen returned ncclSuccess with a NULL listen comm");
    return -1;
  }
  if (call_limit_s > 0 && dt > call_limit_s) {
    failf(c, "listen took %.1f ms (limit %.0f ms): it must not block", dt * 1e3, call_limit_s * 1e3);
    return -1;
  }
  return 0;
}

/* One connect (sender) or accept (receiver) call; 1 when the comm is up. */
static int pair_poll(struct wctx *c, struct pair *p, double call_limit_s, int *up) {
  ncclResult_t r;
  void *comm = NULL;
  p->devcomm = NULL;
  double t0 = now_s();
  if (p->sender)
    r = PCALL(c, connect, c->dev, p->handle, &comm, &p->devcomm);
  else
    r = PCALL(c, accept, p->lcomm, &comm, &p->devcomm);
  double dt = now_s() - t0;
  p->calls++;
  if (dt > p->max_call_s) p->max_call_s = dt;
  if (r != ncclSuccess) {
    failf(c, "%s call #%d returned %s", p->sender ? "connect" : "accept", p->calls, res_str(r));
    return -1;
  }
  if (call_limit_s > 0 && dt > call_limit_s) {
    failf(c, "%s call #%d took %.1f ms (limit %.0f ms): it must not block", p->sender ? "connect" : "accept",
          p->calls, dt * 1e3, call_limit_s * 1e3);
    return -1;
  }
  if (comm) {
    if (p->sender)
      p->scomm = comm;
    else
      p->rcomm = comm;
    *up = 1;
  } else {
    *up = 0;
  }
  return 0;
}

static int pair_finish(struct wctx *c, struct pair *p, double timeout_s, double call_limit_s, int slot) {
  double t0 = now_s(), deadline = t0 + S(timeout_s);
  unsigned spins = 0;
  step(c, slot, "%s loop", p->sender ? "connect" : "accept");
  for (;;) {
    int up = 0;
    if (pair_poll(c, p, call_limit_s, &up)) return -1;
    if (up) return 0;
    if (now_s() > deadline) {
      failf(c, "%s did not complete within %.1f s (%d calls, each returned ncclSuccess with a NULL comm)",
            p->sender ? "connect" : "accept", S(timeout_s), p->calls);
      return -1;
    }
    backoff(&spins);
  }
}

/* Sender: receive the handle, connect.  Receiver: listen, send the handle,
 * accept.  Both loops run at the same time in the two processes. */
static int pair_establish(struct wctx *c, struct pair *p, int sender) {
  memset(p, 0, sizeof *p);
  p->sender = sender;
  if (sender) {
    step(c, 0, "waiting for the listen handle");
    if (ch_recv(c, p->handle, sizeof p->handle, "listen handle")) return -1;
  } else {
    step(c, 0, "listen");
    if (pair_listen(c, p, 0)) return -1;
    if (ch_send(c, p->handle, sizeof p->handle, "listen handle")) return -1;
  }
  return pair_finish(c, p, CONNECT_TIMEOUT_S, 0, 0);
}

static int pair_close(struct wctx *c, struct pair *p) {
  int rc = 0;
  ncclResult_t r;
  if (p->scomm) {
    r = PCALL(c, closeSend, p->scomm);
    if (r != ncclSuccess) {
      failf(c, "closeSend returned %s", res_str(r));
      rc = -1;
    }
    p->scomm = NULL;
  }
  if (p->rcomm) {
    r = PCALL(c, closeRecv, p->rcomm);
    if (r != ncclSuccess) {
      failf(c, "closeRecv returned %s", res_str(r));
      rc = -1;
    }
    p->rcomm = NULL;
  }
  if (p->lcomm) {
    r = PCALL(c, closeListen, p->lcomm);
    if (r != ncclSuccess) {
      failf(c, "closeListen returned %s", res_str(r));
      rc = -1;
    }
    p->lcomm = NULL;
  }
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Streams: a sequence of messages on one comm with a window of requests in
 * flight, posted and tested the way the proxy does (post when a slot is
 * free, retry NULL requests, test the oldest). */
struct plan {
  const char *label;
  int n;
  int *size;   /* message sizes */
  int *posted; /* receive buffer sizes (>= size) */
  int *tag;
  uint64_t key;
  int window;
  double timeout_s;
  int slot;
  int check_tail; /* receiver: [size, posted) must stay untouched */
};

static struct plan *plan_new(struct wctx *c, const char *label, int n, uint64_t key, int window, double timeout_s,
                             int slot) {
  struct plan *pl = calloc(1, sizeof *pl);
  if (!pl) {
    failf(c, "out of memory");
    return NULL;
  }
  pl->label = label;
  pl->n = n;
  pl->size = calloc((size_t)n + 1, sizeof(int));
  pl->posted = calloc((size_t)n + 1, sizeof(int));
  pl->tag = calloc((size_t)n + 1, sizeof(int));
  pl->key = key;
  pl->window = window;
  pl->timeout_s = timeout_s;
  pl->slot = slot;
  if (!pl->size || !pl->posted || !pl->tag) {
    failf(c, "out of memory");
    return NULL;
  }
  return pl;
}

static void plan_free(struct plan *pl) {
  if (!pl) return;
  free(pl->size);
  free(pl->posted);
  free(pl->tag);
  free(pl);
}

static int stream_send(struct wctx *c, void *scomm, const struct plan *pl) {
  int W = pl->window;
  size_t cap = 1;
  for (int i = 0; i < pl->n; i++)
    if ((size_t)pl->size[i] > cap) cap = (size_t)pl->size[i];
  uint8_t **buf = calloc((size_t)W, sizeof *buf);
  void **mh = calloc((size_t)W, sizeof *mh);
  void **req = calloc((size_t)W, sizeof *req);
  int *filled = calloc((size_t)W, sizeof *filled);
  if (!buf || !mh || !req || !filled) {
    failf(c, "out of memory");
    return -1;
  }
  for (int w = 0; w < W; w++) {
    filled[w] = -1;
    if (!(buf[w] = xmalloc(c, cap))) return -1;
    ncclResult_t r = PCALL(c, regMr, scomm, buf[w], cap, NCCL_PTR_HOST, &mh[w]);
    if (r != ncclSuccess) {
      failf(c, "%s: regMr(send comm, %zu bytes, NCCL_PTR_HOST) returned %s", pl->label, cap, res_str(r));
      return -1;
    }
  }
  int np = 0, nd = 0;
  long nulls = 0;
  unsigned spins = 0;
  double deadline = now_s() + S(pl->timeout_s);
  while (nd < pl->n) {
    int progress = 0;
    if (np < pl->n && np - nd < W) {
      int i = np, w = i % W;
      if (filled[w] != i) {
        pattern_fill(buf[w], (size_t)pl->size[i], key_of(pl->key, (uint64_t)i, 0));
        filled[w] = i;
        step(c, pl->slot, "%s: isend message %d/%d (size %d, tag %d), %d completed", pl->label, i, pl->n,
             pl->size[i], pl->tag[i], nd);
      }
      void *r = NULL;
      ncclResult_t rc = PCALL(c, isend, scomm, buf[w], pl->size[i], pl->tag[i], mh[w], &r);
      if (rc != ncclSuccess) {
        failf(c, "%s: isend of message %d (size %d, tag %d) returned %s", pl->label, i, pl->size[i], pl->tag[i],
              res_str(rc));
        return -1;
      }
      if (r) {
        req[w] = r;
        np++;
        progress = 1;
      } else {
        nulls++;
      }
    }
    if (nd < np) {
      int i = nd, w = i % W, done = 0;
      int sz[SIZES_SLOTS];
      for (int k = 0; k < SIZES_SLOTS; k++) sz[k] = SIZE_SENTINEL;
      ncclResult_t rc = PCALL(c, test, req[w], &done, sz);
      if (rc != ncclSuccess) {
        failf(c, "%s: test of the send of message %d (size %d, tag %d) returned %s", pl->label, i, pl->size[i],
              pl->tag[i], res_str(rc));
        return -1;
      }
      if (done) {
        req[w] = NULL;
        if (sz[0] != pl->size[i]) {
          failf(c, "%s: send of message %d completed with sizes[0] = %d, expected %d (bytes sent)", pl->label, i,
                sz[0], pl->size[i]);
          return -1;
        }
        for (int k = 1; k < SIZES_SLOTS; k++) {
          if (sz[k] != SIZE_SENTINEL) {
            failf(c, "%s: test of a send wrote sizes[%d] = %d (a send has one size)", pl->label, k, sz[k]);
            return -1;
          }
        }
        nd++;
        progress = 1;
      }
    }
    if (progress) {
      spins = 0;
    } else {
      if (now_s() > deadline) {
        if (np < pl->n && np - nd < W)
          failf(c,
                "%s: timed out after %.1f s: %d of %d messages sent, %d posted; isend of message %d (size %d) "
                "keeps returning a NULL request (%ld NULL answers in all)",
                pl->label, S(pl->timeout_s), nd, pl->n, np, np, pl->size[np], nulls);
        else
          failf(c, "%s: timed out after %.1f s: %d of %d messages sent; test of message %d (size %d) never "
                "reported done",
                pl->label, S(pl->timeout_s), nd, pl->n, nd, pl->size[nd]);
        return -1;
      }
      if (spins == 63)
        step(c, pl->slot, "%s: stalled: %d of %d sent, %d posted; %s", pl->label, nd, pl->n, np,
             np < pl->n && np - nd < W ? "isend returns NULL" : "test of the oldest send not done");
      backoff(&spins);
    }
  }
  for (int w = 0; w < W; w++) {
    ncclResult_t r = PCALL(c, deregMr, scomm, mh[w]);
    if (r != ncclSuccess) {
      failf(c, "%s: deregMr(send comm) returned %s", pl->label, res_str(r));
      return -1;
    }
    free(buf[w]);
  }
  free(buf);
  free(mh);
  free(req);
  free(filled);
  return 0;
}

static int stream_recv(struct wctx *c, void *rcomm, const struct plan *pl) {
  int W = pl->window;
  size_t cap = CANARY_LEN;
  for (int i = 0; i < pl->n; i++)
    if ((size_t)pl->posted[i] + CANARY_LEN > cap) cap = (size_t)pl->posted[i] + CANARY_LEN;
  uint8_t **buf = calloc((size_t)W, sizeof *buf);
  void **mh = calloc((size_t)W, sizeof *mh);
  void **req = calloc((size_t)W, sizeof *req);
  int *prepared = calloc((size_t)W, sizeof *prepared);
  if (!buf || !mh || !req || !prepared) {
    failf(c, "out of memory");
    return -1;
  }
  for (int w = 0; w < W; w++) {
    prepared[w] = -1;
    if (!(buf[w] = xmalloc(c, cap))) return -1;
    ncclResult_t r = PCALL(c, regMr, rcomm, buf[w], cap, NCCL_PTR_HOST, &mh[w]);
    if (r != ncclSuccess) {
      failf(c, "%s: regMr(recv comm, %zu bytes, NCCL_PTR_HOST) returned %s", pl->label, cap, res_str(r));
      return -1;
    }
  }
  int np = 0, nd = 0;
  long nulls = 0;
  unsigned spins = 0;
  double deadline = now_s() + S(pl->timeout_s);
  char why[256];
  while (nd < pl->n) {
    int progress = 0;
    if (np < pl->n && np - nd < W) {
      int i = np, w = i % W;
      if (prepared[w] != i) {
        memset(buf[w], FILL_BYTE, (size_t)pl->posted[i]);
        canary_fill(buf[w] + pl->posted[i], (uint64_t)i);
        prepared[w] = i;
        step(c, pl->slot, "%s: irecv message %d/%d (size %d, posted %d, tag %d), %d completed", pl->label, i,
             pl->n, pl->size[i], pl->posted[i], pl->tag[i], nd);
      }
      void *d = buf[w], *m = mh[w], *r = NULL;
      int s = pl->posted[i], t = pl->tag[i];
      ncclResult_t rc = PCALL(c, irecv, rcomm, 1, &d, &s, &t, &m, &r);
      if (rc != ncclSuccess) {
        failf(c, "%s: irecv of message %d (posted %d, tag %d) returned %s", pl->label, i, pl->posted[i],
              pl->tag[i], res_str(rc));
        return -1;
      }
      if (r) {
        req[w] = r;
        np++;
        progress = 1;
      } else {
        nulls++;
      }
    }
    if (nd < np) {
      int i = nd, w = i % W, done = 0;
      int sz[SIZES_SLOTS];
      for (int k = 0; k < SIZES_SLOTS; k++) sz[k] = SIZE_SENTINEL;
      ncclResult_t rc = PCALL(c, test, req[w], &done, sz);
      if (rc != ncclSuccess) {
        failf(c, "%s: test of the receive of message %d (size %d, posted %d, tag %d) returned %s", pl->label, i,
              pl->size[i], pl->posted[i], pl->tag[i], res_str(rc));
        return -1;
      }
      if (done) {
        req[w] = NULL;
        if (sz[0] != pl->size[i]) {
          failf(c, "%s: receive of message %d (posted %d) completed with sizes[0] = %d, expected %d", pl->label, i,
                pl->posted[i], sz[0], pl->size[i]);
          return -1;
        }
        for (int k = 1; k < SIZES_SLOTS; k++) {
          if (sz[k] != SIZE_SENTINEL) {
            failf(c, "%s: test of a 1-receive request wrote sizes[%d] = %d", pl->label, k, sz[k]);
            return -1;
          }
        }
        if (pattern_check(buf[w], (size_t)pl->size[i], key_of(pl->key, (uint64_t)i, 0), why, sizeof why)) {
          failf(c, "%s: message %d (size %d, tag %d): data wrong: %s", pl->label, i, pl->size[i], pl->tag[i], why);
          return -1;
        }
        if (canary_check(buf[w] + pl->posted[i], (uint64_t)i, why, sizeof why)) {
          failf(c, "%s: message %d (size %d, posted %d): %s", pl->label, i, pl->size[i], pl->posted[i], why);
          return -1;
        }
        if (pl->check_tail &&
            untouched_check(buf[w], (size_t)pl->size[i], (size_t)pl->posted[i], why, sizeof why)) {
          failf(c, "%s: message %d (size %d, posted %d): %s", pl->label, i, pl->size[i], pl->posted[i], why);
          return -1;
        }
        nd++;
        progress = 1;
      }
    }
    if (progress) {
      spins = 0;
    } else {
      if (now_s() > deadline) {
        if (nd < np)
          failf(c, "%s: timed out after %.1f s: %d of %d messages received; test of message %d (size %d, tag %d) "
                "never reported done",
                pl->label, S(pl->timeout_s), nd, pl->n, nd, pl->size[nd], pl->tag[nd]);
        else
          failf(c, "%s: timed out after %.1f s: irecv of message %d keeps returning a NULL request (%ld times)",
                pl->label, S(pl->timeout_s), np, nulls);
        return -1;
      }
      if (spins == 63)
        step(c, pl->slot, "%s: stalled: %d of %d received, %d posted; %s", pl->label, nd, pl->n, np,
             nd < np ? "test of the oldest receive not done" : "irecv returns NULL");
      backoff(&spins);
    }
  }
  for (int w = 0; w < W; w++) {
    ncclResult_t r = PCALL(c, deregMr, rcomm, mh[w]);
    if (r != ncclSuccess) {
      failf(c, "%s: deregMr(recv comm) returned %s", pl->label, res_str(r));
      return -1;
    }
    free(buf[w]);
  }
  free(buf);
  free(mh);
  free(req);
  free(prepared);
  return 0;
}

/* Post one isend, retrying NULL until the deadline.  Returns the request
 * (NULL + failure on error or timeout). */
static void *send_retry(struct wctx *c, void *scomm, void *data, int size, int tag, void *mh, double timeout_s,
                        const char *what) {
  double deadline = now_s() + S(timeout_s);
  unsigned spins = 0;
  long nulls = 0;
  for (;;) {
    void *r = NULL;
    ncclResult_t rc = PCALL(c, isend, scomm, data, size, tag, mh, &r);
    if (rc != ncclSuccess) {
      failf(c, "%s: isend (size %d, tag %d) returned %s", what, size, tag, res_str(rc));
      return NULL;
    }
    if (r) return r;
    nulls++;
    if (now_s() > deadline) {
      failf(c, "%s: isend (size %d, tag %d) still returned a NULL request after %.1f s (%ld tries) although the "
            "receiver has posted the matching receive",
            what, size, tag, S(timeout_s), nulls);
      return NULL;
    }
    backoff(&spins);
  }
}

static void *recv_retry(struct wctx *c, void *rcomm, int n, void **data, int *sizes, int *tags, void **mh,
                        double timeout_s, const char *what) {
  double deadline = now_s() + S(timeout_s);
  unsigned spins = 0;
  for (;;) {
    void *r = NULL;
    ncclResult_t rc = PCALL(c, irecv, rcomm, n, data, sizes, tags, mh, &r);
    if (rc != ncclSuccess) {
      failf(c, "%s: irecv (n = %d, sizes[0] = %d, tags[0] = %d) returned %s", what, n, sizes[0], tags[0],
            res_str(rc));
      return NULL;
    }
    if (r) return r;
    if (now_s() > deadline) {
      failf(c, "%s: irecv (n = %d) still returned a NULL request after %.1f s", what, n, S(timeout_s));
      return NULL;
    }
    backoff(&spins);
  }
}

/* Test until done; checks sizes[n..] untouched.  Returns 0, or -1 (reported). */
static int wait_req(struct wctx *c, void *req, int n, int *sizes_out, double timeout_s, const char *what) {
  double deadline = now_s() + S(timeout_s);
  unsigned spins = 0;
  int sz[SIZES_SLOTS];
  for (int k = 0; k < SIZES_SLOTS; k++) sz[k] = SIZE_SENTINEL;
  for (;;) {
    int done = 0;
    ncclResult_t rc = PCALL(c, test, req, &done, sz);
    if (rc != ncclSuccess) {
      failf(c, "%s: test returned %s", what, res_str(rc));
      return -1;
    }
    if (done) break;
    if (now_s() > deadline) {
      failf(c, "%s: test never reported done within %.1f s", what, S(timeout_s));
      return -1;
    }
    backoff(&spins);
  }
  for (int k = n; k < SIZES_SLOTS; k++) {
    if (sz[k] != SIZE_SENTINEL) {
      failf(c, "%s: test wrote sizes[%d] = %d for a request of n = %d", what, k, sz[k], n);
      return -1;
    }
  }
  memcpy(sizes_out, sz, sizeof(int) * (size_t)n);
  return 0;
}

/* ======================================================================== */
/* Case 1: properties. */
static void case_properties(struct wctx *c) {
  if (load_plugin(c)) return;
  if (!c->net->name || !c->net->name[0]) failf(c, "%s.name is %s", PLUGIN_SYMBOL, c->net->name ? "empty" : "NULL");
  for (int d = 0; d < c->ndev; d++) {
    ncclNetProperties_v8_t p;
    memset(&p, 0x5A, sizeof p); /* garbage: every field must be written */
    ncclResult_t r = PCALL(c, getProperties, d, &p);
    if (r != ncclSuccess) {
      failf(c, "getProperties(%d) returned %s", d, res_str(r));
      continue;
    }
    if (!p.name || !p.name[0])
      failf(c, "dev %d: name is %s", d, !p.name ? "NULL" : "empty");
    if (!(p.ptrSupport & NCCL_PTR_HOST))
      failf(c, "dev %d: ptrSupport = 0x%x lacks NCCL_PTR_HOST (0x%x)", d, p.ptrSupport, NCCL_PTR_HOST);
    if (p.maxRecvs <= 1) failf(c, "dev %d: maxRecvs = %d, expected > 1", d, p.maxRecvs);
    if (p.maxComms <= 0) failf(c, "dev %d: maxComms = %d, expected > 0", d, p.maxComms);
    if (p.speed <= 0) failf(c, "dev %d: speed = %d Mbps, expected > 0", d, p.speed);
    if (p.netDeviceType != NCCL_NET_DEVICE_HOST)
      failf(c, "dev %d: netDeviceType = %d, expected NCCL_NET_DEVICE_HOST (0)", d, (int)p.netDeviceType);
    if (!(p.latency >= 0.0f) || isinf(p.latency))
      failf(c, "dev %d: latency = %g us, expected a finite value >= 0", d, (double)p.latency);
    if (p.regIsGlobal != 0 && p.regIsGlobal != 1)
      failf(c, "dev %d: regIsGlobal = %d, expected 0 or 1", d, p.regIsGlobal);
    notef(c, "dev %d: name '%s' pciPath %s speed %d Mbps latency %g us maxComms %d maxRecvs %d ptrSupport 0x%x", d,
          p.name ? p.name : "(null)", p.pciPath ? p.pciPath : "(null)", p.speed, (double)p.latency, p.maxComms,
          p.maxRecvs, p.ptrSupport);
  }
}

/* Case 2: connect before the peer calls accept: every call returns at once. */
static void case_nonblocking(struct wctx *c) {
  if (load_plugin(c)) return;
  struct pair p;
  memset(&p, 0, sizeof p);
  p.sender = (c->role == 0);
  double lim = S(NB_LIMIT_S);
  struct plan *pl = plan_new(c, "after connect", 1, g_seed ^ 2, 1, 5.0, 0);
  if (!pl) return;
  pl->size[0] = 4096;
  pl->posted[0] = 4096;
  pl->tag[0] = 1;
  if (p.sender) {
    step(c, 0, "waiting for the listen handle");
    if (ch_recv(c, p.handle, sizeof p.handle, "listen handle")) return;
    step(c, 0, "connect while the peer does not accept yet");
    double t0 = now_s();
    int up = 0;
    unsigned spins = 0;
    while (!up && now_s() - t0 < S(0.3)) {
      if (pair_poll(c, &p, lim, &up)) return;
      backoff(&spins);
    }
    if (up)
      notef(c, "connect completed before the peer called accept (call #%d; allowed: kernel backlog)", p.calls);
    else
      notef(c, "%d connect calls before the peer's accept: all returned a NULL comm, slowest %.2f ms", p.calls,
            p.max_call_s * 1e3);
    char go = 'g';
    if (ch_send(c, &go, 1, "go")) return;
    double tgo = now_s();
    if (!up && pair_finish(c, &p, 5.0, lim, 0)) return;
    double dt = now_s() - tgo;
    if (dt > S(3.0)) failf(c, "connect completed %.2f s after the peer started accepting (limit %.1f s)", dt, S(3.0));
    if (stream_send(c, p.scomm, pl)) return;
  } else {
    step(c, 0, "listen");
    if (pair_listen(c, &p, lim)) return;
    if (ch_send(c, p.handle, sizeof p.handle, "listen handle")) return;
    char go = 0;
    step(c, 0, "waiting for the go to accept");
    if (ch_recv(c, &go, 1, "go")) return;
    double tgo = now_s();
    if (pair_finish(c, &p, 5.0, lim, 0)) return;
    double dt = now_s() - tgo;
    if (dt > S(3.0)) failf(c, "accept completed %.2f s after it was first called (limit %.1f s)", dt, S(3.0));
    notef(c, "accept: %d calls, slowest %.2f ms", p.calls, p.max_call_s * 1e3);
    if (stream_recv(c, p.rcomm, pl)) return;
  }
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
  plan_free(pl);
}

/* Case 3: mixed sizes on one comm, 8 in flight. */
static void case_mixed_sizes(struct wctx *c) {
  if (load_plugin(c)) return;
  static const int fixed[] = {0, 1, 7, 4096, 65535, 65536, (1 << 20) + 3, 4 << 20, 2, 3, 8191, 131073};
  const int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
  const int nrand = 8;
  struct plan *pl = plan_new(c, "mixed sizes", nfixed + nrand, g_seed ^ 3, 8, 8.0, 0);
  if (!pl) return;
  uint64_t rs = g_seed ^ 0x333;
  for (int i = 0; i < pl->n; i++) {
    uint64_t x = rng_next(&rs);
    pl->size[i] = i < nfixed ? fixed[i] : (int)(x % (3u << 20));
    pl->posted[i] = pl->size[i] + 1 + (int)((x >> 32) % 4096);
    pl->tag[i] = 3 + i % 4;
  }
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return;
  if (c->role == 0 ? stream_send(c, p.scomm, pl) : stream_recv(c, p.rcomm, pl)) return;
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
  plan_free(pl);
}

/* Case 4: 32 receives in flight, and a 33rd refused. */
#define N32 NCCL_NET_MAX_REQUESTS
static int inflight_round(struct wctx *c, struct pair *p, int round, int try33) {
  char what[96];
  int size[N32], posted[N32], tag[N32];
  size_t off[N32 + 1], total = 0;
  for (int i = 0; i < N32; i++) {
    size[i] = i == 3 ? 0 : (int)(((unsigned)i * 40503u + 17u + (unsigned)round * 977u) % 150000u);
    posted[i] = size[i] + 64 + i;
    tag[i] = 1000 * (round + 1) + i;
    off[i] = total;
    total += ((size_t)posted[i] + CANARY_LEN + 7) & ~(size_t)7;
  }
  off[N32] = total;
  size_t cap = total + 4096 + CANARY_LEN;
  uint8_t *buf = xmalloc(c, cap);
  if (!buf) return -1;
  void *comm = p->sender ? p->scomm : p->rcomm;
  void *mh = NULL;
  ncclResult_t r = PCALL(c, regMr, comm, buf, cap, NCCL_PTR_HOST, &mh);
  if (r != ncclSuccess) {
    failf(c, "round %d: regMr(%zu bytes) returned %s", round, cap, res_str(r));
    return -1;
  }
  void *req[N32];
  const char *after = try33 ? " (after the 33rd irecv was refused)" : "";
  if (!p->sender) {
    for (int i = 0; i < N32; i++) {
      memset(buf + off[i], FILL_BYTE, (size_t)posted[i]);
      canary_fill(buf + off[i] + posted[i], (uint64_t)i);
      void *d = buf + off[i], *m = mh;
      snprintf(what, sizeof what, "round %d receive %d", round, i);
      step(c, 0, "%s: irecv", what);
      if (!(req[i] = recv_retry(c, p->rcomm, 1, &d, &posted[i], &tag[i], &m, 3.0, what))) return -1;
    }
    if (try33) {
      void *d = buf + off[N32], *m = mh, *x = NULL;
      int s = 4096, t = 0x7777;
      step(c, 0, "round %d: 33rd irecv", round);
      r = PCALL(c, irecv, p->rcomm, 1, &d, &s, &t, &m, &x);
      if (r == ncclSuccess && x != NULL)
        failf(c, "33rd irecv with %d receives outstanding returned ncclSuccess and a request: more than %d "
              "outstanding requests accepted",
              N32, N32);
      else
        notef(c, "33rd irecv with 32 outstanding returned %s with %s request", res_str(r), x ? "a" : "a NULL");
    }
    char go = 'g';
    if (ch_send(c, &go, 1, "receives posted")) return -1;
    for (int i = 0; i < N32; i++) {
      int got = SIZE_SENTINEL;
      snprintf(what, sizeof what, "round %d receive %d (size %d, tag %d)%s", round, i, size[i], tag[i], after);
      step(c, 0, "%s: test", what);
      if (wait_req(c, req[i], 1, &got, 5.0, what)) return -1;
      if (got != size[i]) {
        failf(c, "%s: completed with sizes[0] = %d, expected %d", what, got, size[i]);
        return -1;
      }
      char why[256];
      if (pattern_check(buf + off[i], (size_t)size[i], key_of(g_seed ^ 4, (uint64_t)round, (uint64_t)i), why,
                        sizeof why)) {
        failf(c, "%s: data wrong: %s", what, why);
        return -1;
      }
      if (canary_check(buf + off[i] + posted[i], (uint64_t)i, why, sizeof why)) {
        failf(c, "%s: %s", what, why);
        return -1;
      }
    }
  } else {
    for (int i = 0; i < N32; i++)
      pattern_fill(buf + off[i], (size_t)size[i], key_of(g_seed ^ 4, (uint64_t)round, (uint64_t)i));
    char go = 0;
    step(c, 0, "round %d: waiting for the receiver to post 32", round);
    if (ch_recv(c, &go, 1, "receives posted")) return -1;
    for (int i = 0; i < N32; i++) {
      snprintf(what, sizeof what, "round %d send %d (%d outstanding)", round, i, i);
      step(c, 0, "%s", what);
      if (!(req[i] = send_retry(c, p->scomm, buf + off[i], size[i], tag[i], mh, 3.0, what))) return -1;
    }
    for (int i = 0; i < N32; i++) {
      int got = SIZE_SENTINEL;
      snprintf(what, sizeof what, "round %d send %d (size %d, tag %d)%s", round, i, size[i], tag[i], after);
      step(c, 0, "%s: test", what);
      if (wait_req(c, req[i], 1, &got, 5.0, what)) return -1;
      if (got != size[i]) {
        failf(c, "%s: completed with sizes[0] = %d, expected %d", what, got, size[i]);
        return -1;
      }
    }
  }
  r = PCALL(c, deregMr, comm, mh);
  if (r != ncclSuccess) {
    failf(c, "round %d: deregMr returned %s", round, res_str(r));
    return -1;
  }
  free(buf);
  return ch_barrier(c, "round done");
}

static void case_inflight32(struct wctx *c) {
  if (load_plugin(c)) return;
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return;
  if (inflight_round(c, &p, 0, 0)) return;
  if (inflight_round(c, &p, 1, 1)) return;
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
}

/* Case 5: grouped receives matched by tag. */
/* Case 5 and 13: a pair (role 0 sends) and one registered buffer of
 * `total` bytes on this side's comm.  NULL after a failure (reported). */
static uint8_t *pair_with_buffer(struct wctx *c, struct pair *p, size_t total, void **comm, void **mh) {
  if (pair_establish(c, p, c->role == 0)) return NULL;
  *comm = p->sender ? p->scomm : p->rcomm;
  uint8_t *buf = xmalloc(c, total);
  if (!buf) return NULL;
  ncclResult_t r = PCALL(c, regMr, *comm, buf, total, NCCL_PTR_HOST, mh);
  if (r != ncclSuccess) {
    failf(c, "regMr(%zu bytes) returned %s", total, res_str(r));
    return NULL;
  }
  return buf;
}

static void case_grouped(struct wctx *c) {
  if (load_plugin(c)) return;
  int n = c->props.maxRecvs < 8 ? c->props.maxRecvs : 8;
  if (n < 2) {
    skipf(c, "maxRecvs = %d: no grouped receives to test", c->props.maxRecvs);
    return;
  }
  static const int posted_base[8] = {4096, 100, 65549, 1, 300000, 7, 2048, 1 << 20};
  static const int msg_base[8] = {4000, 100, 65536, 0, 299999, 7, 1, 1 << 20};
  size_t off[9], total = 0;
  for (int k = 0; k < 8; k++) {
    off[k] = total;
    total += ((size_t)posted_base[k] + CANARY_LEN + 7) & ~(size_t)7;
  }
  off[8] = total;
  struct pair p;
  void *mh = NULL, *comm;
  uint8_t *buf = pair_with_buffer(c, &p, total, &comm, &mh);
  if (!buf) return;
  ncclResult_t r;
  const int rounds = 5;
  for (int rd = 0; rd < rounds; rd++) {
    int nr = rd == rounds - 1 ? (n / 2 > 2 ? n / 2 : 2) : n; /* last round: fewer receives */
    int tags[8], order[8];
    for (int k = 0; k < nr; k++) {
      tags[k] = 100 * (rd + 1) + 7 * k + 3;
      order[k] = rd == 0 ? nr - 1 - k : k;
    }
    if (rd >= 2) { /* shuffled */
      uint64_t rs = g_seed ^ (0x55ull + (uint64_t)rd);
      for (int k = nr - 1; k > 0; k--) {
        int j = (int)(rng_next(&rs) % (uint64_t)(k + 1));
        int t = order[k];
        order[k] = order[j];
        order[j] = t;
      }
    }
    char what[128], ostr[64];
    size_t ol = 0;
    for (int k = 0; k < nr; k++) ol += (size_t)snprintf(ostr + ol, sizeof ostr - ol, "%s%d", k ? "," : "", tags[order[k]]);
    if (!p.sender) {
      void *d[8], *m[8];
      int s[8];
      for (int k = 0; k < nr; k++) {
        memset(buf + off[k], FILL_BYTE, (size_t)posted_base[k]);
        canary_fill(buf + off[k] + posted_base[k], (uint64_t)(rd * 8 + k));
        d[k] = buf + off[k];
        m[k] = mh;
        s[k] = posted_base[k];
      }
      snprintf(what, sizeof what, "round %d: grouped irecv n=%d", rd, nr);
      step(c, 0, "%s", what);
      void *req = recv_retry(c, p.rcomm, nr, d, s, tags, m, 3.0, what);
      if (!req) return;
      int got[8];
      snprintf(what, sizeof what, "round %d: grouped irecv n=%d (sender order of tags %s)", rd, nr, ostr);
      if (wait_req(c, req, nr, got, 5.0, what)) return;
      for (int k = 0; k < nr; k++) {
        char why[256];
        if (got[k] != msg_base[k]) {
          failf(c, "%s: sub-receive %d (tag %d, posted %d): sizes[%d] = %d, expected %d", what, k, tags[k],
                posted_base[k], k, got[k], msg_base[k]);
          return;
        }
        if (pattern_check(buf + off[k], (size_t)msg_base[k], key_of(g_seed ^ 5, (uint64_t)rd, (uint64_t)tags[k]), why,
                          sizeof why)) {
          char hint[96] = "";
          for (int j = 0; j < nr; j++) {
            char w2[8];
            size_t len = (size_t)(msg_base[k] < msg_base[j] ? msg_base[k] : msg_base[j]);
            if (j != k && len >= 8 &&
                !pattern_check(buf + off[k], 8, key_of(g_seed ^ 5, (uint64_t)rd, (uint64_t)tags[j]), w2, sizeof w2))
              snprintf(hint, sizeof hint, "; it holds the start of the message sent with tag %d", tags[j]);
          }
          failf(c, "%s: sub-receive %d (tag %d, size %d): data wrong: %s%s", what, k, tags[k], msg_base[k], why, hint);
          return;
        }
        if (canary_check(buf + off[k] + posted_base[k], (uint64_t)(rd * 8 + k), why, sizeof why)) {
          failf(c, "%s: sub-receive %d (tag %d, posted %d): %s", what, k, tags[k], posted_base[k], why);
          return;
        }
      }
    } else {
      void *req[8];
      for (int k = 0; k < nr; k++)
        pattern_fill(buf + off[k], (size_t)msg_base[k], key_of(g_seed ^ 5, (uint64_t)rd, (uint64_t)tags[k]));
      for (int j = 0; j < nr; j++) {
        int k = order[j];
        snprintf(what, sizeof what, "round %d: isend tag %d (%d of %d, order %s)", rd, tags[k], j + 1, nr, ostr);
        step(c, 0, "%s", what);
        if (!(req[j] = send_retry(c, p.scomm, buf + off[k], msg_base[k], tags[k], mh, 3.0, what))) return;
      }
      for (int j = 0; j < nr; j++) {
        int k = order[j], got = SIZE_SENTINEL;
        snprintf(what, sizeof what, "round %d: send tag %d (size %d)", rd, tags[k], msg_base[k]);
        step(c, 0, "%s: test", what);
        if (wait_req(c, req[j], 1, &got, 5.0, what)) return;
        if (got != msg_base[k]) {
          failf(c, "%s: completed with sizes[0] = %d, expected %d", what, got, msg_base[k]);
          return;
        }
      }
    }
  }
  r = PCALL(c, deregMr, comm, mh);
  if (r != ncclSuccess) failf(c, "deregMr returned %s", res_str(r));
  free(buf);
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
}

/* Case 6: 4 comm pairs, one thread per comm in each process, both directions. */
#define MC_PAIRS 4
#define MC_MSGS 200
struct mc_thread {
  struct wctx *c;
  struct pair *p;
  struct plan *pl;
  int k;
  pthread_t th;
};

static void *mc_main(void *arg) {
  struct mc_thread *t = arg;
  struct wctx *c = t->c;
  t_slot = t->k + 1;
  if (pair_finish(c, t->p, CONNECT_TIMEOUT_S, 0, t->k + 1)) return NULL;
  if (t->p->sender)
    stream_send(c, t->p->scomm, t->pl);
  else
    stream_recv(c, t->p->rcomm, t->pl);
  step(c, t->k + 1, "pair %d: stream finished", t->k);
  return NULL;
}

static void case_multi_comm(struct wctx *c) {
  if (load_plugin(c)) return;
  struct pair p[MC_PAIRS];
  struct mc_thread t[MC_PAIRS];
  static char labels[MC_PAIRS][32];
  memset(p, 0, sizeof p);
  for (int k = 0; k < MC_PAIRS; k++) {
    p[k].sender = (k % 2) == c->role; /* pairs 0,2: role 0 sends; 1,3: role 1 sends */
    snprintf(labels[k], sizeof labels[k], "pair %d (%s)", k, p[k].sender ? "send" : "recv");
    t[k].c = c;
    t[k].p = &p[k];
    t[k].k = k;
    t[k].pl = plan_new(c, labels[k], MC_MSGS, g_seed ^ (0x600ull + (uint64_t)k), 4, 8.0, k + 1);
    if (!t[k].pl) return;
    uint64_t rs = g_seed ^ (0x6000ull + (uint64_t)k);
    for (int i = 0; i < MC_MSGS; i++) {
      uint64_t x = rng_next(&rs);
      unsigned pick = (unsigned)(x % 100);
      uint64_t y = x >> 8;
      int sz = pick < 50 ? (int)(y % 4097) : pick < 85 ? (int)(y % 131073) : (int)(y % (1u << 20)) + 1;
      t[k].pl->size[i] = sz;
      t[k].pl->posted[i] = sz + (int)((x >> 40) % 512);
      t[k].pl->tag[i] = 40 + k;
    }
  }
  step(c, 0, "listen");
  for (int k = 0; k < MC_PAIRS; k++)
    if (!p[k].sender && pair_listen(c, &p[k], 0)) return;
  for (int k = 0; k < MC_PAIRS; k++)
    if (!p[k].sender && ch_send(c, p[k].handle, sizeof p[k].handle, "listen handles")) return;
  for (int k = 0; k < MC_PAIRS; k++)
    if (p[k].sender && ch_recv(c, p[k].handle, sizeof p[k].handle, "listen handles")) return;
  step(c, 0, "threads running");
  for (int k = 0; k < MC_PAIRS; k++) {
    int e = pthread_create(&t[k].th, NULL, mc_main, &t[k]);
    if (e) {
      failf(c, "pthread_create: %s", strerror(e));
      return;
    }
  }
  for (int k = 0; k < MC_PAIRS; k++) pthread_join(t[k].th, NULL);
  if (failed(c)) return;
  if (ch_barrier(c, "done")) return;
  step(c, 0, "closing");
  for (int k = 0; k < MC_PAIRS; k++) {
    pair_close(c, &p[k]);
    plan_free(t[k].pl);
  }
}

/* Case 7: message larger than the posted receive. */
struct outcome {
  int stage;        /* 0 posted and resolved by test, 1 refused at post, 2 never posted (NULL), 3 still pending */
  int rc;           /* ncclResult_t of the failing call, 0 otherwise */
  int size;         /* sizes[0] when done */
};

static const char *outcome_str(const struct outcome *o, char *buf, size_t len) {
  switch (o->stage) {
  case 0:
    if (o->rc) snprintf(buf, len, "test returned %s", res_str((ncclResult_t)o->rc));
    else snprintf(buf, len, "completed, sizes[0] = %d", o->size);
    break;
  case 1: snprintf(buf, len, "post returned %s", res_str((ncclResult_t)o->rc)); break;
  case 2: snprintf(buf, len, "post kept returning a NULL request"); break;
  default: snprintf(buf, len, "request still pending after the wait"); break;
  }
  return buf;
}

static void case_oversize(struct wctx *c) {
  if (load_plugin(c)) return;
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return;
  const int posted = 1000, msg = 5000, tag = 9;
  uint8_t *buf = xmalloc(c, (size_t)msg + CANARY_LEN);
  if (!buf) return;
  void *comm = p.sender ? p.scomm : p.rcomm;
  void *mh = NULL;
  ncclResult_t r = PCALL(c, regMr, comm, buf, (size_t)msg + CANARY_LEN, NCCL_PTR_HOST, &mh);
  if (r != ncclSuccess) {
    failf(c, "regMr returned %s", res_str(r));
    return;
  }
  if (p.sender) {
    pattern_fill(buf, (size_t)msg, g_seed ^ 7);
  } else {
    memset(buf, FILL_BYTE, (size_t)posted);
    canary_fill(buf + posted, 7);
  }
  size_t mark = warn_mark();
  struct outcome mine = {3, 0, SIZE_SENTINEL};
  void *req = NULL;
  double deadline = now_s() + S(3.0);
  unsigned spins = 0;
  step(c, 0, "%s the oversize message", p.sender ? "isend" : "irecv");
  for (;;) {
    if (p.sender) {
      r = PCALL(c, isend, p.scomm, buf, msg, tag, mh, &req);
    } else {
      void *d = buf, *m = mh;
      int s = posted, t = tag;
      r = PCALL(c, irecv, p.rcomm, 1, &d, &s, &t, &m, &req);
    }
    if (r != ncclSuccess) {
      mine.stage = 1;
      mine.rc = r;
      break;
    }
    if (req) break;
    if (now_s() > deadline) {
      mine.stage = 2;
      break;
    }
    backoff(&spins);
  }
  if (req) {
    step(c, 0, "test the oversize %s", p.sender ? "send" : "receive");
    for (;;) {
      int done = 0, sz[SIZES_SLOTS];
      for (int k = 0; k < SIZES_SLOTS; k++) sz[k] = SIZE_SENTINEL;
      r = PCALL(c, test, req, &done, sz);
      if (r != ncclSuccess) {
        mine.stage = 0;
        mine.rc = r;
        req = NULL;
        break;
      }
      if (done) {
        mine.stage = 0;
        mine.size = sz[0];
        req = NULL;
        break;
      }
      if (now_s() > deadline) break; /* stays stage 3: pending */
      backoff(&spins);
    }
  }
  struct outcome theirs;
  if (ch_send(c, &mine, sizeof mine, "oversize outcome") || ch_recv(c, &theirs, sizeof theirs, "oversize outcome"))
    return;
  const struct outcome *snd = p.sender ? &mine : &theirs, *rcv = p.sender ? &theirs : &mine;
  char s1[96], s2[96];
  outcome_str(snd, s1, sizeof s1);
  outcome_str(rcv, s2, sizeof s2);
  int my_inval = mine.rc == ncclInvalidUsage;
  if (!p.sender) {
    notef(c, "sender: %s; receiver: %s", s1, s2);
    if (snd->rc != ncclInvalidUsage && rcv->rc != ncclInvalidUsage)
      failf(c, "a %d-byte message into a %d-byte receive: neither side reported ncclInvalidUsage (sender: %s; "
            "receiver: %s)",
            msg, posted, s1, s2);
    if (rcv->stage == 0 && rcv->rc == ncclSuccess)
      failf(c, "the %d-byte receive completed successfully (sizes[0] = %d) for a %d-byte message: silent "
            "truncation or overrun",
            posted, rcv->size, msg);
    char why[256];
    if (canary_check(buf + posted, 7, why, sizeof why)) failf(c, "oversize receive: %s", why);
  }
  if (mine.rc != ncclSuccess && mine.rc != ncclInvalidUsage && mine.rc != ncclRemoteError)
    failf(c, "%s side: %s (expected ncclInvalidUsage, or ncclRemoteError when the peer detected it)",
          p.sender ? "send" : "receive", p.sender ? s1 : s2);
  if (p.sender && mine.stage == 0 && mine.rc == ncclSuccess && mine.size != msg)
    failf(c, "the send completed with sizes[0] = %d, expected %d", mine.size, msg);
  if (my_inval) {
    char w[4096];
    warn_since(mark, w, sizeof w);
    size_t wl = strlen(w);
    while (wl && w[wl - 1] == '\n') w[--wl] = 0;
    if (!w[0])
      failf(c, "%s side returned ncclInvalidUsage but logged no WARN", p.sender ? "send" : "receive");
    else if (!strstr(w, "5000") || !strstr(w, "1000") || (!strstr(w, "127.0.0.1") && !strstr(w, "::1")))
      failf(c, "the WARN must name the peer (127.0.0.1...) and both sizes (5000, 1000); it was: %s", w);
  }
  if (ch_barrier(c, "evaluated")) return;
  step(c, 0, "closing after the oversize message");
  if (!req) {
    r = PCALL(c, deregMr, comm, mh);
    if (r != ncclSuccess) notef(c, "deregMr after the failed transfer returned %s", res_str(r));
  }
  double t0 = now_s();
  /* Close even with a request pending; the outcome of close is not judged
   * here beyond "returns promptly" (PCALL checks that). */
  if (p.scomm) (void)PCALL(c, closeSend, p.scomm);
  if (p.rcomm) (void)PCALL(c, closeRecv, p.rcomm);
  if (p.lcomm) (void)PCALL(c, closeListen, p.lcomm);
  if (g_verbose) notef(c, "closes took %.1f ms", (now_s() - t0) * 1e3);
  free(buf);
}

/* Case 8: close with requests in flight, each side first in turn. */
#define CI_N 16
#define CI_SIZE (4 << 20)
static int close_inflight_round(struct wctx *c, int round) {
  /* round 0: the sender closes first; round 1: the receiver closes first. */
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return -1;
  size_t len = (size_t)CI_N * CI_SIZE;
  uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    failf(c, "mmap %zu: %s", len, strerror(errno));
    return -1;
  }
  void *comm = p.sender ? p.scomm : p.rcomm;
  void *mh = NULL, *req[CI_N];
  ncclResult_t r = PCALL(c, regMr, comm, buf, len, NCCL_PTR_HOST, &mh);
  if (r != ncclSuccess) {
    failf(c, "regMr returned %s", res_str(r));
    return -1;
  }
  char what[96], ok = 'k';
  int closer = round == 0 ? 1 : 0; /* p.sender value of the side that closes first */
  if (!p.sender) {
    for (int i = 0; i < CI_N; i++) {
      void *d = buf + (size_t)i * CI_SIZE, *m = mh;
      int s = CI_SIZE, t = 50 + i;
      snprintf(what, sizeof what, "round %d irecv %d", round, i);
      step(c, 0, "%s", what);
      if (!(req[i] = recv_retry(c, p.rcomm, 1, &d, &s, &t, &m, 3.0, what))) return -1;
    }
    if (ch_send(c, &ok, 1, "receives posted")) return -1;
  } else {
    memset(buf, 0x42, len);
    if (ch_recv(c, &ok, 1, "receives posted")) return -1;
    for (int i = 0; i < CI_N; i++) {
      snprintf(what, sizeof what, "round %d isend %d", round, i);
      step(c, 0, "%s", what);
      if (!(req[i] = send_retry(c, p.scomm, buf + (size_t)i * CI_SIZE, CI_SIZE, 50 + i, mh, 3.0, what))) return -1;
    }
    if (ch_send(c, &ok, 1, "sends posted")) return -1;
  }
  if (!p.sender && ch_recv(c, &ok, 1, "sends posted")) return -1;
  /* Both sides have everything posted now. */
  if (p.sender != closer) {
    if (ch_recv(c, &ok, 1, "peer closed")) return -1;
    /* Poke the orphaned requests for a moment: any answer is fine but a crash. */
    step(c, 0, "round %d: testing requests after the peer closed", round);
    int live[CI_N], ndone = 0, nerr = 0;
    for (int i = 0; i < CI_N; i++) live[i] = 1;
    double end = now_s() + 0.2;
    while (now_s() < end) {
      for (int i = 0; i < CI_N; i++) {
        if (!live[i]) continue;
        int done = 0, sz[SIZES_SLOTS];
        r = PCALL(c, test, req[i], &done, sz);
        if (r != ncclSuccess) {
          live[i] = 0;
          nerr++;
        } else if (done) {
          live[i] = 0;
          ndone++;
        }
      }
    }
    notef(c, "round %d: after the peer closed, %d of my requests completed, %d failed, %d still pending", round,
          ndone, nerr, CI_N - ndone - nerr);
  }
  step(c, 0, "round %d: closing with requests in flight", round);
  double t0 = now_s();
  if (p.scomm) {
    r = PCALL(c, closeSend, p.scomm);
    if (r != ncclSuccess) notef(c, "round %d: closeSend with requests in flight returned %s", round, res_str(r));
  }
  if (p.rcomm) {
    r = PCALL(c, closeRecv, p.rcomm);
    if (r != ncclSuccess) notef(c, "round %d: closeRecv with requests in flight returned %s", round, res_str(r));
  }
  if (p.lcomm) {
    r = PCALL(c, closeListen, p.lcomm);
    if (r != ncclSuccess) failf(c, "round %d: closeListen returned %s", round, res_str(r));
  }
  double dt = now_s() - t0;
  if (dt > S(1.0)) failf(c, "round %d: closing took %.2f s (limit %.1f s)", round, dt, S(1.0));
  /* The plugin must not touch the buffers after close: unmap them, so a late
   * access is a SIGSEGV the harness reports. */
  munmap(buf, len);
  if (p.sender == closer && ch_send(c, &ok, 1, "peer closed")) return -1;
  return ch_barrier(c, "round done");
}

static void case_close_inflight(struct wctx *c) {
  if (load_plugin(c)) return;
  if (close_inflight_round(c, 0)) return;
  if (close_inflight_round(c, 1)) return;
  step(c, 0, "exiting (atexit handlers, plugin destructors)");
}

/* Case 9: stray clients on the listening port. */
struct lsock {
  struct sockaddr_storage addr;
  socklen_t len;
  unsigned long inode;
};

static int own_socket_inodes(unsigned long *ino, int max) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    if (e->d_name[0] == '.') continue;
    char link[64];
    ssize_t l = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
    if (l <= 0) continue;
    link[l] = 0;
    unsigned long v;
    if (sscanf(link, "socket:[%lu]", &v) == 1) ino[n++] = v;
  }
  closedir(d);
  return n;
}

/* LISTEN TCP sockets this process owns, from /proc/net/tcp{,6}. */
static int listen_sockets(struct lsock *out, int max) {
  unsigned long ino[1024];
  int nino = own_socket_inodes(ino, 1024);
  if (nino < 0) return -1;
  int n = 0;
  for (int v6 = 0; v6 < 2; v6++) {
    FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
    if (!f) continue;
    char line[512];
    if (!fgets(line, sizeof line, f)) { /* header */
      fclose(f);
      continue;
    }
    while (fgets(line, sizeof line, f) && n < max) {
      char laddr[64];
      unsigned lport, st;
      unsigned long inode;
      if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", laddr, &lport,
                 &st, &inode) != 4)
        continue;
      if (st != 0x0A) continue; /* TCP_LISTEN */
      int mine = 0;
      for (int i = 0; i < nino; i++) mine |= ino[i] == inode;
      if (!mine) continue;
      struct lsock *s = &out[n];
      memset(s, 0, sizeof *s);
      s->inode = inode;
      if (!v6) {
        struct sockaddr_in *a = (struct sockaddr_in *)&s->addr;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)lport);
        uint32_t raw = (uint32_t)strtoul(laddr, NULL, 16);
        memcpy(&a->sin_addr.s_addr, &raw, 4); /* the kernel prints the in-memory word */
        if (a->sin_addr.s_addr == htonl(INADDR_ANY)) a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s->len = sizeof *a;
      } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&s->addr;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)lport);
        if (strlen(laddr) != 32) continue;
        for (int w = 0; w < 4; w++) {
          char part[9];
          memcpy(part, laddr + 8 * w, 8);
          part[8] = 0;
          uint32_t raw = (uint32_t)strtoul(part, NULL, 16);
          memcpy(&a->sin6_addr.s6_addr[4 * w], &raw, 4);
        }
        if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr)) a->sin6_addr = in6addr_loopback;
        s->len = sizeof *a;
      }
      n++;
    }
    fclose(f);
  }
  return n;
}

static int tcp_connect(struct wctx *c, const struct lsock *s) {
  int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    failf(c, "socket: %s", strerror(errno));
    return -1;
  }
  if (connect(fd, (const struct sockaddr *)&s->addr, s->len) != 0 && errno != EINPROGRESS) {
    failf(c, "stray connect: %s", strerror(errno));
    close(fd);
    return -1;
  }
  struct pollfd pfd = {fd, POLLOUT, 0};
  int err = 0;
  socklen_t el = sizeof err;
  if (poll(&pfd, 1, 2000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
    failf(c, "stray connect did not complete: %s", err ? strerror(err) : "timeout");
    close(fd);
    return -1;
  }
  return fd;
}

static void case_stray_clients(struct wctx *c) {
  if (load_plugin(c)) return;
  const double lim = S(NB_LIMIT_S);
  struct plan *pl = plan_new(c, "after strays", 20, g_seed ^ 9, 4, 5.0, 0);
  if (!pl) return;
  for (int i = 0; i < pl->n; i++) {
    pl->size[i] = (int)((unsigned)(i * 7919 * 13) % 300000u);
    pl->posted[i] = pl->size[i] + 17;
    pl->tag[i] = 77;
  }
  struct pair p;
  memset(&p, 0, sizeof p);
  p.sender = (c->role == 0);
  if (p.sender) {
    step(c, 0, "waiting for the listen handle");
    if (ch_recv(c, p.handle, sizeof p.handle, "listen handle")) return;
    double t0 = now_s();
    if (pair_finish(c, &p, 5.0, 0, 0)) return;
    double dt = now_s() - t0;
    if (dt > S(3.0)) failf(c, "connect took %.2f s with stray clients on the listener (limit %.1f s)", dt, S(3.0));
    if (stream_send(c, p.scomm, pl)) return;
    if (ch_barrier(c, "done")) return;
    pair_close(c, &p);
    plan_free(pl);
    return;
  }
  struct lsock before[16], after[16], fresh[16];
  int nb = listen_sockets(before, 16);
  step(c, 0, "listen");
  if (pair_listen(c, &p, 0)) return;
  int na = listen_sockets(after, 16), nf = 0;
  if (nb < 0 || na < 0) {
    failf(c, "cannot read /proc/self/fd");
    return;
  }
  for (int i = 0; i < na; i++) {
    int old = 0;
    for (int j = 0; j < nb; j++) old |= before[j].inode == after[i].inode;
    if (!old) fresh[nf++] = after[i];
  }
  if (nf == 0) {
    failf(c, "no TCP LISTEN socket of this process appeared in /proc/net/tcp{,6} after listen");
    return;
  }
  /* Stray clients on every new listening socket. */
  int keep[16 * 3], nkeep = 0, silent[16], nsilent = 0;
  unsigned char junk[4096];
  uint64_t rs = g_seed ^ 0x999;
  for (size_t i = 0; i < sizeof junk; i += 8) {
    uint64_t v = rng_next(&rs);
    memcpy(junk + i, &v, 8);
  }
  step(c, 0, "opening stray clients on %d listening socket(s)", nf);
  for (int i = 0; i < nf; i++) {
    int fd;
    if ((fd = tcp_connect(c, &fresh[i])) < 0) return; /* silent, kept open */
    keep[nkeep++] = fd;
    silent[nsilent++] = fd;
    if ((fd = tcp_connect(c, &fresh[i])) < 0) return; /* junk then close */
    (void)send(fd, junk, 64, MSG_NOSIGNAL);
    close(fd);
    if ((fd = tcp_connect(c, &fresh[i])) < 0) return; /* 3 bytes, kept open */
    (void)send(fd, "abc", 3, MSG_NOSIGNAL);
    keep[nkeep++] = fd;
    if ((fd = tcp_connect(c, &fresh[i])) < 0) return; /* connect, close at once */
    close(fd);
    if ((fd = tcp_connect(c, &fresh[i])) < 0) return; /* 4 KiB of junk, kept open */
    (void)send(fd, junk, sizeof junk, MSG_NOSIGNAL);
    keep[nkeep++] = fd;
  }
  /* Only strays so far: accept must keep answering at once with no comm. */
  step(c, 0, "accept with only stray clients connected");
  double t0 = now_s();
  unsigned spins = 0;
  while (now_s() - t0 < S(0.3)) {
    int up = 0;
    if (pair_poll(c, &p, lim, &up)) return;
    if (up) {
      failf(c, "accept returned a comm although only stray clients (silent, junk, 3 bytes) had connected");
      return;
    }
    backoff(&spins);
  }
  notef(c, "%d accept calls with only strays: NULL comm each time, slowest %.2f ms", p.calls, p.max_call_s * 1e3);
  if (ch_send(c, p.handle, sizeof p.handle, "listen handle")) return;
  t0 = now_s();
  if (pair_finish(c, &p, 5.0, lim, 0)) return;
  double dt = now_s() - t0;
  if (dt > S(3.0)) failf(c, "accept took %.2f s with stray clients present (limit %.1f s)", dt, S(3.0));
  if (stream_recv(c, p.rcomm, pl)) return;
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
  /* After closeListen the plugin must hold none of the strays: each sees EOF
   * or a reset (a stray still open means a leaked socket). */
  step(c, 0, "checking the strays were dropped");
  for (int i = 0; i < nsilent; i++) {
    struct pollfd pfd = {silent[i], POLLIN, 0};
    int pr = poll(&pfd, 1, (int)(S(1.0) * 1000));
    char b;
    ssize_t n = pr == 1 ? recv(silent[i], &b, 1, MSG_DONTWAIT) : 1;
    if (pr != 1 || n > 0)
      failf(c, "the silent stray connection is still open %.1f s after closeListen (%s): the plugin leaked it",
            S(1.0), pr != 1 ? "no EOF" : "it even received data");
  }
  for (int i = 0; i < nkeep; i++) close(keep[i]);
  plan_free(pl);
}

/* Case 10: after close + dlclose no plugin thread is left. */
static void *noop_thread(void *arg) { return arg; }

static void case_unload(struct wctx *c) {
  /* One thread created and joined first: a runtime that starts a helper
   * thread lazily on the first pthread_create (ThreadSanitizer does) then
   * has it in the baseline.  Without such a runtime the count is back to 1. */
  pthread_t th;
  if (pthread_create(&th, NULL, noop_thread, NULL) == 0) pthread_join(th, NULL);
  int base = count_tasks();
  if (base < 1) {
    failf(c, "cannot read /proc/self/task");
    return;
  }
  if (load_plugin(c)) return;
  struct plan *pl = plan_new(c, "before unload", 8, g_seed ^ 10, 4, 5.0, 0);
  if (!pl) return;
  for (int i = 0; i < pl->n; i++) {
    pl->size[i] = 1000 * i * i + i;
    pl->posted[i] = pl->size[i];
    pl->tag[i] = 5;
  }
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return;
  if (c->role == 0 ? stream_send(c, p.scomm, pl) : stream_recv(c, p.rcomm, pl)) return;
  plan_free(pl);
  if (ch_barrier(c, "streamed")) return;
  int live = count_tasks();
  if (pair_close(c, &p)) return;
  if (ch_barrier(c, "closed")) return;
  step(c, 0, "dlclose");
  if (dlclose(c->dl) != 0) {
    failf(c, "dlclose: %s", dlerror());
    return;
  }
  c->dl = NULL;
  c->net = NULL;
  step(c, 0, "after dlclose, counting threads (a crash now means a plugin thread outlived dlclose)");
  double t0 = now_s();
  int n = count_tasks();
  while (n != base && now_s() - t0 < S(1.0)) {
    sleep_s(0.01);
    n = count_tasks();
  }
  if (n != base) {
    char names[1024];
    task_names(names, sizeof names);
    failf(c, "%d threads in /proc/self/task 1 s after closing every comm and dlclose, %d before dlopen (%d while "
          "connected): %s",
          n, base, live, names);
  } else {
    notef(c, "threads: %d before dlopen, %d while connected, %d after dlclose (%.0f ms after)", base, live, n,
          (now_s() - t0) * 1e3);
  }
  void *still = dlopen(g_plugin_path, RTLD_NOW | RTLD_NOLOAD);
  if (still) {
    notef(c, "the library stayed mapped after dlclose (RTLD_NODELETE or a unique symbol)");
    dlclose(still);
  }
}

/* Case 11: zero-byte messages. */
static void case_zero_byte(struct wctx *c) {
  if (load_plugin(c)) return;
  static const int sizes[] = {0, 0, 5, 0, 0, 1, 0};
  static const int posted[] = {0, 100, 5, 4096, 0, 1, 65536};
  struct plan *pl = plan_new(c, "zero-byte", 7, g_seed ^ 11, 4, 5.0, 0);
  if (!pl) return;
  for (int i = 0; i < pl->n; i++) {
    pl->size[i] = sizes[i];
    pl->posted[i] = posted[i];
    pl->tag[i] = 11;
  }
  pl->check_tail = 1; /* a zero-byte message writes nothing */
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return;
  if (c->role == 0 ? stream_send(c, p.scomm, pl) : stream_recv(c, p.rcomm, pl)) return;
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
  plan_free(pl);
}

/* Case 12: iflush on host memory has nothing to do. */
static void case_flush(struct wctx *c) {
  if (load_plugin(c)) return;
  struct pair p;
  if (pair_establish(c, &p, c->role == 0)) return;
  const int n = 2, size[2] = {4096, 100};
  int posted[2] = {8192, 100}, tags[2] = {21, 22};
  uint8_t *buf = xmalloc(c, 8192 + 100);
  if (!buf) return;
  void *comm = p.sender ? p.scomm : p.rcomm, *mh = NULL;
  ncclResult_t r = PCALL(c, regMr, comm, buf, 8192 + 100, NCCL_PTR_HOST, &mh);
  if (r != ncclSuccess) {
    failf(c, "regMr returned %s", res_str(r));
    return;
  }
  void *d[2] = {buf, buf + 8192}, *m[2] = {mh, mh};
  step(c, 0, "flush case: %s", p.sender ? "sending 2 messages" : "grouped receive of 2");
  if (p.sender) {
    pattern_fill(d[0], (size_t)size[0], g_seed ^ 12);
    pattern_fill(d[1], (size_t)size[1], g_seed ^ 13);
    for (int k = 0; k < n; k++) {
      void *req = send_retry(c, p.scomm, d[k], size[k], tags[k], mh, 3.0, "flush case send");
      int got;
      if (!req || wait_req(c, req, 1, &got, 5.0, "flush case send")) return;
    }
  } else {
    void *req = recv_retry(c, p.rcomm, n, d, posted, tags, m, 3.0, "flush case");
    int got[2];
    if (!req || wait_req(c, req, n, got, 5.0, "flush case grouped receive")) return;
    char why[256];
    for (int k = 0; k < n; k++) {
      if (got[k] != size[k]) failf(c, "receive %d: sizes[%d] = %d, expected %d", k, k, got[k], size[k]);
      if (pattern_check(d[k], (size_t)size[k], g_seed ^ (uint64_t)(12 + k), why, sizeof why))
        failf(c, "receive %d: data wrong: %s", k, why);
    }
    for (int nn = 1; nn <= n; nn++) {
      void *fr = (void *)0x1;
      step(c, 0, "iflush(n = %d) after the receive completed", nn);
      r = PCALL(c, iflush, p.rcomm, nn, d, got, m, &fr);
      if (r != ncclSuccess) {
        failf(c, "iflush(n = %d) on host memory returned %s, expected ncclSuccess", nn, res_str(r));
      } else if (fr != NULL) {
        failf(c, "iflush(n = %d) on host memory returned a request %p, expected NULL (nothing to flush)", nn, fr);
        if (fr != (void *)0x1) {
          int g2[2];
          step(c, 0, "testing the request iflush(n = %d) returned", nn);
          wait_req(c, fr, nn, g2, 5.0, "the iflush request");
        }
      }
    }
  }
  r = PCALL(c, deregMr, comm, mh);
  if (r != ncclSuccess) failf(c, "deregMr returned %s", res_str(r));
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
  free(buf);
}

/* Case 13: small sends go before their receive is posted (COLLX_EAGER_SIZE)
 * and land where they belong once it is: several into one grouped receive
 * in shuffled tag order, one large entry of that group sent only after the
 * receive is posted (it needs the CTS), then single receives posted after
 * every send returned. */
#define EARLY_SINGLES 3
static void case_early(struct wctx *c) {
  if (load_plugin(c)) return;
  const char *es = getenv("COLLX_EAGER_SIZE");
  if (es && atoi(es) < 4096) {
    skipf(c, "COLLX_EAGER_SIZE=%s: small sends wait for their receive", es);
    return;
  }
  int n = c->props.maxRecvs < 4 ? c->props.maxRecvs : 4;
  static const int gsize[4] = {100, 1, 0, 200000}; /* the last one is large when n = 4 */
  static const int ssize[EARLY_SINGLES] = {8, 4096, 1000};
  int nmsg = n + EARLY_SINGLES, size[4 + EARLY_SINGLES], tag[4 + EARLY_SINGLES], cap[4 + EARLY_SINGLES];
  size_t off[4 + EARLY_SINGLES + 1], total = 0;
  for (int k = 0; k < nmsg; k++) {
    size[k] = k < n ? (n == 4 || k < n - 1 ? gsize[k] : 300) : ssize[k - n];
    if (n == 1 && k == 0) size[k] = 100;
    tag[k] = k < n ? 40 + k : 90; /* the singles share one tag */
    cap[k] = size[k] + 64;
    off[k] = total;
    total += ((size_t)cap[k] + CANARY_LEN + 7) & ~(size_t)7;
  }
  off[nmsg] = total;
  int large = n == 4 ? 3 : -1;
  struct pair p;
  void *mh = NULL, *comm;
  uint8_t *buf = pair_with_buffer(c, &p, total, &comm, &mh);
  if (!buf) return;
  ncclResult_t r;
  char what[128];
  int flag = 0;
  if (p.sender) {
    void *req[4 + EARLY_SINGLES];
    int order[4] = {2, 0, 3, 1};
    for (int k = 0; k < nmsg; k++) pattern_fill(buf + off[k], (size_t)size[k], key_of(g_seed ^ 13, (uint64_t)k, 0));
    /* Group entries first (shuffled), all but the large one, before any
     * receive is posted; the large one once the receiver says it posted;
     * the singles then, before their receives. */
    for (int j = 0, phase = 0; phase < 3; phase++) {
      for (int k = 0; k < nmsg; k++) {
        int m = k < n ? order[k] % n : k;
        if (k < n && n < 4) m = k;
        int in_phase = phase == 0 ? (m < n && m != large) : phase == 1 ? m == large : m >= n;
        if (!in_phase) continue;
        snprintf(what, sizeof what, "isend %d (tag %d, %d bytes)", m, tag[m], size[m]);
        step(c, 0, "%s", what);
        if (phase == 1) {
          req[j] = send_retry(c, p.scomm, buf + off[m], size[m], tag[m], mh, 3.0, what);
        } else {
          double deadline = now_s() + S(1.0);
          unsigned spins = 0;
          req[j] = NULL;
          while ((r = PCALL(c, isend, p.scomm, buf + off[m], size[m], tag[m], mh, &req[j])) == ncclSuccess &&
                 !req[j] && now_s() < deadline)
            backoff(&spins);
          if (r != ncclSuccess) {
            failf(c, "%s returned %s", what, res_str(r));
            return;
          }
          if (!req[j])
            failf(c, "%s: no request after %.1f s although no receive is posted yet: a small send must go at once",
                  what, S(1.0));
        }
        if (!req[j]) return;
        j++;
      }
      if (phase == 0 && (ch_send(c, &flag, sizeof flag, "group sent") || ch_recv(c, &flag, sizeof flag, "group posted")))
        return;
    }
    if (ch_send(c, &flag, sizeof flag, "all sent")) return;
    for (int j = 0; j < nmsg; j++) {
      int got = SIZE_SENTINEL;
      snprintf(what, sizeof what, "send %d of %d", j + 1, nmsg);
      if (wait_req(c, req[j], 1, &got, 5.0, what)) return;
    }
  } else {
    for (int k = 0; k < nmsg; k++) {
      memset(buf + off[k], FILL_BYTE, (size_t)cap[k]);
      canary_fill(buf + off[k] + cap[k], (uint64_t)k);
    }
    void *d[4], *m[4] = {mh, mh, mh, mh};
    int got[4 + EARLY_SINGLES];
    for (int k = 0; k < n; k++) d[k] = buf + off[k];
    if (ch_recv(c, &flag, sizeof flag, "group sent")) return;
    snprintf(what, sizeof what, "grouped irecv n=%d after its small sends returned", n);
    step(c, 0, "%s", what);
    void *req = recv_retry(c, p.rcomm, n, d, cap, tag, m, 3.0, what);
    if (!req || ch_send(c, &flag, sizeof flag, "group posted")) return;
    if (wait_req(c, req, n, got, 5.0, what)) return;
    if (ch_recv(c, &flag, sizeof flag, "all sent")) return;
    for (int k = n; k < nmsg; k++) {
      void *dk = buf + off[k];
      snprintf(what, sizeof what, "irecv %d after every send returned", k - n);
      step(c, 0, "%s", what);
      void *rk = recv_retry(c, p.rcomm, 1, &dk, &cap[k], &tag[k], m, 3.0, what);
      if (!rk || wait_req(c, rk, 1, &got[k], 5.0, what)) return;
    }
    for (int k = 0; k < nmsg; k++) {
      char why[256];
      int beyond = 0; /* a byte after the message, inside its buffer, was written */
      for (int b = size[k]; b < cap[k]; b++) beyond |= buf[off[k] + (size_t)b] != FILL_BYTE;
      if (got[k] != size[k])
        failf(c, "message %d (tag %d): sizes = %d, expected %d", k, tag[k], got[k], size[k]);
      else if (pattern_check(buf + off[k], (size_t)size[k], key_of(g_seed ^ 13, (uint64_t)k, 0), why, sizeof why))
        failf(c, "message %d (tag %d, %d bytes): data wrong: %s", k, tag[k], size[k], why);
      else if (canary_check(buf + off[k] + cap[k], (uint64_t)k, why, sizeof why))
        failf(c, "message %d (tag %d, posted %d): %s", k, tag[k], cap[k], why);
      else if (beyond)
        failf(c, "message %d (tag %d, %d bytes): bytes after it in its %d-byte buffer were written", k, tag[k],
              size[k], cap[k]);
    }
  }
  r = PCALL(c, deregMr, comm, mh);
  if (r != ncclSuccess) failf(c, "deregMr returned %s", res_str(r));
  free(buf);
  if (ch_barrier(c, "done")) return;
  pair_close(c, &p);
}

/* Case 14: a sender that closes right after its small sends completed
 * loses nothing: the receiver, posting only then, gets every message, and
 * a receive posted after the last one fails promptly instead of waiting. */
#define CLOSE_MSGS 8
static void case_close_after_send(struct wctx *c) {
  if (load_plugin(c)) return;
  const char *es = getenv("COLLX_EAGER_SIZE");
  if (es && atoi(es) < 4096) {
    skipf(c, "COLLX_EAGER_SIZE=%s: small sends wait for their receive", es);
    return;
  }
  const int cap = 4096;
  struct pair p;
  void *mh = NULL, *comm;
  uint8_t *buf = pair_with_buffer(c, &p, (size_t)cap * (CLOSE_MSGS + 1), &comm, &mh);
  if (!buf) return;
  char what[128];
  int flag = 0;
  if (p.sender) {
    void *req[CLOSE_MSGS];
    for (int k = 0; k < CLOSE_MSGS; k++) {
      int size = 1 + 500 * k;
      pattern_fill(buf + (size_t)k * cap, (size_t)size, key_of(g_seed ^ 14, (uint64_t)k, 0));
      snprintf(what, sizeof what, "isend %d (%d bytes) before any receive", k, size);
      if (!(req[k] = send_retry(c, p.scomm, buf + (size_t)k * cap, size, 5, mh, 1.0, what))) return;
    }
    for (int k = 0; k < CLOSE_MSGS; k++) {
      int got = SIZE_SENTINEL;
      snprintf(what, sizeof what, "send %d", k);
      if (wait_req(c, req[k], 1, &got, 5.0, what)) return;
    }
    step(c, 0, "closeSend with every send complete, nothing received yet");
    PCALL(c, deregMr, comm, mh);
    pair_close(c, &p);
    if (ch_send(c, &flag, sizeof flag, "closed")) return;
  } else {
    if (ch_recv(c, &flag, sizeof flag, "closed")) return;
    for (int k = 0; k <= CLOSE_MSGS; k++) {
      void *d = buf + (size_t)k * cap, *m = mh, *req = NULL;
      int sz = cap, tag = 5, got = SIZE_SENTINEL;
      snprintf(what, sizeof what, "irecv %d after the sender closed", k);
      step(c, 0, "%s", what);
      ncclResult_t r = PCALL(c, irecv, p.rcomm, 1, &d, &sz, &tag, &m, &req);
      if (k < CLOSE_MSGS) {
        if (r != ncclSuccess || !req) {
          failf(c, "%s: irecv returned %s%s: what was sent before the close is lost", what, res_str(r),
                req ? "" : " (no request)");
          return;
        }
        if (wait_req(c, req, 1, &got, 5.0, what)) return;
        char why[256];
        int size = 1 + 500 * k;
        if (got != size)
          failf(c, "%s: sizes = %d, expected %d", what, got, size);
        else if (pattern_check(buf + (size_t)k * cap, (size_t)size, key_of(g_seed ^ 14, (uint64_t)k, 0), why,
                               sizeof why))
          failf(c, "%s: data wrong: %s", what, why);
        continue;
      }
      /* Nothing more will come: the receive must fail, within 2 s. */
      double t0 = now_s(), end = t0 + S(2.0);
      int done = 0;
      unsigned spins = 0;
      while (r == ncclSuccess && req && !done && now_s() < end) {
        r = PCALL(c, test, req, &done, &got);
        backoff(&spins);
      }
      if (r == ncclSuccess && (done || !req))
        failf(c, "%s: a receive with nothing left to come %s", what, done ? "completed" : "was not posted");
      else if (r == ncclSuccess)
        failf(c, "%s: still pending %.1f s after the peer closed (expected ncclRemoteError)", what, S(2.0));
      else if (r != ncclRemoteError)
        failf(c, "%s: %s (expected ncclRemoteError)", what, res_str(r));
      else
        notef(c, "receive %d after the close: ncclRemoteError after %.3f s", k, now_s() - t0);
    }
    PCALL(c, deregMr, comm, mh);
    pair_close(c, &p);
  }
  free(buf);
}

/* ------------------------------------------------------------------------ */
/* After a run of small messages the receiver holds its CTS records back
 * (small messages need none); a large send then has to ask for its CTS.
 * Each round: HELD_SMALL small messages, then one large one.  The large
 * ones must arrive intact and promptly, and the sender's statistics must
 * show that it asked (CTS_WANTED) at least once: without the request, the
 * CTS would come only with the receiver's next batch or the watchdog's
 * tick. */
#define HELD_ROUNDS 3
#define HELD_SMALL 40
#define HELD_LARGE (1 << 20)
static int held_size(int k) { return k % (HELD_SMALL + 1) == HELD_SMALL ? HELD_LARGE : 8 + k % 64; }

static void case_held_cts(struct wctx *c) {
  if (load_plugin(c)) return;
  const char *es = getenv("COLLX_EAGER_SIZE");
  if (es && atoi(es) < 4096) {
    skipf(c, "COLLX_EAGER_SIZE=%s: every message waits for its CTS, none is held back", es);
    return;
  }
  const int nmsg = HELD_ROUNDS * (HELD_SMALL + 1);
  struct pair p;
  void *mh = NULL, *comm;
  uint8_t *buf = pair_with_buffer(c, &p, HELD_LARGE, &comm, &mh);
  if (!buf) return;
  char what[128];
  double worst = 0;
  for (int k = 0; k < nmsg && !failed(c); k++) {
    int size = held_size(k), got = SIZE_SENTINEL;
    uint64_t key = key_of(g_seed ^ 15, (uint64_t)k, 0);
    snprintf(what, sizeof what, "message %d (%d bytes)", k, size);
    if (p.sender) {
      pattern_fill(buf, (size_t)size, key);
      double t0 = now_s();
      void *req = send_retry(c, p.scomm, buf, size, 7, mh, 2.0, what);
      if (!req || wait_req(c, req, 1, &got, 5.0, what)) break;
      if (size == HELD_LARGE && now_s() - t0 > worst) worst = now_s() - t0;
    } else {
      void *d = buf, *m = mh, *req = NULL;
      int cap = HELD_LARGE, tag = 7;
      char why[256];
      if (PCALL(c, irecv, p.rcomm, 1, &d, &cap, &tag, &m, &req) != ncclSuccess || !req) {
        failf(c, "%s: irecv gave no request", what);
        break;
      }
      if (wait_req(c, req, 1, &got, 5.0, what)) break;
      if (got != size)
        failf(c, "%s: sizes = %d", what, got);
      else if (pattern_check(buf, (size_t)size, key, why, sizeof why))
        failf(c, "%s: data wrong: %s", what, why);
    }
    /* One message at a time, so that every receive is posted before its send. */
    int flag = k;
    if (p.sender ? ch_recv(c, &flag, sizeof flag, "received") : ch_send(c, &flag, sizeof flag, "received")) break;
  }
  PCALL(c, deregMr, comm, mh);
  pair_close(c, &p);
  if (p.sender && !failed(c)) {
    pthread_mutex_lock(&g_warn_mu);
    const char *w = strstr(g_closed, "before their CTS; ");
    long wanted = w ? strtol(w + strlen("before their CTS; "), NULL, 10) : -1;
    pthread_mutex_unlock(&g_warn_mu);
    if (wanted < 0)
      failf(c, "no connection statistics with a CTS_WANTED count were logged at closeSend");
    else if (wanted == 0)
      failf(c, "none of the %d large sends asked for its CTS: the receiver never held its CTS records back",
            HELD_ROUNDS);
    else
      notef(c, "%ld CTS_WANTED records; slowest large send from first isend to completion %.1f ms", wanted,
            worst * 1e3);
  }
  free(buf);
}

/* ======================================================================== */
static const struct tcase g_cases[] = {
    {"properties", "devices/getProperties report a usable host device", 1, 10, {"proc", NULL}, case_properties},
    {"nonblocking", "connect before the peer accepts: every call returns at once (< 50 ms)", 2, 10,
     {"connector", "listener"}, case_nonblocking},
    {"mixed-sizes", "sizes 0..4 MiB in order, 8 in flight, data/sizes/canary verified", 2, 12,
     {"sender", "receiver"}, case_mixed_sizes},
    {"inflight-32", "32 requests in flight per comm; a 33rd irecv is refused", 2, 12, {"sender", "receiver"},
     case_inflight32},
    {"grouped", "grouped irecv (n = maxRecvs), sends in shuffled tag order", 2, 12, {"sender", "receiver"},
     case_grouped},
    {"multi-comm", "4 comm pairs, one thread each per process, 200 messages each way", 2, 15, {"proc0", "proc1"},
     case_multi_comm},
    {"oversize", "5000-byte message into a 1000-byte receive: ncclInvalidUsage, WARN, no overrun", 2, 10,
     {"sender", "receiver"}, case_oversize},
    {"close-inflight", "close with 16 x 4 MiB requests in flight, either side first", 2, 12, {"sender", "receiver"},
     case_close_inflight},
    {"stray-clients", "silent/junk TCP clients on the listen port do not stall accept", 2, 12,
     {"connector", "listener"}, case_stray_clients},
    {"unload", "after close + dlclose no plugin thread is left", 2, 10, {"sender", "receiver"}, case_unload},
    {"zero-byte", "zero-byte messages report size 0 and write nothing", 2, 10, {"sender", "receiver"},
     case_zero_byte},
    {"flush", "iflush on host memory returns a NULL request", 2, 10, {"sender", "receiver"}, case_flush},
    {"early", "small sends return before their receive is posted and land in the right entries", 2, 10,
     {"sender", "receiver"}, case_early},
    {"close-after-send", "a sender closing after its small sends completed loses nothing; a later receive fails",
     2, 10, {"sender", "receiver"}, case_close_after_send},
    {"held-cts", "a large send after many small ones gets the CTS the receiver held back, at once", 2, 15,
     {"sender", "receiver"}, case_held_cts},
};
#define NCASES ((int)(sizeof g_cases / sizeof g_cases[0]))

/* ------------------------------------------------------------------------ */
/* Harness. */
static __attribute__((noreturn)) void worker_main(const struct tcase *tc, int role, int ch, struct wshm *shm) {
  static struct wctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.tc = tc;
  ctx.role = role;
  ctx.ch = ch;
  ctx.shm = shm;
  g_ctx = &ctx;
  step(&ctx, 0, "starting");
  tc->fn(&ctx);
  shm->finished = 1;
  step(&ctx, 0, "exiting (atexit handlers, plugin destructors)");
  exit(shm->nfail ? 1 : 0);
}

static void describe_status(int status, char *buf, size_t len) {
  if (WIFSIGNALED(status))
    snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
             WCOREDUMP(status) ? ", core dumped" : "");
  else if (WIFEXITED(status))
    snprintf(buf, len, "exit status %d%s", WEXITSTATUS(status),
             WEXITSTATUS(status) == 66   ? " (ThreadSanitizer's exit code after a report: see stderr)"
             : WEXITSTATUS(status) == 23 ? " (LeakSanitizer's exit code: see stderr)"
                                         : "");
  else
    snprintf(buf, len, "status 0x%x", status);
}

static void print_steps(const struct wshm *s) {
  for (int k = 0; k < NSLOTS; k++) {
    if (!s->step[k][0]) continue;
    char st[STEP_LEN], call[24];
    memcpy(st, s->step[k], STEP_LEN);
    st[STEP_LEN - 1] = 0;
    memcpy(call, s->in_call[k], sizeof call);
    call[sizeof call - 1] = 0;
    char who[16];
    if (k == 0)
      snprintf(who, sizeof who, "main");
    else
      snprintf(who, sizeof who, "thread %d", k);
    if (call[0])
      printf("      %s: %s; inside the plugin's %s(), which has not returned\n", who, st, call);
    else
      printf("      %s: %s\n", who, st);
  }
}

/* 0 pass, 1 fail, 2 skip */
static int run_case(const struct tcase *tc) {
  struct wshm *shm = mmap(NULL, sizeof(struct wshm) * MAX_ROLES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
  if (shm == MAP_FAILED) {
    printf("FAIL: %s (harness: mmap: %s)\n", tc->name, strerror(errno));
    return 1;
  }
  memset(shm, 0, sizeof(struct wshm) * MAX_ROLES);
  int sv[2] = {-1, -1};
  if (tc->nroles == 2 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    printf("FAIL: %s (harness: socketpair: %s)\n", tc->name, strerror(errno));
    return 1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid[MAX_ROLES] = {0, 0};
  int status[MAX_ROLES] = {0, 0}, reaped[MAX_ROLES] = {0, 0}, killed[MAX_ROLES] = {0, 0};
  double t0 = now_s();
  for (int r = 0; r < tc->nroles; r++) {
    pid[r] = fork();
    if (pid[r] < 0) {
      printf("FAIL: %s (harness: fork: %s)\n", tc->name, strerror(errno));
      for (int q = 0; q < r; q++) kill(pid[q], SIGKILL);
      for (int q = 0; q < r; q++) waitpid(pid[q], NULL, 0);
      return 1;
    }
    if (pid[r] == 0) {
      int ch = -1;
      if (tc->nroles == 2) {
        ch = sv[r];
        close(sv[1 - r]);
      }
      worker_main(tc, r, ch, &shm[r]);
    }
  }
  if (sv[0] >= 0) {
    close(sv[0]);
    close(sv[1]);
  }
  double deadline = t0 + S(tc->timeout_s), grace_deadline = 0;
  int timed_out = 0, left = tc->nroles;
  while (left > 0) {
    for (int r = 0; r < tc->nroles; r++) {
      if (reaped[r]) continue;
      pid_t w = waitpid(pid[r], &status[r], WNOHANG);
      if (w == pid[r]) {
        reaped[r] = 1;
        left--;
        int bad = !WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0 || shm[r].nfail;
        if (bad && !grace_deadline) grace_deadline = now_s() + 3.0; /* let the peer report, then stop it */
      }
    }
    if (left == 0) break;
    double now = now_s();
    if (now > deadline || (grace_deadline && now > grace_deadline)) {
      timed_out = now > deadline;
      for (int r = 0; r < tc->nroles; r++) {
        if (reaped[r]) continue;
        kill(pid[r], SIGKILL);
        waitpid(pid[r], &status[r], 0);
        reaped[r] = 1;
        killed[r] = 1;
        left--;
      }
      break;
    }
    sleep_s(0.005);
  }
  double dt = now_s() - t0;

  int fail = 0, skip = 0;
  for (int r = 0; r < tc->nroles; r++) {
    if (shm[r].nfail || killed[r]) fail = 1;
    if (shm[r].nskip) skip = 1;
    if (!killed[r] && !(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)) {
      if (!shm[r].nfail) fail = 1; /* died without a verdict */
    }
    if (!killed[r] && WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0 && !shm[r].finished) fail = 1;
  }
  const char *verdict = fail ? "FAIL" : skip ? "SKIP" : "PASS";
  printf("%s: %s (%.2f s)\n", verdict, tc->name, dt);
  for (int r = 0; r < tc->nroles; r++) {
    const char *who = tc->role_name[r];
    char st[128];
    describe_status(status[r], st, sizeof st);
    if (killed[r]) {
      if (timed_out)
        printf("  [%s] TIMEOUT: still running after %.0f s, killed; it was at:\n", who, S(tc->timeout_s));
      else
        printf("  [%s] killed: still running 3 s after its peer failed; it was at:\n", who);
      print_steps(&shm[r]);
    } else if (!(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0) &&
               !(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 1 && shm[r].nfail)) {
      printf("  [%s] process ended abnormally: %s; it was at:\n", who, st);
      print_steps(&shm[r]);
    } else if (WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0 && !shm[r].finished) {
      printf("  [%s] process exited with status 0 before the case finished (something called exit()); it was at:\n",
             who);
      print_steps(&shm[r]);
    }
    size_t len = shm[r].len < REPORT_CAP ? shm[r].len : REPORT_CAP;
    const char *txt = shm[r].text;
    size_t pos = 0;
    while (pos < len) {
      const char *nl = memchr(txt + pos, '\n', len - pos);
      size_t l = nl ? (size_t)(nl - (txt + pos)) : len - pos;
      int is_note = l >= 5 && !strncmp(txt + pos, "note:", 5);
      if (!is_note || g_verbose || fail) printf("  [%s] %.*s\n", who, (int)l, txt + pos);
      pos += l + 1;
    }
  }
  fflush(stdout);
  munmap(shm, sizeof(struct wshm) * MAX_ROLES);
  return fail ? 1 : skip ? 2 : 0;
}

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [-v] [--list] [--case NAME[,NAME...]]... [PLUGIN.so]\n"
          "  PLUGIN.so  default: $COLLX_PLUGIN, else %s\n"
          "  --list     print the cases and exit\n"
          "  --case     run only the named case(s)\n"
          "  -v         verbose: plugin INFO lines, notes of passing cases\n"
          "env: COLLX_DRIVER_TIMEOUT_SCALE, COLLX_DRIVER_SEED\n",
          argv0, DEFAULT_PLUGIN);
}

int main(int argc, char **argv) {
  int selected[NCASES];
  int nsel = 0, list = 0;
  memset(selected, 0, sizeof selected);
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--list")) {
      list = 1;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      g_verbose = 1;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout, argv[0]);
      return 0;
    } else if (!strcmp(a, "--case") || !strncmp(a, "--case=", 7)) {
      const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v) {
        usage(stderr, argv[0]);
        return 99;
      }
      char *dup = strdup(v), *save = NULL;
      for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int k = 0; k < NCASES; k++) {
          if (!strcmp(tok, g_cases[k].name)) {
            if (!selected[k]) nsel++;
            selected[k] = 1;
            found = 1;
          }
        }
        if (!found) {
          fprintf(stderr, "%s: no case named '%s' (see --list)\n", argv[0], tok);
          return 99;
        }
      }
      free(dup);
    } else if (a[0] == '-') {
      usage(stderr, argv[0]);
      return 99;
    } else {
      g_plugin_path = a;
    }
  }
  if (list) {
    for (int k = 0; k < NCASES; k++) printf("%-15s %s\n", g_cases[k].name, g_cases[k].summary);
    return 0;
  }
  if (!g_plugin_path) g_plugin_path = getenv("COLLX_PLUGIN");
  if (!g_plugin_path || !*g_plugin_path) g_plugin_path = DEFAULT_PLUGIN;
  const char *sc = getenv("COLLX_DRIVER_TIMEOUT_SCALE");
  if (sc && *sc) {
    double v = strtod(sc, NULL);
    if (v > 0) g_scale = v;
  }
  const char *sd = getenv("COLLX_DRIVER_SEED");
  if (sd && *sd) g_seed = strtoull(sd, NULL, 0);
  if (access(g_plugin_path, R_OK) != 0) {
    fprintf(stderr, "%s: plugin %s: %s (build it first, or pass its path)\n", argv[0], g_plugin_path,
            strerror(errno));
    printf("0 passed, 1 failed\n");
    return 99;
  }
  /* The plugin under test uses the loopback device only. */
  setenv("COLLX_IFNAME", "lo", 1);
  signal(SIGPIPE, SIG_DFL); /* a plugin that lets SIGPIPE through must show it */
  printf("collx conformance driver: plugin %s, seed 0x%" PRIx64 ", timeout scale %g\n", g_plugin_path, g_seed,
         g_scale);
  int npass = 0, nfail = 0, nskip = 0;
  for (int k = 0; k < NCASES; k++) {
    if (nsel && !selected[k]) continue;
    int v = run_case(&g_cases[k]);
    if (v == 0) npass++;
    else if (v == 1) nfail++;
    else nskip++;
  }
  if (nskip)
    printf("%d passed, %d failed, %d skipped\n", npass, nfail, nskip);
  else
    printf("%d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
