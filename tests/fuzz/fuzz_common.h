/*
 * Shared bits of the collx libFuzzer targets.  Each target checks more than
 * "no crash": an oracle written independently of the code under test says
 * what the answer must be, and a disagreement aborts (a libFuzzer finding).
 */
#ifndef COLLX_FUZZ_COMMON_H
#define COLLX_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "collx fuzz oracle failed: %s\n  ", #cond);           \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
      abort();                                                              \
    }                                                                       \
  } while (0)

/* Copy the first bytes of the input into an object (zero-padded), and
 * advance past them. */
static inline void fuzz_take(void *dst, size_t len, const uint8_t **data, size_t *size) {
  size_t n = *size < len ? *size : len;
  memset(dst, 0, len);
  memcpy(dst, *data, n);
  *data += n;
  *size -= n;
}

/* A why-string from a validator must be a non-empty C string. */
static inline void fuzz_check_why(const char *why) {
  FUZZ_CHECK(why != NULL && why[0] != '\0' && strlen(why) < 200, "refusal without a reason");
}

#endif
