/* One Raft group: libraft, a batch of records gathered per loop pass, and the owner's
 * state machine fed in log order (group.h). An entry's payload (and a snapshot's) is laid
 * out as a journal file is (mqr/journal.h): its header (the magic and the format's
 * version), then records, each with its CRC, all of file id 0. */
#include "group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

#define BATCH_MAX (4u << 20)
/* At most this many bytes of log entries a leader has handed to its transport for one
 * follower and not yet seen written: past it, an append for that follower is refused as if
 * the follower were unreachable (libraft sends it again later, from where the follower is).
 * libraft 0.15 does not bound it, and its TCP transport queues what the socket does not
 * take: a follower slower than the leader (its disk, its CPU) made the leader's memory grow
 * by the messages it had not read, hundreds of MB in seconds. */
#define SEND_MAX ((size_t)32 << 20) /* (opt.send_max's default) */
#define MAX_PEERS 64

typedef struct {
  mqr__rgroup_done_fn fn;
  void *arg;
} done_t;

/* A proposed batch, until libraft answers it. */
typedef struct {
  struct raft_apply req;
  mqr__rgroup_t *g;
  done_t *dones;
  uint32_t n_dones, cap_dones;
  uint32_t seq; /* its place among this node's proposals */
} proposal_t;

struct mqr__rgroup_s {
  struct raft *r; /* &own, or a fixture's */
  struct raft own;
  struct raft_fsm fsm;
  mqr__rgroup_options_t opt;
  char *address;
  /* The batch being gathered: records (raft_malloc'd: libraft takes the buffer) and the
   * callbacks of its records. */
  uint8_t *batch;
  size_t batch_len, batch_cap;
  done_t *dones;
  uint32_t n_dones, cap_dones;
  struct raft_barrier barrier; /* a new leader's: it leads once everything before is applied */
  proposal_t *last;            /* the newest proposal libraft has not answered (NULL: none) */
  uint32_t seq_next, seq_done; /* the batch being gathered's proposal number; the last one answered */
  uint64_t applied, committed;
  bool leading;    /* leader, its barrier applied: it may append */
  bool barrier_on; /* the barrier is in flight */
  bool broken, closing;
  bool disk_failed;               /* its log could not be written: it leads no more, and hands the group over */
  struct raft_transfer step_down; /* that hand-over, while in flight */
  bool stepping_down;
  bool write_failed; /* told of a failed write of its log (told again after one that works) */
  /* raft_uv's append, wrapped (mqr__rgroup_open): the appends in flight, oldest first, with
   * libraft's callbacks, so that a failed write is seen on a follower too. */
  int (*io_append)(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[], unsigned n,
                   raft_io_append_cb cb);
  struct pending_append {
    struct raft_io_append *req;
    raft_io_append_cb cb;
  } * appends;
  uint32_t n_appends, cap_appends;
  /* raft_uv's send, wrapped: the entries' bytes in flight to each follower */
  int (*io_send)(struct raft_io *io, struct raft_io_send *req, const struct raft_message *message, raft_io_send_cb cb);
  struct pending_send {
    struct raft_io_send *req;
    raft_io_send_cb cb;
    uint64_t to;
    size_t bytes;
  } * sends;
  uint32_t n_sends, cap_sends;
  struct {
    uint64_t id;
    size_t bytes;
  } out[MAX_PEERS];
  uint32_t n_out;
  uint64_t sends_refused; /* appends refused for a follower past send_max (the status says it) */
  struct mqr__rgroup_s *next_wrapped;
  bool close_waits; /* closing, once the appends in flight are done (mqr__rgroup_close) */
  void (*close_cb)(void *arg);
  void *close_arg;
  void *owner;
};

static __thread mqr__rgroup_t *wrapped; /* the groups whose appends are wrapped (mqr__rgroup_open): the loop thread's */

/* ---- records into a raft_malloc'd buffer --------------------------------------------------- */

static int put_record(uint8_t **p, size_t *len, size_t *cap, mqr_journal_record_type_t type, uint64_t id,
                      const void *payload, size_t n) {
  if (n > MQR_JOURNAL_MAX_PAYLOAD) return MQR_ELIMIT;
  size_t need = (*len ? *len : MQR_JOURNAL_HEADER) + mqr_journal_record_size(n) + 7; /* (and padding) */
  if (need > *cap) {
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    uint8_t *q = raft_realloc(*p, c);
    if (q == NULL) return MQR_ENOMEM;
    *p = q, *cap = c;
  }
  if (*len == 0) {
    mqr_journal_header_write(*p, 0);
    *len = MQR_JOURNAL_HEADER;
  }
  *len += mqr_journal_record_write(*p + *len, 0, type, id, payload, n);
  return 0;
}

/* Zeros up to a multiple of 8 bytes: libraft's disk format needs an entry's length so
 * (raft_uv reads a segment back wrong otherwise); the reader skips them. */
static size_t padded(uint8_t *p, size_t len) {
  while (len % 8) p[len++] = 0;
  return len;
}

/* Each record of p[0..len) to the state machine: 0, or the first error. */
static int apply_records(mqr__rgroup_t *g, const uint8_t *p, size_t len) {
  uint64_t file_id = 1;
  if (len == 0) return 0; /* (an empty state's snapshot) */
  if (mqr_journal_header_read(p, len, &file_id, NULL) != 0 || file_id != 0) return MQR_EBADDATA;
  size_t off = MQR_JOURNAL_HEADER, next = 0;
  mqr_journal_record_t r;
  while (off < len) {
    if (mqr_journal_record_at(p, len, off, 0, &r, &next) != 1) { /* the end, padding (zeros), or a bad CRC */
      while (off < len && p[off] == 0) off++;
      if (off < len) return MQR_EBADDATA;
      break;
    }
    int rc = g->opt.fsm.apply(g->opt.fsm.arg, &r);
    if (rc) return rc;
    g->applied++;
    off = next;
  }
  return 0;
}

/* ---- the state machine, as libraft sees it ----------------------------------------------------- */

static void barrier_cb(struct raft_barrier *req, int status) {
  mqr__rgroup_t *g = req->data;
  g->barrier_on = false;
  if (status != 0 || g->closing || raft_state(g->r) != RAFT_LEADER) return; /* (the next look tries again) */
  g->leading = true;
  if (g->opt.fsm.leadership) g->opt.fsm.leadership(g->opt.fsm.arg, true);
}

static void stepped_down(struct raft_transfer *req) {
  mqr__rgroup_t *g = req->data;
  g->stepping_down = false; /* (the next look tries again while this node still leads) */
}

/* libraft 0.15 has no callback for a change of state: the group looks at each flush.
 * A new leader leads once a barrier of its term is applied, so that every entry an
 * earlier leader committed is in its state machine first. */
static void note_leadership(mqr__rgroup_t *g) {
  if (g->closing) return;
  bool leader = raft_state(g->r) == RAFT_LEADER;
  if (!leader) g->disk_failed = false; /* (it may lead again: its next write says whether it can) */
  if (g->leading && (!leader || g->disk_failed)) {
    g->leading = false;
    if (g->opt.fsm.leadership) g->opt.fsm.leadership(g->opt.fsm.arg, false);
  }
  if (leader && g->disk_failed && !g->stepping_down) {
    /* libraft 0.15 stays leader after its own write failed (0.16 steps down), and commits
     * nothing more: the most up-to-date follower is asked to take over */
    g->step_down.data = g;
    g->stepping_down = raft_transfer(g->r, &g->step_down, 0, stepped_down) == 0;
  } else if (leader && !g->leading && !g->barrier_on && !g->broken && !g->disk_failed) {
    g->barrier.data = g;
    g->barrier_on = raft_barrier(g->r, &g->barrier, barrier_cb) == 0;
  }
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result) {
  mqr__rgroup_t *g = fsm->data;
  *result = NULL;
  if (g->broken) return RAFT_SHUTDOWN;
  if (buf->len == 0) return 0; /* (a barrier) */
  int rc = apply_records(g, buf->base, buf->len);
  if (rc) { /* the state would no longer be the others': apply nothing more */
    g->broken = true;
    fprintf(stderr, "mqr cluster: node %llu cannot apply an entry (%s); it stops applying\n",
            (unsigned long long)g->opt.id, mqr_strerror(rc));
    return RAFT_SHUTDOWN;
  }
  return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n) {
  mqr__rgroup_t *g = fsm->data;
  mqr__rgroup_snap_t s = {NULL, 0, 0};
  int rc = g->opt.fsm.snapshot ? g->opt.fsm.snapshot(g->opt.fsm.arg, &s) : MQR_EINVAL;
  struct raft_buffer *b = rc == 0 ? raft_malloc(sizeof *b) : NULL;
  if (b == NULL) {
    raft_free(s.p);
    return RAFT_NOMEM;
  }
  if (s.p == NULL && (s.p = raft_malloc(1)) == NULL) { /* (an empty state is a snapshot too) */
    raft_free(b);
    return RAFT_NOMEM;
  }
  b->base = s.p, b->len = s.len ? padded(s.p, s.len) : 0;
  *bufs = b, *n = 1;
  return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf) {
  mqr__rgroup_t *g = fsm->data;
  g->opt.fsm.reset(g->opt.fsm.arg);
  int rc = apply_records(g, buf->base, buf->len);
  if (rc) {
    g->broken = true;
    fprintf(stderr, "mqr cluster: node %llu cannot restore a snapshot (%s)\n", (unsigned long long)g->opt.id,
            mqr_strerror(rc));
    return RAFT_CORRUPT;
  }
  raft_free(buf->base); /* (restored: the buffer is the state machine's to free) */
  return 0;
}

/* ---- making, starting, closing --------------------------------------------------------------- */

int mqr__rgroup_new(const mqr__rgroup_options_t *opt, mqr__rgroup_t **out, mqr_error_t *err) {
  if (opt == NULL || opt->id == 0 || opt->address == NULL || opt->fsm.apply == NULL || opt->fsm.reset == NULL)
    return mqr_error_set(err, MQR_EINVAL, "a Raft group needs an io, an id, an address and a state machine");
  mqr__rgroup_t *g = mqr_calloc(1, sizeof *g);
  if (g == NULL || (g->address = mqr_malloc(strlen(opt->address) + 1)) == NULL) {
    mqr_free(g);
    return mqr_error_set(err, MQR_ENOMEM, "out of memory for a Raft group");
  }
  strcpy(g->address, opt->address);
  g->opt = *opt;
  g->opt.address = g->address;
  if (g->opt.max_batch == 0 || g->opt.max_batch > BATCH_MAX) g->opt.max_batch = BATCH_MAX;
  g->seq_next = 1;
  g->fsm =
      (struct raft_fsm){.version = 1, .data = g, .apply = fsm_apply, .snapshot = fsm_snapshot, .restore = fsm_restore};
  *out = g;
  return 0;
}

struct raft_fsm *mqr__rgroup_fsm(mqr__rgroup_t *g) {
  return &g->fsm;
}

static void settings(mqr__rgroup_t *g) {
  const mqr__rgroup_options_t *opt = &g->opt;
  raft_set_election_timeout(g->r, opt->election_timeout_ms ? opt->election_timeout_ms : 1000);
  raft_set_heartbeat_timeout(g->r, opt->heartbeat_timeout_ms ? opt->heartbeat_timeout_ms : 100);
  raft_set_snapshot_threshold(g->r, opt->snapshot_threshold ? opt->snapshot_threshold : 1024);
  raft_set_snapshot_trailing(g->r, opt->snapshot_trailing ? opt->snapshot_trailing : 128);
  raft_set_pre_vote(g->r, true); /* a node cut off (or removed) does not bump the term when it comes back */
  g->r->data = g;
}

/* ---- this node's writes of its log ------------------------------------------------------------ */

/* A write of the log failed (status, libraft's), or one worked again after a failure. */
static void write_done(mqr__rgroup_t *g, int status) {
  if (status == 0) {
    g->write_failed = false;
    return;
  }
  if (status == RAFT_CANCELED || status == RAFT_SHUTDOWN || g->closing || g->write_failed) return;
  g->write_failed = true;
  if (raft_state(g->r) == RAFT_LEADER) return; /* (a leader's is its proposals': disk_failure) */
  char why[RAFT_ERRMSG_BUF_SIZE + 64];
  const char *io = g->r->io && g->r->io->errmsg[0] ? g->r->io->errmsg : raft_strerror(status);
  const char *num = strrchr(io, '-');
  char *end = NULL;
  long e = num && num > io && num[-1] == ' ' ? strtol(num + 1, &end, 10) : 0;
  if (e > 0 && end && *end == 0) /* (raft_uv says "write failed: -28": the errno's text too) */
    snprintf(why, sizeof why, "%.*s%s", (int)(num - io), io, strerror((int)e));
  else
    snprintf(why, sizeof why, "%s", io);
  if (g->opt.fsm.disk_failed) g->opt.fsm.disk_failed(g->opt.fsm.arg, why, false);
}

static void append_done(struct raft_io_append *req, int status) {
  for (mqr__rgroup_t *g = wrapped; g; g = g->next_wrapped)
    for (uint32_t i = 0; i < g->n_appends; i++) /* (nearly always the first: writes end in order) */
      if (g->appends[i].req == req) {
        raft_io_append_cb cb = g->appends[i].cb;
        memmove(&g->appends[i], &g->appends[i + 1], (g->n_appends - i - 1) * sizeof *g->appends);
        g->n_appends--;
        write_done(g, status);
        cb(req, status);
        return;
      }
}

static int append(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[], unsigned n,
                  raft_io_append_cb cb) {
  mqr__rgroup_t *g = ((struct raft *)io->data)->data;
  if (g->n_appends == g->cap_appends) {
    uint32_t cap = g->cap_appends ? 2 * g->cap_appends : 16;
    struct pending_append *a = mqr_realloc(g->appends, cap * sizeof *a);
    if (a == NULL) return RAFT_NOMEM;
    g->appends = a, g->cap_appends = cap;
  }
  g->appends[g->n_appends++] = (struct pending_append){req, cb};
  int rc = g->io_append(io, req, entries, n, append_done);
  if (rc) {
    g->n_appends--;
    write_done(g, rc);
  }
  return rc;
}

/* The bytes in flight to follower id (its counter, made when first seen; NULL past MAX_PEERS). */
static size_t *out_of(mqr__rgroup_t *g, uint64_t id) {
  for (uint32_t i = 0; i < g->n_out; i++)
    if (g->out[i].id == id) return &g->out[i].bytes;
  if (g->n_out == MAX_PEERS) return NULL;
  g->out[g->n_out].id = id, g->out[g->n_out].bytes = 0;
  return &g->out[g->n_out++].bytes;
}

static void send_done(struct raft_io_send *req, int status) {
  for (mqr__rgroup_t *g = wrapped; g; g = g->next_wrapped)
    for (uint32_t i = 0; i < g->n_sends; i++) /* (nearly always the first: sends end in order) */
      if (g->sends[i].req == req) {
        struct pending_send s = g->sends[i];
        memmove(&g->sends[i], &g->sends[i + 1], (g->n_sends - i - 1) * sizeof *g->sends);
        g->n_sends--;
        size_t *out = out_of(g, s.to);
        if (out) *out -= s.bytes;
        s.cb(req, status);
        return;
      }
}

static int send_wrapped(struct raft_io *io, struct raft_io_send *req, const struct raft_message *message,
                        raft_io_send_cb cb) {
  mqr__rgroup_t *g = ((struct raft *)io->data)->data;
  if (message->type != RAFT_IO_APPEND_ENTRIES || message->append_entries.n_entries == 0)
    return g->io_send(io, req, message, cb);
  size_t bytes = 0;
  for (unsigned i = 0; i < message->append_entries.n_entries; i++) bytes += message->append_entries.entries[i].buf.len;
  size_t *out = out_of(g, message->server_id);
  size_t max = g->opt.send_max ? g->opt.send_max : SEND_MAX;
  if (out && *out > 0 && *out + bytes > max) { /* (a first message goes whatever its size) */
    g->sends_refused++;
    return RAFT_NOCONNECTION;
  }
  if (g->n_sends == g->cap_sends) {
    uint32_t cap = g->cap_sends ? 2 * g->cap_sends : 64;
    struct pending_send *a = mqr_realloc(g->sends, cap * sizeof *a);
    if (a == NULL) return RAFT_NOMEM;
    g->sends = a, g->cap_sends = cap;
  }
  g->sends[g->n_sends++] = (struct pending_send){req, cb, message->server_id, out ? bytes : 0};
  if (out) *out += bytes;
  int rc = g->io_send(io, req, message, send_done);
  if (rc) {
    g->n_sends--;
    if (out) *out -= bytes;
  }
  return rc;
}

uint64_t mqr__rgroup_sends_refused(const mqr__rgroup_t *g) { return g->sends_refused; }

int mqr__rgroup_open(mqr__rgroup_t *g, struct raft_io *io, mqr_error_t *err) {
  mqr__rpool_keep(); /* (this is the loop's thread, where the group will run) */
  int rc = raft_init(&g->own, io, &g->fsm, g->opt.id, g->address);
  if (rc) /* (libraft 0.15 leaves its own message empty when its io failed: the io's says why) */
    return mqr_error_set(err, rc == RAFT_NOMEM ? MQR_ENOMEM : MQR_EIO, "Raft group (node %llu, %s): %s",
                         (unsigned long long)g->opt.id, g->address,
                         raft_errmsg(&g->own)[0] ? raft_errmsg(&g->own)
                         : io->errmsg[0]         ? io->errmsg
                                                 : raft_strerror(rc));
  g->r = &g->own;
  settings(g);
  g->io_append = io->append; /* (raft_init set io->data to g->r, whose data is g) */
  io->append = append;
  g->io_send = io->send;
  io->send = send_wrapped;
  g->next_wrapped = wrapped;
  wrapped = g;
  return 0;
}

void mqr__rgroup_adopt(mqr__rgroup_t *g, struct raft *r) {
  g->r = r;
  settings(g);
}

int mqr__rgroup_bootstrap(mqr__rgroup_t *g, unsigned n, const raft_id *ids, const char *const *addresses,
                          mqr_error_t *err) {
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  int rc = 0;
  for (unsigned i = 0; i < n && rc == 0; i++) rc = raft_configuration_add(&conf, ids[i], addresses[i], RAFT_VOTER);
  if (rc == 0) rc = raft_bootstrap(g->r, &conf);
  raft_configuration_close(&conf);
  if (rc == 0 || rc == RAFT_CANTBOOTSTRAP) return 0; /* (a restart: the configuration is in the log) */
  return mqr_error_set(err, rc == RAFT_NOMEM ? MQR_ENOMEM : MQR_EINVAL, "Raft group: bootstrap: %s", raft_strerror(rc));
}

int mqr__rgroup_start(mqr__rgroup_t *g, mqr_error_t *err) {
  int rc = raft_start(g->r);
  if (rc) /* (as at raft_init: the io's message when libraft has none) */
    return mqr_error_set(err, MQR_EIO, "Raft group (node %llu, %s): %s", (unsigned long long)g->opt.id, g->address,
                         raft_errmsg(g->r)[0]              ? raft_errmsg(g->r)
                         : g->r->io && g->r->io->errmsg[0] ? g->r->io->errmsg
                                                           : raft_strerror(rc));
  note_leadership(g);
  return 0;
}

static void tell(done_t *d, uint32_t n, int status) {
  for (uint32_t i = 0; i < n; i++)
    if (d[i].fn) d[i].fn(d[i].arg, status);
}

static void raft_closed(struct raft *r) {
  mqr__rgroup_t *g = r->data;
  /* (libraft answered every proposal in flight before this, with RAFT_SHUTDOWN) */
  if (g->close_cb) g->close_cb(g->close_arg);
}

void mqr__rgroup_close(mqr__rgroup_t *g, void (*cb)(void *arg), void *arg) {
  if (g->closing) return;
  g->closing = true;
  g->close_cb = cb, g->close_arg = arg;
  done_t *d = g->dones;
  uint32_t n = g->n_dones;
  g->n_dones = 0, g->batch_len = 0;
  tell(d, n, MQR_ECLOSED);
  if (g->leading && g->opt.fsm.leadership) g->opt.fsm.leadership(g->opt.fsm.arg, false);
  g->leading = false;
  /* A leader's writes of its log in flight end first: libraft 0.15, closing its raft_uv,
   * cancels them one by one, and each cancelled write of a leader truncates the log from
   * its first entry, which for the second is past the end already (its removeSuffix then
   * frees what is not there). They end within a disk write; nothing new is proposed
   * meanwhile (the group is closing); mqr__rgroup_close_step closes it then. */
  if (g->n_appends > 0 && g->r == &g->own && raft_state(g->r) == RAFT_LEADER) {
    g->close_waits = true;
    return;
  }
  raft_close(g->r, raft_closed); /* (it answers the proposals and the barrier in flight) */
}

void mqr__rgroup_close_step(mqr__rgroup_t *g) {
  if (!g->close_waits || g->n_appends > 0) return;
  g->close_waits = false;
  raft_close(g->r, raft_closed);
}

void mqr__rgroup_free(mqr__rgroup_t *g) {
  if (g == NULL) return;
  for (mqr__rgroup_t **w = &wrapped; *w; w = &(*w)->next_wrapped)
    if (*w == g) {
      *w = g->next_wrapped;
      break;
    }
  mqr_free(g->appends);
  mqr_free(g->sends);
  raft_free(g->batch);
  mqr__rpool_free(g->dones);
  mqr_free(g->address);
  mqr_free(g);
}

/* ---- proposing ------------------------------------------------------------------------------- */

/* Room for one more callback in d. */
static bool room_for_done(done_t **d, uint32_t n, uint32_t *cap) {
  if (n < *cap) return true;
  uint32_t c = *cap ? 2 * *cap : 16;
  done_t *nd = mqr__rpool_realloc(*d, c * sizeof *nd); /* (the pool's: a batch's list goes with its proposal) */
  if (nd == NULL) return false;
  *d = nd, *cap = c;
  return true;
}

/* A proposal failed with libraft's status: when this is not a matter of leadership,
 * shutting down or memory, this node's own write of the entry failed. */
static void disk_failure(mqr__rgroup_t *g, int status) {
  if (status == 0 || status == RAFT_NOTLEADER || status == RAFT_LEADERSHIPLOST || status == RAFT_SHUTDOWN ||
      status == RAFT_NOMEM || g->disk_failed || g->closing || raft_state(g->r) != RAFT_LEADER)
    return;
  g->disk_failed = true;
  if (g->opt.fsm.disk_failed) g->opt.fsm.disk_failed(g->opt.fsm.arg, raft_errmsg(g->r), true);
}

static void applied_cb(struct raft_apply *req, int status, void *result) {
  (void)result;
  proposal_t *p = req->data;
  mqr__rgroup_t *g = p->g;
  if (status == 0) g->committed++;
  if (g->last == p) g->last = NULL; /* (proposals are answered in log order) */
  g->seq_done = p->seq;
  disk_failure(g, status);
  tell(p->dones, p->n_dones,
       status == 0                ? 0
       : status == RAFT_SHUTDOWN  ? MQR_ECLOSED
       : status == RAFT_NOTLEADER ? MQR_ENOTLEADER
                                  : MQR_EINDOUBT); /* (leadership lost: it may yet commit) */
  mqr__rpool_free(p->dones);
  mqr__rpool_free(p);
  note_leadership(g);
  if (g->opt.fsm.answered && !g->closing) g->opt.fsm.answered(g->opt.fsm.arg);
}

uint32_t mqr__rgroup_seq(const mqr__rgroup_t *g) { return g->seq_next; }

bool mqr__rgroup_seq_done(const mqr__rgroup_t *g, uint32_t seq) { return (int32_t)(g->seq_done - seq) >= 0; }

int mqr__rgroup_flush(mqr__rgroup_t *g) {
  note_leadership(g);
  if (g->batch_len == 0) return 0;
  proposal_t *p = mqr__rpool_calloc(1, sizeof *p); /* (the pool's, as its list of callbacks) */
  struct raft_buffer buf = {g->batch, padded(g->batch, g->batch_len)};
  int rc = MQR_ENOMEM;
  if (p != NULL) {
    p->g = g;
    p->dones = g->dones, p->n_dones = g->n_dones, p->cap_dones = g->cap_dones;
    p->req.data = p;
    int r = raft_apply(g->r, &p->req, &buf, 1, applied_cb);
    rc = r == 0 ? 0 : r == RAFT_NOTLEADER ? MQR_ENOTLEADER : r == RAFT_NOMEM ? MQR_ENOMEM : MQR_EINDOUBT;
    disk_failure(g, r); /* (libraft 0.15 writes at once: a failed write is raft_apply's error) */
  }
  if (rc == 0) { /* libraft has the buffer, the proposal the callbacks */
    g->last = p;
    p->seq = g->seq_next;
    if (++g->seq_next == 0) g->seq_next = 1;
    g->batch = NULL, g->batch_len = g->batch_cap = 0;
    g->dones = NULL, g->n_dones = g->cap_dones = 0;
    return 0;
  }
  mqr__rpool_free(p);
  done_t *d = g->dones;
  uint32_t n = g->n_dones;
  g->dones = NULL, g->n_dones = g->cap_dones = 0;
  g->batch_len = 0;
  tell(d, n, rc);
  mqr__rpool_free(d);
  note_leadership(g);
  return rc;
}

int mqr__rgroup_append(mqr__rgroup_t *g, mqr_journal_record_type_t type, uint64_t id, const void *payload, size_t len,
                       mqr__rgroup_done_fn cb, void *arg) {
  if (g->closing || g->broken || !mqr__rgroup_leading(g)) return MQR_ENOTLEADER;
  if (len > MQR_JOURNAL_MAX_PAYLOAD) return MQR_ELIMIT;
  if (g->batch_len && g->batch_len + mqr_journal_record_size(len) > g->opt.max_batch) {
    int rc = mqr__rgroup_flush(g); /* (its callbacks were told) */
    if (rc == MQR_ENOTLEADER) return rc;
  }
  if (cb && !room_for_done(&g->dones, g->n_dones, &g->cap_dones)) return MQR_ENOMEM;
  int rc = put_record(&g->batch, &g->batch_len, &g->batch_cap, type, id, payload, len);
  if (rc) return rc;
  if (cb) g->dones[g->n_dones++] = (done_t){cb, arg};
  return 0;
}

int mqr__rgroup_after(mqr__rgroup_t *g, mqr__rgroup_done_fn cb, void *arg) {
  if (g->closing) return MQR_ECLOSED;
  /* the batch being gathered, else the newest proposal: either commits after every
   * record appended before (entries commit in log order) */
  if (g->batch_len) {
    if (!room_for_done(&g->dones, g->n_dones, &g->cap_dones)) return MQR_ENOMEM;
    g->dones[g->n_dones++] = (done_t){cb, arg};
    return 0;
  }
  proposal_t *p = g->last;
  if (p == NULL) return 1;
  if (!room_for_done(&p->dones, p->n_dones, &p->cap_dones)) return MQR_ENOMEM;
  p->dones[p->n_dones++] = (done_t){cb, arg};
  return 0;
}

int mqr__rgroup_snapshot_record(mqr__rgroup_snap_t *s, mqr_journal_record_type_t type, uint64_t id, const void *payload,
                                size_t len) {
  return put_record(&s->p, &s->len, &s->cap, type, id, payload, len);
}

/* ---- status ---------------------------------------------------------------------------------- */

bool mqr__rgroup_leading(const mqr__rgroup_t *g) {
  return g->leading && raft_state((struct raft *)g->r) == RAFT_LEADER;
}

raft_id mqr__rgroup_leader(const mqr__rgroup_t *g, const char **address) {
  raft_id id = 0;
  const char *a = NULL;
  raft_leader((struct raft *)g->r, &id, &a);
  if (address) *address = a;
  return id;
}

struct raft *mqr__rgroup_raft(mqr__rgroup_t *g) {
  return g->r;
}
uint64_t mqr__rgroup_applied(const mqr__rgroup_t *g) { return g->applied; }
uint64_t mqr__rgroup_committed(const mqr__rgroup_t *g) { return g->committed; }

void mqr__rgroup_set_owner(mqr__rgroup_t *g, void *owner) { g->owner = owner; }
void *mqr__rgroup_owner(const mqr__rgroup_t *g) { return g->owner; }

typedef struct {
  struct raft_transfer req;
  mqr__rgroup_t *g;
  uint64_t to;
  void (*cb)(void *arg, bool ok, uint64_t leader);
  void *arg;
} transfer_t;

static void transferred(struct raft_transfer *req) {
  transfer_t *t = req->data;
  raft_id leader = 0;
  const char *address = NULL;
  raft_leader(t->g->r, &leader, &address);
  if (t->cb) t->cb(t->arg, leader != 0 && (t->to == 0 ? leader != t->g->opt.id : leader == t->to), leader);
  mqr_free(t);
}

int mqr__rgroup_transfer(mqr__rgroup_t *g, uint64_t to, void (*cb)(void *arg, bool ok, uint64_t leader), void *arg) {
  if (!mqr__rgroup_leading(g)) return MQR_ENOTLEADER;
  transfer_t *t = mqr_calloc(1, sizeof *t);
  if (t == NULL) return MQR_ENOMEM;
  *t = (transfer_t){.g = g, .to = to, .cb = cb, .arg = arg};
  t->req.data = t;
  int rc = raft_transfer(g->r, &t->req, to, transferred);
  if (rc) {
    mqr_free(t);
    return rc == RAFT_NOMEM ? MQR_ENOMEM : MQR_EINVAL;
  }
  return 0;
}

/* ---- membership ------------------------------------------------------------------------------- */

typedef struct {
  struct raft_change req;
  mqr__rgroup_t *g;
  uint64_t id;
  bool promote; /* an add: its assignment as voter follows */
  void (*cb)(void *arg, int status);
  void *arg;
} change_t;

static int from_raft(int rc) {
  return rc == 0                                             ? 0
         : rc == RAFT_NOMEM                                  ? MQR_ENOMEM
         : rc == RAFT_NOTLEADER || rc == RAFT_LEADERSHIPLOST ? MQR_ENOTLEADER
                                                             : MQR_EINVAL;
}

static void changed(struct raft_change *req, int status) {
  change_t *ch = req->data;
  if (status == 0 && ch->promote) { /* added as a spare: now a voter (libraft catches it up first) */
    ch->promote = false;
    int rc = raft_assign(ch->g->r, &ch->req, ch->id, RAFT_VOTER, changed);
    if (rc == 0) return;
    status = rc;
  }
  if (ch->cb) ch->cb(ch->arg, from_raft(status));
  mqr_free(ch);
}

static int change(mqr__rgroup_t *g, uint64_t id, const char *address, void (*cb)(void *arg, int status), void *arg) {
  if (!mqr__rgroup_leading(g)) return MQR_ENOTLEADER;
  change_t *ch = mqr_calloc(1, sizeof *ch);
  if (ch == NULL) return MQR_ENOMEM;
  *ch = (change_t){.g = g, .id = id, .promote = address != NULL, .cb = cb, .arg = arg};
  ch->req.data = ch;
  int rc = address ? raft_add(g->r, &ch->req, id, address, changed) : raft_remove(g->r, &ch->req, id, changed);
  if (rc) mqr_free(ch);
  return from_raft(rc);
}

int mqr__rgroup_add(mqr__rgroup_t *g, uint64_t id, const char *address, void (*cb)(void *arg, int status), void *arg) {
  return change(g, id, address, cb, arg);
}

int mqr__rgroup_remove(mqr__rgroup_t *g, uint64_t id, void (*cb)(void *arg, int status), void *arg) {
  return change(g, id, NULL, cb, arg);
}
