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

#include <sys/types.h>
#include <uv.h>

#include "mqr/journal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mqr_journal_writer_s mqr_journal_writer_t;

/* The calls the writer makes its records durable with, to inject failures in tests
 * (the system's when NULL). Called on the writer's worker thread. */
typedef struct {
  ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t offset);
  int (*fdatasync)(int fd);
} mqr_journal_io_t;

typedef struct {
  const char *directory; /* made if missing (one level) */
  size_t file_size;      /* each file's size; 0: 10 MiB. At least 4 KiB */
  bool no_sync;          /* skip fdatasync (tests and benchmarks of the write path alone) */
  /* Files kept: at least min_files exist, in use or ready in the pool (0: 2), made when
   * the journal opens; a released file goes back to the pool unless the pool holds
   * pool_files already (0: no limit; then it is deleted). Pool files are named
   * NNNNNNNNNNNNNNNN.jrf and hold nothing recovery reads. */
  uint32_t min_files;
  uint32_t pool_files;
  /* Group commit: a batch goes to the disk at the next loop pass after its first record
   * (0), or up to buffer_timeout_us later while it is smaller than buffer_size bytes (0:
   * 490 KiB), to gather more records per fdatasync. Either way, records appended while a
   * write is in flight go in the next one. */
  uint32_t buffer_timeout_us;
  size_t buffer_size;
  /* Damage in the middle of a file: 0 stops the opening (MQR_EBADDATA); true recovers the
   * records before it and cuts the journal there: the damaged file is kept beside as
   * NAME.damaged and ends at the bad record, later files are renamed NAME.damaged. */
  bool truncate_damaged;
  const mqr_journal_io_t *io; /* NULL: pwrite(2) and fdatasync(2) */
} mqr_journal_options_t;

/* A record recovered when the directory is opened: file_id is its file's, path that
 * file's name; views valid during the call. Non-zero stops the opening with that code. */
typedef int (*mqr_journal_recover_fn)(void *ctx, uint64_t file_id, const char *path, const mqr_journal_record_t *r);

/* Called on the loop when the record is durable (status 0) or cannot be (MQR_EIO). */
typedef void (*mqr_journal_done_fn)(void *arg, int status);

/* Opens the journal in opt->directory on loop: recovers every valid record of its files,
 * in order, through recover (may be NULL), and makes a new file for what is appended.
 * A file damaged in the middle stops the opening with MQR_EBADDATA (err names the file
 * and offset) unless opt->truncate_damaged; a torn tail is cut (its records are not
 * recovered). Errors: MQR_EINVAL (bad options), MQR_EIO (the directory or a file cannot
 * be made, read or written; err says which), MQR_EBADDATA, MQR_ENOMEM, or recover's
 * code. *out is written only on success. */
MQR_EXTERN int mqr_journal_open(uv_loop_t *loop, const mqr_journal_options_t *opt, mqr_journal_recover_fn recover,
                                void *ctx, mqr_journal_writer_t **out, mqr_error_t *err);

/* Appends a record (payload copied); done (may be NULL) is called when it is durable.
 * Errors (nothing appended, done not called): MQR_ELIMIT (a record larger than a file
 * holds), MQR_EIO (the writer has failed), MQR_ECLOSED (closing), MQR_ENOMEM. Allocates
 * nothing once its buffers have grown to the size of a batch. */
MQR_EXTERN int mqr_journal_append(mqr_journal_writer_t *w, mqr_journal_record_type_t type, uint64_t id,
                                  const void *payload, size_t len, mqr_journal_done_fn done, void *arg);

/* The id of the file the last append went to (before any append: the file the next one
 * goes to). Files are numbered in order; a record's file never has a lower id than an
 * earlier record's. */
MQR_EXTERN uint64_t mqr_journal_file(const mqr_journal_writer_t *w);

/* Where the next record goes: its file and offset, unless it does not fit there (then it
 * starts the next file). For a reader that follows what the writer appends. */
MQR_EXTERN void mqr_journal_position(const mqr_journal_writer_t *w, uint64_t *file_id, size_t *offset);

/* Gives file_id (older than mqr_journal_file) back to the pool once every record
 * appended before this call is durable: its caller knows nothing in it is needed any
 * more. Recovery reads files in id order, so a caller releases them oldest first. 0, or
 * MQR_EINVAL (not older than the current file), MQR_EIO (the writer has failed),
 * MQR_ECLOSED, MQR_ENOMEM. */
MQR_EXTERN int mqr_journal_release(mqr_journal_writer_t *w, uint64_t file_id);

/* The write rounds' times (pwrite + fdatasync) are counted in buckets: round i of
 * write_latency took at most mqr_journal_latency_bounds[i] seconds (and more than the
 * bound before it), the last counts the rest. */
#define MQR_JOURNAL_LATENCY_BUCKETS 14
MQR_EXTERN extern const double mqr_journal_latency_bounds[MQR_JOURNAL_LATENCY_BUCKETS];

typedef struct {
  uint64_t records;    /* appended and durable */
  uint64_t writes;     /* pwrite + fdatasync rounds: records / writes is the group size */
  uint64_t bytes;      /* of records written */
  uint64_t files;      /* files begun since open (made or taken from the pool) */
  uint64_t reused;     /* of those, taken from the pool */
  uint64_t released;   /* files given back */
  uint64_t first_file; /* the oldest file in use at open (equal to current_file: none) */
  uint64_t recovered;  /* records recovered at open */
  uint32_t pool;       /* files in the pool after the last write */
  uint32_t torn;       /* files whose torn tail was cut at open */
  uint64_t cut_file;   /* truncate_damaged: the file cut at a damaged record (0: none) */
  uint64_t cut_offset; /* and the offset of that record */
  uint64_t write_latency[MQR_JOURNAL_LATENCY_BUCKETS + 1]; /* write rounds by their time (above) */
  uint64_t write_ns;                                       /* their times, together */
} mqr_journal_stats_t;

/* Why the writer failed (a failed write or fdatasync: what, which file, the system's
 * error), or NULL while it has not. Valid until the writer is closed. */
MQR_EXTERN const char *mqr_journal_error(const mqr_journal_writer_t *w);

/* The writer's counters since it was opened. */
MQR_EXTERN void mqr_journal_stats(const mqr_journal_writer_t *w, mqr_journal_stats_t *out);

/* The lock file in a data directory: held by the one broker that writes there. */
#define MQR_JOURNAL_LOCK_FILE "mqrd.lock"

/* Locks directory (made, mode 0700, when missing: *made says so, may be NULL) for this
 * process: an exclusive flock(2) on MQR_JOURNAL_LOCK_FILE in it, with this process's PID
 * written there, held until mqr_journal_unlock(*fd). A broker takes it before it opens
 * the journal and holds it across reopenings; the kernel releases it when the process
 * ends, however it ends. Readers of the files (mqr journal check|dump) need no lock.
 * Errors: MQR_EBUSY (another holds it: err names the directory and, when the file says,
 * the holder's PID), MQR_EIO (the directory or the file cannot be made or locked),
 * MQR_EINVAL (a name too long). */
MQR_EXTERN int mqr_journal_lock(const char *directory, bool *made, int *fd, mqr_error_t *err);
/* Releases a lock mqr_journal_lock took (fd < 0: nothing). */
MQR_EXTERN void mqr_journal_unlock(int fd);

/* Writes what is appended, closes the files, then calls cb (may be NULL) on the loop and
 * frees the writer. */
MQR_EXTERN void mqr_journal_close(mqr_journal_writer_t *w, void (*cb)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* MQR_JOURNAL_WRITER_H */
