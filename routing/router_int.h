/* Private layout of addresses, queues and settings entries, shared by the routing
 * sources. Nothing here is installed. */
#ifndef MQR_ROUTING_ROUTER_INT_H
#define MQR_ROUTING_ROUTER_INT_H

#include <assert.h>
#include <stdalign.h>

#include "dupcache.h"
#include "mqr/routing.h"
#include "table.h"

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
  uint64_t hash;
  void *data;
  mqr_str_t filter_text;
};

/* The part of an address that a send reads, in one cache line. The name (the table key)
 * comes first, so that a lookup's key check and the send that follows touch this line
 * and the name bytes, which follow it in the next line of the same 128-byte pair. */
typedef struct {
  mqr_str_t name;
  mqr_queue_t **anycast;   /* ANYCAST binding array: own queues, then wildcard ones */
  mqr_queue_t **multicast; /* MULTICAST binding array, same order */
  uint32_t n_anycast;
  uint32_t n_multicast;
  uint32_t cursor; /* round-robin position in anycast[] */
  mqr_address_info_t info;
  uint8_t flags;
  uint8_t spare;
  uint64_t routed;
  mqr__dupcache_t *dups; /* created by the first send with a duplicate id */
} mqr__address_hot_t;

static_assert(sizeof(mqr__address_hot_t) == 64, "the hot part of an address is one cache line");

/* Layout of an address block: [cold][hot line][name bytes]. The block is aligned so that
 * the hot line starts a 128-byte pair, the name bytes filling its second line. */
struct mqr_address_s {
  /* Cold: topology and settings. */
  uint64_t hash;
  uint64_t seq;
  uint64_t unrouted;
  void *block;       /* what the allocator returned; the struct is aligned inside it */
  mqr_queue_t **own; /* this address's queues, in creation order */
  uint32_t n_own, cap_own;
  mqr_address_settings_t settings; /* merged; dead_letter_address borrows a settings entry */
  alignas(64) mqr__address_hot_t hot;
};

static_assert(offsetof(struct mqr_address_s, hot) + sizeof(mqr__address_hot_t) == sizeof(struct mqr_address_s),
              "the name bytes follow the hot line");

typedef struct mqr__settings_entry_s {
  mqr_str_t match; /* bytes follow the struct, then the dead-letter address */
  mqr_address_settings_t s;
} mqr__settings_entry_t;

static inline bool mqr__is_wildcard(const mqr_address_t *a) { return (a->hot.flags & MQR_ADDRESS_WILDCARD) != 0; }

/* The longest address or queue name, in bytes. */
#define MQR__NAME_MAX 65535u

/* Internal topology steps shared by router.c and route.c. */
int mqr__router_create_address(mqr_router_t *r, mqr_str_t name, uint64_t hash, mqr_routing_set_t types, uint32_t flags,
                               mqr_address_t **out, mqr_error_t *err);
int mqr__router_create_queue(mqr_router_t *r, const mqr_queue_config_t *cfg, mqr_address_t *a, mqr_queue_t **out,
                             mqr_error_t *err);
/* Unlinks and frees an address that has no queues (no allocation). */
void mqr__router_drop_address(mqr_router_t *r, mqr_address_t *a);

#endif
