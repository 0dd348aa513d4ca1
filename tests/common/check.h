/* The unit tests' check: a failed condition is counted and printed with
 * its file and line, and the test goes on to the next check.  `failures`
 * decides the exit status; `checks` counts what was looked at. */
#ifndef COLLX_TESTS_CHECK_H
#define COLLX_TESTS_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                          \
  do {                                            \
    checks++;                                     \
    if (!(cond)) {                                \
      failures++;                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
    }                                             \
  } while (0)

#endif
