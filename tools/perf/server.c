/* collx-perf: Server: executes what the client asks. */
#include "perf.h"

/* ========================================================================
 * Server: executes what the client asks
 * ======================================================================== */

static int is_loopback_sa(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss->ss_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
    if (IN6_IS_ADDR_V4MAPPED(a)) return a->s6_addr[12] == 127;
  }
  return 0;
}

int server_main(int lfd, int quiet) {
  struct peer P, *p = &P;
  memset(p, 0, sizeof *p);
  p->quiet = quiet;
  p->peer_name = "client";
  p->tfd_out = p->tfd_in = -1;
  start_watchdog();

  set_phase("waiting for a client");
  p->bfd = tcp_accept(lfd, "waiting for a client (--timeout)");
  close(lfd);
  struct sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  char host[NI_MAXHOST] = "?";
  if (getpeername(p->bfd, (struct sockaddr *)&peer, &plen) == 0)
    getnameinfo((struct sockaddr *)&peer, plen, host, sizeof host, NULL, 0, NI_NUMERICHOST);
  if (!quiet) printf("collx-perf: client %s connected\n", host);

  /* the client's plan: {magic, version, depth, max_size, check | in_order << 1, want_tcp} */
  uint64_t cfg[6];
  wrecv(p->bfd, cfg, 6, "receiving the client's parameters");
  if (cfg[0] != WIRE_MAGIC || cfg[1] != WIRE_VERSION)
    die("the client speaks another protocol (magic 0x%" PRIx64 ", version %" PRIu64 ")", cfg[0], cfg[1]);
  if (cfg[2] < 1 || cfg[2] > MAX_DEPTH || cfg[3] < 1 || cfg[3] > MAX_MSG_SIZE)
    die("the client asks for depth %" PRIu64 ", messages up to %" PRIu64 " B: out of range", cfg[2], cfg[3]);
  p->depth = (int)cfg[2];
  o.check = (int)(cfg[4] & 1);
  o.in_order = (int)(cfg[4] >> 1 & 1);
  p->want_tcp = (int)cfg[5];
  if (is_loopback_sa(&peer)) force_loopback("the client is on this host", quiet);

  int tl = -1;
  uint64_t reply[2] = {0, 0};
  if (p->want_tcp) {
    struct sockaddr_storage me;
    socklen_t mlen = sizeof me;
    getsockname(p->bfd, (struct sockaddr *)&me, &mlen);
    tl = tcp_listen(me.ss_family, 0, 0);
    if (tl < 0) die("baseline: cannot listen: %s", strerror(errno));
    reply[1] = (uint64_t)sock_port(tl);
  }
  wsend(p->bfd, reply, 2, "answering the client");
  if (p->want_tcp) {
    for (int i = 0; i < 2; i++) {
      int fd = tcp_accept(tl, "baseline TCP connection");
      char d;
      xread(fd, &d, 1, "baseline TCP connection");
      if (d == 'S') p->tfd_in = fd;       /* the client sends on it */
      else if (d == 'R') p->tfd_out = fd; /* the client receives on it */
      else die("baseline: unexpected connection");
      set_io_timeouts(fd);
    }
    close(tl);
  }

  peer_setup(p, (size_t)cfg[3]);
  if (!quiet) printf("collx-perf: connected through the plugin, device %s; the client drives the test\n", p->mydev.name);
  fflush(stdout);

  for (;;) {
    uint64_t c[CMD_WORDS];
    set_phase("waiting for the client's next command");
    wrecv(p->bfd, c, CMD_WORDS, "waiting for the client's next command");
    if (c[0] == CMD_END) break;
    if (c[0] == CMD_PRINT) {
      char text[512];
      if (c[1] >= sizeof text) die("bootstrap: oversized text");
      xread(p->bfd, text, (size_t)c[1], "receiving a result line");
      text[c[1]] = 0;
      if (!quiet) {
        fputs(text, stdout);
        fflush(stdout);
      }
      continue;
    }
    if (c[0] != CMD_RUN) die("bootstrap: unknown command %" PRIu64, c[0]);
    int tr = (int)c[1], test = (int)c[2], bidir = (int)c[5];
    size_t size = (size_t)c[3];
    uint64_t n = c[4];
    if (size < 1 || size > cfg[3] || n < 1) die("bootstrap: bad run request");
    if (tr != TR_PLUGIN && !p->want_tcp) die("bootstrap: baseline run without baseline sockets");
    uint64_t r[2] = {0, 0};
    if (test == TEST_BW)
      r[1] = tr == TR_PLUGIN ? plugin_bw(p, size, n, bidir, 1) : tcp_bw(p, size, n, bidir, 1);
    else if (tr == TR_PLUGIN)
      plugin_lat(p, size, n, NULL);
    else
      tcp_lat(p, size, n, tr == TR_TCP_SPLIT, NULL);
    wsend(p->bfd, r, 2, "reporting to the client");
  }
  peer_teardown(p);
  if (!quiet) calls_report();
  uint64_t bye[2] = {0, 0};
  wsend(p->bfd, bye, 2, "saying goodbye");
  close(p->bfd);
  if (!quiet) printf("collx-perf: done\n");
  fflush(stdout);
  return 0;
}
