/*
 * Connection set-up gone wrong: a connector that pauses longer than
 * COLLX_CONNECT_TIMEOUT mid-setup, a listener that calls accept late, and
 * connect given garbage, zero, wrong-secret and stale handles.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "transport/tcp/handle.h"
#include "faults.h"

/* The handle layout the garbage-handle case relies on. */
_Static_assert(offsetof(struct collx_handle, secret) == 32, "secret at offset 32 of the handle");
_Static_assert(offsetof(struct collx_handle, port) == 28, "port at offset 28 of the handle");

#define FEW_MSGS 3

/* FEW_MSGS messages over k; -1 (reported). */
static int few_messages(struct hx_conn *k, size_t cap, int tag, uint64_t key, double timeout_s, const char *label) {
  struct hx_flow f;
  hx_flow_stream(&f, label, cap, tag, 2, FEW_MSGS, key);
  int rc = hx_flow_open(&f, hx_conn_comm(k), k->sender) || hx_flow_run(&f, timeout_s) ? -1 : 0;
  if (rc == 0 && hx_barrier("done", 2)) rc = -1;
  hx_conn_close(k);
  hx_flow_free(&f);
  return rc;
}

/* ---- slow peers during setup ------------------------------------------------ */
/* Either the connection works, or connect fails: connect must never hand
 * back a comm that the listener has already dropped. */
struct slow_results {
  int pause_after; /* the connector pauses after this many calls; 0: the listener starts late */
  int accepted;
};

static void slow_listener(struct slow_results *res) {
  struct hx_conn k = {0};
  if (hx_conn_listen(&k, "handle", 0)) return;
  if (!res->pause_after) {
    hx_step("not calling accept for %d s", 3 * CONNECT_TIMEOUT_S);
    sleep_s(3 * CONNECT_TIMEOUT_S);
  }
  size_t mark = hx_warn_mark();
  double end = now_s() + S(8.0 + 3 * CONNECT_TIMEOUT_S);
  hx_step("accepting");
  while (!k.up && !hx_flag("connector gave up") && now_s() < end) {
    if (hx_conn_poll(&k, 0) < 0) return;
    sched_yield();
  }
  res->accepted = k.up;
  hx_flag_set("listener verdict", 1);
  if (k.up)
    few_messages(&k, 100000, 4, 0x5105, 8.0, "the accepted comm");
  else
    hx_conn_close(&k);
  char w[1024];
  hx_warn_since(mark, w, sizeof w, '|');
  if (w[0]) hx_note("listener WARNs: %s", w);
}

/* connect until a comm, an error or the deadline; the result. */
static ncclResult_t connect_until(struct hx_conn *k, int max_calls, double timeout_s) {
  ncclResult_t rc = ncclSuccess;
  double end = now_s() + S(timeout_s);
  for (int i = 0; (max_calls <= 0 || i < max_calls) && rc == ncclSuccess && !k->scomm && now_s() < end; i++) {
    ncclNetDeviceHandle_v8_t *dc = NULL;
    rc = NET(connect, hx_dev, k->handle, &k->scomm, &dc);
    if (max_calls > 0)
      sleep_s(0.02);
    else
      sched_yield();
  }
  return rc;
}

static void slow_send(struct hx_conn *k, const struct slow_results *res, double dt, size_t mark) {
  char w[1024];
  struct hx_flow f;
  hx_flow_stream(&f, "the new comm", 100000, 4, 2, FEW_MSGS, 0x5105);
  if (hx_flow_open(&f, k->scomm, 1)) return;
  struct hx_wait wt;
  hx_wait_begin(&wt, 5.0);
  while (!hx_flow_finished(&f) && !hx_wait_over(&wt)) {
    const char *call;
    int r = hx_flow_step(&f, &call);
    if (r < 0) break;
    if (r == ncclSuccess) continue;
    hx_warn_since(mark, w, sizeof w, '|');
    hx_flag_set("connector gave up", 1); /* the listener may stop accepting */
    if (hx_flag_wait("listener verdict", 1, 15.0) == 0 && !res->accepted)
      hx_fail("connect returned a comm after %.2f s, but the listener never accepted the connection: the first %s "
              "returned %s (WARN: %s)",
              dt, call, hx_result_str(r), w[0] ? w : "none");
    else
      hx_fail("%s returned %s on the new comm (WARN: %s)", call, hx_result_str(r), w[0] ? w : "none");
    break;
  }
  if (!hx_failed() && !hx_flow_finished(&f)) hx_fail("%ld of %d messages sent in %.0f s on the new comm", f.ndone, FEW_MSGS, S(5.0));
  if (hx_failed()) {
    hx_flag_set("connector gave up", 1);
    hx_conn_close(k);
  } else {
    hx_summary("%d messages went through", FEW_MSGS);
    if (hx_barrier("done", 2) == 0) hx_conn_close(k);
  }
  hx_flow_free(&f);
}

static void slow_connector(const struct slow_results *res) {
  struct hx_conn k = {.sender = 1};
  if (hx_conn_handle(&k, "handle", 10.0)) return;
  size_t mark = hx_warn_mark();
  double t0 = now_s();
  ncclResult_t rc = ncclSuccess;
  if (res->pause_after) {
    /* The first calls (the control socket connects and says hello; the
     * listener answers with its welcome), then a pause. */
    rc = connect_until(&k, res->pause_after, 10.0);
    if (rc == ncclSuccess && !k.scomm) {
      hx_step("pausing %d s between connect calls", 2 * CONNECT_TIMEOUT_S);
      sleep_s(2 * CONNECT_TIMEOUT_S);
    }
  }
  if (rc == ncclSuccess && !k.scomm) rc = connect_until(&k, 0, 8.0 + 3 * CONNECT_TIMEOUT_S);
  double dt = now_s() - t0;
  char w[1024];
  if (rc != ncclSuccess || !k.scomm) {
    hx_warn_since(mark, w, sizeof w, '|');
    if (rc != ncclSuccess)
      hx_summary("connect failed with %s after %.2f s (WARN: %s); ", hx_result_str(rc), dt, w[0] ? w : "none");
    else
      hx_fail("connect neither completed nor failed in %.1f s", dt);
    hx_flag_set("connector gave up", 1);
    return;
  }
  k.up = 1;
  hx_summary("connect returned a comm after %.2f s; ", dt);
  slow_send(&k, res, dt, mark);
}

static void w_slow(void) {
  struct slow_results *res = hx_shared();
  if (hx_load()) return;
  if (hx_role() == 1)
    slow_listener(res);
  else
    slow_connector(res);
}

static void lead_slow(int pause_after) {
  ((struct slow_results *)hx_shared())->pause_after = pause_after;
  hx_lead_workers();
}
static void case_slow_connector(void) { lead_slow(1); }
static void case_slow_listener(void) { lead_slow(0); }

/* ---- connect given garbage handles --------------------------------------------- */
static void handle_listener(void) {
  struct hx_conn stale = {0}, k = {0};
  if (hx_conn_listen(&stale, "stale handle", 0)) return;
  ncclResult_t r = NET(closeListen, stale.lcomm); /* its handle is now stale */
  if (r != ncclSuccess) hx_fail("closeListen returned %s", hx_result_str(r));
  if (hx_conn_listen(&k, "handle", 0)) return;
  struct hx_wait w;
  hx_wait_begin(&w, 40.0);
  while (!k.up && !hx_flag("connector gave up")) {
    int u = hx_conn_poll(&k, 0);
    if (u < 0) return;
    if (u && !hx_flag("valid handle now")) {
      hx_fail("accept returned a comm for a connection made with a bad handle");
      return;
    }
    if (hx_wait_over(&w)) {
      hx_fail("no connection within %.0f s", S(40.0));
      return;
    }
    hx_backoff(&w);
  }
  if (k.up) few_messages(&k, 65536, 3, 0xABC, 10.0, "after the bad handles");
}

/* Connect with h until it fails, completes or the deadline: the result
 * (-1 at the deadline), the time it took and the comm. */
static int connect_outcome(char *h, double timeout_s, double *dt, void **comm) {
  double t0 = now_s(), end = t0 + S(timeout_s);
  *comm = NULL;
  for (;;) {
    ncclNetDeviceHandle_v8_t *dc = NULL;
    ncclResult_t r = NET(connect, hx_dev, h, comm, &dc);
    *dt = now_s() - t0;
    if (r != ncclSuccess || *comm) return r;
    if (now_s() > end) return -1;
    sched_yield();
  }
}

/* Random handles (never with the collx magic: no traffic to random addresses). */
static int random_handles(void) {
  int nrand = 200, codes[8] = {0};
  double dt, worst = 0;
  void *comm;
  hx_step("random handles");
  for (int i = 0; i < nrand; i++) {
    char h[NCCL_NET_HANDLE_MAXSIZE];
    getrandom(h, sizeof h, 0);
    uint32_t m;
    memcpy(&m, h, 4);
    if (m == COLLX_HANDLE_MAGIC) h[0] ^= 1;
    int rc = connect_outcome(h, 3.0, &dt, &comm);
    if (dt > worst) worst = dt;
    if (rc == ncclSuccess || comm) {
      hx_fail("connect with random handle %d returned a comm", i);
      return -1;
    }
    if (rc < 0) {
      hx_fail("connect with random handle %d neither failed nor completed in %.1f s", i, S(3.0));
      return -1;
    }
    codes[rc & 7]++;
  }
  hx_summary("200 random handles: %d x ncclInvalidArgument, %d other errors, slowest %.1f ms; ",
             codes[ncclInvalidArgument], nrand - codes[ncclInvalidArgument], worst * 1e3);
  return 0;
}

struct bad_handle {
  const char *name;
  char h[NCCL_NET_HANDLE_MAXSIZE];
  double limit;
};

/* Damaged copies of the valid handle, and the stale one. */
static int bad_handles(const char *valid, const char *stale, struct bad_handle *t) {
  struct collx_handle hh;
  int nt = 0;
  memset(t, 0, 6 * sizeof *t);
  t[nt++] = (struct bad_handle){"all-zero handle", {0}, 1.0};
  memcpy(&hh, valid, sizeof hh);
  hh.port = 0;
  t[nt] = (struct bad_handle){"valid handle with port 0", {0}, 1.0};
  memcpy(t[nt++].h, &hh, sizeof hh);
  memcpy(&hh, valid, sizeof hh);
  hh.family = 0x5a5a;
  t[nt] = (struct bad_handle){"valid handle with an unknown address family", {0}, 1.0};
  memcpy(t[nt++].h, &hh, sizeof hh);
  t[nt] = (struct bad_handle){"valid handle, secret with one bit flipped", {0}, 5.0};
  memcpy(t[nt].h, valid, NCCL_NET_HANDLE_MAXSIZE);
  t[nt++].h[32] ^= 0x01; /* one bit of the secret (offset 32) */
  t[nt] = (struct bad_handle){"valid handle, secret scrambled", {0}, 5.0};
  memcpy(t[nt].h, valid, NCCL_NET_HANDLE_MAXSIZE);
  for (int b = 32; b < 40; b++) t[nt].h[b] ^= (char)0xA5;
  nt++;
  t[nt] = (struct bad_handle){"stale handle (listener closed)", {0}, 5.0};
  memcpy(t[nt++].h, stale, NCCL_NET_HANDLE_MAXSIZE);
  return nt;
}

static void try_bad_handles(const struct hx_conn *k, const struct hx_conn *stale) {
  struct bad_handle t[6];
  int nt = bad_handles(k->handle, stale->handle, t);
  double dt;
  void *comm;
  for (int i = 0; i < nt; i++) {
    hx_step("%s", t[i].name);
    int rc = connect_outcome(t[i].h, t[i].limit, &dt, &comm);
    if (comm) {
      hx_fail("%s: connect returned a comm (rc %s) after %.3f s", t[i].name, hx_result_str(rc), dt);
      NET(closeSend, comm);
    } else if (rc < 0) {
      hx_fail("%s: connect neither failed nor completed within %.1f s", t[i].name, S(t[i].limit));
    } else {
      hx_summary("%s: %s after %.3f s; ", t[i].name, hx_result_str(rc), dt);
    }
  }
}

static void handle_connector(void) {
  struct hx_conn k = {.sender = 1}, stale = {.sender = 1};
  if (hx_conn_handle(&stale, "stale handle", 10.0) || hx_conn_handle(&k, "handle", 10.0)) return;
  size_t mark = hx_warn_mark();
  if (random_handles()) return;
  try_bad_handles(&k, &stale);
  char w[2048];
  hx_warn_since(mark, w, sizeof w, '|');
  if (!strstr(w, "handle")) hx_note("no WARN mentioned the handle: %s", w);
  /* The real peer still gets through. */
  hx_step("the real connect");
  hx_flag_set("valid handle now", 1);
  double t0 = now_s();
  if (hx_conn_finish(&k, 10.0, 0)) {
    hx_flag_set("connector gave up", 1);
    return;
  }
  hx_summary("then the valid handle connected in %.3f s and carried %d messages", now_s() - t0, FEW_MSGS);
  few_messages(&k, 65536, 3, 0xABC, 10.0, "after the bad handles");
}

static void w_handles(void) {
  if (hx_load()) return;
  if (hx_role() == 1)
    handle_listener();
  else
    handle_connector();
}

#define SETUP_ROLES {"leader", "listener", "connector"}
const struct hx_case setup_cases[] = {
    {"slow-connector", "connector pauses 2 x COLLX_CONNECT_TIMEOUT mid-setup: a working comm or an error", 40,
     SETUP_ROLES, case_slow_connector, w_slow, {NULL}, NULL, NULL},
    {"slow-listener", "listener calls accept only after 3 x COLLX_CONNECT_TIMEOUT: the connection works", 40,
     SETUP_ROLES, case_slow_listener, w_slow, {NULL}, NULL, NULL},
    {"bad-handles", "connect with random, zero, wrong-secret and stale handles: errors, no crash", 60, SETUP_ROLES,
     NULL, w_handles, {NULL}, NULL, NULL},
};
const int setup_count = HX_GROUP(setup_cases);
