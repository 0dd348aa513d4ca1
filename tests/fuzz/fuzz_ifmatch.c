/* libFuzzer target: collx_ifmatch (src/util/ifmatch.c).
 * Input: one flag byte (bit 0: spec NULL, bit 1: ifname NULL), then the spec
 * up to the first NUL byte, then the interface name.  The answer is compared
 * with a reference written differently (copies and strtok_r), and with the
 * negation law of a leading '^'. */
#include <ctype.h>

#include "util/ifmatch.h"
#include "fuzz_common.h"

static char *trim(char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  char *colon = strchr(s, ':');
  if (colon) *colon = 0;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

/* Reference: -1 when the spec has no non-empty entry. */
static int reference(const char *spec, const char *ifname, int *nonempty) {
  char *copy = strdup(spec), *s = copy;
  if (!copy) abort();
  while (*s && isspace((unsigned char)*s)) s++;
  int exclude = 0, exact = 0;
  if (*s == '^') {
    exclude = 1;
    s++;
    while (*s && isspace((unsigned char)*s)) s++;
  }
  if (*s == '=') {
    exact = 1;
    s++;
    while (*s && isspace((unsigned char)*s)) s++;
  }
  int hit = 0;
  *nonempty = 0;
  /* strtok_r merges separators; empty entries do not count anyway. */
  char *save = NULL;
  for (char *e = strtok_r(s, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
    char *t = trim(e);
    size_t n = strlen(t);
    if (n == 0) continue;
    *nonempty = 1;
    if (exact ? strcmp(ifname, t) == 0 : strncmp(ifname, t, n) == 0) hit = 1;
  }
  free(copy);
  if (!*nonempty) return 1;
  return exclude ? !hit : hit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t flags = data[0];
  data++;
  size--;
  const uint8_t *nul = memchr(data, 0, size);
  size_t slen = nul ? (size_t)(nul - data) : size;
  char *spec = malloc(slen + 1);
  size_t nlen = nul ? size - slen - 1 : 0;
  char *name = malloc(nlen + 1);
  if (!spec || !name) abort();
  memcpy(spec, data, slen);
  spec[slen] = 0;
  if (nlen) memcpy(name, nul + 1, nlen);
  name[nlen] = 0;
  name[strnlen(name, nlen)] = 0;

  if (flags & 2) {
    FUZZ_CHECK(collx_ifmatch(flags & 1 ? NULL : spec, NULL) == 0, "a NULL interface name matched");
  } else if (flags & 1) {
    FUZZ_CHECK(collx_ifmatch(NULL, name) == 1, "a NULL spec must pass every name");
  } else {
    int rc = collx_ifmatch(spec, name);
    int nonempty;
    int ref = reference(spec, name, &nonempty);
    FUZZ_CHECK(rc == ref, "collx_ifmatch(\"%s\", \"%s\") = %d, reference %d", spec, name, rc, ref);
    FUZZ_CHECK(collx_ifmatch(spec, name) == rc, "not deterministic");
    /* Negation: for a spec that is neither exclusive already nor empty, a
     * leading '^' flips the answer. */
    const char *p = spec;
    while (*p && isspace((unsigned char)*p)) p++;
    if (*p != '^' && nonempty) {
      char *neg = malloc(slen + 2);
      if (!neg) abort();
      neg[0] = '^';
      memcpy(neg + 1, spec, slen + 1);
      FUZZ_CHECK(collx_ifmatch(neg, name) == !rc, "\"%s\" and \"%s\" agree on \"%s\"", spec, neg, name);
      free(neg);
    }
  }
  free(spec);
  free(name);
  return 0;
}
