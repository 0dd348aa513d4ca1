/*
 * The control channel (ctrl.h): its writer, its reader, and the spare
 * socket that failover keeps beside the first.
 *
 * Two sockets.  Every control byte is written on both, in the same order,
 * so that the loss of either path loses nothing.  The spare is written in
 * batches from the writer's history (COLLX_CTRL_SPARE_BATCH): a batch of
 * records or an item is finished once the first socket has it and the
 * history holds it until the spare does, and a loss sends the spare what
 * it lacks before anything else.  The reader reads one socket and drops
 * the other's copy up to the same place; when the one it reads is given
 * up, or goes quiet for COLLX_FAILOVER_MS while the other brings more, it
 * reads the other from that place on (waiting there for the bytes a batch
 * has not brought yet).  Without a spare these are plain reads and writes
 * of the one socket.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base.h"
#include "ctrl.h"
#include "linger.h"
#include "util/log.h"

/* How long the spare may lack a byte written on the first socket: the
 * loss of the first path is noticed by the writer and sends it at once,
 * but a peer that gives up reading the first socket on its own reads the
 * spare before the writer knows, and waits this long for each batch. */
#define LAZY_DELAY_S 0.02

/* The history's size: what the spare may lack (a batch) plus the largest
 * piece written after it before the spare is written again (all the
 * records queued, or one eager message). */
static size_t history_cap(void) {
  size_t records = TCP_CTRL_TX_RECORDS * sizeof(struct wire_ctrl);
  size_t item = sizeof(struct wire_eager) + tcp_cfg.eager_size;
  return tcp_cfg.ctrl_spare_batch + (records > item ? records : item);
}

/* Written in batches when set and the history is there to hold what the
 * spare lacks; else the history is allocated at the first loss. */
static void lazy_init(struct tcp_ctrl *k) {
  k->lazy = -1;
  k->hist_cap = TCP_CTRL_HISTORY;
  if (!k->spare || tcp_cfg.ctrl_spare_batch == 0) return;
  size_t cap = history_cap();
  if (!(k->hist = malloc(cap))) return;
  k->hist_cap = cap;
  k->lazy = 1;
}

int tcp_ctrl_init(struct tcp_ctrl *k, struct tcp_comm_base *comm, const struct tcp_ctrl_ops *ops, int fd,
                  int spare_fd) {
  k->comm = comm;
  k->ops = ops;
  k->fd[0] = fd;
  k->fd[1] = spare_fd;
  k->spare = spare_fd >= 0;
  atomic_store(&k->live, spare_fd >= 0 ? 3 : 1);
  k->rd_other_dead = spare_fd < 0;
  k->rd_last = tcp_now();
  if (pthread_mutex_init(&k->tx_lock, NULL) != 0) return -1;
  if (pthread_mutex_init(&k->rx_lock, NULL) != 0) {
    pthread_mutex_destroy(&k->tx_lock);
    return -1;
  }
  lazy_init(k);
  return 0;
}

static int is_live(const struct tcp_ctrl *k, int which) {
  return atomic_load(&((struct tcp_ctrl *)k)->live) >> which & 1;
}

int tcp_ctrl_live(const struct tcp_ctrl *k, int which) { return is_live(k, which); }

/* ---- both sockets ----------------------------------------------------------- */

void tcp_ctrl_lose(struct tcp_ctrl *k, int which, const char *why) {
  struct tcp_comm_base *c = k->comm;
  int bit = 1 << which;
  int before = atomic_fetch_and(&k->live, ~bit);
  if (!(before & bit)) return;
  if (!(before & ~bit)) {
    tcp_comm_failf(c, ncclRemoteError, "the control connection is lost (%s)", why);
    return;
  }
  COLLX_INFO(COLLX_LOG_NET, "%s connection with %s on device %s: control socket %d given up (%s); the other "
             "carries on", c->role->name, c->peer, c->devname, which, why);
  atomic_store(&k->rd_switch, 1);
}

/* Write bytes [done[k], hlen + plen) of a header and a payload on every
 * socket in use but a lazy one: DONE once each has them all.  A socket
 * that fails is given up while another is left; the last one's failure
 * is returned. */
static enum sock_io send_both(struct tcp_ctrl *k, const void *hdr, size_t hlen, const void *payload, size_t plen,
                              size_t done[2]) {
  enum sock_io result = SOCK_IO_DONE;
  for (int w = 0; w < 2; w++) {
    if (w == k->lazy || !is_live(k, w) || done[w] == hlen + plen) continue;
    enum sock_io io = sock_send_two(k->fd[w], hdr, hlen, payload, plen, &done[w]);
    if (io == SOCK_IO_DONE) continue;
    if (io == SOCK_IO_AGAIN) {
      result = SOCK_IO_AGAIN;
      continue;
    }
    if (!(atomic_load(&k->live) & ~(1 << w))) return io;
    tcp_ctrl_lose(k, w, tcp_io_reason(io));
  }
  return result;
}

/* ---- the writer's history ---------------------------------------------------- */

/* Bytes just counted into tx_pos.  Kept while a socket is given up or
 * the spare is written in batches: when both are in use and written
 * alike, each has every byte. */
static void hist_add(struct tcp_ctrl *k, const void *p, size_t n) {
  if (!k->spare || (k->lazy < 0 && atomic_load_explicit(&k->live, memory_order_relaxed) == 3)) return;
  if (!k->hist && !(k->hist = malloc(k->hist_cap))) return; /* a rejoin then waits for every ack */
  size_t cap = k->hist_cap;
  const char *b = p;
  if (n > cap) {
    b += n - cap;
    n = cap;
  }
  size_t at = (size_t)((k->tx_pos - n) % cap), first = cap - at;
  if (first > n) first = n;
  memcpy(k->hist + at, b, first);
  memcpy(k->hist, b + first, n - first);
  k->hist_len = k->hist_len + n > cap ? cap : k->hist_len + n;
}

/* Count n bytes of the stream written whole (on every socket in use, or
 * on the first and into the history the lazy spare is written from). */
static void tx_advance(struct tcp_ctrl *k, const void *p, size_t n) {
  if (k->lazy >= 0 && k->lazy_pos == k->tx_pos && n > 0) k->lazy_since = tcp_now();
  k->tx_pos += n;
  hist_add(k, p, n);
}

static void tx_advance_two(struct tcp_ctrl *k, const void *a, size_t alen, const void *b, size_t blen) {
  tx_advance(k, a, alen);
  tx_advance(k, b, blen);
}

/* ---- the writer ------------------------------------------------------------- */

void tcp_ctrl_lock(struct tcp_ctrl *k) { pthread_mutex_lock(&k->tx_lock); }
int tcp_ctrl_trylock(struct tcp_ctrl *k) { return pthread_mutex_trylock(&k->tx_lock); }
int tcp_ctrl_writer_dead(const struct tcp_ctrl *k) { return k->tx_dead; }

/* Bytes of queued records every socket in use has written (a lazy one
 * takes them from the history). */
static size_t records_written(const struct tcp_ctrl *k) {
  if (k->lazy >= 0) return k->tx_done[!k->lazy];
  int live = atomic_load(&((struct tcp_ctrl *)k)->live);
  if (live == 3) return k->tx_done[0] < k->tx_done[1] ? k->tx_done[0] : k->tx_done[1];
  return live == 2 ? k->tx_done[1] : k->tx_done[0];
}

/* Forget every byte queued and every cursor: the one place they are
 * reset, so no cursor can point past what is queued. */
static void tx_reset(struct tcp_ctrl *k) {
  k->tx_len = k->tx_done[0] = k->tx_done[1] = 0;
  k->item_active = 0;
  k->item_done[0] = k->item_done[1] = 0;
}

/* No socket is left to write: what is queued is dropped, and nothing more
 * is taken. */
static void writer_dies(struct tcp_ctrl *k, enum sock_io io) {
  k->tx_dead = 1;
  tx_reset(k);
  if (k->ops->write_error_fails) tcp_comm_fail(k->comm, ncclRemoteError, tcp_io_reason(io));
}

int tcp_ctrl_queue(struct tcp_ctrl *k, const struct wire_ctrl *m) {
  if (k->tx_dead) return -1;
  size_t written = records_written(k);
  if (written > 0) {
    /* Written whole: counted into the stream's position as they leave. */
    tx_advance(k, k->tx, written);
    memmove(k->tx, k->tx + written, k->tx_len - written);
    k->tx_len -= written;
    for (int w = 0; w < 2; w++) k->tx_done[w] = k->tx_done[w] > written ? k->tx_done[w] - written : 0;
  }
  if (k->tx_len + sizeof *m > sizeof k->tx) return -1;
  memcpy(k->tx + k->tx_len, m, sizeof *m);
  k->tx_len += sizeof *m;
  return 0;
}

size_t tcp_ctrl_held(const struct tcp_ctrl *k) { return (k->tx_len - records_written(k)) / sizeof(struct wire_ctrl); }

/* ---- the spare written in batches ------------------------------------------- */

/* Write on the lazy socket what it lacks, [lazy_pos, tx_pos), from the
 * history. */
static enum sock_io lazy_write(struct tcp_ctrl *k) {
  size_t n = (size_t)(k->tx_pos - k->lazy_pos), cap = k->hist_cap;
  if (n == 0) return SOCK_IO_DONE;
  size_t at = (size_t)(k->lazy_pos % cap), first = n < cap - at ? n : cap - at, done = 0;
  enum sock_io io = sock_send_two(k->fd[k->lazy], k->hist + at, first, k->hist, n - first, &done);
  k->lazy_pos += done;
  if (done > 0 && k->lazy_pos < k->tx_pos) k->lazy_since = tcp_now();
  return io;
}

/* The lazy socket failed: given up while the other is in use (which the
 * caller then sees as a loss), else the writer's end. */
static enum sock_io lazy_failed(struct tcp_ctrl *k, enum sock_io io) {
  int other = !k->lazy;
  if (!is_live(k, other)) return io;
  tcp_ctrl_lose(k, k->lazy, tcp_io_reason(io));
  return SOCK_IO_DONE;
}

/* Stop writing in batches (a socket was given up, or a piece would not
 * fit the history): the lazy socket first takes everything it lacks, so
 * that what is written on it from here on follows on.  AGAIN while it has
 * not; DONE once stopped. */
static enum sock_io lazy_stop(struct tcp_ctrl *k) {
  if (is_live(k, k->lazy)) {
    enum sock_io io = lazy_write(k);
    if (io == SOCK_IO_AGAIN) return io;
    if (io != SOCK_IO_DONE && (io = lazy_failed(k, io)) != SOCK_IO_DONE) return io;
  }
  k->lazy = -1;
  return SOCK_IO_DONE;
}

/* Before `need` more bytes go out on the first socket alone: the history
 * must keep them until the spare has them.  DONE when it has room, AGAIN
 * while the spare has not taken enough. */
static enum sock_io lazy_room(struct tcp_ctrl *k, size_t need) {
  if (k->lazy < 0) return SOCK_IO_DONE;
  if (atomic_load(&k->live) != 3 || need > k->hist_cap) return lazy_stop(k);
  if (k->tx_pos - k->lazy_pos + need <= k->hist_cap) return SOCK_IO_DONE;
  enum sock_io io = lazy_write(k);
  if (io != SOCK_IO_DONE && io != SOCK_IO_AGAIN) return lazy_failed(k, io);
  return k->tx_pos - k->lazy_pos + need <= k->hist_cap ? SOCK_IO_DONE : SOCK_IO_AGAIN;
}

/* A batch for the spare once COLLX_CTRL_SPARE_BATCH bytes have gathered
 * or the oldest has waited LAZY_DELAY_S. */
static enum sock_io lazy_due(struct tcp_ctrl *k) {
  if (k->lazy < 0 || k->lazy_pos == k->tx_pos) return SOCK_IO_DONE;
  if (k->tx_pos - k->lazy_pos < tcp_cfg.ctrl_spare_batch && tcp_now() - k->lazy_since < LAZY_DELAY_S)
    return SOCK_IO_DONE;
  enum sock_io io = lazy_write(k);
  return io == SOCK_IO_DONE || io == SOCK_IO_AGAIN ? SOCK_IO_DONE : lazy_failed(k, io);
}

/* ---- records and items ------------------------------------------------------ */

static enum sock_io write_records(struct tcp_ctrl *k) {
  /* Every byte queued is counted into the history once written. */
  enum sock_io io = lazy_room(k, k->tx_len);
  if (io != SOCK_IO_DONE) return io;
  io = send_both(k, k->tx, k->tx_len, NULL, 0, k->tx_done);
  if (io == SOCK_IO_DONE) {
    tx_advance(k, k->tx, k->tx_len);
    k->tx_len = k->tx_done[0] = k->tx_done[1] = 0;
  }
  return io;
}

static enum sock_io write_item(struct tcp_ctrl *k) {
  enum sock_io io = lazy_room(k, k->item.hlen + k->item.plen);
  if (io != SOCK_IO_DONE) return io;
  io = send_both(k, k->item.hdr, k->item.hlen, k->item.payload, k->item.plen, k->item_done);
  if (io == SOCK_IO_DONE) {
    tx_advance_two(k, k->item.hdr, k->item.hlen, k->item.payload, k->item.plen);
    k->item_active = 0;
    k->ops->item_done(k);
  }
  return io;
}

/* Start the role's next item after the records.  0 when it has none. */
static int start_item(struct tcp_ctrl *k) {
  if (!k->ops->next_item || !k->ops->next_item(k, &k->item)) return 0;
  k->item_active = 1;
  k->item_done[0] = k->item_done[1] = 0;
  return 1;
}

/* The order on the wire: the item in progress, then the records queued
 * (those queued during it land behind it), then the next item. */
int tcp_ctrl_flush(struct tcp_ctrl *k) {
  for (;;) {
    if (k->tx_dead) return k->ops->write_error_fails ? -1 : 0;
    if (k->ops->fill && k->ops->owed(k)) k->ops->fill(k);
    enum sock_io io;
    if (k->lazy >= 0 && atomic_load(&k->live) != 3)
      io = lazy_stop(k); /* a socket was given up: the spare first takes what it lacks */
    else if (k->item_active)
      io = write_item(k);
    else if (records_written(k) < k->tx_len)
      io = write_records(k);
    else if (start_item(k))
      continue;
    else if ((io = lazy_due(k)) == SOCK_IO_DONE)
      return 0;
    if (io == SOCK_IO_AGAIN) return 1;
    if (io != SOCK_IO_DONE) writer_dies(k, io);
  }
}

void tcp_ctrl_unlock(struct tcp_ctrl *k) {
  pthread_mutex_unlock(&k->tx_lock);
  /* Owed while the lock was held (by a thread that found it taken). */
  if (!k->ops->owed || !k->ops->owed(k) || pthread_mutex_trylock(&k->tx_lock) != 0) return;
  tcp_ctrl_flush(k);
  pthread_mutex_unlock(&k->tx_lock);
}

void tcp_ctrl_pump(struct tcp_ctrl *k) {
  if (tcp_ctrl_trylock(k) != 0) return;
  tcp_ctrl_flush(k);
  tcp_ctrl_unlock(k);
}

void tcp_ctrl_heartbeat(struct tcp_ctrl *k, double now) {
  if (tcp_ctrl_trylock(k) != 0) return;
  if (tcp_ctrl_flush(k) == 0 && now - k->last_sent >= TCP_HEARTBEAT_INTERVAL_S) {
    struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_HEARTBEAT};
    if (tcp_ctrl_queue(k, &m) == 0) k->last_sent = now;
    tcp_ctrl_flush(k);
  }
  tcp_ctrl_unlock(k);
}

void tcp_ctrl_wait_writable(struct tcp_ctrl *k, int ms) {
  struct pollfd p[2];
  int n = 0;
  for (int w = 0; w < 2; w++)
    if (is_live(k, w)) p[n++] = (struct pollfd){.fd = k->fd[w], .events = POLLOUT};
  poll(p, (nfds_t)n, ms);
}

/* ---- the reader ------------------------------------------------------------- */

/* Why a peek.  A read that empties a socket after a small segment makes the
 * kernel acknowledge it right then, inside that recv, and on loopback or
 * veth the ACK's trip through the peer's TCP stack runs on the reading
 * thread: 2-4 us before the caller learns that its message is in
 * (bench/NOTES.md 37).  So a socket awaited (empty at its last read) is
 * read with MSG_PEEK, which leaves the bytes queued and sends nothing, and
 * they are consumed at the next read of that socket, once the caller has
 * acted on them (COLLX_CTRL_PEEK).  rd_pos counts peeked bytes as read: a
 * switch to the spare abandons the socket, peeked bytes and all.  After a
 * message too large for the staging buffer (rd_bulky) the next is read
 * without a peek: the ACK goes out with the rest of such a message anyway,
 * and the peeked bytes would be read twice, one syscall more. */

/* Drop up to `len` bytes of socket fd, counted into *pos.  Read into a
 * buffer: a recv with none (MSG_TRUNC) is what sanitizers and valgrind
 * take for a write through NULL.  -1 when it has failed or ended. */
static int drop_bytes(int fd, uint64_t len, uint64_t *pos) {
  char sink[4096];
  while (len > 0) {
    ssize_t n = recv(fd, sink, len < sizeof sink ? (size_t)len : sizeof sink, MSG_DONTWAIT);
    if (n > 0) {
      *pos += (uint64_t)n;
      len -= (uint64_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  return 0;
}

/* Read the other socket from now on; first drop what of it was read
 * from the first (rd_skip). */
static void reader_switch(struct tcp_ctrl *k) {
  if (k->rd_other_dead) return;
  struct tcp_comm_base *c = k->comm;
  int unread = 0;
  if (k->rd_other_pos > k->rd_pos && ioctl(k->fd[k->rd], FIONREAD, &unread) == 0 && (size_t)unread > k->rd_peeked) {
    /* The other came back at a byte not read yet, and what lies between
     * has arrived here: read it first (a socket given up stays open). */
    atomic_store(&k->rd_switch, 1);
    return;
  }
  if (k->rd_other_pos > k->rd_pos) {
    /* The other came back at a byte the reader had not reached: what lies
     * between was only on the socket given up. */
    tcp_comm_failf(c, ncclRemoteError, "the control connection is lost (bytes %llu to %llu were only on the "
                   "socket given up)", (unsigned long long)k->rd_pos, (unsigned long long)k->rd_other_pos);
    return;
  }
  k->rd = !k->rd;
  k->rd_skip = k->rd_pos - k->rd_other_pos;
  k->rd_peeked = 0;
  k->rd_awaited = 0;
  k->rd_other_dead = 1; /* the one given up is not read again */
  k->rd_last = tcp_now();
  COLLX_INFO(COLLX_LOG_NET, "%s connection with %s on device %s: reading control socket %d from byte %llu on",
             c->role->name, c->peer, c->devname, k->rd, (unsigned long long)k->rd_pos);
}

/* Keep the copy on the socket not read drained up to where the reader is,
 * so that the peer's writes to it never stall for room: once it lags by
 * SPARE_LAG (a call that finds less costs a syscall per read for
 * nothing), and at the watchdog's look whatever the lag. */
#define SPARE_LAG (256 * 1024)

/* The other socket came back: read the peer's RESUME on it, and from then
 * on take it as the copy of the stream from the byte it names. */
static void read_resume(struct tcp_ctrl *k) {
  int fd = k->fd[!k->rd];
  enum sock_io io = sock_recv_some(fd, &k->resume, sizeof k->resume, &k->resume_got);
  if (io == SOCK_IO_AGAIN) return;
  const char *why = "closed before its RESUME";
  k->rd_resume = 0;
  if (io == SOCK_IO_DONE && wire_resume_check(&k->resume, &why) == 0) {
    k->rd_other_pos = k->resume.e[0].size;
    k->rd_other_dead = 0;
    return;
  }
  tcp_ctrl_lose(k, !k->rd, why);
}

static void other_drain(struct tcp_ctrl *k, int any_lag) {
  if (k->rd_resume) read_resume(k);
  if (k->rd_other_dead || k->rd_other_pos >= k->rd_pos) return;
  if (!any_lag && k->rd_pos - k->rd_other_pos < SPARE_LAG) return;
  if (drop_bytes(k->fd[!k->rd], k->rd_pos - k->rd_other_pos, &k->rd_other_pos) != 0) k->rd_other_dead = 1;
}

/* Read socket fd, the one read: first consume what the last read only
 * peeked at; then peek (one call) or read. */
static enum sock_io recv_from(struct tcp_ctrl *k, int fd, void *buf, size_t len, size_t *done, int once, int peek) {
  if (k->rd_peeked) {
    uint64_t gone = 0;
    int rc = drop_bytes(fd, k->rd_peeked, &gone);
    k->rd_peeked -= (size_t)gone;
    if (rc != 0 || k->rd_peeked) return SOCK_IO_ERROR; /* they were queued: only a failure keeps them */
  }
  if (!peek) return once ? sock_recv_once(fd, buf, len, done) : sock_recv_some(fd, buf, len, done);
  size_t before = *done;
  enum sock_io io = sock_peek_once(fd, buf, len, done);
  k->rd_peeked = *done - before;
  return io;
}

static enum sock_io ctrl_read(struct tcp_ctrl *k, void *buf, size_t len, size_t *done, int once, int peek) {
  if (!k->spare) return recv_from(k, k->fd[0], buf, len, done, once, peek);
  if (atomic_exchange(&k->rd_switch, 0) && !is_live(k, k->rd)) reader_switch(k);
  int fd = k->fd[k->rd];
  if (k->rd_skip) {
    uint64_t pos = 0;
    int rc = drop_bytes(fd, k->rd_skip, &pos);
    k->rd_skip -= pos;
    if (rc != 0) return SOCK_IO_ERROR;
    if (k->rd_skip) return SOCK_IO_AGAIN;
  }
  size_t before = *done;
  enum sock_io io = recv_from(k, fd, buf, len, done, once, peek);
  k->rd_pos += *done - before;
  if (*done > before) k->rd_last = tcp_now();
  if ((io == SOCK_IO_ERROR || io == SOCK_IO_EOF) && !k->rd_other_dead && *done == before) {
    /* The path of the one read failed; the copy on the other is whole. */
    tcp_ctrl_lose(k, k->rd, tcp_io_reason(io));
    atomic_store(&k->rd_switch, 0);
    reader_switch(k);
    return ctrl_read(k, buf, len, done, once, peek);
  }
  other_drain(k, 0);
  return io;
}

enum sock_io tcp_ctrl_recv(struct tcp_ctrl *k, void *buf, size_t len, size_t *done, int once) {
  return ctrl_read(k, buf, len, done, once, 0);
}

/* How a read that brought nothing ended: the end of the stream between
 * messages is the peer's goodbye where the role says so; anything but a
 * dry socket otherwise fails the comm. */
static void read_ended(struct tcp_ctrl *k, enum sock_io io) {
  int between = k->rx_pos == k->rx_done && (!k->ops->at_boundary || k->ops->at_boundary(k));
  if (io == SOCK_IO_EOF && between && k->ops->eof_is_goodbye) {
    atomic_store(&k->eof, 1);
    return;
  }
  if (io == SOCK_IO_AGAIN) return;
  tcp_comm_fail(k->comm, ncclRemoteError,
                io != SOCK_IO_EOF ? tcp_io_reason(io)
                : between         ? "connection closed by peer"
                                  : "connection closed by peer in the middle of a message");
}

/* Parse the staged bytes, reading more as they are used up.  Reader
 * held. */
static void read_and_parse(struct tcp_ctrl *k) {
  int dry = 0;
  if (atomic_load(&k->eof)) return;
  while (!tcp_comm_failed(k->comm)) {
    int parsed = k->ops->parse(k);
    if (parsed < 0) return;
    if (parsed > 0) continue;
    if (dry) return;
    memmove(k->rx, k->rx + k->rx_pos, k->rx_done - k->rx_pos);
    k->rx_done -= k->rx_pos;
    k->rx_pos = 0;
    size_t before = k->rx_done;
    int peek = tcp_cfg.ctrl_peek && k->rd_awaited && !k->rd_bulky;
    enum sock_io io = ctrl_read(k, k->rx, sizeof k->rx, &k->rx_done, 1, peek);
    k->rd_awaited = io == SOCK_IO_AGAIN && k->rx_done == before;
    if (k->rx_done > before) {
      tcp_comm_heard(k->comm);
      dry = k->rx_done < sizeof k->rx; /* a short read: nothing more for now */
      continue;
    }
    read_ended(k, io);
    return;
  }
}

void tcp_ctrl_drain(struct tcp_ctrl *k) {
  if (pthread_mutex_trylock(&k->rx_lock) != 0) return;
  read_and_parse(k);
  pthread_mutex_unlock(&k->rx_lock);
}

/* ---- the watchdog's look ---------------------------------------------------- */

/* The socket read has brought nothing for COLLX_FAILOVER_MS and holds
 * nothing unread (a reader waiting for a receive leaves bytes there on
 * purpose), while the other has bytes beyond it. */
static int reader_behind(struct tcp_ctrl *k, double now) {
  if (k->rd_other_dead || now - k->rd_last < tcp_cfg.failover_ms * 1e-3) return 0;
  int here = 0, there = 0;
  if (ioctl(k->fd[k->rd], FIONREAD, &here) != 0 || here < 0 || (size_t)here > k->rd_peeked) return 0;
  if (ioctl(k->fd[!k->rd], FIONREAD, &there) != 0) return 0;
  return k->rd_other_pos + (uint64_t)there > k->rd_pos;
}

void tcp_ctrl_watch(struct tcp_ctrl *k, double now) {
  if (!k->spare) return;
  char why[64];
  snprintf(why, sizeof why, "no acknowledgement for %d ms", tcp_cfg.failover_ms);
  for (int w = 0; w < 2; w++)
    if (is_live(k, w) && sock_stalled(k->fd[w], &k->stall[w], now, tcp_cfg.failover_ms)) tcp_ctrl_lose(k, w, why);
  if (pthread_mutex_trylock(&k->rx_lock) != 0) return;
  other_drain(k, 1);
  if (reader_behind(k, now)) {
    tcp_ctrl_lose(k, k->rd, "nothing arrives on it while the spare brings more");
    atomic_store(&k->rd_switch, 0);
    reader_switch(k);
  }
  pthread_mutex_unlock(&k->rx_lock);
}

/* ---- a socket coming back --------------------------------------------------- */

/* Where the socket coming back starts: the first byte the peer's kernel
 * has not acknowledged on the other.  Bytes written while this one was
 * gone are on the other alone, and may still be in flight when the other's
 * path goes next: they go again on this one, from the history.  Those
 * acknowledged wait in the peer's kernel, read before any switch.  Fails
 * (-1) when the history does not reach back that far. */
static int resume_from(struct tcp_ctrl *k, int other, uint64_t *from) {
  uint64_t unacked = sock_outq(k->fd[other]);
  size_t held = k->hist ? k->hist_len : 0;
  if (unacked > held || unacked > TCP_CTRL_HISTORY || unacked > k->tx_pos) return -1;
  *from = k->tx_pos - unacked;
  return 0;
}

/* The RESUME record of this end, naming `from`, then the bytes from there
 * to tx_pos.  A new socket's buffer is empty: it takes them at once or the
 * rejoin waits (the history is bounded well below a socket's buffer). */
static int write_resume(struct tcp_ctrl *k, int fd, uint64_t from) {
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = WIRE_RESUME, .n = 1};
  m.e[0].size = from;
  size_t n = (size_t)(k->tx_pos - from), at = (size_t)(from % k->hist_cap), done = 0;
  size_t first = n < k->hist_cap - at ? n : k->hist_cap - at;
  if (sock_send_some(fd, &m, sizeof m, &done) != SOCK_IO_DONE) return -1;
  done = 0;
  if (first && sock_send_two(fd, k->hist + at, first, k->hist, n - first, &done) != SOCK_IO_DONE) return -1;
  return 0;
}

int tcp_ctrl_rejoin(struct tcp_ctrl *k, int which, int fd) {
  if (!k->spare || is_live(k, which)) return -1;
  if (tcp_ctrl_trylock(k) != 0) return 0;
  /* Between messages only, so that the socket starts on a boundary. */
  uint64_t from = 0;
  if (tcp_ctrl_flush(k) != 0 || k->tx_dead || resume_from(k, !which, &from) != 0 ||
      pthread_mutex_trylock(&k->rx_lock) != 0) {
    pthread_mutex_unlock(&k->tx_lock);
    return 0;
  }
  /* The reader reads the one in use (it may not have moved off the one
   * given up yet: until it has read what of it the other lacks, the
   * rejoin waits); this one is its copy once the peer's RESUME is in. */
  if (k->rd == which) {
    atomic_store(&k->rd_switch, 0);
    reader_switch(k);
  }
  int rc = k->rd == which ? 0 : -1;
  if (rc != 0 && write_resume(k, fd, from) == 0) {
    close(k->fd[which]);
    k->fd[which] = fd;
    k->tx_done[which] = k->tx_done[!which];
    k->item_done[which] = 0;
    k->stall[which] = (struct sock_stall){0};
    k->rd_other_dead = 1;
    k->rd_resume = 1;
    k->resume_got = 0;
    atomic_fetch_or(&k->live, 1 << which);
    k->hist_len = 0; /* both have every byte from here on */
    if (tcp_cfg.ctrl_spare_batch > 0 && k->hist_cap == history_cap()) {
      k->lazy = which; /* the peer reads the other */
      k->lazy_pos = k->tx_pos;
    }
    rc = 1;
  }
  pthread_mutex_unlock(&k->rx_lock);
  pthread_mutex_unlock(&k->tx_lock);
  if (rc == 1)
    COLLX_INFO(COLLX_LOG_NET, "%s connection with %s on device %s: control socket %d is back (from byte %llu)",
               k->comm->role->name, k->comm->peer, k->comm->devname, which, (unsigned long long)from);
  return rc;
}

/* ---- close ------------------------------------------------------------------ */

void tcp_ctrl_close(struct tcp_ctrl *k) {
  int failed = tcp_comm_failed(k->comm);
  /* The last batch, for a peer that reads the spare (nothing waits for
   * room: a socket left full is one the peer does not read). */
  if (!failed && k->lazy >= 0 && is_live(k, k->lazy)) lazy_write(k);
  /* Nor does a socket given up: its path may be down, and the other
   * carried everything. */
  for (int w = 0; w < 2; w++)
    if (k->fd[w] >= 0) tcp_linger_close(k->fd[w], failed || !is_live(k, w));
  k->fd[0] = k->fd[1] = -1;
  free(k->hist);
  k->hist = NULL;
  pthread_mutex_destroy(&k->tx_lock);
  pthread_mutex_destroy(&k->rx_lock);
}
