/* What each journal file holds alive, and giving files back (durable.h). A journaled
 * message counts in the file of its first record until its last reference is deleted;
 * a queue made at run time counts in the file of its TOPOLOGY record. Files are released
 * oldest first, and only when nothing counts in them: a DELETE always lies in a file
 * after its ADD, so a file still in use never holds a DELETE whose ADD is gone unread.
 *
 * One long-lived message would pin every file after its own, so when more than
 * compact_min_files are in use and the oldest holds less than compact_percentage of a
 * file of live data, its live records are copied forward (an ADD, a REF per queue still
 * holding the message, an UPDATE of its delivery count; a queue's TOPOLOGY) a few
 * hundred per loop pass, and the file is released once the copies are durable. This
 * is Artemis's compaction with the data the broker holds in memory as its source: it
 * reads no file and never stops the send path. */
#include <string.h>

#include "durable.h"

#define COMPACT_BATCH 256 /* messages copied per loop pass */

bool mqr__jfiles_reserve(mqr__durable_t *d, uint64_t file) {
  if (file < d->first) return true;
  uint64_t need = file - d->first + 1;
  if (need <= d->n_files) return true;
  if (need > d->cap_files) {
    uint32_t ncap = d->cap_files ? d->cap_files : 16;
    while (ncap < need) ncap *= 2;
    mqr__jfile_t *nf = mqr_realloc(d->files, ncap * sizeof *nf);
    if (nf == NULL) return false;
    d->files = nf;
    d->cap_files = ncap;
  }
  memset(d->files + d->n_files, 0, (need - d->n_files) * sizeof *d->files);
  d->n_files = (uint32_t)need;
  return true;
}

static mqr__jfile_t *file_of(mqr__durable_t *d, uint64_t file) {
  if (file < d->first || !mqr__jfiles_reserve(d, file)) return NULL;
  return &d->files[file - d->first];
}

void mqr__jfile_account(mqr__durable_t *d, uint64_t file, int delta, uint64_t bytes) {
  if (file == 0) return;
  mqr__jfile_t *f = file_of(d, file);
  if (f == NULL) return;
  if (delta > 0) {
    f->live++;
    f->bytes += bytes;
  } else if (f->live) {
    f->live--;
    f->bytes -= bytes <= f->bytes ? bytes : f->bytes;
  }
}

void mqr__jlive_add(mqr__durable_t *d, mqr__msg_t *m) {
  mqr__jfile_t *f = file_of(d, m->jfile);
  if (f) {
    f->live++;
    f->bytes += m->jbytes;
  }
  m->jlive_next = NULL;
  m->jlive_prev = d->live_tail;
  if (d->live_tail)
    d->live_tail->jlive_next = m;
  else
    d->live_head = m;
  d->live_tail = m;
  d->live_msgs++;
}

void mqr__jlive_drop(mqr__durable_t *d, mqr__msg_t *m) {
  if (m->jfile >= d->first && m->jfile - d->first < d->n_files) {
    mqr__jfile_t *f = &d->files[m->jfile - d->first];
    f->live--;
    f->bytes -= m->jbytes;
  }
  if (m->jlive_prev)
    m->jlive_prev->jlive_next = m->jlive_next;
  else
    d->live_head = m->jlive_next;
  if (m->jlive_next)
    m->jlive_next->jlive_prev = m->jlive_prev;
  else
    d->live_tail = m->jlive_prev;
  m->jlive_next = m->jlive_prev = NULL;
  m->jfile = 0;
  d->live_msgs--;
}

/* ---- topology -------------------------------------------------------------------------------- */

/* TOPOLOGY payload: u8 op (1: a queue made; 2: one with its kind too), u8 routing type,
 * u8 flags (1 durable, 2 purge-on-no-consumers, 4 enabled, 8 exclusive, 16
 * group-rebalance, 32 auto-created: op 1 is always), u8 state (1 paused, 2 made by the
 * config), i32 max-consumers, u16 lengths of the name, the address and
 * the filter, then those bytes; op 2 then: i64 ring-size, i32 group-buckets, i32
 * consumers-before-dispatch, i64 delay-before-dispatch, u16 length of the last-value key
 * and its bytes; then, when it has one, u16 length of the group-first key and its bytes
 * (an older record ends before). Little-endian. */
#define TOPO_FIXED 14
#define TOPO_KIND 26

size_t mqr__topology_size(const mqr_queue_t *q) {
  return TOPO_FIXED + mqr_queue_name(q).len + mqr_address_name(mqr_queue_address(q)).len + mqr_queue_filter(q).len +
         TOPO_KIND + mqr_queue_last_value_key(q).len +
         (mqr_queue_group_first_key(q).len ? 2 + mqr_queue_group_first_key(q).len : 0);
}

static uint8_t *put16(uint8_t *p, size_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  return p + 2;
}

size_t mqr__topology_write(uint8_t *buf, const mqr_queue_t *q) {
  mqr_str_t name = mqr_queue_name(q), addr = mqr_address_name(mqr_queue_address(q)), filter = mqr_queue_filter(q);
  mqr_str_t lvk = mqr_queue_last_value_key(q);
  uint8_t *p = buf;
  *p++ = 2;
  *p++ = (uint8_t)mqr_queue_routing_type(q);
  *p++ = (uint8_t)((mqr_queue_durable(q) ? 1 : 0) | (mqr_queue_purge_on_no_consumers(q) ? 2 : 0) |
                   (mqr_queue_enabled(q) ? 4 : 0) | (mqr_queue_exclusive(q) ? 8 : 0) |
                   (mqr_queue_group_rebalance(q) ? 16 : 0) | (mqr_queue_auto_created(q) ? 32 : 0) |
                   (mqr_queue_non_destructive(q) ? 64 : 0));
  const mqr__bq_t *bq = mqr_queue_data(q);
  *p++ = (uint8_t)((bq && bq->pause_kept ? 1 : 0) | (bq && bq->configured ? 2 : 0)); /* 1 paused, 2 the config's */
  uint32_t mc = (uint32_t)mqr_queue_max_consumers(q);
  for (int i = 0; i < 4; i++) *p++ = (uint8_t)(mc >> (8 * i));
  p = put16(p, name.len);
  p = put16(p, addr.len);
  p = put16(p, filter.len);
  memcpy(p, name.ptr, name.len);
  memcpy(p + name.len, addr.ptr, addr.len);
  memcpy(p + name.len + addr.len, filter.ptr, filter.len);
  p += name.len + addr.len + filter.len;
  uint64_t ring = (uint64_t)mqr_queue_ring_size(q);
  for (int i = 0; i < 8; i++) *p++ = (uint8_t)(ring >> (8 * i));
  uint32_t gb = (uint32_t)mqr_queue_group_buckets(q);
  for (int i = 0; i < 4; i++) *p++ = (uint8_t)(gb >> (8 * i));
  uint32_t cbd = (uint32_t)mqr_queue_consumers_before_dispatch(q);
  for (int i = 0; i < 4; i++) *p++ = (uint8_t)(cbd >> (8 * i));
  uint64_t dbd = (uint64_t)mqr_queue_delay_before_dispatch(q);
  for (int i = 0; i < 8; i++) *p++ = (uint8_t)(dbd >> (8 * i));
  p = put16(p, lvk.len);
  if (lvk.len) memcpy(p, lvk.ptr, lvk.len);
  p += lvk.len;
  mqr_str_t gfk = mqr_queue_group_first_key(q);
  if (gfk.len) {
    p = put16(p, gfk.len);
    memcpy(p, gfk.ptr, gfk.len);
    p += gfk.len;
  }
  return (size_t)(p - buf);
}

static size_t get16(const uint8_t *p) { return (size_t)(p[0] | p[1] << 8); }

bool mqr__topology_read(const uint8_t *p, size_t len, mqr_queue_config_t *cfg) {
  if (len < TOPO_FIXED || (p[0] != 1 && p[0] != 2)) return false;
  size_t ln = get16(p + 8), la = get16(p + 10), lf = get16(p + 12), base = TOPO_FIXED + ln + la + lf, lk = 0;
  if (p[0] == 2 && (len < base + TOPO_KIND || len < base + TOPO_KIND + (lk = get16(p + base + 24)))) return false;
  size_t after = base + TOPO_KIND + lk, lg = 0; /* the group-first key, when there is one */
  if (p[0] == 2 && len != after && (len < after + 2 || len != after + 2 + (lg = get16(p + after)))) return false;
  if ((p[0] == 1 && len != base) || !mqr_routing_type_valid(p[1])) return false;
  const char *s = (const char *)p + TOPO_FIXED;
  mqr_queue_config_init(cfg, mqr_str_n(s, ln), mqr_str_n(s + ln, la), (mqr_routing_type_t)p[1]);
  cfg->filter = mqr_str_n(s + ln + la, lf);
  cfg->durable = p[2] & 1;
  cfg->purge_on_no_consumers = (p[2] & 2) != 0;
  cfg->enabled = (p[2] & 4) != 0;
  cfg->max_consumers = (int32_t)((uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24);
  cfg->exclusive = (p[2] & 8) != 0;
  cfg->auto_created = p[0] == 1 || (p[2] & 32) != 0;
  if (p[0] == 2) {
    uint64_t ring = 0;
    for (int i = 0; i < 8; i++) ring |= (uint64_t)p[base + i] << (8 * i);
    cfg->ring_size = (int64_t)ring;
    uint32_t gb = 0;
    for (int i = 0; i < 4; i++) gb |= (uint32_t)p[base + 8 + i] << (8 * i);
    cfg->group_buckets = (int32_t)gb;
    cfg->group_rebalance = (p[2] & 16) != 0;
    cfg->non_destructive = (p[2] & 64) != 0;
    uint32_t cbd = 0;
    for (int i = 0; i < 4; i++) cbd |= (uint32_t)p[base + 12 + i] << (8 * i);
    cfg->consumers_before_dispatch = (int32_t)cbd;
    uint64_t dbd = 0;
    for (int i = 0; i < 8; i++) dbd |= (uint64_t)p[base + 16 + i] << (8 * i);
    cfg->delay_before_dispatch = (int64_t)dbd;
    cfg->last_value_key = mqr_str_n(s + ln + la + lf + TOPO_KIND, lk);
    cfg->group_first_key = mqr_str_n(lg ? (const char *)p + after + 2 : NULL, lg);
  }
  return true;
}

/* ---- tombstones ------------------------------------------------------------------------------ */

/* A tombstone (op 3: a queue; op 5: an address): u8 op, u16 length of the name, the name.
 * The record that made what it deletes, in file *made (record_bytes long), stops counting
 * there; the tombstone lives as long as that file (in the same file, the two go
 * together). *made becomes 0. */
void mqr__tomb_write(uint8_t *buf, uint8_t op, mqr_str_t name) {
  buf[0] = op;
  put16(buf + 1, name.len);
  memcpy(buf + 3, name.ptr, name.len);
}

static int write_tomb(mqr_broker_t *b, uint8_t op, mqr_str_t name, uint64_t *made, size_t record_bytes) {
  mqr__durable_t *d = b->dur;
  if (d->failed || d->w == NULL) return MQR_EIO;
  size_t n = MQR__TOMB_SIZE(name);
  uint8_t *buf = mqr_malloc(n);
  if (buf == NULL) return MQR_ENOMEM;
  mqr__tomb_write(buf, op, name);
  int rc = mqr_journal_append(d->w, MQR_JOURNAL_TOPOLOGY, 0, buf, n, NULL, NULL);
  mqr_free(buf);
  if (rc) return rc == MQR_ENOMEM ? MQR_ENOMEM : MQR_EIO;
  uint64_t from = *made, file = mqr_journal_file(d->w);
  mqr__jfile_t *f = file_of(d, from);
  if (f) f->live--, f->bytes -= mqr_journal_record_size(record_bytes);
  *made = 0;
  if (from != file && !mqr__durable_tomb(d, from, file, (uint32_t)mqr_journal_record_size(n)))
    mqr__log(b, MQR_LOG_WARN, "journal: out of memory keeping %s '%.*s' deleted: it may come back at a restart",
             op == MQR__TOMB_QUEUE ? "queue" : "address", (int)name.len, name.ptr);
  return 0;
}

int mqr__durable_queue_deleted(mqr_broker_t *b, mqr__bq_t *bq) {
  if (b->dur && bq->replicated_topo) return mqr__replicate_queue_deleted(b, bq);
  if (b->dur == NULL || bq->jfile == 0) return 0;
  return write_tomb(b, MQR__TOMB_QUEUE, mqr_queue_name(bq->q), &bq->jfile, mqr__topology_size(bq->q));
}

bool mqr__durable_tomb(mqr__durable_t *d, uint64_t made, uint64_t file, uint32_t bytes) {
  if (made < d->first || file <= made) return true; /* its maker's file is gone (or is this one) */
  if (!mqr__jfiles_reserve(d, file)) return false;  /* made's and file's entries, both */
  mqr__jfile_t *f = &d->files[made - d->first], *t = &d->files[file - d->first];
  mqr__tomb_t *nt = mqr_realloc(f->tombs, (f->n_tombs + 1) * sizeof *nt);
  if (nt == NULL) return false;
  f->tombs = nt;
  f->tombs[f->n_tombs++] = (mqr__tomb_t){file, bytes};
  t->live++;
  t->bytes += bytes;
  return true;
}

/* The first file is released: the tombstones it kept alive elsewhere are dead now. */
static void release_tombs(mqr__durable_t *d) {
  mqr__jfile_t *f = &d->files[0];
  for (uint32_t i = 0; i < f->n_tombs; i++) {
    mqr__jfile_t *t = f->tombs[i].file > d->first ? file_of(d, f->tombs[i].file) : NULL;
    if (t) t->live--, t->bytes -= f->tombs[i].bytes;
  }
  mqr_free(f->tombs);
  f->tombs = NULL;
  f->n_tombs = 0;
}

void mqr__jfiles_free(mqr__durable_t *d) {
  for (uint32_t i = 0; i < d->n_files; i++) mqr_free(d->files[i].tombs);
  mqr_free(d->files);
  d->files = NULL;
  d->n_files = 0;
}

/* Appends bq's TOPOLOGY record and counts it in its file. */
static bool topology_append(mqr__durable_t *d, mqr__bq_t *bq) {
  size_t n = mqr__topology_size(bq->q);
  uint8_t *buf = mqr_malloc(n);
  if (buf == NULL) return false;
  mqr__topology_write(buf, bq->q);
  int rc = mqr_journal_append(d->w, MQR_JOURNAL_TOPOLOGY, 0, buf, n, NULL, NULL);
  mqr_free(buf);
  if (rc) return false;
  if (bq->jfile) {
    mqr__jfile_t *old = file_of(d, bq->jfile);
    if (old) old->live--, old->bytes -= mqr_journal_record_size(n);
  }
  bq->jfile = mqr_journal_file(d->w);
  mqr__jfile_t *f = file_of(d, bq->jfile);
  if (f) f->live++, f->bytes += mqr_journal_record_size(n);
  return true;
}

void mqr__durable_queue_made(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || d->recovering || bq->from_config || bq->temporary || !mqr_queue_durable(bq->q)) return;
  if (mqr__replicate_group(b, bq) >= 0) { /* its record goes to its group, not to this journal */
    mqr__replicate_queue_made(b, bq);
    return;
  }
  if (d->w == NULL || bq->jfile) return;
  if (!topology_append(d, bq))
    mqr__log(b, MQR_LOG_ERROR, "journal: queue '%.*s' could not be recorded: it will not survive a restart",
             (int)mqr_queue_name(bq->q).len, mqr_queue_name(bq->q).ptr);
}

/* ---- addresses made by management ------------------------------------------------------------ */

static size_t address_record_size(const mqr__acct_t *acct) { return 4 + mqr_address_name(acct->address).len; }

/* Appends acct's address record and counts it in its file. */
static bool address_append(mqr__durable_t *d, mqr__acct_t *acct) {
  mqr_str_t name = mqr_address_name(acct->address);
  size_t n = address_record_size(acct);
  uint8_t *buf = mqr_malloc(n);
  if (buf == NULL) return false;
  buf[0] = 4;
  buf[1] = mqr_address_routing_types(acct->address).bits;
  put16(buf + 2, name.len);
  memcpy(buf + 4, name.ptr, name.len);
  int rc = mqr_journal_append(d->w, MQR_JOURNAL_TOPOLOGY, 0, buf, n, NULL, NULL);
  mqr_free(buf);
  if (rc) return false;
  if (acct->jfile) {
    mqr__jfile_t *old = file_of(d, acct->jfile);
    if (old) old->live--, old->bytes -= mqr_journal_record_size(n);
  }
  acct->jfile = mqr_journal_file(d->w);
  mqr__jfile_t *f = file_of(d, acct->jfile);
  if (f) f->live++, f->bytes += mqr_journal_record_size(n);
  return true;
}

int mqr__durable_address_made(mqr_broker_t *b, mqr__acct_t *acct) {
  mqr__durable_t *d = b->dur;
  if (d == NULL) return 0;
  if (d->failed || d->w == NULL) return MQR_EIO;
  return address_append(d, acct) ? 0 : MQR_EIO;
}

int mqr__durable_address_deleted(mqr_broker_t *b, mqr__acct_t *acct) {
  if (b->dur == NULL || acct->jfile == 0) return 0;
  return write_tomb(b, MQR__TOMB_ADDRESS, mqr_address_name(acct->address), &acct->jfile, address_record_size(acct));
}

size_t mqr__address_record_size(const mqr__acct_t *acct) { return address_record_size(acct); }

int mqr__durable_queue_record(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || bq->temporary || !mqr_queue_durable(bq->q)) return 0;
  if (d->failed || d->w == NULL) return MQR_EIO;
  if (!topology_append(d, bq)) return MQR_EIO;
  bq->topo_stale = false;
  return 0;
}

int mqr__durable_queue_state(mqr_broker_t *b, mqr__bq_t *bq) {
  mqr__durable_t *d = b->dur;
  if (d == NULL || bq->temporary || (!bq->from_config && !mqr_queue_durable(bq->q))) return 0; /* goes anyway */
  if (d->failed || d->w == NULL) return MQR_EIO;
  bool was = bq->pause_kept;
  bq->pause_kept = bq->paused;
  if (!topology_append(d, bq)) {
    bq->pause_kept = was;
    return MQR_EIO;
  }
  return 0;
}

/* ---- compaction --------------------------------------------------------------------------------- */

/* m's live records again, in the current file. False: the journal did not take them all
 * (m stays counted where it was, so its old records are kept). */
static bool copy_forward(mqr__durable_t *d, mqr__msg_t *m) {
  uint64_t lost = d->lost_records;
  mqr__durable_append(d, MQR_JOURNAL_ADD, m->id, m->data, m->len);
  uint64_t file = mqr_journal_file(d->w);
  size_t bytes = mqr_journal_record_size(m->len);
  for (mqr__entry_t *e = m->jentries; e; e = e->jnext) {
    mqr_str_t q = mqr_queue_name(e->jbq->q);
    mqr__durable_append_named(d, MQR_JOURNAL_REF, m->id, NULL, q);
    bytes += mqr_journal_record_size(q.len);
    int64_t held = e->delivery_count ? mqr__held_until(d->b, e) : 0; /* (held: it has a count) */
    if (held) { /* waiting out its redelivery delay: the time goes along */
      mqr__durable_held(d->b, e, held);
    } else if (e->delivery_count) {
      uint32_t count = (uint32_t)e->delivery_count;
      mqr__durable_append_named(d, MQR_JOURNAL_UPDATE, m->id, &count, q);
    }
  }
  if (d->lost_records != lost || !mqr__jfiles_reserve(d, file)) return false;
  mqr__jlive_drop(d, m);
  m->jfile = file;
  m->jbytes = (uint32_t)bytes;
  mqr__jlive_add(d, m);
  d->copied++;
  return true;
}

static void compact_step(uv_idle_t *h) {
  mqr__durable_t *d = h->data;
  if (d->w == NULL || d->failed || d->closing || d->first >= mqr_journal_file(d->w)) {
    mqr__durable_compact_stop(d);
    return;
  }
  uint64_t old = d->first;
  bool blocked = false;
  /* Addresses before queues: replayed in this order, a queue finds its address made. */
  for (mqr__acct_t *a = d->b->accts; a && !blocked; a = a->next)
    if (a->jfile == old) blocked = !address_append(d, a);
  for (mqr__bq_t *bq = d->b->queues; bq && !blocked; bq = bq->next)
    if (bq->jfile == old) blocked = !topology_append(d, bq);
  if (!blocked) blocked = !mqr__pagers_copy_marks(d, old);
  mqr__msg_t *m;
  for (int budget = COMPACT_BATCH; !blocked && budget > 0 && (m = d->live_head) != NULL && m->jfile == old; budget--)
    /* A send still waiting for its fdatasync has no entries yet: the next write's
     * completion starts this again. */
    blocked = m->jentries == NULL || !copy_forward(d, m);
  bool emptied = !blocked && (d->live_head == NULL || d->live_head->jfile != old);
  if (emptied) d->compactions++;
  if (emptied || blocked) {
    mqr__durable_compact_stop(d);
    mqr__durable_maintain(d); /* an emptied file goes once the copies are durable */
  }
}

void mqr__durable_compact_stop(mqr__durable_t *d) {
  if (!d->compact_on) return;
  d->compact_on = false;
  uv_idle_stop(&d->compact_idle);
}

void mqr__durable_maintain(mqr__durable_t *d) {
  if (d->w == NULL || d->failed || d->recovering || d->closing) return;
  uint64_t cur = mqr_journal_file(d->w);
  if (!mqr__jfiles_reserve(d, cur)) return;
  while (d->first < cur && d->files[0].live == 0) {
    if (mqr_journal_release(d->w, d->first) != 0) return;
    release_tombs(d);
    memmove(d->files, d->files + 1, (d->n_files - 1) * sizeof *d->files);
    d->n_files--;
    d->first++;
    d->released++;
  }
  if (!d->compact_on && d->compact_pct && d->first < cur && cur - d->first >= d->compact_min_files &&
      d->files[0].bytes * 100 < (uint64_t)d->jopt.file_size * d->compact_pct) {
    d->compact_on = true;
    uv_idle_start(&d->compact_idle, compact_step);
  }
}
