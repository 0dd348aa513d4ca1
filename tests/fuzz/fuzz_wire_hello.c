/* libFuzzer target: wire_hello_check (src/transport/tcp/wire.c).
 * Input: 24 bytes of hello, then 8 bytes of the listener's secret. */
#include "transport/tcp/wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct wire_hello *h = malloc(sizeof *h);
  if (!h) return 0;
  uint64_t secret;
  fuzz_take(h, sizeof *h, &data, &size);
  fuzz_take(&secret, sizeof secret, &data, &size);
  struct wire_hello in = *h;
  const char *why = NULL;
  int rc = wire_hello_check(h, secret, &why);
  FUZZ_CHECK(memcmp(h, &in, sizeof in) == 0, "the check modified the record");
  int expect = -1;
  if (in.magic == WIRE_MAGIC && in.version == WIRE_VERSION && in.secret == secret &&
      (in.kind == WIRE_HELLO_CTRL || in.kind == WIRE_HELLO_DATA || in.kind == WIRE_HELLO_CTRL_AGAIN))
    expect = in.kind;
  FUZZ_CHECK(rc == expect, "returned %d, expected %d (magic %#x version %u kind %u secret %s)", rc, expect,
             in.magic, in.version, in.kind, in.secret == secret ? "right" : "wrong");
  if (rc < 0) fuzz_check_why(why);
  free(h);
  return 0;
}
