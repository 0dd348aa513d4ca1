/*
 * A comm's life (comm_life.c): open builds a comm of a role from its
 * sockets (the base, the control channel, the paths, the role's part) and
 * starts what runs for it (the progress driver, the watchdog); close stops
 * all of that and releases it.  Connection setup calls it; it reaches the
 * role only through the role's table.
 */
#ifndef COLLX_TCP_COMM_LIFE_H
#define COLLX_TCP_COMM_LIFE_H

#include "base.h"

/* A comm of `role` on the sockets in sk, which it owns from here on (they
 * are closed on failure).  NULL after a WARN saying why. */
struct tcp_comm_base *tcp_comm_open(const struct tcp_comm_sockets *sk, const struct tcp_comm_role *role);
/* Stop everything that runs for the comm, close its sockets, release the
 * role's part and keep the memory a while, marked dead (tcp_quarantine). */
void tcp_comm_close(struct tcp_comm_base *c);
/* Send and receive comms open on device `dev` in this process. */
int tcp_comms_open(int dev);

#endif
