/* The plugin loaded the way NCCL loads it (dlopen RTLD_LOCAL) must still
 * read a full hwloc XML export through hwloc's add-ons: here a file with an
 * XML comment, which hwloc's minimal fallback parser rejects.  The plugin's
 * own log says whether the topology was loaded. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collx/net_abi.h"

static int loaded, refused;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (strstr(msg, "topology: loaded from")) loaded = 1;
  if (strstr(msg, "cannot load the topology")) refused = 1;
  if (getenv("VERBOSE")) printf("%s\n", msg);
}

/* Copy a shared topology, with a comment after the XML declaration. */
static int write_commented(const char *src, const char *dst) {
  FILE *in = fopen(src, "r"), *out = fopen(dst, "w");
  char line[4096];
  int first = 1;
  if (!in || !out) return -1;
  while (fgets(line, sizeof line, in)) {
    fputs(line, out);
    if (first) fputs("<!-- collx test: hwloc's full XML reader must be in use -->\n", out);
    first = 0;
  }
  fclose(in);
  return fclose(out);
}

int main(void) {
  const char *dir = getenv("COLLX_TOPO_DIR");
  const char *srcdir = getenv("srcdir");
  char src[1024], dst[] = "/tmp/collx-rtld-XXXXXX";
  if (dir) snprintf(src, sizeof src, "%s/24em64t-2n6c2t-pci.xml", dir);
  else snprintf(src, sizeof src, "%s/tests/topo/xml/24em64t-2n6c2t-pci.xml", srcdir ? srcdir : ".");
  int fd = mkstemp(dst);
  if (fd < 0 || write_commented(src, dst) != 0) {
    if (fd >= 0) remove(dst);
    printf("FAIL: cannot copy the topology %s (it ships in tests/topo/xml)\n", src);
    return 1;
  }
  setenv("COLLX_TOPO_XML", dst, 1);
  setenv("COLLX_IFNAME", "=lo", 1);
  void *h = dlopen("./.libs/libnccl-net-collx.so", RTLD_NOW | RTLD_LOCAL);
  ncclNet_v8_t *net = h ? dlsym(h, "ncclNetPlugin_v8") : NULL;
  if (!net) {
    printf("FAIL: cannot load the plugin: %s\n", dlerror());
    return 1;
  }
  ncclResult_t res = net->init(logger);
  remove(dst);
  int ok = res == ncclSuccess && loaded && !refused;
  printf("%s: XML with a comment through a plugin dlopened RTLD_LOCAL: %s\n", ok ? "PASS" : "FAIL",
         loaded ? "loaded" : refused ? "refused by hwloc" : "no topology message");
  printf("%d passed, %d failed\n", ok, !ok);
  return ok ? 0 : 1;
}
