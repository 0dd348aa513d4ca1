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

/* Why the default rules skip `ifname`, or NULL when they do not: loopback,
 * and the interfaces containers, CNI plugins and VM hosts make ("veth0":
 * "a container's veth"), which do not reach other hosts or reach them only
 * through the host's own NIC (a pod's veth made NCCL's init hang,
 * NVIDIA/nccl#913).  Judged by name, as NCCL does: inside a container its
 * own veth is named eth0 and stays usable. */
const char *collx_if_skip_reason(const char *ifname);

/* Is `spec` a list of interfaces to use (not NULL, not empty, not an
 * exclusion)?  Only such a spec names an interface the default rules skip;
 * "^eth1" excludes eth1 and still skips veth0. */
int collx_ifspec_names(const char *spec);

/* Does `ifname` pass?  The spec (NULL: none set) as collx_ifmatch, except
 * that an interface collx_if_skip_reason holds back passes only when
 * `spec` names it.  *why (may be NULL) gets the skip reason when that is
 * what kept it out, else NULL. */
int collx_if_wanted(const char *spec, const char *ifname, const char **why);

#endif
