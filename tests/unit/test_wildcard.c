/* Wildcard matching: the cases ROUTING-SEMANTICS.md names, then a differential test
 * against a brute-force matcher (its own tokenizer, exhaustive recursion) over random
 * patterns and names with delimiters, `*`, `#` at every position and escapes, in two
 * syntaxes. Also the address-settings match rules (validation and precedence). */
#include "testutil.h"

static const mqr_wildcard_t DEF = {'.', '#', '*', '\\'};

static bool m(const char *pattern, const char *name) {
  return mqr_wildcard_match(&DEF, mqr_str(pattern), mqr_str(name));
}

static void test_documented_cases(void **state) {
  (void)state;
  assert_true(m("news.europe.#", "news.europe"));
  assert_true(m("news.europe.#", "news.europe.sport"));
  assert_true(m("news.europe.#", "news.europe.politics.regional"));
  assert_false(m("news.europe.#", "news.usa"));
  assert_false(m("news.europe.#", "entertainment"));
  assert_true(m("news.*", "news.europe"));
  assert_false(m("news.*", "news.europe.sport"));
  assert_false(m("news.*", "news"));
  assert_true(m("news.*.sport", "news.usa.sport"));
  assert_false(m("news.*.sport", "news.europe.politics"));
  assert_true(m("a.#.c", "a.c"));
  assert_true(m("a.#.c", "a.x.y.c"));
  assert_false(m("a.#.c", "a.x.y"));
  assert_true(m("#", "anything.at.all"));
  assert_true(m("#.c", "c"));
  assert_true(m("#.#", "a"));
  assert_true(m("a.#.#.b", "a.b"));
  /* wildcards count only as whole words */
  assert_true(m("a.b#", "a.b#"));
  assert_false(m("a.b#", "a.bc"));
  assert_false(m("a.*b", "a.xb"));
  /* escapes: a literal star word, an escaped delimiter inside a word */
  assert_true(m("a.\\*", "a.*"));
  assert_false(m("a.\\*", "a.b"));
  assert_true(m("a\\.b.c", "a\\.b.c"));
  assert_false(m("a\\.b.c", "a.b.c"));
  assert_true(mqr_wildcard_is_pattern(&DEF, MQR_STR("news.#")));
  assert_true(mqr_wildcard_is_pattern(&DEF, MQR_STR("*.x")));
  assert_false(mqr_wildcard_is_pattern(&DEF, MQR_STR("news.b#")));
  assert_false(mqr_wildcard_is_pattern(&DEF, MQR_STR("news.\\#")));
  assert_false(mqr_wildcard_is_pattern(&DEF, MQR_STR("orders")));
}

static void test_syntax_validation(void **state) {
  (void)state;
  mqr_wildcard_t wc = {'/', '>', '+', '%'};
  assert_int_equal(mqr_wildcard_validate(&wc, NULL), 0);
  assert_true(mqr_wildcard_match(&wc, MQR_STR("sport/+/scores"), MQR_STR("sport/tennis/scores")));
  assert_true(mqr_wildcard_match(&wc, MQR_STR("sport/>"), MQR_STR("sport")));
  assert_false(mqr_wildcard_match(&wc, MQR_STR("sport/#"), MQR_STR("sport/x")));
  mqr_error_t e;
  mqr_wildcard_t dup = {'.', '.', '*', '\\'};
  assert_int_equal(mqr_wildcard_validate(&dup, &e), MQR_EINVAL);
  assert_non_null(strstr(e.message, "both '.'"));
  mqr_wildcard_t space = {' ', '#', '*', '\\'};
  assert_int_equal(mqr_wildcard_validate(&space, NULL), MQR_EINVAL);
  mqr_router_t r;
  assert_int_equal(mqr_router_init(&r, &dup), MQR_EINVAL);
}

/* ---- brute force ---------------------------------------------------------------------- */

enum { LIT, ANY, ONE };
typedef struct {
  int kind;
  char text[64]; /* unescaped */
} bword_t;

static int tokenize(const mqr_wildcard_t *wc, const char *s, bword_t *out) {
  int n = 0;
  size_t i = 0, len = strlen(s);
  for (;;) {
    bword_t *w = &out[n++];
    size_t start = i, k = 0;
    while (i < len && s[i] != wc->delimiter) {
      if (s[i] == wc->escape && i + 1 < len) i++;
      w->text[k++] = s[i++];
    }
    w->text[k] = '\0';
    w->kind = LIT;
    if (i - start == 1 && s[start] == wc->any_words) w->kind = ANY;
    if (i - start == 1 && s[start] == wc->single_word) w->kind = ONE;
    if (i >= len) return n;
    i++;
  }
}

static bool brute(const bword_t *p, int np, const bword_t *n, int nn) {
  if (np == 0) return nn == 0;
  if (p[0].kind == ANY) {
    for (int k = 0; k <= nn; k++)
      if (brute(p + 1, np - 1, n + k, nn - k)) return true;
    return false;
  }
  if (nn == 0) return false;
  if (p[0].kind == ONE || strcmp(p[0].text, n[0].text) == 0) return brute(p + 1, np - 1, n + 1, nn - 1);
  return false;
}

/* A random literal word in syntax wc: plain letters, the empty word, escaped specials. */
static void literal_word(const mqr_wildcard_t *wc, char *out) {
  static const char *plain[] = {"a", "b", "ab", "", "ba"};
  switch (rnd(9)) {
  case 0: sprintf(out, "%c%c", wc->escape, wc->single_word); break;
  case 1: sprintf(out, "%c%c", wc->escape, wc->any_words); break;
  case 2: sprintf(out, "a%cb", wc->any_words); break;               /* not a whole word: literal */
  case 3: sprintf(out, "a%c%cb", wc->escape, wc->delimiter); break; /* escaped delimiter */
  case 4: sprintf(out, "%ca", wc->escape); break;                   /* escaped plain char */
  default: strcpy(out, plain[rnd(5)]);
  }
}

static void join(const mqr_wildcard_t *wc, char words[][16], int n, char *out) {
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (i) strncat(out, &wc->delimiter, 1);
    strcat(out, words[i]);
  }
}

static void differential(const mqr_wildcard_t *wc, int rounds, int *positives) {
  char pw[8][16], nw[16][16], pattern[256], name[256];
  bword_t bp[16], bn[40];
  for (int round = 0; round < rounds; round++) {
    int np = 1 + (int)rnd(6);
    for (int i = 0; i < np; i++) {
      uint32_t k = rnd(5);
      if (k == 0)
        sprintf(pw[i], "%c", wc->any_words);
      else if (k == 1)
        sprintf(pw[i], "%c", wc->single_word);
      else
        literal_word(wc, pw[i]);
    }
    join(wc, pw, np, pattern);
    int nn = 0;
    if (rnd(2)) {
      /* a name built from the pattern, so that matches are common */
      for (int i = 0; i < np && nn < 14; i++) {
        if (pw[i][0] == wc->any_words && pw[i][1] == 0) {
          for (uint32_t k = rnd(3); k > 0 && nn < 14; k--) literal_word(wc, nw[nn++]);
        } else if (pw[i][0] == wc->single_word && pw[i][1] == 0) {
          literal_word(wc, nw[nn++]);
        } else {
          strcpy(nw[nn++], pw[i]);
        }
      }
      if (rnd(4) == 0 && nn > 0) literal_word(wc, nw[rnd((uint32_t)nn)]); /* perturb */
      if (nn == 0) strcpy(nw[nn++], "a");
    } else {
      nn = 1 + (int)rnd(6);
      for (int i = 0; i < nn; i++) literal_word(wc, nw[i]);
    }
    join(wc, nw, nn, name);
    int bnp = tokenize(wc, pattern, bp), bnn = tokenize(wc, name, bn);
    bool want = brute(bp, bnp, bn, bnn);
    bool got = mqr_wildcard_match(wc, mqr_str(pattern), mqr_str(name));
    if (got != want) fail_msg("pattern '%s' name '%s': brute force says %d, matcher %d", pattern, name, want, got);
    *positives += want;
  }
}

static void test_differential_against_brute_force(void **state) {
  (void)state;
  int positives = 0;
  differential(&DEF, 100000, &positives);
  /* both outcomes well represented, so the comparison means something */
  assert_true(positives > 20000);
  assert_true(positives < 80000);
  mqr_wildcard_t other = {'/', '>', '+', '%'};
  positives = 0;
  differential(&other, 50000, &positives);
  assert_true(positives > 10000);
}

/* ---- address-settings match patterns ------------------------------------------------- */

static void test_settings_any_words_only_at_end(void **state) {
  (void)state;
  mqr_error_t e;
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR("#"), NULL), 0);
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR("a.#"), NULL), 0);
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR("a.*.b"), NULL), 0);
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR("a.#.b"), &e), MQR_EBADPATTERN);
  assert_non_null(strstr(e.message, "only as the last word"));
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR("#.a"), NULL), MQR_EBADPATTERN);
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR(""), NULL), MQR_EBADPATTERN);
  assert_int_equal(mqr_settings_match_validate(&DEF, MQR_STR("a.b#.c"), NULL), 0); /* literal */
}

static int cmp(const char *a, const char *b) { return mqr_settings_match_compare(&DEF, mqr_str(a), mqr_str(b)); }

static void test_settings_precedence(void **state) {
  (void)state;
  /* exact > without # > longer # pattern > shorter; a.b > a.# > # */
  assert_true(cmp("a.b", "a.#") < 0);
  assert_true(cmp("a.#", "#") < 0);
  assert_true(cmp("a.b", "#") < 0);
  assert_true(cmp("a.*", "a.#") < 0);
  assert_true(cmp("a.b.#", "a.#") < 0);
  /* without * before with *; a literal word beats * at the first difference */
  assert_true(cmp("a.b", "a.*") < 0);
  assert_true(cmp("a.b.*", "a.*.c") < 0);
  assert_true(cmp("*.b.c", "a.*.c") > 0);
  /* antisymmetric, and 0 only for equal */
  const char *all[] = {"#", "a.#", "a.b.#", "a.*", "*.b", "a.b", "a.*.c", "a.b.*", "*.*", "x"};
  for (int i = 0; i < 10; i++)
    for (int j = 0; j < 10; j++) {
      int x = cmp(all[i], all[j]), y = cmp(all[j], all[i]);
      assert_true((x < 0 && y > 0) || (x > 0 && y < 0) || (x == 0 && y == 0 && i == j));
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_documented_cases),
      cmocka_unit_test(test_syntax_validation),
      cmocka_unit_test(test_differential_against_brute_force),
      cmocka_unit_test(test_settings_any_words_only_at_end),
      cmocka_unit_test(test_settings_precedence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
