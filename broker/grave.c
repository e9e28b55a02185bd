/* The graveyard (broker_int.h): entries that left their queue for good, a deleted
 * queue's or a purge's, whose journal records are written already, wait here for their
 * messages to be released. Releasing is the costly part of a teardown (a message each,
 * back to its size class or the allocator); done GRAVE_SLICE at a time in the loop's
 * idle phase, a queue of 100,000 messages no longer holds the loop for tens of ms, and
 * connections go on between slices. */
#include "broker_int.h"

#define GRAVE_SLICE 2048 /* entries a pass: well under a millisecond */

void mqr__grave_put(mqr_broker_t *b, mqr__entry_t *e) {
  e->next = e->prev = NULL;
  e->jbq = NULL;
  if (b->grave_tail)
    b->grave_tail->next = e;
  else
    b->grave_head = e;
  b->grave_tail = e;
  mqr__broker_wake(b);
}

static void release(mqr_broker_t *b, uint64_t n) {
  while (n-- && b->grave_head) {
    mqr__entry_t *e = b->grave_head;
    b->grave_head = e->next;
    if (b->grave_head == NULL) b->grave_tail = NULL;
    mqr__msg_release(b, e->msg);
    mqr__pool_put(&b->entries, e);
  }
}

bool mqr__grave_step(mqr_broker_t *b) {
  release(b, GRAVE_SLICE);
  return b->grave_head != NULL;
}

void mqr__grave_drain(mqr_broker_t *b) { release(b, UINT64_MAX); }
