/* GET /metrics: the Prometheus text exposition format 0.0.4, with the names Artemis's
 * Prometheus plugin exports (its Micrometer meters "artemis.message.count" etc., all
 * gauges, with the labels broker, address and queue), so that dashboards made for Artemis
 * read mqrd; then mqrd's own (mqr_*) and the process's (process_*). Read through the
 * broker's one statistics walk (mqr_broker_foreach_stats), nothing kept on the send
 * path. A user sees the addresses and queues it may browse or manage, as `mqr stat`
 * does; the broker-wide families are the same for every user. docs/observability.md
 * names each family. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

/* jemalloc's mallctl when mqrd runs on it (linked in by mqrd; absent in an embedder
 * that is not): its allocated and resident bytes. */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));

enum {
  Q_COUNT,
  Q_DELIVERING,
  Q_SCHEDULED,
  Q_ADDED,
  Q_ACKED,
  Q_KILLED,
  Q_EXPIRED,
  Q_CONSUMERS,
  Q_PAUSED,
  A_ROUTED,
  A_UNROUTED,
  A_SIZE,
  A_PAGING,
  N_FAMILIES
};

static const struct {
  const char *name, *help;
} families[N_FAMILIES] = {
    [Q_COUNT] = {"artemis_message_count",
                 "Messages in the queue: waiting, being delivered, scheduled, and waiting out a redelivery delay"},
    [Q_DELIVERING] = {"artemis_delivering_message_count", "Messages delivered to a consumer and not yet acknowledged"},
    [Q_SCHEDULED] = {"artemis_scheduled_message_count", "Messages waiting for their scheduled delivery time"},
    [Q_ADDED] = {"artemis_messages_added", "Messages added to the queue since the broker started"},
    [Q_ACKED] = {"artemis_messages_acknowledged", "Messages acknowledged from the queue since the broker started"},
    [Q_KILLED] = {"artemis_messages_killed", "Messages that reached max-delivery-attempts (dead-lettered or dropped)"},
    [Q_EXPIRED] = {"artemis_messages_expired", "Messages that expired (sent to the expiry address or dropped)"},
    [Q_CONSUMERS] = {"artemis_consumer_count", "Consumers of the queue"},
    [Q_PAUSED] = {"mqr_queue_paused", "1 when the queue is paused (takes messages, delivers none)"},
    [A_ROUTED] = {"artemis_routed_message_count", "Sends to the address that reached at least one queue"},
    [A_UNROUTED] = {"artemis_unrouted_message_count", "Sends to the address that reached no queue"},
    [A_SIZE] = {"artemis_address_size", "Bytes of the address's messages held in memory (what max-size-bytes counts)"},
    [A_PAGING] = {"mqr_address_paging", "1 while the address pages (address-full-policy PAGE in force)"},
};

typedef struct {
  mqr_broker_t *b;
  mqr__principal_t *who;
  bool hide; /* the current address is not the user's to see */
  const char *broker;
  mqr__http_text_t f[N_FAMILIES];
} walk_t;

/* A label value, escaped as the format says (\\, \", \n). */
static void label(mqr__http_text_t *t, mqr_str_t v) {
  size_t start = 0;
  for (size_t i = 0; i < v.len; i++) {
    const char *esc = v.ptr[i] == '\\' ? "\\\\" : v.ptr[i] == '"' ? "\\\"" : v.ptr[i] == '\n' ? "\\n" : NULL;
    if (esc == NULL) continue;
    mqr__http_put(t, v.ptr + start, i - start);
    mqr__http_put(t, esc, 2);
    start = i + 1;
  }
  mqr__http_put(t, v.ptr + start, v.len - start);
}

static void sample(walk_t *w, int f, mqr_str_t address, const mqr_str_t *queue, uint64_t value) {
  mqr__http_text_t *t = &w->f[f];
  mqr__http_printf(t, "%s{address=\"", families[f].name);
  label(t, address);
  mqr__http_printf(t, "\",broker=\"%s\"", w->broker);
  if (queue) {
    mqr__http_put(t, ",queue=\"", 8);
    label(t, *queue);
    mqr__http_put(t, "\"", 1);
  }
  mqr__http_printf(t, "} %llu\n", (unsigned long long)value);
}

static int on_address(void *arg, const mqr_broker_address_info_t *a) {
  walk_t *w = arg;
  w->hide =
      !mqr__allowed(w->b, w->who, MQR_PERM_BROWSE, a->name) && !mqr__allowed(w->b, w->who, MQR_PERM_MANAGE, a->name);
  if (w->hide) return 0;
  sample(w, A_ROUTED, a->name, NULL, a->routed);
  sample(w, A_UNROUTED, a->name, NULL, a->unrouted);
  sample(w, A_SIZE, a->name, NULL, a->size > 0 ? (uint64_t)a->size : 0);
  sample(w, A_PAGING, a->name, NULL, a->paging);
  return 0;
}

static int on_queue(void *arg, const mqr_broker_queue_info_t *q) {
  walk_t *w = arg;
  if (w->hide) return 0;
  const mqr_broker_queue_stats_t *s = &q->stats;
  sample(w, Q_COUNT, q->address, &q->name, s->depth + s->in_flight + s->scheduled + s->held);
  sample(w, Q_DELIVERING, q->address, &q->name, s->in_flight);
  sample(w, Q_SCHEDULED, q->address, &q->name, s->scheduled);
  sample(w, Q_ADDED, q->address, &q->name, s->enqueued);
  sample(w, Q_ACKED, q->address, &q->name, s->acknowledged);
  sample(w, Q_KILLED, q->address, &q->name, s->killed);
  sample(w, Q_EXPIRED, q->address, &q->name, s->expired);
  sample(w, Q_CONSUMERS, q->address, &q->name, s->consumers);
  sample(w, Q_PAUSED, q->address, &q->name, s->paused);
  return 0;
}

/* One broker-wide family of one sample (labels: more after broker, "" for none). */
static void family(mqr__http_text_t *t, const char *name, const char *type, const char *help, const char *broker,
                   const char *labels, double value) {
  mqr__http_printf(t, "# HELP %s %s\n# TYPE %s %s\n%s{broker=\"%s\"%s} %.17g\n", name, help, name, type, name, broker,
                   labels, value);
}

/* The process's start, seconds since the epoch (from /proc), or 0. */
static double process_start(void) {
  static double start;
  if (start > 0) return start;
  FILE *f = fopen("/proc/self/stat", "r");
  unsigned long long ticks = 0, btime = 0;
  if (f) {
    char line[1024];
    if (fgets(line, sizeof line, f)) {
      const char *p = strrchr(line, ')'); /* past the command's name, which may hold spaces */
      int field = 2;
      for (; p && *p && field < 22; p++)
        if (*p == ' ') field++;
      if (p) ticks = strtoull(p, NULL, 10);
    }
    fclose(f);
  }
  if ((f = fopen("/proc/stat", "r")) != NULL) {
    char line[256];
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "btime %llu", &btime) == 1) break;
    fclose(f);
  }
  long hz = sysconf(_SC_CLK_TCK);
  if (btime && hz > 0) start = (double)btime + (double)ticks / (double)hz;
  return start;
}

static double resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%llu %llu", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static void broker_families(mqr__conn_t *c, const char *broker, mqr__http_text_t *t) {
  mqr_broker_stats_t st;
  mqr_broker_stats(c->b, &st);
  family(t, "artemis_connection_count", "gauge", "Client connections open now", broker, "", st.connections);
  mqr__http_printf(t,
                   "# HELP mqr_connections Client connections open now, by protocol\n# TYPE mqr_connections gauge\n");
  for (const mqr__head_t *const *h = mqr__heads; *h; h++)
    mqr__http_printf(t, "mqr_connections{broker=\"%s\",protocol=\"%s\"} %u\n", broker, (*h)->def->name,
                     mqr__net_connections(c->b, *h));
  uint64_t accepted, refused;
  mqr__sec_counts(c->b, &accepted, &refused);
  mqr__http_printf(t,
                   "# HELP mqr_authentications_total Authentications answered since start, by result\n"
                   "# TYPE mqr_authentications_total counter\n"
                   "mqr_authentications_total{broker=\"%s\",result=\"accepted\"} %llu\n"
                   "mqr_authentications_total{broker=\"%s\",result=\"refused\"} %llu\n",
                   broker, (unsigned long long)accepted, broker, (unsigned long long)refused);
  family(t, "mqr_messages", "gauge", "Messages stored, for any queue", broker, "", (double)st.messages);
  family(t, "mqr_message_bytes", "gauge", "Bytes of the messages stored", broker, "", (double)st.bytes);
  family(t, "mqr_messages_dropped_total", "counter", "Messages dropped by address-full-policy DROP", broker, "",
         (double)st.dropped);
  if (st.persistence) {
    family(t, "mqr_durable_messages", "gauge", "Stored messages the journal keeps", broker, "", (double)st.durable);
    family(t, "mqr_journal_files", "gauge", "Journal files in use", broker, "", (double)st.journal_files);
    family(t, "mqr_journal_records_total", "counter", "Journal records written since start", broker, "",
           (double)st.journal_records);
    family(t, "mqr_journal_syncs_total", "counter", "Journal write rounds (each ends in fdatasync)", broker, "",
           (double)st.journal_writes);
    family(t, "mqr_journal_compactions_total", "counter", "Journal files compacted since start", broker, "",
           (double)st.compactions);
    family(t, "mqr_journal_failed", "gauge", "1 while the journal cannot write (durable sends refused)", broker, "",
           st.journal_failed);
  }
  if (mallctl) {
    uint64_t epoch = 1;
    size_t allocated = 0, resident = 0, n = sizeof(size_t);
    mallctl("epoch", NULL, NULL, &epoch, sizeof epoch);
    if (mallctl("stats.allocated", &allocated, &n, NULL, 0) == 0 &&
        mallctl("stats.resident", &resident, &(size_t){sizeof(size_t)}, NULL, 0) == 0) {
      family(t, "mqr_memory_allocated_bytes", "gauge", "Bytes the allocator (jemalloc) has handed out", broker, "",
             (double)allocated);
      family(t, "mqr_memory_allocator_resident_bytes", "gauge", "Bytes of the allocator's (jemalloc) resident pages",
             broker, "", (double)resident);
    }
  }
  double start = process_start();
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  family(t, "process_resident_memory_bytes", "gauge", "Resident memory of the process", broker, "", resident_bytes());
  if (start > 0) {
    family(t, "process_start_time_seconds", "gauge", "When the process started, seconds since the epoch", broker, "",
           start);
    family(t, "mqr_uptime_seconds", "gauge", "Seconds since the process started", broker, "",
           (double)now.tv_sec + now.tv_nsec / 1e9 - start);
  }
  char labels[96];
  snprintf(labels, sizeof labels, ",version=\"%s\"", mqr_version());
  family(t, "mqr_build_info", "gauge", "1, with the version as a label", broker, labels, 1);
}

void mqr__http_metrics(mqr__conn_t *c, mqr__principal_t *who, mqr__http_text_t *t) {
  char host[64] = "mqrd";
  if (gethostname(host, sizeof host) != 0) strcpy(host, "mqrd");
  host[sizeof host - 1] = 0;
  for (char *p = host; *p; p++)
    if (*p == '"' || *p == '\\' || *p == '\n') *p = '_';
  walk_t w = {.b = c->b, .who = who, .broker = host};
  int rc = mqr_broker_foreach_stats(c->b, false, on_address, on_queue, &w);
  broker_families(c, host, t);
  for (int f = 0; f < N_FAMILIES; f++) {
    if (rc == 0 && w.f[f].len) {
      mqr__http_printf(t, "# HELP %s %s\n# TYPE %s gauge\n", families[f].name, families[f].help, families[f].name);
      mqr__http_put(t, w.f[f].p, w.f[f].len);
    }
    if (w.f[f].failed) t->failed = true;
    mqr_free(w.f[f].p);
  }
}
