/* The MQTT head's connections and sessions (mqtt.h): CONNECT and CONNACK as MQTT 3.1.1
 * and 5.0 have them (client identifiers assigned, clean session and clean start, session
 * expiry, a session taken over by a new connection of its client id), keep-alive with the
 * one-and-a-half rule, wills (delayed in 5.0) published when a connection ends without
 * DISCONNECT, the DISCONNECT a 5.0 server sends with a reason, and the head's ops. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "mqtt.h"

mqtt_registry_t *mqr__mqtt_registry(mqr_broker_t *b, bool make) {
  void **slot = mqr__head_slot(b, &mqr__mqtt_head);
  if (*slot == NULL && make) *slot = mqr_calloc(1, sizeof(mqtt_registry_t));
  return *slot;
}

static mqtt_registry_t *registry(mqr_broker_t *b) { return mqr__mqtt_registry(b, false); }

/* ---- writing ------------------------------------------------------------------------------------- */

int mqr__mqtt_out(mqr__conn_t *c, const uint8_t *bytes, size_t n) {
  size_t off;
  uint8_t *p = mqr__conn_reserve(c, n, &off);
  if (p == NULL) return MQR_ENOMEM;
  memcpy(p, bytes, n);
  return mqr__conn_commit(c, off, n);
}

/* A 5.0 client's DISCONNECT with reason and its Reason String (text, up to 200 bytes) and,
 * when ref is not NULL, a Server Reference; nothing for 3.1.1 (it has no DISCONNECT from
 * the server). Closing anyway: a write that fails is not told. */
static void say_disconnect(mqr__conn_t *c, uint8_t reason, const char *text, const char *ref) {
  mqtt_conn_t *mc = c->hs;
  if (mc == NULL || !mc->connected || mc->level != 5) return;
  mqr__mqtt_props_t pr = {.have = 1ull << 0x1F, .reason = mqr_str(text)};
  if (pr.reason.len > 200) pr.reason.len = 200;
  if (ref) pr.have |= 1ull << 0x1C, pr.server_reference = mqr_str(ref);
  mqr__mqtt_out_props_t o = {&pr, NULL, NULL, 0, NULL, 0};
  uint8_t buf[1024];
  size_t n = mqr__mqtt_put_disconnect(buf, sizeof buf, reason, &o);
  if (n <= sizeof buf) (void)mqr__mqtt_out(c, buf, n);
}

void mqr__mqtt_close(mqr__conn_t *c, uint8_t reason, const char *fmt, ...) {
  if (c->state == MQR__CONN_CLOSING) return;
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  say_disconnect(c, reason, text, NULL);
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): MQTT 0x%02X: %s; closing it", (long long)c->sess.id, c->peer,
           reason, text);
  mqr__conn_close(c, true);
}

void mqr__mqtt_redirect(mqr__conn_t *c, const char *url, const char *why) {
  if (c->state == MQR__CONN_CLOSING) return;
  const char *host = strstr(url, "://");
  host = host ? host + 3 : url;       /* MQTT's Server Reference: HOST:PORT */
  say_disconnect(c, 0x9C, why, host); /* Use another server */
  mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): MQTT client sent to %s: %s", (long long)c->sess.id, c->peer, host,
           why);
  mqr__conn_close(c, true);
}

int64_t mqr__mqtt_answer_later(mqr__conn_t *c, uint8_t type, uint16_t id) {
  mqtt_conn_t *mc = c->hs;
  if (mc->w_n == mc->w_cap) {
    uint32_t ncap = mc->w_cap ? mc->w_cap * 2 : 16;
    void *nw = mqr_malloc(ncap * sizeof *mc->waiting);
    if (nw == NULL) return -1;
    for (uint32_t i = 0; i < mc->w_n; i++)
      memcpy((char *)nw + i * sizeof *mc->waiting, &mc->waiting[(mc->w_head + i) % mc->w_cap], sizeof *mc->waiting);
    mqr_free(mc->waiting);
    mc->waiting = nw;
    mc->w_cap = ncap;
    mc->w_head = 0;
  }
  uint32_t at = (mc->w_head + mc->w_n++) % mc->w_cap;
  mc->waiting[at].token = ++mc->next_token;
  mc->waiting[at].id = id;
  mc->waiting[at].type = type;
  return mc->next_token;
}

/* ---- sessions ------------------------------------------------------------------------------------- */

static mqtt_session_t *find_session(mqr_broker_t *b, mqr_str_t id, mqtt_session_t ***at) {
  for (mqtt_session_t **pp = &registry(b)->sessions; *pp; pp = &(*pp)->next)
    if (mqr_str_eq((*pp)->id, id)) {
      if (at) *at = pp;
      return *pp;
    }
  return NULL;
}

/* The will of ss, published now (its copy goes). */
static void publish_will(mqr_broker_t *b, mqtt_session_t *ss) {
  if (ss->will == NULL) return;
  mqr__mqtt_packet_t p;
  uint8_t reason;
  mqr_error_t err;
  if (mqr__mqtt_decode(ss->will, ss->will_len, 0, &p, &reason, &err) == 0 && p.u.connect.will) {
    const mqr__mqtt_connect_t *cn = &p.u.connect;
    mqr__mqtt_publish_t m = {cn->will_qos, false, cn->will_retain, cn->will_topic, cn->will_payload};
    mqr_broker_receipt_t r;
    int rc = mqr__mqtt_send(b, NULL, ss->will_who, ss->id, &m, &cn->will_props, 0, &r, &err);
    if (rc != 0 && rc != MQR__PENDING)
      mqr__log(b, MQR_LOG_WARN, "MQTT client '%s': its will could not be published: %s", ss->client_id, err.message);
    else
      mqr__log(b, MQR_LOG_DEBUG, "MQTT client '%s': will published to '%.*s'", ss->client_id, (int)cn->will_topic.len,
               cn->will_topic.ptr);
  }
  mqr_free(ss->will);
  ss->will = NULL;
  ss->will_len = 0;
  ss->will_at = 0;
  mqr__principal_release(ss->will_who);
  ss->will_who = NULL;
}

static void session_free(mqtt_session_t *ss) {
  while (ss->subs) {
    mqtt_sub_t *s = ss->subs;
    ss->subs = s->next;
    mqr_free(s);
  }
  mqr_free(ss->qos2_in);
  mqr_free(ss->out);
  mqr_free(ss->resend);
  mqr_free(ss->will);
  mqr__principal_release(ss->will_who);
  mqr_free(ss);
}

/* The session is over: its will if one waits, its queues, its state. */
static void session_end(mqr_broker_t *b, mqtt_session_t **at) {
  mqtt_session_t *ss = *at;
  *at = ss->next;
  registry(b)->n--;
  publish_will(b, ss);
  mqr__mqtt_subs_end(b, ss);
  mqr__mqtt_store(b, ss, true);
  session_free(ss);
}

void mqr__mqtt_free_sessions(mqr_broker_t *b) {
  mqtt_registry_t *r = registry(b);
  if (r == NULL) return;
  while (r->sessions) {
    mqtt_session_t *ss = r->sessions;
    r->sessions = ss->next;
    session_free(ss);
  }
  mqr_free(r->addr);
  mqr_free(r->keys);
  mqr_free(r->values);
  mqr_free(r->ukeys);
  mqr_free(r->raw);
  mqr_free(r->uvalues);
  mqr_free(r->text);
  mqr_free(r);
  *mqr__head_slot(b, &mqr__mqtt_head) = NULL;
}

void mqr__mqtt_tick_sessions(mqr_broker_t *b, uint64_t now) {
  mqtt_registry_t *r = registry(b);
  for (mqtt_session_t **pp = &r->sessions; *pp;) {
    mqtt_session_t *ss = *pp;
    if (ss->conn == NULL && ss->will_at && now >= ss->will_at) publish_will(b, ss);
    if (ss->conn == NULL && ss->expiry != UINT32_MAX && now - ss->gone_ms >= (uint64_t)ss->expiry * 1000) {
      mqr__log(b, MQR_LOG_DEBUG, "MQTT client '%s': session expired", ss->client_id);
      session_end(b, pp);
      continue;
    }
    pp = &ss->next;
  }
  mqr__mqtt_sys_tick(b, now);
}

/* ---- CONNECT ----------------------------------------------------------------------------------- */

static void connack(mqr__conn_t *c, uint8_t level, bool present, uint8_t code, const mqr__mqtt_props_t *pr) {
  mqr__mqtt_out_props_t o = {pr, NULL, NULL, 0, NULL, 0};
  uint8_t buf[512];
  size_t n = mqr__mqtt_put_connack(buf, sizeof buf, level, present, code, &o);
  if (n > sizeof buf || mqr__mqtt_out(c, buf, n) != 0) mqr__conn_close(c, false);
}

/* A CONNECT refused: its CONNACK's code (3.1.1's or 5.0's), then the close. */
static void refuse(mqr__conn_t *c, uint8_t level, uint8_t code5, uint8_t code4, const char *why) {
  connack(c, level, false, level == 5 ? code5 : code4, NULL);
  mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): MQTT CONNECT refused: %s", (long long)c->sess.id, c->peer, why);
  mqr__conn_close(c, true);
}

/* The answer to a CONNECT's credentials: its CONNECT is taken again, now with it. */
static void auth_answered(void *ctx, int status, mqr__principal_t *who) {
  mqr__conn_t *c = ctx;
  mqtt_conn_t *mc = c->hs;
  mc->auth = NULL;
  mc->auth_done = true;
  mc->auth_status = status;
  mc->auth_who = who;
  mqr__conn_hold(c, false);
}

/* Checks a CONNECT's user name and password: true when the answer is in (mc->auth_*),
 * false when it comes later (the connection is held and the CONNECT stays unread). */
static bool authenticate(mqr__conn_t *c, const mqr__mqtt_connect_t *cn) {
  mqtt_conn_t *mc = c->hs;
  if (mc->auth_done) return true;
  mqr_str_t user = cn->has_user ? cn->user : MQR_STR(""), pw = cn->has_password ? cn->password : MQR_STR("");
  if (cn->has_user && user.len == 0) user = MQR_STR(" "); /* an empty name is a name, not anonymous: refused */
  mqr__principal_t *who = NULL;
  const char *identity = mqr__conn_identity(c);
  int rc = !cn->has_user && identity ? mqr__authenticate_certificate(c->b, identity, c->peer, &who)
                                     : mqr__authenticate(c->b, user, pw, c->peer, auth_answered, c, &who, &mc->auth);
  if (rc == MQR__PENDING) {
    mqr__conn_hold(c, true);
    return false;
  }
  mc->auth_done = true;
  mc->auth_status = rc;
  mc->auth_who = who;
  return true;
}

static void on_connect(mqr__conn_t *c, const mqr__mqtt_packet_t *p, const uint8_t *raw, size_t raw_len) {
  mqr_broker_t *b = c->b;
  mqtt_conn_t *mc = c->hs;
  const mqr__mqtt_connect_t *cn = &p->u.connect;
  uint8_t level = cn->level;
  if (level == 5 && MQR__MQTT_HAS(&p->props, 0x15) && mc->scram == NULL) { /* SCRAM-SHA-256 is the one there is */
    refuse(c, level, 0x8C, 0x05, "an authentication method other than SCRAM-SHA-256 is not supported");
    return;
  }
  if (mc->auth_status != 0) { /* [MQTT-3.2.2-6]: a CONNACK with the code, then the close */
    bool anonymous = mc->auth_status == MQR_EPERM;
    char why[200];
    snprintf(why, sizeof why, "%s", anonymous ? "anonymous clients are not allowed" : "bad user name or password");
    refuse(c, level, anonymous ? 0x87 : 0x86, anonymous ? 0x05 : 0x04, why);
    return;
  }
  mqr__session_set_principal(&c->sess, mc->auth_who);
  mc->auth_who = NULL;
  char assigned[48];
  mqr_str_t id = cn->client_id;
  if (id.len == 0) {
    if (level == 4 && !cn->clean) {
      refuse(c, level, 0x85, 0x02, "an empty client identifier needs a clean session");
      return;
    }
    snprintf(assigned, sizeof assigned, "mqr-%lld-%llx", (long long)c->sess.id, (unsigned long long)uv_hrtime());
    id = mqr_str(assigned);
  }
  uint32_t expiry =
      level == 5 ? (MQR__MQTT_HAS(&p->props, 0x11) ? p->props.session_expiry : 0) : (cn->clean ? 0 : UINT32_MAX);
  if (expiry == 0xFFFFFFFFu) expiry = UINT32_MAX;
  mqtt_session_t **at, *ss = find_session(b, id, &at);
  bool present = false;
  if (ss && ss->conn) { /* taken over: the old connection goes */
    mqr__conn_t *old = ss->conn;
    mqtt_conn_t *om = old->hs;
    om->disconnected = false;
    mqr__mqtt_close(old, 0x8E, "session taken over by a new connection of client '%.*s'", (int)id.len, id.ptr);
    /* (its release detached the session and dealt with its will) */
    ss = find_session(b, id, &at);
  }
  if (ss && (cn->clean || ss->conn)) {
    session_end(b, at);
    ss = NULL;
  }
  if (ss) {
    present = true;
    if (ss->will) mqr_free(ss->will); /* a delayed will of the last connection does not go */
    ss->will = NULL;
    ss->will_at = 0;
  } else {
    if ((ss = mqr_calloc(1, sizeof *ss + id.len + 1)) == NULL) {
      refuse(c, level, 0x97, 0x03, "out of memory for a session");
      return;
    }
    memcpy(ss->client_id, id.ptr, id.len);
    ss->id = mqr_str_n(ss->client_id, id.len);
    ss->next = registry(b)->sessions;
    registry(b)->sessions = ss;
    registry(b)->n++;
  }
  ss->expiry = expiry;
  ss->level = level;
  if (cn->will) { /* the CONNECT kept: the will is decoded from it when it goes */
    if ((ss->will = mqr_malloc(raw_len)) == NULL) {
      refuse(c, level, 0x97, 0x03, "out of memory for the will");
      return;
    }
    memcpy(ss->will, raw, raw_len);
    ss->will_len = raw_len;
    mqr__principal_release(ss->will_who);
    ss->will_who = mqr__principal_hold(c->sess.who);
  }
  mc->ss = ss;
  ss->conn = c;
  mc->level = level;
  mc->connected = true;
  /* A server keep-alive of the listener's goes over the client's (5.0; 3.1.1 has no way
   * to say it, so the client's stands). */
  int32_t ska = (int32_t)mqr__mqtt_opt(c, MQTT_OPT_SERVER_KEEP_ALIVE);
  uint16_t keep_alive = level == 5 && ska >= 0 ? (uint16_t)ska : cn->keep_alive;
  mc->keep_alive_ms = (uint64_t)keep_alive * 1500;
  mc->receive_max = level == 5 && MQR__MQTT_HAS(&p->props, 0x21) ? p->props.receive_max : 65535;
  mc->max_packet = level == 5 && MQR__MQTT_HAS(&p->props, 0x27) ? p->props.max_packet : 268435455;
  mc->alias_max = level == 5 ? (uint16_t)mqr__mqtt_opt(c, MQTT_OPT_TOPIC_ALIAS_MAX) : 0;
  mc->in_max =
      (uint16_t)mqr__mqtt_opt(c, MQTT_OPT_RECEIVE_MAX) ? (uint16_t)mqr__mqtt_opt(c, MQTT_OPT_RECEIVE_MAX) : 65535;
  uint16_t out_max = level == 5 && MQR__MQTT_HAS(&p->props, 0x22) ? p->props.topic_alias_max : 0;
  if (out_max > (uint16_t)mqr__mqtt_opt(c, MQTT_OPT_TOPIC_ALIAS_MAX))
    out_max = (uint16_t)mqr__mqtt_opt(c, MQTT_OPT_TOPIC_ALIAS_MAX);
  if (out_max && mqr__smap_init(&mc->out_aliases)) mc->out_alias_max = out_max; /* (without memory: no aliases) */
  c->state = MQR__CONN_OPEN;
  mqr__mqtt_props_t pr = {0};
  if (level == 5) {
    pr.have = 1ull << 0x22 | 1ull << 0x27 | 1ull << 0x21;
    pr.topic_alias_max = mc->alias_max;
    pr.receive_max = mc->in_max;
    if (ska >= 0) pr.have |= 1ull << 0x13, pr.server_keep_alive = (uint16_t)ska;
    pr.max_packet = (uint32_t)mqr__mqtt_opt(c, MQTT_OPT_MAX_PACKET);
    if (cn->client_id.len == 0) pr.have |= 1ull << 0x12, pr.assigned_client_id = id;
    if (mc->scram) { /* the server-final message: the broker knew the user's keys */
      pr.have |= 1ull << 0x15 | 1ull << 0x16;
      pr.auth_method = MQR_STR("SCRAM-SHA-256");
      pr.auth_data = mqr_str(mc->scram_final);
    }
  }
  connack(c, level, present, 0, &pr);
  mqr__log(b, MQR_LOG_DEBUG, "connection %lld (%s): MQTT %s client '%s' connected%s", (long long)c->sess.id, c->peer,
           level == 5 ? "5.0" : "3.1.1", ss->client_id, present ? " (session resumed)" : "");
  mqr__mqtt_store(b, ss, false); /* its expiry and level as this CONNECT set them */
  if (present && c->state != MQR__CONN_CLOSING) {
    mqr__mqtt_resend_releases(c, ss);
    mqr__mqtt_subs_attach(c, ss);
  }
}

/* ---- packets --------------------------------------------------------------------------------- */

static void handle(mqr__conn_t *c, mqr__mqtt_packet_t *p, const uint8_t *raw, size_t len) {
  mqtt_conn_t *mc = c->hs;
  if (!mc->connected) {
    if (p->type == MQR__MQTT_CONNECT)
      on_connect(c, p, raw, len);
    else
      mqr__mqtt_close(c, 0x82, "the first packet must be CONNECT");
    return;
  }
  switch (p->type) {
  case MQR__MQTT_PUBLISH: mqr__mqtt_on_publish(c, p); return;
  case MQR__MQTT_PUBACK:
  case MQR__MQTT_PUBREC:
  case MQR__MQTT_PUBCOMP: mqr__mqtt_on_ack(c, p); return;
  case MQR__MQTT_PUBREL: mqr__mqtt_on_pubrel(c, p); return;
  case MQR__MQTT_SUBSCRIBE: mqr__mqtt_on_subscribe(c, p); return;
  case MQR__MQTT_UNSUBSCRIBE: mqr__mqtt_on_unsubscribe(c, p); return;
  case MQR__MQTT_PINGREQ: {
    uint8_t buf[2];
    if (mqr__mqtt_out(c, buf, mqr__mqtt_put_pingresp(buf, sizeof buf)) != 0) mqr__conn_close(c, false);
    return;
  }
  case MQR__MQTT_DISCONNECT:
    /* 5.0's 0x04 asks for the will all the same. */
    mc->disconnected = !(mc->level == 5 && p->reason == 0x04);
    if (mc->level == 5 && MQR__MQTT_HAS(&p->props, 0x11) && mc->ss) {
      if (mc->ss->expiry == 0 && p->props.session_expiry != 0) {
        mqr__mqtt_close(c, 0x82, "a session expiry set at DISCONNECT after CONNECT said 0");
        return;
      }
      mc->ss->expiry = p->props.session_expiry == 0xFFFFFFFFu ? UINT32_MAX : p->props.session_expiry;
      if (mc->ss->expiry) mqr__mqtt_store(c->b, mc->ss, false);
    }
    mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): MQTT client disconnected", (long long)c->sess.id, c->peer);
    mqr__conn_close(c, true);
    return;
  case MQR__MQTT_CONNECT: mqr__mqtt_close(c, 0x82, "a second CONNECT"); return;
  default: mqr__mqtt_close(c, 0x82, "packet type %d is not taken", (int)p->type); return;
  }
}

/* ---- the head's ops ------------------------------------------------------------------------------ */

static int mqtt_open(mqr__conn_t *c) {
  if (mqr__mqtt_registry(c->b, true) == NULL) return MQR_ENOMEM;
  mqtt_conn_t *mc = mqr_calloc(1, sizeof *mc);
  if (mc == NULL) return MQR_ENOMEM;
  c->hs = mc;
  return 0;
}

/* ---- 5.0 enhanced authentication: SCRAM-SHA-256 (the password never crosses) ---------------- */

static void send_auth(mqr__conn_t *c, uint8_t reason, const char *data) {
  mqr__mqtt_props_t pr = {0};
  pr.have = 1ull << 0x15 | 1ull << 0x16;
  pr.auth_method = MQR_STR("SCRAM-SHA-256");
  pr.auth_data = mqr_str(data);
  mqr__mqtt_out_props_t o = {&pr, NULL, NULL, 0, NULL, 0};
  uint8_t buf[1024];
  size_t n = mqr__mqtt_put_auth(buf, sizeof buf, reason, &o);
  if (n > sizeof buf || mqr__mqtt_out(c, buf, n) != 0) mqr__conn_close(c, false);
}

/* The exchange over (mc->auth_* set): its CONNECT taken now. */
static void enhanced_done(mqr__conn_t *c) {
  mqtt_conn_t *mc = c->hs;
  mqr__mqtt_packet_t p;
  uint8_t reason;
  mqr_error_t err;
  if (mqr__mqtt_decode(mc->connect, mc->connect_len, 0, &p, &reason, &err) != 0) {
    mqr__conn_close(c, false); /* cannot be: it decoded before */
    return;
  }
  on_connect(c, &p, mc->connect, mc->connect_len);
}

static void enhanced_failed(void *ctx, int status, mqr__principal_t *who) {
  mqr__conn_t *c = ctx;
  mqtt_conn_t *mc = c->hs;
  mc->auth = NULL;
  mqr__principal_release(who);
  mc->auth_done = true;
  mc->auth_status = status ? status : MQR_EAUTH;
  mqr__conn_hold(c, false);
  enhanced_done(c);
}

/* CONNECT with Authentication Method SCRAM-SHA-256: its client-first message answered
 * with an AUTH (0x18) carrying the server-first. false: refused (closing). */
static bool enhanced_start(mqr__conn_t *c, const mqr__mqtt_packet_t *p, const uint8_t *raw, size_t len) {
  mqtt_conn_t *mc = c->hs;
  if (!mqr_str_eq(p->props.auth_method, MQR_STR("SCRAM-SHA-256"))) {
    refuse(c, 5, 0x8C, 0x05, "an authentication method other than SCRAM-SHA-256 is not supported");
    return false;
  }
  mqr_error_t err;
  char server_first[512];
  if ((mc->scram = mqr_calloc(1, sizeof *mc->scram)) == NULL || (mc->connect = mqr_malloc(len)) == NULL) {
    refuse(c, 5, 0x97, 0x03, "out of memory");
    return false;
  }
  memcpy(mc->connect, raw, len);
  mc->connect_len = len;
  if (mqr_scram_server_start(mc->scram, p->props.auth_data, &err) != 0 ||
      mqr_scram_server_challenge(mc->scram, mqr__user_scram(c->b, mc->scram->user), server_first, sizeof server_first,
                                 &err) != 0) {
    refuse(c, 5, 0x86, 0x04, err.message);
    return false;
  }
  send_auth(c, 0x18, server_first);
  return true;
}

/* AUTH (0x18) with the client-final message: the proof checked. */
static void on_auth(mqr__conn_t *c, const mqr__mqtt_packet_t *p) {
  mqtt_conn_t *mc = c->hs;
  mqr_error_t err;
  if (mc->scram == NULL || mc->scram->step != 2 || p->reason != 0x18 ||
      !mqr_str_eq(p->props.auth_method, MQR_STR("SCRAM-SHA-256"))) {
    mqr__mqtt_close(c, 0x82, "an AUTH no exchange waits for");
    return;
  }
  mqr__principal_t *who = NULL;
  int rc = mqr_scram_server_final(mc->scram, p->props.auth_data, mc->scram_final, sizeof mc->scram_final, &err);
  if (rc == 0 && (rc = mqr__authenticate_proved(c->b, mc->scram->user, &who)) == 0) {
    mc->auth_done = true;
    mc->auth_status = 0;
    mc->auth_who = who;
    enhanced_done(c);
    return;
  }
  /* A wrong password or an unknown user: answered late, as a wrong password is. */
  if (mqr__authenticate_failed(c->b, mc->scram->user, c->peer, enhanced_failed, c, &mc->auth) == MQR__PENDING)
    mqr__conn_hold(c, true);
  else
    refuse(c, 5, 0x86, 0x04, "authentication failed");
}

static int take(mqr__conn_t *c) {
  mqtt_conn_t *mc = c->hs;
  uint32_t max = (uint32_t)mqr__mqtt_opt(c, MQTT_OPT_MAX_PACKET);
  size_t total = 0;
  mqr_error_t err;
  int rc = mqr__mqtt_peek(c->rbuf + c->rpos, c->rlen - c->rpos, max, &total, &err);
  if (rc == 0) return 0;
  if (rc < 0) {
    mqr__mqtt_close(c, rc == MQR_ELIMIT ? MQR__MQTT_TOO_LARGE : MQR__MQTT_MALFORMED, "%s", err.message);
    return -1;
  }
  uint8_t *raw = c->rbuf + c->rpos;
  c->rpos += total;
  mqr__mqtt_packet_t p;
  uint8_t reason = 0;
  if (mqr__mqtt_decode(raw, total, mc->connected ? mc->level : mc->scram ? 5 : 0, &p, &reason, &err) != 0) {
    if (!mc->connected && reason == MQR__MQTT_BAD_VERSION) {
      refuse(c, 4, 0x84, 0x01, err.message); /* answered as 3.1.1 does: any client reads it */
      return -1;
    }
    mqr__mqtt_close(c, reason ? reason : MQR__MQTT_MALFORMED, "%s", err.message);
    return -1;
  }
  if (!mc->connected && mc->scram && p.type == MQR__MQTT_AUTH) {
    on_auth(c, &p);
    return c->state == MQR__CONN_CLOSING ? -1 : 1;
  }
  if (!mc->connected && p.type == MQR__MQTT_CONNECT && mc->scram == NULL && p.u.connect.level == 5 &&
      MQR__MQTT_HAS(&p.props, 0x15)) {
    enhanced_start(c, &p, raw, total);
    return c->state == MQR__CONN_CLOSING ? -1 : 1;
  }
  if (!mc->connected && p.type == MQR__MQTT_CONNECT && !authenticate(c, &p.u.connect)) {
    c->rpos -= total; /* taken again once the credentials are checked */
    return 0;
  }
  handle(c, &p, raw, total);
  return c->state == MQR__CONN_CLOSING ? -1 : 1;
}

/* The fixed header says how long (take checked it against the maximum). */
static size_t room(const mqr__conn_t *c) {
  size_t total = 0;
  mqr__mqtt_peek(c->rbuf + c->rpos, c->rlen - c->rpos, UINT32_MAX, &total, NULL);
  return total > c->rcap ? total : c->rcap * 2;
}

/* Keep-alive: nothing heard for one and a half times the client's keep-alive closes it. */
static void tick(mqr__conn_t *c, uint64_t now) {
  mqtt_conn_t *mc = c->hs;
  if (mc->connected && mc->keep_alive_ms && c->reading && now - c->heard_ms >= mc->keep_alive_ms)
    mqr__mqtt_close(c, 0x8D, "nothing heard for %llu ms (1.5 times its keep-alive)",
                    (unsigned long long)mc->keep_alive_ms);
}

static void fail(mqr__conn_t *c, int code, const char *text) {
  mqr__mqtt_close(c, code == MQR_ETIMEOUT ? 0x8D : code == MQR_ENOMEM ? 0x97 : 0x83, "%s", text);
}

static void bye(mqr__conn_t *c) {
  mqtt_conn_t *mc = c->hs;
  if (mc->level != 5) return;
  uint8_t buf[8];
  size_t n = mqr__mqtt_put_disconnect(buf, sizeof buf, 0x8B, NULL); /* Server shutting down */
  if (n <= sizeof buf) (void)mqr__mqtt_out(c, buf, n);
}

/* A PUBLISH's answer that waited for the journal: its PUBACK or PUBREC, in order; or a
 * subscriber's PUBREC's: the PUBREL. */
static void sent(mqr__conn_t *c, int64_t token, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  mqtt_conn_t *mc = c->hs;
  if (token == 0) return;
  if (mc->w_n == 0 || mc->waiting[mc->w_head].token != token) return; /* cannot be */
  uint16_t id = mc->waiting[mc->w_head].id;
  uint8_t type = mc->waiting[mc->w_head].type;
  mc->w_head = (mc->w_head + 1) % mc->w_cap;
  mc->w_n--;
  uint8_t buf[16];
  if (type == MQR__MQTT_PUBREL) { /* a subscriber's PUBREC, as safe as a durable PUBLISH now, or not */
    if (status != 0) {
      mqr__mqtt_close(c, 0x80, "the acknowledgement of packet %u was not taken: %s", id,
                      err ? err->message : mqr_strerror(status));
      return;
    }
    size_t n = mqr__mqtt_put_ack(buf, sizeof buf, mc->level, MQR__MQTT_PUBREL, id, 0, NULL);
    if (mqr__mqtt_out(c, buf, n) != 0) mqr__conn_close(c, false);
    return;
  }
  if ((type == MQR__MQTT_PUBACK || status != 0) && mc->in_open) mc->in_open--; /* answered: its place is free */
  uint8_t reason = 0;
  if (status != 0) {
    if (type == MQR__MQTT_PUBREC && mc->ss && mc->ss->qos2_in) { /* not sent: the exchange ends here */
      mc->ss->qos2_in[id >> 3] &= (uint8_t) ~(1u << (id & 7));
      mqr__mqtt_store_qos2(c->b, mc->ss, true, id, false);
    }
    if (mc->level == 4) { /* 3.1.1 has no way to say it: the connection goes (3.3.5) */
      mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): a PUBLISH failed: %s; closing it", (long long)c->sess.id,
               c->peer, err ? err->message : mqr_strerror(status));
      mqr__conn_close(c, false);
      return;
    }
    reason = status == MQR_EFULL                               ? 0x97
             : status == MQR_EPERM                             ? 0x87 /* Not authorized */
             : status == MQR_ENOADDR || status == MQR_ENOQUEUE ? 0x90
                                                               : 0x80;
  } else if (r && r->queues == 0 && mc->level == 5) {
    reason = 0x10; /* No matching subscribers */
  }
  size_t n = mqr__mqtt_put_ack(buf, sizeof buf, mc->level, (mqr__mqtt_type_t)type, id, reason, NULL);
  if (mqr__mqtt_out(c, buf, n) != 0) mqr__conn_close(c, false);
}

static void release(mqr__conn_t *c) {
  mqtt_conn_t *mc = c->hs;
  if (mc == NULL) return;
  mqr__auth_cancel(mc->auth);
  mqr__principal_release(mc->auth_who);
  mqr_free(mc->scram);
  mqr_free(mc->connect);
  mqr_broker_t *b = c->b;
  mqtt_session_t *ss = mc->ss;
  if (ss && ss->conn == c) {
    ss->conn = NULL;
    uv_update_time(mqr__loop(b));
    ss->gone_ms = uv_now(mqr__loop(b));
    mqr__mqtt_subs_detach(ss);
    if (mc->disconnected || mqr__closing(b)) { /* no will after DISCONNECT (or when the broker goes) */
      mqr_free(ss->will);
      ss->will = NULL;
    } else if (ss->will) {
      mqr__mqtt_packet_t p;
      uint8_t reason;
      uint32_t delay = 0;
      if (mqr__mqtt_decode(ss->will, ss->will_len, 0, &p, &reason, NULL) == 0 && p.u.connect.level == 5)
        delay = p.u.connect.will_props.will_delay;
      if (delay == 0 || ss->expiry == 0)
        publish_will(b, ss);
      else
        ss->will_at = ss->gone_ms + (uint64_t)delay * 1000;
    }
    mqtt_session_t **at;
    if (ss->expiry == 0 && !mqr__closing(b) && find_session(b, ss->id, &at) == ss) session_end(b, at);
  }
  for (uint32_t i = 0; mc->aliases && i <= mc->alias_max; i++) mqr_free((void *)mc->aliases[i].ptr);
  if (mc->out_alias_max) mqr__smap_free(&mc->out_aliases);
  mqr_free(mc->aliases);
  mqr_free(mc->waiting);
  mqr_free(mc->topic);
  mqr_free(mc);
  c->hs = NULL;
}

/* CONNECT: the fixed header's first byte is 0x10. */
static int sniff(const uint8_t *p, size_t n) {
  (void)n;
  return p[0] == 0x10;
}

static int ready(mqr_broker_t *b) { return mqr__mqtt_load_sessions(b); }

/* A listener's mqtt block (the order of MQTT_OPT_*). */
static const mqr_option_def_t options[] = {
    {"max-packet-size", MQR_OPTION_SIZE, 1024, MQR_MAX_FRAME_LIMIT, MQR_DEFAULT_MAX_FRAME},
    {"receive-maximum", MQR_OPTION_INT, 1, 65535, 65535},
    {"server-keep-alive", MQR_OPTION_INT, -1, 65535, -1},
    {"topic-alias-maximum", MQR_OPTION_INT, 0, 65535, 64},
    {"sys-interval", MQR_OPTION_DURATION, 0, 86400000, 10000},
};
const mqr_protocol_def_t mqr__mqtt_def = {"mqtt", MQR_PROTOCOL_MQTT, options, sizeof options / sizeof *options};

const mqr__head_t mqr__mqtt_head = {
    .name = "MQTT",
    .def = &mqr__mqtt_def,
    .sniff = sniff,
    .ready = ready,
    .tick_all = mqr__mqtt_tick_sessions,
    .free = mqr__mqtt_free_sessions,
    .open = mqtt_open,
    .take = take,
    .room = room,
    .tick = tick,
    .fail = fail,
    .bye = bye,
    .sent = sent,
    .release = release,
};
