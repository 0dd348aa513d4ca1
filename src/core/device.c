/*
 * Device discovery: which network interfaces collx offers NCCL, with which
 * address, PCI path, speed and guid.
 *
 * Discovery runs once per process and its result (devices, or the reason
 * there are none) is kept for the process lifetime: NCCL calls devices() and
 * getProperties() many times and expects the same answer every time.
 */
#include "device.h"

#include <arpa/inet.h>
#include <net/if_arp.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "topo/topo.h"
#include "util/ifmatch.h"
#include "util/log.h"
#include "util/params.h"

/* ---- Candidates: interfaces that are up with an IP address ------------- */

/* One interface as getifaddrs reports it, with the first address of each
 * kind.  Pointers refer into the getifaddrs list, alive during discovery. */
struct cand {
  const char *name;
  const struct sockaddr *v4;     /* first IPv4 address */
  const struct sockaddr *v6;     /* first IPv6 address that is not link-local */
  const struct sockaddr *v6_ll;  /* first IPv6 link-local address */
  int down;                      /* not IFF_UP: kept only as a member COLLX_MERGE names */
};

static struct cand *find_cand(struct cand *c, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(c[i].name, name) == 0) return &c[i];
  return NULL;
}

static void note_addr(struct cand *c, const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    if (!c->v4) c->v4 = sa;
    return;
  }
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
  if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) {
    if (!c->v6_ll) c->v6_ll = sa;
  } else if (!c->v6) {
    c->v6 = sa;
  }
}

/* Whether COLLX_MERGE names `name` in one of its groups ("eth0+eth1,...").
 * A NIC set down keeps its IPv4 address: named there, it is a member that
 * starts lost and joins once it comes up, as after a loss (test_failover
 * "eth1 set down before the start"); else a down NIC is not used. */
static int merge_names(const char *name) {
  const char *m = collx_param_str(COLLX_P_MERGE);
  size_t len = strlen(name);
  for (const char *p = m; *p;) {
    size_t tok = strcspn(p, "+,");
    if (tok == len && strncmp(p, name, len) == 0) return 1;
    p += tok;
    if (*p) p++;
  }
  return 0;
}

/* Group the getifaddrs entries by interface name, keeping the order in which
 * names first appear.  `c` has room for one entry per ifaddrs record. */
static int collect_cands(struct ifaddrs *ifa, struct cand *c) {
  int n = 0;
  for (; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || (!(ifa->ifa_flags & IFF_UP) && !merge_names(ifa->ifa_name))) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    struct cand *k = find_cand(c, n, ifa->ifa_name);
    if (!k) {
      k = &c[n++];
      *k = (struct cand){.name = ifa->ifa_name, .down = !(ifa->ifa_flags & IFF_UP)};
    }
    note_addr(k, ifa->ifa_addr);
  }
  return n;
}

/* ---- Selection ----------------------------------------------------------- */

struct filter {
  const char *spec;     /* user selection, NULL: the default rules */
  const char *var;      /* the variable the selection came from */
  int family;           /* AF_INET, AF_INET6 or AF_UNSPEC */
  const char *fam_str;  /* COLLX_SOCKET_FAMILY as given, for messages */
};

/* COLLX_SOCKET_FAMILY; an unknown value is reported and ignored rather than
 * failing init, as NCCL does with NCCL_SOCKET_FAMILY. */
static int parse_family(const char *s) {
  if (!s[0]) return AF_UNSPEC;
  if (!strcasecmp(s, "AF_INET") || !strcmp(s, "4")) return AF_INET;
  if (!strcasecmp(s, "AF_INET6") || !strcmp(s, "6")) return AF_INET6;
  COLLX_WARN("COLLX_SOCKET_FAMILY=\"%s\" is not AF_INET, 4, AF_INET6 or 6; ignoring it", s);
  return AF_UNSPEC;
}

static void read_filter(struct filter *f) {
  f->fam_str = collx_param_str(COLLX_P_SOCKET_FAMILY);
  f->family = parse_family(f->fam_str);
  f->spec = NULL;
  f->var = NULL;
  if (collx_param_is_set(COLLX_P_IFNAME)) {
    f->spec = collx_param_str(COLLX_P_IFNAME);
    f->var = "COLLX_IFNAME";
    return;
  }
  /* NCCL's own variable, so one setting serves both transports. */
  const char *nccl = getenv("NCCL_SOCKET_IFNAME");
  if (nccl && nccl[0]) {
    f->spec = nccl;
    f->var = "NCCL_SOCKET_IFNAME";
  }
}

/* The address an interface would be used with, or NULL.  Link-local IPv6
 * only on request: it needs a scope and never routes, so it is a last
 * resort. */
static const struct sockaddr *pick_addr(const struct cand *c, int family, int allow_ll) {
  const struct sockaddr *v6 = c->v6 ? c->v6 : allow_ll ? c->v6_ll : NULL;
  if (family == AF_INET) return c->v4;
  if (family == AF_INET6) return v6;
  return c->v4 ? c->v4 : v6;
}

/* Indices (into c) of the interfaces chosen, link-local IPv6 allowed or
 * not.  An interface collx_if_wanted turns down is never relaxed into use:
 * falling back to a veth or to lo when nothing else qualifies is how a job
 * ends up connecting to nobody (NVIDIA/nccl#913); the WARN says what to
 * name instead. */
static int select_pass(const struct cand *c, int n, const struct filter *f, int allow_ll,
                       int *out) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (collx_if_wanted(f->spec, c[i].name, NULL) && pick_addr(&c[i], f->family, allow_ll))
      out[k++] = i;
  return k;
}

/* Strict first; link-local IPv6 only when nothing else qualifies, since it
 * needs a scope and never routes.  Sets *allow_ll to the pass used. */
static int select_cands(const struct cand *c, int n, const struct filter *f, int *out,
                        int *allow_ll) {
  for (int ll = 0; ll <= 1; ll++) {
    int k = select_pass(c, n, f, ll, out);
    if (k > 0) {
      *allow_ll = ll;
      return k;
    }
  }
  return 0;
}

/* "lo (loopback), veth1a2b (container veth)": the interfaces up with an
 * address that the default rules kept out, for the INFO and WARN lines.
 * Returns how many. */
static int list_skipped(const struct cand *c, int n, const struct filter *f, char *buf,
                        size_t len) {
  int k = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    const char *why;
    if (collx_if_wanted(f->spec, c[i].name, &why) || !why) continue;
    size_t used = strlen(buf);
    if (used + 1 < len)
      snprintf(buf + used, len - used, "%s%s (%s)", k ? ", " : "", c[i].name, why);
    k++;
  }
  return k;
}

/* Strings the device table points to live until the plugin is unloaded;
 * they are recorded here so that the unload can free them. */
#define MAX_OWNED (COLLX_MAX_DEVICES * 2)
static char *owned[MAX_OWNED];
static int nowned;

static char *own(char *p) {
  if (p && nowned < MAX_OWNED) owned[nowned++] = p;
  return p;
}

/* NCCL dlcloses the plugin when done with it: leave nothing behind. */
__attribute__((destructor)) static void release_owned(void) {
  while (nowned > 0) free(owned[--nowned]);
}

/* ---- Per-interface properties from sysfs --------------------------------- */

static char *sysfs_pci_path(const char *ifname) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "/sys/class/net/%s/device", ifname);
  return own(realpath(path, NULL)); /* NULL for virtual interfaces */
}

/* A positive number from the file, else 0 (the kernel reports -1 or fails
 * the read for links without a speed). */
static long read_positive(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  long v = 0;
  if (fscanf(fp, "%ld", &v) != 1) v = 0;
  fclose(fp);
  return v > 0 ? v : 0;
}

enum speed_src { SPEED_OVERRIDE, SPEED_SYSFS, SPEED_DEFAULT };

static const char *speed_src_name(enum speed_src s) {
  return s == SPEED_OVERRIDE ? "COLLX_SPEED_MBPS" : s == SPEED_SYSFS ? "sysfs" : "default";
}

/* override: COLLX_SPEED_MBPS, read once per discovery by the caller. */
static enum speed_src find_speed(const char *ifname, long override, int *mbps) {
  long v = override;
  enum speed_src src = SPEED_OVERRIDE;
  if (v <= 0) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/sys/class/net/%s/speed", ifname);
    v = read_positive(path);
    src = SPEED_SYSFS;
  }
  if (v <= 0) {
    /* The kernel reports no speed for virtual links.  Loopback moves data
     * at memory speed, far beyond a 10 Gb/s guess (NCCL sizes its channel
     * count from this figure); other virtual links get the guess. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/sys/class/net/%s/type", ifname);
    v = read_positive(path) == ARPHRD_LOOPBACK ? COLLX_LOOPBACK_SPEED_MBPS : COLLX_DEFAULT_SPEED_MBPS;
    src = SPEED_DEFAULT;
  }
  *mbps = v > INT_MAX ? INT_MAX : (int)v;
  return src;
}

/* FNV-1a, 64 bits: a stable hash without dependencies. */
static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* guid: hash of the MAC address and the name.  Stable across runs and
 * processes on a host, which NCCL needs to match devices between ranks of
 * one node; the name keeps it unique where interfaces share a MAC (VLANs,
 * bond slaves) or have none (lo), since NCCL treats equal guids as ports of
 * one NIC. */
static uint64_t make_guid(const char *ifname) {
  char path[PATH_MAX], mac[64] = "";
  snprintf(path, sizeof path, "/sys/class/net/%s/address", ifname);
  FILE *fp = fopen(path, "r");
  if (fp) {
    if (!fgets(mac, sizeof mac, fp)) mac[0] = '\0';
    fclose(fp);
  }
  mac[strcspn(mac, "\n")] = '\0';
  uint64_t h = fnv1a(0xcbf29ce484222325ULL, mac);
  return fnv1a(fnv1a(h, "/"), ifname);
}

/* ---- Building the device list -------------------------------------------- */

static void fill_netif(struct collx_netif *m, const char *name, const struct sockaddr *sa,
                       long speed_override, enum speed_src *src) {
  memset(m, 0, sizeof *m);
  snprintf(m->ifname, sizeof m->ifname, "%s", name);
  m->if_index = (int)if_nametoindex(name);
  if (sa->sa_family == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&m->addr;
    memcpy(s4, sa, sizeof *s4);
    s4->sin_port = 0;
    m->addr_len = sizeof *s4;
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&m->addr;
    memcpy(s6, sa, sizeof *s6);
    s6->sin6_port = 0;
    /* A link-local address means nothing without its interface. */
    if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) && s6->sin6_scope_id == 0)
      s6->sin6_scope_id = (uint32_t)m->if_index;
    m->addr_len = sizeof *s6;
  }
  m->pci_path = sysfs_pci_path(name);
  *src = find_speed(name, speed_override, &m->speed_mbps);
  m->speed_from_sysfs = *src == SPEED_SYSFS;
}


static void make_device(struct collx_device *d, int index, const char *name,
                        const struct sockaddr *sa, long speed_override) {
  enum speed_src src;
  memset(d, 0, sizeof *d);
  struct collx_netif *m = &d->members[0];
  fill_netif(m, name, sa, speed_override, &src);
  d->nmembers = 1;
  snprintf(d->name, sizeof d->name, "%s", m->ifname);
  d->pci_path = m->pci_path;
  d->speed_mbps = m->speed_mbps;
  d->guid = make_guid(m->ifname);
  d->nphys = 1;
  d->phys[0] = index;
  d->rail_id = d->plane_id = COLLX_ID_UNDEF;
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  COLLX_INFO(COLLX_LOG_INIT, "device %d: %s %s speed %d Mbps (%s) pci %s", index, d->name,
             collx_host_str((const struct sockaddr *)&m->addr, host, sizeof host), d->speed_mbps,
             speed_src_name(src), d->pci_path ? d->pci_path : "none");
}

/* ---- Explaining an empty result ------------------------------------------ */

/* Appends printf-style text to a fixed buffer, truncating silently. */
static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

static const char *family_name(int family) {
  return family == AF_INET ? "IPv4" : "IPv6";
}

/* One sentence naming the filter in force and what was there to choose
 * from, e.g. `no interface matches COLLX_IFNAME="foo" (interfaces up with an
 * address: lo, eth0)`. */
static void explain_none(const struct cand *c, int n, const struct filter *f, char *buf,
                         size_t len) {
  buf[0] = '\0';
  if (n == 0) {
    append(buf, len, "no network interface is up with an IPv4 or IPv6 address");
    return;
  }
  if (f->spec)
    append(buf, len, "no interface matches %s=\"%s\"", f->var, f->spec);
  else
    append(buf, len, "no interface %s", f->family != AF_UNSPEC ? "has" : "qualifies");
  if (f->family != AF_UNSPEC)
    append(buf, len, "%s an %s address (COLLX_SOCKET_FAMILY=\"%s\";", f->spec ? " with" : "",
           family_name(f->family), f->fam_str);
  else
    append(buf, len, " (");
  append(buf, len, "%sinterfaces up with an address:", f->family != AF_UNSPEC ? " " : "");
  for (int i = 0; i < n; i++) append(buf, len, "%s %s", i ? "," : "", c[i].name);
  append(buf, len, ")");
  char skipped[512];
  if (list_skipped(c, n, f, skipped, sizeof skipped) > 0)
    append(buf, len, "; skipped unless COLLX_IFNAME names them: %s", skipped);
}

/* ---- Placement: merged devices from the topology plan --------------------- */

/* Hand the interfaces to the placement planner (src/topo) and rebuild the
 * device list from its plan: one device per plan entry, in plan order, so
 * that NCCL's device index d is the plan's device d.  Without a plan (no
 * topology) every interface stays a device of its own. */
/* Without a plan (no topology), the same stream policy over the CPUs this
 * process may use. */
static void unplanned_streams(struct collx_device *devs, int n) {
  struct collx_plan_settings s;
  collx_plan_settings_from_env(&s);
  long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (int i = 0; i < n; i++)
    devs[i].streams = s.streams > 0 ? s.streams
                                    : collx_streams_default(devs[i].speed_mbps, ncpus > 0 ? (int)ncpus : 1,
                                                            s.local_ranks);
}

static int apply_plan(struct collx_device *devs, int n) {
  struct collx_plan_nic nics[COLLX_MAX_DEVICES] = {{0}};
  for (int i = 0; i < n; i++)
    nics[i] = (struct collx_plan_nic){devs[i].name, devs[i].speed_mbps, devs[i].pci_path};
  const struct collx_plan *p = collx_topo_setup(nics, n);
  if (!p || p->ndevs < 1) {
    unplanned_streams(devs, n);
    return n;
  }
  static struct collx_device planned[COLLX_MAX_DEVICES];
  int nd = 0;
  for (int d = 0; d < p->ndevs && nd < COLLX_MAX_DEVICES; d++) {
    const struct collx_plan_dev *pd = &p->devs[d];
    struct collx_device *m = &planned[nd++];
    const struct collx_device *first = &devs[pd->member[0]];
    *m = *first;
    m->phys[0] = nd - 1;
    m->streams = pd->streams;
    if (pd->nmembers == 1) continue; /* a device of its own: keep its sysfs pciPath */
    snprintf(m->name, sizeof m->name, "%s", pd->name);
    m->nmembers = pd->nmembers < COLLX_MAX_MEMBERS ? pd->nmembers : COLLX_MAX_MEMBERS;
    for (int j = 0; j < m->nmembers; j++) m->members[j] = devs[pd->member[j]].members[0];
    m->speed_mbps = pd->speed_mbps;
    m->pci_path = pd->pci_path[0] ? own(strdup(pd->pci_path)) : first->pci_path;
    m->guid = first->guid ^ make_guid(m->name);
    COLLX_INFO(COLLX_LOG_INIT, "device %d: %s merges %d interfaces, %d Mbps, pci %s", nd - 1,
               m->name, m->nmembers, m->speed_mbps, m->pci_path ? m->pci_path : "none");
  }
  memcpy(devs, planned, sizeof(struct collx_device) * (size_t)nd);
  return nd;
}

/* One INFO line naming what the default rules kept out, so that a user
 * who expected a veth or a bridge to carry traffic sees why it does not. */
static void report_skipped(const struct cand *c, int n, const struct filter *f) {
  char skipped[512];
  if (list_skipped(c, n, f, skipped, sizeof skipped) == 0) return;
  COLLX_INFO(COLLX_LOG_INIT,
             "interfaces skipped: %s; to use one, name it in COLLX_IFNAME (COLLX_IFNAME==NAME)",
             skipped);
}

/* ---- Discovery, once per process ----------------------------------------- */

static pthread_mutex_t disc_lock = PTHREAD_MUTEX_INITIALIZER;
static int disc_done;
static struct collx_device disc_devs[COLLX_MAX_DEVICES];
static int disc_ndev;
static char disc_why[1024];

/* Fills disc_* from the interfaces of this host.  Returns -1 only on a
 * system error, which is not cached so a later call may succeed. */
static int discover_locked(void) {
  struct ifaddrs *list;
  if (getifaddrs(&list) != 0) {
    COLLX_WARN("getifaddrs failed: %s", strerror(errno));
    return -1;
  }
  int nrec = 0;
  for (struct ifaddrs *p = list; p; p = p->ifa_next) nrec++;
  struct cand *c = calloc((size_t)nrec + 1, sizeof *c);
  int *chosen = calloc((size_t)nrec + 1, sizeof *chosen);
  if (!c || !chosen) {
    COLLX_WARN("out of memory listing %d interface addresses", nrec);
    free(c);
    free(chosen);
    freeifaddrs(list);
    return -1;
  }
  struct filter f;
  read_filter(&f);
  int n = collect_cands(list, c);
  int allow_ll = 0;
  int k = select_cands(c, n, &f, chosen, &allow_ll);
  if (k > COLLX_MAX_DEVICES) {
    COLLX_WARN("%d interfaces qualify; using the first %d", k, COLLX_MAX_DEVICES);
    k = COLLX_MAX_DEVICES;
  }
  report_skipped(c, n, &f);
  long speed_override = collx_param_int(COLLX_P_SPEED_MBPS);
  for (int i = 0; i < k; i++) {
    if (c[chosen[i]].down)
      COLLX_INFO(COLLX_LOG_INIT, "%s is down; COLLX_MERGE names it, so it is a member that joins once it is up",
                 c[chosen[i]].name);
    make_device(&disc_devs[i], i, c[chosen[i]].name, pick_addr(&c[chosen[i]], f.family, allow_ll),
                speed_override);
  }
  disc_ndev = k > 0 ? apply_plan(disc_devs, k) : 0;
  if (k == 0) explain_none(c, n, &f, disc_why, sizeof disc_why);
  free(chosen);
  free(c);
  freeifaddrs(list);
  return 0;
}

int collx_devices_discover(struct collx_device **devs, int *ndev, const char **why) {
  int rc = 0;
  pthread_mutex_lock(&disc_lock);
  if (!disc_done) {
    rc = discover_locked();
    disc_done = rc == 0;
  }
  pthread_mutex_unlock(&disc_lock);
  if (rc != 0) return -1;
  if (devs) *devs = disc_devs;
  if (ndev) *ndev = disc_ndev;
  if (why) *why = disc_ndev == 0 ? disc_why : NULL;
  return 0;
}

int collx_devices_append(const struct collx_device *d) {
  pthread_mutex_lock(&disc_lock);
  int at = disc_done && disc_ndev < COLLX_MAX_DEVICES ? disc_ndev : -1;
  if (at >= 0) {
    disc_devs[at] = *d;
    disc_ndev++;
  }
  pthread_mutex_unlock(&disc_lock);
  return at;
}

static int fuse_check(const struct collx_device *devs, int nphys, const int *idx, int k,
                      int max_devs, char *why, size_t whylen) {
  if (k < 1 || k > max_devs) {
    snprintf(why, whylen, "%d devices asked for; a virtual device fuses 1 to %d under this ABI", k,
             max_devs);
    return -1;
  }
  int members = 0;
  for (int i = 0; i < k; i++) {
    if (idx[i] < 0 || idx[i] >= nphys) {
      snprintf(why, whylen, "device %d is not one of the %d physical devices", idx[i], nphys);
      return -1;
    }
    for (int j = 0; j < i; j++)
      if (idx[j] == idx[i]) {
        snprintf(why, whylen, "device %d is named twice", idx[i]);
        return -1;
      }
    members += devs[idx[i]].nmembers;
  }
  if (members > COLLX_MAX_MEMBERS) {
    snprintf(why, whylen, "%d interfaces in all; one device stripes over at most %d", members,
             COLLX_MAX_MEMBERS);
    return -1;
  }
  return 0;
}

int collx_device_fuse(const struct collx_device *devs, int nphys, const int *idx, int k,
                      int max_devs, struct collx_device *out, char *why, size_t whylen) {
  if (fuse_check(devs, nphys, idx, k, max_devs, why, whylen) != 0) return -1;
  const struct collx_device *first = &devs[idx[0]];
  memset(out, 0, sizeof *out);
  out->pci_path = first->pci_path; /* NCCL places a virtual NIC by its members */
  out->rail_id = first->rail_id;
  out->plane_id = first->plane_id;
  out->guid = first->guid;
  size_t len = 0;
  for (int i = 0; i < k; i++) {
    const struct collx_device *d = &devs[idx[i]];
    for (int j = 0; j < d->nmembers; j++) out->members[out->nmembers++] = d->members[j];
    out->speed_mbps += d->speed_mbps;
    if (d->streams > out->streams) out->streams = d->streams;
    out->phys[out->nphys++] = idx[i];
    if (d->rail_id != out->rail_id) out->rail_id = COLLX_ID_UNDEF;
    if (d->plane_id != out->plane_id) out->plane_id = COLLX_ID_UNDEF;
    if (i) out->guid ^= d->guid * 0x100000001b3ull;
    int n = snprintf(out->name + len, sizeof out->name - len, "%s%s", i ? "+" : "", d->name);
    if (n > 0) len += (size_t)n < sizeof out->name - len ? (size_t)n : sizeof out->name - len - 1;
  }
  /* Every member carries at least one stream (streams go to members in turn). */
  if (out->streams < out->nmembers) out->streams = out->nmembers;
  return 0;
}
