/*
 * The plugin's settings, resolved once.  collx_config_load reads the
 * parameter table (params.def holds every default and bound; nothing here
 * repeats one) and resolves what depends on the host, such as
 * COLLX_PROGRESS=auto.  Core fills one at init and hands it to the
 * transport's init; it lives in util so that a transport can read it
 * without including core.
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
  size_t eager_size;            /* COLLX_EAGER_SIZE */
  int spin_us;                  /* COLLX_SPIN_US */
  int inline_recv;              /* COLLX_INLINE_RECV */
  enum collx_progress progress; /* COLLX_PROGRESS, auto resolved */
  const char *progress_setting; /* COLLX_PROGRESS as given ("auto" by default) */
  int timeout_s;                /* COLLX_TIMEOUT: silent peer declared dead (0: never) */
  int connect_timeout_s;        /* COLLX_CONNECT_TIMEOUT */
  int nstreams;                 /* COLLX_NSTREAMS: 0 lets the placement plan pick */
  int local_ranks;              /* COLLX_LOCAL_RANKS: 0 reads the launcher's variables */
};

/* Fill *cfg from the parameter table and the host (CPUs for auto progress). */
void collx_config_load(struct collx_config *cfg);

/* "threads" or "caller". */
const char *collx_progress_name(enum collx_progress p);

#endif
