/* Who a client is (auth.c) and what it may do (access.c): the core's side of security,
 * over the security library (mqr/security.h). Private to the core; heads see the
 * principal and the checks through core.h. */
#ifndef MQR_BROKER_AUTH_H
#define MQR_BROKER_AUTH_H

#include <mqr/security.h>

#include "broker_int.h"

typedef struct mqr__sec_s mqr__sec_t;

struct mqr__principal_s {
  uint32_t refs;
  mqr__sec_t *sec;
  char *name;       /* "" for anonymous */
  char *roles;      /* comma-separated, as its user has them now */
  mqr_roles_t mask; /* roles as the security-settings number them (gen's) */
  uint32_t gen;
  bool anonymous;
  bool revoked; /* its user was removed, or anonymous clients no longer allowed */
  struct mqr__principal_s *next, *prev;
};

/* At start (0, or the users file's error), at a reload (the previous kept, and logged,
 * when the new cannot be read), at close (delayed answers dropped), and freed. */
int mqr__sec_open(mqr_broker_t *b, mqr_error_t *err);
void mqr__sec_reload(mqr_broker_t *b, const mqr_config_t *cfg);
void mqr__sec_close(mqr_broker_t *b);
void mqr__sec_free(mqr_broker_t *b);

/* The compiled security-settings, NULL when there are none (nothing is checked); their
 * generation (a reload bumps it: cached rows and masks are stale). */
const mqr_access_t *mqr__sec_access(const mqr_broker_t *b);
uint32_t mqr__sec_gen(const mqr_broker_t *b);

#endif
