/*
 * mt_reduce_minmax.h - the loops shared by mt_reduce_max_s8 and mt_reduce_min_s8:
 * y = clamp(max or min over the reduced dims of x); x and y share qparams, so no arithmetic.
 * Forms (mt_reduce.h): rows (MVE VMAXV/VMINV over 16 lanes, DSP SSUB8 + SEL over 4 lanes then
 * across the word, C one by one) and columns (MVE 16 channels per vector, DSP 4 per word);
 * any other mask runs the odometer.
 */
#ifndef MT_REDUCE_MINMAX_H
#define MT_REDUCE_MINMAX_H

#include "mt_reduce.h"

/* reduce_max and reduce_min have the same operands and attributes (mcutorch.ops.reduce) */
#define MT_REDUCE_MINMAX_SAME_LAYOUT                                                               \
  (MT_REDUCE_MAX_AXES == MT_REDUCE_MIN_AXES && MT_REDUCE_MAX_ACT_MIN == MT_REDUCE_MIN_ACT_MIN &&   \
   MT_REDUCE_MAX_ACT_MAX == MT_REDUCE_MIN_ACT_MAX &&                                               \
   MT_REDUCE_MAX_N_ATTRS == MT_REDUCE_MIN_N_ATTRS)
typedef char mt_reduce_minmax_same_layout[MT_REDUCE_MINMAX_SAME_LAYOUT ? 1 : -1];

static MT_ALWAYS_INLINE int32_t mt_pick(int32_t a, int32_t b, int take_max)
{
  return take_max ? (a > b ? a : b) : (a < b ? a : b);
}

#if MT_DSP
/* Lane-wise max or min of four int8 lanes: SSUB8 sets GE where a >= b, SEL picks. */
static MT_ALWAYS_INLINE uint32_t mt_pick4(uint32_t a, uint32_t b, int take_max)
{
  (void)__ssub8((int32_t)a, (int32_t)b);
  return take_max ? (uint32_t)__sel((int32_t)a, (int32_t)b)
                  : (uint32_t)__sel((int32_t)b, (int32_t)a);
}
#endif /* MT_DSP */

/* Max or min of n >= 1 contiguous int8. */
static MT_ALWAYS_INLINE int32_t mt_pick_row_s8(const int8_t *x, uint32_t n, int take_max)
{
  int32_t best = x[0];
  uint32_t i = 0;
#if MT_MVE
  int8_t m = x[0];
  for (; i < n; i += 16) {
    const mve_pred16_t p = vctp8q(n - i);
    const int8x16_t v = vldrbq_z_s8(x + i, p);
    m = take_max ? vmaxvq_p_s8(m, v, p) : vminvq_p_s8(m, v, p);
  }
  best = m;
#elif MT_DSP
  if (n >= 4) {
    uint32_t m4 = mt_read_s8x4(x);
    for (i = 4; i + 4 <= n; i += 4) {
      m4 = mt_pick4(m4, mt_read_s8x4(x + i), take_max);
    }
    for (int j = 0; j < 4; j++) {
      best = mt_pick(best, (int8_t)(uint8_t)(m4 >> (8 * j)), take_max);
    }
  }
#endif /* MT_MVE, MT_DSP */
  for (; i < n; i++) {
    best = mt_pick(best, x[i], take_max);
  }
  return best;
}

/* y[c] = clamp(max or min over r < len of x[r][c]) for c < inner (row stride inner). */
static MT_ALWAYS_INLINE void mt_pick_columns_s8(const int8_t *x, uint32_t len, uint32_t inner,
                                                int32_t lo, int32_t hi, int take_max, int8_t *y)
{
  uint32_t c = 0;
#if MT_MVE
  for (; c < inner; c += 16) {
    const mve_pred16_t p = vctp8q(inner - c);
    int8x16_t m = vldrbq_z_s8(x + c, p);
    const int8_t *row = x + c + inner;
    for (uint32_t r = 1; r < len; r++, row += inner) {
      const int8x16_t v = vldrbq_z_s8(row, p);
      m = take_max ? vmaxq_s8(m, v) : vminq_s8(m, v);
    }
    vstrbq_p_s8(y + c, vminq_s8(vmaxq_s8(m, vdupq_n_s8((int8_t)lo)), vdupq_n_s8((int8_t)hi)), p);
  }
#elif MT_DSP
  for (; c + 4 <= inner; c += 4) {
    uint32_t m4 = mt_read_s8x4(x + c);
    const int8_t *row = x + c + inner;
    for (uint32_t r = 1; r < len; r++, row += inner) {
      m4 = mt_pick4(m4, mt_read_s8x4(row), take_max);
    }
    for (int j = 0; j < 4; j++) {
      const int32_t v = (int8_t)(uint8_t)(m4 >> (8 * j));
      y[c + j] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
  }
#endif /* MT_MVE, MT_DSP */
  for (; c < inner; c++) {
    int32_t best = x[c];
    const int8_t *p = x + c + inner;
    for (uint32_t r = 1; r < len; r++, p += inner) {
      best = mt_pick(best, *p, take_max);
    }
    y[c] = (int8_t)(best < lo ? lo : (best > hi ? hi : best));
  }
}

// x: (d0, ..., dr-1) int8, r in 1..6  ->  y: same rank, reduced dims 1, int8
static MT_ALWAYS_INLINE mt_status mt_reduce_minmax_s8(const mt_op_args *args, int take_max)
{
  if (!mt_args_ok(args, MT_REDUCE_MAX_N_INPUTS, MT_REDUCE_MAX_N_OUTPUTS, MT_REDUCE_MAX_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t lo = args->attrs[MT_REDUCE_MAX_ACT_MIN], hi = args->attrs[MT_REDUCE_MAX_ACT_MAX];
  mt_reduce_geom g;
  if (!mt_reduce_geom_init(&g, &args->in[MT_REDUCE_MAX_IN_X], &args->out[MT_REDUCE_MAX_OUT_Y],
                           args->attrs[MT_REDUCE_MAX_AXES]) ||
      !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)args->in[MT_REDUCE_MAX_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_REDUCE_MAX_OUT_Y].data;
  if (g.form == MT_REDUCE_ROWS) {
    for (uint32_t o = 0; o < g.outer; o++, x += g.len) {
      const int32_t v = mt_pick_row_s8(x, g.len, take_max);
      y[o] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
  } else if (g.form == MT_REDUCE_COLUMNS) {
    for (uint32_t o = 0; o < g.outer; o++, x += g.len * g.inner, y += g.inner) {
      mt_pick_columns_s8(x, g.len, g.inner, lo, hi, take_max, y);
    }
  } else {
    mt_odometer out = {{0}, 0}, in = {{0}, 0};
    do {
      int32_t best = x[out.off];
      do {
        best = mt_pick(best, x[out.off + in.off], take_max);
      } while (mt_odometer_next(&g, &in, 1));
      *y++ = (int8_t)(best < lo ? lo : (best > hi ? hi : best));
    } while (mt_odometer_next(&g, &out, 0));
  }
  return MT_STATUS_OK;
}

#endif /* MT_REDUCE_MINMAX_H */
