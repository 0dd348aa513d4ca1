/* Shared by the topology tests: where the topologies are, and checks.
 * Everything is static and marked unused: each test uses a part. */
#ifndef COLLX_TESTS_TOPO_TEST_H
#define COLLX_TESTS_TOPO_TEST_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int topo_test_failures __attribute__((unused));

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      topo_test_failures++;                                                \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
    }                                                                      \
  } while (0)

static __attribute__((unused)) int topo_test_is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directory of real hwloc exports shipped in tests/topo/xml:
 * $COLLX_TOPO_DIR, else $srcdir/tests/topo/xml (automake sets srcdir for
 * tests), else the same place relative to this source file.  NULL when
 * none exists, which the tests report as a failure: the files ship with
 * every clone and tarball. */
static __attribute__((unused)) const char *topo_test_dir(void) {
  static char buf[PATH_MAX];
  const char *env = getenv("COLLX_TOPO_DIR");
  if (env && *env) return topo_test_is_dir(env) ? env : NULL;
  const char *srcdir = getenv("srcdir");
  if (srcdir && *srcdir) {
    snprintf(buf, sizeof buf, "%s/tests/topo/xml", srcdir);
    if (topo_test_is_dir(buf)) return buf;
  }
  /* __FILE__ is tests/topo/topo_test.h, relative to where make ran. */
  snprintf(buf, sizeof buf, "%s", __FILE__);
  char *cut = strstr(buf, "tests/topo/topo_test.h");
  if (cut) {
    snprintf(cut, sizeof buf - (size_t)(cut - buf), "tests/topo/xml");
    if (topo_test_is_dir(buf)) return buf;
  }
  return NULL;
}

static __attribute__((unused)) int topo_test_xml_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.xml files of `dir`, sorted; returns the count (free with free()). */
static __attribute__((unused)) int topo_test_list(const char *dir, char ***out) {
  DIR *d = opendir(dir);
  int n = 0;
  *out = NULL;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml")) continue;
    char **grown = realloc(*out, (size_t)(n + 1) * sizeof *grown);
    if (!grown) break;
    *out = grown;
    size_t plen = strlen(dir) + len + 2;
    (*out)[n] = malloc(plen);
    snprintf((*out)[n++], plen, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  qsort(*out, (size_t)n, sizeof **out, topo_test_xml_cmp);
  return n;
}

static __attribute__((unused)) void topo_test_list_free(char **files, int n) {
  for (int i = 0; i < n; i++) free(files[i]);
  free(files);
}


#endif
