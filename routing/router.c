/* The router's topology: addresses, queues and the binding arrays that sends walk.
 *
 * Every change that alters what a send reaches is done in two phases: first every
 * allocation it needs (new binding arrays for each affected address, table room, list
 * room), then, only if all succeeded, the commit, which cannot fail. So an MQR_ENOMEM
 * leaves the router exactly as it was. */
#include <stdlib.h>

#include "router_int.h"

int mqr_router_init(mqr_router_t *r, const mqr_wildcard_t *wc) {
  mqr_wildcard_t w = wc ? *wc : mqr_wildcard_default();
  int rc = mqr_wildcard_validate(&w, NULL);
  if (rc) return rc;
  memset(r, 0, sizeof *r);
  RT(r)->wildcard = w;
  /* Both kinds of object keep their name's bytes right after the struct. */
  mqr__table_init(&RT(r)->addresses, offsetof(mqr_address_t, key.name), MQR__ADDRESS_NAME_OFF);
  mqr__cellpool_init(&RT(r)->cells);
  mqr__table_init(&RT(r)->queues, offsetof(mqr_queue_t, name), sizeof(mqr_queue_t));
  RT(r)->dups.limit = MQR_DEFAULT_ID_CACHE_LIMIT;
  return 0;
}

void mqr_router_set_id_cache_limit(mqr_router_t *r, size_t bytes) { RT(r)->dups.limit = bytes; }

const mqr_wildcard_t *mqr_router_wildcard(const mqr_router_t *r) { return &RT(r)->wildcard; }

size_t mqr_router_id_cache_bytes(const mqr_router_t *r) { return RT(r)->dups.used; }

static void free_queue(mqr_queue_t *q) {
  mqr_filter_free(q->filter);
  mqr_free(q);
}

/* A queue out of the router: freed, or held while mqr_router_hold says so. */
static void retire_queue(mqr_router_t *r, mqr_queue_t *q) {
  if (RT(r)->hold == 0) return free_queue(q);
  q->removed = true;
  q->dead_next = RT(r)->dead_queues;
  RT(r)->dead_queues = q;
}

mqr_filter_vocab_t *mqr_router_filter_vocab(mqr_router_t *r) {
  if (RT(r)->vocab == NULL && mqr_filter_vocab_create(&RT(r)->vocab) != 0) return NULL;
  return RT(r)->vocab;
}

int mqr_router_compile_filter(mqr_router_t *r, mqr_str_t text, mqr_filter_t **out, mqr_error_t *err) {
  *out = NULL;
  size_t i = 0;
  while (i < text.len && (text.ptr[i] == ' ' || text.ptr[i] == '\t' || text.ptr[i] == '\n' || text.ptr[i] == '\r')) i++;
  if (i == text.len) return 0; /* blank: no filter, as Artemis's FilterImpl.createFilter */
  mqr_filter_vocab_t *v = mqr_router_filter_vocab(r);
  if (v == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling a filter");
  return mqr_filter_compile(text, mqr_filter_vocab_resolve, v, out, err);
}

static void free_address(mqr_router_t *r, mqr_address_t *a) {
  if (RT(r)->hold) { /* freed by mqr_router_release */
    a->bind.cold->removed = true;
    a->bind.cold->dead_next = RT(r)->dead_addresses;
    RT(r)->dead_addresses = a;
    return;
  }
  mqr__address_cold_t *cold = a->bind.cold; /* a long name's block holds a itself */
  mqr_free(a->bind.anycast);
  mqr_free(a->bind.multicast);
  mqr_free(cold->own);
  mqr_free(cold->dv);
  mqr__dupcache_destroy(a->bind.dups, &RT(r)->dups);
  if (cold->block)
    mqr_free(cold->block);
  else
    mqr__cellpool_put(&RT(r)->cells, a);
  mqr_free(cold);
}

void mqr_router_hold(mqr_router_t *r) { RT(r)->hold++; }

void mqr_router_release(mqr_router_t *r) {
  if (RT(r)->hold == 0 || --RT(r)->hold > 0) return;
  for (mqr_queue_t *q; (q = RT(r)->dead_queues) != NULL;) {
    RT(r)->dead_queues = q->dead_next;
    free_queue(q);
  }
  for (mqr_address_t *a; (a = RT(r)->dead_addresses) != NULL;) {
    RT(r)->dead_addresses = a->bind.cold->dead_next;
    free_address(r, a);
  }
  mqr__diverts_release(r);
}

bool mqr_queue_removed(const mqr_queue_t *q) { return q->removed; }
bool mqr_address_removed(const mqr_address_t *a) { return a->bind.cold->removed; }

void mqr_router_close(mqr_router_t *r) {
  RT(r)->hold = 1; /* what waits goes now */
  mqr_router_release(r);
  mqr__slot_t *s = RT(r)->addresses.slots;
  for (uint32_t i = 0; s && i <= RT(r)->addresses.mask; i++) {
    mqr_address_t *a = s[i].val;
    if (a == NULL) continue;
    for (uint32_t k = 0; k < a->bind.cold->n_own; k++) free_queue(a->bind.cold->own[k]);
    free_address(r, a);
  }
  mqr__table_free(&RT(r)->addresses);
  mqr__table_free(&RT(r)->queues);
  mqr__cellpool_free(&RT(r)->cells);
  mqr_free(RT(r)->wildcards);
  for (uint32_t i = 0; i < RT(r)->n_settings; i++) mqr_free(RT(r)->settings[i]);
  mqr_free(RT(r)->settings);
  mqr__diverts_free(r);
  mqr_filter_vocab_free(RT(r)->vocab);
  memset(r, 0, sizeof *r);
}

/* ---- accessors ---------------------------------------------------------------- */

mqr_str_t mqr_address_name(const mqr_address_t *a) { return a->key.name; }
mqr_routing_set_t mqr_address_routing_types(const mqr_address_t *a) { return a->key.info.types; }
int mqr_address_default_routing_type(const mqr_address_t *a) { return a->key.info.default_type; }
uint32_t mqr_address_flags(const mqr_address_t *a) { return a->key.flags; }
uint64_t mqr_address_routed(const mqr_address_t *a) { return a->bind.routed; }
uint64_t mqr_address_unrouted(const mqr_address_t *a) { return a->bind.cold->unrouted; }
uint32_t mqr_address_queue_count(const mqr_address_t *a) { return a->bind.cold->n_own; }
mqr_queue_t *mqr_address_queue(const mqr_address_t *a, uint32_t i) {
  return i < a->bind.cold->n_own ? a->bind.cold->own[i] : NULL;
}
const mqr_address_settings_t *mqr_address_settings(const mqr_address_t *a) { return &a->bind.cold->settings; }

uint32_t mqr_address_binding_count(const mqr_address_t *a, mqr_routing_type_t t) {
  return t == MQR_ANYCAST ? a->bind.n_anycast : t == MQR_MULTICAST ? a->bind.n_multicast : 0;
}

mqr_queue_t *mqr_address_binding(const mqr_address_t *a, mqr_routing_type_t t, uint32_t i) {
  if (i >= mqr_address_binding_count(a, t)) return NULL;
  return t == MQR_ANYCAST ? a->bind.anycast[i] : a->bind.multicast[i];
}

mqr_str_t mqr_queue_name(const mqr_queue_t *q) { return q->name; }
mqr_address_t *mqr_queue_address(const mqr_queue_t *q) { return q->address; }
mqr_routing_type_t mqr_queue_routing_type(const mqr_queue_t *q) { return (mqr_routing_type_t)q->type; }
mqr_str_t mqr_queue_filter(const mqr_queue_t *q) { return q->filter_text; }
const mqr_filter_t *mqr_queue_compiled_filter(const mqr_queue_t *q) { return q->filter; }
bool mqr_queue_durable(const mqr_queue_t *q) { return q->durable; }
bool mqr_queue_purge_on_no_consumers(const mqr_queue_t *q) { return q->purge_on_no_consumers; }
bool mqr_queue_enabled(const mqr_queue_t *q) { return q->enabled; }
bool mqr_queue_auto_created(const mqr_queue_t *q) { return q->auto_created; }
int32_t mqr_queue_max_consumers(const mqr_queue_t *q) { return q->max_consumers; }
bool mqr_queue_exclusive(const mqr_queue_t *q) { return q->exclusive; }
mqr_str_t mqr_queue_last_value_key(const mqr_queue_t *q) { return q->last_value_key; }
mqr_str_t mqr_queue_group_first_key(const mqr_queue_t *q) { return q->group_first_key; }
bool mqr_queue_non_destructive(const mqr_queue_t *q) { return q->non_destructive; }
int64_t mqr_queue_ring_size(const mqr_queue_t *q) { return q->ring_size; }
int32_t mqr_queue_group_buckets(const mqr_queue_t *q) { return q->group_buckets; }
bool mqr_queue_group_rebalance(const mqr_queue_t *q) { return q->group_rebalance; }
int32_t mqr_queue_consumers_before_dispatch(const mqr_queue_t *q) { return q->consumers_before_dispatch; }
int64_t mqr_queue_delay_before_dispatch(const mqr_queue_t *q) { return q->delay_before_dispatch; }
uint32_t mqr_queue_consumer_count(const mqr_queue_t *q) { return q->consumers; }
uint64_t mqr_queue_routed(const mqr_queue_t *q) { return q->routed; }
void mqr_queue_set_enabled(mqr_queue_t *q, bool enabled) { q->enabled = enabled; }
void mqr_queue_set_data(mqr_queue_t *q, void *data) { q->data = data; }
void mqr_address_set_data(mqr_address_t *a, void *data) { a->bind.data = data; }
void *mqr_address_data(const mqr_address_t *a) { return a->bind.data; }
void *mqr_queue_data(const mqr_queue_t *q) { return q->data; }

int mqr_queue_add_consumer(mqr_queue_t *q) {
  if (q->max_consumers >= 0 && q->consumers >= (uint32_t)q->max_consumers) return MQR_ECONSUMERLIMIT;
  q->consumers++;
  return 0;
}

void mqr_queue_remove_consumer(mqr_queue_t *q) {
  if (q->consumers) q->consumers--;
}

uint32_t mqr_router_address_count(const mqr_router_t *r) { return RT(r)->addresses.count; }
uint32_t mqr_router_queue_count(const mqr_router_t *r) { return RT(r)->queues.count; }

void mqr_queue_config_init(mqr_queue_config_t *cfg, mqr_str_t name, mqr_str_t address, mqr_routing_type_t type) {
  memset(cfg, 0, sizeof *cfg);
  cfg->name = name;
  cfg->address = address;
  cfg->routing_type = type;
  cfg->durable = true;
  cfg->enabled = true;
  cfg->max_consumers = -1;
  cfg->ring_size = -1;
  cfg->group_buckets = -1;
  cfg->delay_before_dispatch = -1;
}

mqr_address_t *mqr_router_find_address(const mqr_router_t *r, mqr_str_t name) {
  mqr__key_t k = mqr__key(name.ptr, name.len);
  return mqr__table_find(&RT(r)->addresses, &k);
}

/* The rest of the lookup: a name over 16 bytes from its window (then compared in full),
 * a shorter one, whose window has missed already, by the probe from its home. */
__attribute__((noinline)) static mqr_address_t *find_types_probe(const mqr_router_t *r, mqr_str_t name,
                                                                 mqr_routing_set_t *types) {
  mqr__key_t k = mqr__key(name.ptr, name.len);
  const mqr__slot_t *s =
      name.len > 16 ? mqr__table_slot(&RT(r)->addresses, &k) : mqr__table_probe(&RT(r)->addresses, &k);
  types->bits = s ? s->aux[MQR__AUX_TYPES] : 0;
  return s ? s->val : NULL;
}

/* Every name: a leaf on its fast path (a name of up to 16 bytes, its window's first
 * candidate); the rest is a tail call. */
mqr_address_t *mqr__router_find_types_any(const mqr_router_t *r, mqr_str_t name, mqr_routing_set_t *types) {
  if (name.len > 16) return find_types_probe(r, name, types);
  mqr__key_t k = mqr__key_short(name.ptr, name.len);
  const mqr__slot_t *s = mqr__table_window(&RT(r)->addresses, k.hash, k.a, k.b, k.len);
  if (s == NULL) return find_types_probe(r, name, types);
  types->bits = s->aux[MQR__AUX_TYPES];
  return s->val;
}

/* A name of 8 to 16 bytes is its own digest (mqr__key_scan): its two words and its
 * length, hashed by one fold, found in its window with no call; any other name, or a
 * window that misses, goes to mqr__router_find_types_any. The entry is cache-line
 * aligned: as an exported call in a caller's tight loop, an entry that straddled a line
 * cost about a nanosecond (interleaved runs of address_info.lookup). */
__attribute__((hot, aligned(64))) mqr_address_t *mqr_router_find_address_types(const mqr_router_t *r, mqr_str_t name,
                                                                               mqr_routing_set_t *types) {
  size_t n = name.len;
  if (n - 8 <= 8) {
    uint64_t a = mqr__load64(name.ptr), b = mqr__load64(name.ptr + n - 8);
    const mqr__slot_t *s = mqr__table_window(&RT(r)->addresses, mqr__mix(a, b, MQR__HK0 ^ n), a, b, n);
    if (s != NULL) {
      types->bits = s->aux[MQR__AUX_TYPES];
      return (mqr_address_t *)s->val;
    }
  }
  return mqr__router_find_types_any(r, name, types);
}

mqr_queue_t *mqr_router_find_queue(const mqr_router_t *r, mqr_str_t name) {
  mqr__key_t k = mqr__key(name.ptr, name.len);
  return mqr__table_find(&RT(r)->queues, &k);
}

void mqr__address_set_info(mqr_router_t *r, mqr_address_t *a, mqr_address_info_t info) {
  a->key.info = info;
  mqr__key_t k = mqr__key(a->key.name.ptr, a->key.name.len);
  mqr__slot_t *s = mqr__table_slot(&RT(r)->addresses, &k);
  if (s) s->aux[MQR__AUX_TYPES] = info.types.bits;
}

int mqr_router_set_address_flags(mqr_router_t *r, mqr_str_t name, uint32_t flags) {
  mqr__key_t k = mqr__key(name.ptr, name.len);
  mqr__slot_t *s = mqr__table_slot(&RT(r)->addresses, &k);
  if (s == NULL) return MQR_ENOADDR;
  mqr_address_t *a = s->val;
  a->key.flags = (uint8_t)((flags & ~MQR_ADDRESS_WILDCARD) | (a->key.flags & MQR_ADDRESS_WILDCARD));
  s->aux[MQR__AUX_FLAGS] = a->key.flags;
  return 0;
}

/* ---- binding arrays, staged ----------------------------------------------------- */

typedef struct {
  mqr_address_t *a;
  mqr_queue_t **any, **multi;
  uint32_t n_any, n_multi;
  uint32_t n_groups; /* of any: the address's own queues, then each wildcard address's */
  uint32_t turn;     /* with one group: its round-robin turn */
} stage_t;

typedef struct {
  stage_t *items;
  uint32_t n;
  stage_t one; /* storage when a single address is affected */
} plan_t;

/* Appends q's of `from` (skipping those being removed) plus `adding` if it belongs to
 * `from`, to the arrays (or only counts them when the arrays are NULL). */
static void collect(const mqr_address_t *from, const mqr_queue_t *adding, stage_t *st) {
  for (uint32_t i = 0; i <= from->bind.cold->n_own; i++) {
    mqr_queue_t *q = i < from->bind.cold->n_own ? from->bind.cold->own[i]
                                                : (adding && adding->address == from ? (mqr_queue_t *)adding : NULL);
    if (q == NULL || q->removing) continue;
    if (q->type == MQR_ANYCAST) {
      if (st->any) st->any[st->n_any] = q;
      st->n_any++;
    } else {
      if (st->multi) st->multi[st->n_multi] = q;
      st->n_multi++;
    }
  }
}

/* The queues of one address were collected from start: a group, when there are any. On
 * the second pass (the arrays exist, and more than one group was counted), its record
 * goes after the total_any queue pointers. */
static void group_end(stage_t *st, uint32_t start, uint32_t total_any, bool records) {
  if (st->n_any == start) return;
  if (records) {
    mqr__agroups_t *g = (mqr__agroups_t *)(void *)(st->any + total_any);
    g->g[st->n_groups] = (mqr__agroup_t){st->n_any, 0};
  }
  st->n_groups++;
}

/* Counts (st->any NULL) or fills the arrays; total_any and groups are the first pass's
 * counts. */
static void collect_all(const mqr_router_t *r, const mqr_address_t *a, const mqr_queue_t *adding, stage_t *st,
                        uint32_t total_any, uint32_t groups) {
  bool records = st->any != NULL && groups > 1;
  if (records) ((mqr__agroups_t *)(void *)(st->any + total_any))->n = groups;
  st->n_any = st->n_multi = st->n_groups = 0;
  uint32_t start = st->n_any;
  collect(a, adding, st);
  group_end(st, start, total_any, records);
  mqr_str_t name = a->key.name;
  for (uint32_t w = 0; w < RT(r)->n_wildcards; w++) {
    const mqr_address_t *wa = RT(r)->wildcards[w];
    if (wa->bind.cold->n_own == 0 && !(adding && adding->address == wa)) continue;
    if (!mqr_wildcard_match(&RT(r)->wildcard, wa->key.name, name)) continue;
    start = st->n_any;
    collect(wa, adding, st);
    group_end(st, start, total_any, records);
  }
}

/* Builds the new binding arrays of concrete address a into st. 0 or MQR_ENOMEM. */
static int stage_build(const mqr_router_t *r, mqr_address_t *a, const mqr_queue_t *adding, stage_t *st) {
  st->a = a;
  st->any = st->multi = NULL;
  collect_all(r, a, adding, st, 0, 0);
  uint32_t n_any = st->n_any, n_multi = st->n_multi, groups = st->n_groups;
  size_t any_bytes = n_any * sizeof *st->any;
  if (groups > 1) any_bytes += sizeof(mqr__agroups_t) + groups * sizeof(mqr__agroup_t);
  if (n_any && (st->any = mqr_malloc(any_bytes)) == NULL) return MQR_ENOMEM;
  if (n_multi && (st->multi = mqr_malloc(n_multi * sizeof *st->multi)) == NULL) {
    mqr_free(st->any);
    st->any = NULL;
    return MQR_ENOMEM;
  }
  if (n_any == 0 && n_multi == 0) return 0;
  collect_all(r, a, adding, st, n_any, groups);
  return 0;
}

static void plan_abort(plan_t *p) {
  for (uint32_t i = 0; i < p->n; i++) {
    mqr_free(p->items[i].any);
    mqr_free(p->items[i].multi);
  }
  if (p->items != &p->one) mqr_free(p->items);
  p->items = NULL;
  p->n = 0;
}

/* The round-robin turn of the group of h's ANYCAST array whose queues belong to src
 * (UINT32_MAX: no such group). */
static uint32_t old_turn(const mqr__address_bind_t *h, const mqr_address_t *src) {
  uint32_t start = 0, n = mqr__agroup_count(h);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t end = h->any_groups ? mqr__agroups(h)->g[i].end : h->n_anycast;
    if (h->anycast[start]->address == src) return h->any_groups ? mqr__agroups(h)->g[i].cursor : h->cursor;
    start = end;
  }
  return UINT32_MAX;
}

/* Each group of the new ANYCAST array keeps the turn its address's group had. */
static void keep_turns(const mqr__address_bind_t *h, stage_t *st) {
  uint32_t start = 0;
  mqr__agroups_t *g = st->n_groups > 1 ? (mqr__agroups_t *)(void *)(st->any + st->n_any) : NULL;
  for (uint32_t i = 0; i < st->n_groups; i++) {
    uint32_t end = g ? g->g[i].end : st->n_any, turn = old_turn(h, st->any[start]->address);
    if (turn >= end - start) turn = 0;
    if (g)
      g->g[i].cursor = turn;
    else
      st->turn = turn;
    start = end;
  }
}

static void plan_commit(plan_t *p) {
  for (uint32_t i = 0; i < p->n; i++) {
    stage_t *st = &p->items[i];
    mqr__address_bind_t *h = &st->a->bind;
    st->turn = 0;
    keep_turns(h, st);
    mqr_free(h->anycast);
    mqr_free(h->multicast);
    h->anycast = st->any;
    h->multicast = st->multi;
    h->n_anycast = st->n_any;
    h->n_multicast = st->n_multi;
    h->any_groups = st->n_groups > 1;
    h->cursor = st->turn;
  }
  if (p->items != &p->one) mqr_free(p->items);
  p->items = NULL;
  p->n = 0;
}

/* Stages new arrays for every concrete address whose bindings change when `changed`
 * gains `adding` (or loses its queues marked removing). */
static int plan_for(const mqr_router_t *r, mqr_address_t *changed, const mqr_queue_t *adding, plan_t *p) {
  p->n = 0;
  p->items = &p->one;
  if (!mqr__is_wildcard(changed)) {
    if (stage_build(r, changed, adding, &p->one) != 0) return MQR_ENOMEM;
    p->n = 1;
    return 0;
  }
  mqr_str_t pattern = changed->key.name;
  mqr__slot_t *s = RT(r)->addresses.slots;
  uint32_t n = 0;
  for (uint32_t i = 0; s && i <= RT(r)->addresses.mask; i++) {
    mqr_address_t *a = s[i].val;
    if (a && !mqr__is_wildcard(a) && mqr_wildcard_match(&RT(r)->wildcard, pattern, a->key.name)) n++;
  }
  if (n == 0) return 0;
  if ((p->items = mqr_malloc(n * sizeof *p->items)) == NULL) {
    p->items = NULL;
    return MQR_ENOMEM;
  }
  for (uint32_t i = 0; i <= RT(r)->addresses.mask; i++) {
    mqr_address_t *a = s[i].val;
    if (!a || mqr__is_wildcard(a) || !mqr_wildcard_match(&RT(r)->wildcard, pattern, a->key.name)) continue;
    if (stage_build(r, a, adding, &p->items[p->n]) != 0) {
      plan_abort(p);
      return MQR_ENOMEM;
    }
    p->n++;
  }
  return 0;
}

/* ---- addresses ------------------------------------------------------------------ */

static int check_name(mqr_str_t name, int empty_code, const char *what, mqr_error_t *err) {
  if (name.len == 0) return mqr_error_set(err, empty_code, "empty %s name", what);
  if (name.len > MQR__NAME_MAX)
    return mqr_error_set(err, MQR_ENAMETOOLONG, "%s name of %zu bytes is longer than %u", what, name.len,
                         MQR__NAME_MAX);
  return 0;
}

int mqr__router_create_address(mqr_router_t *r, const mqr__key_t *k, mqr_routing_set_t types, uint32_t flags,
                               mqr_address_t **out, mqr_error_t *err) {
  mqr_str_t name = mqr_str_n(k->ptr, k->len);
  bool wildcard = mqr_wildcard_is_pattern(&RT(r)->wildcard, name);
  if (mqr__table_reserve(&RT(r)->addresses) != 0) goto nomem;
  if (wildcard && RT(r)->n_wildcards == RT(r)->cap_wildcards) {
    uint32_t ncap = RT(r)->cap_wildcards ? RT(r)->cap_wildcards * 2 : 8;
    void *p = mqr_realloc(RT(r)->wildcards, ncap * sizeof *RT(r)->wildcards);
    if (p == NULL) goto nomem;
    RT(r)->wildcards = p;
    RT(r)->cap_wildcards = ncap;
  }
  /* The address block at a 128-byte boundary: a pool cell when the name fits in it. */
  bool pooled = name.len <= MQR__POOLED_NAME_MAX;
  if (pooled && mqr__cellpool_reserve(&RT(r)->cells) != 0) goto nomem;
  mqr__address_cold_t *cold = mqr_calloc(1, sizeof *cold);
  if (cold == NULL) goto nomem;
  void *block = NULL;
  mqr_address_t *a;
  if (pooled) {
    a = mqr__cellpool_get(&RT(r)->cells);
  } else {
    block = mqr_malloc(MQR__ADDRESS_NAME_OFF + name.len + 1 + MQR__CELL_SIZE - 1);
    if (block == NULL) {
      mqr_free(cold);
      goto nomem;
    }
    a = (mqr_address_t *)(((uintptr_t)block + MQR__CELL_SIZE - 1) & ~(uintptr_t)(MQR__CELL_SIZE - 1));
  }
  memset(a, 0, MQR__ADDRESS_NAME_OFF); /* a pool cell holds its free-list link */
  a->bind.cold = cold;
  cold->block = block;
  char *nm = (char *)a + MQR__ADDRESS_NAME_OFF;
  memcpy(nm, name.ptr, name.len);
  nm[name.len] = '\0';
  a->key.name = mqr_str_n(nm, name.len);
  a->key.flags = (uint8_t)((flags & ~MQR_ADDRESS_WILDCARD) | (wildcard ? MQR_ADDRESS_WILDCARD : 0));
  mqr_address_info_set_types(&a->key.info, types);
  if (!wildcard) {
    /* A new concrete address picks up the queues of every wildcard address it matches,
     * and the diverts that apply to it. */
    plan_t p;
    if (mqr__divert_list(r, a) != 0 || plan_for(r, a, NULL, &p) != 0) {
      mqr_free(cold->dv);
      if (block)
        mqr_free(block);
      else
        mqr__cellpool_put(&RT(r)->cells, a);
      mqr_free(cold);
      goto nomem;
    }
    plan_commit(&p);
  }
  a->bind.cold->seq = RT(r)->next_seq++;
  mqr__address_settings(r, a);
  mqr__table_insert(&RT(r)->addresses, k, a, a->key.info.types.bits, a->key.flags);
  if (wildcard) RT(r)->wildcards[RT(r)->n_wildcards++] = a;
  if (out) *out = a;
  return 0;
nomem:
  return mqr_error_set(err, MQR_ENOMEM, "out of memory adding address '%.*s'", (int)name.len, name.ptr);
}

int mqr_router_add_address(mqr_router_t *r, mqr_str_t name, mqr_routing_set_t types, uint32_t flags,
                           mqr_address_t **out, mqr_error_t *err) {
  int rc = check_name(name, MQR_EEMPTYADDR, "address", err);
  if (rc) return rc;
  mqr__key_t k = mqr__key(name.ptr, name.len);
  if (mqr__table_find(&RT(r)->addresses, &k))
    return mqr_error_set(err, MQR_EADDREXISTS, "address '%.*s' already exists", (int)name.len, name.ptr);
  return mqr__router_create_address(r, &k, types, flags, out, err);
}

/* Unlinks a queue from the queue table and from its address's own list (no allocation). */
static void unlink_queue(mqr_router_t *r, mqr_queue_t *q) {
  mqr__key_t k = mqr__key(q->name.ptr, q->name.len);
  mqr__table_remove(&RT(r)->queues, &k);
  mqr_address_t *a = q->address;
  for (uint32_t i = 0; i < a->bind.cold->n_own; i++) {
    if (a->bind.cold->own[i] != q) continue;
    memmove(a->bind.cold->own + i, a->bind.cold->own + i + 1,
            (a->bind.cold->n_own - i - 1) * sizeof *a->bind.cold->own);
    a->bind.cold->n_own--;
    break;
  }
}

void mqr__router_drop_address(mqr_router_t *r, mqr_address_t *a) {
  if (mqr__is_wildcard(a)) {
    for (uint32_t i = 0; i < RT(r)->n_wildcards; i++) {
      if (RT(r)->wildcards[i] != a) continue;
      memmove(RT(r)->wildcards + i, RT(r)->wildcards + i + 1, (RT(r)->n_wildcards - i - 1) * sizeof *RT(r)->wildcards);
      RT(r)->n_wildcards--;
      break;
    }
  }
  mqr__key_t k = mqr__key(a->key.name.ptr, a->key.name.len);
  mqr__table_remove(&RT(r)->addresses, &k);
  free_address(r, a);
}

int mqr_router_remove_address(mqr_router_t *r, mqr_str_t name, bool force, mqr_error_t *err) {
  mqr_address_t *a = mqr_router_find_address(r, name);
  if (a == NULL) return mqr_error_set(err, MQR_ENOADDR, "address '%.*s' does not exist", (int)name.len, name.ptr);
  if (a->bind.cold->n_own && !force)
    return mqr_error_set(err, MQR_EADDRHASQUEUES, "address '%.*s' still has %u queue(s)", (int)name.len, name.ptr,
                         a->bind.cold->n_own);
  if (a->bind.cold->n_own && mqr__is_wildcard(a)) {
    for (uint32_t i = 0; i < a->bind.cold->n_own; i++) a->bind.cold->own[i]->removing = true;
    plan_t p;
    if (plan_for(r, a, NULL, &p) != 0) {
      for (uint32_t i = 0; i < a->bind.cold->n_own; i++) a->bind.cold->own[i]->removing = false;
      return mqr_error_set(err, MQR_ENOMEM, "out of memory removing address '%.*s'", (int)name.len, name.ptr);
    }
    plan_commit(&p);
  }
  while (a->bind.cold->n_own) {
    mqr_queue_t *q = a->bind.cold->own[a->bind.cold->n_own - 1];
    unlink_queue(r, q);
    retire_queue(r, q);
  }
  mqr__router_drop_address(r, a);
  return 0;
}

int mqr_router_add_routing_type(mqr_router_t *r, mqr_str_t address, int t, mqr_error_t *err) {
  if (mqr_routing_type_name(t) == NULL) return mqr_error_set(err, MQR_EINVAL, "bad routing type %d", t);
  mqr_address_t *a = mqr_router_find_address(r, address);
  if (a == NULL) return mqr_error_set(err, MQR_ENOADDR, "address '%.*s' does not exist", (int)address.len, address.ptr);
  if (!mqr_routing_set_contains(a->key.info.types, t)) {
    mqr_address_info_t info = a->key.info;
    mqr_address_info_add_type(&info, t);
    mqr__address_set_info(r, a, info);
  }
  return 0;
}

int mqr_router_remove_routing_type(mqr_router_t *r, mqr_str_t address, int t, mqr_error_t *err) {
  if (mqr_routing_type_name(t) == NULL) return mqr_error_set(err, MQR_EINVAL, "bad routing type %d", t);
  mqr_address_t *a = mqr_router_find_address(r, address);
  if (a == NULL) return mqr_error_set(err, MQR_ENOADDR, "address '%.*s' does not exist", (int)address.len, address.ptr);
  for (uint32_t i = 0; i < a->bind.cold->n_own; i++)
    if (a->bind.cold->own[i]->type == t)
      return mqr_error_set(err, MQR_ETYPEINUSE, "address '%.*s' still has %s queue '%.*s'", (int)address.len,
                           address.ptr, mqr_routing_type_name(t), (int)a->bind.cold->own[i]->name.len,
                           a->bind.cold->own[i]->name.ptr);
  mqr_address_info_t info = a->key.info;
  mqr_address_info_remove_type(&info, t);
  mqr__address_set_info(r, a, info);
  return 0;
}

/* ---- queues --------------------------------------------------------------------- */

/* Creates a queue on address a (which supports the type). Validation is the caller's. */
int mqr__router_create_queue(mqr_router_t *r, const mqr_queue_config_t *cfg, mqr_address_t *a, mqr_queue_t **out,
                             mqr_error_t *err) {
  if (mqr__table_reserve(&RT(r)->queues) != 0) goto nomem;
  if (a->bind.cold->n_own == a->bind.cold->cap_own) {
    uint32_t ncap = a->bind.cold->cap_own ? a->bind.cold->cap_own * 2 : 4;
    void *p = mqr_realloc(a->bind.cold->own, ncap * sizeof *a->bind.cold->own);
    if (p == NULL) goto nomem;
    a->bind.cold->own = p;
    a->bind.cold->cap_own = ncap;
  }
  mqr_queue_t *q =
      mqr_malloc(sizeof *q + cfg->name.len + cfg->filter.len + cfg->last_value_key.len + cfg->group_first_key.len + 4);
  if (q == NULL) goto nomem;
  memset(q, 0, sizeof *q);
  char *nm = (char *)(q + 1);
  memcpy(nm, cfg->name.ptr, cfg->name.len);
  nm[cfg->name.len] = '\0';
  char *ft = nm + cfg->name.len + 1;
  if (cfg->filter.len) memcpy(ft, cfg->filter.ptr, cfg->filter.len);
  ft[cfg->filter.len] = '\0';
  q->name = mqr_str_n(nm, cfg->name.len);
  q->filter_text = mqr_str_n(ft, cfg->filter.len);
  q->address = a;
  q->type = (uint8_t)cfg->routing_type;
  q->durable = cfg->durable;
  q->enabled = cfg->enabled;
  q->purge_on_no_consumers = cfg->purge_on_no_consumers;
  q->auto_created = cfg->auto_created;
  q->max_consumers = cfg->max_consumers;
  q->exclusive = cfg->exclusive;
  q->ring_size = cfg->ring_size < -1 ? -1 : cfg->ring_size;
  q->group_buckets = cfg->group_buckets < -1 ? -1 : cfg->group_buckets;
  q->group_rebalance = cfg->group_rebalance;
  q->non_destructive = cfg->non_destructive;
  q->consumers_before_dispatch = cfg->consumers_before_dispatch < 0 ? 0 : cfg->consumers_before_dispatch;
  q->delay_before_dispatch = cfg->delay_before_dispatch < -1 ? -1 : cfg->delay_before_dispatch;
  char *lk = ft + cfg->filter.len + 1;
  if (cfg->last_value_key.len) memcpy(lk, cfg->last_value_key.ptr, cfg->last_value_key.len);
  lk[cfg->last_value_key.len] = '\0';
  q->last_value_key = mqr_str_n(lk, cfg->last_value_key.len);
  char *gk = lk + cfg->last_value_key.len + 1;
  if (cfg->group_first_key.len) memcpy(gk, cfg->group_first_key.ptr, cfg->group_first_key.len);
  gk[cfg->group_first_key.len] = '\0';
  q->group_first_key = mqr_str_n(gk, cfg->group_first_key.len);
  mqr_error_t ferr;
  int rc = mqr_router_compile_filter(r, q->filter_text, &q->filter, &ferr);
  if (rc) {
    mqr_free(q);
    return mqr_error_set(err, rc, "queue '%.*s': filter: %s", (int)cfg->name.len, cfg->name.ptr, ferr.message);
  }
  plan_t p;
  if (plan_for(r, a, q, &p) != 0) {
    free_queue(q);
    goto nomem;
  }
  plan_commit(&p);
  q->seq = RT(r)->next_seq++;
  a->bind.cold->own[a->bind.cold->n_own++] = q;
  mqr__key_t k = mqr__key(nm, cfg->name.len);
  mqr__table_insert(&RT(r)->queues, &k, q, q->type, 0);
  if (out) *out = q;
  return 0;
nomem:
  return mqr_error_set(err, MQR_ENOMEM, "out of memory adding queue '%.*s'", (int)cfg->name.len, cfg->name.ptr);
}

int mqr_router_add_queue(mqr_router_t *r, const mqr_queue_config_t *cfg, mqr_queue_t **out, mqr_error_t *err) {
  int rc;
  if ((rc = check_name(cfg->name, MQR_EEMPTYQUEUE, "queue", err)) != 0) return rc;
  if ((rc = check_name(cfg->address, MQR_EEMPTYADDR, "address", err)) != 0) return rc;
  if (mqr_routing_type_name(cfg->routing_type) == NULL)
    return mqr_error_set(err, MQR_EINVAL, "queue '%.*s': bad routing type %d", (int)cfg->name.len, cfg->name.ptr,
                         (int)cfg->routing_type);
  if (cfg->max_consumers < -1)
    return mqr_error_set(err, MQR_EMAXCONSUMERS, "queue '%.*s': max-consumers %d is below -1 (unlimited)",
                         (int)cfg->name.len, cfg->name.ptr, cfg->max_consumers);
  mqr_queue_t *other = mqr_router_find_queue(r, cfg->name);
  if (other)
    return mqr_error_set(err, MQR_EQUEUEEXISTS, "queue '%.*s' already exists on address '%.*s'", (int)cfg->name.len,
                         cfg->name.ptr, (int)other->address->key.name.len, other->address->key.name.ptr);
  mqr_address_t *a = mqr_router_find_address(r, cfg->address);
  mqr_address_settings_t s;
  if (a == NULL || !mqr_routing_set_contains(a->key.info.types, cfg->routing_type)) {
    if (a)
      s = a->bind.cold->settings;
    else
      mqr_router_resolve_settings(r, cfg->address, &s);
    if (!cfg->auto_create_address || !s.auto_create_addresses) {
      if (a == NULL)
        return mqr_error_set(err, MQR_ENOADDR, "queue '%.*s': address '%.*s' does not exist", (int)cfg->name.len,
                             cfg->name.ptr, (int)cfg->address.len, cfg->address.ptr);
      return mqr_error_set(err, MQR_ETYPENOTSUPPORTED, "queue '%.*s': address '%.*s' does not support %s",
                           (int)cfg->name.len, cfg->name.ptr, (int)cfg->address.len, cfg->address.ptr,
                           mqr_routing_type_name(cfg->routing_type));
    }
  }
  bool created = false;
  mqr_address_info_t saved = {0};
  if (a == NULL) {
    mqr__key_t k = mqr__key(cfg->address.ptr, cfg->address.len);
    rc = mqr__router_create_address(r, &k, mqr_routing_set_of(cfg->routing_type), MQR_ADDRESS_AUTO_CREATED, &a, err);
    if (rc) return rc;
    created = true;
  } else {
    saved = a->key.info;
    if (!mqr_routing_set_contains(a->key.info.types, cfg->routing_type)) {
      mqr_address_info_t info = saved;
      mqr_address_info_add_type(&info, cfg->routing_type);
      mqr__address_set_info(r, a, info);
    }
  }
  rc = mqr__router_create_queue(r, cfg, a, out, err);
  if (rc) {
    if (created)
      mqr__router_drop_address(r, a);
    else
      mqr__address_set_info(r, a, saved);
  }
  return rc;
}

int mqr_router_remove_queue(mqr_router_t *r, mqr_str_t name, mqr_error_t *err) {
  mqr_queue_t *q = mqr_router_find_queue(r, name);
  if (q == NULL) return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist", (int)name.len, name.ptr);
  q->removing = true;
  plan_t p;
  if (plan_for(r, q->address, NULL, &p) != 0) {
    q->removing = false;
    return mqr_error_set(err, MQR_ENOMEM, "out of memory removing queue '%.*s'", (int)name.len, name.ptr);
  }
  plan_commit(&p);
  unlink_queue(r, q);
  retire_queue(r, q);
  return 0;
}

/* ---- listing -------------------------------------------------------------------- */

static int by_seq(const void *x, const void *y) {
  const mqr_address_t *a = *(mqr_address_t *const *)x, *b = *(mqr_address_t *const *)y;
  return a->bind.cold->seq < b->bind.cold->seq ? -1 : a->bind.cold->seq > b->bind.cold->seq;
}

int mqr_router_foreach_address(const mqr_router_t *r, mqr_address_cb cb, void *arg) {
  uint32_t n = RT(r)->addresses.count;
  if (n == 0) return 0;
  mqr_address_t **list = mqr_malloc(n * sizeof *list);
  if (list == NULL) return MQR_ENOMEM;
  uint32_t k = 0;
  mqr__slot_t *s = RT(r)->addresses.slots;
  for (uint32_t i = 0; i <= RT(r)->addresses.mask; i++)
    if (s[i].val) list[k++] = s[i].val;
  qsort(list, n, sizeof *list, by_seq);
  int rc = 0;
  for (uint32_t i = 0; i < n && rc == 0; i++) rc = cb(list[i], arg);
  mqr_free(list);
  return rc;
}
