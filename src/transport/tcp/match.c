/* The matching rules of the TCP transport (match.h). */
#include "match.h"

#include <string.h>

/* ---- sender -------------------------------------------------------------- */

int match_cts_accept(struct match_send *s, const struct wire_ctrl *m, const char **why) {
  struct match_cts_slot *slot = &s->cts[m->seq % TCP_SEQ_SLOTS];
  if (atomic_load_explicit(&slot->valid, memory_order_acquire)) {
    *why = "CTS for a receive slot still in use";
    return -1;
  }
  slot->seq = m->seq;
  slot->n = m->n;
  slot->matched = 0;
  for (int i = 0; i < COLLX_MAX_RECVS; i++) {
    slot->tag[i] = m->e[i].tag;
    slot->size[i] = m->e[i].size;
  }
  atomic_store_explicit(&slot->valid, 1, memory_order_release);
  return 0;
}

int match_cts_claim(struct match_send *s, int tag, uint32_t *seq, int *idx, uint64_t *cap) {
  struct match_cts_slot *slot = &s->cts[s->seq % TCP_SEQ_SLOTS];
  if (!atomic_load_explicit(&slot->valid, memory_order_acquire) || slot->seq != s->seq) return MATCH_NOT_IN;
  int k = -1;
  for (int i = 0; i < slot->n && k < 0; i++)
    if (!(slot->matched & (1u << i)) && slot->tag[i] == tag) k = i;
  if (k < 0) return MATCH_NO_ENTRY;
  *seq = slot->seq;
  *idx = k;
  *cap = slot->size[k];
  slot->matched |= 1u << k;
  if (__builtin_popcount(slot->matched) == slot->n) {
    atomic_store_explicit(&slot->valid, 0, memory_order_release);
    s->seq++;
  }
  return MATCH_CLAIMED;
}

uint32_t match_early_add(struct match_send *s, int tag, uint64_t size) {
  unsigned k = (s->early_head + s->early_len++) % TCP_EAGER_LOG;
  s->early[k].tag = tag;
  s->early[k].size = size;
  return s->seq;
}

int match_early_replay(struct match_send *s, struct match_replayed *out) {
  if (!s->early_len) return MATCH_NOT_IN;
  unsigned k = s->early_head;
  out->tag = s->early[k].tag;
  out->size = s->early[k].size;
  out->seq = s->seq;
  int got = match_cts_claim(s, out->tag, &out->seq, &out->idx, &out->cap);
  if (got != MATCH_CLAIMED) return got;
  out->oversize = out->size > out->cap;
  s->early_head = (k + 1) % TCP_EAGER_LOG;
  s->early_len--;
  return MATCH_CLAIMED;
}

/* ---- receiver ------------------------------------------------------------ */

int match_early_at(struct match_recv *m, uint32_t msg_seq, uint32_t posted, struct match_early_where *w) {
  w->posted = posted;
  w->seq = msg_seq;
  if ((int32_t)(msg_seq - posted) > 0) return MATCH_EARLY_NOT_POSTED;
  /* Claims only ever go to the receive at the cursor, and the cursor moves
   * past a receive once its last entry is claimed: the receive it names has
   * a free entry unless the message fits nowhere.  The sender's cursor
   * skips the receives it filled with matched messages. */
  if ((int32_t)(msg_seq - m->eager_seq) > 0) m->eager_seq = msg_seq;
  w->seq = m->eager_seq;
  return w->seq == posted ? MATCH_EARLY_BLOCKED : MATCH_EARLY_PLACED;
}

int match_early_take(struct match_recv *m, struct match_early_where *w, int n,
                     struct match_entries *entries, int tag) {
  if (!entries) return MATCH_EARLY_COMPLETED;
  for (int i = 0; i < n; i++)
    if (!(entries->claimed & (1u << i)) && entries->tag[i] == tag) {
      entries->claimed |= 1u << i;
      if (__builtin_popcount(entries->claimed) == n) m->eager_seq++;
      w->idx = i;
      return MATCH_EARLY_PLACED;
    }
  return MATCH_EARLY_NO_ENTRY;
}

/* ---- held CTS records ---------------------------------------------------- */

void match_hold_init(struct match_hold *h) {
  atomic_store(&h->prompt, TCP_CTS_PROMPT_RECEIVES);
}

void match_hold_spend(struct match_hold *h) {
  int left = atomic_load(&h->prompt);
  /* A progress thread may reset it meanwhile; then the reset wins. */
  if (left > 0) atomic_compare_exchange_strong(&h->prompt, &left, left - 1);
}

void match_hold_wanted(struct match_hold *h) {
  /* Served by whoever next writes CTS records (it may hold a lock the
   * reader of the request cannot take). */
  atomic_store(&h->prompt, TCP_CTS_PROMPT_RECEIVES);
  atomic_store(&h->wanted, 1);
}
