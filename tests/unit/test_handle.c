/* Handle encoding (the TCP transport's, src/transport/tcp/handle.c): round
 * trip for IPv4 and IPv6, rejection of handles that are not collx's
 * (garbage, zeros, wrong version, port 0), and the address packing the
 * handle shares with the WELCOME record. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "transport/tcp/handle.h"
#include "../common/check.h"

static void test_ipv4_round_trip(void) {
  struct sockaddr_storage in = {0}, out;
  struct sockaddr_in *a = (struct sockaddr_in *)&in;
  a->sin_family = AF_INET;
  a->sin_port = htons(40001);
  inet_pton(AF_INET, "10.1.2.3", &a->sin_addr);
  struct collx_handle h;
  collx_handle_encode(&h, &in, 0x1122334455667788ull);
  uint64_t secret = 0;
  const char *why = NULL;
  CHECK(collx_handle_decode(&h, &out, &secret, &why) == 0, "decode failed: %s", why);
  const struct sockaddr_in *b = (const struct sockaddr_in *)&out;
  CHECK(b->sin_family == AF_INET, "family %d", b->sin_family);
  CHECK(ntohs(b->sin_port) == 40001, "port %d", ntohs(b->sin_port));
  CHECK(b->sin_addr.s_addr == a->sin_addr.s_addr, "address differs");
  CHECK(secret == 0x1122334455667788ull, "secret %llx", (unsigned long long)secret);
  CHECK(h.connect_state == 0, "fresh handle carries connect state");
}

static void test_ipv6_round_trip(void) {
  struct sockaddr_storage in = {0}, out;
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)&in;
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(5);
  a->sin6_scope_id = 7;
  inet_pton(AF_INET6, "fe80::1234", &a->sin6_addr);
  struct collx_handle h;
  collx_handle_encode(&h, &in, 42);
  uint64_t secret;
  const char *why = NULL;
  CHECK(collx_handle_decode(&h, &out, &secret, &why) == 0, "decode failed: %s", why);
  const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)&out;
  CHECK(b->sin6_family == AF_INET6 && ntohs(b->sin6_port) == 5 && b->sin6_scope_id == 7,
        "v6 family/port/scope wrong");
  CHECK(memcmp(&b->sin6_addr, &a->sin6_addr, 16) == 0, "v6 address differs");
}

static void test_rejects_bad_handles(void) {
  struct collx_handle h;
  struct sockaddr_storage out;
  uint64_t secret;
  const char *why = NULL;
  memset(&h, 0, sizeof h);
  CHECK(collx_handle_decode(&h, &out, &secret, &why) != 0 && why, "all-zero handle accepted");
  memset(&h, 0xa5, sizeof h);
  CHECK(collx_handle_decode(&h, &out, &secret, &why) != 0, "garbage handle accepted");

  struct sockaddr_storage in = {0};
  ((struct sockaddr_in *)&in)->sin_family = AF_INET;
  ((struct sockaddr_in *)&in)->sin_port = htons(1);
  collx_handle_encode(&h, &in, 1);
  h.version++;
  CHECK(collx_handle_decode(&h, &out, &secret, &why) != 0, "wrong version accepted");
  collx_handle_encode(&h, &in, 1);
  h.port = 0;
  CHECK(collx_handle_decode(&h, &out, &secret, &why) != 0, "port 0 accepted");
  collx_handle_encode(&h, &in, 1);
  h.family = 99;
  CHECK(collx_handle_decode(&h, &out, &secret, &why) != 0, "unknown family accepted");
}

/* The WELCOME carries the listener's addresses in the handle's packing:
 * what one packs, the other unpacks, IPv6 scope included. */
static void test_addr_codec_shared(void) {
  struct sockaddr_storage in = {0}, out;
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)&in;
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(6001);
  a->sin6_scope_id = 3;
  inet_pton(AF_INET6, "fe80::42", &a->sin6_addr);
  uint16_t family, port;
  uint32_t scope;
  uint8_t addr[16];
  tcp_addr_pack(&in, &family, &port, &scope, addr);
  CHECK(family == AF_INET6 && port == 6001 && scope == 3, "packed family/port/scope wrong");
  struct collx_handle h;
  collx_handle_encode(&h, &in, 9);
  CHECK(h.family == family && h.port == port && h.scope_id == scope && !memcmp(h.addr, addr, 16),
        "handle and packing disagree");
  CHECK(tcp_addr_unpack(family, port, scope, addr, &out) == 0, "unpack refused a packed address");
  const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)&out;
  CHECK(b->sin6_family == AF_INET6 && ntohs(b->sin6_port) == 6001 && b->sin6_scope_id == 3 &&
        !memcmp(&b->sin6_addr, &a->sin6_addr, 16), "unpacked address differs");
  CHECK(tcp_addr_unpack(99, port, scope, addr, &out) != 0, "unknown family unpacked");
}

static void test_random_secrets_differ(void) {
  uint64_t a = 0, b = 0;
  CHECK(collx_random64(&a) == 0 && collx_random64(&b) == 0, "getrandom failed");
  CHECK(a != b, "two secrets in a row are equal (%llx)", (unsigned long long)a);
}

int main(void) {
  test_ipv4_round_trip();
  test_ipv6_round_trip();
  test_rejects_bad_handles();
  test_addr_codec_shared();
  test_random_secrets_differ();
  if (failures) printf("%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
