/*
 * The TCP data path.
 *
 * A comm is one direction of one connection: a control socket plus
 * `nstreams` data sockets, each served by its own thread.  Work starts when
 * it is posted: isend cuts the message into pieces and queues it, and any
 * idle stream takes the next piece, so a fast stream carries more than a slow
 * one and every posted request moves at once.  Small messages are written by
 * the posting thread itself (one sendmsg of header plus payload).  Each
 * stream's thread reads its socket (with COLLX_INLINE_RECV a caller polling
 * test() reads small pieces itself while the thread stays parked, and with
 * COLLX_SPIN_US the thread keeps polling for a while after data instead of
 * sleeping).  With COLLX_PROGRESS=caller there are no stream threads: the
 * thread calling isend and test does every read and write, for all of the
 * comm's requests.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sock.h"
#include "stripe.h"
#include "tcp_internal.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/timeline.h"

atomic_int tcp_live_threads;

/* Messages up to this size are written by the posting thread. */
#define TCP_INLINE_MAX (64 * 1024)
/* Bytes read beyond the current piece into the staging buffer: the next
 * header and a small payload come in the same recv, while most of a large
 * payload goes straight to its receive buffer. */
#define TCP_RX_LOOKAHEAD 4096
/* COLLX_INLINE_RECV: a caller that polled test() this recently is taken to
 * be polling still, and the stream threads stay parked. */
#define TCP_PARK_WINDOW_S 0.001
/* How long a stream thread sleeps in poll before re-checking for close. */
#define TCP_POLL_MS 100

static double spin_seconds = 0;
void tcp_set_spin_us(int us) { spin_seconds = us > 0 ? us * 1e-6 : 0; }
static int inline_recv;
void tcp_set_inline_recv(int on) { inline_recv = on; }
static int caller_progress;
void tcp_set_caller_progress(int on) { caller_progress = on; }
int tcp_caller_progress(void) { return caller_progress; }

/* ---- errors -------------------------------------------------------------- */

/* ---- receive side -------------------------------------------------------- */

/* Account `len` payload bytes of entry `idx`; finish the entry when whole. */
void tcp_entry_account(struct tcp_req *r, int idx, uint64_t len) {
  struct tcp_entry *e = &r->e[idx];
  uint64_t got = atomic_fetch_add_explicit(&e->received, len, memory_order_acq_rel) + len;
  if ((int64_t)got == atomic_load_explicit(&e->total, memory_order_acquire)) {
    atomic_fetch_add_explicit(&r->entries_done, 1, memory_order_release);
  }
}

int tcp_entry_claim(struct tcp_comm *c, struct tcp_req *r, int idx, int kind, uint64_t offset,
                    uint64_t len, uint64_t total) {
  struct piece_track *t = &r->e[idx].track;
  const char *why = NULL;
  pthread_mutex_lock(&c->track_lock);
  int rc = kind == PIECE_EAGER ? piece_track_eager(t, len, &why)
         : kind == PIECE_TRUNCATED ? piece_track_truncated(t, &why)
                                   : piece_track_stream(t, offset, len, total, &why);
  pthread_mutex_unlock(&c->track_lock);
  if (rc != 0)
    tcp_comm_failf(c, ncclRemoteError, "%s: receive %u, buffer %d, [%llu,+%llu) of %llu bytes", why, r->seq, idx,
                   (unsigned long long)offset, (unsigned long long)len, (unsigned long long)total);
  return rc;
}

/* A message does not fit its receive buffer: say so, and fail that entry
 * (nothing of it is written). */
void tcp_warn_truncated(const struct tcp_comm *c, struct tcp_req *r, int idx, uint64_t size) {
  struct tcp_entry *e = &r->e[idx];
  COLLX_WARN("message of %llu bytes from %s on device %s is larger than the receive buffer "
             "of %zu bytes (tag %d); nothing was written",
             (unsigned long long)size, c->peer, c->devname, e->cap, r->match.tag[idx]);
  atomic_store(&r->error, ncclInvalidUsage);
  atomic_store(&e->total, 0);
  atomic_fetch_add(&r->entries_done, 1);
}

/* A piece header arrived: find its receive and check it fits.  Returns 0,
 * or -1 after failing the comm (the peer broke the protocol). */
static int rx_accept_header(struct tcp_stream *s) {
  struct tcp_comm *c = s->comm;
  struct wire_piece *h = &s->rx_hdr;
  struct tcp_req *r = NULL;
  if (h->magic == WIRE_MAGIC && h->flags == WIRE_PIECE_HEARTBEAT) {
    const char *bad = NULL;
    if (wire_piece_check(h, 0, &bad) != 0) {
      tcp_comm_fail(c, ncclRemoteError, bad);
      return -1;
    }
    s->rx_req = NULL; /* rx_pump counts it as heard */
    return 0;
  }
  if (h->magic == WIRE_MAGIC)
    r = atomic_load_explicit(&c->by_seq[h->seq % TCP_SEQ_SLOTS], memory_order_acquire);
  if (h->magic == WIRE_MAGIC && (!r || r->seq != h->seq || h->idx >= r->n)) {
    tcp_comm_failf(c, ncclRemoteError, "piece for receive %u/%u that was never posted", h->seq, h->idx);
    return -1;
  }
  const char *bad = NULL;
  if (wire_piece_check(h, r ? r->e[h->idx].cap : 0, &bad) != 0) {
    tcp_comm_failf(c, ncclRemoteError, "%s: [%llu,+%llu) of %llu bytes", bad, (unsigned long long)h->offset,
                   (unsigned long long)h->len, (unsigned long long)h->total);
    return -1;
  }
  struct tcp_entry *e = &r->e[h->idx];
  int kind = h->flags & WIRE_PIECE_TRUNCATED ? PIECE_TRUNCATED : PIECE_STREAM;
  if (tcp_entry_claim(c, r, h->idx, kind, h->offset, h->len, h->total) != 0) return -1;
  if (h->flags & WIRE_PIECE_TRUNCATED) {
    tcp_warn_truncated(c, r, h->idx, h->total);
    s->rx_req = NULL;
    return 0;
  }
  atomic_store_explicit(&e->total, (int64_t)h->total, memory_order_release);
  /* Messages come on the streams: CTS records go out at once again. */
  if (h->offset == 0) match_hold_stream_message(&c->hold);
  s->rx_req = r;
  s->rx_done = 0;
  if (h->len == 0) {
    tcp_entry_account(r, h->idx, 0);
    s->rx_req = NULL;
  }
  return 0;
}

/* Name the thread (top -H, /proc/PID/task/TID/comm: "cx-rx3.1" is stream 1
 * of connection 3) and pin it where the placement plan says. */
static void stream_thread_setup(struct tcp_stream *s, const char *dir) {
  char name[16];
  snprintf(name, sizeof name, "cx-%s%u.%d", dir, s->comm->serial, s->index);
  pthread_setname_np(pthread_self(), name);
  collx_topo_pin_self(s->comm->dev, s->comm->serial, s->index);
}

/* Payload still owed to the current piece, served from the staging buffer
 * first.  Returns 1 when the piece is complete. */
static int rx_copy_staged(struct tcp_stream *s) {
  struct wire_piece *h = &s->rx_hdr;
  struct tcp_entry *e = &s->rx_req->e[h->idx];
  size_t want = h->len - s->rx_done;
  size_t have = s->stage_len - s->stage_pos;
  size_t n = want < have ? want : have;
  memcpy(e->buf + h->offset + s->rx_done, s->stage + s->stage_pos, n);
  s->stage_pos += n;
  s->rx_done += n;
  return s->rx_done == h->len;
}

/* Make progress on the stream without blocking: parse what is staged, read
 * more.  Small pieces arrive with their header in one recv into the
 * staging buffer; the bulk of a large piece goes straight from the socket
 * into the receive buffer.  Returns 1 if any byte arrived. */
static int rx_pump_once(struct tcp_stream *s, int small_only) {
  struct tcp_comm *c = s->comm;
  int progress = 0, dry = 0;
  if (atomic_load(&s->eof)) return 0;
  while (!atomic_load(&c->error)) {
    if (!s->rx_req && s->stage_len - s->stage_pos >= sizeof s->rx_hdr) {
      memcpy(&s->rx_hdr, s->stage + s->stage_pos, sizeof s->rx_hdr);
      s->stage_pos += sizeof s->rx_hdr;
      if (rx_accept_header(s) != 0) return progress;
      continue;
    }
    if (s->rx_req && s->stage_pos < s->stage_len) {
      if (rx_copy_staged(s)) {
        tcp_entry_account(s->rx_req, s->rx_hdr.idx, s->rx_hdr.len);
        s->rx_req = NULL;
      }
      continue;
    }
    /* The staged bytes are used up (or hold less than a header). */
    if (dry) return progress;
    enum sock_io io;
    size_t owed = s->rx_req ? s->rx_hdr.len - s->rx_done : 0;
    /* Bulk is the stream thread's work: a caller reading inline stops at a
     * large piece and goes back to NCCL's other requests. */
    if (owed >= TCP_STAGE_SIZE / 2 && small_only) return progress;
    if (owed >= TCP_STAGE_SIZE / 2) {
      struct tcp_entry *e = &s->rx_req->e[s->rx_hdr.idx];
      size_t before = s->rx_done;
      io = sock_recv_some(s->fd, e->buf + s->rx_hdr.offset, s->rx_hdr.len, &s->rx_done);
      progress |= s->rx_done > before;
      if (io == SOCK_IO_DONE) {
        tcp_entry_account(s->rx_req, s->rx_hdr.idx, s->rx_hdr.len);
        s->rx_req = NULL;
        continue;
      }
    } else {
      if (s->stage_pos > 0) {
        memmove(s->stage, s->stage + s->stage_pos, s->stage_len - s->stage_pos);
        s->stage_len -= s->stage_pos;
        s->stage_pos = 0;
      }
      /* Read the rest of a small piece and a little beyond it: enough for
       * the next header and a small payload in the same call, but not so
       * much of a large payload that it would be copied twice. */
      size_t want = s->stage_len + owed + TCP_RX_LOOKAHEAD;
      if (want > TCP_STAGE_SIZE) want = TCP_STAGE_SIZE;
      size_t before = s->stage_len;
      io = sock_recv_once(s->fd, s->stage, want, &s->stage_len);
      if (s->stage_len > before) {
        /* A short read means the socket is dry: parse what came, and do
         * not ask again only to hear EAGAIN. */
        progress = 1;
        dry = s->stage_len < want;
        continue;
      }
    }
    if (io == SOCK_IO_AGAIN) return progress;
    if (io == SOCK_IO_EOF && !s->rx_req && s->stage_pos == s->stage_len) {
      /* Closed between pieces: what came before it stays good. */
      if (!atomic_exchange(&s->eof, 1)) atomic_fetch_add(&c->streams_eof, 1);
      return progress;
    }
    if (io != SOCK_IO_DONE) {
      tcp_comm_fail(c, ncclRemoteError, io == SOCK_IO_EOF ? "connection closed by peer in the middle of a message"
                                                          : tcp_io_reason(io));
      return progress;
    }
  }
  return progress;
}

/* Bytes from the peer on any socket mean it is alive (the watchdog). */
static int rx_pump(struct tcp_stream *s, int small_only) {
  int got = rx_pump_once(s, small_only);
  if (got) atomic_store_explicit(&s->comm->last_heard, tcp_now(), memory_order_relaxed);
  return got;
}

/* The stream is in the middle of a piece too large for the caller. */
static int rx_in_bulk(const struct tcp_stream *s) {
  return s->rx_req && s->rx_hdr.len - s->rx_done >= TCP_STAGE_SIZE / 2;
}

/* COLLX_INLINE_RECV: has a caller polled test() on this comm just now? */
static int caller_polling(struct tcp_comm *c) {
  return inline_recv && tcp_now() - atomic_load(&c->caller_seen) < TCP_PARK_WINDOW_S;
}

/* While the caller polls, the thread stays off the socket, so that a small
 * message wakes nobody: the caller reads it.  It comes back when the caller
 * hands it a large piece, when the caller stops polling, or at close. */
static void rx_park(struct tcp_stream *s) {
  struct tcp_comm *c = s->comm;
  pthread_mutex_lock(&c->q_lock);
  atomic_store(&s->parked, 1);
  while (!atomic_load(&c->stop) && !atomic_load(&c->error) && !atomic_load(&s->bulk_wanted) &&
         caller_polling(c)) {
    struct timespec until;
    tcp_deadline_in(&until, TCP_PARK_WINDOW_S);
    pthread_cond_timedwait(&c->q_cond, &c->q_lock, &until);
  }
  atomic_store(&s->parked, 0);
  atomic_store(&s->bulk_wanted, 0);
  pthread_mutex_unlock(&c->q_lock);
}

/* A stream's reader.  With COLLX_SPIN_US it keeps polling the socket for
 * that long after data, so the next message of a burst is read without a
 * wake-up (costly in VMs); otherwise, and afterwards, it sleeps in poll
 * until data comes, or, with COLLX_INLINE_RECV while the caller polls,
 * parks. */
static void *rx_thread(void *arg) {
  struct tcp_stream *s = arg;
  struct tcp_comm *c = s->comm;
  stream_thread_setup(s, "rx");
  double spin_until = 0;
  while (!atomic_load(&c->stop) && !atomic_load(&c->error) && !atomic_load(&s->eof)) {
    /* With COLLX_INLINE_RECV the caller's test() may be reading this stream
     * right now: then it has the data in hand, and this thread steps aside. */
    if (pthread_mutex_trylock(&s->lock) != 0) {
      sched_yield();
      continue;
    }
    int got = rx_pump(s, 0);
    int bulk = rx_in_bulk(s);
    pthread_mutex_unlock(&s->lock);
    if (!bulk && caller_polling(c)) {
      rx_park(s);
      continue;
    }
    if (got && spin_seconds > 0) {
      spin_until = tcp_now() + spin_seconds;
      continue;
    }
    if (spin_seconds > 0 && tcp_now() < spin_until) {
      sched_yield();
      continue;
    }
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    poll(&p, 1, TCP_POLL_MS);
  }
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

/* ---- send side ----------------------------------------------------------- */

/* Take the next piece from the send queue into the stream.  Returns 0 when
 * the queue is empty.  Caller holds s->lock. */
static int tx_take_piece(struct tcp_stream *s) {
  struct tcp_comm *c = s->comm;
  pthread_mutex_lock(&c->q_lock);
  if (collx_list_empty(&c->queue)) {
    pthread_mutex_unlock(&c->q_lock);
    return 0;
  }
  struct tcp_req *r = COLLX_CONTAINER_OF(c->queue.next, struct tcp_req, qnode);
  size_t k = r->next_piece++;
  if (r->next_piece == r->npieces) collx_list_del(&r->qnode);
  pthread_mutex_unlock(&c->q_lock);

  uint64_t off = (uint64_t)k * r->piece;
  s->tx_req = r;
  s->tx_done = 0;
  s->tx_hdr = (struct wire_piece){
      .magic = WIRE_MAGIC,
      .idx = (uint8_t)r->idx,
      .seq = r->seq,
      .total = r->size,
      .offset = off,
      .len = r->size - off < r->piece ? r->size - off : r->piece,
  };
  return 1;
}

/* Write as much of the stream's current piece as the socket takes. */
static enum sock_io tx_write_piece(struct tcp_stream *s) {
  enum sock_io io = sock_send_two(s->fd, &s->tx_hdr, sizeof s->tx_hdr,
                                  s->tx_req->data + s->tx_hdr.offset, s->tx_hdr.len, &s->tx_done);
  if (io != SOCK_IO_DONE) return io;
  atomic_fetch_add_explicit(&s->tx_req->pieces_done, 1, memory_order_release);
  s->tx_req = NULL;
  return SOCK_IO_DONE;
}

/* Write as much of the stream's heartbeat as the socket takes.  A failure
 * is left to the writes of pieces and the control socket to judge. */
static enum sock_io tx_write_heartbeat(struct tcp_stream *s) {
  enum sock_io io = sock_send_some(s->fd, &s->hb, sizeof s->hb, &s->hb_done);
  if (io != SOCK_IO_AGAIN) s->hb_active = 0;
  return io == SOCK_IO_AGAIN ? io : SOCK_IO_DONE;
}

void tcp_streams_watch(struct tcp_comm *c, double now) {
  if (c->magic == TCP_MAGIC_SEND) {
    /* On the first stream between pieces: a stream in the middle of one
     * shows life by its payload. */
    struct tcp_stream *s = &c->streams[0];
    if (now - c->last_stream_hb < 1.0 || pthread_mutex_trylock(&s->lock) != 0) return;
    if (!s->hb_active && !s->tx_req) {
      s->hb = (struct wire_piece){.magic = WIRE_MAGIC, .flags = WIRE_PIECE_HEARTBEAT};
      s->hb_done = 0;
      s->hb_active = 1;
    }
    if (s->hb_active) tx_write_heartbeat(s);
    c->last_stream_hb = now;
    pthread_mutex_unlock(&s->lock);
    return;
  }
  if (!caller_progress) return; /* the stream threads read */
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    rx_pump(s, 0);
    pthread_mutex_unlock(&s->lock);
  }
}

enum tx_state { TX_IDLE, TX_BLOCKED, TX_FAILED };

/* One piece's worth of sending on a stream: 1 if a piece went out whole,
 * 0 when the queue is empty, the socket is full or the comm has failed.
 * Caller holds s->lock. */
static int tx_step(struct tcp_stream *s) {
  struct tcp_comm *c = s->comm;
  if (atomic_load(&c->error)) return 0;
  if (s->hb_active && tx_write_heartbeat(s) != SOCK_IO_DONE) return 0;
  if (!s->tx_req && !tx_take_piece(s)) return 0;
  enum sock_io io = tx_write_piece(s);
  if (io == SOCK_IO_DONE) return 1;
  if (io != SOCK_IO_AGAIN) tcp_comm_fail(c, ncclRemoteError, tcp_io_reason(io));
  return 0;
}

/* Write queued pieces until the queue is empty or the socket is full.
 * Caller holds s->lock. */
static enum tx_state tx_pump(struct tcp_stream *s) {
  while (tx_step(s)) {
  }
  if (atomic_load(&s->comm->error)) return TX_FAILED;
  return s->tx_req ? TX_BLOCKED : TX_IDLE;
}

static void tx_wait_for_work(struct tcp_comm *c) {
  pthread_mutex_lock(&c->q_lock);
  while (collx_list_empty(&c->queue) && !atomic_load(&c->stop) && !atomic_load(&c->error))
    pthread_cond_wait(&c->q_cond, &c->q_lock);
  pthread_mutex_unlock(&c->q_lock);
}

static void *tx_thread(void *arg) {
  struct tcp_stream *s = arg;
  struct tcp_comm *c = s->comm;
  stream_thread_setup(s, "tx");
  while (!atomic_load(&c->stop)) {
    pthread_mutex_lock(&s->lock);
    enum tx_state st = tx_pump(s);
    pthread_mutex_unlock(&s->lock);
    if (st == TX_FAILED) break;
    if (st == TX_IDLE) {
      tx_wait_for_work(c);
    } else {
      struct pollfd p = {.fd = s->fd, .events = POLLOUT};
      poll(&p, 1, TCP_POLL_MS);
    }
  }
  atomic_fetch_sub(&tcp_live_threads, 1);
  return NULL;
}

/* COLLX_INLINE_RECV: the caller reads what is small and hands a large
 * piece to the stream's thread, waking it only if it is parked. */
static void rx_pump_inline(struct tcp_comm *c) {
  atomic_store(&c->caller_seen, tcp_now());
  int wake = 0;
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    rx_pump(s, 1);
    int bulk = rx_in_bulk(s);
    pthread_mutex_unlock(&s->lock);
    if (bulk && atomic_load(&s->parked) && !atomic_exchange(&s->bulk_wanted, 1)) wake = 1;
  }
  if (wake) tcp_comm_wake(c);
}

/* Let the calling thread move what it can without blocking. */
static void tx_pump_inline(struct tcp_comm *c) {
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    if (pthread_mutex_trylock(&s->lock) != 0) continue;
    tx_pump(s);
    pthread_mutex_unlock(&s->lock);
  }
}

/* COLLX_PROGRESS=caller: the comm has no stream threads, and every call
 * moves all of its requests as far as the sockets allow, bulk included, so
 * that NCCL testing only its oldest request still keeps the rest moving.
 * Sends go out a piece per stream in turn, starting from a different stream
 * each call, so that the streams share the pieces (and a stream whose
 * socket is full simply takes fewer). */
static void caller_pump(struct tcp_comm *c) {
  int n = c->nstreams, first = (int)(c->pump_turn++ % (unsigned)n);
  int sent;
  do {
    sent = 0;
    for (int k = 0; k < n; k++) {
      struct tcp_stream *s = &c->streams[(first + k) % n];
      if (pthread_mutex_trylock(&s->lock) != 0) continue;
      if (c->magic == TCP_MAGIC_SEND)
        sent |= tx_step(s);
      else
        rx_pump(s, 0);
      pthread_mutex_unlock(&s->lock);
    }
  } while (sent);
}

/* ---- sends ---------------------------------------------------------------- */

struct tcp_req *tcp_req_alloc(struct tcp_comm *c) {
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++)
    if (c->reqs[i].state == REQ_FREE) {
      struct tcp_req *r = &c->reqs[i];
      r->state = REQ_ACTIVE;
      atomic_store(&r->error, ncclSuccess);
      atomic_fetch_add(&c->active_reqs, 1);
      return r;
    }
  return NULL;
}

void tcp_req_release(struct tcp_req *r) {
  struct tcp_comm *c = r->comm;
  if (c->magic == TCP_MAGIC_RECV) {
    atomic_store(&c->by_seq[r->seq % TCP_SEQ_SLOTS], NULL);
    pthread_mutex_lock(&c->track_lock);
    for (int i = 0; i < r->n; i++) piece_track_free(&r->e[i].track);
    pthread_mutex_unlock(&c->track_lock);
  }
  r->state = REQ_FREE;
  atomic_fetch_sub(&c->active_reqs, 1);
}

/* Tell the receiver its buffer is too small, so that its request fails
 * rather than waits.  Best effort: the comm is unusable afterwards anyway. */
static void send_truncation(struct tcp_comm *c, uint32_t seq, int idx, size_t size) {
  struct tcp_stream *s = &c->streams[0];
  pthread_mutex_lock(&s->lock);
  /* Finish the heartbeat and the piece in progress so the header lands
   * on a boundary. */
  while (s->hb_active && tx_write_heartbeat(s) == SOCK_IO_AGAIN) {
    struct pollfd p = {.fd = s->fd, .events = POLLOUT};
    if (poll(&p, 1, 1000) <= 0) break;
  }
  while (!s->hb_active && s->tx_req && tx_write_piece(s) == SOCK_IO_AGAIN) {
    struct pollfd p = {.fd = s->fd, .events = POLLOUT};
    if (poll(&p, 1, 1000) <= 0) break;
  }
  if (!s->tx_req && !s->hb_active) {
    struct wire_piece h = {.magic = WIRE_MAGIC, .idx = (uint8_t)idx,
                           .flags = WIRE_PIECE_TRUNCATED, .seq = seq, .total = size};
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
static ncclResult_t send_not_yet(struct tcp_comm *c) {
  tcp_ctrl_want_cts(c);
  c->stats.isend_retries++;
  if (!c->stats.waiting) c->stats.sends_waited++;
  c->stats.waiting = 1;
  return ncclSuccess;
}

/* Queue a message matched to receive entry seq/idx for the streams. */
static void rendezvous_post(struct tcp_comm *c, struct tcp_req *r) {
  r->eager = 0;
  r->piece = collx_stripe_piece(r->size, c->nstreams, c->max_piece);
  r->npieces = collx_stripe_count(r->size, r->piece);
  r->next_piece = 0;
  atomic_store(&r->pieces_done, 0);
  pthread_mutex_lock(&c->q_lock);
  collx_list_add_tail(&c->queue, &r->qnode);
  pthread_mutex_unlock(&c->q_lock);
  if (caller_progress) {
    caller_pump(c);
    return;
  }
  /* A small message is written here and now; wake the stream threads only
   * for what is left (a futex wake and a thread hop cost more than the
   * write itself). */
  if (r->size <= TCP_INLINE_MAX) tx_pump_inline(c);
  pthread_mutex_lock(&c->q_lock);
  if (!collx_list_empty(&c->queue)) pthread_cond_broadcast(&c->q_cond);
  pthread_mutex_unlock(&c->q_lock);
}

/* Match the send to a receive entry if its CTS is in, and post it: on the
 * control socket when small, on the streams otherwise.  A small message
 * whose CTS is not in yet goes out early, matched later (tcp_eager.c); a
 * large one waits: *out stays NULL and NCCL asks again. */
ncclResult_t tcp_isend(struct tcp_comm *c, void *data, size_t size, int tag,
                       struct tcp_req **out) {
  *out = NULL;
  if (atomic_load(&c->error)) return tcp_comm_error(c);
  int eager = size <= tcp_eager_size;
  /* Read the control socket only when the CTS we need is not in yet, and
   * for a small send only once the early ones pile up: it can go early. */
  int need_cursor = !eager || c->match_tx.early_len >= TCP_EAGER_LOG / 2;
  if (need_cursor && (c->match_tx.early_len || !match_cts_ready(&c->match_tx))) {
    tcp_ctrl_drain(c);
    tcp_eager_replay(c);
    if (atomic_load(&c->error)) return tcp_comm_error(c);
  }
  struct tcp_req *r = tcp_req_alloc(c);
  if (!r) {
    COLLX_WARN("send to %s on device %s: more than %d requests outstanding", c->peer,
               c->devname, COLLX_MAX_REQUESTS);
    return ncclInvalidUsage;
  }
  r->data = data;
  r->size = size;
  int claim = 0;
  uint64_t cap = 0;
  /* While early sends wait for their CTS the cursor is not final: only
   * another early send may go. */
  if (!c->match_tx.early_len) claim = match_cts_claim(&c->match_tx, tag, &r->seq, &r->idx, &cap);
  if (claim > 0 && size > cap) {
    COLLX_WARN("message of %zu bytes to %s on device %s is larger than the receive buffer "
               "of %llu bytes posted for tag %d", size, c->peer, c->devname,
               (unsigned long long)cap, tag);
    uint32_t seq = r->seq;
    int idx = r->idx;
    tcp_req_release(r);
    send_truncation(c, seq, idx, size);
    return ncclInvalidUsage;
  }
  /* A tag of a later receive (claim < 0) waits, as does what has no room. */
  if (claim < 0 || (claim == 0 && !(eager && c->match_tx.early_len < TCP_EAGER_LOG))) {
    tcp_req_release(r);
    return send_not_yet(c);
  }
  c->stats.waiting = 0;
  c->stats.messages++;
  c->stats.bytes += size;
  *out = r;
  if (eager)
    tcp_eager_post(c, r, tag, claim > 0);
  else
    rendezvous_post(c, r);
  return ncclSuccess;
}

/* ---- receive posting ----------------------------------------------------- */

ncclResult_t tcp_irecv(struct tcp_comm *c, int n, void **data, const size_t *sizes,
                       const int *tags, struct tcp_req **out) {
  *out = NULL;
  if (atomic_load(&c->error)) return tcp_comm_error(c);
  uint32_t seq = c->recv_seq;
  if (atomic_load(&c->by_seq[seq % TCP_SEQ_SLOTS])) {
    COLLX_WARN("receive from %s on device %s: receive %u is still incomplete %d receives later",
               c->peer, c->devname, seq - TCP_SEQ_SLOTS, TCP_SEQ_SLOTS);
    return ncclInvalidUsage;
  }
  struct tcp_req *r = tcp_req_alloc(c);
  if (!r) {
    COLLX_WARN("receive from %s on device %s: more than %d requests outstanding", c->peer,
               c->devname, COLLX_MAX_REQUESTS);
    return ncclInvalidUsage;
  }
  r->seq = seq;
  r->n = n;
  r->match.claimed = 0;
  atomic_store(&r->entries_done, 0);
  for (int i = 0; i < n; i++) {
    r->e[i].buf = data[i];
    r->e[i].cap = sizes[i];
    r->match.tag[i] = tags ? tags[i] : 0;
    atomic_store(&r->e[i].received, 0);
    atomic_store(&r->e[i].total, -1);
    piece_track_reset(&r->e[i].track); /* released (freed) with its last receive */
  }
  atomic_store_explicit(&c->by_seq[seq % TCP_SEQ_SLOTS], r, memory_order_release);
  atomic_store(&c->recv_seq, seq + 1);
  COLLX_TL(COLLX_TL_IRECV, c->tl_key, seq + 1);
  ncclResult_t res = tcp_ctrl_send_cts(c, r);
  if (res != ncclSuccess) {
    tcp_req_release(r); /* the caller never sees it: nobody else would */
    return res;
  }
  *out = r;
  /* An early message for this receive may already be staged, its lane
   * blocked until now: start it.  What is still in the socket is read by
   * the first test() (irecv used to read the socket every time: a recv()
   * that, with receives posted ahead as NCCL does, nearly always found
   * nothing; bench/NOTES.md attempt 22). */
  if (atomic_load(&c->lane_blocked)) tcp_ctrl_drain(c);
  COLLX_TL(COLLX_TL_IRECV_END, c->tl_key, seq + 1);
  return ncclSuccess;
}

/* ---- completion ---------------------------------------------------------- */

static int req_is_done(struct tcp_req *r) {
  if (r->comm->magic == TCP_MAGIC_SEND)
    return atomic_load_explicit(&r->pieces_done, memory_order_acquire) == r->npieces;
  return atomic_load_explicit(&r->entries_done, memory_order_acquire) == r->n;
}


/* A receive in the middle of a message too large to be eager.  While NCCL
 * tests it, nothing on the control socket can complete before it, so its
 * tests skip that read (a recv that mostly finds nothing, on the thread
 * that drives every connection); the watchdog still reads it meanwhile. */
static int recv_in_bulk(struct tcp_req *r) {
  for (int i = 0; i < r->n; i++) {
    int64_t total = atomic_load_explicit(&r->e[i].total, memory_order_acquire);
    if (total > WIRE_EAGER_MAX && atomic_load(&r->e[i].received) < (uint64_t)total) return 1;
  }
  return 0;
}

ncclResult_t tcp_test(struct tcp_req *r, int *done, size_t *sizes) {
  struct tcp_comm *c = r->comm;
  *done = 0;
  if (r->state != REQ_ACTIVE) {
    COLLX_WARN("test called on a request that is not in flight (already completed?)");
    return ncclInvalidArgument;
  }
  /* CTS records the socket did not take at irecv go out now, done or not,
   * unless the receiver is holding them back (TCP_CTS_BATCH); a receive
   * that reads the control socket leaves that to tcp_ctrl_drain, which
   * writes what is due after reading.
   * Small messages travel on the control socket, which the caller reads and
   * writes itself.
   * Other receives are read by the stream threads, and with
   * COLLX_INLINE_RECV also by a caller polling test(), which then needs no
   * thread wake-up; a small send still queued (its stream was busy) can be
   * pushed by the caller. */
  if (c->magic == TCP_MAGIC_RECV) {
    if (!req_is_done(r) && !recv_in_bulk(r))
      tcp_ctrl_drain(c);
    else
      tcp_ctrl_pump_due(c);
  }
  if (!req_is_done(r)) {
    if (r->eager) tcp_ctrl_pump(c);
    if (c->magic == TCP_MAGIC_RECV && tcp_peer_finished(c))
      tcp_comm_fail(c, ncclRemoteError, "connection closed by peer");
    if (caller_progress) {
      caller_pump(c);
    } else if (c->magic == TCP_MAGIC_SEND) {
      if (r->size <= TCP_INLINE_MAX && !r->eager) tx_pump_inline(c);
    } else if (inline_recv) {
      rx_pump_inline(c);
    }
  }
  if (req_is_done(r)) {
    if (c->magic == TCP_MAGIC_RECV) COLLX_TL(COLLX_TL_DONE, c->tl_key, r->seq + 1);
    ncclResult_t res = (ncclResult_t)atomic_load(&r->error);
    if (sizes) {
      if (c->magic == TCP_MAGIC_SEND)
        sizes[0] = r->size;
      else
        for (int i = 0; i < r->n; i++) sizes[i] = (size_t)atomic_load(&r->e[i].total);
    }
    if (c->magic == TCP_MAGIC_RECV) {
      c->stats.messages++;
      for (int i = 0; i < r->n; i++) c->stats.bytes += (uint64_t)atomic_load(&r->e[i].total);
    }
    tcp_req_release(r);
    if (res != ncclSuccess) return res;
    *done = 1;
    return ncclSuccess;
  }
  if (atomic_load(&c->error)) {
    tcp_req_release(r);
    return tcp_comm_error(c);
  }
  return ncclSuccess;
}

/* ---- comm lifetime ------------------------------------------------------- */

static void close_fds(int ctrl_fd, int n, const int *fds) {
  if (ctrl_fd >= 0) close(ctrl_fd);
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* The connecting (sending) side's port of the control socket: both ends
 * know it, so a timeline pairs a send with its receive. */
static uint32_t timeline_key(int fd, int is_send) {
#ifdef COLLX_TIMELINE
  struct sockaddr_storage a;
  socklen_t len = sizeof a;
  if ((is_send ? getsockname(fd, (struct sockaddr *)&a, &len) : getpeername(fd, (struct sockaddr *)&a, &len)) != 0)
    return 0;
  return (uint32_t)sock_port(&a);
#else
  (void)fd;
  (void)is_send;
  return 0;
#endif
}

ncclResult_t tcp_comm_start(int is_send, int dev, const char *devname, const char *peer,
                            int ctrl_fd, int nstreams, const int *stream_fds,
                            size_t max_piece, struct tcp_comm **out) {
  /* The comm holds the request pool and the stream state, which the stream
   * threads touch for every piece: keep it on the NIC's NUMA node. */
  struct tcp_comm *c = collx_topo_alloc_local(dev, sizeof *c);
  if (c) memset(c, 0, sizeof *c);
  if (!c) {
    close_fds(ctrl_fd, nstreams, stream_fds);
    COLLX_WARN("out of memory for a comm with %s", peer);
    return ncclSystemError;
  }
  c->magic = is_send ? TCP_MAGIC_SEND : TCP_MAGIC_RECV;
  c->dev = dev;
  /* Connections of one device count up together, send and receive alike
   * and across the node's processes, so that the placement plan spreads
   * their threads over its cores. */
  c->serial = collx_topo_next_serial(dev);
  snprintf(c->devname, sizeof c->devname, "%s", devname);
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  c->ctrl_fd = ctrl_fd;
  c->tl_key = timeline_key(ctrl_fd, is_send);
  c->nstreams = nstreams;
  c->max_piece = max_piece;
  /* Until the traffic shows its sizes, every CTS goes out at once. */
  match_hold_init(&c->hold);
  collx_list_init(&c->queue);
  collx_list_init(&c->lane_queue);
  pthread_mutex_init(&c->q_lock, NULL);
  if (tcp_cond_init(&c->q_cond) != 0) {
    COLLX_WARN("cannot create a condition variable for a comm with %s", peer);
    close_fds(ctrl_fd, nstreams, stream_fds);
    collx_topo_free_local(c);
    return ncclSystemError;
  }
  pthread_mutex_init(&c->ctrl_rx_lock, NULL);
  pthread_mutex_init(&c->ctrl_tx_lock, NULL);
  pthread_mutex_init(&c->track_lock, NULL);
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++) {
    c->reqs[i].magic = TCP_MAGIC_REQ;
    c->reqs[i].comm = c;
    collx_list_init(&c->reqs[i].qnode);
  }
  for (int i = 0; i < nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    s->fd = stream_fds[i];
    s->index = i;
    s->comm = c;
    pthread_mutex_init(&s->lock, NULL);
  }
  for (int i = 0; i < nstreams && !is_send; i++) {
    c->streams[i].stage = collx_topo_alloc_local(dev, TCP_STAGE_SIZE);
    if (!c->streams[i].stage) {
      COLLX_WARN("out of memory for the receive buffers of a comm with %s", peer);
      tcp_comm_close(c);
      return ncclSystemError;
    }
  }
  for (int i = 0; i < nstreams && !caller_progress; i++) {
    struct tcp_stream *s = &c->streams[i];
    atomic_fetch_add(&tcp_live_threads, 1);
    int err = pthread_create(&s->thread, NULL, is_send ? tx_thread : rx_thread, s);
    if (err != 0) {
      atomic_fetch_sub(&tcp_live_threads, 1);
      COLLX_WARN("cannot start stream thread %d for %s: %s", i, peer, strerror(err));
      tcp_comm_close(c);
      return ncclSystemError;
    }
    s->thread_started = 1;
  }
  collx_list_init(&c->wd_node);
  if (tcp_watchdog_add(c) != 0) {
    tcp_comm_close(c);
    return ncclSystemError;
  }
  c->watched = 1;
  *out = c;
  return ncclSuccess;
}

void tcp_comm_wake(struct tcp_comm *c) {
  pthread_mutex_lock(&c->q_lock);
  pthread_cond_broadcast(&c->q_cond);
  pthread_mutex_unlock(&c->q_lock);
}

static void log_stats(const struct tcp_comm *c) {
  if (c->magic == TCP_MAGIC_SEND)
    COLLX_INFO(COLLX_LOG_NET, "send connection to %s on device %s closed: %llu messages, %llu bytes; %llu sends "
               "found the receiver not ready at their first isend (%llu isend calls without a request); "
               "%llu eager, %llu of them before their CTS; %llu CTS_WANTED",
               c->peer, c->devname, (unsigned long long)c->stats.messages,
               (unsigned long long)c->stats.bytes, (unsigned long long)c->stats.sends_waited,
               (unsigned long long)c->stats.isend_retries, (unsigned long long)c->stats.eager,
               (unsigned long long)c->stats.early, (unsigned long long)c->stats.cts_wanted);
  else
    COLLX_INFO(COLLX_LOG_NET, "receive connection from %s on device %s closed: %llu receives completed, %llu bytes",
               c->peer, c->devname, (unsigned long long)c->stats.messages,
               (unsigned long long)c->stats.bytes);
}

/* How long close waits for the peer's kernel to take what is still queued
 * on the control socket. */
#define TCP_CLOSE_LINGER_S 0.2

/* Close the control socket without a reset.  Closing a socket with unread
 * bytes (a heartbeat or CTS that came after the last read) makes the
 * kernel send a reset, which drops what it still holds for the peer (eager
 * messages) and fails the peer's reads.  So: end our direction (the peer
 * reads everything, then end of stream), read and drop what has come in,
 * and close once the peer has acknowledged all we sent, the peer has
 * closed too, or a short while has passed.  A comm that has failed does
 * not wait: its peer is gone. */
static void ctrl_close_gently(struct tcp_comm *c) {
  int fd = c->ctrl_fd;
  shutdown(fd, SHUT_WR);
  double until = tcp_now() + (atomic_load(&c->error) ? 0 : TCP_CLOSE_LINGER_S);
  static __thread char sink[4096];
  for (;;) {
    ssize_t n;
    while ((n = recv(fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    int unacked = 0;
    if (ioctl(fd, SIOCOUTQ, &unacked) != 0 || unacked == 0) break;
    if (tcp_now() >= until) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, 5);
  }
  close(fd);
}

void tcp_comm_close(struct tcp_comm *c) {
  tcp_connect_reap();
  if (c->magic == TCP_MAGIC_SEND || c->magic == TCP_MAGIC_RECV) log_stats(c);
  if (c->watched) tcp_watchdog_remove(c);
  atomic_store(&c->stop, 1);
  /* Wake every thread: blocked in poll (shutdown makes the fd ready) or
   * waiting for work.  Nothing waits on the peer. */
  for (int i = 0; i < c->nstreams; i++) shutdown(c->streams[i].fd, SHUT_RDWR);
  tcp_comm_wake(c);
  for (int i = 0; i < c->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    if (s->thread_started) pthread_join(s->thread, NULL);
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
    collx_topo_free_local(s->stage);
    s->stage = NULL;
  }
  ctrl_close_gently(c);
  pthread_mutex_destroy(&c->q_lock);
  pthread_cond_destroy(&c->q_cond);
  pthread_mutex_destroy(&c->ctrl_rx_lock);
  pthread_mutex_destroy(&c->ctrl_tx_lock);
  for (int i = 0; i < COLLX_MAX_REQUESTS; i++) {
    for (int k = 0; k < COLLX_MAX_RECVS; k++) piece_track_free(&c->reqs[i].e[k].track);
    c->reqs[i].magic = TCP_MAGIC_DEAD;
  }
  pthread_mutex_destroy(&c->track_lock);
  c->magic = TCP_MAGIC_DEAD;
  tcp_quarantine(c, collx_topo_free_local);
}

/* A small ring of recently closed objects; the oldest is released when a
 * new one comes in. */
#define TCP_QUARANTINE 64
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void *obj;
  void (*release)(void *);
} quarantine[TCP_QUARANTINE];
static unsigned quarantine_next;

void tcp_quarantine(void *obj, void (*release)(void *)) {
  pthread_mutex_lock(&quarantine_lock);
  unsigned k = quarantine_next++ % TCP_QUARANTINE;
  void *old = quarantine[k].obj;
  void (*old_release)(void *) = quarantine[k].release;
  quarantine[k].obj = obj;
  quarantine[k].release = release;
  pthread_mutex_unlock(&quarantine_lock);
  if (old) old_release(old);
}

int tcp_is_send_comm(const void *p) { return p && ((const struct tcp_comm *)p)->magic == TCP_MAGIC_SEND; }
int tcp_is_recv_comm(const void *p) { return p && ((const struct tcp_comm *)p)->magic == TCP_MAGIC_RECV; }
int tcp_is_req(const void *p) { return p && ((const struct tcp_req *)p)->magic == TCP_MAGIC_REQ; }

/* NCCL dlcloses the plugin after the last close: release what is kept. */
__attribute__((destructor(200))) static void quarantine_drain(void) {
  for (unsigned k = 0; k < TCP_QUARANTINE; k++)
    if (quarantine[k].obj) {
      quarantine[k].release(quarantine[k].obj);
      quarantine[k].obj = NULL;
    }
}
