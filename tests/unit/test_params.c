/*
 * Unit test of the parameter registry (src/util/params.c): defaults,
 * environment overrides, malformed integers, the generated Markdown, and
 * the eager limit a device gets from COLLX_EAGER_SIZE (src/util/config.c).
 * Prints one line per failed check; exits non-zero if any failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/log.h"
#include "transport/tcp/tcp.h"
#include "util/params.h"
#include "../common/check.h"

/* The table expanded here independently of params.c, so a variable the
 * registry dropped or misnamed is caught. */
static const struct {
  enum collx_param_id id;
  const char *name;
  enum collx_param_type type;
  const char *def;
} expected[] = {
#define COLLX_PARAM(suffix, type, def, min, max, doc) {COLLX_P_##suffix, "COLLX_" #suffix, COLLX_PARAM_##type, def},
#include "util/params.def"
#undef COLLX_PARAM
};
#define NEXPECTED ((int)(sizeof expected / sizeof expected[0]))

/* Captures warnings so the malformed-integer case can check it was reported
 * (and keeps them off the test output). */
static int warnings;
static char last_warning[1024];

static void capture_logger(ncclDebugLogLevel level, unsigned long flags, const char *file,
                           int line, const char *fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_warning, sizeof last_warning, fmt, ap);
  va_end(ap);
  warnings++;
}

static void clear_env(void) {
  for (int i = 0; i < NEXPECTED; i++) unsetenv(expected[i].name);
}

static void test_table(void) {
  CHECK(NEXPECTED == COLLX_P_COUNT, "params.def has %d entries, registry %d", NEXPECTED,
        (int)COLLX_P_COUNT);
  for (int i = 0; i < NEXPECTED; i++) {
    const struct collx_param_info *p = collx_param_info(expected[i].id);
    CHECK(strcmp(p->name, expected[i].name) == 0, "id %d named %s, want %s", i, p->name,
          expected[i].name);
    CHECK(p->type == expected[i].type, "%s has the wrong type", expected[i].name);
    CHECK(p->doc && p->doc[0], "%s has no documentation", expected[i].name);
  }
}

static void test_defaults(void) {
  clear_env();
  for (int i = 0; i < NEXPECTED; i++) {
    enum collx_param_id id = expected[i].id;
    CHECK(!collx_param_is_set(id), "%s reported set while unset", expected[i].name);
    CHECK(strcmp(collx_param_str(id), expected[i].def) == 0, "%s default \"%s\", want \"%s\"",
          expected[i].name, collx_param_str(id), expected[i].def);
    if (expected[i].type == COLLX_PARAM_INT) {
      long want = strtol(expected[i].def, NULL, 10);
      CHECK(collx_param_int(id) == want, "%s default %ld, want %ld", expected[i].name,
            collx_param_int(id), want);
    }
  }
  /* A few values other modules rely on. */
  CHECK(collx_param_int(COLLX_P_CHUNK_SIZE) >= 4096, "COLLX_CHUNK_SIZE default below 4096");
  CHECK(strcmp(collx_param_str(COLLX_P_IFNAME), "") == 0, "COLLX_IFNAME default not empty");
  CHECK(collx_param_str(COLLX_P_TOPO_XML) != NULL, "string parameter returned NULL");
}

static void test_override(void) {
  clear_env();
  setenv("COLLX_TIMEOUT", "7", 1);
  CHECK(collx_param_is_set(COLLX_P_TIMEOUT), "COLLX_TIMEOUT=7 not reported set");
  CHECK(collx_param_int(COLLX_P_TIMEOUT) == 7, "COLLX_TIMEOUT=7 read as %ld",
        collx_param_int(COLLX_P_TIMEOUT));
  /* Outside the table's range: clamped, and said with the range. */
  int before = warnings;
  setenv("COLLX_TIMEOUT", "-3", 1);
  CHECK(collx_param_int(COLLX_P_TIMEOUT) == 0, "COLLX_TIMEOUT=-3 read as %ld, want 0 (its minimum)",
        collx_param_int(COLLX_P_TIMEOUT));
  CHECK(warnings > before && strstr(last_warning, "COLLX_TIMEOUT=-3 is outside 0-86400"),
        "COLLX_TIMEOUT=-3: warning \"%s\"", last_warning);
  setenv("COLLX_NSTREAMS", "40", 1);
  CHECK(collx_param_int(COLLX_P_NSTREAMS) == 16, "COLLX_NSTREAMS=40 read as %ld, want 16 (its maximum)",
        collx_param_int(COLLX_P_NSTREAMS));
  setenv("COLLX_CHUNK_SIZE", "100", 1);
  CHECK(collx_param_int(COLLX_P_CHUNK_SIZE) == 4096, "COLLX_CHUNK_SIZE=100 read as %ld, want 4096",
        collx_param_int(COLLX_P_CHUNK_SIZE));
  /* The transport's own limit is the table's. */
  CHECK(collx_param_info(COLLX_P_EAGER_SIZE)->max == TCP_EAGER_SIZE_MAX,
        "COLLX_EAGER_SIZE's maximum %ld is not the transport's %d", collx_param_info(COLLX_P_EAGER_SIZE)->max,
        TCP_EAGER_SIZE_MAX);
  /* Every INT default lies within its own range. */
  for (int i = 0; i < NEXPECTED; i++) {
    const struct collx_param_info *p = collx_param_info(expected[i].id);
    long d = strtol(p->default_value, NULL, 10);
    if (p->type == COLLX_PARAM_INT)
      CHECK(p->min <= d && d <= p->max, "%s: default %ld outside %ld-%ld", p->name, d, p->min, p->max);
  }
  setenv("COLLX_MERGE", "auto", 1);
  CHECK(strcmp(collx_param_str(COLLX_P_MERGE), "auto") == 0, "COLLX_MERGE=auto read as \"%s\"",
        collx_param_str(COLLX_P_MERGE));
  setenv("COLLX_IFNAME", "^docker,lo", 1);
  CHECK(strcmp(collx_param_str(COLLX_P_IFNAME), "^docker,lo") == 0, "COLLX_IFNAME read as \"%s\"",
        collx_param_str(COLLX_P_IFNAME));
  /* Unsetting restores the default: values are not cached. */
  unsetenv("COLLX_TIMEOUT");
  CHECK(collx_param_int(COLLX_P_TIMEOUT) == strtol(collx_param_info(COLLX_P_TIMEOUT)->default_value,
                                                   NULL, 10),
        "COLLX_TIMEOUT not back to its default after unsetenv");
  /* An empty value counts as unset. */
  setenv("COLLX_MERGE", "", 1);
  CHECK(!collx_param_is_set(COLLX_P_MERGE), "COLLX_MERGE=\"\" reported set");
  CHECK(strcmp(collx_param_str(COLLX_P_MERGE), collx_param_info(COLLX_P_MERGE)->default_value) == 0,
        "COLLX_MERGE=\"\" did not give the default");
  clear_env();
}

static void check_malformed(const char *value) {
  long def = strtol(collx_param_info(COLLX_P_CHUNK_SIZE)->default_value, NULL, 10);
  setenv("COLLX_CHUNK_SIZE", value, 1);
  int before = warnings;
  long got = collx_param_int(COLLX_P_CHUNK_SIZE);
  CHECK(got == def, "COLLX_CHUNK_SIZE=\"%s\" read as %ld, want the default %ld", value, got, def);
  CHECK(warnings > before, "COLLX_CHUNK_SIZE=\"%s\" was not reported", value);
  CHECK(warnings == before || strstr(last_warning, "COLLX_CHUNK_SIZE"),
        "warning for \"%s\" does not name the variable: %s", value, last_warning);
}

static void test_malformed(void) {
  clear_env();
  check_malformed("abc");
  check_malformed("12abc");
  check_malformed("1.5");
  check_malformed("99999999999999999999999");
  clear_env();
}

static void test_markdown(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  if (!out) {
    printf("FAIL: open_memstream failed\n");
    failures++;
    return;
  }
  collx_params_print_markdown(out);
  fclose(out);
  CHECK(text && text[0] == '|', "markdown does not start with a table row");
  for (int i = 0; text && i < NEXPECTED; i++) {
    char cell[128];
    snprintf(cell, sizeof cell, "| `%s` |", expected[i].name);
    CHECK(strstr(text, cell) != NULL, "markdown lacks a row for %s", expected[i].name);
  }
  free(text);
}

/* A merged device stops at COLLX_EAGER_MERGED_MAX by default; a value set
 * is every device's, below the cap or above it. */
static void test_eager_size(void) {
  clear_env();
  size_t def = (size_t)strtol(collx_param_info(COLLX_P_EAGER_SIZE)->default_value, NULL, 10);
  char why[128];
  CHECK(def > COLLX_EAGER_MERGED_MAX, "the default eager size %zu is not above the merged cap %d", def,
        COLLX_EAGER_MERGED_MAX);
  CHECK(collx_eager_size(1, why, sizeof why) == def, "one NIC, default: %zu", collx_eager_size(1, NULL, 0));
  CHECK(collx_eager_size(2, why, sizeof why) == COLLX_EAGER_MERGED_MAX && strstr(why, "merged"),
        "two NICs, default: %zu (%s)", collx_eager_size(2, NULL, 0), why);
  setenv("COLLX_EAGER_SIZE", "131072", 1);
  CHECK(collx_eager_size(2, why, sizeof why) == 131072 && strstr(why, "COLLX_EAGER_SIZE"),
        "two NICs, COLLX_EAGER_SIZE=131072: %zu (%s)", collx_eager_size(2, NULL, 0), why);
  setenv("COLLX_EAGER_SIZE", "4096", 1);
  CHECK(collx_eager_size(1, NULL, 0) == 4096 && collx_eager_size(3, NULL, 0) == 4096,
        "COLLX_EAGER_SIZE=4096: %zu with one NIC, %zu with three", collx_eager_size(1, NULL, 0),
        collx_eager_size(3, NULL, 0));
  setenv("COLLX_EAGER_SIZE", "0", 1);
  CHECK(collx_eager_size(2, NULL, 0) == 0, "COLLX_EAGER_SIZE=0 on a merged device: %zu", collx_eager_size(2, NULL, 0));
  clear_env();
}

int main(void) {
  collx_log_set_logger(capture_logger);
  test_eager_size();
  test_table();
  test_defaults();
  test_override();
  test_malformed();
  test_markdown();
  if (failures) {
    printf("test_params: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_params: all checks passed\n");
  return 0;
}
