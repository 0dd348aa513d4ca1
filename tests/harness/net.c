/*
 * Version-neutral calls over any ncclNet_vN_t table the harness knows.
 *
 * Every version keeps the members the harness calls in the same order, but
 * their signatures change from version to version in a few ways (size
 * types, an extra profiler handle, a connect config, a context).  A row of
 * `versions` names the table, where each member sits (offsetof on the
 * version's own type), where each property sits, and the calling shape as
 * flags; the calls below pick the signature from the flags.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "net.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Calling shapes. */
enum {
  HX_REGMR_INT = 1 << 0,      /* regMr takes an int size (v7) */
  HX_SIZE_T = 1 << 1,         /* isend/irecv take size_t sizes (v9 on) */
  HX_PHANDLE = 1 << 2,        /* isend/irecv take profiler handles (v10 on) */
  HX_INIT_PROF = 1 << 3,      /* init takes a profiler callback (v10 on) */
  HX_CONNECT_CONFIG = 1 << 4, /* connect takes a comm config (v10) */
  HX_CTX = 1 << 5,            /* init makes a context that listen/connect take; finalize ends it (v11 on) */
};

enum { F_INIT, F_DEVICES, F_PROPS, F_LISTEN, F_CONNECT, F_ACCEPT, F_REGMR, F_DEREGMR, F_ISEND, F_IRECV, F_IFLUSH,
       F_TEST, F_CLOSESEND, F_CLOSERECV, F_CLOSELISTEN, F_FINALIZE, F_COUNT };
static const char *const fn_names[F_COUNT] = {"init",   "devices", "getProperties", "listen",    "connect",
                                              "accept", "regMr",   "deregMr",       "isend",     "irecv",
                                              "iflush", "test",    "closeSend",     "closeRecv", "closeListen",
                                              "finalize"};
#define NO_MEMBER ((size_t)-1)

enum { P_NAME, P_PCI, P_PTR, P_REGGLOBAL, P_SPEED, P_LATENCY, P_MAXCOMMS, P_MAXRECVS, P_DEVTYPE, P_COUNT };

struct hx_net_version {
  int version;
  const char *symbol;
  unsigned shape;
  size_t fn[F_COUNT];
  size_t props_size;
  size_t prop[P_COUNT];
};

#define HX_FNS(T, FINALIZE)                                                                                       \
  {offsetof(T, init),    offsetof(T, devices),   offsetof(T, getProperties), offsetof(T, listen),                \
   offsetof(T, connect), offsetof(T, accept),    offsetof(T, regMr),         offsetof(T, deregMr),               \
   offsetof(T, isend),   offsetof(T, irecv),     offsetof(T, iflush),        offsetof(T, test),                  \
   offsetof(T, closeSend), offsetof(T, closeRecv), offsetof(T, closeListen), FINALIZE}
#define HX_PROPS(P, REGGLOBAL)                                                                                    \
  sizeof(P), {offsetof(P, name),     offsetof(P, pciPath),  offsetof(P, ptrSupport), REGGLOBAL,                  \
              offsetof(P, speed),    offsetof(P, latency),  offsetof(P, maxComms),   offsetof(P, maxRecvs),      \
              offsetof(P, netDeviceType)}
/* One row per version; a version with a context adds HX_CTX and its
 * finalize member: HX_FNS(ncclNet_v11_t, offsetof(ncclNet_v11_t, finalize)). */
#define HX_ROW(V, SHAPE, FINALIZE)                                                                                \
  {V, "ncclNetPlugin_v" #V, SHAPE, HX_FNS(ncclNet_v##V##_t, FINALIZE),                                            \
   HX_PROPS(ncclNetProperties_v##V##_t, offsetof(ncclNetProperties_v##V##_t, regIsGlobal))}

static const struct hx_net_version versions[] = {
    {7, "ncclNetPlugin_v7", HX_REGMR_INT, HX_FNS(ncclNet_v7_t, NO_MEMBER),
     HX_PROPS(ncclNetProperties_v7_t, NO_MEMBER)},
    HX_ROW(8, 0, NO_MEMBER),
    HX_ROW(9, HX_SIZE_T, NO_MEMBER),
    HX_ROW(10, HX_SIZE_T | HX_PHANDLE | HX_INIT_PROF | HX_CONNECT_CONFIG, NO_MEMBER),
    HX_ROW(11, HX_SIZE_T | HX_PHANDLE | HX_INIT_PROF | HX_CTX, offsetof(ncclNet_v11_t, finalize)),
    HX_ROW(12, HX_SIZE_T | HX_PHANDLE | HX_INIT_PROF | HX_CTX, offsetof(ncclNet_v12_t, finalize)),
};
#define NVERSIONS ((int)(sizeof versions / sizeof versions[0]))

/* The largest properties struct of any version, and then some. */
#define PROPS_RAW_CAP 512

int hx_net_versions(int *out, int max) {
  for (int i = 0; i < NVERSIONS && i < max; i++) out[i] = versions[i].version;
  return NVERSIONS;
}

static const struct hx_net_version *find_version(int version) {
  for (int i = 0; i < NVERSIONS; i++)
    if (versions[i].version == version) return &versions[i];
  return NULL;
}

const char *hx_net_symbol(int version) {
  const struct hx_net_version *v = find_version(version);
  return v ? v->symbol : NULL;
}

typedef void (*any_fn)(void);

/* The member of the table at offset off (NULL when absent). */
static any_fn member(const struct hx_net *n, int f) {
  size_t off = n->version->fn[f];
  if (off == NO_MEMBER) return NULL;
  any_fn fn;
  memcpy(&fn, (const char *)n->table + off, sizeof fn);
  return fn;
}

int hx_net_bind(struct hx_net *n, void *dl, int version, char *err, size_t errlen) {
  memset(n, 0, sizeof *n);
  n->version = find_version(version);
  if (!n->version) {
    snprintf(err, errlen, "ncclNet version %d is not one the harness knows", version);
    return -1;
  }
  if (n->version->props_size > PROPS_RAW_CAP) {
    snprintf(err, errlen, "ncclNetProperties_v%d_t (%zu bytes) is larger than the harness's %d", version,
             n->version->props_size, PROPS_RAW_CAP);
    return -1;
  }
  n->dl = dl;
  n->table = dlsym(dl, n->version->symbol);
  if (!n->table) {
    snprintf(err, errlen, "the library does not export %s", n->version->symbol);
    return -1;
  }
  memcpy(&n->name, n->table, sizeof n->name); /* every version starts with its name */
  for (int f = 0; f < F_COUNT; f++) {
    if (n->version->fn[f] == NO_MEMBER) continue;
    if (!member(n, f)) {
      snprintf(err, errlen, "%s.%s is NULL", n->version->symbol, fn_names[f]);
      return -1;
    }
  }
  return 0;
}

int hx_net_open(struct hx_net *n, const char *path, int version, int flags, char *err, size_t errlen) {
  memset(n, 0, sizeof *n);
  void *dl = dlopen(path, flags ? flags : RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(err, errlen, "dlopen(%s) failed: %s", path, dlerror());
    return -1;
  }
  if (hx_net_bind(n, dl, version, err, errlen) != 0) {
    dlclose(dl);
    memset(n, 0, sizeof *n);
    return -1;
  }
  return 0;
}

int hx_net_unload(struct hx_net *n) {
  int rc = 0;
  if (n->ctx && member(n, F_FINALIZE)) {
    ((ncclResult_t(*)(void *))member(n, F_FINALIZE))(n->ctx);
    if (n->prof) n->prof->closed(NULL); /* finalize closed what was left open */
  }
  if (n->dl) rc = dlclose(n->dl);
  memset(n, 0, sizeof *n);
  return rc;
}

/* ---- the calls ------------------------------------------------------------ */
#define SHAPE(n, flag) ((n)->version->shape & (flag))
#define CALL(n, f, TYPE, ...) ((TYPE)member(n, f))(__VA_ARGS__)

typedef ncclResult_t (*init1_fn)(ncclDebugLogger_t);
typedef ncclResult_t (*init2_fn)(ncclDebugLogger_t, ncclProfilerCallback_t);
/* The context versions take (ctx, commId, config, logger, profiler); v11
 * and v12 share the config's layout. */
typedef ncclResult_t (*init_ctx_fn)(void **, uint64_t, ncclNetCommConfig_v11_t *, ncclDebugLogger_t,
                                    ncclProfilerCallback_t);

int hx_net_has_profiler(const struct hx_net *n) { return SHAPE(n, HX_INIT_PROF) != 0; }

/* The recorder's hooks only where the version has profiler calls. */
static const struct hx_net_prof *prof_of(const struct hx_net *n) {
  return SHAPE(n, HX_PHANDLE) ? n->prof : NULL;
}

ncclResult_t hx_net_init(struct hx_net *n, ncclDebugLogger_t logger) {
  ncclProfilerCallback_t cb = prof_of(n) ? prof_of(n)->callback : NULL;
  if (SHAPE(n, HX_CTX)) {
    static ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
    return CALL(n, F_INIT, init_ctx_fn, &n->ctx, 0, &config, logger, cb);
  }
  if (SHAPE(n, HX_INIT_PROF)) return CALL(n, F_INIT, init2_fn, logger, cb);
  return CALL(n, F_INIT, init1_fn, logger);
}

ncclResult_t hx_net_devices(struct hx_net *n, int *ndev) {
  return CALL(n, F_DEVICES, ncclResult_t(*)(int *), ndev);
}

/* A field of the version's properties struct, copied out of the raw bytes. */
static void prop(const unsigned char *raw, const struct hx_net_version *v, int field, void *out, size_t len) {
  memcpy(out, raw + v->prop[field], len);
}

ncclResult_t hx_net_getProperties(struct hx_net *n, int dev, struct hx_props *p, int raw_fill) {
  /* Aligned like any of the versions' structs. */
  union {
    max_align_t align;
    unsigned char bytes[PROPS_RAW_CAP];
  } raw;
  const struct hx_net_version *v = n->version;
  memset(raw.bytes, raw_fill, v->props_size);
  ncclResult_t r = CALL(n, F_PROPS, ncclResult_t(*)(int, void *), dev, raw.bytes);
  memset(p, 0, sizeof *p);
  prop(raw.bytes, v, P_NAME, &p->name, sizeof p->name);
  prop(raw.bytes, v, P_PCI, &p->pciPath, sizeof p->pciPath);
  prop(raw.bytes, v, P_PTR, &p->ptrSupport, sizeof p->ptrSupport);
  p->regIsGlobal = -1;
  if (v->prop[P_REGGLOBAL] != NO_MEMBER) prop(raw.bytes, v, P_REGGLOBAL, &p->regIsGlobal, sizeof p->regIsGlobal);
  prop(raw.bytes, v, P_SPEED, &p->speed, sizeof p->speed);
  prop(raw.bytes, v, P_LATENCY, &p->latency, sizeof p->latency);
  prop(raw.bytes, v, P_MAXCOMMS, &p->maxComms, sizeof p->maxComms);
  prop(raw.bytes, v, P_MAXRECVS, &p->maxRecvs, sizeof p->maxRecvs);
  prop(raw.bytes, v, P_DEVTYPE, &p->netDeviceType, sizeof p->netDeviceType);
  return r;
}

ncclResult_t hx_net_listen(struct hx_net *n, int dev, void *handle, void **lcomm) {
  if (SHAPE(n, HX_CTX))
    return CALL(n, F_LISTEN, ncclResult_t(*)(void *, int, void *, void **), n->ctx, dev, handle, lcomm);
  return CALL(n, F_LISTEN, ncclResult_t(*)(int, void *, void **), dev, handle, lcomm);
}

typedef ncclResult_t (*connect_fn)(int, void *, void **, ncclNetDeviceHandle_v8_t **);
typedef ncclResult_t (*connect_config_fn)(int, ncclNetCommConfig_v10_t *, void *, void **,
                                          ncclNetDeviceHandle_v8_t **);
typedef ncclResult_t (*connect_ctx_fn)(void *, int, void *, void **, ncclNetDeviceHandle_v8_t **);

ncclResult_t hx_net_connect(struct hx_net *n, int dev, void *handle, void **scomm, ncclNetDeviceHandle_v8_t **dc) {
  if (SHAPE(n, HX_CTX)) return CALL(n, F_CONNECT, connect_ctx_fn, n->ctx, dev, handle, scomm, dc);
  if (SHAPE(n, HX_CONNECT_CONFIG)) {
    ncclNetCommConfig_v10_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
    return CALL(n, F_CONNECT, connect_config_fn, dev, &config, handle, scomm, dc);
  }
  return CALL(n, F_CONNECT, connect_fn, dev, handle, scomm, dc);
}

ncclResult_t hx_net_accept(struct hx_net *n, void *lcomm, void **rcomm, ncclNetDeviceHandle_v8_t **dc) {
  return CALL(n, F_ACCEPT, ncclResult_t(*)(void *, void **, ncclNetDeviceHandle_v8_t **), lcomm, rcomm, dc);
}

ncclResult_t hx_net_regMr(struct hx_net *n, void *comm, void *data, size_t size, int type, void **mh) {
  if (SHAPE(n, HX_REGMR_INT))
    return CALL(n, F_REGMR, ncclResult_t(*)(void *, void *, int, int, void **), comm, data, (int)size, type, mh);
  return CALL(n, F_REGMR, ncclResult_t(*)(void *, void *, size_t, int, void **), comm, data, size, type, mh);
}

ncclResult_t hx_net_deregMr(struct hx_net *n, void *comm, void *mh) {
  return CALL(n, F_DEREGMR, ncclResult_t(*)(void *, void *), comm, mh);
}

typedef ncclResult_t (*isend_int_fn)(void *, void *, int, int, void *, void **);
typedef ncclResult_t (*isend_size_fn)(void *, void *, size_t, int, void *, void **);
typedef ncclResult_t (*isend_phandle_fn)(void *, void *, size_t, int, void *, void *, void **);

ncclResult_t hx_net_isend(struct hx_net *n, void *scomm, void *data, int size, int tag, void *mh, void **req) {
  /* A negative int becomes a huge size_t, as it would in NCCL's own conversion. */
  size_t wide = (size_t)(ptrdiff_t)size;
  const struct hx_net_prof *p = prof_of(n);
  if (p) {
    void *ph = p->handle(0, wide);
    ncclResult_t r = CALL(n, F_ISEND, isend_phandle_fn, scomm, data, wide, tag, mh, ph, req);
    p->posted(scomm, r == ncclSuccess && req ? *req : NULL, &ph, 1);
    return r;
  }
  if (SHAPE(n, HX_PHANDLE)) return CALL(n, F_ISEND, isend_phandle_fn, scomm, data, wide, tag, mh, NULL, req);
  if (SHAPE(n, HX_SIZE_T)) return CALL(n, F_ISEND, isend_size_fn, scomm, data, wide, tag, mh, req);
  return CALL(n, F_ISEND, isend_int_fn, scomm, data, size, tag, mh, req);
}

#define MAX_RECVS_WIDE 64
typedef ncclResult_t (*irecv_int_fn)(void *, int, void **, int *, int *, void **, void **);
typedef ncclResult_t (*irecv_size_fn)(void *, int, void **, size_t *, int *, void **, void **);
typedef ncclResult_t (*irecv_phandle_fn)(void *, int, void **, size_t *, int *, void **, void **, void **);

ncclResult_t hx_net_irecv(struct hx_net *n, void *rcomm, int nrecv, void **data, int *sizes, int *tags, void **mh,
                          void **req) {
  if (!SHAPE(n, HX_SIZE_T)) return CALL(n, F_IRECV, irecv_int_fn, rcomm, nrecv, data, sizes, tags, mh, req);
  size_t wide[MAX_RECVS_WIDE] = {0};
  size_t *w = sizes ? wide : NULL;
  for (int i = 0; sizes && i < nrecv && i < MAX_RECVS_WIDE; i++) wide[i] = (size_t)(ptrdiff_t)sizes[i];
  if (SHAPE(n, HX_PHANDLE)) {
    void *ph[MAX_RECVS_WIDE] = {0};
    const struct hx_net_prof *p = prof_of(n);
    int nh = nrecv > 0 && nrecv <= MAX_RECVS_WIDE ? nrecv : 0;
    for (int i = 0; p && i < nh; i++) ph[i] = p->handle(1, w ? w[i] : 0);
    ncclResult_t r = CALL(n, F_IRECV, irecv_phandle_fn, rcomm, nrecv, data, w, tags, mh, ph, req);
    if (p) p->posted(rcomm, r == ncclSuccess && req ? *req : NULL, ph, nh);
    return r;
  }
  return CALL(n, F_IRECV, irecv_size_fn, rcomm, nrecv, data, w, tags, mh, req);
}

ncclResult_t hx_net_iflush(struct hx_net *n, void *rcomm, int nrecv, void **data, int *sizes, void **mh, void **req) {
  return CALL(n, F_IFLUSH, ncclResult_t(*)(void *, int, void **, int *, void **, void **), rcomm, nrecv, data, sizes,
              mh, req);
}

ncclResult_t hx_net_test(struct hx_net *n, void *req, int *done, int *sizes) {
  ncclResult_t r = CALL(n, F_TEST, ncclResult_t(*)(void *, int *, int *), req, done, sizes);
  if (prof_of(n) && done) prof_of(n)->tested(req, *done, r);
  return r;
}

ncclResult_t hx_net_closeSend(struct hx_net *n, void *scomm) {
  ncclResult_t r = CALL(n, F_CLOSESEND, ncclResult_t(*)(void *), scomm);
  if (prof_of(n) && r == ncclSuccess) prof_of(n)->closed(scomm);
  return r;
}
ncclResult_t hx_net_closeRecv(struct hx_net *n, void *rcomm) {
  ncclResult_t r = CALL(n, F_CLOSERECV, ncclResult_t(*)(void *), rcomm);
  if (prof_of(n) && r == ncclSuccess) prof_of(n)->closed(rcomm);
  return r;
}
ncclResult_t hx_net_closeListen(struct hx_net *n, void *lcomm) {
  return CALL(n, F_CLOSELISTEN, ncclResult_t(*)(void *), lcomm);
}

const char *hx_result_str(int r) {
  static const char *const names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",   "ncclInProgress"};
  if (r >= 0 && r < (int)(sizeof names / sizeof names[0])) return names[r];
  static __thread char buf[32];
  snprintf(buf, sizeof buf, "ncclResult(%d)", r);
  return buf;
}
