/*
 * How fast each stream of a merged device drains, and what a slow one is
 * given (send.c).  The bytes each socket got acknowledged per unit of time
 * it had bytes to send (tcp_info) feed a per-stream estimate; a stream that drains far slower than the fastest
 * (a member NIC negotiated down, or degraded) is "slow": it takes a new
 * chunk only once what it holds in its socket drains in a short time, and
 * its chunks not yet through go out again on a faster stream that is
 * idle, or busy once they are late (PACE_LATE_S).
 * Pure functions, no locking: the watchdog feeds the estimates, the
 * streams read what it publishes.
 */
#ifndef COLLX_TCP_PACE_H
#define COLLX_TCP_PACE_H

#include <stdint.h>

/* A stream this many times slower than the fastest is slow.  Merged
 * members of unequal speed within this (1 and 3 Gb/s) share by stealing
 * each other's chunks as before; beyond it, a member's chunks hold back
 * in-order completion for longer than the others take for all of theirs. */
#define PACE_SLOW_RATIO 8.0
/* Samples a stream needs before it is judged. */
#define PACE_MIN_SAMPLES 3
/* A slow stream takes a new chunk only while what it holds drains within
 * this long. */
#define PACE_BUDGET_S 0.05

/* A stream whose peer host has acknowledged nothing for this long while
 * bytes wait is stuck: a retransmission timed out at least once (200 ms
 * at the least on Linux), as on a lossy link. */
#define PACE_STUCK_MS 300
/* A chunk waiting this long on a slow or stuck stream goes out again on a
 * faster one before that stream's new work: in-order completion waits on
 * it, and the faster streams may never run out of work to take it when
 * idle.  Four times what a slow stream is given, so a chunk dealt within
 * a slow stream's budget is not copied while it is on its way. */
#define PACE_LATE_S (4 * PACE_BUDGET_S)
_Static_assert(PACE_STUCK_MS > 200, "stuck means more than one retransmission timeout");

struct pace_rate {
  double bps;       /* bytes per second of busy time, 0 until the first sample */
  double wall_bps;  /* bytes per second of wall time over the same samples */
  int samples;
  uint64_t acked, busy_us;  /* the socket's counters at the last sample... */
  double at;                /* ...and when it was taken (seconds)... */
  int seen;                 /* ...once there was a first look */
};

/* Sampling needs this much time with bytes to send between two samples:
 * less says little (a burst into the link's queue). */
#define PACE_SAMPLE_MIN_US 20000

/* A look at a socket's counters (sock_drained), taken at `now` (seconds):
 * bytes acknowledged and time with bytes to send, both since it opened.
 * The first look only takes them; once the socket was busy
 * PACE_SAMPLE_MIN_US since the last sample, their ratio moves the
 * estimate a quarter of the way (the first sets it), and the bytes over
 * the wall time since the last sample move wall_bps likewise.  1 when it
 * did. */
int pace_rate_add(struct pace_rate *r, uint64_t acked, uint64_t busy_us, double now);
/* Whether a stream draining `bps` is slow beside the fastest, `fastest`
 * (0 or unknown: never). */
int pace_slow(double bps, double fastest);
/* Whether a slow stream is worth a WARN as a degraded member: it also
 * delivers far less per unit of wall time than the sibling that delivers
 * most (`most_wall_bps`).  The kernel counts busy time in jiffies, so a
 * member used only in short spells (a chunk now and then) reads many
 * times faster per busy second than it is, and its equal sibling, busy
 * all along, would look slow beside it; by wall time they deliver alike. */
int pace_degraded(const struct pace_rate *r, double fastest, double most_wall_bps);
/* Whether a slow stream holding `queued` bytes in its socket may take a
 * new chunk: what it holds drains within PACE_BUDGET_S. */
int pace_may_take(uint64_t queued, double bps);
/* Whether the chunk ending at byte `end` of a stream's output has left
 * the sender's host and been acknowledged: `wrote` bytes written in all,
 * `outq` still in the socket. */
int pace_through(uint64_t wrote, uint64_t outq, uint64_t end);
/* Whether a chunk written at `at` has waited long enough by `now` (both
 * seconds) to go out again on a busy faster stream: PACE_LATE_S. */
int pace_late(double at, double now);

#endif
