/* The native protocol's CONNECT and who it is (docs/protocol.md, Authentication): SASL
 * PLAIN over TLS (a name and password, verified as MQTT's and STOMP's are), SCRAM-SHA-256
 * on any connection (the password never crosses it: AUTH frames carry the exchange), a
 * TLS client certificate, or anonymous. The connection is held while the answer is
 * awaited; its later frames wait unread. */
#include <stdio.h>

#include "native.h"

/* The client is who: CONNECTED, and its frames go on. */
static void connected(mqr__conn_t *c, mqr__principal_t *who) {
  mqr__nat_conn_t *n = mqr__nat(c);
  mqr__session_set_principal(&c->sess, who);
  c->state = MQR__CONN_OPEN;
  n->peer_max_frame = n->want_max_frame;
  mqr_frame_t r = {MQR_FRAME_CONNECTED,
                   {.connected = {MQR_PROTOCOL_VERSION, mqr_str(mqr__options(c->b)->server_name), c->sess.id,
                                  (int32_t)c->l->cfg->max_frame}}};
  mqr_str_t name = mqr__principal_name(who);
  mqr__log(c->b, MQR_LOG_DEBUG, "connection %lld (%s): client '%s' connected as '%.*s'", (long long)c->sess.id, c->peer,
           n->client_id, (int)name.len, name.ptr);
  mqr__nat_reply(c, &r); /* (a reply that fails closes the connection, and who goes with its session) */
}

static void refused(mqr__conn_t *c, int status, const char *why) {
  mqr__nat_send_error(c, status == MQR_EPERM ? MQR_EAUTH : status, 0, true, "%s", why);
}

/* The answer to PLAIN's password, or to a failed SCRAM proof (after its delay). */
static void answered(void *ctx, int status, mqr__principal_t *who) {
  mqr__conn_t *c = ctx;
  mqr__nat_conn_t *n = mqr__nat(c);
  n->auth = NULL;
  mqr__conn_hold(c, false);
  if (status == 0)
    connected(c, who);
  else
    refused(c, status, "authentication failed: bad user name or password");
}

static void plain(mqr__conn_t *c, mqr_str_t resp) {
  mqr__nat_conn_t *n = mqr__nat(c);
  /* [authzid] NUL authcid NUL passwd (RFC 4616) */
  const char *z1 = memchr(resp.ptr, 0, resp.len);
  const char *z2 = z1 ? memchr(z1 + 1, 0, resp.len - (size_t)(z1 + 1 - resp.ptr)) : NULL;
  if (z2 == NULL || z2 == z1 + 1) {
    refused(c, MQR_EAUTH, "PLAIN: the response must be [authzid] NUL name NUL password");
    return;
  }
  mqr_str_t name = mqr_str_n(z1 + 1, (size_t)(z2 - z1 - 1)),
            pw = mqr_str_n(z2 + 1, resp.len - (size_t)(z2 + 1 - resp.ptr));
  mqr__principal_t *who = NULL;
  int rc = mqr__authenticate(c->b, name, pw, c->peer, answered, c, &who, &n->auth);
  if (rc == MQR__PENDING) {
    mqr__conn_hold(c, true);
    return;
  }
  if (rc)
    refused(c, rc, "authentication failed: bad user name or password");
  else
    connected(c, who);
}

static void scram_start(mqr__conn_t *c, mqr_str_t client_first) {
  mqr__nat_conn_t *n = mqr__nat(c);
  mqr_error_t err;
  char server_first[512];
  if ((n->scram = mqr_calloc(1, sizeof *n->scram)) == NULL) {
    refused(c, MQR_ENOMEM, "out of memory");
    return;
  }
  if (mqr_scram_server_start(n->scram, client_first, &err) != 0 ||
      mqr_scram_server_challenge(n->scram, mqr__user_scram(c->b, n->scram->user), server_first, sizeof server_first,
                                 &err) != 0) {
    refused(c, MQR_EAUTH, err.message);
    return;
  }
  mqr_frame_t f = {MQR_FRAME_AUTH, {.auth = {mqr_str(server_first)}}};
  mqr__nat_reply(c, &f);
}

void mqr__nat_on_auth(mqr__conn_t *c, const mqr_frame_auth_t *a) {
  mqr__nat_conn_t *n = mqr__nat(c);
  if (c->state != MQR__CONN_HANDSHAKE || n->scram == NULL || n->scram->step != 2) {
    mqr__nat_send_error(c, MQR_EPROTOCOL, 0, true, "an AUTH frame that no exchange waits for");
    return;
  }
  mqr_error_t err;
  char server_final[128];
  mqr__principal_t *who = NULL;
  int rc = mqr_scram_server_final(n->scram, a->data, server_final, sizeof server_final, &err);
  if (rc == 0 && (rc = mqr__authenticate_proved(c->b, n->scram->user, &who)) == 0) {
    mqr_frame_t f = {MQR_FRAME_AUTH, {.auth = {mqr_str(server_final)}}};
    mqr__nat_reply(c, &f); /* the broker proves it knew the keys, then CONNECTED */
    connected(c, who);
    return;
  }
  if (rc == MQR_EPROTOCOL) {
    refused(c, MQR_EPROTOCOL, err.message);
    return;
  }
  /* A wrong password, or an unknown user: answered late, as PLAIN's and MQTT's are. */
  if (mqr__authenticate_failed(c->b, n->scram->user, c->peer, answered, c, &n->auth) == MQR__PENDING)
    mqr__conn_hold(c, true);
  else
    refused(c, MQR_EAUTH, "authentication failed");
}

void mqr__nat_on_connect(mqr__conn_t *c, const mqr_frame_connect_t *cn) {
  mqr__nat_conn_t *n = mqr__nat(c);
  mqr_broker_t *b = c->b;
  snprintf(n->client_id, sizeof n->client_id, "%.*s", (int)(cn->client_id.len < 127 ? cn->client_id.len : 127),
           cn->client_id.ptr);
  n->want_max_frame = (uint32_t)cn->max_frame;
  mqr_str_t mech = cn->mechanism;
  if (mech.len == 0) { /* a TLS client certificate, or anonymous (answered at once) */
    mqr__principal_t *who = NULL;
    mqr__auth_t *pending = NULL;
    const char *identity = mqr__conn_identity(c);
    int rc = identity ? mqr__authenticate_certificate(b, identity, c->peer, &who)
                      : mqr__authenticate(b, MQR_STR(""), MQR_STR(""), c->peer, NULL, NULL, &who, &pending);
    if (rc)
      refused(c, rc,
              identity ? "the client certificate names no user of the users-file"
                       : "anonymous clients are not allowed (allow-anonymous is false): give a user name "
                         "and password");
    else
      connected(c, who);
  } else if (mqr_str_eq(mech, MQR_STR("PLAIN"))) {
    if (!mqr__conn_secure(c))
      refused(c, MQR_EAUTH,
              "PLAIN sends the password as it is: only over TLS (tls://); SCRAM-SHA-256 on this "
              "connection");
    else
      plain(c, cn->response);
  } else if (mqr_str_eq(mech, MQR_STR("SCRAM-SHA-256"))) {
    scram_start(c, cn->response);
  } else {
    refused(c, MQR_EAUTH, "unknown SASL mechanism (PLAIN over TLS, SCRAM-SHA-256)");
  }
}
