/* Users files read (mqr's, mosquitto's, Artemis's with its roles file), and a user's
 * name and password checked against them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "security_int.h"

struct mqr_users_s {
  mqr_user_t *users; /* by name */
  uint32_t n;
  char *arena; /* the users' names, roles and hashes, then dummy */
  char *dummy; /* a hash to spend a verification on for an unknown name */
};

/* ---- reading a file ------------------------------------------------------------------------- */

char *mqr__sec_read_file(const char *path, size_t *len, mqr_error_t *err) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    mqr_error_set(err, MQR_EIO, "cannot read %s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (cap - n < 4096) {
      if (cap >= (64u << 20)) {
        mqr_error_set(err, MQR_ELIMIT, "%s is longer than 64 MiB", path);
        goto fail;
      }
      char *nb = mqr_realloc(buf, cap ? cap * 2 : 8192);
      if (nb == NULL) {
        mqr_error_set(err, MQR_ENOMEM, "out of memory reading %s", path);
        goto fail;
      }
      buf = nb;
      cap = cap ? cap * 2 : 8192;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    mqr_error_set(err, MQR_EIO, "cannot read %s: %s", path, strerror(errno));
    goto fail;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
fail:
  fclose(f);
  mqr_free(buf);
  return NULL;
}

bool mqr__sec_name_ok(mqr_str_t name) {
  if (name.len == 0 || name.len > MQR__SEC_NAME_MAX || mqr_utf8_check(name.ptr, name.len) != name.len) return false;
  for (size_t i = 0; i < name.len; i++) {
    unsigned char ch = (unsigned char)name.ptr[i];
    if (ch <= ' ' || ch == ':' || ch == '=' || ch == '#' || ch == ',' || ch == 0x7f) return false;
  }
  return true;
}

bool mqr__sec_roles_ok(mqr_str_t roles) {
  size_t word = 0;
  for (size_t i = 0; i < roles.len; i++) {
    char ch = roles.ptr[i];
    if (ch == ',') {
      if (word == 0) return false;
      word = 0;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
               ch == '-' || ch == '.') {
      word++;
    } else {
      return false;
    }
  }
  return roles.len == 0 || word > 0;
}

static mqr_str_t trim(const char *s, const char *e) {
  while (s < e && (*s == ' ' || *s == '\t')) s++;
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
  return mqr_str_n(s, (size_t)(e - s));
}

/* A line of a file: [s, e) without its end of line; NULL at the end. */
static const char *next_line(const char **p, const char **e) {
  const char *s = *p;
  if (*s == '\0') return NULL;
  const char *nl = strchr(s, '\n');
  *e = nl ? nl : s + strlen(s);
  *p = nl ? nl + 1 : *e;
  return s;
}

static bool blank_or_comment(mqr_str_t t) { return t.len == 0 || t.ptr[0] == '#' || t.ptr[0] == '!'; }

/* What a file's lines are: the first line that is not a comment tells (an Artemis
 * properties file has "NAME = VALUE"; mqr's and mosquitto's "NAME:..."). */
static bool artemis_format(const char *text) {
  const char *p = text, *s, *e;
  while ((s = next_line(&p, &e)) != NULL) {
    mqr_str_t t = trim(s, e);
    if (blank_or_comment(t)) continue;
    const char *eq = memchr(t.ptr, '=', t.len), *colon = memchr(t.ptr, ':', t.len);
    return eq && (colon == NULL || eq < colon);
  }
  return false;
}

typedef struct {
  mqr_str_t name, roles, hash, scram;
  uint32_t line;
  char *roles_own; /* roles added from an Artemis roles file */
} entry_t;

static int by_name(const void *a, const void *b) {
  const entry_t *x = a, *y = b;
  size_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
  int c = memcmp(x->name.ptr, y->name.ptr, n);
  return c ? c : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

static int parse_users(const char *path, const char *text, entry_t **out, uint32_t *count, mqr_error_t *err) {
  bool artemis = artemis_format(text);
  entry_t *v = NULL;
  uint32_t n = 0, cap = 0, line = 0;
  const char *p = text, *s, *e;
  while ((s = next_line(&p, &e)) != NULL) {
    line++;
    mqr_str_t t = trim(s, e);
    if (blank_or_comment(t)) continue;
    entry_t x = {{0}, {0}, {0}, {0}, line, NULL};
    const char *sep = memchr(t.ptr, artemis ? '=' : ':', t.len);
    if (sep == NULL) goto bad_line;
    x.name = trim(t.ptr, sep);
    if (artemis) {
      x.hash = trim(sep + 1, t.ptr + t.len);
    } else {
      mqr_str_t rest = mqr_str_n(sep + 1, t.len - (size_t)(sep + 1 - t.ptr));
      if (rest.len && rest.ptr[0] == '$') { /* mosquitto: NAME:HASH */
        x.hash = rest;
      } else { /* mqr: NAME:ROLES:HASH */
        const char *sep2 = memchr(rest.ptr, ':', rest.len);
        if (sep2 == NULL) goto bad_line;
        x.roles = mqr_str_n(rest.ptr, (size_t)(sep2 - rest.ptr));
        x.hash = mqr_str_n(sep2 + 1, rest.len - (size_t)(sep2 + 1 - rest.ptr));
      }
    }
    if (!mqr__sec_name_ok(x.name)) {
      mqr_free(v);
      return mqr_error_set_at(err, MQR_ECONFIG, path, line, 1,
                              "'%.*s' is not a user name (1 to %d bytes of UTF-8, without white space, ':', '=', "
                              "'#' or ',')",
                              (int)(x.name.len > 64 ? 64 : x.name.len), x.name.ptr, MQR__SEC_NAME_MAX);
    }
    if (!mqr__sec_roles_ok(x.roles)) {
      mqr_free(v);
      return mqr_error_set_at(err, MQR_ECONFIG, path, line, 1,
                              "user '%.*s': roles must be names of letters, digits, '_', '-' and '.', separated by "
                              "commas, not '%.*s'",
                              (int)x.name.len, x.name.ptr, (int)x.roles.len, x.roles.ptr);
    }
    /* mqr's lines may give SCRAM-SHA-256 keys after the hash, past a space. */
    const char *sp = artemis ? NULL : memchr(x.hash.ptr, ' ', x.hash.len);
    if (sp) {
      x.scram = trim(sp, x.hash.ptr + x.hash.len);
      x.hash = mqr_str_n(x.hash.ptr, (size_t)(sp - x.hash.ptr));
      char cred[MQR_SCRAM_CREDENTIALS_MAX + 1];
      snprintf(cred, sizeof cred, "%.*s", (int)x.scram.len, x.scram.ptr);
      if (x.scram.len >= sizeof cred - 1 || !mqr_scram_credentials_valid(cred)) {
        mqr_free(v);
        return mqr_error_set_at(err, MQR_ECONFIG, path, line, 1,
                                "user '%.*s': after the hash, only SCRAM-SHA-256 keys may follow", (int)x.name.len,
                                x.name.ptr);
      }
    }
    char hash[MQR_PASSWORD_HASH_MAX * 2];
    snprintf(hash, sizeof hash, "%.*s", (int)x.hash.len, x.hash.ptr);
    if (x.hash.len >= MQR_PASSWORD_HASH_MAX * 2 || mqr_password_kind(hash) == NULL ||
        memchr(x.hash.ptr, ' ', x.hash.len)) {
      mqr_free(v);
      return mqr_error_set_at(
          err, MQR_ECONFIG, path, line, 1,
          "user '%.*s': the password is not a hash mqr knows (argon2id, mosquitto's $6$ or $7$, Artemis's "
          "ENC(...)); mqr keeps no plaintext password: set it with `mqr user passwd`",
          (int)x.name.len, x.name.ptr);
    }
    if (!mqr__grow((void **)&v, &cap, n + 1, sizeof *v)) {
      mqr_free(v);
      return mqr_error_set(err, MQR_ENOMEM, "out of memory reading %s", path);
    }
    v[n++] = x;
    continue;
  bad_line:
    mqr_free(v);
    return mqr_error_set_at(err, MQR_ECONFIG, path, line, 1, "expected %s, not '%.*s'",
                            artemis ? "NAME = ENC(...)" : "NAME:ROLES:HASH", (int)(t.len > 60 ? 60 : t.len), t.ptr);
  }
  if (n) qsort(v, n, sizeof *v, by_name);
  for (uint32_t i = 1; i < n; i++)
    if (by_name(&v[i - 1], &v[i]) == 0) {
      uint32_t first = v[i - 1].line < v[i].line ? v[i - 1].line : v[i].line;
      uint32_t again = v[i - 1].line < v[i].line ? v[i].line : v[i - 1].line;
      int rc = mqr_error_set_at(err, MQR_ECONFIG, path, again, 1, "user '%.*s' again (first at line %u)",
                                (int)v[i].name.len, v[i].name.ptr, first);
      mqr_free(v);
      return rc;
    }
  *out = v;
  *count = n;
  return 0;
}

/* An Artemis roles file: ROLE = user1,user2 — each role added to its users' roles. */
static int apply_roles(const char *path, const char *text, entry_t *v, uint32_t n, mqr_error_t *err) {
  uint32_t line = 0;
  const char *p = text, *s, *e;
  while ((s = next_line(&p, &e)) != NULL) {
    line++;
    mqr_str_t t = trim(s, e);
    if (blank_or_comment(t)) continue;
    const char *eq = memchr(t.ptr, '=', t.len);
    if (eq == NULL) eq = memchr(t.ptr, ':', t.len);
    mqr_str_t role = eq ? trim(t.ptr, eq) : t;
    if (eq == NULL || role.len == 0 || !mqr__sec_roles_ok(role) || memchr(role.ptr, ',', role.len))
      return mqr_error_set_at(err, MQR_ECONFIG, path, line, 1, "expected ROLE = user1,user2, not '%.*s'",
                              (int)(t.len > 60 ? 60 : t.len), t.ptr);
    const char *u = eq + 1, *end = t.ptr + t.len;
    while (u < end) {
      const char *c = memchr(u, ',', (size_t)(end - u));
      if (c == NULL) c = end;
      entry_t key = {trim(u, c), {0}, {0}, {0}, 0, NULL}, *x = bsearch(&key, v, n, sizeof *v, by_name);
      if (x) { /* a user the users file does not have is left out, as Artemis does */
        size_t had = x->roles.len, len = had + (had ? 1 : 0) + role.len;
        char *r = mqr_malloc(len + 1);
        if (r == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory reading %s", path);
        snprintf(r, len + 1, "%.*s%s%.*s", (int)had, x->roles.ptr, had ? "," : "", (int)role.len, role.ptr);
        mqr_free(x->roles_own);
        x->roles_own = r;
        x->roles = mqr_str_n(r, len);
      }
      u = c + 1;
    }
  }
  return 0;
}

int mqr_users_load(const char *path, const char *roles_path, mqr_users_t **out, mqr_error_t *err) {
  size_t len, rlen;
  char *text = mqr__sec_read_file(path, &len, err), *rtext = NULL;
  if (text == NULL) return err ? err->code : MQR_EIO;
  if (roles_path && (rtext = mqr__sec_read_file(roles_path, &rlen, err)) == NULL) {
    mqr_free(text);
    return err ? err->code : MQR_EIO;
  }
  entry_t *v = NULL;
  uint32_t n = 0;
  int rc = parse_users(path, text, &v, &n, err);
  if (rc == 0 && rtext) rc = apply_roles(roles_path, rtext, v, n, err);
  mqr_users_t *u = NULL;
  size_t bytes = 0;
  for (uint32_t i = 0; rc == 0 && i < n; i++)
    bytes += v[i].name.len + v[i].roles.len + v[i].hash.len + v[i].scram.len + 4;
  char *arena = NULL;
  if (rc == 0 &&
      ((u = mqr_calloc(1, sizeof *u)) == NULL || (u->users = mqr_calloc(n ? n : 1, sizeof(mqr_user_t))) == NULL ||
       (arena = mqr_malloc(bytes + MQR_PASSWORD_HASH_MAX)) == NULL))
    rc = mqr_error_set(err, MQR_ENOMEM, "out of memory reading %s", path);
  if (rc == 0) {
    /* The arena: names, roles and hashes, each NUL-terminated, then the dummy hash. */
    char *a = arena;
    for (uint32_t i = 0; i < n; i++) {
      mqr_str_t f[4] = {v[i].name, v[i].roles, v[i].hash, v[i].scram};
      const char *at[4];
      for (int k = 0; k < 4; k++) {
        if (f[k].len) memcpy(a, f[k].ptr, f[k].len);
        a[f[k].len] = '\0';
        at[k] = a;
        a += f[k].len + 1;
      }
      u->users[i] = (mqr_user_t){mqr_str_n(at[0], v[i].name.len), mqr_str_n(at[1], v[i].roles.len), at[2],
                                 v[i].scram.len ? at[3] : NULL};
    }
    u->n = n;
    u->arena = arena;
    u->dummy = a;
    if (mqr_password_hash("mqr", 3, u->dummy, err) != 0) rc = err ? err->code : MQR_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) mqr_free(v[i].roles_own);
  mqr_free(v);
  mqr_free(text);
  mqr_free(rtext);
  if (rc) {
    if (u) {
      mqr_free(u->users);
      mqr_free(u);
    }
    mqr_free(arena);
    return rc;
  }
  *out = u;
  return 0;
}

void mqr_users_destroy(mqr_users_t *u) {
  if (u == NULL) return;
  mqr_free(u->arena);
  mqr_free(u->users);
  mqr_free(u);
}

uint32_t mqr_users_count(const mqr_users_t *u) { return u->n; }

bool mqr_users_at(const mqr_users_t *u, uint32_t i, mqr_user_t *out) {
  if (i >= u->n) return false;
  *out = u->users[i];
  return true;
}

bool mqr_users_find(const mqr_users_t *u, mqr_str_t name, mqr_user_t *out) {
  uint32_t lo = 0, hi = u->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    mqr_str_t m = u->users[mid].name;
    size_t k = m.len < name.len ? m.len : name.len;
    int c = memcmp(m.ptr, name.ptr, k);
    if (c == 0) c = (m.len > name.len) - (m.len < name.len);
    if (c == 0) {
      *out = u->users[mid];
      return true;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

int mqr_users_verify(const mqr_users_t *u, mqr_str_t name, const char *password, size_t len, mqr_user_t *out) {
  mqr_user_t x;
  if (!mqr_users_find(u, name, &x)) {
    (void)mqr_password_verify(u->dummy, password, len); /* the same cost as a known name's */
    return MQR_EAUTH;
  }
  if (!mqr_password_verify(x.hash, password, len)) return MQR_EAUTH;
  if (out) *out = x;
  return 0;
}
