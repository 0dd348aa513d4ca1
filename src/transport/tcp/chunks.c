#include "chunks.h"

#include <stdlib.h>
#include <string.h>

#include "stripe.h"

void piece_track_reset(struct piece_track *t) {
  free(t->more);
  memset(t, 0, sizeof *t);
}

void piece_track_free(struct piece_track *t) {
  /* Emptied whole: a late piece for a finished receive must find no
   * bitmap size without its bitmap. */
  piece_track_reset(t);
}

static uint64_t *piece_bits(struct piece_track *t) { return t->more ? t->more : t->bits; }

/* Size the bitmap once the stride is known. */
static int piece_bits_init(struct piece_track *t, const char **why) {
  uint64_t n = (t->total + t->stride - 1) / t->stride;
  t->nbits = (size_t)n;
  if (n <= PIECE_INLINE_BITS) return 0;
  t->more = calloc((size_t)(n + 63) / 64, sizeof(uint64_t));
  if (!t->more) {
    *why = "out of memory tracking the pieces of a message";
    return -1;
  }
  return 0;
}

/* Claim piece number k; -1 when it was claimed before. */
static int piece_claim(struct piece_track *t, uint64_t k, uint64_t len, const char **why) {
  uint64_t *bits = piece_bits(t);
  uint64_t mask = 1ull << (k % 64);
  if (bits[k / 64] & mask) {
    *why = "piece arrived twice (overlapping pieces)";
    return -1;
  }
  bits[k / 64] |= mask;
  t->claimed += len;
  return 0;
}

/* The last piece, checked and claimed once the stride is known. */
static int piece_claim_final(struct piece_track *t, const char **why) {
  if (t->final_off % t->stride || t->final_len > t->stride) {
    *why = "last piece does not line up with the others";
    return -1;
  }
  return piece_claim(t, t->final_off / t->stride, t->final_len, why);
}

static int piece_stream(struct piece_track *t, uint64_t offset, uint64_t len, uint64_t total,
                        const char **why) {
  if (t->kind == PIECE_EAGER || t->kind == PIECE_TRUNCATED) {
    *why = t->kind == PIECE_EAGER ? "piece on a data stream for a buffer an eager message filled"
                                  : "piece for a buffer the sender said does not fit";
    return -1;
  }
  if (t->kind == PIECE_STREAM && total != t->total) {
    *why = "pieces of one message name different sizes";
    return -1;
  }
  if (len == 0 && total != 0) {
    *why = "empty piece of a non-empty message";
    return -1;
  }
  if (t->kind == PIECE_NONE) {
    t->kind = PIECE_STREAM;
    t->total = total;
  }
  int last = offset + len == total;
  if (last && offset == 0) { /* the whole message in one piece */
    if (t->claimed || t->final_seen || t->stride) {
      *why = "whole-message piece after other pieces of it";
      return -1;
    }
    t->stride = len ? len : 1;
    t->nbits = 1;
    return piece_claim(t, 0, len, why);
  }
  if (last && !t->stride) {
    if (t->final_seen) {
      *why = "last piece arrived twice";
      return -1;
    }
    t->final_seen = 1;
    t->final_off = offset;
    t->final_len = len;
    return 0;
  }
  if (!last && !t->stride) {
    if (len % COLLX_STRIPE_ALIGN) {
      *why = "piece length is not a multiple of the stripe alignment";
      return -1;
    }
    t->stride = len;
    if (piece_bits_init(t, why) != 0) return -1;
    if (t->final_seen && piece_claim_final(t, why) != 0) return -1;
  }
  if (offset % t->stride || (!last && len != t->stride) || (last && len > t->stride) ||
      offset / t->stride >= t->nbits) {
    *why = "piece does not line up with the message's other pieces";
    return -1;
  }
  return piece_claim(t, offset / t->stride, len, why);
}

int piece_track_stream(struct piece_track *t, uint64_t offset, uint64_t len, uint64_t total,
                       const char **why) {
  if (t->refused) {
    *why = "piece for a buffer whose pieces already clashed";
    return -1;
  }
  int rc = piece_stream(t, offset, len, total, why);
  if (rc != 0) t->refused = 1;
  return rc;
}

int piece_track_eager(struct piece_track *t, uint64_t size, const char **why) {
  if (t->refused || t->kind != PIECE_NONE) {
    t->refused = 1;
    *why = t->kind == PIECE_EAGER ? "two eager messages for one buffer"
                                  : "eager message for a buffer that data streams fill";
    return -1;
  }
  t->kind = PIECE_EAGER;
  t->total = size;
  t->claimed = size;
  return 0;
}

int piece_track_truncated(struct piece_track *t, const char **why) {
  if (t->refused || t->kind != PIECE_NONE) {
    t->refused = 1;
    *why = "TRUNCATED notice for a buffer that data already went to";
    return -1;
  }
  t->kind = PIECE_TRUNCATED;
  return 0;
}

int piece_track_whole(const struct piece_track *t) {
  return !t->refused && t->kind == PIECE_STREAM && t->stride && t->claimed == t->total;
}
