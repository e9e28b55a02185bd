/* Compiling a codec: the C description is checked against the schema once and turned
 * into plans (plan.h). Everything it makes lives in the codec's arena. */
#include <stdarg.h>
#include <stdio.h>

#include "path.h"
#include "plan.h"

const mqr_avro_ctype_t mqr_avro_c_null = {MQR_AVRO_C_NULL, 0, NULL, 0, NULL, NULL, 0, 0};
const mqr_avro_ctype_t mqr_avro_c_bool = {MQR_AVRO_C_BOOL, sizeof(bool), NULL, 0, NULL, NULL, 0, 0};
const mqr_avro_ctype_t mqr_avro_c_int32 = {MQR_AVRO_C_INT32, sizeof(int32_t), NULL, 0, NULL, NULL, 0, 0};
const mqr_avro_ctype_t mqr_avro_c_int64 = {MQR_AVRO_C_INT64, sizeof(int64_t), NULL, 0, NULL, NULL, 0, 0};
const mqr_avro_ctype_t mqr_avro_c_float = {MQR_AVRO_C_FLOAT, sizeof(float), NULL, 0, NULL, NULL, 0, 0};
const mqr_avro_ctype_t mqr_avro_c_double = {MQR_AVRO_C_DOUBLE, sizeof(double), NULL, 0, NULL, NULL, 0, 0};
const mqr_avro_ctype_t mqr_avro_c_str = {MQR_AVRO_C_STR, sizeof(mqr_str_t), NULL, 0, NULL, NULL, 0, 0};

typedef struct {
  mqr_avro_codec_t *c;
  mqr_error_t *err;
  mqr__path_t path;
} cc_t;

__attribute__((format(printf, 2, 3))) static int mismatch(cc_t *k, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mqr_error_set(k->err, MQR_EINVAL, "binding %s: %s", mqr__path_str(&k->path, "(root)"), msg);
}

static int nomem(cc_t *k) { return mqr_error_set(k->err, MQR_ENOMEM, "out of memory compiling a codec"); }

static mqr__plan_t *new_plan(cc_t *k) { return mqr__arena_alloc(&k->c->arena, sizeof(mqr__plan_t)); }

static mqr__op_t *emit(cc_t *k, mqr__plan_t *p, int code, size_t off) {
  if (p->n == p->cap) {
    uint32_t ncap = p->cap ? p->cap * 2 : 8;
    mqr__op_t *ops = mqr__arena_alloc(&k->c->arena, ncap * sizeof *ops);
    if (ops == NULL) return NULL;
    if (p->n) memcpy(ops, p->ops, p->n * sizeof *ops);
    p->ops = ops;
    p->cap = ncap;
  }
  mqr__op_t *op = &p->ops[p->n++];
  op->code = (uint8_t)code;
  op->off = (uint32_t)off;
  return op;
}

/* A string right after a string (or a run of them) joins the run: a STRS op whose
 * offsets grow by doubling in the arena. */
static int fuse_string(cc_t *k, mqr__op_t *last, size_t off) {
  uint32_t n = last->code == MQR__OP_STR ? 1 : last->n;
  if (last->code == MQR__OP_STR || (n & (n - 1)) == 0) { /* full at powers of two */
    uint32_t *offs = mqr__arena_alloc(&k->c->arena, (n < 2 ? 4 : n * 2) * sizeof *offs);
    if (offs == NULL) return nomem(k);
    if (last->code == MQR__OP_STR)
      offs[0] = last->off;
    else
      memcpy(offs, last->offs, n * sizeof *offs);
    last->offs = offs;
  }
  last->code = MQR__OP_STRS;
  last->offs[n] = (uint32_t)off;
  last->n = n + 1;
  return 0;
}

static const char *const ckind_names[] = {"NULL", "BOOL",  "INT32",  "INT64", "FLOAT", "DOUBLE",
                                          "STR",  "FIXED", "RECORD", "ARRAY", "MAP",   "UNION"};

static int bind(cc_t *k, const mqr__avro_node_t *n, const mqr_avro_ctype_t *t, size_t off, mqr__plan_t *p);

static int wrong(cc_t *k, const mqr__avro_node_t *n, const mqr_avro_ctype_t *t) {
  mqr_str_t name = mqr__avro_branch_name(n);
  return mismatch(k, "C type %s cannot hold Avro %.*s", t->kind <= MQR_AVRO_C_UNION ? ckind_names[t->kind] : "?",
                  (int)name.len, name.ptr);
}

static int bind_record(cc_t *k, const mqr__avro_node_t *n, const mqr_avro_ctype_t *t, size_t off, mqr__plan_t *p) {
  for (size_t i = 0; i < t->n_fields; i++) {
    bool found = false;
    for (uint32_t f = 0; f < n->n && !found; f++) found = mqr_str_eq(n->fields[f].name, mqr_str(t->fields[i].name));
    if (!found)
      return mismatch(k, "C field '%s' is not a field of %.*s", t->fields[i].name, (int)n->fullname.len,
                      n->fullname.ptr);
  }
  for (uint32_t f = 0; f < n->n; f++) {
    const mqr__avro_field_t *af = &n->fields[f];
    const mqr_avro_cfield_t *cf = NULL;
    for (size_t i = 0; i < t->n_fields && !cf; i++)
      if (mqr_str_eq(af->name, mqr_str(t->fields[i].name))) cf = &t->fields[i];
    size_t mark = mqr__path_push(&k->path, "%.*s", (int)af->name.len, af->name.ptr);
    int rc;
    if (cf) {
      rc = bind(k, af->type, cf->type, off + cf->offset, p);
    } else if (af->def == NULL) {
      rc = mismatch(k, "the C struct has no field for it, and it has no default");
    } else {
      /* Not in C: write the default, skip it when decoding. */
      mqr_avro_buf_t b;
      mqr_avro_buf_init_growable(&b);
      rc = mqr__avro_encode_default(af->type, af->def, &b, k->err);
      mqr__op_t *op = rc ? NULL : emit(k, p, MQR__OP_DEFAULT, 0);
      uint8_t *copy = op ? mqr__arena_alloc(&k->c->arena, b.len + 1) : NULL;
      if (rc == 0 && copy == NULL) rc = nomem(k);
      if (rc == 0) {
        memcpy(copy, b.data, b.len);
        op->bytes = copy;
        op->n = (uint32_t)b.len;
        op->node = af->type;
      }
      mqr_avro_buf_free(&b);
    }
    if (rc) return rc;
    mqr__path_pop(&k->path, mark);
  }
  return 0;
}

/* Arrays of scalars get one op that loops itself. */
static int array_op(const mqr__avro_node_t *items, const mqr_avro_ctype_t *t) {
  if (items->type == MQR_AVRO_INT && t->kind == MQR_AVRO_C_INT32) return MQR__OP_INT_ARRAY;
  if (items->type == MQR_AVRO_ENUM && t->kind == MQR_AVRO_C_INT32) return MQR__OP_ENUM_ARRAY;
  if (items->type == MQR_AVRO_LONG && t->kind == MQR_AVRO_C_INT64) return MQR__OP_LONG_ARRAY;
  if (items->type == MQR_AVRO_FLOAT && t->kind == MQR_AVRO_C_FLOAT) return MQR__OP_FLOAT_ARRAY;
  if (items->type == MQR_AVRO_DOUBLE && t->kind == MQR_AVRO_C_DOUBLE) return MQR__OP_DOUBLE_ARRAY;
  return -1;
}

static int bind(cc_t *k, const mqr__avro_node_t *n, const mqr_avro_ctype_t *t, size_t off, mqr__plan_t *p) {
  if (t == NULL) return mismatch(k, "no C type");
  if (off > UINT32_MAX) return mismatch(k, "offset too large");
  mqr__op_t *op;
  int rc;
  switch (n->type) {
  case MQR_AVRO_NULL: return t->kind == MQR_AVRO_C_NULL ? 0 : wrong(k, n, t);
  case MQR_AVRO_BOOLEAN:
  case MQR_AVRO_INT:
  case MQR_AVRO_LONG:
  case MQR_AVRO_FLOAT:
  case MQR_AVRO_DOUBLE:
  case MQR_AVRO_STRING:
  case MQR_AVRO_BYTES: {
    static const int want[] = {0,
                               MQR_AVRO_C_BOOL,
                               MQR_AVRO_C_INT32,
                               MQR_AVRO_C_INT64,
                               MQR_AVRO_C_FLOAT,
                               MQR_AVRO_C_DOUBLE,
                               MQR_AVRO_C_STR,
                               MQR_AVRO_C_STR};
    static const int code[] = {0,           MQR__OP_BOOL, MQR__OP_INT, MQR__OP_LONG, MQR__OP_FLOAT, MQR__OP_DOUBLE,
                               MQR__OP_STR, MQR__OP_STR};
    if ((int)t->kind != want[n->type]) return wrong(k, n, t);
    if (code[n->type] == MQR__OP_STR && p->n && p->ops[p->n - 1].code >= MQR__OP_STR &&
        p->ops[p->n - 1].code <= MQR__OP_STRS)
      return fuse_string(k, &p->ops[p->n - 1], off);
    return emit(k, p, code[n->type], off) ? 0 : nomem(k);
  }
  case MQR_AVRO_ENUM:
    if (t->kind != MQR_AVRO_C_INT32) return wrong(k, n, t);
    if ((op = emit(k, p, MQR__OP_ENUM, off)) == NULL) return nomem(k);
    op->n = n->n;
    return 0;
  case MQR_AVRO_FIXED:
    if (t->kind != MQR_AVRO_C_FIXED || t->size != n->n)
      return mismatch(k, "Avro fixed of %u bytes needs C FIXED of size %u", n->n, n->n);
    if ((op = emit(k, p, MQR__OP_FIXED, off)) == NULL) return nomem(k);
    op->n = n->n;
    return 0;
  case MQR_AVRO_RECORD:
    if (t->kind != MQR_AVRO_C_RECORD) return wrong(k, n, t);
    return bind_record(k, n, t, off, p);
  case MQR_AVRO_ARRAY:
  case MQR_AVRO_MAP: {
    bool map = n->type == MQR_AVRO_MAP;
    if (t->kind != (map ? MQR_AVRO_C_MAP : MQR_AVRO_C_ARRAY) || t->items == NULL) return wrong(k, n, t);
    if (t->items->size == 0 && t->items->kind != MQR_AVRO_C_NULL) return mismatch(k, "item type of size 0");
    int special = map ? -1 : array_op(n->items, t->items);
    if ((op = emit(k, p, special >= 0 ? special : map ? MQR__OP_MAP : MQR__OP_ARRAY, off)) == NULL) return nomem(k);
    op->size = (uint32_t)t->items->size;
    op->min = n->items->min_size + map;
    op->n = n->items->n; /* enum symbols, for ENUM_ARRAY */
    if (special >= 0) return 0;
    mqr__plan_t *sub = new_plan(k);
    if (sub == NULL) return nomem(k);
    op->sub = sub;
    size_t mark = mqr__path_push(&k->path, "[%s]", map ? "value" : "item");
    if ((rc = bind(k, n->items, t->items, 0, sub)) != 0) return rc;
    mqr__path_pop(&k->path, mark);
    return 0;
  }
  case MQR_AVRO_UNION: {
    if (t->kind != MQR_AVRO_C_UNION || t->n_branches != n->n)
      return mismatch(k, "Avro union of %u branches needs C UNION with as many", n->n);
    if ((op = emit(k, p, MQR__OP_UNION, off)) == NULL) return nomem(k);
    op->n = n->n;
    if (n->n && (op->branches = mqr__arena_alloc(&k->c->arena, n->n * sizeof *op->branches)) == NULL) return nomem(k);
    mqr__plan_t **branches = op->branches; /* op may move as the plan grows */
    for (uint32_t i = 0; i < n->n; i++) {
      if (n->branches[i]->type == MQR_AVRO_NULL) continue;
      mqr_str_t bn = mqr__avro_branch_name(n->branches[i]);
      size_t mark = mqr__path_push(&k->path, "<%.*s>", (int)bn.len, bn.ptr);
      if ((branches[i] = new_plan(k)) == NULL) return nomem(k);
      if ((rc = bind(k, n->branches[i], t->branches[i], off + t->payload_off, branches[i])) != 0) return rc;
      mqr__path_pop(&k->path, mark);
    }
    return 0;
  }
  }
  return mismatch(k, "unknown schema node");
}

/* The fast leaves' kind and bound for a flat root (plan.h). 0, or MQR_ENOMEM. */
static int fast_leaves(mqr_avro_codec_t *c) {
  uint64_t max = 0;
  uint32_t n_strs = 0;
  bool strs = false, only_strs = true;
  for (uint32_t i = 0; i < c->root->n; i++) {
    const mqr__op_t *op = &c->root->ops[i];
    only_strs &= op->code == MQR__OP_STR || op->code == MQR__OP_STRS;
    n_strs += op->code == MQR__OP_STRS ? op->n : op->code == MQR__OP_STR;
    switch (op->code) {
    case MQR__OP_BOOL: max += 1; break;
    case MQR__OP_INT:
    case MQR__OP_ENUM: max += 5; break;
    case MQR__OP_LONG: max += 10; break;
    case MQR__OP_FLOAT: max += 4; break;
    case MQR__OP_DOUBLE: max += 8; break;
    case MQR__OP_STRS:
      strs = true;
      max += 64ull * op->n;
      break;
    default: max += 64; break; /* a string's length byte and 63 bytes; a fixed or default under 64 */
    }
  }
  c->fast = strs || max > MQR__FAST_BOUND ? MQR__FAST_CHECKED : MQR__FAST_BOUNDED;
  c->fast_max = (uint32_t)(max > UINT32_MAX ? UINT32_MAX : max);
  c->fast_ops = c->root->ops;
  c->fast_last = c->root->ops + c->root->n;
  if (!only_strs || max > MQR__FAST_BOUND) return 0;
  uint32_t *o = mqr__arena_alloc(&c->arena, n_strs * sizeof *o);
  if (o == NULL) return MQR_ENOMEM;
  c->str_offs = o;
  c->str_last = o + n_strs;
  for (uint32_t i = 0; i < c->root->n; i++) {
    const mqr__op_t *op = &c->root->ops[i];
    if (op->code == MQR__OP_STR) *o++ = op->off;
    for (uint32_t j = 0; op->code == MQR__OP_STRS && j < op->n; j++) *o++ = op->offs[j];
  }
  return 0;
}

int mqr_avro_codec_compile(const mqr_avro_schema_t *s, const mqr_avro_ctype_t *ctype, mqr_avro_codec_t **out,
                           mqr_error_t *err) {
  if (s == NULL || ctype == NULL || out == NULL) return mqr_error_set(err, MQR_EINVAL, "no schema or C type");
  mqr_avro_codec_t *c = mqr_calloc(1, sizeof *c);
  if (c == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling a codec");
  c->schema = s;
  mqr__arena_init(&c->arena);
  cc_t k = {c, err, {{0}, 0}};
  int rc = (c->root = new_plan(&k)) == NULL ? nomem(&k) : bind(&k, s->root, ctype, 0, c->root);
  if (rc == 0) {
    c->root->flat = true;
    for (uint32_t i = 0; i < c->root->n; i++) c->root->flat &= c->root->ops[i].code <= MQR__OP_DEFAULT;
    if (c->root->flat && c->root->n && fast_leaves(c) != 0) rc = nomem(&k);
  }
  if (rc) {
    mqr_avro_codec_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

void mqr_avro_codec_destroy(mqr_avro_codec_t *c) {
  if (c == NULL) return;
  mqr__arena_free(&c->arena);
  mqr_free(c);
}
