/*
 * Paths and their loss (COLLX_FAILOVER).
 *
 * The streams of a connection on a merged device leave by its member NICs
 * in turn: stream i takes path i mod npaths, a path being one local member
 * and one of the peer's addresses.  When a path dies (a socket error, or
 * bytes in flight that its peer host stops acknowledging) every stream on
 * it is given up at once: its siblings on the same NIC would only fail one
 * by one later, each holding chunks meanwhile.  What the roles do about it
 * (chunks sent again, the receiver told) is theirs: send.c, recv.c.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>

#include "comm.h"
#include "util/log.h"

int tcp_failover_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk) {
  c->failover = sk->failover;
  c->npaths = sk->paths > 0 ? sk->paths : 1;
  if (c->npaths > COLLX_MAX_MEMBERS) c->npaths = COLLX_MAX_MEMBERS;
  if (!c->failover) return 0;
  struct tcp_paths *ps = calloc(1, sizeof *ps);
  if (!ps) return -1;
  for (int i = 0; i < TCP_MAX_STREAMS; i++) ps->fd[i] = ps->pend_fd[i] = -1;
  for (int p = 0; p < c->npaths; p++) {
    struct tcp_path *path = &ps->p[p];
    snprintf(path->name, sizeof path->name, "%s%s%s", sk->path_nic[p] ? sk->path_nic[p] : "path",
             sk->path_peer[p] ? " to " : "", sk->path_peer[p] ? sk->path_peer[p] : "");
    path->listen_fd = -1;
    if ((path->have_local = sk->path_local[p] != NULL)) path->local = *sk->path_local[p];
    if ((path->have_remote = sk->path_remote[p] != NULL)) path->remote = *sk->path_remote[p];
  }
  c->paths = ps;
  return 0;
}

void tcp_failover_free(struct tcp_comm_base *c) {
  struct tcp_paths *ps = c->paths;
  if (!ps) return;
  for (int p = 0; p < COLLX_MAX_MEMBERS; p++)
    if (ps->p[p].listen_fd >= 0) close(ps->p[p].listen_fd);
  for (int i = 0; i < TCP_MAX_STREAMS; i++) {
    if (ps->fd[i] >= 0) close(ps->fd[i]);
    if (ps->pend_fd[i] >= 0) close(ps->pend_fd[i]);
  }
  free(ps);
  c->paths = NULL;
}

const char *tcp_path_name(const struct tcp_comm_base *c, int path) {
  return c->paths ? c->paths->p[path % c->npaths].name : "path";
}

unsigned tcp_path_streams(const struct tcp_comm_base *c, int i) {
  unsigned mask = 0;
  for (int j = i % c->npaths; j < c->nstreams; j += c->npaths) mask |= 1u << j;
  return mask;
}

unsigned tcp_path_lose(struct tcp_comm_base *c, int i, const char *why) {
  unsigned path = tcp_path_streams(c, i);
  unsigned all = c->nstreams >= 32 ? ~0u : (1u << c->nstreams) - 1;
  unsigned before = atomic_fetch_or(&c->lost, path);
  if ((before & path) == path) return 0;
  if ((before | path) == all) {
    tcp_comm_failf(c, ncclRemoteError, "every path to the peer is lost, the last %s (%s)",
                   tcp_path_name(c, i), why);
    return 0;
  }
  COLLX_WARN("%s connection with %s on device %s: lost the path %s (%s); its traffic moves to the other "
             "NICs of the device", c->role->name, c->peer, c->devname, tcp_path_name(c, i), why);
  tcp_path_lost_ctrl(c, i % c->npaths, why);
  tcp_stats_path_lost(c);
  return path & ~before;
}

void tcp_path_lost_ctrl(struct tcp_comm_base *c, int path, const char *why) {
  /* The control socket travels on path 0, its spare on path 1. */
  if (path == 0 || (path == 1 && c->ctrl2_fd >= 0)) tcp_ctrl_lose(c, path, why);
}

/* The kernel's struct tcp_info (uapi linux/tcp.h) as far as the peer's
 * window: glibc's copy stops before the fields this needs, and the kernel
 * fills what it has (the length it returns says how much). */
struct kernel_tcp_info {
  uint8_t state, ca_state, retransmits, probes, backoff, options, wscale, flags;
  uint32_t rto, ato, snd_mss, rcv_mss;
  uint32_t unacked, sacked, lost, retrans, fackets;
  uint32_t last_data_sent, last_ack_sent, last_data_recv, last_ack_recv;
  uint32_t pmtu, rcv_ssthresh, rtt, rttvar, snd_ssthresh, snd_cwnd, advmss, reordering;
  uint32_t rcv_rtt, rcv_space, total_retrans;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
  uint32_t segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out;
  uint64_t delivery_rate, busy_time, rwnd_limited, sndbuf_limited;
  uint32_t delivered, delivered_ce;
  uint64_t bytes_sent, bytes_retrans;
  uint32_t dsack_dups, reord_seen, rcv_ooopack, snd_wnd;
};
_Static_assert(offsetof(struct kernel_tcp_info, unacked) == 24, "tcp_info layout");
_Static_assert(offsetof(struct kernel_tcp_info, last_ack_recv) == 56, "tcp_info layout");
_Static_assert(offsetof(struct kernel_tcp_info, bytes_acked) == 120, "tcp_info layout");
_Static_assert(offsetof(struct kernel_tcp_info, notsent_bytes) == 144, "tcp_info layout");
_Static_assert(offsetof(struct kernel_tcp_info, snd_wnd) == 228, "tcp_info layout");
_Static_assert(sizeof(struct kernel_tcp_info) == 232, "tcp_info layout");

int tcp_fd_stalled(int fd, struct tcp_stall *st, double now) {
  struct kernel_tcp_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
  int full = len >= sizeof ti;
  /* Bytes waiting: sent and not acknowledged, or not sent at all (a local
   * link that is down fails every transmission, and they stay unsent).
   * Unsent bytes against a closed window are a busy peer, not a dead one. */
  int waiting = ti.unacked > 0 || (full && ti.notsent_bytes > 0 && ti.snd_wnd > 0);
  if (!waiting || (full && ti.bytes_acked != st->acked)) {
    st->acked = ti.bytes_acked;
    st->since = waiting ? now : 0;
    return 0;
  }
  /* Waiting since we first saw it so, acknowledged nothing since: after
   * an idle spell the last ACK is old while new bytes are on their first
   * trip. */
  if (st->since == 0) st->since = now;
  return now - st->since >= tcp_cfg.failover_ms * 1e-3 && ti.last_ack_recv >= (unsigned)tcp_cfg.failover_ms;
}
