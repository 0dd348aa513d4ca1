#include "flow.h"

#include <stdlib.h>
#include <string.h>

#include "drive.h"
#include "verify.h"

int hx_flow_plan(struct hx_flow *f, const char *label, long n, uint64_t key, int window) {
  memset(f, 0, sizeof *f);
  f->label = label;
  f->n = n;
  f->key = key;
  f->window = window;
  f->guard = 1;
  f->size = calloc((size_t)n + 1, sizeof(int));
  f->posted = calloc((size_t)n + 1, sizeof(int));
  f->tag = calloc((size_t)n + 1, sizeof(int));
  if (!f->size || !f->posted || !f->tag) {
    hx_fail("out of memory");
    return -1;
  }
  return 0;
}

void hx_flow_stream(struct hx_flow *f, const char *label, size_t cap, int tag, int window, long n, uint64_t key) {
  memset(f, 0, sizeof *f);
  f->label = label;
  f->cap = cap;
  f->tag0 = tag;
  f->window = window;
  f->n = n;
  f->key = key;
}

long hx_flow_size(const struct hx_flow *f, long i) {
  if (f->size) return f->size[i];
  size_t cap = f->cap;
  if (f->all_max) return (long)cap;
  switch (i % 5) {
  case 0: return (long)cap;
  case 1: return 1;
  case 2: return (long)(cap < 4096 ? cap : 4096);
  case 3: return (long)(cap / 2 + 3 < cap ? cap / 2 + 3 : cap);
  default: return (long)(cap < 65537 ? cap : 65537);
  }
}

static int posted_of(const struct hx_flow *f, long i) { return f->posted ? f->posted[i] : (int)f->cap; }
static int tag_of(const struct hx_flow *f, long i) { return f->tag ? f->tag[i] : f->tag0; }

int hx_flow_open(struct hx_flow *f, void *comm, int sender) {
  f->comm = comm;
  f->sender = sender;
  if (f->window > HX_FLOW_MAX_WINDOW) f->window = HX_FLOW_MAX_WINDOW;
  size_t cap = f->cap;
  for (long i = 0; f->posted && i < f->n; i++)
    if ((size_t)f->posted[i] > cap) cap = (size_t)f->posted[i];
  for (long i = 0; f->size && i < f->n; i++)
    if ((size_t)f->size[i] > cap) cap = (size_t)f->size[i];
  cap += HX_CANARY_LEN;
  for (int w = 0; w < f->window; w++) {
    f->prepared[w] = -1;
    if (!(f->buf[w] = hx_reg_buffer(comm, cap, &f->mh[w]))) return -1;
  }
  return 0;
}

int hx_flow_finished(const struct hx_flow *f) { return f->n && f->ndone >= f->n; }

/* The receiver's checks of completed message i in slot w; -1 (reported). */
static int verify_received(const struct hx_flow *f, long i, int w) {
  char why[256];
  int size = (int)hx_flow_size(f, i), posted = posted_of(f, i);
  if (hx_pattern_check(f->buf[w], (size_t)size, hx_key(f->key, (uint64_t)i, 0), why, sizeof why)) {
    hx_fail("%s: message %ld (size %d, tag %d): data wrong: %s", f->label, i, size, tag_of(f, i), why);
    return -1;
  }
  if (f->guard && hx_canary_check(f->buf[w] + posted, (uint64_t)i, why, sizeof why)) {
    hx_fail("%s: message %ld (size %d, posted %d): %s", f->label, i, size, posted, why);
    return -1;
  }
  if (f->check_tail && hx_untouched_check(f->buf[w], (size_t)size, (size_t)posted, why, sizeof why)) {
    hx_fail("%s: message %ld (size %d, posted %d): %s", f->label, i, size, posted, why);
    return -1;
  }
  return 0;
}

/* Test the oldest requests in order. */
static int test_oldest(struct hx_flow *f, const char **call) {
  while (f->ndone < f->nposted) {
    long i = f->ndone;
    int w = (int)(i % f->window), done = 0, sz[HX_SIZES_SLOTS];
    for (int k = 0; k < HX_SIZES_SLOTS; k++) sz[k] = HX_SIZE_SENTINEL;
    ncclResult_t rc = NET(test, f->req[w], &done, sz);
    *call = "test";
    if (rc != ncclSuccess) return rc;
    if (!done) break;
    f->req[w] = NULL;
    long size = hx_flow_size(f, i);
    if (sz[0] != size) {
      hx_fail("%s: %s of message %ld (posted %d) completed with sizes[0] = %d, expected %ld", f->label,
              f->sender ? "send" : "receive", i, posted_of(f, i), sz[0], size);
      return -1;
    }
    for (int k = 1; k < HX_SIZES_SLOTS; k++) {
      if (sz[k] != HX_SIZE_SENTINEL) {
        hx_fail("%s: test of a 1-entry request wrote sizes[%d] = %d", f->label, k, sz[k]);
        return -1;
      }
    }
    if (!f->sender && verify_received(f, i, w)) return -1;
    f->ndone++;
  }
  return ncclSuccess;
}

static void prepare(struct hx_flow *f, long i, int w) {
  if (f->prepared[w] == i) return; /* a retry after NULL: the buffer is ready */
  int size = (int)hx_flow_size(f, i), posted = posted_of(f, i);
  if (f->sender) {
    hx_pattern_fill(f->buf[w], (size_t)size, hx_key(f->key, (uint64_t)i, 0));
  } else if (f->guard) {
    memset(f->buf[w], HX_FILL, (size_t)posted);
    hx_canary_fill(f->buf[w] + posted, (uint64_t)i);
  }
  f->prepared[w] = i;
  hx_step("%s: %s message %ld/%ld (size %d, posted %d, tag %d), %ld completed", f->label,
          f->sender ? "isend" : "irecv", i, f->n, size, posted, tag_of(f, i), f->ndone);
}

/* Post what the window allows. */
static int post_more(struct hx_flow *f, const char **call) {
  while ((!f->n || f->nposted < f->n) && f->nposted - f->ndone < f->window) {
    long i = f->nposted;
    int w = (int)(i % f->window), size = (int)hx_flow_size(f, i), tag = tag_of(f, i);
    prepare(f, i, w);
    void *r = NULL;
    ncclResult_t rc;
    if (f->sender) {
      rc = NET(isend, f->comm, f->buf[w], size, tag, f->mh[w], &r);
      *call = "isend";
    } else {
      void *d = f->buf[w], *m = f->mh[w];
      int s = posted_of(f, i);
      rc = NET(irecv, f->comm, 1, &d, &s, &tag, &m, &r);
      *call = "irecv";
    }
    if (rc != ncclSuccess) return rc;
    if (!r) {
      f->nulls++;
      break;
    }
    f->nulls = 0;
    f->req[w] = r;
    f->nposted++;
  }
  return ncclSuccess;
}

int hx_flow_step(struct hx_flow *f, const char **call) {
  *call = "";
  int rc = test_oldest(f, call);
  if (rc == ncclSuccess) rc = post_more(f, call);
  if (rc == ncclSuccess) *call = "";
  return rc;
}

static void report_stall(const struct hx_flow *f, double timeout_s) {
  const char *verb = f->sender ? "sent" : "received";
  if (f->nposted < f->n && f->nposted - f->ndone < f->window)
    hx_fail("%s: timed out after %.1f s: %ld of %ld messages %s, %ld posted; %s of message %ld (size %ld) keeps "
            "returning a NULL request (%ld NULL answers in a row)",
            f->label, S(timeout_s), f->ndone, f->n, verb, f->nposted, f->sender ? "isend" : "irecv", f->nposted,
            hx_flow_size(f, f->nposted), f->nulls);
  else
    hx_fail("%s: timed out after %.1f s: %ld of %ld messages %s; test of message %ld (size %ld, tag %d) never "
            "reported done",
            f->label, S(timeout_s), f->ndone, f->n, verb, f->ndone, hx_flow_size(f, f->ndone), tag_of(f, f->ndone));
}

int hx_flow_run(struct hx_flow *f, double timeout_s) {
  struct hx_wait w;
  hx_wait_begin(&w, timeout_s);
  while (!hx_flow_finished(f)) {
    long before = f->ndone + f->nposted;
    const char *call;
    int rc = hx_flow_step(f, &call);
    if (rc < 0) return -1;
    if (rc != ncclSuccess) {
      hx_fail("%s: %s of message %ld returned %s", f->label, call,
              !strcmp(call, "test") ? f->ndone : f->nposted, hx_result_str(rc));
      return -1;
    }
    if (f->ndone + f->nposted != before) {
      hx_wait_reset(&w);
      continue;
    }
    if (hx_wait_over(&w)) {
      report_stall(f, timeout_s);
      return -1;
    }
    if (w.spins == 63)
      hx_step("%s: stalled: %ld of %ld done, %ld posted", f->label, f->ndone, f->n, f->nposted);
    hx_backoff(&w);
  }
  return 0;
}

int hx_flow_close(struct hx_flow *f) {
  int rc = 0;
  for (int w = 0; w < f->window; w++) {
    if (!f->buf[w]) continue;
    ncclResult_t r = NET(deregMr, f->comm, f->mh[w]);
    if (r != ncclSuccess && !rc) {
      hx_fail("%s: deregMr returned %s", f->label, hx_result_str(r));
      rc = -1;
    }
  }
  hx_flow_free(f);
  return rc;
}

void hx_flow_free(struct hx_flow *f) {
  for (int w = 0; w < HX_FLOW_MAX_WINDOW; w++) {
    free(f->buf[w]);
    f->buf[w] = NULL;
  }
  free(f->size);
  free(f->posted);
  free(f->tag);
  f->size = f->posted = f->tag = NULL;
}
