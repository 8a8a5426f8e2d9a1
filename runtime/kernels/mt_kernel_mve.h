/*
 * mt_kernel_mve.h - MVE (Helium) helpers shared by the kernels: the output stage on int32 lanes
 * (mt_rq_v, mt_rq_n_v, mt_requantize_v, mt_requantize4_v; the scalar mt_rq / mt_requantize in
 * mt_kernel_util.h) and mt_dot4_mve, the dot loop of the MAC kernels. Empty without MT_MVE.
 */
#ifndef MT_KERNEL_MVE_H
#define MT_KERNEL_MVE_H

#include <stdint.h>

#include "mt_kernel_isa.h"

#if MT_MVE
/* rq on four lanes, exact for every shift in 2..62. With p = acc * mult = hi * 2^32 + lo (lo
 * unsigned) and rshr(v, k) = (v + 2^(k-1)) >> k (a left shift for k <= 0):
 *     (p + 2^(s-1)) >> s == rshr(hi, s - 32) + rshr(lo, s)   (mod 2^32)
 * for s <= 32 because 2^s divides hi * 2^32, and for s > 32 because 2^(s-1) is a multiple of
 * 2^32 (lo cannot carry; rshr(lo, s) is then 0). VRSHL rounds with full precision, so this is
 * exact whenever rq(acc) fits int32 (the domain). sh_hi = 32 - shift, sh_lo = -shift. */
static MT_ALWAYS_INLINE int32x4_t mt_rq_v(int32x4_t acc, int32x4_t mult, int32x4_t sh_hi,
                                          int32x4_t sh_lo)
{
  const int32x4_t hi = vrshlq_s32(vmulhq_s32(acc, mult), sh_hi);
  const uint32x4_t lo = vreinterpretq_u32_s32(vmulq_s32(acc, mult));
  return vaddq_s32(hi, vreinterpretq_s32_u32(vrshlq_u32(lo, sh_lo)));
}

/* mt_rq_v with one (mult, shift) for all four lanes (four pixels of one output channel). */
static MT_ALWAYS_INLINE int32x4_t mt_rq_n_v(int32x4_t acc, int32_t mult, int32_t shift)
{
  const int32x4_t hi = vrshlq_n_s32(vmulhq_s32(acc, vdupq_n_s32(mult)), 32 - shift);
  const uint32x4_t lo = vrshlq_n_u32(vreinterpretq_u32_s32(vmulq_n_s32(acc, mult)), -shift);
  return vaddq_s32(hi, vreinterpretq_s32_u32(lo));
}

/* clamp(rq + zp, lo, hi) on four lanes, as clamp(rq, lo - zp, hi - zp) + zp (no int32 wrap). */
static inline int32x4_t mt_requantize_v(int32x4_t acc, int32x4_t mult, int32x4_t sh_hi,
                                        int32x4_t sh_lo, int32_t zp, int32_t lo, int32_t hi)
{
  const int32x4_t r = mt_rq_v(acc, mult, sh_hi, sh_lo);
  return vaddq_n_s32(vminq_s32(vmaxq_s32(r, vdupq_n_s32(lo - zp)), vdupq_n_s32(hi - zp)), zp);
}

/* The output stage of n <= 4 adjacent channels: y[j] from acc (lanes) with per-channel
 * mult[j], shift[j]; lanes >= n are neither read nor written. */
static inline void mt_requantize4_v(int32x4_t acc, const int32_t *mult, const int32_t *shift,
                                    int32_t n, int32_t zp, int32_t lo, int32_t hi, int8_t *y)
{
  const mve_pred16_t p = vctp32q((uint32_t)n);
  const int32x4_t s = vldrwq_z_s32(shift, p);
  const int32x4_t v = mt_requantize_v(acc, vldrwq_z_s32(mult, p), vsubq_s32(vdupq_n_s32(32), s),
                                      vnegq_s32(s), zp, lo, hi);
  vstrbq_p_s32(y, v, p);
}

/* The vector (s0, s1, s2, s3) from four scalar sums (two VMOVs of register pairs). */
static MT_ALWAYS_INLINE int32x4_t mt_lanes4_mve(int32_t s0, int32_t s1, int32_t s2, int32_t s3)
{
  int32x4_t v; /* GNU as: VMOV Qd[2], Qd[0], Ra, Rb puts Ra in lane 0 and Rb in lane 2 */
  /* clang-format off */
  __asm__("vmov %q0[2], %q0[0], %1, %3\n"
          "vmov %q0[3], %q0[1], %2, %4"
          : "=&w"(v)
          : "r"(s0), "r"(s1), "r"(s2), "r"(s3));
  /* clang-format on */
  return v;
}

/* One vector against four: lane j of the result is sum over i < n of a[i] * b_j[i] (n > 0),
 * 16 bytes per step with the tail predicated (DLSTP/LETP), each load of a feeding four VMLADAVA.
 * Always inlined, so that the four sums get even registers in the caller's loop. The MAC
 * kernels call it with one input run against four weight rows, or one weight row against four
 * pixels. */
static MT_ALWAYS_INLINE int32x4_t mt_dot4_mve(const int8_t *a, const int8_t *b0, const int8_t *b1,
                                              const int8_t *b2, const int8_t *b3, uint32_t n)
{
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  /* clang-format off */
  __asm__ volatile("   dlstp.8 lr, %[n]\n"
                   "1: vldrb.8 q0, [%[a]], #16\n"
                   "   vldrb.8 q1, [%[b0]], #16\n"
                   "   vmladava.s8 %[s0], q0, q1\n"
                   "   vldrb.8 q2, [%[b1]], #16\n"
                   "   vmladava.s8 %[s1], q0, q2\n"
                   "   vldrb.8 q1, [%[b2]], #16\n"
                   "   vmladava.s8 %[s2], q0, q1\n"
                   "   vldrb.8 q2, [%[b3]], #16\n"
                   "   vmladava.s8 %[s3], q0, q2\n"
                   "   letp lr, 1b\n"
                   : [a] "+r"(a), [b0] "+r"(b0), [b1] "+r"(b1), [b2] "+r"(b2), [b3] "+r"(b3),
                     [s0] "+Te"(s0), [s1] "+Te"(s1), [s2] "+Te"(s2), [s3] "+Te"(s3)
                   : [n] "r"(n)
                   : "q0", "q1", "q2", "lr", "memory");
  /* clang-format on */
  return mt_lanes4_mve(s0, s1, s2, s3);
}
#endif /* MT_MVE */

#endif /* MT_KERNEL_MVE_H */
