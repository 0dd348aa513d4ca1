/*
 * The plugin as each NCCL generation sees it: dlopens the built plugin
 * (argv[1], else $COLLX_PLUGIN, else ./.libs/libnccl-net-collx.so), looks up
 * ncclNetPlugin_v10, _v9, _v8 and _v7 and, through each table in turn:
 * init (the INFO line names that ABI version), devices, getProperties in
 * that version's layout, makeVDevice (v9, v10), oversized messages refused
 * (v9, v10), and one loopback connection carrying a message each way
 * through listen/connect/accept/regMr/isend/irecv/test/close.
 *
 * One process, COLLX_IFNAME=lo.  Output: one line per check and the closing
 * "N passed, N failed"; exit status 1 when anything failed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collx/net_abi.h"

#define DEFAULT_PLUGIN "./.libs/libnccl-net-collx.so"
#define MSG_BYTES (1 << 20)
#define POLL_LIMIT_S 10.0

static int passed, failed;
static char last_ready[1024]; /* the latest "... ready: ..." INFO line */

static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: ", ok ? "ok" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (ok) passed++;
  else failed++;
}

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) fprintf(stderr, "  (plugin WARN) %s\n", msg);
  if (strstr(msg, " ready: ")) snprintf(last_ready, sizeof last_ready, "%s", msg);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_pow2(size_t v) { return v && !(v & (v - 1)); }

/* ---- One version-neutral view of the four tables ------------------------- */

struct table {
  int version;
  const void *sym;
  const char *name;
  ncclResult_t (*devices)(int *);
  ncclResult_t (*listen)(int, void *, void **);
  ncclResult_t (*deregMr)(void *, void *);
  ncclResult_t (*test)(void *, int *, int *);
  ncclResult_t (*closeSend)(void *);
  ncclResult_t (*closeRecv)(void *);
  ncclResult_t (*closeListen)(void *);
};

#define FILL_COMMON(t, n)              \
  do {                                 \
    (t)->name = (n)->name;             \
    (t)->devices = (n)->devices;       \
    (t)->listen = (n)->listen;         \
    (t)->deregMr = (n)->deregMr;       \
    (t)->test = (n)->test;             \
    (t)->closeSend = (n)->closeSend;   \
    (t)->closeRecv = (n)->closeRecv;   \
    (t)->closeListen = (n)->closeListen; \
  } while (0)

static ncclResult_t t_init(const struct table *t) {
  switch (t->version) {
    case 10: return ((const ncclNet_v10_t *)t->sym)->init(logger, NULL);
    case 9: return ((const ncclNet_v9_t *)t->sym)->init(logger);
    case 8: return ((const ncclNet_v8_t *)t->sym)->init(logger);
    default: return ((const ncclNet_v7_t *)t->sym)->init(logger);
  }
}

static ncclResult_t t_connect(const struct table *t, int dev, void *handle, void **comm) {
  ncclNetDeviceHandle_v8_t *dc = NULL;
  switch (t->version) {
    case 10: {
      ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return ((const ncclNet_v10_t *)t->sym)->connect(dev, &cfg, handle, comm, &dc);
    }
    case 9: return ((const ncclNet_v9_t *)t->sym)->connect(dev, handle, comm, &dc);
    case 8: return ((const ncclNet_v8_t *)t->sym)->connect(dev, handle, comm, &dc);
    default: return ((const ncclNet_v7_t *)t->sym)->connect(dev, handle, comm, &dc);
  }
}

static ncclResult_t t_accept(const struct table *t, void *lcomm, void **comm) {
  ncclNetDeviceHandle_v8_t *dc = NULL;
  switch (t->version) {
    case 10: return ((const ncclNet_v10_t *)t->sym)->accept(lcomm, comm, &dc);
    case 9: return ((const ncclNet_v9_t *)t->sym)->accept(lcomm, comm, &dc);
    case 8: return ((const ncclNet_v8_t *)t->sym)->accept(lcomm, comm, &dc);
    default: return ((const ncclNet_v7_t *)t->sym)->accept(lcomm, comm, &dc);
  }
}

static ncclResult_t t_reg_mr(const struct table *t, void *comm, void *data, size_t size,
                             void **mh) {
  switch (t->version) {
    case 10: return ((const ncclNet_v10_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    case 9: return ((const ncclNet_v9_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    case 8: return ((const ncclNet_v8_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    default: return ((const ncclNet_v7_t *)t->sym)->regMr(comm, data, (int)size, NCCL_PTR_HOST, mh);
  }
}

static ncclResult_t t_isend(const struct table *t, void *comm, void *data, size_t size, int tag,
                            void *mh, void **req) {
  switch (t->version) {
    case 10: return ((const ncclNet_v10_t *)t->sym)->isend(comm, data, size, tag, mh, NULL, req);
    case 9: return ((const ncclNet_v9_t *)t->sym)->isend(comm, data, size, tag, mh, req);
    case 8: return ((const ncclNet_v8_t *)t->sym)->isend(comm, data, (int)size, tag, mh, req);
    default: return ((const ncclNet_v7_t *)t->sym)->isend(comm, data, (int)size, tag, mh, req);
  }
}

static ncclResult_t t_irecv(const struct table *t, void *comm, void *data, size_t size, int tag,
                            void *mh, void **req) {
  void *datas[1] = {data}, *mhs[1] = {mh}, *ph[1] = {NULL};
  size_t sizes[1] = {size};
  int isizes[1] = {(int)size}, tags[1] = {tag};
  switch (t->version) {
    case 10:
      return ((const ncclNet_v10_t *)t->sym)->irecv(comm, 1, datas, sizes, tags, mhs, ph, req);
    case 9: return ((const ncclNet_v9_t *)t->sym)->irecv(comm, 1, datas, sizes, tags, mhs, req);
    case 8: return ((const ncclNet_v8_t *)t->sym)->irecv(comm, 1, datas, isizes, tags, mhs, req);
    default: return ((const ncclNet_v7_t *)t->sym)->irecv(comm, 1, datas, isizes, tags, mhs, req);
  }
}

/* ---- Checks --------------------------------------------------------------- */

static void check_properties(const struct table *t, int dev) {
  const char *name = NULL;
  int speed = 0, max_recvs = 0, ptr = 0;
  ncclResult_t r;
  if (t->version >= 9) {
    /* v9 and v10 share one layout (pinned in net_abi.h). */
    ncclNetProperties_v10_t p;
    memset(&p, 0xa5, sizeof p);
    r = t->version == 10 ? ((const ncclNet_v10_t *)t->sym)->getProperties(dev, &p)
                         : ((const ncclNet_v9_t *)t->sym)->getProperties(dev, (ncclNetProperties_v9_t *)&p);
    check(r == ncclSuccess, "v%d getProperties(%d)", t->version, dev);
    if (r != ncclSuccess) return;
    name = p.name, speed = p.speed, max_recvs = p.maxRecvs, ptr = p.ptrSupport;
    check(p.vProps.ndevs == 1 && p.vProps.devs[0] == dev,
          "v%d vProps of device %d: ndevs=%d devs[0]=%d (itself)", t->version, dev,
          p.vProps.ndevs, p.vProps.devs[0]);
    check(p.regIsGlobal == 0 && p.forceFlush == 0, "v%d regIsGlobal=%d forceFlush=%d",
          t->version, p.regIsGlobal, p.forceFlush);
    check(is_pow2(p.maxP2pBytes) && p.maxP2pBytes <= (size_t)INT_MAX && is_pow2(p.maxCollBytes) &&
              p.maxCollBytes <= (size_t)INT_MAX,
          "v%d maxP2pBytes=%zu maxCollBytes=%zu (powers of two within test()'s int sizes)",
          t->version, p.maxP2pBytes, p.maxCollBytes);
  } else if (t->version == 8) {
    ncclNetProperties_v8_t p;
    memset(&p, 0xa5, sizeof p);
    r = ((const ncclNet_v8_t *)t->sym)->getProperties(dev, &p);
    check(r == ncclSuccess, "v8 getProperties(%d)", dev);
    if (r != ncclSuccess) return;
    name = p.name, speed = p.speed, max_recvs = p.maxRecvs, ptr = p.ptrSupport;
    check(p.regIsGlobal == 0 && p.netDeviceType == NCCL_NET_DEVICE_HOST, "v8 regIsGlobal=0, host device");
  } else {
    ncclNetProperties_v7_t p;
    memset(&p, 0xa5, sizeof p);
    r = ((const ncclNet_v7_t *)t->sym)->getProperties(dev, &p);
    check(r == ncclSuccess, "v7 getProperties(%d)", dev);
    if (r != ncclSuccess) return;
    name = p.name, speed = p.speed, max_recvs = p.maxRecvs, ptr = p.ptrSupport;
    check(p.netDeviceType == NCCL_NET_DEVICE_HOST && p.netDeviceVersion == 0,
          "v7 host device, netDeviceVersion 0 (no regIsGlobal in this layout)");
  }
  check(name && strcmp(name, "lo") == 0 && speed > 0 && max_recvs >= 1 && ptr == NCCL_PTR_HOST,
        "v%d device %d: name=%s speed=%d maxRecvs=%d ptrSupport=%d", t->version, dev,
        name ? name : "(null)", speed, max_recvs, ptr);
}

static void check_make_vdevice(const struct table *t, int ndev) {
  ncclResult_t (*mk)(int *, ncclNetVDeviceProps_v10_t *) =
      t->version == 10 ? ((const ncclNet_v10_t *)t->sym)->makeVDevice
                       : (ncclResult_t(*)(int *, ncclNetVDeviceProps_v10_t *))((const ncclNet_v9_t *)t->sym)->makeVDevice;
  check(mk != NULL, "v%d makeVDevice present", t->version);
  if (!mk) return;
  int d = -1;
  ncclNetVDeviceProps_v10_t one = {.ndevs = 1, .devs = {0}};
  ncclResult_t r = mk(&d, &one);
  check(r == ncclSuccess && d == 0, "v%d makeVDevice({0}) gives device 0 itself (d=%d)",
        t->version, d);
  int n = -1;
  t->devices(&n);
  check(n == ndev, "v%d device count unchanged after makeVDevice (%d)", t->version, n);
  ncclNetVDeviceProps_v10_t two = {.ndevs = 2, .devs = {0, 0}};
  check(mk(&d, &two) == ncclInvalidUsage, "v%d makeVDevice of 2 devices refused (ncclInvalidUsage)",
        t->version);
  ncclNetVDeviceProps_v10_t missing = {.ndevs = 1, .devs = {ndev}};
  check(mk(&d, &missing) == ncclInvalidUsage, "v%d makeVDevice of a device that does not exist refused",
        t->version);
  ncclNetVDeviceProps_v10_t many = {.ndevs = 5, .devs = {0}};
  check(mk(&d, &many) == ncclInvalidUsage, "v%d makeVDevice of 5 devices refused", t->version);
  check(mk(&d, NULL) == ncclInvalidArgument, "v%d makeVDevice(NULL) refused", t->version);
}

/* Poll a request to completion; returns the size test() reported, -1 on error. */
static int wait_req(const struct table *t, void *req) {
  double t0 = now_s();
  int done = 0, sizes[8] = {-1};
  while (!done) {
    if (t->test(req, &done, sizes) != ncclSuccess) return -1;
    if (now_s() - t0 > POLL_LIMIT_S) return -1;
  }
  return sizes[0];
}

static void check_loopback(const struct table *t) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lcomm = NULL, *scomm = NULL, *rcomm = NULL;
  memset(handle, 0, sizeof handle);
  ncclResult_t r = t->listen(0, handle, &lcomm);
  check(r == ncclSuccess && lcomm, "v%d listen", t->version);
  if (r != ncclSuccess || !lcomm) return;
  double t0 = now_s();
  while ((!scomm || !rcomm) && now_s() - t0 < POLL_LIMIT_S) {
    if (!scomm && t_connect(t, 0, handle, &scomm) != ncclSuccess) break;
    if (!rcomm && t_accept(t, lcomm, &rcomm) != ncclSuccess) break;
  }
  check(scomm && rcomm, "v%d connect/accept on lo", t->version);
  if (!scomm || !rcomm) goto out;

  unsigned char *sbuf = malloc(MSG_BYTES), *rbuf = malloc(MSG_BYTES);
  for (int i = 0; i < MSG_BYTES; i++) sbuf[i] = (unsigned char)(i * 7 + t->version);
  memset(rbuf, 0, MSG_BYTES);
  void *smh = NULL, *rmh = NULL;
  check(t_reg_mr(t, scomm, sbuf, MSG_BYTES, &smh) == ncclSuccess &&
            t_reg_mr(t, rcomm, rbuf, MSG_BYTES, &rmh) == ncclSuccess,
        "v%d regMr", t->version);

  void *rreq = NULL, *sreq = NULL;
  t0 = now_s();
  while (!rreq && now_s() - t0 < POLL_LIMIT_S)
    if (t_irecv(t, rcomm, rbuf, MSG_BYTES, 42, rmh, &rreq) != ncclSuccess) break;
  while (!sreq && now_s() - t0 < POLL_LIMIT_S)
    if (t_isend(t, scomm, sbuf, MSG_BYTES, 42, smh, &sreq) != ncclSuccess) break;
  check(rreq && sreq, "v%d irecv and isend posted", t->version);
  if (rreq && sreq) {
    int ssz = wait_req(t, sreq), rsz = wait_req(t, rreq);
    check(rsz == MSG_BYTES && memcmp(sbuf, rbuf, MSG_BYTES) == 0,
          "v%d %d bytes arrived intact (test reported %d received, %d sent)", t->version,
          MSG_BYTES, rsz, ssz);
  }

  if (t->version >= 9) {
    /* One byte past what getProperties promised is refused at the shim. */
    ncclNetProperties_v10_t p;
    ((const ncclNet_v10_t *)t->sym)->getProperties(0, &p); /* same layout in v9 */
    void *req = NULL;
    check(t_isend(t, scomm, sbuf, p.maxP2pBytes + 1, 43, smh, &req) == ncclInvalidArgument && !req,
          "v%d isend of maxP2pBytes+1 bytes refused (ncclInvalidArgument)", t->version);
    check(t_irecv(t, rcomm, rbuf, p.maxP2pBytes + 1, 43, rmh, &req) == ncclInvalidArgument && !req,
          "v%d irecv of maxP2pBytes+1 bytes refused (ncclInvalidArgument)", t->version);
  }
  if (smh) t->deregMr(scomm, smh);
  if (rmh) t->deregMr(rcomm, rmh);
  free(sbuf);
  free(rbuf);
out:
  check((!scomm || t->closeSend(scomm) == ncclSuccess) && (!rcomm || t->closeRecv(rcomm) == ncclSuccess) &&
            t->closeListen(lcomm) == ncclSuccess,
        "v%d close send, recv and listen comms", t->version);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : getenv("COLLX_PLUGIN");
  if (!path || !*path) path = DEFAULT_PLUGIN;
  setenv("COLLX_IFNAME", "lo", 1);
  alarm(120); /* a hang is a failure, not a stuck suite */

  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("FAIL: dlopen %s: %s\n0 passed, 1 failed\n", path, dlerror());
    return 1;
  }
  struct table tables[4];
  memset(tables, 0, sizeof tables);
  static const int versions[4] = {10, 9, 8, 7};
  for (int i = 0; i < 4; i++) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", versions[i]);
    struct table *t = &tables[i];
    t->version = versions[i];
    t->sym = dlsym(lib, sym);
    check(t->sym != NULL, "%s exported", sym);
    if (!t->sym) continue;
    switch (t->version) {
      case 10: FILL_COMMON(t, (const ncclNet_v10_t *)t->sym); break;
      case 9: FILL_COMMON(t, (const ncclNet_v9_t *)t->sym); break;
      case 8: FILL_COMMON(t, (const ncclNet_v8_t *)t->sym); break;
      default: FILL_COMMON(t, (const ncclNet_v7_t *)t->sym); break;
    }
  }

  for (int i = 0; i < 4; i++) {
    const struct table *t = &tables[i];
    if (!t->sym) continue;
    char want[32];
    check(t->name && strcmp(t->name, "collx") == 0, "v%d name is \"collx\"", t->version);
    last_ready[0] = '\0';
    check(t_init(t) == ncclSuccess, "v%d init", t->version);
    snprintf(want, sizeof want, "ncclNet v%d", t->version);
    check(strstr(last_ready, want) != NULL, "v%d INFO line names the ABI: \"%s\"", t->version,
          last_ready);
    int ndev = 0;
    ncclResult_t r = t->devices(&ndev);
    check(r == ncclSuccess && ndev == 1, "v%d devices: %d (COLLX_IFNAME=lo)", t->version, ndev);
    if (ndev < 1) continue;
    check_properties(t, 0);
    if (t->version >= 9) check_make_vdevice(t, ndev);
    check_loopback(t);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
