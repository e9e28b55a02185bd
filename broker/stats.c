/* Statistics: a queue's counters, the broker's, the one walk over every address and
 * queue that the native QUERY, management, `mqr stat` and the metrics use, and what the
 * data takes on disk. */
#include <assert.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "broker_int.h"
#include "durable.h"

int mqr_broker_queue_stats(const mqr_broker_t *b, mqr_str_t queue, mqr_broker_queue_stats_t *out) {
  mqr_queue_t *q = mqr_router_find_queue(&b->router, queue);
  if (q == NULL) return MQR_ENOQUEUE;
  mqr__queue_stats(q, out);
  return 0;
}

void mqr__queue_stats(const mqr_queue_t *q, mqr_broker_queue_stats_t *out) {
  const mqr__bq_t *bq = mqr_queue_data(q);
  memset(out, 0, sizeof *out);
  out->consumers = mqr_queue_consumer_count(q);
  if (bq) {
    out->depth = bq->store.depth + mqr__pager_backlog(bq); /* paged messages wait too */
    out->in_flight = bq->in_flight;
    out->enqueued = bq->enqueued;
    out->acknowledged = bq->acked;
    out->held = bq->held;
    out->killed = bq->killed;
    out->expired = bq->expired;
    out->scheduled = bq->scheduled;
    out->paused = bq->paused;
    out->bytes = bq->bytes + mqr__pager_backlog_bytes(bq);
    /* Every way in adds a message's bytes and every way out takes them away (a test build
     * checks it each time the statistics are read). */
    assert((bq->bytes == 0) == (bq->store.depth + bq->in_flight + bq->held + bq->scheduled == 0));
  }
}

void mqr_broker_stats(const mqr_broker_t *b, mqr_broker_stats_t *out) {
  *out = b->stats;
  out->connections = mqr__server_connections(b);
  const mqr__durable_t *d = b->dur;
  if (d) {
    out->persistence = true;
    out->journal_failed = d->failed;
    out->durable = d->live_msgs;
    out->journal_files = d->n_files;
    out->compactions = d->compactions;
    if (d->w) {
      mqr_journal_stats_t st;
      mqr_journal_stats(d->w, &st);
      out->journal_records = st.records;
      out->journal_writes = st.writes;
      memcpy(out->journal_write_latency, st.write_latency, sizeof st.write_latency);
      out->journal_write_ns = st.write_ns;
    }
  }
}

int64_t mqr_broker_address_size(const mqr_broker_t *b, mqr_str_t address) {
  mqr_address_t *a = mqr_router_find_address(&b->router, address);
  const mqr__acct_t *acct = a ? mqr_address_data(a) : NULL;
  return acct ? acct->bytes : 0;
}

typedef struct {
  int (*address_fn)(void *arg, const mqr_broker_address_info_t *a);
  int (*queue_fn)(void *arg, const mqr_broker_queue_info_t *q);
  void *arg;
  bool internal;
} walk_t;

static int visit(mqr_address_t *a, void *arg) {
  walk_t *w = arg;
  uint32_t flags = mqr_address_flags(a);
  if ((flags & MQR_ADDRESS_INTERNAL) && !w->internal) return 0;
  const mqr__acct_t *acct = mqr_address_data(a);
  uint32_t nq = mqr_address_queue_count(a);
  int rc;
  if (w->address_fn) {
    mqr_broker_address_info_t ai = {mqr_address_name(a),
                                    mqr_address_routing_types(a),
                                    flags,
                                    nq,
                                    mqr_address_routed(a),
                                    mqr_address_unrouted(a),
                                    acct ? acct->bytes : 0,
                                    acct && mqr__pager_paging(acct),
                                    acct ? mqr__pager_pages(acct) : 0};
    if ((rc = w->address_fn(w->arg, &ai)) != 0) return rc;
  }
  for (uint32_t i = 0; w->queue_fn && i < nq; i++) {
    mqr_queue_t *q = mqr_address_queue(a, i);
    mqr_broker_queue_info_t qi = {
        mqr_queue_name(q), mqr_address_name(a), mqr_queue_routing_type(q), mqr_queue_durable(q), {0}};
    mqr__queue_stats(q, &qi.stats);
    if ((rc = w->queue_fn(w->arg, &qi)) != 0) return rc;
  }
  return 0;
}

int mqr_broker_address_stats(const mqr_broker_t *b, mqr_str_t address, bool internal,
                             int (*address_fn)(void *arg, const mqr_broker_address_info_t *a),
                             int (*queue_fn)(void *arg, const mqr_broker_queue_info_t *q), void *arg) {
  mqr_address_t *a = mqr_router_find_address(&b->router, address);
  if (a == NULL || ((mqr_address_flags(a) & MQR_ADDRESS_INTERNAL) && !internal)) return MQR_ENOADDR;
  walk_t w = {address_fn, queue_fn, arg, internal};
  return visit(a, &w);
}

int mqr_broker_foreach_stats(const mqr_broker_t *b, bool internal,
                             int (*address_fn)(void *arg, const mqr_broker_address_info_t *a),
                             int (*queue_fn)(void *arg, const mqr_broker_queue_info_t *q), void *arg) {
  walk_t w = {address_fn, queue_fn, arg, internal};
  return mqr_router_foreach_address(&b->router, visit, &w);
}

/* The regular files of dir: how many and their bytes; with paging, each subdirectory's
 * too (dir/paging/<address>/...). False when dir cannot be read. */
static bool count_files(const char *dir, const char *suffix, uint64_t *files, uint64_t *bytes, int depth) {
  DIR *d = opendir(dir);
  if (d == NULL) return false;
  bool ok = true;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0) continue; /* (gone meanwhile: compacted, a page file done) */
    size_t n = strlen(e->d_name), k = suffix ? strlen(suffix) : 0;
    if (S_ISREG(st.st_mode) && (suffix == NULL || (n > k && strcmp(e->d_name + n - k, suffix) == 0))) {
      (*files)++;
      *bytes += (uint64_t)st.st_blocks * 512; /* what it takes on disk */
    } else if (S_ISDIR(st.st_mode) && depth > 0) {
      ok &= count_files(path, suffix, files, bytes, depth - 1);
    }
  }
  closedir(d);
  return ok;
}

int mqr_broker_disk_usage(const mqr_broker_t *b, mqr_broker_disk_t *out) {
  memset(out, 0, sizeof *out);
  const mqr__durable_t *d = b->dur;
  if (d == NULL || d->dir == NULL) return MQR_EINVAL;
  bool ok = count_files(d->dir, ".jrn", &out->journal_files, &out->journal_bytes, 0);
  char paging[4096];
  snprintf(paging, sizeof paging, "%s/paging", d->dir);
  struct stat st;
  if (stat(paging, &st) == 0) ok &= count_files(paging, ".jrn", &out->page_files, &out->page_bytes, 2);
  struct statvfs vfs;
  if (statvfs(d->dir, &vfs) == 0) {
    out->free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    out->size_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
  } else {
    ok = false;
  }
  return ok ? 0 : MQR_EIO;
}
