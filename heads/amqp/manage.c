/* Artemis's management messages, over AMQP: a message sent to the management address
 * (activemq.management) is not routed but carried out, as Artemis's ManagementService
 * does. Its application-properties name the resource (_AMQ_ResourceName: broker,
 * queue.NAME, address.NAME) and either an operation (_AMQ_OperationName, its parameters a
 * JSON array in the body) or an attribute (_AMQ_Attribute); the answer goes to the
 * message's reply-to, with _AMQ_OperationSucceeded and, as its body (an amqp-value
 * string), the result as a JSON array of one, or why it failed; its correlation-id is the
 * request's correlation-id, else its message-id. Sending one takes manage on the
 * management address, as Artemis checks it. What each resource answers is in
 * docs/protocols.md. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "amqp.h"

#define MANAGEMENT "activemq.management"
#define ORIGINAL_ENCODING "JMS_AMQP_ORIGINAL_ENCODING" /* (5: an amqp-value string, as message.c) */

bool mqr__amqp_is_management(mqr_str_t address) { return mqr_str_eq(address, MQR_STR(MANAGEMENT)); }

/* A string property of the request, or an empty string. */
static mqr_str_t prop(const amqp_in_t *in, const char *name) {
  for (size_t i = 0; i < in->m.n_properties; i++)
    if (mqr_str_eq(in->keys[i], mqr_str(name)) && in->values[i].type == MQR_VALUE_STRING) return in->values[i].u.s;
  return mqr_str_n("", 0);
}

/* A parameter as text (a string, a number or a boolean), into buf; NULL: none of those. */
static const char *param_text(json_t *v, char *buf, size_t cap) {
  if (json_is_string(v)) return json_string_value(v);
  if (json_is_integer(v))
    snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
  else if (json_is_real(v))
    snprintf(buf, cap, "%g", json_real_value(v));
  else if (json_is_boolean(v))
    snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
  else
    return NULL;
  return buf;
}

static json_t *str_json(mqr_str_t s) { return json_stringn(s.ptr ? s.ptr : "", s.len); }

/* Each queue's or address's name into the JSON array arg. */
static int queue_name(void *arg, const mqr_broker_queue_info_t *q) {
  json_array_append_new(arg, str_json(q->name));
  return 0;
}

static int address_name(void *arg, const mqr_broker_address_info_t *a) {
  json_array_append_new(arg, str_json(a->name));
  return 0;
}

/* An address's figures (address.NAME's attributes). */
typedef struct {
  mqr_broker_address_info_t info;
  json_t *queues;
  uint64_t messages;
} address_t;

static int address_info(void *arg, const mqr_broker_address_info_t *a) {
  ((address_t *)arg)->info = *a;
  return 0;
}

static int address_queue(void *arg, const mqr_broker_queue_info_t *q) {
  address_t *x = arg;
  json_array_append_new(x->queues, str_json(q->name));
  x->messages += q->stats.depth + q->stats.in_flight;
  return 0;
}

static bool is(const char *op, const char *name) { return strcmp(op, name) == 0; }

/* broker: Artemis's ActiveMQServerControl, as far as mqr has it. */
static int broker_op(mqr_broker_t *b, const char *op, json_t *p, json_t **result, mqr_error_t *err) {
  size_t n = json_array_size(p);
  char t0[64], t1[64];
  const char *a0 = n > 0 ? param_text(json_array_get(p, 0), t0, sizeof t0) : NULL;
  const char *a1 = n > 1 ? param_text(json_array_get(p, 1), t1, sizeof t1) : NULL;
  if (is(op, "getQueueNames") || is(op, "queueNames")) {
    *result = json_array();
    mqr_broker_foreach_stats(b, false, NULL, queue_name, *result);
    return 0;
  }
  if (is(op, "getAddressNames") || is(op, "addressNames")) {
    *result = json_array();
    mqr_broker_foreach_stats(b, false, address_name, NULL, *result);
    return 0;
  }
  if (is(op, "getVersion") || is(op, "version")) {
    *result = json_string(mqr_version());
    return 0;
  }
  if (is(op, "createAddress")) {
    mqr_routing_set_t types;
    if (n != 2 || a0 == NULL || a1 == NULL || mqr_routing_set_parse(mqr_str(a1), &types, NULL) != 0)
      return mqr_error_set(err, MQR_EINVAL,
                           "createAddress(name, routingTypes): routingTypes ANYCAST, MULTICAST or both");
    return mqr_broker_create_address(b, mqr_str(a0), types, err);
  }
  if (is(op, "deleteAddress")) {
    if (n < 1 || n > 2 || a0 == NULL) return mqr_error_set(err, MQR_EINVAL, "deleteAddress(name[, force])");
    return mqr_broker_delete_address(b, mqr_str(a0), n == 2 && json_is_true(json_array_get(p, 1)), err);
  }
  if (is(op, "destroyQueue")) {
    if (n < 1 || n > 3 || a0 == NULL) return mqr_error_set(err, MQR_EINVAL, "destroyQueue(name[, removeConsumers])");
    return mqr_broker_delete_queue(b, mqr_str(a0), err);
  }
  if (is(op, "createQueue")) {
    mqr_queue_config_t qc;
    if (n == 1 && a0 && json_is_string(json_array_get(p, 0))) { /* createQueue(queueConfiguration as JSON) */
      json_t *cfg = json_loads(a0, 0, NULL);
      json_t *name = json_object_get(cfg, "name"), *address = json_object_get(cfg, "address");
      mqr_routing_type_t rt = MQR_MULTICAST; /* (Artemis's default) */
      json_t *rtv = json_object_get(cfg, "routing-type");
      int rc = 0;
      if (!json_is_string(name))
        rc = mqr_error_set(err, MQR_EINVAL, "createQueue: the configuration names no queue (\"name\")");
      else if (rtv && (!json_is_string(rtv) || mqr_routing_type_parse(mqr_str(json_string_value(rtv)), &rt) != 0))
        rc = mqr_error_set(err, MQR_EINVAL, "createQueue: routing-type ANYCAST or MULTICAST");
      if (rc == 0) {
        mqr_str_t qn = mqr_str(json_string_value(name));
        mqr_queue_config_init(&qc, qn, json_is_string(address) ? mqr_str(json_string_value(address)) : qn, rt);
        qc.auto_create_address = true;
        const char *key;
        json_t *v;
        char vb[64];
        json_object_foreach(cfg, key, v) {
          if (is(key, "name") || is(key, "address") || is(key, "routing-type") || rc) continue;
          const char *text = param_text(v, vb, sizeof vb);
          if (text == NULL) {
            rc = mqr_error_set(err, MQR_EINVAL, "createQueue: '%s' is not a string, number or boolean", key);
            break;
          }
          if (is(key, "auto-create-address"))
            qc.auto_create_address = json_is_true(v);
          else
            rc = mqr__queue_option(&qc, mqr_str(is(key, "filter-string") ? "filter" : key), mqr_str(text), err);
        }
      }
      if (rc == 0) rc = mqr_broker_create_queue(b, &qc, err);
      json_decref(cfg);
      return rc;
    }
    /* createQueue(address, routingType, name, filter, durable, ...), Artemis's older forms */
    char t2[64], t3[1024], t4[16];
    const char *a2 = n > 2 ? param_text(json_array_get(p, 2), t2, sizeof t2) : NULL;
    const char *a3 = n > 3 ? param_text(json_array_get(p, 3), t3, sizeof t3) : NULL;
    const char *a4 = n > 4 ? param_text(json_array_get(p, 4), t4, sizeof t4) : NULL;
    mqr_routing_type_t rt;
    if (n < 3 || !a0 || !a1 || !a2 || mqr_routing_type_parse(mqr_str(a1), &rt) != 0)
      return mqr_error_set(err, MQR_EINVAL,
                           "createQueue(queueConfiguration) or createQueue(address, routingType, name[, filter, "
                           "durable])");
    mqr_queue_config_init(&qc, mqr_str(a2), mqr_str(a0), rt);
    qc.auto_create_address = true;
    int rc = a3 && *a3 ? mqr__queue_option(&qc, MQR_STR("filter"), mqr_str(a3), err) : 0;
    if (rc == 0 && a4) rc = mqr__queue_option(&qc, MQR_STR("durable"), mqr_str(a4), err);
    return rc ? rc : mqr_broker_create_queue(b, &qc, err);
  }
  return mqr_error_set(err, MQR_EINVAL,
                       "broker has no operation '%s' here (createAddress, deleteAddress, createQueue, destroyQueue, "
                       "getQueueNames, getAddressNames, getVersion)",
                       op);
}

/* queue.NAME: Artemis's QueueControl, as far as mqr has it. */
static int queue_op(mqr_broker_t *b, mqr_str_t name, const char *op, json_t *p, json_t **result, mqr_error_t *err) {
  size_t n = json_array_size(p);
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(b), name);
  mqr_broker_queue_stats_t st;
  if (q == NULL || mqr_broker_queue_stats(b, name, &st) != 0)
    return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)name.len, name.ptr);
  /* What reads or changes its messages is the leader's to answer (a replicated queue). */
  bool messages = !(is(op, "name") || is(op, "getName") || is(op, "address") || is(op, "getAddress") ||
                    is(op, "routingType") || is(op, "getRoutingType") || is(op, "durable") || is(op, "isDurable") ||
                    is(op, "filter") || is(op, "getFilter") || is(op, "consumerCount") || is(op, "getConsumerCount"));
  int rc = messages ? mqr_broker_queue_served(b, name, err) : 0;
  if (rc) return rc;
  char t0[1024], t1[512];
  const char *a0 = n > 0 ? param_text(json_array_get(p, 0), t0, sizeof t0) : NULL;
  const char *a1 = n > 1 ? param_text(json_array_get(p, 1), t1, sizeof t1) : NULL;
#define ATTR(a, get) (is(op, a) || is(op, get))
  if (ATTR("messageCount", "getMessageCount") || is(op, "countMessages")) {
    if (n && a0 && *a0) return mqr_error_set(err, MQR_EINVAL, "countMessages(filter): only without a filter here");
    *result = json_integer((json_int_t)(st.depth + st.in_flight + st.held + st.scheduled));
  } else if (ATTR("consumerCount", "getConsumerCount")) {
    *result = json_integer(st.consumers);
  } else if (ATTR("deliveringCount", "getDeliveringCount")) {
    *result = json_integer((json_int_t)st.in_flight);
  } else if (ATTR("messagesAdded", "getMessagesAdded")) {
    *result = json_integer((json_int_t)st.enqueued);
  } else if (ATTR("messagesAcknowledged", "getMessagesAcknowledged")) {
    *result = json_integer((json_int_t)st.acknowledged);
  } else if (ATTR("messagesExpired", "getMessagesExpired")) {
    *result = json_integer((json_int_t)st.expired);
  } else if (ATTR("messagesKilled", "getMessagesKilled")) {
    *result = json_integer((json_int_t)st.killed);
  } else if (ATTR("scheduledCount", "getScheduledCount")) {
    *result = json_integer((json_int_t)st.scheduled);
  } else if (ATTR("persistentSize", "getPersistentSize")) {
    *result = json_integer((json_int_t)st.bytes);
  } else if (ATTR("paused", "isPaused")) {
    *result = json_boolean(st.paused);
  } else if (ATTR("name", "getName")) {
    *result = str_json(name);
  } else if (ATTR("address", "getAddress")) {
    *result = str_json(mqr_address_name(mqr_queue_address(q)));
  } else if (ATTR("routingType", "getRoutingType")) {
    *result = json_string(mqr_routing_type_name(mqr_queue_routing_type(q)));
  } else if (ATTR("durable", "isDurable")) {
    *result = json_boolean(mqr_queue_durable(q));
  } else if (ATTR("filter", "getFilter")) {
    *result = mqr_queue_filter(q).len ? str_json(mqr_queue_filter(q)) : json_null();
  } else if (is(op, "pause") || is(op, "resume")) {
    if (n > 1 || (n == 1 && !json_is_boolean(json_array_get(p, 0))))
      return mqr_error_set(err, MQR_EINVAL, "%s([persist])", op);
    return mqr_broker_pause_queue(b, name, is(op, "pause"), n == 1 && json_is_true(json_array_get(p, 0)), err);
  } else if (is(op, "removeAllMessages") || is(op, "removeMessages")) {
    if (n && a0 && *a0) return mqr_error_set(err, MQR_EINVAL, "removeMessages(filter): only without a filter here");
    *result = json_integer((json_int_t)mqr_broker_purge(b, q));
  } else if (is(op, "moveMessages")) { /* moveMessages(filter, otherQueueName[, ...]) */
    if (n < 2 || a1 == NULL) return mqr_error_set(err, MQR_EINVAL, "moveMessages(filter, otherQueueName)");
    int64_t moved = mqr_broker_move_messages(b, name, mqr_str(a0 ? a0 : ""), mqr_str(a1), err);
    if (moved < 0) return (int)moved;
    *result = json_integer((json_int_t)moved);
  } else {
    return mqr_error_set(err, MQR_EINVAL,
                         "queue has no operation or attribute '%s' here (messageCount, consumerCount, "
                         "deliveringCount, messagesAdded, messagesAcknowledged, messagesExpired, messagesKilled, "
                         "scheduledCount, persistentSize, paused, name, address, routingType, durable, filter; "
                         "countMessages, pause, resume, removeAllMessages, removeMessages, moveMessages)",
                         op);
  }
#undef ATTR
  return 0;
}

/* address.NAME: Artemis's AddressControl's figures. */
static int address_op(mqr_broker_t *b, mqr_str_t name, const char *op, json_t **result, mqr_error_t *err) {
  address_t x = {.queues = json_array()};
  if (mqr_broker_address_stats(b, name, false, address_info, address_queue, &x) != 0) {
    json_decref(x.queues);
    return mqr_error_set(err, MQR_ENOADDR, "address '%.*s' does not exist", (int)name.len, name.ptr);
  }
  if (is(op, "queueNames") || is(op, "getQueueNames")) {
    *result = x.queues;
    return 0;
  }
  json_decref(x.queues);
  if (is(op, "address") || is(op, "getAddress")) {
    *result = str_json(name);
  } else if (is(op, "routingTypes") || is(op, "getRoutingTypes")) {
    *result = json_array();
    for (int t = MQR_ANYCAST; t <= MQR_MULTICAST; t++)
      if (mqr_routing_set_contains(x.info.routing_types, t))
        json_array_append_new(*result, json_string(mqr_routing_type_name(t)));
  } else if (is(op, "numberOfMessages") || is(op, "getNumberOfMessages")) {
    *result = json_integer((json_int_t)x.messages);
  } else if (is(op, "addressSize") || is(op, "getAddressSize")) {
    *result = json_integer((json_int_t)x.info.size);
  } else if (is(op, "paging") || is(op, "isPaging")) {
    *result = json_boolean(x.info.paging);
  } else if (is(op, "numberOfPages") || is(op, "getNumberOfPages")) {
    *result = json_integer((json_int_t)x.info.pages);
  } else {
    return mqr_error_set(err, MQR_EINVAL,
                         "address has no attribute '%s' here (address, routingTypes, queueNames, numberOfMessages, "
                         "addressSize, paging, numberOfPages)",
                         op);
  }
  return 0;
}

/* The answer to reply_to: succeeded, and the result (or why not) as its body. */
static void reply(mqr__conn_t *c, mqr_str_t reply_to, mqr_str_t correlation, int64_t now_ms, bool ok, json_t *result,
                  const char *why) {
  json_t *body = json_array();
  if (!ok) json_decref(result);
  json_array_append_new(body, ok ? (result ? result : json_null()) : json_string(why));
  char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(body);
  /* (a reply-to of Qpid JMS's older form names its kind first, as Artemis strips it) */
  static const char *const kinds[] = {"queue://", "topic://", "temp-queue://", "temp-topic://"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (reply_to.len > strlen(kinds[i]) && memcmp(reply_to.ptr, kinds[i], strlen(kinds[i])) == 0)
      reply_to = mqr_str_n(reply_to.ptr + strlen(kinds[i]), reply_to.len - strlen(kinds[i]));
  mqr_str_t keys[3] = {MQR_STR("_AMQ_OperationSucceeded"), MQR_STR(ORIGINAL_ENCODING), MQR_STR("JMSCorrelationID")};
  mqr_value_t values[3] = {mqr_value_bool(ok), mqr_value_int(5), mqr_value_string(correlation)};
  mqr_broker_message_t m = {.address = reply_to,
                            .routing_type = MQR_ROUTING_NONE,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .timestamp = now_ms,
                            .property_keys = keys,
                            .property_values = values,
                            .n_properties = correlation.len ? 3 : 2,
                            .body = text ? mqr_str(text) : MQR_STR("[null]")};
  mqr_error_t err;
  if (mqr_broker_send(c->b, &m, NULL, &err) != 0)
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): a management answer to '%.*s' went nowhere: %s",
             (long long)c->sess.id, c->peer, (int)reply_to.len, reply_to.ptr, err.message);
  free(text);
}

int mqr__amqp_manage(mqr__conn_t *c, const amqp_in_t *in, mqr_error_t *err) {
  if (!mqr__session_may(&c->sess, MQR_PERM_MANAGE, MQR_STR(MANAGEMENT), err)) return MQR_EPERM;
  mqr_str_t resource = prop(in, "_AMQ_ResourceName"), operation = prop(in, "_AMQ_OperationName"),
            attribute = prop(in, "_AMQ_Attribute"), reply_to = prop(in, "JMSReplyTo");
  mqr_str_t correlation = prop(in, "JMSCorrelationID");
  if (correlation.len == 0) correlation = prop(in, "JMSMessageID");
  char op[128];
  mqr_str_t what = operation.len ? operation : attribute;
  snprintf(op, sizeof op, "%.*s", (int)(what.len < sizeof op - 1 ? what.len : sizeof op - 1), what.ptr);
  json_t *params = NULL, *result = NULL;
  mqr_error_t why;
  int rc = 0;
  if (what.len == 0) {
    rc = mqr_error_set(&why, MQR_EINVAL, "a management message names _AMQ_OperationName or _AMQ_Attribute");
  } else if (operation.len && in->m.body.len &&
             (params = json_loadb(in->m.body.ptr, in->m.body.len, 0, NULL)) == NULL) {
    rc = mqr_error_set(&why, MQR_EINVAL, "the parameters are not JSON");
  } else if (params && !json_is_array(params) && !json_is_null(params)) {
    rc = mqr_error_set(&why, MQR_EINVAL, "the parameters are not a JSON array");
  } else if (mqr_str_eq(resource, MQR_STR("broker"))) {
    rc = broker_op(c->b, op, params, &result, &why);
  } else if (resource.len > 6 && memcmp(resource.ptr, "queue.", 6) == 0) {
    rc = queue_op(c->b, mqr_str_n(resource.ptr + 6, resource.len - 6), op, params, &result, &why);
  } else if (resource.len > 8 && memcmp(resource.ptr, "address.", 8) == 0) {
    rc = address_op(c->b, mqr_str_n(resource.ptr + 8, resource.len - 8), op, &result, &why);
  } else {
    rc = mqr_error_set(&why, MQR_ENOTFOUND, "no resource '%.*s' (broker, queue.NAME, address.NAME)", (int)resource.len,
                       resource.ptr);
  }
  json_decref(params);
  if (reply_to.len) {
    reply(c, reply_to, correlation, in->now_ms, rc == 0, result, rc ? why.message : NULL);
  } else {
    json_decref(result);
  }
  return 0; /* (the request itself is taken: a failure is the answer's) */
}
