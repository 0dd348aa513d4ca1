/*
 * Connection setup under faults: a connector that NCCL's proxy steps too
 * slowly for the listener's setup deadline, a listening port flooded with
 * idle clients while the real peer connects.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "lv.h"

/* The connector is stepped a few times, then not for 1.5 x
 * COLLX_CONNECT_TIMEOUT (NCCL's proxy busy elsewhere): the listener drops
 * its half.  Stepped again, the connector starts its handshake over
 * instead of failing. */
static int slow_proxy_child(char *handle, int to_parent) {
  void *send = NULL;
  if (collx_connect(0, handle, &send) != ncclSuccess) return 3;
  if (send) return 4; /* too fast: the case needs the connect unfinished */
  sleep_s(1.5);
  double t0 = now_s();
  ncclResult_t r = lv_connect(handle, &send, 8);
  if (r != ncclSuccess || !send) return 5;
  printf("    connector: comm %.2f s after it was stepped again\n", now_s() - t0);
  fflush(stdout);
  lv_cue(to_parent, 'c');
  sleep_s(0.5);
  collx_close_send(send);
  return 0;
}

static int slow_proxy(void) {
  setenv("COLLX_CONNECT_TIMEOUT", "1", 1);
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen = NULL, *recv = NULL;
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  int up[2];
  LV_REQUIRE(pipe(up) == 0, "pipe");
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(slow_proxy_child(handle, up[1]));
  ncclResult_t r = lv_accept(listen, &recv, 8);
  int st = 0;
  LV_REQUIRE(r == ncclSuccess && recv, "no connection accepted (%d)", r);
  waitpid(child, &st, 0);
  LV_REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "connector failed (status %d)", WEXITSTATUS(st));
  collx_close_recv(recv);
  collx_close_listen(listen);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"slow-proxy", slow_proxy, 20, 0},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
