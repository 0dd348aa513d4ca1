/*
 * GPU locality.  The CUDA driver is opened at run time: the plugin must load
 * on hosts without one, and it is built without CUDA headers, so the few
 * driver entry points used are declared here.  Topologies (XML) carry their
 * GPUs as PCI devices, which is what the distance classes are computed on.
 */
#include "topo/topo_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- Distance classes ------------------------------------------------------- */

const char *collx_dist_name(enum collx_dist d) {
  switch (d) {
  case COLLX_DIST_SWITCH: return "switch";
  case COLLX_DIST_HOSTBRIDGE: return "host-bridge";
  case COLLX_DIST_NUMA: return "numa";
  case COLLX_DIST_SYS: return "cross-socket";
  default: return "unknown";
  }
}

static hwloc_obj_t package_of(hwloc_topology_t hw, hwloc_obj_t o) {
  if (o->type == HWLOC_OBJ_PACKAGE) return o;
  return hwloc_get_ancestor_obj_by_type(hw, HWLOC_OBJ_PACKAGE, o);
}

/* Above the host bridges: one NUMA node or one package is still near. */
static enum collx_dist cpu_side_distance(hwloc_topology_t hw, hwloc_obj_t a, hwloc_obj_t b) {
  hwloc_obj_t na = hwloc_get_non_io_ancestor_obj(hw, a), nb = hwloc_get_non_io_ancestor_obj(hw, b);
  if (!na || !nb) return COLLX_DIST_UNKNOWN;
  if (na->nodeset && nb->nodeset && hwloc_bitmap_intersects(na->nodeset, nb->nodeset))
    return COLLX_DIST_NUMA;
  hwloc_obj_t pa = package_of(hw, na), pb = package_of(hw, nb);
  return pa && pa == pb ? COLLX_DIST_NUMA : COLLX_DIST_SYS;
}

enum collx_dist collx_topo_distance(const struct collx_topo *t, hwloc_obj_t a, hwloc_obj_t b) {
  hwloc_obj_t lca = collx_topo_lca(a, b);
  if (!lca) return COLLX_DIST_UNKNOWN;
  if (lca == a || lca == b || lca->type == HWLOC_OBJ_PCI_DEVICE) return COLLX_DIST_SWITCH;
  if (lca->type == HWLOC_OBJ_BRIDGE)
    return lca->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? COLLX_DIST_HOSTBRIDGE
                                                                    : COLLX_DIST_SWITCH;
  return cpu_side_distance(t->hw, a, b);
}

/* ---- GPUs of a topology -------------------------------------------------------- */

static int is_nvidia_gpu(hwloc_obj_t o) {
  return o->attr->pcidev.vendor_id == 0x10de && (o->attr->pcidev.class_id >> 8) == 0x03;
}

/* The name hwloc gave the GPU's OS device, "cuda*" preferred because its
 * number is the CUDA ordinal; "" when the export has none. */
static void osdev_name(hwloc_obj_t pci, char *buf, size_t len, int *ordinal) {
  buf[0] = '\0';
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
    if (c->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU && c->attr->osdev.type != HWLOC_OBJ_OSDEV_COPROC)
      continue;
    if (!strncmp(c->name, "cuda", 4)) {
      snprintf(buf, len, "%s", c->name);
      *ordinal = atoi(c->name + 4);
      return;
    }
    if (!buf[0]) snprintf(buf, len, "%s", c->name);
  }
}

static void describe_gpu(hwloc_obj_t pci, int n, struct collx_gpu *g) {
  const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
  unsigned v[4] = {a->domain, a->bus, a->dev, a->func};
  memset(g, 0, sizeof *g);
  g->ordinal = -1;
  g->pcidev = pci;
  collx_busid_format(v, g->busid, sizeof g->busid);
  osdev_name(pci, g->name, sizeof g->name, &g->ordinal);
  if (!g->name[0]) snprintf(g->name, sizeof g->name, "gpu%d", n);
}

int collx_topo_gpus(const struct collx_topo *t, struct collx_gpu **gpus) {
  int n = 0, cap = 0;
  *gpus = NULL;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(t->hw, o)) != NULL;) {
    if (!is_nvidia_gpu(o)) continue;
    if (n == cap) {
      struct collx_gpu *g = realloc(*gpus, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *g);
      if (!g) break; /* keep the GPUs found so far */
      *gpus = g;
    }
    describe_gpu(o, n, &(*gpus)[n]);
    n++;
  }
  return n;
}

/* ---- The CUDA driver, if any ------------------------------------------------------ */

/* The driver API's types are int-sized: CUresult, CUdevice. */
struct cuda_api {
  int (*init)(unsigned flags);
  int (*ctx_get_device)(int *dev);
  int (*device_get_count)(int *count);
  int (*device_get)(int *dev, int ordinal);
  int (*device_get_pci_bus_id)(char *buf, int len, int dev);
};

static struct cuda_api cuda;
static int cuda_ok;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void *sym(void *lib, const char *name) { return dlsym(lib, name); }

/* Opened once and never closed: the driver stays loaded in an NCCL
 * process anyway, and closing it under a running context would be unsafe. */
static void cuda_open(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  *(void **)&cuda.init = sym(lib, "cuInit");
  *(void **)&cuda.ctx_get_device = sym(lib, "cuCtxGetDevice");
  *(void **)&cuda.device_get_count = sym(lib, "cuDeviceGetCount");
  *(void **)&cuda.device_get = sym(lib, "cuDeviceGet");
  *(void **)&cuda.device_get_pci_bus_id = sym(lib, "cuDeviceGetPCIBusId");
  cuda_ok = cuda.init && cuda.ctx_get_device && cuda.device_get_count && cuda.device_get &&
            cuda.device_get_pci_bus_id && cuda.init(0) == 0;
}

static int cuda_ready(void) {
  pthread_once(&cuda_once, cuda_open);
  return cuda_ok;
}

/* The driver's device `dev` as a collx_gpu, located in the topology when
 * the topology is this machine. */
static int cuda_describe(const struct collx_topo *t, int dev, int ordinal, struct collx_gpu *g) {
  char raw[64];
  unsigned v[4];
  if (cuda.device_get_pci_bus_id(raw, (int)sizeof raw, dev) != 0) return -1;
  if (collx_busid_parse(raw, v) < 0) return -1;
  memset(g, 0, sizeof *g);
  g->ordinal = ordinal;
  snprintf(g->name, sizeof g->name, "cuda%d", ordinal);
  collx_busid_format(v, g->busid, sizeof g->busid);
  g->pcidev = t->this_system ? collx_topo_pcidev(t, g->busid) : NULL;
  return 0;
}

int collx_cuda_gpus(const struct collx_topo *t, struct collx_gpu **gpus) {
  int count = 0, n = 0;
  *gpus = NULL;
  if (!cuda_ready() || cuda.device_get_count(&count) != 0 || count <= 0) return -1;
  *gpus = calloc((size_t)count, sizeof **gpus);
  if (!*gpus) return -1;
  for (int i = 0; i < count; i++) {
    int dev;
    if (cuda.device_get(&dev, i) == 0 && cuda_describe(t, dev, i, &(*gpus)[n]) == 0) n++;
  }
  return n;
}

int collx_cuda_current_gpu(const struct collx_topo *t, struct collx_gpu *gpu) {
  int dev;
  if (!cuda_ready() || cuda.ctx_get_device(&dev) != 0) return -1;
  return cuda_describe(t, dev, dev, gpu);
}

/* ---- The matrix --------------------------------------------------------------------- */

int collx_gpu_matrix_make(const struct collx_topo *t, const struct collx_nic_info *nics, int nnics,
                          struct collx_gpu_matrix *m) {
  memset(m, 0, sizeof *m);
  m->ngpus = t->this_system ? collx_cuda_gpus(t, &m->gpus) : -1;
  if (m->ngpus < 0) m->ngpus = collx_topo_gpus(t, &m->gpus);
  m->nnics = nnics;
  m->nic_names = calloc((size_t)(nnics > 0 ? nnics : 1), sizeof *m->nic_names);
  m->dist = calloc((size_t)(m->ngpus * nnics > 0 ? m->ngpus * nnics : 1), sizeof *m->dist);
  if (!m->nic_names || !m->dist) {
    collx_gpu_matrix_free(m);
    return -1;
  }
  for (int j = 0; j < nnics; j++) snprintf(m->nic_names[j], COLLX_TOPO_NAME_LEN, "%s", nics[j].name);
  for (int i = 0; i < m->ngpus; i++)
    for (int j = 0; j < nnics; j++)
      m->dist[i * nnics + j] = collx_topo_distance(t, m->gpus[i].pcidev, nics[j].pcidev);
  return 0;
}

void collx_gpu_matrix_free(struct collx_gpu_matrix *m) {
  free(m->gpus);
  free(m->nic_names);
  free(m->dist);
  memset(m, 0, sizeof *m);
}
