/* Integration-test helpers: a real mqrd started on 127.0.0.1 with an ephemeral port and a
 * config of the test's own, its log read from a pipe, and raw sockets for frames a
 * well-behaved client never sends. Header-only: each test is one executable. */
#ifndef MQR_TESTS_MQRD_PROC_H
#define MQR_TESTS_MQRD_PROC_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  pid_t pid;
  int log_fd; /* mqrd's stderr */
  char log[1 << 16];
  size_t log_len;
  int port;
  char url[64];
  char config_path[256];
} mqrd_t;

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* Reads what mqrd has logged, waiting at most wait_s for more. */
static inline void mqrd_read_log(mqrd_t *d, double wait_s) {
  struct pollfd p = {d->log_fd, POLLIN, 0};
  while (poll(&p, 1, (int)(wait_s * 1000)) > 0) {
    if (d->log_len + 1 >= sizeof d->log) d->log_len = 0; /* keep the newest */
    ssize_t n = read(d->log_fd, d->log + d->log_len, sizeof d->log - d->log_len - 1);
    if (n <= 0) break;
    d->log_len += (size_t)n;
    d->log[d->log_len] = '\0';
    wait_s = 0;
  }
}

/* Waits until the log holds needle (true) or wait_s passes (false). */
static inline bool mqrd_wait_log(mqrd_t *d, const char *needle, double wait_s) {
  double end = now_s() + wait_s;
  while (strstr(d->log, needle) == NULL) {
    double left = end - now_s();
    if (left <= 0) return false;
    mqrd_read_log(d, left < 0.1 ? left : 0.1);
  }
  return true;
}

/* Starts mqrd on the YAML text (its first listener on 127.0.0.1, port 0). */
static inline void mqrd_start(mqrd_t *d, const char *yaml) {
  memset(d, 0, sizeof *d);
  snprintf(d->config_path, sizeof d->config_path, "/tmp/mqrd-test-%d-%ld.yaml", (int)getpid(), (long)random());
  FILE *f = fopen(d->config_path, "w");
  if (f == NULL) {
    perror("config");
    abort();
  }
  fputs(yaml, f);
  fclose(f);
  int fds[2];
  if (pipe(fds) != 0) abort();
  d->pid = fork();
  if (d->pid == 0) {
    /* As a shell starts it: default dispositions (exec keeps a SIG_IGN the test process
     * set) and no signal blocked. */
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* A test that fails (aborts) takes its mqrd along: an orphan would hold the test's
     * output pipe open and keep ctest waiting. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    const char *mqrd = getenv("MQRD");
    const char *level = getenv("MQRD_LOG_LEVEL");
    execl(mqrd, mqrd, "--config", d->config_path, "--log-level", level ? level : "info", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  d->log_fd = fds[0];
  if (!mqrd_wait_log(d, "ready", 10)) {
    fprintf(stderr, "mqrd did not start:\n%s\n", d->log);
    abort();
  }
  const char *at = strstr(d->log, " on 127.0.0.1:");
  if (at == NULL) abort();
  d->port = atoi(at + strlen(" on 127.0.0.1:"));
  snprintf(d->url, sizeof d->url, "tcp://127.0.0.1:%d", d->port);
}

/* Signals mqrd and waits for it: its exit status (a sanitizer's error makes it non-zero). */
static inline int mqrd_stop(mqrd_t *d, int sig) {
  kill(d->pid, sig);
  int status = 0;
  double end = now_s() + 30;
  while (waitpid(d->pid, &status, WNOHANG) == 0) {
    mqrd_read_log(d, 0.05);
    if (now_s() > end) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &status, 0);
      fprintf(stderr, "mqrd did not stop:\n%s\n", d->log);
      return -1;
    }
  }
  mqrd_read_log(d, 0.1);
  close(d->log_fd);
  unlink(d->config_path);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

/* A cmocka group's broker: started on yaml with a fresh random seed, and stopped with
 * SIGTERM (its exit status is the teardown's, and its log is printed when not 0). */
static inline int mqrd_group_start(mqrd_t *d, const char *yaml) {
  srandom((unsigned)getpid());
  mqrd_start(d, yaml);
  return 0;
}

static inline int mqrd_group_stop(mqrd_t *d) {
  int status = mqrd_stop(d, SIGTERM);
  if (status != 0) fprintf(stderr, "mqrd exited %d:\n%s\n", status, d->log);
  return status;
}

/* ---- raw sockets ------------------------------------------------------------------------ */

static inline int raw_connect(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
    close(s);
    return -1;
  }
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

static inline void raw_send(int s, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = send(s, c, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    c += k;
    n -= (size_t)k;
  }
}

/* Reads until the peer closes or wait_s passes: the bytes, and whether it closed. */
static inline size_t raw_read_all(int s, uint8_t *buf, size_t cap, double wait_s, bool *closed) {
  size_t n = 0;
  double end = now_s() + wait_s;
  *closed = false;
  while (n < cap) {
    double left = end - now_s();
    if (left <= 0) break;
    struct pollfd p = {s, POLLIN, 0};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
    ssize_t k = recv(s, buf + n, cap - n, 0);
    if (k <= 0) {
      *closed = true;
      break;
    }
    n += (size_t)k;
  }
  return n;
}

#endif
