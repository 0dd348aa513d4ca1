/*
 * Connect deadlines, judged by the listener's kernel acknowledging: two
 * network namespaces joined by a veth pair, the listener in B, the
 * connector in A, and nftables in B dropping what the listener's host
 * sends (as a host that died or whose network was cut).
 *
 * blackhole:   everything B sends is dropped from the start: the connect
 *              (SYN answered by nothing) fails, within about
 *              COLLX_CONNECT_TIMEOUT (2 s) per attempt.
 * host-dies:   the listener never calls accept; 1 s after the connect
 *              began (TCP handshake done, hello acknowledged by B's
 *              kernel) B's packets are dropped: the connect fails.
 * accept-late: the listener calls accept only after 2.5 x
 *              COLLX_CONNECT_TIMEOUT, nothing dropped: the connector
 *              waits and gets its comm (its peer's kernel acknowledges).
 * Needs root, `ip netns` and nft; skipped (77) otherwise.
 */
#include <fcntl.h>
#include <sched.h>

#include "lv.h"
#include "../common/shell.h"

#define CT_S 2.0 /* COLLX_CONNECT_TIMEOUT */

/* Named after the harness's process, which removes them at its exit:
 * each case runs in a child that leaves by _exit (or is killed at its
 * deadline), where an atexit of its own would never run. */
static char ns_a[32], ns_b[32];
static int ns_made;

static void ns_cleanup(void) {
  if (!ns_a[0]) return;
  run_sh(0, "ip netns del %s 2>/dev/null", ns_a);
  run_sh(0, "ip netns del %s 2>/dev/null", ns_b);
}

static void ns_names(void) {
  int id = (int)(getpid() % 100000);
  snprintf(ns_a, sizeof ns_a, "lv17a%d", id);
  snprintf(ns_b, sizeof ns_b, "lv17b%d", id);
}

static void ns_cleanup_at_exit(void) {
  if (ns_made) ns_cleanup();
}

/* 0, or LV_SKIP with the reason said. */
static int ns_setup(void) {
  if (geteuid() != 0) {
    lv_say("needs root (network namespaces)");
    return LV_SKIP;
  }
  if (run_sh(0, "ip netns list") != 0 || run_sh(0, "command -v nft") != 0) {
    lv_say("needs ip netns and nft");
    return LV_SKIP;
  }
  ns_cleanup(); /* an earlier case's, killed at its deadline */
  if (run_sh(0, "ip netns add %s", ns_a) || run_sh(0, "ip netns add %s", ns_b)) {
    ns_cleanup();
    lv_say("cannot create network namespaces here");
    return LV_SKIP;
  }
  if (run_sh(0, "ip link add lva netns %s type veth peer name lvb netns %s", ns_a, ns_b) ||
      run_sh(0, "ip -n %s addr add 10.77.17.1/24 dev lva", ns_a) || run_sh(0, "ip -n %s addr add 10.77.17.2/24 dev lvb", ns_b) ||
      run_sh(0, "ip -n %s link set lva up", ns_a) || run_sh(0, "ip -n %s link set lvb up", ns_b) ||
      run_sh(0, "ip -n %s link set lo up", ns_a) || run_sh(0, "ip -n %s link set lo up", ns_b)) {
    lv_say("cannot set up a veth pair between the namespaces");
    return LV_SKIP;
  }
  for (int i = 0; i < 100 && (run_sh(0, "ip -n %s -o link show lva | grep -q 'state UP'", ns_a) != 0 ||
                              run_sh(0, "ip -n %s -o link show lvb | grep -q 'state UP'", ns_b) != 0); i++)
    sleep_s(0.02);
  return 0;
}

static int drop_b(void) {
  return run_sh(0, "ip netns exec %s nft 'add table inet lvdrop; "
            "add chain inet lvdrop out { type filter hook output priority 0; policy drop; }'",
            ns_b);
}

static int enter(const char *ns, const char *ifname) {
  char path[64];
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) return -1;
  close(fd);
  setenv("COLLX_IFNAME", ifname, 1);
  return lv_init();
}

/* The listener, in B: listen, hand the handle up, call accept only after
 * accept_after seconds, then until a comm or `stop_s`. */
static int listener(int to_parent, double accept_after, double stop_s) {
  if (enter(ns_b, "lvb") != 0) return 2;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen = NULL, *recv = NULL;
  if (collx_listen(0, handle, &listen) != ncclSuccess) return 3;
  if (write(to_parent, handle, sizeof handle) != (ssize_t)sizeof handle) return 4;
  sleep_s(accept_after);
  double t0 = now_s();
  while (!recv && now_s() - t0 < stop_s) {
    if (collx_accept(listen, &recv) != ncclSuccess) return 5;
    sleep_s(0.001);
  }
  if (recv) collx_close_recv(recv);
  sleep_s(0.5);
  return recv ? 0 : 6;
}

/* The connector, in A: connect until a comm, an error or the limit;
 * reports the result and its time on the pipe. */
struct outcome {
  ncclResult_t res;
  double took;
};

static int connector(const char *handle_in, int to_parent, double limit_s) {
  if (enter(ns_a, "lva") != 0) return 2;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memcpy(handle, handle_in, sizeof handle);
  void *send = NULL;
  double t0 = now_s();
  struct outcome o;
  o.res = lv_connect(handle, &send, limit_s);
  o.took = now_s() - t0;
  if (write(to_parent, &o, sizeof o) != (ssize_t)sizeof o) return 3;
  if (send) {
    sleep_s(0.5);
    collx_close_send(send);
  }
  return 0;
}

/* Start listener and connector; `drop_at` < 0: no drop, else the seconds
 * after the connector starts at which B's packets are dropped (0: before). */
static int run(double drop_at, double accept_after, double limit_s, struct outcome *o) {
  setenv("COLLX_CONNECT_TIMEOUT", "2", 1);
  int rc = ns_setup();
  if (rc) return rc;
  int hp[2], op[2];
  LV_REQUIRE(pipe(hp) == 0 && pipe(op) == 0, "pipe");
  fflush(stdout);
  pid_t l = fork();
  if (l == 0) _exit(listener(hp[1], accept_after, limit_s + 5));
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  LV_REQUIRE(read(hp[0], handle, sizeof handle) == (ssize_t)sizeof handle, "listener did not start");
  if (drop_at == 0) LV_REQUIRE(drop_b() == 0, "nft drop");
  pid_t c = fork();
  if (c == 0) _exit(connector(handle, op[1], limit_s));
  if (drop_at > 0) {
    sleep_s(drop_at);
    LV_REQUIRE(drop_b() == 0, "nft drop");
  }
  LV_REQUIRE(read(op[0], o, sizeof *o) == (ssize_t)sizeof *o, "connector died");
  if (drop_at > 0) o->took -= drop_at;
  kill(l, SIGKILL);
  waitpid(l, NULL, 0);
  waitpid(c, NULL, 0);
  return 0;
}

static int blackhole(void) {
  struct outcome o;
  int rc = run(0, 0, 12, &o);
  if (rc) return rc;
  LV_REQUIRE(o.res != ncclInProgress, "connect to a black-holed listener still going after %.1f s", o.took);
  LV_REQUIRE(o.res != ncclSuccess, "connected to a black-holed listener");
  lv_say("connect to a black-holed address failed after %.2f s (COLLX_CONNECT_TIMEOUT=2)", o.took);
  return 0;
}

static int host_dies(void) {
  struct outcome o;
  int rc = run(1.0, 1000, 12, &o);
  if (rc) return rc;
  LV_REQUIRE(o.res != ncclInProgress, "connect still waiting %.1f s after the listener's host went silent", o.took);
  LV_REQUIRE(o.res != ncclSuccess, "connected to a listener that never accepted");
  lv_say("connect failed %.2f s after the listener's host went silent (COLLX_CONNECT_TIMEOUT=2)", o.took);
  return 0;
}

static int accept_late(void) {
  struct outcome o;
  int rc = run(-1, 2.5 * CT_S, 12, &o);
  if (rc) return rc;
  LV_REQUIRE(o.res == ncclSuccess, "connect failed (%d) after %.1f s: the listener was alive, only late to accept",
             o.res, o.took);
  lv_say("connect waited %.2f s for a listener that accepted after %.1f s", o.took, 2.5 * CT_S);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"blackhole", blackhole, 25, 0},
      {"host-dies", host_dies, 25, 0},
      {"accept-late", accept_late, 25, 0},
  };
  ns_names();
  ns_made = geteuid() == 0;
  atexit(ns_cleanup_at_exit);
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
