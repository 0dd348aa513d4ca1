/* collx-perf: The plugin: loaded through the harness's ncclNet loader, its logger, device and connections. */
#include "perf.h"

/* ========================================================================
 * Plugin loading and logger
 * ======================================================================== */

static void plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                          const char *fmt, ...) {
  const char *lv;
  switch (level) {
  case NCCL_LOG_WARN: lv = "WARN"; break;
  case NCCL_LOG_ABORT: lv = "ABORT"; break;
  case NCCL_LOG_INFO: lv = "INFO"; if (o.verbose < 1) return; break;
  case NCCL_LOG_TRACE: lv = "TRACE"; if (o.verbose < 2) return; break;
  default: return;
  }
  char buf[1200];
  int n = role_prefix(buf, sizeof buf);
  if (o.verbose >= 2 && file)
    n += snprintf(buf + n, sizeof buf - (size_t)n, ": plugin %s %s:%d ", lv, file, line);
  else
    n += snprintf(buf + n, sizeof buf - (size_t)n, ": plugin %s ", lv);
  va_list ap;
  va_start(ap, fmt);
  if (n < (int)sizeof buf) vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  size_t len = strnlen(buf, sizeof buf - 2);
  while (len && buf[len - 1] == '\n') len--;
  buf[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, buf, len); /* one write: lines from threads stay whole */
  (void)w;
}

/* dlopen one candidate; 1 on success, 0 when the file is not there, dies on
 * a file that exists but is not a usable plugin. */
static int try_plugin(const char *path, int must_exist) {
  if (strchr(path, '/') && access(path, F_OK) != 0) {
    if (must_exist) die("plugin %s: %s", path, strerror(errno));
    if (o.verbose) note("plugin candidate %s: not there", path);
    return 0;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (!strchr(path, '/') && !must_exist) {
      if (o.verbose) note("plugin candidate %s: %s", path, dlerror());
      return 0;
    }
    die("cannot load plugin %s: %s", path, dlerror());
  }
  char err[512];
  if (hx_net_bind(&net, h, HX_NET_DEFAULT_VERSION, err, sizeof err) != 0)
    die("%s: %s: not a v%d NCCL net plugin", path, err, HX_NET_DEFAULT_VERSION);
  if (!net.name) die("%s: %s.name is NULL", path, hx_net_symbol(HX_NET_DEFAULT_VERSION));
  /* Report the file the loader really mapped. */
  Dl_info info;
  const char *file = dladdr(net.table, &info) && info.dli_fname ? info.dli_fname : path;
  if (!realpath(file, g_plugin_path)) snprintf(g_plugin_path, sizeof g_plugin_path, "%s", file);
  return 1;
}

void load_plugin(void) {
  if (o.plugin) {
    try_plugin(o.plugin, 1);
  } else if (getenv("COLLX_PLUGIN") && *getenv("COLLX_PLUGIN")) {
    try_plugin(getenv("COLLX_PLUGIN"), 1);
  } else {
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int found = 0;
    if (n > 0) {
      exe[n] = 0;
      char *slash = strrchr(exe, '/');
      if (slash) *slash = 0;
      /* installed layout, libtool build tree (tool next to .libs/, or the
       * real binary inside .libs/ behind a wrapper script) */
      const char *rel[] = {"../lib/", ".libs/", "../.libs/", ""};
      for (size_t i = 0; i < sizeof rel / sizeof rel[0] && !found; i++) {
        snprintf(cand, sizeof cand, "%s/%s%s", exe, rel[i], PLUGIN_FILE);
        found = try_plugin(cand, 0);
      }
    }
    if (!found && !try_plugin(PLUGIN_FILE, 0))
      die("cannot find %s: give --plugin PATH or set COLLX_PLUGIN (tried next to %s and the "
          "loader path)", PLUGIN_FILE, n > 0 ? exe : "the executable");
  }
  if (o.verbose) note("loaded plugin \"%s\" from %s", net.name, g_plugin_path);
}

/* COLLX_IFNAME=lo when both peers are on this host and the user chose no
 * interface: loopback is the only interface the two sides surely share. */
void force_loopback(const char *why, int quiet) {
  if (getenv("COLLX_IFNAME") || getenv("NCCL_SOCKET_IFNAME")) return;
  setenv("COLLX_IFNAME", "lo", 1);
  if (!quiet) printf("collx-perf: COLLX_IFNAME and NCCL_SOCKET_IFNAME unset; %s: set COLLX_IFNAME=lo\n", why);
}

void plugin_start(int dev, struct devinfo *di) {
  set_phase("initialising the plugin");
  NETCALL("init", hx_net_init(&net, plugin_logger));
  int nd = 0;
  NETCALL("devices", hx_net_devices(&net, &nd));
  if (nd <= 0)
    die("the plugin offers no network device (COLLX_IFNAME=%s NCCL_SOCKET_IFNAME=%s)",
        getenv("COLLX_IFNAME") ? getenv("COLLX_IFNAME") : "(unset)",
        getenv("NCCL_SOCKET_IFNAME") ? getenv("NCCL_SOCKET_IFNAME") : "(unset)");
  if (dev < 0 || dev >= nd) die("--dev %d: the plugin offers %d device(s), 0..%d", dev, nd, nd - 1);
  struct hx_props p;
  NETCALL("getProperties", hx_net_getProperties(&net, dev, &p, 0));
  if (!(p.ptrSupport & NCCL_PTR_HOST))
    die("device %d (%s) cannot use host memory (ptrSupport 0x%x)", dev, p.name ? p.name : "?",
        p.ptrSupport);
  snprintf(di->name, sizeof di->name, "%s", p.name ? p.name : "?");
  di->speed = p.speed;
  if (o.verbose)
    note("device %d of %d: %s, %d Mbps, pci %s, maxComms %d, maxRecvs %d, latency %.1f us", dev, nd,
         di->name, p.speed, p.pciPath ? p.pciPath : "none", p.maxComms, p.maxRecvs,
         (double)p.latency);
}

/* Drive connect and accept until both comms exist.  Neither call blocks, and
 * both sides do the same, so interleaving them cannot deadlock. */
void plugin_connect_pair(int dev, void *lcomm, void *peer_handle, void **scomm,
                                void **rcomm, const char *peer) {
  set_phase("connecting to %s through the plugin", peer);
  ncclNetDeviceHandle_v8_t *sdev = NULL, *rdev = NULL;
  uint64_t dl = deadline_in();
  *scomm = *rcomm = NULL;
  for (;;) {
    beat();
    if (!*scomm) NETCALL("connect", hx_net_connect(&net, dev, peer_handle, scomm, &sdev));
    if (!*rcomm) NETCALL("accept", hx_net_accept(&net, lcomm, rcomm, &rdev));
    if (*scomm && *rcomm) break;
    if (now_ns() > dl)
      die("no plugin connection with %s within %.0f s (%s still returns no comm)", peer, o.timeout,
          !*scomm ? "connect" : "accept");
    usleep(50);
  }
}

/* Deregister both buffers and close the three comms of a peer or a rank. */
void plugin_close(void *scomm, void *rcomm, void *lcomm, void *smh, void *rmh) {
  NETCALL("deregMr", hx_net_deregMr(&net, scomm, smh));
  NETCALL("deregMr", hx_net_deregMr(&net, rcomm, rmh));
  NETCALL("closeSend", hx_net_closeSend(&net, scomm));
  NETCALL("closeRecv", hx_net_closeRecv(&net, rcomm));
  NETCALL("closeListen", hx_net_closeListen(&net, lcomm));
}
