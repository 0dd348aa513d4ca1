/*
 * What has arrived for one receive buffer, checked piece against piece.
 *
 * A buffer is filled either by one eager message, or by the pieces of one
 * striped message (tcp_data.c), or is refused whole by a TRUNCATED notice.
 * Pieces of a message all name the same total; all but the last are one
 * stride long (a multiple of COLLX_STRIPE_ALIGN) and start at a multiple
 * of it; the last ends the message.  Each piece is claimed once, at its
 * header, before any of its bytes is written: an overlap, a repeat, an
 * empty piece of a non-empty message, a TRUNCATED notice after data, or
 * eager and stream data for the same buffer is refused, so that a buffer
 * can never be counted done twice or done while data still arrives.  A
 * last piece that comes before any other is checked against them when
 * the first other one comes; after any refusal everything is refused.
 *
 * Pure functions, no locking (the caller serialises), so that the fuzzer
 * drives them without sockets.
 */
#ifndef COLLX_TCP_PIECES_H
#define COLLX_TCP_PIECES_H

#include <stddef.h>
#include <stdint.h>

enum piece_kind { PIECE_NONE = 0, PIECE_STREAM, PIECE_EAGER, PIECE_TRUNCATED };

/* Pieces tracked without allocating; more use a bitmap on the heap. */
#define PIECE_INLINE_BITS 128

struct piece_track {
  uint8_t kind;           /* enum piece_kind: what filled the buffer so far */
  uint8_t final_seen;     /* the last piece came before the stride was known */
  uint8_t refused;        /* a clash was found: everything after is refused */
  uint64_t total;
  uint64_t stride;        /* 0 until a piece other than the last arrives */
  uint64_t final_off, final_len;
  uint64_t claimed;       /* bytes of the pieces claimed so far */
  uint64_t bits[PIECE_INLINE_BITS / 64];
  uint64_t *more;         /* bitmap when the message has more pieces */
  size_t nbits;
};

void piece_track_reset(struct piece_track *t);
/* Release the heap bitmap (the buffer's receive is over); the track is
 * empty again. */
void piece_track_free(struct piece_track *t);

/* Claim a piece [offset, offset + len) of a message of `total` bytes for
 * the buffer.  0: claimed; -1: refused, *why says how it clashes.  The
 * piece must already lie inside the buffer (wire_piece_check). */
int piece_track_stream(struct piece_track *t, uint64_t offset, uint64_t len, uint64_t total,
                       const char **why);
/* An eager message of `size` bytes fills the buffer whole. */
int piece_track_eager(struct piece_track *t, uint64_t size, const char **why);
/* The sender says the message does not fit: nothing else may come. */
int piece_track_truncated(struct piece_track *t, const char **why);

/* Every byte of the message claimed (a buffer filled by pieces). */
int piece_track_whole(const struct piece_track *t);

#endif
