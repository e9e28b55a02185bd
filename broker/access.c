/* What a client may do: Artemis's security-settings checked for a session's principal.
 * The send path's check reads the row that governs the address from the address's
 * account, cached there with the settings' generation, and the principal's roles as a
 * bit set: a load, a compare and an AND once warm, no allocation. Every other check
 * (consume, browse, create, delete, manage) looks the row up. In-process callers
 * (no principal) and brokers without security-settings are not checked. */
#include <stdio.h>
#include <string.h>

#include "auth.h"

static mqr_roles_t roles_now(mqr_broker_t *b, mqr__principal_t *p) {
  uint32_t gen = mqr__sec_gen(b);
  if (p->gen != gen) { /* reloaded settings number roles anew */
    p->mask = mqr_access_roles(mqr__sec_access(b), mqr_str(p->roles));
    p->gen = gen;
  }
  return p->mask;
}

static int denied(mqr_broker_t *b, const mqr__principal_t *who, mqr_permission_t p, mqr_str_t address,
                  mqr_error_t *err) {
  mqr_str_t name = mqr__principal_name(who);
  mqr__log(b, MQR_LOG_WARN, "security: user '%.*s' may not %s on '%.*s'", (int)name.len, name.ptr,
           mqr_permission_name(p), (int)(address.len > 200 ? 200 : address.len), address.ptr);
  return mqr_error_set(err, MQR_EPERM, "user '%.*s' may not %s on '%.*s'", (int)name.len, name.ptr,
                       mqr_permission_name(p), (int)(address.len > 200 ? 200 : address.len), address.ptr);
}

bool mqr__allowed(mqr_broker_t *b, mqr__principal_t *who, mqr_permission_t p, mqr_str_t address) {
  const mqr_access_t *access = mqr__sec_access(b);
  return access == NULL || who == NULL || mqr_access_allows(mqr_access_lookup(access, address), p, roles_now(b, who));
}

bool mqr__may(mqr_broker_t *b, mqr__principal_t *who, mqr_permission_t p, mqr_str_t address, mqr_error_t *err) {
  const mqr_access_t *access = mqr__sec_access(b);
  if (access == NULL || who == NULL) return true;
  if (mqr_access_allows(mqr_access_lookup(access, address), p, roles_now(b, who))) return true;
  denied(b, who, p, address, err);
  return false;
}

bool mqr__session_may(const mqr__session_t *s, mqr_permission_t p, mqr_str_t address, mqr_error_t *err) {
  return mqr__may(s->b, s->who, p, address, err);
}

void mqr__session_set_principal(mqr__session_t *s, mqr__principal_t *who) {
  mqr__principal_release(s->who);
  s->who = who;
}

mqr__principal_t *mqr__session_principal(const mqr__session_t *s) { return s->who; }

/* A send to an address that exists: SEND on it (address as the route will see it, the
 * listener's prefix off; address::queue is checked on its address). An address the send
 * would make is checked by the route's create check below. */
int mqr__access_send(mqr_broker_t *b, const mqr__send_t *s, mqr_str_t address, mqr_error_t *err) {
  const mqr_access_t *access = mqr__sec_access(b);
  if (access == NULL || s->who == NULL) return 0;
  for (size_t i = 0; i + 1 < address.len; i++)
    if (address.ptr[i] == ':' && address.ptr[i + 1] == ':') {
      address.len = i;
      break;
    }
  mqr_address_t *a = mqr_router_find_address(&b->router, address);
  if (a == NULL || (mqr_address_flags(a) & MQR_ADDRESS_WILDCARD)) return 0; /* the route decides */
  mqr__acct_t *acct = mqr__acct_of(b, a);
  if (acct == NULL) return mqr_error_set(err, MQR_ENOMEM, "out of memory checking a send");
  uint32_t gen = mqr__sec_gen(b);
  if (acct->access_gen != gen) {
    acct->access_row = mqr_access_lookup(access, address);
    acct->access_gen = gen;
  }
  if (mqr_access_allows(acct->access_row, MQR_PERM_SEND, roles_now(b, s->who))) return 0;
  return denied(b, s->who, MQR_PERM_SEND, address, err);
}

/* The route asks before it makes an address (SEND and CREATE_ADDRESS on it, as Artemis
 * checks the send before it auto-creates), a routing type on one (CREATE_ADDRESS), or a
 * queue (CREATE_DURABLE_QUEUE or CREATE_NON_DURABLE_QUEUE on its address). */
int mqr__access_create(void *ctx, uint32_t what, mqr_str_t name, bool durable, mqr_error_t *err) {
  const mqr__send_fill_t *f = ctx;
  if (f == NULL || f->s->who == NULL) return 0;
  mqr_broker_t *b = f->b;
  mqr__principal_t *who = f->s->who;
  if (what == MQR_ROUTE_CREATED_ADDRESS && !mqr__may(b, who, MQR_PERM_SEND, name, err)) return MQR_EPERM;
  if (what == MQR_ROUTE_CREATED_QUEUE) {
    mqr_str_t address = f->address;
    for (size_t i = 0; i + 1 < address.len; i++)
      if (address.ptr[i] == ':' && address.ptr[i + 1] == ':') {
        address.len = i;
        break;
      }
    return mqr__may(b, who, durable ? MQR_PERM_CREATE_DURABLE_QUEUE : MQR_PERM_CREATE_NON_DURABLE_QUEUE, address, err)
               ? 0
               : MQR_EPERM;
  }
  return mqr__may(b, who, MQR_PERM_CREATE_ADDRESS, name, err) ? 0 : MQR_EPERM;
}
