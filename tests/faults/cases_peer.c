/*
 * A peer lost in the middle of a transfer: SIGKILLed, frozen by SIGSTOP, or
 * cut off by dropping every packet between two network namespaces.  The
 * survivor's next call must fail with ncclRemoteError in time, log a WARN
 * naming the peer and the device, fail every other request in flight, and
 * close promptly.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults.h"
#include "../common/shell.h"

#define KILL_LIMIT_S 2.0 /* error after SIGKILL of the peer within this */

/* What the streaming workers tell the leader. */
struct stream_results {
  double t_event;    /* when the fault was injected */
  double err_wait_s; /* survivors give up this long after t_event */
  long count[HX_MAX_ROLES], pending[HX_MAX_ROLES];
  double t_err[HX_MAX_ROLES], warn_delay[HX_MAX_ROLES];
  int err_code[HX_MAX_ROLES];
  char err_call[HX_MAX_ROLES][32], warn[HX_MAX_ROLES][2048], devname[HX_MAX_ROLES][64];
  int nerr[HX_MAX_ROLES], ndone[HX_MAX_ROLES], nstuck[HX_MAX_ROLES];
};

struct sargs {
  size_t cap;         /* message size (largest) */
  int all_max;        /* every message that large */
  const char *netns;  /* enter this network namespace first */
  const char *ifname; /* COLLX_IFNAME */
};

/* ---- the streaming workers -------------------------------------------------- */
static int enter_netns(const char *name) {
  char path[128];
  snprintf(path, sizeof path, "/run/netns/%s", name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    hx_fail("cannot enter network namespace %s: %s", name, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

/* The first error of this worker, for the leader. */
static void record_error(struct stream_results *res, int rc, const char *call, size_t mark) {
  int me = hx_role();
  res->t_err[me] = now_s();
  /* A plugin thread may be logging the WARN right now: give it a moment. */
  double end = now_s() + 0.5;
  while (hx_warn_mark() == mark && now_s() < end) sleep_s(0.001);
  res->warn_delay[me] = now_s() - res->t_err[me];
  res->err_code[me] = rc;
  snprintf(res->err_call[me], sizeof res->err_call[me], "%s", call);
  hx_warn_since(mark, res->warn[me], sizeof res->warn[me], '|');
}

/* Every other request still in flight must now fail too (or have
 * completed), never stay pending. */
static void drain_after_error(struct stream_results *res, struct hx_flow *f, int rc, const char *call) {
  int me = hx_role(), other = 0;
  long first = f->ndone + (strcmp(call, "test") == 0 ? 1 : 0);
  for (long i = first; i < f->nposted; i++) {
    struct hx_wait w;
    hx_wait_begin(&w, 1.0);
    for (;;) {
      int d = 0, sz[HX_SIZES_SLOTS];
      ncclResult_t t = NET(test, f->req[i % f->window], &d, sz);
      if (t != ncclSuccess) {
        res->nerr[me]++;
        if (t != ncclRemoteError) other = t;
        break;
      }
      if (d || hx_wait_over(&w)) {
        res->ndone[me] += d;
        res->nstuck[me] += !d;
        break;
      }
      sched_yield();
    }
  }
  if (res->nstuck[me])
    hx_fail("after %s returned %s, %d of the %ld other requests in flight still reported not done 1 s later", call,
            hx_result_str(rc), res->nstuck[me], f->nposted - first);
  if (other) hx_fail("a request in flight on the failed comm returned %s, expected ncclRemoteError", hx_result_str(other));
}

/* Stream until the plugin reports an error (judged by the leader), the
 * survivor's wait runs out, or the leader says stop. */
static void stream_until_error(struct stream_results *res, struct hx_flow *f, int sender) {
  int me = hx_role();
  size_t mark = hx_warn_mark();
  hx_step("streaming");
  for (;;) {
    const char *call;
    int rc = hx_flow_step(f, &call);
    __atomic_store_n(&res->count[me], f->ndone, __ATOMIC_SEQ_CST);
    __atomic_store_n(&res->pending[me], f->nposted - f->ndone, __ATOMIC_SEQ_CST);
    if (rc < 0) return;
    double ev = res->t_event;
    if (rc != ncclSuccess) {
      record_error(res, rc, call, mark);
      if (ev <= 0) hx_fail("%s returned %s before any fault was injected", call, hx_result_str(rc));
      drain_after_error(res, f, rc, call);
      return;
    }
    if (ev > 0 && now_s() - ev > res->err_wait_s) {
      hx_fail("no error %.1f s after the fault: every call keeps returning ncclSuccess (%ld messages done, %ld "
              "posted, isend/irecv returned NULL %ld times in a row)",
              res->err_wait_s, f->ndone, f->nposted, f->nulls);
      return;
    }
    if (hx_flag("stop")) return;
    /* Told to freeze with a full window of receives posted (so that the
     * sender's requests must stay in flight): stop ourselves right here. */
    if (!sender && hx_flag("freeze") && f->nposted - f->ndone == f->window) raise(SIGSTOP);
    if (f->nulls || f->ndone == f->nposted) sched_yield();
  }
}

static void w_stream(void *arg) {
  const struct sargs *a = arg;
  struct stream_results *res = hx_shared();
  int sender = is_sender();
  if (a->netns && enter_netns(a->netns)) return;
  if (a->ifname) setenv("COLLX_IFNAME", a->ifname, 1);
  if (hx_load()) return;
  snprintf(res->devname[hx_role()], sizeof res->devname[0], "%s", hx_devprops.name ? hx_devprops.name : "?");
  struct hx_conn k;
  if (hx_conn_establish(&k, sender, "handle", 10.0)) return;
  struct hx_flow f;
  hx_flow_stream(&f, "stream", a->cap, 7, 8, 0, 0xF00D);
  f.all_max = a->all_max;
  if (hx_flow_open(&f, hx_conn_comm(&k), sender)) return;
  stream_until_error(res, &f, sender);
  hx_step("closing after the error");
  double t0 = now_s();
  hx_conn_close(&k);
  double dt = now_s() - t0;
  if (dt > S(1.0)) hx_fail("closing the failed comm took %.2f s", dt);
  hx_flow_free(&f);
}

/* ---- the leader --------------------------------------------------------------- */
static int wait_count(const struct stream_results *res, int role, long n, double timeout_s) {
  double end = now_s() + S(timeout_s);
  while (__atomic_load_n(&res->count[role], __ATOMIC_SEQ_CST) < n) {
    if (now_s() > end) {
      hx_fail("[%s] completed only %ld messages in %.1f s (waited for %ld)", hx_role_name(role), res->count[role],
              S(timeout_s), n);
      return -1;
    }
    if (hx_failed_all() || hx_aborted()) {
      hx_fail("[%s] stopped before the fault was injected", hx_role_name(role));
      return -1;
    }
    sleep_s(0.002);
  }
  return 0;
}

/* Judge one survivor: error code, time since the fault, WARN content. */
static void judge_error(const struct stream_results *res, int role, double lo, double hi, const char *fault,
                        const char *peer_addr) {
  const char *who = hx_role_name(role), *warn = res->warn[role], *dev = res->devname[role];
  if (res->t_err[role] <= 0) {
    if (!hx_failed_all()) hx_fail("[%s] saw no error after %s", who, fault);
    return;
  }
  double dt = res->t_err[role] - res->t_event;
  int code = res->err_code[role];
  hx_summary("%s: %s from %s %.3f s after %s; ", who, hx_result_str(code), res->err_call[role], dt, fault);
  if (code != ncclRemoteError)
    hx_fail("[%s] %s returned %s (%d) after %s, expected ncclRemoteError (6)", who, res->err_call[role],
            hx_result_str(code), code, fault);
  if (dt > hi) hx_fail("[%s] error came %.3f s after %s (limit %.2f s)", who, dt, fault, hi);
  if (dt < lo) hx_fail("[%s] error came %.3f s after %s: sooner than possible (at least %.2f s)", who, dt, fault, lo);
  if (res->warn_delay[role] > 0.01)
    hx_note("[%s] the WARN was logged %.0f ms after the call returned the error", who, res->warn_delay[role] * 1e3);
  if (!warn[0])
    hx_fail("[%s] no WARN was logged for the failure (waited 0.5 s after the error)", who);
  else if (!strstr(warn, peer_addr) || !strstr(warn, dev))
    hx_fail("[%s] the WARN must name the peer (%s) and the device (%s); it was: %s", who, peer_addr, dev, warn);
  else
    hx_note("[%s] WARN: %s", who, warn);
}

/* Freeze the victim until the survivor has requests stuck in flight, so
 * that the error must come from test() of a posted request; how many. */
static long freeze_first(const struct stream_results *res, int victim_is_sender, int victim, int survivor) {
  if (victim_is_sender) {
    kill(hx_pid(victim), SIGSTOP);
  } else {
    /* The receiver stops itself once it has a full window posted. */
    hx_flag_set("freeze", 1);
    int st = 0;
    double end = now_s() + S(5.0);
    while (waitpid(hx_pid(victim), &st, WUNTRACED | WNOHANG) == 0 && now_s() < end) sleep_s(0.001);
    if (!WIFSTOPPED(st)) hx_fail("the receiver did not stop itself with a full window of receives posted");
  }
  long stuck = 0;
  double end = now_s() + 1.0;
  sleep_s(0.2);
  while ((stuck = __atomic_load_n(&res->pending[survivor], __ATOMIC_SEQ_CST)) == 0 && now_s() < end) sleep_s(0.01);
  if (!stuck) hx_fail("the %s has no request in flight after freezing its peer", hx_role_name(survivor));
  return stuck;
}

static void summarize_pair(const struct stream_results *res, int survivor, int sig, long stuck, int inflight) {
  int n = res->nerr[survivor] + res->ndone[survivor] + res->nstuck[survivor];
  if (n)
    hx_summary("then test of the %d other requests in flight: %d x ncclRemoteError, %d done, %d stuck; ", n,
               res->nerr[survivor], res->ndone[survivor], res->nstuck[survivor]);
  if (inflight && res->t_err[survivor] > 0 && strcmp(res->err_call[survivor], "test") != 0 && !res->nerr[survivor])
    hx_fail("[%s] with %ld requests in flight neither the first error nor any later test came from test()",
            hx_role_name(survivor), stuck);
  if (sig == SIGKILL)
    hx_summary("[limit %.1f s", KILL_LIMIT_S);
  else
    hx_summary("[window %.1f-%.1f s: COLLX_TIMEOUT=%d minus up to one heartbeat, plus %.1f s slack", TIMEOUT_S - 1.5,
               TIMEOUT_S + S(0.5), TIMEOUT_S, S(0.5));
  hx_summary("; %ld/%ld messages before", res->count[1], res->count[2]);
  if (inflight) hx_summary("; peer frozen first, %ld requests were in flight", stuck);
  hx_summary("]");
}

/* Kill or freeze one side of a streaming pair. */
static void fault_pair(int victim_is_sender, int sig, int inflight) {
  struct stream_results *res = hx_shared();
  /* A frozen receiver's socket buffers take up to ~36 MiB: for sends to stay
   * in flight, every message is 16 MiB (8 in flight). */
  int big = inflight && !victim_is_sender;
  static struct sargs a;
  a = (struct sargs){big ? 16u << 20 : 1u << 20, big, NULL, NULL};
  int victim = victim_is_sender ? 2 : 1, survivor = 3 - victim;
  res->err_wait_s = sig == SIGKILL ? S(5.0) : S(TIMEOUT_S + 5.0);
  if (hx_spawn(1, w_stream, &a) < 0 || hx_spawn(2, w_stream, &a) < 0) return;
  long warm = a.cap > (1u << 20) ? 6 : 16;
  if (wait_count(res, 1, warm, 10.0) || wait_count(res, 2, warm, 10.0)) return;
  sleep_s(0.05);
  long stuck = inflight ? freeze_first(res, victim_is_sender, victim, survivor) : 0;
  hx_step("sending %s to the %s", sig == SIGKILL ? "SIGKILL" : "SIGSTOP", hx_role_name(victim));
  res->t_event = now_s();
  kill(hx_pid(victim), sig);
  hx_reap(survivor, now_s() + S(TIMEOUT_S + 8.0), 0);
  if (hx_pid(victim) > 0) kill(hx_pid(victim), SIGKILL);
  hx_reap(victim, now_s() + 5.0, 1);
  char fault[64];
  snprintf(fault, sizeof fault, "%s of the %s", sig == SIGKILL ? "SIGKILL" : "SIGSTOP", hx_role_name(victim));
  if (sig == SIGKILL)
    judge_error(res, survivor, 0, S(KILL_LIMIT_S), fault, "127.0.0.1");
  else /* heartbeats every 1 s, checked every 200 ms */
    judge_error(res, survivor, TIMEOUT_S - 1.5, TIMEOUT_S + S(0.5), fault, "127.0.0.1");
  summarize_pair(res, survivor, sig, stuck, inflight);
}

static void case_kill_sender(void) { fault_pair(1, SIGKILL, 0); }
static void case_kill_receiver(void) { fault_pair(0, SIGKILL, 0); }
static void case_kill_sender_inflight(void) { fault_pair(1, SIGKILL, 1); }
static void case_kill_receiver_inflight(void) { fault_pair(0, SIGKILL, 1); }
static void case_stop_sender(void) { fault_pair(1, SIGSTOP, 0); }
static void case_stop_receiver(void) { fault_pair(0, SIGSTOP, 0); }

/* ---- packets dropped between two network namespaces (root only) ---------- */

struct netns_pair {
  char a[32], b[32], va[16], vb[16];
};

static void netns_cleanup(const struct netns_pair *ns) {
  run_sh(hx_verbose, "ip netns del %s", ns->a);
  run_sh(hx_verbose, "ip netns del %s", ns->b);
}

/* Two namespaces joined by a veth pair, 10.77.0.1 and .2; NULL (skipped) if impossible. */
static const char *netns_setup(struct netns_pair *ns) {
  int id = (int)(getpid() % 100000);
  snprintf(ns->a, sizeof ns->a, "cxfA%d", id);
  snprintf(ns->b, sizeof ns->b, "cxfB%d", id);
  snprintf(ns->va, sizeof ns->va, "cxfa%d", id);
  snprintf(ns->vb, sizeof ns->vb, "cxfb%d", id);
  if (run_sh(hx_verbose, "ip netns add %s", ns->a) || run_sh(hx_verbose, "ip netns add %s", ns->b)) return "cannot create network namespaces here";
  if (run_sh(hx_verbose, "ip link add %s netns %s type veth peer name %s netns %s", ns->va, ns->a, ns->vb, ns->b) ||
      run_sh(hx_verbose, "ip -n %s addr add 10.77.0.1/24 dev %s", ns->a, ns->va) ||
      run_sh(hx_verbose, "ip -n %s addr add 10.77.0.2/24 dev %s", ns->b, ns->vb) || run_sh(hx_verbose, "ip -n %s link set %s up", ns->a, ns->va) ||
      run_sh(hx_verbose, "ip -n %s link set %s up", ns->b, ns->vb) || run_sh(hx_verbose, "ip -n %s link set lo up", ns->a) ||
      run_sh(hx_verbose, "ip -n %s link set lo up", ns->b))
    return "cannot set up a veth pair between the namespaces";
  /* Wait for the link (and IPv4 DAD-free addresses) to come up. */
  for (int i = 0; i < 100 && run_sh(hx_verbose, "ip netns exec %s ping -c1 -W1 10.77.0.2", ns->a) != 0; i++) {
    if (run_sh(hx_verbose, "command -v ping") != 0) {
      sleep_s(0.5);
      break;
    }
    sleep_s(0.05);
  }
  return NULL;
}

/* Drop everything in and out of B's namespace: no RST, no FIN, silence. */
static const char *drop_all(const struct netns_pair *ns) {
  if (run_sh(hx_verbose, "command -v nft") == 0 &&
      run_sh(hx_verbose, "ip netns exec %s nft 'add table inet cxfdrop; "
         "add chain inet cxfdrop in { type filter hook input priority 0; policy drop; }; "
         "add chain inet cxfdrop out { type filter hook output priority 0; policy drop; }'",
         ns->b) == 0)
    return "nft drop in+out in the receiver's peer namespace";
  if (run_sh(hx_verbose, "command -v iptables") == 0 && run_sh(hx_verbose, "ip netns exec %s iptables -A INPUT -j DROP", ns->b) == 0 &&
      run_sh(hx_verbose, "ip netns exec %s iptables -A OUTPUT -j DROP", ns->b) == 0)
    return "iptables DROP in+out";
  if (run_sh(hx_verbose, "ip -n %s link set %s down", ns->b, ns->vb) == 0) return "veth link down (no nft/iptables)";
  return NULL;
}

static void netns_stream_and_drop(struct netns_pair *ns) {
  struct stream_results *res = hx_shared();
  static struct sargs rx, tx;
  rx = (struct sargs){1u << 20, 0, ns->a, ns->va};
  tx = (struct sargs){1u << 20, 0, ns->b, ns->vb};
  res->err_wait_s = S(TIMEOUT_S + 6.0);
  if (hx_spawn(1, w_stream, &rx) < 0 || hx_spawn(2, w_stream, &tx) < 0) return;
  if (wait_count(res, 1, 16, 10.0) || wait_count(res, 2, 16, 10.0)) return;
  double t0 = now_s();
  const char *how = drop_all(ns);
  if (!how) {
    hx_kill_workers();
    hx_skip("no way to drop packets (nft, iptables, ip link all failed)");
    return;
  }
  res->t_event = (t0 + now_s()) / 2; /* the rule took effect in between */
  hx_reap_workers(now_s() + S(TIMEOUT_S + 10.0));
  judge_error(res, 1, TIMEOUT_S - 1.5, TIMEOUT_S + S(0.5), "the packet drop", "10.77.0.2");
  judge_error(res, 2, TIMEOUT_S - 1.5, TIMEOUT_S + S(0.5), "the packet drop", "10.77.0.1");
  hx_summary("[%s; limit COLLX_TIMEOUT=%d s]", how, TIMEOUT_S);
}

/* What a killed case left behind (the names come from the leader's pid). */
static void netns_leftovers(pid_t leader) {
  if (geteuid() != 0) return;
  struct netns_pair ns;
  snprintf(ns.a, sizeof ns.a, "cxfA%d", (int)(leader % 100000));
  snprintf(ns.b, sizeof ns.b, "cxfB%d", (int)(leader % 100000));
  netns_cleanup(&ns);
}

static void case_netns_drop(void) {
  if (geteuid() != 0) {
    hx_skip("needs root (network namespaces)");
    return;
  }
  if (run_sh(hx_verbose, "ip -V") != 0) {
    hx_skip("needs the ip command (iproute2)");
    return;
  }
  struct netns_pair ns;
  const char *why = netns_setup(&ns);
  if (why)
    hx_skip("%s", why);
  else
    netns_stream_and_drop(&ns);
  hx_kill_workers();
  netns_cleanup(&ns);
}

#define PAIR_ROLES {"leader", "receiver", "sender"}
const struct hx_case peer_cases[] = {
    {"kill-sender", "sender SIGKILLed mid-transfer: receiver's next call fails with ncclRemoteError within 2 s", 30,
     PAIR_ROLES, case_kill_sender, NULL, {NULL}, NULL, NULL},
    {"kill-receiver", "receiver SIGKILLed mid-transfer: sender fails with ncclRemoteError within 2 s", 30, PAIR_ROLES,
     case_kill_receiver, NULL, {NULL}, NULL, NULL},
    {"kill-sender-inflight", "sender frozen, then SIGKILLed: the receiver's pending test fails within 2 s", 30,
     PAIR_ROLES, case_kill_sender_inflight, NULL, {NULL}, NULL, NULL},
    {"kill-receiver-inflight", "receiver frozen, then SIGKILLed: the sender's pending test fails within 2 s", 30,
     PAIR_ROLES, case_kill_receiver_inflight, NULL, {NULL}, NULL, NULL},
    {"stop-sender", "sender SIGSTOPped: receiver fails within COLLX_TIMEOUT (3 s)", 30, PAIR_ROLES, case_stop_sender,
     NULL, {NULL}, NULL, NULL},
    {"stop-receiver", "receiver SIGSTOPped: sender fails within COLLX_TIMEOUT (3 s)", 30, PAIR_ROLES,
     case_stop_receiver, NULL, {NULL}, NULL, NULL},
    {"netns-drop", "packets dropped between two network namespaces: error within COLLX_TIMEOUT (root)", 45,
     PAIR_ROLES, case_netns_drop, NULL, {NULL}, NULL, netns_leftovers},
};
const int peer_count = HX_GROUP(peer_cases);
