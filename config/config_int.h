/* Routing-config files, shared by the config sources (nothing here is installed):
 *
 *   yaml.c       diagnostics, and reading YAML nodes with their positions: keys, booleans,
 *                integers, sizes, durations, strings, routing types
 *   parse.c      the document: wildcard syntax, address settings, addresses and queues;
 *                loading from text, a file or the embedded default; the accessors
 *   listeners.c  the listeners section and its accessors
 *   protocols.c  the registered protocols, whose blocks a listener may have
 *   persistence.c the persistence section (the journal) and its accessor
 *   security.c   the security section: users, anonymous clients, security-settings
 *   diverts.c    the diverts section, its accessors, and diverts built and reloaded
 *   apply.c      building a router from a config, and applying a reloaded one to it
 *
 * libyaml allocates its document with the C allocator (it has no hook); everything mqr
 * keeps goes through mqr_malloc. */
#ifndef MQR_CONFIG_INT_H
#define MQR_CONFIG_INT_H

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <yaml.h>

#include "mqr/config.h"

extern const char mqr__default_conf[];
extern const size_t mqr__default_conf_len;

#define DEFAULT_PORT 61616

typedef struct {
  char *name;
  char *filter;
  char *last_value_key;  /* NULL: not a last-value queue */
  char *group_first_key; /* NULL: none */
  mqr_routing_type_t type;
  bool durable, purge_on_no_consumers, enabled, exclusive, group_rebalance, non_destructive;
  int32_t max_consumers, group_buckets, consumers_before_dispatch;
  int64_t ring_size, delay_before_dispatch;
  uint32_t line, column;
} cfg_queue_t;

typedef struct {
  char *name;
  bool has_types;
  mqr_routing_set_t types;
  cfg_queue_t *queues;
  uint32_t n_queues, cap_queues;
  uint32_t line, column;
} cfg_address_t;

typedef struct {
  char *match;
  char *dla, *dlq_prefix, *dlq_suffix, *exa, *exq_prefix, *exq_suffix, *dlvk, *dgfk;
  mqr_address_settings_t s;
  uint32_t line, column;
} cfg_settings_t;

typedef struct {
  char *name, *address, *forwarding, *filter, *routing_name;
  bool exclusive;
  mqr_divert_routing_t rt;
  uint32_t line, column;
} cfg_divert_t;

typedef struct {
  mqr_listener_config_t pub;
  char *name, *host, *prefix[2];
  char *tls[4]; /* cert, key, ca, ciphers */
} cfg_listener_t;

typedef struct {
  mqr_security_setting_t pub;
  char *text; /* match and roles, each NUL-terminated */
} cfg_secset_t;

struct mqr_config_s {
  char *file;
  mqr_wildcard_t wildcard;
  cfg_listener_t *listeners;
  uint32_t n_listeners, cap_listeners;
  cfg_settings_t *settings;
  uint32_t n_settings, cap_settings;
  cfg_address_t *addresses;
  uint32_t n_addresses, cap_addresses;
  uint32_t n_queues;
  cfg_divert_t *diverts;
  uint32_t n_diverts, cap_diverts;
  mqr_persistence_config_t persistence;
  char *persistence_dir;
  mqr_cluster_config_t cluster;
  mqr_cluster_peer_config_t cluster_peers[15];
  char *cluster_bind, *cluster_dir;
  char *cluster_strs[5];   /* user, password, tls ca, cert, key */
  int64_t expiry_scan_ms;  /* message-expiry-scan-period; 0: not given */
  int64_t global_max_size; /* bytes; -1: none; 0: not given (the default, from the machine's memory) */
  mqr_log_config_t log;
  mqr_security_config_t security;
  char *users_file, *roles_file, *anonymous_roles;
  cfg_secset_t *secsets;
  uint32_t n_secsets, cap_secsets;
};

typedef struct {
  yaml_document_t doc;
  const char *file;
  mqr_diags_t *diags;
  mqr_config_t *cfg;
  uint32_t errors;
  bool nomem;
} ctx_t;

typedef struct {
  yaml_node_t *key, *value;
  mqr_str_t name;
} pair_t;

#define ERR(c, n, ...) mqr__cfg_diag_at((c), MQR_ECONFIG, (n), __VA_ARGS__)

#define FOREACH_PAIR(c, map, pr)                                                                                       \
  for (yaml_node_pair_t *pr##_it = (map)->data.mapping.pairs.start; pr##_it < (map)->data.mapping.pairs.top;           \
       pr##_it++)                                                                                                      \
    for (pair_t pr = {mqr__cfg_node((c), pr##_it->key), mqr__cfg_node((c), pr##_it->value), {0}}, *pr##_once = &pr;    \
         pr##_once; pr##_once = NULL)

void mqr__cfg_diags_vadd(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt,
                         va_list ap);
void mqr__cfg_diags_add(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *fmt, ...);
void mqr__cfg_diags_add_error(mqr_diags_t *d, int code, const char *file, uint32_t line, uint32_t col, const char *msg);
void mqr__cfg_diag_at(ctx_t *c, int code, const yaml_node_t *n, const char *fmt, ...);
char *mqr__cfg_dup_n(ctx_t *c, const char *s, size_t n);
bool mqr__cfg_grow(ctx_t *c, void **arr, uint32_t n, uint32_t *cap, size_t elem);
yaml_node_t *mqr__cfg_node(ctx_t *c, int i);
const char *mqr__cfg_kind_name(const yaml_node_t *n);
mqr_str_t mqr__cfg_scalar(const yaml_node_t *n);
bool mqr__cfg_is_plain(const yaml_node_t *n);
bool mqr__cfg_is_null(const yaml_node_t *n);
bool mqr__cfg_want(ctx_t *c, const yaml_node_t *n, yaml_node_type_t type, const char *what);
bool mqr__cfg_check_key(ctx_t *c, yaml_node_t *k, const char *where);
/* Pair p (at its place in map) read as a key: a scalar (its name set) not repeated earlier
 * in map. False: an error was reported; skip the pair. */
bool mqr__cfg_key(ctx_t *c, yaml_node_t *map, yaml_node_pair_t *at, pair_t *p, const char *where);
void mqr__cfg_unknown_key(ctx_t *c, const pair_t *p, const char *where, const char *known);
bool mqr__cfg_get_bool(ctx_t *c, const pair_t *p, bool *out);
bool mqr__cfg_parse_int(mqr_str_t s, bool bytes, int64_t *out);
bool mqr__cfg_get_int(ctx_t *c, const pair_t *p, bool bytes, int64_t min, int64_t max, int64_t *out);
bool mqr__cfg_parse_duration(mqr_str_t s, int64_t *out);
bool mqr__cfg_get_duration(ctx_t *c, const pair_t *p, int64_t max_ms, int64_t *out);
bool mqr__cfg_get_string(ctx_t *c, const pair_t *p, mqr_str_t *out);
bool mqr__cfg_get_routing_type(ctx_t *c, const yaml_node_t *n, const char *what, mqr_routing_type_t *out);
void mqr__cfg_parse_wildcard(ctx_t *c, yaml_node_t *map);
void mqr__cfg_parse_settings(ctx_t *c, yaml_node_t *map);
void mqr__cfg_parse_listeners(ctx_t *c, yaml_node_t *seq);
/* protocols.c: where a registered protocol's options start in a listener's options
 * (MQR_LISTENER_OPTIONS: not registered), and every option at its default. */
uint32_t mqr__cfg_option_base(const mqr_protocol_def_t *def);
void mqr__cfg_options_default(int64_t *options);
void mqr__cfg_parse_addresses(ctx_t *c, yaml_node_t *map);
bool mqr__cfg_listener_same(const mqr_listener_config_t *a, const mqr_listener_config_t *b);
int mqr__cfg_build(const mqr_config_t *cfg, mqr_router_t *r, mqr_diags_t *diags, mqr_error_t *err);
void mqr__cfg_parse_root(ctx_t *c, yaml_node_t *root);
void mqr__cfg_persistence_defaults(mqr_persistence_config_t *p);
void mqr__cfg_cluster_defaults(mqr_cluster_config_t *cc);
void mqr__cfg_parse_cluster(ctx_t *c, yaml_node_t *map);
void mqr__cfg_free_cluster(mqr_config_t *cfg);
void mqr__cfg_parse_persistence(ctx_t *c, yaml_node_t *map);
void mqr__cfg_parse_diverts(ctx_t *c, yaml_node_t *map);
/* A path as written, relative to the config file's folder unless absolute (security.c). */
char *mqr__cfg_path(ctx_t *c, mqr_str_t p);
/* security.c: the section, its defaults, and what it holds freed. */
void mqr__cfg_security_defaults(mqr_security_config_t *s);
void mqr__cfg_parse_security(ctx_t *c, yaml_node_t *map);
void mqr__cfg_free_security(mqr_config_t *cfg);
void mqr__cfg_free_diverts(mqr_config_t *cfg);
int mqr__cfg_add_divert(const mqr_config_t *cfg, uint32_t i, mqr_router_t *r, mqr_error_t *err);
int mqr__cfg_apply_diverts(const mqr_config_t *cfg, const mqr_config_t *old, mqr_router_t *r,
                           void (*report)(void *ctx, bool applied, const char *line), void *ctx, mqr_error_t *err);

#endif
