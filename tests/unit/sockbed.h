/*
 * A socket-pair test bed: one comm of the TCP transport, send or receive
 * role, with failover on, whose control channel (both slots) and streams
 * (one per path) are AF_UNIX socket pairs.  The comm holds one end of each
 * pair; the test holds the other and plays the peer: it reads what the
 * comm writes and writes what the peer would.
 *
 * It exists so that a unit test can drive a role's own code (test, drain,
 * watch) on a comm with no connection setup, no peer process and no
 * network, and so that the tests doing this share one way of making and
 * tearing down such a comm.
 */
#ifndef COLLX_TESTS_SOCKBED_H
#define COLLX_TESTS_SOCKBED_H

#include <stddef.h>

#include "transport/tcp/base.h"

struct sockbed {
  struct tcp_comm_base *b;    /* the comm's base, at its start */
  int nstreams;               /* as made: one per path */
  int ctrl[2], spare[2];      /* the control sockets: [0] the comm's end, [1] the peer's */
  int far[TCP_MAX_STREAMS];   /* the peer's end of stream i; -1: closed by the test */
};

/* Makes a zeroed comm of `size` bytes (a struct tcp_send_comm or
 * tcp_recv_comm, on the heap: too large for the stack) with `paths` paths
 * of one stream each, and runs the role's init.  The comm, or NULL with
 * whatever was made left as it is. */
void *sockbed_up(struct sockbed *s, size_t size, const struct tcp_comm_role *role,
                 const struct tcp_ctrl_ops *ops, int paths);

/* Closes every socket of the bed, releases what the role and failover
 * hold, and frees the comm. */
void sockbed_down(struct sockbed *s);

#endif
