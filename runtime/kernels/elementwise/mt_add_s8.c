/*
 * mt_add_s8.c - element-wise a + b with TOSA's int32 sequence: RESCALE both inputs to int32,
 * ADD, RESCALE to int8, clamp. Same shapes, no broadcasting; y may be a or b (in place).
 *
 * The attributes alone decide whether every int32 intermediate fits for every int8 input pair
 * (the reference's domain check); if not, the kernel refuses the op before touching y. MVE: four
 * elements per step, the three rescales on int32x4 lanes (mt_rq_v, exact for every shift).
 */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

static int add_in_int32(int64_t v) { return v >= -0x7FFFFFFF - 1 && v <= 0x7FFFFFFF; }

/* The reference's static domain: rq(a - a_zp) + rq(b - b_zp) and its rescale fit int32. */
static int add_attrs_ok(const int32_t *at)
{
  if (!mt_zp_ok(at[MT_ADD_A_ZP]) || !mt_zp_ok(at[MT_ADD_B_ZP]) || !mt_zp_ok(at[MT_ADD_OUT_ZP]) ||
      !mt_act_ok(at[MT_ADD_ACT_MIN], at[MT_ADD_ACT_MAX]) ||
      !mt_scale_ok(at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]) ||
      !mt_scale_ok(at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]) ||
      !mt_scale_ok(at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT])) {
    return 0;
  }
  /* rq is monotone for mult >= 0: the extremes come from the extreme int8 inputs */
  const int64_t lo = mt_rq(MT_S8_MIN - at[MT_ADD_A_ZP], at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]) +
                     mt_rq(MT_S8_MIN - at[MT_ADD_B_ZP], at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]);
  const int64_t hi = mt_rq(MT_S8_MAX - at[MT_ADD_A_ZP], at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]) +
                     mt_rq(MT_S8_MAX - at[MT_ADD_B_ZP], at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]);
  return add_in_int32(lo) && add_in_int32(hi) &&
         add_in_int32(mt_rq((int32_t)lo, at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT])) &&
         add_in_int32(mt_rq((int32_t)hi, at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT]));
}

// a, b: (...) int8, same shape  ->  y: (...) int8, same shape (y may alias a or b)
mt_status mt_add_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_ADD_N_INPUTS, MT_ADD_N_OUTPUTS, MT_ADD_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at_ = &args->in[MT_ADD_IN_A], *bt = &args->in[MT_ADD_IN_B];
  const mt_tensor *yt = &args->out[MT_ADD_OUT_Y];
  const int32_t *at = args->attrs;
  if (!mt_tensor_ok(at_, MT_DTYPE_INT8, at_->rank) || !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank) || !mt_same_shape(at_, bt) ||
      !mt_same_shape(at_, yt) || !add_attrs_ok(at)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const int8_t *a = (const int8_t *)at_->data, *b = (const int8_t *)bt->data;
  int8_t *y = (int8_t *)yt->data;
  const int32_t a_zp = at[MT_ADD_A_ZP], a_mult = at[MT_ADD_A_MULT], a_shift = at[MT_ADD_A_SHIFT];
  const int32_t b_zp = at[MT_ADD_B_ZP], b_mult = at[MT_ADD_B_MULT], b_shift = at[MT_ADD_B_SHIFT];
  const int32_t o_zp = at[MT_ADD_OUT_ZP], o_mult = at[MT_ADD_OUT_MULT];
  const int32_t o_shift = at[MT_ADD_OUT_SHIFT], lo = at[MT_ADD_ACT_MIN], hi = at[MT_ADD_ACT_MAX];
  const uint32_t n = mt_numel(yt);
  uint32_t i = 0;
#if MT_MVE
  const int32x4_t am = vdupq_n_s32(a_mult), ah = vdupq_n_s32(32 - a_shift);
  const int32x4_t al = vdupq_n_s32(-a_shift), bm = vdupq_n_s32(b_mult);
  const int32x4_t bh = vdupq_n_s32(32 - b_shift), bl = vdupq_n_s32(-b_shift);
  const int32x4_t om = vdupq_n_s32(o_mult), oh = vdupq_n_s32(32 - o_shift);
  const int32x4_t ol = vdupq_n_s32(-o_shift);
  for (; i < n; i += 4) { /* four lanes read before four are written: in place is fine */
    const mve_pred16_t p = vctp32q(n - i);
    const int32x4_t a32 = mt_rq_v(vsubq_n_s32(vldrbq_z_s32(a + i, p), a_zp), am, ah, al);
    const int32x4_t b32 = mt_rq_v(vsubq_n_s32(vldrbq_z_s32(b + i, p), b_zp), bm, bh, bl);
    vstrbq_p_s32(y + i, mt_requantize_v(vaddq_s32(a32, b32), om, oh, ol, o_zp, lo, hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) { /* reads a[i], b[i] before writing y[i]: in place is fine */
    const int64_t sum = mt_rq(a[i] - a_zp, a_mult, a_shift) + mt_rq(b[i] - b_zp, b_mult, b_shift);
    y[i] = mt_requantize((int32_t)sum, o_mult, o_shift, o_zp, lo, hi);
  }
  return MT_STATUS_OK;
}
