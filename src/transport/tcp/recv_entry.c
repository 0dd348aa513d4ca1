/*
 * What has arrived for each buffer of a receive, whichever socket brought
 * it: chunks on the data streams (recv.c) or an eager message on the
 * control channel (recv_ctrl.c).  It calls nothing of either: a finished
 * receive whose sender waits for its DONE is a return value.
 */
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

int tcp_entry_claim_chunk(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                          uint64_t len, uint64_t total) {
  if (!c->base.failover) return tcp_entry_claim(c, r, idx, CHUNK_STREAM, offset, len, total);
  struct chunk_track *t = &r->e[idx].track;
  const char *why = NULL;
  /* Looked at and claimed in one go: two copies may come at once. */
  pthread_mutex_lock(&c->track_lock);
  enum chunk_state st = chunk_track_state(t, offset, len, total);
  int rc = st == CHUNK_FREE ? chunk_track_stream(t, offset, len, total, &why) : 0;
  pthread_mutex_unlock(&c->track_lock);
  if (rc != 0) {
    claim_refused(c, r, idx, why, offset, len, total);
    return -1;
  }
  if (st == CHUNK_CLAIMED) atomic_store(&r->contested, 1);
  return st == CHUNK_FINISHED ? 1 : st == CHUNK_CLAIMED ? 2 : 0;
}

int tcp_entry_finish_chunk(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                           uint64_t len, uint64_t total) {
  if (!c->base.failover) return 1;
  pthread_mutex_lock(&c->track_lock);
  int rc = chunk_track_finish(&r->e[idx].track, offset, len, total);
  pthread_mutex_unlock(&c->track_lock);
  return rc != 1;
}

int tcp_entry_chunk_finished(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset,
                             uint64_t len, uint64_t total) {
  pthread_mutex_lock(&c->track_lock);
  enum chunk_state st = chunk_track_state(&r->e[idx].track, offset, len, total);
  pthread_mutex_unlock(&c->track_lock);
  return st == CHUNK_FINISHED;
}

void tcp_entry_unclaim(struct tcp_recv_comm *c, struct tcp_recv_req *r, int idx, uint64_t offset, uint64_t len,
                       uint64_t total) {
  if (atomic_load(&r->contested)) return;
  pthread_mutex_lock(&c->track_lock);
  chunk_track_unclaim(&r->e[idx].track, offset, len, total);
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
