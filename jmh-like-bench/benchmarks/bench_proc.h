/* Brokers in processes of their own, for the benchmarks that measure through one
 * (loopback.c, durable.c): a free port on 127.0.0.1, starting a broker as a shell would,
 * waiting for it to listen, stopping it. Header-only. */
#ifndef MQR_BENCH_PROC_H
#define MQR_BENCH_PROC_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static inline void bench_stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

#endif
