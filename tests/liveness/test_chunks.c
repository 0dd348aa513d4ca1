/*
 * Chunks checked against each other per receive buffer, end to end: a
 * fake sender speaks the wire protocol on raw sockets (hello, welcome,
 * one data stream, READY), waits for the receiver's CTS, then sends
 * chunks that clash.  The receive must fail with ncclRemoteError and a
 * WARN naming the peer, never complete.
 *
 * duplicate-chunk:    [0,4K) of an 8 KiB message twice (the second half
 *                     never sent)
 * empty-twice:        a grouped receive of two buffers; an empty message
 *                     for buffer 0, twice (buffer 1 gets nothing)
 * truncated-after-data: buffer 0 filled, then a TRUNCATED notice for it
 * eager-and-stream:   buffer 0 gets a 4 KiB eager message and a stream
 *                     chunk [4K,8K) of an 8 KiB message
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "transport/tcp/handle.h"
#include "transport/tcp/wire.h"
#include "lv.h"

static int io_all(int fd, void *buf, size_t len, int out) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL) : recv(fd, (char *)buf + done, len - done, 0);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

static int tcp_to(const struct sockaddr_in *a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) return -1;
  return fd;
}

struct fake {
  int ctrl, data;
};

/* Set up a comm by hand: one data stream. */
static int fake_connect(const char *handle, struct fake *f) {
  struct collx_handle h;
  memcpy(&h, handle, sizeof h);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(h.port)};
  memcpy(&to.sin_addr, h.addr, 4);
  f->ctrl = tcp_to(&to);
  if (f->ctrl < 0) return -1;
  uint64_t id = (uint64_t)getpid() * 2654435761u;
  struct wire_hello hello = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .kind = WIRE_HELLO_CTRL,
                             .nstreams = 1, .secret = h.secret, .conn_id = id};
  struct wire_welcome w;
  if (io_all(f->ctrl, &hello, sizeof hello, 1) || io_all(f->ctrl, &w, sizeof w, 0)) return -1;
  to.sin_port = htons(w.addrs[0].port);
  f->data = tcp_to(&to);
  struct wire_hello dh = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .kind = WIRE_HELLO_DATA,
                          .index = 0, .secret = h.secret, .conn_id = id};
  struct wire_ctrl ready;
  if (f->data < 0 || io_all(f->data, &dh, sizeof dh, 1) || io_all(f->ctrl, &ready, sizeof ready, 0)) return -1;
  return ready.type == WIRE_READY ? 0 : -1;
}

/* Read control records until a CTS; its sequence number. */
static int fake_cts(struct fake *f, uint32_t *seq) {
  for (;;) {
    struct wire_ctrl m;
    if (io_all(f->ctrl, &m, sizeof m, 0)) return -1;
    if (m.type == WIRE_CTS) {
      *seq = m.seq;
      return 0;
    }
  }
}

static char zeros[8192];

static int fake_chunk(struct fake *f, uint32_t seq, int idx, int flags, uint64_t total, uint64_t off, uint64_t len) {
  struct wire_chunk p = {.magic = WIRE_MAGIC, .idx = (uint8_t)idx, .flags = (uint8_t)flags, .seq = seq,
                         .total = total, .offset = off, .len = len};
  if (io_all(f->data, &p, sizeof p, 1)) return -1;
  return len ? io_all(f->data, zeros, (size_t)len, 1) : 0;
}

static int fake_eager(struct fake *f, uint32_t seq, int idx, uint64_t size) {
  struct wire_eager e = {.magic = WIRE_MAGIC, .type = WIRE_EAGER, .flags = WIRE_EAGER_MATCHED, .seq = seq,
                         .tag = 1, .idx = (uint8_t)idx, .size = size};
  if (io_all(f->ctrl, &e, sizeof e, 1)) return -1;
  return io_all(f->ctrl, zeros, (size_t)size, 1);
}

enum scenario { DUPLICATE, EMPTY_TWICE, TRUNCATED_AFTER, EAGER_AND_STREAM };

static int fake_sender(const char *handle, enum scenario sc, int from_parent) {
  struct fake f;
  uint32_t seq;
  if (fake_connect(handle, &f) != 0 || fake_cts(&f, &seq) != 0) return 2;
  int rc = 0;
  switch (sc) {
  case DUPLICATE:
    rc = fake_chunk(&f, seq, 0, 0, 8192, 0, 4096) || fake_chunk(&f, seq, 0, 0, 8192, 0, 4096);
    break;
  case EMPTY_TWICE:
    rc = fake_chunk(&f, seq, 0, 0, 0, 0, 0) || fake_chunk(&f, seq, 0, 0, 0, 0, 0);
    break;
  case TRUNCATED_AFTER:
    rc = fake_chunk(&f, seq, 0, 0, 4096, 0, 4096) || fake_chunk(&f, seq, 0, WIRE_CHUNK_TRUNCATED, 9999, 0, 0);
    break;
  case EAGER_AND_STREAM:
    rc = fake_eager(&f, seq, 0, 4096);
    sleep_s(0.05); /* the eager message lands first */
    rc = rc || fake_chunk(&f, seq, 0, 0, 8192, 4096, 4096);
    break;
  }
  char cue;
  lv_wait_cue(from_parent, &cue); /* hold the sockets open until the verdict */
  return rc ? 3 : 0;
}

static int run(enum scenario sc, int nbufs) {
  LV_REQUIRE(lv_init() == 0, "init");
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen = NULL, *recv = NULL;
  LV_REQUIRE(collx_listen(0, handle, &listen) == ncclSuccess, "listen");
  int down[2];
  LV_REQUIRE(pipe(down) == 0, "pipe");
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(fake_sender(handle, sc, down[0]));
  LV_REQUIRE(lv_accept(listen, &recv, 5) == ncclSuccess && recv, "accept of the fake sender");
  static char b0[8192], b1[8192];
  void *data[2] = {b0, b1};
  size_t sizes[2] = {sizeof b0, sizeof b1};
  int tags[2] = {1, 2};
  void *req = NULL;
  double took = 0;
  /* The clash may come in while irecv is still writing its CTS: its error. */
  ncclResult_t r = collx_irecv(recv, nbufs, data, sizes, tags, &req);
  LV_REQUIRE(r != ncclSuccess || req, "irecv gave neither a request nor an error");
  if (r == ncclSuccess) r = lv_wait(req, 2, &took);
  lv_cue(down[1], 'q');
  int st = 0;
  waitpid(child, &st, 0);
  LV_REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake sender failed (%d)", WEXITSTATUS(st));
  LV_REQUIRE(r != ncclSuccess, "the receive completed (%.3f s) though its chunks clash", took);
  LV_REQUIRE(r == ncclRemoteError, "the receive failed with %d, not ncclRemoteError", r);
  sleep_s(0.1); /* the thread that found the clash may still be writing its WARN */
  LV_REQUIRE(lv_warned("127.0.0.1:"), "no WARN naming the peer");
  lv_say("receive failed %.4f s after posting (with a WARN naming the peer)", took);
  collx_close_recv(recv);
  collx_close_listen(listen);
  return 0;
}

static int duplicate_chunk(void) { return run(DUPLICATE, 1); }
static int empty_twice(void) { return run(EMPTY_TWICE, 2); }
static int truncated_after_data(void) { return run(TRUNCATED_AFTER, 2); }
static int eager_and_stream(void) { return run(EAGER_AND_STREAM, 2); }

int main(int argc, char **argv) {
  static const struct lv_case cases[] = {
      {"duplicate-chunk", duplicate_chunk, 10, 1},
      {"empty-twice", empty_twice, 10, 1},
      {"truncated-after-data", truncated_after_data, 10, 1},
      {"eager-and-stream", eager_and_stream, 10, 1},
  };
  return lv_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
}
