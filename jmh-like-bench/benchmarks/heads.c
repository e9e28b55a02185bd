/* heads: the MQTT and STOMP heads end to end, against the brokers people run for those
 * protocols, through one raw-socket pipelined client of ours for both (a client library
 * would be the bottleneck: libmosquitto measured ~60k QoS 0 msgs/s through mosquitto
 * here). One publisher and one subscriber connection on 127.0.0.1, bodies of size=16,
 * 1024 or 65536 bytes; an operation is one message sent and received. The client keeps
 * a window of messages sent and not yet received (WINDOW, and at most WINDOW_BYTES of
 * bodies), never draining between batches (finish receives what is in flight, inside the
 * timed region): the producer is faster than the consumer whenever the broker lets it
 * be. Each iteration reports the broker process's peak RSS (VmHWM) as peak_rss_mb.
 *
 * transport=tls (MQTT): both connections over TLS through OpenSSL on the same
 * non-blocking sockets, to a listener with the run's self-signed P-256 certificate
 * (mqrd's tls block, mosquitto's certfile/keyfile), whatever TLS 1.3 suite the broker
 * prefers. transport=ws: over WebSockets (mqrd's listener with http; the subprotocol
 * mqtt or v12.stomp), each MQTT packet or STOMP frame in a frame of its own as MQTT.js and
 * stompjs send them (masked, with a zero key: the broker unmasks as for any key);
 * mosquitto's websockets listener (libwebsockets) for the MQTT peer.
 *
 *   mqtt   qos=0,1: PUBLISH at that QoS to topic bench, a subscription at that QoS
 *          (QoS 1: the publisher reads PUBACKs, the subscriber sends one per message)
 *       impl=mqr        mqrd (this build's) with an MQTT listener, in its own process
 *       impl=mosquitto  Debian's mosquitto 2.0 with no limits on messages in flight or
 *                       queued (max_inflight_messages 0, max_queued_messages 0), no
 *                       persistence: its best configuration for this shape
 *       impl=embedded   the broker in this process, on this thread's loop, between the
 *                       client's reads and writes: slower (one core for both sides), but
 *                       B/op is then the broker's allocation per message (target 0)
 *   stomp  persistent=0: SEND to /queue/bench and a SUBSCRIBE with ack:auto;
 *          persistent=1: SEND with persistent:true and a receipt each, WINDOW receipts
 *          outstanding at most; a durable queue (mqr: its journal, fdatasync before each
 *          RECEIPT; ActiveMQ: KahaDB, which syncs before its RECEIPT)
 *       impl=mqr, impl=embedded  as above, with a STOMP listener (anycast-prefix /queue/)
 *       impl=activemq   Debian's ActiveMQ Classic 5.17 (its STOMP NIO connector, KahaDB),
 *                       -Xmx1G, the subscription's prefetch at WINDOW
 *
 * The brokers' data live under the build (MQR_BENCH_DATA). */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "bench.h"
#include "bench_proc.h"
#include "mqr/broker.h"

#define WINDOW 10000
#define WINDOW_BYTES (32u << 20)
#define WS_BIG 16384 /* a frame's payload read apart from its header */

typedef struct {
  int fd;
  SSL *ssl;         /* transport=tls */
  bool want_write;  /* TLS: a record the socket did not take yet */
  bool ws;          /* transport=ws: frames both ways */
  uint64_t ws_left; /* of the frame being read */
  bool ws_data;     /* it is a data frame (else skipped) */
  bool ws_big;      /* the last frame was large: the next header is read on its own */
  bool ws_ping;     /* it is a ping: its payload is kept for the pong */
  uint8_t ws_ctl[125];
  size_t ws_ctl_len;
  uint8_t ws_hdr[14];
  size_t ws_hdr_len;
  uint8_t *in, *out;
  size_t in_len, in_cap, out_len, out_cap;
} conn_t;

typedef struct {
  bool stomp;
  int impl; /* 0 mqr, 1 peer, 2 embedded */
  int qos;  /* mqtt */
  bool persistent;
  bool tls, ws;
  SSL_CTX *tls_ctx;
  int port;
  pid_t pid;
  char dir[600], path[700];
  uv_loop_t loop; /* embedded */
  mqr_config_t *cfg;
  mqr_broker_t *b;
  conn_t pub, sub;
  uint64_t sent, received, answered;
  double progress; /* when a message or an answer last came */
  uint16_t next_id;
  size_t body;     /* bytes of each message's body */
  uint64_t window; /* messages in flight at most */
  char failure[200];
} st_t;

/* ---- sockets ------------------------------------------------------------------------------- */

static bool reserve(uint8_t **buf, size_t *cap, size_t need) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 65536;
  while (n < need) n *= 2;
  uint8_t *p = realloc(*buf, n);
  if (p == NULL) return false;
  *buf = p;
  *cap = n;
  return true;
}

/* transport=ws: the next len bytes put are one packet, in a (masked) frame of their own. */
static void packet(conn_t *c, size_t len) {
  if (!c->ws) return;
  uint8_t h[14];
  size_t n = 0;
  h[n++] = 0x82;
  if (len < 126) {
    h[n++] = (uint8_t)(0x80 | len);
  } else if (len < 65536) {
    h[n++] = 0x80 | 126, h[n++] = (uint8_t)(len >> 8), h[n++] = (uint8_t)len;
  } else {
    h[n++] = 0x80 | 127;
    for (int i = 7; i >= 0; i--) h[n++] = (uint8_t)((uint64_t)len >> (8 * i));
  }
  memset(h + n, 0, 4), n += 4; /* the mask key */
  if (!reserve(&c->out, &c->out_cap, c->out_len + n)) abort();
  memcpy(c->out + c->out_len, h, n);
  c->out_len += n;
}

/* transport=ws: a ping's pong (libwebsockets closes a connection that does not answer). */
static void pong(conn_t *c) {
  uint8_t h[6] = {0x8a, (uint8_t)(0x80 | c->ws_ctl_len), 0, 0, 0, 0}; /* (a zero mask key) */
  if (!reserve(&c->out, &c->out_cap, c->out_len + sizeof h + c->ws_ctl_len)) abort();
  memcpy(c->out + c->out_len, h, sizeof h);
  memcpy(c->out + c->out_len + sizeof h, c->ws_ctl, c->ws_ctl_len);
  c->out_len += sizeof h + c->ws_ctl_len;
}

/* transport=ws: the frames' headers (and control frames) taken out of in[from..in_len),
 * pings answered.
 * Taking a header out moves what follows it; so that a large frame's payload is not moved,
 * the reads around it stop at its header's end and at its own (read_size). */
static void unframe(conn_t *c, size_t from) {
  size_t r = from, w = from;
  while (r < c->in_len) {
    if (c->ws_left == 0) {
      c->ws_hdr[c->ws_hdr_len++] = c->in[r++];
      size_t need = 2;
      if (c->ws_hdr_len >= 2) {
        uint8_t l = c->ws_hdr[1] & 0x7f;
        need = 2 + (l == 126 ? 2 : l == 127 ? 8 : 0) + ((c->ws_hdr[1] & 0x80) ? 4 : 0);
      }
      if (c->ws_hdr_len < need) continue;
      uint8_t l = c->ws_hdr[1] & 0x7f;
      uint64_t len = l;
      if (l == 126) len = (uint64_t)c->ws_hdr[2] << 8 | c->ws_hdr[3];
      if (l == 127)
        for (int i = 2, k = 0; k < 8; i++, k++) len = (k ? len << 8 : 0) | c->ws_hdr[i];
      c->ws_data = (c->ws_hdr[0] & 0x0f) < 8;
      c->ws_ping = (c->ws_hdr[0] & 0x0f) == 0x9 && len <= sizeof c->ws_ctl;
      c->ws_ctl_len = 0;
      c->ws_big = len >= WS_BIG;
      c->ws_hdr_len = 0;
      c->ws_left = len;
      if (c->ws_ping && len == 0) pong(c);
      continue;
    }
    size_t k = c->in_len - r < c->ws_left ? c->in_len - r : (size_t)c->ws_left;
    if (c->ws_data) {
      if (w != r) memmove(c->in + w, c->in + r, k);
      w += k;
    } else if (c->ws_ping) {
      memcpy(c->ws_ctl + c->ws_ctl_len, c->in + r, k);
      c->ws_ctl_len += k;
      if (c->ws_left == k) pong(c);
    }
    r += k, c->ws_left -= k;
  }
  c->in_len = w;
}

/* How much the next read may take of what the broker sent. */
static size_t read_size(const conn_t *c) {
  size_t n = c->in_cap - c->in_len;
  if (!c->ws) return n;
  if (c->ws_left >= WS_BIG && c->ws_data && c->ws_left < n) return (size_t)c->ws_left; /* its payload, to its end */
  if (c->ws_left == 0 && c->ws_big && n > 10) return 10 - c->ws_hdr_len; /* (a server's header: 10 bytes at most) */
  return n;
}

static void put(conn_t *c, const void *p, size_t n) {
  if (!reserve(&c->out, &c->out_cap, c->out_len + n)) abort();
  memcpy(c->out + c->out_len, p, n);
  c->out_len += n;
}

/* TLS: pump's writes and reads through OpenSSL (which makes the handshake on the way). */
static int tls_pump(conn_t *c) {
  c->want_write = false;
  size_t done = 0; /* (SSL_write writes a record at a time: what is left moves once, after) */
  while (done < c->out_len) {
    size_t left = c->out_len - done;
    int n = SSL_write(c->ssl, c->out + done, (int)(left < (1u << 20) ? left : (1u << 20)));
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_WRITE) c->want_write = true;
    if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return -1;
    break;
  }
  memmove(c->out, c->out + done, c->out_len - done);
  c->out_len -= done;
  BIO *w = SSL_get_wbio(c->ssl);
  if (BIO_wpending(w) > 0 && BIO_flush(w) <= 0) {
    if (!BIO_should_retry(w)) return -1;
    c->want_write = true;
  }
  for (;;) {
    if (!reserve(&c->in, &c->in_cap, c->in_len + 65536)) return -1;
    int n = SSL_read(c->ssl, c->in + c->in_len, (int)(c->in_cap - c->in_len));
    if (n > 0) {
      c->in_len += (size_t)n;
      continue;
    }
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_WRITE) c->want_write = true;
    if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return -1;
    return 0;
  }
}

/* Writes what it can, reads what there is; waits (at most 10 ms, or not at all when the
 * broker is on this thread's loop) for either. */
static int pump(st_t *s) {
  if (s->impl == 2) uv_run(&s->loop, UV_RUN_NOWAIT);
  conn_t *cs[2] = {&s->pub, &s->sub};
  struct pollfd p[2];
  for (int i = 0; i < 2; i++)
    p[i] = (struct pollfd){cs[i]->fd, (short)(POLLIN | (cs[i]->out_len || cs[i]->want_write ? POLLOUT : 0)), 0};
  if (poll(p, 2, s->impl == 2 ? 0 : 10) < 0 && errno != EINTR) return -1;
  for (int i = 0; i < 2; i++) {
    conn_t *c = cs[i];
    if (c->ssl) {
      if (tls_pump(c) != 0) return -1;
      continue;
    }
    if (c->out_len) {
      ssize_t n = write(c->fd, c->out, c->out_len);
      if (n > 0) {
        memmove(c->out, c->out + n, c->out_len - (size_t)n);
        c->out_len -= (size_t)n;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        return -1;
      }
    }
    for (;;) {
      if (!reserve(&c->in, &c->in_cap, c->in_len + 65536)) return -1;
      ssize_t n = read(c->fd, c->in + c->in_len, read_size(c));
      if (n > 0) {
        size_t from = c->in_len;
        c->in_len += (size_t)n;
        if (c->ws) unframe(c, from);
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return -1;
      break;
    }
  }
  return 0;
}

static void consumed(conn_t *c, size_t n) {
  memmove(c->in, c->in + n, c->in_len - n);
  c->in_len -= n;
}

/* ---- MQTT --------------------------------------------------------------------------------- */

static size_t vbi(uint8_t *p, size_t v) {
  size_t n = 0;
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    p[n++] = (uint8_t)(b | (v ? 0x80 : 0));
  } while (v);
  return n;
}

static void mqtt_connect(conn_t *c, const char *id) {
  uint8_t b[64], body[48];
  size_t n = 0, il = strlen(id);
  memcpy(body, "\x00\x04MQTT\x04\x02\x00\x00", 10); /* 3.1.1, clean session, no keep-alive */
  n = 10;
  body[n++] = (uint8_t)(il >> 8), body[n++] = (uint8_t)il;
  memcpy(body + n, id, il), n += il;
  b[0] = 0x10;
  size_t h = 1 + vbi(b + 1, n);
  memcpy(b + h, body, n);
  packet(c, h + n);
  put(c, b, h + n);
}

/* Packets in c->in: returns the count of type (the high nibble; 0: CONNACK and SUBACK,
 * the handshake's); for each QoS 1 PUBLISH a PUBACK is queued on c. -1: something else
 * came (a refusal). */
static long mqtt_read(conn_t *c, uint8_t type) {
  long count = 0;
  size_t at = 0;
  while (c->in_len - at >= 2) {
    size_t len = 0, i = 1;
    int shift = 0;
    for (; i < 5 && at + i < c->in_len; i++, shift += 7) {
      len |= (size_t)(c->in[at + i] & 0x7F) << shift;
      if (!(c->in[at + i] & 0x80)) break;
    }
    if (at + i >= c->in_len || at + i + 1 + len > c->in_len) break;
    uint8_t t = c->in[at] >> 4;
    const uint8_t *p = c->in + at + i + 1;
    bool handshake = t == 2 || t == 9;
    if (t != type && !handshake) return -1;
    if (t == 3 && (c->in[at] & 0x06)) { /* QoS 1: its PUBACK */
      size_t tl = (size_t)p[0] << 8 | p[1];
      uint8_t ack[4] = {0x40, 2, p[2 + tl], p[3 + tl]};
      packet(c, sizeof ack), put(c, ack, sizeof ack); /* (over ws, in a frame of its own) */
    }
    if (t == type || (type == 0 && handshake)) count++;
    at += i + 1 + len;
  }
  consumed(c, at);
  return count;
}

static const uint8_t *body_bytes(size_t n) {
  static uint8_t *b;
  static size_t cap;
  if (n > cap) {
    free(b);
    if ((b = malloc(n)) == NULL) abort();
    memset(b, 'm', n);
    cap = n;
  }
  return b;
}

static void mqtt_publish(st_t *s) {
  uint8_t b[32];
  size_t n = 0;
  b[n++] = (uint8_t)(0x30 | s->qos << 1);
  n += vbi(b + n, 2 + 5 + (s->qos ? 2 : 0) + s->body);
  memcpy(b + n,
         "\x00\x05"
         "bench",
         7),
      n += 7;
  if (s->qos) {
    if (++s->next_id == 0) s->next_id = 1;
    b[n++] = (uint8_t)(s->next_id >> 8), b[n++] = (uint8_t)s->next_id;
  }
  packet(&s->pub, n + s->body);
  put(&s->pub, b, n);
  put(&s->pub, body_bytes(s->body), s->body);
}

/* ---- STOMP -------------------------------------------------------------------------------- */

/* Frames in c->in: the count of those whose command is cmd (NULL: CONNECTED and RECEIPT,
 * the handshake's); -1 on an ERROR. */
static long stomp_read(conn_t *c, const char *cmd) {
  long count = 0;
  size_t at = 0, cl = cmd ? strlen(cmd) : 0;
  for (;;) {
    while (at < c->in_len && (c->in[at] == '\n' || c->in[at] == '\r')) at++;
    if (at >= c->in_len) break;
    uint8_t *start = c->in + at, *end = c->in + c->in_len;
    uint8_t *blank = memmem(start, (size_t)(end - start), "\n\n", 2);
    if (blank == NULL) break;
    uint8_t *body = blank + 2, *nul;
    uint8_t *len = memmem(start, (size_t)(blank - start), "\ncontent-length:", 16);
    if (len) {
      size_t n = strtoul((const char *)len + 16, NULL, 10);
      if ((size_t)(end - body) < n + 1) break;
      nul = body + n;
    } else if ((nul = memchr(body, 0, (size_t)(end - body))) == NULL) {
      break;
    }
    if (memcmp(start, "ERROR", 5) == 0) return -1;
    if (cmd == NULL)
      count += memcmp(start, "CONNECTED", 9) == 0 || memcmp(start, "RECEIPT", 7) == 0;
    else if ((size_t)(blank - start) >= cl && memcmp(start, cmd, cl) == 0 && (start[cl] == '\n' || start[cl] == '\r'))
      count++;
    at = (size_t)(nul + 1 - c->in);
  }
  consumed(c, at);
  return count;
}

static void stomp_send(st_t *s) {
  char f[200];
  int n = s->persistent
              ? snprintf(f, sizeof f,
                         "SEND\ndestination:/queue/bench\npersistent:true\nreceipt:%llu\ncontent-length:%zu\n\n",
                         (unsigned long long)s->sent, s->body)
              : snprintf(f, sizeof f, "SEND\ndestination:/queue/bench\ncontent-length:%zu\n\n", s->body);
  packet(&s->pub, (size_t)n + s->body + 1);
  put(&s->pub, f, (size_t)n);
  put(&s->pub, body_bytes(s->body), s->body);
  put(&s->pub, "", 1);
}

/* ---- brokers ------------------------------------------------------------------------------- */

static const char mqr_yaml[] = "security: {allow-anonymous: true}\nlisteners:\n"
                               "  - {name: bench, port: %d, protocols: [%s%s], anycast-prefix: /queue/%s}\n"
                               "address-settings:\n"
                               "  '#': {auto-create-addresses: true, auto-create-queues: true}\n"
                               "addresses:\n"
                               "  bench: {%s}\n"
                               "%s";

/* transport=ws: the HTTP upgrade, its 101 read (the broker's loop run meanwhile when it
 * is on this thread). */
static int ws_upgrade(st_t *s, conn_t *c) {
  char req[300];
  int n = snprintf(req, sizeof req,
                   "GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Protocol: %s\r\n\r\n",
                   s->stomp ? "v12.stomp" : "mqtt");
  if (write(c->fd, req, (size_t)n) != n) return -1;
  char got[1024];
  size_t len = 0;
  for (double end = bench_now() + 10; bench_now() < end && len < sizeof got - 1;) {
    if (s->impl == 2) uv_run(&s->loop, UV_RUN_NOWAIT);
    ssize_t k = read(c->fd, got + len, 1); /* (byte by byte: the frames behind it are the pumps') */
    if (k == 1) {
      len++;
      got[len] = 0;
      if (len >= 4 && memcmp(got + len - 4, "\r\n\r\n", 4) == 0) break;
    } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      return -1;
    } else if (s->impl != 2) {
      usleep(100);
    }
  }
  c->ws = true;
  return strncmp(got, "HTTP/1.1 101", 12) == 0 ? 0 : -1;
}

static int start_broker(mqr_bench_ctx_t *c, st_t *s) {
  s->port = bench_free_port();
  snprintf(s->dir, sizeof s->dir, "%s/heads-%d", MQR_BENCH_DATA, (int)getpid());
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", s->dir, s->dir);
  if (system(cmd) != 0) return mqr_bench_fail(c, "cannot make %s", s->dir);
  if (s->impl == 1 && !s->stomp) { /* mosquitto */
    snprintf(s->path, sizeof s->path, "%s/mosquitto.conf", s->dir);
    FILE *f = fopen(s->path, "w");
    if (f == NULL) return mqr_bench_fail(c, "%s", s->path);
    fprintf(f,
            "allow_anonymous true\nmax_inflight_messages 0\nmax_queued_messages 0\npersistence false\nlog_dest none\n");
    if (s->ws) /* (mosquitto 2.0 starts no websockets listener alone; libwebsockets binds
                * 127.0.0.1 only when named as ::ffff:127.0.0.1, else every address) */
      fprintf(f, "listener %d 127.0.0.1\nlistener %d ::ffff:127.0.0.1\nprotocol websockets\n", bench_free_port(),
              s->port);
    else
      fprintf(f, "listener %d 127.0.0.1\n", s->port);
    if (s->tls) fprintf(f, "certfile %s/cert.pem\nkeyfile %s/key.pem\n", bench_tls_dir, bench_tls_dir);
    fclose(f);
    char *argv[] = {"mosquitto", "-c", s->path, NULL};
    s->pid = bench_spawn("/usr/sbin/mosquitto", argv);
  } else if (s->impl == 1) { /* ActiveMQ Classic */
    snprintf(s->path, sizeof s->path, "%s/activemq.xml", s->dir);
    FILE *f = fopen(s->path, "w");
    if (f == NULL) return mqr_bench_fail(c, "%s", s->path);
    fprintf(
        f,
        "<beans xmlns=\"http://www.springframework.org/schema/beans\" "
        "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:schemaLocation=\""
        "http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd "
        "http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd\">\n"
        "<broker xmlns=\"http://activemq.apache.org/schema/core\" useJmx=\"false\" brokerName=\"bench\" "
        "persistent=\"true\" dataDirectory=\"%s/data\">\n"
        "<persistenceAdapter><kahaDB directory=\"%s/data/kahadb\"/></persistenceAdapter>\n"
        "<transportConnectors><transportConnector name=\"stomp\" uri=\"stomp+nio://127.0.0.1:%d\"/>"
        "</transportConnectors>\n</broker></beans>\n",
        s->dir, s->dir, s->port);
    fclose(f);
    char base[700], conf[700], data[700], xbean[800];
    snprintf(base, sizeof base, "-Dactivemq.base=%s", s->dir);
    snprintf(conf, sizeof conf, "-Dactivemq.conf=%s", s->dir);
    snprintf(data, sizeof data, "-Dactivemq.data=%s/data", s->dir);
    snprintf(xbean, sizeof xbean, "xbean:file:%s", s->path);
    char *argv[] = {"java", "-Xms1G", "-Xmx1G", "-Dactivemq.home=/usr/share/activemq",  base,
                    conf,   data,     "-jar",   "/usr/share/activemq/bin/activemq.jar", "start",
                    xbean,  NULL};
    s->pid = bench_spawn("/usr/bin/java", argv);
  } else { /* mqr: mqrd, or the broker on this thread's loop */
    char yaml[1000], persistence[700] = "", tls[200] = "";
    if (s->persistent) snprintf(persistence, sizeof persistence, "persistence: {directory: %s}\n", s->dir);
    if (s->tls) snprintf(tls, sizeof tls, ", tls: {cert: %s/cert.pem, key: %s/key.pem}", bench_tls_dir, bench_tls_dir);
    snprintf(yaml, sizeof yaml, mqr_yaml, s->port, s->stomp ? "stomp" : "mqtt", s->ws ? ", http" : "", tls,
             s->stomp ? "anycast: [bench]" : "multicast: []", persistence);
    if (s->impl == 0) {
      snprintf(s->path, sizeof s->path, "%s/mqrd.yaml", s->dir);
      FILE *f = fopen(s->path, "w");
      if (f == NULL) return mqr_bench_fail(c, "%s", s->path);
      fputs(yaml, f);
      fclose(f);
      char *argv[] = {"mqrd", "--config", s->path, NULL};
      s->pid = bench_spawn(MQR_BENCH_MQRD, argv);
    } else {
      uv_loop_init(&s->loop);
      mqr_error_t err;
      mqr_broker_register_protocols();
      if (mqr_config_load_string("heads.yaml", yaml, strlen(yaml), &s->cfg, NULL) != 0)
        return mqr_bench_fail(c, "config");
      mqr_broker_options_t opt = {.config = s->cfg, .listen = true};
      if (mqr_broker_create(&s->loop, &opt, &s->b, &err) != 0) return mqr_bench_fail(c, "%s", err.message);
      return 0;
    }
  }
  /* ActiveMQ takes seconds: up to 60 to listen. */
  for (int i = 0; i < (s->impl == 1 && s->stomp ? 6 : 1); i++)
    if (bench_listening(s->port)) return 0;
  return mqr_bench_fail(c, "the broker did not listen on %d", s->port);
}

/* Waits for n packets or frames of a kind on c (a handshake), at most 10 s. */
static int await(mqr_bench_ctx_t *c, st_t *s, conn_t *on, long n) {
  long got = 0;
  for (double end = bench_now() + 10; got < n && bench_now() < end;) {
    if (pump(s) != 0) return mqr_bench_fail(c, "connection lost in the handshake");
    long k = s->stomp ? stomp_read(on, NULL) : mqtt_read(on, 0);
    if (k < 0) return mqr_bench_fail(c, "refused in the handshake");
    got += k;
  }
  return got >= n ? 0 : mqr_bench_fail(c, "no answer in the handshake");
}

static int run(mqr_bench_ctx_t *c, uint64_t ops);
static int finish(mqr_bench_ctx_t *c);

/* Before the harness's own warmup: messages through for a while, untimed, so that a JVM
 * peer has compiled its paths (ActiveMQ: 5 s; the others 0.5 s). */
static int warm_up(mqr_bench_ctx_t *c, st_t *s) {
  for (double end = bench_now() + (s->impl == 1 && s->stomp ? 5.0 : 0.5); bench_now() < end;)
    if (run(c, 1000) != 0 || finish(c) != 0) return -1;
  return 0;
}

static int setup(mqr_bench_ctx_t *c) {
  st_t *s = calloc(1, sizeof *s);
  mqr_bench_set_state(c, s);
  signal(SIGPIPE, SIG_IGN);
  s->stomp = strcmp(mqr_bench_param(c, "proto"), "stomp") == 0;
  const char *impl = mqr_bench_param(c, "impl");
  s->impl = strcmp(impl, "mqr") == 0 ? 0 : strcmp(impl, "embedded") == 0 ? 2 : 1;
  s->qos = (int)mqr_bench_param_long(c, "qos");
  s->persistent = mqr_bench_param_long(c, "persistent") != 0;
  s->body = (size_t)mqr_bench_param_long(c, "size");
  if (s->body == 0) s->body = 16;
  s->window = WINDOW_BYTES / s->body < WINDOW ? WINDOW_BYTES / s->body : WINDOW;
  const char *transport = mqr_bench_param(c, "transport");
  s->tls = transport && strcmp(transport, "tls") == 0;
  s->ws = transport && strcmp(transport, "ws") == 0;
  s->pub.fd = s->sub.fd = -1;
  if (s->tls && !bench_make_cert()) return mqr_bench_fail(c, "the openssl tool could not make a certificate");
  if (start_broker(c, s) != 0) return -1;
  if (s->impl == 2) uv_run(&s->loop, UV_RUN_NOWAIT);
  if ((s->pub.fd = bench_dial(s->port)) < 0 || (s->sub.fd = bench_dial(s->port)) < 0)
    return mqr_bench_fail(c, "connect");
  if (s->ws && (ws_upgrade(s, &s->pub) != 0 || ws_upgrade(s, &s->sub) != 0))
    return mqr_bench_fail(c, "the WebSocket upgrade was refused");
  if (s->tls) { /* the handshakes are made by the first pumps */
    if ((s->tls_ctx = SSL_CTX_new(TLS_client_method())) == NULL) return mqr_bench_fail(c, "SSL_CTX_new");
    SSL_CTX_set_mode(s->tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(s->tls_ctx, 1); /* a read takes what there is, not a record's header, then its rest */
    conn_t *cs[2] = {&s->pub, &s->sub};
    for (int i = 0; i < 2; i++) {
      if ((cs[i]->ssl = SSL_new(s->tls_ctx)) == NULL) return mqr_bench_fail(c, "SSL_new");
      SSL_set_fd(cs[i]->ssl, cs[i]->fd);
      /* Records go out through a buffer, flushed once a pump: one write(2) for many, as
       * the brokers' own TLS writes, not one per 16 KiB record. */
      BIO *sock = SSL_get_wbio(cs[i]->ssl), *buf = BIO_new(BIO_f_buffer());
      if (buf == NULL || BIO_set_write_buffer_size(buf, 256 << 10) != 1) return mqr_bench_fail(c, "BIO_f_buffer");
      BIO_up_ref(sock); /* (the read side keeps its own reference) */
      SSL_set0_wbio(cs[i]->ssl, BIO_push(buf, sock));
      SSL_set_connect_state(cs[i]->ssl);
    }
  }
  if (s->stomp) {
    static const char hello[] = "CONNECT\naccept-version:1.2\nhost:localhost\n\n";
    packet(&s->pub, sizeof hello), put(&s->pub, hello, sizeof hello);
    packet(&s->sub, sizeof hello), put(&s->sub, hello, sizeof hello);
    char sub[200];
    int n = snprintf(sub, sizeof sub,
                     "SUBSCRIBE\ndestination:/queue/bench\nid:1\nack:auto\nactivemq.prefetchSize:%d\nreceipt:s\n\n",
                     (int)s->window);
    packet(&s->sub, (size_t)n + 1), put(&s->sub, sub, (size_t)n + 1);
  } else {
    mqtt_connect(&s->pub, "bench-pub");
    mqtt_connect(&s->sub, "bench-sub");
    uint8_t sub[] = {0x82, 10, 0, 1, 0, 5, 'b', 'e', 'n', 'c', 'h', (uint8_t)s->qos};
    packet(&s->sub, sizeof sub), put(&s->sub, sub, sizeof sub);
  }
  if (await(c, s, &s->pub, 1) != 0 || await(c, s, &s->sub, 2) != 0) return -1;
  return warm_up(c, s);
}

static void teardown(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  SSL_free(s->pub.ssl), SSL_free(s->sub.ssl), SSL_CTX_free(s->tls_ctx);
  if (s->pub.fd >= 0) close(s->pub.fd);
  if (s->sub.fd >= 0) close(s->sub.fd);
  if (s->impl == 2 && s->b) {
    mqr_broker_close(s->b, NULL, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    mqr_config_destroy(s->cfg);
  } else {
    bench_stop(s->pid);
  }
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0) fprintf(stderr, "heads: %s left\n", s->dir);
  free(s->pub.in), free(s->pub.out), free(s->sub.in), free(s->sub.out);
  free(s);
}

/* Reads what came: messages received (their acks queued), answers to the publisher. */
static int take(mqr_bench_ctx_t *c, st_t *s) {
  if (pump(s) != 0) return mqr_bench_fail(c, "connection lost");
  long got = s->stomp ? stomp_read(&s->sub, "MESSAGE") : mqtt_read(&s->sub, 3);
  long answers = s->stomp ? stomp_read(&s->pub, "RECEIPT") : mqtt_read(&s->pub, 4);
  if (got < 0 || answers < 0) return mqr_bench_fail(c, "the broker refused (an ERROR or a DISCONNECT)");
  s->received += (uint64_t)got;
  s->answered += (uint64_t)answers;
  double now = bench_now();
  if (got || answers || s->progress == 0) s->progress = now;
  if (now - s->progress > 10) /* (a QoS 0 peer may drop what a slow subscriber has not taken) */
    return mqr_bench_fail(c, "nothing came for 10 s, %llu of %llu messages received: the broker dropped them",
                          (unsigned long long)s->received, (unsigned long long)s->sent);
  return 0;
}

__attribute__((noinline)) static int run(mqr_bench_ctx_t *c, uint64_t ops) {
  st_t *s = mqr_bench_state(c);
  uint64_t end = s->sent + ops;
  while (s->sent < end) {
    /* Fill the window (with receipts: also within WINDOW unanswered), then read. */
    while (s->sent < end && s->sent - s->received < s->window &&
           (!s->persistent || s->sent - s->answered < s->window)) {
      if (s->stomp)
        stomp_send(s);
      else
        mqtt_publish(s);
      s->sent++;
    }
    if (take(c, s) != 0) return -1;
  }
  return 0;
}

static int finish(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  double start = bench_now();
  uint64_t from = s->received;
  while (s->received < s->sent || (s->persistent && s->answered < s->sent)) {
    if (take(c, s) != 0) return -1;
    double took = bench_now() - start;
    if (took > 30) /* (mosquitto's websockets listener past 8 KiB: a few messages a second) */
      return mqr_bench_fail(c, "the last %llu messages in flight came at %.0f/s: more than 30 s",
                            (unsigned long long)(s->sent - from), (double)(s->received - from) / took);
  }
  return 0;
}

/* The broker's peak RSS so far (VmHWM of its process; this one's when embedded), MiB. */
static void peak_rss(mqr_bench_ctx_t *c) {
  st_t *s = mqr_bench_state(c);
  char path[64], line[256];
  snprintf(path, sizeof path, s->impl == 2 ? "/proc/self/status" : "/proc/%d/status", (int)s->pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) mqr_bench_aux(c, "peak_rss_mb", strtod(line + 6, NULL) / 1024.0, "MiB");
  fclose(f);
}

/* (-p impl=mqr,mosquitto over both heads: each head's own peer only) */
static const char *skip(const mqr_bench_ctx_t *c) {
  const char *impl = mqr_bench_param(c, "impl"), *transport = mqr_bench_param(c, "transport");
  bool stomp = strcmp(mqr_bench_param(c, "proto"), "stomp") == 0;
  if (impl && strcmp(impl, "mqr") != 0 && strcmp(impl, "embedded") != 0 &&
      strcmp(impl, stomp ? "activemq" : "mosquitto") != 0)
    return stomp ? "the STOMP peer is activemq" : "the MQTT peer is mosquitto";
  if (stomp && impl && transport && strcmp(impl, "activemq") == 0 && strcmp(transport, "ws") == 0)
    return "Debian's ActiveMQ Classic has no activemq-http, its WebSocket transport";
  return NULL;
}

static const mqr_bench_def_t mqtt = {
    "heads.mqtt", "proto=mqtt;qos=0,1;size=16,1024,65536;impl=mqr,mosquitto,embedded;transport=tcp,tls,ws",
    "thrpt",      setup,
    teardown,     NULL,
    peak_rss,     run,
    finish};
MQR_BENCH_REGISTER(mqtt)

static const mqr_bench_def_t stomp = {
    "heads.stomp", "proto=stomp;persistent=0,1;size=16,1024,65536;impl=mqr,activemq,embedded;transport=tcp,ws",
    "thrpt",       setup,
    teardown,      NULL,
    peak_rss,      run,
    finish};
MQR_BENCH_REGISTER(stomp)
__attribute__((constructor)) static void skips(void) {
  mqr_bench_register_skip(&mqtt, skip);
  mqr_bench_register_skip(&stomp, skip);
}
