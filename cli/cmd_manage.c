/* mqr address ... and mqr queue ...: a running broker's management operations (its
 * MANAGE frame, docs/protocol.md), one per run: the result's line on stdout, and what it
 * lists (browsed messages, consumers) one per line after it, as key=value pairs or JSON. */
#include <ctype.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

const char mqr_usage_address[] =
    "usage: mqr address [--url tcp://HOST:PORT] create NAME ANYCAST|MULTICAST|ANYCAST,MULTICAST\n"
    "       mqr address [--url tcp://HOST:PORT] delete NAME [--force]\n"
    "  Makes or deletes an address of a running broker. An address with queues is deleted\n"
    "  only with --force, which deletes its queues (refused while one has consumers).\n" CLI_TLS_USAGE;

const char mqr_usage_queue[] =
    "usage: mqr queue [--url tcp://HOST:PORT] [--json] COMMAND ARGS\n"
    "  create NAME ADDRESS ANYCAST|MULTICAST [KEY=VALUE ...]  make a queue (its address too when\n"
    "         missing); keys as the config's queue keys: durable, filter, max-consumers,\n"
    "         purge-on-no-consumers, enabled, exclusive, last-value-key, ring-size, group-buckets,\n"
    "         group-rebalance, group-first-key, non-destructive, consumers-before-dispatch,\n"
    "         delay-before-dispatch\n"
    "  delete NAME                          delete it and what it holds (refused with consumers)\n"
    "  purge NAME                           drop the messages waiting in it\n"
    "  pause NAME [--persist]               stop its deliveries (--persist: across restarts)\n"
    "  resume NAME [--persist]              start them again\n"
    "  browse NAME [--max N]                the first N (200) waiting messages, not taken\n"
    "  move FROM TO [--filter EXPR]         move the waiting messages (that match) to queue TO\n"
    "  consumers NAME                       its consumers: credit, in flight, delivered\n"
    "  Prints what was done; browse and consumers print a line per message or consumer\n"
    "  (--json: a JSON object per line). A refusal exits 1.\n" CLI_TLS_USAGE;

const char mqr_usage_cluster[] =
    "usage: mqr cluster [--url URL,...] [--json] status\n"
    "       mqr cluster [--url URL,...] transfer-leader GROUP [NODE]\n"
    "       mqr cluster --url URL,... add-node NODE ADDRESS | remove-node NODE\n"
    "  status: the node's replication groups (docs/cluster.md): which node leads each, the\n"
    "  Raft term, commit and applied index, the messages the group holds, and on the leader\n"
    "  how many log entries each follower is behind (lag.NODE). transfer-leader: the node that\n"
    "  leads GROUP hands it to NODE (or to a follower it picks); given several --url, the\n"
    "  nodes that do not lead GROUP give way to the next.\n"
    "  add-node: node NODE (started with join: true) becomes a voter of every group, reached at\n"
    "  ADDRESS (its bind); remove-node: NODE leaves them. Each is asked of every node given\n"
    "  (each changes the groups it leads): give them all.\n"
    "  Both need manage on the address $sys.mqr.cluster.\n" CLI_URLS_USAGE CLI_TLS_USAGE;

/* A value as text: strings and bytes with what is not printable escaped. */
static void print_value(const mqr_value_t *v) {
  switch (v->type) {
  case MQR_VALUE_NULL: fputs("null", stdout); break;
  case MQR_VALUE_BOOL: fputs(v->u.b ? "true" : "false", stdout); break;
  case MQR_VALUE_INT: printf("%d", (int)v->u.i); break;
  case MQR_VALUE_LONG: printf("%lld", (long long)v->u.l); break;
  case MQR_VALUE_FLOAT: printf("%g", (double)v->u.f); break;
  case MQR_VALUE_DOUBLE: printf("%g", v->u.d); break;
  default:
    for (size_t i = 0; i < v->u.s.len; i++) {
      unsigned char ch = (unsigned char)v->u.s.ptr[i];
      if (ch == '\\' || ch == ' ' || !isprint(ch))
        printf("\\x%02x", ch);
      else
        putchar(ch);
    }
  }
}

static json_t *json_value(const mqr_value_t *v) {
  switch (v->type) {
  case MQR_VALUE_NULL: return json_null();
  case MQR_VALUE_BOOL: return json_boolean(v->u.b);
  case MQR_VALUE_INT: return json_integer(v->u.i);
  case MQR_VALUE_LONG: return json_integer(v->u.l);
  case MQR_VALUE_FLOAT: return json_real(v->u.f);
  case MQR_VALUE_DOUBLE: return json_real(v->u.d);
  default: {
    json_t *s = json_stringn(v->u.s.ptr, v->u.s.len);
    if (s) return s;
    /* Not UTF-8 (a body of bytes): each byte as \u00XX. */
    char *t = malloc(v->u.s.len * 6 + 1);
    size_t n = 0;
    for (size_t i = 0; t && i < v->u.s.len; i++) n += (size_t)sprintf(t + n, "\\x%02x", (unsigned char)v->u.s.ptr[i]);
    s = json_stringn(t ? t : "", n);
    free(t);
    return s;
  }
  }
}

static void print_rows(const mqr_frame_manage_result_t *r, bool as_json) {
  const mqr_avro_map_t *rows = r->rows.items;
  for (size_t i = 0; i < r->rows.count; i++) {
    const mqr_value_t *v = rows[i].values;
    if (as_json) {
      json_t *o = json_object();
      for (size_t k = 0; k < rows[i].count; k++) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)rows[i].keys[k].len, rows[i].keys[k].ptr);
        json_object_set_new(o, key, json_value(&v[k]));
      }
      char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
      if (text) puts(text);
      free(text);
      json_decref(o);
      continue;
    }
    for (size_t k = 0; k < rows[i].count; k++) {
      printf("%s%.*s=", k ? " " : "", (int)rows[i].keys[k].len, rows[i].keys[k].ptr);
      print_value(&v[k]);
    }
    putchar('\n');
  }
}

/* Connects, runs operation op with args, prints the outcome. With to_leader, a node that
 * refuses because another leads the group (ENOTLEADER) gives way to the leader it names
 * (its REDIRECT), once, and with several urls a node that cannot be reached or refuses so
 * gives way to the next. */
static int manage_on(const char *url, const char *op, const mqr_str_t *args, size_t n, bool as_json, bool to_leader) {
  char urls[CLI_MAX_URLS][512], redirect[512] = "";
  const char *to[CLI_MAX_URLS + 1] = {url};
  int n_to = to_leader ? cli_urls(url, urls) : 0;
  for (int i = 0; i < n_to; i++) to[i] = urls[i];
  if (n_to < 2) n_to = 1, to[0] = url;
  for (int u = 0;; u++) {
    bool last = u + 1 >= n_to; /* (its failure is the one told) */
    mqr_bclient_t *bc;
    mqr_error_t err;
    char why[256];
    if (cli_bconnect(to[u], "mqr-manage", 5000, &bc, &err) != 0) {
      if (!last) continue;
      return cli_error("cannot connect to %s: %s", to[u], cli_connect_error(&err, why, sizeof why));
    }
    mqr_frame_manage_result_t *r = NULL;
    int rc = mqr_bclient_manage(bc, mqr_str(op), args, n, &r, &err);
    const char *leader = rc == MQR_ENOTLEADER && to_leader && !redirect[0] ? mqr_bclient_redirect(bc, NULL) : NULL;
    if (leader && strlen(leader) < sizeof redirect) { /* (tried next) */
      snprintf(redirect, sizeof redirect, "%s", leader);
      memmove(&to[u + 2], &to[u + 1], (size_t)(n_to - u - 1) * sizeof *to);
      to[u + 1] = redirect, n_to++, last = false;
    }
    mqr_bclient_close(bc);
    if (rc) {
      mqr_free(r);
      if (rc == MQR_ENOTLEADER && !last) continue;
      return cli_broker_error(&err);
    }
    if (!as_json || r->rows.count == 0) printf("%.*s\n", (int)r->text.len, r->text.ptr);
    print_rows(r, as_json);
    mqr_free(r);
    return 0;
  }
}

static int manage(const char *url, const char *op, const mqr_str_t *args, size_t n, bool as_json) {
  return manage_on(url, op, args, n, as_json, false);
}

/* The options both commands take, anywhere among the arguments; the rest in order. */
typedef struct {
  const char *url, *filter, *max;
  bool json, force, persist;
  mqr_str_t args[20];
  size_t n;
} opts_t;

static int parse(int argc, char **argv, const char *usage, opts_t *o) {
  static const struct option lopts[] = {{"url", required_argument, NULL, 'u'}, {"json", no_argument, NULL, 'j'},
                                        {"force", no_argument, NULL, 'F'},     {"persist", no_argument, NULL, 'P'},
                                        {"max", required_argument, NULL, 'm'}, {"filter", required_argument, NULL, 'f'},
                                        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0}};
  *o = (opts_t){.url = DEFAULT_URL};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", lopts, NULL)) != -1) {
    switch (c) {
    case 'u':
      if (!cli_url(optarg)) return 2;
      o->url = optarg;
      break;
    case 'j': o->json = true; break;
    case 'F': o->force = true; break;
    case 'P': o->persist = true; break;
    case 'm': {
      long v;
      if (!cli_long("--max", optarg, 1, 100000, &v)) return 2;
      o->max = optarg;
      break;
    }
    case 'f': o->filter = optarg; break;
    case 'h': fputs(usage, stdout); return -1;
    case ':': return cli_usage_error(usage, "%s needs a value", argv[optind - 1]);
    default: return cli_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
    }
  }
  for (int i = optind; i < argc; i++) {
    if (o->n == sizeof o->args / sizeof o->args[0]) return cli_usage_error(usage, "too many arguments");
    o->args[o->n++] = mqr_str(argv[i]);
  }
  return 0;
}

int mqr_cmd_address(int argc, char **argv) {
  opts_t o;
  int rc = parse(argc, argv, mqr_usage_address, &o);
  if (rc) return rc < 0 ? 0 : rc;
  if (o.n == 0) return cli_usage_error(mqr_usage_address, "give create or delete");
  mqr_str_t *a = o.args + 1;
  size_t n = o.n - 1;
  if (mqr_str_eq(o.args[0], MQR_STR("create"))) {
    if (n != 2) return cli_usage_error(mqr_usage_address, "create takes NAME and routing types");
    return manage(o.url, "address.create", a, n, false);
  }
  if (mqr_str_eq(o.args[0], MQR_STR("delete"))) {
    if (n != 1) return cli_usage_error(mqr_usage_address, "delete takes NAME");
    if (o.force) a[n++] = MQR_STR("force");
    return manage(o.url, "address.delete", a, n, false);
  }
  return cli_usage_error(mqr_usage_address, "unknown address command '%.*s'", (int)o.args[0].len, o.args[0].ptr);
}

int mqr_cmd_queue(int argc, char **argv) {
  opts_t o;
  int rc = parse(argc, argv, mqr_usage_queue, &o);
  if (rc) return rc < 0 ? 0 : rc;
  if (o.n == 0) return cli_usage_error(mqr_usage_queue, "give a queue command");
  static const struct {
    const char *cmd, *op;
    size_t min, max;
  } cmds[] = {{"create", "queue.create", 3, 16}, {"delete", "queue.delete", 1, 1},
              {"purge", "queue.purge", 1, 1},    {"pause", "queue.pause", 1, 1},
              {"resume", "queue.resume", 1, 1},  {"browse", "queue.browse", 1, 1},
              {"move", "queue.move", 2, 2},      {"consumers", "queue.consumers", 1, 1}};
  mqr_str_t *a = o.args + 1;
  size_t n = o.n - 1;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    if (!mqr_str_eq(o.args[0], mqr_str(cmds[i].cmd))) continue;
    if (n < cmds[i].min || n > cmds[i].max)
      return cli_usage_error(mqr_usage_queue, "wrong number of arguments for queue %s", cmds[i].cmd);
    if (o.persist && (i == 3 || i == 4)) a[n++] = MQR_STR("persist");
    if (o.max && i == 5) a[n++] = mqr_str(o.max);
    if (o.filter && i == 6) a[n++] = mqr_str(o.filter);
    /* (a replicated queue's messages are its group leader's: a follower redirects) */
    return manage_on(o.url, cmds[i].op, a, n, o.json, i >= 2 && i <= 6);
  }
  return cli_usage_error(mqr_usage_queue, "unknown queue command '%.*s'", (int)o.args[0].len, o.args[0].ptr);
}

int mqr_cmd_cluster(int argc, char **argv) {
  opts_t o;
  int rc = parse(argc, argv, mqr_usage_cluster, &o);
  if (rc) return rc < 0 ? 0 : rc;
  if (o.n == 1 && mqr_str_eq(o.args[0], MQR_STR("status"))) return manage(o.url, "cluster.status", NULL, 0, o.json);
  if (o.n >= 2 && o.n <= 3 && mqr_str_eq(o.args[0], MQR_STR("transfer-leader")))
    return manage_on(o.url, "cluster.transfer", o.args + 1, o.n - 1, false, true); /* (the leader's to do) */
  bool add = o.n == 3 && mqr_str_eq(o.args[0], MQR_STR("add-node"));
  if (add || (o.n == 2 && mqr_str_eq(o.args[0], MQR_STR("remove-node")))) {
    char urls[CLI_MAX_URLS][512];
    int n = cli_urls(o.url, urls), failed = 0;
    for (int i = 0; i < n; i++) /* every node: each changes the groups it leads */
      failed += manage(urls[i], add ? "cluster.add" : "cluster.remove", o.args + 1, o.n - 1, false) != 0;
    return failed ? 1 : 0;
  }
  return cli_usage_error(mqr_usage_cluster, "give status, transfer-leader GROUP [NODE], add-node NODE ADDRESS or "
                                            "remove-node NODE");
}
