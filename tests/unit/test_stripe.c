/* Striping: chunk sizes cover every message exactly, respect the minimum
 * and maximum chunk, and spread large messages over all streams. */
#include <stdio.h>

#include "transport/tcp/stripe.h"
#include "../common/check.h"

static void check_cover(size_t size, int nstreams, size_t max_chunk) {
  size_t chunk = collx_stripe_chunk(size, nstreams, max_chunk);
  size_t count = collx_stripe_count(size, chunk);
  CHECK(chunk > 0 && chunk % COLLX_STRIPE_ALIGN == 0, "chunk %zu not aligned", chunk);
  CHECK(chunk <= (max_chunk < COLLX_STRIPE_ALIGN ? COLLX_STRIPE_ALIGN : max_chunk),
        "chunk %zu above max %zu", chunk, max_chunk);
  CHECK(count >= 1, "size %zu gives no chunk", size);
  /* count chunks of `chunk` bytes cover the message, and the last is not empty */
  CHECK(count * chunk >= size, "size %zu: %zu x %zu does not cover", size, count, chunk);
  CHECK(size == 0 || (count - 1) * chunk < size, "size %zu: last chunk empty", size);
}

int main(void) {
  size_t sizes[] = {0, 1, 4095, 4096, 65535, 65536, 65537, 1 << 20, (1 << 20) + 3, 4 << 20,
                    (size_t)1 << 31, ((size_t)1 << 33) + 17};
  int streams[] = {1, 2, 3, 4, 8, 16};
  size_t maxes[] = {4096, 65536, 512 * 1024, 1 << 20, 3000};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (size_t j = 0; j < sizeof streams / sizeof *streams; j++)
      for (size_t k = 0; k < sizeof maxes / sizeof *maxes; k++) check_cover(sizes[i], streams[j], maxes[k]);

  /* Small messages stay whole: one chunk, one header. */
  CHECK(collx_stripe_count(8, collx_stripe_chunk(8, 4, 512 * 1024)) == 1, "8 B split");
  CHECK(collx_stripe_count(0, collx_stripe_chunk(0, 4, 512 * 1024)) == 1, "0 B needs one header");
  CHECK(collx_stripe_count(60000, collx_stripe_chunk(60000, 4, 512 * 1024)) == 1, "60 kB split");
  /* A large message is spread over every stream. */
  size_t p = collx_stripe_chunk(4 << 20, 4, 4 << 20);
  CHECK(collx_stripe_count(4 << 20, p) == 4, "4 MiB over 4 streams: %zu chunks", collx_stripe_count(4 << 20, p));
  p = collx_stripe_chunk(512 * 1024, 2, 512 * 1024);
  CHECK(collx_stripe_count(512 * 1024, p) == 2, "512 KiB over 2 streams: %zu chunks",
        collx_stripe_count(512 * 1024, p));
  /* ... in chunks no larger than the maximum. */
  p = collx_stripe_chunk(64 << 20, 2, 512 * 1024);
  CHECK(p == 512 * 1024, "64 MiB chunk %zu", p);
  if (failures) printf("%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
