/* The TCP transport: bytes read straight into the connection's buffer, written with one
 * uv_write of the request's buffers. */
#include "net.h"

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  *buf = mqr__conn_room(h->data); /* empty: UV_ENOBUFS, the read fails and the connection closes */
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  mqr__conn_received(s->data, nread);
}

static int read_start(mqr__conn_t *c) { return uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb); }

static void read_stop(mqr__conn_t *c) { uv_read_stop((uv_stream_t *)&c->tcp); }

static void write_cb(uv_write_t *req, int status) { mqr__conn_written(req->data, status); }

static int write(mqr__conn_t *c, mqr__wreq_t *w) {
  return uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, w->n_segs, write_cb);
}

const mqr__transport_t mqr__tcp_transport = {
    .name = "tcp", .read_start = read_start, .read_stop = read_stop, .write = write};
