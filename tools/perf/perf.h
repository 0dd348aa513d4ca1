/*
 * collx-perf: bandwidth and latency of the collx plugin, a plain-TCP
 * baseline measured in the same process pair, and a no-GPU ring all-reduce
 * demo over N local processes.
 *
 * The tool links nothing of collx: it dlopens the plugin and drives it only
 * through the exported ncclNetPlugin_v8 table (loaded by the test harness's
 * tests/harness/net.c), the way NCCL's proxy does
 * (non-blocking listen/connect/accept, isend that may answer "not yet",
 * requests polled with test).  What it measures is therefore what NCCL would
 * see from the plugin, minus the GPU.
 *
 * Two-process mode follows ib_send_bw: a plain TCP socket (the bootstrap)
 * carries the 128-byte plugin handles, the client's test plan and the
 * barriers; every byte that is measured goes through the plugin (or, for the
 * baseline, through one plain TCP socket per direction).  The client drives
 * the test and the server executes what it is told, so only the client's
 * options matter.
 */
#ifndef COLLX_TOOLS_PERF_H
#define COLLX_TOOLS_PERF_H

#ifndef _GNU_SOURCE /* the tree's build force-includes config.h, which sets it */
#define _GNU_SOURCE 1
#endif
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collx/net_abi.h"
#include "../../tests/harness/net.h"

#ifdef PACKAGE_VERSION
#define PERF_VERSION PACKAGE_VERSION
#else
#define PERF_VERSION "(built outside the tree)"
#endif
#define PLUGIN_FILE "libnccl-net-collx.so"
#define DEFAULT_PORT 18515
#define MSG_TAG 0x7ca1
#define MAX_DEPTH NCCL_NET_MAX_REQUESTS
#define MAX_RANKS 64
#define MAX_SIZES 64
#define MAX_COMMS_LIST 16 /* --comms K,K,...: values */
#define MAX_PAIRS 4096     /* --comms: pairs in one process */
#define MAX_MSG_SIZE ((size_t)1 << 30) /* isend takes an int */
#define WIRE_MAGIC 0x636f6c6c78706631ull /* "collxpf1" */
#define WIRE_VERSION 1
#define NS 1000000000.0

enum { MODE_NONE, MODE_SERVER, MODE_CLIENT, MODE_SELF, MODE_RANKS, MODE_COMMS };
enum { TEST_BW = 0, TEST_LAT = 1 };
/* TR_TCP_SPLIT (latency only): the ping on one socket and the pong on the
 * other, the shape of a plugin's send and receive comms, so that each
 * message's acknowledgement travels alone instead of riding on the reply. */
enum { TR_PLUGIN = 0, TR_TCP = 1, TR_TCP_SPLIT = 2 };

/* ========================================================================
 * Options
 * ======================================================================== */

struct perf_options {
  int mode;
  const char *host;
  int port, port_set;
  int test;
  size_t min_size, max_size;
  int min_set, max_set;
  int depth;
  int bidir;
  uint64_t iters;  /* 0: time based */
  double seconds;  /* per size and transport; 0: default */
  int compare;     /* plain-TCP baseline after the plugin run */
  int dev;
  const char *plugin;
  double timeout;  /* 0: wait forever */
  int verbose;
  int nranks;
  int check;
  int in_order;    /* bw: test only the oldest request of each direction */
  int call_waits;  /* count context switches around each call (calls_report) */
  size_t slice;
  int version;
  /* --netns: the network namespace each rank enters (NULL: this one) */
  char *netns_list;
  const char *netns[MAX_RANKS];
  int nnetns;
  /* --comms K,K,...: pairs in one process, one run each */
  int comms[MAX_COMMS_LIST];
  int ncomms;
};
extern struct perf_options o;


/* ========================================================================
 * Shared by the sections (one file each)
 * ======================================================================== */

struct devinfo {
  char name[64];
  int speed;
};

enum { CMD_RUN = 1, CMD_PRINT = 2, CMD_END = 3 };

/* CMD_RUN: {cmd, transport, test, size, n, bidir} */
#define CMD_WORDS 6

struct hello {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  char dev[64];
  uint64_t speed_be;
};

struct peer {
  int is_client, quiet;
  int bfd;                /* bootstrap socket */
  const char *peer_name;  /* "server" / "client" */
  /* plugin side */
  void *lcomm, *scomm, *rcomm;
  void *smh, *rmh;
  char *sbuf, *rbuf;
  size_t slot;            /* bytes per buffer slot */
  int depth, nslots;
  char my_handle[NCCL_NET_HANDLE_MAXSIZE];
  char peer_handle[NCCL_NET_HANDLE_MAXSIZE]; /* stays put: connect() may keep state in it */
  struct devinfo mydev, peerdev;
  /* baseline: one socket per direction */
  int want_tcp;
  int tfd_out, tfd_in;
};

/* Idle bookkeeping shared by the polling loops: yield the CPU to the plugin's
 * threads, and give up after --timeout without progress. */
struct idle {
  unsigned n;
  uint64_t since;
};

extern const char *g_role;        /* "", "server", "rank 3" */
extern struct hx_net net; /* the plugin's table */
extern char g_plugin_path[PATH_MAX];
extern pid_t g_children[MAX_RANKS];
extern int g_nchildren;
extern char g_phase[160]; /* what the process is doing */
void beat(void);
uint64_t now_ns(void);
uint64_t timeout_ns(void);
uint64_t deadline_in(void);
void set_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int role_prefix(char *buf, size_t len);
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void on_signal(int sig);
void start_watchdog(void);
void became_child(const char *role);
const char *fmt_size(size_t b, char *buf, size_t len);
int parse_size(const char *s, size_t *out);
int parse_long(const char *s, long lo, long hi, long *out);
int parse_double(const char *s, double lo, double hi, double *out);
void *xalloc(size_t len);
int cmp_u64(const void *a, const void *b);
void load_plugin(void);
void force_loopback(const char *why, int quiet);
void plugin_start(int dev, struct devinfo *di);
void plugin_close(void *scomm, void *rcomm, void *lcomm, void *smh, void *rmh);
void plugin_connect_pair(int dev, void *lcomm, void *peer_handle, void **scomm, void **rcomm, const char *peer);
void set_nonblock(int fd, int on);
void set_nodelay(int fd);
void xwrite(int fd, const void *buf, size_t len, const char *what);
void xread(int fd, void *buf, size_t len, const char *what);
void check_peer(int fd, const char *who);
int tcp_listen(int family, int loopback, int port);
int sock_port(int fd);
int tcp_accept(int lfd, const char *what);
int tcp_connect_addr(const struct sockaddr *sa, socklen_t salen, uint64_t dl, int *err);
int tcp_connect_host(const char *host, int port, const char *what);
void set_io_timeouts(int fd);
void bsend_all(int fd, const char *p, size_t len);
void brecv_all(int fd, char *p, size_t len);
void precv_all(int fd, char *p, size_t len);
void wsend(int fd, const uint64_t *v, int n, const char *what);
void wrecv(int fd, uint64_t *v, int n, const char *what);
void idle_tick(struct idle *id, int fd_peer, const char *who, const char *what);
int req_done(void *req, long expect, const char *what);
uint64_t plugin_bw(struct peer *p, size_t size, uint64_t n, int do_send, int do_recv);
void plugin_lat(struct peer *p, size_t size, uint64_t n, uint64_t *rtt);
uint64_t tcp_bw(struct peer *p, size_t size, uint64_t n, int do_send, int do_recv);
void tcp_lat(struct peer *p, size_t size, uint64_t n, int split, uint64_t *rtt);
void peer_setup(struct peer *p, size_t max_size);
void peer_teardown(struct peer *p);
int server_main(int lfd, int quiet);
int build_sizes(size_t *sz);
int client_main(const char *host, int port, pid_t server_pid);
extern const char *const rule; /* the line between the tables of results */
int ranks_main(void);
int comms_main(void);

/* Every plugin call goes through this: a failure names the call, the result
 * and what the tool was doing. */
/* Each plugin call is timed (call_timed; calls_report prints the longest).
 * With --call-waits the calling thread's context switches are counted
 * around each call too, to tell a call that waited in the plugin from one
 * the scheduler only preempted, and its processor time, to tell a call
 * that worked that long from one the host kept off the processor. */
struct call_mark {
  uint64_t t0;
  long nvcsw, nivcsw; /* the thread's context switches before the call (--call-waits) */
  uint64_t cpu0;      /* and its processor time (ns) */
};
void call_begin(struct call_mark *m);
void call_timed(const char *name, const struct call_mark *m);
void calls_report(void);
#define NETCALL(name, call)                                                                   \
  do {                                                                                        \
    struct call_mark m_;                                                                      \
    call_begin(&m_);                                                                          \
    ncclResult_t r_ = (call);                                                                 \
    call_timed(name, &m_);                                                                    \
    if (r_ != ncclSuccess)                                                                    \
      die("plugin %s() failed: %s (%d) while %s", name, hx_result_str(r_), (int)r_, g_phase); \
  } while (0)

#endif
