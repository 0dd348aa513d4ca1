/*
 * The placement planner: a pure function of the topology, the NICs in use,
 * the allowed cpuset and the settings.  No environment, no sysfs, no
 * logging: whatever deserves a warning is recorded in plan->notes, and the
 * caller decides where it goes (the plugin's log, a test's assertion).
 */
#include "topo/topo_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/netdev.h"

_Static_assert(COLLX_TOPO_MAX_MEMBERS == COLLX_MAX_MEMBERS,
               "a plan device must fit in a struct collx_device");

/* Most streams per connection the planner lays out (COLLX_NSTREAMS's range). */
#define MAX_STREAMS 16

/* ---- Settings ------------------------------------------------------------ */

/* Strict "N", "N-M" items separated by commas.  hwloc's own list parser
 * accepts "3-1" and "1,,2", which would hide a typo in the setting. */
static int cpulist_parse(const char *s, hwloc_bitmap_t b) {
  if (b) hwloc_bitmap_zero(b);
  if (!*s) return -1;
  while (*s) {
    char *end;
    if (!isdigit((unsigned char)*s)) return -1;
    unsigned long lo = strtoul(s, &end, 10), hi = lo;
    if (*end == '-') {
      if (!isdigit((unsigned char)end[1])) return -1;
      hi = strtoul(end + 1, &end, 10);
    }
    if (hi < lo || hi > 65535) return -1;
    if (b) hwloc_bitmap_set_range(b, (unsigned)lo, (int)hi);
    if (*end == ',' && end[1]) end++;
    else if (*end) return -1;
    s = end;
  }
  return 0;
}

/* "a+b,c+d": groups of at least two non-empty names. */
static int groups_valid(const char *s) {
  int names = 0, len = 0;
  for (;; s++) {
    if (*s == '+' || *s == ',' || !*s) {
      if (len == 0) return 0;
      names++;
      len = 0;
      if (*s != '+') {
        if (names < 2) return 0;
        names = 0;
      }
      if (!*s) return 1;
    } else if (isspace((unsigned char)*s)) {
      return 0;
    } else {
      len++;
    }
  }
}

static int parse_affinity(struct collx_plan_settings *s, const char *v, char *why, size_t len) {
  if (!v || !*v || !strcasecmp(v, "auto")) return 0;
  if (!strcasecmp(v, "off")) {
    s->affinity = COLLX_AFFINITY_OFF;
    return 0;
  }
  if (strlen(v) >= sizeof s->cpu_list || cpulist_parse(v, NULL) < 0) {
    snprintf(why, len, "COLLX_CPU_AFFINITY=%s is neither auto, off nor a CPU list like 0-3,8", v);
    return -1;
  }
  s->affinity = COLLX_AFFINITY_LIST;
  snprintf(s->cpu_list, sizeof s->cpu_list, "%s", v);
  return 0;
}

static int parse_merge(struct collx_plan_settings *s, const char *v, char *why, size_t len) {
  if (!v || !*v || !strcasecmp(v, "none")) return 0;
  if (!strcasecmp(v, "auto")) {
    s->merge = COLLX_MERGE_AUTO;
    return 0;
  }
  if (strlen(v) >= sizeof s->merge_groups || !groups_valid(v)) {
    snprintf(why, len, "COLLX_MERGE=%s is neither none, auto nor groups like eth0+eth1,eth2+eth3",
             v);
    return -1;
  }
  s->merge = COLLX_MERGE_LIST;
  snprintf(s->merge_groups, sizeof s->merge_groups, "%s", v);
  return 0;
}

int collx_plan_settings_parse(struct collx_plan_settings *s, const char *affinity,
                              const char *merge, long streams, char *why, size_t why_len) {
  char w[3][384] = {"", "", ""};
  memset(s, 0, sizeof *s);
  int bad = parse_affinity(s, affinity, w[0], sizeof w[0]);
  bad |= parse_merge(s, merge, w[1], sizeof w[1]);
  if (streams < 0 || streams > MAX_STREAMS) {
    snprintf(w[2], sizeof w[2], "COLLX_NSTREAMS=%ld is outside 0-%d", streams, MAX_STREAMS);
    bad = -1;
  } else {
    s->streams = (int)streams;
  }
  if (bad && why) snprintf(why, why_len, "%s", w[0][0] ? w[0] : w[1][0] ? w[1] : w[2]);
  return bad ? -1 : 0;
}

/* ---- Notes ---------------------------------------------------------------- */

void collx_plan_note(struct collx_plan *p, int warn, const char *fmt, ...) {
  struct collx_plan_note *n = realloc(p->notes, (size_t)(p->nnotes + 1) * sizeof *n);
  if (!n) return; /* a lost note is no reason to lose the plan */
  p->notes = n;
  n += p->nnotes++;
  n->warn = warn;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->text, sizeof n->text, fmt, ap);
  va_end(ap);
}

/* ---- Inputs ----------------------------------------------------------------- */

/* Only PUs the topology has count; a caller's mask from another machine
 * must not make the plan pin to CPUs that do not exist. */
static int init_allowed(struct collx_plan *p, hwloc_const_cpuset_t allowed) {
  hwloc_topology_t hw = p->topo->hw;
  p->allowed = hwloc_bitmap_dup(allowed ? allowed : hwloc_topology_get_allowed_cpuset(hw));
  if (!p->allowed) return -1;
  hwloc_bitmap_and(p->allowed, p->allowed, hwloc_topology_get_topology_cpuset(hw));
  if (hwloc_bitmap_iszero(p->allowed)) {
    collx_plan_note(p, 1, "the allowed cpuset holds no CPU of the topology; "
                          "the topology's allowed cpuset is used instead");
    hwloc_bitmap_copy(p->allowed, hwloc_topology_get_allowed_cpuset(hw));
  }
  return 0;
}

static int describe_nics(struct collx_plan *p, const struct collx_plan_nic *in, int n) {
  p->nics = calloc((size_t)n, sizeof *p->nics);
  if (!p->nics) return -1;
  for (int i = 0; i < n; i++) {
    struct collx_nic_info *nic = &p->nics[i];
    if (collx_topo_nic_info(p->topo, in[i].name, in[i].pci_path, nic) < 0) return -1;
    p->nnics = i + 1;
    nic->speed_mbps = in[i].speed_mbps > 0 ? in[i].speed_mbps : 0;
    snprintf(nic->given_path, sizeof nic->given_path, "%s", in[i].pci_path ? in[i].pci_path : "");
  }
  return 0;
}

/* ---- Devices ------------------------------------------------------------------ */

static const char *nic_path(const struct collx_nic_info *nic) {
  if (nic->given_path[0]) return nic->given_path; /* what the kernel says wins */
  return nic->found ? nic->pci_path : "";
}

/* Length of the longest common prefix of a and b that ends at a '/'. */
static size_t common_dir(const char *a, const char *b) {
  size_t i = 0, dir = 0;
  for (; a[i] && a[i] == b[i]; i++)
    if (a[i] == '/') dir = i;
  if ((!a[i] || a[i] == '/') && (!b[i] || b[i] == '/')) dir = i;
  return dir;
}

/* Where NCCL should see a merged device: at the bridge its members share
 * when they share one below the host bridge, else where its first is. */
static void merged_path(const struct collx_plan *p, struct collx_plan_dev *d) {
  const char *first = nic_path(&p->nics[d->member[0]]);
  size_t keep = strlen(first);
  for (int m = 1; m < d->nmembers && keep; m++) {
    const char *other = nic_path(&p->nics[d->member[m]]);
    size_t c = *other ? common_dir(first, other) : 0;
    if (c < keep) keep = c;
  }
  snprintf(d->pci_path, sizeof d->pci_path, "%s", first);
  const char *last = d->pci_path + keep;
  while (last > d->pci_path && last[-1] != '/') last--;
  unsigned v[4];
  char comp[64];
  snprintf(comp, sizeof comp, "%.*s", (int)(d->pci_path + keep - last), last);
  if (keep && collx_busid_parse(comp, v) == 0) d->pci_path[keep] = '\0';
}

static void add_member(struct collx_plan *p, struct collx_plan_dev *d, int i) {
  const struct collx_nic_info *nic = &p->nics[i];
  d->member[d->nmembers++] = i;
  size_t at = strlen(d->name);
  snprintf(d->name + at, sizeof d->name - at, "%s%s", at ? "+" : "", nic->name);
  d->speed_mbps += nic->speed_mbps;
  /* A member without locality adds none: the others' still holds. */
  if (!nic->found) return;
  hwloc_bitmap_or(d->cpuset, d->cpuset, nic->cpuset);
  hwloc_bitmap_or(d->nodeset, d->nodeset, nic->nodeset);
  d->local = 1;
}

static int fill_dev(struct collx_plan *p, struct collx_plan_dev *d, const int *owner, int lead) {
  d->cpuset = hwloc_bitmap_alloc();
  d->nodeset = hwloc_bitmap_alloc();
  if (!d->cpuset || !d->nodeset) return -1;
  for (int i = lead; i < p->nnics; i++)
    if (owner[i] == lead) add_member(p, d, i);
  if (!d->local) { /* no member in the topology: the whole machine */
    hwloc_bitmap_copy(d->cpuset, hwloc_topology_get_topology_cpuset(p->topo->hw));
    hwloc_bitmap_copy(d->nodeset, hwloc_topology_get_topology_nodeset(p->topo->hw));
  }
  if (d->nmembers == 1)
    snprintf(d->pci_path, sizeof d->pci_path, "%s", nic_path(&p->nics[lead]));
  else
    merged_path(p, d);
  return 0;
}

static int build_devs(struct collx_plan *p) {
  int *owner = malloc((size_t)p->nnics * sizeof *owner);
  if (!owner) return -1;
  collx_plan_merge(p, owner);
  int ndevs = 0;
  for (int i = 0; i < p->nnics; i++) ndevs += owner[i] == i;
  p->devs = calloc((size_t)ndevs, sizeof *p->devs);
  int rc = p->devs ? 0 : -1;
  for (int i = 0; i < p->nnics && rc == 0; i++) {
    if (owner[i] != i) continue;
    rc = fill_dev(p, &p->devs[p->ndevs++], owner, i);
  }
  free(owner);
  return rc;
}

/* ---- Thread placement ------------------------------------------------------- */

struct pu_key {
  int rank;  /* how many PUs of the same core precede it: 0 = first thread */
  int core;  /* the core's logical index (the PU's own when it has no core) */
  int pu;    /* PU OS index */
};

static int pu_key_cmp(const void *a, const void *b) {
  const struct pu_key *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->core < y->core ? -1 : x->core > y->core;
}

/* The PUs of `cand` in pin order: one PU of every core, in core order,
 * before any second hyperthread.  Returns the count; *ncores gets the
 * number of distinct cores. */
static int order_pus(hwloc_topology_t hw, hwloc_const_cpuset_t cand, int **out, int *ncores) {
  int n = 0, cap = hwloc_bitmap_weight(cand);
  struct pu_key *k = calloc((size_t)(cap > 0 ? cap : 1), sizeof *k);
  *out = malloc((size_t)(cap > 0 ? cap : 1) * sizeof **out);
  if (!k || !*out) {
    free(k);
    return -1;
  }
  *ncores = 0;
  for (hwloc_obj_t pu = NULL; n < cap && (pu = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_PU, pu));) {
    if (!hwloc_bitmap_isset(cand, pu->os_index)) continue;
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(hw, HWLOC_OBJ_CORE, pu);
    k[n].core = core ? (int)core->logical_index : 1000000 + (int)pu->logical_index;
    k[n].pu = (int)pu->os_index;
    for (int j = 0; j < n; j++) k[n].rank += k[j].core == k[n].core;
    *ncores += k[n].rank == 0;
    n++;
  }
  qsort(k, (size_t)n, sizeof *k, pu_key_cmp);
  for (int i = 0; i < n; i++) (*out)[i] = k[i].pu;
  free(k);
  return n;
}

/* COLLX_CPU_AFFINITY=LIST: the list, within the allowed cpuset. */
static hwloc_bitmap_t list_candidates(struct collx_plan *p) {
  hwloc_bitmap_t want = hwloc_bitmap_alloc(), c = hwloc_bitmap_alloc();
  if (!want || !c) goto fail;
  if (cpulist_parse(p->settings.cpu_list, want) < 0) hwloc_bitmap_zero(want);
  hwloc_bitmap_and(c, want, p->allowed);
  if (hwloc_bitmap_iszero(c)) {
    collx_plan_note(p, 1, "COLLX_CPU_AFFINITY=%s: none of these CPUs is allowed; "
                          "threads use the allowed cpuset instead", p->settings.cpu_list);
    hwloc_bitmap_copy(c, p->allowed);
  } else if (!hwloc_bitmap_isincluded(want, p->allowed)) {
    collx_plan_note(p, 1, "COLLX_CPU_AFFINITY=%s: CPUs outside the allowed cpuset are skipped",
                    p->settings.cpu_list);
  }
  hwloc_bitmap_free(want);
  return c;
fail:
  hwloc_bitmap_free(want);
  hwloc_bitmap_free(c);
  return NULL;
}

/* The CPUs device d's threads may run on, and why when it is not local. */
static hwloc_bitmap_t candidates(struct collx_plan *p, struct collx_plan_dev *d,
                                 hwloc_const_bitmap_t list) {
  if (list) return hwloc_bitmap_dup(list);
  hwloc_bitmap_t c = hwloc_bitmap_alloc();
  if (!c) return NULL;
  if (!d->local) {
    if (p->settings.affinity == COLLX_AFFINITY_AUTO)
      collx_plan_note(p, 0, "%s is not in the topology (virtual NIC?): its threads are not "
                            "pinned, there being no locality to gain", d->name);
    hwloc_bitmap_copy(c, p->allowed);
    return c;
  }
  hwloc_bitmap_and(c, d->cpuset, p->allowed);
  if (hwloc_bitmap_iszero(c)) {
    char local[128], allowed[128];
    hwloc_bitmap_list_snprintf(local, sizeof local, d->cpuset);
    hwloc_bitmap_list_snprintf(allowed, sizeof allowed, p->allowed);
    if (p->settings.affinity == COLLX_AFFINITY_AUTO) {
      collx_plan_note(p, 1, "%s: none of its local CPUs (%s) is in the allowed cpuset (%s); "
                            "its threads use the allowed cpuset instead", d->name, local, allowed);
      d->fallback = 1;
    }
    hwloc_bitmap_copy(c, p->allowed);
  }
  return c;
}

/* Streams per connection when COLLX_NSTREAMS=0: the policy of streams.c
 * over the CPUs this device's connections may use (its candidates, shared
 * with the devices of its group). */
static int auto_streams(struct collx_plan_dev *d, int ncpus, int local_ranks) {
  d->stream_cpus = ncpus / (d->group_size > 0 ? d->group_size : 1);
  return collx_streams_default(d->speed_mbps, d->stream_cpus, local_ranks);
}

/* Devices with the same candidate CPUs form a group and interleave their
 * connections over them (see collx_plan_cpu). */
static void assign_groups(struct collx_plan *p, hwloc_bitmap_t *cand) {
  for (int i = 0; i < p->ndevs; i++) {
    struct collx_plan_dev *d = &p->devs[i];
    d->group = i;
    for (int j = 0; j < i && d->group == i; j++)
      if (hwloc_bitmap_isequal(cand[i], cand[j])) d->group = p->devs[j].group;
    for (int j = 0; j < i; j++) d->group_rank += p->devs[j].group == d->group;
  }
  for (int i = 0; i < p->ndevs; i++)
    for (int j = 0; j < p->ndevs; j++) p->devs[i].group_size += p->devs[j].group == p->devs[i].group;
}

static int place_devs(struct collx_plan *p) {
  hwloc_bitmap_t list = NULL, *cand = calloc((size_t)p->ndevs, sizeof *cand);
  int rc = cand ? 0 : -1;
  if (rc == 0 && p->settings.affinity == COLLX_AFFINITY_LIST && !(list = list_candidates(p)))
    rc = -1;
  for (int i = 0; i < p->ndevs && rc == 0; i++)
    if (!(cand[i] = candidates(p, &p->devs[i], list))) rc = -1;
  if (rc == 0) assign_groups(p, cand);
  for (int i = 0; i < p->ndevs && rc == 0; i++) {
    struct collx_plan_dev *d = &p->devs[i];
    int ncores = 0, n = order_pus(p->topo->hw, cand[i], &d->pus, &ncores);
    if (n < 0) rc = -1;
    /* Pinning pays where it keeps a thread near its NIC.  For a NIC the
     * topology does not know (loopback, veth, a tunnel) one core per
     * thread only competes with the application's own threads. */
    int unplaced = p->settings.affinity == COLLX_AFFINITY_AUTO && !d->local;
    d->npus = p->settings.affinity == COLLX_AFFINITY_OFF || n < 0 || unplaced ? 0 : n;
    d->streams = p->settings.streams > 0 ? p->settings.streams : auto_streams(d, n > 0 ? n : 1, p->settings.local_ranks);
    /* Streams go to a merged device's members in turn: each gets one. */
    if (p->settings.streams == 0 && d->streams < d->nmembers)
      d->streams = d->nmembers < MAX_STREAMS ? d->nmembers : MAX_STREAMS;
    if (!d->stream_cpus) d->stream_cpus = (n > 0 ? n : 1) / (d->group_size > 0 ? d->group_size : 1);
    d->threads = p->settings.threads > 0 ? p->settings.threads
                                         : collx_pool_default(d->stream_cpus, p->settings.local_ranks, d->streams);
  }
  for (int i = 0; cand && i < p->ndevs; i++) hwloc_bitmap_free(cand[i]);
  free(cand);
  hwloc_bitmap_free(list);
  return rc;
}

/* ---- The planner ---------------------------------------------------------------- */

struct collx_plan *collx_plan_make(const struct collx_topo *t, const struct collx_plan_nic *nics,
                                   int nnics, hwloc_const_cpuset_t allowed,
                                   const struct collx_plan_settings *s) {
  if (!t || !nics || nnics <= 0 || !s) return NULL;
  struct collx_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->topo = t;
  p->settings = *s;
  if (init_allowed(p, allowed) < 0 || describe_nics(p, nics, nnics) < 0 || build_devs(p) < 0 ||
      place_devs(p) < 0) {
    collx_plan_free(p);
    return NULL;
  }
  return p;
}

void collx_plan_free(struct collx_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nnics; i++) collx_nic_info_clear(&p->nics[i]);
  for (int i = 0; p->devs && i < p->ndevs; i++) {
    hwloc_bitmap_free(p->devs[i].cpuset);
    hwloc_bitmap_free(p->devs[i].nodeset);
    free(p->devs[i].pus);
  }
  hwloc_bitmap_free(p->allowed);
  free(p->nics);
  free(p->devs);
  free(p->notes);
  free(p);
}

/* Connection k of the r-th of m devices in a group is the group's
 * connection k*m+r; its S streams take the next S entries of the pin
 * order.  So while fewer threads than cores exist, no two share a core,
 * provided the devices of a group carry similar connection counts (NCCL
 * spreads its channels over the NICs evenly). */
int collx_plan_cpu(const struct collx_plan *p, int dev, unsigned conn, int stream) {
  if (!p || dev < 0 || dev >= p->ndevs) return -1;
  const struct collx_plan_dev *d = &p->devs[dev];
  if (d->npus == 0) return -1;
  unsigned long long g = (unsigned long long)conn * (unsigned)d->group_size + (unsigned)d->group_rank;
  unsigned long long slot = g * (unsigned)d->streams + (unsigned)(stream > 0 ? stream : 0);
  return d->pus[slot % (unsigned)d->npus];
}
