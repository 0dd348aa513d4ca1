/* collx-perf: --ranks N: ring all-reduce over N local processes. */
#include "perf.h"

/* ========================================================================
 * --ranks N: ring all-reduce over N local processes
 * ======================================================================== */

enum { RC_WARM = 1, RC_RUN = 2, RC_END = 3, RC_PEER = 4 };

struct rcmd { /* parent -> rank */
  int32_t cmd, pad;
  uint64_t size, iters;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
};

struct rmsg { /* rank -> parent */
  int32_t type, rank;
  uint64_t errors, elapsed;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  char dev[64];
  int64_t speed;
};

struct ring {
  int N, r, W;
  void *lcomm, *scomm, *rcomm, *smh, *rmh;
  float *in, *out, *tmp;
  size_t slice; /* elements */
  int ctl;
};

static inline int modn(int a, int n) { return ((a % n) + n) % n; }

struct rop { /* one posted slice */
  int step;
  size_t off, count;
  float *buf;
  void *req;
};

/* One out-of-place ring all-reduce of `count` floats: reduce-scatter then
 * all-gather, each chunk cut into slices, up to W slices in flight each way.
 * Step s sends chunk (r-s) and receives chunk (r-s-1); steps < N-1 add the
 * received partial sum to this rank's input, later steps receive finished
 * chunks straight into the output.  A send of step s waits for the receive of
 * the same slice at step s-1; an all-gather receive waits for any send still
 * reading the slice it overwrites. */
static void allreduce(struct ring *g, size_t count, uint64_t *nbytes_sent) {
  const int N = g->N, r = g->r, W = g->W, S = 2 * (N - 1);
  size_t coff[MAX_RANKS], ccnt[MAX_RANKS], cns[MAX_RANKS];
  for (int c = 0; c < N; c++) {
    ccnt[c] = count / (size_t)N + ((size_t)c < count % (size_t)N);
    coff[c] = (size_t)c * (count / (size_t)N) + ((size_t)c < count % (size_t)N ? (size_t)c : count % (size_t)N);
    cns[c] = (ccnt[c] + g->slice - 1) / g->slice;
  }
  /* first op index of each step, per direction */
  size_t sstart[2 * MAX_RANKS + 1], rstart[2 * MAX_RANKS + 1];
  sstart[0] = rstart[0] = 0;
  for (int s = 0; s < S; s++) {
    sstart[s + 1] = sstart[s] + cns[modn(r - s, N)];
    rstart[s + 1] = rstart[s] + cns[modn(r - s - 1, N)];
  }
  const size_t ts = sstart[S], trr = rstart[S];
  size_t sp = 0, sd = 0, rp = 0, rd = 0; /* posted / done, in op order */
  int ss = 0, rs = 0;                    /* step of the next op to post */
  size_t sj = 0, rj = 0;                 /* slice within that step */
  struct rop sq[MAX_DEPTH], rq[MAX_DEPTH];
  struct idle id = {0, 0};
  uint64_t sent = 0;

  while (sd < ts || rd < trr) {
    int prog = 0;
    beat();
    /* post receives */
    while (rp < trr && rp - rd < (size_t)W) {
      int c = modn(r - rs - 1, N);
      if (rs >= N - 1) {
        int ds = rs + 1 - N; /* send still reading this output slice? */
        if (ds >= 1 && sstart[ds] + rj >= sd) break;
      }
      struct rop *q = &rq[rp % (size_t)W];
      q->step = rs;
      q->off = coff[c] + rj * g->slice;
      q->count = ccnt[c] - rj * g->slice < g->slice ? ccnt[c] - rj * g->slice : g->slice;
      q->buf = rs < N - 1 ? g->tmp + (rp % (size_t)W) * g->slice : g->out + q->off;
      int sz = (int)(q->count * sizeof(float)), tag = MSG_TAG;
      void *dptr = q->buf, *mh = g->rmh;
      q->req = NULL;
      NETCALL("irecv", hx_net_irecv(&net, g->rcomm, 1, &dptr, &sz, &tag, &mh, &q->req));
      if (!q->req) break;
      rp++;
      prog = 1;
      if (++rj == cns[c]) {
        rj = 0;
        rs++;
      }
    }
    /* post sends */
    while (sp < ts && sp - sd < (size_t)W) {
      int c = modn(r - ss, N);
      if (ss >= 1 && rstart[ss - 1] + sj >= rd) break; /* slice not reduced yet */
      struct rop *q = &sq[sp % (size_t)W];
      q->step = ss;
      q->off = coff[c] + sj * g->slice;
      q->count = ccnt[c] - sj * g->slice < g->slice ? ccnt[c] - sj * g->slice : g->slice;
      q->buf = (ss == 0 ? g->in : g->out) + q->off;
      q->req = NULL;
      NETCALL("isend", hx_net_isend(&net, g->scomm, q->buf, (int)(q->count * sizeof(float)), MSG_TAG,
                                  g->smh, &q->req));
      if (!q->req) break; /* the next rank has not posted the receive yet */
      sent += q->count * sizeof(float);
      sp++;
      prog = 1;
      if (++sj == cns[c]) {
        sj = 0;
        ss++;
      }
    }
    /* complete receives in order; reduce-scatter ones are added now */
    while (rd < rp) {
      struct rop *q = &rq[rd % (size_t)W];
      if (!req_done(q->req, (long)(q->count * sizeof(float)), "irecv")) break;
      if (q->step < N - 1) {
        float *o_ = g->out + q->off;
        const float *a = g->in + q->off, *b = q->buf;
        for (size_t k = 0; k < q->count; k++) o_[k] = a[k] + b[k];
      }
      rd++;
      prog = 1;
    }
    while (sd < sp) {
      if (!req_done(sq[sd % (size_t)W].req, -1, "isend")) break;
      sd++;
      prog = 1;
    }
    if (prog) {
      id.n = 0;
      id.since = 0;
    } else {
      idle_tick(&id, g->ctl, "parent process", g_phase);
    }
  }
  *nbytes_sent += sent;
}

static size_t ar_check(const struct ring *g, size_t count) {
  const float base = (float)(g->N * (g->N + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < count; i++)
    if (g->out[i] != base + (float)(g->N * (int)(i % 5))) bad++;
  return bad;
}

static int rank_main(int r, int N, int ctl) {
  char role[32];
  snprintf(role, sizeof role, "rank %d", r);
  became_child(strdup(role));
  start_watchdog();
  struct ring G, *g = &G;
  memset(g, 0, sizeof *g);
  g->N = N;
  g->r = r;
  g->W = o.depth;
  g->ctl = ctl;
  g->slice = o.slice / sizeof(float);

  struct devinfo di;
  plugin_start(o.dev, &di);
  struct rmsg m;
  memset(&m, 0, sizeof m);
  m.type = RC_PEER;
  m.rank = r;
  set_phase("listening on the plugin");
  NETCALL("listen", hx_net_listen(&net, o.dev, m.handle, &g->lcomm));
  if (!g->lcomm) die("plugin listen() returned ncclSuccess but no listen comm");
  snprintf(m.dev, sizeof m.dev, "%s", di.name);
  m.speed = di.speed;
  xwrite(ctl, &m, sizeof m, "sending the handle to the parent");
  static struct rcmd c; /* static: its handle is what connect() is given */
  xread(ctl, &c, sizeof c, "waiting for the next rank's handle");
  if (c.cmd != RC_PEER) die("parent out of step");
  char peer[32];
  snprintf(peer, sizeof peer, "rank %d", (r + 1) % N);
  plugin_connect_pair(o.dev, g->lcomm, c.handle, &g->scomm, &g->rcomm, peer);

  size_t maxc = o.max_size / sizeof(float);
  size_t tmpc = g->slice * (size_t)g->W;
  size_t total = (2 * maxc + tmpc) * sizeof(float);
  float *region = xalloc(total);
  g->in = region;
  g->out = region + maxc;
  g->tmp = region + 2 * maxc;
  for (size_t i = 0; i < maxc; i++) g->in[i] = (float)(r + 1) + (float)(i % 5);
  set_phase("registering buffers");
  NETCALL("regMr", hx_net_regMr(&net, g->scomm, region, total, NCCL_PTR_HOST, &g->smh));
  NETCALL("regMr", hx_net_regMr(&net, g->rcomm, region, total, NCCL_PTR_HOST, &g->rmh));
  m.type = RC_PEER;
  xwrite(ctl, &m, sizeof m, "telling the parent the ring is up");

  for (;;) {
    set_phase("waiting for the parent");
    xread(ctl, &c, sizeof c, "waiting for the parent");
    if (c.cmd == RC_END) break;
    size_t count = (size_t)c.size / sizeof(float);
    uint64_t sent = 0;
    memset(&m, 0, sizeof m);
    m.type = c.cmd;
    m.rank = r;
    if (c.cmd == RC_WARM) {
      /* c.iters all-reduces, each checked; only the all-reduces are timed */
      set_phase("warm-up all-reduce of %zu floats", count);
      for (uint64_t k = 0; k < c.iters; k++) {
        memset(g->out, 0xff, count * sizeof(float)); /* NaN: unwritten output shows */
        uint64_t t0 = now_ns();
        allreduce(g, count, &sent);
        m.elapsed += now_ns() - t0;
        m.errors += ar_check(g, count);
      }
      memset(g->out, 0xff, count * sizeof(float));
    } else if (c.cmd == RC_RUN) {
      set_phase("all-reduce of %zu floats, %" PRIu64 " times", count, c.iters);
      uint64_t t0 = now_ns();
      for (uint64_t k = 0; k < c.iters; k++) allreduce(g, count, &sent);
      m.elapsed = now_ns() - t0;
      m.errors = ar_check(g, count);
    } else {
      die("unknown command %d from the parent", c.cmd);
    }
    xwrite(ctl, &m, sizeof m, "reporting to the parent");
  }
  set_phase("closing the plugin comms");
  plugin_close(g->scomm, g->rcomm, g->lcomm, g->smh, g->rmh);
  memset(&m, 0, sizeof m);
  m.type = RC_END;
  m.rank = r;
  xwrite(ctl, &m, sizeof m, "saying goodbye to the parent");
  return 0;
}

static const char *describe_exit(pid_t pid, char *buf, size_t len) {
  int st = 0;
  pid_t w = waitpid(pid, &st, 0);
  if (w != pid) snprintf(buf, len, "status unknown");
  else if (WIFEXITED(st)) snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else snprintf(buf, len, "status 0x%x", st);
  return buf;
}

/* Read one message from every rank; dies naming the rank that failed. */
static void gather(int N, const int *ctl, struct rmsg *msgs, int type, const char *what,
                   uint64_t expected_ns) {
  int got[MAX_RANKS] = {0}, left = N;
  uint64_t dl = deadline_in();
  if (dl != UINT64_MAX) dl += expected_ns; /* the ranks are busy that long anyway */
  while (left) {
    struct pollfd pf[MAX_RANKS];
    for (int i = 0; i < N; i++) {
      pf[i].fd = got[i] ? -1 : ctl[i];
      pf[i].events = POLLIN;
      pf[i].revents = 0;
    }
    uint64_t t = now_ns();
    if (t >= dl) {
      char list[256] = "";
      for (int i = 0, n = 0; i < N; i++)
        if (!got[i]) n += snprintf(list + n, sizeof list - (size_t)n, "%s%d", n ? "," : "", i);
      die("%s: rank(s) %s did not answer within %.0f s", what, list, o.timeout);
    }
    int rc = poll(pf, (nfds_t)N, 500);
    beat();
    if (rc < 0 && errno != EINTR) die("poll: %s", strerror(errno));
    for (int i = 0; i < N && rc > 0; i++) {
      if (!pf[i].revents) continue;
      ssize_t k = recv(ctl[i], &msgs[i], sizeof msgs[i], MSG_WAITALL);
      if (k != (ssize_t)sizeof msgs[i]) {
        char st[96];
        pid_t pid = g_children[i];
        g_children[i] = 0;
        die("%s: rank %d failed (%s)", what, i, describe_exit(pid, st, sizeof st));
      }
      if (msgs[i].type != type || msgs[i].rank != i) die("%s: rank %d out of step", what, i);
      got[i] = 1;
      left--;
    }
  }
}

static void scatter(int N, const int *ctl, struct rcmd *c, const char *what) {
  for (int i = 0; i < N; i++) xwrite(ctl[i], c, sizeof *c, what);
}

/* Before the plugin's init, so that its device discovery sees the
 * namespace's interfaces: rank i is then a host of its own. */
static void enter_netns(const char *name, int rank) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "/run/netns/%s", name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
    die("rank %d: cannot enter network namespace %s (%s): %s", rank, name, path, strerror(errno));
  close(fd);
}

int ranks_main(void) {
  const int N = o.nranks;
  if (!o.nnetns) force_loopback("all ranks are on this host", 0);
  size_t sizes[MAX_SIZES];
  int nsizes = build_sizes(sizes);
  for (int i = 0; i < nsizes; i++) sizes[i] &= ~(size_t)3;
  double budget = o.seconds > 0 ? o.seconds : (12.0 / nsizes > 1.0 ? 1.0 : 12.0 / nsizes);

  int ctl[MAX_RANKS];
  fflush(stdout);
  for (int i = 0; i < N; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
      for (int k = 0; k < i; k++) close(ctl[k]);
      close(sv[0]);
      set_nonblock(sv[1], 1);
      if (getppid() == 1) _exit(1);
      if (o.nnetns) enter_netns(o.netns[i], i);
      int rc = rank_main(i, N, sv[1]);
      fflush(stdout);
      _exit(rc);
    }
    close(sv[1]);
    set_nonblock(sv[0], 1);
    ctl[i] = sv[0];
    g_children[i] = pid;
    g_nchildren = i + 1;
  }
  start_watchdog();

  static struct rmsg m[MAX_RANKS];
  gather(N, ctl, m, RC_PEER, "setting up the ring (plugin init and listen)", 0);
  for (int i = 0; i < N; i++) {
    struct rcmd c;
    memset(&c, 0, sizeof c);
    c.cmd = RC_PEER;
    memcpy(c.handle, m[(i + 1) % N].handle, sizeof c.handle);
    xwrite(ctl[i], &c, sizeof c, "handing out the handles");
  }
  char devname[64];
  snprintf(devname, sizeof devname, "%s", m[0].dev);
  long speed = (long)m[0].speed;
  gather(N, ctl, m, RC_PEER, "connecting the ring", 0);

  char b1[32], b2[32];
  printf("%s", rule);
  printf("        collx-perf: ring all-reduce over %d local ranks (no GPU), float32 sum\n", N);
  printf(" Plugin          : \"%s\"  %s\n", net.name, g_plugin_path);
  printf(" Device          : #%d %s (%ld Mbps), each rank sends to rank+1 and receives from rank-1\n",
         o.dev, devname, speed);
  printf(" Algorithm       : reduce-scatter + all-gather, %s slices, %d in flight each way\n",
         fmt_size(o.slice, b1, sizeof b1), o.depth);
  if (nsizes == 1)
    printf(" Size            : %zu B\n", sizes[0]);
  else
    printf(" Sizes           : %s .. %s, %d sizes\n", fmt_size(sizes[0], b1, sizeof b1),
           fmt_size(sizes[nsizes - 1], b2, sizeof b2), nsizes);
  if (o.iters)
    printf(" Iterations      : %" PRIu64 " per size (after 2 checked warm-ups)\n", o.iters);
  else
    printf(" Duration        : about %.2f s per size (after checked warm-ups)\n", budget);
  printf(" Check           : every element on every rank after every warm-up and timed run\n"
         "                   (sums exact in float32); WRONG n = wrong elements found in all\n");
  printf(" Units           : time of the slowest rank; algbw = bytes/time, busbw = algbw*2(N-1)/N, GB/s\n");
  printf("%s", rule);
  printf(" %12s %11s %8s %12s %12s %12s  %s\n", "#bytes", "#floats", "#iters", "time[us]",
         "algbw[GB/s]", "busbw[GB/s]", "check");
  fflush(stdout);

  uint64_t total_bad = 0;
  for (int i = 0; i < nsizes; i++) {
    struct rcmd c;
    memset(&c, 0, sizeof c);
    c.size = sizes[i];
    /* warm-up rounds: the first pays for first use of buffers and socket
     * memory and is not used; later ones double until one lasts 50 ms */
    uint64_t bad = 0, tw = 0, kw = 1, per = 0; /* per: ns per all-reduce, once known */
    c.cmd = RC_WARM;
    for (int round = 0;; round++) {
      c.iters = kw;
      scatter(N, ctl, &c, "starting a warm-up");
      gather(N, ctl, m, RC_WARM, "warm-up all-reduce", 2 * kw * per);
      tw = 0;
      for (int k = 0; k < N; k++) {
        bad += m[k].errors;
        if (m[k].elapsed > tw) tw = m[k].elapsed;
      }
      per = tw / kw;
      if (round == 0) continue;
      if (o.iters || tw >= 50000000ull || kw >= 4096) break;
      kw *= 2;
    }
    uint64_t iters = o.iters;
    if (!iters) {
      double want = budget * NS / (double)(per ? per : 1);
      iters = want < 2 ? 2 : want > 100000 ? 100000 : (uint64_t)want;
    }
    c.cmd = RC_RUN;
    c.iters = iters;
    scatter(N, ctl, &c, "starting a timed run");
    gather(N, ctl, m, RC_RUN, "timed all-reduce", 2 * iters * per);
    uint64_t tmax = 0;
    for (int k = 0; k < N; k++) {
      bad += m[k].errors;
      if (m[k].elapsed > tmax) tmax = m[k].elapsed;
    }
    double t_us = (double)tmax / (double)iters / 1e3;
    double alg = (double)sizes[i] / (t_us * 1e3);
    double bus = alg * 2.0 * (N - 1) / N;
    char chk[32];
    if (bad) snprintf(chk, sizeof chk, "WRONG %" PRIu64, bad);
    else snprintf(chk, sizeof chk, "OK");
    printf(" %12zu %11zu %8" PRIu64 " %12.1f %12.3f %12.3f  %s\n", sizes[i], sizes[i] / 4, iters,
           t_us, alg, bus, chk);
    fflush(stdout);
    total_bad += bad;
  }
  struct rcmd c;
  memset(&c, 0, sizeof c);
  c.cmd = RC_END;
  scatter(N, ctl, &c, "ending the run");
  gather(N, ctl, m, RC_END, "closing the ring", 0);
  set_phase("waiting for the ranks to exit");
  int failed = 0;
  for (int i = 0; i < N; i++) {
    char st[96];
    pid_t pid = g_children[i];
    g_children[i] = 0;
    describe_exit(pid, st, sizeof st);
    if (strcmp(st, "exit status 0") != 0) {
      fprintf(stderr, "collx-perf: error: rank %d: %s\n", i, st);
      failed = 1;
    }
    close(ctl[i]);
  }
  g_nchildren = 0;
  printf("%s", rule);
  if (total_bad || failed) {
    printf("collx-perf: all-reduce over %d ranks: %" PRIu64 " wrong element(s)%s\n", N, total_bad,
           failed ? ", and a rank failed" : "");
    return 1;
  }
  printf("collx-perf: all-reduce over %d ranks correct at every size\n", N);
  return 0;
}
