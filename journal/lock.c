/* The data directory's lock (mqr/journal_writer.h): one broker at a time writes a
 * journal. flock(2) on a lock file in the directory, held for the broker's life; the
 * kernel lets go when the process ends, however it ends, so a lock file left behind by
 * a crash does not stop the next start. The holder's PID is written into the file so a
 * second broker can say who holds it. Readers (mqr journal check|dump) take no lock. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mqr/journal_writer.h"

int mqr_journal_lock(const char *directory, bool *made, int *fd_out, mqr_error_t *err) {
  if (made) *made = false;
  if (mkdir(directory, 0700) == 0) {
    if (made) *made = true;
  } else if (errno != EEXIST) {
    return mqr_error_set(err, MQR_EIO, "cannot make the data directory %s: %s", directory, strerror(errno));
  }
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", directory, MQR_JOURNAL_LOCK_FILE) >= sizeof path)
    return mqr_error_set(err, MQR_EINVAL, "the data directory's name is too long");
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return mqr_error_set(err, MQR_EIO, "cannot open the lock file %s: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char pid[32] = "";
    ssize_t n = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : -1;
    close(fd);
    if (e != EWOULDBLOCK) return mqr_error_set(err, MQR_EIO, "cannot lock %s: %s", path, strerror(e));
    pid[n > 0 ? n : 0] = 0;
    long holder = strtol(pid, NULL, 10);
    if (holder > 0)
      return mqr_error_set(err, MQR_EBUSY,
                           "the data directory %s is in use by another broker (pid %ld holds %s): two brokers on "
                           "one journal would lose each other's messages",
                           directory, holder, path);
    return mqr_error_set(err, MQR_EBUSY,
                         "the data directory %s is in use by another broker (it holds %s): two brokers on one "
                         "journal would lose each other's messages",
                         directory, path);
  }
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    int e = errno;
    close(fd);
    return mqr_error_set(err, MQR_EIO, "cannot write the lock file %s: %s", path, strerror(e));
  }
  *fd_out = fd;
  return 0;
}

void mqr_journal_unlock(int fd) {
  if (fd < 0) return;
  if (ftruncate(fd, 0) != 0) {
    /* nothing to do: the lock goes with the descriptor all the same */
  }
  close(fd);
}
