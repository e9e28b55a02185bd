/* One Raft group of a cluster: a log of batches of journal records (mqr/journal.h's
 * record format), replicated by canonical raft (libraft 0.15, Debian's libraft-dev) over
 * a raft_io the caller makes: raft_uv on the broker's loop, libraft's fixture in the
 * tests. Private to mqr.
 *
 * The state machine is its owner's, through mqr__rgroup_fsm_t: every committed entry's
 * records are handed to it in log order on every node, the leader included, so that a
 * node that becomes leader already holds the state. The leader's owner appends records
 * (each with an optional callback) to the batch being gathered; mqr__rgroup_flush, once
 * per loop pass, proposes the batch as one log entry; when it commits, its records are
 * applied, then the callbacks run with 0, in append order. A batch whose leader lost its
 * leadership before the commit is reported MQR_EAGAIN: it may or may not commit (under a
 * later leader), so the answer to a client is "unknown: send again" (at least once).
 *
 * Snapshots: libraft asks for one every snapshot_threshold entries; the owner writes its
 * live state as records (mqr__rgroup_snapshot_record). A node restoring a snapshot is told
 * to reset its state, then gets the snapshot's records as if applied.
 *
 * Threads: every call on the thread of the raft_io's loop; callbacks run there. */
#ifndef MQR_CLUSTER_GROUP_H
#define MQR_CLUSTER_GROUP_H

#include <raft.h>

#include "mqr/common.h"
#include "mqr/journal.h"

typedef struct mqr__rgroup_s mqr__rgroup_t;
/* A snapshot being written: records laid out as an entry's (zeroed to start one outside
 * a group, as tests do; p is raft_malloc'd). */
typedef struct mqr__rgroup_snap_s {
  uint8_t *p;
  size_t len, cap;
} mqr__rgroup_snap_t;

/* A record's callback: 0 once its batch committed and was applied, MQR_EAGAIN when its
 * leader lost its leadership first (the outcome is unknown), MQR_ECLOSED at close. */
typedef void (*mqr__rgroup_done_fn)(void *arg, int status);

typedef struct {
  void *arg;
  /* A committed record, in log order. Non-zero: the state machine cannot go on (logged;
   * the group stops applying: a bug or no memory). */
  int (*apply)(void *arg, const mqr_journal_record_t *r);
  /* The live state as records, each through mqr__rgroup_snapshot_record(s, ...). 0 or an
   * error (no snapshot now). */
  int (*snapshot)(void *arg, mqr__rgroup_snap_t *s);
  /* A snapshot is to replace the state: forget everything (its records follow through
   * apply). */
  void (*reset)(void *arg);
  /* This node leads the group now (true: elected, and everything earlier leaders committed
   * is applied) or no longer (false). May be NULL. */
  void (*leadership)(void *arg, bool leader);
  /* This node could not write its own log (why: libraft's message). leading: it led,
   * and now stops leading (leadership false) and asks the most up-to-date follower to
   * take the group over. Else a follower's write (seen on a group opened with
   * mqr__rgroup_open): libraft refuses the entries to the leader, and the node counts
   * no more towards a majority until a write works again. Told once until a write
   * works again. May be NULL. */
  void (*disk_failed)(void *arg, const char *why, bool leading);
  /* A proposal of this node's was answered (committed or not): mqr__rgroup_seq_done may
   * say yes to more. May be NULL. */
  void (*answered)(void *arg);
} mqr__rgroup_fsm_t;

typedef struct {
  raft_id id;          /* this node's, not 0 */
  const char *address; /* its address for the transport ("127.0.0.1:7001") */
  mqr__rgroup_fsm_t fsm;
  unsigned election_timeout_ms;  /* 0: 1000 */
  unsigned heartbeat_timeout_ms; /* 0: 100 */
  unsigned snapshot_threshold;   /* entries between snapshots; 0: 1024 */
  unsigned snapshot_trailing;    /* entries kept after a snapshot; 0: 128 */
  size_t max_batch;              /* bytes of records per entry at most; 0: 4 MiB */
  size_t send_max;               /* bytes of entries in flight to one follower at most (group.c); 0: 32 MiB */
} mqr__rgroup_options_t;

/* A group: its state machine ready, no Raft instance yet. *out on success; MQR_EINVAL,
 * MQR_ENOMEM. */
int mqr__rgroup_new(const mqr__rgroup_options_t *opt, mqr__rgroup_t **out, mqr_error_t *err);
/* Its Raft instance over io (made and initialised by the caller; closed with the group:
 * the caller frees it after mqr__rgroup_close's callback). 0, MQR_ENOMEM, MQR_EIO
 * (libraft's message in err). */
int mqr__rgroup_open(mqr__rgroup_t *g, struct raft_io *io, mqr_error_t *err);
/* Or a Raft instance made elsewhere with mqr__rgroup_fsm(g) as its state machine
 * (libraft's fixture, in tests), which its maker bootstraps, starts and closes. */
struct raft_fsm *mqr__rgroup_fsm(mqr__rgroup_t *g);
void mqr__rgroup_adopt(mqr__rgroup_t *g, struct raft *r);
/* The first configuration of a new group: n voters. Nothing to do (0) when io already
 * holds a configuration (a restart). */
int mqr__rgroup_bootstrap(mqr__rgroup_t *g, unsigned n, const raft_id *ids, const char *const *addresses,
                          mqr_error_t *err);
int mqr__rgroup_start(mqr__rgroup_t *g, mqr_error_t *err);
/* Stops it: every pending callback gets MQR_ECLOSED, then cb(arg) once libraft has closed
 * (then free io, then mqr__rgroup_free). A leader with writes of its log in flight closes
 * libraft once they end: the caller calls mqr__rgroup_close_step on every loop pass until
 * cb comes (not from a libraft callback: raft_uv's writer is still in its own then). */
void mqr__rgroup_close(mqr__rgroup_t *g, void (*cb)(void *arg), void *arg);
void mqr__rgroup_close_step(mqr__rgroup_t *g);
void mqr__rgroup_free(mqr__rgroup_t *g);

/* A record into the batch being gathered (copied), cb (may be NULL) to be told its fate.
 * 0; MQR_ENOTLEADER when this node does not lead the group (nothing appended);
 * MQR_ELIMIT past MQR_JOURNAL_MAX_PAYLOAD; MQR_ENOMEM. A batch reaching max_batch is
 * proposed at once. */
int mqr__rgroup_append(mqr__rgroup_t *g, mqr_journal_record_type_t type, uint64_t id, const void *payload, size_t len,
                       mqr__rgroup_done_fn cb, void *arg);
/* cb(arg, status) once every record appended so far has committed (or with the error
 * its batch got, as an append's callback): 0; 1 when nothing appended is still
 * uncommitted (cb is not called); MQR_ECLOSED, MQR_ENOMEM. Callbacks keep their order
 * with the appends' callbacks. */
int mqr__rgroup_after(mqr__rgroup_t *g, mqr__rgroup_done_fn cb, void *arg);
/* Proposals are numbered in order (never 0, 32-bit, wrapping): the number the batch being
 * gathered will have (a record appended now is in it), and whether proposal seq has been
 * answered (committed, or failed: its records will not commit under this node). */
uint32_t mqr__rgroup_seq(const mqr__rgroup_t *g);
bool mqr__rgroup_seq_done(const mqr__rgroup_t *g, uint32_t seq);
/* Proposes the batch gathered, if any: 0, or the error every one of its callbacks got.
 * Also where a change of leadership is noticed (libraft 0.15 has no callback for it):
 * call it once per loop pass. */
int mqr__rgroup_flush(mqr__rgroup_t *g);

/* A record of a snapshot being taken. 0 or MQR_ENOMEM/MQR_ELIMIT. */
int mqr__rgroup_snapshot_record(mqr__rgroup_snap_t *s, mqr_journal_record_type_t type, uint64_t id, const void *payload,
                                size_t len);

/* Whatever its owner wants to find from it (the broker's durable store). */
void mqr__rgroup_set_owner(mqr__rgroup_t *g, void *owner);
void *mqr__rgroup_owner(const mqr__rgroup_t *g);

/* Asks libraft to move the leadership to node `to` (0: one it picks); cb(arg, ok) once
 * done or given up (ok: `to`, or whichever node, leads now). 0, MQR_ENOTLEADER,
 * MQR_EINVAL (not a voter), MQR_ENOMEM. */
/* Appends for a follower refused since the group opened because send_max bytes of entries
 * for it were in flight already (group.c). */
uint64_t mqr__rgroup_sends_refused(const mqr__rgroup_t *g);
int mqr__rgroup_transfer(mqr__rgroup_t *g, uint64_t to, void (*cb)(void *arg, bool ok, uint64_t leader), void *arg);

/* A Raft configuration change on the leader: node `id` added (as a spare, then promoted to
 * voter once it has caught up) at `address`, or removed. cb(arg, status) once committed
 * (0) or not (an MQR_ error). 0 once asked, MQR_ENOTLEADER, MQR_EINVAL (libraft refused:
 * an id already there or not there, a change in progress), MQR_ENOMEM. */
int mqr__rgroup_add(mqr__rgroup_t *g, uint64_t id, const char *address, void (*cb)(void *arg, int status), void *arg);
int mqr__rgroup_remove(mqr__rgroup_t *g, uint64_t id, void (*cb)(void *arg, int status), void *arg);

bool mqr__rgroup_leading(const mqr__rgroup_t *g);
/* The leader this node knows of: its id (0: none known) and address (NULL then). */
raft_id mqr__rgroup_leader(const mqr__rgroup_t *g, const char **address);
struct raft *mqr__rgroup_raft(mqr__rgroup_t *g); /* for status (term, commit index) */
/* Records applied since start (snapshots' included), and batches this node proposed that committed. */
uint64_t mqr__rgroup_applied(const mqr__rgroup_t *g);
uint64_t mqr__rgroup_committed(const mqr__rgroup_t *g);

#endif
