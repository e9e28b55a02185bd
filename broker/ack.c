/* A consumer's in-flight deliveries by number: the index behind an acknowledgement in
 * O(1), however many deliveries are unacknowledged and in whatever order they are
 * acked. The entries themselves stay on the consumer's list in delivery order (for
 * cumulative acks and redelivery); this only finds them.
 *
 * Open addressing with linear probing, at most half full, removal by backward shift (no
 * tombstones, so a flood of acks for unknown deliveries costs one short probe each). */
#include "broker_int.h"

/* A delivery's home slot in a table of mask + 1 slots. */
static inline uint32_t home(int64_t delivery, uint32_t mask) {
  return (uint32_t)(((uint64_t)delivery * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static void insert(mqr__entry_t **idx, uint32_t mask, mqr__entry_t *e) {
  uint32_t i = home(e->delivery, mask);
  while (idx[i]) i = (i + 1) & mask;
  idx[i] = e;
}

bool mqr__idx_reserve(mqr_broker_consumer_t *c) {
  uint32_t cap = c->idx ? c->idx_mask + 1 : 0;
  if ((c->idx_n + 1) * 2 <= cap) return true;
  uint32_t ncap = cap ? cap * 2 : 16;
  mqr__entry_t **n = mqr_calloc(ncap, sizeof *n);
  if (n == NULL) return false;
  for (uint32_t i = 0; i < cap; i++)
    if (c->idx[i]) insert(n, ncap - 1, c->idx[i]);
  mqr_free(c->idx);
  c->idx = n;
  c->idx_mask = ncap - 1;
  return true;
}

void mqr__idx_put(mqr_broker_consumer_t *c, mqr__entry_t *e) {
  insert(c->idx, c->idx_mask, e);
  c->idx_n++;
}

mqr__entry_t *mqr__idx_find(const mqr_broker_consumer_t *c, int64_t delivery) {
  if (c->idx == NULL) return NULL;
  for (uint32_t i = home(delivery, c->idx_mask);; i = (i + 1) & c->idx_mask) {
    mqr__entry_t *e = c->idx[i];
    if (e == NULL || e->delivery == delivery) return e;
  }
}

void mqr__idx_del(mqr_broker_consumer_t *c, int64_t delivery) {
  uint32_t mask = c->idx_mask, i = home(delivery, mask);
  while (c->idx[i] && c->idx[i]->delivery != delivery) i = (i + 1) & mask;
  if (c->idx[i] == NULL) return;
  c->idx_n--;
  /* Backward shift: each later entry of the run moves into the hole when its home slot
   * does not lie (cyclically) between the hole and it. */
  uint32_t hole = i;
  for (uint32_t j = (i + 1) & mask; c->idx[j]; j = (j + 1) & mask) {
    uint32_t at = home(c->idx[j]->delivery, mask);
    if (((j - at) & mask) >= ((j - hole) & mask)) {
      c->idx[hole] = c->idx[j];
      hole = j;
    }
  }
  c->idx[hole] = NULL;
}

void mqr__idx_clear(mqr_broker_consumer_t *c) {
  mqr_free(c->idx);
  c->idx = NULL;
  c->idx_mask = c->idx_n = 0;
}
