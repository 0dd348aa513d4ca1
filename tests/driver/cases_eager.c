/*
 * Conformance: small messages that go before their receive is posted
 * (COLLX_EAGER_SIZE), a sender that closes right after them, and the CTS
 * a receiver holds back after a run of small messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* 1 (skip reported) when small sends wait for their receive in this run. */
static int eager_off(const char *why) {
  const char *es = getenv("COLLX_EAGER_SIZE");
  if (!es || atoi(es) >= 4096) return 0;
  hx_skip("COLLX_EAGER_SIZE=%s: %s", es, why);
  return 1;
}

/* ---- early: sends before their receives ----------------------------------- */
/* Several small sends into one grouped receive in shuffled tag order, one
 * large entry of that group sent only after the receive is posted (it
 * needs the CTS), then single receives posted after every send returned. */
#define EARLY_SINGLES 3
#define EARLY_MAX (4 + EARLY_SINGLES)
struct early {
  int n, nmsg, large;
  int size[EARLY_MAX], tag[EARLY_MAX], cap[EARLY_MAX];
  size_t off[EARLY_MAX + 1];
};

static void plan_early(struct early *e, int n) {
  static const int gsize[4] = {100, 1, 0, 200000}; /* the last one is large when n = 4 */
  static const int ssize[EARLY_SINGLES] = {8, 4096, 1000};
  e->n = n;
  e->nmsg = n + EARLY_SINGLES;
  e->large = n == 4 ? 3 : -1;
  for (int k = 0; k < e->nmsg; k++) {
    e->size[k] = k < n ? (n == 4 || k < n - 1 ? gsize[k] : 300) : ssize[k - n];
    if (n == 1 && k == 0) e->size[k] = 100;
    e->tag[k] = k < n ? 40 + k : 90; /* the singles share one tag */
    e->cap[k] = e->size[k] + 64;
  }
  layout(e->cap, e->nmsg, e->off);
}

static uint64_t early_key(int k) { return hx_key(hx_seed ^ 13, (uint64_t)k, 0); }

/* Phase 0: the group's small entries (shuffled) before any receive; phase
 * 1: the large entry once the receive is posted; phase 2: the singles. */
static int early_phase(const struct early *e, int k, int phase) {
  static const int order[4] = {2, 0, 3, 1};
  int m = k < e->n ? (e->n < 4 ? k : order[k]) : k;
  int in = phase == 0 ? (m < e->n && m != e->large) : phase == 1 ? m == e->large : m >= e->n;
  return in ? m : -1;
}

static int early_send(struct hx_conn *k, const struct early *e, uint8_t *buf, void *mh) {
  void *req[EARLY_MAX];
  char what[160], flag = 0;
  for (int m = 0; m < e->nmsg; m++) hx_pattern_fill(buf + e->off[m], (size_t)e->size[m], early_key(m));
  for (int j = 0, phase = 0; phase < 3; phase++) {
    for (int i = 0; i < e->nmsg; i++) {
      int m = early_phase(e, i, phase);
      if (m < 0) continue;
      snprintf(what, sizeof what, "isend %d (tag %d, %d bytes)%s", m, e->tag[m], e->size[m],
               phase == 1 ? "" : " with no receive posted yet: a small send must go at once");
      hx_step("%s", what);
      req[j] = hx_post_send(k->scomm, buf + e->off[m], e->size[m], e->tag[m], mh, phase == 1 ? 3.0 : 1.0, what);
      if (!req[j++]) return -1;
    }
    if (phase == 0 && (hx_put("group sent", &flag, 1) || hx_get("group posted", &flag, 1))) return -1;
  }
  if (hx_put("all sent", &flag, 1)) return -1;
  for (int j = 0; j < e->nmsg; j++) {
    snprintf(what, sizeof what, "send %d of %d", j + 1, e->nmsg);
    int got;
    if (hx_test_until(req[j], 1, &got, 5.0, what)) return -1;
  }
  return 0;
}

static void early_verify(const struct early *e, const uint8_t *buf, const int *got) {
  for (int k = 0; k < e->nmsg; k++) {
    char what[96];
    int beyond = 0; /* a byte after the message, inside its buffer, was written */
    for (int b = e->size[k]; b < e->cap[k]; b++) beyond |= buf[e->off[k] + (size_t)b] != HX_FILL;
    snprintf(what, sizeof what, "message %d (tag %d, %d bytes)", k, e->tag[k], e->size[k]);
    if (check_entry(what, buf + e->off[k], got[k], e->size[k], e->cap[k], early_key(k), (uint64_t)k)) continue;
    if (beyond)
      hx_fail("%s: bytes after it in its %d-byte buffer were written", what, e->cap[k]);
  }
}

static int early_receive(struct hx_conn *k, const struct early *e, uint8_t *buf, void *mh) {
  char what[128], flag;
  for (int m = 0; m < e->nmsg; m++) {
    memset(buf + e->off[m], HX_FILL, (size_t)e->cap[m]);
    hx_canary_fill(buf + e->off[m] + e->cap[m], (uint64_t)m);
  }
  void *d[4], *mhs[4] = {mh, mh, mh, mh};
  int got[EARLY_MAX], cap[EARLY_MAX], tag[EARLY_MAX];
  memcpy(cap, e->cap, sizeof cap);
  memcpy(tag, e->tag, sizeof tag);
  for (int m = 0; m < e->n; m++) d[m] = buf + e->off[m];
  if (hx_get("group sent", &flag, 1)) return -1;
  snprintf(what, sizeof what, "grouped irecv n=%d after its small sends returned", e->n);
  hx_step("%s", what);
  void *req = hx_post_recv(k->rcomm, e->n, d, cap, tag, mhs, 3.0, what);
  if (!req || hx_put("group posted", &flag, 1) || hx_test_until(req, e->n, got, 5.0, what)) return -1;
  if (hx_get("all sent", &flag, 1)) return -1;
  for (int m = e->n; m < e->nmsg; m++) {
    void *dm = buf + e->off[m];
    snprintf(what, sizeof what, "irecv %d after every send returned", m - e->n);
    hx_step("%s", what);
    void *rm = hx_post_recv(k->rcomm, 1, &dm, &cap[m], &tag[m], mhs, 3.0, what);
    if (!rm || hx_test_until(rm, 1, &got[m], 5.0, what)) return -1;
  }
  early_verify(e, buf, got);
  return 0;
}

static void case_early(void) {
  if (hx_load() || eager_off("small sends wait for their receive")) return;
  struct early e;
  plan_early(&e, hx_devprops.maxRecvs < 4 ? hx_devprops.maxRecvs : 4);
  struct hx_conn k;
  void *mh = NULL;
  uint8_t *buf = conn_with_buffer(&k, e.off[e.nmsg], &mh);
  if (!buf) return;
  if (k.sender ? early_send(&k, &e, buf, mh) : early_receive(&k, &e, buf, mh)) return;
  release_buffer(&k, buf, mh);
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
}

/* ---- close-after-send ------------------------------------------------------ */
/* A sender that closes right after its small sends completed loses
 * nothing: the receiver, posting only then, gets every message, and a
 * receive posted after the last one fails promptly instead of waiting. */
#define CLOSE_MSGS 8
#define CLOSE_CAP 4096
static int close_size(int k) { return 1 + 500 * k; }
static uint64_t close_key(int k) { return hx_key(hx_seed ^ 14, (uint64_t)k, 0); }

static void send_then_close(struct hx_conn *k, uint8_t *buf, void *mh) {
  void *req[CLOSE_MSGS];
  char what[128], flag = 0;
  for (int m = 0; m < CLOSE_MSGS; m++) {
    hx_pattern_fill(buf + (size_t)m * CLOSE_CAP, (size_t)close_size(m), close_key(m));
    snprintf(what, sizeof what, "isend %d (%d bytes) before any receive", m, close_size(m));
    if (!(req[m] = hx_post_send(k->scomm, buf + (size_t)m * CLOSE_CAP, close_size(m), 5, mh, 1.0, what))) return;
  }
  for (int m = 0; m < CLOSE_MSGS; m++) {
    snprintf(what, sizeof what, "send %d", m);
    if (hx_complete(req[m], close_size(m), 5.0, what)) return;
  }
  hx_step("closeSend with every send complete, nothing received yet");
  NET(deregMr, k->scomm, mh);
  hx_conn_close(k);
  hx_put("closed", &flag, 1);
}

/* Nothing more will come: the receive must fail with ncclRemoteError within 2 s. */
static void receive_after_close(void *rcomm, uint8_t *buf, void *mh, const char *what) {
  void *d = buf, *m = mh, *req = NULL;
  int sz = CLOSE_CAP, tag = 5, got, done = 0;
  ncclResult_t r = NET(irecv, rcomm, 1, &d, &sz, &tag, &m, &req);
  double t0 = now_s();
  struct hx_wait w;
  hx_wait_begin(&w, 2.0);
  while (r == ncclSuccess && req && !done && !hx_wait_over(&w)) {
    r = NET(test, req, &done, &got);
    hx_backoff(&w);
  }
  if (r == ncclSuccess && (done || !req))
    hx_fail("%s: a receive with nothing left to come %s", what, done ? "completed" : "was not posted");
  else if (r == ncclSuccess)
    hx_fail("%s: still pending %.1f s after the peer closed (expected ncclRemoteError)", what, S(2.0));
  else if (r != ncclRemoteError)
    hx_fail("%s: %s (expected ncclRemoteError)", what, hx_result_str(r));
  else
    hx_note("%s: ncclRemoteError after %.3f s", what, now_s() - t0);
}

static void receive_after_sender_closed(struct hx_conn *k, uint8_t *buf, void *mh) {
  char what[128], flag;
  if (hx_get("closed", &flag, 1)) return;
  for (int m = 0; m < CLOSE_MSGS; m++) {
    void *d = buf + (size_t)m * CLOSE_CAP, *mhs = mh, *req = NULL;
    int sz = CLOSE_CAP, tag = 5, got = HX_SIZE_SENTINEL;
    snprintf(what, sizeof what, "irecv %d after the sender closed", m);
    hx_step("%s", what);
    ncclResult_t r = NET(irecv, k->rcomm, 1, &d, &sz, &tag, &mhs, &req);
    if (r != ncclSuccess || !req) {
      hx_fail("%s: irecv returned %s%s: what was sent before the close is lost", what, hx_result_str(r),
              req ? "" : " (no request)");
      return;
    }
    if (hx_test_until(req, 1, &got, 5.0, what)) return;
    char why[256];
    if (got != close_size(m))
      hx_fail("%s: sizes = %d, expected %d", what, got, close_size(m));
    else if (hx_pattern_check(d, (size_t)close_size(m), close_key(m), why, sizeof why))
      hx_fail("%s: data wrong: %s", what, why);
  }
  snprintf(what, sizeof what, "irecv %d after the sender closed", CLOSE_MSGS);
  receive_after_close(k->rcomm, buf + (size_t)CLOSE_MSGS * CLOSE_CAP, mh, what);
  NET(deregMr, k->rcomm, mh);
  hx_conn_close(k);
}

static void case_close_after_send(void) {
  if (hx_load() || eager_off("small sends wait for their receive")) return;
  struct hx_conn k;
  void *mh = NULL;
  uint8_t *buf = conn_with_buffer(&k, (size_t)CLOSE_CAP * (CLOSE_MSGS + 1), &mh);
  if (!buf) return;
  if (k.sender)
    send_then_close(&k, buf, mh);
  else
    receive_after_sender_closed(&k, buf, mh);
  free(buf);
}

/* ---- held-cts --------------------------------------------------------------- */
/* After a run of small messages the receiver holds its CTS records back
 * (small messages need none); a large send then has to ask for its CTS.
 * Each round: HELD_SMALL small messages, then one large one.  The large
 * ones must arrive intact and promptly, and the sender's statistics must
 * show that it asked (CTS_WANTED) at least once: without the request, the
 * CTS would come only with the receiver's next batch or the watchdog's
 * tick. */
#define HELD_ROUNDS 3
#define HELD_SMALL 40
#define HELD_LARGE (1 << 20)
static int held_size(int k) { return k % (HELD_SMALL + 1) == HELD_SMALL ? HELD_LARGE : 8 + k % 64; }

static void judge_cts_wanted(double worst) {
  char closed[1536];
  hx_last_closed(closed, sizeof closed);
  const char *w = strstr(closed, "before their CTS; ");
  long wanted = w ? strtol(w + strlen("before their CTS; "), NULL, 10) : -1;
  if (wanted < 0)
    hx_fail("no connection statistics with a CTS_WANTED count were logged at closeSend");
  else if (wanted == 0)
    hx_fail("none of the %d large sends asked for its CTS: the receiver never held its CTS records back",
            HELD_ROUNDS);
  else
    hx_note("%ld CTS_WANTED records; slowest large send from first isend to completion %.1f ms", wanted,
            worst * 1e3);
}

/* One message each way at a time, so that every receive is posted before its send. */
static int held_message(struct hx_conn *k, uint8_t *buf, void *mh, int m, double *worst) {
  int size = held_size(m), got = HX_SIZE_SENTINEL;
  uint64_t key = hx_key(hx_seed ^ 15, (uint64_t)m, 0);
  char what[128];
  snprintf(what, sizeof what, "message %d (%d bytes)", m, size);
  if (k->sender) {
    hx_pattern_fill(buf, (size_t)size, key);
    double t0 = now_s();
    void *req = hx_post_send(k->scomm, buf, size, 7, mh, 2.0, what);
    if (!req || hx_complete(req, size, 5.0, what)) return -1;
    if (size == HELD_LARGE && now_s() - t0 > *worst) *worst = now_s() - t0;
    return hx_get("received", &got, sizeof got);
  }
  void *d = buf, *mhs = mh, *req = NULL;
  int cap = HELD_LARGE, tag = 7;
  char why[256];
  if (NET(irecv, k->rcomm, 1, &d, &cap, &tag, &mhs, &req) != ncclSuccess || !req) {
    hx_fail("%s: irecv gave no request", what);
    return -1;
  }
  if (hx_test_until(req, 1, &got, 5.0, what)) return -1;
  if (got != size)
    hx_fail("%s: sizes = %d", what, got);
  else if (hx_pattern_check(buf, (size_t)size, key, why, sizeof why))
    hx_fail("%s: data wrong: %s", what, why);
  return hx_put("received", &m, sizeof m);
}

static void case_held_cts(void) {
  if (hx_load() || eager_off("every message waits for its CTS, none is held back")) return;
  struct hx_conn k;
  void *mh = NULL;
  uint8_t *buf = conn_with_buffer(&k, HELD_LARGE, &mh);
  if (!buf) return;
  double worst = 0;
  for (int m = 0; m < HELD_ROUNDS * (HELD_SMALL + 1) && !hx_failed(); m++)
    if (held_message(&k, buf, mh, m, &worst)) break;
  NET(deregMr, hx_conn_comm(&k), mh);
  hx_conn_close(&k);
  if (k.sender && !hx_failed()) judge_cts_wanted(worst);
  free(buf);
}

const struct hx_case driver_eager_cases[] = {
    {"early", "small sends return before their receive is posted and land in the right entries", 10,
     {"leader", "sender", "receiver"}, NULL, case_early, {NULL}, NULL, NULL},
    {"close-after-send", "a sender closing after its small sends completed loses nothing; a later receive fails", 10,
     {"leader", "sender", "receiver"}, NULL, case_close_after_send, {NULL}, NULL, NULL},
    {"held-cts", "a large send after many small ones gets the CTS the receiver held back, at once", 15,
     {"leader", "sender", "receiver"}, NULL, case_held_cts, {NULL}, NULL, NULL},
};
const int driver_eager_count = HX_GROUP(driver_eager_cases);
