/* The `mqr` tool's commands, one file each, and what they share (util.c). Each command
 * takes argv from its name on and returns the exit status: 0 done, 1 an error (said on
 * stderr as "mqr: ..."), 2 a usage error (the command's usage on stderr). */
#ifndef MQR_CLI_COMMANDS_H
#define MQR_CLI_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mqr/client.h"
#include "mqr/mqr.h"

#define DEFAULT_URL "tcp://127.0.0.1:61616" /* --url when not given */

int mqr_cmd_schema(int argc, char **argv);
int mqr_cmd_avro(int argc, char **argv);
int mqr_cmd_send(int argc, char **argv);
int mqr_cmd_recv(int argc, char **argv);
int mqr_cmd_stat(int argc, char **argv);
int mqr_cmd_journal(int argc, char **argv);
int mqr_cmd_address(int argc, char **argv);
int mqr_cmd_queue(int argc, char **argv);
int mqr_cmd_cluster(int argc, char **argv);
int mqr_cmd_user(int argc, char **argv);

/* Each command's usage text, for --help (stdout, exit 0) and usage errors (stderr). */
extern const char mqr_usage_send[], mqr_usage_recv[], mqr_usage_stat[], mqr_usage_avro[], mqr_usage_schema[],
    mqr_usage_journal[], mqr_usage_address[], mqr_usage_queue[], mqr_usage_user[], mqr_usage_cluster[];

/* Prints the usage text on stderr and returns 2. */
int cli_usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "mqr: " and the message on stderr; returns 1. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A broker's refusal: "mqr: NAME (code): message"; returns 1. */
int cli_broker_error(const mqr_error_t *err);

/* A tls:// URL's --ca, --cert and --key, taken off every command's arguments by main,
 * and the connections every command makes with them. */
extern const char *cli_tls_ca, *cli_tls_cert, *cli_tls_key, *cli_user, *cli_password;
int cli_bconnect(const char *url, const char *client_id, int timeout_ms, mqr_bclient_t **out, mqr_error_t *err);
void cli_client_options(mqr_client_options_t *opt); /* the TLS files into opt */
/* What the usage of a command that connects adds. */
/* --url URL,URL,...: the nodes of a cluster (docs/cluster.md), tried in turn. */
#define CLI_MAX_URLS 16
#define CLI_URLS_USAGE                                                                                                 \
  "  --url URL,URL,... (a cluster's nodes): when one refuses because another node leads the\n"                         \
  "  address's group (ENOTLEADER), cannot be reached or goes, the next is tried.\n"
/* Splits a comma-separated list of URLs into urls: how many, or 0 (none, or too many). */
int cli_urls(const char *list, char urls[][512]);

#define CLI_TLS_USAGE                                                                                                  \
  "  --user NAME --password P (or tcp://NAME:P@HOST:PORT): who it is; SCRAM-SHA-256 proves the\n"                      \
  "  password without sending it, over TLS it goes as PLAIN.\n"                                                        \
  "  --url tls://HOST:PORT: over TLS, the broker's certificate checked against --ca FILE\n"                            \
  "  (default: the system's CAs); --cert FILE --key FILE prove who the client is.\n"

/* Option values, refused whole when not what is asked (`--count abc`, `--timeout -1`). */
bool cli_long(const char *opt, const char *s, long min, long max, long *out);
/* --property K[:TYPE]=V (eq points at the "="): the name and the typed value (views into
 * arg). A string unless TYPE names a value type. */
bool cli_property(const char *arg, const char *eq, mqr_str_t *key, mqr_value_t *value);
bool cli_seconds(const char *opt, const char *s, double *out);
bool cli_routing_type(const char *s, int *rt); /* ANYCAST or MULTICAST, any case */
bool cli_url(const char *s);                   /* tcp://HOST:PORT */

/* The whole of a file or stream; NULL (file: after saying why) on failure. */
char *cli_read_file(const char *path, size_t *len);
int cli_read_all(FILE *f, uint8_t **out, size_t *len);
/* Reads and parses a schema: into cache when given (the cache owns it), else as the
 * caller's own (*own). NULL after saying why. */
const mqr_avro_schema_t *cli_load_schema(const char *path, mqr_avro_cache_t *cache, mqr_avro_schema_t **own);

/* A connection error in words a person reads: "connection refused (is mqrd running
 * and listening there?)". */
const char *cli_connect_error(const mqr_error_t *err, char *buf, size_t cap);

/* Set by SIGINT/SIGTERM once cli_catch_interrupt has run. */
extern volatile int cli_interrupted;
void cli_catch_interrupt(void);

#endif
