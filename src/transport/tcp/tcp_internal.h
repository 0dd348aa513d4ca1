/*
 * The transport's internals as src/core and the white-box tests see them:
 * the comm types of both roles.  Transport files include comm.h, send.h
 * and recv.h themselves.
 *
 * src/core still names a comm `struct tcp_comm` (to read its device, and
 * in the casts of connect's and accept's results); that name is the
 * common base now.  The alias goes when core reaches the transport through
 * its ops table.
 */
#ifndef COLLX_TCP_INTERNAL_H
#define COLLX_TCP_INTERNAL_H

#include "comm.h"
#include "recv.h"
#include "send.h"

#define tcp_comm tcp_comm_base

#endif
