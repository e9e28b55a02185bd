/* Private layout of addresses, queues and settings entries, shared by the routing
 * sources. Nothing here is installed. */
#ifndef MQR_ROUTING_ROUTER_INT_H
#define MQR_ROUTING_ROUTER_INT_H

#include <assert.h>
#include <stdalign.h>

#include "cellpool.h"
#include "dupcache.h"
#include "mqr/filter.h"
#include "mqr/routing.h"
#include "table.h"

/* The router behind mqr_router_t, whose public definition is only storage of the right
 * size and alignment: routing code reaches the fields through RT(r). */
typedef struct {
  mqr_wildcard_t wildcard;
  mqr__table_t addresses;
  mqr__table_t queues;
  mqr_address_t **wildcards; /* wildcard addresses, in creation order */
  uint32_t n_wildcards, cap_wildcards;
  struct mqr__settings_entry_s **settings; /* sorted most specific first */
  uint32_t n_settings, cap_settings;
  uint64_t next_seq;             /* creation order of addresses and queues */
  mqr__cellpool_t cells;         /* the addresses' hot blocks */
  mqr__dupbudget_t dups;         /* the duplicate-id caches' bytes */
  mqr_filter_vocab_t *vocab;     /* the slots of every filter compiled for it; made with the first */
  struct mqr_divert_s **diverts; /* in creation order */
  uint32_t n_diverts, cap_diverts;
  uint32_t hold; /* mqr_router_hold's count: while above 0, what is removed waits below */
  mqr_queue_t *dead_queues;
  struct mqr_address_s *dead_addresses;
  struct mqr_divert_s *dead_diverts;
  mqr_router_create_check_fn create_check; /* mqr_router_set_create_check */
} mqr__router_t;

static_assert(sizeof(mqr__router_t) <= sizeof(mqr_router_t), "mqr_router_t's storage holds the router");
static_assert(alignof(mqr__router_t) <= alignof(mqr_router_t), "and is aligned for it");

#define RT(r) ((mqr__router_t *)(void *)(r))

struct mqr_queue_s {
  /* What routing reads, first. */
  mqr_str_t name;       /* the table key; bytes follow the struct */
  mqr_filter_t *filter; /* compiled filter; NULL matches every message */
  uint32_t consumers;
  bool enabled;
  bool purge_on_no_consumers;
  bool durable;
  bool auto_created;
  bool removing; /* being removed: left out of binding arrays being built */
  uint8_t type;  /* mqr_routing_type_t */
  uint64_t routed;
  /* The rest. */
  mqr_address_t *address;
  int32_t max_consumers;
  uint64_t seq;
  void *data;
  mqr_str_t filter_text;
  bool exclusive;
  mqr_str_t last_value_key;
  mqr_str_t group_first_key;
  bool non_destructive;
  int64_t ring_size;
  int32_t group_buckets;
  bool group_rebalance;
  int32_t consumers_before_dispatch;
  int64_t delay_before_dispatch;
  bool removed;           /* out of the router, its memory held (mqr_router_hold) */
  mqr_queue_t *dead_next; /* the held list */
};

/* An address is one 128-byte block, two cache lines that the L2 spatial prefetcher
 * fetches as a pair:
 *
 *   bind line  what a send walks once it has the address: the binding arrays, the
 *              round-robin cursor, the counters, the cold pointer, the embedder's data
 *   key line   the name's view, the routing-type set and flags (the table's slot keeps
 *              copies of both, so a lookup of a short name does not read this line),
 *              then the name's bytes; a name of up to MQR__POOLED_NAME_MAX bytes lies
 *              wholly in this line, so comparing a long name reads one line of it
 *
 * Blocks with such names are cells of the router's pool (routing/cellpool.h), side by
 * side in 64 KiB chunks; an address with a longer name has a block of its own, its bytes
 * running on past the key line. The cold part is a separate allocation that only
 * topology changes and the rare send paths (no route, auto-create, duplicate ids) read. */
typedef struct {
  mqr_queue_t **anycast;   /* ANYCAST binding array: own queues, then wildcard ones */
  mqr_queue_t **multicast; /* MULTICAST binding array, same order */
  uint32_t n_anycast;
  uint32_t n_multicast;
  uint32_t cursor;   /* round-robin position in anycast[] (one group) */
  bool dla_no_route; /* send-to-dla-on-no-route with a dead-letter address: a copy of the
                        cold settings that every send reads, kept by mqr__address_settings */
  bool any_groups;   /* anycast[] holds more than one group (below) */
  bool has_diverts;  /* cold->dv lists diverts (divert.c) */
  uint64_t routed;
  mqr__dupcache_t *dups; /* created by the first send with a duplicate id */
  struct mqr__address_cold_s *cold;
  void *data; /* the embedder's (the broker's accounting); read by every send */
} mqr__address_bind_t;

/* ANYCAST round-robin groups. Each address a queue is bound to is its own group, as in
 * Artemis (LocalQueueBinding.getRoutingName): an ANYCAST send takes one queue of the
 * address's own and one of each matching wildcard address's. anycast[] lists the groups
 * one after the other; with more than one, their ends and cursors follow the queue
 * pointers in the same allocation. */
typedef struct {
  uint32_t end;    /* one past the group's last queue in anycast[] */
  uint32_t cursor; /* its round-robin position, from the group's start */
} mqr__agroup_t;

typedef struct {
  uint32_t n, spare;
  mqr__agroup_t g[];
} mqr__agroups_t;

static inline mqr__agroups_t *mqr__agroups(const mqr__address_bind_t *h) {
  return (mqr__agroups_t *)(void *)(h->anycast + h->n_anycast);
}

/* The groups of an ANYCAST array: 0, 1, or the count after the queues. */
static inline uint32_t mqr__agroup_count(const mqr__address_bind_t *h) {
  return h->any_groups ? mqr__agroups(h)->n : h->n_anycast ? 1u : 0u;
}

typedef struct {
  mqr_str_t name; /* the table key; its bytes follow this struct */
  mqr_address_info_t info;
  uint8_t flags;
  uint8_t spare;
} mqr__address_key_t;

/* What a send does not read: topology, counters of the exceptional paths, settings. */
typedef struct mqr__address_cold_s {
  uint64_t seq;
  uint64_t unrouted;
  void *block;       /* the block's own allocation; NULL when it is a pool cell */
  mqr_queue_t **own; /* this address's queues, in creation order */
  uint32_t n_own, cap_own;
  mqr_address_settings_t settings; /* merged; dead_letter_address borrows a settings entry */
  struct mqr__dslot_s *dv;         /* the diverts that apply (divert.c): exclusive first */
  uint32_t n_dv, n_excl;
  bool removed;                    /* out of the router, its memory held (mqr_router_hold) */
  struct mqr_address_s *dead_next; /* the held list */
} mqr__address_cold_t;

/* A divert (divert.c); its strings follow the struct. */
struct mqr_divert_s {
  mqr_str_t name, address, forwarding, filter_text, routing_name;
  mqr_filter_t *filter;
  mqr_str_t *forwards; /* n_forwards views into forwarding, trimmed */
  uint32_t n_forwards;
  bool exclusive;
  bool pattern; /* address is a wildcard pattern */
  uint8_t routing_type;
  bool removed; /* out of the router, its memory held (mqr_router_hold) */
  uint64_t diverted;
  struct mqr_divert_s *dead_next; /* the held list */
};

/* One divert of an address's list. Non-exclusive ones sharing a routing name are
 * adjacent, a group: each slot of a group knows where the group ends, and its first
 * slot keeps the group's turn. */
typedef struct mqr__dslot_s {
  struct mqr_divert_s *d;
  uint32_t group_end;
  uint32_t cursor;
} mqr__dslot_t;

struct mqr_address_s {
  alignas(64) mqr__address_bind_t bind;
  alignas(64) mqr__address_key_t key;
};

static_assert(sizeof(mqr__address_bind_t) <= 64, "the bind part of an address is one cache line");
static_assert(offsetof(struct mqr_address_s, key) == 64, "the key line is the block's second line");
#define MQR__ADDRESS_NAME_OFF (offsetof(struct mqr_address_s, key) + sizeof(mqr__address_key_t))
#define MQR__POOLED_NAME_MAX (MQR__CELL_SIZE - MQR__ADDRESS_NAME_OFF - 1)

typedef struct mqr__settings_entry_s {
  mqr_str_t match; /* bytes follow the struct, then the dead-letter address */
  mqr_address_settings_t s;
} mqr__settings_entry_t;

/* What the address table keeps in a slot's two owner bytes: MQR__AUX_TYPES and
 * MQR__AUX_FLAGS, in mqr/routing.h (its inline lookup reads the first). */

static inline bool mqr__is_wildcard(const mqr_address_t *a) { return (a->key.flags & MQR_ADDRESS_WILDCARD) != 0; }

/* The longest address or queue name, in bytes. */
#define MQR__NAME_MAX 65535u

/* Internal topology steps shared by router.c and route.c. */
int mqr__router_create_address(mqr_router_t *r, const mqr__key_t *k, mqr_routing_set_t types, uint32_t flags,
                               mqr_address_t **out, mqr_error_t *err);
/* Resolves a's merged settings into its cold part, and the copy every send reads. */
void mqr__address_settings(const mqr_router_t *r, mqr_address_t *a);
/* Sets a's routing types and default, in the address and in its table slot. Every
 * change of an address's info goes through here. */
void mqr__address_set_info(mqr_router_t *r, mqr_address_t *a, mqr_address_info_t info);
/* mqr_router_find_address_types for every name, by the window or the probe (the tests
 * check the two agree). */
mqr_address_t *mqr__router_find_types_any(const mqr_router_t *r, mqr_str_t name, mqr_routing_set_t *types);
int mqr__router_create_queue(mqr_router_t *r, const mqr_queue_config_t *cfg, mqr_address_t *a, mqr_queue_t **out,
                             mqr_error_t *err);
/* divert.c: the diverts that apply to concrete address a, listed again (MQR_ENOMEM
 * leaves the old list); and its list freed. */
int mqr__divert_list(mqr_router_t *r, mqr_address_t *a);
void mqr__divert_unlist(mqr_address_t *a);
void mqr__diverts_free(mqr_router_t *r);
/* Frees the diverts removed while the router was held. */
void mqr__diverts_release(mqr_router_t *r);
/* Unlinks and frees an address that has no queues (no allocation). */
void mqr__router_drop_address(mqr_router_t *r, mqr_address_t *a);

#endif
