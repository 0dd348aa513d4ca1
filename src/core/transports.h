/* Which transport core dispatches to. */
#ifndef COLLX_CORE_TRANSPORTS_H
#define COLLX_CORE_TRANSPORTS_H

#include "transport/transport.h"

/* The transport of this process: the same table before and after init,
 * so that argument checks before init refuse foreign pointers too. */
const struct collx_transport *collx_transport(void);

#endif
