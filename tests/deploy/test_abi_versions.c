/*
 * The plugin as each NCCL generation sees it: dlopens the built plugin
 * (argv[1], else $COLLX_PLUGIN, else ./.libs/libnccl-net-collx.so), looks up
 * ncclNetPlugin_v12 down to _v7 and, through each table in turn:
 * init (the INFO line names that ABI version; v11/v12: a context per
 * call), devices, getProperties in that version's layout, makeVDevice
 * (v9 and later, with the version's member limit), oversized messages
 * refused (v9 and later), and one loopback connection carrying a message
 * through listen/connect/accept/regMr/isend/irecv/test/close.  v11/v12
 * also: setNetAttr (good hints taken, bad ones refused), and finalize
 * closing a connection left open, leaving no plugin thread behind.
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
static char last_warn[1024];

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
  if (level == NCCL_LOG_WARN) {
    fprintf(stderr, "  (plugin WARN) %s\n", msg);
    snprintf(last_warn, sizeof last_warn, "%s", msg);
  }
  if (strstr(msg, " ready: ")) snprintf(last_ready, sizeof last_ready, "%s", msg);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_pow2(size_t v) { return v && !(v & (v - 1)); }

/* Threads of this process (the plugin's come and go with its comms). */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  if (f) fclose(f);
  return n;
}

/* ---- One version-neutral view of the four tables ------------------------- */

struct table {
  int version;
  const void *sym;
  const char *name;
  void *ctx; /* v11 and later: the context init made */
  ncclResult_t (*devices)(int *);
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
    (t)->deregMr = (n)->deregMr;       \
    (t)->test = (n)->test;             \
    (t)->closeSend = (n)->closeSend;   \
    (t)->closeRecv = (n)->closeRecv;   \
    (t)->closeListen = (n)->closeListen; \
  } while (0)

static ncclResult_t t_init(struct table *t) {
  ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  switch (t->version) {
    case 12: return ((const ncclNet_v12_t *)t->sym)->init(&t->ctx, 0x12, &cfg, logger, NULL);
    case 11: return ((const ncclNet_v11_t *)t->sym)->init(&t->ctx, 0x11, &cfg, logger, NULL);
    case 10: return ((const ncclNet_v10_t *)t->sym)->init(logger, NULL);
    case 9: return ((const ncclNet_v9_t *)t->sym)->init(logger);
    case 8: return ((const ncclNet_v8_t *)t->sym)->init(logger);
    default: return ((const ncclNet_v7_t *)t->sym)->init(logger);
  }
}

static ncclResult_t t_listen(const struct table *t, int dev, void *handle, void **comm) {
  switch (t->version) {
    case 12: return ((const ncclNet_v12_t *)t->sym)->listen(t->ctx, dev, handle, comm);
    case 11: return ((const ncclNet_v11_t *)t->sym)->listen(t->ctx, dev, handle, comm);
    case 10: return ((const ncclNet_v10_t *)t->sym)->listen(dev, handle, comm);
    case 9: return ((const ncclNet_v9_t *)t->sym)->listen(dev, handle, comm);
    case 8: return ((const ncclNet_v8_t *)t->sym)->listen(dev, handle, comm);
    default: return ((const ncclNet_v7_t *)t->sym)->listen(dev, handle, comm);
  }
}

static ncclResult_t t_connect(const struct table *t, int dev, void *handle, void **comm) {
  ncclNetDeviceHandle_v8_t *dc = NULL;
  switch (t->version) {
    case 12: return ((const ncclNet_v12_t *)t->sym)->connect(t->ctx, dev, handle, comm, &dc);
    case 11: return ((const ncclNet_v11_t *)t->sym)->connect(t->ctx, dev, handle, comm, &dc);
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
    case 12: return ((const ncclNet_v12_t *)t->sym)->accept(lcomm, comm, &dc);
    case 11: return ((const ncclNet_v11_t *)t->sym)->accept(lcomm, comm, &dc);
    case 10: return ((const ncclNet_v10_t *)t->sym)->accept(lcomm, comm, &dc);
    case 9: return ((const ncclNet_v9_t *)t->sym)->accept(lcomm, comm, &dc);
    case 8: return ((const ncclNet_v8_t *)t->sym)->accept(lcomm, comm, &dc);
    default: return ((const ncclNet_v7_t *)t->sym)->accept(lcomm, comm, &dc);
  }
}

static ncclResult_t t_reg_mr(const struct table *t, void *comm, void *data, size_t size,
                             void **mh) {
  switch (t->version) {
    case 12: return ((const ncclNet_v12_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    case 11: return ((const ncclNet_v11_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    case 10: return ((const ncclNet_v10_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    case 9: return ((const ncclNet_v9_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    case 8: return ((const ncclNet_v8_t *)t->sym)->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    default: return ((const ncclNet_v7_t *)t->sym)->regMr(comm, data, (int)size, NCCL_PTR_HOST, mh);
  }
}

static ncclResult_t t_isend(const struct table *t, void *comm, void *data, size_t size, int tag,
                            void *mh, void **req) {
  switch (t->version) {
    case 12: return ((const ncclNet_v12_t *)t->sym)->isend(comm, data, size, tag, mh, NULL, req);
    case 11: return ((const ncclNet_v11_t *)t->sym)->isend(comm, data, size, tag, mh, NULL, req);
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
    case 12:
      return ((const ncclNet_v12_t *)t->sym)->irecv(comm, 1, datas, sizes, tags, mhs, ph, req);
    case 11:
      return ((const ncclNet_v11_t *)t->sym)->irecv(comm, 1, datas, sizes, tags, mhs, ph, req);
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
  if (t->version == 12) {
    ncclNetProperties_v12_t p;
    memset(&p, 0xa5, sizeof p);
    r = ((const ncclNet_v12_t *)t->sym)->getProperties(dev, &p);
    check(r == ncclSuccess, "v12 getProperties(%d)", dev);
    if (r != ncclSuccess) return;
    name = p.name, speed = p.speed, max_recvs = p.maxRecvs, ptr = p.ptrSupport;
    check(p.vProps.ndevs == 1 && p.vProps.devs[0] == dev && p.vProps.devs[7] == 0,
          "v12 vProps of device %d: ndevs=%d devs[0]=%d, the other 7 zero", dev, p.vProps.ndevs,
          p.vProps.devs[0]);
    check(is_pow2(p.maxP2pBytes) && p.maxP2pBytes <= (size_t)INT_MAX, "v12 maxP2pBytes=%zu",
          p.maxP2pBytes);
    check(p.maxMultiRequestSize == 1, "v12 maxMultiRequestSize=%d (1)", p.maxMultiRequestSize);
    /* lo has no PCI device: no automatic rail; no plane without a setting. */
    check(p.railId == NCCL_NET_ID_UNDEF && p.planeId == NCCL_NET_ID_UNDEF,
          "v12 railId=%d planeId=%d on lo (undefined)", p.railId, p.planeId);
  } else if (t->version == 11) {
    ncclNetProperties_v11_t p;
    memset(&p, 0xa5, sizeof p);
    r = ((const ncclNet_v11_t *)t->sym)->getProperties(dev, &p);
    check(r == ncclSuccess, "v11 getProperties(%d)", dev);
    if (r != ncclSuccess) return;
    name = p.name, speed = p.speed, max_recvs = p.maxRecvs, ptr = p.ptrSupport;
    check(p.vProps.ndevs == 1 && p.vProps.devs[0] == dev, "v11 vProps of device %d", dev);
    check(is_pow2(p.maxCollBytes) && p.maxCollBytes <= (size_t)INT_MAX, "v11 maxCollBytes=%zu",
          p.maxCollBytes);
    check(p.maxMultiRequestSize == 1, "v11 maxMultiRequestSize=%d (1)", p.maxMultiRequestSize);
  } else if (t->version >= 9) {
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

/* makeVDevice under v12 (vProps of 8 members) and its limit. */
static void check_make_vdevice_v12(const struct table *t, int ndev) {
  ncclResult_t (*mk)(int *, ncclNetVDeviceProps_v12_t *) = ((const ncclNet_v12_t *)t->sym)->makeVDevice;
  check(mk != NULL, "v12 makeVDevice present");
  if (!mk) return;
  int d = -1;
  ncclNetVDeviceProps_v12_t one = {.ndevs = 1, .devs = {0}};
  check(mk(&d, &one) == ncclSuccess && d == 0, "v12 makeVDevice({0}) gives device 0 itself (d=%d)", d);
  /* 8 members pass the limit (then fail: lo is one device, named 8 times). */
  ncclNetVDeviceProps_v12_t eight = {.ndevs = 8, .devs = {0, 0, 0, 0, 0, 0, 0, 0}};
  last_warn[0] = '\0';
  check(mk(&d, &eight) == ncclInvalidUsage && strstr(last_warn, "named twice"),
        "v12 makeVDevice of 8: within the limit, refused for the repeat (\"%s\")", last_warn);
  ncclNetVDeviceProps_v12_t nine = {.ndevs = 9};
  last_warn[0] = '\0';
  check(mk(&d, &nine) == ncclInvalidUsage && strstr(last_warn, "1 to 8"),
        "v12 makeVDevice of 9 refused for the limit (\"%s\")", last_warn);
  int n = -1;
  t->devices(&n);
  check(n == ndev, "v12 device count unchanged (%d)", n);
}

static void check_make_vdevice(const struct table *t, int ndev) {
  /* v9, v10 and v11 share the 4-member vProps layout. */
  ncclResult_t (*mk)(int *, ncclNetVDeviceProps_v10_t *) =
      t->version == 11 ? (ncclResult_t(*)(int *, ncclNetVDeviceProps_v10_t *))((const ncclNet_v11_t *)t->sym)->makeVDevice
      : t->version == 10 ? ((const ncclNet_v10_t *)t->sym)->makeVDevice
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
  last_warn[0] = '\0';
  check(mk(&d, &many) == ncclInvalidUsage && strstr(last_warn, "1 to 4"),
        "v%d makeVDevice of 5 devices refused for the limit of 4 (\"%s\")", t->version, last_warn);
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
  ncclResult_t r = t_listen(t, 0, handle, &lcomm);
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
    size_t max_p2p = 0;
    if (t->version == 12) {
      ncclNetProperties_v12_t p;
      ((const ncclNet_v12_t *)t->sym)->getProperties(0, &p);
      max_p2p = p.maxP2pBytes;
    } else if (t->version == 11) {
      ncclNetProperties_v11_t p;
      ((const ncclNet_v11_t *)t->sym)->getProperties(0, &p);
      max_p2p = p.maxP2pBytes;
    } else {
      ncclNetProperties_v10_t p; /* same layout in v9 */
      ((const ncclNet_v10_t *)t->sym)->getProperties(0, &p);
      max_p2p = p.maxP2pBytes;
    }
    void *req = NULL;
    check(t_isend(t, scomm, sbuf, max_p2p + 1, 43, smh, &req) == ncclInvalidArgument && !req,
          "v%d isend of maxP2pBytes+1 bytes refused (ncclInvalidArgument)", t->version);
    check(t_irecv(t, rcomm, rbuf, max_p2p + 1, 43, rmh, &req) == ncclInvalidArgument && !req,
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

/* v11/v12 hints and finalize: a second context (another communicator)
 * takes hints, leaves a connection open and is finalized: the connection
 * is closed, and no plugin thread is left. */
static void check_context(const struct table *t) {
  typedef ncclResult_t (*init_fn)(void **, uint64_t, ncclNetCommConfig_v10_t *, ncclDebugLogger_t,
                                  ncclProfilerCallback_t);
  /* v11 and v12 share the table layout up to setNetAttr (pinned). */
  const ncclNet_v11_t *n = t->sym;
  check(n->finalize && n->setNetAttr, "v%d finalize and setNetAttr present", t->version);
  if (!n->finalize || !n->setNetAttr) return;
  int threads0 = thread_count();
  struct table c = *t;
  ncclNetCommConfig_v10_t cfg = {.trafficClass = 0x20};
  check(((init_fn)n->init)(&c.ctx, 0xc0ffee, &cfg, logger, NULL) == ncclSuccess && c.ctx &&
            c.ctx != t->ctx, "v%d init of a second communicator gives a context of its own", t->version);
  ncclNetAttr_v11_t attr = {.sendCommAttr = {8, 1, 4, 1}, .recvCommAttr = {8, 1, 4, 1},
                            .op = 1u << 4, .algo = 1u << 1, .proto = 1u << 2};
  check(n->setNetAttr(c.ctx, &attr) == ncclSuccess, "v%d setNetAttr with NCCL's connect-time hints",
        t->version);
  attr.sendCommAttr.minFlowsPerPeer = 9;
  check(n->setNetAttr(c.ctx, &attr) == ncclInvalidArgument,
        "v%d setNetAttr with minFlowsPerPeer above maxFlowsPerPeer refused", t->version);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof handle);
  void *lcomm = NULL, *scomm = NULL, *rcomm = NULL;
  check(t_listen(&c, 0, handle, &lcomm) == ncclSuccess && lcomm, "v%d listen under it", t->version);
  double t0 = now_s();
  while (lcomm && (!scomm || !rcomm) && now_s() - t0 < POLL_LIMIT_S) {
    if (!scomm && t_connect(&c, 0, handle, &scomm) != ncclSuccess) break;
    if (!rcomm && t_accept(&c, lcomm, &rcomm) != ncclSuccess) break;
  }
  check(scomm && rcomm, "v%d connection under it", t->version);
  check(thread_count() >= threads0, "v%d threads: %d before, %d with the connection", t->version,
        threads0, thread_count());
  check(n->finalize(c.ctx) == ncclSuccess, "v%d finalize with the connection left open", t->version);
  check(!scomm || n->closeSend(scomm) == ncclInvalidArgument,
        "v%d the send comm was closed by finalize", t->version);
  check(!lcomm || n->closeListen(lcomm) == ncclInvalidArgument,
        "v%d the listening comm was closed by finalize", t->version);
  check(thread_count() == threads0, "v%d threads after finalize: %d (%d before)", t->version,
        thread_count(), threads0);
  check(n->finalize(c.ctx) == ncclInvalidArgument, "v%d second finalize refused", t->version);
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
#define NVERSIONS 6
  struct table tables[NVERSIONS];
  memset(tables, 0, sizeof tables);
  static const int versions[NVERSIONS] = {12, 11, 10, 9, 8, 7};
  for (int i = 0; i < NVERSIONS; i++) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", versions[i]);
    struct table *t = &tables[i];
    t->version = versions[i];
    t->sym = dlsym(lib, sym);
    check(t->sym != NULL, "%s exported", sym);
    if (!t->sym) continue;
    switch (t->version) {
      case 12: FILL_COMMON(t, (const ncclNet_v12_t *)t->sym); break;
      case 11: FILL_COMMON(t, (const ncclNet_v11_t *)t->sym); break;
      case 10: FILL_COMMON(t, (const ncclNet_v10_t *)t->sym); break;
      case 9: FILL_COMMON(t, (const ncclNet_v9_t *)t->sym); break;
      case 8: FILL_COMMON(t, (const ncclNet_v8_t *)t->sym); break;
      default: FILL_COMMON(t, (const ncclNet_v7_t *)t->sym); break;
    }
  }

  for (int i = 0; i < NVERSIONS; i++) {
    struct table *t = &tables[i];
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
    if (t->version == 12) check_make_vdevice_v12(t, ndev);
    else if (t->version >= 9) check_make_vdevice(t, ndev);
    check_loopback(t);
    if (t->version >= 11) check_context(t);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
