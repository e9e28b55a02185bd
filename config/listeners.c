/* The listeners section: where mqrd accepts clients, with their limits and prefixes
 * (config_int.h). */

#include "config_int.h"

/* ---- listeners -------------------------------------------------------------------- */

/* protocols: a list of mqr, mqtt, stomp (or one of them). */
static uint32_t parse_protocols(ctx_t *c, const pair_t *p) {
  yaml_node_item_t *start = NULL, *top = NULL;
  yaml_node_t *one = p->value;
  if (p->value->type == YAML_SEQUENCE_NODE) {
    start = p->value->data.sequence.items.start;
    top = p->value->data.sequence.items.top;
    if (start == top) ERR(c, p->value, "'protocols' is empty: name one or more of mqr, mqtt, stomp");
  } else if (p->value->type != YAML_SCALAR_NODE) {
    ERR(c, p->value, "'protocols' must be a list of mqr, mqtt, stomp, not %s", mqr__cfg_kind_name(p->value));
    return 0;
  }
  uint32_t set = 0;
  for (yaml_node_item_t *it = start;; it++) {
    yaml_node_t *n = start ? (it < top ? mqr__cfg_node(c, *it) : NULL) : one;
    if (n == NULL) break;
    mqr_str_t v = n->type == YAML_SCALAR_NODE ? mqr__cfg_scalar(n) : MQR_STR("");
    uint32_t bit = mqr_str_eq(v, MQR_STR("mqr"))     ? MQR_PROTOCOL_MQR
                   : mqr_str_eq(v, MQR_STR("mqtt"))  ? MQR_PROTOCOL_MQTT
                   : mqr_str_eq(v, MQR_STR("stomp")) ? MQR_PROTOCOL_STOMP
                                                     : 0;
    if (bit == 0)
      ERR(c, n, "unknown protocol '%.*s' (mqr, mqtt or stomp)", (int)v.len, v.ptr);
    else if (set & bit)
      ERR(c, n, "protocol '%.*s' named twice", (int)v.len, v.ptr);
    set |= bit;
    if (start == NULL) break;
  }
  return set;
}

/* stomp: {max-frame-size, max-headers, max-header-length}. */
static void parse_stomp(ctx_t *c, const pair_t *p, int64_t *frame, int64_t *headers, int64_t *line) {
  const char *where = "a listener's stomp";
  if (!mqr__cfg_want(c, p->value, YAML_MAPPING_NODE, where)) return;
  FOREACH_PAIR(c, p->value, q) {
    if (!mqr__cfg_key(c, p->value, q_it, &q, where)) continue;
    if (mqr_str_eq(q.name, MQR_STR("max-frame-size")))
      mqr__cfg_get_int(c, &q, true, 1024, MQR_MAX_FRAME_LIMIT, frame);
    else if (mqr_str_eq(q.name, MQR_STR("max-headers")))
      mqr__cfg_get_int(c, &q, false, 1, 1000000, headers);
    else if (mqr_str_eq(q.name, MQR_STR("max-header-length")))
      mqr__cfg_get_int(c, &q, true, 64, MQR_MAX_FRAME_LIMIT, line);
    else
      mqr__cfg_unknown_key(c, &q, where, "max-frame-size, max-headers, max-header-length");
  }
}

/* mqtt: {max-packet-size, receive-maximum, server-keep-alive, topic-alias-maximum}:
 * v[0..3] in that order. */
static void parse_mqtt(ctx_t *c, const pair_t *p, int64_t v[4]) {
  const char *where = "a listener's mqtt";
  if (!mqr__cfg_want(c, p->value, YAML_MAPPING_NODE, where)) return;
  FOREACH_PAIR(c, p->value, q) {
    if (!mqr__cfg_key(c, p->value, q_it, &q, where)) continue;
    if (mqr_str_eq(q.name, MQR_STR("max-packet-size")))
      mqr__cfg_get_int(c, &q, true, 1024, MQR_MAX_FRAME_LIMIT, &v[0]);
    else if (mqr_str_eq(q.name, MQR_STR("receive-maximum")))
      mqr__cfg_get_int(c, &q, false, 1, 65535, &v[1]);
    else if (mqr_str_eq(q.name, MQR_STR("server-keep-alive")))
      mqr__cfg_get_int(c, &q, false, -1, 65535, &v[2]);
    else if (mqr_str_eq(q.name, MQR_STR("topic-alias-maximum")))
      mqr__cfg_get_int(c, &q, false, 0, 65535, &v[3]);
    else
      mqr__cfg_unknown_key(c, &q, where, "max-packet-size, receive-maximum, server-keep-alive, topic-alias-maximum");
  }
}

static void parse_listener(ctx_t *c, yaml_node_t *map, uint32_t index) {
  mqr_config_t *cfg = c->cfg;
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, "a listener")) return;
  static const char known[] =
      "name, host, port, protocols, anycast-prefix, multicast-prefix, max-frame-size, handshake-timeout, "
      "idle-timeout, mqtt, stomp";
  char defname[32];
  snprintf(defname, sizeof defname, "listener-%u", index + 1);
  mqr_str_t name = mqr_str(defname), host = MQR_STR("127.0.0.1"), px[2] = {{0}, {0}};
  const yaml_node_t *name_node = map, *px_node = NULL;
  int64_t port = DEFAULT_PORT, max_frame = MQR_DEFAULT_MAX_FRAME;
  int64_t handshake_ms = MQR_DEFAULT_HANDSHAKE_TIMEOUT, idle_ms = MQR_DEFAULT_IDLE_TIMEOUT;
  int64_t mqtt[4] = {MQR_DEFAULT_MAX_FRAME, 65535, -1, 64}, stomp_frame = MQR_DEFAULT_MAX_FRAME;
  int64_t stomp_headers = MQR_DEFAULT_STOMP_MAX_HEADERS, stomp_line = MQR_DEFAULT_STOMP_MAX_HEADER_LENGTH;
  uint32_t protocols = MQR_PROTOCOL_MQR;
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "a listener")) continue;
    if (mqr_str_eq(p.name, MQR_STR("name"))) {
      if (mqr__cfg_get_string(c, &p, &name)) {
        name_node = p.value;
        if (name.len == 0) ERR(c, p.value, "empty listener name");
      }
    } else if (mqr_str_eq(p.name, MQR_STR("host"))) {
      if (mqr__cfg_get_string(c, &p, &host) && !mqr_host_check(host)) {
        ERR(c, p.value, "host must be an IPv4 or IPv6 address such as 127.0.0.1, or a host name, not '%.*s'",
            (int)host.len, host.ptr);
      }
    } else if (mqr_str_eq(p.name, MQR_STR("port"))) {
      mqr__cfg_get_int(c, &p, false, 0, 65535, &port);
    } else if (mqr_str_eq(p.name, MQR_STR("max-frame-size"))) {
      mqr__cfg_get_int(c, &p, true, 1024, MQR_MAX_FRAME_LIMIT, &max_frame);
    } else if (mqr_str_eq(p.name, MQR_STR("handshake-timeout"))) {
      mqr__cfg_get_duration(c, &p, 24 * 3600000, &handshake_ms);
    } else if (mqr_str_eq(p.name, MQR_STR("idle-timeout"))) {
      if (mqr__cfg_get_duration(c, &p, 24 * 3600000, &idle_ms) && idle_ms > 0 && idle_ms < 1000) {
        ERR(c, p.value, "'idle-timeout' must be at least 1s (or 0: off), not %" PRId64 " ms", idle_ms);
      }
    } else if (mqr_str_eq(p.name, MQR_STR("protocols"))) {
      protocols = parse_protocols(c, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("mqtt"))) {
      parse_mqtt(c, &p, mqtt);
    } else if (mqr_str_eq(p.name, MQR_STR("stomp"))) {
      parse_stomp(c, &p, &stomp_frame, &stomp_headers, &stomp_line);
    } else if (mqr_str_eq(p.name, MQR_STR("anycast-prefix"))) {
      mqr__cfg_get_string(c, &p, &px[0]);
      px_node = p.value;
    } else if (mqr_str_eq(p.name, MQR_STR("multicast-prefix"))) {
      mqr__cfg_get_string(c, &p, &px[1]);
      px_node = p.value;
    } else {
      mqr__cfg_unknown_key(c, &p, "a listener", known);
    }
  }
  if (px[0].len && mqr_str_eq(px[0], px[1])) ERR(c, px_node, "anycast-prefix and multicast-prefix are the same");
  for (uint32_t i = 0; i < cfg->n_listeners; i++)
    if (strlen(cfg->listeners[i].name) == name.len && memcmp(cfg->listeners[i].name, name.ptr, name.len) == 0)
      ERR(c, name_node, "listener name '%.*s' repeated (first at line %u)", (int)name.len, name.ptr,
          cfg->listeners[i].pub.line);
  if (!mqr__cfg_grow(c, (void **)&cfg->listeners, cfg->n_listeners, &cfg->cap_listeners, sizeof *cfg->listeners))
    return;
  cfg_listener_t *l = &cfg->listeners[cfg->n_listeners++];
  l->name = mqr__cfg_dup_n(c, name.ptr, name.len);
  l->host = mqr__cfg_dup_n(c, host.ptr, host.len);
  l->pub.name = l->name;
  l->pub.host = l->host;
  l->pub.port = (uint16_t)port;
  l->pub.protocols = protocols;
  l->pub.max_frame = (uint32_t)max_frame;
  l->pub.mqtt_max_packet = (uint32_t)mqtt[0];
  l->pub.mqtt_receive_max = (uint16_t)mqtt[1];
  l->pub.mqtt_server_keep_alive = (int32_t)mqtt[2];
  l->pub.mqtt_topic_alias_max = (uint16_t)mqtt[3];
  l->pub.stomp_max_frame = (uint32_t)stomp_frame;
  l->pub.stomp_max_headers = (uint32_t)stomp_headers;
  l->pub.stomp_max_header_len = (uint32_t)stomp_line;
  l->pub.handshake_timeout_ms = (uint32_t)handshake_ms;
  l->pub.idle_timeout_ms = (uint32_t)idle_ms;
  l->pub.line = (uint32_t)map->start_mark.line + 1;
  l->pub.column = (uint32_t)map->start_mark.column + 1;
  static const mqr_routing_type_t types[2] = {MQR_ANYCAST, MQR_MULTICAST};
  for (int i = 0; i < 2; i++) {
    if (px[i].len == 0) continue;
    l->prefix[i] = mqr__cfg_dup_n(c, px[i].ptr, px[i].len);
    l->pub.prefixes.items[l->pub.prefixes.count].text = mqr_str_n(l->prefix[i], px[i].len);
    l->pub.prefixes.items[l->pub.prefixes.count].type = types[i];
    l->pub.prefixes.count++;
  }
}

void mqr__cfg_parse_listeners(ctx_t *c, yaml_node_t *seq) {
  if (mqr__cfg_is_null(seq) || !mqr__cfg_want(c, seq, YAML_SEQUENCE_NODE, "listeners")) return;
  uint32_t i = 0;
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++, i++) {
    parse_listener(c, mqr__cfg_node(c, *it), i);
    if (c->nomem) return;
  }
}
