/* security.check: the send path's authorization check (broker/access.c) for a client
 * whose roles the security-settings name, against a config of `settings` entries: the
 * address found, the governing entry read from the address's account (cached with the
 * settings' generation), the principal's roles ANDed with it. Its budget is 20 ns, 0
 * B/op. cached=0 drops the address's cached entry before each check, so the figure shows
 * what the cache saves: a walk over every entry (most specific first) with a wildcard
 * match each.
 *
 * dosend.checked: the whole send path (mqr__do_send, as a head calls it) of a 16-byte
 * message to a queue, checked=1 as that client, checked=0 as the broker's own (not
 * checked): the difference is what security costs a send.
 *
 * security.auth: one authentication of a user of a users file (an argon2id hash at
 * libsodium's interactive cost, as `mqr user add` makes it) with the right password, as a
 * head asks it at CONNECT, until the principal is in hand. cached=1: the verification is
 * in the authentication cache (a keyed BLAKE2b of name and password, looked up on the
 * loop); cached=0: authentication-cache-size 0, so each one is an argon2id verification
 * on libuv's thread pool and its answer back on the loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../broker/broker_int.h"
#include "bench.h"
#include "mqr/security.h"

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  mqr__principal_t *who;
  mqr__send_t send;
  mqr_tail_t tail;
  mqr_queue_t *q;
  mqr__acct_t *acct;
  bool cached;
} st_t;

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  uv_loop_init(&s->loop);
  long settings = mqr_bench_param_long(c, "settings");
  s->cached = mqr_bench_param_long(c, "cached") != 0;
  /* Entries for other addresses, and the one that governs orders.eu (orders.#), with the
   * catch-all "#" last in precedence. */
  size_t cap = 4096 + (size_t)settings * 160;
  char *yaml = malloc(cap);
  int n = snprintf(yaml, cap,
                   "security:\n  allow-anonymous: true\n  anonymous-roles: [producers]\n  security-settings:\n"
                   "    'orders.#': {send: [producers, admin]}\n    '#': {send: [admin]}\n");
  for (long i = 2; i < settings; i++)
    n += snprintf(yaml + n, cap - (size_t)n, "    'app%ld.*.events': {send: [role%ld], consume: [role%ld]}\n", i,
                  i % 40, i % 40);
  n += snprintf(yaml + n, cap - (size_t)n, "addresses:\n  orders.eu: {anycast: [orders.eu]}\n");
  int rc = mqr_config_load_string("security.yaml", yaml, (size_t)n, &s->cfg, NULL);
  free(yaml);
  if (rc) return mqr_bench_fail(c, "config");
  mqr_error_t err;
  mqr_broker_options_t opt = {.config = s->cfg};
  if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  mqr__auth_t *pending;
  if (mqr__authenticate(s->b, MQR_STR(""), MQR_STR(""), "bench", NULL, NULL, &s->who, &pending) != 0)
    return mqr_bench_fail(c, "the anonymous principal");
  s->q = mqr_router_find_queue(mqr_broker_router(s->b), MQR_STR("orders.eu"));
  s->acct = mqr__acct_of(s->b, mqr_queue_address(s->q));
  mqr_broker_message_t m = {.address = MQR_STR("orders.eu"),
                            .routing_type = MQR_ANYCAST,
                            .priority = MQR_PRIORITY_DEFAULT,
                            .body = MQR_STR("0123456789abcdef")};
  if (mqr__send_from_message(&m, &s->tail, &s->send, &err) != 0) return mqr_bench_fail(c, "send: %s", err.message);
  s->send.who = s->who;
  if (mqr_bench_param_long(c, "checked") == 0) s->send.who = NULL;
  if (mqr__access_send(s->b, &s->send, s->send.address, &err) != 0)
    return mqr_bench_fail(c, "the check refuses: %s", err.message);
  return 0;
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  mqr__principal_release(s->who);
  if (s->b) mqr_broker_close(s->b, NULL, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mqr_config_destroy(s->cfg);
  free(s);
}

__attribute__((noinline)) static int check(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (!s->cached) s->acct->access_gen = 0; /* looked up again */
    if (mqr__access_send(s->b, &s->send, s->send.address, NULL) != 0) return mqr_bench_fail(c, "refused");
  }
  return 0;
}

__attribute__((noinline)) static int secure_send(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    if (mqr__do_send(s->b, &s->send, NULL, NULL, NULL) != 0) return mqr_bench_fail(c, "send");
    mqr_broker_purge(s->b, s->q);
  }
  return 0;
}

static const mqr_bench_def_t checks = {
    "security.check", "settings=2,100;cached=1,0;checked=1", "avgt", setup, teardown, NULL, NULL, check, NULL};
MQR_BENCH_REGISTER(checks)

static const mqr_bench_def_t sends = {
    "dosend.checked", "settings=100;cached=1;checked=0,1", "avgt", setup, teardown, NULL, NULL, secure_send, NULL};
MQR_BENCH_REGISTER(sends)

/* ---- security.auth ---------------------------------------------------------------------- */

typedef struct {
  uv_loop_t loop;
  mqr_config_t *cfg;
  mqr_broker_t *b;
  char users[64];
  int answered, status;
} auth_st_t;

static void auth_done(void *ctx, int status, mqr__principal_t *who) {
  auth_st_t *s = ctx;
  s->answered++;
  s->status = status;
  mqr__principal_release(who);
}

static int auth_setup(mqr_bench_ctx_t *c) {
  auth_st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  uv_loop_init(&s->loop);
  snprintf(s->users, sizeof s->users, "/tmp/mqr-bench-users-%d", (int)getpid());
  mqr_error_t err;
  unlink(s->users);
  if (mqr_users_file_set(s->users, MQR_STR("bench"), "producers", "secret", 6, true, &err) != 0)
    return mqr_bench_fail(c, "users file: %s", err.message);
  char yaml[512];
  int n = snprintf(yaml, sizeof yaml, "security:\n  users-file: %s\n  authentication-cache-size: %d\n", s->users,
                   mqr_bench_param_long(c, "cached") ? 1000 : 0);
  if (mqr_config_load_string("auth.yaml", yaml, (size_t)n, &s->cfg, NULL) != 0) return mqr_bench_fail(c, "config");
  mqr_broker_options_t opt = {.config = s->cfg};
  if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "broker: %s", err.message);
  return 0;
}

static void auth_teardown(mqr_bench_ctx_t *c) {
  auth_st_t *s = mqr_bench_state(c);
  if (s->b) mqr_broker_close(s->b, NULL, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mqr_config_destroy(s->cfg);
  unlink(s->users);
  free(s);
}

__attribute__((noinline)) static int authenticate(mqr_bench_ctx_t *c, uint64_t ops) {
  auth_st_t *s = mqr_bench_state(c);
  for (uint64_t i = 0; i < ops; i++) {
    mqr__principal_t *who = NULL;
    mqr__auth_t *pending = NULL;
    int rc = mqr__authenticate(s->b, MQR_STR("bench"), MQR_STR("secret"), "bench", auth_done, s, &who, &pending);
    if (rc == MQR__PENDING) {
      int want = s->answered + 1;
      while (s->answered < want) uv_run(&s->loop, UV_RUN_ONCE);
      rc = s->status;
    } else {
      mqr__principal_release(who);
    }
    if (rc != 0) return mqr_bench_fail(c, "refused (%d)", rc);
  }
  return 0;
}

static const mqr_bench_def_t auths = {"security.auth", "cached=1,0", "avgt", auth_setup, auth_teardown, NULL, NULL,
                                      authenticate,    NULL};
MQR_BENCH_REGISTER(auths)
