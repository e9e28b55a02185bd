/* mqr journal files: the on-disk format of the durable store, and reading one back.
 *
 * A journal file is pre-allocated and reused, as Artemis's are. It starts with a header
 * (MQR_JOURNAL_HEADER bytes: the magic "MQRJ", the format version, the file's id for this
 * use, a CRC-32C of the header), then records one after the other, then an end marker:
 *
 *   record  u32 length of what follows the CRC (MQR_JOURNAL_RECORD_FIXED + payload)
 *           u32 CRC-32C (Castagnoli) of what follows it
 *           u64 the file id of the use that wrote it
 *           u8  type (mqr_journal_record_type_t), u64 the record's id, the payload
 *   end     8 zero bytes, written after every batch of records
 *
 * Every integer is little-endian. The file id in each record tells a record of this use
 * from one left by an earlier use of the same file, which reads as the end of the data.
 * Each write of a batch of records begins with a BATCH record. A crash can leave the last
 * write cut, or with holes where the disk did not keep some of its sectors: its records
 * then fail their CRC or run past the file, and reading stops at the first bad one (a torn
 * tail). A bad record with a valid BATCH record of this use after it lies in a write that
 * was followed by another, so it was synced: that is damage in the middle, which recovery
 * must not skip silently.
 *
 * Nothing here allocates or does I/O: the caller hands whole files in memory (mapped or
 * read). Any thread. */
#ifndef MQR_JOURNAL_H
#define MQR_JOURNAL_H

#include "mqr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MQR_JOURNAL_VERSION 3 /* 2: a BATCH record begins each write; 3: messages with headers and typed properties */
#define MQR_JOURNAL_HEADER 24 /* bytes of the file header */
#define MQR_JOURNAL_RECORD_HEAD 8   /* length and CRC */
#define MQR_JOURNAL_RECORD_FIXED 17 /* file id, type and record id, before the payload */
#define MQR_JOURNAL_END 8           /* the end marker */
#define MQR_JOURNAL_MAX_PAYLOAD (64u << 20)

typedef enum {
  MQR_JOURNAL_ADD = 1,      /* a message: its stored bytes */
  MQR_JOURNAL_REF = 2,      /* a message put on a queue */
  MQR_JOURNAL_DELETE = 3,   /* a message acknowledged or dropped from a queue */
  MQR_JOURNAL_UPDATE = 4,   /* a message's delivery count (and later its schedule) */
  MQR_JOURNAL_TOPOLOGY = 5, /* an address or a queue made or removed at run time */
  MQR_JOURNAL_PAGED = 6,    /* a paged message: its queues and its stored bytes (page files) */
  MQR_JOURNAL_BATCH = 7     /* begins each write (id: its sequence); no payload. Not handed to readers */
} mqr_journal_record_type_t;

/* The CRC-32C (Castagnoli, reflected, as iSCSI and ext4 use) of p[0..n), continuing
 * from crc (0 to start): mqr_crc32c(0, "123456789", 9) is 0xE3069283. */
MQR_EXTERN uint32_t mqr_crc32c(uint32_t crc, const void *p, size_t n);

/* Writes a file header for the use file_id into out[0..MQR_JOURNAL_HEADER). */
MQR_EXTERN void mqr_journal_header_write(uint8_t *out, uint64_t file_id);

/* The bytes a record with a payload of len bytes takes. */
MQR_EXTERN size_t mqr_journal_record_size(size_t len);

/* Writes one record into out, which has room for mqr_journal_record_size(len) bytes,
 * and returns that size. payload may be NULL when len is 0; len is at most
 * MQR_JOURNAL_MAX_PAYLOAD (larger: nothing written, 0 returned). */
MQR_EXTERN size_t mqr_journal_record_write(uint8_t *out, uint64_t file_id, mqr_journal_record_type_t type, uint64_t id,
                                           const void *payload, size_t len);

/* Writes the end marker (MQR_JOURNAL_END zero bytes) into out. */
MQR_EXTERN void mqr_journal_end_write(uint8_t *out);

/* A record as read back: views into the file, valid while it is. */
typedef struct {
  mqr_journal_record_type_t type;
  uint64_t id;
  const uint8_t *payload;
  size_t len;
  size_t offset; /* of the record in the file */
} mqr_journal_record_t;

/* Called for each valid record in file order; non-zero stops the scan with that code. */
typedef int (*mqr_journal_record_fn)(void *ctx, const mqr_journal_record_t *r);

typedef enum {
  MQR_JOURNAL_CLEAN = 0,  /* the data ends at an end marker, or at a record of an earlier use */
  MQR_JOURNAL_TORN = 1,   /* the last write is cut or fails its CRC: a torn tail */
  MQR_JOURNAL_DAMAGED = 2 /* a record fails while a later write (a valid BATCH record) follows it */
} mqr_journal_status_t;

typedef struct {
  uint64_t file_id;
  mqr_journal_status_t status;
  size_t end;        /* where the valid data ends: the next append goes here */
  size_t bad_offset; /* TORN or DAMAGED: the first bad record's offset */
  uint64_t records;  /* valid records seen (BATCH records not counted) */
} mqr_journal_scan_t;

/* Checks a file's header and gives its use's id. 0, or MQR_EBADDATA (err says why). */
MQR_EXTERN int mqr_journal_header_read(const uint8_t *file, size_t len, uint64_t *file_id, mqr_error_t *err);

/* The record at off of file[0..len), of the use file_id (the header's), BATCH records
 * skipped: 1 with *out (views into file) and *next (where the record after it starts), or
 * 0 where the data ends for now (an end marker, a record of an earlier use, a record cut or failing its CRC). For
 * reading a file record by record, as its writer appends to it. */
MQR_EXTERN int mqr_journal_record_at(const uint8_t *file, size_t len, size_t off, uint64_t file_id,
                                     mqr_journal_record_t *out, size_t *next);

/* Reads file[0..len): checks the header, then calls fn (may be NULL) for each valid
 * record of this use but BATCH records, in order, and describes where and how the data ends in *out. A
 * torn tail and damage in the middle are not errors: out->status says which, and fn has
 * seen exactly the valid records before it. Errors: MQR_EBADDATA (no journal header, a
 * bad header CRC, or a version this build does not read; err says which), or fn's code. */
MQR_EXTERN int mqr_journal_scan(const uint8_t *file, size_t len, mqr_journal_record_fn fn, void *ctx,
                                mqr_journal_scan_t *out, mqr_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* MQR_JOURNAL_H */
