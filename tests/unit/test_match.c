/* The matching rules (src/transport/tcp/match.c) on hand-made sequences:
 * the sender's cursor over CTS records, its early log replayed as CTS
 * records come in (in one batch or one by one), where the receiver puts an
 * early message, sequence numbers wrapping past the slot count and past
 * 2^32, and the policy that holds CTS records back. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "transport/tcp/match.h"
#include "../common/check.h"

static struct match_send tx;

static void tx_fresh(uint32_t cursor) {
  memset(&tx, 0, sizeof tx);
  tx.seq = cursor;
}

/* The receiver's CTS record for receive `seq` with `n` entries. */
static int cts_in(uint32_t seq, int n, const int *tags, uint64_t size) {
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS, .n = (uint8_t)n, .seq = seq};
  for (int i = 0; i < n; i++) m.e[i] = (struct wire_cts_entry){.tag = tags[i], .size = size};
  const char *why = NULL;
  return match_cts_accept(&tx, &m, &why);
}

/* Expect a claim by tag to land on seq/idx. */
static void claim_is(int tag, uint32_t seq, int idx, const char *what) {
  uint32_t s = 0;
  int i = -1;
  uint64_t cap = 0;
  int got = match_cts_claim(&tx, tag, &s, &i, &cap);
  CHECK(got == MATCH_CLAIMED && s == seq && i == idx, "%s: tag %d claimed %d at %u/%d, expected %u/%d", what, tag,
        got, s, i, seq, idx);
}

static void claim_fails(int tag, int expect, const char *what) {
  uint32_t s = 0;
  int i = -1;
  uint64_t cap = 0;
  int got = match_cts_claim(&tx, tag, &s, &i, &cap);
  CHECK(got == expect, "%s: tag %d gave %d, expected %d", what, tag, got, expect);
}

static void test_grouped_claims(void) {
  tx_fresh(0);
  const int tags[] = {5, 5, 7};
  CHECK(cts_in(0, 3, tags, 100) == 0, "CTS 0 refused");
  claim_is(7, 0, 2, "distinct tag");
  claim_is(5, 0, 0, "first of a repeated tag");
  CHECK(tx.seq == 0, "cursor left receive 0 with an entry free");
  claim_is(5, 0, 1, "second of a repeated tag");
  CHECK(tx.seq == 1, "cursor at %u after receive 0 was filled, expected 1", tx.seq);
  CHECK(!atomic_load(&tx.cts[0].valid), "a consumed CTS slot still valid");
  claim_fails(5, MATCH_NOT_IN, "the next CTS not in");
  const int one[] = {5};
  CHECK(cts_in(1, 1, one, 100) == 0, "CTS 1 refused");
  claim_fails(9, MATCH_NO_ENTRY, "a tag the receive does not have");
  claim_fails(7, MATCH_NO_ENTRY, "a tag of the previous receive");
  CHECK(tx.seq == 1, "a failed claim moved the cursor");
  claim_is(5, 1, 0, "after failed claims");
}

/* Replay every early send that can be matched; returns how many. */
static int replay_all(struct match_replayed *last, int *stop) {
  int n = 0;
  for (;;) {
    *stop = match_early_replay(&tx, last);
    if (*stop != MATCH_CLAIMED) return n;
    n++;
  }
}

static void test_early_then_batch(void) {
  tx_fresh(0);
  /* three early sends: receive 0 has tags 5 and 7, receive 1 has tag 5 */
  CHECK(match_early_add(&tx, 5, 10) == 0 && match_early_add(&tx, 7, 20) == 0 && match_early_add(&tx, 5, 30) == 0,
        "early sends before any CTS name a receive other than the cursor");
  struct match_replayed m;
  int stop;
  CHECK(replay_all(&m, &stop) == 0 && stop == MATCH_NOT_IN, "replay matched with no CTS in");
  const int t0[] = {5, 7}, t1[] = {5};
  cts_in(0, 2, t0, 100);
  cts_in(1, 1, t1, 100);
  CHECK(match_early_replay(&tx, &m) == MATCH_CLAIMED && m.seq == 0 && m.idx == 0 && m.size == 10,
        "first early send at %u/%d size %llu", m.seq, m.idx, (unsigned long long)m.size);
  CHECK(match_early_replay(&tx, &m) == MATCH_CLAIMED && m.seq == 0 && m.idx == 1 && m.tag == 7,
        "second early send at %u/%d", m.seq, m.idx);
  CHECK(match_early_replay(&tx, &m) == MATCH_CLAIMED && m.seq == 1 && m.idx == 0 && m.size == 30,
        "third early send at %u/%d", m.seq, m.idx);
  CHECK(tx.early_len == 0 && tx.seq == 2, "after the batch: %u early left, cursor %u", tx.early_len, tx.seq);
  CHECK(match_early_replay(&tx, &m) == MATCH_NOT_IN, "replay of an empty log claimed");
}

static void test_early_then_one_by_one(void) {
  tx_fresh(0);
  match_early_add(&tx, 5, 10);
  match_early_add(&tx, 7, 20);
  match_early_add(&tx, 5, 30);
  struct match_replayed m;
  int stop;
  const int t0[] = {5, 7}, t1[] = {5};
  cts_in(0, 2, t0, 100);
  CHECK(replay_all(&m, &stop) == 2 && stop == MATCH_NOT_IN, "CTS 0 alone should match two early sends");
  CHECK(tx.early_len == 1 && tx.early[tx.early_head].size == 30, "the third early send is not the one left");
  cts_in(1, 1, t1, 100);
  CHECK(replay_all(&m, &stop) == 1 && m.seq == 1 && m.idx == 0, "CTS 1 should match the third at 1/0");
  /* The size check is returned, not acted on. */
  tx_fresh(0);
  match_early_add(&tx, 5, 101);
  const int t5[] = {5};
  cts_in(0, 1, t5, 100);
  CHECK(match_early_replay(&tx, &m) == MATCH_CLAIMED && m.oversize && m.cap == 100, "oversize not reported");
  match_early_add(&tx, 5, 100);
  cts_in(1, 1, t5, 100);
  CHECK(match_early_replay(&tx, &m) == MATCH_CLAIMED && !m.oversize, "a message that fits reported oversize");
}

static void test_early_fits_nowhere(void) {
  tx_fresh(0);
  match_early_add(&tx, 9, 10);
  const int t0[] = {5, 7};
  cts_in(0, 2, t0, 100);
  struct match_replayed m;
  CHECK(match_early_replay(&tx, &m) == MATCH_NO_ENTRY && m.tag == 9 && m.seq == 0,
        "an early tag that fits no entry: not reported as such");
  CHECK(tx.early_len == 1 && tx.seq == 0, "a failed replay changed the log or the cursor");
}

/* The sender's cursor moves past receives filled by matched sends; the
 * early send names the next one, and the receiver skips to it. */
static void test_cursor_skips_matched(void) {
  tx_fresh(0);
  const int t[] = {3};
  cts_in(0, 1, t, 100);
  cts_in(1, 1, t, 100);
  claim_is(3, 0, 0, "matched send 0");
  claim_is(3, 1, 0, "matched send 1");
  uint32_t stamp = match_early_add(&tx, 3, 10);
  CHECK(stamp == 2, "early send after two matched ones names receive %u, expected 2", stamp);

  struct match_recv rx = {0};
  struct match_early_where w;
  struct match_entries r2 = {.tag = {3}};
  CHECK(match_early_at(&rx, stamp, 3, &w) == MATCH_EARLY_PLACED && w.seq == 2,
        "receiver put the early message in receive %u, expected 2", w.seq);
  CHECK(match_early_take(&rx, &w, 1, &r2, 3) == MATCH_EARLY_PLACED && w.idx == 0 && rx.eager_seq == 3,
        "receiver's claim: idx %d cursor %u", w.idx, rx.eager_seq);
  /* A message stamped with an older cursor goes where the receiver's
   * cursor is: it never moves back. */
  rx.eager_seq = 5;
  CHECK(match_early_at(&rx, 4, 7, &w) == MATCH_EARLY_PLACED && w.seq == 5, "cursor moved back to %u", w.seq);
}

static void test_receiver_grouped(void) {
  struct match_recv rx = {0};
  struct match_early_where w;
  struct match_entries r0 = {.tag = {3, 4, 3}}, r1 = {.tag = {3}};
  int idx[3];
  const int tags[] = {3, 3, 4};
  for (int k = 0; k < 3; k++) {
    CHECK(match_early_at(&rx, 0, 2, &w) == MATCH_EARLY_PLACED && w.seq == 0, "message %d not for receive 0", k);
    CHECK(match_early_take(&rx, &w, 3, &r0, tags[k]) == MATCH_EARLY_PLACED, "message %d not placed", k);
    idx[k] = w.idx;
  }
  CHECK(idx[0] == 0 && idx[1] == 2 && idx[2] == 1, "entries %d %d %d, expected 0 2 1", idx[0], idx[1], idx[2]);
  CHECK(rx.eager_seq == 1 && r0.claimed == 7, "cursor %u claimed %#x after a full receive", rx.eager_seq,
        r0.claimed);
  CHECK(match_early_at(&rx, 0, 2, &w) == MATCH_EARLY_PLACED && w.seq == 1, "the next message not for receive 1");
  CHECK(match_early_take(&rx, &w, 1, &r1, 4) == MATCH_EARLY_NO_ENTRY && w.seq == 1,
        "a tag receive 1 lacks: not refused");
  CHECK(match_early_take(&rx, &w, 1, NULL, 3) == MATCH_EARLY_COMPLETED, "a completed receive not reported");
  CHECK(rx.eager_seq == 1, "a refused message moved the cursor");
  CHECK(match_early_at(&rx, 3, 2, &w) == MATCH_EARLY_NOT_POSTED && w.seq == 3 && w.posted == 2,
        "a message for a receive beyond those posted accepted");
}

static void test_receiver_blocked_until_posted(void) {
  struct match_recv rx = {0};
  struct match_early_where w;
  struct match_entries r0 = {.tag = {1}}, r1 = {.tag = {1}};
  CHECK(match_early_at(&rx, 0, 0, &w) == MATCH_EARLY_BLOCKED && w.posted == 0, "not blocked with nothing posted");
  CHECK(match_early_at(&rx, 0, 1, &w) == MATCH_EARLY_PLACED && w.seq == 0, "not unblocked once posted");
  CHECK(match_early_take(&rx, &w, 1, &r0, 1) == MATCH_EARLY_PLACED, "not placed once posted");
  /* receive 0 full: the next message waits for receive 1 */
  CHECK(match_early_at(&rx, 0, 1, &w) == MATCH_EARLY_BLOCKED && w.posted == 1,
        "a message past a full receive not blocked");
  CHECK(match_early_at(&rx, 0, 2, &w) == MATCH_EARLY_PLACED && w.seq == 1 &&
            match_early_take(&rx, &w, 1, &r1, 1) == MATCH_EARLY_PLACED,
        "not placed in receive 1 once posted");
}

/* Run `count` single-entry receives from `start`, each CTS in then
 * claimed, and the receiver's rule beside it. */
static void run_from(uint32_t start, int count) {
  tx_fresh(start);
  struct match_recv rx = {.eager_seq = start};
  struct match_entries e = {.tag = {2}};
  const int t[] = {2};
  for (int k = 0; k < count; k++) {
    uint32_t seq = start + (uint32_t)k;
    CHECK(cts_in(seq, 1, t, 64) == 0, "start %u: CTS %u refused", start, seq);
    claim_is(2, seq, 0, "wrapping cursor");
    struct match_early_where w;
    e.claimed = 0;
    int at = match_early_at(&rx, seq, seq + 1, &w);
    CHECK(at == MATCH_EARLY_PLACED && w.seq == seq && match_early_take(&rx, &w, 1, &e, 2) == MATCH_EARLY_PLACED,
          "start %u: receiver did not place receive %u (%d at %u)", start, seq, at, w.seq);
    CHECK(match_early_at(&rx, seq + 1, seq + 1, &w) == MATCH_EARLY_BLOCKED,
          "start %u: message for receive %u not blocked", start, seq + 1);
  }
  CHECK(tx.seq == start + (uint32_t)count, "start %u: cursor at %u", start, tx.seq);
}

static void test_wrap(void) {
  run_from(0, 3 * TCP_SEQ_SLOTS + 5);
  run_from(UINT32_MAX - TCP_SEQ_SLOTS - 3, 2 * TCP_SEQ_SLOTS + 10); /* past 2^32 */
  /* A slot comes back once consumed, and a record for a slot still in
   * use is refused. */
  tx_fresh(0);
  const int t[] = {1};
  cts_in(0, 1, t, 8);
  CHECK(cts_in(TCP_SEQ_SLOTS, 1, t, 8) != 0, "CTS for a slot still in use accepted");
  claim_is(1, 0, 0, "slot 0");
  CHECK(cts_in(TCP_SEQ_SLOTS, 1, t, 8) == 0, "CTS for a freed slot refused");
  /* A record for a later round of the slot at the cursor is not the
   * cursor's (a receiver never sends one, but a claim must not take it). */
  tx_fresh(0);
  cts_in(TCP_SEQ_SLOTS, 1, t, 8);
  claim_fails(1, MATCH_NOT_IN, "a record for a later round of the cursor's slot");
  /* the receiver's comparisons across 2^32 */
  struct match_recv rx = {.eager_seq = UINT32_MAX};
  struct match_early_where w;
  CHECK(match_early_at(&rx, UINT32_MAX, 1, &w) == MATCH_EARLY_PLACED && w.seq == UINT32_MAX,
        "message for receive 2^32-1 with receives posted past 2^32 not placed");
  CHECK(match_early_at(&rx, 0, 1, &w) == MATCH_EARLY_PLACED && w.seq == 0 && rx.eager_seq == 0,
        "the receiver's cursor did not follow the sender's past 2^32 (at %u)", rx.eager_seq);
  CHECK(match_early_at(&rx, 2, 1, &w) == MATCH_EARLY_NOT_POSTED, "a receive beyond those posted, past 2^32");
}

static void test_hold(void) {
  struct match_hold h;
  memset(&h, 0, sizeof h);
  match_hold_init(&h);
  CHECK(match_hold_due(&h, 0), "a new comm holds its first CTS");
  for (int k = 0; k < TCP_CTS_PROMPT_RECEIVES; k++) {
    CHECK(match_hold_due(&h, 0), "receive %d of the prompt ones held", k);
    match_hold_spend(&h);
  }
  CHECK(!match_hold_due(&h, 0), "CTS still prompt after %d receives with no stream message",
        TCP_CTS_PROMPT_RECEIVES);
  match_hold_spend(&h);
  CHECK(atomic_load(&h.prompt) == 0, "spent below zero: %d", atomic_load(&h.prompt));
  CHECK(!match_hold_due(&h, TCP_CTS_BATCH - 1), "due with fewer than a batch held");
  CHECK(match_hold_due(&h, TCP_CTS_BATCH), "a full batch held back");
  match_hold_stream_message(&h);
  CHECK(match_hold_due(&h, 0) && atomic_load(&h.prompt) == TCP_CTS_PROMPT_RECEIVES,
        "a stream message did not make CTS prompt again");
  for (int k = 0; k < TCP_CTS_PROMPT_RECEIVES; k++) match_hold_spend(&h);
  CHECK(!match_hold_take_wanted(&h), "wanted with no CTS_WANTED");
  match_hold_wanted(&h);
  CHECK(match_hold_due(&h, 0), "CTS_WANTED did not make CTS prompt again");
  CHECK(match_hold_take_wanted(&h) && !match_hold_take_wanted(&h), "CTS_WANTED not taken exactly once");
  match_hold_rewant(&h);
  CHECK(match_hold_take_wanted(&h), "a CTS_WANTED put back was lost");
}

/* Both sides apply one rule: over random grouped receives (repeated tags),
 * CTS records arriving in random bursts and receives posted late, every
 * early message lands at the receiver in the entry the sender's replay gave
 * it, and every message in the receive it was sent for. */
#define SIM_RECEIVES 700
static struct {
  int n, tag[COLLX_MAX_RECVS];
  struct match_entries rx;
} sim_recv[SIM_RECEIVES];
static struct sim_msg {
  int recv, tag, early, cts_seen; /* CTS records the sender had when it sent */
  uint32_t stamp, seq;
  int idx;
} sim_msg[SIM_RECEIVES * 4];
static int sim_nmsg, sim_replayed;
static uint32_t lcg = 12345;

static unsigned rnd(unsigned n) {
  lcg = lcg * 1103515245u + 12345u;
  return (lcg >> 16) % n;
}

/* CTS records come in (up to `burst`, in order, the receiver posting at most
 * 6 receives ahead of the sender), then the sender replays its early log. */
static void sim_cts(uint32_t base, int *next, int burst) {
  for (int k = 0; k < burst && *next < SIM_RECEIVES && (uint32_t)*next + base - tx.seq < 6; k++, (*next)++)
    CHECK(cts_in(base + (uint32_t)*next, sim_recv[*next].n, sim_recv[*next].tag, 1) == 0, "sim: CTS %d refused",
          *next);
  struct match_replayed m;
  while (match_early_replay(&tx, &m) == MATCH_CLAIMED) {
    while (!sim_msg[sim_replayed].early) sim_replayed++;
    sim_msg[sim_replayed].seq = m.seq;
    sim_msg[sim_replayed].idx = m.idx;
    sim_replayed++;
  }
}

static void sim_early(int i, int cts_seen) {
  sim_msg[i].early = 1;
  sim_msg[i].cts_seen = cts_seen;
  sim_msg[i].stamp = match_early_add(&tx, sim_msg[i].tag, 1);
}

static void sim_send(uint32_t base) {
  tx_fresh(base);
  sim_replayed = 0;
  int next_cts = 0;
  uint64_t cap;
  for (int i = 0; i < sim_nmsg; i++) {
    /* phases where CTS records keep ahead, and where they lag behind */
    sim_cts(base, &next_cts, (i / 40) % 2 ? (int)rnd(4) : rnd(6) == 0 ? (int)rnd(4) : 0);
    int got = MATCH_NOT_IN;
    if (!tx.early_len) got = match_cts_claim(&tx, sim_msg[i].tag, &sim_msg[i].seq, &sim_msg[i].idx, &cap);
    CHECK(got != MATCH_NO_ENTRY, "sim: message %d found no entry", i);
    if (got == MATCH_CLAIMED) continue;
    if (tx.early_len == TCP_EAGER_LOG) {
      /* the transport makes it wait for CTS records, then tries again */
      for (int k = 0; tx.early_len == TCP_EAGER_LOG && k < SIM_RECEIVES; k++) sim_cts(base, &next_cts, 1);
      CHECK(tx.early_len < TCP_EAGER_LOG, "sim: the early log stays full");
      if (!tx.early_len && match_cts_claim(&tx, sim_msg[i].tag, &sim_msg[i].seq, &sim_msg[i].idx, &cap) ==
                               MATCH_CLAIMED)
        continue;
    }
    sim_early(i, next_cts);
  }
  for (int k = 0; tx.early_len && k < SIM_RECEIVES; k++) sim_cts(base, &next_cts, SIM_RECEIVES);
  CHECK(tx.early_len == 0, "sim: %u early sends never matched", tx.early_len);
}

static void sim_receive(uint32_t base) {
  struct match_recv rx = {.eager_seq = base};
  uint32_t posted = base;
  int early = 0;
  for (int i = 0; i < sim_nmsg; i++) {
    if (rnd(3) == 0 && posted - base < SIM_RECEIVES) posted++;
    if (!sim_msg[i].early) continue;
    /* a CTS goes out when its receive is posted */
    if (posted - base < (uint32_t)sim_msg[i].cts_seen) posted = base + (uint32_t)sim_msg[i].cts_seen;
    early++;
    struct match_early_where w;
    int rc;
    while ((rc = match_early_at(&rx, sim_msg[i].stamp, posted, &w)) == MATCH_EARLY_BLOCKED) posted++;
    if (rc == MATCH_EARLY_PLACED) rc = match_early_take(&rx, &w, sim_recv[w.seq - base].n, &sim_recv[w.seq - base].rx,
                                                      sim_msg[i].tag);
    CHECK(rc == MATCH_EARLY_PLACED && w.seq == sim_msg[i].seq && w.idx == sim_msg[i].idx,
          "sim base %u: early message %d (tag %d): receiver %d at %u/%d, sender %u/%d", base, i, sim_msg[i].tag, rc,
          w.seq, w.idx, sim_msg[i].seq, sim_msg[i].idx);
  }
  printf("sim base %u: %d of %d messages early\n", base, early, sim_nmsg);
  CHECK(early > SIM_RECEIVES / 4 && early < sim_nmsg - SIM_RECEIVES / 4,
        "sim: %d of %d messages early: not a mix", early, sim_nmsg);
}

static void test_both_sides_agree(uint32_t base) {
  sim_nmsg = 0;
  for (int r = 0; r < SIM_RECEIVES; r++) {
    sim_recv[r].n = 1 + (int)rnd(4);
    sim_recv[r].rx.claimed = 0;
    for (int i = 0; i < sim_recv[r].n; i++) sim_recv[r].rx.tag[i] = sim_recv[r].tag[i] = (int)rnd(3);
    /* the application sends the receive's tags in any order */
    int order[COLLX_MAX_RECVS];
    for (int i = 0; i < sim_recv[r].n; i++) order[i] = i;
    for (int i = sim_recv[r].n - 1; i > 0; i--) {
      int j = (int)rnd((unsigned)i + 1), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (int i = 0; i < sim_recv[r].n; i++)
      sim_msg[sim_nmsg++] = (struct sim_msg){.recv = r, .tag = sim_recv[r].tag[order[i]]};
  }
  sim_send(base);
  for (int i = 0; i < sim_nmsg; i++)
    CHECK(sim_msg[i].seq == base + (uint32_t)sim_msg[i].recv &&
              sim_recv[sim_msg[i].recv].tag[sim_msg[i].idx] == sim_msg[i].tag,
          "sim: message %d for receive %d (tag %d) went to %u/%d", i, sim_msg[i].recv, sim_msg[i].tag,
          sim_msg[i].seq - base, sim_msg[i].idx);
  sim_receive(base);
}

int main(void) {
  test_grouped_claims();
  test_early_then_batch();
  test_early_then_one_by_one();
  test_early_fits_nowhere();
  test_cursor_skips_matched();
  test_receiver_grouped();
  test_receiver_blocked_until_posted();
  test_wrap();
  test_hold();
  test_both_sides_agree(0);
  test_both_sides_agree(UINT32_MAX - 300);
  printf("test_match: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
