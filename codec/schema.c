/* Schema parsing: JSON -> a graph of nodes, names resolved as they are met, then the
 * checks that need the whole graph (defaults, endless recursion) and min sizes; the
 * Parsing Canonical Form and the fingerprint are canonical.c's. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "binary.h"
#include "path.h"
#include "schema_int.h"

typedef struct {
  mqr_avro_schema_t *s;
  mqr_error_t *err;
  mqr__path_t path;
  uint32_t cap_named;
  /* Records whose field defaults are checked once every name is known. */
  mqr__avro_node_t **records;
  uint32_t n_records, cap_records;
} ctx_t;

const char *const mqr__avro_primitive_names[8] = {"null",  "boolean", "int",   "long",
                                                  "float", "double",  "bytes", "string"};

/* ---- errors and paths ---------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int bad(ctx_t *c, const mqr__json_t *at, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mqr_error_set_at(c->err, MQR_ESCHEMA, NULL, at ? at->line : 0, at ? at->column : 0, "%s: %s",
                          mqr__path_str(&c->path, "(root)"), msg);
}

static int nomem(ctx_t *c) { return mqr_error_set(c->err, MQR_ENOMEM, "out of memory parsing a schema"); }

/* ---- names ------------------------------------------------------------------------ */

static bool valid_name(mqr_str_t n) {
  if (n.len == 0) return false;
  for (size_t i = 0; i < n.len; i++) {
    char ch = n.ptr[i];
    bool alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
    if (!(alpha || (i > 0 && ch >= '0' && ch <= '9'))) return false;
  }
  return true;
}

/* A dotted name: each part a valid name. Empty is allowed when allow_empty. */
static bool valid_dotted(mqr_str_t n, bool allow_empty) {
  if (n.len == 0) return allow_empty;
  size_t start = 0;
  for (size_t i = 0; i <= n.len; i++) {
    if (i == n.len || n.ptr[i] == '.') {
      if (!valid_name(mqr_str_n(n.ptr + start, i - start))) return false;
      start = i + 1;
    }
  }
  return true;
}

static bool is_primitive_name(mqr_str_t n) {
  for (size_t i = 0; i < 8; i++)
    if (mqr_str_eq(n, mqr_str(mqr__avro_primitive_names[i]))) return true;
  return false;
}

/* Full name of name in namespace ns: a name with a dot is already full. */
static int full_name(ctx_t *c, mqr_str_t name, mqr_str_t ns, mqr_str_t *out) {
  if (memchr(name.ptr, '.', name.len) || ns.len == 0) {
    *out = name;
    return 0;
  }
  char *b = mqr__arena_alloc(&c->s->arena, ns.len + 1 + name.len + 1);
  if (b == NULL) return nomem(c);
  memcpy(b, ns.ptr, ns.len);
  b[ns.len] = '.';
  memcpy(b + ns.len + 1, name.ptr, name.len);
  *out = mqr_str_n(b, ns.len + 1 + name.len);
  return 0;
}

static mqr_str_t namespace_of(mqr_str_t full) {
  for (size_t i = full.len; i > 0; i--)
    if (full.ptr[i - 1] == '.') return mqr_str_n(full.ptr, i - 1);
  return mqr_str_n(full.ptr, 0);
}

static mqr__avro_node_t *find_named(const mqr_avro_schema_t *s, mqr_str_t full) {
  for (uint32_t i = 0; i < s->n_named; i++)
    if (mqr_str_eq(s->named[i]->fullname, full)) return s->named[i];
  return NULL;
}

static int add_named(ctx_t *c, mqr__avro_node_t *n, const mqr__json_t *at) {
  if (find_named(c->s, n->fullname))
    return bad(c, at, "the name '%.*s' is already defined", (int)n->fullname.len, n->fullname.ptr);
  if (c->s->n_named == c->cap_named) {
    uint32_t ncap = c->cap_named ? c->cap_named * 2 : 16;
    void *p = mqr_realloc(c->s->named, ncap * sizeof *c->s->named);
    if (p == NULL) return nomem(c);
    c->s->named = p;
    c->cap_named = ncap;
  }
  c->s->named[c->s->n_named++] = n;
  return 0;
}

/* A reference by name: the full name first, then as given (Avro's resolution). */
static int resolve_ref(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t **out) {
  mqr_str_t full;
  int rc = full_name(c, j->str, ns, &full);
  if (rc) return rc;
  mqr__avro_node_t *n = find_named(c->s, full);
  if (n == NULL && full.ptr != j->str.ptr) n = find_named(c->s, j->str);
  if (n == NULL)
    return bad(c, j, "unknown type '%.*s' (a named type must be defined before it is used)", (int)j->str.len,
               j->str.ptr);
  *out = n;
  return 0;
}

/* ---- nodes ------------------------------------------------------------------------ */

static mqr__avro_node_t *new_node(ctx_t *c, int type) {
  mqr__avro_node_t *n = mqr__arena_alloc(&c->s->arena, sizeof *n);
  if (n) {
    n->type = (uint8_t)type;
    n->enum_default = -1;
  }
  return n;
}

static int parse_type(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t **out);

static int get_string(ctx_t *c, const mqr__json_t *obj, const char *key, bool required, mqr_str_t *out) {
  const mqr__json_t *v = mqr__json_get(obj, key);
  if (v == NULL) {
    if (required) return bad(c, obj, "missing \"%s\"", key);
    *out = mqr_str_n("", 0);
    return 0;
  }
  if (v->kind != MQR__JSON_STRING)
    return bad(c, v, "\"%s\" must be a string, not %s", key, mqr__json_kind_name(v->kind));
  *out = v->str;
  return 0;
}

static int parse_aliases(ctx_t *c, const mqr__json_t *obj, mqr_str_t ns, bool qualify, mqr_str_t **out, uint32_t *n) {
  const mqr__json_t *a = mqr__json_get(obj, "aliases");
  *out = NULL;
  *n = 0;
  if (a == NULL) return 0;
  if (a->kind != MQR__JSON_ARRAY) return bad(c, a, "\"aliases\" must be an array of names");
  if (a->n == 0) return 0;
  mqr_str_t *list = mqr__arena_alloc(&c->s->arena, a->n * sizeof *list);
  if (list == NULL) return nomem(c);
  for (uint32_t i = 0; i < a->n; i++) {
    const mqr__json_t *e = a->items[i];
    if (e->kind != MQR__JSON_STRING || !(qualify ? valid_dotted(e->str, false) : valid_name(e->str)))
      return bad(c, e, "aliases[%u] is not a valid name", i);
    if (qualify) {
      int rc = full_name(c, e->str, ns, &list[i]);
      if (rc) return rc;
    } else {
      list[i] = e->str;
    }
  }
  *out = list;
  *n = a->n;
  return 0;
}

/* Name and namespace of a named type; registers it before its body is parsed, so that
 * the body may refer to it. */
static int named_header(ctx_t *c, const mqr__json_t *j, mqr__avro_node_t *n, mqr_str_t *ns) {
  mqr_str_t name, space;
  int rc;
  if ((rc = get_string(c, j, "name", true, &name)) != 0) return rc;
  if ((rc = get_string(c, j, "namespace", false, &space)) != 0) return rc;
  const mqr__json_t *at = mqr__json_get(j, "name");
  if (!valid_dotted(name, false)) return bad(c, at, "'%.*s' is not a valid name", (int)name.len, name.ptr);
  if (mqr__json_get(j, "namespace") && !valid_dotted(space, true))
    return bad(c, mqr__json_get(j, "namespace"), "'%.*s' is not a valid namespace", (int)space.len, space.ptr);
  if (mqr__json_get(j, "namespace")) *ns = space;
  if ((rc = full_name(c, name, *ns, &n->fullname)) != 0) return rc;
  mqr_str_t last = n->fullname;
  for (size_t i = last.len; i > 0; i--)
    if (last.ptr[i - 1] == '.') {
      last = mqr_str_n(last.ptr + i, last.len - i);
      break;
    }
  if (is_primitive_name(last))
    return bad(c, at, "'%.*s' is a primitive type's name and cannot name a type", (int)last.len, last.ptr);
  *ns = namespace_of(n->fullname);
  if ((rc = parse_aliases(c, j, *ns, true, &n->aliases, &n->n_aliases)) != 0) return rc;
  return add_named(c, n, at);
}

static int parse_record(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t *n) {
  int rc = named_header(c, j, n, &ns);
  if (rc) return rc;
  const mqr__json_t *fields = mqr__json_get(j, "fields");
  if (fields == NULL) return bad(c, j, "a record needs \"fields\"");
  if (fields->kind != MQR__JSON_ARRAY) return bad(c, fields, "\"fields\" must be an array");
  n->n = fields->n;
  if (n->n && (n->fields = mqr__arena_alloc(&c->s->arena, n->n * sizeof *n->fields)) == NULL) return nomem(c);
  for (uint32_t i = 0; i < n->n; i++) {
    const mqr__json_t *f = fields->items[i];
    size_t mark = mqr__path_push(&c->path, "fields[%u]", i);
    mqr__avro_field_t *fd = &n->fields[i];
    if (f->kind != MQR__JSON_OBJECT) return bad(c, f, "a field must be an object");
    if ((rc = get_string(c, f, "name", true, &fd->name)) != 0) return rc;
    if (!valid_name(fd->name))
      return bad(c, mqr__json_get(f, "name"), "'%.*s' is not a valid field name", (int)fd->name.len, fd->name.ptr);
    for (uint32_t k = 0; k < i; k++)
      if (mqr_str_eq(n->fields[k].name, fd->name))
        return bad(c, mqr__json_get(f, "name"), "field '%.*s' is defined twice", (int)fd->name.len, fd->name.ptr);
    const mqr__json_t *t = mqr__json_get(f, "type");
    if (t == NULL) return bad(c, f, "field '%.*s' has no \"type\"", (int)fd->name.len, fd->name.ptr);
    size_t m2 = mqr__path_push(&c->path, "type");
    if ((rc = parse_type(c, t, ns, &fd->type)) != 0) return rc;
    mqr__path_pop(&c->path, m2);
    fd->def = mqr__json_get(f, "default");
    const mqr__json_t *order = mqr__json_get(f, "order");
    if (order && !(mqr__json_is_str(order, "ascending") || mqr__json_is_str(order, "descending") ||
                   mqr__json_is_str(order, "ignore")))
      return bad(c, order, "\"order\" must be \"ascending\", \"descending\" or \"ignore\"");
    if ((rc = parse_aliases(c, f, ns, false, &fd->aliases, &fd->n_aliases)) != 0) return rc;
    mqr__path_pop(&c->path, mark);
  }
  if (c->n_records == c->cap_records) {
    uint32_t ncap = c->cap_records ? c->cap_records * 2 : 16;
    void *p = mqr_realloc(c->records, ncap * sizeof *c->records);
    if (p == NULL) return nomem(c);
    c->records = p;
    c->cap_records = ncap;
  }
  c->records[c->n_records++] = n;
  return 0;
}

static uint32_t sym_hash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

int32_t mqr__avro_enum_ordinal(const mqr__avro_node_t *e, const char *s, size_t n) {
  for (uint32_t i = sym_hash(s, n) & e->symmask;; i = (i + 1) & e->symmask) {
    uint32_t v = e->symtab[i];
    if (v == 0) return -1;
    mqr_str_t sym = e->symbols[v - 1];
    if (sym.len == n && memcmp(sym.ptr, s, n) == 0) return (int32_t)(v - 1);
  }
}

static int parse_enum(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t *n) {
  int rc = named_header(c, j, n, &ns);
  if (rc) return rc;
  const mqr__json_t *syms = mqr__json_get(j, "symbols");
  if (syms == NULL) return bad(c, j, "an enum needs \"symbols\"");
  if (syms->kind != MQR__JSON_ARRAY) return bad(c, syms, "\"symbols\" must be an array of names");
  n->n = syms->n;
  uint32_t cap = 4;
  while (cap < n->n * 2) cap *= 2;
  n->symmask = cap - 1;
  if ((n->symtab = mqr__arena_alloc(&c->s->arena, cap * sizeof *n->symtab)) == NULL) return nomem(c);
  if (n->n && (n->symbols = mqr__arena_alloc(&c->s->arena, n->n * sizeof *n->symbols)) == NULL) return nomem(c);
  for (uint32_t i = 0; i < n->n; i++) {
    const mqr__json_t *s = syms->items[i];
    size_t mark = mqr__path_push(&c->path, "symbols[%u]", i);
    if (s->kind != MQR__JSON_STRING || !valid_name(s->str)) return bad(c, s, "not a valid enum symbol");
    if (mqr__avro_enum_ordinal(n, s->str.ptr, s->str.len) >= 0)
      return bad(c, s, "symbol '%.*s' is listed twice", (int)s->str.len, s->str.ptr);
    n->symbols[i] = s->str;
    uint32_t k = sym_hash(s->str.ptr, s->str.len) & n->symmask;
    while (n->symtab[k]) k = (k + 1) & n->symmask;
    n->symtab[k] = i + 1;
    mqr__path_pop(&c->path, mark);
  }
  const mqr__json_t *def = mqr__json_get(j, "default");
  if (def) {
    if (def->kind != MQR__JSON_STRING) return bad(c, def, "an enum's \"default\" must be one of its symbols");
    n->enum_default = mqr__avro_enum_ordinal(n, def->str.ptr, def->str.len);
    if (n->enum_default < 0)
      return bad(c, def, "the enum's default '%.*s' is not one of its symbols", (int)def->str.len, def->str.ptr);
  }
  return 0;
}

static int parse_fixed(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t *n) {
  const mqr__json_t *size = mqr__json_get(j, "size");
  if (size == NULL) return bad(c, j, "a fixed needs \"size\"");
  if (size->kind != MQR__JSON_NUMBER || !size->is_int || size->i < 0 || size->i > INT32_MAX)
    return bad(c, size, "\"size\" must be a whole number from 0 to 2147483647");
  n->n = (uint32_t)size->i;
  return named_header(c, j, n, &ns);
}

static int parse_union(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t **out) {
  mqr__avro_node_t *n = new_node(c, MQR_AVRO_UNION);
  if (n == NULL) return nomem(c);
  n->n = j->n;
  if (n->n && (n->branches = mqr__arena_alloc(&c->s->arena, n->n * sizeof *n->branches)) == NULL) return nomem(c);
  for (uint32_t i = 0; i < n->n; i++) {
    size_t mark = mqr__path_push(&c->path, "[%u]", i);
    int rc = parse_type(c, j->items[i], ns, &n->branches[i]);
    if (rc) return rc;
    const mqr__avro_node_t *b = n->branches[i];
    if (b->type == MQR_AVRO_UNION) return bad(c, j->items[i], "a union may not hold a union directly");
    for (uint32_t k = 0; k < i; k++) {
      const mqr__avro_node_t *o = n->branches[k];
      bool named = b->type == MQR_AVRO_RECORD || b->type == MQR_AVRO_ENUM || b->type == MQR_AVRO_FIXED;
      if (o->type == b->type && (!named || mqr_str_eq(o->fullname, b->fullname))) {
        mqr_str_t bn = mqr__avro_branch_name(b);
        return bad(c, j->items[i], "the union holds '%.*s' twice", (int)bn.len, bn.ptr);
      }
    }
    mqr__path_pop(&c->path, mark);
  }
  *out = n;
  return 0;
}

static void set_logical(ctx_t *c, const mqr__json_t *j, mqr__avro_node_t *n) {
  const mqr__json_t *lt = mqr__json_get(j, "logicalType");
  if (lt == NULL || lt->kind != MQR__JSON_STRING) return;
  (void)c;
  int t = n->type;
  if (mqr__json_is_str(lt, "decimal") && (t == MQR_AVRO_BYTES || t == MQR_AVRO_FIXED)) {
    const mqr__json_t *p = mqr__json_get(j, "precision"), *s = mqr__json_get(j, "scale");
    if (!p || !p->is_int || p->i <= 0) return;
    int64_t scale = 0;
    if (s) {
      if (!s->is_int || s->i < 0) return;
      scale = s->i;
    }
    if (scale > p->i) return;
    if (t == MQR_AVRO_FIXED) {
      /* The most digits a two's complement number of size bytes can hold. */
      double max_digits = floor(log10(2) * (8.0 * n->n - 1));
      if ((double)p->i > max_digits) return;
    }
    n->logical = MQR_AVRO_LOGICAL_DECIMAL;
    n->precision = (int32_t)p->i;
    n->scale = (int32_t)scale;
    return;
  }
  static const struct {
    const char *name;
    int type, logical;
  } table[] = {
      {"uuid", MQR_AVRO_STRING, MQR_AVRO_LOGICAL_UUID},
      {"date", MQR_AVRO_INT, MQR_AVRO_LOGICAL_DATE},
      {"time-millis", MQR_AVRO_INT, MQR_AVRO_LOGICAL_TIME_MILLIS},
      {"time-micros", MQR_AVRO_LONG, MQR_AVRO_LOGICAL_TIME_MICROS},
      {"timestamp-millis", MQR_AVRO_LONG, MQR_AVRO_LOGICAL_TIMESTAMP_MILLIS},
      {"timestamp-micros", MQR_AVRO_LONG, MQR_AVRO_LOGICAL_TIMESTAMP_MICROS},
      {"local-timestamp-millis", MQR_AVRO_LONG, MQR_AVRO_LOGICAL_LOCAL_TIMESTAMP_MILLIS},
      {"local-timestamp-micros", MQR_AVRO_LONG, MQR_AVRO_LOGICAL_LOCAL_TIMESTAMP_MICROS},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (mqr__json_is_str(lt, table[i].name) && t == table[i].type) n->logical = (uint8_t)table[i].logical;
  if (mqr__json_is_str(lt, "duration") && t == MQR_AVRO_FIXED && n->n == 12) n->logical = MQR_AVRO_LOGICAL_DURATION;
}

static int parse_object(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t **out) {
  const mqr__json_t *t = mqr__json_get(j, "type");
  if (t == NULL) return bad(c, j, "a schema object needs \"type\"");
  if (t->kind == MQR__JSON_OBJECT || t->kind == MQR__JSON_ARRAY) {
    size_t mark = mqr__path_push(&c->path, "type");
    int rc = parse_type(c, t, ns, out);
    mqr__path_pop(&c->path, mark);
    return rc;
  }
  if (t->kind != MQR__JSON_STRING) return bad(c, t, "\"type\" must be a string, an object or an array");
  mqr__avro_node_t *n = NULL;
  int rc = 0;
  for (int i = 0; i < 8; i++)
    if (mqr__json_is_str(t, mqr__avro_primitive_names[i])) {
      if ((n = new_node(c, i)) == NULL) return nomem(c);
    }
  if (n) {
    /* A primitive; its other attributes are annotations. */
  } else if (mqr__json_is_str(t, "record") || mqr__json_is_str(t, "error")) {
    if ((n = new_node(c, MQR_AVRO_RECORD)) == NULL) return nomem(c);
    rc = parse_record(c, j, ns, n);
  } else if (mqr__json_is_str(t, "enum")) {
    if ((n = new_node(c, MQR_AVRO_ENUM)) == NULL) return nomem(c);
    rc = parse_enum(c, j, ns, n);
  } else if (mqr__json_is_str(t, "fixed")) {
    if ((n = new_node(c, MQR_AVRO_FIXED)) == NULL) return nomem(c);
    rc = parse_fixed(c, j, ns, n);
  } else if (mqr__json_is_str(t, "array") || mqr__json_is_str(t, "map")) {
    bool array = t->str.ptr[0] == 'a';
    const char *key = array ? "items" : "values";
    const mqr__json_t *it = mqr__json_get(j, key);
    if (it == NULL) return bad(c, j, "%s needs \"%s\"", array ? "an array" : "a map", key);
    if ((n = new_node(c, array ? MQR_AVRO_ARRAY : MQR_AVRO_MAP)) == NULL) return nomem(c);
    size_t mark = mqr__path_push(&c->path, "%s", key);
    rc = parse_type(c, it, ns, &n->items);
    if (rc == 0) mqr__path_pop(&c->path, mark);
  } else {
    return resolve_ref(c, t, ns, out);
  }
  if (rc) return rc;
  set_logical(c, j, n);
  *out = n;
  return 0;
}

static int parse_type(ctx_t *c, const mqr__json_t *j, mqr_str_t ns, mqr__avro_node_t **out) {
  switch (j->kind) {
  case MQR__JSON_STRING:
    for (int i = 0; i < 8; i++)
      if (mqr__json_is_str(j, mqr__avro_primitive_names[i])) {
        if ((*out = new_node(c, i)) == NULL) return nomem(c);
        return 0;
      }
    return resolve_ref(c, j, ns, out);
  case MQR__JSON_OBJECT: return parse_object(c, j, ns, out);
  case MQR__JSON_ARRAY: return parse_union(c, j, ns, out);
  default: return bad(c, j, "a schema must be a string, an object or an array, not %s", mqr__json_kind_name(j->kind));
  }
}

/* ---- defaults ---------------------------------------------------------------------- */

/* Whether v is a valid default for n; *why says what is wrong. Avro's rule: a union's
 * default is a value of its first branch; a record's may leave out fields that have
 * defaults of their own. */
static bool default_ok(const mqr__avro_node_t *n, const mqr__json_t *v, int depth, const char **why) {
  if (depth > MQR_AVRO_MAX_DEPTH) {
    *why = "nested too deeply";
    return false;
  }
  switch (n->type) {
  case MQR_AVRO_NULL: *why = "expected null"; return v->kind == MQR__JSON_NULL;
  case MQR_AVRO_BOOLEAN: *why = "expected true or false"; return v->kind == MQR__JSON_BOOL;
  case MQR_AVRO_INT:
    *why = "expected a whole number in the int range";
    return v->kind == MQR__JSON_NUMBER && v->is_int && v->i >= INT32_MIN && v->i <= INT32_MAX;
  case MQR_AVRO_LONG:
    *why = "expected a whole number in the long range";
    return v->kind == MQR__JSON_NUMBER && v->is_int;
  case MQR_AVRO_FLOAT:
  case MQR_AVRO_DOUBLE: *why = "expected a number"; return v->kind == MQR__JSON_NUMBER;
  case MQR_AVRO_STRING: *why = "expected a string"; return v->kind == MQR__JSON_STRING;
  case MQR_AVRO_BYTES:
  case MQR_AVRO_FIXED: {
    *why = "expected a string of code points 0-255";
    if (v->kind != MQR__JSON_STRING) return false;
    size_t chars = 0;
    for (size_t i = 0; i < v->str.len; i++) {
      uint8_t b = (uint8_t)v->str.ptr[i];
      if (b >= 0xC4 && b < 0xF8) return false; /* a lead byte of a code point over 255 */
      if ((b & 0xC0) != 0x80) chars++;
    }
    if (n->type == MQR_AVRO_FIXED && chars != n->n) {
      *why = "a fixed's default must have exactly its size in characters";
      return false;
    }
    return true;
  }
  case MQR_AVRO_ENUM:
    *why = "expected one of the enum's symbols";
    return v->kind == MQR__JSON_STRING && mqr__avro_enum_ordinal(n, v->str.ptr, v->str.len) >= 0;
  case MQR_AVRO_ARRAY:
    *why = "expected an array";
    if (v->kind != MQR__JSON_ARRAY) return false;
    for (uint32_t i = 0; i < v->n; i++)
      if (!default_ok(n->items, v->items[i], depth + 1, why)) return false;
    return true;
  case MQR_AVRO_MAP:
    *why = "expected an object";
    if (v->kind != MQR__JSON_OBJECT) return false;
    for (uint32_t i = 0; i < v->n; i++)
      if (!default_ok(n->items, v->members[i].value, depth + 1, why)) return false;
    return true;
  case MQR_AVRO_UNION:
    if (n->n == 0) {
      *why = "an empty union has no values";
      return false;
    }
    return default_ok(n->branches[0], v, depth + 1, why);
  case MQR_AVRO_RECORD:
    *why = "expected an object";
    if (v->kind != MQR__JSON_OBJECT) return false;
    for (uint32_t i = 0; i < n->n; i++) {
      const mqr__avro_field_t *f = &n->fields[i];
      const mqr__json_t *fv = mqr__json_get_str(v, f->name);
      if (fv == NULL) {
        if (f->def == NULL) {
          *why = "a record default must give every field that has no default";
          return false;
        }
        continue;
      }
      if (!default_ok(f->type, fv, depth + 1, why)) return false;
    }
    return true;
  }
  return false;
}

static int check_defaults(ctx_t *c) {
  for (uint32_t r = 0; r < c->n_records; r++) {
    const mqr__avro_node_t *n = c->records[r];
    for (uint32_t i = 0; i < n->n; i++) {
      const mqr__avro_field_t *f = &n->fields[i];
      const char *why = "";
      if (f->def && !default_ok(f->type, f->def, 0, &why)) {
        mqr__path_pop(&c->path, 0);
        return bad(c, f->def, "%.*s.%.*s: invalid default: %s", (int)n->fullname.len, n->fullname.ptr, (int)f->name.len,
                   f->name.ptr, why);
      }
    }
  }
  return 0;
}

/* ---- whole-graph properties --------------------------------------------------------- */

/* Every node reachable from the root, each once. */
typedef struct {
  mqr__avro_node_t **v;
  uint32_t n, cap;
} nodelist_t;

static int collect(nodelist_t *l, mqr__avro_node_t *n) {
  for (uint32_t i = 0; i < l->n; i++)
    if (l->v[i] == n) return 0;
  if (l->n == l->cap) {
    uint32_t ncap = l->cap ? l->cap * 2 : 32;
    void *p = mqr_realloc(l->v, ncap * sizeof *l->v);
    if (p == NULL) return MQR_ENOMEM;
    l->v = p;
    l->cap = ncap;
  }
  l->v[l->n++] = n;
  int rc = 0;
  switch (n->type) {
  case MQR_AVRO_RECORD:
    for (uint32_t i = 0; i < n->n && rc == 0; i++) rc = collect(l, n->fields[i].type);
    break;
  case MQR_AVRO_UNION:
    for (uint32_t i = 0; i < n->n && rc == 0; i++) rc = collect(l, n->branches[i]);
    break;
  case MQR_AVRO_ARRAY:
  case MQR_AVRO_MAP: rc = collect(l, n->items); break;
  default: break;
  }
  return rc;
}

static uint32_t sat_add(uint32_t a, uint32_t b) { return a > UINT32_MAX - b ? UINT32_MAX : a + b; }

/* finite and min_size by fixpoint: a record is finite when all its fields are, a union
 * when one branch is; arrays and maps always are (they may be empty). A record's least
 * size is the sum of its fields', a union's one index byte and its least branch. Sizes
 * only ever go down, and keep going down until nothing changes: a union that became
 * finite through a large branch must still learn of a smaller one found later (a record
 * with no fields, say), or the count checks would refuse valid input. The least size
 * has a derivation in which no node repeats on a path, so this takes at most as many
 * passes as there are nodes. */
static int graph_properties(ctx_t *c) {
  nodelist_t l = {0};
  if (collect(&l, c->s->root) != 0) {
    mqr_free(l.v);
    return nomem(c);
  }
  for (uint32_t i = 0; i < l.n; i++) {
    mqr__avro_node_t *n = l.v[i];
    n->finite = n->type != MQR_AVRO_RECORD && n->type != MQR_AVRO_UNION;
    switch (n->type) {
    case MQR_AVRO_NULL: n->min_size = 0; break;
    case MQR_AVRO_FLOAT: n->min_size = 4; break;
    case MQR_AVRO_DOUBLE: n->min_size = 8; break;
    case MQR_AVRO_FIXED: n->min_size = n->n; break;
    case MQR_AVRO_RECORD:
    case MQR_AVRO_UNION: n->min_size = UINT32_MAX; break;
    default: n->min_size = 1; break;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = 0; i < l.n; i++) {
      mqr__avro_node_t *n = l.v[i];
      if (n->type != MQR_AVRO_RECORD && n->type != MQR_AVRO_UNION) continue;
      bool f = n->type == MQR_AVRO_RECORD;
      uint32_t size = 0;
      if (n->type == MQR_AVRO_RECORD) {
        for (uint32_t k = 0; k < n->n; k++) {
          f = f && n->fields[k].type->finite;
          size = sat_add(size, n->fields[k].type->min_size);
        }
      } else {
        uint32_t best = UINT32_MAX;
        for (uint32_t k = 0; k < n->n; k++)
          if (n->branches[k]->finite) {
            f = true;
            if (n->branches[k]->min_size < best) best = n->branches[k]->min_size;
          }
        size = sat_add(1, best);
      }
      if (f && (!n->finite || size < n->min_size)) {
        n->finite = true;
        n->min_size = size;
        changed = true;
      }
    }
  }
  int rc = 0;
  for (uint32_t i = 0; i < l.n && rc == 0; i++) {
    mqr__avro_node_t *n = l.v[i];
    if (!n->finite && n->type == MQR_AVRO_RECORD)
      rc = bad(c, NULL, "record '%.*s' recurses without end: no datum of it can be written", (int)n->fullname.len,
               n->fullname.ptr);
  }
  mqr_free(l.v);
  return rc;
}

/* ---- entry points ------------------------------------------------------------------ */

mqr_str_t mqr__avro_branch_name(const mqr__avro_node_t *n) {
  static const char *const names[] = {"null",   "boolean", "int",  "long",  "float", "double", "bytes",
                                      "string", "record",  "enum", "array", "map",   "union",  "fixed"};
  if (n->type == MQR_AVRO_RECORD || n->type == MQR_AVRO_ENUM || n->type == MQR_AVRO_FIXED) return n->fullname;
  return mqr_str(names[n->type]);
}

int mqr_avro_schema_parse(const char *json, size_t len, mqr_avro_schema_t **out, mqr_error_t *err) {
  if (json == NULL || out == NULL) return mqr_error_set(err, MQR_EINVAL, "no schema text");
  mqr_avro_schema_t *s = mqr_calloc(1, sizeof *s);
  if (s == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory parsing a schema");
  mqr__arena_init(&s->arena);
  ctx_t c = {0};
  c.s = s;
  c.err = err;
  mqr__json_t *doc;
  int rc = mqr__json_parse(&s->arena, json, len, true, &doc, err);
  if (rc == 0) rc = parse_type(&c, doc, mqr_str_n("", 0), &s->root);
  if (rc == 0) rc = check_defaults(&c);
  if (rc == 0) rc = graph_properties(&c);
  if (rc == 0) {
    char *given = mqr__arena_strdup(&s->arena, json, len);
    if (given == NULL || mqr__avro_canonical(&s->arena, s->root, &s->canonical) != 0) {
      rc = nomem(&c);
    } else {
      s->text = mqr_str_n(given, len);
      s->fingerprint = mqr_avro_crc64(s->canonical.ptr, s->canonical.len);
    }
  }
  mqr_free(c.records);
  if (rc) {
    mqr_avro_schema_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

void mqr_avro_schema_destroy(mqr_avro_schema_t *s) {
  if (s == NULL) return;
  mqr__arena_free(&s->arena);
  mqr_free(s->named);
  mqr_free(s);
}

mqr_str_t mqr_avro_schema_canonical(const mqr_avro_schema_t *s) { return s->canonical; }

mqr_str_t mqr_avro_schema_json(const mqr_avro_schema_t *s) { return s->text; }
uint64_t mqr_avro_schema_fingerprint(const mqr_avro_schema_t *s) { return s->fingerprint; }
mqr_avro_type_t mqr_avro_schema_type(const mqr_avro_schema_t *s) { return (mqr_avro_type_t)s->root->type; }
