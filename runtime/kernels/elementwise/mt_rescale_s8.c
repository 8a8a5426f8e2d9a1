/*
 * mt_rescale_s8.c - int8 -> int8 with new qparams: y = clamp(rq(x - in_zp) + out_zp), for
 * (mult, shift) whose rq of every x - in_zp fits int32 (checked first). y may be x (in place). MVE:
 * four elements per step on int32x4 lanes.
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

// x: (...) int8  ->  y: (...) int8, same shape (y may alias x)
mt_status mt_rescale_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_RESCALE_N_INPUTS, MT_RESCALE_N_OUTPUTS, MT_RESCALE_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *xt = &args->in[MT_RESCALE_IN_X], *yt = &args->out[MT_RESCALE_OUT_Y];
  const int32_t *at = args->attrs;
  const int32_t in_zp = at[MT_RESCALE_IN_ZP], out_zp = at[MT_RESCALE_OUT_ZP];
  const int32_t mult = at[MT_RESCALE_MULT], shift = at[MT_RESCALE_SHIFT];
  const int32_t lo = at[MT_RESCALE_ACT_MIN], hi = at[MT_RESCALE_ACT_MAX];
  if (!mt_tensor_ok(xt, MT_DTYPE_INT8, xt->rank) || !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank) ||
      !mt_same_shape(xt, yt) || !mt_zp_ok(in_zp) || !mt_zp_ok(out_zp) ||
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
