/*
 * Misuse both drivers check: messages larger than the posted receive, a
 * 33rd outstanding request, and close with requests in flight followed by
 * dlclose.  Role 1 receives, role 2 sends.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cases.h"

static int is_sender(void) { return hx_role() == 2; }
static int peer_role(void) { return 3 - hx_role(); }

/* ---- oversize ------------------------------------------------------------- */
/* A buffer of n bytes that ends exactly at an inaccessible page: a write or
 * read past its end is a SIGSEGV in any build, not only under ASan. */
struct gbuf {
  uint8_t *p;
  void *base;
  size_t maplen;
};

static int gbuf_alloc(struct gbuf *g, size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
  if (body == 0) body = pg;
  g->maplen = body + pg;
  g->base = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g->base == MAP_FAILED) {
    g->base = NULL;
    hx_fail("mmap %zu: %s", g->maplen, strerror(errno));
    return -1;
  }
  mprotect((uint8_t *)g->base + body, pg, PROT_NONE);
  g->p = (uint8_t *)g->base + body - n;
  return 0;
}

static void gbuf_free(struct gbuf *g) {
  if (g->base) munmap(g->base, g->maplen);
  g->base = NULL;
}

struct over_sub {
  const char *name;
  int n;            /* buffers in the receive */
  size_t cap[2];    /* posted sizes */
  size_t msg[2];    /* sizes sent (same tags) */
  int warn_details; /* the WARN must name the peer and both sizes */
};
static const struct over_sub over_subs[] = {
    {"5000 bytes into a 1000-byte receive", 1, {1000, 0}, {5000, 0}, 1},
    {"3 MiB into a 1 MiB receive", 1, {1u << 20, 0}, {3u << 20, 0}, 0},
    {"65537 bytes into a 65536-byte receive", 1, {65536, 0}, {65537, 0}, 0},
    {"grouped receive: 50 into 100 fits, 200 into 100 does not", 2, {100, 100}, {50, 200}, 0},
};
#define NOVER ((int)(sizeof over_subs / sizeof over_subs[0]))

/* How a side's transfer ended. */
struct outcome {
  int rc;    /* the failing call's result, or ncclSuccess */
  int stage; /* 0 resolved by test, 1 refused at post, 2 still pending at the deadline */
  int done;
  int size;  /* sizes[0] when done */
};
struct over_results {
  struct outcome o[HX_MAX_ROLES][NOVER];
};

static int over_post(const struct over_sub *o, struct hx_conn *k, struct gbuf *gb, void *mh, int *tags, void **req) {
  struct hx_wait w;
  hx_wait_begin(&w, 5.0);
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < (is_sender() ? o->n : 1); i++) {
    void *d[2] = {gb[0].p, gb[1].p}, *m[2] = {mh, mh};
    int sz[2] = {(int)o->cap[0], (int)o->cap[1]};
    for (;;) {
      rc = is_sender() ? NET(isend, k->scomm, gb[i].p, (int)o->msg[i], tags[i], mh, &req[i])
                       : NET(irecv, k->rcomm, o->n, d, sz, tags, m, &req[i]);
      if (rc != ncclSuccess || req[i] || hx_wait_over(&w)) break;
      hx_backoff(&w);
    }
    if (rc != ncclSuccess) return rc;
    if (!req[i]) {
      hx_fail("%s: %s kept returning a NULL request for %.0f s", o->name, is_sender() ? "isend" : "irecv", S(5.0));
      return -1;
    }
  }
  return ncclSuccess;
}

static struct outcome over_transfer(const struct over_sub *o, struct hx_conn *k, struct gbuf *gb, void *mh, int s) {
  struct outcome out = {ncclSuccess, 0, 0, HX_SIZE_SENTINEL};
  int tags[2] = {10 * s + 1, 10 * s + 2};
  void *req[2] = {NULL, NULL};
  hx_step("%s: posting", o->name);
  int rc = over_post(o, k, gb, mh, tags, req);
  if (rc != ncclSuccess) {
    out.rc = rc < 0 ? ncclSuccess : rc;
    out.stage = rc < 0 ? 2 : 1;
    return out;
  }
  struct hx_wait w;
  hx_wait_begin(&w, 5.0);
  for (int i = 0; i < (is_sender() ? o->n : 1); i++) {
    int sizes[HX_SIZES_SLOTS], d = 0;
    while ((rc = NET(test, req[i], &d, sizes)) == ncclSuccess && !d && !hx_wait_over(&w)) hx_backoff(&w);
    if (rc != ncclSuccess || !d) {
      out.rc = rc;
      out.stage = rc != ncclSuccess ? 0 : 2;
      return out;
    }
    out.size = sizes[0];
  }
  out.done = 1;
  return out;
}

static const char *outcome_str(const struct outcome *o, char *buf, size_t len) {
  if (o->stage == 1)
    snprintf(buf, len, "post returned %s", hx_result_str(o->rc));
  else if (o->stage == 2)
    snprintf(buf, len, "still pending after the wait");
  else if (o->rc)
    snprintf(buf, len, "test returned %s", hx_result_str(o->rc));
  else
    snprintf(buf, len, "completed, sizes[0] = %d", o->size);
  return buf;
}

/* Nothing may be written beyond a message, nor anything at all into a
 * buffer the message did not fit. */
static void over_untouched(const struct over_sub *o, const struct gbuf *gb) {
  for (int i = 0; i < o->n; i++) {
    size_t wrote_ok = o->msg[i] <= o->cap[i] ? o->msg[i] : 0;
    for (size_t j = wrote_ok; j < o->cap[i]; j++)
      if (gb[i].p[j] != HX_FILL) {
        hx_fail("%s: buffer %d (posted %zu) byte %zu was written (0x%02x) although the %zu-byte message %s", o->name,
                i, o->cap[i], j, gb[i].p[j], o->msg[i], wrote_ok ? "ends before it" : "did not fit");
        break;
      }
  }
}

static void over_judge_receiver(const struct over_sub *o, const struct outcome *mine, const struct outcome *peer,
                                const struct gbuf *gb, int s) {
  char s1[96], s2[96];
  over_untouched(o, gb);
  if (mine->rc == ncclSuccess && mine->done && peer->rc == ncclSuccess)
    hx_fail("%s: both sides completed successfully (receive sizes[0] = %d): silent truncation or overrun", o->name,
            mine->size);
  if (mine->rc != ncclSuccess && mine->rc != ncclInvalidUsage && mine->rc != ncclRemoteError)
    hx_fail("%s: the receive failed with %s, expected ncclInvalidUsage", o->name, hx_result_str(mine->rc));
  if (mine->rc != ncclInvalidUsage && peer->rc != ncclInvalidUsage)
    hx_fail("%s: neither side reported ncclInvalidUsage (receiver: %s; sender: %s)", o->name,
            outcome_str(mine, s2, sizeof s2), outcome_str(peer, s1, sizeof s1));
  hx_summary("%s%s: sender %s, receiver %s", s ? "; " : "", o->name, outcome_str(peer, s1, sizeof s1),
             outcome_str(mine, s2, sizeof s2));
}

static void over_judge_warn(const struct over_sub *o, const struct outcome *mine, size_t mark) {
  char w[4096], big[32], small[32];
  hx_warn_since(mark, w, sizeof w, '|');
  if (mine->rc != ncclInvalidUsage) return;
  snprintf(big, sizeof big, "%zu", o->msg[o->n - 1]);
  snprintf(small, sizeof small, "%zu", o->cap[o->n - 1]);
  if (!w[0])
    hx_fail("%s: %s side returned ncclInvalidUsage but logged no WARN", o->name, is_sender() ? "send" : "receive");
  else if (o->warn_details && (!strstr(w, big) || !strstr(w, small) || (!strstr(w, "127.0.0.1") && !strstr(w, "::1"))))
    hx_fail("%s: the WARN must name the peer (127.0.0.1...) and both sizes (%s, %s); it was: %s", o->name, big, small,
            w);
  else
    hx_note("%s WARN: %s", is_sender() ? "sender" : "receiver", w);
}

static int over_sub_run(int s, struct over_results *res) {
  const struct over_sub *o = &over_subs[s];
  char name[32];
  snprintf(name, sizeof name, "handle %d", s);
  struct hx_conn k;
  if (hx_conn_establish(&k, is_sender(), name, 10.0)) return -1;
  struct gbuf gb[2];
  memset(gb, 0, sizeof gb);
  for (int i = 0; i < o->n; i++) {
    if (gbuf_alloc(&gb[i], is_sender() ? o->msg[i] : o->cap[i])) return -1;
    if (is_sender())
      hx_pattern_fill(gb[i].p, o->msg[i], (uint64_t)(s * 10 + i));
    else
      memset(gb[i].p, HX_FILL, o->cap[i]);
  }
  void *mh = NULL;
  if (NET(regMr, hx_conn_comm(&k), gb[0].p, 1, NCCL_PTR_HOST, &mh) != ncclSuccess) {
    hx_fail("regMr failed");
    return -1;
  }
  size_t mark = hx_warn_mark();
  struct outcome *mine = &res->o[hx_role()][s], *peer = &res->o[peer_role()][s];
  *mine = over_transfer(o, &k, gb, mh, s);
  snprintf(name, sizeof name, "outcome %d", s);
  if (hx_barrier(name, 2)) return -1;
  if (!is_sender()) over_judge_receiver(o, mine, peer, gb, s);
  if (is_sender() && mine->rc != ncclSuccess && mine->rc != ncclInvalidUsage && mine->rc != ncclRemoteError)
    hx_fail("%s: the send failed with %s, expected ncclInvalidUsage", o->name, hx_result_str(mine->rc));
  if (is_sender() && o->n == 1 && mine->done && mine->size != (int)o->msg[0])
    hx_fail("%s: the send completed with sizes[0] = %d, expected %zu", o->name, mine->size, o->msg[0]);
  over_judge_warn(o, mine, mark);
  snprintf(name, sizeof name, "judged %d", s);
  if (hx_barrier(name, 2)) return -1;
  hx_step("%s: closing", o->name);
  hx_conn_close(&k); /* with a request pending, maybe: close must cope */
  for (int i = 0; i < o->n; i++) gbuf_free(&gb[i]);
  return 0;
}

static void case_oversize(void) {
  if (hx_load()) return;
  struct over_results *res = hx_shared();
  for (int s = 0; s < NOVER; s++)
    if (over_sub_run(s, res)) return;
}

/* ---- a 33rd outstanding request -------------------------------------------- */
#define NREQ NCCL_NET_MAX_REQUESTS
#define SZ33 1000

/* 0, or -1 (reported) when one could not be posted. */
static int post_n(struct hx_conn *k, uint8_t *buf, void *mh, void **req, int first, int n) {
  char what[64];
  for (int i = 0; i < n; i++) {
    void *d = buf + (size_t)(first + i) * SZ33;
    int size = SZ33, tag = 33;
    snprintf(what, sizeof what, "%s %d", is_sender() ? "isend" : "irecv", first + i);
    req[i] = is_sender() ? hx_post_send(k->scomm, d, SZ33, 33, mh, 5.0, what)
                         : hx_post_recv(k->rcomm, 1, &d, &size, &tag, &mh, 5.0, what);
    if (!req[i]) return -1;
  }
  return 0;
}

/* Completes req[0..n) (messages first..first+n); receivers check the bytes. */
static int complete_n(uint8_t *buf, void **req, int first, int n, int slot_base) {
  char what[64];
  for (int i = 0; i < n; i++) {
    snprintf(what, sizeof what, "%s %d", is_sender() ? "send" : "receive", first + i);
    if (hx_complete(req[i], SZ33, 5.0, what)) return -1;
    if (!is_sender() && hx_pattern_first_bad(buf + (size_t)(slot_base + i) * SZ33, SZ33, (uint64_t)(first + i)) >= 0)
      hx_fail("%s: data wrong", what);
  }
  return 0;
}

static void refuse_33rd(const char *verb, ncclResult_t rc, void *x, double waited, size_t mark) {
  char w[1024];
  hx_warn_since(mark, w, sizeof w, '|');
  if (rc == ncclSuccess && x)
    hx_fail("a 33rd %s with %d outstanding returned ncclSuccess and a request: more than %d requests accepted", verb,
            NREQ, NREQ);
  else if (rc == ncclSuccess)
    hx_fail("a 33rd %s with %d outstanding returned ncclSuccess with a NULL request (\"try again\")%s, not an "
            "error, although the misuse is detectable",
            verb, NREQ, waited > 0 ? " for every call of the wait" : "");
  hx_summary("33rd %s: %s%s%s; ", verb, hx_result_str(rc), w[0] ? ", WARN: " : " (no WARN)", w);
}

static int receiver_33rd(struct hx_conn *k, uint8_t *buf, void *mh) {
  void *req[NREQ];
  memset(buf, HX_FILL, SZ33 * (NREQ + 8));
  if (post_n(k, buf, mh, req, 0, NREQ)) return -1;
  size_t mark = hx_warn_mark();
  void *d = buf + (size_t)NREQ * SZ33, *m = mh, *x = NULL;
  int s = SZ33, t = 33;
  refuse_33rd("irecv", NET(irecv, k->rcomm, 1, &d, &s, &t, &m, &x), x, 0, mark);
  if (hx_barrier("32 receives posted", 2) || complete_n(buf, req, 0, NREQ, 0)) return -1;
  /* 8 more, so that the sender can try a 33rd send */
  if (post_n(k, buf, mh, req, 0, 8) || hx_barrier("8 more receives posted", 2)) return -1;
  return complete_n(buf, req, NREQ, 8, 0);
}

static int sender_33rd(struct hx_conn *k, uint8_t *buf, void *mh) {
  void *req[NREQ];
  for (int i = 0; i < NREQ + 8; i++) hx_pattern_fill(buf + (size_t)i * SZ33, SZ33, (uint64_t)i);
  if (hx_barrier("32 receives posted", 2)) return -1;
  if (post_n(k, buf, mh, req, 0, NREQ) || hx_barrier("8 more receives posted", 2)) return -1;
  /* 32 sends not yet tested and a matching receive posted: a 33rd send is
   * a detectable misuse. */
  size_t mark = hx_warn_mark();
  void *x = NULL;
  ncclResult_t rc;
  struct hx_wait w;
  hx_wait_begin(&w, 3.0);
  while ((rc = NET(isend, k->scomm, buf + (size_t)NREQ * SZ33, SZ33, 33, mh, &x)) == ncclSuccess && !x &&
         !hx_wait_over(&w))
    hx_backoff(&w);
  refuse_33rd("isend", rc, x, S(3.0), mark);
  if (complete_n(buf, req, 0, NREQ, 0)) return -1;
  /* After the refusals the comm still works: the 8 pending receives complete. */
  for (int i = 0; i < 8; i++) {
    if (post_n(k, buf, mh, req, NREQ + i, 1) || complete_n(buf, req, NREQ + i, 1, NREQ + i)) return -1;
  }
  hx_summary("after the refusals the comm carried 8 more messages");
  return 0;
}

static void case_33rd(void) {
  if (hx_load()) return;
  struct hx_conn k;
  if (hx_conn_establish(&k, is_sender(), "handle", 10.0)) return;
  void *mh = NULL;
  uint8_t *buf = hx_reg_buffer(hx_conn_comm(&k), SZ33 * (NREQ + 8), &mh);
  if (!buf) return;
  if (is_sender() ? sender_33rd(&k, buf, mh) : receiver_33rd(&k, buf, mh)) return;
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
  free(buf);
}

/* ---- close with requests in flight, then dlclose ---------------------------- */
#define CI_N 16
#define CI_SIZE (4u << 20)

struct unload_results {
  int tasks0[HX_MAX_ROLES][2], tasks_live[HX_MAX_ROLES][2], tasks[HX_MAX_ROLES][2], fds[HX_MAX_ROLES][2];
  double close_s[HX_MAX_ROLES][2];
};

static void *noop_thread(void *arg) { return arg; }

/* Poke the orphaned requests for a moment: any answer is fine but a crash. */
static void test_orphans(void **req, int round, int closer_is_sender) {
  int ndone = 0, nerr = 0, live[CI_N];
  for (int i = 0; i < CI_N; i++) live[i] = 1;
  double end = now_s() + 0.3;
  hx_step("round %d: testing after the peer closed", round);
  while (now_s() < end) {
    for (int i = 0; i < CI_N; i++) {
      int d = 0, sz[HX_SIZES_SLOTS];
      if (!live[i]) continue;
      ncclResult_t rc = NET(test, req[i], &d, sz);
      if (rc != ncclSuccess || d) live[i] = 0;
      nerr += rc != ncclSuccess;
      ndone += rc == ncclSuccess && d;
    }
  }
  hx_summary("round %d (%s closes first): the other side's %d requests: %d done, %d failed, %d pending at its "
             "close; ",
             round, closer_is_sender ? "sender" : "receiver", CI_N, ndone, nerr, CI_N - ndone - nerr);
}

static int post_inflight(struct hx_conn *k, uint8_t *buf, void *mh, void **req, int round) {
  char name[32], what[64];
  snprintf(name, sizeof name, "receives posted %d", round);
  hx_step("round %d: posting %d x 4 MiB", round, CI_N);
  if (is_sender() && hx_barrier(name, 2)) return -1;
  for (int i = 0; i < CI_N; i++) {
    void *d = buf + (size_t)i * CI_SIZE;
    int size = CI_SIZE, tag = 50 + i;
    snprintf(what, sizeof what, "round %d %s %d", round, is_sender() ? "isend" : "irecv", i);
    req[i] = is_sender() ? hx_post_send(k->scomm, d, CI_SIZE, tag, mh, 5.0, what)
                         : hx_post_recv(k->rcomm, 1, &d, &size, &tag, &mh, 5.0, what);
    if (!req[i]) return -1;
  }
  if (!is_sender() && hx_barrier(name, 2)) return -1;
  snprintf(name, sizeof name, "all posted %d", round);
  return hx_barrier(name, 2);
}

/* After close + dlclose, threads and descriptors as before dlopen. */
static void judge_unloaded(struct unload_results *res, int round, int tasks0, int fds0) {
  double t1 = now_s();
  int tasks = count_tasks(), fds = count_fds();
  while ((tasks != tasks0 || fds != fds0) && now_s() - t1 < S(1.0)) {
    sleep_s(0.01);
    tasks = count_tasks();
    fds = count_fds();
  }
  char names[1500];
  if (tasks != tasks0) {
    hx_task_names(names, sizeof names);
    hx_fail("round %d: %d threads 1 s after close + dlclose, %d before dlopen (%d while connected): %s", round, tasks,
            tasks0, res->tasks_live[hx_role()][round], names);
  }
  if (fds != fds0) {
    hx_fd_names(names, sizeof names);
    hx_fail("round %d: %d descriptors 1 s after close + dlclose, %d before dlopen: %s", round, fds, fds0, names);
  }
  res->tasks[hx_role()][round] = tasks;
  res->fds[hx_role()][round] = fds;
  void *still = dlopen(hx_plugin_path, RTLD_NOW | RTLD_NOLOAD);
  if (still) {
    hx_note("round %d: the plugin stayed mapped after dlclose (RTLD_NODELETE or a unique symbol)", round);
    dlclose(still);
  }
}

static int unload_round(struct unload_results *res, int round) {
  int closer_is_sender = round == 0, me = hx_role();
  int tasks0 = count_tasks(), fds0 = count_fds();
  char name[32];
  res->tasks0[me][round] = tasks0;
  if (hx_load()) return -1;
  struct hx_conn k;
  snprintf(name, sizeof name, "handle %d", round);
  if (hx_conn_establish(&k, is_sender(), name, 10.0)) return -1;
  size_t len = (size_t)CI_N * CI_SIZE;
  uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *mh = NULL, *req[CI_N];
  if (buf == MAP_FAILED) {
    hx_fail("mmap: %s", strerror(errno));
    return -1;
  }
  memset(buf, 0x42, len);
  if (NET(regMr, hx_conn_comm(&k), buf, len, NCCL_PTR_HOST, &mh) != ncclSuccess) {
    hx_fail("regMr failed");
    return -1;
  }
  if (post_inflight(&k, buf, mh, req, round)) return -1;
  res->tasks_live[me][round] = count_tasks();
  snprintf(name, sizeof name, "peer closed %d", round);
  if (is_sender() != closer_is_sender) {
    if (hx_barrier(name, 2)) return -1;
    test_orphans(req, round, closer_is_sender);
  }
  hx_step("round %d: closing with requests in flight", round);
  double t0 = now_s();
  hx_conn_close(&k);
  res->close_s[me][round] = now_s() - t0;
  if (res->close_s[me][round] > S(1.0)) hx_fail("round %d: closing took %.2f s", round, res->close_s[me][round]);
  munmap(buf, len); /* a late access by the plugin is now a SIGSEGV */
  if (is_sender() == closer_is_sender && hx_barrier(name, 2)) return -1;
  if (hx_unload()) return -1;
  judge_unloaded(res, round, tasks0, fds0);
  return hx_barrier("round done", 2);
}

static void case_unload(void) {
  /* A sanitizer runtime may start its own helper thread with the first
   * pthread_create of the process: let that happen before the baseline. */
  pthread_t th;
  if (pthread_create(&th, NULL, noop_thread, NULL) == 0) pthread_join(th, NULL);
  struct unload_results *res = hx_shared();
  for (int round = 0; round < 2; round++)
    if (unload_round(res, round)) return;
}

static void lead_unload(void) {
  hx_lead_workers();
  const struct unload_results *res = hx_shared();
  for (int r = 1; r <= 2; r++)
    hx_summary("%s threads %d -> %d -> %d, %d -> %d -> %d, fds back to %d/%d, close %.0f/%.0f ms; ", hx_role_name(r),
               res->tasks0[r][0], res->tasks_live[r][0], res->tasks[r][0], res->tasks0[r][1], res->tasks_live[r][1],
               res->tasks[r][1], res->fds[r][0], res->fds[r][1], res->close_s[r][0] * 1e3, res->close_s[r][1] * 1e3);
}

const struct hx_case misuse_cases[] = {
    {"oversize", "messages larger than the posted buffer: ncclInvalidUsage, a WARN, nothing written out of bounds",
     40, {"leader", "receiver", "sender"}, NULL, case_oversize, {NULL}, NULL, NULL},
    {"33rd-request", "a 33rd outstanding irecv / isend is refused with an error; the comm keeps working", 40,
     {"leader", "receiver", "sender"}, NULL, case_33rd, {NULL}, NULL, NULL},
    {"unload-inflight", "close with 16 x 4 MiB in flight, either side first, dlclose: threads and descriptors back",
     40, {"leader", "receiver", "sender"}, lead_unload, case_unload, {NULL}, "close-inflight,unload", NULL},
};
const int misuse_count = HX_GROUP(misuse_cases);
