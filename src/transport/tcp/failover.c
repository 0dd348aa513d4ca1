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

#include "ctrl.h"
#include "paths.h"
#include "util/log.h"

int tcp_failover_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk) {
  c->failover = sk->failover;
  c->npaths = sk->paths > 0 ? sk->paths : 1;
  if (c->npaths > COLLX_MAX_MEMBERS) c->npaths = COLLX_MAX_MEMBERS;
  if (!c->failover) return 0;
  struct tcp_paths *ps = calloc(1, sizeof *ps);
  if (!ps) return -1;
  for (int i = 0; i < TCP_REJOIN_SOCKETS; i++) ps->fd[i] = -1;
  for (int i = 0; i < TCP_MAX_STREAMS; i++) ps->pend_fd[i] = -1;
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
  for (int i = 0; i < TCP_REJOIN_SOCKETS; i++)
    if (ps->fd[i] >= 0) close(ps->fd[i]);
  for (int i = 0; i < TCP_MAX_STREAMS; i++)
    if (ps->pend_fd[i] >= 0) close(ps->pend_fd[i]);
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

double tcp_path_backoff(int losses) {
  if (losses <= 1) return 0;
  double s = 1;
  for (int n = 1; n < losses && s < 60; n++) s *= 2;
  return s < 60 ? s : 60;
}

/* Count the loss and put off the path's next try (the sender's); how
 * long. */
static double path_backs_off(struct tcp_comm_base *c, int p) {
  if (!c->paths) return 0;
  struct tcp_path *pp = &c->paths->p[p];
  double now = tcp_now();
  pp->losses = now - pp->lost_at > TCP_PATH_FORGET_S ? 1 : pp->losses + 1;
  pp->lost_at = now;
  double wait = tcp_path_backoff(pp->losses);
  pp->next_try = now + wait;
  return wait;
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
  double wait = path_backs_off(c, i % c->npaths);
  char again[64] = "";
  if (wait > 0)
    snprintf(again, sizeof again, "; lost %d times in a row, it is tried again in %.0f s",
             c->paths->p[i % c->npaths].losses, wait);
  COLLX_WARN("%s connection with %s on device %s: lost the path %s (%s); its traffic moves to the other "
             "NICs of the device%s", c->role->name, c->peer, c->devname, tcp_path_name(c, i), why, again);
  tcp_path_lost_ctrl(c, i % c->npaths, why);
  tcp_stats_path_lost(c);
  return path & ~before;
}

int tcp_path_spared(const struct tcp_comm_base *c, int p) {
  unsigned in_use = ~atomic_load(&((struct tcp_comm_base *)c)->lost) & ((1u << c->nstreams) - 1);
  unsigned mine = tcp_path_streams(c, p);
  return (mine & in_use) && (in_use & ~mine);
}

unsigned tcp_ctrl_alone(struct tcp_comm_base *c, double now) {
  if (!c->paths || !tcp_ctrl_has_spare(&c->ctrl)) return 0;
  unsigned due = 0;
  for (int p = 0; p < 2 && p < c->npaths; p++) {
    struct tcp_path *pp = &c->paths->p[p];
    int alone = !tcp_ctrl_live(&c->ctrl, p) && tcp_path_spared(c, p);
    if (!alone) {
      pp->ctrl_alone_since = 0;
    } else if (pp->ctrl_alone_since == 0) {
      pp->ctrl_alone_since = now;
    } else if (now - pp->ctrl_alone_since >= TCP_CTRL_ALONE_S) {
      pp->ctrl_alone_since = 0;
      due |= 1u << p;
    }
  }
  return due;
}

void tcp_path_lost_ctrl(struct tcp_comm_base *c, int path, const char *why) {
  /* The control socket travels on path 0, its spare on path 1. */
  if (path == 0 || (path == 1 && tcp_ctrl_has_spare(&c->ctrl))) tcp_ctrl_lose(&c->ctrl, path, why);
}

