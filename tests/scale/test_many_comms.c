/*
 * test_many_comms (issue 15): 256 send/receive pairs in one process, in
 * every progress mode, and what they cost.
 *
 * One process listens 256 times on loopback through the plugin's table,
 * connects and accepts all 256 pairs at once (each listen comm is closed
 * once accepted, as NCCL's proxy does), then posts every message of every
 * pair before completing any: three 64 KiB-sized messages that travel on
 * the data streams and three that go eager, each with a pattern keyed by
 * (pair, message).  Every receive is checked: the size reported, every
 * byte, the bytes between the message and the posted size untouched, the
 * canary after the buffer.
 *
 * The bounds are the issue's, for a process of 512 comms:
 *   (a) threads the plugin added (cx-* or not) <= COLLX_NTHREADS + 1 (the
 *       pool and the watchdog); with COLLX_PROGRESS=caller <= 1;
 *   (b) descriptors per comm <= 2 (control + data) at scale: the pairs
 *       are opened in two halves, and the second half, opened while the
 *       first half's 256 comms are open, is judged (the first comms of a
 *       device get the full stream count); the listen comms are counted
 *       apart (printed, not judged);
 *   (c) resident memory per comm <= 64 KiB (growth of /proc/self/statm's
 *       resident size from after init to after the data moved, / 512;
 *       the test's own buffers are touched before the first sample);
 *   (d) after every comm is closed: no cx-* thread, descriptors back to
 *       what they were before the first listen.
 * The test sets COLLX_NTHREADS=4 unless the environment sets it.  The
 * plugin of a thread per stream failed (a), (b) and (c): 1025 threads,
 * 3 descriptors and 126 KiB per comm.
 *
 * The modes are SCALE_MODES (comma-separated) or the list below; a mode
 * the plugin does not know (it WARNs about COLLX_PROGRESS and falls back)
 * is skipped.
 *
 *   test_many_comms [--case many-comms-threads] [-v] [PLUGIN.so]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../common/proc.h"
#include "../harness/harness.h"
#include "../common/sanitized.h"

/* The progress modes to run, in order (SCALE_MODES overrides). */
#define SCALE_MODES "caller,threads"

#define PAIRS 256
#define COMMS (2 * PAIRS)
#define MAX_FDS_PER_COMM 2.0
#define MAX_KIB_PER_COMM 64.0
#define WATCHDOG_THREADS 1
#define MAX_MODES 8

/* Built with -fsanitize=address or thread: the resident size says nothing
 * about the plugin (shadow memory, quarantine); printed, not judged.  The
 * sanitizer also starts a thread of its own, so threads are counted by
 * the plugin's names (cx-*) only. */
#define RSS_JUDGED (!COLLX_SANITIZED)

/* Each pair's messages, posted all at once: three that take the data
 * streams (just over COLLX_EAGER_SIZE's default of 64 KiB) and three at
 * or under 16 KiB, some shorter than the receive posted for them. */
struct msg_plan {
  int size, cap;
};
static const struct msg_plan plan[] = {
    {69632, 69632}, {69632, 69632}, {69632 - 7, 69632}, {1, 16384}, {4096 + 3, 16384}, {16384, 16384},
};
#define NMSG ((int)(sizeof plan / sizeof plan[0]))

struct pair {
  int idx;
  char handle[NCCL_NET_HANDLE_MAXSIZE]; /* stays put: connect() may keep state in it */
  void *lcomm, *scomm, *rcomm, *smh, *rmh;
  uint8_t *sbuf, *rbuf; /* one region per comm: the messages' slots, each with a canary after it */
  void *sreq[NMSG], *rreq[NMSG];
  int sposted, rposted, sdone, rdone;
};

struct usage {
  int tasks, cx, fds;
  long rss_kb;
};

static struct pair *g_pairs;
static size_t g_offset[NMSG + 1]; /* of each slot in a region; [NMSG]: the region's size */

/* ---- the process's own threads, descriptors and resident memory ---------- */

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
  }
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Threads the plugin named (cx-*), by kind ("cx-rx 512, cx-watchdog 1")
 * when names is not NULL. */
static int count_plugin_threads(char *names, size_t cap) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  char kind[16][16];
  int count[16], nkinds = 0, cx = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = e->d_name[0] == '.' ? NULL : fopen(path, "r");
    if (!f) continue;
    if (!fgets(name, sizeof name, f)) name[0] = 0;
    fclose(f);
    if (strncmp(name, "cx-", 3)) continue;
    cx++;
    size_t n = strcspn(name, "\n");
    while (n && ((name[n - 1] >= '0' && name[n - 1] <= '9') || name[n - 1] == '.')) n--; /* cx-rx12.1 -> cx-rx */
    name[n] = 0;
    int k = 0;
    while (k < nkinds && strcmp(kind[k], name)) k++;
    if (k == nkinds && nkinds < 16) {
      snprintf(kind[nkinds], sizeof kind[0], "%s", name);
      count[nkinds++] = 0;
    }
    if (k < nkinds) count[k]++;
  }
  closedir(d);
  if (names) {
    size_t len = 0;
    names[0] = 0;
    for (int k = 0; k < nkinds && len < cap; k++)
      len += (size_t)snprintf(names + len, cap - len, "%s%s %d", k ? ", " : "", kind[k], count[k]);
    if (!nkinds) snprintf(names, cap, "none");
  }
  return cx;
}

static void sample(struct usage *u) {
  u->tasks = count_tasks();
  u->cx = count_plugin_threads(NULL, 0);
  u->fds = count_fds();
  u->rss_kb = rss_kb();
}

static void keep_max(struct usage *acc, const struct usage *u) {
  if (u->tasks > acc->tasks) acc->tasks = u->tasks;
  if (u->cx > acc->cx) acc->cx = u->cx;
  if (u->fds > acc->fds) acc->fds = u->fds;
  if (u->rss_kb > acc->rss_kb) acc->rss_kb = u->rss_kb;
}

/* ---- buffers: allocated and touched before the first sample -------------- */

static uint64_t msg_key(int pair, int k) { return hx_key(0x5CA1Eull, (uint64_t)pair, (uint64_t)k); }
static uint64_t canary_salt(int pair, int k) { return (uint64_t)pair * NMSG + (uint64_t)k; }

static int alloc_pairs(void) {
  for (int k = 0; k < NMSG; k++) g_offset[k + 1] = g_offset[k] + (size_t)plan[k].cap + HX_CANARY_LEN;
  g_pairs = calloc(PAIRS, sizeof *g_pairs);
  if (!g_pairs) return -1;
  for (int i = 0; i < PAIRS; i++) {
    struct pair *p = &g_pairs[i];
    p->idx = i;
    p->sbuf = malloc(g_offset[NMSG]);
    p->rbuf = malloc(g_offset[NMSG]);
    if (!p->sbuf || !p->rbuf) return -1;
    memset(p->sbuf, 0, g_offset[NMSG]);
    memset(p->rbuf, HX_FILL, g_offset[NMSG]);
    for (int k = 0; k < NMSG; k++) {
      hx_pattern_fill(p->sbuf + g_offset[k], (size_t)plan[k].size, msg_key(i, k));
      hx_canary_fill(p->rbuf + g_offset[k] + plan[k].cap, canary_salt(i, k));
    }
  }
  return 0;
}

static void free_pairs(void) {
  for (int i = 0; g_pairs && i < PAIRS; i++) {
    free(g_pairs[i].sbuf);
    free(g_pairs[i].rbuf);
  }
  free(g_pairs);
  g_pairs = NULL;
}

/* ---- connections ------------------------------------------------------- */

static int listen_all(void) {
  hx_step("listening %d times", PAIRS);
  for (int i = 0; i < PAIRS; i++) {
    ncclResult_t r = NET(listen, hx_dev, g_pairs[i].handle, &g_pairs[i].lcomm);
    if (r != ncclSuccess || !g_pairs[i].lcomm) {
      hx_fail("listen #%d returned %s%s", i, hx_result_str(r), r == ncclSuccess ? " and no listen comm" : "");
      return -1;
    }
  }
  return 0;
}

/* One connect or accept call for a pair that still needs it; the listen
 * comm goes once its comm is accepted.  0, or -1 (reported). */
static int connect_step(struct pair *p) {
  ncclNetDeviceHandle_v8_t *dev = NULL;
  ncclResult_t r = ncclSuccess;
  if (!p->scomm && (r = NET(connect, hx_dev, p->handle, &p->scomm, &dev)) != ncclSuccess) {
    hx_fail("pair %d: connect returned %s", p->idx, hx_result_str(r));
    return -1;
  }
  if (!p->rcomm && (r = NET(accept, p->lcomm, &p->rcomm, &dev)) != ncclSuccess) {
    hx_fail("pair %d: accept returned %s", p->idx, hx_result_str(r));
    return -1;
  }
  if (p->rcomm && p->lcomm) {
    if ((r = NET(closeListen, p->lcomm)) != ncclSuccess) {
      hx_fail("pair %d: closeListen returned %s", p->idx, hx_result_str(r));
      return -1;
    }
    p->lcomm = NULL;
  }
  return 0;
}

static int register_pair(struct pair *p) {
  ncclResult_t r = NET(regMr, p->scomm, p->sbuf, g_offset[NMSG], NCCL_PTR_HOST, &p->smh);
  if (r == ncclSuccess) r = NET(regMr, p->rcomm, p->rbuf, g_offset[NMSG], NCCL_PTR_HOST, &p->rmh);
  if (r != ncclSuccess) hx_fail("pair %d: regMr returned %s", p->idx, hx_result_str(r));
  return r == ncclSuccess ? 0 : -1;
}

/* Connects pairs [from, to) at once (neither call blocks), then registers. */
static int connect_all(int from, int to) {
  struct hx_wait w;
  hx_wait_begin(&w, 30.0);
  hx_step("connecting pairs %d to %d", from, to - 1);
  for (;;) {
    int pending = 0;
    for (int i = from; i < to; i++) {
      if (connect_step(&g_pairs[i])) return -1;
      pending += !g_pairs[i].scomm || !g_pairs[i].rcomm;
    }
    if (!pending) break;
    if (hx_wait_over(&w)) {
      hx_fail("%d of %d pairs not connected after %.0f s", pending, to - from, S(30.0));
      return -1;
    }
    hx_backoff(&w);
  }
  for (int i = from; i < to; i++)
    if (register_pair(&g_pairs[i])) return -1;
  return 0;
}

static int close_all(void) {
  hx_step("closing %d pairs", PAIRS);
  int rc = 0;
  for (int i = 0; i < PAIRS; i++) {
    struct pair *p = &g_pairs[i];
    if (p->smh && NET(deregMr, p->scomm, p->smh) != ncclSuccess) rc = -1;
    if (p->rmh && NET(deregMr, p->rcomm, p->rmh) != ncclSuccess) rc = -1;
    if (p->scomm && NET(closeSend, p->scomm) != ncclSuccess) rc = -1;
    if (p->rcomm && NET(closeRecv, p->rcomm) != ncclSuccess) rc = -1;
    if (p->lcomm && NET(closeListen, p->lcomm) != ncclSuccess) rc = -1;
    p->smh = p->rmh = p->scomm = p->rcomm = p->lcomm = NULL;
  }
  if (rc) hx_fail("a deregMr or close call failed");
  return rc;
}

/* ---- the transfers --------------------------------------------------- */

/* Post what the plugin takes now, receives first; 1 on progress, -1 (reported). */
static int post_some(struct pair *p) {
  int moved = 0;
  while (p->rposted < NMSG) {
    int k = p->rposted, cap = plan[k].cap, tag = k;
    void *data = p->rbuf + g_offset[k], *mh = p->rmh;
    ncclResult_t r = NET(irecv, p->rcomm, 1, &data, &cap, &tag, &mh, &p->rreq[k]);
    if (r != ncclSuccess) {
      hx_fail("pair %d: irecv of message %d returned %s", p->idx, k, hx_result_str(r));
      return -1;
    }
    if (!p->rreq[k]) break;
    p->rposted++;
    moved = 1;
  }
  while (p->sposted < NMSG) {
    int k = p->sposted;
    ncclResult_t r = NET(isend, p->scomm, p->sbuf + g_offset[k], plan[k].size, k, p->smh, &p->sreq[k]);
    if (r != ncclSuccess) {
      hx_fail("pair %d: isend of message %d returned %s", p->idx, k, hx_result_str(r));
      return -1;
    }
    if (!p->sreq[k]) break;
    p->sposted++;
    moved = 1;
  }
  return moved;
}

/* The receiver's checks of message k: its bytes, nothing after it. */
static int check_received(const struct pair *p, int k) {
  const uint8_t *b = p->rbuf + g_offset[k];
  char why[256];
  if (hx_pattern_check(b, (size_t)plan[k].size, msg_key(p->idx, k), why, sizeof why) ||
      hx_untouched_check(b, (size_t)plan[k].size, (size_t)plan[k].cap, why, sizeof why) ||
      hx_canary_check(b + plan[k].cap, canary_salt(p->idx, k), why, sizeof why)) {
    hx_fail("pair %d, message %d (%d B in a %d B receive): %s", p->idx, k, plan[k].size, plan[k].cap, why);
    return -1;
  }
  return 0;
}

/* Test every posted request not yet done; 1 on progress, -1 (reported). */
static int test_some(struct pair *p) {
  int moved = 0;
  char what[64];
  for (int k = 0; k < p->sposted; k++) {
    if (!p->sreq[k]) continue;
    snprintf(what, sizeof what, "pair %d: send %d", p->idx, k);
    int d = hx_test_once(p->sreq[k], plan[k].size, what);
    if (d < 0) return -1;
    if (d) p->sreq[k] = NULL, p->sdone++, moved = 1;
  }
  for (int k = 0; k < p->rposted; k++) {
    if (!p->rreq[k]) continue;
    snprintf(what, sizeof what, "pair %d: receive %d", p->idx, k);
    int d = hx_test_once(p->rreq[k], plan[k].size, what);
    if (d < 0 || (d && check_received(p, k))) return -1;
    if (d) p->rreq[k] = NULL, p->rdone++, moved = 1;
  }
  return moved;
}

static int pairs_done(void) {
  int n = 0;
  for (int i = 0; i < PAIRS; i++) n += g_pairs[i].sdone == NMSG && g_pairs[i].rdone == NMSG;
  return n;
}

static int all_posted(void) {
  for (int i = 0; i < PAIRS; i++)
    if (g_pairs[i].sposted < NMSG) return 0;
  return 1;
}

/* Everything posted, then everything completed and checked; *peak: the
 * usage sampled when the last send went up (all pairs busy) and at the end. */
static int transfer_all(struct usage *peak) {
  struct hx_wait w;
  hx_wait_begin(&w, 30.0);
  hx_step("moving %d messages on each of %d pairs", NMSG, PAIRS);
  int sampled = 0;
  while (pairs_done() < PAIRS) {
    int moved = 0;
    for (int i = 0; i < PAIRS; i++) {
      int a = post_some(&g_pairs[i]), b = a < 0 ? -1 : test_some(&g_pairs[i]);
      if (a < 0 || b < 0) return -1;
      moved |= a | b;
    }
    if (!sampled && all_posted()) {
      sample(peak);
      sampled = 1;
    }
    if (moved) {
      hx_wait_reset(&w);
    } else if (hx_wait_over(&w)) {
      hx_fail("%d of %d pairs still moving data after %.0f s without progress", PAIRS - pairs_done(), PAIRS,
              S(30.0));
      return -1;
    } else {
      hx_backoff(&w);
    }
  }
  struct usage end;
  sample(&end);
  keep_max(peak, &end);
  return 0;
}

/* ---- the case -------------------------------------------------------- */

/* 256 pairs hold up to ~1500 descriptors today: more than the usual soft limit. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) hx_note("setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
}

static const char *mode(void) {
  const char *m = getenv("COLLX_PROGRESS");
  return m ? m : "";
}

/* The plugin fell back from a mode it does not know: nothing to judge. */
static int mode_unknown(size_t warn_mark) {
  char warns[2048];
  hx_warn_since(warn_mark, warns, sizeof warns, '|');
  if (!strcmp(mode(), "caller") || !strcmp(mode(), "threads") || !strstr(warns, "COLLX_PROGRESS")) return 0;
  hx_skip("this plugin does not know COLLX_PROGRESS=%s: %s", mode(), warns);
  return 1;
}

/* (a): the pool and the watchdog; with caller progress, only the watchdog. */
static int thread_bound(void) {
  if (!strcmp(mode(), "caller")) return WATCHDOG_THREADS;
  const char *pool = getenv("COLLX_NTHREADS");
  int n = pool ? atoi(pool) : 0;
  if (n < 1) hx_fail("COLLX_NTHREADS=%s: the pool size must be a positive number", pool ? pool : "(unset)");
  return n + WATCHDOG_THREADS;
}

struct figures {
  struct usage pre, base, listening, half, connected, peak, after;
  double connect_s, transfer_s, close_s;
  char names[256];
};

static void judge(const struct figures *f) {
  int added = f->peak.tasks - f->pre.tasks, threads = RSS_JUDGED && added > f->peak.cx ? added : f->peak.cx;
  int bound = thread_bound();
  double per_listen = (f->listening.fds - f->base.fds) / (double)PAIRS;
  double all_fds = (f->peak.fds - f->base.fds) / (double)COMMS;
  /* At scale: the second half of the pairs, opened with the first half's
   * comms open (their listen comms, closed meanwhile, counted back). */
  double fds = (f->connected.fds - f->half.fds + per_listen * (PAIRS / 2)) / (double)(COMMS / 2);
  double kib = (double)(f->peak.rss_kb - f->base.rss_kb) / COMMS;
  hx_summary("COLLX_PROGRESS=%s, %d pairs: threads %d (cx-* %d; bound %d), %.2f fds/comm at scale (bound %.0f; "
             "%.2f over all %d comms; listen comms %.2f each, closed once accepted), %.1f KiB/comm (bound %.0f%s), after "
             "close %d cx-* threads and %+d fds",
             mode(), PAIRS, threads, f->peak.cx, bound, fds, MAX_FDS_PER_COMM, all_fds, COMMS, per_listen, kib,
             MAX_KIB_PER_COMM,
             RSS_JUDGED ? "" : ", not judged under a sanitizer", f->after.cx, f->after.fds - f->base.fds);
  hx_note("plugin threads by name while the pairs were open: %s", f->names);
  hx_note("connecting took %.2f s, moving and checking the data %.2f s, closing until all was released %.2f s",
          f->connect_s, f->transfer_s, f->close_s);
  if (threads > bound)
    hx_fail("(a) the plugin runs %d threads for %d comms (%s): at most %d (COLLX_NTHREADS=%s + the watchdog)", threads,
            COMMS, f->names, bound, getenv("COLLX_NTHREADS") ? getenv("COLLX_NTHREADS") : "-");
  if (fds > MAX_FDS_PER_COMM)
    hx_fail("(b) %.2f descriptors per comm opened with %d comms open: at most %.0f (control + data)", fds, COMMS / 2,
            MAX_FDS_PER_COMM);
  if (RSS_JUDGED && kib > MAX_KIB_PER_COMM)
    hx_fail("(c) %.1f KiB of resident memory per comm (%ld KiB for %d comms): at most %.0f", kib,
            f->peak.rss_kb - f->base.rss_kb, COMMS, MAX_KIB_PER_COMM);
  if (f->after.cx != 0 || f->after.fds != f->base.fds)
    hx_fail("(d) after every comm was closed: %d cx-* thread(s) left, descriptors %d (before the first listen %d)",
            f->after.cx, f->after.fds, f->base.fds);
}

/* Closed comms take their threads and sockets with them, perhaps not at once. */
static void wait_released(const struct usage *base, struct usage *after) {
  double end = now_s() + S(5.0);
  do {
    sample(after);
    if (after->cx == 0 && after->fds == base->fds) return;
    sleep_s(0.01);
  } while (now_s() < end);
}

static void many_comms(void) {
  struct figures f;
  memset(&f, 0, sizeof f);
  raise_fd_limit();
  if (alloc_pairs()) {
    hx_fail("out of memory for %d pairs' buffers", PAIRS);
    return;
  }
  sample(&f.pre); /* the test's own threads and buffers */
  size_t mark = hx_warn_mark();
  if (hx_load() || mode_unknown(mark)) return;
  sample(&f.base);
  if (listen_all()) return;
  sample(&f.listening);
  double t0 = now_s();
  int ok = connect_all(0, PAIRS / 2) == 0;
  sample(&f.half);
  ok = ok && connect_all(PAIRS / 2, PAIRS) == 0;
  sample(&f.connected);
  f.connect_s = now_s() - t0;
  ok = ok && transfer_all(&f.peak) == 0;
  f.transfer_s = now_s() - t0 - f.connect_s;
  count_plugin_threads(f.names, sizeof f.names);
  t0 = now_s();
  if (close_all() == 0 && ok) {
    wait_released(&f.base, &f.after);
    f.close_s = now_s() - t0;
    judge(&f);
  }
  free_pairs();
}

/* ---- main: one case per progress mode ---------------------------------- */

static char g_names[MAX_MODES][48], g_env[MAX_MODES][48];
static struct hx_case g_cases[MAX_MODES];

static int build_cases(void) {
  const char *list = getenv("SCALE_MODES") && *getenv("SCALE_MODES") ? getenv("SCALE_MODES") : SCALE_MODES;
  char *dup = strdup(list), *save = NULL;
  int n = 0;
  for (char *m = strtok_r(dup, ",", &save); m && n < MAX_MODES; m = strtok_r(NULL, ",", &save), n++) {
    snprintf(g_names[n], sizeof g_names[n], "many-comms-%s", m);
    snprintf(g_env[n], sizeof g_env[n], "COLLX_PROGRESS=%s", m);
    g_cases[n] = (struct hx_case){.name = g_names[n],
                                  .summary = "256 send/receive pairs in one process: threads, fds, memory per comm",
                                  .timeout_s = 60,
                                  .roles = {"pairs"},
                                  .lead = many_comms,
                                  .env = {g_env[n]}};
  }
  free(dup);
  return n;
}

int main(int argc, char **argv) {
  static const char *const env[] = {"COLLX_IFNAME=lo", "COLLX_NTHREADS?=4", "COLLX_CPU_AFFINITY?=off", NULL};
  static const struct hx_case *groups[] = {g_cases, NULL};
  static int sizes[1];
  sizes[0] = build_cases();
  const struct hx_program prog = {.title = "test_many_comms",
                                  .groups = groups,
                                  .group_sizes = sizes,
                                  .scale_env = "COLLX_SCALE_TIMEOUT_SCALE",
                                  .env = env,
                                  .env_help = "COLLX_PLUGIN, SCALE_MODES (default " SCALE_MODES
                                              "), COLLX_NTHREADS (pool bound, default 4), COLLX_SCALE_TIMEOUT_SCALE"};
  return hx_main(argc, argv, &prog);
}
