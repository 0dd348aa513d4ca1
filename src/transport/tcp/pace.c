#include "pace.h"

static double ewma(double old, double sample, int samples) { return samples ? old + (sample - old) / 4 : sample; }

int pace_rate_add(struct pace_rate *r, uint64_t acked, uint64_t busy_us, double now) {
  if (!r->seen || busy_us < r->busy_us || acked < r->acked) { /* the first look, or a new socket */
    r->seen = 1;
    r->acked = acked;
    r->busy_us = busy_us;
    r->at = now;
    return 0;
  }
  uint64_t busy = busy_us - r->busy_us;
  if (busy < PACE_SAMPLE_MIN_US) return 0;
  double bytes = (double)(acked - r->acked), wall = now - r->at;
  r->bps = ewma(r->bps, bytes / (double)busy * 1e6, r->samples);
  /* Busy time is never longer than the wall clock's, save for rounding. */
  if (wall < (double)busy * 1e-6) wall = (double)busy * 1e-6;
  r->wall_bps = ewma(r->wall_bps, bytes / wall, r->samples);
  r->acked = acked;
  r->busy_us = busy_us;
  r->at = now;
  r->samples++;
  return 1;
}

int pace_slow(double bps, double fastest) { return bps > 0 && fastest > 0 && bps * PACE_SLOW_RATIO < fastest; }

int pace_degraded(const struct pace_rate *r, double fastest, double most_wall_bps) {
  return pace_slow(r->bps, fastest) && pace_slow(r->wall_bps, most_wall_bps);
}

int pace_may_take(uint64_t queued, double bps) { return (double)queued <= bps * PACE_BUDGET_S; }

int pace_through(uint64_t wrote, uint64_t outq, uint64_t end) { return outq <= wrote && wrote - outq >= end; }

int pace_late(double at, double now) { return now - at >= PACE_LATE_S; }
