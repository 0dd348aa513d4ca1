/* libFuzzer target: collx_handle_decode (src/transport/tcp/handle.c).
 * Input: the 128 bytes of a handle (zero-padded). */
#include <netinet/in.h>

#include "transport/tcp/handle.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size heap copy, so that ASan sees any read past the handle. */
  struct collx_handle *h = malloc(sizeof *h);
  if (!h) return 0;
  fuzz_take(h, sizeof *h, &data, &size);
  struct collx_handle in = *h;
  struct sockaddr_storage ss;
  memset(&ss, 0xA5, sizeof ss);
  uint64_t secret = 0x1234;
  const char *why = NULL;
  int rc = collx_handle_decode(h, &ss, &secret, &why);
  FUZZ_CHECK(memcmp(h, &in, sizeof in) == 0, "decode modified the handle");
  int valid = in.magic == COLLX_HANDLE_MAGIC && in.version == COLLX_HANDLE_VERSION && in.port != 0 &&
              (in.family == AF_INET || in.family == AF_INET6);
  FUZZ_CHECK(rc == 0 || rc == -1, "decode returned %d", rc);
  FUZZ_CHECK((rc == 0) == valid, "decode returned %d for magic %#x version %u family %u port %u", rc,
             in.magic, in.version, in.family, in.port);
  if (rc != 0) {
    fuzz_check_why(why);
    free(h);
    return 0;
  }
  FUZZ_CHECK(secret == in.secret, "secret %#llx, handle has %#llx", (unsigned long long)secret,
             (unsigned long long)in.secret);
  FUZZ_CHECK(ss.ss_family == in.family, "family %u, handle has %u", ss.ss_family, in.family);
  if (in.family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    FUZZ_CHECK(ntohs(a->sin_port) == in.port, "port");
    FUZZ_CHECK(memcmp(&a->sin_addr, in.addr, 4) == 0, "IPv4 address");
  } else {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    FUZZ_CHECK(ntohs(a->sin6_port) == in.port, "port");
    FUZZ_CHECK(memcmp(&a->sin6_addr, in.addr, 16) == 0, "IPv6 address");
    FUZZ_CHECK(a->sin6_scope_id == in.scope_id, "scope id");
  }
  /* Round trip: encoding what was decoded gives a handle that decodes to the
   * same address and secret, with a clean connect_state. */
  struct collx_handle h2;
  memset(&h2, 0x5A, sizeof h2);
  collx_handle_encode(&h2, &ss, secret);
  FUZZ_CHECK(h2.connect_state == 0, "encode left connect_state %#llx", (unsigned long long)h2.connect_state);
  struct sockaddr_storage ss2;
  uint64_t secret2 = 0;
  const char *why2 = NULL;
  FUZZ_CHECK(collx_handle_decode(&h2, &ss2, &secret2, &why2) == 0, "re-encoded handle refused: %s",
             why2 ? why2 : "?");
  FUZZ_CHECK(secret2 == secret, "round-trip secret");
  size_t alen = in.family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  FUZZ_CHECK(memcmp(&ss, &ss2, alen) == 0, "round-trip address");
  free(h);
  return 0;
}
