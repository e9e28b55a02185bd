/* Who a client is: the users and security-settings the config names (loaded at start,
 * again at each reload, the old kept when the new cannot be read), principals, and
 * authentication off the event loop.
 *
 * A password is verified on libuv's thread pool (the KDF costs tens of milliseconds on
 * purpose); a verified (name, password) is cached by a keyed digest for
 * authentication-cache-ttl, as Artemis caches; a failure is answered only after a delay
 * that doubles with each failure from the same peer address (250 ms up to 8 s; reset by
 * a success or after 5 minutes), and logged with that address. */
#include <stdio.h>
#include <string.h>

#include "auth.h"

#define FAIL_MIN_MS 250
#define FAIL_MAX_MS 8000
#define FAIL_FORGET_MS (5 * 60 * 1000)
#define FAIL_PEERS 1024 /* peer addresses remembered */

/* Users shared with the thread pool: counted on the loop's thread only. */
typedef struct {
  mqr_users_t *u;
  uint32_t refs;
} users_ref_t;

typedef struct {
  uint8_t digest[32];
  uint64_t expires; /* uv_now ms; 0: empty */
  uint32_t gen;
  char *name, *roles;
} cache_entry_t;

typedef struct {
  char peer[48]; /* "" empty */
  uint32_t failures;
  uint64_t last_ms;
} fail_entry_t;

struct mqr__auth_s {
  mqr_broker_t *b;
  mqr__auth_fn fn; /* NULL: cancelled */
  void *ctx;
  uv_work_t work;
  uv_timer_t delay;
  users_ref_t *users;
  char peer[48];
  size_t name_len, pw_len;
  int status;      /* the verification's */
  mqr_user_t user; /* when it passed: views into users */
  uint8_t digest[32];
  char *name, *pw; /* copies; pw wiped when done */
  bool delaying;
  struct mqr__auth_s *next, *prev; /* the broker's under way */
};

struct mqr__sec_s {
  users_ref_t *users; /* NULL: no users file */
  mqr_access_t *access;
  uint32_t gen; /* bumped by each reload that changed users or settings */
  bool allow_anonymous;
  char *anonymous_roles;
  uint32_t cache_size, cache_ttl_ms;
  cache_entry_t *cache;
  uint8_t key[32];
  fail_entry_t fails[FAIL_PEERS];
  mqr__principal_t *live; /* every principal a session holds */
  mqr__auth_t *pending;   /* authentications under way */
  uint64_t accepted, refused;
};

static void users_unref(users_ref_t *r) {
  if (r && --r->refs == 0) {
    mqr_users_destroy(r->u);
    mqr_free(r);
  }
}

static char *dup_str(mqr_str_t s) {
  char *p = mqr_malloc(s.len + 1);
  if (p) {
    if (s.len) memcpy(p, s.ptr, s.len);
    p[s.len] = '\0';
  }
  return p;
}

/* A name a client gave, fit for the log: at most 64 bytes, control bytes as '?'. */
static const char *loggable(mqr_str_t s, char out[72]) {
  size_t n = s.len > 64 ? 64 : s.len;
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)s.ptr[i] < 0x20 || s.ptr[i] == 0x7f ? '?' : s.ptr[i];
  strcpy(out + n, s.len > 64 ? "..." : "");
  return out;
}

/* ---- principals ------------------------------------------------------------------------------------ */

static mqr__principal_t *principal_new(mqr__sec_t *sec, mqr_str_t name, mqr_str_t roles, bool anonymous) {
  mqr__principal_t *p = mqr_calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  if ((p->name = dup_str(name)) == NULL || (p->roles = dup_str(roles)) == NULL) {
    mqr_free(p->name);
    mqr_free(p);
    return NULL;
  }
  p->refs = 1;
  p->sec = sec;
  p->anonymous = anonymous;
  p->gen = sec->gen;
  p->mask = sec->access ? mqr_access_roles(sec->access, roles) : 0;
  p->next = sec->live;
  if (sec->live) sec->live->prev = p;
  sec->live = p;
  return p;
}

void mqr__principal_release(mqr__principal_t *p) {
  if (p == NULL || --p->refs) return;
  if (p->sec) {
    if (p->prev)
      p->prev->next = p->next;
    else
      p->sec->live = p->next;
    if (p->next) p->next->prev = p->prev;
  }
  mqr_free(p->name);
  mqr_free(p->roles);
  mqr_free(p);
}

mqr__principal_t *mqr__principal_hold(mqr__principal_t *p) {
  if (p) p->refs++;
  return p;
}

mqr_str_t mqr__principal_name(const mqr__principal_t *p) {
  return p && !p->anonymous ? mqr_str(p->name) : MQR_STR("(anonymous)");
}

bool mqr__principal_anonymous(const mqr__principal_t *p) { return p == NULL || p->anonymous; }

bool mqr__principal_revoked(const mqr__principal_t *p) { return p && p->revoked; }

/* ---- the config's users and settings -------------------------------------------------------------- */

/* Loads what cfg names into sec (its users and settings replaced only when both load). */
static int load(mqr_broker_t *b, mqr__sec_t *sec, const mqr_config_t *cfg, mqr_error_t *err) {
  const mqr_security_config_t *sc = mqr_config_security(cfg);
  users_ref_t *users = NULL;
  mqr_access_t *access = NULL;
  int rc = 0;
  if (sc->users_file) {
    if ((users = mqr_calloc(1, sizeof *users)) == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory");
    users->refs = 1;
    if ((rc = mqr_users_load(sc->users_file, sc->roles_file, &users->u, err)) != 0) {
      mqr_free(users);
      return rc;
    }
  }
  if ((rc = mqr_access_build(cfg, &access, err)) != 0) {
    users_unref(users);
    return rc;
  }
  char *anon = dup_str(sc->anonymous_roles);
  cache_entry_t *cache = sc->cache_size ? mqr_calloc(sc->cache_size, sizeof *cache) : NULL;
  if (anon == NULL || (sc->cache_size && cache == NULL)) {
    users_unref(users);
    mqr_access_destroy(access);
    mqr_free(anon);
    mqr_free(cache);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory loading the security section");
  }
  for (uint32_t i = 0; sec->cache && i < sec->cache_size; i++) {
    mqr_free(sec->cache[i].name);
    mqr_free(sec->cache[i].roles);
  }
  mqr_free(sec->cache);
  users_unref(sec->users);
  mqr_access_destroy(sec->access);
  mqr_free(sec->anonymous_roles);
  sec->users = users;
  sec->access = access;
  sec->anonymous_roles = anon;
  sec->allow_anonymous = sc->allow_anonymous;
  sec->cache = cache;
  sec->cache_size = sc->cache_size;
  sec->cache_ttl_ms = sc->cache_ttl_ms;
  sec->gen++;
  (void)b;
  return 0;
}

int mqr__sec_open(mqr_broker_t *b, mqr_error_t *err) {
  mqr__sec_t *sec = mqr_calloc(1, sizeof *sec);
  if (sec == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory starting security");
  int rc = mqr_random_bytes(sec->key, sizeof sec->key);
  if (rc == 0) rc = load(b, sec, b->config, err);
  if (rc) {
    if (rc == MQR_EIO && err && err->code == 0) mqr_error_set(err, rc, "no random source for the broker's keys");
    mqr_free(sec);
    return rc;
  }
  b->sec = sec;
  const mqr_security_config_t *sc = mqr_config_security(b->config);
  mqr__log(b, MQR_LOG_INFO, "security: %u user(s)%s%s; anonymous clients %s; %u security-settings",
           sec->users ? mqr_users_count(sec->users->u) : 0, sc->users_file ? " from " : "",
           sc->users_file ? sc->users_file : "", sec->allow_anonymous ? "allowed" : "refused",
           mqr_config_security_setting_count(b->config));
  return 0;
}

void mqr__sec_reload(mqr_broker_t *b, const mqr_config_t *cfg) {
  mqr__sec_t *sec = b->sec;
  if (sec == NULL) return;
  mqr_error_t err;
  char line[1024];
  if (load(b, sec, cfg, &err) != 0) {
    mqr__log(b, MQR_LOG_ERROR, "security: the reload kept the previous users and security-settings: %s",
             mqr_error_format(&err, line, sizeof line));
    return;
  }
  /* Live principals take their users' roles as they are now; a removed user's are
   * revoked (the connection layer closes their connections at its next tick). */
  uint32_t revoked = 0;
  for (mqr__principal_t *p = sec->live; p; p = p->next) {
    if (p->anonymous) {
      char *r = dup_str(mqr_str(sec->anonymous_roles));
      if (r) mqr_free(p->roles), p->roles = r;
      if (!sec->allow_anonymous && !p->revoked) p->revoked = true, revoked++;
    } else {
      mqr_user_t u;
      if (sec->users == NULL || !mqr_users_find(sec->users->u, mqr_str(p->name), &u)) {
        if (!p->revoked) p->revoked = true, revoked++;
      } else {
        char *r = dup_str(u.roles);
        if (r) mqr_free(p->roles), p->roles = r;
      }
    }
    p->mask = sec->access ? mqr_access_roles(sec->access, mqr_str(p->roles)) : 0;
    p->gen = sec->gen;
  }
  mqr__log(b, MQR_LOG_INFO, "security: reloaded: %u user(s), %u security-settings%s",
           sec->users ? mqr_users_count(sec->users->u) : 0, mqr_config_security_setting_count(cfg),
           revoked ? "; the connections of removed users close" : "");
}

void mqr__sec_free(mqr_broker_t *b) {
  mqr__sec_t *sec = b->sec;
  if (sec == NULL) return;
  for (mqr__principal_t *p = sec->live; p; p = p->next) p->sec = NULL; /* (none should be left) */
  for (uint32_t i = 0; sec->cache && i < sec->cache_size; i++) {
    mqr_free(sec->cache[i].name);
    mqr_free(sec->cache[i].roles);
  }
  mqr_free(sec->cache);
  users_unref(sec->users);
  mqr_access_destroy(sec->access);
  mqr_free(sec->anonymous_roles);
  mqr_free(sec);
  b->sec = NULL;
}

const mqr_access_t *mqr__sec_access(const mqr_broker_t *b) {
  return b->sec && b->sec->access && mqr_access_enabled(b->sec->access) ? b->sec->access : NULL;
}

uint32_t mqr__sec_gen(const mqr_broker_t *b) { return b->sec ? b->sec->gen : 0; }

void mqr__sec_counts(const mqr_broker_t *b, uint64_t *accepted, uint64_t *refused) {
  *accepted = b->sec ? b->sec->accepted : 0;
  *refused = b->sec ? b->sec->refused : 0;
}

/* ---- failures, per peer address ------------------------------------------------------------------- */

static void peer_host(const char *peer, char *out, size_t cap) {
  snprintf(out, cap, "%s", peer);
  char *colon = strrchr(out, ':'); /* the port goes: "127.0.0.1:5000", "::1:5000" */
  if (colon) *colon = '\0';
}

static fail_entry_t *fail_slot(mqr__sec_t *sec, const char *peer, uint64_t now, bool make) {
  char host[48];
  peer_host(peer, host, sizeof host);
  fail_entry_t *oldest = &sec->fails[0];
  for (uint32_t i = 0; i < FAIL_PEERS; i++) {
    fail_entry_t *f = &sec->fails[i];
    if (f->peer[0] && strcmp(f->peer, host) == 0) {
      if (now - f->last_ms >= FAIL_FORGET_MS) f->failures = 0;
      return f;
    }
    if (f->last_ms < oldest->last_ms || (oldest->peer[0] && !f->peer[0])) oldest = f;
  }
  if (!make) return NULL;
  snprintf(oldest->peer, sizeof oldest->peer, "%s", host);
  oldest->failures = 0;
  oldest->last_ms = now;
  return oldest;
}

/* ---- authentication --------------------------------------------------------------------------------- */

static void request_free(mqr__auth_t *a) {
  mqr__sec_t *sec = a->b->sec;
  if (a->prev)
    a->prev->next = a->next;
  else
    sec->pending = a->next;
  if (a->next) a->next->prev = a->prev;
  users_unref(a->users);
  if (a->pw) explicit_bzero(a->pw, a->pw_len);
  mqr_free(a->pw);
  mqr_free(a->name);
  mqr_free(a);
}

static void delay_closed(uv_handle_t *h) {
  mqr__auth_t *a = h->data;
  mqr_broker_t *b = a->b;
  request_free(a);
  mqr__broker_handle_closed(b);
}

/* The answer goes to the head (unless cancelled). */
static void answer(mqr__auth_t *a) {
  mqr_broker_t *b = a->b;
  mqr__sec_t *sec = b->sec;
  mqr__principal_t *who = NULL;
  int status = a->status;
  if (status == 0 && (who = principal_new(sec, a->user.name, a->user.roles, false)) == NULL) status = MQR_ENOMEM;
  if (a->fn) {
    a->fn(a->ctx, status, who);
  } else {
    mqr__principal_release(who);
  }
}

static void delay_out(uv_timer_t *t) {
  mqr__auth_t *a = t->data;
  answer(a);
  uv_close((uv_handle_t *)&a->delay, delay_closed);
}

static void verify_work(uv_work_t *w) {
  mqr__auth_t *a = w->data;
  a->status = mqr_users_verify(a->users->u, mqr_str_n(a->name, a->name_len), a->pw, a->pw_len, &a->user);
}

/* A failed authentication: counted, logged with its peer, answered after the peer's
 * delay (a->status says how). */
static void fail_later(mqr__auth_t *a, uint64_t now) {
  mqr_broker_t *b = a->b;
  mqr__sec_t *sec = b->sec;
  sec->refused++;
  fail_entry_t *f = fail_slot(sec, a->peer, now, true);
  uint64_t delay = f->failures >= 5 ? FAIL_MAX_MS : (uint64_t)FAIL_MIN_MS << f->failures;
  if (delay > FAIL_MAX_MS) delay = FAIL_MAX_MS;
  f->failures++;
  f->last_ms = now;
  char safe[72];
  mqr__log(b, MQR_LOG_WARN,
           "security: authentication of '%s' from %s failed (%u from that address); answered in %llu ms",
           loggable(mqr_str_n(a->name, a->name_len), safe), a->peer, f->failures, (unsigned long long)delay);
  uv_timer_init(b->loop, &a->delay);
  a->delay.data = a;
  a->delaying = true;
  if (b->closing) { /* no one waits for the answer */
    uv_close((uv_handle_t *)&a->delay, delay_closed);
    return;
  }
  uv_timer_start(&a->delay, delay_out, delay, 0);
}

static void verify_done(uv_work_t *w, int status) {
  mqr__auth_t *a = w->data;
  mqr_broker_t *b = a->b;
  mqr__sec_t *sec = b->sec;
  if (status != 0) a->status = MQR_EAUTH; /* (cancelled: the loop is closing) */
  uint64_t now = uv_now(b->loop);
  mqr_user_t now_user;
  if (a->status == 0 && a->users != sec->users) { /* reloaded meanwhile: the user as it is now */
    if (sec->users == NULL || !mqr_users_find(sec->users->u, a->user.name, &now_user))
      a->status = MQR_EAUTH;
    else
      a->user = now_user;
  }
  if (a->status == 0) {
    sec->accepted++;
    fail_entry_t *f = fail_slot(sec, a->peer, now, false);
    if (f) f->failures = 0;
    /* Cached for authentication-cache-ttl, if the users are still those it was verified
     * against. */
    if (sec->cache_size && a->users == sec->users) {
      cache_entry_t *e =
          &sec->cache[(a->digest[0] | (uint32_t)a->digest[1] << 8 | (uint32_t)a->digest[2] << 16) % sec->cache_size];
      char *n = dup_str(a->user.name), *r = dup_str(a->user.roles);
      if (n && r) {
        mqr_free(e->name), mqr_free(e->roles);
        memcpy(e->digest, a->digest, 32);
        e->name = n, e->roles = r;
        e->expires = now + sec->cache_ttl_ms;
        e->gen = sec->gen;
      } else {
        mqr_free(n), mqr_free(r);
      }
    }
    answer(a);
    request_free(a);
    mqr__broker_handle_closed(b);
    return;
  }
  fail_later(a, now);
}

void mqr__sec_close(mqr_broker_t *b) {
  for (mqr__auth_t *a = b->sec ? b->sec->pending : NULL; a; a = a->next)
    if (a->delaying && !uv_is_closing((uv_handle_t *)&a->delay)) {
      a->fn = NULL;
      uv_close((uv_handle_t *)&a->delay, delay_closed);
    }
}

int mqr__authenticate_certificate(mqr_broker_t *b, const char *name, const char *peer, mqr__principal_t **who) {
  mqr__sec_t *sec = b->sec;
  mqr_user_t u;
  *who = NULL;
  if (sec->users == NULL || !mqr_users_find(sec->users->u, mqr_str(name), &u)) {
    sec->refused++;
    char safe[72];
    mqr__log(b, MQR_LOG_WARN, "security: the client certificate of '%s' from %s names no user of the users-file",
             loggable(mqr_str(name), safe), peer);
    return MQR_EAUTH;
  }
  if ((*who = principal_new(sec, u.name, u.roles, false)) == NULL) return MQR_ENOMEM;
  sec->accepted++;
  return 0;
}

const char *mqr__user_scram(mqr_broker_t *b, const char *name) {
  mqr_user_t u;
  return b->sec->users && mqr_users_find(b->sec->users->u, mqr_str(name), &u) ? u.scram : NULL;
}

int mqr__authenticate_proved(mqr_broker_t *b, const char *name, mqr__principal_t **who) {
  mqr__sec_t *sec = b->sec;
  mqr_user_t u;
  *who = NULL;
  if (sec->users == NULL || !mqr_users_find(sec->users->u, mqr_str(name), &u)) return MQR_EAUTH;
  if ((*who = principal_new(sec, u.name, u.roles, false)) == NULL) return MQR_ENOMEM;
  sec->accepted++;
  return 0;
}

int mqr__authenticate_failed(mqr_broker_t *b, const char *name, const char *peer, mqr__auth_fn fn, void *ctx,
                             mqr__auth_t **pending) {
  mqr__sec_t *sec = b->sec;
  mqr__auth_t *a = mqr_calloc(1, sizeof *a);
  if (a == NULL || (a->name = dup_str(mqr_str(name))) == NULL) {
    mqr_free(a);
    return MQR_ENOMEM;
  }
  a->b = b;
  a->fn = fn;
  a->ctx = ctx;
  a->name_len = strlen(name);
  a->status = MQR_EAUTH;
  snprintf(a->peer, sizeof a->peer, "%s", peer);
  a->next = sec->pending;
  if (sec->pending) sec->pending->prev = a;
  sec->pending = a;
  mqr__broker_handle_opened(b); /* the delay's */
  *pending = a;
  fail_later(a, uv_now(b->loop));
  return MQR__PENDING;
}

void mqr__auth_cancel(mqr__auth_t *a) {
  if (a) a->fn = NULL;
}

int mqr__authenticate(mqr_broker_t *b, mqr_str_t name, mqr_str_t password, const char *peer, mqr__auth_fn fn, void *ctx,
                      mqr__principal_t **who, mqr__auth_t **pending) {
  mqr__sec_t *sec = b->sec;
  *who = NULL;
  *pending = NULL;
  if (name.len == 0) { /* anonymous */
    if (!sec->allow_anonymous) {
      sec->refused++;
      mqr__log(b, MQR_LOG_WARN, "security: an anonymous client from %s refused (allow-anonymous is false)", peer);
      return MQR_EPERM;
    }
    if ((*who = principal_new(sec, MQR_STR(""), mqr_str(sec->anonymous_roles), true)) == NULL) return MQR_ENOMEM;
    sec->accepted++;
    return 0;
  }
  if (sec->users == NULL || password.len > MQR_PASSWORD_MAX || name.len > 1024) {
    sec->refused++;
    char safe[72];
    mqr__log(b, MQR_LOG_WARN, "security: authentication of '%s' from %s failed (%s)", loggable(name, safe), peer,
             sec->users ? "too long" : "no users-file");
    return MQR_EAUTH;
  }
  uint8_t digest[32];
  mqr_password_digest(sec->key, name, password.ptr, password.len, digest);
  uint64_t now = uv_now(b->loop);
  if (sec->cache_size) {
    cache_entry_t *e =
        &sec->cache[(digest[0] | (uint32_t)digest[1] << 8 | (uint32_t)digest[2] << 16) % sec->cache_size];
    if (e->expires > now && e->gen == sec->gen && memcmp(e->digest, digest, 32) == 0) {
      if ((*who = principal_new(sec, mqr_str(e->name), mqr_str(e->roles), false)) == NULL) return MQR_ENOMEM;
      sec->accepted++;
      return 0;
    }
  }
  mqr__auth_t *a = mqr_calloc(1, sizeof *a);
  if (a == NULL || (a->name = dup_str(name)) == NULL || (a->pw = dup_str(password)) == NULL) {
    if (a) mqr_free(a->name);
    mqr_free(a);
    return MQR_ENOMEM;
  }
  a->b = b;
  a->fn = fn;
  a->ctx = ctx;
  a->name_len = name.len;
  a->pw_len = password.len;
  a->users = sec->users;
  a->users->refs++;
  memcpy(a->digest, digest, 32);
  snprintf(a->peer, sizeof a->peer, "%s", peer);
  a->work.data = a;
  a->next = sec->pending;
  if (sec->pending) sec->pending->prev = a;
  sec->pending = a;
  if (uv_queue_work(b->loop, &a->work, verify_work, verify_done) != 0) {
    request_free(a);
    return MQR_ENOMEM;
  }
  mqr__broker_handle_opened(b); /* the broker waits for it before it is freed */
  *pending = a;
  return MQR__PENDING;
}
