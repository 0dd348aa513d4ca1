/*
 * The placement planner against the real topologies of tests/topo/xml:
 * thread placement (local cores, no shared core while free ones remain,
 * cores before hyperthreads), the merge policies, the fallback with a
 * restricted allowed cpuset, the settings parser, NIC matching by PCI
 * address, and the GPU x NIC distance classes.  Runs without the machine
 * the topologies describe; the NUMA/cpuset reference against hwloc-calc is
 * test_hwloc_ref.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "topo_test.h"

#define MAXNICS 64

/* ---- Helpers --------------------------------------------------------------- */

static struct collx_topo *load(const char *dir, const char *file) {
  char path[1024], why[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  struct collx_topo *t = collx_topo_load(path, why, sizeof why);
  CHECK(t != NULL, "%s: %s", path, why);
  return t;
}

static struct collx_plan_settings settings(const char *aff, const char *merge, int streams) {
  struct collx_plan_settings s;
  char why[512];
  int rc = collx_plan_settings_parse(&s, aff, merge, streams, why, sizeof why);
  CHECK(rc == 0, "settings %s/%s/%d: %s", aff, merge, streams, why);
  return s;
}

/* A plan for `names` ("eth0,eth1"; NULL: every NIC of the topology), all at
 * `speed` Mb/s unless listed in `speeds` order. */
static struct collx_plan *plan_for(const struct collx_topo *t, const char *names, const int *speeds,
                                   hwloc_const_cpuset_t allowed, struct collx_plan_settings s) {
  static char store[MAXNICS][COLLX_TOPO_NAME_LEN];
  struct collx_plan_nic nics[MAXNICS];
  int n = 0;
  if (names) {
    char copy[512], *save = NULL;
    snprintf(copy, sizeof copy, "%s", names);
    for (char *w = strtok_r(copy, ",", &save); w && n < MAXNICS; w = strtok_r(NULL, ",", &save))
      snprintf(store[n++], COLLX_TOPO_NAME_LEN, "%s", w);
  } else {
    n = collx_topo_list_nics(t, store, MAXNICS);
  }
  for (int i = 0; i < n; i++) nics[i] = (struct collx_plan_nic){store[i], speeds ? speeds[i] : 10000, NULL};
  struct collx_plan *p = collx_plan_make(t, nics, n, allowed, &s);
  CHECK(p != NULL, "plan for %s", names ? names : "all NICs");
  return p;
}

/* The device names of a plan, joined by spaces. */
static const char *dev_names(const struct collx_plan *p) {
  static char buf[1024];
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < p->ndevs && at < sizeof buf; i++)
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? " " : "", p->devs[i].name);
  return buf;
}

static int count_warns(const struct collx_plan *p, const char *about) {
  int n = 0;
  for (int i = 0; i < p->nnotes; i++) n += p->notes[i].warn && strstr(p->notes[i].text, about);
  return n;
}

static int core_of(const struct collx_topo *t, int pu) {
  hwloc_obj_t o = hwloc_get_pu_obj_by_os_index(t->hw, (unsigned)pu);
  hwloc_obj_t c = o ? hwloc_get_ancestor_obj_by_type(t->hw, HWLOC_OBJ_CORE, o) : NULL;
  return c ? (int)c->logical_index : 100000 + pu;
}

/* ---- Thread placement invariants ------------------------------------------------ */

/* Every PU of the pin order is allowed and local (or the allowed set when
 * the device falls back or has no locality), and each appears once. */
static void check_pus_local(const struct collx_plan *p, int d) {
  const struct collx_plan_dev *dev = &p->devs[d];
  hwloc_bitmap_t seen = hwloc_bitmap_alloc(), want = hwloc_bitmap_alloc();
  hwloc_bitmap_and(want, dev->cpuset, p->allowed);
  if (dev->fallback || !dev->local) hwloc_bitmap_copy(want, p->allowed);
  for (int k = 0; k < dev->npus; k++) {
    CHECK(hwloc_bitmap_isset(want, (unsigned)dev->pus[k]), "%s: PU %d not local+allowed", dev->name,
          dev->pus[k]);
    CHECK(!hwloc_bitmap_isset(seen, (unsigned)dev->pus[k]), "%s: PU %d twice", dev->name, dev->pus[k]);
    hwloc_bitmap_set(seen, (unsigned)dev->pus[k]);
  }
  CHECK(hwloc_bitmap_isequal(seen, want), "%s: pin order misses PUs", dev->name);
  hwloc_bitmap_free(seen);
  hwloc_bitmap_free(want);
}

/* Cores before hyperthreads: the first entries are one PU per core. */
static void check_cores_first(const struct collx_topo *t, const struct collx_plan_dev *dev) {
  int ncores = 0;
  for (int k = 0; k < dev->npus; k++) {
    int fresh = 1;
    for (int j = 0; j < k; j++) fresh &= core_of(t, dev->pus[j]) != core_of(t, dev->pus[k]);
    if (fresh) {
      CHECK(k == ncores, "%s: core of PU %d comes after a hyperthread", dev->name, dev->pus[k]);
      ncores++;
    }
  }
}

/* Connections opened evenly over a group's devices, S streams each: the
 * first `ncores` threads must land on distinct cores. */
static void check_spread(const struct collx_topo *t, const struct collx_plan *p, int group) {
  int members[MAXNICS], m = 0, ncores = 0, threads = 0;
  for (int d = 0; d < p->ndevs; d++)
    if (p->devs[d].group == group) members[m++] = d;
  if (m == 0 || p->devs[members[0]].npus == 0) return;
  const struct collx_plan_dev *first = &p->devs[members[0]];
  int *used = calloc((size_t)first->npus + 100001, sizeof *used);
  for (int k = 0; k < first->npus; k++) {
    int c = core_of(t, first->pus[k]) % (first->npus + 100000);
    ncores += !used[c];
    used[c] = 1;
  }
  memset(used, 0, ((size_t)first->npus + 100001) * sizeof *used);
  for (unsigned conn = 0; threads < ncores; conn++)
    for (int r = 0; r < m && threads < ncores; r++)
      for (int s = 0; s < p->devs[members[r]].streams && threads < ncores; s++, threads++) {
        int cpu = collx_plan_cpu(p, members[r], conn, s);
        int c = core_of(t, cpu) % (first->npus + 100000);
        CHECK(!used[c], "%s conn %u stream %d: CPU %d shares a core while %d are free",
              p->devs[members[r]].name, conn, s, cpu, ncores - threads);
        used[c] = 1;
      }
  free(used);
}

static void check_placement(const struct collx_topo *t, const struct collx_plan *p) {
  for (int d = 0; d < p->ndevs; d++) {
    if (p->devs[d].npus == 0) continue;
    check_pus_local(p, d);
    check_cores_first(t, &p->devs[d]);
    if (p->devs[d].group == d) check_spread(t, p, d);
  }
}

/* ---- Per topology: generic checks --------------------------------------------------- */

static void check_topology_generic(const char *path) {
  char why[512];
  struct collx_topo *t = collx_topo_load(path, why, sizeof why);
  CHECK(t != NULL, "%s: %s", path, why);
  if (!t) return;
  CHECK(!t->this_system, "%s: an XML file must not pass for this machine", path);
  char names[1][COLLX_TOPO_NAME_LEN];
  if (collx_topo_list_nics(t, names, 1) == 0) { /* nvidiaDGX2.xml: GPUs only */
    collx_topo_destroy(t);
    return;
  }
  const char *merges[] = {"none", "auto"};
  for (int m = 0; m < 2; m++)
    for (int streams = 0; streams <= 3; streams++) {
      struct collx_plan *p = plan_for(t, NULL, NULL, NULL, settings("auto", merges[m], streams));
      if (!p) continue;
      if (m == 0) CHECK(p->ndevs == p->nnics, "%s: merge none made %d devices of %d NICs", path,
                        p->ndevs, p->nnics);
      for (int i = 0; i < p->nnics; i++)
        CHECK(p->nics[i].found, "%s: %s listed but not found", path, p->nics[i].name);
      check_placement(t, p);
      CHECK(count_warns(p, "") == 0, "%s: unexpected WARN: %s", path, p->nnotes ? p->notes[0].text : "");
      collx_plan_free(p);
    }
  collx_topo_destroy(t);
}

/* ---- Merge policies ---------------------------------------------------------------------- */

static void expect_devs(const struct collx_topo *t, const char *names, const int *speeds,
                        const char *merge, const char *want) {
  struct collx_plan *p = plan_for(t, names, speeds, NULL, settings("auto", merge, 2));
  if (!p) return;
  CHECK(!strcmp(dev_names(p), want), "%s, merge %s: got \"%s\", want \"%s\"", t->source, merge,
        dev_names(p), want);
  check_placement(t, p);
  collx_plan_free(p);
}

static void test_merge_auto(const char *dir) {
  struct collx_topo *t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  expect_devs(t, NULL, NULL, "auto", "eth0+eth1 eth2 ib0"); /* ib0 is not Ethernet-like */
  expect_devs(t, NULL, NULL, "none", "eth0 eth1 eth2 ib0");
  int speeds[] = {10000, 1000, 10000, 10000};
  /* eth1 is slower: eth0 finds eth2 on its NUMA node instead. */
  expect_devs(t, NULL, speeds, "auto", "eth0+eth2 eth1 ib0");
  expect_devs(t, "eth0,eth2", NULL, "auto", "eth0+eth2");
  collx_topo_destroy(t);

  t = load(dir, "96em64t-4n4d3ca2co-pci.xml");
  if (!t) return;
  expect_devs(t, NULL, NULL, "auto", "eth0+eth1 eth2+eth3 eth4+eth5 eth6+eth7");
  expect_devs(t, "eth0,eth2,eth4", NULL, "auto", "eth0 eth2 eth4"); /* three NUMA nodes */
  collx_topo_destroy(t);

  t = load(dir, "16intel64-manyVFs.xml");
  if (!t) return;
  /* eth4 and eth5 hang off different ports of one switch. */
  expect_devs(t, NULL, NULL, "auto", "eth0+eth1 eth4+eth5 eth6+eth7");
  expect_devs(t, "eth0,eth4", NULL, "auto", "eth0+eth4"); /* same NUMA node only */
  collx_topo_destroy(t);
}

static void expect_path(const struct collx_topo *t, const char *names, const char *merge,
                        const char *want) {
  struct collx_plan *p = plan_for(t, names, NULL, NULL, settings("auto", merge, 1));
  if (!p) return;
  CHECK(!strcmp(p->devs[0].pci_path, want), "%s %s: pci path %s, want %s", t->source, names,
        p->devs[0].pci_path, want);
  collx_plan_free(p);
}

static void test_merged_paths(const char *dir) {
  struct collx_topo *t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  expect_path(t, "eth0,eth1", "auto", "/sys/devices/pci0000:00/0000:00:01.0");
  /* No common bridge below the host bridge: the first member's path. */
  expect_path(t, "eth0,eth2", "auto", "/sys/devices/pci0000:00/0000:00:01.0/0000:04:00.0");
  expect_path(t, "eth2,ib0", "eth2+ib0", "/sys/devices/pci0000:00/0000:00:05.0/0000:05:00.0");
  collx_topo_destroy(t);
  t = load(dir, "16intel64-manyVFs.xml");
  if (!t) return;
  expect_path(t, "eth4,eth5", "auto",
              "/sys/devices/pci0000:00/0000:00:03.0/0000:06:00.0/0000:07:01.0/0000:09:00.0");
  collx_topo_destroy(t);
}

static void test_merge_explicit(const char *dir) {
  struct collx_topo *t = load(dir, "96em64t-4n4d3ca2co-pci.xml");
  if (!t) return;
  expect_devs(t, NULL, NULL, "eth0+eth7,eth2+eth1", "eth0+eth7 eth1+eth2 eth3 eth4 eth5 eth6");
  struct collx_plan *p = plan_for(t, NULL, NULL, NULL, settings("auto", "eth0+eth7", 1));
  if (p) {
    const struct collx_plan_dev *d = &p->devs[0];
    CHECK(d->speed_mbps == 20000, "merged speed %d", d->speed_mbps);
    CHECK(hwloc_bitmap_weight(d->nodeset) == 2 && hwloc_bitmap_isset(d->nodeset, 0) &&
          hwloc_bitmap_isset(d->nodeset, 3), "eth0+eth7 spans NUMA nodes 0 and 3");
    CHECK(d->npus == 48, "eth0+eth7 pins over both nodes' 48 PUs, not %d", d->npus);
    collx_plan_free(p);
  }
  p = plan_for(t, NULL, NULL, NULL, settings("auto", "eth0+eth9", 1));
  if (p) {
    CHECK(p->ndevs == p->nnics && count_warns(p, "eth9 is not a NIC in use") == 1,
          "unknown member: group ignored with one WARN (%s)", dev_names(p));
    collx_plan_free(p);
  }
  p = plan_for(t, NULL, NULL, NULL, settings("auto", "eth0+eth1,eth1+eth2", 1));
  if (p) {
    CHECK(!strcmp(dev_names(p), "eth0+eth1 eth2 eth3 eth4 eth5 eth6 eth7") &&
          count_warns(p, "eth1 is already merged") == 1, "overlapping groups: %s", dev_names(p));
    collx_plan_free(p);
  }
  collx_topo_destroy(t);
}

/* ---- Allowed cpuset, affinity modes --------------------------------------------------------- */

static void test_restricted(const char *dir) {
  struct collx_topo *t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  hwloc_obj_t node1 = hwloc_get_numanode_obj_by_os_index(t->hw, 1);
  struct collx_plan *p = plan_for(t, NULL, NULL, node1->cpuset, settings("auto", "none", 2));
  if (p) {
    for (int d = 0; d < p->ndevs; d++) {
      CHECK(p->devs[d].fallback, "%s: no local CPU allowed, must fall back", p->devs[d].name);
      CHECK(count_warns(p, p->devs[d].name) == 1, "%s: exactly one WARN", p->devs[d].name);
      CHECK(hwloc_bitmap_isset(node1->cpuset, (unsigned)collx_plan_cpu(p, d, 0, 0)),
            "%s: fallback pins within the allowed cpuset", p->devs[d].name);
    }
    CHECK(p->nnotes == p->ndevs, "one note per device, %d notes", p->nnotes);
    check_placement(t, p);
    collx_plan_free(p);
  }
  /* Part of the local cores allowed: use those, no warning. */
  hwloc_bitmap_t some = hwloc_bitmap_alloc();
  hwloc_bitmap_list_sscanf(some, "0,1,2,3");
  p = plan_for(t, "eth0", NULL, some, settings("auto", "none", 1));
  if (p) {
    CHECK(p->devs[0].npus == 2 && !p->devs[0].fallback && count_warns(p, "") == 0,
          "eth0 with CPUs 0-3 allowed pins to 0,2 (npus %d)", p->devs[0].npus);
    check_placement(t, p);
    collx_plan_free(p);
  }
  hwloc_bitmap_free(some);
  collx_topo_destroy(t);
}

static void test_affinity_modes(const char *dir) {
  struct collx_topo *t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  struct collx_plan *p = plan_for(t, NULL, NULL, NULL, settings("off", "none", 2));
  for (int d = 0; p && d < p->ndevs; d++)
    CHECK(p->devs[d].npus == 0 && collx_plan_cpu(p, d, 3, 1) == -1, "off: no pinning");
  collx_plan_free(p);

  p = plan_for(t, "eth0,eth1", NULL, NULL, settings("1,3,5", "none", 1));
  if (p) {
    int want[] = {1, 3, 5};
    CHECK(p->devs[0].npus == 3, "list: 3 CPUs, got %d", p->devs[0].npus);
    for (int k = 0; k < 3 && k < p->devs[0].npus; k++)
      CHECK(p->devs[0].pus[k] == want[k], "list order");
    /* Two devices on one list interleave: eth0 conn 0 -> 1, eth1 conn 0 -> 3. */
    CHECK(collx_plan_cpu(p, 0, 0, 0) == 1 && collx_plan_cpu(p, 1, 0, 0) == 3 &&
          collx_plan_cpu(p, 0, 1, 0) == 5, "list interleave");
    collx_plan_free(p);
  }
  p = plan_for(t, "eth0", NULL, NULL, settings("1,3,999", "none", 1));
  if (p) {
    CHECK(p->devs[0].npus == 2 && count_warns(p, "outside the allowed") == 1, "list beyond");
    collx_plan_free(p);
  }
  p = plan_for(t, "eth0", NULL, NULL, settings("999", "none", 1));
  if (p) {
    CHECK(p->devs[0].npus == 24 && count_warns(p, "none of these CPUs") == 1, "list fallback");
    collx_plan_free(p);
  }
  collx_topo_destroy(t);
}

/* The exact pin order and the interleaving of devices sharing cores. */
static void test_pin_order(const char *dir) {
  struct collx_topo *t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  struct collx_plan *p = plan_for(t, "eth0,eth1", NULL, NULL, settings("auto", "none", 2));
  if (p) {
    /* Core L#k holds PUs 2k and 2k+12: cores first, then their twins. */
    int want[] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22};
    CHECK(p->devs[0].npus == 12, "eth0 has 12 local PUs");
    for (int k = 0; k < 12 && k < p->devs[0].npus; k++)
      CHECK(p->devs[0].pus[k] == want[k], "pin order entry %d: %d", k, p->devs[0].pus[k]);
    CHECK(p->devs[0].group == p->devs[1].group && p->devs[1].group_rank == 1, "one group");
    /* eth0 conn 0 -> 0,2; eth1 conn 0 -> 4,6; eth0 conn 1 -> 8,10; then twins. */
    CHECK(collx_plan_cpu(p, 0, 0, 0) == 0 && collx_plan_cpu(p, 0, 0, 1) == 2 &&
          collx_plan_cpu(p, 1, 0, 0) == 4 && collx_plan_cpu(p, 1, 0, 1) == 6 &&
          collx_plan_cpu(p, 0, 1, 1) == 10 && collx_plan_cpu(p, 1, 1, 0) == 12,
          "interleaved connections");
    CHECK(collx_plan_cpu(p, 2, 0, 0) == -1 && collx_plan_cpu(p, -1, 0, 0) == -1, "bad device");
    collx_plan_free(p);
  }
  collx_topo_destroy(t);
}

/* ---- Settings, matching, GPUs ------------------------------------------------------------------ */

static void test_settings_parse(void) {
  struct collx_plan_settings s;
  char why[512];
  CHECK(collx_plan_settings_parse(&s, "auto", "none", 0, why, sizeof why) == 0 &&
        s.affinity == COLLX_AFFINITY_AUTO && s.merge == COLLX_MERGE_NONE, "defaults");
  CHECK(collx_plan_settings_parse(&s, "OFF", "AUTO", 4, why, sizeof why) == 0 &&
        s.affinity == COLLX_AFFINITY_OFF && s.merge == COLLX_MERGE_AUTO && s.streams == 4, "off/auto");
  CHECK(collx_plan_settings_parse(&s, "0-3,8", "eth0+eth1,eth2+eth3", 1, why, sizeof why) == 0 &&
        s.affinity == COLLX_AFFINITY_LIST && s.merge == COLLX_MERGE_LIST, "lists");
  const char *bad_aff[] = {"3-1", "1,,2", "x", "1-", "-1", ",1", "1,"};
  for (size_t i = 0; i < sizeof bad_aff / sizeof *bad_aff; i++) {
    int rc = collx_plan_settings_parse(&s, bad_aff[i], "none", 0, why, sizeof why);
    CHECK(rc == -1 && s.affinity == COLLX_AFFINITY_AUTO && strstr(why, "COLLX_CPU_AFFINITY"),
          "affinity %s must be refused", bad_aff[i]);
  }
  const char *bad_merge[] = {"eth0", "eth0+", "+eth0", "eth0++eth1", "eth0+eth1,", "a+b,c", "a +b"};
  for (size_t i = 0; i < sizeof bad_merge / sizeof *bad_merge; i++) {
    int rc = collx_plan_settings_parse(&s, "auto", bad_merge[i], 0, why, sizeof why);
    CHECK(rc == -1 && s.merge == COLLX_MERGE_NONE && strstr(why, "COLLX_MERGE"),
          "merge %s must be refused", bad_merge[i]);
  }
  CHECK(collx_plan_settings_parse(&s, "auto", "none", 17, why, sizeof why) == -1 && s.streams == 0,
        "streams 17");
}

static void test_match_by_pci(const char *dir) {
  struct collx_topo *t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  struct collx_nic_info nic;
  const char *paths[] = {"/sys/devices/pci0000:00/0000:00:01.0/0000:04:00.1",
                         "/sys/devices/pci0000:00/0000:00:01.0/0000:04:00.1/virtio7"};
  for (int i = 0; i < 2; i++) {
    CHECK(collx_topo_nic_info(t, "enp4s0f1", paths[i], &nic) == 0, "nic info");
    CHECK(nic.found && !strcmp(nic.busid, "0000:04:00.1") && nic.ethernet,
          "renamed NIC matched by PCI address %s", paths[i]);
    collx_nic_info_clear(&nic);
  }
  CHECK(collx_topo_nic_info(t, "veth0", "/sys/devices/virtual/net/veth0", &nic) == 0 && !nic.found &&
        hwloc_bitmap_isequal(nic.cpuset, hwloc_topology_get_topology_cpuset(t->hw)),
        "virtual NIC: no locality, the whole machine");
  collx_nic_info_clear(&nic);
  /* A virtual NIC in a plan: no locality to gain, so its threads are not
   * pinned (they would only compete for single cores); one INFO. */
  struct collx_plan *p = plan_for(t, "eth0,veth0", NULL, NULL, settings("auto", "auto", 1));
  if (p) {
    CHECK(p->ndevs == 2 && !p->devs[1].local && p->devs[1].npus == 0 && count_warns(p, "") == 0 &&
              collx_plan_cpu(p, 1, 0, 0) == -1,
          "veth0 left unpinned");
    collx_plan_free(p);
  }
  collx_topo_destroy(t);
}

static hwloc_obj_t gpu_named(const struct collx_gpu *g, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(g[i].name, name)) return g[i].pcidev;
  return NULL;
}

static void test_gpus(const char *dir) {
  struct collx_topo *t = load(dir, "nvidiaDGX2.xml");
  if (!t) return;
  struct collx_gpu *g;
  int n = collx_topo_gpus(t, &g);
  CHECK(n == 16, "DGX-2 has 16 GPUs, found %d", n);
  hwloc_obj_t g0 = gpu_named(g, n, "nvml0");
  struct { const char *other; enum collx_dist want; } cases[] = {
      {"nvml1", COLLX_DIST_SWITCH}, {"nvml2", COLLX_DIST_SWITCH}, /* nested PLX switches */
      {"nvml4", COLLX_DIST_NUMA},   {"nvml8", COLLX_DIST_SYS}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    enum collx_dist d = collx_topo_distance(t, g0, gpu_named(g, n, cases[i].other));
    CHECK(d == cases[i].want, "nvml0-%s: %s", cases[i].other, collx_dist_name(d));
  }
  free(g);
  collx_topo_destroy(t);

  t = load(dir, "24em64t-2n6c2t-pci.xml");
  if (!t) return;
  struct collx_plan *p = plan_for(t, NULL, NULL, NULL, settings("auto", "none", 1));
  struct collx_gpu_matrix m;
  if (p && collx_gpu_matrix_make(t, p->nics, p->nnics, &m) == 0) {
    /* Three NVIDIA 3D devices without OS device: 06:00.0 beside the NICs,
     * 14:00.0 and 11:00.0 on the other socket. */
    CHECK(m.ngpus == 3 && m.nnics == 4, "matrix %dx%d", m.ngpus, m.nnics);
    for (int i = 0; i < m.ngpus; i++) {
      enum collx_dist want = !strcmp(m.gpus[i].busid, "0000:06:00.0") ? COLLX_DIST_HOSTBRIDGE
                                                                       : COLLX_DIST_SYS;
      for (int j = 0; j < m.nnics; j++)
        CHECK(m.dist[i * m.nnics + j] == want, "%s-%s: %s", m.gpus[i].busid, m.nic_names[j],
              collx_dist_name(m.dist[i * m.nnics + j]));
    }
    collx_gpu_matrix_free(&m);
  }
  collx_plan_free(p);
  collx_topo_destroy(t);
}

int main(void) {
  const char *dir = topo_test_dir();
  if (!dir) {
    fprintf(stderr, "FAIL: tests/topo/xml not found (COLLX_TOPO_DIR overrides)\n");
    return 1;
  }
  char **files;
  int n = topo_test_list(dir, &files);
  CHECK(n >= 4, "%s holds %d topologies", dir, n);
  for (int i = 0; i < n; i++) check_topology_generic(files[i]);
  topo_test_list_free(files, n);
  test_settings_parse();
  test_merge_auto(dir);
  test_merged_paths(dir);
  test_merge_explicit(dir);
  test_restricted(dir);
  test_affinity_modes(dir);
  test_pin_order(dir);
  test_match_by_pci(dir);
  test_gpus(dir);
  printf("test_plan: %d topologies, %d failures\n", n, topo_test_failures);
  return topo_test_failures ? 1 : 0;
}
