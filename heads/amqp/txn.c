/* The AMQP head's transactions (amqp.h), as Artemis supports them: a coordinator link on
 * which the client declares a transaction (answered `declared` with its id) and discharges
 * it; transfers whose state names the transaction are held, each answered with a
 * transactional state of `accepted`, and sent when it commits; `accepted` outcomes of
 * deliveries that name it are held, and acknowledge their deliveries when it commits. A
 * commit is answered `accepted` once every send it made is answered (for a durable message,
 * once the journal has it), or `rejected` with amqp:transaction:rollback when one was
 * refused (the others went: a send cannot be taken back). A rollback (discharge with fail)
 * drops the sends and gives the deliveries back, counted, as Artemis's rollback does. */
#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/disposition.h>
#include <string.h>

#include "amqp.h"

#define DECLARE 0x31ull
#define DISCHARGE 0x32ull
#define DECLARED 0x33ull
#define ACCEPTED 0x24ull

static amqp_txn_t *find(amqp_t *a, pn_bytes_t id) {
  if (id.size != 4) return NULL;
  uint32_t n;
  memcpy(&n, id.start, 4);
  for (amqp_txn_t *t = a->txns; t; t = t->next)
    if (t->id == n) return t;
  return NULL;
}

static void txn_free(mqr__conn_t *c, amqp_txn_t *t) {
  amqp_t *a = c->hs;
  for (amqp_txn_t **pp = &a->txns; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  for (uint32_t i = 0; i < t->n_sends; i++) {
    mqr_free(t->sends[i].address);
    mqr_free(t->sends[i].bytes);
  }
  mqr_free(t->sends);
  mqr_free(t->acks);
  mqr_free(t);
}

void mqr__amqp_txns_free(mqr__conn_t *c) {
  amqp_t *a = c->hs;
  while (a->txns) txn_free(c, a->txns);
}

/* The transaction id a delivery's transactional state names (its state's first field),
 * and the code of the outcome it carries (0: none). */
static pn_bytes_t state_txn(pn_delivery_t *d, uint64_t *outcome) {
  pn_data_t *data = pn_disposition_data(pn_delivery_remote(d));
  *outcome = 0;
  pn_data_rewind(data);
  if (!pn_data_next(data) || pn_data_type(data) != PN_LIST) return pn_bytes_null;
  pn_data_enter(data);
  pn_bytes_t id = pn_data_next(data) && pn_data_type(data) == PN_BINARY ? pn_data_get_binary(data) : pn_bytes_null;
  if (pn_data_next(data) && pn_data_type(data) == PN_DESCRIBED) {
    pn_data_enter(data);
    if (pn_data_next(data) && pn_data_type(data) == PN_ULONG) *outcome = pn_data_get_ulong(data);
    pn_data_exit(data);
  }
  pn_data_exit(data);
  return id;
}

/* d's local state as a list whose first field is t's id (declared, transactional-state),
 * entered: the caller puts the rest, then exits. */
static pn_data_t *state_of(pn_delivery_t *d, const amqp_txn_t *t) {
  pn_data_t *data = pn_disposition_data(pn_delivery_local(d));
  pn_data_clear(data);
  pn_data_put_list(data);
  pn_data_enter(data);
  pn_data_put_binary(data, pn_bytes(4, (const char *)&t->id));
  return data;
}

/* d answered with a transactional state naming t, outcome accepted. */
static void answer_accepted(pn_delivery_t *d, const amqp_txn_t *t) {
  pn_data_t *data = state_of(d, t);
  pn_data_put_described(data);
  pn_data_enter(data);
  pn_data_put_ulong(data, ACCEPTED);
  pn_data_put_list(data);
  pn_data_exit(data);
  pn_data_exit(data);
  pn_delivery_update(d, MQR__AMQP_TXN_STATE);
}

static void reject(pn_delivery_t *d, const char *condition, const char *text) {
  pn_condition_t *cond = pn_disposition_condition(pn_delivery_local(d));
  pn_condition_set_name(cond, condition);
  pn_condition_set_description(cond, text);
  pn_delivery_update(d, PN_REJECTED);
  pn_delivery_settle(d);
}

/* ---- the coordinator ------------------------------------------------------------------------- */

static void declare(mqr__conn_t *c, pn_delivery_t *d) {
  amqp_t *a = c->hs;
  amqp_txn_t *t = mqr_calloc(1, sizeof *t);
  if (t == NULL) {
    reject(d, "amqp:resource-limit-exceeded", "out of memory");
    return;
  }
  t->id = ++a->next_txn;
  t->next = a->txns, a->txns = t;
  pn_data_exit(state_of(d, t));
  pn_delivery_update(d, DECLARED);
  pn_delivery_settle(d);
}

/* Rolled back: its sends dropped, its deliveries back to their queues, counted. */
static void roll_back(mqr__conn_t *c, amqp_txn_t *t) {
  for (uint32_t i = t->n_acks; i-- > 0;) { /* (newest first: each goes back in front of the next) */
    mqr__consumer_nack(t->acks[i].k, t->acks[i].delivery, false);
    pn_delivery_settle(t->acks[i].d);
  }
  txn_free(c, t);
}

/* Committed: its acknowledgements taken, its sends sent in order (the discharge is
 * answered once the last is: mqr__amqp_txn_committed). */
static void commit(mqr__conn_t *c, amqp_txn_t *t, pn_delivery_t *discharge) {
  for (uint32_t i = 0; i < t->n_acks; i++) {
    mqr_broker_ack(t->acks[i].k, t->acks[i].delivery, false);
    pn_delivery_settle(t->acks[i].d);
  }
  t->n_acks = 0;
  t->committing = true;
  if (t->n_sends == 0) {
    mqr__amqp_txn_committed(c, t, discharge);
    return;
  }
  /* (the last send, answered at once, frees t: n is read before) */
  for (uint32_t i = 0, n = t->n_sends; i < n; i++) {
    amqp_txn_send_t *s = &t->sends[i];
    mqr__amqp_send(c, s->address, s->routing_type, s->bytes, s->len, i + 1 == n ? discharge : NULL, t);
  }
}

void mqr__amqp_txn_committed(mqr__conn_t *c, amqp_txn_t *t, pn_delivery_t *discharge) {
  if (t->failed)
    reject(discharge, "amqp:transaction:rollback", "a send of the transaction was refused (the others were sent)");
  else {
    pn_delivery_update(discharge, PN_ACCEPTED);
    pn_delivery_settle(discharge);
  }
  txn_free(c, t);
  mqr__amqp_flush(c);
}

static void discharge(mqr__conn_t *c, pn_delivery_t *d, pn_data_t *args) {
  amqp_t *a = c->hs;
  pn_bytes_t id = pn_data_next(args) && pn_data_type(args) == PN_BINARY ? pn_data_get_binary(args) : pn_bytes_null;
  bool fail = pn_data_next(args) && pn_data_type(args) == PN_BOOL && pn_data_get_bool(args);
  amqp_txn_t *t = find(a, id);
  if (t == NULL || t->committing) {
    reject(d, "amqp:transaction:unknown-id", "no such transaction on this connection");
    return;
  }
  if (fail) {
    roll_back(c, t);
    pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    return;
  }
  commit(c, t, d);
}

void mqr__amqp_txn_control(mqr__conn_t *c, pn_delivery_t *d, const uint8_t *bytes, size_t len) {
  amqp_t *a = c->hs;
  pn_message_clear(a->msg); /* (Proton's decode sets only the sections that came) */
  if (len == 0 || pn_message_decode(a->msg, (const char *)bytes, len) != 0) {
    reject(d, "amqp:decode-error", "the coordinator's transfer is not an AMQP message");
    return;
  }
  pn_data_t *body = pn_message_body(a->msg);
  pn_data_rewind(body);
  uint64_t code = 0;
  if (pn_data_next(body) && pn_data_type(body) == PN_DESCRIBED) {
    pn_data_enter(body);
    if (pn_data_next(body)) {
      if (pn_data_type(body) == PN_ULONG) {
        code = pn_data_get_ulong(body);
      } else if (pn_data_type(body) == PN_SYMBOL) {
        pn_bytes_t s = pn_data_get_symbol(body);
        code = s.size == 17 && memcmp(s.start, "amqp:declare:list", 17) == 0     ? DECLARE
               : s.size == 19 && memcmp(s.start, "amqp:discharge:list", 19) == 0 ? DISCHARGE
                                                                                 : 0;
      }
    }
    if (code == DECLARE) {
      declare(c, d);
    } else if (code == DISCHARGE && pn_data_next(body) && pn_data_type(body) == PN_LIST) {
      pn_data_enter(body);
      discharge(c, d, body);
      pn_data_exit(body);
    } else {
      code = 0;
    }
    pn_data_exit(body);
  }
  if (code == 0) reject(d, "amqp:not-implemented", "the coordinator takes declare and discharge");
}

/* ---- transfers and outcomes in a transaction ---------------------------------------------------- */

bool mqr__amqp_txn_transfer(mqr__conn_t *c, amqp_link_t *lk, pn_delivery_t *d, const uint8_t *bytes, size_t len) {
  if (pn_delivery_remote_state(d) != MQR__AMQP_TXN_STATE) return false;
  uint64_t outcome;
  amqp_txn_t *t = find(c->hs, state_txn(d, &outcome));
  if (t == NULL || t->committing) {
    reject(d, "amqp:transaction:unknown-id", "the transfer names no transaction of this connection");
    return true;
  }
  if (!mqr__grow((void **)&t->sends, &t->cap_sends, t->n_sends + 1, sizeof *t->sends)) {
    reject(d, "amqp:resource-limit-exceeded", "out of memory");
    return true;
  }
  amqp_txn_send_t *s = &t->sends[t->n_sends];
  *s = (amqp_txn_send_t){lk->address ? mqr__amqp_copy_str(lk->address) : NULL, lk->routing_type,
                         mqr_malloc(len ? len : 1), len};
  if (s->bytes == NULL || (lk->address && s->address == NULL)) {
    mqr_free(s->bytes), mqr_free(s->address);
    reject(d, "amqp:resource-limit-exceeded", "out of memory");
    return true;
  }
  memcpy(s->bytes, bytes, len);
  t->n_sends++;
  answer_accepted(d, t);
  pn_delivery_settle(d);
  return true;
}

bool mqr__amqp_txn_outcome(mqr__conn_t *c, amqp_link_t *lk, pn_delivery_t *d, int64_t delivery) {
  uint64_t outcome;
  amqp_txn_t *t = find(c->hs, state_txn(d, &outcome));
  if (t == NULL || t->committing || outcome != ACCEPTED) return false; /* (not held: acknowledged now) */
  if (!mqr__grow((void **)&t->acks, &t->cap_acks, t->n_acks + 1, sizeof *t->acks)) return false;
  t->acks[t->n_acks++] = (amqp_txn_ack_t){lk->k, delivery, d};
  return true;
}

void mqr__amqp_txn_forget(mqr__conn_t *c, mqr_broker_consumer_t *k) {
  amqp_t *a = c->hs;
  for (amqp_txn_t *t = a->txns; t; t = t->next)
    for (uint32_t i = 0; i < t->n_acks;)
      if (t->acks[i].k == k)
        t->acks[i] = t->acks[--t->n_acks];
      else
        i++;
}
