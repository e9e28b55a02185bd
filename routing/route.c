/* Routing one send. The path for an existing concrete address: one pass over the name
 * (hash and `::` search together), one table probe, one AND against the routing-type
 * set, a walk over a precomputed array. No allocation, no strlen. The rarer paths
 * (auto-create, address::queue, dead-letter) live in their own functions below. */
#include <stdio.h>

#include "router_int.h"

const char *mqr_route_status_name(int status) {
  switch (status) {
  case MQR_ROUTE_OK: return "OK";
  case MQR_ROUTE_NO_BINDINGS: return "NO_BINDINGS";
  case MQR_ROUTE_NO_BINDINGS_DLA: return "NO_BINDINGS_DLA";
  case MQR_ROUTE_DUPLICATE_ID: return "DUPLICATE_ID";
  default: return "UNKNOWN";
  }
}

/* A route's view of its message for queue filters: its values are set in the router's
 * vocabulary the first time a filter needs them, and cleared when the route ends. */
typedef struct {
  const mqr_route_request_t *req;
  mqr_filter_vocab_t *vocab;
  bool filled;
} msgview_t;

__attribute__((noinline)) static bool filter_eval(const mqr_filter_t *f, msgview_t *m) {
  if (!m->filled) {
    m->filled = true;
    if (m->req->fill) m->req->fill(m->req->fill_ctx, m->vocab);
  }
  uint32_t n;
  const mqr_value_t *v = mqr_filter_vocab_values(m->vocab, &n);
  return mqr_filter_matches(f, v, n);
}

static inline bool eligible(const mqr_queue_t *q, msgview_t *m) {
  return q->enabled && !(q->purge_on_no_consumers && q->consumers == 0) &&
         (q->filter == NULL || filter_eval(q->filter, m));
}

/* The most queues a send to a can reach: its MULTICAST array and one ANYCAST queue per
 * group. */
static inline uint32_t max_targets(const mqr_address_t *a) { return a->bind.n_multicast + mqr__agroup_count(&a->bind); }

/* One ANYCAST queue of group qs[0..n), round-robin from *cursor: the first eligible queue
 * that has a consumer, else the first eligible one (Artemis BindingsImpl.getNextBinding). */
static inline mqr_queue_t *pick_anycast(mqr_queue_t *const *qs, uint32_t n, uint32_t *cursor, msgview_t *message) {
  if (n == 0) return NULL;
  uint32_t start = *cursor < n ? *cursor : 0, chosen = UINT32_MAX, fallback = UINT32_MAX;
  for (uint32_t k = 0, i = start; k < n; k++, i = i + 1 == n ? 0 : i + 1) {
    const mqr_queue_t *q = qs[i];
    if (!eligible(q, message)) continue;
    if (n == 1 || q->consumers > 0) {
      chosen = i;
      break;
    }
    if (fallback == UINT32_MAX) fallback = i;
  }
  if (chosen == UINT32_MAX) chosen = fallback;
  if (chosen == UINT32_MAX) return NULL;
  *cursor = chosen + 1 == n ? 0 : chosen + 1;
  return qs[chosen];
}

/* One ANYCAST queue of each group: the address's own, and each matching wildcard
 * address's (Artemis routes to one queue per routing name). */
__attribute__((noinline)) static uint32_t pick_groups(mqr__address_bind_t *h, msgview_t *message, mqr_queue_t **out) {
  mqr__agroups_t *g = mqr__agroups(h);
  uint32_t n = 0, start = 0;
  for (uint32_t i = 0; i < g->n; i++) {
    mqr_queue_t *q = pick_anycast(h->anycast + start, g->g[i].end - start, &g->g[i].cursor, message);
    if (q) out[n++] = q;
    start = g->g[i].end;
  }
  return n;
}

/* Fills res->queues with the targets of a send of type t (or NONE: both) to a. */
static inline uint32_t select_targets(mqr_address_t *a, int t, msgview_t *message, mqr_queue_t **out) {
  mqr__address_bind_t *h = &a->bind;
  uint32_t n = 0;
  if (t != MQR_ANYCAST) {
    for (uint32_t i = 0; i < h->n_multicast; i++)
      if (eligible(h->multicast[i], message)) out[n++] = h->multicast[i];
  }
  if (t != MQR_MULTICAST) {
    if (h->any_groups) return n + pick_groups(h, message, out + n);
    mqr_queue_t *q = pick_anycast(h->anycast, h->n_anycast, &h->cursor, message);
    if (q) out[n++] = q;
  }
  return n;
}

/* The diverts of a that take the message: every exclusive one whose filter matches; or,
 * with none, one non-exclusive divert per routing name, round-robin among those whose
 * filter matches (Artemis BindingsImpl.routeToExclusiveBindings, then simpleRouting).
 * An address::queue send meets the exclusive ones only. *exclusive says which. */
__attribute__((noinline)) static uint32_t select_diverts(mqr_address_t *a, msgview_t *m, bool fqqn, mqr_divert_t **out,
                                                         bool *exclusive) {
  mqr__address_cold_t *c = a->bind.cold;
  uint32_t n = 0;
  for (uint32_t i = 0; i < c->n_excl; i++) {
    mqr_divert_t *d = c->dv[i].d;
    if (d->filter == NULL || filter_eval(d->filter, m)) out[n++] = d;
  }
  *exclusive = n != 0;
  if (n || fqqn) return n;
  for (uint32_t start = c->n_excl; start < c->n_dv; start = c->dv[start].group_end) {
    uint32_t len = c->dv[start].group_end - start, at = c->dv[start].cursor < len ? c->dv[start].cursor : 0;
    for (uint32_t k = 0; k < len; k++, at = at + 1 == len ? 0 : at + 1) {
      mqr_divert_t *d = c->dv[start + at].d;
      if (d->filter && !filter_eval(d->filter, m)) continue;
      out[n++] = d;
      c->dv[start].cursor = at + 1 == len ? 0 : at + 1;
      break;
    }
  }
  return n;
}

/* Whether a has a queue of its own (a queue bound to a wildcard address that matches it
 * does not count: ARTEMIS-5337). Its own queues come first in its binding arrays. */
static inline bool has_own_queue(const mqr_address_t *a) {
  return (a->bind.n_anycast && a->bind.anycast[0]->address == a) ||
         (a->bind.n_multicast && a->bind.multicast[0]->address == a);
}

static const char wildcard_send[] = "is a wildcard: sends must name a concrete address";

static int addr_error(mqr_error_t *err, int code, mqr_str_t name, const char *why) {
  return mqr_error_set(err, code, "address '%.*s' %s", (int)name.len, name.ptr, why);
}

/* The address is missing: create it if the settings allow. */
static int auto_create_address(mqr_router_t *r, const mqr_route_request_t *req, const mqr__key_t *k, int t,
                               mqr_address_t **out, mqr_route_result_t *res, mqr_error_t *err) {
  mqr_str_t name = mqr_str_n(k->ptr, k->len);
  if (mqr_wildcard_is_pattern(&RT(r)->wildcard, name)) return addr_error(err, MQR_EWILDCARDSEND, name, wildcard_send);
  if (name.len > MQR__NAME_MAX)
    return mqr_error_set(err, MQR_ENAMETOOLONG, "address name of %zu bytes is too long", name.len);
  mqr_address_settings_t s;
  mqr_router_resolve_settings(r, name, &s);
  if (!s.auto_create_addresses)
    return addr_error(err, MQR_ENOADDR, name, "does not exist (auto-create-addresses is off)");
  int type = t != MQR_ROUTING_NONE ? t : (int)s.default_address_routing_type;
  int rc = RT(r)->create_check ? RT(r)->create_check(req->fill_ctx, MQR_ROUTE_CREATED_ADDRESS, name, false, err) : 0;
  if (rc) return rc;
  rc = mqr__router_create_address(r, k, mqr_routing_set_of(type), MQR_ADDRESS_AUTO_CREATED, out, err);
  if (rc == 0) res->flags |= MQR_ROUTE_CREATED_ADDRESS;
  return rc;
}

/* The address lacks routing type t: add it if the settings allow (ARTEMIS-4212: never
 * drop silently). The first type a send adds saves the info it had, for an undo. */
static int auto_add_type(mqr_router_t *r, const mqr_route_request_t *req, mqr_address_t *a, int t,
                         mqr_address_info_t *saved, mqr_route_result_t *res, mqr_error_t *err) {
  mqr_str_t name = a->key.name;
  if (!a->bind.cold->settings.auto_create_addresses) {
    char what[96];
    snprintf(what, sizeof what, "does not exist for routing type %s (auto-create-addresses is off)",
             mqr_routing_type_name(t));
    return addr_error(err, MQR_ENOADDR, name, what);
  }
  int rc = RT(r)->create_check ? RT(r)->create_check(req->fill_ctx, MQR_ROUTE_ADDED_TYPE, name, false, err) : 0;
  if (rc) return rc;
  if (!(res->flags & MQR_ROUTE_ADDED_TYPE)) *saved = a->key.info;
  mqr_address_info_t info = a->key.info;
  mqr_address_info_add_type(&info, t);
  mqr__address_set_info(r, a, info);
  res->flags |= MQR_ROUTE_ADDED_TYPE;
  return 0;
}

/* address::queue: finds the named queue of a, or says which queue to create (*make_type
 * set, *out NULL) when auto-create-queues allows. */
static int resolve_fqqn(mqr_router_t *r, mqr_address_t *a, mqr_str_t qname, int t, mqr_queue_t **out, int *make_type,
                        mqr_error_t *err) {
  if (qname.len == 0) return mqr_error_set(err, MQR_EEMPTYQUEUE, "empty queue name after '::'");
  mqr_queue_t *q = mqr_router_find_queue(r, qname);
  if (q && q->address != a)
    return mqr_error_set(err, MQR_EQUEUEADDR, "queue '%.*s' belongs to address '%.*s', not '%.*s'", (int)qname.len,
                         qname.ptr, (int)q->address->key.name.len, q->address->key.name.ptr, (int)a->key.name.len,
                         a->key.name.ptr);
  *out = q;
  if (q) return 0;
  if (!a->bind.cold->settings.auto_create_queues)
    return mqr_error_set(err, MQR_ENOQUEUE, "queue '%.*s' does not exist on address '%.*s' (auto-create-queues is off)",
                         (int)qname.len, qname.ptr, (int)a->key.name.len, a->key.name.ptr);
  if (qname.len > MQR__NAME_MAX)
    return mqr_error_set(err, MQR_ENAMETOOLONG, "queue name of %zu bytes is too long", qname.len);
  int type = t;
  if (type == MQR_ROUTING_NONE)
    type = mqr_routing_set_count(a->key.info.types) == 1 ? a->key.info.default_type
                                                         : (int)a->bind.cold->settings.default_queue_routing_type;
  *make_type = type;
  return 0;
}

static void count_routed(mqr_queue_t **qs, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) qs[i]->routed++;
}

/* Every step that can fail comes before the one that cannot be undone without
 * allocating (creating a queue); a failure undoes an address or routing type the send
 * created, so a refused send leaves the router as it was. */
static int route(mqr_router_t *r, const mqr_route_request_t *req, msgview_t *mv, mqr_route_result_t *res,
                 mqr_error_t *err) {
  const char *p = req->address.ptr;
  size_t len = req->address.len;
  int t = req->routing_type;
  res->count = 0;
  res->needed = 0;
  res->divert_count = 0;
  res->divert_needed = 0;
  res->flags = 0;
  res->address = NULL;
  res->status = MQR_ROUTE_NO_BINDINGS;
  if (t != MQR_ROUTING_NONE && (t < 0 || t >= MQR_ROUTING_TYPE_COUNT))
    return mqr_error_set(err, MQR_EINVAL, "bad routing type %d", t);

  if (req->prefixes) {
    mqr_str_t name = mqr_str_n(p, len);
    if (mqr_prefixes_strip(req->prefixes, &name, &t)) p = name.ptr, len = name.len;
  }

  /* One pass: the reads that hash the name also say whether it holds a ':'; only then
   * is "::" looked for, and the address part hashed again. */
  bool colon;
  mqr__key_t k = mqr__key_scan(p, len, &colon);
  size_t sep = len;
  if (colon) {
    for (size_t i = 0; i + 1 < len; i++)
      if (p[i] == ':' && p[i + 1] == ':') {
        sep = i;
        k = mqr__key(p, sep);
        break;
      }
  }
  mqr_str_t name = mqr_str_n(p, sep);
  if (name.len == 0) return mqr_error_set(err, MQR_EEMPTYADDR, "empty address name");

  /* The slot has the routing types and the flags: an existing address is found and
   * checked without reading it. */
  int rc;
  const mqr__slot_t *slot = mqr__table_slot(&RT(r)->addresses, &k);
  mqr_address_t *a, *created = NULL;
  mqr_routing_set_t types;
  mqr_address_info_t saved;
  if (slot == NULL) {
    if ((rc = auto_create_address(r, req, &k, t, &a, res, err)) != 0) return rc;
    created = a;
    types = a->key.info.types;
  } else if (slot->aux[MQR__AUX_FLAGS] & MQR_ADDRESS_WILDCARD) {
    /* address::queue names one queue, which may be a wildcard subscription's: that queue
     * alone gets the message. A wildcard address is no target otherwise. */
    mqr_queue_t *q = sep < len ? mqr_router_find_queue(r, mqr_str_n(p + sep + 2, len - sep - 2)) : NULL;
    if (q == NULL || q->address != slot->val) return addr_error(err, MQR_EWILDCARDSEND, name, wildcard_send);
    a = slot->val;
    types.bits = slot->aux[MQR__AUX_TYPES];
  } else {
    a = slot->val;
    types.bits = slot->aux[MQR__AUX_TYPES];
  }
  if (t != MQR_ROUTING_NONE && !mqr_routing_set_contains(types, t)) {
    if ((rc = auto_add_type(r, req, a, t, &saved, res, err)) != 0) goto undo;
  }

  /* Which queue, if any, this send creates: the named one of address::queue, or for an
   * ANYCAST send to an address without ANYCAST queues, one named after the address. */
  mqr_queue_t *fqqn = NULL;
  int make_type = MQR_ROUTING_NONE;
  mqr_str_t make_name = name;
  if (sep < len) {
    make_name = mqr_str_n(p + sep + 2, len - sep - 2);
    if ((rc = resolve_fqqn(r, a, make_name, t, &fqqn, &make_type, err)) != 0) goto undo;
    if (make_type != MQR_ROUTING_NONE && !mqr_routing_set_contains(a->key.info.types, make_type) &&
        (rc = auto_add_type(r, req, a, make_type, &saved, res, err)) != 0)
      goto undo;
  } else if ((t == MQR_ANYCAST || (t == MQR_ROUTING_NONE && a->key.info.default_type == MQR_ANYCAST)) &&
             !has_own_queue(a)) {
    /* An ANYCAST send (or one with no type to an address whose type is ANYCAST) to an
     * address with no queue of its own: a queue named after the address is made when
     * auto-create-queues allows, else the send is refused (ARTEMIS-2238), as Artemis's
     * ServerSessionImpl.checkAutoCreate decides. */
    mqr_queue_t *named = mqr_router_find_queue(r, name);
    if (named == NULL && a->bind.cold->settings.auto_create_queues) {
      make_type = MQR_ANYCAST;
    } else if (named == NULL || named->type != MQR_ANYCAST) {
      rc = named ? addr_error(err, MQR_ENOADDR, name, "has no queue of its own, and queue of its name is not ANYCAST")
                 : addr_error(err, MQR_ENOADDR, name,
                              "has no queue of its own for an ANYCAST send (auto-create-queues is off)");
      goto undo;
    }
  }

  /* Room first, so that a refused send changes nothing. */
  mqr_address_t *dla = NULL;
  uint32_t needed = sep < len ? 1 : max_targets(a) + (make_type == MQR_ANYCAST ? 1 : 0);
  if (a->bind.dla_no_route) { /* the bind line's copy: the cold part is not read per send */
    dla = mqr_router_find_address(r, a->bind.cold->settings.dead_letter_address);
    if (dla == a || (dla && mqr__is_wildcard(dla))) dla = NULL;
    if (dla && max_targets(dla) > needed) needed = max_targets(dla);
  }
  if (a->bind.has_diverts && res->divert_capacity < a->bind.cold->n_dv) {
    res->divert_needed = a->bind.cold->n_dv;
    rc = mqr_error_set(err, MQR_ENOSPC, "send to '%.*s' needs room for %u diverts, the result has %u", (int)name.len,
                       name.ptr, a->bind.cold->n_dv, res->divert_capacity);
    goto undo;
  }
  if (res->capacity < needed) {
    res->needed = needed;
    rc = mqr_error_set(err, MQR_ENOSPC, "send to '%.*s' needs room for %u queues, the result has %u", (int)name.len,
                       name.ptr, needed, res->capacity);
    goto undo;
  }
  bool check_dup = req->duplicate_id.len && a->bind.cold->settings.id_cache_size > 0;
  if (check_dup && a->bind.dups == NULL &&
      (rc = mqr__dupcache_create((uint32_t)a->bind.cold->settings.id_cache_size, &RT(r)->dups, &a->bind.dups)) != 0) {
    rc =
        rc == MQR_ELIMIT
            ? mqr_error_set(err, MQR_ELIMIT,
                            "the duplicate-id caches hold their limit (%zu bytes): no cache for '%.*s', whose send has "
                            "a duplicate id",
                            RT(r)->dups.limit, (int)name.len, name.ptr)
            : mqr_error_set(err, rc, "%s creating the duplicate-id cache of '%.*s'", mqr_strerror(rc), (int)name.len,
                            name.ptr);
    goto undo;
  }
  if (make_type != MQR_ROUTING_NONE) {
    mqr_queue_config_t cfg;
    mqr_queue_config_init(&cfg, make_name, name, (mqr_routing_type_t)make_type);
    mqr_queue_config_defaults(&cfg, &a->bind.cold->settings);
    cfg.auto_created = true;
    if (RT(r)->create_check &&
        (rc = RT(r)->create_check(req->fill_ctx, MQR_ROUTE_CREATED_QUEUE, make_name, cfg.durable, err)) != 0)
      goto undo;
    if ((rc = mqr__router_create_queue(r, &cfg, a, sep < len ? &fqqn : NULL, err)) != 0) goto undo;
    res->flags |= MQR_ROUTE_CREATED_QUEUE;
  }

  res->address = a;
  if (check_dup && mqr__dupcache_check_add(a->bind.dups, req->duplicate_id, &RT(r)->dups)) {
    res->status = MQR_ROUTE_DUPLICATE_ID;
    return 0;
  }
  uint32_t n;
  bool exclusive = false;
  if (a->bind.has_diverts) {
    res->divert_count = select_diverts(a, mv, sep < len, res->diverts, &exclusive);
    for (uint32_t i = 0; i < res->divert_count; i++) res->diverts[i]->diverted++;
  }
  if (exclusive)
    n = 0;
  else if (sep < len)
    n = eligible(fqqn, mv) ? (res->queues[0] = fqqn, 1u) : 0u;
  else
    n = select_targets(a, t, mv, res->queues);
  if (n) {
    a->bind.routed++;
    count_routed(res->queues, n);
    res->count = n;
    res->status = MQR_ROUTE_OK;
    return 0;
  }
  a->bind.cold->unrouted++;
  if (a->bind.dla_no_route) {
    /* Sent to the dead-letter address, as a send with no routing type: the status says
     * so whether or not a queue there took it (Artemis PostOfficeImpl.maybeSendToDLA). A
     * missing dead-letter address, or the address itself, takes nothing. */
    res->status = MQR_ROUTE_NO_BINDINGS_DLA;
    if (dla == NULL) return 0;
    res->address = dla;
    if ((n = select_targets(dla, MQR_ROUTING_NONE, mv, res->queues)) != 0) {
      dla->bind.routed++;
      count_routed(res->queues, n);
      res->count = n;
    } else {
      dla->bind.cold->unrouted++;
    }
    return 0;
  }
  res->status = MQR_ROUTE_NO_BINDINGS;
  return 0;

undo:
  if (created)
    mqr__router_drop_address(r, created);
  else if (res->flags & MQR_ROUTE_ADDED_TYPE)
    mqr__address_set_info(r, a, saved);
  res->flags = 0;
  return rc;
}

void mqr_router_set_create_check(mqr_router_t *r, mqr_router_create_check_fn fn) { RT(r)->create_check = fn; }

int mqr_router_route(mqr_router_t *r, const mqr_route_request_t *req, mqr_route_result_t *res, mqr_error_t *err) {
  msgview_t mv = {req, RT(r)->vocab, false};
  int rc = route(r, req, &mv, res, err);
  if (mv.filled) mqr_filter_vocab_clear(mv.vocab);
  return rc;
}

bool mqr_prefixes_strip(const mqr_prefixes_t *px, mqr_str_t *name, int *routing_type) {
  for (uint32_t i = 0; px && i < px->count; i++) {
    mqr_str_t t = px->items[i].text;
    if (t.len && t.len <= name->len && memcmp(name->ptr, t.ptr, t.len) == 0) {
      name->ptr += t.len;
      name->len -= t.len;
      *routing_type = px->items[i].type;
      return true;
    }
  }
  return false;
}
