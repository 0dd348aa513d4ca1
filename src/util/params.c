#include "params.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const struct collx_param_info param_table[COLLX_P_COUNT] = {
#define COLLX_PARAM(suffix, type, def, doc) {"COLLX_" #suffix, COLLX_PARAM_##type, def, doc},
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

long collx_param_int(enum collx_param_id id) {
  long def = 0, v;
  parse_long(param_table[id].default_value, &def);
  if (!collx_param_is_set(id)) return def;
  const char *s = getenv(param_table[id].name);
  if (parse_long(s, &v) != 0) {
    /* Settings are read wherever they are needed: report each bad value
     * once, not on every read. */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char reported[COLLX_P_COUNT][64];
    pthread_mutex_lock(&lock);
    int fresh = strncmp(reported[id], s, sizeof reported[id] - 1) != 0;
    if (fresh) snprintf(reported[id], sizeof reported[id], "%s", s);
    pthread_mutex_unlock(&lock);
    if (fresh)
      COLLX_WARN("%s=\"%s\" is not a number; using the default %ld", param_table[id].name, s, def);
    return def;
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
    fprintf(out, "| `%s` | %s | %s%s%s | %s |\n", p->name,
            p->type == COLLX_PARAM_INT ? "integer" : "string",
            p->default_value[0] ? "`" : "", p->default_value[0] ? p->default_value : "(unset)",
            p->default_value[0] ? "`" : "", p->doc);
  }
}
