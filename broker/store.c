/* The broker's memory: object pools, messages by size class, and the in-memory queue
 * store. In steady state (messages acknowledged as fast as they come) everything here is
 * reused and nothing reaches the allocator. */
#include "broker_int.h"

/* ---- pools ------------------------------------------------------------------------------ */

void mqr__pool_init(mqr__pool_t *p, size_t size, uint32_t max_free) {
  p->free = NULL;
  p->size = size < sizeof(void *) ? sizeof(void *) : size;
  p->n_free = 0;
  p->max_free = max_free;
}

void *mqr__pool_get(mqr__pool_t *p) {
  void *obj = p->free;
  if (obj) {
    p->free = *(void **)obj;
    p->n_free--;
    memset(obj, 0, p->size);
    return obj;
  }
  return mqr_calloc(1, p->size);
}

void mqr__pool_put(mqr__pool_t *p, void *obj) {
  if (obj == NULL) return;
  if (p->n_free >= p->max_free) {
    mqr_free(obj);
    return;
  }
  *(void **)obj = p->free;
  p->free = obj;
  p->n_free++;
}

void mqr__pool_free(mqr__pool_t *p) {
  while (p->free) {
    void *next = *(void **)p->free;
    mqr_free(p->free);
    p->free = next;
  }
  p->n_free = 0;
}

/* ---- messages --------------------------------------------------------------------------- */

/* Each class keeps up to this many bytes of free messages (and at least 4 of them), or,
 * when more of its messages were alive at once in this period or the last (PEAK_MS each),
 * that many: a backlog that comes and goes (a producer a window ahead of its consumer) is
 * then made from what the last one freed, and a peak's memory goes back to the allocator
 * once it is two periods old. */
#define MSG_CACHE_BYTES (8u << 20)
#define PEAK_MS 10000

static uint32_t class_cap(const mqr_broker_t *b, int cls) {
  size_t n = MSG_CACHE_BYTES / mqr__msg_class_size(cls);
  uint32_t keep = n < 4 ? 4 : (uint32_t)n;
  const uint32_t *peak = b->msg_peak[cls];
  uint32_t p = peak[0] > peak[1] ? peak[0] : peak[1];
  return p > keep ? p : keep;
}

/* A new period: this one's peaks become the last's, and each class keeps no more free
 * messages than its cap now says. */
static void new_period(mqr_broker_t *b, uint64_t now) {
  b->msg_period_ms = now;
  for (int cls = 0; cls < MQR__MSG_CLASSES; cls++) {
    b->msg_peak[cls][1] = b->msg_peak[cls][0];
    b->msg_peak[cls][0] = b->msg_live[cls];
    for (uint32_t cap = class_cap(b, cls); b->msg_n_free[cls] > cap; b->msg_n_free[cls]--) {
      mqr__msg_t *m = b->msg_free[cls];
      b->msg_free[cls] = m->next_free;
      mqr_free(m);
    }
  }
}

mqr__msg_t *mqr__msg_alloc(mqr_broker_t *b, size_t len) {
  int cls = mqr__msg_class(len); /* the least class that holds len */
  if (cls >= MQR__MSG_CLASSES) return NULL;
  mqr__msg_t *m = b->msg_free[cls];
  if (m) {
    b->msg_free[cls] = m->next_free;
    b->msg_n_free[cls]--;
  } else if ((m = mqr_malloc(sizeof *m + mqr__msg_class_size(cls))) == NULL) {
    return NULL;
  }
  if (++b->msg_live[cls] > b->msg_peak[cls][0]) b->msg_peak[cls][0] = b->msg_live[cls];
  m->refs = 0;
  m->len = (uint32_t)len;
  m->cls = (uint8_t)cls;
  m->acct = NULL;
  m->next_free = NULL;
  m->jfile = 0;
  m->jbytes = 0;
  m->jentries = NULL;
  m->jlive_next = m->jlive_prev = NULL;
  m->expiration = -1; /* read from its bytes when first needed (expiry.c) */
  m->scheduled = -1;  /* the same (redeliver.c) */
  m->group_off = 0;
  m->group_len = UINT32_MAX; /* the same (kinds.c) */
  return m;
}

void mqr__msg_release(mqr_broker_t *b, mqr__msg_t *m) {
  if (--m->refs) return;
  b->stats.messages--;
  b->stats.bytes -= m->len;
  mqr__acct_t *a = m->acct;
  if (a) {
    bool was_full = mqr__acct_over(a);
    a->bytes -= m->len;
    if (was_full && !mqr__acct_over(a) && a->n_blocked && !b->global_blocked)
      mqr__acct_release(a); /* below the limit again */
  }
  if (b->global_blocked && (int64_t)b->stats.bytes < b->global_max) mqr__global_release(b);
  if (b->msg_live[m->cls]) b->msg_live[m->cls]--;
  uint64_t now = uv_now(b->loop);
  if (now - b->msg_period_ms >= PEAK_MS) new_period(b, now);
  if (b->msg_n_free[m->cls] >= class_cap(b, m->cls)) {
    mqr_free(m);
    return;
  }
  m->next_free = b->msg_free[m->cls];
  b->msg_free[m->cls] = m;
  b->msg_n_free[m->cls]++;
}

void mqr__msg_pools_free(mqr_broker_t *b) {
  for (int cls = 0; cls < MQR__MSG_CLASSES; cls++) {
    while (b->msg_free[cls]) {
      mqr__msg_t *next = b->msg_free[cls]->next_free;
      mqr_free(b->msg_free[cls]);
      b->msg_free[cls] = next;
    }
    b->msg_n_free[cls] = 0;
  }
}

/* ---- the in-memory queue store ---------------------------------------------------------- */

static void mem_push(mqr__store_t *s, mqr__entry_t *e) {
  e->next = NULL;
  e->prev = s->tail;
  if (s->tail)
    s->tail->next = e;
  else
    s->head = e;
  s->tail = e;
  s->depth++;
}

static void mem_push_front(mqr__store_t *s, mqr__entry_t *e) {
  e->prev = NULL;
  e->next = s->head;
  if (s->head)
    s->head->prev = e;
  else
    s->tail = e;
  s->head = e;
  s->depth++;
}

static mqr__entry_t *mem_pop(mqr__store_t *s) {
  mqr__entry_t *e = s->head;
  if (e == NULL) return NULL;
  if (s->nd) mqr__nd_removed(s->nd, e);
  if (e->lv_slot) mqr__lvq_left(s->lvq, e);
  s->head = e->next;
  if (s->head)
    s->head->prev = NULL;
  else
    s->tail = NULL;
  s->depth--;
  s->removals++;
  e->next = e->prev = NULL;
  return e;
}

static mqr__entry_t *mem_peek(mqr__store_t *s) { return s->head; }

static mqr__entry_t *mem_next(mqr__store_t *s, mqr__entry_t *e) {
  (void)s;
  return e->next;
}

static void mem_remove(mqr__store_t *s, mqr__entry_t *e) {
  if (s->nd) mqr__nd_removed(s->nd, e);
  if (e->lv_slot) mqr__lvq_left(s->lvq, e);
  if (e->prev)
    e->prev->next = e->next;
  else
    s->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    s->tail = e->prev;
  e->next = e->prev = NULL;
  s->depth--;
  s->removals++;
}

static void mem_insert_before(mqr__store_t *s, mqr__entry_t *e, mqr__entry_t *before) {
  if (before == NULL) {
    mem_push(s, e);
    return;
  }
  e->next = before;
  e->prev = before->prev;
  if (before->prev)
    before->prev->next = e;
  else
    s->head = e;
  before->prev = e;
  s->depth++;
}

static const mqr__store_ops_t memstore_ops = {mem_push, mem_push_front, mem_pop,          mem_peek,
                                              mem_next, mem_remove,     mem_insert_before};

void mqr__memstore_init(mqr__store_t *s) {
  memset(s, 0, sizeof *s);
  s->ops = &memstore_ops;
}
