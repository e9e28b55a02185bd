/* A failing disk for one process, as the cluster's fault test needs it (test_nemesis.py):
 * loaded with LD_PRELOAD into mqrd, it makes writes and syncs of regular files fail with
 * EIO or ENOSPC while the control file named by MQR_DISKFAULT says so ("EIO", "ENOSPC";
 * missing or anything else: the disk works). Standard output and error (the log) are
 * spared. It covers what mqrd's journal (libuv: write, pwrite, writev, pwritev, fsync,
 * fdatasync) and libraft's uv back end (pwrite, write, posix_fallocate, and kernel AIO
 * through syscall(2)) write with. A kernel AIO write fails as a disk fails it: submitted,
 * then completed with the error (io_getevents).
 *
 * The control file is read at most every 20 ms; a process without MQR_DISKFAULT is not
 * touched. Built without sanitizers (an ASan mqrd needs verify_asan_link_order=0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int fault_errno(void) {
  static const char *ctl;
  static int inited, cached;
  static struct timespec at;
  if (!inited) {
    ctl = getenv("MQR_DISKFAULT");
    inited = 1;
  }
  if (ctl == NULL) return 0;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long ms = (now.tv_sec - at.tv_sec) * 1000 + (now.tv_nsec - at.tv_nsec) / 1000000;
  if (at.tv_sec && ms < 20) return cached;
  at = now;
  cached = 0;
  int saved = errno;
  FILE *f = fopen(ctl, "r");
  if (f) {
    char word[16] = "";
    if (fscanf(f, "%15s", word) == 1)
      cached = strcmp(word, "EIO") == 0 ? EIO : strcmp(word, "ENOSPC") == 0 ? ENOSPC : 0;
    fclose(f);
  }
  errno = saved;
  return cached;
}

/* The errno to fail fd's write with, or 0: only regular files, never the log. */
static int fails(int fd) {
  int e = fault_errno();
  if (e == 0 || fd <= 2) return 0;
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? e : 0;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t n) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(write)(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(pwrite)(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(pwrite64)(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(writev)(fd, iov, n);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(pwritev)(fd, iov, n, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(pwritev64)(fd, iov, n, off);
}

int fsync(int fd) {
  int e = fails(fd);
  if (e) return errno = e == ENOSPC ? EIO : e, -1; /* (a sync reports what it could not write) */
  return NEXT(fsync)(fd);
}

int fdatasync(int fd) {
  int e = fails(fd);
  if (e) return errno = e == ENOSPC ? EIO : e, -1;
  return NEXT(fdatasync)(fd);
}

int posix_fallocate(int fd, off_t off, off_t len) {
  int e = fails(fd);
  if (e) return e; /* (it returns the error) */
  return NEXT(posix_fallocate)(fd, off, len);
}

int posix_fallocate64(int fd, off_t off, off_t len) {
  int e = fails(fd);
  if (e) return e;
  return NEXT(posix_fallocate64)(fd, off, len);
}

int fallocate(int fd, int mode, off_t off, off_t len) {
  int e = fails(fd);
  if (e) return errno = e, -1;
  return NEXT(fallocate)(fd, mode, off, len);
}

/* libraft writes through kernel AIO, and libuv may write, through syscall(2). */
long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  int e = 0;
  switch (number) {
  case SYS_io_getevents: { /* completed writes: with the error, while the disk fails */
    long n = NEXT(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    int f = n > 0 ? fault_errno() : 0;
    struct io_event *ev = (struct io_event *)a[3];
    for (long i = 0; f && i < n; i++) ev[i].res = -f;
    return n;
  }
  case SYS_write:
  case SYS_pwrite64:
  case SYS_writev:
  case SYS_pwritev:
  case SYS_pwritev2:
  case SYS_fsync:
  case SYS_fdatasync:
  case SYS_fallocate: e = fails((int)a[0]); break;
  }
  if (e) return errno = e, -1;
  return NEXT(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
