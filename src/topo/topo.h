/*
 * Topology: where each NIC sits (PCI path, NUMA node, local cores), and the
 * placement plan that follows from it (which NICs form one device, which
 * core each plugin thread runs on, which NUMA node its buffers come from).
 *
 * Three layers, so that the interesting part is testable without the
 * machine it describes:
 *   - the topology (topo.c): hwloc 2.x with I/O objects, loaded from this
 *     machine or from an exported XML file, and per-NIC queries on it;
 *   - the planner (plan.c, merge.c): ONE pure function, collx_plan_make(),
 *     topology + NIC list + allowed cpuset + settings in, plan out.  It reads
 *     no environment, no sysfs and logs nothing; what it would warn about is
 *     recorded in plan->notes;
 *   - the process side (bind.c, gpu.c): the plan of this process built from
 *     the COLLX_* settings, and the helpers the transport calls to pin its
 *     threads and allocate NIC-local memory.
 */
#ifndef COLLX_TOPO_TOPO_H
#define COLLX_TOPO_TOPO_H

#include <hwloc.h>
#include <stddef.h>
#include <stdio.h>

/* Interfaces one merged device may hold (equal to COLLX_MAX_MEMBERS). */
#define COLLX_TOPO_MAX_MEMBERS 8
/* Bridges recorded between a NIC and its host bridge (real ones have < 8). */
#define COLLX_TOPO_MAX_BRIDGES 16
/* Interface names: IF_NAMESIZE is 16; room for odd names in XML files. */
#define COLLX_TOPO_NAME_LEN 64

/* ------------------------------------------------------------------------
 * Topology
 * ---------------------------------------------------------------------- */

struct collx_topo {
  hwloc_topology_t hw;
  int this_system;  /* 1: the machine we run on; 0: an XML stand-in */
  char source[512]; /* "this machine" or the XML file's path */
};

/* Load a topology with its I/O devices: from `xml_path`, or when NULL from
 * this machine (hwloc itself honours HWLOC_XMLFILE then).  NULL on failure,
 * with `why` (may be NULL) set to one sentence. */
struct collx_topo *collx_topo_load(const char *xml_path, char *why, size_t why_len);
void collx_topo_destroy(struct collx_topo *t);

/* The topology of this process, loaded on first use (COLLX_TOPO_XML, else
 * HWLOC_XMLFILE, else this machine) and kept until collx_topo_teardown().
 * NULL when it cannot be loaded (logged once). */
const struct collx_topo *collx_topo_process(void);

/* What the topology says about one network interface. */
struct collx_nic_info {
  char name[COLLX_TOPO_NAME_LEN];
  int found;          /* 0: not in the topology (virtual NIC): no locality */
  int ethernet;       /* Ethernet-like: 6-byte address or Ethernet PCI class */
  hwloc_obj_t osdev;  /* network OS device, NULL when matched by PCI only */
  hwloc_obj_t pcidev; /* its PCI device, NULL when not found */
  char busid[16];     /* "0000:04:00.0", "" when not found */
  unsigned vendor_id, device_id, class_id;
  float link_gbps;    /* hwloc's PCIe linkspeed, GB/s; 0 unknown */
  int link_width;     /* PCIe lanes, from sysfs on this machine; 0 unknown */
  char link_speed[32];/* sysfs current_link_speed ("8.0 GT/s PCIe") or "" */
  int nbridges;       /* bridges from the device up to its host bridge (last) */
  hwloc_obj_t bridges[COLLX_TOPO_MAX_BRIDGES];
  char pci_path[512]; /* sysfs-like path: /sys/devices/pci0000:00/.../0000:04:00.0 */
  hwloc_bitmap_t cpuset;  /* local PUs; the whole machine when not found */
  hwloc_bitmap_t nodeset; /* local NUMA nodes (OS indexes); all when not found */
  /* Set by the planner from its input (0 and "" otherwise): */
  int speed_mbps;
  char given_path[512];   /* the pci_path the caller passed */
};

/* Describe interface `ifname`.  It is matched to a network OS device by
 * name, else, when `pci_path` is given (the realpath of
 * /sys/class/net/IF/device), to the PCI device of that address.  Returns 0
 * and fills `out` (found or not); -1 only when out of memory.  Reads only
 * the topology.  Release with collx_nic_info_clear(). */
int collx_topo_nic_info(const struct collx_topo *t, const char *ifname, const char *pci_path,
                        struct collx_nic_info *out);
void collx_nic_info_clear(struct collx_nic_info *nic);
/* Add what only sysfs knows (PCIe width and speed): this machine only. */
void collx_nic_info_add_sysfs(const struct collx_topo *t, struct collx_nic_info *nic);

/* Names of the network OS devices of the topology, in topology order.
 * Returns how many exist (may exceed `max`; only `max` are stored). */
int collx_topo_list_nics(const struct collx_topo *t, char (*names)[COLLX_TOPO_NAME_LEN], int max);

/* ------------------------------------------------------------------------
 * The placement plan
 * ---------------------------------------------------------------------- */

enum collx_affinity { COLLX_AFFINITY_AUTO, COLLX_AFFINITY_OFF, COLLX_AFFINITY_LIST };
enum collx_merge { COLLX_MERGE_NONE, COLLX_MERGE_AUTO, COLLX_MERGE_LIST };

struct collx_plan_settings {
  enum collx_affinity affinity;
  char cpu_list[256];     /* LIST: PU OS indexes, "0-3,8" */
  enum collx_merge merge;
  char merge_groups[512]; /* LIST: "eth0+eth1,eth2+eth3" */
  int streams;            /* streams per connection; 0: the plan picks */
  int threads;            /* progress threads per device; 0: the plan picks */
  int local_ranks;        /* ranks sharing this node's CPUs (0 is taken as 1) */
  char local_ranks_from[48]; /* where that count came from, for people */
};

/* Parse settings as COLLX_CPU_AFFINITY, COLLX_MERGE and COLLX_NSTREAMS
 * spell them.  Returns 0, or -1 with `why` explaining the first bad value
 * (s then holds the defaults for that value). */
int collx_plan_settings_parse(struct collx_plan_settings *s, const char *affinity,
                              const char *merge, long streams, char *why, size_t why_len);

/* One NIC in use, as the device discovery knows it. */
struct collx_plan_nic {
  const char *name;
  int speed_mbps;       /* 0 unknown */
  const char *pci_path; /* realpath of /sys/class/net/IF/device, or NULL */
};

/* One device offered to NCCL: one NIC, or several merged. */
struct collx_plan_dev {
  char name[128];                       /* "eth0" or "eth0+eth1" */
  int nmembers;
  int member[COLLX_TOPO_MAX_MEMBERS];   /* indexes into plan->nics */
  char pci_path[512];                   /* for getProperties; "" when none */
  int speed_mbps;                       /* summed over members */
  hwloc_bitmap_t cpuset;                /* local PUs (union over members) */
  hwloc_bitmap_t nodeset;               /* local NUMA nodes (union) */
  int local;        /* 1 when at least one member was found in the topology */
  int fallback;     /* 1: no local core is allowed, threads use the allowed set */
  int npus;         /* pin order: one PU per core first, then hyperthreads */
  int *pus;         /* PU OS indexes; npus == 0: threads are not pinned */
  int group, group_rank, group_size; /* devices sharing one PU list interleave */
  int streams;      /* streams per connection: what the transport opens */
  int stream_cpus;  /* CPUs the stream policy counted for it (candidates / group) */
  int threads;      /* progress threads (COLLX_PROGRESS=threads) */
};

struct collx_plan_note {
  int warn;          /* 1: WARN, 0: INFO */
  char text[320];
};

struct collx_plan {
  const struct collx_topo *topo;        /* borrowed */
  struct collx_plan_settings settings;
  hwloc_bitmap_t allowed;               /* the allowed cpuset it was made for */
  int nnics;
  struct collx_nic_info *nics;          /* the input NICs, in input order */
  int ndevs;
  struct collx_plan_dev *devs;
  int nnotes;
  struct collx_plan_note *notes;
};

/* THE planner, a pure function.  `allowed` NULL: the topology's allowed
 * cpuset.  Never fails for lack of locality (see the notes); NULL only when
 * out of memory or given nothing to plan. */
struct collx_plan *collx_plan_make(const struct collx_topo *t, const struct collx_plan_nic *nics,
                                   int nnics, hwloc_const_cpuset_t allowed,
                                   const struct collx_plan_settings *s);
void collx_plan_free(struct collx_plan *p);

/* The PU (OS index) for stream `stream` of connection `conn` of device
 * `dev`, or -1 for "do not pin".  `conn` counts the connections (send and
 * receive alike) of that device from 0.  Devices of one group interleave,
 * so threads of different connections share a core only once every core of
 * the list is taken. */
int collx_plan_cpu(const struct collx_plan *p, int dev, unsigned conn, int stream);

/* Why device d has its stream count, in words: "COLLX_NSTREAMS", or the
 * policy's inputs (speed, CPUs, ranks on the node and where that came from). */
void collx_plan_streams_why(const struct collx_plan *p, const struct collx_plan_dev *d, char *buf, size_t len);
/* Why device d has its progress thread count, in words. */
void collx_plan_threads_why(const struct collx_plan *p, const struct collx_plan_dev *d, char *buf, size_t len);

/* Output for people (text) and for programs (JSON). */
void collx_plan_print_text(FILE *out, const struct collx_plan *p);
void collx_plan_print_json(FILE *out, const struct collx_plan *p);
void collx_nic_info_print_text(FILE *out, const struct collx_nic_info *nic);

/* ------------------------------------------------------------------------
 * Streams per connection: one policy (streams.c), which the plan applies to
 * each device unless COLLX_NSTREAMS fixes the count
 * ---------------------------------------------------------------------- */

/* For a link of speed_mbps whose connections may use ncpus CPUs, shared by
 * local_ranks ranks of the node. */
int collx_streams_default(int speed_mbps, int ncpus, int local_ranks);
/* Concurrent flows (peers x flows per peer) up to which the default stands. */
#define COLLX_STREAMS_FLOWS_MEASURED 32
/* Streams for one new connection when NCCL says (setNetAttr) that this
 * side may talk to up to max_peers peers over up to max_flows connections
 * each at once; `base` is the count without hints.  A value <= 0 means
 * "not said". */
int collx_streams_hinted(int base, int max_peers, int max_flows);
/* Streams for one new connection of a device on which `open_comms` comms
 * (send and receive) are open in this process: `base` up to
 * COLLX_STREAMS_FLOWS_MEASURED of them, then proportionally fewer, at
 * least 1. */
int collx_streams_for_comms(int base, int open_comms);
/* Progress threads for a device (COLLX_PROGRESS=threads) whose
 * connections may use ncpus CPUs, shared by local_ranks ranks (not
 * counted: see streams.c), opening `streams` streams each. */
int collx_pool_default(int ncpus, int local_ranks, int streams);

/* ------------------------------------------------------------------------
 * GPUs
 * ---------------------------------------------------------------------- */

/* How far a GPU is from a NIC, nearest first. */
enum collx_dist {
  COLLX_DIST_SWITCH,     /* below one PCIe switch (a common PCI bridge) */
  COLLX_DIST_HOSTBRIDGE, /* same host bridge, different switches */
  COLLX_DIST_NUMA,       /* same NUMA node or socket, different host bridges */
  COLLX_DIST_SYS,        /* across sockets */
  COLLX_DIST_UNKNOWN     /* one of them is not in the topology */
};
const char *collx_dist_name(enum collx_dist d);
enum collx_dist collx_topo_distance(const struct collx_topo *t, hwloc_obj_t a, hwloc_obj_t b);

struct collx_gpu {
  char name[32];       /* "cuda0", "nvml3", or "gpu0" */
  char busid[16];      /* "0000:34:00.0" */
  int ordinal;         /* CUDA device ordinal, -1 when not from the driver */
  hwloc_obj_t pcidev;  /* NULL when the driver's GPU is not in the topology */
};

/* GPUs of the topology (NVIDIA display-class PCI devices; pure). */
int collx_topo_gpus(const struct collx_topo *t, struct collx_gpu **gpus);
/* GPUs as the CUDA driver numbers them, dlopened at run time; -1 when there
 * is no driver or it reports no device. */
int collx_cuda_gpus(const struct collx_topo *t, struct collx_gpu **gpus);
/* The GPU of the calling thread's current CUDA context; -1 when none. */
int collx_cuda_current_gpu(const struct collx_topo *t, struct collx_gpu *gpu);

struct collx_gpu_matrix {
  int ngpus, nnics;
  struct collx_gpu *gpus;
  char (*nic_names)[COLLX_TOPO_NAME_LEN];
  enum collx_dist *dist;  /* ngpus x nnics, row per GPU */
};
/* The GPU x NIC distance matrix.  The GPUs are the CUDA driver's when the
 * topology is this machine and a driver answers, else the topology's.
 * Returns 0 or -1 (out of memory). */
int collx_gpu_matrix_make(const struct collx_topo *t, const struct collx_nic_info *nics, int nnics,
                          struct collx_gpu_matrix *m);
void collx_gpu_matrix_free(struct collx_gpu_matrix *m);
void collx_gpu_matrix_print_text(FILE *out, const struct collx_gpu_matrix *m);
void collx_gpu_matrix_print_json(FILE *out, const struct collx_gpu_matrix *m);

/* ------------------------------------------------------------------------
 * This process: the hooks device discovery and the transport call
 * ---------------------------------------------------------------------- */

/* Read COLLX_CPU_AFFINITY, COLLX_MERGE, COLLX_NSTREAMS and the ranks on
 * this node (COLLX_LOCAL_RANKS, else the launcher's variables); a bad
 * value is WARNed and its default used. */
void collx_plan_settings_from_env(struct collx_plan_settings *s);

/* Build this process's plan for the NICs in use (device discovery calls it
 * once; later calls return the first plan).  Logs the plan's notes.  NULL
 * when the topology cannot be loaded or memory runs out: run unplaced. */
const struct collx_plan *collx_topo_setup(const struct collx_plan_nic *nics, int nnics);
const struct collx_plan *collx_topo_current_plan(void);
/* Forget the plan and the topology (after every buffer is freed). */
void collx_topo_teardown(void);

/* Pin the calling thread for stream `stream` of connection `conn_serial`
 * of device `dev`.  0 when pinned or when nothing is to be done (affinity
 * off, XML stand-in); -1 with a logged reason. */
int collx_topo_pin_self(int dev, unsigned conn_serial, int stream);

/* Progress threads for device `dev`: the plan's figure; without a plan
 * (or for a device it does not know) COLLX_NTHREADS or the policy's
 * default for this host. */
int collx_topo_pool_threads(int dev);

/* The number of a new connection of device `dev`, unique across the collx
 * processes of this node (a shared counter in /dev/shm; per process where
 * that is unavailable), so that their threads spread over the cores. */
unsigned collx_topo_next_serial(int dev);

/* Memory on device `dev`'s NUMA node (page-aligned), checked after
 * allocation; ordinary memory with one WARN when binding fails.  NULL only
 * when no memory at all is left.  Free with collx_topo_free_local(), with
 * the size it was allocated with. */
void *collx_topo_alloc_local(int dev, size_t size);
void collx_topo_free_local(void *p, size_t size);

/* Log (INFO) how far the calling thread's GPU is from device `dev`. */
void collx_topo_log_gpu_locality(int dev);

#endif
