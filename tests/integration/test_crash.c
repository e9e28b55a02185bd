/* The crash loop: rounds of a producer sending durable messages with receipts and a
 * consumer acknowledging them, through a real mqrd that is killed (SIGKILL) at a random
 * moment of each round and started again on the same journal. Checked exactly against
 * what the clients were told:
 *
 *   - every message receipted is delivered (in some round, or in the final drain);
 *   - a message whose acknowledgement is known to be committed is never delivered
 *     again; an acknowledgement is known committed once a durable send made after it on
 *     the same connection is receipted (the journal is one ordered log: that fdatasync
 *     covers every record appended before it);
 *   - a redelivery counts every delivery known to be in the journal (the same rule: a
 *     delivery seen before a receipted barrier);
 *   - after the last restart the queue gives its messages in send order.
 *
 * The address pages past 16 KiB (address-full-policy PAGE), so that a backlog goes through
 * its page files and back. Every seventh message is left unacknowledged in the round it is first delivered in, so
 * that restarts redeliver. MQR_CRASH_SECONDS bounds the run (default 20; `make
 * crash-test` runs it longer); MQR_CRASH_SEED repeats a run. */
#include <uv.h>

#include "mqr/client.h"
#include "mqrd_proc.h"

#define MAXSEQ (1 << 22)
#define WINDOW 500

static uint8_t receipted[MAXSEQ], committed[MAXSEQ], delivered[MAXSEQ], held_once[MAXSEQ];
static int32_t durable_count[MAXSEQ]; /* deliveries known to be in the journal */

static struct {
  long lost, resurrected, count_back, out_of_order, receipts, errors, deliveries, commits, redeliveries, paging;
} st;

typedef struct {
  int32_t seq, count;
  bool acked;
} seen_t;

typedef struct {
  uv_loop_t *loop;
  mqr_client_t *prod, *cons;
  mqr_client_sub_t *sub;
  int64_t next_seq;
  int outstanding;
  bool dead;          /* the broker was killed: stop sending */
  seen_t since[4096]; /* deliveries since the last barrier sent */
  int n_since;
  int closed;
} round_t;

static int64_t seq_of(mqr_str_t body) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", (int)(body.len < 31 ? body.len : 31), body.ptr);
  return strtoll(buf + 1, NULL, 10);
}

static void send_next(round_t *r);

static void on_receipt(mqr_client_t *c, int status, const mqr_frame_t *answer, void *arg) {
  (void)c, (void)answer;
  round_t *r = ((void **)arg)[0];
  int64_t seq = (int64_t)(intptr_t)((void **)arg)[1];
  free(arg);
  r->outstanding--;
  if (status == 0) {
    receipted[seq] = 1;
    st.receipts++;
  } else {
    st.errors++;
  }
  if (!r->dead) send_next(r);
}

static void send_next(round_t *r) {
  while (!r->dead && r->outstanding < WINDOW && r->next_seq < MAXSEQ) {
    char body[32];
    int n = snprintf(body, sizeof body, "s%lld", (long long)r->next_seq);
    mqr_client_message_t m = {MQR_STR("work"), MQR_ANYCAST, true, {"", 0}, MQR_PRIORITY_DEFAULT,      0, 0,
                              {"", 0},         NULL,        NULL, 0,       mqr_str_n(body, (size_t)n)};
    void **arg = malloc(2 * sizeof *arg);
    arg[0] = r;
    arg[1] = (void *)(intptr_t)r->next_seq;
    if (mqr_client_send(r->prod, &m, on_receipt, arg, NULL) != 0) {
      free(arg);
      return;
    }
    r->next_seq++;
    r->outstanding++;
  }
}

/* A barrier: once receipted, every ack and delivery before it is in the journal. */
static void on_barrier(mqr_client_t *c, int status, const mqr_frame_t *answer, void *arg) {
  (void)c, (void)answer;
  seen_t *batch = arg;
  if (status == 0) {
    for (int i = 0; batch[i].seq >= 0; i++) {
      if (batch[i].acked) committed[batch[i].seq] = 1, st.commits++;
      if (batch[i].count > durable_count[batch[i].seq]) durable_count[batch[i].seq] = batch[i].count;
    }
  }
  free(batch);
}

static void barrier(round_t *r) {
  seen_t *batch = malloc((size_t)(r->n_since + 1) * sizeof *batch);
  memcpy(batch, r->since, (size_t)r->n_since * sizeof *batch);
  batch[r->n_since].seq = -1;
  r->n_since = 0;
  mqr_client_message_t m = {
      MQR_STR("barrier"), MQR_ANYCAST, true, {"", 0}, MQR_PRIORITY_DEFAULT, 0, 0, {"", 0}, NULL, NULL, 0, MQR_STR("b")};
  if (mqr_client_send(r->cons, &m, on_barrier, batch, NULL) != 0) free(batch);
}

/* A delivery, checked against what is known committed. */
static void check_delivery(int64_t seq, int32_t count) {
  st.deliveries++;
  if (seq < 0 || seq >= MAXSEQ) return;
  if (committed[seq]) st.resurrected++;
  if (count <= durable_count[seq]) st.count_back++;
  if (delivered[seq]) st.redeliveries++;
  delivered[seq] = 1;
}

static void on_message(mqr_client_sub_t *s, const mqr_frame_message_t *m, void *arg) {
  round_t *r = arg;
  int64_t seq = seq_of(m->body);
  check_delivery(seq, m->delivery_count);
  bool hold = seq % 7 == 0 && !held_once[seq];
  if (hold) held_once[seq] = 1;
  if (!hold) mqr_client_ack(s, m->delivery, false);
  mqr_client_credit(s, 1);
  if (r->n_since < 4096) r->since[r->n_since++] = (seen_t){(int32_t)seq, m->delivery_count, !hold};
  if (r->n_since >= 100) barrier(r);
}

static void on_connected(mqr_client_t *c, int status, const mqr_frame_t *answer, void *arg) {
  (void)answer;
  round_t *r = arg;
  if (status != 0) return;
  if (c == r->prod) {
    send_next(r);
  } else {
    mqr_client_subscribe(c, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1000, on_message, NULL, r,
                         &r->sub, NULL);
  }
}

static void on_error(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg) {
  (void)c, (void)status, (void)e;
  round_t *r = arg;
  r->dead = true;
}

typedef struct {
  round_t *r;
  mqrd_t *d;
} kill_t;

static void on_closed(void *arg) { ((round_t *)arg)->closed++; }

static void kill_cb(uv_timer_t *t) {
  kill_t *k = t->data;
  k->r->dead = true;
  mqrd_stop(k->d, SIGKILL);
  for (const char *at = k->d->log; (at = strstr(at, "is paging")) != NULL; at++) st.paging++;
  mqr_client_close(k->r->prod, on_closed, k->r);
  mqr_client_close(k->r->cons, on_closed, k->r);
  uv_close((uv_handle_t *)t, NULL);
}

static char yaml[1024];

static void one_round(int64_t *next_seq, unsigned *seed) {
  mqrd_t d;
  mqrd_start(&d, yaml);
  uv_loop_t loop;
  uv_loop_init(&loop);
  static round_t r;
  memset(&r, 0, sizeof r);
  r.loop = &loop;
  r.next_seq = *next_seq;
  mqr_client_options_t po = {.client_id = "crash-producer", .on_error = on_error, .arg = &r},
                       co = {.client_id = "crash-consumer", .on_error = on_error, .arg = &r};
  if (mqr_client_create(&loop, &po, &r.prod) || mqr_client_create(&loop, &co, &r.cons)) abort();
  mqr_client_connect(r.prod, d.url, on_connected, &r, NULL);
  mqr_client_connect(r.cons, d.url, on_connected, &r, NULL);
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  kill_t k = {&r, &d};
  t.data = &k;
  uv_timer_start(&t, kill_cb, 150 + (uint64_t)(rand_r(seed) % 650), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0) {
    fprintf(stderr, "the round left handles open:\n");
    uv_print_all_handles(&loop, stderr);
    abort();
  }
  *next_seq = r.next_seq;
}

/* The last start: everything left, in send order. */
static void final_drain(void) {
  mqrd_t d;
  mqrd_start(&d, yaml);
  mqr_bclient_t *bc;
  mqr_error_t err;
  if (mqr_bclient_connect(d.url, "crash-drain", 5000, &bc, &err) != 0) abort();
  int64_t sub;
  if (mqr_bclient_subscribe(bc, MQR_STR("work"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 60000, &sub, NULL, 0,
                            &err) != 0) {
    fprintf(stderr, "subscribe: %s\n", err.message);
    abort();
  }
  int64_t last = -1;
  mqr_bclient_message_t *m;
  while (mqr_bclient_receive(bc, 1500, &m, &err) == 0) {
    int64_t seq = seq_of(m->body);
    check_delivery(seq, m->delivery_count);
    if (seq <= last) st.out_of_order++;
    last = seq;
    mqr_bclient_ack(bc, m->subscription, m->delivery, false, &err);
    mqr_bclient_credit(bc, m->subscription, 1, &err);
    mqr_bclient_message_free(m);
  }
  mqr_frame_query_result_t *q;
  if (mqr_bclient_query(bc, &q, &err) == 0) {
    const mqr_frame_queue_info_t *qi = q->queues.items;
    for (size_t i = 0; i < q->queues.count; i++)
      if (mqr_str_eq(qi[i].name, MQR_STR("work")) && qi[i].depth + qi[i].in_flight != 0) {
        fprintf(stderr, "work still holds %lld\n", (long long)(qi[i].depth + qi[i].in_flight));
        st.lost++;
      }
    mqr_free(q);
  }
  mqr_bclient_close(bc);
  int rc = mqrd_stop(&d, SIGTERM);
  if (rc != 0 || strstr(d.log, "stay in the journal") == NULL) {
    fprintf(stderr, "mqrd's last stop (%d):\n%s\n", rc, d.log);
    abort();
  }
}

int main(void) {
  const char *secs = getenv("MQR_CRASH_SECONDS"), *seed_env = getenv("MQR_CRASH_SEED");
  double budget = secs ? atof(secs) : 20;
  unsigned seed = seed_env ? (unsigned)atoi(seed_env) : (unsigned)time(NULL);
  srandom(seed);
  char data[256];
  snprintf(data, sizeof data, "/tmp/mqr-crash-%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", data);
  if (system(cmd) != 0) return 1;
  snprintf(yaml, sizeof yaml,
           "security: {allow-anonymous: true}\nlisteners:\n  - {name: main, host: 127.0.0.1, port: 0}\n"
           "persistence: {directory: %s, journal-file-size: 1MiB}\n"
           "address-settings:\n  work: {max-size-bytes: 16KiB, address-full-policy: PAGE}\n"
           "addresses:\n  work: {anycast: [work]}\n  barrier: {anycast: [barrier]}\n",
           data);
  double end = now_s() + budget;
  int64_t next = 0;
  int rounds = 0;
  while (rounds < 5 || now_s() < end) {
    one_round(&next, &seed);
    rounds++;
  }
  final_drain();
  for (int64_t s = 0; s < next; s++)
    if (receipted[s] && !delivered[s]) st.lost++;
  printf("crash loop (seed %u): %d rounds, %lld sent, %ld receipted, %ld refused or cut, %ld deliveries (%ld "
         "redeliveries), %ld acks known committed\n",
         seed, rounds, (long long)next, st.receipts, st.errors, st.deliveries, st.redeliveries, st.commits);
  printf("the address started paging %ld times\n", st.paging);
  printf("lost %ld, committed acks delivered again %ld, delivery counts gone back %ld, out of order %ld\n", st.lost,
         st.resurrected, st.count_back, st.out_of_order);
  if (system(cmd) != 0) return 1;
  bool ok = st.lost == 0 && st.resurrected == 0 && st.count_back == 0 && st.out_of_order == 0 && st.receipts > 1000 &&
            st.redeliveries > 0 && st.commits > 0 && st.paging > 0;
  puts(ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
