/* The config document: wildcard syntax, address settings, addresses and queues;
 * loading; the accessors (config_int.h). */

#include <stdlib.h>

#include <strings.h>

#include "config_int.h"
#include "mqr/filter.h"

/* Nothing but white space: no filter, as Artemis reads it. */
static bool blank(mqr_str_t s) {
  for (size_t i = 0; i < s.len; i++)
    if (s.ptr[i] != ' ' && s.ptr[i] != '\t' && s.ptr[i] != '\n' && s.ptr[i] != '\r') return false;
  return true;
}

/* ---- wildcard-addresses ----------------------------------------------------------- */

void mqr__cfg_parse_wildcard(ctx_t *c, yaml_node_t *map) {
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, "wildcard-addresses")) return;
  static const char known[] = "delimiter, any-words, single-word, escape";
  mqr_wildcard_t wc = mqr_wildcard_default();
  uint32_t before = c->errors;
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "wildcard-addresses")) continue;
    char *slot = mqr_str_eq(p.name, MQR_STR("delimiter"))     ? &wc.delimiter
                 : mqr_str_eq(p.name, MQR_STR("any-words"))   ? &wc.any_words
                 : mqr_str_eq(p.name, MQR_STR("single-word")) ? &wc.single_word
                 : mqr_str_eq(p.name, MQR_STR("escape"))      ? &wc.escape
                                                              : NULL;
    if (slot == NULL) {
      mqr__cfg_unknown_key(c, &p, "wildcard-addresses", known);
      continue;
    }
    mqr_str_t v;
    if (!mqr__cfg_get_string(c, &p, &v)) continue;
    if (v.len != 1) {
      ERR(c, p.value, "'%.*s' must be exactly one character, not '%.*s'", (int)p.name.len, p.name.ptr, (int)v.len,
          v.ptr);
      continue;
    }
    *slot = v.ptr[0];
  }
  if (c->errors != before) return;
  mqr_error_t e;
  if (mqr_wildcard_validate(&wc, &e) != 0) {
    ERR(c, map, "wildcard-addresses: %s", e.message);
    return;
  }
  c->cfg->wildcard = wc;
}

/* ---- address-settings ------------------------------------------------------------- */

/* A string setting the config keeps (set: it was given): its copy, and the view of it. */
static char *keep(ctx_t *c, bool set, mqr_str_t v, mqr_str_t *field) {
  if (!set) return NULL;
  char *copy = mqr__cfg_dup_n(c, v.ptr, v.len);
  *field = mqr_str_n(copy, copy ? v.len : 0);
  return copy;
}

/* An expiry delay (or a delay before dispatch): a duration, or -1 for none. */
static bool expiry_delay(ctx_t *c, const pair_t *p, int64_t *out) {
  if (p->value->type == YAML_SCALAR_NODE && mqr_str_eq(mqr__cfg_scalar(p->value), MQR_STR("-1"))) {
    *out = -1;
    return true;
  }
  return mqr__cfg_get_duration(c, p, INT64_MAX / 16, out);
}

static void parse_one_settings(ctx_t *c, const pair_t *entry) {
  mqr_config_t *cfg = c->cfg;
  mqr_str_t match = mqr__cfg_scalar(entry->key);
  mqr_error_t e;
  if (mqr_settings_match_validate(&cfg->wildcard, match, &e) != 0) {
    ERR(c, entry->key, "address-settings: %s", e.message);
    return;
  }
  for (uint32_t i = 0; i < cfg->n_settings; i++)
    if (strlen(cfg->settings[i].match) == match.len && memcmp(cfg->settings[i].match, match.ptr, match.len) == 0) {
      ERR(c, entry->key, "address-settings for match '%.*s' repeated (first at line %u)", (int)match.len, match.ptr,
          cfg->settings[i].line);
      return;
    }
  cfg_settings_t s = {0};
  s.line = (uint32_t)entry->key->start_mark.line + 1;
  s.column = (uint32_t)entry->key->start_mark.column + 1;
  mqr_str_t dla = {0}, dlq_prefix = {0}, dlq_suffix = {0}, exa = {0}, exq_prefix = {0}, exq_suffix = {0}, dlvk = {0},
            dgfk = {0};
  yaml_node_t *map = entry->value;
  if (!mqr__cfg_is_null(map)) {
    char where[160];
    snprintf(where, sizeof where, "address-settings '%.*s'", (int)match.len, match.ptr);
    if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, where)) return;
    static const char known[] =
        "auto-create-addresses, auto-create-queues, default-address-routing-type, default-queue-routing-type, "
        "dead-letter-address, send-to-dla-on-no-route, id-cache-size, max-size-bytes, address-full-policy, "
        "max-delivery-attempts, auto-create-dead-letter-resources, dead-letter-queue-prefix, "
        "dead-letter-queue-suffix, redelivery-delay, redelivery-delay-multiplier, max-redelivery-delay, "
        "expiry-address, auto-create-expiry-resources, expiry-queue-prefix, expiry-queue-suffix, expiry-delay, "
        "min-expiry-delay, max-expiry-delay, default-exclusive-queue, default-last-value-queue, "
        "default-last-value-key, default-group-buckets, default-group-rebalance, default-ring-size, "
        "default-consumers-before-dispatch, default-delay-before-dispatch, auto-delete-queues, "
        "auto-delete-queues-delay, auto-delete-queues-message-count, auto-delete-addresses, "
        "auto-delete-addresses-delay, default-group-first-key, default-non-destructive, config-delete-queues, "
        "config-delete-addresses, replicated";
    FOREACH_PAIR(c, map, p) {
      if (!mqr__cfg_key(c, map, p_it, &p, where)) continue;
      int64_t v;
      if (mqr_str_eq(p.name, MQR_STR("auto-create-addresses"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.auto_create_addresses)) s.s.set |= MQR_SET_AUTO_CREATE_ADDRESSES;
      } else if (mqr_str_eq(p.name, MQR_STR("replicated"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.replicated)) s.s.set |= MQR_SET_REPLICATED;
      } else if (mqr_str_eq(p.name, MQR_STR("auto-create-queues"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.auto_create_queues)) s.s.set |= MQR_SET_AUTO_CREATE_QUEUES;
      } else if (mqr_str_eq(p.name, MQR_STR("send-to-dla-on-no-route"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.send_to_dla_on_no_route)) s.s.set |= MQR_SET_SEND_TO_DLA_ON_NO_ROUTE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-address-routing-type"))) {
        if (mqr__cfg_get_routing_type(c, p.value, "default-address-routing-type", &s.s.default_address_routing_type))
          s.s.set |= MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-queue-routing-type"))) {
        if (mqr__cfg_get_routing_type(c, p.value, "default-queue-routing-type", &s.s.default_queue_routing_type))
          s.s.set |= MQR_SET_DEFAULT_QUEUE_ROUTING_TYPE;
      } else if (mqr_str_eq(p.name, MQR_STR("dead-letter-address"))) {
        if (mqr__cfg_get_string(c, &p, &dla)) {
          if (dla.len == 0 || mqr_wildcard_is_pattern(&cfg->wildcard, dla))
            ERR(c, p.value, "dead-letter-address must name a concrete address");
          else
            s.s.set |= MQR_SET_DEAD_LETTER_ADDRESS;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("id-cache-size"))) {
        if (mqr__cfg_get_int(c, &p, false, 0, 1 << 24, &v)) {
          s.s.id_cache_size = (int32_t)v;
          s.s.set |= MQR_SET_ID_CACHE_SIZE;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("max-size-bytes"))) {
        if (mqr__cfg_get_int(c, &p, true, -1, INT64_MAX, &v)) {
          s.s.max_size_bytes = v;
          s.s.set |= MQR_SET_MAX_SIZE_BYTES;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("max-delivery-attempts"))) {
        if (mqr__cfg_get_int(c, &p, false, -1, INT32_MAX, &v)) {
          s.s.max_delivery_attempts = (int32_t)v;
          s.s.set |= MQR_SET_MAX_DELIVERY_ATTEMPTS;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("auto-create-dead-letter-resources"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.auto_create_dead_letter_resources))
          s.s.set |= MQR_SET_AUTO_CREATE_DEAD_LETTER;
      } else if (mqr_str_eq(p.name, MQR_STR("dead-letter-queue-prefix"))) {
        if (mqr__cfg_get_string(c, &p, &dlq_prefix)) s.s.set |= MQR_SET_DEAD_LETTER_QUEUE_PREFIX;
      } else if (mqr_str_eq(p.name, MQR_STR("dead-letter-queue-suffix"))) {
        if (mqr__cfg_get_string(c, &p, &dlq_suffix)) s.s.set |= MQR_SET_DEAD_LETTER_QUEUE_SUFFIX;
      } else if (mqr_str_eq(p.name, MQR_STR("redelivery-delay"))) {
        if (mqr__cfg_get_duration(c, &p, INT64_MAX / 16, &s.s.redelivery_delay)) s.s.set |= MQR_SET_REDELIVERY_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("max-redelivery-delay"))) {
        if (mqr__cfg_get_duration(c, &p, INT64_MAX / 16, &s.s.max_redelivery_delay))
          s.s.set |= MQR_SET_MAX_REDELIVERY_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("redelivery-delay-multiplier"))) {
        char buf[64], *end = NULL;
        mqr_str_t t = p.value->type == YAML_SCALAR_NODE ? mqr__cfg_scalar(p.value) : mqr_str_n("", 0);
        double d = 0;
        if (t.len > 0 && t.len < sizeof buf) {
          memcpy(buf, t.ptr, t.len);
          buf[t.len] = 0;
          d = strtod(buf, &end);
        }
        if (end == NULL || *end != 0 || !(d >= 1.0 && d < 1e6))
          ERR(c, p.value, "redelivery-delay-multiplier must be a number of at least 1.0");
        else {
          s.s.redelivery_multiplier = d;
          s.s.set |= MQR_SET_REDELIVERY_MULTIPLIER;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("expiry-address"))) {
        if (mqr__cfg_get_string(c, &p, &exa)) {
          if (exa.len == 0 || mqr_wildcard_is_pattern(&cfg->wildcard, exa))
            ERR(c, p.value, "expiry-address must name a concrete address");
          else
            s.s.set |= MQR_SET_EXPIRY_ADDRESS;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("auto-create-expiry-resources"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.auto_create_expiry_resources)) s.s.set |= MQR_SET_AUTO_CREATE_EXPIRY;
      } else if (mqr_str_eq(p.name, MQR_STR("expiry-queue-prefix"))) {
        if (mqr__cfg_get_string(c, &p, &exq_prefix)) s.s.set |= MQR_SET_EXPIRY_QUEUE_PREFIX;
      } else if (mqr_str_eq(p.name, MQR_STR("expiry-queue-suffix"))) {
        if (mqr__cfg_get_string(c, &p, &exq_suffix)) s.s.set |= MQR_SET_EXPIRY_QUEUE_SUFFIX;
      } else if (mqr_str_eq(p.name, MQR_STR("expiry-delay"))) {
        if (expiry_delay(c, &p, &s.s.expiry_delay)) s.s.set |= MQR_SET_EXPIRY_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("min-expiry-delay"))) {
        if (expiry_delay(c, &p, &s.s.min_expiry_delay)) s.s.set |= MQR_SET_MIN_EXPIRY_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("max-expiry-delay"))) {
        if (expiry_delay(c, &p, &s.s.max_expiry_delay)) s.s.set |= MQR_SET_MAX_EXPIRY_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("default-exclusive-queue"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.default_exclusive_queue)) s.s.set |= MQR_SET_DEFAULT_EXCLUSIVE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-last-value-queue"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.default_last_value_queue)) s.s.set |= MQR_SET_DEFAULT_LAST_VALUE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-last-value-key"))) {
        if (mqr__cfg_get_string(c, &p, &dlvk)) s.s.set |= MQR_SET_DEFAULT_LAST_VALUE_KEY;
      } else if (mqr_str_eq(p.name, MQR_STR("default-group-buckets"))) {
        if (mqr__cfg_get_int(c, &p, false, -1, 1 << 20, &v)) {
          s.s.default_group_buckets = (int32_t)v;
          s.s.set |= MQR_SET_DEFAULT_GROUP_BUCKETS;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("default-group-rebalance"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.default_group_rebalance)) s.s.set |= MQR_SET_DEFAULT_GROUP_REBALANCE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-ring-size"))) {
        if (mqr__cfg_get_int(c, &p, false, -1, INT64_MAX, &v)) {
          s.s.default_ring_size = v;
          s.s.set |= MQR_SET_DEFAULT_RING_SIZE;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("default-consumers-before-dispatch"))) {
        if (mqr__cfg_get_int(c, &p, false, 0, INT32_MAX, &v)) {
          s.s.default_consumers_before_dispatch = (int32_t)v;
          s.s.set |= MQR_SET_DEFAULT_CONSUMERS_BEFORE;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("default-delay-before-dispatch"))) {
        if (expiry_delay(c, &p, &s.s.default_delay_before_dispatch)) s.s.set |= MQR_SET_DEFAULT_DELAY_BEFORE;
      } else if (mqr_str_eq(p.name, MQR_STR("auto-delete-queues"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.auto_delete_queues)) s.s.set |= MQR_SET_AUTO_DELETE_QUEUES;
      } else if (mqr_str_eq(p.name, MQR_STR("auto-delete-queues-delay"))) {
        if (mqr__cfg_get_duration(c, &p, INT64_MAX / 16, &s.s.auto_delete_queues_delay))
          s.s.set |= MQR_SET_AUTO_DELETE_QUEUES_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("auto-delete-queues-message-count"))) {
        if (mqr__cfg_get_int(c, &p, false, -1, INT64_MAX, &v)) {
          s.s.auto_delete_queues_message_count = v;
          s.s.set |= MQR_SET_AUTO_DELETE_QUEUES_COUNT;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("auto-delete-addresses"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.auto_delete_addresses)) s.s.set |= MQR_SET_AUTO_DELETE_ADDRESSES;
      } else if (mqr_str_eq(p.name, MQR_STR("default-non-destructive"))) {
        if (mqr__cfg_get_bool(c, &p, &s.s.default_non_destructive)) s.s.set |= MQR_SET_DEFAULT_NON_DESTRUCTIVE;
      } else if (mqr_str_eq(p.name, MQR_STR("default-group-first-key"))) {
        if (mqr__cfg_get_string(c, &p, &dgfk)) s.s.set |= MQR_SET_DEFAULT_GROUP_FIRST_KEY;
      } else if (mqr_str_eq(p.name, MQR_STR("auto-delete-addresses-delay"))) {
        if (mqr__cfg_get_duration(c, &p, INT64_MAX / 16, &s.s.auto_delete_addresses_delay))
          s.s.set |= MQR_SET_AUTO_DELETE_ADDRESSES_DELAY;
      } else if (mqr_str_eq(p.name, MQR_STR("config-delete-queues")) ||
                 mqr_str_eq(p.name, MQR_STR("config-delete-addresses"))) {
        bool queues = mqr_str_eq(p.name, MQR_STR("config-delete-queues"));
        mqr_str_t t = p.value->type == YAML_SCALAR_NODE ? mqr__cfg_scalar(p.value) : mqr_str_n(NULL, 0);
        bool force = t.len == 5 && strncasecmp(t.ptr, "FORCE", 5) == 0;
        if (!force && !(t.len == 3 && strncasecmp(t.ptr, "OFF", 3) == 0)) {
          ERR(c, p.value, "%s must be OFF or FORCE", queues ? "config-delete-queues" : "config-delete-addresses");
        } else if (queues) {
          s.s.config_delete_queues = force;
          s.s.set |= MQR_SET_CONFIG_DELETE_QUEUES;
        } else {
          s.s.config_delete_addresses = force;
          s.s.set |= MQR_SET_CONFIG_DELETE_ADDRESSES;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("address-full-policy"))) {
        if (p.value->type != YAML_SCALAR_NODE ||
            mqr_full_policy_parse(mqr__cfg_scalar(p.value), &s.s.address_full_policy) != 0)
          ERR(c, p.value, "address-full-policy must be BLOCK, FAIL, DROP or PAGE");
        else
          s.s.set |= MQR_SET_ADDRESS_FULL_POLICY;
      } else {
        mqr__cfg_unknown_key(c, &p, where, known);
      }
    }
  }
  if (!mqr__cfg_grow(c, (void **)&cfg->settings, cfg->n_settings, &cfg->cap_settings, sizeof *cfg->settings)) return;
  s.match = mqr__cfg_dup_n(c, match.ptr, match.len);
  s.dla = (s.s.set & MQR_SET_DEAD_LETTER_ADDRESS) ? mqr__cfg_dup_n(c, dla.ptr, dla.len) : NULL;
  if (s.dla) s.s.dead_letter_address = mqr_str_n(s.dla, dla.len);
  s.dlq_prefix = keep(c, s.s.set & MQR_SET_DEAD_LETTER_QUEUE_PREFIX, dlq_prefix, &s.s.dead_letter_queue_prefix);
  s.dlq_suffix = keep(c, s.s.set & MQR_SET_DEAD_LETTER_QUEUE_SUFFIX, dlq_suffix, &s.s.dead_letter_queue_suffix);
  s.exa = keep(c, s.s.set & MQR_SET_EXPIRY_ADDRESS, exa, &s.s.expiry_address);
  s.exq_prefix = keep(c, s.s.set & MQR_SET_EXPIRY_QUEUE_PREFIX, exq_prefix, &s.s.expiry_queue_prefix);
  s.exq_suffix = keep(c, s.s.set & MQR_SET_EXPIRY_QUEUE_SUFFIX, exq_suffix, &s.s.expiry_queue_suffix);
  s.dlvk = keep(c, s.s.set & MQR_SET_DEFAULT_LAST_VALUE_KEY, dlvk, &s.s.default_last_value_key);
  s.dgfk = keep(c, s.s.set & MQR_SET_DEFAULT_GROUP_FIRST_KEY, dgfk, &s.s.default_group_first_key);
  cfg->settings[cfg->n_settings++] = s;
}

void mqr__cfg_parse_settings(ctx_t *c, yaml_node_t *map) {
  if (mqr__cfg_is_null(map) || !mqr__cfg_want(c, map, YAML_MAPPING_NODE, "address-settings")) return;
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_check_key(c, p.key, "address-settings")) continue;
    parse_one_settings(c, &p);
    if (c->nomem) return;
  }
}

/* ---- addresses -------------------------------------------------------------------- */

static void parse_queue(ctx_t *c, cfg_address_t *a, mqr_routing_type_t type, yaml_node_t *key, yaml_node_t *map) {
  mqr_str_t name = mqr__cfg_scalar(key);
  if (name.len == 0) {
    ERR(c, key, "empty queue name on address '%s'", a->name);
    return;
  }
  cfg_queue_t q = {0};
  q.type = type;
  q.durable = true;
  q.enabled = true;
  q.max_consumers = -1;
  q.ring_size = -1;
  q.group_buckets = -1;
  q.delay_before_dispatch = -1;
  mqr_str_t lvk = {0}, gfk = {0};
  bool last_value = false;
  q.line = (uint32_t)key->start_mark.line + 1;
  q.column = (uint32_t)key->start_mark.column + 1;
  mqr_str_t filter = {0};
  if (map && !mqr__cfg_is_null(map)) {
    char where[160];
    snprintf(where, sizeof where, "queue '%.*s'", (int)name.len, name.ptr);
    if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, where)) return;
    static const char known[] =
        "durable, max-consumers, purge-on-no-consumers, enabled, filter, exclusive, last-value, last-value-key, "
        "ring-size, group-buckets, group-rebalance, group-first-key, consumers-before-dispatch, delay-before-dispatch, "
        "non-destructive";
    FOREACH_PAIR(c, map, p) {
      if (!mqr__cfg_key(c, map, p_it, &p, where)) continue;
      int64_t v;
      if (mqr_str_eq(p.name, MQR_STR("durable")))
        mqr__cfg_get_bool(c, &p, &q.durable);
      else if (mqr_str_eq(p.name, MQR_STR("purge-on-no-consumers")))
        mqr__cfg_get_bool(c, &p, &q.purge_on_no_consumers);
      else if (mqr_str_eq(p.name, MQR_STR("enabled")))
        mqr__cfg_get_bool(c, &p, &q.enabled);
      else if (mqr_str_eq(p.name, MQR_STR("max-consumers"))) {
        if (mqr__cfg_get_int(c, &p, false, INT32_MIN, INT32_MAX, &v)) {
          if (v < -1)
            ERR(c, p.value, "max-consumers must be -1 (unlimited) or at least 0, not %" PRId64, v);
          else
            q.max_consumers = (int32_t)v;
        }
      } else if (mqr_str_eq(p.name, MQR_STR("exclusive"))) {
        mqr__cfg_get_bool(c, &p, &q.exclusive);
      } else if (mqr_str_eq(p.name, MQR_STR("last-value"))) {
        mqr__cfg_get_bool(c, &p, &last_value);
      } else if (mqr_str_eq(p.name, MQR_STR("last-value-key"))) {
        if (mqr__cfg_get_string(c, &p, &lvk) && lvk.len == 0) ERR(c, p.value, "last-value-key must not be empty");
      } else if (mqr_str_eq(p.name, MQR_STR("non-destructive"))) {
        mqr__cfg_get_bool(c, &p, &q.non_destructive);
      } else if (mqr_str_eq(p.name, MQR_STR("group-first-key"))) {
        if (mqr__cfg_get_string(c, &p, &gfk) && gfk.len == 0) ERR(c, p.value, "group-first-key must not be empty");
      } else if (mqr_str_eq(p.name, MQR_STR("group-buckets"))) {
        if (mqr__cfg_get_int(c, &p, false, -1, 1 << 20, &v)) q.group_buckets = (int32_t)v;
      } else if (mqr_str_eq(p.name, MQR_STR("consumers-before-dispatch"))) {
        if (mqr__cfg_get_int(c, &p, false, 0, INT32_MAX, &v)) q.consumers_before_dispatch = (int32_t)v;
      } else if (mqr_str_eq(p.name, MQR_STR("delay-before-dispatch"))) {
        if (p.value->type == YAML_SCALAR_NODE && mqr_str_eq(mqr__cfg_scalar(p.value), MQR_STR("-1")))
          q.delay_before_dispatch = -1;
        else
          mqr__cfg_get_duration(c, &p, INT64_MAX / 16, &q.delay_before_dispatch);
      } else if (mqr_str_eq(p.name, MQR_STR("group-rebalance"))) {
        mqr__cfg_get_bool(c, &p, &q.group_rebalance);
      } else if (mqr_str_eq(p.name, MQR_STR("ring-size"))) {
        if (mqr__cfg_get_int(c, &p, false, -1, INT64_MAX, &v)) q.ring_size = v;
      } else if (mqr_str_eq(p.name, MQR_STR("filter"))) {
        mqr_filter_t *f = NULL;
        mqr_error_t fe;
        if (mqr__cfg_get_string(c, &p, &filter) && !blank(filter) &&
            mqr_filter_compile(filter, NULL, NULL, &f, &fe) != 0)
          ERR(c, p.value, "queue '%.*s': filter: %s", (int)name.len, name.ptr, fe.message);
        mqr_filter_free(f);
      } else
        mqr__cfg_unknown_key(c, &p, where, known);
    }
  }
  if (!mqr__cfg_grow(c, (void **)&a->queues, a->n_queues, &a->cap_queues, sizeof *a->queues)) return;
  q.name = mqr__cfg_dup_n(c, name.ptr, name.len);
  q.filter = filter.len ? mqr__cfg_dup_n(c, filter.ptr, filter.len) : NULL;
  if (lvk.len)
    q.last_value_key = mqr__cfg_dup_n(c, lvk.ptr, lvk.len);
  else if (last_value) /* without a key: Artemis's _AMQ_LVQ_NAME */
    q.last_value_key = mqr__cfg_dup_n(c, MQR_PROP_LAST_VALUE, sizeof MQR_PROP_LAST_VALUE - 1);
  if (gfk.len) q.group_first_key = mqr__cfg_dup_n(c, gfk.ptr, gfk.len);
  a->queues[a->n_queues++] = q;
  c->cfg->n_queues++;
}

static void parse_queue_section(ctx_t *c, cfg_address_t *a, mqr_routing_type_t type, const pair_t *sec) {
  yaml_node_t *v = sec->value;
  if (mqr__cfg_is_null(v)) return;
  if (v->type == YAML_MAPPING_NODE) {
    FOREACH_PAIR(c, v, p) {
      if (!mqr__cfg_check_key(c, p.key, "a queue list")) continue;
      parse_queue(c, a, type, p.key, p.value);
      if (c->nomem) return;
    }
  } else if (v->type == YAML_SEQUENCE_NODE) {
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
      yaml_node_t *n = mqr__cfg_node(c, *it);
      if (n->type != YAML_SCALAR_NODE) {
        ERR(c, n, "items of '%.*s' must be queue names, not %s (use a mapping for queue attributes)",
            (int)sec->name.len, sec->name.ptr, mqr__cfg_kind_name(n));
        continue;
      }
      parse_queue(c, a, type, n, NULL);
      if (c->nomem) return;
    }
  } else {
    ERR(c, v, "'%.*s' must be a mapping of queue names to attributes, or a list of queue names", (int)sec->name.len,
        sec->name.ptr);
  }
}

static void parse_routing_types(ctx_t *c, cfg_address_t *a, const pair_t *p) {
  yaml_node_t *v = p->value;
  mqr_routing_set_t s = mqr_routing_set_empty();
  if (v->type == YAML_SCALAR_NODE) {
    mqr_error_t e;
    if (mqr_routing_set_parse(mqr__cfg_scalar(v), &s, &e) != 0) {
      ERR(c, v, "address '%s': %s", a->name, e.message);
      return;
    }
  } else if (v->type == YAML_SEQUENCE_NODE) {
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
      mqr_routing_type_t t;
      if (!mqr__cfg_get_routing_type(c, mqr__cfg_node(c, *it), "routing-types", &t)) return;
      s = mqr_routing_set_add(s, t);
    }
  } else {
    ERR(c, v, "routing-types must be a list such as [ANYCAST, MULTICAST], not %s", mqr__cfg_kind_name(v));
    return;
  }
  a->has_types = true;
  a->types = s;
}

static void parse_address(ctx_t *c, const pair_t *entry) {
  mqr_config_t *cfg = c->cfg;
  mqr_str_t name = mqr__cfg_scalar(entry->key);
  if (name.len == 0) {
    ERR(c, entry->key, "empty address name");
    return;
  }
  if (!mqr__cfg_grow(c, (void **)&cfg->addresses, cfg->n_addresses, &cfg->cap_addresses, sizeof *cfg->addresses))
    return;
  cfg_address_t *a = &cfg->addresses[cfg->n_addresses++];
  memset(a, 0, sizeof *a);
  a->name = mqr__cfg_dup_n(c, name.ptr, name.len);
  a->line = (uint32_t)entry->key->start_mark.line + 1;
  a->column = (uint32_t)entry->key->start_mark.column + 1;
  if (a->name == NULL) return;
  yaml_node_t *map = entry->value;
  if (mqr__cfg_is_null(map)) return;
  char where[160];
  snprintf(where, sizeof where, "address '%s'", a->name);
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, where)) return;
  const yaml_node_t *sections[2] = {NULL, NULL}; /* ANYCAST, MULTICAST keys */
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, where)) continue;
    if (mqr_str_eq(p.name, MQR_STR("routing-types"))) {
      parse_routing_types(c, a, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("anycast"))) {
      sections[MQR_ANYCAST] = p.key;
      parse_queue_section(c, a, MQR_ANYCAST, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("multicast"))) {
      sections[MQR_MULTICAST] = p.key;
      parse_queue_section(c, a, MQR_MULTICAST, &p);
    } else {
      mqr__cfg_unknown_key(c, &p, where, "routing-types, anycast, multicast");
    }
    if (c->nomem) return;
  }
  for (int t = 0; t < 2; t++) {
    if (sections[t] == NULL) continue;
    if (!a->has_types) continue;
    if (!mqr_routing_set_contains(a->types, t)) {
      char buf[64];
      mqr_routing_set_format(a->types, buf, sizeof buf);
      ERR(c, sections[t], "address '%s' has %s queues but its routing-types are [%s]", a->name,
          t == MQR_ANYCAST ? "anycast" : "multicast", buf);
    }
  }
  if (!a->has_types)
    for (int t = 0; t < 2; t++)
      if (sections[t]) a->types = mqr_routing_set_add(a->types, t);
}

void mqr__cfg_parse_addresses(ctx_t *c, yaml_node_t *map) {
  if (mqr__cfg_is_null(map) || !mqr__cfg_want(c, map, YAML_MAPPING_NODE, "addresses")) return;
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_check_key(c, p.key, "addresses")) continue;
    parse_address(c, &p);
    if (c->nomem) return;
  }
}

/* ---- log ---------------------------------------------------------------------------- */

/* log: {level, format}. */
static void parse_log(ctx_t *c, yaml_node_t *map) {
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, "log")) return;
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "log")) continue;
    mqr_str_t v = mqr__cfg_scalar(p.value);
    if (mqr_str_eq(p.name, MQR_STR("level"))) {
      static const char *const levels[] = {"error", "warn", "info", "debug"};
      int k = -1;
      for (int i = 0; i < 4; i++)
        if (v.len == strlen(levels[i]) && strncasecmp(v.ptr, levels[i], v.len) == 0) k = i;
      if (k < 0)
        ERR(c, p.value, "log level must be error, warn, info or debug, not '%.*s'", (int)v.len, v.ptr);
      else
        c->cfg->log.level = k;
    } else if (mqr_str_eq(p.name, MQR_STR("format"))) {
      if (mqr_str_eq(v, MQR_STR("text")) || mqr_str_eq(v, MQR_STR("json")))
        c->cfg->log.json = mqr_str_eq(v, MQR_STR("json"));
      else
        ERR(c, p.value, "log format must be text or json, not '%.*s'", (int)v.len, v.ptr);
    } else {
      mqr__cfg_unknown_key(c, &p, "log", "level, format");
    }
  }
}

/* ---- the document ----------------------------------------------------------------- */

void mqr__cfg_parse_root(ctx_t *c, yaml_node_t *root) {
  if (root == NULL || mqr__cfg_is_null(root)) return;
  if (!mqr__cfg_want(c, root, YAML_MAPPING_NODE, "the config")) return;
  static const char *const keys[] = {
      "wildcard-addresses",         "address-settings", "listeners", "addresses", "persistence", "diverts",
      "message-expiry-scan-period", "global-max-size",  "security",  "log",       "cluster"};
  yaml_node_t *found[11] = {NULL};
  FOREACH_PAIR(c, root, p) {
    if (!mqr__cfg_check_key(c, p.key, "the config")) continue;
    p.name = mqr__cfg_scalar(p.key);
    int k = -1;
    for (int i = 0; i < 11; i++)
      if (mqr_str_eq(p.name, mqr_str(keys[i]))) k = i;
    if (k < 0) {
      mqr__cfg_unknown_key(c, &p, "the config",
                           "listeners, wildcard-addresses, address-settings, addresses, diverts, persistence, "
                           "message-expiry-scan-period, global-max-size, security, log, cluster");
      continue;
    }
    if (found[k]) {
      ERR(c, p.key, "key '%s' repeated in the config", keys[k]);
      continue;
    }
    found[k] = p.value;
  }
  /* The wildcard syntax first: patterns elsewhere are read with it. */
  if (found[0]) mqr__cfg_parse_wildcard(c, found[0]);
  if (found[1] && !c->nomem) mqr__cfg_parse_settings(c, found[1]);
  if (found[2] && !c->nomem) mqr__cfg_parse_listeners(c, found[2]);
  if (found[3] && !c->nomem) mqr__cfg_parse_addresses(c, found[3]);
  if (found[4] && !c->nomem) mqr__cfg_parse_persistence(c, found[4]);
  if (found[5] && !c->nomem) mqr__cfg_parse_diverts(c, found[5]);
  if (found[8] && !c->nomem) mqr__cfg_parse_security(c, found[8]);
  if (found[9] && !c->nomem) parse_log(c, found[9]);
  if (found[10] && !c->nomem) mqr__cfg_parse_cluster(c, found[10]);
  if (found[6]) {
    pair_t p = {NULL, found[6], MQR_STR("message-expiry-scan-period")};
    int64_t ms;
    if (mqr__cfg_get_duration(c, &p, 86400000, &ms)) {
      if (ms < 1)
        ERR(c, found[6], "message-expiry-scan-period must be at least 1 ms");
      else
        c->cfg->expiry_scan_ms = ms;
    }
  }
  if (found[7]) { /* bytes, or -1: no broker-wide limit */
    pair_t p = {NULL, found[7], MQR_STR("global-max-size")};
    int64_t v;
    if (mqr__cfg_get_int(c, &p, true, -1, INT64_MAX / 2, &v)) {
      if (v == 0)
        ERR(c, found[7], "global-max-size must be a size in bytes, or -1 for none");
      else
        c->cfg->global_max_size = v;
    }
  }
}

void mqr_config_destroy(mqr_config_t *cfg) {
  if (cfg == NULL) return;
  mqr_free(cfg->persistence_dir);
  mqr__cfg_free_cluster(cfg);
  for (uint32_t i = 0; i < cfg->n_listeners; i++) {
    mqr_free(cfg->listeners[i].name);
    mqr_free(cfg->listeners[i].host);
    mqr_free(cfg->listeners[i].prefix[0]);
    mqr_free(cfg->listeners[i].prefix[1]);
    for (int k = 0; k < 4; k++) mqr_free(cfg->listeners[i].tls[k]);
  }
  mqr_free(cfg->listeners);
  for (uint32_t i = 0; i < cfg->n_settings; i++) {
    mqr_free(cfg->settings[i].match);
    mqr_free(cfg->settings[i].dla);
    mqr_free(cfg->settings[i].dlq_prefix);
    mqr_free(cfg->settings[i].dlq_suffix);
    mqr_free(cfg->settings[i].exa);
    mqr_free(cfg->settings[i].exq_prefix);
    mqr_free(cfg->settings[i].exq_suffix);
    mqr_free(cfg->settings[i].dlvk);
    mqr_free(cfg->settings[i].dgfk);
  }
  mqr_free(cfg->settings);
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    cfg_address_t *a = &cfg->addresses[i];
    for (uint32_t k = 0; k < a->n_queues; k++) {
      mqr_free(a->queues[k].name);
      mqr_free(a->queues[k].last_value_key);
      mqr_free(a->queues[k].group_first_key);
      mqr_free(a->queues[k].filter);
    }
    mqr_free(a->queues);
    mqr_free(a->name);
  }
  mqr_free(cfg->addresses);
  mqr__cfg_free_diverts(cfg);
  mqr__cfg_free_security(cfg);
  mqr_free(cfg->file);
  mqr_free(cfg);
}

/* Builds r from cfg, reporting refusals to diags (continuing past them) or, when
 * diags is NULL, stopping at the first into err. */
/* What the router is given for a configured queue. */
int mqr_config_load_string(const char *name, const char *text, size_t len, mqr_config_t **out, mqr_diags_t *diags) {
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.file = name ? name : "<config>";
  c.diags = diags;
  uint32_t errors_before = diags ? diags->errors : 0;
  mqr_config_t *cfg = mqr_calloc(1, sizeof *cfg);
  if (cfg == NULL) return MQR_ENOMEM;
  cfg->wildcard = mqr_wildcard_default();
  mqr__cfg_persistence_defaults(&cfg->persistence);
  mqr__cfg_cluster_defaults(&cfg->cluster);
  cfg->log.level = -1;
  mqr__cfg_security_defaults(&cfg->security);
  if ((cfg->file = mqr_malloc(strlen(c.file) + 1)) == NULL) {
    mqr_free(cfg);
    return MQR_ENOMEM;
  }
  strcpy(cfg->file, c.file);
  c.cfg = cfg;

  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    mqr_config_destroy(cfg);
    return MQR_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &c.doc)) {
    if (parser.error == YAML_MEMORY_ERROR) {
      yaml_parser_delete(&parser);
      mqr_config_destroy(cfg);
      return MQR_ENOMEM;
    }
    const yaml_mark_t *m = &parser.problem_mark;
    if (parser.context)
      mqr__cfg_diags_add(diags, MQR_ESYNTAX, c.file, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
                         "YAML syntax: %s %s that starts at line %u, column %u",
                         parser.problem ? parser.problem : "error", parser.context,
                         (unsigned)parser.context_mark.line + 1, (unsigned)parser.context_mark.column + 1);
    else
      mqr__cfg_diags_add(diags, MQR_ESYNTAX, c.file, (uint32_t)m->line + 1, (uint32_t)m->column + 1, "YAML syntax: %s",
                         parser.problem ? parser.problem : "error");
    yaml_parser_delete(&parser);
    mqr_config_destroy(cfg);
    return MQR_ECONFIG;
  }
  yaml_parser_delete(&parser);
  mqr__cfg_parse_root(&c, yaml_document_get_root_node(&c.doc));
  yaml_document_delete(&c.doc);
  if (c.nomem) {
    mqr_config_destroy(cfg);
    return MQR_ENOMEM;
  }
  if (c.errors == 0) {
    /* The trial build finds what only the whole config shows: names used twice. */
    mqr_router_t r;
    mqr_diags_t scratch;
    mqr_diags_t *d = diags ? diags : (mqr_diags_init(&scratch, NULL, 0), &scratch);
    int rc = mqr__cfg_build(cfg, &r, d, NULL);
    if (rc == MQR_ENOMEM) {
      mqr_config_destroy(cfg);
      return MQR_ENOMEM;
    }
    if (rc == 0) mqr_router_close(&r);
    if (rc) c.errors++;
  }
  if (c.errors || (diags && diags->errors != errors_before)) {
    mqr_config_destroy(cfg);
    return MQR_ECONFIG;
  }
  *out = cfg;
  return 0;
}

int mqr_config_load_file(const char *path, mqr_config_t **out, mqr_diags_t *diags) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    mqr__cfg_diags_add(diags, MQR_EIO, path, 0, 0, "cannot open: %s", strerror(errno));
    return MQR_EIO;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 8192;
      if (ncap > ((size_t)64 << 20)) {
        mqr_free(buf);
        fclose(f);
        mqr__cfg_diags_add(diags, MQR_ECONFIG, path, 0, 0, "config file larger than 64 MiB");
        return MQR_ECONFIG;
      }
      char *p = mqr_realloc(buf, ncap);
      if (p == NULL) {
        mqr_free(buf);
        fclose(f);
        return MQR_ENOMEM;
      }
      buf = p;
      cap = ncap;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (failed) {
    mqr_free(buf);
    mqr__cfg_diags_add(diags, MQR_EIO, path, 0, 0, "read error");
    return MQR_EIO;
  }
  int rc = mqr_config_load_string(path, buf, len, out, diags);
  mqr_free(buf);
  return rc;
}

mqr_str_t mqr_config_default_text(void) { return mqr_str_n(mqr__default_conf, mqr__default_conf_len); }
const char *mqr_config_default_name(void) { return "<embedded conf/mqr.yaml>"; }

int mqr_config_load_default(mqr_config_t **out, mqr_diags_t *diags) {
  return mqr_config_load_string(mqr_config_default_name(), mqr__default_conf, mqr__default_conf_len, out, diags);
}

const char *mqr_config_file(const mqr_config_t *cfg) { return cfg->file; }
mqr_wildcard_t mqr_config_wildcard(const mqr_config_t *cfg) { return cfg->wildcard; }
uint32_t mqr_config_listener_count(const mqr_config_t *cfg) { return cfg->n_listeners; }
uint32_t mqr_config_address_count(const mqr_config_t *cfg) { return cfg->n_addresses; }
uint32_t mqr_config_queue_count(const mqr_config_t *cfg) { return cfg->n_queues; }
uint32_t mqr_config_settings_count(const mqr_config_t *cfg) { return cfg->n_settings; }

int mqr_config_foreach_queue(const mqr_config_t *cfg, int (*fn)(void *arg, mqr_str_t queue, mqr_str_t address),
                             void *arg) {
  for (uint32_t i = 0; i < cfg->n_addresses; i++)
    for (uint32_t k = 0; k < cfg->addresses[i].n_queues; k++) {
      int rc = fn(arg, mqr_str(cfg->addresses[i].queues[k].name), mqr_str(cfg->addresses[i].name));
      if (rc) return rc;
    }
  return 0;
}

int mqr_config_foreach_address(const mqr_config_t *cfg, int (*fn)(void *arg, mqr_str_t address), void *arg) {
  for (uint32_t i = 0; i < cfg->n_addresses; i++) {
    int rc = fn(arg, mqr_str(cfg->addresses[i].name));
    if (rc) return rc;
  }
  return 0;
}

bool mqr_config_has_address(const mqr_config_t *cfg, mqr_str_t name) {
  for (uint32_t i = 0; i < cfg->n_addresses; i++)
    if (mqr_str_eq(mqr_str(cfg->addresses[i].name), name)) return true;
  return false;
}

const mqr_address_settings_t *mqr_config_settings(const mqr_config_t *cfg, uint32_t i, mqr_str_t *match) {
  if (i >= cfg->n_settings) return NULL;
  if (match) *match = mqr_str(cfg->settings[i].match);
  return &cfg->settings[i].s;
}

const mqr_listener_config_t *mqr_config_listener(const mqr_config_t *cfg, uint32_t i) {
  if (i >= cfg->n_listeners) return NULL;
  return &cfg->listeners[i].pub;
}

const mqr_listener_config_t *mqr_config_find_listener(const mqr_config_t *cfg, const char *name) {
  for (uint32_t i = 0; i < cfg->n_listeners; i++)
    if (strcmp(cfg->listeners[i].name, name) == 0) return mqr_config_listener(cfg, i);
  return NULL;
}
