/*
 * collx-info: what collx would offer NCCL on this host, and its settings.
 *
 *   collx-info            devices as NCCL sees them (getProperties), with
 *                         the interfaces behind each one
 *   collx-info --params   every COLLX_* setting, as a Markdown table
 *   collx-info --version  collx version and the ncclNet ABI it exports
 *   collx-info --topology FILE [--ifaces a,b] [--json]
 *                         the placement plan (merged devices, NUMA nodes,
 *                         CPUs to pin to) and the GPU x NIC matrix for an
 *                         hwloc XML export, with the COLLX_* settings in force
 *   collx-info --gpus [--ifaces a,b] [--json]
 *                         the GPU x NIC distance matrix of this host
 *
 * The tool links the core directly (no dlopen), so it answers with the very
 * code the plugin runs.  Adding an output mode means one entry in the option
 * table, one enum value and one function (see the MODE_* dispatch in main).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/device.h"
#include "topo/topo.h"
#include "tune/tune.h"
#include "util/params.h"
#include "stats_view.h"

/* The ncclNet ABI versions the plugin exports, newest first as NCCL tries
 * them (src/plugin/net_v*.c; tests/unit/test_exports.sh keeps them honest). */
#define COLLX_INFO_NET_ABIS "v12, v11, v10, v9, v8, v7"

enum mode { MODE_DEVICES, MODE_PARAMS, MODE_VERSION, MODE_TOPOLOGY, MODE_PLAN, MODE_GPUS, MODE_STATS, MODE_HELP };

/* Interfaces --ifaces may name, and the topology modes may list. */
#define COLLX_INFO_MAX_NICS 256

/* Everything the command line asked for.  Modifiers that several modes
 * share (a topology file, JSON output) belong here next to `mode`. */
struct options {
  enum mode mode;
  const char *topology; /* --topology FILE */
  const char *ifaces;   /* --ifaces a,b,...: the NICs in use (topology modes) */
  int json;             /* --json: JSON instead of text (topology modes, --stats) */
  const char *stats;    /* --stats: a pid or "all" (NULL: all) */
};

/* ---- Output modes: each returns the process exit code ------------------- */

static void usage(FILE *out) {
  fprintf(out,
          "Usage: collx-info [OPTION]\n"
          "Show the network devices collx offers NCCL on this host.\n"
          "\n"
          "      --params    print every COLLX_* setting as a Markdown table\n"
          "      --version   print the collx version and ncclNet ABI version\n"
          "      --topology FILE\n"
          "                  print the placement plan for the hwloc XML export FILE\n"
          "                  (devices after COLLX_MERGE, NUMA nodes, the CPUs their\n"
          "                  threads are pinned to under COLLX_CPU_AFFINITY) and its\n"
          "                  GPU x NIC matrix; link speeds: COLLX_SPEED_MBPS or %d\n"
          "      --plan      print this host's placement plan, as the plugin makes it\n"
          "                  for the interfaces it selects (COLLX_IFNAME, ...)\n"
          "      --gpus      print the GPU x NIC distance matrix of this host (GPUs\n"
          "                  from the CUDA driver if present, else from hwloc)\n"
          "      --ifaces a,b,...\n"
          "                  with --topology or --gpus: the NICs in use (default:\n"
          "                  every NIC of the file, or the discovered interfaces)\n"
          "      --stats [PID|all]\n"
          "                  live counters of running processes using collx (their\n"
          "                  /dev/shm/collx-PID.stats pages): per connection end and\n"
          "                  stream, bytes, rates, requests in flight, paths lost and\n"
          "                  rejoined, rtt and retransmits; busiest and slowest first\n"
          "      --json      with --topology, --plan, --gpus or --stats: print JSON\n"
          "  -h, --help      print this help\n"
          "\n"
          "Without an option, list the devices as NCCL would see them.  Exit status\n"
          "is 1 when no device qualifies (the reason goes to stderr).\n",
          COLLX_DEFAULT_SPEED_MBPS);
}

static int run_help(const struct options *o) {
  usage(stdout);
  return 0;
}

static int run_version(const struct options *o) {
  printf("collx %s\n", PACKAGE_VERSION);
  printf("ncclNet ABI: %s\n", COLLX_INFO_NET_ABIS);
  return 0;
}

static int run_params(const struct options *o) {
  collx_params_print_markdown(stdout);
  return 0;
}

/* "HOST|CUDA" from NCCL_PTR_* bits. */
static const char *ptr_support_str(int bits, char *buf, size_t len) {
  static const struct { int bit; const char *name; } names[] = {
      {NCCL_PTR_HOST, "HOST"}, {NCCL_PTR_CUDA, "CUDA"}, {NCCL_PTR_DMABUF, "DMABUF"}};
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (bits & names[i].bit)
      snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "|" : "", names[i].name);
  if (!buf[0]) snprintf(buf, len, "none");
  return buf;
}

/* Why there is no device, from discovery (which caches its answer). */
static const char *no_device_reason(void) {
  struct collx_device *devs;
  int n;
  const char *why = NULL;
  if (collx_devices_discover(&devs, &n, &why) != 0) return "interface discovery failed";
  return why ? why : "no device qualifies";
}

/* The discovered device behind NCCL device `dev`, matched by index and
 * name, or NULL if the plugin's list does not line up with discovery. */
static const struct collx_device *device_behind(int dev, const char *name) {
  struct collx_device *devs;
  int n;
  if (collx_devices_discover(&devs, &n, NULL) != 0 || dev >= n) return NULL;
  return strcmp(devs[dev].name, name) == 0 ? &devs[dev] : NULL;
}

/* Where a member's speed came from, as discovery decided it. */
static const char *speed_source(const struct collx_netif *m) {
  if (m->speed_from_sysfs) return "sysfs";
  return collx_param_int(COLLX_P_SPEED_MBPS) > 0 ? "COLLX_SPEED_MBPS" : "default";
}

static void print_members(const struct collx_device *d) {
  for (int i = 0; i < d->nmembers; i++) {
    const struct collx_netif *m = &d->members[i];
    char addr[128];
    printf("      interface %s: %s, %d Mbps (%s)%s%s\n", m->ifname,
           collx_addr_str((const struct sockaddr *)&m->addr, addr, sizeof addr), m->speed_mbps,
           speed_source(m), m->pci_path ? ", pci " : "",
           m->pci_path ? m->pci_path : "");
  }
}

static void print_device_header(void) {
  printf("%-3s %-16s %11s %5s %-10s %8s %8s %11s %s\n", "dev", "name", "speed(Mbps)",
         "port", "ptrSupport", "maxComms", "maxRecvs", "latency(us)", "guid");
}

static void print_device(int dev, const struct collx_props *p) {
  char ptr[32];
  printf("%-3d %-16s %11d %5d %-10s %8d %8d %11.1f 0x%016llx\n", dev, p->name ? p->name : "?",
         p->speed_mbps, p->port, ptr_support_str(p->ptr_support, ptr, sizeof ptr), p->max_comms,
         p->max_recvs, (double)p->latency_us, (unsigned long long)p->guid);
  printf("      pciPath: %s\n", p->pci_path ? p->pci_path : "(none)");
  /* ncclNet v12 railId / planeId (COLLX_RAIL_ID, COLLX_PLANE_ID), when known. */
  if (p->rail_id >= 0 || p->plane_id >= 0)
    printf("      rail: %d, plane: %d (-1: unknown)\n", p->rail_id, p->plane_id);
  const struct collx_device *d = p->name ? device_behind(dev, p->name) : NULL;
  if (d) print_members(d);
}

static int run_devices(const struct options *o) {
  int n = 0;
  if (collx_init(NULL) != ncclSuccess) {
    fprintf(stderr, "collx-info: init failed: %s\n", no_device_reason());
    return 1;
  }
  if (collx_devices(&n) != ncclSuccess) {
    fprintf(stderr, "collx-info: listing devices failed\n");
    return 1;
  }
  if (n == 0) {
    fprintf(stderr, "collx-info: no device: %s\n", no_device_reason());
    return 1;
  }
  printf("collx %s, ncclNet ABI %s: %d device%s\n", PACKAGE_VERSION, COLLX_INFO_NET_ABIS, n,
         n == 1 ? "" : "s");
  print_device_header();
  int rc = 0;
  for (int dev = 0; dev < n; dev++) {
    struct collx_props p;
    memset(&p, 0, sizeof p);
    if (collx_get_properties(dev, &p) != ncclSuccess) {
      fprintf(stderr, "collx-info: getProperties(%d) failed\n", dev);
      rc = 1;
      continue;
    }
    print_device(dev, &p);
  }
  return rc;
}

/* ---- Topology modes ------------------------------------------------------- */

/* Split "a,b,c" into names; returns the count (at most `max`). */
static int split_ifaces(const char *list, char (*names)[COLLX_TOPO_NAME_LEN], int max) {
  int n = 0;
  for (const char *p = list; *p && n < max;) {
    size_t len = strcspn(p, ",");
    if (len > 0) snprintf(names[n++], COLLX_TOPO_NAME_LEN, "%.*s", (int)len, p);
    p += len + (p[len] == ',');
  }
  return n;
}

/* The NICs in use for a plan of `t`: --ifaces, else every NIC of the file.
 * An XML export records no link speed: COLLX_SPEED_MBPS, else the default
 * the plugin reports for interfaces whose kernel has none. */
static int topology_nics(const struct options *o, const struct collx_topo *t,
                         char (*names)[COLLX_TOPO_NAME_LEN], struct collx_plan_nic *nics) {
  int n = o->ifaces ? split_ifaces(o->ifaces, names, COLLX_INFO_MAX_NICS)
                    : collx_topo_list_nics(t, names, COLLX_INFO_MAX_NICS);
  if (n > COLLX_INFO_MAX_NICS) n = COLLX_INFO_MAX_NICS;
  long speed = collx_param_int(COLLX_P_SPEED_MBPS);
  for (int i = 0; i < n; i++)
    nics[i] = (struct collx_plan_nic){names[i], speed > 0 ? (int)speed : COLLX_DEFAULT_SPEED_MBPS,
                                      NULL};
  return n;
}

/* The tuner's policy as the plugin reads it from the environment; NCCL
 * applies it only where every node of a communicator has one rank. */
static void print_tuner(const struct options *o) {
  struct collx_tune_settings s;
  collx_tune_read_settings(&s);
  if (o->json) {
    printf("{\"enabled\": %s, \"tree_max\": %zu, \"ll_max\": %zu, \"ring_min\": %zu, \"channels\": %d, "
           "\"channels_max\": %zu}",
           s.enabled ? "true" : "false", s.tree_max, s.ll_max, s.ring_min, s.channels, s.channels_max);
    return;
  }
  char policy[256];
  collx_tune_describe(&s, policy, sizeof policy);
  printf("\ntuner     %s%s\n", s.enabled ? "one rank per node: " : "", policy);
}

/* The matrix and the tuner after the plan (text), or all three in one JSON
 * object. */
static void print_plan_and_matrix(const struct options *o, const struct collx_plan *p,
                                  const struct collx_gpu_matrix *m) {
  if (!o->json) {
    collx_plan_print_text(stdout, p);
    printf("\nGPU x NIC\n");
    collx_gpu_matrix_print_text(stdout, m);
    print_tuner(o);
    return;
  }
  printf("{\"plan\": ");
  collx_plan_print_json(stdout, p);
  printf(", \"gpu_nic\": ");
  collx_gpu_matrix_print_json(stdout, m);
  printf(", \"tuner\": ");
  print_tuner(o);
  printf("}\n");
}

static int run_topology(const struct options *o) {
  static char names[COLLX_INFO_MAX_NICS][COLLX_TOPO_NAME_LEN];
  static struct collx_plan_nic nics[COLLX_INFO_MAX_NICS];
  char why[512];
  struct collx_topo *t = collx_topo_load(o->topology, why, sizeof why);
  if (!t) {
    fprintf(stderr, "collx-info: %s\n", why);
    return 1;
  }
  int n = topology_nics(o, t, names, nics), rc = 1;
  struct collx_plan_settings s;
  collx_plan_settings_from_env(&s);
  struct collx_plan *p = n > 0 ? collx_plan_make(t, nics, n, NULL, &s) : NULL;
  struct collx_gpu_matrix m;
  if (n == 0)
    fprintf(stderr, "collx-info: %s has no network device (name some with --ifaces)\n", o->topology);
  else if (!p || collx_gpu_matrix_make(t, p->nics, p->nnics, &m) != 0)
    fprintf(stderr, "collx-info: out of memory planning %s\n", o->topology);
  else {
    print_plan_and_matrix(o, p, &m);
    collx_gpu_matrix_free(&m);
    rc = 0;
  }
  collx_plan_free(p);
  collx_topo_destroy(t);
  return rc;
}

/* The plan the plugin itself makes on this host: init discovers the
 * interfaces and hands them to the planner. */
static int run_plan(const struct options *o) {
  if (collx_init(NULL) != ncclSuccess) {
    fprintf(stderr, "collx-info: no device qualifies, so there is nothing to place\n");
    return 1;
  }
  const struct collx_plan *p = collx_topo_current_plan();
  struct collx_gpu_matrix m;
  if (!p) {
    fprintf(stderr, "collx-info: this host's topology could not be loaded: threads and buffers are not placed\n");
    return 1;
  }
  if (collx_gpu_matrix_make(p->topo, p->nics, p->nnics, &m) != 0) {
    fprintf(stderr, "collx-info: out of memory\n");
    return 1;
  }
  print_plan_and_matrix(o, p, &m);
  if (!o->json && collx_settings()->progress == COLLX_PROGRESS_CALLER)
    printf("\nprogress  no progress threads: the caller of isend/irecv/test does the socket I/O\n"
           "          (COLLX_PROGRESS=%s); the thread CPUs above apply with COLLX_PROGRESS=threads\n",
           collx_settings()->progress_setting);
  collx_gpu_matrix_free(&m);
  return 0;
}

/* This host's NICs: --ifaces, else every interface discovery chose. */
static int host_nics(const struct options *o, const struct collx_topo *t,
                     struct collx_nic_info *nics) {
  static char names[COLLX_INFO_MAX_NICS][COLLX_TOPO_NAME_LEN];
  struct collx_device *devs;
  int n = 0, ndev = 0;
  if (o->ifaces) {
    int k = split_ifaces(o->ifaces, names, COLLX_INFO_MAX_NICS);
    for (int i = 0; i < k; i++) n += collx_topo_nic_info(t, names[i], NULL, &nics[n]) == 0;
    return n;
  }
  if (collx_devices_discover(&devs, &ndev, NULL) != 0) return -1;
  for (int d = 0; d < ndev; d++)
    for (int i = 0; i < devs[d].nmembers && n < COLLX_INFO_MAX_NICS; i++)
      n += collx_topo_nic_info(t, devs[d].members[i].ifname, devs[d].members[i].pci_path,
                               &nics[n]) == 0;
  return n;
}

static int run_gpus(const struct options *o) {
  static struct collx_nic_info nics[COLLX_INFO_MAX_NICS];
  const struct collx_topo *t = collx_topo_process();
  if (!t) {
    fprintf(stderr, "collx-info: cannot load this host's topology\n");
    return 1;
  }
  int n = host_nics(o, t, nics), rc = 1;
  struct collx_gpu_matrix m;
  if (n < 0)
    fprintf(stderr, "collx-info: cannot list network interfaces\n");
  else if (collx_gpu_matrix_make(t, nics, n, &m) != 0)
    fprintf(stderr, "collx-info: out of memory\n");
  else {
    if (o->json) collx_gpu_matrix_print_json(stdout, &m);
    else collx_gpu_matrix_print_text(stdout, &m);
    collx_gpu_matrix_free(&m);
    rc = 0;
  }
  for (int i = 0; i < n; i++) collx_nic_info_clear(&nics[i]);
  collx_topo_teardown();
  return rc;
}

static int run_stats(const struct options *o) { return collx_info_stats(o->stats, o->json); }

/* ---- Command line --------------------------------------------------------- */

/* Long options; `val` is what getopt_long returns, handled in parse_args. */
enum { OPT_PARAMS = 256, OPT_VERSION, OPT_TOPOLOGY, OPT_PLAN, OPT_GPUS, OPT_IFACES, OPT_JSON, OPT_STATS };

static const struct option long_opts[] = {
    {"params", no_argument, NULL, OPT_PARAMS},
    {"version", no_argument, NULL, OPT_VERSION},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"plan", no_argument, NULL, OPT_PLAN},
    {"gpus", no_argument, NULL, OPT_GPUS},
    {"ifaces", required_argument, NULL, OPT_IFACES},
    {"json", no_argument, NULL, OPT_JSON},
    {"stats", no_argument, NULL, OPT_STATS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Each mode option selects one mode; a second one is a conflict, not an
 * override, so `--topology FILE --plan` cannot silently print this host's
 * plan instead of FILE's.  Returns 0, or -1 after naming the conflict. */
static int select_mode(struct options *o, enum mode mode, const char **chosen, const char *opt) {
  if (*chosen) {
    if (!strcmp(*chosen, opt))
      fprintf(stderr, "collx-info: %s given twice\n", opt);
    else
      fprintf(stderr, "collx-info: %s and %s are different modes: give one of them\n", *chosen, opt);
    usage(stderr);
    return -1;
  }
  *chosen = opt;
  o->mode = mode;
  return 0;
}

/* Returns 0, or -1 after printing the usage error. */
static int parse_args(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof *o);
  o->mode = MODE_DEVICES;
  const char *chosen = NULL; /* the mode option seen so far */
  int c, rc = 0;
  while (rc == 0 && (c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
    switch (c) {
      case OPT_PARAMS: rc = select_mode(o, MODE_PARAMS, &chosen, "--params"); break;
      case OPT_VERSION: rc = select_mode(o, MODE_VERSION, &chosen, "--version"); break;
      case OPT_TOPOLOGY:
        rc = select_mode(o, MODE_TOPOLOGY, &chosen, "--topology");
        o->topology = optarg;
        break;
      case OPT_PLAN: rc = select_mode(o, MODE_PLAN, &chosen, "--plan"); break;
      case OPT_GPUS: rc = select_mode(o, MODE_GPUS, &chosen, "--gpus"); break;
      case OPT_IFACES: o->ifaces = optarg; break;
      case OPT_JSON: o->json = 1; break;
      case OPT_STATS: rc = select_mode(o, MODE_STATS, &chosen, "--stats"); break;
      case 'h': rc = select_mode(o, MODE_HELP, &chosen, "--help"); break;
      default: usage(stderr); return -1;  /* getopt already named the option */
    }
  }
  if (rc != 0) return -1;
  if (o->mode == MODE_STATS && optind < argc) o->stats = argv[optind++]; /* --stats PID */
  if (optind < argc) {
    fprintf(stderr, "collx-info: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return -1;
  }
  if ((o->ifaces && o->mode != MODE_TOPOLOGY && o->mode != MODE_GPUS) ||
      (o->json && o->mode != MODE_TOPOLOGY && o->mode != MODE_GPUS && o->mode != MODE_PLAN &&
       o->mode != MODE_STATS)) {
    fprintf(stderr, "collx-info: --ifaces goes with --topology or --gpus, --json with --topology, --plan, --gpus or --stats\n");
    usage(stderr);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  static int (*const run_mode[])(const struct options *) = {
      [MODE_DEVICES] = run_devices,
      [MODE_PARAMS] = run_params,
      [MODE_VERSION] = run_version,
      [MODE_TOPOLOGY] = run_topology,
      [MODE_PLAN] = run_plan,
      [MODE_GPUS] = run_gpus,
      [MODE_STATS] = run_stats,
      [MODE_HELP] = run_help,
  };
  struct options o;
  if (parse_args(argc, argv, &o) != 0) return 2;
  return run_mode[o.mode](&o);
}
