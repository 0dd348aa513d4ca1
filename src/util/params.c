#include "params.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const struct collx_param_info param_table[COLLX_P_COUNT] = {
#define COLLX_PARAM(suffix, type, def, min, max, doc) {"COLLX_" #suffix, COLLX_PARAM_##type, def, min, max, doc},
#include "params.def"
#undef COLLX_PARAM
};

const struct collx_param_info *collx_param_info(enum collx_param_id id) {
  return &param_table[id];
}

int collx_param_is_set(enum collx_param_id id) {
  const char *v = getenv(param_table[id].name);
  return v != NULL && v[0] != '\0';
}

const char *collx_param_str(enum collx_param_id id) {
  const char *v = getenv(param_table[id].name);
  return (v && v[0]) ? v : param_table[id].default_value;
}

static int parse_long(const char *s, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10); /* decimal, as documented: 010 is ten */
  if (errno || end == s || *end != '\0') return -1;
  *out = v;
  return 0;
}

/* Report a bad value of `id` once per distinct value: settings are read
 * wherever they are needed, not once. */
static int report_once(enum collx_param_id id, const char *value) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char reported[COLLX_P_COUNT][64];
  pthread_mutex_lock(&lock);
  int fresh = strncmp(reported[id], value, sizeof reported[id] - 1) != 0;
  if (fresh) snprintf(reported[id], sizeof reported[id], "%s", value);
  pthread_mutex_unlock(&lock);
  return fresh;
}

long collx_param_int(enum collx_param_id id) {
  const struct collx_param_info *p = &param_table[id];
  long def = 0, v;
  parse_long(p->default_value, &def);
  if (!collx_param_is_set(id)) return def;
  const char *s = getenv(p->name);
  if (parse_long(s, &v) != 0) {
    if (report_once(id, s)) COLLX_WARN("%s=\"%s\" is not a number; using the default %ld", p->name, s, def);
    return def;
  }
  if (v < p->min || v > p->max) {
    long clamped = v < p->min ? p->min : p->max;
    if (report_once(id, s))
      COLLX_WARN("%s=%ld is outside %ld-%ld; using %ld", p->name, v, p->min, p->max, clamped);
    return clamped;
  }
  return v;
}

static void log_set_params(void) {
  for (int i = 0; i < COLLX_P_COUNT; i++)
    if (collx_param_is_set((enum collx_param_id)i))
      COLLX_INFO(COLLX_LOG_ENV, "%s set by environment to %s", param_table[i].name,
                 getenv(param_table[i].name));
}

void collx_params_log_set(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, log_set_params);
}

void collx_params_print_markdown(FILE *out) {
  fprintf(out, "| Variable | Type | Default | Meaning |\n");
  fprintf(out, "| --- | --- | --- | --- |\n");
  for (int i = 0; i < COLLX_P_COUNT; i++) {
    const struct collx_param_info *p = &param_table[i];
    char type[64] = "string";
    if (p->type == COLLX_PARAM_INT) snprintf(type, sizeof type, "integer, %ld-%ld", p->min, p->max);
    fprintf(out, "| `%s` | %s | %s%s%s | %s |\n", p->name, type,
            p->default_value[0] ? "`" : "", p->default_value[0] ? p->default_value : "(unset)",
            p->default_value[0] ? "`" : "", p->doc);
  }
}
