/*
 * One ncclNet_v8_t-shaped view of whichever table of the plugin a test
 * drives, so that a harness written against v8 runs its cases through v9,
 * v10, v11 or v12 as NCCL of that generation would call them: size_t
 * sizes, the version's property layout, and for v11/v12 a context made by
 * init (one per process, as one communicator) handed to listen and
 * connect, and finalized by net_compat_finalize.
 *
 *   const ncclNet_v8_t *net = net_compat_load(dl, version);
 *
 * version 0 reads COLLX_DRIVER_NET_VERSION (default 8).  Returns NULL when
 * the library lacks the table or the version is not one of 8-12 (v7's
 * properties lack a field of v8's; drive it directly)
 * (net_compat_symbol() names what was looked up).  Header-only: include it
 * in one file of a program.
 */
#ifndef COLLX_TESTS_NET_COMPAT_H
#define COLLX_TESTS_NET_COMPAT_H

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collx/net_abi.h"

static int nc_version;
static const void *nc_sym;
static void *nc_ctx;
static char nc_symbol[32];

#define NC(v) ((const ncclNet_v##v##_t *)nc_sym)

__attribute__((unused)) static const char *net_compat_symbol(void) { return nc_symbol; }
__attribute__((unused)) static int net_compat_version(void) { return nc_version; }

/* ---- entry points whose v8 form differs from the table's ---------------- */

static ncclResult_t nc_init(ncclDebugLogger_t logger) {
  ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  switch (nc_version) {
    case 12: return NC(12)->init(&nc_ctx, 0xc011ec7ull, &cfg, logger, NULL);
    case 11: return NC(11)->init(&nc_ctx, 0xc011ec7ull, &cfg, logger, NULL);
    case 10: return NC(10)->init(logger, NULL);
    default: return NC(9)->init(logger);
  }
}

/* The fields v8 has, from any later layout. */
#define NC_PROPS_TO_V8(src, dst)                                             \
  do {                                                                       \
    (dst)->name = (src).name;                                                \
    (dst)->pciPath = (src).pciPath;                                          \
    (dst)->guid = (src).guid;                                                \
    (dst)->ptrSupport = (src).ptrSupport;                                    \
    (dst)->regIsGlobal = (src).regIsGlobal;                                  \
    (dst)->speed = (src).speed;                                              \
    (dst)->port = (src).port;                                                \
    (dst)->latency = (src).latency;                                          \
    (dst)->maxComms = (src).maxComms;                                        \
    (dst)->maxRecvs = (src).maxRecvs;                                        \
    (dst)->netDeviceType = (src).netDeviceType;                              \
    (dst)->netDeviceVersion = (src).netDeviceVersion;                        \
  } while (0)

static ncclResult_t nc_get_properties(int dev, ncclNetProperties_v8_t *out) {
  ncclResult_t r;
  if (nc_version == 12) {
    ncclNetProperties_v12_t p;
    if ((r = NC(12)->getProperties(dev, &p)) == ncclSuccess && out) NC_PROPS_TO_V8(p, out);
  } else if (nc_version == 11) {
    ncclNetProperties_v11_t p;
    if ((r = NC(11)->getProperties(dev, &p)) == ncclSuccess && out) NC_PROPS_TO_V8(p, out);
  } else {
    ncclNetProperties_v10_t p; /* v9 has the same layout */
    if ((r = NC(10)->getProperties(dev, &p)) == ncclSuccess && out) NC_PROPS_TO_V8(p, out);
  }
  return r;
}

static ncclResult_t nc_listen(int dev, void *handle, void **comm) {
  if (nc_version >= 11) return NC(11)->listen(nc_ctx, dev, handle, comm);
  return NC(9)->listen(dev, handle, comm);
}

static ncclResult_t nc_connect(int dev, void *handle, void **comm, ncclNetDeviceHandle_v8_t **dc) {
  if (nc_version >= 11) return NC(11)->connect(nc_ctx, dev, handle, comm, dc);
  if (nc_version == 10) {
    ncclNetCommConfig_v10_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
    return NC(10)->connect(dev, &cfg, handle, comm, dc);
  }
  return NC(9)->connect(dev, handle, comm, dc);
}

/* v8 passes int sizes; a negative one reaches the later ABIs as the huge
 * size_t it converts to, which they must refuse as v8 refuses it. */
static ncclResult_t nc_isend(void *comm, void *data, int size, int tag, void *mh, void **req) {
  size_t s = (size_t)(long)size;
  if (nc_version >= 10) return NC(10)->isend(comm, data, s, tag, mh, NULL, req);
  return NC(9)->isend(comm, data, s, tag, mh, req);
}

static ncclResult_t nc_irecv(void *comm, int n, void **data, int *sizes, int *tags, void **mhs,
                             void **req) {
  size_t s[64], *sp = NULL;
  void *ph[64] = {0};
  /* A malformed count goes through as it is, for the plugin to refuse. */
  if (n >= 0 && n <= 64 && sizes) {
    for (int i = 0; i < n; i++) s[i] = (size_t)(long)sizes[i];
    sp = s;
  }
  if (nc_version >= 10) return NC(10)->irecv(comm, n, data, sp, tags, mhs, ph, req);
  return NC(9)->irecv(comm, n, data, sp, tags, mhs, req);
}

static ncclNet_v8_t nc_table;

/* Finalize the context (v11/v12); 0 for the other versions. */
__attribute__((unused)) static ncclResult_t net_compat_finalize(void) {
  if (nc_version < 11 || !nc_ctx) return ncclSuccess;
  ncclResult_t r = NC(11)->finalize(nc_ctx);
  nc_ctx = NULL;
  return r;
}

static int net_compat_version_from_env(void) {
  const char *v = getenv("COLLX_DRIVER_NET_VERSION");
  return v && *v ? atoi(v) : 8;
}

static const ncclNet_v8_t *net_compat_load(void *dl, int version) {
  if (version == 0) version = net_compat_version_from_env();
  snprintf(nc_symbol, sizeof nc_symbol, "ncclNetPlugin_v%d", version);
  if (version < 8 || version > 12) return NULL;
  nc_sym = dlsym(dl, nc_symbol);
  nc_version = version;
  if (!nc_sym || version == 8) return nc_sym;
  /* From v9 on: the entry points that kept v8's form are the table's own
   * (same offsets in every layout, pinned in net_abi.h). */
  const ncclNet_v9_t *t = nc_sym;
  nc_table = (ncclNet_v8_t){
      .name = t->name, .init = nc_init, .devices = t->devices, .getProperties = nc_get_properties,
      .listen = nc_listen, .connect = nc_connect, .accept = t->accept, .regMr = t->regMr,
      .regMrDmaBuf = t->regMrDmaBuf, .deregMr = t->deregMr, .isend = nc_isend, .irecv = nc_irecv,
      .iflush = t->iflush, .test = t->test, .closeSend = t->closeSend, .closeRecv = t->closeRecv,
      .closeListen = t->closeListen, .getDeviceMr = t->getDeviceMr, .irecvConsumed = t->irecvConsumed};
  return &nc_table;
}

#undef NC
#endif
