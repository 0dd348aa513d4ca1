/* collx-perf: Process-wide state, errors and the watchdog. */
#include "perf.h"

#include <sys/resource.h>

struct perf_options o = {.port = DEFAULT_PORT, .depth = 8, .timeout = 60.0, .slice = 512 << 10};

/* ========================================================================
 * Process-wide state, errors, watchdog
 * ======================================================================== */

const char *g_role = "";        /* "", "server", "rank 3" */
struct hx_net net;
char g_plugin_path[PATH_MAX];
pid_t g_children[MAX_RANKS];
int g_nchildren;
static atomic_uint_fast64_t g_beat;    /* bumped by every wait loop */
char g_phase[160] = "start-up"; /* what the process is doing */

void beat(void) { atomic_fetch_add_explicit(&g_beat, 1, memory_order_relaxed); }

uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The longest plugin call of each kind.  A call that blocks holds up
 * NCCL's proxy thread, which serves every comm of the rank, so every
 * client and server run reports them (calls_report). */
#define CALL_KINDS 16
static struct {
  const char *name;
  uint64_t max_ns;
} g_calls[CALL_KINDS];
static uint64_t g_call_count, g_calls_over_1ms, g_calls_over_10ms;
/* --call-waits: calls over 10 ms in which the thread gave up the processor
 * (a lock, a poll, a sleep: the plugin made it wait), and those in which
 * it was only preempted (the machine was busy). */
static uint64_t g_over_10ms_waited, g_over_10ms_preempted;
/* ...and the most processor time the thread spent in any one of them: a
 * call over 10 ms that switched neither way but used far less than its
 * length lost the processor to the host (a virtual machine's steal). */
static uint64_t g_over_10ms_cpu_max_ns;
/* The same for the closes, which NCCL's proxy thread also makes. */
static uint64_t g_closes_over_10ms, g_close_waited, g_close_preempted;

/* isend, irecv, test: the calls of NCCL's progress loop, counted by
 * duration (init's topology discovery and a connect are not). */
static int progress_call(const char *name) {
  return !strcmp(name, "isend") || !strcmp(name, "irecv") || !strcmp(name, "test");
}

static int close_call(const char *name) { return !strncmp(name, "close", 5); }

static void thread_switches(long *voluntary, long *involuntary) {
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0) memset(&ru, 0, sizeof ru);
  *voluntary = ru.ru_nvcsw;
  *involuntary = ru.ru_nivcsw;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void call_begin(struct call_mark *m) {
  if (o.call_waits) {
    thread_switches(&m->nvcsw, &m->nivcsw);
    m->cpu0 = thread_cpu_ns();
  }
  m->t0 = now_ns();
}

/* A call over 10 ms: did the thread give up the processor (1), was it
 * only preempted (2), or neither (0); *cpu: its processor time. */
static int call_wait_kind(const struct call_mark *m, uint64_t *cpu) {
  long nv, niv;
  thread_switches(&nv, &niv);
  *cpu = thread_cpu_ns() - m->cpu0;
  return nv > m->nvcsw ? 1 : niv > m->nivcsw ? 2 : 0;
}

/* Called on the thread that made the call, right after it. */
void call_timed(const char *name, const struct call_mark *m) {
  uint64_t ns = now_ns() - m->t0, cpu = 0;
  if (progress_call(name)) {
    g_call_count++;
    g_calls_over_1ms += ns > 1000000;
    g_calls_over_10ms += ns > 10000000;
    if (o.call_waits && ns > 10000000) {
      int kind = call_wait_kind(m, &cpu);
      g_over_10ms_waited += kind == 1;
      g_over_10ms_preempted += kind == 2;
      if (cpu > g_over_10ms_cpu_max_ns) g_over_10ms_cpu_max_ns = cpu;
    }
  } else if (close_call(name) && o.call_waits && ns > 10000000) {
    int kind = call_wait_kind(m, &cpu);
    g_closes_over_10ms++;
    g_close_waited += kind == 1;
    g_close_preempted += kind == 2;
  }
  for (int i = 0; i < CALL_KINDS; i++) {
    if (!g_calls[i].name) g_calls[i].name = name;
    if (strcmp(g_calls[i].name, name) != 0) continue;
    if (ns > g_calls[i].max_ns) g_calls[i].max_ns = ns;
    return;
  }
}

void calls_report(void) {
  char line[1024], waits[192] = "", closes[128] = "";
  int at = snprintf(line, sizeof line, "collx-perf: longest plugin call:");
  for (int i = 0; i < CALL_KINDS && g_calls[i].name && at < (int)sizeof line; i++)
    at += snprintf(line + at, sizeof line - (size_t)at, "%s %s %.3f ms", i ? "," : "", g_calls[i].name,
                   (double)g_calls[i].max_ns / 1e6);
  if (o.call_waits)
    snprintf(waits, sizeof waits, " (%llu waited in the plugin, %llu preempted only; at most %.3f ms on the processor in one)",
             (unsigned long long)g_over_10ms_waited, (unsigned long long)g_over_10ms_preempted,
             (double)g_over_10ms_cpu_max_ns / 1e6);
  if (o.call_waits)
    snprintf(closes, sizeof closes, "; closes over 10 ms: %llu (%llu waited in the plugin, %llu preempted only)",
             (unsigned long long)g_closes_over_10ms, (unsigned long long)g_close_waited,
             (unsigned long long)g_close_preempted);
  printf("%s; isend/irecv/test: %llu calls, %llu over 1 ms, %llu over 10 ms%s%s\n", line,
         (unsigned long long)g_call_count, (unsigned long long)g_calls_over_1ms,
         (unsigned long long)g_calls_over_10ms, waits, closes);
  fflush(stdout);
}

uint64_t timeout_ns(void) {
  return o.timeout > 0 ? (uint64_t)(o.timeout * NS) : UINT64_MAX;
}

uint64_t deadline_in(void) {
  return o.timeout > 0 ? now_ns() + timeout_ns() : UINT64_MAX;
}

void set_phase(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_phase, sizeof g_phase, fmt, ap);
  va_end(ap);
}

static void kill_children(void) {
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) kill(g_children[i], SIGKILL);
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) {
      waitpid(g_children[i], NULL, 0);
      g_children[i] = 0;
    }
}

int role_prefix(char *buf, size_t len) {
  return snprintf(buf, len, "collx-perf%s%s%s", *g_role ? " [" : "", g_role, *g_role ? "]" : "");
}

/* "collx-perf [role]: <kind><message>" on stderr. */
static void say(const char *kind, const char *fmt, va_list ap) {
  char buf[1024];
  int n = role_prefix(buf, sizeof buf);
  n += snprintf(buf + n, sizeof buf - (size_t)n, ": %s", kind);
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  fflush(stdout);
  fprintf(stderr, "%s\n", buf);
}

void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say("error: ", fmt, ap);
  va_end(ap);
  fflush(stderr);
  kill_children();
  _exit(1);
}

void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say("", fmt, ap);
  va_end(ap);
}

void on_signal(int sig) {
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) kill(g_children[i], SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Catches a plugin call that never returns (the wait loops have their own
 * timeouts; this is for the calls themselves). */
static void *watchdog_main(void *arg) {
  (void)arg;
  uint64_t last = atomic_load(&g_beat), since = now_ns();
  for (;;) {
    sleep(1);
    uint64_t b = atomic_load(&g_beat), t = now_ns();
    if (b != last) {
      last = b;
      since = t;
    } else if (t - since > timeout_ns() + 10ull * 1000000000ull) {
      die("no sign of life for %.0f s while %s: a plugin call does not return", (t - since) / NS,
          g_phase);
    }
  }
  return NULL;
}

void start_watchdog(void) {
  if (o.timeout <= 0) return;
  pthread_t th;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &a, watchdog_main, NULL) != 0) die("cannot start the watchdog thread");
  pthread_attr_destroy(&a);
}

/* A child: dies with its parent, forgets the parent's children. */
void became_child(const char *role) {
  g_role = role;
  g_nchildren = 0;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}
