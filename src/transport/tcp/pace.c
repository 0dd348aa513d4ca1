#include "pace.h"

int pace_rate_add(struct pace_rate *r, uint64_t acked, uint64_t busy_us) {
  if (!r->seen || busy_us < r->busy_us || acked < r->acked) { /* the first look, or a new socket */
    r->seen = 1;
    r->acked = acked;
    r->busy_us = busy_us;
    return 0;
  }
  uint64_t busy = busy_us - r->busy_us;
  if (busy < PACE_SAMPLE_MIN_US) return 0;
  double bps = (double)(acked - r->acked) / (double)busy * 1e6;
  r->acked = acked;
  r->busy_us = busy_us;
  r->bps = r->samples ? r->bps + (bps - r->bps) / 4 : bps;
  r->samples++;
  return 1;
}

int pace_slow(double bps, double fastest) { return bps > 0 && fastest > 0 && bps * PACE_SLOW_RATIO < fastest; }

int pace_may_take(uint64_t queued, double bps) { return (double)queued <= bps * PACE_BUDGET_S; }

int pace_through(uint64_t wrote, uint64_t outq, uint64_t end) { return outq <= wrote && wrote - outq >= end; }

int pace_late(double at, double now) { return now - at >= PACE_LATE_S; }
