/* The management API's broker-wide endpoints (api.c routes to them; docs/management-api.md):
 *
 *   GET    /api/v1/broker            the version, uptime and the broker's counters
 *   GET    /api/v1/connections       every head's connections (manage on activemq.management)
 *   DELETE /api/v1/connections/ID    one closed
 *   GET|POST|DELETE /api/v1/session  the console's session: who asks; a login; a logout
 */
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* ---- connections ------------------------------------------------------------------------------------------ */

static json_t *conn_json(mqr__conn_t *c) {
  uint64_t now = uv_now(mqr__loop(c->b));
  mqr__principal_t *who = mqr__session_principal(&c->sess);
  return json_pack("{s:I, s:s, s:s, s:s, s:o, s:b, s:b, s:I, s:I}", "id", (json_int_t)c->sess.id, "protocol",
                   c->head ? c->head->name : "", "listener", c->l && c->l->cfg ? c->l->cfg->name : "", "peer", c->peer,
                   "user", mqr__principal_anonymous(who) ? json_null() : mqr__api_str(mqr__principal_name(who)), "tls",
                   mqr__conn_secure(c), "websocket", c->ws != NULL, "connected-seconds",
                   (json_int_t)((now - c->opened_ms) / 1000), "idle-seconds", (json_int_t)((now - c->heard_ms) / 1000));
}

static bool may_manage_broker(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a) {
  mqr_error_t err = {0};
  if (mqr__may(c->b, r->who, MQR_PERM_MANAGE, MQR_STR(MQR__API_MANAGEMENT_ADDRESS), &err)) return true;
  mqr__api_error(a, MQR_EPERM, err.message);
  return false;
}

void mqr__api_connections(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a) {
  if (!may_manage_broker(c, r, a)) return;
  char search[256] = "";
  mqr__api_param(r->query, "search", search, sizeof search);
  mqr__api_page_t page = mqr__api_page(r->query);
  mqr_str_t want = mqr_str(search);
  json_t *items = json_array();
  for (mqr__conn_t *x = mqr__net(c->b)->conns; x; x = x->next) {
    if (x->state == MQR__CONN_CLOSING) continue;
    mqr__principal_t *who = mqr__session_principal(&x->sess);
    if ((want.len && !mqr__api_matches(mqr_str(x->peer), want) &&
         !(who && mqr__api_matches(mqr__principal_name(who), want)) &&
         !(x->head && mqr__api_matches(mqr_str(x->head->name), want))))
      continue;
    if (mqr__api_on_page(&page)) json_array_append_new(items, conn_json(x));
  }
  mqr__api_page_answer(a, &page, "connections", items);
}

void mqr__api_close_connection(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t id, mqr__http_answer_t *a) {
  if (!may_manage_broker(c, r, a)) return;
  char num[24], *end;
  snprintf(num, sizeof num, "%.*s", (int)(id.len < 23 ? id.len : 23), id.ptr);
  long long n = strtoll(num, &end, 10);
  for (mqr__conn_t *x = mqr__net(c->b)->conns; *end == 0 && id.len && x; x = x->next) {
    if (x->sess.id != n || x->state == MQR__CONN_CLOSING) continue;
    if (x == c) {
      mqr__api_error(a, MQR_EINVAL, "this is the connection asking: it closes by itself");
      return;
    }
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): closed through the management API by connection %lld",
             (long long)x->sess.id, x->peer, (long long)c->sess.id);
    mqr__conn_close(x, true);
    mqr__api_json(a, 200, json_pack("{s:I}", "closed", (json_int_t)n));
    return;
  }
  mqr__api_error(a, MQR_ENOTFOUND, "no such connection");
}

void mqr__api_broker(mqr__conn_t *c, mqr__http_answer_t *a) {
  mqr_broker_stats_t st;
  mqr_broker_stats(c->b, &st);
  mqr__api_json(a, 200,
                json_pack("{s:s, s:I, s:I, s:I, s:I, s:b, s:b, s:I}", "version", mqr_version(), "uptime-seconds",
                          (json_int_t)mqr__uptime_s(c->b), "connections", (json_int_t)st.connections, "messages",
                          (json_int_t)st.messages, "bytes", (json_int_t)st.bytes, "persistence", st.persistence,
                          "journal-failed", st.journal_failed, "journal-files", (json_int_t)st.journal_files));
}

/* ---- the console's session ------------------------------------------------------------------------ */

/* GET: who asks, and the session's CSRF token; POST (with Basic credentials, over TLS):
 * a session for them, its cookie set; DELETE: the session ended, its cookie dropped. */
void mqr__api_session(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a) {
  mqr__principal_t *who = r->who;
  bool anonymous = mqr__principal_anonymous(who);
  mqr_str_t name = anonymous ? MQR_STR("") : mqr__principal_name(who);
  json_t *user = anonymous ? json_null() : mqr__api_str(name);
  if (r->method == HTTP_GET || r->method == HTTP_HEAD) {
    mqr__api_json(a, 200,
                  json_pack("{s:o, s:s?, s:b, s:b}", "user", user, "csrf", r->csrf, "anonymous", anonymous,
                            "may-manage-connections",
                            mqr__allowed(c->b, who, MQR_PERM_MANAGE, MQR_STR(MQR__API_MANAGEMENT_ADDRESS))));
  } else if (r->method == HTTP_POST) {
    char token[65], csrf[65];
    if (!r->basic) {
      json_decref(user);
      mqr__api_error(a, MQR_EINVAL, "log in with Basic credentials (over TLS)");
      return;
    }
    if (mqr__http_session_new(c->b, who, token, csrf) != 0) {
      json_decref(user);
      mqr__api_error(a, MQR_ENOMEM, "out of memory");
      return;
    }
    snprintf(a->cookie, sizeof a->cookie, "mqr_session=%s; Path=/; HttpOnly; SameSite=Strict; Secure", token);
    mqr__log(c->b, MQR_LOG_INFO, "connection %lld (%s): %.*s logged in to the console", (long long)c->sess.id, c->peer,
             (int)name.len, name.ptr);
    mqr__api_json(a, 201, json_pack("{s:o, s:s}", "user", user, "csrf", csrf));
    OPENSSL_cleanse(token, sizeof token);
  } else if (r->method == HTTP_DELETE) {
    mqr_str_t cookies;
    bool ended = mqr__http_header(r, "Cookie", &cookies) && mqr__http_session_end(c->b, cookies);
    snprintf(a->cookie, sizeof a->cookie, "mqr_session=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0");
    mqr__api_json(a, 200, json_pack("{s:o, s:b}", "user", user, "ended", ended));
  } else {
    json_decref(user);
  }
}
