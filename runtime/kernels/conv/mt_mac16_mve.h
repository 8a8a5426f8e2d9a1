/*
 * mt_mac16_mve.h - the MVE (Helium) helpers of the int16 (a16w8) MAC kernels (mt_mac16.h):
 *
 *   mt_dot16x4_mve  four weight rows against one int16 run, int32 sums: VMLADAVA.S16 (eight
 *                   int16 x int16 products per instruction) on x and the int8 weights widened
 *                   by VLDRB.S16, each x load feeding four rows; 10 instructions per 8 elements
 *   mt_wabs_mve     sum |w| of an int8 row (VABAV): the per-call int32 bound of mt_mac16_form
 *   mt_out16x4_mve  the 32-bit output stage of four channels on int32 lanes, int16 stores
 *
 * The int32 sums are exact where mt_mac16.h uses them: from the bias when the call's bound
 * holds (every partial sum within int32), else from 0 over at most MT_MAC16_CHUNK products.
 * Empty without MT_MVE.
 */
#ifndef MT_MAC16_MVE_H
#define MT_MAC16_MVE_H

#include "mt_kernel_util.h"

#if MT_MVE
/* s_r += sum_{k < n} x[k] * w_r[k] for r < 4 (n > 0), returned as lanes 0..3. Wrapping int32
 * adds (VMLADAVA): exact when no true partial sum leaves int32. The widening loads take low base
 * registers ("l"), the accumulators even ones ("Te"). */
static MT_ALWAYS_INLINE int32x4_t mt_dot16x4_mve(const int16_t *x, const int8_t *w0,
                                                 const int8_t *w1, const int8_t *w2,
                                                 const int8_t *w3, uint32_t n, int32_t s0,
                                                 int32_t s1, int32_t s2, int32_t s3)
{
  /* clang-format off */
  __asm__ volatile("   dlstp.16 lr, %[n]\n"
                   "1: vldrh.s16 q0, [%[x]], #16\n"
                   "   vldrb.s16 q1, [%[w0]], #8\n"
                   "   vmladava.s16 %[s0], q0, q1\n"
                   "   vldrb.s16 q2, [%[w1]], #8\n"
                   "   vmladava.s16 %[s1], q0, q2\n"
                   "   vldrb.s16 q1, [%[w2]], #8\n"
                   "   vmladava.s16 %[s2], q0, q1\n"
                   "   vldrb.s16 q2, [%[w3]], #8\n"
                   "   vmladava.s16 %[s3], q0, q2\n"
                   "   letp lr, 1b\n"
                   : [x] "+r"(x), [w0] "+l"(w0), [w1] "+l"(w1), [w2] "+l"(w2), [w3] "+l"(w3),
                     [s0] "+Te"(s0), [s1] "+Te"(s1), [s2] "+Te"(s2), [s3] "+Te"(s3)
                   : [n] "r"(n)
                   : "q0", "q1", "q2", "lr", "memory");
  /* clang-format on */
  int32x4_t v; /* GNU as: VMOV Qd[2], Qd[0], Ra, Rb puts Ra in lane 0 and Rb in lane 2 */
  /* clang-format off */
  __asm__("vmov %q0[2], %q0[0], %1, %3\n"
          "vmov %q0[3], %q0[1], %2, %4"
          : "=&w"(v)
          : "r"(s0), "r"(s1), "r"(s2), "r"(s3));
  /* clang-format on */
  return v;
}

/* sum_{k < n} |w[k]| (n >= 0), 16 weights per VABAV. */
static inline uint32_t mt_wabs_mve(const int8_t *w, uint32_t n)
{
  uint32_t s = 0;
  for (uint32_t k = 0; k < n; k += 16) {
    const mve_pred16_t p = vctp8q(n - k);
    s = vabavq_p_s8(s, vldrbq_z_s8(w + k, p), vdupq_n_s8(0), p);
  }
  return s;
}

/* y[j] = clamp(rq(acc[j], mult[j], shift[j]), lo, hi) for j < n <= 4, acc int32 lanes, every
 * shift in [17, 46] (the 32-bit form, docs/numerics.md section 6): VMULH by mult * 2^16 gives
 * floor(acc * mult / 2^16), VRSHL by 16 - shift the rounding shift. Lanes >= n are not stored. */
static inline void mt_out16x4_mve(int32x4_t acc, const int32_t *mult, const int32_t *shift,
                                  int32_t n, int32_t lo, int32_t hi, int16_t *y)
{
  const mve_pred16_t p = vctp32q((uint32_t)n);
  const int32x4_t m = vshlq_n_s32(vldrwq_z_s32(mult, p), 16);
  const int32x4_t r =
      vrshlq_s32(vmulhq_s32(acc, m), vsubq_s32(vdupq_n_s32(16), vldrwq_z_s32(shift, p)));
  vstrhq_p_s32(y, vminq_s32(vmaxq_s32(r, vdupq_n_s32(lo)), vdupq_n_s32(hi)), p);
}
#endif /* MT_MVE */

#endif /* MT_MAC16_MVE_H */
