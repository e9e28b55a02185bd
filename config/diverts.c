/* The diverts section (docs/config.md): a mapping from divert names to Artemis's divert
 * attributes; its accessors; and adding diverts to a router, or bringing a live router's
 * diverts up to a reloaded config (diverts apply on reload: removed, changed and new
 * ones alike). */

#include "config_int.h"
#include "mqr/filter.h"

static bool blank(mqr_str_t s) {
  for (size_t i = 0; i < s.len; i++)
    if (s.ptr[i] != ' ' && s.ptr[i] != '\t' && s.ptr[i] != '\n' && s.ptr[i] != '\r') return false;
  return true;
}

/* forwarding-address: a string (addresses separated by commas) or a list of strings,
 * kept as the comma-separated text. */
static char *forwarding(ctx_t *c, const pair_t *p) {
  if (p->value->type == YAML_SCALAR_NODE) {
    mqr_str_t s = mqr__cfg_scalar(p->value);
    return mqr__cfg_dup_n(c, s.ptr, s.len);
  }
  if (p->value->type != YAML_SEQUENCE_NODE) {
    ERR(c, p->value, "'forwarding-address' must be an address or a list of them, not %s", mqr__cfg_kind_name(p->value));
    return NULL;
  }
  size_t len = 0;
  yaml_node_item_t *start = p->value->data.sequence.items.start, *top = p->value->data.sequence.items.top;
  for (yaml_node_item_t *it = start; it < top; it++) {
    yaml_node_t *n = mqr__cfg_node(c, *it);
    if (n->type != YAML_SCALAR_NODE || memchr(n->data.scalar.value, ',', n->data.scalar.length)) {
      ERR(c, n, "each forwarding address must be one address (no commas), not %s", mqr__cfg_kind_name(n));
      return NULL;
    }
    len += n->data.scalar.length + 1;
  }
  char *out = mqr__cfg_dup_n(c, "", 0), *grown = out ? mqr_realloc(out, len + 1) : NULL;
  if (grown == NULL) {
    mqr_free(out);
    c->nomem = true;
    return NULL;
  }
  size_t at = 0;
  for (yaml_node_item_t *it = start; it < top; it++) {
    yaml_node_t *n = mqr__cfg_node(c, *it);
    if (at) grown[at++] = ',';
    memcpy(grown + at, n->data.scalar.value, n->data.scalar.length);
    at += n->data.scalar.length;
  }
  grown[at] = 0;
  return grown;
}

static void parse_one(ctx_t *c, const pair_t *d) {
  mqr_str_t name = mqr__cfg_scalar(d->key);
  char where[96];
  snprintf(where, sizeof where, "divert '%.*s'", (int)(name.len > 60 ? 60 : name.len), name.ptr);
  if (!mqr__cfg_want(c, d->value, YAML_MAPPING_NODE, where)) return;
  if (!mqr__cfg_grow(c, (void **)&c->cfg->diverts, c->cfg->n_diverts, &c->cfg->cap_diverts, sizeof(cfg_divert_t)))
    return;
  cfg_divert_t dv = {.rt = MQR_DIVERT_STRIP,
                     .line = (uint32_t)d->key->start_mark.line + 1,
                     .column = (uint32_t)d->key->start_mark.column + 1};
  dv.name = mqr__cfg_dup_n(c, name.ptr, name.len);
  static const char known[] = "address, forwarding-address, filter, exclusive, routing-type, routing-name";
  FOREACH_PAIR(c, d->value, p) {
    if (!mqr__cfg_key(c, d->value, p_it, &p, where)) continue;
    mqr_str_t s;
    if (mqr_str_eq(p.name, MQR_STR("address"))) {
      if (mqr__cfg_get_string(c, &p, &s)) {
        if (s.len == 0)
          ERR(c, p.value, "%s: 'address' must name an address", where);
        else
          mqr_free(dv.address), dv.address = mqr__cfg_dup_n(c, s.ptr, s.len);
      }
    } else if (mqr_str_eq(p.name, MQR_STR("forwarding-address"))) {
      mqr_free(dv.forwarding);
      dv.forwarding = forwarding(c, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("filter"))) {
      if (!mqr__cfg_get_string(c, &p, &s)) continue;
      mqr_filter_t *f = NULL;
      mqr_error_t fe;
      if (!blank(s) && mqr_filter_compile(s, NULL, NULL, &f, &fe) != 0) {
        ERR(c, p.value, "%s: filter: %s", where, fe.message);
        continue;
      }
      mqr_filter_free(f);
      mqr_free(dv.filter);
      dv.filter = mqr__cfg_dup_n(c, s.ptr, s.len);
    } else if (mqr_str_eq(p.name, MQR_STR("exclusive"))) {
      mqr__cfg_get_bool(c, &p, &dv.exclusive);
    } else if (mqr_str_eq(p.name, MQR_STR("routing-type"))) {
      if (mqr__cfg_get_string(c, &p, &s) && mqr_divert_routing_type_parse(s, &dv.rt) != 0)
        ERR(c, p.value, "%s: bad routing-type '%.*s' (expected STRIP, PASS, ANYCAST or MULTICAST)", where, (int)s.len,
            s.ptr);
    } else if (mqr_str_eq(p.name, MQR_STR("routing-name"))) {
      if (mqr__cfg_get_string(c, &p, &s)) mqr_free(dv.routing_name), dv.routing_name = mqr__cfg_dup_n(c, s.ptr, s.len);
    } else {
      mqr__cfg_unknown_key(c, &p, where, known);
    }
  }
  if (dv.address == NULL) ERR(c, d->key, "%s has no 'address'", where);
  if (dv.forwarding == NULL) ERR(c, d->key, "%s has no 'forwarding-address'", where);
  c->cfg->diverts[c->cfg->n_diverts++] = dv;
}

void mqr__cfg_parse_diverts(ctx_t *c, yaml_node_t *map) {
  if (mqr__cfg_is_null(map) || !mqr__cfg_want(c, map, YAML_MAPPING_NODE, "diverts")) return;
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "diverts")) continue;
    if (p.name.len == 0) {
      ERR(c, p.key, "a divert needs a name");
      continue;
    }
    parse_one(c, &p);
    if (c->nomem) return;
  }
}

void mqr__cfg_free_diverts(mqr_config_t *cfg) {
  for (uint32_t i = 0; i < cfg->n_diverts; i++) {
    cfg_divert_t *d = &cfg->diverts[i];
    mqr_free(d->name);
    mqr_free(d->address);
    mqr_free(d->forwarding);
    mqr_free(d->filter);
    mqr_free(d->routing_name);
  }
  mqr_free(cfg->diverts);
}

uint32_t mqr_config_divert_count(const mqr_config_t *cfg) { return cfg->n_diverts; }

bool mqr_config_divert(const mqr_config_t *cfg, uint32_t i, mqr_divert_config_t *out) {
  if (i >= cfg->n_diverts) return false;
  const cfg_divert_t *d = &cfg->diverts[i];
  mqr_divert_config_init(out, mqr_str(d->name), mqr_str(d->address ? d->address : ""),
                         mqr_str(d->forwarding ? d->forwarding : ""));
  out->filter = mqr_str(d->filter ? d->filter : "");
  out->routing_name = mqr_str(d->routing_name ? d->routing_name : "");
  out->exclusive = d->exclusive;
  out->routing_type = d->rt;
  return true;
}

int mqr__cfg_add_divert(const mqr_config_t *cfg, uint32_t i, mqr_router_t *r, mqr_error_t *err) {
  mqr_divert_config_t dc;
  mqr_config_divert(cfg, i, &dc);
  return mqr_router_add_divert(r, &dc, NULL, err);
}

/* Whether live divert d is what cfg's i-th says. */
static bool same(const mqr_config_t *cfg, uint32_t i, const mqr_divert_t *d) {
  mqr_divert_config_t dc;
  mqr_config_divert(cfg, i, &dc);
  mqr_str_t rn = dc.routing_name.len ? dc.routing_name : dc.name;
  return mqr_str_eq(dc.address, mqr_divert_address(d)) &&
         mqr_str_eq(dc.forwarding_address, mqr_divert_forwarding_address(d)) &&
         mqr_str_eq(dc.filter, mqr_divert_filter(d)) && mqr_str_eq(rn, mqr_divert_routing_name(d)) &&
         dc.exclusive == mqr_divert_exclusive(d) && dc.routing_type == mqr_divert_routing_type(d);
}

int mqr__cfg_apply_diverts(const mqr_config_t *cfg, const mqr_config_t *old, mqr_router_t *r,
                           void (*report)(void *ctx, bool applied, const char *line), void *ctx, mqr_error_t *err) {
  char line[300];
  mqr_error_t e;
  /* Gone from the config, or changed: removed (a changed one is added again below). */
  for (uint32_t i = 0; i < old->n_diverts; i++) {
    const char *name = old->diverts[i].name;
    mqr_divert_t *d = mqr_router_find_divert(r, mqr_str(name));
    if (d == NULL) continue;
    uint32_t k = 0;
    while (k < cfg->n_diverts && strcmp(cfg->diverts[k].name, name) != 0) k++;
    if (k < cfg->n_diverts && same(cfg, k, d)) continue;
    int rc = mqr_router_remove_divert(r, mqr_str(name), &e);
    if (rc) return mqr_error_set(err, rc, "%s", e.message);
    if (k == cfg->n_diverts && report) {
      snprintf(line, sizeof line, "divert '%s' removed", name);
      report(ctx, true, line);
    }
  }
  for (uint32_t i = 0; i < cfg->n_diverts; i++) {
    const cfg_divert_t *cd = &cfg->diverts[i];
    if (mqr_router_find_divert(r, mqr_str(cd->name))) continue;
    int rc = mqr__cfg_add_divert(cfg, i, r, &e);
    if (rc) return mqr_error_set_at(err, rc, cfg->file, cd->line, cd->column, "%s", e.message);
    bool was = false;
    for (uint32_t k = 0; k < old->n_diverts && !was; k++) was = strcmp(old->diverts[k].name, cd->name) == 0;
    if (report) {
      snprintf(line, sizeof line, "divert '%s' %s", cd->name, was ? "changed" : "added");
      report(ctx, true, line);
    }
  }
  return 0;
}
