/* Statistics as JMH computes them. Student's t distribution through the regularized
 * incomplete beta function (continued fraction, modified Lentz), its quantile by
 * bisection on the CDF: exact to double precision for any degrees of freedom, no table. */
#include <math.h>
#include <stdlib.h>

#include "bench.h"

/* Continued fraction for I_x(a, b) (Numerical Recipes' betacf, written afresh). */
static double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-16;
  double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0, d = 1.0 - qab * x / qap;
  if (fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 10000; m++) {
    int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1.0) < eps) break;
  }
  return h;
}

/* The regularized incomplete beta function I_x(a, b). */
static double beta_inc(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_cf(a, b, x) / a;
  return 1.0 - front * beta_cf(b, a, 1.0 - x) / b;
}

double mqr_bench_t_cdf(double x, double df) {
  if (isnan(x) || df <= 0) return NAN;
  if (isinf(x)) return x > 0 ? 1.0 : 0.0;
  double tail = 0.5 * beta_inc(df / 2.0, 0.5, df / (df + x * x));
  return x >= 0 ? 1.0 - tail : tail;
}

double mqr_bench_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || df <= 0) return NAN;
  if (p == 0.5) return 0.0;
  if (p < 0.5) return -mqr_bench_t_quantile(1.0 - p, df);
  double lo = 0.0, hi = 1.0;
  while (mqr_bench_t_cdf(hi, df) < p && hi < 1e300) hi *= 2.0;
  for (int i = 0; i < 400 && hi - lo > 1e-15 * hi; i++) {
    double mid = 0.5 * (lo + hi);
    if (mqr_bench_t_cdf(mid, df) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

void mqr_bench_stats(const double *x, size_t n, mqr_bench_stats_t *out) {
  out->n = n;
  out->mean = out->stddev = out->error = out->min = out->max = NAN;
  if (n == 0) return;
  double sum = 0, mn = x[0], mx = x[0];
  for (size_t i = 0; i < n; i++) {
    sum += x[i];
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
  }
  double mean = sum / (double)n, ss = 0;
  for (size_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
  out->mean = mean;
  out->min = mn;
  out->max = mx;
  if (n >= 2) out->stddev = sqrt(ss / (double)(n - 1));
  if (n > 2) out->error = mqr_bench_t_quantile(0.9995, (double)(n - 1)) * out->stddev / sqrt((double)n);
}

/* The estimator of Apache Commons Math's Percentile (what JMH prints): position
 * p(n + 1)/100, interpolated between the two closest ranks, clamped to the ends. */
double mqr_bench_percentile(const double *sorted, size_t n, double p) {
  if (n == 0) return NAN;
  if (n == 1) return sorted[0];
  double pos = p * (double)(n + 1) / 100.0;
  if (pos < 1) return sorted[0];
  if (pos >= (double)n) return sorted[n - 1];
  size_t k = (size_t)floor(pos);
  double frac = pos - (double)k;
  return sorted[k - 1] + frac * (sorted[k] - sorted[k - 1]);
}
