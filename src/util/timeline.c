/* Message timeline (see timeline.h); empty unless built with -DCOLLX_TIMELINE. */
#include "util/timeline.h"

#ifdef COLLX_TIMELINE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TL_MAX (1u << 21) /* events kept per process; later ones are dropped */

struct tl_event {
  uint64_t t_ns;
  uint32_t key, n;
  int kind;
};

static struct tl_event *events;
static atomic_uint tl_next;
static atomic_int tl_ready;

void collx_tl_event(int kind, uint32_t key, uint32_t n) {
  if (!atomic_load_explicit(&tl_ready, memory_order_acquire)) return;
  unsigned i = atomic_fetch_add_explicit(&tl_next, 1, memory_order_relaxed);
  if (i >= TL_MAX) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  events[i] = (struct tl_event){(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, key, n, kind};
}

__attribute__((constructor)) static void tl_start(void) {
  events = calloc(TL_MAX, sizeof *events);
  if (events) atomic_store_explicit(&tl_ready, 1, memory_order_release);
}

__attribute__((destructor)) static void tl_write(void) {
  if (!atomic_exchange(&tl_ready, 0)) return;
  const char *dir = getenv("COLLX_TIMELINE_DIR");
  char path[512];
  snprintf(path, sizeof path, "%s/collx-timeline.%d", dir && *dir ? dir : "/tmp", (int)getpid());
  FILE *f = fopen(path, "w");
  if (f) {
    unsigned n = atomic_load(&tl_next);
    if (n > TL_MAX) n = TL_MAX;
    fprintf(f, "# pid %d: t_ns kind key n\n", (int)getpid());
    for (unsigned i = 0; i < n; i++)
      fprintf(f, "%llu %d %u %u\n", (unsigned long long)events[i].t_ns, events[i].kind, events[i].key,
              events[i].n);
    fclose(f);
  }
  free(events);
}
#endif
