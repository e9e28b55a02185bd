/* Diverts (Artemis's DivertImpl and its bindings): the router keeps them, lists on each
 * concrete address the ones that apply to it (its own and its matching patterns'), at
 * topology change, and a route picks from that list: every exclusive divert whose filter
 * matches, or failing those, one non-exclusive divert per routing name. Copying and
 * forwarding the message is the caller's (broker/divert.c). */
#include <strings.h>

#include "router_int.h"

static const char *const rt_names[] = {"STRIP", "PASS", "ANYCAST", "MULTICAST"};

const char *mqr_divert_routing_type_name(int t) { return t >= 0 && t <= 3 ? rt_names[t] : NULL; }

int mqr_divert_routing_type_parse(mqr_str_t text, mqr_divert_routing_t *out) {
  for (int t = 0; t <= 3; t++)
    if (text.len == strlen(rt_names[t]) && strncasecmp(text.ptr, rt_names[t], text.len) == 0) {
      *out = (mqr_divert_routing_t)t;
      return 0;
    }
  return MQR_EINVAL;
}

void mqr_divert_config_init(mqr_divert_config_t *cfg, mqr_str_t name, mqr_str_t address, mqr_str_t forwarding_address) {
  memset(cfg, 0, sizeof *cfg);
  cfg->name = name;
  cfg->address = address;
  cfg->forwarding_address = forwarding_address;
  cfg->routing_type = MQR_DIVERT_STRIP;
}

mqr_str_t mqr_divert_name(const mqr_divert_t *d) { return d->name; }
mqr_str_t mqr_divert_address(const mqr_divert_t *d) { return d->address; }
mqr_str_t mqr_divert_forwarding_address(const mqr_divert_t *d) { return d->forwarding; }
uint32_t mqr_divert_forward_count(const mqr_divert_t *d) { return d->n_forwards; }
mqr_str_t mqr_divert_forward(const mqr_divert_t *d, uint32_t i) { return d->forwards[i]; }
mqr_str_t mqr_divert_filter(const mqr_divert_t *d) { return d->filter_text; }
mqr_str_t mqr_divert_routing_name(const mqr_divert_t *d) { return d->routing_name; }
bool mqr_divert_exclusive(const mqr_divert_t *d) { return d->exclusive; }
mqr_divert_routing_t mqr_divert_routing_type(const mqr_divert_t *d) { return (mqr_divert_routing_t)d->routing_type; }
uint64_t mqr_divert_diverted(const mqr_divert_t *d) { return d->diverted; }
uint32_t mqr_router_divert_count(const mqr_router_t *r) { return RT(r)->n_diverts; }
mqr_divert_t *mqr_router_divert(const mqr_router_t *r, uint32_t i) { return RT(r)->diverts[i]; }
uint32_t mqr_address_divert_count(const mqr_address_t *a) { return a->bind.cold->n_dv; }
mqr_divert_t *mqr_address_divert(const mqr_address_t *a, uint32_t i) { return a->bind.cold->dv[i].d; }

mqr_divert_t *mqr_router_find_divert(const mqr_router_t *r, mqr_str_t name) {
  for (uint32_t i = 0; i < RT(r)->n_diverts; i++)
    if (mqr_str_eq(RT(r)->diverts[i]->name, name)) return RT(r)->diverts[i];
  return NULL;
}

static bool applies(const mqr_router_t *r, const mqr_divert_t *d, mqr_str_t address) {
  return d->pattern ? mqr_wildcard_match(&RT(r)->wildcard, d->address, address) : mqr_str_eq(d->address, address);
}

/* The list for address name, with `extra` counted as a divert of the router's and
 * `skip` not: exclusive diverts in creation order, then the non-exclusive ones grouped by
 * routing name, groups in the order of their first member. Turns are kept from old. */
static int build(const mqr_router_t *r, mqr_str_t name, mqr_divert_t *extra, const mqr_divert_t *skip,
                 const mqr__address_cold_t *old, mqr__dslot_t **out, uint32_t *n_out, uint32_t *n_excl) {
  uint32_t total = RT(r)->n_diverts + (extra ? 1 : 0), n = 0;
  *out = NULL;
  *n_out = *n_excl = 0;
  mqr_divert_t **cand = NULL;
  for (uint32_t pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < total; i++) {
      mqr_divert_t *d = i < RT(r)->n_diverts ? RT(r)->diverts[i] : extra;
      if (d == skip || !applies(r, d, name)) continue;
      if (pass == 1) cand[n] = d;
      n++;
    }
    if (pass == 0) {
      if (n == 0) return 0;
      if ((cand = mqr_malloc(n * sizeof *cand)) == NULL) return MQR_ENOMEM;
      n = 0;
    }
  }
  mqr__dslot_t *dv = mqr_calloc(n, sizeof *dv);
  if (dv == NULL) {
    mqr_free(cand);
    return MQR_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++)
    if (cand[i]->exclusive) dv[k++].d = cand[i];
  *n_excl = k;
  for (uint32_t i = 0; i < n; i++) {
    if (cand[i] == NULL || cand[i]->exclusive) continue;
    uint32_t start = k;
    mqr_str_t rn = cand[i]->routing_name;
    for (uint32_t j = i; j < n; j++)
      if (cand[j] && !cand[j]->exclusive && mqr_str_eq(cand[j]->routing_name, rn)) {
        dv[k++].d = cand[j];
        if (j != i) cand[j] = NULL;
      }
    for (uint32_t j = start; j < k; j++) dv[j].group_end = k;
    /* The group's turn, kept where the same group had one. */
    for (uint32_t j = old ? old->n_excl : 0; old && j < old->n_dv; j++)
      if (mqr_str_eq(old->dv[j].d->routing_name, rn)) {
        dv[start].cursor = old->dv[j].cursor < k - start ? old->dv[j].cursor : 0;
        break;
      }
  }
  mqr_free(cand);
  *out = dv;
  *n_out = n;
  return 0;
}

static void set_list(mqr_address_t *a, mqr__dslot_t *dv, uint32_t n, uint32_t n_excl) {
  mqr_free(a->bind.cold->dv);
  a->bind.cold->dv = dv;
  a->bind.cold->n_dv = n;
  a->bind.cold->n_excl = n_excl;
  a->bind.has_diverts = n != 0;
}

int mqr__divert_list(mqr_router_t *r, mqr_address_t *a) {
  if (RT(r)->n_diverts == 0 && a->bind.cold->n_dv == 0) return 0;
  mqr__dslot_t *dv;
  uint32_t n, ne;
  int rc = build(r, a->key.name, NULL, NULL, a->bind.cold, &dv, &n, &ne);
  if (rc == 0) set_list(a, dv, n, ne);
  return rc;
}

void mqr__divert_unlist(mqr_address_t *a) { set_list(a, NULL, 0, 0); }

/* Every concrete address d applies to gets its list again, with extra added or skip
 * left out: all lists are built first, so that a failure changes nothing. */
static int relist(mqr_router_t *r, mqr_divert_t *d, mqr_divert_t *extra, const mqr_divert_t *skip) {
  mqr__table_t *t = &RT(r)->addresses;
  mqr__slot_t *slots = t->slots;
  uint32_t n = 0;
  for (uint32_t i = 0; t->count && i <= t->mask; i++) {
    mqr_address_t *a = slots[i].val;
    if (a && !mqr__is_wildcard(a) && applies(r, d, a->key.name)) n++;
  }
  if (n == 0) return 0;
  struct built {
    mqr_address_t *a;
    mqr__dslot_t *dv;
    uint32_t n, ne;
  } *b = mqr_calloc(n, sizeof *b);
  if (b == NULL) return MQR_ENOMEM;
  uint32_t k = 0;
  int rc = 0;
  for (uint32_t i = 0; i <= t->mask && rc == 0; i++) {
    mqr_address_t *a = slots[i].val;
    if (!a || mqr__is_wildcard(a) || !applies(r, d, a->key.name)) continue;
    b[k].a = a;
    rc = build(r, a->key.name, extra, skip, a->bind.cold, &b[k].dv, &b[k].n, &b[k].ne);
    k++;
  }
  for (uint32_t i = 0; i < k; i++) {
    if (rc == 0)
      set_list(b[i].a, b[i].dv, b[i].n, b[i].ne);
    else
      mqr_free(b[i].dv);
  }
  mqr_free(b);
  return rc;
}

static int bad(mqr_error_t *err, mqr_str_t name, const char *why) {
  return mqr_error_set(err, MQR_EINVAL, "divert '%.*s': %s", (int)name.len, name.ptr, why);
}

static mqr_str_t trim(const char *p, size_t n) {
  while (n && (*p == ' ' || *p == '\t')) p++, n--;
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  return mqr_str_n(p, n);
}

int mqr_router_add_divert(mqr_router_t *r, const mqr_divert_config_t *cfg, mqr_divert_t **out, mqr_error_t *err) {
  mqr_str_t name = cfg->name;
  if (name.len == 0) return mqr_error_set(err, MQR_EINVAL, "a divert needs a name");
  if (cfg->address.len == 0) return bad(err, name, "no address to divert from");
  if (cfg->forwarding_address.len == 0) return bad(err, name, "no forwarding address");
  if ((unsigned)cfg->routing_type > MQR_DIVERT_MULTICAST) return bad(err, name, "bad routing type");
  mqr_str_t rname = cfg->routing_name.len ? cfg->routing_name : name;
  size_t total = name.len + cfg->address.len + cfg->forwarding_address.len + cfg->filter.len + rname.len;
  if (name.len > MQR__NAME_MAX || cfg->address.len > MQR__NAME_MAX || cfg->forwarding_address.len > MQR__NAME_MAX * 4)
    return mqr_error_set(err, MQR_ENAMETOOLONG, "divert '%.*s': a name too long", (int)(name.len > 64 ? 64 : name.len),
                         name.ptr);
  if (mqr_router_find_divert(r, name))
    return mqr_error_set(err, MQR_EDIVERTEXISTS, "divert '%.*s' already exists", (int)name.len, name.ptr);
  /* The forwarding addresses, checked before anything is made. */
  uint32_t nf = 1;
  for (size_t i = 0; i < cfg->forwarding_address.len; i++) nf += cfg->forwarding_address.ptr[i] == ',';
  for (size_t i = 0, s = 0; i <= cfg->forwarding_address.len; i++) {
    if (i < cfg->forwarding_address.len && cfg->forwarding_address.ptr[i] != ',') continue;
    mqr_str_t f = trim(cfg->forwarding_address.ptr + s, i - s);
    if (f.len == 0) return bad(err, name, "an empty forwarding address");
    if (mqr_wildcard_is_pattern(&RT(r)->wildcard, f))
      return bad(err, name, "a forwarding address must be concrete, not a wildcard");
    if (mqr_str_eq(f, cfg->address)) return bad(err, name, "it forwards to the address it diverts from");
    s = i + 1;
  }
  if (RT(r)->n_diverts == RT(r)->cap_diverts) {
    uint32_t ncap = RT(r)->cap_diverts ? RT(r)->cap_diverts * 2 : 8;
    void *p = mqr_realloc(RT(r)->diverts, ncap * sizeof *RT(r)->diverts);
    if (p == NULL) goto nomem;
    RT(r)->diverts = p;
    RT(r)->cap_diverts = ncap;
  }
  mqr_divert_t *d = mqr_calloc(1, sizeof *d + nf * sizeof(mqr_str_t) + total + 5);
  if (d == NULL) goto nomem;
  d->forwards = (mqr_str_t *)(d + 1);
  char *p = (char *)(d->forwards + nf);
#define COPY(field, src)                                                                                               \
  do {                                                                                                                 \
    if ((src).len) memcpy(p, (src).ptr, (src).len);                                                                    \
    p[(src).len] = 0;                                                                                                  \
    d->field = mqr_str_n(p, (src).len);                                                                                \
    p += (src).len + 1;                                                                                                \
  } while (0)
  COPY(name, name);
  COPY(address, cfg->address);
  COPY(forwarding, cfg->forwarding_address);
  COPY(filter_text, cfg->filter);
  COPY(routing_name, rname);
#undef COPY
  for (size_t i = 0, s = 0; i <= d->forwarding.len; i++) {
    if (i < d->forwarding.len && d->forwarding.ptr[i] != ',') continue;
    d->forwards[d->n_forwards++] = trim(d->forwarding.ptr + s, i - s);
    s = i + 1;
  }
  d->exclusive = cfg->exclusive;
  d->routing_type = (uint8_t)cfg->routing_type;
  d->pattern = mqr_wildcard_is_pattern(&RT(r)->wildcard, d->address);
  int rc = mqr_router_compile_filter(r, d->filter_text, &d->filter, err);
  if (rc) {
    mqr_free(d);
    return rc;
  }
  if (relist(r, d, d, NULL) != 0) {
    mqr_filter_free(d->filter);
    mqr_free(d);
    goto nomem;
  }
  RT(r)->diverts[RT(r)->n_diverts++] = d;
  if (out) *out = d;
  return 0;
nomem:
  return mqr_error_set(err, MQR_ENOMEM, "out of memory adding divert '%.*s'", (int)name.len, name.ptr);
}

int mqr_router_remove_divert(mqr_router_t *r, mqr_str_t name, mqr_error_t *err) {
  mqr_divert_t *d = mqr_router_find_divert(r, name);
  if (d == NULL) return mqr_error_set(err, MQR_ENODIVERT, "divert '%.*s' does not exist", (int)name.len, name.ptr);
  if (relist(r, d, NULL, d) != 0)
    return mqr_error_set(err, MQR_ENOMEM, "out of memory removing divert '%.*s'", (int)name.len, name.ptr);
  for (uint32_t i = 0; i < RT(r)->n_diverts; i++)
    if (RT(r)->diverts[i] == d) {
      memmove(RT(r)->diverts + i, RT(r)->diverts + i + 1, (RT(r)->n_diverts - i - 1) * sizeof *RT(r)->diverts);
      RT(r)->n_diverts--;
      break;
    }
  if (RT(r)->hold) { /* freed by mqr_router_release */
    d->removed = true;
    d->dead_next = RT(r)->dead_diverts;
    RT(r)->dead_diverts = d;
    return 0;
  }
  mqr_filter_free(d->filter);
  mqr_free(d);
  return 0;
}

bool mqr_divert_removed(const mqr_divert_t *d) { return d->removed; }

void mqr__diverts_release(mqr_router_t *r) {
  for (mqr_divert_t *d; (d = RT(r)->dead_diverts) != NULL;) {
    RT(r)->dead_diverts = d->dead_next;
    mqr_filter_free(d->filter);
    mqr_free(d);
  }
}

void mqr__diverts_free(mqr_router_t *r) {
  for (uint32_t i = 0; i < RT(r)->n_diverts; i++) {
    mqr_filter_free(RT(r)->diverts[i]->filter);
    mqr_free(RT(r)->diverts[i]);
  }
  mqr_free(RT(r)->diverts);
  RT(r)->diverts = NULL;
  RT(r)->n_diverts = RT(r)->cap_diverts = 0;
}
