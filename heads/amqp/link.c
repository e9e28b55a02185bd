/* The AMQP head's links (amqp.h). A link the client sends on (the broker's receiver) names
 * in its target the address its messages go to (none: each message's `to`, the anonymous
 * relay); each transfer is a send through mqr__do_send, settled (accepted, or rejected
 * with the error's condition) once the core answered it, which for a durable message is
 * once the journal has it. A link the client receives on (the broker's sender) is a
 * consumer of the address its source names, its link credit the consumer's; what the
 * client says of each delivery (accepted, released, modified, rejected) is an ack or the
 * delivery given back. The capabilities `queue` and `topic` choose ANYCAST and MULTICAST,
 * as Artemis reads them, after the listener's prefixes. */
#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/disposition.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <string.h>
#include <time.h>

#include "amqp.h"

#define SELECTOR "apache.org:selector-filter:string"
#define NO_LOCAL "apache.org:no-local-filter:list"

/* The credit a sending client is given, topped up when it falls to half. */
#define WINDOW 1000

static void top_up(mqr__conn_t *c, pn_link_t *l);

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The AMQP error condition an mqr error code is told as. */
static const char *condition_of(int rc) {
  switch (rc) {
  case MQR_EPERM:
  case MQR_EAUTH: return "amqp:unauthorized-access";
  case MQR_ENOADDR:
  case MQR_ENOQUEUE:
  case MQR_ENOTFOUND: return "amqp:not-found";
  case MQR_ENOMEM:
  case MQR_ELIMIT:
  case MQR_EFULL: return "amqp:resource-limit-exceeded";
  case MQR_EINVAL:
  case MQR_ESYNTAX: return "amqp:invalid-field";
  case MQR_EBADDATA: return "amqp:decode-error";
  case MQR_EQUEUEINUSE: /* (a subscription with consumers attached with another selector: Artemis's) */
  case MQR_EQUEUEEXISTS: return "amqp:illegal-state";
  default: return "amqp:internal-error";
  }
}

/* Whether the terminus's capabilities (a symbol, or an array of them) hold cap. */
static bool has_capability(pn_terminus_t *t, const char *cap) {
  pn_data_t *d = pn_terminus_capabilities(t);
  size_t n = strlen(cap);
  pn_data_rewind(d);
  if (!pn_data_next(d)) return false;
  if (pn_data_type(d) == PN_SYMBOL) {
    pn_bytes_t s = pn_data_get_symbol(d);
    return s.size == n && memcmp(s.start, cap, n) == 0;
  }
  if (pn_data_type(d) != PN_ARRAY && pn_data_type(d) != PN_LIST) return false;
  bool found = false;
  pn_data_enter(d);
  while (!found && pn_data_next(d)) {
    if (pn_data_type(d) != PN_SYMBOL) continue;
    pn_bytes_t s = pn_data_get_symbol(d);
    found = s.size == n && memcmp(s.start, cap, n) == 0;
  }
  pn_data_exit(d);
  return found;
}

static int routing_of(pn_terminus_t *t) {
  return has_capability(t, "queue") ? MQR_ANYCAST : has_capability(t, "topic") ? MQR_MULTICAST : MQR_ROUTING_NONE;
}

/* The source's filters: its selector (the apache.org:selector-filter:string filter, by
 * name or by its code 0x468C00000004; empty: none) and whether it asks for no-local
 * (apache.org:no-local-filter:list, 0x468C00000003). */
static mqr_str_t filters_of(pn_terminus_t *t, bool *no_local) {
  pn_data_t *d = pn_terminus_filter(t);
  mqr_str_t sel = mqr_str_n("", 0);
  *no_local = false;
  pn_data_rewind(d);
  if (!pn_data_next(d) || pn_data_type(d) != PN_MAP) return sel;
  pn_data_enter(d);
  while (pn_data_next(d) && pn_data_next(d)) { /* key, then value */
    if (pn_data_type(d) != PN_DESCRIBED) continue;
    pn_data_enter(d);
    bool selector = false, local = false;
    if (pn_data_next(d)) {
      if (pn_data_type(d) == PN_SYMBOL) {
        pn_bytes_t s = pn_data_get_symbol(d);
        selector = s.size == strlen(SELECTOR) && memcmp(s.start, SELECTOR, s.size) == 0;
        local = s.size == strlen(NO_LOCAL) && memcmp(s.start, NO_LOCAL, s.size) == 0;
      } else if (pn_data_type(d) == PN_ULONG) {
        selector = pn_data_get_ulong(d) == 0x0000468C00000004ull;
        local = pn_data_get_ulong(d) == 0x0000468C00000003ull;
      }
    }
    if (selector && pn_data_next(d) && pn_data_type(d) == PN_STRING) {
      pn_bytes_t s = pn_data_get_string(d);
      sel = mqr_str_n(s.start, s.size);
    }
    *no_local |= local;
    pn_data_exit(d);
  }
  pn_data_exit(d);
  return sel;
}

/* The selector with no-local's condition, as Artemis adds it (the sending connection's
 * container id, CONNECTION_ID, differs), into buf: the selector, or an empty view when it
 * does not fit. */
static mqr_str_t with_no_local(mqr_str_t sel, const char *container, char *buf, size_t cap) {
  size_t k = 0;
  int n = sel.len ? snprintf(buf, cap, "(%.*s) AND ", (int)sel.len, sel.ptr) : 0;
  if (n < 0 || (size_t)n >= cap) return mqr_str_n("", 0);
  k = (size_t)n;
  n = snprintf(buf + k, cap - k, "(" CONNECTION_ID " IS NULL OR " CONNECTION_ID " <> '");
  if (n < 0 || (size_t)n >= cap - k) return mqr_str_n("", 0);
  k += (size_t)n;
  for (const char *p = container ? container : ""; *p && k + 4 < cap; p++) {
    if (*p == '\'') buf[k++] = '\''; /* (a quote doubled) */
    buf[k++] = *p;
  }
  if (k + 3 >= cap) return mqr_str_n("", 0);
  buf[k++] = '\'', buf[k++] = ')';
  return mqr_str_n(buf, k);
}

/* A link refused: attached with no terminus, then detached with the condition. */
static void refuse(pn_link_t *l, int rc, const char *text) {
  pn_condition_t *cond = pn_link_condition(l);
  pn_condition_set_name(cond, condition_of(rc));
  pn_condition_set_description(cond, text);
  pn_link_open(l);
  pn_link_close(l);
}

char *mqr__amqp_copy_str(const char *s) {
  size_t n = strlen(s);
  char *p = mqr_malloc(n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

/* ---- the consumer of a link the client receives on ------------------------------------------------ */

static bool ready(const mqr_broker_consumer_t *k) {
  const amqp_link_t *lk = mqr__consumer_ctx(k);
  return lk->link && pn_link_credit(lk->link) > 0 && !mqr__conn_paused(lk->c);
}

static int deliver(mqr_broker_consumer_t *k, mqr__entry_t *e) {
  amqp_link_t *lk = mqr__consumer_ctx(k);
  amqp_t *a = lk->c->hs;
  mqr_str_t body;
  int64_t len = mqr__amqp_to_message(a, e->msg, e->delivery_count, wall_ms(), &body);
  if (len == MQR_ENOMEM) return MQR_ENOMEM;
  if (len < 0) return MQR_ELIMIT;
  int64_t tag = e->delivery;
  pn_delivery_t *d = pn_delivery(lk->link, pn_dtag((const char *)&tag, sizeof tag));
  if (d == NULL) return MQR_ENOMEM;
  pn_link_send(lk->link, (const char *)a->buf, (size_t)len);
  if (body.len) pn_link_send(lk->link, body.ptr, body.len);
  pn_link_advance(lk->link);
  if (lk->credit > 0) lk->credit--;
  if (lk->settled) { /* at most once: gone as it is written */
    pn_delivery_settle(d);
    mqr_broker_ack(k, e->delivery, false);
  }
  mqr__amqp_flush(lk->c);
  return 0;
}

static void refused(mqr_broker_consumer_t *k, const mqr__entry_t *e) { (void)k, (void)e; }

static const mqr__consumer_ops_t consumer_ops = {ready, deliver, refused};

/* The consumer's credit made the link's again (after a release took it to 0, or a flow). */
static void credit_sync(amqp_link_t *lk) {
  int credit = pn_link_credit(lk->link);
  if (credit > lk->credit) {
    uint32_t more = (uint32_t)(credit - lk->credit);
    lk->credit = credit;
    mqr_broker_credit(lk->k, more);
  } else {
    mqr__consumer_ready(lk->k);
  }
}

/* ---- attaching -------------------------------------------------------------------------------------- */

/* A subscription queue's name, as Artemis names it from the client's container id and
 * the link's name: "container.link" ("link" alone for a global one, or without a
 * container id); a shared one's link name up to a '|', and ":shared-volatile" for one
 * that is not durable, ":global" for a global one. 0, or MQR_ELIMIT (too long). */
static int sub_name(char *buf, size_t cap, const char *container, const char *link, bool shared, bool global,
                    bool volatile_) {
  size_t n = strlen(link);
  const char *bar = shared ? strchr(link, '|') : NULL;
  if (bar) n = (size_t)(bar - link);
  int len = container && *container && !global ? snprintf(buf, cap, "%s.%.*s", container, (int)n, link)
                                               : snprintf(buf, cap, "%.*s", (int)n, link);
  if (len > 0 && (size_t)len < cap && shared && volatile_)
    len += snprintf(buf + len, cap - (size_t)len, ":shared-volatile");
  if (len > 0 && (size_t)len < cap && shared && global) len += snprintf(buf + len, cap - (size_t)len, ":global");
  return len > 0 && (size_t)len < cap ? 0 : MQR_ELIMIT;
}

/* A receiving link with no source address: an existing durable subscription of this
 * container looked up by the link's name (Qpid JMS attaches so to unsubscribe), plain,
 * shared, then global-shared. The queue's name in buf, or NULL. */
static mqr_queue_t *find_subscription(mqr__conn_t *c, pn_link_t *l, char *buf, size_t cap) {
  const char *container = pn_connection_remote_container(pn_session_connection(pn_link_session(l)));
  static const bool forms[3][2] = {{false, false}, {true, false}, {true, true}}; /* shared, global */
  for (int i = 0; i < 3; i++) {
    if (sub_name(buf, cap, container, pn_link_name(l), forms[i][0], forms[i][1], false) != 0) continue;
    mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(c->b), mqr_str(buf));
    if (q && mqr_queue_routing_type(q) == MQR_MULTICAST) return q;
  }
  return NULL;
}

static void attach_sender(mqr__conn_t *c, pn_link_t *l, amqp_link_t *lk) {
  amqp_t *a = c->hs;
  pn_terminus_t *src = pn_link_remote_source(l);
  const char *name = pn_terminus_get_address(src);
  const char *container = pn_connection_remote_container(pn_session_connection(pn_link_session(l)));
  char qbuf[600], dyn[64];
  mqr_str_t addr, queue = mqr_str_n("", 0);
  int rt = MQR_ROUTING_NONE;
  unsigned flags = 0;
  bool durable = false, found = false;
  mqr_str_t found_filter = mqr_str_n("", 0);
  if (pn_terminus_is_dynamic(src)) { /* a temporary queue of its own (request/reply), gone with the link */
    snprintf(dyn, sizeof dyn, "amqp.dynamic.%lld.%lld", (long long)c->sess.id, (long long)++a->next_dynamic);
    addr = queue = mqr_str(dyn);
    rt = MQR_ANYCAST, flags = MQR__SUB_TEMPORARY;
  } else if (name == NULL || *name == 0) {
    mqr_queue_t *q = find_subscription(c, l, qbuf, sizeof qbuf);
    if (q == NULL) {
      refuse(l, MQR_ENOQUEUE, "no durable subscription of this link's name, and no source address");
      return;
    }
    addr = mqr_address_name(mqr_queue_address(q)), queue = mqr_str(qbuf);
    rt = MQR_MULTICAST, durable = found = true;
    found_filter = mqr_queue_filter(q); /* (attached as it is, not made anew without its selector) */
  } else {
    addr = mqr_str(name);
    mqr_prefixes_strip(&c->l->cfg->prefixes, &addr, &rt);
    int caps = routing_of(src);
    if (caps != MQR_ROUTING_NONE) rt = caps;
    bool fqqn = false; /* address::queue: the queue named */
    for (size_t i = 0; i + 1 < addr.len && !fqqn; i++) fqqn = addr.ptr[i] == ':' && addr.ptr[i + 1] == ':';
    if (rt == MQR_ROUTING_NONE && !fqqn) rt = mqr__implied_routing_type(c->b, addr);
    if (rt == MQR_MULTICAST && !fqqn) {
      bool shared = has_capability(src, "shared"), global = has_capability(src, "global");
      durable = pn_terminus_get_durability(src) != PN_NONDURABLE;
      if ((durable || shared) &&
          sub_name(qbuf, sizeof qbuf, container, pn_link_name(l), shared, global, !durable) != 0) {
        refuse(l, MQR_ELIMIT, "the container id and link name are too long for a subscription's name");
        return;
      }
      if (durable || shared) queue = mqr_str(qbuf);
      if (!durable && shared) flags = MQR__SUB_SHARED; /* (goes once its last consumer has) */
    }
  }
  mqr_error_t err;
  bool no_local;
  char nlbuf[1024];
  mqr_str_t sel = found ? found_filter : filters_of(src, &no_local);
  if (found) no_local = false;
  if (no_local && (sel = with_no_local(sel, container, nlbuf, sizeof nlbuf)).len == 0) {
    refuse(l, MQR_ELIMIT, "the selector and container id are too long for no-local");
    return;
  }
  int rc = mqr__session_subscribe(&c->sess, addr, rt, queue, flags | MQR__SUB_FILTER | MQR__SUB_RENEW, sel, 0,
                                  ++a->next_sub, &consumer_ops, lk, &lk->k, &err);
  if (rc == 0 && durable && (lk->subscription = mqr_malloc(queue.len + 1)) != NULL) { /* (a close unsubscribes) */
    memcpy(lk->subscription, queue.ptr, queue.len);
    lk->subscription[queue.len] = 0;
  }
  if (rc) {
    refuse(l, rc, err.message);
    return;
  }
  pn_terminus_copy(pn_link_source(l), src);
  pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
  if (queue.len && (flags & MQR__SUB_TEMPORARY)) pn_terminus_set_address(pn_link_source(l), dyn);
  if (name == NULL || *name == 0) { /* (the subscription found: its address, as a durable topic) */
    char ab[512];
    snprintf(ab, sizeof ab, "%.*s", (int)addr.len, addr.ptr);
    pn_terminus_set_type(pn_link_source(l), PN_SOURCE); /* (the client's was none: a null source) */
    pn_terminus_set_address(pn_link_source(l), ab);
    pn_terminus_set_durability(pn_link_source(l), PN_DELIVERIES);
    pn_terminus_set_expiry_policy(pn_link_source(l), PN_EXPIRE_NEVER);
  }
  lk->settled = pn_link_remote_snd_settle_mode(l) == PN_SND_SETTLED;
  pn_link_set_snd_settle_mode(l, lk->settled ? PN_SND_SETTLED : PN_SND_UNSETTLED);
  pn_link_open(l);
  mqr__consumer_start(lk->k);
  credit_sync(lk);
}

static void attach_receiver(mqr__conn_t *c, pn_link_t *l, amqp_link_t *lk) {
  pn_terminus_t *tgt = pn_link_remote_target(l);
  const char *name = pn_terminus_get_address(tgt);
  if (name && *name) {
    if ((lk->address = mqr__amqp_copy_str(name)) == NULL) {
      refuse(l, MQR_ENOMEM, "out of memory");
      return;
    }
    mqr_str_t addr = mqr_str(name);
    int rt = MQR_ROUTING_NONE;
    mqr_prefixes_strip(&c->l->cfg->prefixes, &addr, &rt);
    mqr_error_t err; /* (the management address takes manage, as Artemis checks it) */
    if (!mqr__session_may(&c->sess, mqr__amqp_is_management(addr) ? MQR_PERM_MANAGE : MQR_PERM_SEND, addr, &err)) {
      refuse(l, MQR_EPERM, err.message);
      return;
    }
  }
  lk->routing_type = routing_of(tgt);
  pn_link_set_snd_settle_mode(l, pn_link_remote_snd_settle_mode(l)); /* (as the client sends) */
  pn_link_set_max_message_size(l, MQR__AMQP_MAX_MESSAGE);
  pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
  pn_terminus_copy(pn_link_target(l), tgt);
  pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
  pn_link_open(l);
  top_up(c, l);
}

void mqr__amqp_link_open(mqr__conn_t *c, pn_link_t *l) {
  amqp_t *a = c->hs;
  if (a->n_links >= MQR__AMQP_MAX_LINKS) {
    refuse(l, MQR_ELIMIT, "a connection has at most " MQR__AMQP_STR(MQR__AMQP_MAX_LINKS) " links");
    return;
  }
  amqp_link_t *lk = mqr_calloc(1, sizeof *lk);
  if (lk == NULL) {
    refuse(l, MQR_ENOMEM, "out of memory");
    return;
  }
  lk->link = l, lk->c = c;
  lk->next = a->links, a->links = lk;
  a->n_links++;
  pn_link_set_context(l, lk);
  if (pn_link_is_sender(l)) {
    attach_sender(c, l, lk);
  } else if (pn_terminus_get_type(pn_link_remote_target(l)) == PN_COORDINATOR) { /* transactions (txn.c) */
    lk->coordinator = true;
    pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
    pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
    pn_link_open(l);
    top_up(c, l);
  } else {
    attach_receiver(c, l, lk);
  }
}

static void link_free(amqp_link_t *lk) {
  mqr_free(lk->address);
  mqr_free(lk->subscription);
  mqr_free(lk);
}

/* The head's state of a link that goes: its consumer (what it had not settled back to the
 * queue), its transfers' answers (they go nowhere now). */
static void link_drop(mqr__conn_t *c, pn_link_t *l) {
  amqp_t *a = c->hs;
  amqp_link_t *lk = pn_link_get_context(l);
  if (lk == NULL) return;
  for (uint32_t i = 0; i < a->p_n; i++) {
    amqp_pending_t *p = &a->pending[(a->p_head + i) % a->p_cap];
    if (p->d && pn_delivery_link(p->d) == l) p->d = NULL;
  }
  if (lk->k) {
    mqr__amqp_txn_forget(c, lk->k);
    mqr__session_unsubscribe(&c->sess, lk->k);
  }
  for (amqp_link_t **pp = &a->links; *pp; pp = &(*pp)->next)
    if (*pp == lk) {
      *pp = lk->next;
      break;
    }
  a->n_links--;
  pn_link_set_context(l, NULL);
  link_free(lk);
}

/* A durable subscription's link closed (not detached): the subscription goes, as a JMS
 * unsubscribe, when no other consumer has it (its queue deleted, with what it held). */
static void unsubscribe(mqr__conn_t *c, const char *name) {
  mqr_queue_t *q = mqr_router_find_queue(mqr_broker_router(c->b), mqr_str(name));
  if (q == NULL || mqr_queue_consumer_count(q) > 0) return;
  mqr_error_t err;
  if (!mqr__session_may(&c->sess, MQR_PERM_DELETE_DURABLE_QUEUE, mqr_address_name(mqr_queue_address(q)), &err) ||
      mqr_broker_delete_queue(c->b, mqr_str(name), &err) != 0)
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): AMQP subscription '%s' not removed: %s", (long long)c->sess.id,
             c->peer, name, err.message);
}

void mqr__amqp_link_closed(mqr__conn_t *c, pn_link_t *l, bool closed) {
  amqp_link_t *lk = pn_link_get_context(l);
  char *sub = lk ? lk->subscription : NULL;
  if (lk) lk->subscription = NULL;
  link_drop(c, l);
  if (sub && closed) unsubscribe(c, sub);
  mqr_free(sub);
  if (pn_link_state(l) & PN_LOCAL_ACTIVE) {
    if (closed)
      pn_link_close(l);
    else
      pn_link_detach(l);
  }
  pn_link_free(l); /* (Proton writes the detach first) */
}

void mqr__amqp_session_closed(mqr__conn_t *c, pn_session_t *s) {
  amqp_t *a = c->hs;
  for (amqp_link_t *lk = a->links, *next; lk; lk = next) { /* (its links go with it) */
    next = lk->next;
    if (pn_link_session(lk->link) == s) link_drop(c, lk->link);
  }
  pn_session_close(s);
  pn_session_free(s);
}

void mqr__amqp_links_free(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  while (a->links) {
    amqp_link_t *lk = a->links;
    a->links = lk->next;
    if (lk->link) pn_link_set_context(lk->link, NULL);
    link_free(lk);
  }
}

void mqr__amqp_link_flow(mqr__conn_t *c, pn_link_t *l) {
  (void)c;
  amqp_link_t *lk = pn_link_get_context(l);
  if (lk == NULL || lk->k == NULL || !pn_link_is_sender(l)) return;
  credit_sync(lk);
  if (pn_link_get_drain(l) && pn_link_credit(l) > 0) pn_link_drained(l); /* (nothing more to send now) */
}

/* ---- transfers in: sends ------------------------------------------------------------------------ */

void mqr__amqp_settle_in(pn_delivery_t *d, int status, const char *text) {
  if (status == 0) {
    pn_delivery_update(d, PN_ACCEPTED);
  } else {
    pn_condition_t *cond = pn_disposition_condition(pn_delivery_local(d));
    pn_condition_set_name(cond, condition_of(status));
    pn_condition_set_description(cond, text);
    pn_delivery_update(d, PN_REJECTED);
  }
  pn_delivery_settle(d);
}

static bool pend(amqp_t *a, int64_t token, pn_delivery_t *d, amqp_txn_t *txn) {
  if (a->p_n == a->p_cap) {
    uint32_t cap = a->p_cap ? a->p_cap * 2 : 64;
    amqp_pending_t *p = mqr_malloc(cap * sizeof *p);
    if (p == NULL) return false;
    for (uint32_t i = 0; i < a->p_n; i++) p[i] = a->pending[(a->p_head + i) % a->p_cap];
    mqr_free(a->pending);
    a->pending = p, a->p_cap = cap, a->p_head = 0;
  }
  a->pending[(a->p_head + a->p_n++) % a->p_cap] = (amqp_pending_t){token, d, txn};
  return true;
}

void mqr__amqp_sent(mqr__conn_t *c, int64_t token, int status, const mqr_error_t *err) {
  amqp_t *a = c->hs;
  if (token == 0 || a->p_n == 0 || a->pending[a->p_head].token != token) return;
  amqp_pending_t p = a->pending[a->p_head];
  a->p_head = (a->p_head + 1) % a->p_cap, a->p_n--;
  if (p.txn) { /* a commit's send; the last settles the discharge */
    p.txn->failed |= status != 0;
    if (p.d) mqr__amqp_txn_committed(c, p.txn, p.d);
  } else if (p.d) {
    mqr__amqp_settle_in(p.d, status, err ? err->message : mqr_strerror(status));
  }
}

/* The link the client sends on given credit again when it has used half (none while its
 * connection's producer waits on a full BLOCK address: mqr__amqp_unblocked tops it up). */
static void top_up(mqr__conn_t *c, pn_link_t *l) {
  if (c->sess.producer.blocked_on == 0 && pn_link_credit(l) < WINDOW / 2) pn_link_flow(l, WINDOW - pn_link_credit(l));
}

void mqr__amqp_unblocked(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  for (amqp_link_t *lk = a ? a->links : NULL; lk; lk = lk->next)
    if (pn_link_is_receiver(lk->link) && (pn_link_state(lk->link) & PN_LOCAL_ACTIVE)) top_up(c, lk->link);
  mqr__amqp_flush(c);
}

/* A send refused with no one to tell: logged. */
static void dropped(mqr__conn_t *c, const char *why) {
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): an AMQP transfer sent settled was dropped: %s",
           (long long)c->sess.id, c->peer, why);
}

/* The decoded message in, to `to`, through the send path (rc, as it came, and err): true
 * when the core answers later (head.c's sent), false when *rc is the answer. */
static bool route(mqr__conn_t *c, amqp_in_t *in, mqr_str_t to, int routing_type, pn_delivery_t *d, amqp_txn_t *txn,
                  int *rc, mqr_error_t *err) {
  amqp_t *a = c->hs;
  mqr_tail_t tail;
  mqr__send_t s;
  if (*rc == 0 && a->container.len) { /* (what no-local compares) */
    in->keys[in->m.n_properties] = MQR_STR(CONNECTION_ID);
    in->values[in->m.n_properties++] = mqr_value_string(a->container);
  }
  if (*rc == 0) {
    in->m.address = to;
    in->m.routing_type = routing_type;
    *rc = mqr__send_from_message(&in->m, &tail, &s, err);
  }
  int64_t token = 0;
  if (*rc == 0 && (d || txn) && !pend(a, token = ++a->next_token, d, txn))
    *rc = mqr_error_set(err, MQR_ENOMEM, "out of memory");
  if (*rc == 0) {
    s.prefixes = &c->l->cfg->prefixes;
    s.producer = &c->sess.producer;
    s.who = c->sess.who;
    s.token = token;
    struct mqr__acct_s *blocked = NULL;
    mqr_broker_receipt_t r;
    *rc = mqr__do_send(c->b, &s, &r, &blocked, err);
    if (blocked) mqr__producer_block(&c->sess.producer, blocked);
    if (*rc == MQR__PENDING) return true;
    if (token) a->p_n--; /* answered now: the pending one last is this one */
  }
  return false;
}

void mqr__amqp_send(mqr__conn_t *c, const char *address, int routing_type, const uint8_t *bytes, size_t len,
                    pn_delivery_t *d, amqp_txn_t *txn) {
  amqp_t *a = c->hs;
  mqr_error_t err;
  amqp_in_t in = {.now_ms = wall_ms()};
  int rc = mqr__amqp_decode(a, bytes, len, &in, &err);
  const char *name = address ? address : pn_message_get_address(a->msg);
  mqr_str_t to = mqr_str(name ? name : "");
  if (rc == 0 && to.len == 0)
    rc = mqr_error_set(&err, MQR_EINVAL, "a message on an anonymous link names its address in `to`");
  if (rc == 0 && mqr__amqp_is_management(to))
    rc = mqr__amqp_manage(c, &in, &err); /* carried out, not routed (manage.c) */
  else if (route(c, &in, to, routing_type, d, txn, &rc, &err))
    return;  /* answered at head.c's sent */
  if (txn) { /* (a commit's send) */
    txn->failed |= rc != 0;
    if (d) mqr__amqp_txn_committed(c, txn, d);
  } else if (d) {
    mqr__amqp_settle_in(d, rc, rc ? err.message : "");
  } else if (rc) {
    dropped(c, err.message);
  }
}

/* The client's link closed by the broker with condition name (text: why). */
static void detach(mqr__conn_t *c, pn_link_t *l, const char *name, const char *text) {
  pn_condition_t *cond = pn_link_condition(l);
  pn_condition_set_name(cond, name);
  pn_condition_set_description(cond, text);
  link_drop(c, l);
  pn_link_close(l);
  pn_link_free(l);
}

static void receive(mqr__conn_t *c, pn_link_t *l, pn_delivery_t *d) {
  amqp_t *a = c->hs;
  amqp_link_t *lk = pn_link_get_context(l);
  if (pn_delivery_aborted(d)) {
    pn_delivery_settle(d);
    return;
  }
  if (pn_delivery_partial(d) && pn_delivery_pending(d) > MQR__AMQP_MAX_MESSAGE) { /* (Proton would keep it all) */
    detach(c, l, "amqp:link:message-size-exceeded",
           "a message is at most " MQR__AMQP_STR(MQR__AMQP_MAX_MESSAGE) " bytes");
    return;
  }
  if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return; /* (the rest to come: Proton keeps it) */
  if (pn_link_credit(l) < 1) { /* a transfer past the credit given (Proton counts, and lets it in) */
    detach(c, l, "amqp:link:transfer-limit-exceeded", "a transfer came without link credit");
    return;
  }
  size_t n = pn_delivery_pending(d);
  bool settled = pn_delivery_settled(d); /* pre-settled by the client: at most once, no outcome */
  if (mqr__amqp_grow(a, n + 1)) {
    pn_link_advance(l);
    mqr__amqp_settle_in(d, MQR_ENOMEM, "out of memory");
    return;
  }
  ssize_t got = pn_link_recv(l, (char *)a->buf, n);
  pn_link_advance(l);
  top_up(c, l);
  if (got < 0) got = 0;
  if (lk && lk->coordinator) {
    mqr__amqp_txn_control(c, d, a->buf, (size_t)got);
    return;
  }
  if (lk && mqr__amqp_txn_transfer(c, lk, d, a->buf, (size_t)got)) return; /* (held until its commit) */
  if (settled) { /* (the client asked for no outcome: the bytes are ours) */
    pn_delivery_settle(d);
    d = NULL;
  }
  mqr__amqp_send(c, lk ? lk->address : NULL, lk ? lk->routing_type : MQR_ROUTING_NONE, a->buf, (size_t)got, d, NULL);
}

/* ---- dispositions of deliveries out ------------------------------------------------------------- */

static void outcome(mqr__conn_t *c, pn_link_t *l, pn_delivery_t *d) {
  amqp_link_t *lk = pn_link_get_context(l);
  if (!pn_delivery_updated(d) && !pn_delivery_settled(d)) return;
  pn_delivery_tag_t tag = pn_delivery_tag(d);
  int64_t delivery = 0;
  if (tag.size == sizeof delivery) memcpy(&delivery, tag.start, sizeof delivery);
  if (lk && lk->k && delivery && pn_delivery_remote_state(d) == MQR__AMQP_TXN_STATE) {
    if (mqr__amqp_txn_outcome(c, lk, d, delivery)) return; /* (applied, and settled, at its discharge) */
    if (mqr__consumer_release(lk->k, delivery)) lk->credit = 0, credit_sync(lk); /* (no such transaction: back) */
    pn_delivery_settle(d);
    return;
  }
  if (lk && lk->k && delivery && !lk->settled) {
    pn_disposition_t *disp = pn_delivery_remote(d);
    switch (pn_delivery_remote_state(d)) {
    case PN_RELEASED: /* back to the queue, uncounted */
      if (mqr__consumer_release(lk->k, delivery)) lk->credit = 0, credit_sync(lk);
      break;
    case PN_MODIFIED: { /* back, counted when delivery-failed; with undeliverable-here, never to this link again */
      bool failed = pn_disposition_is_failed(disp);
      uint32_t back = pn_disposition_is_undeliverable(disp) ? mqr__consumer_refuse(lk->k, delivery, failed)
                      : failed                              ? mqr__consumer_nack(lk->k, delivery, false)
                                                            : mqr__consumer_release(lk->k, delivery);
      if (back && !failed) lk->credit = 0, credit_sync(lk); /* (a release took its credit to 0) */
      break;
    }
    case PN_REJECTED: mqr__consumer_reject(lk->k, delivery); break; /* (to the dead letters, as Artemis) */
    default: mqr_broker_ack(lk->k, delivery, false); break;         /* accepted (or settled with no outcome) */
    }
  }
  pn_delivery_settle(d);
}

void mqr__amqp_delivery(mqr__conn_t *c, pn_delivery_t *d) {
  pn_link_t *l = pn_delivery_link(d);
  if (pn_link_is_receiver(l))
    receive(c, l, d);
  else
    outcome(c, l, d);
}
