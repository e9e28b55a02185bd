/* A node's Raft groups on the loop (cluster.h). */
#include "cluster.h"

#include <errno.h>
#include <raft/uv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crc.h"
#include "pool.h"

#define MAX_GROUPS 64
#define MAX_NODES 16
/* A log entry's records at most: the log libraft keeps in memory until a snapshot is up to
 * snapshot-threshold of them. */
#define BATCH_MAX (64u << 10)

typedef struct {
  mqr__cluster_t *c;
  uint32_t index;
  struct raft_uv_transport tr;
  struct raft_io io;
  mqr__rgroup_t *g;
  mqr__rstate_t *state;
  char address[64];
  bool tr_open, io_open, closing;
} node_group_t;

#define TRIM_MS 5000
#define TICK_MS 250 /* the owner's tick (opt.tick) */

struct mqr__cluster_s {
  uv_loop_t *loop;
  mqr__cluster_options_t opt;
  uv_prepare_t tick;
  node_group_t *groups;
  uint32_t n_groups;
  uint32_t open_groups; /* not yet closed */
  bool tick_open;
  bool closing;
  uint64_t trimmed;    /* when the pool was last trimmed (the loop's ms) */
  uint64_t ticked;     /* when opt.tick was last called */
  mqr__links_t *links; /* the Raft links over TLS, or NULL */
  void (*closed_cb)(void *arg);
  void *closed_arg;
};

/* ---- the state machine: the group's records into its replicated state ---------------------- */

static int sm_apply(void *arg, const mqr_journal_record_t *r) {
  node_group_t *ng = arg;
  return mqr__rstate_apply(ng->state, r);
}

static int sm_snapshot(void *arg, mqr__rgroup_snap_t *s) {
  node_group_t *ng = arg;
  return mqr__rstate_snapshot(ng->state, s);
}

static void sm_reset(void *arg) {
  node_group_t *ng = arg;
  mqr__rstate_reset(ng->state);
}

static void sm_leadership(void *arg, bool leader) {
  node_group_t *ng = arg;
  mqr__cluster_t *c = ng->c;
  if (c->opt.leadership) c->opt.leadership(c->opt.arg, ng->index, leader);
}

static void sm_disk_failed(void *arg, const char *why, bool leading) {
  node_group_t *ng = arg;
  mqr__cluster_t *c = ng->c;
  if (c->opt.disk_failed) c->opt.disk_failed(c->opt.arg, ng->index, why, leading);
}

static void sm_answered(void *arg) {
  node_group_t *ng = arg;
  mqr__cluster_t *c = ng->c;
  if (c->opt.answered) c->opt.answered(c->opt.arg, ng->index);
}

static void tick_cb(uv_prepare_t *h) {
  mqr__cluster_t *c = h->data;
  if (c->closing) { /* (groups waiting for their writes, then closing: the owner is going) */
    for (uint32_t i = 0; i < c->n_groups; i++)
      if (c->groups[i].g && c->groups[i].closing) mqr__rgroup_close_step(c->groups[i].g);
    return;
  }
  for (uint32_t i = 0; i < c->n_groups; i++)
    if (c->groups[i].g && !c->groups[i].closing) mqr__rgroup_flush(c->groups[i].g);
  uint64_t now = uv_now(c->loop);
  if (c->opt.tick && now - c->ticked >= TICK_MS) {
    c->ticked = now;
    c->opt.tick(c->opt.arg);
  }
  if (now - c->trimmed >= TRIM_MS) { /* (what a burst left in the pool goes back within 2 of these) */
    mqr__rpool_trim();
    c->trimmed = now;
  }
}

/* ---- addresses ------------------------------------------------------------------------------- */

bool mqr__cluster_group_address(const char *address, uint32_t g, char *out, size_t cap) {
  const char *colon = address ? strrchr(address, ':') : NULL;
  if (colon == NULL || colon == address) return false;
  char *end = NULL;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (errno || end == colon + 1 || *end || port == 0 || port + g > 65535) return false;
  int n = snprintf(out, cap, "%.*s:%lu", (int)(colon - address), address, port + g);
  return n > 0 && (size_t)n < cap;
}

uint32_t mqr__cluster_group_of(const mqr__cluster_t *c, mqr_str_t address) { return mqr__fnv1a(address) % c->n_groups; }

/* ---- opening ----------------------------------------------------------------------------------- */

static int check(const mqr__cluster_options_t *opt, mqr_error_t *err) {
  char a[64];
  if (opt->node_id == 0) return mqr_error_set(err, MQR_EINVAL, "cluster: node-id must be a positive number");
  if (opt->groups > MAX_GROUPS) return mqr_error_set(err, MQR_EINVAL, "cluster: at most %d groups", MAX_GROUPS);
  if (opt->n_peers + 1 > MAX_NODES)
    return mqr_error_set(err, MQR_EINVAL, "cluster: at most %d nodes (this one and %d peers)", MAX_NODES,
                         MAX_NODES - 1);
  uint32_t groups = opt->groups ? opt->groups : 1;
  if (!mqr__cluster_group_address(opt->bind, groups - 1, a, sizeof a))
    return mqr_error_set(err, MQR_EINVAL, "cluster: bind '%s' is not IP:PORT (with room for %u groups' ports)",
                         opt->bind ? opt->bind : "", groups);
  if (opt->directory == NULL) return mqr_error_set(err, MQR_EINVAL, "cluster: a data directory is needed");
  for (uint32_t i = 0; i < opt->n_peers; i++) {
    const mqr__cluster_peer_t *p = &opt->peers[i];
    if (p->id == 0 || p->id == opt->node_id)
      return mqr_error_set(err, MQR_EINVAL, "cluster: peer %u has the id %llu (0, or this node's)", i + 1,
                           (unsigned long long)p->id);
    for (uint32_t k = 0; k < i; k++)
      if (opt->peers[k].id == p->id)
        return mqr_error_set(err, MQR_EINVAL, "cluster: two peers have the id %llu", (unsigned long long)p->id);
    if (!mqr__cluster_group_address(p->address, groups - 1, a, sizeof a))
      return mqr_error_set(err, MQR_EINVAL, "cluster: peer %llu's address '%s' is not IP:PORT",
                           (unsigned long long)p->id, p->address ? p->address : "");
  }
  return 0;
}

static void group_closed(void *arg);

static int open_group(mqr__cluster_t *c, node_group_t *ng, mqr_error_t *err) {
  const mqr__cluster_options_t *opt = &c->opt;
  char dir[4096];
  if (snprintf(dir, sizeof dir, "%s/g%u", opt->directory, ng->index) >= (int)sizeof dir)
    return mqr_error_set(err, MQR_EINVAL, "cluster: directory name too long");
  if (mkdir(opt->directory, 0700) != 0 && errno != EEXIST)
    return mqr_error_set(err, MQR_EIO, "cluster: %s: %s", opt->directory, strerror(errno));
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return mqr_error_set(err, MQR_EIO, "cluster: %s: %s", dir, strerror(errno));
  mqr__cluster_group_address(opt->bind, ng->index, ng->address, sizeof ng->address);
  if ((ng->state = mqr__rstate_new()) == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory for a group");
  if ((c->links ? mqr__links_transport(c->links, &ng->tr) : raft_uv_tcp_init(&ng->tr, c->loop)) != 0)
    return mqr_error_set(err, MQR_ENOMEM, "cluster: a transport");
  ng->tr_open = true;
  if (raft_uv_init(&ng->io, c->loop, dir, &ng->tr) != 0)
    return mqr_error_set(err, MQR_EIO, "cluster: group %u (%s): %s", ng->index, dir, ng->io.errmsg);
  ng->io_open = true;
  raft_uv_set_connect_retry_delay(&ng->io, 100); /* (a peer back from a restart is heard soon) */
  if (opt->segment_size) raft_uv_set_segment_size(&ng->io, opt->segment_size);
  mqr__rgroup_options_t go = {.id = opt->node_id,
                              .address = ng->address,
                              .fsm = {ng, sm_apply, sm_snapshot, sm_reset, sm_leadership, sm_disk_failed, sm_answered},
                              .election_timeout_ms = opt->election_timeout,
                              .heartbeat_timeout_ms = opt->heartbeat_timeout,
                              .snapshot_threshold = opt->snapshot_threshold,
                              .max_batch = BATCH_MAX,
                              .send_max = opt->send_max};
  int rc = mqr__rgroup_new(&go, &ng->g, err);
  if (rc == 0) rc = mqr__rgroup_open(ng->g, &ng->io, err);
  if (rc) {
    mqr__rgroup_free(ng->g); /* (libraft never took the io: it is closed as it is) */
    ng->g = NULL;
    return rc;
  }
  raft_id ids[MAX_NODES];
  char addrs[MAX_NODES][64];
  const char *ap[MAX_NODES];
  ids[0] = opt->node_id, ap[0] = ng->address;
  for (uint32_t i = 0; i < opt->n_peers; i++) {
    mqr__cluster_group_address(opt->peers[i].address, ng->index, addrs[i], sizeof addrs[i]);
    ids[i + 1] = opt->peers[i].id, ap[i + 1] = addrs[i];
  }
  rc = opt->join ? 0 : mqr__rgroup_bootstrap(ng->g, opt->n_peers + 1, ids, ap, err);
  if (rc == 0 && (rc = mqr__rgroup_start(ng->g, err)) != 0 && err && ng->tr.errmsg[0]) {
    char was[sizeof err->message]; /* (libraft's transport says why it could not listen) */
    snprintf(was, sizeof was, "%s", err->message);
    mqr_error_set(err, rc, "%s: %s", was, ng->tr.errmsg);
  }
  return rc;
}

int mqr__cluster_open(uv_loop_t *loop, const mqr__cluster_options_t *opt, mqr__cluster_t **out, mqr_error_t *err) {
  int rc = check(opt, err);
  if (rc) return rc;
  mqr__crc_init(); /* (libraft's checksum: crc.h) */
  mqr__cluster_t *c = mqr_calloc(1, sizeof *c);
  uint32_t n = opt->groups ? opt->groups : 1;
  if (c == NULL || (c->groups = mqr_calloc(n, sizeof *c->groups)) == NULL) {
    mqr_free(c);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory for the cluster");
  }
  c->loop = loop;
  c->opt = *opt; /* (its strings are the caller's, for as long as the node is open) */
  c->n_groups = n;
  for (uint32_t i = 0; i < n; i++) c->groups[i] = (node_group_t){.c = c, .index = i};
  if (opt->tls && (rc = mqr__links_new(loop, opt->tls, &c->links, err)) != 0) {
    mqr_free(c->groups);
    mqr_free(c);
    return rc;
  }
  uv_prepare_init(loop, &c->tick);
  c->tick.data = c;
  c->tick_open = true;
  for (uint32_t i = 0; i < n && rc == 0; i++) rc = open_group(c, &c->groups[i], err);
  if (rc) {
    mqr__cluster_close(c, NULL, NULL);
    return rc;
  }
  uv_prepare_start(&c->tick, tick_cb);
  *out = c;
  return 0;
}

/* ---- closing ------------------------------------------------------------------------------------- */

static void maybe_done(mqr__cluster_t *c) {
  if (c->open_groups || c->tick_open) return;
  for (uint32_t i = 0; i < c->n_groups; i++) {
    node_group_t *ng = &c->groups[i];
    mqr__rgroup_free(ng->g);
    mqr__rstate_free(ng->state);
  }
  void (*cb)(void *) = c->closed_cb;
  void *arg = c->closed_arg;
  mqr__links_free(c->links);
  mqr_free(c->groups);
  mqr_free(c);
  if (cb) cb(arg);
}

static void tick_closed(uv_handle_t *h);

/* The tick goes once every group has closed (it steps the closes: mqr__rgroup_close_step). */
static void close_tick(mqr__cluster_t *c) {
  if (c->open_groups == 0 && c->tick_open && !uv_is_closing((uv_handle_t *)&c->tick))
    uv_close((uv_handle_t *)&c->tick, tick_closed);
}

static void close_transport(node_group_t *ng) {
  if (ng->c->links)
    mqr__links_transport_free(&ng->tr);
  else
    raft_uv_tcp_close(&ng->tr);
}

/* The group's Raft instance closed its io: the io and the transport go too. */
static void group_closed(void *arg) {
  node_group_t *ng = arg;
  mqr__cluster_t *c = ng->c;
  if (ng->io_open) raft_uv_close(&ng->io);
  if (ng->tr_open) close_transport(ng);
  ng->io_open = ng->tr_open = false;
  c->open_groups--;
  close_tick(c);
  maybe_done(c);
}

static void tick_closed(uv_handle_t *h) {
  mqr__cluster_t *c = h->data;
  c->tick_open = false;
  maybe_done(c);
}

void mqr__cluster_close(mqr__cluster_t *c, void (*cb)(void *arg), void *arg) {
  c->closed_cb = cb, c->closed_arg = arg;
  c->closing = true;
  c->open_groups = c->n_groups;
  for (uint32_t i = 0; i < c->n_groups; i++) {
    node_group_t *ng = &c->groups[i];
    ng->closing = true;
    if (ng->g) {
      mqr__rgroup_close(ng->g, group_closed, ng); /* (libraft closes the io) */
      continue;
    }
    /* never got a Raft instance: its io and transport as they are */
    if (ng->io_open) raft_uv_close(&ng->io); /* (raft_init never ran: nothing of it is open) */
    if (ng->tr_open) close_transport(ng);
    ng->io_open = ng->tr_open = false;
    c->open_groups--;
  }
  close_tick(c);
  maybe_done(c); /* (no group at all) */
}

/* ---- looking --------------------------------------------------------------------------------- */

uint32_t mqr__cluster_groups(const mqr__cluster_t *c) { return c->n_groups; }
mqr__rgroup_t *mqr__cluster_group(mqr__cluster_t *c, uint32_t g) { return g < c->n_groups ? c->groups[g].g : NULL; }
mqr__rstate_t *mqr__cluster_state(mqr__cluster_t *c, uint32_t g) { return g < c->n_groups ? c->groups[g].state : NULL; }

void mqr__cluster_status(mqr__cluster_t *c, uint32_t g, mqr__cluster_status_t *out) {
  memset(out, 0, sizeof *out);
  if (g >= c->n_groups || c->groups[g].g == NULL) return;
  mqr__rgroup_t *gr = c->groups[g].g;
  struct raft *r = mqr__rgroup_raft(gr);
  out->leading = mqr__rgroup_leading(gr);
  out->leader_id = mqr__rgroup_leader(gr, &out->leader);
  out->term = r->current_term;
  out->commit_index = r->commit_index;
  out->applied_index = r->last_applied;
  out->sends_refused = mqr__rgroup_sends_refused(gr);
  if (raft_state(r) != RAFT_LEADER || r->leader_state.progress == NULL) return;
  raft_index last = raft_last_index(r);
  for (unsigned i = 0; i < r->configuration.n && out->n_followers < 16; i++) {
    const struct raft_server *s = &r->configuration.servers[i];
    if (s->id == r->id) continue;
    raft_index match = r->leader_state.progress[i].match_index;
    out->followers[out->n_followers].id = s->id;
    out->followers[out->n_followers].lag = last > match ? last - match : 0;
    out->n_followers++;
  }
}
