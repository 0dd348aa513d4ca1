/*
 * A recording NCCL profiler for the plugin's network events: the callback
 * the harness hands to init (v10 on), a fresh handle for every message it
 * posts, and a judge of what came back.  Every event must start under the
 * handle of a posted message with the socket descriptor of that message
 * (op, length), exactly once; it must be stopped exactly once, by the time
 * test reports its request done or failed, or its comm closed; a message
 * not posted gets none.  Anything else is a violation, reported by
 * hx_prof_verdict as a case failure.
 */
#ifndef COLLX_HARNESS_PROF_H
#define COLLX_HARNESS_PROF_H

#include "net.h"

extern const struct hx_net_prof hx_prof_recorder;

/* Violations so far (hx_fail for the first few) and a note with the event
 * count; 0 when all is well. */
int hx_prof_verdict(void);
/* The plugin was (re)loaded: its first message afterwards is the one it
 * learns of the profiler from. */
void hx_prof_plugin_loaded(void);
/* Events started, stopped, and messages posted with a handle. */
void hx_prof_counts(long *started, long *stopped, long *posted);

#endif
