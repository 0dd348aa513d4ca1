/*
 * Live counters readable from outside the process: one page per process,
 * /dev/shm/collx-<pid>.stats, mapped shared, that the plugin keeps up to
 * date and `collx-info --stats` reads.
 *
 * Writers use relaxed atomics and no syscall: a counter a single thread
 * owns is bumped with a load and a store, one that several threads share
 * with an atomic add, and the kernel's view of each socket (tcp_info) is
 * copied in by the watchdog once a second, never on the data path.  A
 * connection's slot carries a sequence number, odd while its description
 * is being written, so that a reader never mixes two connections.
 *
 * The file is created O_CREAT|O_EXCL|O_NOFOLLOW (a link planted at its
 * name is never followed), removed when the process exits or unloads the
 * plugin, and a page whose process is gone (pid dead, or reused by a
 * process that started later) is removed by the next process that starts
 * collx on the node.  COLLX_STATS=0 turns all of it off.
 */
#ifndef COLLX_UTIL_STATS_H
#define COLLX_UTIL_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define COLLX_STATS_DIR "/dev/shm"
#define COLLX_STATS_MAGIC "COLLXST1"
#define COLLX_STATS_VERSION 1
#define COLLX_STATS_SLOTS 1024 /* connections one page describes at once */
#define COLLX_STATS_STREAMS 16
#define COLLX_STATS_NAME 64

/* One data stream (a TCP socket) of a connection. */
struct collx_stats_stream {
  _Atomic uint64_t bytes;   /* send: bytes the peer acknowledged; receive: bytes read (kernel) */
  _Atomic uint64_t chunks;  /* send: chunks written whole */
  _Atomic uint64_t rate;    /* bytes per second over the last sample */
  _Atomic uint32_t rtt_us, rttvar_us;
  _Atomic uint32_t retrans; /* segments retransmitted, socket lifetime */
  _Atomic uint32_t unacked; /* segments sent and not acknowledged */
  _Atomic uint32_t notsent; /* bytes queued in the kernel, not sent yet */
  _Atomic uint32_t path;    /* the path (member NIC) it travels on */
  _Atomic uint32_t lost;    /* 1 while its path is given up */
  uint32_t pad;
};

enum collx_stats_role { COLLX_STATS_SEND = 0, COLLX_STATS_RECV = 1 };

/* One connection end: a send or a receive comm. */
struct collx_stats_conn {
  _Atomic uint32_t seq;  /* odd while the description below is written */
  _Atomic uint32_t live; /* 1 while the comm is open */
  int32_t dev, role, nstreams, npaths;
  char devname[COLLX_STATS_NAME];
  char peer[COLLX_STATS_NAME];
  uint64_t opened_ns; /* CLOCK_REALTIME */
  _Atomic uint64_t messages, bytes; /* completed (the caller's thread) */
  _Atomic uint64_t inflight;        /* requests posted and not done (sampled) */
  _Atomic uint64_t chunks_resent, paths_lost, paths_rejoined;
  _Atomic uint64_t sampled_ns;      /* CLOCK_REALTIME of the last tcp_info sample */
  struct collx_stats_stream streams[COLLX_STATS_STREAMS];
};

struct collx_stats_header {
  char magic[8];
  uint32_t version, header_size, conn_size, nslots;
  int32_t pid;
  uint32_t pad;
  uint64_t starttime; /* the process's start (clock ticks after boot, /proc/PID/stat) */
  uint64_t created_ns;
  char exe[COLLX_STATS_NAME];
  _Atomic uint32_t slots_used;   /* high-water mark: readers look at this many */
  _Atomic uint32_t untracked;    /* comms opened while every slot was taken */
};

struct collx_stats_page {
  struct collx_stats_header h;
  char pad[256 - sizeof(struct collx_stats_header)];
  struct collx_stats_conn conn[COLLX_STATS_SLOTS];
};
_Static_assert(sizeof(struct collx_stats_header) <= 256, "stats header fits its room");

/* Whether stats are on (COLLX_STATS); read once. */
int collx_stats_enabled(void);
/* Remove the pages of processes that are gone; returns how many.  Called
 * once per process by collx's init.  `dir` NULL: COLLX_STATS_DIR. */
int collx_stats_sweep(const char *dir);
/* A slot for a new connection end, the page made on first use; NULL when
 * stats are off, the page cannot be made, or every slot is taken. */
struct collx_stats_conn *collx_stats_conn_open(int dev, int role, const char *devname, const char *peer,
                                               int nstreams, int npaths);
void collx_stats_conn_close(struct collx_stats_conn *s);
/* This process's page path ("" when none), for tests and messages. */
const char *collx_stats_path(void);
/* Remove this process's page now (also done at exit and unload). */
void collx_stats_remove(void);

/* Counters with one writing thread: no locked instruction. */
static inline void collx_stats_add1(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}
/* Counters several threads bump (rare events). */
static inline void collx_stats_addn(_Atomic uint64_t *c, uint64_t n) {
  atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- reading (collx-info) ---------------------------------------------- */
/* Map the page of `pid` read-only (never through a link).  0, or -1 with
 * the reason in why. */
int collx_stats_map(const char *dir, int pid, const struct collx_stats_page **page, size_t *len, char *why,
                    size_t whylen);
void collx_stats_unmap(const struct collx_stats_page *page, size_t len);
/* A stable copy of slot i; 1 when it is a live connection. */
int collx_stats_read_conn(const struct collx_stats_page *page, int i, struct collx_stats_conn *out);
/* PIDs with a page in dir, up to max; returns how many. */
int collx_stats_list(const char *dir, int *pids, int max);

#endif
