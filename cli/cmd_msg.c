/* mqr send | recv | stat: the tool as a client of a running broker.
 *
 *   mqr send --url tcp://HOST:PORT [--routing-type T] [--property K=V]... [--durable]
 *            [--dup-id ID] [--body TEXT | --file F | --json J --schema FILE] [--count N] ADDRESS
 *   mqr recv --url ... [--routing-type T] [--count N] [--timeout S] [--schema FILE] TARGET
 *   mqr stat --url ...
 *
 * The broker's errors are printed with their code, and the exit status is 1. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "commands.h"
#include "mqr/client.h"

#define DEFAULT_URL "tcp://127.0.0.1:61616"
#define MAX_PROPS 64

static int broker_error(const mqr_error_t *err) {
  fprintf(stderr, "mqr: %s (%d): %s\n", mqr_err_name(err->code), err->code, err->message);
  return 1;
}

static bool parse_rt(const char *s, int *rt) {
  if (!strcasecmp(s, "anycast")) return *rt = MQR_ANYCAST, true;
  if (!strcasecmp(s, "multicast")) return *rt = MQR_MULTICAST, true;
  fprintf(stderr, "mqr: unknown routing type '%s' (ANYCAST or MULTICAST)\n", s);
  return false;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "mqr: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap);
  for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += k;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (nb == NULL) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf == NULL) fprintf(stderr, "mqr: %s: out of memory\n", path);
  *len = n;
  return buf;
}

static mqr_avro_schema_t *load_schema(const char *path) {
  size_t len;
  char *text = read_file(path, &len);
  if (text == NULL) return NULL;
  mqr_avro_schema_t *s = NULL;
  mqr_error_t err;
  if (mqr_avro_schema_parse(text, len, &s, &err) != 0) {
    char line[1024];
    snprintf(err.file, sizeof err.file, "%s", path);
    fprintf(stderr, "mqr: %s\n", mqr_error_format(&err, line, sizeof line));
  }
  free(text);
  return s;
}

/* ---- send ---------------------------------------------------------------------------------- */

typedef struct {
  long waiting, status[5], errors;
  mqr_error_t first;
} sent_t;

static void on_receipt(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c;
  sent_t *s = arg;
  s->waiting--;
  if (status == 0 && f && f->type == MQR_FRAME_RECEIPT && f->u.receipt.status >= 0 && f->u.receipt.status < 5) {
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

static void on_connected(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c;
  int *out = arg;
  *out = status ? status : 1;
  (void)f;
}

static void on_lost(mqr_client_t *c, int status, const mqr_frame_error_t *e, void *arg) {
  (void)c;
  mqr_error_t *err = arg;
  if (err->code == 0) mqr_error_set(err, status, "%.*s", e ? (int)e->text.len : 0, e ? e->text.ptr : "");
}

static int cmd_send(int argc, char **argv) {
  static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                       {"routing-type", required_argument, NULL, 't'},
                                       {"property", required_argument, NULL, 'p'},
                                       {"body", required_argument, NULL, 'b'},
                                       {"file", required_argument, NULL, 'f'},
                                       {"json", required_argument, NULL, 'j'},
                                       {"schema", required_argument, NULL, 's'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"durable", no_argument, NULL, 'd'},
                                       {"dup-id", required_argument, NULL, 'i'},
                                       {NULL, 0, NULL, 0}};
  const char *url = DEFAULT_URL, *body = NULL, *file = NULL, *json = NULL, *schema_path = NULL, *dup = "";
  int rt = MQR_ROUTING_NONE, o;
  long count = 1;
  bool durable = false;
  mqr_str_t keys[MAX_PROPS], vals[MAX_PROPS];
  size_t n_props = 0;
  optind = 1;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
    case 'u': url = optarg; break;
    case 't':
      if (!parse_rt(optarg, &rt)) return 2;
      break;
    case 'p': {
      char *eq = strchr(optarg, '=');
      if (eq == NULL || eq == optarg || n_props == MAX_PROPS) {
        fprintf(stderr, "mqr: --property takes KEY=VALUE (at most %d)\n", MAX_PROPS);
        return 2;
      }
      keys[n_props] = mqr_str_n(optarg, (size_t)(eq - optarg));
      vals[n_props++] = mqr_str(eq + 1);
      break;
    }
    case 'b': body = optarg; break;
    case 'f': file = optarg; break;
    case 'j': json = optarg; break;
    case 's': schema_path = optarg; break;
    case 'n':
      count = strtol(optarg, NULL, 10);
      if (count < 1) {
        fprintf(stderr, "mqr: --count must be 1 or more\n");
        return 2;
      }
      break;
    case 'd': durable = true; break;
    case 'i': dup = optarg; break;
    default: return 2;
    }
  }
  if (optind != argc - 1 || (!!body + !!file + !!json) > 1 || (json && !schema_path) || (schema_path && !json)) {
    fputs("usage: mqr send --url tcp://HOST:PORT [--routing-type T] [--property K=V]... [--durable] [--dup-id ID]\n"
          "                [--body TEXT | --file F | --json J --schema FILE] [--count N] ADDRESS\n",
          stderr);
    return 2;
  }
  const char *address = argv[optind];
  char *data = NULL;
  size_t len = body ? strlen(body) : 0;
  mqr_avro_buf_t avro;
  mqr_avro_buf_init_growable(&avro);
  if (file && (data = read_file(file, &len)) == NULL) return 1;
  if (json) {
    mqr_avro_schema_t *s = load_schema(schema_path);
    if (s == NULL) return 1;
    mqr_error_t err;
    if (mqr_avro_single_object_header(s, &avro) != 0 ||
        mqr_avro_json_to_binary(s, json, strlen(json), &avro, &err) != 0) {
      char line[1024];
      snprintf(err.file, sizeof err.file, "--json");
      fprintf(stderr, "mqr: %s\n", mqr_error_format(&err, line, sizeof line));
      mqr_avro_schema_destroy(s);
      mqr_avro_buf_free(&avro);
      return 1;
    }
    mqr_avro_schema_destroy(s);
  }
  mqr_client_message_t m = {mqr_str(address), rt, durable, mqr_str(dup), keys, vals, n_props, {NULL, 0}};
  m.body = json ? mqr_str_n((const char *)avro.data, avro.len) : mqr_str_n(data ? data : body ? body : "", len);

  uv_loop_t loop;
  uv_loop_init(&loop);
  mqr_error_t lost = {0};
  mqr_client_options_t copt = {.client_id = "mqr-send", .on_error = on_lost, .arg = &lost};
  mqr_client_t *c;
  int connected = 0, rc = 1;
  mqr_error_t err;
  sent_t sent = {0};
  if (mqr_client_create(&loop, &copt, &c) != 0 || mqr_client_connect(c, url, on_connected, &connected, &err) != 0) {
    fprintf(stderr, "mqr: %s\n", err.message);
  } else {
    while (connected == 0 && lost.code == 0) uv_run(&loop, UV_RUN_ONCE);
    if (connected != 1) {
      fprintf(stderr, "mqr: cannot connect to %s: %s\n", url, mqr_strerror(connected < 0 ? connected : lost.code));
    } else {
      /* All sends leave at once; then the receipts come back. */
      for (long i = 0; i < count && lost.code == 0; i++) {
        if (mqr_client_send(c, &m, on_receipt, &sent, &err) != 0) break;
        sent.waiting++;
        if ((i & 1023) == 1023) uv_run(&loop, UV_RUN_NOWAIT);
      }
      while (sent.waiting > 0 && lost.code == 0) uv_run(&loop, UV_RUN_ONCE);
      if (sent.errors) {
        broker_error(&sent.first);
      } else if (lost.code) {
        fprintf(stderr, "mqr: the connection ended: %s %s\n", mqr_err_name(lost.code), lost.message);
      } else {
        static const char *const names[5] = {"OK", "NO_BINDINGS", "NO_BINDINGS_DLA", "DUPLICATE_ID", "DROPPED"};
        printf("sent %ld to %s:", count, address);
        for (int k = 0; k < 5; k++)
          if (sent.status[k]) printf(" %s %ld", names[k], sent.status[k]);
        printf("\n");
        rc = 0;
      }
    }
    mqr_client_close(c, NULL, NULL);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  free(data);
  mqr_avro_buf_free(&avro);
  return rc;
}

/* ---- recv ------------------------------------------------------------------------------------ */

static int cmd_recv(int argc, char **argv) {
  static const struct option opts[] = {
      {"url", required_argument, NULL, 'u'},    {"routing-type", required_argument, NULL, 't'},
      {"count", required_argument, NULL, 'n'},  {"timeout", required_argument, NULL, 'w'},
      {"schema", required_argument, NULL, 's'}, {NULL, 0, NULL, 0}};
  const char *url = DEFAULT_URL, *schema_path = NULL;
  int rt = MQR_ROUTING_NONE, o;
  long count = 1;
  double timeout = 5;
  optind = 1;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
    case 'u': url = optarg; break;
    case 't':
      if (!parse_rt(optarg, &rt)) return 2;
      break;
    case 'n': count = strtol(optarg, NULL, 10); break;
    case 'w': timeout = strtod(optarg, NULL); break;
    case 's': schema_path = optarg; break;
    default: return 2;
    }
  }
  if (optind != argc - 1 || count < 1 || timeout < 0) {
    fputs("usage: mqr recv --url tcp://HOST:PORT [--routing-type T] [--count N] [--timeout S] [--schema FILE] "
          "TARGET\n",
          stderr);
    return 2;
  }
  mqr_avro_schema_t *schema = schema_path ? load_schema(schema_path) : NULL;
  if (schema_path && schema == NULL) return 1;
  mqr_avro_cache_t *cache = NULL;
  if (schema) {
    const mqr_avro_schema_t *cached;
    mqr_str_t text = mqr_avro_schema_json(schema); /* with its defaults and aliases */
    if (mqr_avro_cache_create(&cache) != 0 || mqr_avro_cache_add(cache, text.ptr, text.len, &cached, NULL) != 0) {
      fprintf(stderr, "mqr: out of memory\n");
      mqr_avro_cache_destroy(cache);
      mqr_avro_schema_destroy(schema);
      return 1;
    }
  }
  mqr_bclient_t *bc;
  mqr_error_t err;
  int rc = 1;
  if (mqr_bclient_connect(url, "mqr-recv", (int)(timeout * 1000), &bc, &err) != 0) {
    fprintf(stderr, "mqr: cannot connect to %s: %s\n", url, err.message);
    goto out;
  }
  int64_t sub;
  uint32_t credit = count > 1000 ? 1000 : (uint32_t)count;
  if (mqr_bclient_subscribe(bc, mqr_str(argv[optind]), rt, mqr_str_n("", 0), credit, &sub, NULL, 0, &err) != 0) {
    broker_error(&err);
    mqr_bclient_close(bc);
    goto out;
  }
  long got = 0;
  mqr_avro_buf_t json;
  mqr_avro_buf_init_growable(&json);
  while (got < count) {
    mqr_bclient_message_t *m;
    int r = mqr_bclient_receive(bc, (int)(timeout * 1000), &m, &err);
    if (r == MQR_ETIMEOUT) {
      fprintf(stderr, "mqr: timed out after %g s with %ld of %ld messages\n", timeout, got, count);
      break;
    }
    if (r) {
      broker_error(&err);
      break;
    }
    const mqr_avro_schema_t *w;
    if (cache) {
      json.len = 0;
      const uint8_t *b = (const uint8_t *)m->body.ptr;
      if (mqr_avro_cache_single_object(cache, b, m->body.len, &w, &err) != 0 ||
          mqr_avro_binary_to_json(w, b + MQR_AVRO_SINGLE_OBJECT_HEADER, m->body.len - MQR_AVRO_SINGLE_OBJECT_HEADER,
                                  NULL, &json, &err) != 0) {
        fprintf(stderr, "mqr: message %lld: the body is not the schema's single-object datum: %s\n",
                (long long)m->message_id, err.message);
        mqr_bclient_message_free(m);
        break;
      }
      printf("%.*s\n", (int)json.len, (const char *)json.data);
    } else {
      fwrite(m->body.ptr, 1, m->body.len, stdout);
      putchar('\n');
    }
    int64_t d = m->delivery;
    mqr_bclient_message_free(m);
    got++;
    if (mqr_bclient_ack(bc, sub, d, false, &err) != 0) {
      broker_error(&err);
      break;
    }
    if (got % 1000 == 0 && got < count) mqr_bclient_credit(bc, sub, 1000, &err);
  }
  fflush(stdout);
  if (got == count) rc = 0;
  mqr_avro_buf_free(&json);
  mqr_bclient_close(bc);
out:
  mqr_avro_cache_destroy(cache);
  mqr_avro_schema_destroy(schema);
  return rc;
}

/* ---- stat ------------------------------------------------------------------------------------ */

static int cmd_stat(int argc, char **argv) {
  static const struct option opts[] = {{"url", required_argument, NULL, 'u'}, {NULL, 0, NULL, 0}};
  const char *url = DEFAULT_URL;
  int o;
  optind = 1;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    if (o != 'u') return 2;
    url = optarg;
  }
  if (optind != argc) {
    fputs("usage: mqr stat --url tcp://HOST:PORT\n", stderr);
    return 2;
  }
  mqr_bclient_t *bc;
  mqr_error_t err;
  if (mqr_bclient_connect(url, "mqr-stat", 5000, &bc, &err) != 0) {
    fprintf(stderr, "mqr: cannot connect to %s: %s\n", url, err.message);
    return 1;
  }
  mqr_frame_query_result_t *q;
  if (mqr_bclient_query(bc, &q, &err) != 0) {
    mqr_bclient_close(bc);
    return broker_error(&err);
  }
  static const char *const rts[3] = {"-", "ANYCAST", "MULTICAST"};
  const mqr_frame_address_info_t *a = q->addresses.items;
  const mqr_frame_queue_info_t *qi = q->queues.items;
  printf("addresses:\n");
  for (size_t i = 0; i < q->addresses.count; i++)
    printf("  %-24s types=%-20s routed=%lld unrouted=%lld bytes=%lld\n", a[i].name.ptr, a[i].routing_types.ptr,
           (long long)a[i].routed, (long long)a[i].unrouted, (long long)a[i].size_bytes);
  printf("queues:\n");
  for (size_t i = 0; i < q->queues.count; i++)
    printf("  %-24s address=%-16s %-9s depth=%lld in-flight=%lld consumers=%d enqueued=%lld acked=%lld\n",
           qi[i].name.ptr, qi[i].address.ptr,
           rts[qi[i].routing_type < 0 || qi[i].routing_type > 2 ? 0 : qi[i].routing_type], (long long)qi[i].depth,
           (long long)qi[i].in_flight, qi[i].consumers, (long long)qi[i].enqueued, (long long)qi[i].acknowledged);
  printf("connections=%d dropped=%lld\n", q->connections, (long long)q->dropped);
  mqr_free(q);
  mqr_bclient_close(bc);
  return 0;
}

int mqr_cmd_send(int argc, char **argv) { return cmd_send(argc, argv); }
int mqr_cmd_recv(int argc, char **argv) { return cmd_recv(argc, argv); }
int mqr_cmd_stat(int argc, char **argv) { return cmd_stat(argc, argv); }
