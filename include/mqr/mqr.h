/* mqr: every public header. */
#ifndef MQR_H
#define MQR_H

#include "mqr/codec.h"
#include "mqr/common.h"
#include "mqr/config.h"
#include "mqr/filter.h"
#include "mqr/journal.h"
#include "mqr/routing.h"

#endif /* MQR_H */
