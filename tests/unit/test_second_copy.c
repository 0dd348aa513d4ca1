/*
 * Failover: a chunk that arrives twice is written in place by one stream
 * at a time.
 *
 * A sender sends a chunk again on another stream when its first stream
 * was given up or sits on a slow member.  Both copies may be coming in at
 * once: the stream that claimed the chunk first owns it and writes it in
 * place; the second copy is read aside and, once whole, installed by
 * whoever holds the owner's lock next (or by itself when the owner let go
 * of the chunk unfinished), so that two threads never write the same
 * bytes of a receive buffer.
 *
 * The receive role over socket pairs, one stream per path, read by the
 * test's own calls (caller progress); the test plays the sender, and
 * holds a stream's lock to play the thread that is busy reading it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/recv.h"
#include "../common/check.h"
#include "sockbed.h"

#define MSG (32u * 1024)
#define HALF (MSG / 2)

struct bed {
  struct tcp_recv_comm *c;
  struct sockbed s;
  char *buf;
  char payload[MSG];
};

static int bed_up(struct bed *d, int paths) {
  d->c = sockbed_up(&d->s, sizeof *d->c, &tcp_recv_role, &tcp_recv_ctrl_ops, paths);
  d->buf = calloc(2, MSG);
  for (size_t i = 0; i < MSG; i++) d->payload[i] = (char)(i * 7 + 3);
  return d->c && d->buf ? 0 : -1;
}

static void bed_down(struct bed *d) {
  sockbed_down(&d->s);
  free(d->buf);
}

static int put(int fd, const void *p, size_t n) { return write(fd, p, n) == (ssize_t)n ? 0 : -1; }

/* The sender writes receive seq's whole-message chunk on stream i:
 * header and payload bytes [from, to). */
static int chunk_part(struct bed *d, int i, uint32_t seq, size_t from, size_t to) {
  struct wire_chunk h = {.magic = WIRE_MAGIC, .seq = seq, .total = MSG, .offset = 0, .len = MSG};
  if (from == 0 && put(d->s.far[i], &h, sizeof h) != 0) return -1;
  return put(d->s.far[i], d->payload + from, to - from);
}

static struct tcp_req *post(struct bed *d, int slot) {
  void *data = d->buf + (size_t)slot * MSG;
  size_t size = MSG;
  int tag = 0;
  struct tcp_req *r = NULL;
  return tcp_irecv(d->c, 1, &data, &size, &tag, &r) == ncclSuccess ? r : NULL;
}

/* One test() call: the caller's pass over every stream.  1 when done. */
static int poll_once(struct bed *d, struct tcp_req *r) {
  int done = 0;
  return d->c->base.role->test(r, &done, NULL) == ncclSuccess && done;
}

static int wait_done(struct bed *d, struct tcp_req *r) {
  for (int i = 0; i < 1000; i++)
    if (poll_once(d, r)) return 0;
  return -1;
}

static int untouched(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* The owner is busy (its lock held) while a whole second copy arrives:
 * the copy waits, nothing of it written in place; once the owner's lock
 * is free the copy goes in and the receive completes without the rest
 * of the first copy, whose bytes are then dropped. */
static void test_parked_while_owner_busy(void) {
  struct bed d;
  if (bed_up(&d, 2) != 0) {
    CHECK(0, "test bed for a parked copy");
    return;
  }
  struct tcp_req *r0 = post(&d, 0);
  CHECK(r0 && chunk_part(&d, 0, 0, 0, HALF) == 0, "receive 0 posted, half its chunk on stream 0");
  CHECK(r0 && !poll_once(&d, r0), "stream 0 reads the half and owns the chunk");
  CHECK(d.c->owners[0].req != NULL, "stream 0 owns the chunk");

  pthread_mutex_t *owner = &d.c->base.streams[0].lock;
  pthread_mutex_lock(owner);
  CHECK(chunk_part(&d, 1, 0, 0, MSG) == 0 && r0 && !poll_once(&d, r0),
        "the whole chunk again on stream 1, read while stream 0 is busy: not done yet");
  CHECK(d.c->owners[0].parked != NULL, "the second copy is parked for stream 0");
  CHECK(untouched(d.buf + HALF, HALF), "nothing of the second copy was written in place while stream 0 owns the chunk");
  pthread_mutex_unlock(owner);

  CHECK(r0 && wait_done(&d, r0) == 0, "once stream 0 is free the copy goes in and receive 0 completes");
  CHECK(memcmp(d.buf, d.payload, MSG) == 0, "every byte of receive 0 is right");
  CHECK(d.c->owners[0].parked == NULL && d.c->owners[0].req == NULL, "stream 0 owns nothing any more");

  /* The rest of the first copy is dropped; the next chunk on stream 0 is
   * read as usual. */
  struct tcp_req *r1 = post(&d, 1);
  memset(d.payload, 0x5a, 16);
  CHECK(r1 && chunk_part(&d, 0, 0, HALF, MSG) == 0 && chunk_part(&d, 0, 1, 0, MSG) == 0,
        "the rest of the first copy, then receive 1's chunk, on stream 0");
  CHECK(r1 && wait_done(&d, r1) == 0 && memcmp(d.buf + MSG, d.payload, MSG) == 0,
        "receive 1 completes with its own bytes");
  CHECK(!tcp_comm_failed(&d.c->base), "the comm is healthy (%s)", d.c->base.error_what);
  bed_down(&d);
}

/* The owner's stream is given up halfway (a LOST notice on a third
 * stream) while a second copy is coming in: the copy, once whole, goes in
 * by itself. */
static void test_installed_after_owner_lost(void) {
  struct bed d;
  if (bed_up(&d, 3) != 0) {
    CHECK(0, "test bed for an owner given up");
    return;
  }
  struct tcp_req *r0 = post(&d, 0);
  CHECK(r0 && chunk_part(&d, 0, 0, 0, HALF) == 0 && !poll_once(&d, r0), "stream 0 owns receive 0's chunk, half read");
  CHECK(chunk_part(&d, 1, 0, 0, HALF) == 0 && r0 && !poll_once(&d, r0), "half of a second copy read on stream 1");
  struct wire_chunk lost = {.magic = WIRE_MAGIC, .flags = WIRE_CHUNK_LOST, .total = 1u};
  CHECK(put(d.s.far[2], &lost, sizeof lost) == 0 && r0 && !poll_once(&d, r0),
        "stream 0 given up (LOST on stream 2): nothing complete yet");
  CHECK(tcp_stream_lost(&d.c->base, 0) && d.c->owners[0].req == NULL, "stream 0 no longer read, owning nothing");
  CHECK(chunk_part(&d, 1, 0, HALF, MSG) == 0 && r0 && wait_done(&d, r0) == 0,
        "the rest of the second copy: receive 0 completes");
  CHECK(memcmp(d.buf, d.payload, MSG) == 0, "every byte of receive 0 is right");
  CHECK(!tcp_comm_failed(&d.c->base), "the comm is healthy (%s)", d.c->base.error_what);
  bed_down(&d);
}

/* The owner finishes first: the second copy, whole later, is dropped. */
static void test_dropped_after_owner_finished(void) {
  struct bed d;
  if (bed_up(&d, 2) != 0) {
    CHECK(0, "test bed for a late copy");
    return;
  }
  struct tcp_req *r0 = post(&d, 0);
  CHECK(r0 && chunk_part(&d, 0, 0, 0, HALF) == 0 && !poll_once(&d, r0), "stream 0 owns receive 0's chunk, half read");
  CHECK(chunk_part(&d, 1, 0, 0, HALF) == 0 && r0 && !poll_once(&d, r0), "half of a second copy read on stream 1");
  CHECK(chunk_part(&d, 0, 0, HALF, MSG) == 0 && r0 && wait_done(&d, r0) == 0,
        "stream 0 finishes the chunk: receive 0 completes");
  CHECK(memcmp(d.buf, d.payload, MSG) == 0, "every byte of receive 0 is right");
  CHECK(d.c->rx[1].bounce == NULL && d.c->owners[0].parked == NULL, "stream 1 let go of its copy; nothing is parked");
  struct tcp_req *r1 = post(&d, 1);
  memset(d.payload, 0xa5, 16);
  CHECK(r1 && chunk_part(&d, 1, 0, HALF, MSG) == 0 && chunk_part(&d, 1, 1, 0, MSG) == 0,
        "the rest of the second copy, then receive 1's chunk, on stream 1");
  CHECK(r1 && wait_done(&d, r1) == 0 && memcmp(d.buf + MSG, d.payload, MSG) == 0,
        "receive 1 completes with its own bytes");
  CHECK(!tcp_comm_failed(&d.c->base), "the comm is healthy (%s)", d.c->base.error_what);
  bed_down(&d);
}

int main(void) {
  tcp_cfg.progress = COLLX_PROGRESS_CALLER; /* the test's calls read the streams */
  tcp_cfg.failover_ms = 2000;
  test_parked_while_owner_busy();
  test_installed_after_owner_lost();
  test_dropped_after_owner_finished();
  printf("test_second_copy: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
