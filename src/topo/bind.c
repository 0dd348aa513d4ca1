/*
 * This process's plan and the helpers that apply it: thread pinning and
 * NIC-local memory.  The plan is made once (device discovery) and then only
 * read, so the hot helpers take no lock.
 */
#include "topo/topo_internal.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/launcher.h"
#include "util/log.h"
#include "util/params.h"

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_plan *process_plan; /* written under setup_lock, read atomically */

/* Log a condition once per process: these helpers run per thread and per
 * buffer, and one line says all there is to say. */
#define ONCE(flag) (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED))

/* ---- Settings ---------------------------------------------------------------- */

void collx_plan_settings_from_env(struct collx_plan_settings *s) {
  char why[512];
  if (collx_plan_settings_parse(s, collx_param_str(COLLX_P_CPU_AFFINITY),
                                collx_param_str(COLLX_P_MERGE),
                                collx_param_int(COLLX_P_NSTREAMS), why, sizeof why) < 0)
    COLLX_WARN("%s; the default is used", why);
  s->threads = (int)collx_param_int(COLLX_P_NTHREADS);
  const char *from = NULL;
  long set = collx_param_int(COLLX_P_LOCAL_RANKS);
  if (set > 0) {
    s->local_ranks = (int)set;
    from = "COLLX_LOCAL_RANKS";
  } else {
    s->local_ranks = collx_launcher_local_ranks(&from);
  }
  snprintf(s->local_ranks_from, sizeof s->local_ranks_from, "%s", from ? from : "no launcher variable set");
}

/* ---- The process plan ---------------------------------------------------------- */

/* The CPUs this process may use: its binding (taskset, a launcher's mask)
 * within what the topology allows (cgroups).  An XML stand-in has no such
 * thing: all its allowed CPUs. */
static hwloc_bitmap_t process_allowed(const struct collx_topo *t) {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (!set) return NULL;
  if (!t->this_system || hwloc_get_cpubind(t->hw, set, HWLOC_CPUBIND_PROCESS) < 0 ||
      hwloc_bitmap_iszero(set))
    hwloc_bitmap_copy(set, hwloc_topology_get_allowed_cpuset(t->hw));
  hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(t->hw));
  return set;
}

static void log_plan(const struct collx_plan *p) {
  for (int i = 0; i < p->nnotes; i++) {
    if (p->notes[i].warn) COLLX_WARN("topology: %s", p->notes[i].text);
    else COLLX_INFO(COLLX_LOG_INIT, "topology: %s", p->notes[i].text);
  }
  for (int i = 0; i < p->ndevs; i++) {
    const struct collx_plan_dev *d = &p->devs[i];
    char nodes[64] = "-", first[64] = "-";
    if (d->local) hwloc_bitmap_list_snprintf(nodes, sizeof nodes, d->nodeset);
    for (int k = 0, at = 0; k < d->npus && k < 8 && at < (int)sizeof first; k++)
      at += snprintf(first + at, sizeof first - (size_t)at, "%s%d", k ? "," : "", d->pus[k]);
    char why[160];
    collx_plan_streams_why(p, d, why, sizeof why);
    COLLX_INFO(COLLX_LOG_INIT, "topology: dev %d %s: NUMA %s, %d CPUs to pin to (%s%s), "
               "%d streams per connection (%s), pci %s", i, d->name, nodes, d->npus, first,
               d->npus > 8 ? ",..." : "", d->streams, why, d->pci_path[0] ? d->pci_path : "-");
  }
}

/* Interface names may differ from hwloc's (renamed after boot, another
 * namespace): give the planner each NIC's PCI address from sysfs when the
 * caller did not.  Only meaningful when the topology is this machine. */
static struct collx_plan_nic *with_sysfs_paths(const struct collx_topo *t,
                                               const struct collx_plan_nic *nics, int n,
                                               char (*store)[PATH_MAX]) {
  struct collx_plan_nic *copy = malloc((size_t)n * sizeof *copy);
  if (!copy) return NULL;
  for (int i = 0; i < n; i++) {
    copy[i] = nics[i];
    char link[64 + IF_NAMESIZE];
    snprintf(link, sizeof link, "/sys/class/net/%s/device", nics[i].name);
    if (!copy[i].pci_path && t->this_system && realpath(link, store[i])) copy[i].pci_path = store[i];
  }
  return copy;
}

static struct collx_plan *make_process_plan(const struct collx_plan_nic *nics, int nnics) {
  const struct collx_topo *t = collx_topo_process();
  if (!t) return NULL;
  struct collx_plan_settings s;
  collx_plan_settings_from_env(&s);
  hwloc_bitmap_t allowed = process_allowed(t);
  char (*paths)[PATH_MAX] = calloc((size_t)nnics, sizeof *paths);
  struct collx_plan_nic *in = paths ? with_sysfs_paths(t, nics, nnics, paths) : NULL;
  struct collx_plan *p = allowed && in ? collx_plan_make(t, in, nnics, allowed, &s) : NULL;
  hwloc_bitmap_free(allowed);
  free(in);
  free(paths);
  if (!p) {
    COLLX_WARN("topology: no placement plan (out of memory); threads and buffers are not placed");
    return NULL;
  }
  for (int i = 0; i < p->nnics; i++) collx_nic_info_add_sysfs(t, &p->nics[i]);
  log_plan(p);
  return p;
}

const struct collx_plan *collx_topo_setup(const struct collx_plan_nic *nics, int nnics) {
  pthread_mutex_lock(&setup_lock);
  struct collx_plan *p = process_plan;
  if (!p && nnics > 0) {
    p = make_process_plan(nics, nnics);
    __atomic_store_n(&process_plan, p, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&setup_lock);
  return p;
}

const struct collx_plan *collx_topo_current_plan(void) {
  return __atomic_load_n(&process_plan, __ATOMIC_ACQUIRE);
}

void collx_topo_teardown(void) {
  pthread_mutex_lock(&setup_lock);
  struct collx_plan *p = process_plan;
  __atomic_store_n(&process_plan, NULL, __ATOMIC_RELEASE);
  collx_plan_free(p);
  collx_topo_process_release();
  pthread_mutex_unlock(&setup_lock);
}

/* ---- Thread pinning ------------------------------------------------------------------ */

static int warned_no_plan, warned_bad_dev, noted_xml, warned_bind;

/* The plan's device `dev`, or NULL with the reason logged once. */
static const struct collx_plan_dev *plan_dev(const struct collx_plan *p, int dev, const char *what) {
  if (!p) {
    if (ONCE(warned_no_plan)) COLLX_WARN("topology: %s: no placement plan (setup not called or failed)", what);
    return NULL;
  }
  if (dev < 0 || dev >= p->ndevs) {
    if (ONCE(warned_bad_dev)) COLLX_WARN("topology: %s: device %d out of range (%d devices)", what, dev, p->ndevs);
    return NULL;
  }
  return &p->devs[dev];
}

int collx_topo_pin_self(int dev, unsigned conn_serial, int stream) {
  const struct collx_plan *p = collx_topo_current_plan();
  if (p && p->settings.affinity == COLLX_AFFINITY_OFF) return 0;
  if (!plan_dev(p, dev, "pinning")) return -1;
  if (!p->topo->this_system) { /* the plan describes another machine */
    if (ONCE(noted_xml))
      COLLX_INFO(COLLX_LOG_INIT, "topology: %s is not this machine: threads are not pinned",
                 p->topo->source);
    return 0;
  }
  int cpu = collx_plan_cpu(p, dev, conn_serial, stream);
  if (cpu < 0) return 0;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (!set) return -1;
  hwloc_bitmap_only(set, (unsigned)cpu);
  int rc = hwloc_set_cpubind(p->topo->hw, set, HWLOC_CPUBIND_THREAD);
  int err = errno;
  hwloc_bitmap_free(set);
  if (rc < 0) {
    if (ONCE(warned_bind))
      COLLX_WARN("topology: cannot pin a thread of dev %d to CPU %d: %s", dev, cpu, strerror(err));
    return -1;
  }
  COLLX_TRACE(COLLX_LOG_NET, "topology: dev %d conn %u stream %d pinned to CPU %d", dev,
              conn_serial, stream, cpu);
  return 0;
}

int collx_topo_pool_threads(int dev) {
  const struct collx_plan *p = collx_topo_current_plan();
  if (p && dev >= 0 && dev < p->ndevs) return p->devs[dev].threads;
  long set = collx_param_int(COLLX_P_NTHREADS);
  if (set > 0) return (int)set;
  long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
  return collx_pool_default(ncpus > 0 ? (int)ncpus : 1, 1, 2);
}

/* ---- NIC-local memory -------------------------------------------------------------------- */

/* Every buffer ends with a trailer that says how to free it, in the slack
 * of its last page where there is room: the user's part starts the
 * mapping, page-aligned, and a header page of its own would cost every
 * comm a resident page per buffer (tests/scale's bound per comm). */
#define ALLOC_MAGIC 0x636f6c6c78616c63ULL /* "collxalc" */
struct alloc_tail {
  uint64_t magic;
  int bound; /* 1: hwloc_alloc_membind, 0: ordinary_pages */
};

/* Whole pages of ordinary memory.  From mmap rather than the heap: a
 * page-aligned heap block costs up to a page of slack besides its own
 * (the allocator's header must fit before the boundary), and a comm is
 * a few such blocks (bench/NOTES.md, attempt 32).  Under AddressSanitizer
 * from the heap, so that its redzones still catch a write past the end. */
static void *ordinary_pages(size_t total, size_t page) {
#ifdef __SANITIZE_ADDRESS__
  void *m = NULL;
  return posix_memalign(&m, page, total) == 0 ? m : NULL;
#else
  (void)page;
  void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? NULL : m;
#endif
}

static void ordinary_free(void *m, size_t total) {
#ifdef __SANITIZE_ADDRESS__
  (void)total;
  free(m);
#else
  munmap(m, total);
#endif
}

static int warned_membind;

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

/* Did the kernel really bind [p, p+len) to `nodes`?  A container without
 * mbind rights, or hwloc without binding support, silently gives less. */
static int binding_holds(hwloc_topology_t hw, void *p, size_t len, hwloc_const_nodeset_t nodes) {
  hwloc_nodeset_t got = hwloc_bitmap_alloc();
  hwloc_membind_policy_t pol;
  int ok = got && hwloc_get_area_membind(hw, p, len, got, &pol, HWLOC_MEMBIND_BYNODESET) == 0 &&
           pol == HWLOC_MEMBIND_BIND && hwloc_bitmap_isincluded(got, nodes);
  hwloc_bitmap_free(got);
  return ok;
}

static void *alloc_bound(const struct collx_plan *p, const struct collx_plan_dev *d, size_t total) {
  hwloc_topology_t hw = p->topo->hw;
  void *m = hwloc_alloc_membind(hw, total, d->nodeset, HWLOC_MEMBIND_BIND,
                                HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
  const char *why = m ? NULL : strerror(errno);
  if (m && !binding_holds(hw, m, total, d->nodeset)) {
    hwloc_free(hw, m, total);
    m = NULL;
    why = "the kernel did not apply the binding";
  }
  if (!m && ONCE(warned_membind)) {
    char nodes[64];
    hwloc_bitmap_list_snprintf(nodes, sizeof nodes, d->nodeset);
    COLLX_WARN("topology: cannot bind buffers of %s to NUMA node %s (%s); using ordinary memory",
               d->name, nodes, why);
  }
  return m;
}

/* Whole pages for `size` bytes and the trailer; 0 when that overflows. */
static size_t alloc_total(size_t size) {
  size_t page = page_size(), need = size + sizeof(struct alloc_tail);
  if (need < size || need + page < need) return 0;
  return (need + page - 1) / page * page;
}

static struct alloc_tail *tail_of(void *m, size_t total) {
  return (struct alloc_tail *)((char *)m + total - sizeof(struct alloc_tail));
}

void *collx_topo_alloc_local(int dev, size_t size) {
  const struct collx_plan *p = collx_topo_current_plan();
  const struct collx_plan_dev *d = plan_dev(p, dev, "local memory");
  size_t total = alloc_total(size);
  if (!total) return NULL;
  /* Binding needs the real machine and a NIC whose node is known. */
  void *m = d && p->topo->this_system && d->local ? alloc_bound(p, d, total) : NULL;
  int bound = m != NULL;
  if (!m && !(m = ordinary_pages(total, page_size()))) return NULL;
  *tail_of(m, total) = (struct alloc_tail){.magic = ALLOC_MAGIC, .bound = bound};
  return m;
}

void collx_topo_free_local(void *ptr, size_t size) {
  if (!ptr) return;
  size_t total = alloc_total(size);
  struct alloc_tail *t = total ? tail_of(ptr, total) : NULL;
  if (!t || t->magic != ALLOC_MAGIC) {
    COLLX_WARN("topology: free_local of %zu bytes at %p, which it did not allocate so; leaked", size, ptr);
    return;
  }
  t->magic = 0;
  const struct collx_plan *p = collx_topo_current_plan();
  if (!t->bound) ordinary_free(ptr, total);
  else if (p) hwloc_free(p->topo->hw, ptr, total);
  else COLLX_WARN("topology: buffer freed after teardown; leaked");
}

/* ---- GPU locality -------------------------------------------------------------------------- */

void collx_topo_log_gpu_locality(int dev) {
  const struct collx_plan *p = collx_topo_current_plan();
  struct collx_gpu g;
  if (!p || dev < 0 || dev >= p->ndevs || collx_cuda_current_gpu(p->topo, &g) < 0) return;
  const struct collx_plan_dev *d = &p->devs[dev];
  for (int m = 0; m < d->nmembers; m++) {
    const struct collx_nic_info *nic = &p->nics[d->member[m]];
    COLLX_INFO(COLLX_LOG_NET, "topology: GPU %s (%s) to %s: %s", g.name, g.busid, nic->name,
               collx_dist_name(collx_topo_distance(p->topo, g.pcidev, nic->pcidev)));
  }
}

/* At unload (NCCL dlcloses the plugin), after the transport has released
 * its NIC-local memory (its destructor runs first: higher priority). */
__attribute__((destructor(150))) static void topo_unload(void) { collx_topo_teardown(); }
