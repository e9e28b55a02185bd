/* Journal files: CRC-32C against the published vectors (RFC 3720 B.4 and the common
 * check value), records written and read back, and every way a crash or a bad disk can
 * leave a file: cut at every byte of its last records, every byte of a record flipped,
 * records of an earlier use of the file after this use's end. A scan must give exactly
 * the valid records before the first bad one, and say whether the damage is a torn tail
 * or in the middle. */
#include "mqr/journal.h"
#include "testutil.h"

uint32_t mqr__crc32c_soft(uint32_t crc, const void *p, size_t n);

static void test_crc32c_vectors(void **state) {
  (void)state;
  assert_int_equal(mqr_crc32c(0, "123456789", 9), 0xE3069283u);
  uint8_t b[32];
  memset(b, 0, sizeof b);
  assert_int_equal(mqr_crc32c(0, b, 32), 0x8A9136AAu); /* RFC 3720 B.4: 32 bytes of zeros */
  memset(b, 0xff, sizeof b);
  assert_int_equal(mqr_crc32c(0, b, 32), 0x62A8AB43u); /* 32 bytes of ones */
  for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
  assert_int_equal(mqr_crc32c(0, b, 32), 0x46DD794Eu); /* incrementing */
  for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
  assert_int_equal(mqr_crc32c(0, b, 32), 0x113FDB5Cu); /* decrementing */
  assert_int_equal(mqr_crc32c(0, NULL, 0), 0);
  /* In pieces as in one, and the hardware path (when there is one) as the tables. */
  static uint8_t big[4099];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)rnd(256);
  for (size_t start = 0; start < 9; start++)
    for (size_t cut = start; cut < sizeof big; cut += 97) {
      uint32_t whole = mqr_crc32c(0, big + start, sizeof big - start);
      assert_int_equal(mqr_crc32c(mqr_crc32c(0, big + start, cut - start), big + cut, sizeof big - cut), whole);
      assert_int_equal(mqr__crc32c_soft(0, big + start, sizeof big - start), whole);
    }
}

/* A file of n records of random types and payloads (0 to 300 bytes), ids 1..n, then the
 * end marker; offs[i] is record i's offset, offs[n] the marker's. */
typedef struct {
  uint8_t data[1 << 16];
  size_t len, offs[64], ends[64];
  int n;
} file_t;

static void make_file(file_t *f, uint64_t file_id, int n) {
  mqr_journal_header_write(f->data, file_id);
  size_t off = MQR_JOURNAL_HEADER;
  uint8_t payload[300];
  for (int i = 0; i < n; i++) { /* each record its own write: a BATCH record, the record */
    size_t len = rnd(301);
    for (size_t k = 0; k < len; k++) payload[k] = (uint8_t)rnd(256);
    off += mqr_journal_record_write(f->data + off, file_id, MQR_JOURNAL_BATCH, (uint64_t)i + 1, NULL, 0);
    f->offs[i] = off;
    off += mqr_journal_record_write(f->data + off, file_id, (mqr_journal_record_type_t)(1 + rnd(5)), (uint64_t)i + 1,
                                    payload, len);
    f->ends[i] = off;
  }
  f->offs[n] = off;
  mqr_journal_end_write(f->data + off);
  f->len = off + MQR_JOURNAL_END;
  f->n = n;
}

typedef struct {
  uint64_t ids[64];
  size_t offs[64];
  int n;
} seen_t;

static int collect(void *ctx, const mqr_journal_record_t *r) {
  seen_t *s = ctx;
  s->ids[s->n] = r->id;
  s->offs[s->n++] = r->offset;
  return 0;
}

/* Scans data[0..len); the records seen must be ids 1..want, at f's offsets. */
static mqr_journal_scan_t scan(const file_t *f, const uint8_t *data, size_t len, int want) {
  seen_t s = {.n = 0};
  mqr_journal_scan_t out;
  mqr_error_t err;
  if (mqr_journal_scan(data, len, collect, &s, &out, &err) != 0) fail_msg("scan: %s", err.message);
  if (s.n != want) fail_msg("len %zu: %d records, expected %d", len, s.n, want);
  for (int i = 0; i < want; i++) {
    assert_int_equal(s.ids[i], (uint64_t)i + 1);
    assert_int_equal(s.offs[i], f->offs[i]);
  }
  assert_int_equal(out.records, (uint64_t)want);
  return out;
}

static void test_records_read_back(void **state) {
  (void)state;
  static file_t f;
  make_file(&f, 42, 40);
  mqr_journal_scan_t out = scan(&f, f.data, f.len, 40);
  assert_int_equal(out.status, MQR_JOURNAL_CLEAN);
  assert_int_equal(out.file_id, 42);
  assert_int_equal(out.end, f.ends[39]);
  /* Payloads and types come back as written. */
  uint8_t one[MQR_JOURNAL_HEADER + 64];
  mqr_journal_header_write(one, 7);
  size_t n = mqr_journal_record_write(one + MQR_JOURNAL_HEADER, 7, MQR_JOURNAL_UPDATE, 99, "abc", 3);
  assert_int_equal(n, mqr_journal_record_size(3));
  mqr_journal_end_write(one + MQR_JOURNAL_HEADER + n);
  seen_t s = {.n = 0};
  assert_int_equal(mqr_journal_scan(one, MQR_JOURNAL_HEADER + n + MQR_JOURNAL_END, collect, &s, &out, NULL), 0);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.ids[0], 99);
  /* Not a journal, a bad header, a newer version: refused. */
  mqr_error_t err;
  assert_int_equal(mqr_journal_scan((const uint8_t *)"hello", 5, NULL, NULL, &out, &err), MQR_EBADDATA);
  uint8_t h[MQR_JOURNAL_HEADER];
  mqr_journal_header_write(h, 1);
  h[9] ^= 1;
  assert_int_equal(mqr_journal_scan(h, sizeof h, NULL, NULL, &out, &err), MQR_EBADDATA);
  mqr_journal_header_write(h, 1);
  h[4] = MQR_JOURNAL_VERSION + 1; /* a later format, with its header's CRC right */
  uint32_t crc = mqr_crc32c(0, h, 20);
  for (int i = 0; i < 4; i++) h[20 + i] = (uint8_t)(crc >> (8 * i));
  assert_int_equal(mqr_journal_scan(h, sizeof h, NULL, NULL, &out, &err), MQR_EBADDATA);
  assert_non_null(strstr(err.message, "version 3"));
}

/* A crash cuts the file anywhere in its last records: the scan gives every record that is
 * whole, and calls what follows a torn tail (or clean, cut exactly between records). */
static void test_cut_at_every_byte(void **state) {
  (void)state;
  static file_t f;
  make_file(&f, 5, 12);
  for (size_t len = f.offs[8]; len <= f.len; len++) {
    int whole = 0;
    while (whole < f.n && f.ends[whole] <= len) whole++;
    mqr_journal_scan_t out = scan(&f, f.data, len, whole);
    /* Cut right after a record, or right after the BATCH record of the next write: clean. */
    size_t after = whole ? f.ends[whole - 1] : MQR_JOURNAL_HEADER;
    bool at_boundary = len == after || len == f.offs[whole] || len == f.len;
    assert_int_equal(out.status, at_boundary ? MQR_JOURNAL_CLEAN : MQR_JOURNAL_TORN);
    if (at_boundary)
      assert_true(out.end == after || out.end == f.offs[whole] || len == f.len);
    else
      assert_true(out.end == after || out.end == f.offs[whole]);
  }
}

/* Every byte of a record flipped: the last record is a torn tail; any other, with a later
 * write (its BATCH record) after it, is damage in the middle, at that record. */
static void test_flips(void **state) {
  (void)state;
  static file_t f;
  static uint8_t copy[1 << 16];
  make_file(&f, 9, 10);
  for (int victim = 6; victim < f.n; victim++)
    for (size_t at = f.offs[victim]; at < f.ends[victim]; at++) {
      memcpy(copy, f.data, f.len);
      copy[at] ^= (uint8_t)(1u << rnd(8));
      mqr_journal_scan_t out = scan(&f, copy, f.len, victim);
      assert_int_equal(out.bad_offset, f.offs[victim]);
      assert_int_equal(out.end, f.offs[victim]);
      assert_int_equal(out.status, victim == f.n - 1 ? MQR_JOURNAL_TORN : MQR_JOURNAL_DAMAGED);
      /* The same bad record, with only its own write's records after it: torn. */
      mqr_journal_scan_t cut = scan(&f, copy, f.ends[victim], victim);
      assert_int_equal(cut.status, MQR_JOURNAL_TORN);
    }
}

/* A reused file: this use's records, its end marker, then an earlier use's records. The
 * scan stops at the marker; with the marker overwritten by a record of the earlier use
 * (as a crash cannot leave it, but a bug could), it still stops there. */
static void test_reused_file(void **state) {
  (void)state;
  static file_t old, now;
  make_file(&old, 1, 30);
  make_file(&now, 2, 5);
  static uint8_t data[1 << 16];
  memcpy(data, old.data, old.len);
  memcpy(data, now.data, now.len); /* header and 5 records of use 2, its marker, then use 1's tail */
  mqr_journal_scan_t out = scan(&now, data, old.len, 5);
  assert_int_equal(out.status, MQR_JOURNAL_CLEAN);
  assert_int_equal(out.end, now.offs[5]);
  /* Use 1's record 10 starts somewhere after; put one of use 1 right after use 2's data. */
  static uint8_t data2[1 << 16];
  memcpy(data2, now.data, now.offs[5]);
  size_t off = now.offs[5];
  off += mqr_journal_record_write(data2 + off, 1, MQR_JOURNAL_ADD, 777, "stale", 5);
  out = scan(&now, data2, off, 5);
  assert_int_equal(out.status, MQR_JOURNAL_CLEAN);
  assert_int_equal(out.end, now.offs[5]);
}

static int stop_at_3(void *ctx, const mqr_journal_record_t *r) {
  (void)ctx;
  return r->id == 3 ? MQR_EINVAL : 0;
}

static void test_callback_stops(void **state) {
  (void)state;
  static file_t f;
  make_file(&f, 3, 6);
  mqr_journal_scan_t out;
  assert_int_equal(mqr_journal_scan(f.data, f.len, stop_at_3, NULL, &out, NULL), MQR_EINVAL);
  assert_int_equal(out.end, f.ends[2]);
  uint8_t big[8];
  assert_int_equal(mqr_journal_record_write(big, 1, MQR_JOURNAL_ADD, 1, NULL, MQR_JOURNAL_MAX_PAYLOAD + 1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c_vectors),    cmocka_unit_test(test_records_read_back),
      cmocka_unit_test(test_cut_at_every_byte), cmocka_unit_test(test_flips),
      cmocka_unit_test(test_reused_file),       cmocka_unit_test(test_callback_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
