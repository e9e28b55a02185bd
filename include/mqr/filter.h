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

#include "mqr/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The result of an evaluation. A filter matches only when it is TRUE. */
#define MQR_FILTER_FALSE 0
#define MQR_FILTER_TRUE 1
#define MQR_FILTER_UNKNOWN (-1)

typedef struct mqr_filter_s mqr_filter_t;

/* The slot of an identifier, from the caller: >= 0, or -1 to leave it to the filter (then
 * slots are numbered from 0 in order of first use, after the highest one given), or
 * another negative MQR_E* code (MQR_ENOMEM, MQR_ELIMIT), which fails the compile. */
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
MQR_EXTERN int mqr_filter_eval(const mqr_filter_t *f, const mqr_value_t *values, uint32_t n);

/* Whether the filter matches: evaluation TRUE. */
static inline bool mqr_filter_matches(const mqr_filter_t *f, const mqr_value_t *values, uint32_t n) {
  return mqr_filter_eval(f, values, n) == MQR_FILTER_TRUE;
}

/* ---- vocabularies: one set of slots for many filters --------------------------------- */

/* A vocabulary numbers the identifiers of every filter compiled with it (pass
 * mqr_filter_vocab_resolve and the vocabulary to mqr_filter_compile), so that one
 * message's values, set once by name, serve all of them: a router's queue filters and a
 * broker's consumer selectors share one. The headers Artemis's filters can name have
 * fixed slots; every other identifier is a property, numbered from MQR_FILTER_HEADERS
 * in order of first use and kept as long as the vocabulary (at most
 * MQR_FILTER_VOCAB_MAX names).
 *
 * The vocabulary also holds one message's values while its filters are evaluated:
 * mqr_filter_vocab_set_header and _set fill them, mqr_filter_vocab_values reads them,
 * mqr_filter_vocab_clear empties them for the next message (only the slots that were
 * set: its cost does not grow with the vocabulary). Setting allocates nothing. One
 * thread at a time. */
typedef struct mqr_filter_vocab_s mqr_filter_vocab_t;

/* The headers, by slot (the names a filter uses for them). */
typedef enum {
  MQR_HDR_PRIORITY = 0, /* AMQPriority: int, 0-9 */
  MQR_HDR_EXPIRATION,   /* AMQExpiration: long, ms since the epoch (0: never) */
  MQR_HDR_DURABLE,      /* AMQDurable: the string 'DURABLE' or 'NON_DURABLE' */
  MQR_HDR_TIMESTAMP,    /* AMQTimestamp: long, ms since the epoch */
  MQR_HDR_SIZE,         /* AMQSize: int, the message's stored size in bytes */
  MQR_HDR_USERID,       /* AMQUserID: string, or NULL when the message has none */
  MQR_HDR_ADDRESS,      /* AMQAddress: string */
  MQR_HDR_GROUPID,      /* AMQGroupID: string, the _AMQ_GROUP_ID property */
  MQR_FILTER_HEADERS
} mqr_filter_header_t;

#define MQR_FILTER_VOCAB_MAX 65536 /* property names in one vocabulary */

/* The header's identifier ("AMQPriority", ...), or NULL. */
MQR_EXTERN const char *mqr_filter_header_name(int header);

/* A new, empty vocabulary (its header slots only). 0 or MQR_ENOMEM. */
MQR_EXTERN int mqr_filter_vocab_create(mqr_filter_vocab_t **out);
MQR_EXTERN void mqr_filter_vocab_free(mqr_filter_vocab_t *v);

/* A mqr_filter_resolve_fn over a vocabulary (ctx): a header's slot, or the property's,
 * added when new. MQR_ENOMEM, or MQR_ELIMIT past MQR_FILTER_VOCAB_MAX names. */
MQR_EXTERN int32_t mqr_filter_vocab_resolve(void *vocab, mqr_str_t name);

/* How many property names it has (0: filters read headers only, and a message's
 * properties need not be walked), and its slots (headers and properties). */
MQR_EXTERN uint32_t mqr_filter_vocab_names(const mqr_filter_vocab_t *v);
/* The headers some filter names: bit (1u << h) for each mqr_filter_header_t h (a header
 * no filter names need not be set). */
MQR_EXTERN uint32_t mqr_filter_vocab_headers(const mqr_filter_vocab_t *v);
MQR_EXTERN uint32_t mqr_filter_vocab_slots(const mqr_filter_vocab_t *v);

/* Sets a header's value, or a property's by name (a name no filter uses is ignored; a
 * NULL value sets nothing; a second value for one name is ignored). Views must stay
 * valid until mqr_filter_vocab_clear. */
MQR_EXTERN void mqr_filter_vocab_set_header(mqr_filter_vocab_t *v, mqr_filter_header_t h, mqr_value_t value);
MQR_EXTERN void mqr_filter_vocab_set(mqr_filter_vocab_t *v, mqr_str_t name, mqr_value_t value);

/* The values set, by slot, for mqr_filter_eval: *n gets their count. */
MQR_EXTERN const mqr_value_t *mqr_filter_vocab_values(const mqr_filter_vocab_t *v, uint32_t *n);

/* Every value set back to NULL. */
MQR_EXTERN void mqr_filter_vocab_clear(mqr_filter_vocab_t *v);

#ifdef __cplusplus
}
#endif
#endif /* MQR_FILTER_H */
