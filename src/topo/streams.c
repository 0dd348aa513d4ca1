/*
 * Streams per connection: the one policy.  The placement plan applies it to
 * each device (src/topo/plan.c), the transport opens what the plan says,
 * and collx-info prints the plan: all three show the same figure.
 */
#include "topo/topo.h"

#include <stdio.h>

int collx_streams_default(int speed_mbps, int ncpus, int local_ranks) {
  /* About one stream per 100 Gb/s of link, at least two (a lost segment on
   * one stream then stalls only part of a message), and at most eight and
   * three quarters of the CPUs each rank of the node can count on: each
   * stream has a thread on each side.  Measured on an H200 host over
   * loopback (bench/NOTES.md, attempts 4, 17 and 23): at 2 ranks on 16 CPUs
   * 4 streams beat 2 and 8; at 4 ranks 2 streams beat 4 by 10-25% at
   * 16 MiB, and 3 beat 2 in four alternating pairs at 32 and 128 MiB
   * (1-23%) and in three of four at 16 MiB. */
  if (local_ranks < 1) local_ranks = 1;
  int want = speed_mbps / 100000;
  if (want < 2) want = 2;
  int share = ncpus / local_ranks;
  int cap = share * 3 / 4 > 2 ? share * 3 / 4 : 2;
  if (want > cap) want = cap;
  if (want > 8) want = 8;
  return want;
}

int collx_streams_hinted(int base, int max_peers, int max_flows) {
  /* The default count was measured best with NCCL's own flows running at
   * once: 2 and 4 ranks, 4 channels each, which NCCL announces as up to 2-4
   * peers x 4 flows (bench/NOTES.md, attempts 3, 17 and 23).  Up to
   * COLLX_STREAMS_FLOWS_MEASURED concurrent flows it stands.  Beyond, every
   * flow has its streams and each stream a thread on each side, so the
   * rank's streams are held at what the measured shapes used
   * (base x COLLX_STREAMS_FLOWS_MEASURED) by giving each new connection
   * fewer, never less than one.  Hints never raise the count: more streams
   * than the default were never measured to help. */
  if (base < 1) base = 1;
  if (max_peers <= 0 || max_flows <= 0) return base;
  long flows = (long)max_peers * max_flows;
  if (flows <= COLLX_STREAMS_FLOWS_MEASURED) return base;
  long want = (long)base * COLLX_STREAMS_FLOWS_MEASURED / flows;
  return want < 1 ? 1 : (int)want;
}

int collx_streams_for_comms(int base, int open_comms) {
  /* The rule of collx_streams_hinted, applied to what is open rather than
   * to what NCCL announces: past the measured shapes each further comm
   * costs sockets and buffers on both sides and adds no speed (the device's
   * bandwidth is shared by them all anyway). */
  return collx_streams_hinted(base, open_comms, 1);
}

int collx_pool_default(int ncpus, int local_ranks, int streams) {
  /* Two threads per CPU near the NIC, however many ranks share them, at
   * most 32, at least one per stream (so a lone busy connection uses as
   * many cores as it has streams) and at least 2.  Idle threads sleep in
   * epoll and cost nothing; busy ones do the kernel's copying, which the
   * scheduler spreads over every core, and with more threads than CPUs a
   * stream's socket is seldom left waiting behind another stream's pass.
   * Measured under NCCL on the 16-CPU H200 host, all-reduce 16-512 MiB at
   * 4 ranks, alternating (bench/NOTES.md, attempts 28 and 30): 3 threads a
   * rank gave 3.1-4.0 GB/s against 6.0-7.2 for a thread per stream; in one
   * sitting, 16 threads 4.9-5.5 (round means), 32 with send passes of up
   * to 1 MiB 5.2-5.9, and the same code with a thread per stream 5.6-6.1. */
  (void)local_ranks;
  int n = ncpus > 16 ? 32 : 2 * ncpus;
  if (n < streams) n = streams;
  return n < 2 ? 2 : n;
}

void collx_plan_threads_why(const struct collx_plan *p, const struct collx_plan_dev *d, char *buf, size_t len) {
  if (p->settings.threads > 0) {
    snprintf(buf, len, "COLLX_NTHREADS");
    return;
  }
  snprintf(buf, len, "%d CPUs near the NIC, %d streams per connection", d->stream_cpus, d->streams);
}

void collx_plan_streams_why(const struct collx_plan *p, const struct collx_plan_dev *d, char *buf, size_t len) {
  if (p->settings.streams > 0) {
    snprintf(buf, len, "COLLX_NSTREAMS");
    return;
  }
  int ranks = p->settings.local_ranks > 0 ? p->settings.local_ranks : 1;
  snprintf(buf, len, "%d Mbps, %d CPUs, %d rank(s) on the node: %s; fewer past %d open comms", d->speed_mbps,
           d->stream_cpus, ranks, p->settings.local_ranks_from[0] ? p->settings.local_ranks_from : "default",
           COLLX_STREAMS_FLOWS_MEASURED);
}
