/*
 * Small helpers the test programs share: a monotonic clock, a sleep that
 * survives signals, and counts of this process's threads and descriptors
 * (what the close and unload checks compare before and after).
 */
#ifndef COLLX_TESTS_COMMON_PROC_H
#define COLLX_TESTS_COMMON_PROC_H

#include <dirent.h>
#include <errno.h>
#include <time.h>

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Entries of a /proc directory, or -1. */
static inline int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Open descriptors, not counting the one count_dir itself opens. */
static inline int count_fds(void) { return count_dir("/proc/self/fd") - 1; }
static inline int count_tasks(void) { return count_dir("/proc/self/task"); }

#endif
