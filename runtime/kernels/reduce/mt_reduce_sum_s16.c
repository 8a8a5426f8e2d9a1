/*
 * mt_reduce_sum_s16.c - reduce_sum on int16 x and y (a16w8, docs/numerics.md section 6): the
 * int8 definition with zero points 0,
 *
 *   y = clamp(rq(sum over the reduced dims of x, mult, shift), act_min, act_max)
 *
 * the sum in int32 (at most 2^16 - 1 elements: |sum| <= 32768 * 65535 < 2^31). Forms as for
 * int8 (mt_reduce.h): rows (MVE VADDVA.S16 over eight lanes, DSP SMLAD over halfword pairs, C
 * one by one), columns (MVE four channels widened to int32 lanes, C one channel at a time) and
 * the odometer for any other mask.
 */
#include "mt_reduce.h"
#include "mt_reduce16.h"

#define MT_REDUCE16_MAX_COUNT 65535u /* |sum| <= 32768 * 65535 < 2^31 */
#define MT_S16_ACT            32767

/* The sum of n contiguous int16 (n <= 65535: no int32 overflow). */
static int32_t mt_sum_row_s16(const int16_t *x, uint32_t n)
{
  int32_t acc = 0;
  uint32_t i = 0;
#if MT_MVE
  for (; i < n; i += 8) {
    const mve_pred16_t p = vctp16q(n - i);
    acc = vaddvaq_p_s16(acc, vldrhq_z_s16(x + i, p), p);
  }
#elif MT_DSP
  for (; i + 2 <= n; i += 2) {
    uint32_t w;
    __builtin_memcpy(&w, x + i, 4);
    acc = __smlad((int32_t)w, 0x00010001, acc);
  }
#endif /* MT_MVE, MT_DSP */
  for (; i < n; i++) {
    acc += x[i];
  }
  return acc;
}

/* y = clamp(rq(acc)) as int16; q: mult, shift, act_min, act_max. */
static inline int16_t mt_sum_out_s16(int32_t acc, const int32_t *q)
{
  const int64_t r = mt_rq(acc, q[0], q[1]);
  return (int16_t)(r < q[2] ? q[2] : (r > q[3] ? q[3] : r));
}

/* y[c] for c < inner from x[r][c], r < len (row stride inner). */
static void mt_sum_columns_s16(const int16_t *x, uint32_t len, uint32_t inner, const int32_t *q,
                               int16_t *y)
{
  uint32_t c = 0;
#if MT_MVE /* four channels in int32 lanes (VLDRH.S32 widens), then the output stage per lane */
  for (; c + 4 <= inner; c += 4) {
    int32x4_t acc = vdupq_n_s32(0);
    const int16_t *p = x + c;
    for (uint32_t r = 0; r < len; r++, p += inner) {
      acc = vaddq_s32(acc, vldrhq_s32(p));
    }
    int32_t s[4];
    vst1q_s32(s, acc);
    for (uint32_t k = 0; k < 4; k++) {
      y[c + k] = mt_sum_out_s16(s[k], q);
    }
  }
#endif /* MT_MVE */
  for (; c < inner; c++) {
    int32_t acc = 0;
    const int16_t *p = x + c;
    for (uint32_t r = 0; r < len; r++, p += inner) {
      acc += *p;
    }
    y[c] = mt_sum_out_s16(acc, q);
  }
}

// x: (d0, ..., dr-1) int16, r in 1..6  ->  y: same rank, reduced dims 1, int16
mt_status mt_reduce_sum_s16(const mt_op_args *args)
{
  const int32_t *a = args->attrs;
  const int32_t q[4] = {a[MT_REDUCE_SUM_MULT], a[MT_REDUCE_SUM_SHIFT], a[MT_REDUCE_SUM_ACT_MIN],
                        a[MT_REDUCE_SUM_ACT_MAX]};
  mt_reduce_geom g;
  if (!mt_reduce_geom_init_t(&g, &args->in[MT_REDUCE_SUM_IN_X], &args->out[MT_REDUCE_SUM_OUT_Y],
                             a[MT_REDUCE_SUM_AXES], MT_DTYPE_INT16) ||
      g.count > MT_REDUCE16_MAX_COUNT || a[MT_REDUCE_SUM_IN_ZP] != 0 ||
      a[MT_REDUCE_SUM_OUT_ZP] != 0 || q[2] < -MT_S16_ACT || q[2] > q[3] || q[3] > MT_S16_ACT) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t n = (int32_t)g.count; /* rq of the sums' extremes inside int32 */
  if (!mt_rq_range_ok(-32768 * n, 32767 * n, q[0], q[1])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int16_t *x = (const int16_t *)args->in[MT_REDUCE_SUM_IN_X].data;
  int16_t *y = (int16_t *)args->out[MT_REDUCE_SUM_OUT_Y].data;
  if (g.form == MT_REDUCE_ROWS) {
    for (uint32_t o = 0; o < g.outer; o++, x += g.len) {
      y[o] = mt_sum_out_s16(mt_sum_row_s16(x, g.len), q);
    }
  } else if (g.form == MT_REDUCE_COLUMNS) {
    for (uint32_t o = 0; o < g.outer; o++, x += g.len * g.inner, y += g.inner) {
      mt_sum_columns_s16(x, g.len, g.inner, q, y);
    }
  } else {
    mt_odometer out = {{0}, 0}, in = {{0}, 0};
    do {
      int32_t acc = 0;
      do {
        acc += x[out.off + in.off];
      } while (mt_odometer_next(&g, &in, 1));
      *y++ = mt_sum_out_s16(acc, q);
    } while (mt_odometer_next(&g, &out, 0));
  }
  return MT_STATUS_OK;
}
