/*
 * Bad arguments: NULL and stale requests, out-of-range counts and sizes,
 * calls on the wrong kind of comm, and each kind of comm closed twice.
 * Every one an error, none a crash, and the comm keeps working.
 */
#include <stdlib.h>
#include <string.h>

#include "faults.h"

/* One 4 KiB message from role 2 to role 1 on k; the receiver checks its bytes. */
static int one_message(struct hx_conn *k, uint8_t *buf, void *mh, int tag, const char *what) {
  int size = 4096;
  void *d = buf;
  void *req = is_sender() ? hx_post_send(k->scomm, buf, size, tag, mh, 5.0, what)
                          : hx_post_recv(k->rcomm, 1, &d, &size, &tag, &mh, 5.0, what);
  if (!req || hx_complete(req, 4096, 5.0, what)) return -1;
  if (!is_sender() && hx_pattern_first_bad(buf, 4096, 5) >= 0) {
    hx_fail("%s arrived damaged", what);
    return -1;
  }
  return 0;
}

static void receiver_checks(struct hx_conn *k, uint8_t *buf, void *mh, void *req) {
  uint64_t zeros[64];
  int done = 0, sizes[HX_SIZES_SLOTS];
  memset(zeros, 0, sizeof zeros);
  expect_error("test(NULL)", NET(test, NULL, &done, sizes));
  expect_error("test(a completed request)", NET(test, req, &done, sizes));
  if (done) hx_fail("test of a completed (freed) request reported done = 1 again");
  expect_error("test(a zeroed buffer)", NET(test, zeros, &done, sizes));
  expect_error("test(req, done = NULL)", NET(test, req, NULL, sizes));
  void *d1 = buf, *m1 = mh, *x = NULL;
  int s1 = 10, t1 = 0, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, t9[9] = {0};
  void *d9[9] = {buf, buf, buf, buf, buf, buf, buf, buf, buf}, *m9[9] = {0};
  expect_error("irecv(n = 0)", NET(irecv, k->rcomm, 0, &d1, &s1, &t1, &m1, &x));
  expect_error("irecv(n = 9)", NET(irecv, k->rcomm, 9, d9, s9, t9, m9, &x));
  expect_error("irecv(NULL sizes)", NET(irecv, k->rcomm, 1, &d1, NULL, &t1, &m1, &x));
  s1 = -5;
  expect_error("irecv(size -5)", NET(irecv, k->rcomm, 1, &d1, &s1, &t1, &m1, &x));
  s1 = 10;
  expect_error("irecv(NULL request ptr)", NET(irecv, k->rcomm, 1, &d1, &s1, &t1, &m1, NULL));
  expect_error("isend on a receive comm", NET(isend, k->rcomm, buf, 10, 0, mh, &x));
  expect_error("irecv on a listen comm", NET(irecv, k->lcomm, 1, &d1, &s1, &t1, &m1, &x));
  expect_error("accept(a receive comm)", NET(accept, k->rcomm, &x, NULL));
  expect_error("closeSend(a receive comm)", NET(closeSend, k->rcomm));
  expect_error("closeSend(NULL)", NET(closeSend, NULL));
  expect_error("closeListen(a zeroed buffer)", NET(closeListen, zeros));
  expect_error("regMr(NCCL_PTR_CUDA)", NET(regMr, k->rcomm, buf, 4096, NCCL_PTR_CUDA, &x));
  expect_error("deregMr(garbage)", NET(deregMr, k->rcomm, zeros));
  expect_error("listen(dev 99)", NET(listen, 99, zeros, &x));
  expect_error("connect(dev -1)", NET(connect, -1, zeros, &x, NULL));
  struct hx_props p;
  expect_error("getProperties(dev 99)", NET(getProperties, 99, &p, 0));
}

static void sender_checks(struct hx_conn *k, uint8_t *buf, void *mh) {
  void *x = NULL;
  expect_error("isend(size -1)", NET(isend, k->scomm, buf, -1, 0, mh, &x));
  expect_error("isend(NULL data, 10 bytes)", NET(isend, k->scomm, NULL, 10, 0, mh, &x));
  expect_error("isend(NULL request ptr)", NET(isend, k->scomm, buf, 10, 0, mh, NULL));
}

static void w_badargs(void) {
  if (hx_load()) return;
  struct hx_conn k;
  if (hx_conn_establish(&k, is_sender(), "handle", 10.0)) return;
  void *mh = NULL;
  uint8_t *buf = hx_reg_buffer(hx_conn_comm(&k), 4096, &mh);
  if (!buf) return;
  hx_pattern_fill(buf, 4096, 5);
  int size = 4096, tag = 1;
  void *d = buf;
  /* The first message's request, completed: a stale request from here on. */
  void *req = is_sender() ? hx_post_send(k.scomm, buf, 4096, 1, mh, 5.0, "the message")
                          : hx_post_recv(k.rcomm, 1, &d, &size, &tag, &mh, 5.0, "the message");
  if (!req || hx_complete(req, 4096, 5.0, "the message") || hx_barrier("message done", 2)) return;
  if (is_sender())
    sender_checks(&k, buf, mh);
  else /* one process reports the argument checks */
    receiver_checks(&k, buf, mh, req);
  /* The comm still works after all that. */
  if (hx_barrier("checks done", 2)) return;
  if (!is_sender()) memset(buf, 0, 4096);
  if (one_message(&k, buf, mh, 2, "the message after the bad calls") || hx_barrier("done", 2)) return;
  hx_conn_close(&k);
  free(buf);
}

/* ---- double close ------------------------------------------------------------ */
/* Each kind in its own case, so that a crash in one does not hide the others. */
enum { CLOSE_SEND, CLOSE_RECV, CLOSE_LISTEN };
struct dc_results {
  int kind;
};

static void w_double_close(void) {
  int kind = ((struct dc_results *)hx_shared())->kind;
  if (hx_load()) return;
  struct hx_conn k;
  if (hx_conn_establish(&k, is_sender(), "handle", 10.0) || hx_barrier("connected", 2)) return;
  void *s = k.scomm, *r = k.rcomm, *l = k.lcomm;
  hx_conn_close(&k);
  if (hx_barrier("closed once", 2)) return;
  /* The second close: the pointer is stale now. */
  hx_step("second close");
  if (is_sender() && kind == CLOSE_SEND) expect_error("closeSend twice", NET(closeSend, s));
  if (!is_sender() && kind == CLOSE_RECV) expect_error("closeRecv twice", NET(closeRecv, r));
  if (!is_sender() && kind == CLOSE_LISTEN) expect_error("closeListen twice", NET(closeListen, l));
  hx_step("after the second close");
  hx_barrier("done", 2);
}

static void double_close(int kind) {
  ((struct dc_results *)hx_shared())->kind = kind;
  hx_lead_workers();
}
static void case_double_close_send(void) { double_close(CLOSE_SEND); }
static void case_double_close_recv(void) { double_close(CLOSE_RECV); }
static void case_double_close_listen(void) { double_close(CLOSE_LISTEN); }

#define ARGS_ROLES {"leader", "receiver", "sender"}
const struct hx_case args_cases[] = {
    {"bad-args", "test(NULL), test of a freed request and other bad arguments: errors, comm still works", 30,
     ARGS_ROLES, NULL, w_badargs, {NULL}, NULL, NULL},
    {"double-close-send", "closeSend twice: an error, no use of freed memory", 30, ARGS_ROLES, case_double_close_send,
     w_double_close, {NULL}, NULL, NULL},
    {"double-close-recv", "closeRecv twice: an error, no use of freed memory", 30, ARGS_ROLES, case_double_close_recv,
     w_double_close, {NULL}, NULL, NULL},
    {"double-close-listen", "closeListen twice: an error, no use of freed memory", 30, ARGS_ROLES,
     case_double_close_listen, w_double_close, {NULL}, NULL, NULL},
};
const int args_count = HX_GROUP(args_cases);
