/*
 * The process side on this machine: collx_topo_setup from the COLLX_*
 * settings, thread pinning (checked with sched_getaffinity), NIC-local
 * memory (checked with hwloc_get_area_membind where binding took), the
 * affinity=off and XML stand-in no-ops, and a restricted process mask.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#endif
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/topo.h"
#include "topo_test.h"

struct pin_job {
  int dev;
  unsigned conn;
  int stream;
  int rc;
  cpu_set_t after;
};

static void *pin_thread(void *arg) {
  struct pin_job *j = arg;
  j->rc = collx_topo_pin_self(j->dev, j->conn, j->stream);
  sched_getaffinity(0, sizeof j->after, &j->after);
  return NULL;
}

/* Pin a fresh thread (so the test's own mask stays) and report its mask. */
static struct pin_job pin_in_thread(int dev, unsigned conn, int stream) {
  struct pin_job j = {dev, conn, stream, -2, {{0}}};
  pthread_t th;
  if (pthread_create(&th, NULL, pin_thread, &j) == 0) pthread_join(th, NULL);
  return j;
}

static void check_pinned(const struct collx_plan *p, int dev, unsigned conn, int stream) {
  struct pin_job j = pin_in_thread(dev, conn, stream);
  int want = collx_plan_cpu(p, dev, conn, stream);
  CHECK(j.rc == 0, "pin dev %d conn %u stream %d returned %d", dev, conn, stream, j.rc);
  CHECK(want >= 0 && CPU_COUNT(&j.after) == 1 && CPU_ISSET(want, &j.after),
        "dev %d conn %u stream %d: pinned to CPU %d only (mask has %d CPUs)", dev, conn, stream,
        want, CPU_COUNT(&j.after));
}

static void check_not_pinned(int dev, const char *why) {
  cpu_set_t before;
  sched_getaffinity(0, sizeof before, &before);
  struct pin_job j = pin_in_thread(dev, 0, 0);
  CHECK(j.rc == 0 && CPU_EQUAL(&before, &j.after), "%s: pin must be a no-op (rc %d)", why, j.rc);
}

static void check_alloc(const struct collx_plan *p, int dev) {
  size_t sizes[] = {1, 4096, 1 << 20, 3 * 1000 * 1000};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char *m = collx_topo_alloc_local(dev, sizes[i]);
    CHECK(m != NULL && ((uintptr_t)m % (uintptr_t)sysconf(_SC_PAGESIZE)) == 0,
          "alloc_local(%d, %zu) page-aligned", dev, sizes[i]);
    if (!m) continue;
    memset(m, 0x5a, sizes[i]);
    CHECK(m[sizes[i] - 1] == 0x5a, "memory usable");
    /* Where binding took, it must be to the NIC's node. */
    hwloc_nodeset_t got = hwloc_bitmap_alloc();
    hwloc_membind_policy_t pol;
    if (hwloc_get_area_membind(p->topo->hw, m, sizes[i], got, &pol, HWLOC_MEMBIND_BYNODESET) == 0 &&
        pol == HWLOC_MEMBIND_BIND)
      CHECK(hwloc_bitmap_isincluded(got, p->devs[dev].nodeset), "bound to the NIC's node");
    hwloc_bitmap_free(got);
    collx_topo_free_local(m, sizes[i]);
  }
  collx_topo_free_local(NULL, 0);
}

/* NICs for the live plan: this machine's first PCI NIC, if any, and lo,
 * which no topology holds. */
static int live_nics(struct collx_plan_nic *nics, char (*names)[COLLX_TOPO_NAME_LEN]) {
  const struct collx_topo *t = collx_topo_process();
  int n = t ? collx_topo_list_nics(t, names, 1) : 0;
  if (n > 1) n = 1;
  if (n) nics[0] = (struct collx_plan_nic){names[0], 0, NULL};
  nics[n++] = (struct collx_plan_nic){"lo", 0, "/sys/devices/virtual/net/lo"};
  return n;
}

static void test_live(void) {
  char names[1][COLLX_TOPO_NAME_LEN];
  struct collx_plan_nic nics[2];
  int n = live_nics(nics, names);
  setenv("COLLX_NSTREAMS", "3", 1); /* the plan lays out what the transport opens */
  const struct collx_plan *p = collx_topo_setup(nics, n);
  unsetenv("COLLX_NSTREAMS");
  CHECK(p != NULL && p->topo->this_system, "plan of this machine");
  if (!p) return;
  CHECK(collx_topo_setup(nics, 1) == p && collx_topo_current_plan() == p, "one plan per process");
  for (int i = 0; i < p->nnics; i++) { /* setup fills in sysfs PCI paths */
    char link[128], real[PATH_MAX];
    snprintf(link, sizeof link, "/sys/class/net/%s/device", p->nics[i].name);
    if (realpath(link, real))
      CHECK(!strcmp(p->nics[i].given_path, real) && p->nics[i].found,
            "%s: PCI path %s from sysfs, found in the topology", p->nics[i].name, real);
  }
  for (int d = 0; d < p->ndevs; d++) {
    CHECK(p->devs[d].streams == 3, "COLLX_NSTREAMS=3 is the plan's stream count (%d)", p->devs[d].streams);
    /* A NIC the topology knows is pinned; one it does not know (lo) is
     * deliberately left to the scheduler. */
    if (p->devs[d].local) {
      check_pinned(p, d, 0, 0);
      check_pinned(p, d, 1, 1);
    } else {
      check_not_pinned(d, "NIC outside the topology");
    }
    check_alloc(p, d);
    collx_topo_log_gpu_locality(d); /* no driver here: silent, no crash */
  }
  CHECK(pin_in_thread(p->ndevs, 0, 0).rc == -1, "pin for a device out of range fails");
  printf("live plan:\n");
  collx_plan_print_text(stdout, p);
  collx_topo_teardown();
  CHECK(collx_topo_current_plan() == NULL, "teardown forgets the plan");
}

static void test_affinity_off(void) {
  char names[1][COLLX_TOPO_NAME_LEN];
  struct collx_plan_nic nics[2];
  setenv("COLLX_CPU_AFFINITY", "off", 1);
  const struct collx_plan *p = collx_topo_setup(nics, live_nics(nics, names));
  CHECK(p && p->settings.affinity == COLLX_AFFINITY_OFF, "affinity off read from the environment");
  if (p) check_not_pinned(0, "COLLX_CPU_AFFINITY=off");
  unsetenv("COLLX_CPU_AFFINITY");
  collx_topo_teardown();
}

static void test_xml_stand_in(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/24em64t-2n6c2t-pci.xml", dir);
  setenv("COLLX_TOPO_XML", path, 1);
  setenv("COLLX_MERGE", "auto", 1);
  struct collx_plan_nic nics[] = {{"eth0", 10000, NULL}, {"eth1", 10000, NULL}};
  const struct collx_plan *p = collx_topo_setup(nics, 2);
  CHECK(p && !p->topo->this_system && p->ndevs == 1 && !strcmp(p->devs[0].name, "eth0+eth1"),
        "COLLX_TOPO_XML stands in for the machine, COLLX_MERGE=auto merges");
  if (p) {
    check_not_pinned(0, "XML stand-in");
    void *m = collx_topo_alloc_local(0, 65536); /* ordinary memory: the nodes are not ours */
    CHECK(m != NULL, "alloc_local with a stand-in topology");
    collx_topo_free_local(m, 65536);
  }
  unsetenv("COLLX_TOPO_XML");
  unsetenv("COLLX_MERGE");
  collx_topo_teardown();
}

/* A process confined to one CPU (taskset) gets its threads there, even
 * where the NIC's local cores are others. */
static void test_restricted_process(void) {
  cpu_set_t all, one;
  sched_getaffinity(0, sizeof all, &all);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all)) last = c;
  if (CPU_COUNT(&all) < 2) {
    printf("restricted process: skipped (one CPU)\n");
    return;
  }
#ifdef __SANITIZE_THREAD__
  /* ThreadSanitizer runs a thread of its own, started before main with the
   * full mask: binding only this thread does not restrict the process, so
   * the process-wide allowed set rightly stays whole. */
  printf("restricted process: skipped under ThreadSanitizer (its own thread keeps the full mask)\n");
  return;
#endif
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  sched_setaffinity(0, sizeof one, &one);
  char names[1][COLLX_TOPO_NAME_LEN];
  struct collx_plan_nic nics[2];
  const struct collx_plan *p = collx_topo_setup(nics, live_nics(nics, names));
  CHECK(p && hwloc_bitmap_weight(p->allowed) == 1 && hwloc_bitmap_isset(p->allowed, (unsigned)last),
        "allowed cpuset follows the process mask");
  for (int d = 0; p && d < p->ndevs; d++) {
    if (p->devs[d].local)
      check_pinned(p, d, 0, 0);
    else
      check_not_pinned(d, "NIC outside the topology, process bound to one CPU");
  }
  sched_setaffinity(0, sizeof all, &all);
  collx_topo_teardown();
}

int main(void) {
  const char *dir = topo_test_dir();
  unsetenv("COLLX_TOPO_XML");
  unsetenv("HWLOC_XMLFILE");
  unsetenv("COLLX_CPU_AFFINITY");
  setenv("COLLX_MERGE", "none", 1);
  test_live();
  test_affinity_off();
  test_restricted_process();
  if (dir) test_xml_stand_in(dir);
  else printf("XML stand-in: skipped (no topologies)\n");
  struct collx_gpu g;
  const struct collx_topo *t = collx_topo_process();
  if (t && collx_cuda_current_gpu(t, &g) == 0) printf("calling thread's GPU: %s\n", g.busid);
  collx_topo_teardown();
  printf("test_bind: %d failures\n", topo_test_failures);
  return topo_test_failures ? 1 : 0;
}
