/*
 * Per-communicator contexts (ncclNet v11/v12) through the core, over
 * loopback with stream threads:
 *   - the comm config's traffic class is on every socket of both ends
 *     (IP_TOS read back with getsockopt), and absent without one;
 *   - setNetAttr's hints: checked (bad counts refused), and a connection
 *     made while many peers are active gets fewer streams, on both ends;
 *   - finalize closes the comms NCCL left open, and the last one leaves no
 *     plugin thread running; a finalized context is refused;
 *   - repeated init + context creation is cheap.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/context.h"
#include "core/comm.h"
#include "core/core.h"
#include "topo/topo.h"
#include "transport/tcp/recv.h"
#include "transport/tcp/send.h"
#include "../common/check.h"

#define TCLASS 0x28 /* DSCP AF11: the ECN bits the kernel keeps are 0 */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct pair {
  void *lcomm, *scomm, *rcomm;
};

/* listen, connect and accept under ctx until both comms exist. */
static int make_pair(void *ctx, struct pair *p) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  memset(p, 0, sizeof *p);
  if (collx_ctx_listen(ctx, 0, handle, &p->lcomm) != ncclSuccess || !p->lcomm) return -1;
  double t0 = now_s();
  while ((!p->scomm || !p->rcomm) && now_s() - t0 < 10) {
    if (!p->scomm && collx_ctx_connect(ctx, 0, handle, &p->scomm) != ncclSuccess) return -1;
    if (!p->rcomm && collx_accept(p->lcomm, &p->rcomm) != ncclSuccess) return -1;
  }
  return p->scomm && p->rcomm ? 0 : -1;
}

static int tos_of(int fd) {
  int v = -1;
  socklen_t len = sizeof v;
  if (getsockopt(fd, IPPROTO_IP, IP_TOS, &v, &len) != 0) return -2;
  return v;
}

/* Every socket of comm c carries `want` (control and data streams). */
static void expect_tos(const char *what, const struct tcp_comm_base *c, int want) {
  int got = tos_of(c->ctrl.fd[0]);
  CHECK(got == want, "%s: control socket TOS %#x, expected %#x", what, got, want);
  for (int i = 0; i < c->nstreams; i++) {
    got = tos_of(c->streams[i].fd);
    CHECK(got == want, "%s: stream %d TOS %#x, expected %#x", what, i, got, want);
  }
}

static void close_pair(struct pair *p) {
  CHECK(collx_close_send(p->scomm) == ncclSuccess, "closeSend");
  CHECK(collx_close_recv(p->rcomm) == ncclSuccess, "closeRecv");
  CHECK(collx_close_listen(p->lcomm) == ncclSuccess, "closeListen");
}

static void check_traffic_class(void) {
  void *ctx = NULL;
  struct pair p;
  CHECK(collx_ctx_create(0x1111, TCLASS, &ctx) == ncclSuccess && ctx, "context with a traffic class");
  CHECK(make_pair(ctx, &p) == 0, "loopback pair under a context with a traffic class");
  if (p.scomm && p.rcomm) {
    expect_tos("send comm", p.scomm, TCLASS);
    expect_tos("receive comm", p.rcomm, TCLASS);
    close_pair(&p);
  }
  CHECK(collx_ctx_finalize(ctx) == ncclSuccess, "finalize");

  CHECK(collx_ctx_create(0x2222, NCCL_NET_TRAFFIC_CLASS_UNDEF, &ctx) == ncclSuccess, "context without one");
  CHECK(make_pair(ctx, &p) == 0, "loopback pair without a traffic class");
  if (p.scomm && p.rcomm) {
    expect_tos("send comm, no class", p.scomm, 0);
    expect_tos("receive comm, no class", p.rcomm, 0);
    close_pair(&p);
  }
  CHECK(collx_ctx_finalize(ctx) == ncclSuccess, "finalize");
  /* Not a TOS byte: refused with a WARN, the sockets keep the default. */
  CHECK(collx_ctx_create(0x3333, 4096, &ctx) == ncclSuccess, "context with class 4096");
  CHECK(make_pair(ctx, &p) == 0, "loopback pair with class 4096");
  if (p.scomm && p.rcomm) {
    expect_tos("class 4096 ignored", p.scomm, 0);
    close_pair(&p);
  }
  CHECK(collx_ctx_finalize(ctx) == ncclSuccess, "finalize");
}

static struct collx_hints hints(int peers, int flows) {
  struct collx_flow_hint f = {.max_peers = peers, .min_peers = 1, .max_flows = flows, .min_flows = 1};
  return (struct collx_hints){.send = f, .recv = f, .op = ~0u, .algo = ~0u, .proto = ~0u};
}

static void check_hints(void) {
  void *ctx = NULL;
  struct pair p;
  const struct collx_device *dev = collx_device_get(0);
  int base = dev ? dev->streams : 0;
  CHECK(base >= 2, "device 0's stream count %d (at least 2 without COLLX_NSTREAMS)", base);
  CHECK(collx_ctx_create(0x4444, NCCL_NET_TRAFFIC_CLASS_UNDEF, &ctx) == ncclSuccess, "context");

  struct collx_hints h = hints(2, 4);
  CHECK(collx_ctx_set_hints(ctx, &h) == ncclSuccess, "hints of a 2-rank ring");
  CHECK(make_pair(ctx, &p) == 0, "pair under few peers");
  if (p.scomm && p.rcomm) {
    int ns = ((struct tcp_comm_base *)p.scomm)->nstreams, nr = ((struct tcp_comm_base *)p.rcomm)->nstreams;
    CHECK(ns == base && nr == base, "2 peers x 4 flows: %d/%d streams, expected %d", ns, nr, base);
    close_pair(&p);
  }
  h = hints(64, 2);
  CHECK(collx_ctx_set_hints(ctx, &h) == ncclSuccess, "hints of a 64-peer all-to-all");
  CHECK(make_pair(ctx, &p) == 0, "pair under many peers");
  if (p.scomm && p.rcomm) {
    int want = collx_streams_hinted(base, 64, 2);
    int ns = ((struct tcp_comm_base *)p.scomm)->nstreams, nr = ((struct tcp_comm_base *)p.rcomm)->nstreams;
    CHECK(want < base, "64 peers x 2 flows should lower %d streams (policy gives %d)", base, want);
    CHECK(ns == want && nr == want, "64 peers x 2 flows: %d/%d streams, expected %d", ns, nr, want);
    close_pair(&p);
  }

  struct collx_hints bad = hints(-5, 2);
  CHECK(collx_ctx_set_hints(ctx, &bad) == ncclInvalidArgument, "maxConcurrentPeers -5 accepted");
  bad = hints(4, 2);
  bad.recv.min_flows = 3;
  CHECK(collx_ctx_set_hints(ctx, &bad) == ncclInvalidArgument, "recv minFlowsPerPeer 3 > max 2 accepted");
  bad = hints(NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF);
  bad.send.min_peers = bad.send.min_flows = NCCL_NET_ATTR_UNDEF;
  CHECK(collx_ctx_set_hints(ctx, &bad) == ncclSuccess, "all-unset hints refused");
  CHECK(collx_ctx_set_hints(ctx, NULL) == ncclInvalidArgument, "NULL hints accepted");
  CHECK(collx_ctx_finalize(ctx) == ncclSuccess, "finalize");
  h = hints(2, 2);
  CHECK(collx_ctx_set_hints(ctx, &h) == ncclInvalidArgument, "hints on a finalized context accepted");
}

/* Two communicators leave their comms open; finalize closes them, and
 * after the last one no plugin thread runs. */
static void check_finalize(void) {
  void *a = NULL, *b = NULL;
  struct pair pa, pb;
  CHECK(collx_ctx_create(0xaaaa, NCCL_NET_TRAFFIC_CLASS_UNDEF, &a) == ncclSuccess, "context a");
  CHECK(collx_ctx_create(0xbbbb, NCCL_NET_TRAFFIC_CLASS_UNDEF, &b) == ncclSuccess, "context b");
  CHECK(make_pair(a, &pa) == 0 && make_pair(b, &pb) == 0, "a pair under each");
  CHECK(collx_ctx_live() == 2, "%d live contexts, expected 2", collx_ctx_live());
  CHECK(collx_live_threads() > 0, "stream threads running before finalize (%d)", collx_live_threads());
  /* One comm of a closed by NCCL itself before finalize. */
  CHECK(collx_close_send(pa.scomm) == ncclSuccess, "closeSend of a's send comm");
  CHECK(collx_ctx_finalize(a) == ncclSuccess, "finalize a");
  CHECK(collx_close_recv(pa.rcomm) == ncclInvalidArgument, "a's receive comm still open after finalize");
  CHECK(collx_close_listen(pa.lcomm) == ncclInvalidArgument, "a's listen comm still open after finalize");
  CHECK(collx_live_threads() > 0, "b's threads gone with a's finalize");
  CHECK(collx_ctx_finalize(b) == ncclSuccess, "finalize b");
  CHECK(collx_live_threads() == 0, "%d plugin threads after the last finalize", collx_live_threads());
  CHECK(collx_ctx_live() == 0, "%d live contexts after finalize", collx_ctx_live());
  CHECK(collx_ctx_finalize(b) == ncclInvalidArgument, "second finalize accepted");
  CHECK(collx_ctx_finalize(NULL) == ncclInvalidArgument, "finalize(NULL) accepted");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *l = NULL;
  CHECK(collx_ctx_listen(b, 0, handle, &l) == ncclInvalidArgument && !l, "listen on a finalized context");
}

/* NCCL calls init for every communicator: it must stay cheap. */
static void check_repeated_init(void) {
  const int n = 20000;
  double t0 = now_s();
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    void *ctx = NULL;
    ok = collx_init(NULL) == ncclSuccess && collx_ctx_create((uint64_t)i, 0, &ctx) == ncclSuccess &&
         collx_ctx_finalize(ctx) == ncclSuccess;
  }
  double per_us = (now_s() - t0) / n * 1e6;
  CHECK(ok, "repeated init / context / finalize failed");
  CHECK(per_us < 100, "init + context + finalize took %.1f us each (limit 100)", per_us);
  printf("init + context + finalize: %.2f us each over %d\n", per_us, n);
}

int main(void) {
  setenv("COLLX_IFNAME", "lo", 1);
  setenv("COLLX_SOCKET_FAMILY", "AF_INET", 1);
  setenv("COLLX_PROGRESS", "threads", 1);
  unsetenv("COLLX_NSTREAMS");
  if (collx_init(NULL) != ncclSuccess) {
    printf("FAIL: init on lo\n");
    return 1;
  }
  check_traffic_class();
  check_hints();
  check_finalize();
  check_repeated_init();
  if (failures) printf("test_context: %d of %d check(s) failed\n", failures, checks);
  else printf("PASS: test_context (%d checks)\n", checks);
  return failures ? 1 : 0;
}
