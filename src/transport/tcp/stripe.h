/* Striping: how a message is cut into chunks for the streams of a connection. */
#ifndef COLLX_TCP_STRIPE_H
#define COLLX_TCP_STRIPE_H

#include <stddef.h>

/* Smallest chunk worth a stream of its own: below it, splitting costs more
 * in headers and wake-ups than the parallelism gains. */
#define COLLX_STRIPE_MIN_CHUNK (64 * 1024)
#define COLLX_STRIPE_ALIGN 4096

/* Chunk size for a message of `size` bytes over `nstreams` streams, at most
 * `max_chunk` (COLLX_CHUNK_SIZE): the message is spread evenly over the
 * streams, in chunks no smaller than COLLX_STRIPE_MIN_CHUNK (unless the
 * message itself is smaller) and no larger than max_chunk, rounded to 4 KiB. */
size_t collx_stripe_chunk(size_t size, int nstreams, size_t max_chunk);

/* Number of chunks of a message (at least 1: a zero-byte message still
 * travels as one header). */
size_t collx_stripe_count(size_t size, size_t chunk);

#endif
