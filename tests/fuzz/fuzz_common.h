/* Shared by the libFuzzer targets: the schemas that binary and JSON inputs are read
 * with, loaded once from tests/data/avro (MQR_SOURCE_DIR, or the source tree the target
 * was built from). The first input byte picks one. */
#ifndef MQR_FUZZ_COMMON_H
#define MQR_FUZZ_COMMON_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "mqr/codec.h"

#define FUZZ_MAX_SCHEMAS 32

static mqr_avro_schema_t *fuzz_schemas[FUZZ_MAX_SCHEMAS];
static int fuzz_n_schemas;

static inline void fuzz_load_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  struct dirent *e;
  char names[FUZZ_MAX_SCHEMAS][256];
  int n = 0;
  while ((e = readdir(d)) != NULL && n < FUZZ_MAX_SCHEMAS)
    if (strstr(e->d_name, ".avsc")) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
  closedir(d);
  /* Sorted, so that a saved crash input picks the same schema again. */
  qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
  for (int i = 0; i < n && fuzz_n_schemas < FUZZ_MAX_SCHEMAS; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "rb");
    if (f == NULL) continue;
    char text[16384];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    mqr_avro_schema_t *s = NULL;
    if (mqr_avro_schema_parse(text, len, &s, NULL) == 0) fuzz_schemas[fuzz_n_schemas++] = s;
  }
}

static inline void fuzz_load_schemas(void) {
  if (fuzz_n_schemas) return;
  const char *src = getenv("MQR_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/data/avro/schemas", src ? src : MQR_FUZZ_SOURCE_DIR);
  fuzz_load_dir(dir);
  snprintf(dir, sizeof dir, "%s/tests/data/avro/resolution", src ? src : MQR_FUZZ_SOURCE_DIR);
  fuzz_load_dir(dir);
  if (fuzz_n_schemas == 0) {
    fprintf(stderr, "fuzz: no schemas found under %s\n", dir);
    abort();
  }
}

#endif
