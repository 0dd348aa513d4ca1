/*
 * collx-info --stats [PID|all] [--json]: the live counters of running
 * processes, read from their pages (src/util/stats.h).  The text form fits
 * one screen per process and puts first what a user hunting a slow or
 * stuck job wants: connections with requests in flight, slowest first,
 * and in each the slowest stream first.
 */
#include "stats_view.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/stats.h"

#define MAX_PIDS 4096
#define TEXT_CONNS 16 /* connections the text form lists per process */

struct conn_view {
  struct collx_stats_conn c;
  uint64_t rate; /* the streams' sum */
};

static uint64_t conn_rate(const struct collx_stats_conn *c) {
  uint64_t r = 0;
  for (int i = 0; i < c->nstreams && i < COLLX_STATS_STREAMS; i++) r += c->streams[i].rate;
  return r;
}

/* Busy connections first (requests in flight: a stuck peer shows there),
 * then the slowest; ties by peer so that the order is stable. */
static int slowest_first(const void *a, const void *b) {
  const struct conn_view *x = a, *y = b;
  int bx = x->c.inflight > 0, by = y->c.inflight > 0;
  if (bx != by) return by - bx;
  if (x->rate != y->rate) return x->rate < y->rate ? -1 : 1;
  return strcmp(x->c.peer, y->c.peer);
}

static int stream_order[COLLX_STATS_STREAMS];
static const struct collx_stats_conn *order_conn;
static int stream_slowest_first(const void *a, const void *b) {
  uint64_t x = order_conn->streams[*(const int *)a].rate, y = order_conn->streams[*(const int *)b].rate;
  return x < y ? -1 : x > y;
}

static const char *human(double v, char *buf, size_t len) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
  return buf;
}

static double now_realtime_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The live connections of a page, slowest first; returns how many. */
static int collect(const struct collx_stats_page *pg, struct conn_view **out) {
  uint32_t used = pg->h.slots_used <= pg->h.nslots ? pg->h.slots_used : pg->h.nslots;
  struct conn_view *v = calloc(used ? used : 1, sizeof *v);
  int n = 0;
  for (uint32_t i = 0; v && i < used; i++) {
    if (!collx_stats_read_conn(pg, (int)i, &v[n].c)) continue;
    v[n].rate = conn_rate(&v[n].c);
    n++;
  }
  if (v) qsort(v, (size_t)n, sizeof *v, slowest_first);
  *out = v;
  return v ? n : 0;
}

static void print_streams_text(const struct collx_stats_conn *c) {
  int n = c->nstreams < COLLX_STATS_STREAMS ? c->nstreams : COLLX_STATS_STREAMS;
  for (int i = 0; i < n; i++) stream_order[i] = i;
  order_conn = c;
  qsort(stream_order, (size_t)n, sizeof stream_order[0], stream_slowest_first);
  for (int k = 0; k < n; k++) {
    const struct collx_stats_stream *s = &c->streams[stream_order[k]];
    char b[32], r[32], q[32];
    printf("      stream %2d path %u%s: %10s  %10s/s  rtt %6u us (+-%u)  retrans %u  unacked %u  unsent %s\n",
           stream_order[k], s->path, s->lost ? " LOST" : "", human((double)s->bytes, b, sizeof b),
           human((double)s->rate, r, sizeof r), s->rtt_us, s->rttvar_us, s->retrans, s->unacked,
           human((double)s->notsent, q, sizeof q));
  }
}

static void print_text(int pid, const struct collx_stats_page *pg, struct conn_view *v, int n, int alive) {
  double age = 0;
  for (int i = 0; i < n; i++)
    if (v[i].c.sampled_ns) age = now_realtime_s() - (double)v[i].c.sampled_ns * 1e-9;
  printf("pid %d (%s)%s: %d connection end(s)", pid, pg->h.exe, alive ? "" : " [process gone]", n);
  if (pg->h.untracked) printf(", %u more not tracked (no free slot)", pg->h.untracked);
  if (n) printf(", kernel sampled %.1f s ago", age);
  printf("\n");
  for (int i = 0; i < n && i < TEXT_CONNS; i++) {
    const struct collx_stats_conn *c = &v[i].c;
    char b[32], r[32];
    printf("  %-4s dev %d %-10s peer %-24s msgs %-10llu %10s  %10s/s  in flight %llu",
           c->role == COLLX_STATS_SEND ? "send" : "recv", c->dev, c->devname, c->peer,
           (unsigned long long)c->messages, human((double)c->bytes, b, sizeof b), human((double)v[i].rate, r, sizeof r),
           (unsigned long long)c->inflight);
    if (c->paths_lost || c->paths_rejoined || c->chunks_resent)
      printf("  paths lost %llu rejoined %llu, chunks resent %llu", (unsigned long long)c->paths_lost,
             (unsigned long long)c->paths_rejoined, (unsigned long long)c->chunks_resent);
    printf("\n");
    print_streams_text(c);
  }
  if (n > TEXT_CONNS) printf("  ... %d more (--json lists all)\n", n - TEXT_CONNS);
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

static void print_json(int pid, const struct collx_stats_page *pg, struct conn_view *v, int n, int alive) {
  printf("{\"pid\": %d, \"exe\": ", pid);
  json_str(pg->h.exe);
  printf(", \"alive\": %s, \"untracked\": %u, \"conns\": [", alive ? "true" : "false", pg->h.untracked);
  for (int i = 0; i < n; i++) {
    const struct collx_stats_conn *c = &v[i].c;
    printf("%s\n  {\"role\": \"%s\", \"dev\": %d, \"device\": ", i ? "," : "",
           c->role == COLLX_STATS_SEND ? "send" : "recv", c->dev);
    json_str(c->devname);
    printf(", \"peer\": ");
    json_str(c->peer);
    printf(", \"messages\": %llu, \"bytes\": %llu, \"rate\": %llu, \"inflight\": %llu, \"chunks_resent\": %llu, "
           "\"paths\": %d, \"paths_lost\": %llu, \"paths_rejoined\": %llu, \"sampled_ns\": %llu, \"streams\": [",
           (unsigned long long)c->messages, (unsigned long long)c->bytes, (unsigned long long)v[i].rate,
           (unsigned long long)c->inflight, (unsigned long long)c->chunks_resent, c->npaths,
           (unsigned long long)c->paths_lost, (unsigned long long)c->paths_rejoined,
           (unsigned long long)c->sampled_ns);
    for (int k = 0; k < c->nstreams && k < COLLX_STATS_STREAMS; k++) {
      const struct collx_stats_stream *s = &c->streams[k];
      printf("%s{\"index\": %d, \"path\": %u, \"lost\": %u, \"bytes\": %llu, \"chunks\": %llu, \"rate\": %llu, "
             "\"rtt_us\": %u, \"rttvar_us\": %u, \"retrans\": %u, \"unacked\": %u, \"notsent\": %u}",
             k ? ", " : "", k, s->path, s->lost, (unsigned long long)s->bytes, (unsigned long long)s->chunks,
             (unsigned long long)s->rate, s->rtt_us, s->rttvar_us, s->retrans, s->unacked, s->notsent);
    }
    printf("]}");
  }
  printf("]}");
}

/* One process: 0, or 1 (said on stderr). */
static int show_one(int pid, int json, int *printed) {
  const struct collx_stats_page *pg;
  size_t len;
  char why[400];
  if (collx_stats_map(NULL, pid, &pg, &len, why, sizeof why) != 0) {
    fprintf(stderr, "collx-info: %s\n", why);
    return 1;
  }
  int alive = !(kill(pid, 0) != 0 && errno == ESRCH);
  struct conn_view *v;
  int n = collect(pg, &v);
  if (json) {
    if (*printed) printf(",\n");
    print_json(pid, pg, v, n, alive);
  } else {
    if (*printed) printf("\n");
    print_text(pid, pg, v, n, alive);
  }
  (*printed)++;
  free(v);
  collx_stats_unmap(pg, len);
  return 0;
}

int collx_info_stats(const char *target, int json) {
  int pids[MAX_PIDS], n;
  int all = !target || !strcmp(target, "all");
  if (all) {
    n = collx_stats_list(NULL, pids, MAX_PIDS);
  } else {
    char *end;
    long p = strtol(target, &end, 10);
    if (*end || p <= 0 || p > 0x7fffffff) {
      fprintf(stderr, "collx-info: --stats takes a process id or \"all\", not '%s'\n", target);
      return 2;
    }
    pids[0] = (int)p;
    n = 1;
  }
  int printed = 0, failed = 0;
  if (json && all) printf("[");
  for (int i = 0; i < n; i++) failed += show_one(pids[i], json, &printed);
  if (json && all) printf("]");
  if (json) printf("\n");
  if (all && n == 0 && !json) printf("no collx stats pages in %s\n", COLLX_STATS_DIR);
  return all ? 0 : failed ? 1 : 0;
}
