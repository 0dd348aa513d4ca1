/*
 * The receive role: a receive comm, its (grouped) requests, and the state
 * of each of its streams.  recv.c posts and completes receives and reads
 * the data streams; recv_ctrl.c is the role's part in the control channel
 * (CTS and failover records out; eager messages, CTS_WANTED and heartbeats
 * in); recv_entry.c keeps account of what arrived for each receive buffer,
 * for both readers, and says when a receive is finished.  Calls go
 * recv.c -> recv_ctrl.c -> recv_entry.c, never back.
 */
#ifndef COLLX_TCP_RECV_H
#define COLLX_TCP_RECV_H

#include "chunks.h"
#include "base.h"
#include "match.h"

/* Receive staging per stream: a header and a small chunk in one recv.
 * Chunks of half of it or more are read straight into their buffer, so
 * it needs no more than that; a comm costs less than 64 KiB at scale
 * (tests/scale) with it. */
#define TCP_STAGE_SIZE (8 * 1024)

struct tcp_entry {        /* one buffer of a (grouped) receive */
  char *buf;
  size_t cap;
  _Atomic uint64_t received;
  _Atomic int64_t total;  /* -1 until the first chunk names it */
  struct chunk_track track; /* chunks claimed so far (comm->track_lock) */
};

#define TCP_ENTRIES_COUNT 0xffff
#define TCP_ENTRIES_STRIPED 0x10000

struct tcp_recv_req {
  struct tcp_req base;
  int n;
  /* the entries' tags (set at irecv) and those taken by early eager
   * messages (the control socket's reader only) */
  struct match_entries match;
  /* entries finished (TCP_ENTRIES_COUNT), and TCP_ENTRIES_STRIPED once
   * a data stream brought a chunk for any of them (failover) */
  _Atomic int entries_done;
  /* Streams reading a chunk into its buffers: the receive is done only
   * once none is, since with failover a second copy of a chunk may still
   * be coming in when the first has finished it. */
  atomic_int readers;
  atomic_int contested;   /* failover: a chunk of it came twice at once */
  atomic_int lazy_done;   /* failover: its sender does not wait for the DONE (WIRE_CHUNK_LAZY_DONE) */
  /* Which streams carry each entry, while watched: COLLX_MAX_RECVS words,
   * allocated the first time the slot is watched (in every slot they
   * would cost the comm a page); NULL, none. */
  struct tcp_parts *parts;
  struct tcp_entry e[COLLX_MAX_RECVS];
};

/* What one stream is reading (its s->lock). */
struct tcp_recv_stream {
  struct wire_chunk hdr;
  struct tcp_recv_req *req;   /* the receive the current chunk fills */
  size_t done;                /* payload bytes read */
  size_t stage_pos, stage_len;
  char *stage;                /* TCP_STAGE_SIZE bytes: headers and small payloads in one go */
  uint64_t skip;              /* failover: payload bytes of a chunk that arrived twice, dropped */
  /* Failover: a second copy of a chunk whose first copy is still coming in
   * is read here, not into the receive buffer, so that only one stream at
   * a time writes a chunk's bytes in place (the copies are alike, but two
   * writers of one buffer would be a data race). */
  char *bounce;
};

/* Failover, per stream, under the comm's track_lock: the chunk the stream
 * writes in place (req NULL: none), and a whole second copy of it that
 * came meanwhile, installed by whoever next holds the stream's lock. */
struct tcp_recv_owner {
  struct tcp_recv_req *req;
  int idx;
  uint64_t offset;
  char *parked;
};

struct tcp_recv_comm {
  struct tcp_comm_base base;
  struct tcp_recv_stream rx[TCP_MAX_STREAMS];
  /* The peer closing its sockets ends the comm only once nothing more can
   * arrive for a receive (recv_peer_finished), so that what it sent before
   * closing is still delivered. */
  atomic_int streams_eof;   /* data streams closed between chunks */
  atomic_int eager_rx_blocked;  /* an early message waits for its receive... */
  _Atomic uint32_t eager_rx_wait_seq; /* ...which was not posted while recv_seq was this */
  /* whether CTS records go out at once or are held back */
  struct match_hold hold;
  pthread_mutex_t track_lock; /* the entries' chunk_track, and owners */
  struct tcp_recv_owner *owners; /* failover only: TCP_MAX_STREAMS of them */
  atomic_uint parked_mask;    /* streams holding a parked copy (owners[i].parked) */
  /* The control channel's reader (its rx_lock): the eager message being
   * read, and where early messages go */
  struct wire_eager eager_rx_hdr;
  struct tcp_recv_req *eager_rx;   /* receive the current eager payload fills */
  int eager_rx_active, eager_rx_discard;
  size_t eager_rx_got;
  struct match_recv match_rx;
  uint32_t tl_eager_rx;       /* COLLX_TIMELINE: eager messages landed */
  unsigned read_turn;         /* COLLX_PROGRESS=caller: stream test reads first (the caller's thread) */
  _Atomic uint32_t recv_seq;  /* written by the caller, read by the control socket's reader */
  /* receive posted for seq % MAX_REQUESTS; published with release order so
   * a stream that finds it also sees its buffers */
  struct tcp_recv_req *_Atomic by_seq[TCP_SEQ_SLOTS];
  /* Failover: streams the sender has given up (LOST notices) not yet
   * acted on, and the records owed to the sender, built when the control
   * channel is written (done_lock, inside its tx_lock): receives complete
   * (DONE) and streams no longer read (LOST_ACK). */
  atomic_uint lost_notice;
  pthread_mutex_t done_lock;
  uint32_t done_seqs[COLLX_MAX_REQUESTS];
  int done_len;
  unsigned lost_ack;
  unsigned rejoin_offer;      /* paths whose listener's port the sender is owed (REJOIN) */
  unsigned rejoined;          /* streams back in place (REJOINED) */
  unsigned ctrl_gone;         /* paths whose control socket was given up alone (CTRL_GONE) */
  atomic_int owed;            /* any of the above owed, or CTS records in the backlog */
  atomic_int lazy_owed;       /* DONE records owed that go with the next records written, or at the next tick */
  /* CTS records the channel had no room for, or posted while another
   * thread held the writer, oldest first, written as room comes or the
   * writer is let go (the role's fill); allocated at first use.
   * done_lock. */
  struct wire_ctrl *cts_backlog;
  int cts_backlog_head, cts_backlog_len;
  atomic_uint rejoin_wanted;  /* paths given up, to listen on (the watchdog, recv_rejoin) */
  struct tcp_recv_req reqs[COLLX_MAX_REQUESTS];
};

/* The role's table (recv.c), for opening a receive comm. */
extern const struct tcp_comm_role tcp_recv_role;

/* The peer has closed everything, and nothing it sent is left for a
 * posted receive. */
int tcp_recv_peer_finished(struct tcp_recv_comm *c);

/* Receive buffers (recv_entry.c), for the streams' reader (recv.c) and the
 * control socket's reader (recv_ctrl.c). */
/* Claim what a chunk header or an eager record says it brings for entry
 * idx of r (chunks.h); on a clash fail the comm, naming receive and entry.
 * 0, or -1 after failing the comm. */
int tcp_entry_claim(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, enum chunk_kind kind,
                    uint64_t offset, uint64_t len, uint64_t total);
/* Claim a chunk from a data stream for stream `stream`, as
 * tcp_entry_claim.  With failover a sender may send a chunk again (its
 * stream was given up, or it waited on a slow member while others were
 * idle): 1 when a copy of exactly that chunk has finished it already (this
 * one's payload is to be dropped), 2 when one is still coming in (this one
 * is read aside, into the stream's bounce: tcp_entry_second_copy); 0 when
 * the stream owns the chunk and writes it in place. */
int tcp_entry_claim_chunk(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                          uint64_t len, uint64_t total, int stream);
/* The chunk stream `stream` owns came whole in place: 1 when its bytes
 * count, 0 when another copy finished the chunk before. */
int tcp_entry_finish_chunk(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                           uint64_t len, uint64_t total, int stream);
/* What becomes of a second copy that came whole in `copy` (malloc'd). */
enum tcp_copy_fate {
  TCP_COPY_DROP,    /* the chunk was finished meanwhile: free the copy */
  TCP_COPY_INSTALL, /* nobody writes the chunk in place any more: the caller copies it there and counts it */
  TCP_COPY_PARKED,  /* its owner is still at it: the copy waits in the owner's parked slot */
};
enum tcp_copy_fate tcp_entry_second_copy(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                                         uint64_t len, uint64_t total, char *copy);
/* Whether another copy has finished the chunk this copy is reading. */
int tcp_entry_chunk_finished(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                             uint64_t len, uint64_t total);
/* The parked copy of the chunk stream `stream` owns, taken (the chunk is
 * marked finished and no longer owned: the caller, holding the stream's
 * lock, copies it in place and counts it), or NULL when none is parked. */
char *tcp_entry_take_parked(struct tcp_recv_comm *c, int stream);
/* Stream `stream` let go of the chunk it owned unfinished (another copy
 * finished it): it owns it no more. */
void tcp_entry_disown(struct tcp_recv_comm *c, int stream);
/* Stream `stream` stops reading a chunk in the middle of it (given up):
 * it owns it no more, and the chunk is forgotten unless another copy of a
 * chunk of the receive came meanwhile (the chunk stays claimed for it, or
 * for the copy sent again). */
void tcp_entry_unclaim(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset, uint64_t len,
                       uint64_t total, int stream);
/* Account `len` payload bytes of entry `idx`; finish the entry when whole.
 * Not 0 when that finished a receive whose sender is to hear so (failover,
 * a striped message): its sequence number in *done_seq (the caller owes
 * the DONE; r may be released the moment it is finished); 2 when the
 * sender does not wait for it (the DONE may go with later records). */
int tcp_entry_account(struct tcp_recv_req *r, int idx, uint64_t len, uint32_t *done_seq);
/* A message does not fit its receive buffer: say so, and fail that entry
 * (nothing of it is written).  Returns as tcp_entry_account. */
int tcp_entry_truncated(const struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t size,
                        uint32_t *done_seq);
/* The receive posted as seq, or NULL when none is. */
struct tcp_recv_req *tcp_recv_posted(struct tcp_recv_comm *c, uint32_t seq);

/* The role's part in the control channel (recv_ctrl.c). */
extern const struct tcp_ctrl_ops tcp_recv_ctrl_ops;
/* Account bytes of an entry, or its truncation, and owe the sender the
 * DONE it waits for (tcp_entry_account, tcp_entry_truncated). */
void tcp_recv_account(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t len);
void tcp_recv_truncated(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t size);
/* DONE records owed lazily go out now (the watchdog's tick). */
void tcp_recv_lazy_due(struct tcp_recv_comm *c);
/* Queue the receive's CTS and write it unless CTS records are held back
 * (TCP_CTS_BATCH).  0, or -1 when the comm has failed. */
int tcp_recv_send_cts(struct tcp_recv_comm *c, const struct tcp_recv_req *r);
/* Write held CTS records if they are due (or were asked for). */
void tcp_recv_write_due_cts(struct tcp_recv_comm *c);
/* Read eager messages, CTS_WANTED and heartbeats that have arrived, then
 * write the CTS records that are due (the role's drain). */
void tcp_recv_ctrl_drain(struct tcp_comm_base *c);
/* Failover: tell the sender that the streams in `mask` are no longer read
 * (LOST_ACK), the paths in `paths` listen for new sockets (REJOIN, their
 * ports are in the comm's paths), the streams in `mask` are back
 * (REJOINED); written at once when the channel is free, else by its next
 * writer. */
void tcp_recv_owe_lost_ack(struct tcp_recv_comm *c, unsigned mask);
void tcp_recv_owe_ctrl_gone(struct tcp_recv_comm *c, unsigned paths);
void tcp_recv_owe_rejoin(struct tcp_recv_comm *c, unsigned paths);
void tcp_recv_owe_rejoined(struct tcp_recv_comm *c, unsigned mask);

#endif
