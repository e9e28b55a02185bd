/* The MANAGE frame (docs/protocol.md, Management): an operation by name and its
 * arguments, carried out by the broker's management calls (manage.c) and answered by a
 * MANAGE_RESULT: a code (0 or why it was refused), a line of text, a count, and rows of
 * named values for what it lists (browsed messages, consumers). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

/* Rows being made: each a map of up to ROW_MAX named values. */
#define ROW_MAX 512
typedef struct {
  mqr_avro_map_t *rows;
  uint32_t n, cap;
  mqr_str_t *keys;
  mqr_value_t *values;
  uint32_t used, kcap;
  bool nomem;
} rows_t;

/* Room for one more row of up to n values (the key and value arrays move as they grow:
 * the rows are pointed at them once complete, in finish). */
static mqr_avro_map_t *row_begin(rows_t *r, size_t n) {
  if (r->nomem) return NULL;
  if (!mqr__grow((void **)&r->rows, &r->cap, r->n + 1, sizeof *r->rows) ||
      !mqr__grow((void **)&r->keys, &r->kcap, r->used + (uint32_t)n, sizeof *r->keys)) {
    r->nomem = true;
    return NULL;
  }
  size_t vcap = r->kcap; /* values grow with keys */
  mqr_value_t *nv = mqr_realloc(r->values, vcap * sizeof *nv);
  if (nv == NULL) {
    r->nomem = true;
    return NULL;
  }
  r->values = nv;
  mqr_avro_map_t *m = &r->rows[r->n++];
  m->keys = (mqr_str_t *)(uintptr_t)r->used; /* an offset until finish */
  m->count = 0;
  return m;
}

static void row_put(rows_t *r, mqr_avro_map_t *m, const char *key, mqr_value_t v) {
  r->keys[r->used] = mqr_str(key);
  r->values[r->used++] = v;
  m->count++;
}

static void finish(rows_t *r) {
  for (uint32_t i = 0; i < r->n; i++) {
    size_t off = (size_t)(uintptr_t)r->rows[i].keys;
    r->rows[i].keys = r->keys + off;
    r->rows[i].values = r->values + off;
  }
}

static void rows_free(rows_t *r) {
  mqr_free(r->rows);
  mqr_free(r->keys);
  mqr_free(r->values);
}

/* A browsed message: its headers under names that start with '@', then its properties.
 * The values' strings are copied (the frame they view goes after the call). */
typedef struct {
  rows_t rows;
  char **copies;
  uint32_t n_copies, cap_copies;
} browse_t;

static mqr_str_t keep(browse_t *x, mqr_str_t s) {
  char *p = mqr_malloc(s.len + 1);
  if (p == NULL || !mqr__grow((void **)&x->copies, &x->cap_copies, x->n_copies + 1, sizeof *x->copies)) {
    mqr_free(p);
    x->rows.nomem = true;
    return mqr_str_n("", 0);
  }
  if (s.len) memcpy(p, s.ptr, s.len);
  p[s.len] = 0;
  x->copies[x->n_copies++] = p;
  return mqr_str_n(p, s.len);
}

static void on_browse(void *arg, const mqr_frame_message_t *m) {
  browse_t *x = arg;
  size_t np = m->properties.count < ROW_MAX - 9 ? m->properties.count : ROW_MAX - 9;
  mqr_avro_map_t *row = row_begin(&x->rows, 9 + np);
  if (row == NULL) return;
  rows_t *r = &x->rows;
  row_put(r, row, "@message_id", mqr_value_long(m->message_id));
  row_put(r, row, "@address", mqr_value_string(keep(x, m->address)));
  row_put(r, row, "@durable", mqr_value_bool(m->durable));
  row_put(r, row, "@priority", mqr_value_int(m->priority));
  row_put(r, row, "@timestamp", mqr_value_long(m->timestamp));
  row_put(r, row, "@expiration", mqr_value_long(m->expiration));
  row_put(r, row, "@delivery_count", mqr_value_int(m->delivery_count));
  row_put(r, row, "@user_id", mqr_value_string(keep(x, m->user_id)));
  mqr_value_t body = mqr_value_bytes(keep(x, m->body));
  row_put(r, row, "@body", body);
  const mqr_value_t *v = m->properties.values;
  for (size_t i = 0; i < np; i++) {
    mqr_value_t pv = v[i];
    if (pv.type == MQR_VALUE_STRING || pv.type == MQR_VALUE_BYTES) pv.u.s = keep(x, pv.u.s);
    r->keys[r->used] = keep(x, m->properties.keys[i]);
    r->values[r->used++] = pv;
    row->count++;
  }
}

static void on_consumer(void *arg, const mqr_broker_consumer_info_t *c) {
  rows_t *r = arg;
  mqr_avro_map_t *row = row_begin(r, 6);
  if (row == NULL) return;
  row_put(r, row, "@session", mqr_value_long(c->session));
  row_put(r, row, "@subscription", mqr_value_long(c->subscription));
  row_put(r, row, "@credit", mqr_value_long(c->credit));
  row_put(r, row, "@in_flight", mqr_value_long((int64_t)c->in_flight));
  row_put(r, row, "@delivered", mqr_value_long(c->delivered));
  row_put(r, row, "@selector", mqr_value_string(c->selector));
}

static bool arg_is(mqr_str_t a, const char *lit) { return mqr_str_eq(a, mqr_str(lit)); }

/* A key=value argument of queue.create. */
static int queue_option(mqr_queue_config_t *qc, mqr_str_t a, mqr_error_t *err) {
  const char *eq = memchr(a.ptr, '=', a.len);
  if (eq == NULL) return mqr_error_set(err, MQR_EINVAL, "'%.*s' is not key=value", (int)a.len, a.ptr);
  mqr_str_t k = mqr_str_n(a.ptr, (size_t)(eq - a.ptr));
  return mqr__queue_option(qc, k, mqr_str_n(eq + 1, a.len - k.len - 1), err);
}

/* A decimal argument within [lo, hi]. */
static bool arg_number(mqr_str_t a, long long lo, long long hi, long long *out) {
  char num[24], *end;
  if (a.len == 0 || a.len >= sizeof num) return false;
  memcpy(num, a.ptr, a.len);
  num[a.len] = '\0';
  errno = 0;
  long long v = strtoll(num, &end, 10);
  if (*end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* A replication group as a row (cluster.status). */
static void on_group(void *arg, const mqr_broker_group_info_t *g) {
  rows_t *rows = arg;
  mqr_avro_map_t *m = row_begin(rows, 10 + 2 * (size_t)g->n_followers);
  if (m == NULL) return;
  row_put(rows, m, "group", mqr_value_long(g->group));
  row_put(rows, m, "leading", mqr_value_bool(g->leading));
  row_put(rows, m, "leader", mqr_value_long((int64_t)g->leader_id));
  row_put(rows, m, "term", mqr_value_long((int64_t)g->term));
  row_put(rows, m, "commit_index", mqr_value_long((int64_t)g->commit_index));
  row_put(rows, m, "applied_index", mqr_value_long((int64_t)g->applied_index));
  row_put(rows, m, "messages", mqr_value_long((int64_t)g->messages));
  row_put(rows, m, "bytes", mqr_value_long((int64_t)g->bytes));
  row_put(rows, m, "held_back", mqr_value_long((int64_t)g->held_back));
  static const char *const lag_keys[16] = {"lag.1",  "lag.2",  "lag.3",  "lag.4",  "lag.5",  "lag.6",
                                           "lag.7",  "lag.8",  "lag.9",  "lag.10", "lag.11", "lag.12",
                                           "lag.13", "lag.14", "lag.15", "lag.16"};
  for (uint32_t k = 0; k < g->n_followers; k++)
    if (g->follower_id[k] >= 1 && g->follower_id[k] <= 16)
      row_put(rows, m, lag_keys[g->follower_id[k] - 1], mqr_value_long((int64_t)g->follower_lag[k]));
}

/* Carries out the operation: 0 or an error in err, with *count and the rows. */
static int run(mqr_broker_t *b, mqr_str_t op, const mqr_str_t *a, size_t n, int64_t *count, rows_t *rows, browse_t *br,
               char *text, size_t tcap, mqr_error_t *err) {
  int64_t r;
#define NEED(lo, hi, usage)                                                                                            \
  if (n < (lo) || n > (hi)) return mqr_error_set(err, MQR_EINVAL, "usage: %.*s %s", (int)op.len, op.ptr, usage)
  if (arg_is(op, "address.create")) {
    NEED(2, 2, "NAME ANYCAST|MULTICAST|ANYCAST,MULTICAST");
    mqr_routing_set_t types;
    char t[64];
    snprintf(t, sizeof t, "%.*s", (int)(a[1].len < 63 ? a[1].len : 63), a[1].ptr);
    if (mqr_routing_set_parse(mqr_str(t), &types, NULL) != 0 || mqr_routing_set_is_empty(types))
      return mqr_error_set(err, MQR_EINVAL, "bad routing types '%s'", t);
    if ((r = mqr_broker_create_address(b, a[0], types, err)) != 0) return (int)r;
    snprintf(text, tcap, "address '%.*s' created", (int)a[0].len, a[0].ptr);
  } else if (arg_is(op, "address.delete")) {
    NEED(1, 2, "NAME [force]");
    if (n == 2 && !arg_is(a[1], "force")) return mqr_error_set(err, MQR_EINVAL, "the second argument may be 'force'");
    if ((r = mqr_broker_delete_address(b, a[0], n == 2, err)) != 0) return (int)r;
    snprintf(text, tcap, "address '%.*s' deleted", (int)a[0].len, a[0].ptr);
  } else if (arg_is(op, "queue.create")) {
    NEED(3, 16, "NAME ADDRESS ANYCAST|MULTICAST [key=value ...]");
    mqr_routing_type_t t;
    if (mqr_routing_type_parse(a[2], &t) != 0)
      return mqr_error_set(err, MQR_EINVAL, "bad routing type '%.*s'", (int)a[2].len, a[2].ptr);
    mqr_queue_config_t qc;
    mqr_queue_config_init(&qc, a[0], a[1], t);
    qc.auto_create_address = true;
    for (size_t i = 3; i < n; i++)
      if ((r = queue_option(&qc, a[i], err)) != 0) return (int)r;
    if ((r = mqr_broker_create_queue(b, &qc, err)) != 0) return (int)r;
    snprintf(text, tcap, "queue '%.*s' created on '%.*s'", (int)a[0].len, a[0].ptr, (int)a[1].len, a[1].ptr);
  } else if (arg_is(op, "queue.delete")) {
    NEED(1, 1, "NAME");
    if ((r = mqr_broker_delete_queue(b, a[0], err)) != 0) return (int)r;
    snprintf(text, tcap, "queue '%.*s' deleted", (int)a[0].len, a[0].ptr);
  } else if (arg_is(op, "queue.purge")) {
    NEED(1, 1, "NAME");
    mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(b), a[0]);
    if (q == NULL) return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)a[0].len, a[0].ptr);
    *count = (int64_t)mqr_broker_purge(b, q);
    snprintf(text, tcap, "%lld message(s) purged from '%.*s'", (long long)*count, (int)a[0].len, a[0].ptr);
  } else if (arg_is(op, "queue.pause") || arg_is(op, "queue.resume")) {
    NEED(1, 2, "NAME [persist]");
    if (n == 2 && !arg_is(a[1], "persist"))
      return mqr_error_set(err, MQR_EINVAL, "the second argument may be 'persist'");
    bool pause = arg_is(op, "queue.pause");
    if ((r = mqr_broker_pause_queue(b, a[0], pause, n == 2, err)) != 0) return (int)r;
    snprintf(text, tcap, "queue '%.*s' %s%s", (int)a[0].len, a[0].ptr, pause ? "paused" : "resumed",
             n == 2 ? mqr__has_journal(b) ? " (recorded)" : " (not recorded: the broker has no journal)" : "");
  } else if (arg_is(op, "queue.browse")) {
    NEED(1, 2, "NAME [MAX]");
    long max = 200; /* Artemis's management-browse-page-size */
    if (n == 2) {
      char num[24], *end;
      snprintf(num, sizeof num, "%.*s", (int)(a[1].len < 23 ? a[1].len : 23), a[1].ptr);
      max = strtol(num, &end, 10);
      if (*end || max < 1 || max > 100000) return mqr_error_set(err, MQR_EINVAL, "MAX must be from 1 to 100000");
    }
    if ((r = mqr_broker_browse(b, a[0], (uint32_t)max, on_browse, br, err)) < 0) return (int)r;
    if (br->rows.nomem) return mqr_error_set(err, MQR_ENOMEM, "out of memory browsing");
    *count = r;
    snprintf(text, tcap, "%lld message(s) in '%.*s'", (long long)r, (int)a[0].len, a[0].ptr);
  } else if (arg_is(op, "queue.move")) {
    NEED(2, 3, "FROM TO [FILTER]");
    if ((r = mqr_broker_move_messages(b, a[0], n == 3 ? a[2] : mqr_str_n("", 0), a[1], err)) < 0) return (int)r;
    *count = r;
    snprintf(text, tcap, "%lld message(s) moved from '%.*s' to '%.*s'", (long long)r, (int)a[0].len, a[0].ptr,
             (int)a[1].len, a[1].ptr);
  } else if (arg_is(op, "queue.consumers")) {
    NEED(1, 1, "NAME");
    if ((r = mqr_broker_list_consumers(b, a[0], on_consumer, rows, err)) < 0) return (int)r;
    if (rows->nomem) return mqr_error_set(err, MQR_ENOMEM, "out of memory listing consumers");
    *count = r;
    snprintf(text, tcap, "%lld consumer(s) on '%.*s'", (long long)r, (int)a[0].len, a[0].ptr);
  } else if (arg_is(op, "cluster.status")) {
    if (n != 0) return mqr_error_set(err, MQR_EINVAL, "usage: cluster.status (no arguments)");
    uint64_t node = mqr_broker_cluster_groups(b, on_group, rows);
    if (node == 0) return mqr_error_set(err, MQR_ENOTFOUND, "this broker is not in a cluster");
    if (rows->nomem) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
    *count = rows->n;
    snprintf(text, tcap, "node %llu: %u group(s)", (unsigned long long)node, rows->n);
  } else if (arg_is(op, "cluster.transfer")) {
    NEED(1, 2, "GROUP [NODE]");
    long long v[2] = {0, 0};
    if (!arg_number(a[0], 0, 63, &v[0])) return mqr_error_set(err, MQR_EINVAL, "GROUP must be a number");
    if (n == 2 && !arg_number(a[1], 1, INT64_MAX, &v[1]))
      return mqr_error_set(err, MQR_EINVAL, "NODE must be a number");
    if ((r = mqr_broker_cluster_transfer(b, (uint32_t)v[0], (uint64_t)v[1], err)) != 0) return (int)r;
    if (n == 2)
      snprintf(text, tcap, "group %lld's leadership moving to node %lld", v[0], v[1]);
    else
      snprintf(text, tcap, "group %lld's leadership moving to a follower", v[0]);
  } else if (arg_is(op, "cluster.add") || arg_is(op, "cluster.remove")) {
    bool add = arg_is(op, "cluster.add");
    if (add) {
      NEED(2, 2, "NODE ADDRESS");
    } else {
      NEED(1, 1, "NODE");
    }
    char addr[64];
    long long id;
    if (!arg_number(a[0], 1, INT64_MAX, &id)) return mqr_error_set(err, MQR_EINVAL, "NODE must be a node's id (1..)");
    if (add) snprintf(addr, sizeof addr, "%.*s", (int)(a[1].len < 63 ? a[1].len : 63), a[1].ptr);
    if ((r = mqr_broker_cluster_change(b, (uint64_t)id, add ? addr : NULL, err)) < 0) return (int)r;
    *count = r;
    snprintf(text, tcap, "node %lld %s in %lld group(s) this node leads", id, add ? "being added" : "being removed",
             (long long)r);
  } else {
    return mqr_error_set(err, MQR_EINVAL,
                         "unknown operation '%.*s' (address.create, address.delete, queue.create, queue.delete, "
                         "queue.purge, queue.pause, queue.resume, queue.browse, queue.move, queue.consumers, "
                         "cluster.status, cluster.transfer, cluster.add, cluster.remove)",
                         (int)op.len, op.ptr);
  }
#undef NEED
  return 0;
}

/* The address a queue is on (empty when there is no such queue: the operation says so). */
static mqr_str_t queue_address(mqr_broker_t *b, mqr_str_t queue) {
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(b), queue);
  return q ? mqr_address_name(mqr_queue_address(q)) : mqr_str_n("", 0);
}

/* Whether the connection's user may run the operation: manage on the address it names
 * (a queue's address for a queue's), browse or manage to look (queue.browse,
 * queue.consumers). 0 or MQR_EPERM (err set). */
static int authorize(mqr__conn_t *c, mqr_str_t op, const mqr_str_t *a, size_t n, mqr_error_t *err) {
  mqr_broker_t *b = c->b;
  mqr__principal_t *who = mqr__session_principal(&c->sess);
  /* The cluster's: manage on the address $sys.mqr.cluster (a '#' match gives it). */
  if (arg_is(op, "cluster.status") || arg_is(op, "cluster.transfer") || arg_is(op, "cluster.add") ||
      arg_is(op, "cluster.remove"))
    return mqr__may(b, who, MQR_PERM_MANAGE, MQR_STR("$sys.mqr.cluster"), err) ? 0 : MQR_EPERM;
  if (n == 0) return 0; /* a usage error follows */
  bool look = arg_is(op, "queue.browse") || arg_is(op, "queue.consumers");
  mqr_str_t where = arg_is(op, "address.create") || arg_is(op, "address.delete") ? a[0]
                    : arg_is(op, "queue.create")                                 ? (n > 1 ? a[1] : a[0])
                                                                                 : queue_address(b, a[0]);
  if (where.len == 0) return 0; /* no such queue: the operation says so */
  if (look && mqr__allowed(b, who, MQR_PERM_BROWSE, where)) return 0;
  if (!mqr__may(b, who, MQR_PERM_MANAGE, where, err)) return MQR_EPERM;
  if (arg_is(op, "queue.move") && n > 1 && queue_address(b, a[1]).len &&
      !mqr__may(b, who, MQR_PERM_MANAGE, queue_address(b, a[1]), err))
    return MQR_EPERM;
  return 0;
}

/* Whether op reads or changes a queue's messages (its first argument's): on a node that
 * does not lead the queue's group, refused and redirected (mqr_broker_queue_served). */
static bool on_messages(mqr_str_t op) {
  return arg_is(op, "queue.browse") || arg_is(op, "queue.purge") || arg_is(op, "queue.pause") ||
         arg_is(op, "queue.resume") || arg_is(op, "queue.move");
}

void mqr__nat_on_manage(mqr__conn_t *c, const mqr_frame_manage_t *m) {
  mqr_broker_t *b = c->b;
  const mqr_str_t *args = m->args.items;
  size_t n = m->args.count;
  int64_t count = 0;
  rows_t rows = {0};
  browse_t br = {0};
  char text[512] = "";
  mqr_error_t err = {0};
  /* The arguments are views into the connection's scratch: copied, since a call may
   * decode (a browse) or log. */
  mqr_str_t op = mqr_str_n("", 0), *a = mqr_calloc(n + 1, sizeof *a);
  size_t total = m->operation.len + 1;
  for (size_t i = 0; i < n; i++) total += args[i].len + 1;
  char *buf = a ? mqr_malloc(total) : NULL;
  int rc = 0;
  /* Names that are not UTF-8 would make addresses and queues no reader can name. */
  if (mqr_utf8_check(m->operation.ptr, m->operation.len) != m->operation.len)
    rc = mqr_error_set(&err, MQR_EINVAL, "the operation is not valid UTF-8");
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (mqr_utf8_check(args[i].ptr, args[i].len) != args[i].len)
      rc = mqr_error_set(&err, MQR_EINVAL, "argument %zu is not valid UTF-8", i + 1);
  if (rc) {
  } else if (buf == NULL) {
    rc = mqr_error_set(&err, MQR_ENOMEM, "out of memory");
  } else {
    char *p = buf;
    memcpy(p, m->operation.ptr, m->operation.len);
    op = mqr_str_n(p, m->operation.len);
    p += m->operation.len + 1;
    for (size_t i = 0; i < n; i++) {
      if (args[i].len) memcpy(p, args[i].ptr, args[i].len);
      a[i] = mqr_str_n(p, args[i].len);
      p += args[i].len + 1;
    }
    rc = authorize(c, op, a, n, &err);
    if (rc == 0 && n > 0 && on_messages(op) && mqr_router_find_queue(mqr_broker_router(b), a[0]))
      rc = mqr_broker_queue_served(b, a[0], &err); /* (no such queue: the operation says so, after its arguments) */
    if (rc == 0) rc = run(b, op, a, n, &count, &rows, &br, text, sizeof text, &err);
  }
  mqr__nat_redirect(c, rc, m->request);
  rows_t *out = br.rows.n ? &br.rows : &rows;
  finish(out);
  mqr_frame_t f = {MQR_FRAME_MANAGE_RESULT,
                   {.manage_result = {m->request,
                                      rc,
                                      rc ? mqr_str(err.message) : mqr_str(text),
                                      count,
                                      {rc ? NULL : out->rows, rc ? 0 : out->n}}}};
  mqr__log(b, rc ? MQR_LOG_WARN : MQR_LOG_INFO, "connection %lld (%s): manage %.*s: %s", (long long)c->sess.id, c->peer,
           (int)op.len, op.ptr, rc ? err.message : text);
  int wrc = mqr__nat_write_frame(c, &f);
  if (wrc == MQR_ELIMIT) {
    mqr_frame_t e = {MQR_FRAME_MANAGE_RESULT,
                     {.manage_result = {m->request,
                                        MQR_ELIMIT,
                                        MQR_STR("the result is more than the max_frame this connection declared "
                                                "(browse fewer messages)"),
                                        count,
                                        {NULL, 0}}}};
    wrc = mqr__nat_write_frame(c, &e);
  }
  if (wrc) mqr__nat_reply_failed(c, MQR_FRAME_MANAGE_RESULT, wrc);
  for (uint32_t i = 0; i < br.n_copies; i++) mqr_free(br.copies[i]);
  mqr_free(br.copies);
  rows_free(&br.rows);
  rows_free(&rows);
  mqr_free(buf);
  mqr_free(a);
}
