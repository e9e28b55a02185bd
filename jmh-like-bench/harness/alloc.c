/* Bytes allocated per operation, from jemalloc's per-thread counter (thread.allocatedp):
 * a pointer to this thread's running total, read before and after the measured loop. */
#include <jemalloc/jemalloc.h>

#include "bench.h"

static uint64_t *counter;
static int state; /* 0 unknown, 1 available, -1 unavailable */

int64_t mqr_bench_allocated_bytes(void) {
  if (state == 0) {
    /* One look-up per thread would be needed with threads; the harness measures on the
     * main thread of each fork only. */
    size_t sz = sizeof counter;
    state = mallctl("thread.allocatedp", &counter, &sz, NULL, 0) == 0 && counter != NULL ? 1 : -1;
  }
  return state == 1 ? (int64_t)*counter : -1;
}
