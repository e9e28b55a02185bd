/* mqrd: the broker daemon. One libuv loop, the listeners of a routing config, log lines
 * on stderr. SIGINT/SIGTERM: stop accepting, finish what is in flight, close cleanly.
 * SIGHUP: reload the config file and apply what can be applied live. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mqr/broker.h"

typedef struct {
  uv_loop_t *loop;
  mqr_broker_t *broker;
  const char *config_path;
  const char *data_dir;
  bool recover_truncate;
  mqr_config_t *config;
  uv_signal_t sigint, sigterm, sighup;
  mqr_log_level_t level;
  bool level_given; /* --log-level: over the config's */
  bool stopping;
} daemon_t;

/* jemalloc's options (mqrd links jemalloc; a sanitizer build does not, and then nothing
 * reads this): freed memory stays with the process for 30 s before it goes back to the
 * system, so that the memory of a backlog that drained is reused, not faulted in afresh
 * (its first touch costs about as much as the message's delivery), and a background
 * thread returns it, not the loop. MALLOC_CONF in the environment goes over it. */
extern const char *malloc_conf;
__attribute__((visibility("default"))) const char *malloc_conf =
    "background_thread:true,dirty_decay_ms:30000,muzzy_decay_ms:30000";

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

static void logf_(daemon_t *d, mqr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void logf_(daemon_t *d, mqr_log_level_t level, const char *fmt, ...) {
  (void)d;
  if (level > mqrd_log_level()) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  mqrd_log_line(NULL, level, line);
}

/* The log's level and format from the config (the level: --log-level's when given). */
static void apply_log(daemon_t *d, const mqr_config_t *cfg) {
  const mqr_log_config_t *lc = mqr_config_log(cfg);
  mqr_log_level_t level = d->level_given ? d->level : lc->level >= 0 ? (mqr_log_level_t)lc->level : MQR_LOG_INFO;
  mqrd_log_set(level, lc->json);
  if (d->broker) mqr_broker_set_log_level(d->broker, level);
}

/* Loads the config (the file, or the embedded default); problems are logged. */
static mqr_config_t *load(daemon_t *d) {
  mqr_error_t items[32];
  mqr_diags_t diags;
  mqr_diags_init(&diags, items, 32);
  mqr_config_t *cfg = NULL;
  int rc = d->config_path ? mqr_config_load_file(d->config_path, &cfg, &diags) : mqr_config_load_default(&cfg, &diags);
  for (uint32_t i = 0; i < diags.count; i++) {
    char msg[1024];
    logf_(d, items[i].code ? MQR_LOG_ERROR : MQR_LOG_WARN, "%s", mqr_error_format(&items[i], msg, sizeof msg));
  }
  if (rc == MQR_EIO) logf_(d, MQR_LOG_ERROR, "%s: cannot read the config", d->config_path);
  if (rc == MQR_ENOMEM) logf_(d, MQR_LOG_ERROR, "out of memory loading the config");
  return rc ? NULL : cfg;
}

static void on_closed(void *arg) {
  daemon_t *d = arg;
  d->broker = NULL;
  logf_(d, MQR_LOG_INFO, "stopped");
}

/* The broker cannot go on safely (a cluster group's Raft log could not be written): the
 * process ends now, as after a kill, without closing it; what was answered OK is on
 * disk. A supervisor starts it again (contrib/systemd: Restart=on-failure). */
static void on_fatal(void *ctx, const char *why) {
  daemon_t *d = ctx;
  logf_(d, MQR_LOG_ERROR, "%s: mqrd stops now, without closing; start it again once the disk is fixed", why);
  fflush(stderr);
  _exit(1);
}

static void on_signal(uv_signal_t *h, int signum) {
  daemon_t *d = h->data;
  if (signum == SIGHUP) {
    if (d->stopping) return;
    logf_(d, MQR_LOG_INFO, "SIGHUP: reloading %s", d->config_path ? d->config_path : "the embedded config");
    mqr_config_t *cfg = load(d);
    if (cfg == NULL) {
      logf_(d, MQR_LOG_ERROR, "reload: the config has errors; nothing applied");
      return;
    }
    uint32_t skipped = 0;
    mqr_error_t err;
    if (mqr_broker_reload(d->broker, cfg, &skipped, &err) != 0) {
      char msg[1024];
      logf_(d, MQR_LOG_ERROR, "reload: %s (what came before it is applied)", mqr_error_format(&err, msg, sizeof msg));
      mqr_config_destroy(cfg); /* the broker kept the old config */
      return;
    }
    mqr_config_destroy(d->config);
    d->config = cfg;
    apply_log(d, cfg);
    logf_(d, MQR_LOG_INFO, "reload: done%s", skipped ? "; some changes wait for a restart (see above)" : "");
    return;
  }
  if (d->stopping) return;
  d->stopping = true;
  logf_(d, MQR_LOG_INFO, "%s: shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
  uv_close((uv_handle_t *)&d->sigint, NULL);
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  uv_close((uv_handle_t *)&d->sighup, NULL);
  mqr_broker_close(d->broker, on_closed, d);
}

static void usage(FILE *f) {
  fputs("usage: mqrd [--config FILE] [--data-dir DIR] [--recover=stop|truncate] [--log-level error|warn|info|debug]\n"
        "            [--check] [--urls] [--version] [--help]\n"
        "  --config FILE    the routing config (default: the embedded conf/mqr.yaml)\n"
        "  --data-dir DIR   the journal of durable messages (over the config's persistence directory;\n"
        "                   turns persistence on)\n"
        "  --recover=MODE   a journal damaged in the middle: stop (the default: mqrd does not start, and\n"
        "                   says where) or truncate (cut it there; the damaged files are kept as *.damaged)\n"
        "  --check          load and check the config, then exit\n"
        "  --urls           print the URL of each listener of the config, then exit\n"
        "  --log-level L    log lines up to L on stderr (default info)\n"
        "Signals: SIGINT, SIGTERM stop cleanly (durable messages stay in the journal); SIGHUP reloads\n"
        "the config.\n"
        "Exit status: 0 ok, 1 error (a bad config, a port in use, a damaged journal, a cluster's Raft\n"
        "log that cannot be written), 2 usage.\n",
        f);
}

int main(int argc, char **argv) {
  mqr_broker_register_protocols(); /* before any config: the listeners' protocol blocks */
  daemon_t d = {.level = MQR_LOG_INFO};
  bool check = false, urls = false;
  static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                       {"data-dir", required_argument, NULL, 'd'},
                                       {"recover", required_argument, NULL, 'r'},
                                       {"check", no_argument, NULL, 'k'},
                                       {"urls", no_argument, NULL, 'u'},
                                       {"log-level", required_argument, NULL, 'l'},
                                       {"version", no_argument, NULL, 'V'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
    case 'c': d.config_path = optarg; break;
    case 'd': d.data_dir = optarg; break;
    case 'r':
      if (strcmp(optarg, "truncate") != 0 && strcmp(optarg, "stop") != 0) {
        fprintf(stderr, "mqrd: --recover takes stop or truncate, not '%s'\n", optarg);
        return 2;
      }
      d.recover_truncate = strcmp(optarg, "truncate") == 0;
      break;
    case 'k': check = true; break;
    case 'u': urls = true; break;
    case 'l': {
      int i = 0;
      while (i < 4 && strcasecmp(optarg, level_names[i]) != 0) i++;
      if (i == 4) {
        fprintf(stderr, "mqrd: unknown log level '%s'\n", optarg);
        return 2;
      }
      d.level = (mqr_log_level_t)i;
      d.level_given = true;
      mqrd_log_set(d.level, false);
      break;
    }
    case 'V': printf("mqrd %s\n", mqr_version()); return 0;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind != argc) {
    usage(stderr);
    return 2;
  }
  d.config = load(&d);
  if (d.config == NULL) return 1;
  apply_log(&d, d.config);
  if (urls) {
    for (uint32_t i = 0; i < mqr_config_listener_count(d.config); i++) {
      const mqr_listener_config_t *l = mqr_config_listener(d.config, i);
      printf(strchr(l->host, ':') ? "%s://[%s]:%u\n" : "%s://%s:%u\n", l->tls.enabled ? "tls" : "tcp", l->host,
             l->port);
    }
    mqr_config_destroy(d.config);
    return 0;
  }
  if (check) {
    printf("%s: ok: %u listeners, %u addresses, %u queues, %u address-settings\n", mqr_config_file(d.config),
           mqr_config_listener_count(d.config), mqr_config_address_count(d.config), mqr_config_queue_count(d.config),
           mqr_config_settings_count(d.config));
    mqr_config_destroy(d.config);
    return 0;
  }
  /* A client that resets its connection while a delivery is being written must not end
   * the daemon, however it was started (a shell's default dispositions included). */
  signal(SIGPIPE, SIG_IGN);
  uv_loop_t loop;
  uv_loop_init(&loop);
  d.loop = &loop;
  mqr_broker_options_t opt = {.config = d.config,
                              .listen = true,
                              .log = mqrd_log_line,
                              .log_level = mqrd_log_level(),
                              .data_dir = d.data_dir,
                              .recover_truncate = d.recover_truncate,
                              .fatal = on_fatal,
                              .fatal_ctx = &d};
  mqr_error_t err;
  if (mqr_broker_create(&loop, &opt, &d.broker, &err) != 0) {
    char msg[1024];
    logf_(&d, MQR_LOG_ERROR, "%s", mqr_error_format(&err, msg, sizeof msg));
    uv_run(&loop, UV_RUN_DEFAULT); /* let the half-made broker close */
    uv_loop_close(&loop);
    mqr_config_destroy(d.config);
    return 1;
  }
  uv_signal_init(&loop, &d.sigint);
  uv_signal_init(&loop, &d.sigterm);
  uv_signal_init(&loop, &d.sighup);
  d.sigint.data = d.sigterm.data = d.sighup.data = &d;
  uv_signal_start(&d.sigint, on_signal, SIGINT);
  uv_signal_start(&d.sigterm, on_signal, SIGTERM);
  uv_signal_start(&d.sighup, on_signal, SIGHUP);
  char where[512] = "";
  size_t at = 0;
  for (uint32_t i = 0; i < mqr_config_listener_count(d.config) && at < sizeof where - 64; i++) {
    const mqr_listener_config_t *l = mqr_config_listener(d.config, i);
    at += (size_t)snprintf(where + at, sizeof where - at, strchr(l->host, ':') ? "%s%s://[%s]:%d" : "%s%s://%s:%d",
                           i ? ", " : " on ",
                           l->protocols == MQR_PROTOCOL_HTTP ? (l->tls.enabled ? "https" : "http")
                           : l->tls.enabled                  ? "tls"
                                                             : "tcp",
                           l->host, mqr_broker_listener_port(d.broker, i));
    /* A listener others can reach that lets anyone in, or lets everyone do everything. */
    const mqr_security_config_t *sc = mqr_config_security(d.config);
    bool loopback = !strncmp(l->host, "127.", 4) || !strcmp(l->host, "::1") || !strcmp(l->host, "localhost");
    if (!loopback && sc->allow_anonymous)
      logf_(&d, MQR_LOG_WARN,
            "listener '%s' on %s accepts anonymous clients (allow-anonymous: true): anyone who reaches it is let in",
            l->name, l->host);
    if (!loopback && mqr_config_security_setting_count(d.config) == 0)
      logf_(&d, MQR_LOG_WARN,
            "listener '%s' on %s: the config has no security-settings, so every client it lets in may do everything",
            l->name, l->host);
    if (!loopback && !l->tls.enabled && sc->users_file)
      logf_(&d, MQR_LOG_WARN, "listener '%s' on %s has no tls: passwords cross the network in the clear", l->name,
            l->host);
  }
  if (mqr_config_listener_count(d.config) == 0)
    logf_(&d, MQR_LOG_WARN, "the config has no listeners: no client can connect (add one under listeners:)");
  const mqr_persistence_config_t *pc = mqr_config_persistence(d.config);
  const char *journal = d.data_dir ? d.data_dir : pc->enabled ? pc->directory : NULL;
  logf_(&d, MQR_LOG_INFO, "mqrd %s ready%s (%s; %s%s)", mqr_version(), where,
        d.config_path ? d.config_path : "embedded config", journal ? "journal in " : "no persistence",
        journal ? journal : "");
  uv_run(&loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&loop);
  mqr_config_destroy(d.config);
  if (rc != 0) {
    fprintf(stderr, "mqrd: handles left open at exit\n");
    return 1;
  }
  return 0;
}
