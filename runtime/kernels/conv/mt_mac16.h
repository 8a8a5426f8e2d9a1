/*
 * mt_mac16.h - what the int16 (a16w8) MAC kernels share (docs/numerics.md section 6): x int16,
 * weights int8, an int64 bias within int48, 16-bit multipliers, an int16 y, zero points 0.
 *
 *   mt_mac16_ok    the per-channel operands (bias int64, mult in [0, 2^15), shift in [2, 62])
 *                  and the output stage's attributes (zero points 0, an int16 clamp range)
 *   mt_dot16_rows  acc[r] += sum_k x[k] * w[r * ws + k] for up to four weight rows sharing x:
 *                  MVE: VMLALDAVA (int16 x int16 into a 64-bit accumulator) on x and the weights
 *                  widened by VLDRB.S16, eight products per instruction, two rows per pass of a
 *                  tail-predicated loop (mt_dot16x2_mve);
 *                  DSP: SMLALD on halfword pairs (weights widened by SXTB16 + PKHBT/PKHTB);
 *                  C: int32 partial sums of at most 256 products (|x * w| <= 2^22)
 *   mt_out16       y = clamp(rq(acc, mult, shift), lo, hi) as int16
 *
 * Every sum is exact: the program readers bound each channel's |bias| + sum |w| * 32768 below
 * 2^47 at load, and products are added in 64 bits (or in int32 chunks that cannot overflow).
 * The C path reads int16 and int8 elements one at a time (Armv6-M safe); DSP reads words at
 * any address (Armv7E-M / Armv8-M Mainline allow it).
 */
#ifndef MT_MAC16_H
#define MT_MAC16_H

#include "mt_kernel_util.h"
#include "mt_kernels.h"

#define MT_S16_MAX  32767
#define MT_S48_MAX  140737488355327LL /* 2^47 - 1: the int16 MAC accumulator (TOSA INT48) */
#define MT_MAC16_NR 4 /* weight rows per mt_dot16_rows call */

mt_status mt_conv2d_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_depthwise_conv2d_s16(const mt_op_args *args) MT_WEAK16;
mt_status mt_fully_connected_s16(const mt_op_args *args, int folded) MT_WEAK16;

/* bias (n,) int64, mult and shift (n,) int32 with 16-bit multipliers; out_zp 0 and an int16
 * clamp range: 1 when legal. */
static inline int mt_mac16_ok(const mt_tensor *bias, const mt_tensor *mult, const mt_tensor *shift,
                              uint32_t n, int32_t out_zp, int32_t lo, int32_t hi)
{
  if (!mt_tensor_ok(bias, MT_DTYPE_INT64, 1) || bias->shape[0] != n || !mt_vec_ok(mult, n) ||
      !mt_vec_ok(shift, n) || out_zp != 0 || lo < -MT_S16_MAX || lo > hi || hi > MT_S16_MAX) {
    return 0;
  }
  const int32_t *m = (const int32_t *)mult->data, *s = (const int32_t *)shift->data;
  for (uint32_t o = 0; o < n; o++) {
    if (m[o] < 0 || m[o] > MT_S16_MAX || s[o] < MT_MIN_SHIFT || s[o] > MT_MAX_SHIFT) {
      return 0;
    }
  }
  return 1;
}

/* *y = clamp(rq(acc), lo, hi); 0 (nothing written) when acc leaves int48 or rq leaves int32,
 * which the program readers rule out at load: only a direct kernel call can meet it. */
static inline int mt_out16(int64_t acc, int32_t mult, int32_t shift, int32_t lo, int32_t hi,
                           int16_t *y)
{
  if (acc < -MT_S48_MAX || acc > MT_S48_MAX) {
    return 0;
  }
  const int64_t r = (acc * mult + ((int64_t)1 << (shift - 1))) >> shift; /* |.| < 2^62 */
  if (r < -0x7FFFFFFF - 1 || r > 0x7FFFFFFF) {
    return 0;
  }
  *y = (int16_t)(r < lo ? lo : (r > hi ? hi : r));
  return 1;
}

/* mt_out16 of n consecutive channels: acc[j] with mult[j], shift[j] into y[j]. */
static inline int mt_out16_n(const int64_t *acc, int32_t n, const int32_t *mult,
                             const int32_t *shift, int32_t lo, int32_t hi, int16_t *y)
{
  for (int32_t j = 0; j < n; j++) {
    if (!mt_out16(acc[j], mult[j], shift[j], lo, hi, y + j)) {
      return 0;
    }
  }
  return 1;
}

#if MT_DSP && !MT_MVE
/* (w0, w1) and (w2, w3) as halfword pairs from four int8 weights: SXTB16, then PKHBT / PKHTB. */
static inline void mt_widen_s8x4(uint32_t w, int32_t *w01, int32_t *w23)
{
  const int32_t even = __sxtb16((int32_t)w), odd = mt_sxtb16_ror8(w);
  /* clang-format off */
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(*w01) : "r"(even), "r"(odd));
  __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(*w23) : "r"(odd), "r"(even));
  /* clang-format on */
}
#endif /* MT_DSP && !MT_MVE */

#if MT_MVE
/* a0 += sum x[k] * w0[k], a1 += sum x[k] * w1[k] (k < n, n > 0): one tail-predicated loop of six
 * instructions per eight elements (VLDRH, two VLDRB.S16 widening loads, two VMLALVA). The int64
 * operands sit in even/odd register pairs, as VMLALVA's RdaLo/RdaHi need (%Q / %R); the widening
 * loads take low base registers ("l"). */
static inline void mt_dot16x2_mve(const int16_t *x, const int8_t *w0, const int8_t *w1, uint32_t n,
                                  int64_t *a0, int64_t *a1)
{
  int64_t s0 = *a0, s1 = *a1;
  /* clang-format off */
  __asm__ volatile("   dlstp.16 lr, %[n]\n"
                   "1: vldrh.s16 q0, [%[x]], #16\n"
                   "   vldrb.s16 q1, [%[w0]], #8\n"
                   "   vldrb.s16 q2, [%[w1]], #8\n"
                   "   vmlalva.s16 %Q[s0], %R[s0], q0, q1\n"
                   "   vmlalva.s16 %Q[s1], %R[s1], q0, q2\n"
                   "   letp lr, 1b\n"
                   : [x] "+r"(x), [w0] "+l"(w0), [w1] "+l"(w1), [s0] "+r"(s0), [s1] "+r"(s1)
                   : [n] "r"(n)
                   : "q0", "q1", "q2", "lr", "memory");
  /* clang-format on */
  *a0 = s0;
  *a1 = s1;
}
#endif /* MT_MVE */

/* acc[r] += sum_{k < n} x[k] * w[r * ws + k] for r < nr (1 <= nr <= MT_MAC16_NR). */
static MT_NOINLINE void mt_dot16_rows(const int16_t *x, const int8_t *w, size_t ws, uint32_t n,
                                      int32_t nr, int64_t *acc)
{
  uint32_t k = 0;
#if MT_MVE
  for (int32_t r = 0; n > 0 && r < nr; r += 2) { /* an odd last row is paired with itself */
    int64_t spare = 0;
    const int8_t *w0 = w + (size_t)r * ws, *w1 = r + 1 < nr ? w0 + ws : w0;
    mt_dot16x2_mve(x, w0, w1, n, &acc[r], r + 1 < nr ? &acc[r + 1] : &spare);
  }
  (void)k;
#else /* !MT_MVE */
#if MT_DSP
  for (; k + 4 <= n; k += 4) {
    uint32_t x01, x23;
    __builtin_memcpy(&x01, x + k, 4);
    __builtin_memcpy(&x23, x + k + 2, 4);
    for (int32_t r = 0; r < nr; r++) {
      int32_t w01, w23;
      mt_widen_s8x4(mt_read_s8x4(w + (size_t)r * ws + k), &w01, &w23);
      acc[r] = __smlald((int32_t)x01, w01, acc[r]);
      acc[r] = __smlald((int32_t)x23, w23, acc[r]);
    }
  }
#endif /* MT_DSP */
  for (uint32_t k0 = k; k0 < n; k0 += 256) { /* 256 products of at most 2^22 fit int32 */
    const uint32_t k1 = n - k0 < 256 ? n : k0 + 256;
    for (int32_t r = 0; r < nr; r++) {
      const int8_t *wr = w + (size_t)r * ws;
      int32_t part = 0;
      for (uint32_t j = k0; j < k1; j++) {
        part += (int32_t)x[j] * wr[j];
      }
      acc[r] += part;
    }
  }
#endif /* MT_MVE */
}

#endif /* MT_MAC16_H */
