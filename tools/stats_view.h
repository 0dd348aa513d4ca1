/* collx-info --stats: the live counters of running processes. */
#ifndef COLLX_TOOLS_STATS_VIEW_H
#define COLLX_TOOLS_STATS_VIEW_H

/* target: a pid, "all" or NULL (all); json: JSON instead of text.  The
 * exit status: 0, 1 (a named process has no readable page), 2 (bad
 * target). */
int collx_info_stats(const char *target, int json);

#endif
