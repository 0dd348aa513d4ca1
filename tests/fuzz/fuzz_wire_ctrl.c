/* libFuzzer target: wire_ctrl_check (src/transport/tcp/wire.c).
 * Input: one byte (bit 0: we are the sending side), then the record. */
#include "transport/tcp/wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t flags = 0;
  fuzz_take(&flags, 1, &data, &size);
  int to_sender = flags & 1;
  struct wire_ctrl *m = malloc(sizeof *m);
  if (!m) return 0;
  fuzz_take(m, sizeof *m, &data, &size);
  struct wire_ctrl in = *m;
  const char *why = NULL;
  int rc = wire_ctrl_check(m, to_sender, &why);
  FUZZ_CHECK(memcmp(m, &in, sizeof in) == 0, "the check modified the record");
  int expect = -1;
  if (in.magic == WIRE_MAGIC) {
    if (in.type == WIRE_HEARTBEAT)
      expect = WIRE_HEARTBEAT;
    else if (in.type == WIRE_CTS_WANTED && !to_sender)
      expect = WIRE_CTS_WANTED;
    else if (in.type == WIRE_CTS && to_sender && in.n >= 1 && in.n <= COLLX_MAX_RECVS)
      expect = WIRE_CTS;
  }
  FUZZ_CHECK(rc == expect, "returned %d, expected %d (type %u n %u to_sender %d)", rc, expect, in.type, in.n,
             to_sender);
  /* What the caller relies on: a CTS names 1..COLLX_MAX_RECVS entries. */
  if (rc == WIRE_CTS) FUZZ_CHECK(in.n >= 1 && in.n <= COLLX_MAX_RECVS, "CTS with n = %u accepted", in.n);
  if (rc < 0) fuzz_check_why(why);
  free(m);
  return 0;
}
