/*
 * collx bench: float-sum all-reduce over NCCL, one process per rank.
 *
 * Ranks are set up by MPI (rank 0 makes the ncclUniqueId and broadcasts it),
 * or, when built with -DBENCH_NO_MPI, by the environment (BENCH_RANK,
 * BENCH_NRANKS) and a file that rank 0 writes the id into (BENCH_ID_FILE);
 * run.sh uses that form only where no working MPI is found.
 *
 * Every rank uses the same CUDA device (0 unless -d says otherwise): the
 * benchmark is meant for one GPU shared through MPS, each rank posing as its
 * own host (NCCL_HOSTID, set by run.sh), so that all traffic between ranks
 * goes through the network transport under test.
 *
 * For each size: warm-up, poison the output, barrier, then a timed loop of
 * back-to-back all-reduces; the time is the host wall clock from before the
 * first launch to after the stream has drained, divided by the iterations,
 * and the largest over the ranks is reported.  The process's CPU time
 * (getrusage(RUSAGE_SELF): user + system, every thread of the process: the
 * NCCL proxy thread, the network plugin's threads, the main thread) is taken
 * over the same window and summed over the ranks.  The host waits for the
 * GPU with blocking synchronisation, so the main thread does not spin and
 * the CPU time is the cost of moving the data.  After the loop the output is
 * copied back and every element is compared with the exact expected sum.
 *
 * Usage: allreduce [-b MIN] [-e MAX] [-f FACTOR] [-l LIST] [-w WARMUP]
 *                  [-n ITERS] [-N MINITERS] [-B BYTES] [-d DEV] [-M] [-C] [-h]
 * Sizes take K, M, G suffixes (powers of 1024).  Iterations for a size:
 * clamp(BYTES / size, MINITERS, ITERS).  Exit status: 0 when every element
 * of every size was right, 1 when some were wrong, 2 on an error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <cuda_runtime.h>
#include <nccl.h>
#ifndef BENCH_NO_MPI
#include <mpi.h>
#endif

#define MAX_SIZES 128

static int g_rank = 0;
static int g_nranks = 1;

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */

static void die(const char *what, const char *file, int line, const char *msg)
{
  fprintf(stderr, "allreduce: rank %d: %s failed at %s:%d: %s\n", g_rank, what, file, line,
          msg ? msg : "?");
  fflush(stderr);
  fflush(stdout);
#ifndef BENCH_NO_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Abort(MPI_COMM_WORLD, 2);
#endif
  exit(2);
}

#define CUDA_CHECK(call)                                                   \
  do {                                                                     \
    cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) die(#call, __FILE__, __LINE__, cudaGetErrorString(e_)); \
  } while (0)

static void nccl_die(const char *what, const char *file, int line, ncclResult_t r)
{
  char msg[512];
  const char *last = ncclGetLastError(NULL);
  snprintf(msg, sizeof msg, "%s (%d)%s%s", ncclGetErrorString(r), (int)r,
           (last && *last) ? ": " : "", (last && *last) ? last : "");
  die(what, file, line, msg);
}

#define NCCL_CHECK(call)                                                   \
  do {                                                                     \
    ncclResult_t r_ = (call);                                              \
    if (r_ != ncclSuccess) nccl_die(#call, __FILE__, __LINE__, r_);        \
  } while (0)

#ifndef BENCH_NO_MPI
static void mpi_die(const char *what, const char *file, int line, int code)
{
  char msg[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) len = 0;
  msg[len] = '\0';
  die(what, file, line, len ? msg : "MPI error");
}
#define MPI_CHECK(call)                                                    \
  do {                                                                     \
    int m_ = (call);                                                       \
    if (m_ != MPI_SUCCESS) mpi_die(#call, __FILE__, __LINE__, m_);         \
  } while (0)
#endif

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) die("getrusage", __FILE__, __LINE__, strerror(errno));
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* "8", "64K", "1M", "512MB", "1g": bytes, suffixes are powers of 1024.
 * Returns 0 on a malformed or zero value. */
static size_t parse_size(const char *s)
{
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return 0;
  unsigned long long mult = 1;
  switch (*end) {
  case 'k': case 'K': mult = 1ULL << 10; end++; break;
  case 'm': case 'M': mult = 1ULL << 20; end++; break;
  case 'g': case 'G': mult = 1ULL << 30; end++; break;
  default: break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0') return 0;
  if (v > (unsigned long long)SIZE_MAX / mult) return 0;
  return (size_t)(v * mult);
}

static long parse_long(const char *s, const char *opt)
{
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0) {
    fprintf(stderr, "allreduce: bad value '%s' for %s\n", s, opt);
    exit(2);
  }
  return v;
}

/* The input pattern: small integers, so that every partial sum is exact in
 * float whatever order NCCL adds them in.  pat() spreads over 0..127 with no
 * short period, so a chunk written to the wrong offset is caught. */
static inline uint32_t pat(size_t i)
{
  return ((uint32_t)i * 2654435761u) >> 25;
}
static inline float input_value(int rank, size_t i)
{
  return (float)(rank + 1) + (float)pat(i);
}
static inline float expected_value(int nranks, size_t i)
{
  return (float)(nranks * (nranks + 1) / 2) + (float)nranks * (float)pat(i);
}

/* ------------------------------------------------------------------------ */
/* Rank setup and the few collectives on host values                         */

#ifdef BENCH_NO_MPI
static ncclComm_t g_stat_comm;
static cudaStream_t g_stat_stream;
static double *g_stat_dev; /* 16 doubles */

static int env_int(const char *name, int dflt)
{
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  return (int)parse_long(v, name);
}

static void ranks_init(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  g_rank = env_int("BENCH_RANK", 0);
  g_nranks = env_int("BENCH_NRANKS", 1);
  if (g_nranks < 1 || g_rank >= g_nranks) {
    fprintf(stderr, "allreduce: BENCH_RANK %d / BENCH_NRANKS %d are not a valid pair\n", g_rank,
            g_nranks);
    exit(2);
  }
}

/* Rank 0 writes the id to a temporary name and renames it, so the others
 * never read a half-written file. */
static void share_id(ncclUniqueId *id)
{
  const char *path = getenv("BENCH_ID_FILE");
  if (g_nranks == 1) {
    NCCL_CHECK(ncclGetUniqueId(id));
    return;
  }
  if (!path || !*path) die("BENCH_ID_FILE", __FILE__, __LINE__, "not set (needed without MPI)");
  if (g_rank == 0) {
    char tmp[4096];
    NCCL_CHECK(ncclGetUniqueId(id));
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) die("fopen(id file)", __FILE__, __LINE__, strerror(errno));
    if (fwrite(id, sizeof *id, 1, f) != 1) die("fwrite(id file)", __FILE__, __LINE__, strerror(errno));
    if (fclose(f) != 0) die("fclose(id file)", __FILE__, __LINE__, strerror(errno));
    if (rename(tmp, path) != 0) die("rename(id file)", __FILE__, __LINE__, strerror(errno));
    return;
  }
  double deadline = now_s() + env_int("BENCH_ID_TIMEOUT", 120);
  for (;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) return;
    }
    if (now_s() > deadline) die("waiting for the id file", __FILE__, __LINE__, path);
    usleep(10000);
  }
}

static void stats_setup(ncclComm_t comm)
{
  g_stat_comm = comm;
  CUDA_CHECK(cudaStreamCreateWithFlags(&g_stat_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaMalloc((void **)&g_stat_dev, 16 * sizeof(double)));
}

/* In place over the ranks; max when is_max, else sum.  n <= 16. */
static void reduce_doubles(double *v, int n, int is_max)
{
  CUDA_CHECK(cudaMemcpy(g_stat_dev, v, (size_t)n * sizeof(double), cudaMemcpyHostToDevice));
  NCCL_CHECK(ncclAllReduce(g_stat_dev, g_stat_dev, (size_t)n, ncclFloat64,
                           is_max ? ncclMax : ncclSum, g_stat_comm, g_stat_stream));
  CUDA_CHECK(cudaStreamSynchronize(g_stat_stream));
  CUDA_CHECK(cudaMemcpy(v, g_stat_dev, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
}

static void barrier(void)
{
  double x = 0.0;
  reduce_doubles(&x, 1, 0);
}

static void stats_teardown(void)
{
  CUDA_CHECK(cudaFree(g_stat_dev));
  CUDA_CHECK(cudaStreamDestroy(g_stat_stream));
}

static void ranks_finalize(void) {}
static const char *launch_mode(void) { return "env (no MPI)"; }

#else /* MPI */

static void ranks_init(int *argc, char ***argv)
{
  MPI_CHECK(MPI_Init(argc, argv));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_nranks));
}

static void share_id(ncclUniqueId *id)
{
  if (g_rank == 0) NCCL_CHECK(ncclGetUniqueId(id));
  MPI_CHECK(MPI_Bcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD));
}

static void stats_setup(ncclComm_t comm) { (void)comm; }
static void stats_teardown(void) {}

static void reduce_doubles(double *v, int n, int is_max)
{
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, is_max ? MPI_MAX : MPI_SUM,
                          MPI_COMM_WORLD));
}

static void barrier(void) { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }
static void ranks_finalize(void) { MPI_CHECK(MPI_Finalize()); }
static const char *launch_mode(void) { return "MPI"; }
#endif

/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
  fprintf(f,
          "usage: allreduce [options]\n"
          "  -b MIN      smallest size in bytes (default 8; K/M/G suffixes)\n"
          "  -e MAX      largest size in bytes (default 512M)\n"
          "  -f FACTOR   multiply the size by FACTOR each step (default 2)\n"
          "  -l LIST     explicit comma-separated sizes instead of -b/-e/-f\n"
          "  -w WARMUP   warm-up iterations per size (default 5, at most the timed ones)\n"
          "  -n ITERS    most timed iterations per size (default 200)\n"
          "  -N MINITERS fewest timed iterations per size (default 5)\n"
          "  -B BYTES    per-size budget: iterations = clamp(BYTES/size, MINITERS, ITERS)\n"
          "              (default 2G; 0 = always ITERS)\n"
          "  -d DEV      CUDA device (default 0; every rank uses it)\n"
          "  -M          only check that the ranks can talk (no CUDA, no NCCL) and exit\n"
          "  -C          only check that this process can use the CUDA device and exit\n"
          "  -h          this help\n");
}

static int size_cmp(const void *a, const void *b)
{
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
  size_t minb = 8, maxb = (size_t)512 << 20, budget = (size_t)2 << 30;
  long factor = 2, warmup = 5, maxiters = 200, miniters = 5, dev = 0;
  const char *list = NULL;
  int mpi_only = 0, cuda_only = 0;

  ranks_init(&argc, &argv);

  int opt;
  while ((opt = getopt(argc, argv, "b:e:f:l:w:n:N:B:d:MCh")) != -1) {
    switch (opt) {
    case 'b': minb = parse_size(optarg); if (!minb) goto bad_size; break;
    case 'e': maxb = parse_size(optarg); if (!maxb) goto bad_size; break;
    case 'f': factor = parse_long(optarg, "-f"); break;
    case 'l': list = optarg; break;
    case 'w': warmup = parse_long(optarg, "-w"); break;
    case 'n': maxiters = parse_long(optarg, "-n"); break;
    case 'N': miniters = parse_long(optarg, "-N"); break;
    case 'B':
      if (strcmp(optarg, "0") == 0) budget = 0;
      else if (!(budget = parse_size(optarg))) goto bad_size;
      break;
    case 'd': dev = parse_long(optarg, "-d"); break;
    case 'M': mpi_only = 1; break;
    case 'C': cuda_only = 1; break;
    case 'h': if (g_rank == 0) usage(stdout); ranks_finalize(); return 0;
    default: if (g_rank == 0) usage(stderr); exit(2);
    }
    continue;
  bad_size:
    fprintf(stderr, "allreduce: bad size '%s' for -%c\n", optarg, opt);
    exit(2);
  }
  if (factor < 2) { fprintf(stderr, "allreduce: -f must be at least 2\n"); exit(2); }
  if (maxiters < 1) maxiters = 1;
  if (miniters < 1) miniters = 1;
  if (miniters > maxiters) miniters = maxiters;

  if (mpi_only) {
    double v[2] = {1.0, (double)g_rank};
#ifdef BENCH_NO_MPI
    if (g_nranks > 1) {
      fprintf(stderr, "allreduce: -M needs MPI; this build has none\n");
      exit(2);
    }
#else
    reduce_doubles(v, 2, 0);
    barrier();
#endif
    if (g_rank == 0)
      printf("# rank check: %s, %d ranks answered (expected %d), rank sum %.0f\n", launch_mode(),
             (int)v[0], g_nranks, v[1]);
    int ok = (int)v[0] == g_nranks;
    ranks_finalize();
    return ok ? 0 : 2;
  }

  if (cuda_only) {
    void *p = NULL;
    CUDA_CHECK(cudaSetDevice((int)dev));
    CUDA_CHECK(cudaMalloc(&p, 1 << 20));
    CUDA_CHECK(cudaMemset(p, 0, 1 << 20));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(p));
    printf("# cuda check: rank %d can use device %ld\n", g_rank, dev);
    ranks_finalize();
    return 0;
  }

  /* The sizes to run, multiples of 4 bytes (float), ascending, distinct. */
  size_t sizes[MAX_SIZES];
  int nsizes = 0;
  if (list) {
    char *copy = strdup(list);
    if (!copy) die("strdup", __FILE__, __LINE__, "out of memory");
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      size_t s = parse_size(tok);
      if (!s) { fprintf(stderr, "allreduce: bad size '%s' in -l\n", tok); exit(2); }
      if (nsizes == MAX_SIZES) { fprintf(stderr, "allreduce: too many sizes\n"); exit(2); }
      sizes[nsizes++] = s;
    }
    free(copy);
  } else {
    if (minb > maxb) { fprintf(stderr, "allreduce: -b is larger than -e\n"); exit(2); }
    for (size_t s = minb; s <= maxb && nsizes < MAX_SIZES; s *= (size_t)factor) {
      sizes[nsizes++] = s;
      if (s > SIZE_MAX / (size_t)factor) break;
    }
  }
  for (int i = 0; i < nsizes; i++) {
    sizes[i] &= ~(size_t)3;
    if (sizes[i] == 0) sizes[i] = 4;
  }
  qsort(sizes, (size_t)nsizes, sizeof sizes[0], size_cmp);
  {
    int k = 0;
    for (int i = 0; i < nsizes; i++)
      if (k == 0 || sizes[i] != sizes[k - 1]) sizes[k++] = sizes[i];
    nsizes = k;
  }
  if (nsizes == 0) { fprintf(stderr, "allreduce: no sizes\n"); exit(2); }
  size_t maxbytes = sizes[nsizes - 1];
  size_t maxcount = maxbytes / sizeof(float);

  /* CUDA: the host sleeps while it waits for the GPU (see the top). */
  CUDA_CHECK(cudaSetDevice((int)dev));
  {
    cudaError_t e = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
    if (e != cudaSuccess) {
      if (g_rank == 0)
        fprintf(stderr, "allreduce: warning: cudaSetDeviceFlags(BlockingSync): %s; the host will "
                        "spin while waiting and count that as CPU time\n", cudaGetErrorString(e));
      (void)cudaGetLastError();
    }
  }
  char busid[64] = "?";
  CUDA_CHECK(cudaDeviceGetPCIBusId(busid, (int)sizeof busid, (int)dev));
  int rt_version = 0, drv_version = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&rt_version));
  CUDA_CHECK(cudaDriverGetVersion(&drv_version));

  int nccl_version = 0;
  NCCL_CHECK(ncclGetVersion(&nccl_version));

  float *sendbuf = NULL, *recvbuf = NULL;
  CUDA_CHECK(cudaMalloc((void **)&sendbuf, maxbytes));
  CUDA_CHECK(cudaMalloc((void **)&recvbuf, maxbytes));
  float *host = (float *)malloc(maxbytes);
  if (!host) die("malloc(host buffer)", __FILE__, __LINE__, "out of memory");
  for (size_t i = 0; i < maxcount; i++) host[i] = input_value(g_rank, i);
  CUDA_CHECK(cudaMemcpy(sendbuf, host, maxbytes, cudaMemcpyHostToDevice));

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  share_id(&id);
  ncclComm_t comm;
  double t_init = now_s();
  NCCL_CHECK(ncclCommInitRank(&comm, g_nranks, id, g_rank));
  t_init = now_s() - t_init;
  stats_setup(comm);

  const double n = (double)g_nranks;
  const double busfactor = g_nranks > 1 ? 2.0 * (n - 1.0) / n : 0.0;

  if (g_rank == 0) {
    const char *env_names[] = {"NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_SOCKET_NTHREADS",
                               "NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_IFNAME", "COLLX_IFNAME",
                               "NCCL_ALGO", "NCCL_PROTO", "NCCL_HOSTID", NULL};
    printf("# collx all-reduce benchmark (float, sum, out of place)\n");
    printf("# nranks %d  launch %s  device %ld (%s) shared by all ranks\n", g_nranks,
           launch_mode(), dev, busid);
    printf("# nccl_version %d (%d.%d.%d)  built against nccl.h %d.%d.%d  cuda runtime %d driver %d\n",
           nccl_version, nccl_version / 10000, (nccl_version / 100) % 100, nccl_version % 100,
           NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, rt_version, drv_version);
    printf("# env (rank 0):");
    for (int i = 0; env_names[i]; i++) {
      const char *v = getenv(env_names[i]);
      if (v) printf(" %s=%s", env_names[i], v);
    }
    printf("\n# the network NCCL used is in its NCCL_DEBUG=INFO log: 'via NET/<name>'\n");
    printf("# ncclCommInitRank %.3f s (rank 0)\n", t_init);
    printf("# iterations per size = clamp(%zu / size, %ld, %ld), warm-up min(%ld, iterations)\n",
           budget, miniters, maxiters, warmup);
    printf("# time: host wall clock per iteration over the timed loop, max over ranks;"
           " gpu: the same loop timed with CUDA events, max over ranks\n");
    printf("# algbw = size / time; busbw = algbw * 2(n-1)/n; GB = 1e9 bytes\n");
    printf("# cpu(s/GB) = CPU seconds (getrusage RUSAGE_SELF, user+sys, whole process, summed over"
           " ranks) per GB moved; GB moved = size * 2(n-1)/n * nranks * iterations / 1e9\n");
    printf("# cpu(cores) = the same CPU seconds / wall seconds of the timed loop (cores kept busy,"
           " all ranks together)\n");
    printf("# columns: size_B count iters time_us gpu_us algbw_GBps busbw_GBps cpu_s_per_GB"
           " cpu_cores wrong\n");
    printf("#%13s %12s %6s %11s %11s %12s %12s %11s %10s %8s\n", "size(B)", "count(elts)", "iters",
           "time(us)", "gpu(us)", "algbw(GB/s)", "busbw(GB/s)", "cpu(s/GB)", "cpu(cores)",
           "#wrong");
    fflush(stdout);
  }

  cudaEvent_t ev_start, ev_stop;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev_start, cudaEventBlockingSync));
  CUDA_CHECK(cudaEventCreateWithFlags(&ev_stop, cudaEventBlockingSync));

  double total_wrong = 0.0, sum_busbw = 0.0;
  for (int si = 0; si < nsizes; si++) {
    size_t bytes = sizes[si];
    size_t count = bytes / sizeof(float);
    long iters = maxiters;
    if (budget > 0) {
      size_t want = budget / bytes;
      iters = want > (size_t)maxiters ? maxiters : (long)want;
      if (iters < miniters) iters = miniters;
    }
    long warm = warmup < iters ? warmup : iters;

    for (long it = 0; it < warm; it++)
      NCCL_CHECK(ncclAllReduce(sendbuf, recvbuf, count, ncclFloat, ncclSum, comm, stream));
    /* Poison (all bits set is a NaN) so that an output the timed loop does
     * not write fails the check. */
    CUDA_CHECK(cudaMemsetAsync(recvbuf, 0xff, bytes, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    {
      ncclResult_t ae = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(comm, &ae));
      if (ae != ncclSuccess) nccl_die("warm-up (async error)", __FILE__, __LINE__, ae);
    }
    barrier();

    double c0 = cpu_s();
    double t0 = now_s();
    CUDA_CHECK(cudaEventRecord(ev_start, stream));
    for (long it = 0; it < iters; it++)
      NCCL_CHECK(ncclAllReduce(sendbuf, recvbuf, count, ncclFloat, ncclSum, comm, stream));
    CUDA_CHECK(cudaEventRecord(ev_stop, stream));
    CUDA_CHECK(cudaEventSynchronize(ev_stop));
    double t1 = now_s();
    double c1 = cpu_s();
    {
      ncclResult_t ae = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(comm, &ae));
      if (ae != ncclSuccess) nccl_die("timed loop (async error)", __FILE__, __LINE__, ae);
    }
    float gpu_ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, ev_start, ev_stop));

    /* Check every element of the last result. */
    CUDA_CHECK(cudaMemcpy(host, recvbuf, bytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0, first_bad = 0;
    for (size_t i = 0; i < count; i++) {
      if (host[i] != expected_value(g_nranks, i)) {
        if (wrong == 0) first_bad = i;
        wrong++;
      }
    }
    if (wrong)
      fprintf(stderr, "allreduce: rank %d: size %zu: %zu wrong, first at element %zu: got %g, "
                      "expected %g\n", g_rank, bytes, wrong, first_bad, (double)host[first_bad],
              (double)expected_value(g_nranks, first_bad));

    double mx[2] = {t1 - t0, (double)gpu_ms * 1e-3};
    double sm[2] = {c1 - c0, (double)wrong};
    reduce_doubles(mx, 2, 1);
    reduce_doubles(sm, 2, 0);

    double t_iter = mx[0] / (double)iters;
    double gpu_iter = mx[1] / (double)iters;
    double algbw = t_iter > 0 ? (double)bytes / t_iter / 1e9 : 0.0;
    double busbw = algbw * busfactor;
    double gb_moved = (double)bytes * busfactor * n * (double)iters / 1e9;
    double cpu_per_gb = gb_moved > 0 ? sm[0] / gb_moved : NAN;
    double cpu_cores = mx[0] > 0 ? sm[0] / mx[0] : 0.0;
    total_wrong += sm[1];
    sum_busbw += busbw;
    if (g_rank == 0) {
      printf("%14zu %12zu %6ld %11.2f %11.2f %12.6f %12.6f %11.4f %10.2f %8.0f\n", bytes, count,
             iters, t_iter * 1e6, gpu_iter * 1e6, algbw, busbw, cpu_per_gb, cpu_cores, sm[1]);
      fflush(stdout);
    }
  }

  if (g_rank == 0) {
    printf("# wrong elements, all sizes and ranks: %.0f\n", total_wrong);
    printf("# Avg bus bandwidth    : %.4f GB/s (mean over %d sizes)\n", sum_busbw / nsizes, nsizes);
    printf("# result: %s\n", total_wrong == 0 ? "OK" : "WRONG");
    fflush(stdout);
  }

  CUDA_CHECK(cudaEventDestroy(ev_start));
  CUDA_CHECK(cudaEventDestroy(ev_stop));
  stats_teardown();
  NCCL_CHECK(ncclCommDestroy(comm));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(sendbuf));
  CUDA_CHECK(cudaFree(recvbuf));
  free(host);
  ranks_finalize();
  return total_wrong == 0 ? 0 : 1;
}
