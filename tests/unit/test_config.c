/* Routing-config files: the shipped ones load and build; every file under
 * tests/data/config/bad gives the error its first line announces
 * (`# expect: LINE:COLUMN message`) at that line and column; values parse to what they
 * say; hostile input is an error, never a crash. */
#include <dirent.h>

#include "mqr/broker.h"
#include "testutil.h"

static const char *src_dir(void) {
  const char *d = getenv("MQR_SOURCE_DIR");
  return d ? d : ".";
}

static mqr_config_t *load_ok(const char *path, mqr_diags_t *d) {
  mqr_config_t *cfg = NULL;
  int rc = mqr_config_load_file(path, &cfg, d);
  if (rc) {
    char line[1024];
    fail_msg("%s: %s: %s", path, mqr_err_name(rc), d->count ? mqr_error_format(&d->items[0], line, sizeof line) : "");
  }
  return cfg;
}

static int names_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.yaml files of dir, sorted; returns the count. */
static int list_yaml(const char *dir, char **out, int cap) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < cap) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".yaml") == 0) out[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(out, (size_t)n, sizeof *out, names_cmp);
  return n;
}

static void test_shipped_files_load_and_build(void **state) {
  (void)state;
  char path[2100], dir[1024], *names[64];
  snprintf(dir, sizeof dir, "%s/conf/examples", src_dir());
  int n = list_yaml(dir, names, 64);
  assert_true(n >= 2);
  for (int i = -1; i < n; i++) {
    if (i < 0)
      snprintf(path, sizeof path, "%s/conf/mqr.yaml", src_dir());
    else
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    mqr_error_t items[16];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 16);
    mqr_config_t *cfg = load_ok(path, &d);
    assert_int_equal(d.errors, 0);
    mqr_router_t r;
    mqr_error_t e;
    assert_int_equal(mqr_config_build_router(cfg, &r, &e), 0);
    assert_int_equal(mqr_router_address_count(&r), mqr_config_address_count(cfg));
    assert_int_equal(mqr_router_queue_count(&r), mqr_config_queue_count(cfg));
    assert_true(mqr_router_address_count(&r) > 0);
    mqr_router_close(&r);
    mqr_config_destroy(cfg);
    if (i >= 0) free(names[i]);
  }
}

static void test_embedded_default_is_conf_mqr_yaml(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/conf/mqr.yaml", src_dir());
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  mqr_str_t t = mqr_config_default_text();
  assert_int_equal(t.len, n);
  assert_memory_equal(t.ptr, buf, n);
  mqr_config_t *cfg;
  assert_int_equal(mqr_config_load_default(&cfg, NULL), 0);
  assert_string_equal(mqr_config_file(cfg), mqr_config_default_name());
  const mqr_listener_config_t *l = mqr_config_listener(cfg, 0);
  assert_non_null(l);
  assert_string_equal(l->host, "127.0.0.1");
  assert_string_equal(l->name, "main");
  assert_ptr_equal(mqr_config_find_listener(cfg, "main"), l);
  assert_null(mqr_config_find_listener(cfg, "nope"));
  const mqr_listener_config_t *web = mqr_config_listener(cfg, 1); /* metrics and probes */
  assert_non_null(web);
  assert_string_equal(web->name, "web");
  assert_int_equal(web->protocols, MQR_PROTOCOL_HTTP);
  assert_null(mqr_config_listener(cfg, 2));
  /* it shows ANYCAST, MULTICAST and a wildcard */
  mqr_router_t r;
  assert_int_equal(mqr_config_build_router(cfg, &r, NULL), 0);
  char got[256];
  assert_int_equal(route_names(&r, "jobs", MQR_ANYCAST, NULL, got, sizeof got), MQR_ROUTE_OK);
  assert_string_equal(got, "jobs.worker-1");
  assert_int_equal(route_names(&r, "news.europe", MQR_ROUTING_NONE, NULL, got, sizeof got), MQR_ROUTE_OK);
  assert_string_equal(got, "news.europe.reader news.all");
  mqr_router_close(&r);
  mqr_config_destroy(cfg);
}

static void test_bad_files_report_file_line_and_column(void **state) {
  (void)state;
  char dir[1024], path[1200], *names[128];
  snprintf(dir, sizeof dir, "%s/tests/data/config/bad", src_dir());
  int n = list_yaml(dir, names, 128);
  assert_true(n >= 15);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char head[512];
    assert_non_null(fgets(head, sizeof head, f));
    fclose(f);
    unsigned line, col;
    int off = 0;
    if (sscanf(head, "# expect: %u:%u %n", &line, &col, &off) != 2 || off == 0)
      fail_msg("%s: no expect line", names[i]);
    char *want = head + off;
    want[strcspn(want, "\n")] = '\0';
    mqr_error_t items[8];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 8);
    mqr_config_t *cfg = NULL;
    int rc = mqr_config_load_file(path, &cfg, &d);
    if (rc != MQR_ECONFIG) fail_msg("%s: loaded (rc %d), expected an error", names[i], rc);
    assert_null(cfg);
    assert_true(d.errors >= 1);
    const mqr_error_t *e = &d.items[0];
    if (e->code == 0) e = &d.items[1]; /* a warning first */
    if (e->line != line || e->column != col || strstr(e->message, want) == NULL || strcmp(e->file, path) != 0)
      fail_msg("%s: expected %u:%u '%s', got %s:%u:%u '%s'", names[i], line, col, want, e->file, e->line, e->column,
               e->message);
    free(names[i]);
  }
}

static const char every_key[] =
    "listeners:\n"
    "  - name: a\n"
    "    host: \"::1\"\n"
    "    port: 0\n"
    "    anycast-prefix: q/\n"
    "    multicast-prefix: t/\n"
    "    max-frame-size: 4MiB\n"
    "    protocols: [mqr, stomp]\n"
    "    stomp: {max-frame-size: 2MiB, max-headers: 50, max-header-length: 4KiB}\n"
    "  - name: b\n"
    "    protocols: stomp\n"
    "wildcard-addresses: {delimiter: '/', any-words: '>', single-word: '+', escape: '%'}\n"
    "address-settings:\n"
    "  '>':\n"
    "    auto-create-addresses: false\n"
    "    auto-create-queues: false\n"
    "    default-address-routing-type: anycast\n"
    "    default-queue-routing-type: ANYCAST\n"
    "    dead-letter-address: dead\n"
    "    send-to-dla-on-no-route: true\n"
    "    id-cache-size: 7\n"
    "    max-size-bytes: 10MB\n"
    "    address-full-policy: drop\n"
    "    replicated: true\n"
    "cluster:\n"
    "  node-id: 2\n"
    "  bind: 10.0.0.2:7001\n"
    "  peers: [{id: 1, address: 10.0.0.1:7001}, {id: 3, address: 10.0.0.3:7001, url: \"tcp://10.0.0.3:61616\"}]\n"
    "  groups: 4\n"
    "  directory: /var/lib/mqr/raft\n"
    "  election-timeout: 2s\n"
    "  heartbeat-timeout: 200ms\n"
    "  snapshot-threshold: 4096\n"
    "  segment-size: 64MiB\n"
    "  follower-consumers: redirect\n"
    "  join: true\n"
    "  user: node-2\n"
    "  password: s3cret\n"
    "  tls: {ca: /etc/mqr/ca.pem, cert: /etc/mqr/n2.pem, key: /etc/mqr/n2.key}\n"
    "  raft-tls: true\n"
    "addresses:\n"
    "  a/b:\n"
    "    routing-types: ANYCAST,MULTICAST\n"
    "    anycast:\n"
    "      q1: {durable: false, max-consumers: 3, purge-on-no-consumers: true, enabled: false}\n"
    "    multicast: [m1, m2]\n"
    "  dead: ~\n";

/* A cluster section that cannot work is refused, naming what and where. */
static void test_bad_cluster_sections(void **state) {
  (void)state;
  static const struct {
    const char *block, *want;
  } bad[] = {
      {"{bind: 127.0.0.1:7001}", "node-id"},
      {"{node-id: 1}", "bind address"},
      {"{node-id: 1, bind: localhost:7001}", "IPv4-ADDRESS:PORT"},
      {"{node-id: 1, bind: 127.0.0.1:7001, heartbeat-timeout: 400ms}", "at most half"},
      {"{node-id: 1, bind: 127.0.0.1:7001, peers: [{id: 1, address: 127.0.0.1:7002}]}", "this node's id"},
      {"{node-id: 1, bind: 127.0.0.1:7001, peers: [{id: 2, address: 127.0.0.1:7002, url: http://x}]}", "url must"},
      {"{node-id: 1, bind: 127.0.0.1:7001, password: pw}", "needs a cluster user"},
      {"{node-id: 1, bind: 127.0.0.1:7001, user: \"\"}", "must not be empty"},
      {"{node-id: 1, bind: 127.0.0.1:7001, tls: {cert: c.pem}}", "both cert and key"},
      {"{node-id: 1, bind: 127.0.0.1:7001, tls: {ciphers: x}}", "ca, cert, key"},
      {"{node-id: 1, bind: 127.0.0.1:7001, tls: [ca.pem]}", "cluster tls"},
      {"{node-id: 1, bind: 127.0.0.1:7001, gossip: true}", "segment-size, follower-consumers, join, user"},
      {"{node-id: 1, bind: 127.0.0.1:7001, follower-consumers: forward}", "feed or redirect"},
      {"{node-id: 1, bind: 127.0.0.1:7001, segment-size: 64KiB}", "segment-size"},
      {"{node-id: 1, bind: 127.0.0.1:7001, segment-size: 2GiB}", "segment-size"},
      {"{node-id: 1, bind: 127.0.0.1:7001, raft-tls: true}", "raft-tls needs tls"},
      {"{node-id: 1, bind: 127.0.0.1:7001, raft-tls: true, tls: {ca: ca.pem}}", "raft-tls needs tls"},
      {"{node-id: 1, bind: 127.0.0.1:7001, raft-tls: yes-please}", "raft-tls"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[512];
    int n = snprintf(text, sizeof text, "persistence: {directory: /tmp/x}\ncluster: %s\n", bad[i].block);
    mqr_error_t items[4];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 4);
    mqr_config_t *cfg = NULL;
    assert_int_equal(mqr_config_load_string("t.yaml", text, (size_t)n, &cfg, &d), MQR_ECONFIG);
    assert_null(cfg);
    assert_int_equal(d.items[0].line, 2);
    if (strstr(d.items[0].message, bad[i].want) == NULL)
      fail_msg("%s: '%s' does not say '%s'", bad[i].block, d.items[0].message, bad[i].want);
  }
}

static const mqr_protocol_def_t *protocol_named(const char *name) {
  for (uint32_t i = 0; mqr_config_protocol(i); i++)
    if (strcmp(mqr_config_protocol(i)->name, name) == 0) return mqr_config_protocol(i);
  return NULL;
}

/* A protocol registered by code the config knows nothing of: its name is taken in
 * `protocols`, its block is read through its table (kinds, ranges, defaults), and a
 * wrong key or value in it is an error with its position. */
static const mqr_option_def_t test_options[] = {
    {"window", MQR_OPTION_SIZE, 1024, 1 << 20, 4096},
    {"linger", MQR_OPTION_DURATION, 10, 60000, 500},
    {"level", MQR_OPTION_INT, -1, 9, 3},
};
static const mqr_protocol_def_t test_def = {"test-proto", 0x80u, test_options, 3};

static void test_a_registered_protocol_owns_its_block(void **state) {
  (void)state;
  assert_int_equal(mqr_config_register_protocol(&test_def), 0);
  assert_int_equal(mqr_config_register_protocol(&test_def), 0); /* again: nothing */
  static const mqr_protocol_def_t same_name = {"test-proto", 0x100u, NULL, 0}, same_bit = {"other", 0x80u, NULL, 0};
  assert_int_equal(mqr_config_register_protocol(&same_name), MQR_EINVAL);
  assert_int_equal(mqr_config_register_protocol(&same_bit), MQR_EINVAL);
  static const char good[] = "listeners:\n"
                             "  - protocols: [test-proto, mqtt]\n"
                             "    test-proto: {window: 64KiB, linger: 2s}\n";
  mqr_config_t *cfg;
  assert_int_equal(mqr_config_load_string("t.yaml", good, sizeof good - 1, &cfg, NULL), 0);
  const mqr_listener_config_t *l = mqr_config_listener(cfg, 0);
  assert_int_equal(l->protocols, 0x80u | MQR_PROTOCOL_MQTT);
  assert_int_equal(mqr_listener_option(l, &test_def, 0), 65536);
  assert_int_equal(mqr_listener_option(l, &test_def, 1), 2000);
  assert_int_equal(mqr_listener_option(l, &test_def, 2), 3); /* its default */
  mqr_config_destroy(cfg);
  static const struct {
    const char *block, *want;
  } bad[] = {
      {"{window: 1}", "window"},               /* under its minimum */
      {"{linger: 5ms}", "at least 10 ms"},     /* a duration under its minimum */
      {"{level: 10}", "level"},                /* over its maximum */
      {"{speed: 3}", "window, linger, level"}, /* unknown: the known keys named */
      {"[1, 2]", "test-proto"},                /* not a mapping */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    int n = snprintf(text, sizeof text, "listeners:\n  - protocols: test-proto\n    test-proto: %s\n", bad[i].block);
    mqr_error_t items[4];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 4);
    cfg = NULL;
    assert_int_equal(mqr_config_load_string("t.yaml", text, (size_t)n, &cfg, &d), MQR_ECONFIG);
    assert_null(cfg);
    assert_int_equal(d.items[0].line, 3);
    if (strstr(d.items[0].message, bad[i].want) == NULL)
      fail_msg("%s: '%s' does not say '%s'", bad[i].block, d.items[0].message, bad[i].want);
  }
  static const char unknown[] = "listeners:\n  - protocols: [mqr, nope]\n";
  mqr_error_t items[4];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 4);
  assert_int_equal(mqr_config_load_string("t.yaml", unknown, sizeof unknown - 1, &cfg, &d), MQR_ECONFIG);
  assert_non_null(strstr(d.items[0].message, "unknown protocol 'nope' (mqr, mqtt, stomp, http, amqp or test-proto)"));
}

static void test_every_key_is_read(void **state) {
  (void)state;
  mqr_config_t *cfg;
  mqr_error_t items[4];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 4);
  int rc = mqr_config_load_string("every.yaml", every_key, sizeof every_key - 1, &cfg, &d);
  if (rc) fail_msg("%s", d.count ? d.items[0].message : mqr_err_name(rc));
  const mqr_listener_config_t *l = mqr_config_listener(cfg, 0);
  assert_string_equal(l->host, "::1");
  assert_int_equal(l->port, 0);
  assert_int_equal(l->max_frame, 4u << 20);
  assert_int_equal(l->protocols, MQR_PROTOCOL_MQR | MQR_PROTOCOL_STOMP);
  const mqr_protocol_def_t *stomp = protocol_named("stomp");
  assert_non_null(stomp);
  assert_int_equal(mqr_listener_option(l, stomp, 0), 2u << 20); /* max-frame-size */
  assert_int_equal(mqr_listener_option(l, stomp, 1), 50);       /* max-headers */
  assert_int_equal(mqr_listener_option(l, stomp, 2), 4096);     /* max-header-length */
  const mqr_listener_config_t *l2 = mqr_config_listener(cfg, 1);
  assert_int_equal(l2->protocols, MQR_PROTOCOL_STOMP);
  for (uint32_t k = 0; k < stomp->n_options; k++) /* its block not given: the defaults */
    assert_int_equal(mqr_listener_option(l2, stomp, k), stomp->options[k].def);
  assert_int_equal(l->prefixes.count, 2);
  assert_true(mqr_str_eq(l->prefixes.items[0].text, MQR_STR("q/")));
  assert_int_equal(l->prefixes.items[0].type, MQR_ANYCAST);
  assert_int_equal(l->prefixes.items[1].type, MQR_MULTICAST);
  mqr_wildcard_t wc = mqr_config_wildcard(cfg);
  assert_int_equal(wc.delimiter, '/');
  assert_int_equal(wc.any_words, '>');
  mqr_router_t r;
  assert_int_equal(mqr_config_build_router(cfg, &r, NULL), 0);
  mqr_address_t *a = mqr_router_find_address(&r, MQR_STR("a/b"));
  assert_non_null(a);
  const mqr_address_settings_t *s = mqr_address_settings(a);
  assert_false(s->auto_create_addresses);
  assert_false(s->auto_create_queues);
  assert_int_equal(s->default_address_routing_type, MQR_ANYCAST);
  assert_int_equal(s->default_queue_routing_type, MQR_ANYCAST);
  assert_true(mqr_str_eq(s->dead_letter_address, MQR_STR("dead")));
  assert_true(s->send_to_dla_on_no_route);
  assert_int_equal(s->id_cache_size, 7);
  assert_int_equal(s->max_size_bytes, 10 * 1024 * 1024);
  assert_int_equal(s->address_full_policy, MQR_FULL_DROP);
  assert_true(s->replicated);
  const mqr_cluster_config_t *cc = mqr_config_cluster(cfg);
  assert_true(cc->enabled);
  assert_int_equal(cc->node_id, 2);
  assert_string_equal(cc->bind, "10.0.0.2:7001");
  assert_int_equal(cc->n_peers, 2);
  assert_int_equal(cc->peers[1].id, 3);
  assert_string_equal(cc->peers[1].address, "10.0.0.3:7001");
  assert_null(cc->peers[0].url);
  assert_string_equal(cc->peers[1].url, "tcp://10.0.0.3:61616");
  assert_int_equal(cc->groups, 4);
  assert_string_equal(cc->directory, "/var/lib/mqr/raft");
  assert_int_equal(cc->election_timeout_ms, 2000);
  assert_int_equal(cc->heartbeat_timeout_ms, 200);
  assert_int_equal(cc->snapshot_threshold, 4096);
  assert_int_equal(cc->segment_size, (size_t)64 << 20);
  assert_true(cc->redirect_consumers);
  assert_true(cc->join);
  assert_true(cc->raft_tls);
  assert_string_equal(cc->user, "node-2");
  assert_string_equal(cc->password, "s3cret");
  assert_string_equal(cc->tls_ca, "/etc/mqr/ca.pem");
  assert_string_equal(cc->tls_cert, "/etc/mqr/n2.pem");
  assert_string_equal(cc->tls_key, "/etc/mqr/n2.key");
  assert_int_equal(mqr_address_routing_types(a).bits, 3);
  mqr_queue_t *q = mqr_router_find_queue(&r, MQR_STR("q1"));
  assert_false(mqr_queue_durable(q));
  assert_int_equal(mqr_queue_max_consumers(q), 3);
  assert_true(mqr_queue_purge_on_no_consumers(q));
  assert_false(mqr_queue_enabled(q));
  assert_non_null(mqr_router_find_queue(&r, MQR_STR("m2")));
  assert_non_null(mqr_router_find_address(&r, MQR_STR("dead")));
  /* the prefix from the config routes */
  mqr_queue_t *t[8];
  mqr_route_request_t req = {MQR_STR("t/a/b"), MQR_ROUTING_NONE, {0}, &l->prefixes, NULL, NULL};
  mqr_route_result_t res = {t, 8, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};
  assert_int_equal(mqr_router_route(&r, &req, &res, NULL), 0);
  assert_int_equal(res.count, 2);
  mqr_router_close(&r);
  mqr_config_destroy(cfg);
}

static void test_filters_compile_and_several_errors_are_all_reported(void **state) {
  (void)state;
  static const char good[] = "addresses:\n  a:\n    anycast:\n      q:\n        filter: \"x > 1\"\n";
  mqr_error_t items[8];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 8);
  mqr_config_t *cfg;
  assert_int_equal(mqr_config_load_string("w.yaml", good, sizeof good - 1, &cfg, &d), 0);
  assert_int_equal(d.warnings, 0);
  assert_int_equal(d.errors, 0);
  mqr_router_t r;
  assert_int_equal(mqr_config_build_router(cfg, &r, NULL), 0);
  mqr_queue_t *q = mqr_router_find_queue(&r, MQR_STR("q"));
  assert_true(mqr_str_eq(mqr_queue_filter(q), MQR_STR("x > 1")));
  assert_non_null(mqr_queue_compiled_filter(q));
  mqr_router_close(&r);
  mqr_config_destroy(cfg);
  /* A bad filter is the config's error: its line, and the filter's column. */
  static const char bad[] = "addresses:\n  a:\n    anycast:\n      q:\n        filter: \"x >\"\n";
  mqr_diags_init(&d, items, 8);
  cfg = NULL;
  assert_int_equal(mqr_config_load_string("b.yaml", bad, sizeof bad - 1, &cfg, &d), MQR_ECONFIG);
  assert_int_equal(items[0].line, 5);
  assert_non_null(strstr(items[0].message, "queue 'q': filter: "));
  assert_non_null(strstr(items[0].message, "column"));

  static const char three[] = "bogus: 1\naddresses:\n  a:\n    anycast: {q: {durable: 3}}\n    nope: 1\n";
  mqr_diags_init(&d, items, 2);
  cfg = NULL;
  assert_int_equal(mqr_config_load_string("e.yaml", three, sizeof three - 1, &cfg, &d), MQR_ECONFIG);
  assert_null(cfg);
  assert_int_equal(d.errors, 3);
  assert_int_equal(d.count, 2);
  assert_int_equal(d.dropped, 1);
  assert_int_equal(items[0].line, 1);
  assert_int_equal(items[1].line, 4);
}

/* An unknown key near a known one gets "did you mean"; one near none lists the keys, or
 * where they are; no message is cut in the middle of a word. */
static void test_unknown_keys_and_long_messages(void **state) {
  (void)state;
  static const struct {
    const char *yaml, *want;
  } cases[] = {
      {"address-settings:\n  '#': {auto-create-queus: true}\n", "did you mean 'auto-create-queues'?"},
      {"address-settings:\n  '#': {max-size-byte: 1}\n", "did you mean 'max-size-bytes'?"},
      {"persistance: {}\n", "did you mean 'persistence'?"},
      {"address-settings:\n  '#': {completely-different: 1}\n", "(docs/config.md and mqr.yaml(5) list the keys)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mqr_error_t items[4];
    mqr_diags_t d;
    mqr_diags_init(&d, items, 4);
    mqr_config_t *cfg = NULL;
    assert_int_equal(mqr_config_load_string("k.yaml", cases[i].yaml, strlen(cases[i].yaml), &cfg, &d), MQR_ECONFIG);
    if (strstr(items[0].message, cases[i].want) == NULL) fail_msg("%s: got %s", cases[i].yaml, items[0].message);
  }
  /* A message past what mqr_error_t holds ends at a word, with " ...". */
  mqr_error_t e;
  char word[700];
  size_t at = 0;
  while (at + 8 < sizeof word) at += (size_t)snprintf(word + at, sizeof word - at, "abcdefg ");
  mqr_error_set(&e, MQR_EINVAL, "%s", word);
  size_t n = strlen(e.message);
  assert_true(n < sizeof e.message);
  assert_string_equal(e.message + n - 4, " ...");
  assert_true(e.message[n - 5] == 'g'); /* the last whole word before it */
}

static void test_empty_and_missing_files(void **state) {
  (void)state;
  mqr_config_t *cfg;
  assert_int_equal(mqr_config_load_string("empty.yaml", "", 0, &cfg, NULL), 0);
  assert_int_equal(mqr_config_address_count(cfg), 0);
  mqr_config_destroy(cfg);
  assert_int_equal(mqr_config_load_string("c.yaml", "# only a comment\n", 17, &cfg, NULL), 0);
  mqr_config_destroy(cfg);
  mqr_error_t items[2];
  mqr_diags_t d;
  mqr_diags_init(&d, items, 2);
  assert_int_equal(mqr_config_load_file("/nonexistent/mqr.yaml", &cfg, &d), MQR_EIO);
  assert_non_null(strstr(items[0].message, "cannot open"));
  mqr_config_destroy(NULL);
}

static void test_hostile_input_is_an_error_not_a_crash(void **state) {
  (void)state;
  uint64_t x = 42;
  static const char alphabet[] = "ab:-[]{}#*.\n  \"'&*!|>%@`,?0123\t\\";
  char buf[512];
  for (int round = 0; round < 3000; round++) {
    size_t n = 1 + round % 500;
    for (size_t i = 0; i < n; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      buf[i] = round % 2 ? (char)(x >> 56) : alphabet[(x >> 33) % (sizeof alphabet - 1)];
    }
    mqr_config_t *cfg = NULL;
    int rc = mqr_config_load_string("fuzz.yaml", buf, n, &cfg, NULL);
    assert_true(rc == 0 || rc == MQR_ECONFIG);
    assert_true((rc == 0) == (cfg != NULL));
    mqr_config_destroy(cfg);
  }
  /* deep nesting and an anchor bomb stay bounded */
  char deep[4096];
  memset(deep, '[', 2000);
  assert_int_equal(mqr_config_load_string("deep.yaml", deep, 2000, NULL, NULL), MQR_ECONFIG);
}

int main(void) {
  mqr_broker_register_protocols(); /* the listeners' protocol blocks (the broker's heads) */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shipped_files_load_and_build),
      cmocka_unit_test(test_embedded_default_is_conf_mqr_yaml),
      cmocka_unit_test(test_bad_files_report_file_line_and_column),
      cmocka_unit_test(test_every_key_is_read),
      cmocka_unit_test(test_a_registered_protocol_owns_its_block),
      cmocka_unit_test(test_bad_cluster_sections),
      cmocka_unit_test(test_filters_compile_and_several_errors_are_all_reported),
      cmocka_unit_test(test_unknown_keys_and_long_messages),
      cmocka_unit_test(test_empty_and_missing_files),
      cmocka_unit_test(test_hostile_input_is_an_error_not_a_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
