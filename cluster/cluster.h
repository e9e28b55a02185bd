/* A node of an mqr cluster: its Raft groups (group.h), each over raft_uv and its TCP
 * transport (libraft's, or TLS: link.h) on the broker's loop, each with its replicated state (state.h). Private to
 * mqr.
 *
 * Groups: replicated addresses are spread over `groups` groups by a stable hash of the
 * address's name (FNV-1a, 32 bits, modulo groups: mqr__cluster_group_of), so that every
 * node puts an address in the same group. Group g of a node listens at the node's port
 * plus g (a node at 127.0.0.1:7001 with 3 groups uses 7001, 7002 and 7003), and its
 * data is in DIRECTORY/gG. Every node of the cluster is a voter of every group.
 *
 * Each loop pass (a uv_prepare handle), every group proposes what was appended to it in
 * the pass, as one entry. The owner hears of each change of a group's leadership on this
 * node (the callback), appends records to the groups this node leads, and reads a
 * group's state when it comes to lead it.
 *
 * Threads: the loop's. */
#ifndef MQR_CLUSTER_CLUSTER_H
#define MQR_CLUSTER_CLUSTER_H

#include <uv.h>

#include "group.h"
#include "link.h"
#include "state.h"

typedef struct mqr__cluster_s mqr__cluster_t;

typedef struct {
  uint64_t id;         /* not 0 */
  const char *address; /* "IP:PORT": its group 0's; group g at PORT + g */
} mqr__cluster_peer_t;

typedef struct {
  uint64_t node_id;                 /* this node's, not 0, not a peer's */
  const char *bind;                 /* this node's "IP:PORT" (as the peers know it) */
  const mqr__cluster_peer_t *peers; /* the other nodes */
  uint32_t n_peers;
  uint32_t groups;           /* 0: 1; at most 64 */
  const char *directory;     /* the groups' data: directory/g0, /g1, ... (made if missing) */
  unsigned election_timeout; /* ms; 0: 1000 */
  unsigned heartbeat_timeout;
  unsigned snapshot_threshold;
  size_t segment_size; /* of the Raft log's segment files, bytes (0: libraft's, 8 MiB) */
  size_t send_max;     /* bytes of entries in flight to one follower at most (0: 32 MiB; group.h) */
  bool join;           /* a node added to a running cluster: its groups start empty, not bootstrapped */
  /* The Raft links over TLS (link.h), as these say; NULL: libraft's plain TCP transport. */
  const mqr__links_options_t *tls;
  /* This node leads group g now (true) or no longer (false). May be NULL. */
  void (*leadership)(void *arg, uint32_t g, bool leader);
  /* This node could not write group g's log (leading: it led, and hands the group over;
   * else as a follower: group.h's disk_failed). */
  void (*disk_failed)(void *arg, uint32_t g, const char *why, bool leading);
  /* A proposal of group g was answered (mqr__rgroup_seq_done). */
  void (*answered)(void *arg, uint32_t g);
  /* About every 250 ms: the owner looks at the groups' leaders. May be NULL. */
  void (*tick)(void *arg);
  void *arg;
} mqr__cluster_options_t;

/* Opens the node's groups and starts them (a new cluster's groups bootstrap with every
 * node as a voter; a restart reads its logs). *out on success; MQR_EINVAL (err says what
 * in opt), MQR_EIO (a directory, a port, a log: err says which), MQR_ENOMEM. */
int mqr__cluster_open(uv_loop_t *loop, const mqr__cluster_options_t *opt, mqr__cluster_t **out, mqr_error_t *err);
/* Stops every group (pending callbacks get MQR_ECLOSED), then frees the node and calls
 * cb(arg) (may be NULL) once its handles are closed. */
void mqr__cluster_close(mqr__cluster_t *c, void (*cb)(void *arg), void *arg);

uint32_t mqr__cluster_groups(const mqr__cluster_t *c);
/* A node's address for group g ("IP:PORT" with PORT moved by g) into out: false if the
 * address does not read. */
bool mqr__cluster_group_address(const char *address, uint32_t g, char *out, size_t cap);
uint32_t mqr__cluster_group_of(const mqr__cluster_t *c, mqr_str_t address);
mqr__rgroup_t *mqr__cluster_group(mqr__cluster_t *c, uint32_t g);
mqr__rstate_t *mqr__cluster_state(mqr__cluster_t *c, uint32_t g);

typedef struct {
  bool leading;
  uint64_t leader_id; /* 0: none known */
  const char *leader; /* its address for this group, or NULL */
  uint64_t term, commit_index, applied_index;
  uint64_t sends_refused; /* appends for a follower refused as past send_max (since the start) */
  /* When leading: each other voter's lag, entries behind this node's last. */
  uint32_t n_followers;
  struct {
    uint64_t id;
    uint64_t lag;
  } followers[16];
} mqr__cluster_status_t;
void mqr__cluster_status(mqr__cluster_t *c, uint32_t g, mqr__cluster_status_t *out);

#endif
