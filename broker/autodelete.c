/* Auto-delete, as Artemis's AddressQueueReaper decides it: what the broker made goes
 * again once nobody uses it.
 *
 *   a queue    the broker made (auto-created, not temporary: a temporary one goes with
 *              its consumer anyway), under auto-delete-queues, once it has had a consumer
 *              and has none, holding at most auto-delete-queues-message-count messages
 *              (-1: any), auto-delete-queues-delay ms after its last consumer went. Its
 *              deletion is journaled (a tombstone): it stays deleted after a restart.
 *   an address the broker made, under auto-delete-addresses, once its last queue went,
 *              auto-delete-addresses-delay ms later, unless it holds bytes, pages or
 *              paused producers.
 *
 * The check runs when the last consumer goes (at once for a delay of 0) and again when
 * the delay is out (an event on redeliver.c's heap); a consumer that came meanwhile, or
 * messages past the count, keep the queue. */
#include "durable.h"

static uint64_t waiting(const mqr__bq_t *bq) {
  return bq->store.depth + bq->held + bq->scheduled + bq->in_flight + mqr__pager_backlog(bq);
}

bool mqr__auto_delete_queue(mqr_broker_t *b, mqr__bq_t *bq, bool now) {
  mqr_queue_t *q = bq->q;
  if (bq->temporary || !mqr_queue_auto_created(q) || bq->n_consumers || !bq->had_consumer || b->closing) return false;
  const mqr_address_settings_t *s = mqr_address_settings(mqr_queue_address(q));
  if (!s->auto_delete_queues) return false;
  if (s->auto_delete_queues_message_count >= 0 && waiting(bq) > (uint64_t)s->auto_delete_queues_message_count)
    return false;
  uint64_t at = bq->consumer_gone_at + (uint64_t)s->auto_delete_queues_delay;
  uv_update_time(b->loop);
  if (uv_now(b->loop) < at) {
    if (now) mqr__hold_auto_delete(b, bq, mqr_str_n(NULL, 0), at - uv_now(b->loop));
    return false;
  }
  if (mqr__durable_queue_deleted(b, bq) != 0) return false; /* the journal cannot say so: it stays */
  mqr__log(b, MQR_LOG_DEBUG, "auto-delete: queue '%.*s' goes", (int)mqr_queue_name(q).len, mqr_queue_name(q).ptr);
  mqr__queue_drop_then_address(b, bq);
  return true;
}

void mqr__queue_drop_then_address(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr_str_t name = mqr_address_name(mqr_queue_address(bq->q));
  char small[256], *copy = name.len < sizeof small ? small : mqr_malloc(name.len + 1);
  if (copy) memcpy(copy, name.ptr, name.len), copy[name.len] = 0;
  bool pinned = bq->pins != 0; /* then it goes at the last unpin, its address after it */
  mqr__queue_drop(b, bq);
  if (copy && !pinned) mqr__auto_delete_address(b, mqr_str_n(copy, name.len), true);
  if (copy != small) mqr_free(copy);
}

void mqr__auto_delete_address(mqr_broker_t *b, mqr_str_t address, bool now) {
  mqr_address_t *a = mqr_router_find_address(&b->router, address);
  if (a == NULL || b->closing || !(mqr_address_flags(a) & MQR_ADDRESS_AUTO_CREATED) || mqr_address_queue_count(a))
    return;
  const mqr_address_settings_t *s = mqr_address_settings(a);
  if (!s->auto_delete_addresses) return;
  if (now && s->auto_delete_addresses_delay > 0) {
    mqr__hold_auto_delete(b, NULL, address, (uint64_t)s->auto_delete_addresses_delay);
    return;
  }
  mqr__acct_t *acct = mqr_address_data(a);
  if (acct) {
    if (acct->bytes || acct->pager || acct->n_blocked) return; /* still in use */
    mqr__acct_drop(b, acct);
  }
  mqr_router_remove_address(&b->router, address, false, NULL);
}

void mqr__acct_drop(mqr_broker_t *b, mqr__acct_t *acct) {
  for (mqr__acct_t **pp = &b->accts; *pp; pp = &(*pp)->next)
    if (*pp == acct) {
      *pp = acct->next;
      break;
    }
  mqr_address_set_data(acct->address, NULL);
  mqr_free(acct->blocked);
  mqr_free(acct);
}
