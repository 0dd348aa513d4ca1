/* Comms and requests: argument checks in front of the transport. */
#ifndef COLLX_CORE_COMM_H
#define COLLX_CORE_COMM_H

#include "collx/net_abi.h"
#include "core/device.h"

/* The device table, for comm.c (owned by plugin.c). */
const struct collx_device *collx_device_get(int dev);
/* 1 when COLLX_NSTREAMS fixed the stream count (hints do not change it). */
int collx_nstreams_fixed(void);

struct collx_conn_opts;
/* listen / connect with per-connection settings (context.c). */
ncclResult_t collx_listen_opts(int dev, void *handle, const struct collx_conn_opts *o,
                               void **listen_comm);
ncclResult_t collx_connect_opts(int dev, void *handle, const struct collx_conn_opts *o,
                                void **send_comm);
/* Close a comm a finalizing context still owned (no ownership update). */
void collx_close_comm_raw(void *comm);
void collx_close_listen_raw(void *listen_comm);

#endif
