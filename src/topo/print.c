/* Plans, NICs and GPU x NIC matrices as text (people) and JSON (programs). */
#include "topo/topo_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/config.h"

/* ---- Pieces ------------------------------------------------------------------ */

void collx_json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
  fputc('"', out);
}

void collx_print_list(FILE *out, hwloc_const_bitmap_t b) {
  char *s = NULL;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0) return;
  fputs(s, out);
  free(s);
}

/* "0,1,3": the spelling of hwloc-calc --intersect, which the tests compare. */
void collx_print_commas(FILE *out, hwloc_const_bitmap_t b) {
  int first = 1, i;
  hwloc_bitmap_foreach_begin(i, b) {
    fprintf(out, "%s%d", first ? "" : ",", i);
    first = 0;
  }
  hwloc_bitmap_foreach_end();
}

static void print_mask(FILE *out, hwloc_const_bitmap_t b) {
  char *s = NULL;
  if (hwloc_bitmap_asprintf(&s, b) < 0) return;
  fputs(s, out);
  free(s);
}

static void print_bridge(FILE *out, hwloc_obj_t o) {
  if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
    fprintf(out, "host:%04x:[%02x-%02x]", (unsigned)o->attr->bridge.downstream.pci.domain,
            (unsigned)o->attr->bridge.downstream.pci.secondary_bus,
            (unsigned)o->attr->bridge.downstream.pci.subordinate_bus);
    return;
  }
  const struct hwloc_pcidev_attr_s *a = &o->attr->bridge.upstream.pci;
  unsigned v[4] = {a->domain, a->bus, a->dev, a->func};
  char id[16];
  collx_busid_format(v, id, sizeof id);
  fputs(id, out);
}

static const char *affinity_name(const struct collx_plan_settings *s) {
  return s->affinity == COLLX_AFFINITY_OFF ? "off"
         : s->affinity == COLLX_AFFINITY_LIST ? s->cpu_list : "auto";
}

static const char *merge_name(const struct collx_plan_settings *s) {
  return s->merge == COLLX_MERGE_AUTO ? "auto"
         : s->merge == COLLX_MERGE_LIST ? s->merge_groups : "none";
}

/* ---- NICs ----------------------------------------------------------------------- */

/* One line of key=value pairs: what collx-topo-dump prints and the
 * reference test compares with hwloc-calc. */
void collx_nic_info_print_text(FILE *out, const struct collx_nic_info *nic) {
  fprintf(out, "%s found=%d ethernet=%d busid=%s numa=", nic->name, nic->found, nic->ethernet,
          nic->found ? nic->busid : "-");
  collx_print_commas(out, nic->nodeset);
  fputs(" nodeset=", out);
  print_mask(out, nic->nodeset);
  fputs(" cpuset=", out);
  print_mask(out, nic->cpuset);
  fprintf(out, " link_gbps=%.2f width=%d path=%s bridges=", nic->link_gbps, nic->link_width,
          nic->found ? nic->pci_path : "-");
  for (int i = 0; i < nic->nbridges; i++) {
    if (i) fputc(',', out);
    print_bridge(out, nic->bridges[i]);
  }
  fputs(nic->nbridges ? "\n" : "-\n", out);
}

static void member_text(FILE *out, const struct collx_nic_info *nic) {
  fprintf(out, "  member    %s", nic->name);
  if (!nic->found) {
    fputs("  (not in the topology: no locality)\n", out);
    return;
  }
  fprintf(out, "  pci %s  numa ", nic->busid);
  collx_print_commas(out, nic->nodeset);
  fprintf(out, "  link %.2f GB/s", nic->link_gbps);
  if (nic->link_width) fprintf(out, " x%d %s", nic->link_width, nic->link_speed);
  fprintf(out, "  %s\n            via ", nic->ethernet ? "ethernet" : "not ethernet");
  for (int i = 0; i < nic->nbridges; i++) {
    fputs(i ? " > " : "", out);
    print_bridge(out, nic->bridges[i]);
  }
  fputc('\n', out);
}

/* ---- Plans as text ----------------------------------------------------------------- */

static void dev_text(FILE *out, const struct collx_plan *p, int i) {
  const struct collx_plan_dev *d = &p->devs[i];
  fprintf(out, "device %d  %s\n", i, d->name);
  fprintf(out, "  speed     %d Mbps\n", d->speed_mbps);
  fprintf(out, "  pci path  %s\n", d->pci_path[0] ? d->pci_path : "(none)");
  fputs("  numa      ", out);
  if (d->local) collx_print_commas(out, d->nodeset);
  else fputs("(no locality)", out);
  fputs("\n  local     ", out);
  collx_print_list(out, d->cpuset);
  fputs("\n  threads   ", out);
  if (d->npus == 0) fputs("not pinned", out);
  for (int k = 0; k < d->npus; k++) fprintf(out, "%s%d", k ? "," : "", d->pus[k]);
  if (d->npus)
    fprintf(out, "  (device %d of %d on these CPUs)", d->group_rank + 1, d->group_size);
  if (d->fallback) fputs("  [fallback: no local CPU allowed]", out);
  char why[160];
  collx_plan_streams_why(p, d, why, sizeof why);
  fprintf(out, "\n  streams   %d per connection (%s)", d->streams, why);
  collx_plan_threads_why(p, d, why, sizeof why);
  fprintf(out, "\n  progress  %d threads (%s)", d->threads, why);
  size_t eager = collx_eager_size(d->nmembers, why, sizeof why);
  fprintf(out, "\n  eager     up to %zu B per message (%s)\n", eager, why);
  for (int m = 0; m < d->nmembers; m++) member_text(out, &p->nics[d->member[m]]);
}

void collx_plan_print_text(FILE *out, const struct collx_plan *p) {
  fprintf(out, "topology  %s\n", p->topo->source);
  fprintf(out, "settings  affinity %s, merge %s, streams ", affinity_name(&p->settings),
          merge_name(&p->settings));
  if (p->settings.streams) fprintf(out, "%d\n", p->settings.streams);
  else fputs("auto\n", out);
  fputs("allowed   ", out);
  collx_print_list(out, p->allowed);
  fputc('\n', out);
  for (int i = 0; i < p->ndevs; i++) dev_text(out, p, i);
  for (int i = 0; i < p->nnotes; i++)
    fprintf(out, "%s  %s\n", p->notes[i].warn ? "WARN" : "note", p->notes[i].text);
}

/* ---- Plans as JSON --------------------------------------------------------------------- */

static void json_numbers(FILE *out, hwloc_const_bitmap_t b) {
  fputc('[', out);
  if (b) collx_print_commas(out, b);
  fputc(']', out);
}

static void json_kv(FILE *out, const char *key, const char *val, const char *sep) {
  collx_json_str(out, key);
  fputs(": ", out);
  collx_json_str(out, val);
  fputs(sep, out);
}

static void member_json(FILE *out, const struct collx_nic_info *nic, int last) {
  fputs("        {", out);
  json_kv(out, "name", nic->name, ", ");
  fprintf(out, "\"found\": %s, \"ethernet\": %s, ", nic->found ? "true" : "false",
          nic->ethernet ? "true" : "false");
  json_kv(out, "busid", nic->busid, ", ");
  fputs("\"numa\": ", out);
  json_numbers(out, nic->nodeset);
  fputs(", \"cpuset\": \"", out);
  print_mask(out, nic->cpuset);
  fprintf(out, "\", \"link_gbps\": %.3f, \"link_width\": %d, ", nic->link_gbps, nic->link_width);
  json_kv(out, "pci_path", nic->found ? nic->pci_path : "", ", ");
  fputs("\"bridges\": [", out);
  for (int i = 0; i < nic->nbridges; i++) {
    fputs(i ? ", \"" : "\"", out);
    print_bridge(out, nic->bridges[i]);
    fputc('"', out);
  }
  fprintf(out, "]}%s\n", last ? "" : ",");
}

static void dev_json(FILE *out, const struct collx_plan *p, int i) {
  const struct collx_plan_dev *d = &p->devs[i];
  fprintf(out, "    {\"index\": %d, ", i);
  json_kv(out, "name", d->name, ", ");
  fprintf(out, "\"speed_mbps\": %d, ", d->speed_mbps);
  json_kv(out, "pci_path", d->pci_path, ", ");
  fprintf(out, "\"local\": %s, \"numa\": ", d->local ? "true" : "false");
  json_numbers(out, d->local ? d->nodeset : NULL);
  fputs(", \"cpus\": \"", out);
  collx_print_list(out, d->cpuset);
  fputs("\", \"pin_order\": [", out);
  for (int k = 0; k < d->npus; k++) fprintf(out, "%s%d", k ? ", " : "", d->pus[k]);
  fprintf(out, "], \"group\": %d, \"group_rank\": %d, \"group_size\": %d, ", d->group,
          d->group_rank, d->group_size);
  fprintf(out, "\"streams\": %d, \"threads\": %d, \"eager\": %zu, \"fallback\": %s,\n      \"members\": [\n",
          d->streams, d->threads, collx_eager_size(d->nmembers, NULL, 0), d->fallback ? "true" : "false");
  for (int m = 0; m < d->nmembers; m++)
    member_json(out, &p->nics[d->member[m]], m == d->nmembers - 1);
  fprintf(out, "      ]}%s\n", i == p->ndevs - 1 ? "" : ",");
}

void collx_plan_print_json(FILE *out, const struct collx_plan *p) {
  fputs("{\n  ", out);
  json_kv(out, "topology", p->topo->source, ",\n  ");
  fprintf(out, "\"this_system\": %s,\n  \"settings\": {", p->topo->this_system ? "true" : "false");
  json_kv(out, "affinity", affinity_name(&p->settings), ", ");
  json_kv(out, "merge", merge_name(&p->settings), ", ");
  fprintf(out, "\"streams\": %d},\n  \"allowed\": \"", p->settings.streams);
  collx_print_list(out, p->allowed);
  fputs("\",\n  \"devices\": [\n", out);
  for (int i = 0; i < p->ndevs; i++) dev_json(out, p, i);
  fputs("  ],\n  \"notes\": [", out);
  for (int i = 0; i < p->nnotes; i++) {
    fprintf(out, "%s\n    {\"level\": \"%s\", \"text\": ", i ? "," : "",
            p->notes[i].warn ? "WARN" : "INFO");
    collx_json_str(out, p->notes[i].text);
    fputc('}', out);
  }
  fputs(p->nnotes ? "\n  ]\n}\n" : "]\n}\n", out);
}

/* ---- GPU x NIC matrices ------------------------------------------------------------------- */

void collx_gpu_matrix_print_text(FILE *out, const struct collx_gpu_matrix *m) {
  if (m->ngpus == 0) {
    fputs("no GPU found\n", out);
    return;
  }
  fprintf(out, "%-24s", "GPU \\ NIC");
  for (int j = 0; j < m->nnics; j++) fprintf(out, " %-12s", m->nic_names[j]);
  fputc('\n', out);
  for (int i = 0; i < m->ngpus; i++) {
    char label[64];
    snprintf(label, sizeof label, "%s %s", m->gpus[i].name, m->gpus[i].busid);
    fprintf(out, "%-24s", label);
    for (int j = 0; j < m->nnics; j++)
      fprintf(out, " %-12s", collx_dist_name(m->dist[i * m->nnics + j]));
    fputc('\n', out);
  }
  fputs("switch: one PCIe switch; host-bridge: one host bridge; numa: one NUMA node or socket; "
        "cross-socket: beyond\n", out);
}

void collx_gpu_matrix_print_json(FILE *out, const struct collx_gpu_matrix *m) {
  fputs("{\"gpus\": [", out);
  for (int i = 0; i < m->ngpus; i++) {
    fputs(i ? ", {" : "{", out);
    json_kv(out, "name", m->gpus[i].name, ", ");
    json_kv(out, "busid", m->gpus[i].busid, ", ");
    fprintf(out, "\"cuda_ordinal\": %d}", m->gpus[i].ordinal);
  }
  fputs("],\n \"nics\": [", out);
  for (int j = 0; j < m->nnics; j++) {
    fputs(j ? ", " : "", out);
    collx_json_str(out, m->nic_names[j]);
  }
  fputs("],\n \"distance\": [", out);
  for (int i = 0; i < m->ngpus; i++) {
    fputs(i ? ",\n   [" : "\n   [", out);
    for (int j = 0; j < m->nnics; j++)
      fprintf(out, "%s\"%s\"", j ? ", " : "", collx_dist_name(m->dist[i * m->nnics + j]));
    fputc(']', out);
  }
  fputs("]}\n", out);
}
