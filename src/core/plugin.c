/*
 * Plugin-wide state: init, the device table and its properties, version.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/core.h"
#include "core/device.h"
#include "topo/topo.h"
#include "transport/tcp/tcp.h"
#include "util/launcher.h"
#include "util/log.h"
#include "util/params.h"

/* Latency NCCL may assume for one message over a host TCP stack (us). */
#define COLLX_LATENCY_US 20.0f

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_device *devices;
static int ndevices = -1;       /* -1: not initialised */
static atomic_int abi_version;

const char *collx_version(void) { return PACKAGE_VERSION; }
void collx_set_abi_version(int version) { atomic_store(&abi_version, version); }
int collx_abi_version(void) { return atomic_load(&abi_version); }
int collx_caller_progress(void) { return tcp_caller_progress(); }

/* COLLX_PROGRESS: 1 when the caller's thread should do all socket I/O.
 * auto picks it on small hosts: NCCL's proxy thread already spins on a core
 * in test(), and stream threads beside it only add wake-ups and context
 * switches (bench/NOTES.md, CPU machine). */
static int caller_progress_wanted(void) {
  const char *mode = collx_param_str(COLLX_P_PROGRESS);
  if (mode && !strcmp(mode, "caller")) return 1;
  if (mode && !strcmp(mode, "threads")) return 0;
  if (mode && *mode && strcmp(mode, "auto"))
    COLLX_WARN("COLLX_PROGRESS=%s is not threads, caller or auto; using auto", mode);
  cpu_set_t set;
  int ncpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                          : (int)sysconf(_SC_NPROCESSORS_ONLN);
  return ncpus < 4;
}

/* COLLX_LOCAL_RANKS, else what the launcher says: the ranks sharing this
 * node's cores. */
static int local_ranks(const char **from) {
  long set = collx_param_int(COLLX_P_LOCAL_RANKS);
  if (set > 0) {
    *from = "COLLX_LOCAL_RANKS";
    return (int)set;
  }
  if (set < 0) COLLX_WARN("COLLX_LOCAL_RANKS=%ld is negative; reading the launcher's environment", set);
  return collx_launcher_local_ranks(from);
}

static void configure_transport(void) {
  long ncores = sysconf(_SC_NPROCESSORS_ONLN);
  int fastest = 0;
  for (int i = 0; i < ndevices; i++)
    if (devices[i].speed_mbps > fastest) fastest = devices[i].speed_mbps;
  long nstreams = collx_param_int(COLLX_P_NSTREAMS);
  int caller = caller_progress_wanted();
  if (nstreams <= 0) {
    const char *from = NULL;
    int ranks = local_ranks(&from);
    nstreams = tcp_default_nstreams(fastest, (int)ncores, ranks);
    COLLX_INFO(COLLX_LOG_INIT, "%ld streams per connection chosen for %d Mbps, %ld cores, %d rank(s) on this node (%s)",
               nstreams, fastest, ncores, ranks, from ? from : "no launcher variable set");
  }
  if (nstreams > 16) {
    COLLX_WARN("COLLX_NSTREAMS=%ld is more than 16; using 16", nstreams);
    nstreams = 16;
  }
  long piece = collx_param_int(COLLX_P_CHUNK_SIZE);
  if (piece < 4096) {
    COLLX_WARN("COLLX_CHUNK_SIZE=%ld is below 4096; using 4096", piece);
    piece = 4096;
  }
  long cto = collx_param_int(COLLX_P_CONNECT_TIMEOUT);
  struct tcp_config cfg = {.nstreams = (int)nstreams, .max_piece = (size_t)piece,
                           .connect_timeout_s = cto > 0 ? (int)cto : 5,
                           .timeout_s = (int)collx_param_int(COLLX_P_TIMEOUT)};
  tcp_configure(&cfg);
  long spin = collx_param_int(COLLX_P_SPIN_US);
  tcp_set_spin_us((int)spin);
  tcp_set_inline_recv(collx_param_int(COLLX_P_INLINE_RECV) != 0);
  long eager = collx_param_int(COLLX_P_EAGER_SIZE);
  if (eager > TCP_EAGER_SIZE_MAX || eager < 0) {
    COLLX_WARN("COLLX_EAGER_SIZE=%ld is outside 0..%d; using %d", eager, TCP_EAGER_SIZE_MAX,
               eager < 0 ? 0 : TCP_EAGER_SIZE_MAX);
    eager = eager < 0 ? 0 : TCP_EAGER_SIZE_MAX;
  }
  tcp_set_eager_size((size_t)eager);
  tcp_set_caller_progress(caller);
  collx_topo_set_streams((int)nstreams); /* the pin layout follows the real count */
  COLLX_INFO(COLLX_LOG_INIT, "%ld streams per connection, pieces up to %ld bytes, %s", nstreams, piece,
             caller ? "I/O by the caller of isend/irecv/test (COLLX_PROGRESS)" : "a thread per stream");
  if (!caller && spin > 0) COLLX_INFO(COLLX_LOG_INIT, "stream threads spin %ld us after data", spin);
}

ncclResult_t collx_init(ncclDebugLogger_t logger) {
  collx_log_set_logger(logger);
  pthread_mutex_lock(&init_lock);
  ncclResult_t res = ncclSuccess;
  if (ndevices < 0) {
    collx_params_log_set();
    const char *why = NULL;
    int n = 0;
    if (collx_devices_discover(&devices, &n, &why) != 0) {
      COLLX_WARN("cannot list network interfaces");
      res = ncclSystemError;
    } else if (n == 0) {
      COLLX_WARN("no usable network device: %s", why ? why : "no interface is up with an address");
      res = ncclSystemError;
    } else {
      ndevices = n;
      configure_transport();
    }
  }
  pthread_mutex_unlock(&init_lock);
  if (res == ncclSuccess)
    COLLX_INFO(COLLX_LOG_INIT, "collx %s ready: %d device(s), ncclNet v%d", PACKAGE_VERSION,
               ndevices, collx_abi_version());
  return res;
}

const struct collx_device *collx_device_get(int dev) {
  if (ndevices < 0 || dev < 0 || dev >= ndevices) return NULL;
  return &devices[dev];
}

ncclResult_t collx_devices(int *ndev) {
  if (!ndev) return ncclInvalidArgument;
  if (ndevices < 0) {
    COLLX_WARN("devices called before a successful init");
    return ncclInternalError;
  }
  *ndev = ndevices;
  return ncclSuccess;
}

ncclResult_t collx_get_properties(int dev, struct collx_props *p) {
  const struct collx_device *d = collx_device_get(dev);
  if (!d || !p) {
    COLLX_WARN("getProperties: no device %d (%d devices)", dev, ndevices);
    return ncclInvalidArgument;
  }
  memset(p, 0, sizeof *p);
  p->name = d->name;
  p->pci_path = d->pci_path;
  p->guid = d->guid;
  p->ptr_support = NCCL_PTR_HOST;
  p->speed_mbps = d->speed_mbps;
  p->port = 0;
  p->latency_us = COLLX_LATENCY_US;
  p->max_comms = COLLX_MAX_COMMS;
  p->max_recvs = COLLX_MAX_RECVS;
  /* Sizes travel as 64-bit on the wire; the int-sized ABIs cap them anyway. */
  p->max_p2p_bytes = (size_t)1 << 31;
  p->max_coll_bytes = (size_t)1 << 31;
  return ncclSuccess;
}
