#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "drive.h"
#include "prof.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct hx_net hx_plugin;
int hx_ndev, hx_dev;
struct hx_props hx_devprops;
double hx_max_call_s, hx_max_held_s;
__thread struct hx_call_cost hx_last_call;

/* ---- the logger --------------------------------------------------------- */
/* WARNs go to stderr and into a capture buffer; the last connection
 * statistics (INFO "... closed: ...") are kept too. */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_warn[32768];
static size_t g_warn_len;
static char g_closed[1536];

static const char *level_name(ncclDebugLogLevel level) {
  switch (level) {
  case NCCL_LOG_WARN: return "WARN";
  case NCCL_LOG_ABORT: return "ABORT";
  case NCCL_LOG_INFO: return "INFO";
  case NCCL_LOG_TRACE: return "TRACE";
  default: return "LOG";
  }
}

static void harness_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...) {
  (void)flags;
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *cname = hx_current() ? hx_current()->name : "?", *rname = hx_role_name(hx_role());
  int warn = level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT;
  if (warn) {
    fprintf(stderr, "[%s/%s] plugin WARN %s:%d %s\n", cname, rname, file ? file : "?", line, msg);
    pthread_mutex_lock(&g_log_mu);
    size_t room = sizeof g_warn - g_warn_len;
    if (room > 1) {
      int n = snprintf(g_warn + g_warn_len, room, "%s\n", msg);
      if (n > 0) g_warn_len += (size_t)n < room ? (size_t)n : room - 1;
    }
    pthread_mutex_unlock(&g_log_mu);
  } else if (level == NCCL_LOG_INFO && strstr(msg, "send connection to") && strstr(msg, "closed:")) {
    pthread_mutex_lock(&g_log_mu);
    snprintf(g_closed, sizeof g_closed, "%s", msg);
    pthread_mutex_unlock(&g_log_mu);
  }
  if (!warn && hx_verbose && level != NCCL_LOG_NONE)
    fprintf(stderr, "[%s/%s] plugin %s %s\n", cname, rname, level_name(level), msg);
}

size_t hx_warn_mark(void) {
  pthread_mutex_lock(&g_log_mu);
  size_t m = g_warn_len;
  pthread_mutex_unlock(&g_log_mu);
  return m;
}

void hx_warn_since(size_t mark, char *out, size_t cap, char sep) {
  pthread_mutex_lock(&g_log_mu);
  size_t n = g_warn_len > mark ? g_warn_len - mark : 0;
  if (n >= cap) n = cap - 1; /* the first WARNs say what went wrong first */
  memcpy(out, g_warn + mark, n);
  out[n] = 0;
  pthread_mutex_unlock(&g_log_mu);
  while (n > 0 && out[n - 1] == '\n') out[--n] = 0;
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = sep;
}

void hx_last_closed(char *out, size_t cap) {
  pthread_mutex_lock(&g_log_mu);
  snprintf(out, cap, "%s", g_closed);
  pthread_mutex_unlock(&g_log_mu);
}

/* ---- loading ------------------------------------------------------------ */
struct hx_call_cost hx_call_begin(void) {
  struct hx_call_cost c = {.wall_s = now_s()};
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) c.cpu_s = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) c.waits = ru.ru_nvcsw;
  return c;
}

struct hx_call_cost hx_call_end(struct hx_call_cost begun) {
  struct hx_call_cost now = hx_call_begin();
  return (struct hx_call_cost){.wall_s = now.wall_s - begun.wall_s,
                               .cpu_s = now.cpu_s - begun.cpu_s,
                               .waits = now.waits - begun.waits};
}

double hx_call_held(const struct hx_call_cost *c) { return c->waits > 0 ? c->wall_s : c->cpu_s; }

/* Raise *max to v; threads of a case call the plugin at once. */
static void raise_max(double *max, double v) {
  double seen;
  __atomic_load(max, &seen, __ATOMIC_RELAXED);
  while (v > seen && !__atomic_compare_exchange(max, &seen, &v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

void hx_call_done(const char *fn, struct hx_call_cost begun) {
  static __thread int reported;
  struct hx_call_cost c = hx_call_end(begun);
  hx_last_call = c;
  hx_in_call("");
  double held = hx_call_held(&c);
  raise_max(&hx_max_call_s, c.wall_s);
  raise_max(&hx_max_held_s, held);
  if (hx_call_limit_s > 0 && held > S(hx_call_limit_s) && reported < 3) {
    reported++;
    hx_fail("%s held its caller %.0f ms in one call (limit %.0f ms; %.0f ms by the clock, %.0f ms on the "
            "processor, %ld waits): plugin calls must not block",
            fn, held * 1e3, S(hx_call_limit_s) * 1e3, c.wall_s * 1e3, c.cpu_s * 1e3, c.waits);
  }
}

int hx_load(void) {
  char err[512];
  hx_step("dlopen %s", hx_plugin_path);
  if (hx_net_open(&hx_plugin, hx_plugin_path, hx_abi, 0, err, sizeof err)) {
    hx_fail("%s", err);
    return -1;
  }
  /* Every version with profiler calls runs under the recording profiler:
   * its events are judged when the process ends (hx_prof_verdict). */
  if (hx_net_has_profiler(&hx_plugin)) {
    hx_plugin.prof = &hx_prof_recorder;
    hx_prof_plugin_loaded();
  }
  hx_step("init");
  double t0 = now_s();
  ncclResult_t r = hx_net_init(&hx_plugin, harness_logger);
  double dt = now_s() - t0;
  if (r != ncclSuccess) {
    hx_fail("init returned %s (expected ncclSuccess)", hx_result_str(r));
    return -1;
  }
  if (dt > S(5.0)) hx_fail("init took %.1f s (limit %.1f s)", dt, S(5.0));
  hx_step("devices");
  hx_ndev = -1;
  r = NET(devices, &hx_ndev);
  if (r != ncclSuccess || hx_ndev < 1) {
    hx_fail("devices returned %s, ndev = %d with COLLX_IFNAME=%s, expected >= 1", hx_result_str(r), hx_ndev,
            getenv("COLLX_IFNAME") ? getenv("COLLX_IFNAME") : "(unset)");
    return -1;
  }
  hx_dev = 0;
  r = NET(getProperties, hx_dev, &hx_devprops, 0);
  if (r != ncclSuccess) {
    hx_fail("getProperties(0) returned %s", hx_result_str(r));
    return -1;
  }
  return hx_failed() ? -1 : 0;
}

int hx_unload(void) {
  if (!hx_plugin.dl) return 0;
  hx_step("dlclose");
  int rc = hx_net_unload(&hx_plugin);
  if (rc != 0) hx_fail("dlclose: %s", dlerror());
  return rc ? -1 : 0;
}

/* ---- connections ------------------------------------------------------ */
/* The call just made on this thread held its caller past the limit. */
static int call_slow(const char *fn, int call, double call_limit_s) {
  const struct hx_call_cost *c = &hx_last_call;
  if (call_limit_s <= 0 || hx_call_held(c) <= call_limit_s) return 0;
  hx_fail("%s call #%d held its caller %.1f ms (limit %.0f ms; %.1f ms by the clock, %.1f ms on the processor, "
          "%ld waits): it must not block",
          fn, call, hx_call_held(c) * 1e3, call_limit_s * 1e3, c->wall_s * 1e3, c->cpu_s * 1e3, c->waits);
  return -1;
}

int hx_conn_listen(struct hx_conn *k, const char *name, double call_limit_s) {
  memset(k->handle, 0, sizeof k->handle);
  k->lcomm = NULL;
  ncclResult_t r = NET(listen, hx_dev, k->handle, &k->lcomm);
  if (r != ncclSuccess || !k->lcomm) {
    hx_fail("listen(dev %d) returned %s%s", hx_dev, hx_result_str(r),
            r == ncclSuccess ? " with a NULL listen comm" : "");
    return -1;
  }
  if (call_slow("listen", 1, call_limit_s)) return -1;
  return name ? hx_publish(name, k->handle, sizeof k->handle) : 0;
}

int hx_conn_handle(struct hx_conn *k, const char *name, double timeout_s) {
  hx_step("waiting for the listen handle '%s'", name);
  return hx_lookup(name, k->handle, sizeof k->handle, timeout_s);
}

int hx_conn_poll(struct hx_conn *k, double call_limit_s) {
  if (k->up) return 1;
  void *comm = NULL;
  ncclNetDeviceHandle_v8_t *dc = NULL;
  ncclResult_t r = k->sender ? NET(connect, hx_dev, k->handle, &comm, &dc) : NET(accept, k->lcomm, &comm, &dc);
  const char *fn = k->sender ? "connect" : "accept";
  k->calls++;
  if (hx_last_call.wall_s > k->max_call_s) k->max_call_s = hx_last_call.wall_s;
  if (r != ncclSuccess) {
    hx_fail("%s call #%d returned %s", fn, k->calls, hx_result_str(r));
    return -1;
  }
  if (call_slow(fn, k->calls, call_limit_s)) return -1;
  if (!comm) return 0;
  if (k->sender)
    k->scomm = comm;
  else
    k->rcomm = comm;
  k->up = 1;
  return 1;
}

int hx_conn_finish(struct hx_conn *k, double timeout_s, double call_limit_s) {
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  hx_step("%s loop", k->sender ? "connect" : "accept");
  for (;;) {
    int up = hx_conn_poll(k, call_limit_s);
    if (up) return up < 0 ? -1 : 0;
    if (hx_wait_over(&w)) {
      hx_fail("%s did not complete within %.1f s (%d calls, each returned ncclSuccess with a NULL comm)",
              k->sender ? "connect" : "accept", S(timeout_s), k->calls);
      return -1;
    }
    hx_backoff(&w);
  }
}

int hx_conn_establish(struct hx_conn *k, int sender, const char *name, double timeout_s) {
  memset(k, 0, sizeof *k);
  k->sender = sender;
  if (sender ? hx_conn_handle(k, name, 20.0) : hx_conn_listen(k, name, 0)) return -1;
  return hx_conn_finish(k, timeout_s, 0);
}

int hx_conn_close(struct hx_conn *k) {
  int rc = 0;
  ncclResult_t r;
  if (k->scomm && (r = NET(closeSend, k->scomm)) != ncclSuccess) {
    hx_fail("closeSend returned %s", hx_result_str(r));
    rc = -1;
  }
  if (k->rcomm && (r = NET(closeRecv, k->rcomm)) != ncclSuccess) {
    hx_fail("closeRecv returned %s", hx_result_str(r));
    rc = -1;
  }
  if (k->lcomm && (r = NET(closeListen, k->lcomm)) != ncclSuccess) {
    hx_fail("closeListen returned %s", hx_result_str(r));
    rc = -1;
  }
  k->scomm = k->rcomm = k->lcomm = NULL;
  k->up = 0;
  return rc;
}

/* ---- single requests -------------------------------------------------- */
void *hx_post_send(void *scomm, void *data, int size, int tag, void *mh, double timeout_s, const char *what) {
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  long nulls = 0;
  for (;;) {
    void *r = NULL;
    ncclResult_t rc = NET(isend, scomm, data, size, tag, mh, &r);
    if (rc != ncclSuccess) {
      hx_fail("%s: isend (size %d, tag %d) returned %s", what, size, tag, hx_result_str(rc));
      return NULL;
    }
    if (r) return r;
    nulls++;
    if (hx_wait_over(&w)) {
      hx_fail("%s: isend (size %d, tag %d) still returned a NULL request after %.1f s (%ld tries)", what, size, tag,
              S(timeout_s), nulls);
      return NULL;
    }
    hx_backoff(&w);
  }
}

void *hx_post_recv(void *rcomm, int n, void **data, int *sizes, int *tags, void **mh, double timeout_s,
                   const char *what) {
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  for (;;) {
    void *r = NULL;
    ncclResult_t rc = NET(irecv, rcomm, n, data, sizes, tags, mh, &r);
    if (rc != ncclSuccess) {
      hx_fail("%s: irecv (n = %d, sizes[0] = %d, tags[0] = %d) returned %s", what, n, sizes[0], tags[0],
              hx_result_str(rc));
      return NULL;
    }
    if (r) return r;
    if (hx_wait_over(&w)) {
      hx_fail("%s: irecv (n = %d) still returned a NULL request after %.1f s", what, n, S(timeout_s));
      return NULL;
    }
    hx_backoff(&w);
  }
}

int hx_test_until(void *req, int n, int *sizes_out, double timeout_s, const char *what) {
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  int sz[HX_SIZES_SLOTS];
  for (int k = 0; k < HX_SIZES_SLOTS; k++) sz[k] = HX_SIZE_SENTINEL;
  for (;;) {
    int done = 0;
    ncclResult_t rc = NET(test, req, &done, sz);
    if (rc != ncclSuccess) {
      hx_fail("%s: test returned %s", what, hx_result_str(rc));
      return -1;
    }
    if (done) break;
    if (hx_wait_over(&w)) {
      hx_fail("%s: test never reported done within %.1f s", what, S(timeout_s));
      return -1;
    }
    hx_backoff(&w);
  }
  for (int k = n; k < HX_SIZES_SLOTS; k++) {
    if (sz[k] != HX_SIZE_SENTINEL) {
      hx_fail("%s: test wrote sizes[%d] = %d for a request of n = %d", what, k, sz[k], n);
      return -1;
    }
  }
  memcpy(sizes_out, sz, sizeof(int) * (size_t)n);
  return 0;
}

int hx_complete(void *req, int expect, double timeout_s, const char *what) {
  int got = HX_SIZE_SENTINEL;
  if (hx_test_until(req, 1, &got, timeout_s, what)) return -1;
  if (got != expect) {
    hx_fail("%s: completed with sizes[0] = %d, expected %d", what, got, expect);
    return -1;
  }
  return 0;
}

int hx_test_once(void *req, int expect, const char *what) {
  int done = 0, sizes[HX_SIZES_SLOTS];
  for (int k = 0; k < HX_SIZES_SLOTS; k++) sizes[k] = HX_SIZE_SENTINEL;
  ncclResult_t rc = NET(test, req, &done, sizes);
  if (rc != ncclSuccess) {
    hx_fail("%s: test returned %s", what, hx_result_str(rc));
    return -1;
  }
  if (!done) return 0;
  if (sizes[0] != expect) {
    hx_fail("%s: completed with sizes[0] = %d, expected %d", what, sizes[0], expect);
    return -1;
  }
  return 1;
}

void *hx_reg_buffer(void *comm, size_t len, void **mh) {
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    hx_fail("out of memory allocating %zu bytes", len);
    return NULL;
  }
  ncclResult_t r = NET(regMr, comm, buf, len, NCCL_PTR_HOST, mh);
  if (r != ncclSuccess) {
    hx_fail("regMr(%zu bytes, NCCL_PTR_HOST) returned %s", len, hx_result_str(r));
    free(buf);
    return NULL;
  }
  return buf;
}

/* ---- this process's threads and descriptors ---------------------------- */
/* One "name(comm)" or "fd->target" of a /proc/self entry. */
typedef int (*describe_fn)(DIR *d, const char *entry, char *out, size_t cap, const char *sep);

static int describe_task(DIR *d, const char *entry, char *out, size_t cap, const char *sep) {
  (void)d;
  char path[300], comm[64] = "?";
  snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry);
  FILE *f = fopen(path, "r");
  if (f) {
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
  }
  return snprintf(out, cap, "%s%s(%s)%s", sep, entry, comm, atoi(entry) == getpid() ? "[main]" : "");
}

static int describe_fd(DIR *d, const char *entry, char *out, size_t cap, const char *sep) {
  if (atoi(entry) == dirfd(d)) return 0;
  char link[128];
  ssize_t l = readlinkat(dirfd(d), entry, link, sizeof link - 1);
  link[l > 0 ? l : 0] = 0;
  return snprintf(out, cap, "%s%s->%s", sep, entry, link);
}

static void list_proc(const char *dir, describe_fn describe, const char *sep, char *out, size_t cap) {
  out[0] = 0;
  DIR *d = opendir(dir);
  if (!d) return;
  size_t len = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int n = describe(d, e->d_name, out + len, cap - len, len ? sep : "");
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
  closedir(d);
}

void hx_task_names(char *out, size_t cap) { list_proc("/proc/self/task", describe_task, ", ", out, cap); }
void hx_fd_names(char *out, size_t cap) { list_proc("/proc/self/fd", describe_fd, " ", out, cap); }
