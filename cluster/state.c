/* A Raft group's replicated state: live messages by id, their queues, and the topology
 * records (state.h). */
#include "state.h"

#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "pool.h"

typedef struct {
  uint32_t q; /* the queue's name: an index into qnames */
  int32_t count;
  int64_t due;
} ref_t;

typedef struct {
  int64_t id;
  ref_t *refs;
  uint32_t n_refs, cap_refs;
  uint32_t len;
  uint8_t data[]; /* the stored bytes */
} msg_t;

typedef struct {
  uint8_t *p;
  size_t len;
} topo_t;

struct mqr__rstate_s {
  msg_t **slots; /* by id: linear probing, at most half full; NULL when empty */
  uint64_t mask;
  int64_t *order; /* ids in ADD order (some gone since): listed through the table */
  size_t n_order, cap_order;
  bool sorted;
  mqr_str_t *qnames; /* queue names met, interned (NUL-terminated copies) */
  uint32_t n_q, cap_q;
  uint32_t *qslots; /* by name's hash: index + 1, 0 empty */
  uint32_t qmask;
  topo_t *topo;
  size_t n_topo, cap_topo;
  mqr__rref_t *views; /* each()'s scratch */
  uint32_t cap_views;
  mqr__rstate_stats_t st;
};

static uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4); /* little-endian hosts, as durable.c writes them */
  return v;
}

/* ---- messages by id -------------------------------------------------------------------------- */

static uint64_t home(int64_t id, uint64_t mask) { return ((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & mask; }

static msg_t **slot_of(const mqr__rstate_t *s, int64_t id) {
  if (s->slots == NULL) return NULL;
  for (uint64_t i = home(id, s->mask);; i = (i + 1) & s->mask)
    if (s->slots[i] == NULL || s->slots[i]->id == id) return &s->slots[i];
}

static msg_t *find(const mqr__rstate_t *s, int64_t id) {
  msg_t **p = slot_of(s, id);
  return p ? *p : NULL;
}

static bool table_put(mqr__rstate_t *s, msg_t *m) {
  if ((s->st.messages + 1) * 2 > (s->slots ? s->mask + 1 : 0)) {
    uint64_t ncap = s->slots ? (s->mask + 1) * 2 : 1024;
    msg_t **ns = mqr_calloc(ncap, sizeof *ns);
    if (ns == NULL) return false;
    for (uint64_t i = 0; s->slots && i <= s->mask; i++)
      if (s->slots[i]) {
        uint64_t j = home(s->slots[i]->id, ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = s->slots[i];
      }
    mqr_free(s->slots);
    s->slots = ns, s->mask = ncap - 1;
  }
  *slot_of(s, m->id) = m;
  return true;
}

/* Takes m's slot out, moving back the entries after it that would not be found past the
 * hole (linear probing's deletion). */
static void table_del(mqr__rstate_t *s, msg_t **at) {
  uint64_t i = (uint64_t)(at - s->slots);
  s->slots[i] = NULL;
  for (uint64_t j = (i + 1) & s->mask; s->slots[j]; j = (j + 1) & s->mask) {
    uint64_t h = home(s->slots[j]->id, s->mask);
    /* s->slots[j] may stay unless its home lies cyclically in (i, j] */
    bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
    if (stays) continue;
    s->slots[i] = s->slots[j];
    s->slots[j] = NULL;
    i = j;
  }
}

/* (Messages and their refs come from the pool: a group in steady state takes nothing
 * from the system per message.) */
static void msg_free(msg_t *m) {
  mqr__rpool_free(m->refs);
  mqr__rpool_free(m);
}

static void drop(mqr__rstate_t *s, msg_t **at) {
  msg_t *m = *at;
  s->st.messages--;
  s->st.bytes -= m->len;
  table_del(s, at);
  msg_free(m);
  /* the order list keeps its id until it is worth compacting */
  if (s->n_order > 1024 && s->n_order > 4 * s->st.messages) {
    size_t k = 0;
    for (size_t i = 0; i < s->n_order; i++)
      if (find(s, s->order[i])) s->order[k++] = s->order[i];
    s->n_order = k;
  }
}

/* ---- queue names ----------------------------------------------------------------------------- */

/* The name's index, made if new: UINT32_MAX when out of memory. */
static uint32_t intern(mqr__rstate_t *s, mqr_str_t n) {
  if (s->qslots) {
    for (uint32_t i = mqr__fnv1a(n) & s->qmask; s->qslots[i]; i = (i + 1) & s->qmask) {
      if (mqr_str_eq(s->qnames[s->qslots[i] - 1], n)) return s->qslots[i] - 1;
    }
  }
  if ((s->n_q + 1) * 2 > (s->qslots ? s->qmask + 1 : 0)) {
    uint32_t ncap = s->qslots ? (s->qmask + 1) * 2 : 64;
    uint32_t *ns = mqr_calloc(ncap, sizeof *ns);
    if (ns == NULL) return UINT32_MAX;
    for (uint32_t k = 0; k < s->n_q; k++) {
      uint32_t i = mqr__fnv1a(s->qnames[k]) & (ncap - 1);
      while (ns[i]) i = (i + 1) & (ncap - 1);
      ns[i] = k + 1;
    }
    mqr_free(s->qslots);
    s->qslots = ns, s->qmask = ncap - 1;
  }
  char *copy = mqr_malloc(n.len + 1);
  if (copy == NULL || !mqr__grow((void **)&s->qnames, &s->cap_q, s->n_q + 1, sizeof *s->qnames)) {
    mqr_free(copy);
    return UINT32_MAX;
  }
  memcpy(copy, n.ptr, n.len);
  copy[n.len] = 0;
  s->qnames[s->n_q] = mqr_str_n(copy, n.len);
  uint32_t i = mqr__fnv1a(n) & s->qmask;
  while (s->qslots[i]) i = (i + 1) & s->qmask;
  s->qslots[i] = s->n_q + 1;
  return s->n_q++;
}

/* ---- making and applying --------------------------------------------------------------------- */

mqr__rstate_t *mqr__rstate_new(void) {
  mqr__rstate_t *s = mqr_calloc(1, sizeof *s);
  if (s) s->sorted = true;
  return s;
}

void mqr__rstate_reset(mqr__rstate_t *s) {
  for (uint64_t i = 0; s->slots && i <= s->mask; i++)
    if (s->slots[i]) msg_free(s->slots[i]);
  mqr_free(s->slots);
  s->slots = NULL, s->mask = 0;
  s->n_order = 0, s->sorted = true;
  for (size_t i = 0; i < s->n_topo; i++) mqr_free(s->topo[i].p);
  s->n_topo = 0;
  s->st = (mqr__rstate_stats_t){0};
}

void mqr__rstate_free(mqr__rstate_t *s) {
  if (s == NULL) return;
  mqr__rstate_reset(s);
  for (uint32_t i = 0; i < s->n_q; i++) mqr_free((char *)s->qnames[i].ptr);
  mqr_free(s->qnames);
  mqr_free(s->qslots);
  mqr_free(s->order);
  mqr_free(s->topo);
  mqr_free(s->views);
  mqr_free(s);
}

static int add(mqr__rstate_t *s, const mqr_journal_record_t *r) {
  int64_t id = (int64_t)r->id;
  if (find(s, id)) return 0; /* (a copy of one already here) */
  if (r->len > UINT32_MAX) return s->st.bad++, 0;
  msg_t *m = mqr__rpool_malloc(sizeof *m + r->len);
  if (m) {
    *m = (msg_t){id, NULL, 0, 0, (uint32_t)r->len};
    memcpy(m->data, r->payload, r->len);
  }
  if (m == NULL || !mqr__grow_size((void **)&s->order, &s->cap_order, s->n_order + 1, sizeof *s->order) ||
      !table_put(s, m)) {
    mqr__rpool_free(m);
    return MQR_ENOMEM;
  }
  if (s->n_order && s->order[s->n_order - 1] > id) s->sorted = false;
  s->order[s->n_order++] = id;
  s->st.messages++;
  s->st.bytes += r->len;
  if (id > s->st.max_id) s->st.max_id = id;
  return 0;
}

static ref_t *ref_of(msg_t *m, uint32_t q) {
  for (uint32_t i = 0; i < m->n_refs; i++)
    if (m->refs[i].q == q) return &m->refs[i];
  return NULL;
}

/* A TOPOLOGY payload that makes a queue (op 1 or 2: its name's u16 length at 8, the name
 * at 14; durable.h), or deletes one (op 3: the length at 1, the name at 3). */
static bool queue_of(const uint8_t *p, size_t len, mqr_str_t *name) {
  if (len < 14 || (p[0] != 1 && p[0] != 2)) return false;
  size_t n = (size_t)(p[8] | p[9] << 8);
  if (14 + n > len) return false;
  *name = mqr_str_n((const char *)p + 14, n);
  return true;
}

static bool tombstone_of(const uint8_t *p, size_t len, mqr_str_t *name) {
  if (len < 3 || p[0] != 3 || len != 3 + (size_t)(p[1] | p[2] << 8)) return false;
  *name = mqr_str_n((const char *)p + 3, len - 3);
  return true;
}

int mqr__rstate_apply(mqr__rstate_t *s, const mqr_journal_record_t *r) {
  switch ((int)r->type) { /* (int: MQR__RSTATE_MAX_ID is not of the enum) */
  case MQR_JOURNAL_ADD: return add(s, r);
  case MQR_JOURNAL_TOPOLOGY: {
    mqr_str_t gone;
    if (tombstone_of(r->payload, r->len, &gone)) { /* the queue's record goes, and so does this */
      for (size_t i = s->n_topo; i-- > 0;) {
        mqr_str_t made;
        if (queue_of(s->topo[i].p, s->topo[i].len, &made) && mqr_str_eq(made, gone)) {
          mqr_free(s->topo[i].p);
          memmove(&s->topo[i], &s->topo[i + 1], (s->n_topo - i - 1) * sizeof *s->topo);
          s->n_topo--;
          break;
        }
      }
      return 0;
    }
    uint8_t *p = mqr_malloc(r->len ? r->len : 1);
    if (p == NULL || !mqr__grow_size((void **)&s->topo, &s->cap_topo, s->n_topo + 1, sizeof *s->topo)) {
      mqr_free(p);
      return MQR_ENOMEM;
    }
    memcpy(p, r->payload, r->len);
    s->topo[s->n_topo++] = (topo_t){p, r->len};
    return 0;
  }
  case MQR__RSTATE_MAX_ID:
    if ((int64_t)r->id > s->st.max_id) s->st.max_id = (int64_t)r->id;
    return 0;
  case MQR_JOURNAL_REF:
  case MQR_JOURNAL_DELETE:
  case MQR_JOURNAL_UPDATE: break;
  default: return s->st.bad++, 0; /* (pages: not replicated) */
  }
  msg_t **at = slot_of(s, (int64_t)r->id);
  msg_t *m = at ? *at : NULL;
  if (m == NULL) return s->st.orphans++, 0;
  size_t off = 0;
  uint32_t count = 0;
  int64_t due = 0;
  if (r->type == MQR_JOURNAL_UPDATE) {
    if (r->len < 4) return s->st.bad++, 0;
    count = get32(r->payload);
    off = 4;
    if (count & MQR__RSTATE_DUE) {
      if (r->len < 12) return s->st.bad++, 0;
      memcpy(&due, r->payload + 4, 8);
      off = 12;
    }
  }
  uint32_t q = intern(s, mqr_str_n((const char *)r->payload + off, r->len - off));
  if (q == UINT32_MAX) return MQR_ENOMEM;
  ref_t *ref = ref_of(m, q);
  switch (r->type) {
  case MQR_JOURNAL_REF:
    if (ref) return 0;
    if (m->n_refs == m->cap_refs) {
      uint32_t cap = m->cap_refs ? 2 * m->cap_refs : 1;
      ref_t *refs = mqr__rpool_realloc(m->refs, cap * sizeof *refs);
      if (refs == NULL) return MQR_ENOMEM;
      m->refs = refs, m->cap_refs = cap;
    }
    m->refs[m->n_refs++] = (ref_t){q, 0, 0};
    s->st.refs++;
    return 0;
  case MQR_JOURNAL_DELETE:
    if (ref == NULL) return s->st.orphans++, 0;
    *ref = m->refs[--m->n_refs];
    s->st.refs--;
    if (m->n_refs == 0) drop(s, at);
    return 0;
  default: /* UPDATE */
    if (ref == NULL) return s->st.orphans++, 0;
    ref->count = (int32_t)(count & ~MQR__RSTATE_DUE);
    ref->due = due; /* (the latest says: held until then, or not) */
    return 0;
  }
}

/* ---- listing --------------------------------------------------------------------------------- */

static int by_id(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int mqr__rstate_each(mqr__rstate_t *s, mqr__rstate_msg_fn fn, void *ctx) {
  if (!s->sorted) {
    qsort(s->order, s->n_order, sizeof *s->order, by_id);
    s->sorted = true;
  }
  for (size_t i = 0; i < s->n_order; i++) {
    if (i && s->order[i] == s->order[i - 1]) continue; /* (an id added, dropped, added again) */
    msg_t *m = find(s, s->order[i]);
    if (m == NULL) continue;
    if (!mqr__grow((void **)&s->views, &s->cap_views, m->n_refs + 1, sizeof *s->views)) return MQR_ENOMEM;
    for (uint32_t k = 0; k < m->n_refs; k++)
      s->views[k] = (mqr__rref_t){s->qnames[m->refs[k].q], m->refs[k].count, m->refs[k].due};
    int rc = fn(ctx, m->id, m->data, m->len, s->views, m->n_refs);
    if (rc) return rc;
  }
  return 0;
}

int mqr__rstate_each_topology(const mqr__rstate_t *s, int (*fn)(void *ctx, const uint8_t *p, size_t len), void *ctx) {
  for (size_t i = 0; i < s->n_topo; i++) {
    int rc = fn(ctx, s->topo[i].p, s->topo[i].len);
    if (rc) return rc;
  }
  return 0;
}

static int snap_topology(void *ctx, const uint8_t *p, size_t len) {
  return mqr__rgroup_snapshot_record(ctx, MQR_JOURNAL_TOPOLOGY, 0, p, len);
}

static int snap_msg(void *ctx, int64_t id, const uint8_t *stored, size_t len, const mqr__rref_t *refs,
                    uint32_t n_refs) {
  mqr__rgroup_snap_t *snap = ctx;
  int rc = mqr__rgroup_snapshot_record(snap, MQR_JOURNAL_ADD, (uint64_t)id, stored, len);
  for (uint32_t k = 0; k < n_refs && rc == 0; k++) {
    rc = mqr__rgroup_snapshot_record(snap, MQR_JOURNAL_REF, (uint64_t)id, refs[k].queue.ptr, refs[k].queue.len);
    if (rc || (refs[k].delivery_count == 0 && refs[k].due == 0)) continue;
    uint8_t buf[12 + 512], *p = refs[k].queue.len <= 512 ? buf : mqr_malloc(12 + refs[k].queue.len);
    if (p == NULL) return MQR_ENOMEM;
    uint32_t count = (uint32_t)refs[k].delivery_count | (refs[k].due ? MQR__RSTATE_DUE : 0);
    size_t at = refs[k].due ? 12 : 4;
    memcpy(p, &count, 4);
    if (refs[k].due) memcpy(p + 4, &refs[k].due, 8);
    memcpy(p + at, refs[k].queue.ptr, refs[k].queue.len);
    rc = mqr__rgroup_snapshot_record(snap, MQR_JOURNAL_UPDATE, (uint64_t)id, p, at + refs[k].queue.len);
    if (p != buf) mqr_free(p);
  }
  return rc;
}

int mqr__rstate_snapshot(mqr__rstate_t *s, mqr__rgroup_snap_t *snap) {
  int rc = mqr__rgroup_snapshot_record(snap, MQR__RSTATE_MAX_ID, (uint64_t)s->st.max_id, NULL, 0);
  if (rc == 0) rc = mqr__rstate_each_topology(s, snap_topology, snap);
  return rc ? rc : mqr__rstate_each(s, snap_msg, snap);
}

mqr__rstate_stats_t mqr__rstate_stats(const mqr__rstate_t *s) { return s->st; }
