/*
 * A lost path coming back (failover).
 *
 * After the receiver has let go of a path's streams (LOST_ACK), it listens
 * on its address on that path, on a port of its own, and offers it to the
 * sender (REJOIN, with a token of the comm's).  The sender tries, at most
 * once a second, to connect a new socket for each of the path's streams
 * from its NIC on that path; each introduces itself with a hello naming
 * the token and its stream.  The receiver puts a stream's new socket in
 * place as soon as its hello is in and reads it; once the whole path is
 * back it closes the listener and says so (REJOINED), and only then does
 * the sender write on the new sockets.
 *
 * The control socket on the path (the first on path 0, the spare on path
 * 1) comes back the same way, as one more socket of the path with a hello
 * of its own (CTRL_AGAIN, naming its slot); each end hands it to its
 * control channel (tcp_ctrl_rejoin) as soon as it has it, and the path is
 * wholly back only with it.
 *
 * Socket work only: what the roles do around it is theirs (send.c,
 * recv.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "paths.h"
#include "progress.h"
#include "util/log.h"

/* A new socket that has said nothing for this long is dropped; a connect
 * not through by then is tried again later. */
#define REJOIN_ATTEMPT_S 1.0

static void new_socket_close(struct tcp_paths *ps, int i) {
  if (ps->fd[i] >= 0) close(ps->fd[i]);
  ps->fd[i] = -1;
  ps->io[i] = 0;
  ps->connected[i] = 0;
  ps->ready &= ~(1u << i);
}

/* The path a rejoining socket travels: a stream's, or a control slot's. */
static int socket_path(const struct tcp_comm_base *c, int i) {
  return i >= TCP_MAX_STREAMS ? i - TCP_MAX_STREAMS : i % c->npaths;
}

/* The control slot that travels on path p, or -1. */
static int ctrl_slot(const struct tcp_comm_base *c, int p) {
  return p < 2 && tcp_ctrl_has_spare(&c->ctrl) ? p : -1;
}

/* Path p's sockets, by rejoin index: its streams and its control slot. */
static unsigned path_sockets(const struct tcp_comm_base *c, int p) {
  int w = ctrl_slot(c, p);
  return tcp_path_streams(c, p) | (w >= 0 ? 1u << TCP_REJOIN_CTRL(w) : 0);
}

/* Those of them given up: streams lost, the control slot not written. */
static unsigned path_lost(const struct tcp_comm_base *c, int p) {
  int w = ctrl_slot(c, p);
  unsigned m = tcp_path_streams(c, p) & atomic_load(&((struct tcp_comm_base *)c)->lost);
  if (w >= 0 && !tcp_ctrl_live(&c->ctrl, w)) m |= 1u << TCP_REJOIN_CTRL(w);
  return m;
}

/* ---- the receiver ----------------------------------------------------------- */

int tcp_rejoin_listen(struct tcp_comm_base *c, int path, uint16_t *port) {
  struct tcp_paths *ps = c->paths;
  struct tcp_path *p = &ps->p[path];
  if (!p->have_local) return -1;
  if (!ps->token && getrandom(&ps->token, sizeof ps->token, 0) != sizeof ps->token) ps->token = (uint64_t)tcp_now();
  ps->told &= ~(1u << path); /* its streams are lost (again): their return is news */
  if (p->listen_fd < 0) {
    struct sockaddr_storage at = p->local, bound;
    sock_set_port(&at, 0);
    p->listen_fd = sock_listen((const struct sockaddr *)&at, sock_len(&at), &bound);
    if (p->listen_fd < 0) {
      COLLX_INFO(COLLX_LOG_NET, "receive connection from %s on device %s: cannot listen for path %s to come "
                 "back: %s", c->peer, c->devname, p->name, strerror(errno));
      return -1;
    }
    p->port = (uint16_t)(bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                                      : ntohs(((struct sockaddr_in *)&bound)->sin_port));
  }
  *port = p->port;
  return 0;
}

/* A hello read whole: the socket it names (a stream, or a control slot),
 * or -1 to drop the socket. */
static int hello_socket(const struct tcp_comm_base *c, const struct wire_hello *h, int path) {
  const char *why = NULL;
  int kind = wire_hello_check(h, c->paths->token, &why);
  int i = kind == WIRE_HELLO_DATA ? h->index : kind == WIRE_HELLO_CTRL_AGAIN ? TCP_REJOIN_CTRL(h->index) : -1;
  if (kind == WIRE_HELLO_DATA && i >= c->nstreams) return -1;
  if (kind == WIRE_HELLO_CTRL_AGAIN && h->index >= 2) return -1;
  if (i < 0 || socket_path(c, i) != path || !(path_lost(c, path) >> i & 1)) return -1;
  return i;
}

static void pending_close(struct tcp_paths *ps, int k) {
  close(ps->pend_fd[k]);
  ps->pend_fd[k] = -1;
}

/* Take the connections waiting on path p's listener into free pending
 * slots.  Their hellos are read as they come, over as many of the
 * watchdog's looks as need be: a sender's hello may follow its connect by
 * one of its own watchdog's ticks. */
static void pending_take(struct tcp_paths *ps, int path, double now) {
  for (int k = 0; k < TCP_MAX_STREAMS; k++) {
    if (ps->pend_fd[k] >= 0) continue;
    int fd = accept4(ps->p[path].listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ps->pend_fd[k] = fd;
    ps->pend_got[k] = 0;
    ps->pend_since[k] = now;
    ps->pend_path[k] = path;
  }
}

/* Read what has come of pending socket k's hello; once whole, the socket
 * goes to the slot of the stream it names.  A wrong hello, or none whole
 * within REJOIN_ATTEMPT_S, closes it: the sender then connects again. */
static void pending_advance(struct tcp_comm_base *c, int k, double now) {
  struct tcp_paths *ps = c->paths;
  enum sock_io io = sock_recv_some(ps->pend_fd[k], &ps->pend_hello[k], sizeof ps->pend_hello[k], &ps->pend_got[k]);
  if (io == SOCK_IO_AGAIN && now - ps->pend_since[k] <= REJOIN_ATTEMPT_S) return;
  int i = io == SOCK_IO_DONE ? hello_socket(c, &ps->pend_hello[k], ps->pend_path[k]) : -1;
  if (i < 0 || ps->fd[i] >= 0) {
    COLLX_INFO(COLLX_LOG_NET, "receive connection from %s on device %s: a new socket for path %s dropped (%s)", c->peer,
               c->devname, ps->p[ps->pend_path[k]].name,
               io == SOCK_IO_AGAIN ? "no hello in time" : io != SOCK_IO_DONE ? "closed before its hello" :
               i < 0 ? "a hello for no socket lost on that path" : "its socket has a new one already");
    pending_close(ps, k);
    return;
  }
  sock_tune(ps->pend_fd[k]);
  ps->fd[i] = ps->pend_fd[k];
  ps->pend_fd[k] = -1;
  ps->ready |= 1u << i;
}

unsigned tcp_rejoin_accept(struct tcp_comm_base *c) {
  struct tcp_paths *ps = c->paths;
  if (!ps) return 0;
  double now = tcp_now();
  for (int p = 0; p < c->npaths; p++)
    if (ps->p[p].listen_fd >= 0) pending_take(ps, p, now);
  for (int k = 0; k < TCP_MAX_STREAMS; k++)
    if (ps->pend_fd[k] >= 0) pending_advance(c, k, now);
  return ps->ready;
}

unsigned tcp_rejoin_path_done(struct tcp_comm_base *c, unsigned swapped) {
  struct tcp_paths *ps = c->paths;
  unsigned done = 0;
  for (int p = 0; p < c->npaths; p++) {
    unsigned path = tcp_path_streams(c, p);
    struct tcp_path *pp = &ps->p[p];
    if (pp->listen_fd < 0 || !(swapped & path_sockets(c, p))) continue;
    /* The streams' return is told once, whether or not the control
     * socket is back (the sender's may never have been given up). */
    if (!(atomic_load(&c->lost) & path) && !(ps->told >> p & 1)) {
      ps->told |= 1u << p;
      done |= path;
    }
    if (path_lost(c, p)) continue;
    ps->told &= ~(1u << p);
    close(pp->listen_fd);
    pp->listen_fd = -1;
    for (int k = 0; k < TCP_MAX_STREAMS; k++)
      if (c->paths->pend_fd[k] >= 0 && c->paths->pend_path[k] == p) pending_close(c->paths, k);
  }
  return done;
}

/* ---- the sender ------------------------------------------------------------- */

void tcp_rejoin_offer(struct tcp_comm_base *c, int path, uint16_t port, uint64_t token) {
  if (!c->paths || path >= c->npaths) return;
  /* Tried at once unless the path's losses put it off (tcp_path_backoff). */
  c->paths->p[path].port = port;
  c->paths->token = token;
}

/* Start the new socket i (a stream, or a control slot).  0, or -1 (tried
 * again later). */
static int connect_start(struct tcp_comm_base *c, int i) {
  struct tcp_paths *ps = c->paths;
  struct tcp_path *p = &ps->p[socket_path(c, i)];
  struct sockaddr_storage to = p->remote, from = p->local;
  sock_set_port(&to, p->port);
  sock_set_port(&from, 0);
  ps->fd[i] = sock_connect_start((struct sockaddr *)&to, sock_len(&to), p->have_local ? (struct sockaddr *)&from : NULL,
                                 p->have_local ? sock_len(&from) : 0);
  if (ps->fd[i] < 0) return -1;
  int ctrl = i >= TCP_MAX_STREAMS;
  if (c->npaths > 1 && !ctrl) sock_limit_unsent(ps->fd[i], 2 * tcp_cfg.chunk_size);
  ps->hello[i] = (struct wire_hello){.magic = WIRE_MAGIC, .version = WIRE_VERSION,
                                     .kind = ctrl ? WIRE_HELLO_CTRL_AGAIN : WIRE_HELLO_DATA,
                                     .index = (uint16_t)(ctrl ? i - TCP_MAX_STREAMS : i), .secret = ps->token};
  return 0;
}

/* Advance stream i's new socket: 1 once its hello is out, 0 not yet, -1
 * failed. */
static int connect_step(struct tcp_comm_base *c, int i) {
  struct tcp_paths *ps = c->paths;
  if (ps->fd[i] < 0 && connect_start(c, i) != 0) return -1;
  if (!ps->connected[i]) {
    int r = sock_connect_done(ps->fd[i]);
    if (r <= 0) return r;
    ps->connected[i] = 1;
    sock_tune(ps->fd[i]);
  }
  enum sock_io io = sock_send_some(ps->fd[i], &ps->hello[i], sizeof ps->hello[i], &ps->io[i]);
  return io == SOCK_IO_DONE ? 1 : io == SOCK_IO_AGAIN ? 0 : -1;
}

/* Has the receiver closed the new socket of stream i (whose hello is out)
 * before putting it in place?  It writes nothing on it, so any byte, end
 * or error means so. */
static int dropped_by_peer(const struct tcp_paths *ps, int i) {
  char b;
  ssize_t n = recv(ps->fd[i], &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* New sockets the receiver dropped (a hello too late, say) start over.
 * Streams only: the receiver writes on a control socket it took (its
 * RESUME), and one it dropped fails the writer's next write. */
static void drop_refused(struct tcp_comm_base *c, int p, unsigned waiting, double now) {
  struct tcp_paths *ps = c->paths;
  for (int i = 0; i < c->nstreams; i++) {
    if (!(waiting >> i & 1) || !dropped_by_peer(ps, i)) continue;
    COLLX_INFO(COLLX_LOG_NET, "send connection with %s on device %s: the receiver dropped the new socket of stream "
               "%d on path %s; connecting again", c->peer, c->devname, i, ps->p[p].name);
    new_socket_close(ps, i);
    ps->p[p].next_try = now + REJOIN_ATTEMPT_S;
  }
}

unsigned tcp_rejoin_connect(struct tcp_comm_base *c, double now) {
  struct tcp_paths *ps = c->paths;
  if (!ps) return 0;
  unsigned lost = atomic_load(&c->lost);
  for (int p = 0; p < c->npaths; p++) {
    struct tcp_path *pp = &ps->p[p];
    /* Its streams are back: the offer is spent.  A control socket not
     * through with them waits for the path's next return (the receiver may
     * never have given its own up). */
    if (!(tcp_path_streams(c, p) & lost)) pp->port = 0;
    drop_refused(c, p, tcp_path_streams(c, p) & lost & ps->ready, now);
    unsigned path = path_lost(c, p) & ~ps->ready;
    if (!pp->port || !path || !pp->have_remote) continue;
    int inflight = 0;
    for (int i = 0; i < TCP_REJOIN_SOCKETS; i++) inflight |= (path >> i & 1) && ps->fd[i] >= 0;
    if (!inflight && now < pp->next_try) continue;
    if (!inflight) pp->tried_at = now;
    int failed = 0, pending = 0;
    for (int i = 0; i < TCP_REJOIN_SOCKETS; i++) {
      if (!(path >> i & 1)) continue;
      int r = connect_step(c, i);
      if (r > 0) ps->ready |= 1u << i;
      failed |= r < 0;
      pending |= r == 0;
    }
    /* A path still down: its connects fail, or hang; they start over
     * later.  A new socket whose hello is out stays: the receiver may have
     * it in place already, and would refuse another for that stream. */
    if (failed || (pending && now - pp->tried_at > REJOIN_ATTEMPT_S)) {
      for (int i = 0; i < TCP_REJOIN_SOCKETS; i++)
        if ((path >> i & 1) && !(ps->ready >> i & 1)) new_socket_close(ps, i);
      pp->next_try = now + REJOIN_ATTEMPT_S;
    }
  }
  return ps->ready;
}

/* ---- both -------------------------------------------------------------------- */

unsigned tcp_rejoin_ctrl(struct tcp_comm_base *c) {
  struct tcp_paths *ps = c->paths;
  unsigned back = 0;
  if (!ps) return 0;
  for (int w = 0; w < 2; w++) {
    int i = TCP_REJOIN_CTRL(w);
    if (!(ps->ready >> i & 1)) continue;
    int rc = tcp_ctrl_rejoin(&c->ctrl, w, ps->fd[i]);
    if (rc == 0) continue; /* the channel is busy: next look */
    if (rc > 0) {
      ps->fd[i] = -1;
      back |= 1u << i;
    }
    new_socket_close(ps, i);
  }
  return back;
}

void tcp_rejoin_swap(struct tcp_comm_base *c, unsigned mask) {
  struct tcp_paths *ps = c->paths;
  if (!ps) return;
  mask &= ps->ready & atomic_load(&c->lost);
  for (int i = 0; i < c->nstreams; i++) {
    if (!(mask >> i & 1)) continue;
    struct tcp_stream *s = &c->streams[i];
    /* Off the driver first: its pass takes the stream's lock. */
    if (c->driven) tcp_progress->stream_detach(c, i);
    pthread_mutex_lock(&s->lock);
    close(s->fd);
    s->fd = ps->fd[i];
    atomic_store_explicit(&s->fd_seen, s->fd, memory_order_relaxed);
    ps->fd[i] = -1;
    ps->io[i] = 0;
    ps->connected[i] = 0;
    ps->ready &= ~(1u << i);
    atomic_store(&s->eof, 0);
    s->stall = (struct sock_stall){0};
    c->role->stream_reset(s);
    atomic_fetch_and(&c->lost, ~(1u << i));
    pthread_mutex_unlock(&s->lock);
    if (c->driven) tcp_progress->stream_attach(c, i);
  }
  if (mask) tcp_stats_path_rejoined(c);
  if (mask)
    COLLX_INFO(COLLX_LOG_NET, "%s connection with %s on device %s: the path %s is back in use (streams 0x%x)", c->role->name,
               c->peer, c->devname, tcp_path_name(c, __builtin_ctz(mask)), mask);
}
