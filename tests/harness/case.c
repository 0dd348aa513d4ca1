/*
 * The case runner: the shared page, verdicts, the bootstrap channel, the
 * processes of a case, and the main that selects and runs cases.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "case.h"
#include "prof.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"

#define STEP_LEN 200
#define CALL_LEN 24
#define TEXT_CAP 12288
#define ENTRY_NAME 48
#define ENTRY_DATA 256
#define NENTRIES 400
#define GRACE_S 3.0 /* a worker's peers may go on this long after it ended badly */

struct role_page {
  int nfail, nskip, finished, pid;
  char step[HX_SLOTS][STEP_LEN];
  char in_call[HX_SLOTS][CALL_LEN];
  size_t len;
  char text[TEXT_CAP];
};

struct entry {
  int named; /* name written: the entry is visible to lookups */
  char name[ENTRY_NAME];
  int full;   /* a value or a message is there */
  int value;  /* flags */
  int count;  /* barrier arrivals */
  size_t len;
  unsigned char data[ENTRY_DATA];
};

struct page {
  struct role_page role[HX_MAX_ROLES];
  char summary[2048];
  int abort; /* a process of the case ended badly */
  int lock;
  struct entry entry[NENTRIES];
  _Alignas(64) unsigned char shared[HX_SHARED_CAP];
};

double hx_scale = 1.0;
int hx_verbose;
const char *hx_plugin_path;
int hx_abi = HX_NET_DEFAULT_VERSION;
uint64_t hx_seed = 0xC011C0DEull;
double hx_call_limit_s;

static struct page *g_page;
static int g_role;
static const struct hx_case *g_case;
static __thread int t_slot;
static pthread_mutex_t g_report_mu = PTHREAD_MUTEX_INITIALIZER;

int hx_role(void) { return g_role; }
const char *hx_role_name(int role) {
  return role >= 0 && role < HX_MAX_ROLES && g_case->roles[role] ? g_case->roles[role] : "?";
}
const struct hx_case *hx_current(void) { return g_case; }
void hx_set_slot(int slot) { t_slot = slot >= 0 && slot < HX_SLOTS ? slot : -1; }
int hx_slot(void) { return t_slot; }
void *hx_shared(void) { return g_page->shared; }

/* ---- verdicts ---------------------------------------------------------- */
static void report_v(const char *kind, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  pthread_mutex_lock(&g_report_mu);
  struct role_page *r = &g_page->role[g_role];
  size_t room = TEXT_CAP - r->len;
  if (room > 1) {
    int n = snprintf(r->text + r->len, room, "%s: %s\n", kind, msg);
    if (n > 0) r->len += (size_t)n < room ? (size_t)n : room - 1;
  }
  pthread_mutex_unlock(&g_report_mu);
  if (hx_verbose) fprintf(stderr, "[%s/%s] %s: %s\n", g_case->name, hx_role_name(g_role), kind, msg);
}

void hx_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v("FAIL", fmt, ap);
  va_end(ap);
  __atomic_add_fetch(&g_page->role[g_role].nfail, 1, __ATOMIC_SEQ_CST);
}

void hx_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v("SKIP", fmt, ap);
  va_end(ap);
  __atomic_add_fetch(&g_page->role[g_role].nskip, 1, __ATOMIC_SEQ_CST);
}

void hx_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report_v("note", fmt, ap);
  va_end(ap);
}

void hx_summary(const char *fmt, ...) {
  pthread_mutex_lock(&g_report_mu);
  size_t l = strlen(g_page->summary);
  va_list ap;
  va_start(ap, fmt);
  if (l < sizeof g_page->summary - 1) vsnprintf(g_page->summary + l, sizeof g_page->summary - l, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&g_report_mu);
}

void hx_step(const char *fmt, ...) {
  char buf[STEP_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (t_slot >= 0) memcpy(g_page->role[g_role].step[t_slot], buf, sizeof buf);
}

void hx_in_call(const char *fn) {
  if (t_slot < 0) return;
  char *d = g_page->role[g_role].in_call[t_slot];
  strncpy(d, fn, CALL_LEN - 1);
}

int hx_failed(void) { return __atomic_load_n(&g_page->role[g_role].nfail, __ATOMIC_SEQ_CST); }

int hx_failed_all(void) {
  int n = 0;
  for (int r = 0; r < HX_MAX_ROLES; r++) n += __atomic_load_n(&g_page->role[r].nfail, __ATOMIC_SEQ_CST);
  return n;
}

/* ---- deadlines ------------------------------------------------------- */
void hx_wait_begin(struct hx_wait *w, double timeout_s) {
  w->end = now_s() + S(timeout_s);
  w->spins = 0;
}
int hx_wait_over(const struct hx_wait *w) { return now_s() > w->end; }
void hx_wait_reset(struct hx_wait *w) { w->spins = 0; }
void hx_backoff(struct hx_wait *w) {
  if (++w->spins < 64) {
    sched_yield();
  } else {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

/* ---- the bootstrap channel ------------------------------------------- */
static void page_lock(void) {
  while (__atomic_exchange_n(&g_page->lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
}
static void page_unlock(void) { __atomic_store_n(&g_page->lock, 0, __ATOMIC_RELEASE); }

/* The entry of a name, or NULL.  Lock-free: a process stopped or killed
 * while it polls a flag must not block the others. */
static struct entry *find_entry(const char *name) {
  for (int i = 0; i < NENTRIES; i++) {
    struct entry *x = &g_page->entry[i];
    if (!__atomic_load_n(&x->named, __ATOMIC_ACQUIRE)) return NULL; /* entries are named in order */
    if (!strncmp(x->name, name, ENTRY_NAME - 1)) return x;
  }
  return NULL;
}

/* The entry of a name, made on first use (under the page lock, which only
 * making an entry takes). */
static struct entry *entry_of(const char *name) {
  struct entry *e = find_entry(name);
  if (e) return e;
  page_lock();
  e = find_entry(name);
  for (int i = 0; i < NENTRIES && !e; i++) {
    struct entry *x = &g_page->entry[i];
    if (x->named) continue;
    snprintf(x->name, sizeof x->name, "%s", name);
    __atomic_store_n(&x->named, 1, __ATOMIC_RELEASE);
    e = x;
  }
  page_unlock();
  if (!e) {
    fprintf(stderr, "harness: more than %d named flags in one case (at '%s')\n", NENTRIES, name);
    abort();
  }
  return e;
}

int hx_aborted(void) { return __atomic_load_n(&g_page->abort, __ATOMIC_SEQ_CST); }

/* One more turn of a wait for `what`; -1 (reported) when it is over. */
static int wait_turn(struct hx_wait *w, const char *kind, const char *what, double timeout_s) {
  if (hx_aborted()) {
    hx_fail("gave up waiting for %s '%s': another process of the case ended badly", kind, what);
    return -1;
  }
  if (hx_wait_over(w)) {
    hx_fail("timed out after %.1f s waiting for %s '%s' (the peer is stuck or gone)", S(timeout_s), kind, what);
    return -1;
  }
  w->spins = w->spins < 64 ? w->spins : 63; /* stay responsive: never more than a short sleep */
  hx_backoff(w);
  return 0;
}

void hx_flag_set(const char *name, int value) { __atomic_store_n(&entry_of(name)->value, value, __ATOMIC_SEQ_CST); }
int hx_flag(const char *name) {
  const struct entry *e = find_entry(name);
  return e ? __atomic_load_n(&e->value, __ATOMIC_SEQ_CST) : 0;
}

int hx_flag_wait(const char *name, int value, double timeout_s) {
  struct entry *e = entry_of(name);
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  while (__atomic_load_n(&e->value, __ATOMIC_SEQ_CST) < value)
    if (wait_turn(&w, "flag", name, timeout_s)) return -1;
  return 0;
}

static void entry_write(struct entry *e, const void *data, size_t len) {
  if (len > ENTRY_DATA) {
    fprintf(stderr, "harness: %zu bytes for '%s' (at most %d)\n", len, e->name, ENTRY_DATA);
    abort();
  }
  memcpy(e->data, data, len);
  e->len = len;
  __atomic_store_n(&e->full, 1, __ATOMIC_RELEASE);
}

static int entry_read(struct entry *e, void *data, size_t len, int take, double timeout_s, const char *kind) {
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  while (!__atomic_load_n(&e->full, __ATOMIC_ACQUIRE))
    if (wait_turn(&w, kind, e->name, timeout_s)) return -1;
  if (e->len != len) {
    hx_fail("'%s' holds %zu bytes, the reader expected %zu", e->name, e->len, len);
    return -1;
  }
  memcpy(data, e->data, len);
  if (take) __atomic_store_n(&e->full, 0, __ATOMIC_RELEASE);
  return 0;
}

int hx_publish(const char *name, const void *data, size_t len) {
  entry_write(entry_of(name), data, len);
  return 0;
}

int hx_lookup(const char *name, void *data, size_t len, double timeout_s) {
  return entry_read(entry_of(name), data, len, 0, timeout_s, "value");
}

int hx_put(const char *name, const void *data, size_t len) {
  struct entry *e = entry_of(name);
  struct hx_wait w;
  hx_wait_begin(&w, 20.0);
  while (__atomic_load_n(&e->full, __ATOMIC_ACQUIRE))
    if (wait_turn(&w, "the peer to take", name, 20.0)) return -1;
  entry_write(e, data, len);
  return 0;
}

int hx_get(const char *name, void *data, size_t len) { return entry_read(entry_of(name), data, len, 1, 20.0, "message"); }

/* Each process counts its own rounds of a barrier name. */
struct round {
  char name[ENTRY_NAME];
  int n;
};
static struct round g_rounds[64];

static int next_round(const char *name) {
  for (int i = 0; i < 64; i++) {
    if (!g_rounds[i].name[0]) snprintf(g_rounds[i].name, sizeof g_rounds[i].name, "%s", name);
    if (!strncmp(g_rounds[i].name, name, ENTRY_NAME - 1)) return ++g_rounds[i].n;
  }
  fprintf(stderr, "harness: more than 64 barrier names in one process\n");
  abort();
}

int hx_barrier(const char *name, int n) {
  char key[ENTRY_NAME];
  snprintf(key, sizeof key, "barrier %.*s", ENTRY_NAME - 9, name);
  struct entry *e = entry_of(key);
  int round = next_round(key);
  __atomic_add_fetch(&e->count, 1, __ATOMIC_SEQ_CST);
  struct hx_wait w;
  hx_wait_begin(&w, 20.0);
  while (__atomic_load_n(&e->count, __ATOMIC_SEQ_CST) < n * round)
    if (wait_turn(&w, "barrier", name, 20.0)) return -1;
  return 0;
}

/* ---- processes ------------------------------------------------------- */
static void describe_status(int status, char *buf, size_t len) {
  if (WIFSIGNALED(status))
    snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
             WCOREDUMP(status) ? ", core dumped" : "");
  else if (WIFEXITED(status))
    snprintf(buf, len, "exit status %d%s", WEXITSTATUS(status),
             WEXITSTATUS(status) == 66   ? " (ThreadSanitizer's exit code after a report: see stderr)"
             : WEXITSTATUS(status) == 23 ? " (LeakSanitizer's exit code: see stderr)"
                                         : "");
  else
    snprintf(buf, len, "status 0x%x", status);
}

/* Every breadcrumb of a process, one line each. */
static void steps_of(int role, char *out, size_t cap) {
  const struct role_page *r = &g_page->role[role];
  size_t len = 0;
  out[0] = 0;
  for (int k = 0; k < HX_SLOTS; k++) {
    if (!r->step[k][0]) continue;
    char st[STEP_LEN], call[CALL_LEN], who[16];
    memcpy(st, r->step[k], STEP_LEN);
    st[STEP_LEN - 1] = 0;
    memcpy(call, r->in_call[k], CALL_LEN);
    call[CALL_LEN - 1] = 0;
    snprintf(who, sizeof who, k ? "thread %d" : "main", k);
    int n = call[0] ? snprintf(out + len, cap - len, "\n      %s: %s; inside the plugin's %s(), which has not returned",
                               who, st, call)
                    : snprintf(out + len, cap - len, "\n      %s: %s", who, st);
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
}

pid_t hx_spawn(int role, void (*fn)(void *), void *arg) {
  fflush(stdout);
  fflush(stderr);
  pid_t p = fork();
  if (p < 0) {
    hx_fail("fork: %s", strerror(errno));
    return -1;
  }
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    g_role = role;
    t_slot = 0;
    memset(g_rounds, 0, sizeof g_rounds);
    g_page->role[role].pid = getpid();
    signal(SIGPIPE, SIG_DFL); /* a plugin that lets SIGPIPE through must show it */
    hx_step("starting");
    fn(arg);
    hx_prof_verdict(); /* the plugin's profiler events, when it was loaded with the recorder */
    g_page->role[role].finished = 1;
    hx_step("exiting (atexit handlers, plugin destructors)");
    exit(g_page->role[role].nfail ? 1 : 0);
  }
  g_page->role[role].pid = p;
  return p;
}

pid_t hx_pid(int role) { return g_page->role[role].pid; }

/* Judge a worker that ended with status st; 0 when it ended well. */
static int judge_end(int role, int st) {
  const struct role_page *r = &g_page->role[role];
  int verdict_exit = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || (WEXITSTATUS(st) == 1 && r->nfail));
  int early_exit = WIFEXITED(st) && WEXITSTATUS(st) == 0 && !r->finished;
  if (verdict_exit && !early_exit) return r->nfail ? -1 : 0;
  char d[160], at[2048];
  describe_status(st, d, sizeof d);
  steps_of(role, at, sizeof at);
  if (early_exit)
    hx_fail("[%s] exited with status 0 before the case finished (something called exit()); it was at:%s",
            hx_role_name(role), at);
  else
    hx_fail("[%s] ended abnormally (%s, no verdict: a crash or a sanitizer report, see stderr); it was at:%s",
            hx_role_name(role), d, at);
  return -1;
}

static void kill_worker(int role, const char *why) {
  pid_t pid = g_page->role[role].pid;
  char at[2048];
  steps_of(role, at, sizeof at);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  g_page->role[role].pid = 0;
  if (why) hx_fail("[%s] %s, killed; it was at:%s", hx_role_name(role), why, at);
}

int hx_reap(int role, double deadline, int victim) {
  pid_t pid = g_page->role[role].pid;
  if (pid <= 0) return -1;
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return -1;
    if (now_s() > deadline) {
      kill_worker(role, victim ? NULL : "still running at its deadline");
      return -1;
    }
    sleep_s(0.002);
  }
  g_page->role[role].pid = 0;
  if (victim) return 0;
  if (judge_end(role, st) == 0) return 0;
  __atomic_store_n(&g_page->abort, 1, __ATOMIC_SEQ_CST);
  return -1;
}

void hx_reap_workers(double deadline) {
  for (;;) {
    int left = 0;
    for (int r = 1; r < HX_MAX_ROLES; r++) {
      pid_t pid = g_page->role[r].pid;
      if (pid <= 0) continue;
      int st;
      if (waitpid(pid, &st, WNOHANG) != pid) {
        left++;
        continue;
      }
      g_page->role[r].pid = 0;
      if (judge_end(r, st) != 0) {
        __atomic_store_n(&g_page->abort, 1, __ATOMIC_SEQ_CST);
        if (deadline > now_s() + GRACE_S) deadline = now_s() + GRACE_S;
      }
    }
    if (!left) return;
    if (now_s() > deadline) {
      for (int r = 1; r < HX_MAX_ROLES; r++)
        if (g_page->role[r].pid > 0)
          kill_worker(r, hx_aborted() ? "still running 3 s after a peer failed" : "still running at its deadline");
      return;
    }
    sleep_s(0.002);
  }
}

void hx_kill_workers(void) {
  for (int r = 1; r < HX_MAX_ROLES; r++)
    if (g_page->role[r].pid > 0) kill_worker(r, NULL);
}

static void run_work(void *arg) {
  (void)arg;
  g_case->work();
}

void hx_lead_workers(void) {
  for (int r = 1; r < HX_MAX_ROLES; r++)
    if (g_case->roles[r] && hx_spawn(r, run_work, NULL) < 0) return;
  hx_reap_workers(now_s() + 3600); /* the harness stops the group at the case deadline */
}

/* ---- running a case -------------------------------------------------- */
static void print_text(int role, int verdict) {
  const struct role_page *r = &g_page->role[role];
  size_t len = r->len < TEXT_CAP ? r->len : TEXT_CAP, pos = 0;
  while (pos < len) {
    const char *nl = memchr(r->text + pos, '\n', len - pos);
    size_t l = nl ? (size_t)(nl - (r->text + pos)) : len - pos;
    int is_note = l >= 5 && !strncmp(r->text + pos, "note:", 5);
    if (!is_note || hx_verbose || verdict == 1) printf("  [%s] %.*s\n", hx_role_name(role), (int)l, r->text + pos);
    pos += l + 1;
  }
}

static void apply_env(const char *const *env) {
  for (int i = 0; env && env[i]; i++) {
    char name[128];
    const char *eq = strchr(env[i], '=');
    if (!eq || (size_t)(eq - env[i]) >= sizeof name) continue;
    int only_unset = eq > env[i] && eq[-1] == '?';
    size_t nl = (size_t)(eq - env[i]) - (only_unset ? 1 : 0);
    memcpy(name, env[i], nl);
    name[nl] = 0;
    if (!only_unset || !getenv(name)) setenv(name, eq + 1, 1);
  }
}

/* 0 pass, 1 fail, 2 skip. */
int hx_run_case(const struct hx_case *c) {
  memset(g_page, 0, sizeof *g_page);
  g_case = c;
  g_role = 0;
  fflush(stdout);
  fflush(stderr);
  double t0 = now_s();
  pid_t leader = fork();
  if (leader < 0) {
    printf("FAIL: %s (fork: %s)\n", c->name, strerror(errno));
    return 1;
  }
  if (leader == 0) {
    setpgid(0, 0);
    g_page->role[0].pid = getpid();
    apply_env(c->env);
    hx_step("leading");
    if (c->lead)
      c->lead();
    else
      hx_lead_workers();
    hx_kill_workers();
    g_page->role[0].finished = 1;
    _exit(0);
  }
  setpgid(leader, leader);
  int st = 0, timed_out = 0;
  double deadline = t0 + S(c->timeout_s);
  for (;;) {
    if (waitpid(leader, &st, WNOHANG) == leader) break;
    if (now_s() > deadline) {
      timed_out = 1;
      kill(-leader, SIGKILL);
      waitpid(leader, &st, 0);
      break;
    }
    sleep_s(0.005);
  }
  kill(-leader, SIGKILL); /* anything of the group still alive */
  if (c->cleanup) c->cleanup(leader);
  double dt = now_s() - t0;
  int nf = 0, ns = 0;
  for (int r = 0; r < HX_MAX_ROLES; r++) {
    nf += g_page->role[r].nfail;
    ns += g_page->role[r].nskip;
  }
  int leader_lost = !timed_out && !g_page->role[0].finished;
  int verdict = timed_out || nf || leader_lost ? 1 : ns ? 2 : 0;
  printf("%s: %s (%.2f s)%s%s\n", verdict == 1 ? "FAIL" : verdict == 2 ? "SKIP" : "PASS", c->name, dt,
         g_page->summary[0] ? ": " : "", g_page->summary);
  if (timed_out) {
    printf("  TIMEOUT: still running after %.0f s, killed; the processes were at:\n", S(c->timeout_s));
    for (int r = 0; r < HX_MAX_ROLES; r++) {
      char at[2048];
      steps_of(r, at, sizeof at);
      if (at[0]) printf("    [%s]%s\n", hx_role_name(r), at);
    }
  } else if (leader_lost) {
    char d[160], at[2048];
    describe_status(st, d, sizeof d);
    steps_of(0, at, sizeof at);
    printf("  the leader ended abnormally (%s); it was at:%s\n", d, at);
  }
  for (int r = 0; r < HX_MAX_ROLES; r++) print_text(r, verdict);
  fflush(stdout);
  return verdict;
}

/* ---- main ------------------------------------------------------------ */
#define MAX_CASES 128

static void usage(FILE *f, const char *argv0, const struct hx_program *prog) {
  fprintf(f,
          "usage: %s [-v] [--list] [--case NAME[,NAME...]]... [--abi N] [PLUGIN.so]\n"
          "  PLUGIN.so  default: $COLLX_PLUGIN, else ./.libs/libnccl-net-collx.so;\n"
          "             a name without a slash is looked up as dlopen does\n"
          "  --list     print the cases and exit\n"
          "  --case     run only the named case(s)\n"
          "  --abi N    drive the plugin through its ncclNet_vN table (default %d)\n"
          "  -v         verbose: plugin INFO lines, notes of passing cases\n"
          "env: %s\n",
          argv0, HX_NET_DEFAULT_VERSION, prog->env_help ? prog->env_help : "COLLX_PLUGIN");
}

static int collect(const struct hx_program *prog, const struct hx_case **all) {
  int n = 0;
  for (int g = 0; prog->groups[g]; g++)
    for (int k = 0; k < prog->group_sizes[g] && n < MAX_CASES; k++) all[n++] = &prog->groups[g][k];
  return n;
}

static int has_alias(const struct hx_case *c, const char *name) {
  size_t l = strlen(name);
  for (const char *p = c->aliases; p && *p; p += strcspn(p, ","), p += *p == ',')
    if (!strncmp(p, name, l) && (p[l] == ',' || !p[l])) return 1;
  return 0;
}

static int select_cases(const char *list, const struct hx_case **all, int n, int *sel, const char *argv0) {
  char *dup = strdup(list), *save = NULL;
  int rc = 0;
  for (char *tok = strtok_r(dup, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int k = 0; k < n; k++)
      if (!strcmp(tok, all[k]->name) || has_alias(all[k], tok)) sel[k] = found = 1;
    if (!found) {
      fprintf(stderr, "%s: no case named '%s' (see --list)\n", argv0, tok);
      rc = -1;
    }
  }
  free(dup);
  return rc;
}

static int parse_abi(const char *v, const char *argv0) {
  int known[16], nk = hx_net_versions(known, 16);
  char *end;
  long a = strtol(v, &end, 10);
  for (int i = 0; i < nk && i < 16; i++)
    if (!*end && a == known[i]) return (int)a;
  fprintf(stderr, "%s: --abi %s: the harness drives versions", argv0, v);
  for (int i = 0; i < nk && i < 16; i++) fprintf(stderr, " %d", known[i]);
  fprintf(stderr, "\n");
  return -1;
}

int hx_prepare(const char *argv0, const struct hx_program *prog) {
  if (!hx_plugin_path) hx_plugin_path = getenv("COLLX_PLUGIN");
  if (!hx_plugin_path || !*hx_plugin_path) hx_plugin_path = "./.libs/libnccl-net-collx.so";
  const char *sc = prog->scale_env ? getenv(prog->scale_env) : NULL;
  if (sc && strtod(sc, NULL) > 0) hx_scale = strtod(sc, NULL);
  const char *sd = prog->seed_env ? getenv(prog->seed_env) : NULL;
  if (sd && *sd) hx_seed = strtoull(sd, NULL, 0);
  hx_call_limit_s = prog->call_limit_s;
  /* A bare name (libnccl-net-collx.so) is left to dlopen's search, as NCCL
   * leaves it: the loader path, its cache, the system directories. */
  if (strchr(hx_plugin_path, '/') && access(hx_plugin_path, R_OK) != 0) {
    fprintf(stderr, "%s: plugin %s: %s (build it first, or pass its path)\n", argv0, hx_plugin_path,
            strerror(errno));
    return -1;
  }
  apply_env(prog->env);
  signal(SIGPIPE, SIG_DFL);
  g_page = mmap(NULL, sizeof *g_page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_page == MAP_FAILED) {
    perror("mmap");
    return -1;
  }
  return 0;
}

int hx_main(int argc, char **argv, const struct hx_program *prog) {
  const struct hx_case *all[MAX_CASES];
  int n = collect(prog, all), sel[MAX_CASES] = {0}, nsel = 0, list = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--list")) {
      list = 1;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      hx_verbose = 1;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout, argv[0], prog);
      return 0;
    } else if (!strcmp(a, "--case") || !strncmp(a, "--case=", 7) || !strcmp(a, "--abi")) {
      const char *v = !strncmp(a, "--case=", 7) ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
      if (!v) {
        usage(stderr, argv[0], prog);
        return 99;
      }
      if (!strcmp(a, "--abi")) {
        if ((hx_abi = parse_abi(v, argv[0])) < 0) return 99;
      } else {
        if (select_cases(v, all, n, sel, argv[0])) return 99;
        nsel = 1;
      }
    } else if (a[0] == '-') {
      usage(stderr, argv[0], prog);
      return 99;
    } else {
      hx_plugin_path = a;
    }
  }
  if (list) {
    for (int k = 0; k < n; k++)
      printf("%-22s %s%s%s%s\n", all[k]->name, all[k]->summary, all[k]->aliases ? " (also: " : "",
             all[k]->aliases ? all[k]->aliases : "", all[k]->aliases ? ")" : "");
    return 0;
  }
  if (hx_prepare(argv[0], prog)) {
    printf("0 passed, 1 failed, 0 skipped\n");
    return 99;
  }
  printf("%s: plugin %s (ncclNet_v%d), seed 0x%" PRIx64 ", timeout scale %g\n", prog->title, hx_plugin_path, hx_abi,
         hx_seed, hx_scale);
  int np = 0, nf = 0, ns = 0;
  for (int k = 0; k < n; k++) {
    if (nsel && !sel[k]) continue;
    int v = hx_run_case(all[k]);
    np += v == 0;
    nf += v == 1;
    ns += v == 2;
  }
  printf("%d passed, %d failed, %d skipped\n", np, nf, ns);
  if (nf) return 1;
  return np == 0 && ns > 0 ? 77 : 0;
}
