/*
 * A flow: messages in one direction on one comm with a window of requests
 * in flight, posted and tested the way NCCL's proxy does (post when a slot
 * is free, post again after a NULL request, test the oldest).  The receiver
 * checks every completion: the size reported, every byte, that sizes[1..]
 * stay untouched, the canary after the buffer, and (check_tail) that
 * nothing was written between the message's end and the posted size.
 *
 * Sizes either come per message (size/posted/tag arrays of n entries, from
 * hx_flow_plan) or cycle through cap, 1, 4 KiB, cap/2 + 3 and 64 KiB + 1
 * (every message cap when all_max), each posted with cap.  A stream checks
 * the size and the bytes of each message but does not fill the buffer
 * before each post (at 16 MiB a message that would slow the receiver down
 * more than the fault cases allow).
 */
#ifndef COLLX_HARNESS_FLOW_H
#define COLLX_HARNESS_FLOW_H

#include <stddef.h>
#include <stdint.h>

#define HX_FLOW_MAX_WINDOW 32

struct hx_flow {
  /* set before hx_flow_open */
  const char *label;
  void *comm;
  int sender;
  long n;       /* messages in all; 0: until stopped */
  int window;
  uint64_t key;
  int *size, *posted, *tag; /* n entries each, or NULL */
  size_t cap;               /* without arrays: the largest message */
  int tag0;                 /* without arrays: the tag of every message */
  int all_max;
  int guard;      /* receiver: fill before the post, canary after the buffer (plans; streams skip it) */
  int check_tail;
  /* state */
  uint8_t *buf[HX_FLOW_MAX_WINDOW];
  void *mh[HX_FLOW_MAX_WINDOW];
  void *req[HX_FLOW_MAX_WINDOW];
  long prepared[HX_FLOW_MAX_WINDOW];
  long nposted, ndone, nulls;
};

/* A flow of n messages with arrays to fill in (hx_flow_free releases them). */
int hx_flow_plan(struct hx_flow *f, const char *label, long n, uint64_t key, int window);
/* A flow of messages cycling through sizes up to cap. */
void hx_flow_stream(struct hx_flow *f, const char *label, size_t cap, int tag, int window, long n, uint64_t key);
/* Buffers allocated and registered on comm; 0, or -1 (reported). */
int hx_flow_open(struct hx_flow *f, void *comm, int sender);
/* Test what completed, then post what the window allows.  ncclSuccess, the
 * plugin's error (*call names the call), or -1 after a verification
 * failure (reported). */
int hx_flow_step(struct hx_flow *f, const char **call);
int hx_flow_finished(const struct hx_flow *f);
/* Steps until every message completed; -1 (reported) on an error or at
 * the deadline, saying which message was stuck where. */
int hx_flow_run(struct hx_flow *f, double timeout_s);
/* deregMr while the comm is open, then free. */
int hx_flow_close(struct hx_flow *f);
/* Free only: after the comm was closed (the plugin may hold the buffers till then). */
void hx_flow_free(struct hx_flow *f);
long hx_flow_size(const struct hx_flow *f, long i);

#endif
