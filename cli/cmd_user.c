/* mqr user add|passwd|remove|list: a users file kept (mqr/security.h). A password comes
 * from --password, from --password-stdin (its first line), or, on a terminal, from a
 * prompt without echo asked twice; it is never written anywhere but as its hash. */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "commands.h"
#include "mqr/security.h"

const char mqr_usage_user[] =
    "usage: mqr user add --users-file FILE NAME [--roles R1,R2] [--password P | --password-stdin]\n"
    "       mqr user passwd --users-file FILE NAME [--password P | --password-stdin]\n"
    "       mqr user roles --users-file FILE NAME --roles R1,R2\n"
    "       mqr user remove --users-file FILE NAME\n"
    "       mqr user list --users-file FILE [--json]\n"
    "  A users file holds NAME:ROLES:HASH lines; a password is kept only as its argon2id\n"
    "  hash. Without --password or --password-stdin, a terminal is asked (twice, no echo).\n"
    "  list also reads mosquitto's password_file and Artemis's artemis-users.properties\n"
    "  (with --roles-file FILE for its artemis-roles.properties). mqrd reloads the file on\n"
    "  SIGHUP.\n";

/* A line from f into buf without its end of line: its length, or -1 at the end. */
static long read_line(FILE *f, char *buf, size_t cap) {
  if (fgets(buf, (int)cap, f) == NULL) return -1;
  size_t n = strcspn(buf, "\r\n");
  buf[n] = '\0';
  return (long)n;
}

static long prompt(const char *what, char *buf, size_t cap) {
  FILE *tty = fopen("/dev/tty", "r+");
  if (tty == NULL) return -1;
  struct termios old, quiet;
  bool echo_off = tcgetattr(fileno(tty), &old) == 0;
  if (echo_off) {
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
  }
  fprintf(tty, "%s: ", what);
  fflush(tty);
  long n = read_line(tty, buf, cap);
  if (echo_off) tcsetattr(fileno(tty), TCSAFLUSH, &old);
  fputc('\n', tty);
  fclose(tty);
  return n;
}

/* The new password into buf: its length, or -1 after saying why. */
static long new_password(const char *given, bool from_stdin, char *buf, size_t cap) {
  long n;
  if (given) {
    n = (long)strlen(given);
    if ((size_t)n >= cap) return cli_error("the password is longer than %d bytes", MQR_PASSWORD_MAX), -1;
    memcpy(buf, given, (size_t)n + 1);
  } else if (from_stdin) {
    if ((n = read_line(stdin, buf, cap)) < 0) return cli_error("no password on standard input"), -1;
  } else {
    char again[MQR_PASSWORD_MAX + 2];
    if (!isatty(STDIN_FILENO) || (n = prompt("Password", buf, cap)) < 0)
      return cli_error("no password: give --password, --password-stdin, or run on a terminal"), -1;
    long m = prompt("Password again", again, sizeof again);
    bool same = m == n && memcmp(again, buf, (size_t)n) == 0;
    memset(again, 0, sizeof again);
    if (!same) return cli_error("the passwords differ"), -1;
  }
  if (n == 0) return cli_error("the password is empty"), -1;
  if (n > MQR_PASSWORD_MAX) return cli_error("the password is longer than %d bytes", MQR_PASSWORD_MAX), -1;
  return n;
}

static int list(const char *path, const char *roles_path, bool json) {
  mqr_users_t *u;
  mqr_error_t err;
  if (mqr_users_load(path, roles_path, &u, &err) != 0) {
    char line[1024];
    return cli_error("%s", mqr_error_format(&err, line, sizeof line));
  }
  mqr_user_t x;
  for (uint32_t i = 0; mqr_users_at(u, i, &x); i++) {
    if (json) {
      json_t *j = json_pack("{s:s%,s:s%,s:s}", "name", x.name.ptr, x.name.len, "roles", x.roles.ptr, x.roles.len,
                            "hash", mqr_password_kind(x.hash));
      char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
      if (text) printf("%s\n", text);
      free(text);
      json_decref(j);
    } else
      printf("%.*s roles=%.*s hash=%s\n", (int)x.name.len, x.name.ptr, (int)x.roles.len, x.roles.ptr,
             mqr_password_kind(x.hash));
  }
  mqr_users_destroy(u);
  return 0;
}

int mqr_cmd_user(int argc, char **argv) {
  enum { O_FILE = 1, O_ROLES, O_PASSWORD, O_STDIN, O_ROLES_FILE, O_JSON };
  static const struct option opts[] = {{"users-file", required_argument, NULL, O_FILE},
                                       {"roles", required_argument, NULL, O_ROLES},
                                       {"password", required_argument, NULL, O_PASSWORD},
                                       {"password-stdin", no_argument, NULL, O_STDIN},
                                       {"roles-file", required_argument, NULL, O_ROLES_FILE},
                                       {"json", no_argument, NULL, O_JSON},
                                       {NULL, 0, NULL, 0}};
  if (argc < 2) return cli_usage_error(mqr_usage_user, NULL);
  const char *op = argv[1], *file = NULL, *roles = NULL, *password = NULL, *roles_file = NULL;
  bool from_stdin = false, json = false;
  int c;
  optind = 2;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_FILE: file = optarg; break;
    case O_ROLES: roles = optarg; break;
    case O_PASSWORD: password = optarg; break;
    case O_STDIN: from_stdin = true; break;
    case O_ROLES_FILE: roles_file = optarg; break;
    case O_JSON: json = true; break;
    default: return cli_usage_error(mqr_usage_user, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (file == NULL) return cli_usage_error(mqr_usage_user, "--users-file FILE is needed");
  if (password && from_stdin) return cli_usage_error(mqr_usage_user, "--password or --password-stdin, not both");
  if (!strcmp(op, "list")) {
    if (optind != argc) return cli_usage_error(mqr_usage_user, "list takes no NAME");
    return list(file, roles_file, json);
  }
  if (optind + 1 != argc) return cli_usage_error(mqr_usage_user, "one NAME, please");
  mqr_str_t name = mqr_str(argv[optind]);
  mqr_error_t err;
  char pw[MQR_PASSWORD_MAX + 2];
  long n = 0;
  int rc;
  if (!strcmp(op, "add") || !strcmp(op, "passwd")) {
    if ((n = new_password(password, from_stdin, pw, sizeof pw)) < 0) return 1;
    rc = mqr_users_file_set(file, name, roles, pw, (size_t)n, !strcmp(op, "add"), &err);
    memset(pw, 0, sizeof pw);
  } else if (!strcmp(op, "roles")) {
    if (roles == NULL) return cli_usage_error(mqr_usage_user, "roles needs --roles R1,R2 (or --roles '' for none)");
    rc = mqr_users_file_set(file, name, roles, NULL, 0, false, &err);
  } else if (!strcmp(op, "remove")) {
    rc = mqr_users_file_remove(file, name, &err);
  } else {
    return cli_usage_error(mqr_usage_user, "unknown user command '%s'", op);
  }
  if (rc) return cli_error("%s", err.message);
  printf("user '%s' %s in %s\n", argv[optind],
         !strcmp(op, "add")      ? "added"
         : !strcmp(op, "remove") ? "removed"
         : !strcmp(op, "roles")  ? "given its roles"
                                 : "given a new password",
         file);
  return 0;
}
