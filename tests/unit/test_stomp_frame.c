/* STOMP frames (heads/stomp/frame.h) as the STOMP 1.0, 1.1 and 1.2 specifications
 * frame them: commands, header lines, EOLs, bodies by NUL or content-length, escaping by
 * version and command, repeated headers, heart-beats, limits; every split of a stream
 * waits for more without changing a byte. */
#include "testutil.h"

#include "../../heads/stomp/frame.h"

static const mqr__stomp_limits_t lim = {4096, 16, 256};
static mqr__stomp_header_t hdrs[16];

/* Parses text (len bytes) as version v into *f; the return code. buf is a copy. */
static uint8_t buf[8192];
static int parse(const char *text, size_t len, mqr__stomp_version_t v, mqr__stomp_frame_t *f, size_t *used,
                 mqr_error_t *err) {
  memcpy(buf, text, len);
  f->headers = hdrs;
  f->progress = (mqr__stomp_progress_t){0}; /* each a connection's first frame */
  return mqr__stomp_parse(buf, len, v, &lim, f, used, err);
}

static bool eq(mqr_str_t s, const char *want, size_t n) { return s.len == n && memcmp(s.ptr, want, n) == 0; }
#define EQ(s, lit) eq((s), (lit), sizeof(lit) - 1)

static void test_send_and_heartbeats(void **state) {
  (void)state;
  static const char t[] = "\n\r\n\nSEND\ndestination:/queue/a\nreceipt:7\n\nhello\0\n";
  mqr__stomp_frame_t f;
  size_t used;
  assert_int_equal(parse(t, sizeof t - 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_int_equal(f.command, MQR__STOMP_SEND);
  assert_int_equal(f.heartbeats, 3);
  assert_int_equal(f.n_headers, 2);
  assert_true(EQ(f.headers[0].name, "destination") && EQ(f.headers[0].value, "/queue/a"));
  assert_true(EQ(*mqr__stomp_header(&f, "receipt"), "7"));
  assert_null(mqr__stomp_header(&f, "content-length"));
  assert_true(EQ(f.body, "hello"));
  assert_int_equal(used, sizeof t - 2); /* the EOL after the NUL is the next one's heart-beat */
  /* only EOLs: heart-beats to drop, and nothing more */
  assert_int_equal(parse("\n\r\n\n", 4, MQR__STOMP_12, &f, &used, NULL), MQR_ETRUNCATED);
  assert_int_equal(used, 4);
  assert_int_equal(f.heartbeats, 3);
}

static void test_crlf_and_content_length(void **state) {
  (void)state;
  static const char t[] = "MESSAGE\r\ncontent-length:5\r\nk:v\r\n\r\na\0b\0c\0";
  mqr__stomp_frame_t f;
  size_t used;
  assert_int_equal(parse(t, sizeof t - 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_int_equal(f.command, MQR__STOMP_MESSAGE);
  assert_true(EQ(f.headers[1].value, "v")); /* CR LF ends the line */
  assert_true(eq(f.body, "a\0b\0c", 5));    /* NULs in the counted body */
  assert_int_equal(used, sizeof t - 1);
  /* no NUL where content-length ends the body */
  static const char bad[] = "SEND\ncontent-length:2\n\nabc\0";
  mqr_error_t err;
  assert_int_equal(parse(bad, sizeof bad - 1, MQR__STOMP_12, &f, &used, &err), MQR_EPROTOCOL);
  assert_non_null(strstr(err.message, "no NUL"));
  static const char *const numbers[] = {"SEND\ncontent-length:1x\n\nab\0", "SEND\ncontent-length:\n\na\0",
                                        "SEND\ncontent-length:-1\n\na\0", "SEND\ncontent-length:12345678901\n\na\0"};
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(parse(numbers[i], strlen(numbers[i]) + 1, MQR__STOMP_12, &f, &used, &err), MQR_EPROTOCOL);
}

static void test_escaping_by_version(void **state) {
  (void)state;
  static const char t[] = "SEND\na\\cb:c\\nd\\\\e\\rf\n\n\0";
  mqr__stomp_frame_t f;
  size_t used;
  mqr_error_t err;
  assert_int_equal(parse(t, sizeof t - 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_true(EQ(f.headers[0].name, "a:b"));
  assert_true(EQ(f.headers[0].value, "c\nd\\e\rf"));
  /* 1.1 has no \r */
  assert_int_equal(parse(t, sizeof t - 1, MQR__STOMP_11, &f, &used, &err), MQR_EPROTOCOL);
  assert_non_null(strstr(err.message, "undefined escape"));
  /* 1.0 has no escapes: the first ':' splits, the rest is as sent */
  assert_int_equal(parse(t, sizeof t - 1, MQR__STOMP_10, &f, &used, NULL), 0);
  assert_true(EQ(f.headers[0].name, "a\\cb"));
  assert_true(EQ(f.headers[0].value, "c\\nd\\\\e\\rf"));
  /* CONNECT is never escaped, whatever the version */
  static const char c[] = "CONNECT\naccept-version:1.2\npasscode:a\\b:c\n\n\0";
  assert_int_equal(parse(c, sizeof c - 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_true(EQ(f.headers[1].value, "a\\b:c"));
  /* undefined escapes, and a backslash at the end */
  static const char *const bad[] = {"SEND\nk:a\\tb\n\n\0", "SEND\nk:ab\\\n\n\0", "SEND\nk\\x:v\n\n\0"};
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(parse(bad[i], strlen(bad[i]) + 1, MQR__STOMP_12, &f, &used, NULL), MQR_EPROTOCOL);
  /* written escaped and read back: the same bytes */
  static const char odd[] = "x:y\\z\nw\rv";
  mqr_str_t s = {odd, sizeof odd - 1};
  uint8_t out[64], frame[128];
  size_t n = mqr__stomp_escaped_len(s, MQR__STOMP_12, MQR__STOMP_MESSAGE);
  assert_int_equal(mqr__stomp_put_escaped(out, s, MQR__STOMP_12, MQR__STOMP_MESSAGE) - out, n);
  assert_int_equal(n, s.len + 4); /* one more byte for each of : \\ LF CR */
  int fl = snprintf((char *)frame, sizeof frame, "MESSAGE\nk:%.*s\n\n", (int)n, (char *)out);
  frame[fl] = 0;
  assert_int_equal(parse((char *)frame, (size_t)fl + 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_true(eq(f.headers[0].value, odd, sizeof odd - 1));
  /* CONNECTED, and 1.0, are written as they are */
  assert_int_equal(mqr__stomp_escaped_len(s, MQR__STOMP_12, MQR__STOMP_CONNECTED), s.len);
  assert_int_equal(mqr__stomp_escaped_len(s, MQR__STOMP_10, MQR__STOMP_MESSAGE), s.len);
}

static void test_bad_frames(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int rc;
    const char *says;
  } cases[] = {
      {"send\n\n\0", MQR_EPROTOCOL, "unknown STOMP command 'send'"},
      {"SENDX\n\n\0", MQR_EPROTOCOL, "unknown STOMP command"},
      {"GET / HTTP/1.1\r\n", MQR_EPROTOCOL, "unknown STOMP command 'GET / HTTP/1.1'"},
      {"GET / HTTP/1.1", MQR_EPROTOCOL, "not a STOMP command"},
      {"SEND\nnocolon\n\n\0", MQR_EPROTOCOL, "has no ':'"},
      {"SEND\n:value\n\n\0", MQR_EPROTOCOL, "has no name"},
      {"SEND\nk:\xc3\x28\n\n\0", MQR_EPROTOCOL, "not UTF-8"},
  };
  mqr__stomp_frame_t f;
  size_t used;
  mqr_error_t err;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len = strlen(cases[i].text) + (cases[i].text[0] != 'G'); /* the NUL, but for the HTTP lines */
    assert_int_equal(parse(cases[i].text, len, MQR__STOMP_12, &f, &used, &err), cases[i].rc);
    if (strstr(err.message, cases[i].says) == NULL) fail_msg("'%s': %s", cases[i].text, err.message);
  }
  /* repeated headers: the first counts */
  static const char rep[] = "SEND\nk:first\nk:second\n\n\0";
  assert_int_equal(parse(rep, sizeof rep - 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_true(EQ(*mqr__stomp_header(&f, "k"), "first"));
  assert_int_equal(f.n_headers, 2);
  /* a value may hold ':' (the first one splits), and be empty */
  static const char colon[] = "SEND\nk:a:b\ne:\n\n\0";
  assert_int_equal(parse(colon, sizeof colon - 1, MQR__STOMP_12, &f, &used, NULL), 0);
  assert_true(EQ(f.headers[0].value, "a:b") && EQ(f.headers[1].value, ""));
}

static void test_limits(void **state) {
  (void)state;
  mqr__stomp_frame_t f;
  size_t used;
  mqr_error_t err;
  char t[6000];
  /* 17 headers */
  int n = snprintf(t, sizeof t, "SEND\n");
  for (int i = 0; i < 17; i++) n += snprintf(t + n, sizeof t - (size_t)n, "h%d:v\n", i);
  n += snprintf(t + n, sizeof t - (size_t)n, "\n");
  assert_int_equal(parse(t, (size_t)n + 1, MQR__STOMP_12, &f, &used, &err), MQR_ELIMIT);
  assert_non_null(strstr(err.message, "more than 16 headers"));
  /* a header line past 256 bytes, refused before its end comes */
  n = snprintf(t, sizeof t, "SEND\nk:");
  memset(t + n, 'a', 300);
  assert_int_equal(parse(t, (size_t)n + 300, MQR__STOMP_12, &f, &used, &err), MQR_ELIMIT);
  assert_non_null(strstr(err.message, "header line"));
  /* a body past the frame's limit, with no NUL yet */
  n = snprintf(t, sizeof t, "SEND\n\n");
  memset(t + n, 'b', 4200);
  assert_int_equal(parse(t, (size_t)n + 4200, MQR__STOMP_12, &f, &used, &err), MQR_ELIMIT);
  /* a content-length past it, refused at once */
  static const char big[] = "SEND\ncontent-length:5000\n\nab";
  assert_int_equal(parse(big, sizeof big - 1, MQR__STOMP_12, &f, &used, &err), MQR_ELIMIT);
  /* just inside: content-length of the rest */
  n = snprintf(t, sizeof t, "SEND\ncontent-length:4069\n\n");
  memset(t + n, 'c', 4069);
  t[n + 4069] = 0;
  assert_int_equal(n + 4069 + 1, 4096);
  assert_int_equal(parse(t, (size_t)n + 4070, MQR__STOMP_12, &f, &used, &err), 0);
  assert_int_equal(f.body.len, 4069);
  t[n + 4069] = 'c'; /* one octet more: past it */
  t[n + 4070] = 0;
  memcpy(t + 5, "content-length:4070", 19);
  assert_int_equal(parse(t, (size_t)n + 4071, MQR__STOMP_12, &f, &used, &err), MQR_ELIMIT);
}

/* A stream of frames, cut at every point: the prefix waits (ETRUNCATED) and is left as it
 * was; the frames read whole are the same as read at once. */
static void test_every_split(void **state) {
  (void)state;
  static const char stream[] = "\nCONNECT\naccept-version:1.2\nhost:h\n\n\0\r\n"
                               "SEND\ndestination:a\\cb\ncontent-length:3\n\nx\0y\0"
                               "SUBSCRIBE\nid:1\ndestination:q\nack:client\n\n\0"
                               "SEND\r\nk:v\\\\w\r\n\r\nbody\0\n\n";
  size_t total = sizeof stream - 1;
  uint8_t copy[256];
  mqr__stomp_frame_t f = {.headers = hdrs};
  int frames = 0;
  for (size_t cut = 0; cut <= total; cut++) {
    size_t at = 0;
    frames = 0;
    f.progress = (mqr__stomp_progress_t){0}; /* a new connection */
    memcpy(copy, stream, total);
    /* what is there */
    for (;;) {
      size_t used;
      int rc = mqr__stomp_parse(copy + at, cut - at, MQR__STOMP_12, &lim, &f, &used, NULL);
      if (rc == MQR_ETRUNCATED) {
        at += used;
        assert_memory_equal(copy + at, stream + at, cut - at); /* nothing of it changed */
        break;
      }
      assert_int_equal(rc, 0);
      switch (frames++) {
      case 0: assert_int_equal(f.command, MQR__STOMP_CONNECT); break;
      case 1:
        assert_true(EQ(*mqr__stomp_header(&f, "destination"), "a:b"));
        assert_true(eq(f.body, "x\0y", 3));
        break;
      case 2: assert_true(EQ(*mqr__stomp_header(&f, "ack"), "client")); break;
      default: assert_true(EQ(f.headers[0].value, "v\\w") && EQ(f.body, "body"));
      }
      at += used;
    }
  }
  assert_int_equal(frames, 4);
}

/* The same stream arriving a byte at a time, into a buffer that moves between calls (the
 * frame's bytes kept, those before it dropped): the progress kept across calls reads the
 * same frames, each call looking at the new bytes only. */
static void test_trickle(void **state) {
  (void)state;
  static const char stream[] = "\nCONNECT\naccept-version:1.2\nhost:h\n\n\0\r\n"
                               "SEND\ndestination:a\\cb\ncontent-length:3\n\nx\0y\0"
                               "SUBSCRIBE\nid:1\ndestination:q\nack:client\n\n\0"
                               "SEND\r\nk:v\\\\w\r\n\r\nbody\0\n\n";
  size_t total = sizeof stream - 1;
  static uint8_t mem[2][512];
  mqr__stomp_frame_t f = {.headers = hdrs};
  size_t held = 0; /* bytes of stream kept, from kept_at */
  size_t kept_at = 0;
  int frames = 0, side = 0;
  for (size_t came = 1; came <= total; came++) {
    held++;
    /* the buffer moves: the bytes kept go to the other buffer, at another offset */
    side ^= 1;
    size_t off = (came * 7) % 64;
    memcpy(mem[side] + off, stream + kept_at, held);
    for (;;) {
      size_t used;
      int rc = mqr__stomp_parse(mem[side] + off, held, MQR__STOMP_12, &lim, &f, &used, NULL);
      kept_at += used;
      held -= used;
      off += used;
      if (rc == MQR_ETRUNCATED) break;
      assert_int_equal(rc, 0);
      switch (frames++) {
      case 0: assert_int_equal(f.command, MQR__STOMP_CONNECT); break;
      case 1: assert_true(EQ(*mqr__stomp_header(&f, "destination"), "a:b") && eq(f.body, "x\0y", 3)); break;
      case 2: assert_true(EQ(*mqr__stomp_header(&f, "ack"), "client") && f.n_headers == 3); break;
      default: assert_true(EQ(f.headers[0].value, "v\\w") && EQ(f.body, "body"));
      }
    }
  }
  assert_int_equal(frames, 4);
  assert_int_equal(held, 0); /* the last EOLs were heart-beats, dropped */
  /* a body without content-length trickling in: the NUL is searched for in the new bytes
   * only (progress.at follows the bytes that came) */
  static uint8_t big[3000];
  memcpy(big, "SEND\n\n", 6);
  memset(big + 6, 'z', 2000);
  mqr__stomp_frame_t g = {.headers = hdrs};
  size_t used;
  for (size_t k = 7; k <= 2006; k += 100) {
    assert_int_equal(mqr__stomp_parse(big, k, MQR__STOMP_12, &lim, &g, &used, NULL), MQR_ETRUNCATED);
    assert_int_equal(g.progress.at, k);
  }
  big[2006] = 0;
  assert_int_equal(mqr__stomp_parse(big, 2007, MQR__STOMP_12, &lim, &g, &used, NULL), 0);
  assert_int_equal(g.body.len, 2000);
  assert_int_equal(g.progress.stage, 0); /* ready for the next frame */
}

/* The broker's frames: written, then read back as a client would, in each version. */
static void test_written(void **state) {
  (void)state;
  mqr__stomp_header_t h[] = {{mqr_str("destination"), mqr_str("/queue/a:b")},
                             {mqr_str("message-id"), mqr_str("42")},
                             {mqr_str("note"), mqr_str("line\nbreak\\")}};
  uint8_t out[512];
  for (int v = MQR__STOMP_11; v <= MQR__STOMP_12; v++) {
    size_t need = mqr__stomp_put_head(out, 8, (mqr__stomp_version_t)v, MQR__STOMP_MESSAGE, h, 3, true, 3);
    assert_true(need > 8);
    size_t n = mqr__stomp_put_head(out, sizeof out, (mqr__stomp_version_t)v, MQR__STOMP_MESSAGE, h, 3, true, 3);
    assert_int_equal(n, need);
    memcpy(out + n, "a\0b\0", 4); /* a body with a NUL, then the frame's NUL */
    mqr__stomp_frame_t f = {.headers = hdrs};
    size_t used;
    assert_int_equal(mqr__stomp_parse(out, n + 4, (mqr__stomp_version_t)v, &lim, &f, &used, NULL), 0);
    assert_int_equal(used, n + 4);
    assert_int_equal(f.command, MQR__STOMP_MESSAGE);
    assert_true(EQ(*mqr__stomp_header(&f, "content-length"), "3"));
    assert_true(EQ(*mqr__stomp_header(&f, "destination"), "/queue/a:b"));
    assert_true(EQ(*mqr__stomp_header(&f, "note"), "line\nbreak\\"));
    assert_true(eq(f.body, "a\0b", 3));
  }
  /* CONNECTED is not escaped; without a length the body runs to the NUL */
  mqr__stomp_header_t c[] = {{mqr_str("version"), mqr_str("1.2")}, {mqr_str("heart-beat"), mqr_str("0,10000")}};
  size_t n = mqr__stomp_put_head(out, sizeof out, MQR__STOMP_12, MQR__STOMP_CONNECTED, c, 2, false, 0);
  static const char want[] = "CONNECTED\nversion:1.2\nheart-beat:0,10000\n\n";
  assert_int_equal(n, sizeof want - 1);
  assert_memory_equal(out, want, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_send_and_heartbeats),
      cmocka_unit_test(test_crlf_and_content_length),
      cmocka_unit_test(test_escaping_by_version),
      cmocka_unit_test(test_bad_frames),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_every_split),
      cmocka_unit_test(test_trickle),
      cmocka_unit_test(test_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
