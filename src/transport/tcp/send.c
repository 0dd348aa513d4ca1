/*
 * The send role, from isend to the last byte out.
 *
 * isend matches the message to a receive entry named by a CTS record (read
 * from the control socket here), then either writes it on the control
 * socket behind an EAGER header (small messages: the posting or testing
 * thread writes it, in one sendmsg) or cuts it into chunks of at most
 * COLLX_CHUNK_SIZE and queues them: any idle stream takes the next chunk,
 * so a fast stream carries more than a slow one.  A small striped message
 * is written by the posting thread itself; the rest goes to the progress
 * driver (progress.h), or with COLLX_PROGRESS=caller to the caller's next
 * isend and test.
 *
 * Eager messages and the CTS records they and the chunks need are the
 * role's part in the control channel (send_ctrl.c).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"
#include "progress.h"
#include "send.h"
#include "stripe.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/timeline.h"

_Static_assert(TCP_EAGER_SIZE_MAX <= WIRE_EAGER_MAX, "a receiver accepts what a sender may send");

/* Messages up to this size are written by the posting thread. */
#define TCP_INLINE_MAX (64 * 1024)


static struct tcp_send_comm *send_comm_of(struct tcp_comm_base *b) { return (struct tcp_send_comm *)b; }
static struct tcp_send_req *send_req_of(struct tcp_req *r) { return (struct tcp_send_req *)r; }

static void chunks_take_back(struct tcp_send_comm *c);

/* The role's drain: CTS and failover records in; the chunks of streams
 * the receiver has let go of (LOST_ACK) go out again. */
static void send_drain(struct tcp_comm_base *b) {
  struct tcp_send_comm *c = send_comm_of(b);
  tcp_ctrl_drain(&b->ctrl);
  if (atomic_load(&c->lost_acked)) chunks_take_back(c);
}

/* ---- chunks on the data streams -------------------------------------------- */

static int stream_slow(const struct tcp_send_comm *c, int h) {
  return atomic_load_explicit(&c->tx[h].slow, memory_order_relaxed);
}

static int stream_stuck(const struct tcp_send_comm *c, int h) {
  return atomic_load_explicit(&c->tx[h].stuck, memory_order_relaxed);
}

/* Slow or stuck: chunks left waiting on it may go out again elsewhere. */
static int stream_behind(const struct tcp_send_comm *c, int h) { return stream_slow(c, h) || stream_stuck(c, h); }

/* Whether stream h should keep its chunks for itself: it is idle, its
 * socket took all of its last write and it is neither slow nor stuck.
 * Otherwise another stream may take them.  The last write's outcome
 * stands in for asking the socket: a poll for every pick cost the sender
 * 5% of its processor on a merged pair at 64 KiB (bench/NOTES.md 82), and
 * a socket that drained since only lends a chunk to a sibling. */
static int stream_ready(struct tcp_send_comm *c, int h) {
  return !tcp_stream_lost(&c->base, h) && !atomic_load(&c->tx[h].busy) && !stream_behind(c, h) &&
         !atomic_load_explicit(&c->tx[h].full, memory_order_relaxed);
}

/* A slow stream takes a new chunk only once what its socket holds
 * (*queued) drains within PACE_BUDGET_S at its measured rate, so that it
 * is only ever given what it can carry in a short time. */
static int stream_has_room(struct tcp_send_comm *c, int j, uint64_t *queued) {
  *queued = 0;
  if (!stream_slow(c, j)) return 1;
  *queued = sock_outq(c->base.streams[j].fd);
  return pace_may_take(*queued, (double)atomic_load(&c->tx[j].drain_bps));
}

/* Chunk k of r for stream h's cursor, and the request off the queue once
 * every chunk is taken.  Caller holds q_lock. */
static size_t deal(struct tcp_send_comm *c, struct tcp_send_req *r, int h) {
  size_t k = r->next[h];
  r->next[h] += (uint32_t)c->base.nstreams;
  if (--r->chunks_left == 0) collx_list_del(&r->qnode);
  return k;
}

/* The oldest chunk of the oldest send, whichever stream it is at home
 * on.  Caller holds q_lock. */
static int pick_next(struct tcp_send_comm *c, struct tcp_send_req **rp, size_t *kp) {
  if (collx_list_empty(&c->queue)) return 0;
  struct tcp_send_req *r = COLLX_CONTAINER_OF(c->queue.next, struct tcp_send_req, qnode);
  int h = 0;
  for (int i = 1; i < c->base.nstreams; i++)
    if (r->next[i] < r->next[h]) h = i;
  *rp = r;
  *kp = deal(c, r, h);
  return 1;
}

/* Failover: a chunk to write again, first of all (its send waits for
 * it).  Caller holds q_lock. */
static int pick_redo(struct tcp_send_comm *c, struct tcp_send_req **rp, size_t *kp) {
  struct collx_list *pos;
  for (pos = c->queue.next; pos != &c->queue; pos = pos->next) {
    struct tcp_send_req *r = COLLX_CONTAINER_OF(pos, struct tcp_send_req, qnode);
    if (!r->redo_len) continue;
    *rp = r;
    *kp = r->redo[--r->redo_len];
    if (--r->chunks_left == 0) collx_list_del(&r->qnode);
    return 1;
  }
  return 0;
}

/* A slow stream's chunk: its own next chunk of the youngest send that has
 * one (the others have the longest to go before in-order completion waits
 * on it), never another stream's.  Without failover nothing takes a chunk
 * it holds up off it, so it takes one only if it drains that too within
 * the budget; `queued`: what its socket holds.  Caller holds q_lock. */
static int pick_slow(struct tcp_send_comm *c, int j, uint64_t queued, struct tcp_send_req **rp, size_t *kp) {
  double bps = (double)atomic_load(&c->tx[j].drain_bps);
  for (struct collx_list *pos = c->queue.prev; pos != &c->queue; pos = pos->prev) {
    struct tcp_send_req *r = COLLX_CONTAINER_OF(pos, struct tcp_send_req, qnode);
    if (r->next[j] >= r->nchunks) continue;
    if (!c->base.failover && !pace_may_take(queued + r->chunk, bps)) return 0;
    *rp = r;
    *kp = deal(c, r, j);
    return 1;
  }
  return 0;
}

/* The new chunk stream j writes next.  On one NIC: the oldest, so that
 * whichever stream is free carries it.  On a merged device: the oldest at
 * home on j, else the oldest at home on a stream that is busy, whose
 * socket is full or that is slow, so that equal members carry equal
 * shares of every message whichever thread of the pool reaches its stream
 * first, and a slow member's chunks go to the others (pick_slow for its
 * own).  0 when there is none.  `queued`: what a slow j's socket holds.
 * Caller holds q_lock. */
static int pick_chunk(struct tcp_send_comm *c, int j, uint64_t queued, struct tcp_send_req **rp, size_t *kp) {
  if (!c->merged) return pick_next(c, rp, kp);
  if (stream_slow(c, j)) return pick_slow(c, j, queued, rp, kp);
  struct collx_list *pos;
  for (pos = c->queue.next; pos != &c->queue; pos = pos->next) {
    struct tcp_send_req *r = COLLX_CONTAINER_OF(pos, struct tcp_send_req, qnode);
    if (r->next[j] < r->nchunks) {
      *rp = r;
      *kp = deal(c, r, j);
      return 1;
    }
  }
  for (pos = c->queue.next; pos != &c->queue; pos = pos->next) {
    struct tcp_send_req *r = COLLX_CONTAINER_OF(pos, struct tcp_send_req, qnode);
    for (int h = 0; h < c->base.nstreams; h++) {
      if (h == j || r->next[h] >= r->nchunks || stream_ready(c, h)) continue;
      *rp = r;
      *kp = deal(c, r, h);
      return 1;
    }
  }
  return 0;
}

/* ---- failover: what a lost stream takes back ----------------------------- */

static int sent_stale(const struct tcp_sent_chunk *e) {
  return atomic_load(&e->req->await) != (1ull << 32 | e->seq);
}

/* Remember that stream t carries chunk k of r, which ends at byte `end`
 * of the stream, dropping the entries of sends confirmed since.  0, or -1
 * out of memory (the chunk is not taken).  Caller holds the stream's lock
 * and q_lock. */
static int log_chunk(struct tcp_send_comm *c, struct tcp_send_stream *t, struct tcp_send_req *r, size_t k,
                     uint64_t end) {
  while (t->log_head < t->log_len && sent_stale(&t->log[t->log_head])) t->log_head++;
  if (t->log_head == t->log_len) t->log_head = t->log_len = 0;
  if (t->log_len == t->log_cap && t->log_head > 0) {
    memmove(t->log, t->log + t->log_head, (t->log_len - t->log_head) * sizeof *t->log);
    t->log_len -= t->log_head;
    t->log_head = 0;
  }
  if (t->log_len == t->log_cap) {
    uint32_t cap = t->log_cap ? t->log_cap * 2 : 16;
    struct tcp_sent_chunk *log = realloc(t->log, cap * sizeof *log);
    if (!log) {
      COLLX_WARN("send to %s on device %s: out of memory for the failover log", c->base.peer, c->base.devname);
      return -1;
    }
    t->log = log;
    t->log_cap = cap;
  }
  t->log[t->log_len++] =
      (struct tcp_sent_chunk){.req = r, .seq = r->base.seq, .k = (uint32_t)k, .end = end, .at = tcp_now()};
  return 0;
}

/* Queue chunk k of r to be written again.  Caller holds q_lock.  0, or -1
 * out of memory (after failing the comm). */
static int redo_add(struct tcp_send_comm *c, struct tcp_send_req *r, uint32_t k) {
  if (r->redo_len == r->redo_cap) {
    uint32_t cap = r->redo_cap ? r->redo_cap * 2 : 8;
    uint32_t *redo = realloc(r->redo, cap * sizeof *redo);
    if (!redo) {
      tcp_comm_fail(&c->base, ncclSystemError, "out of memory for chunks to send again");
      return -1;
    }
    r->redo = redo;
    r->redo_cap = cap;
  }
  r->redo[r->redo_len++] = k;
  r->chunks_left++;
  if (collx_list_empty(&r->qnode)) collx_list_add_tail(&c->queue, &r->qnode);
  return 0;
}

/* ---- failover: no chunk left behind on a slow stream ---------------------- */

/* A copy of the oldest chunk that stream h carries, has not got through
 * (its socket still holds it: `outq` of the `wrote` bytes) and nobody
 * copied yet, for another stream to write; `late`: only one taken
 * PACE_LATE_S before `now` or earlier.  Caller holds q_lock. */
static int pick_left_behind(struct tcp_send_comm *c, int h, uint64_t wrote, uint64_t outq, int late, double now,
                            struct tcp_send_req **rp, size_t *kp) {
  struct tcp_send_stream *t = &c->tx[h];
  for (uint32_t i = t->log_head; i < t->log_len; i++) {
    struct tcp_sent_chunk *e = &t->log[i];
    if (late && !pace_late(e->at, now)) return 0; /* the log is oldest first */
    if (e->dup || sent_stale(e) || pace_through(wrote, outq, e->end)) continue;
    e->dup = 1;
    *rp = e->req;
    *kp = e->k;
    atomic_store(&e->req->dup_taken, 1);
    return 1;
  }
  return 0;
}

/* Stream j, neither slow nor stuck, takes a copy of a chunk waiting on a
 * slow or stuck stream (failover: the receiver drops whichever copy comes
 * second): when j is idle, any such chunk; before its new work (`late`),
 * one that has waited PACE_LATE_S.  The others' sockets are asked what
 * they still hold before q_lock is taken; their byte counts are read
 * first, so that a write between the two makes a chunk look waiting,
 * never through.  Caller holds s->lock of j and q_lock (released and
 * taken again here). */
static int pick_dup(struct tcp_send_comm *c, int j, int late, struct tcp_send_req **rp, size_t *kp) {
  uint64_t wrote[TCP_MAX_STREAMS], outq[TCP_MAX_STREAMS];
  unsigned behind = 0;
  if (!c->base.failover || stream_behind(c, j)) return 0;
  for (int h = 0; h < c->base.nstreams; h++)
    if (h != j && stream_behind(c, h) && !tcp_stream_lost(&c->base, h)) behind |= 1u << h;
  if (!behind) return 0;
  pthread_mutex_unlock(&c->q_lock);
  double now = late ? tcp_now() : 0;
  for (int h = 0; h < c->base.nstreams; h++) {
    if (!(behind >> h & 1)) continue;
    wrote[h] = atomic_load(&c->tx[h].wrote);
    outq[h] = sock_outq(c->base.streams[h].fd);
  }
  pthread_mutex_lock(&c->q_lock);
  for (int h = 0; h < c->base.nstreams; h++)
    if ((behind >> h & 1) && pick_left_behind(c, h, wrote[h], outq[h], late, now, rp, kp)) return 1;
  return 0;
}

/* Stream j lets go of its chunk of r, written or given up: the last
 * writer to go lets r complete, so the profiler's record goes first. */
static void writer_leaves(struct tcp_send_req *r, int j) {
  if (tcp_req_watched(&r->base)) tcp_parts_let_go(&r->parts, j);
  atomic_fetch_sub_explicit(&r->writers, 1, memory_order_release);
}

/* A stream starts afresh: what it carried has been taken back (a lost
 * stream, and one with a new socket, rejoin.c).  Caller holds s->lock. */
static void send_stream_reset(struct tcp_stream *s) {
  struct tcp_send_comm *c = send_comm_of(s->comm);
  struct tcp_send_stream *t = &c->tx[s->index];
  if (t->req && !t->orphan) writer_leaves(t->req, s->index);
  t->req = NULL;
  t->dup = t->orphan = 0;
  t->done = 0;
  t->hb_active = 0;
  atomic_store(&t->stuck, 0);
  pthread_mutex_lock(&c->q_lock);
  t->log_head = t->log_len = 0;
  pthread_mutex_unlock(&c->q_lock);
  atomic_store(&t->wrote, 0);
  atomic_store(&t->busy, 0);
}

/* The chunk a lost stream was in the middle of writing, for a send the
 * receiver has confirmed since (a copy of it came whole on another
 * stream): it is not in the log to go out again, so it counts as written
 * here, or the send would wait for it for ever.  Caller holds the
 * stream's lock and q_lock, where DONE clears `await`. */
static void writing_settle(struct tcp_send_stream *t) {
  if (!t->req || t->dup || t->orphan) return;
  if (atomic_load(&t->req->await) != (1ull << 32 | t->hdr.seq))
    atomic_fetch_add_explicit(&t->req->chunks_done, 1, memory_order_release);
}

/* The chunks lost stream s carried for sends still unconfirmed go back to
 * the queue: those written whole no longer count as written, the one in
 * the middle of its write never did.  Caller holds s->lock. */
static unsigned stream_take_back(struct tcp_send_comm *c, struct tcp_stream *s) {
  struct tcp_send_stream *t = &c->tx[s->index];
  unsigned n = 0;
  pthread_mutex_lock(&c->q_lock);
  for (uint32_t i = t->log_head; i < t->log_len; i++) {
    struct tcp_sent_chunk *e = &t->log[i];
    if (sent_stale(e)) continue;
    int writing = t->req == e->req && !t->dup && !t->orphan && t->hdr.offset == (uint64_t)e->k * e->req->chunk;
    if (!writing) atomic_fetch_sub_explicit(&e->req->chunks_done, 1, memory_order_relaxed);
    if (redo_add(c, e->req, e->k) != 0) break;
    n++;
  }
  writing_settle(t);
  pthread_mutex_unlock(&c->q_lock);
  send_stream_reset(s);
  return n;
}

/* The receiver has stopped reading the streams it acknowledged (LOST_ACK)
 * and forgotten their partial chunks: their chunks go out again on the
 * streams left. */
static void chunks_take_back(struct tcp_send_comm *c) {
  unsigned mask = atomic_exchange(&c->lost_acked, 0) & atomic_load(&c->base.lost), n = 0;
  for (int i = 0; i < c->base.nstreams; i++) {
    if (!(mask >> i & 1)) continue;
    struct tcp_stream *s = &c->base.streams[i];
    pthread_mutex_lock(&s->lock);
    n += stream_take_back(c, s);
    pthread_mutex_unlock(&s->lock);
  }
  COLLX_INFO(COLLX_LOG_NET, "send connection to %s on device %s: the receiver has let go of streams 0x%x; "
             "%u chunks of them go out again", c->base.peer, c->base.devname, mask, n);
  tcp_stats_resent(&c->base, n);
  if (!tcp_caller_progress()) tcp_progress->kick(&c->base);
}

/* Stream j failed (io).  With failover its path is given up and the
 * receiver is told on a stream left (send_step); otherwise the comm
 * fails. */
static void stream_failed(struct tcp_send_comm *c, int j, const char *why) {
  if (!c->base.failover) {
    tcp_comm_fail(&c->base, ncclRemoteError, why);
    return;
  }
  unsigned newly = tcp_path_lose(&c->base, j, why);
  if (!newly) return;
  atomic_fetch_or(&c->notice_pending, newly);
  if (!tcp_caller_progress()) tcp_progress->kick(&c->base);
}

void tcp_send_paths_down(struct tcp_comm_base *b, unsigned paths, const char *why) {
  for (int p = 0; p < b->npaths && p < b->nstreams; p++)
    if (paths >> p & 1) stream_failed(send_comm_of(b), p, why);
}

/* The watchdog's look at each stream's TCP state: bytes in flight that the
 * peer's host stopped acknowledging mean the path is dead. */
static void streams_check(struct tcp_send_comm *c, double now) {
  char why[64];
  snprintf(why, sizeof why, "no acknowledgement for %d ms", tcp_cfg.failover_ms);
  unsigned behind = 0;
  for (int i = 0; i < c->base.nstreams; i++) {
    struct tcp_stream *s = &c->base.streams[i];
    if (tcp_stream_lost(&c->base, i)) continue;
    int stall_ms = sock_stall_ms(s->fd, &s->stall, now);
    if (stall_ms >= tcp_cfg.failover_ms) {
      stream_failed(c, i, why);
      continue;
    }
    atomic_store(&c->tx[i].stuck, stall_ms >= PACE_STUCK_MS);
    if (stream_behind(c, i)) behind |= 1u << i;
  }
  /* Busy streams look for late chunks on these before their new work,
   * idle ones once kicked. */
  atomic_store(&c->behind, behind);
  if (behind && !tcp_caller_progress()) tcp_progress->kick(&c->base);
}

/* A control socket given up alone, here or at the receiver (CTRL_GONE),
 * takes its path down with it, so that the path comes back whole
 * (tcp_ctrl_alone). */
static void paths_of_ctrl_gone(struct tcp_send_comm *c, double now) {
  unsigned mine = tcp_ctrl_alone(&c->base, now), theirs = atomic_exchange(&c->ctrl_gone, 0);
  for (int p = 0; p < 2 && p < c->base.npaths; p++) {
    /* The receiver judged by its view of the streams; the last path in
     * use here stays, whatever it asked. */
    if (!((mine | theirs) >> p & 1) || !tcp_path_spared(&c->base, p)) continue;
    stream_failed(c, p, mine >> p & 1 ? "its control socket was given up while its streams were in use"
                                       : "the receiver gave up its control socket on it");
  }
}

/* ---- a merged device: how fast each stream drains --------------------------- */

/* A look at how much stream i drained since the last. */
static void stream_rate_sample(struct tcp_send_comm *c, int i, double now) {
  struct tcp_send_stream *t = &c->tx[i];
  uint64_t acked = 0, busy_us = 0;
  if (sock_drained(c->base.streams[i].fd, &acked, &busy_us) != 0) return;
  if (pace_rate_add(&t->rate, acked, busy_us, now)) atomic_store(&t->drain_bps, (uint64_t)t->rate.bps);
}

/* A member much slower than its siblings is named once: its rate against
 * the fastest's (by busy time, what pacing goes by; pace_degraded says why
 * the WARN asks more). */
static void slow_warn(struct tcp_send_comm *c, int i, double fastest) {
  int p = i % c->base.npaths;
  if (c->slow_warned >> p & 1) return;
  c->slow_warned |= 1u << p;
  COLLX_WARN("send connection to %s on device %s: member %s (path %d) drains only %.2f MB/s against %.1f MB/s "
             "for the fastest, a degraded NIC?  It is given only what it drains in %.0f ms%s",
             c->base.peer, c->base.devname, tcp_path_name(&c->base, p), p, c->tx[i].rate.bps / 1e6, fastest / 1e6,
             PACE_BUDGET_S * 1e3,
             c->base.failover ? ", and chunks left waiting on it go out again on the others"
                              : "");
}

/* The watchdog's look at how fast each stream drains: which are slow
 * beside the fastest (pace.h), and which of those to name as degraded. */
static void streams_pace(struct tcp_send_comm *c, double now) {
  double fastest = 0, most_wall = 0;
  for (int i = 0; i < c->base.nstreams; i++) {
    if (tcp_stream_lost(&c->base, i)) continue;
    stream_rate_sample(c, i, now);
    const struct pace_rate *r = &c->tx[i].rate;
    if (r->samples < PACE_MIN_SAMPLES) continue;
    if (r->bps > fastest) fastest = r->bps;
    if (r->wall_bps > most_wall) most_wall = r->wall_bps;
  }
  for (int i = 0; i < c->base.nstreams; i++) {
    const struct pace_rate *r = &c->tx[i].rate;
    int slow = !tcp_stream_lost(&c->base, i) && r->samples >= PACE_MIN_SAMPLES && pace_slow(r->bps, fastest);
    atomic_store(&c->tx[i].slow, slow);
    if (slow && pace_degraded(r, fastest, most_wall)) slow_warn(c, i, fastest);
  }
}

/* The watchdog's part in a path coming back (rejoin.c): take the
 * receiver's offers, connect, and once the receiver has the new sockets in
 * place (REJOINED) write on them.  Only streams whose chunks were taken
 * back are swapped. */
static void paths_rejoin(struct tcp_send_comm *c, double now) {
  pthread_mutex_lock(&c->rejoin_lock);
  for (int p = 0; p < COLLX_MAX_MEMBERS; p++)
    if (c->rejoin_port[p]) {
      tcp_rejoin_offer(&c->base, p, c->rejoin_port[p], c->rejoin_token);
      c->rejoin_port[p] = 0;
    }
  pthread_mutex_unlock(&c->rejoin_lock);
  unsigned ready = tcp_rejoin_connect(&c->base, now);
  /* A control socket through is written at once: the receiver reads it
   * only once it has taken it, and one it refused fails a write. */
  tcp_rejoin_ctrl(&c->base);
  unsigned asked = atomic_exchange(&c->rejoined, 0);
  unsigned now_in = asked & ready & ~atomic_load(&c->lost_acked);
  if (asked & ~now_in) atomic_fetch_or(&c->rejoined, asked & ~now_in);
  if (!now_in) return;
  tcp_rejoin_swap(&c->base, now_in);
  if (!tcp_caller_progress()) tcp_progress->kick(&c->base);
}

/* Take a chunk into stream j: a new one, else (failover) a copy of one
 * left waiting on a slow stream.  0 when none is for it.  Caller holds
 * s->lock. */
static int take_chunk(struct tcp_send_comm *c, struct tcp_send_stream *t, int j) {
  struct tcp_send_req *r = NULL;
  size_t k = 0;
  int dup = 0;
  uint64_t queued = 0;
  if (c->merged && !stream_has_room(c, j, &queued)) return 0;
  pthread_mutex_lock(&c->q_lock);
  /* Chunks of a lost stream first, then copies of chunks left waiting too
   * long: sends wait on both. */
  int got = c->base.failover && pick_redo(c, &r, &k);
  if (!got && c->merged && atomic_load_explicit(&c->behind, memory_order_relaxed) & ~(1u << j))
    got = dup = pick_dup(c, j, 1, &r, &k);
  if (!got) got = pick_chunk(c, j, queued, &r, &k);
  if (!got && c->merged) got = dup = pick_dup(c, j, 0, &r, &k);
  if (got && c->base.failover && !dup) {
    uint64_t len = r->size - (uint64_t)k * r->chunk < r->chunk ? r->size - (uint64_t)k * r->chunk : r->chunk;
    if (log_chunk(c, t, r, k, atomic_load(&t->wrote) + sizeof t->hdr + len) != 0) {
      redo_add(c, r, (uint32_t)k);
      got = 0;
    }
  }
  if (got) {
    /* Under q_lock, where DONE clears `await`: a send seen confirmed
     * already counts this writer. */
    atomic_fetch_add(&r->writers, 1);
    atomic_store(&t->busy, 1);
    if (tcp_req_watched(&r->base)) tcp_parts_take(&r->parts, j);
  }
  pthread_mutex_unlock(&c->q_lock);
  if (!got) return 0;

  uint64_t off = (uint64_t)k * r->chunk;
  t->req = r;
  t->dup = dup;
  t->orphan = 0;
  t->payload = r->data + off;
  t->done = 0;
  t->hdr = (struct wire_chunk){
      .magic = WIRE_MAGIC,
      .idx = (uint8_t)r->idx,
      .seq = r->base.seq,
      .total = r->size,
      .offset = off,
      .len = r->size - off < r->chunk ? r->size - off : r->chunk,
      .flags = r->lazy_done ? WIRE_CHUNK_LAZY_DONE : 0,
  };
  return 1;
}

/* Write as much of the stream's current chunk as the socket takes, `max`
 * bytes at most: AGAIN when the socket is full or `max` is reached first. */
static enum sock_io write_chunk(struct tcp_stream *s, struct tcp_send_stream *t, size_t max) {
  size_t before = t->done, total = sizeof t->hdr + t->hdr.len;
  size_t end = max < total - before ? before + max : total;
  enum sock_io io = sock_send_two_upto(s->fd, &t->hdr, sizeof t->hdr, t->payload, t->hdr.len, &t->done, end);
  atomic_fetch_add_explicit(&t->wrote, t->done - before, memory_order_relaxed);
  atomic_store_explicit(&t->full, io == SOCK_IO_AGAIN, memory_order_relaxed);
  if (io == SOCK_IO_DONE && t->done < total) return SOCK_IO_AGAIN;
  if (io != SOCK_IO_DONE) return io;
  if (!t->orphan) {
    if (!t->dup) atomic_fetch_add_explicit(&t->req->chunks_done, 1, memory_order_release);
    writer_leaves(t->req, s->index);
  }
  t->req = NULL;
  atomic_fetch_add_explicit(&s->chunks, 1, memory_order_relaxed);
  atomic_store(&t->busy, 0);
  return SOCK_IO_DONE;
}

/* Write as much of the stream's header between chunks (a heartbeat or a
 * LOST notice) as the socket takes. */
static enum sock_io write_heartbeat(struct tcp_stream *s, struct tcp_send_stream *t) {
  size_t before = t->hb_done;
  enum sock_io io = sock_send_some(s->fd, &t->hb, sizeof t->hb, &t->hb_done);
  atomic_fetch_add_explicit(&t->wrote, t->hb_done - before, memory_order_relaxed);
  if (io != SOCK_IO_AGAIN) t->hb_active = 0;
  return io;
}

/* Failover: tell the receiver, on this stream, which streams are given
 * up, before any chunk goes out again.  Caller holds s->lock. */
static void notice_start(struct tcp_send_comm *c, struct tcp_send_stream *t) {
  unsigned mask = atomic_exchange(&c->notice_pending, 0);
  if (!mask) return;
  t->hb = (struct wire_chunk){.magic = WIRE_MAGIC, .flags = WIRE_CHUNK_LOST, .total = mask};
  t->hb_done = 0;
  t->hb_active = 1;
}

/* Write as much of the header between chunks as the socket takes, for
 * whichever thread writes it (a stream's pass, the watchdog's heartbeat).
 * A heartbeat's failure is left to the chunks to judge; a LOST notice's
 * goes back to be written on another stream, and this stream's path is
 * given up.  Caller holds s->lock. */
static enum sock_io between_write(struct tcp_send_comm *c, struct tcp_stream *s, struct tcp_send_stream *t) {
  enum sock_io io = write_heartbeat(s, t);
  if (io == SOCK_IO_AGAIN || io == SOCK_IO_DONE || t->hb.flags != WIRE_CHUNK_LOST) return io;
  atomic_fetch_or(&c->notice_pending, (unsigned)t->hb.total);
  stream_failed(c, s->index, tcp_io_reason(io));
  return io;
}

/* The header between chunks: 0 once written (or none, or a heartbeat
 * that failed), -1 while it is not (the socket is full, or a notice
 * failed). */
static int send_between(struct tcp_send_comm *c, struct tcp_stream *s, struct tcp_send_stream *t) {
  if (!t->hb_active && !t->req && atomic_load_explicit(&c->notice_pending, memory_order_relaxed))
    notice_start(c, t);
  if (!t->hb_active) return 0;
  enum sock_io io = between_write(c, s, t);
  if (io == SOCK_IO_AGAIN) return -1;
  return io == SOCK_IO_DONE || t->hb.flags != WIRE_CHUNK_LOST ? 0 : -1;
}

/* The first stream not given up (failover); 0 when all are (the comm has
 * failed then). */
static int first_live_stream(const struct tcp_send_comm *c) {
  for (int i = 0; i < c->base.nstreams; i++)
    if (!tcp_stream_lost(&c->base, i)) return i;
  return 0;
}

/* A heartbeat on the first stream, between chunks (a stream in the middle
 * of one shows life by its payload), so that it does not queue behind an
 * early eager message the receiver leaves unread on the control socket. */
static void stream_heartbeat(struct tcp_send_comm *c, double now) {
  int first = first_live_stream(c);
  struct tcp_stream *s = &c->base.streams[first];
  struct tcp_send_stream *t = &c->tx[first];
  if (now - c->last_stream_hb < TCP_HEARTBEAT_INTERVAL_S || pthread_mutex_trylock(&s->lock) != 0) return;
  if (!t->hb_active && !t->req) {
    t->hb = (struct wire_chunk){.magic = WIRE_MAGIC, .flags = WIRE_CHUNK_HEARTBEAT};
    t->hb_done = 0;
    t->hb_active = 1;
  }
  if (t->hb_active) between_write(c, s, t);
  c->last_stream_hb = now;
  pthread_mutex_unlock(&s->lock);
}

/* One chunk's worth of sending on a stream, `max` bytes at most: 1 if a
 * chunk went out whole, 0 when the queue is empty, the socket is full,
 * `max` ran out or the comm has failed.  Caller holds s->lock. */
static int send_step(struct tcp_stream *s, size_t max) {
  struct tcp_send_comm *c = send_comm_of(s->comm);
  struct tcp_send_stream *t = &c->tx[s->index];
  if (tcp_comm_failed(&c->base) || tcp_stream_lost(&c->base, s->index)) return 0;
  if (send_between(c, s, t) != 0) return 0;
  if (!t->req && !take_chunk(c, t, s->index)) return 0;
  enum sock_io io = write_chunk(s, t, max);
  if (io == SOCK_IO_DONE) return 1;
  if (io != SOCK_IO_AGAIN) stream_failed(c, s->index, tcp_io_reason(io));
  return 0;
}

/* Write queued chunks until the queue is empty, the socket is full or
 * `max_chunks` went out (then it asks to be served again).  Caller holds
 * s->lock. */
static enum tcp_want send_pump(struct tcp_stream *s, struct tcp_pass *pass, size_t max_chunks) {
  size_t sent = 0;
  while (sent < max_chunks && send_step(s, SIZE_MAX)) sent++;
  pass->moved = sent > 0;
  if (tcp_comm_failed(s->comm) || tcp_stream_lost(s->comm, s->index)) return TCP_WANT_NOTHING;
  if (send_comm_of(s->comm)->tx[s->index].req) return TCP_WANT_WRITE;
  return sent == max_chunks ? TCP_WANT_AGAIN : TCP_WANT_WORK;
}

static int send_serve(struct tcp_stream *s, struct tcp_pass *pass) {
  if (atomic_load(&s->comm->stop)) return TCP_WANT_NOTHING;
  pthread_mutex_lock(&s->lock);
  /* Chunks up to TCP_PASS_BYTES a pass, as a receive pass reads: a thread
   * that turned to its other streams after every chunk went through its
   * loop once a chunk and lost all-reduce speed under NCCL (bench/NOTES.md,
   * attempt 30), and a pass no longer than that keeps the thread's other
   * streams from waiting long. */
  size_t chunks = TCP_PASS_BYTES / tcp_cfg.chunk_size;
  enum tcp_want want = send_pump(s, pass, chunks ? chunks : 1);
  pthread_mutex_unlock(&s->lock);
  return want;
}

/* Let the calling thread move what it can without blocking. */
static void pump_inline(struct tcp_send_comm *c) {
  for (int i = 0; i < c->base.nstreams; i++) {
    struct tcp_stream *s = &c->base.streams[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    struct tcp_pass pass = {0};
    send_pump(s, &pass, SIZE_MAX);
    pthread_mutex_unlock(&s->lock);
  }
}

/* COLLX_PROGRESS=caller: no progress thread drives the comm, so a call
 * moves all of its requests, not only the one tested, until the sockets
 * are full or `budget` bytes went out: NCCL testing only its oldest
 * request still keeps the rest moving.  Chunks go out one per stream in
 * turn, starting from a different stream each call, so that the streams
 * share the chunks (and a stream whose socket is full simply takes
 * fewer). */
static void pump_streams(struct tcp_send_comm *c, int first, size_t budget) {
  int n = c->base.nstreams;
  int sent;
  size_t wrote = 0;
  do {
    sent = 0;
    for (int k = 0; k < n && wrote < budget; k++) {
      int i = (first + k) % n;
      struct tcp_stream *s = &c->base.streams[i];
      if (pthread_mutex_trylock(&s->lock) != 0) continue;
      uint64_t before = atomic_load_explicit(&c->tx[i].wrote, memory_order_relaxed);
      sent |= send_step(s, budget - wrote);
      wrote += atomic_load_explicit(&c->tx[i].wrote, memory_order_relaxed) - before;
      pthread_mutex_unlock(&s->lock);
    }
  } while (sent && wrote < budget);
}

/* A call writes at most TCP_CALLER_PASS_BYTES: filling the empty socket
 * buffers of a path that came back took one test() 18 ms on the processor
 * (bench/NOTES.md, entry 61). */
static void caller_pump(struct tcp_send_comm *c) {
  pump_streams(c, (int)(c->pump_turn++ % (unsigned)c->base.nstreams), TCP_CALLER_PASS_BYTES);
}

/* The watchdog's tick: heartbeats on the control socket and a stream.
 * With caller progress and failover it also writes what a loss left (a
 * LOST notice, chunks taken back): every send may be done by then (kept
 * copies), so no test() of the caller's would. */
static void send_watch(struct tcp_comm_base *b, double now) {
  struct tcp_send_comm *c = send_comm_of(b);
  tcp_ctrl_heartbeat(&b->ctrl, now);
  if (c->base.failover && tcp_caller_progress() && atomic_load(&c->base.lost)) pump_streams(c, 0, SIZE_MAX);
  stream_heartbeat(c, now);
  if (c->merged) streams_pace(c, now);
  if (c->base.failover) {
    streams_check(c, now);
    paths_of_ctrl_gone(c, now);
    paths_rejoin(c, now);
  }
}

/* ---- requests ---------------------------------------------------------------- */

static struct tcp_send_req *req_alloc(struct tcp_send_comm *c) {
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++)
    if (c->reqs[i].base.state == REQ_FREE) {
      tcp_req_activate(&c->reqs[i].base);
      tcp_parts_reset(&c->reqs[i].parts);
      return &c->reqs[i];
    }
  return NULL;
}

/* Tell the receiver its buffer is too small, so that its request fails
 * rather than waits.  Best effort: the comm is unusable afterwards anyway. */
static void send_truncation(struct tcp_send_comm *c, uint32_t seq, int idx, size_t size) {
  int first = first_live_stream(c);
  struct tcp_stream *s = &c->base.streams[first];
  struct tcp_send_stream *t = &c->tx[first];
  pthread_mutex_lock(&s->lock);
  /* Finish the heartbeat and the chunk in progress so the header lands
   * on a boundary. */
  while (t->hb_active && write_heartbeat(s, t) == SOCK_IO_AGAIN) {
    struct pollfd p = {.fd = s->fd, .events = POLLOUT};
    if (poll(&p, 1, 1000) <= 0) break;
  }
  while (!t->hb_active && t->req && write_chunk(s, t, SIZE_MAX) == SOCK_IO_AGAIN) {
    struct pollfd p = {.fd = s->fd, .events = POLLOUT};
    if (poll(&p, 1, 1000) <= 0) break;
  }
  if (!t->req && !t->hb_active) {
    struct wire_chunk h = {.magic = WIRE_MAGIC, .idx = (uint8_t)idx,
                           .flags = WIRE_CHUNK_TRUNCATED, .seq = seq, .total = size};
    size_t done = 0;
    while (sock_send_some(s->fd, &h, sizeof h, &done) == SOCK_IO_AGAIN) {
      struct pollfd p = {.fd = s->fd, .events = POLLOUT};
      if (poll(&p, 1, 1000) <= 0) break;
    }
  }
  pthread_mutex_unlock(&s->lock);
}

/* isend has no CTS for this message yet: NCCL will ask again.  Counted, so
 * that the close-time statistics say whether senders wait for receivers. */
static ncclResult_t send_not_yet(struct tcp_send_comm *c) {
  tcp_send_want_cts(c);
  c->send_stats.isend_retries++;
  if (!c->send_stats.waiting) c->send_stats.sends_waited++;
  c->send_stats.waiting = 1;
  return ncclSuccess;
}

/* Send r on the control socket: to receive entry seq/idx when matched
 * (its CTS claimed), else early, matched by tag against the first receive
 * from the sender's cursor on. */
static void eager_post(struct tcp_send_comm *c, struct tcp_send_req *r, int tag, int matched) {
  if (!matched) {
    r->base.seq = match_early_add(&c->match_tx, tag, r->size); /* the first receive it may belong to */
    r->idx = 0;
    c->send_stats.early++;
  }
  c->send_stats.eager++;
  COLLX_TL(COLLX_TL_ISEND, c->base.tl_key, (uint32_t)c->send_stats.eager);
  r->eager = 1;
  r->nchunks = 1;
  atomic_store(&r->chunks_done, 0);
  r->eager_hdr = (struct wire_eager){.magic = WIRE_MAGIC, .type = WIRE_EAGER,
                                     .flags = matched ? WIRE_EAGER_MATCHED : 0, .seq = r->base.seq,
                                     .tag = tag, .idx = (uint8_t)r->idx, .size = r->size};
  tcp_send_eager_queue(c, r);
}

static struct tcp_send_req *kept_find(struct tcp_send_comm *c);

/* Queue a message matched to receive entry seq/idx for the streams. */
static void chunks_post(struct tcp_send_comm *c, struct tcp_send_req *r) {
  r->eager = 0;
  r->chunk = collx_stripe_chunk(r->size, c->base.nstreams, c->max_chunk);
  r->nchunks = collx_stripe_count(r->size, r->chunk);
  int n = c->base.nstreams;
  for (int h = 0; h < n; h++) r->next[h] = (uint32_t)((h - (int)(r->base.seq % (unsigned)n) + n) % n);
  r->chunks_left = r->nchunks;
  r->redo_len = 0;
  atomic_store(&r->chunks_done, 0);
  atomic_store(&r->writers, 0);
  atomic_store(&r->dup_taken, 0);
  atomic_store(&r->await, c->base.failover ? 1ull << 32 | r->base.seq : 0);
  pthread_mutex_lock(&c->q_lock);
  /* With a copy found now the send never waits for its DONE, so the
   * receiver may send that lazily (WIRE_CHUNK_LAZY_DONE). */
  r->keep = c->base.failover && r->size > 0 && r->size <= tcp_cfg.failover_copy ? kept_find(c) : NULL;
  r->lazy_done = r->keep != NULL;
  collx_list_add_tail(&c->queue, &r->qnode);
  pthread_mutex_unlock(&c->q_lock);
  if (tcp_caller_progress()) {
    caller_pump(c);
    return;
  }
  /* A small message is written here and now; wake the driver only for
   * what is left (a futex wake and a thread hop cost more than the write
   * itself). */
  if (r->size <= TCP_INLINE_MAX) pump_inline(c);
  pthread_mutex_lock(&c->q_lock);
  int left = !collx_list_empty(&c->queue);
  pthread_mutex_unlock(&c->q_lock);
  if (left) tcp_progress->kick(&c->base);
}

/* Read the control socket only when the CTS we need is not in yet, and
 * for a small send only once the early ones pile up: it can go early.
 * 0, or -1 when the comm has failed. */
static int cts_intake(struct tcp_send_comm *c, int eager) {
  int need_cursor = !eager || c->match_tx.early_len >= TCP_EAGER_LOG / 2;
  if (!need_cursor || (!c->match_tx.early_len && match_cts_ready(&c->match_tx))) return 0;
  send_drain(&c->base);
  tcp_send_eager_replay(c);
  return tcp_comm_failed(&c->base) ? -1 : 0;
}

/* Match the send to a receive entry if its CTS is in, and post it: on the
 * control socket when small, on the streams otherwise.  A small message
 * whose CTS is not in yet goes out early, matched later; a large one
 * waits: *out stays NULL and NCCL asks again. */
ncclResult_t tcp_isend(struct tcp_send_comm *c, void *data, size_t size, int tag, struct tcp_req **out) {
  *out = NULL;
  if (tcp_comm_failed(&c->base)) return tcp_comm_error(&c->base);
  int eager = size <= c->eager_max;
  if (cts_intake(c, eager) != 0) return tcp_comm_error(&c->base);
  struct tcp_send_req *r = req_alloc(c);
  if (!r) {
    COLLX_WARN("send to %s on device %s: more than %d requests outstanding", c->base.peer,
               c->base.devname, COLLX_MAX_REQUESTS);
    return ncclInvalidUsage;
  }
  r->data = data;
  r->size = size;
  int claim = 0;
  uint64_t cap = 0;
  /* While early sends wait for their CTS the cursor is not final: only
   * another early send may go. */
  if (!c->match_tx.early_len) claim = match_cts_claim(&c->match_tx, tag, &r->base.seq, &r->idx, &cap);
  if (claim > 0 && size > cap) {
    COLLX_WARN("message of %zu bytes to %s on device %s is larger than the receive buffer "
               "of %llu bytes posted for tag %d", size, c->base.peer, c->base.devname,
               (unsigned long long)cap, tag);
    uint32_t seq = r->base.seq;
    int idx = r->idx;
    tcp_req_retire(&r->base);
    send_truncation(c, seq, idx, size);
    return ncclInvalidUsage;
  }
  /* A tag of a later receive (claim < 0) waits, as does what has no room. */
  if (claim < 0 || (claim == 0 && !(eager && c->match_tx.early_len < TCP_EAGER_LOG))) {
    tcp_req_retire(&r->base);
    return send_not_yet(c);
  }
  c->send_stats.waiting = 0;
  c->base.stats.messages++;
  c->base.stats.bytes += size;
  tcp_stats_mirror(&c->base);
  *out = &r->base;
  if (eager)
    eager_post(c, r, tag, claim > 0);
  else
    chunks_post(c, r);
  return ncclSuccess;
}

/* ---- completion ---------------------------------------------------------------- */

static int send_written(struct tcp_send_req *r) {
  return atomic_load_explicit(&r->chunks_done, memory_order_acquire) == r->nchunks;
}

/* Written, with failover confirmed by the receiver, and no stream still
 * writing from its buffer.  `await` first: a copy taken before DONE came
 * counts among the writers by then (take_chunk). */
static int send_done(struct tcp_send_req *r) {
  return !atomic_load(&r->await) && atomic_load_explicit(&r->writers, memory_order_acquire) == 0 && send_written(r);
}

/* The receiver has every chunk of r (DONE) while streams still write
 * copies of some: what they still owe is copied aside, so that the send
 * completes now and they finish from the copy (the receiver drops it).
 * Bounded by a chunk a stream.  Streams busy this moment are left for the
 * next test. */
static void stragglers_adopt(struct tcp_send_comm *c, struct tcp_send_req *r) {
  for (int i = 0; i < c->base.nstreams; i++) {
    struct tcp_stream *s = &c->base.streams[i];
    struct tcp_send_stream *t = &c->tx[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    if (t->req == r && !t->orphan && t->hdr.len <= t->own_cap) {
      memcpy(t->own, t->payload, t->hdr.len);
    } else if (t->req == r && !t->orphan) {
      char *own = realloc(t->own, t->hdr.len);
      if (!own) {
        pthread_mutex_unlock(&s->lock);
        continue; /* it finishes from the buffer; the send waits for it */
      }
      t->own = own;
      t->own_cap = t->hdr.len;
      memcpy(t->own, t->payload, t->hdr.len);
    } else {
      pthread_mutex_unlock(&s->lock);
      continue;
    }
    t->payload = t->own;
    t->orphan = 1;
    if (!t->dup) atomic_fetch_add_explicit(&r->chunks_done, 1, memory_order_release);
    writer_leaves(r, i);
    pthread_mutex_unlock(&s->lock);
  }
}

/* An eager send is written by whoever tests it; a small striped send still
 * queued (its stream was busy) can be pushed by the caller. */
static void send_progress(struct tcp_send_comm *c, struct tcp_send_req *r) {
  if (r->eager) tcp_ctrl_pump(&c->base.ctrl);
  /* DONE records, and LOST_ACK records that free chunks stuck on a lost
   * stream. */
  if (c->base.failover && !r->eager &&
      (send_written(r) || atomic_load(&r->dup_taken) || atomic_load(&c->base.lost)))
    send_drain(&c->base);
  if (c->base.failover && !r->eager && !atomic_load(&r->await) && atomic_load(&r->writers))
    stragglers_adopt(c, r);
  if (tcp_caller_progress())
    caller_pump(c);
  else if (r->size <= TCP_INLINE_MAX && !r->eager)
    pump_inline(c);
}

/* ---- failover: small sends done once written, from a kept copy ------------ */

/* A kept copy that may take a new send: never used, or its own send is
 * confirmed and no stream writes it or is to write it again.  Caller
 * holds q_lock. */
static int kept_reusable(const struct tcp_send_req *k) {
  if (k->base.state == REQ_FREE) return 1;
  return !atomic_load(&k->await) && !atomic_load(&k->writers) && k->chunks_left == 0 &&
         collx_list_empty(&k->qnode);
}

/* While a kept copy is being filled, `await` holds this, which no DONE
 * names (their values are 1 << 32 | seq), so nobody else takes it. */
#define KEPT_FILLING 1ull

/* Whether r may be reported done now from a copy: written whole, waiting
 * only for DONE, and nothing of it being or to be written again.  Caller
 * holds q_lock. */
static int keep_eligible(struct tcp_send_req *r) {
  return atomic_load(&r->await) && !atomic_load(&r->writers) && r->chunks_left == 0 &&
         collx_list_empty(&r->qnode) && send_written(r);
}

/* A kept copy free for a send, marked as being filled; NULL when all are
 * in use.  Caller holds q_lock. */
static struct tcp_send_req *kept_find(struct tcp_send_comm *c) {
  if (!c->kept) c->kept = calloc(TCP_KEPT_SENDS, sizeof *c->kept);
  for (int i = 0; c->kept && i < TCP_KEPT_SENDS; i++) {
    struct tcp_send_req *k = &c->kept[i];
    if (!kept_reusable(k)) continue;
    if (k->base.state == REQ_FREE) collx_list_init(&k->qnode);
    k->base.state = REQ_ACTIVE;
    atomic_store(&k->await, KEPT_FILLING);
    return k;
  }
  return NULL;
}

/* r's kept copy, found when it was posted, or one free now if r may be
 * kept; NULL when none (r then waits for its DONE). */
static struct tcp_send_req *kept_reserve(struct tcp_send_comm *c, struct tcp_send_req *r) {
  if (r->keep) return r->keep;
  pthread_mutex_lock(&c->q_lock);
  struct tcp_send_req *k = keep_eligible(r) ? kept_find(c) : NULL;
  pthread_mutex_unlock(&c->q_lock);
  return k;
}

/* r no longer needs the copy found for it (confirmed first, or failed).
 * Caller holds q_lock. */
static void kept_release(struct tcp_send_req *r) {
  if (!r->keep) return;
  atomic_store(&r->keep->await, 0);
  r->keep = NULL;
}

/* The copy takes r's place: its identity, its DONE and the log entries
 * that would write its chunks again.  Caller holds q_lock. */
static void kept_take_over(struct tcp_send_comm *c, struct tcp_send_req *k, struct tcp_send_req *r) {
  k->base.magic = TCP_MAGIC_REQ;
  k->base.comm = &c->base;
  k->base.seq = r->base.seq;
  atomic_store(&k->base.error, 0);
  atomic_store(&k->base.watched, 0);
  k->data = k->copy;
  k->size = r->size;
  k->idx = r->idx;
  k->chunk = r->chunk;
  k->nchunks = r->nchunks;
  k->eager = 0;
  k->keep = NULL;
  k->lazy_done = 1;
  k->chunks_left = 0;
  k->redo_len = 0;
  atomic_store(&k->chunks_done, r->nchunks);
  atomic_store(&k->writers, 0);
  atomic_store(&k->dup_taken, atomic_load(&r->dup_taken));
  for (int h = 0; h < c->base.nstreams; h++) {
    struct tcp_send_stream *t = &c->tx[h];
    for (uint32_t i = t->log_head; i < t->log_len; i++)
      if (t->log[i].req == r && t->log[i].seq == r->base.seq) t->log[i].req = k;
  }
  atomic_store(&k->await, atomic_load(&r->await));
  atomic_store(&r->await, 0);
}

/* Failover: a small send written whole is reported done now rather than
 * a round trip later, its bytes kept aside until its DONE so that a lost
 * stream's chunks of it can still go out again (COLLX_FAILOVER_COPY).  The
 * copy is made outside q_lock (the buffer is the caller's until done),
 * then r is checked again.  1 when r is done. */
static int send_keep(struct tcp_send_comm *c, struct tcp_send_req *r) {
  if (!c->base.failover || r->eager || r->size == 0 || r->size > tcp_cfg.failover_copy || !send_written(r) ||
      !atomic_load(&r->await) || atomic_load(&r->writers))
    return 0; /* a copy found at the post waits for the next test, or goes with r (send_retire) */
  struct tcp_send_req *k = kept_reserve(c, r);
  if (!k) return 0;
  if (k->copy_cap < r->size) {
    char *copy = realloc(k->copy, r->size);
    if (copy) {
      k->copy = copy;
      k->copy_cap = r->size;
    }
  }
  int copied = k->copy_cap >= r->size;
  if (copied) memcpy(k->copy, r->data, r->size);
  pthread_mutex_lock(&c->q_lock);
  int kept = copied && keep_eligible(r);
  if (kept)
    kept_take_over(c, k, r);
  else
    atomic_store(&k->await, 0);
  r->keep = NULL;
  pthread_mutex_unlock(&c->q_lock);
  if (kept) c->send_stats.kept++;
  return kept;
}

static void send_retire(struct tcp_send_req *r) {
  if (r->keep) {
    struct tcp_send_comm *c = send_comm_of(r->base.comm);
    pthread_mutex_lock(&c->q_lock);
    kept_release(r);
    pthread_mutex_unlock(&c->q_lock);
  }
  atomic_store(&r->await, 0);
  tcp_req_retire(&r->base);
}

static ncclResult_t send_test(struct tcp_req *base, int *done, size_t *sizes) {
  struct tcp_send_req *r = send_req_of(base);
  struct tcp_send_comm *c = send_comm_of(base->comm);
  if (!send_done(r)) send_progress(c, r);
  if (!send_done(r)) send_keep(c, r);
  if (send_done(r)) {
    ncclResult_t res = (ncclResult_t)atomic_load(&base->error);
    if (sizes) sizes[0] = r->size;
    send_retire(r);
    if (res != ncclSuccess) return res;
    *done = 1;
    return ncclSuccess;
  }
  if (tcp_comm_failed(&c->base)) {
    send_retire(r);
    return tcp_comm_error(&c->base);
  }
  return ncclSuccess;
}

/* ---- lifetime ---------------------------------------------------------------- */

static void log_stats(const struct tcp_send_comm *c) {
  /* Chunks per stream: how the streams (and a merged device's members,
   * stream i on member i mod M) shared the bulk. */
  char per_stream[TCP_MAX_STREAMS * 21 + 1] = "";
  size_t at = 0;
  for (int i = 0; i < c->base.nstreams && at < sizeof per_stream; i++)
    at += (size_t)snprintf(per_stream + at, sizeof per_stream - at, "%s%llu", i ? "/" : "",
                           (unsigned long long)atomic_load_explicit(&c->base.streams[i].chunks, memory_order_relaxed));
  COLLX_INFO(COLLX_LOG_NET, "send connection to %s on device %s closed: %llu messages, %llu bytes; %llu sends "
             "found the receiver not ready at their first isend (%llu isend calls without a request); "
             "%llu eager, %llu of them before their CTS; %llu CTS_WANTED; %llu done once written from a kept "
             "copy (failover); chunks per stream %s",
             c->base.peer, c->base.devname, (unsigned long long)c->base.stats.messages,
             (unsigned long long)c->base.stats.bytes, (unsigned long long)c->send_stats.sends_waited,
             (unsigned long long)c->send_stats.isend_retries, (unsigned long long)c->send_stats.eager,
             (unsigned long long)c->send_stats.early, (unsigned long long)c->send_stats.cts_wanted,
             (unsigned long long)c->send_stats.kept, per_stream);
}

static int send_init(struct tcp_comm_base *b, const struct tcp_comm_sockets *sk) {
  struct tcp_send_comm *c = send_comm_of(b);
  c->max_chunk = sk->max_chunk;
  c->merged = sk->members > 1;
  c->eager_max = collx_eager_size(sk->members, NULL, 0);
  collx_list_init(&c->queue);
  collx_list_init(&c->eager_queue);
  pthread_mutex_init(&c->q_lock, NULL);
  pthread_mutex_init(&c->rejoin_lock, NULL);
  pthread_mutex_init(&c->eager_lock, NULL);
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++) {
    c->reqs[i].base.magic = TCP_MAGIC_REQ;
    c->reqs[i].base.comm = b;
    collx_list_init(&c->reqs[i].qnode);
  }
  return 0;
}

static void send_release(struct tcp_comm_base *b) {
  struct tcp_send_comm *c = send_comm_of(b);
  log_stats(c);
  pthread_mutex_destroy(&c->q_lock);
  pthread_mutex_destroy(&c->rejoin_lock);
  pthread_mutex_destroy(&c->eager_lock);
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++) {
    c->reqs[i].base.magic = TCP_MAGIC_DEAD;
    free(c->reqs[i].redo);
    c->reqs[i].redo = NULL;
  }
  for (int i = 0; c->kept && i < TCP_KEPT_SENDS; i++) {
    free(c->kept[i].redo);
    free(c->kept[i].copy);
  }
  free(c->kept);
  c->kept = NULL;
  for (int i = 0; i < c->base.nstreams; i++) {
    free(c->tx[i].log);
    c->tx[i].log = NULL;
    free(c->tx[i].own);
    c->tx[i].own = NULL;
  }
}

/* A send's one message: a part is left while a chunk waits in the queue. */
static struct tcp_parts *send_parts(struct tcp_req *base, int msg, int *rest) {
  struct tcp_send_req *r = (struct tcp_send_req *)base;
  struct tcp_send_comm *c = send_comm_of(base->comm);
  (void)msg;
  pthread_mutex_lock(&c->q_lock);
  *rest = !r->eager && r->chunks_left > 0;
  pthread_mutex_unlock(&c->q_lock);
  return &r->parts;
}

const struct tcp_comm_role tcp_send_role = {
    .name = "send",
    .sends = 1,
    .magic = TCP_MAGIC_SEND,
    .size = sizeof(struct tcp_send_comm),
    .ctrl = &tcp_send_ctrl_ops,
    .init = send_init,
    .release = send_release,
    .watch = send_watch,
    .drain = send_drain,
    .serve = send_serve,
    .stream_reset = send_stream_reset,
    .test = send_test,
    .parts = send_parts,
};
