/* MQTT subscriptions on the core's session (mqtt.h): a topic filter is a MULTICAST
 * subscription queue on its address (a wildcard address for '+' and '#'), named
 * <client id>.<address> (a shared subscription's, $share/<group>/<filter>, is
 * <group>.<address>, its consumers taking turns); a PUBLISH to the subscriber per message
 * at the lower of the two QoS, with its acknowledgement flows: PUBACK, and PUBREC,
 * PUBREL, PUBCOMP, packet ids kept per session, within the client's receive maximum. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mqtt.h"

/* ---- packet ids in flight ------------------------------------------------------------------------ */

/* An id's home slot in a table of mask + 1. Ids are handed out in sequence, so their own
 * value would put the ones in flight in one run as long as the window: each removal
 * would then walk the whole run (out_del). Times an odd constant, modulo a power of two,
 * they are spread over the table. */
static inline uint32_t out_home(uint16_t id, uint32_t mask) { return ((uint32_t)id * 0x9E3779B1u) & mask; }

static mqtt_out_t *out_find(mqtt_session_t *ss, uint16_t id) {
  if (ss->out_cap == 0 || id == 0) return NULL;
  for (uint32_t i = out_home(id, ss->out_cap - 1);; i = (i + 1) & (ss->out_cap - 1)) {
    if (ss->out[i].id == id) return &ss->out[i];
    if (ss->out[i].id == 0) return NULL;
  }
}

static mqtt_out_t *out_add(mqtt_session_t *ss, uint16_t id) {
  if ((ss->out_n + 1) * 2 > ss->out_cap) {
    uint32_t cap = ss->out_cap ? ss->out_cap * 2 : 64;
    mqtt_out_t *t = mqr_calloc(cap, sizeof *t), *old = ss->out;
    if (t == NULL) return NULL;
    uint32_t oc = ss->out_cap;
    ss->out = t;
    ss->out_cap = cap;
    for (uint32_t i = 0; i < oc; i++)
      if (old[i].id) {
        uint32_t k = out_home(old[i].id, cap - 1);
        while (t[k].id) k = (k + 1) & (cap - 1);
        t[k] = old[i];
      }
    mqr_free(old);
  }
  uint32_t k = out_home(id, ss->out_cap - 1);
  while (ss->out[k].id) k = (k + 1) & (ss->out_cap - 1);
  ss->out[k] = (mqtt_out_t){id, 0, NULL, 0, 0};
  ss->out_n++;
  return &ss->out[k];
}

/* Removed, the run after it moved back so that every search still finds its own. */
static void out_del(mqtt_session_t *ss, mqtt_out_t *o) {
  uint32_t mask = ss->out_cap - 1, i = (uint32_t)(o - ss->out);
  ss->out[i].id = 0;
  ss->out_n--;
  for (uint32_t j = (i + 1) & mask; ss->out[j].id; j = (j + 1) & mask) {
    uint32_t home = out_home(ss->out[j].id, mask);
    if (((j - home) & mask) >= ((j - i) & mask)) { /* its home is at or before the hole */
      ss->out[i] = ss->out[j];
      ss->out[j].id = 0;
      i = j;
    }
  }
}

void mqr__mqtt_out_released(mqtt_session_t *ss, uint16_t id) {
  mqtt_out_t *o = out_find(ss, id) ? NULL : out_add(ss, id);
  if (o) o->state = OUT_RELEASED;
}

static uint16_t next_id(mqtt_session_t *ss) {
  for (;;) {
    if (++ss->next_id == 0) ss->next_id = 1;
    if (out_find(ss, ss->next_id) == NULL) return ss->next_id;
  }
}

/* ---- SUBSCRIBE, UNSUBSCRIBE ---------------------------------------------------------------------- */

static mqtt_sub_t *sub_by_filter(mqtt_session_t *ss, mqr_str_t filter, mqtt_sub_t ***at) {
  for (mqtt_sub_t **pp = &ss->subs; *pp; pp = &(*pp)->next)
    if (mqr_str_eq((*pp)->filter, filter)) {
      if (at) *at = pp;
      return *pp;
    }
  return NULL;
}

/* $share/<group>/<filter>: the group and the filter; false when not well formed. */
static bool shared_of(mqr_str_t f, mqr_str_t *group, mqr_str_t *filter) {
  size_t pl = sizeof "$share/" - 1;
  if (f.len <= pl || memcmp(f.ptr, "$share/", pl) != 0) return false;
  const char *slash = memchr(f.ptr + pl, '/', f.len - pl);
  if (slash == NULL) return false;
  *group = mqr_str_n(f.ptr + pl, (size_t)(slash - f.ptr) - pl);
  *filter = mqr_str_n(slash + 1, f.len - (size_t)(slash + 1 - f.ptr));
  return true;
}

static void suback(mqr__conn_t *c, mqr__mqtt_type_t type, uint16_t id, const uint8_t *codes, uint32_t n) {
  mqtt_conn_t *mc = c->hs;
  size_t need = mqr__mqtt_put_suback(NULL, 0, mc->level, type, id, codes, n, NULL), off;
  uint8_t *p = mqr__conn_reserve(c, need, &off);
  if (p == NULL) {
    mqr__conn_close(c, false);
    return;
  }
  mqr__mqtt_put_suback(p, need, mc->level, type, id, codes, n, NULL);
  if (mqr__conn_commit(c, off, need) != 0) mqr__conn_close(c, false);
}

void mqr__mqtt_on_subscribe(mqr__conn_t *c, const mqr__mqtt_packet_t *p) {
  mqr_broker_t *b = c->b;
  mqtt_conn_t *mc = c->hs;
  mqtt_session_t *ss = mc->ss;
  const mqr_wildcard_t *wc = mqr_router_wildcard(mqr_broker_router(b));
  uint8_t codes[256];
  mqtt_sub_t *made[256];
  char elsewhere[512] = "", elsewhere_why[256] = ""; /* a cluster's leader that serves a filter refused here */
  uint32_t n = 0, count = 0;
  for (mqtt_sub_t *s = ss->subs; s; s = s->next) count++;
  if (p->u.subs.n > 256) {
    mqr__mqtt_close(c, 0x97, "more than 256 topic filters in one SUBSCRIBE");
    return;
  }
  size_t at = 0;
  mqr__mqtt_sub_t e;
  while (mqr__mqtt_sub_next(p, &at, &e) == 1) {
    uint32_t i = n++;
    made[i] = NULL;
    mqr_str_t group = MQR_STR(""), filter = e.filter;
    bool shared = shared_of(e.filter, &group, &filter);
    if (shared &&
        (group.len == 0 || filter.len == 0 || memchr(group.ptr, '+', group.len) || memchr(group.ptr, '#', group.len))) {
      mqr__mqtt_close(c, 0x8F, "malformed shared subscription '%.*s'", (int)e.filter.len, e.filter.ptr);
      return;
    }
    if (shared && e.no_local) { /* [MQTT-3.8.3-4] */
      mqr__mqtt_close(c, 0x82, "no-local on shared subscription '%.*s'", (int)e.filter.len, e.filter.ptr);
      return;
    }
    codes[i] = e.qos;
    uint32_t sub_id = MQR__MQTT_HAS(&p->props, 0x0B) ? p->props.subscription_id : 0;
    mqtt_sub_t **pp, *sub = sub_by_filter(ss, e.filter, &pp);
    if (sub) { /* the same filter: its options replaced, its queue kept [MQTT-3.8.4-3] */
      sub->qos = e.qos;
      sub->no_local = e.no_local;
      sub->retain_as_published = e.retain_as_published;
      sub->retain_handling = e.retain_handling;
      sub->sub_id = sub_id;
      if (e.retain_handling == 0 && !shared) made[i] = sub; /* its retained messages again */
      continue;
    }
    if (count >= MQTT_MAX_SUBSCRIPTIONS) {
      codes[i] = mc->level == 5 ? 0x97 : 0x80;
      continue;
    }
    char addr[1024], queue[1400];
    size_t alen = mqr__mqtt_to_address(wc, filter, addr, sizeof addr);
    mqr_str_t owner = shared ? group : ss->id; /* the queue: <owner>.<address> */
    int qlen = alen ? snprintf(queue, sizeof queue, "%.*s.%.*s", (int)owner.len, owner.ptr, (int)alen, addr) : -1;
    if (alen == 0 || qlen < 0 || (size_t)qlen >= sizeof queue) {
      codes[i] = mc->level == 5 ? 0x8F : 0x80; /* Topic Filter invalid (too long) */
      continue;
    }
    sub = mqr_calloc(1, sizeof *sub + e.filter.len + (size_t)qlen + 2);
    if (sub == NULL) {
      codes[i] = mc->level == 5 ? 0x97 : 0x80;
      continue;
    }
    char *t = (char *)(sub + 1);
    memcpy(t, e.filter.ptr, e.filter.len);
    sub->filter = mqr_str_n(t, e.filter.len);
    memcpy(t + e.filter.len + 1, queue, (size_t)qlen);
    sub->queue = mqr_str_n(t + e.filter.len + 1, (size_t)qlen);
    sub->ss = ss;
    sub->qos = e.qos;
    sub->no_local = e.no_local;
    sub->retain_as_published = e.retain_as_published;
    sub->retain_handling = e.retain_handling;
    sub->shared = shared;
    sub->sub_id = sub_id;
    sub->num = ++ss->next_sub;
    /* One decision for every subscription, a session's that outlives its connection too:
     * the queue <owner>.<address> is made as auto-create-queues allows, and stays until
     * UNSUBSCRIBE or the session's end (mqr__mqtt_subs_end). */
    mqr_error_t err;
    unsigned flags = shared ? MQR__SUB_SHARED : ss->expiry == 0 ? MQR__SUB_TEMPORARY : 0; /* clean: goes with it */
    int rc = mqr__session_subscribe(&c->sess, mqr_str_n(addr, alen), MQR_MULTICAST, sub->queue, flags, MQR_STR(""),
                                    mqr__options(b)->max_credit, sub->num, &mqr__mqtt_consumer_ops, sub, &sub->k, &err);
    if (rc) {
      mqr__log(b, MQR_LOG_INFO, "connection %lld (%s): MQTT subscription '%.*s' refused: %s", (long long)c->sess.id,
               c->peer, (int)e.filter.len, e.filter.ptr, err.message);
      mqr_free(sub);
      /* 0x87 Not authorized; Unspecified error (3.1.1: Failure) */
      codes[i] = rc == MQR_EPERM && mc->level == 5 ? 0x87 : 0x80;
      if (rc == MQR_ENOTLEADER && mc->level == 5 && !elsewhere[0]) { /* a cluster's leader serves it */
        const char *url = mqr__session_leader_url(&c->sess, NULL);
        if (url) snprintf(elsewhere, sizeof elsewhere, "%s", url);
        snprintf(elsewhere_why, sizeof elsewhere_why, "%.200s", err.message);
      }
      continue;
    }
    sub->next = ss->subs;
    ss->subs = sub;
    count++;
    if (e.retain_handling < 2 && !shared) made[i] = sub;
  }
  mqr__mqtt_store(b, ss, false);
  suback(c, MQR__MQTT_SUBACK, p->packet_id, codes, n);
  if (elsewhere[0]) mqr__mqtt_redirect(c, elsewhere, elsewhere_why); /* (its SUBACK said which) */
  if (c->state == MQR__CONN_CLOSING) return;
  /* Retained messages into the new queues (after SUBACK), then deliveries start. */
  for (uint32_t i = 0; i < n; i++) {
    mqtt_sub_t *sub = made[i];
    if (sub == NULL) continue;
    char addr[1024];
    size_t alen = mqr__mqtt_to_address(wc, sub->filter, addr, sizeof addr);
    mqr_str_t qaddr = mqr_address_name(mqr_queue_address(mqr_router_find_queue(mqr_broker_router(b), sub->queue)));
    mqr__mqtt_retained_to(b, mqr_str_n(addr, alen), qaddr, sub->queue);
  }
  for (mqtt_sub_t *s = ss->subs; s; s = s->next)
    if (s->k) mqr__consumer_start(s->k);
}

void mqr__mqtt_on_unsubscribe(mqr__conn_t *c, const mqr__mqtt_packet_t *p) {
  mqtt_conn_t *mc = c->hs;
  mqtt_session_t *ss = mc->ss;
  uint8_t codes[256];
  uint32_t n = 0;
  if (p->u.subs.n > 256) {
    mqr__mqtt_close(c, 0x97, "more than 256 topic filters in one UNSUBSCRIBE");
    return;
  }
  size_t at = 0;
  mqr__mqtt_sub_t e;
  while (mqr__mqtt_sub_next(p, &at, &e) == 1) {
    mqtt_sub_t **pp, *sub = sub_by_filter(ss, e.filter, &pp);
    codes[n++] = sub ? 0 : 0x11; /* No subscription existed */
    if (sub == NULL) continue;
    /* Its queue goes with it: the session's user may delete it, or it stays (5.0 says so). */
    mqr_queue_t *sq = mqr_router_find_queue(mqr_broker_router(c->b), sub->queue);
    mqr_address_t *qa = sq ? mqr_queue_address(sq) : NULL;
    if (!sub->shared && qa &&
        !mqr__session_may(&c->sess, ss->expiry == 0 ? MQR_PERM_DELETE_NON_DURABLE_QUEUE : MQR_PERM_DELETE_DURABLE_QUEUE,
                          mqr_address_name(qa), NULL)) {
      codes[n - 1] = mc->level == 5 ? 0x87 : 0; /* (3.1.1 has no code: the subscription stays) */
      continue;
    }
    *pp = sub->next;
    if (sub->k) mqr__session_unsubscribe(&c->sess, sub->k);
    for (uint32_t i = 0; i < ss->out_cap; i++)
      if (ss->out[i].id && ss->out[i].sub == sub) ss->out[i].sub = NULL; /* (its deliveries went back) */
    if (!sub->shared) mqr_broker_delete_queue(c->b, sub->queue, NULL);
    mqr_free(sub);
  }
  mqr__mqtt_store(c->b, ss, false);
  suback(c, MQR__MQTT_UNSUBACK, p->packet_id, codes, n);
}

/* ---- sessions resumed, detached, ended ----------------------------------------------------------- */

void mqr__mqtt_subs_attach(mqr__conn_t *c, mqtt_session_t *ss) {
  for (mqtt_sub_t *s = ss->subs; s; s = s->next) {
    mqr_error_t err;
    if (mqr__session_subscribe(&c->sess, s->queue, MQR_ROUTING_NONE, MQR_STR(""), 0, MQR_STR(""),
                               mqr__options(c->b)->max_credit, s->num, &mqr__mqtt_consumer_ops, s, &s->k, &err) != 0) {
      s->k = NULL;
      mqr__log(c->b, MQR_LOG_WARN, "MQTT client '%s': subscription '%.*s' not resumed: %s", ss->client_id,
               (int)s->filter.len, s->filter.ptr, err.message);
    }
  }
  for (mqtt_sub_t *s = ss->subs; s; s = s->next)
    if (s->k) mqr__consumer_start(s->k);
}

static int by_msg(const void *a, const void *b) {
  int64_t x = ((const mqtt_resend_t *)a)->msg, y = ((const mqtt_resend_t *)b)->msg;
  return x < y ? -1 : x > y;
}

void mqr__mqtt_subs_detach(mqtt_session_t *ss) {
  for (mqtt_sub_t *s = ss->subs; s; s = s->next) s->k = NULL;
  /* Deliveries not acknowledged went back to their queues with the consumers; those the
   * client has received (PUBREL sent) stay, to be released again at resume. The packet
   * ids of the others wait for their messages, to go with them again. */
  uint32_t n = 0;
  for (uint32_t i = 0; i < ss->out_cap; i++)
    if (ss->out[i].id && (ss->out[i].state == OUT_PUBLISHED || ss->out[i].state == OUT_RESEND)) n++;
  mqtt_resend_t *rs = n ? mqr_malloc(n * sizeof *rs) : NULL;
  uint32_t k = 0;
  for (uint32_t i = 0; i < ss->out_cap;) {
    mqtt_out_t *o = &ss->out[i];
    if (o->id && (o->state == OUT_PUBLISHED || o->state == OUT_RESEND)) {
      if (rs) { /* (without memory for it: the id goes, and the message gets a new one) */
        rs[k++] = (mqtt_resend_t){o->msg, o->id};
        o->state = OUT_RESEND;
        o->sub = NULL;
        i++;
        continue;
      }
      out_del(ss, o); /* the run moved back: look at i again */
      continue;
    }
    i++;
  }
  if (k) qsort(rs, k, sizeof *rs, by_msg);
  mqr_free(ss->resend);
  ss->resend = rs;
  ss->resend_len = ss->resend_n = k;
}

/* The ids kept for messages not delivered again are given up (all 65535 would be in use). */
static void resend_forget(mqtt_session_t *ss) {
  for (uint32_t i = 0; i < ss->out_cap;)
    if (ss->out[i].id && ss->out[i].state == OUT_RESEND)
      out_del(ss, &ss->out[i]); /* the run moved back: look at i again */
    else
      i++;
  mqr_free(ss->resend);
  ss->resend = NULL;
  ss->resend_len = ss->resend_n = 0;
}

/* The packet id kept for msg's delivery on a connection that went (its OUT_RESEND slot,
 * made OUT_PUBLISHED again), or NULL. */
static mqtt_out_t *resend_slot(mqtt_session_t *ss, int64_t msg) {
  if (ss->resend_n == 0) return NULL;
  size_t lo = 0, hi = ss->resend_len;
  while (lo < hi) { /* the first with msg or after */
    size_t mid = (lo + hi) / 2;
    if (ss->resend[mid].msg < msg)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < ss->resend_len && ss->resend[lo].msg == msg; lo++) {
    if (ss->resend[lo].id == 0) continue; /* used: a copy for another subscription may follow */
    mqtt_out_t *o = out_find(ss, ss->resend[lo].id);
    ss->resend[lo].id = 0;
    if (--ss->resend_n == 0) {
      mqr_free(ss->resend);
      ss->resend = NULL;
      ss->resend_len = 0;
    }
    if (o && o->state == OUT_RESEND) return o;
  }
  return NULL;
}

void mqr__mqtt_subs_end(mqr_broker_t *b, mqtt_session_t *ss) {
  for (mqtt_sub_t *s = ss->subs; s; s = s->next)
    if (!s->shared) mqr_broker_delete_queue(b, s->queue, NULL);
}

void mqr__mqtt_resend_releases(mqr__conn_t *c, mqtt_session_t *ss) {
  mqtt_conn_t *mc = c->hs;
  /* In the order of their ids from the oldest ([MQTT-4.6.0-3]): ids are handed out in
   * sequence, so the oldest is the one after the last given, round the 16-bit space (the
   * table's order is the hash's). */
  for (uint32_t k = 1; ss->out_n && k <= 65535; k++) {
    uint16_t id = (uint16_t)(((uint32_t)ss->next_id + k - 1) % 65535 + 1);
    mqtt_out_t *o = out_find(ss, id);
    if (o == NULL || o->state != OUT_RELEASED) continue;
    uint8_t buf[16];
    size_t n = mqr__mqtt_put_ack(buf, sizeof buf, mc->level, MQR__MQTT_PUBREL, id, 0, NULL);
    if (mqr__mqtt_out(c, buf, n) != 0) return;
  }
}

/* ---- PUBACK, PUBREC, PUBCOMP -------------------------------------------------------------------- */

static void wake(mqtt_session_t *ss, bool was_full) {
  if (!was_full) return;
  for (mqtt_sub_t *s = ss->subs; s; s = s->next)
    if (s->k) mqr__consumer_ready(s->k);
}

void mqr__mqtt_on_ack(mqr__conn_t *c, const mqr__mqtt_packet_t *p) {
  mqtt_conn_t *mc = c->hs;
  mqtt_session_t *ss = mc->ss;
  mqtt_out_t *o = out_find(ss, p->packet_id);
  bool full = ss->out_n - ss->resend_n >= mc->receive_max;
  if (p->type == MQR__MQTT_PUBCOMP) {
    if (o && o->state == OUT_RELEASED) {
      out_del(ss, o);
      mqr__mqtt_store_qos2(c->b, ss, false, p->packet_id, false);
      wake(ss, full);
    }
    return;
  }
  if (o == NULL || o->state != OUT_PUBLISHED) return; /* not ours to answer: ignored */
  if ((p->type == MQR__MQTT_PUBACK) == (o->delivery < 0)) {
    /* PUBACK for a QoS 2 delivery or PUBREC for a QoS 1 one: not its flow */
    mqr__mqtt_close(c, 0x82, "%s for packet %u, which is not of its QoS",
                    p->type == MQR__MQTT_PUBACK ? "PUBACK" : "PUBREC", p->packet_id);
    return;
  }
  int64_t delivery = o->delivery < 0 ? -o->delivery : o->delivery;
  mqtt_sub_t *sub = o->sub;
  mqr_broker_consumer_t *k = sub ? sub->k : NULL;
  uint32_t acked = k ? mqr__consumer_ack(k, delivery, false) : 0; /* received: the message leaves its queue */
  if (k) mqr_broker_credit(k, 1);
  if (p->type == MQR__MQTT_PUBACK || p->reason >= 0x80) { /* done (a PUBREC refusing it ends it too) */
    out_del(ss, o);
    wake(ss, full);
    return;
  }
  o->state = OUT_RELEASED;
  o->sub = NULL;
  mqr__mqtt_store_qos2(c->b, ss, false, p->packet_id, true); /* kept before the PUBREL goes */
  if (acked == 0) {                                          /* (its subscription went: nothing left to make safe) */
    uint8_t buf[16];
    size_t n = mqr__mqtt_put_ack(buf, sizeof buf, mc->level, MQR__MQTT_PUBREL, p->packet_id, 0, NULL);
    if (mqr__mqtt_out(c, buf, n) != 0) mqr__conn_close(c, false);
    return;
  }
  /* The PUBREL is the broker's answer: once the acknowledgement is as safe as a durable
   * PUBLISH (a replicated queue's group committed it), after the connection's earlier
   * answers (head.c's sent writes it). */
  int64_t token = mqr__mqtt_answer_later(c, MQR__MQTT_PUBREL, p->packet_id);
  if (token < 0) {
    mqr__mqtt_close(c, 0x97, "out of memory");
    return;
  }
  mqr_error_t err;
  int rc = mqr__consumer_ack_answer(k, &c->sess.producer, token, acked, &err);
  if (rc != MQR__PENDING) c->head->sent(c, token, rc, NULL, rc ? &err : NULL);
}

/* ---- PUBLISH to a subscriber ----------------------------------------------------------------------- */

static bool ready(const mqr_broker_consumer_t *k) {
  const mqtt_sub_t *sub = mqr__consumer_ctx(k);
  mqr__conn_t *c = sub->ss->conn;
  if (c == NULL || mqr__conn_paused(c)) return false;
  const mqtt_conn_t *mc = c->hs;
  return sub->ss->out_n - sub->ss->resend_n < mc->receive_max;
}

static bool internal(mqr_str_t k) {
  return (k.len >= 5 && memcmp(k.ptr, "mqtt.", 5) == 0) || (k.len >= 4 && memcmp(k.ptr, "_AMQ", 4) == 0) ||
         (k.len >= 5 && memcmp(k.ptr, "__AMQ", 5) == 0) || mqr_str_eq(k, MQR_STR("content-type"));
}

/* The next pair of a kept user-property list (MQR__MQTT_USER_LIST) from *at: true, or
 * false at its end (or where it stops reading as one: the broker wrote it, so that is a
 * foreign writer's). */
static bool user_list_next(mqr_str_t list, size_t *at, mqr_str_t *k, mqr_str_t *v) {
  size_t left = list.len - *at;
  if (left < 4) return false;
  const uint8_t *p = (const uint8_t *)list.ptr + *at;
  size_t kl = (size_t)(p[0] << 8 | p[1]);
  if (left < 4 + kl) return false;
  size_t vl = (size_t)(p[2 + kl] << 8 | p[3 + kl]);
  if (left < 4 + kl + vl) return false;
  *k = mqr_str_n((const char *)p + 2, kl);
  *v = mqr_str_n((const char *)p + 4 + kl, vl);
  *at += 4 + kl + vl;
  return true;
}

/* The pairs of a kept list; 0 when the whole of it does not read. */
static uint32_t user_list_count(mqr_str_t list) {
  uint32_t n = 0;
  size_t at = 0;
  mqr_str_t k, v;
  while (user_list_next(list, &at, &k, &v)) n++;
  return at == list.len ? n : 0;
}

/* Whether name is one of the kept list's (its first value is also a message property). */
static bool user_list_has(mqr_str_t list, mqr_str_t name) {
  size_t at = 0;
  mqr_str_t k, v;
  while (user_list_next(list, &at, &k, &v))
    if (mqr_str_eq(k, name)) return true;
  return false;
}

/* Delivered and done with at once (QoS 0, or a message the client must not get). */
static void done(mqr_broker_consumer_t *k, int64_t delivery) {
  mqr_broker_ack(k, delivery, false);
  mqr_broker_credit(k, 1);
}

static int deliver(mqr_broker_consumer_t *k, mqr__entry_t *e) {
  mqtt_sub_t *sub = mqr__consumer_ctx(k);
  mqtt_session_t *ss = sub->ss;
  mqr__conn_t *c = ss->conn;
  mqtt_conn_t *mc = c->hs;
  mqtt_registry_t *reg = mqr__mqtt_registry(c->b, false);
  mqr_stored_view_t sv;
  mqr_tail_view_t tv;
  reg->sys_sent++; /* ($SYS/broker/messages/sent) */
  if (mqr_message_read_stored(e->msg->data, e->msg->len, &sv, NULL) != 0 ||
      mqr_message_read_tail(sv.tail, sv.tail_len, &tv, NULL) != 0) {
    done(k, e->delivery); /* cannot be: the broker wrote it */
    return 0;
  }
  /* Its properties: what MQTT says about it, then user properties. */
  uint32_t props = 0;
  mqr_props_iter_t it;
  mqr_str_t key;
  mqr_value_t val;
  mqr_str_t list = mqr_str_n(NULL, 0); /* the user properties as they came, when kept */
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  while (mqr_props_next(&it, &key, &val) == 1) {
    props++;
    if (val.type == MQR_VALUE_BYTES && mqr_str_eq(key, MQR_STR(MQR__MQTT_USER_LIST))) list = val.u.s;
  }
  uint32_t listed = user_list_count(list);
  if (listed == 0) list = mqr_str_n(NULL, 0);
  props += listed;
  if (reg->ukeys == NULL || props > reg->u_cap || (size_t)props * 24 > reg->text_cap) { /* (made at the first) */
    uint32_t cap = props < 16 ? 16 : props;
    mqr_str_t *uk = mqr_realloc(reg->ukeys, cap * sizeof *uk);
    if (uk) reg->ukeys = uk;
    mqr_str_t *uv = uk ? mqr_realloc(reg->uvalues, cap * sizeof *uv) : NULL;
    if (uv) reg->uvalues = uv;
    char *text = uv ? mqr_realloc(reg->text, (size_t)cap * 24) : NULL;
    if (text) reg->text = text, reg->text_cap = (size_t)cap * 24;
    if (text == NULL) return MQR_ENOMEM;
    reg->u_cap = cap;
  }
  int qos = sub->qos;
  bool retained = false, from_retain = false, mine = false;
  mqr_str_t topic_address = sv.address;
  mqr__mqtt_props_t pr = {0};
  uint32_t nu = 0;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  for (uint32_t i = 0; mqr_props_next(&it, &key, &val) == 1; i++) {
    if (mqr_str_eq(key, MQR_STR("mqtt.qos.level")) && val.type == MQR_VALUE_INT && val.u.i < qos)
      qos = val.u.i < 0 ? 0 : val.u.i;
    else if (mqr_str_eq(key, MQR_STR("mqtt.message.retain")) && val.type == MQR_VALUE_BOOL)
      retained = val.u.b;
    else if (mqr_str_eq(key, MQR_STR("mqtt.retained.address")) && val.type == MQR_VALUE_STRING)
      from_retain = true, topic_address = val.u.s;
    else if (mqr_str_eq(key, MQR_STR("__AMQ_CID")) && val.type == MQR_VALUE_STRING)
      mine = mqr_str_eq(val.u.s, ss->id);
    else if (mqr_str_eq(key, MQR_STR("content-type")) && val.type == MQR_VALUE_STRING)
      pr.have |= 1ull << 0x03, pr.content_type = val.u.s;
    else if (mqr_str_eq(key, MQR_STR("mqtt.response.topic")) && val.type == MQR_VALUE_STRING)
      pr.have |= 1ull << 0x08, pr.response_topic = val.u.s;
    else if (mqr_str_eq(key, MQR_STR("mqtt.correlation.data")) &&
             (val.type == MQR_VALUE_BYTES || val.type == MQR_VALUE_STRING))
      pr.have |= 1ull << 0x09, pr.correlation_data = val.u.s;
    else if (mqr_str_eq(key, MQR_STR("mqtt.payload.format.indicator")) && val.type == MQR_VALUE_INT)
      pr.have |= 1ull << 0x01, pr.payload_format = (uint8_t)(val.u.i != 0);
    else if (!internal(key) && val.type != MQR_VALUE_NULL && val.type != MQR_VALUE_BYTES && !user_list_has(list, key)) {
      reg->ukeys[nu] = key;
      reg->uvalues[nu++] = mqr__value_text(&val, reg->text + (size_t)i * 24, 24);
    }
  }
  for (size_t at = 0; user_list_next(list, &at, &reg->ukeys[nu], &reg->uvalues[nu]);)
    nu++; /* in order, repeats and all */
  /* [MQTT-4.7.2-1]: a filter that starts with a wildcard matches no topic starting with '$'. */
  const mqr_wildcard_t *wc = mqr_router_wildcard(mqr_broker_router(c->b));
  bool dollar = topic_address.len && topic_address.ptr[0] == '$';
  if ((sub->no_local && mine && !from_retain) || /* [MQTT-3.8.3-3]: not to its own publisher */
      (dollar && sub->filter.len && (sub->filter.ptr[0] == '+' || sub->filter.ptr[0] == '#'))) {
    done(k, e->delivery);
    return 0;
  }
  if (tv.expiration) { /* the time it has left, in seconds */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t left = tv.expiration - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    pr.have |= 1ull << 0x02;
    pr.message_expiry = left <= 0 ? 0 : (uint32_t)((left + 999) / 1000);
  }
  /* The topic: the address mapped back. */
  if (mc->topic_cap < topic_address.len + 1) {
    char *t = mqr_realloc(mc->topic, topic_address.len + 1);
    if (t == NULL) return MQR_ENOMEM;
    mc->topic = t;
    mc->topic_cap = topic_address.len + 1;
  }
  size_t tl = mqr__mqtt_to_topic(wc, topic_address, mc->topic, mc->topic_cap);
  mqr__mqtt_publish_t m = {(uint8_t)qos, e->delivery_count > 1 && qos > 0,
                           from_retain || (sub->retain_as_published && retained), mqr_str_n(mc->topic, tl), tv.body};
  mqr__mqtt_out_props_t o = {&pr, reg->ukeys, reg->uvalues, nu, &sub->sub_id, sub->sub_id ? 1u : 0u};
  int64_t new_alias = -1;        /* the slot of an alias this PUBLISH sets, until it has gone */
  if (mc->out_alias_max && tl) { /* a topic it has an alias for goes as the alias alone */
    int64_t slot = mqr__smap_find(&mc->out_aliases, m.topic);
    uintptr_t alias = slot >= 0 ? (uintptr_t)mc->out_aliases.slots[slot].val : 0;
    if (alias) {
      m.topic = mqr_str_n(mc->topic, 0);
    } else if (mc->out_alias_next < mc->out_alias_max &&
               (slot = mqr__smap_slot(&mc->out_aliases, m.topic, NULL)) >= 0) {
      alias = ++mc->out_alias_next;
      mc->out_aliases.slots[slot].val = (void *)alias;
      new_alias = slot;
    }
    if (alias) pr.have |= 1ull << 0x23, pr.topic_alias = (uint16_t)alias;
  }
  /* A message published on a connection that went goes again with its packet id. */
  mqtt_out_t *slot = qos && e->delivery_count > 1 ? resend_slot(ss, e->msg->id) : NULL;
  if (qos && slot == NULL && ss->out_n >= 65534 && ss->resend_n) resend_forget(ss);
  uint16_t id = slot ? slot->id : qos ? next_id(ss) : 0;
  if (slot) m.dup = true;
  size_t head = mqr__mqtt_put_publish(NULL, 0, mc->level, &m, id ? id : 1, tv.body.len, mc->level == 5 ? &o : NULL);
  if (head + tv.body.len > mc->max_packet) { /* [MQTT-3.1.2-25]: more than it takes: discarded */
    if (new_alias >= 0) mc->out_aliases.slots[new_alias].val = NULL, mc->out_alias_next--; /* never set */
    if (slot) out_del(ss, slot);
    done(k, e->delivery);
    return 0;
  }
  if (qos && slot == NULL && (slot = out_add(ss, id)) == NULL) return MQR_ENOMEM;
  size_t off;
  uint8_t *p = mqr__conn_reserve(c, head, &off);
  if (p == NULL) {
    if (slot) out_del(ss, slot);
    return MQR_ENOMEM;
  }
  mqr__mqtt_put_publish(p, head, mc->level, &m, id, tv.body.len, mc->level == 5 ? &o : NULL);
  int rc = mqr__conn_commit(c, off, head);
  if (rc == 0 && tv.body.len) rc = mqr__conn_add_stored(c, e->msg, (const uint8_t *)tv.body.ptr, tv.body.len, true);
  if (rc) { /* part of it written: the connection goes, the delivery back to its queue */
    if (slot) out_del(ss, slot);
    mqr__conn_close(c, false);
    return 0;
  }
  if (slot) {
    slot->state = OUT_PUBLISHED;
    slot->msg = e->msg->id;
    slot->sub = sub;
    slot->delivery = qos == 2 ? -e->delivery : e->delivery; /* the sign tells the flow */
  } else {
    done(k, e->delivery);
  }
  return 0;
}

static void refused(mqr_broker_consumer_t *k, const mqr__entry_t *e) { (void)k, (void)e; }

const mqr__consumer_ops_t mqr__mqtt_consumer_ops = {ready, deliver, refused};
