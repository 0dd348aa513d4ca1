/* collx-perf: Client: plans, measures, prints. */
#include "perf.h"

/* ========================================================================
 * Client: plans, measures, prints
 * ======================================================================== */

/* Print a line here and on the server. */
static void emit(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct peer *p, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n >= (int)sizeof text) n = (int)sizeof text - 1;
  fputs(text, stdout);
  fflush(stdout);
  uint64_t c[CMD_WORDS] = {CMD_PRINT, (uint64_t)n, 0, 0, 0, 0};
  wsend(p->bfd, c, CMD_WORDS, "sending a result line");
  xwrite(p->bfd, text, (size_t)n, "sending a result line");
}

/* One round on both sides.  Returns this side's and the server's send time. */
static void bw_round(struct peer *p, int tr, size_t size, uint64_t n, uint64_t *e_c, uint64_t *e_s) {
  uint64_t c[CMD_WORDS] = {CMD_RUN, (uint64_t)tr, TEST_BW, size, n, (uint64_t)o.bidir};
  wsend(p->bfd, c, CMD_WORDS, "sending a run request");
  *e_c = tr == TR_PLUGIN ? plugin_bw(p, size, n, 1, o.bidir) : tcp_bw(p, size, n, 1, o.bidir);
  uint64_t r[2];
  wrecv(p->bfd, r, 2, "waiting for the server's figures");
  *e_s = r[1];
  if (*e_c == 0) *e_c = 1;
  if (o.bidir && *e_s == 0) *e_s = 1;
}

static void lat_round(struct peer *p, int tr, size_t size, uint64_t n, uint64_t *rtt) {
  uint64_t c[CMD_WORDS] = {CMD_RUN, (uint64_t)tr, TEST_LAT, size, n, 0};
  wsend(p->bfd, c, CMD_WORDS, "sending a run request");
  if (tr == TR_PLUGIN)
    plugin_lat(p, size, n, rtt);
  else
    tcp_lat(p, size, n, tr == TR_TCP_SPLIT, rtt);
  uint64_t r[2];
  wrecv(p->bfd, r, 2, "waiting for the server");
}

struct bwres {
  uint64_t n;
  double cs, sc; /* GB/s, client->server and server->client */
};

struct latres {
  uint64_t n;
  double min, med, avg, p99; /* half round trip, us */
};

static void measure_bw(struct peer *p, int tr, size_t size, double secs, struct bwres *res) {
  uint64_t e_c, e_s, n;
  /* warm-up: 16 messages or two windows, but no more than about 16 MiB */
  uint64_t warm = (uint64_t)(2 * o.depth > 16 ? 2 * o.depth : 16);
  uint64_t cap = (16u << 20) / size;
  if (warm > cap) warm = cap > (uint64_t)o.depth ? cap : (uint64_t)o.depth;
  if (o.iters) {
    bw_round(p, tr, size, warm < o.iters ? warm : o.iters, &e_c, &e_s);
    n = o.iters;
  } else {
    /* probe until a round lasts 50 ms, then scale to the wanted duration;
     * the first round only warms up (first use of buffers and connections) */
    uint64_t cnt = warm, e;
    for (int round = 0;; round++) {
      bw_round(p, tr, size, cnt, &e_c, &e_s);
      e = o.bidir && e_s > e_c ? e_s : e_c;
      if (o.verbose >= 2)
        note("probe: %zu B x %" PRIu64 " in %.3f ms", size, cnt, (double)e / 1e6);
      if (round == 0) continue;
      if (e >= 50000000ull || cnt >= (1ull << 40)) break;
      double f = 60e6 / (double)e;
      cnt = (uint64_t)((double)cnt * (f > 100 ? 100 : f < 2 ? 2 : f));
    }
    double want = secs * NS / (double)e * (double)cnt;
    n = want < (double)o.depth ? (uint64_t)o.depth : (uint64_t)want;
  }
  bw_round(p, tr, size, n, &e_c, &e_s);
  res->n = n;
  res->cs = (double)size * (double)n / ((double)e_c);
  res->sc = o.bidir ? (double)size * (double)n / ((double)e_s) : 0;
}

static void measure_lat(struct peer *p, int tr, size_t size, double secs, struct latres *res) {
  uint64_t warm = 500, n;
  uint64_t *w = malloc(warm * sizeof *w);
  if (!w) die("out of memory");
  lat_round(p, tr, size, warm, w);
  if (o.iters) {
    n = o.iters;
  } else {
    /* round trip estimated by the mean of the warm-up's 10th..90th
     * percentiles: the first round trips and stray outliers would skew it */
    qsort(w, warm, sizeof *w, cmp_u64);
    uint64_t sum = 0;
    for (uint64_t i = warm / 10; i < warm - warm / 10; i++) sum += w[i];
    double per = (double)sum / (double)(warm - 2 * (warm / 10));
    double want = secs * NS / (per > 1 ? per : 1);
    n = want < 1000 ? 1000 : want > 5e6 ? 5000000 : (uint64_t)want;
  }
  free(w);
  uint64_t *rtt = malloc(n * sizeof *rtt);
  if (!rtt) die("out of memory");
  lat_round(p, tr, size, n, rtt);
  qsort(rtt, n, sizeof *rtt, cmp_u64);
  double sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += (double)rtt[i];
  uint64_t i99 = (uint64_t)ceil(0.99 * (double)n);
  if (i99 > 0) i99--;
  res->n = n;
  res->min = (double)rtt[0] / 2e3;
  res->med = (n % 2 ? (double)rtt[n / 2] : ((double)rtt[n / 2 - 1] + (double)rtt[n / 2]) / 2) / 2e3;
  res->avg = sum / (double)n / 2e3;
  res->p99 = (double)rtt[i99] / 2e3;
  free(rtt);
}

int build_sizes(size_t *sz) {
  int n = 0;
  for (size_t s = o.min_size; s <= o.max_size && n < MAX_SIZES; s *= 2) {
    sz[n++] = s;
    if (s > SIZE_MAX / 2) break;
  }
  if (n && sz[n - 1] != o.max_size && n < MAX_SIZES) sz[n++] = o.max_size;
  return n;
}

const char *const rule =
    "--------------------------------------------------------------------------------------\n";

int client_main(const char *host, int port, pid_t server_pid) {
  struct peer P, *p = &P;
  memset(p, 0, sizeof *p);
  p->is_client = 1;
  p->peer_name = "server";
  p->tfd_out = p->tfd_in = -1;
  p->depth = o.depth;
  p->want_tcp = o.compare;
  start_watchdog();

  size_t sizes[MAX_SIZES];
  int nsizes = build_sizes(sizes);
  int nruns = !o.compare ? 1 : o.test == TEST_LAT ? 3 : 2;
  double secs = o.seconds;
  if (secs <= 0) {
    secs = 12.0 / (nsizes * nruns);
    secs = secs > 2.0 ? 2.0 : secs < 0.2 ? 0.2 : secs;
  }

  set_phase("connecting to the server");
  p->bfd = tcp_connect_host(host, port, "bootstrap connection to the server");
  uint64_t cfg[6] = {WIRE_MAGIC, WIRE_VERSION, (uint64_t)o.depth, o.max_size,
                     (uint64_t)o.check | (uint64_t)o.in_order << 1,
                     (uint64_t)o.compare};
  wsend(p->bfd, cfg, 6, "sending the parameters");
  uint64_t reply[2];
  wrecv(p->bfd, reply, 2, "waiting for the server to accept the parameters");
  if (o.compare) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(p->bfd, (struct sockaddr *)&ss, &len) != 0) die("getpeername: %s", strerror(errno));
    if (ss.ss_family == AF_INET6)
      ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)reply[1]);
    else
      ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)reply[1]);
    for (int i = 0; i < 2; i++) {
      int err = 0;
      int fd = tcp_connect_addr((struct sockaddr *)&ss, len, deadline_in(), &err);
      if (fd < 0) die("baseline: cannot connect to the server: %s", strerror(err));
      set_nodelay(fd);
      char d = i == 0 ? 'S' : 'R';
      xwrite(fd, &d, 1, "baseline TCP connection");
      set_io_timeouts(fd);
      if (i == 0) p->tfd_out = fd;
      else p->tfd_in = fd;
    }
  }
  peer_setup(p, o.max_size);

  /* header */
  char b1[32], b2[32];
  emit(p, "%s", rule);
  if (o.test == TEST_BW)
    emit(p, "                 collx-perf: bandwidth test, %s\n",
         o.bidir ? "bidirectional (client <-> server)" : "client -> server");
  else
    emit(p, "                 collx-perf: latency test (ping-pong, half round trip)\n");
  emit(p, " Plugin          : \"%s\"  %s\n", net.name, g_plugin_path);
  emit(p, " Devices         : client #%d %s (%d Mbps), server %s (%d Mbps)\n", o.dev, p->mydev.name,
       p->mydev.speed, p->peerdev.name, p->peerdev.speed);
  if (o.test == TEST_BW) emit(p, " In flight       : %d message(s) per direction\n", o.depth);
  if (o.iters)
    emit(p, " Iterations      : %" PRIu64 " per size\n", o.iters);
  else
    emit(p, " Duration        : %.2f s per size%s\n", secs, o.compare ? " and transport" : "");
  if (nsizes == 1)
    emit(p, " Size            : %zu B\n", sizes[0]);
  else
    emit(p, " Sizes           : %s .. %s, %d sizes\n", fmt_size(sizes[0], b1, sizeof b1),
         fmt_size(sizes[nsizes - 1], b2, sizeof b2), nsizes);
  if (o.compare)
    emit(p, " Baseline        : %s, TCP_NODELAY, same processes%s\n",
         o.test == TEST_LAT ? "plain TCP on one socket (ping and pong), then on a socket each way"
                            : "plain TCP, one socket per direction",
         o.test == TEST_LAT ? "; receives busy-poll" : "");
  if (o.check) emit(p, " Data check      : every received message (plugin runs)\n");
  if (o.in_order) emit(p, " Completion      : in order, only the oldest request of each direction tested\n");
  emit(p, " Units           : GB/s = 1e9 bytes/s; latency = half round trip in usec\n");
  emit(p, "%s", rule);

  struct bwres bw[2][MAX_SIZES];
  struct latres lat[3][MAX_SIZES];
  for (int tr = 0; tr < nruns; tr++) {
    emit(p, " %s\n", tr == TR_PLUGIN ? "collx (through the plugin)"
                     : tr == TR_TCP  ? "plain TCP (baseline)"
                                     : "plain TCP, a socket each way (the shape of a send and a receive comm)");
    if (o.test == TEST_BW && o.bidir)
      emit(p, " %10s %12s %12s %12s %12s %15s\n", "#bytes", "#iterations", "c->s[GB/s]",
           "s->c[GB/s]", "sum[GB/s]", "MsgRate[Mpps]");
    else if (o.test == TEST_BW)
      emit(p, " %10s %12s %12s %15s\n", "#bytes", "#iterations", "BW[GB/s]", "MsgRate[Mpps]");
    else
      emit(p, " %10s %12s %11s %13s %11s %11s\n", "#bytes", "#iterations", "t_min[us]",
           "t_median[us]", "t_avg[us]", "t_p99[us]");
    for (int i = 0; i < nsizes; i++) {
      if (o.test == TEST_BW) {
        struct bwres *r = &bw[tr][i];
        measure_bw(p, tr, sizes[i], secs, r);
        double mpps = (r->cs + r->sc) / (double)sizes[i] * 1e3;
        if (o.bidir)
          emit(p, " %10zu %12" PRIu64 " %12.3f %12.3f %12.3f %15.4f\n", sizes[i], r->n, r->cs,
               r->sc, r->cs + r->sc, mpps);
        else
          emit(p, " %10zu %12" PRIu64 " %12.3f %15.4f\n", sizes[i], r->n, r->cs, mpps);
      } else {
        struct latres *r = &lat[tr][i];
        measure_lat(p, tr, sizes[i], secs, r);
        emit(p, " %10zu %12" PRIu64 " %11.2f %13.2f %11.2f %11.2f\n", sizes[i], r->n, r->min,
             r->med, r->avg, r->p99);
      }
    }
    emit(p, "%s", rule);
  }
  if (o.compare) {
    emit(p, " collx / plain TCP%s\n", o.test == TEST_BW ? (o.bidir ? " (sum of both directions)" : "")
                                                       : " (median half round trip)");
    if (o.test == TEST_BW)
      emit(p, " %10s %12s %12s %10s\n", "#bytes", "collx[GB/s]", "tcp[GB/s]", "ratio");
    else
      emit(p, " %10s %12s %12s %10s %12s %10s\n", "#bytes", "collx[us]", "tcp[us]", "ratio", "tcp2[us]", "ratio2");
    double last = 0, last2 = 0;
    for (int i = 0; i < nsizes; i++) {
      double a, b;
      if (o.test == TEST_BW) {
        a = bw[0][i].cs + bw[0][i].sc;
        b = bw[1][i].cs + bw[1][i].sc;
      } else {
        a = lat[0][i].med;
        b = lat[1][i].med;
      }
      last = b > 0 ? a / b : 0;
      if (o.test == TEST_BW) {
        emit(p, " %10zu %12.3f %12.3f %10.2f\n", sizes[i], a, b, last);
        continue;
      }
      double split = lat[TR_TCP_SPLIT][i].med;
      last2 = split > 0 ? a / split : 0;
      emit(p, " %10zu %12.3f %12.3f %10.2f %12.3f %10.2f\n", sizes[i], a, b, last, split, last2);
    }
    emit(p, "%s", rule);
    if (o.test == TEST_BW)
      emit(p, "ratio collx/tcp: bw %.2f  lat -     (%zu B%s; bw above 1: collx faster)\n", last,
           sizes[nsizes - 1], o.bidir ? ", bidirectional sum" : "");
    else
      emit(p, "ratio collx/tcp: bw -  lat %.2f     (%zu B median; lat above 1: collx slower; a socket each way: %.2f)\n",
           last, sizes[nsizes - 1], last2);
  }

  uint64_t end[CMD_WORDS] = {CMD_END, 0, 0, 0, 0, 0};
  wsend(p->bfd, end, CMD_WORDS, "ending the test");
  peer_teardown(p);
  calls_report();
  uint64_t bye[2];
  wrecv(p->bfd, bye, 2, "waiting for the server to finish");
  close(p->bfd);

  if (server_pid > 0) {
    set_phase("waiting for the server process to exit");
    uint64_t dl = deadline_in();
    int st = 0;
    for (;;) {
      pid_t r = waitpid(server_pid, &st, WNOHANG);
      if (r == server_pid) break;
      if (r < 0) die("waitpid: %s", strerror(errno));
      if (now_ns() > dl) die("the server process did not exit");
      usleep(10000);
    }
    g_nchildren = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "collx-perf: error: the server process failed (%s %d)\n",
              WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      return 1;
    }
  }
  return 0;
}
