/*
 * Devices: the network interfaces collx offers NCCL.  Discovery reads the
 * interfaces that are up with an address, filtered by COLLX_IFNAME /
 * NCCL_SOCKET_IFNAME and COLLX_SOCKET_FAMILY, and their sysfs properties.
 */
#ifndef COLLX_CORE_DEVICE_H
#define COLLX_CORE_DEVICE_H

#include <stddef.h>

#include "util/netdev.h"

/* Build in *out the virtual device fusing physical devices idx[0..k-1] of
 * devs[0..nphys-1]: their interfaces become its members (striped over as
 * a COLLX_MERGE device is), speeds add up, and a rail or plane id they all
 * share carries over.  Refused (-1, *why says why) when k is outside
 * 1..max_devs, an index is not a physical device or appears twice, or the
 * interfaces would be more than COLLX_MAX_MEMBERS. */
int collx_device_fuse(const struct collx_device *devs, int nphys, const int *idx, int k,
                      int max_devs, struct collx_device *out, char *why, size_t whylen);

/* Append a device to the discovered table; returns its index, or -1 when
 * the table is full (COLLX_MAX_DEVICES). */
int collx_devices_append(const struct collx_device *d);

/* Speed reported when the kernel has none (virtual links, loopback). */
#define COLLX_DEFAULT_SPEED_MBPS 10000
/* ... and for loopback, which runs at memory speed. */
#define COLLX_LOOPBACK_SPEED_MBPS 400000

/* Discover the devices (once per process; later calls return the same
 * list).  Returns 0 and sets *devs and *ndev (ndev may be 0), or -1 on a system
 * error.  When no device qualifies, *why explains it in one sentence. */
int collx_devices_discover(struct collx_device **devs, int *ndev, const char **why);

#endif
