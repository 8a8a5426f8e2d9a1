/*
 * mt_addsub.h - the static domain shared by mt_add_s8 and mt_sub_s8 (docs/numerics.md, Domain):
 * both rescaled inputs rq(a - a_zp), rq(b - b_zp), their sum (add) or difference (sub), and its
 * rescale fit int32 for every int8 input pair, decided from the attributes alone.
 */
#ifndef MT_ADDSUB_H
#define MT_ADDSUB_H

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

static inline int mt_in_int32(int64_t v)
{
  return v >= -0x7FFFFFFF - 1 && v <= 0x7FFFFFFF;
}

/* 1 when the attributes at (MT_ADD_* order) are in the domain of add (sub = 0) or sub (1). */
static inline int mt_addsub_attrs_ok(const int32_t *at, int sub)
{
  if (!mt_zp_ok(at[MT_ADD_A_ZP]) || !mt_zp_ok(at[MT_ADD_B_ZP]) || !mt_zp_ok(at[MT_ADD_OUT_ZP]) ||
      !mt_act_ok(at[MT_ADD_ACT_MIN], at[MT_ADD_ACT_MAX]) ||
      !mt_scale_ok(at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]) ||
      !mt_scale_ok(at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]) ||
      !mt_scale_ok(at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT])) {
    return 0;
  }
  /* rq is monotone for mult >= 0: the extremes come from the extreme int8 inputs */
  const int64_t a0 = mt_rq(MT_S8_MIN - at[MT_ADD_A_ZP], at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]);
  const int64_t a1 = mt_rq(MT_S8_MAX - at[MT_ADD_A_ZP], at[MT_ADD_A_MULT], at[MT_ADD_A_SHIFT]);
  const int64_t b0 = mt_rq(MT_S8_MIN - at[MT_ADD_B_ZP], at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]);
  const int64_t b1 = mt_rq(MT_S8_MAX - at[MT_ADD_B_ZP], at[MT_ADD_B_MULT], at[MT_ADD_B_SHIFT]);
  const int64_t lo = sub ? a0 - b1 : a0 + b0, hi = sub ? a1 - b0 : a1 + b1;
  return mt_in_int32(lo) && mt_in_int32(hi) &&
         mt_in_int32(mt_rq((int32_t)lo, at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT])) &&
         mt_in_int32(mt_rq((int32_t)hi, at[MT_ADD_OUT_MULT], at[MT_ADD_OUT_SHIFT]));
}

#endif /* MT_ADDSUB_H */
