/* Settings: every COLLX_* variable, declared once in params.def. */
#ifndef COLLX_UTIL_PARAMS_H
#define COLLX_UTIL_PARAMS_H

#include <stdio.h>

enum collx_param_type { COLLX_PARAM_INT, COLLX_PARAM_STR };

enum collx_param_id {
#define COLLX_PARAM(suffix, type, def, min, max, doc) COLLX_P_##suffix,
#include "params.def"
#undef COLLX_PARAM
  COLLX_P_COUNT
};

struct collx_param_info {
  const char *name;  /* full variable name, "COLLX_..." */
  enum collx_param_type type;
  const char *default_value;
  long min, max;     /* INT: the accepted range */
  const char *doc;
};

/* Static description of parameter `id`. */
const struct collx_param_info *collx_param_info(enum collx_param_id id);

/* Value of a string parameter: the environment's, else the default.  Never NULL. */
const char *collx_param_str(enum collx_param_id id);

/* Value of an integer parameter.  A malformed value is reported once and the
 * default used instead; a value outside the table's range is reported once
 * and clamped to it. */
long collx_param_int(enum collx_param_id id);

/* Whether the variable is set in the environment. */
int collx_param_is_set(enum collx_param_id id);

/* Log, once per process, an INFO line for every COLLX_* variable that is set. */
void collx_params_log_set(void);

/* Print the parameter table as Markdown (the generated documentation). */
void collx_params_print_markdown(FILE *out);

#endif
