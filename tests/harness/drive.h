/*
 * A case process driving the plugin: loading it, the logger it is handed,
 * every call timed (NET), connections, and the "post until accepted" and
 * "test until done" steps, each with a deadline and a verdict that says
 * what did not happen.
 */
#ifndef COLLX_HARNESS_DRIVE_H
#define COLLX_HARNESS_DRIVE_H

#include "case.h"
#include "net.h"

#define HX_SIZES_SLOTS 9   /* sizes[] handed to test: the used ones, then sentinels */
#define HX_SIZE_SENTINEL (-7777)

extern struct hx_net hx_plugin;
extern int hx_ndev, hx_dev;
extern struct hx_props hx_devprops; /* of hx_dev */
extern double hx_max_call_s;        /* the slowest plugin call of this process, by the clock */
extern double hx_max_held_s;        /* the most time any call held its caller (hx_call_held) */

/* dlopen the plugin (hx_plugin_path, ncclNet_v<hx_abi>), init with the
 * harness logger, devices, getProperties(0).  0, or -1 (reported). */
int hx_load(void);
/* dlclose; 0, or -1 (reported). */
int hx_unload(void);

/* What one call cost its thread: the clock, the processor, and how often
 * it gave the processor up to wait (a voluntary context switch). */
struct hx_call_cost {
  double wall_s, cpu_s;
  long waits;
};
struct hx_call_cost hx_call_begin(void);
struct hx_call_cost hx_call_end(struct hx_call_cost begun);
/* The time a call held its caller that the plugin answers for: all of it
 * if it waited for something, else only its processor time.  A call that
 * never waited and was long by the clock was preempted, or its virtual
 * machine was, which no plugin can prevent. */
double hx_call_held(const struct hx_call_cost *c);
/* The last call's cost on this thread. */
extern __thread struct hx_call_cost hx_last_call;

/* Time every call: one that held its caller longer than the program's
 * limit fails the case. */
void hx_call_done(const char *fn, struct hx_call_cost begun);
#define NET(fn, ...)                                              \
  ({                                                              \
    hx_in_call(#fn);                                              \
    struct hx_call_cost net_c0_ = hx_call_begin();                \
    ncclResult_t net_r_ = hx_net_##fn(&hx_plugin, __VA_ARGS__);   \
    hx_call_done(#fn, net_c0_);                                   \
    net_r_;                                                       \
  })

/* ---- the log ---------------------------------------------------------- */
/* WARNs since a mark, joined by sep ('\n' or '|'), trailing newlines cut. */
size_t hx_warn_mark(void);
void hx_warn_since(size_t mark, char *out, size_t cap, char sep);
/* The last "send connection ... closed: ..." statistics line, or "". */
void hx_last_closed(char *out, size_t cap);

/* ---- connections ------------------------------------------------------ */
/* The receiving side listens and publishes its handle under a name; the
 * sending side looks it up and connects. */
struct hx_conn {
  int sender;
  void *lcomm, *scomm, *rcomm;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  int up, calls;
  double max_call_s;
};
static inline void *hx_conn_comm(const struct hx_conn *k) { return k->sender ? k->scomm : k->rcomm; }

/* listen; call_limit_s > 0 fails a slower call.  Publishes the handle
 * under `name` unless name is NULL. */
int hx_conn_listen(struct hx_conn *k, const char *name, double call_limit_s);
int hx_conn_handle(struct hx_conn *k, const char *name, double timeout_s);
/* One connect or accept call: 1 up, 0 not yet, -1 (reported). */
int hx_conn_poll(struct hx_conn *k, double call_limit_s);
/* Calls until up; -1 (reported) at the deadline. */
int hx_conn_finish(struct hx_conn *k, double timeout_s, double call_limit_s);
int hx_conn_establish(struct hx_conn *k, int sender, const char *name, double timeout_s);
/* Every comm of k closed; -1 when a close failed (reported). */
int hx_conn_close(struct hx_conn *k);

/* ---- single requests -------------------------------------------------- */
/* isend / irecv again while it answers "not ready" (NULL); the request, or
 * NULL (reported) on an error or at the deadline. */
void *hx_post_send(void *scomm, void *data, int size, int tag, void *mh, double timeout_s, const char *what);
void *hx_post_recv(void *rcomm, int n, void **data, int *sizes, int *tags, void **mh, double timeout_s,
                   const char *what);
/* test until done; sizes[n..] must stay untouched.  0, or -1 (reported). */
int hx_test_until(void *req, int n, int *sizes_out, double timeout_s, const char *what);
/* hx_test_until of a 1-entry request whose size must be `expect`. */
int hx_complete(void *req, int expect, double timeout_s, const char *what);
/* One test call: 1 done (size checked), 0 pending, -1 (reported). */
int hx_test_once(void *req, int expect, const char *what);
/* One registered buffer on a comm; NULL (reported) on failure. */
void *hx_reg_buffer(void *comm, size_t len, void **mh);

/* Thread names of this process ("tid(comm)[main], ..."). */
void hx_task_names(char *out, size_t cap);
/* Open descriptors of this process ("fd->target ..."). */
void hx_fd_names(char *out, size_t cap);

#endif
