/*
 * The control channel (src/transport/tcp/ctrl.c) alone, over loopback
 * socket pairs: the order of records and items on both sockets, partial
 * writes, the switch to the spare at the same byte, the reader dropping
 * the other copy, a writer that dies with records queued, heartbeats,
 * what is owed going out at unlock, an end of stream between or inside
 * messages, and reads that peek (COLLX_CTRL_PEEK).
 *
 * Partial writes and write errors come from a sendmsg of this program's
 * own, which the library's socket helpers call instead of the C
 * library's: per socket, a budget of bytes it takes before it is full,
 * and an error to fail with.  Likewise an ioctl that can say how many
 * bytes of a socket the peer has not acknowledged (SIOCOUTQ), which a
 * loopback pair never leaves for long.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <linux/sockios.h>
#include <stdarg.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/base.h"
#include "transport/tcp/ctrl.h"
#include "../common/check.h"

/* ---- sendmsg with a budget and a failure per socket ----------------------- */

#define SHIM_FDS 1024
static long budget[SHIM_FDS];  /* bytes the socket still takes; -1 unlimited */
static int fail_with[SHIM_FDS]; /* errno of the next sendmsg; 0 none */

static long outq_fake[SHIM_FDS]; /* SIOCOUTQ's answer; -1 the kernel's */
static long sends[SHIM_FDS];     /* sendmsg calls that wrote something */

static void shim_reset(int fd) {
  budget[fd] = -1;
  fail_with[fd] = 0;
  outq_fake[fd] = -1;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags) {
  static ssize_t (*real)(int, const struct msghdr *, int);
  if (!real) real = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
  if (fd < 0 || fd >= SHIM_FDS) return real(fd, m, flags);
  if (budget[fd] < 0 && !fail_with[fd]) {
    ssize_t got = real(fd, m, flags);
    sends[fd] += got > 0;
    return got;
  }
  if (fail_with[fd]) {
    errno = fail_with[fd];
    return -1;
  }
  if (budget[fd] == 0) {
    errno = EAGAIN;
    return -1;
  }
  /* The same iovecs, cut to the budget. */
  struct iovec iov[8];
  struct msghdr cut = *m;
  size_t left = (size_t)budget[fd], n = 0;
  for (size_t i = 0; i < m->msg_iovlen && i < 8 && left > 0; i++, n++) {
    iov[i] = m->msg_iov[i];
    if (iov[i].iov_len > left) iov[i].iov_len = left;
    left -= iov[i].iov_len;
  }
  cut.msg_iov = iov;
  cut.msg_iovlen = n;
  ssize_t got = real(fd, &cut, flags);
  if (got > 0) budget[fd] -= got;
  sends[fd] += got > 0;
  return got;
}

/* SIOCOUTQ's answer per socket (outq_fake, -1: the kernel's). */

int ioctl(int fd, unsigned long req, ...) {
  static int (*real)(int, unsigned long, ...);
  if (!real) real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
  va_list ap;
  va_start(ap, req);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (req == SIOCOUTQ && fd >= 0 && fd < SHIM_FDS && outq_fake[fd] >= 0) {
    *(int *)arg = (int)outq_fake[fd];
    return 0;
  }
  return real(fd, req, arg);
}

/* ---- a comm to hold the channel, and socket pairs ------------------------- */

static const struct tcp_comm_role test_role = {.name = "test"};

struct bed {
  struct tcp_comm_base *comm;
  struct tcp_ctrl *k;
  int peer[2]; /* the far ends of the channel's sockets */
};

static void tcp_pair(int *near, int *far) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &len) != 0)
    exit(2);
  *near = socket(AF_INET, SOCK_STREAM, 0);
  if (*near < 0 || connect(*near, (struct sockaddr *)&a, sizeof a) != 0) exit(2);
  *far = accept(l, NULL, NULL);
  if (*far < 0 || *near >= SHIM_FDS) exit(2);
  close(l);
  /* Records go out as written, as sock_tune has it for the real sockets. */
  int one = 1;
  setsockopt(*near, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(*far, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  shim_reset(*near);
}

static struct bed bed_open(const struct tcp_ctrl_ops *ops, int spare) {
  struct bed b;
  b.comm = calloc(1, sizeof *b.comm);
  if (!b.comm) exit(2);
  b.comm->role = &test_role;
  snprintf(b.comm->peer, sizeof b.comm->peer, "test peer");
  snprintf(b.comm->devname, sizeof b.comm->devname, "lo");
  int near[2] = {-1, -1};
  b.peer[1] = -1;
  for (int w = 0; w < 1 + spare; w++) tcp_pair(&near[w], &b.peer[w]);
  b.k = &b.comm->ctrl;
  if (tcp_ctrl_init(b.k, b.comm, ops, near[0], near[1]) != 0) exit(2);
  return b;
}

static void bed_close(struct bed *b) {
  atomic_store(&b->comm->error, ncclRemoteError); /* close at once, no linger */
  tcp_ctrl_close(b->k);
  for (int w = 0; w < 2; w++)
    if (b->peer[w] >= 0) close(b->peer[w]);
  free(b->comm);
}

/* Every byte the far end of socket w has now (it waits up to 200 ms for
 * the first, then takes what follows within 20 ms). */
static size_t peer_read(struct bed *b, int w, char *buf, size_t cap) {
  size_t got = 0;
  int wait = 200;
  for (;;) {
    struct pollfd p = {.fd = b->peer[w], .events = POLLIN};
    if (got >= cap || poll(&p, 1, wait) <= 0) return got;
    ssize_t n = recv(b->peer[w], buf + got, cap - got, MSG_DONTWAIT);
    if (n <= 0) return got;
    got += (size_t)n;
    wait = 20;
  }
}

/* With the spare written in batches (COLLX_CTRL_SPARE_BATCH): wait out
 * the batch's delay and flush, so that the spare has every byte written
 * (the generic cases look at both sockets). */
static void spare_catch_up(struct bed *b) {
  if (!tcp_cfg.ctrl_spare_batch) return;
  poll(NULL, 0, 30);
  tcp_ctrl_pump(b->k);
}

static struct wire_ctrl record(uint8_t type, uint32_t seq) {
  return (struct wire_ctrl){.magic = WIRE_MAGIC, .type = type, .seq = seq};
}

/* ---- a role for the tests: items from a list, records parsed into a log --- */

static struct {
  struct tcp_ctrl_item items[4];
  int nitems, next, done;
  uint32_t seen[4096];
  int nseen, stop_at;
  int owed;
  struct wire_ctrl owed_rec;
} role;

static void role_reset(void) { memset(&role, 0, sizeof role); }

static int test_next_item(struct tcp_ctrl *k, struct tcp_ctrl_item *it) {
  (void)k;
  if (role.next == role.nitems) return 0;
  *it = role.items[role.next++];
  return 1;
}

static void test_item_done(struct tcp_ctrl *k) {
  (void)k;
  role.done++;
}

static int test_parse(struct tcp_ctrl *k) {
  struct wire_ctrl m;
  if (role.stop_at && role.nseen == role.stop_at) return -1;
  if (k->rx_done - k->rx_pos < sizeof m) return 0;
  memcpy(&m, k->rx + k->rx_pos, sizeof m);
  k->rx_pos += sizeof m;
  if (role.nseen < 4096) role.seen[role.nseen++] = m.seq;
  return 1;
}

static int test_owed(struct tcp_ctrl *k) {
  (void)k;
  return role.owed;
}

static void test_fill(struct tcp_ctrl *k) {
  if (tcp_ctrl_queue(k, &role.owed_rec) == 0) role.owed = 0;
}

static const struct tcp_ctrl_ops sender_ops = {
    .write_error_fails = 1, .next_item = test_next_item, .item_done = test_item_done, .parse = test_parse};
static const struct tcp_ctrl_ops receiver_ops = {
    .write_error_fails = 0, .eof_is_goodbye = 1, .owed = test_owed, .fill = test_fill, .parse = test_parse};

/* ---- the cases ------------------------------------------------------------ */

/* Records, an item, and a record queued while the item is written land
 * on both sockets in that order, the late record behind the item; the
 * item is done once, only when both sockets have it. */
static void test_order_on_both_sockets(void) {
  role_reset();
  struct bed b = bed_open(&sender_ops, 1);
  static char payload[3000];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (char)(i * 7);
  struct wire_eager hdr = {.magic = WIRE_MAGIC, .type = WIRE_EAGER, .size = sizeof payload};
  role.items[0] = (struct tcp_ctrl_item){.hdr = &hdr, .hlen = sizeof hdr, .payload = payload,
                                         .plen = sizeof payload};
  role.nitems = 1;
  struct wire_ctrl first = record(WIRE_CTS_WANTED, 1), late = record(WIRE_CTS_WANTED, 2);

  /* The first socket takes the record and 100 bytes of the item, then is
   * full. */
  budget[b.k->fd[0]] = sizeof first + 100;
  tcp_ctrl_lock(b.k);
  CHECK(tcp_ctrl_queue(b.k, &first) == 0, "a record is queued");
  CHECK(tcp_ctrl_flush(b.k) == 1, "the flush stops at the full socket");
  CHECK(b.k->item_active, "the item is in progress");
  CHECK(tcp_ctrl_queue(b.k, &late) == 0, "a record is queued in the middle of the item");
  CHECK(tcp_ctrl_flush(b.k) == 1 && role.done == 0, "no item is done while one socket lacks it");
  budget[b.k->fd[0]] = -1;
  CHECK(tcp_ctrl_flush(b.k) == 0, "all written once the socket takes more");
  CHECK(tcp_ctrl_held(b.k) == 0 && role.done == 1, "nothing held, the item done once (%d)", role.done);
  tcp_ctrl_unlock(b.k);

  size_t want = 2 * sizeof first + sizeof hdr + sizeof payload;
  static char expect[sizeof(struct wire_ctrl) * 2 + sizeof(struct wire_eager) + 3000], got[2][sizeof expect];
  size_t at = 0;
  memcpy(expect + at, &first, sizeof first), at += sizeof first;
  memcpy(expect + at, &hdr, sizeof hdr), at += sizeof hdr;
  memcpy(expect + at, payload, sizeof payload), at += sizeof payload;
  memcpy(expect + at, &late, sizeof late), at += sizeof late;
  spare_catch_up(&b);
  for (int w = 0; w < 2; w++) {
    size_t n = peer_read(&b, w, got[w], sizeof got[w]);
    CHECK(n == want, "socket %d carried %zu bytes, expected %zu", w, n, want);
    CHECK(n == want && memcmp(got[w], expect, want) == 0,
          "socket %d: the first record, the item, then the record queued during it", w);
  }
  CHECK(!tcp_comm_failed(b.comm), "no failure");
  bed_close(&b);
}

/* A socket that takes a few bytes per call: every byte still goes out
 * once, in order. */
static void test_partial_writes(void) {
  role_reset();
  struct bed b = bed_open(&sender_ops, 0);
  static char payload[700];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (char)(i * 13 + 1);
  struct wire_eager hdr = {.magic = WIRE_MAGIC, .type = WIRE_EAGER, .size = sizeof payload};
  role.items[0] = (struct tcp_ctrl_item){.hdr = &hdr, .hlen = sizeof hdr, .payload = payload,
                                         .plen = sizeof payload};
  role.nitems = 1;
  tcp_ctrl_lock(b.k);
  for (uint32_t i = 0; i < 10; i++) {
    struct wire_ctrl m = record(WIRE_CTS_WANTED, i);
    tcp_ctrl_queue(b.k, &m);
  }
  int rounds = 0, rc;
  do {
    budget[b.k->fd[0]] = 13;
    rc = tcp_ctrl_flush(b.k);
  } while (rc == 1 && ++rounds < 1000);
  tcp_ctrl_unlock(b.k);
  size_t want = 10 * sizeof(struct wire_ctrl) + sizeof hdr + sizeof payload;
  CHECK(rc == 0 && rounds == (int)((want + 12) / 13) - 1, "written 13 bytes a round, %d rounds full (rc %d)",
        rounds, rc);
  static char got[4096];
  size_t n = peer_read(&b, 0, got, sizeof got);
  int in_order = n == want;
  for (uint32_t i = 0; in_order && i < 10; i++) {
    struct wire_ctrl m;
    memcpy(&m, got + i * sizeof m, sizeof m);
    in_order = m.seq == i && m.type == WIRE_CTS_WANTED;
  }
  in_order = in_order && !memcmp(got + 10 * sizeof(struct wire_ctrl) + sizeof hdr, payload, sizeof payload);
  CHECK(in_order, "%zu bytes, the ten records then the item, each byte once", n);
  bed_close(&b);
}

/* The far end writes records 0..n-1 on socket w. */
static void peer_send_records(struct bed *b, int w, uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to; i++) {
    struct wire_ctrl m = record(WIRE_HEARTBEAT, i);
    if (send(b->peer[w], &m, sizeof m, 0) != (ssize_t)sizeof m) exit(2);
  }
}

static int seen_in_order(uint32_t n) {
  if (role.nseen != (int)n) return 0;
  for (uint32_t i = 0; i < n; i++)
    if (role.seen[i] != i) return 0;
  return 1;
}

static void drain_until(struct bed *b, int n) {
  for (int t = 0; t < 100 && role.nseen < n && !tcp_comm_failed(b->comm); t++) {
    tcp_ctrl_drain(b->k);
    if (role.nseen < n) poll(NULL, 0, 5);
  }
}

/* The socket read is given up part way: the reader goes on with the spare
 * from the same byte, no record lost or seen twice. */
static void test_switch_at_the_same_byte(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  peer_send_records(&b, 0, 0, 100);
  peer_send_records(&b, 1, 0, 100);
  role.stop_at = 40; /* the role stops reading after 40, as one waiting for a receive does */
  drain_until(&b, 40);
  CHECK(role.nseen == 40 && b.k->rd == 0, "40 records read from the first socket (%d)", role.nseen);
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  role.stop_at = 0;
  drain_until(&b, 100);
  CHECK(seen_in_order(100), "records 0..99 each once, across the switch (%d seen)", role.nseen);
  CHECK(b.k->rd == 1, "the spare is read now");
  CHECK(!tcp_comm_failed(b.comm), "no failure with the spare left");
  bed_close(&b);
}

/* The socket read ends (its path failed): the reader moves to the spare
 * by itself, at the same byte. */
static void test_switch_on_end_of_stream(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  peer_send_records(&b, 0, 0, 60);
  peer_send_records(&b, 1, 0, 60);
  drain_until(&b, 60);
  close(b.peer[0]);
  b.peer[0] = -1;
  peer_send_records(&b, 1, 60, 100);
  drain_until(&b, 100);
  CHECK(seen_in_order(100), "records 0..99 each once after the first socket ended (%d seen)", role.nseen);
  CHECK(b.k->rd == 1 && !(atomic_load(&b.k->live) & 1), "the first socket given up, the spare read");
  CHECK(!tcp_comm_failed(b.comm), "no failure with the spare left");
  bed_close(&b);
}

static int unread(int fd) {
  int n = -1;
  return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* The copy on the socket not read is dropped up to where the reader is,
 * at the watchdog's look; no more than that. */
static void test_other_copy_dropped(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  peer_send_records(&b, 0, 0, 100);
  peer_send_records(&b, 1, 0, 100);
  drain_until(&b, 100);
  peer_send_records(&b, 1, 100, 110); /* ahead of the reader: kept */
  poll(NULL, 0, 20);
  int before = unread(b.k->fd[1]);
  tcp_ctrl_watch(b.k, tcp_now());
  int after = unread(b.k->fd[1]);
  CHECK(before == 110 * (int)sizeof(struct wire_ctrl), "the spare holds its copy (%d bytes)", before);
  CHECK(after == 10 * (int)sizeof(struct wire_ctrl), "the copy dropped up to the reader, the rest kept (%d)", after);
  CHECK(seen_in_order(100), "the reader's records are untouched (%d)", role.nseen);
  bed_close(&b);
}

/* Only the spare is left; it has written part of the queued records when
 * it fails too.  The writer is dead: nothing is held, nothing more is
 * taken, and a heartbeat after that touches no stale cursor. */
static void test_dead_writer_with_records_queued(const struct tcp_ctrl_ops *ops) {
  role_reset();
  struct bed b = bed_open(ops, 1);
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  tcp_ctrl_lock(b.k);
  for (uint32_t i = 0; i < 5; i++) {
    struct wire_ctrl m = record(WIRE_CTS_WANTED, i);
    tcp_ctrl_queue(b.k, &m);
  }
  budget[b.k->fd[1]] = 50;
  CHECK(tcp_ctrl_flush(b.k) == 1 && tcp_ctrl_held(b.k) > 0, "part of the records written, the socket full");
  fail_with[b.k->fd[1]] = EPIPE;
  int rc = tcp_ctrl_flush(b.k);
  CHECK(rc == (ops->write_error_fails ? -1 : 0), "the flush says what the role asked (%d)", rc);
  CHECK(tcp_ctrl_writer_dead(b.k), "the writer is dead");
  CHECK(tcp_ctrl_held(b.k) == 0, "nothing is held (%zu)", tcp_ctrl_held(b.k));
  struct wire_ctrl m = record(WIRE_CTS_WANTED, 9);
  CHECK(tcp_ctrl_queue(b.k, &m) == -1, "a dead writer takes no record");
  tcp_ctrl_unlock(b.k);
  tcp_ctrl_heartbeat(b.k, tcp_now() + 10);
  tcp_ctrl_lock(b.k);
  CHECK(tcp_ctrl_held(b.k) == 0 && b.k->tx_len == 0, "the heartbeat queued nothing");
  tcp_ctrl_unlock(b.k);
  CHECK(tcp_comm_failed(b.comm) == ops->write_error_fails, "the comm %s",
        ops->write_error_fails ? "fails (a sender)" : "lives on (a receiver: its reads decide)");
  bed_close(&b);
}

static int count_type(const char *buf, size_t n, uint8_t type) {
  int count = 0;
  for (size_t at = 0; at + sizeof(struct wire_ctrl) <= n; at += sizeof(struct wire_ctrl)) {
    struct wire_ctrl m;
    memcpy(&m, buf + at, sizeof m);
    count += m.type == type;
  }
  return count;
}

/* Heartbeats once a second, and none while something is pending. */
static void test_heartbeats(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 0);
  static char got[4096];
  double t = 1000;
  tcp_ctrl_heartbeat(b.k, t);
  tcp_ctrl_heartbeat(b.k, t + 0.5);
  size_t n = peer_read(&b, 0, got, sizeof got);
  CHECK(n == sizeof(struct wire_ctrl) && count_type(got, n, WIRE_HEARTBEAT) == 1, "one heartbeat in 0.5 s");
  budget[b.k->fd[0]] = 0;
  tcp_ctrl_lock(b.k);
  struct wire_ctrl m = record(WIRE_CTS_WANTED, 1);
  tcp_ctrl_queue(b.k, &m);
  tcp_ctrl_unlock(b.k);
  tcp_ctrl_heartbeat(b.k, t + 1.1);
  tcp_ctrl_lock(b.k);
  CHECK(tcp_ctrl_held(b.k) == 1, "no heartbeat queued behind a record the full socket holds");
  tcp_ctrl_unlock(b.k);
  budget[b.k->fd[0]] = -1;
  tcp_ctrl_heartbeat(b.k, t + 1.2);
  n = peer_read(&b, 0, got, sizeof got);
  CHECK(n == 2 * sizeof(struct wire_ctrl) && count_type(got, n, WIRE_CTS_WANTED) == 1 &&
            count_type(got, n, WIRE_HEARTBEAT) == 1,
        "the held record, then a heartbeat once the socket takes them (%zu bytes)", n);
  bed_close(&b);
}

/* Something owed while another thread held the writer goes out when it
 * lets go. */
static void test_owed_at_unlock(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 0);
  tcp_ctrl_lock(b.k);
  role.owed_rec = record(WIRE_DONE, 7);
  role.owed = 1; /* owed by a thread that found the lock taken */
  tcp_ctrl_unlock(b.k);
  static char got[256];
  size_t n = peer_read(&b, 0, got, sizeof got);
  CHECK(n == sizeof(struct wire_ctrl) && count_type(got, n, WIRE_DONE) == 1 && !role.owed,
        "the owed record went out at unlock (%zu bytes)", n);
  bed_close(&b);
}

/* An end of stream between records is a receiver's goodbye; inside one it
 * fails the comm, as it does a sender's at any place. */
static void test_end_of_stream(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 0);
  peer_send_records(&b, 0, 0, 3);
  shutdown(b.peer[0], SHUT_WR);
  drain_until(&b, 3);
  tcp_ctrl_drain(b.k);
  CHECK(atomic_load(&b.k->eof) && !tcp_comm_failed(b.comm), "between records: a goodbye, no failure");
  bed_close(&b);

  role_reset();
  b = bed_open(&receiver_ops, 0);
  struct wire_ctrl m = record(WIRE_HEARTBEAT, 0);
  if (send(b.peer[0], &m, 10, 0) != 10) exit(2);
  shutdown(b.peer[0], SHUT_WR);
  for (int t = 0; t < 50 && !tcp_comm_failed(b.comm); t++, poll(NULL, 0, 5)) tcp_ctrl_drain(b.k);
  CHECK(tcp_comm_failed(b.comm) && strstr(b.comm->error_what, "middle of a message"),
        "inside a record: failed (%s)", b.comm->error_what);
  bed_close(&b);

  role_reset();
  b = bed_open(&sender_ops, 0);
  shutdown(b.peer[0], SHUT_WR);
  for (int t = 0; t < 50 && !tcp_comm_failed(b.comm); t++, poll(NULL, 0, 5)) tcp_ctrl_drain(b.k);
  CHECK(tcp_comm_failed(b.comm) && !atomic_load(&b.k->eof), "a sender's channel closed: failed (%s)",
        b.comm->error_what);
  bed_close(&b);
}

static void queue_records(struct bed *b, uint32_t from, uint32_t to) {
  tcp_ctrl_lock(b->k);
  for (uint32_t i = from; i < to; i++) {
    struct wire_ctrl m = record(WIRE_CTS_WANTED, i);
    if (tcp_ctrl_queue(b->k, &m) != 0) exit(2);
  }
  tcp_ctrl_flush(b->k);
  tcp_ctrl_unlock(b->k);
  spare_catch_up(b);
}

/* Queue and flush, leaving a spare written in batches as it is. */
static void queue_records_now(struct bed *b, uint32_t from, uint32_t to) {
  tcp_ctrl_lock(b->k);
  for (uint32_t i = from; i < to; i++) {
    struct wire_ctrl m = record(WIRE_CTS_WANTED, i);
    if (tcp_ctrl_queue(b->k, &m) != 0) exit(2);
  }
  tcp_ctrl_flush(b->k);
  tcp_ctrl_unlock(b->k);
}

/* Records on one far end, in order from `from`, after what is read
 * already: 1 when exactly those. */
static int far_records(int fd, uint32_t from, uint32_t to) {
  static char buf[64 * 1024];
  struct bed tmp = {.peer = {fd, -1}};
  size_t n = peer_read(&tmp, 0, buf, sizeof buf);
  if (n != (to - from) * sizeof(struct wire_ctrl)) return 0;
  for (uint32_t i = from; i < to; i++) {
    struct wire_ctrl m;
    memcpy(&m, buf + (i - from) * sizeof m, sizeof m);
    if (m.seq != i) return 0;
  }
  return 1;
}

/* A slot given up comes back (its path did): both ends write a RESUME on
 * it naming the byte it carries on from, then it is written in step and,
 * once the other socket fails, read from the same byte. */
static void test_slot_comes_back(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  const uint32_t rec = sizeof(struct wire_ctrl);
  /* Both ways: 10 records on both sockets, then slot 0's path fails. */
  queue_records(&b, 0, 10);
  peer_send_records(&b, 0, 0, 10);
  peer_send_records(&b, 1, 0, 10);
  drain_until(&b, 10);
  CHECK(far_records(b.peer[0], 0, 10) && far_records(b.peer[1], 0, 10), "10 records on both sockets");
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  close(b.peer[0]);
  /* 10 more each way on the spare alone. */
  queue_records(&b, 10, 20);
  peer_send_records(&b, 1, 10, 20);
  drain_until(&b, 20);
  CHECK(far_records(b.peer[1], 10, 20) && role.nseen == 20 && b.k->rd == 1, "10 more on the spare alone");

  /* The path is back: a new socket for slot 0. */
  int near2, far2;
  tcp_pair(&near2, &far2);
  b.peer[0] = far2;
  CHECK(tcp_ctrl_rejoin(b.k, 1, near2) == -1, "a slot in use is not replaced");
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 1 && tcp_ctrl_live(b.k, 0), "slot 0 is back");
  struct wire_ctrl resume;
  CHECK(recv(far2, &resume, sizeof resume, MSG_WAITALL) == (ssize_t)sizeof resume && resume.type == WIRE_RESUME &&
            resume.e[0].size == 20 * rec,
        "its first record is RESUME at byte %u (%llu)", 20 * rec, (unsigned long long)resume.e[0].size);
  queue_records(&b, 20, 25);
  CHECK(far_records(far2, 20, 25) && far_records(b.peer[1], 20, 25), "the next records go out on both");
  /* The peer's RESUME on the new socket, then its records on both. */
  struct wire_ctrl peer_resume = record(WIRE_RESUME, 0);
  peer_resume.n = 1;
  peer_resume.e[0].size = 20 * rec;
  if (send(far2, &peer_resume, sizeof peer_resume, 0) != (ssize_t)sizeof peer_resume) exit(2);
  peer_send_records(&b, 0, 20, 30);
  peer_send_records(&b, 1, 20, 30);
  drain_until(&b, 30);
  tcp_ctrl_watch(b.k, tcp_now()); /* reads the RESUME, drops the copy up to the reader */
  CHECK(!b.k->rd_resume && !b.k->rd_other_dead && b.k->rd_other_pos == 30 * rec,
        "the peer's RESUME read, the new copy in step (other at %llu)", (unsigned long long)b.k->rd_other_pos);
  /* Now the spare's path fails: the reader goes on with slot 0. */
  close(b.peer[1]);
  b.peer[1] = -1;
  peer_send_records(&b, 0, 30, 40);
  drain_until(&b, 40);
  CHECK(seen_in_order(40) && b.k->rd == 0, "records 0..39 each once across both losses (%d seen)", role.nseen);
  tcp_ctrl_lose(b.k, 1, "test: path lost");
  queue_records(&b, 25, 30);
  CHECK(far_records(far2, 25, 30), "the writer goes on with slot 0 alone");
  CHECK(!tcp_comm_failed(b.comm), "no failure (%s)", b.comm->error_what);
  bed_close(&b);
}

/* Records one socket has taken whole and the other only in part leave the
 * queue at the next record queued; the RESUME of a slot coming back still
 * names every byte written, or the peer would take that many bytes of the
 * copy for ones it has read and, at its next switch, skip them unread. */
static void test_resume_counts_records_already_dropped(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  const uint32_t rec = sizeof(struct wire_ctrl);
  budget[b.k->fd[1]] = 5 * rec; /* the spare's path is slow: it takes half */
  queue_records(&b, 0, 10);
  queue_records(&b, 10, 20); /* drops the 5 both sockets have from the queue */
  budget[b.k->fd[1]] = -1;
  tcp_ctrl_pump(b.k);
  spare_catch_up(&b);
  CHECK(far_records(b.peer[0], 0, 20) && far_records(b.peer[1], 0, 20), "20 records on both sockets");
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  close(b.peer[0]);
  int near2, far2;
  tcp_pair(&near2, &far2);
  b.peer[0] = far2;
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 1, "slot 0 is back");
  struct wire_ctrl resume;
  CHECK(recv(far2, &resume, sizeof resume, MSG_WAITALL) == (ssize_t)sizeof resume && resume.type == WIRE_RESUME &&
            resume.e[0].size == 20 * rec,
        "its RESUME names byte %u, every record written (%llu)", 20 * rec, (unsigned long long)resume.e[0].size);
  bed_close(&b);
}

/* A slot comes back only once the other socket's bytes are all
 * acknowledged by the peer's kernel: those written while the slot was gone
 * are on that socket alone, and would be lost should its path go next. */
static void test_slot_waits_for_the_other_acknowledged(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  close(b.peer[0]);
  /* The peer reads nothing: bytes stay queued, unacknowledged, on socket 1
   * (raw bytes: only the rejoin's answer is looked at). */
  static char junk[64 * 1024];
  size_t queued = 0;
  ssize_t n;
  while ((n = send(b.k->fd[1], junk, sizeof junk, MSG_DONTWAIT)) > 0) queued += (size_t)n;
  int near2, far2;
  tcp_pair(&near2, &far2);
  b.peer[0] = far2;
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 0 && !tcp_ctrl_live(b.k, 0),
        "no rejoin while socket 1 holds bytes the peer has not acknowledged (%zu queued)", queued);
  static char sink[64 * 1024];
  size_t got = 0;
  while (got < queued && (n = recv(b.peer[1], sink, sizeof sink, 0)) > 0) got += (size_t)n;
  int tries = 0;
  while (sock_outq(b.k->fd[1]) > 0 && ++tries < 200) usleep(1000);
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 1, "once the peer has them all, slot 0 is back");
  bed_close(&b);
}

/* Records written while slot 0 was gone are on socket 1 alone; those the
 * peer's kernel has not acknowledged there go again on slot 0 when it comes
 * back, behind a RESUME naming the first of them, so that socket 1's path
 * may go right after.  More than the history holds: the rejoin waits. */
static void test_slot_back_with_the_unacknowledged_again(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  const uint32_t rec = sizeof(struct wire_ctrl);
  queue_records(&b, 0, 10);
  CHECK(far_records(b.peer[0], 0, 10) && far_records(b.peer[1], 0, 10), "10 records on both sockets");
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  close(b.peer[0]);
  queue_records(&b, 10, 20);
  CHECK(far_records(b.peer[1], 10, 20), "10 more on socket 1 alone");
  int near2, far2;
  tcp_pair(&near2, &far2);
  b.peer[0] = far2;
  outq_fake[b.k->fd[1]] = TCP_CTRL_HISTORY + 1;
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 0, "no rejoin while socket 1 has more unacknowledged than the history");
  outq_fake[b.k->fd[1]] = 3 * rec; /* records 17, 18 and 19 */
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 1, "with 3 records unacknowledged, slot 0 is back");
  outq_fake[b.k->fd[1]] = -1;
  struct wire_ctrl resume;
  CHECK(recv(far2, &resume, sizeof resume, MSG_WAITALL) == (ssize_t)sizeof resume && resume.type == WIRE_RESUME &&
            resume.e[0].size == 17 * rec,
        "its RESUME names byte %u, the first unacknowledged (%llu)", 17 * rec, (unsigned long long)resume.e[0].size);
  CHECK(far_records(far2, 17, 20), "records 17..19 follow on it");
  queue_records(&b, 20, 25);
  CHECK(far_records(far2, 20, 25) && far_records(b.peer[1], 20, 25), "the next records go out on both");
  bed_close(&b);
}

/* The socket read is given up while it still holds records the copy lacks
 * (the peer wrote them before the copy came back, and its kernel had them
 * acknowledged): the reader reads them there first, then switches. */
static void test_switch_waits_for_what_only_the_first_holds(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  const uint32_t rec = sizeof(struct wire_ctrl);
  tcp_ctrl_lose(b.k, 1, "test: path lost");
  close(b.peer[1]);
  peer_send_records(&b, 0, 0, 10);
  drain_until(&b, 10);
  peer_send_records(&b, 0, 10, 15); /* arrived, not read yet */
  int near2, far2;
  tcp_pair(&near2, &far2);
  b.peer[1] = far2;
  CHECK(tcp_ctrl_rejoin(b.k, 1, near2) == 1, "slot 1 is back");
  struct wire_ctrl resume = record(WIRE_RESUME, 0), ours;
  CHECK(recv(far2, &ours, sizeof ours, MSG_WAITALL) == (ssize_t)sizeof ours, "our RESUME on it");
  resume.n = 1;
  resume.e[0].size = 15 * rec;
  if (send(far2, &resume, sizeof resume, 0) != (ssize_t)sizeof resume) exit(2);
  peer_send_records(&b, 1, 15, 20);
  poll(NULL, 0, 20);
  tcp_ctrl_watch(b.k, tcp_now()); /* reads the peer's RESUME */
  CHECK(b.k->rd_other_pos == 15 * rec && b.k->rd_pos == 10 * rec, "the copy starts at byte %u, the reader is at %u",
        15 * rec, 10 * rec);
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  drain_until(&b, 20);
  CHECK(seen_in_order(20) && b.k->rd == 1, "records 0..19 each once, 10..14 from the first (%d seen)", role.nseen);
  CHECK(!tcp_comm_failed(b.comm), "no failure (%s)", b.comm->error_what);
  bed_close(&b);
}

/* A slot comes back only between messages: not while an item is half
 * written. */
static void test_slot_waits_for_a_boundary(void) {
  role_reset();
  struct bed b = bed_open(&sender_ops, 1);
  static char payload[2000];
  struct wire_eager hdr = {.magic = WIRE_MAGIC, .type = WIRE_EAGER, .size = sizeof payload};
  role.items[0] = (struct tcp_ctrl_item){.hdr = &hdr, .hlen = sizeof hdr, .payload = payload,
                                         .plen = sizeof payload};
  role.nitems = 1;
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  budget[b.k->fd[1]] = 500;
  tcp_ctrl_pump(b.k);
  CHECK(b.k->item_active, "an item is half written");
  int near2, far2;
  tcp_pair(&near2, &far2);
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 0, "no rejoin in the middle of it");
  budget[b.k->fd[1]] = -1;
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 1, "once the socket takes the rest, the slot comes back");
  struct wire_ctrl resume;
  CHECK(recv(far2, &resume, sizeof resume, MSG_WAITALL) == (ssize_t)sizeof resume &&
            resume.e[0].size == sizeof hdr + sizeof payload,
        "at the byte after the item (%llu)", (unsigned long long)resume.e[0].size);
  close(far2);
  bed_close(&b);
}

/* COLLX_CTRL_PEEK: a socket found empty is read next with a peek; the
 * bytes stay queued (no acknowledgement yet) until the next read consumes
 * them, and no record is seen twice. */
static void test_peeked_until_the_next_read(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 0);
  tcp_ctrl_drain(b.k);
  CHECK(b.k->rd_awaited && role.nseen == 0, "an empty socket is awaited");
  peer_send_records(&b, 0, 0, 1);
  drain_until(&b, 1);
  int rec = (int)sizeof(struct wire_ctrl);
  CHECK(role.nseen == 1 && unread(b.k->fd[0]) == rec, "the record is parsed and still queued (%d bytes)",
        unread(b.k->fd[0]));
  tcp_ctrl_drain(b.k);
  CHECK(role.nseen == 1 && unread(b.k->fd[0]) == 0, "the next read consumes it, nothing seen twice (%d, %d)",
        role.nseen, unread(b.k->fd[0]));
  peer_send_records(&b, 0, 1, 3);
  drain_until(&b, 3);
  tcp_ctrl_drain(b.k);
  CHECK(seen_in_order(3) && unread(b.k->fd[0]) == 0, "records 0..2 each once (%d seen)", role.nseen);
  CHECK(!tcp_comm_failed(b.comm), "no failure");
  bed_close(&b);
}

/* The socket read is given up with peeked bytes in it: the spare goes on
 * after them. */
static void test_switch_after_a_peek(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  tcp_ctrl_drain(b.k);
  peer_send_records(&b, 0, 0, 10);
  peer_send_records(&b, 1, 0, 10);
  drain_until(&b, 10);
  CHECK(role.nseen == 10 && b.k->rd_peeked == 10 * sizeof(struct wire_ctrl), "10 records peeked (%zu bytes)",
        b.k->rd_peeked);
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  peer_send_records(&b, 1, 10, 20);
  drain_until(&b, 20);
  CHECK(seen_in_order(20) && b.k->rd == 1, "records 0..19 each once across the switch (%d seen)", role.nseen);
  CHECK(!tcp_comm_failed(b.comm), "no failure with the spare left");
  bed_close(&b);
}

/* ---- the spare written in batches (COLLX_CTRL_SPARE_BATCH) ----------------- */

static struct wire_eager eager_hdr(size_t size) {
  return (struct wire_eager){.magic = WIRE_MAGIC, .type = WIRE_EAGER, .size = (uint32_t)size};
}

/* Records and an item go out on the first socket alone and are finished
 * there; the spare takes them all in one write once the batch's delay has
 * passed, and at once when a batch's worth has gathered. */
static void test_spare_written_in_batches(void) {
  role_reset();
  struct bed b = bed_open(&sender_ops, 1);
  static char payload[3000], got[2][8192];
  memset(payload, 0x5a, sizeof payload);
  struct wire_eager hdr = eager_hdr(sizeof payload);
  role.items[0] = (struct tcp_ctrl_item){.hdr = &hdr, .hlen = sizeof hdr, .payload = payload,
                                         .plen = sizeof payload};
  role.nitems = 1;
  long spare_sends = sends[b.k->fd[1]];
  tcp_ctrl_lock(b.k);
  for (uint32_t i = 0; i < 10; i++) {
    struct wire_ctrl m = record(WIRE_CTS_WANTED, i);
    tcp_ctrl_queue(b.k, &m);
    CHECK(tcp_ctrl_flush(b.k) == 0, "record %u written", i);
  }
  tcp_ctrl_unlock(b.k);
  size_t want = sizeof hdr + sizeof payload + 10 * sizeof(struct wire_ctrl);
  CHECK(role.done == 1, "the item is finished once the first socket has it (%d)", role.done);
  CHECK(sends[b.k->fd[1]] == spare_sends && unread(b.peer[1]) <= 0, "nothing written on the spare yet");
  CHECK(peer_read(&b, 0, got[0], sizeof got[0]) == want, "the first socket has the item and the 10 records");
  poll(NULL, 0, 30);
  tcp_ctrl_pump(b.k);
  CHECK(sends[b.k->fd[1]] == spare_sends + 1, "past the delay, one write on the spare (%ld)",
        sends[b.k->fd[1]] - spare_sends);
  CHECK(peer_read(&b, 1, got[1], sizeof got[1]) == want && !memcmp(got[0], got[1], want),
        "the spare has the same bytes in the same order");
  /* A batch's worth without waiting: 16 KiB of records, a queue at a time. */
  spare_sends = sends[b.k->fd[1]];
  uint32_t n = 0;
  double t0 = tcp_now();
  while ((n + 1) * sizeof(struct wire_ctrl) < tcp_cfg.ctrl_spare_batch) queue_records_now(&b, n, n + 1), n++;
  /* Only while the batch's delay has not passed (a sanitizer can take
   * longer for these, and then a write by the delay is right). */
  if (tcp_now() - t0 < 0.015)
    CHECK(sends[b.k->fd[1]] == spare_sends, "%u records, under a batch: none on the spare", n);
  queue_records_now(&b, n, n + 1);
  CHECK(sends[b.k->fd[1]] == spare_sends + 1, "the record that fills a batch writes it, at once");
  CHECK(far_records(b.peer[1], 0, n + 1), "records 0..%u on the spare, in order", n);
  CHECK(!tcp_comm_failed(b.comm), "no failure");
  bed_close(&b);
}

/* The first socket is given up: the spare first takes everything it
 * lacks, then an item the first had taken in part, then what follows. */
static void test_spare_takes_what_it_lacks_first(void) {
  role_reset();
  struct bed b = bed_open(&sender_ops, 1);
  static char payload[2000];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (char)(i * 3);
  struct wire_eager hdr = eager_hdr(sizeof payload);
  role.items[0] = (struct tcp_ctrl_item){.hdr = &hdr, .hlen = sizeof hdr, .payload = payload,
                                         .plen = sizeof payload};
  queue_records_now(&b, 0, 10);
  role.nitems = 1;
  budget[b.k->fd[0]] = 100; /* the first takes 100 bytes of the item, then its path goes */
  tcp_ctrl_pump(b.k);
  CHECK(role.done == 0 && b.k->item_active, "the item is in progress on the first socket");
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  queue_records_now(&b, 10, 15);
  const size_t rec = sizeof(struct wire_ctrl);
  static char got[8192];
  size_t n = peer_read(&b, 1, got, sizeof got), want = 15 * rec + sizeof hdr + sizeof payload;
  int ok = n == want && !memcmp(got + 10 * rec + sizeof hdr, payload, sizeof payload);
  for (uint32_t i = 0; ok && i < 15; i++) {
    struct wire_ctrl m;
    memcpy(&m, got + (i < 10 ? i * rec : want - (15 - i) * rec), sizeof m);
    ok = m.seq == i;
  }
  CHECK(ok, "the spare: records 0..9, the item whole, records 10..14 (%zu bytes, %zu expected)", n, want);
  CHECK(role.done == 1 && b.k->lazy == -1, "the item finished; the spare written with every record from now on");
  CHECK(!tcp_comm_failed(b.comm), "no failure");
  bed_close(&b);
}

/* A spare that takes nothing: the first socket goes on while the history
 * holds what the spare lacks, then the writer waits; nothing is finished
 * that the history could not keep.  Once the spare takes bytes, all goes. */
static void test_spare_full_holds_the_writer(void) {
  role_reset();
  struct bed b = bed_open(&sender_ops, 1);
  static char payload[4][12000];
  static struct wire_eager hdr[4];
  for (int i = 0; i < 4; i++) {
    memset(payload[i], 'a' + i, sizeof payload[i]);
    hdr[i] = eager_hdr(sizeof payload[i]);
    role.items[i] = (struct tcp_ctrl_item){.hdr = &hdr[i], .hlen = sizeof hdr[i], .payload = payload[i],
                                           .plen = sizeof payload[i]};
  }
  role.nitems = 4;
  budget[b.k->fd[1]] = 0;
  tcp_ctrl_lock(b.k);
  int rc = tcp_ctrl_flush(b.k);
  tcp_ctrl_unlock(b.k);
  size_t item = sizeof hdr[0] + sizeof payload[0];
  int fit = (int)(b.k->hist_cap / item);
  CHECK(rc == 1 && role.done == fit && role.done < 4, "with the spare full, %d items finished of 4 (%d fit the "
        "history), the writer waits (rc %d)", role.done, fit, rc);
  CHECK(b.k->tx_pos - b.k->lazy_pos <= b.k->hist_cap, "the history holds all the spare lacks");
  budget[b.k->fd[1]] = -1;
  for (int t = 0; t < 20 && role.done < 4; t++) {
    poll(NULL, 0, 25);
    tcp_ctrl_pump(b.k);
  }
  spare_catch_up(&b);
  CHECK(role.done == 4, "all 4 finished once the spare takes bytes (%d)", role.done);
  static char got[2][64 * 1024];
  size_t n0 = peer_read(&b, 0, got[0], sizeof got[0]), n1 = peer_read(&b, 1, got[1], sizeof got[1]);
  CHECK(n0 == 4 * item && n1 == n0 && !memcmp(got[0], got[1], n0), "both sockets have the 4 items (%zu, %zu)", n0,
        n1);
  bed_close(&b);
}

/* The peer's spare lags the socket read by a batch when the socket read is
 * given up: the reader waits on the spare for the bytes it has not read
 * yet, skipping those it has read from the first, and loses none. */
static void test_switch_to_a_spare_behind(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  peer_send_records(&b, 0, 0, 100);
  peer_send_records(&b, 1, 0, 60);
  role.stop_at = 80;
  drain_until(&b, 80);
  int before = role.nseen;
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  role.stop_at = 0;
  drain_until(&b, 100); /* what was staged from the first, then a wait on the spare */
  CHECK(before == 80 && b.k->rd == 1 && role.nseen < 100 && seen_in_order((uint32_t)role.nseen),
        "80 read, then those staged from the first (%d in all), the spare read now", role.nseen);
  peer_send_records(&b, 1, 60, 120); /* the rest of the peer's batch, and more */
  drain_until(&b, 120);
  CHECK(seen_in_order(120), "records 0..119 each once across the switch (%d seen)", role.nseen);
  CHECK(!tcp_comm_failed(b.comm), "no failure");
  bed_close(&b);
}

/* A slot that comes back is the one written in batches: the peer reads
 * the other. */
static void test_slot_back_is_the_lazy_one(void) {
  role_reset();
  struct bed b = bed_open(&receiver_ops, 1);
  tcp_ctrl_lose(b.k, 0, "test: path lost");
  close(b.peer[0]);
  queue_records_now(&b, 0, 5);
  int near2, far2;
  tcp_pair(&near2, &far2);
  b.peer[0] = far2;
  CHECK(tcp_ctrl_rejoin(b.k, 0, near2) == 1 && b.k->lazy == 0, "slot 0 is back, written in batches");
  struct wire_ctrl resume;
  CHECK(recv(far2, &resume, sizeof resume, MSG_WAITALL) == (ssize_t)sizeof resume, "its RESUME");
  CHECK(far_records(b.peer[1], 0, 5), "records 0..4 on socket 1");
  queue_records_now(&b, 5, 10);
  CHECK(far_records(b.peer[1], 5, 10) && unread(far2) <= 0, "records 5..9 on socket 1 at once, not yet on slot 0");
  spare_catch_up(&b);
  CHECK(far_records(far2, 5, 10), "and on slot 0 after the batch's delay");
  bed_close(&b);
}

/* The generic cases, once per setting. */
static void run_cases(void) {
  test_order_on_both_sockets();
  test_partial_writes();
  test_switch_at_the_same_byte();
  test_switch_on_end_of_stream();
  test_other_copy_dropped();
  test_dead_writer_with_records_queued(&receiver_ops);
  test_dead_writer_with_records_queued(&sender_ops);
  test_heartbeats();
  test_owed_at_unlock();
  test_end_of_stream();
  test_slot_comes_back();
  test_resume_counts_records_already_dropped();
  test_slot_waits_for_the_other_acknowledged();
  test_slot_back_with_the_unacknowledged_again();
  test_switch_waits_for_what_only_the_first_holds();
  test_slot_waits_for_a_boundary();
}

int main(void) {
  for (int fd = 0; fd < SHIM_FDS; fd++) shim_reset(fd);
  tcp_cfg.failover_ms = 2000;
  tcp_cfg.eager_size = 16384;
  /* Every case with plain reads, then with COLLX_CTRL_PEEK's; with the
   * spare written with every record, then in batches. */
  for (int batch = 0; batch < 2; batch++) {
    tcp_cfg.ctrl_spare_batch = batch ? 16384 : 0;
    for (int peek = 0; peek < 2; peek++) {
      tcp_cfg.ctrl_peek = peek;
      run_cases();
    }
  }
  test_spare_written_in_batches();
  test_spare_takes_what_it_lacks_first();
  test_spare_full_holds_the_writer();
  test_switch_to_a_spare_behind();
  test_slot_back_is_the_lazy_one();
  tcp_cfg.ctrl_spare_batch = 0;
  test_peeked_until_the_next_read();
  test_switch_after_a_peek();
  printf("test_ctrl: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
