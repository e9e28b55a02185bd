/* Wildcard syntax: words separated by a delimiter, `#` (zero or more words) and `*`
 * (one word) only as whole words, an escape that makes the next character literal.
 *
 * Matching is over words, like glob matching over characters with `#` as `*` and `*` as
 * `?`, so the greedy two-cursor algorithm with one backtrack point is exact and linear.
 * Nothing here allocates. */
#include <stdio.h>

#include "mqr/routing.h"

mqr_wildcard_t mqr_wildcard_default(void) {
  mqr_wildcard_t wc = {'.', '#', '*', '\\'};
  return wc;
}

int mqr_wildcard_validate(const mqr_wildcard_t *wc, mqr_error_t *err) {
  const char c[4] = {wc->delimiter, wc->any_words, wc->single_word, wc->escape};
  const char *what[4] = {"delimiter", "any-words", "single-word", "escape"};
  for (int i = 0; i < 4; i++) {
    if (c[i] <= ' ' || c[i] > '~')
      return mqr_error_set(err, MQR_EINVAL, "wildcard %s must be one printable character", what[i]);
    for (int j = 0; j < i; j++)
      if (c[i] == c[j])
        return mqr_error_set(err, MQR_EINVAL, "wildcard %s and %s are both '%c'", what[j], what[i], c[i]);
  }
  return 0;
}

enum { W_LITERAL, W_ANY, W_ONE };

typedef struct {
  const char *p; /* start of the word (raw, escapes included) */
  size_t n;      /* raw length */
  int kind;
} word_t;

/* Cursor over the words of a name. */
typedef struct {
  const mqr_wildcard_t *wc;
  const char *s;
  size_t len, pos;
  bool done;
} words_t;

static void words_init(words_t *w, const mqr_wildcard_t *wc, mqr_str_t s) {
  w->wc = wc;
  w->s = s.ptr;
  w->len = s.len;
  w->pos = 0;
  w->done = false;
}

/* The next word; false after the last. A name of n delimiters has n + 1 words. */
static bool words_next(words_t *w, word_t *out) {
  if (w->done) return false;
  size_t i = w->pos;
  while (i < w->len && w->s[i] != w->wc->delimiter) {
    if (w->s[i] == w->wc->escape && i + 1 < w->len) i++;
    i++;
  }
  if (i > w->len) i = w->len;
  out->p = w->s + w->pos;
  out->n = i - w->pos;
  out->kind = W_LITERAL;
  if (out->n == 1 && out->p[0] == w->wc->any_words) out->kind = W_ANY;
  if (out->n == 1 && out->p[0] == w->wc->single_word) out->kind = W_ONE;
  if (i >= w->len)
    w->done = true;
  else
    w->pos = i + 1;
  return true;
}

/* Compares two literal words after unescaping. */
static bool literal_eq(const mqr_wildcard_t *wc, const word_t *a, const word_t *b) {
  if (a->n == b->n && memcmp(a->p, b->p, a->n) == 0) return true;
  size_t i = 0, j = 0;
  for (;;) {
    if (i < a->n && a->p[i] == wc->escape && i + 1 < a->n) i++;
    if (j < b->n && b->p[j] == wc->escape && j + 1 < b->n) j++;
    if (i >= a->n || j >= b->n) return i >= a->n && j >= b->n;
    if (a->p[i] != b->p[j]) return false;
    i++;
    j++;
  }
}

bool mqr_wildcard_is_pattern(const mqr_wildcard_t *wc, mqr_str_t name) {
  words_t w;
  word_t x;
  words_init(&w, wc, name);
  while (words_next(&w, &x))
    if (x.kind != W_LITERAL) return true;
  return false;
}

bool mqr_wildcard_match(const mqr_wildcard_t *wc, mqr_str_t pattern, mqr_str_t name) {
  words_t pc, nc, star_p, star_n;
  bool have_star = false;
  words_init(&pc, wc, pattern);
  words_init(&nc, wc, name);
  /* pc and nc sit before the current words; star_p after the last `#`, star_n before
   * the first name word that `#` has not absorbed yet. */
  for (;;) {
    words_t nt = nc, pt = pc;
    word_t n, p;
    if (!words_next(&nt, &n)) break;
    bool hp = words_next(&pt, &p);
    if (hp && p.kind == W_ANY) {
      have_star = true;
      star_p = pt;
      star_n = nc;
      pc = pt;
      continue;
    }
    if (hp && (p.kind == W_ONE || (p.kind == W_LITERAL && literal_eq(wc, &p, &n)))) {
      pc = pt;
      nc = nt;
      continue;
    }
    if (!have_star) return false;
    words_next(&star_n, &n); /* the last `#` absorbs one more word */
    nc = star_n;
    pc = star_p;
  }
  word_t p;
  while (words_next(&pc, &p))
    if (p.kind != W_ANY) return false;
  return true;
}

int mqr_settings_match_validate(const mqr_wildcard_t *wc, mqr_str_t match, mqr_error_t *err) {
  if (match.len == 0) return mqr_error_set(err, MQR_EBADPATTERN, "empty match pattern");
  words_t w;
  word_t x;
  words_init(&w, wc, match);
  while (words_next(&w, &x)) {
    if (x.kind == W_ANY && !w.done)
      return mqr_error_set(err, MQR_EBADPATTERN, "match '%.*s': '%c' is allowed only as the last word", (int)match.len,
                           match.ptr, wc->any_words);
  }
  return 0;
}

static bool has_kind(const mqr_wildcard_t *wc, mqr_str_t s, int kind) {
  words_t w;
  word_t x;
  words_init(&w, wc, s);
  while (words_next(&w, &x))
    if (x.kind == kind) return true;
  return false;
}

int mqr_settings_match_compare(const mqr_wildcard_t *wc, mqr_str_t a, mqr_str_t b) {
  bool a_any = has_kind(wc, a, W_ANY), b_any = has_kind(wc, b, W_ANY);
  if (a_any != b_any) return a_any ? 1 : -1;
  if (a_any && a.len != b.len) return a.len > b.len ? -1 : 1;
  bool a_one = has_kind(wc, a, W_ONE), b_one = has_kind(wc, b, W_ONE);
  if (a_one != b_one) return a_one ? 1 : -1;
  if (a_one) {
    words_t aw, bw;
    word_t x, y;
    words_init(&aw, wc, a);
    words_init(&bw, wc, b);
    for (;;) {
      bool hx = words_next(&aw, &x), hy = words_next(&bw, &y);
      if (!hx || !hy) break;
      if (x.kind == W_ONE && y.kind == W_LITERAL) return 1;
      if (x.kind == W_LITERAL && y.kind == W_ONE) return -1;
    }
  }
  if (a.len != b.len) return a.len < b.len ? -1 : 1;
  int c = memcmp(a.ptr, b.ptr, a.len);
  return c < 0 ? -1 : c > 0;
}
