/* dosend.kinds: the send path into queues of a kind, in-process, as dosend.inproc runs
 * it, with keys and groups rotating over 16 values.
 *
 *   kind=lastvalue  a last-value queue: each send takes the place of the waiting message
 *                   with its key (the older one acknowledged), so the queue holds 16
 *   kind=group      a grouped queue with two consumers that acknowledge (and give the
 *                   credit back) as they are given each message: each send is routed, dispatched to its group's
 *                   consumer and acknowledged
 *
 * B/op says whether a steady load of either reaches the allocator (the "0 B/op"
 * for last-value and grouped sends). */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "mqr/broker.h"

static const char yaml[] = "addresses:\n"
                           "  lv: {anycast: {lv: {last-value-key: sym}}}\n"
                           "  grp: {anycast: [grp]}\n";

enum { KEYS = 16 };

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  mqr_broker_consumer_t *c[2];
  bool group;
  mqr_str_t key;
  mqr_value_t values[KEYS];
  char text[KEYS][8];
  mqr_broker_message_t msg;
  uint64_t at, got;
} st_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  st_t *s = arg;
  s->got++;
  mqr_broker_ack(c, m->delivery, false);
  mqr_broker_credit(c, 1); /* the credit it used, back */
}

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  uv_loop_init(&s->loop);
  mqr_error_t err;
  if (mqr_config_load_string("kinds.yaml", yaml, sizeof yaml - 1, &s->cfg, NULL) != 0)
    return mqr_bench_fail(c, "config");
  mqr_broker_options_t opt = {.config = s->cfg};
  if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  s->group = strcmp(mqr_bench_param(c, "kind"), "group") == 0;
  for (int i = 0; i < KEYS; i++)
    s->values[i] = mqr_value_string(mqr_str_n(s->text[i], (size_t)snprintf(s->text[i], 8, "k%d", i)));
  s->key = s->group ? MQR_STR(MQR_PROP_GROUP) : MQR_STR("sym");
  s->msg = (mqr_broker_message_t){.address = s->group ? MQR_STR("grp") : MQR_STR("lv"),
                                  .routing_type = MQR_ANYCAST,
                                  .priority = MQR_PRIORITY_DEFAULT,
                                  .property_keys = &s->key,
                                  .property_values = &s->values[0],
                                  .n_properties = 1,
                                  .body = MQR_STR("0123456789abcdef")};
  if (s->group)
    for (int i = 0; i < 2; i++)
      if (mqr_broker_subscribe(s->b, MQR_STR("grp"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1000, on_msg, s,
                               &s->c[i], NULL, &err) != 0)
        return mqr_bench_fail(c, "subscribe: %s", err.message);
  for (int i = 0; i < 20000; i++) { /* warm: every key and group seen, the pools full */
    s->msg.property_values = &s->values[i % KEYS];
    if (mqr_broker_send(s->b, &s->msg, NULL, &err) != 0) return mqr_bench_fail(c, "send: %s", err.message);
  }
  if (s->group && s->got != 20000) return mqr_bench_fail(c, "%llu of 20000 delivered", (unsigned long long)s->got);
  mqr_broker_queue_stats_t st;
  if (!s->group && (mqr_broker_queue_stats(s->b, MQR_STR("lv"), &st) != 0 || st.depth != KEYS))
    return mqr_bench_fail(c, "the last-value queue holds %llu, not %d", (unsigned long long)st.depth, KEYS);
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  for (int i = 0; i < 2; i++)
    if (s->c[i]) mqr_broker_unsubscribe(s->c[i]);
  if (s->b) mqr_broker_close(s->b, NULL, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mqr_config_destroy(s->cfg);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    s->msg.property_values = &s->values[s->at++ % KEYS];
    if (mqr_broker_send(s->b, &s->msg, NULL, NULL) != 0) return mqr_bench_fail(c, "send");
  }
  return 0;
}

static const mqr_bench_def_t kinds = {
    "dosend.kinds", "kind=lastvalue,group", "avgt", setup, teardown, NULL, NULL, run, NULL};
MQR_BENCH_REGISTER(kinds)
