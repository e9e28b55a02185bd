/* STOMP frames (STOMP 1.0, 1.1 and 1.2): reading a client's frames from a connection's
 * bytes, in place, and writing the broker's. Private to the STOMP head (heads/stomp/).
 *
 * A frame is a command line, header lines, an empty line, a body and a NUL octet:
 *
 *   SEND\n destination:/queue/a\n content-length:5\n \n hello\0
 *
 * Lines end in LF or CR LF (1.2's EOL, taken in every version). Between frames any number
 * of EOLs may come (heart-beats). The body runs to content-length octets (then a NUL must
 * follow) or, without content-length, to the first NUL. In 1.1 and 1.2, header names and
 * values are escaped (\n, \c for ':', \\, and in 1.2 \r) except in CONNECT, STOMP and
 * CONNECTED frames; any other backslash sequence is a protocol error. Of a header given
 * more than once, the first counts (the later ones are kept in the array, after it).
 * Headers must be UTF-8 and hold no NUL. */
#ifndef MQR_BROKER_STOMP_FRAME_H
#define MQR_BROKER_STOMP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mqr/common.h"

typedef enum { MQR__STOMP_10, MQR__STOMP_11, MQR__STOMP_12 } mqr__stomp_version_t;

typedef enum {
  MQR__STOMP_CONNECT,
  MQR__STOMP_STOMP,
  MQR__STOMP_SEND,
  MQR__STOMP_SUBSCRIBE,
  MQR__STOMP_UNSUBSCRIBE,
  MQR__STOMP_ACK,
  MQR__STOMP_NACK,
  MQR__STOMP_BEGIN,
  MQR__STOMP_COMMIT,
  MQR__STOMP_ABORT,
  MQR__STOMP_DISCONNECT,
  /* the broker's */
  MQR__STOMP_CONNECTED,
  MQR__STOMP_MESSAGE,
  MQR__STOMP_RECEIPT,
  MQR__STOMP_ERROR,
  MQR__STOMP_COMMANDS
} mqr__stomp_command_t;

/* The command's name ("SEND"). */
const char *mqr__stomp_command_name(mqr__stomp_command_t c);

typedef struct {
  mqr_str_t name, value;
} mqr__stomp_header_t;

/* What a frame may hold; a frame past one is refused (MQR_ELIMIT). */
typedef struct {
  uint32_t max_frame;        /* bytes from the command's first octet to the NUL */
  uint32_t max_headers;      /* header lines */
  uint32_t max_header_bytes; /* one header line, as sent (escaped) */
} mqr__stomp_limits_t;

/* How far the parser has read a frame still arriving, so that each call looks only at
 * the bytes that came since: offsets from the frame's first byte, which hold while the
 * caller's buffer moves (the frame's bytes kept, those before it dropped). */
typedef struct {
  uint8_t stage;      /* 0: not begun; 1: header lines; 2: the body */
  int8_t command;     /* from stage 1 */
  uint32_t n_headers; /* header lines checked */
  size_t first;       /* the first header line */
  size_t at;          /* stage 1: the next line; stage 2: where the search for the NUL goes on */
  size_t body;        /* stage 2: the body's first byte */
  int64_t length;     /* content-length, or -1 */
} mqr__stomp_progress_t;

typedef struct {
  mqr__stomp_command_t command;
  mqr__stomp_header_t *headers; /* the caller's array of limits->max_headers */
  uint32_t n_headers;
  mqr_str_t body;
  size_t heartbeats;              /* EOLs before the command */
  mqr__stomp_progress_t progress; /* zero for a connection's first frame; kept by the parser */
} mqr__stomp_frame_t;

/* Reads the frame at buf[0..n), after any EOLs, into *f: views into buf, whose header
 * bytes are unescaped in place (only once the whole frame is there: bytes of a frame
 * not yet complete are left as they are). *used gets the bytes the frame took, EOLs
 * before it included.
 *
 * A frame not yet whole is read in steps: f->progress keeps how far (the caller keeps f
 * for the connection, zeroed at first), and the next call, with the bytes from *used on
 * and more, looks only at what is new, so that a frame trickling in costs its length
 * once. The parser zeroes progress when it answers a frame or an error.
 *
 * version is what the connection speaks (before CONNECT: any; CONNECT frames are never
 * escaped). Returns 0; MQR_ETRUNCATED when buf holds less than a frame (*used: the EOLs
 * that can be dropped, which are heart-beats, and f->heartbeats their count); or, with
 * err saying what and where, MQR_EPROTOCOL (not a STOMP frame: an unknown command, a
 * header line without ':', an undefined escape, a header that is not UTF-8, no NUL after
 * content-length octets, a bad content-length) or MQR_ELIMIT (a limit passed, checked
 * on incomplete frames too, so that a client cannot make the broker hold more). */
int mqr__stomp_parse(uint8_t *buf, size_t n, mqr__stomp_version_t version, const mqr__stomp_limits_t *limits,
                     mqr__stomp_frame_t *f, size_t *used, mqr_error_t *err);

/* The first header named name, or NULL. */
const mqr_str_t *mqr__stomp_header(const mqr__stomp_frame_t *f, const char *name);

/* Writes the head of a frame the broker sends: the command, n headers (escaped as the
 * version and command want; a content-length of body_len octets added when with_length),
 * and the blank line, into out[0..cap). Its length; when cap is too small, nothing
 * written and the length it needs. The caller writes the body and the NUL after it. */
size_t mqr__stomp_put_head(uint8_t *out, size_t cap, mqr__stomp_version_t version, mqr__stomp_command_t c,
                           const mqr__stomp_header_t *h, uint32_t n, bool with_length, size_t body_len);

/* Header bytes written for the version and command (escaped where it escapes): the
 * length of s, then s put at p (returns the end). */
size_t mqr__stomp_escaped_len(mqr_str_t s, mqr__stomp_version_t version, mqr__stomp_command_t c);
uint8_t *mqr__stomp_put_escaped(uint8_t *p, mqr_str_t s, mqr__stomp_version_t version, mqr__stomp_command_t c);

#endif
