/*
 * Interface selection with NCCL_SOCKET_IFNAME's syntax, so that a user can
 * move one setting between NCCL's socket transport and collx unchanged.
 *
 * The spec is parsed in place on every call (no copies, no allocation): it is
 * short, and selection runs once per process during discovery.
 */
#include "ifmatch.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

/* A slice of the spec: one entry, without whitespace or port suffix. */
struct span {
  const char *p;
  size_t n;
};

static const char *skip_space(const char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return s;
}

/* Trim an entry of n bytes at p: whitespace around it, then a ":port"
 * suffix (NCCL accepts "eth0:1234" and ignores the port for matching), then
 * whitespace that stood before the colon.  Works on lengths, not end
 * pointers, so the bounds stay visibly non-negative. */
static struct span trim_entry(const char *p, size_t n) {
  while (n > 0 && isspace((unsigned char)*p)) {
    p++;
    n--;
  }
  const char *colon = memchr(p, ':', n);
  if (colon) n = (size_t)(colon - p);
  while (n > 0 && isspace((unsigned char)p[n - 1])) n--;
  return (struct span){p, n};
}

static int entry_matches(struct span ent, const char *ifname, int exact) {
  if (exact) return strlen(ifname) == ent.n && memcmp(ifname, ent.p, ent.n) == 0;
  return strncmp(ifname, ent.p, ent.n) == 0;
}

/* Walk the comma list; report whether any non-empty entry matches and
 * whether the list had any non-empty entry at all. */
static int any_entry_matches(const char *list, const char *ifname, int exact, int *nonempty) {
  int hit = 0;
  *nonempty = 0;
  for (const char *b = list;;) {
    size_t n = strcspn(b, ",");
    const char *e = b + n;
    struct span ent = trim_entry(b, n);
    if (ent.n > 0) {
      *nonempty = 1;
      if (entry_matches(ent, ifname, exact)) hit = 1;
    }
    if (*e == '\0') break;
    b = e + 1;
  }
  return hit;
}

int collx_ifmatch(const char *spec, const char *ifname) {
  if (!ifname) return 0;
  if (!spec) return 1;
  const char *s = skip_space(spec);
  int exclude = 0, exact = 0;
  if (*s == '^') {
    exclude = 1;
    s = skip_space(s + 1);
  }
  if (*s == '=') {
    exact = 1;
    s = skip_space(s + 1);
  }
  int nonempty;
  int hit = any_entry_matches(s, ifname, exact, &nonempty);
  /* A spec without any entry ("", "^", " , ") selects nothing in
   * particular, so everything passes -- the same as leaving it unset. */
  if (!nonempty) return 1;
  return exclude ? !hit : hit;
}

/* Interfaces that do not reach other hosts: the loopback, and what
 * container runtimes, CNI plugins and VM hosts create.  A prefix ending
 * in '\0' inside the string means an exact name.  Kept by name because a
 * kernel-level kind would also catch what must stay usable: a pod's own
 * eth0 is a veth, and a VM host's real address often sits on a bridge br0. */
static const struct {
  const char *name;
  int exact;
  const char *why;
} skip_table[] = {
    {"lo", 1, "loopback"},
    {"veth", 0, "container veth"},
    {"docker", 0, "Docker bridge"},
    {"br-", 0, "container network bridge"},
    {"cni", 0, "CNI bridge"},
    {"cbr0", 1, "CNI bridge"},
    {"flannel", 0, "CNI (flannel)"},
    {"cilium", 0, "CNI (cilium)"},
    {"lxc", 0, "container veth (cilium, LXC)"},
    {"cali", 0, "CNI (calico)"},
    {"weave", 0, "CNI (weave)"},
    {"kube-", 0, "Kubernetes service interface"},
    {"virbr", 0, "VM bridge (libvirt)"},
};

const char *collx_if_skip_reason(const char *ifname) {
  if (!ifname) return NULL;
  for (size_t i = 0; i < sizeof skip_table / sizeof skip_table[0]; i++) {
    size_t n = strlen(skip_table[i].name);
    int hit = skip_table[i].exact ? strcmp(ifname, skip_table[i].name) == 0
                                  : strncmp(ifname, skip_table[i].name, n) == 0;
    if (hit) return skip_table[i].why;
  }
  return NULL;
}

int collx_ifspec_names(const char *spec) {
  if (!spec) return 0;
  const char *s = skip_space(spec);
  if (*s == '^') return 0;
  if (*s == '=') s = skip_space(s + 1);
  int nonempty;
  any_entry_matches(s, "", 0, &nonempty);
  return nonempty;
}

int collx_if_wanted(const char *spec, const char *ifname, const char **why) {
  if (why) *why = NULL;
  if (!collx_ifmatch(spec, ifname)) return 0;
  const char *reason = collx_if_skip_reason(ifname);
  if (!reason || collx_ifspec_names(spec)) return 1;
  if (why) *why = reason;
  return 0;
}
