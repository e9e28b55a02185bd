/* teardown.delete: the loop's longest stall when a queue of `queued` waiting messages is
 * deleted (mqr_broker_delete_queue, as a session's end or management deletes one),
 * in-process, one deletion an iteration (single shot).
 *
 * The score is the deletion's own call: the journal's records and the first slice of the
 * releases. The rest is released a slice at a time in the loop's idle phase (broker/
 * grave.c); the longest of those passes is reported as slice_us. Before the graveyard a
 * deletion of 100,000 held the loop for all of them (20 ms and more on this machine
 * class; 345 ms for 30,000 on a slow one). */
#include <stdlib.h>
#include <time.h>

#include "bench_inproc.h"

static const char yaml[] = "address-settings:\n  '#': {auto-create-queues: true}\n";

typedef struct {
  bench_inproc_t x;
  mqr_broker_t *b;
  long queued;
} st_t;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fill(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  mqr_error_t err;
  mqr_broker_message_t m = {.address = MQR_STR("t"),
                            .routing_type = MQR_ANYCAST,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = MQR_STR("0123456789abcdef0123456789abcdef")};
  for (long i = 0; i < s->queued; i++)
    if (mqr_broker_send(s->b, &m, NULL, &err) != 0) return mqr_bench_fail(c, "send: %s", err.message);
  return 0;
}

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  if (bench_inproc_open(c, &s->x, yaml, 0) != 0) return -1;
  s->b = s->x.b;
  s->queued = mqr_bench_param_long(c, "queued");
  return fill(c);
}

static int setup_iteration(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  mqr_broker_queue_stats_t st;
  if (mqr_broker_queue_stats(s->b, MQR_STR("t"), &st) == 0) return 0; /* (the first is filled already) */
  return fill(c);
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  bench_inproc_close(&s->x);
  free(s);
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    mqr_error_t err;
    if (mqr_broker_queue_stats(s->b, MQR_STR("t"), &(mqr_broker_queue_stats_t){0}) != 0 && fill(c) != 0) return -1;
    if (mqr_broker_delete_queue(s->b, MQR_STR("t"), &err) != 0) return mqr_bench_fail(c, "delete: %s", err.message);
  }
  return 0;
}

/* The releases left, pass by pass, outside the score: the longest pass is reported. */
static void teardown_iteration(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  double longest = 0;
  mqr_broker_stats_t st;
  for (mqr_broker_stats(s->b, &st); st.messages; mqr_broker_stats(s->b, &st)) {
    double t0 = now_us();
    uv_run(&s->x.loop, UV_RUN_NOWAIT);
    double t = now_us() - t0;
    if (t > longest) longest = t;
  }
  mqr_bench_aux(c, "slice_us", longest, "us");
}

static const mqr_bench_def_t teardown_delete = {"teardown.delete", "queued=100000",    "ss", setup, teardown,
                                                setup_iteration,   teardown_iteration, run,  NULL};
MQR_BENCH_REGISTER(teardown_delete)
