/* Brokers in processes of their own, for the benchmarks that measure through one
 * (loopback.c, durable.c): a free port on 127.0.0.1, starting a broker as a shell would,
 * waiting for it to listen, stopping it. Header-only. */
#ifndef MQR_BENCH_PROC_H
#define MQR_BENCH_PROC_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mqr/client.h"

static inline double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A port free on 127.0.0.1 now, for a broker to listen on. */
static inline int bench_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t len = sizeof a;
  bind(fd, (struct sockaddr *)&a, sizeof a);
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

/* Writes path: mqrd's config for node `node` (1-based) of a benchmark's cluster, its
 * clients at port, its data in dir/nNODE, every address replicated, addresses (lines of
 * the addresses map), its Raft groups from port raft, peers (the list's items), and more
 * of the cluster map (", key: value" pairs, or ""). false when the file cannot be
 * written. */
static inline bool bench_cluster_config(const char *path, int port, const char *dir, int node, const char *addresses,
                                        int raft, int groups, const char *peers, const char *more) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return false;
  fprintf(f,
          "security: {allow-anonymous: true}\nlisteners:\n  - {name: bench, host: 127.0.0.1, port: %d}\n"
          "persistence: {directory: %s/n%d}\n"
          "address-settings:\n  \"#\": {replicated: true}\n"
          "addresses:\n%s"
          "cluster: {node-id: %d, bind: \"127.0.0.1:%d\", groups: %d, peers: [%s]%s}\n",
          port, dir, node, addresses, node, raft, groups, peers, more);
  return fclose(f) == 0;
}

/* A non-blocking TCP connection to 127.0.0.1:port with TCP_NODELAY, as the raw clients
 * (heads.c, amqp.c) use it; -1 when refused. */
static inline int bench_dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

/* Starts a broker's process with its output discarded (or, with MQR_BENCH_BROKER_LOG
 * set, appended to that file), as a shell would (default signal dispositions). */
static inline pid_t bench_spawn(const char *path, char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL);
    const char *log = getenv("MQR_BENCH_BROKER_LOG");
    int null = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0644) : open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execv(path, argv);
    _exit(127);
  }
  return pid;
}

/* Waits at most 10 s until something listens on port. */
static inline bool bench_listening(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  for (double end = bench_now() + 10; bench_now() < end; usleep(20000)) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (ok) return true;
  }
  return false;
}

/* mqr's clients for a benchmark through mqrd: a producer, and with on_message a consumer of
 * queue `bench` with credit, connected to url on loop. 0, or -1 with why. */
static int bench_ready_count; /* answers to the connects and the subscribe (one setup at a time) */

static inline void bench_ready(mqr_client_t *c, int status, const mqr_frame_t *f, void *arg) {
  (void)c, (void)f, (void)arg; /* arg is the benchmark's: the subscription's messages get it too */
  bench_ready_count += status == 0 ? 1 : 100;
}

/* For a tls:// URL: the CA (a PEM file) the broker's certificate chains to. */
static const char *bench_mqr_ca;
/* Where the consumer connects when not to the producer's url (NULL: the same). */
static const char *bench_mqr_sub_url;

static inline int bench_mqr_connect(uv_loop_t *loop, const char *url, mqr_client_t **pub, mqr_client_t **sub,
                                    mqr_client_sub_t **subscription, uint32_t credit, mqr_client_message_fn on_message,
                                    void *arg, char *why, size_t cap) {
  mqr_client_options_t opt = {.client_id = "bench", .tls_ca = bench_mqr_ca};
  mqr_error_t err = {0};
  int ready = 0, want = on_message ? 2 : 1;
  if (mqr_client_create(loop, &opt, pub) || mqr_client_connect(*pub, url, bench_ready, &ready, &err) ||
      (on_message &&
       (mqr_client_create(loop, &opt, sub) ||
        mqr_client_connect(*sub, bench_mqr_sub_url ? bench_mqr_sub_url : url, bench_ready, &ready, &err)))) {
    snprintf(why, cap, "connect: %s", err.message);
    return -1;
  }
  while (bench_ready_count < want) uv_run(loop, UV_RUN_ONCE);
  if (bench_ready_count == want && on_message &&
      mqr_client_subscribe(*sub, MQR_STR("bench"), MQR_ROUTING_NONE, MQR_STR(""), MQR_STR(""), credit, on_message,
                           bench_ready, arg, subscription, &err) == 0)
    while (bench_ready_count < want + 1) uv_run(loop, UV_RUN_ONCE);
  if (bench_ready_count != want + (on_message ? 1 : 0)) {
    snprintf(why, cap, "the broker refused%s%s", err.message[0] ? ": " : "", err.message);
    return -1;
  }
  return 0;
}

static inline void bench_stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

/* Undoes bench_mqr_connect (either client may be NULL), closes the loop, stops mqrd. */
static inline void bench_mqr_close(uv_loop_t *loop, mqr_client_t *pub, mqr_client_t *sub, pid_t mqrd) {
  if (pub) mqr_client_close(pub, NULL, NULL);
  if (sub) mqr_client_close(sub, NULL, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  bench_stop(mqrd);
}

/* The run's self-signed P-256 certificate for 127.0.0.1 (tls=1 benchmarks), made once per
 * process by the openssl tool into bench_tls_dir (cert.pem, key.pem), removed at exit. The
 * throwaway key is readable by all: mosquitto started as root reads it as its own user. */
static char bench_tls_dir[64];

static inline void bench_remove_cert(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", bench_tls_dir);
  if (system(cmd) != 0) return;
}

static inline bool bench_make_cert(void) {
  if (bench_tls_dir[0]) return true;
  snprintf(bench_tls_dir, sizeof bench_tls_dir, "/tmp/mqr-bench-tls-%d", (int)getpid());
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
           "-keyout %s/key.pem -out %s/cert.pem -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
           ">/dev/null 2>&1 && chmod 644 %s/key.pem",
           bench_tls_dir, bench_tls_dir, bench_tls_dir, bench_tls_dir);
  if (system(cmd) != 0) {
    bench_tls_dir[0] = 0;
    return false;
  }
  mqr_bench_at_exit(bench_remove_cert);
  return true;
}

#endif
