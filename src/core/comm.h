/* Comms and requests: argument checks in front of the transport. */
#ifndef COLLX_CORE_COMM_H
#define COLLX_CORE_COMM_H

#include "core/device.h"

/* The device table, for comm.c (owned by plugin.c). */
const struct collx_device *collx_device_get(int dev);

#endif
