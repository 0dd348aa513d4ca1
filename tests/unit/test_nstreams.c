/* The stream count COLLX_NSTREAMS=0 picks, and the launcher variables that
 * say how many ranks share the node's cores. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "util/launcher.h"
#include "../common/check.h"

static void expect_streams(int mbps, int cores, int ranks, int want) {
  int got = collx_streams_default(mbps, cores, ranks);
  CHECK(got == want, "%d Mbps, %d cores, %d ranks: %d streams, expected %d", mbps, cores, ranks, got, want);
}

static void expect_hinted(int base, int peers, int flows, int want) {
  int got = collx_streams_hinted(base, peers, flows);
  CHECK(got == want, "base %d, hints %d peers x %d flows: %d streams, expected %d", base, peers, flows,
        got, want);
}

/* setNetAttr's hints (ncclNet v11+): the measured shapes keep the default,
 * many concurrent flows share the streams of the measured shapes. */
static void check_hinted(void) {
  expect_hinted(4, -1, -1, 4);  /* no hints */
  expect_hinted(4, 8, -1, 4);   /* half a hint */
  expect_hinted(4, 0, 4, 4);
  expect_hinted(4, 2, 4, 4);    /* 2 ranks, ring/tree hint, 4 channels (measured) */
  expect_hinted(3, 4, 4, 3);    /* 4 ranks (measured) */
  expect_hinted(4, 6, 4, 4);    /* the largest collective hint NCCL gives, 4 channels */
  expect_hinted(4, 8, 4, 4);    /* 32 flows: still the measured budget */
  expect_hinted(4, 16, 4, 2);   /* 64 flows: half */
  expect_hinted(4, 64, 2, 1);   /* all-to-all over 64 peers */
  expect_hinted(8, 512, 64, 1); /* never below one */
  expect_hinted(3, 12, 4, 2);   /* 48 flows: 3 * 32 / 48 */
  expect_hinted(0, 1, 1, 1);    /* a bad base still gives a stream */
  /* Hints never raise the count. */
  expect_hinted(2, 1, 1, 2);
}

static const char *const vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                   "SLURM_NTASKS_PER_NODE"};

static void clear_vars(void) {
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void expect_ranks(const char *var, const char *value, int want, const char *want_from) {
  clear_vars();
  if (var) setenv(var, value, 1);
  const char *from = "unset";
  int got = collx_launcher_local_ranks(&from);
  CHECK(got == want, "%s=%s: %d ranks, expected %d", var ? var : "(none)", value ? value : "", got, want);
  if (want_from)
    CHECK(from && !strcmp(from, want_from), "%s=%s: read from %s, expected %s", var, value, from ? from : "NULL",
          want_from);
  else
    CHECK(from == NULL, "%s=%s: claims to have read %s", var ? var : "(none)", value ? value : "", from);
}

/* Open comms: the measured shapes keep the count, hundreds get one each. */
static void check_for_comms(void) {
  int cases[][3] = {{4, 0, 4}, {4, 8, 4}, {4, 32, 4}, {4, 33, 3}, {4, 64, 2}, {4, 127, 1}, {4, 128, 1},
                    {4, 1000, 1}, {3, 40, 2}, {8, 512, 1}, {1, 5, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = collx_streams_for_comms(cases[i][0], cases[i][1]);
    CHECK(got == cases[i][2], "base %d with %d comms open: %d streams, expected %d", cases[i][0], cases[i][1],
          got, cases[i][2]);
  }
}

/* The progress pool: two threads per CPU of the NIC, 2 to 32, never fewer
 * than the streams of one connection. */
static void check_pool(void) {
  int cases[][4] = {{16, 1, 4, 32}, {16, 2, 4, 32}, {16, 4, 3, 32}, {8, 8, 2, 16}, {2, 1, 2, 4},
                    {128, 1, 8, 32}, {128, 8, 4, 32}, {4, 4, 4, 8}, {2, 1, 8, 8}, {1, 1, 1, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = collx_pool_default(cases[i][0], cases[i][1], cases[i][2]);
    CHECK(got == cases[i][3], "%d CPUs, %d ranks, %d streams: %d threads, expected %d", cases[i][0],
          cases[i][1], cases[i][2], got, cases[i][3]);
  }
}

int main(void) {
  check_for_comms();
  check_pool();
  /* The measured host: 400 Gb/s loopback, 16 cores (bench/NOTES.md 4, 17). */
  expect_streams(400000, 16, 1, 4);
  expect_streams(400000, 16, 2, 4);
  expect_streams(400000, 16, 4, 3);
  check_hinted();
  expect_streams(400000, 16, 8, 2);
  expect_streams(400000, 16, 16, 2); /* never below two */
  expect_streams(400000, 16, 0, 4);  /* nonsense counts as one rank */
  /* A large node: 8 ranks on 128 cores keep one stream per 100 Gb/s. */
  expect_streams(400000, 128, 8, 4);
  expect_streams(800000, 128, 1, 8);
  expect_streams(1600000, 128, 1, 8); /* at most eight */
  expect_streams(10000, 2, 1, 2);
  expect_streams(200000, 8, 2, 2);

  expect_ranks(NULL, NULL, 1, NULL);
  expect_ranks("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 4, "OMPI_COMM_WORLD_LOCAL_SIZE");
  expect_ranks("LOCAL_WORLD_SIZE", "8", 8, "LOCAL_WORLD_SIZE");
  expect_ranks("MPI_LOCALNRANKS", "2", 2, "MPI_LOCALNRANKS");
  expect_ranks("SLURM_NTASKS_PER_NODE", "4(x2)", 4, "SLURM_NTASKS_PER_NODE");
  expect_ranks("OMPI_COMM_WORLD_LOCAL_SIZE", "0", 1, NULL);
  expect_ranks("OMPI_COMM_WORLD_LOCAL_SIZE", "four", 1, NULL);
  expect_ranks("OMPI_COMM_WORLD_LOCAL_SIZE", "4x", 1, NULL);
  expect_ranks("OMPI_COMM_WORLD_LOCAL_SIZE", "-3", 1, NULL);
  /* The first variable of the list that is set wins. */
  clear_vars();
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "6", 1);
  CHECK(collx_launcher_local_ranks(NULL) == 2, "LOCAL_WORLD_SIZE should win over OMPI_COMM_WORLD_LOCAL_SIZE");
  clear_vars();

  if (failures) printf("%d check(s) failed\n", failures);
  else printf("PASS: stream counts and launcher rank counts\n");
  return failures ? 1 : 0;
}
