/*
 * The matching rules of the TCP transport, over plain structs.
 *
 * Sender: the CTS records the receiver has sent, by sequence, and the
 * cursor that claims their entries in order; the log of small messages
 * sent before their CTS ("early"), replayed against the CTS records as
 * they come in.  Receiver: where an early message goes.  Both sides apply
 * one rule to an early message: it fills the first free entry with its tag
 * of the receive at the cursor, and the cursor moves past a receive once
 * every entry of it is taken (send.c says why).  And the receiver's
 * policy for holding CTS records back (TCP_CTS_BATCH).
 *
 * No sockets, locks or logging: the transport calls these under the locks
 * that guard the state (doc/design.md), turns the results into errors and
 * warnings, and the unit test drives them on hand-made sequences.
 */
#ifndef COLLX_TCP_MATCH_H
#define COLLX_TCP_MATCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* Receives are found by seq % TCP_SEQ_SLOTS.  At most 32 are outstanding,
 * but a caller may complete them out of order while the data of an older
 * one still trickles in on a slow stream: the window of sequence numbers in
 * use can be wider than the pool. */
#define TCP_SEQ_SLOTS 256
/* Early (unmatched) eager sends a sender keeps until their receive's CTS
 * arrives; past this, small sends wait for CTS records too. */
#define TCP_EAGER_LOG 64

/* A receiver whose last TCP_CTS_PROMPT_RECEIVES receives saw no message
 * large enough for the data streams holds its CTS records back until
 * TCP_CTS_BATCH are waiting (or the sender asks, or the watchdog's next
 * tick): small messages need no CTS, and each write on the control socket
 * costs the proxy thread a loopback round of the TCP stack (bench/NOTES.md
 * attempt 14). */
#define TCP_CTS_BATCH 8
#define TCP_CTS_PROMPT_RECEIVES 16

/* Outcome of claiming an entry at the sender's cursor. */
enum match_claim {
  MATCH_NO_ENTRY = -1, /* the CTS is in, but no free entry has this tag */
  MATCH_NOT_IN = 0,    /* the CTS at the cursor has not come in yet */
  MATCH_CLAIMED = 1,
};

/* ---- sender -------------------------------------------------------------- */

/* A CTS record received.  Filled by whichever thread reads the control
 * socket, then published with a release store of `valid`; consumed and
 * cleared by the thread that sends. */
struct match_cts_slot {
  atomic_int valid;
  uint32_t seq;
  int n;
  uint32_t matched;       /* bit per entry */
  /* The entries, as separate arrays: 12 bytes an entry where the wire's
   * padded record takes 16, and the table holds TCP_SEQ_SLOTS of them. */
  int32_t tag[COLLX_MAX_RECVS];
  uint64_t size[COLLX_MAX_RECVS];
};

struct match_send {
  struct match_cts_slot cts[TCP_SEQ_SLOTS]; /* by seq % TCP_SEQ_SLOTS */
  uint32_t seq;           /* the cursor: the receive whose CTS is being filled */
  /* early sends, oldest first, until their CTS is in */
  struct { int32_t tag; uint64_t size; } early[TCP_EAGER_LOG];
  unsigned early_head, early_len;
};

/* Store a CTS record (type checked by the caller).  -1 with *why when its
 * slot is still in use: the receiver posts seq only once seq -
 * TCP_SEQ_SLOTS is complete, which needs that slot consumed. */
int match_cts_accept(struct match_send *s, const struct wire_ctrl *m, const char **why);

/* Whether the slot at the cursor holds a record (acquire). */
static inline int match_cts_ready(struct match_send *s) {
  return atomic_load_explicit(&s->cts[s->seq % TCP_SEQ_SLOTS].valid, memory_order_acquire);
}

/* Claim the first free entry with `tag` of the receive at the cursor:
 * its receive, entry and size.  Returns enum match_claim. */
int match_cts_claim(struct match_send *s, int tag, uint32_t *seq, int *idx, uint64_t *cap);

/* Log an early send; returns the first receive it may belong to (the
 * cursor).  The caller keeps early_len below TCP_EAGER_LOG. */
uint32_t match_early_add(struct match_send *s, int tag, uint64_t size);

/* The oldest early send, as matched by match_early_replay. */
struct match_replayed {
  int tag;
  uint32_t seq;           /* its receive (MATCH_NO_ENTRY: the cursor) */
  int idx;
  uint64_t size, cap;
  int oversize;           /* larger than its entry: that receive fails */
};

/* Match the oldest early send against the CTS records in, and drop it from
 * the log when claimed.  Returns enum match_claim (MATCH_NOT_IN also when
 * the log is empty). */
int match_early_replay(struct match_send *s, struct match_replayed *out);

/* ---- receiver ------------------------------------------------------------ */

struct match_recv {
  uint32_t eager_seq;     /* first receive early messages may still fill */
};

/* What the rule reads and writes of one posted receive. */
struct match_entries {
  int tag[COLLX_MAX_RECVS];
  uint32_t claimed;       /* entries taken by early messages */
};

/* Where an early message goes, or why it cannot. */
enum match_early {
  MATCH_EARLY_PLACED = 0,    /* entry `idx` of receive `seq` */
  MATCH_EARLY_BLOCKED,       /* its receive is not posted yet: read it once it is */
  MATCH_EARLY_NOT_POSTED,    /* names a receive beyond those posted (`seq`, `posted`) */
  MATCH_EARLY_COMPLETED,     /* the receive at the cursor (`seq`) is gone */
  MATCH_EARLY_NO_ENTRY,      /* no free entry with its tag in receive `seq` */
};

struct match_early_where {
  uint32_t seq;
  uint32_t posted;
  int idx;
};

/* Step one: the receive an early message stamped with the sender's cursor
 * `msg_seq` goes to, given `posted` receives.  PLACED (w->seq set: look it
 * up and call match_early_take), BLOCKED or NOT_POSTED. */
int match_early_at(struct match_recv *m, uint32_t msg_seq, uint32_t posted, struct match_early_where *w);

/* Step two: claim the entry in receive w->seq, whose `n` entries are
 * `entries` (NULL when that receive has completed).  Returns PLACED
 * (w->idx set), COMPLETED or NO_ENTRY. */
int match_early_take(struct match_recv *m, struct match_early_where *w, int n,
                     struct match_entries *entries, int tag);

/* ---- held CTS records ---------------------------------------------------- */

/* Receiver: whether CTS records go out at once.  Shared between the
 * caller, the progress threads and the control reader, hence atomics. */
struct match_hold {
  atomic_int prompt;      /* receives still to get their CTS written at once */
  atomic_int wanted;      /* a CTS_WANTED came in: write what is held */
};

/* A new comm writes every CTS at once until the traffic shows its sizes. */
void match_hold_init(struct match_hold *h);
/* Whether the CTS records queued (`held` of them) are due now. */
static inline int match_hold_due(struct match_hold *h, size_t held) {
  return atomic_load(&h->prompt) > 0 || held >= TCP_CTS_BATCH;
}
/* One receive fewer to announce at once. */
void match_hold_spend(struct match_hold *h);
/* The first chunk of a message came on a data stream. */
static inline void match_hold_stream_message(struct match_hold *h) {
  /* Only a store when it changes: progress threads call this per message. */
  if (atomic_load(&h->prompt) != TCP_CTS_PROMPT_RECEIVES) atomic_store(&h->prompt, TCP_CTS_PROMPT_RECEIVES);
}
/* The sender asked (CTS_WANTED). */
void match_hold_wanted(struct match_hold *h);
/* Take the sender's request, if any; match_hold_rewant puts it back. */
static inline int match_hold_take_wanted(struct match_hold *h) {
  return atomic_exchange(&h->wanted, 0);
}
static inline void match_hold_rewant(struct match_hold *h) {
  atomic_store(&h->wanted, 1);
}

#endif
