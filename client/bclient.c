/* The blocking wrapper: an async client on a loop of its own, run until what a call waits
 * for has come (or a timer says it will not). Deliveries are copied as they arrive and
 * handed out by mqr_bclient_receive in order. */
#include <stdio.h>

#include "client_int.h"

typedef struct qmsg_s {
  mqr_bclient_message_t m;
  struct qmsg_s *next;
} qmsg_t;

struct mqr_bclient_s {
  uv_loop_t loop;
  uv_timer_t timer;
  mqr_client_t *c;
  qmsg_t *head, *tail;
  int lost; /* the connection's end, once it came */
  char lost_text[256];
  void *sub_wait; /* the wait_t of the subscribe in progress */
};

typedef struct {
  bool done;
  int status;
  mqr_frame_t frame; /* the answer; strings point into the client's buffer until the next read */
  char text[512];
  char queue[256];
  mqr_frame_query_result_t *qr;
  mqr_frame_manage_result_t *mr;
} wait_t;

static void timer_cb(uv_timer_t *t) { *(bool *)t->data = true; }

/* Runs the loop until *done, the connection ends, or timeout_ms passes. */
static int run_until(mqr_bclient_t *bc, bool *done, int timeout_ms) {
  bool timed_out = false;
  if (timeout_ms >= 0) {
    bc->timer.data = &timed_out;
    uv_timer_start(&bc->timer, timer_cb, (uint64_t)timeout_ms, 0);
  }
  while (!*done && !timed_out && !bc->lost) uv_run(&bc->loop, UV_RUN_ONCE);
  uv_timer_stop(&bc->timer);
  if (*done) return 0;
  return bc->lost ? bc->lost : MQR_ETIMEOUT;
}

static void on_error(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg) {
  (void)c;
  mqr_bclient_t *bc = arg;
  if (e == NULL || e->fatal) {
    bc->lost = status ? status : MQR_ECLOSED;
    snprintf(bc->lost_text, sizeof bc->lost_text, "%.*s", e ? (int)e->text.len : 0, e ? e->text.ptr : "");
  }
}

static void done_cb(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c;
  wait_t *w = arg;
  w->done = true;
  w->status = status;
  if (f) w->frame = *f;
  if (f && f->type == MQR_FRAME_ERROR)
    snprintf(w->text, sizeof w->text, "%.*s", (int)f->u.error.text.len, f->u.error.text.ptr);
  if (f && f->type == MQR_FRAME_SUBSCRIBED)
    snprintf(w->queue, sizeof w->queue, "%.*s", (int)f->u.subscribed.queue.len, f->u.subscribed.queue.ptr);
}

static int fail(int rc, const wait_t *w, mqr_bclient_t *bc, mqr_error_t *err, const char *what) {
  if (rc == MQR_ETIMEOUT) return mqr_error_set(err, rc, "%s: timed out", what);
  if (w && w->done)
    return mqr_error_set(err, w->status, "%s: %s", what, w->text[0] ? w->text : mqr_strerror(w->status));
  return mqr_error_set(err, rc, "%s: %s%s%s", what, mqr_strerror(rc), bc->lost_text[0] ? ": " : "", bc->lost_text);
}

int mqr_bclient_connect(const char *url, const char *client_id, int timeout_ms, mqr_bclient_t **out, mqr_error_t *err) {
  mqr_client_options_t opt = {.client_id = client_id};
  return mqr_bclient_connect_opt(url, &opt, timeout_ms, out, err);
}

int mqr_bclient_connect_opt(const char *url, const mqr_client_options_t *given, int timeout_ms, mqr_bclient_t **out,
                            mqr_error_t *err) {
  mqr_bclient_t *bc = mqr_calloc(1, sizeof *bc);
  if (bc == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
  uv_loop_init(&bc->loop);
  uv_timer_init(&bc->loop, &bc->timer);
  mqr_client_options_t opt = *given;
  opt.on_error = on_error;
  opt.arg = bc;
  int rc = mqr_client_create(&bc->loop, &opt, &bc->c);
  wait_t w = {0};
  if (rc == 0 && (rc = mqr_client_connect(bc->c, url, done_cb, &w, err)) != 0) {
    mqr_bclient_close(bc);
    return rc;
  }
  if (rc == 0) rc = run_until(bc, &w.done, timeout_ms);
  if (rc == 0) rc = w.status;
  if (rc) {
    char what[320];
    snprintf(what, sizeof what, "cannot connect to %.280s", url);
    fail(rc, &w, bc, err, what);
    mqr_bclient_close(bc);
    return rc;
  }
  *out = bc;
  return 0;
}

int mqr_bclient_send(mqr_bclient_t *bc, const mqr_client_message_t *m, bool receipt, mqr_frame_receipt_t *r,
                     mqr_error_t *err) {
  if (bc->lost) return fail(bc->lost, NULL, bc, err, "send");
  wait_t w = {0};
  int rc = mqr_client_send(bc->c, m, receipt ? done_cb : NULL, &w, err);
  if (rc) return rc;
  if (!receipt) { /* written to the kernel, then back */
    while (!mqr__client_written(bc->c) && !bc->lost) uv_run(&bc->loop, UV_RUN_ONCE);
    return bc->lost ? fail(bc->lost, NULL, bc, err, "send") : 0;
  }
  if ((rc = run_until(bc, &w.done, -1)) != 0 || (rc = w.status) != 0) return fail(rc, &w, bc, err, "send");
  if (r) *r = w.frame.u.receipt;
  return 0;
}

/* src copied to *p, NUL-ended, and *p moved past it: the view of the copy. */
static mqr_str_t copy_str(char **p, mqr_str_t src) {
  if (src.len) memcpy(*p, src.ptr, src.len);
  (*p)[src.len] = '\0';
  mqr_str_t out = mqr_str_n(*p, src.len);
  *p += src.len + 1;
  return out;
}

static void on_message(mqr_client_sub_t *s, const mqr_frame_message_t *m, void *arg) {
  (void)s;
  mqr_bclient_t *bc = arg;
  const mqr_str_t *keys = m->properties.keys;
  const mqr_value_t *vals = m->properties.values;
  size_t n = m->properties.count, bytes = sizeof(qmsg_t) + n * (sizeof(mqr_str_t) + sizeof(mqr_value_t)) +
                                          m->address.len + m->user_id.len + m->body.len + 3;
  for (size_t i = 0; i < n; i++)
    bytes +=
        keys[i].len + 2 + (vals[i].type == MQR_VALUE_STRING || vals[i].type == MQR_VALUE_BYTES ? vals[i].u.s.len : 0);
  qmsg_t *q = mqr_malloc(bytes);
  if (q == NULL) {
    bc->lost = MQR_ENOMEM;
    return;
  }
  /* One block: the struct, the property arrays, then the bytes, each string NUL-ended. */
  mqr_bclient_message_t *d = &q->m;
  mqr_value_t *pv = (mqr_value_t *)(q + 1);
  mqr_str_t *pk = (mqr_str_t *)(pv + n);
  char *p = (char *)(pk + n);
  *d = (mqr_bclient_message_t){.subscription = m->subscription,
                               .delivery = m->delivery,
                               .message_id = m->message_id,
                               .delivery_count = m->delivery_count,
                               .routing_type = mqr_proto_rt_to_routing(m->routing_type),
                               .durable = m->durable,
                               .priority = m->priority,
                               .timestamp = m->timestamp,
                               .expiration = m->expiration,
                               .property_keys = pk,
                               .property_values = pv,
                               .n_properties = n};
  d->address = copy_str(&p, m->address);
  d->user_id = copy_str(&p, m->user_id);
  for (size_t i = 0; i < n; i++) {
    pk[i] = copy_str(&p, keys[i]);
    pv[i] = vals[i];
    if (vals[i].type == MQR_VALUE_STRING || vals[i].type == MQR_VALUE_BYTES) pv[i].u.s = copy_str(&p, vals[i].u.s);
  }
  d->body = copy_str(&p, m->body);
  q->next = NULL;
  if (bc->tail)
    bc->tail->next = q;
  else
    bc->head = q;
  bc->tail = q;
}

/* A subscription's answer: the arg is the client's (on_message needs it), the wait is in it. */
static void sub_done(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  mqr_bclient_t *bc = arg;
  if (bc->sub_wait) done_cb(c, status, f, bc->sub_wait);
}

int mqr_bclient_subscribe(mqr_bclient_t *bc, mqr_str_t target, int routing_type, mqr_str_t queue, mqr_str_t selector,
                          uint32_t credit, int64_t *subscription, char *queue_name, size_t cap, mqr_error_t *err) {
  if (bc->lost) return fail(bc->lost, NULL, bc, err, "subscribe");
  wait_t w = {0};
  mqr_client_sub_t *s;
  bc->sub_wait = &w;
  int rc =
      mqr_client_subscribe(bc->c, target, routing_type, queue, selector, credit, on_message, sub_done, bc, &s, err);
  if (rc) {
    bc->sub_wait = NULL;
    return rc;
  }
  int64_t id = mqr__client_sub_id(s); /* before an answer can drop the subscription */
  rc = run_until(bc, &w.done, -1);
  bc->sub_wait = NULL;
  if (rc != 0 || (rc = w.status) != 0) return fail(rc, &w, bc, err, "subscribe");
  if (subscription) *subscription = id;
  if (queue_name && cap) snprintf(queue_name, cap, "%s", w.queue);
  return 0;
}

int mqr_bclient_receive(mqr_bclient_t *bc, int timeout_ms, mqr_bclient_message_t **out, mqr_error_t *err) {
  bool have = bc->head != NULL;
  if (!have) {
    /* Run until a message is queued: the queue's head is what we wait on. */
    bool timed_out = false;
    if (timeout_ms >= 0) {
      bc->timer.data = &timed_out;
      uv_timer_start(&bc->timer, timer_cb, (uint64_t)timeout_ms, 0);
    }
    while (bc->head == NULL && !timed_out && !bc->lost) uv_run(&bc->loop, UV_RUN_ONCE);
    uv_timer_stop(&bc->timer);
    if (bc->head == NULL) return fail(bc->lost ? bc->lost : MQR_ETIMEOUT, NULL, bc, err, "receive");
  }
  qmsg_t *q = bc->head;
  bc->head = q->next;
  if (bc->head == NULL) bc->tail = NULL;
  *out = &q->m;
  return 0;
}

void mqr_bclient_message_free(mqr_bclient_message_t *m) { mqr_free(m); /* the message is the block's start */ }

/* After queueing a frame: runs the loop until it is written (errors come back later). */
static int settle(mqr_bclient_t *bc) {
  while (!mqr__client_written(bc->c) && !bc->lost) uv_run(&bc->loop, UV_RUN_ONCE);
  return bc->lost;
}

int mqr_bclient_ack(mqr_bclient_t *bc, int64_t subscription, int64_t delivery, bool cumulative, mqr_error_t *err) {
  mqr_client_sub_t *s = mqr__client_find_sub(bc->c, subscription);
  if (s == NULL) return mqr_error_set(err, MQR_ENOSUB, "no subscription %lld", (long long)subscription);
  int rc = mqr_client_ack(s, delivery, cumulative);
  if (rc == 0) rc = settle(bc);
  return rc ? fail(rc, NULL, bc, err, "ack") : 0;
}

int mqr_bclient_ack_receipt(mqr_bclient_t *bc, int64_t subscription, int64_t delivery, bool cumulative,
                            mqr_error_t *err) {
  if (bc->lost) return fail(bc->lost, NULL, bc, err, "ack");
  mqr_client_sub_t *s = mqr__client_find_sub(bc->c, subscription);
  if (s == NULL) return mqr_error_set(err, MQR_ENOSUB, "no subscription %lld", (long long)subscription);
  wait_t w = {0};
  int rc = mqr_client_ack_receipt(s, delivery, cumulative, done_cb, &w, err);
  if (rc) return rc;
  if ((rc = run_until(bc, &w.done, -1)) != 0 || (rc = w.status) != 0) return fail(rc, &w, bc, err, "ack");
  return 0;
}

const char *mqr_bclient_redirect(const mqr_bclient_t *bc, int64_t *node) { return mqr_client_redirect(bc->c, node); }

int mqr_bclient_credit(mqr_bclient_t *bc, int64_t subscription, uint32_t n, mqr_error_t *err) {
  mqr_client_sub_t *s = mqr__client_find_sub(bc->c, subscription);
  if (s == NULL) return mqr_error_set(err, MQR_ENOSUB, "no subscription %lld", (long long)subscription);
  int rc = mqr_client_credit(s, n);
  if (rc == 0) rc = settle(bc);
  return rc ? fail(rc, NULL, bc, err, "credit") : 0;
}

int mqr_bclient_unsubscribe(mqr_bclient_t *bc, int64_t subscription, mqr_error_t *err) {
  mqr_client_sub_t *s = mqr__client_find_sub(bc->c, subscription);
  if (s == NULL) return mqr_error_set(err, MQR_ENOSUB, "no subscription %lld", (long long)subscription);
  int rc = mqr_client_unsubscribe(s);
  if (rc == 0) rc = settle(bc);
  return rc ? fail(rc, NULL, bc, err, "unsubscribe") : 0;
}

static void query_cb(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  wait_t *w = arg;
  done_cb(c, status, f, arg);
  if (status || f == NULL || f->type != MQR_FRAME_QUERY_RESULT) return;
  /* Copy it whole into one block: arrays, then strings. */
  const mqr_frame_query_result_t *r = &f->u.query_result;
  const mqr_frame_address_info_t *a = r->addresses.items;
  const mqr_frame_queue_info_t *q = r->queues.items;
  size_t bytes = sizeof *r + r->addresses.count * sizeof *a + r->queues.count * sizeof *q;
  for (size_t i = 0; i < r->addresses.count; i++) bytes += a[i].name.len + a[i].routing_types.len + 2;
  for (size_t i = 0; i < r->queues.count; i++) bytes += q[i].name.len + q[i].address.len + 2;
  mqr_frame_query_result_t *out = mqr_malloc(bytes);
  if (out == NULL) {
    w->status = MQR_ENOMEM;
    return;
  }
  *out = *r;
  mqr_frame_address_info_t *oa = (mqr_frame_address_info_t *)(out + 1);
  mqr_frame_queue_info_t *oq = (mqr_frame_queue_info_t *)(oa + r->addresses.count);
  char *p = (char *)(oq + r->queues.count);
  for (size_t i = 0; i < r->addresses.count; i++) {
    oa[i] = a[i];
    oa[i].name = copy_str(&p, a[i].name);
    oa[i].routing_types = copy_str(&p, a[i].routing_types);
  }
  for (size_t i = 0; i < r->queues.count; i++) {
    oq[i] = q[i];
    oq[i].name = copy_str(&p, q[i].name);
    oq[i].address = copy_str(&p, q[i].address);
  }
  out->addresses.items = oa;
  out->queues.items = oq;
  w->qr = out;
}

int mqr_bclient_query(mqr_bclient_t *bc, mqr_frame_query_result_t **out, mqr_error_t *err) {
  if (bc->lost) return fail(bc->lost, NULL, bc, err, "query");
  wait_t w = {0};
  int rc = mqr_client_query(bc->c, query_cb, &w, err);
  if (rc) return rc;
  if ((rc = run_until(bc, &w.done, -1)) != 0 || (rc = w.status) != 0) {
    mqr_free(w.qr);
    return fail(rc, &w, bc, err, "query");
  }
  *out = w.qr;
  return 0;
}

static void manage_cb(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  wait_t *w = arg;
  done_cb(c, status, f, arg);
  if (status || f == NULL || f->type != MQR_FRAME_MANAGE_RESULT) return;
  /* Copied whole into one block: the row maps, their keys and values, then strings. */
  const mqr_frame_manage_result_t *r = &f->u.manage_result;
  const mqr_avro_map_t *rows = r->rows.items;
  size_t bytes = sizeof *r + r->rows.count * sizeof *rows + r->text.len + 1;
  for (size_t i = 0; i < r->rows.count; i++) {
    const mqr_value_t *v = rows[i].values;
    bytes += rows[i].count * (sizeof(mqr_str_t) + sizeof(mqr_value_t));
    for (size_t k = 0; k < rows[i].count; k++) {
      bytes += rows[i].keys[k].len + 1;
      if (v[k].type == MQR_VALUE_STRING || v[k].type == MQR_VALUE_BYTES) bytes += v[k].u.s.len + 1;
    }
  }
  mqr_frame_manage_result_t *out = mqr_malloc(bytes);
  if (out == NULL) {
    w->status = MQR_ENOMEM;
    return;
  }
  *out = *r;
  mqr_avro_map_t *orows = (mqr_avro_map_t *)(out + 1);
  char *p = (char *)(orows + r->rows.count);
  for (size_t i = 0; i < r->rows.count; i++) {
    orows[i].count = rows[i].count;
    orows[i].keys = (mqr_str_t *)(void *)p;
    p += rows[i].count * sizeof(mqr_str_t);
    orows[i].values = p;
    p += rows[i].count * sizeof(mqr_value_t);
  }
  for (size_t i = 0; i < r->rows.count; i++) {
    const mqr_value_t *v = rows[i].values;
    mqr_value_t *ov = orows[i].values;
    for (size_t k = 0; k < rows[i].count; k++) {
      orows[i].keys[k] = copy_str(&p, rows[i].keys[k]);
      ov[k] = v[k];
      if (v[k].type == MQR_VALUE_STRING || v[k].type == MQR_VALUE_BYTES) ov[k].u.s = copy_str(&p, v[k].u.s);
    }
  }
  out->text = copy_str(&p, r->text);
  out->rows.items = orows;
  w->mr = out;
}

int mqr_bclient_manage(mqr_bclient_t *bc, mqr_str_t operation, const mqr_str_t *args, size_t n,
                       mqr_frame_manage_result_t **out, mqr_error_t *err) {
  *out = NULL;
  if (bc->lost) return fail(bc->lost, NULL, bc, err, "manage");
  wait_t w = {0};
  int rc = mqr_client_manage(bc->c, operation, args, n, manage_cb, &w, err);
  if (rc) return rc;
  if ((rc = run_until(bc, &w.done, -1)) != 0 || (rc = w.status) != 0) {
    mqr_free(w.mr);
    return fail(rc, &w, bc, err, "manage");
  }
  *out = w.mr;
  if (w.mr->code) return mqr_error_set(err, w.mr->code, "%.*s", (int)w.mr->text.len, w.mr->text.ptr);
  return 0;
}

void mqr_bclient_close(mqr_bclient_t *bc) {
  if (bc == NULL) return;
  if (bc->c) mqr_client_close(bc->c, NULL, NULL);
  uv_close((uv_handle_t *)&bc->timer, NULL);
  uv_run(&bc->loop, UV_RUN_DEFAULT);
  uv_loop_close(&bc->loop);
  while (bc->head) {
    qmsg_t *q = bc->head;
    bc->head = q->next;
    mqr_free(q);
  }
  mqr_free(bc);
}
