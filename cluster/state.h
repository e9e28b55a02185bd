/* The replicated state of a Raft group (group.h): what its committed journal records
 * leave alive, kept on every node so that a node that comes to lead the group can put
 * the group's messages on their queues at once (the same records, read the same way, as
 * the broker's recovery reads its journal: durable.h). Private to mqr.
 *
 *   ADD       a message (its stored bytes); a second ADD of the same id is ignored
 *   REF       the message is on the named queue (delivery count 0)
 *   DELETE    it is no longer on the named queue; a message on no queue is gone
 *   UPDATE    [u32 count, with MQR__RSTATE_DUE: then an i64 time] the queue's name: the
 *             delivery count (and the time before which it is not delivered again)
 *   TOPOLOGY  kept as they came, in order: queues made at run time (op 1, 2); a queue's
 *             tombstone (op 3) takes the latest record that made it away, and is not kept
 * A record of a message the state does not hold is ignored (counted as an orphan); a
 * record too short to read is counted as bad and ignored. Page records are not kept
 * (replicated addresses do not page).
 *
 * Messages are found by id in an open-addressing table, and listed in id order (the
 * order they were sent in). Not thread-safe: the group's loop thread. */
#ifndef MQR_CLUSTER_STATE_H
#define MQR_CLUSTER_STATE_H

#include "group.h"
#include "mqr/common.h"
#include "mqr/journal.h"

#define MQR__RSTATE_DUE 0x80000000u /* (durable.h's MQR__UPDATE_DUE) */
/* A snapshot's first record (its id the highest id ever added, no payload), so that a
 * node restored from it gives ids past every one used, live or not. Only in snapshots. */
#define MQR__RSTATE_MAX_ID ((mqr_journal_record_type_t)8)

typedef struct mqr__rstate_s mqr__rstate_t;

/* 32-bit FNV-1a of a name: the same on every node and every build (a queue name's slot
 * here; an address's group in cluster.c). */
static inline uint32_t mqr__fnv1a(mqr_str_t s) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 16777619u;
  return h;
}

/* A message's place on a queue, as listed. */
typedef struct {
  mqr_str_t queue;
  int32_t delivery_count;
  int64_t due; /* ms since the epoch; 0: none */
} mqr__rref_t;

mqr__rstate_t *mqr__rstate_new(void); /* NULL: out of memory */
void mqr__rstate_free(mqr__rstate_t *s);
void mqr__rstate_reset(mqr__rstate_t *s); /* empty again (a snapshot follows) */
/* A committed record. 0, or MQR_ENOMEM (the record is not applied: the state machine
 * cannot go on). */
int mqr__rstate_apply(mqr__rstate_t *s, const mqr_journal_record_t *r);
/* The live state as records: MQR__RSTATE_MAX_ID, the TOPOLOGY records, then per message
 * in id order its ADD, a REF per queue and an UPDATE where the count or the time is not 0. */
int mqr__rstate_snapshot(mqr__rstate_t *s, mqr__rgroup_snap_t *snap);

/* Each live message in id order: its stored bytes and its queues (views valid during
 * the call; the state must not change meanwhile). A non-zero return stops the walk and
 * is returned. */
typedef int (*mqr__rstate_msg_fn)(void *ctx, int64_t id, const uint8_t *stored, size_t len, const mqr__rref_t *refs,
                                  uint32_t n_refs);
int mqr__rstate_each(mqr__rstate_t *s, mqr__rstate_msg_fn fn, void *ctx);
/* Each TOPOLOGY payload in the order committed. */
int mqr__rstate_each_topology(const mqr__rstate_t *s, int (*fn)(void *ctx, const uint8_t *p, size_t len), void *ctx);

typedef struct {
  uint64_t messages, bytes; /* live, and their stored bytes */
  uint64_t refs;            /* messages on queues */
  int64_t max_id;           /* the highest id added: a new leader's ids go past it */
  uint64_t orphans, bad;    /* records ignored */
} mqr__rstate_stats_t;
mqr__rstate_stats_t mqr__rstate_stats(const mqr__rstate_t *s);

#endif
