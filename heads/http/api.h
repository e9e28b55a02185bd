/* The management API's parts (api.c: routes, addresses and queues; api_broker.c: the
 * broker, connections, the console's session), and what they share: JSON answers and
 * query parameters. */
#ifndef MQR_HEADS_HTTP_API_H
#define MQR_HEADS_HTTP_API_H

#include <jansson.h>

#include "http.h"

#define MQR__API_LIST_DEFAULT 100
#define MQR__API_LIST_MAX 1000
/* Artemis's management address: manage on it is manage on the broker (connections). */
#define MQR__API_MANAGEMENT_ADDRESS "activemq.management"

/* Answers: j (taken) with status; {"error", "code"} with the status rc calls for; either,
 * as rc < 0 says (err's message, or rc's text; ok taken either way). */
void mqr__api_json(mqr__http_answer_t *a, int status, json_t *j);
void mqr__api_error(mqr__http_answer_t *a, int rc, const char *message);
void mqr__api_done(mqr__http_answer_t *a, int rc, const mqr_error_t *err, json_t *ok);
json_t *mqr__api_str(mqr_str_t s); /* a JSON string of s (UTF-8 already) */
/* A query parameter, percent-decoded into buf (false when absent); as an integer within
 * [min, max] (dflt when absent, min when not a number). */
bool mqr__api_param(mqr_str_t query, const char *key, char *buf, size_t cap);
long mqr__api_param_long(mqr_str_t query, const char *key, long dflt, long min, long max);
/* A listing's page: offset and limit from the query; total counts the matches. */
typedef struct {
  long offset, limit, total;
} mqr__api_page_t;
mqr__api_page_t mqr__api_page(mqr_str_t query);
bool mqr__api_on_page(mqr__api_page_t *p); /* one more match: whether it is on the page */
/* {"total", "offset", "limit", key: items} (items taken). */
void mqr__api_page_answer(mqr__http_answer_t *a, const mqr__api_page_t *p, const char *key, json_t *items);
/* Whether name holds search ("" holds anything). */
bool mqr__api_matches(mqr_str_t name, mqr_str_t search);

void mqr__api_broker(mqr__conn_t *c, mqr__http_answer_t *a);
void mqr__api_connections(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a);
void mqr__api_close_connection(mqr__conn_t *c, const mqr__http_request_t *r, mqr_str_t id, mqr__http_answer_t *a);
void mqr__api_session(mqr__conn_t *c, const mqr__http_request_t *r, mqr__http_answer_t *a);

#endif
