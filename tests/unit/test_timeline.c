/* The message timeline of -DCOLLX_TIMELINE builds (src/util/timeline.c): a
 * process's events come out, in order and with sane timestamps, in
 * $COLLX_TIMELINE_DIR/collx-timeline.<pid> when it exits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/timeline.h"
#include "../common/check.h"

#define EVENTS 1000

static void child(void) {
  for (uint32_t i = 1; i <= EVENTS; i++) COLLX_TL(COLLX_TL_ISEND + (int)(i % 5), 4000 + i % 3, i);
  exit(0); /* the file is written by a destructor */
}

int main(void) {
  char dir[] = "/tmp/collx-tl-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("COLLX_TIMELINE_DIR", dir, 1);
  pid_t pid = fork();
  if (pid == 0) child();
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the recording process failed");

  char path[256];
  snprintf(path, sizeof path, "%s/collx-timeline.%d", dir, (int)pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "no timeline written at %s", path);
  if (f) {
    char line[256];
    CHECK(fgets(line, sizeof line, f) && line[0] == '#', "no header line");
    unsigned long long t, prev = 0;
    int kind;
    unsigned key, n, seen = 0;
    while (fscanf(f, "%llu %d %u %u", &t, &kind, &key, &n) == 4) {
      seen++;
      CHECK(n == seen, "event %u carries n = %u", seen, n);
      CHECK(kind == COLLX_TL_ISEND + (int)(n % 5) && key == 4000 + n % 3, "event %u: kind %d key %u", n, kind, key);
      CHECK(t >= prev && t > 0, "event %u: time %llu after %llu", n, t, prev);
      prev = t;
    }
    CHECK(seen == EVENTS, "%u events read back, %d recorded", seen, EVENTS);
    fclose(f);
    unlink(path);
  }
  rmdir(dir);
  printf("test_timeline: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
