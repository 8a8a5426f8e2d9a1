/*
 * mt_reduce_sum_s8.c - y = clamp(rq(sum over the reduced dims of (x - in_zp)) + out_zp);
 * a mean is this with 1/count folded into (mult, shift) by the compiler.
 *
 * The sum of the raw int8 values s (|s| <= 2^30 for count <= 2^23) minus count * in_zp is the
 * exact int32 sum of x - in_zp. Hot forms (mt_reduce.h): rows (a mean over C: MVE VADDVA
 * over 16 lanes, DSP SXTB16 + SMLAD over 4, C one by one) and columns (a mean over H, W of
 * NHWC: MVE 16 channels in two int16 vectors and DSP 4 channels in 16-bit SXTAB16 halves,
 * both flushed to int32 every 256 rows, C one channel at a time); any other mask runs the
 * odometer.
 */
#include "mt_reduce.h"
#include "mt_reduce16.h" /* an int16 x: mt_reduce_sum_s16 */

/* The sum of n contiguous int8 (n <= 2^23: no int32 overflow). */
static int32_t mt_sum_row_s8(const int8_t *x, uint32_t n)
{
  int32_t acc = 0;
  uint32_t i = 0;
#if MT_MVE
  for (; i < n; i += 16) {
    const mve_pred16_t p = vctp8q(n - i);
    acc = vaddvaq_p_s8(acc, vldrbq_z_s8(x + i, p), p);
  }
#elif MT_DSP
  for (; i + 4 <= n; i += 4) {
    const uint32_t w = mt_read_s8x4(x + i);
    acc = __smlad(__sxtb16((int32_t)w), 0x00010001, acc);
    acc = __smlad(mt_sxtb16_ror8(w), 0x00010001, acc);
  }
#endif /* MT_MVE, MT_DSP */
  for (; i < n; i++) {
    acc += x[i];
  }
  return acc;
}

#if MT_MVE
/* The output stage of four channels of a columns block: y[off[k]] = clamp(rq(acc[k] - zp_sum)
 * + zp) for the lanes whose offset is below `left` (q: mult, shift, zp, lo, hi). */
static inline void mt_sum_store4(int8_t *y, int32x4_t acc, int32_t zp_sum, const int32_t *q,
                                 uint32x4_t off, uint32_t left)
{
  const int32x4_t r = mt_rq_n_v(vsubq_n_s32(acc, zp_sum), q[0], q[1]);
  const int32x4_t v = vminq_s32(vmaxq_s32(r, vdupq_n_s32(q[3] - q[2])), vdupq_n_s32(q[4] - q[2]));
  vstrbq_scatter_offset_p_s32(y, off, vaddq_n_s32(v, q[2]), vcmphiq_u32(vdupq_n_u32(left), off));
}
#endif /* MT_MVE */

/* y[c] for c < inner from x[r][c], r < len (row stride inner); zp_sum = count * in_zp;
 * q: mult, shift, out_zp, act_min, act_max. */
static void mt_sum_columns_s8(const int8_t *x, uint32_t len, uint32_t inner, int32_t zp_sum,
                              const int32_t *q, int8_t *y)
{
  uint32_t c = 0;
#if MT_MVE /* 16 channels in two int16x8 sums, flushed every 256 rows (even, odd lanes) */
  const uint32x4_t even = vidupq_n_u32(0, 2), odd = vaddq_n_u32(even, 1);
  for (; c < inner; c += 16) {
    const uint32_t left = inner - c;
    const mve_pred16_t p0 = vctp16q(left), p1 = vctp16q(left > 8 ? left - 8 : 0);
    int32x4_t e0 = vdupq_n_s32(0), o0 = e0, e1 = e0, o1 = e0;
    const int8_t *row = x + c;
    for (uint32_t r0 = 0; r0 < len; r0 += 256) {
      const uint32_t rows = len - r0 < 256 ? len - r0 : 256;
      int16x8_t h0 = vdupq_n_s16(0), h1 = h0;
      for (uint32_t r = 0; r < rows; r++, row += inner) {
        h0 = vaddq_s16(h0, vldrbq_z_s16(row, p0));
        h1 = vaddq_s16(h1, vldrbq_z_s16(row + 8, p1));
      }
      e0 = vaddq_s32(e0, vmovlbq_s16(h0));
      o0 = vaddq_s32(o0, vmovltq_s16(h0));
      e1 = vaddq_s32(e1, vmovlbq_s16(h1));
      o1 = vaddq_s32(o1, vmovltq_s16(h1));
    }
    mt_sum_store4(y + c, e0, zp_sum, q, even, left);
    mt_sum_store4(y + c, o0, zp_sum, q, odd, left);
    mt_sum_store4(y + c, e1, zp_sum, q, vaddq_n_u32(even, 8), left);
    mt_sum_store4(y + c, o1, zp_sum, q, vaddq_n_u32(odd, 8), left);
  }
#elif MT_DSP
  for (; c + 4 <= inner; c += 4) {
    int32_t a[4] = {-zp_sum, -zp_sum, -zp_sum, -zp_sum};
    const int8_t *row = x + c;
    for (uint32_t r0 = 0; r0 < len; r0 += 256) { /* 256 int8 fit a 16-bit half */
      const uint32_t rows = len - r0 < 256 ? len - r0 : 256;
      int32_t even = 0, odd = 0; /* halves: channels 0, 2 and 1, 3 */
      for (uint32_t r = 0; r < rows; r++, row += inner) {
        const uint32_t w = mt_read_s8x4(row);
        even = __sxtab16(even, (int32_t)w);
        odd = __sxtab16(odd, (int32_t)(w >> 8));
      }
      a[0] += (int16_t)(uint16_t)((uint32_t)even & 0xFFFFu);
      a[2] += (int16_t)(uint16_t)((uint32_t)even >> 16);
      a[1] += (int16_t)(uint16_t)((uint32_t)odd & 0xFFFFu);
      a[3] += (int16_t)(uint16_t)((uint32_t)odd >> 16);
    }
    for (int j = 0; j < 4; j++) {
      y[c + j] = mt_requantize(a[j], q[0], q[1], q[2], q[3], q[4]);
    }
  }
#endif /* MT_MVE, MT_DSP */
  for (; c < inner; c++) {
    uint32_t acc = 0; /* wrapping: exact in the domain */
    const int8_t *p = x + c;
    for (uint32_t r = 0; r < len; r++, p += inner) {
      acc += (uint32_t)(int32_t)*p;
    }
    y[c] = mt_requantize(mt_wrap_s32(acc) - zp_sum, q[0], q[1], q[2], q[3], q[4]);
  }
}

// x: (d0, ..., dr-1) int8, r in 1..6  ->  y: same rank, reduced dims 1, int8
mt_status mt_reduce_sum_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_REDUCE_SUM_N_INPUTS, MT_REDUCE_SUM_N_OUTPUTS, MT_REDUCE_SUM_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  if (args->in[MT_REDUCE_SUM_IN_X].rec->dtype == MT_DTYPE_INT16) {
    return mt_reduce_sum_s16 != NULL ? mt_reduce_sum_s16(args) : MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *a = args->attrs;
  const int32_t in_zp = a[MT_REDUCE_SUM_IN_ZP];
  const int32_t q[5] = {a[MT_REDUCE_SUM_MULT], a[MT_REDUCE_SUM_SHIFT], a[MT_REDUCE_SUM_OUT_ZP],
                        a[MT_REDUCE_SUM_ACT_MIN], a[MT_REDUCE_SUM_ACT_MAX]};
  mt_reduce_geom g;
  if (!mt_reduce_geom_init(&g, &args->in[MT_REDUCE_SUM_IN_X], &args->out[MT_REDUCE_SUM_OUT_Y],
                           a[MT_REDUCE_SUM_AXES]) ||
      g.count > MT_REDUCE_MAX_COUNT || !mt_zp_ok(in_zp) || !mt_zp_ok(q[2]) ||
      !mt_act_ok(q[3], q[4])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t n = (int32_t)g.count; /* rq of the sums' extremes inside int32 */
  if (!mt_rq_range_ok((-128 - in_zp) * n, (127 - in_zp) * n, q[0], q[1])) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)args->in[MT_REDUCE_SUM_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_REDUCE_SUM_OUT_Y].data;
  const int32_t zp_sum = n * in_zp;
  if (g.form == MT_REDUCE_ROWS) {
    for (uint32_t o = 0; o < g.outer; o++, x += g.len) {
      y[o] = mt_requantize(mt_sum_row_s8(x, g.len) - zp_sum, q[0], q[1], q[2], q[3], q[4]);
    }
  } else if (g.form == MT_REDUCE_COLUMNS) {
    for (uint32_t o = 0; o < g.outer; o++, x += g.len * g.inner, y += g.inner) {
      mt_sum_columns_s8(x, g.len, g.inner, zp_sum, q, y);
    }
  } else {
    mt_odometer out = {{0}, 0}, in = {{0}, 0};
    do {
      uint32_t acc = 0;
      do {
        acc += (uint32_t)(int32_t)x[out.off + in.off];
      } while (mt_odometer_next(&g, &in, 1));
      *y++ = mt_requantize(mt_wrap_s32(acc) - zp_sum, q[0], q[1], q[2], q[3], q[4]);
    } while (mt_odometer_next(&g, &out, 0));
  }
  return MT_STATUS_OK;
}
