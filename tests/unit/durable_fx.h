/* The durable broker's test fixture (test_broker_durable.c, test_broker_paging.c,
 * test_power_loss.c): a broker on a config with persistence in a fresh directory,
 * asynchronous sends whose answers are checked for their order, queues drained into a
 * sink. Header-only: each test is one executable. */
#ifndef MQR_TESTS_DURABLE_FX_H
#define MQR_TESTS_DURABLE_FX_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mqr/broker.h"
#include "test_dir.h"
#include "testutil.h"

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

static const char *extra_persistence __attribute__((unused)) = "";

static inline void fx_config(fx_t *f) {
  char yaml[2048];
  int n = snprintf(yaml, sizeof yaml,
                   "persistence:\n"
                   "  directory: %s\n"
                   "  journal-file-size: 65536\n"
                   "%s"
                   "address-settings:\n"
                   /* Redelivered without end: these tests are about what the journal
                      keeps, not max-delivery-attempts (test_broker_deadletter). */
                   "  '#': {auto-create-addresses: true, auto-create-queues: true, max-delivery-attempts: -1}\n"
                   "  'big': {max-size-bytes: 10KiB, address-full-policy: PAGE}\n"
                   "  'pm': {max-size-bytes: 10KiB, address-full-policy: PAGE}\n"
                   "  'slow': {redelivery-delay: 60000}\n"
                   "addresses:\n"
                   "  q: {anycast: [q]}\n"
                   "  hold: {anycast: [hold]}\n"
                   "  slow: {anycast: [slow]}\n"
                   "  big: {anycast: [big]}\n"
                   "  pm: {multicast: [pm.a, pm.b]}\n"
                   "  t: {multicast: [t.a, t.b]}\n"
                   "  v:\n"
                   "    anycast:\n"
                   "      v: {durable: false}\n",
                   dir, extra_persistence);
  mqr_error_t items[4];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 4);
  if (mqr_config_load_string("t.yaml", yaml, (size_t)n, &f->cfg, &d) != 0) fail_msg("%s", items[0].message);
}

/* The broker on f's config (made first). */
static inline int fx_create(fx_t *f, mqr_error_t *err) {
  uv_loop_init(&f->loop);
  mqr_broker_options_t opt = {.config = f->cfg};
  int rc = mqr_broker_create(&f->loop, &opt, &f->b, err);
  if (rc) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
  }
  return rc;
}

static inline void fx_open(fx_t *f) {
  mqr_error_t err;
  fx_config(f);
  if (fx_create(f, &err) != 0) fail_msg("%s", err.message);
}

static inline void fx_stop(fx_t *f) {
  mqr_broker_close(f->b, NULL, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

static inline void fx_close(fx_t *f) {
  fx_stop(f);
  mqr_config_destroy(f->cfg);
}

/* ---- answers ------------------------------------------------------------------------------ */

typedef struct {
  int n, ok, failed, order_errors;
  int next; /* the index the next answer should have */
} answers_t;

typedef struct {
  answers_t *a;
  int index;
} ticket_t;

static ticket_t tickets[8192] __attribute__((unused));

static inline void on_sent(void *arg, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  ticket_t *t = arg;
  answers_t *a = t->a;
  if (t->index != a->next) a->order_errors++;
  a->next = t->index + 1;
  a->n++;
  if (status == 0) {
    a->ok++;
    assert_true(r->message_id > 0);
  } else {
    a->failed++;
    assert_non_null(err);
  }
}

static inline void send_async(fx_t *f, answers_t *a, int index, const char *address, bool durable, const char *body) {
  /* auto.*: made by the send, ANYCAST (an address made for a MULTICAST send has no queue) */
  int rt = strncmp(address, "auto.", 5) == 0 ? MQR_ANYCAST : MQR_ROUTING_NONE;
  mqr_broker_message_t m = {mqr_str(address), rt,   durable, MQR_STR(""), MQR_PRIORITY_DEFAULT, 0, 0,
                            {"", 0},          NULL, NULL,    0,           mqr_str(body)};
  tickets[index % 8192] = (ticket_t){a, index};
  mqr_broker_send_async(f->b, &m, on_sent, &tickets[index % 8192]);
}

static inline void wait_answers(fx_t *f, answers_t *a, int n) {
  while (a->n < n) uv_run(&f->loop, UV_RUN_ONCE);
}

/* ---- draining ------------------------------------------------------------------------------ */

typedef struct {
  char bodies[4096][16];
  int32_t counts[4096];
  int n;
  bool ack;
} sink_t;

static inline void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  sink_t *s = arg;
  if (s->n < 4096) {
    snprintf(s->bodies[s->n], sizeof s->bodies[0], "%.*s", (int)m->body.len, m->body.ptr);
    s->counts[s->n] = m->delivery_count;
  }
  s->n++;
  if (s->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
}

/* Takes up to credit messages of queue into s. */
static inline mqr_broker_consumer_t *drain(fx_t *f, const char *queue, uint32_t credit, sink_t *s) {
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  if (mqr_broker_subscribe(f->b, mqr_str(queue), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), credit, on_msg, s, &c,
                           NULL, &err))
    fail_msg("%s", err.message);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  return c;
}

static inline uint64_t depth(fx_t *f, const char *queue) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(queue), &st), 0);
  return st.depth + st.in_flight;
}

/* The stored bytes of queue's messages (Artemis's persistent size). */
static inline uint64_t bytes_of(fx_t *f, const char *queue) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(queue), &st), 0);
  return st.bytes;
}

/* Messages of queue waiting out a redelivery delay. */
static inline uint64_t held_of(fx_t *f, const char *queue) {
  mqr_broker_queue_stats_t st;
  assert_int_equal(mqr_broker_queue_stats(f->b, mqr_str(queue), &st), 0);
  return st.held;
}

#endif
