/* Thin helpers over non-blocking TCP sockets. */
#ifndef COLLX_TCP_SOCK_H
#define COLLX_TCP_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Result of one non-blocking I/O step. */
enum sock_io { SOCK_IO_DONE, SOCK_IO_AGAIN, SOCK_IO_EOF, SOCK_IO_ERROR };

/* Listening socket bound to addr (port 0 = any), non-blocking.  On success
 * returns the fd and writes the bound address back into *bound. */
int sock_listen(const struct sockaddr *addr, socklen_t len, struct sockaddr_storage *bound);

/* Start a non-blocking connect to `to`, from `from` (port 0) when not NULL.
 * Returns the fd (connection in progress) or -1 with errno set. */
int sock_connect_start(const struct sockaddr *to, socklen_t to_len, const struct sockaddr *from,
                       socklen_t from_len);

/* The same with the traffic class `tclass` (see sock_set_tclass) set on
 * the socket before the connect starts and on the listening socket (the
 * sockets accept returns inherit it). */
int sock_connect_start_tc(const struct sockaddr *to, socklen_t to_len, const struct sockaddr *from,
                          socklen_t from_len, int tclass);
int sock_listen_tc(const struct sockaddr *addr, socklen_t len, int tclass,
                   struct sockaddr_storage *bound);

/* The IPv4 TOS byte (IP_TOS) or IPv6 traffic class (IPV6_TCLASS) of the
 * socket's packets, by `family`; tclass < 0 leaves the kernel's default.
 * The kernel keeps the two ECN bits of a TCP socket for itself, so only
 * the DSCP part (tclass & 0xfc) is read back.  0, or -1 with errno. */
int sock_set_tclass(int fd, int family, int tclass);

/* While a connection is set up: fail it (ETIMEDOUT) once the peer's kernel
 * has acknowledged nothing for `seconds`, whether a SYN, data or a
 * keepalive probe went unanswered.  A peer that is alive but busy still
 * acknowledges, so it is waited for.  sock_ack_deadline_off restores the
 * defaults once the connection is up (its watchdog judges it then). */
void sock_ack_deadline(int fd, int seconds);
void sock_ack_deadline_off(int fd);

/* Has the connect on fd finished?  1 yes, 0 still in progress, -1 failed
 * (errno holds the reason). */
int sock_connect_done(int fd);

/* Move bytes [*done, len) of buf; advance *done.  DONE once all moved. */
enum sock_io sock_send_some(int fd, const void *buf, size_t len, size_t *done);
enum sock_io sock_recv_some(int fd, void *buf, size_t len, size_t *done);

/* Move bytes [*done, hlen + plen) of a header followed by a payload, in
 * as few sendmsg calls as the socket takes; advance *done. */
enum sock_io sock_send_two(int fd, const void *hdr, size_t hlen, const void *payload, size_t plen,
                           size_t *done);
/* The same, stopping at byte `end` (at most hlen + plen): DONE once *done
 * reaches it. */
enum sock_io sock_send_two_upto(int fd, const void *hdr, size_t hlen, const void *payload, size_t plen,
                                size_t *done, size_t end);

/* One recv of up to len - *done bytes: DONE when any byte came (a short
 * read says the socket is dry, so the caller need not ask again only to
 * hear EAGAIN). */
enum sock_io sock_recv_once(int fd, void *buf, size_t len, size_t *done);
/* sock_recv_once, but the bytes stay queued in the socket (MSG_PEEK). */
enum sock_io sock_peek_once(int fd, void *buf, size_t len, size_t *done);

/* Latency and buffer options for data sockets. */
void sock_tune(int fd);
/* The socket takes more data, and polls writable, only while fewer than
 * `bytes` of what it holds are unsent (TCP_NOTSENT_LOWAT). */
void sock_limit_unsent(int fd, size_t bytes);

/* Bytes the socket still holds: unsent, or sent and not yet acknowledged
 * (SIOCOUTQ); 0 when it cannot say. */
uint64_t sock_outq(int fd);
/* The bytes the socket's peer host has acknowledged so far, and for how
 * many microseconds in all the socket had bytes to send (in flight, or
 * held back by the peer's window or the send buffer): their ratio over an
 * interval is how fast the path drains (TCP_INFO).  0, or -1 when it
 * cannot say. */
int sock_drained(int fd, uint64_t *acked, uint64_t *busy_us);

/* What a caller last saw of a socket's acknowledgements, between calls
 * of sock_stalled. */
struct sock_stall {
  double since;   /* bytes waiting, unacknowledged, since then; 0: none */
  uint64_t acked; /* bytes the peer had acknowledged */
};
/* A socket with bytes waiting whose peer host has acknowledged nothing
 * for `ms` milliseconds (TCP_INFO), judged over calls at `now` (seconds,
 * a monotonic clock): its path is dead.  A busy peer's host still
 * acknowledges what arrived (it only closes its window). */
int sock_stalled(int fd, struct sock_stall *st, double now, int ms);
/* The same look, as the milliseconds the socket has had bytes waiting
 * with nothing acknowledged (0: none waiting, or acknowledged since the
 * last look). */
int sock_stall_ms(int fd, struct sock_stall *st, double now);

/* Set O_NONBLOCK. */
int sock_set_nonblock(int fd);

/* Port of a sockaddr (host order), and set it. */
int sock_port(const struct sockaddr_storage *ss);
void sock_set_port(struct sockaddr_storage *ss, int port);
socklen_t sock_len(const struct sockaddr_storage *ss);

#endif
