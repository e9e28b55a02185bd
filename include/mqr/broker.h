/* mqr's broker, to embed (docs/embedding.md): a router, its queues in memory, consumers
 * with credits and acknowledgements, the native protocol's listeners, all on the
 * caller's libuv loop. mqrd is this, with a main().
 *
 * Threads: everything runs on the loop's thread; no call here is safe from another
 * thread. Callbacks: a delivery callback (mqr_deliver_fn) may call mqr_broker_send,
 * _ack, _credit, _subscribe and _unsubscribe (its own consumer's included) and the
 * query calls; it must not call mqr_broker_create, _close or _reload. Strings passed in
 * are copied before the call returns unless said otherwise; views handed out are valid
 * as each function says. Errors are the MQR_E* codes of mqr/common.h, with err (may be
 * NULL) saying why. */
#ifndef MQR_BROKER_H
#define MQR_BROKER_H

#include <uv.h>

#include "mqr/config.h"
#include "mqr/journal_writer.h"
#include "mqr/protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mqr_broker_s mqr_broker_t;

typedef enum { MQR_LOG_ERROR, MQR_LOG_WARN, MQR_LOG_INFO, MQR_LOG_DEBUG } mqr_log_level_t;

/* Where the broker's log lines go; ctx is the options' log_ctx. */
typedef void (*mqr_log_fn)(void *ctx, mqr_log_level_t level, const char *line);

typedef struct {
  const mqr_config_t *config; /* NULL: the embedded default; the broker keeps its own copy of nothing:
                                 the config must outlive the broker (or the next reload) */
  bool listen;                /* bind the config's listeners (see SIGPIPE below) */
  const char *server_name;    /* said in CONNECTED; NULL: "mqrd" */
  mqr_log_fn log;             /* NULL: no log */
  void *log_ctx;
  mqr_log_level_t log_level; /* lines above it are not written */
  uint32_t max_credit;       /* the most credit a subscription may hold; 0: 65536 */
  uint32_t expiry_scan_ms;   /* how often the queues are searched for expired messages (Artemis's
                                message-expiry-scan-period); 0: the config's, else 30000. A message
                                that expires is never delivered, scan or not. */
  size_t max_pending_write;  /* bytes a connection may have unwritten before its deliveries
                                pause; 0: 4 MiB */
  /* Persistence (docs/durability.md): the journal's directory, over the config's
   * persistence directory, and turning persistence on when the config has no section;
   * NULL: the config's. */
  const char *data_dir;
  bool recover_truncate;              /* a journal damaged in the middle is cut there (mqrd --recover=truncate)
                                         instead of stopping the start */
  const mqr_journal_io_t *journal_io; /* the journal's writes and syncs (mqr/journal_writer.h), for tests
                                         that inject failures or power losses; NULL: the system's */
  /* The broker cannot go on safely: end the process at once, without closing the broker
   * or returning (as after a kill: what was answered OK is on disk). Called from within
   * the failing operation, with why: a cluster group whose Raft log this node could not
   * write (libraft 0.15 may crash moments later on the entries it failed to write, and at
   * its close), as leader or as follower. mqrd logs why and exits 1. NULL: the broker
   * logs it and goes on at that risk: a leader hands the group to another node, a
   * follower refuses the leader's entries until a write works. */
  void (*fatal)(void *ctx, const char *why);
  void *fatal_ctx;
} mqr_broker_options_t;

/* Registers the broker's protocols (the native one, MQTT, STOMP) and their listener
 * blocks with the config loader (mqr_config_register_protocol): call it before loading a
 * config that names them. mqr_broker_create calls it too. 0, or the registry's error. */
MQR_EXTERN int mqr_broker_register_protocols(void);

/* Builds the broker on loop: the router from the config, the journal's messages and
 * queues recovered (with persistence), and (with listen) its listeners bound and
 * listening. Errors: the config's, MQR_EIO (a listener cannot bind, the journal's
 * directory cannot be used; err names it), MQR_EBADDATA (the journal is damaged in the
 * middle: err names the file and offset; see recover_truncate), MQR_EINVAL (persistence
 * with no directory), MQR_ENOMEM. Not from a callback of this broker.
 *
 * SIGPIPE: libuv writes to sockets with write(2), so a client that resets its
 * connection while a delivery is being written raises SIGPIPE, whose default action
 * ends the process. With listen, this call sets SIGPIPE to SIG_IGN when its disposition
 * is still the default (SIG_DFL), process-wide; a handler of the application's, or
 * SIG_IGN, is left as it is. An application that needs SIGPIPE's default action must
 * block SIGPIPE in the loop's thread instead (pthread_sigmask), or not listen. */
MQR_EXTERN int mqr_broker_create(uv_loop_t *loop, const mqr_broker_options_t *opt, mqr_broker_t **out,
                                 mqr_error_t *err);

/* Stops accepting, says DISCONNECT to each connection, lets what is being written
 * finish, closes every handle, then calls cb (may be NULL) from the loop; after cb (or
 * once the loop has run out, with cb NULL) the broker is freed, and with it every
 * consumer, router object and view it handed out. Durable messages on durable queues
 * stay in the journal (sends still waiting for their fdatasync finish first); every
 * other message goes with the broker. A second call does nothing. Not from a callback
 * of this broker. */
MQR_EXTERN void mqr_broker_close(mqr_broker_t *b, void (*cb)(void *arg), void *arg);

/* The port listener i is bound to (useful with port 0), or -1. */
MQR_EXTERN int mqr_broker_listener_port(const mqr_broker_t *b, uint32_t i);

/* The router the broker runs on: a topology built in code adds addresses, queues and
 * settings here (served at once). Do not remove a queue that has consumers here. */
MQR_EXTERN mqr_router_t *mqr_broker_router(mqr_broker_t *b);

/* Lines above level are not written from now on (a reload's log level). */
MQR_EXTERN void mqr_broker_set_log_level(mqr_broker_t *b, mqr_log_level_t level);

/* Applies a reloaded config: address settings replaced; addresses and queues it adds
 * are created; diverts removed, changed and added. No address or queue is removed, and listeners do not change; each
 * thing not applied is logged (WARN) and counted in *skipped (may be NULL). 0, or MQR_ENOMEM. */
MQR_EXTERN int mqr_broker_reload(mqr_broker_t *b, const mqr_config_t *cfg, uint32_t *skipped, mqr_error_t *err);

/* ---- sending in-process: the same path as a SEND frame ----------------------------- */

typedef struct {
  mqr_str_t address;
  int routing_type; /* MQR_ANYCAST, MQR_MULTICAST, or MQR_ROUTING_NONE */
  bool durable;
  mqr_str_t duplicate_id;             /* empty: none */
  int32_t priority;                   /* 0..MQR_PRIORITY_MAX; a zeroed message has 0, the lowest (the
                                         protocol's default is MQR_PRIORITY_DEFAULT, 4) */
  int64_t timestamp;                  /* ms since the epoch; 0: none (the broker stamps nothing) */
  int64_t expiration;                 /* ms since the epoch; 0: never */
  mqr_str_t user_id;                  /* empty: none */
  const mqr_str_t *property_keys;     /* n_properties of each: names, and typed values */
  const mqr_value_t *property_values; /* (strings UTF-8; a type out of range is MQR_EINVAL) */
  size_t n_properties;
  mqr_str_t body;
} mqr_broker_message_t;

typedef struct {
  int status;      /* mqr_route_status_t, or MQR_RECEIPT_DROPPED */
  uint32_t queues; /* how many queues took it */
  int64_t message_id;
} mqr_broker_receipt_t;

/* Routes and enqueues one message; receipt (may be NULL) says where it went. Errors: the
 * router's (MQR_ENOADDR, MQR_EWILDCARDSEND, ...), MQR_EINVAL (a priority out of range, a
 * property type out of range, a string that is not UTF-8), MQR_EFULL (the address is full and its
 * policy is FAIL, or BLOCK: an in-process producer is not paused, it is told to wait),
 * MQR_ELIMIT (bigger than the largest frame), MQR_EIO (a durable message to a durable
 * queue while the journal cannot write), MQR_ENOMEM. No allocation in steady state.
 * A durable message to a durable queue is enqueued once its journal records are durable,
 * after this returns; to know when (or whether the write failed), use
 * mqr_broker_send_async. */
MQR_EXTERN int mqr_broker_send(mqr_broker_t *b, const mqr_broker_message_t *m, mqr_broker_receipt_t *receipt,
                               mqr_error_t *err);

/* The answer to an asynchronous send: status 0 with the receipt, or an error code with
 * err saying why (views valid during the call). */
typedef void (*mqr_broker_sent_fn)(void *arg, int status, const mqr_broker_receipt_t *receipt, const mqr_error_t *err);

/* Sends as mqr_broker_send does, and calls cb (not NULL) exactly once with the answer:
 * for a durable message to a durable queue, once the fdatasync that covers its journal
 * records has returned (or failed: MQR_EIO, and the message went nowhere). Answers come
 * in the order of the calls: one that needs no disk but follows one that does waits for
 * it. cb runs before this returns when nothing is waiting, else later from the loop; it
 * may send again. The message is copied before this returns. */
MQR_EXTERN void mqr_broker_send_async(mqr_broker_t *b, const mqr_broker_message_t *m, mqr_broker_sent_fn cb, void *arg);

/* ---- diverts -------------------------------------------------------------------------- */

/* A divert's transformer, as Artemis's: called for each copy a divert forwards, before the
 * copy is routed, with the copy as it would go: its address the forwarding address, its
 * routing type as the divert sets it, its properties with _AMQ_ORIG_ADDRESS,
 * _AMQ_ORIG_MESSAGE_ID and _AMQ_ORIG_QUEUE (the divert's name) added. The callback may
 * change any field of *m, pointing them at memory of its own that stays valid until it
 * returns; the copy is made from *m once it returns. Return 0 to send the copy, anything
 * else to drop it. It runs on the loop, inside the send that was diverted; it may send,
 * but must not close the broker. */
typedef int (*mqr_broker_transform_fn)(void *arg, mqr_str_t divert, mqr_broker_message_t *m);

/* Sets the transformer of the divert named `divert` (fn NULL: none). The divert need not
 * exist yet: the transformer goes with the name, through reloads that remove and add it.
 * 0, or MQR_ENOMEM. */
MQR_EXTERN int mqr_broker_set_transformer(mqr_broker_t *b, mqr_str_t divert, mqr_broker_transform_fn fn, void *arg);

/* ---- consuming in-process ----------------------------------------------------------- */

typedef struct mqr_broker_consumer_s mqr_broker_consumer_t;

/* A delivery: the Message frame a network consumer would get (views valid during the
 * call). Acknowledge it later with mqr_broker_ack and its delivery number. */
typedef void (*mqr_deliver_fn)(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg);

/* Subscribes as a SUBSCRIBE frame does: to a queue (routing_type MQR_ROUTING_NONE), to
 * address::queue, or to an address with a routing type (ANYCAST: its queue of the same
 * name, made if allowed, and on a wildcard address made for this consumer alone, going
 * with it; MULTICAST: a subscription queue, named queue or made up, that
 * goes when the consumer does unless named). selector (empty: none) is a filter
 * expression (docs/filters.md): only messages it matches go to this consumer; the others
 * stay in the queue for other consumers, as Artemis's consumer filters. target may end
 * in "?consumer-priority=N" (an int, default 0): a queue's messages go to its highest-
 * priority consumers that can take them first (docs/protocol.md). credit messages
 * may be delivered before more credit. *queue_name (may be NULL) gets the queue's name,
 * valid while subscribed. Errors: MQR_ENOADDR, MQR_ENOQUEUE, MQR_ECONSUMERLIMIT,
 * MQR_EINVAL, MQR_ESYNTAX (the selector's; err names the column), MQR_ELIMIT,
 * MQR_ENOMEM. */
MQR_EXTERN int mqr_broker_subscribe(mqr_broker_t *b, mqr_str_t target, int routing_type, mqr_str_t queue,
                                    mqr_str_t selector, uint32_t credit, mqr_deliver_fn fn, void *arg,
                                    mqr_broker_consumer_t **out, mqr_str_t *queue_name, mqr_error_t *err);

/* Acknowledges delivery (and, cumulative, every earlier one of this consumer): the
 * message leaves the queue. O(1) whatever is in flight. 0, or MQR_ENOTFOUND for a
 * delivery not outstanding (acknowledged already, or never made). May be called from a
 * delivery callback, for the delivery being made too. */
MQR_EXTERN int mqr_broker_ack(mqr_broker_consumer_t *c, int64_t delivery, bool cumulative);

/* Grants n more deliveries (credit is capped at the broker's max_credit); waiting
 * messages may be delivered before this returns. May be called from a callback. */
MQR_EXTERN void mqr_broker_credit(mqr_broker_consumer_t *c, uint32_t n);

/* Ends the subscription: unacknowledged messages go back to the head of the queue, in
 * order, and a subscription queue made for it goes too. c is invalid afterwards (from
 * its own delivery callback: once the callback returns). */
MQR_EXTERN void mqr_broker_unsubscribe(mqr_broker_consumer_t *c);

/* ---- what it holds ------------------------------------------------------------------ */

typedef struct {
  uint64_t depth;     /* messages waiting */
  uint64_t in_flight; /* delivered, not acknowledged */
  uint64_t enqueued, acknowledged;
  uint32_t consumers;
  uint64_t held;      /* back from a consumer, waiting out a redelivery delay */
  uint64_t killed;    /* that reached max-delivery-attempts: sent to the dead-letter address or
                         dropped */
  uint64_t expired;   /* that expired: sent to the expiry address or dropped */
  uint64_t scheduled; /* waiting for their scheduled delivery time (MQR_PROP_SCHEDULED).
                         enqueued = acknowledged + killed + expired + depth + held + scheduled
                         + in_flight */
  bool paused;        /* mqr_broker_pause_queue: it takes messages and delivers none */
  uint64_t bytes;     /* the stored size of its messages (waiting, in flight, held, scheduled,
                         paged): what they take in the journal, Artemis's persistent size */
} mqr_broker_queue_stats_t;

/* A queue's counters; MQR_ENOQUEUE. */
MQR_EXTERN int mqr_broker_queue_stats(const mqr_broker_t *b, mqr_str_t queue, mqr_broker_queue_stats_t *out);

typedef struct {
  uint64_t messages; /* stored, for any queue */
  uint64_t bytes;    /* their stored bytes */
  uint64_t dropped;  /* by address-full-policy DROP */
  uint32_t connections;
  bool persistence;         /* the broker has a journal */
  bool journal_failed;      /* it cannot write now: durable sends are refused until it can */
  uint64_t durable;         /* of messages, those the journal keeps */
  uint64_t journal_files;   /* files in use */
  uint64_t journal_records; /* records written since start */
  uint64_t journal_writes;  /* their fdatasync rounds */
  uint64_t compactions;     /* oldest files whose live records were copied forward */
  uint64_t journal_write_latency[MQR_JOURNAL_LATENCY_BUCKETS + 1]; /* write rounds by time (journal_writer.h) */
  uint64_t journal_write_ns;                                       /* their times, together */
} mqr_broker_stats_t;

/* The broker's counters into *out. May be called from a callback. */
MQR_EXTERN void mqr_broker_stats(const mqr_broker_t *b, mqr_broker_stats_t *out);

typedef struct {
  uint64_t journal_files, journal_bytes; /* the journal's files (*.jrn) in the data directory */
  uint64_t page_files, page_bytes;       /* paged messages' files (the .jrn files under paging/) */
  uint64_t free_bytes, size_bytes;       /* the file system holding them: free to the broker's user, and in all */
} mqr_broker_disk_t;

/* What the broker's data takes on disk, and the room left there: read from the data
 * directory (a directory walk and a statvfs: for a scrape or a status, not per message).
 * 0; MQR_EINVAL when the broker has no persistence; MQR_EIO when the directory cannot be
 * read (out then holds what could be). */
MQR_EXTERN int mqr_broker_disk_usage(const mqr_broker_t *b, mqr_broker_disk_t *out);

/* Drops every message waiting in queue q (one of mqr_broker_router(b)'s queues); those
 * in flight to consumers stay theirs. Returns how many were dropped. As Artemis's
 * removeAllMessages; allocates nothing. May be called from a callback. */
MQR_EXTERN uint64_t mqr_broker_purge(mqr_broker_t *b, mqr_queue_t *q);

/* Deletes a queue and what it holds (Artemis's destroyQueue): its messages are deleted
 * (from the journal too), and a queue made at run time does not come back at a restart (a
 * queue of the config is made again by it). Refused while it has consumers. Errors:
 * MQR_ENOQUEUE, MQR_EQUEUEINUSE, MQR_EIO (the journal cannot write the deletion: the
 * queue stays), MQR_ENOMEM. Not from a delivery callback of the queue's own consumers. */
MQR_EXTERN int mqr_broker_delete_queue(mqr_broker_t *b, mqr_str_t name, mqr_error_t *err);

/* ---- management (Artemis's AddressControl and QueueControl) --------------------------- */

/* Each of these may be called from a callback (not from a transformer), and is what the
 * native protocol's MANAGE frame and `mqr address|queue` do. err (may be NULL) says why a
 * call is refused. */

/* Makes an address with routing types `types` (as the config's addresses: it does not
 * go away by auto-delete). With a journal it is recorded, and a restart makes it again
 * until it is deleted. Errors: the router's (MQR_EADDREXISTS, MQR_EEMPTYADDR,
 * MQR_ENAMETOOLONG, MQR_ENOMEM), MQR_EINVAL (no routing type), MQR_EIO (the journal
 * cannot record it: it is not made). */
MQR_EXTERN int mqr_broker_create_address(mqr_broker_t *b, mqr_str_t name, mqr_routing_set_t types, mqr_error_t *err);

/* Deletes an address. With queues it is refused (MQR_EADDRHASQUEUES) unless force, which
 * deletes them first as mqr_broker_delete_queue does (refused, MQR_EQUEUEINUSE, while one
 * has consumers). Refused too while the address still has paged messages or producers
 * waiting for room (MQR_EQUEUEINUSE). MQR_ENOADDR, MQR_EIO. */
MQR_EXTERN int mqr_broker_delete_address(mqr_broker_t *b, mqr_str_t name, bool force, mqr_error_t *err);

/* Makes a queue (Artemis's createQueue): as mqr_router_add_queue, and a durable one is
 * recorded in the journal, so it comes back after a restart. Errors: the router's,
 * MQR_EIO (the journal cannot write it: the queue is not made), MQR_ENOMEM. */
MQR_EXTERN int mqr_broker_create_queue(mqr_broker_t *b, const mqr_queue_config_t *cfg, mqr_error_t *err);

/* Pauses (paused true) or resumes a queue: a paused queue still takes messages but
 * delivers none; its consumers stay. With persist, and a journal, the state is recorded
 * and a restart keeps it (Artemis's pause(true)); without, a restart resumes it.
 * MQR_ENOQUEUE, MQR_EIO, MQR_ENOMEM. */
MQR_EXTERN int mqr_broker_pause_queue(mqr_broker_t *b, mqr_str_t name, bool paused, bool persist, mqr_error_t *err);

/* Whether this node serves queue `name`'s messages: 0 when it does (a queue of an address
 * that is not replicated, or one whose Raft group this node leads); MQR_ENOTLEADER when
 * another node does (err names the group's leader, when one is known); MQR_ENOQUEUE. On a
 * node that does not lead its group a replicated queue holds only what a feed brought for
 * the consumers there, so management that reads or changes a queue's messages (browse,
 * purge, move, pause: the native MANAGE operations and the HTTP API) asks this first and
 * refuses there, naming the leader; the calls below do not ask. */
MQR_EXTERN int mqr_broker_queue_served(mqr_broker_t *b, mqr_str_t name, mqr_error_t *err);

/* Called for each message a browse or a consumer listing finds; m's views are valid
 * during the call. m->subscription and m->delivery are 0. */
typedef void (*mqr_broker_browse_fn)(void *arg, const mqr_frame_message_t *m);

/* Browses a queue (Artemis's browse): calls fn for each of the first `max` messages
 * waiting in it (0: all), in delivery order, without taking them. Returns how many, or
 * MQR_ENOQUEUE / MQR_ENOMEM. */
MQR_EXTERN int64_t mqr_broker_browse(mqr_broker_t *b, mqr_str_t name, uint32_t max, mqr_broker_browse_fn fn, void *arg,
                                     mqr_error_t *err);

/* Moves the messages waiting in queue `from` that match filter (empty: all) to queue
 * `to` (Artemis's moveMessages): each goes as a copy to `to` alone, with its origin
 * stamped (_AMQ_ORIG_ADDRESS, _AMQ_ORIG_QUEUE, _AMQ_ORIG_MESSAGE_ID), and leaves `from`
 * as an acknowledged message does. Those in flight stay. The first 1,024 move before it
 * returns; the rest in the loop's next passes, 1,024 a pass (a move of 100,000 does not
 * hold the loop); one of those whose copy cannot be sent stays in `from`, and the log
 * says so. Returns how many it moves, or MQR_ENOQUEUE, MQR_EINVAL (from and to the same
 * queue), MQR_ESYNTAX (the filter's), or the error of a copy of the first 1,024 that
 * could not be sent (the ones before it moved; none after it). */
MQR_EXTERN int64_t mqr_broker_move_messages(mqr_broker_t *b, mqr_str_t from, mqr_str_t filter, mqr_str_t to,
                                            mqr_error_t *err);

/* A consumer, as mqr_broker_list_consumers tells it. */
typedef struct {
  int64_t session;      /* its connection's session id (0: in-process) */
  int64_t subscription; /* its id in the session */
  uint32_t credit;      /* messages it may still be given */
  uint64_t in_flight;   /* delivered, not acknowledged */
  int64_t delivered;    /* deliveries so far */
  mqr_str_t selector;   /* its filter; empty: none */
} mqr_broker_consumer_info_t;

/* Calls fn for each consumer of a queue (Artemis's listConsumers); returns how many, or
 * MQR_ENOQUEUE. */
MQR_EXTERN int64_t mqr_broker_list_consumers(mqr_broker_t *b, mqr_str_t queue,
                                             void (*fn)(void *arg, const mqr_broker_consumer_info_t *c), void *arg,
                                             mqr_error_t *err);

/* ---- the cluster (docs/cluster.md) ------------------------------------------------------- */

/* A replication group as this node sees it. leader_address is valid during the call. */
typedef struct {
  uint32_t group;
  bool leading;             /* this node leads it (and serves its queues) */
  uint64_t leader_id;       /* 0: none known */
  mqr_str_t leader_address; /* its cluster address ("IP:PORT"); empty when none is known */
  uint64_t term;            /* Raft's current term */
  uint64_t commit_index;    /* the last log entry known committed */
  uint64_t applied_index;   /* the last one applied here */
  uint64_t messages, bytes; /* the group's replicated state here: live messages, their bytes */
  uint32_t n_followers;     /* when leading: the other voters, and how many entries behind */
  uint64_t follower_id[16];
  uint64_t follower_lag[16];
  /* when leading: Raft AppendEntries messages held back from a follower since the start,
   * because more than the send bound (32 MiB of entries) was already on its way to it;
   * libraft sends their entries again once it has caught up */
  uint64_t held_back;
} mqr_broker_group_info_t;

/* Calls fn for each replication group of this node, in order. Returns the node's id, or
 * 0 when the broker has no cluster (fn is not called). */
MQR_EXTERN uint64_t mqr_broker_cluster_groups(mqr_broker_t *b, void (*fn)(void *arg, const mqr_broker_group_info_t *g),
                                              void *arg);

/* Asks this node's leadership of group g to move to node `to` (0: a follower libraft
 * picks), as a Raft leadership transfer: 0 once asked (the outcome is logged; the group
 * has no leader for a moment). MQR_ENOTFOUND without a cluster or such a group,
 * MQR_ENOTLEADER when this node does not lead it, MQR_EINVAL for a node that is not a
 * voter of it (err says which). */
MQR_EXTERN int mqr_broker_cluster_transfer(mqr_broker_t *b, uint32_t g, uint64_t to, mqr_error_t *err);

/* A change of the cluster's membership, made by every group this node leads (a Raft
 * configuration change each): node `id` added at `address` (its group 0's "IP:PORT"; it
 * was started with `join: true`), caught up and made a voter; or (address NULL) node `id`
 * removed. Returns how many groups were asked (the outcome of each is logged), or an
 * error: MQR_ENOTFOUND without a cluster, MQR_EINVAL (err says why). A group this node
 * does not lead is left to its leader: run it against every node. */
MQR_EXTERN int mqr_broker_cluster_change(mqr_broker_t *b, uint64_t id, const char *address, mqr_error_t *err);

/* The bytes an address holds (its messages, stored once however many queues hold them). */
MQR_EXTERN int64_t mqr_broker_address_size(const mqr_broker_t *b, mqr_str_t address);

/* ---- statistics: every address and queue -------------------------------------------------- */

/* An address as the statistics tell it. Its name stays valid until the address goes. */
typedef struct {
  mqr_str_t name;
  mqr_routing_set_t routing_types;
  uint32_t flags;  /* MQR_ADDRESS_* (MQR_ADDRESS_INTERNAL: the broker's own) */
  uint32_t queues; /* its queues */
  uint64_t routed; /* sends that reached at least one queue */
  uint64_t unrouted;
  int64_t size;   /* bytes of its messages held in memory, stored once (what max-size-bytes counts) */
  bool paging;    /* address-full-policy PAGE is in force: its sends go to its page files */
  uint64_t pages; /* its page files in use (Artemis's number of pages): messages paged and not yet read back by every
                     queue */
} mqr_broker_address_info_t;

/* A queue as the statistics tell it; its names stay valid until it goes. stats.depth
 * counts its paged messages too. */
typedef struct {
  mqr_str_t name, address;
  mqr_routing_type_t routing_type;
  bool durable;
  mqr_broker_queue_stats_t stats;
} mqr_broker_queue_info_t;

/* The one path to the broker's statistics, which the native QUERY, management, `mqr
 * stat` and the metrics use: calls address_fn (may be NULL) for each address, then
 * queue_fn (may be NULL) for each of its queues, in the router's order. Addresses the
 * broker keeps for itself (MQR_ADDRESS_INTERNAL) are left out unless internal. A non-zero
 * return from a callback stops the walk and is returned; the callbacks must not change
 * the broker. */
MQR_EXTERN int mqr_broker_foreach_stats(const mqr_broker_t *b, bool internal,
                                        int (*address_fn)(void *arg, const mqr_broker_address_info_t *a),
                                        int (*queue_fn)(void *arg, const mqr_broker_queue_info_t *q), void *arg);

/* The same for one address (a walk in slices: the names first, then a few addresses per
 * loop pass): its callbacks as mqr_broker_foreach_stats calls them, or MQR_ENOADDR when
 * there is no such address now (or it is internal and internal is false). */
MQR_EXTERN int mqr_broker_address_stats(const mqr_broker_t *b, mqr_str_t address, bool internal,
                                        int (*address_fn)(void *arg, const mqr_broker_address_info_t *a),
                                        int (*queue_fn)(void *arg, const mqr_broker_queue_info_t *q), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* MQR_BROKER_H */
