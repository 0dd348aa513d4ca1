/*
 * Writes the seed corpus of each fuzz target: a few valid records and their
 * near misses, in the input layout each target documents.
 *   gen_seeds DIR   ->  DIR/handle/..., DIR/wire_hello/..., ...
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "transport/tcp/handle.h"
#include "transport/tcp/wire.h"

static const char *g_dir;

static void put(const char *target, const char *name, const void *a, size_t alen, const void *b, size_t blen) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_dir, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/%s", g_dir, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  if (mkdir(g_dir, 0755) != 0 && errno != EEXIST) {
    perror(g_dir);
    return 1;
  }
  const uint64_t secret = 0x0123456789abcdefull;

  /* handle: 128 bytes */
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
  a4->sin_family = AF_INET;
  a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a4->sin_port = htons(5000);
  struct collx_handle h;
  collx_handle_encode(&h, &ss, secret);
  put("handle", "v4", &h, sizeof h, NULL, 0);
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
  a6->sin6_family = AF_INET6;
  a6->sin6_addr = in6addr_loopback;
  a6->sin6_port = htons(6000);
  a6->sin6_scope_id = 3;
  collx_handle_encode(&h, &ss, secret);
  put("handle", "v6", &h, sizeof h, NULL, 0);
  h.port = 0;
  put("handle", "v6-port0", &h, sizeof h, NULL, 0);
  memset(&h, 0, sizeof h);
  put("handle", "zero", &h, sizeof h, NULL, 0);

  /* wire_hello: hello + the listener's secret */
  struct wire_hello he = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .kind = WIRE_HELLO_CTRL,
                          .nstreams = 2, .secret = secret, .conn_id = 42};
  put("wire_hello", "ctrl", &he, sizeof he, &secret, sizeof secret);
  he.kind = WIRE_HELLO_DATA;
  he.index = 1;
  put("wire_hello", "data", &he, sizeof he, &secret, sizeof secret);
  uint64_t other = secret ^ 1;
  put("wire_hello", "wrong-secret", &he, sizeof he, &other, sizeof other);

  /* wire_welcome: max_streams byte + welcome */
  struct wire_welcome w;
  memset(&w, 0, sizeof w);
  w.magic = WIRE_MAGIC;
  w.version = WIRE_VERSION;
  w.naddrs = 1;
  w.nstreams = 2;
  w.addrs[0].family = AF_INET;
  w.addrs[0].port = 5001;
  uint8_t ms = 16;
  put("wire_welcome", "one-address", &ms, 1, &w, sizeof w);
  w.naddrs = COLLX_MAX_MEMBERS;
  w.nstreams = 16;
  for (int i = 0; i < COLLX_MAX_MEMBERS; i++) {
    w.addrs[i].family = i % 2 ? AF_INET6 : AF_INET;
    w.addrs[i].port = (uint16_t)(5000 + i);
  }
  put("wire_welcome", "all-addresses", &ms, 1, &w, sizeof w);

  /* wire_ctrl: to_sender byte + record */
  struct wire_ctrl m;
  memset(&m, 0, sizeof m);
  m.magic = WIRE_MAGIC;
  m.type = WIRE_CTS;
  m.n = 1;
  m.seq = 7;
  m.e[0].tag = 3;
  m.e[0].size = 4096;
  uint8_t ts = 1;
  put("wire_ctrl", "cts-1", &ts, 1, &m, sizeof m);
  m.n = COLLX_MAX_RECVS;
  put("wire_ctrl", "cts-8", &ts, 1, &m, sizeof m);
  memset(&m, 0, sizeof m);
  m.magic = WIRE_MAGIC;
  m.type = WIRE_HEARTBEAT;
  uint8_t tr = 0;
  put("wire_ctrl", "heartbeat", &tr, 1, &m, sizeof m);

  /* wire_chunk: capacity + header */
  uint64_t cap = 1 << 20;
  struct wire_chunk p = {.magic = WIRE_MAGIC, .idx = 0, .seq = 5, .total = 1 << 20, .offset = 1 << 19,
                         .len = 1 << 19};
  put("wire_chunk", "last-half", &cap, sizeof cap, &p, sizeof p);
  p.offset = 0;
  p.len = 0;
  p.total = 0;
  put("wire_chunk", "empty", &cap, sizeof cap, &p, sizeof p);
  p.flags = WIRE_CHUNK_TRUNCATED;
  p.total = 5000;
  uint64_t small = 1000;
  put("wire_chunk", "truncated", &small, sizeof small, &p, sizeof p);
  p = (struct wire_chunk){.magic = WIRE_MAGIC, .flags = WIRE_CHUNK_HEARTBEAT};
  put("wire_chunk", "heartbeat", &cap, sizeof cap, &p, sizeof p);

  /* chunks: size in 256-byte units, then (kind, offset, len) records: a
   * message of 3 chunks of 16 units and a last of 4, out of order */
  static const uint8_t striped[] = {52, 0, 16, 0, 16, 0, 0, 48, 0, 4, 0, 0, 0, 0, 16, 0, 0, 32, 0, 16, 0};
  put("chunks", "striped", striped, sizeof striped, NULL, 0);
  static const uint8_t repeat[] = {32, 0, 0, 0, 16, 0, 0, 0, 0, 16, 0, 2, 0, 0, 0, 0};
  put("chunks", "repeat-then-truncated", repeat, sizeof repeat, NULL, 0);

  /* ifmatch: flag byte, spec, NUL, name */
  static const char *const specs[][2] = {
      {"eth,ib", "eth0"},   {"^docker,lo", "docker0"}, {"=eth0", "eth0"},      {"=eth0", "eth01"},
      {"^=lo", "lo"},       {" eth0:1234 , ib0 ", "ib0"}, {"", "eth0"},        {" , ^", "x"},
      {"^ = eth0", "eth0"}, {"en,,wl", "wlan0"},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    char buf[256], name[32];
    size_t sl = strlen(specs[i][0]), nl = strlen(specs[i][1]);
    buf[0] = 0;
    memcpy(buf + 1, specs[i][0], sl);
    buf[1 + sl] = 0;
    memcpy(buf + 2 + sl, specs[i][1], nl);
    snprintf(name, sizeof name, "spec-%zu", i);
    put("ifmatch", name, buf, 2 + sl + nl, NULL, 0);
  }
  return 0;
}
