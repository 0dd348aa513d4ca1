/*
 * Failover: what a sender takes back from a stream given up, when one of
 * its chunks was in the middle of being written there.
 *
 * With late copies (pick_dup), the receiver may have every chunk of a send
 * (a copy came whole on another stream) while the stream that carried the
 * first copy is still writing it into a dead path.  The receiver then
 * confirms the send (DONE) before it acknowledges the loss (LOST_ACK).
 * The chunk is of a confirmed send, so it is not written again, and it
 * must count as written, or the send waits for ever.  A send still
 * unconfirmed gets the same chunk back to write again instead.
 *
 * A small send written whole is done at once from a kept copy
 * (COLLX_FAILOVER_COPY), which then stands in for it: a lost stream's
 * chunks go out again from the copy, and the DONE confirms the copy.
 *
 * Two paths, a stream each; the records come on the control socket as the
 * receiver writes them, and the caller's test completes the send.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/paths.h"
#include "transport/tcp/send.h"
#include "../common/check.h"
#include "sockbed.h"

#define CHUNK 4096u
#define SEQ 5u

struct bed {
  struct tcp_send_comm *c;
  struct sockbed s;
  char data[2 * CHUNK];
};

static int bed_up(struct bed *d) {
  d->c = sockbed_up(&d->s, sizeof *d->c, &tcp_send_role, &tcp_send_ctrl_ops, 2);
  return d->c ? 0 : -1;
}

/* A send of two chunks awaiting its DONE: chunk 1 written whole on stream
 * 1, chunk 0 half written on stream 0 (logged there, a writer). */
static struct tcp_send_req *send_half_written(struct bed *d) {
  struct tcp_send_comm *c = d->c;
  struct tcp_send_req *r = &c->reqs[0];
  tcp_req_activate(&r->base);
  r->base.comm = &c->base;
  r->base.seq = SEQ;
  r->data = d->data;
  r->size = sizeof d->data;
  r->chunk = CHUNK;
  r->nchunks = 2;
  r->chunks_left = 0;
  collx_list_init(&r->qnode);
  atomic_store(&r->chunks_done, 1);
  atomic_store(&r->writers, 1);
  atomic_store(&r->await, 1ull << 32 | SEQ);

  struct tcp_send_stream *t = &c->tx[0];
  t->log = calloc(4, sizeof *t->log);
  if (!t->log) return NULL;
  t->log_cap = 4;
  t->log[0] = (struct tcp_sent_chunk){.req = r, .seq = SEQ, .k = 0, .end = sizeof t->hdr + CHUNK, .dup = 1};
  t->log_len = 1;
  t->req = r;
  t->payload = d->data;
  t->done = CHUNK / 2;
  t->hdr = (struct wire_chunk){.magic = WIRE_MAGIC, .seq = SEQ, .total = r->size, .offset = 0, .len = CHUNK};
  atomic_store(&t->busy, 1);
  return r;
}

/* The receiver's records, as its control socket carries them. */
static int receiver_says(struct bed *d, uint8_t type, uint64_t value) {
  struct wire_ctrl m = {.magic = WIRE_MAGIC, .type = type, .n = 1};
  m.e[0].size = value;
  return write(d->s.ctrl[1], &m, sizeof m) == (ssize_t)sizeof m ? 0 : -1;
}

/* The next header a stream carries, past the watchdog's heartbeats. */
static int next_header(int fd, struct wire_chunk *h) {
  do
    if (recv(fd, h, sizeof *h, MSG_DONTWAIT | MSG_WAITALL) != (ssize_t)sizeof *h) return -1;
  while (h->flags == WIRE_CHUNK_HEARTBEAT);
  return 0;
}

/* Stream 0's path is given up (its LOST notice out). */
static void stream0_lost(struct bed *d) { atomic_store(&d->c->base.lost, 1u); }

static void test_confirmed_send_completes(void) {
  struct bed d;
  if (bed_up(&d) != 0) {
    CHECK(0, "test bed for the confirmed send");
    return;
  }
  struct tcp_comm_base *b = &d.c->base;
  struct tcp_send_req *r = send_half_written(&d);
  stream0_lost(&d);
  CHECK(r && receiver_says(&d, WIRE_DONE, SEQ) == 0 && receiver_says(&d, WIRE_LOST_ACK, 1) == 0,
        "the receiver's DONE and LOST_ACK written");
  int done = 0;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 100 && !done && res == ncclSuccess; i++) res = b->role->test(&r->base, &done, NULL);
  CHECK(res == ncclSuccess, "the test call succeeds (%d: %s)", res, b->error_what);
  CHECK(done, "the send is done once confirmed (chunks_done %zu of %zu, writers %d)",
        atomic_load(&r->chunks_done), r->nchunks, atomic_load(&r->writers));
  CHECK(r->redo_len == 0, "nothing of a confirmed send is written again (%u)", r->redo_len);
  CHECK(d.c->tx[0].req == NULL && !atomic_load(&d.c->tx[0].busy), "stream 0 let go of its chunk");
  sockbed_down(&d.s);
}

static void test_unconfirmed_chunk_goes_again(void) {
  struct bed d;
  if (bed_up(&d) != 0) {
    CHECK(0, "test bed for the unconfirmed send");
    return;
  }
  struct tcp_comm_base *b = &d.c->base;
  struct tcp_send_req *r = send_half_written(&d);
  stream0_lost(&d);
  CHECK(r && receiver_says(&d, WIRE_LOST_ACK, 1) == 0, "the receiver's LOST_ACK written");
  b->role->drain(b);
  CHECK(r->redo_len == 1 && r->redo[0] == 0, "chunk 0 is queued to be written again (%u queued)", r->redo_len);
  CHECK(atomic_load(&r->chunks_done) == 1, "the half-written chunk does not count as written (%zu)",
        atomic_load(&r->chunks_done));
  CHECK(atomic_load(&r->writers) == 0, "stream 0 is no longer a writer (%d)", atomic_load(&r->writers));
  sockbed_down(&d.s);
}

/* A send of two chunks written whole (one on each stream, logged there),
 * awaiting its DONE. */
static struct tcp_send_req *send_written_whole(struct bed *d) {
  struct tcp_send_req *r = send_half_written(d);
  if (!r) return NULL;
  struct tcp_send_stream *t0 = &d->c->tx[0], *t1 = &d->c->tx[1];
  t0->log[0].dup = 0;
  t0->req = NULL;
  atomic_store(&t0->busy, 0);
  atomic_store(&r->writers, 0);
  atomic_store(&r->chunks_done, 2);
  t1->log = calloc(4, sizeof *t1->log);
  if (!t1->log) return NULL;
  t1->log_cap = 4;
  t1->log[0] = (struct tcp_sent_chunk){.req = r, .seq = SEQ, .k = 1, .end = sizeof t1->hdr + CHUNK};
  t1->log_len = 1;
  return r;
}

/* COLLX_FAILOVER_COPY: a small send written whole is done at once, from a
 * copy that a lost stream's chunks are written again from. */
static void test_kept_copy(void) {
  struct bed d;
  if (bed_up(&d) != 0) {
    CHECK(0, "test bed for the kept copy");
    return;
  }
  struct tcp_comm_base *b = &d.c->base;
  for (size_t i = 0; i < sizeof d.data; i++) d.data[i] = (char)(i * 7 + 1);
  struct tcp_send_req *r = send_written_whole(&d);
  int done = 0;
  ncclResult_t res = r ? b->role->test(&r->base, &done, NULL) : ncclInternalError;
  CHECK(res == ncclSuccess && done, "a send written whole is done before its DONE (res %d, done %d)", res, done);
  struct tcp_send_req *k = d.c->kept;
  CHECK(k && atomic_load(&k->await) == (1ull << 32 | SEQ), "a kept copy awaits the send's DONE instead");
  if (!k) {
    sockbed_down(&d.s);
    return;
  }
  CHECK(d.c->tx[0].log[0].req == k && d.c->tx[1].log[0].req == k, "the streams' logs name the copy");
  memset(d.data, 0xee, sizeof d.data); /* the caller has its buffer back */
  CHECK(k->data == k->copy && k->size == 2 * CHUNK && memcmp(k->copy, d.data, 1) != 0 &&
            k->copy[CHUNK + 3] == (char)((CHUNK + 3) * 7 + 1),
        "the copy holds the send's bytes, not what the buffer holds now");

  /* Stream 0's path is lost with every send done: the caller calls
   * nothing more for it, so the watchdog writes the notice and then the
   * chunk taken back (caller progress). */
  stream0_lost(&d);
  atomic_store(&d.c->notice_pending, 1u);
  b->role->watch(b, tcp_now());
  struct wire_chunk h;
  CHECK(next_header(d.s.far[1], &h) == 0 && h.flags == WIRE_CHUNK_LOST && h.total == 1,
        "the watchdog writes the LOST notice on stream 1 (flags %#x, streams %#llx)", h.flags,
        (unsigned long long)h.total);
  CHECK(receiver_says(&d, WIRE_LOST_ACK, 1) == 0, "the receiver's LOST_ACK written");
  b->role->drain(b);
  CHECK(k->redo_len == 1 && k->redo[0] == 0 && k->chunks_left == 1, "chunk 0 goes out again from the copy (%u)",
        k->redo_len);
  b->role->watch(b, tcp_now());
  char payload[CHUNK];
  int right = next_header(d.s.far[1], &h) == 0 && h.seq == SEQ && h.offset == 0 && h.len == CHUNK &&
              recv(d.s.far[1], payload, sizeof payload, MSG_WAITALL) == (ssize_t)sizeof payload;
  for (size_t i = 0; right && i < sizeof payload; i++) right = payload[i] == (char)(i * 7 + 1);
  CHECK(right, "the watchdog writes chunk 0 on stream 1, from the copy (seq %u, offset %llu)", h.seq,
        (unsigned long long)h.offset);
  CHECK(receiver_says(&d, WIRE_DONE, SEQ) == 0, "the receiver's DONE written");
  b->role->drain(b);
  CHECK(atomic_load(&k->await) == 0, "the DONE confirms the copy");
  sockbed_down(&d.s);
}

/* COLLX_FAILOVER_COPY=0: the same send waits for its DONE. */
static void test_copy_off(void) {
  struct bed d;
  if (bed_up(&d) != 0) {
    CHECK(0, "test bed without copies");
    return;
  }
  size_t copy = tcp_cfg.failover_copy;
  tcp_cfg.failover_copy = 0;
  struct tcp_send_req *r = send_written_whole(&d);
  int done = 0;
  ncclResult_t res = r ? d.c->base.role->test(&r->base, &done, NULL) : ncclInternalError;
  CHECK(res == ncclSuccess && !done && !d.c->kept, "without copies the send waits for its DONE");
  tcp_cfg.failover_copy = copy;
  sockbed_down(&d.s);
}

int main(void) {
  tcp_cfg.progress = COLLX_PROGRESS_CALLER; /* no driver to kick */
  tcp_cfg.failover_ms = 2000;
  test_confirmed_send_completes();
  test_unconfirmed_chunk_goes_again();
  tcp_cfg.failover_copy = 2 * CHUNK;
  test_kept_copy();
  test_copy_off();
  printf("test_take_back: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
