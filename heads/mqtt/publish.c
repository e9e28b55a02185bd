/* PUBLISH from an MQTT client (mqtt.h): topic names as addresses, QoS 0, 1 and 2 as the
 * specification's flows (a QoS 2 message is sent once, at its first PUBLISH, and its
 * packet id held until PUBREL), 5.0 topic aliases and properties, and retained messages,
 * each kept in a queue of its own as Artemis keeps them ($sys.mqtt.retain.<address>),
 * copied into a new subscription's queue. */
#include <stdio.h>
#include <time.h>

#include "mqtt.h"

/* ---- topics and addresses ------------------------------------------------------------------------ */

static bool special(const mqr_wildcard_t *wc, char x) {
  return x == wc->delimiter || x == wc->any_words || x == wc->single_word || x == wc->escape;
}

size_t mqr__mqtt_to_address(const mqr_wildcard_t *wc, mqr_str_t topic, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < topic.len; i++) {
    char x = topic.ptr[i];
    bool level = (i == 0 || topic.ptr[i - 1] == '/') && (i + 1 == topic.len || topic.ptr[i + 1] == '/');
    if (n + 2 > cap) return 0;
    if (x == '/')
      out[n++] = wc->delimiter;
    else if (x == '+' && level)
      out[n++] = wc->single_word;
    else if (x == '#' && level)
      out[n++] = wc->any_words;
    else if (special(wc, x))
      out[n++] = wc->escape, out[n++] = x;
    else
      out[n++] = x;
  }
  return n;
}

size_t mqr__mqtt_to_topic(const mqr_wildcard_t *wc, mqr_str_t address, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < address.len; i++) {
    char x = address.ptr[i];
    if (n + 1 > cap) return 0;
    if (x == wc->escape && i + 1 < address.len)
      out[n++] = address.ptr[++i];
    else if (x == wc->delimiter)
      out[n++] = '/';
    else
      out[n++] = x;
  }
  return n;
}

/* ---- sending ------------------------------------------------------------------------------------- */

static mqtt_registry_t *scratch(mqr_broker_t *b) { return mqr__mqtt_registry(b, false); }

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool grow_kv(mqtt_registry_t *s, uint32_t n) {
  if (n <= s->kv_cap) return true;
  uint32_t cap = n < 16 ? 16 : n * 2;
  mqr_str_t *k = mqr_realloc(s->keys, cap * sizeof *k);
  if (k) s->keys = k;
  mqr_value_t *v = k ? mqr_realloc(s->values, cap * sizeof *v) : NULL;
  if (v) s->values = v;
  if (k == NULL || v == NULL) return false;
  s->kv_cap = cap;
  return true;
}

static bool grow_addr(mqtt_registry_t *s, size_t n) {
  if (n <= s->addr_cap) return true;
  char *a = mqr_realloc(s->addr, n);
  if (a == NULL) return false;
  s->addr = a;
  s->addr_cap = n;
  return true;
}

/* The retained message of address, replaced (or only removed: an empty payload). */
static void retain(mqr_broker_t *b, mqr_str_t address, const mqr_broker_message_t *m) {
  char name[1024];
  int len = snprintf(name, sizeof name, MQTT_RETAIN_PREFIX "%.*s", (int)address.len, address.ptr);
  if (len < 0 || (size_t)len >= sizeof name) {
    mqr__log(b, MQR_LOG_WARN, "MQTT: topic '%.*s' too long to retain a message for", (int)address.len, address.ptr);
    return;
  }
  mqr_str_t rq = mqr_str_n(name, (size_t)len);
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(b), rq);
  if (q) mqr_broker_purge(b, q);
  if (m->body.len == 0) return; /* [MQTT-3.3.1-6]: not stored, and the one before goes */
  if (q == NULL) {
    mqr_queue_config_t qc;
    mqr_queue_config_init(&qc, rq, rq, MQR_MULTICAST);
    qc.durable = true;
    qc.auto_create_address = true;
    mqr_error_t err;
    if (mqr_broker_create_queue(b, &qc, &err) != 0) {
      mqr__log(b, MQR_LOG_WARN, "MQTT: no retained message for '%.*s': %s", (int)address.len, address.ptr, err.message);
      return;
    }
  }
  mqr_broker_message_t copy = *m;
  copy.address = rq;
  copy.routing_type = MQR_MULTICAST;
  copy.durable = true;
  mqr_error_t err;
  if (mqr_broker_send(b, &copy, NULL, &err) != 0)
    mqr__log(b, MQR_LOG_WARN, "MQTT: retained message for '%.*s' not kept: %s", (int)address.len, address.ptr,
             err.message);
}

int mqr__mqtt_send(mqr_broker_t *b, mqr__conn_t *c, mqr__principal_t *who, mqr_str_t client_id,
                   const mqr__mqtt_publish_t *m, const mqr__mqtt_props_t *pr, int64_t token, mqr_broker_receipt_t *r,
                   mqr_error_t *err) {
  mqtt_registry_t *s = scratch(b);
  const mqr_wildcard_t *wc = mqr_router_wildcard(mqr_broker_router(b));
  if (!grow_addr(s, m->topic.len * 2 + 1) || !grow_kv(s, 9 + pr->n_users))
    return mqr_error_set(err, MQR_ENOMEM, "out of memory");
  size_t alen = mqr__mqtt_to_address(wc, m->topic, s->addr, s->addr_cap);
  mqr_str_t *k = s->keys;
  mqr_value_t *v = s->values;
  uint32_t n = 0;
  /* As Artemis stamps them: the QoS, the retain flag, the publisher (for no-local). */
  k[n] = MQR_STR("mqtt.qos.level"), v[n++] = mqr_value_int(m->qos);
  k[n] = MQR_STR("mqtt.message.retain"), v[n++] = mqr_value_bool(m->retain);
  k[n] = MQR_STR("__AMQ_CID"), v[n++] = mqr_value_string(client_id);
  if (MQR__MQTT_HAS(pr, 0x03)) k[n] = MQR_STR("content-type"), v[n++] = mqr_value_string(pr->content_type);
  if (MQR__MQTT_HAS(pr, 0x08)) k[n] = MQR_STR("mqtt.response.topic"), v[n++] = mqr_value_string(pr->response_topic);
  if (MQR__MQTT_HAS(pr, 0x09)) k[n] = MQR_STR("mqtt.correlation.data"), v[n++] = mqr_value_bytes(pr->correlation_data);
  if (MQR__MQTT_HAS(pr, 0x01))
    k[n] = MQR_STR("mqtt.payload.format.indicator"), v[n++] = mqr_value_int(pr->payload_format);
  /* User properties are the message's properties (the first of a name counts); when a
   * name repeats, the list as it came goes too, for MQTT subscribers. */
  size_t at = 0, raw = 0;
  mqr_str_t uk, uv;
  uint32_t first_user = n;
  bool repeats = false;
  while (mqr__mqtt_user_next(pr, &at, &uk, &uv) == 1) {
    bool repeated = false;
    for (uint32_t i = first_user; i < n && !repeated; i++) repeated = mqr_str_eq(k[i], uk);
    if (!repeated) k[n] = uk, v[n++] = mqr_value_string(uv);
    repeats |= repeated;
    raw += 4 + uk.len + uv.len;
  }
  if (repeats) {
    if (raw > s->raw_cap) {
      uint8_t *grown = mqr_realloc(s->raw, raw);
      if (grown == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
      s->raw = grown;
      s->raw_cap = raw;
    }
    uint8_t *w = s->raw;
    for (at = 0; mqr__mqtt_user_next(pr, &at, &uk, &uv) == 1;) {
      *w++ = (uint8_t)(uk.len >> 8), *w++ = (uint8_t)uk.len;
      memcpy(w, uk.ptr, uk.len), w += uk.len;
      *w++ = (uint8_t)(uv.len >> 8), *w++ = (uint8_t)uv.len;
      memcpy(w, uv.ptr, uv.len), w += uv.len;
    }
    k[n] = MQR_STR(MQR__MQTT_USER_LIST), v[n++] = mqr_value_bytes(mqr_str_n((const char *)s->raw, raw));
  }
  int64_t now = wall_ms();
  mqr_broker_message_t msg = {mqr_str_n(s->addr, alen),
                              MQR_ROUTING_NONE,
                              m->qos > 0, /* as Artemis: QoS 1 and 2 messages are durable */
                              MQR_STR(""),
                              MQR_PRIORITY_DEFAULT,
                              now,
                              MQR__MQTT_HAS(pr, 0x02) ? now + (int64_t)pr->message_expiry * 1000 : 0,
                              MQR_STR(""),
                              k,
                              v,
                              n,
                              m->payload};
  /* A retained message is kept only for a client that may send there. */
  if (m->retain && who && !mqr__may(b, who, MQR_PERM_SEND, msg.address, err)) return MQR_EPERM;
  if (m->retain) retain(b, msg.address, &msg);
  mqr_tail_t tail;
  mqr__send_t send;
  int rc = mqr__send_from_message(&msg, &tail, &send, err);
  if (rc) return rc;
  send.producer = c ? &c->sess.producer : NULL;
  send.token = token;
  send.who = who;
  struct mqr__acct_s *blocked = NULL;
  rc = mqr__do_send(b, &send, r, c ? &blocked : NULL, err);
  if (blocked) mqr__producer_block(&c->sess.producer, blocked);
  return rc;
}

/* ---- PUBLISH, PUBREL ------------------------------------------------------------------------------- */

static void write_ack(mqr__conn_t *c, mqr__mqtt_type_t type, uint16_t id, uint8_t reason) {
  mqtt_conn_t *mc = c->hs;
  uint8_t buf[16];
  size_t n = mqr__mqtt_put_ack(buf, sizeof buf, mc->level, type, id, reason, NULL);
  if (mqr__mqtt_out(c, buf, n) != 0) mqr__conn_close(c, false);
}

void mqr__mqtt_on_publish(mqr__conn_t *c, mqr__mqtt_packet_t *p) {
  mqtt_conn_t *mc = c->hs;
  mqtt_session_t *ss = mc->ss;
  mqr__mqtt_publish_t *m = &p->u.publish;
  mqr__mqtt_registry(c->b, false)->sys_received++; /* ($SYS/broker/messages/received) */
  /* 5.0 topic aliases: set with a topic, used without one. */
  if (MQR__MQTT_HAS(&p->props, 0x23)) {
    uint16_t a = p->props.topic_alias;
    if (a > mc->alias_max) {
      mqr__mqtt_close(c, 0x94, "topic alias %u is more than the maximum %u", a, mc->alias_max);
      return;
    }
    if (mc->aliases == NULL && (mc->aliases = mqr_calloc(mc->alias_max + 1u, sizeof *mc->aliases)) == NULL) {
      mqr__mqtt_close(c, 0x97, "out of memory for topic aliases");
      return;
    }
    if (m->topic.len) {
      char *t = mqr_malloc(m->topic.len);
      if (t == NULL) {
        mqr__mqtt_close(c, 0x97, "out of memory for a topic alias");
        return;
      }
      memcpy(t, m->topic.ptr, m->topic.len);
      mqr_free((void *)mc->aliases[a].ptr);
      mc->aliases[a] = mqr_str_n(t, m->topic.len);
    } else if (mc->aliases[a].len == 0) {
      mqr__mqtt_close(c, 0x82, "topic alias %u was never set", a);
      return;
    } else {
      m->topic = mc->aliases[a];
    }
  } else if (m->topic.len == 0) {
    mqr__mqtt_close(c, 0x82, "a PUBLISH without a topic or an alias");
    return;
  }
  /* Our Receive Maximum: a QoS 1 or 2 PUBLISH past it ends the connection ([MQTT-3.3.4-7]);
   * a QoS 2 PUBLISH sent again (its id known) is not a new one. */
  bool again = m->qos == 2 && ss->qos2_in && (ss->qos2_in[p->packet_id >> 3] & (1u << (p->packet_id & 7)));
  if (m->qos > 0 && !again && mc->in_open >= mc->in_max) {
    mqr__mqtt_close(c, 0x93, "more than Receive Maximum (%u) QoS 1 and 2 PUBLISHes unanswered", mc->in_max);
    return;
  }
  if (m->qos == 2) {
    if (ss->qos2_in == NULL && (ss->qos2_in = mqr_calloc(1, 8192)) == NULL) {
      mqr__mqtt_close(c, 0x97, "out of memory");
      return;
    }
    uint16_t id = p->packet_id;
    if (ss->qos2_in[id >> 3] & (1u << (id & 7))) { /* sent already: only PUBREC again (4.3.3) */
      write_ack(c, MQR__MQTT_PUBREC, id, 0);
      return;
    }
    ss->qos2_in[id >> 3] |= (uint8_t)(1u << (id & 7));
    mqr__mqtt_store_qos2(c->b, ss, true, id, true); /* journaled before the message */
  }
  if (m->qos > 0) mc->in_open++; /* until its PUBACK, or its PUBCOMP */
  int64_t token = 0;
  if (m->qos > 0 &&
      (token = mqr__mqtt_answer_later(c, m->qos == 1 ? MQR__MQTT_PUBACK : MQR__MQTT_PUBREC, p->packet_id)) < 0) {
    mqr__mqtt_close(c, 0x97, "out of memory");
    return;
  }
  mqr_broker_receipt_t r;
  mqr_error_t err;
  int rc = mqr__mqtt_send(c->b, c, c->sess.who, ss->id, m, &p->props, token, &r, &err);
  if (rc == MQR__PENDING) return; /* head.c's sent answers */
  if (m->qos == 0) {
    if (rc == MQR_EPERM && mc->level == 4) { /* 3.1.1 can only close it (3.3.5) */
      mqr__mqtt_close(c, 0x87, "%s", err.message);
      return;
    }
    if (rc != 0)
      mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): a QoS 0 PUBLISH dropped: %s", (long long)c->sess.id, c->peer,
               err.message);
    return;
  }
  /* Answered now (nothing waited before it, or it would wait too): the head's sent
   * writes its PUBACK or PUBREC. */
  c->head->sent(c, token, rc, &r, rc ? &err : NULL);
}

void mqr__mqtt_on_pubrel(mqr__conn_t *c, const mqr__mqtt_packet_t *p) {
  mqtt_conn_t *mc = c->hs;
  mqtt_session_t *ss = mc->ss;
  uint16_t id = p->packet_id;
  bool known = ss->qos2_in && (ss->qos2_in[id >> 3] & (1u << (id & 7)));
  if (known) {
    if (mc->in_open) mc->in_open--; /* PUBCOMP goes now */
    ss->qos2_in[id >> 3] &= (uint8_t) ~(1u << (id & 7));
    mqr__mqtt_store_qos2(c->b, ss, true, id, false);
  }
  write_ack(c, MQR__MQTT_PUBCOMP, id, known || mc->level == 4 ? 0 : 0x92);
}

/* ---- retained messages for a new subscription ---------------------------------------------------- */

typedef struct {
  mqr_broker_t *b;
  mqr_str_t filter, target; /* target: "address::queue" */
  const mqr_wildcard_t *wc;
} retained_t;

/* A copy of a retained message into the new subscription's queue, marked with the
 * address it was retained for (mqtt.retained.address): delivered with RETAIN set, to that
 * topic. */
static void copy_one(void *arg, const mqr_frame_message_t *m) {
  retained_t *x = arg;
  size_t n = m->properties.count;
  mqr_str_t *k = mqr_malloc((n + 1) * sizeof *k);
  mqr_value_t *v = mqr_malloc((n + 1) * sizeof *v);
  mqr_error_t err;
  if (k && v) {
    memcpy(k, m->properties.keys, n * sizeof *k);
    memcpy(v, m->properties.values, n * sizeof *v);
    size_t pl = sizeof MQTT_RETAIN_PREFIX - 1;
    k[n] = MQR_STR("mqtt.retained.address");
    v[n] = mqr_value_string(mqr_str_n(m->address.ptr + pl, m->address.len - pl));
    mqr_broker_message_t copy = {x->target,     MQR_ROUTING_NONE, m->durable, MQR_STR(""), m->priority, m->timestamp,
                                 m->expiration, m->user_id,       k,          v,           n + 1,       m->body};
    if (mqr_broker_send(x->b, &copy, NULL, &err) != 0)
      mqr__log(x->b, MQR_LOG_WARN, "MQTT: a retained message not given to a new subscription: %s", err.message);
  }
  mqr_free(k);
  mqr_free(v);
}

static int each_address(mqr_address_t *a, void *arg) {
  retained_t *x = arg;
  mqr_str_t name = mqr_address_name(a);
  size_t pl = sizeof MQTT_RETAIN_PREFIX - 1;
  if (name.len <= pl || memcmp(name.ptr, MQTT_RETAIN_PREFIX, pl) != 0) return 0;
  mqr_str_t topic = mqr_str_n(name.ptr + pl, name.len - pl);
  /* [MQTT-4.7.2-1]: a filter starting with a wildcard does not match a topic that starts
   * with '$'. */
  bool wild_first = x->filter.len && (x->filter.ptr[0] == x->wc->any_words || x->filter.ptr[0] == x->wc->single_word);
  if (wild_first && topic.len && topic.ptr[0] == '$') return 0;
  if (!mqr_str_eq(x->filter, topic) && !mqr_wildcard_match(x->wc, x->filter, topic)) return 0;
  mqr_broker_browse(x->b, name, 0, copy_one, x, NULL);
  return 0;
}

void mqr__mqtt_retained_to(mqr_broker_t *b, mqr_str_t filter_address, mqr_str_t address, mqr_str_t queue) {
  char target[2048];
  int len = snprintf(target, sizeof target, "%.*s::%.*s", (int)address.len, address.ptr, (int)queue.len, queue.ptr);
  if (len < 0 || (size_t)len >= sizeof target) return;
  retained_t x = {b, filter_address, mqr_str_n(target, (size_t)len), mqr_router_wildcard(mqr_broker_router(b))};
  mqr_router_foreach_address(mqr_broker_router(b), each_address, &x);
}
