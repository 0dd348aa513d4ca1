/*
 * Message timeline, for finding where small-message latency goes.
 *
 * Built only with -DCOLLX_TIMELINE (./configure CPPFLAGS=-DCOLLX_TIMELINE);
 * otherwise every event compiles to nothing.  Each process records events
 * with CLOCK_MONOTONIC timestamps, which all processes of one host share,
 * and writes them at exit to $COLLX_TIMELINE_DIR/collx-timeline.<pid>
 * (default /tmp).  bench/timeline.py pairs a sender's events with its
 * receiver's through the connection key: the connecting side's port of the
 * control socket, which both ends know.
 */
#ifndef COLLX_UTIL_TIMELINE_H
#define COLLX_UTIL_TIMELINE_H

#include <stdint.h>

enum collx_tl_kind {
  COLLX_TL_ISEND = 1,  /* isend returned a request (n: message on this comm) */
  COLLX_TL_WRITTEN,    /* an eager message's last byte was handed to the socket */
  COLLX_TL_IRECV,      /* irecv posted (n: receive on this comm) */
  COLLX_TL_LANDED,     /* an eager message's last byte is in its buffer (n: eager message) */
  COLLX_TL_DONE,       /* test() reported a receive complete (n: receive) */
  COLLX_TL_IRECV_END,  /* irecv returns (n: receive) */
};

#ifdef COLLX_TIMELINE
void collx_tl_event(int kind, uint32_t key, uint32_t n);
#define COLLX_TL(kind, key, n) collx_tl_event((kind), (key), (n))
#else
#define COLLX_TL(kind, key, n) ((void)0)
#endif

#endif
