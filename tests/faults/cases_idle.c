/*
 * A rank that posts nothing for 3 x COLLX_TIMEOUT, then resumes: no error,
 * no WARN, everything completes.  Connection 0: A sends to B; connection 1:
 * B sends to A.  A goes idle with two sends and two receives posted; B keeps
 * calling the plugin the whole time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"

#define IDLE_N 4
static const int idle_sizes[IDLE_N] = {1000, 4 << 20, 65536, 7};

struct idle_results {
  double idle_s;
  long busy_calls;
};

struct idle_side {
  struct hx_conn send, recv;
  uint8_t *sbuf[IDLE_N], *rbuf[IDLE_N];
  void *smh, *rmh;
  void *sreq[IDLE_N], *rreq[IDLE_N];
  int sdone[IDLE_N], rdone[IDLE_N];
  int sposted, rposted;
};

static int idle_buffers(struct idle_side *s) {
  for (int m = 0; m < IDLE_N; m++) {
    s->sbuf[m] = malloc((size_t)idle_sizes[m]);
    s->rbuf[m] = malloc((size_t)idle_sizes[m]);
    if (!s->sbuf[m] || !s->rbuf[m]) {
      hx_fail("out of memory");
      return -1;
    }
    hx_pattern_fill(s->sbuf[m], (size_t)idle_sizes[m], (uint64_t)(hx_role() * 100 + m));
    memset(s->rbuf[m], HX_FILL, (size_t)idle_sizes[m]);
  }
  if (NET(regMr, s->send.scomm, s->sbuf[0], 1, NCCL_PTR_HOST, &s->smh) != ncclSuccess ||
      NET(regMr, s->recv.rcomm, s->rbuf[0], 1, NCCL_PTR_HOST, &s->rmh) != ncclSuccess) {
    hx_fail("regMr failed");
    return -1;
  }
  return 0;
}

static int idle_connect(struct idle_side *s) {
  const char *mine = hx_role() == 1 ? "handle 1" : "handle 0", *theirs = hx_role() == 1 ? "handle 0" : "handle 1";
  memset(s, 0, sizeof *s);
  s->send.sender = 1;
  if (hx_conn_listen(&s->recv, mine, 0) || hx_conn_handle(&s->send, theirs, 10.0)) return -1;
  struct hx_wait w;
  hx_wait_begin(&w, 10.0);
  while (!s->send.up || !s->recv.up) {
    if (hx_conn_poll(&s->send, 0) < 0 || hx_conn_poll(&s->recv, 0) < 0) return -1;
    if (hx_wait_over(&w)) {
      hx_fail("the two comms did not connect within %.1f s", S(10.0));
      return -1;
    }
    hx_backoff(&w);
  }
  return idle_buffers(s);
}

/* Post the receives and sends up to `upto`; a send that answers NULL waits
 * for the next round unless `blocking`. */
static int idle_post(struct idle_side *s, int upto, int blocking) {
  char what[64];
  while (s->rposted < upto) {
    int m = s->rposted, size = idle_sizes[m], tag = 500 + m;
    void *d = s->rbuf[m];
    snprintf(what, sizeof what, "irecv %d (%d bytes)", m, size);
    if (!(s->rreq[m] = hx_post_recv(s->recv.rcomm, 1, &d, &size, &tag, &s->rmh, 5.0, what))) return -1;
    s->rposted++;
  }
  while (s->sposted < upto) {
    int m = s->sposted;
    void *r = NULL;
    snprintf(what, sizeof what, "isend %d (%d bytes)", m, idle_sizes[m]);
    if (blocking) {
      if (!(r = hx_post_send(s->send.scomm, s->sbuf[m], idle_sizes[m], 500 + m, s->smh, 10.0, what))) return -1;
    } else {
      ncclResult_t rc = NET(isend, s->send.scomm, s->sbuf[m], idle_sizes[m], 500 + m, s->smh, &r);
      if (rc != ncclSuccess) {
        hx_fail("%s returned %s", what, hx_result_str(rc));
        return -1;
      }
      if (!r) break;
    }
    s->sreq[m] = r;
    s->sposted++;
  }
  return 0;
}

/* Test everything posted: 1 when all IDLE_N of each direction completed,
 * 0 in progress, -1 on error. */
static int idle_test(struct idle_side *s) {
  int all = 1, peer = hx_role() == 1 ? 2 : 1;
  char what[96];
  for (int m = 0; m < IDLE_N; m++) {
    if (m < s->sposted && !s->sdone[m]) {
      snprintf(what, sizeof what, "send %d (%d bytes)", m, idle_sizes[m]);
      if ((s->sdone[m] = hx_test_once(s->sreq[m], idle_sizes[m], what)) < 0) return -1;
    }
    if (m < s->rposted && !s->rdone[m]) {
      snprintf(what, sizeof what, "receive %d (%d bytes)", m, idle_sizes[m]);
      if ((s->rdone[m] = hx_test_once(s->rreq[m], idle_sizes[m], what)) < 0) return -1;
      long bad = s->rdone[m] ? hx_pattern_first_bad(s->rbuf[m], (size_t)idle_sizes[m], (uint64_t)(peer * 100 + m)) : -1;
      if (bad >= 0) {
        hx_fail("%s: byte %ld wrong", what, bad);
        return -1;
      }
    }
    all &= s->sdone[m] && s->rdone[m];
  }
  return all;
}

static void go_idle(struct idle_side *s, struct idle_results *res) {
  hx_step("posting the first half");
  if (idle_post(s, IDLE_N / 2, 1) || idle_test(s) < 0) return;
  double idle = 3.0 * TIMEOUT_S, t0 = now_s();
  hx_step("idle for %.0f s (not calling the plugin)", idle);
  sleep_s(idle);
  res->idle_s = now_s() - t0;
  hx_step("resuming");
}

static void w_idle(void) {
  struct idle_results *res = hx_shared();
  if (hx_load()) return;
  static struct idle_side s;
  if (idle_connect(&s)) return;
  size_t mark = hx_warn_mark();
  if (hx_barrier("connected", 2)) return;
  if (hx_role() == 1) /* A */
    go_idle(&s, res);
  else
    hx_step("posting everything, testing while the peer is idle");
  double t_start = now_s(), end = t_start + S(3.0 * TIMEOUT_S + 15.0);
  long calls = 0;
  for (int done = 0; !done; calls++) {
    if (idle_post(&s, IDLE_N, 0) || (done = idle_test(&s)) < 0) break;
    if (!done && now_s() > end) {
      hx_fail("requests still pending %.0f s after the peer resumed", end - t_start);
      break;
    }
    if (!done) sleep_s(0.0005);
  }
  if (hx_role() == 2) res->busy_calls = calls;
  char w[2048];
  hx_warn_since(mark, w, sizeof w, '|');
  if (w[0]) hx_fail("WARN logged while the peer was idle: %s", w);
  if (hx_barrier("all done", 2)) return;
  hx_conn_close(&s.send);
  hx_conn_close(&s.recv);
}

static void lead_idle(void) {
  hx_lead_workers();
  const struct idle_results *res = hx_shared();
  hx_summary("A idle %.1f s (3 x COLLX_TIMEOUT=%d) with 2 sends + 2 receives posted, B called the plugin %ld times "
             "meanwhile; all %d messages each way completed, no error, no WARN",
             res->idle_s, TIMEOUT_S, res->busy_calls, IDLE_N);
}

const struct hx_case idle_cases[] = {
    {"idle-rank", "a rank posts nothing for 3 x COLLX_TIMEOUT, then resumes: no error, all complete", 45,
     {"leader", "A (idle)", "B (busy)"}, lead_idle, w_idle, {NULL}, NULL, NULL},
};
const int idle_count = HX_GROUP(idle_cases);
