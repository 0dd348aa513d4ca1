/*
 * Message contents that show damage: byte j of a message depends on the
 * message's key and j (a 64-bit hash per 8-byte word), so shifted, stale or
 * swapped data fails the check; canaries after a receive buffer and the
 * fill byte of a posted buffer show writes beyond the message.
 */
#ifndef COLLX_HARNESS_VERIFY_H
#define COLLX_HARNESS_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#define HX_FILL 0xEE      /* receive buffers hold this before a post */
#define HX_CANARY_LEN 64  /* bytes checked after a receive buffer */

uint64_t hx_mix64(uint64_t x);
/* The key of message (a, b) of a run keyed `base`. */
uint64_t hx_key(uint64_t base, uint64_t a, uint64_t b);
uint64_t hx_rng_next(uint64_t *state);

void hx_pattern_fill(uint8_t *p, size_t n, uint64_t key);
/* 0 when p[0..n) carries key's pattern; else -1 and the damage described in why. */
int hx_pattern_check(const uint8_t *p, size_t n, uint64_t key, char *why, size_t whylen);
/* Offset of the first wrong byte, or -1. */
long hx_pattern_first_bad(const uint8_t *p, size_t n, uint64_t key);

void hx_canary_fill(uint8_t *p, uint64_t salt);
int hx_canary_check(const uint8_t *p, uint64_t salt, char *why, size_t whylen);
/* Bytes [from, to) must still hold HX_FILL. */
int hx_untouched_check(const uint8_t *p, size_t from, size_t to, char *why, size_t whylen);

#endif
