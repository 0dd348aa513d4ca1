/* collx-perf: --comms K[,K...]: K send/receive pairs in one process, all
 * moving data at once, and what they cost (threads, descriptors, memory).
 *
 * Issue 15: a rank of a real job holds hundreds of comms, and what a comm
 * costs at that scale matters as much as the bandwidth of one.  Each K runs
 * in a child process of its own, forked before the plugin is initialised,
 * so that its threads, descriptors and resident memory are measured from a
 * clean start (what an earlier K freed would otherwise be reused and hide
 * part of the next K's cost).  In that process the tool listens, connects
 * and accepts K times on loopback (closing each listen comm once accepted,
 * as NCCL's proxy does), then keeps -d messages of -s bytes in flight on
 * every pair from one thread, as NCCL's proxy thread drives all its comms,
 * verifying every byte of every message.  The same process then moves the
 * same messages per pair over K plain TCP socket pairs (one epoll loop, one
 * thread, each sender at most -d messages ahead of its receiver): the
 * baseline. */
#include "perf.h"

#include <ctype.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define HDR_LEN 16        /* (pair, sequence) at the start of a message */
#define PATTERN_SHIFTS 256 /* distinct body patterns, one per pair mod 256 */

/* What one K's child process measured, handed to the parent in shared memory. */
struct comms_result {
  int done;
  uint64_t msgs, bytes;
  double secs, tcp_secs;
  int threads, cx_threads;
  double fds_per_comm, kib_per_comm, tcp_fds_per_comm;
  int threads_left, fds_left; /* plugin threads and descriptors still there after close */
  char names[160];            /* plugin threads by name */
};

/* The process's own resource counts, from /proc. */
struct usage {
  int tasks, cx, fds;
  long rss_kb;
};

struct pair {
  uint64_t index;
  char handle[NCCL_NET_HANDLE_MAXSIZE]; /* stays put: connect() may keep state in it */
  void *lcomm, *scomm, *rcomm, *smh, *rmh;
  char *sbuf, *rbuf; /* depth slots each */
  void *sreq[MAX_DEPTH], *rreq[MAX_DEPTH];
  uint64_t rseq[MAX_DEPTH];
  uint64_t sposted, sdone, rposted, rdone, target;
  /* the baseline's sockets and progress within the current message */
  int sfd, rfd, rprimed;
  size_t soff, roff;
  uint64_t tsent, trecvd;
};

static struct pair *g_pairs;
static int g_npairs;
static size_t g_size;
static char *g_ref, *g_anti; /* the body pattern and its complement (the poison) */

/* ---- patterns: body byte j of pair p is g_ref[j + p % 256] ------------- */

static void make_patterns(size_t size) {
  g_ref = xalloc(size + PATTERN_SHIFTS);
  g_anti = xalloc(size + PATTERN_SHIFTS);
  for (size_t i = 0; i < size + PATTERN_SHIFTS; i++) {
    g_ref[i] = (char)(uint8_t)(i * 7 + 13);
    g_anti[i] = (char)~(uint8_t)g_ref[i];
  }
}

static const char *pattern_of(const struct pair *p) { return g_ref + p->index % PATTERN_SHIFTS; }

static char *sslot(const struct pair *p, uint64_t seq) {
  return p->sbuf + (size_t)(seq % (uint64_t)o.depth) * g_size;
}

static char *rslot(const struct pair *p, uint64_t seq) {
  return p->rbuf + (size_t)(seq % (uint64_t)o.depth) * g_size;
}

/* The header says which pair and which message: data delivered to the
 * wrong comm or out of order fails the check even where bodies agree. */
static void stamp(const struct pair *p, char *b, uint64_t seq) {
  if (g_size < HDR_LEN) return;
  uint64_t h[2] = {p->index, seq};
  memcpy(b, h, HDR_LEN);
}

/* Every receive slot holds the complement of what it should get, so an
 * unwritten byte fails the check. */
static void poison_slot(const struct pair *p, char *b) {
  memcpy(b, g_anti + p->index % PATTERN_SHIFTS, g_size);
}

static void check_message(const struct pair *p, const char *b, uint64_t seq, const char *via) {
  size_t from = 0;
  if (g_size >= HDR_LEN) {
    uint64_t h[2];
    memcpy(h, b, HDR_LEN);
    if (h[0] != p->index || h[1] != seq)
      die("data check (%s): pair %" PRIu64 " receive #%" PRIu64 " holds message #%" PRIu64 " of pair %" PRIu64,
          via, p->index, seq, h[1], h[0]);
    from = HDR_LEN;
  }
  const char *want = pattern_of(p);
  if (memcmp(b + from, want + from, g_size - from) == 0) return;
  size_t i = from;
  while (b[i] == want[i]) i++;
  die("data check (%s): pair %" PRIu64 " message #%" PRIu64 " (%zu B): byte %zu is 0x%02x, expected 0x%02x", via,
      p->index, seq, g_size, i, (uint8_t)b[i], (uint8_t)want[i]);
}

/* ---- /proc/self: threads, descriptors, resident memory ------------------ */

static int is_plugin_thread(const char *name) { return !strncmp(name, "cx-", 3); }

/* A thread's name without its numbers: "cx-rx12.1" -> "cx-rx". */
static void name_kind(char *name) {
  size_t n = strlen(name);
  while (n && (isdigit((unsigned char)name[n - 1]) || name[n - 1] == '.')) n--;
  name[n] = 0;
}

struct kinds {
  char name[16][16];
  int count[16], n;
};

static void count_kind(struct kinds *k, const char *name) {
  for (int i = 0; i < k->n; i++)
    if (!strcmp(k->name[i], name)) {
      k->count[i]++;
      return;
    }
  if (k->n == 16) return;
  snprintf(k->name[k->n], sizeof k->name[0], "%s", name);
  k->count[k->n++] = 1;
}

/* Threads of the process; *cx: those the plugin named cx-*; kinds by name. */
static int scan_tasks(int *cx, struct kinds *kinds) {
  DIR *d = opendir("/proc/self/task");
  if (!d) die("/proc/self/task: %s", strerror(errno));
  int n = 0;
  *cx = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    n++;
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(name, sizeof name, f)) name[0] = 0;
      fclose(f);
    }
    name[strcspn(name, "\n")] = 0;
    if (!is_plugin_thread(name)) continue;
    (*cx)++;
    name_kind(name);
    if (kinds) count_kind(kinds, name);
  }
  closedir(d);
  return n;
}

static int count_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) die("/proc/self/fd: %s", strerror(errno));
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
  }
  if (resident < 0) die("/proc/self/statm: cannot read the resident size");
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void sample_usage(struct usage *u, struct kinds *kinds) {
  u->tasks = scan_tasks(&u->cx, kinds);
  u->fds = count_open_fds();
  u->rss_kb = rss_kb();
}

static void max_usage(struct usage *acc, const struct usage *u) {
  if (u->tasks > acc->tasks) acc->tasks = u->tasks;
  if (u->cx > acc->cx) acc->cx = u->cx;
  if (u->fds > acc->fds) acc->fds = u->fds;
  if (u->rss_kb > acc->rss_kb) acc->rss_kb = u->rss_kb;
}

static void describe_kinds(const struct kinds *k, char *out, size_t len) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < k->n && n < len; i++)
    n += (size_t)snprintf(out + n, len - n, "%s%s %d", i ? ", " : "", k->name[i], k->count[i]);
  if (!k->n) snprintf(out, len, "none");
}

/* ---- the pairs: buffers first, so that they are not counted as the plugin's */

static void alloc_pairs(int k) {
  g_npairs = k;
  g_pairs = calloc((size_t)k, sizeof *g_pairs);
  if (!g_pairs) die("out of memory");
  size_t len = (size_t)o.depth * g_size;
  for (int i = 0; i < k; i++) {
    struct pair *p = &g_pairs[i];
    p->index = (uint64_t)i;
    p->sfd = p->rfd = -1;
    p->sbuf = xalloc(len);
    p->rbuf = xalloc(len);
    for (int s = 0; s < o.depth; s++) {
      memcpy(p->sbuf + (size_t)s * g_size, pattern_of(p), g_size);
      poison_slot(p, p->rbuf + (size_t)s * g_size);
    }
  }
}

static void free_pairs(void) {
  for (int i = 0; i < g_npairs; i++) {
    free(g_pairs[i].sbuf);
    free(g_pairs[i].rbuf);
  }
  free(g_pairs);
  g_pairs = NULL;
}

/* Listen K times, then connect and accept all K at once (neither call
 * blocks); each listen comm is closed once its comm is accepted. */
static void open_plugin_pairs(void) {
  set_phase("listening %d times on the plugin", g_npairs);
  for (int i = 0; i < g_npairs; i++) {
    struct pair *p = &g_pairs[i];
    NETCALL("listen", hx_net_listen(&net, o.dev, p->handle, &p->lcomm));
    if (!p->lcomm) die("plugin listen() returned ncclSuccess but no listen comm");
  }
  set_phase("connecting %d pairs through the plugin", g_npairs);
  uint64_t dl = deadline_in();
  for (int pending = g_npairs; pending;) {
    beat();
    pending = 0;
    for (int i = 0; i < g_npairs; i++) {
      struct pair *p = &g_pairs[i];
      ncclNetDeviceHandle_v8_t *dev = NULL;
      if (!p->scomm) NETCALL("connect", hx_net_connect(&net, o.dev, p->handle, &p->scomm, &dev));
      if (!p->rcomm) NETCALL("accept", hx_net_accept(&net, p->lcomm, &p->rcomm, &dev));
      if (p->rcomm && p->lcomm) {
        NETCALL("closeListen", hx_net_closeListen(&net, p->lcomm));
        p->lcomm = NULL;
      }
      pending += !p->scomm || !p->rcomm;
    }
    if (pending && now_ns() > dl) die("%d of %d pairs not connected within %.0f s", pending, g_npairs, o.timeout);
    if (pending) usleep(50);
  }
  set_phase("registering buffers of %d pairs", g_npairs);
  size_t len = (size_t)o.depth * g_size;
  for (int i = 0; i < g_npairs; i++) {
    struct pair *p = &g_pairs[i];
    NETCALL("regMr", hx_net_regMr(&net, p->scomm, p->sbuf, len, NCCL_PTR_HOST, &p->smh));
    NETCALL("regMr", hx_net_regMr(&net, p->rcomm, p->rbuf, len, NCCL_PTR_HOST, &p->rmh));
  }
}

static void close_plugin_pairs(void) {
  set_phase("closing %d pairs", g_npairs);
  for (int i = 0; i < g_npairs; i++) {
    struct pair *p = &g_pairs[i];
    NETCALL("deregMr", hx_net_deregMr(&net, p->scomm, p->smh));
    NETCALL("deregMr", hx_net_deregMr(&net, p->rcomm, p->rmh));
    NETCALL("closeSend", hx_net_closeSend(&net, p->scomm));
    NETCALL("closeRecv", hx_net_closeRecv(&net, p->rcomm));
  }
}

/* ---- the plugin run: every pair keeps -d messages in flight ------------- */

/* Receives: check what completed, post again up to `limit`.  1 on progress.
 * Message m goes to slot m % depth, posted once that slot's previous
 * receive has been checked (tests may find later receives done first). */
static int pump_receives(struct pair *p, uint64_t limit, uint64_t *bytes) {
  int prog = 0;
  for (int i = 0; i < o.depth; i++) {
    if (!p->rreq[i] || !req_done(p->rreq[i], (long)g_size, "irecv")) continue;
    check_message(p, rslot(p, p->rseq[i]), p->rseq[i], "collx");
    p->rreq[i] = NULL;
    p->rdone++;
    *bytes += g_size;
    prog = 1;
  }
  while (p->rposted < limit) {
    int i = (int)(p->rposted % (uint64_t)o.depth);
    if (p->rreq[i]) break;
    char *b = rslot(p, p->rposted);
    poison_slot(p, b);
    void *buf = b, *mh = p->rmh;
    int sz = (int)g_size, tag = MSG_TAG;
    NETCALL("irecv", hx_net_irecv(&net, p->rcomm, 1, &buf, &sz, &tag, &mh, &p->rreq[i]));
    if (!p->rreq[i]) break; /* not now: again on the next pass */
    p->rseq[i] = p->rposted++;
    prog = 1;
  }
  return prog;
}

/* Sends: retire what completed, post the next messages up to `limit`. */
static int pump_sends(struct pair *p, uint64_t limit) {
  int prog = 0;
  for (int i = 0; i < o.depth; i++)
    if (p->sreq[i] && req_done(p->sreq[i], -1, "isend")) {
      p->sreq[i] = NULL;
      p->sdone++;
      prog = 1;
    }
  /* Message m uses slot m % depth, once that slot's previous send is retired. */
  while (p->sposted < limit && p->sposted - p->sdone < (uint64_t)o.depth) {
    int i = (int)(p->sposted % (uint64_t)o.depth);
    if (p->sreq[i]) break;
    char *b = sslot(p, p->sposted);
    stamp(p, b, p->sposted);
    NETCALL("isend", hx_net_isend(&net, p->scomm, b, (int)g_size, MSG_TAG, p->smh, &p->sreq[i]));
    if (!p->sreq[i]) break; /* the receiver has not asked for it yet */
    p->sposted++;
    prog = 1;
  }
  return prog;
}

/* Once the time is up each pair finishes what either side has begun. */
static void set_targets(void) {
  for (int i = 0; i < g_npairs; i++) {
    struct pair *p = &g_pairs[i];
    p->target = p->sposted > p->rposted ? p->sposted : p->rposted;
  }
}

static int all_finished(void) {
  for (int i = 0; i < g_npairs; i++) {
    const struct pair *p = &g_pairs[i];
    if (p->rdone < p->target || p->sdone < p->target) return 0;
  }
  return 1;
}

/* Runs for --time (or --iters messages per pair); *mid: the usage sampled
 * while every pair is busy.  Returns the elapsed ns; *bytes verified. */
static uint64_t run_plugin(struct usage *mid, uint64_t *bytes) {
  set_phase("%d plugin pairs moving %zu B messages, %d in flight each", g_npairs, g_size, o.depth);
  double secs = o.seconds > 0 ? o.seconds : 2.0;
  int stopping = o.iters > 0, sampled = 0;
  if (stopping)
    for (int i = 0; i < g_npairs; i++) g_pairs[i].target = o.iters;
  uint64_t t0 = now_ns(), t_stop = t0 + (uint64_t)(secs * NS), done_half = o.iters * (uint64_t)g_npairs / 2;
  uint64_t received = 0;
  struct idle id = {0, 0};
  *bytes = 0;
  for (;;) {
    int prog = 0;
    beat();
    for (int i = 0; i < g_npairs; i++) {
      struct pair *p = &g_pairs[i];
      uint64_t limit = stopping ? p->target : UINT64_MAX;
      prog |= pump_receives(p, limit, bytes);
      prog |= pump_sends(p, limit);
    }
    received = *bytes / g_size;
    if (!sampled && (o.iters ? received >= done_half : now_ns() >= t_stop)) {
      sample_usage(mid, NULL); /* every pair still has messages in flight */
      sampled = 1;
    }
    if (!stopping && now_ns() >= t_stop) {
      stopping = 1;
      set_targets();
    }
    if (stopping && all_finished()) break;
    if (prog) {
      id.n = 0;
      id.since = 0;
    } else {
      idle_tick(&id, -1, "", g_phase);
    }
  }
  return now_ns() - t0;
}

/* ---- the baseline: K plain TCP socket pairs, one epoll loop ------------- */

static void open_tcp_pairs(void) {
  set_phase("opening %d plain TCP socket pairs", g_npairs);
  int lfd = tcp_listen(AF_INET, 1, 0);
  if (lfd < 0) die("baseline: cannot listen on 127.0.0.1: %s", strerror(errno));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                          .sin_port = htons((uint16_t)sock_port(lfd))};
  for (int i = 0; i < g_npairs; i++) {
    int err = 0;
    struct pair *p = &g_pairs[i];
    p->sfd = tcp_connect_addr((struct sockaddr *)&a, sizeof a, deadline_in(), &err);
    if (p->sfd < 0) die("baseline: connect to 127.0.0.1: %s", strerror(err));
    set_nodelay(p->sfd);
    p->rfd = tcp_accept(lfd, "baseline TCP connection"); /* in order: one connect at a time */
  }
  close(lfd);
}

static void close_tcp_pairs(void) {
  for (int i = 0; i < g_npairs; i++) {
    close(g_pairs[i].sfd);
    close(g_pairs[i].rfd);
    g_pairs[i].sfd = g_pairs[i].rfd = -1;
  }
}

/* Writes what the socket takes, no more than -d messages ahead of the
 * receiver (as the plugin's pairs have -d in flight: without the window the
 * kernel would buffer megabytes per socket); 1 when everything is sent. */
static int tcp_send_some(struct pair *p) {
  while (p->tsent < p->target && p->tsent < p->trecvd + (uint64_t)o.depth) {
    char *b = sslot(p, p->tsent);
    if (p->soff == 0) stamp(p, b, p->tsent);
    ssize_t r = send(p->sfd, b + p->soff, g_size - p->soff, MSG_NOSIGNAL);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("baseline send: %s", strerror(errno));
    p->soff += (size_t)r;
    if (p->soff == g_size) {
      p->soff = 0;
      p->tsent++;
    }
  }
  return p->tsent == p->target;
}

/* Reads what has arrived, checking each message as it completes. */
static void tcp_recv_some(struct pair *p, uint64_t *bytes) {
  while (p->trecvd < p->target) {
    char *b = rslot(p, p->trecvd);
    if (!p->rprimed) poison_slot(p, b);
    p->rprimed = 1;
    ssize_t r = recv(p->rfd, b + p->roff, g_size - p->roff, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("baseline receive: %s", r == 0 ? "connection closed" : strerror(errno));
    p->roff += (size_t)r;
    if (p->roff < g_size) continue;
    check_message(p, b, p->trecvd, "plain TCP");
    p->roff = 0;
    p->rprimed = 0;
    p->trecvd++;
    *bytes += g_size;
    tcp_send_some(p); /* the window has moved: its sender may go on */
  }
}

static void epoll_add(int ep, int fd, uint32_t events, uint64_t key) {
  struct epoll_event ev = {.events = events, .data.u64 = key};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
}

/* Moves each pair's plugin message count (target) over its sockets. */
static uint64_t run_tcp(uint64_t *bytes) {
  set_phase("%d plain TCP pairs moving %zu B messages", g_npairs, g_size);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1: %s", strerror(errno));
  uint64_t total = 0, t0 = now_ns(), dl = deadline_in();
  for (int i = 0; i < g_npairs; i++) {
    struct pair *p = &g_pairs[i];
    p->tsent = p->trecvd = p->soff = p->roff = 0;
    p->rprimed = 0;
    total += p->target;
    /* Edge-triggered: a sender held back by its window leaves its socket
     * writable; the receive that opens the window sends on. */
    epoll_add(ep, p->sfd, EPOLLOUT | EPOLLET, (uint64_t)i * 2);
    epoll_add(ep, p->rfd, EPOLLIN, (uint64_t)i * 2 + 1);
  }
  struct epoll_event ev[256];
  *bytes = 0;
  while (*bytes / g_size < total) {
    beat();
    int n = epoll_wait(ep, ev, 256, 500);
    if (n < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
    for (int k = 0; k < n; k++) {
      struct pair *p = &g_pairs[ev[k].data.u64 / 2];
      if (ev[k].data.u64 % 2) {
        tcp_recv_some(p, bytes);
      } else {
        tcp_send_some(p);
      }
    }
    if (n > 0) dl = deadline_in();
    else if (now_ns() > dl) die("baseline: no progress for %.0f s", o.timeout);
  }
  uint64_t dt = now_ns() - t0;
  close(ep);
  return dt;
}

/* ---- one K, in its own process ------------------------------------------ */

/* Closed comms take their threads with them, perhaps not at once. */
static void wait_released(const struct usage *before, struct usage *after) {
  uint64_t end = now_ns() + 2000000000ull;
  do {
    sample_usage(after, NULL);
    if (after->cx == 0 && after->fds <= before->fds) return;
    usleep(10000);
  } while (now_ns() < end);
}

static void measure_plugin(struct comms_result *res) {
  struct usage pre, base, mid, end, after;
  struct kinds kinds = {.n = 0};
  sample_usage(&pre, NULL); /* the tool's own threads, before the plugin's */
  struct devinfo di;
  plugin_start(o.dev, &di);
  sample_usage(&base, NULL);
  open_plugin_pairs();
  uint64_t ns = run_plugin(&mid, &res->bytes);
  sample_usage(&end, &kinds); /* the comms are open and have moved data */
  max_usage(&end, &mid);
  double comms = 2.0 * g_npairs;
  res->secs = (double)ns / NS;
  res->threads = end.tasks - pre.tasks;
  res->cx_threads = end.cx;
  res->fds_per_comm = (end.fds - base.fds) / comms;
  res->kib_per_comm = (double)(end.rss_kb - base.rss_kb) / comms;
  describe_kinds(&kinds, res->names, sizeof res->names);
  for (int i = 0; i < g_npairs; i++) res->msgs += g_pairs[i].target;
  close_plugin_pairs();
  wait_released(&base, &after);
  res->threads_left = after.cx;
  res->fds_left = after.fds - base.fds;
}

static void measure_tcp(struct comms_result *res) {
  int before = count_open_fds();
  open_tcp_pairs();
  res->tcp_fds_per_comm = (count_open_fds() - before) / (2.0 * g_npairs);
  uint64_t bytes;
  res->tcp_secs = (double)run_tcp(&bytes) / NS;
  if (bytes != res->bytes) die("baseline moved %" PRIu64 " B, the plugin %" PRIu64 " B", bytes, res->bytes);
  close_tcp_pairs();
}

static int comms_child(int k, struct comms_result *res) {
  char role[32];
  snprintf(role, sizeof role, "%d pairs", k);
  became_child(strdup(role));
  start_watchdog();
  alloc_pairs(k); /* touched now: not counted as the plugin's memory */
  measure_plugin(res);
  measure_tcp(res);
  free_pairs();
  res->done = 1;
  return 0;
}

/* ---- the parent: one child per K, one line each ------------------------- */

/* Every pair needs a few descriptors on each side; the default soft limit
 * (1024) is below what 256 pairs of today's plugin hold. */
static void raise_fd_limit(int max_pairs) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)max_pairs * 12 + 64)
    note("warning: %llu descriptors allowed (hard limit); %d pairs may need up to %d", (unsigned long long)rl.rlim_cur,
         max_pairs, max_pairs * 12 + 64);
}

static const char *progress_mode(void) {
  const char *m = getenv("COLLX_PROGRESS");
  return m && *m ? m : "auto (unset)";
}

static void print_header(void) {
  char b[32];
  printf("%s", rule);
  printf("                 collx-perf: many comms at once (issue 15)\n");
  printf(" Plugin          : \"%s\"  %s\n", net.name, g_plugin_path);
  printf(" Progress        : COLLX_PROGRESS=%s\n", progress_mode());
  printf(" Each pair       : a send and a receive comm in this process, %d x %s in flight,\n", o.depth,
         fmt_size(g_size, b, sizeof b));
  if (o.iters)
    printf("                   %" PRIu64 " messages, every byte checked\n", o.iters);
  else
    printf("                   for %.2f s, every byte checked\n", o.seconds > 0 ? o.seconds : 2.0);
  printf(" Baseline        : K plain TCP socket pairs over loopback, one epoll thread, the same\n"
         "                   messages, each sender at most -d messages ahead of its receiver\n");
  printf(" Columns         : threads = threads the plugin added (cx-* = named by it); fds and KiB\n"
         "                   per comm = growth while the pairs are open / 2K; GB/s = 1e9 B/s\n");
  printf("%s", rule);
  printf(" %7s %10s %12s %8s %6s %9s %9s %10s %13s %10s\n", "#pairs", "#messages", "collx[GB/s]", "threads", "cx-*",
         "fds/comm", "KiB/comm", "tcp[GB/s]", "tcp-fds/comm", "collx/tcp");
}

static void print_result(int k, const struct comms_result *r) {
  double gbs = (double)r->bytes / r->secs / 1e9, tcp = (double)r->bytes / r->tcp_secs / 1e9;
  printf(" %7d %10" PRIu64 " %12.3f %8d %6d %9.2f %9.1f %10.3f %13.2f %10.2f\n", k, r->msgs, gbs, r->threads,
         r->cx_threads, r->fds_per_comm, r->kib_per_comm, tcp, r->tcp_fds_per_comm, tcp > 0 ? gbs / tcp : 0);
  if (r->threads_left || r->fds_left)
    note("%d pairs: after every comm was closed the plugin still had %d cx-* thread(s) and %d descriptor(s)", k,
         r->threads_left, r->fds_left);
}

static void run_child(int k, struct comms_result *res) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) _exit(comms_child(k, res));
  g_children[0] = pid;
  g_nchildren = 1;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  g_nchildren = 0;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !res->done)
    die("the run with %d pairs failed (%s %d)", k, WIFEXITED(st) ? "exit status" : "signal",
        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int comms_main(void) {
  int max_pairs = 0;
  for (int i = 0; i < o.ncomms; i++) max_pairs = o.comms[i] > max_pairs ? o.comms[i] : max_pairs;
  raise_fd_limit(max_pairs);
  force_loopback("--comms runs both ends of every pair in this process", 0);
  g_size = o.max_size;
  make_patterns(g_size);
  struct comms_result *res =
      mmap(NULL, sizeof *res * (size_t)o.ncomms, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (res == MAP_FAILED) die("mmap: %s", strerror(errno));
  print_header();
  for (int i = 0; i < o.ncomms; i++) {
    run_child(o.comms[i], &res[i]);
    print_result(o.comms[i], &res[i]);
  }
  printf("%s", rule);
  for (int i = 0; i < o.ncomms; i++) printf(" plugin threads, %d pairs: %s\n", o.comms[i], res[i].names);
  munmap(res, sizeof *res * (size_t)o.ncomms);
  return 0;
}
