/*
 * What has arrived for each buffer of a receive, whichever socket brought
 * it: chunks on the data streams (recv.c) or an eager message on the
 * control channel (recv_ctrl.c).  It calls nothing of either: a finished
 * receive whose sender waits for its DONE is a return value.
 */
#include <stdlib.h>

#include "recv.h"
#include "util/log.h"

/* One more entry of r is finished; with failover, the sender of a striped
 * message waits to hear when the whole receive is (eager sends do not).
 * The count and the mark of stream data are one word, so that the thread
 * finishing the last entry knows both at once; seq and the rest are read
 * before, since the caller may release r the moment it is done. */
static int entry_finished(struct tcp_recv_req *r, uint32_t *done_seq) {
  int failover = r->base.comm->failover;
  uint32_t seq = r->base.seq;
  int n = r->n, lazy = atomic_load_explicit(&r->lazy_done, memory_order_relaxed);
  int before = atomic_fetch_add_explicit(&r->entries_done, 1, memory_order_acq_rel);
  if ((before & TCP_ENTRIES_COUNT) + 1 != n || !(before & TCP_ENTRIES_STRIPED) || !failover) return 0;
  *done_seq = seq;
  return lazy ? 2 : 1;
}

int tcp_entry_account(struct tcp_recv_req *r, int idx, uint64_t len, uint32_t *done_seq) {
  struct tcp_entry *e = &r->e[idx];
  uint64_t got = atomic_fetch_add_explicit(&e->received, len, memory_order_acq_rel) + len;
  if ((int64_t)got != atomic_load_explicit(&e->total, memory_order_acquire)) return 0;
  return entry_finished(r, done_seq);
}

/* Fail the comm over a chunk that clashes with the buffer's others. */
static void claim_refused(struct tcp_recv_comm *c, const struct tcp_recv_req *r, int idx, const char *why,
                          uint64_t offset, uint64_t len, uint64_t total) {
  tcp_comm_failf(&c->base, ncclRemoteError, "%s: receive %u, buffer %d, [%llu,+%llu) of %llu bytes", why,
                 r->base.seq, idx, (unsigned long long)offset, (unsigned long long)len,
                 (unsigned long long)total);
}

/* Stream i owns the chunk at (r, idx, offset) from now on.  Caller holds
 * track_lock. */
static void own(struct tcp_recv_comm *c, int i, struct tcp_recv_req *r, int idx, uint64_t offset) {
  c->owners[i] = (struct tcp_recv_owner){.req = r, .idx = idx, .offset = offset};
}

/* Stream i owns no chunk; the parked copy it held, if any, is returned
 * for the caller to install or free.  Caller holds track_lock. */
static char *disown(struct tcp_recv_comm *c, int i) {
  struct tcp_recv_owner *o = &c->owners[i];
  char *parked = o->parked;
  o->req = NULL;
  o->parked = NULL;
  if (parked) atomic_fetch_and(&c->parked_mask, ~(1u << i));
  return parked;
}

/* The stream writing the chunk at (r, idx, offset) in place, or -1.
 * Caller holds track_lock. */
static int owner_of(const struct tcp_recv_comm *c, const struct tcp_recv_req *r, int idx, uint64_t offset) {
  for (int i = 0; i < c->base.nstreams; i++) {
    const struct tcp_recv_owner *o = &c->owners[i];
    if (o->req == r && o->idx == idx && o->offset == offset) return i;
  }
  return -1;
}

int tcp_entry_claim_chunk(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                          uint64_t len, uint64_t total, int stream) {
  if (!c->base.failover) return tcp_entry_claim(c, r, idx, CHUNK_STREAM, offset, len, total);
  struct chunk_track *t = &r->e[idx].track;
  const char *why = NULL;
  /* Looked at and claimed in one go: two copies may come at once. */
  pthread_mutex_lock(&c->track_lock);
  enum chunk_state st = chunk_track_state(t, offset, len, total);
  int rc = st == CHUNK_FREE ? chunk_track_stream(t, offset, len, total, &why) : 0;
  if (st == CHUNK_FREE && rc == 0) own(c, stream, r, idx, offset);
  pthread_mutex_unlock(&c->track_lock);
  if (rc != 0) {
    claim_refused(c, r, idx, why, offset, len, total);
    return -1;
  }
  if (st == CHUNK_CLAIMED) atomic_store(&r->contested, 1);
  return st == CHUNK_FINISHED ? 1 : st == CHUNK_CLAIMED ? 2 : 0;
}

int tcp_entry_finish_chunk(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                           uint64_t len, uint64_t total, int stream) {
  if (!c->base.failover) return 1;
  pthread_mutex_lock(&c->track_lock);
  int rc = chunk_track_finish(&r->e[idx].track, offset, len, total);
  char *parked = disown(c, stream); /* a copy that came too late to be needed */
  pthread_mutex_unlock(&c->track_lock);
  free(parked);
  return rc != 1;
}

enum tcp_copy_fate tcp_entry_second_copy(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                                         uint64_t len, uint64_t total, char *copy) {
  enum tcp_copy_fate fate = TCP_COPY_DROP;
  pthread_mutex_lock(&c->track_lock);
  struct chunk_track *t = &r->e[idx].track;
  int owner = owner_of(c, r, idx, offset);
  if (chunk_track_state(t, offset, len, total) != CHUNK_CLAIMED) {
    fate = TCP_COPY_DROP;
  } else if (owner < 0) {
    /* Its owner let go of it unfinished: this copy is the one. */
    chunk_track_finish(t, offset, len, total);
    fate = TCP_COPY_INSTALL;
  } else if (!c->owners[owner].parked) {
    c->owners[owner].parked = copy;
    atomic_fetch_or(&c->parked_mask, 1u << owner);
    fate = TCP_COPY_PARKED;
  }
  pthread_mutex_unlock(&c->track_lock);
  return fate;
}

int tcp_entry_chunk_finished(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                             uint64_t len, uint64_t total) {
  pthread_mutex_lock(&c->track_lock);
  enum chunk_state st = chunk_track_state(&r->e[idx].track, offset, len, total);
  pthread_mutex_unlock(&c->track_lock);
  return st == CHUNK_FINISHED;
}

char *tcp_entry_take_parked(struct tcp_recv_comm *c, int stream) {
  const struct wire_chunk *h = &c->rx[stream].hdr;
  struct tcp_recv_owner *o = &c->owners[stream];
  pthread_mutex_lock(&c->track_lock);
  char *parked = NULL;
  if (o->parked) {
    chunk_track_finish(&o->req->e[o->idx].track, o->offset, h->len, h->total);
    parked = disown(c, stream);
  }
  pthread_mutex_unlock(&c->track_lock);
  return parked;
}

void tcp_entry_disown(struct tcp_recv_comm *c, int stream) {
  pthread_mutex_lock(&c->track_lock);
  free(disown(c, stream));
  pthread_mutex_unlock(&c->track_lock);
}

void tcp_entry_unclaim(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset, uint64_t len,
                       uint64_t total, int stream) {
  pthread_mutex_lock(&c->track_lock);
  free(disown(c, stream));
  if (!atomic_load(&r->contested)) chunk_track_unclaim(&r->e[idx].track, offset, len, total);
  pthread_mutex_unlock(&c->track_lock);
}

int tcp_entry_claim(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, enum chunk_kind kind,
                    uint64_t offset, uint64_t len, uint64_t total) {
  struct chunk_track *t = &r->e[idx].track;
  const char *why = NULL;
  pthread_mutex_lock(&c->track_lock);
  int rc = kind == CHUNK_EAGER ? chunk_track_eager(t, len, &why)
         : kind == CHUNK_TRUNCATED ? chunk_track_truncated(t, &why)
                                   : chunk_track_stream(t, offset, len, total, &why);
  pthread_mutex_unlock(&c->track_lock);
  if (rc != 0) claim_refused(c, r, idx, why, offset, len, total);
  return rc;
}

int tcp_entry_truncated(const struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t size,
                        uint32_t *done_seq) {
  struct tcp_entry *e = &r->e[idx];
  COLLX_WARN("message of %llu bytes from %s on device %s is larger than the receive buffer "
             "of %zu bytes (tag %d); nothing was written",
             (unsigned long long)size, c->base.peer, c->base.devname, e->cap, r->match.tag[idx]);
  atomic_store(&r->base.error, ncclInvalidUsage);
  atomic_store(&e->total, 0);
  return entry_finished(r, done_seq);
}

struct tcp_recv_req *tcp_recv_posted(struct tcp_recv_comm *c, uint32_t seq) {
  struct tcp_recv_req *r = atomic_load_explicit(&c->by_seq[seq % TCP_SEQ_SLOTS], memory_order_acquire);
  return r && r->base.seq == seq ? r : NULL;
}
