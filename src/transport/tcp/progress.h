/*
 * The seam between the data streams and whatever drives them.
 *
 * Each stream's work is a non-blocking pass (its role's serve); a driver
 * decides when to run it: a pool of event-loop threads per device
 * (progress_engine.c over engine.c).  With COLLX_PROGRESS=caller no driver is attached
 * and the caller's isend/test run the passes (send.c, recv.c).
 */
#ifndef COLLX_TCP_PROGRESS_H
#define COLLX_TCP_PROGRESS_H

#include "base.h"

/* What a stream waits for after a pass. */
enum tcp_want { TCP_WANT_READ, TCP_WANT_WRITE, TCP_WANT_WORK, TCP_WANT_AGAIN, TCP_WANT_NOTHING };
/* A stream's role serves it (struct tcp_comm_role.serve) in one
   non-blocking pass: a receive stream reads what has arrived, a send
   stream writes queued chunks until the socket is full or the queue is
   empty.  The pass takes the stream's lock itself (a receive stream with
   trylock, stepping aside when a caller holds it) and says what to wait
   for next: READ (receive: socket dry), WRITE (send: socket full), WORK
   (send: queue empty), NOTHING (stream finished: eof, comm failed or
   stopped), AGAIN (send: stopped at TCP_PASS_BYTES with the socket still
   taking more). */

/* Bytes one pass over a stream moves at most (a send stream: whole chunks,
 * at least one), so that a thread of the pool turns to its other streams in
 * between (a socket may hold megabytes); a pass that stops for this asks to
 * be served again. */
#define TCP_PASS_BYTES (1u << 20)

/* Bytes a test() moves at most each way with COLLX_PROGRESS=caller, less
 * than a pool pass: the call runs on NCCL's proxy thread, which serves
 * every comm of the rank.  A write or read stops there even inside a
 * chunk.  On the test bed under 30% loss 1 MiB cost one call 9-10 ms of
 * system time; 256 KiB kept every call under 10 ms but cost bulk
 * throughput, 512 KiB did not and kept them at about 10 (bench/NOTES.md,
 * entries 61 and 64). */
#define TCP_CALLER_PASS_BYTES (512u << 10)

/* What one pass did, for a driver that adapts to it (the pool spins
 * after data with COLLX_SPIN_US). */
struct tcp_pass {
  int moved;   /* bytes went through the socket */
};

/* The driver of the streams: a pool of event-loop threads per device
 * (progress_engine.c).  With COLLX_PROGRESS=caller none is attached. */
struct tcp_progress_ops {
  const char *name;
  int (*attach)(struct tcp_comm_base *c);  /* start driving c's streams; 0 or -1 (nothing left attached) */
  void (*kick)(struct tcp_comm_base *c);   /* send work was queued for c's streams */
  void (*detach)(struct tcp_comm_base *c); /* synchronous: on return nothing drives c's streams */
  /* One stream off and back on (its socket is replaced between the two;
   * rejoin.c); detach is synchronous as above.  Never from a pass. */
  void (*stream_detach)(struct tcp_comm_base *c, int i);
  void (*stream_attach)(struct tcp_comm_base *c, int i);
};
extern const struct tcp_progress_ops tcp_progress_pool;
extern const struct tcp_progress_ops *const tcp_progress; /* the driver in use */

/* Wake what waits for the comm (its failure, its close): its streams'
 * threads, where a driver has them. */
void tcp_comm_wake(struct tcp_comm_base *c);

#endif
