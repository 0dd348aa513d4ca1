/*
 * Virtual devices (makeVDevice: up to 8 members under ncclNet v12, 4 under
 * v9-v11) and rail / plane ids (COLLX_RAIL_ID, COLLX_PLANE_ID and the
 * automatic rail rule), on hand-made device tables.
 */
#include <stdio.h>
#include <string.h>

#include "core/device.h"
#include "core/rail.h"
#include "../common/check.h"

#define NDEV 10

static struct collx_device devs[NDEV];

static void make_table(void) {
  memset(devs, 0, sizeof devs);
  for (int i = 0; i < NDEV; i++) {
    struct collx_device *d = &devs[i];
    snprintf(d->name, sizeof d->name, "eth%d", i);
    d->nmembers = i == 9 ? 2 : 1; /* eth9: a COLLX_MERGE device of two */
    for (int m = 0; m < d->nmembers; m++) snprintf(d->members[m].ifname, IF_NAMESIZE, "if%d.%d", i, m);
    d->speed_mbps = 100000;
    d->guid = 1000 + (uint64_t)i;
    d->nphys = 1;
    d->phys[0] = i;
    d->rail_id = i % 2;
    d->plane_id = 0;
  }
}

static void check_fuse(void) {
  struct collx_device v;
  char why[160];
  int eight[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(collx_device_fuse(devs, NDEV, eight, 8, 8, &v, why, sizeof why) == 0, "8 devices, limit 8: %s", why);
  CHECK(v.nmembers == 8 && v.nphys == 8 && v.speed_mbps == 800000, "8 fused: %d members, %d phys, %d Mbps",
        v.nmembers, v.nphys, v.speed_mbps);
  CHECK(!strcmp(v.members[7].ifname, "if7.0") && v.phys[7] == 7, "member 7 is %s (phys %d)", v.members[7].ifname,
        v.phys[7]);
  CHECK(!strcmp(v.name, "eth0+eth1+eth2+eth3+eth4+eth5+eth6+eth7"), "name %s", v.name);
  CHECK(v.rail_id == COLLX_ID_UNDEF && v.plane_id == 0, "mixed rails undefined, shared plane kept: %d/%d",
        v.rail_id, v.plane_id);
  CHECK(collx_device_fuse(devs, NDEV, eight, 5, 4, &v, why, sizeof why) != 0, "5 devices under a limit of 4");
  CHECK(strstr(why, "1 to 4"), "why: %s", why);
  CHECK(collx_device_fuse(devs, NDEV, eight, 4, 4, &v, why, sizeof why) == 0, "4 devices, limit 4: %s", why);
  int nine[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(collx_device_fuse(devs, NDEV, nine, 9, 8, &v, why, sizeof why) != 0, "9 devices under a limit of 8");
  int same_rail[3] = {0, 2, 4};
  CHECK(collx_device_fuse(devs, NDEV, same_rail, 3, 4, &v, why, sizeof why) == 0 && v.rail_id == 0,
        "devices of rail 0 fused keep rail 0 (got %d)", v.rail_id);
  int dup[2] = {3, 3};
  CHECK(collx_device_fuse(devs, NDEV, dup, 2, 8, &v, why, sizeof why) != 0 && strstr(why, "twice"),
        "a device named twice: %s", why);
  int missing[2] = {0, NDEV};
  CHECK(collx_device_fuse(devs, NDEV, missing, 2, 8, &v, why, sizeof why) != 0 && strstr(why, "not one of"),
        "a device that does not exist: %s", why);
  int virt[2] = {0, 5};
  CHECK(collx_device_fuse(devs, 5, virt, 2, 8, &v, why, sizeof why) != 0, "device 5 past the 5 physical ones");
  /* eth9 brings two interfaces: 7 + 2 > 8 members. */
  int over[8] = {0, 1, 2, 3, 4, 5, 6, 9};
  CHECK(collx_device_fuse(devs, NDEV, over, 8, 8, &v, why, sizeof why) != 0 && strstr(why, "interfaces"),
        "9 interfaces in one device: %s", why);
  int fits[7] = {0, 1, 2, 3, 4, 5, 9};
  CHECK(collx_device_fuse(devs, NDEV, fits, 7, 8, &v, why, sizeof why) == 0 && v.nmembers == 8,
        "6 single NICs + a merged pair: %d members (%s)", v.nmembers, why);
}

static void expect_ids(const char *label, const int *got, const int *want, int n) {
  for (int i = 0; i < n; i++) CHECK(got[i] == want[i], "%s: device %d id %d, expected %d", label, i, got[i], want[i]);
}

static void check_rails(void) {
  /* Four 400G NICs in shuffled PCI order, a 100G storage NIC, loopback,
   * a merged device. */
  struct collx_id_nic nics[7] = {
      {"ib2", "/sys/devices/pci0000:00/0000:00:01.0/0000:3a:00.0", 400000, 1},
      {"ib0", "/sys/devices/pci0000:00/0000:00:01.0/0000:0c:00.0", 400000, 1},
      {"stor", "/sys/devices/pci0000:00/0000:00:02.0/0000:2b:00.0", 100000, 1},
      {"ib3", "/sys/devices/pci0000:80/0000:80:01.0/0000:c1:00.0", 400000, 1},
      {"lo", NULL, 400000, 1},
      {"ib1", "/sys/devices/pci0000:00/0000:00:01.0/0000:1a:00.0", 400000, 1},
      {"m0", "/sys/devices/pci0000:00/0000:00:03.0", 200000, 2},
  };
  int ids[7];
  CHECK(collx_assign_ids(nics, 7, "auto", "COLLX_RAIL_ID", 1, ids) == 0, "auto");
  int want_auto[7] = {2, 0, 4, 3, -1, 1, -1};
  expect_ids("auto", ids, want_auto, 7);
  CHECK(collx_assign_ids(nics, 7, "none", "COLLX_RAIL_ID", 1, ids) == 0, "none");
  int none[7] = {-1, -1, -1, -1, -1, -1, -1};
  expect_ids("none", ids, none, 7);
  CHECK(collx_assign_ids(nics, 7, "", "COLLX_PLANE_ID", 0, ids) == 0, "unset");
  expect_ids("unset", ids, none, 7);
  CHECK(collx_assign_ids(nics, 7, "lo=5,m0=0,ib3=32767", "COLLX_RAIL_ID", 1, ids) == 0, "list");
  int want_list[7] = {-1, -1, -1, 32767, 5, -1, 0};
  expect_ids("list", ids, want_list, 7);
  CHECK(collx_assign_ids(nics, 7, "lo=1,ib0=x,=3,ib1=-2,ib2=40000,ib3", "COLLX_PLANE_ID", 0, ids) == 5,
        "five malformed entries counted");
  int want_bad[7] = {-1, -1, -1, -1, 1, -1, -1};
  expect_ids("malformed entries ignored", ids, want_bad, 7);
  CHECK(collx_assign_ids(nics, 7, "auto", "COLLX_PLANE_ID", 0, ids) == 1, "auto planes refused");
  expect_ids("auto planes", ids, none, 7);
  CHECK(collx_assign_ids(nics, 7, "nosuch=1", "COLLX_RAIL_ID", 1, ids) == 0, "a name not here is no error");
  expect_ids("name not here", ids, none, 7);
}

int main(void) {
  make_table();
  check_fuse();
  check_rails();
  if (failures) printf("test_vdevice: %d of %d check(s) failed\n", failures, checks);
  else printf("PASS: test_vdevice (%d checks)\n", checks);
  return failures ? 1 : 0;
}
