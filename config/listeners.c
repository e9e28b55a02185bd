/* The listeners section: where mqrd accepts clients, with their limits and prefixes
 * (config_int.h). */

#include "config_int.h"

/* ---- listeners -------------------------------------------------------------------- */

/* The registered protocols' names, for messages: "mqr, mqtt or stomp". */
static void protocol_names(char *out, size_t cap) {
  out[0] = '\0';
  uint32_t n = 0;
  while (mqr_config_protocol(n)) n++;
  for (uint32_t i = 0; i < n; i++)
    snprintf(out + strlen(out), cap - strlen(out), "%s%s",
             i == 0       ? ""
             : i + 1 == n ? " or "
                          : ", ",
             mqr_config_protocol(i)->name);
}

static const mqr_protocol_def_t *protocol_named(mqr_str_t v) {
  for (uint32_t i = 0; mqr_config_protocol(i); i++)
    if (mqr_str_eq(v, mqr_str(mqr_config_protocol(i)->name))) return mqr_config_protocol(i);
  return NULL;
}

/* protocols: a list of the registered protocols' names (or one of them). */
static uint32_t parse_protocols(ctx_t *c, const pair_t *p) {
  char names[128];
  protocol_names(names, sizeof names);
  yaml_node_item_t *start = NULL, *top = NULL;
  yaml_node_t *one = p->value;
  if (p->value->type == YAML_SEQUENCE_NODE) {
    start = p->value->data.sequence.items.start;
    top = p->value->data.sequence.items.top;
    if (start == top) ERR(c, p->value, "'protocols' is empty: name one or more of %s", names);
  } else if (p->value->type != YAML_SCALAR_NODE) {
    ERR(c, p->value, "'protocols' must be a list of %s, not %s", names, mqr__cfg_kind_name(p->value));
    return 0;
  }
  uint32_t set = 0;
  for (yaml_node_item_t *it = start;; it++) {
    yaml_node_t *n = start ? (it < top ? mqr__cfg_node(c, *it) : NULL) : one;
    if (n == NULL) break;
    mqr_str_t v = n->type == YAML_SCALAR_NODE ? mqr__cfg_scalar(n) : MQR_STR("");
    const mqr_protocol_def_t *def = protocol_named(v);
    uint32_t bit = def ? def->bit : 0;
    if (bit == 0)
      ERR(c, n, "unknown protocol '%.*s' (%s)", (int)v.len, v.ptr, names);
    else if (set & bit)
      ERR(c, n, "protocol '%.*s' named twice", (int)v.len, v.ptr);
    set |= bit;
    if (start == NULL) break;
  }
  return set;
}

/* A protocol's block, through its table of options: into options at its base. */
static void parse_block(ctx_t *c, const pair_t *p, const mqr_protocol_def_t *def, int64_t *options) {
  char where[64], known[512] = "";
  snprintf(where, sizeof where, "a listener's %s", def->name);
  for (uint32_t k = 0; k < def->n_options; k++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", def->options[k].key);
  if (!mqr__cfg_want(c, p->value, YAML_MAPPING_NODE, where)) return;
  int64_t *v = options + mqr__cfg_option_base(def);
  FOREACH_PAIR(c, p->value, q) {
    if (!mqr__cfg_key(c, p->value, q_it, &q, where)) continue;
    uint32_t k = 0;
    while (k < def->n_options && !mqr_str_eq(q.name, mqr_str(def->options[k].key))) k++;
    if (k == def->n_options) {
      mqr__cfg_unknown_key(c, &q, where, known);
      continue;
    }
    const mqr_option_def_t *o = &def->options[k];
    if (o->kind == MQR_OPTION_DURATION) {
      int64_t ms;
      if (mqr__cfg_get_duration(c, &q, o->max, &ms)) {
        if (ms < o->min)
          ERR(c, q.value, "'%s' must be at least %" PRId64 " ms, not %" PRId64 " ms", o->key, o->min, ms);
        else
          v[k] = ms;
      }
    } else if (o->kind == MQR_OPTION_BOOL) {
      bool on;
      if (mqr__cfg_get_bool(c, &q, &on)) v[k] = on;
    } else {
      mqr__cfg_get_int(c, &q, o->kind == MQR_OPTION_SIZE, o->min, o->max, &v[k]);
    }
  }
}

/* tls: {cert, key, ca, client-auth, min-version, ciphers}: into t and the paths' copies
 * (own: cert, key, ca, ciphers). */
static void parse_tls(ctx_t *c, const pair_t *p, mqr_tls_config_t *t, char *own[4]) {
  const char *where = "a listener's tls";
  t->enabled = true;
  t->min_version = 0x0303;
  if (!mqr__cfg_want(c, p->value, YAML_MAPPING_NODE, where)) return;
  FOREACH_PAIR(c, p->value, q) {
    if (!mqr__cfg_key(c, p->value, q_it, &q, where)) continue;
    static const char *const paths[4] = {"cert", "key", "ca", "ciphers"};
    int k = -1;
    for (int i = 0; i < 4; i++)
      if (mqr_str_eq(q.name, mqr_str(paths[i]))) k = i;
    mqr_str_t v;
    if (k >= 0) {
      if (!mqr__cfg_get_string(c, &q, &v)) continue;
      if (v.len == 0 || memchr(v.ptr, 0, v.len)) {
        ERR(c, q.value, "tls '%s' must not be empty", paths[k]);
        continue;
      }
      mqr_free(own[k]);
      own[k] = k == 3 ? mqr__cfg_dup_n(c, v.ptr, v.len) : mqr__cfg_path(c, v);
    } else if (mqr_str_eq(q.name, MQR_STR("client-auth"))) {
      if (!mqr__cfg_get_string(c, &q, &v)) continue;
      if (mqr_str_eq(v, MQR_STR("none")))
        t->client_auth = MQR_CLIENT_AUTH_NONE;
      else if (mqr_str_eq(v, MQR_STR("want")))
        t->client_auth = MQR_CLIENT_AUTH_WANT;
      else if (mqr_str_eq(v, MQR_STR("need")))
        t->client_auth = MQR_CLIENT_AUTH_NEED;
      else
        ERR(c, q.value, "client-auth must be none, want or need, not '%.*s'", (int)v.len, v.ptr);
    } else if (mqr_str_eq(q.name, MQR_STR("min-version"))) {
      if (!mqr__cfg_get_string(c, &q, &v)) continue;
      if (mqr_str_eq(v, MQR_STR("1.2")) || mqr_str_eq(v, MQR_STR("TLSv1.2")))
        t->min_version = 0x0303;
      else if (mqr_str_eq(v, MQR_STR("1.3")) || mqr_str_eq(v, MQR_STR("TLSv1.3")))
        t->min_version = 0x0304;
      else
        ERR(c, q.value, "min-version must be 1.2 or 1.3, not '%.*s'", (int)v.len, v.ptr);
    } else {
      mqr__cfg_unknown_key(c, &q, where, "cert, key, ca, client-auth, min-version, ciphers");
    }
  }
  if (own[0] == NULL || own[1] == NULL) ERR(c, p->value, "a listener's tls needs cert and key");
  if (t->client_auth != MQR_CLIENT_AUTH_NONE && own[2] == NULL)
    ERR(c, p->value, "tls client-auth %s needs ca: the CAs client certificates chain to",
        t->client_auth == MQR_CLIENT_AUTH_NEED ? "need" : "want");
}

static void parse_listener(ctx_t *c, yaml_node_t *map, uint32_t index) {
  mqr_config_t *cfg = c->cfg;
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, "a listener")) return;
  static const char known[] =
      "name, host, port, protocols, anycast-prefix, multicast-prefix, max-frame-size, handshake-timeout, "
      "idle-timeout, max-connections, tls, and a block per protocol";
  char defname[32];
  snprintf(defname, sizeof defname, "listener-%u", index + 1);
  mqr_str_t name = mqr_str(defname), host = MQR_STR("127.0.0.1"), px[2] = {{0}, {0}};
  const yaml_node_t *name_node = map, *px_node = NULL;
  int64_t port = DEFAULT_PORT, max_frame = MQR_DEFAULT_MAX_FRAME;
  int64_t handshake_ms = MQR_DEFAULT_HANDSHAKE_TIMEOUT, idle_ms = MQR_DEFAULT_IDLE_TIMEOUT, max_conns = 0;
  int64_t options[MQR_LISTENER_OPTIONS];
  mqr__cfg_options_default(options);
  const mqr_protocol_def_t *def;
  mqr_tls_config_t tls = {0};
  char *tls_own[4] = {NULL, NULL, NULL, NULL};
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
    } else if (mqr_str_eq(p.name, MQR_STR("tls"))) {
      parse_tls(c, &p, &tls, tls_own);
    } else if (mqr_str_eq(p.name, MQR_STR("max-connections"))) {
      mqr__cfg_get_int(c, &p, false, 0, 10000000, &max_conns);
    } else if (mqr_str_eq(p.name, MQR_STR("protocols"))) {
      protocols = parse_protocols(c, &p);
    } else if ((def = protocol_named(p.name)) != NULL) {
      parse_block(c, &p, def, options);
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
  if (!mqr__cfg_grow(c, (void **)&cfg->listeners, cfg->n_listeners, &cfg->cap_listeners, sizeof *cfg->listeners)) {
    for (int k = 0; k < 4; k++) mqr_free(tls_own[k]);
    return;
  }
  cfg_listener_t *l = &cfg->listeners[cfg->n_listeners++];
  l->name = mqr__cfg_dup_n(c, name.ptr, name.len);
  l->host = mqr__cfg_dup_n(c, host.ptr, host.len);
  l->pub.name = l->name;
  l->pub.host = l->host;
  l->pub.port = (uint16_t)port;
  l->pub.protocols = protocols;
  l->pub.max_frame = (uint32_t)max_frame;
  memcpy(l->pub.options, options, sizeof options);
  l->pub.handshake_timeout_ms = (uint32_t)handshake_ms;
  l->pub.idle_timeout_ms = (uint32_t)idle_ms;
  l->pub.max_connections = (uint32_t)max_conns;
  for (int k = 0; k < 4; k++) l->tls[k] = tls_own[k];
  l->pub.tls = tls;
  l->pub.tls.cert = l->tls[0];
  l->pub.tls.key = l->tls[1];
  l->pub.tls.ca = l->tls[2];
  l->pub.tls.ciphers = l->tls[3];
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
