/* mqr: the command-line tool. Here: the dispatch, --help, and the commands over routing
 * configs (the others are in cmd_*.c):
 *   mqr config check [FILE]         validate, print a summary or the errors
 *   mqr config show [FILE]          every setting, and the routing table
 *   mqr route [options] ADDRESS     dry-run sends through the config's router
 * Without FILE (or --config) the embedded default config is used. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "mqr/broker.h"

#define MAX_DIAGS 64

static const char usage_config[] =
    "usage: mqr config check [FILE]   check a config: a summary, or every problem with its line\n"
    "       mqr config show [FILE]    every setting (listeners, wildcard syntax, address settings\n"
    "                                 as each address resolves them) and the routing table\n"
    "  FILE defaults to the embedded conf/mqr.yaml.\n";

static const char usage_route[] =
    "usage: mqr route [--config FILE] [--listener NAME] [--routing-type ANYCAST|MULTICAST] [--dup-id ID]\n"
    "                 [--count N] [--json] ADDRESS\n"
    "  Dry-runs N sends through the config's router (no broker): one line per send, the\n"
    "  status (OK, NO_BINDINGS, NO_BINDINGS_DLA, DUPLICATE_ID) then the queues that got it,\n"
    "  and 'diverted:' the diverts that take a copy (their copies are not followed);\n"
    "  --json prints one JSON object per line. A refused send exits 1.\n";

static const char usage_text[] =
    "usage: mqr COMMAND [OPTIONS] [ARGS]   (mqr COMMAND --help for each)\n"
    "  send     send messages to a broker          recv     receive messages from a broker\n"
    "  stat     a broker's addresses and queues    config   check or show a config file\n"
    "  route    dry-run sends through a config     schema   an Avro schema's canonical form\n"
    "  avro     encode, decode, read, write Avro   journal  check or dump journal files\n"
    "  address  make or delete a broker's address  queue    manage a broker's queue\n"
    "  user     keep a users file (add, passwd, roles, remove, list)\n"
    "  cluster  a cluster's groups: status, transfer-leader\n"
    "  mqr --version | --help\n"
    "Exit status: 0 done, 1 an error (said on stderr as \"mqr: ...\"), 2 a usage error.\n";

static int usage(FILE *f, int rc) {
  fputs(usage_text, f);
  return rc;
}

static void print_diags(const mqr_diags_t *d) {
  char line[1024];
  for (uint32_t i = 0; i < d->count; i++) {
    const mqr_error_t *e = &d->items[i];
    mqr_error_format(e, line, sizeof line);
    fprintf(stderr, "mqr: %s: %s\n", e->code ? "error" : "warning", line);
  }
  if (d->dropped) fprintf(stderr, "mqr: ... and %u more\n", d->dropped);
}

/* Loads FILE, or the embedded default when path is NULL; prints problems. */
static mqr_config_t *load(const char *path) {
  mqr_error_t items[MAX_DIAGS];
  mqr_diags_t d;
  mqr_diags_init(&d, items, MAX_DIAGS);
  mqr_config_t *cfg = NULL;
  int rc = path ? mqr_config_load_file(path, &cfg, &d) : mqr_config_load_default(&cfg, &d);
  print_diags(&d);
  if (rc != 0) {
    const char *name = path ? path : mqr_config_default_name();
    if (rc == MQR_ECONFIG)
      fprintf(stderr, "mqr: %s: %u error%s\n", name, d.errors, d.errors == 1 ? "" : "s");
    else if (d.count == 0)
      fprintf(stderr, "mqr: %s: %s\n", name, mqr_strerror(rc));
    return NULL;
  }
  return cfg;
}

static int build_router(const mqr_config_t *cfg, mqr_router_t *r) {
  mqr_error_t e;
  int rc = mqr_config_build_router(cfg, r, &e);
  if (rc) {
    char line[1024];
    fprintf(stderr, "mqr: error: %s\n", mqr_error_format(&e, line, sizeof line));
  }
  return rc;
}

static int count_wild(mqr_address_t *a, void *p) {
  if (mqr_address_flags(a) & MQR_ADDRESS_WILDCARD) ++*(uint32_t *)p;
  return 0;
}

static int cmd_check(const char *path) {
  mqr_config_t *cfg = load(path);
  if (cfg == NULL) return 1;
  uint32_t wild = 0, nl = mqr_config_listener_count(cfg);
  mqr_router_t r;
  if (build_router(cfg, &r) != 0) {
    mqr_config_destroy(cfg);
    return 1;
  }
  mqr_wildcard_t wc = mqr_config_wildcard(cfg);
  mqr_router_foreach_address(&r, count_wild, &wild);
  printf("%s: OK: %u listener%s, %u address%s (%u wildcard), %u queue%s, %u address-settings; wildcards '%c' '%c' '%c' "
         "escape '%c'\n",
         mqr_config_file(cfg), nl, nl == 1 ? "" : "s", mqr_router_address_count(&r),
         mqr_router_address_count(&r) == 1 ? "" : "es", wild, mqr_router_queue_count(&r),
         mqr_router_queue_count(&r) == 1 ? "" : "s", mqr_config_settings_count(cfg), wc.delimiter, wc.any_words,
         wc.single_word, wc.escape);
  for (uint32_t i = 0; i < nl; i++) {
    const mqr_listener_config_t *l = mqr_config_listener(cfg, i);
    printf("  listener %s: %s:%u", l->name, l->host, l->port);
    for (uint32_t k = 0; k < l->prefixes.count; k++)
      printf(" %s-prefix '%.*s'", l->prefixes.items[k].type == MQR_ANYCAST ? "anycast" : "multicast",
             (int)l->prefixes.items[k].text.len, l->prefixes.items[k].text.ptr);
    printf("\n");
  }
  mqr_router_close(&r);
  mqr_config_destroy(cfg);
  return 0;
}

static void print_queue_names(FILE *f, const mqr_address_t *a, mqr_routing_type_t t) {
  uint32_t n = mqr_address_binding_count(a, t);
  if (n == 0) fputs(" -", f);
  for (uint32_t i = 0; i < n; i++) {
    mqr_str_t q = mqr_queue_name(mqr_address_binding(a, t, i));
    fprintf(f, " %.*s", (int)q.len, q.ptr);
  }
}

/* The fields of settings whose bits are in set, as the config file names them. */
static void print_settings_set(FILE *f, const char *lead, const mqr_address_settings_t *s, uint64_t set) {
  fputs(lead, f);
  if (set & MQR_SET_AUTO_CREATE_ADDRESSES)
    fprintf(f, " auto-create-addresses=%s", s->auto_create_addresses ? "true" : "false");
  if (set & MQR_SET_AUTO_CREATE_QUEUES) fprintf(f, " auto-create-queues=%s", s->auto_create_queues ? "true" : "false");
  if (set & MQR_SET_DEFAULT_ADDRESS_ROUTING_TYPE)
    fprintf(f, " default-address-routing-type=%s", mqr_routing_type_name(s->default_address_routing_type));
  if (set & MQR_SET_DEFAULT_QUEUE_ROUTING_TYPE)
    fprintf(f, " default-queue-routing-type=%s", mqr_routing_type_name(s->default_queue_routing_type));
  if (set & MQR_SET_DEAD_LETTER_ADDRESS) {
    if (s->dead_letter_address.len)
      fprintf(f, " dead-letter-address=%.*s", (int)s->dead_letter_address.len, s->dead_letter_address.ptr);
    else
      fputs(" dead-letter-address=(none)", f);
  }
  if (set & MQR_SET_SEND_TO_DLA_ON_NO_ROUTE)
    fprintf(f, " send-to-dla-on-no-route=%s", s->send_to_dla_on_no_route ? "true" : "false");
  if (set & MQR_SET_ID_CACHE_SIZE) fprintf(f, " id-cache-size=%d", s->id_cache_size);
  if (set & MQR_SET_MAX_SIZE_BYTES) fprintf(f, " max-size-bytes=%lld", (long long)s->max_size_bytes);
  if (set & MQR_SET_ADDRESS_FULL_POLICY)
    fprintf(f, " address-full-policy=%s", mqr_full_policy_name(s->address_full_policy));
  if (set & MQR_SET_MAX_DELIVERY_ATTEMPTS) fprintf(f, " max-delivery-attempts=%d", s->max_delivery_attempts);
  if (set & MQR_SET_AUTO_CREATE_DEAD_LETTER)
    fprintf(f, " auto-create-dead-letter-resources=%s", s->auto_create_dead_letter_resources ? "true" : "false");
  if (set & MQR_SET_DEAD_LETTER_QUEUE_PREFIX)
    fprintf(f, " dead-letter-queue-prefix=%.*s", (int)s->dead_letter_queue_prefix.len, s->dead_letter_queue_prefix.ptr);
  if (set & MQR_SET_DEAD_LETTER_QUEUE_SUFFIX)
    fprintf(f, " dead-letter-queue-suffix=%.*s", (int)s->dead_letter_queue_suffix.len, s->dead_letter_queue_suffix.ptr);
  if (set & MQR_SET_REDELIVERY_DELAY) fprintf(f, " redelivery-delay=%lld", (long long)s->redelivery_delay);
  if (set & MQR_SET_REDELIVERY_MULTIPLIER) fprintf(f, " redelivery-delay-multiplier=%g", s->redelivery_multiplier);
  if (set & MQR_SET_MAX_REDELIVERY_DELAY) fprintf(f, " max-redelivery-delay=%lld", (long long)s->max_redelivery_delay);
  if (set & MQR_SET_EXPIRY_ADDRESS) {
    if (s->expiry_address.len)
      fprintf(f, " expiry-address=%.*s", (int)s->expiry_address.len, s->expiry_address.ptr);
    else
      fputs(" expiry-address=(none)", f);
  }
  if (set & MQR_SET_AUTO_CREATE_EXPIRY)
    fprintf(f, " auto-create-expiry-resources=%s", s->auto_create_expiry_resources ? "true" : "false");
  if (set & MQR_SET_EXPIRY_QUEUE_PREFIX)
    fprintf(f, " expiry-queue-prefix=%.*s", (int)s->expiry_queue_prefix.len, s->expiry_queue_prefix.ptr);
  if (set & MQR_SET_EXPIRY_QUEUE_SUFFIX)
    fprintf(f, " expiry-queue-suffix=%.*s", (int)s->expiry_queue_suffix.len, s->expiry_queue_suffix.ptr);
  if (set & MQR_SET_EXPIRY_DELAY) fprintf(f, " expiry-delay=%lld", (long long)s->expiry_delay);
  if (set & MQR_SET_MIN_EXPIRY_DELAY) fprintf(f, " min-expiry-delay=%lld", (long long)s->min_expiry_delay);
  if (set & MQR_SET_MAX_EXPIRY_DELAY) fprintf(f, " max-expiry-delay=%lld", (long long)s->max_expiry_delay);
  if (set & MQR_SET_DEFAULT_EXCLUSIVE)
    fprintf(f, " default-exclusive-queue=%s", s->default_exclusive_queue ? "true" : "false");
  if (set & MQR_SET_DEFAULT_LAST_VALUE)
    fprintf(f, " default-last-value-queue=%s", s->default_last_value_queue ? "true" : "false");
  if (set & MQR_SET_DEFAULT_LAST_VALUE_KEY)
    fprintf(f, " default-last-value-key=%.*s", (int)s->default_last_value_key.len, s->default_last_value_key.ptr);
  if (set & MQR_SET_DEFAULT_GROUP_BUCKETS) fprintf(f, " default-group-buckets=%d", s->default_group_buckets);
  if (set & MQR_SET_DEFAULT_GROUP_REBALANCE)
    fprintf(f, " default-group-rebalance=%s", s->default_group_rebalance ? "true" : "false");
  if (set & MQR_SET_DEFAULT_RING_SIZE) fprintf(f, " default-ring-size=%lld", (long long)s->default_ring_size);
  if (set & MQR_SET_DEFAULT_CONSUMERS_BEFORE)
    fprintf(f, " default-consumers-before-dispatch=%d", s->default_consumers_before_dispatch);
  if (set & MQR_SET_DEFAULT_DELAY_BEFORE)
    fprintf(f, " default-delay-before-dispatch=%lld", (long long)s->default_delay_before_dispatch);
  if (set & MQR_SET_AUTO_DELETE_QUEUES) fprintf(f, " auto-delete-queues=%s", s->auto_delete_queues ? "true" : "false");
  if (set & MQR_SET_AUTO_DELETE_QUEUES_DELAY)
    fprintf(f, " auto-delete-queues-delay=%lld", (long long)s->auto_delete_queues_delay);
  if (set & MQR_SET_AUTO_DELETE_QUEUES_COUNT)
    fprintf(f, " auto-delete-queues-message-count=%lld", (long long)s->auto_delete_queues_message_count);
  if (set & MQR_SET_AUTO_DELETE_ADDRESSES)
    fprintf(f, " auto-delete-addresses=%s", s->auto_delete_addresses ? "true" : "false");
  if (set & MQR_SET_AUTO_DELETE_ADDRESSES_DELAY)
    fprintf(f, " auto-delete-addresses-delay=%lld", (long long)s->auto_delete_addresses_delay);
  if (set & MQR_SET_DEFAULT_NON_DESTRUCTIVE)
    fprintf(f, " default-non-destructive=%s", s->default_non_destructive ? "true" : "false");
  if (set & MQR_SET_DEFAULT_GROUP_FIRST_KEY)
    fprintf(f, " default-group-first-key=%.*s", (int)s->default_group_first_key.len, s->default_group_first_key.ptr);
  if (set & MQR_SET_CONFIG_DELETE_QUEUES)
    fprintf(f, " config-delete-queues=%s", s->config_delete_queues ? "FORCE" : "OFF");
  if (set & MQR_SET_CONFIG_DELETE_ADDRESSES)
    fprintf(f, " config-delete-addresses=%s", s->config_delete_addresses ? "FORCE" : "OFF");
  if (set & MQR_SET_REPLICATED) fprintf(f, " replicated=%s", s->replicated ? "true" : "false");
  fputc('\n', f);
}

/* Every field of resolved settings. */
static void print_settings(FILE *f, const char *lead, const mqr_address_settings_t *s) {
  print_settings_set(f, lead, s, MQR_SET_ALL);
}

static int show_address(mqr_address_t *a, void *arg) {
  FILE *f = arg;
  mqr_str_t name = mqr_address_name(a);
  char types[64];
  mqr_routing_set_format(mqr_address_routing_types(a), types, sizeof types);
  int def = mqr_address_default_routing_type(a);
  uint32_t flags = mqr_address_flags(a);
  fprintf(f, "address %.*s  types=[%s] default=%s%s%s\n", (int)name.len, name.ptr, types,
          def >= 0 ? mqr_routing_type_name(def) : "none", flags & MQR_ADDRESS_WILDCARD ? "  wildcard" : "",
          flags & MQR_ADDRESS_AUTO_CREATED ? "  auto-created" : "");
  for (uint32_t i = 0; i < mqr_address_queue_count(a); i++) {
    const mqr_queue_t *q = mqr_address_queue(a, i);
    mqr_str_t qn = mqr_queue_name(q), ft = mqr_queue_filter(q);
    fprintf(f, "  queue %.*s  %s%s%s%s", (int)qn.len, qn.ptr, mqr_routing_type_name(mqr_queue_routing_type(q)),
            mqr_queue_durable(q) ? " durable" : " non-durable", mqr_queue_enabled(q) ? "" : " disabled",
            mqr_queue_purge_on_no_consumers(q) ? " purge-on-no-consumers" : "");
    if (mqr_queue_max_consumers(q) >= 0) fprintf(f, " max-consumers=%d", mqr_queue_max_consumers(q));
    if (ft.len) fprintf(f, " filter=\"%.*s\"", (int)ft.len, ft.ptr);
    fputc('\n', f);
  }
  if (!(flags & MQR_ADDRESS_WILDCARD)) {
    fputs("  routes ANYCAST:", f);
    print_queue_names(f, a, MQR_ANYCAST);
    fputs("  MULTICAST:", f);
    print_queue_names(f, a, MQR_MULTICAST);
    fputc('\n', f);
  }
  print_settings(f, "  settings", mqr_address_settings(a));
  return 0;
}

static int cmd_show(const char *path) {
  mqr_config_t *cfg = load(path);
  if (cfg == NULL) return 1;
  mqr_router_t r;
  if (build_router(cfg, &r) != 0) {
    mqr_config_destroy(cfg);
    return 1;
  }
  printf("config %s\n", mqr_config_file(cfg));
  mqr_wildcard_t wc = mqr_config_wildcard(cfg);
  printf("wildcard-addresses delimiter='%c' any-words='%c' single-word='%c' escape='%c'\n", wc.delimiter, wc.any_words,
         wc.single_word, wc.escape);
  for (uint32_t i = 0; i < mqr_config_listener_count(cfg); i++) {
    const mqr_listener_config_t *l = mqr_config_listener(cfg, i);
    char protocols[64] = "";
    const mqr_protocol_def_t *def;
    for (uint32_t k = 0; (def = mqr_config_protocol(k)) != NULL; k++)
      if (l->protocols & def->bit)
        snprintf(protocols + strlen(protocols), sizeof protocols - strlen(protocols), "%s%s", protocols[0] ? "," : "",
                 def->name);
    printf("listener %s host=%s port=%u protocols=%s max-frame-size=%u handshake-timeout=%ums idle-timeout=%ums",
           l->name, l->host, l->port, protocols, l->max_frame, l->handshake_timeout_ms, l->idle_timeout_ms);
    for (uint32_t k = 0; (def = mqr_config_protocol(k)) != NULL; k++) /* each protocol's block */
      for (uint32_t o = 0; (l->protocols & def->bit) && o < def->n_options; o++) {
        long long v = (long long)mqr_listener_option(l, def, o);
        if (def->options[o].kind == MQR_OPTION_BOOL)
          printf(" %s-%s=%s", def->name, def->options[o].key, v ? "true" : "false");
        else
          printf(" %s-%s=%lld%s", def->name, def->options[o].key, v,
                 def->options[o].kind == MQR_OPTION_DURATION ? "ms" : "");
      }
    for (uint32_t k = 0; k < l->prefixes.count; k++)
      printf(" %s-prefix=%.*s", l->prefixes.items[k].type == MQR_ANYCAST ? "anycast" : "multicast",
             (int)l->prefixes.items[k].text.len, l->prefixes.items[k].text.ptr);
    printf("\n");
  }
  const mqr_persistence_config_t *pc = mqr_config_persistence(cfg);
  printf("persistence enabled=%s directory=%s journal-file-size=%zu journal-min-files=%u journal-pool-files=%lld "
         "journal-buffer-timeout=%lluns journal-buffer-size=%zu journal-sync=%s journal-compact-min-files=%u "
         "journal-compact-percentage=%u\n",
         pc->enabled ? "true" : "false", pc->directory ? pc->directory : "(none)", pc->journal_file_size,
         pc->journal_min_files, pc->journal_pool_files ? (long long)pc->journal_pool_files : -1LL,
         (unsigned long long)pc->journal_buffer_timeout_ns, pc->journal_buffer_size,
         pc->journal_sync ? "true" : "false", pc->journal_compact_min_files, pc->journal_compact_percentage);
  const mqr_cluster_config_t *cc = mqr_config_cluster(cfg);
  if (cc->enabled) {
    printf("cluster node-id=%llu bind=%s groups=%u directory=%s election-timeout=%ums heartbeat-timeout=%ums "
           "snapshot-threshold=%u",
           (unsigned long long)cc->node_id, cc->bind, cc->groups, cc->directory ? cc->directory : "(persistence's)",
           cc->election_timeout_ms, cc->heartbeat_timeout_ms, cc->snapshot_threshold);
    for (uint32_t k = 0; k < cc->n_peers; k++)
      printf(" peer=%llu@%s", (unsigned long long)cc->peers[k].id, cc->peers[k].address);
    printf("\n");
  }
  printf("global-max-size=%lld\n", (long long)mqr_config_global_max_size(cfg));
  uint32_t scan = mqr_config_expiry_scan_ms(cfg);
  if (scan) printf("message-expiry-scan-period=%ums\n", scan);
  mqr_address_settings_t dflt;
  mqr_address_settings_defaults(&dflt);
  print_settings(stdout, "address-settings default", &dflt);
  for (uint32_t i = 0; i < mqr_config_settings_count(cfg); i++) {
    mqr_str_t match;
    const mqr_address_settings_t *as = mqr_config_settings(cfg, i, &match);
    char lead[300];
    snprintf(lead, sizeof lead, "address-settings '%.*s'", (int)match.len, match.ptr);
    print_settings_set(stdout, lead, as, as->set);
  }
  for (uint32_t i = 0; i < mqr_router_divert_count(&r); i++) {
    const mqr_divert_t *d = mqr_router_divert(&r, i);
    mqr_str_t n = mqr_divert_name(d), a = mqr_divert_address(d), fw = mqr_divert_forwarding_address(d),
              rn = mqr_divert_routing_name(d), fl = mqr_divert_filter(d);
    printf("divert %.*s address=%.*s forwarding-address=%.*s exclusive=%s routing-type=%s routing-name=%.*s "
           "filter=%.*s\n",
           (int)n.len, n.ptr, (int)a.len, a.ptr, (int)fw.len, fw.ptr, mqr_divert_exclusive(d) ? "true" : "false",
           mqr_divert_routing_type_name(mqr_divert_routing_type(d)), (int)rn.len, rn.ptr, (int)fl.len, fl.ptr);
  }
  printf("routing table: %u addresses, %u queues\n", mqr_router_address_count(&r), mqr_router_queue_count(&r));
  int rc = mqr_router_foreach_address(&r, show_address, stdout);
  mqr_router_close(&r);
  mqr_config_destroy(cfg);
  return rc ? 1 : 0;
}

static void print_send_json(uint32_t i, const mqr_route_result_t *res) {
  json_t *o = json_object();
  json_object_set_new(o, "send", json_integer(i));
  json_object_set_new(o, "status", json_string(mqr_route_status_name(res->status)));
  if (res->address) {
    mqr_str_t an = mqr_address_name(res->address);
    json_object_set_new(o, "address", json_stringn(an.ptr, an.len));
  }
  json_t *qs = json_array();
  for (uint32_t k = 0; k < res->count; k++) {
    mqr_str_t qn = mqr_queue_name(res->queues[k]);
    json_array_append_new(qs, json_stringn(qn.ptr, qn.len));
  }
  json_object_set_new(o, "queues", qs);
  json_t *ds = json_array();
  for (uint32_t k = 0; k < res->divert_count; k++) {
    mqr_str_t dn = mqr_divert_name(res->diverts[k]);
    json_array_append_new(ds, json_stringn(dn.ptr, dn.len));
  }
  json_object_set_new(o, "diverts", ds);
  json_object_set_new(o, "created_address", json_boolean(res->flags & MQR_ROUTE_CREATED_ADDRESS));
  json_object_set_new(o, "created_queue", json_boolean(res->flags & MQR_ROUTE_CREATED_QUEUE));
  json_object_set_new(o, "added_routing_type", json_boolean(res->flags & MQR_ROUTE_ADDED_TYPE));
  char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (text) puts(text);
  free(text);
  json_decref(o);
}

static int cmd_route(int argc, char **argv) {
  static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                       {"listener", required_argument, NULL, 'l'},
                                       {"routing-type", required_argument, NULL, 't'},
                                       {"dup-id", required_argument, NULL, 'd'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *path = NULL, *listener = NULL, *dup = NULL;
  int type = MQR_ROUTING_NONE, json = 0;
  long count = 1;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "c:l:t:d:n:jh", opts, NULL)) != -1) {
    switch (c) {
    case 'c': path = optarg; break;
    case 'l': listener = optarg; break;
    case 'd': dup = optarg; break;
    case 'j': json = 1; break;
    case 't': {
      mqr_routing_type_t t;
      if (mqr_routing_type_parse(mqr_str(optarg), &t) != 0) {
        fprintf(stderr, "mqr: unknown routing type '%s' (expected ANYCAST or MULTICAST)\n", optarg);
        return 2;
      }
      type = t;
      break;
    }
    case 'n': {
      char *end;
      count = strtol(optarg, &end, 10);
      if (*end || count < 1 || count > 100000000) {
        fprintf(stderr, "mqr: --count must be between 1 and 100000000, not '%s'\n", optarg);
        return 2;
      }
      break;
    }
    case 'h': fputs(usage_route, stdout); return 0;
    default: return cli_usage_error(usage_route, NULL);
    }
  }
  if (optind + 1 != argc) return cli_usage_error(usage_route, "give exactly one ADDRESS");
  const char *address = argv[optind];
  mqr_config_t *cfg = load(path);
  if (cfg == NULL) return 1;
  const mqr_listener_config_t *l = NULL;
  if (listener) {
    if ((l = mqr_config_find_listener(cfg, listener)) == NULL) {
      fprintf(stderr, "mqr: %s has no listener '%s'\n", mqr_config_file(cfg), listener);
      mqr_config_destroy(cfg);
      return 1;
    }
  } else {
    l = mqr_config_listener(cfg, 0);
  }
  mqr_router_t r;
  if (build_router(cfg, &r) != 0) {
    mqr_config_destroy(cfg);
    return 1;
  }
  /* Room for every queue the router could reach, plus one an ANYCAST send may create. */
  uint32_t cap = mqr_router_queue_count(&r) + 1;
  mqr_queue_t **targets = malloc(cap * sizeof *targets);
  uint32_t dcap = mqr_router_divert_count(&r) + 1;
  mqr_divert_t **diverts = malloc(dcap * sizeof *diverts);
  int rc = 0;
  if (targets == NULL || diverts == NULL) {
    fprintf(stderr, "mqr: out of memory\n");
    rc = 1;
  }
  for (long i = 0; targets && diverts && i < count; i++) {
    mqr_route_request_t req = {mqr_str(address), type, mqr_str(dup), l ? &l->prefixes : NULL, NULL, NULL};
    mqr_route_result_t res = {targets, cap, 0, 0, 0, 0, NULL, diverts, dcap, 0, 0};
    mqr_error_t e;
    int err = mqr_router_route(&r, &req, &res, &e);
    if (err == MQR_ENOSPC) { /* an auto-created queue grew the router: make room, retry */
      mqr_queue_t **t = realloc(targets, res.needed * sizeof *t);
      if (t == NULL) break;
      targets = t;
      cap = res.needed;
      i--;
      continue;
    }
    if (err) {
      fprintf(stderr, "mqr: send %ld refused: %s [%s]\n", i + 1, e.message, mqr_err_name(err));
      rc = 1;
      break;
    }
    if (json) {
      print_send_json((uint32_t)i + 1, &res);
      continue;
    }
    fputs(mqr_route_status_name(res.status), stdout);
    if (res.status == MQR_ROUTE_NO_BINDINGS_DLA) {
      mqr_str_t an = mqr_address_name(res.address);
      printf(" (to %.*s)", (int)an.len, an.ptr);
    }
    for (uint32_t k = 0; k < res.count; k++) {
      mqr_str_t qn = mqr_queue_name(res.queues[k]);
      printf(" %.*s", (int)qn.len, qn.ptr);
    }
    for (uint32_t k = 0; k < res.divert_count; k++) {
      mqr_str_t dn = mqr_divert_name(res.diverts[k]);
      printf("%s%.*s", k ? " " : " diverted: ", (int)dn.len, dn.ptr);
    }
    putchar('\n');
  }
  free(targets);
  free(diverts);
  mqr_router_close(&r);
  mqr_config_destroy(cfg);
  return rc;
}

/* --help (or -h) anywhere among a command's arguments: its usage, on stdout. */
static bool wants_help(int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--")) return false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
  }
  return false;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr, 2);
  mqr_broker_register_protocols(); /* the listeners' protocol blocks, for configs */
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) return usage(stdout, 0);
  if (!strcmp(cmd, "--version")) {
    printf("mqr %s\n", mqr_version());
    return 0;
  }
  static const struct {
    const char *name, *usage;
  } helps[] = {{"config", usage_config},   {"route", usage_route},         {"schema", mqr_usage_schema},
               {"avro", mqr_usage_avro},   {"send", mqr_usage_send},       {"recv", mqr_usage_recv},
               {"stat", mqr_usage_stat},   {"journal", mqr_usage_journal}, {"address", mqr_usage_address},
               {"queue", mqr_usage_queue}, {"user", mqr_usage_user},       {"cluster", mqr_usage_cluster}};
  for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
    if (!strcmp(cmd, helps[i].name) && wants_help(argc, argv)) {
      fputs(helps[i].usage, stdout);
      return 0;
    }
  /* A tls:// URL's files and the user, for every command that connects: taken off here. */
  if (strcmp(cmd, "user")) {
    int w = 2;
    for (int r = 2; r < argc; r++) {
      const char *names[5] = {"--ca", "--cert", "--key", "--user", "--password"};
      const char **dst[5] = {&cli_tls_ca, &cli_tls_cert, &cli_tls_key, &cli_user, &cli_password};
      int k = -1;
      const char *val = NULL;
      for (int i = 0; i < 5; i++) {
        size_t n = strlen(names[i]);
        if (!strcmp(argv[r], names[i]))
          k = i, val = r + 1 < argc ? argv[r + 1] : NULL;
        else if (!strncmp(argv[r], names[i], n) && argv[r][n] == '=')
          k = i, val = argv[r] + n + 1;
      }
      if (k < 0) {
        argv[w++] = argv[r];
        continue;
      }
      if (val == NULL) {
        fprintf(stderr, "mqr: %s needs a value\n", names[k]);
        return 2;
      }
      *dst[k] = val;
      if (!strcmp(argv[r], names[k])) r++;
    }
    argc = w;
    argv[argc] = NULL;
  }
  if (!strcmp(cmd, "config")) {
    if (argc < 3 || argc > 4) return cli_usage_error(usage_config, NULL);
    const char *path = argc == 4 ? argv[3] : NULL;
    if (!strcmp(argv[2], "check")) return cmd_check(path);
    if (!strcmp(argv[2], "show")) return cmd_show(path);
    return cli_usage_error(usage_config, "unknown config command '%s'", argv[2]);
  }
  if (!strcmp(cmd, "route")) return cmd_route(argc - 1, argv + 1);
  if (!strcmp(cmd, "schema")) return mqr_cmd_schema(argc - 1, argv + 1);
  if (!strcmp(cmd, "avro")) return mqr_cmd_avro(argc - 1, argv + 1);
  if (!strcmp(cmd, "send")) return mqr_cmd_send(argc - 1, argv + 1);
  if (!strcmp(cmd, "recv")) return mqr_cmd_recv(argc - 1, argv + 1);
  if (!strcmp(cmd, "stat")) return mqr_cmd_stat(argc - 1, argv + 1);
  if (!strcmp(cmd, "journal")) return mqr_cmd_journal(argc - 1, argv + 1);
  if (!strcmp(cmd, "address")) return mqr_cmd_address(argc - 1, argv + 1);
  if (!strcmp(cmd, "queue")) return mqr_cmd_queue(argc - 1, argv + 1);
  if (!strcmp(cmd, "user")) return mqr_cmd_user(argc - 1, argv + 1);
  if (!strcmp(cmd, "cluster")) return mqr_cmd_cluster(argc - 1, argv + 1);
  fprintf(stderr, "mqr: unknown command '%s'\n", cmd);
  return usage(stderr, 2);
}
