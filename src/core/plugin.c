/*
 * Plugin-wide state: init, the device table and its properties, version.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "core/core.h"
#include "core/device.h"
#include "core/rail.h"
#include "core/transports.h"
#include "topo/topo.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/params.h"

_Static_assert(sizeof(((struct collx_props *)0)->phys) == COLLX_MAX_VDEV_DEVS * sizeof(int),
               "collx_props.phys holds a virtual device's members");

/* Latency NCCL may assume for one message over a host TCP stack (us). */
#define COLLX_LATENCY_US 20.0f

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_device *devices;
static atomic_int ndevices = -1; /* -1: not initialised; grows with makeVDevice */
static int nphys;                /* the discovered ones: devices[0..nphys-1] */
static struct collx_config config; /* resolved once, at init */
static atomic_int abi_version;

const char *collx_version(void) { return PACKAGE_VERSION; }
void collx_set_abi_version(int version) { atomic_store(&abi_version, version); }
int collx_abi_version(void) { return atomic_load(&abi_version); }
int collx_caller_progress(void) { return collx_transport()->caller_progress(); }
const struct collx_config *collx_settings(void) { return atomic_load(&ndevices) < 0 ? NULL : &config; }

/* The settings are resolved once (util/config.c) and the transport's
 * init keeps them; nothing below reads the parameter table again. */
static ncclResult_t start_transport(void) {
  collx_config_load(&config);
  const struct collx_transport *t = collx_transport();
  ncclResult_t res = t->init(&config);
  if (res != ncclSuccess) {
    COLLX_WARN("the %s transport did not start", t->name);
    return res;
  }
  int caller = config.progress == COLLX_PROGRESS_CALLER;
  /* The stream count of each device is the placement plan's (src/topo/streams.c),
   * logged with its reasons as "topology: dev N ... streams per connection". */
  for (int i = 0; i < nphys; i++) {
    char progress[64] = "I/O by the caller of isend/irecv/test (COLLX_PROGRESS)";
    if (!caller)
      snprintf(progress, sizeof progress, "a pool of up to %d progress threads", collx_topo_pool_threads(i));
    COLLX_INFO(COLLX_LOG_INIT, "device %d %s: %d streams per connection (fewer with many comms open), chunks up to "
               "%zu bytes, %s", i, devices[i].name, devices[i].streams, config.chunk_size, progress);
  }
  if (!caller && config.spin_us > 0)
    COLLX_INFO(COLLX_LOG_INIT, "progress threads spin %d us after data", config.spin_us);
  return ncclSuccess;
}

int collx_nstreams_fixed(void) { return config.nstreams > 0; }

/* railId / planeId of the discovered devices (COLLX_RAIL_ID, COLLX_PLANE_ID). */
static void assign_rails(void) {
  struct collx_id_nic nics[COLLX_MAX_DEVICES];
  int rails[COLLX_MAX_DEVICES], planes[COLLX_MAX_DEVICES];
  for (int i = 0; i < nphys; i++)
    nics[i] = (struct collx_id_nic){devices[i].name, devices[i].pci_path, devices[i].speed_mbps,
                                    devices[i].nmembers};
  collx_assign_ids(nics, nphys, collx_param_str(COLLX_P_RAIL_ID), "COLLX_RAIL_ID", 1, rails);
  collx_assign_ids(nics, nphys, collx_param_str(COLLX_P_PLANE_ID), "COLLX_PLANE_ID", 0, planes);
  for (int i = 0; i < nphys; i++) {
    devices[i].rail_id = rails[i];
    devices[i].plane_id = planes[i];
    if (rails[i] != COLLX_ID_UNDEF || planes[i] != COLLX_ID_UNDEF)
      COLLX_INFO(COLLX_LOG_INIT, "device %d (%s): rail %d, plane %d", i, devices[i].name, rails[i],
                 planes[i]);
  }
}

ncclResult_t collx_init(ncclDebugLogger_t logger) {
  collx_log_set_logger(logger);
  pthread_mutex_lock(&init_lock);
  ncclResult_t res = ncclSuccess;
  if (ndevices < 0) {
    collx_params_log_set();
    /* Pages of killed processes would pile up in /dev/shm: the next
     * start on the node removes them (its own page is made with its
     * first connection). */
    if (collx_stats_enabled()) collx_stats_sweep(NULL);
    const char *why = NULL;
    int n = 0;
    if (collx_devices_discover(&devices, &n, &why) != 0) {
      COLLX_WARN("cannot list network interfaces");
      res = ncclSystemError;
    } else if (n == 0) {
      COLLX_WARN("no usable network device: %s", why ? why : "no interface is up with an address");
      res = ncclSystemError;
    } else {
      nphys = n;
      assign_rails();
      res = start_transport();
      if (res == ncclSuccess) atomic_store(&ndevices, n);
    }
  }
  pthread_mutex_unlock(&init_lock);
  if (res == ncclSuccess)
    COLLX_INFO(COLLX_LOG_INIT, "collx %s ready: %d device(s), ncclNet v%d", PACKAGE_VERSION,
               atomic_load(&ndevices), collx_abi_version());
  return res;
}

const struct collx_device *collx_device_get(int dev) {
  int n = atomic_load(&ndevices);
  if (n < 0 || dev < 0 || dev >= n) return NULL;
  return &devices[dev];
}

ncclResult_t collx_devices(int *ndev) {
  if (!ndev) return ncclInvalidArgument;
  int n = atomic_load(&ndevices);
  if (n < 0) {
    COLLX_WARN("devices called before a successful init");
    return ncclInternalError;
  }
  *ndev = n;
  return ncclSuccess;
}

/* A virtual device already made from exactly these devices (init_lock held). */
static int find_vdevice(const int *devs, int n) {
  int total = atomic_load(&ndevices);
  for (int v = nphys; v < total; v++) {
    if (devices[v].nphys != n) continue;
    int same = 1;
    for (int i = 0; i < n && same; i++) same = devices[v].phys[i] == devs[i];
    if (same) return v;
  }
  return -1;
}

ncclResult_t collx_make_vdevice(const int *devs, int n, int max_devs, int *d) {
  if (!d || !devs) {
    COLLX_WARN("makeVDevice: NULL argument");
    return ncclInvalidArgument;
  }
  if (atomic_load(&ndevices) < 0) {
    COLLX_WARN("makeVDevice called before a successful init");
    return ncclInternalError;
  }
  if (n == 1 && devs[0] >= 0 && devs[0] < nphys) {
    *d = devs[0];
    COLLX_INFO(COLLX_LOG_NET, "makeVDevice: device %d stands for itself", devs[0]);
    return ncclSuccess;
  }
  char why[160] = "";
  struct collx_device v;
  if (collx_device_fuse(devices, nphys, devs, n, max_devs, &v, why, sizeof why) != 0) {
    COLLX_WARN("makeVDevice: %s", why);
    return ncclInvalidUsage;
  }
  pthread_mutex_lock(&init_lock);
  int at = find_vdevice(devs, n);
  if (at < 0) {
    at = collx_devices_append(&v);
    if (at >= 0) atomic_store(&ndevices, at + 1);
  }
  pthread_mutex_unlock(&init_lock);
  if (at < 0) {
    COLLX_WARN("makeVDevice: the device table is full (%d devices)", COLLX_MAX_DEVICES);
    return ncclInvalidUsage;
  }
  *d = at;
  COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_NET, "makeVDevice: device %d is %s (%d interfaces, %d Mbps, rail %d)",
             at, devices[at].name, devices[at].nmembers, devices[at].speed_mbps, devices[at].rail_id);
  return ncclSuccess;
}

ncclResult_t collx_get_properties(int dev, struct collx_props *p) {
  const struct collx_device *d = collx_device_get(dev);
  if (!d || !p) {
    COLLX_WARN("getProperties: no device %d (%d devices)", dev, atomic_load(&ndevices));
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
  p->nphys = d->nphys;
  for (int i = 0; i < d->nphys && i < COLLX_MAX_VDEV_DEVS; i++) p->phys[i] = d->phys[i];
  p->rail_id = d->rail_id;
  p->plane_id = d->plane_id;
  return ncclSuccess;
}
