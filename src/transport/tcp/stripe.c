#include "stripe.h"

size_t collx_stripe_piece(size_t size, int nstreams, size_t max_piece) {
  if (nstreams < 1) nstreams = 1;
  if (max_piece < COLLX_STRIPE_ALIGN) max_piece = COLLX_STRIPE_ALIGN;
  size_t piece = (size + (size_t)nstreams - 1) / (size_t)nstreams;
  if (piece < COLLX_STRIPE_MIN_PIECE) piece = COLLX_STRIPE_MIN_PIECE;
  piece = (piece + COLLX_STRIPE_ALIGN - 1) / COLLX_STRIPE_ALIGN * COLLX_STRIPE_ALIGN;
  if (piece > max_piece) piece = max_piece / COLLX_STRIPE_ALIGN * COLLX_STRIPE_ALIGN;
  return piece;
}

size_t collx_stripe_count(size_t size, size_t piece) {
  if (size == 0) return 1;
  return (size + piece - 1) / piece;
}
