/* The broker's durable store (docs/durability.md): durable messages on durable queues
 * kept in the journal (mqr/journal_writer.h), private to the broker.
 *
 *   durable.c    opening and closing; a durable send's records, and its answer once its
 *                fdatasync returned, in send order per producer; acks, deliveries and
 *                purges as records; a journal that fails, and taking it up again
 *   recovery.c   rebuilding queues, messages, delivery counts and topology at start
 *   compact.c    what each file holds alive; releasing dead files oldest first; copying
 *                the live records of a sparse oldest file forward; topology records
 *   pager.c      paging (address-full-policy PAGE): page files per address, cursors per
 *                queue, reading back as consumers drain
 *
 * Records (the payloads of mqr/journal.h's types; the record id is the message id):
 *   ADD       the message's stored bytes (protocol.h's stored part of a Message frame)
 *   REF       the queue's name: the message is on that queue
 *   DELETE    the queue's name: acknowledged or dropped from that queue
 *   UPDATE    u32 delivery count, then the queue's name: written before each delivery
 *   TOPOLOGY  a queue made or removed (compact.c has the layout): at run time, or by
 *             the config (configured.c), so that a config that no longer lists it
 *             does not take its messages
 * A message's records are replayed in file order; a record for a message whose ADD is
 * gone (its file released) is dead and skipped; an ADD seen twice (a copy made by
 * compaction while the original was still there) keeps the first. */
#ifndef MQR_BROKER_DURABLE_H
#define MQR_BROKER_DURABLE_H

#include "broker_int.h"
#include "mqr/client.h"
#include "mqr/journal_writer.h"

typedef struct mqr__durable_s mqr__durable_t;
typedef struct mqr__pager_s mqr__pager_t;
typedef struct mqr__pcursor_s mqr__pcursor_t;

/* A deleted queue's tombstone (a TOPOLOGY record, op 3) in a later file than the record
 * that made the queue: it stays live until that record's file is released. */
typedef struct {
  uint64_t file;  /* the tombstone's */
  uint32_t bytes; /* its record's */
} mqr__tomb_t;

/* What a journal file holds alive: messages and queues whose first record is there, and
 * tombstones of queues made in older files; and the tombstones elsewhere that last as
 * long as this file (of queues made here). */
typedef struct {
  uint64_t live;
  uint64_t bytes;
  mqr__tomb_t *tombs;
  uint32_t n_tombs;
} mqr__jfile_t;

/* An answer waiting: a journaled send (m) until its fdatasync, or a result (m NULL)
 * waiting for earlier answers to the same producer. */
typedef struct {
  mqr__msg_t *m;
  const void *wait;   /* what it waits for: the journal (the durable store) or a pager */
  mqr__producer_t *p; /* NULL: nobody to tell (or gone) */
  int64_t token;
  mqr_broker_sent_fn fn;
  void *fn_arg;
  uint64_t tfirst; /* its targets: tgt ring positions [tfirst, tfirst + n) */
  uint32_t n;
  int status;
  bool done;
  bool forwarded; /* sent on to its group's leader: the leader's receipt is its answer */
  bool ack;       /* an acknowledgement's answer, waiting for its group to commit its DELETEs */
  mqr_broker_receipt_t r;
  mqr_error_t *err;       /* an error's text; NULL: none, or no memory for it */
  bool answered;          /* given (its slot goes when the ring's head passes it) */
  mqr__producer_t *chain; /* whose answers it is in order with (durable.c: pend_push) */
  uint64_t next_same;     /* the ring position of that chain's next answer; UINT64_MAX: none yet */
} mqr__pend_t;

/* A page cursor's mark, as recovery found it (pager.c). */
typedef struct {
  char *address, *queue;
  int64_t id;
  uint64_t file;
} mqr__pmark_t;

struct mqr__durable_s {
  mqr_broker_t *b;
  mqr_journal_writer_t *w; /* NULL: closed, or failed and not yet taken up again */
  mqr_journal_options_t jopt;
  char *dir;
  int lock_fd; /* the data directory's lock (mqr_journal_lock), held until the broker goes */
  bool failed; /* durable sends are refused until the journal takes writes again */
  char why[400];
  uv_timer_t retry;
  /* Answers in send order per producer: a ring of pend_cap (a power of two) from
   * pend_head; anon chains the in-process sends' (mqr_broker_send_async). */
  mqr__producer_t anon;
  mqr__pend_t *pend;
  uint32_t pend_cap, pend_n;
  uint64_t pend_head; /* the sequence number of the oldest */
  mqr__bq_t **tgt;    /* targets of journaled sends: a ring of positions [tgt_head, tgt_tail) */
  uint64_t tgt_cap, tgt_head, tgt_tail;
  /* Files: files[i] is file first + i, up to the current one. */
  uint64_t first;
  mqr__jfile_t *files;
  uint32_t n_files, cap_files;
  mqr__msg_t *live_head, *live_tail; /* journaled messages by their first record's file */
  uint64_t live_msgs;
  uint32_t compact_min_files, compact_pct;
  uv_idle_t compact_idle;
  bool compact_on, recovering, closing;
  uint32_t handles;
  uint64_t compactions, copied, released;
  uint64_t lost_records; /* DELETE and UPDATE records the journal could not take */
  mqr__pager_t *pagers, *dirty_pagers;
  mqr__pmark_t *marks; /* recovered, until the pagers have read them */
  uint32_t n_marks, cap_marks;
  uv_idle_t page_idle; /* pagers whose records became readable are run at the next pass */
  bool page_idle_on;
  struct mqr__cluster_s *cluster; /* replicated queues' groups (replicate.c); NULL: no cluster */
  struct mqr__fwd_s *fwd;         /* a client per peer with a url, sends forwarded to it (replicate.c) */
  uint32_t n_fwd;
  uint32_t refused_group;    /* the group of the last refusal for want of its leadership (forwarding's) */
  bool cluster_silent;       /* entries leave the group's queues without records */
  bool awaiting;             /* some queue's head waits for its group's commit (replicate.c) */
  uint64_t cluster_dropped;  /* entry records a group did not take (no longer its leader) */
  struct mqr__feed_s *feeds; /* queues here fed from their group's leader (feed.c) */
};

/* durable.c */
int mqr__durable_open(mqr_broker_t *b, mqr_error_t *err); /* when the config has persistence */
void mqr__durable_close(mqr_broker_t *b);                 /* counts a handle of the broker down when done */
void mqr__durable_free(mqr_broker_t *b);
/* A durable message to queues some of which are durable: records appended, the answer
 * pending (MQR__PENDING), or an error (the message released). m has one reference (the
 * pending send's). */
int mqr__durable_send(mqr_broker_t *b, mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n, const mqr__send_t *s,
                      const mqr_broker_receipt_t *r, mqr_error_t *err);
/* An answer that waits for earlier ones of the same producer: MQR__PENDING, or rc when
 * it need not wait. */
int mqr__durable_answer(mqr_broker_t *b, const mqr__send_t *s, int rc, const mqr_broker_receipt_t *r,
                        const mqr_error_t *err);
void mqr__durable_forget_producer(mqr_broker_t *b, mqr__producer_t *p);
/* A send whose answer waits for owner (a pager) to write it: room first, then the wait. */
bool mqr__durable_pend_reserve(mqr__durable_t *d);
void mqr__durable_pend_wait(mqr__durable_t *d, const mqr__send_t *s, const void *owner, const mqr_broker_receipt_t *r);
/* owner wrote (status 0) or failed its oldest waited-for record. */
void mqr__durable_done(mqr__durable_t *d, const void *owner, int status);
/* A send with its message (m, one reference) and targets waits for owner (a replication
 * group): room first (mqr__durable_pend_reserve_n), then the wait; owner settles it with
 * mqr__durable_settle: 0 puts m on its targets and answers, else the error is answered. */
bool mqr__durable_pend_reserve_n(mqr__durable_t *d, uint32_t n);
mqr__pend_t *mqr__durable_pend_wait_msg(mqr__durable_t *d, const struct mqr__send_s *s, const void *owner,
                                        const mqr_broker_receipt_t *r, mqr__msg_t *m, mqr_queue_t *const *targets,
                                        uint32_t n);
/* Messages whose sends wait for their replication group to commit them. */
uint64_t mqr__durable_waiting(const mqr__durable_t *d);
void mqr__durable_settle(mqr__durable_t *d, const void *owner, int status);
/* The same, with why the status (a forwarded send's refusal, as its leader said it). */
void mqr__durable_settle_why(mqr__durable_t *d, const void *owner, int status, const mqr_error_t *why);
/* The same for a forwarded send (below): its receipt (may be NULL) as the leader gave it. */
void mqr__durable_settle_forwarded(mqr__durable_t *d, const void *owner, int status, const mqr_error_t *why,
                                   const mqr_frame_receipt_t *receipt);
/* A send forwarded to owner (its group's leader): its answer waits there, in order. */
void mqr__durable_pend_forwarded(mqr__durable_t *d, const struct mqr__send_s *s, const void *owner,
                                 const mqr_broker_receipt_t *r);

/* An acknowledgement's answer (r: queues, how many it took) waits for owner (a
 * replication group) to commit its records: room first (mqr__durable_pend_reserve). */
void mqr__durable_pend_ack(mqr__durable_t *d, const struct mqr__send_s *s, const void *owner,
                           const mqr_broker_receipt_t *r);

/* replicate.c: replicated durable queues (the cluster). */
int mqr__replicate_open(mqr_broker_t *b, mqr_error_t *err); /* when the config has a cluster */
void mqr__replicate_close(mqr_broker_t *b);
/* The replication group of bq's records, or -1: the journal's. */
int mqr__replicate_group(const mqr_broker_t *b, mqr__bq_t *bq);
/* 0 when this node may put a message on bq or serve its consumers itself; MQR_ENOTLEADER
 * (err names the leader) for a queue of a replicated address (durable or not) whose group
 * another node leads: what is sent to it goes through the leader, which feeds consumers
 * elsewhere (feed.c). */
int mqr__replicate_serves(mqr_broker_t *b, mqr__bq_t *bq, mqr_error_t *err);
/* The same for a send to address a that no queue here takes. */
int mqr__replicate_serves_address(mqr_broker_t *b, mqr_address_t *a, mqr_error_t *err);
/* Whether a consumer (a session of who) that mqr__replicate_serves refused is served
 * here anyway, fed from the leader (feed.c): when a peer's url is known, and who is not
 * the cluster user (another node's feed, which goes to leaders). */
bool mqr__replicate_feedable(mqr_broker_t *b, const mqr__principal_t *who);
int mqr__replicate_send(mqr_broker_t *b, mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n, int g,
                        const struct mqr__send_s *s, const mqr_broker_receipt_t *r, mqr_error_t *err);
/* A send (m: one reference, which this takes) refused for want of a group's leadership
 * (refusal, its text already in the caller's err), forwarded to that group's leader when
 * its url is known: MQR__PENDING (answered with its receipt there), or refusal. */
int mqr__replicate_forward(mqr_broker_t *b, mqr__msg_t *m, const struct mqr__send_s *s, const mqr_broker_receipt_t *r,
                           int refusal);
/* The answer to an acknowledgement of n deliveries of bq (its records appended): 0 when
 * nothing of it waits (not replicated, or committed already), MQR__PENDING when it waits
 * for bq's group to commit them (answered through s), MQR_EINDOUBT (err says why) when
 * this node no longer leads that group: the acknowledgement was not taken. */
int mqr__replicate_acked(mqr_broker_t *b, mqr__bq_t *bq, const struct mqr__send_s *s, uint32_t n, mqr_error_t *err);
/* A durable queue made at run time on a replicated address: its TOPOLOGY record to its
 * group (every node's state keeps it; the node that comes to lead the group makes it),
 * when this node leads the group; else it stays this node's, unrecorded (logged). Its
 * deletion: a tombstone to the group; 0, MQR_ENOTLEADER (the queue stays), MQR_EIO. */
void mqr__replicate_queue_made(mqr_broker_t *b, mqr__bq_t *bq);
int mqr__replicate_queue_deleted(mqr_broker_t *b, mqr__bq_t *bq);
/* The leader of the group of the last refusal for want of its leadership: its clients'
 * url (NULL: not in the config, or no leader known) and node id. */
const char *mqr__replicate_leader_url(mqr_broker_t *b, uint64_t *node);
/* The proposal a record of group g appended now is in (0: none: not leading, or silent). */
uint32_t mqr__replicate_seq(mqr_broker_t *b, int g);
/* Whether e's last UPDATE (its useq) on bq is still to be answered: then bq waits, and is
 * dispatched again once it is. */
bool mqr__replicate_update_pending(mqr_broker_t *b, struct mqr__bq_s *bq, uint32_t useq);
void mqr__replicate_record(mqr_broker_t *b, int g, mqr_journal_record_type_t type, int64_t id, const void *p, size_t n);
void mqr__durable_wake(mqr__durable_t *d); /* run the dirty pagers at the next pass */
void mqr__durable_forget_queue(mqr_broker_t *b, mqr__bq_t *bq);
/* e leaves its queue for good (acked, purged): a DELETE when the journal holds it. */
void mqr__durable_removed(mqr_broker_t *b, mqr__entry_t *e);
/* e is about to be delivered (delivery_count already counts it): an UPDATE. */
void mqr__durable_delivering(mqr_broker_t *b, mqr__entry_t *e);
/* Appends without a callback; a failure is counted (lost_records), not fatal. */
void mqr__durable_append(mqr__durable_t *d, mqr_journal_record_type_t type, int64_t id, const void *p, size_t n);
void mqr__durable_append_named(mqr__durable_t *d, mqr_journal_record_type_t type, int64_t id, uint32_t *count,
                               mqr_str_t name);

/* The peers' urls (the config's): the one of node id (NULL: none); a client connected (as
 * this node: the cluster user, its TLS) to url, errors to on_error. 0, or an error (err). */
const char *mqr__replicate_peer_url(mqr_broker_t *b, uint64_t id);
int mqr__replicate_peer_client(mqr_broker_t *b, const char *url, const char *client_id, mqr_client_error_fn on_error,
                               void *arg, mqr_client_t **out, mqr_error_t *err);

/* feed.c: a replicated queue's consumers on a node that does not lead its group, fed
 * from the leader. The feed bq's consumers now want: made when it has consumers and
 * another node leads its group, gone when it has none (what it brought goes too). */
void mqr__feed_consumers(mqr_broker_t *b, mqr__bq_t *bq);
/* bq's consumers here were given credit: the leader's feed is given what they now want. */
void mqr__feed_demand(mqr__bq_t *bq);
/* Message id's entry on bq (which has a feed) leaves the queue here for good: removed on
 * the leader (its DELETE record, durable.c). */
void mqr__feed_removed(mqr_broker_t *b, mqr__bq_t *bq, int64_t id);
/* A fed entry its consumer here gave back (closed, nacked): given back to the leader, and
 * gone from here (true); false: not fed, the caller puts it back as any. */
bool mqr__feed_given_back(mqr_broker_t *b, mqr__entry_t *e);
/* The answer to an acknowledgement of n of bq's fed deliveries: MQR__PENDING (given once
 * the leader answered the last one forwarded), 0, or MQR_EINDOUBT (err: not forwarded). */
int mqr__feed_answer(mqr_broker_t *b, mqr__bq_t *bq, const struct mqr__send_s *s, uint32_t n, mqr_error_t *err);
/* Feeds checked against their groups' leaders (made again from a new one); group g came
 * to be led by this node (its feeds go: the caller empties its queues) or no longer (its
 * queues with consumers are fed); bq goes (its feed too); the broker closes. */
void mqr__feed_check_all(mqr_broker_t *b);
void mqr__feed_group(mqr_broker_t *b, uint32_t g, bool leader);
void mqr__feed_forget_queue(mqr_broker_t *b, mqr__bq_t *bq);
void mqr__feed_close_all(mqr_broker_t *b);

/* compact.c */
bool mqr__jfiles_reserve(mqr__durable_t *d, uint64_t file);
void mqr__jfile_account(mqr__durable_t *d, uint64_t file, int delta, uint64_t bytes); /* a live record more or less */
void mqr__jlive_add(mqr__durable_t *d, mqr__msg_t *m);                                /* m->jfile and jbytes set */
void mqr__jlive_drop(mqr__durable_t *d, mqr__msg_t *m);                               /* m's records are all dead */
void mqr__durable_maintain(mqr__durable_t *d); /* release dead files; compact a sparse oldest */
void mqr__durable_compact_stop(mqr__durable_t *d);
/* A queue made at run time that the config will not make again: a TOPOLOGY record. */
void mqr__durable_queue_made(mqr_broker_t *b, mqr__bq_t *bq);
/* bq is about to be deleted: a tombstone keeps a restart from making it again. 0, or
 * MQR_EIO (the journal cannot write: the queue must stay), MQR_ENOMEM. Nothing to do for
 * a queue the journal has no record of. */
int mqr__durable_queue_deleted(mqr_broker_t *b, mqr__bq_t *bq);
/* Recovery: a tombstone in file `file` of a queue made in file `made` (counted at the
 * end, as the queues are). */
bool mqr__durable_tomb(mqr__durable_t *d, uint64_t made, uint64_t file, uint32_t bytes);
void mqr__jfiles_free(mqr__durable_t *d);
/* An address made by management: its TOPOLOGY record (op 4: u8 routing types, u16 name
 * length, the name), and at its deletion a tombstone (op 5: u16 length, the name). 0,
 * MQR_EIO, MQR_ENOMEM. */
int mqr__durable_address_made(mqr_broker_t *b, mqr__acct_t *acct);
int mqr__durable_address_deleted(mqr_broker_t *b, mqr__acct_t *acct);
size_t mqr__address_record_size(const mqr__acct_t *acct);
/* A redelivery delay recorded (an UPDATE with a time: MQR__UPDATE_DUE in its count). */
#define MQR__UPDATE_DUE 0x80000000u
void mqr__durable_held(mqr_broker_t *b, const mqr__entry_t *e, int64_t due);
/* bq's TOPOLOGY record written (again): a queue of the config's, or one whose record is
 * stale. 0 (nothing to do for a non-durable or temporary queue), or MQR_EIO. */
int mqr__durable_queue_record(mqr_broker_t *b, mqr__bq_t *bq);
/* A queue's state (paused or not) recorded: its TOPOLOGY record written again (a queue
 * of the config gets one too). 0, or MQR_EIO. */
int mqr__durable_queue_state(mqr_broker_t *b, mqr__bq_t *bq);
/* The TOPOLOGY payload of q's creation into buf (at least 16 + names' bytes); its size. */
size_t mqr__topology_write(uint8_t *buf, const mqr_queue_t *q);
size_t mqr__topology_size(const mqr_queue_t *q);
/* A TOPOLOGY payload read back into cfg (its strings views into p); false if p[0..len)
 * is not one. */
bool mqr__topology_read(const uint8_t *p, size_t len, mqr_queue_config_t *cfg);
/* A tombstone's payload (a TOPOLOGY record): u8 op (MQR__TOMB_QUEUE, MQR__TOMB_ADDRESS),
 * u16 length of the name, the name; MQR__TOMB_SIZE(name) bytes into buf. */
#define MQR__TOMB_QUEUE 3
#define MQR__TOMB_ADDRESS 5
#define MQR__TOMB_SIZE(name) (3 + (name).len)
void mqr__tomb_write(uint8_t *buf, uint8_t op, mqr_str_t name);
/* recovery.c: the queue of a TOPOLOGY record made (its address, or the routing type on
 * it, too): the router's errors. */
int mqr__queue_make_from(mqr_broker_t *b, const mqr_queue_config_t *cfg, mqr_queue_t **q, mqr_error_t *err);

/* pager.c */
bool mqr__pager_wants(mqr_broker_t *b, const mqr__acct_t *acct); /* this send goes to the pages */
int mqr__pager_send(mqr_broker_t *b, mqr__acct_t *acct, const mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n,
                    const mqr__send_t *s, const mqr_broker_receipt_t *r, bool durable, mqr_error_t *err);
void mqr__pager_fill(mqr__bq_t *bq);         /* a queue low on waiting messages reads its pages */
void mqr__pagers_run(mqr__durable_t *d);     /* records became readable */
void mqr__pager_forget_queue(mqr__bq_t *bq); /* the queue goes */
uint64_t mqr__pager_backlog(const mqr__bq_t *bq);
/* Their stored messages' bytes. */
uint64_t mqr__pager_backlog_bytes(const mqr__bq_t *bq);
bool mqr__pager_paging(const mqr__acct_t *acct);    /* its sends go to its page files now */
uint64_t mqr__pager_pages(const mqr__acct_t *acct); /* its page files in use (Artemis's number of pages) */
int mqr__pagers_recover(mqr_broker_t *b, mqr_error_t *err);
void mqr__pager_mark(mqr__pcursor_t *c);
bool mqr__pagers_copy_marks(mqr__durable_t *d, uint64_t old);
const mqr__pmark_t *mqr__recovered_mark(const mqr__durable_t *d, mqr_str_t address, mqr_str_t queue);
void mqr__recovered_marks_free(mqr__durable_t *d);
void mqr__pagers_close(mqr__durable_t *d);
void mqr__pagers_free(mqr__durable_t *d);

/* recovery.c: the journal's records into the broker, while it opens. */
int mqr__durable_recover_record(void *ctx, uint64_t file_id, const char *path, const mqr_journal_record_t *r);
typedef struct mqr__recovery_s mqr__recovery_t;
mqr__recovery_t *mqr__recovery_new(mqr_broker_t *b);
/* After the opening: messages onto their queues in id order; counts into *out. */
void mqr__recovery_finish(mqr__recovery_t *rc, uint64_t *messages, uint64_t *queues);
void mqr__recovery_free(mqr__recovery_t *rc); /* what a failed opening recovered goes */

#endif
