/* Journal records: writing them, and reading a file back to where its valid data ends
 * (mqr/journal.h has the format). */
#include <stdio.h>
#include <string.h>

#include "mqr/journal.h"

static const uint8_t magic[4] = {'M', 'Q', 'R', 'J'};

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

void mqr_journal_header_write(uint8_t *out, uint64_t file_id) {
  memcpy(out, magic, 4);
  out[4] = (uint8_t)MQR_JOURNAL_VERSION;
  out[5] = (uint8_t)(MQR_JOURNAL_VERSION >> 8);
  out[6] = out[7] = 0;
  put64(out + 8, file_id);
  put32(out + 16, 0);
  put32(out + 20, mqr_crc32c(0, out, 20));
}

size_t mqr_journal_record_size(size_t len) { return MQR_JOURNAL_RECORD_HEAD + MQR_JOURNAL_RECORD_FIXED + len; }

size_t mqr_journal_record_write(uint8_t *out, uint64_t file_id, mqr_journal_record_type_t type, uint64_t id,
                                const void *payload, size_t len) {
  if (len > MQR_JOURNAL_MAX_PAYLOAD) return 0;
  uint8_t *body = out + MQR_JOURNAL_RECORD_HEAD;
  put64(body, file_id);
  body[8] = (uint8_t)type;
  put64(body + 9, id);
  if (len) memcpy(body + MQR_JOURNAL_RECORD_FIXED, payload, len);
  size_t n = MQR_JOURNAL_RECORD_FIXED + len;
  put32(out, (uint32_t)n);
  put32(out + 4, mqr_crc32c(0, body, n));
  return MQR_JOURNAL_RECORD_HEAD + n;
}

void mqr_journal_end_write(uint8_t *out) { memset(out, 0, MQR_JOURNAL_END); }

typedef enum { REC_OK, REC_END, REC_STALE, REC_BAD } rec_t;

/* What lies at off: a valid record of this use (its size in *size), the end marker, a
 * valid record of an earlier use, or something bad (cut, or a failing CRC). */
static rec_t look(const uint8_t *file, size_t len, size_t off, uint64_t file_id, size_t *size) {
  if (len - off < MQR_JOURNAL_RECORD_HEAD) return len == off ? REC_END : REC_BAD;
  uint32_t n = get32(file + off), crc = get32(file + off + 4);
  if (n == 0 && crc == 0) return REC_END;
  if (n < MQR_JOURNAL_RECORD_FIXED || n > MQR_JOURNAL_RECORD_FIXED + MQR_JOURNAL_MAX_PAYLOAD ||
      n > len - off - MQR_JOURNAL_RECORD_HEAD)
    return REC_BAD;
  const uint8_t *body = file + off + MQR_JOURNAL_RECORD_HEAD;
  if (mqr_crc32c(0, body, n) != crc) return REC_BAD;
  *size = MQR_JOURNAL_RECORD_HEAD + n;
  return get64(body) == file_id ? REC_OK : REC_STALE;
}

/* After a bad record at off: does a valid BATCH record of this use follow, anywhere after
 * it? Then a later write followed the bad one, which was therefore synced: the damage is
 * in the middle. Without one, the bad record is in the last write, which a crash cut or
 * left with holes (disks keep the sectors of an unsynced write in no particular order),
 * and whatever valid records follow it were never synced either. Records are not aligned,
 * so every later offset is tried; only a file that is damaged pays for it. */
static bool valid_follows(const uint8_t *file, size_t len, size_t off, uint64_t file_id) {
  for (size_t at = off + 1; at + MQR_JOURNAL_RECORD_HEAD + MQR_JOURNAL_RECORD_FIXED <= len; at++) {
    size_t size;
    /* The file id and type first: only where they stand is a CRC worth computing. */
    const uint8_t *body = file + at + MQR_JOURNAL_RECORD_HEAD;
    if (get64(body) == file_id && body[8] == MQR_JOURNAL_BATCH && look(file, len, at, file_id, &size) == REC_OK)
      return true;
  }
  return false;
}

int mqr_journal_header_read(const uint8_t *file, size_t len, uint64_t *file_id, mqr_error_t *err) {
  if (len < MQR_JOURNAL_HEADER || memcmp(file, magic, 4) != 0)
    return mqr_error_set(err, MQR_EBADDATA, "not a journal file (no MQRJ header)");
  if (get32(file + 20) != mqr_crc32c(0, file, 20))
    return mqr_error_set(err, MQR_EBADDATA, "the journal file's header fails its CRC");
  unsigned version = (unsigned)file[4] | (unsigned)file[5] << 8;
  if (version != MQR_JOURNAL_VERSION)
    return mqr_error_set(err, MQR_EBADDATA, "journal format version %u; this build reads version %u", version,
                         MQR_JOURNAL_VERSION);
  *file_id = get64(file + 8);
  return 0;
}

int mqr_journal_record_at(const uint8_t *file, size_t len, size_t off, uint64_t file_id, mqr_journal_record_t *out,
                          size_t *next) {
  size_t size = 0;
  for (;;) {
    if (off < MQR_JOURNAL_HEADER || off > len || look(file, len, off, file_id, &size) != REC_OK) return 0;
    if (file[off + MQR_JOURNAL_RECORD_HEAD + 8] != MQR_JOURNAL_BATCH) break;
    off += size; /* the writer's own: skipped */
  }
  const uint8_t *body = file + off + MQR_JOURNAL_RECORD_HEAD;
  *out = (mqr_journal_record_t){(mqr_journal_record_type_t)body[8], get64(body + 9), body + MQR_JOURNAL_RECORD_FIXED,
                                size - MQR_JOURNAL_RECORD_HEAD - MQR_JOURNAL_RECORD_FIXED, off};
  *next = off + size;
  return 1;
}

int mqr_journal_scan(const uint8_t *file, size_t len, mqr_journal_record_fn fn, void *ctx, mqr_journal_scan_t *out,
                     mqr_error_t *err) {
  memset(out, 0, sizeof *out);
  int rc = mqr_journal_header_read(file, len, &out->file_id, err);
  if (rc) return rc;
  size_t off = MQR_JOURNAL_HEADER;
  for (;;) {
    size_t size = 0;
    rec_t what = look(file, len, off, out->file_id, &size);
    if (what == REC_END || what == REC_STALE) {
      out->status = MQR_JOURNAL_CLEAN;
      break;
    }
    if (what == REC_BAD) {
      out->status = valid_follows(file, len, off, out->file_id) ? MQR_JOURNAL_DAMAGED : MQR_JOURNAL_TORN;
      out->bad_offset = off;
      break;
    }
    const uint8_t *body = file + off + MQR_JOURNAL_RECORD_HEAD;
    mqr_journal_record_t r = {(mqr_journal_record_type_t)body[8], get64(body + 9), body + MQR_JOURNAL_RECORD_FIXED,
                              size - MQR_JOURNAL_RECORD_HEAD - MQR_JOURNAL_RECORD_FIXED, off};
    if (r.type == MQR_JOURNAL_BATCH) { /* the writer's own */
      off += size;
      continue;
    }
    out->records++;
    if (fn) {
      rc = fn(ctx, &r);
      if (rc) {
        out->end = off + size;
        return rc;
      }
    }
    off += size;
  }
  out->end = off;
  return 0;
}
