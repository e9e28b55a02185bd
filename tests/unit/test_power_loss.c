/* Power losses under a durable load, in-process, through an I/O layer that undoes what
 * was not synced. */
#include "durable_fx.h"

/* ---- power loss ------------------------------------------------------------------------- */

/* An I/O layer that remembers what each write replaced until an fdatasync covers it;
 * pl_crash() puts those bytes back (the power went: what was not synced is gone), and
 * every write and sync after it fails, as on a machine that is off: the writer does
 * nothing more (no file released after the moment of the crash). */
typedef struct {
  int fd;
  off_t off;
  size_t len;
  uint8_t *old;
} undo_t;

static pthread_mutex_t pl_mu = PTHREAD_MUTEX_INITIALIZER;
static undo_t pl_undo[4096];
static int pl_n;
static bool pl_crashed;

static ssize_t pl_pwrite(int fd, const void *buf, size_t n, off_t off) {
  pthread_mutex_lock(&pl_mu);
  if (pl_crashed) {
    pthread_mutex_unlock(&pl_mu);
    errno = EIO;
    return -1;
  }
  if (pl_n == 4096) abort();
  uint8_t *old = malloc(n);
  ssize_t k = pread(fd, old, n, off);
  if (k < (ssize_t)n) memset(old + (k < 0 ? 0 : k), 0, n - (size_t)(k < 0 ? 0 : k));
  pl_undo[pl_n++] = (undo_t){fd, off, n, old};
  ssize_t w = pwrite(fd, buf, n, off);
  pthread_mutex_unlock(&pl_mu);
  return w;
}

static int pl_fdatasync(int fd) {
  pthread_mutex_lock(&pl_mu);
  int rc = -1;
  errno = EIO;
  if (!pl_crashed) {
    rc = fdatasync(fd);
    int k = 0;
    for (int i = 0; i < pl_n; i++) {
      if (pl_undo[i].fd == fd)
        free(pl_undo[i].old);
      else
        pl_undo[k++] = pl_undo[i];
    }
    pl_n = k;
  }
  pthread_mutex_unlock(&pl_mu);
  return rc;
}

/* Whether the disk kept a 512-byte sector of an unsynced write (partial losses). */
static bool pl_kept(int fd, off_t sector, unsigned seed) {
  uint64_t h = ((uint64_t)(unsigned)fd * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)sector * 0xC2B2AE3D27D4EB4Full) ^ seed;
  h ^= h >> 29;
  return (h * 0xBF58476D1CE4E5B9ull) >> 63;
}

/* partial: the disk kept some sectors of the unsynced writes and lost others, in no
 * order (what a real disk may do); else every unsynced byte is lost. */
static void pl_crash(bool partial, unsigned seed) {
  pthread_mutex_lock(&pl_mu);
  pl_crashed = true;
  for (int i = pl_n - 1; i >= 0; i--) {
    const undo_t *u = &pl_undo[i];
    for (off_t at = u->off; at < u->off + (off_t)u->len;) {
      off_t end = (at / 512 + 1) * 512;
      if (end > u->off + (off_t)u->len) end = u->off + (off_t)u->len;
      if (!partial || !pl_kept(u->fd, at / 512, seed))
        if (pwrite(u->fd, u->old + (at - u->off), (size_t)(end - at), at) != end - at) abort();
      at = end;
    }
    free(u->old);
  }
  pl_n = 0;
  pthread_mutex_unlock(&pl_mu);
}

static const mqr_journal_io_t pl_io = {pl_pwrite, pl_fdatasync};

enum { PL_MAX = 200000 };
static struct {
  bool ok[PL_MAX];         /* answered OK before the power went */
  int64_t ack_at[PL_MAX];  /* the ack's place in the order of acks, or -1 */
  int64_t acks, committed; /* acks made; those known synced */
  int64_t acks_at_send[PL_MAX];
  int sent, answered;
  bool crashed;
} pl;

/* The index in a body "m<i>" (bodies are views, not strings). */
static int body_index(mqr_str_t b) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", (int)(b.len < 31 ? b.len : 31), b.ptr);
  return atoi(buf + 1);
}

static void pl_answer(void *arg, int status, const mqr_broker_receipt_t *r, const mqr_error_t *err) {
  (void)r, (void)err;
  int i = (int)(intptr_t)arg;
  pl.answered++;
  if (pl.crashed || status != 0) return;
  pl.ok[i] = true;
  if (pl.acks_at_send[i] > pl.committed) pl.committed = pl.acks_at_send[i]; /* the journal is one ordered log */
}

static void pl_message(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)arg;
  int i = body_index(m->body);
  if (!pl.crashed && i % 3 != 0) { /* two in three are acknowledged */
    pl.ack_at[i] = pl.acks++;
    mqr_broker_ack(c, m->delivery, false);
  }
  mqr_broker_credit(c, 1);
}

static struct {
  bool present[PL_MAX];
  int last, order_errors, n;
} chk;

static void pl_check_message(mqr_broker_consumer_t *c, const mqr_frame_message_t *m, void *arg) {
  (void)c, (void)arg;
  int i = body_index(m->body);
  if (i >= 0 && i < PL_MAX) chk.present[i] = true;
  if (i <= chk.last && chk.order_errors++ == 0)
    print_message("m%d (message %lld, delivery count %d) after m%d\n", i, (long long)m->message_id, m->delivery_count,
                  chk.last);
  chk.last = i;
  chk.n++;
}

/* Power losses at random moments of a durable load, in-process: the journal's unsynced
 * writes are undone, as the disk would lose them (every other round, only some of their
 * sectors, as a disk may keep a write with holes: the broker must still start, cutting the
 * torn write). After each, every message answered OK is there unless its ack was known
 * synced, no message whose ack was known synced is, and the queue is in send order. */
static void test_power_loss(void **state) {
  (void)state;
  fresh_dir();
  memset(&pl, 0, sizeof pl);
  for (int i = 0; i < PL_MAX; i++) pl.ack_at[i] = -1;
  unsigned seed = getenv("MQR_SEED") ? (unsigned)atoi(getenv("MQR_SEED")) : (unsigned)time(NULL);
  print_message("seed %u\n", seed);
  char body[32];
  long must = 0, checked_acks = 0;
  for (int round = 0; round < 24; round++) {
    fx_t f;
    fx_config(&f);
    uv_loop_init(&f.loop);
    mqr_broker_options_t opt = {.config = f.cfg, .journal_io = &pl_io};
    mqr_error_t err;
    pl_crashed = false;
    pl.crashed = false;
    if (mqr_broker_create(&f.loop, &opt, &f.b, &err) != 0) fail_msg("round %d: %s", round, err.message);
    mqr_broker_consumer_t *c;
    if (mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 64, pl_message, NULL, &c,
                             NULL, &err))
      fail_msg("%s", err.message);
    int until = pl.sent + 2000 + (int)(rand_r(&seed) % 6000);
    while (pl.sent < until && pl.sent < PL_MAX) {
      while (pl.sent < until && pl.sent - pl.answered < 512) {
        int i = pl.sent++;
        snprintf(body, sizeof body, "m%d", i);
        pl.acks_at_send[i] = pl.acks;
        mqr_broker_message_t m = {
            MQR_STR("q"), MQR_ROUTING_NONE, true, MQR_STR(""), MQR_PRIORITY_DEFAULT, 0, 0, {"", 0}, NULL, NULL, 0,
            mqr_str(body)};
        mqr_broker_send_async(f.b, &m, pl_answer, (void *)(intptr_t)i);
      }
      uv_run(&f.loop, UV_RUN_ONCE);
    }
    pl_crash(round % 2 == 1, seed + (unsigned)round); /* the power goes: nothing more reaches the disk */
    pl.crashed = true;
    fx_stop(&f);
    mqr_config_destroy(f.cfg);
    /* Back, on the files as the disk kept them. */
    fx_config(&f);
    if (fx_create(&f, &err) != 0) fail_msg("round %d: %s", round, err.message);
    memset(&chk, 0, sizeof chk);
    chk.last = -1;
    mqr_broker_consumer_t *k;
    if (mqr_broker_subscribe(f.b, MQR_STR("q"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), 1000000, pl_check_message,
                             NULL, &k, NULL, &err))
      fail_msg("%s", err.message);
    uv_run(&f.loop, UV_RUN_NOWAIT);
    if (chk.order_errors) fail_msg("round %d: %d out of order", round, chk.order_errors);
    for (int i = 0; i < pl.sent; i++) {
      bool acked = pl.ack_at[i] >= 0 && pl.ack_at[i] < pl.committed;
      if (acked && chk.present[i]) fail_msg("round %d: m%d is back though its ack was synced", round, i);
      /* Never acknowledged and answered OK: it must be there. (An ack not known synced may
       * have been: then the message may be gone.) */
      bool kept = pl.ok[i] && pl.ack_at[i] < 0;
      if (kept && !chk.present[i]) fail_msg("round %d: m%d was answered OK and is lost", round, i);
      must += kept;
      checked_acks += acked;
    }
    mqr_broker_unsubscribe(k); /* they stay for the next round */
    fx_stop(&f);
    mqr_config_destroy(f.cfg);
  }
  assert_true(must > 1000);
  assert_true(checked_acks > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_power_loss),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 || getenv("MQR_KEEP") == NULL) fresh_dir();
  return rc;
}
