/*
 * mt_kernel_add.h - add's static domain (docs/numerics.md, Domain), shared by mt_add_s8,
 * mt_sub_s8 and conv2d_add: whether every int32 intermediate fits for every int8 input pair,
 * decided from the attributes alone, and whether add's fast path applies. The add stage of
 * conv2d_add's output stage is in mt_kernel_add_stage.h.
 */
#ifndef MT_KERNEL_ADD_H
#define MT_KERNEL_ADD_H

#include "mt_kernel_util.h"

static inline int mt_in_int32(int64_t v)
{
  return v >= -0x7FFFFFFF - 1 && v <= 0x7FFFFFFF;
}

/* 1 when the attributes at (MT_ADD_* order) are in the domain of add (sub = 0) or sub (1):
 * every int32 intermediate fits for every int8 input pair. */
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

/* add's fast path applies: input shifts 9..31, output shift 33..54 (see mt_add_s8.c). */
static inline int mt_add_fast_ok(const int32_t *at)
{
  return at[MT_ADD_A_SHIFT] >= 9 && at[MT_ADD_A_SHIFT] <= 31 && at[MT_ADD_B_SHIFT] >= 9 &&
         at[MT_ADD_B_SHIFT] <= 31 && at[MT_ADD_OUT_SHIFT] >= 33 && at[MT_ADD_OUT_SHIFT] <= 54;
}

#endif /* MT_KERNEL_ADD_H */
