/* Helpers the conformance case groups share. */
#include <stdlib.h>
#include <string.h>

#include "driver.h"

/* Buffers of several messages in one registered region: offsets of entries
 * of `posted` bytes each plus a canary, 8-byte aligned. */
size_t layout(const int *posted, int n, size_t *off) {
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    off[i] = total;
    total += ((size_t)posted[i] + HX_CANARY_LEN + 7) & ~(size_t)7;
  }
  off[n] = total;
  return total;
}

/* A connection (role 1 sends) and one registered buffer on this side's comm. */
uint8_t *conn_with_buffer(struct hx_conn *k, size_t total, void **mh) {
  if (hx_conn_establish(k, sends_first(), "handle", CONNECT_TIMEOUT_S)) return NULL;
  return hx_reg_buffer(hx_conn_comm(k), total, mh);
}

void release_buffer(struct hx_conn *k, uint8_t *buf, void *mh) {
  ncclResult_t r = NET(deregMr, hx_conn_comm(k), mh);
  if (r != ncclSuccess) hx_fail("deregMr returned %s", hx_result_str(r));
  free(buf);
}

/* A received entry: size, bytes, canary.  -1 (reported). */
int check_entry(const char *what, const uint8_t *p, int got, int size, int posted, uint64_t key,
                       uint64_t salt) {
  char why[256];
  if (got != size) {
    hx_fail("%s: completed with sizes = %d, expected %d", what, got, size);
    return -1;
  }
  if (hx_pattern_check(p, (size_t)size, key, why, sizeof why)) {
    hx_fail("%s: data wrong: %s", what, why);
    return -1;
  }
  if (hx_canary_check(p + posted, salt, why, sizeof why)) {
    hx_fail("%s (posted %d): %s", what, posted, why);
    return -1;
  }
  return 0;
}

