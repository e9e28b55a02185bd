/* libFuzzer: the broker in-process, driven by a script of 3-byte steps: sends (plain, to
 * address::queue, to a wildcard, with duplicate ids, with up to 640 properties, to full
 * addresses of each policy, to exclusive, ring, last-value, grouped and non-destructive
 * queues, through diverts), subscriptions (to queues, addresses of either type, named and made-up
 * subscription queues, with and without selectors), acknowledgements (single, cumulative,
 * of deliveries that are not outstanding), credit and unsubscribes (what comes back twice
 * goes to the dead-letter address; on q it waits a redelivery delay first), with
 * allocations failing where the script says. A consumer's callback may acknowledge, grant credit, send (a nested
 * delivery) or unsubscribe, as the script says. After every step, for every queue a
 * consumer is on:
 *   - its counters add up: enqueued = acknowledged + killed + waiting + held + in flight;
 *   - in flight is what its consumers were delivered and have not acknowledged (on a
 *     non-destructive queue, where the message stays, their own counts say it and the
 *     queue's is 0), and its consumer count is theirs;
 *   - no consumer was delivered more than the credit it was given, and each delivery's
 *     number is new;
 *   - an acknowledgement is refused (MQR_ENOTFOUND) exactly when its delivery is not
 *     outstanding.
 * Close frees everything (LeakSanitizer). FUZZ_TRACE=1 prints the steps and deliveries. */
#include <stdio.h>
#include <string.h>

#include "fuzz_check.h"
#include "mqr/broker.h"

static const char yaml[] = "address-settings:\n"
                           "  '#': {auto-create-addresses: true, auto-create-queues: true, max-delivery-attempts: 2,\n"
                           "        dead-letter-address: DLA, auto-create-dead-letter-resources: true}\n"
                           "  'q': {redelivery-delay: 50}\n"
                           "  'full.#': {max-size-bytes: 300, address-full-policy: FAIL}\n"
                           "  'drop.#': {max-size-bytes: 300, address-full-policy: DROP}\n"
                           "  'block.#': {max-size-bytes: 300, address-full-policy: BLOCK}\n"
                           "addresses:\n"
                           "  q: {anycast: [q]}\n"
                           "  t: {multicast: {t.keep: {}, t.f: {filter: \"k1 > 100 OR k3 IS NOT NULL\"}}}\n"
                           "  full.a: {anycast: [full.a]}\n"
                           "  drop.a: {anycast: [drop.a]}\n"
                           "  block.a: {anycast: [block.a]}\n"
                           "  kx: {anycast: {kx: {exclusive: true, ring-size: 6}}}\n"
                           "  kl: {anycast: {kl: {last-value-key: k2}}}\n"
                           "  kg: {anycast: {kg: {group-buckets: 2, consumers-before-dispatch: 2}}}\n"
                           "  kn: {anycast: {kn: {non-destructive: true, last-value-key: k2}}}\n"
                           "diverts:\n"
                           "  d1: {address: q, forwarding-address: t, filter: \"k1 > 100\"}\n"
                           "  d2: {address: kl, forwarding-address: [kx, auto.1], exclusive: true,\n"
                           "       filter: \"k2 IS NOT NULL\"}\n"
                           "  d3: {address: 'auto.#', forwarding-address: kg, routing-type: ANYCAST}\n"
                           "  d4: {address: t, forwarding-address: q, routing-type: PASS}\n";

static const char *const targets[] = {
    "q",      "t",    "full.a", "drop.a", "block.a", "auto.1", "auto.2.longer.than.16", "t::t.keep", "q::q",
    "news.#", "t::q", "kx",     "kl",     "kg",      "kn"};
enum { N_TARGETS = sizeof targets / sizeof targets[0], MAX_CONS = 8, MAX_OUT = 1024 };

typedef struct {
  mqr_broker_consumer_t *c; /* NULL when gone */
  char queue[128];
  uint64_t credit, delivered;
  int64_t out[MAX_OUT]; /* outstanding deliveries, in order */
  int n_out;
  int64_t last; /* the last delivery number */
  uint8_t how;  /* in the callback: 1 ack, 2 credit, 4 send, 8 unsubscribe at the 3rd */
} cons_t;

static cons_t cons[MAX_CONS];
static bool trace; /* FUZZ_TRACE set: each step and delivery on stderr */
static mqr_broker_t *broker;
static int depth;

/* The allocator: fails the allocation the script names, counting from the step's start. */
static long alloc_left = -1;
static bool may_alloc(void) { return alloc_left < 0 || alloc_left-- > 0; }
static void *f_malloc(size_t n) { return may_alloc() ? malloc(n) : NULL; }
static void *f_realloc(void *p, size_t n) { return may_alloc() ? realloc(p, n) : NULL; }
static void *f_calloc(size_t c, size_t n) { return may_alloc() ? calloc(c, n) : NULL; }

/* A send of body_len bytes with n_props properties (up to 640: 20 KB decoded, past the
 * delivery arena). */
static int send_to(int target, int rt, size_t body_len, int dup, size_t n_props) {
  static char body[400];
  static char text[640][2][8];
  static mqr_str_t keys[640];
  static mqr_value_t values[640];
  if (keys[0].ptr == NULL)
    for (int i = 0; i < 640; i++) {              /* every type, strings most */
      keys[i] = i == 7 ? MQR_STR(MQR_PROP_GROUP) /* a group, for those with 8 or more */
                       : mqr_str_n(text[i][0], (size_t)snprintf(text[i][0], 8, "k%d", i));
      mqr_str_t v = mqr_str_n(text[i][1], (size_t)snprintf(text[i][1], 8, "v%d", i));
      values[i] = i % 8 == 1   ? mqr_value_int(i)
                  : i % 8 == 2 ? mqr_value_double(i / 3.0)
                  : i % 8 == 3 ? mqr_value_bool(i & 16)
                  : i % 8 == 4 ? mqr_value_bytes(v)
                  : i % 8 == 5 ? mqr_value_null()
                               : mqr_value_string(v);
    }
  char id[8];
  memset(body, 'b', sizeof body);
  snprintf(id, sizeof id, "d%d", dup);
  mqr_broker_message_t m = {mqr_str(targets[target]),
                            rt,
                            false,
                            dup ? mqr_str(id) : MQR_STR(""),
                            MQR_PRIORITY_DEFAULT,
                            0,
                            0,
                            {"", 0},
                            keys,
                            values,
                            n_props,
                            mqr_str_n(body, body_len)};
  return mqr_broker_send(broker, &m, NULL, NULL);
}

static void drop_out(cons_t *k, int i) {
  memmove(k->out + i, k->out + i + 1, (size_t)(k->n_out - i - 1) * sizeof *k->out);
  k->n_out--;
}

static int ack(cons_t *k, int64_t delivery, bool cumulative) {
  int rc = mqr_broker_ack(k->c, delivery, cumulative);
  int at = -1;
  for (int i = 0; i < k->n_out; i++)
    if (k->out[i] == delivery) at = i;
  FUZZ_CHECK((rc == 0) == (at >= 0)); /* MQR_ENOTFOUND exactly when not outstanding */
  if (rc == 0 && cumulative)
    while (k->n_out > 0 && k->out[0] <= delivery) drop_out(k, 0);
  else if (rc == 0)
    drop_out(k, at);
  return rc;
}

static void unsubscribe(cons_t *k) {
  mqr_broker_unsubscribe(k->c);
  k->c = NULL;
  k->n_out = 0; /* back to the queue */
}

static void on_msg(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  cons_t *k = arg;
  FUZZ_CHECK(k->c == c || k->c == NULL); /* NULL: still inside the subscribe call */
  k->c = c;
  FUZZ_CHECK(m->delivery > k->last && k->delivered < k->credit);
  k->last = m->delivery;
  k->delivered++;
  if (trace)
    fprintf(stderr, "  deliver %d #%lld (%.*s)\n", (int)(k - cons), (long long)m->delivery, (int)m->address.len,
            m->address.ptr);
  if (k->n_out == MAX_OUT) ack(k, k->out[0], false); /* keep room in the record */
  k->out[k->n_out++] = m->delivery;
  if (k->how & 1) ack(k, m->delivery, false);
  if (k->how & 2) {
    k->credit++;
    mqr_broker_credit(c, 1);
  }
  if ((k->how & 4) && depth < 3) {
    depth++;
    (void)send_to((int)(m->delivery % N_TARGETS), MQR_ANYCAST, 10, 0, 0);
    depth--;
  }
  if ((k->how & 8) && k->delivered == 3 && k->c != NULL) unsubscribe(k);
}

static void sum_in_flight(void *arg, const mqr_broker_consumer_info_t *c) { *(uint64_t *)arg += c->in_flight; }

static void check(void) {
  for (int i = 0; i < MAX_CONS; i++) {
    if (cons[i].c == NULL) continue;
    mqr_broker_queue_stats_t st;
    FUZZ_CHECK(mqr_broker_queue_stats(broker, mqr_str(cons[i].queue), &st) == 0);
    FUZZ_CHECK(st.enqueued ==
               st.acknowledged + st.killed + st.expired + st.depth + st.held + st.scheduled + st.in_flight);
    uint64_t in_flight = 0, theirs = 0;
    uint32_t n = 0;
    for (int j = 0; j < MAX_CONS; j++)
      if (cons[j].c != NULL && strcmp(cons[j].queue, cons[i].queue) == 0) in_flight += (uint64_t)cons[j].n_out, n++;
    FUZZ_CHECK(mqr_broker_list_consumers(broker, mqr_str(cons[i].queue), sum_in_flight, &theirs, NULL) == n);
    FUZZ_CHECK(theirs == in_flight);
    if (strcmp(cons[i].queue, "kn") == 0) in_flight = 0; /* a non-destructive queue's stay in it */
    if (st.in_flight != in_flight || st.consumers != n) {
      fprintf(stderr, "queue %s: in flight %llu (consumers' %llu), consumers %u (ours %u)\n", cons[i].queue,
              (unsigned long long)st.in_flight, (unsigned long long)in_flight, st.consumers, n);
      for (int j = 0; j < MAX_CONS; j++)
        if (cons[j].c != NULL)
          fprintf(stderr, "  consumer %d on %s: %d outstanding of %llu delivered\n", j, cons[j].queue, cons[j].n_out,
                  (unsigned long long)cons[j].delivered);
    }
    FUZZ_CHECK(st.in_flight == in_flight && st.consumers == n);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mqr_config_t *cfg;
  if (cfg == NULL) {
    FUZZ_CHECK(mqr_config_load_string("fuzz.yaml", yaml, sizeof yaml - 1, &cfg, NULL) == 0);
    mqr_set_allocator(f_malloc, f_realloc, f_calloc, free);
    trace = getenv("FUZZ_TRACE") != NULL;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_broker_options_t opt = {.config = cfg};
  FUZZ_CHECK(mqr_broker_create(&loop, &opt, &broker, NULL) == 0);
  memset(cons, 0, sizeof cons);
  for (size_t p = 0; p + 3 <= size; p += 3) {
    uint8_t op = data[p], x = data[p + 1], y = data[p + 2];
    cons_t *k = &cons[x % MAX_CONS];
    int rts[4] = {MQR_ANYCAST, MQR_MULTICAST, MQR_ROUTING_NONE, MQR_ANYCAST};
    alloc_left = op & 0x80 ? (long)(y & 7) : -1; /* this step's allocation y & 7 fails */
    if (trace)
      fprintf(stderr, "step %d: op %d k %d x %d y %d%s\n", (int)(p / 3), op & 7, x % MAX_CONS, x, y,
              op & 0x80 ? " (alloc fails)" : "");
    switch (op & 7) {
    case 0:
    case 1:
      (void)send_to(x % N_TARGETS, rts[y & 3], (size_t)(y >> 2) * 6, op & 8 ? (y >> 4) & 3 : 0,
                    op & 0x40 ? (size_t)(y & 31) * 20 : 0);
      break;
    case 2:
      if (k->c == NULL) {
        char qn[16];
        snprintf(qn, sizeof qn, "sub.%d", y & 3);
        memset(k, 0, sizeof *k);
        k->credit = y & 7;
        k->how = (uint8_t)(op >> 3 & 15);
        mqr_str_t named;
        if (trace)
          fprintf(stderr, "  subscribe %d to %s type %d queue %s credit %d how %d\n", (int)(k - cons),
                  targets[(x >> 3) % N_TARGETS], rts[(y >> 3) & 3], y & 0x40 ? qn : "-", y & 7, k->how);
        /* Some with a selector: dispatch then walks past what they do not match. */
        static const char *const selectors[] = {"k1 > 100", "k0 = 'v0' OR k2 < 1.5", "k3 IS NULL", "k5 IS NULL"};
        mqr_str_t sel = y & 0x20 ? mqr_str(selectors[x & 3]) : MQR_STR("");
        int rc = mqr_broker_subscribe(broker, mqr_str(targets[(x >> 3) % N_TARGETS]), rts[(y >> 3) & 3],
                                      y & 0x40 ? mqr_str(qn) : MQR_STR(""), sel, (uint32_t)k->credit, on_msg, k, &k->c,
                                      &named, NULL);
        if (rc != 0) {
          FUZZ_CHECK(k->delivered == 0);
          k->c = NULL;
        } else if (k->c != NULL) {
          FUZZ_CHECK(named.len < sizeof k->queue);
          memcpy(k->queue, named.ptr, named.len);
        }
      }
      break;
    case 3:
      if (k->c != NULL) {
        if (k->n_out > 0 && !(op & 8))
          ack(k, k->out[y % k->n_out], y & 0x80);
        else
          ack(k, (int64_t)y - 8, false); /* most likely not outstanding */
      }
      break;
    case 4:
      if (k->c != NULL) {
        k->credit += y & 15;
        mqr_broker_credit(k->c, y & 15);
      }
      break;
    case 5:
      if (k->c != NULL) unsubscribe(k);
      break;
    default: break;
    }
    alloc_left = -1;
    if (trace) {
      mqr_broker_queue_stats_t st;
      for (int j = 0; j < MAX_CONS; j++)
        if (cons[j].c && mqr_broker_queue_stats(broker, mqr_str(cons[j].queue), &st) == 0)
          fprintf(stderr, "  [%d %p %s: depth %llu in flight %llu]\n", j, (void *)cons[j].c, cons[j].queue,
                  (unsigned long long)st.depth, (unsigned long long)st.in_flight);
    }
    check();
  }
  for (int i = 0; i < MAX_CONS; i++)
    if (cons[i].c != NULL) unsubscribe(&cons[i]);
  mqr_broker_close(broker, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  FUZZ_CHECK(uv_loop_close(&loop) == 0);
  return 0;
}
