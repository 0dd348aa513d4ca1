#include "chunks.h"

#include <stdlib.h>
#include <string.h>

#include "stripe.h"

void chunk_track_reset(struct chunk_track *t) {
  free(t->more);
  memset(t, 0, sizeof *t);
}

void chunk_track_free(struct chunk_track *t) {
  /* Emptied whole: a late chunk for a finished receive must find no
   * bitmap size without its bitmap. */
  chunk_track_reset(t);
}

static uint64_t *chunk_bits(struct chunk_track *t) { return t->more ? t->more : t->bits; }
static size_t chunk_words(const struct chunk_track *t) { return (t->nbits + 63) / 64; }
static uint64_t *done_bits(struct chunk_track *t) { return t->more ? t->more + chunk_words(t) : t->done; }
static const uint64_t *done_bits_c(const struct chunk_track *t) {
  return t->more ? t->more + chunk_words(t) : t->done;
}
static int bit_of(const uint64_t *bits, uint64_t k) { return (int)(bits[k / 64] >> (k % 64) & 1); }

/* Size the bitmap once the stride is known. */
static int chunk_bits_init(struct chunk_track *t, const char **why) {
  uint64_t n = (t->total + t->stride - 1) / t->stride;
  t->nbits = (size_t)n;
  if (n <= CHUNK_INLINE_BITS) return 0;
  t->more = calloc(2 * chunk_words(t), sizeof(uint64_t)); /* claims, then finishes */
  if (!t->more) {
    *why = "out of memory tracking the chunks of a message";
    return -1;
  }
  return 0;
}

/* Claim chunk number k; -1 when it was claimed before. */
static int chunk_claim(struct chunk_track *t, uint64_t k, uint64_t len, const char **why) {
  uint64_t *bits = chunk_bits(t);
  uint64_t mask = 1ull << (k % 64);
  if (bits[k / 64] & mask) {
    *why = "chunk arrived twice (overlapping chunks)";
    return -1;
  }
  bits[k / 64] |= mask;
  t->claimed += len;
  return 0;
}

/* The last chunk, checked and claimed once the stride is known (and
 * marked finished if a copy of it came whole before). */
static int chunk_claim_final(struct chunk_track *t, const char **why) {
  if (t->final_off % t->stride || t->final_len > t->stride) {
    *why = "last chunk does not line up with the others";
    return -1;
  }
  uint64_t k = t->final_off / t->stride;
  if (chunk_claim(t, k, t->final_len, why) != 0) return -1;
  if (t->final_done) done_bits(t)[k / 64] |= 1ull << (k % 64);
  return 0;
}

static int chunk_stream(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total,
                        const char **why) {
  if (t->kind == CHUNK_EAGER || t->kind == CHUNK_TRUNCATED) {
    *why = t->kind == CHUNK_EAGER ? "chunk on a data stream for a buffer an eager message filled"
                                  : "chunk for a buffer the sender said does not fit";
    return -1;
  }
  if (t->kind == CHUNK_STREAM && total != t->total) {
    *why = "chunks of one message name different sizes";
    return -1;
  }
  if (len == 0 && total != 0) {
    *why = "empty chunk of a non-empty message";
    return -1;
  }
  if (t->kind == CHUNK_NONE) {
    t->kind = CHUNK_STREAM;
    t->total = total;
  }
  int last = offset + len == total;
  if (last && offset == 0) { /* the whole message in one chunk */
    if (t->claimed || t->final_seen || t->stride) {
      *why = "whole-message chunk after other chunks of it";
      return -1;
    }
    t->stride = len ? len : 1;
    t->nbits = 1;
    return chunk_claim(t, 0, len, why);
  }
  if (last && !t->stride) {
    if (t->final_seen) {
      *why = "last chunk arrived twice";
      return -1;
    }
    t->final_seen = 1;
    t->final_off = offset;
    t->final_len = len;
    return 0;
  }
  if (!last && !t->stride) {
    if (len % COLLX_STRIPE_ALIGN) {
      *why = "chunk length is not a multiple of the stripe alignment";
      return -1;
    }
    t->stride = len;
    if (chunk_bits_init(t, why) != 0) return -1;
    if (t->final_seen && chunk_claim_final(t, why) != 0) return -1;
  }
  if (offset % t->stride || (!last && len != t->stride) || (last && len > t->stride) ||
      offset / t->stride >= t->nbits) {
    *why = "chunk does not line up with the message's other chunks";
    return -1;
  }
  return chunk_claim(t, offset / t->stride, len, why);
}

int chunk_track_stream(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total,
                       const char **why) {
  if (t->refused) {
    *why = "chunk for a buffer whose chunks already clashed";
    return -1;
  }
  int rc = chunk_stream(t, offset, len, total, why);
  if (rc != 0) t->refused = 1;
  return rc;
}

int chunk_track_eager(struct chunk_track *t, uint64_t size, const char **why) {
  if (t->refused || t->kind != CHUNK_NONE) {
    t->refused = 1;
    *why = t->kind == CHUNK_EAGER ? "two eager messages for one buffer"
                                  : "eager message for a buffer that data streams fill";
    return -1;
  }
  t->kind = CHUNK_EAGER;
  t->total = size;
  t->claimed = size;
  return 0;
}

int chunk_track_truncated(struct chunk_track *t, const char **why) {
  if (t->refused || t->kind != CHUNK_NONE) {
    t->refused = 1;
    *why = "TRUNCATED notice for a buffer that data already went to";
    return -1;
  }
  t->kind = CHUNK_TRUNCATED;
  return 0;
}

int chunk_track_whole(const struct chunk_track *t) {
  return !t->refused && t->kind == CHUNK_STREAM && t->stride && t->claimed == t->total;
}

/* The number of exactly this chunk among those claimed: 0.. for a chunk
 * whose place is known, -2 for the last chunk claimed before the stride
 * was, -1 when exactly it is not claimed. */
static int64_t chunk_held(const struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total) {
  if (t->refused || t->kind != CHUNK_STREAM || t->total != total) return -1;
  if (t->final_seen && !t->stride) return t->final_off == offset && t->final_len == len ? -2 : -1;
  if (!t->stride || offset % t->stride || offset / t->stride >= t->nbits) return -1;
  uint64_t k = offset / t->stride;
  int last = offset + len == total;
  if (last ? len > t->stride : len != t->stride) return -1;
  const uint64_t *bits = t->more ? t->more : t->bits;
  return bit_of(bits, k) ? (int64_t)k : -1;
}

int chunk_track_holds(const struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total) {
  return chunk_held(t, offset, len, total) != -1;
}

enum chunk_state chunk_track_state(const struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total) {
  int64_t k = chunk_held(t, offset, len, total);
  if (k == -1) return CHUNK_FREE;
  int done = k == -2 ? t->final_done : bit_of(done_bits_c(t), (uint64_t)k);
  return done ? CHUNK_FINISHED : CHUNK_CLAIMED;
}

int chunk_track_finish(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total) {
  int64_t k = chunk_held(t, offset, len, total);
  if (k == -1) return -1;
  if (k == -2) {
    if (t->final_done) return 1;
    t->final_done = 1;
    return 0;
  }
  uint64_t *done = done_bits(t);
  if (bit_of(done, (uint64_t)k)) return 1;
  done[k / 64] |= 1ull << (k % 64);
  return 0;
}

int chunk_track_unclaim(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total) {
  if (!chunk_track_holds(t, offset, len, total)) return -1;
  if (offset == 0 && len == total) { /* the whole message: nothing else of it came */
    chunk_track_reset(t);
    return 0;
  }
  if (t->final_seen && !t->stride) {
    t->final_seen = 0;
    t->final_done = 0;
    t->final_off = t->final_len = 0;
    return 0;
  }
  uint64_t k = offset / t->stride;
  chunk_bits(t)[k / 64] &= ~(1ull << (k % 64));
  done_bits(t)[k / 64] &= ~(1ull << (k % 64));
  t->claimed -= len;
  return 0;
}
