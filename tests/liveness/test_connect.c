/*
 * Connection setup under faults: a connector that NCCL's proxy steps too
 * slowly for the listener's setup deadline, a listening port flooded with
 * idle clients while the real peer connects.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "transport/tcp/handle.h"
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

/* Idle clients flood the listening port for FLOOD_S, keeping up to
 * FLOOD_OPEN connections open (closing the oldest), while the real peer
 * connects.  The listener's process may open only 1024 descriptors: a
 * fixed table of 1024 half-open sockets would exhaust them.  The peer
 * must still get through, and the listener's descriptors stay bounded. */
#define FLOOD_S 4.0
#define FLOOD_OPEN 4000
static void flood(const struct sockaddr_in *to) {
  static int fds[FLOOD_OPEN];
  int n = 0, head = 0;
  double t0 = now_s();
  while (now_s() - t0 < FLOOD_S) {
    if (n == FLOOD_OPEN) {
      close(fds[head]);
      head = (head + 1) % FLOOD_OPEN;
      n--;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      sleep_s(0.001);
      continue;
    }
    if (connect(fd, (const struct sockaddr *)to, sizeof *to) != 0 && errno != EINPROGRESS) {
      close(fd);
      continue;
    }
    fds[(head + n++) % FLOOD_OPEN] = fd;
  }
  _exit(0);
}

static int flood_connector(char *handle) {
  sleep_s(0.5); /* into the flood */
  void *send = NULL;
  double t0 = now_s();
  ncclResult_t r = lv_connect(handle, &send, 10);
  if (r != ncclSuccess || !send) return 5;
  printf("    connector: comm %.2f s after it began, 0.5 s into the flood\n", now_s() - t0);
  fflush(stdout);
  sleep_s(0.2);
  collx_close_send(send);
  return 0;
}

static int flooded_port(void) {
  setenv("COLLX_CONNECT_TIMEOUT", "1", 1);
  struct rlimit rl = {1024, 1024};
  LV_REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen = NULL, *recv = NULL;
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  struct collx_handle h;
  memcpy(&h, handle, sizeof h);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(h.port)};
  memcpy(&to.sin_addr, h.addr, 4);
  fflush(stdout);
  pid_t flooder = fork();
  if (flooder == 0) {
    struct rlimit big = {FLOOD_OPEN + 64, FLOOD_OPEN + 64};
    setrlimit(RLIMIT_NOFILE, &big);
    flood(&to);
  }
  pid_t child = fork();
  if (child == 0) _exit(flood_connector(handle));
  double t0 = now_s();
  int most_fds = 0;
  while (!recv && now_s() - t0 < 10) {
    ncclResult_t r = collx_accept(listen, &recv);
    LV_REQUIRE(r == ncclSuccess, "accept failed (%d)", r);
    int n = count_fds();
    if (n > most_fds) most_fds = n;
    sleep_s(0.0005);
  }
  int st = 0;
  waitpid(child, &st, 0);
  kill(flooder, SIGKILL);
  waitpid(flooder, NULL, 0);
  LV_REQUIRE(recv, "the real peer did not get through the flood in 10 s");
  LV_REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "connector failed (status %d)", WEXITSTATUS(st));
  LV_REQUIRE(most_fds < 1024 * 3 / 4, "the listener held %d descriptors of 1024", most_fds);
  lv_say("listener accepted the real peer %.2f s after the flood began, at most %d descriptors of 1024",
         now_s() - t0, most_fds);
  collx_close_recv(recv);
  collx_close_listen(listen);
  return 0;
}

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"slow-proxy", slow_proxy, 20, 0},
      {"flooded-port", flooded_port, 20, 0},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
