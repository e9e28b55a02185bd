/* The security section (docs/security.md): the users file, anonymous clients, the
 * authentication cache, and security-settings as Artemis defines them (a match, and per
 * permission the roles that have it). */
#include "config_int.h"

static const char *const perm_names[MQR_PERMISSIONS] = {"send",
                                                        "consume",
                                                        "browse",
                                                        "create-address",
                                                        "delete-address",
                                                        "create-durable-queue",
                                                        "delete-durable-queue",
                                                        "create-non-durable-queue",
                                                        "delete-non-durable-queue",
                                                        "manage"};
/* Artemis's broker.xml spells them so: taken too, for a config moved over. */
static const char *const artemis_names[MQR_PERMISSIONS] = {"send",
                                                           "consume",
                                                           "browse",
                                                           "createAddress",
                                                           "deleteAddress",
                                                           "createDurableQueue",
                                                           "deleteDurableQueue",
                                                           "createNonDurableQueue",
                                                           "deleteNonDurableQueue",
                                                           "manage"};

const char *mqr_permission_name(int p) { return p >= 0 && p < MQR_PERMISSIONS ? perm_names[p] : NULL; }

void mqr__cfg_security_defaults(mqr_security_config_t *s) {
  *s = (mqr_security_config_t){.present = false,
                               .users_file = NULL,
                               .roles_file = NULL,
                               .allow_anonymous = false,
                               .anonymous_roles = {"", 0},
                               .cache_size = 1000,
                               .cache_ttl_ms = 10000};
}

/* A path as written, relative to the config file's folder unless absolute. */
char *mqr__cfg_path(ctx_t *c, mqr_str_t p) {
  const char *slash = strrchr(c->file, '/');
  if (p.len && p.ptr[0] == '/') return mqr__cfg_dup_n(c, p.ptr, p.len);
  if (slash == NULL || c->file[0] == '<') return mqr__cfg_dup_n(c, p.ptr, p.len);
  size_t dir = (size_t)(slash - c->file) + 1, n = dir + p.len;
  char *out = mqr_malloc(n + 1);
  if (out == NULL) {
    c->nomem = true;
    return NULL;
  }
  memcpy(out, c->file, dir);
  memcpy(out + dir, p.ptr, p.len);
  out[n] = '\0';
  return out;
}

static bool role_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
         ch == '.';
}

/* Roles: a list of names, or one string of names separated by commas (empty or ~: none);
 * written into out (cap bytes) joined by commas. False: an error was reported. */
static bool get_roles(ctx_t *c, const yaml_node_t *n, const char *what, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  const yaml_node_item_t *start = NULL, *top = NULL;
  if (n->type == YAML_SEQUENCE_NODE) {
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
  } else if (n->type != YAML_SCALAR_NODE) {
    ERR(c, n, "%s must be a list of roles, not %s", what, mqr__cfg_kind_name(n));
    return false;
  } else if (mqr__cfg_is_null(n) || mqr__cfg_scalar(n).len == 0) {
    return true; /* nobody */
  }
  for (const yaml_node_item_t *it = start;; it++) {
    const yaml_node_t *r = start ? (it < top ? mqr__cfg_node(c, *it) : NULL) : n;
    if (r == NULL) break;
    mqr_str_t v = r->type == YAML_SCALAR_NODE ? mqr__cfg_scalar(r) : MQR_STR("");
    const char *p = v.ptr, *end = v.ptr + v.len;
    do { /* each name between commas */
      const char *comma = memchr(p, ',', (size_t)(end - p));
      const char *e = comma ? comma : end;
      while (p < e && *p == ' ') p++;
      while (e > p && e[-1] == ' ') e--;
      bool ok = p < e;
      for (const char *q = p; q < e; q++) ok = ok && role_char(*q);
      if (!ok) {
        ERR(c, r, "%s: a role is a name of letters, digits, '_', '-' and '.', not '%.*s'", what, (int)v.len,
            v.ptr ? v.ptr : "");
        return false;
      }
      if (len + (size_t)(e - p) + 2 > cap) {
        ERR(c, n, "%s: the roles are longer than %zu bytes together", what, cap - 2);
        return false;
      }
      if (len) out[len++] = ',';
      memcpy(out + len, p, (size_t)(e - p));
      len += (size_t)(e - p);
      p = comma ? comma + 1 : end;
      if (comma && p == end) { /* a trailing comma */
        ERR(c, r, "%s: an empty role name in '%.*s'", what, (int)v.len, v.ptr);
        return false;
      }
    } while (p < end);
    if (start == NULL) break;
  }
  out[len] = '\0';
  return true;
}

static void parse_setting(ctx_t *c, yaml_node_pair_t *entry) {
  mqr_config_t *cfg = c->cfg;
  yaml_node_t *key = mqr__cfg_node(c, entry->key), *map = mqr__cfg_node(c, entry->value);
  if (!mqr__cfg_check_key(c, key, "security-settings")) return;
  mqr_str_t match = mqr__cfg_scalar(key);
  mqr_error_t e;
  if (mqr_settings_match_validate(&cfg->wildcard, match, &e) != 0) {
    ERR(c, key, "security-settings: %s", e.message);
    return;
  }
  for (uint32_t i = 0; i < cfg->n_secsets; i++)
    if (mqr_str_eq(cfg->secsets[i].pub.match, match)) {
      ERR(c, key, "security-settings: match '%.*s' repeated (first at line %u)", (int)match.len, match.ptr,
          cfg->secsets[i].pub.line);
      return;
    }
  char where[300];
  snprintf(where, sizeof where, "security-settings '%.*s'", (int)(match.len > 200 ? 200 : match.len), match.ptr);
  static char roles[MQR_PERMISSIONS][4096];
  bool given[MQR_PERMISSIONS] = {false};
  if (!mqr__cfg_is_null(map) && !mqr__cfg_want(c, map, YAML_MAPPING_NODE, where)) return;
  if (!mqr__cfg_is_null(map)) {
    FOREACH_PAIR(c, map, p) {
      if (!mqr__cfg_key(c, map, p_it, &p, where)) continue;
      int k = -1;
      for (int i = 0; i < MQR_PERMISSIONS; i++)
        if (mqr_str_eq(p.name, mqr_str(perm_names[i])) || mqr_str_eq(p.name, mqr_str(artemis_names[i]))) k = i;
      if (k < 0) {
        mqr__cfg_unknown_key(c, &p, where,
                             "send, consume, browse, create-address, delete-address, create-durable-queue, "
                             "delete-durable-queue, create-non-durable-queue, delete-non-durable-queue, manage");
        continue;
      }
      if (given[k]) {
        ERR(c, p.key, "%s: '%s' given twice", where, perm_names[k]);
        continue;
      }
      char what[340];
      snprintf(what, sizeof what, "%s: %s", where, perm_names[k]);
      if (get_roles(c, p.value, what, roles[k], sizeof roles[k])) given[k] = true;
    }
  }
  size_t bytes = match.len + 1;
  for (int i = 0; i < MQR_PERMISSIONS; i++) bytes += (given[i] ? strlen(roles[i]) : 0) + 1;
  if (!mqr__cfg_grow(c, (void **)&cfg->secsets, cfg->n_secsets, &cfg->cap_secsets, sizeof *cfg->secsets)) return;
  char *text = mqr_malloc(bytes);
  if (text == NULL) {
    c->nomem = true;
    return;
  }
  cfg_secset_t *s = &cfg->secsets[cfg->n_secsets++];
  s->text = text;
  memcpy(text, match.ptr, match.len);
  text[match.len] = '\0';
  s->pub.match = mqr_str_n(text, match.len);
  char *at = text + match.len + 1;
  for (int i = 0; i < MQR_PERMISSIONS; i++) {
    size_t n = given[i] ? strlen(roles[i]) : 0;
    memcpy(at, given[i] ? roles[i] : "", n + 1);
    s->pub.roles[i] = mqr_str_n(at, n);
    at += n + 1;
  }
  s->pub.line = (uint32_t)key->start_mark.line + 1;
  s->pub.column = (uint32_t)key->start_mark.column + 1;
}

void mqr__cfg_parse_security(ctx_t *c, yaml_node_t *map) {
  mqr_config_t *cfg = c->cfg;
  mqr_security_config_t *s = &cfg->security;
  s->present = true;
  s->line = (uint32_t)map->start_mark.line + 1;
  s->column = (uint32_t)map->start_mark.column + 1;
  if (mqr__cfg_is_null(map) || !mqr__cfg_want(c, map, YAML_MAPPING_NODE, "security")) return;
  static const char known[] = "users-file, roles-file, allow-anonymous, anonymous-roles, authentication-cache-size, "
                              "authentication-cache-ttl, security-settings";
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "security")) continue;
    int64_t v;
    mqr_str_t str;
    if (mqr_str_eq(p.name, MQR_STR("users-file")) || mqr_str_eq(p.name, MQR_STR("roles-file"))) {
      if (!mqr__cfg_get_string(c, &p, &str)) continue;
      if (str.len == 0 || memchr(str.ptr, 0, str.len)) {
        ERR(c, p.value, "'%.*s' must name a file", (int)p.name.len, p.name.ptr);
        continue;
      }
      bool users = p.name.ptr[0] == 'u';
      char **own = users ? &cfg->users_file : &cfg->roles_file;
      mqr_free(*own);
      *own = mqr__cfg_path(c, str);
      *(users ? &s->users_file : &s->roles_file) = *own;
    } else if (mqr_str_eq(p.name, MQR_STR("allow-anonymous"))) {
      mqr__cfg_get_bool(c, &p, &s->allow_anonymous);
    } else if (mqr_str_eq(p.name, MQR_STR("anonymous-roles"))) {
      char roles[4096];
      if (get_roles(c, p.value, "anonymous-roles", roles, sizeof roles)) {
        mqr_free(cfg->anonymous_roles);
        cfg->anonymous_roles = mqr__cfg_dup_n(c, roles, strlen(roles));
        if (cfg->anonymous_roles) s->anonymous_roles = mqr_str_n(cfg->anonymous_roles, strlen(roles));
      }
    } else if (mqr_str_eq(p.name, MQR_STR("authentication-cache-size"))) {
      if (mqr__cfg_get_int(c, &p, false, 0, 10000000, &v)) s->cache_size = (uint32_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("authentication-cache-ttl"))) {
      if (mqr__cfg_get_duration(c, &p, 24 * 3600000, &v)) s->cache_ttl_ms = (uint32_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("security-settings"))) {
      if (mqr__cfg_is_null(p.value) || !mqr__cfg_want(c, p.value, YAML_MAPPING_NODE, "security-settings")) continue;
      for (yaml_node_pair_t *e = p.value->data.mapping.pairs.start; e < p.value->data.mapping.pairs.top && !c->nomem;
           e++)
        parse_setting(c, e);
    } else {
      mqr__cfg_unknown_key(c, &p, "security", known);
    }
  }
  if (s->roles_file && !s->users_file)
    ERR(c, map, "security: roles-file is for an Artemis users-file, and there is no users-file");
}

void mqr__cfg_free_security(mqr_config_t *cfg) {
  for (uint32_t i = 0; i < cfg->n_secsets; i++) mqr_free(cfg->secsets[i].text);
  mqr_free(cfg->secsets);
  mqr_free(cfg->users_file);
  mqr_free(cfg->roles_file);
  mqr_free(cfg->anonymous_roles);
}

const mqr_security_config_t *mqr_config_security(const mqr_config_t *cfg) { return &cfg->security; }

uint32_t mqr_config_security_setting_count(const mqr_config_t *cfg) { return cfg->n_secsets; }

const mqr_security_setting_t *mqr_config_security_setting(const mqr_config_t *cfg, uint32_t i) {
  return i < cfg->n_secsets ? &cfg->secsets[i].pub : NULL;
}
