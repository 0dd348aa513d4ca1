/*
 * Paths and their loss (failover.c), and a lost path coming back
 * (rejoin.c): the floor above the control channel and the progress
 * driver, below the roles.  What the roles do about a loss (chunks sent
 * again, the receiver told) is theirs.
 */
#ifndef COLLX_TCP_PATHS_H
#define COLLX_TCP_PATHS_H

#include "base.h"

/* ---- failover (failover.c) ------------------------------------------------ */

/* Take the sockets' paths and whether failover is agreed (a comm's
 * opening).  0, or -1 out of memory. */
int tcp_failover_init(struct tcp_comm_base *c, const struct tcp_comm_sockets *sk);
void tcp_failover_free(struct tcp_comm_base *c);
const char *tcp_path_name(const struct tcp_comm_base *c, int path);
/* Streams on the path of stream i, as a bit mask. */
unsigned tcp_path_streams(const struct tcp_comm_base *c, int i);
/* Give up stream i's path (all streams on it, and the control socket on
 * it): one WARN naming the path and the peer.  Returns the streams newly
 * given up (0 when they were already); when no stream is left the comm
 * fails instead (0). */
unsigned tcp_path_lose(struct tcp_comm_base *c, int i, const char *why);
/* A path lost again within this long of its last loss waits longer before
 * it is tried again (tcp_path_backoff); one that held longer starts over. */
#define TCP_PATH_FORGET_S 60.0
/* How long after its n-th loss in a row a path is first tried again:
 * none after the first (a flap comes back as soon as its link does), then
 * 2, 4, 8 ... seconds up to a minute, so that a lossy link which keeps
 * failing stops stalling the traffic it is given back each time. */
double tcp_path_backoff(int losses);
/* The control socket on a lost path is given up too. */
void tcp_path_lost_ctrl(struct tcp_comm_base *c, int path, const char *why);
/* A control socket given up while its path's streams stay in use (it
 * stalled on a lossy link, or its reader went quiet) would never come
 * back: only a path's return brings its control socket back.  So once it
 * has been so for TCP_CTRL_ALONE_S, its path is given up too and returns
 * whole, with the path's back-off.  The grace leaves a control socket
 * whose return with its path's streams is under way the time to finish.
 * Returns the paths due (bit p: path p), each once per such spell; the
 * watchdog's, each tick. */
#define TCP_CTRL_ALONE_S 1.0
unsigned tcp_ctrl_alone(struct tcp_comm_base *c, double now);
/* Path p has streams in use and so do others: it may be given up for its
 * control socket (never the last path in use: better a comm without a
 * spare than none). */
int tcp_path_spared(const struct tcp_comm_base *c, int p);

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
/* The streams of the receiver's path that have all come back, with its
 * control socket, if any: its listener is closed. */
unsigned tcp_rejoin_path_done(struct tcp_comm_base *c, unsigned swapped);
/* Both: hand the control sockets whose hello is through to the control
 * channel (tcp_ctrl_rejoin); those it took, by rejoin index
 * (TCP_REJOIN_CTRL).  One it cannot take now stays for the next look. */
unsigned tcp_rejoin_ctrl(struct tcp_comm_base *c);

#endif
