/*
 * Unit test of the stats page (src/util/stats.c) in /dev/shm:
 *  - the first connection makes /dev/shm/collx-<pid>.stats, what is
 *    written to a slot reads back through collx_stats_map, and the last
 *    close removes the file;
 *  - a symbolic link planted at the page's name is neither followed nor
 *    replaced: no page, the link's target untouched;
 *  - a page left by a process killed with connections open is removed by
 *    the next sweep (the next start on the node), a live one's is not.
 * COLLX_STATS=0 and the plugin's use of it: test_stats_live.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/stats.h"
#include "../common/check.h"

static void path_of(int pid, char *buf, size_t len) {
  snprintf(buf, len, "%s/collx-%d.stats", COLLX_STATS_DIR, pid);
}

static int exists(const char *p) {
  struct stat st;
  return lstat(p, &st) == 0;
}

static void test_page_lifecycle(void) {
  char path[256];
  path_of(getpid(), path, sizeof path);
  CHECK(!exists(path), "%s exists before any connection", path);
  struct collx_stats_conn *a = collx_stats_conn_open(0, COLLX_STATS_SEND, "eth0", "10.0.0.2:1234", 2, 1);
  struct collx_stats_conn *b = collx_stats_conn_open(1, COLLX_STATS_RECV, "eth1", "10.0.0.3:99", 4, 2);
  CHECK(a && b && a != b, "no slots (%p, %p)", (void *)a, (void *)b);
  CHECK(exists(path), "%s not made with the first connection", path);
  CHECK(!strcmp(collx_stats_path(), path), "collx_stats_path says '%s'", collx_stats_path());
  if (!a || !b) return;
  collx_stats_add1(&a->bytes, 1000);
  collx_stats_add1(&a->messages, 3);
  collx_stats_addn(&b->paths_lost, 1);
  atomic_store(&a->streams[1].bytes, 777);

  const struct collx_stats_page *pg;
  size_t len;
  char why[256] = "";
  CHECK(collx_stats_map(NULL, getpid(), &pg, &len, why, sizeof why) == 0, "map: %s", why);
  if (why[0] == '\0') {
    CHECK(pg->h.pid == getpid() && pg->h.starttime > 0, "header pid %d starttime %llu", pg->h.pid,
          (unsigned long long)pg->h.starttime);
    int live = 0, seen_a = 0, seen_b = 0;
    for (uint32_t i = 0; i < pg->h.slots_used; i++) {
      struct collx_stats_conn c;
      if (!collx_stats_read_conn(pg, (int)i, &c)) continue;
      live++;
      if (!strcmp(c.peer, "10.0.0.2:1234"))
        seen_a = c.bytes == 1000 && c.messages == 3 && c.streams[1].bytes == 777 && c.nstreams == 2 &&
                 c.role == COLLX_STATS_SEND && !strcmp(c.devname, "eth0");
      if (!strcmp(c.peer, "10.0.0.3:99")) seen_b = c.paths_lost == 1 && c.npaths == 2 && c.streams[1].path == 1;
    }
    CHECK(live == 2 && seen_a && seen_b, "read back: %d live, a %d, b %d", live, seen_a, seen_b);
    collx_stats_unmap(pg, len);
  }
  collx_stats_conn_close(a);
  CHECK(exists(path), "page gone with a connection still open");
  collx_stats_conn_close(b);
  CHECK(!exists(path), "%s left after the last connection closed", path);
}

static void test_link_not_followed(void) {
  char path[256], target[] = "/tmp/collx-stats-target.XXXXXX";
  path_of(getpid(), path, sizeof path);
  int fd = mkstemp(target);
  CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
  if (fd < 0) return;
  CHECK(write(fd, "keep", 4) == 4, "write");
  close(fd);
  CHECK(symlink(target, path) == 0, "symlink %s: %s", path, strerror(errno));
  struct collx_stats_conn *s = collx_stats_conn_open(0, COLLX_STATS_SEND, "eth0", "peer", 1, 1);
  CHECK(s == NULL, "a slot in a page made through a link");
  struct stat st;
  CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "the planted link was replaced or removed");
  CHECK(stat(target, &st) == 0 && st.st_size == 4, "the link's target changed: %lld bytes", (long long)st.st_size);
  const struct collx_stats_page *pg;
  size_t len;
  char why[256];
  CHECK(collx_stats_map(NULL, getpid(), &pg, &len, why, sizeof why) != 0 && strstr(why, "link"),
        "the reader followed the link (%s)", why);
  if (s) collx_stats_conn_close(s);
  unlink(path);
  unlink(target);
}

/* A child opens a connection and dies by SIGKILL; returns its pid. */
static pid_t killed_child_with_page(void) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!collx_stats_conn_open(0, COLLX_STATS_SEND, "eth0", "peer", 1, 1)) _exit(3);
    raise(SIGKILL);
    _exit(4);
  }
  int st;
  waitpid(pid, &st, 0);
  CHECK(WIFSIGNALED(st), "the child did not die by signal (status %d)", st);
  return pid;
}

static void test_stale_swept(void) {
  pid_t dead = killed_child_with_page();
  char dead_path[256], live_path[256];
  path_of(dead, dead_path, sizeof dead_path);
  CHECK(exists(dead_path), "the killed child's page %s is not there to sweep", dead_path);
  /* A live process's page stays: this process's own, made now. */
  struct collx_stats_conn *mine = collx_stats_conn_open(0, COLLX_STATS_SEND, "eth0", "peer", 1, 1);
  path_of(getpid(), live_path, sizeof live_path);
  int removed = collx_stats_sweep(NULL);
  CHECK(!exists(dead_path), "the dead process's page survived the sweep");
  CHECK(removed >= 1, "sweep says it removed %d", removed);
  CHECK(exists(live_path), "the sweep removed a live process's page");
  collx_stats_conn_close(mine);
}

int main(void) {
  setenv("COLLX_STATS", "1", 1);
  if (access(COLLX_STATS_DIR, W_OK) != 0) {
    printf("SKIP: %s is not writable\n", COLLX_STATS_DIR);
    return 77;
  }
  test_page_lifecycle();
  test_stale_swept();
  test_link_not_followed(); /* last: the process then keeps stats off */
  printf("test_stats: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
