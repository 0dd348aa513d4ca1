/*
 * Shared by the liveness tests: each program is a list of cases, and each
 * case runs in its own forked process (its own collx_init, so that the
 * environment of the case, COLLX_PROGRESS included, takes effect), killed
 * at a deadline so that a hang is a FAIL, not a stuck `make check`.
 *
 *   prog [--case NAME] [--mode threads|caller]
 *
 * Runs every case (or one) in both progress modes (or one).  A case prints
 * what it measured; the program prints one PASS/FAIL/SKIP line per case and
 * mode, and exits 1 if any failed, 77 if all were skipped.
 */
#ifndef COLLX_TESTS_LIVENESS_LV_H
#define COLLX_TESTS_LIVENESS_LV_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "../common/proc.h"

#define LV_SKIP 77

struct lv_case {
  const char *name;
  int (*run)(void);  /* 0 pass, 1 fail, LV_SKIP skip; runs in a child */
  int limit_s;       /* killed after this */
  int both_modes;    /* 0: threads only (the mode does not change the path) */
};

/* ---- logging: WARNs are kept so that a case can check what was said ---- */

static char lv_warns[8192];
static size_t lv_warns_len;
static pthread_mutex_t lv_warns_lock = PTHREAD_MUTEX_INITIALIZER; /* the plugin's threads log too */

static void lv_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...) {
  (void)flags;
  (void)file;
  (void)line;
  if (level != NCCL_LOG_WARN && !getenv("LV_VERBOSE")) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[%d] %s %s\n", (int)getpid(), level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
  if (level == NCCL_LOG_WARN) {
    pthread_mutex_lock(&lv_warns_lock);
    size_t n = strlen(msg);
    if (lv_warns_len + n + 2 < sizeof lv_warns) {
      memcpy(lv_warns + lv_warns_len, msg, n);
      lv_warns_len += n;
      lv_warns[lv_warns_len++] = '\n';
      lv_warns[lv_warns_len] = 0;
    }
    pthread_mutex_unlock(&lv_warns_lock);
  }
}

static inline int lv_warned(const char *needle) {
  pthread_mutex_lock(&lv_warns_lock);
  int found = strstr(lv_warns, needle) != NULL;
  pthread_mutex_unlock(&lv_warns_lock);
  return found;
}

/* Every case prints through this: the program's output stays readable. */
static inline void lv_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void lv_say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("    ");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
}

#define LV_REQUIRE(cond, ...)       \
  do {                              \
    if (!(cond)) {                  \
      lv_say("failed: " __VA_ARGS__); \
      return 1;                     \
    }                               \
  } while (0)

static inline int lv_init(void) {
  setenv("COLLX_IFNAME", "lo", 0);
  if (collx_init(lv_logger) != ncclSuccess) return -1;
  return 0;
}

/* ---- connection setup --------------------------------------------------- */

/* Drive connect until a comm comes back, an error, or the deadline. */
static inline ncclResult_t lv_connect(void *handle, void **send, double limit_s) {
  double until = now_s() + limit_s;
  *send = NULL;
  while (now_s() < until) {
    ncclResult_t r = collx_connect(0, handle, send);
    if (r != ncclSuccess || *send) return r;
    sleep_s(0.0005);
  }
  return ncclInProgress;
}

static inline ncclResult_t lv_accept(void *listen, void **recv, double limit_s) {
  double until = now_s() + limit_s;
  *recv = NULL;
  while (now_s() < until) {
    ncclResult_t r = collx_accept(listen, recv);
    if (r != ncclSuccess || *recv) return r;
    sleep_s(0.0005);
  }
  return ncclInProgress;
}

/* Connect and accept in one process, stepping both, until both are up or
 * limit_s has passed: 0, or -1 on an error or at the deadline. */
static inline int lv_pair_in_process(void *listen, char *handle, void **send, void **recv, double limit_s) {
  double until = now_s() + limit_s;
  *send = *recv = NULL;
  while ((!*send || !*recv) && now_s() < until) {
    if (!*send && collx_connect(0, handle, send) != ncclSuccess) return -1;
    if (!*recv && collx_accept(listen, recv) != ncclSuccess) return -1;
  }
  return *send && *recv ? 0 : -1;
}

/* A pair of processes: this one (the parent) listens and returns a receive
 * comm; the child connects and runs `sender(send_comm, to_parent,
 * from_parent)` with two pipes for cues, then exits with its result.  The
 * parent gets the child's pid and its ends of the pipes. */
struct lv_pair {
  pid_t child;
  int to_child, from_child; /* parent's ends */
  void *listen, *recv;
};

static inline int lv_cue(int fd, char c) { return write(fd, &c, 1) == 1 ? 0 : -1; }
static inline int lv_wait_cue(int fd, char *c) { return read(fd, c, 1) == 1 ? 0 : -1; }

static inline int lv_pair_start(struct lv_pair *p, int (*sender)(void *send, int to_parent, int from_parent)) {
  memset(p, 0, sizeof *p);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  if (lv_init() != 0) return -1;
  if (collx_listen(0, handle, &p->listen) != ncclSuccess) return -1;
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return -1;
  fflush(stdout);
  p->child = fork();
  if (p->child < 0) return -1;
  if (p->child == 0) {
    close(down[1]);
    close(up[0]);
    void *send = NULL;
    if (lv_connect(handle, &send, 10) != ncclSuccess || !send) _exit(2);
    _exit(sender(send, up[1], down[0]));
  }
  close(down[0]);
  close(up[1]);
  p->to_child = down[1];
  p->from_child = up[0];
  if (lv_accept(p->listen, &p->recv, 10) != ncclSuccess || !p->recv) return -1;
  return 0;
}

/* Reap the child: its exit status, or -1 if it died by a signal. */
static inline int lv_pair_reap(struct lv_pair *p) {
  int st = 0;
  if (p->child <= 0) return 0;
  kill(p->child, SIGCONT);
  if (waitpid(p->child, &st, 0) != p->child) return -1;
  p->child = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Test a request until done, an error or the deadline.  Returns the result
 * (ncclInProgress when the deadline passed) and the seconds it took. */
static inline ncclResult_t lv_wait(void *req, double limit_s, double *took) {
  double t0 = now_s();
  int done = 0;
  ncclResult_t r = ncclSuccess;
  while (!done && now_s() - t0 < limit_s) {
    r = collx_test(req, &done, NULL);
    if (r != ncclSuccess) break;
    if (!done) sleep_s(0.0002);
  }
  if (took) *took = now_s() - t0;
  if (r == ncclSuccess && !done) return ncclInProgress;
  return r;
}

/* ---- the harness -------------------------------------------------------- */

static int lv_run_one(const struct lv_case *c, const char *mode) {
  fflush(stdout);
  double t0 = now_s();
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    setpgid(0, 0);
    setenv("COLLX_PROGRESS", mode, 1);
    _exit(c->run());
  }
  setpgid(pid, pid);
  int st = 0;
  int killed = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (now_s() - t0 > c->limit_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      killed = 1;
      break;
    }
    sleep_s(0.01);
  }
  kill(-pid, SIGKILL); /* leftovers of the case's process group */
  int rc = killed ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  const char *verdict = rc == 0 ? "PASS" : rc == LV_SKIP ? "SKIP" : "FAIL";
  printf("%s: %s [%s] (%.2f s%s)\n", verdict, c->name, mode, now_s() - t0,
         killed ? ", killed at the case deadline: hung" : "");
  fflush(stdout);
  return rc;
}

static int lv_main(int argc, char **argv, const struct lv_case *cases, int ncases) {
  const char *only = NULL, *only_mode = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--case")) only = argv[i + 1];
    if (!strcmp(argv[i], "--mode")) only_mode = argv[i + 1];
  }
  static const char *modes[] = {"threads", "caller"};
  int passed = 0, failed = 0, skipped = 0;
  for (int k = 0; k < ncases; k++) {
    if (only && strcmp(only, cases[k].name)) continue;
    for (int m = 0; m < (cases[k].both_modes ? 2 : 1); m++) {
      if (only_mode && strcmp(only_mode, modes[m])) continue;
      int rc = lv_run_one(&cases[k], modes[m]);
      if (rc == 0) passed++;
      else if (rc == LV_SKIP) skipped++;
      else failed++;
    }
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed) return 1;
  return passed == 0 && skipped > 0 ? LV_SKIP : 0;
}

#endif
