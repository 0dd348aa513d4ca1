/* Helpers shared by the files of src/topo/ (not part of the module's API). */
#ifndef COLLX_TOPO_INTERNAL_H
#define COLLX_TOPO_INTERNAL_H

#include <stdio.h>

#include "topo/topo.h"

/* Parse "DDDD:BB:DD.F" (any domain width, as CUDA and NVML differ) into
 * v[0..3].  Returns 0, or -1 when `s` is no PCI address. */
int collx_busid_parse(const char *s, unsigned v[4]);
/* The canonical "0000:04:00.0" spelling of v. */
void collx_busid_format(const unsigned v[4], char *buf, size_t len);
/* The PCI device of address `busid` in the topology, or NULL. */
hwloc_obj_t collx_topo_pcidev(const struct collx_topo *t, const char *busid);

/* The lowest common ancestor of two objects, I/O ones included (hwloc's
 * helper compares depths, which I/O objects do not order). */
hwloc_obj_t collx_topo_lca(hwloc_obj_t a, hwloc_obj_t b);

/* Record a note in the plan (the pure planner's stand-in for logging). */
void collx_plan_note(struct collx_plan *p, int warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The merge policy: owner[i] is the index of the first NIC of i's device. */
void collx_plan_merge(struct collx_plan *p, int *owner);

/* Drop the process topology (bind.c's teardown calls it). */
void collx_topo_process_release(void);

/* Print `s` as a JSON string, quotes included. */
void collx_json_str(FILE *out, const char *s);
/* Print a bitmap as a list ("0-3,8") or as the comma list "0,1,2,3,8". */
void collx_print_list(FILE *out, hwloc_const_bitmap_t b);
void collx_print_commas(FILE *out, hwloc_const_bitmap_t b);

#endif
