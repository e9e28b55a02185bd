/* Object container files (Avro 1.11 "Object Container Files"): the header (magic
 * `Obj\x01`, a metadata map of bytes values holding avro.schema and avro.codec, a
 * 16-byte sync marker), then blocks of (datum count, byte size, data, sync marker).
 * Codecs null and deflate (raw RFC 1951 data, no zlib header, as the specification
 * says). The reader works over the file's bytes in memory and checks every length,
 * count and marker; a deflate block may not inflate past MQR_AVRO_FILE_MAX_BLOCK. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "schema_int.h"

static const uint8_t magic[4] = {'O', 'b', 'j', 1};

/* zlib allocates through mqr's allocator, like everything else. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
  (void)opaque;
  return mqr_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p) {
  (void)opaque;
  mqr_free(p);
}

/* ---- writing ------------------------------------------------------------------------ */

struct mqr_avro_file_writer_s {
  const mqr_avro_schema_t *schema;
  mqr_avro_file_codec_t codec;
  mqr_avro_write_fn write;
  void *ctx;
  uint8_t sync[16];
  size_t block_size;
  mqr_avro_buf_t block; /* datums of the open block */
  uint64_t count;       /* in the open block */
  mqr_avro_buf_t frame; /* a block as written: count, size, data, sync */
  z_stream z;
  bool z_ready;
};

int mqr_avro_write_stdio(void *ctx, const void *p, size_t n) {
  return n == 0 || fwrite(p, 1, n, (FILE *)ctx) == n ? 0 : MQR_EIO;
}

static int put(mqr_avro_buf_t *b, const void *p, size_t n) {
  int rc = mqr_avro_buf_reserve(b, n);
  if (rc) return rc;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static int put_long(mqr_avro_buf_t *b, int64_t v) {
  int rc = mqr_avro_buf_reserve(b, mqr__varint_size(mqr__zigzag64(v)));
  if (rc) return rc;
  b->len = (size_t)(mqr__put_long(b->data + b->len, v) - b->data);
  return 0;
}

static int put_bytes(mqr_avro_buf_t *b, const void *p, size_t n) {
  int rc = put_long(b, (int64_t)n);
  return rc ? rc : put(b, p, n);
}

/* A marker unlikely to occur in data: from the time, the process and the address space. */
static void make_sync(uint8_t sync[16], const void *salt) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t a = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)getpid() << 48;
  uint64_t b = (uint64_t)(uintptr_t)salt ^ 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 16; i++) {
    a ^= a << 13, a ^= a >> 7, a ^= a << 17, a += b;
    sync[i] = (uint8_t)(a >> 24);
  }
}

int mqr_avro_file_writer_create(const mqr_avro_schema_t *s, const mqr_avro_file_options_t *opt, mqr_avro_write_fn write,
                                void *ctx, mqr_avro_file_writer_t **out, mqr_error_t *err) {
  mqr_avro_file_options_t def = {0};
  if (opt == NULL) opt = &def;
  if (opt->codec != MQR_AVRO_FILE_NULL && opt->codec != MQR_AVRO_FILE_DEFLATE)
    return mqr_error_set(err, MQR_EINVAL, "unknown container codec %d", (int)opt->codec);
  mqr_avro_file_writer_t *w = mqr_calloc(1, sizeof *w);
  if (w == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory creating a container writer");
  w->schema = s;
  w->codec = opt->codec;
  w->write = write;
  w->ctx = ctx;
  w->block_size = opt->block_size ? opt->block_size : 64 * 1024;
  mqr_avro_buf_init_growable(&w->block);
  mqr_avro_buf_init_growable(&w->frame);
  if (opt->sync)
    memcpy(w->sync, opt->sync, 16);
  else
    make_sync(w->sync, w);
  if (w->codec == MQR_AVRO_FILE_DEFLATE) {
    w->z.zalloc = z_alloc;
    w->z.zfree = z_free;
    if (deflateInit2(&w->z, opt->level ? opt->level : Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
      mqr_free(w);
      return mqr_error_set(err, MQR_ENOMEM, "cannot start deflate");
    }
    w->z_ready = true;
  }
  /* The header: magic, metadata {avro.schema, avro.codec}, sync. The schema is written
   * as it was given: its canonical form would drop namespaces that decide names
   * ("namespace": "" inside a namespaced record), defaults, aliases and logical types. */
  mqr_str_t canon = mqr_avro_schema_json(s);
  const char *codec = w->codec == MQR_AVRO_FILE_DEFLATE ? "deflate" : "null";
  mqr_avro_buf_t *h = &w->frame;
  int rc = put(h, magic, 4);
  if (rc == 0) rc = put_long(h, 2);
  if (rc == 0) rc = put_bytes(h, "avro.schema", 11);
  if (rc == 0) rc = put_bytes(h, canon.ptr, canon.len);
  if (rc == 0) rc = put_bytes(h, "avro.codec", 10);
  if (rc == 0) rc = put_bytes(h, codec, strlen(codec));
  if (rc == 0) rc = put_long(h, 0);
  if (rc == 0) rc = put(h, w->sync, 16);
  if (rc == 0) rc = w->write(w->ctx, h->data, h->len);
  h->len = 0;
  if (rc) {
    mqr_error_set(err, rc, "%s writing a container header", mqr_strerror(rc));
    w->write = NULL;
    mqr_avro_file_writer_close(w, NULL);
    return rc;
  }
  *out = w;
  return 0;
}

int mqr_avro_file_flush(mqr_avro_file_writer_t *w, mqr_error_t *err) {
  if (w->count == 0) return 0;
  mqr_avro_buf_t *f = &w->frame;
  f->len = 0;
  int rc = put_long(f, (int64_t)w->count);
  const uint8_t *data = w->block.data;
  size_t n = w->block.len;
  if (rc == 0 && w->codec == MQR_AVRO_FILE_DEFLATE) {
    /* Compress into the frame after room for the size varint, then move it down. */
    size_t bound = deflateBound(&w->z, (uLong)n), at = f->len + 10;
    if ((rc = mqr_avro_buf_reserve(f, 10 + bound + 16)) == 0) {
      w->z.next_in = (Bytef *)(uintptr_t)data;
      w->z.avail_in = (uInt)n;
      w->z.next_out = f->data + at;
      w->z.avail_out = (uInt)bound;
      int zr = deflate(&w->z, Z_FINISH);
      size_t zn = bound - w->z.avail_out;
      deflateReset(&w->z);
      if (zr != Z_STREAM_END) {
        rc = MQR_EIO;
      } else {
        size_t cnt_len = f->len;
        uint8_t *p = mqr__put_long(f->data + cnt_len, (int64_t)zn);
        memmove(p, f->data + at, zn);
        f->len = (size_t)(p - f->data) + zn;
      }
    }
  } else if (rc == 0) {
    if ((rc = put_long(f, (int64_t)n)) == 0) rc = put(f, data, n);
  }
  if (rc == 0) rc = put(f, w->sync, 16);
  if (rc == 0) rc = w->write(w->ctx, f->data, f->len);
  if (rc) return mqr_error_set(err, rc, "%s writing a container block", mqr_strerror(rc));
  w->block.len = 0;
  w->count = 0;
  return 0;
}

int mqr_avro_file_append(mqr_avro_file_writer_t *w, const uint8_t *datum, size_t len, mqr_error_t *err) {
  size_t used = 0;
  int rc = mqr_avro_skip(w->schema, datum, len, &used, err);
  if (rc) return rc;
  if (used != len) return mqr_error_set(err, MQR_EBADDATA, "%zu bytes left after the datum", len - used);
  if ((rc = put(&w->block, datum, len)) != 0) return mqr_error_set(err, rc, "out of memory appending a datum");
  w->count++;
  return w->block.len >= w->block_size ? mqr_avro_file_flush(w, err) : 0;
}

int mqr_avro_file_writer_close(mqr_avro_file_writer_t *w, mqr_error_t *err) {
  if (w == NULL) return 0;
  int rc = w->write ? mqr_avro_file_flush(w, err) : 0;
  if (w->z_ready) deflateEnd(&w->z);
  mqr_avro_buf_free(&w->block);
  mqr_avro_buf_free(&w->frame);
  mqr_free(w);
  return rc;
}

/* ---- reading ------------------------------------------------------------------------ */

struct mqr_avro_file_reader_s {
  mqr_avro_schema_t *schema;
  mqr_avro_file_codec_t codec;
  uint8_t sync[16];
  mqr__rd_t in;         /* the file */
  const uint8_t *block; /* the open block's data (file bytes, or inflated) */
  size_t block_len, block_pos;
  uint64_t left; /* datums left in the open block */
  size_t block_start;
  mqr_avro_buf_t inflated;
  z_stream z;
  bool z_ready;
};

static int meta_value(mqr__rd_t *r, const uint8_t **p, size_t *n) {
  size_t len = 0;
  int rc = mqr__get_len(r, &len);
  if (rc) return rc;
  *p = r->p;
  *n = len;
  r->p += len;
  return 0;
}

int mqr_avro_file_reader_open(const uint8_t *data, size_t len, mqr_avro_file_reader_t **out, mqr_error_t *err) {
  mqr_avro_file_reader_t *f = mqr_calloc(1, sizeof *f);
  if (f == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory opening a container");
  mqr_avro_buf_init_growable(&f->inflated);
  f->in = mqr__rd_init(data, len, err);
  mqr__rd_t *r = &f->in;
  const uint8_t *schema = NULL, *codec = NULL;
  size_t schema_len = 0, codec_len = 0;
  int rc = mqr__need(r, 4);
  if (rc == 0 && memcmp(r->p, magic, 4) != 0) rc = mqr__rd_fail(r, MQR_EBADDATA, "not an Avro container (no Obj\\x01)");
  if (rc == 0) r->p += 4;
  for (uint64_t count = 1; rc == 0 && count;) {
    if ((rc = mqr__get_count(r, 2, &count)) != 0) break;
    for (uint64_t i = 0; i < count && rc == 0; i++) {
      const uint8_t *k, *v;
      size_t kn = 0, vn = 0;
      if ((rc = meta_value(r, &k, &kn)) == 0) rc = meta_value(r, &v, &vn);
      if (rc == 0 && kn == 11 && !memcmp(k, "avro.schema", 11)) schema = v, schema_len = vn;
      if (rc == 0 && kn == 10 && !memcmp(k, "avro.codec", 10)) codec = v, codec_len = vn;
    }
  }
  if (rc == 0 && (rc = mqr__need(r, 16)) == 0) {
    memcpy(f->sync, r->p, 16);
    r->p += 16;
  }
  if (rc == 0 && schema == NULL) rc = mqr_error_set(err, MQR_EBADDATA, "the container header has no avro.schema");
  if (rc == 0) {
    if (codec == NULL || (codec_len == 4 && !memcmp(codec, "null", 4))) {
      f->codec = MQR_AVRO_FILE_NULL;
    } else if (codec_len == 7 && !memcmp(codec, "deflate", 7)) {
      f->codec = MQR_AVRO_FILE_DEFLATE;
      f->z.zalloc = z_alloc;
      f->z.zfree = z_free;
      if (inflateInit2(&f->z, -15) != Z_OK)
        rc = mqr_error_set(err, MQR_ENOMEM, "cannot start inflate");
      else
        f->z_ready = true;
    } else {
      rc = mqr_error_set(err, MQR_EINVAL, "container codec '%.*s' is not supported (null and deflate are)",
                         (int)(codec_len > 40 ? 40 : codec_len), (const char *)codec);
    }
  }
  if (rc == 0) {
    mqr_error_t e;
    if ((rc = mqr_avro_schema_parse((const char *)schema, schema_len, &f->schema, &e)) != 0)
      rc = mqr_error_set(err, rc, "the container's schema: %d:%d: %s", e.line, e.column, e.message);
  }
  if (rc) {
    mqr_avro_file_reader_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

const mqr_avro_schema_t *mqr_avro_file_reader_schema(const mqr_avro_file_reader_t *f) { return f->schema; }

static int open_block(mqr_avro_file_reader_t *f) {
  mqr__rd_t *r = &f->in;
  f->block_start = mqr__rd_offset(r);
  int64_t count = 0;
  size_t size = 0;
  int rc = mqr__get_long(r, &count);
  if (rc == 0 && count <= 0)
    rc = mqr__rd_fail(r, MQR_EBADDATA, "block datum count %lld is not positive", (long long)count);
  if (rc == 0) rc = mqr__get_len(r, &size);
  if (rc == 0 &&
      (uint64_t)count > (f->codec == MQR_AVRO_FILE_NULL && f->schema->root->min_size ? size / f->schema->root->min_size
                                                                                     : MQR_AVRO_MAX_ITEMS))
    rc = mqr__rd_fail(r, MQR_EBADDATA, "block datum count %lld is more than its %zu bytes can hold", (long long)count,
                      size);
  if (rc) return rc;
  const uint8_t *data = r->p;
  r->p += size;
  if ((rc = mqr__need(r, 16)) != 0) return rc;
  if (memcmp(r->p, f->sync, 16) != 0) return mqr__rd_fail(r, MQR_EBADDATA, "block does not end with the sync marker");
  r->p += 16;
  if (f->codec == MQR_AVRO_FILE_NULL) {
    f->block = data;
    f->block_len = size;
  } else {
    inflateReset(&f->z);
    f->z.next_in = (Bytef *)(uintptr_t)data;
    f->z.avail_in = (uInt)size;
    f->inflated.len = 0;
    for (;;) {
      size_t room = f->inflated.cap - f->inflated.len;
      if (room < 4096) {
        if (f->inflated.len >= MQR_AVRO_FILE_MAX_BLOCK)
          return mqr_error_set(r->err, MQR_ELIMIT, "block at byte %zu inflates past %u bytes", f->block_start,
                               (unsigned)MQR_AVRO_FILE_MAX_BLOCK);
        if (mqr_avro_buf_reserve(&f->inflated, f->inflated.cap ? f->inflated.cap : 65536) != 0)
          return mqr_error_set(r->err, MQR_ENOMEM, "out of memory inflating a block");
        room = f->inflated.cap - f->inflated.len;
      }
      f->z.next_out = f->inflated.data + f->inflated.len;
      f->z.avail_out = (uInt)room;
      int zr = inflate(&f->z, Z_NO_FLUSH);
      f->inflated.len += room - f->z.avail_out;
      if (zr == Z_STREAM_END) break;
      if (zr == Z_BUF_ERROR && f->z.avail_in == 0)
        return mqr_error_set(r->err, MQR_ETRUNCATED, "block at byte %zu: deflate data ends too soon", f->block_start);
      if (zr != Z_OK && zr != Z_BUF_ERROR)
        return mqr_error_set(r->err, MQR_EBADDATA, "block at byte %zu: bad deflate data (%s)", f->block_start,
                             f->z.msg ? f->z.msg : "?");
    }
    f->block = f->inflated.data;
    f->block_len = f->inflated.len;
  }
  f->block_pos = 0;
  f->left = (uint64_t)count;
  return 0;
}

int mqr_avro_file_next(mqr_avro_file_reader_t *f, const uint8_t **datum, size_t *len, mqr_error_t *err) {
  f->in.err = err;
  if (f->left == 0) {
    if (f->in.p == f->in.end) return 0;
    int rc = open_block(f);
    if (rc) return rc;
  }
  size_t used = 0;
  mqr_error_t e;
  int rc = mqr_avro_skip(f->schema, f->block + f->block_pos, f->block_len - f->block_pos, &used, &e);
  if (rc)
    return mqr_error_set(err, rc, "block at byte %zu, datum %llu: %s", f->block_start, (unsigned long long)(f->left),
                         e.message);
  *datum = f->block + f->block_pos;
  *len = used;
  f->block_pos += used;
  if (--f->left == 0 && f->block_pos != f->block_len)
    return mqr_error_set(err, MQR_EBADDATA, "block at byte %zu has %zu bytes after its last datum", f->block_start,
                         f->block_len - f->block_pos);
  return 1;
}

void mqr_avro_file_reader_close(mqr_avro_file_reader_t *f) {
  if (f == NULL) return;
  if (f->z_ready) inflateEnd(&f->z);
  mqr_avro_buf_free(&f->inflated);
  mqr_avro_schema_destroy(f->schema);
  mqr_free(f);
}
