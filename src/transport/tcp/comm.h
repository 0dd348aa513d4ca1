/*
 * What a send comm and a receive comm both own: the sockets, the error,
 * liveness, the counters, and the control socket's record buffers.  The
 * role types (send.h, recv.h) embed `struct tcp_comm_base` as their first
 * member, so a base pointer is also a pointer to its role's struct.
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
#ifndef COLLX_TCP_COMM_H
#define COLLX_TCP_COMM_H

#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "sock.h"
#include "stats.h"
#include "tcp.h"
#include "util/list.h"
#include "wire.h"

#define TCP_MAX_STREAMS WIRE_MAX_STREAMS

/* Control records a comm holds unwritten: every receive's CTS and a
 * heartbeat, with room to spare. */
#define TCP_CTRL_TX_RECORDS (COLLX_MAX_REQUESTS + 2)
/* Control bytes read and not yet parsed: records, or an eager header and
 * the start of its payload (a payload owed past 4 KiB is read straight
 * into its buffer).  Half the requests' records in one read: enough to
 * read a burst in two, small enough that a comm stays under 64 KiB. */
#define TCP_CTRL_RX_BYTES ((COLLX_MAX_REQUESTS / 2 + 2) * sizeof(struct wire_ctrl))

#define TCP_HEARTBEAT_INTERVAL_S 1.0

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
struct tcp_pass;

/* What every request starts with; the role's request type (send.h,
 * recv.h) embeds it first. */
struct tcp_req {
  uint32_t magic;
  int state;              /* enum tcp_req_state, owned by the caller's thread */
  struct tcp_comm_base *comm;
  uint32_t seq;
  _Atomic int error;      /* ncclResult_t for this request */
};

/* What the watchdog last saw of a socket's acknowledgements (failover). */
struct tcp_stall {
  double since;   /* bytes waiting, unacknowledged, since then; 0: none */
  uint64_t acked; /* bytes the peer had acknowledged */
};

/* One data stream.  What it carries in progress is the role's
 * (tcp_send_stream, tcp_recv_stream, at the same index). */
struct tcp_stream {
  int fd;
  int index;
  struct tcp_comm_base *comm;
  pthread_mutex_t lock;   /* serialises I/O on fd and the role's state of the stream */
  atomic_int eof;         /* the peer closed this stream between chunks */
  struct engine_source src; /* its place in the progress pool (progress_engine.c) */
  int loop;                 /* the pool's thread it is on */
  struct tcp_stall stall;   /* failover: the watchdog's record (tcp_fd_stalled) */
};

/* What differs by role, filled by send.c and recv.c, so that the shared
 * code (watchdog, close, test) reaches the role without naming it. */
struct tcp_comm_role {
  const char *name;       /* "send" or "receive", for messages */
  int sends;              /* its streams write chunks */
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
  void (*close)(struct tcp_comm_base *c);
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
};

/* Failover's state beside a comm (heap: only comms with failover pay
 * for it; rejoin.c). */
struct tcp_paths {
  struct tcp_path p[COLLX_MAX_MEMBERS];
  uint64_t token;                 /* the receiver's: new sockets must name it */
  /* New sockets for streams coming back, by stream index */
  int fd[TCP_MAX_STREAMS];
  struct wire_hello hello[TCP_MAX_STREAMS]; /* sender: the hello each sends */
  size_t io[TCP_MAX_STREAMS];     /* sender: hello bytes sent */
  int connected[TCP_MAX_STREAMS]; /* sender */
  unsigned ready;                 /* streams whose new socket has passed its hello */
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
  int ctrl_fd;
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
  /* Incoming control bytes (ctrl_rx_lock, each role parses its own) */
  pthread_mutex_t ctrl_rx_lock;
  char ctrl_rx[TCP_CTRL_RX_BYTES];
  size_t ctrl_rx_done;
  /* Outgoing control records the socket has not taken yet (ctrl_tx_lock);
   * ctrl2_tx_done: the spare control socket's progress through them */
  pthread_mutex_t ctrl_tx_lock;
  char ctrl_tx[TCP_CTRL_TX_RECORDS * sizeof(struct wire_ctrl)];
  size_t ctrl_tx_len, ctrl_tx_done, ctrl2_tx_done;
  /* Failover: a spare control socket on path 1 carries a copy of every
   * control byte (ctrl_io.c).  ctrl_live: the sockets written (bit 0 the
   * first, bit 1 the spare); the reader reads one of them (ctrl_rd) and
   * drops the other's copy up to the same place (ctrl_rx_lock). */
  int ctrl2_fd;               /* -1: none */
  atomic_int ctrl_live;
  atomic_int ctrl_rd_switch;  /* the socket being read was given up: read the other */
  int ctrl_rd;
  int ctrl_rd_other_dead;
  uint64_t ctrl_rd_pos, ctrl_rd_other_pos, ctrl_rd_skip;
  double ctrl_rd_last;
  struct tcp_stall ctrl_stall[2]; /* the watchdog's records (tcp_fd_stalled) */
  double last_sent;           /* control heartbeat (ctrl_tx_lock) */
  /* The last time the peer was heard: bytes read from any of its sockets
   * (never bytes left unread, which may be old). */
  _Atomic double last_heard;
  atomic_int ctrl_eof;        /* control socket closed between records */
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

extern atomic_int tcp_live_threads;

/* ---- lifetime (comm.c) ---------------------------------------------------- */

/* Fill the base of a zeroed comm from its sockets (which it then owns).
 * 0, or -1 with nothing to undo but freeing the memory (the fds are
 * closed). */
int tcp_comm_base_init(struct tcp_comm_base *c, uint32_t magic, const struct tcp_comm_role *role,
                       const struct tcp_comm_sockets *sk);
/* Hand the comm's streams to the progress driver (unless the caller
 * drives them) and register it with the watchdog.  0, or -1: the caller
 * closes the comm. */
int tcp_comm_base_start(struct tcp_comm_base *c);
/* Stop everything that runs for the comm, close its sockets and destroy
 * its locks; the role's state is the role's to release first or after. */
void tcp_comm_base_stop(struct tcp_comm_base *c);
/* Mark the comm dead and keep its memory a while (tcp_quarantine). */
void tcp_comm_base_bury(struct tcp_comm_base *c);
/* Send and receive comms open on device `dev` in this process. */
int tcp_comms_open(int dev);
/* Close fds a comm was never built from. */
void tcp_close_fds(int ctrl_fd, int n, const int *fds);
void tcp_close_sockets(const struct tcp_comm_sockets *sk);

/* Closed objects are kept, marked dead, for a while before their memory is
 * released, so that a second close or a test on a request of a closed comm
 * reads a dead magic and gets a clear error instead of touching freed
 * memory. */
void tcp_quarantine(void *obj, void (*release)(void *));

/* Release connects NCCL has stopped calling (tcp_setup.c); cheap, called
 * from connect, listen close and comm close. */
void tcp_connect_reap(void);

/* Requests: a role's pool entry taken (state, error, the comm's count) or
 * given back. */
void tcp_req_activate(struct tcp_req *r);
void tcp_req_retire(struct tcp_req *r);

/* ---- errors (comm.c) ------------------------------------------------------ */

void tcp_comm_fail(struct tcp_comm_base *c, ncclResult_t res, const char *what);
__attribute__((format(printf, 3, 4))) void tcp_comm_failf(struct tcp_comm_base *c, ncclResult_t res,
                                                          const char *fmt, ...);
/* The comm's error for a caller, reported now if it was not yet. */
ncclResult_t tcp_comm_error(struct tcp_comm_base *c);
int tcp_comm_failed(const struct tcp_comm_base *c);
const char *tcp_io_reason(int io);
/* Wake what waits for the comm (failure, close): through the driver. */
void tcp_comm_wake(struct tcp_comm_base *c);

/* ---- the control socket (comm.c) ------------------------------------------ */

/* Append a record to those not yet written (ctrl_tx_lock).  -1 when they
 * fill the buffer (the peer has stopped reading). */
int tcp_ctrl_queue(struct tcp_comm_base *c, const struct wire_ctrl *m);
/* Records queued and not yet written (ctrl_tx_lock). */
size_t tcp_ctrl_held(const struct tcp_comm_base *c);
/* Write queued records (ctrl_tx_lock); SOCK_IO_DONE once none is left. */
enum sock_io tcp_ctrl_write_records(struct tcp_comm_base *c);
/* Queue a heartbeat if one is due (ctrl_tx_lock, nothing else pending). */
void tcp_ctrl_queue_heartbeat(struct tcp_comm_base *c, double now);
/* Bytes arrived from the peer: it is alive. */
void tcp_comm_heard(struct tcp_comm_base *c);

/* ---- failover (failover.c) ------------------------------------------------ */

/* Take the sockets' paths and whether failover is agreed (base init).
 * 0, or -1 out of memory. */
int tcp_failover_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk);
void tcp_failover_free(struct tcp_comm_base *c);
const char *tcp_path_name(const struct tcp_comm_base *c, int path);
/* Streams on the path of stream i, as a bit mask. */
unsigned tcp_path_streams(const struct tcp_comm_base *c, int i);
/* Give up stream i's path (all streams on it): one WARN naming the path
 * and the peer.  Returns the streams newly given up (0 when they were
 * already); when no stream is left the comm fails instead (0). */
unsigned tcp_path_lose(struct tcp_comm_base *c, int i, const char *why);
/* The control socket on a lost path is given up too. */
void tcp_path_lost_ctrl(struct tcp_comm_base *c, int path, const char *why);
static inline int tcp_stream_lost(const struct tcp_comm_base *c, int i) {
  return (atomic_load_explicit(&((struct tcp_comm_base *)c)->lost, memory_order_acquire) >> i) & 1;
}
/* A socket with bytes waiting whose peer host has acknowledged nothing
 * for COLLX_FAILOVER_MS (TCP_INFO): its path is dead.  A busy peer's host
 * still acknowledges what arrived (it only closes its window).  *st: the
 * caller's record of the socket, between calls. */
int tcp_fd_stalled(int fd, struct tcp_stall *st, double now);

/* ---- a lost path coming back (rejoin.c) ----------------------------------- */

/* The receiver: a listening socket on `path` for its streams' new sockets;
 * its port in *port.  0, or -1 (the path stays lost). */
int tcp_rejoin_listen(struct tcp_comm_base *c, int path, uint16_t *port);
/* The receiver: take new sockets and their hellos.  The streams whose new
 * socket is in (c->paths->ready). */
unsigned tcp_rejoin_accept(struct tcp_comm_base *c);
/* The sender: the receiver listens for path `path` on `port`. */
void tcp_rejoin_offer(struct tcp_comm_base *c, int path, uint16_t port, uint64_t token);
/* The sender: connect the lost streams of offered paths, at most once a
 * second per path.  The streams whose new socket has sent its hello. */
unsigned tcp_rejoin_connect(struct tcp_comm_base *c, double now);
/* Both: put the new sockets of the streams in `mask` in place of the lost
 * ones and use those streams again. */
void tcp_rejoin_swap(struct tcp_comm_base *c, unsigned mask);
/* The streams of the receiver's path that have all come back, if any:
 * its listener is closed. */
unsigned tcp_rejoin_path_done(struct tcp_comm_base *c, unsigned swapped);

/* ---- the control socket's I/O (ctrl_io.c) --------------------------------- */

/* Take the sockets (base init). */
void tcp_ctrl_io_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk);
/* Write bytes [*done, hlen + plen) of a header and a payload on the
 * control socket, and with a spare the same on it from *done2: DONE once
 * every control socket still in use has them all.  Caller holds
 * ctrl_tx_lock. */
enum sock_io tcp_ctrl_send(struct tcp_comm_base *c, const void *hdr, size_t hlen, const void *payload, size_t plen,
                           size_t *done, size_t *done2);
/* Read from the control socket being read, as sock_recv_once (once) or
 * sock_recv_some.  Caller holds ctrl_rx_lock. */
enum sock_io tcp_ctrl_recv(struct tcp_comm_base *c, void *buf, size_t len, size_t *done, int once);
/* Wait up to ms for room on the control sockets in use. */
void tcp_ctrl_wait_writable(struct tcp_comm_base *c, int ms);
/* Stop writing control socket `which` (0 the first, 1 the spare), and
 * read the other; with none left the comm fails. */
void tcp_ctrl_lose(struct tcp_comm_base *c, int which, const char *why);
/* The watchdog's look: a control socket whose peer host stopped
 * acknowledging is given up; the reader moves to the spare when the one it
 * reads has gone quiet while the spare brings more. */
void tcp_ctrl_watch(struct tcp_comm_base *c, double now);
/* Bytes of queued records every control socket in use has written. */
size_t tcp_ctrl_records_written(const struct tcp_comm_base *c);
/* Close the control sockets without a reset (comm.c's close). */
void tcp_ctrl_close(struct tcp_comm_base *c);

/* ---- clocks (comm.c) ------------------------------------------------------ */

double tcp_now(void);
/* Timed waits run on CLOCK_MONOTONIC, so that a step of the wall clock
 * neither stalls a wait nor ends it early: condition variables are made
 * with tcp_cond_init, and their deadlines with tcp_deadline_in (`seconds`
 * from now). */
int tcp_cond_init(pthread_cond_t *cond);
struct timespec;
void tcp_deadline_in(struct timespec *ts, double seconds);

/* ---- the watchdog (watchdog.c) -------------------------------------------- */

int tcp_watchdog_add(struct tcp_comm_base *c);
void tcp_watchdog_remove(struct tcp_comm_base *c);

#endif
