/* The cluster section (docs/cluster.md): this node, its peers, the Raft groups and their
 * timeouts. Checked here as far as the text goes; whether the ports can be had is the
 * broker's to find out. */
#include <stdio.h>
#include <string.h>

#include "config_int.h"

/* "IP:PORT": an IPv4 or IPv6 literal (raft_uv's TCP transport takes no names), a port. */
static bool ip_port(mqr_str_t s) {
  const char *colon = NULL;
  for (size_t i = 0; i < s.len; i++)
    if (s.ptr[i] == ':') colon = s.ptr + i;
  if (colon == NULL || colon == s.ptr || (size_t)(s.ptr + s.len - colon) < 2 || (size_t)(s.ptr + s.len - colon) > 6)
    return false;
  int port = 0;
  for (const char *p = colon + 1; p < s.ptr + s.len; p++) {
    if (*p < '0' || *p > '9') return false;
    port = port * 10 + (*p - '0');
  }
  if (port < 1 || port > 65535) return false;
  char host[64];
  size_t hl = (size_t)(colon - s.ptr);
  if (hl >= sizeof host) return false;
  memcpy(host, s.ptr, hl);
  host[hl] = 0;
  for (size_t i = 0; i < hl; i++)
    if (!(host[i] == '.' || (host[i] >= '0' && host[i] <= '9'))) return false; /* (IPv4 dotted quads) */
  unsigned a, b, c, d;
  char extra;
  return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) == 4 && a < 256 && b < 256 && c < 256 && d < 256;
}

static char *address(ctx_t *c, const pair_t *p, const char *what) {
  mqr_str_t s;
  if (!mqr__cfg_get_string(c, p, &s)) return NULL;
  if (!ip_port(s)) {
    ERR(c, p->value, "%s must be IPv4-ADDRESS:PORT (the Raft transport takes no host names), not '%.*s'", what,
        (int)(s.len > 80 ? 80 : s.len), s.ptr);
    return NULL;
  }
  return mqr__cfg_dup_n(c, s.ptr, s.len);
}

/* cluster_strs[i] (user, password, tls ca, cert, key) set to v, owned by the config. */
static void set_str(ctx_t *c, int i, char *v) {
  mqr_cluster_config_t *cc = &c->cfg->cluster;
  mqr_free(c->cfg->cluster_strs[i]);
  c->cfg->cluster_strs[i] = v;
  const char **to[] = {&cc->user, &cc->password, &cc->tls_ca, &cc->tls_cert, &cc->tls_key};
  *to[i] = v;
}

/* tls: {ca, cert, key}: PEM files for the connections to the peers' tls:// urls. */
static void parse_tls(ctx_t *c, const pair_t *t) {
  if (!mqr__cfg_want(c, t->value, YAML_MAPPING_NODE, "cluster tls")) return;
  FOREACH_PAIR(c, t->value, p) {
    if (!mqr__cfg_key(c, t->value, p_it, &p, "cluster tls")) continue;
    mqr_str_t s;
    int i = mqr_str_eq(p.name, MQR_STR("ca"))     ? 2
            : mqr_str_eq(p.name, MQR_STR("cert")) ? 3
            : mqr_str_eq(p.name, MQR_STR("key"))  ? 4
                                                  : -1;
    if (i < 0) {
      mqr__cfg_unknown_key(c, &p, "cluster tls", "ca, cert, key");
      continue;
    }
    if (!mqr__cfg_get_string(c, &p, &s)) continue;
    if (s.len == 0 || memchr(s.ptr, 0, s.len)) {
      ERR(c, p.value, "cluster tls %.*s must name a file", (int)p.name.len, p.name.ptr);
      continue;
    }
    set_str(c, i, mqr__cfg_path(c, s));
  }
  if ((c->cfg->cluster.tls_cert == NULL) != (c->cfg->cluster.tls_key == NULL))
    ERR(c, t->value, "cluster tls needs both cert and key, or neither");
}

static void parse_peer(ctx_t *c, yaml_node_t *n, uint32_t i) {
  char where[32];
  snprintf(where, sizeof where, "cluster peer %u", i + 1);
  if (!mqr__cfg_want(c, n, YAML_MAPPING_NODE, where)) return;
  mqr_cluster_peer_config_t *peer = &c->cfg->cluster_peers[c->cfg->cluster.n_peers];
  *peer = (mqr_cluster_peer_config_t){0, NULL, NULL};
  FOREACH_PAIR(c, n, p) {
    if (!mqr__cfg_key(c, n, p_it, &p, where)) continue;
    int64_t v;
    if (mqr_str_eq(p.name, MQR_STR("id"))) {
      if (mqr__cfg_get_int(c, &p, false, 1, INT64_MAX, &v)) peer->id = (uint64_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("address"))) {
      mqr_free((char *)peer->address);
      peer->address = address(c, &p, "a peer's address");
    } else if (mqr_str_eq(p.name, MQR_STR("url"))) {
      mqr_str_t u;
      if (!mqr__cfg_get_string(c, &p, &u)) continue;
      if (u.len < 7 || (strncmp(u.ptr, "tcp://", 6) != 0 && strncmp(u.ptr, "tls://", 6) != 0)) {
        ERR(c, p.value, "%s: url must be tcp://HOST:PORT (where its clients connect)", where);
        continue;
      }
      mqr_free((char *)peer->url);
      peer->url = mqr__cfg_dup_n(c, u.ptr, u.len);
    } else {
      mqr__cfg_unknown_key(c, &p, where, "id, address, url");
    }
  }
  if (peer->id == 0 || peer->address == NULL) {
    ERR(c, n, "%s needs an id and an address", where);
    mqr_free((char *)peer->address);
    mqr_free((char *)peer->url);
    return;
  }
  for (uint32_t k = 0; k < c->cfg->cluster.n_peers; k++)
    if (c->cfg->cluster_peers[k].id == peer->id) {
      ERR(c, n, "%s has the id %llu of an earlier peer", where, (unsigned long long)peer->id);
      mqr_free((char *)peer->address);
      mqr_free((char *)peer->url);
      return;
    }
  c->cfg->cluster.n_peers++;
}

/* A timeout of min ms to a minute, into *out. */
static void timeout_ms(ctx_t *c, const pair_t *p, int64_t min, uint32_t *out) {
  int64_t v;
  if (!mqr__cfg_get_duration(c, p, 60000, &v)) return;
  if (v < min)
    ERR(c, p->value, "%.*s must be at least %lld ms", (int)p->name.len, p->name.ptr, (long long)min);
  else
    *out = (uint32_t)v;
}

void mqr__cfg_parse_cluster(ctx_t *c, yaml_node_t *map) {
  mqr_cluster_config_t *cc = &c->cfg->cluster;
  cc->line = (uint32_t)map->start_mark.line + 1;
  cc->column = (uint32_t)map->start_mark.column + 1;
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, "cluster")) return;
  cc->enabled = true;
  static const char known[] =
      "node-id, bind, peers, groups, directory, election-timeout, heartbeat-timeout, "
      "snapshot-threshold, segment-size, follower-consumers, join, user, password, tls, raft-tls";
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "cluster")) continue;
    int64_t v;
    mqr_str_t s;
    if (mqr_str_eq(p.name, MQR_STR("node-id"))) {
      if (mqr__cfg_get_int(c, &p, false, 1, INT64_MAX, &v)) cc->node_id = (uint64_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("bind"))) {
      mqr_free(c->cfg->cluster_bind);
      cc->bind = c->cfg->cluster_bind = address(c, &p, "cluster bind");
    } else if (mqr_str_eq(p.name, MQR_STR("directory"))) {
      if (!mqr__cfg_get_string(c, &p, &s)) continue;
      if (s.len == 0 || memchr(s.ptr, 0, s.len)) {
        ERR(c, p.value, "'directory' must name a directory");
        continue;
      }
      mqr_free(c->cfg->cluster_dir);
      cc->directory = c->cfg->cluster_dir = mqr__cfg_dup_n(c, s.ptr, s.len);
    } else if (mqr_str_eq(p.name, MQR_STR("join"))) {
      mqr__cfg_get_bool(c, &p, &cc->join);
    } else if (mqr_str_eq(p.name, MQR_STR("raft-tls"))) {
      mqr__cfg_get_bool(c, &p, &cc->raft_tls);
    } else if (mqr_str_eq(p.name, MQR_STR("groups"))) {
      if (mqr__cfg_get_int(c, &p, false, 1, 64, &v)) cc->groups = (uint32_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("election-timeout"))) {
      timeout_ms(c, &p, 50, &cc->election_timeout_ms);
    } else if (mqr_str_eq(p.name, MQR_STR("heartbeat-timeout"))) {
      timeout_ms(c, &p, 10, &cc->heartbeat_timeout_ms);
    } else if (mqr_str_eq(p.name, MQR_STR("snapshot-threshold"))) {
      if (mqr__cfg_get_int(c, &p, false, 16, 100000000, &v)) cc->snapshot_threshold = (uint32_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("segment-size"))) {
      if (mqr__cfg_get_int(c, &p, true, (int64_t)1 << 20, (int64_t)1 << 30, &v)) cc->segment_size = (size_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("follower-consumers"))) {
      if (!mqr__cfg_get_string(c, &p, &s)) continue;
      if (mqr_str_eq(s, MQR_STR("feed")) || mqr_str_eq(s, MQR_STR("redirect")))
        cc->redirect_consumers = s.ptr[0] == 'r';
      else
        ERR(c, p.value, "cluster follower-consumers must be feed or redirect, not '%.*s'", (int)s.len, s.ptr);
    } else if (mqr_str_eq(p.name, MQR_STR("user")) || mqr_str_eq(p.name, MQR_STR("password"))) {
      if (!mqr__cfg_get_string(c, &p, &s)) continue;
      if (s.len == 0 || memchr(s.ptr, 0, s.len)) {
        ERR(c, p.value, "cluster %.*s must not be empty", (int)p.name.len, p.name.ptr);
        continue;
      }
      set_str(c, p.name.ptr[0] == 'u' ? 0 : 1, mqr__cfg_dup_n(c, s.ptr, s.len));
    } else if (mqr_str_eq(p.name, MQR_STR("tls"))) {
      parse_tls(c, &p);
    } else if (mqr_str_eq(p.name, MQR_STR("peers"))) {
      if (!mqr__cfg_want(c, p.value, YAML_SEQUENCE_NODE, "cluster peers")) continue;
      yaml_node_item_t *start = p.value->data.sequence.items.start, *top = p.value->data.sequence.items.top;
      if (top - start > 15) {
        ERR(c, p.value, "a cluster has at most 16 nodes (15 peers)");
        continue;
      }
      for (uint32_t i = 0; i < cc->n_peers; i++) {
        mqr_free((char *)c->cfg->cluster_peers[i].address);
        mqr_free((char *)c->cfg->cluster_peers[i].url);
      }
      cc->n_peers = 0;
      for (yaml_node_item_t *it = start; it < top; it++) parse_peer(c, mqr__cfg_node(c, *it), (uint32_t)(it - start));
    } else {
      mqr__cfg_unknown_key(c, &p, "cluster", known);
    }
  }
  cc->peers = c->cfg->cluster_peers;
  if (cc->password && cc->user == NULL) ERR(c, map, "cluster password needs a cluster user");
  if (cc->raft_tls && (cc->tls_ca == NULL || cc->tls_cert == NULL))
    ERR(c, map, "cluster raft-tls needs tls: {ca, cert, key} (the CA of every node's certificate, and this node's)");
  if (cc->node_id == 0) ERR(c, map, "cluster needs a node-id");
  if (cc->bind == NULL) ERR(c, map, "cluster needs a bind address (IP:PORT)");
  for (uint32_t i = 0; i < cc->n_peers; i++)
    if (cc->peers[i].id == cc->node_id)
      ERR(c, map, "cluster peer %u has this node's id %llu", i + 1, (unsigned long long)cc->node_id);
  if (cc->heartbeat_timeout_ms * 2 > cc->election_timeout_ms)
    ERR(c, map, "cluster heartbeat-timeout (%u ms) must be at most half the election-timeout (%u ms)",
        cc->heartbeat_timeout_ms, cc->election_timeout_ms);
}

void mqr__cfg_cluster_defaults(mqr_cluster_config_t *cc) {
  *cc = (mqr_cluster_config_t){.groups = 1,
                               .election_timeout_ms = 500,
                               .heartbeat_timeout_ms = 100,
                               .snapshot_threshold = 1024,
                               .segment_size = (size_t)32 << 20};
}

void mqr__cfg_free_cluster(mqr_config_t *cfg) {
  for (uint32_t i = 0; i < cfg->cluster.n_peers; i++) {
    mqr_free((char *)cfg->cluster_peers[i].address);
    mqr_free((char *)cfg->cluster_peers[i].url);
  }
  mqr_free(cfg->cluster_bind);
  mqr_free(cfg->cluster_dir);
  for (int i = 0; i < 5; i++) mqr_free(cfg->cluster_strs[i]);
}

const mqr_cluster_config_t *mqr_config_cluster(const mqr_config_t *cfg) { return &cfg->cluster; }
