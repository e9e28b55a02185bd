/* mqr send: messages to a running broker, each with a receipt; says plainly what became
 * of them. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"

const char mqr_usage_send[] =
    "usage: mqr send [--url tcp://HOST:PORT] [--routing-type ANYCAST|MULTICAST]\n"
    "                [--property K[:TYPE]=V]... [--priority 0-9] [--ttl MS] [--delay MS] [--user-id ID]\n"
    "                [--durable] [--dup-id ID] [--body TEXT | --file F | --json J --schema FILE]\n"
    "                [--count N] [--timeout S] [--allow-unrouted] ADDRESS\n"
    "  Sends N messages (default 1) to ADDRESS and waits for the broker's receipts, at most\n"
    "  S seconds (default 10; an address full under BLOCK holds them back). Prints what\n"
    "  became of them (OK, NO_BINDINGS, NO_BINDINGS_DLA, DUPLICATE_ID, DROPPED) and exits 1\n"
    "  when one reached no queue, unless --allow-unrouted. --url defaults to\n"
    "  tcp://127.0.0.1:61616. A prefix of the listener (anycast://, multicast://) picks\n"
    "  the routing type. A property is a string unless TYPE says otherwise: boolean, int,\n"
    "  long, float, double, string, bytes or null (--property weight:double=2.5). The\n"
    "  priority defaults to 4; --ttl sets the expiration MS milliseconds from now; --delay\n"
    "  schedules the delivery MS milliseconds from now (_AMQ_SCHED_DELIVERY).\n" CLI_URLS_USAGE CLI_TLS_USAGE;

#define MAX_PROPS 64
#define N_STATUS 5

typedef struct {
  long waiting, status[N_STATUS], errors;
  mqr_error_t first;
} sent_t;

static const char *const status_names[N_STATUS] = {"OK", "NO_BINDINGS", "NO_BINDINGS_DLA", "DUPLICATE_ID", "DROPPED"};

static void on_receipt(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c;
  sent_t *s = arg;
  s->waiting--;
  if (status == 0 && f && f->type == MQR_FRAME_RECEIPT && f->u.receipt.status >= 0 && f->u.receipt.status < N_STATUS) {
    s->status[f->u.receipt.status]++;
    return;
  }
  if (s->errors++ == 0) {
    if (f && f->type == MQR_FRAME_ERROR)
      mqr_error_set(&s->first, status, "%.*s", (int)f->u.error.text.len, f->u.error.text.ptr);
    else
      mqr_error_set(&s->first, status, "%s", mqr_strerror(status));
  }
}

typedef struct {
  int state; /* 0 waiting, 1 connected, -1 failed */
  mqr_error_t err;
} conn_t;

static void on_connected(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c;
  conn_t *k = arg;
  k->state = status ? -1 : 1;
  if (status && f && f->type == MQR_FRAME_ERROR)
    mqr_error_set(&k->err, status, "%.*s", (int)f->u.error.text.len, f->u.error.text.ptr);
  else if (status)
    mqr_error_set(&k->err, status, "%s", mqr_strerror(status));
}

static void on_lost(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg) {
  (void)c;
  mqr_error_t *err = arg;
  if (err->code == 0)
    mqr_error_set(err, status, "%.*s", e ? (int)e->text.len : 0, e ? e->text.ptr : mqr_strerror(status));
}

static void on_timer(uv_timer_t *t) { *(bool *)t->data = true; }

/* Why messages reached no queue, in the words of the address as the broker has it. */
static void explain_unrouted(const char *url, const char *address, long unrouted, long dropped) {
  char types[64] = "";
  mqr_bclient_t *bc;
  mqr_frame_query_result_t *q = NULL;
  mqr_error_t err;
  if (cli_bconnect(url, "mqr-send", 2000, &bc, &err) == 0) {
    if (mqr_bclient_query(bc, &q, &err) == 0) {
      const mqr_frame_address_info_t *a = q->addresses.items;
      for (size_t i = 0; i < q->addresses.count; i++)
        if (mqr_str_eq(a[i].name, mqr_str(address)))
          snprintf(types, sizeof types, "%.*s", (int)a[i].routing_types.len, a[i].routing_types.ptr);
      mqr_free(q);
    }
    mqr_bclient_close(bc);
  }
  if (unrouted)
    cli_error("dropped: address '%s' has no queues%s%s%s, so %ld message%s went nowhere (subscribe first, or "
              "--allow-unrouted if that is expected)",
              address, types[0] ? " (it is " : "", types, types[0] ? ")" : "", unrouted, unrouted == 1 ? "" : "s");
  if (dropped)
    cli_error("dropped: address '%s' is full and its address-full-policy is DROP: %ld message%s dropped", address,
              dropped, dropped == 1 ? "" : "s");
}

int mqr_cmd_send(int argc, char **argv) {
  static const struct option opts[] = {
      {"url", required_argument, NULL, 'u'},      {"routing-type", required_argument, NULL, 't'},
      {"property", required_argument, NULL, 'p'}, {"body", required_argument, NULL, 'b'},
      {"file", required_argument, NULL, 'f'},     {"json", required_argument, NULL, 'j'},
      {"schema", required_argument, NULL, 's'},   {"count", required_argument, NULL, 'n'},
      {"timeout", required_argument, NULL, 'w'},  {"durable", no_argument, NULL, 'd'},
      {"dup-id", required_argument, NULL, 'i'},   {"allow-unrouted", no_argument, NULL, 'a'},
      {"priority", required_argument, NULL, 'P'}, {"ttl", required_argument, NULL, 'T'},
      {"user-id", required_argument, NULL, 'U'},  {"delay", required_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
  const char *url = DEFAULT_URL, *body = NULL, *file = NULL, *json = NULL, *schema_path = NULL, *dup = "";
  int rt = MQR_ROUTING_NONE, o;
  long count = 1;
  double timeout = 10;
  bool durable = false, allow_unrouted = false;
  mqr_str_t keys[MAX_PROPS];
  mqr_value_t vals[MAX_PROPS];
  size_t n_props = 0;
  long priority = MQR_PRIORITY_DEFAULT, ttl = 0, delay = 0;
  const char *user_id = "";
  optind = 1;
  opterr = 0;
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (o) {
    case 'u':
      if (!cli_url(optarg)) return 2;
      url = optarg;
      break;
    case 't':
      if (!cli_routing_type(optarg, &rt)) return 2;
      break;
    case 'p': {
      char *eq = strchr(optarg, '=');
      if (eq == NULL || eq == optarg || n_props == MAX_PROPS)
        return cli_usage_error(mqr_usage_send, "--property takes KEY=VALUE (at most %d of them), not '%s'", MAX_PROPS,
                               optarg);
      if (!cli_property(optarg, eq, &keys[n_props], &vals[n_props]))
        return cli_usage_error(mqr_usage_send, "--property '%s': not a value of its type", optarg);
      n_props++;
      break;
    }
    case 'P':
      if (!cli_long("--priority", optarg, 0, MQR_PRIORITY_MAX, &priority)) return 2;
      break;
    case 'T':
      if (!cli_long("--ttl", optarg, 1, 315360000000L, &ttl)) return 2;
      break;
    case 'U': user_id = optarg; break;
    case 'D':
      if (!cli_long("--delay", optarg, 1, 315360000000L, &delay)) return 2;
      break;
    case 'b': body = optarg; break;
    case 'f': file = optarg; break;
    case 'j': json = optarg; break;
    case 's': schema_path = optarg; break;
    case 'n':
      if (!cli_long("--count", optarg, 1, 100000000, &count)) return 2;
      break;
    case 'w':
      if (!cli_seconds("--timeout", optarg, &timeout)) return 2;
      break;
    case 'd': durable = true; break;
    case 'i': dup = optarg; break;
    case 'a': allow_unrouted = true; break;
    case 'h': fputs(mqr_usage_send, stdout); return 0;
    case ':': return cli_usage_error(mqr_usage_send, "%s needs a value", argv[optind - 1]);
    default: return cli_usage_error(mqr_usage_send, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind != argc - 1) return cli_usage_error(mqr_usage_send, "give exactly one ADDRESS");
  if ((!!body + !!file + !!json) > 1) return cli_usage_error(mqr_usage_send, "give one of --body, --file, --json");
  if (!!json != !!schema_path) return cli_usage_error(mqr_usage_send, "--json and --schema go together");
  const char *address = argv[optind];
  char *data = NULL;
  size_t len = body ? strlen(body) : 0;
  mqr_avro_buf_t avro;
  mqr_avro_buf_init_growable(&avro);
  if (file && (data = cli_read_file(file, &len)) == NULL) return 1;
  if (json) {
    mqr_avro_schema_t *s = NULL;
    if (cli_load_schema(schema_path, NULL, &s) == NULL) return 1;
    mqr_error_t err;
    if (mqr_avro_single_object_header(s, &avro) != 0 ||
        mqr_avro_json_to_binary(s, json, strlen(json), &avro, &err) != 0) {
      char line[1024];
      snprintf(err.file, sizeof err.file, "--json");
      cli_error("%s", mqr_error_format(&err, line, sizeof line));
      mqr_avro_schema_destroy(s);
      mqr_avro_buf_free(&avro);
      return 1;
    }
    mqr_avro_schema_destroy(s);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, expiration = ttl ? now + ttl : 0;
  if (delay) {
    if (n_props == MAX_PROPS) return cli_usage_error(mqr_usage_send, "--delay needs room for one more property");
    keys[n_props] = MQR_STR(MQR_PROP_SCHEDULED);
    vals[n_props++] = mqr_value_long(now + delay);
  }
  mqr_client_message_t m = {.address = mqr_str(address),
                            .routing_type = rt,
                            .durable = durable,
                            .duplicate_id = mqr_str(dup),
                            .priority = (int32_t)priority,
                            .expiration = expiration,
                            .user_id = mqr_str(user_id),
                            .property_keys = keys,
                            .property_values = vals,
                            .n_properties = n_props};
  m.body = json ? mqr_str_n((const char *)avro.data, avro.len) : mqr_str_n(data ? data : body ? body : "", len);

  char urls[CLI_MAX_URLS][512];
  int n_urls = cli_urls(url, urls); /* (--url was checked: at least one) */
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool expired = false;
  uv_timer_t timer;
  uv_timer_init(&loop, &timer);
  timer.data = &expired;
  uv_timer_start(&timer, on_timer, (uint64_t)(timeout * 1000), 0);
  int rc = 1;
  long total[N_STATUS] = {0}, remaining = count;
  static sent_t tries[CLI_MAX_URLS]; /* each attempt's own: a closed client answers what waited, later */
  sent_t sent = {0};
  long queued = 0;
  mqr_error_t err = {0}, lost = {0};
  bool connected = false;
  const char *last_url = urls[0];
  /* Each URL in turn while the cluster says another node leads (or the node goes): what
   * was not answered OK is sent again there (at least once). */
  for (int u = 0; u < n_urls && remaining > 0 && !expired; u++) {
    last_url = urls[u];
    memset(&lost, 0, sizeof lost);
    mqr_client_options_t copt = {.client_id = "mqr-send", .on_error = on_lost, .arg = &lost};
    cli_client_options(&copt);
    mqr_client_t *c;
    conn_t conn = {0};
    sent_t *at = &tries[u];
    *at = (sent_t){0};
    queued = 0;
    if (mqr_client_create(&loop, &copt, &c) != 0 || mqr_client_connect(c, urls[u], on_connected, &conn, &err) != 0) {
      cli_error("%s", err.message);
      break;
    }
    while (conn.state == 0 && lost.code == 0 && !expired) uv_run(&loop, UV_RUN_ONCE);
    if (conn.state != 1) {
      char why[256];
      mqr_error_t *e = conn.state < 0 ? &conn.err : &lost;
      if (expired) mqr_error_set(e, MQR_ETIMEOUT, "no answer within %g s", timeout);
      err = *e;
      mqr_client_close(c, NULL, NULL);
      if (u + 1 < n_urls && !expired) continue; /* the next node */
      cli_error("cannot connect to %s: %s", urls[u], cli_connect_error(e, why, sizeof why));
      connected = false;
      break;
    }
    connected = true;
    /* All sends leave at once; then the receipts come back. */
    for (; queued < remaining && lost.code == 0; queued++) {
      if (mqr_client_send(c, &m, on_receipt, at, &err) != 0) break;
      at->waiting++;
      if ((queued & 1023) == 1023) uv_run(&loop, UV_RUN_NOWAIT);
    }
    while (at->waiting > 0 && lost.code == 0 && !expired) uv_run(&loop, UV_RUN_ONCE);
    sent = *at; /* (as it stood: closing the client answers what still waits, ECLOSED) */
    long answered = 0;
    for (int k = 0; k < N_STATUS; k++) total[k] += sent.status[k], answered += sent.status[k];
    remaining -= answered;
    mqr_client_close(c, NULL, NULL);
    bool elsewhere = (sent.errors && (sent.first.code == MQR_ENOTLEADER || sent.first.code == MQR_EINDOUBT)) ||
                     (lost.code && queued == remaining + answered);
    if (remaining == 0 || !elsewhere || u + 1 == n_urls) break;
    fprintf(stderr, "mqr: %s: %s; %ld to send again to %s\n", urls[u], sent.errors ? sent.first.message : lost.message,
            remaining, urls[u + 1]);
  }
  if (connected) {
    long unrouted = total[1], dropped = total[4];
    bool partial = remaining > 0;
    if (remaining > 0 && queued < remaining && lost.code == 0 && sent.errors == 0) {
      cli_broker_error(&err); /* refused before it left: over the broker's max-frame-size, say */
    } else if (sent.errors) {
      cli_broker_error(&sent.first);
    } else if (lost.code) {
      cli_error("the broker closed the connection: %s [%s]", lost.message, mqr_err_name(lost.code));
    } else if (sent.waiting > 0) {
      cli_error("timed out after %g s with %ld of %ld receipts: the address may be full and its "
                "address-full-policy BLOCK (mqr stat shows it); --timeout waits longer",
                timeout, count - remaining, count);
    } else {
      printf("sent %ld to %s:", count, address);
      for (int k = 0; k < N_STATUS; k++)
        if (total[k]) printf(" %s %ld", status_names[k], total[k]);
      printf("\n");
      fflush(stdout);
      rc = 0;
      if ((unrouted || dropped) && !allow_unrouted) {
        explain_unrouted(last_url, address, unrouted, dropped);
        rc = 1;
      }
    }
    if (partial && count > 1) { /* what went before the error, counted as the receipts said */
      fprintf(stderr, "mqr: %ld of %ld sent to %s", count - remaining, count, address);
      for (int k = 0; k < N_STATUS; k++)
        if (total[k]) fprintf(stderr, " %s %ld", status_names[k], total[k]);
      fprintf(stderr, "; %ld refused, %ld not answered\n", sent.errors, remaining - sent.errors);
    }
  }
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  free(data);
  mqr_avro_buf_free(&avro);
  return rc;
}
