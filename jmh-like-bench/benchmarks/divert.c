/* dosend.divert: what a divert costs a send, in-process, as dosend.inproc runs it. src and
 * dst each have one ANYCAST queue with a consumer that acknowledges (and gives the credit
 * back) as it is given each message, so the queues stay empty.
 *
 *   mode=plain   a send to src
 *   mode=twice   a send to src and a send to dst: the two messages a producer would send
 *                without a divert, the second with the three origin properties a divert's
 *                copy carries (so that both deliver the same bytes)
 *   mode=divert  a send to src, whose non-exclusive divert forwards a copy to dst
 *
 * divert against twice says what the copy costs beside sending it again (its origin
 * properties are written into it, the divert list is read from the address, no lookup);
 * B/op says whether a diverted send reaches the allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mqr/broker.h"

static const char yaml[] = "addresses:\n"
                           "  src: {anycast: [src]}\n"
                           "  dst: {anycast: [dst]}\n"
                           "  dsrc: {anycast: [dsrc]}\n"
                           "diverts:\n"
                           "  copy: {address: dsrc, forwarding-address: dst}\n";

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  mqr_broker_consumer_t *c[3];
  int mode; /* 0 plain, 1 twice, 2 divert */
  mqr_str_t keys[6];
  mqr_value_t values[6];
  mqr_broker_message_t msg, second;
  uint64_t got;
} st_t;

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  st_t *s = arg;
  s->got++;
  mqr_broker_ack(c, m->delivery, false);
  mqr_broker_credit(c, 1);
}

static int send1(st_t *s) {
  if (mqr_broker_send(s->b, &s->msg, NULL, NULL) != 0) return -1;
  if (s->mode == 1 && mqr_broker_send(s->b, &s->second, NULL, NULL) != 0) return -1;
  return 0;
}

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  uv_loop_init(&s->loop);
  mqr_error_t err;
  if (mqr_config_load_string("divert.yaml", yaml, sizeof yaml - 1, &s->cfg, NULL) != 0)
    return mqr_bench_fail(c, "config");
  mqr_broker_options_t opt = {.config = s->cfg};
  if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  const char *mode = mqr_bench_param(c, "mode");
  s->mode = strcmp(mode, "twice") == 0 ? 1 : strcmp(mode, "divert") == 0 ? 2 : 0;
  const char *queues[3] = {"src", "dst", "dsrc"};
  for (int i = 0; i < 3; i++)
    if (mqr_broker_subscribe(s->b, mqr_str(queues[i]), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1000, on_msg, s,
                             &s->c[i], NULL, &err) != 0)
      return mqr_bench_fail(c, "subscribe: %s", err.message);
  s->keys[0] = MQR_STR("color"), s->values[0] = mqr_value_string(MQR_STR("red"));
  s->keys[1] = MQR_STR("weight"), s->values[1] = mqr_value_double(3.5);
  s->keys[2] = MQR_STR("region"), s->values[2] = mqr_value_string(MQR_STR("eu"));
  s->msg = (mqr_broker_message_t){.address = s->mode == 2 ? MQR_STR("dsrc") : MQR_STR("src"),
                                  .routing_type = MQR_ANYCAST,
                                  .priority = MQR_PRIORITY_DEFAULT,
                                  .property_keys = s->keys,
                                  .property_values = s->values,
                                  .n_properties = 3,
                                  .body = MQR_STR("0123456789abcdef")};
  s->second = s->msg;
  s->second.address = MQR_STR("dst");
  s->keys[3] = MQR_STR("_AMQ_ORIG_ADDRESS"), s->values[3] = mqr_value_string(MQR_STR("src"));
  s->keys[4] = MQR_STR("_AMQ_ORIG_MESSAGE_ID"), s->values[4] = mqr_value_long(123456);
  s->keys[5] = MQR_STR("_AMQ_ORIG_QUEUE"), s->values[5] = mqr_value_string(MQR_STR("copy"));
  s->second.n_properties = 6;
  for (int i = 0; i < 20000; i++)
    if (send1(s) != 0) return mqr_bench_fail(c, "send");
  uint64_t want = s->mode ? 40000 : 20000;
  if (s->got != want)
    return mqr_bench_fail(c, "%llu of %llu delivered", (unsigned long long)s->got, (unsigned long long)want);
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  for (int i = 0; i < 3; i++)
    if (s->c[i]) mqr_broker_unsubscribe(s->c[i]);
  if (s->b) mqr_broker_close(s->b, NULL, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mqr_config_destroy(s->cfg);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++)
    if (send1(s) != 0) return mqr_bench_fail(c, "send");
  return 0;
}

static const mqr_bench_def_t divert = {
    "dosend.divert", "mode=plain,twice,divert", "avgt", setup, teardown, NULL, NULL, run, NULL};
MQR_BENCH_REGISTER(divert)
