/*
 * mt_kernel_mac_dsp.h - the dot loops of the MAC kernels on DSP cores, in asm (gcc spills the
 * accumulators of these loops written in C): 4 bytes per step, unaligned LDR, SXTB16 (bytes
 * 0/2, then 1/3), SMLAD. Included by mt_kernel_mac.h (after mt_dot4_run). Empty without MT_DSP
 * (and on MVE cores, which run mt_dot4_mve instead).
 */
#ifndef MT_KERNEL_MAC_DSP_H
#define MT_KERNEL_MAC_DSP_H

#include "mt_kernel_util.h"

#if MT_DSP && !MT_MVE
/* The asm of mt_dot_block_dsp: one step, and its operands (the names of its locals). */
/* clang-format off */
#define MT_DOT4_STEP /* 4 bytes of x against 4 bytes of each row */                          \
  "ldr %[t0], [%[x]], #4\n sxtb16 %[t1], %[t0]\n sxtb16 %[t0], %[t0], ror #8\n"                 \
  "ldr %[t2], [%[w0]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a0], %[t1], %[t3], %[a0]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a0], %[t0], %[t2], %[a0]\n"                             \
  "ldr %[t2], [%[w1]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a1], %[t1], %[t3], %[a1]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a1], %[t0], %[t2], %[a1]\n"                             \
  "ldr %[t2], [%[w2]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a2], %[t1], %[t3], %[a2]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a2], %[t0], %[t2], %[a2]\n"                             \
  "ldr %[t2], [%[w3]], #4\n sxtb16 %[t3], %[t2]\n smlad %[a3], %[t1], %[t3], %[a3]\n"           \
  "sxtb16 %[t2], %[t2], ror #8\n smlad %[a3], %[t0], %[t2], %[a3]\n"
#define MT_DOT4_OPERANDS                                                                        \
  : [x] "+r"(xp), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [a0] "+r"(a0),    \
    [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t0] "=&r"(t0), [t1] "=&r"(t1),               \
    [t2] "=&r"(t2), [t3] "=&r"(t3)                                                              \
  : [end] "r"(x_end)                                                                            \
  : "cc", "memory"
/* clang-format on */

/* The first n & ~3 bytes of the run r against its four rows (x and w_j advance past them):
 * per 4 bytes 5 LDR, 10 SXTB16, 8 SMLAD; returns the bytes left (n % 4, all of them if n < 4). */
static MT_ALWAYS_INLINE uint32_t mt_dot_block_dsp(mt_dot4_run *r, uint32_t n)
{
  if (n < 4) {
    return n;
  }
  const int8_t *xp = r->x, *w0 = r->w0, *w1 = r->w1, *w2 = r->w2, *w3 = r->w3;
  const int8_t *const x_end = xp + (n & ~3u);
  uint32_t a0 = r->a0, a1 = r->a1, a2 = r->a2, a3 = r->a3, t0, t1, t2, t3;
  if (n & 4u) { /* an odd step first, then two per loop pass */
    __asm__ volatile(MT_DOT4_STEP MT_DOT4_OPERANDS);
  }
  if (xp != x_end) {
    /* clang-format off */
    __asm__ volatile("1: " MT_DOT4_STEP MT_DOT4_STEP "cmp %[x], %[end]\n bne 1b\n"
                     MT_DOT4_OPERANDS);
    /* clang-format on */
  }
  r->x = xp, r->w0 = w0, r->w1 = w1, r->w2 = w2, r->w3 = w3;
  r->a0 = a0, r->a1 = a1, r->a2 = a2, r->a3 = a3;
  return n & 3u;
}
#undef MT_DOT4_STEP
#undef MT_DOT4_OPERANDS

/* The asm of mt_dot2x2_dsp: one step, and its operands (the names of its locals). */
/* clang-format off */
#define MT_DOT2X2_STEP /* 4 bytes: rows w0, w1 unpacked once, x1 then x0 against both */      \
  "ldr %[t1], [%[w], %[d]]\n ldr %[t0], [%[w]], #4\n sxtb16 %[t2], %[t0]\n"                    \
  "sxtb16 %[t0], %[t0], ror #8\n sxtb16 %[t3], %[t1]\n sxtb16 %[t1], %[t1], ror #8\n"          \
  "ldr %[t4], [%[x], %[d]]\n sxtb16 %[t5], %[t4]\n sxtb16 %[t4], %[t4], ror #8\n"              \
  "smlad %[a2], %[t2], %[t5], %[a2]\n smlad %[a2], %[t0], %[t4], %[a2]\n"                       \
  "smlad %[a3], %[t3], %[t5], %[a3]\n smlad %[a3], %[t1], %[t4], %[a3]\n"                       \
  "ldr %[t4], [%[x]], #4\n sxtb16 %[t5], %[t4]\n sxtb16 %[t4], %[t4], ror #8\n"                \
  "smlad %[a0], %[t2], %[t5], %[a0]\n smlad %[a0], %[t0], %[t4], %[a0]\n"                       \
  "smlad %[a1], %[t3], %[t5], %[a1]\n smlad %[a1], %[t1], %[t4], %[a1]\n"
#define MT_DOT2X2_OPERANDS                                                                      \
  : [x] "+r"(xp), [w] "+r"(wp), [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),    \
    [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),            \
    [t5] "=&r"(t5)                                                                              \
  : [d] "r"(d), [end] "r"(x_end)                                                                \
  : "cc", "memory"
/* clang-format on */

/* Two pixels against two weight rows over the first n & ~3 bytes of one run (n >= 4): the
 * pixels at x0 and x0 + d, the rows at w0 and w0 + d; a[2 * p + j] += pixel p . row j. Per 4
 * bytes 4 LDR, 8 SXTB16, 8 SMLAD; 14 registers in all. Returns n & ~3. */
static MT_ALWAYS_INLINE uint32_t mt_dot2x2_dsp(const int8_t *x0, const int8_t *w0, int32_t d,
                                               uint32_t n, uint32_t a[4])
{
  const int8_t *xp = x0, *wp = w0, *const x_end = x0 + (n & ~3u);
  uint32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], t0, t1, t2, t3, t4, t5;
  if (n & 4u) { /* an odd step first, then two per loop pass */
    __asm__ volatile(MT_DOT2X2_STEP MT_DOT2X2_OPERANDS);
  }
  if (xp != x_end) {
    /* clang-format off */
    __asm__ volatile("1: " MT_DOT2X2_STEP MT_DOT2X2_STEP "cmp %[x], %[end]\n bne 1b\n"
                     MT_DOT2X2_OPERANDS);
    /* clang-format on */
  }
  a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
  return n & ~3u;
}
#undef MT_DOT2X2_STEP
#undef MT_DOT2X2_OPERANDS
#endif /* MT_DSP && !MT_MVE */

#endif /* MT_KERNEL_MAC_DSP_H */
