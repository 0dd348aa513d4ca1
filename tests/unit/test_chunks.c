/* The per-buffer chunk rules (src/transport/tcp/chunks.c): every way the
 * sender stripes a message is accepted in any order of arrival and ends
 * whole; any chunk again, an eager message or a TRUNCATED notice after
 * it, is refused. */
#include <stdio.h>
#include <stdlib.h>

#include "transport/tcp/chunks.h"
#include "transport/tcp/stripe.h"
#include "../common/check.h"

static void feed(size_t size, int nstreams, size_t max_chunk, int order) {
  size_t chunk = collx_stripe_chunk(size, nstreams, max_chunk);
  size_t n = collx_stripe_count(size, chunk);
  struct chunk_track t = {0};
  chunk_track_reset(&t);
  const char *why = NULL;
  for (size_t i = 0; i < n; i++) {
    /* 0: in order, 1: reversed, 2: odd ones first */
    size_t k = order == 0 ? i : order == 1 ? n - 1 - i : (i < n / 2 ? 2 * i + 1 : 2 * (i - n / 2));
    if (k >= n) k = i;
    uint64_t off = (uint64_t)k * chunk, len = size - off < chunk ? size - off : chunk;
    int rc = chunk_track_stream(&t, off, len, size, &why);
    CHECK(rc == 0, "size %zu nstreams %d max %zu order %d: chunk %zu refused: %s", size, nstreams, max_chunk,
          order, k, why);
  }
  CHECK(chunk_track_whole(&t), "size %zu nstreams %d max %zu order %d: not whole after %zu chunks", size, nstreams,
        max_chunk, order, n);
  uint64_t len0 = size < chunk ? size : chunk;
  CHECK(chunk_track_stream(&t, 0, len0, size, &why) != 0, "size %zu: first chunk accepted twice", size);
  CHECK(chunk_track_truncated(&t, &why) != 0, "size %zu: TRUNCATED accepted after data", size);
  CHECK(chunk_track_eager(&t, size, &why) != 0, "size %zu: eager accepted after stream data", size);
  chunk_track_free(&t);
}

int main(void) {
  static const size_t sizes[] = {0, 1, 4095, 4096, 65536, 65537, (1u << 20) + 5, (5u << 20) + 123, 200u << 20};
  static const int streams[] = {1, 2, 4, 8};
  static const size_t maxes[] = {4096, 524288, 4u << 20};
  for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
    for (size_t b = 0; b < sizeof streams / sizeof *streams; b++)
      for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++)
        for (int o = 0; o < 3; o++) feed(sizes[a], streams[b], maxes[m], o);

  struct chunk_track t = {0};
  const char *why = NULL;
  chunk_track_reset(&t);
  CHECK(chunk_track_stream(&t, 0, 0, 4096, &why) != 0, "empty chunk of a 4096-byte message accepted");
  chunk_track_reset(&t);
  CHECK(chunk_track_eager(&t, 100, &why) == 0 && chunk_track_eager(&t, 100, &why) != 0, "second eager accepted");
  chunk_track_reset(&t);
  CHECK(chunk_track_stream(&t, 0, 4096, 8192, &why) == 0 && chunk_track_stream(&t, 0, 4096, 16384, &why) != 0,
        "chunks naming different totals accepted");
  chunk_track_reset(&t);
  CHECK(chunk_track_stream(&t, 0, 8192, 16384, &why) == 0 && chunk_track_stream(&t, 4096, 8192, 16384, &why) != 0,
        "overlapping, misaligned chunk accepted");
  chunk_track_reset(&t);
  CHECK(chunk_track_stream(&t, 12288, 100, 12388, &why) == 0 && chunk_track_stream(&t, 0, 8192, 12388, &why) != 0,
        "a last chunk off the stride accepted");
  chunk_track_free(&t);
  printf("test_chunks: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
