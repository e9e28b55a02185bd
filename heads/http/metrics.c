/* GET /metrics: the Prometheus text exposition format 0.0.4, with the names Artemis's
 * Prometheus plugin exports (its Micrometer meters "artemis.message.count" etc., all
 * gauges, with the labels broker, address and queue), so that dashboards made for Artemis
 * read mqrd; then mqrd's own (mqr_*) and the process's (process_*). Read through the
 * broker's one statistics walk (mqr_broker_foreach_stats), nothing kept on the send
 * path. A user sees the addresses and queues it may browse or manage, as `mqr stat`
 * does; the broker-wide families are the same for every user. docs/observability.md
 * names each family.
 *
 * A scrape is made in slices, so that a broker of 10,000 queues does not hold its loop
 * for the whole of it: the addresses' names first (one walk, no figures), then a slice
 * of addresses per loop pass, each slice stopping after SLICE_NS; an address gone
 * meanwhile is left out, one made meanwhile waits for the next scrape. */
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
  Q_SIZE,
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
  A_PAGES,
  N_FAMILIES
};

static const struct {
  const char *name, *help;
} families[N_FAMILIES] = {
    [Q_COUNT] = {"artemis_message_count",
                 "Messages in the queue: waiting, being delivered, scheduled, and waiting out a redelivery delay"},
    [Q_DELIVERING] = {"artemis_delivering_message_count", "Messages delivered to a consumer and not yet acknowledged"},
    [Q_SCHEDULED] = {"artemis_scheduled_message_count", "Messages waiting for their scheduled delivery time"},
    [Q_SIZE] = {"artemis_persistent_size",
                "Bytes of the queue's messages as stored (waiting, being delivered, scheduled, held, paged)"},
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
    [A_PAGES] = {"artemis_number_of_pages", "Page files of the address in use (paged messages not yet read back)"},
};

#define SLICE_NS 2000000ull /* a slice's time, at most (checked every 16 addresses) */

struct mqr__http_metrics_s {
  mqr_broker_t *b;
  mqr__principal_t *who;
  bool hide; /* the current address is not the user's to see */
  char broker[64];
  mqr__http_text_t f[N_FAMILIES];
  mqr__http_text_t names; /* the addresses' names, each NUL-terminated */
  size_t next;            /* the next name's offset */
  char labels[1024];      /* the current queue's or address's labels */
  size_t labels_len;
  bool failed;
  /* the writing: the broker-wide families, then each family's HELP and TYPE and samples */
  mqr__http_text_t pre, tops[N_FAMILIES];
  int seg;     /* 0: pre; 1 + 2f: tops[f]; 2 + 2f: f[f] */
  size_t done; /* bytes of segment seg written */
};
typedef struct mqr__http_metrics_s walk_t;

/* The labels {address="...",broker="..."[,queue="..."]} of the samples to come, values
 * escaped as the format says (\\, \", \n); names too long for the buffer are cut. */
static void escape_into(walk_t *w, mqr_str_t v) {
  for (size_t i = 0; i < v.len && w->labels_len < sizeof w->labels - 8; i++) {
    char ch = v.ptr[i];
    if (ch == '\\' || ch == '"' || ch == '\n') {
      w->labels[w->labels_len++] = '\\';
      ch = ch == '\n' ? 'n' : ch;
    }
    w->labels[w->labels_len++] = ch;
  }
}

static void set_labels(walk_t *w, mqr_str_t address, const mqr_str_t *queue) {
  w->labels_len = 0;
  memcpy(w->labels, "{address=\"", 10);
  w->labels_len = 10;
  escape_into(w, address);
  int n = snprintf(w->labels + w->labels_len, sizeof w->labels - w->labels_len, "\",broker=\"%s\"", w->broker);
  w->labels_len += (size_t)n < sizeof w->labels - w->labels_len ? (size_t)n : 0;
  if (queue) {
    memcpy(w->labels + w->labels_len, ",queue=\"", 8);
    w->labels_len += 8;
    escape_into(w, *queue);
    w->labels[w->labels_len++] = '"';
  }
  w->labels[w->labels_len++] = '}';
  w->labels[w->labels_len++] = ' ';
}

/* name{labels} value\n: the labels set_labels made. */
static void sample(walk_t *w, int f, uint64_t value) {
  mqr__http_text_t *t = &w->f[f];
  char num[24];
  int n = 0;
  char rev[24];
  do rev[n++] = (char)('0' + value % 10);
  while ((value /= 10) != 0);
  for (int i = 0; i < n; i++) num[i] = rev[n - 1 - i];
  num[n++] = '\n';
  mqr__http_put(t, families[f].name, strlen(families[f].name));
  mqr__http_put(t, w->labels, w->labels_len);
  mqr__http_put(t, num, (size_t)n);
}

static int on_address(void *arg, const mqr_broker_address_info_t *a) {
  walk_t *w = arg;
  w->hide =
      !mqr__allowed(w->b, w->who, MQR_PERM_BROWSE, a->name) && !mqr__allowed(w->b, w->who, MQR_PERM_MANAGE, a->name);
  if (w->hide) return 0;
  set_labels(w, a->name, NULL);
  sample(w, A_ROUTED, a->routed);
  sample(w, A_UNROUTED, a->unrouted);
  sample(w, A_SIZE, a->size > 0 ? (uint64_t)a->size : 0);
  sample(w, A_PAGING, a->paging);
  sample(w, A_PAGES, a->pages);
  return 0;
}

static int on_queue(void *arg, const mqr_broker_queue_info_t *q) {
  walk_t *w = arg;
  if (w->hide) return 0;
  const mqr_broker_queue_stats_t *s = &q->stats;
  set_labels(w, q->address, &q->name);
  sample(w, Q_COUNT, s->depth + s->in_flight + s->scheduled + s->held);
  sample(w, Q_DELIVERING, s->in_flight);
  sample(w, Q_SCHEDULED, s->scheduled);
  sample(w, Q_SIZE, s->bytes);
  sample(w, Q_ADDED, s->enqueued);
  sample(w, Q_ACKED, s->acknowledged);
  sample(w, Q_KILLED, s->killed);
  sample(w, Q_EXPIRED, s->expired);
  sample(w, Q_CONSUMERS, s->consumers);
  sample(w, Q_PAUSED, s->paused);
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

/* The cluster's groups (docs/cluster.md), gathered first: each family's samples together. */
typedef struct {
  mqr_broker_group_info_t g[64];
  uint32_t n;
} groups_t;

static void note_group(void *arg, const mqr_broker_group_info_t *g) {
  groups_t *gs = arg;
  if (gs->n < 64) {
    gs->g[gs->n] = *g;
    gs->g[gs->n++].leader_address = mqr_str_n("", 0); /* (valid during the call only) */
  }
}

static void cluster_families(mqr__conn_t *c, const char *broker, mqr__http_text_t *t) {
  static groups_t gs; /* (the loop's thread only) */
  gs.n = 0;
  uint64_t node = mqr_broker_cluster_groups(c->b, note_group, &gs);
  if (node == 0) return;
  family(t, "mqr_cluster_node_id", "gauge", "This node's id in its cluster", broker, "", (double)node);
  static const struct {
    const char *name, *type, *help;
  } f[] = {{"mqr_cluster_leading", "gauge", "1 while this node leads the group (and serves its queues)"},
           {"mqr_cluster_leader", "gauge", "The id of the node that leads the group as this node knows it (0: none)"},
           {"mqr_cluster_term", "gauge", "The group's Raft term"},
           {"mqr_cluster_commit_index", "gauge", "The group's last log entry known committed"},
           {"mqr_cluster_applied_index", "gauge", "The group's last log entry applied on this node"},
           {"mqr_cluster_messages", "gauge", "Live messages of the group's replicated state on this node"},
           {"mqr_cluster_message_bytes", "gauge", "Bytes of those messages"}};
  for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
    mqr__http_printf(t, "# HELP %s %s\n# TYPE %s %s\n", f[k].name, f[k].help, f[k].name, f[k].type);
    for (uint32_t i = 0; i < gs.n; i++) {
      const mqr_broker_group_info_t *g = &gs.g[i];
      uint64_t v[] = {g->leading, g->leader_id, g->term, g->commit_index, g->applied_index, g->messages, g->bytes};
      mqr__http_printf(t, "%s{broker=\"%s\",group=\"%u\"} %llu\n", f[k].name, broker, g->group,
                       (unsigned long long)v[k]);
    }
  }
  mqr__http_printf(t, "# HELP mqr_cluster_follower_lag Log entries a follower is behind its leader (on the leader)\n"
                      "# TYPE mqr_cluster_follower_lag gauge\n");
  for (uint32_t i = 0; i < gs.n; i++)
    for (uint32_t k = 0; k < gs.g[i].n_followers; k++)
      mqr__http_printf(t, "mqr_cluster_follower_lag{broker=\"%s\",group=\"%u\",follower=\"%llu\"} %llu\n", broker,
                       gs.g[i].group, (unsigned long long)gs.g[i].follower_id[k],
                       (unsigned long long)gs.g[i].follower_lag[k]);
  mqr__http_printf(t, "# HELP mqr_cluster_held_back_total AppendEntries messages held back from a follower that had "
                      "more than the send bound on its way (on the leader)\n"
                      "# TYPE mqr_cluster_held_back_total counter\n");
  for (uint32_t i = 0; i < gs.n; i++)
    mqr__http_printf(t, "mqr_cluster_held_back_total{broker=\"%s\",group=\"%u\"} %llu\n", broker, gs.g[i].group,
                     (unsigned long long)gs.g[i].held_back);
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
    mqr_broker_disk_t disk;
    mqr_broker_disk_usage(c->b, &disk); /* (what could be read, if not all) */
    family(t, "mqr_journal_disk_bytes", "gauge", "Bytes the journal's files take on disk", broker, "",
           (double)disk.journal_bytes);
    family(t, "mqr_page_files", "gauge", "Page files of paged addresses", broker, "", (double)disk.page_files);
    family(t, "mqr_page_disk_bytes", "gauge", "Bytes the page files take on disk", broker, "", (double)disk.page_bytes);
    family(t, "mqr_disk_free_bytes", "gauge", "Free bytes on the data directory's file system (for the broker's user)",
           broker, "", (double)disk.free_bytes);
    family(t, "mqr_disk_size_bytes", "gauge", "Size of the data directory's file system", broker, "",
           (double)disk.size_bytes);
    family(t, "mqr_journal_records_total", "counter", "Journal records written since start", broker, "",
           (double)st.journal_records);
    family(t, "mqr_journal_syncs_total", "counter", "Journal write rounds (each ends in fdatasync)", broker, "",
           (double)st.journal_writes);
    family(t, "mqr_journal_compactions_total", "counter", "Journal files compacted since start", broker, "",
           (double)st.compactions);
    mqr__http_printf(t, "# HELP mqr_journal_write_seconds Time of each journal write round (pwrite and fdatasync)\n"
                        "# TYPE mqr_journal_write_seconds histogram\n");
    uint64_t below = 0;
    for (int k = 0; k <= MQR_JOURNAL_LATENCY_BUCKETS; k++) {
      below += st.journal_write_latency[k];
      if (k < MQR_JOURNAL_LATENCY_BUCKETS)
        mqr__http_printf(t, "mqr_journal_write_seconds_bucket{broker=\"%s\",le=\"%g\"} %llu\n", broker,
                         mqr_journal_latency_bounds[k], (unsigned long long)below);
      else
        mqr__http_printf(t, "mqr_journal_write_seconds_bucket{broker=\"%s\",le=\"+Inf\"} %llu\n", broker,
                         (unsigned long long)below);
    }
    mqr__http_printf(
        t, "mqr_journal_write_seconds_sum{broker=\"%s\"} %.9f\nmqr_journal_write_seconds_count{broker=\"%s\"} %llu\n",
        broker, (double)st.journal_write_ns / 1e9, broker, (unsigned long long)below);
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
  cluster_families(c, broker, t);
  char labels[96];
  snprintf(labels, sizeof labels, ",version=\"%s\"", mqr_version());
  family(t, "mqr_build_info", "gauge", "1, with the version as a label", broker, labels, 1);
}

static int note_name(void *arg, const mqr_broker_address_info_t *a) {
  walk_t *w = arg;
  mqr__http_put(&w->names, a->name.ptr, a->name.len);
  mqr__http_put(&w->names, "", 1);
  return w->names.failed ? MQR_ENOMEM : 0;
}

mqr__http_metrics_t *mqr__http_metrics_start(mqr__conn_t *c, mqr__principal_t *who) {
  walk_t *w = mqr_calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  w->b = c->b;
  w->who = mqr__principal_hold(who);
  if (gethostname(w->broker, sizeof w->broker) != 0) strcpy(w->broker, "mqrd");
  w->broker[sizeof w->broker - 1] = 0;
  for (char *p = w->broker; *p; p++)
    if (*p == '"' || *p == '\\' || *p == '\n') *p = '_';
  if (mqr_broker_foreach_stats(c->b, false, note_name, NULL, w) != 0) w->failed = true;
  return w;
}

bool mqr__http_metrics_step(mqr__http_metrics_t *w) {
  uint64_t t0 = uv_hrtime();
  for (uint32_t k = 1; !w->failed && w->next < w->names.len; k++) {
    const char *name = w->names.p + w->next;
    size_t len = strlen(name);
    w->next += len + 1;
    int rc = mqr_broker_address_stats(w->b, mqr_str_n(name, len), false, on_address, on_queue, w);
    if (rc != 0 && rc != MQR_ENOADDR) w->failed = true;
    if (k % 16 == 0 && uv_hrtime() - t0 >= SLICE_NS) break;
  }
  return w->failed || w->next >= w->names.len;
}

size_t mqr__http_metrics_length(mqr__http_metrics_t *w, mqr__conn_t *c) {
  broker_families(c, w->broker, &w->pre);
  size_t len = w->pre.len;
  bool failed = w->failed || w->names.failed || w->pre.failed;
  for (int f = 0; f < N_FAMILIES; f++) {
    if (w->f[f].len)
      mqr__http_printf(&w->tops[f], "# HELP %s %s\n# TYPE %s gauge\n", families[f].name, families[f].help,
                       families[f].name);
    failed |= w->f[f].failed || w->tops[f].failed;
    len += w->tops[f].len + w->f[f].len;
  }
  return failed ? SIZE_MAX : len;
}

static const mqr__http_text_t *segment(walk_t *w, int seg) {
  return seg == 0 ? &w->pre : seg % 2 ? &w->tops[(seg - 1) / 2] : &w->f[(seg - 2) / 2];
}

bool mqr__http_metrics_emit(mqr__http_metrics_t *w, mqr__conn_t *c, size_t bytes) {
  for (; w->seg <= 2 * N_FAMILIES; w->seg++, w->done = 0) {
    const mqr__http_text_t *t = segment(w, w->seg);
    size_t n = t->len - w->done < bytes ? t->len - w->done : bytes;
    if (n && !mqr__http_out(c, t->p + w->done, n)) return false;
    w->done += n, bytes -= n;
    if (w->done < t->len) return false; /* (the slice is spent) */
  }
  return true;
}

void mqr__http_metrics_free(mqr__http_metrics_t *w) {
  if (w == NULL) return;
  for (int f = 0; f < N_FAMILIES; f++) mqr_free(w->f[f].p), mqr_free(w->tops[f].p);
  mqr_free(w->pre.p);
  mqr_free(w->names.p);
  mqr__principal_release(w->who);
  mqr_free(w);
}
