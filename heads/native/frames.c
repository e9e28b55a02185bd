/* The native protocol's frames from a client: CONNECT, SEND, SUBSCRIBE, UNSUBSCRIBE,
 * ACK, CREDIT, QUERY, PING, DISCONNECT, each turned into calls of the core. A bad frame
 * (cut, unknown, not Avro, not UTF-8 where names must be) gets an ERROR frame, fatal
 * where the protocol says; nothing of it stays in the broker. */
#include <stdio.h>

#include "native.h"

/* An ACK's RECEIPT: once the acknowledgement is as safe as a durable send (a replicated
 * queue's DELETE records committed), after the connection's earlier answers. */
static void ack_answer(mqr__conn_t *c, mqr_broker_consumer_t *k, int64_t receipt, uint32_t n) {
  mqr_error_t err;
  int rc = mqr__consumer_ack_answer(k, &c->sess.producer, receipt, n, &err);
  if (rc == MQR__PENDING) return;
  if (rc) {
    mqr__nat_send_error(c, rc, receipt, false, "%s", err.message);
    return;
  }
  mqr_frame_t r = {MQR_FRAME_RECEIPT, {.receipt = {receipt, MQR_ROUTE_OK, (int32_t)n}}};
  mqr__nat_reply(c, &r);
}

/* ---- frames ----------------------------------------------------------------------------------- */

static mqr_broker_consumer_t *find_sub(mqr__conn_t *c, int64_t id) { return mqr__session_consumer(&c->sess, id); }

/* Names are UTF-8, as every Avro reader of the frames they are sent on in requires. */
static bool utf8_ok(mqr__conn_t *c, mqr_str_t s, const char *what, int64_t receipt, bool fatal) {
  size_t bad = mqr_utf8_check(s.ptr, s.len);
  if (bad == s.len) return true;
  mqr__nat_send_error(c, MQR_EINVAL, receipt, fatal, "the %s is not valid UTF-8 (byte %zu of %zu is 0x%02x)", what, bad,
                      s.len, (uint8_t)s.ptr[bad]);
  return false;
}

static void on_send(mqr__conn_t *c, const uint8_t *body, size_t len) {
  mqr_broker_t *b = c->b;
  mqr_send_view_t v;
  mqr_error_t err;
  int rc = mqr_frame_send_view(body, len, &v, &err);
  if (rc) {
    mqr__nat_send_error(c, rc, 0, true, "bad SEND frame: %s", err.message);
    return;
  }
  /* the view checked that every string is UTF-8 */
  mqr__send_t s;
  mqr__send_init(&s);
  s.address = v.address;
  s.routing_type = mqr_proto_rt_to_routing(v.routing_type);
  s.durable = v.durable;
  s.duplicate_id = v.duplicate_id;
  s.scheduled = v.scheduled;
  s.group = v.group;
  s.tail = v.tail;
  s.tail_len = v.tail_len;
  s.prefixes = &c->l->cfg->prefixes;
  s.producer = &c->sess.producer;
  s.who = c->sess.who;
  s.token = v.receipt;
  struct mqr__acct_s *blocked = NULL;
  mqr_broker_receipt_t r;
  rc = mqr__do_send(b, &s, &r, &blocked, &err);
  if (blocked) mqr__producer_block(&c->sess.producer, blocked);
  if (rc == MQR__PENDING) return; /* the answer comes through the producer's ops (head.c) */
  if (rc != 0) {
    mqr__nat_send_error(c, rc, v.receipt, false, "%s", err.message);
    return;
  }
  if (v.receipt) {
    mqr_frame_t f = {MQR_FRAME_RECEIPT, {.receipt = {v.receipt, r.status, (int32_t)r.queues}}};
    mqr__nat_reply(c, &f);
  }
}

#define MAX_SUBSCRIPTIONS 1024 /* per connection */

void mqr__nat_redirect(mqr__conn_t *c, int rc, int64_t receipt) {
  uint64_t node = 0;
  const char *url = rc == MQR_ENOTLEADER ? mqr__session_leader_url(&c->sess, &node) : NULL;
  if (url == NULL) return;
  mqr_frame_t f = {MQR_FRAME_REDIRECT, {.redirect = {receipt, (int64_t)node, mqr_str(url)}}};
  mqr__nat_reply(c, &f);
}

static void on_subscribe(mqr__conn_t *c, const mqr_frame_subscribe_t *s) {
  uint32_t n = mqr__session_consumer_count(&c->sess);
  if (n >= MAX_SUBSCRIPTIONS) {
    mqr__nat_send_error(c, MQR_ELIMIT, s->subscription, false, "a connection has at most %d subscriptions",
                        MAX_SUBSCRIPTIONS);
    return;
  }
  if (find_sub(c, s->subscription)) {
    mqr__nat_send_error(c, MQR_EINVAL, s->subscription, false, "subscription %lld is already in use on this connection",
                        (long long)s->subscription);
    return;
  }
  if (!utf8_ok(c, s->target, "target", s->subscription, false) ||
      !utf8_ok(c, s->queue, "queue", s->subscription, false))
    return;
  if (s->routing_type < MQR_PROTO_RT_NONE || s->routing_type > MQR_PROTO_RT_MULTICAST || s->credit < 0) {
    mqr__nat_send_error(c, MQR_EINVAL, s->subscription, false, "routing type %d or credit %d out of range",
                        s->routing_type, s->credit);
    return;
  }
  /* The listener's prefixes apply to a consumer's target as to a send's address:
   * "anycast://orders" is the address orders, ANYCAST. */
  mqr_str_t target = s->target;
  int rt = mqr_proto_rt_to_routing(s->routing_type);
  mqr_prefixes_strip(&c->l->cfg->prefixes, &target, &rt);
  mqr_broker_consumer_t *k;
  mqr_error_t err;
  int rc = mqr__session_subscribe(&c->sess, target, rt, s->queue, 0, s->selector, (uint32_t)s->credit, s->subscription,
                                  &mqr__nat_consumer_ops, c, &k, &err);
  if (rc) {
    mqr__nat_redirect(c, rc, s->subscription);
    mqr__nat_send_error(c, rc, s->subscription, false, "%s", err.message);
    return;
  }
  mqr_frame_t f = {MQR_FRAME_SUBSCRIBED, {.subscribed = {s->subscription, mqr__consumer_queue_name(k)}}};
  mqr__nat_reply(c, &f);
  if (c->state == MQR__CONN_CLOSING) return;
  mqr__consumer_start(k);
}

static void on_unsubscribe(mqr__conn_t *c, int64_t id) {
  mqr_broker_consumer_t *k = find_sub(c, id);
  if (k) {
    mqr__session_unsubscribe(&c->sess, k);
    return;
  }
  mqr__nat_send_error(c, MQR_ENOSUB, id, false, "no subscription %lld on this connection", (long long)id);
}

typedef struct {
  mqr_broker_t *b;
  mqr__principal_t *who; /* what it may see: addresses it may browse or manage */
  bool hide;             /* the last address's queues are not shown */
  mqr_frame_address_info_t *a;
  uint32_t n, cap;
  mqr_frame_queue_info_t *q;
  uint32_t nq, capq;
  char *types; /* each address's routing types as text, 24 bytes each */
  uint32_t cap_types;
} query_t;

static int on_address(void *arg, const mqr_broker_address_info_t *ai) {
  query_t *x = arg;
  x->hide =
      !mqr__allowed(x->b, x->who, MQR_PERM_BROWSE, ai->name) && !mqr__allowed(x->b, x->who, MQR_PERM_MANAGE, ai->name);
  if (x->hide) return 0;
  if (!mqr__grow((void **)&x->a, &x->cap, x->n + 1, sizeof *x->a) ||
      !mqr__grow((void **)&x->types, &x->cap_types, (x->n + 1) * 24, 1))
    return MQR_ENOMEM;
  x->a[x->n] = (mqr_frame_address_info_t){ai->name, {NULL, 0}, (int64_t)ai->routed, (int64_t)ai->unrouted, ai->size};
  int n = mqr_routing_set_format(ai->routing_types, x->types + (size_t)x->n * 24, 24);
  x->a[x->n].routing_types.len = n > 0 ? (size_t)n : 0; /* ptr set once types stops moving */
  x->n++;
  return 0;
}

static int on_queue(void *arg, const mqr_broker_queue_info_t *qi) {
  query_t *x = arg;
  if (x->hide) return 0;
  if (!mqr__grow((void **)&x->q, &x->capq, x->nq + 1, sizeof *x->q)) return MQR_ENOMEM;
  const mqr_broker_queue_stats_t *st = &qi->stats; /* the one count, paged messages included */
  x->q[x->nq++] = (mqr_frame_queue_info_t){qi->name,
                                           qi->address,
                                           mqr_proto_rt_from_routing(qi->routing_type),
                                           (int64_t)st->depth,
                                           (int64_t)st->in_flight,
                                           (int32_t)st->consumers,
                                           (int64_t)st->enqueued,
                                           (int64_t)st->acknowledged,
                                           st->paused};
  return 0;
}

static void on_query(mqr__conn_t *c, int64_t id) {
  query_t x = {0};
  x.b = c->b;
  x.who = mqr__session_principal(&c->sess);
  int rc = mqr_broker_foreach_stats(c->b, false, on_address, on_queue, &x);
  for (uint32_t i = 0; rc == 0 && i < x.n; i++) x.a[i].routing_types.ptr = x.types + (size_t)i * 24;
  if (rc) {
    mqr__nat_send_error(c, rc, id, false, "the query failed: %s", mqr_strerror(rc));
  } else {
    mqr_broker_stats_t st;
    mqr_broker_stats(c->b, &st);
    mqr_frame_t f = {MQR_FRAME_QUERY_RESULT,
                     {.query_result = {id, {x.a, x.n}, {x.q, x.nq}, (int32_t)st.connections, (int64_t)st.dropped}}};
    rc = mqr__nat_write_frame(c, &f);
    if (rc == MQR_ELIMIT)
      mqr__nat_send_error(
          c, MQR_ELIMIT, id, false,
          "the query's result (%u addresses, %u queues) is more than the max_frame %u this connection declared", x.n,
          x.nq, mqr__nat(c)->peer_max_frame);
    else if (rc)
      mqr__nat_reply_failed(c, f.type, rc);
  }
  mqr_free(x.types);
  mqr_free(x.a);
  mqr_free(x.q);
}

/* The frame's type: its union index, an Avro int (a zigzag varint, which a writer may
 * spread over more bytes than it needs); -1 when it does not read as one. */
static inline int frame_type(const uint8_t *body, size_t len) {
  uint32_t z = 0;
  for (size_t i = 0; i < len && i < 5; i++) {
    z |= (uint32_t)(body[i] & 0x7f) << (7 * i);
    if (!(body[i] & 0x80)) return (int)((z >> 1) ^ -(z & 1));
  }
  return -1;
}

void mqr__nat_handle_frame(mqr__conn_t *c, const uint8_t *body, size_t len) {
  mqr_broker_t *b = c->b;
  int type = frame_type(body, len);
  if (c->state == MQR__CONN_HANDSHAKE && type != MQR_FRAME_CONNECT && type != MQR_FRAME_AUTH) {
    mqr__nat_send_error(c, MQR_EPROTOCOL, 0, true, "the first frame must be CONNECT, not %s",
                        mqr_frame_type_name(type));
    return;
  }
  if (type == MQR_FRAME_SEND) {
    on_send(c, body, len);
    return;
  }
  mqr_frame_t f;
  mqr_error_t err;
  mqr__nat_broker_t *nb = *mqr__head_slot(b, &mqr__native_head);
  mqr_avro_arena_t arena = {nb->scratch, sizeof nb->scratch, 0};
  int rc = mqr_frame_decode(body, len, &f, &arena, &err);
  if (rc) {
    mqr__nat_send_error(c, rc, 0, true, "bad frame: %s", err.message);
    return;
  }
  mqr_broker_consumer_t *k;
  switch (f.type) {
  case MQR_FRAME_CONNECT:
    if (c->state != MQR__CONN_HANDSHAKE || mqr__nat(c)->scram) {
      mqr__nat_send_error(c, MQR_EPROTOCOL, 0, true, "CONNECT twice");
    } else if (f.u.connect.version != MQR_PROTOCOL_VERSION) {
      mqr__nat_send_error(c, MQR_EPROTOCOL, 0, true, "protocol version %d is not supported (%d is)",
                          f.u.connect.version, MQR_PROTOCOL_VERSION);
    } else if (f.u.connect.max_frame < MQR__MIN_PEER_FRAME) {
      mqr__nat_send_error(c, MQR_EINVAL, 0, true, "max_frame %d is less than the %d bytes every client must take",
                          f.u.connect.max_frame, MQR__MIN_PEER_FRAME);
    } else if (!utf8_ok(c, f.u.connect.client_id, "client id", 0, true)) {
      return;
    } else {
      mqr__nat_on_connect(c, &f.u.connect);
    }
    return;
  case MQR_FRAME_AUTH: mqr__nat_on_auth(c, &f.u.auth); return;
  case MQR_FRAME_SUBSCRIBE: on_subscribe(c, &f.u.subscribe); return;
  case MQR_FRAME_ACK: {
    uint32_t n = 0;
    if ((k = find_sub(c, f.u.ack.subscription)) == NULL)
      mqr__nat_send_error(c, MQR_ENOSUB, f.u.ack.subscription, false, "no subscription %lld on this connection",
                          (long long)f.u.ack.subscription);
    else if ((n = mqr__consumer_ack(k, f.u.ack.delivery, f.u.ack.cumulative)) == 0)
      mqr__nat_send_error(c, MQR_ENOTFOUND, f.u.ack.receipt ? f.u.ack.receipt : f.u.ack.subscription, false,
                          "delivery %lld of subscription %lld is not outstanding", (long long)f.u.ack.delivery,
                          (long long)f.u.ack.subscription);
    else if (f.u.ack.receipt)
      ack_answer(c, k, f.u.ack.receipt, n);
    return;
  }
  case MQR_FRAME_NACK:
    if ((k = find_sub(c, f.u.nack.subscription)) == NULL)
      mqr__nat_send_error(c, MQR_ENOSUB, f.u.nack.subscription, false, "no subscription %lld on this connection",
                          (long long)f.u.nack.subscription);
    else if ((f.u.nack.counted ? mqr__consumer_nack(k, f.u.nack.delivery, false)
                               : mqr__consumer_release(k, f.u.nack.delivery)) == 0)
      mqr__nat_send_error(c, MQR_ENOTFOUND, f.u.nack.subscription, false,
                          "delivery %lld of subscription %lld is not outstanding", (long long)f.u.nack.delivery,
                          (long long)f.u.nack.subscription);
    return;
  case MQR_FRAME_CREDIT:
    if ((k = find_sub(c, f.u.credit.subscription)) == NULL)
      mqr__nat_send_error(c, MQR_ENOSUB, f.u.credit.subscription, false, "no subscription %lld on this connection",
                          (long long)f.u.credit.subscription);
    else if (f.u.credit.messages > 0)
      mqr_broker_credit(k, (uint32_t)f.u.credit.messages);
    return;
  case MQR_FRAME_UNSUBSCRIBE: on_unsubscribe(c, f.u.unsubscribe.subscription); return;
  case MQR_FRAME_QUERY: on_query(c, f.u.query.query); return;
  case MQR_FRAME_MANAGE: mqr__nat_on_manage(c, &f.u.manage); return;
  case MQR_FRAME_DISCONNECT:
    mqr__log(b, MQR_LOG_DEBUG, "connection %lld (%s): disconnected", (long long)c->sess.id, c->peer);
    mqr__conn_close(c, true);
    return;
  case MQR_FRAME_PING: {
    mqr_frame_t r = {MQR_FRAME_PONG, {.pong = {f.u.ping.token}}};
    mqr__nat_reply(c, &r);
    return;
  }
  case MQR_FRAME_PONG: return; /* hearing it was the point (the connection's heard_ms) */
  default:
    mqr__nat_send_error(c, MQR_EPROTOCOL, 0, true, "a %s frame is not one a client sends", mqr_frame_type_name(f.type));
    return;
  }
}
