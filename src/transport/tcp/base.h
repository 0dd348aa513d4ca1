/*
 * The base floor of the transport (base.c): what a send comm and a receive
 * comm both are (the streams, the control channel, the error, liveness,
 * the counters), failure and its report, requests, the clocks and the
 * settings.  The role types (send.h, recv.h) embed `struct tcp_comm_base`
 * as their first member, so a base pointer is also a pointer to its
 * role's struct.  Nothing here calls a file above it: what differs by role
 * is reached through the comm's `struct tcp_comm_role`.
 *
 * Error convention inside the transport:
 *  - the functions core calls (tcp.h) return ncclResult_t;
 *  - an internal function that can fail the comm records the failure with
 *    tcp_comm_fail()/tcp_comm_failf() first, then returns int: 0 done,
 *    -1 failed (the comm's error says why: an I/O error, or a peer that
 *    broke the protocol); where a function also returns a positive value,
 *    its comment says what it means;
 *  - socket helpers (sock.h) return enum sock_io, which their caller turns
 *    into a failure (tcp_io_reason names it).
 * Nobody but tcp_comm_error() turns a comm's error into an ncclResult_t for
 * core.
 */
#ifndef COLLX_TCP_BASE_H
#define COLLX_TCP_BASE_H

#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrl.h"
#include "engine.h"
#include "sock.h"
#include "stats.h"
#include "tcp.h"
#include "util/list.h"
#include "wire.h"

#define TCP_MAX_STREAMS WIRE_MAX_STREAMS

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

struct tcp_comm_base;
struct tcp_comm_sockets;
struct tcp_pass;

/* What every request starts with; the role's request type (send.h,
 * recv.h) embeds it first. */
struct tcp_req {
  uint32_t magic;
  int state;              /* enum tcp_req_state, owned by the caller's thread */
  struct tcp_comm_base *comm;
  uint32_t seq;
  _Atomic int error;      /* ncclResult_t for this request */
  atomic_int watched;     /* a profiler watches its streams (struct tcp_parts) */
};

/* Which streams carry a message (a send, or a receive's entry), for
 * NCCL's profiler: kept only while the request is watched, so that an
 * unwatched one pays a branch per chunk.  One word a message: bit s,
 * stream s has taken a chunk of it; bit TCP_PARTS_HOLDING + s, it holds
 * one now. */
#define TCP_PARTS_HOLDING 16
_Static_assert(COLLX_PART_STREAMS <= TCP_PARTS_HOLDING, "a message's parts fit below its holding bits");
struct tcp_parts {
  _Atomic uint32_t bits;
};

/* A profiler is loaded: every request posted from now on is watched. */
extern atomic_int tcp_parts_watched;

static inline void tcp_parts_reset(struct tcp_parts *p) { atomic_store_explicit(&p->bits, 0, memory_order_relaxed); }

static inline int tcp_req_watched(const struct tcp_req *r) {
  return atomic_load_explicit(&((struct tcp_req *)r)->watched, memory_order_relaxed);
}

static inline void tcp_parts_take(struct tcp_parts *p, int stream) {
  if (stream < COLLX_PART_STREAMS)
    atomic_fetch_or_explicit(&p->bits, (1u | 1u << TCP_PARTS_HOLDING) << stream, memory_order_release);
}

static inline void tcp_parts_let_go(struct tcp_parts *p, int stream) {
  if (stream < COLLX_PART_STREAMS)
    atomic_fetch_and_explicit(&p->bits, ~(1u << (TCP_PARTS_HOLDING + stream)), memory_order_release);
}

/* The report of a message's parts (collx_transport's parts); `rest`: a
 * part of it is still left for a stream to take. */
void tcp_parts_report(struct tcp_comm_base *c, const struct tcp_parts *p, int rest, uint32_t *began,
                      uint32_t *through, int *fds);

/* One data stream.  What it carries in progress is the role's
 * (tcp_send_stream, tcp_recv_stream, at the same index). */
struct tcp_stream {
  int fd;
  int index;
  struct tcp_comm_base *comm;
  pthread_mutex_t lock;   /* serialises I/O on fd and the role's state of the stream */
  atomic_int eof;         /* the peer closed this stream between chunks */
  atomic_int fd_seen;     /* fd, for threads that read it without the lock (live counters, profiler) */
  struct engine_source src; /* its place in the progress pool (progress_engine.c) */
  int loop;                 /* the pool's thread it is on */
  struct sock_stall stall;  /* failover: the watchdog's record (sock_stalled) */
  _Atomic uint64_t chunks;  /* a send stream's chunks written whole (close-time log, live counters) */
};

/* What differs by role, filled by send.c and recv.c, so that the shared
 * code (watchdog, close, test) reaches the role without naming it. */
struct tcp_comm_role {
  const char *name;       /* "send" or "receive", for messages */
  int sends;              /* its streams write chunks */
  uint32_t magic;         /* TCP_MAGIC_SEND / TCP_MAGIC_RECV */
  size_t size;            /* of the role's comm struct */
  const struct tcp_ctrl_ops *ctrl; /* its part in the control channel */
  /* Fill the role's part of a comm whose base is built (comm_life.c).  0, or
   * -1: the comm is closed. */
  int (*init)(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk);
  /* Release the role's part once nothing runs for the comm any more. */
  void (*release)(struct tcp_comm_base *c);
  /* The watchdog's tick: heartbeats, held control records, and what no
   * thread of its own reads. */
  void (*watch)(struct tcp_comm_base *c, double now);
  /* Read what has arrived on the control socket (trylock: never waits). */
  void (*drain)(struct tcp_comm_base *c);
  /* One non-blocking pass over one of its streams: an enum tcp_want
   * (progress.h). */
  int (*serve)(struct tcp_stream *s, struct tcp_pass *pass);
  /* Forget what stream s was doing: it has a new socket (rejoin.c).
   * Caller holds s->lock. */
  void (*stream_reset)(struct tcp_stream *s);
  ncclResult_t (*test)(struct tcp_req *r, int *done, size_t *sizes);
  /* The parts of message msg of r (NULL: none shown under it), and
   * whether any is left to take (collx_transport's parts). */
  struct tcp_parts *(*parts)(struct tcp_req *r, int msg, int *rest);
};

/* Where a new comm's sockets come from (connection setup). */
struct tcp_comm_sockets {
  int dev;
  const char *devname, *peer;
  int ctrl_fd;
  int nstreams;
  const int *stream_fds;
  size_t max_chunk;       /* COLLX_CHUNK_SIZE */
  int members;            /* NICs the streams leave by (a merged device: more than 1) */
  int paths;              /* distinct paths the streams take (stream i on path i mod paths) */
  int failover;           /* both ends agreed to outlive a lost path (COLLX_FAILOVER) */
  int spare_ctrl;         /* failover: a second control socket, on path 1... */
  int spare_ctrl_fd;      /* ...this one */
  /* For messages: the local NIC of path p, and the peer's address on it
   * (NULL where not known). */
  const char *path_nic[COLLX_MAX_MEMBERS];
  const char *path_peer[COLLX_MAX_MEMBERS];
  /* For a path that comes back (rejoin.c): the local address to bind
   * (port ignored), and the connector's the peer's address on it (its port
   * comes later, with the peer's offer). */
  const struct sockaddr_storage *path_local[COLLX_MAX_MEMBERS];
  const struct sockaddr_storage *path_remote[COLLX_MAX_MEMBERS];
};

/* Sockets that come back with a path: its streams, and the control
 * channel's two slots after them. */
#define TCP_REJOIN_CTRL(w) (TCP_MAX_STREAMS + (w))
#define TCP_REJOIN_SOCKETS (TCP_MAX_STREAMS + 2)

/* One path of a connection with failover. */
struct tcp_path {
  char name[64];                  /* for messages: "eth1 to 10.241.0.1:40113" */
  struct sockaddr_storage local;  /* where its sockets start (port 0) */
  struct sockaddr_storage remote; /* the sender's view: the receiver's address on it */
  int have_local, have_remote;
  int listen_fd;                  /* receiver: new sockets for its streams come here; -1 */
  uint16_t port;                  /* sender: ...on this port (the receiver's offer); 0 none yet */
  double next_try;                /* sender: when to try connecting again... */
  double tried_at;                /* ...and when the attempt under way began */
  int losses;                     /* sender: losses in a row, each within TCP_PATH_FORGET_S of the last... */
  double lost_at;                 /* ...the last one */
  double ctrl_alone_since;        /* its control socket given up while its streams were in use (watchdog) */
};

/* Failover's state beside a comm (heap: only comms with failover pay
 * for it; rejoin.c). */
struct tcp_paths {
  struct tcp_path p[COLLX_MAX_MEMBERS];
  uint64_t token;                 /* the receiver's: new sockets must name it */
  /* New sockets coming back, by stream index, then the control sockets'
   * slots (TCP_REJOIN_CTRL(w), rejoin.c) */
  int fd[TCP_REJOIN_SOCKETS];
  struct wire_hello hello[TCP_REJOIN_SOCKETS]; /* sender: the hello each sends */
  size_t io[TCP_REJOIN_SOCKETS];     /* sender: hello bytes sent */
  int connected[TCP_REJOIN_SOCKETS]; /* sender */
  unsigned ready;                 /* sockets (by that index) whose new socket has passed its hello */
  unsigned told;                  /* receiver: paths whose streams' return the sender was told (REJOINED) */
  /* Receiver: sockets accepted whose hello is not whole yet (by slot, not
   * by stream: the hello names the stream) */
  int pend_fd[TCP_MAX_STREAMS];
  struct wire_hello pend_hello[TCP_MAX_STREAMS];
  size_t pend_got[TCP_MAX_STREAMS];
  double pend_since[TCP_MAX_STREAMS];
  int pend_path[TCP_MAX_STREAMS];
};

struct tcp_comm_base {
  uint32_t magic;         /* TCP_MAGIC_SEND / TCP_MAGIC_RECV */
  const struct tcp_comm_role *role;
  int dev;
  unsigned serial;        /* this comm's number among its device's comms */
  char peer[64];          /* peer address, for messages */
  char devname[128];
  int nstreams;
  struct tcp_stream streams[TCP_MAX_STREAMS];
  /* Failover (COLLX_FAILOVER, failover.c): stream i travels on path
   * i mod npaths; `lost` holds the streams given up with their path. */
  int failover;
  int npaths;
  struct tcp_paths *paths;    /* with failover: the paths, and streams coming back */
  atomic_uint lost;
  atomic_int stop;
  _Atomic int error;      /* first fatal error: every request fails with it */
  atomic_int fail_claimed;   /* the first failure writes error_what */
  atomic_int error_reported;
  atomic_int active_reqs;   /* requests in flight: is a failure worth a WARN? */
  char error_what[128];     /* why the comm failed, for a late WARN */
  int driven;               /* attached to the progress driver */
  int counted;              /* in its device's count of open comms */
  struct tcp_pool *pool;     /* the progress pool driving its streams */
  struct tcp_ctrl ctrl;     /* the control channel (ctrl.h) */
  /* The last time the peer was heard: bytes read from any of its sockets
   * (never bytes left unread, which may be old). */
  _Atomic double last_heard;
  struct collx_list wd_node;
  int watched;                /* registered with the watchdog */
  /* COLLX_TIMELINE builds (util/timeline.h): the connection's key */
  uint32_t tl_key;
  /* What the comm did, logged at close (INFO): the caller's thread only. */
  struct {
    uint64_t messages, bytes;
  } stats;
  struct tcp_stats *live_stats; /* its slot of the stats page (stats.c); NULL: none */
};

/* Threads of the transport alive now (the pool's and the watchdog). */
extern atomic_int tcp_live_threads;

/* ---- failure -------------------------------------------------------------- */

void tcp_comm_fail(struct tcp_comm_base *c, ncclResult_t res, const char *what);
__attribute__((format(printf, 3, 4))) void tcp_comm_failf(struct tcp_comm_base *c, ncclResult_t res,
                                                          const char *fmt, ...);
/* The comm's error for a caller, reported now if it was not yet. */
ncclResult_t tcp_comm_error(struct tcp_comm_base *c);
int tcp_comm_failed(const struct tcp_comm_base *c);
const char *tcp_io_reason(int io);
/* Bytes arrived from the peer: it is alive. */
void tcp_comm_heard(struct tcp_comm_base *c);

/* ---- requests ------------------------------------------------------------- */

/* A role's pool entry taken (state, error, the comm's count) or given
 * back. */
void tcp_req_activate(struct tcp_req *r);
void tcp_req_retire(struct tcp_req *r);

/* Closed objects are kept, marked dead, for a while before their memory is
 * released, so that a second close or a test on a request of a closed comm
 * reads a dead magic and gets a clear error instead of touching freed
 * memory. */
void tcp_quarantine(void *obj, void (*release)(void *));

/* ---- clocks --------------------------------------------------------------- */

double tcp_now(void);
/* Timed waits run on CLOCK_MONOTONIC, so that a step of the wall clock
 * neither stalls a wait nor ends it early: condition variables are made
 * with tcp_cond_init, and their deadlines with tcp_deadline_in (`seconds`
 * from now). */
int tcp_cond_init(pthread_cond_t *cond);
struct timespec;
void tcp_deadline_in(struct timespec *ts, double seconds);

/* Failover (failover.c): whether stream i is given up with its path. */
static inline int tcp_stream_lost(const struct tcp_comm_base *c, int i) {
  return (atomic_load_explicit(&((struct tcp_comm_base *)c)->lost, memory_order_acquire) >> i) & 1;
}

#endif
