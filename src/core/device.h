/*
 * Devices: the network interfaces collx offers NCCL.  Discovery reads the
 * interfaces that are up with an address, filtered by COLLX_IFNAME /
 * NCCL_SOCKET_IFNAME and COLLX_SOCKET_FAMILY, and their sysfs properties.
 */
#ifndef COLLX_CORE_DEVICE_H
#define COLLX_CORE_DEVICE_H

#include <net/if.h>
#include <stdint.h>
#include <sys/socket.h>

#define COLLX_MAX_DEVICES 64
/* Interfaces one (merged) device may stripe across. */
#define COLLX_MAX_MEMBERS 8

/* One network interface. */
struct collx_netif {
  char ifname[IF_NAMESIZE];
  int if_index;
  struct sockaddr_storage addr;  /* address the plugin binds and listens on */
  socklen_t addr_len;
  char *pci_path;                /* realpath of /sys/class/net/IF/device, or NULL */
  int speed_mbps;                /* after the COLLX_SPEED_MBPS override and fallback */
  int speed_from_sysfs;          /* 1 when speed came from the kernel */
};

/* Physical devices one virtual device (makeVDevice) may fuse: ncclNet
 * v12's limit (v9-v11 allow 4). */
#define COLLX_MAX_VDEV_DEVS 8
/* railId / planeId not known (the ABI's NCCL_NET_ID_UNDEF). */
#define COLLX_ID_UNDEF (-1)

/* One device as NCCL sees it: one interface, or several merged ones. */
struct collx_device {
  char name[128];
  int nmembers;
  struct collx_netif members[COLLX_MAX_MEMBERS];
  char *pci_path;    /* what getProperties reports */
  int speed_mbps;    /* summed over members */
  int streams;       /* streams per connection (the placement plan's; src/topo/streams.c) */
  uint64_t guid;
  /* The physical devices (indices into the table) this device stands for:
   * itself, or the ones makeVDevice fused into it. */
  int nphys;
  int phys[COLLX_MAX_VDEV_DEVS];
  int rail_id, plane_id;  /* COLLX_ID_UNDEF when unknown */
};

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

/* Format an address as "a.b.c.d<port>" / "[v6]<port>" (for log lines). */
const char *collx_addr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
