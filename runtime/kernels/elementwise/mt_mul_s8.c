/*
 * mt_mul_s8.c - element-wise y = clamp(rq((a - a_zp) * (b - b_zp)) + out_zp). Same shapes, no
 * broadcasting; y may be a or b (in place). |(a - a_zp) * (b - b_zp)| <= 255 * 255. MVE: four
 * elements per step on int32x4 lanes (mt_requantize_v, exact for every shift).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

// a, b: (...) int8, same shape  ->  y: (...) int8, same shape (y may alias a or b)
mt_status mt_mul_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_MUL_N_INPUTS, MT_MUL_N_OUTPUTS, MT_MUL_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at_ = &args->in[MT_MUL_IN_A], *bt = &args->in[MT_MUL_IN_B];
  const mt_tensor *yt = &args->out[MT_MUL_OUT_Y];
  const int32_t *at = args->attrs;
  const int32_t a_zp = at[MT_MUL_A_ZP], b_zp = at[MT_MUL_B_ZP], out_zp = at[MT_MUL_OUT_ZP];
  const int32_t mult = at[MT_MUL_MULT], shift = at[MT_MUL_SHIFT];
  const int32_t lo = at[MT_MUL_ACT_MIN], hi = at[MT_MUL_ACT_MAX];
  if (!mt_tensor_ok(at_, MT_DTYPE_INT8, at_->rank) || !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank) || !mt_same_shape(at_, bt) ||
      !mt_same_shape(at_, yt) || !mt_zp_ok(a_zp) || !mt_zp_ok(b_zp) || !mt_zp_ok(out_zp) ||
      !mt_scale_ok(mult, shift) || !mt_act_ok(lo, hi)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *a = (const int8_t *)at_->data, *b = (const int8_t *)bt->data;
  int8_t *y = (int8_t *)yt->data;
  const uint32_t n = mt_numel(yt);
  uint32_t i = 0;
#if MT_MVE
  const int32x4_t m = vdupq_n_s32(mult), sh = vdupq_n_s32(32 - shift), sl = vdupq_n_s32(-shift);
  for (; i < n; i += 4) { /* four lanes read before four are written: in place is fine */
    const mve_pred16_t p = vctp32q(n - i);
    const int32x4_t prod = vmulq_s32(vsubq_n_s32(vldrbq_z_s32(a + i, p), a_zp),
                                     vsubq_n_s32(vldrbq_z_s32(b + i, p), b_zp));
    vstrbq_p_s32(y + i, mt_requantize_v(prod, m, sh, sl, out_zp, lo, hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) { /* reads a[i], b[i] before writing y[i]: in place is fine */
    y[i] = mt_requantize((a[i] - a_zp) * (b[i] - b_zp), mult, shift, out_zp, lo, hi);
  }
  return MT_STATUS_OK;
}
