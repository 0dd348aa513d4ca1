/*
 * collx-perf: bandwidth and latency of the collx plugin, a plain-TCP
 * baseline measured in the same process pair, and a no-GPU ring all-reduce
 * demo over N local processes.
 *
 * The tool links nothing of collx: it dlopens the plugin and drives it only
 * through the exported ncclNetPlugin_v8 table, the way NCCL's proxy does
 * (non-blocking listen/connect/accept, isend that may answer "not yet",
 * requests polled with test).  What it measures is therefore what NCCL would
 * see from the plugin, minus the GPU.
 *
 * Two-process mode follows ib_send_bw: a plain TCP socket (the bootstrap)
 * carries the 128-byte plugin handles, the client's test plan and the
 * barriers; every byte that is measured goes through the plugin (or, for the
 * baseline, through one plain TCP socket per direction).  The client drives
 * the test and the server executes what it is told, so only the client's
 * options matter.
 */
#ifndef _GNU_SOURCE /* the tree's build force-includes config.h, which sets it */
#define _GNU_SOURCE 1
#endif
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collx/net_abi.h"

#ifdef PACKAGE_VERSION
#define PERF_VERSION PACKAGE_VERSION
#else
#define PERF_VERSION "(built outside the tree)"
#endif
#define PLUGIN_SYMBOL "ncclNetPlugin_v8"
#define PLUGIN_FILE "libnccl-net-collx.so"
#define DEFAULT_PORT 18515
#define MSG_TAG 0x7ca1
#define MAX_DEPTH NCCL_NET_MAX_REQUESTS
#define MAX_RANKS 64
#define MAX_SIZES 64
#define MAX_MSG_SIZE ((size_t)1 << 30) /* isend takes an int */
#define WIRE_MAGIC 0x636f6c6c78706631ull /* "collxpf1" */
#define WIRE_VERSION 1
#define NS 1000000000.0

enum { MODE_NONE, MODE_SERVER, MODE_CLIENT, MODE_SELF, MODE_RANKS };
enum { TEST_BW = 0, TEST_LAT = 1 };
enum { TR_PLUGIN = 0, TR_TCP = 1 };

/* ========================================================================
 * Options
 * ======================================================================== */

static struct {
  int mode;
  const char *host;
  int port, port_set;
  int test;
  size_t min_size, max_size;
  int min_set, max_set;
  int depth;
  int bidir;
  uint64_t iters;  /* 0: time based */
  double seconds;  /* per size and transport; 0: default */
  int compare;     /* plain-TCP baseline after the plugin run */
  int dev;
  const char *plugin;
  double timeout;  /* 0: wait forever */
  int verbose;
  int nranks;
  int check;
  size_t slice;
  int version;
} o = {.port = DEFAULT_PORT, .depth = 8, .timeout = 60.0, .slice = 512 << 10};

/* ========================================================================
 * Process-wide state, errors, watchdog
 * ======================================================================== */

static const char *g_role = "";        /* "", "server", "rank 3" */
static const ncclNet_v8_t *net;
static char g_plugin_path[PATH_MAX];
static pid_t g_children[MAX_RANKS];
static int g_nchildren;
static atomic_uint_fast64_t g_beat;    /* bumped by every wait loop */
static char g_phase[160] = "start-up"; /* what the process is doing */

static void beat(void) { atomic_fetch_add_explicit(&g_beat, 1, memory_order_relaxed); }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t timeout_ns(void) {
  return o.timeout > 0 ? (uint64_t)(o.timeout * NS) : UINT64_MAX;
}

static uint64_t deadline_in(void) {
  return o.timeout > 0 ? now_ns() + timeout_ns() : UINT64_MAX;
}

static void set_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_phase(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_phase, sizeof g_phase, fmt, ap);
  va_end(ap);
}

static void kill_children(void) {
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) kill(g_children[i], SIGKILL);
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) {
      waitpid(g_children[i], NULL, 0);
      g_children[i] = 0;
    }
}

static int role_prefix(char *buf, size_t len) {
  return snprintf(buf, len, "collx-perf%s%s%s", *g_role ? " [" : "", g_role, *g_role ? "]" : "");
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  char buf[1024];
  int n = role_prefix(buf, sizeof buf);
  n += snprintf(buf + n, sizeof buf - (size_t)n, ": error: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(stderr, "%s\n", buf);
  fflush(stderr);
  kill_children();
  _exit(1);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
  char buf[1024];
  int n = role_prefix(buf, sizeof buf);
  n += snprintf(buf + n, sizeof buf - (size_t)n, ": ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(stderr, "%s\n", buf);
}

static void on_signal(int sig) {
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) kill(g_children[i], SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Catches a plugin call that never returns (the wait loops have their own
 * timeouts; this is for the calls themselves). */
static void *watchdog_main(void *arg) {
  (void)arg;
  uint64_t last = atomic_load(&g_beat), since = now_ns();
  for (;;) {
    sleep(1);
    uint64_t b = atomic_load(&g_beat), t = now_ns();
    if (b != last) {
      last = b;
      since = t;
    } else if (t - since > timeout_ns() + 10ull * 1000000000ull) {
      die("no sign of life for %.0f s while %s: a plugin call does not return", (t - since) / NS,
          g_phase);
    }
  }
  return NULL;
}

static void start_watchdog(void) {
  if (o.timeout <= 0) return;
  pthread_t th;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &a, watchdog_main, NULL) != 0) die("cannot start the watchdog thread");
  pthread_attr_destroy(&a);
}

/* A child: dies with its parent, forgets the parent's children. */
static void became_child(const char *role) {
  g_role = role;
  g_nchildren = 0;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

/* ========================================================================
 * Small helpers
 * ======================================================================== */

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
  default: return "unknown ncclResult_t";
  }
}

/* Every plugin call goes through this: a failure names the call, the result
 * and what the tool was doing. */
#define NETCALL(name, call)                                                                   \
  do {                                                                                        \
    ncclResult_t r_ = (call);                                                                 \
    if (r_ != ncclSuccess)                                                                    \
      die("plugin %s() failed: %s (%d) while %s", name, res_str(r_), (int)r_, g_phase);       \
  } while (0)

static const char *fmt_size(size_t b, char *buf, size_t len) {
  if (b >= (1u << 30) && b % (1u << 30) == 0)
    snprintf(buf, len, "%zu GiB", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, len, "%zu MiB", b >> 20);
  else if (b >= (1u << 10) && b % (1u << 10) == 0)
    snprintf(buf, len, "%zu KiB", b >> 10);
  else
    snprintf(buf, len, "%zu B", b);
  return buf;
}

static int parse_size(const char *s, size_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno) return -1;
  unsigned long long mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = 1ull << 10; end++; break;
  case 'm': case 'M': mul = 1ull << 20; end++; break;
  case 'g': case 'G': mul = 1ull << 30; end++; break;
  default: break;
  }
  if (mul > 1 && *end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return -1;
  if (v > SIZE_MAX / mul) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

static void *xalloc(size_t len) {
  void *p = NULL;
  if (len == 0) len = 64;
  if (posix_memalign(&p, 4096, (len + 4095) & ~(size_t)4095) != 0 || !p)
    die("cannot allocate %zu bytes", len);
  memset(p, 0, len); /* touch the pages before anything is timed */
  return p;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* ========================================================================
 * Plugin loading and logger
 * ======================================================================== */

static void plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                          const char *fmt, ...) {
  const char *lv;
  switch (level) {
  case NCCL_LOG_WARN: lv = "WARN"; break;
  case NCCL_LOG_ABORT: lv = "ABORT"; break;
  case NCCL_LOG_INFO: lv = "INFO"; if (o.verbose < 1) return; break;
  case NCCL_LOG_TRACE: lv = "TRACE"; if (o.verbose < 2) return; break;
  default: return;
  }
  char buf[1200];
  int n = role_prefix(buf, sizeof buf);
  if (o.verbose >= 2 && file)
    n += snprintf(buf + n, sizeof buf - (size_t)n, ": plugin %s %s:%d ", lv, file, line);
  else
    n += snprintf(buf + n, sizeof buf - (size_t)n, ": plugin %s ", lv);
  va_list ap;
  va_start(ap, fmt);
  if (n < (int)sizeof buf) vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  size_t len = strnlen(buf, sizeof buf - 2);
  while (len && buf[len - 1] == '\n') len--;
  buf[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, buf, len); /* one write: lines from threads stay whole */
  (void)w;
}

/* dlopen one candidate; 1 on success, 0 when the file is not there, dies on
 * a file that exists but is not a usable plugin. */
static int try_plugin(const char *path, int must_exist) {
  if (strchr(path, '/') && access(path, F_OK) != 0) {
    if (must_exist) die("plugin %s: %s", path, strerror(errno));
    if (o.verbose) note("plugin candidate %s: not there", path);
    return 0;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (!strchr(path, '/') && !must_exist) {
      if (o.verbose) note("plugin candidate %s: %s", path, dlerror());
      return 0;
    }
    die("cannot load plugin %s: %s", path, dlerror());
  }
  const ncclNet_v8_t *t = dlsym(h, PLUGIN_SYMBOL);
  if (!t) die("%s does not export %s: not a v8 NCCL net plugin", path, PLUGIN_SYMBOL);
  const char *missing = !t->name ? "name" : !t->init ? "init" : !t->devices ? "devices"
                      : !t->getProperties ? "getProperties" : !t->listen ? "listen"
                      : !t->connect ? "connect" : !t->accept ? "accept" : !t->regMr ? "regMr"
                      : !t->deregMr ? "deregMr" : !t->isend ? "isend" : !t->irecv ? "irecv"
                      : !t->test ? "test" : !t->closeSend ? "closeSend"
                      : !t->closeRecv ? "closeRecv" : !t->closeListen ? "closeListen" : NULL;
  if (missing) die("%s: %s.%s is NULL", path, PLUGIN_SYMBOL, missing);
  net = t;
  /* Report the file the loader really mapped. */
  Dl_info info;
  const char *file = dladdr((const void *)t, &info) && info.dli_fname ? info.dli_fname : path;
  if (!realpath(file, g_plugin_path)) snprintf(g_plugin_path, sizeof g_plugin_path, "%s", file);
  return 1;
}

static void load_plugin(void) {
  if (o.plugin) {
    try_plugin(o.plugin, 1);
  } else if (getenv("COLLX_PLUGIN") && *getenv("COLLX_PLUGIN")) {
    try_plugin(getenv("COLLX_PLUGIN"), 1);
  } else {
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int found = 0;
    if (n > 0) {
      exe[n] = 0;
      char *slash = strrchr(exe, '/');
      if (slash) *slash = 0;
      /* installed layout, libtool build tree (tool next to .libs/, or the
       * real binary inside .libs/ behind a wrapper script) */
      const char *rel[] = {"../lib/", ".libs/", "../.libs/", ""};
      for (size_t i = 0; i < sizeof rel / sizeof rel[0] && !found; i++) {
        snprintf(cand, sizeof cand, "%s/%s%s", exe, rel[i], PLUGIN_FILE);
        found = try_plugin(cand, 0);
      }
    }
    if (!found && !try_plugin(PLUGIN_FILE, 0))
      die("cannot find %s: give --plugin PATH or set COLLX_PLUGIN (tried next to %s and the "
          "loader path)", PLUGIN_FILE, n > 0 ? exe : "the executable");
  }
  if (o.verbose) note("loaded plugin \"%s\" from %s", net->name, g_plugin_path);
}

/* COLLX_IFNAME=lo when both peers are on this host and the user chose no
 * interface: loopback is the only interface the two sides surely share. */
static void force_loopback(const char *why, int quiet) {
  if (getenv("COLLX_IFNAME") || getenv("NCCL_SOCKET_IFNAME")) return;
  setenv("COLLX_IFNAME", "lo", 1);
  if (!quiet) printf("collx-perf: COLLX_IFNAME and NCCL_SOCKET_IFNAME unset; %s: set COLLX_IFNAME=lo\n", why);
}

struct devinfo {
  char name[64];
  int speed;
};

static void plugin_start(int dev, struct devinfo *di) {
  set_phase("initialising the plugin");
  NETCALL("init", net->init(plugin_logger));
  int nd = 0;
  NETCALL("devices", net->devices(&nd));
  if (nd <= 0)
    die("the plugin offers no network device (COLLX_IFNAME=%s NCCL_SOCKET_IFNAME=%s)",
        getenv("COLLX_IFNAME") ? getenv("COLLX_IFNAME") : "(unset)",
        getenv("NCCL_SOCKET_IFNAME") ? getenv("NCCL_SOCKET_IFNAME") : "(unset)");
  if (dev < 0 || dev >= nd) die("--dev %d: the plugin offers %d device(s), 0..%d", dev, nd, nd - 1);
  ncclNetProperties_v8_t p;
  memset(&p, 0, sizeof p);
  NETCALL("getProperties", net->getProperties(dev, &p));
  if (!(p.ptrSupport & NCCL_PTR_HOST))
    die("device %d (%s) cannot use host memory (ptrSupport 0x%x)", dev, p.name ? p.name : "?",
        p.ptrSupport);
  snprintf(di->name, sizeof di->name, "%s", p.name ? p.name : "?");
  di->speed = p.speed;
  if (o.verbose)
    note("device %d of %d: %s, %d Mbps, pci %s, maxComms %d, maxRecvs %d, latency %.1f us", dev, nd,
         di->name, p.speed, p.pciPath ? p.pciPath : "none", p.maxComms, p.maxRecvs,
         (double)p.latency);
}

/* Drive connect and accept until both comms exist.  Neither call blocks, and
 * both sides do the same, so interleaving them cannot deadlock. */
static void plugin_connect_pair(int dev, void *lcomm, void *peer_handle, void **scomm,
                                void **rcomm, const char *peer) {
  set_phase("connecting to %s through the plugin", peer);
  ncclNetDeviceHandle_v8_t *sdev = NULL, *rdev = NULL;
  uint64_t dl = deadline_in();
  *scomm = *rcomm = NULL;
  for (;;) {
    beat();
    if (!*scomm) NETCALL("connect", net->connect(dev, peer_handle, scomm, &sdev));
    if (!*rcomm) NETCALL("accept", net->accept(lcomm, rcomm, &rdev));
    if (*scomm && *rcomm) break;
    if (now_ns() > dl)
      die("no plugin connection with %s within %.0f s (%s still returns no comm)", peer, o.timeout,
          !*scomm ? "connect" : "accept");
    usleep(50);
  }
}

/* ========================================================================
 * Plain sockets: bootstrap and baseline
 * ======================================================================== */

static void set_nonblock(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0)
    die("fcntl: %s", strerror(errno));
}

static void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Wait for `ev` on fd until `deadline`; dies on timeout. */
static void fd_wait(int fd, short ev, uint64_t deadline, const char *what) {
  for (;;) {
    uint64_t t = now_ns();
    if (t >= deadline) die("%s: nothing within %.0f s (--timeout)", what, o.timeout);
    uint64_t left_ms = deadline == UINT64_MAX ? 500 : (deadline - t) / 1000000 + 1;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, left_ms > 500 ? 500 : (int)left_ms);
    beat();
    if (r > 0) return; /* includes HUP/ERR: the read or write reports it */
    if (r < 0 && errno != EINTR) die("%s: poll: %s", what, strerror(errno));
  }
}

/* Whole-buffer I/O on a non-blocking socket, with the --timeout deadline. */
static void xwrite(int fd, const void *buf, size_t len, const char *what) {
  uint64_t dl = deadline_in();
  const char *p = buf;
  while (len) {
    ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      fd_wait(fd, POLLOUT, dl, what);
    } else if (r < 0 && errno != EINTR) {
      die("%s: %s (has the peer process failed?)", what, strerror(errno));
    }
  }
}

static void xread(int fd, void *buf, size_t len, const char *what) {
  uint64_t dl = deadline_in();
  char *p = buf;
  while (len) {
    ssize_t r = recv(fd, p, len, 0);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r == 0) {
      die("%s: the peer process closed the connection (see its error, if any)", what);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      fd_wait(fd, POLLIN, dl, what);
    } else if (errno != EINTR) {
      die("%s: %s", what, strerror(errno));
    }
  }
}

/* Dies when the peer at the other end of a socket has gone. */
static void check_peer(int fd, const char *who) {
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
    die("the %s has gone away while %s", who, g_phase);
}

static int tcp_listen(int family, int loopback, int port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  if (family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    a->sin6_family = AF_INET6;
    a->sin6_addr = loopback ? in6addr_loopback : in6addr_any;
    a->sin6_port = htons((uint16_t)port);
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
    a->sin_port = htons((uint16_t)port);
    len = sizeof *a;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 16) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  set_nonblock(fd, 1);
  return fd;
}

static int sock_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) die("getsockname: %s", strerror(errno));
  return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int tcp_accept(int lfd, const char *what) {
  uint64_t dl = deadline_in();
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      set_nodelay(fd);
      return fd;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
      fd_wait(lfd, POLLIN, dl, what);
    else
      die("%s: accept: %s", what, strerror(errno));
  }
}

/* Connect to an address, retrying while the peer is not listening yet. */
static int tcp_connect_addr(const struct sockaddr *sa, socklen_t salen, uint64_t dl, int *err) {
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (connect(fd, sa, salen) == 0) return fd;
  if (errno == EINPROGRESS) {
    uint64_t t = now_ns(), lim = t + 2000000000ull;
    if (lim > dl) lim = dl;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r = poll(&p, 1, lim > t ? (int)((lim - t) / 1000000 + 1) : 0);
    if (r > 0) {
      int soerr = 0;
      socklen_t l = sizeof soerr;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l);
      if (soerr == 0) return fd;
      *err = soerr;
    } else {
      *err = ETIMEDOUT;
    }
  } else {
    *err = errno;
  }
  close(fd);
  return -1;
}

static int tcp_connect_host(const char *host, int port, const char *what) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int e = getaddrinfo(host, ps, &hints, &res);
  if (e) die("%s: cannot resolve %s: %s", what, host, gai_strerror(e));
  uint64_t dl = deadline_in();
  int err = 0;
  for (;;) {
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      int fd = tcp_connect_addr(ai->ai_addr, ai->ai_addrlen, dl, &err);
      if (fd >= 0) {
        freeaddrinfo(res);
        set_nodelay(fd);
        return fd;
      }
    }
    beat();
    if (now_ns() >= dl)
      die("%s: cannot connect to %s port %d within %.0f s: %s", what, host, port, o.timeout,
          strerror(err));
    usleep(100000);
  }
}

/* Blocking I/O for the baseline data sockets (SO_*TIMEO bounds each call). */
static void set_io_timeouts(int fd) {
  set_nonblock(fd, 0);
  if (o.timeout > 0) {
    struct timeval tv = {.tv_sec = (time_t)o.timeout,
                         .tv_usec = (suseconds_t)((o.timeout - floor(o.timeout)) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
}

static void bsend_all(int fd, const char *p, size_t len) {
  while (len) {
    ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
    beat();
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      die("baseline TCP send: %s while %s",
          errno == EAGAIN ? "no progress within --timeout" : strerror(errno), g_phase);
    }
  }
}

static void brecv_all(int fd, char *p, size_t len) {
  while (len) {
    ssize_t r = recv(fd, p, len, MSG_WAITALL);
    beat();
    if (r > 0) {
      p += r;
      len -= (size_t)r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      die("baseline TCP receive: %s while %s",
          r == 0 ? "peer closed the connection"
          : errno == EAGAIN ? "no data within --timeout" : strerror(errno), g_phase);
    }
  }
}

/* Latency baseline: poll the socket without sleeping, as the plugin's
 * caller polls test(), so that neither side of the comparison pays for a
 * wake-up from a blocking read (in an idle VM that alone costs tens of us). */
static void precv_all(int fd, char *p, size_t len) {
  uint64_t deadline = 0;
  while (len) {
    ssize_t r = recv(fd, p, len, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      len -= (size_t)r;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!deadline) deadline = o.timeout > 0 ? now_ns() + timeout_ns() : UINT64_MAX;
      beat();
      if (now_ns() > deadline) die("baseline TCP receive: no data within --timeout while %s", g_phase);
      continue;
    }
    die("baseline TCP receive: %s while %s", r == 0 ? "peer closed the connection" : strerror(errno),
        g_phase);
  }
}

/* ========================================================================
 * Wire format of the bootstrap (big-endian 64-bit words)
 * ======================================================================== */

static void wsend(int fd, const uint64_t *v, int n, const char *what) {
  uint64_t b[16];
  for (int i = 0; i < n; i++) b[i] = htobe64(v[i]);
  xwrite(fd, b, (size_t)n * 8, what);
}

static void wrecv(int fd, uint64_t *v, int n, const char *what) {
  uint64_t b[16];
  xread(fd, b, (size_t)n * 8, what);
  for (int i = 0; i < n; i++) v[i] = be64toh(b[i]);
}

enum { CMD_RUN = 1, CMD_PRINT = 2, CMD_END = 3 };
/* CMD_RUN: {cmd, transport, test, size, n, bidir} */
#define CMD_WORDS 6

struct hello {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  char dev[64];
  uint64_t speed_be;
};

/* ========================================================================
 * Two-process mode: one peer (client or server)
 * ======================================================================== */

struct peer {
  int is_client, quiet;
  int bfd;                /* bootstrap socket */
  const char *peer_name;  /* "server" / "client" */
  /* plugin side */
  void *lcomm, *scomm, *rcomm;
  void *smh, *rmh;
  char *sbuf, *rbuf;
  size_t slot;            /* bytes per buffer slot */
  int depth, nslots;
  char my_handle[NCCL_NET_HANDLE_MAXSIZE];
  char peer_handle[NCCL_NET_HANDLE_MAXSIZE]; /* stays put: connect() may keep state in it */
  struct devinfo mydev, peerdev;
  /* baseline: one socket per direction */
  int want_tcp;
  int tfd_out, tfd_in;
};

static void bs_barrier(struct peer *p) {
  char b = 'B';
  xwrite(p->bfd, &b, 1, "bootstrap barrier");
  xread(p->bfd, &b, 1, "bootstrap barrier");
  if (b != 'B') die("bootstrap out of step (got 0x%02x where a barrier was due)", (unsigned char)b);
}

static void fill_pattern(char *b, size_t len) {
  for (size_t i = 0; i < len; i++) b[i] = (char)(uint8_t)(i * 7 + 13);
}

static void poison(char *b, size_t len) {
  for (size_t i = 0; i < len; i++) b[i] = (char)~(uint8_t)(i * 7 + 13);
}

static void check_msg(const char *b, size_t size, uint64_t seq) {
  size_t i = 0;
  if (size >= 8) {
    uint64_t s;
    memcpy(&s, b, 8);
    if (s != seq)
      die("data check: receive #%" PRIu64 " holds message #%" PRIu64 " (%zu B)", seq, s, size);
    i = 8;
  }
  for (; i < size; i++)
    if ((uint8_t)b[i] != (uint8_t)(i * 7 + 13))
      die("data check: message #%" PRIu64 " (%zu B): byte %zu is 0x%02x, expected 0x%02x", seq,
          size, i, (uint8_t)b[i], (uint8_t)(i * 7 + 13));
}

/* Idle bookkeeping shared by the polling loops: yield the CPU to the plugin's
 * threads, and give up after --timeout without progress. */
struct idle {
  unsigned n;
  uint64_t since;
};

static void idle_tick(struct idle *id, int fd_peer, const char *who, const char *what) {
  sched_yield();
  if ((++id->n & 127) != 0) return;
  uint64_t t = now_ns();
  if (!id->since) {
    id->since = t;
    return;
  }
  if (fd_peer >= 0) check_peer(fd_peer, who);
  if (o.timeout > 0 && t - id->since > timeout_ns()) die("%s: no progress for %.0f s", what, o.timeout);
}

static void isend_retry(struct peer *p, void *buf, size_t size, void **req, const char *what) {
  struct idle id = {0, 0};
  for (;;) {
    beat();
    *req = NULL;
    NETCALL("isend", net->isend(p->scomm, buf, (int)size, MSG_TAG, p->smh, req));
    if (*req) return;
    idle_tick(&id, p->bfd, p->peer_name, what);
  }
}

static void *irecv1(struct peer *p, void *buf, size_t size, const char *what) {
  int sz = (int)size, tag = MSG_TAG;
  void *mh = p->rmh, *req = NULL;
  struct idle id = {0, 0};
  for (;;) {
    beat();
    NETCALL("irecv", net->irecv(p->rcomm, 1, &buf, &sz, &tag, &mh, &req));
    if (req) return req;
    idle_tick(&id, p->bfd, p->peer_name, what);
  }
}

/* Poll a request once; on completion check its size (expect < 0: any). */
static int req_done(void *req, long expect, const char *what) {
  int done = 0, sz = -1;
  NETCALL("test", net->test(req, &done, &sz));
  if (done && expect >= 0 && sz != expect)
    die("%s completed with %d bytes, %ld expected", what, sz, expect);
  return done;
}

/* ---- plugin bandwidth ----------------------------------------------------
 * n messages of `size` bytes, `depth` in flight per direction.  The sender's
 * clock runs from the barrier until the receiver says (on the bootstrap)
 * that it has every byte, so the figure is end to end.  Returns that time
 * in ns for this side's send direction (0 if it does not send). */
static uint64_t plugin_bw(struct peer *p, size_t size, uint64_t n, int do_send, int do_recv) {
  void *sreq[MAX_DEPTH] = {0}, *rreq[MAX_DEPTH] = {0};
  uint64_t rseq[MAX_DEPTH];
  uint64_t sposted = 0, sdone = 0, rposted = 0, rdone = 0, t_end = 0;
  int D = p->depth, ack_sent = !do_recv, ack_got = !do_send;
  set_phase("measuring plugin bandwidth, %zu B messages, %" PRIu64 " of them", size, n);

  /* Receives go up before the barrier: the sender never waits for them. */
  for (int i = 0; do_recv && i < D && rposted < n; i++) {
    char *b = p->rbuf + (size_t)i * p->slot;
    if (o.check) poison(b, size);
    rreq[i] = irecv1(p, b, size, "posting receives");
    rseq[i] = rposted++;
  }
  bs_barrier(p);
  uint64_t t0 = now_ns();
  struct idle id = {0, 0};
  for (;;) {
    int prog = 0;
    beat();
    if (do_send) {
      for (int i = 0; i < D && sposted < n; i++) {
        if (sreq[i]) continue;
        char *b = p->sbuf + (size_t)i * p->slot;
        if (o.check && size >= 8) memcpy(b, &sposted, 8);
        void *req = NULL;
        NETCALL("isend", net->isend(p->scomm, b, (int)size, MSG_TAG, p->smh, &req));
        if (!req) break; /* receiver not ready for it: call again later */
        sreq[i] = req;
        sposted++;
        prog = 1;
      }
      for (int i = 0; i < D; i++)
        if (sreq[i] && req_done(sreq[i], -1, "isend")) {
          sreq[i] = NULL;
          sdone++;
          prog = 1;
        }
      if (sdone == n && !ack_got) {
        char a;
        ssize_t r = recv(p->bfd, &a, 1, MSG_DONTWAIT);
        if (r == 1) {
          if (a != 'A') die("bootstrap out of step (0x%02x where an acknowledgement was due)", (unsigned char)a);
          t_end = now_ns();
          ack_got = 1;
          prog = 1;
        } else if (r == 0) {
          die("the %s closed the bootstrap connection", p->peer_name);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          die("bootstrap: %s", strerror(errno));
        }
      }
    }
    if (do_recv) {
      for (int i = 0; i < D; i++) {
        if (!rreq[i] || !req_done(rreq[i], (long)size, "irecv")) continue;
        char *b = p->rbuf + (size_t)i * p->slot;
        if (o.check) check_msg(b, size, rseq[i]);
        rreq[i] = NULL;
        rdone++;
        prog = 1;
        if (rposted < n) {
          if (o.check) poison(b, size);
          rreq[i] = irecv1(p, b, size, "posting receives");
          rseq[i] = rposted++;
        }
      }
      if (rdone == n && !ack_sent) {
        char a = 'A';
        xwrite(p->bfd, &a, 1, "bootstrap acknowledgement");
        ack_sent = 1;
      }
    }
    if (ack_sent && ack_got && sdone == (do_send ? n : 0)) break;
    if (prog) {
      id.n = 0;
      id.since = 0;
    } else {
      idle_tick(&id, p->bfd, p->peer_name, g_phase);
    }
  }
  return do_send ? t_end - t0 : 0;
}

/* ---- plugin latency: ping-pong, one message in flight ------------------ */
/* Ping-pong with receives posted ahead, the way NCCL's proxy posts them (and
 * ib_send_lat keeps its receive queue filled): each side sends first and
 * then replaces the receive it has used, so a receive's clear-to-send is
 * out before the peer needs it.  Every call is inside the timed loop. */
static void *lat_recv(struct peer *p, uint64_t k, size_t size) {
  return irecv1(p, p->rbuf + (size_t)(k % 2) * p->slot, size, "posting a receive");
}

static void lat_wait(struct peer *p, void *req, long expect, const char *what) {
  struct idle id = {0, 0};
  while (beat(), !req_done(req, expect, what)) idle_tick(&id, p->bfd, p->peer_name, g_phase);
}

static void plugin_lat(struct peer *p, size_t size, uint64_t n, uint64_t *rtt) {
  set_phase("measuring plugin latency, %zu B, %" PRIu64 " round trips", size, n);
  void *rr[2] = {NULL, NULL}, *sr;
  if (p->is_client) {
    rr[0] = lat_recv(p, 0, size); /* the pong of ping i+1 is posted after ping i */
    bs_barrier(p);
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = now_ns();
      isend_retry(p, p->sbuf, size, &sr, "sending the ping");
      if (i + 1 < n) rr[(i + 1) % 2] = lat_recv(p, i + 1, size);
      lat_wait(p, rr[i % 2], (long)size, "irecv (pong)");
      lat_wait(p, sr, -1, "isend (ping)");
      rtt[i] = now_ns() - t0;
    }
  } else {
    for (uint64_t k = 0; k < 2 && k < n; k++) rr[k] = lat_recv(p, k, size);
    bs_barrier(p);
    for (uint64_t i = 0; i < n; i++) {
      lat_wait(p, rr[i % 2], (long)size, "irecv (ping)");
      isend_retry(p, p->sbuf, size, &sr, "sending the pong");
      if (i + 2 < n) rr[i % 2] = lat_recv(p, i + 2, size);
      lat_wait(p, sr, -1, "isend (pong)");
    }
  }
}

/* ---- baseline TCP bandwidth: back-to-back writes on one socket --------- */
struct tsend {
  struct peer *p;
  size_t size;
  uint64_t n, t_end;
};

static void *tcp_sender(void *arg) {
  struct tsend *a = arg;
  /* Message i from slot i % depth, as in the plugin run: both sides of the
   * comparison then touch the same memory (8 x 512 KiB does not stay in a
   * core's cache the way one buffer would). */
  for (uint64_t i = 0; i < a->n; i++)
    bsend_all(a->p->tfd_out, a->p->sbuf + (size_t)(i % (uint64_t)a->p->depth) * a->p->slot, a->size);
  char c;
  xread(a->p->bfd, &c, 1, "bootstrap acknowledgement");
  if (c != 'A') die("bootstrap out of step (0x%02x where an acknowledgement was due)", (unsigned char)c);
  a->t_end = now_ns();
  return NULL;
}

static uint64_t tcp_bw(struct peer *p, size_t size, uint64_t n, int do_send, int do_recv) {
  set_phase("measuring TCP bandwidth, %zu B messages, %" PRIu64 " of them", size, n);
  struct tsend a = {p, size, n, 0};
  pthread_t th;
  bs_barrier(p);
  uint64_t t0 = now_ns();
  if (do_send && do_recv) {
    if (pthread_create(&th, NULL, tcp_sender, &a) != 0) die("cannot start the TCP sender thread");
  } else if (do_send) {
    tcp_sender(&a);
  }
  if (do_recv) {
    for (uint64_t i = 0; i < n; i++)
      brecv_all(p->tfd_in, p->rbuf + (size_t)(i % (uint64_t)p->depth) * p->slot, size);
    char c = 'A';
    xwrite(p->bfd, &c, 1, "bootstrap acknowledgement");
  }
  if (do_send && do_recv) pthread_join(th, NULL);
  return do_send ? a.t_end - t0 : 0;
}

/* ---- baseline TCP latency: ping-pong on one socket, TCP_NODELAY, polled - */
static void tcp_lat(struct peer *p, size_t size, uint64_t n, uint64_t *rtt) {
  set_phase("measuring TCP latency, %zu B, %" PRIu64 " round trips", size, n);
  bs_barrier(p);
  if (p->is_client) {
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = now_ns();
      bsend_all(p->tfd_out, p->sbuf, size);
      precv_all(p->tfd_out, p->rbuf, size);
      rtt[i] = now_ns() - t0;
    }
  } else {
    for (uint64_t i = 0; i < n; i++) {
      precv_all(p->tfd_in, p->rbuf, size);
      bsend_all(p->tfd_in, p->sbuf, size);
    }
  }
}

/* ---- set-up and tear-down shared by both sides -------------------------- */

static void peer_setup(struct peer *p, size_t max_size) {
  plugin_start(o.dev, &p->mydev);
  set_phase("listening on the plugin");
  NETCALL("listen", net->listen(o.dev, p->my_handle, &p->lcomm));
  if (!p->lcomm) die("plugin listen() returned ncclSuccess but no listen comm");

  /* handles and device names, both ways */
  struct hello mine, theirs;
  memset(&mine, 0, sizeof mine);
  memcpy(mine.handle, p->my_handle, sizeof mine.handle);
  snprintf(mine.dev, sizeof mine.dev, "%s", p->mydev.name);
  mine.speed_be = htobe64((uint64_t)(int64_t)p->mydev.speed);
  xwrite(p->bfd, &mine, sizeof mine, "sending the plugin handle");
  xread(p->bfd, &theirs, sizeof theirs, "receiving the plugin handle");
  memcpy(p->peer_handle, theirs.handle, sizeof p->peer_handle);
  theirs.dev[sizeof theirs.dev - 1] = 0;
  snprintf(p->peerdev.name, sizeof p->peerdev.name, "%s", theirs.dev);
  p->peerdev.speed = (int)(int64_t)be64toh(theirs.speed_be);

  plugin_connect_pair(o.dev, p->lcomm, p->peer_handle, &p->scomm, &p->rcomm, p->peer_name);

  p->slot = (max_size + 63) & ~(size_t)63;
  p->nslots = p->depth < 2 ? 2 : p->depth;
  size_t len = p->slot * (size_t)p->nslots;
  p->sbuf = xalloc(len);
  p->rbuf = xalloc(len);
  fill_pattern(p->sbuf, p->slot);
  for (int i = 1; i < p->nslots; i++) memcpy(p->sbuf + (size_t)i * p->slot, p->sbuf, p->slot);
  set_phase("registering buffers");
  NETCALL("regMr", net->regMr(p->scomm, p->sbuf, len, NCCL_PTR_HOST, &p->smh));
  NETCALL("regMr", net->regMr(p->rcomm, p->rbuf, len, NCCL_PTR_HOST, &p->rmh));
  bs_barrier(p);
}

static void peer_teardown(struct peer *p) {
  set_phase("closing the plugin comms");
  NETCALL("deregMr", net->deregMr(p->scomm, p->smh));
  NETCALL("deregMr", net->deregMr(p->rcomm, p->rmh));
  NETCALL("closeSend", net->closeSend(p->scomm));
  NETCALL("closeRecv", net->closeRecv(p->rcomm));
  NETCALL("closeListen", net->closeListen(p->lcomm));
  if (p->tfd_out >= 0) close(p->tfd_out);
  if (p->tfd_in >= 0) close(p->tfd_in);
  free(p->sbuf);
  free(p->rbuf);
}

/* ========================================================================
 * Server: executes what the client asks
 * ======================================================================== */

static int is_loopback_sa(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss->ss_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
    if (IN6_IS_ADDR_V4MAPPED(a)) return a->s6_addr[12] == 127;
  }
  return 0;
}

static int server_main(int lfd, int quiet) {
  struct peer P, *p = &P;
  memset(p, 0, sizeof *p);
  p->quiet = quiet;
  p->peer_name = "client";
  p->tfd_out = p->tfd_in = -1;
  start_watchdog();

  set_phase("waiting for a client");
  p->bfd = tcp_accept(lfd, "waiting for a client (--timeout)");
  close(lfd);
  struct sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  char host[NI_MAXHOST] = "?";
  if (getpeername(p->bfd, (struct sockaddr *)&peer, &plen) == 0)
    getnameinfo((struct sockaddr *)&peer, plen, host, sizeof host, NULL, 0, NI_NUMERICHOST);
  if (!quiet) printf("collx-perf: client %s connected\n", host);

  /* the client's plan: {magic, version, depth, max_size, check, want_tcp} */
  uint64_t cfg[6];
  wrecv(p->bfd, cfg, 6, "receiving the client's parameters");
  if (cfg[0] != WIRE_MAGIC || cfg[1] != WIRE_VERSION)
    die("the client speaks another protocol (magic 0x%" PRIx64 ", version %" PRIu64 ")", cfg[0], cfg[1]);
  if (cfg[2] < 1 || cfg[2] > MAX_DEPTH || cfg[3] < 1 || cfg[3] > MAX_MSG_SIZE)
    die("the client asks for depth %" PRIu64 ", messages up to %" PRIu64 " B: out of range", cfg[2], cfg[3]);
  p->depth = (int)cfg[2];
  o.check = (int)cfg[4];
  p->want_tcp = (int)cfg[5];
  if (is_loopback_sa(&peer)) force_loopback("the client is on this host", quiet);

  int tl = -1;
  uint64_t reply[2] = {0, 0};
  if (p->want_tcp) {
    struct sockaddr_storage me;
    socklen_t mlen = sizeof me;
    getsockname(p->bfd, (struct sockaddr *)&me, &mlen);
    tl = tcp_listen(me.ss_family, 0, 0);
    if (tl < 0) die("baseline: cannot listen: %s", strerror(errno));
    reply[1] = (uint64_t)sock_port(tl);
  }
  wsend(p->bfd, reply, 2, "answering the client");
  if (p->want_tcp) {
    for (int i = 0; i < 2; i++) {
      int fd = tcp_accept(tl, "baseline TCP connection");
      char d;
      xread(fd, &d, 1, "baseline TCP connection");
      if (d == 'S') p->tfd_in = fd;       /* the client sends on it */
      else if (d == 'R') p->tfd_out = fd; /* the client receives on it */
      else die("baseline: unexpected connection");
      set_io_timeouts(fd);
    }
    close(tl);
  }

  peer_setup(p, (size_t)cfg[3]);
  if (!quiet) printf("collx-perf: connected through the plugin, device %s; the client drives the test\n", p->mydev.name);
  fflush(stdout);

  for (;;) {
    uint64_t c[CMD_WORDS];
    set_phase("waiting for the client's next command");
    wrecv(p->bfd, c, CMD_WORDS, "waiting for the client's next command");
    if (c[0] == CMD_END) break;
    if (c[0] == CMD_PRINT) {
      char text[512];
      if (c[1] >= sizeof text) die("bootstrap: oversized text");
      xread(p->bfd, text, (size_t)c[1], "receiving a result line");
      text[c[1]] = 0;
      if (!quiet) {
        fputs(text, stdout);
        fflush(stdout);
      }
      continue;
    }
    if (c[0] != CMD_RUN) die("bootstrap: unknown command %" PRIu64, c[0]);
    int tr = (int)c[1], test = (int)c[2], bidir = (int)c[5];
    size_t size = (size_t)c[3];
    uint64_t n = c[4];
    if (size < 1 || size > cfg[3] || n < 1) die("bootstrap: bad run request");
    if (tr == TR_TCP && !p->want_tcp) die("bootstrap: baseline run without baseline sockets");
    uint64_t r[2] = {0, 0};
    if (test == TEST_BW)
      r[1] = tr == TR_PLUGIN ? plugin_bw(p, size, n, bidir, 1) : tcp_bw(p, size, n, bidir, 1);
    else if (tr == TR_PLUGIN)
      plugin_lat(p, size, n, NULL);
    else
      tcp_lat(p, size, n, NULL);
    wsend(p->bfd, r, 2, "reporting to the client");
  }
  peer_teardown(p);
  uint64_t bye[2] = {0, 0};
  wsend(p->bfd, bye, 2, "saying goodbye");
  close(p->bfd);
  if (!quiet) printf("collx-perf: done\n");
  fflush(stdout);
  return 0;
}

/* ========================================================================
 * Client: plans, measures, prints
 * ======================================================================== */

/* Print a line here and on the server. */
static void emit(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct peer *p, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n >= (int)sizeof text) n = (int)sizeof text - 1;
  fputs(text, stdout);
  fflush(stdout);
  uint64_t c[CMD_WORDS] = {CMD_PRINT, (uint64_t)n, 0, 0, 0, 0};
  wsend(p->bfd, c, CMD_WORDS, "sending a result line");
  xwrite(p->bfd, text, (size_t)n, "sending a result line");
}

/* One round on both sides.  Returns this side's and the server's send time. */
static void bw_round(struct peer *p, int tr, size_t size, uint64_t n, uint64_t *e_c, uint64_t *e_s) {
  uint64_t c[CMD_WORDS] = {CMD_RUN, (uint64_t)tr, TEST_BW, size, n, (uint64_t)o.bidir};
  wsend(p->bfd, c, CMD_WORDS, "sending a run request");
  *e_c = tr == TR_PLUGIN ? plugin_bw(p, size, n, 1, o.bidir) : tcp_bw(p, size, n, 1, o.bidir);
  uint64_t r[2];
  wrecv(p->bfd, r, 2, "waiting for the server's figures");
  *e_s = r[1];
  if (*e_c == 0) *e_c = 1;
  if (o.bidir && *e_s == 0) *e_s = 1;
}

static void lat_round(struct peer *p, int tr, size_t size, uint64_t n, uint64_t *rtt) {
  uint64_t c[CMD_WORDS] = {CMD_RUN, (uint64_t)tr, TEST_LAT, size, n, 0};
  wsend(p->bfd, c, CMD_WORDS, "sending a run request");
  if (tr == TR_PLUGIN)
    plugin_lat(p, size, n, rtt);
  else
    tcp_lat(p, size, n, rtt);
  uint64_t r[2];
  wrecv(p->bfd, r, 2, "waiting for the server");
}

struct bwres {
  uint64_t n;
  double cs, sc; /* GB/s, client->server and server->client */
};

struct latres {
  uint64_t n;
  double min, med, avg, p99; /* half round trip, us */
};

static void measure_bw(struct peer *p, int tr, size_t size, double secs, struct bwres *res) {
  uint64_t e_c, e_s, n;
  /* warm-up: 16 messages or two windows, but no more than about 16 MiB */
  uint64_t warm = (uint64_t)(2 * o.depth > 16 ? 2 * o.depth : 16);
  uint64_t cap = (16u << 20) / size;
  if (warm > cap) warm = cap > (uint64_t)o.depth ? cap : (uint64_t)o.depth;
  if (o.iters) {
    bw_round(p, tr, size, warm < o.iters ? warm : o.iters, &e_c, &e_s);
    n = o.iters;
  } else {
    /* probe until a round lasts 50 ms, then scale to the wanted duration;
     * the first round only warms up (first use of buffers and connections) */
    uint64_t cnt = warm, e;
    for (int round = 0;; round++) {
      bw_round(p, tr, size, cnt, &e_c, &e_s);
      e = o.bidir && e_s > e_c ? e_s : e_c;
      if (o.verbose >= 2)
        note("probe: %zu B x %" PRIu64 " in %.3f ms", size, cnt, (double)e / 1e6);
      if (round == 0) continue;
      if (e >= 50000000ull || cnt >= (1ull << 40)) break;
      double f = 60e6 / (double)e;
      cnt = (uint64_t)((double)cnt * (f > 100 ? 100 : f < 2 ? 2 : f));
    }
    double want = secs * NS / (double)e * (double)cnt;
    n = want < (double)o.depth ? (uint64_t)o.depth : (uint64_t)want;
  }
  bw_round(p, tr, size, n, &e_c, &e_s);
  res->n = n;
  res->cs = (double)size * (double)n / ((double)e_c);
  res->sc = o.bidir ? (double)size * (double)n / ((double)e_s) : 0;
}

static void measure_lat(struct peer *p, int tr, size_t size, double secs, struct latres *res) {
  uint64_t warm = 500, n;
  uint64_t *w = malloc(warm * sizeof *w);
  if (!w) die("out of memory");
  lat_round(p, tr, size, warm, w);
  if (o.iters) {
    n = o.iters;
  } else {
    /* round trip estimated by the mean of the warm-up's 10th..90th
     * percentiles: the first round trips and stray outliers would skew it */
    qsort(w, warm, sizeof *w, cmp_u64);
    uint64_t sum = 0;
    for (uint64_t i = warm / 10; i < warm - warm / 10; i++) sum += w[i];
    double per = (double)sum / (double)(warm - 2 * (warm / 10));
    double want = secs * NS / (per > 1 ? per : 1);
    n = want < 1000 ? 1000 : want > 5e6 ? 5000000 : (uint64_t)want;
  }
  free(w);
  uint64_t *rtt = malloc(n * sizeof *rtt);
  if (!rtt) die("out of memory");
  lat_round(p, tr, size, n, rtt);
  qsort(rtt, n, sizeof *rtt, cmp_u64);
  double sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += (double)rtt[i];
  uint64_t i99 = (uint64_t)ceil(0.99 * (double)n);
  if (i99 > 0) i99--;
  res->n = n;
  res->min = (double)rtt[0] / 2e3;
  res->med = (n % 2 ? (double)rtt[n / 2] : ((double)rtt[n / 2 - 1] + (double)rtt[n / 2]) / 2) / 2e3;
  res->avg = sum / (double)n / 2e3;
  res->p99 = (double)rtt[i99] / 2e3;
  free(rtt);
}

static int build_sizes(size_t *sz) {
  int n = 0;
  for (size_t s = o.min_size; s <= o.max_size && n < MAX_SIZES; s *= 2) {
    sz[n++] = s;
    if (s > SIZE_MAX / 2) break;
  }
  if (n && sz[n - 1] != o.max_size && n < MAX_SIZES) sz[n++] = o.max_size;
  return n;
}

static const char *rule =
    "--------------------------------------------------------------------------------------\n";

static int client_main(const char *host, int port, pid_t server_pid) {
  struct peer P, *p = &P;
  memset(p, 0, sizeof *p);
  p->is_client = 1;
  p->peer_name = "server";
  p->tfd_out = p->tfd_in = -1;
  p->depth = o.depth;
  p->want_tcp = o.compare;
  start_watchdog();

  size_t sizes[MAX_SIZES];
  int nsizes = build_sizes(sizes);
  int nruns = o.compare ? 2 : 1;
  double secs = o.seconds;
  if (secs <= 0) {
    secs = 12.0 / (nsizes * nruns);
    secs = secs > 2.0 ? 2.0 : secs < 0.2 ? 0.2 : secs;
  }

  set_phase("connecting to the server");
  p->bfd = tcp_connect_host(host, port, "bootstrap connection to the server");
  uint64_t cfg[6] = {WIRE_MAGIC, WIRE_VERSION, (uint64_t)o.depth, o.max_size, (uint64_t)o.check,
                     (uint64_t)o.compare};
  wsend(p->bfd, cfg, 6, "sending the parameters");
  uint64_t reply[2];
  wrecv(p->bfd, reply, 2, "waiting for the server to accept the parameters");
  if (o.compare) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(p->bfd, (struct sockaddr *)&ss, &len) != 0) die("getpeername: %s", strerror(errno));
    if (ss.ss_family == AF_INET6)
      ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)reply[1]);
    else
      ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)reply[1]);
    for (int i = 0; i < 2; i++) {
      int err = 0;
      int fd = tcp_connect_addr((struct sockaddr *)&ss, len, deadline_in(), &err);
      if (fd < 0) die("baseline: cannot connect to the server: %s", strerror(err));
      set_nodelay(fd);
      char d = i == 0 ? 'S' : 'R';
      xwrite(fd, &d, 1, "baseline TCP connection");
      set_io_timeouts(fd);
      if (i == 0) p->tfd_out = fd;
      else p->tfd_in = fd;
    }
  }
  peer_setup(p, o.max_size);

  /* header */
  char b1[32], b2[32];
  emit(p, "%s", rule);
  if (o.test == TEST_BW)
    emit(p, "                 collx-perf: bandwidth test, %s\n",
         o.bidir ? "bidirectional (client <-> server)" : "client -> server");
  else
    emit(p, "                 collx-perf: latency test (ping-pong, half round trip)\n");
  emit(p, " Plugin          : \"%s\"  %s\n", net->name, g_plugin_path);
  emit(p, " Devices         : client #%d %s (%d Mbps), server %s (%d Mbps)\n", o.dev, p->mydev.name,
       p->mydev.speed, p->peerdev.name, p->peerdev.speed);
  if (o.test == TEST_BW) emit(p, " In flight       : %d message(s) per direction\n", o.depth);
  if (o.iters)
    emit(p, " Iterations      : %" PRIu64 " per size\n", o.iters);
  else
    emit(p, " Duration        : %.2f s per size%s\n", secs, o.compare ? " and transport" : "");
  if (nsizes == 1)
    emit(p, " Size            : %zu B\n", sizes[0]);
  else
    emit(p, " Sizes           : %s .. %s, %d sizes\n", fmt_size(sizes[0], b1, sizeof b1),
         fmt_size(sizes[nsizes - 1], b2, sizeof b2), nsizes);
  if (o.compare)
    emit(p, " Baseline        : plain TCP, one socket per direction, TCP_NODELAY, same processes%s\n",
         o.test == TEST_LAT ? "; receives busy-poll" : "");
  if (o.check) emit(p, " Data check      : every received message (plugin runs)\n");
  emit(p, " Units           : GB/s = 1e9 bytes/s; latency = half round trip in usec\n");
  emit(p, "%s", rule);

  struct bwres bw[2][MAX_SIZES];
  struct latres lat[2][MAX_SIZES];
  for (int tr = 0; tr < nruns; tr++) {
    emit(p, " %s\n", tr == TR_PLUGIN ? "collx (through the plugin)" : "plain TCP (baseline)");
    if (o.test == TEST_BW && o.bidir)
      emit(p, " %10s %12s %12s %12s %12s %15s\n", "#bytes", "#iterations", "c->s[GB/s]",
           "s->c[GB/s]", "sum[GB/s]", "MsgRate[Mpps]");
    else if (o.test == TEST_BW)
      emit(p, " %10s %12s %12s %15s\n", "#bytes", "#iterations", "BW[GB/s]", "MsgRate[Mpps]");
    else
      emit(p, " %10s %12s %11s %13s %11s %11s\n", "#bytes", "#iterations", "t_min[us]",
           "t_median[us]", "t_avg[us]", "t_p99[us]");
    for (int i = 0; i < nsizes; i++) {
      if (o.test == TEST_BW) {
        struct bwres *r = &bw[tr][i];
        measure_bw(p, tr, sizes[i], secs, r);
        double mpps = (r->cs + r->sc) / (double)sizes[i] * 1e3;
        if (o.bidir)
          emit(p, " %10zu %12" PRIu64 " %12.3f %12.3f %12.3f %15.4f\n", sizes[i], r->n, r->cs,
               r->sc, r->cs + r->sc, mpps);
        else
          emit(p, " %10zu %12" PRIu64 " %12.3f %15.4f\n", sizes[i], r->n, r->cs, mpps);
      } else {
        struct latres *r = &lat[tr][i];
        measure_lat(p, tr, sizes[i], secs, r);
        emit(p, " %10zu %12" PRIu64 " %11.2f %13.2f %11.2f %11.2f\n", sizes[i], r->n, r->min,
             r->med, r->avg, r->p99);
      }
    }
    emit(p, "%s", rule);
  }
  if (o.compare) {
    emit(p, " collx / plain TCP%s\n", o.test == TEST_BW ? (o.bidir ? " (sum of both directions)" : "")
                                                       : " (median half round trip)");
    if (o.test == TEST_BW)
      emit(p, " %10s %12s %12s %10s\n", "#bytes", "collx[GB/s]", "tcp[GB/s]", "ratio");
    else
      emit(p, " %10s %12s %12s %10s\n", "#bytes", "collx[us]", "tcp[us]", "ratio");
    double last = 0;
    for (int i = 0; i < nsizes; i++) {
      double a, b;
      if (o.test == TEST_BW) {
        a = bw[0][i].cs + bw[0][i].sc;
        b = bw[1][i].cs + bw[1][i].sc;
      } else {
        a = lat[0][i].med;
        b = lat[1][i].med;
      }
      last = b > 0 ? a / b : 0;
      emit(p, " %10zu %12.3f %12.3f %10.2f\n", sizes[i], a, b, last);
    }
    emit(p, "%s", rule);
    if (o.test == TEST_BW)
      emit(p, "ratio collx/tcp: bw %.2f  lat -     (%zu B%s; bw above 1: collx faster)\n", last,
           sizes[nsizes - 1], o.bidir ? ", bidirectional sum" : "");
    else
      emit(p, "ratio collx/tcp: bw -  lat %.2f     (%zu B median; lat above 1: collx slower)\n",
           last, sizes[nsizes - 1]);
  }

  uint64_t end[CMD_WORDS] = {CMD_END, 0, 0, 0, 0, 0};
  wsend(p->bfd, end, CMD_WORDS, "ending the test");
  peer_teardown(p);
  uint64_t bye[2];
  wrecv(p->bfd, bye, 2, "waiting for the server to finish");
  close(p->bfd);

  if (server_pid > 0) {
    set_phase("waiting for the server process to exit");
    uint64_t dl = deadline_in();
    int st = 0;
    for (;;) {
      pid_t r = waitpid(server_pid, &st, WNOHANG);
      if (r == server_pid) break;
      if (r < 0) die("waitpid: %s", strerror(errno));
      if (now_ns() > dl) die("the server process did not exit");
      usleep(10000);
    }
    g_nchildren = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "collx-perf: error: the server process failed (%s %d)\n",
              WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      return 1;
    }
  }
  return 0;
}

/* ========================================================================
 * --ranks N: ring all-reduce over N local processes
 * ======================================================================== */

enum { RC_WARM = 1, RC_RUN = 2, RC_END = 3, RC_PEER = 4 };

struct rcmd { /* parent -> rank */
  int32_t cmd, pad;
  uint64_t size, iters;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
};

struct rmsg { /* rank -> parent */
  int32_t type, rank;
  uint64_t errors, elapsed;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  char dev[64];
  int64_t speed;
};

struct ring {
  int N, r, W;
  void *lcomm, *scomm, *rcomm, *smh, *rmh;
  float *in, *out, *tmp;
  size_t slice; /* elements */
  int ctl;
};

static inline int modn(int a, int n) { return ((a % n) + n) % n; }

struct rop { /* one posted slice */
  int step;
  size_t off, count;
  float *buf;
  void *req;
};

/* One out-of-place ring all-reduce of `count` floats: reduce-scatter then
 * all-gather, each chunk cut into slices, up to W slices in flight each way.
 * Step s sends chunk (r-s) and receives chunk (r-s-1); steps < N-1 add the
 * received partial sum to this rank's input, later steps receive finished
 * chunks straight into the output.  A send of step s waits for the receive of
 * the same slice at step s-1; an all-gather receive waits for any send still
 * reading the slice it overwrites. */
static void allreduce(struct ring *g, size_t count, uint64_t *nbytes_sent) {
  const int N = g->N, r = g->r, W = g->W, S = 2 * (N - 1);
  size_t coff[MAX_RANKS], ccnt[MAX_RANKS], cns[MAX_RANKS];
  for (int c = 0; c < N; c++) {
    ccnt[c] = count / (size_t)N + ((size_t)c < count % (size_t)N);
    coff[c] = (size_t)c * (count / (size_t)N) + ((size_t)c < count % (size_t)N ? (size_t)c : count % (size_t)N);
    cns[c] = (ccnt[c] + g->slice - 1) / g->slice;
  }
  /* first op index of each step, per direction */
  size_t sstart[2 * MAX_RANKS + 1], rstart[2 * MAX_RANKS + 1];
  sstart[0] = rstart[0] = 0;
  for (int s = 0; s < S; s++) {
    sstart[s + 1] = sstart[s] + cns[modn(r - s, N)];
    rstart[s + 1] = rstart[s] + cns[modn(r - s - 1, N)];
  }
  const size_t ts = sstart[S], trr = rstart[S];
  size_t sp = 0, sd = 0, rp = 0, rd = 0; /* posted / done, in op order */
  int ss = 0, rs = 0;                    /* step of the next op to post */
  size_t sj = 0, rj = 0;                 /* slice within that step */
  struct rop sq[MAX_DEPTH], rq[MAX_DEPTH];
  struct idle id = {0, 0};
  uint64_t sent = 0;

  while (sd < ts || rd < trr) {
    int prog = 0;
    beat();
    /* post receives */
    while (rp < trr && rp - rd < (size_t)W) {
      int c = modn(r - rs - 1, N);
      if (rs >= N - 1) {
        int ds = rs + 1 - N; /* send still reading this output slice? */
        if (ds >= 1 && sstart[ds] + rj >= sd) break;
      }
      struct rop *q = &rq[rp % (size_t)W];
      q->step = rs;
      q->off = coff[c] + rj * g->slice;
      q->count = ccnt[c] - rj * g->slice < g->slice ? ccnt[c] - rj * g->slice : g->slice;
      q->buf = rs < N - 1 ? g->tmp + (rp % (size_t)W) * g->slice : g->out + q->off;
      int sz = (int)(q->count * sizeof(float)), tag = MSG_TAG;
      void *dptr = q->buf, *mh = g->rmh;
      q->req = NULL;
      NETCALL("irecv", net->irecv(g->rcomm, 1, &dptr, &sz, &tag, &mh, &q->req));
      if (!q->req) break;
      rp++;
      prog = 1;
      if (++rj == cns[c]) {
        rj = 0;
        rs++;
      }
    }
    /* post sends */
    while (sp < ts && sp - sd < (size_t)W) {
      int c = modn(r - ss, N);
      if (ss >= 1 && rstart[ss - 1] + sj >= rd) break; /* slice not reduced yet */
      struct rop *q = &sq[sp % (size_t)W];
      q->step = ss;
      q->off = coff[c] + sj * g->slice;
      q->count = ccnt[c] - sj * g->slice < g->slice ? ccnt[c] - sj * g->slice : g->slice;
      q->buf = (ss == 0 ? g->in : g->out) + q->off;
      q->req = NULL;
      NETCALL("isend", net->isend(g->scomm, q->buf, (int)(q->count * sizeof(float)), MSG_TAG,
                                  g->smh, &q->req));
      if (!q->req) break; /* the next rank has not posted the receive yet */
      sent += q->count * sizeof(float);
      sp++;
      prog = 1;
      if (++sj == cns[c]) {
        sj = 0;
        ss++;
      }
    }
    /* complete receives in order; reduce-scatter ones are added now */
    while (rd < rp) {
      struct rop *q = &rq[rd % (size_t)W];
      if (!req_done(q->req, (long)(q->count * sizeof(float)), "irecv")) break;
      if (q->step < N - 1) {
        float *o_ = g->out + q->off;
        const float *a = g->in + q->off, *b = q->buf;
        for (size_t k = 0; k < q->count; k++) o_[k] = a[k] + b[k];
      }
      rd++;
      prog = 1;
    }
    while (sd < sp) {
      if (!req_done(sq[sd % (size_t)W].req, -1, "isend")) break;
      sd++;
      prog = 1;
    }
    if (prog) {
      id.n = 0;
      id.since = 0;
    } else {
      idle_tick(&id, g->ctl, "parent process", g_phase);
    }
  }
  *nbytes_sent += sent;
}

static size_t ar_check(const struct ring *g, size_t count) {
  const float base = (float)(g->N * (g->N + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < count; i++)
    if (g->out[i] != base + (float)(g->N * (int)(i % 5))) bad++;
  return bad;
}

static int rank_main(int r, int N, int ctl) {
  char role[32];
  snprintf(role, sizeof role, "rank %d", r);
  became_child(strdup(role));
  start_watchdog();
  struct ring G, *g = &G;
  memset(g, 0, sizeof *g);
  g->N = N;
  g->r = r;
  g->W = o.depth;
  g->ctl = ctl;
  g->slice = o.slice / sizeof(float);

  struct devinfo di;
  plugin_start(o.dev, &di);
  struct rmsg m;
  memset(&m, 0, sizeof m);
  m.type = RC_PEER;
  m.rank = r;
  set_phase("listening on the plugin");
  NETCALL("listen", net->listen(o.dev, m.handle, &g->lcomm));
  if (!g->lcomm) die("plugin listen() returned ncclSuccess but no listen comm");
  snprintf(m.dev, sizeof m.dev, "%s", di.name);
  m.speed = di.speed;
  xwrite(ctl, &m, sizeof m, "sending the handle to the parent");
  static struct rcmd c; /* static: its handle is what connect() is given */
  xread(ctl, &c, sizeof c, "waiting for the next rank's handle");
  if (c.cmd != RC_PEER) die("parent out of step");
  char peer[32];
  snprintf(peer, sizeof peer, "rank %d", (r + 1) % N);
  plugin_connect_pair(o.dev, g->lcomm, c.handle, &g->scomm, &g->rcomm, peer);

  size_t maxc = o.max_size / sizeof(float);
  size_t tmpc = g->slice * (size_t)g->W;
  size_t total = (2 * maxc + tmpc) * sizeof(float);
  float *region = xalloc(total);
  g->in = region;
  g->out = region + maxc;
  g->tmp = region + 2 * maxc;
  for (size_t i = 0; i < maxc; i++) g->in[i] = (float)(r + 1) + (float)(i % 5);
  set_phase("registering buffers");
  NETCALL("regMr", net->regMr(g->scomm, region, total, NCCL_PTR_HOST, &g->smh));
  NETCALL("regMr", net->regMr(g->rcomm, region, total, NCCL_PTR_HOST, &g->rmh));
  m.type = RC_PEER;
  xwrite(ctl, &m, sizeof m, "telling the parent the ring is up");

  for (;;) {
    set_phase("waiting for the parent");
    xread(ctl, &c, sizeof c, "waiting for the parent");
    if (c.cmd == RC_END) break;
    size_t count = (size_t)c.size / sizeof(float);
    uint64_t sent = 0;
    memset(&m, 0, sizeof m);
    m.type = c.cmd;
    m.rank = r;
    if (c.cmd == RC_WARM) {
      /* c.iters all-reduces, each checked; only the all-reduces are timed */
      set_phase("warm-up all-reduce of %zu floats", count);
      for (uint64_t k = 0; k < c.iters; k++) {
        memset(g->out, 0xff, count * sizeof(float)); /* NaN: unwritten output shows */
        uint64_t t0 = now_ns();
        allreduce(g, count, &sent);
        m.elapsed += now_ns() - t0;
        m.errors += ar_check(g, count);
      }
      memset(g->out, 0xff, count * sizeof(float));
    } else if (c.cmd == RC_RUN) {
      set_phase("all-reduce of %zu floats, %" PRIu64 " times", count, c.iters);
      uint64_t t0 = now_ns();
      for (uint64_t k = 0; k < c.iters; k++) allreduce(g, count, &sent);
      m.elapsed = now_ns() - t0;
      m.errors = ar_check(g, count);
    } else {
      die("unknown command %d from the parent", c.cmd);
    }
    xwrite(ctl, &m, sizeof m, "reporting to the parent");
  }
  set_phase("closing the plugin comms");
  NETCALL("deregMr", net->deregMr(g->scomm, g->smh));
  NETCALL("deregMr", net->deregMr(g->rcomm, g->rmh));
  NETCALL("closeSend", net->closeSend(g->scomm));
  NETCALL("closeRecv", net->closeRecv(g->rcomm));
  NETCALL("closeListen", net->closeListen(g->lcomm));
  memset(&m, 0, sizeof m);
  m.type = RC_END;
  m.rank = r;
  xwrite(ctl, &m, sizeof m, "saying goodbye to the parent");
  return 0;
}

static const char *describe_exit(pid_t pid, char *buf, size_t len) {
  int st = 0;
  pid_t w = waitpid(pid, &st, 0);
  if (w != pid) snprintf(buf, len, "status unknown");
  else if (WIFEXITED(st)) snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else snprintf(buf, len, "status 0x%x", st);
  return buf;
}

/* Read one message from every rank; dies naming the rank that failed. */
static void gather(int N, const int *ctl, struct rmsg *msgs, int type, const char *what,
                   uint64_t expected_ns) {
  int got[MAX_RANKS] = {0}, left = N;
  uint64_t dl = deadline_in();
  if (dl != UINT64_MAX) dl += expected_ns; /* the ranks are busy that long anyway */
  while (left) {
    struct pollfd pf[MAX_RANKS];
    for (int i = 0; i < N; i++) {
      pf[i].fd = got[i] ? -1 : ctl[i];
      pf[i].events = POLLIN;
      pf[i].revents = 0;
    }
    uint64_t t = now_ns();
    if (t >= dl) {
      char list[256] = "";
      for (int i = 0, n = 0; i < N; i++)
        if (!got[i]) n += snprintf(list + n, sizeof list - (size_t)n, "%s%d", n ? "," : "", i);
      die("%s: rank(s) %s did not answer within %.0f s", what, list, o.timeout);
    }
    int rc = poll(pf, (nfds_t)N, 500);
    beat();
    if (rc < 0 && errno != EINTR) die("poll: %s", strerror(errno));
    for (int i = 0; i < N && rc > 0; i++) {
      if (!pf[i].revents) continue;
      ssize_t k = recv(ctl[i], &msgs[i], sizeof msgs[i], MSG_WAITALL);
      if (k != (ssize_t)sizeof msgs[i]) {
        char st[96];
        pid_t pid = g_children[i];
        g_children[i] = 0;
        die("%s: rank %d failed (%s)", what, i, describe_exit(pid, st, sizeof st));
      }
      if (msgs[i].type != type || msgs[i].rank != i) die("%s: rank %d out of step", what, i);
      got[i] = 1;
      left--;
    }
  }
}

static void scatter(int N, const int *ctl, struct rcmd *c, const char *what) {
  for (int i = 0; i < N; i++) xwrite(ctl[i], c, sizeof *c, what);
}

static int ranks_main(void) {
  const int N = o.nranks;
  force_loopback("all ranks are on this host", 0);
  size_t sizes[MAX_SIZES];
  int nsizes = build_sizes(sizes);
  for (int i = 0; i < nsizes; i++) sizes[i] &= ~(size_t)3;
  double budget = o.seconds > 0 ? o.seconds : (12.0 / nsizes > 1.0 ? 1.0 : 12.0 / nsizes);

  int ctl[MAX_RANKS];
  fflush(stdout);
  for (int i = 0; i < N; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
      for (int k = 0; k < i; k++) close(ctl[k]);
      close(sv[0]);
      set_nonblock(sv[1], 1);
      if (getppid() == 1) _exit(1);
      int rc = rank_main(i, N, sv[1]);
      fflush(stdout);
      _exit(rc);
    }
    close(sv[1]);
    set_nonblock(sv[0], 1);
    ctl[i] = sv[0];
    g_children[i] = pid;
    g_nchildren = i + 1;
  }
  start_watchdog();

  static struct rmsg m[MAX_RANKS];
  gather(N, ctl, m, RC_PEER, "setting up the ring (plugin init and listen)", 0);
  for (int i = 0; i < N; i++) {
    struct rcmd c;
    memset(&c, 0, sizeof c);
    c.cmd = RC_PEER;
    memcpy(c.handle, m[(i + 1) % N].handle, sizeof c.handle);
    xwrite(ctl[i], &c, sizeof c, "handing out the handles");
  }
  char devname[64];
  snprintf(devname, sizeof devname, "%s", m[0].dev);
  long speed = (long)m[0].speed;
  gather(N, ctl, m, RC_PEER, "connecting the ring", 0);

  char b1[32], b2[32];
  printf("%s", rule);
  printf("        collx-perf: ring all-reduce over %d local ranks (no GPU), float32 sum\n", N);
  printf(" Plugin          : \"%s\"  %s\n", net->name, g_plugin_path);
  printf(" Device          : #%d %s (%ld Mbps), each rank sends to rank+1 and receives from rank-1\n",
         o.dev, devname, speed);
  printf(" Algorithm       : reduce-scatter + all-gather, %s slices, %d in flight each way\n",
         fmt_size(o.slice, b1, sizeof b1), o.depth);
  if (nsizes == 1)
    printf(" Size            : %zu B\n", sizes[0]);
  else
    printf(" Sizes           : %s .. %s, %d sizes\n", fmt_size(sizes[0], b1, sizeof b1),
           fmt_size(sizes[nsizes - 1], b2, sizeof b2), nsizes);
  if (o.iters)
    printf(" Iterations      : %" PRIu64 " per size (after 2 checked warm-ups)\n", o.iters);
  else
    printf(" Duration        : about %.2f s per size (after checked warm-ups)\n", budget);
  printf(" Check           : every element on every rank after every warm-up and timed run\n"
         "                   (sums exact in float32); WRONG n = wrong elements found in all\n");
  printf(" Units           : time of the slowest rank; algbw = bytes/time, busbw = algbw*2(N-1)/N, GB/s\n");
  printf("%s", rule);
  printf(" %12s %11s %8s %12s %12s %12s  %s\n", "#bytes", "#floats", "#iters", "time[us]",
         "algbw[GB/s]", "busbw[GB/s]", "check");
  fflush(stdout);

  uint64_t total_bad = 0;
  for (int i = 0; i < nsizes; i++) {
    struct rcmd c;
    memset(&c, 0, sizeof c);
    c.size = sizes[i];
    /* warm-up rounds: the first pays for first use of buffers and socket
     * memory and is not used; later ones double until one lasts 50 ms */
    uint64_t bad = 0, tw = 0, kw = 1, per = 0; /* per: ns per all-reduce, once known */
    c.cmd = RC_WARM;
    for (int round = 0;; round++) {
      c.iters = kw;
      scatter(N, ctl, &c, "starting a warm-up");
      gather(N, ctl, m, RC_WARM, "warm-up all-reduce", 2 * kw * per);
      tw = 0;
      for (int k = 0; k < N; k++) {
        bad += m[k].errors;
        if (m[k].elapsed > tw) tw = m[k].elapsed;
      }
      per = tw / kw;
      if (round == 0) continue;
      if (o.iters || tw >= 50000000ull || kw >= 4096) break;
      kw *= 2;
    }
    uint64_t iters = o.iters;
    if (!iters) {
      double want = budget * NS / (double)(per ? per : 1);
      iters = want < 2 ? 2 : want > 100000 ? 100000 : (uint64_t)want;
    }
    c.cmd = RC_RUN;
    c.iters = iters;
    scatter(N, ctl, &c, "starting a timed run");
    gather(N, ctl, m, RC_RUN, "timed all-reduce", 2 * iters * per);
    uint64_t tmax = 0;
    for (int k = 0; k < N; k++) {
      bad += m[k].errors;
      if (m[k].elapsed > tmax) tmax = m[k].elapsed;
    }
    double t_us = (double)tmax / (double)iters / 1e3;
    double alg = (double)sizes[i] / (t_us * 1e3);
    double bus = alg * 2.0 * (N - 1) / N;
    char chk[32];
    if (bad) snprintf(chk, sizeof chk, "WRONG %" PRIu64, bad);
    else snprintf(chk, sizeof chk, "OK");
    printf(" %12zu %11zu %8" PRIu64 " %12.1f %12.3f %12.3f  %s\n", sizes[i], sizes[i] / 4, iters,
           t_us, alg, bus, chk);
    fflush(stdout);
    total_bad += bad;
  }
  struct rcmd c;
  memset(&c, 0, sizeof c);
  c.cmd = RC_END;
  scatter(N, ctl, &c, "ending the run");
  gather(N, ctl, m, RC_END, "closing the ring", 0);
  set_phase("waiting for the ranks to exit");
  int failed = 0;
  for (int i = 0; i < N; i++) {
    char st[96];
    pid_t pid = g_children[i];
    g_children[i] = 0;
    describe_exit(pid, st, sizeof st);
    if (strcmp(st, "exit status 0") != 0) {
      fprintf(stderr, "collx-perf: error: rank %d: %s\n", i, st);
      failed = 1;
    }
    close(ctl[i]);
  }
  g_nchildren = 0;
  printf("%s", rule);
  if (total_bad || failed) {
    printf("collx-perf: all-reduce over %d ranks: %" PRIu64 " wrong element(s)%s\n", N, total_bad,
           failed ? ", and a rank failed" : "");
    return 1;
  }
  printf("collx-perf: all-reduce over %d ranks correct at every size\n", N);
  return 0;
}

/* ========================================================================
 * Command line
 * ======================================================================== */

static void usage(FILE *f) {
  fprintf(f,
"Usage:\n"
"  collx-perf --listen [options]          server: wait for one client\n"
"  collx-perf HOST [options]              client: connect to the server on HOST\n"
"  collx-perf --self [options]            server and client on this host, one command\n"
"  collx-perf --ranks N [options]         ring all-reduce over N local processes (no GPU)\n"
"\n"
"Bandwidth / latency (the client's options decide the test; the server only\n"
"needs --listen and, if they differ from the defaults, --port/--dev/--plugin):\n"
"  --test bw|lat        bandwidth sweep (default) or ping-pong latency\n"
"  -s, --size SIZE      one message size (K, M, G suffixes: 512K, 4M)\n"
"  --min SIZE --max SIZE  sweep bounds, doubling (bw: 8 .. 4M; lat: 8)\n"
"  -d, --depth N        bw: messages in flight per direction, 1..%d (default 8)\n"
"  -b, --bidir          bw: both directions at once; the sum is reported too\n"
"  -n, --iters N        iterations per size (default: time based, see -t)\n"
"  -t, --time SEC       seconds per size and transport (default: 12 s shared by all\n"
"                       sizes and transports, 0.2 .. 2 s each; probing comes on top)\n"
"  --compare            after the plugin run, the same sizes over plain TCP (one\n"
"                       socket per direction, TCP_NODELAY), with the ratio\n"
"  --baseline tcp       same as --compare\n"
"  --check              bw: verify the content and order of every received message\n"
"  -p, --port P         bootstrap TCP port (default %d; --self: any free port)\n"
"\n"
"Ring all-reduce (--ranks N, 2..%d): float32 sum, sizes 1K .. 64M unless\n"
"  -s/--min/--max; -d: slices in flight each way (default 8); --slice SIZE: slice\n"
"  size (default 512K); -n / -t as above.  Exit status 1 if any element is wrong.\n"
"\n"
"Common:\n"
"  --dev N              plugin device (default 0); choose interfaces with\n"
"                       COLLX_IFNAME as usual (set to lo for --ranks, --self and a\n"
"                       client of localhost when neither it nor NCCL_SOCKET_IFNAME is set)\n"
"  --plugin PATH        plugin to load (default: $COLLX_PLUGIN, then ../lib/, .libs/,\n"
"                       ../.libs/ next to this program, then the loader path)\n"
"  --timeout SEC        give up when a wait makes no progress for SEC s (default 60;\n"
"                       0: never)\n"
"  -v, --verbose        plugin INFO messages and which plugin was loaded (-vv: TRACE)\n"
"  -h, --help           this text\n"
"  -V, --version        the plugin's name and file\n"
"\n"
"Examples:\n"
"  collx-perf --self --compare -s 512K -d 8 --bidir\n"
"  collx-perf --self --compare --test lat -s 8\n"
"  collx-perf --ranks 4\n",
          MAX_DEPTH, DEFAULT_PORT, MAX_RANKS);
}

static void bad_arg(const char *opt, const char *val) {
  fprintf(stderr, "collx-perf: invalid value for %s: '%s' (see --help)\n", opt, val);
  exit(2);
}

static void two_modes(void) {
  fprintf(stderr, "collx-perf: choose one of --listen, HOST, --self, --ranks N\n");
  exit(2);
}

static void parse_args(int argc, char **argv) {
  enum { O_LISTEN = 256, O_SELF, O_RANKS, O_TEST, O_MIN, O_MAX, O_COMPARE, O_BASELINE, O_DEV,
         O_PLUGIN, O_TIMEOUT, O_CHECK, O_SLICE };
  static const struct option lo[] = {
      {"listen", no_argument, 0, O_LISTEN},       {"self", no_argument, 0, O_SELF},
      {"ranks", required_argument, 0, O_RANKS},   {"test", required_argument, 0, O_TEST},
      {"size", required_argument, 0, 's'},        {"min", required_argument, 0, O_MIN},
      {"max", required_argument, 0, O_MAX},       {"depth", required_argument, 0, 'd'},
      {"bidir", no_argument, 0, 'b'},             {"iters", required_argument, 0, 'n'},
      {"time", required_argument, 0, 't'},        {"compare", no_argument, 0, O_COMPARE},
      {"baseline", required_argument, 0, O_BASELINE}, {"dev", required_argument, 0, O_DEV},
      {"plugin", required_argument, 0, O_PLUGIN}, {"timeout", required_argument, 0, O_TIMEOUT},
      {"check", no_argument, 0, O_CHECK},         {"slice", required_argument, 0, O_SLICE},
      {"port", required_argument, 0, 'p'},        {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},              {"version", no_argument, 0, 'V'},
      {0, 0, 0, 0}};
  int size_set = 0, depth_set = 0, test_set = 0;
  long v;
  size_t sz;
  for (;;) {
    int c = getopt_long(argc, argv, "s:d:bn:t:p:vhV", lo, NULL);
    if (c == -1) break;
    switch (c) {
    case O_LISTEN: if (o.mode) two_modes(); o.mode = MODE_SERVER; break;
    case O_SELF: if (o.mode) two_modes(); o.mode = MODE_SELF; break;
    case O_RANKS:
      if (o.mode) two_modes();
      if (parse_long(optarg, 2, MAX_RANKS, &v)) bad_arg("--ranks (2..64)", optarg);
      o.mode = MODE_RANKS;
      o.nranks = (int)v;
      break;
    case O_TEST:
      if (!strcmp(optarg, "bw")) o.test = TEST_BW;
      else if (!strcmp(optarg, "lat")) o.test = TEST_LAT;
      else bad_arg("--test (bw or lat)", optarg);
      test_set = 1;
      break;
    case 's':
      if (parse_size(optarg, &sz) || sz < 1 || sz > MAX_MSG_SIZE) bad_arg("--size (1 .. 1G)", optarg);
      o.min_size = o.max_size = sz;
      size_set = 1;
      break;
    case O_MIN:
      if (parse_size(optarg, &sz) || sz < 1 || sz > MAX_MSG_SIZE) bad_arg("--min (1 .. 1G)", optarg);
      o.min_size = sz;
      o.min_set = 1;
      break;
    case O_MAX:
      if (parse_size(optarg, &sz) || sz < 1 || sz > MAX_MSG_SIZE) bad_arg("--max (1 .. 1G)", optarg);
      o.max_size = sz;
      o.max_set = 1;
      break;
    case 'd':
      if (parse_long(optarg, 1, MAX_DEPTH, &v)) bad_arg("--depth (1..32)", optarg);
      o.depth = (int)v;
      depth_set = 1;
      break;
    case 'b': o.bidir = 1; break;
    case 'n':
      if (parse_long(optarg, 1, LONG_MAX, &v)) bad_arg("--iters", optarg);
      o.iters = (uint64_t)v;
      break;
    case 't':
      if (parse_double(optarg, 0.01, 3600, &o.seconds)) bad_arg("--time (0.01 .. 3600)", optarg);
      break;
    case O_COMPARE: o.compare = 1; break;
    case O_BASELINE:
      if (strcmp(optarg, "tcp")) bad_arg("--baseline (only 'tcp')", optarg);
      o.compare = 1;
      break;
    case O_DEV:
      if (parse_long(optarg, 0, 1 << 20, &v)) bad_arg("--dev", optarg);
      o.dev = (int)v;
      break;
    case O_PLUGIN: o.plugin = optarg; break;
    case O_TIMEOUT:
      if (parse_double(optarg, 0, 1e6, &o.timeout)) bad_arg("--timeout", optarg);
      break;
    case O_CHECK: o.check = 1; break;
    case O_SLICE:
      if (parse_size(optarg, &sz) || sz < 64 || sz > MAX_MSG_SIZE) bad_arg("--slice (64 .. 1G)", optarg);
      o.slice = sz & ~(size_t)3;
      break;
    case 'p':
      if (parse_long(optarg, 1, 65535, &v)) bad_arg("--port", optarg);
      o.port = (int)v;
      o.port_set = 1;
      break;
    case 'v': o.verbose++; break;
    case 'h': usage(stdout); exit(0);
    case 'V': o.version = 1; break;
    default: usage(stderr); exit(2);
    }
  }
  if (optind < argc) {
    if (o.mode || optind + 1 < argc) {
      fprintf(stderr, "collx-perf: unexpected argument '%s' (see --help)\n", argv[optind + (o.mode ? 0 : 1)]);
      exit(2);
    }
    o.mode = MODE_CLIENT;
    o.host = argv[optind];
  }
  if (o.version) return;
  if (!o.mode) {
    usage(stderr);
    exit(2);
  }
  if (o.mode == MODE_RANKS) {
    if (o.compare || test_set || o.bidir || o.check) {
      fprintf(stderr, "collx-perf: --ranks runs the all-reduce demo: --test, --bidir, --compare and --check do not apply\n");
      exit(2);
    }
    if (!size_set && !o.min_set) o.min_size = 1 << 10;
    if (!size_set && !o.max_set) o.max_size = 64 << 20;
    if (o.min_size < (size_t)(4 * o.nranks)) {
      fprintf(stderr, "collx-perf: --ranks %d needs sizes of at least %d bytes (one float per rank)\n",
              o.nranks, 4 * o.nranks);
      exit(2);
    }
  } else {
    if (o.test == TEST_LAT && (o.bidir || depth_set)) {
      fprintf(stderr, "collx-perf: --test lat is a ping-pong with one message in flight: no --bidir or --depth\n");
      exit(2);
    }
    if (!size_set && !o.min_set) o.min_size = 8;
    if (!size_set && !o.max_set) o.max_size = o.test == TEST_BW ? (4 << 20) : o.min_set ? o.min_size : 8;
    if (o.test == TEST_LAT && !size_set && o.min_set && !o.max_set) o.max_size = o.min_size;
    if (o.test == TEST_LAT && !size_set && !o.min_set && o.max_set) o.min_size = 8;
  }
  if (o.min_size > o.max_size) {
    fprintf(stderr, "collx-perf: --min is larger than --max\n");
    exit(2);
  }
}

static int is_local_host(const char *h) {
  return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, "::1") ||
         !strcmp(h, "ip6-localhost");
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  load_plugin();
  if (o.version) {
    printf("collx-perf %s: plugin table \"%s\" (%s) from %s\n", PERF_VERSION, net->name,
           PLUGIN_SYMBOL, g_plugin_path);
    return 0;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  switch (o.mode) {
  case MODE_RANKS:
    return ranks_main();
  case MODE_SERVER: {
    int lfd = tcp_listen(AF_INET6, 0, o.port);
    if (lfd < 0) lfd = tcp_listen(AF_INET, 0, o.port);
    if (lfd < 0) die("cannot listen on port %d: %s", o.port, strerror(errno));
    printf("collx-perf: waiting for a client on port %d%s\n", o.port,
           o.timeout > 0 ? " (--timeout applies)" : "");
    g_role = "server";
    return server_main(lfd, 0);
  }
  case MODE_CLIENT:
    if (is_local_host(o.host)) force_loopback("the server is on this host", 0);
    return client_main(o.host, o.port, 0);
  case MODE_SELF: {
    force_loopback("--self runs both sides on this host", 0);
    int lfd = tcp_listen(AF_INET, 1, o.port_set ? o.port : 0);
    if (lfd < 0) die("cannot listen on 127.0.0.1 port %d: %s", o.port_set ? o.port : 0, strerror(errno));
    int port = sock_port(lfd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
      became_child("server");
      if (getppid() == 1) _exit(1);
      int rc = server_main(lfd, 1);
      fflush(stdout);
      _exit(rc);
    }
    close(lfd);
    g_children[0] = pid;
    g_nchildren = 1;
    return client_main("127.0.0.1", port, pid);
  }
  default:
    return 2;
  }
}
