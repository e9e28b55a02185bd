/* mqr recv: deliveries from a running broker, acknowledged one by one; the body alone,
 * or with its message id, delivery count and properties (--verbose, --json). */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

const char mqr_usage_recv[] =
    "usage: mqr recv [--url tcp://HOST:PORT] [--routing-type ANYCAST|MULTICAST] [--count N | --follow]\n"
    "                [--timeout S] [--schema FILE] [--selector EXPR] [--verbose | --json] TARGET\n"
    "  Receives N messages (default 1) from TARGET (a queue, or an address), waiting at\n"
    "  most S seconds (default 5) for each; --follow receives until interrupted (Ctrl-C).\n"
    "  Prints each body on a line; --verbose adds a line with the message id, delivery,\n"
    "  delivery count, address and routing type, and a line per property; --json prints one\n"
    "  JSON object per message. --schema decodes single-object Avro bodies to JSON. A prefix\n"
    "  of the listener (anycast://, multicast://) picks the routing type. --selector takes\n"
    "  only messages that match a filter expression (\"color = 'red' AND weight > 2.5\").\n" CLI_URLS_USAGE
        CLI_TLS_USAGE;

#define CREDIT 1000

/* A property's value as JSON: numbers and booleans as they are, bytes as hex. */
static json_t *value_json(const mqr_value_t *v) {
  switch (v->type) {
  case MQR_VALUE_BOOL: return json_boolean(v->u.b);
  case MQR_VALUE_INT: return json_integer(v->u.i);
  case MQR_VALUE_LONG: return json_integer(v->u.l);
  case MQR_VALUE_FLOAT: return json_real(v->u.f);
  case MQR_VALUE_DOUBLE: return json_real(v->u.d);
  case MQR_VALUE_STRING: return json_stringn(v->u.s.ptr, v->u.s.len);
  case MQR_VALUE_BYTES: {
    char *hex = malloc(2 * v->u.s.len + 1);
    if (hex) mqr_value_format(v, hex, 2 * v->u.s.len + 1);
    json_t *j = json_string(hex ? hex : "");
    free(hex);
    return j;
  }
  default: return json_null();
  }
}

static const char *rt_name(int rt) { return rt == MQR_ANYCAST ? "ANYCAST" : rt == MQR_MULTICAST ? "MULTICAST" : "-"; }

/* Prints one message as asked; the body decoded when a cache is given. 0, or 1 after
 * saying why. */
static int print_message(const mqr_bclient_message_t *m, mqr_avro_cache_t *cache, bool verbose, bool as_json,
                         mqr_avro_buf_t *scratch) {
  mqr_str_t body = m->body;
  if (cache) {
    const mqr_avro_schema_t *w;
    mqr_error_t err;
    const uint8_t *b = (const uint8_t *)m->body.ptr;
    scratch->len = 0;
    if (mqr_avro_cache_single_object(cache, b, m->body.len, &w, &err) != 0 ||
        mqr_avro_binary_to_json(w, b + MQR_AVRO_SINGLE_OBJECT_HEADER, m->body.len - MQR_AVRO_SINGLE_OBJECT_HEADER, NULL,
                                scratch, &err) != 0)
      return cli_error("message %lld: the body is not the schema's single-object datum: %s", (long long)m->message_id,
                       err.message);
    body = mqr_str_n((const char *)scratch->data, scratch->len);
  }
  if (as_json) {
    json_t *o = json_object(), *props = json_object();
    json_object_set_new(o, "message_id", json_integer(m->message_id));
    json_object_set_new(o, "delivery", json_integer(m->delivery));
    json_object_set_new(o, "delivery_count", json_integer(m->delivery_count));
    json_object_set_new(o, "address", json_stringn(m->address.ptr, m->address.len));
    json_object_set_new(o, "routing_type", json_string(rt_name(m->routing_type)));
    json_object_set_new(o, "durable", json_boolean(m->durable));
    json_object_set_new(o, "priority", json_integer(m->priority));
    json_object_set_new(o, "timestamp", json_integer(m->timestamp));
    json_object_set_new(o, "expiration", json_integer(m->expiration));
    if (m->user_id.len) json_object_set_new(o, "user_id", json_stringn(m->user_id.ptr, m->user_id.len));
    for (size_t i = 0; i < m->n_properties; i++) {
      char key[1024];
      snprintf(key, sizeof key, "%.*s", (int)m->property_keys[i].len, m->property_keys[i].ptr);
      json_object_set_new(props, key, value_json(&m->property_values[i]));
    }
    json_object_set_new(o, "properties", props);
    json_t *b = NULL;
    if (cache)
      b = json_loadb(body.ptr, body.len, JSON_DECODE_ANY, NULL);
    else if (mqr_utf8_check(body.ptr, body.len) == body.len)
      b = json_stringn(body.ptr, body.len);
    if (b) {
      json_object_set_new(o, "body", b);
    } else { /* bytes that are not text: hex */
      char *hex = malloc(body.len * 2 + 1);
      for (size_t i = 0; hex && i < body.len; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)body.ptr[i]);
      if (hex) hex[body.len * 2] = '\0';
      json_object_set_new(o, "body_hex", json_string(hex ? hex : ""));
      free(hex);
    }
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text) puts(text);
    free(text);
    json_decref(o);
    return 0;
  }
  if (verbose) {
    printf("message %lld delivery %lld delivery-count %d address %.*s %s%s\n", (long long)m->message_id,
           (long long)m->delivery, m->delivery_count, (int)m->address.len, m->address.ptr, rt_name(m->routing_type),
           m->durable ? " durable" : "");
    printf("priority %d timestamp %lld expiration %lld%s%.*s\n", (int)m->priority, (long long)m->timestamp,
           (long long)m->expiration, m->user_id.len ? " user-id " : "", (int)m->user_id.len, m->user_id.ptr);
    for (size_t i = 0; i < m->n_properties; i++) {
      const mqr_value_t *v = &m->property_values[i];
      size_t need = mqr_value_format(v, NULL, 0);
      char *text = malloc(need + 1);
      if (text) mqr_value_format(v, text, need + 1);
      printf("property %.*s:%s=%s\n", (int)m->property_keys[i].len, m->property_keys[i].ptr,
             mqr_value_type_name(v->type), text ? text : "?");
      free(text);
    }
  }
  fwrite(body.ptr, 1, body.len, stdout);
  putchar('\n');
  return 0;
}

int mqr_cmd_recv(int argc, char **argv) {
  static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                       {"routing-type", required_argument, NULL, 't'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"timeout", required_argument, NULL, 'w'},
                                       {"schema", required_argument, NULL, 's'},
                                       {"verbose", no_argument, NULL, 'v'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"follow", no_argument, NULL, 'F'},
                                       {"selector", required_argument, NULL, 'S'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *url = DEFAULT_URL, *schema_path = NULL, *selector = "";
  int rt = MQR_ROUTING_NONE, o;
  long count = 1;
  double timeout = 5;
  bool verbose = false, as_json = false, follow = false, counted = false;
  optind = 1;
  opterr = 0;
  while ((o = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
    switch (o) {
    case 'u':
      if (!cli_url(optarg)) return 2;
      url = optarg;
      break;
    case 't':
      if (!cli_routing_type(optarg, &rt)) return 2;
      break;
    case 'n':
      if (!cli_long("--count", optarg, 1, 100000000, &count)) return 2;
      counted = true;
      break;
    case 'w':
      if (!cli_seconds("--timeout", optarg, &timeout)) return 2;
      break;
    case 's': schema_path = optarg; break;
    case 'v': verbose = true; break;
    case 'j': as_json = true; break;
    case 'F': follow = true; break;
    case 'S': selector = optarg; break;
    case 'h': fputs(mqr_usage_recv, stdout); return 0;
    case ':': return cli_usage_error(mqr_usage_recv, "%s needs a value", argv[optind - 1]);
    default: return cli_usage_error(mqr_usage_recv, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind != argc - 1) return cli_usage_error(mqr_usage_recv, "give exactly one TARGET");
  if (follow && counted) return cli_usage_error(mqr_usage_recv, "--count and --follow do not go together");
  if (verbose && as_json) return cli_usage_error(mqr_usage_recv, "--verbose and --json do not go together");
  mqr_avro_cache_t *cache = NULL;
  if (schema_path) {
    if (mqr_avro_cache_create(&cache) != 0) return cli_error("out of memory");
    if (cli_load_schema(schema_path, cache, NULL) == NULL) { /* with its defaults and aliases */
      mqr_avro_cache_destroy(cache);
      return 1;
    }
  }
  mqr_bclient_t *bc = NULL;
  mqr_error_t err;
  int rc = 1;
  char why[256];
  char urls[CLI_MAX_URLS][512];
  int n_urls = cli_urls(url, urls), u = 0;
  if (n_urls == 0) {
    cli_usage_error(mqr_usage_recv, "--url: at most %d URLs, comma-separated", CLI_MAX_URLS);
    goto out;
  }
  int64_t sub = 0;
  long got = 0;
  bool acked = true; /* every acknowledgement taken */
  uint32_t credit = follow || count > CREDIT ? CREDIT : (uint32_t)count;
  /* The first node that serves TARGET: one that cannot be reached, or refuses because
   * another node leads its group (ENOTLEADER), gives way to the leader it names (its
   * REDIRECT, once), else to the next. */
  char redirect[512] = "";
  const char *at = urls[u];
  for (;;) {
    int crc = cli_bconnect(at, "mqr-recv", timeout > 0 ? (int)(timeout * 1000) : 5000, &bc, &err);
    if (crc == 0 && mqr_bclient_subscribe(bc, mqr_str(argv[optind]), rt, mqr_str_n("", 0), mqr_str(selector), credit,
                                          &sub, NULL, 0, &err) == 0)
      break;
    const char *to = crc == 0 && err.code == MQR_ENOTLEADER ? mqr_bclient_redirect(bc, NULL) : NULL;
    bool go = to && redirect[0] == '\0' && strlen(to) < sizeof redirect;
    if (go) snprintf(redirect, sizeof redirect, "%s", to);
    if (crc == 0) mqr_bclient_close(bc);
    bc = NULL;
    if (go) {
      at = redirect;
      continue;
    }
    bool next = u + 1 < n_urls && (crc != 0 || err.code == MQR_ENOTLEADER);
    if (!next) {
      if (crc)
        cli_error("cannot connect to %s: %s", at, cli_connect_error(&err, why, sizeof why));
      else
        cli_broker_error(&err);
      goto out;
    }
    at = urls[++u];
  }
  if (follow) cli_catch_interrupt();
  mqr_avro_buf_t scratch;
  mqr_avro_buf_init_growable(&scratch);
  while (follow ? !cli_interrupted : got < count) {
    mqr_bclient_message_t *m;
    int r = mqr_bclient_receive(bc, follow ? 200 : (int)(timeout * 1000), &m, &err);
    if (r == MQR_ETIMEOUT) {
      if (follow) continue;
      cli_error("timed out after %g s with %ld of %ld messages", timeout, got, count);
      break;
    }
    if (r) {
      cli_broker_error(&err);
      break;
    }
    int pr = print_message(m, cache, verbose, as_json, &scratch);
    int64_t d = m->delivery;
    mqr_bclient_message_free(m);
    if (pr) break;
    got++;
    /* the last one answered: its answer comes once the broker holds every acknowledgement
     * before it as safe as a durable send (a cluster has committed them) */
    bool last = !follow && got == count;
    if ((last ? mqr_bclient_ack_receipt(bc, sub, d, false, &err) : mqr_bclient_ack(bc, sub, d, false, &err)) != 0) {
      cli_broker_error(&err);
      acked = false;
      break;
    }
    if (got % CREDIT == 0 && (follow || got < count)) mqr_bclient_credit(bc, sub, CREDIT, &err);
    if (follow) fflush(stdout);
  }
  fflush(stdout);
  if (acked && (follow ? cli_interrupted : got == count)) rc = 0;
  mqr_avro_buf_free(&scratch);
  mqr_bclient_close(bc);
out:
  mqr_avro_cache_destroy(cache);
  return rc;
}
