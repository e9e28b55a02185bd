/* mqr stat: a running broker's addresses, queues and counters (its QUERY answer), as a
 * table or as JSON. */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>

#include "commands.h"

const char mqr_usage_stat[] = "usage: mqr stat [--url tcp://HOST:PORT] [--json]\n"
                              "  The broker's addresses (routing types, messages routed and not, bytes held) and\n"
                              "  queues (depth, in flight, consumers, enqueued, acknowledged, paused), and its\n"
                              "  connections.\n"
                              "  --json prints one JSON object.\n" CLI_TLS_USAGE;

static const char *rt_name(int32_t rt) {
  static const char *const rts[3] = {"-", "ANYCAST", "MULTICAST"};
  return rts[rt < 0 || rt > 2 ? 0 : rt];
}

static void print_json(const mqr_frame_query_result_t *q) {
  json_t *o = json_object(), *as = json_array(), *qs = json_array();
  for (size_t i = 0; i < q->addresses.count; i++) {
    const mqr_frame_address_info_t *a = (const mqr_frame_address_info_t *)q->addresses.items + i;
    json_t *j = json_object();
    json_object_set_new(j, "name", json_stringn(a->name.ptr, a->name.len));
    json_object_set_new(j, "routing_types", json_stringn(a->routing_types.ptr, a->routing_types.len));
    json_object_set_new(j, "routed", json_integer(a->routed));
    json_object_set_new(j, "unrouted", json_integer(a->unrouted));
    json_object_set_new(j, "size_bytes", json_integer(a->size_bytes));
    json_array_append_new(as, j);
  }
  for (size_t i = 0; i < q->queues.count; i++) {
    const mqr_frame_queue_info_t *x = (const mqr_frame_queue_info_t *)q->queues.items + i;
    json_t *j = json_object();
    json_object_set_new(j, "name", json_stringn(x->name.ptr, x->name.len));
    json_object_set_new(j, "address", json_stringn(x->address.ptr, x->address.len));
    json_object_set_new(j, "routing_type", json_string(rt_name(x->routing_type)));
    json_object_set_new(j, "depth", json_integer(x->depth));
    json_object_set_new(j, "in_flight", json_integer(x->in_flight));
    json_object_set_new(j, "consumers", json_integer(x->consumers));
    json_object_set_new(j, "enqueued", json_integer(x->enqueued));
    json_object_set_new(j, "acknowledged", json_integer(x->acknowledged));
    json_object_set_new(j, "paused", json_boolean(x->paused));
    json_array_append_new(qs, j);
  }
  json_object_set_new(o, "addresses", as);
  json_object_set_new(o, "queues", qs);
  json_object_set_new(o, "connections", json_integer(q->connections));
  json_object_set_new(o, "dropped", json_integer(q->dropped));
  char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (text) puts(text);
  free(text);
  json_decref(o);
}

static void print_table(const mqr_frame_query_result_t *q) {
  const mqr_frame_address_info_t *a = q->addresses.items;
  const mqr_frame_queue_info_t *qi = q->queues.items;
  printf("addresses:\n");
  for (size_t i = 0; i < q->addresses.count; i++)
    printf("  %-24.*s types=%-20.*s routed=%lld unrouted=%lld bytes=%lld\n", (int)a[i].name.len, a[i].name.ptr,
           (int)a[i].routing_types.len, a[i].routing_types.ptr, (long long)a[i].routed, (long long)a[i].unrouted,
           (long long)a[i].size_bytes);
  printf("queues:\n");
  for (size_t i = 0; i < q->queues.count; i++)
    printf("  %-24.*s address=%-16.*s %-9s depth=%lld in-flight=%lld consumers=%d enqueued=%lld acked=%lld%s\n",
           (int)qi[i].name.len, qi[i].name.ptr, (int)qi[i].address.len, qi[i].address.ptr, rt_name(qi[i].routing_type),
           (long long)qi[i].depth, (long long)qi[i].in_flight, qi[i].consumers, (long long)qi[i].enqueued,
           (long long)qi[i].acknowledged, qi[i].paused ? " paused" : "");
  printf("connections=%d dropped=%lld\n", q->connections, (long long)q->dropped);
}

int mqr_cmd_stat(int argc, char **argv) {
  static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *url = DEFAULT_URL;
  bool as_json = false;
  int o;
  optind = 1;
  opterr = 0;
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (o) {
    case 'u':
      if (!cli_url(optarg)) return 2;
      url = optarg;
      break;
    case 'j': as_json = true; break;
    case 'h': fputs(mqr_usage_stat, stdout); return 0;
    case ':': return cli_usage_error(mqr_usage_stat, "%s needs a value", argv[optind - 1]);
    default: return cli_usage_error(mqr_usage_stat, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind != argc) return cli_usage_error(mqr_usage_stat, "mqr stat takes no arguments");
  mqr_bclient_t *bc;
  mqr_error_t err;
  char why[256];
  if (cli_bconnect(url, "mqr-stat", 5000, &bc, &err) != 0)
    return cli_error("cannot connect to %s: %s", url, cli_connect_error(&err, why, sizeof why));
  mqr_frame_query_result_t *q;
  if (mqr_bclient_query(bc, &q, &err) != 0) {
    mqr_bclient_close(bc);
    return cli_broker_error(&err);
  }
  if (as_json)
    print_json(q);
  else
    print_table(q);
  mqr_free(q);
  mqr_bclient_close(bc);
  return 0;
}
