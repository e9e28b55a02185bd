/* The MQTT head (MQTT 3.1.1 and 5.0 on the connection layer): what its sources share.
 *
 *   packet.c, encode.c  reading a client's packets, writing the server's
 *   head.c       the connection: CONNECT and CONNACK, sessions (kept by client id,
 *                taken over, resumed, expired), keep-alive, wills, the head's ops
 *   publish.c    PUBLISH from a client (QoS 0, 1, 2 as the specification's state
 *                machines), retained messages, topic names mapped to addresses
 *   subscribe.c  SUBSCRIBE and UNSUBSCRIBE on the core's session, PUBLISH to a
 *                subscriber and its acknowledgements (PUBACK; PUBREC, PUBREL, PUBCOMP)
 *
 * docs/protocols.md says how MQTT maps to the address model, as Artemis maps it. */
#ifndef MQR_BROKER_MQTT_H
#define MQR_BROKER_MQTT_H

#include <mqr/security.h>

#include "../../net/net.h"
#include "packet.h"

typedef struct mqtt_session_s mqtt_session_t;

/* A subscription of a session: its queue outlives the connection when the session does. */
typedef struct mqtt_sub_s {
  struct mqtt_sub_s *next;
  mqtt_session_t *ss;
  mqr_broker_consumer_t *k; /* NULL while the session has no connection */
  int64_t num;              /* the core's subscription id */
  uint8_t qos, retain_handling;
  bool no_local, retain_as_published, shared;
  uint32_t sub_id;         /* 5.0 subscription identifier; 0: none */
  mqr_str_t filter, queue; /* as the client gave it; the queue's name (copies, after the struct) */
} mqtt_sub_t;

/* A QoS 1 or 2 PUBLISH to the client not yet acknowledged, by packet id. */
typedef struct {
  uint16_t id;     /* 0: a free slot */
  uint8_t state;   /* OUT_PUBLISHED (waits PUBACK or PUBREC), OUT_RELEASED (PUBREL sent, waits PUBCOMP),
                      OUT_RESEND (published on a connection that went: the id waits for the message) */
  mqtt_sub_t *sub; /* OUT_PUBLISHED */
  int64_t delivery;
  int64_t msg; /* the message's id (OUT_PUBLISHED, OUT_RESEND) */
} mqtt_out_t;

enum { OUT_PUBLISHED = 1, OUT_RELEASED = 2, OUT_RESEND = 3 };

/* A packet id kept for a message published on a connection that went: when the message is
 * delivered again, it goes with the same id and DUP set ([MQTT-4.4.0-1]). */
typedef struct {
  int64_t msg;
  uint16_t id; /* 0: used */
} mqtt_resend_t;

struct mqtt_session_s {
  mqtt_session_t *next; /* the broker's sessions */
  mqr__conn_t *conn;    /* its connection; NULL: offline */
  uint8_t level;
  uint32_t expiry;  /* seconds the session outlives its connection; UINT32_MAX: for ever */
  uint64_t gone_ms; /* uv_now when its connection went */
  mqtt_sub_t *subs;
  int64_t next_sub;
  uint8_t *qos2_in; /* 8 KiB of bits: packet ids of QoS 2 PUBLISHes received, before PUBREL */
  mqtt_out_t *out;  /* open addressing by packet id, a power of two */
  uint32_t out_cap, out_n;
  uint16_t next_id;
  mqtt_resend_t *resend; /* by msg, sorted; resend_n of them not yet used */
  uint32_t resend_len, resend_n;
  /* The will: the CONNECT packet's bytes kept, decoded again when it goes. */
  uint8_t *will;
  size_t will_len;
  uint64_t will_at;           /* uv_now when a delayed will goes; 0: none waiting */
  mqr__principal_t *will_who; /* who the will is sent as: its connection's user */
  bool stored;                /* its state is in $sys.mqtt.sessions (store.c) */
  mqr_str_t id;               /* client_id as a view, its length known */
  char client_id[];
};

/* A connection's MQTT state (c->hs). */
typedef struct {
  mqtt_session_t *ss;
  uint8_t level;
  bool connected, disconnected; /* disconnected: a DISCONNECT said no will */
  uint64_t keep_alive_ms;       /* 1.5 times the client's keep-alive; 0: none */
  uint16_t receive_max;         /* QoS 1 and 2 PUBLISHes in flight to it, at most */
  uint32_t max_packet;          /* the largest packet it takes */
  uint16_t alias_max;           /* topic aliases it may use (ours) */
  uint16_t in_max;              /* QoS 1 and 2 PUBLISHes it may have unanswered (our Receive Maximum) */
  /* Topic aliases toward it (5.0): at most out_alias_max (its Topic Alias Maximum, and the
   * listener's), each topic given one the first time it goes, used without the topic
   * after; past the maximum, topics go whole. */
  uint16_t out_alias_max, out_alias_next; /* out_alias_max 0: none (out_aliases unmade) */
  mqr__smap_t out_aliases;                /* topic -> alias (as a pointer-sized number) */
  uint32_t in_open;                       /* those it has: PUBACK not yet sent, or PUBREC sent and PUBCOMP not */
  mqr_str_t *aliases;                     /* alias_max + 1, copies */
  /* Answers that wait for the journal: a PUBACK or PUBREC per token, in order. */
  struct {
    int64_t token;
    uint16_t id;
    uint8_t type;
  } * waiting;
  uint32_t w_head, w_n, w_cap;
  int64_t next_token;
  char *topic; /* a topic written to it (mapped back from an address) */
  size_t topic_cap;
  /* Its CONNECT's credentials checked: under way (auth), or done with status and, when
   * it passed, the principal the session takes at CONNACK. */
  mqr__auth_t *auth;
  bool auth_done;
  int auth_status;
  mqr__principal_t *auth_who;
  /* 5.0 enhanced authentication (SCRAM-SHA-256): the exchange, the CONNECT it began with
   * (taken once it ends), and the server-final message its CONNACK carries. */
  mqr_scram_server_t *scram;
  uint8_t *connect;
  size_t connect_len;
  char scram_final[128];
} mqtt_conn_t;

#define MQTT_MAX_SUBSCRIPTIONS 1024 /* per session */
#define MQTT_RETAIN_PREFIX "$sys.mqtt.retain."

/* The broker's MQTT sessions (the head's slot: mqr__mqtt_registry). */
typedef struct {
  mqtt_session_t *sessions;
  uint32_t n;
  /* what a PUBLISH is turned into (publish.c), and a PUBLISH's head to a subscriber
   * (subscribe.c): grown, kept */
  char *addr;
  size_t addr_cap;
  mqr_str_t *keys;
  mqr_value_t *values;
  uint32_t kv_cap;
  mqr_str_t *ukeys, *uvalues;
  uint32_t u_cap;
  char *text;
  size_t text_cap;
  uint32_t *sub_ids;
  uint8_t *raw; /* a PUBLISH's user properties as they came, when a name repeats (publish.c) */
  size_t raw_cap;
  /* $SYS (sys.c): when it was last published, the counters then, their load averages */
  uint64_t sys_received, sys_sent; /* PUBLISH packets from clients, and deliveries to them */
  uint64_t sys_at;
  uint64_t sys_last[4];
  double sys_load[4][3];
} mqtt_registry_t;

/* The property that keeps an MQTT 5 PUBLISH's user properties as they came, in order and
 * with repeated names ([MQTT-3.3.2-17, -18]), when a name repeats: bytes, each pair a
 * u16 length and the name then a u16 length and the value (big-endian, as on the wire).
 * The message's properties hold the first value of each name, for filters and the other
 * protocols; an MQTT subscriber gets the list (subscribe.c). */
#define MQR__MQTT_USER_LIST "mqtt.user.properties"

/* head.c */
/* Writes n bytes made by put (called with the room): 0 or MQR_ENOMEM. */
int mqr__mqtt_out(mqr__conn_t *c, const uint8_t *bytes, size_t n);
/* Ends the connection as the specification says for a fault: a 5.0 DISCONNECT with the
 * reason code first (when connected), then the close. */
void mqr__mqtt_close(mqr__conn_t *c, uint8_t reason, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* 5.0: DISCONNECT 0x9C (Use another server) with the Server Reference HOST:PORT of url
 * (a cluster's leader: where what was refused is served) and why, then the close. */
void mqr__mqtt_redirect(mqr__conn_t *c, const char *url, const char *why);
/* A PUBACK or PUBREC that waits for the core's answer to a send: its token. */
int64_t mqr__mqtt_answer_later(mqr__conn_t *c, uint8_t type, uint16_t id);
extern const mqr__head_t mqr__mqtt_head;
/* A listener's mqtt block (head.c): its options, in this order. */
extern const mqr_protocol_def_t mqr__mqtt_def;
enum {
  MQTT_OPT_MAX_PACKET,
  MQTT_OPT_RECEIVE_MAX,
  MQTT_OPT_SERVER_KEEP_ALIVE,
  MQTT_OPT_TOPIC_ALIAS_MAX,
  MQTT_OPT_SYS_INTERVAL
};
static inline int64_t mqr__mqtt_opt(const mqr__conn_t *c, int i) {
  return mqr_listener_option(c->l->cfg, &mqr__mqtt_def, i);
}
/* The broker's registry, made on first use (NULL: no memory), or NULL when none. */
mqtt_registry_t *mqr__mqtt_registry(mqr_broker_t *b, bool make);
/* Every session, at the broker's close. */
void mqr__mqtt_free_sessions(mqr_broker_t *b);
/* Sessions past their expiry, delayed wills: every tick. */
void mqr__mqtt_tick_sessions(mqr_broker_t *b, uint64_t now);
/* heads/mqtt/sys.c: the $SYS/broker/... topics published again (retained) when sys-interval has
 * passed. */
void mqr__mqtt_sys_tick(mqr_broker_t *b, uint64_t now);

/* publish.c */
/* An MQTT topic name or filter as an address of the broker's wildcard syntax: '/'
 * separates words, '+' and '#' are its wildcards (filters), and the broker's own special
 * characters are escaped. Written into out (cap bytes); its length, or 0 when cap is too
 * small. */
size_t mqr__mqtt_to_address(const mqr_wildcard_t *wc, mqr_str_t topic, char *out, size_t cap);
/* And back: an address as a topic name. */
size_t mqr__mqtt_to_topic(const mqr_wildcard_t *wc, mqr_str_t address, char *out, size_t cap);
/* Sends a PUBLISH (from a client, or a will: c NULL, then session ss) to its address;
 * retained ones are kept per topic. 0, MQR__PENDING (answer to token later), or an error
 * with err. */
int mqr__mqtt_send(mqr_broker_t *b, mqr__conn_t *c, mqr__principal_t *who, mqr_str_t client_id,
                   const mqr__mqtt_publish_t *m, const mqr__mqtt_props_t *props, int64_t token, mqr_broker_receipt_t *r,
                   mqr_error_t *err);
void mqr__mqtt_on_publish(mqr__conn_t *c, mqr__mqtt_packet_t *p);
void mqr__mqtt_on_pubrel(mqr__conn_t *c, const mqr__mqtt_packet_t *p);
/* The retained messages of topics filter matches, copied into queue (of address) as
 * retained: a new subscription's. */
void mqr__mqtt_retained_to(mqr_broker_t *b, mqr_str_t filter_address, mqr_str_t address, mqr_str_t queue);

/* store.c */
/* Keeps the session's state (ended: says it is gone) in $sys.mqtt.sessions, when it
 * outlives its connection. */
void mqr__mqtt_store(mqr_broker_t *b, mqtt_session_t *ss, bool ended);
/* A QoS 2 exchange's packet id kept (set) or forgotten: in, a PUBLISH received not yet
 * released; out, a delivery received by the client whose PUBCOMP is due. */
void mqr__mqtt_store_qos2(mqr_broker_t *b, mqtt_session_t *ss, bool in, uint16_t id, bool set);
/* The sessions kept there, back as offline sessions (the registry made). 0 or MQR_ENOMEM. */
int mqr__mqtt_load_sessions(mqr_broker_t *b);

/* subscribe.c */
void mqr__mqtt_on_subscribe(mqr__conn_t *c, const mqr__mqtt_packet_t *p);
void mqr__mqtt_on_unsubscribe(mqr__conn_t *c, const mqr__mqtt_packet_t *p);
void mqr__mqtt_on_ack(mqr__conn_t *c, const mqr__mqtt_packet_t *p);
/* The session's subscriptions attached to connection c (resumed): their consumers made. */
void mqr__mqtt_subs_attach(mqr__conn_t *c, mqtt_session_t *ss);
/* A delivery the client received before a restart, its PUBREL due: back in flight. */
void mqr__mqtt_out_released(mqtt_session_t *ss, uint16_t id);
/* Resent at resume: PUBREL for each QoS 2 delivery the client had received. */
void mqr__mqtt_resend_releases(mqr__conn_t *c, mqtt_session_t *ss);
/* The session ends for good: its subscriptions' queues deleted (shared ones kept). */
void mqr__mqtt_subs_end(mqr_broker_t *b, mqtt_session_t *ss);
/* Its connection went: consumers are gone with the core's session; the rest stays. */
void mqr__mqtt_subs_detach(mqtt_session_t *ss);
extern const mqr__consumer_ops_t mqr__mqtt_consumer_ops;

#endif
