/* The AMQP 1.0 head's connection (amqp.h): Proton's connection driver fed with the bytes
 * read and drained into the connection's writes, SASL as a Proton SASL plugin that asks
 * the broker's users, the connection's and its sessions' events, the idle timeout. */
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/event.h>
#include <proton/sasl.h>
#include <proton/sasl_plugin.h>
#include <proton/session.h>
#include <proton/transport.h>
#include <stdio.h>
#include <string.h>

#include "amqp.h"

extern const mqr__head_t mqr__amqp_head;

/* ---- SASL: ANONYMOUS, PLAIN over TLS, EXTERNAL, against the broker's users ------------------- */

static const char *sasl_list(pn_transport_t *t) {
  mqr__conn_t *c = pnx_sasl_get_context(t);
  bool tls = mqr__conn_secure(c), cert = mqr__conn_identity(c) != NULL;
  return tls ? (cert ? "EXTERNAL PLAIN ANONYMOUS" : "PLAIN ANONYMOUS") : (cert ? "EXTERNAL ANONYMOUS" : "ANONYMOUS");
}

static bool sasl_init_server(pn_transport_t *t) {
  pnx_sasl_set_desired_state(t, SASL_POSTED_MECHANISMS);
  return true;
}

/* The outcome, once the broker answered: the client told, and the connection read on. */
static void sasl_outcome(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  pn_transport_t *t = a->driver.transport;
  for (char *p = a->user; *p; p++) /* (a name from the wire, for the log: printable) */
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  if (a->auth_status == 0)
    pnx_sasl_set_succeeded(t, a->user, NULL);
  else {
    pnx_sasl_set_failed(t);
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): AMQP SASL authentication of '%s' failed", (long long)c->sess.id,
             c->peer, a->user);
  }
  pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
}

static void auth_answered(void *ctx, int status, mqr__principal_t *who) {
  mqr__conn_t *c = ctx;
  amqp_t *a = c->hs;
  a->auth = NULL;
  a->auth_done = true;
  a->auth_status = status;
  a->who = who;
  sasl_outcome(c);
  mqr__conn_hold(c, false);
  mqr__amqp_pump(c);
}

static void sasl_init(pn_transport_t *t, const char *mech, const pn_bytes_t *recv) {
  mqr__conn_t *c = pnx_sasl_get_context(t);
  amqp_t *a = c->hs;
  int rc;
  mqr__principal_t *who = NULL;
  if (mech == NULL) mech = "";                             /* (a sasl-init without one) */
  if (strcmp(mech, "PLAIN") == 0 && mqr__conn_secure(c)) { /* authzid NUL user NUL password */
    const char *p = recv->start, *end = p + recv->size, *u = p ? memchr(p, 0, recv->size) : NULL, *pw = NULL;
    if (u) pw = memchr(u + 1, 0, (size_t)(end - u - 1));
    if (u == NULL || pw == NULL || pw - u - 1 == 0) {
      snprintf(a->user, sizeof a->user, "(malformed PLAIN)");
      a->auth_status = MQR_EAUTH;
      sasl_outcome(c);
      return;
    }
    snprintf(a->user, sizeof a->user, "%.*s", (int)(pw - u - 1), u + 1);
    rc = mqr__authenticate(c->b, mqr_str_n(u + 1, (size_t)(pw - u - 1)), mqr_str_n(pw + 1, (size_t)(end - pw - 1)),
                           c->peer, auth_answered, c, &who, &a->auth);
    if (rc == MQR__PENDING) { /* the outcome waits; nothing more is read meanwhile */
      mqr__conn_hold(c, true);
      return;
    }
  } else if (strcmp(mech, "EXTERNAL") == 0 && mqr__conn_identity(c)) {
    snprintf(a->user, sizeof a->user, "%s", mqr__conn_identity(c));
    rc = mqr__authenticate_certificate(c->b, a->user, c->peer, &who);
  } else if (strcmp(mech, "ANONYMOUS") == 0) {
    snprintf(a->user, sizeof a->user, "anonymous");
    rc = mqr__authenticate(c->b, mqr_str_n("", 0), mqr_str_n("", 0), c->peer, auth_answered, c, &who, &a->auth);
  } else {
    snprintf(a->user, sizeof a->user, "(mechanism %.32s)", mech);
    rc = MQR_EAUTH;
  }
  a->auth_done = true;
  a->auth_status = rc;
  a->who = who;
  sasl_outcome(c);
}

static void sasl_noop(pn_transport_t *t) { (void)t; }
static bool sasl_false(pn_transport_t *t) { return (void)t, false; }
static void sasl_bytes(pn_transport_t *t, const pn_bytes_t *b) { (void)t, (void)b; }
static bool sasl_mechs(pn_transport_t *t, const char *m) { return (void)t, (void)m, false; }
static ssize_t sasl_max(pn_transport_t *t) { return (void)t, 0; }
static ssize_t sasl_code(pn_transport_t *t, pn_bytes_t in, pn_bytes_t *out) { return (void)t, (void)in, (void)out, 0; }

static const pnx_sasl_implementation sasl_impl = {sasl_noop,  sasl_list,  sasl_init_server, sasl_false, sasl_noop,
                                                  sasl_init,  sasl_bytes, sasl_mechs,       sasl_bytes, sasl_bytes,
                                                  sasl_false, sasl_max,   sasl_code,        sasl_code};

/* ---- the driver ------------------------------------------------------------------------------ */

/* The transport's error, logged once the connection ends. */
static void log_condition(mqr__conn_t *c, pn_condition_t *cond, const char *what) {
  if (cond && pn_condition_is_set(cond))
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): AMQP %s: %s: %s", (long long)c->sess.id, c->peer, what,
             pn_condition_get_name(cond) ? pn_condition_get_name(cond) : "?",
             pn_condition_get_description(cond) ? pn_condition_get_description(cond) : "");
}

/* The client's Open: who it is (SASL's outcome, or an anonymous client that did not use
 * SASL), then the broker's Open. */
static void on_open(mqr__conn_t *c, pn_connection_t *pc) {
  amqp_t *a = c->hs;
  const char *container = pn_connection_remote_container(pc);
  a->container = mqr_str(container ? container : "");
  if (!a->auth_done || a->auth_status != 0 || a->who == NULL) {
    /* no SASL layer: an anonymous client, if the broker takes them (and never one whose
     * SASL failed: Proton does not open it, and it is not taken for anyone here either) */
    mqr__principal_t *who = NULL;
    mqr__auth_t *none; /* (anonymous: answered now) */
    int rc = a->auth_done
                 ? MQR_EAUTH
                 : mqr__authenticate(c->b, mqr_str_n("", 0), mqr_str_n("", 0), c->peer, NULL, NULL, &who, &none);
    if (rc != 0) {
      pn_condition_t *cond = pn_connection_condition(pc);
      pn_condition_set_name(cond, "amqp:unauthorized-access");
      pn_condition_set_description(cond, a->auth_done ? "not authenticated"
                                                      : "anonymous clients are not allowed: authenticate with SASL");
      pn_connection_open(pc);
      pn_connection_close(pc);
      return;
    }
    a->auth_done = true, a->who = who;
  }
  mqr__session_set_principal(&c->sess, a->who);
  a->who = NULL;
  pn_connection_set_container(pc, "mqr");
  pn_connection_open(pc);
  a->opened = true;
  c->state = MQR__CONN_OPEN;
  mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): AMQP client '%s' connected as %s", (long long)c->sess.id,
           c->peer, pn_connection_remote_container(pc) ? pn_connection_remote_container(pc) : "",
           mqr__principal_name(mqr__session_principal(&c->sess)).ptr);
}

static void handle(mqr__conn_t *c, pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_CONNECTION_REMOTE_OPEN: on_open(c, pn_event_connection(e)); break;
  case PN_CONNECTION_REMOTE_CLOSE:
    log_condition(c, pn_connection_remote_condition(pn_event_connection(e)), "client closed");
    pn_connection_close(pn_event_connection(e));
    break;
  case PN_SESSION_REMOTE_OPEN: pn_session_open(pn_event_session(e)); break;
  case PN_SESSION_REMOTE_CLOSE: mqr__amqp_session_closed(c, pn_event_session(e)); break;
  case PN_LINK_REMOTE_OPEN: mqr__amqp_link_open(c, pn_event_link(e)); break;
  case PN_LINK_REMOTE_CLOSE: mqr__amqp_link_closed(c, pn_event_link(e), true); break;
  case PN_LINK_REMOTE_DETACH: mqr__amqp_link_closed(c, pn_event_link(e), false); break;
  case PN_LINK_FLOW: mqr__amqp_link_flow(c, pn_event_link(e)); break;
  case PN_DELIVERY: mqr__amqp_delivery(c, pn_event_delivery(e)); break;
  case PN_TRANSPORT_ERROR: log_condition(c, pn_transport_condition(pn_event_transport(e)), "error"); break;
  default: break;
  }
}

/* The driver's output into the connection's writes: false when the connection closed. */
static bool write_out(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  pn_connection_driver_t *d = &a->driver;
  for (pn_bytes_t out; (out = pn_connection_driver_write_buffer(d)).size > 0;) {
    size_t off;
    uint8_t *p = mqr__conn_reserve(c, out.size, &off);
    if (p == NULL) {
      mqr__conn_close(c, false);
      return false;
    }
    memcpy(p, out.start, out.size);
    if (mqr__conn_commit(c, off, out.size) != 0) {
      mqr__conn_close(c, false);
      return false;
    }
    pn_connection_driver_write_done(d, out.size);
  }
  if (pn_connection_driver_write_closed(d)) { /* (what was written still goes) */
    mqr__conn_close(c, true);
    return false;
  }
  return true;
}

void mqr__amqp_flush(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  if (a && a->open && c->state != MQR__CONN_CLOSING) (void)write_out(c);
}

void mqr__amqp_pump(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  if (a == NULL || !a->open || c->state == MQR__CONN_CLOSING) return;
  do {
    pn_event_t *e;
    while (c->state != MQR__CONN_CLOSING && (e = pn_connection_driver_next_event(&a->driver)) != NULL) handle(c, e);
    if (c->state == MQR__CONN_CLOSING || !write_out(c)) return;
  } while (pn_connection_driver_has_event(&a->driver));
}

/* ---- the head's ops -------------------------------------------------------------------------- */

static int amqp_open(mqr__conn_t *c) {
  amqp_t *a = mqr_calloc(1, sizeof *a);
  if (a == NULL) return MQR_ENOMEM;
  c->hs = a;
  pn_transport_t *t = pn_transport();
  if (t == NULL || (a->msg = pn_message()) == NULL) {
    if (t) pn_transport_free(t);
    return MQR_ENOMEM;
  }
  pn_transport_set_server(t);
  const mqr_listener_config_t *cfg = c->l->cfg;
  pn_transport_set_idle_timeout(t, cfg->idle_timeout_ms);
  pn_transport_set_channel_max(t, MQR__AMQP_MAX_SESSIONS); /* (a session flood: past it, Proton's framing error) */
  pn_transport_set_max_frame(t, (uint32_t)mqr_listener_option(cfg, mqr__amqp_head.def, 0));
  pn_sasl_t *sasl = pn_sasl(t);
  (void)sasl;
  pnx_sasl_set_implementation(t, &sasl_impl, c);
  /* a client that sends the AMQP header without SASL's first: taken as anonymous */
  pn_transport_require_auth(t, false);
  if (pn_connection_driver_init(&a->driver, NULL, t) != 0) return MQR_ENOMEM;
  a->open = true;
  return 0;
}

static int take(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  size_t have = c->rlen - c->rpos;
  if (have == 0) return 0;
  pn_rwbytes_t in = pn_connection_driver_read_buffer(&a->driver);
  if (in.size == 0) {
    mqr__amqp_pump(c);
    return 0;
  }
  size_t n = have < in.size ? have : in.size;
  memcpy(in.start, c->rbuf + c->rpos, n);
  c->rpos += n;
  pn_connection_driver_read_done(&a->driver, n);
  mqr__amqp_pump(c); /* (a may be gone after: the connection closed) */
  return c->state == MQR__CONN_CLOSING ? -1 : 1;
}

static size_t room(const mqr__conn_t *c) { return c->rcap * 2; }

static void tick(mqr__conn_t *c, uint64_t now) {
  amqp_t *a = c->hs;
  if (!a->open) return;
  (void)pn_transport_tick(a->driver.transport, (int64_t)now); /* (empty frames; a silent client's end) */
  mqr__amqp_pump(c);
}

static void fail(mqr__conn_t *c, int code, const char *text) {
  amqp_t *a = c->hs;
  if (a && a->open) {
    pn_connection_driver_errorf(&a->driver, code == MQR_ENOMEM ? "amqp:resource-limit-exceeded" : "amqp:internal-error",
                                "%s", text);
    pn_connection_driver_close(&a->driver);
    mqr__amqp_pump(c);
  }
  mqr__conn_close(c, true);
}

static void bye(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  if (a == NULL || !a->open || !a->opened) return;
  pn_connection_t *pc = a->driver.connection;
  pn_condition_t *cond = pn_connection_condition(pc);
  pn_condition_set_name(cond, "amqp:connection:forced");
  pn_condition_set_description(cond, "the broker is shutting down");
  pn_connection_close(pc);
  mqr__amqp_pump(c);
}

static void sent(mqr__conn_t *c, int64_t token, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  (void)r;
  mqr__amqp_sent(c, token, status, err);
  mqr__amqp_pump(c);
}

static void release(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  if (a == NULL) return;
  mqr__auth_cancel(a->auth);
  mqr__principal_release(a->who);
  mqr__amqp_links_free(c);
  mqr__amqp_txns_free(c);
  if (a->open) pn_connection_driver_destroy(&a->driver);
  if (a->msg) pn_message_free(a->msg);
  mqr_free(a->pending);
  mqr_free(a->buf);
  mqr_free(a->abuf);
  mqr_free(a);
  c->hs = NULL;
}

/* "AMQP" then the protocol id: 0 (AMQP), 3 (SASL) or 2 (TLS, which this head refuses). */
static int sniff(const uint8_t *p, size_t n) {
  static const char h[4] = {'A', 'M', 'Q', 'P'};
  return memcmp(p, h, n < 4 ? n : 4) != 0 ? 0 : n < 4 ? -1 : 1;
}

/* A listener's amqp block. */
static const mqr_option_def_t options[] = {
    {"max-frame-size", MQR_OPTION_SIZE, 512, MQR_MAX_FRAME_LIMIT, 1 << 20},
};
const mqr_protocol_def_t mqr__amqp_def = {"amqp", MQR_PROTOCOL_AMQP, options, sizeof options / sizeof *options};

const mqr__head_t mqr__amqp_head = {
    .name = "AMQP",
    .def = &mqr__amqp_def,
    .sniff = sniff,
    .open = amqp_open,
    .take = take,
    .room = room,
    .tick = tick,
    .fail = fail,
    .bye = bye,
    .sent = sent,
    .release = release,
    .credit_flow = true,
    .unblocked = mqr__amqp_unblocked,
};
