/*
 * Cases both the conformance driver and the fault tests run: messages
 * larger than the posted receive, a 33rd outstanding request, stray clients
 * on the listening port, and close with requests in flight followed by
 * dlclose.  Roles: 1 the receiver (listener), 2 the sender (connector).
 */
#ifndef COLLX_TESTS_COMMON_CASES_H
#define COLLX_TESTS_COMMON_CASES_H

#include "../harness/harness.h"

extern const struct hx_case misuse_cases[];
extern const int misuse_count;
extern const struct hx_case stray_cases[];
extern const int stray_count;

#endif
