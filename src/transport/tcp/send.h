/*
 * The send role: a send comm, its requests, and the state of each of its
 * streams.  send.c posts sends and writes the data streams; send_ctrl.c
 * is the role's part in the control channel.  Calls go send.c ->
 * send_ctrl.c, never back; only the comm's base (base.h) is shared with
 * the watchdog and the progress driver.
 */
#ifndef COLLX_TCP_SEND_H
#define COLLX_TCP_SEND_H

#include "base.h"
#include "match.h"
#include "pace.h"

/* A sender refused for want of a CTS asks again after this long. */
#define TCP_CTS_WANT_RETRY_S 1e-3

struct tcp_send_req {
  struct tcp_req base;
  char *data;
  size_t size;
  int idx;                /* entry of the receive this send fills */
  size_t chunk;           /* bytes per chunk (the last may be shorter) */
  size_t nchunks;
  int eager;              /* travels on the control socket... */
  struct wire_eager eager_hdr; /* ...behind this header */
  /* Chunks dealt to the streams in turn: chunk k is at home on stream
   * (k + seq) mod nstreams; next[h] is the next chunk at home on stream h
   * (past the end: none left), chunks_left those not yet taken (q_lock).
   * 32 bits: fewer than 2^32 chunks, 16 TiB at the smallest chunk. */
  uint32_t next[TCP_MAX_STREAMS];
  size_t chunks_left;
  _Atomic size_t chunks_done;
  struct collx_list qnode; /* in the chunk queue (q_lock) or the eager queue (the control channel's writer) */
  /* Failover (the comm's base.failover): a striped send is done only once
   * the receiver confirms its receive (DONE): while it waits, this is
   * 1 << 32 | seq, else 0.  Chunks that went out on a stream given up
   * are written again from `redo` (q_lock; counted in chunks_left). */
  _Atomic uint64_t await;
  uint32_t *redo;
  uint32_t redo_len, redo_cap;
  /* Streams writing from `data` (taken under q_lock): the send is done
   * only once none is, so that a second copy of a chunk still going out
   * when the receiver has the first never reads a buffer NCCL has taken
   * back; after DONE, what they still owe is copied aside (send.c,
   * stragglers_adopt). */
  atomic_int writers;
  atomic_int dup_taken;   /* a chunk of it went out a second time (failover) */
  struct tcp_parts parts; /* which streams carry it, while watched */
  /* A kept copy (failover, TCP_KEPT_SENDS of them a comm): `data` points
   * here, copy_cap bytes, kept at the largest size held. */
  char *copy;
  size_t copy_cap;
  /* Failover: the copy found for this send when it was posted (q_lock),
   * and whether its chunks tell the receiver it does not wait for DONE */
  struct tcp_send_req *keep;
  int lazy_done;
};

/* Failover: small sends reported done once written, their bytes kept in
 * one of these copies until DONE (COLLX_FAILOVER_COPY; send.c, send_keep). */
#define TCP_KEPT_SENDS 8

/* A chunk a stream wrote (or is writing) for a send not yet confirmed:
 * what that stream's loss would take back (failover). */
struct tcp_sent_chunk {
  struct tcp_send_req *req;
  uint32_t seq;
  uint32_t k;
  uint64_t end;   /* the stream's byte count (`wrote`) once the chunk is out */
  double at;      /* when it was taken (tcp_now) */
  int dup;        /* a copy of it went out on another stream since */
};

/* What one stream is writing (its s->lock). */
struct tcp_send_stream {
  struct tcp_send_req *req;   /* the chunk being written... */
  struct wire_chunk hdr;
  const char *payload;        /* ...its bytes: in req->data, or `own` once orphaned */
  size_t done;                /* ...and its bytes of header + payload written */
  int dup;                    /* a second copy (not counted in chunks_done, not logged) */
  int orphan;                 /* its send is done: written from `own`, counted for nobody */
  char *own;
  size_t own_cap;
  struct wire_chunk hb;       /* a heartbeat being written between chunks */
  size_t hb_done;
  int hb_active;
  atomic_int busy;            /* a chunk is being written (read by the other streams) */
  atomic_int full;            /* its socket refused part of the last write (read by the other streams) */
  /* Failover: chunks of unconfirmed sends, oldest first, from `log_head`
   * (written under s->lock and q_lock, read under either: another stream
   * looks for chunks left waiting here); the last may be the one being
   * written. */
  struct tcp_sent_chunk *log;
  uint32_t log_head, log_len, log_cap;
  _Atomic uint64_t wrote;     /* bytes written on this socket (headers between chunks too) */
  /* A merged device: how fast it drains (pace.h; the watchdog's, published
   * in drain_bps), and whether it is slow beside the fastest */
  struct pace_rate rate;
  _Atomic uint64_t drain_bps;
  atomic_int slow;
  atomic_int stuck;           /* failover: nothing acknowledged for PACE_STUCK_MS (the watchdog's) */
};

struct tcp_send_comm {
  struct tcp_comm_base base;
  struct tcp_send_stream tx[TCP_MAX_STREAMS];
  size_t max_chunk;           /* COLLX_CHUNK_SIZE */
  size_t eager_max;           /* sent eagerly up to this size (collx_eager_size) */
  int merged;                 /* its streams leave by several NICs (pick_chunk) */
  pthread_mutex_t q_lock;
  struct collx_list queue;    /* sends with chunks not yet handed to a stream */
  /* Eager messages are the control channel's items, in order (send_ctrl.c):
   * queued under eager_lock alone, started by the channel's writer */
  pthread_mutex_t eager_lock;
  struct collx_list eager_queue;  /* eager sends not yet started (eager_lock) */
  atomic_int eager_queued;        /* how many: the channel's `owed` */
  struct tcp_send_req *eager_tx;  /* the eager send being written (the writer's lock) */
  /* The last CTS_WANTED, for the cursor position it was sent at */
  uint32_t want_seq;
  double want_at;
  /* CTS records in, the cursor, early eager sends (match.h) */
  struct match_send match_tx;
  /* Failover: streams given up whose LOST notice is not written yet, and
   * those the receiver has acknowledged, whose chunks go out again. */
  atomic_uint notice_pending;
  atomic_uint lost_acked;
  /* A lost path coming back: the receiver's offers (rejoin_lock) and the
   * streams it has put back (REJOINED), for the watchdog (paths_rejoin). */
  pthread_mutex_t rejoin_lock;
  uint16_t rejoin_port[COLLX_MAX_MEMBERS];
  uint64_t rejoin_token;
  atomic_uint rejoined;
  atomic_uint ctrl_gone;      /* paths whose control socket the receiver gave up alone (CTRL_GONE) */
  double last_stream_hb;      /* heartbeat on a data stream, watchdog only */
  unsigned slow_warned;       /* paths named slow in a WARN, watchdog only */
  atomic_uint behind;         /* failover: streams slow or stuck (the watchdog's) */
  unsigned pump_turn;         /* COLLX_PROGRESS=caller: stream to start from */
  uint32_t tl_eager_tx;       /* COLLX_TIMELINE: eager messages written */
  /* What the sends did, logged at close: the caller's thread only. */
  struct {
    uint64_t sends_waited;  /* sends whose first isend found no CTS */
    uint64_t isend_retries; /* isend calls that returned no request */
    uint64_t eager, early;  /* sent on the control socket; of those, before their CTS */
    uint64_t cts_wanted;    /* CTS_WANTED records sent */
    uint64_t kept;          /* sends done once written, from a kept copy (failover) */
    int waiting;            /* the current send has already been counted */
  } send_stats;
  struct tcp_send_req reqs[COLLX_MAX_REQUESTS];
  /* Failover: copies of sends reported done before their DONE, in the
   * shape of a send (TCP_KEPT_SENDS, allocated with the first; q_lock) */
  struct tcp_send_req *kept;
};

/* The role's table (send.c), for opening a send comm. */
extern const struct tcp_comm_role tcp_send_role;

/* Paths (a mask) that did not answer during setup: given up at once, as
 * lost paths are (a WARN each, the receiver told), to come back once they
 * answer. */
void tcp_send_paths_down(struct tcp_comm_base *b, unsigned paths, const char *why);

/* The role's part in the control channel (send_ctrl.c). */
extern const struct tcp_ctrl_ops tcp_send_ctrl_ops;
/* Queue an eager send's message behind those queued, and write what the
 * channel takes now. */
void tcp_send_eager_queue(struct tcp_send_comm *c, struct tcp_send_req *r);
/* A send waits for a CTS: ask the receiver for what it holds.  The
 * receiver reads this behind the eager messages sent before it.  Sent once
 * per cursor position, and again after TCP_CTS_WANT_RETRY_S in case the
 * receiver went back to holding before the receive this send needs was
 * posted. */
void tcp_send_want_cts(struct tcp_send_comm *c);
/* Match early eager sends against CTS records that have come in since.
 * 0, or -1 after failing the comm. */
int tcp_send_eager_replay(struct tcp_send_comm *c);

#endif
