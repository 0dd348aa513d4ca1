/* collx-perf: Two-process mode: one peer (client or server), the measured loops of both transports. */
#include "perf.h"

/* ========================================================================
 * Two-process mode: one peer (client or server)
 * ======================================================================== */


static void bs_barrier(struct peer *p) {
  char b = 'B';
  xwrite(p->bfd, &b, 1, "bootstrap barrier");
  xread(p->bfd, &b, 1, "bootstrap barrier");
  if (b != 'B') die("bootstrap out of step (got 0x%02x where a barrier was due)", (unsigned char)b);
}

static void fill_pattern(char *b, size_t len) {
  for (size_t i = 0; i < len; i++) b[i] = (char)(uint8_t)(i * 7 + 13);
}

static void poison(char *b, size_t len) {
  for (size_t i = 0; i < len; i++) b[i] = (char)~(uint8_t)(i * 7 + 13);
}

static void check_msg(const char *b, size_t size, uint64_t seq) {
  size_t i = 0;
  if (size >= 8) {
    uint64_t s;
    memcpy(&s, b, 8);
    if (s != seq)
      die("data check: receive #%" PRIu64 " holds message #%" PRIu64 " (%zu B)", seq, s, size);
    i = 8;
  }
  for (; i < size; i++)
    if ((uint8_t)b[i] != (uint8_t)(i * 7 + 13))
      die("data check: message #%" PRIu64 " (%zu B): byte %zu is 0x%02x, expected 0x%02x", seq,
          size, i, (uint8_t)b[i], (uint8_t)(i * 7 + 13));
}


/* Every 128th empty poll: the peer's liveness and --timeout. */
static void idle_check(struct idle *id, int fd_peer, const char *who, const char *what) {
  if ((++id->n & 127) != 0) return;
  uint64_t t = now_ns();
  if (!id->since) {
    id->since = t;
    return;
  }
  if (fd_peer >= 0) check_peer(fd_peer, who);
  if (o.timeout > 0 && t - id->since > timeout_ns()) die("%s: no progress for %.0f s", what, o.timeout);
}

void idle_tick(struct idle *id, int fd_peer, const char *who, const char *what) {
  sched_yield();
  idle_check(id, fd_peer, who, what);
}

static void isend_retry(struct peer *p, void *buf, size_t size, void **req, const char *what) {
  struct idle id = {0, 0};
  for (;;) {
    beat();
    *req = NULL;
    NETCALL("isend", hx_net_isend(&net, p->scomm, buf, (int)size, MSG_TAG, p->smh, req));
    if (*req) return;
    idle_tick(&id, p->bfd, p->peer_name, what);
  }
}

static void *irecv1(struct peer *p, void *buf, size_t size, const char *what) {
  int sz = (int)size, tag = MSG_TAG;
  void *mh = p->rmh, *req = NULL;
  struct idle id = {0, 0};
  for (;;) {
    beat();
    NETCALL("irecv", hx_net_irecv(&net, p->rcomm, 1, &buf, &sz, &tag, &mh, &req));
    if (req) return req;
    idle_tick(&id, p->bfd, p->peer_name, what);
  }
}

/* Poll a request once; on completion check its size (expect < 0: any). */
int req_done(void *req, long expect, const char *what) {
  int done = 0, sz = -1;
  NETCALL("test", hx_net_test(&net, req, &done, &sz));
  if (done && expect >= 0 && sz != expect)
    die("%s completed with %d bytes, %ld expected", what, sz, expect);
  return done;
}

/* ---- plugin bandwidth ----------------------------------------------------
 * n messages of `size` bytes, `depth` in flight per direction.  The sender's
 * clock runs from the barrier until the receiver says (on the bootstrap)
 * that it has every byte, so the figure is end to end.  Returns that time
 * in ns for this side's send direction (0 if it does not send). */
uint64_t plugin_bw(struct peer *p, size_t size, uint64_t n, int do_send, int do_recv) {
  void *sreq[MAX_DEPTH] = {0}, *rreq[MAX_DEPTH] = {0};
  uint64_t rseq[MAX_DEPTH];
  uint64_t sposted = 0, sdone = 0, rposted = 0, rdone = 0, t_end = 0;
  int D = p->depth, ack_sent = !do_recv, ack_got = !do_send;
  set_phase("measuring plugin bandwidth, %zu B messages, %" PRIu64 " of them", size, n);

  /* Receives go up before the barrier: the sender never waits for them. */
  for (int i = 0; do_recv && i < D && rposted < n; i++) {
    char *b = p->rbuf + (size_t)i * p->slot;
    if (o.check) poison(b, size);
    rreq[i] = irecv1(p, b, size, "posting receives");
    rseq[i] = rposted++;
  }
  bs_barrier(p);
  uint64_t t0 = now_ns();
  struct idle id = {0, 0};
  for (;;) {
    int prog = 0;
    beat();
    if (do_send) {
      /* --in-order: post into the ring's next slot and test only the
       * oldest send, as NCCL's proxy does. */
      for (int k = 0; k < D && sposted < n; k++) {
        int i = o.in_order ? (int)(sposted % (uint64_t)D) : k;
        if (sreq[i]) {
          if (o.in_order) break;
          continue;
        }
        char *b = p->sbuf + (size_t)i * p->slot;
        if (o.check && size >= 8) memcpy(b, &sposted, 8);
        void *req = NULL;
        NETCALL("isend", hx_net_isend(&net, p->scomm, b, (int)size, MSG_TAG, p->smh, &req));
        if (!req) break; /* receiver not ready for it: call again later */
        sreq[i] = req;
        sposted++;
        prog = 1;
      }
      for (int k = 0; k < D; k++) {
        int i = o.in_order ? (int)(sdone % (uint64_t)D) : k;
        if (sreq[i] && req_done(sreq[i], -1, "isend")) {
          sreq[i] = NULL;
          sdone++;
          prog = 1;
        } else if (o.in_order) {
          break;
        }
      }
      if (sdone == n && !ack_got) {
        char a;
        ssize_t r = recv(p->bfd, &a, 1, MSG_DONTWAIT);
        if (r == 1) {
          if (a != 'A') die("bootstrap out of step (0x%02x where an acknowledgement was due)", (unsigned char)a);
          t_end = now_ns();
          ack_got = 1;
          prog = 1;
        } else if (r == 0) {
          die("the %s closed the bootstrap connection", p->peer_name);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          die("bootstrap: %s", strerror(errno));
        }
      }
    }
    if (do_recv) {
      for (int k = 0; k < D; k++) {
        int i = o.in_order ? (int)(rdone % (uint64_t)D) : k;
        if (!rreq[i] || !req_done(rreq[i], (long)size, "irecv")) {
          if (o.in_order) break;
          continue;
        }
        char *b = p->rbuf + (size_t)i * p->slot;
        if (o.check) check_msg(b, size, rseq[i]);
        rreq[i] = NULL;
        rdone++;
        prog = 1;
        if (rposted < n) {
          if (o.check) poison(b, size);
          rreq[i] = irecv1(p, b, size, "posting receives");
          rseq[i] = rposted++;
        }
      }
      if (rdone == n && !ack_sent) {
        char a = 'A';
        xwrite(p->bfd, &a, 1, "bootstrap acknowledgement");
        ack_sent = 1;
      }
    }
    if (ack_sent && ack_got && sdone == (do_send ? n : 0)) break;
    if (prog) {
      id.n = 0;
      id.since = 0;
    } else {
      idle_tick(&id, p->bfd, p->peer_name, g_phase);
    }
  }
  return do_send ? t_end - t0 : 0;
}

/* ---- plugin latency: ping-pong, one message in flight ------------------ */
/* Ping-pong with receives posted ahead, the way NCCL's proxy posts them (and
 * ib_send_lat keeps its receive queue filled): each side sends first and
 * then replaces the receive it has used, so a receive's clear-to-send is
 * out before the peer needs it.  Every call is inside the timed loop. */
static void *lat_recv(struct peer *p, uint64_t k, size_t size) {
  return irecv1(p, p->rbuf + (size_t)(k % 2) * p->slot, size, "posting a receive");
}

/* Polled without yielding, as the TCP baseline polls its socket
 * (precv_all): a yield is a system call, and a pong that lands during one
 * waits for it, which the baseline never does. */
static void lat_wait(struct peer *p, void *req, long expect, const char *what) {
  struct idle id = {0, 0};
  while (beat(), !req_done(req, expect, what)) idle_check(&id, p->bfd, p->peer_name, g_phase);
}

void plugin_lat(struct peer *p, size_t size, uint64_t n, uint64_t *rtt) {
  set_phase("measuring plugin latency, %zu B, %" PRIu64 " round trips", size, n);
  void *rr[2] = {NULL, NULL}, *sr;
  if (p->is_client) {
    rr[0] = lat_recv(p, 0, size); /* the pong of ping i+1 is posted after ping i */
    bs_barrier(p);
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = now_ns();
      isend_retry(p, p->sbuf, size, &sr, "sending the ping");
      if (i + 1 < n) rr[(i + 1) % 2] = lat_recv(p, i + 1, size);
      lat_wait(p, rr[i % 2], (long)size, "irecv (pong)");
      lat_wait(p, sr, -1, "isend (ping)");
      rtt[i] = now_ns() - t0;
    }
  } else {
    for (uint64_t k = 0; k < 2 && k < n; k++) rr[k] = lat_recv(p, k, size);
    bs_barrier(p);
    for (uint64_t i = 0; i < n; i++) {
      lat_wait(p, rr[i % 2], (long)size, "irecv (ping)");
      isend_retry(p, p->sbuf, size, &sr, "sending the pong");
      if (i + 2 < n) rr[i % 2] = lat_recv(p, i + 2, size);
      lat_wait(p, sr, -1, "isend (pong)");
    }
  }
}

/* ---- baseline TCP bandwidth: back-to-back writes on one socket --------- */
struct tsend {
  struct peer *p;
  size_t size;
  uint64_t n, t_end;
};

static void *tcp_sender(void *arg) {
  struct tsend *a = arg;
  /* Message i from slot i % depth, as in the plugin run: both sides of the
   * comparison then touch the same memory (8 x 512 KiB does not stay in a
   * core's cache the way one buffer would). */
  for (uint64_t i = 0; i < a->n; i++)
    bsend_all(a->p->tfd_out, a->p->sbuf + (size_t)(i % (uint64_t)a->p->depth) * a->p->slot, a->size);
  char c;
  xread(a->p->bfd, &c, 1, "bootstrap acknowledgement");
  if (c != 'A') die("bootstrap out of step (0x%02x where an acknowledgement was due)", (unsigned char)c);
  a->t_end = now_ns();
  return NULL;
}

uint64_t tcp_bw(struct peer *p, size_t size, uint64_t n, int do_send, int do_recv) {
  set_phase("measuring TCP bandwidth, %zu B messages, %" PRIu64 " of them", size, n);
  struct tsend a = {p, size, n, 0};
  pthread_t th;
  bs_barrier(p);
  uint64_t t0 = now_ns();
  if (do_send && do_recv) {
    if (pthread_create(&th, NULL, tcp_sender, &a) != 0) die("cannot start the TCP sender thread");
  } else if (do_send) {
    tcp_sender(&a);
  }
  if (do_recv) {
    for (uint64_t i = 0; i < n; i++)
      brecv_all(p->tfd_in, p->rbuf + (size_t)(i % (uint64_t)p->depth) * p->slot, size);
    char c = 'A';
    xwrite(p->bfd, &c, 1, "bootstrap acknowledgement");
  }
  if (do_send && do_recv) pthread_join(th, NULL);
  return do_send ? a.t_end - t0 : 0;
}

/* ---- baseline TCP latency: ping-pong, TCP_NODELAY, polled ---------------- */
/* On one socket (the pong carries the ping's acknowledgement), or split:
 * ping on the client's tfd_out, pong on its tfd_in. */
void tcp_lat(struct peer *p, size_t size, uint64_t n, int split, uint64_t *rtt) {
  set_phase("measuring TCP latency (%s), %zu B, %" PRIu64 " round trips", split ? "a socket each way" : "one socket",
            size, n);
  bs_barrier(p);
  if (p->is_client) {
    int back = split ? p->tfd_in : p->tfd_out;
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t0 = now_ns();
      bsend_all(p->tfd_out, p->sbuf, size);
      precv_all(back, p->rbuf, size);
      rtt[i] = now_ns() - t0;
    }
  } else {
    int back = split ? p->tfd_out : p->tfd_in;
    for (uint64_t i = 0; i < n; i++) {
      precv_all(p->tfd_in, p->rbuf, size);
      bsend_all(back, p->sbuf, size);
    }
  }
}

/* ---- set-up and tear-down shared by both sides -------------------------- */

void peer_setup(struct peer *p, size_t max_size) {
  plugin_start(o.dev, &p->mydev);
  set_phase("listening on the plugin");
  NETCALL("listen", hx_net_listen(&net, o.dev, p->my_handle, &p->lcomm));
  if (!p->lcomm) die("plugin listen() returned ncclSuccess but no listen comm");

  /* handles and device names, both ways */
  struct hello mine, theirs;
  memset(&mine, 0, sizeof mine);
  memcpy(mine.handle, p->my_handle, sizeof mine.handle);
  snprintf(mine.dev, sizeof mine.dev, "%s", p->mydev.name);
  mine.speed_be = htobe64((uint64_t)(int64_t)p->mydev.speed);
  xwrite(p->bfd, &mine, sizeof mine, "sending the plugin handle");
  xread(p->bfd, &theirs, sizeof theirs, "receiving the plugin handle");
  memcpy(p->peer_handle, theirs.handle, sizeof p->peer_handle);
  theirs.dev[sizeof theirs.dev - 1] = 0;
  snprintf(p->peerdev.name, sizeof p->peerdev.name, "%s", theirs.dev);
  p->peerdev.speed = (int)(int64_t)be64toh(theirs.speed_be);

  plugin_connect_pair(o.dev, p->lcomm, p->peer_handle, &p->scomm, &p->rcomm, p->peer_name);

  p->slot = (max_size + 63) & ~(size_t)63;
  p->nslots = p->depth < 2 ? 2 : p->depth;
  size_t len = p->slot * (size_t)p->nslots;
  p->sbuf = xalloc(len);
  p->rbuf = xalloc(len);
  fill_pattern(p->sbuf, p->slot);
  for (int i = 1; i < p->nslots; i++) memcpy(p->sbuf + (size_t)i * p->slot, p->sbuf, p->slot);
  set_phase("registering buffers");
  NETCALL("regMr", hx_net_regMr(&net, p->scomm, p->sbuf, len, NCCL_PTR_HOST, &p->smh));
  NETCALL("regMr", hx_net_regMr(&net, p->rcomm, p->rbuf, len, NCCL_PTR_HOST, &p->rmh));
  bs_barrier(p);
}

void peer_teardown(struct peer *p) {
  set_phase("closing the plugin comms");
  plugin_close(p->scomm, p->rcomm, p->lcomm, p->smh, p->rmh);
  if (p->tfd_out >= 0) close(p->tfd_out);
  if (p->tfd_in >= 0) close(p->tfd_in);
  free(p->sbuf);
  free(p->rbuf);
}
