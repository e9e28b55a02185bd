/* The cluster's memory (private): blocks in size classes, each thread keeping the
 * blocks it frees for its next allocations of their class, so that a Raft group in
 * steady state (libraft's buffers and requests, its log segments' write buffers, the
 * replicated state's copies of messages) takes nothing from the system allocator per
 * message. A thread keeps at most MQR__RPOOL_KEEP bytes of freed blocks (enough for
 * what libraft frees at once when a snapshot compacts its log at 1 KiB messages); the
 * rest, and blocks past the largest class, go back to the system at once, and
 * mqr__rpool_trim, called every few seconds, gives back what went unused since its
 * last call.
 *
 * Only a thread that asked to (mqr__rpool_keep: a loop's thread that runs Raft groups)
 * keeps blocks; on other threads (libuv's pool, where libraft writes snapshots) the
 * pool is the system's allocator. Any thread may free a block another allocated (it
 * joins the freeing thread's blocks, if that thread keeps any). A thread's kept blocks
 * are freed when it exits. */
#ifndef MQR_CLUSTER_POOL_H
#define MQR_CLUSTER_POOL_H

#include <stddef.h>

#define MQR__RPOOL_KEEP ((size_t)256 << 20)

/* n bytes (NULL when out of memory); mqr__rpool_free or mqr__rpool_realloc take it back. */
void *mqr__rpool_malloc(size_t n);
/* n blocks of size bytes, zeroed; the same rules. */
void *mqr__rpool_calloc(size_t n, size_t size);
/* n bytes aligned to align (a power of two); the same rules. */
void *mqr__rpool_aligned(size_t align, size_t n);
/* p (NULL: a new block) holding n bytes, its first bytes kept; NULL when out of memory
 * (p is then untouched). */
void *mqr__rpool_realloc(void *p, size_t n);
void mqr__rpool_free(void *p);
/* From now on this thread keeps the blocks it frees (at most MQR__RPOOL_KEEP bytes). */
void mqr__rpool_keep(void);
/* Frees the blocks this thread kept all along since the last call (of each class, as
 * many as it kept of it at the least), so that what a burst left is given back within two
 * calls while a class drawn on in every interval keeps its blocks. */
void mqr__rpool_trim(void);
/* Bytes this thread keeps now (for tests). */
size_t mqr__rpool_kept(void);

/* Makes the pool libraft's heap (raft_heap_set), once per process: before the first
 * Raft object is made, so that every block libraft frees came from it. */
void mqr__rpool_for_raft(void);

#endif
