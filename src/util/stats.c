/*
 * The per-process stats page (stats.h): making it, sweeping the pages of
 * processes that are gone, slots for connections, and reading it back.
 */
#include "util/stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/params.h"

static pthread_mutex_t page_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_stats_page *page; /* this process's, once made */
static pid_t page_pid;                /* the process that made it (a forked child has none) */
static char page_path[256];
static dev_t page_dev;
static ino_t page_ino;
static int page_failed; /* tried and could not: do not try for every comm... */
static pid_t failed_pid; /* ...in this process (a forked child tries afresh) */
static int page_conns;  /* slots in use: the page goes with the last */

int collx_stats_enabled(void) {
  static atomic_int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    v = collx_param_int(COLLX_P_STATS) != 0;
    atomic_store(&on, v);
  }
  return v;
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* From /proc/PID/stat: the state (field 3) and when the process started
 * (field 22, clock ticks after boot), which with the pid names one process
 * for good.  0 if unknown. */
static uint64_t proc_stat(pid_t pid, char *state) {
  char path[64], buf[1024];
  *state = '?';
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  if (!p) return 0;
  unsigned long long v = 0;
  if (sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", state,
             &v) != 2)
    return 0;
  return v;
}

static uint64_t proc_starttime(pid_t pid) {
  char state;
  return proc_stat(pid, &state);
}

/* "collx-123.stats" -> 123; 0 for any other name. */
static int pid_of_name(const char *name) {
  int pid = 0, used = 0;
  if (sscanf(name, "collx-%d.stats%n", &pid, &used) != 1 || name[used] != '\0' || pid <= 0) return 0;
  return pid;
}

/* The start time a page records, or 0 (not a page, or not readable). */
static uint64_t page_starttime(int dirfd, const char *name) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  struct collx_stats_header h;
  ssize_t n = pread(fd, &h, sizeof h, 0);
  close(fd);
  if (n != (ssize_t)sizeof h || memcmp(h.magic, COLLX_STATS_MAGIC, 8) != 0) return 0;
  return h.starttime;
}

/* A page is stale when its process is gone: no such pid, a zombie, or a
 * pid that now names a process started at another time. */
static int page_is_stale(int dirfd, const char *name, int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char state;
  uint64_t recorded = page_starttime(dirfd, name), now = proc_stat(pid, &state);
  /* A zombie is gone too: nobody may ever reap it (a container's init). */
  if (state == 'Z' || state == 'X') return 1;
  return recorded && now && recorded != now;
}

/* Only regular files this user owns (root: any), never a link. */
static int removable(int dirfd, const char *name) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return 0;
  return geteuid() == 0 || st.st_uid == geteuid();
}

int collx_stats_sweep(const char *dir) {
  DIR *d = opendir(dir ? dir : COLLX_STATS_DIR);
  if (!d) return 0;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int pid = pid_of_name(e->d_name);
    if (!pid || pid == (int)getpid() || !removable(dirfd(d), e->d_name)) continue;
    if (page_is_stale(dirfd(d), e->d_name, pid) && unlinkat(dirfd(d), e->d_name, 0) == 0) {
      COLLX_INFO(COLLX_LOG_INIT, "stats: removed %s/%s, left by process %d, which is gone",
                 dir ? dir : COLLX_STATS_DIR, e->d_name, pid);
      removed++;
    }
  }
  closedir(d);
  return removed;
}

/* Create the file, clearing a stale one of a dead process that had our
 * pid; a link or someone else's file at the name makes stats off. */
static int create_page_file(const char *path) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (!S_ISREG(st.st_mode) || (geteuid() != 0 && st.st_uid != geteuid())) {
      COLLX_WARN("stats: %s exists and is %s; not following or replacing it, stats are off", path,
                 S_ISLNK(st.st_mode) ? "a symbolic link" : "not a file of this user");
      errno = EEXIST;
      return -1;
    }
    if (unlink(path) != 0) return -1; /* our pid's page from before: that process is gone */
  }
  errno = EEXIST;
  return -1;
}

static void fill_header(struct collx_stats_header *h) {
  h->version = COLLX_STATS_VERSION;
  h->header_size = (uint32_t)offsetof(struct collx_stats_page, conn);
  h->conn_size = (uint32_t)sizeof(struct collx_stats_conn);
  h->nslots = COLLX_STATS_SLOTS;
  h->pid = (int32_t)getpid();
  h->starttime = proc_starttime(getpid());
  h->created_ns = realtime_ns();
  char exe[512];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  const char *base = strrchr(exe, '/');
  base = base ? base + 1 : exe;
  size_t n_name = strlen(base) < sizeof h->exe - 1 ? strlen(base) : sizeof h->exe - 1;
  memcpy(h->exe, base, n_name);
  h->exe[n_name] = '\0';
  atomic_thread_fence(memory_order_release);
  memcpy(h->magic, COLLX_STATS_MAGIC, 8); /* last: a reader sees a whole header or none */
}

/* Caller holds page_lock. */
static struct collx_stats_page *make_page(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/collx-%d.stats", COLLX_STATS_DIR, (int)getpid());
  int fd = create_page_file(path);
  if (fd < 0) {
    if (errno != EEXIST) COLLX_INFO(COLLX_LOG_INIT, "stats: cannot create %s: %s; stats are off", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)sizeof(struct collx_stats_page)) == 0 && fstat(fd, &st) == 0)
    p = mmap(NULL, sizeof(struct collx_stats_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    unlink(path);
    COLLX_INFO(COLLX_LOG_INIT, "stats: cannot map %s: %s; stats are off", path, strerror(err));
    return NULL;
  }
  fill_header(&((struct collx_stats_page *)p)->h);
  snprintf(page_path, sizeof page_path, "%s", path);
  page_dev = st.st_dev;
  page_ino = st.st_ino;
  page_pid = getpid();
  COLLX_INFO(COLLX_LOG_INIT, "stats: live counters in %s (collx-info --stats %d; COLLX_STATS=0 turns them off)",
             path, (int)page_pid);
  return p;
}

/* This process's page, made on first use.  Caller holds page_lock. */
static struct collx_stats_page *my_page(void) {
  if (page && page_pid != getpid()) {
    /* A forked child: the mapping is its parent's. */
    page = NULL;
    page_failed = 0;
    page_path[0] = '\0';
  }
  if (page_failed && failed_pid != getpid()) page_failed = 0;
  if (!page && !page_failed) {
    page = make_page();
    page_failed = page == NULL;
    failed_pid = getpid();
  }
  return page;
}

struct collx_stats_conn *collx_stats_conn_open(int dev, int role, const char *devname, const char *peer,
                                               int nstreams, int npaths) {
  if (!collx_stats_enabled()) return NULL;
  pthread_mutex_lock(&page_lock);
  struct collx_stats_page *pg = my_page();
  struct collx_stats_conn *s = NULL;
  for (int i = 0; pg && i < COLLX_STATS_SLOTS && !s; i++) {
    if (atomic_load_explicit(&pg->conn[i].live, memory_order_relaxed)) continue;
    s = &pg->conn[i];
    if ((uint32_t)i + 1 > atomic_load(&pg->h.slots_used)) atomic_store(&pg->h.slots_used, (uint32_t)i + 1);
  }
  if (s) page_conns++;
  if (!s) {
    if (pg) atomic_fetch_add(&pg->h.untracked, 1);
    pthread_mutex_unlock(&page_lock);
    return NULL;
  }
  uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
  atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed); /* odd: being written */
  atomic_thread_fence(memory_order_release);
  uint32_t keep_seq = seq + 1;
  memset((char *)s + offsetof(struct collx_stats_conn, dev), 0, sizeof *s - offsetof(struct collx_stats_conn, dev));
  s->dev = dev;
  s->role = role;
  s->nstreams = nstreams < COLLX_STATS_STREAMS ? nstreams : COLLX_STATS_STREAMS;
  s->npaths = npaths;
  snprintf(s->devname, sizeof s->devname, "%s", devname ? devname : "?");
  snprintf(s->peer, sizeof s->peer, "%s", peer ? peer : "?");
  s->opened_ns = realtime_ns();
  for (int i = 0; i < s->nstreams; i++) atomic_store_explicit(&s->streams[i].path, (uint32_t)(npaths > 0 ? i % npaths : 0), memory_order_relaxed);
  atomic_store_explicit(&s->live, 1, memory_order_relaxed);
  atomic_store_explicit(&s->seq, keep_seq + 1, memory_order_release); /* even: stable */
  pthread_mutex_unlock(&page_lock);
  return s;
}

/* Unlink the file; unmap it only when no connection writes to it.  At
 * exit() other threads still run (the watchdog of comms a process never
 * closed), so the mapping of a page in use stays until the process is
 * gone; only its name goes. */
static void remove_locked(void) {
  if (page && page_pid == getpid()) {
    /* Only the file this process made: not one put at the name since. */
    struct stat st;
    if (lstat(page_path, &st) == 0 && st.st_dev == page_dev && st.st_ino == page_ino) unlink(page_path);
    if (page_conns == 0) munmap(page, sizeof *page);
  }
  page = NULL;
  page_path[0] = '\0';
  page_conns = 0;
}

/* With its last connection closed the page goes too (and comes back with
 * the next): a process that ends with _exit, as forked workers do, or is
 * killed while idle, leaves nothing behind. */
void collx_stats_conn_close(struct collx_stats_conn *s) {
  if (!s) return;
  pthread_mutex_lock(&page_lock);
  atomic_store_explicit(&s->live, 0, memory_order_release);
  if (page && page_pid == getpid() && --page_conns == 0) remove_locked();
  pthread_mutex_unlock(&page_lock);
}

const char *collx_stats_path(void) { return page && page_pid == getpid() ? page_path : ""; }

void collx_stats_remove(void) {
  pthread_mutex_lock(&page_lock);
  remove_locked();
  pthread_mutex_unlock(&page_lock);
}

/* Exit and dlclose both run destructors: nothing is left in /dev/shm. */
__attribute__((destructor)) static void stats_at_exit(void) { collx_stats_remove(); }

/* ---- reading ----------------------------------------------------------- */

static int header_ok(const struct collx_stats_header *h, size_t len, char *why, size_t whylen) {
  if (memcmp(h->magic, COLLX_STATS_MAGIC, 8) != 0) {
    snprintf(why, whylen, "not a collx stats page (or not written yet)");
    return 0;
  }
  if (h->version != COLLX_STATS_VERSION || h->conn_size != sizeof(struct collx_stats_conn) ||
      h->header_size != offsetof(struct collx_stats_page, conn) || h->nslots > COLLX_STATS_SLOTS ||
      len < (size_t)h->header_size + (size_t)h->nslots * h->conn_size) {
    snprintf(why, whylen, "stats page version %u (this reader knows %d) or layout differs", h->version,
             COLLX_STATS_VERSION);
    return 0;
  }
  return 1;
}

int collx_stats_map(const char *dir, int pid, const struct collx_stats_page **out, size_t *len, char *why,
                    size_t whylen) {
  char path[300];
  snprintf(path, sizeof path, "%s/collx-%d.stats", dir ? dir : COLLX_STATS_DIR, pid);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, whylen, "%s: %s", path,
             errno == ELOOP ? "a symbolic link, not followed" : errno == ENOENT ? "no such page (is the process using collx, with COLLX_STATS on?)" : strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(struct collx_stats_header)) {
    snprintf(why, whylen, "%s: not a stats page", path);
    close(fd);
    return -1;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    snprintf(why, whylen, "%s: mmap: %s", path, strerror(errno));
    return -1;
  }
  if (!header_ok(p, (size_t)st.st_size, why, whylen)) {
    munmap(p, (size_t)st.st_size);
    return -1;
  }
  *out = p;
  *len = (size_t)st.st_size;
  return 0;
}

void collx_stats_unmap(const struct collx_stats_page *pg, size_t len) { munmap((void *)pg, len); }

int collx_stats_read_conn(const struct collx_stats_page *pg, int i, struct collx_stats_conn *out) {
  const struct collx_stats_conn *s = &pg->conn[i];
  for (int attempt = 0; attempt < 100; attempt++) {
    uint32_t a = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (a & 1) continue;
    memcpy(out, (const void *)s, sizeof *out);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) == a) return atomic_load(&out->live) != 0;
  }
  return 0;
}

int collx_stats_list(const char *dir, int *pids, int max) {
  DIR *d = opendir(dir ? dir : COLLX_STATS_DIR);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    int pid = pid_of_name(e->d_name);
    if (pid) pids[n++] = pid;
  }
  closedir(d);
  return n;
}
