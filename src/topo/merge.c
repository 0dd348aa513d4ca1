/*
 * The merge policy: which NICs in use become one device.  ncclNet v8 has no
 * virtual devices, so a merged device is what NCCL sees as one NIC; the
 * transport stripes its streams over the members.  Part of the pure
 * planner: reads only the plan's NIC descriptions and settings.
 */
#include "topo/topo_internal.h"

#include <stdlib.h>
#include <string.h>

/* Under `auto`, only NICs with a known place and Ethernet-like links are
 * merged: striping over an IPoIB and an Ethernet port would make the slower
 * one set the pace, and a virtual NIC has no place to share. */
static int auto_candidate(const struct collx_nic_info *n) { return n->found && n->ethernet; }

/* One PCIe switch: the lowest common ancestor is a PCI bridge (a switch
 * port or root port), not the host bridge or anything above it. */
static int same_switch(const struct collx_nic_info *a, const struct collx_nic_info *b) {
  hwloc_obj_t lca = collx_topo_lca(a->pcidev, b->pcidev);
  return lca && lca->type == HWLOC_OBJ_BRIDGE &&
         lca->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

static int same_numa(const struct collx_nic_info *a, const struct collx_nic_info *b) {
  return !hwloc_bitmap_iszero(a->nodeset) && hwloc_bitmap_isequal(a->nodeset, b->nodeset);
}

typedef int (*same_fn)(const struct collx_nic_info *, const struct collx_nic_info *);

static int single(const int *owner, const int *size, int i) { return owner[i] == i && size[i] == 1; }

/* Group NICs still on their own that `same` relates (both relations are
 * equivalences, so comparing with a group's first member is enough). */
static void auto_pass(struct collx_plan *p, int *owner, int *size, same_fn same, const char *why) {
  const struct collx_nic_info *nic = p->nics;
  for (int i = 0; i < p->nnics; i++) {
    if (!single(owner, size, i) || !auto_candidate(&nic[i])) continue;
    for (int j = i + 1; j < p->nnics && size[i] < COLLX_TOPO_MAX_MEMBERS; j++) {
      if (!single(owner, size, j) || !auto_candidate(&nic[j])) continue;
      if (nic[i].speed_mbps != nic[j].speed_mbps || !same(&nic[i], &nic[j])) continue;
      owner[j] = i;
      size[i]++;
      collx_plan_note(p, 0, "COLLX_MERGE=auto: %s joins %s (%s)", nic[j].name, nic[i].name, why);
    }
  }
}

static int nic_index(const struct collx_plan *p, const char *name) {
  for (int i = 0; i < p->nnics; i++)
    if (!strcmp(p->nics[i].name, name)) return i;
  return -1;
}

static int int_cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Resolve the names of one explicit group; 0 and the sorted indexes, or -1
 * with a note saying why the group is ignored. */
static int resolve_group(struct collx_plan *p, const int *owner, const int *size, char *group,
                         int *idx, int *n) {
  char text[512], *save = NULL;
  snprintf(text, sizeof text, "%s", group);
  *n = 0;
  for (char *name = strtok_r(group, "+", &save); name; name = strtok_r(NULL, "+", &save)) {
    int i = nic_index(p, name);
    const char *bad = i < 0 ? "is not a NIC in use" : !single(owner, size, i) ? "is already merged"
                      : *n == COLLX_TOPO_MAX_MEMBERS ? "exceeds the members one device may have"
                                                      : NULL;
    for (int k = 0; k < *n && !bad; k++)
      if (idx[k] == i) bad = "is named twice";
    if (bad) {
      collx_plan_note(p, 1, "COLLX_MERGE: %s %s; group %s ignored", name, bad, text);
      return -1;
    }
    idx[(*n)++] = i;
  }
  qsort(idx, (size_t)*n, sizeof *idx, int_cmp);
  return 0;
}

static void explicit_groups(struct collx_plan *p, int *owner, int *size) {
  char spec[sizeof p->settings.merge_groups], *save = NULL;
  snprintf(spec, sizeof spec, "%s", p->settings.merge_groups);
  for (char *g = strtok_r(spec, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
    int idx[COLLX_TOPO_MAX_MEMBERS], n;
    if (resolve_group(p, owner, size, g, idx, &n) < 0 || n < 2) continue;
    for (int k = 1; k < n; k++) owner[idx[k]] = idx[0];
    size[idx[0]] = n;
  }
}

void collx_plan_merge(struct collx_plan *p, int *owner) {
  int *size = malloc((size_t)p->nnics * sizeof *size);
  for (int i = 0; i < p->nnics; i++) owner[i] = i;
  if (!size) return; /* out of memory: every NIC its own device */
  for (int i = 0; i < p->nnics; i++) size[i] = 1;
  if (p->settings.merge == COLLX_MERGE_AUTO) {
    auto_pass(p, owner, size, same_switch, "one PCIe switch");
    auto_pass(p, owner, size, same_numa, "same NUMA node");
  } else if (p->settings.merge == COLLX_MERGE_LIST) {
    explicit_groups(p, owner, size);
  }
  free(size);
}
