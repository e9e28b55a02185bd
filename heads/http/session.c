/* The console's sessions: a user who logged in (with Basic credentials, over TLS, once)
 * is given a cookie, mqr_session, of 32 random bytes (OpenSSL's RAND_bytes), HttpOnly,
 * SameSite=Strict and Secure, that stands for those credentials until it is ended (log
 * out), unused for SESSION_IDLE_MS, older than SESSION_MAX_MS, or its user removed by a
 * reload. Each session has a CSRF token of its own too: a change made with the cookie must
 * carry it in X-CSRF-Token (api.c), which only a page of mqrd's own origin can read (GET
 * /api/v1/session). Sessions live in the broker's memory: a restart ends them. */
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "http.h"

#define SESSION_IDLE_MS (30 * 60 * 1000)
#define SESSION_MAX_MS (12 * 60 * 60 * 1000)
#define SESSIONS_MAX 4096 /* past it, the one used longest ago ends */

typedef struct {
  char token[65], csrf[65];
  mqr__principal_t *who;
  uint64_t made_ms, used_ms;
} session_t;

typedef struct {
  session_t *s;
  uint32_t n, cap;
} sessions_t;

static sessions_t *sessions(mqr_broker_t *b, bool make) {
  void **slot = mqr__head_slot(b, &mqr__http_head);
  if (*slot == NULL && make) *slot = mqr_calloc(1, sizeof(sessions_t));
  return *slot;
}

static void end(sessions_t *ss, uint32_t i) {
  mqr__principal_release(ss->s[i].who);
  OPENSSL_cleanse(&ss->s[i], sizeof ss->s[i]);
  ss->s[i] = ss->s[--ss->n];
}

/* Ended by a reload (its user removed), idle too long, or too old. */
static bool stale(const session_t *s, uint64_t now) {
  return mqr__principal_revoked(s->who) || now - s->used_ms > SESSION_IDLE_MS || now - s->made_ms > SESSION_MAX_MS;
}

static bool hex_random(char out[65]) {
  uint8_t r[32];
  if (RAND_bytes(r, sizeof r) != 1) return false;
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
  return true;
}

int mqr__http_session_new(mqr_broker_t *b, mqr__principal_t *who, char token[65], char csrf[65]) {
  sessions_t *ss = sessions(b, true);
  if (ss == NULL) return MQR_ENOMEM;
  uint64_t now = uv_now(mqr__loop(b));
  if (ss->n == SESSIONS_MAX) { /* the one used longest ago */
    uint32_t old = 0;
    for (uint32_t i = 1; i < ss->n; i++)
      if (ss->s[i].used_ms < ss->s[old].used_ms) old = i;
    end(ss, old);
  }
  if (!mqr__grow((void **)&ss->s, &ss->cap, ss->n + 1, sizeof *ss->s)) return MQR_ENOMEM;
  session_t *s = &ss->s[ss->n];
  if (!hex_random(s->token) || !hex_random(s->csrf)) return MQR_ENOMEM;
  s->who = mqr__principal_hold(who);
  s->made_ms = s->used_ms = now;
  ss->n++;
  memcpy(token, s->token, 65);
  memcpy(csrf, s->csrf, 65);
  return 0;
}

/* The session whose token the Cookie header holds (a live one), or -1. */
static int32_t find(mqr_broker_t *b, mqr_str_t cookies) {
  sessions_t *ss = sessions(b, false);
  static const char name[] = "mqr_session=";
  const char *p = cookies.ptr, *end_ = cookies.ptr + cookies.len;
  while (ss && p < end_) {
    while (p < end_ && (*p == ' ' || *p == ';')) p++;
    const char *e = memchr(p, ';', (size_t)(end_ - p));
    if (e == NULL) e = end_;
    if ((size_t)(e - p) == sizeof name - 1 + 64 && memcmp(p, name, sizeof name - 1) == 0) {
      const char *t = p + sizeof name - 1;
      for (uint32_t i = 0; i < ss->n; i++)
        if (CRYPTO_memcmp(ss->s[i].token, t, 64) == 0) return (int32_t)i;
    }
    p = e;
  }
  return -1;
}

mqr__principal_t *mqr__http_session_find(mqr_broker_t *b, mqr_str_t cookies, char csrf[65]) {
  int32_t i = find(b, cookies);
  if (i < 0) return NULL;
  sessions_t *ss = sessions(b, false);
  session_t *s = &ss->s[i];
  uint64_t now = uv_now(mqr__loop(b));
  if (stale(s, now)) {
    end(ss, (uint32_t)i);
    return NULL;
  }
  s->used_ms = now;
  memcpy(csrf, s->csrf, 65);
  return mqr__principal_hold(s->who);
}

bool mqr__http_session_end(mqr_broker_t *b, mqr_str_t cookies) {
  int32_t i = find(b, cookies);
  if (i < 0) return false;
  end(sessions(b, false), (uint32_t)i);
  return true;
}

void mqr__http_sessions_tick(mqr_broker_t *b, uint64_t now) {
  sessions_t *ss = sessions(b, false);
  for (uint32_t i = 0; ss && i < ss->n;) {
    session_t *s = &ss->s[i];
    if (stale(s, now))
      end(ss, i);
    else
      i++;
  }
}

void mqr__http_sessions_free(mqr_broker_t *b) {
  sessions_t *ss = sessions(b, false);
  if (ss == NULL) return;
  while (ss->n) end(ss, ss->n - 1);
  mqr_free(ss->s);
  mqr_free(ss);
  *mqr__head_slot(b, &mqr__http_head) = NULL;
}
