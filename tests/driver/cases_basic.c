/*
 * Conformance: the device, connection set-up that never blocks, and
 * messages of every size on one comm and on several at once.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* devices/getProperties report a usable host device. */
static void check_props(int d, const struct hx_props *p) {
  if (!p->name || !p->name[0]) hx_fail("dev %d: name is %s", d, !p->name ? "NULL" : "empty");
  if (!(p->ptrSupport & NCCL_PTR_HOST))
    hx_fail("dev %d: ptrSupport = 0x%x lacks NCCL_PTR_HOST (0x%x)", d, p->ptrSupport, NCCL_PTR_HOST);
  if (p->maxRecvs <= 1) hx_fail("dev %d: maxRecvs = %d, expected > 1", d, p->maxRecvs);
  if (p->maxComms <= 0) hx_fail("dev %d: maxComms = %d, expected > 0", d, p->maxComms);
  if (p->speed <= 0) hx_fail("dev %d: speed = %d Mbps, expected > 0", d, p->speed);
  if (p->netDeviceType != NCCL_NET_DEVICE_HOST)
    hx_fail("dev %d: netDeviceType = %d, expected NCCL_NET_DEVICE_HOST (0)", d, p->netDeviceType);
  if (!(p->latency >= 0.0f) || isinf(p->latency))
    hx_fail("dev %d: latency = %g us, expected a finite value >= 0", d, (double)p->latency);
  if (p->regIsGlobal != -1 && p->regIsGlobal != 0 && p->regIsGlobal != 1)
    hx_fail("dev %d: regIsGlobal = %d, expected 0 or 1", d, p->regIsGlobal);
  hx_note("dev %d: name '%s' pciPath %s speed %d Mbps latency %g us maxComms %d maxRecvs %d ptrSupport 0x%x", d,
          p->name ? p->name : "(null)", p->pciPath ? p->pciPath : "(null)", p->speed, (double)p->latency,
          p->maxComms, p->maxRecvs, p->ptrSupport);
}

static void case_properties(void) {
  if (hx_load()) return;
  if (!hx_plugin.name || !hx_plugin.name[0])
    hx_fail("%s.name is %s", hx_net_symbol(hx_abi), hx_plugin.name ? "empty" : "NULL");
  for (int d = 0; d < hx_ndev; d++) {
    struct hx_props p;
    ncclResult_t r = NET(getProperties, d, &p, 0x5A); /* garbage first: every field must be written */
    if (r != ncclSuccess)
      hx_fail("getProperties(%d) returned %s", d, hx_result_str(r));
    else
      check_props(d, &p);
  }
}

/* The message every non-blocking case ends with. */
static int one_message(struct hx_flow *f) {
  if (hx_flow_plan(f, "after connect", 1, hx_seed ^ 2, 1)) return -1;
  f->size[0] = f->posted[0] = 4096;
  f->tag[0] = 1;
  return 0;
}

static int flow_through(struct hx_flow *f, struct hx_conn *k, double timeout_s) {
  if (hx_flow_open(f, hx_conn_comm(k), k->sender) || hx_flow_run(f, timeout_s)) return -1;
  return hx_flow_close(f);
}

/* The connector calls connect while the peer does not accept yet: every
 * call returns at once. */
static int connect_before_accept(struct hx_conn *k, double lim) {
  if (hx_conn_handle(k, "handle", 20.0)) return -1;
  hx_step("connect while the peer does not accept yet");
  double t0 = now_s();
  struct hx_wait w = {0, 0};
  int up = 0;
  while (!up && now_s() - t0 < S(0.3)) {
    if ((up = hx_conn_poll(k, lim)) < 0) return -1;
    hx_backoff(&w);
  }
  if (up)
    hx_note("connect completed before the peer called accept (call #%d; allowed: kernel backlog)", k->calls);
  else
    hx_note("%d connect calls before the peer's accept: all returned a NULL comm, slowest %.2f ms", k->calls,
            k->max_call_s * 1e3);
  hx_flag_set("accept now", 1);
  double tgo = now_s();
  if (!up && hx_conn_finish(k, 5.0, lim)) return -1;
  double dt = now_s() - tgo;
  if (dt > S(3.0)) hx_fail("connect completed %.2f s after the peer started accepting (limit %.1f s)", dt, S(3.0));
  return 0;
}

static int accept_when_told(struct hx_conn *k, double lim) {
  hx_step("listen");
  if (hx_conn_listen(k, "handle", lim)) return -1;
  hx_step("waiting for the go to accept");
  if (hx_flag_wait("accept now", 1, 20.0)) return -1;
  double tgo = now_s();
  if (hx_conn_finish(k, 5.0, lim)) return -1;
  double dt = now_s() - tgo;
  if (dt > S(3.0)) hx_fail("accept completed %.2f s after it was first called (limit %.1f s)", dt, S(3.0));
  hx_note("accept: %d calls, slowest %.2f ms", k->calls, k->max_call_s * 1e3);
  return 0;
}

static void case_nonblocking(void) {
  if (hx_load()) return;
  struct hx_conn k = {.sender = sends_first()};
  struct hx_flow f;
  double lim = S(NB_LIMIT_S);
  if (one_message(&f)) return;
  if (k.sender ? connect_before_accept(&k, lim) : accept_when_told(&k, lim)) return;
  if (flow_through(&f, &k, 5.0)) return;
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
}

/* A planned flow over one connection, both sides. */
static void run_plan(struct hx_flow *f, double timeout_s) {
  struct hx_conn k;
  if (hx_conn_establish(&k, sends_first(), "handle", CONNECT_TIMEOUT_S)) return;
  if (flow_through(f, &k, timeout_s)) return;
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
}

/* Mixed sizes on one comm, 8 in flight. */
static void case_mixed_sizes(void) {
  if (hx_load()) return;
  static const int fixed[] = {0, 1, 7, 4096, 65535, 65536, (1 << 20) + 3, 4 << 20, 2, 3, 8191, 131073};
  const int nfixed = (int)(sizeof fixed / sizeof fixed[0]), nrand = 8;
  struct hx_flow f;
  if (hx_flow_plan(&f, "mixed sizes", nfixed + nrand, hx_seed ^ 3, 8)) return;
  uint64_t rs = hx_seed ^ 0x333;
  for (int i = 0; i < f.n; i++) {
    uint64_t x = hx_rng_next(&rs);
    f.size[i] = i < nfixed ? fixed[i] : (int)(x % (3u << 20));
    f.posted[i] = f.size[i] + 1 + (int)((x >> 32) % 4096);
    f.tag[i] = 3 + i % 4;
  }
  run_plan(&f, 8.0);
}

/* Zero-byte messages report size 0 and write nothing. */
static void case_zero_byte(void) {
  if (hx_load()) return;
  static const int sizes[] = {0, 0, 5, 0, 0, 1, 0};
  static const int posted[] = {0, 100, 5, 4096, 0, 1, 65536};
  struct hx_flow f;
  if (hx_flow_plan(&f, "zero-byte", 7, hx_seed ^ 11, 4)) return;
  for (int i = 0; i < f.n; i++) {
    f.size[i] = sizes[i];
    f.posted[i] = posted[i];
    f.tag[i] = 11;
  }
  f.check_tail = 1; /* a zero-byte message writes nothing */
  run_plan(&f, 5.0);
}

/* 4 comm pairs, one thread per comm in each process, both directions. */
#define MC_PAIRS 4
#define MC_MSGS 200
struct mc_thread {
  struct hx_conn k;
  struct hx_flow f;
  int index;
  pthread_t th;
};

static void *mc_main(void *arg) {
  struct mc_thread *t = arg;
  hx_set_slot(t->index + 1);
  if (hx_conn_finish(&t->k, CONNECT_TIMEOUT_S, 0)) return NULL;
  if (hx_flow_open(&t->f, hx_conn_comm(&t->k), t->k.sender) || hx_flow_run(&t->f, 8.0)) return NULL;
  hx_flow_close(&t->f);
  hx_step("pair %d: flow finished", t->index);
  return NULL;
}

static int mc_plan(struct mc_thread *t, int k, char *label) {
  t->index = k;
  t->k.sender = (k % 2) == (hx_role() - 1); /* pairs 0,2: role 1 sends; 1,3: role 2 sends */
  snprintf(label, 32, "pair %d (%s)", k, t->k.sender ? "send" : "recv");
  if (hx_flow_plan(&t->f, label, MC_MSGS, hx_seed ^ (0x600ull + (uint64_t)k), 4)) return -1;
  uint64_t rs = hx_seed ^ (0x6000ull + (uint64_t)k);
  for (int i = 0; i < MC_MSGS; i++) {
    uint64_t x = hx_rng_next(&rs), y = x >> 8;
    unsigned pick = (unsigned)(x % 100);
    int sz = pick < 50 ? (int)(y % 4097) : pick < 85 ? (int)(y % 131073) : (int)(y % (1u << 20)) + 1;
    t->f.size[i] = sz;
    t->f.posted[i] = sz + (int)((x >> 40) % 512);
    t->f.tag[i] = 40 + k;
  }
  return 0;
}

static void case_multi_comm(void) {
  if (hx_load()) return;
  static struct mc_thread t[MC_PAIRS];
  static char labels[MC_PAIRS][32];
  char name[32];
  for (int k = 0; k < MC_PAIRS; k++)
    if (mc_plan(&t[k], k, labels[k])) return;
  hx_step("listen");
  for (int k = 0; k < MC_PAIRS; k++) {
    snprintf(name, sizeof name, "handle %d", k);
    if (t[k].k.sender ? hx_conn_handle(&t[k].k, name, 20.0) : hx_conn_listen(&t[k].k, name, 0)) return;
  }
  hx_step("threads running");
  for (int k = 0; k < MC_PAIRS; k++) {
    int e = pthread_create(&t[k].th, NULL, mc_main, &t[k]);
    if (e) {
      hx_fail("pthread_create: %s", strerror(e));
      return;
    }
  }
  for (int k = 0; k < MC_PAIRS; k++) pthread_join(t[k].th, NULL);
  if (hx_failed() || hx_barrier("done", 2)) return;
  hx_step("closing");
  for (int k = 0; k < MC_PAIRS; k++) hx_conn_close(&t[k].k);
}

/* iflush on host memory has nothing to do. */
static void flush_send(struct hx_conn *k, uint8_t *d[2], const int size[2], const int tags[2], void *mh) {
  hx_pattern_fill(d[0], (size_t)size[0], hx_seed ^ 12);
  hx_pattern_fill(d[1], (size_t)size[1], hx_seed ^ 13);
  for (int i = 0; i < 2; i++) {
    void *req = hx_post_send(k->scomm, d[i], size[i], tags[i], mh, 3.0, "flush case send");
    if (!req || hx_complete(req, size[i], 5.0, "flush case send")) return;
  }
}

static void flush_recv(struct hx_conn *k, uint8_t *d8[2], const int size[2], int tags[2], void *mh) {
  int posted[2] = {8192, 100}, got[2];
  void *d[2] = {d8[0], d8[1]}, *m[2] = {mh, mh};
  void *req = hx_post_recv(k->rcomm, 2, d, posted, tags, m, 3.0, "flush case");
  if (!req || hx_test_until(req, 2, got, 5.0, "flush case grouped receive")) return;
  char why[256];
  for (int i = 0; i < 2; i++) {
    if (got[i] != size[i]) hx_fail("receive %d: sizes[%d] = %d, expected %d", i, i, got[i], size[i]);
    if (hx_pattern_check(d8[i], (size_t)size[i], hx_seed ^ (uint64_t)(12 + i), why, sizeof why))
      hx_fail("receive %d: data wrong: %s", i, why);
  }
  for (int nn = 1; nn <= 2; nn++) {
    void *fr = (void *)0x1;
    hx_step("iflush(n = %d) after the receive completed", nn);
    ncclResult_t r = NET(iflush, k->rcomm, nn, d, got, m, &fr);
    if (r != ncclSuccess) {
      hx_fail("iflush(n = %d) on host memory returned %s, expected ncclSuccess", nn, hx_result_str(r));
    } else if (fr != NULL) {
      hx_fail("iflush(n = %d) on host memory returned a request %p, expected NULL (nothing to flush)", nn, fr);
      int g2[2];
      if (fr != (void *)0x1) hx_test_until(fr, nn, g2, 5.0, "the iflush request");
    }
  }
}

static void case_flush(void) {
  if (hx_load()) return;
  struct hx_conn k;
  if (hx_conn_establish(&k, sends_first(), "handle", CONNECT_TIMEOUT_S)) return;
  const int size[2] = {4096, 100};
  int tags[2] = {21, 22};
  void *mh = NULL;
  uint8_t *buf = hx_reg_buffer(hx_conn_comm(&k), 8192 + 100, &mh);
  if (!buf) return;
  uint8_t *d[2] = {buf, buf + 8192};
  hx_step("flush case: %s", k.sender ? "sending 2 messages" : "grouped receive of 2");
  if (k.sender)
    flush_send(&k, d, size, tags, mh);
  else
    flush_recv(&k, d, size, tags, mh);
  ncclResult_t r = NET(deregMr, hx_conn_comm(&k), mh);
  if (r != ncclSuccess) hx_fail("deregMr returned %s", hx_result_str(r));
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
  free(buf);
}

const struct hx_case driver_basic_cases[] = {
    {"properties", "devices/getProperties report a usable host device", 10, {"leader", "proc"}, NULL,
     case_properties, {NULL}, NULL, NULL},
    {"nonblocking", "connect before the peer accepts: every call returns at once (< 50 ms)", 10,
     {"leader", "connector", "listener"}, NULL, case_nonblocking, {NULL}, NULL, NULL},
    {"mixed-sizes", "sizes 0..4 MiB in order, 8 in flight, data/sizes/canary verified", 12,
     {"leader", "sender", "receiver"}, NULL, case_mixed_sizes, {NULL}, NULL, NULL},
    {"multi-comm", "4 comm pairs, one thread each per process, 200 messages each way", 15,
     {"leader", "proc0", "proc1"}, NULL, case_multi_comm, {NULL}, NULL, NULL},
    {"zero-byte", "zero-byte messages report size 0 and write nothing", 10, {"leader", "sender", "receiver"}, NULL,
     case_zero_byte, {NULL}, NULL, NULL},
    {"flush", "iflush on host memory returns a NULL request", 10, {"leader", "sender", "receiver"}, NULL,
     case_flush, {NULL}, NULL, NULL},
};
const int driver_basic_count = HX_GROUP(driver_basic_cases);
