/*
 * Connection numbers shared by every collx process of this node and user.
 *
 * The plan spreads a device's connections over its local cores by their
 * number (collx_plan_cpu).  Numbered per process, rank 0's first connection
 * and rank 1's first connection would land on the same core, and with one
 * process per GPU every process would crowd the same few cores while the
 * rest stay idle.  One counter per device in a small shared file keeps the
 * numbers, and so the cores, distinct across the processes of a node.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo.h"
#include "util/log.h"

#define SERIAL_SLOTS 64

static atomic_uint *shared_serials; /* SERIAL_SLOTS counters, or NULL */
static atomic_uint local_serials[SERIAL_SLOTS];
static pthread_once_t serial_once = PTHREAD_ONCE_INIT;

static void map_shared_serials(void) {
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/collx-serials-%u", (unsigned)getuid());
  /* /dev/shm is shared by every user: only a plain file of our own, never
   * one a link of someone else's points to. */
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  size_t len = SERIAL_SLOTS * sizeof(atomic_uint);
  struct stat st;
  int ours = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && st.st_nlink == 1;
  /* A fresh file reads as zeros once extended; never shrink one in use. */
  if (!ours || ((size_t)st.st_size < len && ftruncate(fd, (off_t)len) != 0)) {
    COLLX_INFO(COLLX_LOG_INIT, "placement: %s unavailable; connections numbered per process", path);
    if (fd >= 0) close(fd);
    return;
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) shared_serials = p;
}

unsigned collx_topo_next_serial(int dev) {
  pthread_once(&serial_once, map_shared_serials);
  unsigned slot = (unsigned)dev % SERIAL_SLOTS;
  atomic_uint *ctr = shared_serials ? &shared_serials[slot] : &local_serials[slot];
  return atomic_fetch_add(ctr, 1);
}
