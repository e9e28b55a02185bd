/* The streaming writer and reader: one datum as a sequence of calls (a record's fields
 * in order, an array's items, a union's branch), each checked against the schema as it
 * comes. Both keep a stack of frames, one per open record, array, map or union, in the
 * object made by _create, so that a datum costs no allocation; a mistake names where in
 * the datum it was made (`tags[2]`, `props{k}`, `next<Node>.value`).
 *
 * Where the schema expects a union, the writer picks the first branch of the type being
 * written (mqr_avro_write_union picks one by index, for a union of two records); the
 * reader reports the branch the data holds. An enum is written by ordinal or by symbol,
 * the symbol found through the schema's symbol table. */
#include <stdarg.h>
#include <stdio.h>

#include "path.h"
#include "schema_int.h"

typedef struct {
  const mqr__avro_node_t *node;
  uint64_t left;  /* ARRAY, MAP: writer: items still to come; reader: left in this block */
  uint64_t index; /* ARRAY, MAP: items done */
  uint32_t field; /* RECORD: the next field */
  uint32_t branch;
  bool key_next; /* MAP: a key comes next */
  bool pending;  /* reader ARRAY, MAP: _next said an item follows */
} frame_t;

enum { IDLE, ACTIVE, DONE, FAILED };

typedef struct {
  const mqr_avro_schema_t *schema;
  uint8_t state;
  int depth;
  mqr_error_t err;
  frame_t st[MQR_AVRO_MAX_DEPTH + 2]; /* a value deeper than MQR_AVRO_MAX_DEPTH fails when taken */
} walk_t;

struct mqr_avro_writer_s {
  walk_t w;
  mqr_avro_buf_t *out;
  size_t mark;
};

struct mqr_avro_reader_s {
  walk_t w;
  mqr__rd_t r;
};

static const char *type_name(int t) {
  static const char *const names[] = {"null",   "boolean", "int",  "long",  "float", "double", "bytes",
                                      "string", "record",  "enum", "array", "map",   "union",  "fixed"};
  return t >= 0 && t <= MQR_AVRO_FIXED ? names[t] : "?";
}

/* Where the walk is, for messages. */
static void where(const walk_t *w, mqr__path_t *p) {
  for (int i = 0; i < w->depth; i++) {
    const frame_t *f = &w->st[i];
    const mqr__avro_node_t *n = f->node;
    if (n->type == MQR_AVRO_RECORD && f->field < n->n)
      mqr__path_push(p, "%.*s", (int)n->fields[f->field].name.len, n->fields[f->field].name.ptr);
    else if (n->type == MQR_AVRO_ARRAY || n->type == MQR_AVRO_MAP)
      mqr__path_push(p, "[%llu]", (unsigned long long)f->index);
    else if (n->type == MQR_AVRO_UNION) {
      mqr_str_t b = mqr__avro_branch_name(n->branches[f->branch]);
      mqr__path_push(p, "<%.*s>", (int)b.len, b.ptr);
    }
  }
}

__attribute__((format(printf, 3, 4))) static int walk_fail(walk_t *w, int code, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  mqr__path_t p = {.len = 0};
  p.buf[0] = '\0';
  where(w, &p);
  w->state = FAILED;
  return mqr_error_set(&w->err, code, "%s: %s", mqr__path_str(&p, "(datum)"), msg);
}

/* The node the next value is of; NULL when the open frame expects its end (or a key). */
static const mqr__avro_node_t *expected(const walk_t *w) {
  if (w->depth == 0) return w->state == ACTIVE ? w->schema->root : NULL;
  const frame_t *f = &w->st[w->depth - 1];
  const mqr__avro_node_t *n = f->node;
  switch (n->type) {
  case MQR_AVRO_RECORD: return f->field < n->n ? n->fields[f->field].type : NULL;
  case MQR_AVRO_ARRAY: return f->left ? n->items : NULL;
  case MQR_AVRO_MAP: return f->left && !f->key_next ? n->items : NULL;
  case MQR_AVRO_UNION: return n->branches[f->branch];
  }
  return NULL;
}

/* A value is complete: advance the frame that holds it (a union frame closes with it). */
static void complete(walk_t *w) {
  for (;;) {
    if (w->depth == 0) {
      w->state = DONE;
      return;
    }
    frame_t *f = &w->st[w->depth - 1];
    switch (f->node->type) {
    case MQR_AVRO_RECORD: f->field++; return;
    case MQR_AVRO_ARRAY:
    case MQR_AVRO_MAP:
      f->left--;
      f->index++;
      f->key_next = true;
      f->pending = false;
      return;
    default: w->depth--; /* a union: its value was the branch's */
    }
  }
}

static int push(walk_t *w, const mqr__avro_node_t *n, uint64_t left, uint32_t branch) {
  if (w->depth > MQR_AVRO_MAX_DEPTH) return walk_fail(w, MQR_ELIMIT, "nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  w->st[w->depth++] = (frame_t){.node = n, .left = left, .branch = branch, .key_next = true};
  return 0;
}

static int check_state(walk_t *w) {
  if (w->state == ACTIVE) return 0;
  if (w->state == FAILED) return w->err.code;
  return mqr_error_set(&w->err, MQR_EINVAL,
                       w->state == DONE ? "the datum is complete; begin another" : "no datum begun");
}

/* The node for a value of type t, or an error naming what was expected. A union takes
 * its first branch of type t (the writer), or must have been opened (the reader). */
static int take(walk_t *w, int t, bool pick_branch, const mqr__avro_node_t **out) {
  int rc = check_state(w);
  if (rc) return rc;
  if (w->depth > MQR_AVRO_MAX_DEPTH) return walk_fail(w, MQR_ELIMIT, "nested deeper than %d", MQR_AVRO_MAX_DEPTH);
  const mqr__avro_node_t *n = expected(w);
  if (n == NULL) {
    const frame_t *f = &w->st[w->depth - 1];
    return walk_fail(w, MQR_EINVAL, "expected the end of the %s%s, got %s", type_name(f->node->type),
                     f->node->type == MQR_AVRO_MAP && f->left ? " or a key" : "", type_name(t));
  }
  if (n->type == MQR_AVRO_UNION && t != MQR_AVRO_UNION && pick_branch) {
    for (uint32_t i = 0; i < n->n; i++)
      if (n->branches[i]->type == t) {
        if ((rc = push(w, n, 0, i)) != 0) return rc;
        if (w->depth > MQR_AVRO_MAX_DEPTH) return walk_fail(w, MQR_ELIMIT, "nested deeper than %d", MQR_AVRO_MAX_DEPTH);
        *out = n->branches[i];
        return 0;
      }
  }
  if (n->type != t) return walk_fail(w, MQR_EINVAL, "expected %s, got %s", type_name(n->type), type_name(t));
  *out = n;
  return 0;
}

static void walk_begin(walk_t *w) {
  w->state = ACTIVE;
  w->depth = 0;
  mqr_error_clear(&w->err);
}

static int walk_end(walk_t *w) {
  if (w->state == DONE) {
    w->state = IDLE;
    return 0;
  }
  int rc = check_state(w);
  if (rc) return rc;
  const mqr__avro_node_t *n = expected(w);
  return walk_fail(w, MQR_EINVAL, "the datum is not complete: %s%s expected",
                   n ? type_name(n->type) : "the end of the ", n ? "" : type_name(w->st[w->depth - 1].node->type));
}

/* ---- writer ------------------------------------------------------------------------- */

int mqr_avro_writer_create(const mqr_avro_schema_t *s, mqr_avro_writer_t **out) {
  mqr_avro_writer_t *w = mqr_calloc(1, sizeof *w);
  if (w == NULL) return MQR_ENOMEM;
  w->w.schema = s;
  *out = w;
  return 0;
}

void mqr_avro_writer_destroy(mqr_avro_writer_t *w) { mqr_free(w); }

void mqr_avro_writer_begin(mqr_avro_writer_t *w, mqr_avro_buf_t *out) {
  walk_begin(&w->w);
  w->out = out;
  w->mark = out->len;
}

const mqr_error_t *mqr_avro_writer_error(const mqr_avro_writer_t *w) { return &w->w.err; }

/* A failed datum leaves out as it was before mqr_avro_writer_begin. */
static int wfail(mqr_avro_writer_t *w, int rc) {
  if (rc) {
    w->out->len = w->mark;
    if (w->w.state != FAILED) {
      w->w.state = FAILED;
      mqr_error_set(&w->w.err, rc, "%s writing the datum", mqr_strerror(rc));
    }
  }
  return rc;
}

static int wput(mqr_avro_writer_t *w, const void *p, size_t n) {
  int rc = mqr_avro_buf_reserve(w->out, n);
  if (rc) return wfail(w, rc);
  if (n) memcpy(w->out->data + w->out->len, p, n);
  w->out->len += n;
  return 0;
}

static int wlong(mqr_avro_writer_t *w, int64_t v) {
  int rc = mqr_avro_buf_reserve(w->out, mqr__varint_size(mqr__zigzag64(v)));
  if (rc) return wfail(w, rc);
  w->out->len = (size_t)(mqr__put_long(w->out->data + w->out->len, v) - w->out->data);
  return 0;
}

static int write_branch_index(mqr_avro_writer_t *w);

/* Takes the node for a value of type t (writing the branch index of a union it picks);
 * on a mismatch the datum is dropped. */
static int wtake(mqr_avro_writer_t *w, int t, const mqr__avro_node_t **n) {
  int depth = w->w.depth;
  int rc = take(&w->w, t, true, n);
  if (rc) {
    w->out->len = w->mark;
    return rc;
  }
  return w->w.depth > depth ? write_branch_index(w) : 0;
}

/* The value is written: advance. */
static int wdone(mqr_avro_writer_t *w, int rc) {
  if (rc == 0) complete(&w->w);
  return rc;
}

int mqr_avro_write_null(mqr_avro_writer_t *w) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_NULL, &n);
  return rc ? rc : wdone(w, 0);
}

int mqr_avro_write_boolean(mqr_avro_writer_t *w, bool v) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_BOOLEAN, &n);
  uint8_t b = v ? 1 : 0;
  return rc ? rc : wdone(w, wput(w, &b, 1));
}

int mqr_avro_write_int(mqr_avro_writer_t *w, int32_t v) {
  /* An int is also a valid long: the encodings agree. */
  const mqr__avro_node_t *n = expected(&w->w);
  bool as_long = n && n->type == MQR_AVRO_LONG;
  int rc = wtake(w, as_long ? MQR_AVRO_LONG : MQR_AVRO_INT, &n);
  return rc ? rc : wdone(w, wlong(w, v));
}

int mqr_avro_write_long(mqr_avro_writer_t *w, int64_t v) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_LONG, &n);
  return rc ? rc : wdone(w, wlong(w, v));
}

int mqr_avro_write_float(mqr_avro_writer_t *w, float v) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_FLOAT, &n);
  return rc ? rc : wdone(w, wput(w, &v, 4)); /* little-endian hosts */
}

int mqr_avro_write_double(mqr_avro_writer_t *w, double v) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_DOUBLE, &n);
  return rc ? rc : wdone(w, wput(w, &v, 8));
}

static int wblob(mqr_avro_writer_t *w, int t, const void *p, size_t len) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, t, &n);
  if (rc) return rc;
  if (len && p == NULL) return wfail(w, walk_fail(&w->w, MQR_EINVAL, "a NULL pointer for %zu bytes", len));
  if ((rc = wlong(w, (int64_t)len)) != 0) return rc;
  return wdone(w, wput(w, p, len));
}

int mqr_avro_write_string(mqr_avro_writer_t *w, const char *s, size_t len) { return wblob(w, MQR_AVRO_STRING, s, len); }

int mqr_avro_write_bytes(mqr_avro_writer_t *w, const void *p, size_t len) { return wblob(w, MQR_AVRO_BYTES, p, len); }

int mqr_avro_write_fixed(mqr_avro_writer_t *w, const void *p, size_t len) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_FIXED, &n);
  if (rc) return rc;
  if (len != n->n || (len && p == NULL))
    return wfail(w, walk_fail(&w->w, MQR_EINVAL, "fixed %.*s takes %u bytes, got %zu", (int)n->fullname.len,
                              n->fullname.ptr, n->n, len));
  return wdone(w, wput(w, p, len));
}

int mqr_avro_write_enum(mqr_avro_writer_t *w, int32_t ordinal) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_ENUM, &n);
  if (rc) return rc;
  if (ordinal < 0 || (uint32_t)ordinal >= n->n)
    return wfail(w, walk_fail(&w->w, MQR_EINVAL, "ordinal %d is not one of %.*s's %u symbols", ordinal,
                              (int)n->fullname.len, n->fullname.ptr, n->n));
  return wdone(w, wlong(w, ordinal));
}

int mqr_avro_write_enum_symbol(mqr_avro_writer_t *w, const char *symbol, size_t len) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_ENUM, &n);
  if (rc) return rc;
  int32_t o = mqr__avro_enum_ordinal(n, symbol, len);
  if (o < 0)
    return wfail(w, walk_fail(&w->w, MQR_EINVAL, "'%.*s' is not a symbol of %.*s", (int)(len > 64 ? 64 : len), symbol,
                              (int)n->fullname.len, n->fullname.ptr));
  return wdone(w, wlong(w, o));
}

int mqr_avro_write_union(mqr_avro_writer_t *w, uint32_t branch) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, MQR_AVRO_UNION, &n);
  if (rc) return rc;
  if (branch >= n->n) return wfail(w, walk_fail(&w->w, MQR_EINVAL, "branch %u of a union of %u", branch, n->n));
  if ((rc = push(&w->w, n, 0, branch)) != 0) return wfail(w, rc);
  return wlong(w, branch);
}

/* The index of the union branch wtake just picked (its frame is on top). */
static int write_branch_index(mqr_avro_writer_t *w) { return wlong(w, w->w.st[w->w.depth - 1].branch); }

static int wopen(mqr_avro_writer_t *w, int t, uint64_t count) {
  const mqr__avro_node_t *n;
  int rc = wtake(w, t, &n);
  if (rc) return rc;
  if ((rc = push(&w->w, n, count, 0)) != 0) return wfail(w, rc);
  if (t != MQR_AVRO_RECORD && count) return wlong(w, (int64_t)count);
  return 0;
}

static int wclose(mqr_avro_writer_t *w, int t) {
  int rc = check_state(&w->w);
  if (rc) return wfail(w, rc);
  frame_t *f = w->w.depth ? &w->w.st[w->w.depth - 1] : NULL;
  if (f == NULL || f->node->type != t) return wfail(w, walk_fail(&w->w, MQR_EINVAL, "no %s is open", type_name(t)));
  if (t == MQR_AVRO_RECORD ? f->field < f->node->n : f->left > 0)
    return wfail(w, t == MQR_AVRO_RECORD ? walk_fail(&w->w, MQR_EINVAL, "the record ends before this field")
                                         : walk_fail(&w->w, MQR_EINVAL, "%llu of the %s's items are missing",
                                                     (unsigned long long)f->left, type_name(t)));
  w->w.depth--;
  if (t != MQR_AVRO_RECORD && (rc = wlong(w, 0)) != 0) return rc;
  complete(&w->w);
  return 0;
}

int mqr_avro_write_record_begin(mqr_avro_writer_t *w) { return wopen(w, MQR_AVRO_RECORD, 0); }
int mqr_avro_write_record_end(mqr_avro_writer_t *w) { return wclose(w, MQR_AVRO_RECORD); }
int mqr_avro_write_array_begin(mqr_avro_writer_t *w, size_t count) { return wopen(w, MQR_AVRO_ARRAY, count); }
int mqr_avro_write_array_end(mqr_avro_writer_t *w) { return wclose(w, MQR_AVRO_ARRAY); }
int mqr_avro_write_map_begin(mqr_avro_writer_t *w, size_t count) { return wopen(w, MQR_AVRO_MAP, count); }
int mqr_avro_write_map_end(mqr_avro_writer_t *w) { return wclose(w, MQR_AVRO_MAP); }

int mqr_avro_write_map_key(mqr_avro_writer_t *w, const char *key, size_t len) {
  int rc = check_state(&w->w);
  if (rc) return wfail(w, rc);
  frame_t *f = w->w.depth ? &w->w.st[w->w.depth - 1] : NULL;
  if (f == NULL || f->node->type != MQR_AVRO_MAP || !f->key_next || f->left == 0) {
    const mqr__avro_node_t *n = expected(&w->w);
    return wfail(w, walk_fail(&w->w, MQR_EINVAL, "expected %s, got a map key",
                              n                                    ? type_name(n->type)
                              : f && f->node->type == MQR_AVRO_MAP ? "the end of the map"
                                                                   : "no key"));
  }
  if (len && key == NULL) return wfail(w, walk_fail(&w->w, MQR_EINVAL, "a NULL key of %zu bytes", len));
  f->key_next = false;
  if ((rc = wlong(w, (int64_t)len)) != 0) return rc;
  return wput(w, key, len);
}

int mqr_avro_writer_end(mqr_avro_writer_t *w) {
  int rc = walk_end(&w->w);
  if (rc) w->out->len = w->mark;
  return rc;
}

/* ---- reader ------------------------------------------------------------------------- */

int mqr_avro_reader_create(const mqr_avro_schema_t *s, mqr_avro_reader_t **out) {
  mqr_avro_reader_t *r = mqr_calloc(1, sizeof *r);
  if (r == NULL) return MQR_ENOMEM;
  r->w.schema = s;
  *out = r;
  return 0;
}

void mqr_avro_reader_destroy(mqr_avro_reader_t *r) { mqr_free(r); }

void mqr_avro_reader_begin(mqr_avro_reader_t *r, const uint8_t *in, size_t len) {
  walk_begin(&r->w);
  r->r = mqr__rd_init(in, len, &r->w.err);
}

const mqr_error_t *mqr_avro_reader_error(const mqr_avro_reader_t *r) { return &r->w.err; }

size_t mqr_avro_reader_offset(const mqr_avro_reader_t *r) { return mqr__rd_offset(&r->r); }

int mqr_avro_reader_next(const mqr_avro_reader_t *r, mqr_avro_type_t *type) {
  if (r->w.state != ACTIVE) return r->w.state == FAILED ? r->w.err.code : MQR_EINVAL;
  const frame_t *f = r->w.depth ? &r->w.st[r->w.depth - 1] : NULL;
  const mqr__avro_node_t *n = expected(&r->w);
  if (n == NULL || (f && (f->node->type == MQR_AVRO_ARRAY || f->node->type == MQR_AVRO_MAP) && !f->pending))
    return MQR_ENOTFOUND;
  *type = (mqr_avro_type_t)n->type;
  return 0;
}

/* An error from the bytes: the reader is failed. */
static int rfail(mqr_avro_reader_t *r, int rc) {
  if (rc) r->w.state = FAILED;
  return rc;
}

static int rtake(mqr_avro_reader_t *r, int t, const mqr__avro_node_t **n) {
  const frame_t *f = r->w.depth ? &r->w.st[r->w.depth - 1] : NULL;
  if (f && (f->node->type == MQR_AVRO_ARRAY || f->node->type == MQR_AVRO_MAP) && !f->pending && r->w.state == ACTIVE)
    return walk_fail(&r->w, MQR_EINVAL, "ask for the %s's next item first", type_name(f->node->type));
  const mqr__avro_node_t *e = expected(&r->w);
  if (e && e->type == MQR_AVRO_UNION && t != MQR_AVRO_UNION && r->w.state == ACTIVE)
    return walk_fail(&r->w, MQR_EINVAL, "expected a union: read its branch first");
  return take(&r->w, t, false, n);
}

static int rdone(mqr_avro_reader_t *r, int rc) {
  if (rc) return rfail(r, rc);
  complete(&r->w);
  return 0;
}

int mqr_avro_read_null(mqr_avro_reader_t *r) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_NULL, &n);
  return rc ? rc : rdone(r, 0);
}

int mqr_avro_read_boolean(mqr_avro_reader_t *r, bool *v) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_BOOLEAN, &n);
  if (rc) return rc;
  const uint8_t *p = r->r.p;
  if ((rc = mqr__avro_skip_node(&r->r, n, r->w.depth)) == 0) *v = *p != 0;
  return rdone(r, rc);
}

int mqr_avro_read_int(mqr_avro_reader_t *r, int32_t *v) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_INT, &n);
  return rc ? rc : rdone(r, mqr__get_int(&r->r, v));
}

int mqr_avro_read_long(mqr_avro_reader_t *r, int64_t *v) {
  const mqr__avro_node_t *e = expected(&r->w);
  if (e && e->type == MQR_AVRO_INT) { /* an int read as a long */
    int32_t i = 0;
    int rc = mqr_avro_read_int(r, &i);
    if (rc == 0) *v = i;
    return rc;
  }
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_LONG, &n);
  return rc ? rc : rdone(r, mqr__get_long(&r->r, v));
}

int mqr_avro_read_float(mqr_avro_reader_t *r, float *v) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_FLOAT, &n);
  if (rc) return rc;
  if ((rc = mqr__need(&r->r, 4)) == 0) {
    memcpy(v, r->r.p, 4);
    r->r.p += 4;
  }
  return rdone(r, rc);
}

int mqr_avro_read_double(mqr_avro_reader_t *r, double *v) {
  const mqr__avro_node_t *e = expected(&r->w);
  if (e && e->type == MQR_AVRO_FLOAT) { /* a float read as a double */
    float f = 0;
    int rc = mqr_avro_read_float(r, &f);
    if (rc == 0) *v = f;
    return rc;
  }
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_DOUBLE, &n);
  if (rc) return rc;
  if ((rc = mqr__need(&r->r, 8)) == 0) {
    memcpy(v, r->r.p, 8);
    r->r.p += 8;
  }
  return rdone(r, rc);
}

static int rblob(mqr_avro_reader_t *r, int t, mqr_str_t *v) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, t, &n);
  if (rc) return rc;
  size_t len = n->n;
  if (t == MQR_AVRO_FIXED ? (rc = mqr__need(&r->r, len)) != 0 : (rc = mqr__get_len(&r->r, &len)) != 0)
    return rfail(r, rc);
  v->ptr = (const char *)r->r.p;
  v->len = len;
  r->r.p += len;
  return rdone(r, 0);
}

int mqr_avro_read_string(mqr_avro_reader_t *r, mqr_str_t *v) { return rblob(r, MQR_AVRO_STRING, v); }
int mqr_avro_read_bytes(mqr_avro_reader_t *r, mqr_str_t *v) { return rblob(r, MQR_AVRO_BYTES, v); }
int mqr_avro_read_fixed(mqr_avro_reader_t *r, mqr_str_t *v) { return rblob(r, MQR_AVRO_FIXED, v); }

int mqr_avro_read_enum(mqr_avro_reader_t *r, int32_t *ordinal, mqr_str_t *symbol) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_ENUM, &n);
  if (rc) return rc;
  int32_t o = 0;
  if ((rc = mqr__get_int(&r->r, &o)) != 0) return rfail(r, rc);
  if (o < 0 || (uint32_t)o >= n->n)
    return rfail(r, mqr__rd_fail(&r->r, MQR_EBADDATA, "enum ordinal %d out of range", o));
  *ordinal = o;
  if (symbol) *symbol = n->symbols[o];
  return rdone(r, 0);
}

int mqr_avro_read_union(mqr_avro_reader_t *r, uint32_t *branch) {
  const mqr__avro_node_t *n;
  int rc = take(&r->w, MQR_AVRO_UNION, false, &n);
  if (rc) return rc;
  int64_t b = 0;
  if ((rc = mqr__get_long(&r->r, &b)) != 0) return rfail(r, rc);
  if (b < 0 || (uint64_t)b >= n->n)
    return rfail(r, mqr__rd_fail(&r->r, MQR_EBADDATA, "union branch %lld out of range", (long long)b));
  if ((rc = push(&r->w, n, 0, (uint32_t)b)) != 0) return rc;
  *branch = (uint32_t)b;
  return 0;
}

int mqr_avro_read_record_begin(mqr_avro_reader_t *r) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, MQR_AVRO_RECORD, &n);
  return rc ? rc : push(&r->w, n, 0, 0);
}

int mqr_avro_read_record_end(mqr_avro_reader_t *r) {
  int rc = check_state(&r->w);
  if (rc) return rc;
  frame_t *f = r->w.depth ? &r->w.st[r->w.depth - 1] : NULL;
  if (f == NULL || f->node->type != MQR_AVRO_RECORD) return walk_fail(&r->w, MQR_EINVAL, "no record is open");
  if (f->field < f->node->n) return walk_fail(&r->w, MQR_EINVAL, "the record ends before this field");
  r->w.depth--;
  complete(&r->w);
  return 0;
}

static int ropen(mqr_avro_reader_t *r, int t) {
  const mqr__avro_node_t *n;
  int rc = rtake(r, t, &n);
  return rc ? rc : push(&r->w, n, 0, 0);
}

int mqr_avro_read_array_begin(mqr_avro_reader_t *r) { return ropen(r, MQR_AVRO_ARRAY); }
int mqr_avro_read_map_begin(mqr_avro_reader_t *r) { return ropen(r, MQR_AVRO_MAP); }

/* 1: an item (and, in a map, its key) follows; 0: the end, the array or map is closed. */
static int rnext(mqr_avro_reader_t *r, int t, mqr_str_t *key) {
  int rc = check_state(&r->w);
  if (rc) return rc;
  frame_t *f = r->w.depth ? &r->w.st[r->w.depth - 1] : NULL;
  if (f == NULL || f->node->type != t) return walk_fail(&r->w, MQR_EINVAL, "no %s is open", type_name(t));
  if (f->pending) return walk_fail(&r->w, MQR_EINVAL, "the item is not read yet");
  if (f->left == 0) {
    uint64_t count = 0;
    uint32_t min = f->node->items->min_size + (t == MQR_AVRO_MAP);
    if ((rc = mqr__get_count(&r->r, min, &count)) != 0) return rfail(r, rc);
    if (count == 0) {
      r->w.depth--;
      complete(&r->w);
      return 0;
    }
    f->left = count;
  }
  if (t == MQR_AVRO_MAP) {
    size_t len = 0;
    if ((rc = mqr__get_len(&r->r, &len)) != 0) return rfail(r, rc);
    key->ptr = (const char *)r->r.p;
    key->len = len;
    r->r.p += len;
    f->key_next = false;
  }
  f->pending = true;
  return 1;
}

int mqr_avro_read_array_next(mqr_avro_reader_t *r) { return rnext(r, MQR_AVRO_ARRAY, NULL); }
int mqr_avro_read_map_next(mqr_avro_reader_t *r, mqr_str_t *key) { return rnext(r, MQR_AVRO_MAP, key); }

int mqr_avro_read_skip(mqr_avro_reader_t *r) {
  mqr_avro_type_t t;
  int rc = mqr_avro_reader_next(r, &t);
  if (rc == MQR_ENOTFOUND)
    return walk_fail(&r->w, MQR_EINVAL, "nothing to skip here: the %s's end or next item comes first",
                     type_name(r->w.st[r->w.depth - 1].node->type));
  if (rc) return check_state(&r->w) ? check_state(&r->w) : rc;
  return rdone(r, mqr__avro_skip_node(&r->r, expected(&r->w), r->w.depth));
}

int mqr_avro_reader_end(mqr_avro_reader_t *r) { return walk_end(&r->w); }
