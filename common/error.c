/* Error codes and error details: the one X-macro table in common.h expanded. */
#include <stdarg.h>
#include <stdio.h>

#include "mqr/common.h"

const char *mqr_strerror(int err) {
  if (err == 0) return "success";
  switch (err) {
#define MQR__ERR_TEXT(name, value, text)                                                                               \
  case value: return text;
    MQR_ERRNO_MAP(MQR__ERR_TEXT)
#undef MQR__ERR_TEXT
  default: return "unknown error";
  }
}

const char *mqr_err_name(int err) {
  if (err == 0) return "OK";
  switch (err) {
#define MQR__ERR_NAME(name, value, text)                                                                               \
  case value: return #name;
    MQR_ERRNO_MAP(MQR__ERR_NAME)
#undef MQR__ERR_NAME
  default: return "UNKNOWN";
  }
}

void mqr_error_clear(mqr_error_t *e) {
  if (e == NULL) return;
  e->code = 0;
  e->line = 0;
  e->column = 0;
  e->file[0] = '\0';
  e->message[0] = '\0';
}

static int error_vset(mqr_error_t *e, int code, const char *file, uint32_t line, uint32_t column, const char *fmt,
                      va_list ap) {
  if (e == NULL) return code;
  e->code = code;
  e->line = line;
  e->column = column;
  snprintf(e->file, sizeof e->file, "%s", file ? file : "");
  int n = vsnprintf(e->message, sizeof e->message, fmt, ap);
  if (n >= (int)sizeof e->message) { /* too long: cut at a word's end, and say so */
    size_t end = sizeof e->message - 5;
    size_t at = end;
    while (at > end - 80 && e->message[at] != ' ' && e->message[at] != ',') at--;
    if (e->message[at] != ' ' && e->message[at] != ',') at = end;
    memcpy(e->message + at, " ...", 5);
  }
  return code;
}

int mqr_error_vset_at(mqr_error_t *e, int code, const char *file, uint32_t line, uint32_t column, const char *fmt,
                      va_list ap) {
  return error_vset(e, code, file, line, column, fmt, ap);
}

int mqr_error_set(mqr_error_t *e, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_vset(e, code, NULL, 0, 0, fmt, ap);
  va_end(ap);
  return code;
}

int mqr_error_set_at(mqr_error_t *e, int code, const char *file, uint32_t line, uint32_t column, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_vset(e, code, file, line, column, fmt, ap);
  va_end(ap);
  return code;
}

const char *mqr_error_format(const mqr_error_t *e, char *buf, size_t cap) {
  if (cap == 0) return buf;
  buf[0] = '\0';
  if (e == NULL) return buf;
  const char *msg = e->message[0] ? e->message : mqr_strerror(e->code);
  if (e->file[0] && e->line)
    snprintf(buf, cap, "%s:%u:%u: %s", e->file, e->line, e->column, msg);
  else if (e->file[0])
    snprintf(buf, cap, "%s: %s", e->file, msg);
  else if (e->line)
    snprintf(buf, cap, "%u:%u: %s", e->line, e->column, msg);
  else
    snprintf(buf, cap, "%s", msg);
  return buf;
}
