/*
 * What the live counters (COLLX_STATS) add, piece by piece, on this host:
 * the two relaxed stores a completed message costs the caller's thread
 * (tcp_stats_mirror), and one getsockopt(TCP_INFO) on a loopback TCP socket
 * with data moving, which the watchdog makes once a second per stream.
 *
 *   cc -O2 -o /tmp/stats_cost bench/stats_cost.c && /tmp/stats_cost
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static _Atomic uint64_t slot_messages, slot_bytes;

int main(void) {
  const long n = 100000000;
  uint64_t messages = 0, bytes = 0;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    messages++;
    bytes += 4194304;
    atomic_store_explicit(&slot_messages, messages, memory_order_relaxed);
    atomic_store_explicit(&slot_bytes, bytes, memory_order_relaxed);
    __asm__ volatile("" ::: "memory");
  }
  double per_msg = (now() - t0) / n * 1e9;

  int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  bind(l, (struct sockaddr *)&a, sizeof a);
  listen(l, 1);
  getsockname(l, (struct sockaddr *)&a, &al);
  connect(c, (struct sockaddr *)&a, sizeof a);
  int s = accept(l, NULL, NULL);
  char buf[65536];
  memset(buf, 1, sizeof buf);
  for (int i = 0; i < 64; i++) {
    if (write(c, buf, sizeof buf) < 0 || read(s, buf, sizeof buf) < 0) break;
  }
  unsigned char info[232];
  const long m = 200000;
  t0 = now();
  for (long i = 0; i < m; i++) {
    socklen_t len = sizeof info;
    getsockopt(c, IPPROTO_TCP, TCP_INFO, info, &len);
  }
  double per_info = (now() - t0) / m * 1e9;
  printf("per completed message: %.2f ns (two relaxed stores and the counts)\n", per_msg);
  printf("getsockopt(TCP_INFO): %.0f ns; at one a second per stream, %.5f%% of a core per stream\n", per_info,
         per_info / 1e9 * 100);
  close(s);
  close(c);
  close(l);
  return 0;
}
