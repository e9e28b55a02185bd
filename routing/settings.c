/* Address settings: defaults, the sorted list by match precedence, merging. */
#include <strings.h>

#include "router_int.h"

static const char *const policy_names[] = {"BLOCK", "FAIL", "DROP", "PAGE"};

const char *mqr_full_policy_name(int p) { return p >= 0 && p <= 3 ? policy_names[p] : NULL; }

int mqr_full_policy_parse(mqr_str_t text, mqr_full_policy_t *out) {
  for (int p = 0; p <= 3; p++) {
    if (text.len == strlen(policy_names[p]) && strncasecmp(text.ptr, policy_names[p], text.len) == 0) {
      *out = (mqr_full_policy_t)p;
      return 0;
    }
  }
  return MQR_EINVAL;
}

void mqr_address_settings_defaults(mqr_address_settings_t *s) {
  s->set = MQR_SET_ALL;
  s->auto_create_addresses = true;
  s->auto_create_queues = true;
  s->send_to_dla_on_no_route = false;
  s->default_address_routing_type = MQR_MULTICAST;
  s->default_queue_routing_type = MQR_MULTICAST;
  s->address_full_policy = MQR_FULL_PAGE; /* Artemis's default; without persistence it acts as BLOCK */
  s->dead_letter_address = mqr_str_n(NULL, 0);
  s->id_cache_size = 20000;
  s->max_size_bytes = -1;
  s->max_delivery_attempts = 10;
  s->auto_create_dead_letter_resources = false;
  s->dead_letter_queue_prefix = MQR_STR("DLQ.");
  s->dead_letter_queue_suffix = mqr_str_n("", 0);
  s->redelivery_delay = 0;
  s->redelivery_multiplier = 1.0;
  s->max_redelivery_delay = 0; /* ten times redelivery_delay: resolved with it */
  s->expiry_address = mqr_str_n(NULL, 0);
  s->auto_create_expiry_resources = false;
  s->expiry_queue_prefix = MQR_STR("EXP.");
  s->expiry_queue_suffix = mqr_str_n("", 0);
  s->expiry_delay = s->min_expiry_delay = s->max_expiry_delay = -1;
  s->default_exclusive_queue = false;
  s->default_last_value_queue = false;
  s->default_last_value_key = mqr_str_n(NULL, 0);
  s->default_group_buckets = -1;
  s->default_group_rebalance = false;
  s->default_ring_size = -1;
  s->default_consumers_before_dispatch = 0;
  s->default_delay_before_dispatch = -1;
  s->default_group_first_key = mqr_str_n(NULL, 0);
  s->default_non_destructive = false;
  s->auto_delete_queues = true;
  s->auto_delete_queues_delay = 0;
  s->auto_delete_queues_message_count = 0;
  s->auto_delete_addresses = true;
  s->auto_delete_addresses_delay = 0;
  s->config_delete_queues = false;
  s->config_delete_addresses = false;
  s->replicated = false;
}

void mqr_queue_config_defaults(mqr_queue_config_t *cfg, const mqr_address_settings_t *s) {
  cfg->exclusive = s->default_exclusive_queue;
  cfg->last_value_key = s->default_last_value_key.len ? s->default_last_value_key
                        : s->default_last_value_queue ? MQR_STR(MQR_PROP_LAST_VALUE)
                                                      : mqr_str_n(NULL, 0);
  cfg->group_buckets = s->default_group_buckets;
  cfg->group_rebalance = s->default_group_rebalance;
  cfg->ring_size = s->default_ring_size;
  cfg->consumers_before_dispatch = s->default_consumers_before_dispatch;
  cfg->delay_before_dispatch = s->default_delay_before_dispatch;
  cfg->group_first_key = s->default_group_first_key;
  cfg->non_destructive = s->default_non_destructive;
}

/* Copies into out the fields that src sets and out does not have yet. */
static void merge(mqr_address_settings_t *out, const mqr_address_settings_t *src) {
  uint64_t take = src->set & ~out->set;
  if (take & MQR_SET_AUTO_CREATE_ADDRESSES) out->auto_create_addresses = src->auto_create_addresses;
  if (take & MQR_SET_AUTO_CREATE_QUEUES) out->auto_create_queues = src->auto_create_queues;
  if (take & MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE)
    out->default_address_routing_type = src->default_address_routing_type;
  if (take & MQR_SET_DEFAULT_QUEUE_ROUTING_TYPE) out->default_queue_routing_type = src->default_queue_routing_type;
  if (take & MQR_SET_DEAD_LETTER_ADDRESS) out->dead_letter_address = src->dead_letter_address;
  if (take & MQR_SET_SEND_TO_DLA_ON_NO_ROUTE) out->send_to_dla_on_no_route = src->send_to_dla_on_no_route;
  if (take & MQR_SET_ID_CACHE_SIZE) out->id_cache_size = src->id_cache_size;
  if (take & MQR_SET_MAX_SIZE_BYTES) out->max_size_bytes = src->max_size_bytes;
  if (take & MQR_SET_ADDRESS_FULL_POLICY) out->address_full_policy = src->address_full_policy;
  if (take & MQR_SET_MAX_DELIVERY_ATTEMPTS) out->max_delivery_attempts = src->max_delivery_attempts;
  if (take & MQR_SET_AUTO_CREATE_DEAD_LETTER)
    out->auto_create_dead_letter_resources = src->auto_create_dead_letter_resources;
  if (take & MQR_SET_DEAD_LETTER_QUEUE_PREFIX) out->dead_letter_queue_prefix = src->dead_letter_queue_prefix;
  if (take & MQR_SET_DEAD_LETTER_QUEUE_SUFFIX) out->dead_letter_queue_suffix = src->dead_letter_queue_suffix;
  if (take & MQR_SET_REDELIVERY_DELAY) out->redelivery_delay = src->redelivery_delay;
  if (take & MQR_SET_REDELIVERY_MULTIPLIER) out->redelivery_multiplier = src->redelivery_multiplier;
  if (take & MQR_SET_MAX_REDELIVERY_DELAY) out->max_redelivery_delay = src->max_redelivery_delay;
  if (take & MQR_SET_EXPIRY_ADDRESS) out->expiry_address = src->expiry_address;
  if (take & MQR_SET_AUTO_CREATE_EXPIRY) out->auto_create_expiry_resources = src->auto_create_expiry_resources;
  if (take & MQR_SET_EXPIRY_QUEUE_PREFIX) out->expiry_queue_prefix = src->expiry_queue_prefix;
  if (take & MQR_SET_EXPIRY_QUEUE_SUFFIX) out->expiry_queue_suffix = src->expiry_queue_suffix;
  if (take & MQR_SET_EXPIRY_DELAY) out->expiry_delay = src->expiry_delay;
  if (take & MQR_SET_MIN_EXPIRY_DELAY) out->min_expiry_delay = src->min_expiry_delay;
  if (take & MQR_SET_MAX_EXPIRY_DELAY) out->max_expiry_delay = src->max_expiry_delay;
  if (take & MQR_SET_DEFAULT_EXCLUSIVE) out->default_exclusive_queue = src->default_exclusive_queue;
  if (take & MQR_SET_DEFAULT_LAST_VALUE) out->default_last_value_queue = src->default_last_value_queue;
  if (take & MQR_SET_DEFAULT_LAST_VALUE_KEY) out->default_last_value_key = src->default_last_value_key;
  if (take & MQR_SET_DEFAULT_GROUP_BUCKETS) out->default_group_buckets = src->default_group_buckets;
  if (take & MQR_SET_DEFAULT_GROUP_REBALANCE) out->default_group_rebalance = src->default_group_rebalance;
  if (take & MQR_SET_DEFAULT_RING_SIZE) out->default_ring_size = src->default_ring_size;
  if (take & MQR_SET_DEFAULT_CONSUMERS_BEFORE)
    out->default_consumers_before_dispatch = src->default_consumers_before_dispatch;
  if (take & MQR_SET_DEFAULT_DELAY_BEFORE) out->default_delay_before_dispatch = src->default_delay_before_dispatch;
  if (take & MQR_SET_DEFAULT_GROUP_FIRST_KEY) out->default_group_first_key = src->default_group_first_key;
  if (take & MQR_SET_DEFAULT_NON_DESTRUCTIVE) out->default_non_destructive = src->default_non_destructive;
  if (take & MQR_SET_AUTO_DELETE_QUEUES) out->auto_delete_queues = src->auto_delete_queues;
  if (take & MQR_SET_AUTO_DELETE_QUEUES_DELAY) out->auto_delete_queues_delay = src->auto_delete_queues_delay;
  if (take & MQR_SET_AUTO_DELETE_QUEUES_COUNT)
    out->auto_delete_queues_message_count = src->auto_delete_queues_message_count;
  if (take & MQR_SET_AUTO_DELETE_ADDRESSES) out->auto_delete_addresses = src->auto_delete_addresses;
  if (take & MQR_SET_AUTO_DELETE_ADDRESSES_DELAY) out->auto_delete_addresses_delay = src->auto_delete_addresses_delay;
  if (take & MQR_SET_CONFIG_DELETE_QUEUES) out->config_delete_queues = src->config_delete_queues;
  if (take & MQR_SET_CONFIG_DELETE_ADDRESSES) out->config_delete_addresses = src->config_delete_addresses;
  if (take & MQR_SET_REPLICATED) out->replicated = src->replicated;
  out->set |= take;
}

void mqr__address_settings(const mqr_router_t *r, mqr_address_t *a) {
  mqr_address_settings_t *s = &a->bind.cold->settings;
  mqr_router_resolve_settings(r, a->key.name, s);
  a->bind.dla_no_route = s->send_to_dla_on_no_route && s->dead_letter_address.len != 0;
}

void mqr_router_resolve_settings(const mqr_router_t *r, mqr_str_t name, mqr_address_settings_t *out) {
  memset(out, 0, sizeof *out);
  for (uint32_t i = 0; i < RT(r)->n_settings && out->set != MQR_SET_ALL; i++) {
    const mqr__settings_entry_t *e = RT(r)->settings[i];
    if (mqr_wildcard_match(&RT(r)->wildcard, e->match, name)) merge(out, &e->s);
  }
  uint64_t from_entries = out->set;
  mqr_address_settings_t d;
  mqr_address_settings_defaults(&d);
  merge(out, &d);
  if (!(from_entries & MQR_SET_MAX_REDELIVERY_DELAY)) /* Artemis's default: ten times the delay */
    out->max_redelivery_delay = out->redelivery_delay > INT64_MAX / 10 ? INT64_MAX : out->redelivery_delay * 10;
  out->set = from_entries;
}

static void resolve_all(mqr_router_t *r) {
  mqr__slot_t *s = RT(r)->addresses.slots;
  for (uint32_t i = 0; s && i <= RT(r)->addresses.mask; i++) {
    mqr_address_t *a = s[i].val;
    if (a) mqr__address_settings(r, a);
  }
}

static int check_values(const mqr_address_settings_t *s, mqr_error_t *err) {
  if ((s->set & MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE) && mqr_routing_type_name(s->default_address_routing_type) == NULL)
    return mqr_error_set(err, MQR_EINVAL, "bad default-address-routing-type");
  if ((s->set & MQR_SET_DEFAULT_QUEUE_ROUTING_TYPE) && mqr_routing_type_name(s->default_queue_routing_type) == NULL)
    return mqr_error_set(err, MQR_EINVAL, "bad default-queue-routing-type");
  if ((s->set & MQR_SET_ADDRESS_FULL_POLICY) && mqr_full_policy_name(s->address_full_policy) == NULL)
    return mqr_error_set(err, MQR_EINVAL, "bad address-full-policy");
  if ((s->set & MQR_SET_ID_CACHE_SIZE) && (s->id_cache_size < 0 || s->id_cache_size > (1 << 24)))
    return mqr_error_set(err, MQR_EINVAL, "id-cache-size must be between 0 and 16777216");
  if ((s->set & MQR_SET_MAX_SIZE_BYTES) && s->max_size_bytes < -1)
    return mqr_error_set(err, MQR_EINVAL, "max-size-bytes must be -1 (unbounded) or at least 0");
  if ((s->set & MQR_SET_MAX_DELIVERY_ATTEMPTS) && s->max_delivery_attempts < -1)
    return mqr_error_set(err, MQR_EINVAL, "max-delivery-attempts must be -1 (never), 0 (never) or more");
  if ((s->set & MQR_SET_REDELIVERY_DELAY) && s->redelivery_delay < 0)
    return mqr_error_set(err, MQR_EINVAL, "redelivery-delay must be at least 0");
  if ((s->set & MQR_SET_MAX_REDELIVERY_DELAY) && s->max_redelivery_delay < 0)
    return mqr_error_set(err, MQR_EINVAL, "max-redelivery-delay must be at least 0");
  if ((s->set & MQR_SET_REDELIVERY_MULTIPLIER) && !(s->redelivery_multiplier >= 1.0 && s->redelivery_multiplier < 1e6))
    return mqr_error_set(err, MQR_EINVAL, "redelivery-delay-multiplier must be at least 1.0");
  if (((s->set & MQR_SET_EXPIRY_DELAY) && s->expiry_delay < -1) ||
      ((s->set & MQR_SET_MIN_EXPIRY_DELAY) && s->min_expiry_delay < -1) ||
      ((s->set & MQR_SET_MAX_EXPIRY_DELAY) && s->max_expiry_delay < -1))
    return mqr_error_set(err, MQR_EINVAL, "expiry delays must be -1 (none) or at least 0");
  if (((s->set & MQR_SET_DEFAULT_GROUP_BUCKETS) && s->default_group_buckets < -1) ||
      ((s->set & MQR_SET_DEFAULT_RING_SIZE) && s->default_ring_size < -1) ||
      ((s->set & MQR_SET_DEFAULT_CONSUMERS_BEFORE) && s->default_consumers_before_dispatch < 0) ||
      ((s->set & MQR_SET_DEFAULT_DELAY_BEFORE) && s->default_delay_before_dispatch < -1))
    return mqr_error_set(err, MQR_EINVAL, "a default queue kind out of range");
  if (((s->set & MQR_SET_AUTO_DELETE_QUEUES_DELAY) && s->auto_delete_queues_delay < 0) ||
      ((s->set & MQR_SET_AUTO_DELETE_QUEUES_COUNT) && s->auto_delete_queues_message_count < -1) ||
      ((s->set & MQR_SET_AUTO_DELETE_ADDRESSES_DELAY) && s->auto_delete_addresses_delay < 0))
    return mqr_error_set(err, MQR_EINVAL, "auto-delete delays must be at least 0, the message count at least -1");
  if ((s->set & ~MQR_SET_ALL) != 0) return mqr_error_set(err, MQR_EINVAL, "unknown settings bits");
  return 0;
}

/* len bytes of src copied to *at, NUL-ended: the view of the copy (empty when len is 0). */
static mqr_str_t copy_str(char **at, mqr_str_t src, size_t len) {
  char *p = *at;
  if (len) memcpy(p, src.ptr, len);
  p[len] = '\0';
  *at = p + len + 1;
  return mqr_str_n(len ? p : NULL, len);
}

int mqr_router_add_address_settings(mqr_router_t *r, mqr_str_t match, const mqr_address_settings_t *s,
                                    mqr_error_t *err) {
  int rc = mqr_settings_match_validate(&RT(r)->wildcard, match, err);
  if (rc) return rc;
  if ((rc = check_values(s, err)) != 0) return rc;
  size_t dla_len = (s->set & MQR_SET_DEAD_LETTER_ADDRESS) ? s->dead_letter_address.len : 0;
  size_t pre_len = (s->set & MQR_SET_DEAD_LETTER_QUEUE_PREFIX) ? s->dead_letter_queue_prefix.len : 0;
  size_t suf_len = (s->set & MQR_SET_DEAD_LETTER_QUEUE_SUFFIX) ? s->dead_letter_queue_suffix.len : 0;
  size_t exp_len = (s->set & MQR_SET_EXPIRY_ADDRESS) ? s->expiry_address.len : 0;
  size_t epre_len = (s->set & MQR_SET_EXPIRY_QUEUE_PREFIX) ? s->expiry_queue_prefix.len : 0;
  size_t esuf_len = (s->set & MQR_SET_EXPIRY_QUEUE_SUFFIX) ? s->expiry_queue_suffix.len : 0;
  size_t lvk_len = (s->set & MQR_SET_DEFAULT_LAST_VALUE_KEY) ? s->default_last_value_key.len : 0;
  size_t gfk_len = (s->set & MQR_SET_DEFAULT_GROUP_FIRST_KEY) ? s->default_group_first_key.len : 0;
  int64_t found = -1;
  for (uint32_t i = 0; i < RT(r)->n_settings; i++)
    if (mqr_str_eq(RT(r)->settings[i]->match, match)) found = i;
  if (found < 0 && RT(r)->n_settings == RT(r)->cap_settings) {
    uint32_t ncap = RT(r)->cap_settings ? RT(r)->cap_settings * 2 : 8;
    void *p = mqr_realloc(RT(r)->settings, ncap * sizeof *RT(r)->settings);
    if (p == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory adding address settings");
    RT(r)->settings = p;
    RT(r)->cap_settings = ncap;
  }
  mqr__settings_entry_t *e = mqr_malloc(sizeof *e + match.len + dla_len + pre_len + suf_len + exp_len + epre_len +
                                        esuf_len + lvk_len + gfk_len + 9);
  if (e == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory adding address settings");
  char *m = (char *)(e + 1);
  memcpy(m, match.ptr, match.len);
  m[match.len] = '\0';
  e->match = mqr_str_n(m, match.len);
  e->s = *s;
  char *d = m + match.len + 1;
  if (dla_len) memcpy(d, s->dead_letter_address.ptr, dla_len);
  d[dla_len] = '\0';
  e->s.dead_letter_address = mqr_str_n(dla_len ? d : NULL, dla_len);
  char *pre = d + dla_len + 1, *suf = pre + pre_len + 1;
  if (pre_len) memcpy(pre, s->dead_letter_queue_prefix.ptr, pre_len);
  pre[pre_len] = '\0';
  if (suf_len) memcpy(suf, s->dead_letter_queue_suffix.ptr, suf_len);
  suf[suf_len] = '\0';
  e->s.dead_letter_queue_prefix = mqr_str_n(pre, pre_len);
  e->s.dead_letter_queue_suffix = mqr_str_n(suf, suf_len);
  char *rest = suf + suf_len + 1;
  e->s.expiry_address = copy_str(&rest, s->expiry_address, exp_len);
  e->s.expiry_queue_prefix = copy_str(&rest, s->expiry_queue_prefix, epre_len);
  e->s.expiry_queue_suffix = copy_str(&rest, s->expiry_queue_suffix, esuf_len);
  e->s.default_last_value_key = copy_str(&rest, s->default_last_value_key, lvk_len);
  e->s.default_group_first_key = copy_str(&rest, s->default_group_first_key, gfk_len);
  if (found >= 0) {
    mqr_free(RT(r)->settings[found]);
    RT(r)->settings[found] = e;
  } else {
    uint32_t at = 0;
    while (at < RT(r)->n_settings &&
           mqr_settings_match_compare(&RT(r)->wildcard, RT(r)->settings[at]->match, match) < 0)
      at++;
    memmove(RT(r)->settings + at + 1, RT(r)->settings + at, (RT(r)->n_settings - at) * sizeof *RT(r)->settings);
    RT(r)->settings[at] = e;
    RT(r)->n_settings++;
  }
  resolve_all(r);
  return 0;
}

int mqr_router_remove_address_settings(mqr_router_t *r, mqr_str_t match) {
  for (uint32_t i = 0; i < RT(r)->n_settings; i++) {
    if (!mqr_str_eq(RT(r)->settings[i]->match, match)) continue;
    mqr_free(RT(r)->settings[i]);
    memmove(RT(r)->settings + i, RT(r)->settings + i + 1, (RT(r)->n_settings - i - 1) * sizeof *RT(r)->settings);
    RT(r)->n_settings--;
    resolve_all(r);
    return 0;
  }
  return MQR_EINVAL;
}
