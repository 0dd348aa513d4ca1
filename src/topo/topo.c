/*
 * The topology and what it says about each NIC.  Everything here reads only
 * the hwloc topology, except collx_nic_info_add_sysfs() and the process
 * topology, which looks at COLLX_TOPO_XML.
 */
#include "topo/topo_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/params.h"

/* ---- Loading ------------------------------------------------------------ */

/* KEEP_ALL for I/O: the merge policy and the distance classes need every
 * bridge, and NIC matching by PCI address needs devices without OS device. */
static int configure(hwloc_topology_t hw, const char *xml_path) {
  if (hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_ALL) < 0) return -1;
#if HWLOC_API_VERSION >= 0x00020100
  /* hwloc's Linux backend reads the PCI tree from sysfs itself; its optional
   * "pci" plugin (libpciaccess) adds nothing we use, costs a config-space
   * read per device and leaks about 1 KB per process.  Leaving it out also
   * makes discovery the same whether or not hwloc's plugins can load.  It
   * fails where the plugin is not installed, which is what we want anyway. */
  (void)hwloc_topology_set_components(hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
  if (xml_path && hwloc_topology_set_xml(hw, xml_path) < 0) return -1;
  return 0;
}

static void describe_source(struct collx_topo *t, const char *xml_path) {
  const char *env = getenv("HWLOC_XMLFILE"); /* hwloc's own variable */
  if (xml_path)
    snprintf(t->source, sizeof t->source, "%s", xml_path);
  else if (!t->this_system && env && *env)
    snprintf(t->source, sizeof t->source, "%s (HWLOC_XMLFILE)", env);
  else if (!t->this_system)
    snprintf(t->source, sizeof t->source, "a topology other than this machine");
  else
    snprintf(t->source, sizeof t->source, "this machine");
}

/* NCCL dlopens the plugin RTLD_LOCAL, which makes libhwloc local to it as
 * well; hwloc's own add-ons (its libxml2 reader, PCI discovery) then fail to
 * resolve libhwloc's symbols and hwloc quietly falls back to its minimal
 * XML parser.  Promoting the already loaded libhwloc to global scope once
 * lets them load.  The reference this takes is kept on purpose: libhwloc
 * then stays loaded after the plugin is unloaded. */
static void promote_hwloc(void) {
  Dl_info info;
  if (dladdr((void *)hwloc_topology_init, &info) && info.dli_fname)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static void make_hwloc_global(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, promote_hwloc);
}

struct collx_topo *collx_topo_load(const char *xml_path, char *why, size_t why_len) {
  make_hwloc_global();
  struct collx_topo *t = calloc(1, sizeof *t);
  if (!t) {
    if (why) snprintf(why, why_len, "out of memory");
    return NULL;
  }
  if (hwloc_topology_init(&t->hw) < 0) {
    if (why) snprintf(why, why_len, "hwloc_topology_init failed: %s", strerror(errno));
    free(t);
    return NULL;
  }
  if (configure(t->hw, xml_path) < 0 || hwloc_topology_load(t->hw) < 0) {
    if (why)
      snprintf(why, why_len, "cannot load the topology%s%s: %s", xml_path ? " from " : "",
               xml_path ? xml_path : "", strerror(errno));
    hwloc_topology_destroy(t->hw);
    free(t);
    return NULL;
  }
  t->this_system = hwloc_topology_is_thissystem(t->hw);
  describe_source(t, xml_path);
  return t;
}

void collx_topo_destroy(struct collx_topo *t) {
  if (!t) return;
  hwloc_topology_destroy(t->hw);
  free(t);
}

/* ---- The process topology ------------------------------------------------ */

static pthread_mutex_t process_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_topo *process_topo;
static int process_failed; /* report a failure once, not on every call */

const struct collx_topo *collx_topo_process(void) {
  pthread_mutex_lock(&process_lock);
  if (!process_topo && !process_failed) {
    const char *xml = collx_param_str(COLLX_P_TOPO_XML);
    char why[512];
    process_topo = collx_topo_load(*xml ? xml : NULL, why, sizeof why);
    if (!process_topo) {
      process_failed = 1;
      COLLX_WARN("topology: %s; threads and buffers are not placed", why);
    } else {
      COLLX_INFO(COLLX_LOG_INIT, "topology: loaded from %s", process_topo->source);
    }
  }
  struct collx_topo *t = process_topo;
  pthread_mutex_unlock(&process_lock);
  return t;
}

void collx_topo_process_release(void) {
  pthread_mutex_lock(&process_lock);
  collx_topo_destroy(process_topo);
  process_topo = NULL;
  process_failed = 0;
  pthread_mutex_unlock(&process_lock);
}

/* ---- PCI addresses ------------------------------------------------------- */

int collx_busid_parse(const char *s, unsigned v[4]) {
  int end = 0;
  if (sscanf(s, "%x:%x:%x.%x%n", &v[0], &v[1], &v[2], &v[3], &end) != 4) return -1;
  return s[end] == '\0' && v[1] < 256 && v[2] < 32 && v[3] < 8 ? 0 : -1;
}

void collx_busid_format(const unsigned v[4], char *buf, size_t len) {
  snprintf(buf, len, "%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]);
}

hwloc_obj_t collx_topo_pcidev(const struct collx_topo *t, const char *busid) {
  unsigned v[4];
  if (!busid || collx_busid_parse(busid, v) < 0) return NULL;
  return hwloc_get_pcidev_by_busid(t->hw, v[0], v[1], v[2], v[3]);
}

/* The PCI address in a sysfs device path: its last component that is one.
 * Virtual functions of a bus (virtio) sit below the PCI device, hence the
 * search from the end rather than the basename. */
static hwloc_obj_t pcidev_of_path(const struct collx_topo *t, const char *path) {
  char copy[512];
  unsigned v[4];
  snprintf(copy, sizeof copy, "%s", path);
  for (char *slash; (slash = strrchr(copy, '/')) != NULL; *slash = '\0')
    if (collx_busid_parse(slash + 1, v) == 0)
      return hwloc_get_pcidev_by_busid(t->hw, v[0], v[1], v[2], v[3]);
  return NULL;
}

/* ---- Finding a NIC ------------------------------------------------------- */

static int is_net_osdev(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_OS_DEVICE && o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK;
}

static hwloc_obj_t net_osdev_by_name(const struct collx_topo *t, const char *name) {
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(t->hw, o)) != NULL;)
    if (is_net_osdev(o) && o->name && !strcmp(o->name, name)) return o;
  return NULL;
}

static hwloc_obj_t pci_ancestor(hwloc_obj_t o) {
  while (o && o->type != HWLOC_OBJ_PCI_DEVICE) o = o->parent;
  return o;
}

hwloc_obj_t collx_topo_lca(hwloc_obj_t a, hwloc_obj_t b) {
  if (!a || !b) return NULL;
  for (hwloc_obj_t x = a; x; x = x->parent)
    for (hwloc_obj_t y = b; y; y = y->parent)
      if (x == y) return x;
  return NULL;
}

int collx_topo_list_nics(const struct collx_topo *t, char (*names)[COLLX_TOPO_NAME_LEN], int max) {
  int n = 0;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(t->hw, o)) != NULL;) {
    if (!is_net_osdev(o) || !o->name) continue;
    if (n < max) snprintf(names[n], COLLX_TOPO_NAME_LEN, "%s", o->name);
    n++;
  }
  return n;
}

/* ---- Describing a NIC ---------------------------------------------------- */

/* Ethernet-like: what can be striped with TCP at equal footing.  The OS
 * device's link address tells Ethernet (6 bytes) from IPoIB (20 bytes) even
 * on a VPI card whose PCI class says InfiniBand; the class decides when no
 * address is recorded. */
static int ethernet_like(hwloc_obj_t osdev, hwloc_obj_t pcidev) {
  const char *addr = osdev ? hwloc_obj_get_info_by_name(osdev, "Address") : NULL;
  if (addr && *addr) return (strlen(addr) + 1) / 3 == 6;
  return pcidev && pcidev->attr->pcidev.class_id == 0x0200;
}

static void record_bridges(struct collx_nic_info *nic) {
  for (hwloc_obj_t o = nic->pcidev->parent; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent) {
    if (nic->nbridges == COLLX_TOPO_MAX_BRIDGES) break;
    nic->bridges[nic->nbridges++] = o;
    if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) break;
  }
}

static size_t append_busid(char *buf, size_t len, size_t at, hwloc_obj_t o) {
  const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
  if (o->type == HWLOC_OBJ_BRIDGE) a = &o->attr->bridge.upstream.pci;
  unsigned v[4] = {a->domain, a->bus, a->dev, a->func};
  char id[16];
  collx_busid_format(v, id, sizeof id);
  int n = snprintf(buf + at, at < len ? len - at : 0, "/%s", id);
  return at + (n > 0 ? (size_t)n : 0);
}

/* The path Linux would show: /sys/devices/pciDDDD:BB/<bridge>/.../<device>.
 * NCCL reads a device's place in the PCI tree from it. */
static void build_pci_path(struct collx_nic_info *nic) {
  char *buf = nic->pci_path;
  size_t len = sizeof nic->pci_path, at;
  int top = nic->nbridges - 1;
  hwloc_obj_t root = top >= 0 ? nic->bridges[top] : NULL;
  if (root && root->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
    at = (size_t)snprintf(buf, len, "/sys/devices/pci%04x:%02x",
                          (unsigned)root->attr->bridge.downstream.pci.domain,
                          (unsigned)root->attr->bridge.downstream.pci.secondary_bus);
    top--;
  } else { /* no host bridge recorded: root the path at the device's bus */
    at = (size_t)snprintf(buf, len, "/sys/devices/pci%04x:%02x",
                          (unsigned)nic->pcidev->attr->pcidev.domain,
                          (unsigned)nic->pcidev->attr->pcidev.bus);
  }
  for (int i = top; i >= 0; i--) at = append_busid(buf, len, at, nic->bridges[i]);
  append_busid(buf, len, at, nic->pcidev);
}

/* Local cpuset and NUMA nodes: those of the first non-I/O ancestor, which
 * is how hwloc (and hwloc-calc) defines an I/O object's locality. */
static int set_locality(const struct collx_topo *t, struct collx_nic_info *nic) {
  hwloc_const_bitmap_t cpus = hwloc_topology_get_topology_cpuset(t->hw);
  hwloc_const_bitmap_t nodes = hwloc_topology_get_topology_nodeset(t->hw);
  if (nic->pcidev) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t->hw, nic->pcidev);
    if (anc && anc->cpuset) cpus = anc->cpuset;
    if (anc && anc->nodeset) nodes = anc->nodeset;
  }
  nic->cpuset = hwloc_bitmap_dup(cpus);
  nic->nodeset = hwloc_bitmap_dup(nodes);
  return nic->cpuset && nic->nodeset ? 0 : -1;
}

static void describe_pcidev(struct collx_nic_info *nic) {
  const struct hwloc_pcidev_attr_s *a = &nic->pcidev->attr->pcidev;
  unsigned v[4] = {a->domain, a->bus, a->dev, a->func};
  collx_busid_format(v, nic->busid, sizeof nic->busid);
  nic->vendor_id = a->vendor_id;
  nic->device_id = a->device_id;
  nic->class_id = a->class_id;
  nic->link_gbps = a->linkspeed;
  record_bridges(nic);
  build_pci_path(nic);
}

int collx_topo_nic_info(const struct collx_topo *t, const char *ifname, const char *pci_path,
                        struct collx_nic_info *nic) {
  memset(nic, 0, sizeof *nic);
  snprintf(nic->name, sizeof nic->name, "%s", ifname);
  nic->osdev = net_osdev_by_name(t, ifname);
  nic->pcidev = nic->osdev ? pci_ancestor(nic->osdev) : NULL;
  if (!nic->pcidev && pci_path && *pci_path) {
    /* Names differ (renamed interface, namespace): match the PCI address. */
    nic->osdev = NULL;
    nic->pcidev = pcidev_of_path(t, pci_path);
  }
  nic->found = nic->pcidev != NULL;
  nic->ethernet = ethernet_like(nic->osdev, nic->pcidev);
  if (nic->pcidev) describe_pcidev(nic);
  if (set_locality(t, nic) < 0) {
    collx_nic_info_clear(nic);
    return -1;
  }
  return 0;
}

void collx_nic_info_clear(struct collx_nic_info *nic) {
  hwloc_bitmap_free(nic->cpuset);
  hwloc_bitmap_free(nic->nodeset);
  nic->cpuset = nic->nodeset = NULL;
}

/* ---- What only sysfs knows ---------------------------------------------- */

static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char *ok = fgets(buf, (int)len, f);
  fclose(f);
  if (!ok) return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* hwloc 2 records the link's GB/s but not its width; the kernel has both. */
void collx_nic_info_add_sysfs(const struct collx_topo *t, struct collx_nic_info *nic) {
  char path[128], val[32];
  if (!t->this_system || !nic->busid[0]) return;
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_width", nic->busid);
  if (read_line(path, val, sizeof val) == 0) nic->link_width = atoi(val);
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_speed", nic->busid);
  if (read_line(path, val, sizeof val) == 0)
    snprintf(nic->link_speed, sizeof nic->link_speed, "%s", val);
}
