/* libFuzzer target: wire_chunk_check (src/transport/tcp/wire.c).
 * Input: 8 bytes of the receive buffer's capacity, then the chunk header.
 * The property that matters: an accepted (non-truncated) chunk lies inside
 * the buffer, computed without overflow. */
#include "transport/tcp/wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t cap = 0;
  fuzz_take(&cap, sizeof cap, &data, &size);
  struct wire_chunk *h = malloc(sizeof *h);
  if (!h) return 0;
  fuzz_take(h, sizeof *h, &data, &size);
  struct wire_chunk in = *h;
  const char *why = NULL;
  int rc = wire_chunk_check(h, cap, &why);
  FUZZ_CHECK(memcmp(h, &in, sizeof in) == 0, "the check modified the record");
  FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
  unsigned __int128 end = (unsigned __int128)in.offset + in.len;
  int inside = end <= in.total && in.total <= cap;
  int heartbeat = in.flags == WIRE_CHUNK_HEARTBEAT && !in.seq && !in.idx && !in.total && !in.offset && !in.len;
  int lost = in.flags == WIRE_CHUNK_LOST && !in.seq && !in.idx && !in.offset && !in.len && in.total != 0 &&
             in.total < (1ull << WIRE_MAX_STREAMS);
  int payload = in.flags == 0 || in.flags == WIRE_CHUNK_LAZY_DONE;
  int expect_ok =
      in.magic == WIRE_MAGIC && (in.flags == WIRE_CHUNK_TRUNCATED || heartbeat || lost || (payload && inside));
  FUZZ_CHECK((rc == 0) == expect_ok,
             "returned %d for flags %#x offset %llu len %llu total %llu cap %llu", rc, in.flags,
             (unsigned long long)in.offset, (unsigned long long)in.len, (unsigned long long)in.total,
             (unsigned long long)cap);
  if (rc == 0 && payload)
    FUZZ_CHECK(end <= cap, "accepted a chunk ending at %llu in a %llu-byte buffer",
               (unsigned long long)(in.offset + in.len), (unsigned long long)cap);
  if (rc != 0) fuzz_check_why(why);
  free(h);
  return 0;
}
