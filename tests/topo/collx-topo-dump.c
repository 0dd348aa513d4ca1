/*
 * collx-topo-dump [--plan|--plan-json] FILE [IFNAME...]: what collx's
 * topology code says about each NIC of an hwloc XML export (all network
 * devices when no name is given), one key=value line per NIC.
 * test_hwloc_ref.sh compares these lines with what hwloc-calc says, hwloc
 * itself being the reference.  --plan and --plan-json print the placement
 * plan for those NICs instead, with the COLLX_* settings of the environment.
 */
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"

static int dump(const struct collx_topo *t, const char *name) {
  struct collx_nic_info nic;
  if (collx_topo_nic_info(t, name, NULL, &nic) < 0) return -1;
  collx_nic_info_print_text(stdout, &nic);
  collx_nic_info_clear(&nic);
  return 0;
}

/* Speed 0 (unknown) for every NIC: an XML export records none. */
static int plan(const struct collx_topo *t, char **names, int n, int json) {
  struct collx_plan_nic nics[256];
  struct collx_plan_settings s;
  for (int i = 0; i < n; i++) nics[i] = (struct collx_plan_nic){names[i], 0, NULL};
  collx_plan_settings_from_env(&s);
  struct collx_plan *p = collx_plan_make(t, nics, n, NULL, &s);
  if (!p) return -1;
  if (json) collx_plan_print_json(stdout, p);
  else collx_plan_print_text(stdout, p);
  collx_plan_free(p);
  return 0;
}

int main(int argc, char **argv) {
  int mode = 0, a = 1; /* 0: NIC lines, 1: plan text, 2: plan JSON */
  if (a < argc && !strcmp(argv[a], "--plan")) mode = 1, a++;
  else if (a < argc && !strcmp(argv[a], "--plan-json")) mode = 2, a++;
  if (a >= argc) {
    fprintf(stderr, "usage: %s [--plan|--plan-json] TOPOLOGY.xml [IFNAME...]\n", argv[0]);
    return 2;
  }
  char why[512], store[256][COLLX_TOPO_NAME_LEN], *names[256];
  struct collx_topo *t = collx_topo_load(argv[a], why, sizeof why);
  if (!t) {
    fprintf(stderr, "%s: %s\n", argv[0], why);
    return 1;
  }
  int n = 0;
  for (int i = a + 1; i < argc && n < 256; i++) names[n++] = argv[i];
  if (n == 0) {
    n = collx_topo_list_nics(t, store, 256);
    for (int i = 0; i < n && i < 256; i++) names[i] = store[i];
    if (n > 256) n = 256;
  }
  int rc = 0;
  if (mode) rc = n ? plan(t, names, n, mode == 2) : 0;
  for (int i = 0; i < n && !mode; i++) rc |= dump(t, names[i]);
  collx_topo_destroy(t);
  return rc ? 1 : 0;
}
