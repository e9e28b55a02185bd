/* mqr routing-config files (YAML): listeners, wildcard syntax, address settings,
 * addresses and their queues. docs/config.md documents every key.
 *
 * Loading parses and fully validates a file (a trial router is built), so a loaded
 * config is known to build; every problem is reported with file, line and column. */
#ifndef MQR_CONFIG_H
#define MQR_CONFIG_H

#include "mqr/routing.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a loader reports problems: caller storage for up to cap items. An item whose
 * code is 0 is a warning; any other is an error. Problems past cap are counted in
 * dropped. */
typedef struct {
  mqr_error_t *items;
  uint32_t cap;
  uint32_t count;
  uint32_t errors;
  uint32_t warnings;
  uint32_t dropped;
} mqr_diags_t;

/* Prepares d over items[0..cap). */
MQR_EXTERN void mqr_diags_init(mqr_diags_t *d, mqr_error_t *items, uint32_t cap);

/* A parsed, validated config. Opaque; create with a load, free with destroy. */
typedef struct mqr_config_s mqr_config_t;

#define MQR_DEFAULT_MAX_FRAME (1u << 20)    /* a listener's max-frame-size when not set */
#define MQR_MAX_FRAME_LIMIT (64u << 20)     /* the most max-frame-size may be */
#define MQR_DEFAULT_HANDSHAKE_TIMEOUT 10000 /* ms a connection has to say CONNECT */
#define MQR_DEFAULT_IDLE_TIMEOUT 60000      /* ms of silence before a connection is closed */

/* The protocols a listener accepts (a set of these bits, each a protocol registered
 * below). With more than one, the broker tells a connection's protocol by its first
 * bytes. */
#define MQR_PROTOCOL_MQR 0x1u   /* the native, Avro-framed protocol (libmqr-client) */
#define MQR_PROTOCOL_MQTT 0x2u  /* MQTT 3.1.1 and 5.0 */
#define MQR_PROTOCOL_STOMP 0x4u /* STOMP 1.0, 1.1 and 1.2 */
#define MQR_PROTOCOL_HTTP 0x8u  /* HTTP/1.1: metrics, health, management (docs/observability.md) */
#define MQR_PROTOCOL_AMQP 0x10u /* AMQP 1.0 (Qpid Proton's engine; docs/protocols.md) */

/* ---- protocols and their blocks of a listener ------------------------------------------------
 *
 * A protocol is named in a listener's `protocols` and may have a block of settings of its
 * own in the listener (`mqtt: {max-packet-size: 1MiB}`). The protocol's code owns that
 * block: it describes it with a table of options, registered here before configs are
 * loaded (the broker's heads: mqr_broker_register_protocols), and reads a listener's
 * values with mqr_listener_option. */

typedef enum {
  MQR_OPTION_INT,      /* a plain integer */
  MQR_OPTION_SIZE,     /* bytes, with units (64KiB, 1MiB) */
  MQR_OPTION_DURATION, /* ms, with units (500ms, 30s) */
  MQR_OPTION_BOOL      /* true or false: 1 or 0 (min 0, max 1) */
} mqr_option_kind_t;

typedef struct {
  const char *key; /* as written in the block: kebab-case */
  mqr_option_kind_t kind;
  int64_t min, max, def; /* its range, and its value when not given */
} mqr_option_def_t;

typedef struct {
  const char *name; /* in `protocols`, and its block's key */
  uint32_t bit;     /* MQR_PROTOCOL_* */
  const mqr_option_def_t *options;
  uint32_t n_options;
} mqr_protocol_def_t;

#define MQR_LISTENER_OPTIONS 32 /* every registered protocol's options together, at most */

/* Registers a protocol (def and its table must outlive every config): 0, or MQR_EINVAL
 * (another of that name or bit), MQR_ELIMIT (more than 8 protocols or
 * MQR_LISTENER_OPTIONS options). The same def again is 0. Not thread-safe: register
 * before loading configs, from one thread. */
MQR_EXTERN int mqr_config_register_protocol(const mqr_protocol_def_t *def);
/* The registered protocols, in order: the i-th, or NULL past the last. */
MQR_EXTERN const mqr_protocol_def_t *mqr_config_protocol(uint32_t i);

/* TLS on a listener (docs/security.md): every protocol it speaks goes through it. */
typedef enum {
  MQR_CLIENT_AUTH_NONE, /* no client certificate asked for */
  MQR_CLIENT_AUTH_WANT, /* asked for; a client without one is let in, one that fails is refused */
  MQR_CLIENT_AUTH_NEED  /* a client without a valid one is refused */
} mqr_client_auth_t;

typedef struct {
  bool enabled;                  /* the listener has a tls block */
  const char *cert, *key;        /* PEM files: its certificate (chain) and private key */
  const char *ca;                /* PEM file of the CAs client certificates must chain to; NULL: none */
  mqr_client_auth_t client_auth; /* none (the default), want, need (which need ca) */
  uint16_t min_version;          /* 0x0303: TLS 1.2 (the default); 0x0304: TLS 1.3 */
  const char *ciphers;           /* OpenSSL's cipher list for TLS 1.2; NULL: OpenSSL's default */
} mqr_tls_config_t;

/* A listener as configured (mqrd binds them). Strings live as long as the config; paths
 * are relative to the config file's folder. */
typedef struct {
  const char *name;
  const char *host;              /* an IPv4 or IPv6 literal, or a host name */
  uint16_t port;                 /* 0: an ephemeral port */
  uint32_t protocols;            /* MQR_PROTOCOL_* bits; MQR_PROTOCOL_MQR when not set */
  uint32_t max_frame;            /* the largest native frame a client may send, bytes (1 KiB - 64 MiB) */
  uint32_t handshake_timeout_ms; /* a connection that has not said CONNECT by then is closed; 0: never */
  uint32_t idle_timeout_ms;      /* a connection the broker hears nothing from for this long is closed
                                    (the broker sends PING after half of it); 0: never */
  uint32_t max_connections;      /* open at once; one more is accepted and closed at once; 0: no limit */
  mqr_tls_config_t tls;
  mqr_prefixes_t prefixes;
  int64_t options[MQR_LISTENER_OPTIONS]; /* the protocols' blocks: mqr_listener_option */
  uint32_t line, column;
} mqr_listener_config_t;

/* The value of option i of protocol def's block in listener l (its default when the
 * block does not give it; def must be registered). */
MQR_EXTERN int64_t mqr_listener_option(const mqr_listener_config_t *l, const mqr_protocol_def_t *def, uint32_t i);

/* The persistence section (docs/durability.md): the journal of durable messages. Without
 * the section, enabled is false. Strings live as long as the config. */
typedef struct {
  bool enabled;
  const char *directory;               /* where the journal lives; NULL: not given (mqrd --data-dir) */
  size_t journal_file_size;            /* each journal file, bytes: 10 MiB */
  uint32_t journal_min_files;          /* files kept, in use or ready: 2 */
  uint32_t journal_pool_files;         /* released files kept for reuse; 0: no limit (the file's -1) */
  uint64_t journal_buffer_timeout_ns;  /* the longest a batch waits for more records; 0: the next loop pass */
  size_t journal_buffer_size;          /* a batch this large goes at once: 490 KiB */
  bool journal_sync;                   /* fdatasync before a durable message is receipted: true */
  uint32_t journal_compact_min_files;  /* compact when more files than this are in use: 10 */
  uint32_t journal_compact_percentage; /* ... and the oldest holds less live data than this %: 30 */
  uint32_t line, column;               /* of the section; 0 when absent */
} mqr_persistence_config_t;

/* The cluster section (docs/cluster.md): this node and its peers, whose durable queues of
 * addresses whose settings say `replicated` are replicated over Raft groups. Without the
 * section, enabled is false. Strings live as long as the config. */
typedef struct {
  uint64_t id;
  const char *address; /* "IPV4:PORT": its group 0's (group g at PORT + g) */
  const char *url;     /* where its clients connect (tcp://HOST:PORT): sends are forwarded there; NULL: none */
} mqr_cluster_peer_config_t;

typedef struct {
  bool enabled;
  uint64_t node_id;
  const char *bind; /* "IPV4:PORT" of this node's group 0, as its peers know it */
  const mqr_cluster_peer_config_t *peers;
  uint32_t n_peers;
  uint32_t groups;               /* 1 to 64: 1 */
  const char *directory;         /* the groups' logs; NULL: the persistence directory's "cluster" */
  uint32_t election_timeout_ms;  /* 500 (libraft waits a random time between it and twice it) */
  uint32_t heartbeat_timeout_ms; /* 100 */
  uint32_t snapshot_threshold;   /* log entries between snapshots: 1024 */
  size_t segment_size;           /* each Raft log segment file, bytes: 32 MiB (1 MiB to 1 GiB) */
  /* follower-consumers: a consumer of a replicated queue on a node that does not lead its
   * group is fed from the leader ("feed", false), or refused and told where the leader
   * is ("redirect", true: a native Redirect, MQTT 5's Server Reference). */
  bool redirect_consumers;
  bool join; /* added to a running cluster (mqr cluster add-node): not bootstrapped */
  /* How this node's connections to its peers' urls (forwarded sends) say who they are:
   * the cluster user and its password (NULL: anonymous), and for a tls:// url the CAs
   * the peer's certificate must chain to (NULL: the system's) and a client certificate
   * and key (NULL: none). Paths are the config file's directory's when relative. */
  const char *user, *password;
  const char *tls_ca, *tls_cert, *tls_key;
  /* The Raft links between nodes over TLS too (false: libraft's plain TCP): each node
   * proves itself with tls_cert and tls_key and accepts a peer whose certificate chains
   * to tls_ca and which gives this node's user and password (all needed). */
  bool raft_tls;
  uint32_t line, column; /* of the section; 0 when absent */
} mqr_cluster_config_t;

/* The config's cluster section (enabled false when it has none). */
MQR_EXTERN const mqr_cluster_config_t *mqr_config_cluster(const mqr_config_t *cfg);

/* The log section: `log: {level: error|warn|info|debug, format: text|json}`
 * (docs/observability.md). What writes the log (mqrd) reads it; the library logs through
 * its options' callback. */
typedef struct {
  int level; /* 0 error, 1 warn, 2 info, 3 debug (mqr_log_level_t's order); -1: not given */
  bool json; /* one JSON object per line, for log shippers; false: text */
} mqr_log_config_t;

/* The config's log section (level -1 and text when it has none). */
MQR_EXTERN const mqr_log_config_t *mqr_config_log(const mqr_config_t *cfg);

/* The config's persistence section (defaults when it has none). */
MQR_EXTERN const mqr_persistence_config_t *mqr_config_persistence(const mqr_config_t *cfg);

/* message-expiry-scan-period in ms (how often the broker searches its queues for expired
 * messages); 0 when the config does not give it. */
MQR_EXTERN uint32_t mqr_config_expiry_scan_ms(const mqr_config_t *cfg);

/* global-max-size: the bytes of messages the broker holds in memory, all addresses
 * together, past which every address acts on its address-full-policy (PAGE, BLOCK, FAIL,
 * DROP) as when its own max-size-bytes is reached (Artemis's global-max-size). -1: no
 * limit. Not given: an eighth of the machine's memory (Artemis's default, half of a JVM
 * heap that defaults to a quarter of it). */
MQR_EXTERN int64_t mqr_config_global_max_size(const mqr_config_t *cfg);

/* ---- security (docs/security.md) ---------------------------------------------------------------- */

/* What a role may be allowed to do on an address (Artemis's security-settings). */
typedef enum {
  MQR_PERM_SEND,
  MQR_PERM_CONSUME,
  MQR_PERM_BROWSE,
  MQR_PERM_CREATE_ADDRESS,
  MQR_PERM_DELETE_ADDRESS,
  MQR_PERM_CREATE_DURABLE_QUEUE,
  MQR_PERM_DELETE_DURABLE_QUEUE,
  MQR_PERM_CREATE_NON_DURABLE_QUEUE,
  MQR_PERM_DELETE_NON_DURABLE_QUEUE,
  MQR_PERM_MANAGE,
  MQR_PERMISSIONS /* how many */
} mqr_permission_t;

/* "send", "consume", "browse", "create-address", ... as the config writes them; NULL out
 * of range. */
MQR_EXTERN const char *mqr_permission_name(int p);

/* The security section. Without one, present is false and anonymous clients are
 * refused (the embedded default config allows them: it listens on 127.0.0.1 only). */
typedef struct {
  bool present;
  const char *users_file;    /* users (mqr/security.h), relative to the config's folder; NULL: none */
  const char *roles_file;    /* an Artemis roles file for users_file; NULL: none */
  bool allow_anonymous;      /* a client without credentials is let in, with anonymous_roles */
  mqr_str_t anonymous_roles; /* comma-separated; empty: none */
  uint32_t cache_size;       /* authentication-cache-size: verified (user, password) kept (1000) */
  uint32_t cache_ttl_ms;     /* authentication-cache-ttl: how long one is trusted (10 s) */
  uint32_t line, column;
} mqr_security_config_t;

/* A security-settings entry: the roles (comma-separated; empty: none) that may do each
 * thing on the addresses match matches. The most specific match for an address wins
 * whole; nothing is inherited from broader ones, and what an entry does not list is
 * denied. */
typedef struct {
  mqr_str_t match;
  mqr_str_t roles[MQR_PERMISSIONS];
  uint32_t line, column;
} mqr_security_setting_t;

/* The config's security section (defaults when it has none); valid as long as cfg. */
MQR_EXTERN const mqr_security_config_t *mqr_config_security(const mqr_config_t *cfg);
/* How many security-settings entries it has. */
MQR_EXTERN uint32_t mqr_config_security_setting_count(const mqr_config_t *cfg);
/* The i-th entry as written, NULL past the end; valid as long as cfg. */
MQR_EXTERN const mqr_security_setting_t *mqr_config_security_setting(const mqr_config_t *cfg, uint32_t i);

/* Loads the file at path. On success writes *out (free with mqr_config_destroy) and
 * returns 0; warnings may still be in diags. Otherwise returns MQR_ECONFIG (problems
 * in diags, which may be NULL), MQR_EIO (cannot read the file) or MQR_ENOMEM; *out is
 * left alone. */
MQR_EXTERN int mqr_config_load_file(const char *path, mqr_config_t **out, mqr_diags_t *diags);

/* Loads YAML text; `name` is what errors call the file. */
MQR_EXTERN int mqr_config_load_string(const char *name, const char *text, size_t len, mqr_config_t **out,
                                      mqr_diags_t *diags);

/* Loads the default config compiled into the library (conf/mqr.yaml). */
MQR_EXTERN int mqr_config_load_default(mqr_config_t **out, mqr_diags_t *diags);

/* The text of the embedded default config, and what errors call it. */
MQR_EXTERN mqr_str_t mqr_config_default_text(void);
MQR_EXTERN const char *mqr_config_default_name(void);

/* Frees a config; NULL is allowed. */
MQR_EXTERN void mqr_config_destroy(mqr_config_t *cfg);

/* What the config holds. */
MQR_EXTERN const char *mqr_config_file(const mqr_config_t *cfg);
MQR_EXTERN mqr_wildcard_t mqr_config_wildcard(const mqr_config_t *cfg);
MQR_EXTERN uint32_t mqr_config_listener_count(const mqr_config_t *cfg);
/* The i-th listener, NULL past the end; valid as long as cfg. */
MQR_EXTERN const mqr_listener_config_t *mqr_config_listener(const mqr_config_t *cfg, uint32_t i);
/* The listener named name, NULL if none. */
MQR_EXTERN const mqr_listener_config_t *mqr_config_find_listener(const mqr_config_t *cfg, const char *name);
MQR_EXTERN uint32_t mqr_config_address_count(const mqr_config_t *cfg);
MQR_EXTERN uint32_t mqr_config_queue_count(const mqr_config_t *cfg);
MQR_EXTERN uint32_t mqr_config_settings_count(const mqr_config_t *cfg);
/* Whether the config lists an address of that name. */
MQR_EXTERN bool mqr_config_has_address(const mqr_config_t *cfg, mqr_str_t name);
/* Calls fn for each queue the config lists (its name and its address's; views valid as
 * long as cfg), in order; a non-zero return stops the walk and is returned. */
MQR_EXTERN int mqr_config_foreach_queue(const mqr_config_t *cfg,
                                        int (*fn)(void *arg, mqr_str_t queue, mqr_str_t address), void *arg);
/* Calls fn for each address the config lists, in order; as mqr_config_foreach_queue. */
MQR_EXTERN int mqr_config_foreach_address(const mqr_config_t *cfg, int (*fn)(void *arg, mqr_str_t address), void *arg);
/* The i-th address-settings entry as written (its `set` bits say which fields it gives;
 * the others are inherited), with its match in *match; NULL past the end. Valid as long
 * as cfg. */
MQR_EXTERN const mqr_address_settings_t *mqr_config_settings(const mqr_config_t *cfg, uint32_t i, mqr_str_t *match);

/* The diverts section: how many, and the i-th as a divert config (views valid as long as
 * cfg; false past the end). */
MQR_EXTERN uint32_t mqr_config_divert_count(const mqr_config_t *cfg);
MQR_EXTERN bool mqr_config_divert(const mqr_config_t *cfg, uint32_t i, mqr_divert_config_t *out);

/* Initialises r (mqr_router_init) with the config's wildcard syntax and fills it with
 * its address settings, addresses, queues and diverts. 0, or MQR_ENOMEM (r is closed again and
 * err says what), or the router's error for a config it refuses (with the position in
 * err). */
MQR_EXTERN int mqr_config_build_router(const mqr_config_t *cfg, mqr_router_t *r, mqr_error_t *err);

/* One line of what applying a config did (applied) or did not do (!applied). */
typedef void (*mqr_config_report_fn)(void *ctx, bool applied, const char *line);

/* Brings a live router built from old up to cfg, without a restart: address settings
 * replaced (removed ones removed), new addresses, routing types and queues made, queues
 * enabled or disabled, diverts removed, changed and added. What needs a restart is reported and left: listeners,
 * wildcard syntax, removed routing types, other queue attributes. Addresses and queues old lists and cfg does not
 * are left to the caller, which holds their messages (a broker applies config-delete-queues and
 * config-delete-addresses: mqr_broker_reload). 0, or the router's error with cfg's position in err (what came
 * before it is applied). */
MQR_EXTERN int mqr_config_apply(const mqr_config_t *cfg, const mqr_config_t *old, mqr_router_t *r,
                                mqr_config_report_fn fn, void *ctx, mqr_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* MQR_CONFIG_H */
