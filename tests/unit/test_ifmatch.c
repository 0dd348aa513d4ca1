/*
 * Unit test of collx_ifmatch: the NCCL_SOCKET_IFNAME selection syntax.
 * Depends on nothing but ifmatch.c, so it can be linked with that file alone.
 * Prints one line per failed check; exits non-zero if any failed.
 */
#include <stdio.h>
#include <string.h>

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

/* A host as a Kubernetes node or a VM host shows it: what getifaddrs would
 * list, and which of them the selection keeps under a given spec. */
static const char *const fake_host[] = {
    "lo",      "eth0",        "ens5",    "br0",         "veth1a2b3c", "cni0",
    "cbr0",    "flannel.1",   "cilium_host", "lxc8f1e", "cali12ab",   "weave",
    "docker0", "br-0a1b2c3d", "virbr0",  "kube-ipvs0",  "vethwe-bridge",
};
#define NFAKE (sizeof fake_host / sizeof fake_host[0])

/* The names of fake_host that pass `spec`, comma-joined, in list order. */
static void chosen_of(const char *spec, char *out, size_t len) {
  out[0] = '\0';
  for (size_t i = 0; i < NFAKE; i++) {
    if (!collx_if_wanted(spec, fake_host[i], NULL)) continue;
    size_t used = strlen(out);
    snprintf(out + used, len - used, "%s%s", used ? "," : "", fake_host[i]);
  }
}

static void check_chosen(const char *spec, const char *want, int line) {
  char got[512];
  chosen_of(spec, got, sizeof got);
  if (strcmp(got, want) != 0) {
    printf("FAIL line %d: spec %s%s%s chose \"%s\", want \"%s\"\n", line, spec ? "\"" : "",
           spec ? spec : "NULL", spec ? "\"" : "", got, want);
    failures++;
  }
}
#define CHOSEN(spec, want) check_chosen((spec), (want), __LINE__)

static void test_fake_host(void) {
  /* No spec: only interfaces that reach other hosts; a plain bridge br0
   * (a VM host's address) stays, docker's br-<id> does not. */
  CHOSEN(NULL, "eth0,ens5,br0");
  CHOSEN("", "eth0,ens5,br0");
  /* An exclusion names nothing to use: the skipped stay skipped. */
  CHOSEN("^eth0", "ens5,br0");
  CHOSEN("^=lo", "eth0,ens5,br0");
  /* Named, they are used, by prefix or exactly. */
  CHOSEN("veth", "veth1a2b3c,vethwe-bridge");
  CHOSEN("=cni0", "cni0");
  CHOSEN("=lo", "lo");
  CHOSEN("lo", "lo");
  CHOSEN("eth0,cali", "eth0,cali12ab");
  CHOSEN("br", "br0,br-0a1b2c3d");
  CHOSEN("=docker0,virbr0", "docker0,virbr0");
  /* Each skipped one says why, the others nothing. */
  for (size_t i = 0; i < NFAKE; i++) {
    const char *why = NULL;
    int used = collx_if_wanted(NULL, fake_host[i], &why);
    int plain = !strcmp(fake_host[i], "eth0") || !strcmp(fake_host[i], "ens5") ||
                !strcmp(fake_host[i], "br0");
    if (used != plain || (!used && (!why || !why[0])) || (used && why)) {
      printf("FAIL: %s: used %d, reason %s\n", fake_host[i], used, why ? why : "(none)");
      failures++;
    }
  }
  const char *why = NULL;
  if (collx_if_wanted("eth", "veth0", &why) || why) {
    printf("FAIL: veth0 under spec \"eth\": not matching is no skip reason (got %s)\n",
           why ? why : "none");
    failures++;
  }
  if (!collx_if_skip_reason("veth0") || strcmp(collx_if_skip_reason("lo"), "loopback") ||
      collx_if_skip_reason("lo0") || collx_if_skip_reason("eth0")) {
    printf("FAIL: collx_if_skip_reason classes\n");
    failures++;
  }
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
  test_fake_host();
  if (failures) {
    printf("test_ifmatch: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_ifmatch: all checks passed\n");
  return 0;
}
