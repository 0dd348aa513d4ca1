/*
 * Faults of the plugin's own resources during setup: the kernel's
 * randomness unavailable, the watchdog thread not starting, connects that
 * NCCL abandons.  Where the fault cannot be caused from outside (getrandom
 * and pthread_create failing), this program interposes the call: the core
 * library is linked in statically, so its calls land here, and each
 * interposer fails only while its switch is on.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "lv.h"

/* ---- interposers -------------------------------------------------------- */

static volatile int fail_getrandom;

ssize_t getrandom(void *buf, size_t len, unsigned flags) {
  if (fail_getrandom) {
    errno = ENOSYS;
    return -1;
  }
  return syscall(SYS_getrandom, buf, len, flags);
}

static volatile int fail_pthread_create;

/* As under a pids cgroup at its limit: EAGAIN, returned (errno untouched). */
int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  if (fail_pthread_create) {
    errno = 0;
    return EAGAIN;
  }
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
  return real(t, attr, fn, arg);
}

/* ---- cases -------------------------------------------------------------- */

/* A sender that connects, then waits for the parent's cue and closes. */
static int idle_sender(void *send, int to_parent, int from_parent) {
  char cue;
  (void)to_parent;
  lv_wait_cue(from_parent, &cue);
  collx_close_send(send);
  return 0;
}

/* No randomness: listen and connect fail with a WARN instead of making a
 * guessable secret from the time and pid. */
static int no_randomness(void) {
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen = NULL;
  fail_getrandom = 1;
  double t0 = now_s();
  ncclResult_t r = collx_listen(0, handle, &listen);
  double took = now_s() - t0;
  fail_getrandom = 0;
  LV_REQUIRE(r != ncclSuccess && !listen, "listen made a secret without getrandom (result %d)", r);
  LV_REQUIRE(lv_warned("getrandom"), "no WARN naming getrandom");
  lv_say("listen failed at once (%.4f s) when getrandom fails", took);
  /* A connect makes a random connection id: the same rule. */
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  void *send = NULL;
  fail_getrandom = 1;
  r = collx_connect(0, handle, &send);
  fail_getrandom = 0;
  LV_REQUIRE(r != ncclSuccess && !send, "connect went on without getrandom (result %d)", r);
  collx_close_listen(listen);
  return 0;
}

/* The shared serial file in /dev/shm is opened without following a link:
 * another user's link at that name must not make collx write (and extend)
 * a file the link points to.  Runs in a private mount namespace with its
 * own /dev/shm, so the real one is left alone. */
static int shm_symlink(void) {
  if (geteuid() != 0) {
    lv_say("needs root for a private /dev/shm");
    return LV_SKIP;
  }
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("lv-shm", "/dev/shm", "tmpfs", 0, "mode=1777") != 0) {
    lv_say("no private mount namespace: %s", strerror(errno));
    return LV_SKIP;
  }
  const char *target = "/dev/shm/victim";
  int fd = open(target, O_CREAT | O_WRONLY, 0644);
  LV_REQUIRE(fd >= 0, "create %s", target);
  close(fd);
  char link[64];
  snprintf(link, sizeof link, "/dev/shm/collx-serials-%u", (unsigned)getuid());
  LV_REQUIRE(symlink(target, link) == 0, "symlink %s", link);
  struct lv_pair p;
  LV_REQUIRE(lv_pair_start(&p, idle_sender) == 0, "pair setup");
  struct stat st;
  LV_REQUIRE(stat(target, &st) == 0, "stat %s", target);
  lv_cue(p.to_child, 'q');
  LV_REQUIRE(lv_pair_reap(&p) == 0, "sender failed");
  collx_close_recv(p.recv);
  collx_close_listen(p.listen);
  LV_REQUIRE(st.st_size == 0, "the file a link in /dev/shm points to was extended to %lld bytes",
             (long long)st.st_size);
  lv_say("the link was not followed; connections were made all the same");
  return 0;
}

/* A network namespace of our own with lo up, for cases that change its
 * settings.  0, or LV_SKIP when this is not possible here. */
static int own_netns(void) {
  if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
    lv_say("needs root and network namespaces");
    return LV_SKIP;
  }
  if (system("ip link set lo up") != 0) {
    lv_say("cannot bring lo up in a new namespace");
    return LV_SKIP;
  }
  return 0;
}

/* Sockets that connect bind their source address without reserving a port
 * (IP_BIND_ADDRESS_NO_PORT): the port is picked at connect, per
 * destination.  With only 16 ephemeral ports, 4 listeners and 3 comms to
 * each (3 sockets per comm, 36 in all) fit only that way. */
#define PORT_LISTENERS 4
#define PORT_COMMS 3
static int ephemeral_ports(void) {
  int rc = own_netns();
  if (rc) return rc;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "w");
  LV_REQUIRE(f && fprintf(f, "40000 40015\n") > 0 && fclose(f) == 0, "set the port range");
  setenv("COLLX_NSTREAMS", "2", 1);
  LV_REQUIRE(lv_init() == 0, "init");
  void *listen[PORT_LISTENERS], *send[PORT_LISTENERS][PORT_COMMS], *recv[PORT_LISTENERS][PORT_COMMS];
  char handle[PORT_LISTENERS][NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof handle);
  for (int l = 0; l < PORT_LISTENERS; l++)
    LV_REQUIRE(collx_listen(0, handle[l], &listen[l]) == ncclSuccess, "listen %d", l);
  for (int k = 0; k < PORT_COMMS; k++)
    for (int l = 0; l < PORT_LISTENERS; l++) {
      char h[NCCL_NET_HANDLE_MAXSIZE];
      memcpy(h, handle[l], sizeof h);
      LV_REQUIRE(lv_pair_in_process(listen[l], h, &send[l][k], &recv[l][k], 5) == 0,
                 "connection %d to listener %d of %d x %d (%d sockets) failed", k, l, PORT_COMMS,
                 PORT_LISTENERS, 3 * PORT_COMMS * PORT_LISTENERS);
    }
  for (int l = 0; l < PORT_LISTENERS; l++) {
    for (int k = 0; k < PORT_COMMS; k++) {
      collx_close_send(send[l][k]);
      collx_close_recv(recv[l][k]);
    }
    collx_close_listen(listen[l]);
  }
  lv_say("%d connections (%d connecting sockets) over 16 ephemeral ports", PORT_COMMS * PORT_LISTENERS,
         3 * PORT_COMMS * PORT_LISTENERS);
  return 0;
}

/* The watchdog thread cannot start: the comm fails with the reason
 * pthread_create gave, and nothing of it stays registered, so that the
 * next comms start and stop the watchdog as if it had never happened (no
 * thread left running after the last close, no freed comm on its list).
 * Caller progress: the watchdog is the only thread a comm starts. */
static int watchdog_no_thread(void) {
  setenv("COLLX_PROGRESS", "caller", 1);
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0}, h[NCCL_NET_HANDLE_MAXSIZE];
  void *listen = NULL, *send = NULL, *recv = NULL;
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  memcpy(h, handle, sizeof h);
  fail_pthread_create = 1;
  LV_REQUIRE(lv_pair_in_process(listen, h, &send, &recv, 5) != 0, "a comm came up without its watchdog");
  fail_pthread_create = 0;
  LV_REQUIRE(lv_warned(strerror(EAGAIN)), "the WARN does not give pthread_create's error (%s)", strerror(EAGAIN));
  LV_REQUIRE(collx_live_threads() == 0, "%d plugin threads alive after the failed start", collx_live_threads());
  memcpy(h, handle, sizeof h);
  LV_REQUIRE(lv_pair_in_process(listen, h, &send, &recv, 5) == 0, "no comm once threads can start again");
  LV_REQUIRE(collx_live_threads() == 1, "%d plugin threads with one pair up (the watchdog)", collx_live_threads());
  collx_close_send(send);
  collx_close_recv(recv);
  collx_close_listen(listen);
  LV_REQUIRE(collx_live_threads() == 0, "%d plugin threads alive after every comm closed: the failed comm "
             "is still counted", collx_live_threads());
  return 0;
}

/* Connects NCCL gives up on (abort) hold sockets until the plugin notices
 * nobody calls for them any more: 2 x COLLX_CONNECT_TIMEOUT. */
#define ABANDONED 3
static int abandoned_connects(void) {
  setenv("COLLX_CONNECT_TIMEOUT", "1", 1);
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0}, h[ABANDONED][NCCL_NET_HANDLE_MAXSIZE];
  void *listen = NULL, *send = NULL;
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  int before = count_fds();
  /* The listener never accepts: each connect waits for its welcome. */
  for (int k = 0; k < ABANDONED; k++) {
    memcpy(h[k], handle, sizeof h[k]);
    for (int i = 0; i < 20; i++) {
      LV_REQUIRE(collx_connect(0, h[k], &send) == ncclSuccess && !send, "connect %d", k);
      sleep_s(0.001);
    }
  }
  int during = count_fds();
  LV_REQUIRE(during >= before + ABANDONED, "the connects hold %d sockets, expected %d", during - before, ABANDONED);
  double t0 = now_s();
  sleep_s(2.2);
  collx_close_listen(listen); /* as an abort does */
  int after = count_fds() + 1; /* the listening socket is closed too */
  LV_REQUIRE(after == before, "%d sockets of abandoned connects still open after %.1f s", after - before, now_s() - t0);
  lv_say("sockets of %d abandoned connects closed %.1f s after their last call (COLLX_CONNECT_TIMEOUT=1)",
         ABANDONED, now_s() - t0);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"no-randomness", no_randomness, 10, 0},
      {"shm-symlink", shm_symlink, 10, 0},
      {"ephemeral-ports", ephemeral_ports, 20, 0},
      {"watchdog-no-thread", watchdog_no_thread, 10, 0},
      {"abandoned-connects", abandoned_connects, 10, 0},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
