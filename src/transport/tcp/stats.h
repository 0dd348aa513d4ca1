/*
 * The TCP transport's side of the live counters (util/stats.h): what it
 * knows about each comm, written into the comm's slot of the page.  Every
 * hook is a no-op for a comm without a slot (COLLX_STATS=0, or no room).
 */
#ifndef COLLX_TCP_STATS_H
#define COLLX_TCP_STATS_H

#include <stdint.h>

#include "util/stats.h"

struct tcp_comm_base;

/* A slot for the comm (base start) and its release (base stop). */
void tcp_stats_open(struct tcp_comm_base *c);
void tcp_stats_close(struct tcp_comm_base *c);
/* The watchdog's tick: requests in flight, and once a second each
 * stream's tcp_info and byte counters. */
void tcp_stats_sample(struct tcp_comm_base *c, double now);
/* Events where they happen. */
/* Copy the comm's completed messages and bytes (c->stats) to its slot:
 * the caller's thread, right after it counts them. */
void tcp_stats_mirror(struct tcp_comm_base *c);
void tcp_stats_resent(struct tcp_comm_base *c, unsigned chunks);
void tcp_stats_path_lost(struct tcp_comm_base *c);
void tcp_stats_path_rejoined(struct tcp_comm_base *c);

#endif
