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
    else if (in.type == WIRE_DONE && to_sender && in.n >= 1 && in.n <= COLLX_MAX_RECVS)
      expect = WIRE_DONE;
    else if ((in.type == WIRE_LOST_ACK || in.type == WIRE_REJOINED) && to_sender && in.e[0].size != 0 &&
             in.e[0].size < (1ull << WIRE_MAX_STREAMS))
      expect = in.type;
    else if (in.type == WIRE_REJOIN && to_sender && in.seq < COLLX_MAX_MEMBERS && in.e[0].tag > 0 &&
             in.e[0].tag <= 65535)
      expect = WIRE_REJOIN;
    else if (in.type == WIRE_CTRL_GONE && to_sender && in.e[0].size >= 1 && in.e[0].size <= 3)
      expect = WIRE_CTRL_GONE;
  }
  FUZZ_CHECK(rc == expect, "returned %d, expected %d (type %u n %u to_sender %d)", rc, expect, in.type, in.n,
             to_sender);
  /* What the caller relies on: a CTS or DONE names 1..COLLX_MAX_RECVS
   * entries, a stream mask fits the streams, a REJOIN names a path and a
   * port. */
  if (rc == WIRE_CTS || rc == WIRE_DONE)
    FUZZ_CHECK(in.n >= 1 && in.n <= COLLX_MAX_RECVS, "CTS/DONE with n = %u accepted", in.n);
  if (rc == WIRE_LOST_ACK || rc == WIRE_REJOINED)
    FUZZ_CHECK(in.e[0].size >> WIRE_MAX_STREAMS == 0, "stream mask %llx accepted", (unsigned long long)in.e[0].size);
  if (rc == WIRE_REJOIN) FUZZ_CHECK(in.seq < COLLX_MAX_MEMBERS, "REJOIN for path %u accepted", in.seq);
  if (rc == WIRE_CTRL_GONE)
    FUZZ_CHECK(in.e[0].size >= 1 && in.e[0].size <= 3, "CTRL_GONE for paths %llx accepted",
               (unsigned long long)in.e[0].size);
  if (rc < 0) fuzz_check_why(why);
  free(m);
  return 0;
}
