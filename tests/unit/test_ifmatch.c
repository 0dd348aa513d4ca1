/*
 * Unit test of collx_ifmatch: the NCCL_SOCKET_IFNAME selection syntax.
 * Depends on nothing but ifmatch.c, so it can be linked with that file alone.
 * Prints one line per failed check; exits non-zero if any failed.
 */
#include <stdio.h>

#include "util/ifmatch.h"

static int failures;

static void check(const char *spec, const char *ifname, int want, int line) {
  int got = collx_ifmatch(spec, ifname);
  if (got != want) {
    printf("FAIL line %d: collx_ifmatch(%s%s%s, \"%s\") = %d, want %d\n", line,
           spec ? "\"" : "", spec ? spec : "NULL", spec ? "\"" : "", ifname, got, want);
    failures++;
  }
}

#define YES(spec, ifname) check((spec), (ifname), 1, __LINE__)
#define NO(spec, ifname) check((spec), (ifname), 0, __LINE__)

static void test_prefix(void) {
  YES("eth", "eth0");
  YES("eth", "eth");
  YES("eth", "eth10");
  NO("eth", "et");
  NO("eth", "veth0");  /* prefix, not substring */
  NO("eth", "ib0");
  YES("eth0", "eth0");
  YES("eth0", "eth01"); /* a prefix match is not an exact one */
  NO("eth1", "eth0");
  NO("Eth", "eth0");    /* case matters, as interface names do */
}

static void test_exclude(void) {
  NO("^docker", "docker0");
  NO("^docker", "docker");
  YES("^docker", "eth0");
  YES("^docker", "dock");
  YES("^eth", "veth1");
  NO("^lo,docker", "lo");
  NO("^lo,docker", "docker0");
  YES("^lo,docker", "ens5");
}

static void test_exact(void) {
  YES("=eth0", "eth0");
  NO("=eth0", "eth01");
  NO("=eth0", "eth");
  NO("=eth0", "eth1");
  YES("=lo", "lo");
  NO("=lo", "lo0");
  YES("=eth0,eth1", "eth1");
  NO("=eth0,eth1", "eth10");
}

static void test_exclude_exact(void) {
  NO("^=eth0", "eth0");
  YES("^=eth0", "eth01");
  YES("^=eth0", "eth1");
  YES("^=eth0", "lo");
  NO("^=lo,eth0", "lo");
  NO("^=lo,eth0", "eth0");
  YES("^=lo,eth0", "lo1");
  /* '^' after '=' is part of the name asked for, which no interface has. */
  NO("=^eth0", "eth0");
  NO("=^eth0", "lo");
}

static void test_multiple(void) {
  YES("eth,ib", "eth0");
  YES("eth,ib", "ib1");
  NO("eth,ib", "lo");
  YES("ib,eth,ens", "ens5");
  YES("eth,,ib", "ib0");   /* an empty entry in the middle is ignored */
  YES("eth,", "eth0");     /* so is a trailing comma */
  NO("eth,", "lo");
  NO(",eth", "lo");
}

static void test_port_suffix(void) {
  YES("eth0:1234", "eth0");
  YES("eth:1234", "eth3");
  NO("eth0:1234", "eth1");
  YES("=eth0:5000", "eth0");
  NO("=eth0:5000", "eth01");
  NO("^eth0:5000", "eth0");
  YES("^eth0:5000", "ib0");
  YES("eth0:1,ib0:2", "ib0");
  NO("eth0:1,ib0:2", "lo");
  YES(":1234", "anything"); /* an entry that is only a port names nothing */
}

static void test_empty(void) {
  YES("", "eth0");
  YES("", "lo");
  YES(NULL, "eth0");
  YES("^", "eth0");   /* excludes nothing */
  YES("=", "eth0");
  YES("^=", "eth0");
  YES(",", "eth0");
  YES("   ", "eth0");
  NO("eth", "");
  NO("eth", NULL);    /* no interface name: nothing to match */
}

static void test_whitespace(void) {
  YES(" eth", "eth0");
  YES("eth ", "eth0");
  YES(" eth , ib ", "ib0");
  NO(" eth , ib ", "lo");
  YES(" ^docker", "eth0");
  NO(" ^docker", "docker0");
  NO("^ docker", "docker0");
  YES("= eth0", "eth0");
  NO("= eth0", "eth01");
  NO(" ^ = eth0 ", "eth0");
  YES(" ^ = eth0 ", "eth01");
  YES("\teth0\t,\tib0\n", "ib0");
  YES("eth0 :1234", "eth0");
  YES("=eth0 : 1234", "eth0");
}

int main(void) {
  test_prefix();
  test_exclude();
  test_exact();
  test_exclude_exact();
  test_multiple();
  test_port_suffix();
  test_empty();
  test_whitespace();
  if (failures) {
    printf("test_ifmatch: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_ifmatch: all checks passed\n");
  return 0;
}
