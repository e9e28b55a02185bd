/* Diagnostics, and reading YAML nodes with their positions (config_int.h). */

#include <stdint.h>

#include "config_int.h"

/* ---- diagnostics ------------------------------------------------------------------ */

void mqr_diags_init(mqr_diags_t *d, mqr_error_t *items, uint32_t cap) {
  memset(d, 0, sizeof *d);
  d->items = items;
  d->cap = items ? cap : 0;
}

void mqr__cfg_diags_vadd(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt,
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
  mqr_error_vset_at(&d->items[d->count++], code, file, line, col, fmt, ap);
}

void mqr__cfg_diags_add(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void mqr__cfg_diags_add(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mqr__cfg_diags_vadd(d, code, file, line, col, fmt, ap);
  va_end(ap);
}

void mqr__cfg_diags_add_error(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col,
                              const char *msg) {
  mqr__cfg_diags_add(d, code, file, line, col, "%s", msg);
}

void mqr__cfg_diag_at(ctx_t *c, int code, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void mqr__cfg_diag_at(ctx_t *c, int code, const yaml_node_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  uint32_t line = n ? (uint32_t)n->start_mark.line + 1 : 0, col = n ? (uint32_t)n->start_mark.column + 1 : 0;
  mqr__cfg_diags_vadd(c->diags, code, c->file, line, col, fmt, ap);
  va_end(ap);
  if (code) c->errors++;
}

/* ---- small helpers ---------------------------------------------------------------- */

char *mqr__cfg_dup_n(ctx_t *c, const char *s, size_t n) {
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
bool mqr__cfg_grow(ctx_t *c, void **arr, uint32_t n, uint32_t *cap, size_t elem) {
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

yaml_node_t *mqr__cfg_node(ctx_t *c, int i) { return yaml_document_get_node(&c->doc, i); }

const char *mqr__cfg_kind_name(const yaml_node_t *n) {
  switch (n->type) {
  case YAML_SCALAR_NODE: return "a scalar";
  case YAML_SEQUENCE_NODE: return "a sequence";
  case YAML_MAPPING_NODE: return "a mapping";
  default: return "nothing";
  }
}

mqr_str_t mqr__cfg_scalar(const yaml_node_t *n) {
  return mqr_str_n((const char *)n->data.scalar.value, n->data.scalar.length);
}

bool mqr__cfg_is_plain(const yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

bool mqr__cfg_is_null(const yaml_node_t *n) {
  if (n->type != YAML_SCALAR_NODE || !mqr__cfg_is_plain(n)) return false;
  mqr_str_t s = mqr__cfg_scalar(n);
  return s.len == 0 || mqr_str_eq(s, MQR_STR("~")) || mqr_str_eq(s, MQR_STR("null")) ||
         mqr_str_eq(s, MQR_STR("Null")) || mqr_str_eq(s, MQR_STR("NULL"));
}

bool mqr__cfg_want(ctx_t *c, const yaml_node_t *n, yaml_node_type_t type, const char *what) {
  if (n->type == type) return true;
  const char *expected = type == YAML_MAPPING_NODE    ? "a mapping"
                         : type == YAML_SEQUENCE_NODE ? "a sequence"
                                                      : "a scalar";
  ERR(c, n, "%s must be %s, not %s", what, expected, mqr__cfg_kind_name(n));
  return false;
}

/* A mapping's keys, checked: each a scalar, none repeated (for small mappings). */

bool mqr__cfg_check_key(ctx_t *c, yaml_node_t *k, const char *where) {
  if (k->type != YAML_SCALAR_NODE) {
    ERR(c, k, "keys in %s must be scalars, not %s", where, mqr__cfg_kind_name(k));
    return false;
  }
  return true;
}

static bool repeated_key(ctx_t *c, yaml_node_t *map, yaml_node_pair_t *upto, mqr_str_t name) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < upto; p++) {
    yaml_node_t *k = mqr__cfg_node(c, p->key);
    if (k->type == YAML_SCALAR_NODE && mqr_str_eq(mqr__cfg_scalar(k), name)) return true;
  }
  return false;
}

bool mqr__cfg_key(ctx_t *c, yaml_node_t *map, yaml_node_pair_t *at, pair_t *p, const char *where) {
  if (!mqr__cfg_check_key(c, p->key, where)) return false;
  p->name = mqr__cfg_scalar(p->key);
  if (repeated_key(c, map, at, p->name)) {
    ERR(c, p->key, "key '%.*s' repeated in %s", (int)p->name.len, p->name.ptr, where);
    return false;
  }
  return true;
}

/* Edit distance (insert, delete, substitute, swap of neighbours), at most 64 bytes a side. */
static size_t distance(mqr_str_t a, mqr_str_t b) {
  if (a.len > 64 || b.len > 64) return SIZE_MAX;
  size_t d[65][65];
  for (size_t i = 0; i <= a.len; i++) d[i][0] = i;
  for (size_t j = 0; j <= b.len; j++) d[0][j] = j;
  for (size_t i = 1; i <= a.len; i++)
    for (size_t j = 1; j <= b.len; j++) {
      size_t best = d[i - 1][j - 1] + (a.ptr[i - 1] != b.ptr[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a.ptr[i - 1] == b.ptr[j - 2] && a.ptr[i - 2] == b.ptr[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[a.len][b.len];
}

void mqr__cfg_unknown_key(ctx_t *c, const pair_t *p, const char *where, const char *known) {
  /* The known key nearest to it, when it is near enough to be a slip. */
  mqr_str_t best = mqr_str_n(NULL, 0);
  size_t best_d = SIZE_MAX;
  for (const char *k = known; *k;) {
    size_t n = strcspn(k, ",");
    mqr_str_t cand = mqr_str_n(k, n);
    size_t dd = distance(p->name, cand);
    if (dd < best_d) best_d = dd, best = cand;
    k += n;
    while (*k == ',' || *k == ' ') k++;
  }
  size_t near = p->name.len / 3 > 2 ? p->name.len / 3 : 2;
  if (best.len && best_d <= near)
    ERR(c, p->key, "unknown key '%.*s' in %s: did you mean '%.*s'?", (int)p->name.len, p->name.ptr, where,
        (int)best.len, best.ptr);
  else if (strlen(known) < 300)
    ERR(c, p->key, "unknown key '%.*s' in %s (expected one of: %s)", (int)p->name.len, p->name.ptr, where, known);
  else
    ERR(c, p->key, "unknown key '%.*s' in %s (docs/config.md and mqr.yaml(5) list the keys)", (int)p->name.len,
        p->name.ptr, where);
}

bool mqr__cfg_get_bool(ctx_t *c, const pair_t *p, bool *out) {
  const yaml_node_t *n = p->value;
  if (n->type == YAML_SCALAR_NODE && mqr__cfg_is_plain(n)) {
    mqr_str_t s = mqr__cfg_scalar(n);
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
    ERR(c, n, "'%.*s' must be true or false, not %s", (int)p->name.len, p->name.ptr, mqr__cfg_kind_name(n));
  return false;
}

/* Parses a decimal integer with an optional byte suffix (K, M, G with optional B or iB,
 * any case, all powers of 1024 as Artemis's byte notation). */
/* The decimal integer s starts with, and in *end what follows it (in buf). */
static bool mqr__cfg_leading_int(mqr_str_t s, char (*buf)[64], long long *v, char **end) {
  if (s.len == 0 || s.len >= sizeof *buf) return false;
  memcpy(*buf, s.ptr, s.len);
  (*buf)[s.len] = '\0';
  errno = 0;
  *v = strtoll(*buf, end, 10);
  return *end != *buf && errno != ERANGE;
}

bool mqr__cfg_parse_int(mqr_str_t s, bool bytes, int64_t *out) {
  char buf[64], *end;
  long long v;
  if (!mqr__cfg_leading_int(s, &buf, &v, &end)) return false;
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

bool mqr__cfg_get_int(ctx_t *c, const pair_t *p, bool bytes, int64_t min, int64_t max, int64_t *out) {
  const yaml_node_t *n = p->value;
  int64_t v;
  if (n->type != YAML_SCALAR_NODE || !mqr__cfg_parse_int(mqr__cfg_scalar(n), bytes, &v)) {
    if (n->type == YAML_SCALAR_NODE)
      ERR(c, n, "'%.*s' must be %s, not '%.*s'", (int)p->name.len, p->name.ptr,
          bytes ? "a byte count such as 1048576 or 10MB" : "an integer", (int)n->data.scalar.length,
          (const char *)n->data.scalar.value);
    else
      ERR(c, n, "'%.*s' must be %s, not %s", (int)p->name.len, p->name.ptr, bytes ? "a byte count" : "an integer",
          mqr__cfg_kind_name(n));
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
bool mqr__cfg_parse_duration(mqr_str_t s, int64_t *out) {
  char buf[64], *end;
  long long v;
  if (!mqr__cfg_leading_int(s, &buf, &v, &end) || v < 0) return false;
  int64_t mul = strcmp(end, "") == 0 || strcmp(end, "ms") == 0 ? 1
                : strcmp(end, "s") == 0                        ? 1000
                : strcmp(end, "m") == 0                        ? 60000
                : strcmp(end, "h") == 0                        ? 3600000
                                                               : 0;
  if (mul == 0 || v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

bool mqr__cfg_get_duration(ctx_t *c, const pair_t *p, int64_t max_ms, int64_t *out) {
  const yaml_node_t *n = p->value;
  int64_t v;
  if (n->type != YAML_SCALAR_NODE || !mqr__cfg_parse_duration(mqr__cfg_scalar(n), &v)) {
    if (n->type == YAML_SCALAR_NODE)
      ERR(c, n, "'%.*s' must be a duration such as 30s, 500ms or 2m (0: off), not '%.*s'", (int)p->name.len,
          p->name.ptr, (int)n->data.scalar.length, (const char *)n->data.scalar.value);
    else
      ERR(c, n, "'%.*s' must be a duration, not %s", (int)p->name.len, p->name.ptr, mqr__cfg_kind_name(n));
    return false;
  }
  if (v > max_ms) {
    ERR(c, n, "'%.*s' must be at most %" PRId64 " ms, not %" PRId64, (int)p->name.len, p->name.ptr, max_ms, v);
    return false;
  }
  *out = v;
  return true;
}

bool mqr__cfg_get_string(ctx_t *c, const pair_t *p, mqr_str_t *out) {
  if (p->value->type != YAML_SCALAR_NODE) {
    ERR(c, p->value, "'%.*s' must be a string, not %s", (int)p->name.len, p->name.ptr, mqr__cfg_kind_name(p->value));
    return false;
  }
  *out = mqr__cfg_is_null(p->value) ? mqr_str_n("", 0) : mqr__cfg_scalar(p->value);
  return true;
}

bool mqr__cfg_get_routing_type(ctx_t *c, const yaml_node_t *n, const char *what, mqr_routing_type_t *out) {
  if (n->type != YAML_SCALAR_NODE) {
    ERR(c, n, "%s must be ANYCAST or MULTICAST, not %s", what, mqr__cfg_kind_name(n));
    return false;
  }
  if (mqr_routing_type_parse(mqr__cfg_scalar(n), out) != 0) {
    ERR(c, n, "bad routing type '%.*s' for %s (expected ANYCAST or MULTICAST)", (int)n->data.scalar.length,
        (const char *)n->data.scalar.value, what);
    return false;
  }
  return true;
}
