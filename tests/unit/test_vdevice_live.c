/*
 * Virtual devices through the built plugin's ncclNetPlugin_v12 and _v11,
 * on 9 real interfaces (test_vdevice_live.sh makes them, veths in a
 * network namespace, and names them in COLLX_IFNAME): under v12 eight
 * devices fuse into a new one, which NCCL then sees (devices() grows by
 * one, its vProps list the eight) and carries a connection; the same set
 * again gives the same device; nine are refused.  Under v11 five are
 * refused and four fuse.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collx/net_abi.h"
#include "../common/check.h"

#define NPHYS 9
#define MSG (4 << 20)

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int ndevices(const ncclNet_v12_t *n) {
  int k = -1;
  return n->devices(&k) == ncclSuccess ? k : -1;
}

/* One message over device dev, through the v12 table. */
static void check_transfer(const ncclNet_v12_t *n, void *ctx, int dev) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *l = NULL, *s = NULL, *r = NULL;
  ncclNetDeviceHandle_v12_t *dc = NULL;
  CHECK(n->listen(ctx, dev, handle, &l) == ncclSuccess && l, "listen on virtual device %d", dev);
  double t0 = now_s();
  while (l && (!s || !r) && now_s() - t0 < 10) {
    if (!s && n->connect(ctx, dev, handle, &s, &dc) != ncclSuccess) break;
    if (!r && n->accept(l, &r, &dc) != ncclSuccess) break;
  }
  CHECK(s && r, "connection on virtual device %d", dev);
  if (!s || !r) return;
  char *a = malloc(MSG), *b = calloc(1, MSG);
  for (int i = 0; i < MSG; i++) a[i] = (char)(i * 13 + 7);
  void *ma = NULL, *mb = NULL, *rs = NULL, *rr = NULL, *pa[1] = {NULL}, *data[1] = {b}, *mh[1];
  n->regMr(s, a, MSG, NCCL_PTR_HOST, &ma);
  n->regMr(r, b, MSG, NCCL_PTR_HOST, &mb);
  mh[0] = mb;
  size_t sizes[1] = {MSG};
  int tags[1] = {5}, done_s = 0, done_r = 0, got[8] = {0};
  t0 = now_s();
  while (!rr && now_s() - t0 < 10) n->irecv(r, 1, data, sizes, tags, mh, pa, &rr);
  while (!rs && now_s() - t0 < 10) n->isend(s, a, MSG, 5, ma, NULL, &rs);
  while (rs && rr && (!done_s || !done_r) && now_s() - t0 < 10) {
    int sz[8];
    if (!done_s && n->test(rs, &done_s, sz) != ncclSuccess) break;
    if (!done_r && n->test(rr, &done_r, got) != ncclSuccess) break;
  }
  CHECK(done_s && done_r && got[0] == MSG && !memcmp(a, b, MSG), "4 MiB intact over device %d", dev);
  n->deregMr(s, ma);
  n->deregMr(r, mb);
  CHECK(n->closeSend(s) == ncclSuccess && n->closeRecv(r) == ncclSuccess && n->closeListen(l) == ncclSuccess,
        "close");
  free(a);
  free(b);
}

static void check_v12(const ncclNet_v12_t *n) {
  void *ctx = NULL;
  ncclNetCommConfig_v12_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK(n->init(&ctx, 1, &cfg, logger, NULL) == ncclSuccess, "v12 init");
  CHECK(ndevices(n) == NPHYS, "%d devices, expected %d (COLLX_IFNAME)", ndevices(n), NPHYS);
  ncclNetVDeviceProps_v12_t eight = {.ndevs = 8, .devs = {0, 1, 2, 3, 4, 5, 6, 7}};
  int d = -1;
  CHECK(n->makeVDevice(&d, &eight) == ncclSuccess && d == NPHYS, "v12: 8 devices fused as device %d", d);
  CHECK(ndevices(n) == NPHYS + 1, "devices() after the fusion: %d", ndevices(n));
  ncclNetProperties_v12_t p;
  memset(&p, 0, sizeof p);
  CHECK(n->getProperties(NPHYS, &p) == ncclSuccess, "getProperties of the virtual device");
  int members_ok = p.vProps.ndevs == 8;
  for (int i = 0; i < 8 && members_ok; i++) members_ok = p.vProps.devs[i] == i;
  CHECK(members_ok, "its vProps: %d members", p.vProps.ndevs);
  ncclNetProperties_v12_t p0;
  n->getProperties(0, &p0);
  CHECK(p.speed == 8 * p0.speed, "its speed %d = 8 x %d", p.speed, p0.speed);
  CHECK(p.railId == NCCL_NET_ID_UNDEF, "veths have no rail: %d", p.railId);
  int again = -1;
  CHECK(n->makeVDevice(&again, &eight) == ncclSuccess && again == NPHYS && ndevices(n) == NPHYS + 1,
        "the same 8 again give device %d (count %d)", again, ndevices(n));
  ncclNetVDeviceProps_v12_t nine = {.ndevs = 9, .devs = {0, 1, 2, 3, 4, 5, 6, 7}}; /* 9 claimed */
  CHECK(n->makeVDevice(&d, &nine) == ncclInvalidUsage, "v12: 9 devices refused");
  check_transfer(n, ctx, NPHYS);
  CHECK(n->finalize(ctx) == ncclSuccess, "v12 finalize");
}

static void check_v11(const ncclNet_v11_t *n) {
  void *ctx = NULL;
  ncclNetCommConfig_v11_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK(n->init(&ctx, 2, &cfg, logger, NULL) == ncclSuccess, "v11 init");
  int before = -1, after = -1, d = -1;
  n->devices(&before);
  ncclNetVDeviceProps_v11_t five = {.ndevs = 5, .devs = {0, 1, 2, 3}};
  CHECK(n->makeVDevice(&d, &five) == ncclInvalidUsage, "v11: 5 devices refused");
  ncclNetVDeviceProps_v11_t four = {.ndevs = 4, .devs = {5, 6, 7, 8}};
  CHECK(n->makeVDevice(&d, &four) == ncclSuccess && d == before, "v11: 4 devices fused as device %d", d);
  n->devices(&after);
  CHECK(after == before + 1, "devices() %d -> %d", before, after);
  ncclNetProperties_v11_t p;
  CHECK(n->getProperties(d, &p) == ncclSuccess && p.vProps.ndevs == 4 && p.vProps.devs[0] == 5 &&
            p.vProps.devs[3] == 8, "its vProps: %d members from %d", p.vProps.ndevs, p.vProps.devs[0]);
  CHECK(n->finalize(ctx) == ncclSuccess, "v11 finalize");
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "./.libs/libnccl-net-collx.so";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const ncclNet_v12_t *v12 = lib ? dlsym(lib, "ncclNetPlugin_v12") : NULL;
  const ncclNet_v11_t *v11 = lib ? dlsym(lib, "ncclNetPlugin_v11") : NULL;
  if (!v12 || !v11) {
    printf("FAIL: %s: no ncclNetPlugin_v12/_v11 (%s)\n", path, lib ? "" : dlerror());
    return 1;
  }
  check_v12(v12);
  check_v11(v11);
  if (failures) printf("test_vdevice_live: %d of %d check(s) failed\n", failures, checks);
  else printf("PASS: test_vdevice_live (%d checks)\n", checks);
  return failures ? 1 : 0;
}
