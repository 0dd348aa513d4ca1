/*
 * The send role's part in the control channel (ctrl.h): eager messages
 * and CTS_WANTED out; CTS records, failover's DONE, LOST_ACK, REJOIN and
 * REJOINED records and heartbeats in.
 *
 * Eager messages are the channel's items: queued by isend (eager_lock,
 * not the writer's), written whole after the records queued before them, so a
 * CTS_WANTED asked for in the middle of one goes right behind it.  An
 * eager send is done once its message is out on every control socket in
 * use.
 *
 * Eager matching.  A sender that holds the CTS of the receive a message
 * belongs to names the receive entry (MATCHED).  Otherwise the message
 * goes out early.  The sender cannot know where that receive ends (a
 * grouped receive has several entries), so both sides match an early
 * message with one rule (match.c): it fills the first free entry with its
 * tag of the receive at the cursor, and the cursor moves on once every
 * entry of that receive is taken.  The receiver applies the rule when it
 * reads the record (recv_ctrl.c); the sender replays it as CTS records
 * come in (tcp_send_eager_replay).
 */
#include <string.h>

#include "send.h"
#include "util/log.h"
#include "util/timeline.h"

static struct tcp_send_comm *ctrl_owner(struct tcp_ctrl *k) { return (struct tcp_send_comm *)k->comm; }

/* ---- writing: eager messages and CTS_WANTED -------------------------------- */

/* The oldest queued eager message is the channel's next item. */
static int eager_next(struct tcp_ctrl *k, struct tcp_ctrl_item *it) {
  struct tcp_send_comm *c = ctrl_owner(k);
  pthread_mutex_lock(&c->eager_lock);
  struct tcp_send_req *r = NULL;
  if (!collx_list_empty(&c->eager_queue)) {
    r = COLLX_CONTAINER_OF(c->eager_queue.next, struct tcp_send_req, qnode);
    collx_list_del(&r->qnode);
    atomic_fetch_sub(&c->eager_queued, 1);
  }
  pthread_mutex_unlock(&c->eager_lock);
  if (!r) return 0;
  c->eager_tx = r;
  *it = (struct tcp_ctrl_item){.hdr = &r->eager_hdr, .hlen = sizeof r->eager_hdr, .payload = r->data,
                               .plen = r->size};
  return 1;
}

/* The message is out: its send is done. */
static void eager_written(struct tcp_ctrl *k) {
  struct tcp_send_comm *c = ctrl_owner(k);
  COLLX_TL(COLLX_TL_WRITTEN, c->base.tl_key, ++c->tl_eager_tx);
  atomic_store_explicit(&c->eager_tx->chunks_done, 1, memory_order_release);
  c->eager_tx = NULL;
}

/* Queued without the writer's lock, which the watchdog may hold while it
 * is off the processor: isend never waits on another thread.  The count
 * goes up before the pump's trylock, so a holder that kept the lock from
 * the pump sees it as it lets go (tcp_ctrl_unlock: owed) and writes the
 * message itself. */
void tcp_send_eager_queue(struct tcp_send_comm *c, struct tcp_send_req *r) {
  pthread_mutex_lock(&c->eager_lock);
  collx_list_add_tail(&c->eager_queue, &r->qnode);
  atomic_fetch_add(&c->eager_queued, 1);
  pthread_mutex_unlock(&c->eager_lock);
  tcp_ctrl_pump(&c->base.ctrl);
}

/* Eager messages are queued that the writer has not started yet. */
static int eager_owed(struct tcp_ctrl *k) { return atomic_load(&ctrl_owner(k)->eager_queued) > 0; }

void tcp_send_want_cts(struct tcp_send_comm *c) {
  double now = tcp_now();
  if (c->want_seq == c->match_tx.seq && now - c->want_at < TCP_CTS_WANT_RETRY_S) return;
  struct tcp_ctrl *k = &c->base.ctrl;
  if (tcp_ctrl_trylock(k) != 0) return; /* asked again at the next isend */
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS_WANTED, .seq = c->match_tx.seq};
  if (tcp_ctrl_queue(k, &m) == 0) {
    c->want_seq = c->match_tx.seq;
    c->want_at = now;
    c->send_stats.cts_wanted++;
    tcp_ctrl_flush(k);
  }
  tcp_ctrl_unlock(k);
}

/* ---- reading: CTS and failover records ---------------------------------------- */

static void confirm_if_awaiting(_Atomic uint64_t *await, uint64_t want) {
  /* A plain load first: a compare-exchange is a locked instruction even
   * when it fails, and all but one of the slots fail. */
  if (atomic_load(await) == want) atomic_compare_exchange_strong(await, &want, 0);
}

/* Failover: the receiver has every byte of these receives.  Any thread:
 * the compare-exchange finds only a send still waiting for that very
 * receive, and q_lock keeps it from being confirmed while a lost stream's
 * chunks of it are being taken back (send.c). */
static void sends_confirmed(struct tcp_send_comm *c, const struct wire_ctrl *m) {
  pthread_mutex_lock(&c->q_lock);
  for (int i = 0; i < m->n; i++) {
    uint64_t want = 1ull << 32 | (uint32_t)m->e[i].size;
    for (int j = 0; j < COLLX_MAX_REQUESTS; j++) confirm_if_awaiting(&c->reqs[j].await, want);
    for (int j = 0; c->kept && j < TCP_KEPT_SENDS; j++) confirm_if_awaiting(&c->kept[j].await, want);
  }
  pthread_mutex_unlock(&c->q_lock);
}

static int accept_record(struct tcp_send_comm *c, const struct wire_ctrl *m, const char **why) {
  int type = wire_ctrl_check(m, 1, why);
  if ((type == WIRE_DONE || type == WIRE_LOST_ACK || type == WIRE_REJOIN || type == WIRE_REJOINED ||
       type == WIRE_CTRL_GONE) &&
      !c->base.failover) {
    *why = "failover record on a connection without failover";
    return -1;
  }
  if (type == WIRE_DONE) sends_confirmed(c, m);
  /* Acted on outside the reader's lock (send.c). */
  if (type == WIRE_LOST_ACK) atomic_fetch_or(&c->lost_acked, (unsigned)m->e[0].size);
  /* Paths coming back are the watchdog's (send.c). */
  if (type == WIRE_REJOIN) {
    pthread_mutex_lock(&c->rejoin_lock);
    c->rejoin_port[m->seq] = (uint16_t)m->e[0].tag;
    c->rejoin_token = m->e[0].size;
    pthread_mutex_unlock(&c->rejoin_lock);
  }
  if (type == WIRE_REJOINED) atomic_fetch_or(&c->rejoined, (unsigned)m->e[0].size);
  if (type == WIRE_CTRL_GONE) atomic_fetch_or(&c->ctrl_gone, (unsigned)m->e[0].size);
  if (type != WIRE_CTS) return type < 0 ? -1 : 0;
  return match_cts_accept(&c->match_tx, m, why);
}

/* One staged record (the channel's parse): 1 taken, 0 none whole yet, -1
 * after failing the comm. */
static int parse_record(struct tcp_ctrl *k) {
  struct tcp_send_comm *c = ctrl_owner(k);
  struct wire_ctrl m;
  if (k->rx_done - k->rx_pos < sizeof m) return 0;
  memcpy(&m, k->rx + k->rx_pos, sizeof m);
  k->rx_pos += sizeof m;
  const char *why = NULL;
  if (accept_record(c, &m, &why) == 0) return 1;
  tcp_comm_fail(&c->base, ncclRemoteError, why);
  return -1;
}

int tcp_send_eager_replay(struct tcp_send_comm *c) {
  while (c->match_tx.early_len && !tcp_comm_failed(&c->base)) {
    struct match_replayed m;
    int got = match_early_replay(&c->match_tx, &m);
    if (got == MATCH_NOT_IN) return 0;
    if (got == MATCH_NO_ENTRY) {
      tcp_comm_failf(&c->base, ncclInvalidUsage, "a message with tag %d sent before its CTS fits no free entry of "
                     "receive %u", m.tag, m.seq);
      return -1;
    }
    if (m.oversize)
      COLLX_WARN("message of %llu bytes to %s on device %s is larger than the receive buffer of %llu "
                 "bytes posted for tag %d (sent before its CTS: the receive fails)",
                 (unsigned long long)m.size, c->base.peer, c->base.devname, (unsigned long long)m.cap, m.tag);
  }
  return 0;
}

const struct tcp_ctrl_ops tcp_send_ctrl_ops = {
    .write_error_fails = 1,
    .eof_is_goodbye = 0,
    .owed = eager_owed,
    .next_item = eager_next,
    .item_done = eager_written,
    .parse = parse_record,
};
