/* Schema resolution, compiled: a writer and a reader schema are matched once into a tree
 * of resolution nodes, and each datum is then transcoded from the writer's binary to the
 * reader's binary by walking that tree, with no name lookup.
 *
 * Where the two schemas encode a part identically (same primitive, int read as long,
 * string read as bytes, the same record, array or union throughout), the node is COPY:
 * the writer's bytes are validated by skipping them and copied in one piece. Records
 * whose matched fields keep their order stream straight through; a record that reorders
 * its fields first finds where each writer field starts.
 *
 * Rules, as the Avro 1.11 specification and Java's resolving decoder apply them:
 * - named types match when their full names are equal, their unqualified names are equal,
 *   or one of the reader's aliases is the writer's full name;
 * - fields match by name, or a reader field's alias naming the writer field;
 * - promotions: int to long, float, double; long to float, double; float to double;
 *   string to bytes and bytes to string;
 * - a writer union resolves each branch on its own: a branch the reader cannot read is an
 *   error when a datum takes it, not when compiling (the pair fails at compile time only
 *   when no branch can be read); a reader union takes the first branch that matches the
 *   writer exactly, then by unqualified name, then by promotion;
 * - a writer enum symbol missing from the reader takes the reader's default, or fails
 *   when a datum holds it. */
#include <stdarg.h>
#include <stdio.h>

#include "path.h"
#include "schema_int.h"

typedef enum {
  R_COPY,
  R_INT_FLOAT,
  R_INT_DOUBLE,
  R_LONG_FLOAT,
  R_LONG_DOUBLE,
  R_FLOAT_DOUBLE,
  R_RECORD,
  R_ENUM,
  R_ARRAY,
  R_MAP,
  R_WUNION, /* writer union: a node per writer branch */
  R_RUNION, /* writer not a union, reader union: the branch index, then one node */
  R_ERROR,  /* the writer's value cannot be read: fails when a datum gets here */
} rkind_t;

typedef struct rnode_s rnode_t;

/* One step of a record, in the order it runs. */
typedef struct {
  enum { S_SKIP, S_FIELD, S_DEFAULT } kind;
  uint32_t wfield;      /* SKIP, FIELD: the writer's field */
  const rnode_t *node;  /* FIELD */
  const uint8_t *bytes; /* DEFAULT: the reader default's encoding */
  uint32_t len;
} rstep_t;

struct rnode_s {
  uint8_t kind;
  bool in_order;             /* RECORD: steps follow the writer's field order */
  const mqr__avro_node_t *w; /* the writer's node: what COPY skips */
  uint32_t n;                /* steps, enum symbols, union branches */
  rstep_t *steps;            /* RECORD */
  int32_t *symbols;          /* ENUM: writer ordinal -> reader ordinal, -1 unreadable */
  const rnode_t *items;      /* ARRAY items, MAP values, RUNION branch */
  const rnode_t **branches;  /* WUNION */
  uint32_t index;            /* RUNION */
  const char *msg;           /* ERROR */
};

struct mqr_avro_resolver_s {
  const mqr_avro_schema_t *writer, *reader;
  mqr__arena_t arena;
  const rnode_t *root;
};

/* ---- compiling ---------------------------------------------------------------------- */

typedef struct memo_s {
  const mqr__avro_node_t *w, *r;
  rnode_t *node;
  struct memo_s *next;
} memo_t;

typedef struct {
  mqr_avro_resolver_t *res;
  memo_t *memo;
  mqr_error_t *err;
  mqr__path_t path;
  char why[840]; /* the reason a pair does not resolve */
} rc_t;

__attribute__((format(printf, 2, 3))) static int fail(rc_t *k, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(k->why, sizeof k->why, "%s: %s", mqr__path_str(&k->path, "(root)"), msg);
  return MQR_EINCOMPATIBLE;
}

static int nomem(rc_t *k) {
  snprintf(k->why, sizeof k->why, "out of memory compiling a resolver");
  return MQR_ENOMEM;
}

static const char *type_name(const mqr__avro_node_t *n) {
  static const char *const names[] = {"null",   "boolean", "int",  "long",  "float", "double", "bytes",
                                      "string", "record",  "enum", "array", "map",   "union",  "fixed"};
  return n->type <= MQR_AVRO_FIXED ? names[n->type] : "?";
}

static mqr_str_t unqualified(mqr_str_t s) {
  for (size_t i = s.len; i-- > 0;)
    if (s.ptr[i] == '.') return (mqr_str_t){s.ptr + i + 1, s.len - i - 1};
  return s;
}

static bool named(const mqr__avro_node_t *n) {
  return n->type == MQR_AVRO_RECORD || n->type == MQR_AVRO_ENUM || n->type == MQR_AVRO_FIXED;
}

/* Named types: by full name, unqualified name, or a reader alias. */
static bool names_match(const mqr__avro_node_t *w, const mqr__avro_node_t *r, bool exact) {
  if (mqr_str_eq(w->fullname, r->fullname)) return true;
  if (exact) return false;
  if (mqr_str_eq(unqualified(w->fullname), unqualified(r->fullname))) return true;
  for (uint32_t i = 0; i < r->n_aliases; i++)
    if (mqr_str_eq(r->aliases[i], w->fullname)) return true;
  return false;
}

static rkind_t promotion(int w, int r) {
  if (w == MQR_AVRO_INT && r == MQR_AVRO_LONG) return R_COPY;
  if (w == MQR_AVRO_INT && r == MQR_AVRO_FLOAT) return R_INT_FLOAT;
  if (w == MQR_AVRO_INT && r == MQR_AVRO_DOUBLE) return R_INT_DOUBLE;
  if (w == MQR_AVRO_LONG && r == MQR_AVRO_FLOAT) return R_LONG_FLOAT;
  if (w == MQR_AVRO_LONG && r == MQR_AVRO_DOUBLE) return R_LONG_DOUBLE;
  if (w == MQR_AVRO_FLOAT && r == MQR_AVRO_DOUBLE) return R_FLOAT_DOUBLE;
  if ((w == MQR_AVRO_STRING && r == MQR_AVRO_BYTES) || (w == MQR_AVRO_BYTES && r == MQR_AVRO_STRING)) return R_COPY;
  return R_ERROR;
}

static bool primitive(int t) { return t <= MQR_AVRO_STRING; }

/* The reader union branch a non-union writer is read as, or -1. */
static int32_t pick_branch(const mqr__avro_node_t *w, const mqr__avro_node_t *r) {
  for (int pass = 0; pass < 3; pass++) {
    for (uint32_t i = 0; i < r->n; i++) {
      const mqr__avro_node_t *b = r->branches[i];
      if (pass < 2 && b->type == w->type && (!named(w) || names_match(w, b, pass == 0))) return (int32_t)i;
      if (pass == 2 && primitive(w->type) && primitive(b->type) && promotion(w->type, b->type) != R_ERROR)
        return (int32_t)i;
    }
  }
  return -1;
}

static int resolve(rc_t *k, const mqr__avro_node_t *w, const mqr__avro_node_t *r, const rnode_t **out);

static rnode_t *new_node(rc_t *k, int kind, const mqr__avro_node_t *w) {
  rnode_t *n = mqr__arena_alloc(&k->res->arena, sizeof *n);
  if (n) {
    n->kind = (uint8_t)kind;
    n->w = w;
  }
  return n;
}

/* A node that fails at run time with the reason k->why holds. */
static int error_node(rc_t *k, rnode_t *n) {
  char *msg = mqr__arena_strdup(&k->res->arena, k->why, strlen(k->why));
  if (msg == NULL) return nomem(k);
  n->kind = R_ERROR;
  n->msg = msg;
  return 0;
}

static const mqr__avro_field_t *writer_field(const mqr__avro_node_t *w, const mqr__avro_field_t *rf, uint32_t *at) {
  for (uint32_t i = 0; i < w->n; i++) {
    bool hit = mqr_str_eq(w->fields[i].name, rf->name);
    for (uint32_t a = 0; a < rf->n_aliases && !hit; a++) hit = mqr_str_eq(w->fields[i].name, rf->aliases[a]);
    if (hit) {
      *at = i;
      return &w->fields[i];
    }
  }
  return NULL;
}

static int resolve_record(rc_t *k, const mqr__avro_node_t *w, const mqr__avro_node_t *r, rnode_t *n) {
  /* Reader fields in order: each from a writer field or its default. */
  uint32_t *from = mqr__arena_alloc(&k->res->arena, (r->n + 1) * sizeof *from);
  const rnode_t **sub = mqr__arena_alloc(&k->res->arena, (r->n + 1) * sizeof *sub);
  bool *used = mqr__arena_alloc(&k->res->arena, w->n + 1);
  if (from == NULL || sub == NULL || used == NULL) return nomem(k);
  bool in_order = true, copy = w->n == r->n;
  uint32_t last = 0, n_matched = 0;
  for (uint32_t j = 0; j < r->n; j++) {
    const mqr__avro_field_t *rf = &r->fields[j];
    size_t mark = mqr__path_push(&k->path, "%.*s", (int)rf->name.len, rf->name.ptr);
    uint32_t wi = 0;
    const mqr__avro_field_t *wf = writer_field(w, rf, &wi);
    int rc = 0;
    if (wf == NULL) {
      if (rf->def == NULL) {
        rc = fail(k, "the writer's %.*s has no such field, and the reader's field has no default", (int)w->fullname.len,
                  w->fullname.ptr);
      }
      from[j] = UINT32_MAX;
      copy = false;
    } else if (used[wi]) {
      rc = fail(k, "writer field '%.*s' is matched twice", (int)wf->name.len, wf->name.ptr);
    } else {
      used[wi] = true;
      from[j] = wi;
      if (n_matched++ && wi < last) in_order = false;
      last = wi;
      rc = resolve(k, wf->type, rf->type, &sub[j]);
      if (rc == 0 && (sub[j]->kind != R_COPY || wi != j)) copy = false;
    }
    mqr__path_pop(&k->path, mark);
    if (rc) return rc;
  }
  if (copy) {
    n->kind = R_COPY;
    return 0;
  }
  /* Steps: in writer order when the matched fields keep it (skipping the writer fields
   * the reader lacks and putting defaults where the reader has them), else in reader
   * order with each field found by position. */
  rstep_t *steps = mqr__arena_alloc(&k->res->arena, (r->n + w->n + 1) * sizeof *steps);
  if (steps == NULL) return nomem(k);
  uint32_t ns = 0, wnext = 0;
  for (uint32_t j = 0; j < r->n; j++) {
    if (from[j] == UINT32_MAX) {
      mqr_avro_buf_t b;
      mqr_avro_buf_init_growable(&b);
      mqr_error_t e;
      int rc = mqr__avro_encode_default(r->fields[j].type, r->fields[j].def, &b, &e);
      uint8_t *bytes = rc == 0 && b.len ? mqr__arena_alloc(&k->res->arena, b.len) : NULL;
      size_t blen = b.len;
      if (bytes) memcpy(bytes, b.data, blen);
      mqr_avro_buf_free(&b);
      if (rc || (blen && bytes == NULL)) return rc == MQR_ENOMEM || rc == 0 ? nomem(k) : fail(k, "%s", e.message);
      steps[ns++] = (rstep_t){.kind = S_DEFAULT, .bytes = bytes, .len = (uint32_t)blen};
      continue;
    }
    if (in_order)
      for (; wnext < from[j]; wnext++) steps[ns++] = (rstep_t){.kind = S_SKIP, .wfield = wnext};
    steps[ns++] = (rstep_t){.kind = S_FIELD, .wfield = from[j], .node = sub[j]};
    wnext = from[j] + 1;
  }
  if (in_order)
    for (; wnext < w->n; wnext++) steps[ns++] = (rstep_t){.kind = S_SKIP, .wfield = wnext};
  n->steps = steps;
  n->n = ns;
  n->in_order = in_order;
  return 0;
}

static int resolve_enum(rc_t *k, const mqr__avro_node_t *w, const mqr__avro_node_t *r, rnode_t *n) {
  int32_t *map = mqr__arena_alloc(&k->res->arena, (w->n + 1) * sizeof *map);
  if (map == NULL) return nomem(k);
  bool copy = w->n <= r->n;
  for (uint32_t i = 0; i < w->n; i++) {
    int32_t o = mqr__avro_enum_ordinal(r, w->symbols[i].ptr, w->symbols[i].len);
    map[i] = o >= 0 ? o : r->enum_default;
    if (map[i] != (int32_t)i) copy = false;
  }
  n->kind = copy ? R_COPY : R_ENUM;
  n->symbols = map;
  n->n = w->n;
  return 0;
}

static int resolve_writer_union(rc_t *k, const mqr__avro_node_t *w, const mqr__avro_node_t *r, rnode_t *n) {
  const rnode_t **br = mqr__arena_alloc(&k->res->arena, w->n * sizeof *br);
  if (br == NULL) return nomem(k);
  bool copy = r->type == MQR_AVRO_UNION && w->n <= r->n, any = false;
  for (uint32_t i = 0; i < w->n; i++) {
    mqr_str_t bn = mqr__avro_branch_name(w->branches[i]);
    size_t mark = mqr__path_push(&k->path, "<%.*s>", (int)bn.len, bn.ptr);
    int rc = resolve(k, w->branches[i], r, &br[i]);
    mqr__path_pop(&k->path, mark);
    if (rc && rc != MQR_EINCOMPATIBLE) return rc; /* an incompatible branch is an ERROR node */
    any |= br[i]->kind != R_ERROR;
    /* Identical when branch i is read as the reader's branch i, byte for byte. */
    if (!(br[i]->kind == R_RUNION && br[i]->index == i && br[i]->items->kind == R_COPY)) copy = false;
  }
  if (!any && w->n) return MQR_EINCOMPATIBLE; /* k->why holds the last branch's reason */
  n->kind = copy ? R_COPY : R_WUNION;
  n->branches = br;
  n->n = w->n;
  return 0;
}

static int resolve_new(rc_t *k, const mqr__avro_node_t *w, const mqr__avro_node_t *r, rnode_t *n) {
  if (w->type == MQR_AVRO_UNION) return resolve_writer_union(k, w, r, n);
  if (r->type == MQR_AVRO_UNION) {
    int32_t b = pick_branch(w, r);
    if (b < 0) return fail(k, "the reader's union has no branch for the writer's %s", type_name(w));
    mqr_str_t bn = mqr__avro_branch_name(r->branches[b]);
    size_t mark = mqr__path_push(&k->path, "<%.*s>", (int)bn.len, bn.ptr);
    int rc = resolve(k, w, r->branches[b], &n->items);
    mqr__path_pop(&k->path, mark);
    n->kind = R_RUNION;
    n->index = (uint32_t)b;
    return rc;
  }
  if (primitive(w->type) && primitive(r->type)) {
    rkind_t p = w->type == r->type ? R_COPY : promotion(w->type, r->type);
    if (p == R_ERROR) return fail(k, "the writer's %s cannot be read as %s", type_name(w), type_name(r));
    n->kind = (uint8_t)p;
    return 0;
  }
  if (w->type != r->type) return fail(k, "the writer's %s cannot be read as %s", type_name(w), type_name(r));
  if (named(w) && !names_match(w, r, false))
    return fail(k, "the writer's %s %.*s does not match the reader's %.*s", type_name(w), (int)w->fullname.len,
                w->fullname.ptr, (int)r->fullname.len, r->fullname.ptr);
  switch (w->type) {
  case MQR_AVRO_FIXED:
    if (w->n != r->n) return fail(k, "the writer's fixed has %u bytes, the reader's %u", w->n, r->n);
    n->kind = R_COPY;
    return 0;
  case MQR_AVRO_ENUM: return resolve_enum(k, w, r, n);
  case MQR_AVRO_RECORD: return resolve_record(k, w, r, n);
  case MQR_AVRO_ARRAY:
  case MQR_AVRO_MAP: {
    size_t mark = mqr__path_push(&k->path, w->type == MQR_AVRO_ARRAY ? "items" : "values");
    int rc = resolve(k, w->items, r->items, &n->items);
    mqr__path_pop(&k->path, mark);
    if (rc) return rc;
    n->kind = n->items->kind == R_COPY ? R_COPY : w->type == MQR_AVRO_ARRAY ? R_ARRAY : R_MAP;
    return 0;
  }
  }
  return fail(k, "unknown schema node");
}

/* The node for (w, r), made once: a recursive pair points back at the node in progress
 * (which is never COPY, as it is not finished when its parts look at it). A pair that
 * fails is left an ERROR node, so that whatever else points at it fails too. */
static int resolve(rc_t *k, const mqr__avro_node_t *w, const mqr__avro_node_t *r, const rnode_t **out) {
  for (memo_t *m = k->memo; m; m = m->next)
    if (m->w == w && m->r == r) {
      *out = m->node;
      return m->node->kind == R_ERROR ? fail(k, "%s", m->node->msg) : 0;
    }
  memo_t *m = mqr__arena_alloc(&k->res->arena, sizeof *m);
  rnode_t *n = new_node(k, R_RECORD, w);
  if (m == NULL || n == NULL) return nomem(k);
  *m = (memo_t){w, r, n, k->memo};
  k->memo = m;
  *out = n;
  int rc = resolve_new(k, w, r, n);
  if (rc == MQR_EINCOMPATIBLE) {
    int erc = error_node(k, n);
    return erc ? erc : rc;
  }
  return rc;
}

int mqr_avro_resolver_compile(const mqr_avro_schema_t *writer, const mqr_avro_schema_t *reader,
                              mqr_avro_resolver_t **out, mqr_error_t *err) {
  mqr_avro_resolver_t *res = mqr_calloc(1, sizeof *res);
  if (res == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling a resolver");
  res->writer = writer;
  res->reader = reader;
  mqr__arena_init(&res->arena);
  rc_t k = {.res = res, .err = err};
  int rc = resolve(&k, writer->root, reader->root, &res->root);
  if (rc) {
    mqr_avro_resolver_destroy(res);
    return mqr_error_set(err, rc, "%s", k.why);
  }
  *out = res;
  return 0;
}

void mqr_avro_resolver_destroy(mqr_avro_resolver_t *res) {
  if (res == NULL) return;
  mqr__arena_free(&res->arena);
  mqr_free(res);
}

/* ---- running ------------------------------------------------------------------------ */

typedef struct {
  mqr__rd_t r;
  mqr_avro_buf_t *o;
} run_t;

static int put(run_t *x, const void *p, size_t n) {
  int rc = mqr_avro_buf_reserve(x->o, n);
  if (rc) return rc;
  if (n) memcpy(x->o->data + x->o->len, p, n);
  x->o->len += n;
  return 0;
}

static int put_long(run_t *x, int64_t v) {
  int rc = mqr_avro_buf_reserve(x->o, mqr__varint_size(mqr__zigzag64(v)));
  if (rc) return rc;
  x->o->len = (size_t)(mqr__put_long(x->o->data + x->o->len, v) - x->o->data);
  return 0;
}

static int put_float(run_t *x, float f) { return put(x, &f, 4); } /* little-endian hosts */
static int put_double(run_t *x, double d) { return put(x, &d, 8); }

static int copy(run_t *x, const mqr__avro_node_t *w, int depth) {
  const uint8_t *from = x->r.p;
  int rc = mqr__avro_skip_node(&x->r, w, depth);
  return rc ? rc : put(x, from, (size_t)(x->r.p - from));
}

static int run(run_t *x, const rnode_t *n, int depth);

/* Where writer field i of the record begins, i == the field count meaning its end: found
 * by skipping from the nearest start already known. starts[0..*known) are known; the
 * first KNOWN_STARTS are kept, so records of more fields rescan from the last kept. */
#define KNOWN_STARTS 32
static int field_start(run_t *x, const mqr__avro_node_t *w, const uint8_t **starts, uint32_t *known, uint32_t i,
                       int depth) {
  uint32_t f = i < *known ? i : *known - 1;
  x->r.p = starts[f];
  for (; f < i; f++) {
    int rc = mqr__avro_skip_node(&x->r, w->fields[f].type, depth);
    if (rc) return rc;
    if (f + 1 == *known && *known < KNOWN_STARTS) starts[(*known)++] = x->r.p;
  }
  return 0;
}

static int run_record(run_t *x, const rnode_t *n, int depth) {
  const mqr__avro_node_t *w = n->w;
  int rc = 0;
  if (n->in_order) {
    for (uint32_t s = 0; s < n->n && rc == 0; s++) {
      const rstep_t *st = &n->steps[s];
      if (st->kind == S_SKIP)
        rc = mqr__avro_skip_node(&x->r, w->fields[st->wfield].type, depth + 1);
      else if (st->kind == S_FIELD)
        rc = run(x, st->node, depth + 1);
      else
        rc = put(x, st->bytes, st->len);
    }
    return rc;
  }
  const uint8_t *starts[KNOWN_STARTS];
  uint32_t known = 1;
  starts[0] = x->r.p;
  for (uint32_t s = 0; s < n->n && rc == 0; s++) {
    const rstep_t *st = &n->steps[s];
    if (st->kind == S_DEFAULT) {
      rc = put(x, st->bytes, st->len);
    } else if ((rc = field_start(x, w, starts, &known, st->wfield, depth + 1)) == 0) {
      rc = run(x, st->node, depth + 1);
    }
  }
  /* Leave the reader after the whole writer record. */
  return rc ? rc : field_start(x, w, starts, &known, w->n, depth + 1);
}

static int run_blocks(run_t *x, const rnode_t *n, int depth) {
  const mqr__avro_node_t *w = n->w;
  uint32_t min = w->items->min_size + (w->type == MQR_AVRO_MAP);
  for (;;) {
    uint64_t count = 0;
    int rc = mqr__get_count(&x->r, min, &count);
    if (rc == 0) rc = put_long(x, (int64_t)count);
    if (rc || count == 0) return rc;
    for (uint64_t i = 0; i < count; i++) {
      if (w->type == MQR_AVRO_MAP) {
        const uint8_t *key = x->r.p;
        size_t len = 0;
        if ((rc = mqr__get_len(&x->r, &len)) != 0) return rc;
        x->r.p += len;
        if ((rc = put(x, key, (size_t)(x->r.p - key))) != 0) return rc;
      }
      if ((rc = run(x, n->items, depth + 1)) != 0) return rc;
    }
  }
}

static int run(run_t *x, const rnode_t *n, int depth) {
  if (depth > MQR_AVRO_MAX_DEPTH)
    return mqr__rd_fail(&x->r, MQR_ELIMIT, "datum nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  int rc = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  switch (n->kind) {
  case R_COPY: return copy(x, n->w, depth);
  case R_INT_FLOAT:
  case R_INT_DOUBLE:
    if ((rc = mqr__get_int(&x->r, &i32)) != 0) return rc;
    return n->kind == R_INT_FLOAT ? put_float(x, (float)i32) : put_double(x, (double)i32);
  case R_LONG_FLOAT:
  case R_LONG_DOUBLE:
    if ((rc = mqr__get_long(&x->r, &i64)) != 0) return rc;
    return n->kind == R_LONG_FLOAT ? put_float(x, (float)i64) : put_double(x, (double)i64);
  case R_FLOAT_DOUBLE: {
    float f;
    if ((rc = mqr__need(&x->r, 4)) != 0) return rc;
    memcpy(&f, x->r.p, 4);
    x->r.p += 4;
    return put_double(x, (double)f);
  }
  case R_RECORD: return run_record(x, n, depth);
  case R_ENUM:
    if ((rc = mqr__get_int(&x->r, &i32)) != 0) return rc;
    if (i32 < 0 || (uint32_t)i32 >= n->n) return mqr__rd_fail(&x->r, MQR_EBADDATA, "enum ordinal %d out of range", i32);
    if (n->symbols[i32] < 0) {
      mqr_str_t s = n->w->symbols[i32];
      return mqr__rd_fail(&x->r, MQR_EINCOMPATIBLE,
                          "enum symbol '%.*s' is not in the reader's enum, which has no default", (int)s.len, s.ptr);
    }
    return put_long(x, n->symbols[i32]);
  case R_ARRAY:
  case R_MAP: return run_blocks(x, n, depth);
  case R_WUNION:
    if ((rc = mqr__get_long(&x->r, &i64)) != 0) return rc;
    if (i64 < 0 || (uint64_t)i64 >= n->n)
      return mqr__rd_fail(&x->r, MQR_EBADDATA, "union branch %lld out of range", (long long)i64);
    return run(x, n->branches[i64], depth + 1);
  case R_RUNION: /* the reader's union adds no level to the writer's data */
    if ((rc = put_long(x, n->index)) != 0) return rc;
    return run(x, n->items, depth);
  case R_ERROR: return mqr__rd_fail(&x->r, MQR_EINCOMPATIBLE, "%s", n->msg);
  }
  return mqr__rd_fail(&x->r, MQR_EINVAL, "unknown resolution node");
}

int mqr_avro_resolve(const mqr_avro_resolver_t *res, const uint8_t *in, size_t len, size_t *used, mqr_avro_buf_t *out,
                     mqr_error_t *err) {
  run_t x = {mqr__rd_init(in, len, err), out};
  size_t mark = out->len;
  int rc = run(&x, res->root, 0);
  if (rc) {
    out->len = mark;
    if (rc == MQR_ENOSPC || rc == MQR_ENOMEM) mqr_error_set(err, rc, "%s writing the reader's datum", mqr_strerror(rc));
    return rc;
  }
  if (used) *used = mqr__rd_offset(&x.r);
  return 0;
}

const mqr_avro_schema_t *mqr_avro_resolver_reader(const mqr_avro_resolver_t *res) { return res->reader; }
