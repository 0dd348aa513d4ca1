/* collx-perf: Command line and main. */
#include "perf.h"

/* ========================================================================
 * Command line
 * ======================================================================== */

static void usage(FILE *f) {
  fprintf(f,
"Usage:\n"
"  collx-perf --listen [options]          server: wait for one client\n"
"  collx-perf HOST [options]              client: connect to the server on HOST\n"
"  collx-perf --self [options]            server and client on this host, one command\n"
"  collx-perf --ranks N [options]         ring all-reduce over N local processes (no GPU)\n"
"  collx-perf --comms K[,K...] [options]  K send/receive pairs in one process, all at once\n"
"\n"
"Bandwidth / latency (the client's options decide the test; the server only\n"
"needs --listen and, if they differ from the defaults, --port/--dev/--plugin):\n"
"  --test bw|lat        bandwidth sweep (default) or ping-pong latency\n"
"  -s, --size SIZE      one message size (K, M, G suffixes: 512K, 4M)\n"
"  --min SIZE --max SIZE  sweep bounds, doubling (bw: 8 .. 4M; lat: 8)\n"
"  -d, --depth N        bw: messages in flight per direction, 1..%d (default 8)\n"
"  -b, --bidir          bw: both directions at once; the sum is reported too\n"
"  -n, --iters N        iterations per size (default: time based, see -t)\n"
"  -t, --time SEC       seconds per size and transport (default: 12 s shared by all\n"
"                       sizes and transports, 0.2 .. 2 s each; probing comes on top)\n"
"  --compare            after the plugin run, the same sizes over plain TCP (one\n"
"                       socket per direction, TCP_NODELAY), with the ratio\n"
"  --baseline tcp       same as --compare\n"
"  --check              bw: verify the content and order of every received message\n"
"  --in-order           bw: complete requests in the order they were posted, testing\n"
"                       only the oldest of each direction (as NCCL's proxy does), so\n"
"                       that one late message holds back those behind it\n"
"  --call-waits         count, for each isend/irecv/test over 10 ms, whether the\n"
"                       thread waited in the plugin (gave up the processor) or\n"
"                       was only preempted (a getrusage before each call), and\n"
"                       the most processor time any of them used; likewise for\n"
"                       each close over 10 ms\n"
"  -p, --port P         bootstrap TCP port (default %d; --self: any free port)\n"
"\n"
"Ring all-reduce (--ranks N, 2..%d): float32 sum, sizes 1K .. 64M unless\n"
"  -s/--min/--max; -d: slices in flight each way (default 8); --slice SIZE: slice\n"
"  size (default 512K); -n / -t as above.  Exit status 1 if any element is wrong.\n"
"  --netns A,B,...      rank i runs in network namespace i (as `ip netns` names\n"
"                       them; root): ranks on separate hosts of a test bed\n"
"                       (tests/netbed/netbed.sh); COLLX_IFNAME is then not forced\n"
"\n"
"Many comms (--comms K[,K...], each K 1..%d, one fresh process per K): K pairs of\n"
"  a send and a receive comm connected on loopback in one process (listen comms\n"
"  closed once accepted, as NCCL does), every pair with -d messages of -s bytes\n"
"  in flight (default 4 x 64K) for -t seconds (default 2) or -n messages, all\n"
"  driven by one thread, every byte checked; then K plain TCP socket pairs move\n"
"  the same messages (one epoll thread, -d messages in flight per pair).  One\n"
"  line per K: messages, collx GB/s, threads the plugin added (and how many it\n"
"  named cx-*), descriptors and KiB of resident memory per comm (growth while\n"
"  open / 2K), TCP GB/s and descriptors per socket, the ratio; then the\n"
"  plugin's threads by name.  The progress mode is COLLX_PROGRESS's, as for NCCL.\n"
"\n"
"Common:\n"
"  --dev N              plugin device (default 0); choose interfaces with\n"
"                       COLLX_IFNAME as usual (set to lo for --ranks, --self and a\n"
"                       client of localhost when neither it nor NCCL_SOCKET_IFNAME is set)\n"
"  --plugin PATH        plugin to load (default: $COLLX_PLUGIN, then ../lib/, .libs/,\n"
"                       ../.libs/ next to this program, then the loader path)\n"
"  --timeout SEC        give up when a wait makes no progress for SEC s (default 60;\n"
"                       0: never)\n"
"  -v, --verbose        plugin INFO messages and which plugin was loaded (-vv: TRACE)\n"
"  -h, --help           this text\n"
"  -V, --version        the plugin's name and file\n"
"\n"
"Examples:\n"
"  collx-perf --self --compare -s 512K -d 8 --bidir\n"
"  collx-perf --self --compare --test lat -s 8\n"
"  collx-perf --ranks 4\n"
"  COLLX_PROGRESS=threads collx-perf --comms 1,16,64,256\n",
          MAX_DEPTH, DEFAULT_PORT, MAX_RANKS, MAX_PAIRS);
}

static void bad_arg(const char *opt, const char *val) {
  fprintf(stderr, "collx-perf: invalid value for %s: '%s' (see --help)\n", opt, val);
  exit(2);
}

static void two_modes(void) {
  fprintf(stderr, "collx-perf: choose one of --listen, HOST, --self, --ranks N, --comms K\n");
  exit(2);
}

/* --netns NS0,NS1,...: one namespace name per rank, as `ip netns` names them. */
static void parse_netns(const char *arg) {
  free(o.netns_list);
  o.netns_list = strdup(arg);
  o.nnetns = 0;
  if (!o.netns_list) die("out of memory");
  for (char *save = NULL, *name = strtok_r(o.netns_list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    if (o.nnetns == MAX_RANKS || !*name || strchr(name, '/')) bad_arg("--netns (NAME,NAME,...: one per rank)", arg);
    o.netns[o.nnetns++] = name;
  }
  if (!o.nnetns) bad_arg("--netns (NAME,NAME,...: one per rank)", arg);
}

/* --comms K,K,...: pair counts, one run each. */
static void parse_comms(const char *arg) {
  char *list = strdup(arg);
  if (!list) die("out of memory");
  o.ncomms = 0;
  for (char *save = NULL, *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
    long v;
    if (o.ncomms == MAX_COMMS_LIST || parse_long(k, 1, MAX_PAIRS, &v)) bad_arg("--comms (K,K,...: 1..4096, at most 16)", arg);
    o.comms[o.ncomms++] = (int)v;
  }
  free(list);
  if (!o.ncomms) bad_arg("--comms (K,K,...: 1..4096, at most 16)", arg);
}

/* --comms: one message size, a few in flight; the baseline is always run and
 * every byte always checked, so --compare and --check are accepted as no-ops. */
static void check_comms_args(int size_set, int depth_set, int test_set) {
  if (test_set || o.bidir || o.min_set || o.max_set || o.nnetns) {
    fprintf(stderr, "collx-perf: --comms takes -s SIZE, -d, -t, -n: --test, --bidir, --min, --max and --netns do not apply\n");
    exit(2);
  }
  if (!size_set) o.min_size = o.max_size = 64 << 10;
  if (!depth_set) o.depth = 4;
}

static void parse_args(int argc, char **argv) {
  enum { O_LISTEN = 256, O_SELF, O_RANKS, O_TEST, O_MIN, O_MAX, O_COMPARE, O_BASELINE, O_DEV,
         O_PLUGIN, O_TIMEOUT, O_CHECK, O_SLICE, O_NETNS, O_COMMS, O_IN_ORDER, O_CALL_WAITS };
  static const struct option lo[] = {
      {"listen", no_argument, 0, O_LISTEN},       {"self", no_argument, 0, O_SELF},
      {"ranks", required_argument, 0, O_RANKS},   {"test", required_argument, 0, O_TEST},
      {"size", required_argument, 0, 's'},        {"min", required_argument, 0, O_MIN},
      {"max", required_argument, 0, O_MAX},       {"depth", required_argument, 0, 'd'},
      {"bidir", no_argument, 0, 'b'},             {"iters", required_argument, 0, 'n'},
      {"time", required_argument, 0, 't'},        {"compare", no_argument, 0, O_COMPARE},
      {"baseline", required_argument, 0, O_BASELINE}, {"dev", required_argument, 0, O_DEV},
      {"plugin", required_argument, 0, O_PLUGIN}, {"timeout", required_argument, 0, O_TIMEOUT},
      {"check", no_argument, 0, O_CHECK},         {"in-order", no_argument, 0, O_IN_ORDER},         {"slice", required_argument, 0, O_SLICE},
      {"netns", required_argument, 0, O_NETNS},   {"comms", required_argument, 0, O_COMMS},
      {"call-waits", no_argument, 0, O_CALL_WAITS},
      {"port", required_argument, 0, 'p'},        {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},              {"version", no_argument, 0, 'V'},
      {0, 0, 0, 0}};
  int size_set = 0, depth_set = 0, test_set = 0;
  long v;
  size_t sz;
  for (;;) {
    int c = getopt_long(argc, argv, "s:d:bn:t:p:vhV", lo, NULL);
    if (c == -1) break;
    switch (c) {
    case O_LISTEN: if (o.mode) two_modes(); o.mode = MODE_SERVER; break;
    case O_SELF: if (o.mode) two_modes(); o.mode = MODE_SELF; break;
    case O_RANKS:
      if (o.mode) two_modes();
      if (parse_long(optarg, 2, MAX_RANKS, &v)) bad_arg("--ranks (2..64)", optarg);
      o.mode = MODE_RANKS;
      o.nranks = (int)v;
      break;
    case O_TEST:
      if (!strcmp(optarg, "bw")) o.test = TEST_BW;
      else if (!strcmp(optarg, "lat")) o.test = TEST_LAT;
      else bad_arg("--test (bw or lat)", optarg);
      test_set = 1;
      break;
    case 's':
      if (parse_size(optarg, &sz) || sz < 1 || sz > MAX_MSG_SIZE) bad_arg("--size (1 .. 1G)", optarg);
      o.min_size = o.max_size = sz;
      size_set = 1;
      break;
    case O_MIN:
      if (parse_size(optarg, &sz) || sz < 1 || sz > MAX_MSG_SIZE) bad_arg("--min (1 .. 1G)", optarg);
      o.min_size = sz;
      o.min_set = 1;
      break;
    case O_MAX:
      if (parse_size(optarg, &sz) || sz < 1 || sz > MAX_MSG_SIZE) bad_arg("--max (1 .. 1G)", optarg);
      o.max_size = sz;
      o.max_set = 1;
      break;
    case 'd':
      if (parse_long(optarg, 1, MAX_DEPTH, &v)) bad_arg("--depth (1..32)", optarg);
      o.depth = (int)v;
      depth_set = 1;
      break;
    case 'b': o.bidir = 1; break;
    case 'n':
      if (parse_long(optarg, 1, LONG_MAX, &v)) bad_arg("--iters", optarg);
      o.iters = (uint64_t)v;
      break;
    case 't':
      if (parse_double(optarg, 0.01, 3600, &o.seconds)) bad_arg("--time (0.01 .. 3600)", optarg);
      break;
    case O_COMPARE: o.compare = 1; break;
    case O_BASELINE:
      if (strcmp(optarg, "tcp")) bad_arg("--baseline (only 'tcp')", optarg);
      o.compare = 1;
      break;
    case O_DEV:
      if (parse_long(optarg, 0, 1 << 20, &v)) bad_arg("--dev", optarg);
      o.dev = (int)v;
      break;
    case O_PLUGIN: o.plugin = optarg; break;
    case O_TIMEOUT:
      if (parse_double(optarg, 0, 1e6, &o.timeout)) bad_arg("--timeout", optarg);
      break;
    case O_CHECK: o.check = 1; break;
    case O_IN_ORDER: o.in_order = 1; break;
    case O_CALL_WAITS: o.call_waits = 1; break;
    case O_SLICE:
      if (parse_size(optarg, &sz) || sz < 64 || sz > MAX_MSG_SIZE) bad_arg("--slice (64 .. 1G)", optarg);
      o.slice = sz & ~(size_t)3;
      break;
    case O_NETNS: parse_netns(optarg); break;
    case O_COMMS:
      if (o.mode) two_modes();
      parse_comms(optarg);
      o.mode = MODE_COMMS;
      break;
    case 'p':
      if (parse_long(optarg, 1, 65535, &v)) bad_arg("--port", optarg);
      o.port = (int)v;
      o.port_set = 1;
      break;
    case 'v': o.verbose++; break;
    case 'h': usage(stdout); exit(0);
    case 'V': o.version = 1; break;
    default: usage(stderr); exit(2);
    }
  }
  if (optind < argc) {
    if (o.mode || optind + 1 < argc) {
      fprintf(stderr, "collx-perf: unexpected argument '%s' (see --help)\n", argv[optind + (o.mode ? 0 : 1)]);
      exit(2);
    }
    o.mode = MODE_CLIENT;
    o.host = argv[optind];
  }
  if (o.version) return;
  if (!o.mode) {
    usage(stderr);
    exit(2);
  }
  if (o.mode == MODE_COMMS) {
    check_comms_args(size_set, depth_set, test_set);
  } else if (o.mode == MODE_RANKS) {
    if (o.compare || test_set || o.bidir || o.check) {
      fprintf(stderr, "collx-perf: --ranks runs the all-reduce demo: --test, --bidir, --compare and --check do not apply\n");
      exit(2);
    }
    if (!size_set && !o.min_set) o.min_size = 1 << 10;
    if (!size_set && !o.max_set) o.max_size = 64 << 20;
    if (o.nnetns && o.nnetns != o.nranks) {
      fprintf(stderr, "collx-perf: --netns names %d namespaces for %d ranks: give one per rank\n", o.nnetns,
              o.nranks);
      exit(2);
    }
    if (o.min_size < (size_t)(4 * o.nranks)) {
      fprintf(stderr, "collx-perf: --ranks %d needs sizes of at least %d bytes (one float per rank)\n",
              o.nranks, 4 * o.nranks);
      exit(2);
    }
  } else {
    if (o.nnetns) {
      fprintf(stderr, "collx-perf: --netns goes with --ranks (a client or server runs where it is started)\n");
      exit(2);
    }
    if (o.test == TEST_LAT && (o.bidir || depth_set)) {
      fprintf(stderr, "collx-perf: --test lat is a ping-pong with one message in flight: no --bidir or --depth\n");
      exit(2);
    }
    if (!size_set && !o.min_set) o.min_size = 8;
    if (!size_set && !o.max_set) o.max_size = o.test == TEST_BW ? (4 << 20) : o.min_set ? o.min_size : 8;
    if (o.test == TEST_LAT && !size_set && o.min_set && !o.max_set) o.max_size = o.min_size;
    if (o.test == TEST_LAT && !size_set && !o.min_set && o.max_set) o.min_size = 8;
  }
  if (o.min_size > o.max_size) {
    fprintf(stderr, "collx-perf: --min is larger than --max\n");
    exit(2);
  }
}

static int is_local_host(const char *h) {
  return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, "::1") ||
         !strcmp(h, "ip6-localhost");
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  load_plugin();
  if (o.version) {
    printf("collx-perf %s: plugin table \"%s\" (%s) from %s\n", PERF_VERSION, net.name,
           hx_net_symbol(HX_NET_DEFAULT_VERSION), g_plugin_path);
    return 0;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  switch (o.mode) {
  case MODE_RANKS:
    return ranks_main();
  case MODE_COMMS:
    return comms_main();
  case MODE_SERVER: {
    int lfd = tcp_listen(AF_INET6, 0, o.port);
    if (lfd < 0) lfd = tcp_listen(AF_INET, 0, o.port);
    if (lfd < 0) die("cannot listen on port %d: %s", o.port, strerror(errno));
    printf("collx-perf: waiting for a client on port %d%s\n", o.port,
           o.timeout > 0 ? " (--timeout applies)" : "");
    g_role = "server";
    return server_main(lfd, 0);
  }
  case MODE_CLIENT:
    if (is_local_host(o.host)) force_loopback("the server is on this host", 0);
    return client_main(o.host, o.port, 0);
  case MODE_SELF: {
    force_loopback("--self runs both sides on this host", 0);
    int lfd = tcp_listen(AF_INET, 1, o.port_set ? o.port : 0);
    if (lfd < 0) die("cannot listen on 127.0.0.1 port %d: %s", o.port_set ? o.port : 0, strerror(errno));
    int port = sock_port(lfd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
      became_child("server");
      if (getppid() == 1) _exit(1);
      int rc = server_main(lfd, 1);
      fflush(stdout);
      _exit(rc);
    }
    close(lfd);
    g_children[0] = pid;
    g_nchildren = 1;
    return client_main("127.0.0.1", port, pid);
  }
  default:
    return 2;
  }
}
