/* Password hashes and users files (mqr/security.h): argon2id made and checked; the hashes
 * of mosquitto_passwd (2.0.11, $7$ and -H sha512's $6$) and of Artemis's
 * DefaultSensitiveStringCodec read for migration; files of each format loaded, bad ones
 * refused with their line; a users file kept by the editing calls. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mqr/security.h"
#include "testutil.h"

/* Made by `mosquitto_passwd -b FILE carol pa55word` and `-H sha512 -b FILE erin letmein`. */
static const char mosq7[] = "$7$101$qtJtH8jngFBw8pk8$oPqmyjDlU7j4vBylhgrK5s1gvnEDgF4FmXS/tLT0LjbZSFcrgacvJfngDa1uab7Bhh"
                            "pNPeysY/1oYmBFL82ruA==";
static const char mosq6[] = "$6$aCrkh2jklJsKx3Qu$0nbu8nTUdJ4TNWK8snw1qk3PtE44Lhyqk3GChlixfcNCkHfI1X9cYQl1X8yn/JkLapTP"
                            "e5l97xWFU5QPqreSWw==";
/* PBKDF2WithHmacSHA1, 1024 iterations, a 32-byte salt, a 64-byte key: the codec's one-way
 * algorithm, of "artemis-pw". */
static const char artemis[] =
    "ENC(1024:B31126CB2FA4401F3DF6042BC82DADA6D24C6C341D905BA6C312D9B7E23FF5A2:2496927CB57A1AA599E442F5562924233124EDD"
    "34297804232CA48DD55D9B24F27CA79C4DA55E0D0524CB615B31E49D11331F16646192EB04C6F8DD7D44673B7)";

static void test_argon2id(void **state) {
  (void)state;
  char a[MQR_PASSWORD_HASH_MAX], b[MQR_PASSWORD_HASH_MAX];
  assert_int_equal(mqr_password_hash("s3cret", 6, a, NULL), 0);
  assert_int_equal(mqr_password_hash("s3cret", 6, b, NULL), 0);
  assert_string_not_equal(a, b);                                 /* a salt of its own */
  assert_non_null(strstr(a, "$argon2id$v=19$m=65536,t=2,p=1$")); /* algorithm and cost in the string */
  assert_string_equal(mqr_password_kind(a), "argon2id");
  assert_true(mqr_password_verify(a, "s3cret", 6));
  assert_false(mqr_password_verify(a, "s3cret", 5));
  assert_false(mqr_password_verify(a, "s3creT", 6));
  assert_true(mqr_password_verify(a, "s3cret\0x", 6)); /* the length is what counts */
  char big[MQR_PASSWORD_MAX + 1];
  memset(big, 'x', sizeof big);
  mqr_error_t err;
  assert_int_equal(mqr_password_hash(big, sizeof big, a, &err), MQR_ELIMIT);
}

static void test_migrated_hashes(void **state) {
  (void)state;
  assert_string_equal(mqr_password_kind(mosq7), "mosquitto-pbkdf2-sha512");
  assert_true(mqr_password_verify(mosq7, "pa55word", 8));
  assert_false(mqr_password_verify(mosq7, "pa55worD", 8));
  assert_string_equal(mqr_password_kind(mosq6), "mosquitto-sha512");
  assert_true(mqr_password_verify(mosq6, "letmein", 7));
  assert_false(mqr_password_verify(mosq6, "letmeout", 8));
  assert_string_equal(mqr_password_kind(artemis), "artemis-pbkdf2-sha1");
  assert_true(mqr_password_verify(artemis, "artemis-pw", 10));
  assert_false(mqr_password_verify(artemis, "artemis-px", 10));
  /* No plaintext, and broken hashes verify nothing. */
  assert_null(mqr_password_kind("secret"));
  assert_false(mqr_password_verify("secret", "secret", 6));
  static const char *const broken[] = {"$7$",
                                       "$7$0$qtJtH8jngFBw8pk8$oPqm",
                                       "$7$abc$x$y",
                                       "$6$$",
                                       "ENC()",
                                       "ENC(1:2)",
                                       "ENC(10:zz:zz)",
                                       "ENC(10:00:0011:22)",
                                       "$argon2id$v=19$m=1,t=1,p=1$$"};
  for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) assert_false(mqr_password_verify(broken[i], "", 0));
}

static char dir[64];

static const char *write_file(const char *name, const char *text) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_load_each_format(void **state) {
  (void)state;
  char h[MQR_PASSWORD_HASH_MAX], text[1024];
  assert_int_equal(mqr_password_hash("pw-a", 4, h, NULL), 0);
  snprintf(text, sizeof text, "# comment\n\nalice:admin,ops:%s\ncarol:%s\n  erin:%s  \r\n", h, mosq7, mosq6);
  mqr_users_t *u;
  mqr_error_t err;
  assert_int_equal(mqr_users_load(write_file("users", text), NULL, &u, &err), 0);
  assert_int_equal(mqr_users_count(u), 3);
  mqr_user_t x;
  assert_true(mqr_users_at(u, 0, &x)); /* by name */
  assert_true(mqr_str_eq(x.name, MQR_STR("alice")));
  assert_true(mqr_str_eq(x.roles, MQR_STR("admin,ops")));
  assert_int_equal(mqr_users_verify(u, MQR_STR("alice"), "pw-a", 4, &x), 0);
  assert_int_equal(mqr_users_verify(u, MQR_STR("alice"), "pw-b", 4, &x), MQR_EAUTH);
  assert_int_equal(mqr_users_verify(u, MQR_STR("carol"), "pa55word", 8, &x), 0);
  assert_int_equal(x.roles.len, 0);
  assert_int_equal(mqr_users_verify(u, MQR_STR("erin"), "letmein", 7, NULL), 0);
  assert_int_equal(mqr_users_verify(u, MQR_STR("nobody"), "pw-a", 4, NULL), MQR_EAUTH);
  assert_false(mqr_users_find(u, MQR_STR("alic"), &x));
  mqr_users_destroy(u);

  /* Artemis: users, and roles from its roles file (a user it lacks is left out). */
  snprintf(text, sizeof text, "# artemis-users.properties\ndave = %s\nfrank=%s\n", artemis, mosq7);
  const char *users = write_file("artemis-users.properties", text);
  char users_path[128];
  snprintf(users_path, sizeof users_path, "%s", users);
  const char *roles = write_file("artemis-roles.properties", "amq = dave, frank\nviewers=dave,ghost\n");
  assert_int_equal(mqr_users_load(users_path, roles, &u, &err), 0);
  assert_int_equal(mqr_users_count(u), 2);
  assert_int_equal(mqr_users_verify(u, MQR_STR("dave"), "artemis-pw", 10, &x), 0);
  assert_true(mqr_str_eq(x.roles, MQR_STR("amq,viewers")));
  assert_true(mqr_users_find(u, MQR_STR("frank"), &x));
  assert_true(mqr_str_eq(x.roles, MQR_STR("amq")));
  mqr_users_destroy(u);

  /* An empty file: no users. */
  assert_int_equal(mqr_users_load(write_file("empty", "# none yet\n"), NULL, &u, &err), 0);
  assert_int_equal(mqr_users_count(u), 0);
  assert_int_equal(mqr_users_verify(u, MQR_STR("x"), "y", 1, NULL), MQR_EAUTH);
  mqr_users_destroy(u);
}

static void test_bad_files_say_where(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
    uint32_t line;
  } bad[] = {
      {"alice:admin:secret\n", "not a hash mqr knows", 1}, /* plaintext: refused */
      {"# x\nbob = secret\n", "not a hash mqr knows", 2},  /* Artemis's plaintext too */
      {"alice\n", "expected NAME:ROLES:HASH", 1},
      {"al ice::$6$aCrk$0nbu\n", "is not a user name", 1},
      {"alice:ad min:$6$aCrk$0nbu\n", "roles must be", 1},
      {"alice:a,,b:$6$aCrk$0nbu\n", "roles must be", 1},
      {"a::$6$x$y\nb::$6$x$y\na::$6$x$y\n", "user 'a' again (first at line 1)", 3},
      {"a::$6$x$y junk\n", "only SCRAM-SHA-256 keys may follow", 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mqr_users_t *u = NULL;
    mqr_error_t err;
    assert_int_equal(mqr_users_load(write_file("bad", bad[i].text), NULL, &u, &err), MQR_ECONFIG);
    assert_null(u);
    if (strstr(err.message, bad[i].want) == NULL || err.line != bad[i].line)
      fail_msg("'%s': got line %u '%s'", bad[i].text, err.line, err.message);
  }
  mqr_users_t *u = NULL;
  mqr_error_t err;
  char missing[128];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  assert_int_equal(mqr_users_load(missing, NULL, &u, &err), MQR_EIO);
  assert_non_null(strstr(err.message, "missing"));
}

/* RFC 7677 section 3's example, the client's side: user, pencil, its nonces and salt. */
static void test_scram_rfc7677(void **state) {
  (void)state;
  mqr_scram_client_t c;
  char out[512];
  assert_int_equal(mqr_scram_client_first(&c, "user", "rOprNGfwEbeRWgbNEkqO", out, sizeof out), 0);
  assert_string_equal(out, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
  static const char server_first[] = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                                     "i=4096";
  assert_int_equal(mqr_scram_client_final(&c, "pencil", 6, MQR_STR(server_first), out, sizeof out), 0);
  assert_string_equal(out, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                           "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  assert_true(mqr_scram_client_verify(&c, MQR_STR("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")));
  assert_false(mqr_scram_client_verify(&c, MQR_STR("v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")));
  /* A server-first that does not continue the client's nonce is refused. */
  assert_int_equal(mqr_scram_client_first(&c, "user", "abc", out, sizeof out), 0);
  assert_int_equal(
      mqr_scram_client_final(&c, "pencil", 6, MQR_STR("r=xyz1,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"), out, sizeof out),
      MQR_EPROTOCOL);
}

/* Our server against our client, with stored keys: the right password proves itself both
 * ways; a wrong one and an unknown user fail at the proof, alike. */
static int scram_run(const char *cred, const char *user, const char *pw, char *server_final) {
  mqr_scram_client_t c;
  mqr_scram_server_t s;
  char m1[512], m2[512], m3[512];
  mqr_error_t err;
  assert_int_equal(mqr_scram_client_first(&c, user, NULL, m1, sizeof m1), 0);
  assert_int_equal(mqr_scram_server_start(&s, mqr_str(m1), &err), 0);
  assert_string_equal(s.user, user);
  assert_int_equal(mqr_scram_server_challenge(&s, cred, m2, sizeof m2, &err), 0);
  assert_int_equal(mqr_scram_client_final(&c, pw, strlen(pw), mqr_str(m2), m3, sizeof m3), 0);
  int rc = mqr_scram_server_final(&s, mqr_str(m3), server_final, 512, &err);
  if (rc == 0) assert_true(mqr_scram_client_verify(&c, mqr_str(server_final)));
  return rc;
}

static void test_scram_round_trip(void **state) {
  (void)state;
  char cred[MQR_SCRAM_CREDENTIALS_MAX], fin[512];
  mqr_error_t err;
  assert_int_equal(mqr_scram_credentials("s3cret", 6, 4096, cred, sizeof cred, &err), 0);
  assert_true(mqr_scram_credentials_valid(cred));
  assert_non_null(strstr(cred, "SCRAM-SHA-256$4096:"));
  assert_int_equal(scram_run(cred, "alice", "s3cret", fin), 0);
  assert_int_equal(scram_run(cred, "alice", "s3creT", fin), MQR_EAUTH);
  assert_int_equal(scram_run(NULL, "nobody", "s3cret", fin), MQR_EAUTH);
  assert_int_equal(scram_run(cred, "a,b=c", "s3cret", fin), 0); /* a name with ',' and '=' */
  assert_false(mqr_scram_credentials_valid("SCRAM-SHA-256$x"));
  /* Out of order, or malformed. */
  mqr_scram_server_t s;
  assert_int_equal(mqr_scram_server_start(&s, MQR_STR("y,,n=a,r=b"), &err), MQR_EPROTOCOL);
  assert_int_equal(mqr_scram_server_start(&s, MQR_STR("n,,n=a"), &err), MQR_EPROTOCOL);
  assert_int_equal(mqr_scram_server_start(&s, MQR_STR("n,,n=a,r=b"), &err), 0);
  assert_int_equal(mqr_scram_server_final(&s, MQR_STR("c=biws,r=b,p=AA=="), fin, sizeof fin, &err), MQR_EPROTOCOL);
}

static void test_file_kept_by_edits(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/kept", dir);
  unlink(path);
  mqr_error_t err;
  assert_int_equal(mqr_users_file_set(path, MQR_STR("alice"), "admin", "one", 3, true, &err), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600); /* a new file is the owner's alone */
  assert_int_equal(mqr_users_file_set(path, MQR_STR("bob"), NULL, "two", 3, true, &err), 0);
  assert_int_equal(mqr_users_file_set(path, MQR_STR("alice"), NULL, "uno", 3, true, &err), MQR_EINVAL);
  assert_int_equal(mqr_users_file_set(path, MQR_STR("carl"), NULL, "x", 1, false, &err), MQR_ENOTFOUND);
  assert_int_equal(mqr_users_file_set(path, MQR_STR("a:b"), NULL, "x", 1, true, &err), MQR_EINVAL);
  assert_int_equal(mqr_users_file_set(path, MQR_STR("c"), "bad role", "x", 1, true, &err), MQR_EINVAL);
  /* passwd keeps the roles, roles keeps the password */
  assert_int_equal(mqr_users_file_set(path, MQR_STR("alice"), NULL, "uno", 3, false, &err), 0);
  assert_int_equal(mqr_users_file_set(path, MQR_STR("bob"), "ops,viewers", NULL, 0, false, &err), 0);
  mqr_users_t *u;
  assert_int_equal(mqr_users_load(path, NULL, &u, &err), 0);
  mqr_user_t x;
  assert_int_equal(mqr_users_verify(u, MQR_STR("alice"), "uno", 3, &x), 0);
  assert_true(mqr_str_eq(x.roles, MQR_STR("admin")));
  assert_int_equal(mqr_users_verify(u, MQR_STR("alice"), "one", 3, &x), MQR_EAUTH);
  assert_int_equal(mqr_users_verify(u, MQR_STR("bob"), "two", 3, &x), 0);
  assert_true(mqr_str_eq(x.roles, MQR_STR("ops,viewers")));
  /* SCRAM keys made with the password, kept by a roles change: they prove "two". */
  assert_non_null(x.scram);
  char fin[512];
  assert_int_equal(scram_run(x.scram, "bob", "two", fin), 0);
  assert_int_equal(scram_run(x.scram, "bob", "one", fin), MQR_EAUTH);
  mqr_users_destroy(u);
  assert_int_equal(mqr_users_file_remove(path, MQR_STR("alice"), &err), 0);
  assert_int_equal(mqr_users_file_remove(path, MQR_STR("alice"), &err), MQR_ENOTFOUND);
  assert_int_equal(mqr_users_load(path, NULL, &u, &err), 0);
  assert_int_equal(mqr_users_count(u), 1);
  mqr_users_destroy(u);
  /* Comments stay; no password is in the file. */
  FILE *f = fopen(path, "r");
  char text[2048];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  assert_non_null(strstr(text, "# mqr users file"));
  assert_null(strstr(text, "two"));
  /* An Artemis file is not mqr's to change. */
  char apath[128];
  snprintf(apath, sizeof apath, "%s", write_file("art", "dave = ENC(1:00:00)\n"));
  assert_int_equal(mqr_users_file_set(apath, MQR_STR("x"), NULL, "y", 1, true, &err), MQR_EINVAL);
  assert_non_null(strstr(err.message, "Artemis"));
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/mqr-test-security-%d", (int)getpid());
  mkdir(dir, 0700);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_argon2id),           cmocka_unit_test(test_migrated_hashes),
      cmocka_unit_test(test_load_each_format),   cmocka_unit_test(test_bad_files_say_where),
      cmocka_unit_test(test_file_kept_by_edits), cmocka_unit_test(test_scram_rfc7677),
      cmocka_unit_test(test_scram_round_trip),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
