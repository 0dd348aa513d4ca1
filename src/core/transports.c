/*
 * The one place core names a transport.  Core calls every transport
 * through its table (src/transport/transport.h); a second transport is
 * one more entry here, and a setting in params.def to choose it.
 */
#include "core/transports.h"

static const struct collx_transport *const transports[] = {&collx_tcp_transport};

const struct collx_transport *collx_transport(void) { return transports[0]; }
