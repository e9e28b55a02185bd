/* The libFuzzer targets' property check. */
#ifndef MQR_FUZZ_CHECK_H
#define MQR_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/* A property that must hold: a failure says which, then aborts for libFuzzer. */
#define FUZZ_CHECK(cond)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond);                                      \
      abort();                                                                                                         \
    }                                                                                                                  \
  } while (0)

#endif
