/* The allocator hook. Four function pointers, replaced together, read on every
 * allocation: the library never calls the C allocator directly. */
#include <stdlib.h>

#include "mqr/common.h"

static struct {
  mqr_malloc_func malloc_func;
  mqr_realloc_func realloc_func;
  mqr_calloc_func calloc_func;
  mqr_free_func free_func;
} allocator = {malloc, realloc, calloc, free};

int mqr_set_allocator(mqr_malloc_func malloc_func, mqr_realloc_func realloc_func, mqr_calloc_func calloc_func,
                      mqr_free_func free_func) {
  if (!malloc_func && !realloc_func && !calloc_func && !free_func) {
    allocator.malloc_func = malloc;
    allocator.realloc_func = realloc;
    allocator.calloc_func = calloc;
    allocator.free_func = free;
    return 0;
  }
  if (!malloc_func || !realloc_func || !calloc_func || !free_func) return MQR_EINVAL;
  allocator.malloc_func = malloc_func;
  allocator.realloc_func = realloc_func;
  allocator.calloc_func = calloc_func;
  allocator.free_func = free_func;
  return 0;
}

void *mqr_malloc(size_t size) { return allocator.malloc_func(size ? size : 1); }

void *mqr_realloc(void *ptr, size_t size) { return allocator.realloc_func(ptr, size ? size : 1); }

void *mqr_calloc(size_t count, size_t size) {
  if (count == 0 || size == 0) count = size = 1;
  return allocator.calloc_func(count, size);
}

void mqr_free(void *ptr) {
  if (ptr != NULL) allocator.free_func(ptr);
}

const char *mqr_version(void) { return MQR_VERSION_STRING; }
