#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Atomic: NCCL may initialise communicators (net and tuner inits) from
 * several threads at once. */
static _Atomic(ncclDebugLogger_t) nccl_logger;

void collx_log_set_logger(ncclDebugLogger_t logger) { atomic_store(&nccl_logger, logger); }

void collx_log_adopt_logger(ncclDebugLogger_t logger) {
  ncclDebugLogger_t none = NULL;
  atomic_compare_exchange_strong(&nccl_logger, &none, logger);
}

/* Without NCCL (the tools, the tests) COLLX_DEBUG picks what reaches stderr.
 * getenv directly: the parameter module logs through here. */
static int stderr_level(void) {
  const char *v = getenv("COLLX_DEBUG");
  if (!v || !*v) return NCCL_LOG_WARN;
  if (!strcasecmp(v, "TRACE")) return NCCL_LOG_TRACE;
  if (!strcasecmp(v, "INFO")) return NCCL_LOG_INFO;
  if (!strcasecmp(v, "NONE")) return NCCL_LOG_NONE;
  return NCCL_LOG_WARN;
}

void collx_log(ncclDebugLogLevel level, unsigned long subsys, const char *file, int line,
               const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ncclDebugLogger_t logger = atomic_load(&nccl_logger);
  if (logger) {
    logger(level, subsys, file, line, "NET/collx : %s", msg);
    return;
  }
  if (level == NCCL_LOG_NONE || (int)level > stderr_level()) return;
  const char *tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
  fprintf(stderr, "collx %s NET/collx : %s\n", tag, msg);
}
