/* mqr's journal writer: records appended from a libuv loop, written and made durable by a
 * worker thread with group commit, in journal files (mqr/journal.h) of a directory.
 *
 * Group commit: every record appended while no write is in flight, and every record
 * appended while one is, goes in the next write, which is one pwrite and one fdatasync for
 * all of them; each record's callback runs on the loop once the fdatasync that covers it
 * has returned, in append order. The loop never waits for the disk.
 *
 * Files: NNNNNNNNNNNNNNNN.jrn (the file id, 16 hex digits), each pre-allocated to
 * file_size bytes and filled in order. Opening a directory reads every journal file in it,
 * in file-id order, and hands each valid record to a callback (recovery); new records go
 * to a new file after the last.
 *
 * Failure: a failed write or fdatasync fails every record of that write (their callbacks
 * get MQR_EIO) and every later append: after a failed fdatasync the page cache cannot be
 * trusted (PostgreSQL's lesson), so the writer stops, and the caller recovers by opening
 * the directory again.
 *
 * Threads: every call from the loop's thread; callbacks run there. */
#ifndef MQR_JOURNAL_WRITER_H
#define MQR_JOURNAL_WRITER_H

#include <uv.h>

#include "mqr/journal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mqr_journal_writer_s mqr_journal_writer_t;

typedef struct {
  const char *directory; /* made if missing (one level) */
  size_t file_size;      /* each file's size; 0: 10 MiB. At least 4 KiB */
  bool no_sync;          /* skip fdatasync (tests and benchmarks of the write path alone) */
} mqr_journal_options_t;

/* A record recovered when the directory is opened; views valid during the call. Non-zero
 * stops the opening with that code. */
typedef int (*mqr_journal_recover_fn)(void *ctx, const char *file, const mqr_journal_record_t *r);

/* Called on the loop when the record is durable (status 0) or cannot be (MQR_EIO). */
typedef void (*mqr_journal_done_fn)(void *arg, int status);

/* Opens the journal in opt->directory on loop: recovers every valid record of its files,
 * in order, through recover (may be NULL), and makes a new file for what is appended.
 * A file damaged in the middle stops the opening with MQR_EBADDATA (err names the file
 * and offset); a torn tail is cut (its records are not recovered). Errors: MQR_EIO (the
 * directory or a file cannot be made, read or written; err says which), MQR_EBADDATA,
 * MQR_ENOMEM, or recover's code. *out is written only on success. */
MQR_EXTERN int mqr_journal_open(uv_loop_t *loop, const mqr_journal_options_t *opt, mqr_journal_recover_fn recover,
                                void *ctx, mqr_journal_writer_t **out, mqr_error_t *err);

/* Appends a record (payload copied); done (may be NULL) is called when it is durable.
 * Errors (nothing appended, done not called): MQR_ELIMIT (a record larger than a file
 * holds), MQR_EIO (the writer has failed), MQR_ECLOSED (closing), MQR_ENOMEM. */
MQR_EXTERN int mqr_journal_append(mqr_journal_writer_t *w, mqr_journal_record_type_t type, uint64_t id,
                                  const void *payload, size_t len, mqr_journal_done_fn done, void *arg);

typedef struct {
  uint64_t records; /* appended and durable */
  uint64_t writes;  /* pwrite + fdatasync rounds: records / writes is the group size */
  uint64_t bytes;
  uint64_t files; /* files made since open */
} mqr_journal_stats_t;

/* The writer's counters since it was opened. */
MQR_EXTERN void mqr_journal_stats(const mqr_journal_writer_t *w, mqr_journal_stats_t *out);

/* Writes what is appended, closes the files, then calls cb (may be NULL) on the loop and
 * frees the writer. */
MQR_EXTERN void mqr_journal_close(mqr_journal_writer_t *w, void (*cb)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* MQR_JOURNAL_WRITER_H */
