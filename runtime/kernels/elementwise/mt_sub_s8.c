/*
 * mt_sub_s8.c - element-wise a - b with add's int32 sequence and SUB: RESCALE both inputs to
 * int32, SUB, RESCALE to int8, clamp:
 *   y = clamp(rq(rq(a - a_zp, a_mult, a_shift) - rq(b - b_zp, b_mult, b_shift)) + out_zp)
 * Numpy broadcasting (mt_bcast.h); y may be a or b (in place). As for add (mt_addsub.h), the
 * attributes alone decide whether every int32 intermediate fits for every int8 input pair; if not,
 * the kernel refuses the op before touching y. One path on every ISA level (64-bit rq per element;
 * MVE: four lanes of mt_rq_v on same-shape runs).
 */
#include "mt_addsub.h"
#include "mt_bcast.h"

/* y[0..n) for one run of the broadcast walk (mt_bcast_fn): a constant operand steps by 0. */
static void sub_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n, int mode,
                    const int32_t *at)
{
  const int32_t a_zp = at[MT_SUB_A_ZP], a_mult = at[MT_SUB_A_MULT], a_shift = at[MT_SUB_A_SHIFT];
  const int32_t b_zp = at[MT_SUB_B_ZP], b_mult = at[MT_SUB_B_MULT], b_shift = at[MT_SUB_B_SHIFT];
  const int32_t o_zp = at[MT_SUB_OUT_ZP], o_mult = at[MT_SUB_OUT_MULT];
  const int32_t o_shift = at[MT_SUB_OUT_SHIFT], lo = at[MT_SUB_ACT_MIN], hi = at[MT_SUB_ACT_MAX];
  const uint32_t sa = mode != MT_BCAST_A_CONST, sb = mode != MT_BCAST_B_CONST;
  uint32_t i = 0;
#if MT_MVE
  const int32x4_t am = vdupq_n_s32(a_mult), ah = vdupq_n_s32(32 - a_shift);
  const int32x4_t al = vdupq_n_s32(-a_shift), bm = vdupq_n_s32(b_mult);
  const int32x4_t bh = vdupq_n_s32(32 - b_shift), bl = vdupq_n_s32(-b_shift);
  const int32x4_t om = vdupq_n_s32(o_mult), oh = vdupq_n_s32(32 - o_shift);
  const int32x4_t ol = vdupq_n_s32(-o_shift);
  for (; mode == MT_BCAST_SAME && i < n; i += 4) { /* four lanes read before four are written */
    const mve_pred16_t p = vctp32q(n - i);
    const int32x4_t a32 = mt_rq_v(vsubq_n_s32(vldrbq_z_s32(a + i, p), a_zp), am, ah, al);
    const int32x4_t b32 = mt_rq_v(vsubq_n_s32(vldrbq_z_s32(b + i, p), b_zp), bm, bh, bl);
    vstrbq_p_s32(y + i, mt_requantize_v(vsubq_s32(a32, b32), om, oh, ol, o_zp, lo, hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) { /* reads a[i], b[i] before writing y[i]: in place is fine */
    const int64_t d =
        mt_rq(a[i * sa] - a_zp, a_mult, a_shift) - mt_rq(b[i * sb] - b_zp, b_mult, b_shift);
    y[i] = mt_requantize((int32_t)d, o_mult, o_shift, o_zp, lo, hi);
  }
}

// a, b: int8, numpy-broadcastable to y (rank <= 6)  ->  y: int8 (y may alias a or b)
mt_status mt_sub_s8(const mt_op_args *args)
{
  if (!mt_args_ok(args, MT_SUB_N_INPUTS, MT_SUB_N_OUTPUTS, MT_SUB_N_ATTRS)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  const mt_tensor *at = &args->in[MT_SUB_IN_A], *bt = &args->in[MT_SUB_IN_B];
  const mt_tensor *yt = &args->out[MT_SUB_OUT_Y];
  mt_bcast bc;
  if (!mt_tensor_ok(at, MT_DTYPE_INT8, at->rank) || !mt_tensor_ok(bt, MT_DTYPE_INT8, bt->rank) ||
      !mt_tensor_ok(yt, MT_DTYPE_INT8, yt->rank) || !mt_bcast_init(&bc, at, bt, yt) ||
      !mt_addsub_attrs_ok(args->attrs, 1)) {
    return MT_STATUS_BAD_ARGUMENT;
  }
  mt_bcast_walk(&bc, (const int8_t *)at->data, (const int8_t *)bt->data, (int8_t *)yt->data,
                sub_run, args->attrs);
  return MT_STATUS_OK;
}
