/* The native protocol's frames written: answers a client waits for, and errors. */
#include <stdarg.h>
#include <stdio.h>

#include "native.h"

/* Appends a frame to this pass's write: MQR_ENOMEM, or MQR_ELIMIT when it is longer than
 * the max_frame the client declared (then nothing was added). */
int mqr__nat_write_frame(mqr__conn_t *c, const mqr_frame_t *f) {
  mqr__wreq_t *w = mqr__conn_out(c);
  if (w == NULL) return MQR_ENOMEM;
  mqr_avro_buf_t buf = {w->bytes, w->n_bytes, w->cap_bytes, true};
  size_t off = buf.len;
  int rc = mqr_frame_encode(f, &buf, NULL);
  w->bytes = buf.data;
  w->cap_bytes = buf.cap;
  if (rc) return rc;
  if (buf.len - off - MQR_FRAME_HEADER > mqr__nat(c)->peer_max_frame) return MQR_ELIMIT;
  if ((rc = mqr__wreq_add_own(w, off, buf.len - off)) != 0) return rc;
  w->n_bytes = buf.len;
  return 0;
}

/* An answer the client waits for (CONNECTED, RECEIPT, SUBSCRIBED, an ERROR...): if it
 * cannot be written, the client must not wait forever for it, so the connection closes
 * (its consumers' deliveries go back to their queues). */
void mqr__nat_reply_failed(mqr__conn_t *c, int type, int rc) {
  mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): a %s frame could not be written (%s); closing it",
           (long long)c->sess.id, c->peer, mqr_frame_type_name(type), mqr_strerror(rc));
  mqr__conn_close(c, false);
}

void mqr__nat_reply(mqr__conn_t *c, const mqr_frame_t *f) {
  int rc = mqr__nat_write_frame(c, f);
  if (rc) mqr__nat_reply_failed(c, f->type, rc);
}

__attribute__((format(printf, 5, 6))) void mqr__nat_send_error(mqr__conn_t *c, int code, int64_t receipt, bool fatal,
                                                               const char *fmt, ...) {
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  mqr_frame_t f = {MQR_FRAME_ERROR, {.error = {code, mqr_str(mqr_err_name(code)), mqr_str(text), receipt, fatal}}};
  mqr__nat_reply(c, &f);
  if (fatal) {
    mqr__log(c->b, MQR_LOG_WARN, "connection %lld (%s): %s: %s; closing it", (long long)c->sess.id, c->peer,
             mqr_err_name(code), text);
    mqr__conn_close(c, true);
  }
}
