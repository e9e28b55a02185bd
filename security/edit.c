/* A users file changed in place, for `mqr user add|passwd|remove`: the file is read,
 * the user's line replaced, added or dropped (comments and other lines kept as they
 * were), and written whole to a temporary file beside it, synced, then renamed over it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "security_int.h"

/* The line of user name in text (mqr's NAME:ROLES:HASH, or mosquitto's NAME:HASH):
 * [*s, *e) with its end of line, and its roles (empty for mosquitto's); false if none. */
static bool find_user(const char *text, mqr_str_t name, const char **s, const char **e, mqr_str_t *roles) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n'), *end = nl ? nl + 1 : p + strlen(p);
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\t')) q++;
    if ((size_t)(end - q) > name.len && memcmp(q, name.ptr, name.len) == 0 && q[name.len] == ':') {
      const char *r = q + name.len + 1, *c = r < end && *r != '$' ? memchr(r, ':', (size_t)(end - r)) : NULL;
      *roles = c ? mqr_str_n(r, (size_t)(c - r)) : mqr_str_n("", 0);
      *s = p;
      *e = end;
      return true;
    }
    p = end;
  }
  return false;
}

/* An Artemis properties file is not mqr's to change. */
static bool artemis_lines(const char *text) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p < end && *p != '#' && *p != '!' && *p != '\r') {
      const char *eq = memchr(p, '=', (size_t)(end - p)), *colon = memchr(p, ':', (size_t)(end - p));
      return eq && (colon == NULL || eq < colon);
    }
    p = nl ? nl + 1 : end;
  }
  return false;
}

static int write_file(const char *path, const char *parts[], const size_t lens[], int n, mqr_error_t *err) {
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
    return mqr_error_set(err, MQR_EINVAL, "the path %s is too long", path);
  struct stat st;
  mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : 0600;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return mqr_error_set(err, MQR_EIO, "cannot write %s: %s", tmp, strerror(errno));
  (void)fchmod(fd, mode); /* whatever the umask did */
  for (int i = 0; i < n; i++) {
    for (size_t off = 0; off < lens[i];) {
      ssize_t w = write(fd, parts[i] + off, lens[i] - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return mqr_error_set(err, MQR_EIO, "cannot write %s: %s", tmp, strerror(e));
      }
      off += (size_t)w;
    }
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    int e = errno;
    unlink(tmp);
    return mqr_error_set(err, MQR_EIO, "cannot write %s: %s", tmp, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return mqr_error_set(err, MQR_EIO, "cannot replace %s: %s", path, strerror(e));
  }
  return 0;
}

static const char header[] = "# mqr users file: NAME:ROLES:HASH [SCRAM], one user a line (`mqr user` keeps it).\n"
                             "# The hashes are argon2id, SCRAM its SCRAM-SHA-256 keys; no password is kept.\n";

int mqr_users_file_set(const char *path, mqr_str_t name, const char *roles, const char *password, size_t password_len,
                       bool add, mqr_error_t *err) {
  if (!mqr__sec_name_ok(name))
    return mqr_error_set(
        err, MQR_EINVAL,
        "'%.*s' is not a user name (1 to %d bytes of UTF-8, without white space, ':', '=', '#' or ',')",
        (int)(name.len > 64 ? 64 : name.len), name.ptr, MQR__SEC_NAME_MAX);
  if (roles && !mqr__sec_roles_ok(mqr_str(roles)))
    return mqr_error_set(err, MQR_EINVAL,
                         "roles must be names of letters, digits, '_', '-' and '.', separated by commas, not '%s'",
                         roles);
  if (add && password == NULL) return mqr_error_set(err, MQR_EINVAL, "a new user needs a password");
  size_t len = 0;
  char *text = NULL;
  if (access(path, F_OK) == 0) {
    if ((text = mqr__sec_read_file(path, &len, err)) == NULL) return err ? err->code : MQR_EIO;
  } else if (!add) {
    return mqr_error_set(err, MQR_ENOTFOUND, "%s does not exist", path);
  }
  const char *s = NULL, *e = NULL;
  mqr_str_t had = {"", 0};
  bool found = text && find_user(text, name, &s, &e, &had);
  int rc = 0;
  if (text && artemis_lines(text))
    rc = mqr_error_set(err, MQR_EINVAL, "%s is an Artemis properties file: mqr changes only its own users files", path);
  else if (add && found)
    rc = mqr_error_set(err, MQR_EINVAL, "user '%.*s' is in %s already (`mqr user passwd` changes a password)",
                       (int)name.len, name.ptr, path);
  else if (!add && !found)
    rc = mqr_error_set(err, MQR_ENOTFOUND, "no user '%.*s' in %s", (int)name.len, name.ptr, path);
  /* The hash, and the SCRAM-SHA-256 keys after it: made from a new password, or kept. */
  char hash[MQR_PASSWORD_HASH_MAX + MQR_SCRAM_CREDENTIALS_MAX + 2];
  if (rc == 0 && password) {
    rc = mqr_password_hash(password, password_len, hash, err);
    size_t hl = strlen(hash);
    hash[hl] = ' ';
    if (rc == 0)
      rc =
          mqr_scram_credentials(password, password_len, MQR_SCRAM_ITERATIONS, hash + hl + 1, sizeof hash - hl - 1, err);
  }
  if (rc == 0 && !password) { /* the hash (and keys) it has */
    const char *h = s + (size_t)(strchr(s, ':') - s) + 1;
    if (*h != '$') h = strchr(h, ':') + 1;
    size_t hl = strcspn(h, "\r\n");
    while (hl && (h[hl - 1] == ' ' || h[hl - 1] == '\t')) hl--;
    snprintf(hash, sizeof hash, "%.*s", (int)(hl < sizeof hash ? hl : sizeof hash - 1), h);
  }
  if (rc) {
    mqr_free(text);
    return rc;
  }
  char line[MQR__SEC_NAME_MAX + 4096 + MQR_PASSWORD_HASH_MAX + MQR_SCRAM_CREDENTIALS_MAX];
  int ll = snprintf(line, sizeof line, "%.*s:%s:%s\n", (int)name.len, name.ptr, roles ? roles : "", hash);
  if (!roles) ll = snprintf(line, sizeof line, "%.*s:%.*s:%s\n", (int)name.len, name.ptr, (int)had.len, had.ptr, hash);
  if (ll < 0 || (size_t)ll >= sizeof line) {
    mqr_free(text);
    return mqr_error_set(err, MQR_ELIMIT, "user '%.*s': its roles are too long", (int)name.len, name.ptr);
  }
  const char *parts[4];
  size_t lens[4];
  int n = 0;
  if (found) { /* before it, it, after it */
    parts[n] = text, lens[n++] = (size_t)(s - text);
    parts[n] = line, lens[n++] = (size_t)ll;
    parts[n] = e, lens[n++] = len - (size_t)(e - text);
  } else {
    if (text == NULL || len == 0) parts[n] = header, lens[n++] = sizeof header - 1;
    if (text) parts[n] = text, lens[n++] = len;
    if (text && len && text[len - 1] != '\n') parts[n] = "\n", lens[n++] = 1;
    parts[n] = line, lens[n++] = (size_t)ll;
  }
  rc = write_file(path, parts, lens, n, err);
  mqr_free(text);
  return rc;
}

int mqr_users_file_remove(const char *path, mqr_str_t name, mqr_error_t *err) {
  size_t len = 0;
  char *text = mqr__sec_read_file(path, &len, err);
  if (text == NULL) return err ? err->code : MQR_EIO;
  const char *s, *e;
  mqr_str_t roles;
  int rc;
  if (artemis_lines(text))
    rc = mqr_error_set(err, MQR_EINVAL, "%s is an Artemis properties file: mqr changes only its own users files", path);
  else if (!find_user(text, name, &s, &e, &roles))
    rc = mqr_error_set(err, MQR_ENOTFOUND, "no user '%.*s' in %s", (int)name.len, name.ptr, path);
  else {
    const char *parts[2] = {text, e};
    size_t lens[2] = {(size_t)(s - text), len - (size_t)(e - text)};
    rc = write_file(path, parts, lens, 2, err);
  }
  mqr_free(text);
  return rc;
}
