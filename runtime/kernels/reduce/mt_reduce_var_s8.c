/*
 * mt_reduce_var_s8.c - variance and standard deviation over the reduced dims:
 *   D = n * sum(x^2) - sum(x)^2          exact in int64 (n <= 2^23: D < 2^60)
 *   v = (D + 2^(pre-1)) >> pre           var (root 0), pre in [0, 62]
 *   v = isqrt(D * 4^pre)                 std (root 1, floor square root), pre in [0, 31]
 *   y = clamp(rq(v, mult, shift) + out_zp, act_min, act_max)
 * The compiler folds s_in^2 / (n (n - correction) s_out) (or its root) into (mult, shift). The
 * domain bounds v by the largest D over int8 inputs, 255^2 floor(n/2) ceil(n/2): v < 2^31 and
 * rq(v) fits int32, checked from the shape and attributes before anything is written. Not a hot
 * op: every mask runs the odometer of mt_reduce.h, plain C on every ISA.
 */
#include "mt_reduce.h"

/* v for a given D (see the file comment). */
static uint64_t mt_var_value(uint64_t d, int32_t root, int32_t pre)
{
  if (root) {
    return mt_isqrt64(d << (2 * pre));
  }
  return pre == 0 ? d : (d + ((uint64_t)1 << (pre - 1))) >> pre;
}

// x: (d0, ..., dr-1) int8, r in 1..6  ->  y: same rank, reduced dims 1, int8
mt_status mt_reduce_var_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_REDUCE_VAR_N_INPUTS, MT_REDUCE_VAR_N_OUTPUTS, MT_REDUCE_VAR_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int32_t *a = args->attrs;
  const int32_t root = a[MT_REDUCE_VAR_ROOT], pre = a[MT_REDUCE_VAR_PRE];
  const int32_t mult = a[MT_REDUCE_VAR_MULT], shift = a[MT_REDUCE_VAR_SHIFT];
  const int32_t zp = a[MT_REDUCE_VAR_OUT_ZP], lo = a[MT_REDUCE_VAR_ACT_MIN];
  const int32_t hi = a[MT_REDUCE_VAR_ACT_MAX];
  mt_reduce_geom g;
  if (!mt_reduce_geom_init(&g, &args->in[MT_REDUCE_VAR_IN_X], &args->out[MT_REDUCE_VAR_OUT_Y],
                           a[MT_REDUCE_VAR_AXES]) ||
      g.count > MT_REDUCE_MAX_COUNT || (root != 0 && root != 1) || pre < 0 ||
      pre > (root ? 31 : 62) || !mt_zp_ok(zp) || !mt_act_ok(lo, hi) || !mt_scale_ok(mult, shift)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const uint64_t n = g.count, top = 65025u * (n / 2) * ((n + 1) / 2); /* the largest D */
  if (root && (top >> (62 - 2 * pre)) != 0) { /* D * 4^pre < 2^62 */
    return MT_STATUS_BAD_ARGUMENT;
  }
  const uint64_t vmax = mt_var_value(top, root, pre);
  if (vmax > 0x7FFFFFFFu || mt_rq((int32_t)vmax, mult, shift) > 0x7FFFFFFF) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)args->in[MT_REDUCE_VAR_IN_X].data;
  int8_t *y = (int8_t *)args->out[MT_REDUCE_VAR_OUT_Y].data;
  mt_odometer out = {{0}, 0};
  int32_t s1;
  do {
    const uint64_t d = mt_spread(x + out.off, &g, n, &s1);
    *y++ = mt_requantize((int32_t)mt_var_value(d, root, pre), mult, shift, zp, lo, hi);
  } while (mt_odometer_next(&g, &out, 0));
  return MT_STATUS_OK;
}
