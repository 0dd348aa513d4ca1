/*
 * Eager messages: small sends that do not wait for a CTS.
 *
 * A message of up to COLLX_EAGER_SIZE bytes travels on the control socket,
 * sender to receiver, as an EAGER record followed by its payload.  The
 * thread that posts or tests the send writes it; the thread that posts or
 * tests a receive reads it.  No stream thread wakes for it, and a message
 * costs one sendmsg and usually one recv.
 *
 * Matching.  A sender that holds the CTS of the receive a message belongs
 * to names the receive entry (MATCHED).  Otherwise the message goes out
 * early.  The sender cannot know where that receive ends (a grouped
 * receive has several entries), so both sides match an early message with
 * one rule: it fills the first free entry with its tag of the receive at
 * the cursor, and the cursor moves on once every entry of that receive is
 * taken.  The receiver applies the rule when it reads the record; the
 * sender replays it when the CTS records come in.  The record carries the
 * sender's cursor (which only moves forward), so the receiver skips the
 * receives that the sender filled with matched messages.  Until its early
 * messages are matched, a sender posts nothing but more early messages (at
 * most TCP_EAGER_LOG of them).  The rule, the cursors and the early log
 * are in match.c; this file applies them to sockets and requests.
 *
 * Flow control.  The receiver reads an early record only once its receive
 * is posted.  Until then the record stays in the socket, and whatever
 * follows it waits behind it.  That is safe: everything behind it was sent
 * later, and only small messages and heartbeats share that socket, so no
 * bulk transfer waits behind a message that waits for its receive.
 */
#include <stdio.h>
#include <string.h>

#include "sock.h"
#include "tcp_internal.h"
#include "util/log.h"
#include "util/timeline.h"

_Static_assert(TCP_EAGER_SIZE_MAX <= WIRE_EAGER_MAX, "a receiver accepts what a sender may send");

size_t tcp_eager_size = 16384;
void tcp_set_eager_size(size_t bytes) {
  tcp_eager_size = bytes < TCP_EAGER_SIZE_MAX ? bytes : TCP_EAGER_SIZE_MAX;
}

/* Payload still owed, from which the reader receives straight into the
 * receive buffer instead of through the staging buffer. */
#define LANE_DIRECT_MIN 4096

/* ---- sender -------------------------------------------------------------- */

void tcp_eager_replay(struct tcp_comm *c) {
  while (c->match_tx.early_len && !atomic_load(&c->error)) {
    struct match_replayed m;
    int got = match_early_replay(&c->match_tx, &m);
    if (got == MATCH_NOT_IN) return;
    if (got == MATCH_NO_ENTRY) {
      tcp_comm_failf(c, ncclInvalidUsage, "a message with tag %d sent before its CTS fits no free entry of "
                     "receive %u", m.tag, m.seq);
      return;
    }
    if (m.oversize)
      COLLX_WARN("message of %llu bytes to %s on device %s is larger than the receive buffer of %llu "
                 "bytes posted for tag %d (sent before its CTS: the receive fails)",
                 (unsigned long long)m.size, c->peer, c->devname, (unsigned long long)m.cap, m.tag);
  }
}

void tcp_eager_post(struct tcp_comm *c, struct tcp_req *r, int tag, int matched) {
  if (!matched) {
    r->seq = match_early_add(&c->match_tx, tag, r->size); /* the first receive it may belong to */
    r->idx = 0;
    c->stats.early++;
  }
  c->stats.eager++;
  COLLX_TL(COLLX_TL_ISEND, c->tl_key, (uint32_t)c->stats.eager);
  r->eager = 1;
  r->npieces = 1;
  atomic_store(&r->pieces_done, 0);
  r->eager_hdr = (struct wire_eager){.magic = WIRE_MAGIC, .type = WIRE_EAGER,
                                     .flags = matched ? WIRE_EAGER_MATCHED : 0, .seq = r->seq,
                                     .tag = tag, .idx = (uint8_t)r->idx, .size = r->size};
  pthread_mutex_lock(&c->ctrl_tx_lock);
  collx_list_add_tail(&c->lane_queue, &r->qnode);
  pthread_mutex_unlock(&c->ctrl_tx_lock);
  tcp_ctrl_pump(c);
}

/* ---- receiver ------------------------------------------------------------ */

/* The entry an early message fills (see the top of this file).  NULL when
 * its receive is not posted yet (*blocked set) or after failing the comm. */
static struct tcp_req *early_target(struct tcp_comm *c, const struct wire_eager *h, int *idx,
                                    int *blocked) {
  struct match_early_where w;
  int rc = match_early_at(&c->match_rx, h->seq, atomic_load(&c->recv_seq), &w);
  struct tcp_req *r = NULL;
  if (rc == MATCH_EARLY_PLACED) {
    r = atomic_load_explicit(&c->by_seq[w.seq % TCP_SEQ_SLOTS], memory_order_acquire);
    if (r && r->seq != w.seq) r = NULL;
    rc = match_early_take(&c->match_rx, &w, r ? r->n : 0, r ? &r->match : NULL, h->tag);
  }
  switch (rc) {
  case MATCH_EARLY_PLACED:
    *idx = w.idx;
    return r;
  case MATCH_EARLY_BLOCKED:
    *blocked = 1;
    atomic_store(&c->lane_wait_seq, w.posted);
    return NULL;
  case MATCH_EARLY_NOT_POSTED:
    tcp_comm_failf(c, ncclRemoteError, "early message for receive %u, but only %u were posted", w.seq, w.posted);
    return NULL;
  case MATCH_EARLY_COMPLETED:
    tcp_comm_failf(c, ncclRemoteError, "early message for receive %u, which has completed", w.seq);
    return NULL;
  default:
    tcp_comm_failf(c, ncclInvalidUsage, "early message with tag %d fits no free entry of receive %u", h->tag,
                   w.seq);
    return NULL;
  }
}

/* An EAGER record is staged: find its entry and start its payload.
 * Returns 1 when started, 0 when its receive is not posted yet, -1 after
 * failing the comm. */
static int lane_start(struct tcp_comm *c, const struct wire_eager *h) {
  const char *bad = NULL;
  if (wire_eager_check(h, &bad) != 0) {
    tcp_comm_fail(c, ncclRemoteError, bad);
    return -1;
  }
  struct tcp_req *r = NULL;
  int idx = h->idx, blocked = 0;
  if (h->flags & WIRE_EAGER_MATCHED) {
    r = atomic_load_explicit(&c->by_seq[h->seq % TCP_SEQ_SLOTS], memory_order_acquire);
    if (!r || r->seq != h->seq || idx >= r->n) {
      tcp_comm_failf(c, ncclRemoteError, "eager message for receive %u/%d that was never posted", h->seq, idx);
      return -1;
    }
  } else {
    r = early_target(c, h, &idx, &blocked);
    if (!r) return blocked ? 0 : -1;
  }
  if (tcp_entry_claim(c, r, idx, PIECE_EAGER, 0, h->size, h->size) != 0) return -1;
  c->lane_rx_hdr = *h;
  c->lane_rx_hdr.idx = (uint8_t)idx;
  c->lane_rx_req = r;
  c->lane_rx_got = 0;
  c->lane_rx_active = 1;
  c->lane_rx_discard = h->size > r->e[idx].cap;
  if (c->lane_rx_discard)
    tcp_warn_truncated(c, r, idx, h->size); /* the payload is read and dropped */
  else
    atomic_store_explicit(&r->e[idx].total, (int64_t)h->size, memory_order_release);
  return 1;
}

static void lane_finish(struct tcp_comm *c) {
  COLLX_TL(COLLX_TL_LANDED, c->tl_key, ++c->tl_lane_rx);
  if (!c->lane_rx_discard)
    tcp_entry_account(c->lane_rx_req, c->lane_rx_hdr.idx, c->lane_rx_hdr.size);
  c->lane_rx_active = 0;
  c->lane_rx_req = NULL;
}

static char *lane_dst(struct tcp_comm *c) {
  return c->lane_rx_req->e[c->lane_rx_hdr.idx].buf;
}

/* Move staged payload bytes of the current message to their buffer. */
static void lane_copy_staged(struct tcp_comm *c) {
  size_t owed = c->lane_rx_hdr.size - c->lane_rx_got;
  size_t have = c->ctrl_rx_done - c->ctrl_rx_pos;
  size_t n = owed < have ? owed : have;
  if (!c->lane_rx_discard) memcpy(lane_dst(c) + c->lane_rx_got, c->ctrl_rx + c->ctrl_rx_pos, n);
  c->ctrl_rx_pos += n;
  c->lane_rx_got += n;
}

/* Length of the record that starts at the parse position, 0 while fewer
 * bytes than its fixed part are staged. */
static size_t staged_record(const struct tcp_comm *c) {
  size_t have = c->ctrl_rx_done - c->ctrl_rx_pos;
  if (have < 4) return 0;
  uint8_t type = (uint8_t)c->ctrl_rx[c->ctrl_rx_pos + 2];
  size_t len = type == WIRE_EAGER ? sizeof(struct wire_eager) : sizeof(struct wire_ctrl);
  return have >= len ? len : 0;
}

/* Act on the staged record: 1 consumed, 0 it must wait, -1 failed. */
static int lane_record(struct tcp_comm *c, size_t len) {
  const char *p = c->ctrl_rx + c->ctrl_rx_pos;
  int r = 1;
  if (len == sizeof(struct wire_eager)) {
    struct wire_eager h;
    memcpy(&h, p, sizeof h);
    r = lane_start(c, &h);
  } else {
    struct wire_ctrl m;
    const char *why = NULL;
    memcpy(&m, p, sizeof m);
    int type = wire_ctrl_check(&m, 0, &why); /* heartbeat or CTS_WANTED */
    if (type < 0) {
      tcp_comm_fail(c, ncclRemoteError, why);
      r = -1;
    } else if (type == WIRE_CTS_WANTED) {
      /* Served by whoever drained (tcp_ctrl_drain), outside this lock. */
      match_hold_wanted(&c->hold);
    }
  }
  if (r == 1) c->ctrl_rx_pos += len;
  return r;
}

/* Receive a large rest of the current payload straight into its buffer.
 * Returns 1 when complete, 0 when the socket is dry, -1 on failure. */
static int lane_read_direct(struct tcp_comm *c) {
  size_t before = c->lane_rx_got;
  enum sock_io io = sock_recv_some(c->ctrl_fd, lane_dst(c), c->lane_rx_hdr.size, &c->lane_rx_got);
  if (c->lane_rx_got > before) atomic_store(&c->last_heard, tcp_now());
  if (io == SOCK_IO_DONE) return 1;
  if (io == SOCK_IO_AGAIN) return 0;
  tcp_comm_fail(c, ncclRemoteError, tcp_io_reason(io));
  return -1;
}

void tcp_eager_read(struct tcp_comm *c) {
  int dry = 0;
  if (atomic_load(&c->ctrl_eof)) return;
  while (!atomic_load(&c->error)) {
    if (c->lane_rx_active) {
      lane_copy_staged(c);
      if (c->lane_rx_got == c->lane_rx_hdr.size) {
        lane_finish(c);
        continue;
      }
      if (!c->lane_rx_discard && c->lane_rx_hdr.size - c->lane_rx_got >= LANE_DIRECT_MIN) {
        int r = lane_read_direct(c);
        if (r <= 0) return;
        lane_finish(c);
        continue;
      }
    } else {
      size_t len = staged_record(c);
      if (len) {
        int r = lane_record(c, len);
        /* Waiting for its receive, the record holds back the peer's
         * heartbeats behind it; they come on a data stream too
         * (WIRE_PIECE_HEARTBEAT), which is always read. */
        atomic_store(&c->lane_blocked, r == 0);
        if (r <= 0) return;
        continue;
      }
    }
    if (dry) return;
    memmove(c->ctrl_rx, c->ctrl_rx + c->ctrl_rx_pos, c->ctrl_rx_done - c->ctrl_rx_pos);
    c->ctrl_rx_done -= c->ctrl_rx_pos;
    c->ctrl_rx_pos = 0;
    size_t before = c->ctrl_rx_done;
    enum sock_io io = sock_recv_once(c->ctrl_fd, c->ctrl_rx, sizeof c->ctrl_rx, &c->ctrl_rx_done);
    if (c->ctrl_rx_done > before) {
      atomic_store(&c->last_heard, tcp_now());
      dry = c->ctrl_rx_done < sizeof c->ctrl_rx; /* a short read: nothing more for now */
      continue;
    }
    if (io == SOCK_IO_EOF && !c->lane_rx_active && c->ctrl_rx_pos == c->ctrl_rx_done) {
      atomic_store(&c->ctrl_eof, 1); /* closed between records */
      return;
    }
    if (io != SOCK_IO_AGAIN)
      tcp_comm_fail(c, ncclRemoteError, io == SOCK_IO_EOF ? "connection closed by peer in the middle of a message"
                                                          : tcp_io_reason(io));
    return;
  }
}
