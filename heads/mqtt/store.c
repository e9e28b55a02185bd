/* MQTT sessions kept across a restart (mqtt.h), as Artemis keeps them: the state of each
 * session that outlives its connection is a durable message in the last-value queue
 * $sys.mqtt.sessions, keyed by its client id (mqtt.client.id), sent again whenever the
 * state changes and replaced by an empty one when the session ends. At start the queue
 * is browsed and each session comes back, offline, its subscriptions' queues being
 * durable ones the journal kept. Its expiry counts from the restart.
 *
 * The body: a version byte (1), the MQTT level, the session expiry (4 bytes, big-endian),
 * the subscription count (2), then per subscription its QoS, flags (1: no-local, 2:
 * retain-as-published, 4: shared, retain handling in bits 3-4), identifier (4), filter
 * and queue name (2-byte length, bytes). The packet ids of QoS 2 exchanges under way are
 * kept beside it ($sys.mqtt.qos2, below). */
#include <stdio.h>

#include "mqtt.h"

#define STORE "$sys.mqtt.sessions"
#define KEY "mqtt.client.id"

/* The durable last-value queue name (of the address of that name) on key, made when
 * missing: false when it cannot be (what is lost: what). */
static bool ensure_queue(mqr_broker_t *b, mqr_str_t name, mqr_str_t key, const char *what) {
  if (mqr_router_find_queue(mqr_broker_router(b), name)) return true;
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, name, name, MQR_ANYCAST);
  qc.durable = true;
  qc.auto_create_address = true;
  qc.last_value_key = key;
  mqr_error_t err;
  if (mqr_broker_create_queue(b, &qc, &err) == 0) return true;
  mqr__log(b, MQR_LOG_WARN, "MQTT: %s cannot be kept across a restart: %s", what, err.message);
  return false;
}

static void put2(uint8_t **p, size_t v) {
  (*p)[0] = (uint8_t)(v >> 8), (*p)[1] = (uint8_t)v;
  *p += 2;
}

static void put4(uint8_t **p, uint32_t v) {
  for (int i = 0; i < 4; i++) (*p)[i] = (uint8_t)(v >> (24 - 8 * i));
  *p += 4;
}

static void clear_qos2(mqr_broker_t *b, mqtt_session_t *ss);

void mqr__mqtt_store(mqr_broker_t *b, mqtt_session_t *ss, bool ended) {
  if (!mqr__has_journal(b) || (!ended && ss->expiry == 0)) return; /* no journal; or it ends with its connection */
  if (ended && !ss->stored) return;
  if (ended) clear_qos2(b, ss);
  if (!ensure_queue(b, MQR_STR(STORE), MQR_STR(KEY), "sessions")) return;
  size_t len = 0, n = 0;
  if (!ended) {
    len = 8;
    for (mqtt_sub_t *s = ss->subs; s; s = s->next, n++) len += 6 + 4 + s->filter.len + s->queue.len;
  }
  uint8_t *body = len ? mqr_malloc(len) : NULL, *p = body;
  if (len && body == NULL) {
    mqr__log(b, MQR_LOG_WARN, "MQTT client '%s': out of memory keeping its session", ss->client_id);
    return;
  }
  if (len) {
    *p++ = 1;
    *p++ = ss->level;
    put4(&p, ss->expiry);
    put2(&p, n);
    for (mqtt_sub_t *s = ss->subs; s; s = s->next) {
      *p++ = s->qos;
      *p++ = (uint8_t)(s->no_local | s->retain_as_published << 1 | s->shared << 2 | s->retain_handling << 3);
      put4(&p, s->sub_id);
      put2(&p, s->filter.len);
      memcpy(p, s->filter.ptr, s->filter.len), p += s->filter.len;
      put2(&p, s->queue.len);
      memcpy(p, s->queue.ptr, s->queue.len), p += s->queue.len;
    }
  }
  mqr_str_t key = MQR_STR(KEY);
  mqr_value_t id = mqr_value_string(ss->id);
  mqr_broker_message_t m = {MQR_STR(STORE),
                            MQR_ANYCAST,
                            true,
                            MQR_STR(""),
                            MQR_PRIORITY_DEFAULT,
                            0,
                            0,
                            MQR_STR(""),
                            &key,
                            &id,
                            1,
                            mqr_str_n((const char *)body, len)};
  mqr_error_t err;
  if (mqr_broker_send(b, &m, NULL, &err) != 0)
    mqr__log(b, MQR_LOG_WARN, "MQTT client '%s': its session is not kept: %s", ss->client_id, err.message);
  else
    ss->stored = !ended;
  mqr_free(body);
}

/* ---- QoS 2 exchanges under way -------------------------------------------------------------------- */

/* Each packet id of a QoS 2 exchange that a restart must not forget, as a durable marker
 * in the last-value queue $sys.mqtt.qos2 keyed "<i|o> <id> <client id>": i, a PUBLISH
 * received and sent on, not yet released (a repeat must not be sent again); o, a
 * delivery the client has received (PUBREC), its PUBREL due until PUBCOMP. An empty
 * marker clears one. Written before the PUBREC or PUBREL it stands for, so that the
 * journal has it first. */
#define QOS2 "$sys.mqtt.qos2"
#define QOS2_KEY "mqtt.qos2.key"

void mqr__mqtt_store_qos2(mqr_broker_t *b, mqtt_session_t *ss, bool in, uint16_t id, bool set) {
  if (ss->expiry == 0 || !mqr__has_journal(b)) return; /* it ends with its connection; no journal */
  if (!ensure_queue(b, MQR_STR(QOS2), MQR_STR(QOS2_KEY), "QoS 2 state")) return;
  char key[600];
  int n = snprintf(key, sizeof key, "%c %u %s", in ? 'i' : 'o', id, ss->client_id);
  if (n < 0 || (size_t)n >= sizeof key) return;
  mqr_str_t k = MQR_STR(QOS2_KEY);
  mqr_value_t v = mqr_value_string(mqr_str_n(key, (size_t)n));
  mqr_broker_message_t m = {MQR_STR(QOS2),
                            MQR_ANYCAST,
                            true,
                            MQR_STR(""),
                            MQR_PRIORITY_DEFAULT,
                            0,
                            0,
                            MQR_STR(""),
                            &k,
                            &v,
                            1,
                            set ? MQR_STR("1") : MQR_STR("")};
  mqr_error_t err;
  if (mqr_broker_send(b, &m, NULL, &err) != 0)
    mqr__log(b, MQR_LOG_WARN, "MQTT client '%s': QoS 2 state not kept: %s", ss->client_id, err.message);
}

/* Every marker of the session cleared: it ends. */
static void clear_qos2(mqr_broker_t *b, mqtt_session_t *ss) {
  for (uint32_t id = 1; ss->qos2_in && id < 65536; id++)
    if (ss->qos2_in[id >> 3] & (1u << (id & 7))) mqr__mqtt_store_qos2(b, ss, true, (uint16_t)id, false);
  for (uint32_t i = 0; i < ss->out_cap; i++)
    if (ss->out[i].id && ss->out[i].state == OUT_RELEASED) mqr__mqtt_store_qos2(b, ss, false, ss->out[i].id, false);
}

/* ---- at start ------------------------------------------------------------------------------------ */

typedef struct {
  const uint8_t *p, *end;
  bool bad;
} rd_t;

static uint32_t get(rd_t *r, int n) {
  if (r->end - r->p < n) {
    r->bad = true;
    return 0;
  }
  uint32_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | *r->p++;
  return v;
}

static mqr_str_t get_str(rd_t *r) {
  size_t n = get(r, 2);
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = true;
    return MQR_STR("");
  }
  mqr_str_t s = mqr_str_n((const char *)r->p, n);
  r->p += n;
  return s;
}

typedef struct {
  mqr_broker_t *b;
  uint32_t loaded;
} load_t;

static void load_one(void *arg, const mqr_frame_message_t *m) {
  load_t *x = arg;
  mqr_broker_t *b = x->b;
  mqtt_registry_t *reg = mqr__mqtt_registry(b, false);
  mqr_str_t id = MQR_STR("");
  for (size_t i = 0; i < m->properties.count; i++)
    if (mqr_str_eq(m->properties.keys[i], MQR_STR(KEY)) &&
        ((const mqr_value_t *)m->properties.values)[i].type == MQR_VALUE_STRING)
      id = ((const mqr_value_t *)m->properties.values)[i].u.s;
  if (id.len == 0 || m->body.len == 0) return; /* a session that ended */
  rd_t r = {(const uint8_t *)m->body.ptr, (const uint8_t *)m->body.ptr + m->body.len, false};
  if (get(&r, 1) != 1) return;
  mqtt_session_t *ss = mqr_calloc(1, sizeof *ss + id.len + 1);
  if (ss == NULL) return;
  memcpy(ss->client_id, id.ptr, id.len);
  ss->id = mqr_str_n(ss->client_id, id.len);
  ss->level = (uint8_t)get(&r, 1);
  ss->expiry = get(&r, 4);
  uv_update_time(mqr__loop(b));
  ss->gone_ms = uv_now(mqr__loop(b));
  ss->stored = true;
  uint32_t n = get(&r, 2);
  mqtt_sub_t **tail = &ss->subs;
  for (uint32_t i = 0; i < n && !r.bad; i++) {
    uint8_t qos = (uint8_t)get(&r, 1), flags = (uint8_t)get(&r, 1);
    uint32_t sub_id = get(&r, 4);
    mqr_str_t filter = get_str(&r), queue = get_str(&r);
    if (r.bad) break;
    mqtt_sub_t *s = mqr_calloc(1, sizeof *s + filter.len + queue.len + 2);
    if (s == NULL) break;
    char *t = (char *)(s + 1);
    memcpy(t, filter.ptr, filter.len);
    s->filter = mqr_str_n(t, filter.len);
    memcpy(t + filter.len + 1, queue.ptr, queue.len);
    s->queue = mqr_str_n(t + filter.len + 1, queue.len);
    s->ss = ss;
    s->qos = qos;
    s->no_local = flags & 1;
    s->retain_as_published = (flags >> 1) & 1;
    s->shared = (flags >> 2) & 1;
    s->retain_handling = (flags >> 3) & 3;
    s->sub_id = sub_id;
    s->num = ++ss->next_sub;
    *tail = s;
    tail = &s->next;
  }
  ss->next = reg->sessions;
  reg->sessions = ss;
  reg->n++;
  x->loaded++;
}

/* A QoS 2 marker: its id back in its session's state. */
static void load_qos2(void *arg, const mqr_frame_message_t *m) {
  load_t *x = arg;
  mqtt_registry_t *reg = mqr__mqtt_registry(x->b, false);
  mqr_str_t key = MQR_STR("");
  for (size_t i = 0; i < m->properties.count; i++)
    if (mqr_str_eq(m->properties.keys[i], MQR_STR(QOS2_KEY)) &&
        ((const mqr_value_t *)m->properties.values)[i].type == MQR_VALUE_STRING)
      key = ((const mqr_value_t *)m->properties.values)[i].u.s;
  char k[600];
  unsigned id = 0;
  int at = 0;
  if (m->body.len == 0 || key.len < 5 || key.len >= sizeof k) return; /* cleared */
  memcpy(k, key.ptr, key.len);
  k[key.len] = 0;
  if (sscanf(k + 2, "%u %n", &id, &at) != 1 || id == 0 || id > 65535 || at == 0) return;
  for (mqtt_session_t *ss = reg->sessions; ss; ss = ss->next) {
    if (strcmp(ss->client_id, k + 2 + at) != 0) continue;
    if (k[0] == 'i' && (ss->qos2_in || (ss->qos2_in = mqr_calloc(1, 8192))))
      ss->qos2_in[id >> 3] |= (uint8_t)(1u << (id & 7));
    else if (k[0] == 'o')
      mqr__mqtt_out_released(ss, (uint16_t)id);
    x->loaded++;
  }
}

int mqr__mqtt_load_sessions(mqr_broker_t *b) {
  if (mqr__mqtt_registry(b, true) == NULL) return MQR_ENOMEM;
  if (mqr_router_find_queue(mqr_broker_router(b), MQR_STR(STORE)) == NULL) return 0;
  load_t x = {b, 0};
  mqr_broker_browse(b, MQR_STR(STORE), 0, load_one, &x, NULL);
  if (x.loaded) mqr__log(b, MQR_LOG_INFO, "MQTT: %u session(s) kept from before the restart", x.loaded);
  if (x.loaded && mqr_router_find_queue(mqr_broker_router(b), MQR_STR(QOS2))) {
    x.loaded = 0;
    mqr_broker_browse(b, MQR_STR(QOS2), 0, load_qos2, &x, NULL);
    if (x.loaded) mqr__log(b, MQR_LOG_INFO, "MQTT: %u QoS 2 exchange(s) under way kept", x.loaded);
  }
  return 0;
}
