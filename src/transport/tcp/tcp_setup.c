/*
 * TCP connection setup: listen, accept and connect, all non-blocking.
 *
 * connect and accept are state machines advanced one step per call: NCCL
 * calls them again until they return a comm.  The listener keeps every
 * half-open socket in a bounded table with a deadline, so a silent or
 * garbage-speaking client costs one slot for a bounded time and never
 * blocks the real peer.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_life.h"
#include "recv.h"
#include "send.h"
#include "sock.h"
#include "topo/topo.h"
#include "util/log.h"

/* Half-open sockets a listener keeps; beyond this the oldest is dropped.
 * Fewer where the process may open fewer descriptors (pending_cap). */
#define TCP_MAX_PENDING 1024
/* Connections identified by their control socket, waiting for their streams. */
#define TCP_MAX_INCOMING 64
/* Refused connects retried before giving up (listener backlog overflow). */
#define TCP_CONNECT_RETRIES 50
/* Handshakes a connector starts over after the listener dropped it (its
 * setup deadline passed, or a flood of other clients pushed it out). */
#define TCP_CONNECT_RESTARTS 10

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The WELCOME's addresses use the handle's packing (handle.c). */
static void addr_to_wire(const struct sockaddr_storage *ss, struct wire_addr *w) {
  memset(w, 0, sizeof *w);
  tcp_addr_pack(ss, &w->family, &w->port, &w->scope_id, w->addr);
}

static int wire_to_addr(const struct wire_addr *w, struct sockaddr_storage *ss) {
  if (tcp_addr_unpack(w->family, w->port, w->scope_id, w->addr, ss) != 0) return -1;
  return w->port ? 0 : -1;
}

/* ======================================================================== */
/* Failover: both ends say what they want (wire_hello_flags)                 */
/* ======================================================================== */

/* Data streams, and a spare control socket after them (failover). */
#define TCP_SETUP_SOCKETS (TCP_MAX_STREAMS + 1)

/* With failover over more than one path, the connector opens a spare
 * control socket on path 1 as stream number nstreams: the control records
 * travel on both (ctrl_io.c), so that losing path 0 loses none. */
static int spare_ctrl_wanted(int failover, int paths) { return failover && paths > 1; }

/* A connection's paths: as many as the end with more addresses has
 * (stream i takes our member i mod ours and their address i mod theirs). */
static int path_count(int ours, int theirs) {
  int n = ours > theirs ? ours : theirs;
  return n < COLLX_MAX_MEMBERS ? n : COLLX_MAX_MEMBERS;
}

static unsigned failover_flags(int members) {
  return (tcp_cfg.failover ? WIRE_FAILOVER_ON : 0u) | (members > 1 ? WIRE_FAILOVER_MERGED : 0u);
}

/* Both ends have it on, and at least one has more than one NIC. */
static int failover_agreed(unsigned connector, unsigned listener) {
  return (connector & listener & WIRE_FAILOVER_ON) && ((connector | listener) & WIRE_FAILOVER_MERGED);
}

/* ======================================================================== */
/* Listener                                                                  */
/* ======================================================================== */

struct pending {
  int fd;
  double deadline;
  struct wire_hello hello;
  size_t got;
  char peer[64];
};

struct incoming {
  int used;
  uint64_t conn_id;
  int ctrl_fd;
  int nstreams;
  int nhave;
  int spare;                /* failover: a spare control socket comes as stream index nstreams */
  int fds[TCP_SETUP_SOCKETS];
  struct wire_welcome welcome;
  size_t welcome_sent;
  double deadline;
  char peer[64];
  unsigned peer_flags;      /* the connector's enum wire_hello_flags */
  int peer_members;         /* NICs the connector's streams leave by */
};

struct tcp_listen {
  uint32_t magic;
  int dev;
  int tclass;               /* for every socket accepted here; -1: none */
  char devname[128];
  uint64_t secret;
  int nfds;
  int fds[COLLX_MAX_MEMBERS];
  struct sockaddr_storage addrs[COLLX_MAX_MEMBERS];
  int npending;
  struct pending pending[TCP_MAX_PENDING];
  struct incoming incoming[TCP_MAX_INCOMING];
};

int tcp_is_listen(const void *p) { return p && ((const struct tcp_listen *)p)->magic == TCP_MAGIC_LISTEN; }

ncclResult_t tcp_listen(const struct collx_device *dev, int dev_index, void *h,
                        const struct collx_conn_opts *opts, struct tcp_listen **out) {
  struct tcp_listen *l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  l->magic = TCP_MAGIC_LISTEN;
  l->dev = dev_index;
  l->tclass = opts ? opts->tclass : -1;
  snprintf(l->devname, sizeof l->devname, "%s", dev->name);
  if (collx_random64(&l->secret) != 0) {
    COLLX_WARN("listen on %s: no random secret from the kernel (getrandom: %s)", dev->name, strerror(errno));
    free(l);
    return ncclSystemError;
  }
  /* One listening socket per member interface: data streams of a merged
   * device are spread over all of them. */
  for (int i = 0; i < dev->nmembers; i++) {
    const struct collx_netif *m = &dev->members[i];
    int fd = sock_listen_tc((const struct sockaddr *)&m->addr, m->addr_len, l->tclass, &l->addrs[i]);
    if (fd < 0) {
      char a[80];
      COLLX_WARN("cannot listen on %s (%s): %s", m->ifname,
                 collx_addr_str((const struct sockaddr *)&m->addr, a, sizeof a), strerror(errno));
      tcp_listen_close(l);
      return ncclSystemError;
    }
    l->fds[l->nfds++] = fd;
  }
  collx_handle_encode(h, &l->addrs[0], l->secret);
  *out = l;
  return ncclSuccess;
}

/* Half-open sockets of every listener of the process. */
static atomic_int pending_total;

/* A flood of clients on a listening port must not take the descriptors
 * the process needs for its real connections: a listener keeps at most a
 * quarter of RLIMIT_NOFILE half-open, and all listeners together half. */
static int pending_cap(int *process_cap) {
  struct rlimit rl;
  long nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 1L << 20;
  long per_listener = nofile / 4 < TCP_MAX_PENDING ? nofile / 4 : TCP_MAX_PENDING;
  *process_cap = (int)(nofile / 2 > 8 ? nofile / 2 : 8);
  return per_listener > 8 ? (int)per_listener : 8;
}

/* Remove pending[i] (its fd closed or handed on), keeping the others in
 * the order they came: pending[0] is always the oldest. */
static void pending_remove(struct tcp_listen *l, int i) {
  memmove(&l->pending[i], &l->pending[i + 1], (size_t)(l->npending - i - 1) * sizeof l->pending[0]);
  l->npending--;
  atomic_fetch_sub(&pending_total, 1);
}

static void pending_drop(struct tcp_listen *l, int i, const char *why) {
  if (why) COLLX_INFO(COLLX_LOG_NET, "dropped connection from %s on %s: %s", l->pending[i].peer, l->devname, why);
  close(l->pending[i].fd);
  pending_remove(l, i);
}

static void incoming_drop(struct incoming *in, const char *why, const char *devname) {
  COLLX_INFO(COLLX_LOG_NET, "dropped half-built connection from %s on %s: %s", in->peer, devname, why);
  close(in->ctrl_fd);
  for (int i = 0; i < TCP_SETUP_SOCKETS; i++)
    if (in->fds[i] >= 0) close(in->fds[i]);
  in->used = 0;
}

/* Accept the connections waiting on the listening sockets: at most half a
 * table's worth per call, so that those just accepted have their hellos
 * read (progress_pending) before a flood behind them pushes them out. */
static void accept_new(struct tcp_listen *l) {
  int process_cap;
  int cap = pending_cap(&process_cap);
  int budget = cap / 2;
  for (int k = 0; k < l->nfds; k++) {
    while (budget > 0) {
      /* A flood of idle clients: the oldest goes, the newest may be the peer. */
      if (l->npending > 0 && (l->npending >= cap || atomic_load(&pending_total) >= process_cap))
        pending_drop(l, 0, "too many half-open connections");
      if (atomic_load(&pending_total) >= process_cap) return; /* other listeners hold them */
      struct sockaddr_storage from;
      socklen_t flen = sizeof from;
      int fd = accept4(l->fds[k], (struct sockaddr *)&from, &flen, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      /* Linux copies the class from the listener; set it anyway, so that
       * it does not hang on that. */
      sock_set_tclass(fd, from.ss_family, l->tclass);
      budget--;
      atomic_fetch_add(&pending_total, 1);
      struct pending *p = &l->pending[l->npending++];
      memset(p, 0, sizeof *p);
      p->fd = fd;
      p->deadline = now_s() + tcp_cfg.connect_timeout_s;
      collx_addr_str((struct sockaddr *)&from, p->peer, sizeof p->peer);
    }
  }
}

static struct incoming *incoming_find(struct tcp_listen *l, uint64_t conn_id) {
  for (int i = 0; i < TCP_MAX_INCOMING; i++)
    if (l->incoming[i].used && l->incoming[i].conn_id == conn_id) return &l->incoming[i];
  return NULL;
}

/* A control socket introduced itself: remember it and send the welcome. */
static const char *start_incoming(struct tcp_listen *l, struct pending *p) {
  if (incoming_find(l, p->hello.conn_id)) return "duplicate connection id";
  struct incoming *in = NULL;
  for (int i = 0; i < TCP_MAX_INCOMING && !in; i++)
    if (!l->incoming[i].used) in = &l->incoming[i];
  if (!in) return "too many connections being set up";
  memset(in, 0, sizeof *in);
  in->used = 1;
  in->conn_id = p->hello.conn_id;
  in->ctrl_fd = p->fd;
  in->nstreams = p->hello.nstreams < 1 ? 1 : p->hello.nstreams > TCP_MAX_STREAMS ? TCP_MAX_STREAMS : p->hello.nstreams;
  for (int i = 0; i < TCP_SETUP_SOCKETS; i++) in->fds[i] = -1;
  in->deadline = now_s() + tcp_cfg.connect_timeout_s;
  snprintf(in->peer, sizeof in->peer, "%s", p->peer);
  in->welcome.magic = WIRE_MAGIC;
  in->welcome.version = WIRE_VERSION;
  in->welcome.naddrs = (uint8_t)l->nfds;
  in->welcome.nstreams = (uint16_t)in->nstreams;
  in->welcome.flags = (uint16_t)failover_flags(l->nfds);
  in->peer_flags = p->hello.index & 0xffu;
  in->peer_members = p->hello.index >> 8 ? p->hello.index >> 8 : 1;
  in->spare = spare_ctrl_wanted(failover_agreed(in->peer_flags, in->welcome.flags),
                                path_count(l->nfds, in->peer_members));
  for (int i = 0; i < l->nfds; i++) addr_to_wire(&l->addrs[i], &in->welcome.addrs[i]);
  sock_tune(in->ctrl_fd);
  return NULL;
}

static const char *attach_stream(struct tcp_listen *l, struct pending *p) {
  struct incoming *in = incoming_find(l, p->hello.conn_id);
  if (!in) return "data stream for an unknown connection";
  int i = p->hello.index;
  if (i >= in->nstreams + in->spare || in->fds[i] >= 0) return "bad or duplicate stream index";
  in->fds[i] = p->fd;
  in->nhave++;
  sock_tune(p->fd);
  return NULL;
}

/* Read hellos of half-open sockets; admit those with the right secret. */
static void progress_pending(struct tcp_listen *l) {
  double t = now_s();
  for (int i = 0; i < l->npending;) {
    struct pending *p = &l->pending[i];
    enum sock_io io = sock_recv_some(p->fd, &p->hello, sizeof p->hello, &p->got);
    if (io == SOCK_IO_AGAIN) {
      if (t > p->deadline) {
        pending_drop(l, i, "said nothing in time");
        continue;
      }
      i++;
      continue;
    }
    if (io != SOCK_IO_DONE) {
      pending_drop(l, i, "closed before identifying itself");
      continue;
    }
    const char *why = NULL;
    int kind = wire_hello_check(&p->hello, l->secret, &why);
    if (kind == WIRE_HELLO_CTRL)
      why = start_incoming(l, p);
    else if (kind == WIRE_HELLO_DATA)
      why = attach_stream(l, p);
    if (why) {
      pending_drop(l, i, why);
      continue;
    }
    pending_remove(l, i); /* fd now owned by an incoming */
  }
}

/* Has the peer closed the control socket of a connection being built? */
static int ctrl_hung_up(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return 0;
  if (p.revents & (POLLERR | POLLHUP)) return 1;
  char b;
  return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

ncclResult_t tcp_accept(struct tcp_listen *l, struct tcp_comm_base **out) {
  *out = NULL;
  accept_new(l);
  progress_pending(l);
  double t = now_s();
  for (int i = 0; i < TCP_MAX_INCOMING; i++) {
    struct incoming *in = &l->incoming[i];
    if (!in->used) continue;
    enum sock_io io = sock_send_some(in->ctrl_fd, &in->welcome, sizeof in->welcome, &in->welcome_sent);
    if (io == SOCK_IO_EOF || io == SOCK_IO_ERROR || ctrl_hung_up(in->ctrl_fd)) {
      incoming_drop(in, "peer closed its control connection", l->devname);
      continue;
    }
    if (in->nhave < in->nstreams + in->spare || io != SOCK_IO_DONE) {
      if (t > in->deadline) incoming_drop(in, "data streams did not arrive in time", l->devname);
      continue;
    }
    in->used = 0;
    /* READY goes first on the control socket, before any CTS or heartbeat
     * (the comm's threads start below).  136 bytes on a fresh socket: the
     * kernel takes them at once. */
    struct wire_ctrl ready = {.magic = WIRE_MAGIC, .type = WIRE_READY};
    size_t sent = 0;
    if (sock_send_some(in->ctrl_fd, &ready, sizeof ready, &sent) != SOCK_IO_DONE) {
      incoming_drop(in, "cannot confirm the connection", l->devname);
      return ncclSuccess;
    }
    struct tcp_comm_sockets sk = {.dev = l->dev, .devname = l->devname, .peer = in->peer,
                                  .ctrl_fd = in->ctrl_fd, .nstreams = in->nstreams, .stream_fds = in->fds,
                                  .max_chunk = tcp_cfg.chunk_size,
                                  .paths = path_count(l->nfds, in->peer_members),
                                  .failover = failover_agreed(in->peer_flags, in->welcome.flags),
                                  .spare_ctrl = in->spare, .spare_ctrl_fd = in->fds[in->nstreams]};
    char local[COLLX_MAX_MEMBERS][64];
    for (int p = 0; p < sk.paths; p++) {
      sk.path_nic[p] = collx_addr_str((const struct sockaddr *)&l->addrs[p % l->nfds], local[p], sizeof local[p]);
      sk.path_local[p] = &l->addrs[p % l->nfds];
    }
    *out = tcp_comm_open(&sk, &tcp_recv_role);
    if (!*out) return ncclSystemError;
    COLLX_INFO(COLLX_LOG_NET | COLLX_LOG_INIT, "accepted connection from %s on %s with %d streams", in->peer,
               l->devname, in->nstreams);
    return ncclSuccess;
  }
  return ncclSuccess;
}

void tcp_listen_close(struct tcp_listen *l) {
  tcp_connect_reap();
  if (!l) return;
  for (int i = 0; i < l->nfds; i++) close(l->fds[i]);
  while (l->npending) pending_drop(l, l->npending - 1, NULL);
  for (int i = 0; i < TCP_MAX_INCOMING; i++)
    if (l->incoming[i].used) {
      close(l->incoming[i].ctrl_fd);
      for (int k = 0; k < TCP_SETUP_SOCKETS; k++)
        if (l->incoming[i].fds[k] >= 0) close(l->incoming[i].fds[k]);
    }
  l->magic = TCP_MAGIC_DEAD;
  tcp_quarantine(l, free);
}

/* ======================================================================== */
/* Connector                                                                 */
/* ======================================================================== */

enum conn_stage { STAGE_CTRL_CONNECT, STAGE_CTRL_HELLO, STAGE_WELCOME, STAGE_STREAMS, STAGE_READY };

struct tcp_connecting {
  void *handle;                /* the handle memory this state belongs to */
  const void *owner;           /* collx_conn_opts.owner */
  int dev;                     /* device index */
  int tclass;
  struct collx_list node;      /* in the registry */
  double last_call;            /* when connect last stepped it (registry_lock) */
  enum conn_stage stage;
  int retries;
  int timeouts;                /* connects the listener's host never answered */
  int restarts;
  struct sockaddr_storage peer;
  char peer_str[64];
  uint64_t secret;
  uint64_t conn_id;
  int nstreams;
  int proposed;           /* the stream count this connect asks for (a restart asks again) */
  int ctrl_fd;
  struct wire_hello hello;
  size_t hello_sent;
  struct wire_welcome welcome;
  size_t welcome_got;
  struct wire_ctrl ready;
  size_t ready_got;
  int spare;              /* failover: a spare control socket, stream index nstreams */
  /* Failover: paths that did not answer during setup.  Their sockets are
   * made by path 0 instead, the comm comes up with the paths given up
   * (tcp_send_paths_down), and they come back as a lost path does. */
  unsigned down;
  char down_why[160];
  double streams_since;   /* when the streams stage began */
  int fds[TCP_SETUP_SOCKETS];
  int connected[TCP_SETUP_SOCKETS];
  struct wire_hello shello[TCP_SETUP_SOCKETS];
  size_t ssent[TCP_SETUP_SOCKETS];
};

/* In-progress connects.  A handle's connect_state is trusted only if it
 * names an entry here that belongs to that very handle: NCCL may pass a
 * handle that is garbage. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_list registry = {&registry, &registry};

static struct tcp_connecting *registry_find(void *h) {
  struct collx_list *pos, *tmp;
  struct tcp_connecting *found = NULL;
  pthread_mutex_lock(&registry_lock);
  collx_list_for_each_safe(pos, tmp, &registry) {
    struct tcp_connecting *c = COLLX_CONTAINER_OF(pos, struct tcp_connecting, node);
    if (c->handle == h && (uint64_t)(uintptr_t)c == collx_handle_connect_state(h)) found = c;
  }
  if (found) found->last_call = now_s();
  pthread_mutex_unlock(&registry_lock);
  return found;
}

static void connecting_close_fds(struct tcp_connecting *c) {
  if (c->ctrl_fd >= 0) close(c->ctrl_fd);
  for (int i = 0; i < TCP_SETUP_SOCKETS; i++)
    if (c->fds[i] >= 0) close(c->fds[i]);
}

/* NCCL stops calling connect for a handle it gives up on (abort) and
 * never says so.  Past twice the listener's setup deadline the listener
 * has dropped its half anyway: the state is released with its sockets.  A
 * connect that does come back for that handle starts afresh (its
 * connect_state no longer names an entry). */
void tcp_connect_reap(void) {
  static _Atomic double last_sweep;
  double t = now_s();
  if (t - atomic_load(&last_sweep) < 0.1) return;
  atomic_store(&last_sweep, t);
  double idle_max = 2.0 * tcp_cfg.connect_timeout_s;
  struct collx_list *pos, *tmp;
  pthread_mutex_lock(&registry_lock);
  collx_list_for_each_safe(pos, tmp, &registry) {
    struct tcp_connecting *c = COLLX_CONTAINER_OF(pos, struct tcp_connecting, node);
    if (t - c->last_call <= idle_max) continue;
    COLLX_INFO(COLLX_LOG_NET, "connect to %s abandoned (not called for %.0f s): its sockets are closed",
               c->peer_str, t - c->last_call);
    collx_list_del(&c->node); /* its handle may be gone: not touched */
    connecting_close_fds(c);
    free(c);
  }
  pthread_mutex_unlock(&registry_lock);
}

static void connecting_free(struct tcp_connecting *c, int close_fds_too) {
  pthread_mutex_lock(&registry_lock);
  collx_list_del(&c->node);
  pthread_mutex_unlock(&registry_lock);
  collx_handle_set_connect_state(c->handle, 0);
  if (close_fds_too) connecting_close_fds(c);
  free(c);
}

/* default_streams: the device's count from the placement plan, used when
 * opts names none. */
/* Connects of device `dev` under way (registry_lock). */
static int connects_pending(int dev) {
  int n = 0;
  for (struct collx_list *pos = registry.next; pos != &registry; pos = pos->next)
    n += COLLX_CONTAINER_OF(pos, struct tcp_connecting, node)->dev == dev;
  return n;
}

/* The streams a new connection proposes (connection options aside): the
 * device's count, fewer once many comms are open or opening on it
 * (src/topo/streams.c), never fewer than its members; COLLX_NSTREAMS is
 * taken as it is. */
static int streams_for_new(const struct collx_device *dev, int dev_index) {
  if (tcp_cfg.nstreams > 0) return dev->streams;
  pthread_mutex_lock(&registry_lock);
  int opening = connects_pending(dev_index);
  pthread_mutex_unlock(&registry_lock);
  int n = collx_streams_for_comms(dev->streams, tcp_comms_open(dev_index) + opening);
  return n < dev->nmembers ? dev->nmembers : n;
}

static struct tcp_connecting *connecting_new(void *h, const struct collx_conn_opts *opts,
                                             int dev_index, int default_streams, const char **why,
                                             int *sys_err) {
  struct tcp_connecting *c = calloc(1, sizeof *c);
  if (!c) {
    *why = "out of memory";
    return NULL;
  }
  if (collx_handle_decode(h, &c->peer, &c->secret, why) != 0) {
    free(c);
    return NULL;
  }
  if (collx_random64(&c->conn_id) != 0) {
    *why = "no random connection id from the kernel (getrandom failed)";
    *sys_err = errno;
    free(c);
    return NULL;
  }
  c->handle = h;
  c->dev = dev_index;
  c->ctrl_fd = -1;
  for (int i = 0; i < TCP_SETUP_SOCKETS; i++) c->fds[i] = -1;
  c->nstreams = opts && opts->nstreams > 0 && opts->nstreams < default_streams ? opts->nstreams : default_streams;
  if (c->nstreams < 1) c->nstreams = 1;
  if (c->nstreams > TCP_MAX_STREAMS) c->nstreams = TCP_MAX_STREAMS;
  c->proposed = c->nstreams;
  c->tclass = opts ? opts->tclass : -1;
  c->owner = opts ? opts->owner : NULL;
  collx_addr_str((struct sockaddr *)&c->peer, c->peer_str, sizeof c->peer_str);
  collx_handle_set_connect_state(h, (uint64_t)(uintptr_t)c);
  pthread_mutex_lock(&registry_lock);
  c->last_call = now_s();
  collx_list_add_tail(&registry, &c->node);
  pthread_mutex_unlock(&registry_lock);
  return c;
}

/* Source address for stream i: the member interface it should leave by. */
static const struct collx_netif *stream_member(const struct collx_device *dev, int i,
                                                const struct sockaddr_storage *to) {
  const struct collx_netif *m = &dev->members[i % dev->nmembers];
  return m->addr.ss_family == to->ss_family ? m : NULL;
}

/* Returns 1 when done, 0 in progress, -1 on failure (errno set). */
static int step_connect(int *fd) {
  int r = sock_connect_done(*fd);
  if (r < 0) {
    int e = errno;
    close(*fd);
    *fd = -1;
    errno = e;
  }
  return r;
}

/* The listener dropped this handshake: start it over with a new
 * connection id (the listener may still hold the old one), unless it has
 * happened too often, then fail with the WARN `what` says.  err: the
 * socket's error (0 for end of stream).  host_answers: the socket went by
 * another NIC or listener address than the control socket, which the
 * listener's host answered: a timeout there is that path's loss (a NIC
 * dropping packets), not a dead host, and worth starting over. */
static ncclResult_t listener_dropped(const struct collx_device *dev, struct tcp_connecting *c, int err,
                                     int host_answers, const char *what) {
  uint64_t id;
  if (err == ETIMEDOUT && !host_answers) { /* the listener's host acknowledges nothing: no use starting over */
    COLLX_WARN("connect to %s on device %s: the listener's host acknowledged nothing for %d s "
               "(COLLX_CONNECT_TIMEOUT) during setup; did it die or lose its network?", c->peer_str, dev->name,
               tcp_cfg.connect_timeout_s);
    return ncclRemoteError;
  }
  if (c->restarts < TCP_CONNECT_RESTARTS && collx_random64(&id) == 0) {
    c->restarts++;
    COLLX_INFO(COLLX_LOG_NET | COLLX_LOG_INIT, "connect to %s on %s: %s; starting the handshake again (%d of %d)",
               c->peer_str, dev->name, what, c->restarts, TCP_CONNECT_RESTARTS);
    connecting_close_fds(c);
    c->ctrl_fd = -1;
    c->spare = 0;
    for (int i = 0; i < TCP_SETUP_SOCKETS; i++) {
      c->fds[i] = -1;
      c->connected[i] = 0;
      c->ssent[i] = 0;
    }
    c->hello_sent = c->welcome_got = c->ready_got = 0;
    c->down = 0;
    c->down_why[0] = 0;
    c->conn_id = id;
    c->nstreams = c->proposed;
    c->stage = STAGE_CTRL_CONNECT;
    return ncclSuccess;
  }
  COLLX_WARN("connect to %s on device %s: %s (after %d new starts)", c->peer_str, dev->name, what, c->restarts);
  return ncclRemoteError;
}

static ncclResult_t stage_ctrl_connect(const struct collx_device *dev, struct tcp_connecting *c) {
  if (c->ctrl_fd < 0) {
    const struct collx_netif *m = stream_member(dev, 0, &c->peer);
    struct sockaddr_storage from;
    if (m) {
      from = m->addr;
      sock_set_port(&from, 0);
    }
    c->ctrl_fd = sock_connect_start_tc((struct sockaddr *)&c->peer, sock_len(&c->peer),
                                       m ? (struct sockaddr *)&from : NULL, m ? sock_len(&from) : 0,
                                       c->tclass);
    if (c->ctrl_fd < 0) goto failed;
    sock_ack_deadline(c->ctrl_fd, tcp_cfg.connect_timeout_s);
  }
  int r = step_connect(&c->ctrl_fd);
  if (r == 0) return ncclSuccess;
  if (r < 0) goto failed;
  c->hello = (struct wire_hello){.magic = WIRE_MAGIC, .version = WIRE_VERSION,
                                 .kind = WIRE_HELLO_CTRL, .nstreams = (uint16_t)c->nstreams,
                                 .index = (uint16_t)(failover_flags(dev->nmembers) | (unsigned)dev->nmembers << 8),
                                 .secret = c->secret, .conn_id = c->conn_id};
  c->stage = STAGE_CTRL_HELLO;
  return ncclSuccess;
failed:
  /* Refused: a full backlog, or a port not open yet; quick to retry.  No
   * answer to the SYN for COLLX_CONNECT_TIMEOUT: tried once more only. */
  if (errno == ECONNREFUSED && ++c->retries < TCP_CONNECT_RETRIES) return ncclSuccess;
  if (errno == ETIMEDOUT && ++c->timeouts < 2) return ncclSuccess;
  if (errno == ETIMEDOUT) {
    COLLX_WARN("connect to %s on device %s failed: no answer from that host in 2 x %d s "
               "(COLLX_CONNECT_TIMEOUT); is it alive and reachable, or is a firewall dropping the port?",
               c->peer_str, dev->name, tcp_cfg.connect_timeout_s);
    return ncclRemoteError;
  }
  COLLX_WARN("connect to %s on device %s failed: %s", c->peer_str, dev->name, strerror(errno));
  return ncclRemoteError;
}

static ncclResult_t stage_ctrl_hello(const struct collx_device *dev, struct tcp_connecting *c) {
  enum sock_io io = sock_send_some(c->ctrl_fd, &c->hello, sizeof c->hello, &c->hello_sent);
  if (io == SOCK_IO_AGAIN) return ncclSuccess;
  if (io != SOCK_IO_DONE) {
    char what[160];
    int err = errno;
    snprintf(what, sizeof what, "sending hello failed: %s", strerror(err));
    return listener_dropped(dev, c, err, 0, what);
  }
  c->stage = STAGE_WELCOME;
  return ncclSuccess;
}

static ncclResult_t stage_welcome(const struct collx_device *dev, struct tcp_connecting *c) {
  enum sock_io io = sock_recv_some(c->ctrl_fd, &c->welcome, sizeof c->welcome, &c->welcome_got);
  if (io == SOCK_IO_AGAIN) return ncclSuccess;
  if (io != SOCK_IO_DONE) {
    char what[200];
    int err = io == SOCK_IO_EOF ? 0 : errno;
    snprintf(what, sizeof what, "the listener closed the connection (%s); was the handle stale or its "
             "secret wrong?", err ? strerror(err) : "EOF");
    return listener_dropped(dev, c, err, 0, what);
  }
  struct wire_welcome *w = &c->welcome;
  const char *why = NULL;
  if (wire_welcome_check(w, TCP_MAX_STREAMS, &why) != 0) {
    COLLX_WARN("connect to %s on device %s: %s", c->peer_str, dev->name, why);
    return ncclRemoteError;
  }
  c->nstreams = w->nstreams;
  c->spare = spare_ctrl_wanted(failover_agreed(failover_flags(dev->nmembers), w->flags),
                               path_count(dev->nmembers, w->naddrs));
  c->streams_since = now_s();
  c->stage = STAGE_STREAMS;
  return ncclSuccess;
}

/* The paths the streams take (stream i: member i mod M to the listener's
 * address i mod N), named for failover's messages. */
static void connector_paths(const struct collx_device *dev, const struct tcp_connecting *c,
                            struct tcp_comm_sockets *sk, char (*peer_addr)[64], struct sockaddr_storage *remote) {
  int n = c->welcome.naddrs;
  sk->paths = path_count(dev->nmembers, n);
  sk->failover = failover_agreed(failover_flags(dev->nmembers), c->welcome.flags);
  for (int p = 0; p < sk->paths; p++) {
    const struct collx_netif *m = &dev->members[p % dev->nmembers];
    sk->path_nic[p] = m->ifname;
    sk->path_local[p] = &m->addr;
    if (wire_to_addr(&c->welcome.addrs[p % n], &remote[p]) == 0) {
      sk->path_peer[p] = collx_addr_str((const struct sockaddr *)&remote[p], peer_addr[p], 64);
      sk->path_remote[p] = &remote[p];
    }
  }
}

/* The listener says READY once it holds every stream: only then is the
 * comm known to exist on both sides (a listener that gave up on a slow
 * connector closes the control socket instead). */
static ncclResult_t stage_ready(const struct collx_device *dev, struct tcp_connecting *c, int *up) {
  enum sock_io io = sock_recv_some(c->ctrl_fd, &c->ready, sizeof c->ready, &c->ready_got);
  if (io == SOCK_IO_AGAIN) return ncclSuccess;
  if (io != SOCK_IO_DONE) {
    char what[200];
    int err = io == SOCK_IO_EOF ? 0 : errno;
    snprintf(what, sizeof what, "the listener dropped the connection before it was complete (%s); did "
             "setup take longer than COLLX_CONNECT_TIMEOUT?", err ? strerror(err) : "EOF");
    return listener_dropped(dev, c, err, 0, what);
  }
  if (c->ready.magic != WIRE_MAGIC || c->ready.type != WIRE_READY) {
    COLLX_WARN("connect to %s on device %s: expected READY from the listener", c->peer_str, dev->name);
    return ncclRemoteError;
  }
  *up = 1;
  return ncclSuccess;
}

/* Whether path p leaves by the control socket's NIC for the listener's
 * first address, as the control socket does. */
static int path_of_ctrl(const struct collx_device *dev, const struct tcp_connecting *c, int p) {
  return p % dev->nmembers == 0 && p % c->welcome.naddrs == 0;
}

/* ---- a path that does not answer during setup ---------------------------- */

/* The path of socket i (i == nstreams: the spare control socket). */
static int socket_path(const struct collx_device *dev, const struct tcp_connecting *c, int i) {
  return (i == c->nstreams ? 1 : i) % path_count(dev->nmembers, c->welcome.naddrs);
}

static int socket_done(const struct tcp_connecting *c, int i) {
  return c->connected[i] && c->ssent[i] == sizeof c->shello[i];
}

/* With failover, a path other than the control socket's may be given up
 * during setup: the connection comes up over the others and the path
 * comes back once it answers, as after a loss.  A path already given up
 * whose sockets fail by path 0 as well is a failure of the host. */
static int path_may_go_down(const struct collx_device *dev, const struct tcp_connecting *c, int i) {
  int p = socket_path(dev, c, i);
  return c->spare && p != 0 && !path_of_ctrl(dev, c, i == c->nstreams ? 1 : i) && !(c->down >> p & 1);
}

/* Give up path p for now: its sockets not made yet are made again by path
 * 0, so that the listener gets every socket it waits for. */
static void path_down(const struct collx_device *dev, struct tcp_connecting *c, int p, const char *why) {
  c->down |= 1u << p;
  if (!c->down_why[0]) snprintf(c->down_why, sizeof c->down_why, "%s", why);
  for (int i = 0; i < c->nstreams + c->spare; i++) {
    if (socket_path(dev, c, i) != p || socket_done(c, i)) continue;
    if (c->fds[i] >= 0) close(c->fds[i]);
    c->fds[i] = -1;
    c->connected[i] = 0;
    c->ssent[i] = 0;
  }
  COLLX_INFO(COLLX_LOG_NET | COLLX_LOG_INIT, "connect to %s on %s: %s; the connection comes up without path %d, "
             "which is tried again as a lost path is", c->peer_str, dev->name, why, p);
}

/* Paths whose sockets have not answered in half the listener's setup
 * deadline while those of path 0 all have: given up, before the listener
 * gives up on the whole connection. */
static void paths_overdue(const struct collx_device *dev, struct tcp_connecting *c) {
  if (!c->spare || now_s() - c->streams_since < 0.5 * tcp_cfg.connect_timeout_s) return;
  unsigned waiting = 0;
  for (int i = 0; i < c->nstreams + c->spare; i++)
    if (!socket_done(c, i)) waiting |= 1u << socket_path(dev, c, i);
  if (waiting & 1u) return; /* path 0 is slow too: the host's, not a path's */
  for (int i = 0; i < c->nstreams + c->spare; i++) {
    int p = socket_path(dev, c, i);
    if (!(waiting >> p & 1) || !path_may_go_down(dev, c, i)) continue;
    char why[160];
    snprintf(why, sizeof why, "%s by %s: no answer in %.1f s", i == c->nstreams ? "spare control socket" : "data stream",
             dev->members[p % dev->nmembers].ifname, 0.5 * tcp_cfg.connect_timeout_s);
    path_down(dev, c, p, why);
  }
}

/* Advance stream i (i == nstreams: the spare control socket, on path 1);
 * returns 1 once its hello is sent. */
static int stream_step(const struct collx_device *dev, struct tcp_connecting *c, int i,
                       ncclResult_t *res) {
  int spare = i == c->nstreams;
  /* A path given up during setup: its sockets go by path 0. */
  int path = c->down >> socket_path(dev, c, i) & 1 ? 0 : spare ? 1 : i;
  if (c->fds[i] < 0) {
    struct sockaddr_storage to, from;
    if (wire_to_addr(&c->welcome.addrs[path % c->welcome.naddrs], &to) != 0) {
      COLLX_WARN("connect to %s: welcome carries a bad address", c->peer_str);
      *res = ncclRemoteError;
      return 0;
    }
    const struct collx_netif *m = stream_member(dev, path, &to);
    if (m) {
      from = m->addr;
      sock_set_port(&from, 0);
    }
    c->fds[i] = sock_connect_start_tc((struct sockaddr *)&to, sock_len(&to),
                                      m ? (struct sockaddr *)&from : NULL, m ? sock_len(&from) : 0,
                                      c->tclass);
    if (c->fds[i] < 0) goto failed;
    /* Streams of a merged device run over NICs of different speeds.  A
     * socket that may queue megabytes takes its turn of chunks however
     * slowly its NIC drains them, and the fastest member then waits for
     * the slowest (caller progress split 1 and 3 Gb/s NICs 50/50 at half
     * their sum; bench/NOTES.md).  With at most two chunks unsent per
     * socket, a chunk goes to whichever member has drained its last. */
    if (dev->nmembers > 1 && !spare) sock_limit_unsent(c->fds[i], 2 * tcp_cfg.chunk_size);
    sock_ack_deadline(c->fds[i], tcp_cfg.connect_timeout_s);
    c->shello[i] = (struct wire_hello){.magic = WIRE_MAGIC, .version = WIRE_VERSION,
                                       .kind = WIRE_HELLO_DATA, .index = (uint16_t)i,
                                       .secret = c->secret, .conn_id = c->conn_id};
  }
  if (!c->connected[i]) {
    int r = step_connect(&c->fds[i]);
    if (r < 0) goto failed;
    if (r == 0) return 0;
    c->connected[i] = 1;
  }
  enum sock_io io = sock_send_some(c->fds[i], &c->shello[i], sizeof c->shello[i], &c->ssent[i]);
  if (io == SOCK_IO_DONE) return 1;
  if (io == SOCK_IO_AGAIN) return 0;
failed:;
  char what[160];
  int err = errno;
  snprintf(what, sizeof what, "%s %d by %s failed: %s", spare ? "spare control socket" : "data stream", i,
           dev->members[path % dev->nmembers].ifname, strerror(err));
  if (path_may_go_down(dev, c, i))
    path_down(dev, c, socket_path(dev, c, i), what);
  else
    *res = listener_dropped(dev, c, err, !path_of_ctrl(dev, c, path), what);
  return 0;
}

int tcp_connect_forget(const void *owner) {
  struct collx_list *pos, *tmp, doomed = {&doomed, &doomed};
  int n = 0;
  if (!owner) return 0;
  pthread_mutex_lock(&registry_lock);
  collx_list_for_each_safe(pos, tmp, &registry) {
    struct tcp_connecting *c = COLLX_CONTAINER_OF(pos, struct tcp_connecting, node);
    if (c->owner != owner) continue;
    collx_list_del(&c->node);
    collx_list_add_tail(&doomed, &c->node);
    n++;
  }
  pthread_mutex_unlock(&registry_lock);
  /* The handle memory may be gone with its communicator: only the state
   * and its sockets are released. */
  collx_list_for_each_safe(pos, tmp, &doomed) {
    struct tcp_connecting *c = COLLX_CONTAINER_OF(pos, struct tcp_connecting, node);
    if (c->ctrl_fd >= 0) close(c->ctrl_fd);
    for (int i = 0; i < TCP_SETUP_SOCKETS; i++)
      if (c->fds[i] >= 0) close(c->fds[i]);
    free(c);
  }
  return n;
}

ncclResult_t tcp_connect(const struct collx_device *dev, int dev_index, void *h,
                         const struct collx_conn_opts *opts, struct tcp_comm_base **out) {
  *out = NULL;
  tcp_connect_reap();
  struct tcp_connecting *c = registry_find(h);
  if (!c) {
    const char *why = NULL;
    int sys_err = 0;
    c = connecting_new(h, opts, dev_index, streams_for_new(dev, dev_index), &why, &sys_err);
    if (!c && sys_err) {
      COLLX_WARN("connect on device %s: %s: %s", dev->name, why, strerror(sys_err));
      return ncclSystemError;
    }
    if (!c) {
      COLLX_WARN("connect on device %s: invalid handle: %s", dev->name, why);
      return ncclInvalidArgument;
    }
  }
  ncclResult_t res = ncclSuccess;
  if (c->stage == STAGE_CTRL_CONNECT) res = stage_ctrl_connect(dev, c);
  if (res == ncclSuccess && c->stage == STAGE_CTRL_HELLO) res = stage_ctrl_hello(dev, c);
  if (res == ncclSuccess && c->stage == STAGE_WELCOME) res = stage_welcome(dev, c);
  if (res == ncclSuccess && c->stage == STAGE_STREAMS) {
    int ready = 0;
    int n = c->nstreams + c->spare;
    for (int i = 0; i < n && res == ncclSuccess && c->stage == STAGE_STREAMS; i++)
      ready += stream_step(dev, c, i, &res);
    if (res == ncclSuccess && c->stage == STAGE_STREAMS && ready == n) c->stage = STAGE_READY;
    if (res == ncclSuccess && c->stage == STAGE_STREAMS) paths_overdue(dev, c);
  }
  if (res == ncclSuccess && c->stage == STAGE_READY) {
    int up = 0;
    res = stage_ready(dev, c, &up);
    if (res == ncclSuccess && up) {
      sock_ack_deadline_off(c->ctrl_fd);
      for (int i = 0; i < c->nstreams + c->spare; i++) sock_ack_deadline_off(c->fds[i]);
      struct tcp_comm_sockets sk = {.dev = dev_index, .devname = dev->name, .peer = c->peer_str,
                                    .ctrl_fd = c->ctrl_fd, .nstreams = c->nstreams, .stream_fds = c->fds,
                                    .max_chunk = tcp_cfg.chunk_size, .members = dev->nmembers};
      char peer_addr[COLLX_MAX_MEMBERS][64];
      struct sockaddr_storage remote[COLLX_MAX_MEMBERS];
      connector_paths(dev, c, &sk, peer_addr, remote);
      sk.spare_ctrl = c->spare;
      sk.spare_ctrl_fd = c->fds[c->nstreams];
      *out = tcp_comm_open(&sk, &tcp_send_role);
      res = *out ? ncclSuccess : ncclSystemError;
      if (*out && c->down) {
        char why[200];
        snprintf(why, sizeof why, "no answer during setup: %s", c->down_why);
        tcp_send_paths_down(*out, c->down, why);
      }
      if (*out)
        COLLX_INFO(COLLX_LOG_NET | COLLX_LOG_INIT, "connected to %s on %s with %d streams", c->peer_str,
                   dev->name, c->nstreams);
      connecting_free(c, 0); /* fds now belong to the comm (or were closed) */
      return res;
    }
  }
  if (res != ncclSuccess) connecting_free(c, 1);
  return res;
}
