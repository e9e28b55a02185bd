/* $SYS: the broker's figures as retained MQTT messages under $SYS/broker/, as mosquitto
 * publishes them, every sys-interval (the smallest of the MQTT listeners'; default 10 s,
 * 0: never). A subscription to $SYS topics needs browse permission, not consume
 * (broker/subscribe.c), and a filter that starts with a wildcard does not match them
 * [MQTT-4.7.2-1]. docs/observability.md lists the topics.
 *
 *   $SYS/broker/version, uptime                   "mqrd 0.1.0", "N seconds"
 *   $SYS/broker/clients/connected                 MQTT clients connected now
 *   $SYS/broker/clients/total                     their sessions, connected or kept
 *   $SYS/broker/connections                       client connections of any protocol
 *   $SYS/broker/messages/received, sent           MQTT PUBLISH packets from clients, and
 *                                                 deliveries to MQTT clients, since start
 *   $SYS/broker/messages/stored                   messages the broker holds
 *   $SYS/broker/bytes/received, sent              bytes read from and written to clients
 *   $SYS/broker/load/{messages,bytes}/{received,sent}/{1min,5min,15min}
 *                                                 those per minute, moving averages
 *
 * Published as the broker's own (no principal), QoS 0, retained. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "mqtt.h"

/* The smallest sys-interval of the broker's MQTT listeners, ms (0: none wants $SYS). */
static uint64_t interval(mqr_broker_t *b) {
  const mqr_config_t *cfg = mqr__config(b);
  uint64_t best = 0;
  for (uint32_t i = 0; i < mqr_config_listener_count(cfg); i++) {
    const mqr_listener_config_t *l = mqr_config_listener(cfg, i);
    if (!(l->protocols & MQR_PROTOCOL_MQTT)) continue;
    uint64_t v = (uint64_t)mqr_listener_option(l, &mqr__mqtt_def, MQTT_OPT_SYS_INTERVAL);
    if (v && (best == 0 || v < best)) best = v;
  }
  return best;
}

static void publish(mqr_broker_t *b, const char *topic, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void publish(mqr_broker_t *b, const char *topic, const char *fmt, ...) {
  char text[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  mqr__mqtt_publish_t m = {.qos = 0, .retain = true, .topic = mqr_str(topic), .payload = mqr_str_n(text, (size_t)n)};
  mqr__mqtt_props_t none = {0};
  mqr_error_t err;
  mqr_broker_receipt_t r;
  (void)mqr__mqtt_send(b, NULL, NULL, MQR_STR("$SYS"), &m, &none, 0, &r, &err); /* (kept retained either way) */
}

void mqr__mqtt_sys_tick(mqr_broker_t *b, uint64_t now) {
  mqtt_registry_t *r = mqr__mqtt_registry(b, false);
  uint64_t every = interval(b);
  if (r == NULL || every == 0 || (r->sys_at && now - r->sys_at < every)) return;
  double minutes = r->sys_at ? (double)(now - r->sys_at) / 60000.0 : 0;
  r->sys_at = now;
  uint64_t in, out;
  mqr__net_bytes(b, &in, &out);
  mqr_broker_stats_t st;
  mqr_broker_stats(b, &st);
  uint32_t sessions = 0, connected = 0;
  for (const mqtt_session_t *ss = r->sessions; ss; ss = ss->next) {
    sessions++;
    connected += ss->conn != NULL;
  }
  publish(b, "$SYS/broker/version", "mqrd %s", mqr_version());
  publish(b, "$SYS/broker/uptime", "%llu seconds", (unsigned long long)mqr__uptime_s(b));
  publish(b, "$SYS/broker/clients/connected", "%u", connected);
  publish(b, "$SYS/broker/clients/total", "%u", sessions);
  publish(b, "$SYS/broker/connections", "%u", st.connections);
  publish(b, "$SYS/broker/messages/received", "%llu", (unsigned long long)r->sys_received);
  publish(b, "$SYS/broker/messages/sent", "%llu", (unsigned long long)r->sys_sent);
  publish(b, "$SYS/broker/messages/stored", "%llu", (unsigned long long)st.messages);
  publish(b, "$SYS/broker/bytes/received", "%llu", (unsigned long long)in);
  publish(b, "$SYS/broker/bytes/sent", "%llu", (unsigned long long)out);
  /* Per-minute rates, averaged over 1, 5 and 15 minutes as load averages are. */
  static const char *const what[4] = {"messages/received", "messages/sent", "bytes/received", "bytes/sent"};
  static const char *const over[3] = {"1min", "5min", "15min"};
  static const double span[3] = {1, 5, 15};
  uint64_t cur[4] = {r->sys_received, r->sys_sent, in, out};
  for (int i = 0; i < 4; i++) {
    if (minutes > 0) {
      double rate = (double)(cur[i] - r->sys_last[i]) / minutes;
      for (int k = 0; k < 3; k++) {
        double keep = exp(-minutes / span[k]);
        r->sys_load[i][k] = r->sys_load[i][k] * keep + rate * (1 - keep);
      }
    }
    r->sys_last[i] = cur[i];
    for (int k = 0; k < 3; k++) {
      char topic[96];
      snprintf(topic, sizeof topic, "$SYS/broker/load/%s/%s", what[i], over[k]);
      publish(b, topic, "%.2f", r->sys_load[i][k]);
    }
  }
}
