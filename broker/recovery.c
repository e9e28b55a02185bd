/* Recovery (durable.h): the journal's records, replayed in file order while it opens,
 * rebuild the queues made at run time, the messages, their references and delivery
 * counts; then each queue gets its messages in message-id order (the order they were
 * sent in), each address its bytes, and the journal its live accounting. Messages are
 * found by id in an open-addressing table; nothing is looked up by scanning. */
#include <stdlib.h>
#include <string.h>

#include "durable.h"

typedef struct {
  uint64_t made, file;
  uint32_t bytes;
} tomb_t;

struct mqr__recovery_s {
  mqr_broker_t *b;
  tomb_t *tombs; /* tombstones read: counted at the end */
  size_t n_tombs;
  mqr__msg_t **slots; /* by id: open addressing, at most half full */
  uint64_t mask, n;
  mqr__msg_t **order; /* in ADD order */
  size_t n_order, cap_order;
  bool sorted;
  int64_t max_id;
  uint64_t orphans, queues_made, bad;
};

mqr__recovery_t *mqr__recovery_new(mqr_broker_t *b) {
  mqr__recovery_t *rc = mqr_calloc(1, sizeof *rc);
  if (rc) {
    rc->b = b;
    rc->sorted = true;
  }
  return rc;
}

static uint64_t home(int64_t id, uint64_t mask) { return ((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & mask; }

static mqr__msg_t *find(const mqr__recovery_t *rc, int64_t id) {
  if (rc->slots == NULL) return NULL;
  for (uint64_t i = home(id, rc->mask);; i = (i + 1) & rc->mask) {
    mqr__msg_t *m = rc->slots[i];
    if (m == NULL || m->id == id) return m;
  }
}

static bool insert(mqr__recovery_t *rc, mqr__msg_t *m) {
  if ((rc->n + 1) * 2 > (rc->slots ? rc->mask + 1 : 0)) {
    uint64_t ncap = rc->slots ? (rc->mask + 1) * 2 : 4096;
    mqr__msg_t **ns = mqr_calloc(ncap, sizeof *ns);
    if (ns == NULL) return false;
    for (uint64_t i = 0; rc->slots && i <= rc->mask; i++)
      if (rc->slots[i]) {
        uint64_t j = home(rc->slots[i]->id, ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = rc->slots[i];
      }
    mqr_free(rc->slots);
    rc->slots = ns;
    rc->mask = ncap - 1;
  }
  if (rc->n_order == rc->cap_order) {
    size_t ncap = rc->cap_order ? rc->cap_order * 2 : 4096;
    mqr__msg_t **no = mqr_realloc(rc->order, ncap * sizeof *no);
    if (no == NULL) return false;
    rc->order = no;
    rc->cap_order = ncap;
  }
  uint64_t i = home(m->id, rc->mask);
  while (rc->slots[i]) i = (i + 1) & rc->mask;
  rc->slots[i] = m;
  rc->n++;
  if (rc->n_order && rc->order[rc->n_order - 1]->id > m->id) rc->sorted = false;
  rc->order[rc->n_order++] = m;
  return true;
}

static mqr__entry_t *entry_on(mqr__msg_t *m, const mqr__bq_t *bq, mqr__entry_t ***link) {
  for (mqr__entry_t **pp = &m->jentries; *pp; pp = &(*pp)->jnext)
    if ((*pp)->jbq == bq) {
      if (link) *link = pp;
      return *pp;
    }
  return NULL;
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* A TOPOLOGY record: the queue (and its address, or the routing type on it) made again
 * unless the config made it. */
/* A tombstone: the queue goes at the end (unless a later record makes it again); while
 * the file of the record that made it lasts, so does the tombstone. */
/* A tombstone read for what the record in *made made: noted (it lives as long as that
 * record's file), *deleted set, *made 0. */
static int note_tomb(mqr__recovery_t *rc, uint64_t file, const mqr_journal_record_t *r, uint64_t *made, bool *deleted) {
  tomb_t *nt = mqr_realloc(rc->tombs, (rc->n_tombs + 1) * sizeof *nt);
  if (nt == NULL) return MQR_ENOMEM;
  rc->tombs = nt;
  rc->tombs[rc->n_tombs++] = (tomb_t){*made, file, (uint32_t)mqr_journal_record_size(r->len)};
  *deleted = true;
  *made = 0;
  return 0;
}

static int tombstone(mqr__recovery_t *rc, uint64_t file, const mqr_journal_record_t *r) {
  mqr_broker_t *b = rc->b;
  if (r->len < 3 || r->len != 3 + (size_t)get16(r->payload + 1)) return rc->bad++, 0;
  mqr_queue_t *q = mqr_router_find_queue(&b->router, mqr_str_n((const char *)r->payload + 3, r->len - 3));
  mqr__bq_t *bq = q ? mqr_queue_data(q) : NULL;
  if (bq == NULL || bq->from_config || bq->jfile == 0) return 0; /* its maker's file is gone */
  return note_tomb(rc, file, r, &bq->jfile, &bq->deleted);
}

/* An address made by management (op 4), made again; its tombstone (op 5). */
static int address_record(mqr__recovery_t *rc, uint64_t file, const mqr_journal_record_t *r) {
  mqr_broker_t *b = rc->b;
  const uint8_t *p = r->payload;
  if (p[0] == 5) {
    if (r->len < 3 || r->len != 3 + (size_t)get16(p + 1)) return rc->bad++, 0;
    mqr_address_t *a = mqr_router_find_address(&b->router, mqr_str_n((const char *)p + 3, r->len - 3));
    mqr__acct_t *acct = a ? mqr_address_data(a) : NULL;
    if (acct == NULL || acct->jfile == 0) return 0; /* its maker's file is gone */
    return note_tomb(rc, file, r, &acct->jfile, &acct->deleted);
  }
  if (r->len < 4 || r->len != 4 + (size_t)get16(p + 2) || (p[1] & ~3u) || !p[1]) return rc->bad++, 0;
  mqr_str_t name = mqr_str_n((const char *)p + 4, r->len - 4);
  mqr_routing_set_t types = {p[1]};
  mqr_address_t *a = mqr_router_find_address(&b->router, name);
  mqr_error_t err;
  if (a == NULL) {
    int e = mqr_router_add_address(&b->router, name, types, 0, &a, &err);
    if (e == MQR_ENOMEM) return MQR_ENOMEM;
    if (e) {
      mqr__log(b, MQR_LOG_WARN, "journal: address '%.*s' cannot be made again: %s", (int)name.len, name.ptr,
               err.message);
      return 0;
    }
  } else {
    mqr_router_set_address_flags(&b->router, name, mqr_address_flags(a) & ~MQR_ADDRESS_AUTO_CREATED);
  }
  mqr__acct_t *acct = mqr__acct_of(b, a);
  if (acct == NULL) return MQR_ENOMEM;
  acct->deleted = false;
  acct->jfile = file;
  return 0;
}

int mqr__queue_make_from(mqr_broker_t *b, const mqr_queue_config_t *cfg, mqr_queue_t **q, mqr_error_t *err) {
  mqr_address_t *a = mqr_router_find_address(&b->router, cfg->address);
  int e = 0;
  if (a == NULL)
    e = mqr_router_add_address(&b->router, cfg->address, mqr_routing_set_of(cfg->routing_type),
                               MQR_ADDRESS_AUTO_CREATED, NULL, err);
  else if (!mqr_routing_set_contains(mqr_address_routing_types(a), cfg->routing_type))
    e = mqr_router_add_routing_type(&b->router, cfg->address, cfg->routing_type, err);
  return e ? e : mqr_router_add_queue(&b->router, cfg, q, err);
}

static int topology(mqr__recovery_t *rc, uint64_t file, const mqr_journal_record_t *r) {
  mqr_broker_t *b = rc->b;
  mqr_queue_config_t cfg;
  if (r->len >= 1 && r->payload[0] == 3) return tombstone(rc, file, r);
  if (r->len >= 1 && (r->payload[0] == 4 || r->payload[0] == 5)) return address_record(rc, file, r);
  if (!mqr__topology_read(r->payload, r->len, &cfg)) return rc->bad++, 0;
  mqr_str_t name = cfg.name;
  mqr_queue_t *q = mqr_router_find_queue(&b->router, name);
  if (q == NULL) {
    mqr_error_t err;
    int e = mqr__queue_make_from(b, &cfg, &q, &err);
    if (e == MQR_ENOMEM) return MQR_ENOMEM;
    if (e) {
      mqr__log(b, MQR_LOG_WARN, "journal: queue '%.*s' cannot be made again: %s", (int)name.len, name.ptr, err.message);
      return 0;
    }
    rc->queues_made++;
  }
  mqr__bq_t *bq = mqr__bq_of(b, q);
  if (bq == NULL) return MQR_ENOMEM;
  if (bq->from_config) { /* the latest record says whether the config changed it since */
    size_t n = mqr__topology_size(q);
    uint8_t small[512], *now = n != r->len ? NULL : n <= sizeof small ? small : mqr_malloc(n);
    if (now) {
      mqr__topology_write(now, q);
      bq->topo_stale =
          memcmp(now, r->payload, 3) != 0 || memcmp(now + 4, r->payload + 4, n - 4) != 0 || !(r->payload[3] & 2);
      if (now != small) mqr_free(now);
    } else {
      bq->topo_stale = n != r->len; /* (no memory to compare: the record stays as it is) */
    }
  } else if (r->payload[3] & 2) {
    bq->configured = true; /* the config made it once and lists it no more (configured.c) */
  }
  bq->deleted = false; /* made again after a tombstone */
  bq->jfile = file;    /* (a queue of the config has a record when its state was recorded) */
  bq->paused = bq->pause_kept = (r->payload[3] & 1) != 0;
  return 0;
}

/* A page cursor's mark (pager.c): the latest for an address and a queue wins. */
static int page_mark(mqr__recovery_t *rc, uint64_t file, const mqr_journal_record_t *r) {
  mqr__durable_t *d = rc->b->dur;
  const uint8_t *p = r->payload;
  if (r->len < 4) return rc->bad++, 0;
  size_t la = get16(p);
  if (r->len < 4 + la) return rc->bad++, 0;
  size_t lq = get16(p + 2 + la);
  if (r->len != 4 + la + lq) return rc->bad++, 0;
  mqr_str_t a = mqr_str_n((const char *)p + 2, la), q = mqr_str_n((const char *)p + 4 + la, lq);
  for (uint32_t i = 0; i < d->n_marks; i++)
    if (mqr_str_eq(mqr_str(d->marks[i].address), a) && mqr_str_eq(mqr_str(d->marks[i].queue), q)) {
      d->marks[i].id = (int64_t)r->id;
      d->marks[i].file = file;
      return 0;
    }
  if (d->n_marks == d->cap_marks) {
    uint32_t ncap = d->cap_marks ? d->cap_marks * 2 : 8;
    mqr__pmark_t *nm = mqr_realloc(d->marks, ncap * sizeof *nm);
    if (nm == NULL) return MQR_ENOMEM;
    d->marks = nm;
    d->cap_marks = ncap;
  }
  char *sa = mqr_malloc(la + 1), *sq = mqr_malloc(lq + 1);
  if (sa == NULL || sq == NULL) {
    mqr_free(sa);
    mqr_free(sq);
    return MQR_ENOMEM;
  }
  memcpy(sa, a.ptr, la);
  sa[la] = 0;
  memcpy(sq, q.ptr, lq);
  sq[lq] = 0;
  d->marks[d->n_marks++] = (mqr__pmark_t){sa, sq, (int64_t)r->id, file};
  return 0;
}

const mqr__pmark_t *mqr__recovered_mark(const mqr__durable_t *d, mqr_str_t address, mqr_str_t queue) {
  for (uint32_t i = 0; i < d->n_marks; i++)
    if (mqr_str_eq(mqr_str(d->marks[i].address), address) && mqr_str_eq(mqr_str(d->marks[i].queue), queue))
      return &d->marks[i];
  return NULL;
}

void mqr__recovered_marks_free(mqr__durable_t *d) {
  for (uint32_t i = 0; i < d->n_marks; i++) {
    mqr_free(d->marks[i].address);
    mqr_free(d->marks[i].queue);
  }
  mqr_free(d->marks);
  d->marks = NULL;
  d->n_marks = d->cap_marks = 0;
}

int mqr__durable_recover_record(void *ctx, uint64_t file, const char *path, const mqr_journal_record_t *r) {
  (void)path;
  mqr__recovery_t *rc = ctx;
  mqr_broker_t *b = rc->b;
  int64_t id = (int64_t)r->id;
  if (r->type == MQR_JOURNAL_TOPOLOGY) return topology(rc, file, r);
  if (r->type == MQR_JOURNAL_PAGED) return r->len ? page_mark(rc, file, r) : 0; /* empty: a release barrier */
  if (r->type == MQR_JOURNAL_ADD) {
    if (id > rc->max_id) rc->max_id = id;
    if (find(rc, id)) return 0; /* a copy made by compaction while the original was kept */
    mqr__msg_t *m = mqr__msg_alloc(b, r->len);
    if (m == NULL) return MQR_ENOMEM;
    memcpy(m->data, r->payload, r->len);
    m->id = id;
    m->jfile = file;
    m->jbytes = (uint32_t)mqr_journal_record_size(r->len);
    m->jentries = NULL;
    m->jlive_next = m->jlive_prev = NULL;
    if (!insert(rc, m)) {
      m->refs = 1;
      mqr__msg_release(b, (b->stats.messages++, b->stats.bytes += m->len, m));
      return MQR_ENOMEM;
    }
    b->stats.messages++;
    b->stats.bytes += m->len;
    return 0;
  }
  mqr__msg_t *m = find(rc, id);
  if (m == NULL) return 0; /* its ADD's file was released: the message is long gone */
  size_t at = r->type == MQR_JOURNAL_UPDATE ? 4 : 0;
  if (r->len < at) return rc->bad++, 0;
  uint32_t count = 0;
  if (at) memcpy(&count, r->payload, 4);
  if (count & MQR__UPDATE_DUE) at = 12; /* a time follows the count */
  if (r->len < at) return rc->bad++, 0;
  mqr_str_t name = mqr_str_n((const char *)r->payload + at, r->len - at);
  mqr_queue_t *q = mqr_router_find_queue(&b->router, name);
  mqr__bq_t *bq = q ? mqr__bq_of(b, q) : NULL;
  if (q && bq == NULL) return MQR_ENOMEM;
  mqr__entry_t **link = NULL, *e = bq ? entry_on(m, bq, &link) : NULL;
  switch (r->type) {
  case MQR_JOURNAL_REF:
    if (bq == NULL) {
      rc->orphans++;
      return 0;
    }
    if (e) return 0;
    if ((e = mqr__pool_take(&b->entries)) == NULL) return MQR_ENOMEM;
    *e = (mqr__entry_t){NULL, NULL, m, 0, 0, 0, bq, m->jentries, false, 0};
    m->jentries = e;
    return 0;
  case MQR_JOURNAL_DELETE:
    if (e) {
      *link = e->jnext;
      mqr__pool_put(&b->entries, e);
    }
    return 0;
  case MQR_JOURNAL_UPDATE:
    if (e) {
      e->delivery_count = (int32_t)(count & ~MQR__UPDATE_DUE);
      int64_t due = 0; /* the latest says: held until then, or not */
      if (count & MQR__UPDATE_DUE) memcpy(&due, r->payload + 4, 8);
      e->delivery = due; /* (kept here until the entry is enqueued) */
    }
    return 0;
  default: rc->bad++; return 0;
  }
}

/* The address a stored message was sent to (empty if it does not read). */
static mqr_str_t stored_address(const mqr__msg_t *m) {
  mqr_stored_view_t v;
  return mqr_message_read_stored(m->data, m->len, &v, NULL) == 0 ? v.address : mqr_str_n(NULL, 0);
}

static int by_id(const void *a, const void *b) {
  int64_t x = (*(mqr__msg_t *const *)a)->id, y = (*(mqr__msg_t *const *)b)->id;
  return x < y ? -1 : x > y;
}

void mqr__recovery_finish(mqr__recovery_t *rc, uint64_t *messages, uint64_t *queues) {
  mqr_broker_t *b = rc->b;
  mqr__durable_t *d = b->dur;
  size_t live = 0;
  for (size_t i = 0; i < rc->n_order; i++) { /* the dead go; the live keep their order */
    mqr__msg_t *m = rc->order[i];
    if (m->jentries == NULL) {
      m->jfile = 0;
      m->refs = 1;
      mqr__msg_release(b, m);
    } else {
      rc->order[live++] = m;
    }
  }
  if (!rc->sorted) qsort(rc->order, live, sizeof *rc->order, by_id);
  uint64_t nq = 0;
  for (size_t i = 0; i < live; i++) {
    mqr__msg_t *m = rc->order[i];
    mqr_address_t *a = mqr_router_find_address(&b->router, stored_address(m));
    if (a == NULL) a = mqr_queue_address(m->jentries->jbq->q);
    mqr__acct_t *acct = mqr__acct_of(b, a);
    m->acct = acct;
    if (acct) acct->bytes += m->len;
    m->refs = 0;
    for (mqr__entry_t *e = m->jentries; e; e = e->jnext) {
      mqr__bq_t *bq = e->jbq;
      if (bq->store.depth == 0 && bq->enqueued == 0) nq++;
      int64_t due = e->delivery, now = mqr__wall_ms();
      e->delivery = 0;
      /* Waiting out a redelivery delay when the broker stopped: held to the same time. */
      if (due <= now || !mqr__hold_redelivery(b, bq, e, (uint64_t)(due - now))) mqr__enqueue(b, bq, e);
      bq->enqueued++;
      bq->bytes += m->len;
      m->refs++;
    }
    mqr__jlive_add(d, m);
  }
  for (mqr__bq_t *bq = b->queues; bq; bq = bq->next)
    if (bq->jfile && bq->jfile >= d->first && mqr__jfiles_reserve(d, bq->jfile)) {
      mqr__jfile_t *f = &d->files[bq->jfile - d->first];
      f->live++;
      f->bytes += mqr_journal_record_size(mqr__topology_size(bq->q));
    }
  for (mqr__acct_t *a = b->accts; a; a = a->next)
    if (a->jfile && a->jfile >= d->first && mqr__jfiles_reserve(d, a->jfile)) {
      mqr__jfile_t *f = &d->files[a->jfile - d->first];
      f->live++;
      f->bytes += mqr_journal_record_size(mqr__address_record_size(a));
    }
  for (size_t i = 0; i < rc->n_tombs; i++)
    if (!mqr__durable_tomb(d, rc->tombs[i].made, rc->tombs[i].file, rc->tombs[i].bytes))
      mqr__log(b, MQR_LOG_WARN, "journal: out of memory counting a deleted queue's record");
  /* The queues a tombstone deleted go (what they held was deleted before them). */
  for (mqr__bq_t *bq = b->queues, *next; bq; bq = next) {
    next = bq->next;
    if (bq->deleted) mqr__queue_drop(b, bq);
  }
  /* And the addresses a tombstone deleted, when nothing is left on them. */
  for (mqr__acct_t *a = b->accts, *next; a; a = next) {
    next = a->next;
    if (!a->deleted || mqr_address_queue_count(a->address) || a->bytes || a->pager) continue;
    mqr_str_t name = mqr_address_name(a->address);
    char *copy = mqr_malloc(name.len + 1);
    if (copy == NULL) continue; /* it stays, for want of memory */
    memcpy(copy, name.ptr, name.len);
    mqr__acct_drop(b, a);
    mqr_router_remove_address(&b->router, mqr_str_n(copy, name.len), false, NULL);
    mqr_free(copy);
  }
  if (rc->max_id > b->next_message_id) b->next_message_id = rc->max_id;
  if (rc->orphans)
    mqr__log(b, MQR_LOG_WARN, "journal: %llu references to queues that no longer exist were dropped",
             (unsigned long long)rc->orphans);
  if (rc->bad)
    mqr__log(b, MQR_LOG_WARN, "journal: %llu records not understood were skipped", (unsigned long long)rc->bad);
  rc->n_order = 0; /* they belong to the queues now */
  *messages = live;
  *queues = nq;
}

void mqr__recovery_free(mqr__recovery_t *rc) {
  if (rc == NULL) return;
  mqr_free(rc->tombs);
  for (size_t i = 0; i < rc->n_order; i++) { /* an opening that failed: what it recovered goes */
    mqr__msg_t *m = rc->order[i];
    while (m->jentries) {
      mqr__entry_t *e = m->jentries;
      m->jentries = e->jnext;
      mqr__pool_put(&rc->b->entries, e);
    }
    m->jfile = 0;
    m->refs = 1;
    mqr__msg_release(rc->b, m);
  }
  mqr_free(rc->slots);
  mqr_free(rc->order);
  mqr_free(rc);
}
