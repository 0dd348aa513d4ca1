/*
 * The conformance driver's case groups.  Every case is two processes (one
 * for `properties`): roles[1] is the side that sends (or connects), roles[2]
 * the side that receives (or listens).
 */
#ifndef COLLX_TESTS_DRIVER_H
#define COLLX_TESTS_DRIVER_H

#include "../harness/harness.h"

#define NB_LIMIT_S 0.050      /* connect/accept/listen in the non-blocking cases */
#define CONNECT_TIMEOUT_S 5.0

static inline int sends_first(void) { return hx_role() == 1; }

/* Offsets of n entries of posted[i] bytes plus a canary each, 8-byte
 * aligned, in one buffer; returns its size (off[n]). */
size_t layout(const int *posted, int n, size_t *off);
/* A connection (role 1 sends) and one registered buffer on this side's comm. */
uint8_t *conn_with_buffer(struct hx_conn *k, size_t total, void **mh);
void release_buffer(struct hx_conn *k, uint8_t *buf, void *mh);
/* A received entry: its size, bytes and canary; -1 (reported). */
int check_entry(const char *what, const uint8_t *p, int got, int size, int posted, uint64_t key, uint64_t salt);

extern const struct hx_case driver_basic_cases[];
extern const int driver_basic_count;
extern const struct hx_case driver_window_cases[];
extern const int driver_window_count;
extern const struct hx_case driver_eager_cases[];
extern const int driver_eager_count;

#endif
