/* Interface selection with NCCL_SOCKET_IFNAME's syntax. */
#ifndef COLLX_UTIL_IFMATCH_H
#define COLLX_UTIL_IFMATCH_H

/* Does interface `ifname` pass the selection `spec`?
 *   "eth,ib"   names starting with eth or ib
 *   "^docker"  every name except those starting with docker
 *   "=eth0"    exactly eth0 (also "^=eth0": every name except exactly eth0)
 * An empty spec passes every name.  A port suffix (":port") on an entry is
 * ignored, as NCCL does. */
int collx_ifmatch(const char *spec, const char *ifname);

#endif
