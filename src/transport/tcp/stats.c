/*
 * Live counters of the TCP transport (stats.h).  The data path writes two
 * things only, each at a point it already counts: a completed message (the
 * caller's thread, no locked instruction) and the rare failover events.
 * Everything per stream comes from the kernel, read by the watchdog: bytes
 * from tcp_info's counters (exact, and free for the I/O threads), rtt,
 * retransmits and the send queue.
 */
#include "stats.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base.h"
#include "tcpinfo.h"

#define SAMPLE_INTERVAL_S 1.0

/* Beside the slot: what the last sample saw, so that a stream whose socket
 * was replaced (a path rejoined) keeps counting up, and rates. */
struct tcp_stats {
  struct collx_stats_conn *slot;
  double next_sample;
  double sampled_at[TCP_MAX_STREAMS];    /* when each stream's counters were last read */
  uint64_t kernel_last[TCP_MAX_STREAMS]; /* the socket's own counter at the last sample */
  uint64_t carried[TCP_MAX_STREAMS];     /* bytes of sockets the stream had before */
};

void tcp_stats_open(struct tcp_comm_base *c) {
  c->live_stats = NULL;
  if (!collx_stats_enabled()) return;
  struct tcp_stats *st = calloc(1, sizeof *st);
  if (!st) return;
  st->slot = collx_stats_conn_open(c->dev, c->role->sends ? COLLX_STATS_SEND : COLLX_STATS_RECV, c->devname,
                                   c->peer, c->nstreams, c->npaths > 0 ? c->npaths : 1);
  if (!st->slot) {
    free(st);
    return;
  }
  c->live_stats = st;
}

void tcp_stats_close(struct tcp_comm_base *c) {
  if (!c->live_stats) return;
  collx_stats_conn_close(c->live_stats->slot);
  free(c->live_stats);
  c->live_stats = NULL;
}

void tcp_stats_mirror(struct tcp_comm_base *c) {
  if (!c->live_stats) return;
  struct collx_stats_conn *s = c->live_stats->slot;
  atomic_store_explicit(&s->messages, c->stats.messages, memory_order_relaxed);
  atomic_store_explicit(&s->bytes, c->stats.bytes, memory_order_relaxed);
}

void tcp_stats_resent(struct tcp_comm_base *c, unsigned chunks) {
  if (c->live_stats) collx_stats_addn(&c->live_stats->slot->chunks_resent, chunks);
}

void tcp_stats_path_lost(struct tcp_comm_base *c) {
  if (c->live_stats) collx_stats_addn(&c->live_stats->slot->paths_lost, 1);
}

void tcp_stats_path_rejoined(struct tcp_comm_base *c) {
  if (!c->live_stats) return;
  collx_stats_addn(&c->live_stats->slot->paths_rejoined, 1);
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* tcp_info of stream i, whose socket is read from its copy (fd_seen): the
 * stream's lock is held most of the time by an I/O thread under load.
 * Between a socket's swap (rejoin.c closes the old one) and that copy's
 * update the number may name a closed or reused descriptor for a moment:
 * one sample is then wrong or missing, never harmful. */
static int stream_info(struct tcp_comm_base *c, int i, struct tcp_kernel_info *ti) {
  socklen_t len = sizeof *ti;
  memset(ti, 0, sizeof *ti);
  int fd = atomic_load_explicit(&c->streams[i].fd_seen, memory_order_relaxed);
  return fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0;
}

static void sample_stream(struct tcp_comm_base *c, struct tcp_stats *st, int i, double now) {
  struct collx_stats_stream *o = &st->slot->streams[i];
  atomic_store_explicit(&o->lost, (uint32_t)tcp_stream_lost(c, i), memory_order_relaxed);
  if (c->role->sends)
    atomic_store_explicit(&o->chunks, atomic_load_explicit(&c->streams[i].chunks, memory_order_relaxed),
                          memory_order_relaxed);
  struct tcp_kernel_info ti;
  if (!stream_info(c, i, &ti)) return;
  uint64_t k = c->role->sends ? ti.bytes_acked : ti.bytes_received;
  /* A smaller count than last time: a new socket (rejoin.c). */
  if (k < st->kernel_last[i]) st->carried[i] += st->kernel_last[i];
  uint64_t before = atomic_load_explicit(&o->bytes, memory_order_relaxed);
  uint64_t now_bytes = st->carried[i] + k;
  st->kernel_last[i] = k;
  atomic_store_explicit(&o->bytes, now_bytes, memory_order_relaxed);
  double dt = st->sampled_at[i] > 0 ? now - st->sampled_at[i] : 0;
  st->sampled_at[i] = now;
  if (dt > 0) atomic_store_explicit(&o->rate, (uint64_t)((double)(now_bytes - before) / dt), memory_order_relaxed);
  atomic_store_explicit(&o->rtt_us, ti.rtt, memory_order_relaxed);
  atomic_store_explicit(&o->rttvar_us, ti.rttvar, memory_order_relaxed);
  atomic_store_explicit(&o->retrans, ti.total_retrans, memory_order_relaxed);
  atomic_store_explicit(&o->unacked, ti.unacked, memory_order_relaxed);
  atomic_store_explicit(&o->notsent, ti.notsent_bytes, memory_order_relaxed);
}

void tcp_stats_sample(struct tcp_comm_base *c, double now) {
  struct tcp_stats *st = c->live_stats;
  if (!st) return;
  atomic_store_explicit(&st->slot->inflight, (uint64_t)atomic_load(&c->active_reqs), memory_order_relaxed);
  if (now < st->next_sample) return;
  for (int i = 0; i < c->nstreams && i < COLLX_STATS_STREAMS; i++) sample_stream(c, st, i, now);
  st->next_sample = now + SAMPLE_INTERVAL_S;
  atomic_store_explicit(&st->slot->sampled_ns, realtime_ns(), memory_order_relaxed);
}
