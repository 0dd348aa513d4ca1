/*
 * The plugin as a program that drives it sees it: dlopen, one exported
 * ncclNet_vN_t table of any version the harness knows, and version-neutral
 * calls over it (int sizes, as NCCL's proxy holds them; the calls convert
 * to what the version takes).
 *
 * The versions are rows of one table in net.c: a version with the same
 * calling shape as one already known is one more row.  Nothing here
 * reports a verdict: errors come back as ncclResult_t or as text, so that
 * the tools (collx-perf) use it as the tests do.
 */
#ifndef COLLX_HARNESS_NET_H
#define COLLX_HARNESS_NET_H

#include <stddef.h>

#include "collx/net_abi.h"

#define HX_NET_DEFAULT_VERSION 8

/* The properties every version reports, read out of its own layout. */
struct hx_props {
  const char *name;
  const char *pciPath;
  int ptrSupport;
  int regIsGlobal; /* -1: the version has no such field */
  int speed;       /* Mbps */
  float latency;   /* us */
  int maxComms;
  int maxRecvs;
  int netDeviceType;
};

struct hx_net_version;

/* Hooks of a recorder of the plugin's profiler events (tests/harness/
 * prof.c); a table without them passes no callback and NULL handles. */
struct hx_net_prof {
  ncclProfilerCallback_t callback;
  void *(*handle)(int op, size_t len);  /* for one message about to be posted */
  void (*posted)(void *comm, void *req, void *const *handles, int n); /* req NULL: not posted */
  void (*tested)(void *req, int done, ncclResult_t res);
  void (*closed)(void *comm); /* NULL: every comm (finalize) */
};

struct hx_net {
  const struct hx_net_version *version;
  void *dl;
  const void *table;
  const char *name; /* the table's name member */
  void *ctx;        /* versions whose calls take a context */
  const struct hx_net_prof *prof; /* set before init; used only by versions with profiler calls */
};

/* Whether the version's init takes a profiler callback (v10 on). */
int hx_net_has_profiler(const struct hx_net *n);

/* Versions the harness can drive, newest last; returns how many. */
int hx_net_versions(int *out, int max);
/* The table symbol of a version ("ncclNetPlugin_v8"), or NULL if unknown. */
const char *hx_net_symbol(int version);

/* dlopen (RTLD_LOCAL, or the given flags when flags != 0) + dlsym, and
 * every call the harness uses present.  0, or -1 with the reason in err. */
int hx_net_open(struct hx_net *n, const char *path, int version, int flags, char *err, size_t errlen);
/* The table of an already loaded library (no dlopen of our own). */
int hx_net_bind(struct hx_net *n, void *dl, int version, char *err, size_t errlen);
/* dlclose; 0 or dlclose's result. */
int hx_net_unload(struct hx_net *n);

ncclResult_t hx_net_init(struct hx_net *n, ncclDebugLogger_t logger);
ncclResult_t hx_net_devices(struct hx_net *n, int *ndev);
/* raw_fill: the byte the version's properties struct holds before the call
 * (a garbage fill shows fields the plugin leaves unwritten). */
ncclResult_t hx_net_getProperties(struct hx_net *n, int dev, struct hx_props *p, int raw_fill);
ncclResult_t hx_net_listen(struct hx_net *n, int dev, void *handle, void **lcomm);
ncclResult_t hx_net_connect(struct hx_net *n, int dev, void *handle, void **scomm, ncclNetDeviceHandle_v8_t **dc);
ncclResult_t hx_net_accept(struct hx_net *n, void *lcomm, void **rcomm, ncclNetDeviceHandle_v8_t **dc);
ncclResult_t hx_net_regMr(struct hx_net *n, void *comm, void *data, size_t size, int type, void **mh);
ncclResult_t hx_net_deregMr(struct hx_net *n, void *comm, void *mh);
ncclResult_t hx_net_isend(struct hx_net *n, void *scomm, void *data, int size, int tag, void *mh, void **req);
ncclResult_t hx_net_irecv(struct hx_net *n, void *rcomm, int nrecv, void **data, int *sizes, int *tags, void **mh,
                          void **req);
ncclResult_t hx_net_iflush(struct hx_net *n, void *rcomm, int nrecv, void **data, int *sizes, void **mh, void **req);
ncclResult_t hx_net_test(struct hx_net *n, void *req, int *done, int *sizes);
ncclResult_t hx_net_closeSend(struct hx_net *n, void *scomm);
ncclResult_t hx_net_closeRecv(struct hx_net *n, void *rcomm);
ncclResult_t hx_net_closeListen(struct hx_net *n, void *lcomm);

const char *hx_result_str(int r);

#endif
