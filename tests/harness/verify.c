#include "verify.h"

#include <stdio.h>
#include <string.h>

uint64_t hx_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hx_key(uint64_t base, uint64_t a, uint64_t b) { return hx_mix64(base ^ hx_mix64(a * 0x100000001B3ull + b + 1)); }

uint64_t hx_rng_next(uint64_t *state) {
  *state += 0x9E3779B97F4A7C15ull;
  return hx_mix64(*state);
}

void hx_pattern_fill(uint8_t *p, size_t n, uint64_t key) {
  for (size_t off = 0, w = 0; off < n; off += 8, w++) {
    uint64_t v = hx_mix64(key + w);
    memcpy(p + off, &v, n - off < 8 ? n - off : 8);
  }
}

long hx_pattern_first_bad(const uint8_t *p, size_t n, uint64_t key) {
  for (size_t off = 0, w = 0; off < n; off += 8, w++) {
    uint64_t v = hx_mix64(key + w);
    size_t m = n - off < 8 ? n - off : 8;
    if (memcmp(p + off, &v, m) == 0) continue;
    const uint8_t *e = (const uint8_t *)&v;
    for (size_t k = 0; k < m; k++)
      if (p[off + k] != e[k]) return (long)(off + k);
  }
  return -1;
}

int hx_pattern_check(const uint8_t *p, size_t n, uint64_t key, char *why, size_t whylen) {
  long first = hx_pattern_first_bad(p, n, key);
  if (first < 0) return 0;
  size_t bad = 0;
  uint8_t exp_first = 0;
  for (size_t off = 0, w = 0; off < n; off += 8, w++) {
    uint64_t v = hx_mix64(key + w);
    const uint8_t *e = (const uint8_t *)&v;
    size_t m = n - off < 8 ? n - off : 8;
    for (size_t k = 0; k < m; k++) {
      if (p[off + k] == e[k]) continue;
      if (off + k == (size_t)first) exp_first = e[k];
      bad++;
    }
  }
  uint8_t got = p[first];
  snprintf(why, whylen, "%zu of %zu bytes wrong, first at offset %ld: expected 0x%02x got 0x%02x%s", bad, n, first,
           exp_first, got, got == HX_FILL ? " (0xEE is the pre-post fill: never written)" : "");
  return -1;
}

static uint8_t canary_byte(int j, uint64_t salt) {
  return (uint8_t)(0xA5 ^ (j * 29) ^ (uint8_t)salt ^ (uint8_t)(salt >> 8));
}

void hx_canary_fill(uint8_t *p, uint64_t salt) {
  for (int j = 0; j < HX_CANARY_LEN; j++) p[j] = canary_byte(j, salt);
}

int hx_canary_check(const uint8_t *p, uint64_t salt, char *why, size_t whylen) {
  int bad = 0, first = -1;
  for (int j = 0; j < HX_CANARY_LEN; j++) {
    if (p[j] == canary_byte(j, salt)) continue;
    if (first < 0) first = j;
    bad++;
  }
  if (!bad) return 0;
  snprintf(why, whylen,
           "canary after the receive buffer overwritten: %d of %d bytes changed, first at +%d: expected 0x%02x "
           "got 0x%02x",
           bad, HX_CANARY_LEN, first, canary_byte(first, salt), p[first]);
  return -1;
}

int hx_untouched_check(const uint8_t *p, size_t from, size_t to, char *why, size_t whylen) {
  for (size_t j = from; j < to; j++) {
    if (p[j] != HX_FILL) {
      snprintf(why, whylen, "byte %zu of the posted buffer (beyond the %zu-byte message) was written: 0x%02x", j,
               from, p[j]);
      return -1;
    }
  }
  return 0;
}
