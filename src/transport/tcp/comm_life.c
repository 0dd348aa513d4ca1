/*
 * A comm's life (comm_life.h): open and close.  The floor above the roles:
 * it builds the base, the control channel and the paths, lets the role
 * fill its part (through its table), then hands the streams to the
 * progress driver and the comm to the watchdog; close undoes it in the
 * opposite order.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm_life.h"
#include "linger.h"
#include "paths.h"
#include "progress.h"
#include "topo/topo.h"
#include "util/log.h"
#include "watchdog.h"

static void close_sockets(const struct tcp_comm_sockets *sk) {
  if (sk->ctrl_fd >= 0) close(sk->ctrl_fd);
  for (int i = 0; i < sk->nstreams; i++)
    if (sk->stream_fds[i] >= 0) close(sk->stream_fds[i]);
  if (sk->spare_ctrl && sk->spare_ctrl_fd >= 0) close(sk->spare_ctrl_fd);
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

static void streams_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk) {
  c->nstreams = sk->nstreams;
  for (int i = 0; i < sk->nstreams; i++) {
    struct tcp_stream *s = &c->streams[i];
    s->fd = sk->stream_fds[i];
    atomic_store_explicit(&s->fd_seen, s->fd, memory_order_relaxed);
    s->index = i;
    s->comm = c;
    pthread_mutex_init(&s->lock, NULL);
  }
}

static void streams_close(struct tcp_comm_base *c) {
  for (int i = 0; i < c->nstreams; i++) {
    close(c->streams[i].fd);
    pthread_mutex_destroy(&c->streams[i].lock);
  }
}

/* Fill the base of a zeroed comm from its sockets, which it then owns.
 * 0, or -1 with nothing to undo but the memory (the sockets are closed). */
static int base_init(struct tcp_comm_base *c, const struct tcp_comm_role *role, const struct tcp_comm_sockets *sk) {
  c->magic = role->magic;
  c->role = role;
  c->dev = sk->dev;
  /* Connections of one device count up together, send and receive alike
   * and across the node's processes, so that the placement plan spreads
   * their threads over its cores. */
  c->serial = collx_topo_next_serial(sk->dev);
  snprintf(c->devname, sizeof c->devname, "%s", sk->devname);
  snprintf(c->peer, sizeof c->peer, "%s", sk->peer);
  c->tl_key = timeline_key(sk->ctrl_fd, role->sends);
  collx_list_init(&c->wd_node);
  if (tcp_failover_init(c, sk) != 0) {
    COLLX_WARN("out of memory for the paths of a comm with %s", sk->peer);
    close_sockets(sk);
    return -1;
  }
  if (tcp_ctrl_init(&c->ctrl, c, role->ctrl, sk->ctrl_fd, sk->spare_ctrl ? sk->spare_ctrl_fd : -1) != 0) {
    COLLX_WARN("cannot make the locks of a comm with %s", sk->peer);
    tcp_failover_free(c);
    close_sockets(sk);
    return -1;
  }
  streams_init(c, sk);
  return 0;
}

/* Comms open per device, for the stream count of new connections
 * (collx_streams_for_comms); devices past the table share its last slot. */
#define COUNTED_DEVICES 64
static atomic_int comms_open[COUNTED_DEVICES];

static atomic_int *comms_open_of(int dev) {
  return &comms_open[dev >= 0 && dev < COUNTED_DEVICES ? dev : COUNTED_DEVICES - 1];
}

int tcp_comms_open(int dev) { return atomic_load(comms_open_of(dev)); }

/* Hand the streams to the progress driver (unless the caller drives them)
 * and the comm to the watchdog.  0, or -1: the caller closes the comm. */
static int comm_start(struct tcp_comm_base *c) {
  tcp_stats_open(c); /* before any other thread can see the comm */
  atomic_fetch_add(comms_open_of(c->dev), 1);
  c->counted = 1;
  if (!tcp_caller_progress()) {
    if (tcp_progress->attach(c) != 0) return -1;
    c->driven = 1;
  }
  if (tcp_watchdog_add(c) != 0) return -1;
  c->watched = 1;
  return 0;
}

/* Stop everything that runs for the comm and close its sockets. */
static void comm_stop(struct tcp_comm_base *c) {
  if (c->counted) atomic_fetch_sub(comms_open_of(c->dev), 1);
  c->counted = 0;
  int last = c->watched && tcp_watchdog_remove(c);
  atomic_store(&c->stop, 1);
  /* Nothing waits on the peer: detach waits out a pass in progress only. */
  if (c->driven) tcp_progress->detach(c);
  c->driven = 0;
  tcp_stats_close(c);
  streams_close(c);
  tcp_ctrl_close(&c->ctrl);
  /* The last comm waits for the control sockets still lingering only now,
   * its own shut too: a peer closing at the same time waits for our end of
   * the same pairs, and each end's FIN acknowledges what the other sent.
   * A comm opened since restarted the watchdog: the stop takes the reaping
   * from it too, and closes until its next start wait in place (at most
   * linger.c's LINGER_S), which is slower, never wrong. */
  if (last) tcp_linger_stop();
  tcp_failover_free(c);
}

/* The quarantine's release: the role, still in place, says the size. */
static void comm_free(void *p) {
  struct tcp_comm_base *c = p;
  collx_topo_free_local(c, c->role->size);
}

struct tcp_comm_base *tcp_comm_open(const struct tcp_comm_sockets *sk, const struct tcp_comm_role *role) {
  /* The comm holds the request pool and the stream state, which the
   * streams touch for every chunk: keep it on the NIC's NUMA node. */
  struct tcp_comm_base *c = collx_topo_alloc_local(sk->dev, role->size);
  if (!c) {
    close_sockets(sk);
    COLLX_WARN("out of memory for a comm with %s", sk->peer);
    return NULL;
  }
  memset(c, 0, role->size);
  if (base_init(c, role, sk) != 0) {
    collx_topo_free_local(c, role->size);
    return NULL;
  }
  if (role->init(c, sk) != 0 || comm_start(c) != 0) {
    tcp_comm_close(c);
    return NULL;
  }
  return c;
}

void tcp_comm_close(struct tcp_comm_base *c) {
  comm_stop(c);
  c->role->release(c);
  c->magic = TCP_MAGIC_DEAD;
  tcp_quarantine(c, comm_free);
}
