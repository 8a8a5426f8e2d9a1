/*
 * mt_reduce.h - what the reductions share (mt_reduce_sum_s8, mt_reduce_max_s8,
 * mt_reduce_min_s8, mt_reduce_var_s8, mt_norm_s8): the checks of x, y and the `axes` mask, and x's
 * dims merged into runs.
 *
 * Adjacent dims that are both reduced or both kept are one run, so runs alternate. A mean over
 * H, W of NHWC is [N][H*W reduced][C]; over C it is [N*H*W][C reduced]. Each kernel has:
 *   rows     the last run is the only reduced one: x = [outer][len], each y[o] reads `len`
 *            contiguous bytes (vector add-across);
 *   columns  one reduced run, then one kept: x = [outer][len][inner], y[o][c] reads x[o][r][c]
 *            for every r (inner channels side by side in the lanes);
 *   any      other masks: an odometer over the kept runs (one y each), and per y one over the
 *            reduced runs (plain C, every ISA).
 */
#ifndef MT_REDUCE_H
#define MT_REDUCE_H

#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define MT_REDUCE_MAX_COUNT (1u << 23) /* reduce_sum: |sum of (x - in_zp)| <= 255 * 2^23 < 2^31 */

enum { MT_REDUCE_ANY = 0, MT_REDUCE_ROWS = 1, MT_REDUCE_COLUMNS = 2 };

typedef struct {
  uint32_t run[6]; /* merged dims, outermost first */
  uint32_t stride[6]; /* elements of x between two steps of run k */
  uint8_t reduced[6]; /* run k is reduced */
  uint8_t n; /* runs */
  uint32_t count; /* elements reduced into one y */
  uint32_t outer, len, inner; /* rows and columns: x = [outer][len][inner] */
  int form; /* MT_REDUCE_ANY, _ROWS or _COLUMNS */
} mt_reduce_geom;

/* Fill g from x, y and the mask; 0 unless x and y are `dtype` (int8 or int16) of one rank in
 * 1..6, the mask is in [1, 2^rank), every dim of x is >= 1 (at most 2^32 - 1 elements) and y is
 * x with every reduced dim 1. */
static inline int mt_reduce_geom_init_t(mt_reduce_geom *g, const mt_tensor *x, const mt_tensor *y,
                                        int32_t axes, uint8_t dtype)
{
  if (x->rec->rank < 1 || x->rec->rank > 6 || !mt_tensor_ok(x, dtype, x->rec->rank) ||
      !mt_tensor_ok(y, dtype, x->rec->rank) || axes < 1 || axes >= (1 << x->rec->rank)) {
    return 0;
  }
  uint64_t numel = 1, count = 1;
  g->n = 0;
  for (uint8_t i = 0; i < x->rec->rank; i++) {
    const uint32_t d = x->rec->shape[i];
    const uint8_t red = (uint8_t)((axes >> i) & 1);
    numel *= d;
    count *= red ? d : 1u;
    if (d == 0 || y->rec->shape[i] != (red ? 1u : d) || numel > 0xFFFFFFFFu) {
      return 0;
    }
    if (g->n > 0 && g->reduced[g->n - 1] == red) {
      g->run[g->n - 1] *= d;
    } else {
      g->run[g->n] = d;
      g->reduced[g->n] = red;
      g->n++;
    }
  }
  uint32_t s = 1;
  for (int k = g->n - 1; k >= 0; k--) {
    g->stride[k] = s;
    s *= g->run[k];
  }
  g->count = (uint32_t)count;
  const uint8_t last = g->reduced[g->n - 1];
  g->form = MT_REDUCE_ANY;
  g->inner = 1;
  if (last && g->n <= 2) {
    g->form = MT_REDUCE_ROWS;
    g->outer = g->n == 2 ? g->run[0] : 1u;
    g->len = g->run[g->n - 1];
  } else if (!last && g->n <= 3) {
    g->form = MT_REDUCE_COLUMNS;
    g->outer = g->n == 3 ? g->run[0] : 1u;
    g->len = g->run[g->n - 2];
    g->inner = g->run[g->n - 1];
  }
  return 1;
}

static inline int mt_reduce_geom_init(mt_reduce_geom *g, const mt_tensor *x, const mt_tensor *y,
                                      int32_t axes)
{
  return mt_reduce_geom_init_t(g, x, y, axes, MT_DTYPE_INT8);
}

/* Offsets into x: with want_reduced 0, the first element of each y in order; with 1, the
 * offsets (from a y's first element) of the elements it reduces. Start from {0}; returns 0
 * after the last one, with the odometer back at {0}. */
typedef struct {
  uint32_t i[6];
  uint32_t off;
} mt_odometer;

static inline int mt_odometer_next(const mt_reduce_geom *g, mt_odometer *o, uint8_t want_reduced)
{
  for (int k = g->n - 1; k >= 0; k--) {
    if (g->reduced[k] != want_reduced) {
      continue;
    }
    if (++o->i[k] < g->run[k]) {
      o->off += g->stride[k];
      return 1;
    }
    o->off -= (g->run[k] - 1u) * g->stride[k];
    o->i[k] = 0;
  }
  return 0;
}

/* D = n * sum(x^2) - sum(x)^2 (>= 0, Cauchy-Schwarz) over the n elements reduced into the output
 * whose first element is x (reduce_var, norm), and *sum = sum(x); exact: |sum(x)| <= 2^30,
 * D < 2^62. */
static inline uint64_t mt_spread(const int8_t *x, const mt_reduce_geom *g, uint64_t n, int32_t *sum)
{
  mt_odometer in = {{0}, 0};
  int32_t s1 = 0;
  uint64_t s2 = 0;
  do {
    const int32_t v = x[in.off];
    s1 += v;
    s2 += (uint64_t)(v * v);
  } while (mt_odometer_next(g, &in, 1));
  *sum = s1;
  return n * s2 - (uint64_t)((int64_t)s1 * s1);
}

/* floor(sqrt(v)) for v < 2^62, bit by bit (no division, no float): reduce_var, norm. */
static inline uint32_t mt_isqrt64(uint64_t v)
{
  uint64_t root = 0, bit = (uint64_t)1 << 60;
  while (bit > v) {
    bit >>= 2;
  }
  while (bit != 0) {
    if (v >= root + bit) {
      v -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  return (uint32_t)root;
}

#endif /* MT_REDUCE_H */
