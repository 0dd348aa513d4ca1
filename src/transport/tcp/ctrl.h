/*
 * The control channel: one object per comm, one writer and one reader.
 *
 * It carries fixed-size records (CTS, DONE, heartbeats, ...) and, for a
 * sender, eager messages (a header and a payload) in one byte stream.
 * With failover over several paths it has two sockets, the first on path
 * 0 and a spare on path 1: every byte is written on both in one order,
 * and the reader reads one and drops the other's copy up to the same
 * place, so the loss of either path loses nothing.
 *
 * The writer (tx_lock): records queued by either role go out in order; an
 * item (a sender's eager message) is written whole before anything queued
 * after it starts, so a record never lands inside a message.  The role's
 * part comes in through struct tcp_ctrl_ops: what it owes (`fill`, the
 * receiver's DONE and LOST_ACK records), the next item (`next_item`, the
 * sender's eager queue) and the end of one (`item_done`).  When no socket
 * is left to write, the writer is dead: its cursors are reset in one place
 * and nothing more is queued.
 *
 * The reader (rx_lock): bytes are staged in `rx` and handed to the role's
 * `parse` until it needs more; a role may also read a long payload
 * straight into its buffer (tcp_ctrl_recv).
 *
 * A socket given up comes back with its path (tcp_ctrl_rejoin; one given
 * up alone takes its path down with it first, failover.c's
 * tcp_ctrl_alone): each end's
 * writer attaches it between messages, first writing a RESUME record that
 * says from which byte of its stream the socket carries on; the other
 * end's reader reads that record and then treats the socket as the copy it
 * drops, or switches to, at the same byte.
 *
 * Everything here calls down only: the comm's base (failure, clocks,
 * settings) and the socket helpers.  The roles call it; it reaches them
 * only through the ops.
 */
#ifndef COLLX_TCP_CTRL_H
#define COLLX_TCP_CTRL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collx/net_abi.h"
#include "sock.h"
#include "util/config.h"
#include "wire.h"

struct tcp_comm_base;
struct tcp_ctrl;

/* Records a comm holds unwritten: every receive's CTS and a heartbeat,
 * with room to spare. */
#define TCP_CTRL_TX_RECORDS (COLLX_MAX_REQUESTS + 2)
/* Bytes read and not yet parsed: records, or an eager header and the
 * start of its payload (a payload owed past 4 KiB is read straight into
 * its buffer).  Half the requests' records in one read: enough to read a
 * burst in two, small enough that a comm stays under 64 KiB. */
/* The most a socket coming back takes again from the writer's history
 * (tcp_ctrl.hist): written into its empty buffer at once, so well below
 * the kernel's smallest default (16 KiB).  A rejoin waits while the other
 * socket has more than this unacknowledged.  Also the history's size
 * when the spare is written with every record. */
#define TCP_CTRL_HISTORY (8 * 1024)
#define TCP_CTRL_RX_BYTES ((COLLX_MAX_REQUESTS / 2 + 2) * sizeof(struct wire_ctrl))

#define TCP_HEARTBEAT_INTERVAL_S 1.0

/* A message written after the queued records: a header and a payload. */
struct tcp_ctrl_item {
  const void *hdr;
  size_t hlen;
  const void *payload;
  size_t plen;
};

/* What differs by role.  Every callback runs with the lock of its side
 * held (the writer's: fill, next_item, item_done; the reader's: parse). */
struct tcp_ctrl_ops {
  /* The writer's death fails the comm (a sender), or only drops what it
   * would have written (a receiver, whose fate is decided by what it can
   * still read). */
  int write_error_fails;
  /* End of stream between messages is the peer's goodbye (a receiver:
   * tcp_ctrl.eof), not a failure. */
  int eof_is_goodbye;
  /* Something is owed that `fill` turns into records, or an item waits
   * for next_item; checked without the lock, after it is released, so
   * that what a thread queued while another held the writer is written
   * by that other as it lets go.  Optional. */
  int (*owed)(struct tcp_ctrl *k);
  /* Queue what is owed, as far as there is room.  Optional. */
  void (*fill)(struct tcp_ctrl *k);
  /* The next item to write after the records: 1 and *it filled, 0 none.
   * Optional. */
  int (*next_item)(struct tcp_ctrl *k, struct tcp_ctrl_item *it);
  /* The item started last is out whole on every socket in use. */
  void (*item_done)(struct tcp_ctrl *k);
  /* Act on what is staged, from rx_pos: 1 consumed something, 0 needs
   * more bytes, -1 stop reading (it must wait, or it failed the comm). */
  int (*parse)(struct tcp_ctrl *k);
  /* The reader is between messages (an end of stream here is clean). */
  int (*at_boundary)(struct tcp_ctrl *k);
};

struct tcp_ctrl {
  struct tcp_comm_base *comm;     /* for failure, names and liveness */
  const struct tcp_ctrl_ops *ops;
  int fd[2];                      /* the first, and the spare (-1: none) */
  int spare;                      /* made with a spare (fixed: fd[1] changes when it comes back) */
  atomic_int live;                /* sockets written: bit 0 the first, bit 1 the spare */

  /* The writer (tx_lock) */
  pthread_mutex_t tx_lock;
  char tx[TCP_CTRL_TX_RECORDS * sizeof(struct wire_ctrl)];
  size_t tx_len;                  /* bytes of records queued */
  size_t tx_done[2];              /* ...written on each socket */
  struct tcp_ctrl_item item;      /* the item being written... */
  int item_active;
  size_t item_done[2];            /* ...its bytes written on each socket */
  int tx_dead;                    /* no socket left to write */
  uint64_t tx_pos;                /* bytes of the stream written whole (on every socket in use) */
  double last_sent;               /* the last heartbeat queued */
  /* The stream's last bytes, [tx_pos - hist_len, tx_pos), a ring of
   * hist_cap bytes: kept while a socket is given up (written again on the
   * socket that comes back, from where the peer's kernel has acknowledged
   * the other: tcp_ctrl_rejoin), and while the spare is written in
   * batches (what it lacks). */
  char *hist;
  size_t hist_len, hist_cap;
  /* The spare written in batches (COLLX_CTRL_SPARE_BATCH): while both
   * sockets are in use, socket `lazy` is written only from the history,
   * once enough has gathered or the oldest byte it lacks has waited a
   * while, so that a record costs one write; [lazy_pos, tx_pos) is on the
   * other alone.  Everything else is written on the other only.  When
   * either is given up, the lazy one first takes all it lacks, and from
   * then on every socket in use is written with every record (-1) until a
   * socket comes back, which is then the lazy one. */
  int lazy;
  uint64_t lazy_pos;
  double lazy_since;              /* when lazy_pos last fell behind tx_pos */

  /* The reader (rx_lock) */
  pthread_mutex_t rx_lock;
  char rx[TCP_CTRL_RX_BYTES];
  size_t rx_pos, rx_done;         /* parsed up to, staged up to */
  atomic_int rd_switch;           /* the socket being read was given up: read the other */
  int rd;                         /* the socket read */
  int rd_other_dead;              /* the other is not read (none, or given up) */
  uint64_t rd_pos, rd_other_pos;  /* bytes consumed from each */
  uint64_t rd_skip;               /* of the one read: bytes already read from the other */
  double rd_last;                 /* the last byte read */
  size_t rd_peeked;               /* of the socket read: bytes staged by a peek, still in its queue */
  int rd_awaited;                 /* its last read found it empty: the next bytes are peeked... */
  int rd_bulky;                   /* ...unless the last message was read mostly into its buffer */
  int rd_resume;                  /* the other socket came back: its RESUME is still to read... */
  struct wire_ctrl resume;        /* ...into this */
  size_t resume_got;
  atomic_int eof;                 /* closed by the peer between messages */

  struct sock_stall stall[2];     /* the watchdog's records (sock_stalled) */
};

/* Take the sockets (spare_fd -1: none).  0, or -1 (nothing to undo). */
int tcp_ctrl_init(struct tcp_ctrl *k, struct tcp_comm_base *comm, const struct tcp_ctrl_ops *ops, int fd,
                  int spare_fd);
/* Close the sockets without a reset (the peer reads everything first)
 * and destroy the locks. */
void tcp_ctrl_close(struct tcp_ctrl *k);

/* ---- the writer ----------------------------------------------------------- */

void tcp_ctrl_lock(struct tcp_ctrl *k);
/* 0 when taken. */
int tcp_ctrl_trylock(struct tcp_ctrl *k);
/* Release the writer; what was owed while it was held goes out now,
 * unless another thread writes. */
void tcp_ctrl_unlock(struct tcp_ctrl *k);
/* Append a record (writer held).  -1 when the records fill the buffer (the
 * peer has stopped reading) or the writer is dead. */
int tcp_ctrl_queue(struct tcp_ctrl *k, const struct wire_ctrl *m);
/* Records queued and not yet written (writer held). */
size_t tcp_ctrl_held(const struct tcp_ctrl *k);
/* Write what is queued and owed, then the role's items, without blocking
 * (writer held).  0 when nothing is left (or the writer is dead and the
 * role ignores that), 1 while a socket is full, -1 after failing the comm. */
int tcp_ctrl_flush(struct tcp_ctrl *k);
/* Write what is queued, unless another thread is writing (it writes ours
 * too). */
void tcp_ctrl_pump(struct tcp_ctrl *k);
/* The watchdog's heartbeat: queued when due and nothing else is pending;
 * never waits for the lock. */
void tcp_ctrl_heartbeat(struct tcp_ctrl *k, double now);
/* Wait up to ms for room on the sockets in use. */
void tcp_ctrl_wait_writable(struct tcp_ctrl *k, int ms);
int tcp_ctrl_writer_dead(const struct tcp_ctrl *k);

/* ---- the reader ----------------------------------------------------------- */

/* Read and parse what has arrived; never waits for the lock. */
void tcp_ctrl_drain(struct tcp_ctrl *k);
/* Read from the socket being read, as sock_recv_once (once) or
 * sock_recv_some, into a buffer of the role's (reader held). */
enum sock_io tcp_ctrl_recv(struct tcp_ctrl *k, void *buf, size_t len, size_t *done, int once);

/* ---- both sockets ----------------------------------------------------------- */

/* Stop writing socket `which` (0 the first, 1 the spare) and read the
 * other; with none left the comm fails. */
void tcp_ctrl_lose(struct tcp_ctrl *k, int which, const char *why);
/* The watchdog's look: a socket whose peer host stopped acknowledging is
 * given up; the reader moves to the spare when the one it reads has gone
 * quiet while the spare brings more. */
void tcp_ctrl_watch(struct tcp_ctrl *k, double now);
static inline int tcp_ctrl_has_spare(const struct tcp_ctrl *k) { return k->spare; }
/* Whether socket `which` is written (not given up). */
int tcp_ctrl_live(const struct tcp_ctrl *k, int which);
/* Put `fd`, a new socket of the given-up slot `which` (its path came
 * back), in place: its RESUME is written, and from then on it is written
 * in step with the other and read as the other's copy once the peer's
 * RESUME is in.  Never waits: 1 done (fd is the channel's), 0 not now (a
 * message is in the middle of being written, or a lock is held: again
 * later), -1 refused (the slot is in use, or fd takes no RESUME: the
 * caller closes fd). */
int tcp_ctrl_rejoin(struct tcp_ctrl *k, int which, int fd);

#endif
