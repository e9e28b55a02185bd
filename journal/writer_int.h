/* The journal writer's insides, shared by writer.c (appending, group commit, the pool)
 * and recover.c (opening a directory: recovery, truncation, the pool's files). */
#ifndef MQR_JOURNAL_WRITER_INT_H
#define MQR_JOURNAL_WRITER_INT_H

#include "../common/grow.h"
#include "mqr/journal_writer.h"

typedef struct {
  mqr_journal_done_fn done;
  void *arg;
} mqr__jcb_t;

/* A segment: the bytes bound for one place of one file, with their callbacks, and the
 * files to release once they are durable. */
typedef struct mqr__jseg_s {
  uint64_t file_id;
  size_t off;    /* where its bytes go in the file */
  bool new_file; /* the file is begun first (from the pool, or made) */
  uint8_t *bytes;
  size_t len, cap; /* cap always has room for the end marker after len */
  mqr__jcb_t *cbs;
  size_t n_cbs, cap_cbs;
  uint64_t *rel;
  size_t n_rel, cap_rel;
  uint64_t first_ns; /* uv_hrtime of its first record */
  struct mqr__jseg_s *next;
} mqr__jseg_t;

struct mqr_journal_writer_s {
  uv_loop_t *loop;
  char *dir;
  size_t file_size;
  bool no_sync;
  uint32_t min_files, pool_max; /* pool_max 0: no limit */
  mqr_journal_io_t io;
  uint64_t timeout_ns;
  size_t buffer_size;
  /* The loop's side. */
  uint64_t file_id; /* of the open segment's file */
  uint64_t batches; /* BATCH records written: the next one's id */
  size_t file_off;  /* bytes of that file taken, the open segment's included */
  mqr__jseg_t *open, *ready, *ready_tail;
  mqr__jseg_t *spare; /* segments kept for reuse */
  uint32_t n_spare;
  uv_idle_t idle;
  uv_timer_t timer;
  bool idle_on, timer_on, failed, closing;
  uint32_t handles;
  void (*close_cb)(void *arg);
  void *close_arg;
  mqr_journal_stats_t stats;
  uint64_t write_ns; /* the last write round's time: set by the worker, read on the loop after it */
  /* The write in flight, and the worker's side. */
  uv_work_t work;
  mqr__jseg_t *writing;
  int fd; /* the current file, the worker's */
  int status;
  uint32_t n_pool; /* files in the pool: the worker's once open */
  bool reused;     /* the last file begun came from the pool */
  char why[256];
};

/* recover.c: reads the directory (recovery), fills w->file_id, w->n_pool and the stats'
 * first_file, recovered, torn and damaged fields, and tops the pool up to min_files. */
int mqr__journal_recover(mqr_journal_writer_t *w, const mqr_journal_options_t *opt, mqr_journal_recover_fn fn,
                         void *ctx, mqr_error_t *err);
/* Makes a zero-filled file of w->file_size bytes at path (O_EXCL); 0 or errno. */
int mqr__journal_make_file(const mqr_journal_writer_t *w, const char *path, int *fd_out);
/* The paths of file id: in use (.jrn) and in the pool (.jrf). */
void mqr__journal_path(const mqr_journal_writer_t *w, uint64_t id, bool pool, char *out, size_t cap);

#endif
