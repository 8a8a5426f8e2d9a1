/*
 * mt_addsub.h - what mt_add_s8 and mt_sub_s8 share: the static domain (docs/numerics.md, Domain:
 * both rescaled inputs rq(a - a_zp), rq(b - b_zp), their sum (add) or difference (sub), and its
 * rescale fit int32 for every int8 input pair, decided from the attributes alone), and the
 * general path over one broadcast run.
 */
#ifndef MT_ADDSUB_H
#define MT_ADDSUB_H

#include "mt_bcast.h"
#include "mt_kernel_add.h" /* mt_addsub_attrs_ok: the static domain */
#include "mt_kernel_util.h"
#include "mt_kernels.h"

/* add and sub have the same attributes (mcutorch.ops.elementwise); (zp, mult, shift) of a and
 * of b are three consecutive ones */
#define MT_ADDSUB_XS(p)                                                                            \
  (MT_ADD_##p##_MULT == MT_ADD_##p##_ZP + 1 && MT_ADD_##p##_SHIFT == MT_ADD_##p##_ZP + 2 &&        \
   MT_SUB_##p##_ZP == MT_ADD_##p##_ZP && MT_SUB_##p##_SHIFT == MT_ADD_##p##_SHIFT)
typedef char mt_addsub_layout[MT_ADDSUB_XS(A) && MT_ADDSUB_XS(B) &&
                                      MT_SUB_OUT_ZP == MT_ADD_OUT_ZP &&
                                      MT_SUB_OUT_SHIFT == MT_ADD_OUT_SHIFT &&
                                      MT_SUB_ACT_MAX == MT_ADD_ACT_MAX
                                  ? 1
                                  : -1];

/* y[0..n) = clamp(rq(rq(a - a_zp) +/- rq(b - b_zp)) + out_zp) for one run of the broadcast walk
 * (mt_bcast_fn: a constant operand steps by 0); `sub` is a constant at each call. Reads a[i],
 * b[i] before writing y[i]: in place is fine. MVE: four lanes of mt_rq_v on same-shape runs. */
static MT_ALWAYS_INLINE void mt_addsub_run(const int8_t *a, const int8_t *b, int8_t *y, uint32_t n,
                                           int mode, const int32_t *at, int sub)
{
  const int32_t a_zp = at[MT_ADD_A_ZP], a_mult = at[MT_ADD_A_MULT], a_shift = at[MT_ADD_A_SHIFT];
  const int32_t b_zp = at[MT_ADD_B_ZP], b_mult = at[MT_ADD_B_MULT], b_shift = at[MT_ADD_B_SHIFT];
  const int32_t o_zp = at[MT_ADD_OUT_ZP], o_mult = at[MT_ADD_OUT_MULT];
  const int32_t o_shift = at[MT_ADD_OUT_SHIFT], lo = at[MT_ADD_ACT_MIN], hi = at[MT_ADD_ACT_MAX];
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
    const int32x4_t v = sub ? vsubq_s32(a32, b32) : vaddq_s32(a32, b32);
    vstrbq_p_s32(y + i, mt_requantize_v(v, om, oh, ol, o_zp, lo, hi), p);
  }
#endif /* MT_MVE */
  for (; i < n; i++) {
    const int64_t ra = mt_rq(a[i * sa] - a_zp, a_mult, a_shift);
    const int64_t rb = mt_rq(b[i * sb] - b_zp, b_mult, b_shift);
    y[i] = mt_requantize((int32_t)(sub ? ra - rb : ra + rb), o_mult, o_shift, o_zp, lo, hi);
  }
}

#endif /* MT_ADDSUB_H */
