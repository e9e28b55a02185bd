/* Listeners: binding, accepting (a connection with no memory for it is closed, not left
 * unaccepted), SIGPIPE; the connection layer started, made ready and closed. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>

#include "net.h"

/* ---- listeners --------------------------------------------------------------------------------- */

static void refuse_closed(uv_handle_t *h) {
  mqr__listener_t *l = h->data;
  l->refusing = false;
  mqr__broker_handle_closed(l->b);
}

/* No memory for a new connection, or one over max-connections (over): it is closed at
 * once (see spare). */
static void refuse(mqr__listener_t *l, bool over) {
  mqr_broker_t *b = l->b;
  if (l->refusing) {
    l->accept_pending = true;
    return;
  }
  l->refusing = true;
  uv_tcp_init(mqr__loop(b), &l->spare);
  l->spare.data = l;
  mqr__broker_handle_opened(b);
  if (uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&l->spare) == 0) {
    if (over)
      l->refused++; /* told by the tick, once for many */
    else
      mqr__log(b, MQR_LOG_WARN, "listener '%s': out of memory for a new connection; closed it", l->cfg->name);
  }
  uv_close((uv_handle_t *)&l->spare, refuse_closed);
}

void mqr__net_on_connection(uv_stream_t *server, int status) {
  mqr__listener_t *l = server->data;
  mqr_broker_t *b = l->b;
  struct mqr__net_s *net = mqr__net(b);
  if (status < 0 || mqr__closing(b)) return;
  if (l->cfg->max_connections && l->n_conns >= l->cfg->max_connections) {
    refuse(l, true);
    return;
  }
  mqr__conn_t *c = mqr_calloc(1, sizeof *c);
  if (c == NULL) {
    refuse(l, false);
    return;
  }
  uv_tcp_init(mqr__loop(b), &c->tcp);
  c->tcp.data = c;
  c->b = b;
  c->net = net;
  c->l = l;
  mqr__session_init(b, &c->sess, &mqr__conn_producer_ops);
  c->state = MQR__CONN_HANDSHAKE;
  c->opened_ms = c->heard_ms = c->progress_ms = uv_now(mqr__loop(b));
  mqr__broker_handle_opened(b);
  net->n_conns++;
  c->next = net->conns;
  if (net->conns) net->conns->prev = c;
  net->conns = c;
  l->n_conns++; /* (its close callback counts it down) */
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    c->state = MQR__CONN_CLOSING;
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, mqr__conn_close_cb);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  struct sockaddr_storage sa;
  int salen = sizeof sa;
  char ip[48] = "?";
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &salen) == 0) {
    if (sa.ss_family == AF_INET6)
      uv_ip6_name((struct sockaddr_in6 *)&sa, ip, sizeof ip);
    else
      uv_ip4_name((struct sockaddr_in *)&sa, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&sa)->sin_port));
  }
  mqr__log(b, MQR_LOG_DEBUG, "connection %lld from %s on listener '%s'", (long long)c->sess.id, c->peer, l->cfg->name);
  c->tr = l->transport;
  if (c->tr->open && c->tr->open(c) != 0) {
    c->tr = NULL;
    mqr__conn_fail(c, MQR_ENOMEM, "out of memory for a %s connection", l->transport->name);
    return;
  }
  /* One protocol: its head at once (its handshake timeout is its own); several: the
   * first bytes tell (conn.c). */
  for (const mqr__head_t *const *h = mqr__heads; *h; h++)
    if ((*h)->def->bit == l->cfg->protocols && !mqr__conn_set_head(c, *h)) return;
  c->reading = true;
  if (c->tr->read_start(c) != 0) mqr__conn_close(c, false);
}

static void listener_closed(uv_handle_t *h) { mqr__broker_handle_closed(((mqr__listener_t *)h->data)->b); }

/* libuv writes to sockets with write(2), not send(2) with MSG_NOSIGNAL: a peer that
 * resets its connection while a delivery is being written raises SIGPIPE, whose default
 * action ends the process. A broker that listens must not depend on how its process was
 * started, so it ignores SIGPIPE when nobody has chosen a disposition for it (an
 * application's own handler, or SIG_IGN, is left as it is; broker.h says so). */
static void sigpipe_ignore(mqr_broker_t *b) {
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) != 0 || sa.sa_handler != SIG_DFL || (sa.sa_flags & SA_SIGINFO)) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPIPE, &sa, NULL) == 0)
    mqr__log(b, MQR_LOG_DEBUG,
             "SIGPIPE was at its default action: now ignored (a reset peer must not end the process)");
}

static void tick_closed(uv_handle_t *h) { mqr__broker_handle_closed(h->data); }

int mqr__server_listen(mqr_broker_t *b, mqr_error_t *err) {
  if ((*mqr__net_slot(b) = mqr_calloc(1, sizeof(struct mqr__net_s))) == NULL)
    return mqr_error_set(err, MQR_ENOMEM, "out of memory starting the listeners");
  struct mqr__net_s *net = mqr__net(b);
  /* The connections' clocks: timeouts, heartbeats, peers gone while paused. */
  uv_timer_init(mqr__loop(b), &net->tick);
  net->tick.data = b;
  mqr__broker_handle_opened(b);
  uv_timer_start(&net->tick, mqr__net_tick, MQR__TICK_MS, MQR__TICK_MS);
  uv_unref((uv_handle_t *)&net->tick); /* it keeps no loop alive by itself */
  uint32_t n = mqr_config_listener_count(mqr__config(b));
  if (n == 0) return 0;
  sigpipe_ignore(b);
  if ((net->listeners = mqr_calloc(n, sizeof *net->listeners)) == NULL)
    return mqr_error_set(err, MQR_ENOMEM, "out of memory opening listeners");
  for (uint32_t i = 0; i < n; i++) {
    mqr__listener_t *l = &net->listeners[i];
    l->b = b;
    /* Its own copy of what it was configured with: the config may go with a reload. */
    const mqr_listener_config_t *lc = mqr_config_listener(mqr__config(b), i);
    const char **tls[4] = {&l->own.tls.cert, &l->own.tls.key, &l->own.tls.ca, &l->own.tls.ciphers};
    size_t bytes = strlen(lc->name) + strlen(lc->host) + 2;
    for (uint32_t k = 0; k < lc->prefixes.count; k++) bytes += lc->prefixes.items[k].text.len + 1;
    const char *tls_src[4] = {lc->tls.cert, lc->tls.key, lc->tls.ca, lc->tls.ciphers};
    for (int k = 0; k < 4; k++) bytes += tls_src[k] ? strlen(tls_src[k]) + 1 : 0;
    if ((l->strings = mqr_malloc(bytes)) == NULL)
      return mqr_error_set(err, MQR_ENOMEM, "out of memory opening listeners");
    l->own = *lc;
    char *p = l->strings;
    l->own.name = strcpy(p, lc->name);
    p += strlen(p) + 1;
    l->own.host = strcpy(p, lc->host);
    p += strlen(p) + 1;
    for (uint32_t k = 0; k < lc->prefixes.count; k++) {
      mqr_str_t t = lc->prefixes.items[k].text;
      memcpy(p, t.ptr, t.len);
      p[t.len] = '\0';
      l->own.prefixes.items[k].text = mqr_str_n(p, t.len);
      p += t.len + 1;
    }
    for (int k = 0; k < 4; k++)
      if (tls_src[k]) {
        *tls[k] = strcpy(p, tls_src[k]);
        p += strlen(p) + 1;
      }
    l->cfg = &l->own;
    l->transport = mqr__transport_named(l->cfg->tls.enabled ? "tls" : "tcp");
    if (l->transport->listen && l->transport->listen(l, err) != 0) {
      mqr_error_t why = *err;
      return mqr_error_set(err, why.code, "listener '%s': %s", l->cfg->name, why.message);
    }
    net->protocols |= l->cfg->protocols;
    struct sockaddr_storage sa;
    mqr_error_t why;
    if (mqr_resolve(l->cfg->host, l->cfg->port, &sa, &why) != 0)
      return mqr_error_set(err, MQR_EIO, "listener '%s' cannot listen on %s:%u: %s", l->cfg->name, l->cfg->host,
                           l->cfg->port, why.message);
    int rc = 0;
    uv_tcp_init(mqr__loop(b), &l->tcp);
    l->tcp.data = l;
    l->open = true;
    mqr__broker_handle_opened(b);
    net->n_listeners = i + 1;
    if (rc == 0) rc = uv_tcp_bind(&l->tcp, (const struct sockaddr *)&sa, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&l->tcp, 1024, mqr__net_on_connection);
    if (rc != 0)
      return mqr_error_set(err, MQR_EIO, "listener '%s' cannot listen on %s:%u: %s", l->cfg->name, l->cfg->host,
                           l->cfg->port, uv_strerror(rc));
    int salen = sizeof sa;
    uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&sa, &salen);
    l->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    mqr__log(b, MQR_LOG_INFO, "listener '%s' on %s:%d", l->cfg->name, l->cfg->host, l->port);
  }
  return 0;
}

int mqr__server_ready(mqr_broker_t *b, mqr_error_t *err) {
  struct mqr__net_s *net = mqr__net(b);
  for (const mqr__head_t *const *h = mqr__heads; net && *h; h++)
    if (((*h)->def->bit & net->protocols) && (*h)->ready && (*h)->ready(b) != 0)
      return mqr_error_set(err, MQR_ENOMEM, "out of memory making the %s head ready", (*h)->name);
  return 0;
}

void **mqr__head_slot(mqr_broker_t *b, const mqr__head_t *h) {
  uint32_t i = 0;
  while (mqr__heads[i] != h) i++;
  return &mqr__net(b)->heads[i];
}

void mqr__server_close(mqr_broker_t *b) {
  struct mqr__net_s *net = mqr__net(b);
  if (net == NULL) return;
  uv_timer_stop(&net->tick);
  uv_close((uv_handle_t *)&net->tick, tick_closed);
  for (uint32_t i = 0; i < net->n_listeners; i++)
    if (net->listeners[i].open) {
      net->listeners[i].open = false;
      uv_close((uv_handle_t *)&net->listeners[i].tcp, listener_closed);
    }
  for (mqr__conn_t *c = net->conns; c; c = c->next) {
    if (c->state == MQR__CONN_CLOSING) continue;
    if (c->state == MQR__CONN_OPEN && c->head->bye) c->head->bye(c); /* not waited for if it cannot be written */
    mqr__conn_close(c, true);
  }
  mqr__server_flush(b); /* the idle handle is closing: write what is queued now */
}

uint32_t mqr__server_connections(const mqr_broker_t *b) {
  const struct mqr__net_s *net = mqr__net(b);
  return net ? net->n_conns : 0;
}

void mqr__server_free(mqr_broker_t *b) {
  struct mqr__net_s *net = mqr__net(b);
  if (net == NULL) return;
  for (uint32_t i = 0; i < net->n_listeners; i++) {
    mqr__listener_t *l = &net->listeners[i];
    if (l->transport && l->transport->unlisten) l->transport->unlisten(l);
    mqr_free(l->strings);
  }
  mqr_free(net->listeners);
  for (const mqr__head_t *const *h = mqr__heads; *h; h++)
    if ((*h)->free && *mqr__head_slot(b, *h)) (*h)->free(b);
  for (mqr__wreq_t *w; (w = net->wreq_free ? net->wreq_free : net->wreq_big) != NULL;) {
    *(w == net->wreq_free ? &net->wreq_free : &net->wreq_big) = w->next_free;
    mqr_free(w->segs);
    mqr_free(w->bytes);
    mqr_free(w->msgs);
    mqr_free(w->bufs);
    mqr_free(w);
  }
  while (net->rbuf_free) {
    void *next = *(void **)net->rbuf_free;
    mqr_free(net->rbuf_free);
    net->rbuf_free = next;
  }
  mqr_free(net);
  *mqr__net_slot(b) = NULL;
}

int mqr_broker_listener_port(const mqr_broker_t *b, uint32_t i) {
  const struct mqr__net_s *n = mqr__net(b);
  return n && i < n->n_listeners && n->listeners[i].open ? n->listeners[i].port : -1;
}

void mqr__server_reload(mqr_broker_t *b) {
  struct mqr__net_s *net = mqr__net(b);
  for (uint32_t i = 0; net && i < net->n_listeners; i++) {
    mqr__listener_t *l = &net->listeners[i];
    if (l->transport && l->transport->reload) l->transport->reload(l);
  }
}
