/* mqr filter expressions: the message selectors of JMS 2.0 (a subset of SQL-92's
 * conditional expressions), as ActiveMQ Artemis evaluates them for queue filters,
 * consumer selectors and diverts (docs/filters.md).
 *
 *   comparisons   = <> < <= > >=        (numbers promoted as Java does; strings = <>, and
 *                                         < > between two property values; booleans = <>)
 *   logic         AND OR NOT            three-valued: NULL and non-like types give UNKNOWN
 *   arithmetic    + - * / %  unary + -  (int and long wrap; / and % in double)
 *   ranges        x [NOT] BETWEEN a AND b
 *   patterns      x [NOT] LIKE 'p%t_rn' [ESCAPE '\']
 *   sets          x [NOT] IN ('a', 'b')
 *   nulls         x IS [NOT] NULL
 *   literals      'string' ('' for a quote), 42, 42L, 0x2A, 052, 4.2, 4.2E1, TRUE, FALSE
 *
 * Keywords are case-insensitive, identifiers case-sensitive. A selector that begins with
 * "hyphenated_props:" may use '-' inside identifiers (Artemis's extension).
 *
 * A filter is compiled once into a program over slots: each identifier it names gets a
 * slot, numbered by the caller's resolver (or in order of first use), so that evaluation
 * reads values by index, looks nothing up by name and allocates nothing. Evaluation is
 * re-entrant; a compiled filter may be shared by threads. */
#ifndef MQR_FILTER_H
#define MQR_FILTER_H

#include "mqr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The types of a value a filter reads (a message property or header). */
typedef enum {
  MQR_FV_NULL = 0, /* missing, or null */
  MQR_FV_BOOL,
  MQR_FV_INT,
  MQR_FV_LONG,
  MQR_FV_FLOAT,
  MQR_FV_DOUBLE,
  MQR_FV_STRING, /* UTF-8 */
  MQR_FV_BYTES   /* compares with nothing: any comparison with it is false */
} mqr_fvalue_type_t;

typedef struct {
  mqr_fvalue_type_t type;
  union {
    bool b;
    int32_t i;
    int64_t l;
    float f;
    double d;
    mqr_str_t s; /* STRING and BYTES: a view, valid during the evaluation */
  } u;
} mqr_fvalue_t;

/* The result of an evaluation. A filter matches only when it is TRUE. */
#define MQR_FILTER_FALSE 0
#define MQR_FILTER_TRUE 1
#define MQR_FILTER_UNKNOWN (-1)

typedef struct mqr_filter_s mqr_filter_t;

/* The slot of an identifier, from the caller: >= 0, or -1 to leave it to the filter (then
 * slots are numbered from 0 in order of first use, after the highest one given). */
typedef int32_t (*mqr_filter_resolve_fn)(void *ctx, mqr_str_t name);

/* The deepest a program's evaluation stack may go: deeper selectors are refused. */
#define MQR_FILTER_MAX_DEPTH 64

/* Compiles text (resolve may be NULL). On success *out (free with mqr_filter_free).
 * Errors: MQR_ESYNTAX (err->column is the 1-based column of the fault, err->message says
 * what was expected), MQR_ELIMIT (nested deeper than MQR_FILTER_MAX_DEPTH, or longer than
 * 64 KiB), MQR_ENOMEM. An empty text is MQR_ESYNTAX: a missing filter is NULL, which
 * matches everything. */
MQR_EXTERN int mqr_filter_compile(mqr_str_t text, mqr_filter_resolve_fn resolve, void *ctx, mqr_filter_t **out,
                                  mqr_error_t *err);

/* Frees a filter; NULL is allowed. */
MQR_EXTERN void mqr_filter_free(mqr_filter_t *f);

/* The slots the filter reads: one past the highest, and each slot's identifier (an empty
 * view for a slot it does not read). Views live as long as the filter. */
MQR_EXTERN uint32_t mqr_filter_slot_count(const mqr_filter_t *f);
MQR_EXTERN mqr_str_t mqr_filter_slot_name(const mqr_filter_t *f, uint32_t slot);

/* The selector's text, as compiled (without a hyphenated_props: prefix). */
MQR_EXTERN mqr_str_t mqr_filter_text(const mqr_filter_t *f);

/* Evaluates the filter on values[0..n) by slot (a slot at or past n reads NULL):
 * MQR_FILTER_TRUE, MQR_FILTER_FALSE or MQR_FILTER_UNKNOWN. No allocation. A NULL filter
 * is TRUE. */
MQR_EXTERN int mqr_filter_eval(const mqr_filter_t *f, const mqr_fvalue_t *values, uint32_t n);

/* Whether the filter matches: evaluation TRUE. */
static inline bool mqr_filter_matches(const mqr_filter_t *f, const mqr_fvalue_t *values, uint32_t n) {
  return mqr_filter_eval(f, values, n) == MQR_FILTER_TRUE;
}

#ifdef __cplusplus
}
#endif
#endif /* MQR_FILTER_H */
