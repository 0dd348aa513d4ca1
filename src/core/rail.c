/* Rail and plane ids: see rail.h. */
#include "core/rail.h"

#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "util/log.h"

/* Devices the automatic rule may number: real single NICs. */
static int auto_eligible(const struct collx_id_nic *d) {
  return d->pci_path && d->pci_path[0] && d->nmembers == 1;
}

/* Does a come before b: faster first, then by PCI path. */
static int auto_before(const struct collx_id_nic *a, const struct collx_id_nic *b) {
  if (a->speed_mbps != b->speed_mbps) return a->speed_mbps > b->speed_mbps;
  return strcmp(a->pci_path, b->pci_path) < 0;
}

static void assign_auto(const struct collx_id_nic *nics, int n, int *ids) {
  for (int i = 0; i < n; i++) {
    if (!auto_eligible(&nics[i])) continue;
    int before = 0;
    for (int j = 0; j < n; j++)
      if (j != i && auto_eligible(&nics[j]) && auto_before(&nics[j], &nics[i])) before++;
    ids[i] = before;
  }
}

/* One "NAME=ID" entry; returns 0, or -1 when malformed. */
static int assign_entry(const struct collx_id_nic *nics, int n, const char *entry, size_t len,
                        int *ids) {
  const char *eq = memchr(entry, '=', len);
  if (!eq || eq == entry) return -1;
  size_t nlen = (size_t)(eq - entry);
  char num[16];
  size_t vlen = len - nlen - 1;
  if (vlen == 0 || vlen >= sizeof num) return -1;
  memcpy(num, eq + 1, vlen);
  num[vlen] = '\0';
  char *end = NULL;
  long v = strtol(num, &end, 10);
  if (*end || v < 0 || v > 32767) return -1;
  int found = 0;
  for (int i = 0; i < n; i++)
    if (strlen(nics[i].name) == nlen && !strncmp(nics[i].name, entry, nlen)) {
      ids[i] = (int)v;
      found = 1;
    }
  if (!found)
    COLLX_INFO(COLLX_LOG_ENV, "id for %.*s: no such device here; ignored", (int)nlen, entry);
  return 0;
}

int collx_assign_ids(const struct collx_id_nic *nics, int n, const char *setting, const char *var,
                     int allow_auto, int *ids) {
  for (int i = 0; i < n; i++) ids[i] = COLLX_ID_UNDEF;
  if (!setting || !*setting || !strcmp(setting, "none")) return 0;
  if (!strcmp(setting, "auto")) {
    if (allow_auto) {
      assign_auto(nics, n, ids);
      return 0;
    }
    COLLX_WARN("%s=auto: there is no automatic rule for this id; it stays undefined", var);
    return 1;
  }
  int bad = 0;
  for (const char *p = setting; *p;) {
    size_t len = strcspn(p, ",");
    if (len && assign_entry(nics, n, p, len, ids) != 0) {
      COLLX_WARN("%s: entry \"%.*s\" is not NAME=ID with ID 0-32767; ignored", var, (int)len, p);
      bad++;
    }
    p += len;
    if (*p == ',') p++;
  }
  return bad;
}
