/*
 * The fault tests' case groups.  The processes run with COLLX_TIMEOUT=3 and
 * COLLX_CONNECT_TIMEOUT=1 (set by faults.c); role 1 receives (or listens),
 * role 2 sends (or connects), the leader injects the fault and judges.
 */
#ifndef COLLX_TESTS_FAULTS_H
#define COLLX_TESTS_FAULTS_H

#include "../harness/harness.h"

#define TIMEOUT_S 3         /* COLLX_TIMEOUT of the processes */
#define CONNECT_TIMEOUT_S 1 /* COLLX_CONNECT_TIMEOUT of the processes */

static inline int is_sender(void) { return hx_role() == 2; }

/* An error expected from a call: a summary entry, or a failure when it succeeded. */
void expect_error(const char *what, ncclResult_t rc);

extern const struct hx_case peer_cases[];
extern const int peer_count;
extern const struct hx_case idle_cases[];
extern const int idle_count;
extern const struct hx_case setup_cases[];
extern const int setup_count;
extern const struct hx_case args_cases[];
extern const int args_count;

#endif
