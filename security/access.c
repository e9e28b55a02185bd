/* security-settings compiled: each role the settings name gets a bit, each entry a row of
 * role sets per permission, rows sorted most specific first so that the first match of
 * an address is the one that governs it (Artemis's HierarchicalRepository: the most
 * specific match wins whole, nothing inherited). */
#include <stdlib.h>
#include <string.h>

#include "security_int.h"

struct mqr_access_s {
  mqr_wildcard_t wc;
  mqr_access_row_t *rows;
  uint32_t n_rows;
  char *names[64]; /* role bit i's name */
  uint32_t n_names;
  char *text; /* the rows' matches */
};

static const mqr_wildcard_t *sort_wc;

static int by_precedence(const void *a, const void *b) {
  return mqr_settings_match_compare(sort_wc, ((const mqr_access_row_t *)a)->match,
                                    ((const mqr_access_row_t *)b)->match);
}

/* The bit of role name (made when make and there is room): 0 when none. */
static mqr_roles_t role_bit(mqr_access_t *a, mqr_str_t name, bool make, bool *full) {
  for (uint32_t i = 0; i < a->n_names; i++)
    if (strlen(a->names[i]) == name.len && memcmp(a->names[i], name.ptr, name.len) == 0) return (mqr_roles_t)1 << i;
  if (!make) return 0;
  if (a->n_names == 64) {
    *full = true;
    return 0;
  }
  char *copy = mqr_malloc(name.len + 1);
  if (copy == NULL) return 0;
  memcpy(copy, name.ptr, name.len);
  copy[name.len] = '\0';
  a->names[a->n_names] = copy;
  return (mqr_roles_t)1 << a->n_names++;
}

/* Each name of a comma-separated list. */
static mqr_roles_t roles_of(mqr_access_t *a, mqr_str_t list, bool make, bool *full, bool *nomem) {
  mqr_roles_t set = 0;
  const char *p = list.ptr, *end = list.ptr + list.len;
  while (p < end) {
    const char *c = memchr(p, ',', (size_t)(end - p)), *e = c ? c : end;
    while (p < e && *p == ' ') p++;
    const char *t = e;
    while (t > p && t[-1] == ' ') t--;
    if (t > p) {
      mqr_roles_t bit = role_bit(a, mqr_str_n(p, (size_t)(t - p)), make, full);
      if (bit == 0 && make && !*full) *nomem = true;
      set |= bit;
    }
    p = c ? c + 1 : end;
  }
  return set;
}

void mqr_access_destroy(mqr_access_t *a) {
  if (a == NULL) return;
  for (uint32_t i = 0; i < a->n_names; i++) mqr_free(a->names[i]);
  mqr_free(a->rows);
  mqr_free(a->text);
  mqr_free(a);
}

int mqr_access_build(const mqr_config_t *cfg, mqr_access_t **out, mqr_error_t *err) {
  mqr_access_t *a = mqr_calloc(1, sizeof *a);
  uint32_t n = mqr_config_security_setting_count(cfg);
  size_t bytes = 1;
  for (uint32_t i = 0; i < n; i++) bytes += mqr_config_security_setting(cfg, i)->match.len + 1;
  if (a == NULL || (n && (a->rows = mqr_calloc(n, sizeof *a->rows)) == NULL) || (a->text = mqr_malloc(bytes)) == NULL) {
    mqr_access_destroy(a);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling security-settings");
  }
  a->wc = mqr_config_wildcard(cfg);
  char *t = a->text;
  bool full = false, nomem = false;
  for (uint32_t i = 0; i < n; i++) {
    const mqr_security_setting_t *s = mqr_config_security_setting(cfg, i);
    memcpy(t, s->match.ptr, s->match.len);
    t[s->match.len] = '\0';
    a->rows[i].match = mqr_str_n(t, s->match.len);
    t += s->match.len + 1;
    for (int p = 0; p < MQR_PERMISSIONS; p++) a->rows[i].allow[p] = roles_of(a, s->roles[p], true, &full, &nomem);
    if (full) {
      mqr_access_destroy(a);
      return mqr_error_set_at(err, MQR_ELIMIT, mqr_config_file(cfg), s->line, s->column,
                              "security-settings name more than 64 roles");
    }
    if (nomem) {
      mqr_access_destroy(a);
      return mqr_error_set(err, MQR_ENOMEM, "out of memory compiling security-settings");
    }
  }
  a->n_rows = n;
  sort_wc = &a->wc; /* qsort has no context argument; building is not concurrent */
  if (n) qsort(a->rows, n, sizeof *a->rows, by_precedence);
  *out = a;
  return 0;
}

bool mqr_access_enabled(const mqr_access_t *a) { return a->n_rows != 0; }

mqr_roles_t mqr_access_roles(const mqr_access_t *a, mqr_str_t roles) {
  bool full = false, nomem = false;
  return roles_of((mqr_access_t *)a, roles, false, &full, &nomem);
}

const mqr_access_row_t *mqr_access_lookup(const mqr_access_t *a, mqr_str_t address) {
  for (uint32_t i = 0; i < a->n_rows; i++)
    if (mqr_wildcard_match(&a->wc, a->rows[i].match, address)) return &a->rows[i];
  return NULL;
}
