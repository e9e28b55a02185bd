/* Paging (address-full-policy PAGE) through the broker's journal, in-process: a backlog
 * far past max-size-bytes in bounded memory, read back in order across a restart. */
#include "durable_fx.h"

typedef struct {
  int n, order_errors;
  int next; /* the index the next body should have */
  uint64_t max_bytes;
  mqr_broker_t *b;
  bool ack;
  int limit; /* credit is given back until this many came (0: always) */
} pager_sink_t;

static void on_paged(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  pager_sink_t *s = arg;
  char body[32];
  snprintf(body, sizeof body, "%.*s", (int)m->body.len, m->body.ptr);
  if (atoi(body + 1) != s->next) s->order_errors++;
  s->next = atoi(body + 1) + 1;
  s->n++;
  mqr_broker_stats_t st;
  mqr_broker_stats(s->b, &st);
  if (st.bytes > s->max_bytes) s->max_bytes = st.bytes;
  if (s->ack) assert_int_equal(mqr_broker_ack(c, m->delivery, false), 0);
  if (s->limit == 0 || s->n < s->limit) mqr_broker_credit(c, 1);
}

static mqr_broker_consumer_t *page_drain(fx_t *f, const char *queue, pager_sink_t *s, int want) {
  mqr_broker_consumer_t *c;
  mqr_error_t err;
  s->b = f->b;
  if (mqr_broker_subscribe(f->b, mqr_str(queue), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1, on_paged, s, &c, NULL,
                           &err))
    fail_msg("%s", err.message);
  uint64_t t0 = uv_hrtime();
  while (s->n < want && uv_hrtime() - t0 < 20000000000ull) uv_run(&f->loop, UV_RUN_ONCE);
  return c;
}

/* PAGE: past max-size-bytes the address's messages go to page files, in order, and the
 * broker's memory stays bounded however many wait; they survive a restart (durable ones:
 * non-durable ones paged are dropped, as in memory); a consumer gets them in order, each
 * once; multicast queues each get theirs; the address stops paging when drained. */
static void test_paging(void **state) {
  (void)state;
  fresh_dir();
  fx_t f;
  fx_open(&f);
  static answers_t a;
  a = (answers_t){0};
  char body[160];
  enum { N = 20000 };
  /* pm first: the journal's highest id must not hide the pages' (their ids are higher). */
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "m%d", i);
    send_async(&f, &a, i, "pm", true, body);
  }
  for (int i = 0; i < N; i++) {
    snprintf(body, sizeof body, "m%d %0100d", i, 0);
    send_async(&f, &a, 100 + i, "big", true, body);
    if (i % 1000 == 999) wait_answers(&f, &a, 100 + i + 1);
  }
  send_async(&f, &a, N + 100, "big", false, "transient"); /* paged, and not kept */
  wait_answers(&f, &a, N + 101);
  assert_int_equal(a.ok, N + 101);
  assert_int_equal(a.order_errors, 0);
  mqr_broker_stats_t st;
  mqr_broker_stats(f.b, &st);
  assert_true(st.bytes < 64 * 1024); /* 2 MB sent, a few KiB held */
  assert_int_equal(depth(&f, "big"), N + 1);
  uint64_t paged = bytes_of(&f, "big"); /* the persistent size counts them, on disk or not */
  assert_in_range(paged, (uint64_t)(N + 1) * 106, (uint64_t)(N + 1) * 400);
  static pager_sink_t ps;
  ps = (pager_sink_t){.ack = true, .limit = 5000};
  page_drain(&f, "big", &ps, 5000); /* some, acknowledged */
  assert_int_equal(ps.n, 5000);
  int taken = ps.n;
  assert_int_equal(ps.order_errors, 0);
  assert_true(ps.max_bytes < 512 * 1024);
  fx_close(&f);

  /* After a restart, still paging: more sends go to the pages behind the rest (their ids
   * after every paged one), some are read back, and after another restart the rest come
   * in order from where the acknowledged ones ended, each once. */
  fx_open(&f);
  mqr_broker_stats(f.b, &st);
  assert_true(st.bytes < 512 * 1024);
  assert_int_equal(depth(&f, "big"), N - taken);
  /* (the transient one is gone; the others each take about what they took before) */
  uint64_t each = paged / (N + 1);
  assert_in_range(bytes_of(&f, "big"), each * (N - taken) * 97 / 100, each * (N - taken) * 103 / 100);
  a = (answers_t){0};
  for (int i = 0; i < 100; i++) {
    snprintf(body, sizeof body, "m%d %0100d", N + i, 0);
    send_async(&f, &a, i, "big", true, body);
  }
  wait_answers(&f, &a, 100);
  assert_int_equal(a.ok, 100);
  ps = (pager_sink_t){.ack = true, .next = taken, .limit = 3000};
  page_drain(&f, "big", &ps, 3000);
  assert_int_equal(ps.n, 3000);
  assert_int_equal(ps.order_errors, 0);
  taken += 3000;
  fx_close(&f);
  fx_open(&f);
  assert_int_equal(depth(&f, "big"), N + 100 - taken);
  ps = (pager_sink_t){.ack = true, .next = taken};
  mqr_broker_consumer_t *k = page_drain(&f, "big", &ps, N + 100 - taken);
  for (int i = 0; i < 20; i++) uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(ps.n, N + 100 - taken); /* not the transient one */
  assert_int_equal(ps.order_errors, 0);
  assert_int_equal(depth(&f, "big"), 0);
  assert_int_equal(bytes_of(&f, "big"), 0);
  mqr_broker_unsubscribe(k);
  static pager_sink_t pa, pb;
  pa = (pager_sink_t){.ack = true};
  pb = (pager_sink_t){.ack = true};
  page_drain(&f, "pm.a", &pa, 100);
  page_drain(&f, "pm.b", &pb, 100);
  assert_int_equal(pa.n, 100);
  assert_int_equal(pb.n, 100);
  assert_int_equal(pa.order_errors + pb.order_errors, 0);
  /* Drained: new sends go straight to the queue again. */
  a = (answers_t){0};
  send_async(&f, &a, 0, "big", true, "m0");
  wait_answers(&f, &a, 1);
  mqr_broker_stats(f.b, &st);
  fx_close(&f);
  fx_open(&f);
  assert_int_equal(depth(&f, "big"), 1);
  assert_int_equal(depth(&f, "pm.a"), 0);
  fx_close(&f);
  /* The page files read back were released: a file or two per address is left. */
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls %s/paging/*/*.jrn | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int files = -1;
  assert_int_equal(fscanf(p, "%d", &files), 1);
  pclose(p);
  if (files > 6) fail_msg("%d page files left", files);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paging),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 || getenv("MQR_KEEP") == NULL) fresh_dir();
  return rc;
}
