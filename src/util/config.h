/*
 * The plugin's settings, resolved once.  collx_config_load reads the
 * parameter table (params.def holds every default and bound; nothing here
 * repeats one) and resolves what depends on the host, such as
 * COLLX_PROGRESS=auto.  Core fills one at init and hands it to the
 * transport's init; it lives in util so that a transport can read it
 * without including core.
 *
 * Placement (COLLX_CPU_AFFINITY, COLLX_MERGE, COLLX_LOCAL_RANKS), interface
 * discovery (COLLX_IFNAME, COLLX_SOCKET_FAMILY, COLLX_SPEED_MBPS), ids and
 * the tuner read their settings in their own one reader each
 * (collx_plan_settings_from_env, device.c's read_filter, ...): those run
 * before init too, for collx-info and the topology tests.
 */
#ifndef COLLX_UTIL_CONFIG_H
#define COLLX_UTIL_CONFIG_H

#include <stddef.h>

enum collx_progress {
  COLLX_PROGRESS_THREADS, /* a thread per data stream */
  COLLX_PROGRESS_CALLER   /* the caller of isend/irecv/test does the socket I/O */
};

struct collx_config {
  size_t chunk_size;            /* COLLX_CHUNK_SIZE: largest piece one stream carries */
  size_t eager_size;            /* COLLX_EAGER_SIZE: the most any device sends eagerly */
  int spin_us;                  /* COLLX_SPIN_US */
  int inline_recv;              /* COLLX_INLINE_RECV */
  int ctrl_peek;                /* COLLX_CTRL_PEEK */
  enum collx_progress progress; /* COLLX_PROGRESS, auto resolved */
  const char *progress_setting; /* COLLX_PROGRESS as given ("auto" by default) */
  int timeout_s;                /* COLLX_TIMEOUT: silent peer declared dead (0: never) */
  int connect_timeout_s;        /* COLLX_CONNECT_TIMEOUT */
  int nstreams;                 /* COLLX_NSTREAMS: 0 lets the placement plan pick */
  int failover;                 /* COLLX_FAILOVER */
  int failover_ms;              /* COLLX_FAILOVER_MS */
  size_t failover_copy;         /* COLLX_FAILOVER_COPY */
  size_t ctrl_spare_batch;      /* COLLX_CTRL_SPARE_BATCH */
};

/* Fill *cfg from the parameter table and the host (CPUs for auto progress). */
void collx_config_load(struct collx_config *cfg);

/* A merged device sends at most this much eagerly unless COLLX_EAGER_SIZE
 * is set: an eager message rides the one member that carries the control
 * socket, while a striped one spreads over every member (two 1 Gb/s NICs:
 * 32 KiB messages at 0.12 GB/s eager, 0.23 striped; bench/NOTES.md 53). */
#define COLLX_EAGER_MERGED_MAX 16384

/* The largest message a device of `members` NICs sends eagerly, from
 * COLLX_EAGER_SIZE and the rule above; `why` (may be NULL) says which. */
size_t collx_eager_size(int members, char *why, size_t why_len);

/* "threads" or "caller". */
const char *collx_progress_name(enum collx_progress p);

#endif
