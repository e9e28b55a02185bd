/* Queues' and addresses' broker state, made on first use, and the accounting of an
 * address's bytes: the producers a full address (BLOCK) pauses, and their release. A
 * leaf of the core: the send path, the journal and the pager use it, and it calls none
 * of them (a durable queue made here is recorded through the persistence ops). */
#include "broker_int.h"

mqr__bq_t *mqr__bq_of(mqr_broker_t *b, mqr_queue_t *q) {
  mqr__bq_t *bq = mqr_queue_data(q);
  if (bq) return bq;
  if (mqr_queue_removed(q)) return NULL; /* deleted by a callback while a send held it */
  if ((bq = mqr_calloc(1, sizeof *bq)) == NULL) return NULL;
  bq->q = q;
  mqr__memstore_init(&bq->store);
  if (!mqr__kinds_init(bq)) {
    mqr_free(bq);
    return NULL;
  }
  bq->next = b->queues;
  if (b->queues) b->queues->prev = bq;
  b->queues = bq;
  mqr_queue_set_data(q, bq);
  if (b->persist) b->persist->queue_made(b, bq); /* a durable queue made at run time is recorded */
  return bq;
}

void mqr__acct_settings(mqr__acct_t *a) {
  const mqr_address_settings_t *s = mqr_address_settings(a->address);
  a->max = s->max_size_bytes;
  a->policy = s->address_full_policy;
  a->expiry_adjust = s->expiry_delay >= 0 || s->min_expiry_delay >= 0 || s->max_expiry_delay >= 0;
}

mqr__acct_t *mqr__acct_of(mqr_broker_t *b, mqr_address_t *addr) {
  mqr__acct_t *a = mqr_address_data(addr);
  if (a) return a;
  if ((a = mqr_calloc(1, sizeof *a)) == NULL) return NULL;
  a->address = addr;
  mqr__acct_settings(a);
  a->next = b->accts;
  b->accts = a;
  mqr_address_set_data(addr, a);
  return a;
}

/* ---- producers paused by a full address (BLOCK) ------------------------------------------ */

void mqr__producer_block(mqr__producer_t *p, mqr__acct_t *a) {
  for (uint32_t i = 0; i < a->n_blocked; i++)
    if (a->blocked[i] == p) return;
  if (a->n_blocked == a->cap_blocked) {
    uint32_t ncap = a->cap_blocked ? a->cap_blocked * 2 : 4;
    mqr__producer_t **nb = mqr_realloc(a->blocked, ncap * sizeof *nb);
    if (nb == NULL) return; /* not paused: it pauses again on its next send to the full address */
    a->blocked = nb;
    a->cap_blocked = ncap;
  }
  a->blocked[a->n_blocked++] = p;
  p->blocked_on++;
}

/* A producer going away leaves every account it waits on. */
void mqr__producer_unblock_all(mqr_broker_t *b, mqr__producer_t *p) {
  for (mqr__acct_t *a = b->accts; a && p->blocked_on; a = a->next)
    for (uint32_t i = 0; i < a->n_blocked; i++)
      if (a->blocked[i] == p) {
        a->blocked[i] = a->blocked[--a->n_blocked];
        p->blocked_on--;
        break;
      }
  p->blocked_on = 0;
}

void mqr__global_release(mqr_broker_t *b) {
  b->global_blocked = false;
  for (mqr__acct_t *a = b->accts; a; a = a->next)
    if (a->n_blocked && !mqr__acct_over(a)) mqr__acct_release(a);
}

/* The account has room again (or its limit or policy changed): every producer it
 * paused that waits on nothing else reads on. */
void mqr__acct_release(mqr__acct_t *a) {
  for (uint32_t i = 0; i < a->n_blocked; i++) {
    mqr__producer_t *p = a->blocked[i];
    if (p->blocked_on) p->blocked_on--;
    if (p->blocked_on == 0 && p->ops) p->ops->resume(p);
  }
  a->n_blocked = 0;
}
