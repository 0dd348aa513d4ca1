/*
 * The watchdog (watchdog.c): one thread per process, alive while any comm
 * is, that ticks every comm (heartbeats, held records, liveness) through
 * the comm's role table.  A comm's opening and closing register it.
 */
#ifndef COLLX_TCP_WATCHDOG_H
#define COLLX_TCP_WATCHDOG_H

#include "base.h"

/* 0, or -1 when the thread cannot start (nothing stays registered). */
int tcp_watchdog_add(struct tcp_comm_base *c);
/* The last one out stops the thread and gets 1 (then it owes
 * tcp_linger_stop), the others 0. */
int tcp_watchdog_remove(struct tcp_comm_base *c);

#endif
