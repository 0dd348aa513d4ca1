/*
 * The receive role's part in the control channel (ctrl.h): CTS and
 * failover records out; eager messages, CTS_WANTED and heartbeats in.
 *
 * CTS records.  Every irecv queues one, written at once so that it reaches
 * a sender of a large message even if the receiver then stops testing,
 * unless the receiver's recent traffic was all small: then it holds them
 * back and writes them in batches (TCP_CTS_BATCH, match_hold_due), or when
 * the sender asks with CTS_WANTED.
 *
 * Eager messages.  A message of up to COLLX_EAGER_SIZE bytes comes as an
 * EAGER record followed by its payload.  The thread that posts or tests a
 * receive reads it (or the watchdog); no progress thread wakes for it.  A
 * MATCHED record names its receive entry; an early one fills the first
 * free entry with its tag of the receive at the sender's cursor (match.c),
 * and the record carries that cursor, so the reader skips the receives the
 * sender filled with matched messages.
 *
 * Flow control.  The reader takes an early record only once its receive
 * is posted.  Until then the record stays in the socket, and whatever
 * follows it waits behind it.  That is safe: everything behind it was sent
 * later, and only small messages and heartbeats share that socket, so no
 * bulk transfer waits behind a message that waits for its receive.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "recv.h"
#include "util/log.h"
#include "util/timeline.h"

/* Payload still owed, from which the reader receives straight into the
 * receive buffer instead of through the staging buffer. */
#define EAGER_DIRECT_MIN 4096
/* How long a CTS waits for room on a full control socket before looking
 * at the comm's error again (the watchdog's tick): only once the backlog
 * is full too. */
#define CTS_ROOM_WAIT_MS 200
/* CTS records kept back for room: as many receives as can be in flight by
 * sequence number. */
#define TCP_CTS_BACKLOG TCP_SEQ_SLOTS

static struct tcp_recv_comm *recv_comm_of(struct tcp_comm_base *b) { return (struct tcp_recv_comm *)b; }
static struct tcp_recv_comm *ctrl_owner(struct tcp_ctrl *k) { return recv_comm_of(k->comm); }

/* ---- writing: failover's DONE, LOST_ACK, REJOIN, REJOINED, CTRL_GONE records */

static int owed(struct tcp_ctrl *k) { return atomic_load(&ctrl_owner(k)->owed); }

static int backlog_to_channel(struct tcp_recv_comm *c);

/* Turn what is owed into records, as far as there is room (the channel's
 * fill; the writer is held). */
static void queue_owed(struct tcp_ctrl *k) {
  struct tcp_recv_comm *c = ctrl_owner(k);
  backlog_to_channel(c);
  pthread_mutex_lock(&c->done_lock);
  if (c->lost_ack) {
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_LOST_ACK, .n = 1};
    m.e[0].size = c->lost_ack;
    if (tcp_ctrl_queue(k, &m) == 0) c->lost_ack = 0;
  }
  for (int p = 0; p < COLLX_MAX_MEMBERS && c->rejoin_offer; p++) {
    if (!(c->rejoin_offer >> p & 1)) continue;
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_REJOIN, .n = 1, .seq = (uint32_t)p};
    m.e[0].tag = c->base.paths->p[p].port;
    m.e[0].size = c->base.paths->token;
    if (tcp_ctrl_queue(k, &m) != 0) break;
    c->rejoin_offer &= ~(1u << p);
  }
  if (c->ctrl_gone) {
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTRL_GONE, .n = 1};
    m.e[0].size = c->ctrl_gone;
    if (tcp_ctrl_queue(k, &m) == 0) c->ctrl_gone = 0;
  }
  if (c->rejoined) {
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_REJOINED, .n = 1};
    m.e[0].size = c->rejoined;
    if (tcp_ctrl_queue(k, &m) == 0) c->rejoined = 0;
  }
  while (c->done_len > 0) {
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_DONE};
    int n = c->done_len < COLLX_MAX_RECVS ? c->done_len : COLLX_MAX_RECVS;
    for (int i = 0; i < n; i++) m.e[i].size = c->done_seqs[c->done_len - n + i];
    m.n = (uint8_t)n;
    if (tcp_ctrl_queue(k, &m) != 0) break;
    c->done_len -= n;
  }
  if (c->done_len == 0) atomic_store(&c->lazy_owed, 0);
  atomic_store(&c->owed, c->done_len > 0 || c->lost_ack || c->rejoin_offer || c->rejoined || c->ctrl_gone ||
                             c->cts_backlog_len > 0);
  pthread_mutex_unlock(&c->done_lock);
}

/* A DONE the sender waits for goes out at once; one it does not wait for
 * (lazy) with the next records written (a CTS, most often), or at the
 * watchdog's next tick: a write, on both control sockets, saved per
 * message. */
static void owe_done(struct tcp_recv_comm *c, uint32_t seq, int lazy) {
  pthread_mutex_lock(&c->done_lock);
  /* At most one per receive in flight: done_seqs cannot overflow. */
  if (c->done_len < COLLX_MAX_REQUESTS) c->done_seqs[c->done_len++] = seq;
  atomic_store(lazy ? &c->lazy_owed : &c->owed, 1);
  pthread_mutex_unlock(&c->done_lock);
  if (!lazy) tcp_ctrl_pump(&c->base.ctrl);
}

void tcp_recv_lazy_due(struct tcp_recv_comm *c) {
  /* Unlocked: at worst owed is set with nothing left, and the next fill finds nothing. */
  if (atomic_load(&c->lazy_owed)) atomic_store(&c->owed, 1);
}

static void owe(struct tcp_recv_comm *c, unsigned *what, unsigned mask) {
  pthread_mutex_lock(&c->done_lock);
  *what |= mask;
  atomic_store(&c->owed, 1);
  pthread_mutex_unlock(&c->done_lock);
  tcp_ctrl_pump(&c->base.ctrl);
}

void tcp_recv_owe_lost_ack(struct tcp_recv_comm *c, unsigned mask) { owe(c, &c->lost_ack, mask); }
void tcp_recv_owe_rejoin(struct tcp_recv_comm *c, unsigned paths) { owe(c, &c->rejoin_offer, paths); }
void tcp_recv_owe_rejoined(struct tcp_recv_comm *c, unsigned mask) { owe(c, &c->rejoined, mask); }
void tcp_recv_owe_ctrl_gone(struct tcp_recv_comm *c, unsigned paths) { owe(c, &c->ctrl_gone, paths); }

void tcp_recv_account(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t len) {
  uint32_t seq;
  int owe = tcp_entry_account(r, idx, len, &seq);
  if (owe) owe_done(c, seq, owe == 2);
}

void tcp_recv_truncated(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t size) {
  uint32_t seq;
  if (tcp_entry_truncated(c, r, idx, size, &seq)) owe_done(c, seq, 0);
}

/* ---- writing: CTS records --------------------------------------------------- */

/* Whether CTS records go out now or are held back (writer held). */
static int cts_due(struct tcp_recv_comm *c) { return match_hold_due(&c->hold, tcp_ctrl_held(&c->base.ctrl)); }

/* Queue a record, waiting for room when records fill the buffer and the
 * backlog too: far more CTS records than receives can be outstanding sit
 * unwritten, so the peer has not read for a long while (the watchdog
 * judges it).  Writer held. */
static void queue_waiting_for_room(struct tcp_recv_comm *c, const struct wire_ctrl *m) {
  struct tcp_ctrl *k = &c->base.ctrl;
  while (!tcp_ctrl_writer_dead(k) && tcp_ctrl_queue(k, m) != 0) {
    if (tcp_ctrl_flush(k) == 0) continue;
    if (tcp_comm_failed(&c->base) || atomic_load(&c->base.stop)) break;
    tcp_ctrl_wait_writable(k, CTS_ROOM_WAIT_MS);
  }
}

/* Move backlogged CTS records into the channel, oldest first, while it
 * has room; 1 when the backlog is empty after.  Writer held. */
static int backlog_to_channel(struct tcp_recv_comm *c) {
  pthread_mutex_lock(&c->done_lock);
  while (c->cts_backlog_len > 0 && tcp_ctrl_queue(&c->base.ctrl, &c->cts_backlog[c->cts_backlog_head]) == 0) {
    c->cts_backlog_head = (c->cts_backlog_head + 1) % TCP_CTS_BACKLOG;
    c->cts_backlog_len--;
  }
  int empty = c->cts_backlog_len == 0;
  pthread_mutex_unlock(&c->done_lock);
  return empty;
}

/* Keep m for later, behind the records already kept: 0, or -1 when the
 * backlog is full or cannot be had.  The writer need not be held. */
static int backlog_push(struct tcp_recv_comm *c, const struct wire_ctrl *m) {
  pthread_mutex_lock(&c->done_lock);
  if (!c->cts_backlog) c->cts_backlog = calloc(TCP_CTS_BACKLOG, sizeof *c->cts_backlog);
  int room = c->cts_backlog && c->cts_backlog_len < TCP_CTS_BACKLOG;
  if (room) {
    c->cts_backlog[(c->cts_backlog_head + c->cts_backlog_len) % TCP_CTS_BACKLOG] = *m;
    c->cts_backlog_len++;
    atomic_store(&c->owed, 1);
  }
  pthread_mutex_unlock(&c->done_lock);
  return room ? 0 : -1;
}

/* Queue a CTS record behind those still waiting for room.  A full channel
 * (a socket that takes nothing: a lossy path under a spare, a peer that
 * stopped reading) keeps it in the backlog, so that irecv returns at once
 * (NCCL's proxy thread serves every comm of the rank).  Writer held. */
static void queue_cts(struct tcp_recv_comm *c, const struct wire_ctrl *m) {
  struct tcp_ctrl *k = &c->base.ctrl;
  if (backlog_to_channel(c) && tcp_ctrl_queue(k, m) == 0) return;
  tcp_ctrl_flush(k);
  if (backlog_to_channel(c) && tcp_ctrl_queue(k, m) == 0) return;
  if (backlog_push(c, m) == 0) return;
  queue_waiting_for_room(c, m);
}

int tcp_recv_send_cts(struct tcp_recv_comm *c, const struct tcp_recv_req *r) {
  struct tcp_ctrl *k = &c->base.ctrl;
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_CTS, .n = (uint8_t)r->n, .seq = r->base.seq};
  for (int i = 0; i < r->n; i++)
    m.e[i] = (struct wire_cts_entry){.tag = r->match.tag[i], .size = r->e[i].cap};
  if (tcp_ctrl_trylock(k) != 0) {
    /* Another thread writes (a completion's DONE, the watchdog's tick),
     * and it may be off the processor: the record waits in the backlog,
     * and that thread, or the pump, writes it as the lock is let go
     * (tcp_ctrl_unlock: owed), so that irecv never waits on another
     * thread.  Only a full backlog waits for the lock. */
    if (backlog_push(c, &m) == 0) {
      tcp_ctrl_pump(k);
      return tcp_comm_failed(&c->base) ? -1 : 0;
    }
    tcp_ctrl_lock(k);
  }
  queue_cts(c, &m);
  /* A CTS_WANTED whose reader could not take this lock is served here. */
  int due = cts_due(c) || match_hold_take_wanted(&c->hold);
  match_hold_spend(&c->hold);
  if (due) {
    tcp_recv_lazy_due(c); /* written with the CTS */
    tcp_ctrl_flush(k);
  }
  tcp_ctrl_unlock(k);
  return tcp_comm_failed(&c->base) ? -1 : 0;
}

void tcp_recv_write_due_cts(struct tcp_recv_comm *c) {
  struct tcp_ctrl *k = &c->base.ctrl;
  int wanted = match_hold_take_wanted(&c->hold);
  if (tcp_ctrl_trylock(k) != 0) {
    /* The holder may be queueing a CTS it holds back: ask again later. */
    if (wanted) match_hold_rewant(&c->hold);
    return;
  }
  if (wanted || cts_due(c) || atomic_load(&c->owed)) {
    tcp_recv_lazy_due(c);
    tcp_ctrl_flush(k);
  }
  tcp_ctrl_unlock(k);
}

/* ---- reading: eager messages ---------------------------------------------- */

/* The entry an early message fills (see the top of this file).  NULL when
 * its receive is not posted yet (*blocked set) or after failing the comm. */
static struct tcp_recv_req *early_target(struct tcp_recv_comm *c, const struct wire_eager *h, int *idx,
                                         int *blocked) {
  struct match_early_where w;
  int rc = match_early_at(&c->match_rx, h->seq, atomic_load(&c->recv_seq), &w);
  struct tcp_recv_req *r = NULL;
  if (rc == MATCH_EARLY_PLACED) {
    r = tcp_recv_posted(c, w.seq);
    rc = match_early_take(&c->match_rx, &w, r ? r->n : 0, r ? &r->match : NULL, h->tag);
  }
  switch (rc) {
  case MATCH_EARLY_PLACED:
    *idx = w.idx;
    return r;
  case MATCH_EARLY_BLOCKED:
    *blocked = 1;
    atomic_store(&c->eager_rx_wait_seq, w.posted);
    return NULL;
  case MATCH_EARLY_NOT_POSTED:
    tcp_comm_failf(&c->base, ncclRemoteError, "early message for receive %u, but only %u were posted", w.seq,
                   w.posted);
    return NULL;
  case MATCH_EARLY_COMPLETED:
    tcp_comm_failf(&c->base, ncclRemoteError, "early message for receive %u, which has completed", w.seq);
    return NULL;
  default:
    tcp_comm_failf(&c->base, ncclInvalidUsage, "early message with tag %d fits no free entry of receive %u",
                   h->tag, w.seq);
    return NULL;
  }
}

/* The receive a MATCHED record names, or NULL after failing the comm. */
static struct tcp_recv_req *matched_target(struct tcp_recv_comm *c, const struct wire_eager *h) {
  struct tcp_recv_req *r = tcp_recv_posted(c, h->seq);
  if (!r || h->idx >= r->n) {
    tcp_comm_failf(&c->base, ncclRemoteError, "eager message for receive %u/%d that was never posted", h->seq,
                   h->idx);
    return NULL;
  }
  return r;
}

/* An EAGER record is staged: find its entry and start its payload.
 * 1 when started, 0 when its receive is not posted yet, -1 after failing
 * the comm. */
static int eager_start(struct tcp_recv_comm *c, const struct wire_eager *h) {
  const char *bad = NULL;
  if (wire_eager_check(h, &bad) != 0) {
    tcp_comm_fail(&c->base, ncclRemoteError, bad);
    return -1;
  }
  struct tcp_recv_req *r = NULL;
  int idx = h->idx, blocked = 0;
  if (h->flags & WIRE_EAGER_MATCHED) {
    r = matched_target(c, h);
    if (!r) return -1;
  } else {
    r = early_target(c, h, &idx, &blocked);
    if (!r) return blocked ? 0 : -1;
  }
  if (tcp_entry_claim(c, r, idx, CHUNK_EAGER, 0, h->size, h->size) != 0) return -1;
  c->base.ctrl.rd_bulky = h->size >= EAGER_DIRECT_MIN;
  c->eager_rx_hdr = *h;
  c->eager_rx_hdr.idx = (uint8_t)idx;
  c->eager_rx = r;
  c->eager_rx_got = 0;
  c->eager_rx_active = 1;
  c->eager_rx_discard = h->size > r->e[idx].cap;
  if (c->eager_rx_discard)
    tcp_recv_truncated(c, r, idx, h->size); /* the payload is read and dropped */
  else
    atomic_store_explicit(&r->e[idx].total, (int64_t)h->size, memory_order_release);
  return 1;
}

static void eager_finish(struct tcp_recv_comm *c) {
  COLLX_TL(COLLX_TL_LANDED, c->base.tl_key, ++c->tl_eager_rx);
  if (!c->eager_rx_discard) tcp_recv_account(c, c->eager_rx, c->eager_rx_hdr.idx, c->eager_rx_hdr.size);
  c->eager_rx_active = 0;
  c->eager_rx = NULL;
}

static char *eager_dst(struct tcp_recv_comm *c) { return c->eager_rx->e[c->eager_rx_hdr.idx].buf; }

/* Move staged payload bytes of the current message to their buffer. */
static void eager_copy_staged(struct tcp_recv_comm *c) {
  size_t owed = c->eager_rx_hdr.size - c->eager_rx_got;
  struct tcp_ctrl *k = &c->base.ctrl;
  size_t have = k->rx_done - k->rx_pos;
  size_t n = owed < have ? owed : have;
  if (!c->eager_rx_discard) memcpy(eager_dst(c) + c->eager_rx_got, k->rx + k->rx_pos, n);
  k->rx_pos += n;
  c->eager_rx_got += n;
}

/* Length of the record that starts at the parse position, 0 while fewer
 * bytes than its fixed part are staged. */
static size_t staged_record(const struct tcp_ctrl *k) {
  size_t have = k->rx_done - k->rx_pos;
  if (have < 4) return 0;
  uint8_t type = (uint8_t)k->rx[k->rx_pos + 2];
  size_t len = type == WIRE_EAGER ? sizeof(struct wire_eager) : sizeof(struct wire_ctrl);
  return have >= len ? len : 0;
}

/* Act on the staged record: 1 consumed, 0 it must wait, -1 after failing
 * the comm. */
static int ctrl_record(struct tcp_recv_comm *c, size_t len) {
  const char *p = c->base.ctrl.rx + c->base.ctrl.rx_pos;
  int r = 1;
  if (len == sizeof(struct wire_eager)) {
    struct wire_eager h;
    memcpy(&h, p, sizeof h);
    r = eager_start(c, &h);
  } else {
    struct wire_ctrl m;
    const char *why = NULL;
    memcpy(&m, p, sizeof m);
    int type = wire_ctrl_check(&m, 0, &why); /* heartbeat or CTS_WANTED */
    if (type < 0) {
      tcp_comm_fail(&c->base, ncclRemoteError, why);
      r = -1;
    } else if (type == WIRE_CTS_WANTED) {
      /* Served by whoever drained (tcp_recv_ctrl_drain), outside this lock. */
      match_hold_wanted(&c->hold);
    }
  }
  if (r == 1) c->base.ctrl.rx_pos += len;
  return r;
}

/* Receive a large rest of the current payload straight into its buffer.
 * 1 when complete, 0 when the socket is dry, -1 after failing the comm. */
static int eager_read_direct(struct tcp_recv_comm *c) {
  size_t before = c->eager_rx_got;
  enum sock_io io = tcp_ctrl_recv(&c->base.ctrl, eager_dst(c), c->eager_rx_hdr.size, &c->eager_rx_got, 0);
  if (c->eager_rx_got > before) tcp_comm_heard(&c->base);
  if (io == SOCK_IO_DONE) return 1;
  if (io == SOCK_IO_AGAIN) return 0;
  tcp_comm_fail(&c->base, ncclRemoteError, tcp_io_reason(io));
  return -1;
}

/* Parse what is staged (the channel's parse).  1 to go on, 0 when the
 * staged bytes are used up (or hold less than a record), -1 to stop
 * reading (waiting for a receive, a dry socket, or a failure). */
static int parse_staged(struct tcp_ctrl *k) {
  struct tcp_recv_comm *c = ctrl_owner(k);
  if (c->eager_rx_active) {
    eager_copy_staged(c);
    if (c->eager_rx_got == c->eager_rx_hdr.size) {
      eager_finish(c);
      return 1;
    }
    if (c->eager_rx_discard || c->eager_rx_hdr.size - c->eager_rx_got < EAGER_DIRECT_MIN) return 0;
    if (eager_read_direct(c) <= 0) return -1;
    eager_finish(c);
    return 1;
  }
  size_t len = staged_record(k);
  if (!len) return 0;
  int r = ctrl_record(c, len);
  /* Waiting for its receive, the record holds back the peer's heartbeats
   * behind it; they come on a data stream too (WIRE_CHUNK_HEARTBEAT),
   * which is always read. */
  atomic_store(&c->eager_rx_blocked, r == 0);
  return r <= 0 ? -1 : 1;
}

/* An end of stream is clean only between messages. */
static int at_boundary(struct tcp_ctrl *k) { return !ctrl_owner(k)->eager_rx_active; }

void tcp_recv_ctrl_drain(struct tcp_comm_base *b) {
  tcp_ctrl_drain(&b->ctrl);
  /* The writing lock is never taken inside the reading one. */
  tcp_recv_write_due_cts(recv_comm_of(b));
}

const struct tcp_ctrl_ops tcp_recv_ctrl_ops = {
    .write_error_fails = 0,
    .eof_is_goodbye = 1,
    .owed = owed,
    .fill = queue_owed,
    .parse = parse_staged,
    .at_boundary = at_boundary,
};
