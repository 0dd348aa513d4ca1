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

/* One device as NCCL sees it: one interface, or several merged ones. */
struct collx_device {
  char name[128];
  int nmembers;
  struct collx_netif members[COLLX_MAX_MEMBERS];
  char *pci_path;    /* what getProperties reports */
  int speed_mbps;    /* summed over members */
  uint64_t guid;
};

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
