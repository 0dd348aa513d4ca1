/* Objects shared by the TCP transport's setup and data-path halves. */
#ifndef COLLX_TCP_INTERNAL_H
#define COLLX_TCP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "match.h"
#include "chunks.h"
#include "tcp.h"
#include "util/list.h"
#include "wire.h"

#define TCP_MAX_STREAMS 16
/* Receive staging per stream: a header and a small message in one recv. */
#define TCP_STAGE_SIZE (64 * 1024)

/* A sender refused for want of a CTS asks again after this long. */
#define TCP_CTS_WANT_RETRY_S 1e-3

/* Control records a comm holds unwritten: every receive's CTS and a
 * heartbeat, with room to spare. */
#define TCP_CTRL_TX_RECORDS (COLLX_MAX_REQUESTS + 2)

/* Type tags at the start of every object handed to NCCL, so that a wrong or
 * stale pointer is recognised instead of being used. */
enum tcp_magic {
  TCP_MAGIC_LISTEN = 0x4c43584cu,
  TCP_MAGIC_SEND = 0x53435853u,
  TCP_MAGIC_RECV = 0x52435852u,
  TCP_MAGIC_REQ = 0x51435851u,
  TCP_MAGIC_DEAD = 0xdeaddeadu,
};

enum tcp_req_state { REQ_FREE = 0, REQ_ACTIVE = 1 };

struct tcp_entry {        /* one buffer of a (grouped) receive */
  char *buf;
  size_t cap;
  _Atomic uint64_t received;
  _Atomic int64_t total;  /* -1 until the first piece names it */
  struct piece_track track; /* pieces claimed so far (comm->track_lock) */
};

struct tcp_req {
  uint32_t magic;
  int state;              /* enum tcp_req_state, owned by the caller's thread */
  struct tcp_comm *comm;
  uint32_t seq;
  /* send */
  char *data;
  size_t size;
  int idx;                /* entry of the receive this send fills */
  size_t piece;
  size_t npieces;
  int eager;              /* travels on the control socket (tcp_eager.c)... */
  struct wire_eager eager_hdr; /* ...behind this header */
  size_t next_piece;      /* guarded by comm->q_lock */
  _Atomic size_t pieces_done;
  struct collx_list qnode;
  /* receive */
  int n;
  /* the entries' tags (set at irecv) and those taken by early eager
   * messages (lane reader only) */
  struct match_entries match;
  _Atomic int entries_done;
  struct tcp_entry e[COLLX_MAX_RECVS];
  _Atomic int error;      /* ncclResult_t for this request */
};

struct tcp_stream {
  int fd;
  int index;
  struct tcp_comm *comm;
  pthread_t thread;
  int thread_started;
  pthread_mutex_t lock;   /* serialises I/O on fd and the state below */
  /* send side: the piece being written */
  struct tcp_req *tx_req;
  struct wire_piece tx_hdr;
  size_t tx_done;         /* bytes of header + payload written */
  /* receive side (the stream thread only): the piece being read */
  struct wire_piece rx_hdr;
  struct tcp_req *rx_req;
  size_t rx_done;         /* payload bytes read */
  size_t stage_pos, stage_len;
  char *stage;            /* TCP_STAGE_SIZE bytes: headers and small payloads in one go */
  /* COLLX_INLINE_RECV: the thread parks (does not watch the socket) while
   * the caller polls test(); the caller wakes it for a large piece. */
  atomic_int parked;
  atomic_int bulk_wanted;
  atomic_int eof;         /* the peer closed this stream between pieces */
  /* send side: a heartbeat being written between pieces (s->lock) */
  struct wire_piece hb;
  size_t hb_done;
  int hb_active;
};

struct tcp_comm {
  uint32_t magic;         /* TCP_MAGIC_SEND / TCP_MAGIC_RECV */
  int dev;
  unsigned serial;        /* this comm's number among its device's comms */
  char peer[64];          /* peer address, for messages */
  char devname[128];
  int ctrl_fd;
  int nstreams;
  struct tcp_stream streams[TCP_MAX_STREAMS];
  atomic_int stop;
  _Atomic int error;      /* first fatal error: every request fails with it */
  atomic_int fail_claimed;   /* the first failure writes error_what */
  atomic_int error_reported;
  atomic_int active_reqs;   /* requests in flight: is a failure worth a WARN? */
  /* Receive side: the peer closing its sockets ends the comm only once
   * nothing more can arrive for a receive (tcp_peer_finished), so that
   * what it sent before closing is still delivered. */
  atomic_int streams_eof;   /* data streams closed between pieces */
  atomic_int ctrl_eof;      /* control socket closed between records */
  atomic_int lane_blocked;  /* an early message waits for its receive... */
  _Atomic uint32_t lane_wait_seq; /* ...which was not posted while recv_seq was this */
  int ctrl_tx_dead;         /* the peer is gone: CTS and heartbeats are dropped */
  /* receiver: whether CTS records go out at once or are held back */
  struct match_hold hold;
  /* sender: the last CTS_WANTED, for the cursor position it was sent at */
  uint32_t want_seq;
  double want_at;
  /* sender: a CTS_WANTED the lane was too busy to take, queued as soon as
   * the eager message being written ends (ctrl_tx_lock) */
  int want_pending;
  uint32_t want_pending_seq;
  char error_what[128];     /* why the comm failed, for a late WARN */
  pthread_mutex_t track_lock; /* receive side: the entries' piece_track */
  struct tcp_req reqs[COLLX_MAX_REQUESTS];
  /* send side */
  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;
  struct collx_list queue;    /* sends with pieces not yet handed to a stream */
  /* control channel (tcp_ctrl.c) */
  pthread_mutex_t ctrl_rx_lock;
  char ctrl_rx[(COLLX_MAX_REQUESTS + 2) * sizeof(struct wire_ctrl)]; /* records as read */
  size_t ctrl_rx_done;
  pthread_mutex_t ctrl_tx_lock;
  /* records the socket has not taken yet (CTS, heartbeat) */
  char ctrl_tx[TCP_CTRL_TX_RECORDS * sizeof(struct wire_ctrl)];
  size_t ctrl_tx_len, ctrl_tx_done;
  /* sender: eager messages share the outgoing control socket, in order */
  struct collx_list lane_queue;  /* eager sends not yet started (ctrl_tx_lock) */
  struct tcp_req *lane_req;      /* the eager send being written */
  size_t lane_done;
  /* receiver: the incoming control socket's reader (ctrl_rx_lock) */
  size_t ctrl_rx_pos;
  struct wire_eager lane_rx_hdr;
  struct tcp_req *lane_rx_req;   /* receive the current eager payload fills */
  int lane_rx_active, lane_rx_discard;
  size_t lane_rx_got;
  struct match_recv match_rx;    /* where early messages go */
  double last_sent;           /* heartbeat, watchdog only */
  double last_stream_hb;      /* heartbeat on a data stream, watchdog only */
  /* The last time the peer was heard: bytes read from any of its sockets
   * (never bytes left unread, which may be old). */
  _Atomic double last_heard;
  struct collx_list wd_node;
  int watched;                /* registered with the watchdog */
  /* COLLX_TIMELINE builds (util/timeline.h): the connection's key, and
   * eager messages written (sender) or landed (receiver) so far */
  uint32_t tl_key, tl_lane_tx, tl_lane_rx;
  /* sender: CTS records in, the cursor, early eager sends (match.h) */
  struct match_send match_tx;
  size_t max_piece;
  unsigned pump_turn;         /* COLLX_PROGRESS=caller: stream to start from */
  _Atomic double caller_seen; /* COLLX_INLINE_RECV: last test() on this receive comm */
  /* What the comm did, logged at close (INFO): the caller's thread only. */
  struct {
    uint64_t messages, bytes;
    uint64_t sends_waited;  /* sends whose first isend found no CTS */
    uint64_t isend_retries; /* isend calls that returned no request */
    uint64_t eager, early;  /* sent on the control socket; of those, before their CTS */
    uint64_t cts_wanted;    /* CTS_WANTED records sent */
    int waiting;            /* the current send has already been counted */
  } stats;
  /* receive side */
  _Atomic uint32_t recv_seq;  /* written by the caller, read by the lane reader */
  /* receive posted for seq % MAX_REQUESTS; published with release order so
   * a stream thread that finds it also sees its buffers */
  struct tcp_req *_Atomic by_seq[TCP_SEQ_SLOTS];
};

/* Build a connected comm from its sockets and start its stream threads.
 * Takes ownership of the fds (closed on failure). */
ncclResult_t tcp_comm_start(int is_send, int dev, const char *devname, const char *peer,
                            int ctrl_fd, int nstreams, const int *stream_fds,
                            size_t max_piece, struct tcp_comm **out);

extern atomic_int tcp_live_threads;

/* Release connects NCCL has stopped calling (tcp_setup.c); cheap, called
 * from connect, listen close and comm close. */
void tcp_connect_reap(void);

/* Closed objects are kept, marked dead, for a while before their memory is
 * released, so that a second close or a test on a request of a closed comm
 * reads a dead magic and gets a clear error instead of touching freed
 * memory. */
void tcp_quarantine(void *obj, void (*release)(void *));

/* Errors (tcp_ctrl.c): record a comm's first failure; report it to a caller. */
void tcp_comm_fail(struct tcp_comm *c, ncclResult_t res, const char *what);
__attribute__((format(printf, 3, 4))) void tcp_comm_failf(struct tcp_comm *c, ncclResult_t res,
                                                          const char *fmt, ...);
ncclResult_t tcp_comm_error(struct tcp_comm *c);
const char *tcp_io_reason(int io);
/* Receive comm: the peer has closed everything, and nothing it sent is
 * left for a posted receive. */
int tcp_peer_finished(struct tcp_comm *c);
/* Wake the comm's threads (failure or close). */
void tcp_comm_wake(struct tcp_comm *c);

/* Control channel (tcp_ctrl.c). */
ncclResult_t tcp_ctrl_send_cts(struct tcp_comm *c, const struct tcp_req *r);
/* Read what has arrived on the control socket: CTS records and heartbeats
 * on a send comm, eager messages and heartbeats on a receive comm. */
void tcp_ctrl_drain(struct tcp_comm *c);
/* Write what is queued on the control socket: eager messages on a send
 * comm, CTS records the socket did not take on a receive comm (and heartbeats). */
void tcp_ctrl_pump(struct tcp_comm *c);
/* Receive comm: write held CTS records if they are due (see TCP_CTS_BATCH). */
void tcp_ctrl_pump_due(struct tcp_comm *c);
/* Send comm: a send waits for a CTS; ask the receiver for what it holds. */
void tcp_ctrl_want_cts(struct tcp_comm *c);
void tcp_ctrl_set_timeout(int seconds);
int tcp_watchdog_add(struct tcp_comm *c);
void tcp_watchdog_remove(struct tcp_comm *c);
double tcp_now(void);
/* Timed waits run on CLOCK_MONOTONIC, so that a step of the wall clock
 * neither stalls a wait nor ends it early: condition variables are made
 * with tcp_cond_init, and their deadlines with tcp_deadline_in (`seconds`
 * from now). */
int tcp_cond_init(pthread_cond_t *cond);
struct timespec;
void tcp_deadline_in(struct timespec *ts, double seconds);

/* Shared by the data path and the eager path (tcp_data.c). */
/* Claim what a piece header or an eager record says it brings for entry
 * idx of r (chunks.h); on a clash fail the comm, naming receive and entry,
 * and return -1. */
enum piece_kind;
int tcp_entry_claim(struct tcp_comm *c, struct tcp_req *r, int idx, int kind, uint64_t offset,
                    uint64_t len, uint64_t total);
void tcp_entry_account(struct tcp_req *r, int idx, uint64_t len);
void tcp_warn_truncated(const struct tcp_comm *c, struct tcp_req *r, int idx, uint64_t size);
struct tcp_req *tcp_req_alloc(struct tcp_comm *c);
void tcp_req_release(struct tcp_req *r);

/* The watchdog's tick on the data streams (tcp_data.c): a send comm writes
 * a heartbeat on an idle stream; with COLLX_PROGRESS=caller a receive comm
 * reads its streams, which no thread of its own does. */
void tcp_streams_watch(struct tcp_comm *c, double now);

/* Eager messages (tcp_eager.c). */
extern size_t tcp_eager_size;
/* Match early eager sends against CTS records that have come in since. */
void tcp_eager_replay(struct tcp_comm *c);
/* Send r (data and size set) on the control socket: to receive entry
 * r->seq/r->idx when matched (its CTS claimed), else early, matched by tag
 * against the first receive from the sender's cursor on. */
void tcp_eager_post(struct tcp_comm *c, struct tcp_req *r, int tag, int matched);
/* Receive comm: parse the control socket's bytes (caller holds ctrl_rx_lock). */
void tcp_eager_read(struct tcp_comm *c);

#endif
