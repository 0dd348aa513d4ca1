/* libFuzzer target: wire_welcome_check (src/transport/tcp/wire.c).
 * Input: one byte of max_streams, then the welcome record (zero-padded). */
#include "transport/tcp/wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t ms = 0;
  fuzz_take(&ms, 1, &data, &size);
  int max_streams = ms % 20; /* around the real limit of 16, 0 included */
  struct wire_welcome *w = malloc(sizeof *w);
  if (!w) return 0;
  fuzz_take(w, sizeof *w, &data, &size);
  struct wire_welcome in = *w;
  const char *why = NULL;
  int rc = wire_welcome_check(w, max_streams, &why);
  FUZZ_CHECK(memcmp(w, &in, sizeof in) == 0, "the check modified the record");
  int ok = in.magic == WIRE_MAGIC && in.version == WIRE_VERSION && in.naddrs >= 1 &&
           in.naddrs <= COLLX_MAX_MEMBERS && in.nstreams >= 1 && in.nstreams <= max_streams;
  for (int i = 0; ok && i < in.naddrs; i++)
    ok = (in.addrs[i].family == AF_INET || in.addrs[i].family == AF_INET6) && in.addrs[i].port != 0;
  FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
  FUZZ_CHECK((rc == 0) == ok, "returned %d for naddrs %u nstreams %u (max %d)", rc, in.naddrs, in.nstreams,
             max_streams);
  if (rc != 0) fuzz_check_why(why);
  free(w);
  return 0;
}
