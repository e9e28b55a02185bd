/* cluster/state.c against a model: random ADD, REF, DELETE, UPDATE and TOPOLOGY records
 * (and orphans and short records) applied to both, the live messages listed in id order
 * compared after each step; snapshots restored into a fresh state list the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "state.h"

#define IDS 400
#define QS 6

typedef struct {
  bool live;
  uint8_t data[16];
  uint32_t len;
  bool on[QS];
  int32_t count[QS];
  int64_t due[QS];
} model_msg_t;

static model_msg_t model[IDS + 1];
static int64_t model_max;
static uint8_t topo_seen[256];
static size_t n_topo_model;

static const char *qname(int q) {
  static const char *names[QS] = {"orders", "orders.eu", "a", "metrics::m1", "x.y.z", "a-rather-long-queue-name"};
  return names[q];
}

static mqr_journal_record_t rec(mqr_journal_record_type_t t, int64_t id, const void *p, size_t len) {
  return (mqr_journal_record_t){t, (uint64_t)id, (const uint8_t *)p, len, 0};
}

static int named(uint8_t *buf, uint32_t *count, int64_t due, int q) {
  size_t at = 0;
  if (count) {
    uint32_t c = *count | (due ? MQR__RSTATE_DUE : 0);
    memcpy(buf, &c, 4);
    at = 4;
    if (due) memcpy(buf + 4, &due, 8), at = 12;
  }
  memcpy(buf + at, qname(q), strlen(qname(q)));
  return (int)(at + strlen(qname(q)));
}

/* ---- the comparison: each() against the model ------------------------------------------------ */

typedef struct {
  int64_t last;
  int seen;
} walk_t;

static int check_msg(void *ctx, int64_t id, const uint8_t *stored, size_t len, const mqr__rref_t *refs, uint32_t n) {
  walk_t *w = ctx;
  assert_true(id > w->last); /* id order */
  for (int64_t k = w->last + 1; k < id; k++) assert_false(model[k].live);
  w->last = id;
  w->seen++;
  assert_true(id >= 1 && id <= IDS);
  model_msg_t *m = &model[id];
  assert_true(m->live);
  assert_int_equal(len, m->len);
  assert_memory_equal(stored, m->data, len);
  int on = 0;
  for (int q = 0; q < QS; q++) on += m->on[q];
  assert_int_equal(n, on);
  for (uint32_t k = 0; k < n; k++) {
    int q = 0;
    while (q < QS && !mqr_str_eq(refs[k].queue, mqr_str(qname(q)))) q++;
    assert_true(q < QS && m->on[q]);
    assert_int_equal(refs[k].delivery_count, m->count[q]);
    assert_int_equal(refs[k].due, m->due[q]);
  }
  return 0;
}

static int count_topo(void *ctx, const uint8_t *p, size_t len) {
  size_t *n = ctx;
  assert_int_equal(len, 1);
  assert_int_equal(p[0], topo_seen[*n]);
  (*n)++;
  return 0;
}

static void compare(mqr__rstate_t *s) {
  walk_t w = {0, 0};
  assert_int_equal(mqr__rstate_each(s, check_msg, &w), 0);
  int live = 0;
  uint64_t bytes = 0, refs = 0;
  for (int id = 1; id <= IDS; id++)
    if (model[id].live) {
      live++, bytes += model[id].len;
      for (int q = 0; q < QS; q++) refs += model[id].on[q];
    }
  for (int64_t k = w.last + 1; k <= IDS; k++) assert_false(model[k].live);
  assert_int_equal(w.seen, live);
  mqr__rstate_stats_t st = mqr__rstate_stats(s);
  assert_int_equal(st.messages, live);
  assert_int_equal(st.bytes, bytes);
  assert_int_equal(st.refs, refs);
  assert_true(st.max_id >= model_max);
  size_t n = 0;
  assert_int_equal(mqr__rstate_each_topology(s, count_topo, &n), 0);
  assert_int_equal(n, n_topo_model);
}

/* ---- a snapshot, as the group takes and restores one ----------------------------------------- */

static mqr__rgroup_snap_t *snap_new(void);
static void snap_replay(mqr__rgroup_snap_t *s, mqr__rstate_t *into);

static void test_against_the_model(void **state) {
  (void)state;
  srand(12345);
  memset(model, 0, sizeof model);
  model_max = 0, n_topo_model = 0;
  mqr__rstate_t *s = mqr__rstate_new();
  assert_non_null(s);
  uint8_t buf[64];
  for (int step = 0; step < 20000; step++) {
    int64_t id = 1 + rand() % IDS;
    int q = rand() % QS;
    model_msg_t *m = &model[id];
    int op = rand() % 100;
    mqr_journal_record_t r;
    if (op < 20) { /* ADD (a second one of a live id changes nothing) */
      uint32_t len = (uint32_t)(rand() % 17);
      for (uint32_t k = 0; k < len; k++) buf[k] = (uint8_t)rand();
      r = rec(MQR_JOURNAL_ADD, id, buf, len);
      if (!m->live) {
        memset(m, 0, sizeof *m);
        m->live = true, m->len = len;
        memcpy(m->data, buf, len);
        if (id > model_max) model_max = id;
      }
    } else if (op < 50) { /* REF */
      r = rec(MQR_JOURNAL_REF, id, buf, (size_t)named(buf, NULL, 0, q));
      if (m->live && !m->on[q]) m->on[q] = true, m->count[q] = 0, m->due[q] = 0;
    } else if (op < 75) { /* DELETE */
      r = rec(MQR_JOURNAL_DELETE, id, buf, (size_t)named(buf, NULL, 0, q));
      if (m->live && m->on[q]) {
        m->on[q] = false;
        bool any = false;
        for (int k = 0; k < QS; k++) any = any || m->on[k];
        if (!any) m->live = false;
      }
    } else if (op < 95) { /* UPDATE, sometimes with a time */
      uint32_t count = (uint32_t)(rand() % 20);
      int64_t due = rand() % 3 == 0 ? 1700000000000 + rand() : 0;
      r = rec(MQR_JOURNAL_UPDATE, id, buf, (size_t)named(buf, &count, due, q));
      if (m->live && m->on[q]) m->count[q] = (int32_t)count, m->due[q] = due;
    } else if (op < 97) { /* TOPOLOGY */
      buf[0] = (uint8_t)rand();
      r = rec(MQR_JOURNAL_TOPOLOGY, 0, buf, 1);
      if (n_topo_model < sizeof topo_seen)
        topo_seen[n_topo_model++] = buf[0];
      else
        continue;
    } else { /* too short to read: counted, nothing changed */
      r = rec(MQR_JOURNAL_UPDATE, id, buf, 2);
    }
    assert_int_equal(mqr__rstate_apply(s, &r), 0);
    if (step % 97 == 0) compare(s);
    if (step % 2503 == 0) { /* a snapshot restored elsewhere lists the same */
      mqr__rgroup_snap_t *snap = snap_new();
      assert_int_equal(mqr__rstate_snapshot(s, snap), 0);
      mqr__rstate_t *t = mqr__rstate_new();
      mqr__rstate_apply(t, &(mqr_journal_record_t){MQR_JOURNAL_ADD, 9999, (const uint8_t *)"stale", 5, 0});
      mqr__rstate_reset(t);
      snap_replay(snap, t);
      compare(t);
      assert_int_equal(mqr__rstate_stats(t).max_id, mqr__rstate_stats(s).max_id);
      mqr__rstate_free(t);
    }
  }
  compare(s);
  mqr__rstate_stats_t st = mqr__rstate_stats(s);
  assert_true(st.orphans > 0 && st.bad > 0);
  mqr__rstate_free(s);
}

typedef struct {
  int64_t got[8];
  int n;
} seen_t;

static int collect(void *ctx, int64_t id, const uint8_t *p, size_t len, const mqr__rref_t *refs, uint32_t n) {
  (void)p, (void)len;
  seen_t *seen = ctx;
  assert_int_equal(n, 1);
  assert_true(mqr_str_eq(refs[0].queue, mqr_str("q")));
  seen->got[seen->n++] = id;
  return 0;
}

/* Ids that come out of order are listed in order; an id used, dropped and used again is
 * listed once. */
static void test_order(void **state) {
  (void)state;
  mqr__rstate_t *s = mqr__rstate_new();
  int64_t ids[] = {5, 3, 9, 1, 7};
  for (int i = 0; i < 5; i++) {
    mqr_journal_record_t a = rec(MQR_JOURNAL_ADD, ids[i], "m", 1), r = rec(MQR_JOURNAL_REF, ids[i], "q", 1);
    assert_int_equal(mqr__rstate_apply(s, &a), 0);
    assert_int_equal(mqr__rstate_apply(s, &r), 0);
  }
  mqr_journal_record_t d = rec(MQR_JOURNAL_DELETE, 3, "q", 1), a = rec(MQR_JOURNAL_ADD, 3, "m", 1),
                       r = rec(MQR_JOURNAL_REF, 3, "q", 1);
  assert_int_equal(mqr__rstate_apply(s, &d), 0);
  assert_int_equal(mqr__rstate_apply(s, &a), 0);
  assert_int_equal(mqr__rstate_apply(s, &r), 0);
  seen_t seen = {{0}, 0};
  assert_int_equal(mqr__rstate_each(s, collect, &seen), 0);
  assert_int_equal(seen.n, 5);
  int64_t want[] = {1, 3, 5, 7, 9};
  assert_memory_equal(seen.got, want, sizeof want);
  assert_int_equal(mqr__rstate_stats(s).max_id, 9);
  mqr__rstate_free(s);
}

/* A queue's TOPOLOGY record (op 2, compact.c's layout: the name's length at 8, the name
 * at 14) and its tombstone (op 3): the tombstone takes the latest record of that name
 * away and is not kept; a queue made again after it is kept. */
static size_t queue_record(uint8_t *p, const char *name) {
  size_t n = strlen(name);
  memset(p, 0, 14);
  p[0] = 2;
  p[8] = (uint8_t)n;
  memcpy(p + 14, name, n);
  return 14 + n;
}

static size_t tomb_record(uint8_t *p, const char *name) {
  size_t n = strlen(name);
  p[0] = 3;
  p[1] = (uint8_t)n;
  p[2] = 0;
  memcpy(p + 3, name, n);
  return 3 + n;
}

static int topo_names(void *ctx, const uint8_t *p, size_t len) {
  char *out = ctx;
  size_t n = p[8];
  (void)len;
  strncat(out, (const char *)p + 14, n);
  strcat(out, ",");
  return 0;
}

static void test_topology_tombstones(void **state) {
  (void)state;
  mqr__rstate_t *s = mqr__rstate_new();
  uint8_t buf[64];
  const char *ops[][2] = {{"make", "q1"},   {"make", "q2"}, {"tomb", "q1"}, {"make", "q3"},
                          {"tomb", "nope"}, {"make", "q1"}, {"tomb", "q2"}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    size_t n = ops[i][0][0] == 'm' ? queue_record(buf, ops[i][1]) : tomb_record(buf, ops[i][1]);
    mqr_journal_record_t r = rec(MQR_JOURNAL_TOPOLOGY, 0, buf, n);
    assert_int_equal(mqr__rstate_apply(s, &r), 0);
  }
  char names[128] = "";
  assert_int_equal(mqr__rstate_each_topology(s, topo_names, names), 0);
  assert_string_equal(names, "q3,q1,");
  mqr__rstate_free(s);
}

/* ---- snapshots through the group's own writer --------------------------------------------------- */

static mqr__rgroup_snap_t *snap_new(void) {
  static mqr__rgroup_snap_t s;
  raft_free(s.p);
  s = (mqr__rgroup_snap_t){NULL, 0, 0};
  return &s;
}

static void snap_replay(mqr__rgroup_snap_t *s, mqr__rstate_t *into) {
  uint64_t file_id = 1;
  assert_int_equal(mqr_journal_header_read(s->p, s->len, &file_id, NULL), 0);
  assert_int_equal(file_id, 0);
  size_t off = MQR_JOURNAL_HEADER, next = 0;
  mqr_journal_record_t r;
  while (off < s->len && mqr_journal_record_at(s->p, s->len, off, 0, &r, &next) == 1) {
    assert_int_equal(mqr__rstate_apply(into, &r), 0);
    off = next;
  }
  assert_int_equal(off, s->len);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_the_model),
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_topology_tombstones),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
