/*
 * Rail and plane ids of the devices (ncclNet v12 railId / planeId): from
 * COLLX_RAIL_ID / COLLX_PLANE_ID, or by a rule from the devices themselves.
 */
#ifndef COLLX_CORE_RAIL_H
#define COLLX_CORE_RAIL_H

/* What the rule looks at for one device. */
struct collx_id_nic {
  const char *name;
  const char *pci_path;  /* NULL: not a PCI device (loopback, veth, tunnel) */
  int speed_mbps;
  int nmembers;          /* interfaces merged into it (COLLX_MERGE) */
};

/* Fill ids[0..n-1] from `setting`, read as the value of variable `var`:
 *   ""/"none"        every id undefined (COLLX_ID_UNDEF);
 *   "auto"           (allow_auto only) the automatic rail rule: devices of
 *                    one interface with a PCI device are ranked by speed,
 *                    fastest first, then by PCI path; a device's id is its
 *                    position in that order, so that on identical nodes
 *                    the same slot gets the same id and NICs of another
 *                    speed (storage, management) do not share the ids of
 *                    the fastest ones.  Other devices stay undefined.
 *   "NAME=ID,..."    the devices named get those ids (0-32767), the others
 *                    stay undefined.
 * Returns the number of malformed entries (each reported with a WARN
 * naming var and the entry; the rest still apply). */
int collx_assign_ids(const struct collx_id_nic *nics, int n, const char *setting, const char *var,
                     int allow_auto, int *ids);

#endif
