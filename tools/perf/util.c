/* collx-perf: Small helpers: sizes, parsing, buffers. */
#include "perf.h"

/* ========================================================================
 * Small helpers
 * ======================================================================== */



const char *fmt_size(size_t b, char *buf, size_t len) {
  if (b >= (1u << 30) && b % (1u << 30) == 0)
    snprintf(buf, len, "%zu GiB", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, len, "%zu MiB", b >> 20);
  else if (b >= (1u << 10) && b % (1u << 10) == 0)
    snprintf(buf, len, "%zu KiB", b >> 10);
  else
    snprintf(buf, len, "%zu B", b);
  return buf;
}

int parse_size(const char *s, size_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno) return -1;
  unsigned long long mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = 1ull << 10; end++; break;
  case 'm': case 'M': mul = 1ull << 20; end++; break;
  case 'g': case 'G': mul = 1ull << 30; end++; break;
  default: break;
  }
  if (mul > 1 && *end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return -1;
  if (v > SIZE_MAX / mul) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

void *xalloc(size_t len) {
  void *p = NULL;
  if (len == 0) len = 64;
  if (posix_memalign(&p, 4096, (len + 4095) & ~(size_t)4095) != 0 || !p)
    die("cannot allocate %zu bytes", len);
  memset(p, 0, len); /* touch the pages before anything is timed */
  return p;
}

int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}
