/* dosend.inproc: the broker's send path in-process, as mqr_broker_send runs it: route
 * (lookup, routing-type test, the precomputed bindings), store the message once (the
 * stored Message envelope: id, address, routing type, properties, a 16-byte body), and
 * enqueue an entry on each target queue. queues=1: an ANYCAST address with one queue;
 * queues=10: a MULTICAST address with ten. filtered=1: each of those queues has a filter
 * the message matches (color = 'red' AND weight > 2.5), so the route reads the message's
 * values once and evaluates every filter.
 *
 * So that the run is in steady state (as a broker whose consumers keep up), each
 * operation also purges what it enqueued (mqr_broker_purge): the pools then recycle every
 * message and entry, and B/op says whether anything reached the allocator. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "mqr/broker.h"

static const char yaml[] = "addresses:\n"
                           "  one: {anycast: [one]}\n"
                           "  ten: {multicast: [t0, t1, t2, t3, t4, t5, t6, t7, t8, t9]}\n"
                           "  fone: {anycast: {f: {filter: \"color = 'red' AND weight > 2.5\"}}}\n"
                           "  ften:\n"
                           "    multicast:\n"
                           "      f0: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f1: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f2: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f3: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f4: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f5: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f6: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f7: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f8: {filter: \"color = 'red' AND weight > 2.5\"}\n"
                           "      f9: {filter: \"color = 'red' AND weight > 2.5\"}\n";

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  mqr_queue_t *qs[10];
  int n;
  mqr_broker_message_t msg;
} st_t;

/* The same three properties in both runs: the unfiltered one carries what the filters
 * read, so the two differ only in the filtering. */
static const mqr_str_t keys[] = {MQR_STR("content-type"), MQR_STR("color"), MQR_STR("weight")};
static const mqr_value_t values[] = {{MQR_VALUE_STRING, {.s = MQR_STR("text/plain")}},
                                     {MQR_VALUE_STRING, {.s = MQR_STR("red")}},
                                     {MQR_VALUE_DOUBLE, {.d = 3.5}}};

static inline void drain(st_t *s) {
  for (int k = 0; k < s->n; k++) mqr_broker_purge(s->b, s->qs[k]);
}

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  uv_loop_init(&s->loop);
  mqr_error_t err;
  if (mqr_config_load_string("dosend.yaml", yaml, sizeof yaml - 1, &s->cfg, NULL) != 0)
    return mqr_bench_fail(c, "config");
  mqr_broker_options_t opt = {.config = s->cfg};
  if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  long queues = mqr_bench_param_long(c, "queues");
  bool multi = queues == 10, filtered = mqr_bench_param_long(c, "filtered") == 1;
  static const mqr_str_t addrs[2][2] = {{MQR_STR("one"), MQR_STR("ten")}, {MQR_STR("fone"), MQR_STR("ften")}};
  s->msg = (mqr_broker_message_t){.address = addrs[filtered][multi],
                                  .routing_type = multi ? MQR_MULTICAST : MQR_ANYCAST,
                                  .priority = MQR_PRIORITY_DEFAULT,
                                  .property_keys = keys,
                                  .property_values = values,
                                  .n_properties = 3,
                                  .body = MQR_STR("0123456789abcdef")};
  mqr_broker_receipt_t r;
  if (mqr_broker_send(s->b, &s->msg, &r, &err) != 0 || (long)r.queues != queues)
    return mqr_bench_fail(c, "the first send: %s (%u queues)", err.message, r.queues);
  for (int k = 0; k < queues; k++) {
    char name[8];
    if (multi)
      snprintf(name, sizeof name, "%c%d", filtered ? 'f' : 't', k);
    else
      snprintf(name, sizeof name, "%s", filtered ? "f" : "one");
    mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(s->b), mqr_str(name));
    if ((s->qs[k] = q) == NULL) return mqr_bench_fail(c, "queue %d", k);
  }
  s->n = (int)queues;
  drain(s);
  for (int i = 0; i < 10000; i++) { /* warm the pools */
    mqr_broker_send(s->b, &s->msg, NULL, NULL);
    drain(s);
  }
  mqr_tail_t t = {s->msg.priority, 0, 0, MQR_STR(""), keys, values, 3, s->msg.body};
  size_t tail = mqr_message_tail_size(&t);
  mqr_bench_aux(c, "size.stored", (double)mqr_message_stored_size(1000000, s->msg.address, tail), "B");
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  if (s->b) mqr_broker_close(s->b, NULL, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mqr_config_destroy(s->cfg);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (mqr_broker_send(s->b, &s->msg, NULL, NULL) != 0) return mqr_bench_fail(c, "send");
    drain(s);
  }
  return 0;
}

static const mqr_bench_def_t inproc = {
    "dosend.inproc", "queues=1,10;filtered=0,1", "avgt", setup, teardown, NULL, NULL, run, NULL};
MQR_BENCH_REGISTER(inproc)
