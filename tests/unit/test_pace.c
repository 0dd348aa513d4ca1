/* How fast a stream drains and what a slow one is given
 * (src/transport/tcp/pace.c): the estimate follows the bytes acknowledged
 * per unit of busy time, ignores spells too short to say anything and
 * starts over on a new socket; a stream is slow only far below the
 * fastest, and named degraded only when it delivers far less by wall time
 * too; a slow one takes a chunk only once its socket drains soon; a
 * chunk is through once the socket no longer holds it; one is late to be
 * copied only after what a slow stream is given would have drained. */
#include <math.h>
#include <stdio.h>

#include "transport/tcp/pace.h"
#include "../common/check.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b); }

int main(void) {
  struct pace_rate r = {0};
  /* The first look only takes the counters. */
  CHECK(pace_rate_add(&r, 5000, 1000, 10.0) == 0 && r.samples == 0, "a first look made a sample");
  /* 1 MB in 100 ms busy: 10 MB/s. */
  CHECK(pace_rate_add(&r, 5000 + 1000000, 1000 + 100000, 10.2) == 1 && near(r.bps, 1e7), "first sample: %g", r.bps);
  /* Too short a busy spell says nothing, and is kept for the next. */
  CHECK(pace_rate_add(&r, 5000 + 1100000, 1000 + 105000, 10.25) == 0 && near(r.bps, 1e7), "short spell sampled");
  /* 2 MB over the next 100 ms busy, the short spell in it: a quarter of the way to 20 MB/s. */
  CHECK(pace_rate_add(&r, 5000 + 3000000, 1000 + 200000, 10.4) == 1, "second sample not taken");
  double want = 1e7 + (2e6 / 0.1 - 1e7) / 4;
  CHECK(near(r.bps, want) && r.samples == 2, "second sample: %g, want %g", r.bps, want);
  /* By wall time: 1 MB in 200 ms, then 2 MB in the next 200 ms. */
  double want_wall = 5e6 + (2e6 / 0.2 - 5e6) / 4;
  CHECK(near(r.wall_bps, want_wall), "wall rate: %g, want %g", r.wall_bps, want_wall);
  /* Idle time is not busy time: the same bytes over the same busy time however long the wall clock. */
  CHECK(pace_rate_add(&r, 5000 + 3000000, 1000 + 200000, 20.0) == 0, "no busy time sampled");
  /* A new socket (its counters below the last): start over from them, no sample. */
  CHECK(pace_rate_add(&r, 100, 10, 21.0) == 0 && r.samples == 2 && r.acked == 100 && r.busy_us == 10,
        "a new socket's counters not taken as the base");

  /* Slow: more than PACE_SLOW_RATIO times below the fastest. */
  CHECK(pace_slow(6.25e6, 125e6), "50 Mb/s beside 1 Gb/s not slow");
  CHECK(pace_slow(0.25e6, 125e6), "2 Mb/s beside 1 Gb/s not slow");
  CHECK(!pace_slow(125e6, 375e6), "1 Gb/s beside 3 Gb/s slow");
  CHECK(!pace_slow(125e6, 125e6), "the fastest slow");
  CHECK(!pace_slow(0, 125e6) && !pace_slow(1e6, 0), "a stream not measured, or no fastest, slow");

  /* Named as degraded only when it also delivers far less by wall time.
   * Two equal 1 Gb/s members, one busy all along and one used in short
   * spells, whose busy time the kernel's jiffies mostly miss (94 MB in 20
   * ms of busy time over 0.8 s, as measured): the first is slow beside the
   * second's 4.7 GB/s, but no degraded NIC. */
  struct pace_rate all_along = {0}, spells = {0}, degraded = {0};
  for (int k = 0; k <= 4; k++) {
    pace_rate_add(&all_along, (uint64_t)k * 94000000, (uint64_t)k * 800000, 0.8 * k);
    pace_rate_add(&spells, (uint64_t)k * 94000000, (uint64_t)k * 20000, 0.8 * k);
    pace_rate_add(&degraded, (uint64_t)k * 5000000, (uint64_t)k * 800000, 0.8 * k);
  }
  CHECK(pace_slow(all_along.bps, spells.bps), "the member busy all along is not slow by busy time (%g against %g)",
        all_along.bps, spells.bps);
  CHECK(!pace_degraded(&all_along, spells.bps, spells.wall_bps),
        "an equal member named degraded (%g B/s by wall time against %g)", all_along.wall_bps, spells.wall_bps);
  /* 50 Mb/s beside 1 Gb/s, busy all along: slow and degraded. */
  CHECK(pace_degraded(&degraded, all_along.bps, all_along.wall_bps),
        "a 50 Mb/s member beside a 1 Gb/s one not named (%g / %g B/s)", degraded.bps, degraded.wall_bps);
  /* A slow stream takes a chunk once what it holds drains in PACE_BUDGET_S. */
  CHECK(pace_may_take(0, 0.25e6), "an empty socket refused");
  CHECK(pace_may_take((uint64_t)(6.25e6 * PACE_BUDGET_S), 6.25e6), "a socket draining in the budget refused");
  CHECK(!pace_may_take((uint64_t)(6.25e6 * PACE_BUDGET_S) + 1, 6.25e6), "a socket over the budget allowed");
  CHECK(!pace_may_take(262144, 0.25e6), "256 KiB at 2 Mb/s allowed");

  /* Through: the socket holds none of it. */
  CHECK(pace_through(1000, 0, 1000), "a chunk out of an empty socket not through");
  CHECK(pace_through(1000, 200, 800) && !pace_through(1000, 201, 800), "the boundary byte");
  CHECK(!pace_through(100, 200, 50), "more held than written taken as through");

  /* Late: waited PACE_LATE_S, longer than a slow stream is given, so a
   * chunk on its way within the budget is never copied. */
  CHECK(!pace_late(100.0, 100.0 + PACE_BUDGET_S) && !pace_late(100.0, 100.0 + PACE_LATE_S * 0.99),
        "a chunk taken late before PACE_LATE_S");
  CHECK(pace_late(100.0, 100.0 + PACE_LATE_S) && pace_late(100.0, 105.0), "a chunk waiting PACE_LATE_S not late");
  CHECK(!pace_late(100.0, 99.0), "a chunk from the future late");
  printf("test_pace: %d checks, %d failed\n", checks, failures);
  return failures != 0;
}
