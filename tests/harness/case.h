/*
 * Cases and the processes that run them.
 *
 * Every case runs in its own forked process group: a leader (role 0) and
 * up to three workers it forks.  The harness kills the whole group at the
 * case deadline, so a hang is a FAIL with the step each process was at,
 * never a stuck suite.  Verdicts, breadcrumbs and everything the processes
 * of a case tell each other live in one shared page, which survives a
 * crash: named flags, mailboxes and barriers (the bootstrap channel), and a
 * zeroed area a case group lays out for its own results.
 *
 * A case that names only worker roles and a `work` function gets the
 * default leader: every worker runs `work`, and one that ends badly gives
 * the others 3 s before they are stopped.
 */
#ifndef COLLX_HARNESS_CASE_H
#define COLLX_HARNESS_CASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/proc.h"

#define HX_MAX_ROLES 4 /* role 0 is the leader */
#define HX_SLOTS 16    /* breadcrumbs per process, one per thread */
#define HX_SHARED_CAP (128u << 10)

struct hx_case {
  const char *name;
  const char *summary;
  double timeout_s;
  const char *roles[HX_MAX_ROLES]; /* roles[0]: the leader; NULL: no such worker */
  void (*lead)(void);              /* NULL: the default leader, which runs `work` in every worker */
  void (*work)(void);
  const char *env[4]; /* "NAME=VALUE" for this case's processes */
  const char *aliases; /* other names --case accepts, comma-separated (names of cases merged into this one) */
  void (*cleanup)(pid_t leader); /* after the case, even a killed one: what it may have left outside */
};

struct hx_program {
  const char *title;
  const struct hx_case *const *groups; /* NULL-terminated list of case tables */
  const int *group_sizes;
  const char *scale_env;     /* multiplies every deadline */
  const char *seed_env;      /* seeds the random sizes; NULL: fixed seed */
  double call_limit_s;       /* a plugin call longer than this fails the case; 0: measured only */
  const char *const *env;    /* "NAME=VALUE" (always) or "NAME?=VALUE" (when unset), NULL-terminated */
  const char *env_help;      /* the environment line of --help */
};

/* Parses the options, runs the selected cases, prints "N passed, N failed,
 * N skipped"; the exit status of the program. */
int hx_main(int argc, char **argv, const struct hx_program *prog);

/* For a program with its own main: settings, environment and the shared
 * page (hx_main does this); 0, or -1 (said on stderr). */
int hx_prepare(const char *argv0, const struct hx_program *prog);
/* Runs one case and prints its verdict; 0 pass, 1 fail, 2 skip.  Its
 * shared area (hx_shared) stays readable until the next case. */
int hx_run_case(const struct hx_case *c);

extern double hx_scale;
extern int hx_verbose;
extern const char *hx_plugin_path;
extern int hx_abi;
extern uint64_t hx_seed;
extern double hx_call_limit_s;
static inline double S(double s) { return s * hx_scale; }

/* ---- this process ---------------------------------------------------- */
int hx_role(void);
const char *hx_role_name(int role);
const struct hx_case *hx_current(void);
void hx_set_slot(int slot); /* this thread's breadcrumb slot; none outside 0..HX_SLOTS-1 */
int hx_slot(void);

__attribute__((format(printf, 1, 2))) void hx_fail(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void hx_skip(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void hx_note(const char *fmt, ...);
/* Appended to the case's PASS/FAIL line. */
__attribute__((format(printf, 1, 2))) void hx_summary(const char *fmt, ...);
/* Where this thread is, shown if the case has to be killed. */
__attribute__((format(printf, 1, 2))) void hx_step(const char *fmt, ...);
void hx_in_call(const char *fn); /* "" when back */
int hx_failed(void);     /* failures of this process */
int hx_failed_all(void); /* of every process of the case */
void *hx_shared(void);   /* HX_SHARED_CAP zeroed bytes, the same in every process of the case */

/* ---- deadlines ------------------------------------------------------- */
struct hx_wait {
  double end;
  unsigned spins;
};
void hx_wait_begin(struct hx_wait *w, double timeout_s); /* timeout_s is scaled */
int hx_wait_over(const struct hx_wait *w);
void hx_backoff(struct hx_wait *w); /* yield, then short sleeps */
void hx_wait_reset(struct hx_wait *w); /* progress: back to yielding */

/* ---- the bootstrap channel: named flags, values, mailboxes, barriers -- */
void hx_flag_set(const char *name, int value);
int hx_flag(const char *name);
/* Until flag >= value; 0, or -1 (reported) at the deadline or when another
 * process of the case ended badly. */
int hx_flag_wait(const char *name, int value, double timeout_s);
/* A value any process may read, any number of times. */
int hx_publish(const char *name, const void *data, size_t len);
int hx_lookup(const char *name, void *data, size_t len, double timeout_s);
/* One message: put waits until the previous one was taken. */
int hx_put(const char *name, const void *data, size_t len);
int hx_get(const char *name, void *data, size_t len);
/* n processes meet; a name may be used again (each use is one more round). */
int hx_barrier(const char *name, int n);
int hx_aborted(void);

/* ---- processes (the leader) ----------------------------------------- */
pid_t hx_spawn(int role, void (*fn)(void *), void *arg);
pid_t hx_pid(int role);
/* Wait for one worker until the absolute deadline, then kill it.  A victim
 * (killed on purpose) is not judged.  0 when it ended well. */
int hx_reap(int role, double deadline, int victim);
/* Every live worker; once one ended badly the others get 3 s. */
void hx_reap_workers(double deadline);
void hx_kill_workers(void);
void hx_lead_workers(void);

#endif
