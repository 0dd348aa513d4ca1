/*
 * Per-communicator contexts (ncclNet v11 and later): init makes one for
 * each NCCL communicator, listen and connect name it, setNetAttr gives it
 * NCCL's hints, finalize ends it.  A context owns the listen, send and
 * receive comms made under it; finalize closes those NCCL left open (an
 * aborted communicator) and drops its half-made connects.  Devices,
 * topology and settings stay process-wide: a context is a small record.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/context.h"
#include "core/core.h"
#include "topo/topo.h"
#include "core/transports.h"
#include "util/list.h"
#include "util/log.h"

#define CTX_MAGIC 0x43545843u /* "CXTC" */
#define CTX_DEAD 0xdeadc7c7u

enum owned_kind { OWNED_LISTEN, OWNED_SEND, OWNED_RECV };

struct owned {
  void *obj;
  enum owned_kind kind;
};

struct collx_ctx {
  uint32_t magic;
  uint64_t comm_id;
  int tclass;                  /* -1: NCCL set none */
  struct collx_hints hints;
  int have_hints;
  int last_streams;            /* stream count of the latest connect (for the log) */
  struct owned *owned;         /* comms made under this context */
  int nowned, cap;
  struct collx_list node;      /* in `contexts` */
};

/* One lock for every context: setup and teardown calls only, never the
 * data path. */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct collx_list contexts = {&contexts, &contexts};
static atomic_int live_contexts;

int collx_ctx_live(void) { return atomic_load(&live_contexts); }

/* Caller holds ctx_lock. */
static int ctx_valid(const struct collx_ctx *ctx) {
  struct collx_list *pos, *tmp;
  collx_list_for_each_safe(pos, tmp, &contexts)
    if (COLLX_CONTAINER_OF(pos, struct collx_ctx, node) == ctx) return ctx->magic == CTX_MAGIC;
  return 0;
}

static int tclass_from_config(int tc, uint64_t comm_id) {
  if (tc == NCCL_NET_TRAFFIC_CLASS_UNDEF) return -1;
  if (tc < 0 || tc > 255) {
    COLLX_WARN("comm %#llx: traffic class %d is not a TOS / traffic class byte (0-255); "
               "sockets keep the default", (unsigned long long)comm_id, tc);
    return -1;
  }
  if (tc & 3)
    COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_NET, "comm %#llx: traffic class %d: the kernel keeps the "
               "two ECN bits of TCP sockets, so packets carry %d", (unsigned long long)comm_id, tc,
               tc & 0xfc);
  return tc;
}

ncclResult_t collx_ctx_create(uint64_t comm_id, int traffic_class, void **out) {
  if (!out) {
    COLLX_WARN("init: NULL context pointer");
    return ncclInvalidArgument;
  }
  *out = NULL;
  struct collx_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    COLLX_WARN("init: out of memory for the context of comm %#llx", (unsigned long long)comm_id);
    return ncclSystemError;
  }
  ctx->magic = CTX_MAGIC;
  ctx->comm_id = comm_id;
  ctx->tclass = tclass_from_config(traffic_class, comm_id);
  pthread_mutex_lock(&ctx_lock);
  collx_list_add_tail(&contexts, &ctx->node);
  pthread_mutex_unlock(&ctx_lock);
  atomic_fetch_add(&live_contexts, 1);
  COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_NET, "comm %#llx: context made (traffic class %s%d)",
             (unsigned long long)comm_id, ctx->tclass < 0 ? "default, " : "", ctx->tclass);
  *out = ctx;
  return ncclSuccess;
}

/* ---- Ownership --------------------------------------------------------- */

static int own_locked(struct collx_ctx *ctx, void *obj, enum owned_kind kind) {
  if (ctx->nowned == ctx->cap) {
    int cap = ctx->cap ? ctx->cap * 2 : 16;
    struct owned *o = realloc(ctx->owned, sizeof *o * (size_t)cap);
    if (!o) return -1;
    ctx->owned = o;
    ctx->cap = cap;
  }
  ctx->owned[ctx->nowned++] = (struct owned){obj, kind};
  return 0;
}

static void own(struct collx_ctx *ctx, void *obj, enum owned_kind kind) {
  pthread_mutex_lock(&ctx_lock);
  int rc = ctx_valid(ctx) ? own_locked(ctx, obj, kind) : 0;
  pthread_mutex_unlock(&ctx_lock);
  if (rc != 0)
    COLLX_WARN("comm %#llx: out of memory recording comm %p; finalize will not close it",
               (unsigned long long)ctx->comm_id, obj);
}

/* Which context made `obj` (caller holds ctx_lock); *at receives its slot. */
static struct collx_ctx *owner_locked(const void *obj, int *at) {
  struct collx_list *pos, *tmp;
  collx_list_for_each_safe(pos, tmp, &contexts) {
    struct collx_ctx *ctx = COLLX_CONTAINER_OF(pos, struct collx_ctx, node);
    for (int i = 0; i < ctx->nowned; i++)
      if (ctx->owned[i].obj == obj) {
        *at = i;
        return ctx;
      }
  }
  return NULL;
}

void collx_ctx_forget(const void *obj) {
  int at = 0;
  pthread_mutex_lock(&ctx_lock);
  struct collx_ctx *ctx = owner_locked(obj, &at);
  if (ctx) ctx->owned[at] = ctx->owned[--ctx->nowned];
  pthread_mutex_unlock(&ctx_lock);
}

void collx_ctx_adopt_accepted(const void *listen_comm, void *recv_comm) {
  int at = 0;
  pthread_mutex_lock(&ctx_lock);
  struct collx_ctx *ctx = owner_locked(listen_comm, &at);
  int rc = ctx ? own_locked(ctx, recv_comm, OWNED_RECV) : 0;
  pthread_mutex_unlock(&ctx_lock);
  if (rc != 0) COLLX_WARN("out of memory recording comm %p; finalize will not close it", recv_comm);
}

/* ---- Hints -------------------------------------------------------------- */

static int hint_ok(const char *side, const char *what, int32_t v) {
  if (v >= 0 || v == NCCL_NET_ATTR_UNDEF) return 1;
  COLLX_WARN("setNetAttr: %s %s is %d (a count, or %d for unset)", side, what, (int)v,
             NCCL_NET_ATTR_UNDEF);
  return 0;
}

static int range_ok(const char *side, const char *what, int32_t lo, int32_t hi) {
  if (lo < 0 || hi < 0 || lo <= hi) return 1;
  COLLX_WARN("setNetAttr: %s min%s %d is above max%s %d", side, what, (int)lo, what, (int)hi);
  return 0;
}

static int flow_hint_ok(const char *side, const struct collx_flow_hint *f) {
  return hint_ok(side, "maxConcurrentPeers", f->max_peers) &&
         hint_ok(side, "minConcurrentPeers", f->min_peers) &&
         hint_ok(side, "maxFlowsPerPeer", f->max_flows) &&
         hint_ok(side, "minFlowsPerPeer", f->min_flows) &&
         range_ok(side, "ConcurrentPeers", f->min_peers, f->max_peers) &&
         range_ok(side, "FlowsPerPeer", f->min_flows, f->max_flows);
}

int collx_hints_valid(const struct collx_hints *h) {
  return h && flow_hint_ok("send", &h->send) && flow_hint_ok("recv", &h->recv);
}

ncclResult_t collx_ctx_set_hints(void *ctxp, const struct collx_hints *h) {
  struct collx_ctx *ctx = ctxp;
  if (!h) {
    COLLX_WARN("setNetAttr: NULL attributes");
    return ncclInvalidArgument;
  }
  if (!collx_hints_valid(h)) return ncclInvalidArgument;
  pthread_mutex_lock(&ctx_lock);
  int ok = ctx_valid(ctx);
  if (ok) {
    ctx->hints = *h;
    ctx->have_hints = 1;
  }
  pthread_mutex_unlock(&ctx_lock);
  if (!ok) {
    COLLX_WARN("setNetAttr: %p is not a live collx context (finalized?)", ctxp);
    return ncclInvalidArgument;
  }
  COLLX_TRACE(COLLX_LOG_NET, "comm %#llx: hints send %d-%d peers x %d-%d flows, recv %d-%d x %d-%d, "
              "op %#x algo %#x proto %#x", (unsigned long long)ctx->comm_id, h->send.min_peers,
              h->send.max_peers, h->send.min_flows, h->send.max_flows, h->recv.min_peers,
              h->recv.max_peers, h->recv.min_flows, h->recv.max_flows, h->op, h->algo, h->proto);
  return ncclSuccess;
}

/* Settings for a connect under ctx (NULL: none), with the stream count
 * from the hints unless COLLX_NSTREAMS fixed it. */
static int conn_opts(struct collx_ctx *ctx, int dev, struct collx_conn_opts *o) {
  *o = (struct collx_conn_opts){.nstreams = 0, .tclass = -1, .owner = NULL};
  if (!ctx) return 1;
  pthread_mutex_lock(&ctx_lock);
  int ok = ctx_valid(ctx);
  if (ok) {
    o->tclass = ctx->tclass;
    o->owner = ctx;
    /* The device's count from the placement plan; a bad device is
     * refused by the listen or connect that follows. */
    const struct collx_device *d = collx_device_get(dev);
    int base = d ? d->streams : 0;
    o->nstreams = base;
    if (ctx->have_hints && !collx_nstreams_fixed() && base > 0) {
      o->nstreams = collx_streams_hinted(base, ctx->hints.send.max_peers, ctx->hints.send.max_flows);
      if (o->nstreams != ctx->last_streams)
        COLLX_INFO(COLLX_LOG_NET, "comm %#llx: %d streams per new connection (NCCL's hints: up to "
                   "%d peers x %d flows at once; %d without hints, fewer above %d flows)",
                   (unsigned long long)ctx->comm_id, o->nstreams, ctx->hints.send.max_peers,
                   ctx->hints.send.max_flows, base, COLLX_STREAMS_FLOWS_MEASURED);
    }
    ctx->last_streams = o->nstreams;
  }
  pthread_mutex_unlock(&ctx_lock);
  return ok;
}

ncclResult_t collx_ctx_listen(void *ctxp, int dev, void *handle, void **listen_comm) {
  struct collx_conn_opts o;
  if (!conn_opts(ctxp, dev, &o)) {
    COLLX_WARN("listen: %p is not a live collx context (finalized?)", ctxp);
    return ncclInvalidArgument;
  }
  ncclResult_t res = collx_listen_opts(dev, handle, &o, listen_comm);
  if (res == ncclSuccess && ctxp && *listen_comm) own(ctxp, *listen_comm, OWNED_LISTEN);
  return res;
}

ncclResult_t collx_ctx_connect(void *ctxp, int dev, void *handle, void **send_comm) {
  struct collx_conn_opts o;
  if (!conn_opts(ctxp, dev, &o)) {
    COLLX_WARN("connect: %p is not a live collx context (finalized?)", ctxp);
    if (send_comm) *send_comm = NULL;
    return ncclInvalidArgument;
  }
  ncclResult_t res = collx_connect_opts(dev, handle, &o, send_comm);
  if (res == ncclSuccess && ctxp && *send_comm) own(ctxp, *send_comm, OWNED_SEND);
  return res;
}

/* ---- Finalize ----------------------------------------------------------- */

ncclResult_t collx_ctx_finalize(void *ctxp) {
  struct collx_ctx *ctx = ctxp;
  pthread_mutex_lock(&ctx_lock);
  int ok = ctx_valid(ctx);
  if (ok) {
    collx_list_del(&ctx->node);
    ctx->magic = CTX_DEAD;
  }
  pthread_mutex_unlock(&ctx_lock);
  if (!ok) {
    COLLX_WARN("finalize: %p is not a live collx context (finalized twice?)", ctxp);
    return ncclInvalidArgument;
  }
  /* Out of the list: nothing else can reach these comms through ctx now. */
  int left[3] = {0, 0, 0};
  for (int i = 0; i < ctx->nowned; i++) {
    struct owned *o = &ctx->owned[i];
    left[o->kind]++;
    if (o->kind == OWNED_LISTEN) collx_close_listen_raw(o->obj);
    else collx_close_comm_raw(o->obj);
  }
  int half = collx_transport()->connect_forget(ctx);
  if (ctx->nowned || half)
    COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_NET, "comm %#llx: finalize closed what NCCL left open: "
               "%d send, %d receive, %d listening comm(s), %d half-made connect(s)",
               (unsigned long long)ctx->comm_id, left[OWNED_SEND], left[OWNED_RECV],
               left[OWNED_LISTEN], half);
  COLLX_INFO(COLLX_LOG_INIT | COLLX_LOG_NET, "comm %#llx: context finalized (%d left, %d plugin "
             "thread(s) running)", (unsigned long long)ctx->comm_id,
             atomic_load(&live_contexts) - 1, collx_live_threads());
  free(ctx->owned);
  free(ctx);
  atomic_fetch_sub(&live_contexts, 1);
  return ncclSuccess;
}
