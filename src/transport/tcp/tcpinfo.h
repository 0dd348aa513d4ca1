/*
 * The kernel's struct tcp_info (uapi linux/tcp.h) up to snd_wnd: glibc's
 * copy stops before the byte counters and the send queue, and the kernel
 * fills what it has (the length getsockopt returns says how much).  For
 * the stall check (sock.c) and the live counters (stats.c).
 */
#ifndef COLLX_TCP_TCPINFO_H
#define COLLX_TCP_TCPINFO_H

#include <stddef.h>
#include <stdint.h>

struct tcp_kernel_info {
  uint8_t state, ca_state, retransmits, probes, backoff, options, wscale, flags;
  uint32_t rto, ato, snd_mss, rcv_mss;
  uint32_t unacked, sacked, lost, retrans, fackets;
  uint32_t last_data_sent, last_ack_sent, last_data_recv, last_ack_recv;
  uint32_t pmtu, rcv_ssthresh, rtt, rttvar, snd_ssthresh, snd_cwnd, advmss, reordering;
  uint32_t rcv_rtt, rcv_space, total_retrans;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
  uint32_t segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out;
  uint64_t delivery_rate, busy_time, rwnd_limited, sndbuf_limited;
  uint32_t delivered, delivered_ce;
  uint64_t bytes_sent, bytes_retrans;
  uint32_t dsack_dups, reord_seen, rcv_ooopack, snd_wnd;
};
_Static_assert(offsetof(struct tcp_kernel_info, unacked) == 24, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, last_ack_recv) == 56, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, rtt) == 68, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, total_retrans) == 100, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, bytes_acked) == 120, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, bytes_received) == 128, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, notsent_bytes) == 144, "tcp_info layout");
_Static_assert(offsetof(struct tcp_kernel_info, snd_wnd) == 228, "tcp_info layout");
_Static_assert(sizeof(struct tcp_kernel_info) == 232, "tcp_info layout");

#endif
