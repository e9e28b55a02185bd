/* A test's scratch directory, dir: /tmp/mqr-test-<pid>, made empty by fresh_dir(); and
 * how many of its files end in an extension. Header-only, like testutil.h. */
#ifndef MQR_TEST_DIR_H
#define MQR_TEST_DIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char dir[256] __attribute__((unused));

static inline void fresh_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/mqr-test-%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

static inline int count_ext(const char *ext) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    size_t l = strlen(e->d_name), k = strlen(ext);
    n += l > k && strcmp(e->d_name + l - k, ext) == 0;
  }
  if (d) closedir(d);
  return n;
}

#endif
