/* Paging (durable.h): an address whose address-full-policy is PAGE and whose messages
 * reach max-size-bytes starts paging, as in Artemis. From then on, every message sent to
 * it goes to the address's page files instead of its queues, until every queue has read
 * them all and the address is below its limit again; so order is kept and a backlog of
 * any size takes no memory per message.
 *
 * Page files are journal files (mqr/journal.h) in DATA/paging/HASH/ (HASH: the address
 * name's FNV-1a, the name itself in the file `address`), written by a journal writer of
 * their own with group commit: a durable message's receipt waits for its page record's
 * fdatasync as it would for its journal records. A record (PAGED, its message id) holds
 * the names of its queues and the message's stored bytes.
 *
 * Each queue the address's messages went to has a cursor: the page file and offset it
 * reads next. A queue whose waiting messages fall below PAGE_LOW reads up to PAGE_HIGH
 * back into memory (depaging); a durable message depaged onto a durable queue is then
 * written to the journal as any durable send is (ADD, REF), and is the journal's. Page
 * files every cursor has passed are released once a marker appended to the journal after
 * those depaged records is durable. After a restart the cursors start at the oldest page
 * file and skip the records depaged before (their ids are at most the highest id of the
 * address's messages the journal gave back to the queue), and non-durable messages left in
 * pages are dropped, as they would have been in memory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"

#define PAGE_LOW 256   /* a queue with fewer waiting reads more from its pages ... */
#define PAGE_HIGH 1024 /* ... up to this many */

struct mqr__pcursor_s {
  mqr__pager_t *pager;
  mqr__bq_t *bq;
  uint64_t file; /* the page file it reads */
  size_t off;
  uint64_t read;          /* the pager's records it has passed */
  int64_t skip_upto;      /* records up to this id were depaged before a restart */
  uint64_t waiting;       /* records for its queue not yet read back */
  uint64_t waiting_bytes; /* and their stored messages' bytes */
  int64_t last_id;        /* the highest id of its queue's records it has passed */
  uint64_t jfile;         /* the journal file of its latest mark (0: none) */
  const uint8_t *map;     /* file, mapped */
  size_t map_len;
  uint64_t map_use;               /* the mapped file's use id (its header's) */
  struct mqr__pcursor_s *next;    /* the pager's */
  struct mqr__pcursor_s *bq_next; /* the queue's */
};

struct mqr__pager_s {
  mqr_broker_t *b;
  mqr__acct_t *acct;
  mqr_journal_writer_t *w;
  char *dir;
  bool paging;
  uint64_t appended, durable; /* records appended; records written and readable */
  uint64_t recovered;         /* records found at start: non-durable ones among them are dropped */
  uint64_t first_file;        /* the oldest page file in use */
  bool releasing;             /* a release marker waits in the journal */
  uint64_t release_to;
  uint8_t *waits; /* per record appended and not yet written: 1 when an answer waits for it */
  uint64_t w_head, w_tail, w_cap;
  mqr__pcursor_t *cursors;
  bool dirty; /* records became readable: its cursors read at the next pass */
  struct mqr__pager_s *next, *next_dirty;
};

/* ---- page files --------------------------------------------------------------------------- */

static uint64_t fnv1a(mqr_str_t s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 0x100000001b3ull;
  return h;
}

static void unmap(mqr__pcursor_t *c) {
  if (c->map) munmap((void *)c->map, c->map_len);
  c->map = NULL;
  c->map_len = 0;
}

/* Maps the cursor's file; false when it is not there (yet). */
static bool map_file(mqr__pcursor_t *c) {
  if (c->map) return true;
  char path[4200];
  snprintf(path, sizeof path, "%s/%016llx.jrn", c->pager->dir, (unsigned long long)c->file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return false;
  if (fstat(fd, &st) != 0 || st.st_size < MQR_JOURNAL_HEADER) {
    close(fd);
    return false;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return false;
  uint64_t use;
  if (mqr_journal_header_read(p, (size_t)st.st_size, &use, NULL) != 0) {
    munmap(p, (size_t)st.st_size);
    return false;
  }
  c->map = p;
  c->map_len = (size_t)st.st_size;
  c->map_use = use;
  if (c->off < MQR_JOURNAL_HEADER) c->off = MQR_JOURNAL_HEADER;
  return true;
}

/* A PAGED payload: u16 n, n times (u16 length, queue name), then the stored message. */
static bool parse(const mqr_journal_record_t *r, uint16_t *n, const uint8_t **names, const uint8_t **stored,
                  size_t *stored_len) {
  const uint8_t *p = r->payload, *end = r->payload + r->len;
  if (r->len < 2) return false;
  *n = (uint16_t)(p[0] | p[1] << 8);
  p += 2;
  *names = p;
  for (uint16_t i = 0; i < *n; i++) {
    if (end - p < 2) return false;
    size_t l = (size_t)(p[0] | p[1] << 8);
    if ((size_t)(end - p - 2) < l) return false;
    p += 2 + l;
  }
  *stored = p;
  *stored_len = (size_t)(end - p);
  return true;
}

static bool names_has(const uint8_t *names, uint16_t n, mqr_str_t q) {
  const uint8_t *p = names;
  for (uint16_t i = 0; i < n; i++) {
    size_t l = (size_t)(p[0] | p[1] << 8);
    if (l == q.len && memcmp(p + 2, q.ptr, l) == 0) return true;
    p += 2 + l;
  }
  return false;
}

/* Whether a stored message says durable (false if it does not read). */
static bool stored_durable(const uint8_t *p, size_t len) {
  mqr_stored_view_t v;
  return mqr_message_read_stored(p, len, &v, NULL) == 0 && v.durable;
}

/* ---- cursors --------------------------------------------------------------------------------- */

static mqr__pcursor_t *cursor_of(mqr__pager_t *pg, mqr__bq_t *bq) {
  for (mqr__pcursor_t *c = pg->cursors; c; c = c->next)
    if (c->bq == bq) return c;
  mqr__pcursor_t *c = mqr_calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->pager = pg;
  c->bq = bq;
  c->file = pg->first_file;
  c->off = MQR_JOURNAL_HEADER;
  c->read = 0;
  /* A cursor made now starts where the pager's data ends: what is there is not for it. */
  if (pg->appended) {
    c->read = pg->appended;
    mqr_journal_position(pg->w, &c->file, &c->off);
  }
  c->next = pg->cursors;
  pg->cursors = c;
  c->bq_next = bq->pcursors;
  bq->pcursors = c;
  return c;
}

static void cursor_free(mqr__pcursor_t *c) {
  unmap(c);
  mqr_free(c);
}

/* The oldest file a cursor still reads; files before it can go. */
static uint64_t oldest_read(const mqr__pager_t *pg) {
  uint64_t m = mqr_journal_file(pg->w);
  for (const mqr__pcursor_t *c = pg->cursors; c; c = c->next)
    if (c->file < m) m = c->file;
  return m;
}

static void maybe_release(mqr__pager_t *pg);

static void released(void *arg, int status) {
  mqr__pager_t *pg = arg;
  pg->releasing = false;
  if (status != 0 || pg->w == NULL) return; /* failed, or closing: the next start releases them */
  while (pg->first_file < pg->release_to && mqr_journal_release(pg->w, pg->first_file) == 0) pg->first_file++;
  maybe_release(pg); /* cursors that moved on meanwhile */
}

/* Page files every cursor has passed go, once the journal holds what was depaged from
 * them: a marker appended after those records, released when it is durable. */
static void maybe_release(mqr__pager_t *pg) {
  mqr__durable_t *d = pg->b->dur;
  uint64_t to = oldest_read(pg);
  if (pg->releasing || to <= pg->first_file || d->w == NULL) return;
  if (mqr_journal_append(d->w, MQR_JOURNAL_PAGED, 0, NULL, 0, released, pg) != 0) return;
  pg->releasing = true;
  pg->release_to = to;
}

/* A mark in the journal: how far cursor c has read its queue's records (u16 length and
 * the address's name, u16 length and the queue's, as a PAGED record whose id is the
 * last id read). Recovery skips page records up to it; the latest mark counts as live in
 * its file, as a run-time queue's TOPOLOGY record does, and compaction copies it. */
void mqr__pager_mark(mqr__pcursor_t *c) {
  mqr__durable_t *d = c->pager->b->dur;
  if (d->w == NULL || d->failed) return;
  mqr_str_t a = mqr_address_name(c->pager->acct->address), q = mqr_queue_name(c->bq->q);
  size_t len = 4 + a.len + q.len;
  uint8_t stackbuf[1024], *buf = len <= sizeof stackbuf ? stackbuf : mqr_malloc(len);
  if (buf == NULL) return;
  buf[0] = (uint8_t)a.len;
  buf[1] = (uint8_t)(a.len >> 8);
  memcpy(buf + 2, a.ptr, a.len);
  buf[2 + a.len] = (uint8_t)q.len;
  buf[3 + a.len] = (uint8_t)(q.len >> 8);
  memcpy(buf + 4 + a.len, q.ptr, q.len);
  int rc = mqr_journal_append(d->w, MQR_JOURNAL_PAGED, (uint64_t)c->last_id, buf, len, NULL, NULL);
  if (buf != stackbuf) mqr_free(buf);
  if (rc) return;
  uint64_t size = mqr_journal_record_size(len);
  mqr__jfile_account(d, c->jfile, -1, size);
  c->jfile = mqr_journal_file(d->w);
  mqr__jfile_account(d, c->jfile, 1, size);
}

/* Reads cursor c's queue's messages back from the pages, up to PAGE_HIGH waiting. */
static void depage(mqr__pcursor_t *c) {
  mqr__pager_t *pg = c->pager;
  mqr_broker_t *b = pg->b;
  mqr__durable_t *d = b->dur;
  mqr__bq_t *bq = c->bq;
  mqr_str_t qname = mqr_queue_name(bq->q);
  bool durable_queue = mqr__queue_journaled(bq->q);
  uint64_t file_before = c->file;
  int64_t id_before = c->last_id;
  while (c->read < pg->durable && bq->store.depth < PAGE_HIGH) {
    if (!map_file(c)) break;
    mqr_journal_record_t r;
    size_t next;
    if (!mqr_journal_record_at(c->map, c->map_len, c->off, c->map_use, &r, &next)) {
      /* Its file ends here: the next durable record is in the next file. */
      unmap(c);
      c->file++;
      c->off = MQR_JOURNAL_HEADER;
      continue;
    }
    c->off = next;
    c->read++;
    uint16_t n;
    const uint8_t *names, *stored;
    size_t stored_len;
    if (r.type != MQR_JOURNAL_PAGED || !parse(&r, &n, &names, &stored, &stored_len)) continue;
    if (!names_has(names, n, qname)) continue;
    if ((int64_t)r.id > c->last_id) c->last_id = (int64_t)r.id;
    if ((int64_t)r.id <= c->skip_upto) continue;
    bool durable = stored_durable(stored, stored_len);
    if (!durable && c->read <= pg->recovered) continue; /* non-durable, from before a restart */
    /* (what a restart's scan counts, or a send since: the records skipped above are not) */
    if (c->waiting) c->waiting--, c->waiting_bytes -= stored_len < c->waiting_bytes ? stored_len : c->waiting_bytes;
    mqr__msg_t *m = mqr__msg_alloc(b, stored_len);
    mqr__entry_t *e = m ? mqr__pool_take(&b->entries) : NULL;
    if (e == NULL) { /* no memory: read it again later */
      if (m) mqr__msg_release(b, (m->refs = 1, b->stats.messages++, b->stats.bytes += stored_len, m));
      c->read--;
      c->waiting++;
      c->waiting_bytes += stored_len;
      c->off = r.offset;
      c->last_id = id_before > c->last_id ? id_before : c->last_id;
      break;
    }
    memcpy(m->data, stored, stored_len);
    m->id = (int64_t)r.id;
    m->refs = 1;
    m->acct = pg->acct;
    pg->acct->bytes += m->len;
    b->stats.messages++;
    b->stats.bytes += m->len;
    *e = (mqr__entry_t){NULL, NULL, m, 0, 0, 0, NULL, NULL, false, 0};
    if (durable && durable_queue && d->w && !d->failed) {
      /* The journal's now, as a durable send's. */
      mqr__durable_append(d, MQR_JOURNAL_ADD, m->id, m->data, m->len);
      uint64_t file = mqr_journal_file(d->w);
      mqr__durable_append_named(d, MQR_JOURNAL_REF, m->id, NULL, qname);
      m->jfile = file;
      m->jbytes = (uint32_t)(mqr_journal_record_size(m->len) + mqr_journal_record_size(qname.len));
      if (mqr__jfiles_reserve(d, file)) {
        e->jbq = bq;
        m->jentries = e;
        mqr__jlive_add(d, m);
      } else {
        m->jfile = 0;
      }
    }
    mqr__enqueue(b, bq, e);
    bq->enqueued++;
    bq->bytes += m->len;
  }
  if (c->last_id != id_before) mqr__pager_mark(c); /* after the records it depaged */
  if (c->file != file_before) maybe_release(pg);
}

/* ---- the pager's life --------------------------------------------------------------------------- */

static void page_written(void *arg, int status);

static int pager_open(mqr_broker_t *b, mqr__acct_t *acct, mqr_journal_recover_fn recover, void *ctx, mqr__pager_t **out,
                      mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  mqr_str_t name = mqr_address_name(acct->address);
  size_t l = strlen(d->dir) + 40;
  mqr__pager_t *pg = mqr_calloc(1, sizeof *pg);
  char *dir = mqr_malloc(l);
  if (pg == NULL || dir == NULL) {
    mqr_free(pg);
    mqr_free(dir);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory paging");
  }
  snprintf(dir, l, "%s/paging", d->dir);
  mkdir(dir, 0700);
  snprintf(dir, l, "%s/paging/%016llx", d->dir, (unsigned long long)fnv1a(name));
  mkdir(dir, 0700);
  /* The address's name beside its pages, for a restart. */
  char path[4200];
  snprintf(path, sizeof path, "%s/address", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, name.ptr, name.len) != (ssize_t)name.len || (!d->jopt.no_sync && fsync(fd) != 0)) {
    int e = errno;
    if (fd >= 0) close(fd);
    mqr_free(pg);
    mqr_free(dir);
    return mqr_error_set(err, MQR_EIO, "cannot write %s: %s", path, strerror(e));
  }
  close(fd);
  pg->b = b;
  pg->acct = acct;
  pg->dir = dir;
  mqr_journal_options_t opt = d->jopt;
  opt.directory = dir;
  opt.min_files = 1;
  opt.truncate_damaged = true; /* pages of a message not yet receipted may be torn */
  int rc = mqr_journal_open(b->loop, &opt, recover, ctx, &pg->w, err);
  if (rc) {
    mqr_free(pg->dir);
    mqr_free(pg);
    return rc;
  }
  mqr_journal_stats_t st;
  mqr_journal_stats(pg->w, &st);
  pg->first_file = st.first_file;
  pg->recovered = pg->appended = pg->durable = st.recovered;
  acct->pager = pg;
  pg->next = d->pagers;
  d->pagers = pg;
  *out = pg;
  return 0;
}

static bool waits_push(mqr__pager_t *pg, uint8_t v) {
  if (pg->w_tail - pg->w_head == pg->w_cap) {
    uint64_t ncap = pg->w_cap ? pg->w_cap * 2 : 256;
    uint8_t *nw = mqr_malloc(ncap);
    if (nw == NULL) return false;
    for (uint64_t i = pg->w_head; i < pg->w_tail; i++) nw[i & (ncap - 1)] = pg->waits[i & (pg->w_cap - 1)];
    mqr_free(pg->waits);
    pg->waits = nw;
    pg->w_cap = ncap;
  }
  pg->waits[pg->w_tail++ & (pg->w_cap - 1)] = v;
  return true;
}

static void page_written(void *arg, int status) {
  mqr__pager_t *pg = arg;
  mqr__durable_t *d = pg->b->dur;
  bool waited = pg->waits[pg->w_head++ & (pg->w_cap - 1)] != 0;
  if (status == 0) pg->durable++;
  if (waited) mqr__durable_done(d, pg, status);
  if (status == 0 && !pg->dirty) {
    pg->dirty = true;
    pg->next_dirty = d->dirty_pagers;
    d->dirty_pagers = pg;
    mqr__durable_wake(d);
  }
}

bool mqr__pager_wants(mqr_broker_t *b, const mqr__acct_t *acct) {
  if (acct->policy != MQR_FULL_PAGE || b->dur == NULL || b->dur->failed) return false;
  /* a replicated address does not page (its messages would stay on this node): BLOCK */
  if (b->dur->cluster && mqr_address_settings(acct->address)->replicated) return false;
  if (acct->pager && acct->pager->paging) return true;
  return mqr__full(b, acct); /* its own limit, or the broker's */
}

int mqr__pager_send(mqr_broker_t *b, mqr__acct_t *acct, const mqr__msg_t *m, mqr_queue_t *const *targets, uint32_t n,
                    const mqr__send_t *s, const mqr_broker_receipt_t *r, bool durable, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  mqr__pager_t *pg = acct->pager;
  if (pg == NULL) {
    int rc = pager_open(b, acct, NULL, NULL, &pg, err);
    if (rc) return rc;
  }
  if (pg->w == NULL || mqr_journal_error(pg->w))
    return mqr_error_set(err, MQR_EIO, "the address's page files cannot be written: %s",
                         pg->w ? mqr_journal_error(pg->w) : "closed");
  /* The record: the queues' names, then the stored message. */
  size_t len = 2 + m->len;
  for (uint32_t i = 0; i < n; i++) len += 2 + mqr_queue_name(targets[i]).len;
  uint8_t stackbuf[4096], *buf = len <= sizeof stackbuf ? stackbuf : mqr_malloc(len);
  if (buf == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory paging");
  uint8_t *p = buf;
  *p++ = (uint8_t)n;
  *p++ = (uint8_t)(n >> 8);
  for (uint32_t i = 0; i < n; i++) {
    mqr_str_t q = mqr_queue_name(targets[i]);
    *p++ = (uint8_t)q.len;
    *p++ = (uint8_t)(q.len >> 8);
    memcpy(p, q.ptr, q.len);
    p += q.len;
  }
  memcpy(p, m->data, m->len);
  mqr__pcursor_t *cur[64];
  for (uint32_t i = 0; i < n; i++) { /* a cursor for each queue, before its first record */
    mqr__bq_t *bq = mqr__bq_of(b, targets[i]);
    mqr__pcursor_t *c = bq ? cursor_of(pg, bq) : NULL;
    if (i < 64) cur[i] = c;
    if (c == NULL) {
      if (buf != stackbuf) mqr_free(buf);
      return mqr_error_set(err, MQR_ENOMEM, "out of memory paging");
    }
  }
  bool wait = durable && s->producer; /* the answer waits for the page's fdatasync */
  int rc = waits_push(pg, wait) ? 0 : MQR_ENOMEM;
  if (rc == 0 && wait && !mqr__durable_pend_reserve(d)) rc = MQR_ENOMEM;
  if (rc == 0) rc = mqr_journal_append(pg->w, MQR_JOURNAL_PAGED, (uint64_t)m->id, buf, len, page_written, pg);
  if (buf != stackbuf) mqr_free(buf);
  if (rc) {
    if (pg->w_tail > pg->w_head) pg->w_tail--;
    return mqr_error_set(err, rc, "the address's page files cannot take the message: %s", mqr_strerror(rc));
  }
  if (!pg->paging)
    mqr__log(b, MQR_LOG_INFO, "address '%.*s' is paging (%lld bytes of max-size-bytes %lld in memory)",
             (int)mqr_address_name(acct->address).len, mqr_address_name(acct->address).ptr, (long long)acct->bytes,
             (long long)acct->max);
  pg->paging = true;
  pg->appended++;
  for (uint32_t i = 0; i < n; i++) {
    mqr__pcursor_t *c = i < 64 ? cur[i] : cursor_of(pg, mqr_queue_data(targets[i]));
    if (c) c->waiting++, c->waiting_bytes += m->len;
  }
  if (!wait) return 0;
  mqr__durable_pend_wait(d, s, pg, r);
  return MQR__PENDING;
}

/* Whether the pager has given every queue everything: then the address may stop paging. */
static void maybe_stop_paging(mqr__pager_t *pg) {
  if (!pg->paging) return;
  for (const mqr__pcursor_t *c = pg->cursors; c; c = c->next)
    if (c->read < pg->appended) return;
  if (pg->acct->max >= 0 && pg->acct->bytes >= pg->acct->max) return;
  pg->paging = false;
  mqr__log(pg->b, MQR_LOG_INFO, "address '%.*s' stopped paging", (int)mqr_address_name(pg->acct->address).len,
           mqr_address_name(pg->acct->address).ptr);
  maybe_release(pg);
}

void mqr__pager_fill(mqr__bq_t *bq) {
  if (bq->store.depth >= PAGE_LOW) return;
  for (mqr__pcursor_t *c = bq->pcursors; c; c = c->bq_next) {
    if (c->read < c->pager->durable) depage(c);
    maybe_stop_paging(c->pager);
  }
}

void mqr__pagers_run(mqr__durable_t *d) {
  while (d->dirty_pagers) {
    mqr__pager_t *pg = d->dirty_pagers;
    d->dirty_pagers = pg->next_dirty;
    pg->dirty = false;
    for (mqr__pcursor_t *c = pg->cursors; c; c = c->next)
      if (c->bq->store.depth < PAGE_LOW) mqr__dispatch(c->bq); /* dispatch fills from the pages */
    maybe_stop_paging(pg);
  }
}

void mqr__pager_forget_queue(mqr__bq_t *bq) {
  for (mqr__pcursor_t *c = bq->pcursors, *next; c; c = next) {
    next = c->bq_next;
    mqr__pager_t *pg = c->pager;
    for (mqr__pcursor_t **pp = &pg->cursors; *pp; pp = &(*pp)->next)
      if (*pp == c) {
        *pp = c->next;
        break;
      }
    cursor_free(c);
  }
  bq->pcursors = NULL;
}

bool mqr__pager_paging(const mqr__acct_t *acct) { return acct->pager && acct->pager->paging; }

uint64_t mqr__pager_pages(const mqr__acct_t *acct) {
  const mqr__pager_t *pg = acct->pager;
  if (pg == NULL || pg->w == NULL || pg->appended == 0) return 0;
  uint64_t file;
  size_t off;
  mqr_journal_position(pg->w, &file, &off);
  return file >= pg->first_file ? file - pg->first_file + 1 : 0;
}

uint64_t mqr__pager_backlog(const mqr__bq_t *bq) {
  uint64_t n = 0;
  for (const mqr__pcursor_t *c = bq->pcursors; c; c = c->bq_next) n += c->waiting;
  return n;
}

uint64_t mqr__pager_backlog_bytes(const mqr__bq_t *bq) {
  uint64_t n = 0;
  for (const mqr__pcursor_t *c = bq->pcursors; c; c = c->bq_next) n += c->waiting_bytes;
  return n;
}

/* ---- recovery ------------------------------------------------------------------------------------- */

/* The highest id of address a's messages that the journal gave back to bq. */
static int64_t highest_recovered(const mqr__bq_t *bq, mqr_str_t a) {
  int64_t max = 0;
  for (const mqr__entry_t *e = bq->store.head; e; e = e->next) {
    const mqr__msg_t *m = e->msg;
    if (m->acct && mqr_str_eq(mqr_address_name(m->acct->address), a) && m->id > max) max = m->id;
  }
  return max;
}

typedef struct {
  mqr_broker_t *b;
  mqr_str_t address;
  mqr_str_t names[64];
  uint64_t counts[64]; /* records still to read back: after skip, durable */
  uint64_t bytes[64];  /* and their stored messages' bytes */
  int64_t skip[64];
  uint32_t n_names;
  int64_t max_id; /* the highest message id in the pages */
  char store[4096];
  size_t used;
} scan_t;

/* Collects the queues the records went to (a few distinct names), and how many of each
 * queue's records are still to be read back. */
static int scan_record(void *ctx, uint64_t file, const char *path, const mqr_journal_record_t *r) {
  (void)file, (void)path;
  scan_t *s = ctx;
  uint16_t n;
  const uint8_t *names, *stored;
  size_t stored_len;
  if (r->type != MQR_JOURNAL_PAGED || !parse(r, &n, &names, &stored, &stored_len)) return 0;
  if ((int64_t)r->id > s->max_id) s->max_id = (int64_t)r->id;
  bool durable = stored_durable(stored, stored_len);
  const uint8_t *p = names;
  for (uint16_t i = 0; i < n; i++) {
    size_t l = (size_t)(p[0] | p[1] << 8);
    mqr_str_t q = mqr_str_n((const char *)p + 2, l);
    p += 2 + l;
    uint32_t k = 0;
    while (k < s->n_names && !mqr_str_eq(s->names[k], q)) k++;
    if (k == s->n_names) {
      if (s->n_names == 64 || s->used + l > sizeof s->store) continue;
      memcpy(s->store + s->used, q.ptr, l);
      s->names[k] = mqr_str_n(s->store + s->used, l);
      s->used += l;
      s->counts[k] = s->bytes[k] = 0;
      mqr_queue_t *qq = mqr_router_find_queue(&s->b->router, q);
      const mqr__bq_t *bq = qq ? mqr_queue_data(qq) : NULL;
      s->skip[k] = bq ? highest_recovered(bq, s->address) : 0;
      const mqr__pmark_t *mk = mqr__recovered_mark(s->b->dur, s->address, q);
      if (mk && mk->id > s->skip[k]) s->skip[k] = mk->id;
      s->n_names++;
    }
    if (durable && (int64_t)r->id > s->skip[k]) s->counts[k]++, s->bytes[k] += stored_len;
  }
  return 0;
}

int mqr__pagers_recover(mqr_broker_t *b, mqr_error_t *err) {
  mqr__durable_t *d = b->dur;
  char root[4200];
  snprintf(root, sizeof root, "%s/paging", d->dir);
  DIR *dir = opendir(root);
  if (dir == NULL) return 0;
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(dir)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[4800], name[1024];
    snprintf(path, sizeof path, "%s/%s/address", root, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t k = read(fd, name, sizeof name - 1);
    close(fd);
    if (k <= 0) continue;
    mqr_address_t *a = mqr_router_find_address(&b->router, mqr_str_n(name, (size_t)k));
    mqr__acct_t *acct = a ? mqr__acct_of(b, a) : NULL;
    if (acct == NULL) {
      mqr__log(b, MQR_LOG_WARN, "paging: the pages of address '%.*s' (%s) have no address any more: left there", (int)k,
               name, e->d_name);
      continue;
    }
    static scan_t s;
    memset(&s, 0, sizeof s);
    s.b = b;
    s.address = mqr_address_name(a);
    mqr__pager_t *pg;
    if ((rc = pager_open(b, acct, scan_record, &s, &pg, err)) != 0) break;
    /* Messages sent while the address paged have their ids in the pages only: new ones
     * must come after them, or a cursor would skip or read again by id. */
    if (s.max_id > b->next_message_id) b->next_message_id = s.max_id;
    for (uint32_t i = 0; i < s.n_names; i++) {
      mqr_queue_t *q = mqr_router_find_queue(&b->router, s.names[i]);
      mqr__bq_t *bq = q ? mqr__bq_of(b, q) : NULL;
      if (q == NULL) continue;
      uint64_t appended = pg->appended;
      pg->appended = 0; /* a cursor made now starts at the first page file */
      mqr__pcursor_t *c = bq ? cursor_of(pg, bq) : NULL;
      pg->appended = appended;
      if (c == NULL) {
        rc = mqr_error_set(err, MQR_ENOMEM, "out of memory recovering pages");
        break;
      }
      c->skip_upto = s.skip[i];
      c->waiting = s.counts[i];
      c->waiting_bytes = s.bytes[i];
      const mqr__pmark_t *mk = mqr__recovered_mark(d, mqr_address_name(a), s.names[i]);
      if (mk) {
        c->last_id = mk->id;
        c->jfile = mk->file;
        mqr__jfile_account(d, c->jfile, 1, mqr_journal_record_size(4 + mqr_address_name(a).len + s.names[i].len));
      }
    }
    pg->paging = pg->appended > 0;
    if (pg->appended)
      mqr__log(b, MQR_LOG_INFO, "paging: address '%.*s' has %llu paged records to read back", (int)k, name,
               (unsigned long long)pg->appended);
    pg->dirty = true;
    pg->next_dirty = d->dirty_pagers;
    d->dirty_pagers = pg;
  }
  closedir(dir);
  if (d->dirty_pagers) mqr__durable_wake(d);
  return rc;
}

/* Marks in the oldest file, written again (compaction). False: the journal refused one. */
bool mqr__pagers_copy_marks(mqr__durable_t *d, uint64_t old) {
  for (mqr__pager_t *pg = d->pagers; pg; pg = pg->next)
    for (mqr__pcursor_t *c = pg->cursors; c; c = c->next)
      if (c->jfile == old) {
        mqr__pager_mark(c);
        if (c->jfile == old) return false;
      }
  return true;
}

/* ---- closing ---------------------------------------------------------------------------------------- */

static void pager_closed(void *arg) { mqr__broker_handle_closed(arg); }

void mqr__pagers_close(mqr__durable_t *d) {
  for (mqr__pager_t *pg = d->pagers; pg; pg = pg->next)
    if (pg->w) {
      mqr__broker_handle_opened(d->b);
      mqr_journal_close(pg->w, pager_closed, d->b);
      pg->w = NULL;
    }
}

void mqr__pagers_free(mqr__durable_t *d) {
  while (d->pagers) {
    mqr__pager_t *pg = d->pagers;
    d->pagers = pg->next;
    while (pg->cursors) {
      mqr__pcursor_t *c = pg->cursors;
      pg->cursors = c->next;
      cursor_free(c);
    }
    mqr_free(pg->waits);
    mqr_free(pg->dir);
    mqr_free(pg);
  }
}
