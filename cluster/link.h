/* The Raft links over TLS: a libraft transport (struct raft_uv_transport) whose
 * connections are TLS 1.3 over TCP, both ends proving themselves with a certificate that
 * chains to the cluster's CA, and the connecting node then giving the cluster user and
 * password, which the accepting node checks against its own. Private to mqr.
 *
 * libraft's own TCP transport (raft_uv_tcp) has neither encryption nor authentication,
 * and libraft reads and writes a uv_stream_t it is handed: each link hands it one end of
 * a socketpair (a uv_pipe_t) and carries the other end's bytes through OpenSSL (memory
 * BIOs) to the TCP connection. libraft frames, checksums and retries as it does over TCP.
 *
 * On the link, after the TLS handshake, the connecting node sends once:
 *   "mqr-raft" (8 bytes), version (u8, 1), node id (u64 little-endian), address length
 *   (u8) and address (as libraft knows the node), user length (u8) and user, password
 *   length (u8) and password (lengths 0 when no cluster user is set);
 * then the link carries libraft's bytes both ways. The accepting node closes a link whose
 * certificate, preamble or credentials do not check (and says why through warn), and one
 * that has not finished all of it within 10 s.
 *
 * Threads: the loop's. */
#ifndef MQR_CLUSTER_LINK_H
#define MQR_CLUSTER_LINK_H

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <uv.h>

#include "mqr/common.h"

typedef struct mqr__links_s mqr__links_t;

typedef struct {
  const char *ca, *cert, *key; /* PEM files: the CAs a peer's certificate must chain to; this node's */
  const char *user, *password; /* the cluster user: given, and asked of a peer (NULL: none) */
  /* A link refused or failed, with why (the loop's thread; may be NULL). */
  void (*warn)(void *arg, const char *why);
  void *arg;
} mqr__links_options_t;

/* The node's TLS contexts, made from opt's files (copied; opt's strings may go): *out, or
 * MQR_EINVAL (a file that does not load, err says which), MQR_ENOMEM. */
int mqr__links_new(uv_loop_t *loop, const mqr__links_options_t *opt, mqr__links_t **out, mqr_error_t *err);
void mqr__links_free(mqr__links_t *l); /* once every transport made from it is closed */

/* t made a transport of l's for libraft (raft_uv_init): 0 or MQR_ENOMEM. Closed by
 * libraft (its close op); mqr__links_transport_free then frees what it holds. */
int mqr__links_transport(mqr__links_t *l, struct raft_uv_transport *t);
void mqr__links_transport_free(struct raft_uv_transport *t);

#endif
