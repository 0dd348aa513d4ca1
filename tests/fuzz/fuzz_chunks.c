/* libFuzzer target: sequences of chunks for one receive buffer
 * (src/transport/tcp/chunks.c), not single headers.
 * Input: 1 byte of the message size in 256-byte units, then records of
 * 5 bytes: kind (stream / eager / truncated / unclaim), offset and
 * length in 256-byte units.  The oracle keeps its own map of the bytes
 * accepted: no byte is accepted twice, nothing past the message, nothing
 * after an eager message or a TRUNCATED notice, "whole" means every byte
 * came, and a chunk unclaimed (failover: its stream was given up) was
 * held exactly, is held no more, and its bytes may come again. */
#include "transport/tcp/chunks.h"
#include "fuzz_common.h"

#define UNIT 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t units = 0;
  fuzz_take(&units, sizeof units, &data, &size);
  uint64_t total = (uint64_t)units * UNIT;
  uint8_t *seen = calloc(total + 1, 1);
  if (!seen) return 0;
  struct chunk_track t = {0};
  chunk_track_reset(&t);
  int closed = 0; /* an eager message or a TRUNCATED notice was accepted */
  uint64_t accepted = 0;
  while (size >= 5) {
    uint8_t rec[5];
    fuzz_take(rec, sizeof rec, &data, &size);
    uint64_t off = (uint64_t)(rec[1] | rec[2] << 8) * UNIT, len = (uint64_t)(rec[3] | rec[4] << 8) * UNIT;
    const char *why = NULL;
    int kind = rec[0] % 4, rc;
    if (kind == 0) {
      if (off > total || len > total - off) continue; /* wire_chunk_check refuses these first */
      rc = chunk_track_stream(&t, off, len, total, &why);
      if (rc == 0) {
        FUZZ_CHECK(!closed, "stream chunk accepted after eager/TRUNCATED");
        for (uint64_t b = off; b < off + len; b++) {
          FUZZ_CHECK(!seen[b], "byte %llu accepted twice", (unsigned long long)b);
          seen[b] = 1;
        }
        accepted += len;
      }
    } else if (kind == 1) {
      rc = chunk_track_eager(&t, total, &why);
      if (rc == 0) {
        FUZZ_CHECK(!closed && accepted == 0, "eager message accepted after other data");
        closed = 1;
      }
    } else if (kind == 3) {
      if (off > total || len > total - off) continue;
      int held = chunk_track_holds(&t, off, len, total);
      rc = chunk_track_unclaim(&t, off, len, total);
      FUZZ_CHECK((rc == 0) == held, "unclaim %s a chunk that was %s", rc == 0 ? "took" : "refused",
                 held ? "held" : "not held");
      if (rc == 0) {
        for (uint64_t b = off; b < off + len; b++) {
          FUZZ_CHECK(seen[b], "unclaimed byte %llu that never came", (unsigned long long)b);
          seen[b] = 0;
        }
        accepted -= len;
        FUZZ_CHECK(!chunk_track_holds(&t, off, len, total), "chunk still held after unclaim");
      }
      rc = 0;
    } else {
      rc = chunk_track_truncated(&t, &why);
      if (rc == 0) {
        FUZZ_CHECK(!closed && accepted == 0, "TRUNCATED accepted after data");
        closed = 1;
      }
    }
    if (rc != 0) fuzz_check_why(why);
    FUZZ_CHECK(t.claimed <= total, "claimed %llu of %llu bytes", (unsigned long long)t.claimed,
               (unsigned long long)total);
  }
  if (chunk_track_whole(&t))
    for (uint64_t b = 0; b < total; b++) FUZZ_CHECK(seen[b], "whole, but byte %llu never came", (unsigned long long)b);
  chunk_track_free(&t);
  free(seen);
  return 0;
}
