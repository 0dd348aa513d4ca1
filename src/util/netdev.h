/*
 * What a device is: one network interface, or several merged ones, with the
 * addresses the plugin binds.  Core discovers devices (src/core/device.c),
 * topo places them and a transport connects over them, so the description
 * sits below all three; the functions that find and fuse devices stay in
 * core.
 */
#ifndef COLLX_UTIL_NETDEV_H
#define COLLX_UTIL_NETDEV_H

#include <net/if.h>
#include <stddef.h>
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

/* Host part of an address, without port: "10.0.0.2", "fe80::1%eth0". */
const char *collx_host_str(const struct sockaddr *sa, char *buf, size_t len);
/* Format an address as "a.b.c.d:port" / "[v6]:port" (for log lines). */
const char *collx_addr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
