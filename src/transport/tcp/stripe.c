#include "stripe.h"

size_t collx_stripe_chunk(size_t size, int nstreams, size_t max_chunk) {
  if (nstreams < 1) nstreams = 1;
  if (max_chunk < COLLX_STRIPE_ALIGN) max_chunk = COLLX_STRIPE_ALIGN;
  size_t chunk = (size + (size_t)nstreams - 1) / (size_t)nstreams;
  if (chunk < COLLX_STRIPE_MIN_CHUNK) chunk = COLLX_STRIPE_MIN_CHUNK;
  chunk = (chunk + COLLX_STRIPE_ALIGN - 1) / COLLX_STRIPE_ALIGN * COLLX_STRIPE_ALIGN;
  if (chunk > max_chunk) chunk = max_chunk / COLLX_STRIPE_ALIGN * COLLX_STRIPE_ALIGN;
  return chunk;
}

size_t collx_stripe_count(size_t size, size_t chunk) {
  if (size == 0) return 1;
  return (size + chunk - 1) / chunk;
}
