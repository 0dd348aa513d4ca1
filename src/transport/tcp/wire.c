/*
 * Checks of every record that arrives from the network.  Pure functions of
 * the bytes received and what the local side knows, so that the fuzzers in
 * tests/fuzz can drive them without sockets.
 */
#include "wire.h"

int wire_hello_check(const struct wire_hello *h, uint64_t secret, const char **why) {
  if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION) {
    *why = "not a collx peer";
    return -1;
  }
  if (h->secret != secret) {
    *why = "wrong secret";
    return -1;
  }
  if (h->kind == WIRE_HELLO_CTRL) return WIRE_HELLO_CTRL;
  if (h->kind == WIRE_HELLO_DATA) return WIRE_HELLO_DATA;
  if (h->kind == WIRE_HELLO_CTRL_AGAIN) return WIRE_HELLO_CTRL_AGAIN;
  *why = "unknown hello";
  return -1;
}

int wire_resume_check(const struct wire_ctrl *m, const char **why) {
  if (m->magic != WIRE_MAGIC || m->type != WIRE_RESUME || m->n != 1) {
    *why = "a control socket that came back did not start with RESUME";
    return -1;
  }
  return 0;
}

int wire_welcome_check(const struct wire_welcome *w, int max_streams, const char **why) {
  if (w->magic != WIRE_MAGIC || w->version != WIRE_VERSION) {
    *why = "not a collx welcome";
    return -1;
  }
  if (w->naddrs < 1 || w->naddrs > COLLX_MAX_MEMBERS) {
    *why = "welcome names no or too many addresses";
    return -1;
  }
  if (w->nstreams < 1 || w->nstreams > max_streams) {
    *why = "welcome asks for an impossible number of streams";
    return -1;
  }
  for (int i = 0; i < w->naddrs; i++) {
    const struct wire_addr *a = &w->addrs[i];
    if ((a->family != AF_INET && a->family != AF_INET6) || a->port == 0) {
      *why = "welcome carries a bad address";
      return -1;
    }
  }
  return 0;
}

int wire_ctrl_check(const struct wire_ctrl *m, int to_sender, const char **why) {
  if (m->magic != WIRE_MAGIC) {
    *why = "control record with a bad magic";
    return -1;
  }
  if (m->type == WIRE_HEARTBEAT) return WIRE_HEARTBEAT;
  if (m->type == WIRE_CTS_WANTED && !to_sender) return WIRE_CTS_WANTED;
  if (m->type == WIRE_DONE && to_sender) {
    if (m->n < 1 || m->n > COLLX_MAX_RECVS) {
      *why = "DONE with an impossible number of receives";
      return -1;
    }
    return WIRE_DONE;
  }
  if (m->type == WIRE_LOST_ACK && to_sender) {
    if (m->e[0].size == 0 || m->e[0].size >> WIRE_MAX_STREAMS) {
      *why = "LOST_ACK naming no or impossible streams";
      return -1;
    }
    return WIRE_LOST_ACK;
  }
  if (m->type == WIRE_REJOIN && to_sender) {
    if (m->seq >= COLLX_MAX_MEMBERS || m->e[0].tag <= 0 || m->e[0].tag > 65535) {
      *why = "REJOIN naming an impossible path or port";
      return -1;
    }
    return WIRE_REJOIN;
  }
  if (m->type == WIRE_CTRL_GONE && to_sender) {
    if (m->e[0].size == 0 || m->e[0].size > 3) {
      *why = "CTRL_GONE naming no or impossible paths";
      return -1;
    }
    return WIRE_CTRL_GONE;
  }
  if (m->type == WIRE_REJOINED && to_sender) {
    if (m->e[0].size == 0 || m->e[0].size >> WIRE_MAX_STREAMS) {
      *why = "REJOINED naming no or impossible streams";
      return -1;
    }
    return WIRE_REJOINED;
  }
  if (m->type != WIRE_CTS || !to_sender) {
    *why = "unexpected control record";
    return -1;
  }
  if (m->n < 1 || m->n > COLLX_MAX_RECVS) {
    *why = "CTS with an impossible number of buffers";
    return -1;
  }
  return WIRE_CTS;
}

int wire_eager_check(const struct wire_eager *h, const char **why) {
  if (h->magic != WIRE_MAGIC || h->type != WIRE_EAGER) {
    *why = "control record with a bad magic";
    return -1;
  }
  if (h->flags & ~WIRE_EAGER_MATCHED) {
    *why = "eager message with unknown flags";
    return -1;
  }
  if ((h->flags & WIRE_EAGER_MATCHED) && h->idx >= COLLX_MAX_RECVS) {
    *why = "eager message for an impossible receive entry";
    return -1;
  }
  if (h->size > WIRE_EAGER_MAX) {
    *why = "eager message larger than any sender may send";
    return -1;
  }
  return 0;
}

int wire_chunk_check(const struct wire_chunk *h, uint64_t cap, const char **why) {
  if (h->magic != WIRE_MAGIC) {
    *why = "stream out of sync (bad chunk magic)";
    return -1;
  }
  if (h->flags == WIRE_CHUNK_TRUNCATED) return 0;
  if (h->flags == WIRE_CHUNK_HEARTBEAT) {
    if (h->seq || h->idx || h->total || h->offset || h->len) {
      *why = "heartbeat with a payload";
      return -1;
    }
    return 0;
  }
  if (h->flags == WIRE_CHUNK_LOST) {
    if (h->seq || h->idx || h->offset || h->len || h->total == 0 || h->total >> WIRE_MAX_STREAMS) {
      *why = "LOST notice naming no or impossible streams";
      return -1;
    }
    return 0;
  }
  if (h->flags & ~WIRE_CHUNK_LAZY_DONE) {
    *why = "chunk with unknown flags";
    return -1;
  }
  /* Written so that no sum can wrap: offset + len <= total <= cap. */
  if (h->total > cap || h->offset > h->total || h->len > h->total - h->offset) {
    *why = "chunk outside the receive buffer";
    return -1;
  }
  return 0;
}
