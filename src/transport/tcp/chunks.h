/*
 * What has arrived for one receive buffer, checked chunk against chunk.
 *
 * A buffer is filled either by one eager message, or by the chunks of one
 * striped message (recv.c), or is refused whole by a TRUNCATED notice.
 * Chunks of a message all name the same total; all but the last are one
 * stride long (a multiple of COLLX_STRIPE_ALIGN) and start at a multiple
 * of it; the last ends the message.  Each chunk is claimed once, at its
 * header, before any of its bytes is written: an overlap, a repeat, an
 * empty chunk of a non-empty message, a TRUNCATED notice after data, or
 * eager and stream data for the same buffer is refused, so that a buffer
 * can never be counted done twice or done while data still arrives.  A
 * last chunk that comes before any other is checked against them when
 * the first other one comes; after any refusal everything is refused.
 *
 * Pure functions, no locking (the caller serialises), so that the fuzzer
 * drives them without sockets.
 */
#ifndef COLLX_TCP_CHUNKS_H
#define COLLX_TCP_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

enum chunk_kind { CHUNK_NONE = 0, CHUNK_STREAM, CHUNK_EAGER, CHUNK_TRUNCATED };

/* Chunks tracked without allocating; more use a bitmap on the heap. */
#define CHUNK_INLINE_BITS 128

struct chunk_track {
  uint8_t kind;           /* enum chunk_kind: what filled the buffer so far */
  uint8_t final_seen;     /* the last chunk came before the stride was known */
  uint8_t refused;        /* a clash was found: everything after is refused */
  uint64_t total;
  uint64_t stride;        /* 0 until a chunk other than the last arrives */
  uint64_t final_off, final_len;
  uint64_t claimed;       /* bytes of the chunks claimed so far */
  uint64_t bits[CHUNK_INLINE_BITS / 64];
  /* Chunks finished (a copy came whole; failover, where a chunk may come
   * twice at once), beside the claims */
  uint64_t done[CHUNK_INLINE_BITS / 64];
  uint8_t final_done;     /* the last chunk finished before the stride was known */
  uint64_t *more;         /* claims then finishes, when the message has more chunks */
  size_t nbits;
};

void chunk_track_reset(struct chunk_track *t);
/* Release the heap bitmap (the buffer's receive is over); the track is
 * empty again. */
void chunk_track_free(struct chunk_track *t);

/* Claim a chunk [offset, offset + len) of a message of `total` bytes for
 * the buffer.  0: claimed; -1: refused, *why says how it clashes.  The
 * chunk must already lie inside the buffer (wire_chunk_check). */
int chunk_track_stream(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total,
                       const char **why);
/* An eager message of `size` bytes fills the buffer whole. */
int chunk_track_eager(struct chunk_track *t, uint64_t size, const char **why);
/* The sender says the message does not fit: nothing else may come. */
int chunk_track_truncated(struct chunk_track *t, const char **why);

/* Whether exactly this chunk is claimed (failover: a chunk sent again
 * after its stream was given up may have arrived whole before). */
int chunk_track_holds(const struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total);
/* Forget a claimed chunk whose payload never arrived whole (its stream was
 * given up), so that it may be claimed again.  0, or -1 when exactly that
 * chunk is not claimed. */
int chunk_track_unclaim(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total);

/* Where exactly this chunk stands: not claimed, claimed (a copy of it is
 * on its way), or finished (a copy came whole). */
enum chunk_state { CHUNK_FREE = 0, CHUNK_CLAIMED, CHUNK_FINISHED };
enum chunk_state chunk_track_state(const struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total);
/* A copy of a claimed chunk came whole: 0 when it is the first (its bytes
 * count), 1 when another copy finished it before, -1 when exactly that
 * chunk is not claimed. */
int chunk_track_finish(struct chunk_track *t, uint64_t offset, uint64_t len, uint64_t total);

/* Every byte of the message claimed (a buffer filled by chunks). */
int chunk_track_whole(const struct chunk_track *t);

#endif
