/* A message that leaves its queue for good goes to another address (the dead-letter
 * address when it reached max-delivery-attempts, the expiry address when it expired), as
 * Artemis's QueueImpl.move does it: a new message routed as a send with no routing type,
 * its origin stamped on it (_AMQ_ORIG_ADDRESS, _AMQ_ORIG_QUEUE, _AMQ_ORIG_MESSAGE_ID,
 * _AMQ_ORIG_ROUTING_TYPE; an expired one also _AMQ_ACTUAL_EXPIRY, and no expiration),
 * the address and a queue per original address made first when the settings say so.
 * Without an address to go to, it is dropped. */
#include <stdio.h>

#include "broker_int.h"

/* The queue for messages of address orig on the target address: made (with the address,
 * MULTICAST) when missing. Its filter picks orig's messages, as Artemis's. */
static void make_resources(mqr_broker_t *b, const mqr__move_t *to, mqr_str_t orig) {
  mqr_router_t *r = &b->router;
  mqr_str_t dla = to->address;
  if (mqr_router_find_address(r, dla) == NULL &&
      mqr_router_add_address(r, dla, mqr_routing_set_of(MQR_MULTICAST), MQR_ADDRESS_AUTO_CREATED, NULL, NULL) != 0)
    return;
  size_t nlen = to->prefix.len + orig.len + to->suffix.len;
  char *name = mqr_malloc(nlen + 1), *filter = mqr_malloc(2 * orig.len + 32);
  if (name && filter) {
    memcpy(name, to->prefix.ptr, to->prefix.len);
    memcpy(name + to->prefix.len, orig.ptr, orig.len);
    memcpy(name + to->prefix.len + orig.len, to->suffix.ptr, to->suffix.len);
    size_t f = (size_t)snprintf(filter, 32, "_AMQ_ORIG_ADDRESS = '");
    for (size_t i = 0; i < orig.len; i++) { /* a quote in a literal is doubled */
      if (orig.ptr[i] == '\'') filter[f++] = '\'';
      filter[f++] = orig.ptr[i];
    }
    filter[f++] = '\'';
    if (mqr_router_find_queue(r, mqr_str_n(name, nlen)) == NULL) {
      mqr_queue_config_t cfg;
      mqr_queue_config_init(&cfg, mqr_str_n(name, nlen), dla, MQR_MULTICAST);
      mqr_address_settings_t st;
      mqr_router_resolve_settings(r, dla, &st);
      mqr_queue_config_defaults(&cfg, &st);
      cfg.filter = mqr_str_n(filter, f);
      cfg.auto_created = true;
      cfg.auto_create_address = true;
      mqr_error_t err;
      if (mqr_router_add_queue(r, &cfg, NULL, &err) != 0)
        mqr__log(b, MQR_LOG_WARN, "queue '%.*s' on '%.*s' not made: %s", (int)nlen, name, (int)dla.len, dla.ptr,
                 err.message);
    }
  }
  mqr_free(name);
  mqr_free(filter);
}

bool mqr__move(mqr_broker_t *b, mqr__bq_t *bq, mqr__entry_t *e, const mqr__move_t *to) {
  mqr_str_t qn = mqr_queue_name(bq->q);
  mqr_stored_view_t sv;
  if (mqr_message_read_stored(e->msg->data, e->msg->len, &sv, NULL) != 0) return true; /* cannot be: dropped */
  mqr_str_t dla = to->address;
  if (dla.len && to->auto_create) make_resources(b, to, sv.address);
  mqr_str_t base = dla; /* (address::queue: the address) */
  for (size_t i = 0; i + 1 < dla.len; i++)
    if (dla.ptr[i] == ':' && dla.ptr[i + 1] == ':') {
      base.len = i;
      break;
    }
  if (dla.len == 0 || mqr_router_find_address(&b->router, base) == NULL) {
    mqr__log(b, to->expired ? MQR_LOG_DEBUG : MQR_LOG_WARN, "message %lld on queue '%.*s' %s and is dropped: %s",
             (long long)sv.message_id, (int)qn.len, qn.ptr, to->why,
             dla.len ? "its address to go to does not exist" : "it has no address to go to");
    return true;
  }
  /* Its origin, and for an expired message when it expired (its expiration is cleared). */
  mqr_str_t keys[5] = {MQR_STR("_AMQ_ORIG_ADDRESS"), MQR_STR("_AMQ_ORIG_QUEUE"), MQR_STR("_AMQ_ORIG_MESSAGE_ID")};
  mqr_value_t values[5] = {mqr_value_string(sv.address), mqr_value_string(qn), mqr_value_long(sv.message_id)};
  size_t n = 3;
  int rt = mqr_proto_rt_to_routing(sv.routing_type);
  if (rt != MQR_ROUTING_NONE) keys[n] = MQR_STR("_AMQ_ORIG_ROUTING_TYPE"), values[n++] = mqr_value_int(rt);
  if (to->expired) keys[n] = MQR_STR("_AMQ_ACTUAL_EXPIRY"), values[n++] = mqr_value_long(to->now);
  mqr_tail_edit_t edit = {keys, values, n, to->expired, 0};
  size_t cap = mqr_message_edit_tail_bound(sv.tail_len, &edit), len = 0;
  uint8_t *tail = mqr_malloc(cap);
  mqr_error_t err;
  int rc = tail ? mqr_message_edit_tail(sv.tail, sv.tail_len, &edit, tail, &len, &err) : MQR_ENOMEM;
  if (rc == 0) {
    mqr__send_t send = {
        .address = dla, .routing_type = MQR_ROUTING_NONE, .durable = sv.durable, .tail = tail, .tail_len = len};
    mqr_broker_receipt_t r;
    rc = mqr__do_send(b, &send, &r, NULL, &err); /* the message is copied: tail may go */
    if (rc == MQR__PENDING) rc = 0;
    if (rc == 0 && r.queues == 0)
      mqr__log(b, MQR_LOG_WARN, "message %lld from queue '%.*s' (%s) went to '%.*s', which no queue took",
               (long long)sv.message_id, (int)qn.len, qn.ptr, to->why, (int)dla.len, dla.ptr);
  }
  mqr_free(tail);
  if (rc != 0) {
    mqr__log(b, MQR_LOG_WARN, "message %lld on queue '%.*s' (%s) could not go to '%.*s' (%s): kept",
             (long long)sv.message_id, (int)qn.len, qn.ptr, to->why, (int)dla.len, dla.ptr, mqr_err_name(rc));
    return false;
  }
  return true;
}
