/*
 * Conformance: many requests at once -- 32 receives in flight on one comm,
 * and grouped receives matched by tag whatever order the sends come in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* ---- 32 receives in flight ------------------------------------------------ */
#define N32 NCCL_NET_MAX_REQUESTS
struct round32 {
  int round;
  int size[N32], posted[N32], tag[N32];
  size_t off[N32 + 1];
};

static void plan32(struct round32 *p, int round) {
  p->round = round;
  for (int i = 0; i < N32; i++) {
    p->size[i] = i == 3 ? 0 : (int)(((unsigned)i * 40503u + 17u + (unsigned)round * 977u) % 150000u);
    p->posted[i] = p->size[i] + 64 + i;
    p->tag[i] = 1000 * (round + 1) + i;
  }
  layout(p->posted, N32, p->off);
}

static uint64_t key32(const struct round32 *p, int i) { return hx_key(hx_seed ^ 4, (uint64_t)p->round, (uint64_t)i); }

static int receive32(struct hx_conn *k, const struct round32 *p, uint8_t *buf, void *mh) {
  char what[96];
  void *req[N32];
  for (int i = 0; i < N32; i++) {
    memset(buf + p->off[i], HX_FILL, (size_t)p->posted[i]);
    hx_canary_fill(buf + p->off[i] + p->posted[i], (uint64_t)i);
    void *d = buf + p->off[i], *m = mh;
    int posted = p->posted[i], tag = p->tag[i];
    snprintf(what, sizeof what, "round %d receive %d", p->round, i);
    hx_step("%s: irecv", what);
    if (!(req[i] = hx_post_recv(k->rcomm, 1, &d, &posted, &tag, &m, 3.0, what))) return -1;
  }
  if (hx_put("receives posted", "g", 1)) return -1;
  for (int i = 0; i < N32; i++) {
    int got = HX_SIZE_SENTINEL;
    snprintf(what, sizeof what, "round %d receive %d (size %d, tag %d)", p->round, i, p->size[i], p->tag[i]);
    hx_step("%s: test", what);
    if (hx_test_until(req[i], 1, &got, 5.0, what)) return -1;
    if (check_entry(what, buf + p->off[i], got, p->size[i], p->posted[i], key32(p, i), (uint64_t)i)) return -1;
  }
  return 0;
}

static int send32(struct hx_conn *k, const struct round32 *p, uint8_t *buf, void *mh) {
  char what[96], go;
  void *req[N32];
  for (int i = 0; i < N32; i++) hx_pattern_fill(buf + p->off[i], (size_t)p->size[i], key32(p, i));
  hx_step("round %d: waiting for the receiver to post 32", p->round);
  if (hx_get("receives posted", &go, 1)) return -1;
  for (int i = 0; i < N32; i++) {
    snprintf(what, sizeof what, "round %d send %d (%d outstanding)", p->round, i, i);
    hx_step("%s", what);
    if (!(req[i] = hx_post_send(k->scomm, buf + p->off[i], p->size[i], p->tag[i], mh, 3.0, what))) return -1;
  }
  for (int i = 0; i < N32; i++) {
    snprintf(what, sizeof what, "round %d send %d (size %d, tag %d)", p->round, i, p->size[i], p->tag[i]);
    hx_step("%s: test", what);
    if (hx_complete(req[i], p->size[i], 5.0, what)) return -1;
  }
  return 0;
}

static int inflight_round(struct hx_conn *k, int round) {
  struct round32 p;
  plan32(&p, round);
  void *mh = NULL;
  uint8_t *buf = hx_reg_buffer(hx_conn_comm(k), p.off[N32] + 4096 + HX_CANARY_LEN, &mh);
  if (!buf) return -1;
  if (k->sender ? send32(k, &p, buf, mh) : receive32(k, &p, buf, mh)) return -1;
  release_buffer(k, buf, mh);
  return hx_barrier("round done", 2);
}

static void case_inflight32(void) {
  if (hx_load()) return;
  struct hx_conn k;
  if (hx_conn_establish(&k, sends_first(), "handle", CONNECT_TIMEOUT_S)) return;
  if (inflight_round(&k, 0) || inflight_round(&k, 1)) return;
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
}

/* ---- grouped receives matched by tag -------------------------------------- */
static const int grouped_posted[8] = {4096, 100, 65549, 1, 300000, 7, 2048, 1 << 20};
static const int grouped_msg[8] = {4000, 100, 65536, 0, 299999, 7, 1, 1 << 20};

struct group_round {
  int rd, nr;
  int tags[8], order[8];
  char order_str[64];
};

static void plan_group(struct group_round *g, int rd, int nr) {
  g->rd = rd;
  g->nr = nr;
  for (int k = 0; k < nr; k++) {
    g->tags[k] = 100 * (rd + 1) + 7 * k + 3;
    g->order[k] = rd == 0 ? nr - 1 - k : k;
  }
  if (rd >= 2) { /* shuffled */
    uint64_t rs = hx_seed ^ (0x55ull + (uint64_t)rd);
    for (int k = nr - 1; k > 0; k--) {
      int j = (int)(hx_rng_next(&rs) % (uint64_t)(k + 1)), t = g->order[k];
      g->order[k] = g->order[j];
      g->order[j] = t;
    }
  }
  size_t ol = 0;
  for (int k = 0; k < nr; k++)
    ol += (size_t)snprintf(g->order_str + ol, sizeof g->order_str - ol, "%s%d", k ? "," : "", g->tags[g->order[k]]);
}

static uint64_t group_key(const struct group_round *g, int tag) {
  return hx_key(hx_seed ^ 5, (uint64_t)g->rd, (uint64_t)tag);
}

/* A damaged entry that holds another tag's message says so. */
static void wrong_tag_hint(const struct group_round *g, const uint8_t *p, int k, char *hint, size_t len) {
  hint[0] = 0;
  for (int j = 0; j < g->nr; j++) {
    char w2[8];
    size_t n = (size_t)(grouped_msg[k] < grouped_msg[j] ? grouped_msg[k] : grouped_msg[j]);
    if (j != k && n >= 8 && !hx_pattern_check(p, 8, group_key(g, g->tags[j]), w2, sizeof w2))
      snprintf(hint, len, "; it holds the start of the message sent with tag %d", g->tags[j]);
  }
}

static int grouped_receive(struct hx_conn *k, const struct group_round *g, uint8_t *buf, const size_t *off,
                           void *mh) {
  void *d[8], *m[8];
  int s[8], got[8], tags[8];
  char what[160];
  for (int i = 0; i < g->nr; i++) {
    memset(buf + off[i], HX_FILL, (size_t)grouped_posted[i]);
    hx_canary_fill(buf + off[i] + grouped_posted[i], (uint64_t)(g->rd * 8 + i));
    d[i] = buf + off[i];
    m[i] = mh;
    s[i] = grouped_posted[i];
    tags[i] = g->tags[i];
  }
  snprintf(what, sizeof what, "round %d: grouped irecv n=%d (sender order of tags %s)", g->rd, g->nr, g->order_str);
  hx_step("%s", what);
  void *req = hx_post_recv(k->rcomm, g->nr, d, s, tags, m, 3.0, what);
  if (!req || hx_test_until(req, g->nr, got, 5.0, what)) return -1;
  for (int i = 0; i < g->nr; i++) {
    char sub[224], why[256], hint[96];
    snprintf(sub, sizeof sub, "%s: sub-receive %d (tag %d, posted %d)", what, i, g->tags[i], grouped_posted[i]);
    if (got[i] == grouped_msg[i] &&
        hx_pattern_check(buf + off[i], (size_t)grouped_msg[i], group_key(g, g->tags[i]), why, sizeof why)) {
      wrong_tag_hint(g, buf + off[i], i, hint, sizeof hint);
      hx_fail("%s: data wrong: %s%s", sub, why, hint);
      return -1;
    }
    if (check_entry(sub, buf + off[i], got[i], grouped_msg[i], grouped_posted[i], group_key(g, g->tags[i]),
                    (uint64_t)(g->rd * 8 + i)))
      return -1;
  }
  return 0;
}

static int grouped_send(struct hx_conn *k, const struct group_round *g, uint8_t *buf, const size_t *off, void *mh) {
  void *req[8];
  char what[128];
  for (int i = 0; i < g->nr; i++) hx_pattern_fill(buf + off[i], (size_t)grouped_msg[i], group_key(g, g->tags[i]));
  for (int j = 0; j < g->nr; j++) {
    int i = g->order[j];
    snprintf(what, sizeof what, "round %d: isend tag %d (%d of %d, order %s)", g->rd, g->tags[i], j + 1, g->nr,
             g->order_str);
    hx_step("%s", what);
    if (!(req[j] = hx_post_send(k->scomm, buf + off[i], grouped_msg[i], g->tags[i], mh, 3.0, what))) return -1;
  }
  for (int j = 0; j < g->nr; j++) {
    int i = g->order[j];
    snprintf(what, sizeof what, "round %d: send tag %d (size %d)", g->rd, g->tags[i], grouped_msg[i]);
    if (hx_complete(req[j], grouped_msg[i], 5.0, what)) return -1;
  }
  return 0;
}

static void case_grouped(void) {
  if (hx_load()) return;
  int n = hx_devprops.maxRecvs < 8 ? hx_devprops.maxRecvs : 8;
  if (n < 2) {
    hx_skip("maxRecvs = %d: no grouped receives to test", hx_devprops.maxRecvs);
    return;
  }
  size_t off[9], total = layout(grouped_posted, 8, off);
  struct hx_conn k;
  void *mh = NULL;
  uint8_t *buf = conn_with_buffer(&k, total, &mh);
  if (!buf) return;
  const int rounds = 5;
  for (int rd = 0; rd < rounds; rd++) {
    struct group_round g;
    plan_group(&g, rd, rd == rounds - 1 ? (n / 2 > 2 ? n / 2 : 2) : n); /* last round: fewer receives */
    if (k.sender ? grouped_send(&k, &g, buf, off, mh) : grouped_receive(&k, &g, buf, off, mh)) return;
  }
  release_buffer(&k, buf, mh);
  if (hx_barrier("done", 2)) return;
  hx_conn_close(&k);
}

const struct hx_case driver_window_cases[] = {
    {"inflight-32", "32 requests in flight per comm, twice, every byte verified", 12,
     {"leader", "sender", "receiver"}, NULL, case_inflight32, {NULL}, NULL, NULL},
    {"grouped", "grouped irecv (n = maxRecvs), sends in shuffled tag order", 12, {"leader", "sender", "receiver"},
     NULL, case_grouped, {NULL}, NULL, NULL},
};
const int driver_window_count = HX_GROUP(driver_window_cases);
