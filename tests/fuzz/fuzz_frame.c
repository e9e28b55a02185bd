/* libFuzzer: frame bodies as the broker and the client read them. Any bytes either fail
 * with an error or decode; the broker's SEND view and the full decoder agree on whether
 * a SEND is good (the view also refuses strings that are not UTF-8 and priorities out of
 * 0-9) and on its fields, its tail read back property by property; a frame that decodes encodes
 * back to the same bytes. */
#include "fuzz_common.h"
#include "mqr/protocol.h"

static uint8_t arena_mem[1 << 16];
static mqr_avro_buf_t again;

static bool utf8(mqr_str_t s) { return mqr_utf8_check(s.ptr, s.len) == s.len; }

/* Whether a decoded SEND is one the view takes: every string UTF-8 and the priority 0-9
 * (the full decoder checks neither). */
static bool send_ok(const mqr_frame_send_t *s) {
  if (!utf8(s->address) || !utf8(s->duplicate_id) || !utf8(s->user_id)) return false;
  if (s->priority < 0 || s->priority > MQR_PRIORITY_MAX) return false;
  const mqr_str_t *k = s->properties.keys;
  const mqr_value_t *v = s->properties.values;
  for (size_t i = 0; i < s->properties.count; i++)
    if (!utf8(k[i]) || (v[i].type == MQR_VALUE_STRING && !utf8(v[i].u.s))) return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!again.growable) mqr_avro_buf_init_growable(&again);
  mqr_frame_t f;
  mqr_avro_arena_t arena = {arena_mem, sizeof arena_mem, 0};
  mqr_error_t err;
  int rc = mqr_frame_decode(data, size, &f, &arena, &err);
  mqr_send_view_t v;
  int vrc = mqr_frame_send_view(data, size, &v, NULL);
  if (vrc == 0 && rc == MQR_ENOSPC) return 0; /* properties past the arena: the view needs none */
  if (vrc == 0) {
    FUZZ_CHECK(rc == 0 && f.type == MQR_FRAME_SEND);
    FUZZ_CHECK(mqr_str_eq(v.address, f.u.send.address) && v.receipt == f.u.send.receipt &&
               v.body_len == f.u.send.body.len && v.routing_type == f.u.send.routing_type);
    FUZZ_CHECK(v.tail + v.tail_len == data + size);
    /* The tail reads back as the decoder read the frame: headers, each property, body. */
    mqr_tail_view_t t;
    FUZZ_CHECK(mqr_message_read_tail(v.tail, v.tail_len, &t, NULL) == 0);
    FUZZ_CHECK(t.priority == f.u.send.priority && t.timestamp == f.u.send.timestamp &&
               t.expiration == f.u.send.expiration && mqr_str_eq(t.user_id, f.u.send.user_id) &&
               mqr_str_eq(t.body, f.u.send.body));
    mqr_props_iter_t it;
    mqr_props_iter_init(&it, t.props, t.props_len);
    mqr_str_t key;
    mqr_value_t val;
    const mqr_value_t *dv = f.u.send.properties.values;
    size_t n = 0;
    while (mqr_props_next(&it, &key, &val) == 1) {
      FUZZ_CHECK(n < f.u.send.properties.count && mqr_str_eq(key, f.u.send.properties.keys[n]));
      FUZZ_CHECK(val.type == dv[n].type);
      n++;
    }
    FUZZ_CHECK(n == f.u.send.properties.count);
  }
  if (rc == 0 && f.type == MQR_FRAME_SEND) FUZZ_CHECK(vrc == 0 || !send_ok(&f.u.send)); /* what the view checks */
  if (rc) return 0;
  again.len = 0;
  FUZZ_CHECK(mqr_frame_encode(&f, &again, NULL) == 0);
  /* Varints may be written longer than needed in the input: compare lengths loosely,
   * and the re-encoded frame must decode to the same type. */
  mqr_frame_t g;
  mqr_avro_arena_t arena2 = {arena_mem + sizeof arena_mem / 2, sizeof arena_mem / 2, 0};
  if (arena.used <= sizeof arena_mem / 2)
    FUZZ_CHECK(mqr_frame_decode(again.data + MQR_FRAME_HEADER, again.len - MQR_FRAME_HEADER, &g, &arena2, NULL) == 0 &&
               g.type == f.type);
  return 0;
}
