/* A broker on a loop of its own, built from a YAML config, for the in-process broker
 * tests; header-only, like testutil.h. The config text has one %s, where a persistence
 * section (the test's scratch directory) goes when the broker is durable. */
#ifndef MQR_TEST_BROKER_FX_H
#define MQR_TEST_BROKER_FX_H

#include "mqr/broker.h"
#include "test_dir.h"

typedef struct {
  mqr_broker_t *b;
  uv_loop_t loop;
  mqr_config_t *cfg;
} fx_t;

static inline void fx_open_yaml(fx_t *f, const char *yaml_fmt, bool durable) {
  char persistence[400] = "", yaml[8192];
  if (durable) snprintf(persistence, sizeof persistence, "persistence:\n  directory: %s\n", dir);
  int n = snprintf(yaml, sizeof yaml, yaml_fmt, persistence);
  assert_true(n > 0 && (size_t)n < sizeof yaml);
  uv_loop_init(&f->loop);
  mqr_error_t items[4];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 4);
  if (mqr_config_load_string("fx.yaml", yaml, (size_t)n, &f->cfg, &d) != 0) fail_msg("config: %s", items[0].message);
  mqr_broker_options_t opt = {.config = f->cfg};
  mqr_error_t err;
  if (mqr_broker_create(&f->loop, &opt, &f->b, &err) != 0) fail_msg("%s", err.message);
}

static inline void fx_close(fx_t *f) {
  mqr_broker_close(f->b, NULL, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  mqr_config_destroy(f->cfg);
}

/* Runs the loop a while: what the journal writes lands (a durable send is enqueued once
 * synced). */
static inline void settle(fx_t *f) {
  for (int i = 0; i < 50; i++) uv_run(&f->loop, UV_RUN_NOWAIT), usleep(1000);
}

#endif
