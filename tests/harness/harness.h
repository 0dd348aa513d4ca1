/*
 * Everything a case file uses: the case runner, the plugin as a case
 * process drives it, flows of verified messages and the data patterns.
 */
#ifndef COLLX_HARNESS_HARNESS_H
#define COLLX_HARNESS_HARNESS_H

#include "case.h"
#include "drive.h"
#include "flow.h"
#include "net.h"
#include "verify.h"

/* A case table of a group, for the program's list of groups. */
#define HX_GROUP(table) (sizeof(table) / sizeof((table)[0]))

#endif
