/* The management API: JSON over HTTP for what the native MANAGE frame does, and the
 * listings a console needs, under /api/v1 (docs/management-api.md is the user's view).
 * Requests and answers are JSON made and read by jansson (Debian's libjansson: no JSON
 * code of ours); the operations are the broker's management calls (broker/manage.c), with
 * the permission checks the native frame makes:
 *
 *   browse or manage on an address   to see it, its queues, their messages and consumers
 *   manage on an address             to change it or its queues (a move: both queues')
 *   manage on activemq.management    connections: list and close (Artemis's management
 *                                    address)
 *
 * A listing shows only what its user may see. Every request that changes something
 * (POST, DELETE) must carry the header X-Requested-With (any value) and, when it comes
 * with an Origin, come from the broker's own origin: a page of another site cannot make
 * a browser send either without a CORS preflight, which mqrd never grants; with a
 * console's session, its X-CSRF-Token too.
 *
 * This file: the routes, addresses and queues; api_broker.c: the broker, connections and
 * the console's session. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define BROWSE_DEFAULT 200 /* Artemis's management-browse-page-size */
#define BROWSE_MAX 10000

/* ---- answers ------------------------------------------------------------------------------------ */

void mqr__api_json(mqr__http_answer_t *a, int status, json_t *j) {
  a->status = status;
  a->content_type = "application/json";
  char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (text == NULL) {
    a->body.failed = true;
  } else {
    mqr__http_put(&a->body, text, strlen(text));
    mqr__http_put(&a->body, "\n", 1);
    free(text);
  }
  json_decref(j);
}

static int status_of(int rc) {
  switch (rc) {
  case MQR_ENOADDR:
  case MQR_ENOQUEUE:
  case MQR_ENOTFOUND: return 404;
  case MQR_EPERM: return 403;
  case MQR_EADDREXISTS:
  case MQR_EQUEUEEXISTS:
  case MQR_EADDRHASQUEUES:
  case MQR_EQUEUEINUSE:
  case MQR_ETYPEINUSE: return 409;
  case MQR_ENOMEM:
  case MQR_EIO:
  case MQR_ENOSPC: return 500;
  case MQR_ENOTLEADER: return 421; /* (Misdirected Request: another node answers for the queue) */
  default: return 400;
  }
}

/* {"error": message, "code": "ENOQUEUE"} with the status the code calls for. */
void mqr__api_error(mqr__http_answer_t *a, int rc, const char *message) {
  mqr__api_json(a, status_of(rc), json_pack("{s:s, s:s}", "error", message, "code", mqr_err_name(rc)));
}

void mqr__api_done(mqr__http_answer_t *a, int rc, const mqr_error_t *err, json_t *ok) {
  if (rc < 0) {
    json_decref(ok);
    mqr__api_error(a, rc, err->message[0] ? err->message : mqr_strerror(rc));
  } else {
    mqr__api_json(a, 200, ok);
  }
}

json_t *mqr__api_str(mqr_str_t s) { return json_stringn_nocheck(s.ptr ? s.ptr : "", s.len); }

/* ---- the request ------------------------------------------------------------------------------- */

/* The path's segments after /api/v1/, percent-decoded (a queue's name may hold any byte
 * but '/' unencoded): how many (at most max), -1 when one is not valid UTF-8 or badly
 * encoded. The segments point into buf. */
static int segments(mqr_str_t path, char *buf, size_t cap, mqr_str_t *seg, int max) {
  int n = 0;
  size_t i = 0, o = 0;
  while (i < path.len && n < max) {
    size_t start = o;
    while (i < path.len && path.ptr[i] != '/') {
      char ch = path.ptr[i++];
      if (ch == '%') {
        if (i + 2 > path.len) return -1;
        char hex[3] = {path.ptr[i], path.ptr[i + 1], 0}, *end;
        long v = strtol(hex, &end, 16);
        if (*end) return -1;
        ch = (char)v, i += 2;
      }
      if (o == cap) return -1;
      buf[o++] = ch;
    }
    seg[n++] = mqr_str_n(buf + start, o - start);
    if (mqr_utf8_check(buf + start, o - start) != o - start) return -1;
    i++; /* the '/' */
  }
  return i < path.len ? -1 : n;
}

/* A query parameter's value, percent-decoded into buf ('+' a space): false when absent. */
bool mqr__api_param(mqr_str_t query, const char *key, char *buf, size_t cap) {
  size_t klen = strlen(key), i = 0;
  while (i < query.len) {
    size_t end = i;
    while (end < query.len && query.ptr[end] != '&') end++;
    if (end - i > klen && memcmp(query.ptr + i, key, klen) == 0 && query.ptr[i + klen] == '=') {
      size_t o = 0;
      for (size_t k = i + klen + 1; k < end && o + 1 < cap; k++) {
        char ch = query.ptr[k];
        if (ch == '+') ch = ' ';
        if (ch == '%' && k + 2 < end) {
          char hex[3] = {query.ptr[k + 1], query.ptr[k + 2], 0}, *e;
          long v = strtol(hex, &e, 16);
          if (*e == 0) ch = (char)v, k += 2;
        }
        buf[o++] = ch;
      }
      buf[o] = 0;
      return true;
    }
    i = end + 1;
  }
  return false;
}

long mqr__api_param_long(mqr_str_t query, const char *key, long dflt, long min, long max) {
  char v[32], *end;
  if (!mqr__api_param(query, key, v, sizeof v) || v[0] == 0) return dflt;
  long n = strtol(v, &end, 10);
  return *end || n < min ? min : n > max ? max : n;
}

/* The body as a JSON object (an empty body: {}); NULL with a 400 answered. */
static json_t *body_object(const mqr__http_request_t *r, mqr__http_answer_t *a) {
  if (r->body.len == 0) return json_object();
  json_error_t je;
  json_t *j = json_loadb(r->body.ptr, r->body.len, JSON_REJECT_DUPLICATES, &je);
  if (j == NULL || !json_is_object(j)) {
    char text[300];
    snprintf(text, sizeof text, "the body is not a JSON object%s%s", j ? "" : ": ", j ? "" : je.text);
    json_decref(j);
    mqr__api_error(a, MQR_EINVAL, text);
    return NULL;
  }
  return j;
}

static mqr_str_t member_str(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? mqr_str_n(json_string_value(v), json_string_length(v)) : mqr_str_n(NULL, 0);
}

/* ---- permissions ---------------------------------------------------------------------------------- */

static bool may_see(mqr_broker_t *b, mqr__principal_t *who, mqr_str_t address) {
  return mqr__allowed(b, who, MQR_PERM_BROWSE, address) || mqr__allowed(b, who, MQR_PERM_MANAGE, address);
}

static mqr_str_t queue_address(mqr_broker_t *b, mqr_str_t queue) {
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(b), queue);
  return q ? mqr_address_name(mqr_queue_address(q)) : mqr_str_n("", 0);
}

/* A queue's address for who to act on (manage) or look at (!manage): 0, MQR_ENOQUEUE,
 * or MQR_EPERM (answered in both cases). A queue one may not see is not found. */
static int queue_for(mqr_broker_t *b, mqr__principal_t *who, mqr_str_t queue, bool manage, mqr__http_answer_t *a) {
  mqr_str_t address = queue_address(b, queue);
  char text[600];
  if (address.len == 0 || !may_see(b, who, address)) {
    snprintf(text, sizeof text, "queue '%.*s' does not exist", (int)(queue.len > 256 ? 256 : queue.len), queue.ptr);
    mqr__api_error(a, MQR_ENOQUEUE, text);
    return MQR_ENOQUEUE;
  }
  mqr_error_t err = {0};
  if (manage && !mqr__may(b, who, MQR_PERM_MANAGE, address, &err)) {
    mqr__api_error(a, MQR_EPERM, err.message);
    return MQR_EPERM;
  }
  return 0;
}

/* 0 when this node serves the queue's messages, else MQR_ENOTLEADER answered (421, the
 * message naming the leader): a replicated queue's are its group leader's to show and
 * change (mqr_broker_queue_served). */
static int served(mqr_broker_t *b, mqr_str_t queue, mqr__http_answer_t *a) {
  mqr_error_t err = {0};
  int rc = mqr_broker_queue_served(b, queue, &err);
  if (rc) mqr__api_error(a, rc, err.message);
  return rc;
}

/* ---- listings ------------------------------------------------------------------------------------- */

typedef struct {
  mqr_broker_t *b;
  mqr__principal_t *who;
  mqr_str_t search;  /* a substring of the name; "" any */
  mqr_str_t address; /* queues: of this address only; "" any */
  json_t *items;
  mqr__api_page_t page;
  bool queues; /* a listing of queues (else of addresses) */
  bool seen;   /* the current address may be seen */
  /* sorted (queues): every match kept, then sorted and paged (the views stay valid: the
   * broker does not change during the walk) */
  int sort; /* 0: the broker's order; SORT_* */
  mqr_broker_queue_info_t *all;
  uint32_t n_all, cap_all;
  bool nomem;
} list_t;

enum { SORT_NONE, SORT_NAME, SORT_DEPTH, SORT_CONSUMERS };

bool mqr__api_matches(mqr_str_t name, mqr_str_t search) {
  for (size_t i = 0; i + search.len <= name.len; i++)
    if (search.len == 0 || memcmp(name.ptr + i, search.ptr, search.len) == 0) return true;
  return false;
}

/* Whether the next match is on the page (counted either way). */
mqr__api_page_t mqr__api_page(mqr_str_t query) {
  return (mqr__api_page_t){mqr__api_param_long(query, "offset", 0, 0, LONG_MAX / 2),
                           mqr__api_param_long(query, "limit", MQR__API_LIST_DEFAULT, 0, MQR__API_LIST_MAX), 0};
}

bool mqr__api_on_page(mqr__api_page_t *p) {
  long i = p->total++;
  return i >= p->offset && i < p->offset + p->limit;
}

void mqr__api_page_answer(mqr__http_answer_t *a, const mqr__api_page_t *p, const char *key, json_t *items) {
  mqr__api_json(a, 200,
                json_pack("{s:I, s:I, s:I, s:o}", "total", (json_int_t)p->total, "offset", (json_int_t)p->offset,
                          "limit", (json_int_t)p->limit, key, items));
}

static json_t *routing_types(mqr_routing_set_t s) {
  json_t *t = json_array();
  if (mqr_routing_set_contains(s, MQR_ANYCAST)) json_array_append_new(t, json_string("ANYCAST"));
  if (mqr_routing_set_contains(s, MQR_MULTICAST)) json_array_append_new(t, json_string("MULTICAST"));
  return t;
}

static json_t *address_json(const mqr_broker_address_info_t *ai) {
  return json_pack("{s:o, s:o, s:I, s:I, s:I, s:I, s:b, s:I, s:b}", "name", mqr__api_str(ai->name), "routing-types",
                   routing_types(ai->routing_types), "queues", (json_int_t)ai->queues, "routed", (json_int_t)ai->routed,
                   "unrouted", (json_int_t)ai->unrouted, "size", (json_int_t)ai->size, "paging", ai->paging, "pages",
                   (json_int_t)ai->pages, "internal", (ai->flags & MQR_ADDRESS_INTERNAL) != 0);
}

static json_t *queue_json(const mqr_broker_queue_info_t *qi) {
  const mqr_broker_queue_stats_t *s = &qi->stats;
  return json_pack("{s:o, s:o, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "name",
                   mqr__api_str(qi->name), "address", mqr__api_str(qi->address), "routing-type",
                   qi->routing_type == MQR_ANYCAST ? "ANYCAST" : "MULTICAST", "durable", qi->durable, "message-count",
                   (json_int_t)s->depth, "delivering", (json_int_t)s->in_flight, "scheduled", (json_int_t)s->scheduled,
                   "messages-added", (json_int_t)s->enqueued, "messages-acknowledged", (json_int_t)s->acknowledged,
                   "messages-expired", (json_int_t)s->expired, "messages-killed", (json_int_t)s->killed, "held",
                   (json_int_t)s->held, "consumers", (json_int_t)s->consumers, "paused", s->paused);
}

static int list_address(void *arg, const mqr_broker_address_info_t *ai) {
  list_t *l = arg;
  l->seen = may_see(l->b, l->who, ai->name) && (l->address.len == 0 || mqr_str_eq(ai->name, l->address));
  if (!l->queues && l->seen && mqr__api_matches(ai->name, l->search) && mqr__api_on_page(&l->page))
    json_array_append_new(l->items, address_json(ai));
  return 0;
}

static void add_queue(list_t *l, const mqr_broker_queue_info_t *qi) {
  json_t *q = queue_json(qi);
  json_object_set_new(q, "may-manage", json_boolean(mqr__allowed(l->b, l->who, MQR_PERM_MANAGE, qi->address)));
  json_array_append_new(l->items, q);
}

static int list_queue(void *arg, const mqr_broker_queue_info_t *qi) {
  list_t *l = arg;
  if (!l->seen || !mqr__api_matches(qi->name, l->search)) return 0;
  if (l->sort == SORT_NONE) {
    if (mqr__api_on_page(&l->page)) add_queue(l, qi);
  } else if (mqr__grow((void **)&l->all, &l->cap_all, l->n_all + 1, sizeof *l->all)) {
    l->all[l->n_all++] = *qi;
  } else {
    l->nomem = true;
    return 1;
  }
  return 0;
}

static int by_name(const mqr_broker_queue_info_t *a, const mqr_broker_queue_info_t *b) {
  size_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
  int c = memcmp(a->name.ptr, b->name.ptr, n);
  return c ? c : a->name.len < b->name.len ? -1 : a->name.len > b->name.len;
}

static int by_depth(const void *x, const void *y) { /* deepest first, then by name */
  const mqr_broker_queue_info_t *a = x, *b = y;
  if (a->stats.depth != b->stats.depth) return a->stats.depth > b->stats.depth ? -1 : 1;
  return by_name(a, b);
}

static int by_consumers(const void *x, const void *y) { /* most consumers first, then by name */
  const mqr_broker_queue_info_t *a = x, *b = y;
  if (a->stats.consumers != b->stats.consumers) return a->stats.consumers > b->stats.consumers ? -1 : 1;
  return by_name(a, b);
}

static int by_name_v(const void *x, const void *y) { return by_name(x, y); }

static void listing(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a, bool queues) {
  char search[256] = "", address[256] = "", internal[8] = "";
  mqr__api_param(r->query, "search", search, sizeof search);
  mqr__api_param(r->query, "address", address, sizeof address);
  mqr__api_param(r->query, "internal", internal, sizeof internal);
  char sort[32] = "";
  mqr__api_param(r->query, "sort", sort, sizeof sort);
  list_t l = {.b = c->b,
              .who = r->who,
              .search = mqr_str(search),
              .address = mqr_str(address),
              .items = json_array(),
              .page = mqr__api_page(r->query),
              .queues = queues,
              .sort = !queues || sort[0] == 0              ? SORT_NONE
                      : strcmp(sort, "name") == 0          ? SORT_NAME
                      : strcmp(sort, "message-count") == 0 ? SORT_DEPTH
                      : strcmp(sort, "consumers") == 0     ? SORT_CONSUMERS
                                                           : -1};
  if (l.sort < 0) {
    json_decref(l.items);
    mqr__api_error(a, MQR_EINVAL, "sort by name, message-count (deepest first) or consumers (most first)");
    return;
  }
  mqr_broker_foreach_stats(c->b, strcmp(internal, "true") == 0, list_address, queues ? list_queue : NULL, &l);
  if (l.nomem) {
    json_decref(l.items);
    mqr_free(l.all);
    mqr__api_error(a, MQR_ENOMEM, "out of memory sorting the queues");
    return;
  }
  if (l.sort != SORT_NONE) { /* the page of the sorted matches */
    if (l.n_all)             /* (qsort takes no NULL, even for none) */
      qsort(l.all, l.n_all, sizeof *l.all,
            l.sort == SORT_NAME    ? by_name_v
            : l.sort == SORT_DEPTH ? by_depth
                                   : by_consumers);
    for (uint32_t i = 0; i < l.n_all; i++)
      if (mqr__api_on_page(&l.page)) add_queue(&l, &l.all[i]);
    mqr_free(l.all);
  }
  mqr__api_page_answer(a, &l.page, queues ? "queues" : "addresses", l.items);
}

/* One address or queue, by name. */
typedef struct {
  mqr_str_t queue;
  json_t *found;
} one_t;

static int one_address(void *arg, const mqr_broker_address_info_t *ai) {
  one_t *o = arg;
  if (o->found == NULL) {
    o->found = address_json(ai);
    json_object_set_new(o->found, "queue-names", json_array());
  }
  return 0;
}

static int one_queue(void *arg, const mqr_broker_queue_info_t *qi) {
  one_t *o = arg;
  if (o->queue.ptr == NULL) {
    json_array_append_new(json_object_get(o->found, "queue-names"), mqr__api_str(qi->name));
  } else if (mqr_str_eq(qi->name, o->queue)) {
    json_decref(o->found);
    o->found = queue_json(qi);
    return 1;
  }
  return 0;
}

static void get_address(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t name, mqr__http_answer_t *a) {
  one_t o = {mqr_str_n(NULL, 0), NULL};
  char text[600];
  if (!may_see(c->b, r->who, name) || mqr_broker_address_stats(c->b, name, true, one_address, one_queue, &o) != 0) {
    json_decref(o.found);
    snprintf(text, sizeof text, "address '%.*s' does not exist", (int)(name.len > 256 ? 256 : name.len), name.ptr);
    mqr__api_error(a, MQR_ENOADDR, text);
    return;
  }
  mqr__api_json(a, 200, o.found);
}

static void get_queue(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t name, mqr__http_answer_t *a) {
  if (queue_for(c->b, r->who, name, false, a) != 0) return;
  one_t o = {name, NULL};
  mqr_str_t address = queue_address(c->b, name);
  mqr_broker_address_stats(c->b, address, true, one_address, one_queue, &o);
  json_object_set_new(o.found, "may-manage", json_boolean(mqr__allowed(c->b, r->who, MQR_PERM_MANAGE, address)));
  mqr__api_json(a, 200, o.found);
}

/* ---- a queue's messages and consumers ---------------------------------------------------------------- */

static json_t *value_json(mqr_value_t v) {
  switch (v.type) {
  case MQR_VALUE_BOOL: return json_boolean(v.u.b);
  case MQR_VALUE_INT: return json_integer(v.u.i);
  case MQR_VALUE_LONG: return json_integer(v.u.l);
  case MQR_VALUE_FLOAT: return json_real(v.u.f);
  case MQR_VALUE_DOUBLE: return json_real(v.u.d);
  case MQR_VALUE_STRING: return mqr__api_str(v.u.s);
  case MQR_VALUE_BYTES: return json_pack("{s:I}", "bytes", (json_int_t)v.u.s.len);
  default: return json_null();
  }
}

static void on_message(void *arg, const mqr_frame_message_t *m) {
  json_t *list = arg;
  json_t *props = json_object();
  const mqr_value_t *v = m->properties.values;
  char key[256];
  for (size_t i = 0; i < m->properties.count; i++) {
    mqr_str_t k = m->properties.keys[i];
    snprintf(key, sizeof key, "%.*s", (int)(k.len < 255 ? k.len : 255), k.ptr);
    json_object_set_new(props, key, value_json(v[i]));
  }
  bool text = mqr_utf8_check(m->body.ptr, m->body.len) == m->body.len;
  json_t *j = json_pack("{s:I, s:o, s:b, s:i, s:I, s:I, s:i, s:o, s:I, s:o}", "message-id", (json_int_t)m->message_id,
                        "address", mqr__api_str(m->address), "durable", m->durable, "priority", (int)m->priority,
                        "timestamp", (json_int_t)m->timestamp, "expiration", (json_int_t)m->expiration,
                        "delivery-count", (int)m->delivery_count, "user-id", mqr__api_str(m->user_id), "body-size",
                        (json_int_t)m->body.len, "properties", props);
  if (text) { /* the body as text, when it is (else its size says what there is) */
    size_t show = m->body.len > 4096 ? 4096 : m->body.len;
    while (show < m->body.len && show && ((uint8_t)m->body.ptr[show] & 0xC0) == 0x80) show--; /* (whole chars) */
    json_object_set_new(j, "body", json_stringn_nocheck(m->body.ptr ? m->body.ptr : "", show));
  }
  json_array_append_new(list, j);
}

static void browse(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t name, mqr__http_answer_t *a) {
  if (queue_for(c->b, r->who, name, false, a) != 0 || served(c->b, name, a) != 0) return;
  json_t *list = json_array();
  mqr_error_t err = {0};
  long max = mqr__api_param_long(r->query, "limit", BROWSE_DEFAULT, 1, BROWSE_MAX);
  int64_t n = mqr_broker_browse(c->b, name, (uint32_t)max, on_message, list, &err);
  mqr__api_done(a, (int)(n < 0 ? n : 0), &err,
                json_pack("{s:I, s:o}", "count", (json_int_t)(n < 0 ? 0 : n), "messages", list));
}

static void on_consumer(void *arg, const mqr_broker_consumer_info_t *ci) {
  json_array_append_new(arg, json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "connection", (json_int_t)ci->session,
                                       "subscription", (json_int_t)ci->subscription, "credit", (json_int_t)ci->credit,
                                       "delivering", (json_int_t)ci->in_flight, "delivered", (json_int_t)ci->delivered,
                                       "filter", mqr__api_str(ci->selector)));
}

static void consumers(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t name, mqr__http_answer_t *a) {
  if (queue_for(c->b, r->who, name, false, a) != 0) return;
  json_t *list = json_array();
  mqr_error_t err = {0};
  int64_t n = mqr_broker_list_consumers(c->b, name, on_consumer, list, &err);
  mqr__api_done(a, (int)(n < 0 ? n : 0), &err,
                json_pack("{s:I, s:o}", "count", (json_int_t)(n < 0 ? 0 : n), "consumers", list));
}

/* ---- changes ------------------------------------------------------------------------------------------ */

static void create_address(mqr__conn_t *c, const mqr__http_request_t *r, json_t *body, mqr__http_answer_t *a) {
  mqr_str_t name = member_str(body, "name");
  json_t *types = json_object_get(body, "routing-types");
  mqr_routing_set_t set = mqr_routing_set_empty();
  size_t i;
  json_t *t;
  bool ok = json_is_array(types) && json_array_size(types) > 0;
  json_array_foreach(types, i, t) {
    mqr_routing_type_t rt;
    if (!json_is_string(t) || mqr_routing_type_parse(mqr_str(json_string_value(t)), &rt) != 0)
      ok = false;
    else
      set = mqr_routing_set_add(set, rt);
  }
  if (name.len == 0 || !ok) {
    mqr__api_error(a, MQR_EINVAL, "give {\"name\": \"...\", \"routing-types\": [\"ANYCAST\" and/or \"MULTICAST\"]}");
    return;
  }
  mqr_error_t err = {0};
  if (!mqr__may(c->b, r->who, MQR_PERM_MANAGE, name, &err)) {
    mqr__api_error(a, MQR_EPERM, err.message);
    return;
  }
  int rc = mqr_broker_create_address(c->b, name, set, &err);
  if (rc != 0) {
    mqr__api_done(a, rc, &err, NULL);
    return;
  }
  get_address(c, r, name, a);
  a->status = 201;
}

static void create_queue(mqr__conn_t *c, const mqr__http_request_t *r, json_t *body, mqr__http_answer_t *a) {
  mqr_str_t name = member_str(body, "name"), address = member_str(body, "address");
  mqr_routing_type_t rt;
  if (name.len == 0 || mqr_routing_type_parse(member_str(body, "routing-type"), &rt) != 0) {
    mqr__api_error(a, MQR_EINVAL,
                   "give {\"name\": \"...\", \"address\": \"...\", \"routing-type\": \"ANYCAST\" or \"MULTICAST\", "
                   "\"options\": {...}}");
    return;
  }
  if (address.len == 0) address = name;
  mqr_error_t err = {0};
  if (!mqr__may(c->b, r->who, MQR_PERM_MANAGE, address, &err)) {
    mqr__api_error(a, MQR_EPERM, err.message);
    return;
  }
  mqr_queue_config_t qc;
  mqr_queue_config_init(&qc, name, address, rt);
  qc.auto_create_address = true;
  json_t *opts = json_object_get(body, "options"), *v;
  const char *key;
  char num[32];
  if (opts && !json_is_object(opts)) {
    mqr__api_error(a, MQR_EINVAL, "options must be an object of the queue settings of mqr.yaml");
    return;
  }
  json_object_foreach(opts, key, v) {
    mqr_str_t value = mqr_str_n(NULL, 0);
    if (json_is_string(v))
      value = mqr_str_n(json_string_value(v), json_string_length(v));
    else if (json_is_boolean(v))
      value = mqr_str(json_is_true(v) ? "true" : "false");
    else if (json_is_integer(v))
      snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)), value = mqr_str(num);
    int rc = mqr__queue_option(&qc, mqr_str(key), value, &err);
    if (rc != 0) {
      mqr__api_done(a, rc, &err, NULL);
      return;
    }
  }
  int rc = mqr_broker_create_queue(c->b, &qc, &err);
  if (rc != 0) {
    mqr__api_done(a, rc, &err, NULL);
    return;
  }
  get_queue(c, r, name, a);
  a->status = 201;
}

/* The messages of a dead-letter (or expiry) queue back to the queues they came from
 * (their _AMQ_ORIG_QUEUE), as Artemis's retryMessages: each origin's messages moved by a
 * filter on it (and the request's filter, if any); those whose queue is gone stay. */
typedef struct {
  char **names;
  uint32_t n, cap;
} origins_t;

static void on_origin(void *arg, const mqr_frame_message_t *m) {
  origins_t *o = arg;
  const mqr_value_t *values = m->properties.values;
  for (size_t i = 0; i < m->properties.count; i++) {
    if (!mqr_str_eq(m->properties.keys[i], MQR_STR("_AMQ_ORIG_QUEUE")) || values[i].type != MQR_VALUE_STRING) continue;
    mqr_str_t q = values[i].u.s;
    for (size_t k = 0; k < o->n; k++)
      if (strlen(o->names[k]) == q.len && memcmp(o->names[k], q.ptr, q.len) == 0) return;
    char *copy = mqr_malloc(q.len + 1);
    if (copy == NULL || !mqr__grow((void **)&o->names, &o->cap, o->n + 1, sizeof *o->names)) {
      mqr_free(copy);
      return;
    }
    memcpy(copy, q.ptr, q.len);
    copy[q.len] = 0;
    o->names[o->n++] = copy;
  }
}

static void retry(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t name, json_t *body, mqr__http_answer_t *a) {
  mqr_broker_t *b = c->b;
  mqr_str_t filter = member_str(body, "filter");
  origins_t o = {0};
  mqr_error_t err = {0};
  int64_t n = mqr_broker_browse(b, name, 0, on_origin, &o, &err);
  int64_t moved = 0;
  int rc = n < 0 ? (int)n : 0;
  json_t *skipped = json_array();
  for (size_t i = 0; rc == 0 && i < o.n; i++) {
    mqr_str_t to = mqr_str(o.names[i]), where = queue_address(b, to);
    if (where.len == 0 || mqr_str_eq(to, name) || !mqr__allowed(b, r->who, MQR_PERM_MANAGE, where)) {
      json_array_append_new(skipped, json_string(o.names[i]));
      continue;
    }
    size_t cap = 2 * to.len + filter.len + 64;
    char *f = mqr_malloc(cap);
    if (f == NULL) {
      rc = mqr_error_set(&err, MQR_ENOMEM, "out of memory");
      break;
    }
    size_t k = (size_t)snprintf(f, cap, "_AMQ_ORIG_QUEUE = '");
    for (size_t j = 0; j < to.len; j++) { /* (a quote in the name, doubled) */
      if (to.ptr[j] == '\'') f[k++] = '\'';
      f[k++] = to.ptr[j];
    }
    k += (size_t)snprintf(f + k, cap - k, filter.len ? "' AND (%.*s)" : "'", (int)filter.len, filter.ptr);
    int64_t m = mqr_broker_move_messages(b, name, mqr_str_n(f, k), to, &err);
    mqr_free(f);
    if (m < 0)
      rc = (int)m;
    else
      moved += m;
  }
  for (size_t i = 0; i < o.n; i++) mqr_free(o.names[i]);
  mqr_free(o.names);
  mqr__api_done(a, rc, &err, json_pack("{s:I, s:o}", "retried", (json_int_t)moved, "origins-left", skipped));
}

static void queue_action(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t name, mqr_str_t action, json_t *body,
                         mqr__http_answer_t *a) {
  mqr_broker_t *b = c->b;
  mqr_error_t err = {0};
  int rc;
  if (queue_for(b, r->who, name, true, a) != 0 || served(b, name, a) != 0) return;
  if (mqr_str_eq(action, MQR_STR("purge"))) {
    uint64_t n = mqr_broker_purge(b, mqr_router_find_queue(mqr_broker_router(b), name));
    mqr__api_json(a, 200, json_pack("{s:I}", "purged", (json_int_t)n));
  } else if (mqr_str_eq(action, MQR_STR("pause")) || mqr_str_eq(action, MQR_STR("resume"))) {
    bool pause = mqr_str_eq(action, MQR_STR("pause"));
    rc = mqr_broker_pause_queue(b, name, pause, json_is_true(json_object_get(body, "persist")), &err);
    mqr__api_done(a, rc, &err, json_pack("{s:b}", "paused", pause));
  } else if (mqr_str_eq(action, MQR_STR("move"))) {
    mqr_str_t to = member_str(body, "to"), where = queue_address(b, to);
    if (to.len == 0) {
      mqr__api_error(a, MQR_EINVAL, "give {\"to\": \"a queue\", \"filter\": \"...\" (optional)}");
      return;
    }
    if (where.len && !mqr__may(b, r->who, MQR_PERM_MANAGE, where, &err)) {
      mqr__api_error(a, MQR_EPERM, err.message);
      return;
    }
    int64_t n = mqr_broker_move_messages(b, name, member_str(body, "filter"), to, &err);
    mqr__api_done(a, (int)(n < 0 ? n : 0), &err, json_pack("{s:I}", "moved", (json_int_t)(n < 0 ? 0 : n)));
  } else if (mqr_str_eq(action, MQR_STR("retry"))) {
    retry(c, r, name, body, a);
  } else {
    mqr__api_error(a, MQR_ENOTFOUND, "a queue's actions: purge, pause, resume, move, retry");
  }
}

/* ---- the routes --------------------------------------------------------------------------------------------- */

/* A change from a page of another site: refused (see the top of the file). */
static bool cross_site(const mqr__http_request_t *r, mqr__http_answer_t *a) {
  mqr_str_t v, host;
  if (!mqr__http_header(r, "X-Requested-With", &v)) {
    mqr__api_error(a, MQR_EPERM, "a request that changes something must carry the header X-Requested-With");
    return true;
  }
  if (r->csrf && (!mqr__http_header(r, "X-CSRF-Token", &v) || !mqr_str_eq(v, mqr_str(r->csrf)))) {
    mqr__api_error(a, MQR_EPERM, "a change made with the console's session must carry its X-CSRF-Token");
    return true;
  }
  if (mqr__http_header(r, "Origin", &v) && !mqr_str_eq(v, MQR_STR("null"))) {
    const char *sep = memchr(v.ptr, ':', v.len); /* scheme://host[:port]: its host[:port] is the Host */
    mqr_str_t origin_host = sep && (size_t)(sep - v.ptr) + 3 <= v.len
                                ? mqr_str_n(sep + 3, v.len - (size_t)(sep - v.ptr) - 3)
                                : mqr_str_n(NULL, 0);
    if (!mqr__http_header(r, "Host", &host) || !mqr_str_eq(origin_host, host)) {
      mqr__api_error(a, MQR_EPERM, "a request that changes something must come from mqrd's own origin");
      return true;
    }
  }
  return false;
}

void mqr__http_api(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a) {
  mqr_str_t rest = mqr_str_n(r->path.ptr + 8, r->path.len - 8); /* after "/api/v1/" */
  char buf[2048];
  mqr_str_t s[4];
  int n = r->path.len >= 8 ? segments(rest, buf, sizeof buf, s, 4) : -1;
  bool get = r->method == HTTP_GET || r->method == HTTP_HEAD, post = r->method == HTTP_POST,
       del = r->method == HTTP_DELETE;
  if (n <= 0) {
    mqr__api_error(a, MQR_ENOTFOUND, "no such path (docs/management-api.md lists them)");
    return;
  }
  if ((post || del) && cross_site(r, a)) return;
  json_t *body = NULL;
  if (post && (body = body_object(r, a)) == NULL) return;
  bool addresses = mqr_str_eq(s[0], MQR_STR("addresses")), queues = mqr_str_eq(s[0], MQR_STR("queues"));
  const char *allow = NULL;
  mqr_error_t err = {0};
  if (n == 1 && mqr_str_eq(s[0], MQR_STR("session"))) {
    mqr__api_session(c, r, a);
    allow = "GET, HEAD, POST, DELETE";
  } else if (n == 1 && mqr_str_eq(s[0], MQR_STR("broker"))) {
    if (get) mqr__api_broker(c, a);
    allow = "GET, HEAD";
  } else if (n == 1 && (addresses || queues)) {
    if (get) listing(c, r, a, queues);
    if (post) addresses ? create_address(c, r, body, a) : create_queue(c, r, body, a);
    allow = "GET, HEAD, POST";
  } else if (n == 2 && addresses) {
    if (get) get_address(c, r, s[1], a);
    if (del) {
      char force[8] = "";
      mqr__api_param(r->query, "force", force, sizeof force);
      if (!mqr__may(c->b, r->who, MQR_PERM_MANAGE, s[1], &err)) {
        mqr__api_error(a, MQR_EPERM, err.message);
      } else {
        int rc = mqr_broker_delete_address(c->b, s[1], strcmp(force, "true") == 0, &err);
        mqr__api_done(a, rc, &err, json_pack("{s:o}", "deleted", mqr__api_str(s[1])));
      }
    }
    allow = "GET, HEAD, DELETE";
  } else if (n == 2 && queues) {
    if (get) get_queue(c, r, s[1], a);
    if (del && queue_for(c->b, r->who, s[1], true, a) == 0) {
      int rc = mqr_broker_delete_queue(c->b, s[1], &err);
      mqr__api_done(a, rc, &err, json_pack("{s:o}", "deleted", mqr__api_str(s[1])));
    }
    allow = "GET, HEAD, DELETE";
  } else if (n == 3 && queues && mqr_str_eq(s[2], MQR_STR("messages"))) {
    if (get) browse(c, r, s[1], a);
    allow = "GET, HEAD";
  } else if (n == 3 && queues && mqr_str_eq(s[2], MQR_STR("consumers"))) {
    if (get) consumers(c, r, s[1], a);
    allow = "GET, HEAD";
  } else if (n == 3 && queues) {
    if (post) queue_action(c, r, s[1], s[2], body, a);
    allow = "POST";
  } else if (n == 1 && mqr_str_eq(s[0], MQR_STR("connections"))) {
    if (get) mqr__api_connections(c, r, a);
    allow = "GET, HEAD";
  } else if (n == 2 && mqr_str_eq(s[0], MQR_STR("connections"))) {
    if (del) mqr__api_close_connection(c, r, s[1], a);
    allow = "DELETE";
  } else {
    mqr__api_error(a, MQR_ENOTFOUND, "no such path (docs/management-api.md lists them)");
  }
  json_decref(body);
  if (a->status == 0) {
    mqr__api_error(a, MQR_EINVAL, "this path does not take that method");
    a->status = 405;
    a->allow = allow;
  }
  if (a->status >= 200 && a->status < 300 && (post || del)) {
    mqr__principal_t *who = r->who;
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): %s %.*s by %.*s", (long long)c->sess.id, c->peer,
             post ? "POST" : "DELETE", (int)(r->path.len > 300 ? 300 : r->path.len), r->path.ptr,
             who ? (int)mqr__principal_name(who).len : 9, who ? mqr__principal_name(who).ptr : "anonymous");
  }
}
