/* The STOMP head's frames on the core's session (stomp.h): SEND through mqr__do_send,
 * SUBSCRIBE and UNSUBSCRIBE as consumers (durable subscriptions named by client-id as
 * Artemis names them), ACK and NACK in the ack modes auto, client (cumulative) and
 * client-individual, and MESSAGE frames written from the stored message (its body not
 * copied). docs/protocols.md has the mapping of headers to the message and back. */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "stomp.h"

/* ---- destinations -------------------------------------------------------------------------------- */

/* A destination's address and routing type: the listener's prefixes, then Artemis's
 * anycast:// and multicast://, then the type header (ANYCAST, MULTICAST). false: a bad
 * type header. */
static bool route_of(const mqr__conn_t *c, mqr_str_t dest, const mqr_str_t *type, mqr_str_t *addr, int *rt) {
  *addr = dest;
  *rt = MQR_ROUTING_NONE;
  if (!mqr_prefixes_strip(&c->l->cfg->prefixes, addr, rt)) {
    static const mqr_prefixes_t std = {2, {{{"anycast://", 10}, MQR_ANYCAST}, {{"multicast://", 12}, MQR_MULTICAST}}};
    mqr_prefixes_strip(&std, addr, rt);
  }
  if (type == NULL) return true;
  if (mqr_str_eq(*type, MQR_STR("ANYCAST")))
    *rt = MQR_ANYCAST;
  else if (mqr_str_eq(*type, MQR_STR("MULTICAST")))
    *rt = MQR_MULTICAST;
  else
    return false;
  return true;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A decimal int64 (sign allowed); false when it is not one. */
static bool parse_i64(mqr_str_t s, int64_t *out) {
  size_t i = 0;
  bool neg = s.len && s.ptr[0] == '-';
  i = neg;
  if (i == s.len || s.len - i > 18) return false;
  int64_t v = 0;
  for (; i < s.len; i++) {
    if (s.ptr[i] < '0' || s.ptr[i] > '9') return false;
    v = v * 10 + (s.ptr[i] - '0');
  }
  *out = neg ? -v : v;
  return true;
}

/* ---- SEND ---------------------------------------------------------------------------------------- */

static bool is(mqr_str_t a, const char *b) { return mqr_str_eq(a, mqr_str(b)); }

/* Headers that are the message's own fields, not its properties. */
static bool standard(mqr_str_t n) {
  return is(n, "destination") || is(n, "destination-type") || is(n, "content-length") || is(n, "transaction") ||
         is(n, "receipt") || is(n, "persistent") || is(n, "priority") || is(n, "expires") || is(n, "JMSXGroupID") ||
         is(n, "AMQ_SCHEDULED_DELAY") || is(n, MQR_PROP_SCHEDULED);
}

/* Whether name is one of the first i headers (repeated headers: the first counts). A
 * table of 1024 slots keeps a frame of many headers from costing their square. */
typedef struct {
  uint16_t slot[1024];
} seen_t;

static bool seen_before(seen_t *t, const mqr__stomp_header_t *h, uint32_t i) {
  uint32_t x = 2166136261u;
  for (size_t k = 0; k < h[i].name.len; k++) x = (x ^ (uint8_t)h[i].name.ptr[k]) * 16777619u;
  for (uint32_t s = x & 1023, tries = 0; tries < 1024; s = (s + 1) & 1023, tries++) {
    if (t->slot[s] == 0) {
      t->slot[s] = (uint16_t)(i + 1);
      return false;
    }
    if (mqr_str_eq(h[t->slot[s] - 1].name, h[i].name)) return true;
  }
  return false; /* full: more than 1024 distinct names, each kept */
}

void mqr__stomp_on_send(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  mqr_broker_t *b = c->b;
  const mqr_str_t *dest = mqr__stomp_header(f, "destination");
  if (dest == NULL || dest->len == 0) {
    mqr__stomp_error(c, f, "missing destination", "SEND needs a destination header");
    return;
  }
  mqr_str_t address;
  int rt;
  if (!route_of(c, *dest, mqr__stomp_header(f, "destination-type"), &address, &rt)) {
    mqr__stomp_error(c, f, "bad destination-type", "destination-type must be ANYCAST or MULTICAST");
    return;
  }
  mqr_broker_message_t m = {address, rt,   false, MQR_STR(""), MQR_PRIORITY_DEFAULT, wall_ms(), 0, MQR_STR(""),
                            NULL,    NULL, 0,     f->body};
  mqr_str_t *keys = mqr__stomp_broker(b)->keys;
  mqr_value_t *values = mqr__stomp_broker(b)->values;
  size_t n = 0;
  seen_t table, *seen = NULL; /* on the stack: a SEND allocates nothing */
  if (f->n_headers > 8) memset(seen = &table, 0, sizeof table);
  for (uint32_t i = 0; i < f->n_headers; i++) {
    mqr_str_t name = f->headers[i].name, v = f->headers[i].value;
    bool repeated = false;
    if (seen)
      repeated = seen_before(seen, f->headers, i);
    else
      for (uint32_t k = 0; k < i && !repeated; k++) repeated = mqr_str_eq(f->headers[k].name, name);
    if (repeated) continue;
    int64_t x;
    if (is(name, "persistent")) {
      m.durable = is(v, "true");
    } else if (is(name, "priority")) {
      if (!parse_i64(v, &x) || x < 0 || x > MQR_PRIORITY_MAX) {
        mqr__stomp_error(c, f, "bad priority", "priority must be 0-%d, not '%.*s'", MQR_PRIORITY_MAX, (int)v.len,
                         v.ptr);
        return;
      }
      m.priority = (int32_t)x;
    } else if (is(name, "expires")) {
      if (!parse_i64(v, &x) || x < 0) {
        mqr__stomp_error(c, f, "bad expires", "expires must be ms since the epoch (0: never), not '%.*s'", (int)v.len,
                         v.ptr);
        return;
      }
      m.expiration = x;
    } else if (is(name, "JMSXGroupID")) {
      keys[n] = MQR_STR(MQR_PROP_GROUP);
      values[n++] = mqr_value_string(v);
    } else if (is(name, MQR_PROP_SCHEDULED) || is(name, "AMQ_SCHEDULED_DELAY")) {
      if (parse_i64(v, &x) && x > 0) {
        keys[n] = MQR_STR(MQR_PROP_SCHEDULED);
        values[n++] = mqr_value_long(is(name, MQR_PROP_SCHEDULED) ? x : wall_ms() + x);
      }
    } else if (!standard(name)) {
      keys[n] = name;
      values[n++] = mqr_value_string(v);
    }
  }
  m.property_keys = keys;
  m.property_values = values;
  m.n_properties = n;
  mqr_tail_t tail;
  mqr__send_t s;
  mqr_error_t err;
  int rc = mqr__send_from_message(&m, &tail, &s, &err);
  if (rc) {
    mqr__stomp_error(c, f, mqr_err_name(rc), "%s", err.message);
    return;
  }
  int64_t token = mqr__stomp_receipt_later(c, f);
  if (token < 0) {
    mqr__stomp_error(c, f, "out of memory", "no memory for the receipt");
    return;
  }
  s.producer = &c->sess.producer;
  s.who = c->sess.who;
  s.token = token;
  struct mqr__acct_s *blocked = NULL;
  mqr_broker_receipt_t r;
  rc = mqr__do_send(b, &s, &r, &blocked, &err);
  if (blocked) mqr__producer_block(&c->sess.producer, blocked);
  if (rc == MQR__PENDING) return;             /* the answer comes to head.c's sent */
  if (token) mqr__stomp_receipt_drop_last(c); /* answered now: the receipt waiting last is this one's */
  if (rc != 0) {
    mqr__stomp_error(c, f, mqr_err_name(rc), "%s", err.message);
    return;
  }
  mqr__stomp_receipt(c, f);
}

/* ---- SUBSCRIBE and UNSUBSCRIBE ------------------------------------------------------------------ */

static stomp_sub_t *sub_by_id(stomp_t *st, mqr_str_t id, stomp_sub_t ***at) {
  for (stomp_sub_t **pp = &st->subs; *pp; pp = &(*pp)->next)
    if (mqr_str_eq((*pp)->id, id)) {
      if (at) *at = pp;
      return *pp;
    }
  return NULL;
}

static stomp_sub_t *sub_by_num(stomp_t *st, int64_t num) {
  for (stomp_sub_t *s = st->subs; s; s = s->next)
    if (s->num == num) return s;
  return NULL;
}

/* The durable subscription's name: durable-subscriber-name, durable-subscription-name,
 * then ActiveMQ 5's activemq.subscriptionName (Artemis's order). */
static const mqr_str_t *durable_name(const mqr__stomp_frame_t *f) {
  const mqr_str_t *n = mqr__stomp_header(f, "durable-subscriber-name");
  if (n == NULL) n = mqr__stomp_header(f, "durable-subscription-name");
  if (n == NULL) n = mqr__stomp_header(f, "activemq.subscriptionName");
  return n && n->len ? n : NULL;
}

void mqr__stomp_on_subscribe(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  stomp_t *st = c->hs;
  const mqr_str_t *dest = mqr__stomp_header(f, "destination"), *id = mqr__stomp_header(f, "id");
  const mqr_str_t *ack = mqr__stomp_header(f, "ack"), *sel = mqr__stomp_header(f, "selector");
  if (dest == NULL || dest->len == 0) {
    mqr__stomp_error(c, f, "missing destination", "SUBSCRIBE needs a destination header");
    return;
  }
  if (id == NULL && st->version >= MQR__STOMP_11) {
    mqr__stomp_error(c, f, "missing id", "SUBSCRIBE needs an id header");
    return;
  }
  if (id == NULL) id = dest; /* 1.0: the destination names it */
  uint8_t mode = ACK_AUTO;
  if (ack && is(*ack, "client"))
    mode = ACK_CLIENT;
  else if (ack && is(*ack, "client-individual"))
    mode = ACK_INDIVIDUAL;
  else if (ack && !is(*ack, "auto")) {
    mqr__stomp_error(c, f, "bad ack mode", "ack must be auto, client or client-individual, not '%.*s'", (int)ack->len,
                     ack->ptr);
    return;
  }
  uint32_t count = 0;
  for (stomp_sub_t *s = st->subs; s; s = s->next) count++;
  if (count >= STOMP_MAX_SUBSCRIPTIONS) {
    mqr__stomp_error(c, f, "too many subscriptions", "a connection has at most %d", STOMP_MAX_SUBSCRIPTIONS);
    return;
  }
  if (sub_by_id(st, *id, NULL)) {
    mqr__stomp_error(c, f, "subscription id in use", "subscription '%.*s' exists on this connection", (int)id->len,
                     id->ptr);
    return;
  }
  mqr_str_t target;
  int rt;
  if (!route_of(c, *dest, mqr__stomp_header(f, "subscription-type"), &target, &rt)) {
    mqr__stomp_error(c, f, "bad subscription-type", "subscription-type must be ANYCAST or MULTICAST");
    return;
  }
  /* A durable subscription: the queue client-id.name on the address, MULTICAST. */
  char qbuf[512];
  mqr_str_t queue = MQR_STR("");
  const mqr_str_t *dn = durable_name(f);
  if (dn) {
    if (st->client_id == NULL) {
      mqr__stomp_error(c, f, "no client-id", "a durable subscription needs CONNECT's client-id header");
      return;
    }
    int len = snprintf(qbuf, sizeof qbuf, "%s.%.*s", st->client_id, (int)dn->len, dn->ptr);
    if (len < 0 || (size_t)len >= sizeof qbuf) {
      mqr__stomp_error(c, f, "name too long", "client-id and durable subscription name are too long");
      return;
    }
    queue = mqr_str_n(qbuf, (size_t)len);
    if (rt == MQR_ROUTING_NONE) rt = MQR_MULTICAST;
  }
  if (rt == MQR_ROUTING_NONE) rt = mqr__implied_routing_type(c->b, target);
  stomp_sub_t *sub = mqr_calloc(1, sizeof *sub + id->len + dest->len + 2);
  if (sub == NULL) {
    mqr__stomp_error(c, f, "out of memory", "no memory for a subscription");
    return;
  }
  char *p = (char *)(sub + 1);
  memcpy(p, id->ptr, id->len);
  sub->id = mqr_str_n(p, id->len);
  memcpy(p + id->len + 1, dest->ptr, dest->len);
  sub->dest = mqr_str_n(p + id->len + 1, dest->len);
  sub->address = mqr_str_n(sub->dest.ptr + (target.ptr - dest->ptr), target.len); /* (a suffix of dest) */
  sub->ack = mode;
  sub->num = ++st->next_sub;
  sub->c = c;
  mqr_error_t err;
  int rc =
      mqr__session_subscribe(&c->sess, target, rt, queue, MQR__SUB_FILTER, sel ? *sel : MQR_STR(""),
                             mqr__options(c->b)->max_credit, sub->num, &mqr__stomp_consumer_ops, sub, &sub->k, &err);
  if (rc) {
    mqr_free(sub);
    mqr__stomp_error(c, f, mqr_err_name(rc), "%s", err.message);
    return;
  }
  sub->next = st->subs;
  st->subs = sub;
  mqr__stomp_receipt(c, f);
  if (c->state != MQR__CONN_CLOSING) mqr__consumer_start(sub->k);
}

void mqr__stomp_on_unsubscribe(mqr__conn_t *c, const mqr__stomp_frame_t *f) {
  stomp_t *st = c->hs;
  const mqr_str_t *id = mqr__stomp_header(f, "id");
  if (id == NULL && st->version == MQR__STOMP_10) id = mqr__stomp_header(f, "destination");
  stomp_sub_t **at, *sub = id ? sub_by_id(st, *id, &at) : NULL;
  const mqr_str_t *dn = durable_name(f);
  if (sub == NULL && dn == NULL) {
    mqr__stomp_error(c, f, "no such subscription", "no subscription '%.*s' on this connection", id ? (int)id->len : 0,
                     id ? id->ptr : "");
    return;
  }
  if (sub) {
    *at = sub->next;
    mqr__session_unsubscribe(&c->sess, sub->k);
    mqr_free(sub);
  }
  if (dn && st->client_id) { /* the durable subscription goes */
    char q[512];
    int len = snprintf(q, sizeof q, "%s.%.*s", st->client_id, (int)dn->len, dn->ptr);
    mqr_error_t err;
    mqr_queue_t *dq = len > 0 && (size_t)len < sizeof q
                          ? mqr_router_find_queue(mqr_broker_router(c->b), mqr_str_n(q, (size_t)len))
                          : NULL;
    if (dq &&
        !mqr__session_may(&c->sess, MQR_PERM_DELETE_DURABLE_QUEUE, mqr_address_name(mqr_queue_address(dq)), &err)) {
      mqr__stomp_error(c, f, mqr_err_name(err.code), "%s", err.message);
      return;
    }
    if (len > 0 && (size_t)len < sizeof q && mqr_broker_delete_queue(c->b, mqr_str_n(q, (size_t)len), &err) != 0 &&
        err.code != MQR_ENOQUEUE) {
      mqr__stomp_error(c, f, mqr_err_name(err.code), "%s", err.message);
      return;
    }
  }
  mqr__stomp_receipt(c, f);
}

void mqr__stomp_subs_free(mqr__conn_t *c) {
  stomp_t *st = c->hs;
  while (st->subs) { /* their consumers went with the session */
    stomp_sub_t *s = st->subs;
    st->subs = s->next;
    mqr_free(s);
  }
}

/* ---- ACK and NACK ------------------------------------------------------------------------------- */

/* 1.2: id, the MESSAGE's ack header ("subscription.delivery"). 1.1: message-id and
 * subscription. 1.0: message-id (any subscription of the connection). */
void mqr__stomp_on_ack(mqr__conn_t *c, const mqr__stomp_frame_t *f, bool ack) {
  stomp_t *st = c->hs;
  stomp_sub_t *sub = NULL;
  int64_t delivery = 0;
  const mqr_str_t *id = mqr__stomp_header(f, "id"), *mid = mqr__stomp_header(f, "message-id");
  if (st->version == MQR__STOMP_12 || (id && mid == NULL)) {
    if (id == NULL) {
      mqr__stomp_error(c, f, "missing id", "%s needs an id header (the MESSAGE's ack header)", ack ? "ACK" : "NACK");
      return;
    }
    const char *dot = memchr(id->ptr, '.', id->len);
    int64_t num;
    if (dot && parse_i64(mqr_str_n(id->ptr, (size_t)(dot - id->ptr)), &num) &&
        parse_i64(mqr_str_n(dot + 1, id->len - (size_t)(dot - id->ptr) - 1), &delivery))
      sub = sub_by_num(st, num);
  } else {
    int64_t msg;
    if (mid == NULL || !parse_i64(*mid, &msg)) {
      mqr__stomp_error(c, f, "missing message-id", "%s needs the MESSAGE's message-id", ack ? "ACK" : "NACK");
      return;
    }
    const mqr_str_t *sname = mqr__stomp_header(f, "subscription");
    for (stomp_sub_t *s = st->subs; s && delivery == 0; s = s->next)
      if (sname == NULL || mqr_str_eq(*sname, s->id)) {
        delivery = mqr__consumer_delivery_of(s->k, msg);
        sub = s;
      }
  }
  if (sub && sub->ack == ACK_AUTO) { /* acknowledged as written: nothing to do */
    mqr__stomp_receipt(c, f);
    return;
  }
  uint32_t n = 0;
  if (sub && delivery > 0)
    n = ack ? mqr__consumer_ack(sub->k, delivery, sub->ack == ACK_CLIENT)
            : mqr__consumer_nack(sub->k, delivery, sub->ack == ACK_CLIENT);
  if (n == 0) {
    mqr__stomp_error(c, f, "no such message", "%s of a message that is not outstanding on this connection",
                     ack ? "ACK" : "NACK");
    return;
  }
  if (ack && mqr__stomp_header(f, "receipt")) { /* RECEIPT once as safe as a durable SEND, in order */
    int64_t token = mqr__stomp_receipt_later(c, f);
    if (token < 0) {
      mqr__stomp_error(c, f, "out of memory", "no memory for the receipt");
      return;
    }
    mqr_error_t err;
    int rc = mqr__consumer_ack_answer(sub->k, &c->sess.producer, token, n, &err);
    if (rc == MQR__PENDING) { /* the answer comes to head.c's sent */
      mqr_broker_credit(sub->k, n);
      return;
    }
    mqr__stomp_receipt_drop_last(c);
    if (rc) {
      mqr__stomp_error(c, f, mqr_err_name(rc), "%s", err.message);
      return;
    }
  }
  mqr__stomp_receipt(c, f);
  mqr_broker_credit(sub->k, n); /* one more for each that went */
}

/* ---- MESSAGE frames ----------------------------------------------------------------------------- */

static bool ready(const mqr_broker_consumer_t *k) {
  const stomp_sub_t *sub = mqr__consumer_ctx(k);
  return !mqr__conn_paused(sub->c);
}

/* The MESSAGE frame: its head written (headers from the message's fields, then its
 * properties), its body the stored bytes, then the NUL. */
static int deliver(mqr_broker_consumer_t *k, mqr__entry_t *e) {
  stomp_sub_t *sub = mqr__consumer_ctx(k);
  mqr__conn_t *c = sub->c;
  stomp_t *st = c->hs;
  stomp_broker_t *net = mqr__stomp_broker(c->b);
  mqr_stored_view_t sv;
  mqr_tail_view_t tv;
  if (mqr_message_read_stored(e->msg->data, e->msg->len, &sv, NULL) != 0 ||
      mqr_message_read_tail(sv.tail, sv.tail_len, &tv, NULL) != 0)
    return MQR_ELIMIT; /* cannot be: the broker wrote it */
  /* Headers: at most 10 of the fields, then one per property. */
  mqr_props_iter_t it;
  mqr_str_t key;
  mqr_value_t val;
  uint32_t props = 0;
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  while (mqr_props_next(&it, &key, &val) == 1) props++;
  uint32_t need = 10 + props;
  if (need > net->out_cap) {
    uint32_t cap = need < 64 ? 64 : need;
    void *h = mqr_realloc(net->out, cap * sizeof(mqr__stomp_header_t));
    if (h == NULL) return MQR_ENOMEM;
    net->out = h;
    net->out_cap = cap;
  }
  if ((size_t)props * 24 > net->text_cap) { /* numbers of the properties as text, 24 bytes each */
    char *t = mqr_realloc(net->text, (size_t)props * 24);
    if (t == NULL) return MQR_ENOMEM;
    net->text = t;
    net->text_cap = (size_t)props * 24;
  }
  mqr__stomp_header_t *h = net->out;
  char nums[4][24], ackid[48], *text = net->text;
  uint32_t n = 0;
  h[n++] = (mqr__stomp_header_t){MQR_STR("subscription"), sub->id};
  snprintf(nums[0], sizeof nums[0], "%" PRId64, sv.message_id);
  h[n++] = (mqr__stomp_header_t){MQR_STR("message-id"), mqr_str(nums[0])};
  /* The destination as the subscription named it, when the message went to that address. */
  h[n++] = (mqr__stomp_header_t){MQR_STR("destination"), mqr_str_eq(sub->address, sv.address) ? sub->dest : sv.address};
  if (sub->ack != ACK_AUTO && st->version == MQR__STOMP_12) {
    snprintf(ackid, sizeof ackid, "%" PRId64 ".%" PRId64, sub->num, e->delivery);
    h[n++] = (mqr__stomp_header_t){MQR_STR("ack"), mqr_str(ackid)};
  }
  snprintf(nums[1], sizeof nums[1], "%d", (int)tv.priority);
  h[n++] = (mqr__stomp_header_t){MQR_STR("priority"), mqr_str(nums[1])};
  if (tv.timestamp) {
    snprintf(nums[2], sizeof nums[2], "%" PRId64, tv.timestamp);
    h[n++] = (mqr__stomp_header_t){MQR_STR("timestamp"), mqr_str(nums[2])};
  }
  if (tv.expiration) {
    snprintf(nums[3], sizeof nums[3], "%" PRId64, tv.expiration);
    h[n++] = (mqr__stomp_header_t){MQR_STR("expires"), mqr_str(nums[3])};
  }
  if (sv.durable) h[n++] = (mqr__stomp_header_t){MQR_STR("persistent"), MQR_STR("true")};
  if (e->delivery_count > 1) h[n++] = (mqr__stomp_header_t){MQR_STR("redelivered"), MQR_STR("true")};
  mqr_props_iter_init(&it, tv.props, tv.props_len);
  for (uint32_t i = 0; mqr_props_next(&it, &key, &val) == 1; i++) {
    if (val.type == MQR_VALUE_NULL || val.type == MQR_VALUE_BYTES) continue; /* no text for them */
    mqr_str_t name = mqr_str_eq(key, MQR_STR(MQR_PROP_GROUP)) ? MQR_STR("JMSXGroupID") : key;
    h[n++] = (mqr__stomp_header_t){name, mqr__value_text(&val, text + (size_t)i * 24, 24)};
  }
  size_t head = mqr__stomp_put_head(NULL, 0, st->version, MQR__STOMP_MESSAGE, h, n, true, tv.body.len), off;
  uint8_t *p = mqr__conn_reserve(c, head, &off);
  if (p == NULL) return MQR_ENOMEM; /* nothing written: tried again at the next dispatch */
  mqr__stomp_put_head(p, head, st->version, MQR__STOMP_MESSAGE, h, n, true, tv.body.len);
  int rc = mqr__conn_commit(c, off, head);
  if (rc == 0 && tv.body.len) rc = mqr__conn_add_stored(c, e->msg, (const uint8_t *)tv.body.ptr, tv.body.len, true);
  if (rc == 0 && (p = mqr__conn_reserve(c, 1, &off)) != NULL) {
    *p = 0;
    rc = mqr__conn_commit(c, off, 1);
  } else if (rc == 0) {
    rc = MQR_ENOMEM;
  }
  if (rc) { /* what was written of it cannot be taken back: the connection goes */
    mqr__stomp_written(c, rc);
    return 0;
  }
  st->sent_ms = uv_now(mqr__loop(c->b));
  if (sub->ack == ACK_AUTO) { /* acknowledged as it is written, and one more may come */
    mqr_broker_ack(k, e->delivery, false);
    mqr_broker_credit(k, 1);
  }
  return 0;
}

static void refused(mqr_broker_consumer_t *k, const mqr__entry_t *e) { (void)k, (void)e; }

const mqr__consumer_ops_t mqr__stomp_consumer_ops = {ready, deliver, refused};
