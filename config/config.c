/* Routing-config files: YAML (libyaml's document API) into an mqr_config_t, with every
 * problem reported at its file, line and column, then a trial router build so that a
 * loaded config is known to build.
 *
 * libyaml allocates its document with the C allocator (it has no hook); everything mqr
 * keeps goes through mqr_malloc. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <yaml.h>

#include "mqr/config.h"

extern const char mqr__default_conf[];
extern const size_t mqr__default_conf_len;

#define DEFAULT_PORT 61616

typedef struct {
  char *name;
  char *filter;
  mqr_routing_type_t type;
  bool durable, purge_on_no_consumers, enabled;
  int32_t max_consumers;
  uint32_t line, column;
} cfg_queue_t;

typedef struct {
  char *name;
  bool has_types;
  mqr_routing_set_t types;
  cfg_queue_t *queues;
  uint32_t n_queues, cap_queues;
  uint32_t line, column;
} cfg_address_t;

typedef struct {
  char *match;
  char *dla;
  mqr_address_settings_t s;
  uint32_t line, column;
} cfg_settings_t;

typedef struct {
  mqr_listener_config_t pub;
  char *name, *host, *prefix[2];
} cfg_listener_t;

struct mqr_config_s {
  char *file;
  mqr_wildcard_t wildcard;
  cfg_listener_t *listeners;
  uint32_t n_listeners, cap_listeners;
  cfg_settings_t *settings;
  uint32_t n_settings, cap_settings;
  cfg_address_t *addresses;
  uint32_t n_addresses, cap_addresses;
  uint32_t n_queues;
};

/* ---- diagnostics ------------------------------------------------------------------ */

void mqr_diags_init(mqr_diags_t *d, mqr_error_t *items, uint32_t cap) {
  memset(d, 0, sizeof *d);
  d->items = items;
  d->cap = items ? cap : 0;
}

static void diags_vadd(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt,
                       va_list ap) {
  if (d == NULL) return;
  if (code)
    d->errors++;
  else
    d->warnings++;
  if (d->count == d->cap) {
    d->dropped++;
    return;
  }
  mqr_error_t *e = &d->items[d->count++];
  e->code = code;
  e->line = line;
  e->column = col;
  snprintf(e->file, sizeof e->file, "%s", file ? file : "");
  vsnprintf(e->message, sizeof e->message, fmt, ap);
}

static void diags_add(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void diags_add(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diags_vadd(d, code, file, line, col, fmt, ap);
  va_end(ap);
}

static void diags_add_error(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *msg) {
  diags_add(d, code, file, line, col, "%s", msg);
}

typedef struct {
  yaml_document_t doc;
  const char *file;
  mqr_diags_t *diags;
  mqr_config_t *cfg;
  uint32_t errors;
  bool nomem;
} ctx_t;

static void diag_at(ctx_t *c, int code, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void diag_at(ctx_t *c, int code, const yaml_node_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  uint32_t line = n ? (uint32_t)n->start_mark.line + 1 : 0, col = n ? (uint32_t)n->start_mark.column + 1 : 0;
  diags_vadd(c->diags, code, c->file, line, col, fmt, ap);
  va_end(ap);
  if (code) c->errors++;
}

#define ERR(c, n, ...) diag_at((c), MQR_ECONFIG, (n), __VA_ARGS__)

/* ---- small helpers ---------------------------------------------------------------- */

static char *dup_n(ctx_t *c, const char *s, size_t n) {
  char *p = mqr_malloc(n + 1);
  if (p == NULL) {
    c->nomem = true;
    return NULL;
  }
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* Grows *arr (of elem-size items, n used, *cap room) for one more. */
static bool grow(ctx_t *c, void **arr, uint32_t n, uint32_t *cap, size_t elem) {
  if (n < *cap) return true;
  uint32_t ncap = *cap ? *cap * 2 : 4;
  void *p = mqr_realloc(*arr, ncap * elem);
  if (p == NULL) {
    c->nomem = true;
    return false;
  }
  memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
  *arr = p;
  *cap = ncap;
  return true;
}

static yaml_node_t *node(ctx_t *c, int i) { return yaml_document_get_node(&c->doc, i); }

static const char *kind_name(const yaml_node_t *n) {
  switch (n->type) {
  case YAML_SCALAR_NODE: return "a scalar";
  case YAML_SEQUENCE_NODE: return "a sequence";
  case YAML_MAPPING_NODE: return "a mapping";
  default: return "nothing";
  }
}

static mqr_str_t scalar(const yaml_node_t *n) {
  return mqr_str_n((const char *)n->data.scalar.value, n->data.scalar.length);
}

static bool is_plain(const yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

static bool is_null(const yaml_node_t *n) {
  if (n->type != YAML_SCALAR_NODE || !is_plain(n)) return false;
  mqr_str_t s = scalar(n);
  return s.len == 0 || mqr_str_eq(s, MQR_STR("~")) || mqr_str_eq(s, MQR_STR("null")) ||
         mqr_str_eq(s, MQR_STR("Null")) || mqr_str_eq(s, MQR_STR("NULL"));
}

static bool want(ctx_t *c, const yaml_node_t *n, yaml_node_type_t type, const char *what) {
  if (n->type == type) return true;
  const char *expected = type == YAML_MAPPING_NODE    ? "a mapping"
                         : type == YAML_SEQUENCE_NODE ? "a sequence"
                                                      : "a scalar";
  ERR(c, n, "%s must be %s, not %s", what, expected, kind_name(n));
  return false;
}

/* A mapping's keys, checked: each a scalar, none repeated (for small mappings). */
typedef struct {
  yaml_node_t *key, *value;
  mqr_str_t name;
} pair_t;

static bool check_key(ctx_t *c, yaml_node_t *k, const char *where) {
  if (k->type != YAML_SCALAR_NODE) {
    ERR(c, k, "keys in %s must be scalars, not %s", where, kind_name(k));
    return false;
  }
  return true;
}

static bool repeated_key(ctx_t *c, yaml_node_t *map, yaml_node_pair_t *upto, mqr_str_t name) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < upto; p++) {
    yaml_node_t *k = node(c, p->key);
    if (k->type == YAML_SCALAR_NODE && mqr_str_eq(scalar(k), name)) return true;
  }
  return false;
}

#define FOREACH_PAIR(c, map, pr)                                                                                       \
  for (yaml_node_pair_t *pr##_it = (map)->data.mapping.pairs.start; pr##_it < (map)->data.mapping.pairs.top;           \
       pr##_it++)                                                                                                      \
    for (pair_t pr = {node((c), pr##_it->key), node((c), pr##_it->value), {0}}, *pr##_once = &pr; pr##_once;           \
         pr##_once = NULL)

static void unknown_key(ctx_t *c, const pair_t *p, const char *where, const char *known) {
  ERR(c, p->key, "unknown key '%.*s' in %s (expected one of: %s)", (int)p->name.len, p->name.ptr, where, known);
}

static bool get_bool(ctx_t *c, const pair_t *p, bool *out) {
  const yaml_node_t *n = p->value;
  if (n->type == YAML_SCALAR_NODE && is_plain(n)) {
    mqr_str_t s = scalar(n);
    if (mqr_str_eq(s, MQR_STR("true")) || mqr_str_eq(s, MQR_STR("True")) || mqr_str_eq(s, MQR_STR("TRUE"))) {
      *out = true;
      return true;
    }
    if (mqr_str_eq(s, MQR_STR("false")) || mqr_str_eq(s, MQR_STR("False")) || mqr_str_eq(s, MQR_STR("FALSE"))) {
      *out = false;
      return true;
    }
  }
  if (n->type == YAML_SCALAR_NODE)
    ERR(c, n, "'%.*s' must be true or false, not '%.*s'", (int)p->name.len, p->name.ptr, (int)n->data.scalar.length,
        (const char *)n->data.scalar.value);
  else
    ERR(c, n, "'%.*s' must be true or false, not %s", (int)p->name.len, p->name.ptr, kind_name(n));
  return false;
}

/* Parses a decimal integer with an optional byte suffix (K, M, G with optional B or iB,
 * any case, all powers of 1024 as Artemis's byte notation). */
/* The decimal integer s starts with, and in *end what follows it (in buf). */
static bool leading_int(mqr_str_t s, char (*buf)[64], long long *v, char **end) {
  if (s.len == 0 || s.len >= sizeof *buf) return false;
  memcpy(*buf, s.ptr, s.len);
  (*buf)[s.len] = '\0';
  errno = 0;
  *v = strtoll(*buf, end, 10);
  return *end != *buf && errno != ERANGE;
}

static bool parse_int(mqr_str_t s, bool bytes, int64_t *out) {
  char buf[64], *end;
  long long v;
  if (!leading_int(s, &buf, &v, &end)) return false;
  if (!bytes) {
    *out = v;
    return *end == '\0';
  }
  int64_t mul = 1;
  if (*end) {
    char u = (char)(*end | 0x20);
    mul = u == 'k' ? 1024 : u == 'm' ? 1024 * 1024 : u == 'g' ? 1024LL * 1024 * 1024 : 0;
    if (mul == 0) return false;
    end++;
    if (strcasecmp(end, "") != 0 && strcasecmp(end, "b") != 0 && strcasecmp(end, "ib") != 0) return false;
    if (v < 0) return false;
  }
  if (v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

static bool get_int(ctx_t *c, const pair_t *p, bool bytes, int64_t min, int64_t max, int64_t *out) {
  const yaml_node_t *n = p->value;
  int64_t v;
  if (n->type != YAML_SCALAR_NODE || !parse_int(scalar(n), bytes, &v)) {
    if (n->type == YAML_SCALAR_NODE)
      ERR(c, n, "'%.*s' must be %s, not '%.*s'", (int)p->name.len, p->name.ptr,
          bytes ? "a byte count such as 1048576 or 10MB" : "an integer", (int)n->data.scalar.length,
          (const char *)n->data.scalar.value);
    else
      ERR(c, n, "'%.*s' must be %s, not %s", (int)p->name.len, p->name.ptr, bytes ? "a byte count" : "an integer",
          kind_name(n));
    return false;
  }
  if (v < min || v > max) {
    ERR(c, n, "'%.*s' must be between %" PRId64 " and %" PRId64 ", not %" PRId64, (int)p->name.len, p->name.ptr, min,
        max, v);
    return false;
  }
  *out = v;
  return true;
}

/* A duration: an integer of milliseconds, or with a unit (ms, s, m, h); 0 turns the
 * thing off. */
static bool parse_duration(mqr_str_t s, int64_t *out) {
  char buf[64], *end;
  long long v;
  if (!leading_int(s, &buf, &v, &end) || v < 0) return false;
  int64_t mul = strcmp(end, "") == 0 || strcmp(end, "ms") == 0 ? 1
                : strcmp(end, "s") == 0                        ? 1000
                : strcmp(end, "m") == 0                        ? 60000
                : strcmp(end, "h") == 0                        ? 3600000
                                                               : 0;
  if (mul == 0 || v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

static bool get_duration(ctx_t *c, const pair_t *p, int64_t max_ms, int64_t *out) {
  const yaml_node_t *n = p->value;
  int64_t v;
  if (n->type != YAML_SCALAR_NODE || !parse_duration(scalar(n), &v)) {
    if (n->type == YAML_SCALAR_NODE)
      ERR(c, n, "'%.*s' must be a duration such as 30s, 500ms or 2m (0: off), not '%.*s'", (int)p->name.len,
          p->name.ptr, (int)n->data.scalar.length, (const char *)n->data.scalar.value);
    else
      ERR(c, n, "'%.*s' must be a duration, not %s", (int)p->name.len, p->name.ptr, kind_name(n));
    return false;
  }
  if (v > max_ms) {
    ERR(c, n, "'%.*s' must be at most %" PRId64 " ms, not %" PRId64, (int)p->name.len, p->name.ptr, max_ms, v);
    return false;
  }
  *out = v;
  return true;
}

static bool get_string(ctx_t *c, const pair_t *p, mqr_str_t *out) {
  if (p->value->type != YAML_SCALAR_NODE) {
    ERR(c, p->value, "'%.*s' must be a string, not %s", (int)p->name.len, p->name.ptr, kind_name(p->value));
    return false;
  }
  *out = is_null(p->value) ? mqr_str_n("", 0) : scalar(p->value);
  return true;
}

static bool get_routing_type(ctx_t *c, const yaml_node_t *n, const char *what, mqr_routing_type_t *out) {
  if (n->type != YAML_SCALAR_NODE) {
    ERR(c, n, "%s must be ANYCAST or MULTICAST, not %s", what, kind_name(n));
    return false;
  }
  if (mqr_routing_type_parse(scalar(n), out) != 0) {
    ERR(c, n, "bad routing type '%.*s' for %s (expected ANYCAST or MULTICAST)", (int)n->data.scalar.length,
        (const char *)n->data.scalar.value, what);
    return false;
  }
  return true;
}

/* ---- wildcard-addresses ----------------------------------------------------------- */

static void parse_wildcard(ctx_t *c, yaml_node_t *map) {
  if (!want(c, map, YAML_MAPPING_NODE, "wildcard-addresses")) return;
  static const char known[] = "delimiter, any-words, single-word, escape";
  mqr_wildcard_t wc = mqr_wildcard_default();
  uint32_t before = c->errors;
  FOREACH_PAIR(c, map, p) {
    if (!check_key(c, p.key, "wildcard-addresses")) continue;
    p.name = scalar(p.key);
    if (repeated_key(c, map, p_it, p.name)) {
      ERR(c, p.key, "key '%.*s' repeated in wildcard-addresses", (int)p.name.len, p.name.ptr);
      continue;
    }
    char *slot = mqr_str_eq(p.name, MQR_STR("delimiter"))     ? &wc.delimiter
                 : mqr_str_eq(p.name, MQR_STR("any-words"))   ? &wc.any_words
                 : mqr_str_eq(p.name, MQR_STR("single-word")) ? &wc.single_word
                 : mqr_str_eq(p.name, MQR_STR("escape"))      ? &wc.escape
                                                              : NULL;
    if (slot == NULL) {
      unknown_key(c, &p, "wildcard-addresses", known);
      continue;
    }
    mqr_str_t v;
    if (!get_string(c, &p, &v)) continue;
    if (v.len != 1) {
      ERR(c, p.value, "'%.*s' must be exactly one character, not '%.*s'", (int)p.name.len, p.name.ptr, (int)v.len,
          v.ptr);
      continue;
    }
    *slot = v.ptr[0];
  }
  if (c->errors != before) return;
  mqr_error_t e;
  if (mqr_wildcard_validate(&wc, &e) != 0) {
    ERR(c, map, "wildcard-addresses: %s", e.message);
    return;
  }
  c->cfg->wildcard = wc;
}

/* ---- address-settings ------------------------------------------------------------- */

static void parse_one_settings(ctx_t *c, const pair_t *entry) {
  mqr_config_t *cfg = c->cfg;
  mqr_str_t match = scalar(entry->key);
  mqr_error_t e;
  if (mqr_settings_match_validate(&cfg->wildcard, match, &e) != 0) {
    ERR(c, entry->key, "address-settings: %s", e.message);
    return;
  }
  for (uint32_t i = 0; i < cfg->n_settings; i++)
    if (strlen(cfg->settings[i].match) == match.len && memcmp(cfg->settings[i].match, match.ptr, match.len) == 0) {
      ERR(c, entry->key, "address-settings for match '%.*s' repeated (first at line %u)", (int)match.len, match.ptr,
          cfg->settings[i].line);
      return;
    }
  cfg_settings_t s = {0};
  s.line = (uint32_t)entry->key->start_mark.line + 1;
  s.column = (uint32_t)entry->key->start_mark.column + 1;
  mqr_str_t dla = {0};
  yaml_node_t *map = entry->value;
  if (!is_null(map)) {
    char where[160];
    snprintf(where, sizeof where, "address-settings '%.*s'", (int)match.len, match.ptr);
    if (!want(c, map, YAML_MAPPING_NODE, where)) return;
    static const char known[] =
        "auto-create-addresses, auto-create-queues, default-address-routing-type, default-queue-routing-type, "
        "dead-letter-address, send-to-dla-on-no-route, id-cache-size, max-size-bytes, address-full-policy";
    FOREACH_PAIR(c, map, p) {
      if (!check_key(c, p.key, where)) continue;
      p.name = scalar(p.key);
      if (repeated_key(c, map, p_it, p.name)) {
        ERR(c, p.key, "key '%.*s' repeated in %s", (int)p.name.len, p.name.ptr, where);
        continue;
      }
      int64_t v;
      if (mqr_str_eq(p.name, MQR_STR("auto-create-addresses"))) {
        if (get_bool(c, &p, &s.s.auto_create_addresses)) s.s.set |= MQR_SET_AUTO_CREATE_ADDRESSES;
      } else if (mqr_str_eq(p.name, MQR_STR("auto-create-queues"))) {
        if (get_bool(c, &p, &s.s.auto_create_queues)) s.s.set |= MQR_SET_AUTO_CREATE_QUEUES;
      } else if (mqr_str_eq(p.name, MQR_STR("send-to-dla-on-no-route"))) {
        if (get_bool(c, &p, &s.s.send_to_dla_on_no_route)) s.s.set |= MQR_SET_SEND_TO_DLA_ON_NO_ROUTE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-address-routing-type"))) {
        if (get_routing_type(c, p.value, "default-address-routing-type", &s.s.default_address_routing_type))
          s.s.set |= MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-queue-routing-type"))) {
        if (get_routing_type(c, p.value, "default-queue-routing-type", &s.s.default_queue_routing_type))
          s.s.set |= MQR_SET_DEFAULT_QUEUE_ROUTING_TYPE;
      } else if (mqr_str_eq(p.name, MQR_STR("dead-letter-address"))) {
        if (get_string(c, &p, &dla)) {
          if (dla.len == 0 || mqr_wildcard_is_pattern(&cfg->wildcard, dla))
            ERR(c, p.value, "dead-letter-address must name a concrete address");
          else
            s.s.set |= MQR_SET_DEAD_LETTER_ADDRESS;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("id-cache-size"))) {
        if (get_int(c, &p, false, 0, 1 << 24, &v)) {
          s.s.id_cache_size = (int32_t)v;
          s.s.set |= MQR_SET_ID_CACHE_SIZE;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("max-size-bytes"))) {
        if (get_int(c, &p, true, -1, INT64_MAX, &v)) {
          s.s.max_size_bytes = v;
          s.s.set |= MQR_SET_MAX_SIZE_BYTES;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("address-full-policy"))) {
        if (p.value->type != YAML_SCALAR_NODE || mqr_full_policy_parse(scalar(p.value), &s.s.address_full_policy) != 0)
          ERR(c, p.value, "address-full-policy must be BLOCK, FAIL or DROP");
        else
          s.s.set |= MQR_SET_ADDRESS_FULL_POLICY;
      } else {
        unknown_key(c, &p, where, known);
      }
    }
  }
  if (!grow(c, (void **)&cfg->settings, cfg->n_settings, &cfg->cap_settings, sizeof *cfg->settings)) return;
  s.match = dup_n(c, match.ptr, match.len);
  s.dla = (s.s.set & MQR_SET_DEAD_LETTER_ADDRESS) ? dup_n(c, dla.ptr, dla.len) : NULL;
  if (s.dla) s.s.dead_letter_address = mqr_str_n(s.dla, dla.len);
  cfg->settings[cfg->n_settings++] = s;
}

static void parse_settings(ctx_t *c, yaml_node_t *map) {
  if (is_null(map) || !want(c, map, YAML_MAPPING_NODE, "address-settings")) return;
  FOREACH_PAIR(c, map, p) {
    if (!check_key(c, p.key, "address-settings")) continue;
    parse_one_settings(c, &p);
    if (c->nomem) return;
  }
}

/* ---- listeners -------------------------------------------------------------------- */

static void parse_listener(ctx_t *c, yaml_node_t *map, uint32_t index) {
  mqr_config_t *cfg = c->cfg;
  if (!want(c, map, YAML_MAPPING_NODE, "a listener")) return;
  static const char known[] =
      "name, host, port, anycast-prefix, multicast-prefix, max-frame-size, handshake-timeout, idle-timeout";
  char defname[32];
  snprintf(defname, sizeof defname, "listener-%u", index + 1);
  mqr_str_t name = mqr_str(defname), host = MQR_STR("127.0.0.1"), px[2] = {{0}, {0}};
  const yaml_node_t *name_node = map, *px_node = NULL;
  int64_t port = DEFAULT_PORT, max_frame = MQR_DEFAULT_MAX_FRAME;
  int64_t handshake_ms = MQR_DEFAULT_HANDSHAKE_TIMEOUT, idle_ms = MQR_DEFAULT_IDLE_TIMEOUT;
  FOREACH_PAIR(c, map, p) {
    if (!check_key(c, p.key, "a listener")) continue;
    p.name = scalar(p.key);
    if (repeated_key(c, map, p_it, p.name)) {
      ERR(c, p.key, "key '%.*s' repeated in a listener", (int)p.name.len, p.name.ptr);
      continue;
    }
    if (mqr_str_eq(p.name, MQR_STR("name"))) {
      if (get_string(c, &p, &name)) {
        name_node = p.value;
        if (name.len == 0) ERR(c, p.value, "empty listener name");
      }
    } else if (mqr_str_eq(p.name, MQR_STR("host"))) {
      if (get_string(c, &p, &host)) {
        char buf[64];
        unsigned char addr[16];
        snprintf(buf, sizeof buf, "%.*s", (int)host.len, host.ptr);
        if (host.len >= sizeof buf || (inet_pton(AF_INET, buf, addr) != 1 && inet_pton(AF_INET6, buf, addr) != 1))
          ERR(c, p.value, "host must be an IPv4 or IPv6 address such as 127.0.0.1, not '%.*s'", (int)host.len,
              host.ptr);
      }
    } else if (mqr_str_eq(p.name, MQR_STR("port"))) {
      get_int(c, &p, false, 0, 65535, &port);
    } else if (mqr_str_eq(p.name, MQR_STR("max-frame-size"))) {
      get_int(c, &p, true, 1024, MQR_MAX_FRAME_LIMIT, &max_frame);
    } else if (mqr_str_eq(p.name, MQR_STR("handshake-timeout"))) {
      get_duration(c, &p, 24 * 3600000, &handshake_ms);
    } else if (mqr_str_eq(p.name, MQR_STR("idle-timeout"))) {
      if (get_duration(c, &p, 24 * 3600000, &idle_ms) && idle_ms > 0 && idle_ms < 1000) {
        ERR(c, p.value, "'idle-timeout' must be at least 1s (or 0: off), not %" PRId64 " ms", idle_ms);
      }
    } else if (mqr_str_eq(p.name, MQR_STR("anycast-prefix"))) {
      get_string(c, &p, &px[0]);
      px_node = p.value;
    } else if (mqr_str_eq(p.name, MQR_STR("multicast-prefix"))) {
      get_string(c, &p, &px[1]);
      px_node = p.value;
    } else {
      unknown_key(c, &p, "a listener", known);
    }
  }
  if (px[0].len && mqr_str_eq(px[0], px[1])) ERR(c, px_node, "anycast-prefix and multicast-prefix are the same");
  for (uint32_t i = 0; i < cfg->n_listeners; i++)
    if (strlen(cfg->listeners[i].name) == name.len && memcmp(cfg->listeners[i].name, name.ptr, name.len) == 0)
      ERR(c, name_node, "listener name '%.*s' repeated (first at line %u)", (int)name.len, name.ptr,
          cfg->listeners[i].pub.line);
  if (!grow(c, (void **)&cfg->listeners, cfg->n_listeners, &cfg->cap_listeners, sizeof *cfg->listeners)) return;
  cfg_listener_t *l = &cfg->listeners[cfg->n_listeners++];
  l->name = dup_n(c, name.ptr, name.len);
  l->host = dup_n(c, host.ptr, host.len);
  l->pub.name = l->name;
  l->pub.host = l->host;
  l->pub.port = (uint16_t)port;
  l->pub.max_frame = (uint32_t)max_frame;
  l->pub.handshake_timeout_ms = (uint32_t)handshake_ms;
  l->pub.idle_timeout_ms = (uint32_t)idle_ms;
  l->pub.line = (uint32_t)map->start_mark.line + 1;
  l->pub.column = (uint32_t)map->start_mark.column + 1;
  static const mqr_routing_type_t types[2] = {MQR_ANYCAST, MQR_MULTICAST};
  for (int i = 0; i < 2; i++) {
    if (px[i].len == 0) continue;
    l->prefix[i] = dup_n(c, px[i].ptr, px[i].len);
    l->pub.prefixes.items[l->pub.prefixes.count].text = mqr_str_n(l->prefix[i], px[i].len);
    l->pub.prefixes.items[l->pub.prefixes.count].type = types[i];
    l->pub.prefixes.count++;
  }
}

static void parse_listeners(ctx_t *c, yaml_node_t *seq) {
  if (is_null(seq) || !want(c, seq, YAML_SEQUENCE_NODE, "listeners")) return;
  uint32_t i = 0;
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++, i++) {
    parse_listener(c, node(c, *it), i);
    if (c->nomem) return;
  }
}

/* ---- addresses -------------------------------------------------------------------- */

static void parse_queue(ctx_t *c, cfg_address_t *a, mqr_routing_type_t type, yaml_node_t *key, yaml_node_t *map) {
  mqr_str_t name = scalar(key);
  if (name.len == 0) {
    ERR(c, key, "empty queue name on address '%s'", a->name);
    return;
  }
  cfg_queue_t q = {0};
  q.type = type;
  q.durable = true;
  q.enabled = true;
  q.max_consumers = -1;
  q.line = (uint32_t)key->start_mark.line + 1;
  q.column = (uint32_t)key->start_mark.column + 1;
  mqr_str_t filter = {0};
  if (map && !is_null(map)) {
    char where[160];
    snprintf(where, sizeof where, "queue '%.*s'", (int)name.len, name.ptr);
    if (!want(c, map, YAML_MAPPING_NODE, where)) return;
    static const char known[] = "durable, max-consumers, purge-on-no-consumers, enabled, filter";
    FOREACH_PAIR(c, map, p) {
      if (!check_key(c, p.key, where)) continue;
      p.name = scalar(p.key);
      if (repeated_key(c, map, p_it, p.name)) {
        ERR(c, p.key, "key '%.*s' repeated in %s", (int)p.name.len, p.name.ptr, where);
        continue;
      }
      int64_t v;
      if (mqr_str_eq(p.name, MQR_STR("durable")))
        get_bool(c, &p, &q.durable);
      else if (mqr_str_eq(p.name, MQR_STR("purge-on-no-consumers")))
        get_bool(c, &p, &q.purge_on_no_consumers);
      else if (mqr_str_eq(p.name, MQR_STR("enabled")))
        get_bool(c, &p, &q.enabled);
      else if (mqr_str_eq(p.name, MQR_STR("max-consumers"))) {
        if (get_int(c, &p, false, INT32_MIN, INT32_MAX, &v)) {
          if (v < -1)
            ERR(c, p.value, "max-consumers must be -1 (unlimited) or at least 0, not %" PRId64, v);
          else
            q.max_consumers = (int32_t)v;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("filter")))
        get_string(c, &p, &filter);
      else
        unknown_key(c, &p, where, known);
    }
  }
  if (!grow(c, (void **)&a->queues, a->n_queues, &a->cap_queues, sizeof *a->queues)) return;
  q.name = dup_n(c, name.ptr, name.len);
  q.filter = filter.len ? dup_n(c, filter.ptr, filter.len) : NULL;
  a->queues[a->n_queues++] = q;
  c->cfg->n_queues++;
  if (q.filter)
    diag_at(c, 0, key,
            "queue '%.*s' has a filter; filters are kept but not evaluated yet, so it receives every message",
            (int)name.len, name.ptr);
}

static void parse_queue_section(ctx_t *c, cfg_address_t *a, mqr_routing_type_t type, const pair_t *sec) {
  yaml_node_t *v = sec->value;
  if (is_null(v)) return;
  if (v->type == YAML_MAPPING_NODE) {
    FOREACH_PAIR(c, v, p) {
      if (!check_key(c, p.key, "a queue list")) continue;
      parse_queue(c, a, type, p.key, p.value);
      if (c->nomem) return;
    }
  } else if (v->type == YAML_SEQUENCE_NODE) {
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
      yaml_node_t *n = node(c, *it);
      if (n->type != YAML_SCALAR_NODE) {
        ERR(c, n, "items of '%.*s' must be queue names, not %s (use a mapping for queue attributes)",
            (int)sec->name.len, sec->name.ptr, kind_name(n));
        continue;
      }
      parse_queue(c, a, type, n, NULL);
      if (c->nomem) return;
    }
  } else {
    ERR(c, v, "'%.*s' must be a mapping of queue names to attributes, or a list of queue names", (int)sec->name.len,
        sec->name.ptr);
  }
}

static void parse_routing_types(ctx_t *c, cfg_address_t *a, const pair_t *p) {
  yaml_node_t *v = p->value;
  mqr_routing_set_t s = mqr_routing_set_empty();
  if (v->type == YAML_SCALAR_NODE) {
    mqr_error_t e;
    if (mqr_routing_set_parse(scalar(v), &s, &e) != 0) {
      ERR(c, v, "address '%s': %s", a->name, e.message);
      return;
    }
  } else if (v->type == YAML_SEQUENCE_NODE) {
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
      mqr_routing_type_t t;
      if (!get_routing_type(c, node(c, *it), "routing-types", &t)) return;
      s = mqr_routing_set_add(s, t);
    }
  } else {
    ERR(c, v, "routing-types must be a list such as [ANYCAST, MULTICAST], not %s", kind_name(v));
    return;
  }
  a->has_types = true;
  a->types = s;
}

static void parse_address(ctx_t *c, const pair_t *entry) {
  mqr_config_t *cfg = c->cfg;
  mqr_str_t name = scalar(entry->key);
  if (name.len == 0) {
    ERR(c, entry->key, "empty address name");
    return;
  }
  if (!grow(c, (void **)&cfg->addresses, cfg->n_addresses, &cfg->cap_addresses, sizeof *cfg->addresses)) return;
  cfg_address_t *a = &cfg->addresses[cfg->n_addresses++];
  memset(a, 0, sizeof *a);
  a->name = dup_n(c, name.ptr, name.len);
  a->line = (uint32_t)entry->key->start_mark.line + 1;
  a->column = (uint32_t)entry->key->start_mark.column + 1;
  if (a->name == NULL) return;
  yaml_node_t *map = entry->value;
  if (is_null(map)) return;
  char where[160];
  snprintf(where, sizeof where, "address '%s'", a->name);
  if (!want(c, map, YAML_MAPPING_NODE, where)) return;
  const yaml_node_t *sections[2] = {NULL, NULL}; /* ANYCAST, MULTICAST keys */
  FOREACH_PAIR(c, map, p) {
    if (!check_key(c, p.key, where)) continue;
    p.name = scalar(p.key);
    if (repeated_key(c, map, p_it, p.name)) {
      ERR(c, p.key, "key '%.*s' repeated in %s", (int)p.name.len, p.name.ptr, where);
      continue;
    }
    if (mqr_str_eq(p.name, MQR_STR("routing-types"))) {
      parse_routing_types(c, a, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("anycast"))) {
      sections[MQR_ANYCAST] = p.key;
      parse_queue_section(c, a, MQR_ANYCAST, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("multicast"))) {
      sections[MQR_MULTICAST] = p.key;
      parse_queue_section(c, a, MQR_MULTICAST, &p);
    } else {
      unknown_key(c, &p, where, "routing-types, anycast, multicast");
    }
    if (c->nomem) return;
  }
  for (int t = 0; t < 2; t++) {
    if (sections[t] == NULL) continue;
    if (!a->has_types) continue;
    if (!mqr_routing_set_contains(a->types, t)) {
      char buf[64];
      mqr_routing_set_format(a->types, buf, sizeof buf);
      ERR(c, sections[t], "address '%s' has %s queues but its routing-types are [%s]", a->name,
          t == MQR_ANYCAST ? "anycast" : "multicast", buf);
    }
  }
  if (!a->has_types)
    for (int t = 0; t < 2; t++)
      if (sections[t]) a->types = mqr_routing_set_add(a->types, t);
}

static void parse_addresses(ctx_t *c, yaml_node_t *map) {
  if (is_null(map) || !want(c, map, YAML_MAPPING_NODE, "addresses")) return;
  FOREACH_PAIR(c, map, p) {
    if (!check_key(c, p.key, "addresses")) continue;
    parse_address(c, &p);
    if (c->nomem) return;
  }
}

/* ---- the document ----------------------------------------------------------------- */

static void parse_root(ctx_t *c, yaml_node_t *root) {
  if (root == NULL || is_null(root)) return;
  if (!want(c, root, YAML_MAPPING_NODE, "the config")) return;
  static const char *const keys[] = {"wildcard-addresses", "address-settings", "listeners", "addresses"};
  yaml_node_t *found[4] = {NULL, NULL, NULL, NULL};
  FOREACH_PAIR(c, root, p) {
    if (!check_key(c, p.key, "the config")) continue;
    p.name = scalar(p.key);
    int k = -1;
    for (int i = 0; i < 4; i++)
      if (mqr_str_eq(p.name, mqr_str(keys[i]))) k = i;
    if (k < 0) {
      unknown_key(c, &p, "the config", "listeners, wildcard-addresses, address-settings, addresses");
      continue;
    }
    if (found[k]) {
      ERR(c, p.key, "key '%s' repeated in the config", keys[k]);
      continue;
    }
    found[k] = p.value;
  }
  /* The wildcard syntax first: patterns elsewhere are read with it. */
  if (found[0]) parse_wildcard(c, found[0]);
  if (found[1] && !c->nomem) parse_settings(c, found[1]);
  if (found[2] && !c->nomem) parse_listeners(c, found[2]);
  if (found[3] && !c->nomem) parse_addresses(c, found[3]);
}

void mqr_config_destroy(mqr_config_t *cfg) {
  if (cfg == NULL) return;
  for (uint32_t i = 0; i < cfg->n_listeners; i++) {
    mqr_free(cfg->listeners[i].name);
    mqr_free(cfg->listeners[i].host);
    mqr_free(cfg->listeners[i].prefix[0]);
    mqr_free(cfg->listeners[i].prefix[1]);
  }
  mqr_free(cfg->listeners);
  for (uint32_t i = 0; i < cfg->n_settings; i++) {
    mqr_free(cfg->settings[i].match);
    mqr_free(cfg->settings[i].dla);
  }
  mqr_free(cfg->settings);
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    cfg_address_t *a = &cfg->addresses[i];
    for (uint32_t k = 0; k < a->n_queues; k++) {
      mqr_free(a->queues[k].name);
      mqr_free(a->queues[k].filter);
    }
    mqr_free(a->queues);
    mqr_free(a->name);
  }
  mqr_free(cfg->addresses);
  mqr_free(cfg->file);
  mqr_free(cfg);
}

/* Builds r from cfg, reporting refusals to diags (continuing past them) or, when
 * diags is NULL, stopping at the first into err. */
/* What the router is given for a configured queue. */
static void queue_config(const cfg_address_t *a, const cfg_queue_t *q, mqr_queue_config_t *qc) {
  mqr_queue_config_init(qc, mqr_str(q->name), mqr_str(a->name), q->type);
  qc->durable = q->durable;
  qc->enabled = q->enabled;
  qc->purge_on_no_consumers = q->purge_on_no_consumers;
  qc->max_consumers = q->max_consumers;
  qc->filter = mqr_str(q->filter);
}

static int build(const mqr_config_t *cfg, mqr_router_t *r, mqr_diags_t *diags, mqr_error_t *err) {
  int rc = mqr_router_init(r, &cfg->wildcard), first = 0;
  if (rc) return mqr_error_set(err, rc, "bad wildcard syntax");
  mqr_error_t e;
#define REFUSED(line, col)                                                                                             \
  do {                                                                                                                 \
    if (rc == MQR_ENOMEM || diags == NULL) {                                                                           \
      mqr_error_set_at(err, rc, cfg->file, (line), (col), "%s", e.message);                                            \
      mqr_router_close(r);                                                                                             \
      return rc;                                                                                                       \
    }                                                                                                                  \
    diags_add_error(diags, rc, cfg->file, (line), (col), e.message);                                                   \
    if (!first) first = rc;                                                                                            \
  } while (0)
  for (uint32_t i = 0; i < cfg->n_settings; i++) {
    const cfg_settings_t *s = &cfg->settings[i];
    if ((rc = mqr_router_add_address_settings(r, mqr_str(s->match), &s->s, &e)) != 0) REFUSED(s->line, s->column);
  }
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    const cfg_address_t *a = &cfg->addresses[i];
    if ((rc = mqr_router_add_address(r, mqr_str(a->name), a->types, 0, NULL, &e)) != 0) {
      if (rc == MQR_EADDREXISTS) snprintf(e.message, sizeof e.message, "address '%s' is defined twice", a->name);
      REFUSED(a->line, a->column);
      continue;
    }
    for (uint32_t k = 0; k < a->n_queues; k++) {
      const cfg_queue_t *q = &a->queues[k];
      mqr_queue_config_t qc;
      queue_config(a, q, &qc);
      if ((rc = mqr_router_add_queue(r, &qc, NULL, &e)) != 0) REFUSED(q->line, q->column);
    }
  }
#undef REFUSED
  if (first) mqr_router_close(r);
  return first;
}

int mqr_config_build_router(const mqr_config_t *cfg, mqr_router_t *r, mqr_error_t *err) {
  return build(cfg, r, NULL, err);
}

/* ---- applying a reloaded config to a live router ---------------------------------- */

__attribute__((format(printf, 4, 5))) static void report(mqr_config_report_fn fn, void *ctx, bool applied,
                                                         const char *fmt, ...) {
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (fn) fn(ctx, applied, line);
}

static bool listener_same(const mqr_listener_config_t *a, const mqr_listener_config_t *b) {
  if (strcmp(a->name, b->name) || strcmp(a->host, b->host) || a->port != b->port || a->max_frame != b->max_frame ||
      a->handshake_timeout_ms != b->handshake_timeout_ms || a->idle_timeout_ms != b->idle_timeout_ms ||
      a->prefixes.count != b->prefixes.count)
    return false;
  for (uint32_t i = 0; i < a->prefixes.count; i++)
    if (!mqr_str_eq(a->prefixes.items[i].text, b->prefixes.items[i].text) ||
        a->prefixes.items[i].type != b->prefixes.items[i].type)
      return false;
  return true;
}

static const cfg_queue_t *find_cfg_queue(const mqr_config_t *cfg, const char *name, const cfg_address_t **addr) {
  for (uint32_t i = 0; i < cfg->n_addresses; i++)
    for (uint32_t k = 0; k < cfg->addresses[i].n_queues; k++)
      if (strcmp(cfg->addresses[i].queues[k].name, name) == 0) {
        if (addr) *addr = &cfg->addresses[i];
        return &cfg->addresses[i].queues[k];
      }
  return NULL;
}

int mqr_config_apply(const mqr_config_t *cfg, const mqr_config_t *old, mqr_router_t *r, mqr_config_report_fn fn,
                     void *ctx, mqr_error_t *err) {
  int rc;
  mqr_error_t e;
  if (memcmp(&cfg->wildcard, &old->wildcard, sizeof cfg->wildcard) != 0)
    report(fn, ctx, false, "wildcard-addresses changed: not applied until a restart");
  bool listeners_same = cfg->n_listeners == old->n_listeners;
  for (uint32_t i = 0; listeners_same && i < cfg->n_listeners; i++)
    listeners_same = listener_same(&cfg->listeners[i].pub, &old->listeners[i].pub);
  if (!listeners_same) report(fn, ctx, false, "listeners changed: not applied until a restart");
  /* Settings: the new set replaces the old. */
  for (uint32_t i = 0; i < old->n_settings; i++) {
    bool kept = false;
    for (uint32_t k = 0; k < cfg->n_settings && !kept; k++)
      kept = strcmp(cfg->settings[k].match, old->settings[i].match) == 0;
    if (!kept) {
      mqr_router_remove_address_settings(r, mqr_str(old->settings[i].match));
      report(fn, ctx, true, "address-settings '%s' removed", old->settings[i].match);
    }
  }
  for (uint32_t i = 0; i < cfg->n_settings; i++) {
    const cfg_settings_t *st = &cfg->settings[i];
    if ((rc = mqr_router_add_address_settings(r, mqr_str(st->match), &st->s, &e)) != 0)
      return mqr_error_set_at(err, rc, cfg->file, st->line, st->column, "%s", e.message);
  }
  /* Addresses and queues: what is new is made; nothing is removed. */
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    const cfg_address_t *a = &cfg->addresses[i];
    mqr_address_t *live = mqr_router_find_address(r, mqr_str(a->name));
    if (live == NULL) {
      if ((rc = mqr_router_add_address(r, mqr_str(a->name), a->types, 0, NULL, &e)) != 0)
        return mqr_error_set_at(err, rc, cfg->file, a->line, a->column, "%s", e.message);
      report(fn, ctx, true, "address '%s' added", a->name);
    } else {
      mqr_routing_set_t have = mqr_address_routing_types(live);
      for (int t = 0; t < 2; t++) {
        if (mqr_routing_set_contains(a->types, t) && !mqr_routing_set_contains(have, t)) {
          if ((rc = mqr_router_add_routing_type(r, mqr_str(a->name), t, &e)) != 0)
            return mqr_error_set_at(err, rc, cfg->file, a->line, a->column, "%s", e.message);
          report(fn, ctx, true, "address '%s' gained %s", a->name, mqr_routing_type_name(t));
        } else if (!mqr_routing_set_contains(a->types, t) && mqr_routing_set_contains(have, t)) {
          report(fn, ctx, false, "address '%s' keeps %s: removing a routing type needs a restart", a->name,
                 mqr_routing_type_name(t));
        }
      }
    }
    for (uint32_t k = 0; k < a->n_queues; k++) {
      const cfg_queue_t *q = &a->queues[k];
      mqr_queue_t *lq = mqr_router_find_queue(r, mqr_str(q->name));
      if (lq == NULL) {
        mqr_queue_config_t qc;
        queue_config(a, q, &qc);
        if ((rc = mqr_router_add_queue(r, &qc, NULL, &e)) != 0)
          return mqr_error_set_at(err, rc, cfg->file, q->line, q->column, "%s", e.message);
        report(fn, ctx, true, "queue '%s' added to address '%s'", q->name, a->name);
        continue;
      }
      if (!mqr_str_eq(mqr_address_name(mqr_queue_address(lq)), mqr_str(a->name)) ||
          mqr_queue_routing_type(lq) != q->type || mqr_queue_durable(lq) != q->durable ||
          mqr_queue_max_consumers(lq) != q->max_consumers ||
          mqr_queue_purge_on_no_consumers(lq) != q->purge_on_no_consumers)
        report(fn, ctx, false, "queue '%s' changed: only 'enabled' applies without a restart", q->name);
      if (mqr_queue_enabled(lq) != q->enabled) {
        mqr_queue_set_enabled(lq, q->enabled);
        report(fn, ctx, true, "queue '%s' %s", q->name, q->enabled ? "enabled" : "disabled");
      }
    }
  }
  for (uint32_t i = 0; i < old->n_addresses; i++) {
    bool kept = false;
    for (uint32_t k = 0; k < cfg->n_addresses && !kept; k++)
      kept = strcmp(cfg->addresses[k].name, old->addresses[i].name) == 0;
    if (!kept)
      report(fn, ctx, false, "address '%s' is gone from the config: not removed until a restart",
             old->addresses[i].name);
    for (uint32_t k = 0; k < old->addresses[i].n_queues; k++)
      if (find_cfg_queue(cfg, old->addresses[i].queues[k].name, NULL) == NULL)
        report(fn, ctx, false, "queue '%s' is gone from the config: not removed until a restart",
               old->addresses[i].queues[k].name);
  }
  return 0;
}

int mqr_config_load_string(const char *name, const char *text, size_t len, mqr_config_t **out, mqr_diags_t *diags) {
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.file = name ? name : "<config>";
  c.diags = diags;
  uint32_t errors_before = diags ? diags->errors : 0;
  mqr_config_t *cfg = mqr_calloc(1, sizeof *cfg);
  if (cfg == NULL) return MQR_ENOMEM;
  cfg->wildcard = mqr_wildcard_default();
  if ((cfg->file = mqr_malloc(strlen(c.file) + 1)) == NULL) {
    mqr_free(cfg);
    return MQR_ENOMEM;
  }
  strcpy(cfg->file, c.file);
  c.cfg = cfg;

  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    mqr_config_destroy(cfg);
    return MQR_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &c.doc)) {
    if (parser.error == YAML_MEMORY_ERROR) {
      yaml_parser_delete(&parser);
      mqr_config_destroy(cfg);
      return MQR_ENOMEM;
    }
    const yaml_mark_t *m = &parser.problem_mark;
    if (parser.context)
      diags_add(diags, MQR_ESYNTAX, c.file, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
                "YAML syntax: %s %s that starts at line %u, column %u", parser.problem ? parser.problem : "error",
                parser.context, (unsigned)parser.context_mark.line + 1, (unsigned)parser.context_mark.column + 1);
    else
      diags_add(diags, MQR_ESYNTAX, c.file, (uint32_t)m->line + 1, (uint32_t)m->column + 1, "YAML syntax: %s",
                parser.problem ? parser.problem : "error");
    yaml_parser_delete(&parser);
    mqr_config_destroy(cfg);
    return MQR_ECONFIG;
  }
  yaml_parser_delete(&parser);
  parse_root(&c, yaml_document_get_root_node(&c.doc));
  yaml_document_delete(&c.doc);
  if (c.nomem) {
    mqr_config_destroy(cfg);
    return MQR_ENOMEM;
  }
  if (c.errors == 0) {
    /* The trial build finds what only the whole config shows: names used twice. */
    mqr_router_t r;
    mqr_diags_t scratch;
    mqr_diags_t *d = diags ? diags : (mqr_diags_init(&scratch, NULL, 0), &scratch);
    int rc = build(cfg, &r, d, NULL);
    if (rc == MQR_ENOMEM) {
      mqr_config_destroy(cfg);
      return MQR_ENOMEM;
    }
    if (rc == 0) mqr_router_close(&r);
    if (rc) c.errors++;
  }
  if (c.errors || (diags && diags->errors != errors_before)) {
    mqr_config_destroy(cfg);
    return MQR_ECONFIG;
  }
  *out = cfg;
  return 0;
}

int mqr_config_load_file(const char *path, mqr_config_t **out, mqr_diags_t *diags) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    diags_add(diags, MQR_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    return MQR_EIO;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 8192;
      if (ncap > ((size_t)64 << 20)) {
        mqr_free(buf);
        fclose(f);
        diags_add(diags, MQR_ECONFIG, path, 0, 0, "config file larger than 64 MiB");
        return MQR_ECONFIG;
      }
      char *p = mqr_realloc(buf, ncap);
      if (p == NULL) {
        mqr_free(buf);
        fclose(f);
        return MQR_ENOMEM;
      }
      buf = p;
      cap = ncap;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (failed) {
    mqr_free(buf);
    diags_add(diags, MQR_EIO, path, 0, 0, "read error");
    return MQR_EIO;
  }
  int rc = mqr_config_load_string(path, buf, len, out, diags);
  mqr_free(buf);
  return rc;
}

mqr_str_t mqr_config_default_text(void) { return mqr_str_n(mqr__default_conf, mqr__default_conf_len); }
const char *mqr_config_default_name(void) { return "<embedded conf/mqr.yaml>"; }

int mqr_config_load_default(mqr_config_t **out, mqr_diags_t *diags) {
  return mqr_config_load_string(mqr_config_default_name(), mqr__default_conf, mqr__default_conf_len, out, diags);
}

const char *mqr_config_file(const mqr_config_t *cfg) { return cfg->file; }
mqr_wildcard_t mqr_config_wildcard(const mqr_config_t *cfg) { return cfg->wildcard; }
uint32_t mqr_config_listener_count(const mqr_config_t *cfg) { return cfg->n_listeners; }
uint32_t mqr_config_address_count(const mqr_config_t *cfg) { return cfg->n_addresses; }
uint32_t mqr_config_queue_count(const mqr_config_t *cfg) { return cfg->n_queues; }
uint32_t mqr_config_settings_count(const mqr_config_t *cfg) { return cfg->n_settings; }

const mqr_address_settings_t *mqr_config_settings(const mqr_config_t *cfg, uint32_t i, mqr_str_t *match) {
  if (i >= cfg->n_settings) return NULL;
  if (match) *match = mqr_str(cfg->settings[i].match);
  return &cfg->settings[i].s;
}

const mqr_listener_config_t *mqr_config_listener(const mqr_config_t *cfg, uint32_t i) {
  if (i >= cfg->n_listeners) return NULL;
  return &cfg->listeners[i].pub;
}

const mqr_listener_config_t *mqr_config_find_listener(const mqr_config_t *cfg, const char *name) {
  for (uint32_t i = 0; i < cfg->n_listeners; i++)
    if (strcmp(cfg->listeners[i].name, name) == 0) return mqr_config_listener(cfg, i);
  return NULL;
}
