/* Run a shell command line quietly (its output discarded), for tests that
 * set up network namespaces and nftables rules.  Returns the command's exit
 * status, -1 when it did not exit normally; with `verbose` the line and its
 * status go to stderr.  Header-only: tests that need it include it. */
#ifndef COLLX_TESTS_SHELL_H
#define COLLX_TESTS_SHELL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int run_sh(int verbose, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int run_sh(int verbose, const char *fmt, ...) {
  char cmd[1024], full[1100];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
  int st = system(full);
  if (verbose) fprintf(stderr, "[sh] %s -> %d\n", cmd, st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
