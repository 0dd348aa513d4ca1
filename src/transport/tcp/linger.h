/*
 * Closing control sockets without a reset and without holding the caller
 * (linger.c).  A socket is closed once the peer has taken everything sent
 * on it (or has closed too, or a short while has passed); until then it
 * lingers.  While the watchdog runs, a lingering socket is the watchdog's
 * to close on a later tick, so that close returns at once; the process's
 * last close, which stops the watchdog, waits out whatever still lingers.
 */
#ifndef COLLX_TCP_LINGER_H
#define COLLX_TCP_LINGER_H

/* End our direction and close `fd` once the peer has it all: now when it
 * has already, or when `failed` (the peer is gone); otherwise on a later
 * watchdog tick, or here when no watchdog runs. */
void tcp_linger_close(int fd, int failed);

/* The watchdog starts: closes may leave sockets to it from now on. */
void tcp_linger_start(void);
/* Each watchdog tick: close the sockets that are done or past their time. */
void tcp_linger_reap(double now);
/* The last comm's close, after the watchdog stopped and its own control
 * sockets were handed here: nothing more is left to a watchdog, and what
 * lingers is waited out here (each socket until its own deadline at the
 * latest). */
void tcp_linger_stop(void);

/* How many sockets linger now (for the tests). */
int tcp_linger_count(void);

#endif
