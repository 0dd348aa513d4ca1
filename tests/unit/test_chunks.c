/* The per-buffer chunk rules (src/transport/tcp/chunks.c): every way the
 * sender stripes a message is accepted in any order of arrival and ends
 * whole; any chunk again, an eager message or a TRUNCATED notice after
 * it, is refused.  Failover: a chunk claimed is recognised as held, and
 * once unclaimed (its stream given up mid-chunk) it may be claimed again,
 * in every position (first, middle, a last one before the stride was
 * known, the whole message).  Two copies of a chunk at once (failover, a
 * chunk sent again while its first copy is still coming): the chunk reads
 * claimed until one copy finishes it, only the first finish counts, and
 * that holds for a last chunk finished before the stride was known. */
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

/* Unclaim chunk k of a message striped in `chunk`s after `first` chunks
 * (k among them) arrived, then feed the rest and k again: whole. */
static void unclaim_then_resend(size_t size, size_t chunk, size_t first, size_t k) {
  size_t n = collx_stripe_count(size, chunk);
  struct chunk_track t = {0};
  const char *why = NULL;
  chunk_track_reset(&t);
  uint64_t koff = (uint64_t)k * chunk, klen = size - koff < chunk ? size - koff : chunk;
  /* chunks 0..first-1 from the end backwards, so that a last chunk may come before the stride is known */
  for (size_t i = 0; i < first; i++) {
    size_t j = n - 1 - i;
    uint64_t off = (uint64_t)j * chunk, len = size - off < chunk ? size - off : chunk;
    CHECK(chunk_track_stream(&t, off, len, size, &why) == 0, "size %zu: chunk %zu refused: %s", size, j, why);
  }
  CHECK(chunk_track_holds(&t, koff, klen, size), "size %zu: chunk %zu claimed but not held", size, k);
  CHECK(!chunk_track_holds(&t, koff, klen, size + 1), "size %zu: chunk %zu held for another total", size, k);
  CHECK(chunk_track_unclaim(&t, koff, klen, size) == 0, "size %zu: chunk %zu not unclaimed", size, k);
  CHECK(!chunk_track_holds(&t, koff, klen, size), "size %zu: chunk %zu still held after unclaim", size, k);
  CHECK(chunk_track_unclaim(&t, koff, klen, size) != 0, "size %zu: chunk %zu unclaimed twice", size, k);
  CHECK(!chunk_track_whole(&t), "size %zu: whole with chunk %zu unclaimed", size, k);
  for (size_t i = first; i < n; i++) {
    size_t j = n - 1 - i;
    uint64_t off = (uint64_t)j * chunk, len = size - off < chunk ? size - off : chunk;
    CHECK(chunk_track_stream(&t, off, len, size, &why) == 0, "size %zu: chunk %zu refused: %s", size, j, why);
  }
  CHECK(chunk_track_stream(&t, koff, klen, size, &why) == 0, "size %zu: chunk %zu refused again: %s", size, k, why);
  CHECK(chunk_track_whole(&t), "size %zu: not whole after chunk %zu came again", size, k);
  chunk_track_free(&t);
}

/* Chunks of a message striped in `chunk`s arrive from the end backwards;
 * chunk k is finished by a copy when `at` chunks have arrived, then again
 * by a second copy once all have. */
static void finish_twice(size_t size, size_t chunk, size_t at, size_t k) {
  size_t n = collx_stripe_count(size, chunk);
  struct chunk_track t = {0};
  const char *why = NULL;
  chunk_track_reset(&t);
  uint64_t koff = (uint64_t)k * chunk, klen = size - koff < chunk ? size - koff : chunk;
  CHECK(chunk_track_state(&t, koff, klen, size) == CHUNK_FREE, "size %zu: chunk %zu not free at first", size, k);
  for (size_t i = 0; i < n; i++) {
    size_t j = n - 1 - i;
    uint64_t off = (uint64_t)j * chunk, len = size - off < chunk ? size - off : chunk;
    CHECK(chunk_track_stream(&t, off, len, size, &why) == 0, "size %zu: chunk %zu refused: %s", size, j, why);
    if (i + 1 != at) continue;
    CHECK(chunk_track_state(&t, koff, klen, size) == CHUNK_CLAIMED, "size %zu: chunk %zu not claimed", size, k);
    CHECK(chunk_track_finish(&t, koff, klen, size) == 0, "size %zu: first copy of chunk %zu not first", size, k);
    CHECK(chunk_track_state(&t, koff, klen, size) == CHUNK_FINISHED, "size %zu: chunk %zu not finished", size, k);
  }
  CHECK(chunk_track_state(&t, koff, klen, size) == CHUNK_FINISHED, "size %zu: chunk %zu forgot its finish once "
        "the stride was known", size, k);
  CHECK(chunk_track_finish(&t, koff, klen, size) == 1, "size %zu: second copy of chunk %zu counted", size, k);
  if (n > 1) {
    size_t other = k == 0 ? 1 : 0;
    uint64_t ooff = (uint64_t)other * chunk, olen = size - ooff < chunk ? size - ooff : chunk;
    CHECK(chunk_track_state(&t, ooff, olen, size) == CHUNK_CLAIMED, "size %zu: chunk %zu finished by chunk %zu's "
          "copies", size, other, k);
  }
  CHECK(chunk_track_finish(&t, koff + 1, klen, size) == -1, "size %zu: a chunk never claimed finished", size);
  CHECK(chunk_track_whole(&t), "size %zu: not whole", size);
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

  unclaim_then_resend(4096, 4096, 1, 0);            /* the whole message in one chunk */
  unclaim_then_resend(10000, 4096, 1, 2);           /* a last chunk before the stride is known */
  unclaim_then_resend(10000, 4096, 2, 2);           /* the last one, once the stride is known */
  unclaim_then_resend(10000, 4096, 3, 0);           /* the first */
  unclaim_then_resend(200u << 20, 65536, 1000, 3100); /* a middle one, bitmap on the heap */
  finish_twice(4096, 4096, 1, 0);            /* the whole message in one chunk */
  finish_twice(10000, 4096, 1, 2);           /* a last chunk finished before the stride is known */
  finish_twice(10000, 4096, 3, 2);           /* the last one, once the stride is known */
  finish_twice(10000, 4096, 3, 0);           /* the first */
  finish_twice(200u << 20, 65536, 2000, 3100); /* a middle one, bitmap on the heap */
  finish_twice(200u << 20, 65536, 1, 3199);  /* the last of many, before the stride is known */
  chunk_track_reset(&t);
  CHECK(chunk_track_eager(&t, 100, &why) == 0 && !chunk_track_holds(&t, 0, 100, 100) &&
        chunk_track_unclaim(&t, 0, 100, 100) != 0, "an eager message is held or unclaimed as a chunk");
  chunk_track_free(&t);
  printf("test_chunks: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
