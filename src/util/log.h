/* Logging: through the logger NCCL hands to init, prefixed "NET/collx". */
#ifndef COLLX_UTIL_LOG_H
#define COLLX_UTIL_LOG_H

#include "collx/net_abi.h"

#define COLLX_LOG_INIT NCCL_INIT
#define COLLX_LOG_NET NCCL_NET
#define COLLX_LOG_ENV NCCL_ENV
#define COLLX_LOG_TUNING NCCL_TUNING

/* Install NCCL's logger (NULL: log to stderr, filtered by COLLX_DEBUG). */
void collx_log_set_logger(ncclDebugLogger_t logger);

/* Install `logger` only if none is installed yet: the tuner's init may run
 * in a process whose net plugin is not collx (NCCL_TUNER_PLUGIN naming
 * collx's library), and must not replace the one the net init installed. */
void collx_log_adopt_logger(ncclDebugLogger_t logger);

void collx_log(ncclDebugLogLevel level, unsigned long subsys, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define COLLX_WARN(...) collx_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define COLLX_INFO(subsys, ...) collx_log(NCCL_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define COLLX_TRACE(subsys, ...) collx_log(NCCL_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__)

#endif
