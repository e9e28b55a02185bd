/* mqr routing: routing types and their bitmask set, address info, wildcard syntax,
 * address settings, and the router that holds addresses and queues and routes sends.
 *
 * The model is ActiveMQ Artemis's (docs/routing.md says where mqr differs). A router is
 * owned by one thread (one event loop); nothing here locks. */
#ifndef MQR_ROUTING_H
#define MQR_ROUTING_H

#include "mqr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------- */
/* Routing types and the routing-type set                                              */
/* ---------------------------------------------------------------------------------- */

/* The byte values of Artemis's RoutingType (its code, not its manual). */
typedef enum {
  MQR_MULTICAST = 0,
  MQR_ANYCAST = 1,
} mqr_routing_type_t;

/* "No routing type": a send that names none, an address info with an empty set. */
#define MQR_ROUTING_NONE (-1)
/* Number of routing types mqr knows by name. */
#define MQR_ROUTING_TYPE_COUNT 2
/* Room in a set: types 0..7. */
#define MQR_ROUTING_TYPE_MAX 8

/* A set of routing types: one bit per type (1u << type). Constant size, passed by
 * value, never allocates; membership is one AND. */
typedef struct {
  uint8_t bits;
} mqr_routing_set_t;

static inline mqr_routing_set_t mqr_routing_set_empty(void) {
  mqr_routing_set_t s = {0};
  return s;
}

static inline bool mqr_routing_type_valid(int t) { return t >= 0 && t < MQR_ROUTING_TYPE_MAX; }

/* The set holding type t alone; t outside 0..7 gives the empty set. */
static inline mqr_routing_set_t mqr_routing_set_of(int t) {
  mqr_routing_set_t s = {(uint8_t)(mqr_routing_type_valid(t) ? 1u << t : 0u)};
  return s;
}

static inline mqr_routing_set_t mqr_routing_set_add(mqr_routing_set_t s, int t) {
  s.bits |= mqr_routing_set_of(t).bits;
  return s;
}

static inline mqr_routing_set_t mqr_routing_set_remove(mqr_routing_set_t s, int t) {
  s.bits &= (uint8_t)~mqr_routing_set_of(t).bits;
  return s;
}

static inline bool mqr_routing_set_contains(mqr_routing_set_t s, int t) {
  return (s.bits & mqr_routing_set_of(t).bits) != 0;
}

static inline mqr_routing_set_t mqr_routing_set_union(mqr_routing_set_t a, mqr_routing_set_t b) {
  a.bits |= b.bits;
  return a;
}

static inline mqr_routing_set_t mqr_routing_set_intersection(mqr_routing_set_t a, mqr_routing_set_t b) {
  a.bits &= b.bits;
  return a;
}

static inline bool mqr_routing_set_is_empty(mqr_routing_set_t s) { return s.bits == 0; }

static inline bool mqr_routing_set_equal(mqr_routing_set_t a, mqr_routing_set_t b) { return a.bits == b.bits; }

/* The lowest set bit of a nonzero byte's value: one instruction with GCC and clang. */
static inline int mqr_routing_bit_scan(unsigned v) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctz(v);
#else
  int i = 0;
  while (!(v & 1u)) v >>= 1, i++;
  return i;
#endif
}

static inline int mqr_routing_set_count(mqr_routing_set_t s) {
  int n = 0;
  for (unsigned v = s.bits; v; v &= v - 1u) n++;
  return n;
}

/* The lowest type in s, or MQR_ROUTING_NONE when s is empty. */
static inline int mqr_routing_set_lowest(mqr_routing_set_t s) {
  return s.bits ? mqr_routing_bit_scan(s.bits) : MQR_ROUTING_NONE;
}

/* The lowest type in s above prev, or MQR_ROUTING_NONE: one bit scan. */
static inline int mqr_routing_set_next(mqr_routing_set_t s, int prev) {
  unsigned rest = prev < 0 ? s.bits : (unsigned)s.bits & ~((2u << prev) - 1u);
  return rest ? mqr_routing_bit_scan(rest) : MQR_ROUTING_NONE;
}

/* for (each type t in s), lowest first: `MQR_ROUTING_SET_FOREACH(t, s) { ... }`. */
#define MQR_ROUTING_SET_FOREACH(t, s)                                                                                  \
  for (int t = mqr_routing_set_lowest(s); t != MQR_ROUTING_NONE; t = mqr_routing_set_next((s), t))

/* The upper-case name of type t ("MULTICAST", "ANYCAST"), or NULL for a type with no
 * name. */
MQR_EXTERN const char *mqr_routing_type_name(int t);

/* Parses one routing type name, case-insensitive ("anycast", "ANYCAST"). Returns 0 and
 * writes *out, or MQR_EBADROUTINGTYPE. */
MQR_EXTERN int mqr_routing_type_parse(mqr_str_t text, mqr_routing_type_t *out);

/* Parses a comma-separated list of names ("ANYCAST,MULTICAST"; spaces around names are
 * ignored; the empty text is the empty set; TYPEn names an unnamed type n). Returns 0
 * and writes *out, or MQR_EBADROUTINGTYPE with err (may be NULL) naming the word and its
 * 1-based column. */
MQR_EXTERN int mqr_routing_set_parse(mqr_str_t text, mqr_routing_set_t *out, mqr_error_t *err);

/* Formats s as names joined by commas, lowest type first ("MULTICAST,ANYCAST"; the
 * empty set is ""; a type without a name is TYPEn). Returns the length written (buf is
 * NUL terminated), or MQR_ENOSPC when cap is too small (64 bytes always suffice). */
MQR_EXTERN int mqr_routing_set_format(mqr_routing_set_t s, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------- */
/* Address info: a routing-type set and its default type (Artemis AddressInfo)          */
/* ---------------------------------------------------------------------------------- */

/* The default routing type follows Artemis's getRoutingType(): after a set is assigned
 * it is the set's lowest type; adding a type to an empty set makes that type the
 * default and later additions leave it alone; removing the default type makes the
 * lowest remaining type the default; an empty set has none. Two bytes, no allocation. */
typedef struct {
  mqr_routing_set_t types;
  int8_t default_type; /* MQR_ROUTING_NONE when types is empty */
} mqr_address_info_t;

static inline void mqr_address_info_init(mqr_address_info_t *ai) {
  ai->types = mqr_routing_set_empty();
  ai->default_type = MQR_ROUTING_NONE;
}

static inline void mqr_address_info_set_types(mqr_address_info_t *ai, mqr_routing_set_t s) {
  ai->types = s;
  ai->default_type = (int8_t)mqr_routing_set_lowest(s);
}

static inline void mqr_address_info_add_type(mqr_address_info_t *ai, int t) {
  if (!mqr_routing_type_valid(t)) return;
  if (mqr_routing_set_is_empty(ai->types)) ai->default_type = (int8_t)t;
  ai->types = mqr_routing_set_add(ai->types, t);
}

static inline void mqr_address_info_remove_type(mqr_address_info_t *ai, int t) {
  ai->types = mqr_routing_set_remove(ai->types, t);
  if (ai->default_type == t) ai->default_type = (int8_t)mqr_routing_set_lowest(ai->types);
}

/* The default routing type, or MQR_ROUTING_NONE. */
static inline int mqr_address_info_routing_type(const mqr_address_info_t *ai) { return ai->default_type; }

/* ---------------------------------------------------------------------------------- */
/* Wildcard syntax and matching                                                         */
/* ---------------------------------------------------------------------------------- */

/* The four characters of the wildcard syntax (Artemis's wildcard-addresses). They must
 * be four different printable ASCII characters. */
typedef struct {
  char delimiter;   /* '.' : separates words */
  char any_words;   /* '#' : zero or more words, as a whole word */
  char single_word; /* '*' : exactly one word, as a whole word */
  char escape;      /* '\\': the next character is literal */
} mqr_wildcard_t;

/* The default syntax: '.', '#', '*', '\\'. */
MQR_EXTERN mqr_wildcard_t mqr_wildcard_default(void);

/* Returns 0 when wc is usable, MQR_EINVAL (with err naming the fault) otherwise. */
MQR_EXTERN int mqr_wildcard_validate(const mqr_wildcard_t *wc, mqr_error_t *err);

/* True when name contains an unescaped any-words or single-word word. */
MQR_EXTERN bool mqr_wildcard_is_pattern(const mqr_wildcard_t *wc, mqr_str_t name);

/* True when pattern matches the concrete name. Words compare after unescaping, so
 * `a\.b` is one word "a.b" and `\*` is a literal star; `#` matches zero or more words
 * anywhere in the pattern and `*` exactly one; a wildcard character that is not a whole
 * word is literal (`a.b#` matches only "a.b#"). Linear in the words of both, no
 * allocation. */
MQR_EXTERN bool mqr_wildcard_match(const mqr_wildcard_t *wc, mqr_str_t pattern, mqr_str_t name);

/* ---------------------------------------------------------------------------------- */
/* Address settings                                                                     */
/* ---------------------------------------------------------------------------------- */

typedef enum {
  MQR_FULL_BLOCK = 0, /* stop reading from producers to the address until it drains */
  MQR_FULL_FAIL = 1,  /* refuse the send with an error */
  MQR_FULL_DROP = 2,  /* drop the message and count it */
  MQR_FULL_PAGE = 3,  /* write the address's messages to page files, read back as consumers drain
                         (a broker with persistence; without, it acts as BLOCK) */
} mqr_full_policy_t;

/* Which fields of an mqr_address_settings_t are set; unset fields are inherited from
 * less specific matches, then from the defaults. */
#define MQR_SET_AUTO_CREATE_ADDRESSES 0x001ull             /* auto_create_addresses */
#define MQR_SET_AUTO_CREATE_QUEUES 0x002ull                /* auto_create_queues */
#define MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE 0x004ull      /* default_address_routing_type */
#define MQR_SET_DEFAULT_QUEUE_ROUTING_TYPE 0x008ull        /* default_queue_routing_type */
#define MQR_SET_DEAD_LETTER_ADDRESS 0x010ull               /* dead_letter_address */
#define MQR_SET_SEND_TO_DLA_ON_NO_ROUTE 0x020ull           /* send_to_dla_on_no_route */
#define MQR_SET_ID_CACHE_SIZE 0x040ull                     /* id_cache_size */
#define MQR_SET_MAX_SIZE_BYTES 0x080ull                    /* max_size_bytes */
#define MQR_SET_ADDRESS_FULL_POLICY 0x100ull               /* address_full_policy */
#define MQR_SET_MAX_DELIVERY_ATTEMPTS 0x200ull             /* max_delivery_attempts */
#define MQR_SET_AUTO_CREATE_DEAD_LETTER 0x400ull           /* auto_create_dead_letter_resources */
#define MQR_SET_DEAD_LETTER_QUEUE_PREFIX 0x800ull          /* dead_letter_queue_prefix */
#define MQR_SET_DEAD_LETTER_QUEUE_SUFFIX 0x1000ull         /* dead_letter_queue_suffix */
#define MQR_SET_REDELIVERY_DELAY 0x2000ull                 /* redelivery_delay */
#define MQR_SET_REDELIVERY_MULTIPLIER 0x4000ull            /* redelivery_multiplier */
#define MQR_SET_MAX_REDELIVERY_DELAY 0x8000ull             /* max_redelivery_delay */
#define MQR_SET_EXPIRY_ADDRESS 0x10000ull                  /* expiry_address */
#define MQR_SET_AUTO_CREATE_EXPIRY 0x20000ull              /* auto_create_expiry_resources */
#define MQR_SET_EXPIRY_QUEUE_PREFIX 0x40000ull             /* expiry_queue_prefix */
#define MQR_SET_EXPIRY_QUEUE_SUFFIX 0x80000ull             /* expiry_queue_suffix */
#define MQR_SET_EXPIRY_DELAY 0x100000ull                   /* expiry_delay */
#define MQR_SET_MIN_EXPIRY_DELAY 0x200000ull               /* min_expiry_delay */
#define MQR_SET_MAX_EXPIRY_DELAY 0x400000ull               /* max_expiry_delay */
#define MQR_SET_DEFAULT_EXCLUSIVE 0x800000ull              /* default_exclusive_queue */
#define MQR_SET_DEFAULT_LAST_VALUE 0x1000000ull            /* default_last_value_queue */
#define MQR_SET_DEFAULT_LAST_VALUE_KEY 0x2000000ull        /* default_last_value_key */
#define MQR_SET_DEFAULT_GROUP_BUCKETS 0x4000000ull         /* default_group_buckets */
#define MQR_SET_DEFAULT_GROUP_REBALANCE 0x8000000ull       /* default_group_rebalance */
#define MQR_SET_DEFAULT_RING_SIZE 0x10000000ull            /* default_ring_size */
#define MQR_SET_DEFAULT_CONSUMERS_BEFORE 0x20000000ull     /* default_consumers_before_dispatch */
#define MQR_SET_DEFAULT_DELAY_BEFORE 0x40000000ull         /* default_delay_before_dispatch */
#define MQR_SET_AUTO_DELETE_QUEUES 0x80000000ull           /* auto_delete_queues */
#define MQR_SET_AUTO_DELETE_QUEUES_DELAY 0x100000000ull    /* auto_delete_queues_delay */
#define MQR_SET_AUTO_DELETE_QUEUES_COUNT 0x200000000ull    /* auto_delete_queues_message_count */
#define MQR_SET_AUTO_DELETE_ADDRESSES 0x400000000ull       /* auto_delete_addresses */
#define MQR_SET_AUTO_DELETE_ADDRESSES_DELAY 0x800000000ull /* auto_delete_addresses_delay */
#define MQR_SET_DEFAULT_GROUP_FIRST_KEY 0x1000000000ull    /* default_group_first_key */
#define MQR_SET_DEFAULT_NON_DESTRUCTIVE 0x2000000000ull    /* default_non_destructive */
#define MQR_SET_CONFIG_DELETE_QUEUES 0x4000000000ull       /* config_delete_queues */
#define MQR_SET_CONFIG_DELETE_ADDRESSES 0x8000000000ull    /* config_delete_addresses */
#define MQR_SET_REPLICATED 0x10000000000ull                /* replicated */
#define MQR_SET_ALL 0x1ffffffffffull

/* Address settings (Artemis address-settings). Defaults: auto-create addresses and
 * queues on, default routing types MULTICAST, no dead-letter address,
 * send-to-dla-on-no-route off, id-cache-size 20000, max-size-bytes -1 (unbounded),
 * policy PAGE, max-delivery-attempts 10, no auto-created dead-letter resources (their
 * queue named "DLQ." + the address), redelivery-delay 0 with multiplier 1.0 and a
 * max-redelivery-delay of ten times the delay, no expiry address (auto-created
 * resources: "EXP." + the address), expiry delays -1 (none). */
typedef struct {
  uint64_t set; /* MQR_SET_* bits */
  bool auto_create_addresses;
  bool auto_create_queues;
  bool send_to_dla_on_no_route;
  mqr_routing_type_t default_address_routing_type;
  mqr_routing_type_t default_queue_routing_type;
  mqr_full_policy_t address_full_policy;
  mqr_str_t dead_letter_address; /* empty: none. Copied by the router. */
  int32_t id_cache_size;         /* 0 disables duplicate detection */
  int64_t max_size_bytes;        /* -1: unbounded */
  /* A message whose delivery count reaches this when it comes back to its queue
   * (unacknowledged when its consumer went) goes to the dead-letter address instead
   * (dropped, with a warning, when there is none); 0 or -1: never. */
  int32_t max_delivery_attempts;
  /* Make the dead-letter address (MULTICAST) and, on it, a queue named prefix +
   * the message's address + suffix whose filter is _AMQ_ORIG_ADDRESS = that address. */
  bool auto_create_dead_letter_resources;
  mqr_str_t dead_letter_queue_prefix, dead_letter_queue_suffix; /* copied by the router */
  /* A message that comes back to its queue waits this long (ms) before it is delivered
   * again: redelivery_delay * multiplier^(deliveries - 1), at most max_redelivery_delay
   * (when not set: ten times redelivery_delay). */
  int64_t redelivery_delay;
  double redelivery_multiplier; /* at least 1.0 */
  int64_t max_redelivery_delay;
  /* Expired messages go to the expiry address (dropped when there is none), made with a
   * queue prefix + the address + suffix when auto_create_expiry_resources says so. */
  mqr_str_t expiry_address; /* copied by the router */
  bool auto_create_expiry_resources;
  mqr_str_t expiry_queue_prefix, expiry_queue_suffix; /* copied by the router */
  /* At the send (Artemis applyExpiryDelay), in ms, -1 for none: expiry_delay gives a
   * message without an expiration one; otherwise max_expiry_delay caps it (and gives one
   * to a message without) and min_expiry_delay raises one set too soon. */
  int64_t expiry_delay, min_expiry_delay, max_expiry_delay;
  /* The kind of a queue the broker makes on the address (a send's, a subscription's, a
   * dead-letter or expiry queue): mqr_queue_config_t's fields of the same names. */
  bool default_exclusive_queue;
  bool default_last_value_queue;    /* on default_last_value_key, or _AMQ_LVQ_NAME */
  mqr_str_t default_last_value_key; /* copied by the router */
  int32_t default_group_buckets;
  bool default_group_rebalance;
  int64_t default_ring_size;
  int32_t default_consumers_before_dispatch;
  int64_t default_delay_before_dispatch;
  mqr_str_t default_group_first_key; /* copied by the router; empty: none */
  bool default_non_destructive;
  /* What the broker made goes again (Artemis's auto-delete): a queue it made, once it has
   * had a consumer and has none, and holds at most auto_delete_queues_message_count
   * messages (-1: any), auto_delete_queues_delay ms after its last consumer went; an
   * address it made, auto_delete_addresses_delay ms after its last queue went. */
  bool auto_delete_queues;
  int64_t auto_delete_queues_delay;
  int64_t auto_delete_queues_message_count;
  bool auto_delete_addresses;
  int64_t auto_delete_addresses_delay;
  /* A queue (an address) the config made and a later config no longer lists, at a reload
   * or a restart (Artemis's config-delete-queues and config-delete-addresses): false
   * (OFF, the default) keeps it with its messages, until it is deleted explicitly
   * (management, mqr queue delete); true (FORCE) deletes it, its messages with it (for an
   * address: with its queues). */
  bool config_delete_queues;
  bool config_delete_addresses;
  /* Durable messages on the address's durable queues are replicated to the cluster's
   * nodes (docs/cluster.md): a send is answered once a majority has it. Without a
   * cluster, nothing changes. Default false. */
  bool replicated;
} mqr_address_settings_t;

/* Writes the built-in defaults, with every field marked set. */
MQR_EXTERN void mqr_address_settings_defaults(mqr_address_settings_t *s);

/* Name of a policy ("BLOCK", "FAIL", "DROP"), NULL if unknown. */
MQR_EXTERN const char *mqr_full_policy_name(int policy);
/* Parses a policy name, case-insensitive. 0 or MQR_EINVAL. */
MQR_EXTERN int mqr_full_policy_parse(mqr_str_t text, mqr_full_policy_t *out);

/* Validates an address-settings match pattern: not empty, any-words only as the last
 * word. Returns 0 or MQR_EBADPATTERN with err saying why. */
MQR_EXTERN int mqr_settings_match_validate(const mqr_wildcard_t *wc, mqr_str_t match, mqr_error_t *err);

/* Orders two match patterns by precedence: < 0 when a is more specific than b, > 0 when
 * less, 0 only when equal. Most specific first: no any-words before any-words; among
 * any-words patterns the longer first; no single-word before single-word; among
 * single-word patterns a literal word beats single-word at the first word where they
 * differ; then the shorter; then bytewise. So "a.b" < "a.*" < "a.#" < "#". */
MQR_EXTERN int mqr_settings_match_compare(const mqr_wildcard_t *wc, mqr_str_t a, mqr_str_t b);

/* ---------------------------------------------------------------------------------- */
/* Addresses and queues                                                                 */
/* ---------------------------------------------------------------------------------- */

/* Opaque: owned by their router, valid until removed or the router is closed. */
typedef struct mqr_address_s mqr_address_t;
typedef struct mqr_queue_s mqr_queue_t;
/* A compiled filter (mqr/filter.h). NULL matches every message. */
typedef struct mqr_filter_s mqr_filter_t;
typedef struct mqr_filter_vocab_s mqr_filter_vocab_t;

/* Address flags. */
#define MQR_ADDRESS_AUTO_CREATED 0x01u /* created by a send or a subscribe */
#define MQR_ADDRESS_TEMPORARY 0x02u    /* goes with the session that made it */
#define MQR_ADDRESS_INTERNAL 0x04u     /* the broker's own; hidden from listings */
#define MQR_ADDRESS_PAUSED 0x08u       /* deliveries held */
#define MQR_ADDRESS_WILDCARD 0x10u     /* read-only: the name is a wildcard pattern */

/* What a queue is made from. Strings are copied. */
typedef struct {
  mqr_str_t name;
  mqr_str_t address;
  mqr_routing_type_t routing_type;
  mqr_str_t filter; /* a filter expression (docs/filters.md); empty or blank: none */
  bool durable;
  bool purge_on_no_consumers; /* skip the queue while it has no consumer */
  bool enabled;               /* a disabled queue is skipped by routing */
  bool auto_created;
  /* When the address is missing, or lacks routing_type, create it or add the type if
   * the address settings allow auto-create-addresses; otherwise the add is refused. */
  bool auto_create_address;
  int32_t max_consumers; /* -1 unlimited; below -1 is MQR_EMAXCONSUMERS */
  /* Queue kinds (docs/config.md), as Artemis's: */
  bool exclusive;            /* one consumer at a time takes every message */
  mqr_str_t last_value_key;  /* a last-value queue: a message whose property of this name
                                matches a waiting one's takes its place; empty: not one */
  int64_t ring_size;         /* at most this many messages (waiting and in flight): the oldest
                                waiting one goes to make room; -1: no ring */
  int32_t group_buckets;     /* message groups (_AMQ_GROUP_ID): -1 each group its consumer; N
                                groups hashed to N buckets, each with its consumer; 0: no groups */
  bool group_rebalance;      /* a new consumer takes its share: every group is assigned again */
  mqr_str_t group_first_key; /* the first message of a group a consumer is given carries this
                                property, true (Artemis's group-first-key); empty: none */
  bool non_destructive;      /* every consumer is given every message, which stays (Artemis's
                                non-destructive queue): it goes by expiry, a ring, a newer
                                last value, purge */
  /* Dispatch waits for this many consumers (0: none), or, with delay_before_dispatch >= 0,
   * that many ms after the first consumer came; -1: no delay (wait for the count). */
  int32_t consumers_before_dispatch;
  int64_t delay_before_dispatch;
} mqr_queue_config_t;

/* The last-value property Artemis uses when a queue is last-value without a key. */
#define MQR_PROP_LAST_VALUE "_AMQ_LVQ_NAME"

/* Fills cfg with defaults: durable, enabled, max-consumers -1, ring-size -1,
 * group-buckets -1, delay-before-dispatch -1, MULTICAST, the rest off. */
MQR_EXTERN void mqr_queue_config_init(mqr_queue_config_t *cfg, mqr_str_t name, mqr_str_t address,
                                      mqr_routing_type_t type);

/* Sets cfg's kind (exclusive, last-value, groups, ring, dispatch gate) from the default-*
 * fields of settings s: what a queue the broker makes on an address gets. */
MQR_EXTERN void mqr_queue_config_defaults(mqr_queue_config_t *cfg, const mqr_address_settings_t *s);

/* Address accessors. Views stay valid while the address exists. */
MQR_EXTERN mqr_str_t mqr_address_name(const mqr_address_t *a);
MQR_EXTERN mqr_routing_set_t mqr_address_routing_types(const mqr_address_t *a);
/* The default routing type (Artemis getRoutingType), MQR_ROUTING_NONE if none. */
MQR_EXTERN int mqr_address_default_routing_type(const mqr_address_t *a);
MQR_EXTERN uint32_t mqr_address_flags(const mqr_address_t *a);
MQR_EXTERN uint64_t mqr_address_routed(const mqr_address_t *a);
MQR_EXTERN uint64_t mqr_address_unrouted(const mqr_address_t *a);
/* Number of the address's own queues, and the i-th in creation order. */
MQR_EXTERN uint32_t mqr_address_queue_count(const mqr_address_t *a);
MQR_EXTERN mqr_queue_t *mqr_address_queue(const mqr_address_t *a, uint32_t i);
/* The binding array of type t that a send walks: own queues of that type then those of
 * every wildcard address matching this one. Empty for a wildcard address. */
MQR_EXTERN uint32_t mqr_address_binding_count(const mqr_address_t *a, mqr_routing_type_t t);
MQR_EXTERN mqr_queue_t *mqr_address_binding(const mqr_address_t *a, mqr_routing_type_t t, uint32_t i);
/* The address's merged settings (most specific match first, then defaults). */
MQR_EXTERN const mqr_address_settings_t *mqr_address_settings(const mqr_address_t *a);
/* A pointer the embedder keeps with the address (NULL until set); on the send's line. */
MQR_EXTERN void mqr_address_set_data(mqr_address_t *a, void *data);
MQR_EXTERN void *mqr_address_data(const mqr_address_t *a);

/* Queue accessors. */
MQR_EXTERN mqr_str_t mqr_queue_name(const mqr_queue_t *q);
MQR_EXTERN mqr_address_t *mqr_queue_address(const mqr_queue_t *q);
MQR_EXTERN mqr_routing_type_t mqr_queue_routing_type(const mqr_queue_t *q);
MQR_EXTERN mqr_str_t mqr_queue_filter(const mqr_queue_t *q);
/* The queue's compiled filter; NULL when it has none. */
MQR_EXTERN const mqr_filter_t *mqr_queue_compiled_filter(const mqr_queue_t *q);
MQR_EXTERN bool mqr_queue_durable(const mqr_queue_t *q);
MQR_EXTERN bool mqr_queue_purge_on_no_consumers(const mqr_queue_t *q);
MQR_EXTERN bool mqr_queue_enabled(const mqr_queue_t *q);
MQR_EXTERN bool mqr_queue_auto_created(const mqr_queue_t *q);
MQR_EXTERN int32_t mqr_queue_max_consumers(const mqr_queue_t *q);
MQR_EXTERN bool mqr_queue_exclusive(const mqr_queue_t *q);
MQR_EXTERN mqr_str_t mqr_queue_last_value_key(const mqr_queue_t *q);  /* empty: not last-value */
MQR_EXTERN mqr_str_t mqr_queue_group_first_key(const mqr_queue_t *q); /* empty: none */
MQR_EXTERN bool mqr_queue_non_destructive(const mqr_queue_t *q);
MQR_EXTERN int64_t mqr_queue_ring_size(const mqr_queue_t *q); /* -1: no ring */
MQR_EXTERN int32_t mqr_queue_group_buckets(const mqr_queue_t *q);
MQR_EXTERN bool mqr_queue_group_rebalance(const mqr_queue_t *q);
MQR_EXTERN int32_t mqr_queue_consumers_before_dispatch(const mqr_queue_t *q);
MQR_EXTERN int64_t mqr_queue_delay_before_dispatch(const mqr_queue_t *q);
MQR_EXTERN uint32_t mqr_queue_consumer_count(const mqr_queue_t *q);
/* Messages routed to this queue. */
MQR_EXTERN uint64_t mqr_queue_routed(const mqr_queue_t *q);

/* Enables or disables a queue; takes effect on the next send. */
MQR_EXTERN void mqr_queue_set_enabled(mqr_queue_t *q, bool enabled);
/* Counts a consumer in: 0, or MQR_ECONSUMERLIMIT when max-consumers is reached. */
MQR_EXTERN int mqr_queue_add_consumer(mqr_queue_t *q);
/* Counts a consumer out (no-op at zero). */
MQR_EXTERN void mqr_queue_remove_consumer(mqr_queue_t *q);

/* An opaque pointer for the layer above (the broker's queue storage). */
MQR_EXTERN void mqr_queue_set_data(mqr_queue_t *q, void *data);
MQR_EXTERN void *mqr_queue_data(const mqr_queue_t *q);

/* ---------------------------------------------------------------------------------- */
/* Prefixes                                                                             */
/* ---------------------------------------------------------------------------------- */

#define MQR_PREFIX_MAX 4

/* Address prefixes of a listener (Artemis anycastPrefix / multicastPrefix): a send to
 * "<prefix><address>" goes to <address> with the prefix's routing type, overriding the
 * message's. Prefixes are tried in order; the first that matches wins. */
typedef struct {
  uint32_t count;
  struct {
    mqr_str_t text;
    mqr_routing_type_t type;
  } items[MQR_PREFIX_MAX];
} mqr_prefixes_t;

/* When name starts with one of px's prefixes (the first that matches): takes it off
 * name, sets *routing_type to the prefix's type, and returns true; else changes nothing.
 * px may be NULL. The router does this for sends; a protocol head does it for a
 * consumer's target too, as Artemis does. Allocates nothing; any thread. */
MQR_EXTERN bool mqr_prefixes_strip(const mqr_prefixes_t *px, mqr_str_t *name, int *routing_type);

/* ---------------------------------------------------------------------------------- */
/* The router                                                                           */
/* ---------------------------------------------------------------------------------- */

#define MQR_DEFAULT_ID_CACHE_LIMIT ((size_t)64 << 20) /* all of a router's duplicate-id caches */

/* A router: addresses, queues, wildcard bindings and address settings. It lives in
 * storage of the caller's (a local, a field of a struct of yours), made usable by
 * mqr_router_init and emptied by mqr_router_close. Its contents are private and may change
 * between versions; only its size and alignment are part of the ABI. Do not copy it. */
typedef struct mqr_router_s {
  void *mqr_private_[24];
  uint64_t mqr_private64_[8];
} mqr_router_t;

/* Initialises r with wildcard syntax wc (NULL: the default). Allocates nothing.
 * Returns 0 or MQR_EINVAL for a bad syntax. */
MQR_EXTERN int mqr_router_init(mqr_router_t *r, const mqr_wildcard_t *wc);

/* Frees everything r holds; every address, queue and view from it becomes invalid. */
MQR_EXTERN void mqr_router_close(mqr_router_t *r);

/* Holds back the freeing of what is removed from r (addresses, queues, diverts) until
 * the matching mqr_router_release: each goes out of the router at once (no lookup, route
 * or listing finds it) but its memory, and the views into it, stay valid. For a caller
 * that keeps pointers from a route across callbacks which may remove things, as a
 * broker's send does while its consumers' callbacks run. Calls nest; the last release
 * frees what waited. mqr_queue_removed and mqr_address_removed tell such a held object
 * apart. Allocates nothing. */
MQR_EXTERN void mqr_router_hold(mqr_router_t *r);
MQR_EXTERN void mqr_router_release(mqr_router_t *r);

/* The router's wildcard syntax. */
MQR_EXTERN const mqr_wildcard_t *mqr_router_wildcard(const mqr_router_t *r);

/* Duplicate-id caches (an address's id-cache-size) start small and grow with the ids
 * sent; together they hold at most `bytes` (MQR_DEFAULT_ID_CACHE_LIMIT after init). A
 * cache that may not grow keeps the newest ids it has room for; a send with a duplicate
 * id to an address that has no cache yet, when not even a small one fits, is refused
 * with MQR_ELIMIT. Lowering the limit frees nothing at once: caches stop growing. */
MQR_EXTERN void mqr_router_set_id_cache_limit(mqr_router_t *r, size_t bytes);
/* The bytes the caches hold now. */
MQR_EXTERN size_t mqr_router_id_cache_bytes(const mqr_router_t *r);

/* Adds an address with routing types `types` and flags (MQR_ADDRESS_TEMPORARY,
 * _INTERNAL, _PAUSED, _AUTO_CREATED). A name that is a wildcard pattern makes a wildcard
 * address: queues bound to it receive what is sent to every concrete address it matches.
 * Writes *out (may be NULL) on success.
 * Errors: MQR_EEMPTYADDR, MQR_EADDREXISTS, MQR_ENAMETOOLONG (over 65535 bytes),
 * MQR_ENOMEM; the router is unchanged on any error. */
MQR_EXTERN int mqr_router_add_address(mqr_router_t *r, mqr_str_t name, mqr_routing_set_t types, uint32_t flags,
                                      mqr_address_t **out, mqr_error_t *err);

/* Sets an address's flags (MQR_ADDRESS_AUTO_CREATED, _TEMPORARY, _INTERNAL, _PAUSED; the
 * wildcard flag stays as the name makes it). MQR_ENOADDR when missing. */
MQR_EXTERN int mqr_router_set_address_flags(mqr_router_t *r, mqr_str_t name, uint32_t flags);

/* Removes an address. With queues it is refused (MQR_EADDRHASQUEUES) unless force,
 * which removes them too. MQR_ENOADDR when missing; MQR_ENOMEM leaves it unchanged. */
MQR_EXTERN int mqr_router_remove_address(mqr_router_t *r, mqr_str_t name, bool force, mqr_error_t *err);

/* The address named name, or NULL. */
MQR_EXTERN mqr_address_t *mqr_router_find_address(const mqr_router_t *r, mqr_str_t name);

/* The address named name and its routing-type set (*types; empty when missing), or NULL.
 * The router keeps each address's set beside its name in the lookup table, so for a name
 * of up to 16 bytes this reads one slot of the table and not the address: the check a
 * send makes before it routes. types must not be NULL. Allocates nothing. */
MQR_EXTERN mqr_address_t *mqr_router_find_address_types(const mqr_router_t *r, mqr_str_t name,
                                                        mqr_routing_set_t *types);

/* Adds routing type t to an address (0 if already there). MQR_ENOADDR, MQR_EINVAL. */
MQR_EXTERN int mqr_router_add_routing_type(mqr_router_t *r, mqr_str_t address, int t, mqr_error_t *err);

/* Removes routing type t from an address; refused with MQR_ETYPEINUSE while the address
 * has queues of that type. MQR_ENOADDR, MQR_EINVAL. */
MQR_EXTERN int mqr_router_remove_routing_type(mqr_router_t *r, mqr_str_t address, int t, mqr_error_t *err);

/* Adds a queue. Errors: MQR_EEMPTYQUEUE, MQR_EEMPTYADDR, MQR_EQUEUEEXISTS (the name is
 * unique across the router), MQR_ENOADDR, MQR_ETYPENOTSUPPORTED (see
 * cfg->auto_create_address), MQR_EMAXCONSUMERS, MQR_EINVAL (bad type), MQR_ESYNTAX (the
 * filter's: err names its column), MQR_ELIMIT, MQR_ENOMEM.
 * The router is unchanged on any error. Writes *out (may be NULL) on success. */
MQR_EXTERN int mqr_router_add_queue(mqr_router_t *r, const mqr_queue_config_t *cfg, mqr_queue_t **out,
                                    mqr_error_t *err);

/* Removes a queue. MQR_ENOQUEUE when missing; MQR_ENOMEM leaves it in place. */
MQR_EXTERN int mqr_router_remove_queue(mqr_router_t *r, mqr_str_t name, mqr_error_t *err);

/* Whether q (a) was removed from its router while mqr_router_hold held it: it is valid
 * to read until the release, and no longer part of the topology. */
MQR_EXTERN bool mqr_queue_removed(const mqr_queue_t *q);
MQR_EXTERN bool mqr_address_removed(const mqr_address_t *a);

/* The queue named name, or NULL. */
MQR_EXTERN mqr_queue_t *mqr_router_find_queue(const mqr_router_t *r, mqr_str_t name);

/* The vocabulary (mqr/filter.h) of the router's filters, made on first use (NULL: out
 * of memory). A consumer selector compiled with it reads the same values as the queue
 * filters; a route fills them (mqr_route_request_t's fill) and clears them. */
MQR_EXTERN mqr_filter_vocab_t *mqr_router_filter_vocab(mqr_router_t *r);

/* Compiles text with the router's vocabulary into *out; blank text gives NULL (no
 * filter) and 0. Errors: mqr_filter_compile's. */
MQR_EXTERN int mqr_router_compile_filter(mqr_router_t *r, mqr_str_t text, mqr_filter_t **out, mqr_error_t *err);

/* Adds (or replaces) the address settings for match pattern `match`, marked fields only
 * (s->set). Every address's merged settings are recomputed. Errors: MQR_EBADPATTERN,
 * MQR_EINVAL (a bad value), MQR_ENOMEM (router unchanged). */
MQR_EXTERN int mqr_router_add_address_settings(mqr_router_t *r, mqr_str_t match, const mqr_address_settings_t *s,
                                               mqr_error_t *err);

/* Removes the settings for exactly `match`. MQR_EINVAL when there are none. */
MQR_EXTERN int mqr_router_remove_address_settings(mqr_router_t *r, mqr_str_t match);

/* Merges the settings that apply to a name (which need not exist) into *out. */
MQR_EXTERN void mqr_router_resolve_settings(const mqr_router_t *r, mqr_str_t name, mqr_address_settings_t *out);

/* Counts. */
MQR_EXTERN uint32_t mqr_router_address_count(const mqr_router_t *r);
MQR_EXTERN uint32_t mqr_router_queue_count(const mqr_router_t *r);

/* Calls cb for every address, in creation order; stops at the first non-zero return
 * and returns it. May allocate (the order is sorted): MQR_ENOMEM. */
typedef int (*mqr_address_cb)(mqr_address_t *a, void *arg);
MQR_EXTERN int mqr_router_foreach_address(const mqr_router_t *r, mqr_address_cb cb, void *arg);

/* ---------------------------------------------------------------------------------- */
/* Diverts                                                                              */
/* ---------------------------------------------------------------------------------- */

/* What a divert does to the routing type of the copy it forwards (Artemis's
 * ComponentConfigurationRoutingType). */
typedef enum {
  MQR_DIVERT_STRIP = 0,     /* the copy has no routing type: it goes as a send that names none */
  MQR_DIVERT_PASS = 1,      /* the copy keeps the message's */
  MQR_DIVERT_ANYCAST = 2,   /* the copy is ANYCAST */
  MQR_DIVERT_MULTICAST = 3, /* the copy is MULTICAST */
} mqr_divert_routing_t;

/* "STRIP", "PASS", "ANYCAST", "MULTICAST" (NULL out of range); parsing is
 * case-insensitive: 0 or MQR_EINVAL. */
MQR_EXTERN const char *mqr_divert_routing_type_name(int t);
MQR_EXTERN int mqr_divert_routing_type_parse(mqr_str_t text, mqr_divert_routing_t *out);

/* A divert, as Artemis's: what is sent to `address` (a concrete address, or a wildcard
 * pattern for every address it matches; it need not exist yet) and matches `filter` is
 * copied to each forwarding address. An exclusive divert takes the message away from the
 * address's queues; when any exclusive divert of an address matches, the address's
 * queues and its other diverts get nothing. Non-exclusive diverts with the same
 * routing_name on an address take turns (one of them per message); each has its own by
 * default. Views are read during mqr_router_add_divert only. */
typedef struct {
  mqr_str_t name;               /* unique among the router's diverts */
  mqr_str_t address;            /* where it diverts from */
  mqr_str_t forwarding_address; /* where copies go: one address, or several separated by commas */
  mqr_str_t filter;             /* a filter expression (mqr/filter.h); empty: every message */
  mqr_str_t routing_name;       /* empty: the name */
  bool exclusive;
  mqr_divert_routing_t routing_type; /* default MQR_DIVERT_STRIP */
} mqr_divert_config_t;

/* Zeroes cfg and sets its name, address and forwarding address: non-exclusive, STRIP,
 * no filter. */
MQR_EXTERN void mqr_divert_config_init(mqr_divert_config_t *cfg, mqr_str_t name, mqr_str_t address,
                                       mqr_str_t forwarding_address);

typedef struct mqr_divert_s mqr_divert_t;

/* Adds a divert; every address it applies to picks it up now, and an address made later
 * when it is made, so a send finds its diverts without a lookup. Errors: MQR_EINVAL (an
 * empty name, address or forwarding address; a forwarding address that is the address
 * itself, a wildcard or empty between commas; a bad routing type), MQR_EDIVERTEXISTS,
 * MQR_ENAMETOOLONG, MQR_ESYNTAX (the filter's: err names its column), MQR_ENOMEM. The
 * router is unchanged on any error. Writes *out (may be NULL) on success. */
MQR_EXTERN int mqr_router_add_divert(mqr_router_t *r, const mqr_divert_config_t *cfg, mqr_divert_t **out,
                                     mqr_error_t *err);

/* Removes a divert. MQR_ENODIVERT when missing; MQR_ENOMEM leaves it in place. */
MQR_EXTERN int mqr_router_remove_divert(mqr_router_t *r, mqr_str_t name, mqr_error_t *err);

/* The divert named name, or NULL; the diverts in creation order. */
MQR_EXTERN mqr_divert_t *mqr_router_find_divert(const mqr_router_t *r, mqr_str_t name);
MQR_EXTERN uint32_t mqr_router_divert_count(const mqr_router_t *r);
MQR_EXTERN mqr_divert_t *mqr_router_divert(const mqr_router_t *r, uint32_t i);

/* A divert's attributes; views valid while it exists. Its forwarding addresses are
 * counted and numbered from 0, each trimmed of spaces. */
MQR_EXTERN mqr_str_t mqr_divert_name(const mqr_divert_t *d);
MQR_EXTERN mqr_str_t mqr_divert_address(const mqr_divert_t *d);
MQR_EXTERN mqr_str_t mqr_divert_forwarding_address(const mqr_divert_t *d); /* as configured */
MQR_EXTERN uint32_t mqr_divert_forward_count(const mqr_divert_t *d);
MQR_EXTERN mqr_str_t mqr_divert_forward(const mqr_divert_t *d, uint32_t i);
MQR_EXTERN mqr_str_t mqr_divert_filter(const mqr_divert_t *d);
MQR_EXTERN mqr_str_t mqr_divert_routing_name(const mqr_divert_t *d);
MQR_EXTERN bool mqr_divert_exclusive(const mqr_divert_t *d);
MQR_EXTERN mqr_divert_routing_t mqr_divert_routing_type(const mqr_divert_t *d);
MQR_EXTERN uint64_t mqr_divert_diverted(const mqr_divert_t *d); /* messages it took */
/* Removed while the router was held (mqr_router_hold): valid until the release. */
MQR_EXTERN bool mqr_divert_removed(const mqr_divert_t *d);

/* The diverts that apply to a concrete address now: its own and those of the wildcard
 * patterns it matches, exclusive ones first. */
MQR_EXTERN uint32_t mqr_address_divert_count(const mqr_address_t *a);
MQR_EXTERN mqr_divert_t *mqr_address_divert(const mqr_address_t *a, uint32_t i);

/* ---------------------------------------------------------------------------------- */
/* Routing a send                                                                       */
/* ---------------------------------------------------------------------------------- */

typedef enum {
  MQR_ROUTE_OK = 0,              /* delivered to the queues in the result */
  MQR_ROUTE_NO_BINDINGS = 1,     /* nothing matched; the address's unrouted count grew */
  MQR_ROUTE_NO_BINDINGS_DLA = 2, /* nothing matched; sent to the dead-letter address */
  MQR_ROUTE_DUPLICATE_ID = 3,    /* the duplicate id was seen; not routed */
} mqr_route_status_t;

/* "OK", "NO_BINDINGS", "NO_BINDINGS_DLA", "DUPLICATE_ID". */
MQR_EXTERN const char *mqr_route_status_name(int status);

/* What a send asks for. Views are read during the call only. */
typedef struct {
  mqr_str_t address;              /* may carry a prefix and be address::queue */
  int routing_type;               /* a type, or MQR_ROUTING_NONE */
  mqr_str_t duplicate_id;         /* _AMQ_DUPL_ID; empty for none */
  const mqr_prefixes_t *prefixes; /* the listener's prefixes; NULL for none */
  /* The message's values for queue filters: called at most once per route, and only when
   * a queue with a filter is met, to set them in the router's vocabulary
   * (mqr_filter_vocab_set_header, _set); the route clears them before it returns. NULL:
   * filters read every value as NULL. */
  void (*fill)(void *ctx, mqr_filter_vocab_t *v);
  void *fill_ctx;
} mqr_route_request_t;

/* Result flags. */
#define MQR_ROUTE_CREATED_ADDRESS 0x01u /* the send auto-created the address */
#define MQR_ROUTE_CREATED_QUEUE 0x02u   /* the send auto-created an ANYCAST queue */
#define MQR_ROUTE_ADDED_TYPE 0x04u      /* the send added its routing type to the address */

/* Where a route writes its targets: queues[0..count) on return. capacity must be at
 * least the address's MULTICAST bindings plus one (and the dead-letter address's, where
 * one applies); mqr_router_queue_count(r) + 1 always suffices. */
typedef struct {
  mqr_queue_t **queues; /* caller storage */
  uint32_t capacity;
  uint32_t count;
  uint32_t needed; /* on MQR_ENOSPC: the capacity the send needs */
  uint32_t flags;  /* MQR_ROUTE_* result flags */
  mqr_route_status_t status;
  mqr_address_t *address; /* the address routed (the dead-letter address for _DLA) */
  /* The diverts that took the message: diverts[0..divert_count) on return, room for
   * divert_capacity (caller storage; at least mqr_address_divert_count of the address,
   * mqr_router_divert_count(r) always suffices; MQR_ENOSPC sets divert_needed). The
   * caller forwards a copy to each one's forwarding addresses (the broker does; the
   * router only picks them). A divert does not count as a queue in status and count:
   * a message only an exclusive divert took is NO_BINDINGS on its address, as in
   * Artemis. */
  mqr_divert_t **diverts;
  uint32_t divert_capacity;
  uint32_t divert_count;
  uint32_t divert_needed;
} mqr_route_result_t;

/* Asked by a route before it makes anything: what (MQR_ROUTE_CREATED_ADDRESS, _ADDED_TYPE,
 * _CREATED_QUEUE), the address's or the queue's name, and whether the queue is durable;
 * ctx is the request's fill_ctx. 0 lets it; an error (err set, MQR_EPERM say) refuses the
 * send, nothing made. */
typedef int (*mqr_router_create_check_fn)(void *ctx, uint32_t what, mqr_str_t name, bool durable, mqr_error_t *err);
/* Sets r's check (NULL: none, everything the settings allow is made). */
MQR_EXTERN void mqr_router_set_create_check(mqr_router_t *r, mqr_router_create_check_fn fn);

/* Routes one send: strips a prefix, resolves address::queue, finds (or, as the settings
 * allow, auto-creates) the address and its routing type, checks the duplicate id, then
 * picks one ANYCAST queue round-robin (one with a consumer preferred) and every
 * MULTICAST queue; disabled queues, purge-on-no-consumers queues without consumers and
 * queues whose filter the message does not match are skipped. With no match it sends to the dead-letter address when
 * the settings say so. Counters are updated. A send to an existing concrete address allocates nothing. Returns 0 with
 * res->status, or: MQR_ENOADDR (missing and not auto-creatable, or lacking the routing type), MQR_EWILDCARDSEND,
 * MQR_ENOQUEUE / MQR_EQUEUEADDR (for address::queue), MQR_EEMPTYADDR, MQR_ENOSPC (res->needed set), MQR_ENOMEM. A
 * refused send changes nothing: an address or routing type it would have auto-created is not left behind. err (may be
 * NULL) says which address and why. */
MQR_EXTERN int mqr_router_route(mqr_router_t *r, const mqr_route_request_t *req, mqr_route_result_t *res,
                                mqr_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* MQR_ROUTING_H */
