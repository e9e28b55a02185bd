/* Routing-type names, and the set's text form. */
#include <stdio.h>
#include <strings.h>

#include "mqr/routing.h"

static const char *const names[MQR_ROUTING_TYPE_COUNT] = {"MULTICAST", "ANYCAST"};

const char *mqr_routing_type_name(int t) { return t >= 0 && t < MQR_ROUTING_TYPE_COUNT ? names[t] : NULL; }

/* Known names, or TYPEn for n in 0..7. */
static int parse_word(mqr_str_t w, int *out) {
  for (int t = 0; t < MQR_ROUTING_TYPE_COUNT; t++) {
    if (w.len == strlen(names[t]) && strncasecmp(w.ptr, names[t], w.len) == 0) {
      *out = t;
      return 0;
    }
  }
  if (w.len == 5 && strncasecmp(w.ptr, "TYPE", 4) == 0 && w.ptr[4] >= '0' && w.ptr[4] <= '7') {
    *out = w.ptr[4] - '0';
    return 0;
  }
  return MQR_EBADROUTINGTYPE;
}

int mqr_routing_type_parse(mqr_str_t text, mqr_routing_type_t *out) {
  int t;
  if (parse_word(text, &t) != 0 || t >= MQR_ROUTING_TYPE_COUNT) return MQR_EBADROUTINGTYPE;
  *out = (mqr_routing_type_t)t;
  return 0;
}

int mqr_routing_set_parse(mqr_str_t text, mqr_routing_set_t *out, mqr_error_t *err) {
  mqr_routing_set_t s = mqr_routing_set_empty();
  size_t i = 0;
  while (i < text.len) {
    size_t start = i;
    while (i < text.len && text.ptr[i] != ',') i++;
    size_t a = start, b = i;
    while (a < b && (text.ptr[a] == ' ' || text.ptr[a] == '\t')) a++;
    while (b > a && (text.ptr[b - 1] == ' ' || text.ptr[b - 1] == '\t')) b--;
    int t;
    if (parse_word(mqr_str_n(text.ptr + a, b - a), &t) != 0) {
      if (b == a)
        return mqr_error_set_at(err, MQR_EBADROUTINGTYPE, NULL, 0, (uint32_t)a + 1,
                                "empty routing type in '%.*s' (expected ANYCAST or MULTICAST)", (int)text.len,
                                text.ptr);
      return mqr_error_set_at(err, MQR_EBADROUTINGTYPE, NULL, 0, (uint32_t)a + 1,
                              "unknown routing type '%.*s' (expected ANYCAST or MULTICAST)", (int)(b - a),
                              text.ptr + a);
    }
    s = mqr_routing_set_add(s, t);
    if (i < text.len) {
      i++; /* the comma */
      if (i == text.len)
        return mqr_error_set_at(err, MQR_EBADROUTINGTYPE, NULL, 0, (uint32_t)i,
                                "trailing comma in routing types '%.*s'", (int)text.len, text.ptr);
    }
  }
  *out = s;
  return 0;
}

int mqr_routing_set_format(mqr_routing_set_t s, char *buf, size_t cap) {
  size_t n = 0;
  if (cap == 0) return MQR_ENOSPC;
  buf[0] = '\0';
  MQR_ROUTING_SET_FOREACH(t, s) {
    char tmp[16];
    const char *name = mqr_routing_type_name(t);
    if (name == NULL) {
      snprintf(tmp, sizeof tmp, "TYPE%d", t);
      name = tmp;
    }
    size_t len = strlen(name) + (n ? 1 : 0);
    if (n + len + 1 > cap) return MQR_ENOSPC;
    if (n) buf[n++] = ',';
    memcpy(buf + n, name, strlen(name) + 1);
    n += strlen(name);
  }
  return (int)n;
}
