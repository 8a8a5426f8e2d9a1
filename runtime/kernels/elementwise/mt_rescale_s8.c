/*
 * mt_rescale_s8.c - new qparams: y = clamp(rq(x - in_zp) + out_zp), for (mult, shift) whose rq
 * of every x - in_zp fits int32 (checked first). y may be x (in place). int8 -> int8, MVE: four
 * elements per step on int32x4 lanes; int8 <-> int16 and int16 -> int16 (docs/numerics.md
 * section 6: an int16 side has zero point 0, an int16 y the range [-32767, 32767]): plain C.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* Any side int16: element i is read before element i is written (in place: x and y have one
 * element size, so the same bytes). */
static mt_status mt_rescale_wide(const mt_tensor *xt, const mt_tensor *yt, const int32_t *at)
{
  const int x16 = xt->rec->dtype == MT_DTYPE_INT16, y16 = yt->rec->dtype == MT_DTYPE_INT16;
  const int32_t in_zp = at[MT_RESCALE_IN_ZP], out_zp = at[MT_RESCALE_OUT_ZP];
  const int32_t mult = at[MT_RESCALE_MULT], shift = at[MT_RESCALE_SHIFT];
  const int32_t lo = at[MT_RESCALE_ACT_MIN], hi = at[MT_RESCALE_ACT_MAX];
  const int32_t x_lo = x16 ? -32768 : MT_S8_MIN, x_hi = x16 ? 32767 : MT_S8_MAX;
  if (!mt_tensor_ok(xt, xt->rec->dtype, xt->rec->rank) ||
      !mt_tensor_ok(yt, yt->rec->dtype, yt->rec->rank) || !mt_same_shape(xt, yt) ||
      (x16 ? in_zp != 0 : !mt_zp_ok(in_zp)) ||
      (y16 ? out_zp != 0 || lo < -32767 || lo > hi || hi > 32767
           : !mt_zp_ok(out_zp) || !mt_act_ok(lo, hi)) ||
      !mt_rq_range_ok(x_lo - in_zp, x_hi - in_zp, mult, shift)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const uint32_t n = mt_numel(yt);
  for (uint32_t i = 0; i < n; i++) {
    const int32_t v = x16 ? ((const int16_t *)xt->data)[i] : ((const int8_t *)xt->data)[i];
    const int64_t r = mt_rq(v - in_zp, mult, shift) + out_zp; /* |rq| < 2^31: checked above */
    const int32_t c = (int32_t)(r < lo ? lo : (r > hi ? hi : r));
    if (y16) {
      ((int16_t *)yt->data)[i] = (int16_t)c;
    } else {
      ((int8_t *)yt->data)[i] = (int8_t)c;
    }
  }
  return MT_STATUS_OK;
}

// x: (...) int8 or int16  ->  y: (...) int8 or int16, same shape (y may alias x)
mt_status mt_rescale_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_RESCALE_N_INPUTS, MT_RESCALE_N_OUTPUTS, MT_RESCALE_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_RESCALE_IN_X], *yt = &args->out[MT_RESCALE_OUT_Y];
  const int32_t *at = args->attrs;
  if ((xt->rec->dtype == MT_DTYPE_INT16 || yt->rec->dtype == MT_DTYPE_INT16) &&
      (xt->rec->dtype == MT_DTYPE_INT8 || xt->rec->dtype == MT_DTYPE_INT16) &&
      (yt->rec->dtype == MT_DTYPE_INT8 || yt->rec->dtype == MT_DTYPE_INT16)) {
    return mt_rescale_wide(xt, yt, at);
  }
  const int32_t in_zp = at[MT_RESCALE_IN_ZP], out_zp = at[MT_RESCALE_OUT_ZP];
  const int32_t mult = at[MT_RESCALE_MULT], shift = at[MT_RESCALE_SHIFT];
  const int32_t lo = at[MT_RESCALE_ACT_MIN], hi = at[MT_RESCALE_ACT_MAX];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rec->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rec->rank) || !mt_same_shape(xt, yt) ||
      !mt_zp_ok(in_zp) || !mt_zp_ok(out_zp) ||
      !mt_rq_range_ok(MT_S8_MIN - in_zp, MT_S8_MAX - in_zp, mult, shift) || !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *x = (const int8_t *)xt->data;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t n = mt_numel(yt);
  uint32_t i = 0;
#if MT_MVE
  const int32x4_t m = vdupq_n_s32(mult), sh = vdupq_n_s32(32 - shift), sl = vdupq_n_s32(-shift);
  for (; i < n; i += 4) { /* four lanes read before four are written: in place is fine */
    const mve_pred16_t p = vctp32q(n - i);
    const int32x4_t v = vsubq_n_s32(vldrbq_z_s32(x + i, p), in_zp);
    vstrbq_p_s32(y + i, mt_requantize_v(v, m, sh, sl, out_zp, lo, hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) { /* reads x[i] before writing y[i]: in place is fine */
    y[i] = mt_requantize(x[i] - in_zp, mult, shift, out_zp, lo, hi);
  }
  return MT_STATUS_OK;
}
