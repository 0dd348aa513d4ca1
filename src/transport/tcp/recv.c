/*
 * The receive role: irecv, the data streams' reader, test, close.
 *
 * irecv publishes the receive by its sequence number and sends its CTS
 * (recv_ctrl.c).  Chunks arrive on whichever stream the sender's stream
 * took them to: a chunk header names its receive, entry and place, and the
 * reader checks it (recv_entry.c) before reading the payload straight into
 * the buffer.  The streams are read by the progress driver (progress.h);
 * with COLLX_INLINE_RECV a caller polling test() reads small chunks itself
 * when it gets there first, and with COLLX_PROGRESS=caller
 * the caller's test reads every stream.  Eager messages are read from the
 * control socket by test (recv_ctrl.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"
#include "progress.h"
#include "recv.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/timeline.h"

/* Bytes read beyond the current chunk into the staging buffer: the next
 * header and a small payload come in the same recv, while most of a large
 * payload goes straight to its receive buffer. */
#define TCP_RX_LOOKAHEAD 4096


static struct tcp_recv_comm *recv_comm_of(struct tcp_comm_base *b) { return (struct tcp_recv_comm *)b; }
static struct tcp_recv_req *recv_req_of(struct tcp_req *r) { return (struct tcp_recv_req *)r; }

/* ---- chunks from the data streams ------------------------------------------ */

static int stream_index(const struct tcp_recv_comm *c, const struct tcp_recv_stream *t) { return (int)(t - c->rx); }

/* The stream reads a chunk into r's buffers: r is not done before it lets
 * go. */
static void rx_hold(struct tcp_recv_comm *c, struct tcp_recv_stream *t, struct tcp_recv_req *r) {
  atomic_fetch_add_explicit(&r->readers, 1, memory_order_relaxed);
  t->req = r;
  if (tcp_req_watched(&r->base) && r->parts) tcp_parts_take(&r->parts[t->hdr.idx], stream_index(c, t));
}

static void rx_let_go(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  struct tcp_recv_req *r = t->req;
  t->req = NULL;
  free(t->bounce);
  t->bounce = NULL;
  int i = stream_index(c, t);
  if (c->owners && c->owners[i].req) tcp_entry_disown(c, i); /* let go unfinished */
  if (tcp_req_watched(&r->base) && r->parts) tcp_parts_let_go(&r->parts[t->hdr.idx], stream_index(c, t));
  atomic_fetch_sub_explicit(&r->readers, 1, memory_order_release);
}

/* Where the current chunk's next payload bytes go: in place, or aside for
 * a second copy (failover). */
static char *rx_dest(struct tcp_recv_stream *t) {
  return (t->bounce ? t->bounce : t->req->e[t->hdr.idx].buf + t->hdr.offset) + t->done;
}

/* A whole copy of the stream's current chunk goes in place, and counts. */
static void copy_in_place(struct tcp_recv_comm *c, struct tcp_recv_stream *t, char *copy) {
  struct wire_chunk *h = &t->hdr;
  memcpy(t->req->e[h->idx].buf + h->offset, copy, h->len);
  free(copy);
  tcp_recv_account(c, t->req, h->idx, h->len);
}

/* The stream owns its current chunk and a whole second copy of it is
 * parked: the copy goes in, and the rest of the stream's own copy is read
 * and dropped.  Caller holds the stream's lock, so that nobody else writes
 * the chunk meanwhile.  1 when so. */
static int install_parked_copy(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  char *copy = t->req && !t->bounce ? tcp_entry_take_parked(c, stream_index(c, t)) : NULL;
  if (!copy) return 0;
  copy_in_place(c, t, copy);
  t->skip = t->hdr.len - t->done;
  rx_let_go(c, t);
  return 1;
}

/* A second copy came whole: dropped, installed, or parked for the stream
 * writing the chunk in place (which installs it: install_parked). */
static void second_copy_finish(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  struct wire_chunk *h = &t->hdr;
  char *copy = t->bounce;
  t->bounce = NULL;
  switch (tcp_entry_second_copy(c, t->req, h->idx, h->offset, h->len, h->total, copy)) {
  case TCP_COPY_INSTALL: copy_in_place(c, t, copy); break;
  case TCP_COPY_DROP: free(copy); break;
  case TCP_COPY_PARKED: break;
  }
  rx_let_go(c, t);
}

/* The chunk came whole: its bytes count unless another copy of it counted
 * first (failover). */
static void chunk_finish(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  struct wire_chunk *h = &t->hdr;
  if (t->bounce) {
    second_copy_finish(c, t);
    return;
  }
  if (tcp_entry_finish_chunk(c, t->req, h->idx, h->offset, h->len, h->total, stream_index(c, t)))
    tcp_recv_account(c, t->req, h->idx, h->len);
  rx_let_go(c, t);
}

/* Failover: the chunk this stream is reading was finished by another copy,
 * or a whole second copy waits for this stream to install it: the rest of
 * this copy is read and dropped.  1 when so. */
static int chunk_overtaken(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  struct wire_chunk *h = &t->hdr;
  if (!t->req || !atomic_load_explicit(&t->req->contested, memory_order_relaxed)) return 0;
  if (install_parked_copy(c, t)) return 1;
  if (!tcp_entry_chunk_finished(c, t->req, h->idx, h->offset, h->len, h->total)) return 0;
  t->skip = h->len - t->done;
  rx_let_go(c, t);
  return 1;
}

/* A heartbeat between chunks: checked, and counted as heard.  0, or -1
 * after failing the comm. */
static int accept_heartbeat(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  const char *bad = NULL;
  if (wire_chunk_check(&t->hdr, 0, &bad) != 0) {
    tcp_comm_fail(&c->base, ncclRemoteError, bad);
    return -1;
  }
  t->req = NULL;
  return 0;
}

/* Failover: the sender gave up the streams the notice names.  Acted on
 * once this stream's lock is released (streams_give_up).  0, or -1 after
 * failing the comm. */
static int accept_lost(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  const char *bad = NULL;
  if (wire_chunk_check(&t->hdr, 0, &bad) != 0 || !c->base.failover) {
    tcp_comm_fail(&c->base, ncclRemoteError, bad ? bad : "LOST notice on a connection without failover");
    return -1;
  }
  unsigned all = (1u << c->base.nstreams) - 1;
  atomic_fetch_or(&c->lost_notice, (unsigned)t->hdr.total & all);
  t->req = NULL;
  return 0;
}

/* Failover: a chunk that went out again (its stream was given up, or it
 * waited on a slow member), whose first copy had arrived whole (its
 * receive may be over by now): its payload is read and dropped. */
static int chunk_again(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  t->req = NULL;
  t->skip = t->hdr.len;
  (void)c;
  return 0;
}

/* A chunk for a receive not posted: with failover, one posted before and
 * complete by now, sent again. */
static int chunk_for_old_receive(struct tcp_recv_comm *c, const struct wire_chunk *h) {
  return c->base.failover && (int32_t)(h->seq - atomic_load(&c->recv_seq)) < 0 &&
         !(h->flags & WIRE_CHUNK_TRUNCATED);
}

/* A chunk header arrived: find its receive and check it fits.  0, or -1
 * after failing the comm (the peer broke the protocol). */
static int accept_header(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  struct wire_chunk *h = &t->hdr;
  struct tcp_recv_req *r = NULL;
  if (h->magic == WIRE_MAGIC && h->flags == WIRE_CHUNK_HEARTBEAT) return accept_heartbeat(c, t);
  if (h->magic == WIRE_MAGIC && h->flags == WIRE_CHUNK_LOST) return accept_lost(c, t);
  if (h->magic == WIRE_MAGIC) r = tcp_recv_posted(c, h->seq);
  if (h->magic == WIRE_MAGIC && !r && chunk_for_old_receive(c, h)) return chunk_again(c, t);
  if (h->magic == WIRE_MAGIC && (!r || h->idx >= r->n)) {
    tcp_comm_failf(&c->base, ncclRemoteError, "chunk for receive %u/%u that was never posted", h->seq, h->idx);
    return -1;
  }
  const char *bad = NULL;
  if (wire_chunk_check(h, r ? r->e[h->idx].cap : 0, &bad) != 0) {
    tcp_comm_failf(&c->base, ncclRemoteError, "%s: [%llu,+%llu) of %llu bytes", bad,
                   (unsigned long long)h->offset, (unsigned long long)h->len, (unsigned long long)h->total);
    return -1;
  }
  struct tcp_entry *e = &r->e[h->idx];
  if (h->flags & WIRE_CHUNK_TRUNCATED) {
    if (tcp_entry_claim(c, r, h->idx, CHUNK_TRUNCATED, h->offset, h->len, h->total) != 0) return -1;
    tcp_recv_truncated(c, r, h->idx, h->total);
    t->req = NULL;
    return 0;
  }
  int again = tcp_entry_claim_chunk(c, r, h->idx, h->offset, h->len, h->total, stream_index(c, t));
  if (again < 0) return -1;
  if (again == 1) return chunk_again(c, t);
  if (again == 2 && !(t->bounce = malloc(h->len ? h->len : 1))) {
    tcp_comm_fail(&c->base, ncclSystemError, "out of memory for a second copy of a chunk");
    return -1;
  }
  if (c->base.failover) atomic_fetch_or(&r->entries_done, TCP_ENTRIES_STRIPED);
  if (h->flags & WIRE_CHUNK_LAZY_DONE) atomic_store_explicit(&r->lazy_done, 1, memory_order_relaxed);
  atomic_store_explicit(&e->total, (int64_t)h->total, memory_order_release);
  /* Messages come on the streams: CTS records go out at once again. */
  if (h->offset == 0) match_hold_stream_message(&c->hold);
  rx_hold(c, t, r);
  t->done = 0;
  if (h->len == 0) chunk_finish(c, t);
  return 0;
}

/* Payload still owed to the current chunk, served from the staging buffer
 * first.  1 when the chunk is complete. */
static int copy_staged(struct tcp_recv_stream *t) {
  struct wire_chunk *h = &t->hdr;
  size_t want = h->len - t->done;
  size_t have = t->stage_len - t->stage_pos;
  size_t n = want < have ? want : have;
  memcpy(rx_dest(t), t->stage + t->stage_pos, n);
  t->stage_pos += n;
  t->done += n;
  return t->done == h->len;
}

/* Parse what is staged: 1 when something was consumed, 0 when the staged
 * bytes are used up (or hold less than a header), -1 after failing the
 * comm. */
static int parse_staged(struct tcp_recv_comm *c, struct tcp_recv_stream *t) {
  if (t->skip) {
    size_t have = t->stage_len - t->stage_pos;
    size_t n = t->skip < have ? (size_t)t->skip : have;
    t->stage_pos += n;
    t->skip -= n;
    return n > 0;
  }
  if (!t->req && t->stage_len - t->stage_pos >= sizeof t->hdr) {
    memcpy(&t->hdr, t->stage + t->stage_pos, sizeof t->hdr);
    t->stage_pos += sizeof t->hdr;
    return accept_header(c, t) != 0 ? -1 : 1;
  }
  if (t->req && t->stage_pos < t->stage_len) {
    if (chunk_overtaken(c, t)) return 1;
    if (copy_staged(t)) chunk_finish(c, t);
    return 1;
  }
  return 0;
}

/* Read the rest of a small chunk and a little beyond it into the staging
 * buffer: enough for the next header and a small payload in the same
 * call, but not so much of a large payload that it would be copied twice.
 * *got: bytes arrived. */
static enum sock_io read_staged(struct tcp_stream *s, struct tcp_recv_stream *t, size_t owed, size_t *got) {
  if (t->stage_pos > 0) {
    memmove(t->stage, t->stage + t->stage_pos, t->stage_len - t->stage_pos);
    t->stage_len -= t->stage_pos;
    t->stage_pos = 0;
  }
  size_t want = t->stage_len + owed + TCP_RX_LOOKAHEAD;
  if (want > TCP_STAGE_SIZE) want = TCP_STAGE_SIZE;
  size_t before = t->stage_len;
  enum sock_io io = sock_recv_once(s->fd, t->stage, want, &t->stage_len);
  *got = t->stage_len - before;
  /* A short read means the socket is dry. */
  if (*got && t->stage_len < want) return SOCK_IO_AGAIN;
  return *got ? SOCK_IO_DONE : io;
}

/* How a read ended, judged: 0 to go on, -1 to stop (dry, closed between
 * chunks, or after failing the comm). */
static int read_ended(struct tcp_stream *s, struct tcp_recv_stream *t, enum sock_io io) {
  struct tcp_recv_comm *c = recv_comm_of(s->comm);
  if (io == SOCK_IO_DONE) return 0;
  if (io == SOCK_IO_AGAIN) return -1;
  if (io == SOCK_IO_EOF && !t->req && !t->skip && t->stage_pos == t->stage_len) {
    /* Closed between chunks: what came before it stays good. */
    if (!atomic_exchange(&s->eof, 1)) atomic_fetch_add(&c->streams_eof, 1);
    return -1;
  }
  tcp_comm_fail(&c->base, ncclRemoteError,
                io == SOCK_IO_EOF ? "connection closed by peer in the middle of a message" : tcp_io_reason(io));
  return -1;
}

/* How far a read goes: small chunks only (a caller reading inline), whole
 * chunks until `budget` is reached (a pool pass: a chunk is finished in the
 * pass that began it), or `budget` bytes even inside a chunk (a caller's
 * test() with COLLX_PROGRESS=caller). */
enum read_how { READ_SMALL, READ_WHOLE_CHUNKS, READ_TO_BUDGET };

/* Make progress on the stream without blocking: parse what is staged, read
 * more.  Small chunks arrive with their header in one recv into the
 * staging buffer; the bulk of a large chunk goes straight from the socket
 * into the receive buffer.  Returns the bytes that arrived.  Caller holds
 * s->lock. */
static size_t read_stream_once(struct tcp_stream *s, enum read_how how, size_t budget) {
  struct tcp_recv_comm *c = recv_comm_of(s->comm);
  struct tcp_recv_stream *t = &c->rx[s->index];
  int dry = 0;
  size_t moved = 0;
  if (atomic_load(&s->eof) || tcp_stream_lost(&c->base, s->index)) return 0;
  while (!tcp_comm_failed(&c->base) && moved < budget) {
    int parsed = parse_staged(c, t);
    if (parsed < 0) return moved;
    if (parsed > 0) continue;
    if (dry) return moved;
    size_t owed = t->req ? t->hdr.len - t->done : t->skip > TCP_STAGE_SIZE ? TCP_STAGE_SIZE : (size_t)t->skip;
    int direct = t->req && owed >= TCP_STAGE_SIZE / 2;
    /* Bulk is the driver's work: a caller reading inline stops at a large
     * chunk and goes back to NCCL's other requests. */
    if (direct && how == READ_SMALL) return moved;
    if (direct && chunk_overtaken(c, t)) continue;
    enum sock_io io;
    if (direct) {
      size_t before = t->done, left = budget - moved;
      size_t end = how == READ_TO_BUDGET && left < t->hdr.len - before ? before + left : t->hdr.len;
      io = sock_recv_some(s->fd, rx_dest(t) - t->done, end, &t->done);
      moved += t->done - before;
      if (io == SOCK_IO_DONE && t->done < t->hdr.len) return moved; /* the budget ran out */
      if (io == SOCK_IO_DONE) chunk_finish(c, t);
    } else {
      size_t got = 0;
      io = read_staged(s, t, owed, &got);
      if (got) {
        /* Parse what came, and do not ask again only to hear EAGAIN when
         * the read was short. */
        moved += got;
        dry = io == SOCK_IO_AGAIN;
        continue;
      }
    }
    if (read_ended(s, t, io) != 0) return moved;
  }
  return moved;
}

/* Bytes from the peer on any socket mean it is alive (the watchdog). */
static size_t read_stream(struct tcp_stream *s, enum read_how how, size_t budget) {
  size_t got = read_stream_once(s, how, budget);
  if (got) tcp_comm_heard(s->comm);
  return got;
}

/* ---- failover: streams the sender gave up ---------------------------------- */

/* A stream with a new socket starts afresh.  Caller holds s->lock. */
static void recv_stream_reset(struct tcp_stream *s) {
  struct tcp_recv_comm *c = recv_comm_of(s->comm);
  struct tcp_recv_stream *t = &c->rx[s->index];
  if (t->req) rx_let_go(c, t);
  t->done = 0;
  t->skip = 0;
  t->stage_pos = t->stage_len = 0;
}

/* Stop reading stream s for good; forget the chunk it was in the middle
 * of, which the sender writes again elsewhere.  Caller holds s->lock. */
static void stream_give_up(struct tcp_recv_comm *c, struct tcp_stream *s) {
  struct tcp_recv_stream *t = &c->rx[s->index];
  if (!install_parked_copy(c, t) && t->req && !t->bounce)
    tcp_entry_unclaim(c, t->req, t->hdr.idx, t->hdr.offset, t->hdr.len, t->hdr.total, s->index);
  recv_stream_reset(s);
}

/* Failover: second copies parked for streams that own their chunks are
 * installed by whoever holds such a stream's lock next; this looks for
 * them once the caller's own stream lock is released, so that a copy does
 * not wait for its owner's socket to bring more (trylock: a stream busy
 * right now installs it itself, or the next look does). */
static void install_parked(struct tcp_recv_comm *c) {
  unsigned mask = atomic_load(&c->parked_mask);
  for (int i = 0; mask && i < c->base.nstreams; i++) {
    if (!(mask >> i & 1)) continue;
    struct tcp_stream *s = &c->base.streams[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    install_parked_copy(c, &c->rx[i]);
    pthread_mutex_unlock(&s->lock);
  }
}

/* Act on LOST notices: the streams they name are read no more, and the
 * sender hears so (LOST_ACK) before it sends their chunks again.  Takes
 * those streams' locks: call holding none. */
static void streams_give_up(struct tcp_recv_comm *c) {
  unsigned mask = atomic_exchange(&c->lost_notice, 0) & ~atomic_load(&c->base.lost);
  if (!mask) return;
  for (int i = 0; i < c->base.nstreams; i++) {
    if (!(mask >> i & 1)) continue;
    struct tcp_stream *s = &c->base.streams[i];
    pthread_mutex_lock(&s->lock);
    atomic_fetch_or(&c->base.lost, 1u << i);
    stream_give_up(c, s);
    pthread_mutex_unlock(&s->lock);
  }
  COLLX_INFO(COLLX_LOG_NET, "receive connection from %s on device %s: the sender gave up streams 0x%x; "
             "their chunks come again on the others", c->base.peer, c->base.devname, mask);
  unsigned paths = 0;
  for (int i = 0; i < c->base.nstreams; i++)
    if (mask >> i & 1) paths |= 1u << (i % c->base.npaths);
  for (int p = 0; p < c->base.npaths; p++)
    if (paths >> p & 1) tcp_path_lost_ctrl(&c->base, p, "the sender lost that path");
  tcp_recv_owe_lost_ack(c, mask);
  atomic_fetch_or(&c->rejoin_wanted, paths);
}

static int recv_serve(struct tcp_stream *s, struct tcp_pass *pass) {
  struct tcp_comm_base *b = s->comm;
  if (atomic_load(&b->stop) || tcp_comm_failed(b) || atomic_load(&s->eof) || tcp_stream_lost(b, s->index))
    return TCP_WANT_NOTHING;
  /* With COLLX_INLINE_RECV the caller's test() may be reading this stream
   * right now: then it has the data in hand, and the pool steps aside (the
   * socket stays ready, so it comes back next round). */
  if (pthread_mutex_trylock(&s->lock) != 0) return TCP_WANT_READ;
  pass->moved = read_stream(s, READ_WHOLE_CHUNKS, TCP_PASS_BYTES) > 0;
  pthread_mutex_unlock(&s->lock);
  if (atomic_load(&recv_comm_of(b)->parked_mask)) install_parked(recv_comm_of(b));
  if (atomic_load(&recv_comm_of(b)->lost_notice)) streams_give_up(recv_comm_of(b));
  return tcp_stream_lost(b, s->index) ? TCP_WANT_NOTHING : TCP_WANT_READ;
}

/* COLLX_INLINE_RECV: the caller reads what is small and leaves a large
 * chunk to the pool, which reads the stream too. */
static void read_inline(struct tcp_recv_comm *c) {
  for (int i = 0; i < c->base.nstreams; i++) {
    struct tcp_stream *s = &c->base.streams[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    read_stream(s, READ_SMALL, SIZE_MAX);
    pthread_mutex_unlock(&s->lock);
  }
  if (atomic_load(&c->parked_mask)) install_parked(c);
  if (atomic_load(&c->lost_notice)) streams_give_up(c);
}

/* COLLX_PROGRESS=caller: no progress thread drives the comm, so a call
 * reads the streams, bulk included, from stream `first` on, up to `budget`
 * bytes in all.  A test() reads at most TCP_CALLER_PASS_BYTES: a socket's
 * whole backlog took one call 4-6 ms on the processor (bench/NOTES.md,
 * entry 61). */
static void read_all_streams(struct tcp_recv_comm *c, int first, size_t budget) {
  int n = c->base.nstreams;
  for (int k = 0; k < n && budget > 0; k++) {
    struct tcp_stream *s = &c->base.streams[(first + k) % n];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    size_t got = read_stream(s, READ_TO_BUDGET, budget);
    pthread_mutex_unlock(&s->lock);
    budget -= got < budget ? got : budget;
  }
  if (atomic_load(&c->parked_mask)) install_parked(c);
  if (atomic_load(&c->lost_notice)) streams_give_up(c);
}

/* The watchdog's part in a path coming back (rejoin.c): listen for the
 * paths given up and offer them to the sender, put new sockets in place
 * as they introduce themselves, and tell the sender once a path is back. */
static void paths_rejoin(struct tcp_recv_comm *c) {
  unsigned wanted = atomic_exchange(&c->rejoin_wanted, 0), offered = 0;
  for (int p = 0; p < c->base.npaths; p++) {
    uint16_t port;
    if ((wanted >> p & 1) && tcp_rejoin_listen(&c->base, p, &port) == 0) offered |= 1u << p;
  }
  if (offered) tcp_recv_owe_rejoin(c, offered);
  unsigned ready = tcp_rejoin_accept(&c->base);
  if (!ready) return;
  tcp_rejoin_swap(&c->base, ready);
  tcp_rejoin_ctrl(&c->base);
  unsigned back = tcp_rejoin_path_done(&c->base, ready);
  if (back) tcp_recv_owe_rejoined(c, back);
}

/* The watchdog's tick: a heartbeat on the control socket and, with
 * COLLX_PROGRESS=caller, the streams, which no thread of its own reads. */
static void recv_watch(struct tcp_comm_base *b, double now) {
  struct tcp_recv_comm *c = recv_comm_of(b);
  tcp_recv_lazy_due(c);
  tcp_ctrl_heartbeat(&b->ctrl, now);
  if (b->failover) {
    /* Only the sender gives a path up: it is asked to (tcp_ctrl_alone). */
    unsigned gone = tcp_ctrl_alone(b, now);
    if (gone) {
      COLLX_INFO(COLLX_LOG_NET, "receive connection from %s on device %s: control socket given up while its "
                 "path's streams were in use (paths 0x%x); the sender is asked to give the path up, so that it "
                 "comes back whole", b->peer, b->devname, gone);
      tcp_recv_owe_ctrl_gone(c, gone);
    }
    paths_rejoin(c);
    if (atomic_load(&c->parked_mask)) install_parked(c);
  }
  if (tcp_caller_progress()) read_all_streams(c, 0, SIZE_MAX);
}

/* ---- posting ---------------------------------------------------------------- */

static struct tcp_recv_req *req_alloc(struct tcp_recv_comm *c) {
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++)
    if (c->reqs[i].base.state == REQ_FREE) {
      tcp_req_activate(&c->reqs[i].base);
      return &c->reqs[i];
    }
  return NULL;
}

static void req_release(struct tcp_recv_comm *c, struct tcp_recv_req *r) {
  atomic_store(&c->by_seq[r->base.seq % TCP_SEQ_SLOTS], NULL);
  pthread_mutex_lock(&c->track_lock);
  for (int i = 0; i < r->n; i++) chunk_track_free(&r->e[i].track);
  pthread_mutex_unlock(&c->track_lock);
  tcp_req_retire(&r->base);
}

static void req_fill(struct tcp_recv_req *r, uint32_t seq, int n, void **data, const size_t *sizes,
                     const int *tags) {
  r->base.seq = seq;
  r->n = n;
  r->match.claimed = 0;
  atomic_store(&r->entries_done, 0);
  atomic_store(&r->readers, 0);
  atomic_store(&r->contested, 0);
  atomic_store(&r->lazy_done, 0);
  if (tcp_req_watched(&r->base) && !r->parts) r->parts = calloc(COLLX_MAX_RECVS, sizeof *r->parts);
  for (int i = 0; r->parts && i < n; i++) tcp_parts_reset(&r->parts[i]);
  for (int i = 0; i < n; i++) {
    r->e[i].buf = data[i];
    r->e[i].cap = sizes[i];
    r->match.tag[i] = tags ? tags[i] : 0;
    atomic_store(&r->e[i].received, 0);
    atomic_store(&r->e[i].total, -1);
    chunk_track_reset(&r->e[i].track); /* released (freed) with its last receive */
  }
}

ncclResult_t tcp_irecv(struct tcp_recv_comm *c, int n, void **data, const size_t *sizes, const int *tags,
                       struct tcp_req **out) {
  *out = NULL;
  if (tcp_comm_failed(&c->base)) return tcp_comm_error(&c->base);
  uint32_t seq = c->recv_seq;
  struct tcp_recv_req *old = atomic_load(&c->by_seq[seq % TCP_SEQ_SLOTS]);
  if (old) {
    COLLX_WARN("receive from %s on device %s: receive %u is still incomplete %d receives later (%d of its %d "
               "buffers complete, %llu of %lld bytes in the first)", c->base.peer, c->base.devname,
               old->base.seq, TCP_SEQ_SLOTS, atomic_load(&old->entries_done) & TCP_ENTRIES_COUNT, old->n,
               (unsigned long long)atomic_load(&old->e[0].received), (long long)atomic_load(&old->e[0].total));
    return ncclInvalidUsage;
  }
  struct tcp_recv_req *r = req_alloc(c);
  if (!r) {
    COLLX_WARN("receive from %s on device %s: more than %d requests outstanding", c->base.peer,
               c->base.devname, COLLX_MAX_REQUESTS);
    return ncclInvalidUsage;
  }
  req_fill(r, seq, n, data, sizes, tags);
  atomic_store_explicit(&c->by_seq[seq % TCP_SEQ_SLOTS], r, memory_order_release);
  atomic_store(&c->recv_seq, seq + 1);
  COLLX_TL(COLLX_TL_IRECV, c->base.tl_key, seq + 1);
  if (tcp_recv_send_cts(c, r) != 0) {
    req_release(c, r); /* the caller never sees it: nobody else would */
    return tcp_comm_error(&c->base);
  }
  *out = &r->base;
  /* An early message for this receive may already be staged, the control
   * socket's reader blocked on it until now: start it.  What is still in
   * the socket is read by the first test() (reading the socket at every
   * irecv, with receives posted ahead as NCCL does, nearly always found
   * nothing; bench/NOTES.md attempt 22). */
  if (atomic_load(&c->eager_rx_blocked)) tcp_recv_ctrl_drain(&c->base);
  COLLX_TL(COLLX_TL_IRECV_END, c->base.tl_key, seq + 1);
  return ncclSuccess;
}

/* ---- completion ---------------------------------------------------------------- */

int tcp_recv_peer_finished(struct tcp_recv_comm *c) {
  /* A stream given up brings nothing more either. */
  int lost = __builtin_popcount(atomic_load(&c->base.lost));
  if (atomic_load(&c->streams_eof) + lost < c->base.nstreams) return 0;
  if (atomic_load(&c->base.ctrl.eof)) return 1;
  /* The reader waits for a receive that is still not posted.  If one was
   * posted since, the reader (perhaps the watchdog, right now) has not
   * looked again yet: that is no verdict. */
  return atomic_load(&c->eager_rx_blocked) && atomic_load(&c->eager_rx_wait_seq) == atomic_load(&c->recv_seq);
}

static int recv_done(struct tcp_recv_req *r) {
  return (atomic_load_explicit(&r->entries_done, memory_order_acquire) & TCP_ENTRIES_COUNT) == r->n &&
         atomic_load_explicit(&r->readers, memory_order_acquire) == 0;
}

/* A receive in the middle of a message too large to be eager.  While NCCL
 * tests it, nothing on the control socket can complete before it, so its
 * tests skip that read (a recv that mostly finds nothing, on the thread
 * that drives every connection); the watchdog still reads it meanwhile. */
static int recv_in_bulk(struct tcp_recv_req *r) {
  for (int i = 0; i < r->n; i++) {
    int64_t total = atomic_load_explicit(&r->e[i].total, memory_order_acquire);
    if (total > WIRE_EAGER_MAX && atomic_load(&r->e[i].received) < (uint64_t)total) return 1;
  }
  return 0;
}

/* CTS records the socket did not take at irecv go out now, done or not,
 * unless the receiver is holding them back (TCP_CTS_BATCH); a test that
 * reads the control socket leaves that to the drain, which writes what is
 * due after reading.  Small messages come on the control socket, which the
 * caller reads itself.  The streams are read by the driver, and with
 * COLLX_INLINE_RECV also by a caller polling test(), which then needs no
 * thread wake-up. */
static void recv_progress(struct tcp_recv_comm *c, struct tcp_recv_req *r) {
  if (!recv_done(r) && !recv_in_bulk(r))
    tcp_recv_ctrl_drain(&c->base);
  else
    tcp_recv_write_due_cts(c);
  if (recv_done(r)) return;
  if (tcp_recv_peer_finished(c)) tcp_comm_fail(&c->base, ncclRemoteError, "connection closed by peer");
  if (tcp_caller_progress())
    read_all_streams(c, (int)(c->read_turn++ % (unsigned)c->base.nstreams), TCP_CALLER_PASS_BYTES);
  else if (tcp_cfg.inline_recv)
    read_inline(c);
}

static ncclResult_t recv_complete(struct tcp_recv_comm *c, struct tcp_recv_req *r, int *done, size_t *sizes) {
  COLLX_TL(COLLX_TL_DONE, c->base.tl_key, r->base.seq + 1);
  ncclResult_t res = (ncclResult_t)atomic_load(&r->base.error);
  if (sizes)
    for (int i = 0; i < r->n; i++) sizes[i] = (size_t)atomic_load(&r->e[i].total);
  c->base.stats.messages++;
  for (int i = 0; i < r->n; i++) c->base.stats.bytes += (uint64_t)atomic_load(&r->e[i].total);
  tcp_stats_mirror(&c->base);
  req_release(c, r);
  if (res != ncclSuccess) return res;
  *done = 1;
  return ncclSuccess;
}

static ncclResult_t recv_test(struct tcp_req *base, int *done, size_t *sizes) {
  struct tcp_recv_comm *c = recv_comm_of(base->comm);
  struct tcp_recv_req *r = recv_req_of(base);
  recv_progress(c, r);
  if (recv_done(r)) return recv_complete(c, r, done, sizes);
  if (tcp_comm_failed(&c->base)) {
    req_release(c, r);
    return tcp_comm_error(&c->base);
  }
  return ncclSuccess;
}

/* ---- lifetime ---------------------------------------------------------------- */

/* Staging buffers on the NIC's NUMA node, one block for all the streams
 * (its trailer then costs one page, not one per stream).  0, or -1 (the
 * comm is closed). */
static int alloc_stages(struct tcp_recv_comm *c) {
  char *block = collx_topo_alloc_local(c->base.dev, (size_t)c->base.nstreams * TCP_STAGE_SIZE);
  if (!block) {
    COLLX_WARN("out of memory for the receive buffers of a comm with %s", c->base.peer);
    return -1;
  }
  for (int i = 0; i < c->base.nstreams; i++) c->rx[i].stage = block + (size_t)i * TCP_STAGE_SIZE;
  return 0;
}

static int recv_init(struct tcp_comm_base *b, const struct tcp_comm_sockets *sk) {
  struct tcp_recv_comm *c = recv_comm_of(b);
  (void)sk;
  /* Until the traffic shows its sizes, every CTS goes out at once. */
  match_hold_init(&c->hold);
  pthread_mutex_init(&c->track_lock, NULL);
  pthread_mutex_init(&c->done_lock, NULL);
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++) {
    c->reqs[i].base.magic = TCP_MAGIC_REQ;
    c->reqs[i].base.comm = b;
  }
  if (b->failover && !(c->owners = calloc(TCP_MAX_STREAMS, sizeof *c->owners))) {
    COLLX_WARN("out of memory for the failover state of a comm with %s", b->peer);
    return -1;
  }
  return alloc_stages(c);
}

static void recv_release(struct tcp_comm_base *b) {
  struct tcp_recv_comm *c = recv_comm_of(b);
  COLLX_INFO(COLLX_LOG_NET, "receive connection from %s on device %s closed: %llu receives completed, %llu bytes",
             b->peer, b->devname, (unsigned long long)b->stats.messages, (unsigned long long)b->stats.bytes);
  collx_topo_free_local(c->rx[0].stage, (size_t)b->nstreams * TCP_STAGE_SIZE);
  for (int i = 0; i < b->nstreams; i++) {
    c->rx[i].stage = NULL;
    free(c->rx[i].bounce);
    c->rx[i].bounce = NULL;
    if (c->owners) free(c->owners[i].parked);
  }
  free(c->cts_backlog);
  c->cts_backlog = NULL;
  free(c->owners);
  c->owners = NULL;
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++) {
    for (int k = 0; k < COLLX_MAX_RECVS; k++) chunk_track_free(&c->reqs[i].e[k].track);
    free(c->reqs[i].parts);
    c->reqs[i].parts = NULL;
    c->reqs[i].base.magic = TCP_MAGIC_DEAD;
  }
  pthread_mutex_destroy(&c->track_lock);
  pthread_mutex_destroy(&c->done_lock);
}

/* A receive entry's parts: one is left while the entry has had no chunk
 * yet, or the chunks claimed do not cover it. */
static struct tcp_parts *recv_parts(struct tcp_req *base, int msg, int *rest) {
  struct tcp_recv_req *r = (struct tcp_recv_req *)base;
  struct tcp_recv_comm *c = recv_comm_of(base->comm);
  if (!r->parts) return NULL;
  const struct chunk_track *t = &r->e[msg].track;
  pthread_mutex_lock(&c->track_lock);
  *rest = t->kind == CHUNK_NONE || (t->kind == CHUNK_STREAM && t->claimed < t->total);
  pthread_mutex_unlock(&c->track_lock);
  return &r->parts[msg];
}

const struct tcp_comm_role tcp_recv_role = {
    .name = "receive",
    .sends = 0,
    .magic = TCP_MAGIC_RECV,
    .size = sizeof(struct tcp_recv_comm),
    .ctrl = &tcp_recv_ctrl_ops,
    .init = recv_init,
    .release = recv_release,
    .watch = recv_watch,
    .drain = tcp_recv_ctrl_drain,
    .serve = recv_serve,
    .stream_reset = recv_stream_reset,
    .test = recv_test,
    .parts = recv_parts,
};
